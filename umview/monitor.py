"""The monitor: mirrors the engines' claims into the C core, runs the loop,
and walks the engine pipeline for each call the C core hands to Python.

The pipeline of one claimed call (``Dispatcher.enter`` / ``Dispatcher.exit``):
engines newest first at entry, each may pass, rewrite or skip; the first Skip
ends the walk; at exit the engines that asked are called oldest first.
"""
import errno
import functools
import itertools
import os
import sys

from umview import control, core
from umview.core import ffi, lib
from umview.engine import CONTINUE, CONTINUE_AFTER, Call, Engine, Skip, under_any
from umview.ptrace import InnerTracing
from umview.servicecontrol import ServiceControl
from umview.syscalls import calls
from umview.views import View

ABI_IDS = {"x86_64": lib.UM_ABI_X86_64, "i386": lib.UM_ABI_I386, "x32": lib.UM_ABI_X32}
# ptrace's numbers, trapped even in a view with no syscall table (emulated: umview.ptrace)
_PTRACE_NRS = ((lib.UM_ABI_X86_64, 101), (lib.UM_ABI_I386, 26))


def _syscall_table():
    # deliberately lazy: the syscall tables (umview.syscalls, umview.arch) cost
    # 30-50 ms to import, paid only when an engine is loaded; with none,
    # umview's start-up is what it adds to a command
    from umview.syscalls.core_tables import SyscallTable

    return SyscallTable()


def _log():
    import logging  # lazy: 13 ms of start-up, paid only when something is logged

    return logging.getLogger("umview")


@functools.lru_cache(maxsize=None)
def _getpid_nr(abi):
    from umview import arch

    return arch.abi_by_name(abi).numbers["getpid"]


class _Pending:
    """A call waiting for its exit stop, and the engines that asked for it."""

    __slots__ = ("call", "engines", "result")

    def __init__(self, call, engines, result=None):
        self.call = call
        self.engines = engines
        #: the result of a call run already (Call.run_anchored), or None
        self.result = result


#: calls that may change what the kernel checks a process's access with
#: (UM_CLAIM_CREDS; with their variants, i386's 32-bit id calls)
CREDS_CALLS = calls("creds")


