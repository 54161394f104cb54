"""The viewfs module's engine side: Viewfs (the module), its mounts
(ViewfsMount, ReadOnlyMount, and LayeredMount from layers.py) and
MountControl, which serves mount(2) and umount2(2) for the viewfs type.
What the module does, and its options, is the package's docstring
(__init__.py).
"""
import errno
import logging
import os

from umview import core
from umview.engine import CONTINUE, Engine, Skip
from umview.service import Module, RedirectMount
from umview.syscalls import PATH_SYSCALLS, calls

from . import readonly
from .layers import FD_CHANGES, LISTING_CALLS, OPENS, PSEUDO, LayeredMount, written_path

log = logging.getLogger("umview")

MODES = ("move", "merge", "cow", "mincow", "ro")
LAYERED = ("merge", "cow", "mincow")
MS_RDONLY = 1


class ViewfsMount(RedirectMount):
    def __init__(self, source, target, mode, exceptions=()):
        self.source = source.rstrip(b"/") or b"/"
        #: the source as the engines older than the mount name it (set by
        #: the module: where it lies under an older mount, not the real path)
        self.given = self.source
        self.mode = mode
        super().__init__(target, self._real, name=f"viewfs {target.decode(errors='replace')}",
                         exceptions=exceptions)
        # a cwd or dirfd in the source, where the kernel resolves names by
        # itself: ".." from there must be walked in the view
        self.alias_prefixes = (self.source,) if self.source != b"/" else ()
        if mode == "move":
            self.move_prefixes = ((self.target, self.source),)
            self.move_exceptions = self.exceptions

    def older_view_of(self, path):
        """The view's path of a path under the source as the engines older
        than this mount name it (self.given), or None."""
        given = self.given
        if path == given or path.startswith(given.rstrip(b"/") + b"/"):
            v = self.target.rstrip(b"/") + path[len(given.rstrip(b"/")):] or b"/"
            return v if self.relative(v) is not None else None
        return None

    def virtual_of(self, real):
        """The view's path of a real path under the source, or None."""
        src = self.source
        if real == src or real.startswith(src.rstrip(b"/") + b"/"):
            v = self.target.rstrip(b"/") + real[len(src.rstrip(b"/")):] or b"/"
            return v if self.relative(v) is not None else None
        return None

    def _real(self, rel):
        if not rel:
            return self.source
        return (self.source if self.source != b"/" else b"") + b"/" + rel


def _reachable(source, target, exceptions):
    """The except= paths of a move (or ro) mount, each from its highest
    directory the source lacks: a path of the host kept at a place the tree
    has no directories for (-r's $HOME, a --host-paths directory in /var/tmp)
    is then reached as the kernel reaches a bind mount's, one lookup at a
    time (realpath, ls of its parent), and the host's directory shows there
    (a bind mount would need one made in the tree)."""
    out = []
    for e in exceptions:
        rel = e[len(target):].strip(b"/") if target != b"/" else e.strip(b"/")
        parts = rel.split(b"/") if rel else []
        src, view = source.rstrip(b"/"), target.rstrip(b"/")
        for part in parts[:-1]:
            src, view = src + b"/" + part, view + b"/" + part
            if os.path.islink(src):
                break  # the tree's symlink: its own meaning, not the host's
            if not os.path.lexists(src):
                e = view
                break
        out.append(e)
    return list(dict.fromkeys(out))


