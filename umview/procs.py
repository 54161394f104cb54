"""One record per process and per thread of the view, kept by the monitor.

In the spirit of the kernel's task_struct with its fs_struct and
files_struct (gVisor's Task, FSContext and FDTable; VUOS's vu_fs and
vu_fd_table): what umview knows of a process beside what the kernel knows,
in one place. The monitor's own fork/clone/exec/exit handling keeps the
records (Monitor._loop calls forked, execed and exited before any engine
hears of the event); engines read and change the fields and keep no
per-process dictionaries of their own.

- ``Thread``: its process, the view it belongs to (None: the outermost),
  fakeroot's credentials (per thread, as the kernel's), the program a
  running exec will be named after.
- ``Process`` (a thread group): its threads, its ``FsContext`` and
  ``FdTable`` (shared with the processes cloned with CLONE_FS or
  CLONE_FILES, copied otherwise), the program /proc/PID/exe names where an
  exec ran its loader instead, the dumpable flag a normal user's monitor
  emulates.
- ``FsContext``: the virtual root and cwd where they differ from the
  kernel's, and the real cwd where the virtual one is faithful (cwd.py
  says what these are). Changing them changes the C core's flags of every
  thread sharing them.

A thread the monitor heard of no fork for (it was there before the records
were kept, or a view asked for no process events) is found by its
/proc/TID/status; such a record is kept only while the monitor follows exits
(``following``), and only for the monitor's own tracees, so a reused tid
never finds a stale one.
"""
import errno
import functools
import os

from umview import core

CLONE_FS = 0x200
CLONE_FILES = 0x400
MAX_FD_PATHS = 65536  # per file table: beyond that, fd paths are not remembered


class FsContext:
    """A root and cwd (the kernel's fs_struct), shared under CLONE_FS."""

    __slots__ = ("cwd", "faithful", "root", "users")

    def __init__(self, cwd=None, faithful=None, root=None):
        #: the virtual cwd (bytes) where it is virtual, else None
        self.cwd = cwd
        #: the kernel's cwd where the virtual one is faithful, else None
        self.faithful = faithful
        #: the root in the view (chroot) where it is not /, else None
        self.root = root
        #: the processes that have this context
        self.users = set()

    def copy(self):
        return FsContext(self.cwd, self.faithful, self.root)

    def flags(self):
        """The C core's per-thread flags for this context (um_set_vcwd)."""
        lib = core.lib
        return ((lib.UM_VCWD if self.cwd is not None else 0) | (lib.UM_VROOT if self.root is not None else 0)
                | (lib.UM_VCWD_FAITHFUL if self.faithful is not None else 0))

    def set(self, cwd, faithful=None, also=()):
        """Change the cwd and tell the C core, for every thread of every
        process sharing the context (and the threads also)."""
        self.cwd, self.faithful = cwd, faithful
        on = self.flags()
        for t in {t for p in self.users for t in p.threads}.union(also):
            core.check(core.lib.um_set_vcwd(t, on))


class Process:
    """A thread group."""

    __slots__ = ("tgid", "threads", "fs", "fds", "exe", "dumpable")

    def __init__(self, tgid, fs=None, fds=None, threads=None):
        self.tgid = tgid
        self.threads = {tgid} if threads is None else threads
        self.fs = fs if fs is not None else FsContext()
        self.fs.users.add(self)
        #: fd -> (virtual path, real path) of fds opened where a mount
        #: rewrote the path (the kernel's file table knows the real one)
        self.fds = fds if fds is not None else {}
        #: the program, where an exec ran its ELF loader in its stead
        self.exe = None
        #: PR_SET_DUMPABLE's flag where a normal user's monitor emulates it
        self.dumpable = None

    def __repr__(self):
        return f"<Process {self.tgid} threads={sorted(self.threads)}>"


class Thread:
    __slots__ = ("tid", "process", "view", "creds", "exe_pending")

    def __init__(self, tid, process, view=None, creds=None):
        self.tid = tid
        self.process = process
        #: the nested view it belongs to, None for the outermost
        self.view = view
        #: fakeroot's credentials, None where they are the view's first ones
        self.creds = creds
        #: the program an exec in progress will be named after (cwd.py)
        self.exe_pending = None


