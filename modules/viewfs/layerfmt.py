"""The on-disk format of a copy-on-write layer (viewfs merge, cow and mincow
mounts, ``umview --sandbox``), read by the view, ``umview-layer``,
``--report`` and the pytest plugin.

A layer is a directory, the *upper* layer, over a lower tree. It is in
overlayfs's format, in the flavour an unprivileged overlayfs mount uses
(``userxattr``, Documentation/filesystems/overlayfs.rst), which any user can
write since Linux 5.8:

- a name in the upper directory hides the same name below;
- a *whiteout*, a character device 0/0 with the name it hides, stands for a
  lower name the view removed;
- an *opaque* directory, one with the xattr ``user.overlay.opaque`` = ``y``,
  hides everything the lower directory of its name holds (a directory
  removed, then made again, or one renamed over a lower one). Where the
  layer's file system has no user xattrs, such a directory gets a whiteout
  of each lower name instead, which hides the same names.

So the layer's bookkeeping never lengthens a user's name: a name of 255
bytes has its whiteout of 255 bytes, and no temporary name is made beside a
file being copied up (an O_TMPFILE file is linked in once complete). Names
beginning with ``.wh..wh.`` (aufs's prefix for a layer's own files) are the
layer's, not the view's: fakeroot keeps its records in one at the layer's
root.

The layer's root carries ``user.umview.layer`` = ``2`` where it can. A
directory without it that holds ``.wh.NAME`` files is in umview's first
format (aufs's: an empty file ``.wh.NAME`` for a whiteout, ``.wh..wh..opq``
in an opaque directory, ``.wh..cp.NAME`` for a copy-up in progress): a view
upgrades it in place when it mounts it (upgrade()), umview-layer reads it as
it is (``legacy``).

Light imports only: umview-layer and the pytest plugin load it without the
C core.
"""
import errno
import os
import stat

from umview import longpath

#: the xattr that makes a directory opaque, and its value
OPAQUE_XATTR = "user.overlay.opaque"
OPAQUE_VALUE = b"y"
#: on an upper copy, the lower name it was renamed from (what tells a rename
#: from a deletion and a creation: umview.modules.viewfs.layerdiff)
ORIGIN_XATTR = "user.umview.origin"
#: the xattrs overlayfs's format keeps, never a process's to change
OVERLAY_XATTRS = (b"user.overlay.", b"trusted.overlay.")
#: the mark of this format on the layer's root
FORMAT_XATTR = "user.umview.layer"
FORMAT = b"2"
#: names with this prefix are the layer's own files, never the view's
RESERVED = b".wh..wh."
# the first format's names
LEGACY_WH = b".wh."
LEGACY_OPAQUE = b".wh..wh..opq"
LEGACY_COPY_TMP = b".wh..cp."
#: errors of a file system that keeps no user xattrs (or not on this file)
_NO_XATTRS = (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM)


def is_whiteout(st):
    """Does this lstat result stand for a removed name?"""
    return st is not None and stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def is_own(name):
    """Is name (bytes) one of the layer's own files (never shown)?"""
    return name.startswith(RESERVED)


def make_whiteout(name, dir_fd=None):
    """Make the whiteout of name (in the directory dir_fd). A whiteout there
    already is no error."""
    try:
        os.mknod(name, stat.S_IFCHR, 0, dir_fd=dir_fd)
    except FileExistsError:
        if not is_whiteout(os.stat(name, dir_fd=dir_fd, follow_symlinks=False)):
            raise


#: (st_dev, st_ino, st_ctime_ns) of an upper directory -> is it opaque: a
#: change of its xattrs changes its ctime (set_opaque forgets them all too:
#: a ctime may stay within one clock tick)
_opaque_seen = {}


def is_opaque(path, dir_fd=None, st=None):
    """Is the upper directory path (relative to dir_fd) opaque? st: its
    lstat, if the caller has it (the answer is then remembered)."""
    if st is None:
        return _read_opaque(path, dir_fd)
    key = (st.st_dev, st.st_ino, st.st_ctime_ns)
    opaque = _opaque_seen.get(key)
    if opaque is None:
        if len(_opaque_seen) >= 65536:
            _opaque_seen.clear()
        opaque = _opaque_seen[key] = _read_opaque(path, dir_fd)
    return opaque


def _read_opaque(path, dir_fd):
    try:
        if dir_fd is not None:
            # Python's getxattr takes no dir_fd; an O_PATH fd takes no fgetxattr
            return os.getxattr(b"/proc/self/fd/%d/%s" % (dir_fd, os.fsencode(path)), OPAQUE_XATTR,
                               follow_symlinks=False) == OPAQUE_VALUE
        with longpath.xattr_path(path) as p:
            return os.getxattr(p, OPAQUE_XATTR, follow_symlinks=False) == OPAQUE_VALUE
    except OSError:
        return False  # no such xattr, or none on this file system


