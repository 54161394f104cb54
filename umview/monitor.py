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

from umview import control, core, procs
from umview.core import ffi, lib
from umview.engine import CONTINUE, CONTINUE_AFTER, Call, Engine, Skip
from umview.ptrace import InnerTracing
from umview.servicecontrol import ServiceControl
from umview.claims import ClaimCompiler, set_claim
from umview.views import View

# ptrace's numbers, trapped even in a view with no syscall table (emulated: umview.ptrace)
_PTRACE_NRS = ((lib.UM_ABI_X86_64, 101), (lib.UM_ABI_I386, 26))


def _syscall_table():
    # deliberately lazy: the syscall tables (umview.syscalls, umview.arch) cost
    # 30-50 ms to import, paid only when an engine is loaded; with none,
    # umview's start-up is what it adds to a command
    from umview.ctables import SyscallTable

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


class Dispatcher(ClaimCompiler):
    """The engine pipeline. Engines are kept per view (umview.views) in
    registration order (their epoch); a call walks the stack of its thread's
    view, newest first at entry, oldest first at exit."""

    def __init__(self, table):
        self.table = table
        self.root = View(0)
        #: the open views, the root first; a view comes after its parent
        self.views = [self.root]
        #: the records of the processes (umview.procs): a thread's view is
        #: its record's (None: the root)
        self.procs = procs.PROCESSES
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
        t = self.procs.threads.get(tid)
        return (t.view if t is not None else None) or self.root

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
            rec = self.procs.record(t)
            old, rec.view = rec.view, None
            if old is not None:
                old.tids.discard(t)
                left.add(old)
            if view is not self.root:
                rec.view = view
                view.tids.add(t)
        for old in left:
            self._close_if_empty(old)

    def drop_view(self, view):
        """Forget a nested view (its engines, its threads)."""
        for t in view.tids:
            rec = self.procs.known(t)
            if rec is not None and rec.view is view:
                rec.view = None
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

    # --- process events (the Monitor's hooks, after the records have the
    # event: each goes to the engines of the thread's view; a child is in
    # its parent's view, umview.procs) ---
    def on_fork(self, parent_tid, child_tid, thread):
        view = self.view_of(child_tid)
        if view is not self.root:
            view.tids.add(child_tid)
        for e in view.hooks("on_fork"):
            _run_hook(e.on_fork, parent_tid, child_tid, thread)

    def on_exec(self, tid, former_tid):
        view = self.view_of(tid)
        if former_tid != tid and view is not self.root:
            # a non-leader thread execed: it now has the leader's tid
            view.tids.discard(former_tid)
        for e in view.hooks("on_exec"):
            _run_hook(e.on_exec, tid, former_tid)

    def on_exit(self, tid):
        for e in self.view_of(tid).hooks("on_exit"):
            _run_hook(e.on_exit, tid)

    def on_exit_status(self, tid, status):
        view = self.view_of(tid)
        for e in view.hooks("on_exit_status"):
            _run_hook(e.on_exit_status, tid, status)
        if view is not self.root:
            self.procs.known(tid).view = None
            view.tids.discard(tid)
            self._close_if_empty(view)

    # --- the pipeline ---
    def enter(self, call):
        """Walk the engines newest first. Returns (reply, rval, exit engines).
        A notified call (call.notified) that an engine rewrites or wants to
        see return ends the walk with UM_REPLY_REDIRECT: the C core takes it
        again at a ptrace stop, and the walk is made anew there."""
        exits = []
        view = self.view_of(call.tid)
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


def _run_hook(hook, *args):
    try:
        hook(*args)
    except Exception:  # noqa: BLE001 - a module bug must not crash the monitor
        _log().exception("engine hook %s raised", getattr(hook, "__qualname__", hook))


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
        procs.PROCESSES.clear()  # a new monitor's (one per Python process)
        self._records = False  # are forks kept in the records (_update_hooks)
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
        # the control engine alone needs no process events: no records are
        # kept. Any other engine may read them (umview.procs): every fork,
        # exec and exit keeps them. The ptrace emulation alone needs its
        # tracers' exits and execs once it has tracees (its tracees' events
        # come whatever the mask): the records it reads are made from /proc,
        # and forgotten at those events.
        if nested or any(e is not self.control and e is not self.inner for e in engines):
            wanted = lib.UM_WANT_FORK | lib.UM_WANT_EXEC | lib.UM_WANT_EXIT
        else:
            wanted = lib.UM_WANT_EXEC | lib.UM_WANT_EXIT if self.inner.active else 0
        self._records = bool(wanted & lib.UM_WANT_FORK)
        d.procs.following = bool(wanted)
        if not wanted:
            d.procs.threads.clear()
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
            set_claim(0, lib.UM_CLAIM_ALL)
            for abi, nr in _PTRACE_NRS:
                core.check(lib.um_map_nr(abi, nr, 1))
                core.check(lib.um_filter_trap_nr(abi, nr, lib.UM_TRAP_TRACE))
            set_claim(1, lib.UM_CLAIM_ALL)
            self._trapped = {"ptrace"}
        else:
            self.table.load_into_core()
            self._trapped = set(self.dispatcher.load_into_core())
        if notif:
            # an inner tracer's data requests and WNOHANG waits: notifications
            # the C core answers without a stop of the tracer's (inner.c)
            core.check(lib.um_inner_notif())
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
        """Run action() once the engines are done with the event at hand,
        before it is answered (it may hand the C core another stopped
        thread's call: um_decide_stopped)."""
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
                    if call.fd_path is not None:
                        call.retval = result
                        self.dispatcher.procs.opened(call)
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
        """Run what waited for the event at hand, then answer it. A tracer's
        resume of a tracee held at a call's entry decides that call and lets
        the tracee go before the tracer's own ptrace() returns, as the
        kernel wakes the tracee first: its next stop is then mostly there
        by the time the tracer waits, and the wait is answered at once
        instead of blocking and being interrupted (um_finish reads the
        event's stop again)."""
        while self._deferred:
            action = self._deferred.pop(0)
            try:
                action()
            except Exception:  # noqa: BLE001 - the monitor goes on
                _log().exception("a deferred action of the ptrace emulation failed")
        lib.um_finish(ev)
        ev.kind = lib.UM_EV_DONE

    def _loop(self):
        ev = ffi.new("struct um_event *")
        ev.kind = lib.UM_EV_DONE
        inner = self.inner
        procs = self.dispatcher.procs
        while True:
            if self._deferred:
                self._run_deferred(ev)
            kind = lib.um_next(ev)
            if inner.tracees and lib.um_notes_pending():
                inner.take_notes()  # what the C core did for inner tracers: Python's records first
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
                if call.fd_path is not None:
                    procs.opened(call)
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
                if self._records:
                    procs.forked(ev.tid, ev.msg, thread)
                for e in self._on_fork:
                    _run_hook(e.on_fork, ev.tid, ev.msg, thread)
                if ev.flags & lib.UM_INNER_EVENT and inner.fork_event(ev):
                    ev.flags |= lib.UM_HOLD
            elif kind == lib.UM_EV_EXEC:
                if ev.msg != ev.tid and ev.msg in self._pending:
                    self._pending[ev.tid] = self._pending.pop(ev.msg)
                procs.execed(ev.tid, ev.msg)
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
                procs.exited(ev.tid)
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
