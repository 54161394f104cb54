"""guard: refuse the calls that act outside the view's paths, for a sandbox.

A view changes what paths name; some calls change it again behind the view's
back, or act on the whole machine whatever the paths say. In a sandbox
(``umview --sandbox`` loads this module first, so that it is the oldest
engine and sees only what no module served) they fail with EPERM, what a
normal user gets from them natively:

- the mount table: mount, umount, umount2, pivot_root and the new mount API
  (fsopen, fspick, fsmount, move_mount, open_tree with OPEN_TREE_CLONE,
  mount_setattr): a bind mount or an unmount changes what a path names for
  the kernel, past the view's mounts (as root, for the whole machine). The
  mounts a module serves (viewfs, fs) are served before this module sees the
  call;
- the root: chroot (a process's root in the kernel would no longer be the
  one the view resolves paths against; the cwd tracker, newer, serves chroot
  in the view, so this refusal is the backstop), setns into a mount
  namespace;
- the machine: acct (accounting of every process into a file), swapon,
  swapoff, reboot, kexec_load, kexec_file_load, init_module, finit_module,
  delete_module;
- with outside=signals:abstract (what --sandbox gives it on a kernel
  before 6.12, whose Landlock has no scopes): a signal to a process the
  monitor does not trace (EPERM; to a process group, only its members in
  the view get it), and a connect or send to an abstract AF_UNIX name no
  process of the view bound (ECONNREFUSED);
- what lets a process hold others up: userfaultfd, and opening
  /dev/userfaultfd (EACCES), whose faults the process answers when it
  likes (the monitor, reading a path in such a page, would wait with every
  process of the view); fanotify_init, whose permission events hold every
  open of the host's files until answered (EPERM, a normal user's errno for
  them);
- the monitor itself, for root (a normal user is kept out by the monitor
  not being dumpable; root's CAP_SYS_PTRACE outranks that): opening its
  /proc/PID/mem, environ, pagemap, map_files and fd (the seccomp listener:
  EACCES), process_vm_readv/writev and pidfd_open of its pid (EPERM);
- any process's memory by its /proc/PID/mem (or task/TID/mem) opened for
  writing (EACCES): such writes ignore page protections, and would reach
  the read-only memory the kernel reads pinned paths from (docs/internals.md,
  "Pinned paths"); process_vm_writev honours them.

- the kernel's and the machine's state the sandbox leaves real, as a
  container runtime does: a call that writes under /proc/sys or /sys fails
  with EROFS (they are read-only there); under /dev (the sandbox gives
  /dev/shm a private directory) opening a block device for writing, and
  creating, removing, renaming or changing any entry, fail with EACCES, what
  a normal user gets (/dev/pts stays a tty's own: chown of a pty works);
  mknod of a block device, or of a character device other than null, zero,
  full, random, urandom, tty, console and ptmx, fails with EPERM. Opening an
  existing character device for writing (/dev/null, a tty) costs nothing:
  the C core lets it run (UM_PREFIX_DEVICES).

A refusal is logged once per call name. Nothing here is a path of its own:
the module claims only these rare calls.

With ``daemons=end`` (what --sandbox uses), the processes left when the
view's command ends (daemons that double-forked out of its session, which
the view keeps traced) get SIGTERM, and SIGKILL two seconds later: the
sandbox ends with its command, as a test harness expects. The default,
``daemons=wait``, waits for them, as umview does without this module.

    umview -p guard -p viewfs,mount=LAYER:/:cow -- CMD
"""
import errno
import logging
import os
import re
import signal
import stat
import struct
import threading

from umview import core, namei
from umview.engine import CONTINUE, CONTINUE_AFTER, Engine, Skip, under_any
from umview.openflags import O_ACCMODE
from umview.pathwalk import plain_path
from umview.service import Module
from umview.syscalls import PATH_SYSCALLS, calls

log = logging.getLogger("umview")

CLONE_NEWNS = 0x00020000
OPEN_TREE_CLONE = 1

