"""The monitor's side of the control channel (umview.control): the services
of a view, its name and its filesystem-type aliases.

ServiceControl is an engine like the others, the newest of all: it claims
only the private control call, which the C core maps to the pseudo-syscall
CONTROL whatever else is loaded. Loading modules is the assembly's job
(umview.assembly.load_service, given as ``loader``): nothing here imports
``modules/``.
"""
import errno
import os

from umview import control, core
from umview.engine import Engine, Skip

CONTROL = control.CONTROL

def _log():
    import logging  # lazy: 13 ms of start-up, paid only when something is logged

    return logging.getLogger("umview")


def _creds(pid):
    """uids, gids, CAP_SYS_PTRACE and tracer of a process."""
    st = core.proc_status(pid, "Uid", "Gid", "CapEff", "TracerPid")
    return {"uid": [int(x) for x in st["Uid"]], "gid": [int(x) for x in st["Gid"]],
            "cap_ptrace": bool(int(st["CapEff"][0], 16) >> 19 & 1),  # CAP_SYS_PTRACE
            "tracer": int(st["TracerPid"][0])}


def _ancestors(pid):
    """The parents of pid up to init."""
    out = []
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        out.append(pid)
    return out


class Service:
    """A loaded module and the engines it registered at load."""

    def __init__(self, name, module, engines, permanent=False):
        self.name = name
        self.module = module
        self.engines = list(engines)
        self.permanent = permanent


class ServiceError(OSError):
    """Refused, with a message for the user (written to the caller's errbuf)."""