class ReadOnlyMount(ViewfsMount):
    """Mode ro: SOURCE at TARGET as move shows it, and every call that would
    change a file there fails with EROFS, as on a file system mounted
    read-only. The calls that change are the syscall table's (Call.writes()),
    plus those that change an open file by its fd alone (fchmod, fchown,
    fsetxattr...). Where SOURCE is TARGET (a read-only view of the tree
    itself) the mount is a layered prefix with nothing in its layer set: the
    C core hands Python only the calls that write, the others run natively.
    /proc, /sys and /dev stay writable, as in a cow view."""

    def __init__(self, source, target, exceptions=()):
        super().__init__(source, target, "ro", exceptions)
        self.name += " (ro)"
        self.exceptions += tuple(p for p in PSEUDO if self.relative(p) is not None)
        self.syscalls = self.syscalls | frozenset(FD_CHANGES)
        if self.source == self.target:
            self.prefixes = ()
            self.layered_prefixes = (self.target,)
            self.real_prefixes = self.exceptions

    def _fd_file(self, call):
        path = core.proc_link(call.tid, core.signed32(call.args[0]))
        return path is not None and path.startswith(b"/") and self.relative(path) is not None

    def wants(self, call):
        if call.name in FD_CHANGES:
            return self._fd_file(call)
        return super().wants(call)

    def enter(self, call):
        if call.name in FD_CHANGES:
            return Skip.errno(errno.EROFS)
        if call.name in self.unix_addr_syscalls:
            if call.name == "bind":
                path = self._socket_path(call)
                # a socket file would be made there
                return Skip.errno(readonly.refusal(call, {0: self._real(self.relative(os.path.normpath(path)))})
                                  if path else errno.EROFS)
            return super().enter(call)
        if call.writes():
            (reals, others), bad = self._reals(call), readonly.unreadable(call)
            if reals or bad and self.target == b"/":
                flags = None
                if call.name in OPENS:
                    flags = call.open_flags()
                err = readonly.refusal(call, reals, flags, bad, others)
                if err:
                    return Skip.errno(err)
        return CONTINUE if self.source == self.target else super().enter(call)

    def _reals(self, call):
        """({path slot: its real path} for the path arguments under the
        mount, {path slot: path} for those elsewhere), as written (".",
        ".." and a trailing "/" kept: the kernel's checks need them), made
        absolute."""
        out, others = {}, {}
        for slot, path in enumerate(LayeredMount._paths(call)):
            if path is None:
                continue
            raw = written_path(call, slot) or b""
            if self.relative(path) is None:
                if raw:
                    others[slot] = raw
                continue
            lit = self.literal_relative(raw) if raw else None
            rel = lit if lit is not None else self.relative(path) + (b"/" if raw.endswith(b"/") else b"")
            out[slot] = self._real(rel)
        return out, others


class MountControl(Engine):
    """Serves mount(2) and umount2(2) for the viewfs type (and its aliases)."""

    name = "viewfs"
    syscalls = calls("classic-mounts")
    mounts_later = True
    # trapped from the start for the layered mounts made later (their listings)
    fd_syscalls = LISTING_CALLS
    # newer than every mount, so that umount of a target reaches it before
    # the mount on that target rewrites the path to its source
    newest = True

    def __init__(self, module):
        self.module = module
        self.path_syscalls = PATH_SYSCALLS  # trapped from the start: mounts come later

    def wants(self, call):
        return call.name in self.syscalls

    def enter(self, call):
        if call.name == "mount":
            if not call.raw("fstype"):
                return CONTINUE
            fstype = call.read_string(call.index_of("fstype"), 256)
            if fstype.decode(errors="replace") not in self.module.fstypes:
                return CONTINUE
            source = call.source
            target = call.paths()[0]
            data = call.read_string(call.index_of("data")).decode(errors="replace") if call.raw("data") else ""
            if call.raw("flags") & MS_RDONLY:
                data += ",ro"
            self.module.mount(call.tid, source, target, data)
            return Skip(0)
        target = call.paths()[0]
        if target is not None and self.module.umount(target):
            return Skip(0)
        return CONTINUE