class Dispatcher:
    """The engine pipeline. Engines are kept per view (umview.views) in
    registration order (their epoch); a call walks the stack of its thread's
    view, newest first at entry, oldest first at exit."""

    def __init__(self, table):
        self.table = table
        self.root = View(0)
        #: the open views, the root first; a view comes after its parent
        self.views = [self.root]
        #: the view of each thread of a nested view (the others are the root's)
        self.member = {}
        self._epochs = itertools.count(1)  # one counter for every registration
        self._view_ids = itertools.count(1)
        #: called with a nested view whose last process is gone (the Monitor closes it)
        self.on_empty = None

    @property
    def engines(self):
        """The engines of every view (the union the C core's tables mirror);
        with one view, in the order of its stack."""
        if len(self.views) == 1:
            return self.root.own
        return [e for v in self.views for e in v.own]

    def add(self, engine, view=None):
        """Register an engine in view (the root if None): it gets the next
        epoch and becomes the newest of that view, below those marked newest."""
        if not isinstance(engine, Engine):
            raise TypeError(f"{engine!r} is not an umview Engine")
        view = view or self.root
        engine.epoch = next(self._epochs)
        own = view.own
        at = len(own)
        # newest is a rank: True (1) stays above plain engines, 2 above those
        while at > 0 and int(own[at - 1].newest) > int(engine.newest):
            at -= 1
        own.insert(at, engine)
        view.changed()
        self._refresh_mount_prefixes()

    def remove(self, engine):
        for view in self.views:
            if engine in view.own:
                view.own.remove(engine)
                view.changed()
                break
        else:
            raise ValueError(f"engine {engine.name} is not registered")
        self._refresh_mount_prefixes()

    def _refresh_mount_prefixes(self):
        # engines that follow the mounts (the cwd tracker) learn those of
        # their view's stack, oldest first
        for view in self.views:
            mounts = None
            for e in view.own:
                if hasattr(e, "set_mounts"):
                    if mounts is None:
                        mounts = tuple(m for m in view.engines if getattr(m, "target", None))
                    e.set_mounts(mounts)

    # --- views ---
    def view_of(self, tid):
        return self.member.get(tid, self.root)

    def new_view(self, parent):
        """A nested view in parent, with no engine and no process yet."""
        view = View(next(self._view_ids), parent, parent.monitor)
        parent.children.append(view)
        self.views.append(view)
        return view

    def join(self, view, tids):
        """Move threads into view (a nested view's requester, an attached process)."""
        left = set()
        for t in tids:
            old = self.member.pop(t, None)
            if old is not None:
                old.tids.discard(t)
                left.add(old)
            if view is not self.root:
                self.member[t] = view
                view.tids.add(t)
        for old in left:
            self._close_if_empty(old)

    def drop_view(self, view):
        """Forget a nested view (its engines, its threads)."""
        for t in view.tids:
            self.member.pop(t, None)
        view.tids.clear()
        view.own.clear()
        self.views.remove(view)
        view.parent.children.remove(view)
        view.changed()
        self._refresh_mount_prefixes()

    def _close_if_empty(self, view):
        while view.parent is not None and not view.tids and not view.children and view in self.views:
            parent = view.parent
            if self.on_empty is not None:
                self.on_empty(view)
            else:
                self.drop_view(view)
            view = parent

    # --- process events (the Monitor's hooks: each goes to the engines of
    # the thread's view; a child joins its parent's view) ---
    def on_fork(self, parent_tid, child_tid, thread):
        view = self.member.get(parent_tid)
        if view is not None:
            self.member[child_tid] = view
            view.tids.add(child_tid)
        for e in (view or self.root).hooks("on_fork"):
            _run_hook(e.on_fork, parent_tid, child_tid, thread)

    def on_exec(self, tid, former_tid):
        if former_tid != tid:
            # a non-leader thread execed: it now has the leader's tid
            view = self.member.pop(former_tid, None)
            if view is not None:
                view.tids.discard(former_tid)
        for e in self.view_of(tid).hooks("on_exec"):
            _run_hook(e.on_exec, tid, former_tid)

    def on_exit(self, tid):
        for e in self.view_of(tid).hooks("on_exit"):
            _run_hook(e.on_exit, tid)

    def on_exit_status(self, tid, status):
        view = self.view_of(tid)
        for e in view.hooks("on_exit_status"):
            _run_hook(e.on_exit_status, tid, status)
        if view is not self.root:
            del self.member[tid]
            view.tids.discard(tid)
            self._close_if_empty(view)

    # --- claims -> C tables ---
    def claims(self):
        """(name -> claim bits, prefix -> UM_PREFIX_* kind) for the union of all
        engines. A path one engine claims plain and another layered or real
        is plain; one claimed layered and real is layered: the kind that sends
        more calls to Python wins."""
        modes = self.modes(self.engines)
        prefixes = {}
        rank = {lib.UM_PREFIX_PLAIN: 6, lib.UM_PREFIX_KERNEL: 5, lib.UM_PREFIX_LAYERED: 4, lib.UM_PREFIX_DEVICES: 3,
                lib.UM_PREFIX_ALIAS: 2, lib.UM_PREFIX_ALIAS_CLEAN: 1, lib.UM_PREFIX_REAL: 0}
        hidden = self._hidden_prefixes()
        for e in self.engines:
            alias = lib.UM_PREFIX_ALIAS_CLEAN if self._clean(e) else lib.UM_PREFIX_ALIAS
            for kind, paths in ((lib.UM_PREFIX_PLAIN, e.prefixes), (lib.UM_PREFIX_KERNEL, e.kernel_prefixes),
                                (lib.UM_PREFIX_LAYERED, e.layered_prefixes),
                                (lib.UM_PREFIX_DEVICES, e.device_prefixes),
                                (lib.UM_PREFIX_REAL, e.real_prefixes), (alias, e.alias_prefixes)):
                for p in paths:
                    p = p.encode() if isinstance(p, str) else p
                    if (id(e), p) in hidden:
                        continue
                    if p not in prefixes or rank[kind] > rank[prefixes[p]]:
                        prefixes[p] = kind
        self.move_sources = self.moves(prefixes)
        for target in self.move_sources:
            prefixes[target] = lib.UM_PREFIX_MOVE
        self.layer_uppers = self.uppers(prefixes)
        for e in self.engines:
            for target, _ in e.move_prefixes:
                if target in self.move_sources:
                    for p in e.move_exceptions:
                        prefixes.setdefault(p, lib.UM_PREFIX_REAL)
        # a variant an engine claims under the neutral name but did not name
        # itself: trapped and refused, never let through undecoded. With
        # nested views, refused in Python for the views that claim it
        # (View.refused), so that another view's processes keep it
        refuse = lib.UM_CLAIM_REFUSE if len(self.views) == 1 else lib.UM_CLAIM_ALL
        for name in list(modes):
            for other in self.table.variants.get(name, ()):
                if other not in modes:
                    modes[other] = refuse
        if self.move_sources or self.layer_uppers:
            # C serves calls as the monitor: it looks again at a process
            # whose identity may have changed
            for name in CREDS_CALLS:
                for n in (name, *self.table.variants.get(name, ())):
                    if n in self.table.index:
                        modes[n] = modes.get(n, 0) | lib.UM_CLAIM_CREDS
        return modes, prefixes

    #: the move mounts whose calls the C core may serve: target -> source
    move_sources = {}
    #: the layered prefixes whose upper files the C core may serve reads of:
    #: target -> upper directory
    layer_uppers = {}

    def uppers(self, prefixes):
        """target -> upper of the layered prefixes (Engine.layer_uppers) whose
        upper files the C core may serve reads of: one view, the prefix is
        layered in the union, and no engine but its own (and the cwd tracker,
        which follows it) has a prefix at or over the target: what the engine
        chain makes of a read there is then the layer's rewrite alone. A
        prefix under the target is no matter: a path there is that prefix's
        (the longest). UMVIEW_SERVE=0 turns this off."""
        if len(self.views) != 1 or os.environ.get("UMVIEW_SERVE", "1") == "0":
            return {}
        out = {}
        for e in self.engines:
            for target, upper in e.layer_uppers:
                if prefixes.get(target) == lib.UM_PREFIX_LAYERED and not any(
                        self._over(o, target) for o in self.engines if o is not e and not o.mirrors_mounts):
                    out[target] = upper
        return out

    @staticmethod
    def _all_prefixes(e):
        """Every prefix of engine e, of any kind, as bytes."""
        for p in (*e.prefixes, *e.kernel_prefixes, *e.layered_prefixes, *e.device_prefixes, *e.real_prefixes,
                  *e.alias_prefixes, *(t for t, _ in e.move_prefixes)):
            yield p.encode() if isinstance(p, str) else p

    def _over(self, e, path):
        """Has engine e a prefix at or over path?"""
        return any(under_any(path, (p,)) for p in self._all_prefixes(e))

    def moves(self, prefixes):
        """target -> source of the move mounts (Engine.move_prefixes) the C
        core may serve calls under (UM_PREFIX_MOVE): one view, and no engine
        but the mount itself (and the cwd tracker, which follows it, and the
        inner tracers' /proc service: Engine.beside_mounts) has a prefix at,
        under or over its target or its source. Then what the
        engine chain makes of a path there is the mount's rewrite alone.
        UMVIEW_SERVE=0 turns this off."""
        if len(self.views) != 1 or os.environ.get("UMVIEW_SERVE", "1") == "0":
            return {}
        out = {}
        for e in self.engines:
            for target, source in e.move_prefixes:
                if prefixes.get(target) != lib.UM_PREFIX_PLAIN:
                    continue
                if not any(self._overlaps(o, (target, source)) for o in self.engines
                           if o is not e and not o.mirrors_mounts and not o.beside_mounts):
                    out[target] = source
        return out

    def _overlaps(self, e, paths):
        """Has engine e a prefix at, under or over one of paths?"""
        return any(under_any(p, (q,)) or under_any(q, (p,)) for p in self._all_prefixes(e) for q in paths)

    def _clean(self, e):
        """Is the tree of e's alias prefixes shown by the view at one place
        (e.target, a move mount's) and nowhere else? e leaves nothing below
        its target to others (no exceptions), no other engine serves a path
        at or under it, and no newer one a path over it. Then a name below a
        dirfd in the alias, without "..", is what the view means there
        (UM_PREFIX_ALIAS_CLEAN). With nested views: never (each view has its
        own engines)."""
        target = getattr(e, "target", None)
        if not e.alias_prefixes or not isinstance(target, bytes) or getattr(e, "exceptions", ()) \
                or len(self.views) > 1:
            return False
        below = target.rstrip(b"/") + b"/"
        newer = False
        for other in self.engines:
            if other is e:
                newer = True
                continue
            if other.mirrors_mounts:
                continue
            for p in (*other.prefixes, *other.kernel_prefixes, *other.layered_prefixes, *other.device_prefixes):
                p = p.encode() if isinstance(p, str) else p
                if p == target or p.startswith(below):
                    return False
                if newer and (p == b"/" or below.startswith(p.rstrip(b"/") + b"/")):
                    return False
        return True

    def _hidden_prefixes(self):
        """(engine id, prefix) of real and alias prefixes left out of the
        union: those lying under a layered prefix of an engine that some view
        walks without walking theirs. The C core lets a call under a real
        prefix run unseen; for that view the call is the layered mount's.
        (Its own view then sends such calls to Python, where its engine
        passes them on as real: slower, still right.)"""
        if len(self.views) == 1:
            return set()
        seen_by = {}
        for v in self.views:
            for e in v.engines:
                seen_by.setdefault(id(e), set()).add(v.id)
        layered = [(under, seen_by.get(id(e), set())) for e in self.engines for under in e.layered_prefixes]
        hidden = set()
        for e in self.engines:
            for p in (*e.real_prefixes, *e.alias_prefixes):
                pb = p.encode() if isinstance(p, str) else p
                views = seen_by.get(id(e), set())
                if any(not lv <= views and under_any(pb, (lp,)) for lp, lv in layered):
                    hidden.add((id(e), pb))
        return hidden

    def modes(self, engines):
        """name -> claim bits, for the calls the engines claim."""
        modes = {}
        for e in engines:
            for name in e.syscalls:
                self._check_name(e, name)
                modes[name] = modes.get(name, 0) | lib.UM_CLAIM_ALL
            if e.prefixes or e.layered_prefixes or e.device_prefixes or e.kernel_prefixes or e.mounts_later:
                for name in e.path_syscalls:
                    self._check_name(e, name)
                    if name not in self.table.path_calls:
                        raise ValueError(f"engine {e.name}: {name} has no path argument")
                    modes[name] = modes.get(name, 0) | lib.UM_CLAIM_PATH
            for name in e.vcwd_syscalls:
                self._check_name(e, name)
                modes[name] = modes.get(name, 0) | lib.UM_CLAIM_VCWD
            for name in e.exec_syscalls:
                self._check_name(e, name)
                modes[name] = modes.get(name, 0) | lib.UM_CLAIM_PATH | lib.UM_CLAIM_EXEC
            for name in e.value_syscalls:
                self._check_name(e, name)
                modes[name] = modes.get(name, 0) | lib.UM_CLAIM_ALL
            if e.families:
                modes["socket"] = modes.get("socket", 0) | lib.UM_CLAIM_FAMILY
            for name in e.unix_addr_syscalls:
                self._check_name(e, name)
                modes[name] = modes.get(name, 0) | lib.UM_CLAIM_UNIXADDR
            for name in e.sockname_syscalls:
                self._check_name(e, name)
                modes[name] = modes.get(name, 0) | lib.UM_CLAIM_SOCKNAME
            if e.prefixes or e.mounts_later:
                for name in e.fd_syscalls:
                    self._check_name(e, name)
                    modes[name] = modes.get(name, 0) | lib.UM_CLAIM_FD
        for name in self.table.cwd_setters:
            if modes.get(name, 0) & lib.UM_CLAIM_PATH:
                modes[name] |= lib.UM_CLAIM_CHDIR
        return modes

    def _values(self):
        """name -> (argument, sorted values) of the calls claimed only by
        value (Engine.value_syscalls): no engine claims them otherwise. Two
        engines testing two arguments: trapped whole."""
        whole = {n for e in self.engines for n in e.syscalls}
        values = {}
        for e in self.engines:
            for name, (arg, vals) in e.value_syscalls.items():
                if name in whole:
                    continue
                if name in values and values[name][0] != arg:
                    whole.add(name)
                    continue
                values[name] = (arg, values.get(name, (arg, frozenset()))[1] | frozenset(vals))
        return {n: (a, sorted(v & 0xFFFFFFFF for v in vs)) for n, (a, vs) in values.items() if n not in whole}

    def refused(self, view):
        """The variants a view's engines claim under the neutral name and
        did not name: refused with ENOSYS for its processes (with nested
        views the C core sends them to Python instead of refusing them)."""
        if view.refused is None:
            modes = self.modes(view.engines)
            view.refused = frozenset(other for name in modes for other in self.table.variants.get(name, ())
                                     if other not in modes)
        return view.refused

    def families(self):
        """The socket families some engine claims, as the C core's bitmap
        (bit f: family f; families outside 0..63 always reach Python)."""
        bits = 0
        for e in self.engines:
            for f in e.families:
                if 0 <= f < 64:
                    bits |= 1 << f
        return bits

    def _check_name(self, engine, name):
        if name not in self.table.index:
            raise ValueError(f"engine {engine.name}: unknown system call {name!r}")

    #: serve calls that C decides alone with seccomp user notifications
    #: (set by the Monitor when the kernel can wake on the same CPU)
    notif = False

    def load_into_core(self):
        """Mirror the engines' claims into the C core; the claims (name -> bits)."""
        modes, prefixes = self.claims()
        plain_root = prefixes.get(b"/") == lib.UM_PREFIX_PLAIN
        layered = lib.UM_PREFIX_LAYERED in prefixes.values()
        core.check(lib.um_filter_clear())
        for name in self.table.names:
            _set_claim(self.table.index[name], 0)
        values = self._values()
        for name, mode in modes.items():
            _set_claim(self.table.index[name], mode)
            if name in values:
                arg, vals = values[name]
                for abi in self.table.arch.ABIS:
                    nr = abi.numbers.get(name)
                    if nr is not None:
                        if core.check(lib.um_filter_trap_values(ABI_IDS[abi.name], nr, arg,
                                                                ffi.new("uint32_t[]", vals), len(vals))):
                            _log().warning("the C core's table of calls trapped by argument value is full: "
                                           "every %s (%s) stops, slower but right (a bug: report it)",
                                           name, abi.name)
                continue
            # path claims whose paths mostly stay in C: a notification (5 us
            # here) instead of a ptrace stop (45 us); Python's calls pay a
            # second stop. Claims of every call, and a plain "/" prefix, stay
            # ptrace; a layered "/" keeps most calls in C, so it notifies.
            # An exec is never a notification: an inner tracer's own RET_TRACE
            # for it (strace --seccomp-bpf) must stop it before its exec event
            # (answered from a notification, strace saw a "stray" exec event)
            how = (lib.UM_TRAP_NOTIF if self.notif and not mode & ~(lib.UM_CLAIM_PATH | lib.UM_CLAIM_FD | lib.UM_CLAIM_VCWD
                                                                     | lib.UM_CLAIM_CREDS | lib.UM_CLAIM_SOCKNAME
                                                                     | lib.UM_CLAIM_CHDIR)
                   and not plain_root and name not in _EXECS else lib.UM_TRAP_TRACE)
            if how == lib.UM_TRAP_NOTIF and layered and self.table.writes_by_flags(name):
                # an open for writing under a layered mount goes to Python
                # (copy-up, a new name in the upper layer): a ptrace stop at
                # once, not a notification, an interrupt and a second entry
                how = lib.UM_TRAP_NOTIF_RW
            if self.notif and mode == lib.UM_CLAIM_FAMILY:
                # socket() of vnet alone: Python answers the notification itself
                # (a socket in one ioctl, Call.complete_with_fd), no ptrace stop
                how = lib.UM_TRAP_NOTIF
                _set_claim(self.table.index[name], mode | lib.UM_CLAIM_NOTIFY)
            for abi in self.table.arch.ABIS:
                nr = abi.numbers.get(name)
                if nr is not None:
                    core.check(lib.um_filter_trap_nr(ABI_IDS[abi.name], nr, how))
        core.check(lib.um_prefix_clear())
        for p in sorted(prefixes):
            if prefixes[p] == lib.UM_PREFIX_MOVE:
                core.check(lib.um_prefix_add_move(p, self.move_sources[p]))
            else:
                core.check(lib.um_prefix_add_kind(p, prefixes[p]))
        for target, upper in self.layer_uppers.items():
            core.check(lib.um_prefix_set_upper(target, upper))
        # served in C only at a notification, and only where the kernel
        # checks the process as it checks the monitor
        lib.um_set_serve(lib.UM_SERVE_LOOKUP | lib.UM_SERVE_OPEN
                         if (self.move_sources or self.layer_uppers) and self.notif else 0)
        # a layered mount is right only if symlinks into its changed paths are
        # followed: the C core walks them (docs/internals.md)
        lib.um_set_symlink_check(int(any(e.walks_symlinks or e.layered_prefixes or e.device_prefixes for e in self.engines)))
        lib.um_set_fd_check(int(any(e.fd_check for e in self.engines)))
        lib.um_set_families(self.families())
        return modes

    # --- the pipeline ---
    def enter(self, call):
        """Walk the engines newest first. Returns (reply, rval, exit engines).
        A notified call (call.notified) that an engine rewrites or wants to
        see return ends the walk with UM_REPLY_REDIRECT: the C core takes it
        again at a ptrace stop, and the walk is made anew there."""
        exits = []
        view = self.member.get(call.tid, self.root)
        if len(self.views) > 1 and self.table is not None and call.name in self.refused(view):
            call.retval = -errno.ENOSYS
            return lib.UM_REPLY_SKIP, call.retval, []
        if _names_files(call.spec) and core.may_not_read(call.tid):
            # its paths and fds cannot be read: no engine could tell what it
            # acts on, and it must not run unseen (the C core refuses those
            # it reads itself)
            call.retval = -errno.EACCES
            return lib.UM_REPLY_SKIP, call.retval, []
        for engine in view.entry_order():
            try:
                wanted = engine.wants(call)
            except Exception:  # noqa: BLE001 - a module bug must not crash the monitor
                _log().exception("engine %s raised in wants(%s): failing the call with EIO", engine.name, call.name)
                call.retval = -errno.EIO
                return lib.UM_REPLY_SKIP, call.retval, []
            if not wanted:
                continue
            if call.abi not in engine.abis or (call.abi == "x32" and call.abi not in core.kernel_abis()):
                # claimed, but of an ABI the engine cannot decode (refused,
                # never let through), or that the kernel lacks (ENOSYS, as
                # natively: an engine must not serve what the kernel refuses)
                action = Skip(-errno.ENOSYS)
            else:
                action = _run_engine(engine, "enter", call)
            if call.notified and not isinstance(action, Skip) and (
                    action is CONTINUE_AFTER or call.nr != call.orig_nr or tuple(call.args) != call.orig_args):
                return lib.UM_REPLY_REDIRECT, 0, []
            if isinstance(action, Skip):
                call.retval = action.result
                call.skipped_by = engine.name
                self._run_exits(exits, call)
                return lib.UM_REPLY_SKIP, call.retval, []
            if action is CONTINUE_AFTER:
                exits.append(engine)
            elif action is not CONTINUE:
                _log().error("engine %s returned %r from enter(%s): failing the call with EIO",
                          engine.name, action, call.name)
                call.retval = -errno.EIO
                call.skipped_by = engine.name
                self._run_exits(exits, call)
                return lib.UM_REPLY_SKIP, call.retval, []
        return (lib.UM_REPLY_CONTINUE_AFTER if exits else lib.UM_REPLY_CONTINUE), 0, exits

    def exit(self, call, exits):
        self._run_exits(exits, call)

    @staticmethod
    def _run_exits(exits, call):
        # exits were collected newest first: call them oldest first
        for engine in reversed(exits):
            _run_engine(engine, "exit", call)


