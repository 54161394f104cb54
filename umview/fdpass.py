"""Putting a file descriptor the monitor holds into a tracee.

Built on ``Call.inject`` (one system call run by the stopped caller, see
docs/internals.md, "Injecting a call"). Into the caller it injects

    socketpair(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0)  -> channel A, B
                                                      the monitor takes B
                                                      (pidfd_getfd) and sends
                                                      the fd on it (SCM_RIGHTS)
    close(B)
    recvmsg(A, ..., MSG_CMSG_CLOEXEC if asked)        -> the fd, M
    dup3(M, A, O_CLOEXEC if asked); close(M)          (with at=lowest: M lands on A)
    or close(A)

The pair has no name: a sandbox whose Landlock domain scopes abstract
sockets (a process inside cannot connect to a name a process outside
bound) and a view with a network namespace of its own (vnet) pass fds
alike. pidfd_getfd needs ptrace rights over the tracee, which its tracer
has while the tracee is dumpable; for one that is not (a normal user's
monitor, a process that made itself undumpable) the monitor listens on an
abstract AF_UNIX name holding its pid instead, and the tracee connects to
it (socket, connect, recvmsg, close), which needs its network namespace and
no Landlock scope.

Why not the others: pidfd_getfd run by the tracee needs ptrace rights over
the monitor (a tracee running as nobody under a root monitor has none);
SECCOMP_IOCTL_NOTIF_ADDFD works only while the call waits as a seccomp user
notification: vnet uses it there (Call.complete_with_fd), and this module
where the call is at a ptrace stop.

The structures written into the tracee (msghdr, iovec, cmsghdr) are laid
out for the call's ABI: 64-bit for x86_64, 32-bit for i386 and x32.
"""
import errno
import os
import socket
import struct

from umview import core
from umview.procs import PROCESSES
from umview.engine import Skip

AF_UNIX = 1
SOCK_STREAM = 1
SOCK_CLOEXEC = 0o2000000
O_CLOEXEC = 0o2000000
MSG_CMSG_CLOEXEC = 0x40000000
MSG_CTRUNC = 0x8
SOL_SOCKET = 1
SCM_RIGHTS = 1
PIDFD_GETFD = 438  # on x86_64, i386 and aarch64 alike (the unified numbers of new calls)

_listener = None
_name = None


def _listening():
    global _listener, _name
    if _listener is None:
        name = b"\0umview-fd-%d-%s" % (os.getpid(), os.urandom(6).hex().encode())
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(name)
        s.listen(16)
        s.setblocking(False)
        _listener, _name = s, name
    return _listener, _name


def close():
    """Stop listening (the view is over)."""
    global _listener, _name
    if _listener is not None:
        _listener.close()
        _listener = _name = None


def take_fd(pid, fd):
    """A copy of process pid's fd (the same open file: offset, flags), for
    the monitor: pidfd_getfd(2), Linux 5.6 (the monitor, the tracer, has
    the ptrace rights it needs)."""
    import ctypes  # lazy: only nested views take fds

    pidfd = os.pidfd_open(pid)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        r = libc.syscall(ctypes.c_long(PIDFD_GETFD), ctypes.c_long(pidfd), ctypes.c_long(fd), ctypes.c_long(0))
        if r < 0:
            e = ctypes.get_errno()
            raise OSError(e, f"pidfd_getfd of fd {fd} of process {pid}: {os.strerror(e)}")
        return r
    finally:
        os.close(pidfd)


def tgid_of(tid):
    """The process (thread-group) id of a thread (its record: umview.procs);
    OSError if it is gone."""
    return PROCESSES.tgid(tid)


def proc_pid(who, tid, tgid=tgid_of):
    """The pid a /proc/WHO path names for thread tid: "self" its process
    (tgid(tid)), "thread-self" the thread, else the number."""
    if who == b"self":
        return tgid(tid)
    if who == b"thread-self":
        return tid
    return int(who)


#: f(pid, name, text) -> text: how the view's /proc shows a file of a process
#: of the view besides what an engine changes in it (the inner tracers'
#: TracerPid and stop states: umview.ptrace), or None
proc_editor = None


def view_proc_file(call, who, name, edit=True):
    """The content of /proc/PID/NAME (bytes) for the /proc/WHO a process of
    the view named (WHO: b"self", b"thread-self" or a number), when PID is a
    process of the view (traced by this monitor: its files may be shown as
    the view sees them); None otherwise, or if there is no such process (the
    kernel then answers the open itself)."""
    try:
        pid = proc_pid(who, call.tid)
        if pid != call.tid and core.proc_status(pid, "TracerPid").get("TracerPid") != [b"%d" % os.getpid()]:
            return None  # a process outside the view
        with open(f"/proc/{pid}/{os.fsdecode(name)}", "rb") as f:
            text = f.read()
    except (OSError, ValueError):
        return None
    return proc_editor(pid, name, text) if edit and proc_editor is not None else text


def _check(result, what):
    if result < 0:
        raise OSError(-result, f"{what} in the tracee: {os.strerror(-result)}")
    return result


