"""The monitor's assembly: the one place in umview/ that wires modules in.

Built-in modules are named here; third-party ones register under the
``umview.modules`` entry-point group (``name = "package.module:Class"``). A
module that fails to import is an error the user sees, never skipped.
"""
import importlib
import sys

BUILTIN = {
    "unreal": "umview.modules.unreal:Unreal",
    "viewfs": "umview.modules.viewfs:Viewfs",
    "trace": "umview.modules.trace:Trace",
    "vnet": "umview.modules.vnet:Vnet",
}


def _entry_points():
    from importlib.metadata import entry_points

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
    """Instantiate the modules of -p specs; return (modules, engines in epoch
    order). present: the engines loaded before them (their nested view); cwd:
    the directory relative paths in options are relative to (umview's own
    if None)."""
    from umview.cwd import CwdTracker
    from umview.service import RedirectMount, parse_spec

    modules, engines = [], []
    for spec in specs:
        name, options = parse_spec(spec)
        module = module_class(name)(options)
        module.older = tuple(present) + tuple(engines)
        if cwd is not None:
            module.cwd = cwd
        modules.append(module)
        engines.extend(module.engines())
    if any(isinstance(e, RedirectMount) or e.mounts_later for e in engines):
        # newest of the path engines: it sees each call as the process made it
        engines.append(CwdTracker())
    return modules, engines


def load_service(spec, present, cwd=None):
    """um_add_service: the module of a -p spec and its engines, plus the cwd
    tracker if its engines need one and the view (present) has none."""
    from umview.cwd import CwdTracker

    modules, engines = load_modules([spec], present, cwd)
    if any(isinstance(e, CwdTracker) for e in present):
        engines = [e for e in engines if not isinstance(e, CwdTracker)]
    return modules[0], engines


class Reserve:
    """``umview --services``: an engine that claims, from the start, what the
    engines of every known module may claim, and wants no call. The filter is
    fixed when the first process runs (stacking a filter on each running
    process is not done), so this is what lets um_add_service load modules
    later; the price is a trap on every path call (docs/services.md)."""

    def __new__(cls):
        from umview.cwd import CwdTracker
        from umview.engine import Engine

        class _Reserve(Engine):
            name = "reserve"
            description = "the calls modules loaded at run time may claim (--services)"
            mounts_later = True

            def wants(self, call):
                return False

        r = _Reserve()
        sets = {"syscalls": set(), "path_syscalls": set(), "fd_syscalls": set(), "vcwd_syscalls": set(),
                "families": set(), "unix_addr_syscalls": set()}
        engines = [CwdTracker()]
        for name in sorted(set(BUILTIN) | set(_entry_points())):
            try:
                engines += module_class(name)({}).engines()
            except Exception:  # noqa: BLE001 - a module that needs options claims as it will
                continue
        for e in engines:
            for k, v in sets.items():
                v.update(getattr(e, k))
        for k, v in sets.items():
            setattr(r, k, frozenset(v))
        return r


def attach(modules, monitor):
    """Give the modules the running view, for mounts made from inside it."""
    for m in modules:
        m.view = monitor
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
