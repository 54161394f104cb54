"""fs/namei.c's checks of a path, made by the monitor's lookups.

Where a view answers a call itself instead of letting the kernel make it
(a read-only view's EROFS, the guard's EPERM for a device), the answer
comes only after the checks the kernel makes first: the walk to the
parent, the last component (".", "..", "/"), whether the name is there
already, a trailing "/". These functions make them on a real path as the
kernel would take it (as written: dots and trailing slashes kept, made
absolute), by lookups that change nothing, with the monitor's credentials
(a search permission the caller lacks is not seen).
"""
import errno
import stat

from umview import longpath

NAME_MAX = 255


def split(real):
    """(parent, last component, trailing "/") of a path as path_parentat
    splits it: last is b"." or b".." or a name, b"" for "/"."""
    base = real.rstrip(b"/") or b"/"
    trailing = len(real) > len(base)
    if base == b"/":
        return b"/", b"", trailing
    head, _, last = base.rpartition(b"/")
    return head or b"/", last, trailing


def last_type(real):
    """"dot", "dotdot", "root" (LAST_DOT, LAST_DOTDOT, LAST_ROOT) or "norm"."""
    return {b".": "dot", b"..": "dotdot", b"": "root"}.get(split(real)[1], "norm")


def lookup(path, follow=True, directory=False):
    """(errno of a lookup of path, 0 if found; its stat or None)."""
    try:
        st = longpath.stat_(path) if follow else longpath.lstat(path)
    except OSError as exc:
        return exc.errno, None
    if directory and not stat.S_ISDIR(st.st_mode):
        return errno.ENOTDIR, st
    return 0, st


def old_name_error(path, follow):
    """do_linkat's lookup of the old name (0 if found): followed when asked
    (AT_SYMLINK_FOLLOW) or when a trailing "/" asks for a directory."""
    trailing = split(path)[2]
    return lookup(path, follow=follow or trailing, directory=trailing)[0]


def parent_error(real):
    """The errno of the walk to the parent of real (filename_parentat), 0
    if it is a directory. The last name is not looked up: its length is
    the file system's to refuse, when it looks it up."""
    return lookup(split(real)[0], directory=True)[0]


def create_error(real, want_dir=False):
    """What filename_create says before a name is made at real: the walk,
    EEXIST for ".", ".." or "/" and for a name that is there, ENOENT for
    "name/" of anything but a directory; 0 if it would make it."""
    err = parent_error(real)
    if err:
        return err
    if last_type(real) != "norm":
        return errno.EEXIST
    if len(split(real)[1]) > NAME_MAX:
        return errno.ENAMETOOLONG  # the lookup of the name (lookup_one_qstr_excl)
    if longpath.lexists(real.rstrip(b"/")):
        return errno.EEXIST
    if split(real)[2] and not want_dir:
        return errno.ENOENT
    return 0
