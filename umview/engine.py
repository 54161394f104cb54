"""The engine API: what modules and tracers are built on.

An engine declares which system calls it may claim; the seccomp filter traps
the union of all engines' claims and nothing else. For each call it claimed,
the engine's ``enter`` returns one of the actions of the original
PTRACE_SYSVM proposal:

``CONTINUE``
    run the call (possibly with arguments the engine rewrote); no exit stop
    for this engine.
``CONTINUE_AFTER``
    run it, and call my ``exit`` when it returns, to fix the result or to
    undo what ``enter`` changed.
``Skip(result)``
    the kernel never sees the call; the process gets ``result`` (a value
    >= 0, or ``-errno``). Raising ``OSError(errno)`` in ``enter`` means
    ``Skip(-errno)``.

Engines are asked newest first; the first ``Skip`` ends the walk. At exit the
engines that asked for it are called oldest first, so an engine loaded last
sees the call as the process made it and the result as the process gets it.

(One file over 700 lines: Engine and Call are the API, and Call's tracee
access, injected calls and long paths are what every engine reaches
through it.)
"""
import errno as _errno
import os

from umview import core
from umview.openflags import CREAT_FLAGS, O_CLOEXEC, O_DIRECTORY, O_PATH, WRITES


class Action:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


CONTINUE = Action("CONTINUE")
CONTINUE_AFTER = Action("CONTINUE_AFTER")


class Skip:
    """Do not run the call: the process gets ``result`` (>= 0, or -errno)."""

    __slots__ = ("result",)

    def __init__(self, result=0):
        self.result = int(result)

    @classmethod
    def errno(cls, code):
        return cls(-code)

    def __repr__(self):
        return f"Skip({self.result})"