class Processes:
    """The records of the processes the monitor follows, by tid."""

    def __init__(self):
        self.clear()

    def clear(self):
        self.threads = {}    # tid -> Thread
        self.groups = {}     # tgid -> Process, while it has a thread here
        #: are exits reported (the monitor's event mask): then a record made
        #: from /proc is kept until its thread exits
        self.following = False

    # --- look-up ---
    def thread(self, tid):
        """The Thread of tid; made from /proc/TID/status if the monitor had no
        event of it (ESRCH as OSError if the thread is gone)."""
        t = self.threads.get(tid)
        if t is not None:
            return t
        return self._made(tid, self.following)

    def _made(self, tid, keep, force=False):
        """A record of tid from /proc/TID/status, kept if keep and the thread
        is the monitor's tracee (its exit will be reported: the record of
        another process's thread would outlive it), or if force."""
        tgid, tracer = _status_tgid(tid)
        keep = force or keep and tracer == os.getpid()
        p = self.groups.get(tgid)
        if p is None:
            p = Process(tgid, threads=set())
            if keep:
                self.groups[tgid] = p
        p.threads.add(tid)
        sibling = next((self.threads[o] for o in p.threads if o in self.threads), None)
        t = Thread(tid, p, sibling.view if sibling is not None else None)
        if keep:
            self.threads[tid] = t
        return t

    def add(self, tid, tgid=None):
        """A record of thread tid of process tgid (tid's own if None), made
        without /proc: the monitor's first process, a test's."""
        tgid = tid if tgid is None else tgid
        p = self.groups.get(tgid)
        if p is None:
            p = self.groups[tgid] = Process(tgid, threads=set())
        p.threads.add(tid)
        t = self.threads[tid] = Thread(tid, p)
        return t

    def record(self, tid):
        """The Thread of tid, kept whether or not exits are followed (a thread
        joining a nested view: the views follow every exit)."""
        t = self.threads.get(tid)
        return t if t is not None else self._made(tid, True, force=True)

    def process(self, tid):
        return self.thread(tid).process

    def tgid(self, tid):
        """The process (thread-group) id of thread tid: the one resolver
        (OSError ESRCH if it is gone)."""
        return self.thread(tid).process.tgid

    def tgid_or_none(self, tid):
        try:
            return self.tgid(tid)
        except OSError:
            return None

    def known(self, tid):
        """The Thread of tid if the monitor has its record, else None."""
        return self.threads.get(tid)

    # --- the monitor's process events ---
    def forked(self, parent_tid, child_tid, thread, flags=None):
        """A fork, vfork or clone of parent_tid made child_tid (a thread of
        its process if thread). flags: the clone flags, read from the
        parent's registers if not given."""
        try:
            parent = self.thread(parent_tid)
        except OSError:
            return
        if thread:
            p = parent.process
            p.threads.add(child_tid)
        else:
            if flags is None:
                flags = clone_flags(parent_tid)
            pp = parent.process
            fs = pp.fs if flags & CLONE_FS else pp.fs.copy()
            fds = pp.fds if flags & CLONE_FILES else dict(pp.fds)
            p = Process(child_tid, fs, fds)
            p.exe, p.dumpable = pp.exe, pp.dumpable
            self.groups[child_tid] = p
        self.threads[child_tid] = Thread(child_tid, p, parent.view, parent.creds)

    def execed(self, tid, former_tid):
        """Thread former_tid execed, and is now tid (the leader's tid, if it
        was another thread): the process's other threads are gone."""
        t = self.threads.pop(former_tid, None)
        if t is None:
            t = self.threads.pop(tid, None)
            if t is None:
                return  # no record of it: nothing to change
        p = t.process
        for other in p.threads - {former_tid}:
            self.threads.pop(other, None)
        t.tid = tid
        p.threads = {tid}
        self.threads[tid] = t
        p.exe, t.exe_pending = t.exe_pending, None
        p.dumpable = None  # an exec resets it
        if p.fds and any(q is not p and q.fds is p.fds for q in self.groups.values()):
            p.fds = dict(p.fds)  # the kernel unshares a shared file table at exec

    def opened(self, call):
        """At the exit of an open whose Call.fd_path an engine set: if a mount
        rewrote the path, the new fd is named by the view path (the kernel
        knows the real one only)."""
        named, virtual = call.fd_path
        if call.retval is None or call.retval < 0:
            return
        try:
            if call.read_string(call.path_indices[0]) == named:
                return  # the kernel opened what the process named
        except OSError:
            return
        real = core.proc_link(call.tid, call.retval)
        if real is None:
            return
        fds = self.record(call.tid).process.fds
        if len(fds) < MAX_FD_PATHS:
            fds[call.retval] = (virtual, real)

    def exited(self, tid):
        """Thread tid is gone (reaped, or its exit event seen)."""
        t = self.threads.pop(tid, None)
        if t is None:
            return None
        p = t.process
        p.threads.discard(tid)
        if not p.threads:
            p.fs.users.discard(p)
            if self.groups.get(p.tgid) is p:
                del self.groups[p.tgid]
        return t


def _status_tgid(tid):
    """(tgid, tracer pid) of thread tid; OSError ESRCH if it is gone."""
    fields = core.proc_status(tid, "Tgid", "TracerPid")
    if not fields.get("Tgid") or not fields.get("TracerPid"):
        raise OSError(errno.ESRCH, "no such thread")
    return int(fields["Tgid"][0]), int(fields["TracerPid"][0])


@functools.lru_cache(maxsize=None)
def _clone_nrs():
    from umview import arch

    nrs = {name: (a.numbers["clone"], a.numbers["clone3"]) for name in ("x86_64", "i386")
           for a in (arch.abi_by_name(name),)}
    return nrs, arch.X32_SYSCALL_BIT


def clone_flags(tid):
    """The flags of the clone or clone3 call thread tid is stopped in (at its
    fork event), 0 for fork and vfork, or if they cannot be read."""
    try:
        regs = core.user_regs(tid)
        nrs, x32_bit = _clone_nrs()
        if regs[core.REG_CS] == core.I386_CS:
            clone, clone3 = nrs["i386"]
            nr, arg = regs[core.REG_ORIG_RAX] & 0xFFFFFFFF, regs[core.REG_RBX] & 0xFFFFFFFF
        else:
            clone, clone3 = nrs["x86_64"]
            nr, arg = regs[core.REG_ORIG_RAX] & ~x32_bit, regs[core.REG_RDI]
        if nr == clone:
            return arg & 0xFFFFFFFF
        if nr == clone3:
            return int.from_bytes(core.read_mem(tid, arg, 8), "little")  # clone_args.flags
    except OSError:
        pass
    return 0


#: the records of this monitor (one monitor per Python process)
PROCESSES = Processes()
