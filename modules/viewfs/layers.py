"""Layered mounts: an upper directory over a lower one (viewfs merge, cow, mincow).

The view at the mount point is the union of two real directories: the *upper*
layer (the mount's SOURCE, where changes go) over the *lower* one (what was at
TARGET). A name in the upper layer hides the same name below; a *whiteout*
(a character device 0/0 of the same name) hides a lower name that was
deleted; an *opaque* directory hides the whole lower directory below it (a
directory removed, then made again). It is overlayfs's on-disk format
(umview.modules.viewfs.layerfmt), which any user can write: any user can keep a layer, and
a later view over the same layer sees the same changes.

The kernel still does the I/O. A path in the view is turned into the real path
of the layer that holds it; a call that changes a lower file first *copies it
up* (parents, data, mode, times, and ownership when root); deletions of lower
names leave whiteouts. Every fd a process holds is a real kernel fd.

Directory listings of upper directories are merged: opening such a directory
opens a *listing directory* instead, a private real directory of empty
placeholders with the merged names and types (whiteouts and duplicates
removed), so getdents(2) runs in the kernel. Calls relative to that fd, fstat
on it and fchdir to it reach this engine, which maps them back to the view.
The placeholders' inode numbers (d_ino) are not the files' own.

Modes:
    merge   the union; changes act on the layer that holds the file, new
            names go to the upper layer; nothing is whited out.
    cow     the lower layer is never written: changed files are copied up,
            deletions are whiteouts.
    mincow  as cow, but a lower file or directory the user may write is
            changed in place.

Why one file of this size: Layers (the layers as trees: probes, copy-up,
whiteouts) and LayeredMount (the engine: each call kind's rules, in the
kernel's order of checks) share the Node of a probe and its memo within one
call, and each call's rules read both; the format, its reader and the
read-only answers live beside it (layerfmt.py, layerdiff.py, readonly.py).
"""
import errno
import fcntl
import itertools
import logging
import os
import re
import shutil
import stat
import struct
import tempfile

from umview import core, janitor, longpath, namei
from umview.engine import CONTINUE, CONTINUE_AFTER, Skip
from umview.openflags import O_ACCMODE, O_CREAT, O_EXCL, O_PATH, O_RDWR, O_TRUNC, O_WRONLY, WRITES, is_tmpfile
from umview.pathwalk import dotted, lstat_plain
from umview.service import SUN_PATH_MAX, RedirectMount, record_bound_name
from umview.syscalls import PATH_SYSCALLS, calls

from . import layerdiff, layerfmt

log = logging.getLogger("umview")

NAME_MAX = 255
#: in an upper directory, a name that is never there (layerfmt.RESERVED):
#: the kernel finds no such file where a whiteout hides a name
VOID = layerfmt.RESERVED + b"void"
#: on an upper copy: the lower name it was renamed from
ORIGIN = layerfmt.ORIGIN_XATTR

TRUNCATES = calls("truncates")
AT_FDCWD = -100
AT_REMOVEDIR = 0x200
AT_EMPTY_PATH = 0x1000
AT_SYMLINK_FOLLOW = 0x400
RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT = 1, 2, 4

# kinds of the C core's layer set (core.h)
LAYER_DIR, LAYER_HIDE, LAYER_FILE = 1, 2, 3
#: how many calls each sends to Python (LayerSet: the strongest wins)
_STRENGTH = {LAYER_DIR: 0, LAYER_FILE: 1, LAYER_HIDE: 2}

