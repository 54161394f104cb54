"""viewfs mode ro: which errno a call that would write gets (the kernel's
for a name missing or already there, else EROFS; 0 where a read-only file
system lets it through), table-driven, no tracee."""
import errno
import os
from types import SimpleNamespace

import pytest

from umview.modules.viewfs import ReadOnlyMount

O_WRONLY, O_RDWR, O_CREAT, O_EXCL, O_TRUNC = 0o1, 0o2, 0o100, 0o200, 0o1000


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    return tmp_path


CASES = [
    ("openat", O_WRONLY, "file", errno.EROFS),
    ("openat", O_RDWR | O_TRUNC, "file", errno.EROFS),
    ("openat", O_WRONLY, "missing", errno.ENOENT),
    ("openat", O_WRONLY | O_CREAT, "missing", errno.EROFS),
    ("openat", O_WRONLY | O_CREAT | O_EXCL, "file", errno.EEXIST),
    ("openat", O_CREAT, "file", 0),           # O_CREAT of an existing file, read only
    ("openat", O_WRONLY, "fifo", 0),          # a fifo is written on a read-only mount too
    ("openat", O_WRONLY, "dir", errno.EISDIR),
    ("creat", 0, "file", errno.EROFS),
    ("access", 0, "file", errno.EROFS),
    ("access", 0, "missing", errno.ENOENT),
    ("access", 0, "fifo", 0),
    ("mkdir", 0, "dir", errno.EEXIST),
    ("mkdir", 0, "missing", errno.EROFS),
    ("chmod", 0, "missing", errno.ENOENT),
    ("chmod", 0, "file", errno.EROFS),
    ("unlink", 0, "missing", errno.EROFS),
    ("rename", 0, "file", errno.EROFS),
]


@pytest.mark.parametrize("name,flags,path,err", CASES)
def test_a_call_that_would_write_gets_the_errno_a_read_only_mount_gives(tree, name, flags, path, err):
    call = SimpleNamespace(name=name, flags=flags)
    assert ReadOnlyMount._error(call, os.fsencode(tree / path)) == err