def set_opaque(path):
    """Make the upper directory path opaque; False where its file system
    keeps no user xattrs (hide_all then does the same)."""
    _opaque_seen.clear()
    try:
        with longpath.xattr_path(path) as p:
            os.setxattr(p, OPAQUE_XATTR, OPAQUE_VALUE, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in _NO_XATTRS:
            return False
        raise
    return True


def hide_all(upper_dir, lower_dir):
    """What an opaque upper_dir means, where it cannot be marked: a whiteout
    of every name of lower_dir that upper_dir lacks."""
    try:
        names = longpath.listdir(lower_dir)
    except (FileNotFoundError, NotADirectoryError):
        return
    fd = longpath.open_dir(upper_dir)
    try:
        for n in names:
            try:
                os.stat(n, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                make_whiteout(n, dir_fd=fd)
    finally:
        os.close(fd)


def mark(upper):
    """Mark the layer upper as in this format (where it keeps xattrs)."""
    try:
        os.setxattr(upper, FORMAT_XATTR, FORMAT, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in _NO_XATTRS:
            raise


def why_not_a_layer(path):
    """None if the directory path is a layer (umview's mark on it; a layer of
    the first format; empty; or, by its shape, where the mark is missing (a
    file system without user xattrs cannot carry it), one that holds a
    whiteout, an opaque directory or the layer's own files); else why it is
    not, in a few words."""
    try:
        if os.getxattr(path, FORMAT_XATTR, follow_symlinks=False) == FORMAT:
            return None
    except OSError:
        pass
    try:
        with os.scandir(os.fsencode(path)) as it:
            if next(it, None) is None:
                return None
    except OSError as exc:
        return exc.strerror
    if legacy(path):
        return None
    for dirpath, dirnames, filenames in os.walk(os.fsencode(path)):
        for n in dirnames + filenames:
            if n.startswith(RESERVED) or is_whiteout(os.lstat(os.path.join(dirpath, n))) or (
                    n in dirnames and is_opaque(os.path.join(dirpath, n))):
                return None
    return f"it has no {FORMAT_XATTR} mark, no whiteout and no opaque directory"


def legacy(upper):
    """Is the layer upper in umview's first format (aufs's .wh. files)?"""
    try:
        if os.getxattr(upper, FORMAT_XATTR, follow_symlinks=False) == FORMAT:
            return False
    except OSError:
        pass
    for _, dirnames, filenames in os.walk(os.fsencode(upper)):
        for n in filenames + dirnames:
            if n.startswith(LEGACY_WH) and (not n.startswith(RESERVED) or n == LEGACY_OPAQUE):
                return True
    return False


def legacy_names(names):
    """In a directory of a first-format layer, whose names (bytes) are
    names: (the names its whiteouts hide, whether it is opaque, the names
    that are the layer's bookkeeping)."""
    whiteouts, opaque, own = set(), False, set()
    for n in names:
        if n == LEGACY_OPAQUE:
            opaque = True
        elif n.startswith(LEGACY_WH) and not n.startswith(LEGACY_COPY_TMP) and not n.startswith(RESERVED):
            whiteouts.add(n[len(LEGACY_WH):])
        if n.startswith(LEGACY_WH):
            own.add(n)
    return whiteouts, opaque, own


def upgrade(upper, lower):
    """Bring a first-format layer (upper over lower) to this format, in
    place, and mark it; a layer in this format is only marked (where it was
    not). Whiteout files become whiteouts, opaque markers the xattr (or
    whiteouts of the lower names), copy-ups in progress are dropped."""
    if not legacy(upper):
        mark(upper)
        return
    upper, lower = os.fsencode(upper), os.fsencode(lower)
    for dirpath, dirnames, filenames in os.walk(upper):
        names = set(dirnames) | set(filenames)
        whiteouts, opaque, own = legacy_names(names)
        fd = os.open(dirpath, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for n in own:
                if n.startswith(RESERVED) and n != LEGACY_OPAQUE:
                    continue  # the layer's own files (fakeroot's records) stay
                if n.startswith(LEGACY_COPY_TMP) and os.path.isdir(os.path.join(dirpath, n)):
                    import shutil

                    shutil.rmtree(os.path.join(dirpath, n))
                else:
                    os.unlink(n, dir_fd=fd)
            for n in whiteouts:
                if n and n not in names:
                    make_whiteout(n, dir_fd=fd)
        finally:
            os.close(fd)
        dirnames[:] = [n for n in dirnames if not n.startswith(LEGACY_WH)]
        if opaque and not set_opaque(dirpath):
            hide_all(dirpath, lower + dirpath[len(upper):])
    mark(upper)