class Engine:
    """Base class of engines. Subclasses set the claims and override hooks.

    ``syscalls``: neutral names (``arch`` tables) of calls this engine sees,
        every one of them.
    ``path_syscalls``: path-carrying calls this engine sees when one of their
        path arguments, resolved to an absolute path, lies under one of
        ``prefixes``. The C core decides this without entering Python.
    ``prefixes``: absolute paths; ``"/"`` means every path.
    ``layered_prefixes``: absolute paths of layered mounts (viewfs merge, cow,
        mincow), whose lower layer is the real tree at the same path. Of the
        path_syscalls under them, the C core hands the engine only those that
        write (``arch.signatures.WRITES``) or whose path the layer set names
        (``core.layer_add``); the others run natively.
    ``device_prefixes``: as ``layered_prefixes`` with nothing in a layer set
        (the engine sees the calls that write there), except that opening an
        existing character device, FIFO or socket for writing, with no
        symlink on the way, runs natively (/dev/null, a tty): the guard's /dev.
    ``real_prefixes``: absolute paths inside a layered prefix that stay real
        (an ``except=`` path, /proc in a cow view of /).
    ``kernel_prefixes``: mount points whose real tree the kernel names by
        the view's own path (modules/fs: a helper's mount at the same path).
        Absolute paths under them reach the engine, as under ``prefixes``;
        a path relative to a cwd or dirfd already under one runs in the
        kernel unless it climbs with "..": the kernel resolves it there.

    ``enter`` must not block for long: every traced process waits for it.
    It must not keep the Call after ``exit`` (or after ``enter`` if it did not
    ask for the exit): the Call describes one stop of one thread.
    """

    name = "engine"
    description = ""
    syscalls = frozenset()
    path_syscalls = frozenset()
    prefixes = ()
    layered_prefixes = ()
    device_prefixes = ()
    real_prefixes = ()
    kernel_prefixes = ()
    #: real directories another path of the view stands for (a layer's upper
    #: directory): kept in C, but a path relative to a cwd or dirfd in one
    #: that climbs with ".." reaches Python
    alias_prefixes = ()
    #: (target, source) of a move mount among its plain prefixes: every path
    #: under target is source's, with no exception but move_exceptions. When
    #: nothing else lies there, the C core serves lookups and opens for
    #: reading under it itself (UM_PREFIX_MOVE; docs/internals.md)
    move_prefixes = ()
    move_exceptions = ()
    #: (target, upper) of a layered prefix whose upper directory holds each
    #: regular file the layer set names LAYER_FILE at the same path below
    #: target, as the view shows it: when no other engine has that layered
    #: prefix, the C core serves a call that only reads such a file (stat,
    #: readlink, access, an open for reading) on the upper path itself
    layer_uppers = ()
    #: its prefixes are the mounts' own, which it follows (the cwd tracker):
    #: no part of the view is its alone
    mirrors_mounts = False
    #: the C core also hands the engine calls that name an open file with an
    #: empty path and AT_EMPTY_PATH (glibc's fstat) when that file lies under
    #: a plain prefix; costs a readlink per such call, so off unless asked
    fd_check = False
    #: calls on an open file (the fd in argument 0) that this engine sees when
    #: that file lies under one of its (plain) ``prefixes``: one readlink in C
    fd_syscalls = frozenset()
    #: calls this engine sees from threads whose cwd is virtual (the cwd
    #: tracker's getcwd); the C core knows which threads those are
    vcwd_syscalls = frozenset()
    #: execs (execve, execveat) this engine sees when its program's path
    #: would reach it, or the #! interpreter or ELF loader the program names
    #: (the C core reads the program's head): with prefixes, as path calls
    exec_syscalls = frozenset()
    #: bind/connect that this engine sees when their address is an AF_UNIX
    #: path (the C core reads its first bytes); other families never stop
    #: in Python
    unix_addr_syscalls = frozenset()
    #: calls that give back a socket's address (getsockname, getpeername,
    #: accept) that this engine sees once the view has bound an AF_UNIX name
    #: it rewrote (service.record_bound_name); before that none stops
    sockname_syscalls = frozenset()
    #: calls this engine sees only where one argument has one of a few values:
    #: {name: (argument index, frozenset of values)}; the filter tests the
    #: argument's low 32 bits (ioctl requests), the other calls never stop
    value_syscalls = {}
    #: socket families (AF_* numbers) whose socket(2) calls this engine sees;
    #: the C core lets the other families' calls run without Python
    families = frozenset()
    #: trap path_syscalls from the start even with no prefix yet: the engine
    #: gains prefixes at run time (a module serving mount(2)); a filter can
    #: add traps later only by injection, so claim them up front
    mounts_later = False
    #: stays the newest engine when others are added at run time; a rank:
    #: True stays above plain engines, 2 (the tracer) above those too
    newest = False
    #: walks symlinks in the view: the C core then also hands it path calls
    #: that have a symlink on their way (they may lead under a prefix)
    walks_symlinks = False
    #: when it was registered (Dispatcher.add): one counter for the monitor
    epoch = 0
    #: one per engine stack (a key, e.g. "cwd"): the engine a nested view has
    #: of its own replaces its outer views' one of the same key for the
    #: nested view's processes (umview.views); what it needs to know of a
    #: process is in the process's record (umview.procs), which every view
    #: shares
    per_view = None
    #: the ABIs whose calls this engine can serve. A call of another ABI that
    #: it claims is refused with ENOSYS, never let through: an engine that
    #: reads arguments by name (``call.flags``) serves them all; one that
    #: reads raw registers or structures of one layout says so here
    abis = frozenset({"x86_64", "i386", "x32"})

    def enter(self, call):
        return CONTINUE

    def exit(self, call):
        pass

    # Process events, for engines that act on them (per-process state is
    # in the records of umview.procs, which the monitor keeps before these
    # run). They are delivered only to engines that override them (the
    # others cost nothing).
    def on_fork(self, parent_tid, child_tid, thread):
        """A new process (thread=False) or thread was created; it has not run yet."""

    def on_exec(self, tid, former_tid):
        """tid execed (former_tid differs if a non-leader thread did it)."""

    def on_exit(self, tid):
        """tid is gone."""

    def on_exit_status(self, tid, status):
        """tid is gone; status is its wait status (called after on_exit)."""

    #: its prefixes name files it answers itself whatever the mounts show
    #: there (the inner tracers' /proc service: a process's own status, its
    #: copies), and the C core sends a plain prefix's calls to Python before
    #: a move mount's: a move mount around them may still be served in C
    beside_mounts = False

    #: the /proc/PID files (b"status", ...) whose opens this engine answers
    #: with a copy of its own, read with fdpass.view_proc_file (which shows
    #: in them what the view's inner tracers change, fdpass.proc_editor)
    proc_files = frozenset()

    def shown_path(self, real):
        """The view's path of ``real``, a path the kernel gives for a file
        in this engine's own storage (a layer): what readlink of a /proc
        magic link (/proc/PID/fd/N) shows in the view. None: not its own."""
        return None

    def wants(self, call):
        """Does this engine claim this particular call?"""
        if (call.name in self.syscalls or call.name in self.vcwd_syscalls or call.name in self.unix_addr_syscalls
                or call.name in self.sockname_syscalls):
            return True
        if call.name == "socket" and self.families:
            return core.signed32(call.args[0]) in self.families
        if call.name in self.fd_syscalls and self.prefixes:
            path = core.proc_link(call.tid, core.signed32(call.args[0]))
            return path is not None and under_any(path, self.prefixes)
        if call.name in self.path_syscalls and (self.prefixes or self.layered_prefixes or self.kernel_prefixes
                                                or self.device_prefixes):
            for path in call.paths():
                if path is not None and (under_any(path, self.prefixes)
                                         or under_any(path, self.layered_prefixes)
                                         or under_any(path, self.device_prefixes)
                                         or under_any(path, self.kernel_prefixes)):
                    return True
        return False


