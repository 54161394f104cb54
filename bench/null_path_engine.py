"""An engine that claims every path-carrying system call and virtualizes none.

It measures the fast-path cost of umview: with this engine loaded the seccomp
filter traps the path calls (open, openat, newfstatat, readlink, execve, ...),
the C core stops the process, reads the path, resolves it against the
process's cwd or the call's dirfd and compares it with the prefix below. No
path ever lies under that prefix, so the C core resumes the call itself
(PTRACE_CONT, no exit stop) and Python is never entered for a path call.

    umview --engine bench/null_path_engine.py:NullPathEngine -- find /usr
"""
from umview import CONTINUE, Engine
from umview.syscalls import PATH_SYSCALLS

NEVER_USED_PREFIX = "/nonexistent-umview-bench"


class NullPathEngine(Engine):
    name = "null-path"
    description = "claims every path syscall under a prefix nothing uses: pure fast-path cost"
    path_syscalls = PATH_SYSCALLS
    prefixes = (NEVER_USED_PREFIX,)

    def enter(self, call):  # reached only for a path under the prefix: never
        return CONTINUE
