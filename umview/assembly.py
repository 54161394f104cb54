"""The monitor's assembly: the one place in umview/ that wires modules in.

Built-in modules are named here; third-party ones register under the
``umview.modules`` entry-point group (``name = "package.module:Class"``). A
module that fails to import is an error the user sees, never skipped.
"""
import importlib
import sys

from umview.control import parse_spec
from umview.engine import Engine

# The engines of the modules (umview.cwd, umview.service and the syscall table
# they stand on) are imported inside the functions that load modules: that
# costs 30-50 ms, which a view with no module never pays.

BUILTIN = {
    "unreal": "umview.modules.unreal:Unreal",
    "viewfs": "umview.modules.viewfs:Viewfs",
    "trace": "umview.modules.trace:Trace",
    "vnet": "umview.modules.vnet:Vnet",
    "fs": "umview.modules.fs:Fs",
    "guard": "umview.modules.guard:GuardModule",
    "uname": "umview.modules.uname:Uname",
    "time": "umview.modules.clock:TimeModule",
    "fakeroot": "umview.modules.fakeroot:Fakeroot",
    "qemu": "umview.modules.qemu:Qemu",
}


def _entry_points():
    from importlib.metadata import entry_points  # lazy: 20 ms, only to look modules up

    return {ep.name: ep.value for ep in entry_points(group="umview.modules")}


def module_class(name):
    where = BUILTIN.get(name)
    if where is None:
        where = _entry_points().get(name)
    if where is None:
        known = sorted(set(BUILTIN) | set(_entry_points()))
        raise ValueError(f"no module named {name!r} (known: {', '.join(known)})")
    mod_name, _, cls_name = where.partition(":")
    try:
        module = importlib.import_module(mod_name)
    except Exception as exc:
        raise ImportError(f"module {name!r} ({where}) failed to import: {exc!r}") from exc
    return getattr(module, cls_name)


def load_modules(specs, present=(), cwd=None):
    """Instantiate the modules of -p specs (or (name, options) pairs); return
    (modules, engines in epoch order). present: the engines loaded before them (their nested view); cwd:
    the directory relative paths in options are relative to (umview's own
    if None)."""
    from umview.bypass import PathBypass
    from umview.cwd import CwdTracker  # lazy: see the note at the top
    from umview.service import RedirectMount

    modules, engines = [], []
    for spec in specs:
        name, options = parse_spec(spec) if isinstance(spec, str) else spec
        module = module_class(name)(options)
        module.older = tuple(present) + tuple(engines)
        if cwd is not None:
            module.cwd = cwd
        modules.append(module)
        engines.extend(module.engines())
    if any(isinstance(e, RedirectMount) or e.mounts_later for e in engines):
        # newest of the path engines: it sees each call as the process made it
        engines.append(CwdTracker())
        # and the calls that would go around every path engine
        engines.append(PathBypass())
    return modules, engines


def load_service(spec, present, cwd=None, own=None):
    """um_add_service: the module of a -p spec (or a (name, options) pair)
    and its engines, plus the cwd tracker if its engines need one and the
    view has none of its own (own: its engines, default present; a nested
    view's tracker replaces its outer views' one, which knows only their
    mounts)."""
    from umview.bypass import PathBypass
    from umview.cwd import CwdTracker

    modules, engines = load_modules([spec], present, cwd)
    mine = present if own is None else own
    if any(isinstance(e, CwdTracker) for e in mine):
        engines = [e for e in engines if not isinstance(e, CwdTracker)]
    if any(isinstance(e, PathBypass) for e in present):
        engines = [e for e in engines if not isinstance(e, PathBypass)]
    return modules[0], engines


class Reserve(Engine):
    """``umview --services``: an engine that claims, from the start, what the
    engines of every known module may claim, and wants no call. A service
    added later then finds its calls trapped already, instead of stacking a
    filter on every running process; the price is a trap on every path call
    (docs/services.md)."""

    name = "reserve"
    description = "the calls modules loaded at run time may claim (--services)"
    mounts_later = True
    _CLAIMS = ("syscalls", "path_syscalls", "fd_syscalls", "vcwd_syscalls", "families", "unix_addr_syscalls",
               "sockname_syscalls")

    def __init__(self):
        from umview.cwd import CwdTracker  # lazy, as in load_modules

        engines = [CwdTracker()]
        for name in sorted(set(BUILTIN) | set(_entry_points())):
            try:
                engines += module_class(name)({}).engines()
            except Exception:  # noqa: BLE001 - a module that needs options claims as it will
                continue
        for claim in self._CLAIMS:
            setattr(self, claim, frozenset(x for e in engines for x in getattr(e, claim)))

    def wants(self, call):
        return False


def attach(modules, view):
    """Give the modules their view (umview.views.View), for mounts made from inside it."""
    for m in modules:
        m.view = view
        m.start()


def close(modules):
    for m in modules:
        try:
            m.close()
        except Exception as exc:  # noqa: BLE001 - cleanup goes on for the others
            print(f"umview: module {m.name}: cleanup failed: {exc}", file=sys.stderr)


def describe():
    """Lines 'name: description' for every known module."""
    lines = []
    for name in sorted(set(BUILTIN) | set(_entry_points())):
        try:
            cls = module_class(name)
            lines.append(f"{name:10} {cls.description}" + (f"\n{'':10} options: {cls.options_help}"
                                                           if cls.options_help else ""))
        except Exception as exc:  # noqa: BLE001 - listing must show the broken one
            lines.append(f"{name:10} (cannot load: {exc})")
    return lines