def give_fd(call, fd, cloexec=False, at=None):
    """Put a copy of the monitor's ``fd`` into the calling process of ``call``
    (a Call at its entry) and return its number there. ``at="lowest"`` puts
    it at the number the process would get from a call that makes a new fd
    (socket, open): the lowest free one. ``cloexec`` sets FD_CLOEXEC on it.
    Raises OSError with the errno a step got in the tracee (EMFILE, ...)."""
    pair = call.alloc(8)
    _check(call.inject("socketpair", AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), "socketpair")
    chan, other = struct.unpack("ii", call.read_mem(pair, 8))
    got = None
    try:
        try:
            mine = take_fd(tgid_of(call.tid), other)
        except OSError:
            mine = None  # no ptrace rights over it (not dumpable): by name
        if mine is not None:
            try:
                with socket.socket(fileno=mine) as end:
                    socket.send_fds(end, [b"\0"], [fd])
            finally:
                call.inject("close", other)
        else:
            call.inject("close", other)
            _connect_by_name(call, chan)
            _send(_listening()[0], tgid_of(call.tid), fd)
        got = _receive(call, chan, cloexec)
        if at == "lowest":
            # the channel holds the lowest free number: the fd replaces it
            _check(call.inject("dup3", got, chan, O_CLOEXEC if cloexec else 0), "dup3")
            got, chan = chan, got
        return got
    except BaseException:
        if got is not None:
            call.inject("close", got)
        raise
    finally:
        call.inject("close", chan)


def _connect_by_name(call, chan):
    """Make the tracee's end of the pair a new socket connected to the
    monitor's abstract name (dup3 of the new socket over it)."""
    _, name = _listening()
    sock = _check(call.inject("socket", AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), "socket")
    try:
        addr = struct.pack("H", AF_UNIX) + name
        where = call.alloc(len(addr))
        call.write_mem(where, addr)
        _check(call.inject("connect", sock, where, len(addr)), "connect")
        _check(call.inject("dup3", sock, chan, O_CLOEXEC), "dup3")
    finally:
        call.inject("close", sock)


def hand_over(call, fd, flags):
    """The Skip of an open call answered with a copy of the monitor's ``fd``
    (a memfd of content a module made), at the lowest free number of the
    process, close-on-exec if the call's open ``flags`` say O_CLOEXEC: in one
    step if the call waits as a seccomp notification (Call.complete_with_fd),
    else with give_fd."""
    cloexec = bool(flags & O_CLOEXEC)
    if call.notified:
        return Skip(call.complete_with_fd(fd, cloexec))
    return Skip(give_fd(call, fd, cloexec=cloexec, at="lowest"))


def hand_over_content(call, data, flags, name):
    """The Skip of an open call answered with a file holding ``data`` (a
    memfd named ``name``, reopened read-only, as the file it stands for was
    opened): hand_over."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        os.pwrite(fd, data, 0)
        ro = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(fd)
    try:
        return hand_over(call, ro, flags)
    finally:
        os.close(ro)


def _send(listener, tgid, fd):
    """Accept the tracee's connection (its process id checked: another process
    may have connected to the name) and send it the fd."""
    while True:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            raise OSError(errno.ECONNREFUSED, "the tracee's connection did not arrive") from None
        with conn:
            pid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
            if pid == tgid:
                socket.send_fds(conn, [b"\0"], [fd])
                return


class _Layout:
    """struct msghdr, struct iovec and struct cmsghdr of one ABI."""

    def __init__(self, msghdr, flags_at, iovec, cmsghdr, cmsg_space):
        self.msghdr = struct.Struct(msghdr)  # name, namelen, iov, iovlen, control, controllen, flags
        self.flags_at = flags_at             # offset of msg_flags
        self.iovec = struct.Struct(iovec)    # base, len
        self.cmsghdr = struct.Struct(cmsghdr)  # len, level, type, then the fd (an int)
        self.cmsg_space = cmsg_space         # CMSG_SPACE(sizeof(int))


_LAYOUTS = {
    "x86_64": _Layout("QIxxxxQQQQixxxx", 48, "QQ", "QiiI", 24),
    "i386": _Layout("IIIIIIi", 24, "II", "IiiI", 16),
    "x32": _Layout("IIIIIIi", 24, "II", "IiiI", 16),  # x32 recvmsg takes the compat structures
}


def _receive(call, chan, cloexec):
    """recvmsg on the channel in the tracee; the number of the fd it got."""
    lay = _LAYOUTS[call.abi]
    # struct msghdr, one iovec of one byte, room for one cmsg with one int
    size_msg, size_iov = lay.msghdr.size, lay.iovec.size
    buf = call.alloc(size_msg + size_iov + 8 + lay.cmsg_space)
    iov, data = buf + size_msg, buf + size_msg + size_iov
    control = data + 8
    call.write_mem(buf, lay.msghdr.pack(0, 0, iov, 1, control, lay.cmsg_space, 0))
    call.write_mem(iov, lay.iovec.pack(data, 1))
    call.write_mem(control, bytes(lay.cmsg_space))
    _check(call.inject("recvmsg", chan, buf, MSG_CMSG_CLOEXEC if cloexec else 0), "recvmsg")
    length, level, kind, fd = lay.cmsghdr.unpack(call.read_mem(control, lay.cmsghdr.size))
    if level != SOL_SOCKET or kind != SCM_RIGHTS or length < lay.cmsghdr.size:
        flags = struct.unpack("i", call.read_mem(buf + lay.flags_at, 4))[0]
        if flags & MSG_CTRUNC:  # the kernel could not install it: no free number left
            raise OSError(errno.EMFILE, "no fd number left in the tracee for the passed fd")
        raise OSError(errno.EIO, "no fd arrived in the tracee")
    return fd