def under_any(path, prefixes):
    """Is the absolute path (bytes) equal to or below one of the prefixes?"""
    for p in prefixes:
        pb = p.encode() if isinstance(p, str) else p
        pb = pb.rstrip(b"/") or b"/"
        if pb == b"/" or path == pb or path.startswith(pb + b"/"):
            return True
    return False


_ABI_IDS = {"x86_64": 0, "i386": 1, "x32": 2}  # UM_ABI_* of core.h

# Bytes kept free below the stack pointer: the x86_64 red zone.
_RED_ZONE = 128
_W_OK = 2
_RESOLVE_NO_SYMLINKS = 0x04
#: calls that change a file's metadata: Landlock cannot bound them, so with a
#: path a view rewrote they run on the file the view resolved (run_anchored)
ANCHORED = "metadata"  # the table's class (syscalls/table.py)
_SCRATCH_LIMIT = 64 * 1024
_PATH_MAX = 4096
_UTIME_OMIT = (1 << 30) - 2
#: what of a long path the kernel gets after /proc/thread-self/fd/N/ (run_long_paths)
_TAIL_MAX = 4000
# pages of a thread's slot in the region for pinned paths (pin.c REGION_PAGES)
_PIN_PAGES = 4


class _State:
    """An engine's attributes for one call (Call.state)."""


def _arch():
    # deliberately lazy: the ABI tables cost milliseconds to import, and a
    # view with no engine never needs them
    from umview import arch

    return arch


