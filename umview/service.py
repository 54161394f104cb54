"""Services: modules loaded by name, and the mounts they serve.

A module is a Python class registered by name (`umview.assembly.BUILTIN`, plus
the ``umview.modules`` entry-point group for third parties), loaded with
``umview -p NAME[,OPTION[=VALUE]...]``. Loading it gives the engines it
registers, each with its own epoch: a module that mounts twice registers two
engines, and the later one is the newer.

A *redirecting* module maps a path inside its mount to a real path and lets
the kernel do the work, so the files it serves are real and I/O on them never
stops. It implements ``real_path(rel)``; ``RedirectMount`` is the engine that
rewrites every path argument under the mount point.
"""
import errno

from umview.engine import CONTINUE, Engine


class Module:
    """Base class of modules. ``options`` is the dict parsed from the -p spec
    (``{"cow": True, "except": "/a:/b"}``); unknown options must be refused
    with ``ValueError`` so that a typo is an error the user sees."""

    name = "module"
    description = ""
    options_help = ""

    def __init__(self, options):
        self.options = dict(options)
        self.view = None  # the Monitor, once the view runs (add_engine/remove_engine)

    def engines(self):
        """The engines this module registers at load, oldest first."""
        return []

    def check_options(self, allowed):
        unknown = sorted(set(self.options) - set(allowed))
        if unknown:
            raise ValueError(f"module {self.name}: unknown option {', '.join(unknown)}"
                             + (f" (known: {self.options_help})" if self.options_help else ""))


class RedirectMount(Engine):
    """One mount of a redirecting module: every path argument that lies at or
    under ``target`` is rewritten to ``real_path(rel)``, where ``rel`` is the
    part below the target (b"" for the target itself, else b"a/b"), and the
    call goes on to the older engines and the kernel.

    Paths are resolved lexically against the thread's cwd or the call's dirfd
    (see Call.paths). An empty path with AT_EMPTY_PATH names an open file and
    is left alone.
    """

    def __init__(self, target, real_path, name="mount", path_syscalls=None):
        from umview.monitor import PATH_SYSCALLS

        target = target.encode() if isinstance(target, str) else target
        if not target.startswith(b"/"):
            raise ValueError(f"mount point {target!r} is not an absolute path")
        self.target = target.rstrip(b"/") or b"/"
        self.prefixes = (self.target,)
        self.real_path = real_path
        self.name = name
        self.path_syscalls = frozenset(PATH_SYSCALLS if path_syscalls is None else path_syscalls)

    def relative(self, path):
        """The part of an absolute path below the mount point, or None."""
        t = self.target
        if t == b"/":
            return path.lstrip(b"/")
        if path == t:
            return b""
        if path.startswith(t + b"/"):
            return path[len(t) + 1:]
        return None

    def enter(self, call):
        rewrites = []
        for slot, path in enumerate(call.paths()):
            if path is None:
                continue
            rel = self.relative(path)
            if rel is None:
                continue
            index = call.path_indices[slot]
            if call.read_string(index) == b"":
                continue  # AT_EMPTY_PATH: the call acts on its dirfd
            rewrites.append((index, self.real_path(rel)))
        for index, real in rewrites:
            if len(real) >= 4096:
                raise OSError(errno.ENAMETOOLONG, "path too long once redirected")
            call.set_string(index, real)
        return CONTINUE


def parse_spec(spec):
    """'viewfs,cow,except=/a:/b' -> ('viewfs', {'cow': True, 'except': '/a:/b'})."""
    name, _, rest = spec.partition(",")
    name = name.strip()
    if not name:
        raise ValueError(f"-p {spec!r}: no module name")
    options = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = item.partition("=")
        options[key] = value if eq else True
    return name, options
