"""umview.openflags: the open flags every module reads, and C's write mask."""
import os

from umview import core, openflags


def test_the_flags_are_the_kernels():
    # this host is x86_64: its C library's values are the kernel's
    for name in ("O_ACCMODE", "O_RDONLY", "O_WRONLY", "O_RDWR", "O_CREAT", "O_EXCL", "O_TRUNC", "O_APPEND",
                 "O_DIRECTORY", "O_NOFOLLOW", "O_CLOEXEC", "O_PATH", "O_TMPFILE"):
        assert getattr(openflags, name) == getattr(os, name), name


def test_the_write_mask_is_the_c_cores_and_means_write_create_or_truncate():
    assert openflags.WRITES == core.lib.UM_O_WRITES == os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC
    assert not openflags.writes(os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_PATH)
    assert openflags.writes(os.O_TMPFILE | os.O_WRONLY) and openflags.is_tmpfile(os.O_TMPFILE | os.O_RDWR)
    assert openflags.writes(openflags.CREAT_FLAGS)
