"""ptrace for the processes of a view, emulated by the monitor.

ptrace allows one tracer per thread, and the monitor is it. A process of the
view that calls ptrace() (strace, gdb, a python-ptrace tool) becomes the
*inner tracer* of its tracee in the monitor's books (``Tracee``): its tracee's
stops reach the monitor as usual, are held there (the thread stays stopped)
and reported to the inner tracer's wait4/waitid with the status words the
kernel would give; its requests (PEEK/POKE, GETREGS, GETREGSET,
GET_SYSCALL_INFO, ...) are served on the tracee by the monitor, which is its
real tracer; its CONT/SYSCALL/LISTEN/DETACH resume the held stop.

The inner tracer is the newest engine of its tracees (the original authors'
order): at a syscall-entry stop it sees the call as the process made it, and
only when it resumes the tracee does the monitor decide the call (as it now
stands) through the C core and the engines; at the exit stop it sees the
result the engines made, and a call they skipped shows its own number.

A tracer's wait that finds no emulated stop blocks in the kernel: as the real
wait4/waitid when the tracer has children that may end it, else rewritten to
pause(); a stop for it then interrupts it (um_interrupt) and the wait is
answered at that interrupt stop. See docs/internals.md, "Tracers inside a
view".
"""
import errno
import os
import re
import signal
import struct
import sys
import time

from umview import core, fdpass
from umview.core import ffi, lib
from umview.engine import CONTINUE, CONTINUE_AFTER, Engine, Skip
from umview.syscalls import calls

# requests (include/uapi/linux/ptrace.h, arch/x86/include/uapi/asm/ptrace-abi.h)
TRACEME, PEEKTEXT, PEEKDATA, PEEKUSER, POKETEXT, POKEDATA, POKEUSER, CONT, KILL, SINGLESTEP = range(10)
GETREGS, SETREGS, GETFPREGS, SETFPREGS, ATTACH, DETACH = 12, 13, 14, 15, 16, 17
SYSCALL, GET_THREAD_AREA, SET_THREAD_AREA, SYSEMU, SYSEMU_SINGLESTEP, SINGLEBLOCK = 24, 25, 26, 31, 32, 33
SETOPTIONS, GETEVENTMSG, GETSIGINFO, SETSIGINFO, GETREGSET, SETREGSET = range(0x4200, 0x4206)
SEIZE, INTERRUPT, LISTEN, PEEKSIGINFO, GETSIGMASK, SETSIGMASK = range(0x4206, 0x420C)
GET_SYSCALL_INFO, GET_RSEQ_CONFIGURATION, SET_SYSCALL_INFO = 0x420E, 0x420F, 0x4212

# options and events
O_TRACESYSGOOD, O_TRACEFORK, O_TRACEVFORK, O_TRACECLONE = 1, 2, 4, 8
O_TRACEEXEC, O_TRACEVFORKDONE, O_TRACEEXIT, O_TRACESECCOMP = 0x10, 0x20, 0x40, 0x80
O_EXITKILL, O_SUSPEND_SECCOMP = 0x100000, 0x200000
O_MASK = 0xFF | O_EXITKILL | O_SUSPEND_SECCOMP
EVENT_FORK, EVENT_VFORK, EVENT_CLONE, EVENT_EXEC, EVENT_VFORK_DONE, EVENT_EXIT = 1, 2, 3, 4, 5, 6
EVENT_SECCOMP, EVENT_STOP = 7, 128

# wait options
WNOHANG, WSTOPPED, WEXITED, WCONTINUED, WNOWAIT = 1, 2, 4, 8, 0x01000000
WNOTHREAD, WALL, WCLONE = 0x20000000, 0x40000000, 0x80000000
P_ALL, P_PID, P_PGID, P_PIDFD = 0, 1, 2, 3
CLD_EXITED, CLD_KILLED, CLD_DUMPED, CLD_TRAPPED = 1, 2, 3, 4

# the kernel's restart codes, seen in a blocked call's result at an interrupt
_RESTARTS = (-512, -513, -514, -516, -errno.EINTR)
_USER_REGS = 27 * 8      # struct user_regs_struct
_ORIG_RAX = 15 * 8       # its orig_rax
_RAX = 10 * 8
_TRAP_BRKPT = 1
_RDI = 14 * 8
_RIP = 16 * 8
_NR = {"x86_64": {"wait4": 61, "waitid": 247, "pause": 34, "clone": 56}}
_CLONE_PTRACE = 0x2000


# a copy _proc_file hands over is a memfd named for the file it stands for:
# /proc/self/fd/N of it reads "/memfd:umview:/proc/PID/status (deleted)"
_COPY_LINK = re.compile(rb"^/memfd:umview:(/proc/.*) \(deleted\)$")
_PROC_FD = re.compile(rb"^/proc/(self|thread-self|\d+)(?:/task/(\d+))?/fd/(\d+)$")
_OWN_STATUS = (b"/proc/self/status", b"/proc/thread-self/status")
_COPIES = b"/memfd:umview:"  # what the kernel shows as the path of a copy
_PROC_FILE = re.compile(rb"^/proc/(self|thread-self|\d+)(?:/task/(\d+))?/(status|stat)$")
_DEBUG = bool(os.environ.get("UMVIEW_DEBUG_PTRACE"))


def _dbg(*what):
    if _DEBUG:
        print("umview ptrace:", *what, file=sys.stderr, flush=True)


def _stop(sig, event=0):
    """The wait status of a ptrace stop."""
    return 0x7F | (sig << 8) | (event << 16)


def _u64(value):
    return value & 0xFFFFFFFFFFFFFFFF


def _s64(value):
    value = _u64(value)
    return value - (1 << 64) if value >> 63 else value


def _fd_link(tid, fd):
    """What the kernel shows as the path of fd of thread tid (bytes), or None."""
    try:
        return os.fsencode(os.readlink(f"/proc/{tid}/fd/{fd}"))
    except (OSError, ValueError):
        return None


def _copy_of(link):
    """The path of the /proc file a copy _proc_file handed over stands for,
    given the copy's fd link; None for any other file."""
    m = link is not None and _COPY_LINK.match(link)
    return m.group(1) if m else None


def _tgid(tid):
    try:
        return int(core.proc_status(tid, "Tgid")["Tgid"][0])
    except (OSError, KeyError, ValueError):
        return None


def _stat_fields(tid):
    """(ppid, pgid) of a thread's process, or None."""
    try:
        with open(f"/proc/{tid}/stat", "rb") as f:
            rest = f.read().rsplit(b")", 1)[1].split()
        return int(rest[1]), int(rest[2])
    except (OSError, ValueError, IndexError):
        return None


