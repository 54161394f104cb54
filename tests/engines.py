"""Engines the integration tests load with --engine tests/engines.py:CLASS.

Each is as small as the behaviour it provokes. Prefixes come from the
environment so a test can aim an engine at its own temporary directory.
"""
import errno
import os

from umview import CONTINUE, CONTINUE_AFTER, Engine, Skip

#: path calls whose path arguments the C core reads and resolves
CLAIMED_PATH_CALLS = frozenset({
    "open", "openat", "openat2", "creat", "unlink", "unlinkat", "mkdir", "mkdirat",
    "rmdir", "rename", "renameat", "renameat2", "readlink", "readlinkat",
    "newfstatat", "stat", "lstat", "statx", "access", "faccessat", "faccessat2",
    "chdir", "symlink", "symlinkat", "link", "linkat", "truncate", "chmod", "fchmodat",
})


class PassPathsEverywhere(Engine):
    """Claims the common path calls under "/" and passes them all on: every
    such call reaches Python, and must behave exactly as natively."""

    name = "pass-paths"
    path_syscalls = CLAIMED_PATH_CALLS
    prefixes = ("/",)

    def enter(self, call):
        call.paths()  # decode, as a real module would
        return CONTINUE


class RaiseUnderPrefix(Engine):
    """Raises a non-OSError on path calls under $UMVIEW_TEST_RAISE: at entry
    for names starting with "enter", at exit for names starting with "exit"."""

    name = "raiser"
    path_syscalls = frozenset({"open", "openat", "openat2"})

    def __init__(self):
        self.prefixes = (os.environ["UMVIEW_TEST_RAISE"],)

    def enter(self, call):
        base = os.path.basename(call.paths()[0] or b"")
        if base.startswith(b"enter"):
            raise RuntimeError(f"deliberate failure in enter for {base!r}")
        if base.startswith(b"exit"):
            return CONTINUE_AFTER
        return CONTINUE

    def exit(self, call):
        raise RuntimeError("deliberate failure in exit")


class RefuseOpen(Engine):
    """Claims open(2) (not openat) under "/" and refuses it with EPERM."""

    name = "refuse-open"
    path_syscalls = frozenset({"open"})
    prefixes = ("/",)

    def enter(self, call):
        return Skip.errno(errno.EPERM)
