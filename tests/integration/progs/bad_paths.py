"""Path system calls with bad path arguments; prints one line per call and
its outcome (ok or the errno name), to be compared with a native run.

Calls go through syscall(2) directly, so libc checks nothing on the way.
"""
import ctypes
import errno
import mmap
import os

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

AT_FDCWD = -100
NR = {"open": 2, "openat": 257, "mkdirat": 258, "newfstatat": 262, "unlinkat": 263,
      "renameat": 264, "readlinkat": 267, "faccessat": 269}
PAGE = mmap.PAGESIZE
statbuf = ctypes.create_string_buffer(256)
linkbuf = ctypes.create_string_buffer(256)
elsewhere = ctypes.create_string_buffer(b"/nonexistent-dir/x")


def sc(name, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) for a in args])
    if r < 0:
        return errno.errorcode[ctypes.get_errno()]
    if name in ("open", "openat"):
        os.close(r)
    return "ok"


def calls(p, dirfd=AT_FDCWD):
    return [
        ("open", sc("open", p, os.O_RDONLY)),
        ("openat", sc("openat", dirfd, p, os.O_RDONLY)),
        ("openat-creat", sc("openat", dirfd, p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)),
        ("unlinkat", sc("unlinkat", dirfd, p, 0)),
        ("mkdirat", sc("mkdirat", dirfd, p, 0o700)),
        ("newfstatat", sc("newfstatat", dirfd, p, ctypes.addressof(statbuf), 0)),
        ("readlinkat", sc("readlinkat", dirfd, p, ctypes.addressof(linkbuf), 256)),
        ("faccessat", sc("faccessat", dirfd, p, os.R_OK)),
        ("renameat-from", sc("renameat", dirfd, p, AT_FDCWD, ctypes.addressof(elsewhere))),
        ("renameat-to", sc("renameat", AT_FDCWD, ctypes.addressof(elsewhere), dirfd, p)),
    ]


# two pages, the second unmapped again; the first full of non-NUL bytes
two = libc.mmap(None, 2 * PAGE, mmap.PROT_READ | mmap.PROT_WRITE,
                mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
assert libc.munmap(two + PAGE, PAGE) == 0
ctypes.memset(two, ord("a"), PAGE)


def path(length):
    """An absolute path of `length` bytes, components short, not existing."""
    p = (b"/nonexistent" + b"/d" * length)[:length]
    return ctypes.create_string_buffer(p)


keep = {n: path(n) for n in (4095, 4096, 1 << 20)}
long_name = ctypes.create_string_buffer(b"/tmp/" + b"n" * 300)

cases = {
    "pointer 1": 1,
    "null": 0,
    "kernel address": 0xffffffffff600000 - 0x1000,
    "unterminated at the end of a page": two,
    "unterminated from the middle of a page": two + PAGE // 2,
    "last 3 bytes of a page": two + PAGE - 3,
    "unmapped page": two + PAGE,
    "path of 4095 bytes": ctypes.addressof(keep[4095]),
    "path of 4096 bytes": ctypes.addressof(keep[4096]),
    "path of 1 MiB": ctypes.addressof(keep[1 << 20]),
    "component of 300 bytes": ctypes.addressof(long_name),
}
for label, p in cases.items():
    for name, result in calls(p):
        print(f"{label}: {name}: {result}")

# good relative path, bad directory fds
rel = ctypes.create_string_buffer(b"x")
r, w = os.pipe()
fd_file = os.open("/etc/passwd", os.O_RDONLY)
for label, dirfd in {"closed dirfd": 9999, "negative dirfd": -5, "pipe dirfd": r,
                     "file dirfd": fd_file}.items():
    for name, result in calls(ctypes.addressof(rel), dirfd):
        if name != "open":
            print(f"{label}: {name}: {result}")