_DTYPES = {stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink", stat.S_IFIFO: "fifo"}


class LayerSet:
    """The C core's layer set, shared by every layered mount: two of them
    may name the same path (a ``fresh`` mount beside the one it replaces,
    or mounts of two views). Each mount's kind is kept; the C core gets the
    strongest (LAYER_HIDE sends more to Python than LAYER_FILE, which sends
    more than LAYER_DIR), and a path leaves it with the last mount that
    names it. A LAYER_FILE of two mounts is LAYER_HIDE: which upper layer
    holds the file is the engines' to say."""

    def __init__(self):
        self.kinds = {}  # path -> {mount: kind}

    @staticmethod
    def _kind(owners):
        kind = max(owners.values(), key=_STRENGTH.__getitem__)
        return LAYER_HIDE if kind == LAYER_FILE and len(owners) > 1 else kind

    def add(self, mount, path, kind):
        owners = self.kinds.setdefault(path, {})
        owners[mount] = kind
        core.layer_add(path, self._kind(owners))

    def drop(self, mount, path):
        owners = self.kinds.get(path, {})
        owners.pop(mount, None)
        if owners:
            core.layer_add(path, self._kind(owners))
        else:
            self.kinds.pop(path, None)
            core.layer_del(path)


LAYER_SET = LayerSet()


def _lstat(path):
    try:
        return longpath.lstat(path)
    except OSError:
        return None


def _stat_at(name, dir_fd):
    """lstat of name in the directory dir_fd, or None."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None


_DIR_OPEN = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


def _open_dir(name, follow, dir_fd=None):
    """An O_PATH fd of the directory name (relative to dir_fd), or None.
    follow=False: not through a symlink in its last component."""
    flags = _DIR_OPEN | (0 if follow else os.O_NOFOLLOW)
    try:
        return os.open(name, flags, dir_fd=dir_fd) if dir_fd is not None else longpath.open_dir(name, flags)
    except OSError:
        return None


def _entry(e):
    """(type bits, inode) of a DirEntry, from d_type where it says enough."""
    if e.is_symlink():
        kind = stat.S_IFLNK
    elif e.is_dir(follow_symlinks=False):
        kind = stat.S_IFDIR
    elif e.is_file(follow_symlinks=False):
        kind = stat.S_IFREG
    else:
        kind = stat.S_IFMT(e.stat(follow_symlinks=False).st_mode)
    return kind, e.inode()


def _join(base, rel):
    if not rel:
        return base
    return (base if base != b"/" else b"") + b"/" + rel


def _rjoin(a, b):
    """Two relative paths joined (either may be empty)."""
    return a + b"/" + b if a and b else a or b


def _running(path, st):
    """Does some process run the regular file path (lstat st) as its program?
    The kernel refuses to give write access to such a file (ETXTBSY, for an
    open for writing or truncate, after the permission checks); a copy-up
    would hand the writer a copy instead. /proc/PID/exe of every process the
    monitor can see, for a file with an execute bit (exec needs one)."""
    if not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o111 or not longpath.access(path, os.W_OK):
        return False
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                exe = os.stat(f"/proc/{pid}/exe")
            except OSError:
                continue
            if exe.st_ino == st.st_ino and exe.st_dev == st.st_dev:
                return True
    return False


def _parent(rel):
    head, _, name = rel.rpartition(b"/")
    return head, name


def probe_memo(call, layers):
    """The probes of layers remembered during call (a dict rel -> Node), or
    None without a call: one call's entry, until something changes the
    layers (Layers.generation). Kept in the call's state for these layers,
    which every mount over them shares."""
    if call is None:
        return None
    st = call.state(layers)
    entry = getattr(st, "probes", None)
    if entry is None or entry[0] != layers.generation:
        entry = st.probes = (layers.generation, {})
    return entry[1]


def forget_probes(call, layers):
    """Drop what probe_memo remembers of layers for call."""
    call.state(layers).probes = None


def written_path(call, slot):
    """Call's path slot made absolute as written (".", "..", a trailing "/"
    kept), as Call.written but for a name the process cannot have read: that
    raises OSError (EFAULT), the kernel's getname comes before any lookup.
    None for an empty or NULL path (the kernel names a file by fd) or one
    with no directory path to start from."""
    index = call.path_indices[slot]
    if not call.args[index]:
        return None
    raw = call.read_string(index)
    if raw and not raw.startswith(b"/"):
        base = call.base(slot)
        raw = base.rstrip(b"/") + b"/" + raw if base is not None else b""
    return raw or None


class Node:
    """What the view holds at one path: the upper entry (lstat or None), the
    lower one if it shows through (lstat or None), and whether a whiteout or
    an opaque directory hides the lower name. ``void``: for a name a
    whiteout removed (it or a directory above it), the real path where the
    kernel finds the same nothing."""

    __slots__ = ("rel", "upper", "lower", "hidden", "layers", "void")

    def __init__(self, layers, rel, upper, lower, hidden, void=None):
        self.layers, self.rel, self.upper, self.lower, self.hidden = layers, rel, upper, lower, hidden
        self.void = void

    @property
    def st(self):
        return self.upper or self.lower

    @property
    def exists(self):
        return self.st is not None

    @property
    def is_dir(self):
        return self.st is not None and stat.S_ISDIR(self.st.st_mode)

    @property
    def real(self):
        """The real path the kernel should get: the layer holding the name;
        for a missing name, a path where the kernel finds the same error."""
        if self.void is not None:
            return self.void
        if self.upper is not None or self.hidden:
            return self.layers.up(self.rel)
        return self.layers.low(self.rel)


class Layers:
    """The file-system side of a layered mount (no tracee involved)."""

    def __init__(self, upper, lower, mode, on_change=None):
        self.upper = upper.rstrip(b"/") or b"/"
        self.lower = lower.rstrip(b"/") or b"/"
        self.mode = mode
        self.root = os.geteuid() == 0
        #: ticks at every change made here: probes remembered before are stale
        self.generation = 0
        notify = on_change or (lambda rel: None)

        def changed(rel):
            self.generation += 1
            notify(rel)
        self.on_change = changed

    def up(self, rel):
        return _join(self.upper, rel)

    def low(self, rel):
        return _join(self.lower, rel)

    # --- lookups ---
    def probe(self, rel, memo=None):
        """The Node of rel (b"" for the mount point, else b"a/b", normalized).

        One walk down the path with directory fds: each component costs a few
        *at() calls relative to its parent, never a lookup of the whole
        prefix again, so a path of N components costs O(N). ``memo`` (a dict
        from probe_memo) keeps the nodes of every prefix walked: later probes
        of rel or of its ancestors in the same call are free."""
        if memo is not None:
            node = memo.get(rel)
            if node is not None:
                return node
        if not rel:
            node = Node(self, rel, _lstat(self.upper), _lstat(self.lower), False)
        else:
            node = self._walk(rel, memo)
        if memo is not None:
            memo[rel] = node
        return node

    def _walk(self, rel, memo):
        """probe() of a non-empty rel, component by component. The upper
        layer is walked without following symlinks (a non-directory there
        ends it: a file over a lower directory hides it); the lower one as a
        path lookup would (symlinks on the way followed), and only for the
        nodes wanted (every prefix with a memo, else the last) while no
        whiteout or opaque directory hides it."""
        comps = rel.split(b"/")
        last = len(comps) - 1
        hidden = False
        opaque = False  # the upper directory reached so far is opaque
        void = None     # below a whiteout: where the kernel finds nothing (Node.void)
        upfd = _open_dir(self.upper, follow=True)
        lowfd = None    # the lower directory reached so far (with a memo), once needed
        low_gone = memo is None  # without a memo only the last lower name is looked up, by path
        prefix = b""
        try:
            for i, c in enumerate(comps):
                if low_gone and memo is not None and upfd is not None and i:
                    # no lower directory here: the rest is the upper layer's
                    # alone, whiteouts and opaque markers hide nothing more
                    node = self._upper_only(upfd, comps[i:], rel, hidden or opaque)
                    if node is not None:
                        return node
                parent = prefix
                prefix = c if i == 0 else prefix + b"/" + c
                ust = _stat_at(c, upfd) if upfd is not None else None
                if void is not None:
                    void += b"/" + c
                elif layerfmt.is_whiteout(ust) or layerfmt.is_own(c):
                    # removed in the view (or the layer's own file): nothing
                    # at this name, in either layer
                    ust = None
                    hidden = True
                    void = self.up(parent) + b"/" + VOID
                if upfd is not None and not hidden and opaque:
                    hidden = True
                is_dir = ust is not None and stat.S_ISDIR(ust.st_mode)
                child_opaque = is_dir and layerfmt.is_opaque(c, dir_fd=upfd, st=ust)
                if child_opaque:
                    node = Node(self, prefix, ust, None, True)  # nothing below shows
                elif hidden:
                    node = Node(self, prefix, ust, None, True, void)
                elif memo is None:
                    node = Node(self, prefix, ust, _lstat(self.low(rel)), False) if i == last else None
                else:
                    if lowfd is None and not low_gone:
                        lowfd = _open_dir(self.low(parent), follow=True)
                        low_gone = lowfd is None
                    node = Node(self, prefix, ust, None if low_gone else _stat_at(c, lowfd), False)
                if i == last:
                    return node
                if memo is not None:
                    memo.setdefault(prefix, node)
                # on below this component
                if upfd is not None:
                    if not is_dir:
                        if ust is not None:
                            hidden = True  # a file over a lower directory
                        os.close(upfd)
                        upfd = None
                    else:
                        fd = _open_dir(c, follow=False, dir_fd=upfd)
                        os.close(upfd)
                        upfd = fd
                        opaque = child_opaque
                if lowfd is not None:
                    fd = None if hidden or child_opaque else _open_dir(c, follow=True, dir_fd=lowfd)
                    os.close(lowfd)
                    lowfd = fd
                    low_gone = fd is None
        finally:
            for fd in (upfd, lowfd):
                if fd is not None:
                    os.close(fd)

    def _upper_only(self, upfd, comps, rel, hidden):
        """The Node of rel whose components comps lie below the upper
        directory upfd, where the lower layer has nothing (or nothing that
        shows): one lookup by the kernel (no symlink may be on the way: the
        component walk handles those), so a deep path costs O(1) calls here.
        None: walk instead. Opaque directories further down are not looked
        at: with no lower name to hide they change nothing; a whiteout there
        (the upper layer keeps none where nothing lies below) still hides its
        name."""
        if any(layerfmt.is_own(c) for c in comps):
            return None
        try:
            st = lstat_plain(b"/".join(comps), upfd, beneath=True)
        except FileNotFoundError:
            st = None
        except OSError:
            return None
        if layerfmt.is_whiteout(st):
            return Node(self, rel, None, None, True, self.up(_parent(rel)[0]) + b"/" + VOID)
        if st is not None:
            return Node(self, rel, st, None, hidden)
        if len(comps) > 1:  # missing: the name is new if its parent is a directory
            try:
                if not stat.S_ISDIR(lstat_plain(b"/".join(comps[:-1]), upfd, beneath=True).st_mode):
                    return None
            except OSError:
                return None
        return Node(self, rel, None, None, hidden)

    def opaque(self, rel):
        return layerfmt.is_opaque(self.up(rel))

    def listing(self, rel):
        """The merged entries of an upper directory: {name: (st_mode type
        bits, inode number)}."""
        names = {}
        whiteouts = set()
        up = self.up(rel)
        with longpath.scandir(up) as it:
            for e in it:
                n = e.name
                if layerfmt.is_own(n):
                    continue
                kind, ino = _entry(e)
                if kind == stat.S_IFCHR and layerfmt.is_whiteout(e.stat(follow_symlinks=False)):
                    whiteouts.add(n)
                    continue
                names[n] = kind, ino
        if not self.opaque(rel) and not (rel and self.probe(rel).hidden):
            # (below an opaque directory nothing of the lower layer shows)
            try:
                with longpath.scandir(self.low(rel)) as it:
                    for e in it:
                        if e.name not in names and e.name not in whiteouts:
                            names[e.name] = _entry(e)
            except (FileNotFoundError, NotADirectoryError):
                pass
        return names

    def has_whiteouts(self, rel):
        """Does the upper directory rel hold a whiteout?"""
        try:
            with longpath.scandir(self.up(rel)) as it:
                return any(not (e.is_dir(follow_symlinks=False) or e.is_file(follow_symlinks=False) or e.is_symlink())
                           and layerfmt.is_whiteout(e.stat(follow_symlinks=False)) for e in it)
        except OSError:
            return True

    def empty(self, node):
        """Is this directory of the view empty (ENOTEMPTY check)?"""
        if node.upper is not None:
            return not self.listing(node.rel)
        with longpath.scandir(self.low(node.rel)) as it:
            return next(it, None) is None

    # --- changes ---
    def ensure_dir(self, rel):
        """Make rel a directory of the upper layer, copying up the lower
        directories on the way. rel must be a directory in the view."""
        if not rel:
            return self.upper
        up = self.up(rel)
        st = _lstat(up)
        if st is not None and stat.S_ISDIR(st.st_mode):
            return up  # there already: one lookup
        # down the path with directory fds, as probe() (no recursion: a path
        # may have 2,000 components)
        comps = rel.split(b"/")
        upfd = os.open(self.upper, _DIR_OPEN)
        lowfd = None  # the lower directory of the prefix, from the first name to copy up on
        prefix = b""
        try:
            for i, c in enumerate(comps):
                parent = prefix
                prefix = c if i == 0 else prefix + b"/" + c
                st = _stat_at(c, upfd)
                if st is None:
                    if lowfd is None:
                        lowfd = _open_dir(self.low(parent), follow=True)
                    low = _stat_at(c, lowfd) if lowfd is not None else None
                    if low is None or not stat.S_ISDIR(low.st_mode):
                        raise OSError(errno.ENOENT if low is None else errno.ENOTDIR,
                                      "no such directory in the view")
                    # the monitor must be able to make names in it: owner rwx for a user
                    os.mkdir(c, 0o700, dir_fd=upfd)
                    self._copy_attrs(c, low, extra=0 if self.root else 0o700, dir_fd=upfd)
                    self.on_change(prefix)
                elif not stat.S_ISDIR(st.st_mode):
                    raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
                if i == len(comps) - 1:
                    break
                fd = os.open(c, _DIR_OPEN | os.O_NOFOLLOW, dir_fd=upfd)
                os.close(upfd)
                upfd = fd
                if lowfd is not None:
                    fd = _open_dir(c, follow=True, dir_fd=lowfd)
                    os.close(lowfd)
                    lowfd = fd  # None: looked up again by path if needed (and missing)
        finally:
            for fd in (upfd, lowfd):
                if fd is not None:
                    os.close(fd)
        return up

    def copy_up(self, node, data=True):
        """Copy a lower non-directory to the upper layer (parents first).
        Returns the upper path. A regular file is written unnamed (O_TMPFILE)
        and linked in whole, so no process sees half a copy and no temporary
        name lengthens the file's; a file system without O_TMPFILE gets the
        copy written in place. The other kinds have no data to wait for."""
        rel = node.rel
        parent, name = _parent(rel)
        up_parent = self.ensure_dir(parent)
        up = self.up(rel)
        low = self.low(rel)
        st = node.lower
        kind = stat.S_IFMT(st.st_mode)
        if kind == stat.S_IFREG:
            self._copy_file(low if data else None, up_parent, up, st)
        else:
            if kind == stat.S_IFLNK:
                longpath.symlink(longpath.readlink(low), up)
            elif kind == stat.S_IFIFO:
                longpath.mknod(up, stat.S_IFIFO | 0o600)
            elif kind in (stat.S_IFCHR, stat.S_IFBLK) and self.root:
                longpath.mknod(up, st.st_mode, st.st_rdev)
            else:
                raise OSError(errno.EPERM, "cannot copy this kind of file up")
            with longpath.at(up) as (fd, name):
                if kind != stat.S_IFLNK:
                    self._copy_attrs(name, st, dir_fd=fd)
                elif self.root:
                    os.chown(name, st.st_uid, st.st_gid, dir_fd=fd, follow_symlinks=False)
        self.on_change(rel)
        return up

    def _copy_file(self, low, up_parent, up, st):
        """The copy of the lower regular file low (None: empty) at up, with
        st's attributes."""
        name = _parent(up)[1]
        pfd = longpath.open_dir(up_parent)
        try:
            try:
                fd = os.open(b".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600, dir_fd=pfd)
                tmp = True
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                    raise
                fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600, dir_fd=pfd)
                tmp = False
            try:
                if low is not None and st.st_size:
                    # (an empty file is not read: its copy needs no read
                    # access, as overlayfs copies with the mounter's rights;
                    # a lock file of root's, 0640, is one a fake root writes)
                    src_fd = longpath.open_regular(low)
                    with open(src_fd, "rb") as src, open(fd, "wb", closefd=False) as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
                if self.root:
                    os.fchown(fd, st.st_uid, st.st_gid)
                os.fchmod(fd, stat.S_IMODE(st.st_mode))
                os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
                if tmp:  # linkat(AT_SYMLINK_FOLLOW) of the unnamed file
                    os.link(b"/proc/self/fd/%d" % fd, name, dst_dir_fd=pfd, follow_symlinks=True)
            except BaseException:
                if not tmp:
                    os.unlink(name, dir_fd=pfd)
                raise
            finally:
                os.close(fd)
        finally:
            os.close(pfd)

    def _copy_attrs(self, path, st, extra=0, dir_fd=None):
        if self.root:
            os.chown(path, st.st_uid, st.st_gid, dir_fd=dir_fd)
        os.chmod(path, stat.S_IMODE(st.st_mode) | extra, dir_fd=dir_fd)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns), dir_fd=dir_fd)

    def mark_origin(self, rel):
        """Record on the upper copy of the lower file rel, about to be
        renamed, the name it stands for (aufs keeps no record of renames;
        umview.modules.viewfs.layerdiff reads it). A file renamed again keeps its first
        origin. Regular files only, where the layer has user xattrs: elsewhere
        a rename reads as a deletion and a creation."""
        try:
            with longpath.xattr_path(self.up(rel)) as up:
                st = os.lstat(up)
                if not stat.S_ISREG(st.st_mode) or ORIGIN in os.listxattr(up, follow_symlinks=False):
                    return
                if not self.root and not st.st_mode & stat.S_IWUSR:
                    os.chmod(up, st.st_mode | stat.S_IWUSR)  # a user xattr needs write access
                try:
                    os.setxattr(up, ORIGIN, rel, follow_symlinks=False)
                finally:
                    if not self.root and not st.st_mode & stat.S_IWUSR:
                        os.chmod(up, stat.S_IMODE(st.st_mode))
        except OSError:
            pass

    def whiteout(self, rel):
        """Hide the lower name rel (the upper layer has nothing there)."""
        up_parent = self.ensure_dir(_parent(rel)[0])
        fd = longpath.open_dir(up_parent)
        try:
            layerfmt.make_whiteout(_parent(rel)[1], dir_fd=fd)
        finally:
            os.close(fd)
        self.on_change(rel)

    def unwhiteout(self, rel):
        """Remove the whiteout of rel; True if there was one."""
        up = self.up(rel)
        if not layerfmt.is_whiteout(_lstat(up)):
            return False
        try:
            longpath.unlink(up)
        except (FileNotFoundError, NotADirectoryError):
            return False
        self.on_change(rel)
        return True

    def make_opaque(self, rel):
        """The upper directory rel hides the lower one of its name."""
        up = self.up(rel)
        if not layerfmt.set_opaque(up):
            layerfmt.hide_all(up, self.low(rel))
        self.on_change(rel)

    def remove_upper(self, rel):
        """Remove rel from the upper layer (a directory with what it holds)."""
        up = self.up(rel)
        st = _lstat(up)
        if st is None:
            return
        if stat.S_ISDIR(st.st_mode):
            longpath.rmtree(up)
        else:
            longpath.unlink(up)
        self.on_change(rel)

    def entries(self):
        """(rel, kind) for the C core's layer set: every name of the upper
        layer, whiteouts as the names they hide."""
        out = [(b"", LAYER_HIDE if self.opaque(b"") else LAYER_DIR)]
        for rel in self.names_below(b""):
            out.extend(self.kinds(rel))
        return [(r, k) for r, k in out if k]

    def names_below(self, rel):
        """The rel of every name below the upper directory rel, at any depth
        (a walk from directory fds: paths longer than PATH_MAX too); what
        cannot be read (a directory of mode 0 made by a user) is left out."""
        try:
            with longpath.at(self.up(rel)) as (fd, top):
                for dirpath, dirnames, filenames, _ in os.fwalk(top, dir_fd=fd):
                    base = _rjoin(rel, dirpath[len(top):].lstrip(b"/"))
                    for n in dirnames + filenames:
                        yield _rjoin(base, n)
        except OSError:
            return

    def kinds(self, rel):
        """[(rel, kind)] for one name of the upper layer: kind 0 = not there."""
        if layerfmt.is_own(_parent(rel)[1]):
            return [(rel, LAYER_HIDE)]  # never shown: the view answers for it
        st = _lstat(self.up(rel))
        if st is None:
            return [(rel, 0)]  # gone
        if layerfmt.is_whiteout(st):
            return [(rel, LAYER_HIDE)]
        if stat.S_ISDIR(st.st_mode):
            # a directory only the upper layer has: everything below it is
            # there too, and may be made by the kernel without us (a cwd in
            # it is faithful), so all of it is ours to resolve
            merged = not self.opaque(rel) and longpath.isdir(self.low(rel))
            return [(rel, LAYER_DIR if merged else LAYER_HIDE)]
        # a regular file is read where it lies (the engine's _read rewrites
        # to it alone): the C core may serve those reads on it
        return [(rel, LAYER_FILE if stat.S_ISREG(st.st_mode) else LAYER_HIDE)]


