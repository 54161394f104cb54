"""viewfs mode ro: which errno a call that would write gets (the kernel's
for a name missing or already there, else EROFS; 0 where a read-only file
system lets it through), table-driven, no tracee."""
import errno
import os
import pytest

from umview.engine import Call
from umview.modules.viewfs import readonly
from umview.syscalls import spec

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
    ("rmdir", 0, "dir/.", errno.EINVAL),       # the last component first
    ("rmdir", 0, "dir/..", errno.ENOTEMPTY),
    ("unlink", 0, "missing/x", errno.ENOENT),  # the walk to the parent first
    ("mkdir", 0, "file/x", errno.ENOTDIR),
    ("mknod", 0, "missing/", errno.ENOENT),    # "name/" is not made
    ("openat", O_WRONLY | O_CREAT, "file/", errno.EISDIR),
    ("truncate", 0, "dir", errno.EISDIR),
    ("truncate", 0, "fifo", errno.EINVAL),
]


@pytest.mark.parametrize("name,flags,path,err", CASES)
def test_a_call_that_would_write_gets_the_errno_a_read_only_mount_gives(tree, name, flags, path, err):
    call = Call(1, "x86_64", 0, name, 0, [0] * 6, 0, 0x7000_0000, spec(name))
    reals = {0: os.fsencode(tree) + b"/" + path.encode()}
    if name == "rename":
        reals[1] = os.fsencode(tree / "other")
    assert readonly.refusal(call, reals, flags if name in ("openat",) else
                            O_CREAT | O_WRONLY | O_TRUNC if name == "creat" else None) == err