class Tracee:
    """A thread of the view and its inner tracer, as the kernel would keep them."""

    __slots__ = ("tid", "tracer", "tgid", "seized", "options", "state", "kind", "status", "eventmsg",
                 "sys", "step", "shown_nr", "real_child", "clone", "expect_initial", "interrupt", "pgid",
                 "proc", "emu", "emu_entry", "vtid", "exiting", "released")

    def __init__(self, tid, tracer, tgid, seized, options=0):
        self.tid = tid
        self.tracer = tracer  # the tracer's tid (None: TRACEME, any thread of tgid until it asks)
        self.tgid = tgid      # the tracer's process
        self.seized = seized
        self.options = options
        self.state = "running"  # running | stopped (held, the tracer knows) | listening
        self.kind = None        # the stop it is held at: entry exit signal group event initial interrupt
        self.status = None      # the stop's wait status, until a wait takes it
        self.eventmsg = 0
        self.sys = False        # resumed with PTRACE_SYSCALL
        self.step = False
        self.emu = False        # resumed with PTRACE_SYSEMU(_SINGLESTEP): the kernel skips its calls
        self.emu_entry = False  # held at an entry stop reached so: the call is skipped, not decided
        self.vtid = tid         # its id in its tracer's pid namespace (_tracer_view)
        self.shown_nr = None    # the number the tracer sees at the exit of a call the view changed
        self.real_child = False  # its process is a child of the tracer's (the real wait reports its exit)
        self.clone = False      # a thread: waited for only with __WALL or __WCLONE
        self.expect_initial = False
        self.interrupt = False
        self.pgid = None
        self.proc = None        # its process (tgid)
        self.exiting = False    # at its PTRACE_EVENT_EXIT stop, reported (the option asked)
        self.released = False   # held at its exit (_exiting), then let go on to die


class _Exited:
    """An exit to report to an inner tracer (a tracee not its child)."""

    __slots__ = ("tid", "status", "clone", "pgid", "proc", "vtid")

    def __init__(self, tid, status, clone, pgid, proc=None, vtid=None):
        self.tid, self.status, self.clone, self.pgid = tid, status, clone, pgid
        self.proc = proc  # the process of a thread (clone)
        self.vtid = tid if vtid is None else vtid  # its id in its tracer's pid namespace