def _memory_dir():
    """A directory in memory for the placeholders (making a file there costs
    a few µs; on a disk it can cost half a millisecond), else the default."""
    for d in (os.environ.get("XDG_RUNTIME_DIR"), "/dev/shm"):
        if d and os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK):
            return d
    return None


class Listings:
    """Private directories of placeholders that stand for merged listings."""

    def __init__(self):
        self.root = os.fsencode(tempfile.mkdtemp(prefix=f"umview-listing-{os.getpid()}-", dir=_memory_dir()))
        janitor.remove_at_death(self.root)  # also if the monitor is killed
        self.counter = itertools.count(1)
        self.cache = {}  # rel -> (key, listing dir)
        self.dirs = {}   # listing dir name -> rel
        self.inodes = {}  # listing dir name -> {name: the real file's inode}
        self.aliases = {}  # real directory -> short symlink to it (socket paths)
        self.stale = []   # names of listing dirs made again since: removed once unused

    STALE_MAX = 64

    def get(self, layers, rel):
        key = tuple((s.st_ino, s.st_mtime_ns) if s else None
                    for s in (_lstat(layers.up(rel)), _lstat(layers.low(rel))))
        hit = self.cache.get(rel)
        if hit is not None and hit[0] == key:
            return hit[1]
        if hit is not None:
            self._retire(hit[1])
        names = layers.listing(rel)
        n = str(next(self.counter)).encode()
        d = self.root + b"/" + n
        os.mkdir(d, 0o755)
        for name, (kind, _) in names.items():
            p = d + b"/" + name
            if kind == stat.S_IFDIR:
                os.mkdir(p, 0o755)
            elif kind == stat.S_IFLNK:
                os.symlink(b".", p)
            elif kind == stat.S_IFIFO:
                os.mkfifo(p, 0o644)
            else:
                os.mknod(p, stat.S_IFREG | 0o644)  # devices and sockets list as files
        self.cache[rel] = (key, d)
        self.dirs[n] = rel
        self.inodes[n] = {name: ino for name, (_, ino) in names.items()}
        return d

    def alias(self, directory):
        """A short path that leads to a real directory (a symlink of ours)."""
        link = self.aliases.get(directory)
        if link is None:
            link = self.root + b"/s" + str(len(self.aliases)).encode()
            os.symlink(directory, link)
            self.aliases[directory] = link
        return link

    def forget(self, rel):
        hit = self.cache.pop(rel, None)
        if hit is not None:
            self._retire(hit[1])

    def _retire(self, d):
        """A listing directory that is out of date: it stays while an fd or a
        cwd uses it (a process may be reading it), and goes with the others
        once enough have piled up and no process holds them."""
        self.stale.append(d[len(self.root) + 1:])
        if len(self.stale) < self.STALE_MAX:
            return
        held = set()
        prefix = self.root + b"/"
        for pid in os.listdir(b"/proc"):
            if not pid.isdigit():
                continue
            try:
                links = [b"/proc/" + pid + b"/cwd"] + [b"/proc/" + pid + b"/fd/" + fd
                                                      for fd in os.listdir(b"/proc/" + pid + b"/fd")]
            except OSError:
                continue  # gone, or not ours to read
            for link in links:
                try:
                    target = os.readlink(link)
                except OSError:
                    continue
                if target.startswith(prefix):
                    held.add(target[len(prefix):].split(b"/", 1)[0])
        keep = []
        for n in self.stale:
            if n in held:
                keep.append(n)
                continue
            janitor.remove_tree(self.root + b"/" + n)
            self.dirs.pop(n, None)
            self.inodes.pop(n, None)
        self.stale = keep

    def inodes_of(self, path):
        """{name: inode} of the files a listing directory stands for, or None."""
        if not path.startswith(self.root + b"/"):
            return None
        return self.inodes.get(path[len(self.root) + 1:])

    def relative(self, path):
        """The view's rel for a path under a listing directory, or None."""
        if not path.startswith(self.root + b"/"):
            return None
        n, _, rest = path[len(self.root) + 1:].partition(b"/")
        rel = self.dirs.get(n)
        if rel is None:
            return None
        return _join(rel, rest) if rel else rest

    def close(self):
        janitor.remove_tree(self.root)
        janitor.forget(self.root)