@functools.lru_cache(None)
def _names_files(spec):
    """Does a call of this Spec name files (a path, an fd, a dirfd)?"""
    return spec is not None and bool(spec.path_slots or any(a.kind in ("fd", "dirfd") for a in spec.args))


def _run_engine(engine, hook, call):
    """Call an engine hook. OSError(e) means Skip(-e); any other exception
    fails the call with EIO and a log line; the monitor goes on."""
    try:
        result = getattr(engine, hook)(call)
    except OSError as exc:
        code = exc.errno if exc.errno else errno.EIO
        if hook == "enter":
            return Skip(-code)
        call.retval = -code
        return None
    except Exception:  # noqa: BLE001 - a module bug must not crash the monitor
        _log().exception("engine %s raised in %s(%s): failing the call with EIO", engine.name, hook, call.name)
        if hook == "enter":
            return Skip(-errno.EIO)
        call.retval = -errno.EIO
        return None
    return CONTINUE if result is None and hook == "enter" else result


def _servers():
    """How many threads serve notifications beside the main one (the C
    core's servers.c): the lead, which takes them all while calls do not
    overlap, and, where the monitor may run on two CPUs or more, one kept on
    each of them while calls overlap; UMVIEW_SERVERS=N says N (1: the lead
    alone; 0: none, the main thread serves)."""
    value = os.environ.get("UMVIEW_SERVERS")
    if value is not None:
        try:
            return int(value)
        except ValueError:
            _log().warning("UMVIEW_SERVERS=%s is not a number: one serving thread per CPU", value)
    return len(os.sched_getaffinity(0))


