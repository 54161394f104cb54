"""vnet: the network a view sees.

    umview -p vnet,null CMD             no network: AF_INET, AF_INET6, AF_PACKET, ...
                                        fail with EAFNOSUPPORT; AF_UNIX works
    umview -p vnet,private CMD          a network namespace of its own, only lo up
                                        (any user: inside a user namespace if not root)
    umview -p vnet,netns=lab CMD        the named namespace /var/run/netns/lab
    umview -p vnet,netns=lab,create CMD ... made at start (lo up), removed at the end
    umview -p vnet,current CMD          the host's network (for stacking)
    ...,family=inet:inet6               only these families (default: all but unix)

The module claims socket(2) by family: the C core reads the family and hands
Python only the calls of the families it claims (the others go on to older
engines and the kernel without entering Python); null refuses them; a namespace mode asks its namespace
server (nsserver.py beside this file, a process in that namespace) for the socket and
puts it into the caller at the number socket() would have returned: where
socket() is trapped by a seccomp user notification, with one ioctl
(Call.complete_with_fd, SECCOMP_IOCTL_NOTIF_ADDFD); otherwise by calls
injected into the caller (umview/fdpass.py). Those are real kernel sockets of the namespace: bind,
connect, send, accept on them never stop. AF_NETLINK sockets come from the
namespace too, so `ip addr` lists its interfaces; in null mode from an empty
namespace whose only interface, lo, is down.
"""
import errno
import logging
import os

from umview import core, fdpass
from umview.engine import CONTINUE, Engine, Skip
from umview.service import Module, RedirectMount

from .nsserver import NamespaceServer

AF_UNIX = 1
AF_NETLINK = 16
SOCK_CLOEXEC = 0o2000000

#: family names for family=, like View-OS umview's mstack (ipv4, ipv6, ...)
FAMILIES = {"inet": 2, "ipv4": 2, "inet6": 10, "ipv6": 10, "netlink": AF_NETLINK, "packet": 17,
            "all": None}
MODES = ("null", "current", "private", "netns")
#: errors of fd passing that the caller gets as they are (socket(2) gives them natively)
PASSED_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS, errno.ESRCH)
NETNS_DIR = "/var/run/netns"
#: the paths of a process's own network files (with procnet)
PROC_NET = ("/proc/net", "/proc/self/net", "/proc/thread-self/net")


def _log():
    return logging.getLogger("umview")


