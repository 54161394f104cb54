"""The namespace server: a process living in a network namespace that makes
sockets there for the monitor, which never moves into a namespace itself.

    server = NamespaceServer.start(netns="lab")     # or private=True, up=...
    fd = server.socket(family, type, proto, uid, gid)   # OSError(errno) if refused
    server.stop()

The monitor forks; the child forks the server and exits at once, and the
monitor reaps it: the server is not the monitor's child, so the C loop's
waitpid(-1) never sees it (it would otherwise wait for it forever once the
traced processes are gone). The server runs until its end of the channel
(a SOCK_SEQPACKET socketpair) reads EOF: at stop(), or when the kernel closes
the monitor's end because the monitor died, however it died.

Entering: ``netns=NAME``: setns into /var/run/netns/NAME (pyroute2.netns);
``private``: unshare(CLONE_NEWNET), with CLONE_NEWUSER first when not root
(the server then has every capability over its namespace, and so does any
process of the user that created it). ``up``: bring ``lo`` up (pyroute2).

Requests: (family, type, protocol, uid, gid) -> a socket, sent back with
SCM_RIGHTS, or an errno. A server running as root in the initial user
namespace makes each socket with the caller's effective uid and gid
(setresuid/setresgid around socket()), so that raw and packet sockets need
the capabilities the caller has, as they would natively.
"""
import ctypes
import errno
import os
import select
import signal
import socket
import struct

from umview.servers import fork_server, stop_server

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
_REQUEST = struct.Struct("iiiII")
_ANSWER = struct.Struct("i")
_READY_TIMEOUT = 30


class NamespaceServer:
    def __init__(self, pid, channel):
        self.pid = pid
        self.channel = channel

    @classmethod
    def start(cls, netns=None, private=False, up=False):
        """Fork the server and wait until it is in its namespace. OSError with
        a message saying what failed (no such namespace, no permission)."""
        monitor_end = fork_server(lambda end: _serve(end, netns, private, up))
        r, _, _ = select.select([monitor_end], [], [], _READY_TIMEOUT)
        msg = monitor_end.recv(4096) if r else b""
        err, text = (_ANSWER.unpack_from(msg)[0], msg[_ANSWER.size:].decode(errors="replace")) \
            if len(msg) >= _ANSWER.size else (errno.EIO, "the namespace server did not start")
        if err:
            monitor_end.close()
            raise OSError(err, text)
        pid = int(text)
        return cls(pid, monitor_end)

    def socket(self, family, type_, proto, uid, gid):
        """A new socket in the server's namespace (an fd of the monitor)."""
        self.channel.send(_REQUEST.pack(family, type_, proto, uid, gid))
        msg, fds, _, _ = socket.recv_fds(self.channel, _ANSWER.size, 1)
        if len(msg) < _ANSWER.size:
            raise OSError(errno.EIO, "the namespace server is gone")
        err = _ANSWER.unpack(msg)[0]
        if err:
            for fd in fds:
                os.close(fd)
            raise OSError(err, os.strerror(err))
        return fds[0]

    def stop(self, timeout=5):
        """Close the channel (the server exits on EOF) and wait for it."""
        stop_server(self.pid, self.channel, timeout)


def _enter(netns, private, up):  # pragma: no cover - runs in the server
    libc = ctypes.CDLL(None, use_errno=True)
    if netns is not None:
        from pyroute2 import netns as pyroute_netns  # lazy: ~400 ms, in the server only when asked

        try:
            pyroute_netns.setns(netns, flags=0)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot enter network namespace {netns!r}: {os.strerror(exc.errno)}"
                          + (" (entering a named namespace needs root)" if exc.errno == errno.EPERM else ""))
    elif private:
        flags = CLONE_NEWNET if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWNET
        if libc.unshare(flags) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "cannot make a network namespace: unshare("
                          + ("CLONE_NEWNET" if flags == CLONE_NEWNET else "CLONE_NEWUSER|CLONE_NEWNET")
                          + f"): {os.strerror(e)}" + ("" if flags == CLONE_NEWNET else
                                                       " (are unprivileged user namespaces disabled?)"))
    if up:
        from pyroute2 import IPRoute  # lazy: as above

        with IPRoute() as ipr:
            ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")


def _serve(channel, netns, private, up):  # pragma: no cover - runs in the server
    """The server's life: set up, say ready (or why not), answer until EOF."""
    try:
        os.setsid()  # out of the terminal's process group: ^C is for the view
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGTERM, signal.SIGHUP,
                    signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGPIPE, signal.SIGWINCH):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        keep = channel.fileno()
        os.closerange(0, keep)
        os.closerange(keep + 1, 1 << 16)
        _enter(netns, private, up)
    except OSError as exc:
        channel.send(_ANSWER.pack(exc.errno or errno.EIO) + str(exc.strerror or exc).encode())
        return 1
    except Exception as exc:  # noqa: BLE001 - the monitor shows it
        channel.send(_ANSWER.pack(errno.EIO) + repr(exc).encode())
        return 1
    channel.send(_ANSWER.pack(0) + str(os.getpid()).encode())
    as_caller = os.geteuid() == 0  # root of the initial user namespace (a new one would map it to nobody)
    while True:
        try:
            msg = channel.recv(_REQUEST.size)
        except OSError:
            return 0
        if len(msg) < _REQUEST.size:
            return 0  # EOF: the monitor is done, or dead
        family, type_, proto, uid, gid = _REQUEST.unpack(msg)
        switched = as_caller and uid != 0
        try:
            if switched:
                os.setresgid(-1, gid, -1)
                os.setresuid(-1, uid, -1)
            s = socket.socket(family, type_, proto)
        except OSError as exc:
            channel.send(_ANSWER.pack(exc.errno or errno.EIO))
        else:
            socket.send_fds(channel, [_ANSWER.pack(0)], [s.fileno()])
            s.close()
        finally:
            if switched:
                os.setresuid(-1, 0, -1)
                os.setresgid(-1, 0, -1)
