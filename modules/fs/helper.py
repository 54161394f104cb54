"""The mount helper: a process in a private mount namespace (and, for a
normal user, a user namespace of its own) where the view's filesystems are
mounted. The monitor never changes namespace itself.

    helper = MountHelper.start()               # OSError saying why not
    helper.run_server(argv, "/mnt")            # fuse2fs IMG /mnt -f ..., until mounted
    helper.mount("tmpfs", "/mnt", "tmpfs", 0, "size=1m")
    helper.mount("fuse", "/mnt", "fuse.x", 0, "fd={fd},rootmode=40000,...", fd=F)
    fd = helper.open_dev_fuse(flags)           # /dev/fuse opened in its user namespace
    helper.umount("/mnt", flags)               # and wait for its server to exit
    helper.stop()

Each filesystem is mounted in the helper's namespace at the path the view
shows it at (the mount point as the kernel sees it, through the view's older
mounts), so the kernel names files there by the view's path: readlink of
/proc/PID/fd/N, /proc/PID/exe and the lines of /proc/PID/maps of a process
that opened them through /proc/HELPER/root/... show /mnt/..., never the helper.

As root the helper only unshares the mount namespace (its mounts made slaves
of the host's, so nothing it mounts goes back); as a normal user it unshares
a user namespace too, maps the user's own uid and gid to themselves, and
keeps CAP_SYS_ADMIN as an ambient capability so that the FUSE servers it
runs can mount(2) there without the setuid fusermount. Mounting FUSE, tmpfs
and bind mounts in such a namespace is allowed to unprivileged users since
Linux 4.18 (user_namespaces(7), mount_namespaces(7)).

Lifetime: the helper is not the monitor's child (the monitor's
waitpid(-1) loop must never see it); it serves requests on a SOCK_SEQPACKET
socketpair until EOF (the monitor stopped it, or died however it died), then
unmounts everything (lazily: files still open keep their filesystem), asks
its servers to finish, kills what is left, and exits. Servers get
PR_SET_PDEATHSIG, so killing the helper ends them too; the namespace goes
with its last process.

Requests and answers are JSON, one per message; fds travel with SCM_RIGHTS.
"""
import ctypes
import errno
import functools
import json
import os
import select
import signal
import socket
import time

from umview.servers import fork_server, stop_server

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_REMOUNT = 32
MS_REC = 0x4000
MS_SLAVE = 1 << 19
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_RAISE = 2
CAP_SYS_ADMIN = 21
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_READY_TIMEOUT = 30
SERVER_MOUNT_TIMEOUT = 60   # how long a server may take to mount its filesystem
SERVER_EXIT_TIMEOUT = 60    # how long a server may take to finish after unmount (flushing an image)
_MAX_MSG = 1 << 20


def userns_hint(proc="/proc"):
    """Why unprivileged user namespaces may be refused on this machine, and
    the fix, or "" when nothing known stands in the way."""
    def read(path):
        try:
            with open(proc + path[len("/proc"):]) as f:
                return f.read().strip()
        except OSError:
            return None

    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        return ("AppArmor restricts unprivileged user namespaces on this machine "
                "(kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 23.10 and later): allow them "
                "with 'sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0', or give umview an "
                "AppArmor profile with 'userns,' (see docs/user-guide.md, \"Mounting filesystems\")")
    if read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return ("unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0): "
                "'sudo sysctl kernel.unprivileged_userns_clone=1' allows them")
    if read("/proc/sys/user/max_user_namespaces") == "0":
        return ("user namespaces are disabled (user.max_user_namespaces=0): "
                "'sudo sysctl user.max_user_namespaces=15000' allows them")
    return ""


class HelperError(OSError):
    """A request the helper refused: errno, and the message for the user."""


