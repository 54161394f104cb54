"""umview: a partial virtual machine monitor for Linux processes.

The public engine API (see docs/writing-an-engine.md):

    from umview import Engine, Monitor, CONTINUE, CONTINUE_AFTER, Skip
"""
from umview.engine import CONTINUE, CONTINUE_AFTER, Call, Engine, Skip

__all__ = ["CONTINUE", "CONTINUE_AFTER", "Call", "Engine", "Monitor", "Skip", "PATH_SYSCALLS"]


def __getattr__(name):
    # the monitor loads the C core: import it only when asked for
    if name in ("Monitor", "PATH_SYSCALLS"):
        from umview import monitor

        return getattr(monitor, name)
    raise AttributeError(name)
