"""Look up and open names below a directory; print what each call gave.

    python3 lookups.py BASE [setuid|landlock]

The output names no path, so that a run on a directory and a run on a
mount of it in a view can be compared line by line (test_move_served.py).
With setuid (as root), the process becomes nobody first; with landlock, it
restricts itself from reading any file first.
"""
import ctypes
import errno
import os
import stat
import sys

base = sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else ""

if mode == "setuid":
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
elif mode == "landlock":
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint64 * 1)(1 << 2)  # handled_access_fs: LANDLOCK_ACCESS_FS_READ_FILE
    fd = libc.syscall(444, attr, ctypes.sizeof(attr), 0)
    if fd < 0 or libc.prctl(38, 1, 0, 0, 0) or libc.syscall(446, fd, 0):
        print("no landlock", errno.errorcode.get(ctypes.get_errno()))
        sys.exit(0)

NAMES = ["f", "d", "d/", "f/", "missing", "f/x", "d/../f", "d/./f", "./d//f", "rel_link", "dir_link/f",
         "abs_link", "private/f", "private", "ro", "exe", "fifo", "d/sub/deep/file"]


def err(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def out(what, name, fn):
    try:
        value = fn(os.path.join(base, name))
    except OSError as e:
        value = err(e)
    print(what, name, value)


def st(s):
    return (stat.filemode(s.st_mode), s.st_size, s.st_ino, s.st_nlink, s.st_uid, s.st_mtime_ns)


def read_open(path, flags=0):
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        return os.read(fd, 64) if not flags & os.O_DIRECTORY else sorted(os.listdir(fd))
    finally:
        os.close(fd)


def cloexec(path):
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.get_inheritable(fd), stat.filemode(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


def opath(path, flags):
    fd = os.open(path, os.O_PATH | flags)
    try:
        s = os.fstat(fd)
        return stat.filemode(s.st_mode), s.st_ino
    finally:
        os.close(fd)


for name in NAMES:
    out("stat", name, lambda p: st(os.stat(p)))
    out("lstat", name, lambda p: st(os.lstat(p)))
    out("readlink", name, os.readlink)
    for m, label in ((os.R_OK, "R"), (os.W_OK, "W"), (os.X_OK, "X"), (os.F_OK, "F")):
        out("access-" + label, name, lambda p: os.access(p, m))
    out("open-nonblock", name, lambda p: read_open(p, os.O_NONBLOCK))
    if name == "fifo":
        continue  # an open without O_NONBLOCK waits for a writer
    out("open", name, read_open)
    out("open-dir", name, lambda p: read_open(p, os.O_DIRECTORY))
    out("open-nofollow", name, lambda p: read_open(p, os.O_NOFOLLOW))
    out("open-cloexec", name, cloexec)
    out("open-path", name, lambda p: opath(p, 0))
    out("open-path-dir", name, lambda p: opath(p, os.O_DIRECTORY))
    out("open-path-nofollow", name, lambda p: opath(p, os.O_NOFOLLOW))