#: the exec calls: trapped by ptrace stops, never by notifications (load_into_core)
_EXECS = calls("execs")


def _set_claim(sc, mode):
    """The claim bits of neutral call sc on every ABI the kernel runs; on one
    it lacks (x32, on most kernels) a claimed call is refused with ENOSYS by
    the C core, as the kernel would, without Python (um_set_claim is per ABI)."""
    lacking = {ABI_IDS[a] for a in ABI_IDS if a not in core.kernel_abis()} if mode else ()
    for abi_id in range(lib.UM_NABI):
        core.check(lib.um_set_claim(abi_id, sc, lib.UM_CLAIM_REFUSE if abi_id in lacking else mode))


def _run_hook(hook, *args):
    try:
        hook(*args)
    except Exception:  # noqa: BLE001 - a module bug must not crash the monitor
        _log().exception("engine hook %s raised", getattr(hook, "__qualname__", hook))


class Stats:
    """The C core's counters (struct um_stats)."""

    FIELDS = ("stops", "seccomp_stops", "exit_stops", "fast_continue", "python_events", "skipped",
              "rewritten", "path_reads", "refused", "signals", "group_stops", "processes",
              "notifications", "layer_walks", "injected", "inject_failed", "notif_events", "addfd",
              "decided_once", "notif_stale", "write_failed", "own_trace", "pinned", "owned_pages", "regions",
              "served", "served_fallback")

    TOP = 12  # calls listed by format()

    def __init__(self, calls=None, monitor_cpu=None, **counts):
        for f in self.FIELDS:
            setattr(self, f, counts[f])
        #: name -> [trapped, handed to Python], for the calls trapped at least once
        self.calls = dict(calls or {})
        #: CPU seconds of the monitor process (its C loop and Python)
        self.monitor_cpu = monitor_cpu

    @classmethod
    def from_core(cls, table=None):
        """The counters now; with the syscall table the monitor mirrored
        (Monitor.table), also per call."""
        import resource

        st = ffi.new("struct um_stats *")
        lib.um_stats_get(st)
        calls = {}
        if table is not None:
            n = len(table.names)
            trapped, python = ffi.new("uint64_t[]", n), ffi.new("uint64_t[]", n)
            n = core.check(lib.um_sc_stats(trapped, python, n))
            for name in table.names:
                i = table.index[name]
                if i < n and trapped[i]:
                    calls[name] = [trapped[i], python[i]]
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return cls(calls=calls, monitor_cpu=round(ru.ru_utime + ru.ru_stime, 3),
                   **{f: getattr(st, f) for f in cls.FIELDS})

    def as_dict(self):
        return {**{f: getattr(self, f) for f in self.FIELDS}, "monitor_cpu": self.monitor_cpu,
                "calls": self.calls}

    def top_calls(self, n=TOP):
        """The n calls trapped most often: (name, trapped, handed to Python)."""
        return sorted(((k, t, p) for k, (t, p) in self.calls.items()), key=lambda c: (-c[1], c[0]))[:n]

    def format(self):
        return "\n".join(
            [
                "umview statistics:",
                f"  processes and threads traced  {self.processes}",
                f"  ptrace stops                  {self.stops}",
                f"  trapped calls (ptrace stops)  {self.seccomp_stops}",
                f"  trapped calls (notifications) {self.notifications}",
                f"    resumed by C, no Python     {self.fast_continue}",
                f"    refused (ENOSYS/EACCES) by C {self.refused}",
                f"    run with pinned paths       {self.pinned}"
                + (f" ({self.regions} regions mapped)" if self.regions else "")
                + (f"; {self.owned_pages} strings in a file's pages made the process's own" if self.owned_pages
                   else ""),
                f"    served by C on a real path  {self.served}"
                + (f" ({self.served_fallback} looked at, left to Python)" if self.served_fallback else ""),
                f"    answered by Python          {self.notif_events}"
                + (f" ({self.addfd} with an fd)" if self.addfd else ""),
                f"  events handed to Python       {self.python_events}",
                f"  calls virtualized (skipped)   {self.skipped}",
                f"  calls rewritten               {self.rewritten}",
                f"  syscall-exit stops            {self.exit_stops}",
                f"  path strings read             {self.path_reads}",
                f"  symlink walks in C            {self.layer_walks}",
                f"  filters stacked at run time   {self.injected}"
                + (f" ({self.inject_failed} could not be)" if self.inject_failed else ""),
                f"  signals delivered             {self.signals}",
                f"  group-stops                   {self.group_stops}",
            ]
            + ([f"  register writes that failed   {self.write_failed}"] if self.write_failed else [])
            + ([f"  own filters' RET_TRACE (ENOSYS) {self.own_trace}"] if self.own_trace else [])
            + ([f"  monitor CPU time              {self.monitor_cpu:.2f} s"] if self.monitor_cpu is not None else [])
            + (["  trapped calls by name         trapped  to Python"]
               + [f"    {name:26}{t:>10}{p:>11}" for name, t, p in self.top_calls()]
               + ([f"    ... {len(self.calls) - self.TOP} more (--stats-file has them all)"]
                  if len(self.calls) > self.TOP else []) if self.calls else [])
        )


