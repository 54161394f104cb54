"""umview.longpath: the monitor's own file operations on paths of PATH_MAX
bytes and more (no tracee): the same answers as the os functions give
through directory fds."""
import errno
import os
import stat

import pytest

from umview import longpath


@pytest.fixture
def deep(tmp_path):
    """A directory whose path is longer than PATH_MAX, made from fds."""
    fd = os.open(tmp_path, os.O_RDONLY)
    comps = [b"d" * 250] * 18
    for c in comps:
        os.mkdir(c, dir_fd=fd)
        new = os.open(c, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = new
    os.close(fd)
    path = os.fsencode(tmp_path) + b"/" + b"/".join(comps)
    assert len(path) > longpath.PATH_MAX
    yield path
    fd = os.open(tmp_path, os.O_RDONLY)
    longpath.rmtree(os.fsencode(tmp_path) + b"/" + comps[0])
    os.close(fd)


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def test_files_beyond_path_max_are_made_seen_and_removed(deep):
    before = open_fds()
    f = deep + b"/f"
    with pytest.raises(OSError) as exc:
        os.lstat(f)
    assert exc.value.errno == errno.ENAMETOOLONG  # what the os functions say
    fd = longpath.open_(f, os.O_CREAT | os.O_WRONLY, 0o640)
    os.write(fd, b"data")
    os.close(fd)
    assert longpath.lstat(f).st_size == 4 and longpath.lexists(f) and not longpath.isdir(f)
    longpath.chmod(f, 0o600)
    assert stat.S_IMODE(longpath.stat_(f).st_mode) == 0o600
    longpath.symlink(b"f", deep + b"/l")
    assert longpath.readlink(deep + b"/l") == b"f" and longpath.islink(deep + b"/l")
    longpath.mknod(deep + b"/p", stat.S_IFIFO | 0o600)
    with longpath.scandir(deep) as it:
        entries = {e.name: e.is_file(follow_symlinks=False) for e in it}
    assert entries == {b"f": True, b"l": False, b"p": False}
    assert sorted(longpath.listdir(deep)) == [b"f", b"l", b"p"]
    with longpath.xattr_path(f) as p:
        assert len(p) < longpath.PATH_MAX and os.stat(p).st_size == 4
    for n in (b"f", b"l", b"p"):
        longpath.unlink(deep + b"/" + n)
    assert not longpath.lexists(f) and longpath.isdir(deep)
    assert longpath.access(deep, os.W_OK)
    assert open_fds() == before


def test_a_missing_directory_on_a_long_path_is_the_kernels_enoent(deep):
    with pytest.raises(FileNotFoundError):
        longpath.lstat(deep + b"/missing/f")
    assert not longpath.lexists(deep + b"/missing/f")


def test_short_paths_go_to_the_os_functions_as_they_are(tmp_path):
    p = os.fsencode(tmp_path / "x")
    longpath.mknod(p, stat.S_IFREG | 0o644)
    assert longpath.lstat(p) == os.lstat(p)
    with longpath.at(p) as (fd, name):
        assert (fd, name) == (None, p)