class InnerTracing(Engine):
    """The emulated ptrace and the waits of inner tracers (the monitor's own
    engine, like the control channel: newest of all)."""

    name = "ptrace"
    description = "ptrace for the processes of the view (inner tracers)"
    beside_mounts = True
    syscalls = frozenset({"ptrace"})
    newest = 2
    abis = frozenset({"x86_64"})  # i386 tracers: ENOSYS (docs/internals.md)
    _WAITS = calls("waits")
    OPENS = calls("opens")
    _STATFS = frozenset({"fstatfs"})
    _LINKS = calls("readlinks") | {"statfs"}  # of /proc/PID/fd/N

    def __init__(self, monitor):
        self.monitor = monitor
        self.tracees = {}   # tid -> Tracee
        self.exited = {}    # tracer tgid -> [_Exited]
        self.waiters = {}   # tracer tid -> (number, name, args) of the wait it blocks in (maybe as pause),
                            # or None: interrupted to make a wait it may be in start again (_kick_waits)
        self.active = False
        self._tgids = {}    # tid -> tgid, while the thread lives (exit_event forgets it)
        self._sigchld = {}  # tracer tgid -> (when asked, does it see SIGCHLD)
        self._levels = {}   # tracer tgid -> the depth of its pid namespace below the monitor's
        self._held = {}     # tid -> Tracee: held at its exit stop, its exit its tracer's (_exiting)
        # the files other engines show (fakeroot's status) show this too
        fdpass.proc_editor = self._proc_edit

    def tgid_of(self, tid):
        tgid = self._tgids.get(tid)
        if tgid is None:
            tgid = _tgid(tid)
            if tgid is not None:
                self._tgids[tid] = tgid
        return tgid

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

    # --- /proc as a tracer sees it ---
    def _proc_file(self, call):
        """/proc/PID[/task/TID]/status or stat of a process of the view:
        TracerPid is its inner tracer's (0 for the monitor), and a thread the
        monitor stops shows the state it has natively: "t (tracing stop)" only
        at a stop its tracer knows of, "T (stopped)" in a group-stop the
        monitor listens to, else running."""
        flags = call.open_flags()
        if call.name == "openat2" or (flags & 3) != os.O_RDONLY:
            return CONTINUE
        m = _PROC_FILE.match(call.paths()[0])
        who, kind = m.group(2) or m.group(1), m.group(3)
        tid = fdpass.proc_pid(who, call.tid, self.tgid_of)
        if self._served_by_others(call, kind):
            return CONTINUE  # their copy shows this too (fdpass.proc_editor)
        text = fdpass.view_proc_file(call, who, kind, edit=False)
        if text is None:
            return CONTINUE
        new = self._proc_view(tid, text, kind == b"status")
        if new == text:
            return CONTINUE
        return fdpass.hand_over_content(call, new, flags, "umview:" + os.fsdecode(self._shown(call, m)))

    def _proc_edit(self, pid, name, text):
        return self._proc_view(pid, text, name == b"status") if name in (b"status", b"stat") else text

    def _served_by_others(self, call, kind):
        """Does an older engine of the caller's view answer this open with a
        copy of its own (fakeroot's status)?"""
        view = self.monitor.dispatcher.view_of(call.tid)
        return any(kind in e.proc_files and e.wants(call) for e in view.engines if e is not self)

    def _shown(self, call, m):
        """The path the kernel shows for the /proc file m names (its
        /proc/PID/fd link): self and thread-self resolved, in the caller's
        pid namespace."""
        who = m.group(1)
        if who in (b"self", b"thread-self"):
            ids = _ns_ids(call.tid, "NSpid")
            tid = ids[-1] if ids else call.tid
            tgids = _ns_ids(self.tgid_of(call.tid), "NSpid")
            tgid = tgids[-1] if tgids else self.tgid_of(call.tid)
            who = b"%d" % tgid if who == b"self" else b"%d/task/%d" % (tgid, tid)
        task = b"/task/" + m.group(2) if m.group(2) else b""
        return b"/proc/" + who + task + b"/" + m.group(3)

    def _proc_link(self, call):
        """readlink (statfs) of /proc/PID/fd/N where N is a copy _proc_file
        handed over: the path of (procfs, as) the file it stands for."""
        m = _PROC_FD.match(call.paths()[0])
        try:
            tid = fdpass.proc_pid(m.group(2) or m.group(1), call.tid, self.tgid_of)
        except ValueError:
            return CONTINUE
        link = _fd_link(tid, int(m.group(3)))
        if link is None:
            return CONTINUE  # the kernel says what is wrong
        path = _copy_of(link)
        if path is not None and call.name == "statfs":
            return self._proc_statfs(call, 1)
        if path is None and call.name != "statfs":
            # a file in a layer of the view: the path the view shows (a
            # tracer's -y, another process's fd)
            path = next(filter(None, (e.shown_path(link) for e in self.monitor.dispatcher.engines)), None)
        if path is None:
            return CONTINUE
        if call.size <= 0:
            return Skip(-errno.EINVAL)
        data = path[:call.size]
        try:
            call.write_mem(call.raw("buf"), data)
        except OSError:
            return Skip(-errno.EFAULT)
        return Skip(len(data))

    def _proc_statfs(self, call, at):
        """fstatfs of a copy _proc_file handed over, or statfs of its
        /proc/PID/fd link: what the kernel says of the file it stands for
        (the call run on /proc instead; at: the index of the buffer)."""
        path = call.alloc(len(b"/proc") + 1)
        call.write_mem(path, b"/proc\0")
        return Skip(call.inject("statfs", path, call.args[at]))

    def _proc_view(self, tid, text, status):
        held = self._held.get(tid)
        t = self.tracees.get(tid) or held
        state = re.search(rb"(?m)^State:\t(\S).*$" if status else rb"\) (\S) ", text)
        if state and state.group(1) == b"t" and (t is None or t.state not in ("stopped", "listening")):
            # a stop of the monitor's own, or a group-stop it listens to, or
            # the exit stop a process waits at for its tracer (_exiting)
            shown = (b"Z (zombie)" if held else
                     b"T (stopped)" if t is None and lib.um_listening(tid) else b"R (running)")
            shown = b"State:\t" + shown if status else b") " + shown[:1] + b" "
            text = text[:state.start()] + shown + text[state.end():]
        if status:
            tracer = 0 if t is None else (t.tracer or t.tgid)
            text = re.sub(rb"(?m)^TracerPid:\t\d+$", b"TracerPid:\t%d" % tracer, text, count=1)
        return text

    # --- requests ---
    def _ptrace(self, call):
        req = call.args[0] & 0xFFFFFFFF
        pid = core.signed32(call.args[1])
        addr, data = _u64(call.args[2]), _u64(call.args[3])
        _dbg(call.tid, "ptrace", hex(req), pid, hex(addr), hex(data))
        if req == TRACEME:
            return self._traceme(call)
        if req in (ATTACH, SEIZE):
            return self._attach(call, req, self._global(call.tid, pid, scan=True), addr, data)
        t = self.tracees.get(self._global(call.tid, pid))
        pid = t.tid if t is not None else pid
        if t is None or not self._is_its_tracer(t, call.tid):
            return Skip(-errno.ESRCH)
        if req == KILL:
            _tgkill(pid, signal.SIGKILL)
            return Skip(0)
        if req == INTERRUPT:
            if not t.seized:
                return Skip(-errno.EIO)
            if t.state != "stopped":
                t.interrupt = True
                lib.um_interrupt(pid)
            return Skip(0)
        if req == LISTEN:
            if not t.seized:
                return Skip(-errno.EIO)
            if t.state != "stopped":
                return Skip(-errno.ESRCH)
            if t.kind != "group":
                return Skip(-errno.EIO)
            t.state = "listening"
            t.status = None
            core.check(lib.um_resume(pid, lib_PTRACE_LISTEN, 0))
            return Skip(0)
        if t.state != "stopped":
            return Skip(-errno.ESRCH)
        try:
            return Skip(self._request(call, t, req, pid, addr, data))
        except OSError as exc:
            return Skip(-(exc.errno or errno.EIO))

    def _is_its_tracer(self, t, tid):
        if t.tracer is None and self.tgid_of(tid) == t.tgid:
            t.tracer = tid  # TRACEME: the parent's thread that asks first
        return t.tracer == tid

    def _traceme(self, call):
        if call.tid in self.tracees:
            return Skip(-errno.EPERM)
        fields = _stat_fields(call.tid)
        if fields is None or fields[0] <= 1:
            return Skip(-errno.EPERM)
        ppid = fields[0]
        if not _in_view(ppid):
            return Skip(-errno.EPERM)
        t = Tracee(call.tid, None, ppid, seized=False)
        t.real_child = _tgid(call.tid) == call.tid
        self._add(t)
        self._kick_waits(ppid)
        return Skip(0)

    def _kick_waits(self, tgid):
        """The parent may already be in a wait the monitor let through (it was
        not a tracer then), or on its way into one: interrupt its threads, so
        that such a wait starts again through the monitor and finds its new
        tracee's stops (_answer_waiter)."""
        try:
            tasks = [int(t) for t in os.listdir(f"/proc/{tgid}/task")]
        except OSError:
            return
        for task in tasks:
            self.waiters.setdefault(task, None)
            lib.um_interrupt(task)

    def _attach(self, call, req, pid, addr, data):
        if req == SEIZE:
            if addr != 0:
                return Skip(-errno.EIO)
            if data & ~O_MASK & 0xFFFFFFFF:
                return Skip(-errno.EINVAL)
            if data & O_SUSPEND_SECCOMP:
                return Skip(-errno.EPERM)  # it would suspend the view's own filter
        if pid <= 0 or not os.path.exists(f"/proc/{pid}"):
            return Skip(-errno.ESRCH)
        tgid = _tgid(call.tid)
        if _tgid(pid) == tgid:
            return Skip(-errno.EPERM)
        if pid in self.tracees or not _in_view(pid) or not _may_attach(call.tid, pid):
            return Skip(-errno.EPERM)
        t = Tracee(pid, call.tid, tgid, seized=req == SEIZE, options=data if req == SEIZE else 0)
        fields = _stat_fields(pid)
        t.real_child = fields is not None and fields[0] == tgid and _tgid(pid) == pid
        t.clone = _tgid(pid) != pid
        self._add(t)
        if req == ATTACH:
            _tgkill(pid, signal.SIGSTOP)
        return Skip(0)

    def _add(self, t):
        t.pgid = _pgid(t.tid)
        self._activate()
        t.proc = _tgid(t.tid)
        t.vtid = self._virtual(t.tgid, t.tid)
        self.tracees[t.tid] = t
        self._sync(t)

    def _sync(self, t):
        """Tell the C core what t's tracer wants of its stops."""
        flags = lib.UM_INNER
        if t.sys:
            flags |= lib.UM_INNER_SYSCALL
        if t.options & O_TRACESECCOMP:
            flags |= lib.UM_INNER_SECCOMP
        if t.step:
            flags |= lib.UM_INNER_STEP
        if t.emu:
            flags |= lib.UM_INNER_EMU
        lib.um_set_inner(t.tid, flags)

    def _request(self, call, t, req, pid, addr, data):
        tracer = call.tid
        if req in (PEEKTEXT, PEEKDATA, PEEKUSER):
            word = ffi.new("uint64_t *")
            if req == PEEKUSER and addr == _ORIG_RAX and t.shown_nr is not None:
                word[0] = _u64(t.shown_nr)
            else:
                core.check(lib.um_ptrace(req, pid, addr, int(ffi.cast("uintptr_t", word))))
            core.write_mem(tracer, data, struct.pack("<Q", word[0]))
            return 0
        if req in (POKETEXT, POKEDATA, POKEUSER):
            return core.check(lib.um_ptrace(req, pid, addr, data))
        if req in (CONT, SYSCALL, SINGLESTEP, DETACH, SYSEMU, SYSEMU_SINGLESTEP):
            if data > 64:
                return -errno.EIO
            return self._resume(t, req, data)
        if req == SINGLEBLOCK:
            return -errno.EIO  # not emulated (docs/internals.md)
        if req == GETREGS:
            buf = self._get(pid, GETREGS, 0, _USER_REGS)
            if t.shown_nr is not None:
                buf[_ORIG_RAX:_ORIG_RAX + 8] = struct.pack("<q", t.shown_nr)
            core.write_mem(tracer, data, bytes(buf))
            return 0
        if req == SETREGS:
            buf = bytearray(core.read_mem(tracer, data, _USER_REGS))
            if t.shown_nr is not None and struct.unpack_from("<q", buf, _ORIG_RAX)[0] == t.shown_nr:
                real = self._get(pid, GETREGS, 0, _USER_REGS)
                buf[_ORIG_RAX:_ORIG_RAX + 8] = real[_ORIG_RAX:_ORIG_RAX + 8]
            return self._put(pid, SETREGS, 0, buf)
        if req == GETFPREGS:
            core.write_mem(tracer, data, bytes(self._get(pid, GETFPREGS, 0, 512)))
            return 0
        if req == SETFPREGS:
            return self._put(pid, SETFPREGS, 0, core.read_mem(tracer, data, 512))
        if req in (GETREGSET, SETREGSET):
            base, length = struct.unpack("<QQ", core.read_mem(tracer, data, 16))
            length = min(length, 1 << 20)
            buf = ffi.new("char[]", max(length, 1))
            if req == SETREGSET:
                ffi.memmove(buf, core.read_mem(tracer, base, length), length)
            iov = ffi.new("uint64_t[2]", [int(ffi.cast("uintptr_t", buf)), length])
            core.check(lib.um_ptrace(req, pid, addr, int(ffi.cast("uintptr_t", iov))))
            if req == GETREGSET:
                if t.shown_nr is not None and addr == 1 and iov[1] >= _ORIG_RAX + 8:  # NT_PRSTATUS
                    ffi.memmove(buf + _ORIG_RAX, struct.pack("<q", t.shown_nr), 8)
                core.write_mem(tracer, base, ffi.buffer(buf, iov[1])[:])
            core.write_mem(tracer, data + 8, struct.pack("<Q", iov[1]))
            return 0
        if req == GETSIGINFO:
            if t.kind == "step":
                core.write_mem(tracer, data, self._step_siginfo(pid))
            else:
                core.write_mem(tracer, data, bytes(self._get(pid, GETSIGINFO, 0, 128)))
            return 0
        if req == SETSIGINFO:
            return self._put(pid, SETSIGINFO, 0, core.read_mem(tracer, data, 128))
        if req == PEEKSIGINFO:
            off, flags, nr = struct.unpack("<QIi", core.read_mem(tracer, addr, 16))
            nr = max(0, min(nr, 4096))
            args = ffi.new("char[]", struct.pack("<QIi", off, flags, nr))
            buf = ffi.new("char[]", max(nr, 1) * 128)
            n = core.check(lib.um_ptrace(req, pid, int(ffi.cast("uintptr_t", args)),
                                         int(ffi.cast("uintptr_t", buf))))
            if n:
                core.write_mem(tracer, data, ffi.buffer(buf, n * 128)[:])
            return n
        if req in (GETSIGMASK, SETSIGMASK):
            if addr != 8:
                return -errno.EINVAL
            if req == GETSIGMASK:
                core.write_mem(tracer, data, bytes(self._get(pid, req, 8, 8)))
                return 0
            return self._put(pid, req, 8, core.read_mem(tracer, data, 8))
        if req == GETEVENTMSG:
            core.write_mem(tracer, data, struct.pack("<Q", _u64(t.eventmsg)))
            return 0
        if req == SETOPTIONS:
            if data & ~O_MASK & 0xFFFFFFFFFFFFFFFF:
                return -errno.EINVAL
            if data & O_SUSPEND_SECCOMP:
                return -errno.EPERM
            t.options = data
            self._sync(t)
            return 0
        if req in (GET_SYSCALL_INFO, GET_RSEQ_CONFIGURATION):
            size = 88 if req == GET_SYSCALL_INFO else 32
            buf = ffi.new("char[]", size)
            n = core.check(lib.um_ptrace(req, pid, size, int(ffi.cast("uintptr_t", buf))))
            core.write_mem(tracer, data, ffi.buffer(buf, min(n, addr, size))[:])
            return n
        if req == SET_SYSCALL_INFO:
            size = min(addr, 88)
            return self._put(pid, req, size, core.read_mem(tracer, data, size))
        if req in (GET_THREAD_AREA, SET_THREAD_AREA):
            if req == GET_THREAD_AREA:
                core.write_mem(tracer, data, bytes(self._get(pid, req, addr, 16)))
                return 0
            return self._put(pid, req, addr, core.read_mem(tracer, data, 16))
        return -errno.EIO  # an unknown request, as the kernel says

    def _step_siginfo(self, pid):
        """The siginfo of a step's trap at the end of a system call (x86's
        user_single_step_report: SIGTRAP, TRAP_BRKPT, si_addr the next
        instruction), where the thread really is at a syscall-exit stop."""
        rip = struct.unpack_from("<Q", self._get(pid, GETREGS, 0, _USER_REGS), _RIP)[0]
        return struct.pack("<iiiiQ", signal.SIGTRAP, 0, _TRAP_BRKPT, 0, rip).ljust(128, b"\0")

    @staticmethod
    def _get(pid, req, addr, size):
        buf = ffi.new("char[]", size)
        core.check(lib.um_ptrace(req, pid, addr, int(ffi.cast("uintptr_t", buf))))
        return bytearray(ffi.buffer(buf, size)[:])

    @staticmethod
    def _put(pid, req, addr, data):
        buf = ffi.new("char[]", bytes(data))
        return core.check(lib.um_ptrace(req, pid, addr, int(ffi.cast("uintptr_t", buf))))

    # --- resuming a held stop ---
    def _resume(self, t, req, sig):
        kind = t.kind
        if req == DETACH:
            del self.tracees[t.tid]
            lib.um_set_inner(t.tid, 0)
            t.sys = t.step = t.emu = False  # it runs on untraced (a step asked before is not kept)
        else:
            t.sys = req == SYSCALL
            t.step = req in (SINGLESTEP, SYSEMU_SINGLESTEP)
            t.emu = req in (SYSEMU, SYSEMU_SINGLESTEP)
            self._sync(t)
        t.state = "running"
        t.status = None
        t.kind = None
        if kind != "exit":
            t.shown_nr = None
        tid = t.tid
        if t.exiting and req != DETACH and self._exiting(t):
            return 0  # held at its exit until its tracer collects it
        if kind == "group" and req == DETACH:
            lib.um_resume(tid, lib_PTRACE_LISTEN, 0)  # it stays in its group-stop
            return 0
        # a signal given at a syscall stop is sent (SI_KERNEL); at an event,
        # group-stop or interrupt it is ignored (kernel/signal.c, ptrace.h)
        deliver = sig if kind in ("signal", "step", "exit") else 0
        if sig and kind == "signal":
            self._signal_changed(t, sig)
        if sig and kind == "entry":
            lib.um_set_resume_signal(tid, sig)  # at the monitor's resume of the stop
        if kind == "entry" and t.emu_entry:
            # reached under PTRACE_SYSEMU: the kernel skips the call (the
            # view has nothing to decide), whatever this resume asks
            lib.um_resume(tid, lib_PTRACE_CONT, 0)
            return 0
        if kind in ("entry", "seccomp"):
            # the call goes on: now the view decides it, as it now stands
            self.monitor.defer(lambda: self._decide(tid))
            return 0
        core.check(lib.um_resume(tid, lib_PTRACE_SINGLESTEP if t.step else lib_PTRACE_CONT, deliver))
        return 0

    def _signal_changed(self, t, sig):
        """At a signal-delivery stop resumed with another signal the kernel
        delivers that one as sent by the tracer (SI_USER, its pid and uid):
        here the monitor resumes, so the siginfo says so first."""
        try:
            info = self._get(t.tid, GETSIGINFO, 0, 128)
        except OSError:
            return
        if struct.unpack_from("<i", info)[0] == sig:
            return  # the same signal, or one the tracer set with SETSIGINFO
        tracer = t.tracer or t.tgid
        self._put(t.tid, SETSIGINFO, 0, struct.pack("<iiiiiI", sig, 0, 0, 0, tracer, _uid(tracer)).ljust(128, b"\0"))

    def _decide(self, tid):
        ev = ffi.new("struct um_event *")
        if lib.um_decide_stopped(tid, ev) != lib.UM_EV_SYSCALL:
            return
        call = self.monitor.dispatch_entry(ev)
        t = self.tracees.get(tid)
        if t is not None and (ev.reply == lib.UM_REPLY_SKIP or ev.changed & lib.UM_CHANGED_NR):
            t.shown_nr = call.orig_nr
        lib.um_finish(ev)

    # --- stops of tracees (from the monitor's loop) ---
    def stop_event(self, ev):
        """A UM_EV_STOP. True: hold the thread (reported to its tracer)."""
        tid, status = ev.tid, ev.status
        t = self.tracees.get(tid)
        _dbg("stop", tid, hex(status), ev.msg, t is not None, tid in self.waiters)
        if t is None:
            if tid in self.waiters:
                self._answer_waiter(tid)
            return False
        sig, event = (status >> 8) & 0xFF, (status >> 16) & 0xFFFF
        if ev.msg == lib.UM_STOP_STEP and sig == signal.SIGTRAP | 0x80:
            return self._report(t, _stop(signal.SIGTRAP), "step")
        if ev.msg in (lib.UM_STOP_ENTRY, lib.UM_STOP_EXIT) and sig == signal.SIGTRAP | 0x80:
            kind = "entry" if ev.msg == lib.UM_STOP_ENTRY else "exit"
            if kind == "entry":
                t.shown_nr = None
                t.emu_entry = t.emu
            word = _stop(signal.SIGTRAP | (0x80 if t.options & O_TRACESYSGOOD else 0))
            return self._report(t, word, kind)
        if event == EVENT_STOP:
            if sig != signal.SIGTRAP:  # a group-stop
                return self._report(t, _stop(sig, EVENT_STOP) if t.seized else _stop(sig), "group")
            if t.expect_initial:
                return self._initial(t)
            if t.interrupt or t.state == "listening":
                t.interrupt = False
                return self._report(t, _stop(signal.SIGTRAP, EVENT_STOP), "interrupt")
            return False  # the monitor's own interrupt
        if event == EVENT_SECCOMP:
            t.eventmsg = ev.msg  # the filter's SECCOMP_RET_DATA
            t.shown_nr = None
            return self._report(t, _stop(signal.SIGTRAP, EVENT_SECCOMP), "seccomp")
        if event == EVENT_EXIT:
            t.eventmsg = ev.msg  # the exit status
            if t.options & O_TRACEEXIT:
                t.exiting = True
                return self._report(t, _stop(signal.SIGTRAP, event), "event")
            return self._exiting(t)
        if event == EVENT_VFORK_DONE:
            t.eventmsg = ev.msg
            return self._report(t, _stop(signal.SIGTRAP, event), "event")
        if event == 0 and sig:
            return self._report(t, _stop(sig), "signal")
        return False

    def syscall_exit(self, tid):
        """The exit of a call the engines handled: True if its tracer wants the stop."""
        t = self.tracees.get(tid)
        if t is not None and t.step:
            return self._report(t, _stop(signal.SIGTRAP), "step")  # natively the step's trap, here
        if t is None or not t.sys:
            return False
        return self._report(t, _stop(signal.SIGTRAP | (0x80 if t.options & O_TRACESYSGOOD else 0)), "exit")

    def fork_event(self, ev):
        """A fork/vfork/clone event of a tracee: True to hold the parent."""
        t = self.tracees.get(ev.tid)
        _dbg("fork", ev.tid, ev.msg, hex(ev.flags), t is not None)
        if t is None:
            return False
        flags = ev.flags
        event, option = ((EVENT_CLONE, O_TRACECLONE) if flags & lib.UM_FORK_THREAD
                         else (EVENT_VFORK, O_TRACEVFORK) if flags & lib.UM_FORK_VFORK
                         else (EVENT_FORK, O_TRACEFORK))
        if ev.msg <= 0:
            return False
        if not t.options & option:
            if self._clone_ptrace(ev.tid):
                self._attach_child(t, ev, event)  # traced too, and no event (kernel/fork.c)
            return False
        self._attach_child(t, ev, event)
        t.eventmsg = self.tracees[ev.msg].vtid if ev.msg in self.tracees else self._virtual(t.tgid, ev.msg)
        return self._report(t, _stop(signal.SIGTRAP, event), "event")

    def _clone_ptrace(self, tid):
        """Did tid's clone (at its fork event stop) ask for CLONE_PTRACE?"""
        try:
            regs = self._get(tid, GETREGS, 0, _USER_REGS)
        except OSError:
            return False
        orig, flags = struct.unpack_from("<qQ", regs, _ORIG_RAX)[0], struct.unpack_from("<Q", regs, _RDI)[0]
        return orig == _NR["x86_64"]["clone"] and bool(flags & _CLONE_PTRACE)

    def _attach_child(self, t, ev, event):
        """The child of tracee t's fork event, traced by t's tracer."""
        flags = ev.flags
        child = Tracee(ev.msg, t.tracer, t.tgid, t.seized, t.options)
        child.pgid = t.pgid
        child.proc = _tgid(ev.msg)
        child.clone = event == EVENT_CLONE and child.proc != ev.msg
        child.expect_initial = True
        child.vtid = self._virtual(t.tgid, child.tid)
        self.tracees[child.tid] = child
        self._sync(child)
        if flags & lib.UM_FORK_HELD and not self._initial(child):
            lib.um_resume(child.tid, lib_PTRACE_CONT, 0)  # held at its first stop by the C core
        elif flags & lib.UM_FORK_RAN:
            lib.um_interrupt(ev.msg)  # its first stop is past: a stop to stand for it

    def exec_event(self, ev):
        if ev.msg != ev.tid:
            self._tgids.pop(ev.msg, None)  # that tid is gone
        t = self.tracees.get(ev.msg)
        if t is None:
            return False
        former = t.vtid
        if ev.msg != ev.tid:
            # a thread execed: it now has the leader's tid, and is the leader
            # (clone no more, its parent the leader's). The old leader
            # reports no death (ptrace(2), execve under ptrace): it is gone
            # without a trace; the other threads' exits came as exits
            old = self.tracees.pop(ev.tid, None)
            del self.tracees[ev.msg]
            t.tid = ev.tid
            t.clone = False
            if old is not None:
                t.vtid, t.real_child, t.pgid = old.vtid, old.real_child, old.pgid
            else:
                t.vtid = self._virtual(t.tgid, ev.tid)
                t.real_child = _ppid(ev.tid) == t.tgid
            self.tracees[ev.tid] = t
            self._sync(t)
        if t.options & O_TRACEEXEC:
            t.eventmsg = former
            return self._report(t, _stop(signal.SIGTRAP, EVENT_EXEC), "event")
        if not t.seized:
            _tgkill(t.tid, signal.SIGTRAP)  # the legacy SIGTRAP after a successful execve
        return False

    def exit_event(self, tid, status, parent=None):
        """A thread of the view is gone: a tracee's exit goes to its tracer;
        a tracer's tracees are detached (or killed: PTRACE_O_EXITKILL)."""
        _dbg("exit", tid, hex(status))
        self._tgids.pop(tid, None)
        self._sigchld.pop(tid, None)
        self._levels.pop(tid, None)
        self.waiters.pop(tid, None)
        t = self.tracees.pop(tid, None)
        if t is not None:
            self._gone(t, status, parent)
            if not t.clone:
                self._reparented(t)
        held = self._held.pop(tid, None)
        if held is not None:
            self._reparented(held)  # its exit went to its tracer at its exit stop
        for other in [o for o in self._held.values() if o.tgid == tid]:
            self._release(other.tid)  # its tracer is gone: its parent's now
        for tgid, entries in list(self.exited.items()):
            if any(e.clone and e.proc == tid for e in entries):
                self._wake(tgid)  # a thread's exit held for this leader's (_leader_exiting)
        for other in [o for o in self.tracees.values() if o.tracer == tid or (o.tracer is None and o.tgid == tid)]:
            _dbg("detach", other.tid, other.state, other.kind)
            del self.tracees[other.tid]
            lib.um_set_inner(other.tid, 0)
            if other.options & O_EXITKILL:
                _tgkill(other.tid, signal.SIGKILL)
            elif other.state == "stopped":
                if other.kind in ("entry", "seccomp"):
                    self.monitor.defer(lambda tid=other.tid: self._decide(tid))
                else:
                    lib.um_resume(other.tid, lib_PTRACE_LISTEN if other.kind == "group" else lib_PTRACE_CONT,
                                  0)
        if tid in self.exited and not any(o.tgid == tid for o in self.tracees.values()):
            self.exited.pop(tid, None)

    def _exiting(self, t):
        """Tracee t at its exit (PTRACE_EVENT_EXIT, its status in eventmsg).
        Natively a traced process's exit is its tracer's to collect first:
        its parent is notified (SIGCHLD, its wait) when the tracer reaps it
        (kernel/exit.c). Here the monitor, the real tracer, would reap it at
        once, and the parent heard of it before the tracer. So the last
        thread of a process whose parent is not its tracer gives its tracer
        its exit now and waits at this stop until the tracer's wait takes it
        (_release). True: so held."""
        if t.clone or t.real_child:
            return False
        try:
            if len(os.listdir(f"/proc/{t.tid}/task")) != 1:
                return False  # its exit is the last thread's
        except OSError:
            return False
        parent = _ppid(t.tid)
        if not parent or parent == t.tgid:
            return False
        _dbg("exiting", t.tid, hex(t.eventmsg), "held for", t.tgid)
        del self.tracees[t.tid]
        lib.um_set_inner(t.tid, 0)
        self._held[t.tid] = t
        self.exited.setdefault(t.tgid, []).append(_Exited(t.tid, t.eventmsg, t.clone, t.pgid, t.proc, t.vtid))
        self._wake(t.tgid)
        return True

    def _release(self, tid):
        """A process held at its exit (_exiting) goes on to die: its tracer
        took its exit, or is gone."""
        t = self._held.get(tid)
        if t is not None and not t.released:
            t.released = True
            lib.um_resume(tid, lib_PTRACE_CONT, 0)

    def _reparented(self, gone):
        """A traced process is gone: its children are now another's (the
        kernel reparents them at its exit, before the monitor collects it),
        maybe its tracer's (the init of a pid namespace, a subreaper); that
        tracer then is their parent, and the kernel reports their exits."""
        for t in self.tracees.values():
            if t.tgid == gone.tgid and not t.clone and not t.real_child:
                t.real_child = _ppid(t.tid) == t.tgid

    def _gone(self, t, status, parent=None):
        if not t.clone:
            # a zombie for its parent now (read by the C core as it collected
            # the exit, before that parent may reap it): the tracer may have
            # become that parent since the attach (an orphan reparented to
            # it, the init of a pid namespace or a subreaper)
            if parent is None:
                parent = _ppid(t.tid, zombie=True)
            if parent:
                t.real_child = parent == t.tgid
            _dbg("gone", t.tid, "parent", parent, "tracer", t.tgid, "real child", t.real_child)
        if t.real_child and not t.clone:
            return  # its tracer reaps it with its own wait, as its parent
        self.exited.setdefault(t.tgid, []).append(_Exited(t.tid, status, t.clone, t.pgid, t.proc, t.vtid))
        self._wake(t.tgid)

    def _initial(self, t):
        """The first stop of an auto-attached child."""
        t.expect_initial = False
        if t.seized:
            return self._report(t, _stop(signal.SIGTRAP, EVENT_STOP), "interrupt")
        # a child attached the old way starts with a SIGSTOP; the caller
        # resumes it (once: a second PTRACE_CONT could land on the SIGSTOP's
        # own stop and discard the signal, the thread then ran on unseen)
        _tgkill(t.tid, signal.SIGSTOP)
        return False

    def _report(self, t, word, kind):
        _dbg("report", t.tid, hex(word), kind, "to", t.tgid)
        t.state = "stopped"
        t.kind = kind
        t.status = word
        self._wake(t.tgid)
        return True

    def _wake(self, tgid):
        """A stop or exit for tracer process tgid: end a wait it blocks in, and
        send it SIGCHLD as the kernel does, where it can see it."""
        for waiter in [w for w in self.waiters if self.tgid_of(w) == tgid]:
            lib.um_interrupt(waiter)
        if self._sees_sigchld(tgid):
            os.kill(tgid, signal.SIGCHLD)

    def _sees_sigchld(self, tgid):
        """_notices(tgid, SIGCHLD), asked again at most every quarter second
        (a tracer sets up its SIGCHLD before it traces)."""
        now = time.monotonic()
        when, sees = self._sigchld.get(tgid, (None, False))
        if when is None or now - when > 0.25:
            sees = _notices(tgid, signal.SIGCHLD)
            self._sigchld[tgid] = (now, sees)
        return sees

    # --- waits of inner tracers ---
    def _wait(self, call):
        tgid = self.tgid_of(call.tid)
        name = call.name
        args = self._wait_args(call.tid, name, [_u64(a) for a in call.args])
        self.waiters.pop(call.tid, None)  # a wait it left (a stop it was woken for may still come)
        served = self._serve_wait(call.tid, tgid, name, args)
        if _DEBUG:
            _dbg(call.tid, name, [hex(a) for a in args[:4]], "served", served)
        if served is not None:
            return Skip(served)
        options = args[2] if name != "waitid" else args[3]
        if not self._candidates(tgid, name, args):
            return CONTINUE  # none of its tracees is concerned: the kernel's own
        if options & WNOHANG:
            self._catch_up(tgid)
            served = self._serve_wait(call.tid, tgid, name, args)
            if served is not None:
                return Skip(served)
            if not self._real_candidates(tgid, name, args):
                # no child of its own it waits for: the kernel would say
                # ECHILD, but its tracees are there, none ready
                if name == "waitid" and args[2]:
                    core.write_mem(call.tid, args[2], bytes(128))
                return Skip(0)
            call.state(self).nohang = (name, args)
            return CONTINUE_AFTER
        if not self._real_candidates(tgid, name, args):
            # no real child it waits for (a tracee not its child, gdb's
            # waitpid(pid, 0) of a fork child): the kernel would say ECHILD at
            # once; block in pause() until a stop comes
            lib.um_set_wait_nr(call.tid, call.nr)
            call.set_syscall("pause", [])
            self.waiters[call.tid] = call.state(self).paused = (call.orig_nr, name, args)
            return CONTINUE_AFTER
        self.waiters[call.tid] = (call.nr, name, args)
        return CONTINUE

    def exit(self, call):
        st = call.state(self)
        if getattr(st, "paused", None):
            # the pause a wait was made ends: the um_interrupt of a stop for
            # it ends here, not in a PTRACE_EVENT_STOP, when the thread
            # stopped at syscall exits (ptrace(2), PTRACE_INTERRUPT)
            if call.retval in _RESTARTS and self.waiters.get(call.tid) is st.paused:
                self._answer_at_exit(call, st.paused)
            return
        # a WNOHANG wait the kernel found nothing for: its tracees are there
        name, args = st.nohang
        if call.retval in (0, -errno.ECHILD):
            # what came for it while it ran (the monitor took other stops
            # meanwhile): it returns with that, as it would natively had the
            # wait been as quick (gdb's sees a leader exit with its threads)
            tgid = self.tgid_of(call.tid)
            self._catch_up(tgid)
            served = self._serve_wait(call.tid, tgid, name, args)
            if served is not None:
                call.retval = served
                return
        if call.retval == -errno.ECHILD:
            call.retval = 0
            if name == "waitid" and args[2]:
                core.write_mem(call.tid, args[2], bytes(128))

    def _match(self, tgid, name, args, tid, clone, pgid=None):
        """Does a wait of process tgid with these arguments take tid's stop or
        exit? pgid: tid's process group if known (read when needed)."""
        if name == "waitid":
            idtype, ident, options = args[0] & 0xFFFFFFFF, core.signed32(args[1]), args[3]
            if idtype == P_PID and tid != ident:
                return False
            if idtype == P_PGID and (pgid or _pgid(tid)) != (ident or _pgid(tgid)):
                return False
            if idtype == P_PIDFD:
                return False
        else:
            pid, options = core.signed32(args[0]), args[2]
            if pid > 0 and tid != pid:
                return False
            if pid == 0 and (pgid or _pgid(tid)) != _pgid(tgid):
                return False
            if pid < -1 and (pgid or _pgid(tid)) != -pid:
                return False
        if not options & WALL and clone != bool(options & WCLONE):
            return False
        return True

    def _candidates(self, tgid, name, args):
        return any(self._match(tgid, name, args, t.tid, t.clone)
                   for t in self.tracees.values() if t.tgid == tgid) or any(
            self._match(tgid, name, args, e.tid, e.clone, e.pgid) for e in self.exited.get(tgid, ()))

    def _real_candidates(self, tgid, name, args):
        """May a real child of process tgid end this wait (the kernel's wait
        then blocks, else it fails with ECHILD)?"""
        if name == "waitid" and args[0] & 0xFFFFFFFF == P_PIDFD:
            return True  # the real wait decides
        # a tracee that is its child (strace's command) answers without /proc
        if any(t.real_child and t.tgid == tgid and self._match(tgid, name, args, t.tid, False)
               for t in self.tracees.values()):
            return True
        children = _children(tgid)
        if children is None:
            return True  # cannot tell: the real wait decides
        return any(self._match(tgid, name, args, c, False) for c in children)

    def _serve_wait(self, tid, tgid, name, args):
        """Answer a wait from an emulated stop or exit: its result, or None."""
        options = args[3] if name == "waitid" else args[2]
        nowait = name == "waitid" and options & WNOWAIT
        for t in self.tracees.values():
            if t.tgid == tgid and t.status is not None and self._match(tgid, name, args, t.tid, t.clone):
                word = t.status
                if not nowait:
                    t.status = None
                return self._write_wait(tid, name, args, t.tid, word, t.vtid)
        if name == "waitid" and not options & WEXITED:
            return None
        entry = next((e for e in self.exited.get(tgid, ()) if self._match(tgid, name, args, e.tid, e.clone, e.pgid)),
                     None)
        if entry is None or entry.clone and self._leader_exiting(entry.proc) and not self._reap(entry.proc):
            return None
        _dbg("exit served", entry.tid, entry.vtid, hex(entry.status))
        if not nowait:
            self.exited[tgid].remove(entry)
            self._release(entry.tid)
        return self._write_wait(tid, name, args, entry.tid, entry.status, entry.vtid)

    def _reap(self, pid):
        """Collect pid's exit ahead of the monitor's loop (um_reap) and take
        it into these books now: True if the kernel had it."""
        status = ffi.new("int *")
        if lib.um_reap(pid, status) != 1:
            return False
        self.exit_event(pid, status[0])
        return True

    def _catch_up(self, tgid):
        """A WNOHANG wait of tracer tgid finds nothing: take in first the
        exits the kernel already has, and the monitor has not collected, of
        the threads (and then the leader) of an exiting process it traces (a
        zombie leader). Natively the wait sees them; gdb drops a zombie
        leader while it knows other threads, and then ran out of threads to
        wait for."""
        # only processes with traced threads: a single-threaded one's exit
        # has no leader to wait for (and strace -f's waits stay cheap)
        for proc in {t.proc for t in self.tracees.values() if t.tgid == tgid and t.clone}:
            if not _zombie(proc):
                continue
            try:
                tasks = [int(task) for task in os.listdir(f"/proc/{proc}/task")]
            except (OSError, ValueError):
                continue
            for task in tasks:
                if task != proc and task in self.tracees and _exiting(task):
                    self._reap(task)
            if tasks == [proc] and proc in self.tracees:
                self._reap(proc)  # the leader, its threads all gone

    def _leader_exiting(self, proc):
        """Has process proc's leader exited, its last thread gone, and the
        monitor yet to reap it? Natively its tracer finds the leader's exit
        at the wait after the last thread's (gdb, which drops a zombie leader
        while other threads remain, counts on it, else "No unwaited-for
        children left"): the monitor reaps it first (um_reap), or the
        thread's exit waits for the leader's."""
        if proc not in self.tracees or not _zombie(proc):
            return False
        try:
            return os.listdir(f"/proc/{proc}/task") == [str(proc)]
        except OSError:
            return False

    @staticmethod
    def _write_wait(tid, name, args, who, word, vwho):
        """Write the wait's results for who's status word; vwho: who's id in
        the waiter's pid namespace."""
        if name == "waitid":
            if args[2]:
                if os.WIFEXITED(word):
                    code, st = CLD_EXITED, os.WEXITSTATUS(word)
                elif os.WIFSIGNALED(word):
                    code, st = (CLD_DUMPED if word & 0x80 else CLD_KILLED), os.WTERMSIG(word)
                else:
                    code, st = CLD_TRAPPED, word >> 8
                uid = _uid(who)
                info = struct.pack("<iiiiiI", signal.SIGCHLD, 0, code, 0, vwho, uid) + struct.pack("<i", st)
                core.write_mem(tid, args[2], info.ljust(128, b"\0"))
            if args[4]:
                core.write_mem(tid, args[4], bytes(144))
            return 0
        if args[1]:
            core.write_mem(tid, args[1], struct.pack("<i", word))
        if args[3]:
            core.write_mem(tid, args[3], bytes(144))  # struct rusage: not kept for emulated stops
        return vwho

    def _answer_waiter(self, tid):
        """The interrupt stop of a tracer blocked in a wait: answer it there if
        a stop or exit is now there for it; else it waits on."""
        waiter = self.waiters.pop(tid)
        try:
            regs = bytearray(self._get(tid, GETREGS, 0, _USER_REGS))
        except OSError:
            return
        orig, rax = struct.unpack_from("<q", regs, _ORIG_RAX)[0], struct.unpack_from("<q", regs, _RAX)[0]
        nrs = _NR["x86_64"]
        if waiter is None or orig not in (nrs["wait4"], nrs["waitid"], nrs["pause"]) or rax not in _RESTARTS:
            # not in a wait (it left it meanwhile), or a wait it may be in
            # without the monitor knowing its arguments (_kick_waits): it
            # goes on, and such a wait starts again through the monitor
            if waiter is not None:
                lib.um_set_wait_nr(tid, 0)
            return
        result = self._serve_waiter(tid, waiter)
        if result is None:
            self.waiters[tid] = waiter  # not for this wait: it goes on waiting
            return
        struct.pack_into("<q", regs, _RAX, result)
        self._put(tid, SETREGS, 0, regs)

    def _answer_at_exit(self, call, waiter):
        """The exit of a wait made pause(), interrupted: its result, if a stop
        or exit is now there for it (else it restarts, or a signal's handler
        runs and it restarts as the wait: um_set_wait_nr)."""
        result = self._serve_waiter(call.tid, waiter)
        if result is not None:
            del self.waiters[call.tid]
            call.retval = result

    def _serve_waiter(self, tid, waiter):
        """Serve the wait waiter (number, name, args) of tid from the
        arguments it was made with (the registers of a wait made pause() are
        zeroed until its exit stop): its result, or None."""
        _, name, args = waiter
        try:
            result = self._serve_wait(tid, self.tgid_of(tid), name, args)
        except OSError as exc:
            result = -(exc.errno or errno.EFAULT)
        if result is not None:
            lib.um_set_wait_nr(tid, 0)
        return result