MOUNTS = calls("mounts")
ROOT = calls("roots")
MACHINE = calls("admin")
# what lets a process hold others up: a page fault it answers (the monitor
# reading a path there waits with every process of the view), a permission
# event on the host's files that waits for its answer
HOST = calls("host-waits")
USERFAULTFD_DEV = b"/dev/userfaultfd"  # userfaultfd by an ioctl on this device
# what Landlock's scopes (ABI 6, Linux 6.12) keep inside a sandbox, which
# the view refuses itself where the kernel is older (outside=...)
SIGNALS = {"kill": 0, "tkill": 0, "tgkill": 0, "rt_sigqueueinfo": 0, "rt_tgsigqueueinfo": 0,
           "pidfd_send_signal": None}  # the argument naming the process (None: a pidfd)
ADDRESSED = {"connect": (1, 2), "sendto": (4, 5)}  # (address, its length) argument indices
MESSAGES = calls("msghdrs")
AF_UNIX = 1
# the calls that reach another process's memory or fds by its pid (argument 0)
BY_PID = calls("by-pid")
# what a process may not open in the monitor's /proc/PID (or task/TID)
MONITOR_FILES = rb"(?:task/[0-9]+/)?(?:mem|environ|pagemap|map_files|fd)(?:/.*)?"
# any process's memory file, and the opens that could write through it
PROC_MEM = re.compile(rb"/proc/[^/]+/(?:task/[^/]+/)?mem\Z", re.S)
OPENS = calls("opens")
# read-only, as container runtimes mount them; the devices' directory
READ_ONLY = (b"/proc/sys", b"/sys")
DEV, PTS = b"/dev", b"/dev/pts"
# where a path is only looked at, never changed (access(W_OK) writes nothing)
LOOKS = calls("accesses")
MKNODS = calls("mknods")
# character devices mknod may make: (major, minor)
SAFE_CHR = frozenset({(1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 1), (5, 2)})