class Viewfs(Module):
    name = "viewfs"
    description = "mount a real directory over a path (modes move, merge, cow, mincow, ro)"
    options_help = ("mount=SOURCE:TARGET[:MODE] (mount at start; repeat with ;); "
                    "except=P1:P2 (absolute subpaths those mounts leave to the older mounts and the real tree); "
                    "fresh (a layered mount over an older layered one starts from what lay under it)")

    def __init__(self, options):
        super().__init__(options)
        self.check_options({"mount", "except", "fresh"})
        if self.options.get("fresh") not in (None, True):
            raise ValueError("module viewfs: fresh takes no value")
        self.initial_fresh = "fresh" in self.options
        spec_except = self.options.get("except")
        if spec_except is True or (spec_except and not all(p.startswith("/") for p in spec_except.split(":"))):
            raise ValueError("module viewfs: except=P1:P2 wants absolute paths")
        self.initial_except = tuple(os.fsencode(os.path.normpath(p))
                                    for p in (spec_except or "").split(":") if p)
        self.fstypes = {"viewfs"}
        self.mounts = []
        self.control = MountControl(self)
        self.initial = []
        spec = self.options.get("mount")
        if spec is not None:
            for source, target, mode in self.mount_specs(spec, "MODE"):
                self.initial.append((os.fsencode(os.path.abspath(source)),
                                     os.fsencode(os.path.abspath(target)), mode or "move"))

    def engines(self):
        # made now, when the engines loaded before this module are known: a
        # SOURCE may lie under /unreal, or under an earlier mount
        try:
            self.initial = [self._make(source, target, mode, at_start=True,
                                       exceptions=[e for e in self.initial_except
                                                   if e == target or e.startswith(target.rstrip(b"/") + b"/")],
                                       fresh=self.initial_fresh)
                            for source, target, mode in self.initial]
        except ValueError:
            self.close()  # the mounts made before the one refused: their listing directories go
            raise
        return [self.control, *self.initial]

    def start(self):
        for m in self.initial:
            if hasattr(m, "attach"):
                m.attach()

    def busy(self):
        # the mounts of its options go with the service (um_del_service)
        return any(m not in self.initial for m in self.mounts)

    def close(self):
        for m in self.mounts:
            if hasattr(m, "detach"):
                m.detach()

    def _make(self, source, target, mode, at_start=False, exceptions=(), fresh=False):
        if mode not in MODES:
            raise (ValueError(f"module viewfs: unknown mode {mode!r}") if at_start
                   else OSError(errno.EINVAL, f"unknown viewfs mode {mode!r}"))
        given, source = source, self.real_path(source)
        # before the layer is made: a refused mount leaves nothing behind
        under = self._layered_over(target) if mode in LAYERED else None
        if under is not None and not fresh:
            msg = (f"a {mode} mount over {os.fsdecode(target)}, which the layered mount of "
                   f"{os.fsdecode(under.target)} shows, is not supported (its lower layer would not be "
                   "what that mount shows): unmount that one first, mount elsewhere, or add the option "
                   "fresh (start from what lay under that mount, hiding its changes)")
            if at_start:
                raise ValueError("module viewfs: " + msg)
            log.warning("viewfs: %s: mount refused with EBUSY", msg)
            raise OSError(errno.EBUSY, msg)
        if under is not None and mode != "cow":
            # merge and mincow write lower files in place: beside the older
            # mount, that would be the tree it protects
            msg = f"fresh goes with cow (a {mode} mount beside the layered mount of {os.fsdecode(under.target)})"
            if at_start:
                raise ValueError("module viewfs: " + msg)
            log.warning("viewfs: %s: mount refused with EINVAL", msg)
            raise OSError(errno.EINVAL, msg)
        if under is not None and under.relative(source) is not None:
            # a fresh mount writes its layer for real: it must lie where the
            # older mount writes for real too (its own layer, its except=
            # paths such as a sandbox's /tmp), never in the tree it protects
            msg = (f"the layer {os.fsdecode(given)} of a fresh {mode} mount lies in what the layered mount "
                   f"of {os.fsdecode(under.target)} keeps copy-on-write: make it in a directory that mount "
                   "writes for real (its layer, an except= path such as a sandbox's /tmp)")
            if at_start:
                raise ValueError("module viewfs: " + msg)
            log.warning("viewfs: %s: mount refused with EPERM", msg)
            raise OSError(errno.EPERM, msg)
        if mode in LAYERED and not os.path.lexists(source):
            try:
                os.makedirs(source, 0o700)
                os.chmod(source, 0o700 | os.stat(self.real_path(target)).st_mode & 0o7777)
            except OSError as exc:
                if at_start:
                    raise ValueError(f"module viewfs: cannot make layer {os.fsdecode(given)}: {exc.strerror}") from None
                raise
        if not os.path.isdir(source):
            err = errno.ENOTDIR if os.path.exists(source) else errno.ENOENT
            if at_start:
                raise ValueError(f"module viewfs: source {os.fsdecode(given)}: {os.strerror(err)}")
            raise OSError(err, "source")
        name = f"viewfs {target.decode(errors='replace')}"
        if mode in ("move", "ro"):
            exceptions = _reachable(source, target, exceptions)
            m = ViewfsMount(source, target, mode, exceptions) if mode == "move" else ReadOnlyMount(source, target, exceptions)
            # its source is real already: a move mount that made it so must
            # not rewrite the paths made of it again (a source in a
            # sandbox's /tmp, itself in the real /tmp). A layered one sees
            # them (its copy-on-write holds there too)
            m.replaces = frozenset(e for e in self.realized_by(given, own=self.mounts)
                                   if not isinstance(e, LayeredMount))
            m.given = os.path.normpath(given) if given.startswith(b"/") else m.source
        elif under is None:
            m = LayeredMount(source, target, self.real_path(target), mode, name + f" ({mode})", exceptions)
        else:
            lower, kept, older = self._beside(under, target)
            m = LayeredMount(source, target, lower, mode, name + f" ({mode}, fresh)", (*exceptions, *kept))
            m.replaces = frozenset(older)
            m.host = next(((e, source[len(e.layers.upper) + 1:]) for e in reversed(self._stack())
                           if isinstance(e, LayeredMount) and source.startswith(e.layers.upper + b"/")), None)
        self.mounts.append(m)
        return m

    def _stack(self):
        """The engines a mount made now would stand on, oldest first: those
        of the running view, else the ones loaded before and this module's
        mounts so far."""
        return list(self.view.engines if self.view is not None else (*self.older, *self.mounts))

    def _layered_over(self, target):
        """The newest layered mount (merge, cow, mincow) of the view that
        target lies at or under, or None."""
        for e in reversed(self._stack()):
            if isinstance(e, LayeredMount) and e.relative(target) is not None:
                return e
        return None

    def _beside(self, under, target):
        """A fresh layered mount on target beside the layered mount under:
        (its lower layer, the subpaths it leaves to the older engines, the
        mounts it replaces). The lower layer is what lay under that mount at
        target (the real tree for a cow view of /); the paths that mount
        left to others (its exceptions) and the mounts made over it since
        under target (a sandbox's private /tmp) stay as they are. Its paths
        are real (its layers were realized when made): no older mount
        resolves again a path it resolved."""
        lower = under.layers.low(under.relative(target))
        stack = self._stack()
        newer = stack[stack.index(under) + 1:] if under in stack else []
        below = target.rstrip(b"/") + b"/"
        kept = [e for e in under.exceptions if e.startswith(below)]
        kept += [e.target for e in newer if isinstance(e, RedirectMount)
                 and e.target != target and e.target.startswith(below)]
        return lower, tuple(dict.fromkeys(kept)), [e for e in stack if isinstance(e, RedirectMount)]

    def mount(self, tid, source, target, data):
        """mount(2) of type viewfs, from a process of the view."""
        if target is None:
            raise OSError(errno.ENOENT, "target")
        opts = [o for o in data.split(",") if o]
        modes = [o for o in opts if o in MODES]
        fresh = "fresh" in opts
        exceptions = []
        for o in opts:
            if o.startswith("except="):
                for e in filter(None, o[len("except="):].split(":")):
                    e = os.fsencode(e)
                    full = os.path.normpath(e if e.startswith(b"/") else target.rstrip(b"/") + b"/" + e)
                    if full.startswith(b"//"):  # normpath keeps POSIX's implementation-defined "//"
                        full = b"/" + full.lstrip(b"/")
                    if not (full + b"/").startswith(target.rstrip(b"/") + b"/"):
                        log.warning("viewfs: except=%s is not under %s: mount refused with EINVAL",
                                    os.fsdecode(e), os.fsdecode(target))
                        raise OSError(errno.EINVAL, "except")
                    exceptions.append(full)
        unknown = [o for o in opts if o not in MODES and o not in ("rw", "defaults", "fresh")
                   and not o.startswith("except=")]
        if unknown:
            log.warning("viewfs: unknown mount option(s) %s: mount refused with EINVAL", ",".join(unknown))
            raise OSError(errno.EINVAL, "options")
        if not source.startswith(b"/"):
            source = os.fsencode(os.readlink(f"/proc/{tid}/cwd")) + b"/" + source
        source = os.fsencode(os.path.normpath(source))
        if not os.path.isdir(self.real_path(target)):
            # as mount(2): the mount point must be an existing directory
            raise OSError(errno.ENOTDIR if os.path.exists(self.real_path(target)) else errno.ENOENT, "target")
        m = self._make(source, target, modes[-1] if modes else "move", exceptions=exceptions, fresh=fresh)
        self.view.add_engine(m)
        if hasattr(m, "attach"):
            m.attach()

    def real_path(self, path):
        """path as the kernel would see it through the mounts older than a new
        one: this module's and the other modules' (the nested view)."""
        return self.realize(path, own=self.mounts)

    def umount(self, target):
        """umount2(2): remove the newest viewfs mount on target; False if none.
        The mounts of the module's options (at start, or of um_add_service)
        are locked, as the kernel locks the mounts a less privileged
        namespace inherits: um_del_service removes them, umount2 does not
        (a sandbox's cow view of / must not go away from inside)."""
        for m in reversed(self.mounts):
            if m.target == target and m not in self.initial:
                self.mounts.remove(m)
                self.view.remove_engine(m)
                if hasattr(m, "detach"):
                    m.detach()
                return True
        return False