lib_PTRACE_CONT, lib_PTRACE_SINGLESTEP, lib_PTRACE_LISTEN = CONT, SINGLESTEP, LISTEN


def _tgkill(tid, sig):
    """Send sig to one thread (as the kernel's ptrace does), if it still exists."""
    global _LIBC
    tgid = _tgid(tid)
    if tgid is None:
        return
    if _LIBC is None:
        import ctypes  # lazy: only once a view has an inner tracer

        _LIBC = ctypes.CDLL(None, use_errno=True)
    _LIBC.syscall(234, tgid, tid, sig)  # SYS_tgkill on x86_64


_LIBC = None


def _in_view(pid):
    """Is pid traced by this monitor (a process of the view)?"""
    try:
        return int(core.proc_status(pid, "TracerPid")["TracerPid"][0]) == os.getpid()
    except (OSError, KeyError, ValueError):
        return False


def _may_attach(tracer, pid):
    """The kernel's ptrace access check (PTRACE_MODE_ATTACH_REALCREDS) for
    uids, gids and CAP_SYS_PTRACE."""
    try:
        me = core.proc_status(tracer, "Uid", "Gid", "CapEff")
        it = core.proc_status(pid, "Uid", "Gid")
    except OSError:
        return False
    if int(me["CapEff"][0], 16) >> 19 & 1:  # CAP_SYS_PTRACE
        return True
    uid, gid = me["Uid"][0], me["Gid"][0]
    if not (all(u == uid for u in it["Uid"][:3]) and all(g == gid for g in it["Gid"][:3])):
        return False
    try:
        return os.stat(f"/proc/{pid}").st_uid == int(uid)  # not dumpable: owned by root
    except OSError:
        return False