class Vnet(Module):
    name = "vnet"
    description = "the view's network: null (none), current, private, or a named network namespace"
    options_help = ("null (the default) | current | private | netns=NAME[,create]; "
                    "family=F1:F2... of inet, inet6, netlink, packet, all (default all: every family but unix); "
                    "procnet: /proc/net shows the view's network too (traps path calls)")

    def __init__(self, options):
        super().__init__(options)
        self.check_options({*MODES, "create", "family", "procnet"})
        modes = [m for m in MODES if m in self.options]
        if len(modes) > 1:
            raise ValueError(f"module vnet: choose one of {', '.join(MODES)} (got {', '.join(modes)})")
        self.mode = modes[0] if modes else "null"
        self.netns = None
        if self.mode == "netns":
            self.netns = self.options["netns"]
            if self.netns is True or not self.netns or "/" in self.netns or self.netns in (".", ".."):
                raise ValueError("module vnet: netns=NAME names a namespace of /var/run/netns (ip netns list)")
        self.create = bool(self.options.get("create"))
        if self.create and self.mode != "netns":
            raise ValueError("module vnet: create goes with netns=NAME")
        self.families = self._families(self.options.get("family", "all"))
        where = {"netns": f"network namespace {self.netns}", "private": "a private network namespace",
                 "null": "no network", "current": "the host's network"}[self.mode]
        fams = "" if self.families is None else " (" + self.options["family"] + " only)"
        self.description = f"the view's network: {where}{fams}"
        self.server = None
        self.created = False
        self.procnet = bool(self.options.get("procnet"))
        if self.procnet and self.mode == "current":
            raise ValueError("module vnet: procnet shows a namespace of the view: not with current")

    @staticmethod
    def _families(spec):
        if spec is True or not spec:
            raise ValueError("module vnet: family=F1:F2... names families (inet, inet6, netlink, packet, all)")
        fams = set()
        for word in spec.split(":"):
            if word not in FAMILIES:
                raise ValueError(f"module vnet: unknown family {word!r} (known: {', '.join(FAMILIES)})")
            if FAMILIES[word] is None:
                return None  # all
            fams.add(FAMILIES[word])
        return frozenset(fams)

    def claims(self, family):
        if self.families is None:
            return family != AF_UNIX
        return family in self.families

    def engines(self):
        engines = [VnetEngine(self)]
        if self.procnet:
            # /proc/net is a link to /proc/self/net: the process's own (the
            # host's) network; the namespace server's shows the view's
            engines += [RedirectMount(t, self._proc_net, name=f"vnet {t}") for t in PROC_NET]
        return engines

    def _proc_net(self, rel):
        """/proc/net/REL of the view: the namespace server's."""
        base = b"/proc/%d/net" % self.server.pid if self.server is not None else b"/proc/net-of-no-namespace"
        return base + (b"/" + rel if rel else b"")

    def start(self):
        """Enter the network: check and make the named namespace, start the
        server. Errors are ValueErrors with what to do."""
        if self.mode == "current" or (self.mode == "null" and not self.claims(AF_NETLINK) and not self.procnet):
            return  # nothing to make sockets for
        path = os.path.join(NETNS_DIR, self.netns) if self.netns else None
        if self.mode == "netns" and not self.create and not os.path.exists(path):
            raise ValueError(f"module vnet: no network namespace {self.netns!r} ({path}): make it with "
                             f"`ip netns add {self.netns}`, or add `,create` to make it for this view")
        if self.create:
            if os.path.exists(path):
                raise ValueError(f"module vnet: network namespace {self.netns!r} exists already: "
                                 "drop `create` to use it")
            from pyroute2 import netns as pyroute_netns  # lazy: pyroute2 takes ~400 ms to import

            try:
                pyroute_netns.create(self.netns)
            except Exception as exc:  # noqa: BLE001 - pyroute2 raises several kinds
                raise ValueError(f"module vnet: cannot make network namespace {self.netns!r}: {exc}"
                                 + ("" if os.geteuid() == 0 else " (making a named namespace needs root; "
                                    "vnet,private needs none)")) from None
            self.created = True
        try:
            self.server = NamespaceServer.start(netns=self.netns, private=self.mode in ("private", "null"),
                                                up=self.mode == "private" or self.create)
        except OSError as exc:
            self.close()
            if self.mode == "null":
                # no empty namespace for netlink: refuse it like the rest
                _log().warning("vnet,null: %s; netlink sockets fail too", exc.strerror)
                return
            raise ValueError(f"module vnet: {exc.strerror}") from None

    def close(self):
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.created:
            from pyroute2 import netns as pyroute_netns  # lazy: pyroute2 takes ~400 ms to import

            self.created = False
            pyroute_netns.remove(self.netns)
        fdpass.close()

    def socket(self, call, family, type_, proto):
        """The socket for a call this module claims: Skip(fd) or OSError."""
        if self.mode == "null" and (family != AF_NETLINK or self.server is None):
            raise OSError(errno.EAFNOSUPPORT, "no network in this view")
        if self.server is None:
            raise OSError(errno.EAFNOSUPPORT, "the view's network is gone")
        uid, gid = _effective_ids(call.tid)
        fd = self.server.socket(family, type_, proto, uid, gid)  # its OSError is the namespace's answer
        cloexec = bool(type_ & SOCK_CLOEXEC)
        try:
            if call.notified:
                # the call waits as a seccomp notification: the kernel puts the
                # socket in and completes the call in one step (ENOENT: the
                # caller died or a signal ended its wait; the call restarts)
                return Skip(call.complete_with_fd(fd, cloexec))
            return Skip(fdpass.give_fd(call, fd, cloexec=cloexec, at="lowest"))
        except OSError as exc:
            if exc.errno in PASSED_ERRNOS or (call.notified and exc.errno == errno.ENOENT):
                raise  # the process is out of fds or memory: what socket() says natively too
            # the socket exists but cannot reach the process (one in a network
            # namespace of its own cannot reach the monitor): this family is not here
            _log().warning("vnet: cannot hand a socket to %d: %s", call.tid, exc)
            raise OSError(errno.EAFNOSUPPORT, "no network for this call") from None
        finally:
            os.close(fd)


def _effective_ids(tid):
    """The effective uid and gid of a thread."""
    st = core.proc_status(tid, "Uid", "Gid")
    return int(st["Uid"][1]) if "Uid" in st else 0, int(st["Gid"][1]) if "Gid" in st else 0


class VnetEngine(Engine):
    """socket(2) of the families its module claims (the C core hands Python
    no other socket call). A call one vnet engine decided (current included)
    is left alone by the older ones."""

    def __init__(self, module):
        self.module = module
        self.name = f"vnet:{module.mode}"
        self.description = module.description
        self.families = frozenset(f for f in range(64) if module.claims(f))

    def wants(self, call):
        # (state shared by every vnet engine: keyed by the class)
        return (call.name == "socket" and not getattr(call.state(VnetEngine), "decided", False)
                and self.module.claims(core.signed32(call.domain)))

    def enter(self, call):
        call.state(VnetEngine).decided = True
        if self.module.mode == "current":
            return CONTINUE
        return self.module.socket(call, core.signed32(call.domain), core.signed32(call.type),
                                  core.signed32(call.protocol))