# path calls that change the named file in place
MODIFY = calls("metadata", "truncates") & PATH_SYSCALLS
CREATE = calls("mkdirs", "mknods", "symlinks")
UNLINK = calls("unlinks")
RENAME = calls("renames")
LINK = calls("links")
OPENS = calls("opens")
READLINK = calls("readlinks")
SOCKET_CALLS = calls("sockaddrs")
LISTING_CALLS = frozenset({"getdents64"})
# calls where a NULL path names the dirfd's file (elsewhere NULL is EFAULT)
NULL_NAMES_FD = calls("null-is-fd")
# calls that change an open file by its fd alone: for a file of the lower
# layer, the file is copied up and the call made on the copy by path
AT_SYMLINK_NOFOLLOW = 0x100
FD_CHANGES = {
    "fchmod": ("fchmodat", lambda c, p: [AT_FDCWD, p, c.mode]),
    "fchown": ("fchownat", lambda c, p: [AT_FDCWD, p, c.uid, c.gid, AT_SYMLINK_NOFOLLOW]),
    "fchown32": ("fchownat", lambda c, p: [AT_FDCWD, p, c.uid, c.gid, AT_SYMLINK_NOFOLLOW]),
    "fsetxattr": ("lsetxattr", lambda c, p: [p, c.raw("attr"), c.raw("value"), c.size, c.flags]),
    "fremovexattr": ("lremovexattr", lambda c, p: [p, c.raw("attr")]),
}
# ioctl requests that change the inode of the fd's file whatever the fd's
# mode (the kernel checks ownership, not write access): request -> the one
# the monitor makes on the upper copy (None: refused, see _fd_ioctl)
FD_IOCTLS = {
    0x40086602: 0x40086602,  # FS_IOC_SETFLAGS (chattr)
    0x40046602: 0x40086602,  # FS_IOC32_SETFLAGS
    0x40087602: 0x40087602,  # FS_IOC_SETVERSION
    0x40047602: 0x40087602,  # FS_IOC32_SETVERSION
    0x401C5820: 0x401C5820,  # FS_IOC_FSSETXATTR (xfs_io chattr, project ids)
    0x40806685: None,        # FS_IOC_ENABLE_VERITY
    0x800C6613: None,        # FS_IOC_SET_ENCRYPTION_POLICY
    0x41009432: None,        # FS_IOC_SETFSLABEL
}
# _copied_up_fd: the fd's lower file is no longer in the view
GONE = object()
ACCESS = calls("accesses")
XATTR_CHANGES = calls("xattr-writes") & PATH_SYSCALLS
FD_XATTR_CHANGES = calls("xattr-writes") - PATH_SYSCALLS
LAYER_XATTRS = layerfmt.OVERLAY_XATTRS
W_OK = 2
# calls that act on a directory of the view, which a listing directory stands for
DIR_FD_CALLS = calls("cwd") | OPENS


_signed = core.signed32


# pseudo file systems: never layered (nothing to copy up; /proc/self is the
# caller's own), they stay real under a layered mount
PSEUDO = (b"/proc", b"/sys", b"/dev")
# a magic link of procfs that the kernel follows to an open file
PROC_FD = re.compile(rb"/proc/(self|thread-self|[0-9]+)(?:/task/([0-9]+))?/fd/([0-9]+)(/.*)?\Z", re.S)
PROC_FD_PREFIXES = (b"/proc/self/fd", b"/proc/thread-self/fd")
# the other magic links that name a file by its path
PROC_LINK = re.compile(rb"/proc/(self|thread-self|[0-9]+)(?:/task/([0-9]+))?/(exe|cwd|root)\Z")


