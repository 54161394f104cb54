"""What a layer changed: a copy-on-write layer (viewfs cow, --sandbox) read
against the tree below it, as lists of created, modified, deleted and
renamed names.

The layer is in overlayfs's format (umview.modules.viewfs.layerfmt): a name in the upper
directory hides the lower one, a whiteout (a character device 0/0) hides a
deleted lower name, an opaque directory hides everything the lower directory
held. A layer of umview's first format (aufs's ``.wh.`` files), which a view
upgrades when it mounts it, is read as it is.

What counts as a change is what differs between the tree the view shows and
the real (lower) tree, not what the processes did:

- a file copied up and left as it was (opened for writing and not written,
  a chmod to the same mode) is no change; neither are times alone (``touch``,
  a copy-up keeps them): the report is about content, size, mode, owner,
  symlink targets and names;
- the owner of a copied file is compared only in a layer made by root: a
  user's copy-up belongs to that user whoever owned the lower file, and a
  user's copy of a lower directory has owner rwx added (the monitor must make
  names in it), so a user's layer cannot tell ``chmod u+rwx DIR`` from a copy;
- a directory deleted with what it held is an entry (its ``entries``: how
  many names lay below it), and so is each of those names, with ``under``,
  the directory's path; a directory created likewise, with the names made
  below it (the human summary shows the directory alone);
- a rename of a lower file is known from the layer only if the cow engine
  recorded its origin (the xattr ``user.umview.origin`` it sets on the copy
  when it renames a lower file, where the layer's file system has user
  xattrs: regular files only); otherwise, and for a file whose old name shows
  again in the view, the old name is deleted and the new one created.

Light imports only: umview-layer and the pytest plugin load it without the
C core.
"""
import errno
import fcntl
import os
import stat

from umview import longpath

from . import layerfmt

#: the xattr the cow engine sets on the copy of a lower file it renames
ORIGIN_XATTR = layerfmt.ORIGIN_XATTR

KINDS = ("created", "modified", "deleted", "renamed")


