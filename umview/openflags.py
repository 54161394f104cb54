"""Open flags as the kernel reads them from a process (x86's values, those
of include/uapi/asm-generic/fcntl.h), in one place: every module that looks
at what an open asks for imports them from here and takes the flags from
``Call.open_flags()``.

WRITES is the C core's own mask (core.h UM_O_WRITES, which the filter and
the decision use): an open writes if it asks for O_WRONLY, O_RDWR, O_CREAT
or O_TRUNC. O_TMPFILE carries a write mode, so it is caught by that too.
"""
from umview import core

O_ACCMODE, O_RDONLY, O_WRONLY, O_RDWR = 0o3, 0o0, 0o1, 0o2
O_CREAT, O_EXCL, O_TRUNC, O_APPEND = 0o100, 0o200, 0o1000, 0o2000
O_DIRECTORY, O_NOFOLLOW, O_CLOEXEC, O_PATH = 0o200000, 0o400000, 0o2000000, 0o10000000
O_TMPFILE = 0o20000000 | O_DIRECTORY
#: what creat(2) opens with
CREAT_FLAGS = O_CREAT | O_WRONLY | O_TRUNC
WRITES = core.lib.UM_O_WRITES


def writes(flags):
    """Does an open with these flags write (or create, or truncate)?"""
    return bool(flags & WRITES)


def is_tmpfile(flags):
    return flags & O_TMPFILE == O_TMPFILE
