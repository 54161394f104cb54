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


def _threads(pid):
    """The threads of a process (its tid alone if /proc does not list them)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return [pid]


def _caller_fd(caller, spec):
    """A (name, options) spec from a NEST request: an option fd=N names the
    caller's fd N (its stderr, or the file it opened for --trace FILE):
    the monitor takes a copy and the spec names that one."""
    name, options = spec
    options = dict(options)
    if "fd" in options:
        from umview import fdpass  # lazy: socket, struct

        try:
            options["fd"] = str(fdpass.take_fd(caller, int(options["fd"])))
        except (OSError, ValueError) as exc:
            raise ServiceError(errno.EINVAL, f"cannot log to fd {options['fd']} of process {caller}: {exc}") from None
    return (str(name), options)


def _request(call):
    """The NEST request of a control call: JSON of (args[1], args[2])."""
    import json  # lazy: only nested views need it

    size = int(call.args[2])
    if not call.args[1] or not 0 < size <= control.MAX_REQUEST:
        raise ServiceError(errno.EINVAL, "bad nested view request")
    try:
        request = json.loads(call.read_mem(call.args[1], size))
    except (OSError, ValueError) as exc:
        raise ServiceError(errno.EINVAL, f"bad nested view request: {exc}") from None
    if not isinstance(request, dict):
        raise ServiceError(errno.EINVAL, "bad nested view request")
    return request


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
    per_view = "control"  # a nested view has its own: the channel acts on the caller's view

    def __init__(self, loader=None, view_name="", engine_loader=None):
        """loader(spec, engines, cwd, own) -> (module, new engines): loads a
        module by -p spec; engines are those of the view's stack, own those
        of the view itself (see assembly), cwd the adding process's
        directory. engine_loader(spec) -> engine: umview --engine, for a
        nested view."""
        self.loader = loader
        self.engine_loader = engine_loader
        self.view_name = view_name
        self.monitor = None
        self.view = None  # its View (umview.views), set by the monitor
        self.services = []
        self.retiring = []  # services removed whose calls in flight have yet to return
        #: the directories of Monitor.anchor_roots this view added (a nested sandbox)
        self.anchors = ()
        self.aliases = {}  # alias -> the Service whose fstypes it was added to

    @property
    def view_id(self):
        return self.view.id if self.view is not None else 0

    # --- the operations, for the monitor and the tests ---
    def register(self, name, module, engines, permanent=False):
        """A module loaded at start (-p): listed, and removable like the others."""
        self.services.append(Service(name, module, engines, permanent))

    def _load(self, spec, present, own, cwd):
        """A module of the view: (name, module, engines), started."""
        if self.loader is None:
            raise ServiceError(errno.ENOSYS, "this view cannot load modules")
        try:
            name = spec[0] if isinstance(spec, tuple) else control.parse_spec(spec)[0]
            module, engines = self.loader(spec, tuple(present), cwd, own=tuple(own))
        except (ValueError, ImportError) as exc:
            raise ServiceError(errno.EINVAL, str(exc)) from None
        module.view = self.view
        try:
            module.start()  # before its engines see a call: a module that cannot start is refused
        except (ValueError, OSError) as exc:
            module.close()
            raise ServiceError(errno.EINVAL, str(exc)) from None
        return name, module, engines

    def add_service(self, spec, permanent=False, cwd=None):
        name, module, engines = self._load(spec, self.view.engines, self.view.own, cwd)
        self.monitor.add_engines(engines, self.view)
        self.services.append(Service(name, module, engines, permanent))
        _log().info("service %s added%s", name, " (permanent)" if permanent else "")

    def del_service(self, name):
        for s in reversed(self.services):
            if s.name == name:
                break
        else:
            for v in self.view.outer():
                if any(s.name == name for s in v.control.services):
                    raise ServiceError(errno.EPERM, f"{name} is a service of an outer view (view {v.id}): "
                                       "a nested view cannot remove it (umview nesting)")
            raise ServiceError(errno.ENOENT, f"no service {name!r} is loaded")
        if s.permanent:
            raise ServiceError(errno.EBUSY, f"{name} is permanent (loaded with -p)")
        if s.module.busy():
            raise ServiceError(errno.EBUSY, f"{name} has mounts in use: unmount them first")
        for e in s.engines:
            if e in self.view.own:
                self.monitor.remove_engine(e)
        for alias in [a for a, owner in self.aliases.items() if owner is s]:
            del self.aliases[alias]
        self.services.remove(s)
        # calls it took and waits to see return finish under it: it closes after
        self.retiring.append(s)
        self.monitor.after_calls(s.engines, lambda: self._retired(s))
        _log().info("service %s removed", name)

    def _retired(self, s):
        if s in self.retiring:
            self.retiring.remove(s)
            s.module.close()

    def modules(self):
        """The modules to close when the view ends: its services', and those
        of services removed whose calls are still in flight."""
        return [s.module for s in self.services + self.retiring]

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
            raise ServiceError(errno.EBUSY, f"process {pid} is already in a view of this monitor")
        if target["tracer"]:
            raise ServiceError(errno.EPERM, f"process {pid} is traced by process {target['tracer']}")
        if not me["cap_ptrace"] and not (
                {me["uid"][0]} == set(target["uid"][:3]) and {me["gid"][0]} == set(target["gid"][:3])):
            raise ServiceError(errno.EPERM, f"not allowed to trace process {pid} (another user's)")
        try:
            self.monitor.attach(pid, self.view)
        except OSError as exc:
            raise ServiceError(exc.errno, f"cannot attach process {pid}: {os.strerror(exc.errno)}") from None
        _log().info("process %d attached", pid)

    def fsalias(self, alias, fstype=None):
        if fstype is None:
            owner = self.aliases.pop(alias, None)
            if owner is None:
                raise ServiceError(errno.ENOENT, f"no filesystem alias {alias!r}")
            owner.module.fstypes.discard(alias)
            if hasattr(owner.module, "del_fsalias"):
                owner.module.del_fsalias(alias)
            return
        if alias in self.aliases or any(alias in getattr(s.module, "fstypes", ()) for s in self.services):
            raise ServiceError(errno.EEXIST, f"{alias!r} is already a filesystem type of this view")
        for s in reversed(self.services):
            if fstype in getattr(s.module, "fstypes", ()):
                s.module.fstypes.add(alias)
                if hasattr(s.module, "add_fsalias"):  # a module serving several types: which one
                    s.module.add_fsalias(alias, fstype)
                self.aliases[alias] = s
                return
        raise ServiceError(errno.ENODEV, f"no loaded service serves filesystem type {fstype!r}")

    def _stack_controls(self):
        """The control engines of this view and its outer views, outermost first."""
        return [v.control for v in reversed(self.view.outer())] + [self]

    def listing(self):
        """The services a call of this view may walk, oldest first: those of
        the outer views (flagged "outer"), then its own."""
        lines = []
        for c in self._stack_controls():
            for s in c.services:
                flags = ",".join(f for f, on in (("permanent", s.permanent), ("outer", c is not self)) if on)
                lines.append(f"{s.name}\t{s.module.description}\t{flags}\n")
        return "".join(lines)

    def engine_listing(self):
        """The engines in the order a call enters them (newest first), and
        the view each belongs to."""
        owner, where = {}, {}
        for c in self._stack_controls():
            owner.update({id(e): s.name for s in c.services for e in s.engines})
            where.update({id(e): c.view.id for e in c.view.own})
        return "".join(f"{e.epoch}\t{int(e.newest)}\t{e.name}\t{owner.get(id(e), '')}\t{where.get(id(e), 0)}\n"
                       for e in self.view.entry_order())

    # --- nested views ---
    def nest(self, caller, request, cwd=None):
        """umview run inside this view (NEST): a view nested in this one, whose
        engines are the modules and engines the request names and whose
        processes are the caller's process and its future children. The
        request: {"modules": [-p spec], "trace": [[name, options]],
        "engines": [FILE.py:CLASS with FILE absolute in the view],
        "viewname": NAME, "anchor": [directory of the view]}; a module is a
        -p spec or a [name, {option: value}] pair (a sandbox's). Calls
        rewritten into an "anchor" directory run anchored (Call.run_anchored:
        a nested sandbox's). Nothing is left behind if a module or engine
        cannot load or start (ServiceError: the message umview prints)."""
        from umview.service import RedirectMount, realize  # lazy: the syscall tables

        if self.loader is None or self.engine_loader is None:
            # not ENOSYS: that is the kernel's answer outside a view
            raise ServiceError(errno.EOPNOTSUPP, "this view cannot make nested views (it has no module loader)")
        monitor = self.monitor
        modules = []
        for spec in request.get("modules", ()):
            if isinstance(spec, list) and len(spec) == 2 and isinstance(spec[1], dict):
                spec = (str(spec[0]), {str(k): v if v is True else str(v) for k, v in spec[1].items()})
            elif not isinstance(spec, str):
                raise ServiceError(errno.EINVAL, f"bad nested view request: module {spec!r}")
            modules.append(spec)
        view = monitor.open_view(self.view)
        view.first = caller
        inner = ServiceControl(self.loader, str(request.get("viewname") or ""), self.engine_loader)
        inner.monitor, inner.view, view.control = monitor, view, inner
        engines = [inner]
        try:
            for spec in [_caller_fd(caller, t) for t in request.get("trace", ())] + modules:
                try:
                    name, module, new = inner._load(spec, [*self.view.engines, *engines], engines, cwd)
                except BaseException:
                    if isinstance(spec, tuple) and "fd" in spec[1]:
                        os.close(int(spec[1]["fd"]))  # not taken over by a module
                    raise
                inner.register(name, module, new)
                engines += new
            for spec in request.get("engines", ()):
                where, _, cls = spec.rpartition(":")
                if where.startswith("/"):
                    mounts = [e for e in (*self.view.engines, *engines) if isinstance(e, RedirectMount)]
                    spec = os.fsdecode(realize(mounts, os.fsencode(where))) + ":" + cls
                try:
                    engines.append(self.engine_loader(spec))
                except Exception as exc:  # noqa: BLE001 - as umview --engine: any failure is the user's to see
                    raise ServiceError(errno.EINVAL, f"cannot load engine: {exc}") from None
            monitor.add_engines(engines, view)
            mounts = [e for e in (*self.view.engines, *engines) if isinstance(e, RedirectMount)]
            inner.anchors = tuple(os.fsencode(os.path.normpath(realize(mounts, os.fsencode(d)))) + b"/"
                                  for d in request.get("anchor", ()) if str(d).startswith("/"))
            monitor.anchor_roots += tuple(a for a in inner.anchors if a not in monitor.anchor_roots)
            # what the outer views knew of the caller (its cwd, root, fds)
            # is in its process's record (umview.procs): it goes along
            monitor.dispatcher.join(view, _threads(caller))
        except BaseException:
            monitor.close_view(view)
            raise
        view.running = True
        _log().info("view %d nested in view %d for process %d: %s", view.id, self.view.id, caller,
                    ", ".join(s.name for s in inner.services) or "no service")
        return view

    def close(self):
        """The view is over: its modules close (nested views: Monitor.close_view)."""
        if self.anchors and self.monitor is not None:
            self.monitor.anchor_roots = tuple(a for a in self.monitor.anchor_roots if a not in self.anchors)
            self.anchors = ()
        for s in self.services + self.retiring:
            try:
                s.module.close()
            except Exception:  # noqa: BLE001 - cleanup goes on for the others
                _log().exception("module %s: cleanup failed", s.name)
        self.services = []
        self.retiring = []

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
            elif op == control.NEST:
                self.nest(call.tid, _request(call), os.fsdecode(core.proc_link(call.tid) or b"/"))
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
