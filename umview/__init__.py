"""umview: a partial virtual machine monitor for Linux processes.

The public engine API (see docs/engines.md):

    from umview import Engine, Monitor, CONTINUE, CONTINUE_AFTER, Skip
    from umview import calls, PATH_SYSCALLS  # the calls of a class of the table, every path call
"""
__all__ = ["CONTINUE", "CONTINUE_AFTER", "Call", "Engine", "Monitor", "Skip", "PATH_SYSCALLS", "calls"]


def __getattr__(name):
    # the engine API and the monitor load the C core, the syscall table costs
    # milliseconds: import them only when asked for (the console scripts and
    # the pytest plugin, which import this package, need none of them)
    if name in ("CONTINUE", "CONTINUE_AFTER", "Call", "Engine", "Skip"):
        from umview import engine

        return getattr(engine, name)
    if name == "Monitor":
        from umview.monitor import Monitor

        return Monitor
    if name in ("PATH_SYSCALLS", "calls"):
        from umview import syscalls

        return getattr(syscalls, name)
    raise AttributeError(name)
