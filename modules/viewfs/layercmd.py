"""umview-layer: show what a kept layer changes, or apply it to the real tree.

    umview-layer diff LAYER [--target /] [--json]
    umview-layer apply LAYER [--target /] [--dry-run] [--yes] [--clear]

The "try an install, then keep it" workflow: ``umview --sandbox --keep-layer
L -- make install``, then ``umview-layer diff L``, then ``umview-layer apply
L``. What counts as a change is umview.modules.viewfs.layerdiff's. diff only reads: the
layer stays usable by a later view. apply makes the real tree what the view
showed: renames first (the old names are real files), then deletions, then
creations and modifications (data, mode, symlink targets; owners as root);
each change that fails is reported and the others go on; the exit status is
1 if any failed. After apply the layer still holds the same changes (a view
over it shows the same files, now also the real ones); ``--clear`` empties it
once every change was applied.
"""
import argparse
import json
import os
import shutil
import stat
import sys

from . import layerdiff, layerfmt
from umview.cliparse import Parser


def build_parser():
    p = Parser(
        prog="umview-layer",
        description="Show what a copy-on-write layer (umview --sandbox --keep-layer DIR, viewfs cow) "
        "changes in the real tree, or apply those changes to it.",
        epilog="examples:\n"
        "  umview --sandbox --keep-layer L -- make install\n"
        "  umview-layer diff L            what the install changed\n"
        "  umview-layer apply --dry-run L what apply would do\n"
        "  umview-layer apply --clear L   do it (asks first), then empty L",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, help_ in (("diff", "show what the layer changes (read only: the layer stays usable)"),
                        ("apply", "apply the layer's changes to the real tree, after confirmation: renames, "
                         "deletions, creations, modifications; a change that fails is reported and the others go "
                         "on (exit status 1). Refused inside a view and on a layer a running view uses")):
        a = sub.add_parser(name, help=help_.split(": renames")[0], description=help_)
        a.add_argument("layer", metavar="LAYER", help="the layer directory")
        a.add_argument("--target", default="/", metavar="DIR",
                       help="where the layer was mounted, the real tree it changes (default /)")
        if name == "diff":
            a.add_argument("--json", action="store_true", help="print the changes as JSON (as umview --report)")
        else:
            a.add_argument("--dry-run", action="store_true", help="show what would be done, change nothing")
            a.add_argument("--yes", "-y", action="store_true", help="do not ask (needed when stdin is no terminal)")
            a.add_argument("--clear", action="store_true",
                           help="once every change is applied, empty the layer (it then changes nothing)")
    return p


def _all_lines(changes):
    return [layerdiff.describe(k, e) for k in layerdiff.KINDS for e in layerdiff.top(changes[k])]


def diff_main(args, changes):
    if args.json:
        json.dump(changes, sys.stdout, indent=1)
        print()
    else:
        print(layerdiff.summary(changes, limit=len(_all_lines(changes))))
    return 0


class Applier:
    """Applies changes() to the real tree; failures are collected, never
    silent."""

    def __init__(self, changes):
        self.layer, self.target = changes["layer"], changes["target"]
        self.root = os.geteuid() == 0
        self.failed = []
        self.legacy = layerfmt.legacy(self.layer)

    def bookkeeping(self, path):
        return layerdiff.is_bookkeeping(path, self.legacy)

    def upper(self, path):
        rel = os.path.relpath(path, self.target)
        return os.path.join(self.layer, rel)

    def _attrs(self, src_st, path, owner=None):
        """The layer file's mode and times on path (and its owner as root)."""
        if owner is None:
            owner = self.root
        if owner:
            os.lchown(path, src_st.st_uid, src_st.st_gid)
        if not stat.S_ISLNK(src_st.st_mode):
            os.chmod(path, stat.S_IMODE(src_st.st_mode))
            os.utime(path, ns=(src_st.st_atime_ns, src_st.st_mtime_ns))

    def _make(self, src, dst):
        """dst as a copy of the layer's non-directory src."""
        st = os.lstat(src)
        kind = stat.S_IFMT(st.st_mode)
        if kind == stat.S_IFREG:
            shutil.copyfile(src, dst, follow_symlinks=False)
        elif kind == stat.S_IFLNK:
            os.symlink(os.readlink(src), dst)
        elif kind == stat.S_IFIFO:
            os.mkfifo(dst)
        elif kind in (stat.S_IFCHR, stat.S_IFBLK):
            os.mknod(dst, st.st_mode, st.st_rdev)
        else:
            raise OSError(0, "a socket is made by bind(2) when its program runs: not copied")
        self._attrs(st, dst)

    def _parents(self, path):
        """Make the missing directories above path, as the layer has them."""
        missing = []
        d = os.path.dirname(path)
        while not os.path.lexists(d):
            missing.append(d)
            d = os.path.dirname(d)
        for d in reversed(missing):
            os.mkdir(d)
            src = self.upper(d)
            if os.path.isdir(src):
                self._attrs(os.lstat(src), d)

    def created(self, e):
        path, src = e["path"], self.upper(e["path"])
        self._parents(path)
        if e["type"] != "dir":
            self._make(src, path)
            return
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames[:] = [n for n in dirnames if not self.bookkeeping(os.path.join(dirpath, n))]
            dst = os.path.normpath(os.path.join(path, os.path.relpath(dirpath, src)))
            if not os.path.isdir(dst):
                os.mkdir(dst)
            for n in filenames + [n for n in dirnames if os.path.islink(os.path.join(dirpath, n))]:
                if not self.bookkeeping(os.path.join(dirpath, n)):
                    self._step(f"C {os.path.join(dst, n)}", self._make, os.path.join(dirpath, n),
                               os.path.join(dst, n))
        for dirpath, _, _ in os.walk(src, topdown=False):  # modes last: a 0555 directory was filled first
            self._attrs(os.lstat(dirpath), os.path.normpath(os.path.join(path, os.path.relpath(dirpath, src))))

    def deleted(self, e):
        if e["type"] == "dir":
            shutil.rmtree(e["path"], onerror=lambda f, p, exc: self.failed.append(f"D {p}: {exc[1]}"))
        else:
            os.unlink(e["path"])

    def modified(self, e):
        path, src = e["path"], self.upper(e["path"])
        st = os.lstat(src)
        if e.get("content"):
            if e["type"] == "file":
                with open(src, "rb") as fsrc, open(path, "r+b") as fdst:  # in place: the file keeps its inode
                    shutil.copyfileobj(fsrc, fdst, 1 << 20)
                    fdst.truncate()
            else:  # a symlink or a device: replaced
                tmp = os.path.join(os.path.dirname(path), f".umview-layer-{os.getpid()}")
                self._make(src, tmp)
                os.rename(tmp, path)
                return
        if "owner" in e:
            os.lchown(path, st.st_uid, st.st_gid)
        self._attrs(st, path, owner=False)

    def renamed(self, e):
        self._parents(e["to"])
        os.rename(e["from"], e["to"])
        if any(k in e for k in ("content", "mode", "owner")):
            self.modified({**e, "path": e["to"]})

    def _step(self, line, fn, *args):
        try:
            fn(*args)
        except OSError as exc:
            self.failed.append(f"{line}: {exc.strerror or exc}")
            return False
        return True

    def apply(self, changes):
        done = 0
        for kind in ("renamed", "deleted", "created", "modified"):
            for e in layerdiff.top(changes[kind]):  # a directory brings what is below it
                line = layerdiff.describe(kind, e)
                before = len(self.failed)
                if self._step(line, getattr(self, kind), e) and len(self.failed) == before:
                    print(f"done: {line}")
                    done += 1
        return done


def _clear(layer):
    for n in os.listdir(layer):
        p = os.path.join(layer, n)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)


