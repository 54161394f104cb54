"""umview: a partial virtual machine monitor for Linux processes.

The public engine API (see docs/engines.md):

    from umview import Engine, Monitor, CONTINUE, CONTINUE_AFTER, Skip
"""
from umview.engine import CONTINUE, CONTINUE_AFTER, Call, Engine, Skip

__all__ = ["CONTINUE", "CONTINUE_AFTER", "Call", "Engine", "Monitor", "Skip", "PATH_SYSCALLS"]


def __getattr__(name):
    # the monitor loads the C core, the syscall table costs milliseconds:
    # import them only when asked for
    if name == "Monitor":
        from umview.monitor import Monitor

        return Monitor
    if name == "PATH_SYSCALLS":
        from umview.syscalls import PATH_SYSCALLS

        return PATH_SYSCALLS
    raise AttributeError(name)