class LayeredMount(RedirectMount):
    """The engine of one layered mount."""

    def __init__(self, upper, target, lower, mode, name, exceptions=()):
        self.layers = Layers(upper, lower, mode, on_change=self._changed)
        self.listings = Listings()
        super().__init__(target, self._real_path, name=name, exceptions=exceptions)
        pseudo = tuple(p for p in PSEUDO if self.relative(p) is not None)
        self.exceptions += pseudo
        # the upper layer itself is real to the kernel (the fds of upper
        # files, a cwd or dirfd in an upper directory, a process looking at
        # the layer) but an *alias* to the C core: a path relative to an
        # upper directory that climbs with ".." reaches us, to be mapped back
        # into the view (the upper parent lacks the lower names)
        self.alias_prefixes = (self.layers.upper,)
        if self.relative(self.layers.upper) is not None:
            self.exceptions += (self.layers.upper,)
        self.mode = mode
        self.set_entries = set()
        #: (the layered mount whose upper layer holds this one's, the path
        #: there), for a fresh mount whose layer was made in the view
        self.host = None
        # the C core can let a call through only where the lower layer is the
        # real tree at the same path; otherwise every call under it is ours.
        # /proc/self/fd/N names an open file: one of a listing directory or of
        # the lower layer must reach this engine as the view's path
        self.prefixes = (self.listings.root,) + PROC_FD_PREFIXES
        if self.layers.lower == self.target:
            self.layered_prefixes = (self.target,)
            self.real_prefixes = tuple(e for e in self.exceptions if e != self.layers.upper)
            self.layer_in_core = True
            self.layer_uppers = ((self.target, self.layers.upper),)
        else:
            self.prefixes += (self.target,)
            self.layer_in_core = False
        # fstat of a listing directory's fd (glibc: newfstatat(fd, "",
        # AT_EMPTY_PATH)) must reach us: the C core checks the fd's path
        # against the plain prefixes (the raw fstat syscall is not trapped: a
        # program that makes it sees the placeholder)
        self.fd_check = True
        # rare calls: claimed whole, so that no lower file changes through an fd
        self.syscalls = self.syscalls | frozenset(FD_CHANGES)
        # and the ioctl requests that do the same (the others never stop)
        self.value_syscalls = {"ioctl": (1, frozenset(FD_IOCTLS))}
        # the listings' inode numbers are the placeholders': fixed at exit
        self.fd_syscalls = LISTING_CALLS

    # --- the C core's layer set ---
    def _vpath(self, rel):
        return _join(self.target, rel)

    def _changed(self, rel):
        if rel:
            self.listings.forget(_parent(rel)[0])
        if not self.layer_in_core:
            return
        # the name and, for a directory made or removed, its own kind
        for r, kind in self.layers.kinds(rel) if rel else [(b"", LAYER_HIDE if self.layers.opaque(b"") else LAYER_DIR)]:
            v = self._vpath(r)
            if kind:
                LAYER_SET.add(self, v, kind)
                self.set_entries.add(v)
            elif v in self.set_entries:
                self._drop_subtree(v)

    def _drop_subtree(self, v):
        for e in [e for e in self.set_entries if e == v or e.startswith(v + b"/")]:
            LAYER_SET.drop(self, e)
            self.set_entries.discard(e)

    def _rescan(self, rel):
        """Bring the set up to date for rel and what lies below it."""
        if not self.layer_in_core:
            return
        v = self._vpath(rel)
        self._drop_subtree(v)
        self._changed(rel)
        up = self.layers.up(rel)
        if longpath.isdir(up) and not longpath.islink(up):
            for r in self.layers.names_below(rel):
                self._changed(r)

    def attach(self):
        """Load the layer into the C core (at mount), and mark it used
        (umview-layer apply refuses a layer a view uses)."""
        self.hold = layerdiff.hold(self.layers.upper)
        if self.hold is None:
            log.warning("viewfs: layer %s: umview-layer apply is changing the real tree from it, or it "
                        "cannot be locked: this view may see it half applied", os.fsdecode(self.layers.upper))
        try:
            layerfmt.upgrade(self.layers.upper, self.layers.lower)
        except OSError as exc:
            log.warning("viewfs: layer %s: could not bring it to this umview's format (%s): this view may not "
                        "show its changes right", os.fsdecode(self.layers.upper), exc)
        if self.layer_in_core:
            for rel, kind in self.layers.entries():
                v = self._vpath(rel)
                LAYER_SET.add(self, v, kind)
                self.set_entries.add(v)

    def detach(self):
        if getattr(self, "hold", None) is not None:
            os.close(self.hold)
            self.hold = None
        for v in self.set_entries:
            LAYER_SET.drop(self, v)
        self.set_entries.clear()
        if self.host is not None:
            # what this mount wrote in its upper layer, which lies in the
            # host's, the host's layer set now learns (the view sees it there)
            host, rel = self.host
            host._rescan(rel)
        self.listings.close()

    # --- paths ---
    def relative(self, path):
        rel = self.listings.relative(path) if hasattr(self, "listings") else None
        if rel is not None:
            return rel
        return super().relative(path)

    def _proc_fd(self, path, call):
        """(what the kernel finds behind /proc/PID/fd/N, the rest of the path)
        for such a magic link, else None."""
        m = PROC_FD.match(path)
        if m is None:
            return None
        who, task, fd, rest = m.groups()
        pid = task or (str(call.tid).encode() if who in (b"self", b"thread-self") else who)
        try:
            return os.readlink(b"/proc/" + pid + b"/fd/" + fd), (rest or b"").strip(b"/")
        except OSError:
            return None  # the kernel says what is wrong

    def _relative(self, call, slot, path):
        """relative(), and for a magic link /proc/PID/fd/N[/rest] that the call
        follows, the view's path of the open file, when that file is a
        listing directory of this mount or a file of its lower layer."""
        up = self.layers.upper
        if path == up or path.startswith(up + b"/"):
            # reached from an upper directory (a cwd or dirfd the kernel
            # resolved): the view's name; named absolutely: the layer itself
            index = call.path_indices[slot]
            raw = call.read_string(index) if call.args[index] else b""
            return None if raw.startswith(b"/") else path[len(up) + 1:]
        found = self._proc_fd(path, call)
        if found is None:
            return self.relative(path)
        link, rest = found
        if not rest and not call.spec.follows(slot, call.args):
            return None  # the link itself (lstat): the kernel's
        rel = self.listings.relative(link)
        if rel is not None:
            return _join(rel, rest) if rest else rel
        up, low = self.layers.upper, self.layers.lower.rstrip(b"/")
        if link == up or link.startswith(up + b"/") or not link.startswith(low + b"/"):
            return None  # a file of the upper layer, or not of this mount: the kernel has it
        return self.relative(_join(_join(self.target, link[len(low) + 1:]), rest))

    def _listing_readlink(self, call):
        """readlink of /proc/PID/fd/N (exe, cwd, root) for a listing
        directory or a file of the upper layer: the view's path of the file
        it stands for (else None; the kernel would show the listing's or the
        layer's path)."""
        if call.name not in READLINK:
            return None
        path = call.paths()[0]
        if path is None:
            return None
        m = PROC_LINK.match(path)
        if m is not None:
            who, task, what = m.groups()
            pid = task or (b"%d" % call.tid if who in (b"self", b"thread-self") else who)
            try:
                return self.shown_path(os.fsencode(os.readlink(b"/proc/" + pid + b"/" + what)))
            except OSError:
                return None  # the kernel says what is wrong
        found = self._proc_fd(path, call)
        if not found or found[1]:
            return None
        return self.shown_path(found[0])

    def shown_path(self, real):
        rel = self.listings.relative(real)
        if rel is not None:
            return _join(self.target, rel)
        up = self.layers.upper
        if real == up or real.startswith(up + b"/"):
            return _join(self.target, real[len(up) + 1:])  # " (deleted)" kept, as the kernel shows it
        return None

    def _real_path(self, rel):
        return self.layers.probe(rel).real

    def _probe(self, call, rel):
        """Layers.probe, remembered for the rest of this call's entry."""
        return self.layers.probe(rel, probe_memo(call, self.layers))

    def view_node(self, call, rel):
        """The Node of rel for a path walk in the view during call (see
        CwdTracker): probed once per call, with every ancestor."""
        return self._probe(call, rel)

    def wants(self, call):
        if call.name in SOCKET_CALLS:
            return self._socket_path(call) is not None
        if call.name in FD_CHANGES:
            return True
        if call.name == "ioctl":
            return call.args[1] & 0xFFFFFFFF in FD_IOCTLS
        if call.name in self.fd_syscalls:
            return self._listing_fd(call) is not None
        if call.name in self.path_syscalls:
            return self._listing_readlink(call) is not None or any(
                p is not None and self._relative(call, slot, p) is not None for slot, p in enumerate(self._paths(call)))
        return False

    @staticmethod
    def _paths(call):
        """call.paths(), where a NULL path with a dirfd (utimensat(fd, NULL,
        ...), futimesat) names the fd's file, as an empty one does."""
        paths = call.paths()
        if None not in paths or call.name not in NULL_NAMES_FD:
            return paths
        paths = list(paths)
        for slot, p in enumerate(paths):
            d = call.dirfd_indices[slot]
            if p is None and d is not None and not call.args[call.path_indices[slot]]:
                link = core.proc_link(call.tid, _signed(call.args[d]))
                if link is None:
                    continue  # EBADF from the kernel
                paths[slot] = link if link.startswith(b"/") else None
        return paths

    # --- calls ---
    def enter(self, call):
        if call.name in SOCKET_CALLS:
            if self.replaced(call, "addr"):
                return CONTINUE
            self.resolved(call, "addr")
            return self._socket(call)
        if call.name in FD_CHANGES:
            if self.replaced(call, "fd"):
                return CONTINUE
            self.resolved(call, "fd")
            return self._fd_change(call)
        if call.name == "ioctl":
            return self._fd_ioctl(call)
        if call.name in self.fd_syscalls:
            call.state(self).listing = self._listing_fd(call)
            return CONTINUE_AFTER
        vpath = self._listing_readlink(call)
        if vpath is not None:
            data = vpath[:call.size]
            call.write_mem(call.raw("buf"), data)
            return Skip(len(data))
        slots = []
        paths = self._paths(call)
        for slot, path in enumerate(paths):
            if path is None:
                continue
            index = call.path_indices[slot]
            if self.replaced(call, index):
                continue
            rel = self._relative(call, slot, path)
            if rel is None:
                continue
            self.resolved(call, index)
            # NULL (utimensat(fd, NULL, ...)) names the fd, as "" does
            raw = call.read_string(index) if call.args[index] else b""
            slots.append((slot, index, rel, raw))
        if not slots:
            return CONTINUE
        name = call.name
        if None in paths:
            # another path argument is bad (EFAULT, EBADF, ENAMETOOLONG...):
            # the call fails, with the errno the kernel finds first
            for s in slots:
                if s[3]:
                    self._set(call, s[1], self._probe(call, s[2]).real, s[3])
            return CONTINUE
        if any(dotted(s[3]) for s in slots):
            slots = self._walk_dots(call, slots)
            if not isinstance(slots, list):
                return slots  # the kernel's error, or set up for the kernel to give it
        answer = self.names_mount_point(call, {s[0]: s[2] for s in slots},
                                        lambda rel: self._probe(call, rel).exists)
        if answer is not None:
            return answer
        st = call.state(self)
        st.undo, st.refresh, st.after = [], [], []
        if name in OPENS:
            return self._open(call, slots[0])
        if name in UNLINK:
            return self._unlink(call, slots[0])
        if name in RENAME:
            return self._rename(call, slots)
        if name in LINK:
            return self._link(call, slots)
        if name in CREATE:
            return self._create(call, slots[0])
        if name in MODIFY:
            return self._modify(call, slots[0])
        if name in ACCESS:
            return self._access(call, slots[0])
        for s in slots:
            self._read(call, s)
        return CONTINUE

    def _walk_dots(self, call, slots):
        """Slots whose path has "." or ".." components, walked as the kernel
        walks them (fs/namei.c): every component before the last must be a
        directory of the view, "." stays there and ".." climbs from there.
        A lexical normalization would skip a missing directory or a file
        before ".." ("nope/../f" would name "f"), and turn the last "." or
        ".." of a call that changes names (rmdir("d/sub/.."),
        rename("d/sub/.", x)) into the directory it means. Returns the slots
        with their paths resolved (a last "." or ".." of a lookup is the
        directory it names, kept as "dir/"), or the answer of a call that
        fails: the kernel's, given the real path of where the walk stops and
        the rest as written, or the errno of a last "." or ".." (LAST_DOT,
        LAST_DOTDOT: the kernel's own check, on the real directory)."""
        out, last_dots = [], {}
        for s in slots:
            slot, index, rel, raw = s
            lit = self.literal_relative(raw) if raw.startswith(b"/") and dotted(raw) else None
            if lit is None:
                out.append(s)  # no dots, or ".." above the mount point: lexical
                continue
            parts = [c for c in lit.split(b"/") if c]
            cur = b""
            for i, c in enumerate(parts[:-1]):
                if c == b".":
                    continue
                if c == b"..":
                    cur = _parent(cur)[0]
                    continue
                node = self._probe(call, cur + b"/" + c if cur else c)
                if not node.is_dir:
                    # missing, not a directory (or a symlink the view left
                    # to the kernel): where the kernel stops, and the rest
                    rest = b"/".join(parts[i + 1:]) + (b"/" if raw.endswith(b"/") else b"")
                    return self._fail_at(call, slots, index, node.real + b"/" + rest)
                cur = node.rel
            last = parts[-1] if parts else b""
            if last in (b".", b".."):
                last_dots[slot] = (index, cur, last)
                rel = cur if last == b"." else _parent(cur)[0]
                out.append((slot, index, rel, _join(self.target, rel).rstrip(b"/") + b"/"))
            else:
                out.append((slot, index, cur + b"/" + last if cur else last, raw))
        dots = [d for slot, d in last_dots.items() if slot in call.spec.names]
        if not dots:
            return out
        if call.name in RENAME:
            flags = call.flags if call.name == "renameat2" else 0
            if flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT) or \
                    flags & (RENAME_NOREPLACE | RENAME_WHITEOUT) and flags & RENAME_EXCHANGE:
                return Skip.errno(errno.EINVAL)
            # both parents walked: EBUSY for a "." or ".." source, then the
            # target's (EEXIST with RENAME_NOREPLACE)
            if 0 in last_dots or not flags & RENAME_NOREPLACE:
                return Skip.errno(errno.EBUSY)
            return Skip.errno(errno.EEXIST)
        index, cur, last = dots[0]
        return self._fail_at(call, out, index, self._probe(call, cur).real + b"/" + last)

    def _fail_at(self, call, slots, index, real):
        """The call fails in the kernel: path argument index becomes real
        (where the kernel finds the error), every other one the real path of
        its name, which the kernel looks up first or after as it would."""
        for slot, i, rel, raw in slots:
            if i != index and raw:
                self._set(call, i, self._probe(call, rel).real, raw)
        self._set(call, index, real, b"")
        return CONTINUE

    def exit(self, call):
        forget_probes(call, self.layers)  # the kernel has run the call since
        if call.name in self.fd_syscalls:
            if call.retval is not None and call.retval > 0:
                self._fix_inodes(call)
            return
        ok = call.retval is not None and call.retval >= 0
        st = call.state(self)
        if getattr(st, "missing", 0) and call.retval in (-errno.EROFS, -errno.EXDEV):
            call.retval = -st.missing  # _missing
        if not ok:
            for undo in reversed(getattr(st, "undo", ())):
                try:
                    undo()
                except OSError:
                    log.warning("viewfs: could not undo a change after %s failed", call.name)
        for rel in getattr(st, "refresh", ()):
            self.listings.forget(_parent(rel)[0])
            self._rescan(rel)
        if ok:
            for after in getattr(st, "after", ()):
                after()

    # --- helpers ---
    def _missing(self, call, index, node, raw):
        """Remove or rename a name the view does not have: the kernel walks
        the real path and gives its errors (ENOENT, ENOTDIR, ENAMETOOLONG,
        EACCES) in its order. But do_rmdir, do_unlinkat and do_renameat2
        check for a read-only mount (EROFS) before they look the last name
        up, and the real path may lie on one (the real file system, or an
        older view's ro mount, as under --sandbox=ro), and do_renameat2
        says EXDEV first when the other name's real path lies on another
        mount (an upper layer outside that ro mount). This mount is one
        writable mount, so there the answer is the lookup's: ENOENT, or
        ENAMETOOLONG for a last name longer than NAME_MAX (the file system's
        lookup, overlayfs's too)."""
        self._set(call, index, node.real, raw)
        last = raw.rstrip(b"/").rpartition(b"/")[2]
        call.state(self).missing = errno.ENAMETOOLONG if len(last) > NAME_MAX else errno.ENOENT
        return CONTINUE_AFTER

    @staticmethod
    def _set(call, index, real, raw):
        if real != raw:
            call.set_string(index, real)  # PATH_MAX or more: Call.run_long_paths

    def _empty_path(self, call, slot, index, rel):
        """The call names an open file (AT_EMPTY_PATH): make it name the file
        of the view by path when the fd is a listing directory."""
        node = self._probe(call, rel)
        d = call.dirfd_indices[slot]
        if d is None or node.upper is None or self.listings.relative(call.paths()[slot]) is None:
            return node  # a real file's fd: the kernel has the right one
        call.args[d] = AT_FDCWD & 0xFFFFFFFFFFFFFFFF
        call.set_string(index, node.real)
        return node

    def _read(self, call, s, want_dir=False):
        slot, index, rel, raw = s
        if raw == b"":
            self._empty_path(call, slot, index, rel)
            return
        node = self._probe(call, rel)
        real = node.real
        if call.name == "chdir" and node.lower is not None and stat.S_ISDIR(node.lower.st_mode):
            # a merged directory: the cwd is the lower one, whose path is the
            # view's, so relative paths stay with the C core (no virtual cwd)
            real = self.layers.low(rel)
        elif node.upper is not None and node.is_dir and (want_dir or call.name in DIR_FD_CALLS):
            # a directory only the upper layer has is its own listing (and a
            # faithful cwd); a merged or opaque one needs a listing directory
            real = self.layers.up(rel) if self._shows_as_upper(node) else self.listings.get(self.layers, rel)
        elif not rel and node.lower is not None:
            real = self.layers.low(rel)  # the mount point's own attributes are the lower's
        elif raw.endswith(b"/") and not real.endswith(b"/"):
            real += b"/"
        self._set(call, index, real, raw)

    def _shows_as_upper(self, node):
        """Does the directory node show exactly what its upper directory
        holds? Where the lower layer has no such directory, or hides it (an
        opaque directory, or one below it), and no whiteout lies in it (a
        layer made before 2026-12-04 kept some below opaque directories)."""
        if node.upper is None or not stat.S_ISDIR(node.upper.st_mode) or not node.rel:
            return False
        if not longpath.lexists(self.layers.low(node.rel)):
            return not self.layers.opaque(node.rel)
        return node.hidden and not self.layers.has_whiteouts(node.rel)

    def _lower_shows(self, call, rel):
        """Does the view show (or would it, but for the upper layer's name)
        the lower layer's rel: it exists there, and no opaque directory
        above hides it? A whiteout is needed only then."""
        return longpath.lexists(self.layers.low(rel)) and not (
            rel and _parent(rel)[0] and self._probe(call, _parent(rel)[0]).hidden)

    def shows_same_names(self, rel, real):
        """Is real (a cwd) this mount's image of rel, all the way down? (See
        CwdTracker: relative paths without ".." then stay with the kernel.)"""
        return real == self.layers.up(rel) and self._shows_as_upper(self.layers.probe(rel)) and \
            not any(e.startswith(_join(self.target, rel) + b"/") for e in self.exceptions)

    def virtual_of(self, real):
        """The view's path of a real path in the upper layer or in a listing
        directory, or None."""
        rel = self.listings.relative(real)
        if rel is not None:
            return _join(self.target, rel)
        up = self.layers.upper
        if real == up or real.startswith(up + b"/"):
            return _join(self.target, real[len(up) + 1:])
        return None

    def _writable_lower(self, path):
        # a symlink itself, not what it points to (maybe nothing): changing
        # one (lchown, utimensat) is the kernel's to allow or refuse
        return self.layers.mode == "merge" or (
            self.layers.mode == "mincow" and longpath.access(path, os.W_OK, follow_symlinks=False))

    def _for_change(self, call, s, data=True, write=False):
        """Make the existing name of slot s changeable; returns its node.
        write: the call needs write access to the file (an open for writing,
        truncate), which the kernel refuses to a program some process runs."""
        slot, index, rel, raw = s
        node = self._probe(call, rel)
        if raw.endswith(b"/") and not node.is_dir:
            # ENOTDIR (or ENOENT) from the kernel: nothing to copy up
            self._set(call, index, node.real.rstrip(b"/") + b"/", raw)
            return node
        if node.upper is None and node.lower is not None and not stat.S_ISDIR(node.lower.st_mode):
            if not self._writable_lower(node.real):
                if write and _running(node.real, node.lower):
                    raise OSError(errno.ETXTBSY, os.strerror(errno.ETXTBSY))
                self.layers.copy_up(node, data=data)
                node = self._probe(call, rel)
        elif node.upper is None and node.lower is not None and not self._writable_lower(node.real):
            self.layers.ensure_dir(rel)  # a directory changed in place (chmod /usr)
            node = self._probe(call, rel)
        if raw == b"":
            d = call.dirfd_indices[slot]
            if d is not None and node.upper is not None:
                call.args[d] = AT_FDCWD & 0xFFFFFFFFFFFFFFFF
                call.set_string(index, node.real)
        else:
            self._set(call, index, node.real, raw)
        return node

    def _modify(self, call, s):
        if not call.writes():
            return CONTINUE  # utimensat that omits both times: the kernel does nothing, looks nothing up
        if call.name in XATTR_CHANGES and call.attr is not None and call.attr.startswith(LAYER_XATTRS):
            # the layer's own (an opaque directory), as overlayfs keeps them
            raise OSError(errno.EPERM, os.strerror(errno.EPERM))
        self._for_change(call, s, write=call.name in TRUNCATES)
        return CONTINUE

    def _access(self, call, s):
        """access(2) with W_OK on a name that a write would copy up first
        (cow; mincow where the user may not write it): the answer is the
        copy's, which the user owns with the same mode, not the lower
        file's (a read-only file system, another owner)."""
        slot, index, rel, raw = s
        mode = call.mode
        node = self._probe(call, rel)
        st = node.st
        if not mode & W_OK or node.upper is not None or st is None or stat.S_ISLNK(st.st_mode) \
                or self.layers.mode == "merge" or self._writable_lower(node.real):
            self._read(call, s)
            return CONTINUE
        if not (self.layers.root or stat.S_ISDIR(st.st_mode) or st.st_mode & stat.S_IWUSR):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES))
        self._read(call, s)
        call.set_arg("mode", mode & ~W_OK)  # the rest (R_OK, X_OK, F_OK) is the kernel's
        return CONTINUE

    def _prepare_new(self, call, s, in_place=True):
        """A name about to be made: its parent must be an upper directory,
        and a whiteout of it goes (back if the call fails). Returns the node
        of the name, or raises the errno of a name that cannot be made.
        in_place=False: the name must be made in the upper layer."""
        slot, index, rel, raw = s
        st = call.state(self)
        node = self._probe(call, rel)
        if node.exists:
            raise OSError(errno.EEXIST, os.strerror(errno.EEXIST))
        if layerfmt.is_own(_parent(rel)[1]):
            raise OSError(errno.EPERM, "a name the layer keeps for itself")
        parent, _ = _parent(rel)
        pnode = self._probe(call, parent)
        if not pnode.is_dir:
            # no such directory in the view: the kernel says ENOENT or ENOTDIR
            self._set(call, index, node.real, raw)
            return None
        if in_place and self._made_in_place(node, pnode):
            self._set(call, index, self.layers.low(rel) + (b"/" if raw.endswith(b"/") else b""), raw)
            st.refresh.append(rel)
            return node
        self.layers.ensure_dir(parent)
        if self.layers.unwhiteout(rel):
            st.undo.append(lambda: self.layers.whiteout(rel))
            st.after.append(lambda: self._after_made(rel))
        st.refresh.append(rel)
        self._set(call, index, self.layers.up(rel) + (b"/" if raw.endswith(b"/") else b""), raw)
        return node

    def _made_in_place(self, node, pnode):
        """mincow: is a new name node made in the lower directory pnode?
        Where that directory shows through and the user may write it,
        whether or not the upper layer has the directory too (the mount's
        root always has one)."""
        return self.layers.mode == "mincow" and pnode.lower is not None and not node.hidden \
            and longpath.access(self.layers.low(pnode.rel), os.W_OK | os.X_OK)

    def _after_made(self, rel):
        # a directory made where a lower one was removed must not show it again
        up = self.layers.up(rel)
        if longpath.isdir(up) and not longpath.islink(up) and longpath.lexists(self.layers.low(rel)):
            self.layers.make_opaque(rel)

    def _create(self, call, s):
        if call.of_class("mknods") and stat.S_ISCHR(call.mode) and call.dev == 0:
            # a whiteout in the layer: the name would vanish (overlayfs
            # refuses it too), once the kernel's earlier checks passed
            slot, index, rel, raw = s
            node = self._probe(call, rel)
            if node.exists:
                raise OSError(errno.EEXIST, os.strerror(errno.EEXIST))
            if self._probe(call, _parent(rel)[0]).is_dir and len(_parent(rel)[1]) <= NAME_MAX:
                raise OSError(errno.EPERM, os.strerror(errno.EPERM))
            self._set(call, index, node.real, raw)  # the kernel's ENOENT, ENOTDIR, ENAMETOOLONG
            return CONTINUE
        self._prepare_new(call, s)
        return CONTINUE_AFTER

    def _open(self, call, s):
        slot, index, rel, raw = s
        flags = call.open_flags()
        if raw == b"":
            return CONTINUE
        if not flags & WRITES and not is_tmpfile(flags):
            self._read(call, s)
            return CONTINUE
        node = self._probe(call, rel)
        if is_tmpfile(flags):
            if node.is_dir:
                real = node.real if node.upper is not None or self._writable_lower(node.real) \
                    else self.layers.ensure_dir(rel)
                self._set(call, index, real, raw)
            else:
                self._set(call, index, node.real, raw)
            return CONTINUE
        if raw.endswith(b"/") and (flags & O_CREAT or not node.is_dir):
            # "name/" is a directory: the kernel refuses the open (EISDIR
            # with O_CREAT, ENOTDIR for a file, ENOENT), nothing to prepare
            self._set(call, index, node.real.rstrip(b"/") + b"/", raw)
            return CONTINUE
        if node.exists:
            if flags & O_CREAT and flags & O_EXCL:
                raise OSError(errno.EEXIST, os.strerror(errno.EEXIST))
            if node.is_dir or not stat.S_ISREG(node.st.st_mode) and not stat.S_ISLNK(node.st.st_mode):
                # EISDIR from the kernel; devices and fifos are written in place
                self._set(call, index, node.real, raw)
                return CONTINUE
            self._for_change(call, s, data=not flags & O_TRUNC,
                             write=flags & O_ACCMODE in (O_WRONLY, O_RDWR) or bool(flags & O_TRUNC))
            return CONTINUE
        if not flags & O_CREAT:
            self._set(call, index, node.real, raw)
            return CONTINUE
        self._prepare_new(call, s)
        return CONTINUE_AFTER

    def _unlink(self, call, s):
        slot, index, rel, raw = s
        rmdir = call.name == "rmdir" or (call.name == "unlinkat" and call.flags & AT_REMOVEDIR)
        node = self._probe(call, rel)
        if not node.exists and rel:
            return self._missing(call, index, node, raw)
        if not rel:
            self._set(call, index, node.real, raw)
            return CONTINUE
        if rmdir and not node.is_dir:
            raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        if not rmdir and node.is_dir:
            raise OSError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not rmdir and raw.endswith(b"/"):
            raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        # a whiteout where the lower layer's name shows; below an opaque
        # directory none (it would show to the kernel in a faithful cwd)
        if not self._lower_shows(call, rel):
            self._set(call, index, node.real, raw)  # upper only: the kernel removes it
            call.state(self).refresh.append(rel)
            return CONTINUE_AFTER
        if node.upper is None and self._writable_lower(self.layers.low(_parent(rel)[0])):
            self._set(call, index, node.real, raw)  # in place (mincow, merge)
            return CONTINUE
        if self.layers.mode == "merge" and node.upper is not None:
            self._set(call, index, node.real, raw)
            call.state(self).refresh.append(rel)
            return CONTINUE_AFTER
        if rmdir and not self.layers.empty(node):
            raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY))
        self.layers.remove_upper(rel)
        self.layers.whiteout(rel)
        return Skip(0)

    def _rename(self, call, slots):
        if len(slots) < 2:
            # one side outside this mount: a rename across file systems,
            # once do_renameat2 has walked to both parents, old first
            slot, index, rel, raw = slots[0]
            for other in (0, 1):
                if other == slot:
                    node = self._probe(call, rel)
                    if not self._probe(call, _parent(rel)[0]).is_dir:
                        self._set(call, index, node.real, raw)
                        return CONTINUE  # the kernel's ENOENT, ENOTDIR, in its order
                    continue
                path = written_path(call, other)
                err = namei.parent_error(path) if path is not None else 0
                if err:
                    raise OSError(err, os.strerror(err))
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        (_, i_old, r_old, raw_old), new = slots[0], slots[1]
        _, i_new, r_new, raw_new = new
        flags = call.flags if call.name == "renameat2" else 0
        if flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT) or \
                flags & (RENAME_NOREPLACE | RENAME_WHITEOUT) and flags & RENAME_EXCHANGE:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        st = call.state(self)
        old = self._probe(call, r_old)
        target = self._probe(call, r_new)
        if not old.exists or not self._probe(call, _parent(r_new)[0]).is_dir:
            # ENOENT, ENOTDIR for either name: the kernel's, in its order
            self._set(call, i_new, target.real, raw_new)
            if not old.exists and r_old:
                return self._missing(call, i_old, old, raw_old)
            self._set(call, i_old, old.real, raw_old)
            return CONTINUE
        # do_renameat2's checks, in its order
        if flags & RENAME_NOREPLACE and target.exists:
            raise OSError(errno.EEXIST, os.strerror(errno.EEXIST))
        if flags & RENAME_EXCHANGE:
            if not target.exists:
                raise OSError(errno.ENOENT, os.strerror(errno.ENOENT))
            if not target.is_dir and raw_new.endswith(b"/"):
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        if not old.is_dir and (raw_old.endswith(b"/") or not flags & RENAME_EXCHANGE and raw_new.endswith(b"/")):
            raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        if r_old != r_new and (r_new + b"/").startswith(r_old + b"/"):
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))  # into itself
        if r_old != r_new and (r_old + b"/").startswith(r_new + b"/"):
            err = errno.EINVAL if flags & RENAME_EXCHANGE else errno.ENOTEMPTY  # over its own ancestor
            raise OSError(err, os.strerror(err))
        if r_old == r_new or target.exists and (old.st.st_dev, old.st.st_ino) == (target.st.st_dev, target.st.st_ino):
            return Skip(0)  # one file (hard links too): vfs_rename does nothing
        if layerfmt.is_own(_parent(r_new)[1]):
            raise OSError(errno.EPERM, "a name the layer keeps for itself")
        if self._rename_in_place(old, target):
            # mincow, merge: both names in the lower layer, which the user
            # may change: the kernel renames there (a directory too)
            self._set(call, i_old, old.real, raw_old)
            self._set(call, i_new, self.layers.low(r_new), raw_new)
            st.refresh += [r_old, r_new]
            return CONTINUE_AFTER
        if target.exists and not flags & RENAME_EXCHANGE:
            # may_delete of the target (vfs_rename)
            if old.is_dir and not target.is_dir:
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
            if not old.is_dir and target.is_dir:
                raise OSError(errno.EISDIR, os.strerror(errno.EISDIR))
        if old.is_dir and longpath.lexists(self.layers.low(r_old)):
            # a lower directory would have to move with all it holds
            # (overlayfs without redirect_dir says the same)
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        if target.exists and not flags & RENAME_EXCHANGE and target.is_dir and not self.layers.empty(target):
            raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY))
        if flags & RENAME_EXCHANGE:
            if target.is_dir and target.lower is not None:
                raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
            for n in (old, target):
                if n.upper is None:
                    self.layers.copy_up(n)
            self._set(call, i_old, self.layers.up(r_old), raw_old)
            self._set(call, i_new, self.layers.up(r_new), raw_new)
            st.refresh += [r_old, r_new]
            return CONTINUE_AFTER
        if old.upper is None:
            self.layers.copy_up(old)
        parent, _ = _parent(r_new)
        if not self._probe(call, parent).is_dir:
            self._set(call, i_new, target.real, raw_new)
            return CONTINUE
        self.layers.ensure_dir(parent)
        if target.is_dir and longpath.lexists(self.layers.low(r_new)):
            # replacing a directory of the lower layer (empty in the view):
            # the upper one may hold whiteouts only
            self.layers.remove_upper(r_new)
        if old.is_dir and longpath.isdir(self.layers.low(r_new)) and self._lower_shows(call, r_new):
            # the directory moved in hides the lower one of its new name
            # (removed in the view, or replaced)
            st.after.append(lambda: self.layers.make_opaque(r_new))
        if self.layers.unwhiteout(r_new):
            st.undo.append(lambda: self.layers.whiteout(r_new))
        # the old name was seen in the lower layer too: hide it once moved
        if self._lower_shows(call, r_old):
            self.layers.mark_origin(r_old)
            st.after.append(lambda: self.layers.whiteout(r_old))
        self._set(call, i_old, self.layers.up(r_old), raw_old)
        self._set(call, i_new, self.layers.up(r_new), raw_new)
        st.refresh += [r_old, r_new]
        return CONTINUE_AFTER

    def _rename_in_place(self, old, target):
        if self.layers.mode == "cow" or old.upper is not None or old.lower is None:
            return False
        if target.upper is not None or target.hidden:
            return False
        pnode = self.layers.probe(_parent(target.rel)[0])
        return pnode.lower is not None \
            and self._writable_lower(self.layers.low(_parent(old.rel)[0])) \
            and self._writable_lower(self.layers.low(pnode.rel))

    def _link(self, call, slots):
        if call.name == "linkat" and call.flags & ~(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH):
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        if len(slots) < 2:
            # one name outside this mount: do_linkat looks the old name up
            # first, and refuses a link between two mounts after that
            slot, index, rel, raw = slots[0]
            if slot == 0:
                old = self._probe(call, rel)
                if not old.exists or raw.endswith(b"/") and not old.is_dir:
                    self._set(call, index, old.real + (b"/" if raw.endswith(b"/") else b""), raw)
                    return CONTINUE  # the kernel's ENOENT, ENOTDIR
            else:
                path = written_path(call, 0)
                err = path and namei.old_name_error(path, call.name == "linkat" and call.flags & AT_SYMLINK_FOLLOW)
                if err:
                    raise OSError(err, os.strerror(err))
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        (_, i_old, r_old, raw_old), new = slots[0], slots[1]
        old = self._probe(call, r_old)
        if not old.exists or raw_old.endswith(b"/") and not old.is_dir:
            # ENOENT, ENOTDIR: the kernel's, looking old up first
            self._set(call, i_old, old.real + (b"/" if raw_old.endswith(b"/") else b""), raw_old)
            return CONTINUE
        # do_linkat's checks, in its order: the new name's parent, the name
        # itself, then vfs_link's refusal of a directory
        r_new, raw_new = new[2], new[3]
        if not self._probe(call, _parent(r_new)[0]).is_dir:
            self._set(call, i_old, old.real, raw_old)
            self._set(call, new[1], self._probe(call, r_new).real, raw_new)
            return CONTINUE
        if self._probe(call, r_new).exists:
            raise OSError(errno.EEXIST, os.strerror(errno.EEXIST))
        if raw_new.endswith(b"/"):
            raise OSError(errno.ENOENT, os.strerror(errno.ENOENT))  # "name/" is not made
        if old.is_dir:
            raise OSError(errno.EPERM, os.strerror(errno.EPERM))
        # both names must end up in one layer: the lower one when the file is
        # there and the new name may be made there too (mincow, merge: the
        # link stays a link of the lower file), else the upper one, where a
        # lower file is copied up first
        if old.upper is None:
            target = self._probe(call, r_new)
            pnode = self._probe(call, _parent(r_new)[0])
            if self.layers.mode != "cow" and not target.exists and not target.hidden \
                    and pnode.lower is not None and self._writable_lower(self.layers.low(pnode.rel)):
                self._set(call, i_old, old.real, raw_old)
                self._set(call, new[1], self.layers.low(r_new), new[3])
                call.state(self).refresh.append(r_new)
                return CONTINUE_AFTER
            self.layers.copy_up(old)
        self._set(call, i_old, self.layers.up(r_old), raw_old)
        self._prepare_new(call, new, in_place=False)
        return CONTINUE_AFTER

    @staticmethod
    def _fd_path(call):
        fd = call.fd
        return core.proc_link(call.tid, fd) if fd >= 0 else None

    def _listing_fd(self, call):
        """The listing directory call's fd (argument 0) is open on, or None."""
        path = self._fd_path(call)
        return path if path is not None and self.listings.relative(path) is not None else None

    def _view_ino(self, rel):
        """st_ino of a directory of the view, as stat(2) there gives it."""
        if not rel:
            st = _lstat(self.layers.low(rel))
        else:
            st = _lstat(self.layers.probe(rel).real)
        return st.st_ino if st is not None else 0

    def _fix_inodes(self, call):
        """getdents64 on a listing directory: the placeholders' inode numbers
        become those of the files they stand for (as stat(2) in the view)."""
        path = call.state(self).listing
        inodes = self.listings.inodes_of(path)
        rel = self.listings.relative(path)
        if inodes is None or rel is None:
            return
        buf = bytearray(call.read_mem(call.raw("dirp"), call.retval))
        off = 0
        while off + 19 <= len(buf):
            reclen = struct.unpack_from("H", buf, off + 16)[0]
            if reclen < 19 or off + reclen > len(buf):
                break
            name = bytes(buf[off + 19:off + reclen]).split(b"\0", 1)[0]
            if name == b".":
                ino = self._view_ino(rel)
            elif name == b"..":
                ino = self._view_ino(_parent(rel)[0]) if rel else _lstat(self.target + b"/..").st_ino
            else:
                ino = inodes.get(name)
            if ino:
                struct.pack_into("Q", buf, off, ino)
            off += reclen
        call.write_mem(call.raw("dirp"), bytes(buf))

    def _fd_change(self, call):
        """fchmod, fchown, fsetxattr, fremovexattr on an fd of a lower file
        (or of a listing directory): made on the file of the view by path."""
        if call.name in FD_XATTR_CHANGES and call.attr is not None \
                and call.attr.startswith(LAYER_XATTRS) and self._layer_fd(call):
            return Skip.errno(errno.EPERM)  # the layer's own, as _modify says
        rel = self._copied_up_fd(call)
        if rel is None:
            return CONTINUE
        if rel is GONE:
            return Skip(0)
        name, args = FD_CHANGES[call.name]
        real = self.layers.up(rel)
        where = call.alloc(len(real) + 1)
        call.write_mem(where, real + b"\0")
        # the same call by path, as this call's ABI numbers it (ENOSYS where
        # it has none: the call fails, the lower file stays as it is)
        call.set_syscall(name, args(call, where))
        return CONTINUE

    def _fd_ioctl(self, call):
        """An ioctl that changes the inode of its fd's file, whatever the
        fd's mode (FD_IOCTLS: inode flags, project quota attributes, the
        generation): on a lower file, the monitor copies the file up and
        makes the request on the copy; the process's fd still names the lower
        file, which stays as it is. Requests whose argument points further
        into the process (fs-verity, encryption policies) or that change the
        whole file system are refused with EPERM."""
        request = call.args[1] & 0xFFFFFFFF
        how = FD_IOCTLS.get(request)
        rel = self._copied_up_fd(call)
        if rel is None:
            return CONTINUE
        if how is None:
            return Skip.errno(errno.EPERM)
        if rel is GONE:
            return Skip(0)
        size = (request >> 16) & 0x3FFF
        arg = call.read_mem(call.args[2], size)
        if how != request:  # a 32-bit int request, made as the 64-bit one
            arg = arg + b"\0" * 4
        real = self.layers.up(rel)
        fd = longpath.open_(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fcntl.ioctl(fd, how, arg)
        finally:
            os.close(fd)
        return Skip(0)

    def _layer_fd(self, call):
        """Is the file of call's fd (argument 0) one of this mount's?"""
        path = self._fd_path(call)
        return path is not None and path.startswith(b"/") and (
            self.relative(path) is not None or path == self.layers.upper
            or path.startswith(self.layers.upper + b"/"))

    def _is_lower(self, call, fd, rel):
        """Is the file of the process's fd the lower layer's file at rel?"""
        try:
            st = os.stat(f"/proc/{call.tid}/fd/{fd}")
        except OSError:
            return False
        low = _lstat(self.layers.low(rel))
        return low is not None and (low.st_dev, low.st_ino) == (st.st_dev, st.st_ino)

    def _copied_up_fd(self, call):
        """For a call that changes the file of its fd (argument 0): the
        view's rel of that file once it is in the upper layer (copied up if
        it was a lower one), or None if the kernel may make the call as it is
        (not this mount's, an upper or writable lower file, an O_PATH fd);
        GONE for a lower file the view no longer shows: nothing to change."""
        fd = call.fd
        if fd < 0:
            return None
        path = core.proc_link(call.tid, fd)
        if path is None:
            return None  # the kernel says EBADF
        up = self.layers.upper
        if path == up or path.startswith(up + b"/"):
            return None  # already the upper layer's
        flags = core.fd_flags(call.tid, fd)
        if flags is None:
            return None  # the kernel says EBADF
        rel = self.relative(path) if path.startswith(b"/") else None
        if rel is None or flags & O_PATH:
            return None
        node = self._probe(call, rel)
        if node.lower is None and self._is_lower(call, fd, rel):
            # a lower file the view has removed or replaced since the fd was
            # opened: its name shows no copy to change, and the real file
            # must stay (as for a copied-up file, the fd keeps showing the
            # lower one)
            return GONE
        if not node.exists:
            return None  # an unlinked file: the kernel's
        if node.upper is None:
            if self._writable_lower(node.real):
                return None
            if node.is_dir:
                self.layers.ensure_dir(rel)
            else:
                self.layers.copy_up(node)
        return rel

    # --- AF_UNIX sockets ---
    def _bind_as_named(self, call, rel, real):
        """A bind by a plain relative name ("s.sock", "run/s.sock") that lands
        at that name below the directory the layer shows as the cwd: made from
        that directory with the process's own address, the kernel keeps the
        name as the process gave it, for every reader (getsockname,
        /proc/net/unix, sock_diag). None where that cannot be (an absolute or
        dotted name, a process of several threads, a notification: the name
        is rewritten, and the calls that give it back mend it)."""
        try:
            named = self._sockaddr(call)
        except OSError:
            return None
        if (not named or named.startswith(b"/") or not real.endswith(b"/" + named)
                or any(c in (b"", b".", b"..") for c in named.split(b"/"))):
            return None
        head = real[:-len(named) - 1]
        if head == core.proc_link(call.tid):
            return None  # the cwd itself (mincow made it in place): the kernel's
        if call.notified or len(os.listdir(f"/proc/{call.tid}/task")) != 1:
            return None
        result = call.run_in_directory(head, list(call.args))
        self.listings.forget(_parent(rel)[0])
        self._rescan(rel)
        return Skip(result)

    def _socket(self, call):
        path = os.path.normpath(self._socket_path(call))
        rel = self.relative(path)
        node = self._probe(call, rel)
        if call.name == "bind":
            if node.exists:
                raise OSError(errno.EADDRINUSE, os.strerror(errno.EADDRINUSE))
            parent, _ = _parent(rel)
            pnode = self._probe(call, parent)
            if pnode.is_dir and self._made_in_place(node, pnode):
                real = self.layers.low(rel)  # mincow, as _prepare_new makes names
                call.state(self).refresh = [rel]
            elif pnode.is_dir:
                self.layers.ensure_dir(parent)
                self.layers.unwhiteout(rel)
                real = self.layers.up(rel)
                call.state(self).refresh = [rel]
            else:
                real = node.real
        else:
            real = node.real
        if call.name == "bind":
            kept = self._bind_as_named(call, rel, real)
            if kept is not None:
                return kept
        if len(real) >= SUN_PATH_MAX:
            # the layer's path made it too long for sun_path: reach the
            # directory through a short symlink of ours (the kernel follows
            # symlinks in the directory part of a socket path)
            head, _, name = real.rpartition(b"/")
            real = self.listings.alias(head) + b"/" + name
            if len(real) >= SUN_PATH_MAX:
                # a name of its own too long for that: the call is made
                # from the directory, as the process made it from its own
                record_bound_name(call, name)
                result = call.run_in_directory(head, self._sockaddr_args(call, name))
                if result >= 0 and call.name == "bind":
                    self.listings.forget(_parent(rel)[0])
                    self._rescan(rel)
                return Skip(result)
        self._point_sockaddr(call, real)
        return CONTINUE_AFTER if call.name == "bind" else CONTINUE
