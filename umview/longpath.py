"""The monitor's own file operations on paths of any length.

A path the view shows may be up to PATH_MAX bytes, relative to a directory
that is itself deep; the real path a mount makes of it (a layer's upper
directory in front of it) is longer still, and the kernel refuses a path
string of PATH_MAX bytes or more (ENAMETOOLONG). These functions take such
paths too: a path shorter than PATH_MAX goes to the os function as it is (a
length check is all they add); a longer one is reached from an O_PATH fd of
its directory, opened piece by piece (each piece shorter than PATH_MAX, cut
at a "/", from the directory the previous one opened), and the call is made
relative to that fd. Calls that take no dir_fd (the xattr calls) name the
file as /proc/self/fd/N/NAME.

What the process's calls on such paths need is Call.run_long_paths
(umview/engine.py), which does the same in the process.
"""
import contextlib
import errno
import os
import shutil
import stat

PATH_MAX = 4096
#: the longest piece opened at once
_PIECE = 4000
_DIR = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


def open_dir(path, flags=_DIR):
    """An fd (flags: O_PATH by default) of the directory path, of any
    length; symlinks on the way are followed, as a lookup of it would."""
    if len(path) < PATH_MAX:
        return os.open(path, flags)
    fd = None
    try:
        while len(path) >= _PIECE:
            cut = path.rfind(b"/", 1, _PIECE)
            if cut < 0:
                raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG))  # a name of 4000 bytes
            new = os.open(path[:cut], _DIR, dir_fd=fd)
            if fd is not None:
                os.close(fd)
            fd = new
            path = path[cut + 1:].lstrip(b"/") or b"."
        new = os.open(path, flags, dir_fd=fd)
    finally:
        if fd is not None:
            os.close(fd)
    return new


@contextlib.contextmanager
def at(path):
    """(dir_fd, name) to reach path by: (None, path) when it is shorter
    than PATH_MAX, else an O_PATH fd of its directory (closed after the
    block) and its last component (with a trailing "/" kept)."""
    if len(path) < PATH_MAX:
        yield None, path
        return
    base = path.rstrip(b"/")
    head, _, name = base.rpartition(b"/")
    fd = open_dir(head or b"/")
    try:
        yield fd, name + path[len(base):]
    finally:
        os.close(fd)


def lstat(path):
    with at(path) as (fd, name):
        return os.stat(name, dir_fd=fd, follow_symlinks=False)


def stat_(path):
    with at(path) as (fd, name):
        return os.stat(name, dir_fd=fd)


def lexists(path):
    try:
        lstat(path)
    except OSError:
        return False
    return True


def isdir(path):
    try:
        return stat.S_ISDIR(stat_(path).st_mode)
    except OSError:
        return False


def islink(path):
    try:
        return stat.S_ISLNK(lstat(path).st_mode)
    except OSError:
        return False


def access(path, mode, follow_symlinks=True):
    with at(path) as (fd, name):
        return os.access(name, mode, dir_fd=fd, follow_symlinks=follow_symlinks)


def unlink(path):
    with at(path) as (fd, name):
        os.unlink(name, dir_fd=fd)


def rmtree(path):
    with at(path) as (fd, name):
        shutil.rmtree(name, dir_fd=fd)


def readlink(path):
    with at(path) as (fd, name):
        return os.readlink(name, dir_fd=fd)


def symlink(target, path):
    with at(path) as (fd, name):
        os.symlink(target, name, dir_fd=fd)


def mknod(path, mode, device=0):
    with at(path) as (fd, name):
        os.mknod(name, mode, device, dir_fd=fd)


def chmod(path, mode):
    with at(path) as (fd, name):
        os.chmod(name, mode, dir_fd=fd)


def open_(path, flags, mode=0o777):
    with at(path) as (fd, name):
        return os.open(name, flags, mode, dir_fd=fd)


def open_regular(path, flags=os.O_RDONLY, devices=False):
    """An fd (flags, close-on-exec) of the regular file path, to read what
    the view names (a script's #! line, an ELF header, a lower file to copy
    up, an image): OSError EACCES, as an exec answers, for anything else.
    The monitor must never wait on a file of the view: an open of a FIFO
    waits for a writer, a device's open may act or wait, so the file is
    looked up O_PATH, checked, and reopened through its fd, which keeps the
    inode checked (a swap of the name meanwhile changes nothing). With
    devices, a block device is taken too (an image on a disk)."""
    pfd = open_(path, os.O_PATH | os.O_CLOEXEC)
    try:
        mode = os.fstat(pfd).st_mode
        if not (stat.S_ISREG(mode) or (devices and stat.S_ISBLK(mode))):
            raise OSError(errno.EACCES, "not a regular file", path)
        return os.open(f"/proc/self/fd/{pfd}", flags | os.O_CLOEXEC | os.O_NOCTTY)
    finally:
        os.close(pfd)


@contextlib.contextmanager
def scandir(path):
    """os.scandir of a directory of any length (a context manager): its
    entries' stat() works, however long the path and a name make."""
    if len(path) + 256 < PATH_MAX:
        with os.scandir(path) as it:
            yield it
        return
    fd = open_dir(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with os.scandir(fd) as it:
            yield (_Entry(e) for e in it)
    finally:
        os.close(fd)


class _Entry:
    """A DirEntry of os.scandir(fd), whose names are str, with its name as
    bytes (as os.scandir of a bytes path gives it)."""

    __slots__ = ("entry", "name")

    def __init__(self, entry):
        self.entry, self.name = entry, os.fsencode(entry.name)

    def __getattr__(self, attr):
        return getattr(self.entry, attr)


def listdir(path):
    with scandir(path) as it:
        return [e.name for e in it]


@contextlib.contextmanager
def xattr_path(path):
    """A path of path's file shorter than PATH_MAX, for the calls that take
    no dir_fd (the xattr family): the path, or /proc/self/fd/N/NAME."""
    with at(path) as (fd, name):
        yield name if fd is None else b"/proc/self/fd/%d/%s" % (fd, name)