def hold(layer):
    """A view uses the layer: a shared lock on its directory (flock) for as
    long as the returned fd stays open, so that umview-layer apply can tell
    (lock_for_apply). None if the layer is being applied, or not lockable."""
    try:
        fd = os.open(layer, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def lock_for_apply(layer):
    """An exclusive lock on the layer for umview-layer apply (an fd to close);
    BlockingIOError if a view uses it (see hold)."""
    fd = os.open(layer, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd

_TYPES = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink", stat.S_IFIFO: "fifo",
          stat.S_IFSOCK: "socket", stat.S_IFCHR: "chardev", stat.S_IFBLK: "blockdev"}


def file_type(st):
    """The report's type name of a stat result."""
    return _TYPES.get(stat.S_IFMT(st.st_mode), "unknown")


def _join(base, rel):
    if not rel:
        return base
    return base.rstrip("/") + "/" + rel


def _lstat(path):
    try:
        return os.lstat(path)
    except OSError:
        return None


def _origin(path):
    """The lower name a renamed copy stands for (relative), or None."""
    try:
        return os.fsdecode(os.getxattr(path, ORIGIN_XATTR, follow_symlinks=False))
    except OSError:
        return None


def _same_bytes(a, b):
    """Do two files of the same size hold the same bytes? (unreadable: no)"""
    try:
        with open(longpath.open_regular(a), "rb") as fa, open(longpath.open_regular(b), "rb") as fb:
            while True:
                x, y = fa.read(1 << 20), fb.read(1 << 20)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:
        return False


def _owner(st):
    return f"{st.st_uid}:{st.st_gid}"


def _mode(st):
    return f"{stat.S_IMODE(st.st_mode):04o}"


class _Reader:
    """One reading of a layer (see changes())."""

    def __init__(self, upper, lower, target):
        self.upper, self.lower, self.target = upper, lower, target
        st = os.stat(upper)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a layer directory", upper)
        #: copies are made by root (ownership kept) or by a user (not)
        self.root_layer = st.st_uid == 0
        #: in umview's first format (layerfmt.legacy)
        self.legacy = layerfmt.legacy(upper)
        self.out = {k: {} for k in KINDS}  # kind -> {rel: entry}
        self.origins = {}  # rel of an upper file -> rel of the lower file it was renamed from

    def path(self, rel):
        return _join(self.target, rel) if rel else self.target

    def differences(self, rel_low, lst, rel_up, ust):
        """What differs between the lower entry lst and the upper one ust
        (same type): a dict, empty if nothing but times."""
        d = {}
        low, up = _join(self.lower, rel_low), _join(self.upper, rel_up)
        kind = stat.S_IFMT(ust.st_mode)
        if kind == stat.S_IFREG:
            if lst.st_size != ust.st_size:
                d["size"] = [lst.st_size, ust.st_size]
                d["content"] = True
            elif not _same_bytes(low, up):
                d["content"] = True
        elif kind == stat.S_IFLNK:
            old, new = os.readlink(low), os.readlink(up)
            if old != new:
                d["target"] = [old, new]
                d["content"] = True
        elif kind in (stat.S_IFCHR, stat.S_IFBLK) and lst.st_rdev != ust.st_rdev:
            d["content"] = True
        if kind != stat.S_IFLNK:
            old, new = stat.S_IMODE(lst.st_mode), stat.S_IMODE(ust.st_mode)
            copied = kind == stat.S_IFDIR and not self.root_layer and new == old | 0o700
            if old != new and not copied:
                d["mode"] = [_mode(lst), _mode(ust)]
        if self.root_layer and (lst.st_uid, lst.st_gid) != (ust.st_uid, ust.st_gid):
            d["owner"] = [_owner(lst), _owner(ust)]
        if d:
            d.setdefault("content", False)
        return d

    def created(self, rel, ust):
        entry = {"path": self.path(rel), "type": file_type(ust)}
        self.out["created"][rel] = entry
        if stat.S_ISDIR(ust.st_mode):
            below = self._below(self.upper, rel, self.out["created"],
                                lambda dirpath, n: self.bookkeeping(dirpath, n))
            entry["entries"] = len(below)
            for r in below:
                self._note_origin(r)
        else:
            self._note_origin(rel)

    def deleted(self, rel, lst):
        entry = {"path": self.path(rel), "type": file_type(lst)}
        self.out["deleted"][rel] = entry
        if stat.S_ISDIR(lst.st_mode):
            entry["entries"] = len(self._below(self.lower, rel, self.out["deleted"], lambda dirpath, n: False))

    def _below(self, root, rel, out, own):
        """Every name below the directory rel of root (the upper layer, or
        the lower tree), each an entry of out "under" rel's path, but those
        own(dirpath, name) says are the layer's: their rels."""
        under = self.path(rel)
        rels = []
        for dirpath, dirnames, filenames in os.walk(_join(root, rel), onerror=lambda e: None):
            dirnames[:] = [n for n in dirnames if not own(dirpath, n)]
            base = os.path.relpath(dirpath, root)
            for n in sorted(dirnames + filenames):
                if own(dirpath, n):
                    continue
                r = _join(base, n)
                st = _lstat(_join(root, r))
                if st is not None:
                    out[r] = {"path": self.path(r), "type": file_type(st), "under": under}
                    rels.append(r)
        return rels

    def bookkeeping(self, directory, name):
        """Is name in the upper directory the layer's own (a whiteout, a
        marker), not a file of the view?"""
        return is_bookkeeping(os.path.join(directory, name), self.legacy)

    def _note_origin(self, rel):
        up = _join(self.upper, rel)
        origin = _origin(up)
        if origin is not None and origin != rel:
            self.origins[rel] = origin

    def walk(self):
        """Every directory of the upper layer that the view shows, from the
        root down (a stack, not recursion: paths may be deep)."""
        stack = [("", False)]  # (rel, the lower directory is hidden: opaque above)
        while stack:
            rel, hidden = stack.pop()
            up = _join(self.upper, rel)
            try:
                names = os.listdir(up)
            except OSError:
                continue
            if self.legacy:
                whiteouts, opaque, own = layerfmt.legacy_names({os.fsencode(n) for n in names})
                whiteouts, own = {os.fsdecode(n) for n in whiteouts}, {os.fsdecode(n) for n in own}
            else:
                own = {n for n in names if is_bookkeeping(_join(up, n))}
                whiteouts = {n for n in own if not layerfmt.is_own(os.fsencode(n))}
                opaque = layerfmt.is_opaque(up)
            opaque = hidden or opaque
            real = sorted(n for n in names if n not in own)
            low = _join(self.lower, rel)
            try:
                low_names = set(os.listdir(low)) if os.path.isdir(low) else set()
            except OSError:
                low_names = set()
            for n in real:
                r = _join(rel, n) if rel else n
                ust = _lstat(_join(up, n))
                if ust is None:
                    continue
                lst = _lstat(_join(low, n)) if n in low_names else None
                if lst is None:
                    self.created(r, ust)
                elif stat.S_IFMT(lst.st_mode) != stat.S_IFMT(ust.st_mode):
                    self.deleted(r, lst)  # replaced by another type of file
                    self.created(r, ust)
                else:
                    d = self.differences(r, lst, r, ust)
                    if d:
                        self.out["modified"][r] = {"path": self.path(r), "type": file_type(ust), **d}
                    if stat.S_ISDIR(ust.st_mode):
                        stack.append((r, opaque or n in whiteouts))
                    else:
                        self._note_origin(r)
            gone = low_names if opaque else whiteouts & low_names
            for n in sorted(gone - set(real)):
                r = _join(rel, n) if rel else n
                lst = _lstat(_join(low, n))
                if lst is not None:
                    self.deleted(r, lst)

    def renames(self):
        """Turn a deletion and a creation (or modification) into a rename
        where the new file's recorded origin is a lower file gone from the
        view."""
        deleted = self.out["deleted"]
        deleted_dirs = [r for r, e in deleted.items() if e["type"] == "dir"]
        used = set()
        for rel in sorted(self.origins):
            origin = self.origins[rel]
            gone = origin in deleted or any(origin.startswith(d + "/") for d in deleted_dirs)
            lst = _lstat(_join(self.lower, origin))
            ust = _lstat(_join(self.upper, rel))
            if not gone or origin in used or lst is None or ust is None or not stat.S_ISREG(lst.st_mode) \
                    or not stat.S_ISREG(ust.st_mode):
                continue
            used.add(origin)
            if deleted.get(origin, {}).get("type") == "file":
                del deleted[origin]
            self.out["modified"].pop(rel, None)
            self.out["created"].pop(rel, None)  # (inside a created directory: that one stays)
            entry = {"path": self.path(rel), "type": "file", "from": self.path(origin), "to": self.path(rel)}
            entry.update(self.differences(origin, lst, rel, ust))
            self.out["renamed"][rel] = entry


def is_bookkeeping(path, legacy=False):
    """Is the upper layer's path one of the layer's own files (a whiteout, a
    marker, the layer's records), not one of the view? legacy: the layer is
    in umview's first format."""
    name = os.fsencode(os.path.basename(path))
    if legacy:
        return name.startswith(layerfmt.LEGACY_WH)
    return layerfmt.is_own(name) or layerfmt.is_whiteout(_lstat(path))


def changes(upper, lower="/", target="/"):
    """What the layer upper changes in the tree lower, seen at target (the
    mount point: paths are reported under it). A dict:

        {"layer": upper, "target": target,
         "created": [...], "modified": [...], "deleted": [...], "renamed": [...]}

    Each list is sorted by path and holds dicts with "path" (absolute, in the
    view) and "type" (file, dir, symlink, fifo, socket, chardev, blockdev).
    Created and deleted directories carry "entries" (how many names below
    them), and each of those names is an entry of its own with "under" (the
    directory's path): every name is listed (docs/user-guide.md, "The
    report's JSON"). Modified and renamed entries say what
    changed: "content" (bool; bytes are compared only when the sizes are
    equal) and, when they changed, "size" [old, new], "mode" [old, new]
    (octal strings), "owner" ["uid:gid", "uid:gid"] (root's layers only),
    "target" [old, new] for symlinks. Renamed entries have "from" and "to".
    A name whose type changed is deleted and created. Times are not compared
    (see the module docstring)."""
    upper, lower, target = (os.path.abspath(os.fsdecode(p)) for p in (upper, lower, target))
    reader = _Reader(upper, lower, target)
    reader.walk()
    reader.renames()
    result = {"layer": upper, "target": target}
    for kind in KINDS:
        result[kind] = [reader.out[kind][r] for r in sorted(reader.out[kind])]
    return result


def describe(kind, entry):
    """One line of the human summary for an entry of changes()[kind]."""
    what = []
    if kind == "renamed":
        line = f"R {entry['from']} -> {entry['to']}"
    else:
        line = f"{kind[0].upper()} {entry['path']}"
    if kind in ("created", "deleted"):
        what.append(entry["type"])
        if "entries" in entry:
            n = entry["entries"]
            what.append(f"{n} {'entry' if n == 1 else 'entries'} below")
    if "size" in entry:
        what.append(f"size {entry['size'][0]} -> {entry['size'][1]}")
    elif entry.get("content") and "target" not in entry:
        what.append("content")
    if "target" in entry:
        what.append(f"target {entry['target'][0]} -> {entry['target'][1]}")
    if "mode" in entry:
        what.append(f"mode {entry['mode'][0]} -> {entry['mode'][1]}")
    if "owner" in entry:
        what.append(f"owner {entry['owner'][0]} -> {entry['owner'][1]}")
    return line + (f" ({', '.join(what)})" if what else "")


def top(entries):
    """The entries of a changes() list that are not below a created or
    deleted directory (what the human summary and apply take)."""
    return [e for e in entries if "under" not in e]


def summary(changes, limit=50):
    """A short human summary of changes(): the counts, then one line per
    entry (at most limit lines; the rest is counted). A created or deleted
    directory stands for the names below it."""
    counts = ", ".join(f"{len(top(changes[k]))} {k}" for k in KINDS)
    lines = [f"{counts} (layer {changes['layer']})"]
    entries = [(k, e) for k in KINDS for e in top(changes[k])]
    for k, e in entries[:limit]:
        lines.append(describe(k, e))
    if len(entries) > limit:
        lines.append(f"... and {len(entries) - limit} more (see the JSON report)")
    return "\n".join(lines)
