"""The engine of the ptrace emulation: its claims, the calls it enters,
tracers in pid namespaces of their own. Its parts are mixins, one file
each: ProcView, Requests, Events, Waits."""


from umview import core, fdpass
from umview.engine import Engine
from umview.ptrace.events import Events
from umview.ptrace.procview import ProcView
from umview.ptrace.requests import Requests
from umview.ptrace.waits import Waits
from umview.ptrace.abi import P_PGID, P_PID
from umview.ptrace.procfs import (_all_tasks, _COPIES, _copy_of, _fd_link, _ns_ids, _ns_inode, _OWN_STATUS,
                                  _PROC_FD, _PROC_FILE, _tgid)


class _Classes:
    """A class attribute holding the calls of classes of the syscall table,
    looked up when first read (the table is not loaded before a tracer or a
    module needs it: umview.monitor), then kept on the class in its stead."""

    def __init__(self, *classes, also=()):
        self.classes, self.also = classes, frozenset(also)

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner):
        from umview.syscalls import calls

        value = calls(*self.classes) | self.also
        setattr(owner, self.name, value)  # later reads (wants(), every call) find the set itself
        return value


class InnerTracing(ProcView, Requests, Events, Waits, Engine):
    """The emulated ptrace and the waits of inner tracers (the monitor's own
    engine, like the control channel: newest of all)."""

    name = "ptrace"
    description = "ptrace for the processes of the view (inner tracers)"
    beside_mounts = True
    syscalls = frozenset({"ptrace"})
    newest = 2
    abis = frozenset({"x86_64"})  # i386 tracers: ENOSYS (docs/internals.md)
    _STATFS = frozenset({"fstatfs"})
    # the classes of calls it watches once a tracer or a path module is there
    # (the syscall table is not loaded before: umview.monitor)
    _WAITS = _Classes("waits")
    OPENS = _Classes("opens")
    _LINKS = _Classes("readlinks", also={"statfs"})  # of /proc/PID/fd/N

    def __init__(self, monitor):
        self.monitor = monitor
        self.tracees = {}   # tid -> Tracee
        self.exited = {}    # tracer tgid -> [_Exited]
        self.waiters = {}   # tracer tid -> (number, name, args) of the wait it blocks in (maybe as pause),
                            # or None: interrupted to make a wait it may be in start again (_kick_waits)
        self.active = False
        self._sigchld = {}  # tracer tgid -> (when asked, does it see SIGCHLD)
        self._levels = {}   # tracer tgid -> the depth of its pid namespace below the monitor's
        self._held = {}     # tid -> Tracee: held at its exit stop, its exit its tracer's (_exiting)
        self._kids = {}     # tracer tgid -> (um_family_gen, its children) as last read (Waits._children)
        self._quiet = set()  # tracer tids whose WNOHANG waits the C core answers (Waits._quieted)
        self._kernel_waited = set()  # tracer tgids a wait of which went to the kernel since (Waits._wait)
        # the files other engines show (fakeroot's status) show this too
        fdpass.proc_editor = self._proc_edit

    @staticmethod
    def tgid_of(tid):
        return _tgid(tid)

    # --- the claims ---
    def wants(self, call):
        if call.name == "ptrace":
            return True
        if call.name in self._WAITS:
            return self._is_tracer(self.tgid_of(call.tid))
        if call.name in self.OPENS:
            paths = call.paths()
            return bool(paths and paths[0] is not None and _PROC_FILE.match(paths[0]))
        if call.name in self._STATFS:
            return _copy_of(_fd_link(call.tid, core.signed32(call.args[0]))) is not None
        if call.name in self._LINKS:
            paths = call.paths()
            return bool(paths and paths[0] is not None and _PROC_FD.match(paths[0]))
        return False

    def _is_tracer(self, tgid):
        return tgid is not None and (tgid in self.exited or any(t.tgid == tgid for t in self.tracees.values()))

    def _activate(self):
        """The first inner tracer: its waits must now stop too."""
        if self.active:
            return
        self.active = True
        self.syscalls = self.syscalls | self._WAITS
        self.watch_proc(refresh=False)
        self.monitor.refresh_claims()

    def watch_proc(self, refresh=True):
        """/proc/PID/status and stat as a tracer reads them (TracerPid, t/T),
        and readlink and statfs of /proc/PID/fd/N and fstatfs of a copy,
        which say what they say of the file. From the first inner tracer, or
        from the start where the view traps opens anyway (a path module):
        in a view without, each open would become a notification
        (docs/internals.md)."""
        if self.prefixes[:1] == (b"/proc",):
            return
        # fstatfs of an fd under the copies' "path" (the C core reads the
        # fd's link), trapped before the first copy is made: stacked then,
        # the filter could come after the copy's owner made its next call
        self.fd_syscalls = self._STATFS
        self.path_syscalls = self.OPENS | self._LINKS
        # every path under /proc goes to Python then (a prefix claims every
        # path call): before the first inner tracer only a process's own
        # status, which programs read to tell whether they are traced
        self.prefixes = ((b"/proc",) if self.active else _OWN_STATUS) + (_COPIES,)
        if refresh:
            self.monitor.refresh_claims()

    def enter(self, call):
        if call.name == "ptrace":
            return self._ptrace(call)
        if call.name in self.OPENS:
            return self._proc_file(call)
        if call.name in self._STATFS:
            return self._proc_statfs(call, 1)
        if call.name in self._LINKS:
            return self._proc_link(call)
        return self._wait(call)

    # --- a tracer in a pid namespace of its own (unshare -p, a container) ---
    def _level(self, tgid):
        """How deep process tgid's pid namespace is below the monitor's."""
        level = self._levels.get(tgid)
        if level is None:
            level = self._levels[tgid] = max(len(_ns_ids(tgid, "NSpid")) - 1, 0)
        return level

    def _virtual(self, tracer_tgid, tid):
        """tid's id as process tracer_tgid knows it (0: not in its namespace)."""
        level = self._level(tracer_tgid)
        if not level:
            return tid
        ids = _ns_ids(tid, "NSpid")
        return ids[level] if len(ids) > level else 0

    def _global(self, tracer_tid, vpid, scan=False, field="NSpid"):
        """The thread (or, field NSpgid, process group) tracer_tid names vpid
        in its pid namespace: its tracees first, with scan every thread of the
        view. Unknown: a pid no thread has."""
        tgid = self.tgid_of(tracer_tid)
        level = self._level(tgid)
        if not level or vpid <= 0:
            return vpid
        if field == "NSpid":
            for t in self.tracees.values():
                if t.vtid == vpid and t.tgid == tgid:
                    return t.tid
        if scan or field != "NSpid":
            mine = _ns_inode(tgid)
            for task in _all_tasks():
                ids = _ns_ids(task, field)
                if len(ids) > level and ids[level] == vpid and (len(ids) > level + 1 or _ns_inode(task) == mine):
                    return ids[0]
        return -(1 << 30)

    def _wait_args(self, tid, name, args):
        """A wait's pid or process group argument, as the monitor names it."""
        if not self._level(self.tgid_of(tid)):
            return args
        args = list(args)
        if name == "waitid":
            idtype, ident = args[0] & 0xFFFFFFFF, core.signed32(args[1])
            if idtype in (P_PID, P_PGID) and ident > 0:
                args[1] = self._global(tid, ident, field="NSpid" if idtype == P_PID else "NSpgid") & 0xFFFFFFFF
        else:
            pid = core.signed32(args[0])
            if pid > 0:
                args[0] = self._global(tid, pid) & 0xFFFFFFFF
            elif pid < -1:
                args[0] = -self._global(tid, -pid, field="NSpgid") & 0xFFFFFFFF
        return args