class Monitor:
    """Runs one command under umview with a set of engines.

    >>> status = Monitor([MyEngine()]).run(["make", "-j2"])

    ``run`` returns the first process's wait status (os.waitstatus_to_exitcode
    turns it into an exit code, negative for a signal).
    """

    def __init__(self, engines=(), spin=0, notif=None, control=None):
        """notif: serve the fast path with seccomp user notifications; None
        means when the kernel supports them with same-CPU wake-ups (6.6+).
        control: the ServiceControl engine answering the control channel
        (umview.servicecontrol); a default one (no module loader) if None."""
        # no engine, no syscall tables (their import is most of umview's
        # start-up): the control call alone is mapped (run)
        self.table = _syscall_table() if engines else None
        self.dispatcher = Dispatcher(self.table)
        self.dispatcher.root.monitor = self
        self.dispatcher.on_empty = self.close_view
        self.control = control if control is not None else ServiceControl()
        self.control.monitor = self
        self.control.view = self.dispatcher.root
        self.dispatcher.root.control = self.control
        self.dispatcher.add(self.control)
        self.inner = InnerTracing(self)  # ptrace for the view's processes
        self.dispatcher.add(self.inner)
        self._deferred = []
        for e in engines:
            self.dispatcher.add(e)
        self._watch_proc(engines)
        self.spin = spin
        #: a umview.landlock.Ruleset the first process enforces (a sandbox's), or None
        self.landlock = None
        #: where the view's processes make and swap names (a sandbox's layer and
        #: private directories: realpaths ending in "/"): a call that changes
        #: metadata there runs on the file the view resolved (Call.run_anchored)
        self.anchor_roots = ()
        self.notif = notif
        self._pending = {}
        self._retiring = []  # [(set of _Pending, action)]: Monitor.after_calls
        self._trapped = None  # the names the running filter traps (fixed at spawn)

    @property
    def running(self):
        """Has the first process started (the filter is fixed)?"""
        return self._trapped is not None

    @property
    def view(self):
        """The root view (umview.views): the first process's and its children's."""
        return self.dispatcher.root

    def add_engine(self, engine, view=None):
        """Register an engine while the view runs (a mount): new epoch, tables
        reloaded. Calls the running filter does not trap are added by a
        filter stacked on every process of the monitor (um_filter_inject)."""
        self.add_engines([engine], view)

    def add_engines(self, engines, view=None):
        """Register engines in view (the root if None) in one reload of the tables."""
        for e in engines:
            self.dispatcher.add(e, view)
        self._watch_proc(engines)
        self.refresh_claims(", ".join(e.name for e in engines))

    def _watch_proc(self, engines):
        """Engines that trap opens anyway (path modules): the inner tracers'
        /proc service may watch a process's own status at no extra cost."""
        if any(e.path_syscalls & InnerTracing.OPENS for e in engines):
            self.inner.watch_proc(refresh=False)

    def refresh_claims(self, why="ptrace"):
        """The engines' claims changed while the view runs: tables reloaded,
        and a filter stacked on every process of the monitor for calls the
        running filter does not trap (um_filter_inject)."""
        if self._trapped is None:  # not running: run() loads the tables
            return
        modes = self._load()
        self._update_hooks()
        missing = {n for n in modes if n not in self._trapped
                   and any(n in abi.numbers for abi in self.table.arch.ABIS)}
        if missing:
            n = lib.um_filter_inject()
            core.check(n)
            self._trapped |= missing
            _log().info("engines %s: a filter for %d more calls stacked on %d threads",
                        why, len(missing), n)

    def open_view(self, parent):
        """A view nested in parent, with no engine and no process yet
        (umview.views; ServiceControl.nest fills it)."""
        return self.dispatcher.new_view(parent)

    def close_view(self, view):
        """A nested view whose last process is gone (or that could not be
        made): its engines leave, its modules close."""
        self.dispatcher.drop_view(view)
        if self._trapped is not None:
            self._load()
            self._update_hooks()
        if view.control is not None:
            view.control.close()

    def attach(self, pid, view=None):
        """Trace a process started outside the view (um_attach): it gets the
        view's filter at its first stop, and joins view (the root if None)."""
        self._load()
        root = self.dispatcher.root
        tids = []
        if view is not None and view is not root:
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                tids = [pid]
            self.dispatcher.join(view, tids)  # before its first call can reach Python
            self._update_hooks()
        r = lib.um_attach(pid)
        if r < 0 and tids:
            self.dispatcher.join(root, tids)
        core.check(r)

    def after_calls(self, engines, action):
        """Run action once no call in flight waits to show its exit to one of
        engines (removed): a service that goes lets the calls it took finish
        under it, and closes after them (the original's epochs)."""
        gone = set(engines)
        waiting = {p for p in self._pending.values() if gone.intersection(p.engines)}
        if waiting:
            self._retiring.append((waiting, action))
        else:
            action()

    def _settled(self, pending):
        """The call pending is over (its exit shown, or its thread gone)."""
        for entry in list(self._retiring):
            waiting, action = entry
            waiting.discard(pending)
            if not waiting:
                self._retiring.remove(entry)
                try:
                    action()
                except Exception:  # noqa: BLE001 - the monitor goes on
                    _log().exception("closing a removed service failed")

    def remove_engine(self, engine):
        self.dispatcher.remove(engine)
        if self._trapped is not None:
            self._load()
            self._update_hooks()

    def _load(self):
        """Load the tables into the C core while the view runs (a view started
        with no engine gets its syscall tables now); the claims."""
        with core.tables_changing():
            if self.table is None:
                self.table = self.dispatcher.table = _syscall_table()
                self.table.load_into_core()
            return self.dispatcher.load_into_core()

    def _update_hooks(self):
        d = self.dispatcher
        engines = d.engines
        nested = len(d.views) > 1

        def route(name):
            # the Dispatcher hands each event to the engines of the thread's
            # view; with nested views it needs every one (membership)
            base = getattr(Engine, name)
            return [d] if nested or any(getattr(type(e), name) is not base for e in engines) else []

        self._on_fork = route("on_fork")
        self._on_exec = route("on_exec")
        self._on_exit = route("on_exit")
        self._on_exit_status = route("on_exit_status")
        # the control engine alone needs no process events; the ptrace
        # emulation needs its tracers' exits once it has tracees (its
        # tracees' events come whatever the mask)
        wanted = lib.UM_WANT_EXEC | lib.UM_WANT_EXIT if nested or any(
            e is not self.control and e is not self.inner for e in engines) else 0
        if self.inner.active:
            wanted |= lib.UM_WANT_EXIT
        if self._on_fork:
            wanted |= lib.UM_WANT_FORK
        lib.um_set_event_mask(wanted)

    def run(self, argv):
        if not argv:
            raise ValueError("no command to run")
        core.check(lib.um_init())
        notif = self.notif
        if notif is None:
            notif = os.environ.get("UMVIEW_NOTIF", "1") != "0" and bool(lib.um_notif_supported())
        self.dispatcher.notif = notif
        if self.table is None:
            # no syscall table: the control call, and ptrace (an inner tracer
            # loads the table when it starts, InnerTracing._activate)
            core.check(lib.um_table_reset(2))
            core.check(lib.um_set_control_sc(0))
            _set_claim(0, lib.UM_CLAIM_ALL)
            for abi, nr in _PTRACE_NRS:
                core.check(lib.um_map_nr(abi, nr, 1))
                core.check(lib.um_filter_trap_nr(abi, nr, lib.UM_TRAP_TRACE))
            _set_claim(1, lib.UM_CLAIM_ALL)
            self._trapped = {"ptrace"}
        else:
            self.table.load_into_core()
            self._trapped = set(self.dispatcher.load_into_core())
        lib.um_set_spin(self.spin)
        lib.um_set_landlock(-1, 0) if self.landlock is None else lib.um_set_landlock(self.landlock.fd,
                                                                                      self.landlock.handled)
        lib.um_set_servers(_servers() if notif else 0)
        self._update_hooks()
        keep = [ffi.new("char[]", os.fsencode(a)) for a in argv]
        cargv = ffi.new("char *[]", keep + [ffi.NULL])
        pid = lib.um_spawn(cargv)
        if pid < 0:
            raise OSError(-pid, os.strerror(-pid), argv[0])
        #: the view's command: its process id
        self.first_pid = pid
        self._loop()
        err = lib.um_spawn_error()
        if err:
            raise OSError(err, os.strerror(err), argv[0])
        return lib.um_first_status()

    _ABIS = ("x86_64", "i386", "x32")  # by UM_ABI_*

    def _call(self, ev):
        """The Call of a UM_EV_SYSCALL or UM_EV_NOTIF event (ev.sp is 0 for a
        notification: it has no stack pointer). A view with no syscall table
        knows the control call alone."""
        abi, table = self._ABIS[ev.abi], self.table
        if table is None:
            name = control.CONTROL if ev.sc == 0 else "ptrace"
            return Call(ev.tid, abi, ev.sc, name, ev.nr, list(ev.args), ev.ip, ev.sp)
        name = table.names[ev.sc]
        spec = table.spec(name, abi)
        call = Call(ev.tid, abi, ev.sc, name, ev.nr, list(ev.args), ev.ip, ev.sp, spec)
        n = len(spec.path_slots)
        if n and all(ev.path_len[i] >= 0 for i in range(n)):
            # the paths the C core resolved deciding the call (struct um_event)
            call._paths = [ffi.buffer(ev.path[i], ev.path_len[i])[:] for i in range(n)]
        for i in range(n):
            if ev.raw_len[i] >= 0:
                # the string C read and decided on: the engines decide on it too
                call.known_string(call.path_indices[i], ffi.buffer(ev.raw[i], ev.raw_len[i])[:])
        return call

    def defer(self, action):
        """Run action() once the event at hand is answered (it may hand the
        C core another stopped thread's call: um_decide_stopped)."""
        self._deferred.append(action)

    def dispatch_entry(self, ev):
        """Walk the engines for the call of a UM_EV_SYSCALL event and put
        their reply in it; the Call."""
        call = self._call(ev)
        reply, rval, exits = self.dispatcher.enter(call)
        ev.reply = reply
        if reply != lib.UM_REPLY_SKIP:
            # the kernel reads what the engines decided on, not what another
            # thread may write meanwhile
            try:
                call.pin_paths()
            except OSError as exc:
                # could not be pinned (the region's mmap refused, the thread
                # gone): it must not run on a string that may change
                ev.reply = reply = lib.UM_REPLY_SKIP
                rval = -(exc.errno or errno.EFAULT)
        rewritten = tuple(call.args) != call.orig_args
        if call.nr != call.orig_nr:
            ev.nr = call.nr
            ev.changed |= lib.UM_CHANGED_NR
        result = None
        if reply != lib.UM_REPLY_SKIP and rewritten:
            try:
                if self.anchor_roots:
                    result = call.run_anchored(self.anchor_roots)
                if result is None:
                    result = call.run_long_paths()
            except OSError as exc:
                if exc.errno != errno.ESRCH:
                    _log().warning("%s of thread %d could not run on the file the view resolved: %s",
                                   call.name, call.tid, exc.strerror)
                result = -exc.errno
            except Exception:  # noqa: BLE001 - a bug here fails the call, not the monitor
                _log().exception("%s of thread %d: running it on the file the view resolved failed",
                                 call.name, call.tid)
                result = -errno.EIO
            if result is not None:
                if not exits:
                    ev.reply = reply = lib.UM_REPLY_SKIP
                    rval = result
                else:
                    # run already; the engines still see its exit (and its
                    # arguments): a call that does nothing stands for it
                    call.nr = ev.nr = _getpid_nr(call.abi)
                    ev.changed |= lib.UM_CHANGED_NR
                    ev.reply = lib.UM_REPLY_CONTINUE_AFTER
                    self._pending[ev.tid] = _Pending(call, exits, result)
                    return call
        if reply == lib.UM_REPLY_SKIP:
            # not run: ev.args stay what the process passed, so its
            # argument registers keep them (the syscall ABI preserves
            # them) whatever an engine rewrote before skipping
            ev.rval = rval
            return call
        if rewritten:
            ev.args = call.args
            ev.changed |= lib.UM_CHANGED_ARGS
        if reply == lib.UM_REPLY_CONTINUE_AFTER or rewritten:
            # an exit stop to restore the argument registers, if nothing else
            ev.reply = lib.UM_REPLY_CONTINUE_AFTER
            self._pending[ev.tid] = _Pending(call, exits)
        return call

    def _run_deferred(self, ev):
        """Answer the event at hand now, then run what waited for that."""
        lib.um_finish(ev)
        ev.kind = lib.UM_EV_DONE
        while self._deferred:
            action = self._deferred.pop(0)
            try:
                action()
            except Exception:  # noqa: BLE001 - the monitor goes on
                _log().exception("a deferred action of the ptrace emulation failed")

    def _loop(self):
        ev = ffi.new("struct um_event *")
        ev.kind = lib.UM_EV_DONE
        inner = self.inner
        while True:
            if self._deferred:
                self._run_deferred(ev)
            kind = lib.um_next(ev)
            if kind == lib.UM_EV_SYSCALL:
                self.dispatch_entry(ev)
            elif kind == lib.UM_EV_STOP:
                if inner.stop_event(ev):
                    ev.flags |= lib.UM_HOLD
            elif kind == lib.UM_EV_NOTIF:
                # a claimed call waiting as a seccomp notification: CONTINUE,
                # SKIP (answered by the C core), or REDIRECT to a ptrace stop
                call = self._call(ev)
                call.notified = True
                ev.reply, ev.rval, _ = self.dispatcher.enter(call)
                if ev.reply == lib.UM_REPLY_CONTINUE and call.path_indices and (
                        lib.um_mm_shared(ev.tid) or call.paths_changeable()):
                    # its paths must be pinned (Call.pin_paths): at a ptrace stop
                    ev.reply = lib.UM_REPLY_REDIRECT
            elif kind == lib.UM_EV_SYSCALL_EXIT:
                pending = self._pending.pop(ev.tid, None)
                if pending is None:
                    continue
                call = pending.call
                call.retval = ev.rval if pending.result is None else pending.result
                call.execed = bool(ev.flags & lib.UM_EXIT_AFTER_EXEC)
                self.dispatcher.exit(call, pending.engines)
                if call.retval != ev.rval:
                    ev.rval = call.retval
                    ev.changed |= lib.UM_CHANGED_RVAL
                if tuple(call.args) != call.orig_args:
                    ev.args = list(call.orig_args)
                    ev.changed |= lib.UM_CHANGED_ARGS
                if inner.tracees and inner.syscall_exit(ev.tid):
                    ev.flags |= lib.UM_HOLD
                if self._retiring:
                    self._settled(pending)
            elif kind == lib.UM_EV_FORK:
                thread = bool(ev.flags & lib.UM_FORK_THREAD)
                for e in self._on_fork:
                    _run_hook(e.on_fork, ev.tid, ev.msg, thread)
                if ev.flags & lib.UM_INNER_EVENT and inner.fork_event(ev):
                    ev.flags |= lib.UM_HOLD
            elif kind == lib.UM_EV_EXEC:
                if ev.msg != ev.tid and ev.msg in self._pending:
                    self._pending[ev.tid] = self._pending.pop(ev.msg)
                for e in self._on_exec:
                    _run_hook(e.on_exec, ev.tid, ev.msg)
                if ev.flags & lib.UM_INNER_EVENT and inner.exec_event(ev):
                    ev.flags |= lib.UM_HOLD
            elif kind == lib.UM_EV_EXIT:
                pending = self._pending.pop(ev.tid, None)
                if pending is not None and self._retiring:
                    self._settled(pending)
                for e in self._on_exit:
                    _run_hook(e.on_exit, ev.tid)
                for e in self._on_exit_status:
                    _run_hook(e.on_exit_status, ev.tid, ev.status)
                if inner.active:
                    inner.exit_event(ev.tid, ev.status, ev.msg)
            elif kind == lib.UM_EV_DONE:
                return
            elif kind == lib.UM_EV_ERROR:
                raise OSError(ev.msg, f"waitpid: {os.strerror(ev.msg)}")


def exit_code(status):
    """A wait status as a shell reports it: the exit code, or 128+N."""
    if status < 0:
        return 1
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def die_like(status):
    """End this process the way the first process ended: the same exit code,
    or the same fatal signal (without a core dump of the monitor)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if status >= 0 and os.WIFSIGNALED(status):
        import resource  # lazy: only to die of a signal
        import signal

        sig = os.WTERMSIG(status)
        lib.um_restore_signals()
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (OSError, ValueError):
            pass
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # these cannot be caught anyway
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
    os._exit(exit_code(status))