class MountHelper:
    def __init__(self, pid, channel, userns):
        self.pid = pid
        self.channel = channel
        self.userns = userns  # does it live in a user namespace of its own?

    @property
    def root(self):
        """Its root directory, as the view's processes reach it."""
        return b"/proc/%d/root" % self.pid

    @classmethod
    def start(cls, ids=None):
        """Fork the helper and wait until it is in its namespaces. OSError
        with a message saying what failed and how to fix it. ids: (uid, gid)
        the user is in the helper's user namespace (the ids the mounted
        filesystems record for the user's files); None: the user's own."""
        monitor_end = fork_server(functools.partial(_serve, ids=ids))
        r, _, _ = select.select([monitor_end], [], [], _READY_TIMEOUT)
        answer = _decode(monitor_end.recv(_MAX_MSG)) if r else None
        if answer is None:
            monitor_end.close()
            raise HelperError(errno.EIO, "the mount helper did not start")
        if answer["err"]:
            monitor_end.close()
            # what the kernel answers an unprivileged mount(2), with why
            raise HelperError(errno.EPERM, answer["msg"])
        return cls(answer["pid"], monitor_end, answer["userns"])

    def _ask(self, request, fd=None):
        data = json.dumps(request).encode()
        try:
            if fd is None:
                self.channel.send(data)
            else:
                socket.send_fds(self.channel, [data], [fd])
            msg, fds, _, _ = socket.recv_fds(self.channel, _MAX_MSG, 1)
        except OSError as exc:
            raise OSError(errno.EIO, f"the mount helper is gone ({exc})") from None
        answer = _decode(msg)
        if answer is None:
            for f in fds:
                os.close(f)
            raise OSError(errno.EIO, "the mount helper is gone")
        if answer["err"]:
            for f in fds:
                os.close(f)
            raise HelperError(answer["err"], answer.get("msg") or os.strerror(answer["err"]))
        return answer, fds

    def run_server(self, argv, target):
        """Run a FUSE server (in the foreground: argv has -f) that mounts on
        target; return once the mount is there. HelperError if the server
        exits first, with what it printed."""
        self._ask({"op": "server", "argv": [os.fsdecode(a) for a in argv], "target": os.fsdecode(target)})

    def mount(self, source, target, fstype, flags, data, fd=None):
        """mount(2) in the helper's namespace; ``{fd}`` in data becomes the
        number of the passed fd there."""
        self._ask({"op": "mount", "source": os.fsdecode(source), "target": os.fsdecode(target),
                   "fstype": fstype, "flags": flags, "data": data}, fd)

    def umount(self, target, flags=0):
        """umount2(2) there, then wait for the filesystem's server (if the
        helper runs it) to finish writing and exit."""
        self._ask({"op": "umount", "target": os.fsdecode(target), "flags": flags})

    def open_dev_fuse(self, flags):
        """/dev/fuse opened by the helper: a FUSE connection whose user
        namespace is the helper's (the kernel mounts only such a one there)."""
        _, fds = self._ask({"op": "devfuse", "flags": flags})
        if not fds:
            raise OSError(errno.EIO, "the mount helper sent no fd")
        return fds[0]

    def stop(self, timeout=SERVER_EXIT_TIMEOUT + 5):
        """Close the channel (the helper unmounts everything and exits on
        EOF) and wait for it."""
        stop_server(self.pid, self.channel, timeout)


def _decode(msg):
    if not msg:
        return None
    try:
        return json.loads(msg)
    except ValueError:
        return {"err": errno.EIO, "msg": "garbled answer from the mount helper"}


# --- in the helper ------------------------------------------------------------

_libc = None


def _c():  # pragma: no cover - runs in the helper
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        _libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return _libc


def _check(r, what):  # pragma: no cover - runs in the helper
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _enter(ids=None):  # pragma: no cover - runs in the helper
    """Into a private mount namespace (and a user namespace when not root,
    where the user's ids are ids, or the user's own if None)."""
    libc = _c()
    if os.geteuid() == 0:
        _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        # nothing mounted here propagates back to the host; the host's new
        # mounts still show here
        _check(libc.mount(b"none", b"/", None, MS_REC | MS_SLAVE, None), "making / a slave mount")
        return False
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        e = ctypes.get_errno()
        hint = userns_hint() or ("the kernel refuses unprivileged user namespaces here"
                                 " (a container without them, or a hardened kernel)")
        raise OSError(e, f"cannot make a user namespace for the mount helper: unshare: {os.strerror(e)}: {hint}")
    # the user's own ids, mapped to themselves: files the view makes on a
    # mounted filesystem are the user's, as with a mount made natively; or
    # to the ids asked for (a fake root's files are root's in the image)
    inner = ids or (uid, gid)
    for name, text in (("setgroups", "deny"), ("uid_map", f"{inner[0]} {uid} 1"), ("gid_map", f"{inner[1]} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    # the servers it runs keep CAP_SYS_ADMIN over its namespace across exec
    hdr = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(libc.capget(ctypes.byref(hdr), data), "capget")
    data[0].inheritable |= 1 << CAP_SYS_ADMIN
    _check(libc.capset(ctypes.byref(hdr), data), "capset")
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0), "ambient CAP_SYS_ADMIN")
    return True