def apply_main(args, changes):
    lines = _all_lines(changes)
    if not lines:
        print(f"umview-layer: {args.layer} changes nothing in {args.target}")
        if args.clear and not args.dry_run:
            _clear(args.layer)  # what it holds (copies left as they were, times) is no change
            print(f"umview-layer: {args.layer} emptied")
        return 0
    print(layerdiff.summary(changes, limit=len(lines)))
    if args.dry_run:
        print("umview-layer: dry run: nothing changed")
        return 0
    if not args.yes:
        if not sys.stdin.isatty():
            print("umview-layer: stdin is not a terminal, so apply cannot ask: give --yes to apply "
                  "without asking, or --dry-run to see only", file=sys.stderr)
            return 2
        answer = input(f"Apply these {len(lines)} changes to {changes['target']}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("umview-layer: nothing changed")
            return 1
    applier = Applier(changes)
    done = applier.apply(changes)
    for f in applier.failed:
        print(f"umview-layer: FAILED: {f}", file=sys.stderr)
    print(f"umview-layer: {done} of {len(lines)} changes applied" +
          (f", {len(applier.failed)} failures (above)" if applier.failed else ""))
    if args.clear:
        if applier.failed:
            print("umview-layer: the layer is kept (--clear): not every change was applied", file=sys.stderr)
        else:
            _clear(args.layer)
            print(f"umview-layer: {args.layer} emptied")
    return 1 if applier.failed else 0


def main(argv=None):
    args = build_parser().parse_args(argv)
    from umview import control  # lazy: ctypes, for one private syscall (ENOSYS outside a view)

    if control.in_view():
        if args.action == "apply" and not args.dry_run:
            print("umview-layer: inside a umview view the real tree is not what the view shows (the changes "
                  "would land in the view's own layer): run apply outside umview", file=sys.stderr)
            return 2
        print(f"umview-layer: inside a umview view: {args.target} is compared as this view shows it, which "
              "may not be the real tree (run umview-layer outside umview for that)", file=sys.stderr)
    if not os.path.isdir(args.layer):
        print(f"umview-layer: {args.layer}: not a directory (a layer: umview --sandbox --keep-layer DIR)",
              file=sys.stderr)
        return 2
    why = layerfmt.why_not_a_layer(args.layer)
    if why is not None:
        print(f"umview-layer: {args.layer} is not a layer: {why} (a layer: umview --sandbox --keep-layer DIR, "
              "or a viewfs cow mount's SOURCE)", file=sys.stderr)
        return 2
    lock = None
    if args.action == "apply" and not args.dry_run:
        try:
            lock = layerdiff.lock_for_apply(args.layer)
        except BlockingIOError:
            print(f"umview-layer: {args.layer} is in use by a running view: end it, then apply", file=sys.stderr)
            return 2
        except OSError as exc:
            print(f"umview-layer: {args.layer}: {exc.strerror}", file=sys.stderr)
            return 2
    try:
        changes = layerdiff.changes(args.layer, args.target, args.target)
        return (diff_main if args.action == "diff" else apply_main)(args, changes)
    except OSError as exc:
        print(f"umview-layer: {exc.filename or args.layer}: {exc.strerror}", file=sys.stderr)
        return 2
    finally:
        if lock is not None:
            os.close(lock)


if __name__ == "__main__":
    sys.exit(main())
