"""The kernel's rules for calls that make, remove and rename names: ".", ".."
and "/" as last components, trailing slashes, missing or non-directory
components before "..", hard links, names of NAME_MAX bytes. Run natively
and in a view, over the same trees; the outputs must be equal.

    names.py setup BASE       make one fresh tree per case under BASE
    names.py run BASE         run each case in its tree, print the errno of
                              each call and then what the tree holds

Cases are independent: a case that wrongly removes or moves something
changes only its own tree (and its listing shows it). Paths are relative
to the case's directory, or absolute through it (named "abs:").
"""
import errno
import os
import stat
import sys

NAME_MAX = 255
PATH_MAX = 4096
L255 = "n" * NAME_MAX
#: a chain of directories, and names in it that make paths of PATH_MAX - 1
#: bytes relative to the case's directory (more from the root)
DEEP = "/".join(["c" * 250] * 16)
TAIL = PATH_MAX - 1 - len(DEEP) - 1
FILE = DEEP + "/" + "x" * TAIL
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
AT_REMOVEDIR = 0x200


def tree(top, deep=False):
    """Every case starts from: d/sub/, d/file, f, g (a hard link of f),
    e/ (empty), s -> d, a name of 255 bytes; with deep, also DEEP and FILE
    (made from directory fds: their paths from / exceed PATH_MAX)."""
    os.makedirs(os.path.join(top, "d", "sub"))
    os.makedirs(os.path.join(top, "e"))
    for name in ("d/file", "f", L255):
        with open(os.path.join(top, name), "w") as f:
            f.write(name[:8] + "\n")
    os.link(os.path.join(top, "f"), os.path.join(top, "g"))
    os.symlink("d", os.path.join(top, "s"))
    if deep:
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
        for c in DEEP.split("/"):
            os.mkdir(c, dir_fd=fd)
            new = os.open(c, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = new
        with open(os.open(FILE.rsplit("/", 1)[1], os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd), "w") as f:
            f.write("deep\n")
        os.close(fd)


def _renameat2(old, new, flags):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    r = libc.renameat2(-100, os.fsencode(old), -100, os.fsencode(new), flags)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def _bind(path):
    import socket

    with socket.socket(socket.AF_UNIX) as s:
        s.bind(path)


def _libc(name, *args):
    """A libc call with raw arguments (NULL paths, UTIME_OMIT), as the
    kernel gets them."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, name)(*args) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def _omit_both(path):
    import ctypes

    omit = (ctypes.c_long * 4)(0, (1 << 30) - 2, 0, (1 << 30) - 2)
    _libc("utimensat", -100, path, omit, 0)


def _open(path, flags):
    os.close(os.open(path, flags, 0o644))


CASES = {
    # the last component "." or ".." of a call that changes names
    "rmdir dot": lambda: os.rmdir("d/sub/."),
    "rmdir dotdot": lambda: os.rmdir("d/sub/.."),
    "rmdir dot slash": lambda: os.rmdir("d/sub/./"),
    "rmdir abs dot": lambda: os.rmdir(os.getcwd() + "/d/sub/."),
    "unlinkat removedir dot": lambda: os.rmdir("d/.", dir_fd=os.open(".", os.O_RDONLY)),
    "rename dot": lambda: os.rename("d/sub/.", "x"),
    "rename dotdot": lambda: os.rename("d/sub/..", "x"),
    "rename to dot": lambda: os.rename("f", "d/."),
    "rename to dotdot": lambda: os.rename("f", "d/sub/.."),
    "rename noreplace to dot": lambda: _renameat2("f", "d/.", RENAME_NOREPLACE),
    "rename bad flags": lambda: _renameat2("d/sub/.", "x", RENAME_NOREPLACE | RENAME_EXCHANGE),
    "mkdir dot": lambda: os.mkdir("d/."),
    "mkdir dotdot": lambda: os.mkdir("d/sub/.."),
    "unlink dot": lambda: os.unlink("d/."),
    "link to dot": lambda: os.link("f", "d/."),
    "symlink to dotdot": lambda: os.symlink("f", "d/.."),
    "mkfifo dot": lambda: os.mkfifo("e/."),
    "open creat dot": lambda: _open("d/.", os.O_CREAT | os.O_WRONLY),
    # "." and ".." after what is not a directory
    "stat missing dotdot": lambda: os.stat("nope/.."),
    "stat file dotdot": lambda: os.stat("f/.."),
    "stat file dot": lambda: os.stat("f/."),
    "mkdir missing dotdot": lambda: os.mkdir("nope/../n"),
    "rmdir file dotdot": lambda: os.rmdir("f/../d/sub"),
    "unlink through dotdot": lambda: os.unlink("d/sub/../file"),
    "stat up and down": lambda: os.stat("d/sub/../../f").st_size,
    "rename through dotdot": lambda: os.rename("d/sub/../file", "e/../moved"),
    # trailing slashes
    "stat file slash": lambda: os.stat("f/"),
    "unlink file slash": lambda: os.unlink("f/"),
    "unlink dir slash": lambda: os.unlink("d/"),
    "rmdir slash": lambda: os.rmdir("e/"),
    "mkdir slash": lambda: os.mkdir("new/"),
    "mkfifo slash": lambda: os.mkfifo("x/"),
    "mkfifo existing slash": lambda: os.mkfifo("f/"),
    "symlink slash": lambda: os.symlink("f", "x/"),
    "open creat file slash": lambda: _open("f/", os.O_CREAT | os.O_WRONLY),
    "open creat new slash": lambda: _open("new/", os.O_CREAT | os.O_WRONLY),
    "open write dir slash": lambda: _open("d/", os.O_WRONLY),
    "open read file slash": lambda: _open("f/", os.O_RDONLY),
    "chmod file slash": lambda: os.chmod("f/", 0o600),
    "truncate file slash": lambda: os.truncate("f/", 0),
    "rename file slash": lambda: os.rename("f/", "x"),
    "rename to slash": lambda: os.rename("f", "x/"),
    "rename dirs slashes": lambda: os.rename("e/", "x/"),
    "link file slash": lambda: os.link("f/", "x"),
    "link to slash": lambda: os.link("f", "x/"),
    # rename's own order of checks
    "rename into itself": lambda: os.rename("d", "d/sub/x"),
    "rename over ancestor": lambda: os.rename("d/sub", "d"),
    "rename hard links": lambda: os.rename("f", "g"),
    "rename same": lambda: os.rename("f", "f"),
    "rename dir over file": lambda: os.rename("e", "f"),
    "rename file over dir": lambda: os.rename("f", "e"),
    "rename over full dir": lambda: os.rename("e", "d"),
    "rename noreplace": lambda: _renameat2("f", "d/file", RENAME_NOREPLACE),
    "rename exchange missing": lambda: _renameat2("f", "x", RENAME_EXCHANGE),
    "rename exchange": lambda: _renameat2("f", "d/file", RENAME_EXCHANGE),
    "rename dir over empty dir": lambda: os.rename("d/sub", "e"),
    "mkdir mode 0": lambda: (os.mkdir("z", 0), oct(os.stat("z").st_mode & 0o777)),
    # AF_UNIX sockets: made by bind(2), relative to the cwd
    "bind relative": lambda: _bind("d/sk"),
    "bind in cwd": lambda: (os.chdir("d/sub"), _bind("sk")),
    "bind existing": lambda: _bind("f"),
    "bind long relative": lambda: (os.chdir("d/sub"), _bind("s" * 100)),  # longer than sun_path from /
    # what the kernel checks before the names
    "truncate negative": lambda: os.truncate("nope", -1),
    "utimensat omits both": lambda: _omit_both(b"nope"),
    "rename to null": lambda: _libc("rename", b"f", None),
    "link missing to null": lambda: _libc("link", b"nope", None),
    "symlink null target": lambda: _libc("symlink", None, b"x"),
    # link
    "link dir": lambda: os.link("d", "x"),
    "link existing": lambda: os.link("f", "d/file"),
    "link missing parent": lambda: os.link("f", "nope/x"),
    # removing or renaming a name that is not there: ENOENT (ENAMETOOLONG
    # past NAME_MAX) on a writable file system, EROFS on a read-only one
    # (do_rmdir, do_unlinkat and do_renameat2 check the mount first)
    "unlink missing": lambda: os.unlink("nope"),
    "rmdir missing": lambda: os.rmdir("d/nope"),
    "rename missing": lambda: os.rename("nope", "x"),
    "rename missing noreplace": lambda: _renameat2("d/nope", "x", RENAME_NOREPLACE),
    "unlink missing too long": lambda: os.unlink(L255 + "x"),
    "rmdir missing too long": lambda: os.rmdir("d/" + L255 + "x"),
    "rename missing too long": lambda: os.rename(L255 + "x", "x"),
    "link missing": lambda: os.link("nope", "x"),
    # the names of NAME_MAX bytes
    "long unlink": lambda: os.unlink(L255),
    "long rename": lambda: os.rename(L255, "d/" + L255),
    "long chmod": lambda: os.chmod(L255, 0o600),
    "long mkdir": lambda: os.mkdir("e/" + L255),
    "long too long": lambda: _open(L255 + "x", os.O_CREAT | os.O_WRONLY),
    "long remade": lambda: (os.unlink(L255), _open(L255, os.O_CREAT | os.O_WRONLY)),
    # paths of PATH_MAX - 1 bytes (and one more: ENAMETOOLONG), relative
    "path max stat": lambda: os.stat(FILE).st_size,
    "path max unlink": lambda: (os.unlink(FILE), os.stat(FILE)),
    "path max rename": lambda: os.rename(FILE, DEEP + "/" + "y" * TAIL),
    "path max chmod": lambda: os.chmod(FILE, 0o600),
    "path max write": lambda: _open(FILE, os.O_WRONLY | os.O_APPEND),
    "path max mkdir rmdir": lambda: (os.mkdir(DEEP + "/" + "m" * TAIL), os.rmdir(DEEP + "/" + "m" * TAIL)),
    "path max symlink": lambda: (os.symlink("x" * TAIL, DEEP + "/" + "s" * TAIL), os.readlink(DEEP + "/" + "s" * TAIL)),
    "path max link": lambda: os.link(FILE, DEEP + "/" + "l" * TAIL),
    "path max too long": lambda: _open(FILE + "x", os.O_CREAT | os.O_WRONLY),
    "path max dir removed": lambda: (os.unlink(FILE), os.rmdir(DEEP), os.listdir(DEEP.rsplit("/", 1)[0])),
    "path max chdir": lambda: (os.chdir(DEEP), os.unlink(FILE.rsplit("/", 1)[1]), os.listdir(".")),
    # a directory removed and made again shows none of what it held
    "dir remade": lambda: (os.unlink("d/file"), os.rmdir("d/sub"), os.rmdir("d"), os.mkdir("d"), os.listdir("d")),
    "dir renamed over removed": lambda: (os.unlink("d/file"), os.rmdir("d/sub"), os.rmdir("d"),
                                         os.rename("e", "d"), os.listdir("d")),
}


# with NAMES_OTHER, a writable directory on another mount: a rename between
# two mounts is EXDEV once both parents are found (before the lookup of the
# old name); a link looks the old name up first
OTHER = os.environ.get("NAMES_OTHER", "")


def _made(path):
    with open(path, "w") as f:
        f.write("other\n")
    return path


ACROSS = {
    "across rename to": lambda: os.rename("f", OTHER + "/rename-to"),
    "across rename missing to": lambda: os.rename("nope", OTHER + "/rename-missing-to"),
    "across rename missing parent to": lambda: os.rename("f", OTHER + "/nope/x"),
    "across rename from": lambda: os.rename(_made(OTHER + "/rename-from"), "x"),
    "across rename missing from": lambda: os.rename(OTHER + "/nope", "x"),
    "across link to": lambda: os.link("f", OTHER + "/link-to"),
    "across link missing to": lambda: os.link("nope", OTHER + "/link-missing-to"),
    "across link file slash to": lambda: os.link("f/", OTHER + "/link-slash-to"),
    "across link missing from": lambda: os.link(OTHER + "/nope", "x"),
}


# devices: run apart (names.py run BASE CASE...), where making one is refused
# natively too (no CAP_MKNOD), to compare the order of the refusals
DEVICES = {
    "mknod device": lambda: os.mknod("x", stat.S_IFBLK | 0o644, os.makedev(1, 2)),
    "mknod device existing": lambda: os.mknod("f", stat.S_IFCHR | 0o644, os.makedev(1, 2)),
    "mknod device in a file": lambda: os.mknod("f/x", stat.S_IFBLK | 0o644, os.makedev(1, 2)),
    "mknod device missing dir": lambda: os.mknod("nope/x", stat.S_IFCHR | 0o644, os.makedev(1, 2)),
    "mknod device slash": lambda: os.mknod("x/", stat.S_IFBLK | 0o644, os.makedev(1, 2)),
    "mknod device dot": lambda: os.mknod("d/.", stat.S_IFCHR | 0o644, os.makedev(1, 2)),
    "mknod device too long": lambda: os.mknod(L255 + "x", stat.S_IFBLK | 0o644, os.makedev(1, 2)),
    "mknod device path max": lambda: os.mknod(FILE + "x", stat.S_IFBLK | 0o644, os.makedev(1, 2)),
}


def listing(top):
    """What the tree holds: a walk from directory fds (paths beyond
    PATH_MAX too); long paths shown by their length."""
    out = []
    for dirpath, dirnames, filenames, dirfd in os.fwalk(top):
        dirnames.sort()
        for n in sorted(dirnames + filenames):
            st = os.lstat(n, dir_fd=dirfd)
            kind = stat.S_IFMT(st.st_mode)
            what = {stat.S_IFDIR: "dir", stat.S_IFREG: "file", stat.S_IFLNK: "link", stat.S_IFIFO: "fifo",
                    stat.S_IFSOCK: "socket"}.get(kind, "?")
            if kind == stat.S_IFREG:
                with open(os.open(n, os.O_RDONLY, dir_fd=dirfd)) as f:
                    what += f" {f.read().strip()[:8]!r} mode={stat.S_IMODE(st.st_mode):o}"
            rel = os.path.join(os.path.relpath(dirpath, top), n)
            out.append(f"{rel[:40] if len(rel) < 80 else f'<{len(rel)} bytes>/{n[:8]}'} {what}")
    return out


def result(fn):
    try:
        r = fn()
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return "ok" if r is None or isinstance(r, tuple) and r[-1] is None else f"ok {r!r}"


def main(argv):
    what, base = argv[1], argv[2]
    cases = argv[3:] or list(CASES) + (list(ACROSS) if OTHER else [])
    for i, name in enumerate(cases):
        top = os.path.join(base, str(i))
        if what == "setup":
            tree(top, deep="path max" in name)
            continue
        os.chdir(top)
        print(f"{name}: {result({**CASES, **DEVICES, **ACROSS}[name])}")
        os.chdir(base)
        try:
            lines = listing(top)
        except OSError as exc:  # a file system's own failure (fuse2fs)
            lines = [f"listing: {errno.errorcode.get(exc.errno, exc.errno)}"]
        for line in lines:
            print("   ", line)


if __name__ == "__main__":
    main(sys.argv)
