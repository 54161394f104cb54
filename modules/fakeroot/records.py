"""What a fakeroot view remembers of files: the owner, group, mode and device
type a process set and the kernel would not (or was not asked to) make real.

Records are keyed by the file's (st_dev, st_ino), as fakeroot's faked keys
them: a rename or a hard link keeps the record, a copy does not. They live
in memory for the view's life and may be kept on disk:

- ``db=FILE`` (fakeroot -s/-i): a JSON list of records with their device and
  inode numbers, read at start if it exists and written at the end. Like
  fakeroot's, it is right only while those files keep their inodes (the same
  file system, not restored from a copy).
- a copy-on-write layer (viewfs cow, ``--sandbox --keep-layer``): the records
  of files of the upper layer are kept in the layer, in ``.wh..wh.umview-
  fakeroot.json`` at its root (a name umview.modules.viewfs.layerfmt reserves for the layer's own
  metadata: the view does not show it, ``umview-layer`` skips it), keyed by
  the path in the layer, found again at the end by walking the layer (so a
  file renamed in the view keeps its record). A later view on the layer reads
  them back by path: the inode numbers of a layer copied or moved elsewhere
  change, its paths do not. Every record of a file a view has changed is in
  the upper layer, since a chown or chmod copies the file up first; records
  of files elsewhere (the sandbox's private /tmp) last the view's life.
"""
import json
import logging
import os
import stat

from umview.modules.viewfs import layerfmt

log = logging.getLogger("umview")

LAYER_FILE = layerfmt.RESERVED + b"umview-fakeroot.json"  # the layer's own: the view never shows it
FIELDS = ("uid", "gid", "mode", "kind", "rdev")


class Records:
    """(dev, ino) -> {field: value} for the FIELDS a process set: uid, gid,
    mode (the permission bits, 0o7777), kind and rdev (a device that mknod
    made as an empty regular file)."""

    def __init__(self):
        self.by_key = {}

    def get(self, key):
        return self.by_key.get(key)

    def set(self, key, **fields):
        self.by_key.setdefault(key, {}).update(fields)

    def forget(self, key):
        self.by_key.pop(key, None)

    # --- fakeroot -s / -i ---
    def load_db(self, path):
        try:
            with open(path) as f:
                entries = json.load(f)
            for e in entries:
                self.set((int(e["dev"]), int(e["ino"])), **{k: int(e[k]) for k in FIELDS if k in e})
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"module fakeroot: db={path}: cannot read it ({exc!r}); give a file "
                             "that an earlier fakeroot view wrote, or a new name") from None

    def save_db(self, path):
        entries = [{"dev": dev, "ino": ino, **fields} for (dev, ino), fields in sorted(self.by_key.items())]
        _write_json(path, entries)

    # --- a copy-on-write layer ---
    def load_layer(self, upper):
        try:
            with open(os.path.join(upper, LAYER_FILE)) as f:
                entries = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("fakeroot: the owners kept in the layer %s cannot be read (%s): files there show "
                        "their real owners", os.fsdecode(upper), exc)
            return
        try:
            for rel, fields in entries.items():
                try:
                    st = os.lstat(os.path.join(upper, os.fsencode(rel)))
                except OSError:
                    continue  # removed since, from outside a view
                self.set((st.st_dev, st.st_ino), **{k: int(fields[k]) for k in FIELDS if k in fields})
        except (AttributeError, TypeError, ValueError) as exc:
            log.warning("fakeroot: the owners kept in the layer %s are not as a fakeroot view writes them "
                        "(%r): some files show their real owners", os.fsdecode(upper), exc)

    def save_layer(self, upper):
        """Write the records of the files in the layer upper; the others are
        left out (they do not outlive the view)."""
        try:
            dev = os.lstat(upper).st_dev
        except OSError:
            return
        wanted = {ino for d, ino in self.by_key if d == dev}
        out = {}
        if wanted:
            for dirpath, dirnames, filenames in os.walk(upper):
                for n in dirnames + filenames:
                    p = os.path.join(dirpath, n)
                    try:
                        st = os.lstat(p)
                    except OSError:
                        continue
                    if st.st_dev == dev and st.st_ino in wanted:
                        out[os.fsdecode(os.path.relpath(p, upper))] = self.by_key[(dev, st.st_ino)]
        path = os.path.join(upper, LAYER_FILE)
        if out:
            _write_json(path, out)
        elif os.path.exists(path):
            os.unlink(path)


def _write_json(path, data):
    tmp = path + (b".tmp" if isinstance(path, bytes) else ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=0, sort_keys=True)
    os.replace(tmp, path)


def shown(records, real, my_ids, st):
    """(mode, uid, gid, rdev) a stat shows for a file whose kernel stat is
    st = (dev, ino, mode, uid, gid, rdev): its record's, else the real ones
    with the view's user's own ids (real) shown as the view's ids (my_ids),
    as fakeroot shows the user's files as root's."""
    dev, ino, mode, uid, gid, rdev = st
    rec = records.get((dev, ino)) or {}
    uid = rec.get("uid", my_ids[0] if uid == real[0] else uid)
    gid = rec.get("gid", my_ids[1] if gid == real[1] else gid)
    if "mode" in rec:
        mode = stat.S_IFMT(mode) | rec["mode"]
    if "kind" in rec and stat.S_ISREG(mode):
        mode = rec["kind"] | stat.S_IMODE(mode)
        rdev = rec.get("rdev", rdev)
    return mode, uid, gid, rdev