def _mounted(target):  # pragma: no cover - runs in the helper
    """Is target a mount point in this namespace? (Read from mountinfo: no
    access to the filesystem, which may not answer yet.)"""
    esc = _escape(target)
    with open("/proc/self/mountinfo", "rb") as f:
        return any(line.split(b" ", 5)[4] == esc for line in f)


def _answers(target):  # pragma: no cover - runs in the helper
    """Does the FUSE filesystem just mounted on target answer? A server that
    dies once mounted (fuse2fs 1.47.0 on a journal that needs recovery)
    leaves a mount where every call fails with ENOTCONN."""
    try:
        os.statvfs(target)
    except OSError as exc:
        return exc.errno != errno.ENOTCONN
    return True


def _escape(path):
    """A path as mountinfo writes it (space, tab, newline, backslash in octal)."""
    path = os.fsencode(path)
    for ch in b"\\ \t\n":
        path = path.replace(bytes([ch]), b"\\%03o" % ch)
    return path


class _Server:
    def __init__(self, proc, target, log):
        self.proc = proc
        self.target = target
        self.log = log  # memfd with what it printed

    def output(self, limit=2000):
        try:
            os.lseek(self.log, 0, os.SEEK_SET)
            text = os.read(self.log, 1 << 16).decode(errors="replace").strip()
        except OSError:
            return ""
        return text[-limit:]


def _serve(channel, ids=None):  # pragma: no cover - runs in the helper
    """The helper's life: set up, say ready (or why not), answer until EOF,
    then undo every mount."""
    try:
        os.setsid()  # out of the terminal's process group: ^C is for the view
        # the monitor is not dumpable (umview/csrc/spawn.c); the view's
        # processes reach the helper's tree through /proc/HELPER/root, which
        # the kernel opens only for a dumpable process of the same user
        _c().prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGTERM, signal.SIGHUP,
                    signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGPIPE, signal.SIGWINCH,
                    signal.SIGTTIN, signal.SIGTTOU):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        signal.signal(signal.SIGTTIN, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        keep = channel.fileno()
        # stdin: nothing; stdout and stderr stay (the servers' messages after
        # they mounted reach the user's terminal, as they would natively)
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 16)
        userns = _enter(ids)
    except OSError as exc:
        channel.send(json.dumps({"err": exc.errno or errno.EIO, "msg": str(exc.strerror or exc)}).encode())
        return 1
    except Exception as exc:  # noqa: BLE001 - the monitor shows it
        channel.send(json.dumps({"err": errno.EIO, "msg": repr(exc)}).encode())
        return 1
    channel.send(json.dumps({"err": 0, "pid": os.getpid(), "userns": userns}).encode())
    helper = _Helper(userns)
    try:
        helper.loop(channel)
    finally:
        helper.teardown()
    return 0