class Guard(Engine):
    name = "guard"
    description = "mount, chroot (unless the view serves it), setns (mount namespace), acct, swap, reboot, kexec, kernel modules: EPERM"

    syscalls = MOUNTS | ROOT | MACHINE | MKNODS | HOST
    # the C core hands it only the calls that write there (under /dev: not
    # the opens of existing character devices, FIFOs and sockets)
    layered_prefixes = READ_ONLY
    device_prefixes = (DEV,)
    GRACE = 2.0  # seconds from SIGTERM to SIGKILL for daemons=end

    def __init__(self, module=None, end_daemons=False, outside=()):
        self.module = module
        self.end_daemons = end_daemons
        self.told = set()
        #: what the view keeps inside itself, where Landlock's scopes cannot:
        #: "signals" (to a process the monitor does not trace: EPERM),
        #: "abstract" (connect/send to an abstract AF_UNIX name no process
        #: of the view bound: ECONNREFUSED)
        self.outside = frozenset(outside)
        self.bound = set()  # abstract names processes of the view bound
        extra = set()
        if "signals" in self.outside:
            extra |= set(SIGNALS)
        if "abstract" in self.outside:
            extra |= set(ADDRESSED) | MESSAGES | {"bind"}
        self.syscalls = type(self).syscalls | extra
        me = os.getpid()  # the monitor's
        self.proc = b"/proc/%d" % me
        self.prefixes = (self.proc, USERFAULTFD_DEV)
        self.path_syscalls = PATH_SYSCALLS
        self.monitor_file = re.compile(re.escape(self.proc) + b"/" + MONITOR_FILES + rb"\Z", re.S)
        self.value_syscalls = {name: (0, frozenset({me})) for name in BY_PID}

    def on_exit(self, tid):
        view = self.module.view if self.module is not None else None
        if not self.end_daemons or view is None:
            return
        if view.parent is None:
            if tid != getattr(view.monitor, "first_pid", None):
                return
            left = core.tracees(exclude=tid)
        else:  # a nested view (a sandbox in a view): its processes, not the outer view's
            if tid != view.first:
                return
            left = sorted(view.all_tids() - {tid})
        if not left:
            return
        log.info("guard: the command is over: ending %d process(es) left in the view", len(left))
        _signal(left, signal.SIGTERM)
        timer = threading.Timer(self.GRACE, _signal, (left, signal.SIGKILL))
        timer.daemon = True
        timer.start()

    def wants(self, call):
        if call.name in self.syscalls:
            return True
        if call.name in BY_PID:
            return call.args[0] & 0xFFFFFFFF == int(self.proc[6:])
        return (any(p is not None and self.monitor_file.match(p) for p in call.paths()) or self._mem_write(call)
                or self._uffd_dev(call) or self._pseudo(call) is not None)

    @staticmethod
    def _uffd_dev(call):
        """Does the call open /dev/userfaultfd (any flags: its ioctl makes a
        userfaultfd whatever the fd's mode)?"""
        return call.name in OPENS and USERFAULTFD_DEV in call.paths()

    @staticmethod
    def _pseudo(call):
        """The errno for a call that would change /proc/sys, /sys or /dev
        (see the module's text), or None. The paths are those the kernel
        gets (rewritten by the newer engines), resolved as it resolves them
        in the real tree: a symlink elsewhere to a disk counts as the disk."""
        if call.name in LOOKS or not call.spec or not call.spec.path_slots:
            return None
        try:
            if not call.writes():
                return None
        except OSError:
            return None  # the kernel's EFAULT
        targets = []
        for slot, p in enumerate(call.paths()):
            if p is None:
                continue
            target = _kernel_target(p, follow=call.spec.follows(slot, call.args))
            if target is not None:
                targets.append(target)
        if any(under_any(t, READ_ONLY) for t in targets):
            return errno.EROFS
        dev = [t for t in targets if under_any(t, (DEV,)) and not under_any(t, (PTS,))]
        if not dev:
            return None
        if call.name in OPENS:
            return None if _opens_device(dev[0]) else errno.EACCES
        return errno.EACCES


    @staticmethod
    def _mem_write(call):
        """Does the call open some process's /proc/PID/mem for writing?"""
        if call.name not in OPENS:
            return False
        if call.name == "openat2" and call.args[3] < 8:
            return False  # the kernel's EINVAL: no struct open_how
        try:
            flags = call.open_flags()
        except OSError:
            return False  # the kernel's EFAULT
        if not flags & O_ACCMODE:
            return False
        return any(p is not None and PROC_MEM.match(p) for p in call.paths())

    def enter(self, call):
        name = call.name
        if name in MKNODS:
            return self._mknod(call)
        if name in SIGNALS and "signals" in self.outside:
            return self._signal(call)
        if (name in ADDRESSED or name in MESSAGES or name == "bind") and "abstract" in self.outside:
            return self._abstract(call)
        pseudo = self._pseudo(call)
        if pseudo is not None:
            if ("pseudo", pseudo) not in self.told:
                self.told.add(("pseudo", pseudo))
                log.warning("guard: %s of %s refused (%s): the sandbox keeps /proc/sys, /sys and /dev as they "
                            "are (docs/security.md)", name, call.paths()[0], errno.errorcode[pseudo])
            return Skip.errno(pseudo)
        if name not in self.syscalls and self._uffd_dev(call):
            if "uffd-dev" not in self.told:
                self.told.add("uffd-dev")
                log.warning("guard: opening /dev/userfaultfd refused (EACCES): a fault it leaves unanswered "
                            "would stall the view (docs/security.md)")
            return Skip.errno(errno.EACCES)
        if name not in self.syscalls and self._mem_write(call):
            if "mem" not in self.told:
                self.told.add("mem")
                log.warning("guard: opening /proc/PID/mem for writing refused (EACCES): it writes past "
                            "page protections (docs/security.md)")
            return Skip.errno(errno.EACCES)
        if name not in self.syscalls:
            if name not in self.told:
                self.told.add(name)
                log.warning("guard: %s of the monitor's process refused", name)
            return Skip.errno(errno.EPERM if name in BY_PID else errno.EACCES)
        if call.of_class("open-trees") and not call.args[2] & OPEN_TREE_CLONE:
            return CONTINUE  # an O_PATH fd of the tree, as open(O_PATH): the path engines had it
        if name == "setns" and not self._mount_ns(call):
            return CONTINUE
        if name not in self.told:
            self.told.add(name)
            log.warning("guard: %s refused (EPERM): it would %s (docs/security.md)", name,
                        "let a process hold up the view or the host's files" if name in HOST
                        else "act outside the view's paths")
        return Skip.errno(errno.EPERM)

    def _mknod(self, call):
        mode = call.arg("mode")
        kind = stat.S_IFMT(mode)
        if kind == stat.S_IFBLK or (kind == stat.S_IFCHR and _major_minor(call.arg("dev")) not in SAFE_CHR):
            # EPERM where the kernel says it without CAP_MKNOD: once the
            # name could be made (vfs_mknod, after filename_create)
            real = call.written(0)  # OSError: the kernel's, first
            err = namei.create_error(real) if real is not None else 0
            if not err and "mknod" not in self.told:
                self.told.add("mknod")
                log.warning("guard: mknod of a device refused (EPERM): its node would reach the real device "
                            "(docs/security.md)")
            return Skip.errno(err or errno.EPERM)
        pseudo = self._pseudo(call)
        return CONTINUE if pseudo is None else Skip.errno(pseudo)

    # --- what Landlock's scopes do, on an older kernel (outside=...) ---

    @staticmethod
    def _in_view(pid):
        """Is pid a process or thread this monitor traces (the view's)?"""
        try:
            return core.proc_status(pid, "TracerPid").get("TracerPid") == [b"%d" % os.getpid()]
        except OSError:
            return True  # none such: the kernel's ESRCH

    @staticmethod
    def _group(pgid):
        pids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat", "rb") as f:
                        fields = f.read().rsplit(b")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                    pids.append(int(entry))
        return pids

    def _signal(self, call):
        """A signal to a process outside the view: EPERM, as Landlock's
        signal scope answers. To a process group (kill 0, -PGID) with
        members outside: sent to its members in the view only, as the
        scope does (EPERM if none)."""
        at = SIGNALS[call.name]
        if at is None:  # pidfd_send_signal: the process its pidfd names
            target = _pidfd_pid(call.tid, core.signed32(call.args[0]))
            if target <= 0:
                return CONTINUE  # not a pidfd, or its process is gone: the kernel's errno
        else:
            target = core.signed32(call.args[at])
        if call.name != "kill" or target > 0:
            return CONTINUE if self._in_view(target) else self._refuse_signal(call)
        if target == -1:
            return self._refuse_signal(call)  # every process: most are outside
        pgid = -target if target < -1 else os.getpgid(call.tid)
        members = self._group(pgid)
        inside = [p for p in members if self._in_view(p)]
        if len(inside) == len(members):
            return CONTINUE
        if not inside:
            return self._refuse_signal(call)
        sig = core.signed32(call.args[1])
        sent = 0
        for pid in inside:
            try:
                os.kill(pid, sig)  # signal 0 checks, as the kernel's does
                sent += 1
            except OSError:
                pass
        return Skip(0) if sent else self._refuse_signal(call)

    def _refuse_signal(self, call):
        if "signal" not in self.told:
            self.told.add("signal")
            log.warning("guard: %s to a process outside the view refused (EPERM): the kernel has no Landlock "
                        "signal scope (docs/security.md)", call.name)
        return Skip.errno(errno.EPERM)

    @staticmethod
    def _abstract_name(call, addr, length):
        """The abstract AF_UNIX name at addr (length bytes) in the caller,
        or None (another family, a path, no address, unreadable)."""
        if not addr or length <= 3 or length > 110:
            return None
        try:
            data = call.read_mem(addr, length)
        except OSError:
            return None
        if struct.unpack_from("H", data)[0] != AF_UNIX or data[2] != 0:
            return None
        return data[2:]

    def _addresses(self, call):
        """The abstract names a connect, sendto, sendmsg or sendmmsg sends to."""
        from umview import fdpass

        if call.name in ADDRESSED:
            a, n = ADDRESSED[call.name]
            name = self._abstract_name(call, call.args[a], call.args[n] & 0xFFFFFFFF)
            return [name] if name else []
        lay = fdpass._LAYOUTS[call.abi]
        count, step = (1, 0) if call.name == "sendmsg" else (min(call.args[2] & 0xFFFFFFFF, 1024),
                                                              lay.msghdr.size + 8)
        out = []
        for i in range(count):
            try:
                fields = lay.msghdr.unpack(call.read_mem(call.args[1] + i * step, lay.msghdr.size))
            except OSError:
                break
            name = self._abstract_name(call, fields[0], fields[1])
            if name:
                out.append(name)
        return out

    def _abstract(self, call):
        """bind of an abstract name: remembered once made (the view's own);
        a connect or send to one no process of the view bound: ECONNREFUSED,
        as Landlock's abstract-socket scope answers it (EPERM there)."""
        if call.name == "bind":
            name = self._abstract_name(call, call.args[1], call.args[2] & 0xFFFFFFFF)
            if name is None:
                return CONTINUE
            call.state(self).bind = name
            return CONTINUE_AFTER
        outside = [n for n in self._addresses(call) if n not in self.bound]
        if not outside:
            return CONTINUE
        if "abstract" not in self.told:
            self.told.add("abstract")
            log.warning("guard: %s to an abstract AF_UNIX name bound outside the view refused (ECONNREFUSED): "
                        "the kernel has no Landlock scope for them (docs/security.md)", call.name)
        return Skip.errno(errno.ECONNREFUSED)

    def exit(self, call):
        name = getattr(call.state(self), "bind", None) if call.name == "bind" else None
        if name is not None and call.retval == 0:
            self.bound.add(name)

    @staticmethod
    def _mount_ns(call):
        """Would setns(fd, nstype) enter a mount namespace? nstype 0 takes
        the type from the fd; a pidfd enters the namespaces nstype names."""
        nstype = call.args[1] & 0xFFFFFFFF
        if nstype & CLONE_NEWNS:
            return True
        if nstype:
            return False
        link = core.proc_link(call.tid, core.signed32(call.args[0]))
        return link is None or link.startswith(b"mnt:")


def _pidfd_pid(tid, fd):
    """The pid a pidfd of thread tid names (its fdinfo's Pid:), or 0."""
    try:
        with open(f"/proc/{tid}/fdinfo/{fd}", "rb") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(b"Pid:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return 0


def _major_minor(dev):
    """The kernel's dev_t encoding (new_decode_dev) split."""
    return (dev >> 8) & 0xFFF, (dev & 0xFF) | ((dev >> 12) & 0xFFF00)


def _kernel_target(path, follow):
    """What the kernel reaches by path (absolute) in the real tree: symlinks
    resolved (the last one if the call follows it). None for a path through
    /proc (/dev/stdout, /dev/fd/N): its links name the process's own open
    files, which the view named when they were opened (the cwd tracker
    resolves such paths in the view); /proc/sys is itself, though."""
    plain = plain_path(path, follow)
    if plain is None:  # a new name: its directory decides
        plain = plain_path(os.path.dirname(path), True)
    if plain:
        # no symlink on the way: one lookup (realpath costs one a component)
        target = path
    elif follow:
        target = os.path.realpath(path)
    else:
        head, tail = os.path.split(path)
        target = os.path.join(os.path.realpath(head), tail) if tail else os.path.realpath(path)
    if target.startswith(b"/proc/") and not under_any(target, (b"/proc/sys",)):
        return None
    return target


def _opens_device(path):
    """May this open for writing of path (resolved) under /dev go on? An
    entry that exists and is not a block device (a character device, a file
    of /dev/shm's kind); creating a new entry is not."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False  # O_CREAT would make a new entry in the real /dev
    except OSError:
        return True  # the kernel's answer
    return not stat.S_ISBLK(st.st_mode)


def _signal(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass  # gone


class GuardModule(Module):
    name = "guard"
    description = "refuse mount, chroot (unless the view serves it), setns (mount ns), acct, swap, reboot, kexec, kernel modules (EPERM)"
    options_help = ("daemons=wait|end (end: the processes left when the command ends get SIGTERM, then SIGKILL); "
                    "outside=signals:abstract (refuse signals to processes outside the view, and connections "
                    "to abstract AF_UNIX names bound outside it: what Landlock's scopes do on Linux 6.12)")

    def __init__(self, options):
        super().__init__(options)
        self.check_options({"daemons", "outside"})
        daemons = self.options.get("daemons", "wait")
        if daemons not in ("wait", "end"):
            raise ValueError(f"module guard: daemons={daemons!r}: expected wait or end")
        self.end_daemons = daemons == "end"
        outside = self.options.get("outside", "")
        self.outside = [w for w in str(outside).split(":") if w] if outside is not True else []
        wrong = [w for w in self.outside if w not in ("signals", "abstract")]
        if wrong:
            raise ValueError(f"module guard: outside={outside}: expected signals, abstract or both (signals:abstract)")

    def engines(self):
        return [Guard(self, self.end_daemons, self.outside)]