def _zombie(pid):
    """Has process pid exited, its exit not yet reaped?"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _exiting(tid, patience=0.02):
    """Is thread tid exiting? Once one is a zombie, it waits (a few ms at
    most) until it is one too: its process is going, it will be at once."""
    deadline = None
    while True:
        try:
            with open(f"/proc/{tid}/stat", "rb") as f:
                rest = f.read().rsplit(b")", 1)[1].split()
            state, flags = rest[0], int(rest[6])
        except (OSError, IndexError, ValueError):
            return False
        if state in (b"Z", b"X"):
            return True
        if not flags & 0x4:  # PF_EXITING
            return False
        if deadline is None:
            import time  # lazy: only when a traced process exits under its tracer's wait

            deadline = time.monotonic() + patience
        elif time.monotonic() > deadline:
            return False
        os.sched_yield()


def _ns_ids(tid, field):
    """NSpid or NSpgid of tid: its ids from the monitor's pid namespace down
    to its own."""
    try:
        return [int(x) for x in core.proc_status(tid, field)[field]]
    except (OSError, KeyError, ValueError):
        return []


def _ns_inode(tid):
    try:
        return os.stat(f"/proc/{tid}/ns/pid").st_ino
    except OSError:
        return None


def _all_tasks():
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                yield from (int(t) for t in os.listdir(f"/proc/{pid}/task"))
            except OSError:
                continue


def _ppid(tid, zombie=False):
    """The parent of tid's process, or None (gone; with zombie, also when it
    is not a zombie)."""
    try:
        with open(f"/proc/{tid}/stat", "rb") as f:
            rest = f.read().rsplit(b")", 1)[1].split()
        if zombie and rest[0] not in (b"Z", b"X"):
            return None
        return int(rest[1])
    except (OSError, ValueError, IndexError):
        return None


def _pgid(tid):
    fields = _stat_fields(tid)
    return fields[1] if fields else None


def _uid(tid):
    try:
        return int(core.proc_status(tid, "Uid")["Uid"][0])
    except (OSError, KeyError, ValueError):
        return 0


def _children(tgid):
    """The pids of process tgid's children (of any of its threads), or None."""
    children = []
    try:
        for task in os.listdir(f"/proc/{tgid}/task"):
            with open(f"/proc/{tgid}/task/{task}/children", "rb") as f:
                children.extend(int(c) for c in f.read().split())
    except (OSError, ValueError):
        return None
    return children


def _notices(tgid, sig):
    """Would process tgid see sig: caught, or blocked (a signalfd reads it)?
    A signal whose default action is to be ignored, unblocked, is dropped by
    the kernel unseen: not sent (it would cost the monitor a stop)."""
    try:
        st = core.proc_status(tgid, "SigBlk", "SigIgn", "SigCgt")
        blk, ign, cgt = (int(st[k][0], 16) >> (sig - 1) & 1 for k in ("SigBlk", "SigIgn", "SigCgt"))
    except (OSError, KeyError, ValueError):
        return False
    return not ign and bool(cgt or blk)