class Call:
    """One system call of one thread, handed down the engine pipeline.

    ``args`` is a mutable list of the six raw arguments; an engine that
    changes it rewrites the call for the engines older than itself and for
    the kernel. The original values stay in ``orig_args`` (and ``orig_nr``),
    and are restored in the registers when the call returns, as the syscall
    ABI promises the process.
    """

    #: the call waits as a seccomp user notification (the C core's
    #: UM_EV_NOTIF), not at a ptrace stop: its memory can be read and written,
    #: but nothing needs its registers (inject, alloc, rewriting, an exit
    #: stop: the dispatcher then takes the call again at a ptrace stop);
    #: ``complete_with_fd`` gives it an fd in one step
    notified = False

    def __init__(self, tid, abi, sc, name, nr, args, ip, sp, spec=None):
        self.tid = tid
        self.abi = abi  # "x86_64", "i386" or "x32"
        self.abi_id = _ABI_IDS[abi]
        self.sc = sc
        self.name = name
        self.nr = nr
        self.orig_nr = nr
        self.args = list(args)
        self.orig_args = tuple(args)
        self.ip = ip
        self.sp = sp
        self.retval = None
        self.execed = False
        #: an open's (path the process named, its absolute view path): if an
        #: engine rewrites the path, the monitor names the fd by the view
        #: path in the process's record at the call's exit (procs.opened)
        self.fd_path = None
        #: the name of the engine that skipped the call (virtualized it), or None
        self.skipped_by = None
        #: what umview knows of this call on this ABI (umview.syscalls.Spec):
        #: its arguments by name, its path slots, its nofollow rules
        self.spec = spec
        slots = spec.path_slots if spec is not None else ()
        # per path slot: the argument index of the path, and of its dirfd (None: cwd)
        self.path_indices = tuple(p for p, _ in slots)
        self.dirfd_indices = tuple(d for _, d in slots)
        self._paths = None
        self._strings = {}  # argument index -> (address, limit, bytes or OSError): each read once
        self._state = None
        self._scratch = sp - _RED_ZONE
        self._pinned_pages = 0  # pages of the thread's pinned-path slot used (set_string)

    def __repr__(self):
        return f"<Call {self.name} tid={self.tid} args={[hex(a) for a in self.args]}>"

    # --- arguments by name ---
    def __getattr__(self, name):
        # only for names that are not attributes: the call's arguments by the
        # names of umview.syscalls.table (call.flags, call.mode, call.path)
        spec = self.__dict__.get("spec")
        if spec is not None and (name in spec.by_name or name in spec.pairs):
            return self.arg(name)
        raise AttributeError(f"{self.name} has no argument {name!r}" if spec is not None else name)

    def arg(self, name):
        """Argument ``name`` decoded as the kernel reads it on this call's ABI:
        a path or string argument as bytes (None for NULL), an fd or dirfd as a
        signed int (AT_FDCWD is -100), any other as an unsigned number of the
        width the kernel reads (32 bits for flags, modes, ids, and for every
        argument of an i386 call); a 64-bit value an i386 call splits over two
        registers (``NAME_lo``, ``NAME_hi``) joined."""
        spec = self.spec
        a = spec.by_name.get(name)
        if a is None:
            lo, hi = spec.pairs[name]
            return (self.args[lo] & 0xFFFFFFFF) | (self.args[hi] & 0xFFFFFFFF) << 32
        if a.kind in ("path", "str"):
            return self.read_string(a.index) if a.decode(self.args[a.index]) else None
        return a.decode(self.args[a.index])

    def index_of(self, name):
        """The register index of argument ``name``."""
        return self.spec.by_name[name].index

    def raw(self, name):
        """Argument ``name`` as it is in its register (a pointer, undecoded)."""
        return self.args[self.spec.by_name[name].index]

    def set_arg(self, name, value):
        """Rewrite argument ``name``: bytes or str for a path or string
        argument (copied into scratch memory), else a number."""
        a = self.spec.by_name[name]
        if isinstance(value, (bytes, str)):
            self.set_string(a.index, value)
        else:
            self.args[a.index] = value & 0xFFFFFFFFFFFFFFFF
            self._paths = None

    def set_syscall(self, name, args):
        """Make this call the call ``name`` (a neutral name) of the same ABI
        with raw ``args``; OSError(ENOSYS) where this ABI has no such call."""
        nr = _arch().abi_by_name(self.abi).numbers.get(name)
        if nr is None:
            raise OSError(_errno.ENOSYS, f"no system call {name} on {self.abi}")
        self.nr = nr
        self.args[:] = [a & 0xFFFFFFFFFFFFFFFF for a in args] + [0] * (6 - len(args))
        self._paths = None

    # --- per-call state of engines ---
    def state(self, engine):
        """A namespace of ``engine``'s own for this call, from ``enter`` to
        ``exit`` (attributes it sets there are its own: two engines, or two
        mounts of one module, never meet). A class as the key gives a
        namespace its instances share."""
        if self._state is None:
            self._state = {}
        st = self._state.get(engine)
        if st is None:
            st = self._state[engine] = _State()
        return st

    # --- memory ---
    def read_string(self, index, limit=4096):
        """The NUL-terminated string argument ``index`` (bytes).

        Read from the tracee once per call: the result (or the error) is kept
        while the argument still holds the same address (``set_string`` gives
        it a new one, and keeps the string it wrote)."""
        addr = self.args[index]
        if self.abi == "i386":
            addr &= 0xFFFFFFFF  # int $0x80 reads the low half of the register
        hit = self._strings.get(index)
        if hit is None or hit[0] != addr or hit[1] < limit:
            try:
                value = core.read_string(self.tid, addr, limit)
            except OSError as exc:
                value = exc
            hit = self._strings[index] = (addr, limit, value)
        if isinstance(hit[2], OSError):
            raise OSError(hit[2].errno, hit[2].strerror)
        return hit[2]

    def known_string(self, index, value):
        """Take ``value`` as string argument ``index`` (read by the C core):
        read_string gives it without reading the process's memory again."""
        addr = self.args[index]
        if self.abi == "i386":
            addr &= 0xFFFFFFFF
        self._strings[index] = (addr, 4096, value)

    def paths_changeable(self):
        """Does a path argument the engines read (and none rewrote) lie where
        another process could change it before the kernel reads it again
        (core.changeable: a shared mapping; a private one of a file is made
        the process's own)?"""
        for index in self.path_indices:
            hit = self._strings.get(index)
            if hit is None or isinstance(hit[2], OSError) or self.args[index] != self.orig_args[index]:
                continue
            if core.changeable(self.tid, hit[0], hit[2]):
                return True
        return False

    def pin_paths(self):
        """Make each path argument the engines read (and none rewrote) point
        at a copy of what they read, in memory the process cannot write
        (um_pin_string), if another thread of execution shares its memory
        or the string lies where another process can change it (a shared
        mapping): the kernel then reads what was decided on. The argument
        registers are put back at the call's exit."""
        if self.notified:
            return
        for index in self.path_indices:
            hit = self._strings.get(index)
            if hit is None or isinstance(hit[2], OSError) or self._pinned_pages >= _PIN_PAGES:
                continue
            if self.args[index] != self.orig_args[index]:
                continue  # rewritten (set_string pinned it)
            pinned = core.pin_string(self.tid, self.abi_id, self._pinned_pages, hit[2], hit[0])
            if not pinned:
                continue  # no other user of its memory, and the string lies in the process's own
            self._pinned_pages += 1
            self.args[index] = pinned
            self._strings[index] = (pinned, hit[1], hit[2])

    def run_anchored(self, roots):
        """For a call that changes metadata (chmod, chown, utimes, xattrs:
        ANCHORED) whose path an engine rewrote to an absolute path under one
        of ``roots`` (directories, realpaths, ending in "/"): run it here, on
        the file the view decided on, and return its raw result (>= 0 or
        -errno); None if it is not such a call (it then runs as decided).

        The roots are where the view's processes may make and swap names (a
        sandbox's layer and private directories); the view resolved every
        symlink of the path there. A process may still swap a directory on
        it for a symlink (to a real file) before the kernel walks it, and
        Landlock, which bounds where a sandbox writes, does not cover
        metadata. So the process first opens the file (or, for a call that
        does not follow the last component, its directory) with O_PATH and
        RESOLVE_NO_SYMLINKS: a symlink on the path now fails with ELOOP, as
        the kernel's own walk of a path changed meanwhile may. The call then
        runs on /proc/thread-self/fd/N (the magic link names that very file)
        and the fd is closed: three injected calls, in the process's own
        credentials. The strings live where no other thread can change them
        (pinned)."""
        if not self.of_class(ANCHORED) or not self.spec.path_slots or self.notified:
            return None
        slots = [(slot, index) for slot, index in enumerate(self.path_indices)
                 if self.args[index] != self.orig_args[index] and self.args[index]]
        if len(slots) != 1:
            return None
        slot, index = slots[0]
        hit = self._strings.get(index)
        if hit is None or isinstance(hit[2], OSError) or not hit[2].startswith(roots):
            return None
        path = hit[2]
        dirfd_index = self.dirfd_indices[slot]
        numbers = _arch().abi_by_name(self.abi).numbers
        if self.spec.follows(slot, self.args) or path.endswith(b"/"):
            target, flags, rest = path, O_PATH | O_CLOEXEC, b""
        else:
            parent, _, base = path.rstrip(b"/").rpartition(b"/")
            if base in (b"", b".", b".."):
                return None  # left as decided
            target, flags, rest = parent or b"/", O_PATH | O_CLOEXEC | O_DIRECTORY, b"/" + base
        # the call itself no longer runs as decided: the pinned pages its
        # paths took are free again
        fd = self._open_path(target, flags, _RESOLVE_NO_SYMLINKS)
        if fd < 0:
            return fd
        try:
            args = list(self.args)
            args[index] = self._place(b"/proc/thread-self/fd/%d%s" % (fd, rest), 0)
            if dirfd_index is not None:
                args[dirfd_index] = core.AT_FDCWD & 0xFFFFFFFFFFFFFFFF
            return core.inject(self.tid, self.abi_id, self.nr, args)
        finally:
            core.inject(self.tid, self.abi_id, numbers["close"], [fd])

    def long_paths(self):
        """[(slot, argument index, path)] of the path arguments an engine made
        PATH_MAX bytes or longer (set_string): the kernel refuses such a
        string (ENAMETOOLONG), though the path the process gave was shorter
        (a layer's upper directory before it, a relative path made
        absolute)."""
        out = []
        for slot, index in enumerate(self.path_indices):
            hit = self._strings.get(index)
            if hit is not None and hit[0] == self.args[index] and isinstance(hit[2], bytes) \
                    and len(hit[2]) >= _PATH_MAX:
                out.append((slot, index, hit[2]))
        return out

    def run_long_paths(self):
        """Run a call with long_paths() here and return its raw result (>= 0
        or -errno); None if it has none. Each such path is cut in two: the
        process opens the directory of the first part (O_PATH, piece by
        piece, each piece shorter than PATH_MAX, from the directory the
        previous one opened), and the call runs on
        /proc/thread-self/fd/N/REST, where the kernel walks REST from that
        directory with the call's own rules for its last component; then N
        is closed. In the process's own credentials, so the kernel's
        permission checks are its own. An exec cannot run injected:
        ENAMETOOLONG, as before."""
        long = self.long_paths()
        if not long or self.spec is None:
            return None
        if self.notified or self.of_class("execs"):
            return -_errno.ENAMETOOLONG
        numbers = _arch().abi_by_name(self.abi).numbers
        args = list(self.args)
        opened = []
        try:
            for page, (slot, index, path) in enumerate(long):
                cut = path.find(b"/", len(path) - _TAIL_MAX)
                if cut < 0:
                    return -_errno.ENAMETOOLONG  # a component too long: the kernel's errno
                head, tail = path[:cut] or b"/", path[cut + 1:]
                d = self.dirfd_indices[slot]
                base = core.AT_FDCWD if path.startswith(b"/") or d is None else core.signed32(self.args[d])
                fd = self._open_path(head, O_PATH | O_DIRECTORY | O_CLOEXEC, 0, base)
                if fd < 0:
                    return fd
                opened.append(fd)
                args[index] = self._place(b"/proc/thread-self/fd/%d/%s" % (fd, tail), page)
                if d is not None:
                    args[d] = core.AT_FDCWD & 0xFFFFFFFFFFFFFFFF
            return core.inject(self.tid, self.abi_id, self.nr, args)
        finally:
            for fd in opened:
                core.inject(self.tid, self.abi_id, numbers["close"], [fd])

    def run_in_directory(self, directory, args):
        """Run this call with raw args in the process as if its cwd were the
        directory (a path of any length): the process opens the directory,
        enters it (fchdir), makes the call, and goes back to its own cwd; the
        call's raw result (>= 0 or -errno). For what has no dirfd argument
        (an AF_UNIX socket's name), and only for a process whose cwd no other
        thread shares meanwhile (one thread): -ENAMETOOLONG otherwise."""
        if self.notified or len(os.listdir(f"/proc/{self.tid}/task")) != 1:
            return -_errno.ENAMETOOLONG
        numbers = _arch().abi_by_name(self.abi).numbers
        dirfd = self._open_path(directory, O_PATH | O_DIRECTORY | O_CLOEXEC, 0)
        if dirfd < 0:
            return dirfd
        here = self._open_path(b".", O_PATH | O_DIRECTORY | O_CLOEXEC, 0)
        try:
            if here < 0:
                return here
            err = core.inject(self.tid, self.abi_id, numbers["fchdir"], [dirfd])
            if err < 0:
                return err
            try:
                return core.inject(self.tid, self.abi_id, self.nr, args)
            finally:
                core.inject(self.tid, self.abi_id, numbers["fchdir"], [here])
        finally:
            for fd in (dirfd, here):
                if fd >= 0:
                    core.inject(self.tid, self.abi_id, numbers["close"], [fd])

    def _open_path(self, path, flags, resolve, dirfd=core.AT_FDCWD):
        """Open path, of any length, in the process: openat2 piece by piece,
        each shorter than PATH_MAX (cut at a "/"), from the directory the
        previous piece opened (O_PATH); the last with flags. The fd, or
        -errno (the first piece's error is the kernel's for the path)."""
        numbers = _arch().abi_by_name(self.abi).numbers
        pieces = []
        while len(path) >= _TAIL_MAX:
            cut = path.rfind(b"/", 1, _TAIL_MAX)
            if cut < 0:
                return -_errno.ENAMETOOLONG
            pieces.append(path[:cut])
            path = path[cut + 1:].lstrip(b"/")
        if path or not pieces:
            pieces.append(path)
        fd = dirfd
        for i, piece in enumerate(pieces):
            f = flags if i == len(pieces) - 1 else O_PATH | O_DIRECTORY | O_CLOEXEC
            how = f.to_bytes(8, "little") + bytes(8) + resolve.to_bytes(8, "little")
            new = core.inject(self.tid, self.abi_id, numbers["openat2"],
                              [fd & 0xFFFFFFFFFFFFFFFF, self._place(piece, 2), self._place(how, 3), len(how)])
            if fd != dirfd:
                core.inject(self.tid, self.abi_id, numbers["close"], [fd])
            if new < 0:
                return new
            fd = new
        return fd

    def _place(self, data, page):
        """The address of a copy of data (and a NUL) in the process, where no
        other thread can change it before the kernel reads it: page ``page``
        of the thread's pinned slot, or the stack if no other thread shares
        its memory."""
        addr = core.pin_string(self.tid, self.abi_id, page, data, self._below(len(data) + 1))
        if not addr:
            addr = self.alloc(len(data) + 1)
            self.write_mem(addr, data + b"\0")
        return addr

    def of_class(self, cls):
        """Is the call of this class of the table's rows (``calls(cls)``)?"""
        return self.spec is not None and cls in self.spec.classes

    def open_flags(self):
        """The flags an open call (open, openat, openat2, creat) opens with:
        creat's own, openat2's from its struct open_how (OSError EFAULT if
        that cannot be read), else its flags argument. The one reading of
        them (umview.openflags holds their values)."""
        if self.name == "creat":
            return CREAT_FLAGS
        if self.name == "openat2":
            return int.from_bytes(self.read_mem(self.raw("how"), 8), "little")
        return self.flags

    def writes(self):
        """Would the call change the file system? The syscall table's rule
        for it (Spec.writes), as the C core applies it under a layered
        prefix: open flags with a write bit (also openat2's, read from
        memory), access with W_OK, or always (unlink, chmod...)."""
        rule = self.spec.writes if self.spec is not None else None
        if rule is None:
            return False
        kind = rule[0]
        if kind == "always":
            return not self._times_omitted()
        if kind == "open_how":
            return bool(int.from_bytes(self.read_mem(self.args[rule[1]], 8), "little") & WRITES)
        if kind == "access":
            return bool(self.args[rule[1]] & _W_OK)
        return bool(self.args[rule[1]] & WRITES)  # oflags

    def _times_omitted(self):
        """utimensat with both times UTIME_OMIT: the kernel returns 0
        without even looking the path up (fs/utimes.c)."""
        if not self.of_class("utimens") or not self.args[2]:
            return False
        word = 4 if self.abi == "i386" and self.name == "utimensat" else 8  # old_timespec32
        try:
            data = self.read_mem(self.args[2], 4 * word)  # two (tv_sec, tv_nsec)
        except OSError:
            return False
        return all(int.from_bytes(data[at:at + word], "little") == _UTIME_OMIT for at in (word, 3 * word))

    def read_mem(self, addr, size):
        return core.read_mem(self.tid, addr, size)

    def write_mem(self, addr, data):
        core.write_mem(self.tid, addr, data)

    def _below(self, size):
        """Where alloc(size) would place its memory (0 if it could not): a
        stack pointer the process set into a shared mapping makes that
        memory another process's to change (core.pin_string checks)."""
        start = (self._scratch - size) & ~15
        return start if 0 < start and self.sp - start <= _SCRATCH_LIMIT else 0

    def alloc(self, size):
        """Scratch memory in the tracee, valid until this call returns."""
        self._need_stop("alloc")
        start = (self._scratch - size) & ~15
        if self.sp - start > _SCRATCH_LIMIT:
            raise OSError(_errno.ENOMEM, "no scratch memory left for this call")
        if self.abi == "i386" and start + size > 1 << 32:
            # an int 0x80 call from 64-bit code: its pointers are 32 bits wide,
            # and the stack is above 4 GiB (no low scratch page yet)
            raise OSError(_errno.ENOSYS, "no scratch memory below 4 GiB for an i386 call")
        self._scratch = start
        return start

    def set_string(self, index, value):
        """Make argument ``index`` point at a copy of ``value`` (bytes)."""
        if isinstance(value, str):
            value = value.encode()
        self._need_stop("set_string")
        addr = 0
        if len(value) < 4096 and self._pinned_pages < _PIN_PAGES:
            # where another thread sharing the memory cannot change it before
            # the kernel reads it (0: no such thread, the stack will do)
            addr = core.pin_string(self.tid, self.abi_id, self._pinned_pages, value, self._below(len(value) + 1))
            if addr:
                self._pinned_pages += 1
        if not addr:
            data = value + b"\0"
            addr = self.alloc(len(data))
            self.write_mem(addr, data)
        self.args[index] = addr
        self._paths = None
        # what read_string(index) gives back: a path of PATH_MAX bytes or
        # more too (the kernel would refuse it; run_long_paths runs the call)
        self._strings[index] = (addr, max(4096, len(value) + 1), value)

    # --- injection ---
    def inject(self, name, *args):
        """Run the system call ``name`` (a neutral name of this call's ABI)
        with ``args`` in the calling thread, for the engine, before the call
        itself is decided; return its raw result (>= 0, or -errno). No engine
        sees it. Pointers in ``args`` usually come from ``alloc``. The call
        being handled is unchanged: whatever ``enter`` returns applies to it.
        OSError(ESRCH) if the thread died meanwhile."""
        self._need_stop("inject")
        nr = _arch().abi_by_name(self.abi).numbers.get(name)
        if nr is None:
            raise OSError(_errno.ENOSYS, f"no system call {name} on {self.abi}")
        return core.inject(self.tid, self.abi_id, nr, args)

    def _need_stop(self, what):
        if self.notified:
            # an engine bug, not the process's: logged, the call fails with EIO
            raise RuntimeError(f"{what} needs the thread at a ptrace stop; {self.name} waits as a "
                               "seccomp notification (Call.notified): no stack pointer, no injection")

    def complete_with_fd(self, fd, cloexec=False):
        """A notified call only: make it return a copy of the monitor's ``fd``,
        installed at the lowest free number of the process (as socket() and
        open() would), with FD_CLOEXEC if ``cloexec``; in one step, by the
        kernel (SECCOMP_IOCTL_NOTIF_ADDFD with SECCOMP_ADDFD_FLAG_SEND, Linux
        5.14). Returns the number; the engine then returns ``Skip(number)``
        (the call is answered already). OSError: EMFILE and the like as the
        process would get them, ENOENT if the process died or a signal ended
        its wait (the call then restarts and comes again)."""
        if not self.notified:
            raise RuntimeError("complete_with_fd: the call is not a notification (Call.notified)")
        return core.check(core.lib.um_notif_addfd(fd, O_CLOEXEC if cloexec else 0))

    # --- paths ---
    def paths(self):
        """The call's path arguments resolved to absolute, lexically normalized
        paths (bytes), one per path slot; None where it cannot be resolved."""
        if self._paths is None:
            self._paths = [self.resolved(slot) for slot in range(len(self.path_indices))]
        return self._paths

    def written(self, slot=0):
        """Path argument ``slot`` as the kernel will take it: its string now
        (an engine's rewrite included), made absolute from its dirfd or cwd
        as the kernel holds them, not normalized (".", "..", a trailing "/"
        kept); None if it cannot be read or has no such base.
        OSError(ENAMETOOLONG) for the process's own string of PATH_MAX bytes
        or more, which the kernel refuses before anything else."""
        index = self.path_indices[slot]
        try:
            raw = self.read_string(index, limit=1 << 16)
        except OSError:
            return None
        if len(raw) >= _PATH_MAX and self.args[index] == self.orig_args[index]:
            raise OSError(_errno.ENAMETOOLONG, "path of PATH_MAX bytes or more")
        if raw.startswith(b"/") or not raw:
            return raw or None
        base = self.base(slot)
        return base.rstrip(b"/") + b"/" + raw if base is not None else None

    def base(self, slot=0):
        """The real path of the directory a relative path argument ``slot``
        starts from (its dirfd's, or the cwd), as the kernel names it; None
        if that is no directory path (a bad fd, a pipe)."""
        d = self.dirfd_indices[slot]
        base = core.proc_link(self.tid, core.AT_FDCWD if d is None else core.signed32(self.args[d]))
        return base if base is not None and base.startswith(b"/") else None

    def resolved(self, slot=0):
        """Path argument ``slot`` resolved (see ``paths``), or None."""
        try:
            raw = self.read_string(self.path_indices[slot])
        except OSError:
            raw = None  # the C core finds the same error
        if raw is not None and raw.startswith(b"/"):
            return _normalize(raw)  # as the C core's normalize(), from the string read once
        path = core.resolve_path(self.tid, self.abi_id, self.sc, slot, self.args)
        if path is None and raw:
            # relative to a directory whose path and this one make more than
            # the C core holds (PATH_MAX): the kernel takes it, so does the view
            base = self.base(slot)
            if base is not None:
                return _normalize(base + b"/" + raw)
        return path


def _normalize(path):
    """An absolute path normalized lexically: no "", "." or ".." components
    (".." at the root stays there), as the C core's normalize()."""
    out = []
    for comp in path.split(b"/"):
        if comp == b"..":
            if out:
                out.pop()
        elif comp and comp != b".":
            out.append(comp)
    return b"/" + b"/".join(out)