class ServiceControl(Engine):
    name = "control"
    description = "the control channel: services, view name, filesystem aliases"
    syscalls = frozenset({CONTROL})
    newest = 2  # newer than the other engines marked newest (rank, see Dispatcher.add)

    def __init__(self, loader=None, view_name=""):
        """loader(spec, engines, cwd) -> (module, new engines): loads a module
        by -p spec; engines are those already in the view (see assembly), cwd
        the adding process's directory."""
        self.loader = loader
        self.view_name = view_name
        self.view_id = 0  # one view per monitor
        self.monitor = None
        self.services = []
        self.aliases = {}  # alias -> the Service whose fstypes it was added to

    # --- the operations, for the monitor and the tests ---
    def register(self, name, module, engines, permanent=False):
        """A module loaded at start (-p): listed, and removable like the others."""
        self.services.append(Service(name, module, engines, permanent))

    def add_service(self, spec, permanent=False, cwd=None):
        if self.loader is None:
            raise ServiceError(errno.ENOSYS, "this view cannot load modules")
        try:
            name, _ = control.parse_spec(spec)
            module, engines = self.loader(spec, tuple(self.monitor.dispatcher.engines), cwd)
        except (ValueError, ImportError) as exc:
            raise ServiceError(errno.EINVAL, str(exc)) from None
        module.view = self.monitor
        try:
            module.start()  # before its engines see a call: a module that cannot start is refused
        except (ValueError, OSError) as exc:
            module.close()
            raise ServiceError(errno.EINVAL, str(exc)) from None
        for e in engines:
            self.monitor.add_engine(e)
        self.services.append(Service(name, module, engines, permanent))
        _log().info("service %s added%s", name, " (permanent)" if permanent else "")

    def del_service(self, name):
        for s in reversed(self.services):
            if s.name == name:
                break
        else:
            raise ServiceError(errno.ENOENT, f"no service {name!r} is loaded")
        if s.permanent:
            raise ServiceError(errno.EBUSY, f"{name} is permanent (loaded with -p)")
        if s.module.busy():
            raise ServiceError(errno.EBUSY, f"{name} has mounts in use: unmount them first")
        for e in s.engines:
            if e in self.monitor.dispatcher.engines:
                self.monitor.remove_engine(e)
        for alias in [a for a, owner in self.aliases.items() if owner is s]:
            del self.aliases[alias]
        s.module.close()
        self.services.remove(s)
        _log().info("service %s removed", name)

    def attach(self, caller, pid):
        """um_attach: trace pid (all its threads) in this view, if the caller
        may ptrace it (the kernel's rule, checked on the caller's behalf: the
        monitor may be more privileged than the caller)."""
        try:
            target = _creds(pid)
        except OSError:
            raise ServiceError(errno.ESRCH, f"no process {pid}") from None
        me = _creds(caller)
        if pid == os.getpid() or pid in _ancestors(os.getpid()):
            raise ServiceError(errno.EPERM, f"process {pid} runs umview itself (the monitor or a parent)")
        if target["tracer"] == os.getpid():
            raise ServiceError(errno.EBUSY, f"process {pid} is already in this view")
        if target["tracer"]:
            raise ServiceError(errno.EPERM, f"process {pid} is traced by process {target['tracer']}")
        if not me["cap_ptrace"] and not (
                {me["uid"][0]} == set(target["uid"][:3]) and {me["gid"][0]} == set(target["gid"][:3])):
            raise ServiceError(errno.EPERM, f"not allowed to trace process {pid} (another user's)")
        try:
            self.monitor.attach(pid)
        except OSError as exc:
            raise ServiceError(exc.errno, f"cannot attach process {pid}: {os.strerror(exc.errno)}") from None
        _log().info("process %d attached", pid)

    def fsalias(self, alias, fstype=None):
        if fstype is None:
            owner = self.aliases.pop(alias, None)
            if owner is None:
                raise ServiceError(errno.ENOENT, f"no filesystem alias {alias!r}")
            owner.module.fstypes.discard(alias)
            return
        if alias in self.aliases or any(alias in getattr(s.module, "fstypes", ()) for s in self.services):
            raise ServiceError(errno.EEXIST, f"{alias!r} is already a filesystem type of this view")
        for s in reversed(self.services):
            if fstype in getattr(s.module, "fstypes", ()):
                s.module.fstypes.add(alias)
                self.aliases[alias] = s
                return
        raise ServiceError(errno.ENODEV, f"no loaded service serves filesystem type {fstype!r}")

    def listing(self):
        return "".join(f"{s.name}\t{s.module.description}\t{'permanent' if s.permanent else ''}\n"
                       for s in self.services)

    def engine_listing(self):
        """The engines in the order a call enters them (newest first)."""
        owner = {id(e): s.name for s in self.services for e in s.engines}
        return "".join(f"{e.epoch}\t{int(e.newest)}\t{e.name}\t{owner.get(id(e), '')}\n"
                       for e in reversed(self.monitor.dispatcher.engines))

    # --- the engine ---
    def wants(self, call):
        return call.name == CONTROL

    def enter(self, call):
        a = call.args
        op = a[0] & 0xFFFFFFFF
        if op == control.VIEW_INFO:
            return self._give(call, f"{os.getpid()}\n{self.view_id}\n{self.view_name}\n".encode())
        if op == control.GET_VIEWNAME:
            return self._give(call, self.view_name.encode())
        if op == control.SET_VIEWNAME:
            self.view_name = call.read_string(1, 256).decode(errors="replace")
            return Skip(0)
        if op == control.LIST_SERVICES:
            return self._give(call, self.listing().encode())
        if op == control.LIST_ENGINES:
            return self._give(call, self.engine_listing().encode())
        try:
            if op == control.ADD_SERVICE:
                self.add_service(call.read_string(1).decode(errors="replace"), bool(a[2] & control.PERMANENT),
                                 os.fsdecode(core.proc_link(call.tid) or b"/"))
            elif op == control.DEL_SERVICE:
                self.del_service(call.read_string(1).decode(errors="replace"))
            elif op == control.ATTACH:
                self.attach(call.tid, int(core.signed32(a[1])))
            elif op == control.FSALIAS:
                alias = call.read_string(1, 256).decode(errors="replace")
                self.fsalias(alias, call.read_string(2, 256).decode(errors="replace") if a[2] else None)
            else:
                return Skip(-errno.EINVAL)
        except ServiceError as exc:
            _log().info("%s", exc.strerror)
            if a[3] and a[4]:
                msg = exc.strerror.encode()[:max(0, int(a[4]) - 1)] + b"\0"
                call.write_mem(a[3], msg)
            return Skip(-exc.errno)
        return Skip(0)

    @staticmethod
    def _give(call, data):
        """Copy data to (args[1], args[2]) as far as it fits; the result is its size."""
        buf, size = call.args[1], call.args[2]
        if buf and size:
            call.write_mem(buf, data[:size])
        return Skip(len(data))
