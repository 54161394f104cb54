"""The engines' claims compiled into the C core's tables (the Dispatcher's
compiler, a part of it): what every engine claims (calls, prefixes, layered
and real paths, move sources, values) merged into claim bits per call and a
kind per prefix, and loaded into the C core (``load_into_core``) when
engines come and go, never per call. The syscall table itself is mirrored by
``umview.ctables``.
"""
import functools
import os

from umview import core
from umview.core import ffi, lib
from umview.engine import under_any


def _log():
    import logging  # lazy, as in umview.monitor

    return logging.getLogger("umview")


@functools.lru_cache(maxsize=None)
def _class(name):
    """The calls of a class of the syscall table (lazy: the table costs
    milliseconds that a view without engines does not pay)."""
    from umview.syscalls import calls

    return calls(name)


def set_claim(sc, mode):
    """The claim bits of neutral call sc on every ABI the kernel runs; on one
    it lacks (x32, on most kernels) a claimed call is refused with ENOSYS by
    the C core, as the kernel would, without Python (um_set_claim is per ABI)."""
    lacking = {ABI_IDS[a] for a in ABI_IDS if a not in core.kernel_abis()} if mode else ()
    for abi_id in range(lib.UM_NABI):
        core.check(lib.um_set_claim(abi_id, sc, lib.UM_CLAIM_REFUSE if abi_id in lacking else mode))


ABI_IDS = {"x86_64": lib.UM_ABI_X86_64, "i386": lib.UM_ABI_I386, "x32": lib.UM_ABI_X32}

class ClaimCompiler:
    """The Dispatcher's compiler of claims into C tables (a part of it)."""

    def claims(self):
        """(name -> claim bits, prefix -> UM_PREFIX_* kind) for the union of all
        engines. A path one engine claims plain and another layered or real
        is plain; one claimed layered and real is layered: the kind that sends
        more calls to Python wins."""
        modes = self.modes(self.engines)
        prefixes = {}
        rank = {lib.UM_PREFIX_PLAIN: 6, lib.UM_PREFIX_KERNEL: 5, lib.UM_PREFIX_LAYERED: 4, lib.UM_PREFIX_DEVICES: 3,
                lib.UM_PREFIX_ALIAS: 2, lib.UM_PREFIX_ALIAS_CLEAN: 1, lib.UM_PREFIX_REAL: 0}
        hidden = self._hidden_prefixes() | self._sources_in_layers()
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
            for name in _class("creds"):
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

    def _sources_in_layers(self):
        """(engine id, prefix) of move mounts' sources (alias prefixes) that
        lie in the tree of an older layered mount (-r TREE --sandbox: the
        tree is in the sandbox's cow view of /). A name below a dirfd there
        (mkdir -p's mkdirat) may be a write that mount makes copy-on-write:
        it is the layered prefix's to decide, not the kernel's (which would
        write the real tree)."""
        out = set()
        for i, e in enumerate(self.engines):
            if not e.move_prefixes:
                continue
            for p in e.alias_prefixes:
                p = p.encode() if isinstance(p, str) else p
                # the longest older prefix over p: layered, or real (an
                # except= path of a layered mount: written for real)
                best, layered = b"", False
                for other in self.engines[:i]:
                    for kind, paths in ((True, other.layered_prefixes), (False, other.real_prefixes)):
                        for q in paths:
                            q = q.encode() if isinstance(q, str) else q
                            if under_any(p, (q,)) and (len(q) > len(best) or len(q) == len(best) and kind):
                                best, layered = q, kind
                if layered:
                    out.add((id(e), p))
        return out

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
            set_claim(self.table.index[name], 0)
        values = self._values()
        for name, mode in modes.items():
            set_claim(self.table.index[name], mode)
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
                   and not plain_root and name not in _class("execs") else lib.UM_TRAP_TRACE)
            if how == lib.UM_TRAP_NOTIF and layered and self.table.writes_by_flags(name):
                # an open for writing under a layered mount goes to Python
                # (copy-up, a new name in the upper layer): a ptrace stop at
                # once, not a notification, an interrupt and a second entry
                how = lib.UM_TRAP_NOTIF_RW
            if self.notif and mode == lib.UM_CLAIM_FAMILY:
                # socket() of vnet alone: Python answers the notification itself
                # (a socket in one ioctl, Call.complete_with_fd), no ptrace stop
                how = lib.UM_TRAP_NOTIF
                set_claim(self.table.index[name], mode | lib.UM_CLAIM_NOTIFY)
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