class _Helper:  # pragma: no cover - runs in the helper
    def __init__(self, userns):
        self.userns = userns
        self.servers = []   # _Server, in the order they mounted
        self.targets = []   # every mount point, in the order mounted

    def loop(self, channel):
        while True:
            try:
                msg, fds, _, _ = socket.recv_fds(channel, _MAX_MSG, 4)
            except OSError:
                return
            if not msg:
                for f in fds:
                    os.close(f)
                return  # EOF: the monitor is done, or dead
            self.reap()
            answer, out = {"err": 0}, []
            try:
                request = json.loads(msg)
                out = getattr(self, "op_" + request["op"])(request, fds) or []
            except OSError as exc:
                answer = {"err": exc.errno or errno.EIO, "msg": str(exc.strerror or exc)}
            except Exception as exc:  # noqa: BLE001 - a bad request: say so, keep serving
                answer = {"err": errno.EINVAL, "msg": f"mount helper: {exc!r}"}
            finally:
                for f in fds:
                    os.close(f)
            try:
                if out:
                    socket.send_fds(channel, [json.dumps(answer).encode()], out)
                else:
                    channel.send(json.dumps(answer).encode())
            except OSError:
                return
            finally:
                for f in out:
                    os.close(f)

    def reap(self):
        for s in list(self.servers):
            if s.proc.poll() is not None:
                self.servers.remove(s)
                os.close(s.log)

    def _mount_failed(self, exc, what):
        if exc.errno == errno.EPERM and self.userns:
            hint = userns_hint()
            if hint:
                raise OSError(errno.EPERM, f"{what}: {os.strerror(errno.EPERM)}: {hint}")
        raise exc

    def op_server(self, req, fds):
        import subprocess  # lazy: only when a server is run

        target = req["target"]
        if _mounted(target) and any(s.target == target for s in self.servers):
            pass  # a second mount over the first: allowed, as natively
        log = os.memfd_create("umview-server-output", os.MFD_CLOEXEC)

        def child():
            _c().prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

        before = self._count(target)
        try:
            proc = subprocess.Popen(req["argv"], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    preexec_fn=child, close_fds=True)
        except OSError as exc:
            os.close(log)
            raise OSError(exc.errno or errno.ENOENT,
                          f"cannot run {req['argv'][0]}: {exc.strerror}"
                          + (" (is its package installed?)" if exc.errno == errno.ENOENT else ""))
        server = _Server(proc, target, log)
        deadline = time.monotonic() + SERVER_MOUNT_TIMEOUT
        while time.monotonic() < deadline:
            if self._count(target) > before:
                if _answers(target):
                    self.servers.append(server)
                    self.targets.append(target)
                    return []
                _c().umount2(os.fsencode(target), MNT_DETACH)  # its server is gone
                break
            if proc.poll() is not None:
                break
            time.sleep(0.003)
        else:
            proc.kill()
        proc.wait()
        text = server.output()
        os.close(log)
        rc = proc.returncode
        raise OSError(errno.EINVAL, f"{os.path.basename(req['argv'][0])} did not mount {target}"
                      + (f" (killed by signal {-rc}: {signal.strsignal(-rc)})" if rc and rc < 0 else
                         f" (exit status {rc})" if rc else "")
                      + (f": {text}" if text else ""))

    @staticmethod
    def _count(target):
        esc = _escape(target)
        with open("/proc/self/mountinfo", "rb") as f:
            return sum(1 for line in f if line.split(b" ", 5)[4] == esc)

    def op_mount(self, req, fds):
        data = req["data"]
        if "{fd}" in data:
            if not fds:
                raise OSError(errno.EINVAL, "no fd passed for fd=")
            data = data.replace("{fd}", str(fds[0]))
        r = _c().mount(os.fsencode(req["source"]), os.fsencode(req["target"]), req["fstype"].encode(),
                       req["flags"], data.encode() if data else None)
        if r != 0:
            e = ctypes.get_errno()
            self._mount_failed(OSError(e, os.strerror(e)), f"mount -t {req['fstype']}")
        if not req["flags"] & MS_REMOUNT:  # a remount changes a mount, makes none
            self.targets.append(req["target"])
        return []

    def op_umount(self, req, fds):
        target = req["target"]
        if _c().umount2(os.fsencode(target), req["flags"]) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))  # EBUSY, EINVAL: mount(2)'s own answers
        if target in self.targets:
            # the newest mount on it went
            del self.targets[len(self.targets) - 1 - self.targets[::-1].index(target)]
        # the server of the filesystem just unmounted: the newest one on
        # target still running whose mount is gone
        remaining = self._count(target)
        mine = [s for s in self.servers if s.target == target]
        for s in mine[remaining:]:
            if req["flags"] & MNT_DETACH:
                continue  # files still open keep it: the server ends when they close
            try:
                s.proc.wait(SERVER_EXIT_TIMEOUT)
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
                s.proc.kill()
                s.proc.wait()
            self.servers.remove(s)
            os.close(s.log)
        return []

    def op_devfuse(self, req, fds):
        return [os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC | (req["flags"] & os.O_NONBLOCK))]

    def teardown(self):
        for target in reversed(self.targets):
            _c().umount2(os.fsencode(target), MNT_DETACH)
        deadline = time.monotonic() + SERVER_EXIT_TIMEOUT
        for s in self.servers:
            try:
                s.proc.wait(max(0.1, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
                s.proc.terminate()
        for s in self.servers:
            try:
                s.proc.wait(2)
            except Exception:  # noqa: BLE001
                s.proc.kill()
                s.proc.wait()
