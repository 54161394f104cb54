"""The layout shows the architecture: dependencies point one way,
arch <- umview primitives <- syscalls <- umview machinery <- modules <- assembly,
and there is no import cycle (read from the source, nothing imported)."""
import ast
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = {"umview": "umview", "umview.arch": "arch", "umview.syscalls": "syscalls",
            "umview.modules": "modules"}
# mechanisms that know nothing of the syscall table, modules or the monitor
PRIMITIVES = {"umview", "umview.core", "umview.engine", "umview.pathwalk", "umview.fdpass", "umview.openflags",
              "umview.procs",
              "umview.control"}
# the one place that wires modules in, and the front ends that call it: the
# command line (umview-image's too), the pytest plugin that runs it, and the
# man pages and completion made from the command line's parsers
ASSEMBLY = {"umview.assembly", "umview.cli", "umview.pytest_plugin", "umview.manuals", "umview.imagecmd"}


def sources():
    for package, folder in PACKAGES.items():
        for dirpath, _, files in os.walk(os.path.join(REPO, folder)):
            for f in files:
                if f.endswith(".py"):
                    rel = os.path.relpath(os.path.join(dirpath, f), os.path.join(REPO, folder))
                    parts = rel[:-3].split(os.sep)
                    if parts[-1] == "__init__":
                        parts = parts[:-1]
                    name = ".".join([package, *parts])
                    if package == "umview" and name.split(".")[1:2] in (["arch"], ["syscalls"], ["modules"]):
                        continue
                    yield name, os.path.join(dirpath, f), f == "__init__.py"


def imports(name, path, is_package):
    """(imported module, at module level?) for each umview import of a file."""
    tree = ast.parse(open(path).read(), path)
    top = set(id(n) for n in tree.body) | {id(n) for stmt in tree.body if isinstance(stmt, ast.Try)
                                           for n in stmt.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            mods = [mod] + [f"{mod}.{a.name}" for a in node.names]
        else:
            continue
        for m in mods:
            if m == "umview" or m.startswith("umview."):
                out.append((m, id(node) in top))
    return out


def graph():
    files = {name: (path, pkg) for name, path, pkg in sources()}
    known = set(files)
    edges = {}
    for name, (path, pkg) in files.items():
        deps = set()
        for m, at_top in imports(name, path, pkg):
            # "from umview import core" names the module umview.core
            while m not in known and "." in m:
                m = m.rsplit(".", 1)[0]
            # (the package umview itself runs before any of its modules: no edge)
            if m in known and m not in (name, "umview"):
                deps.add((m, at_top))
        edges[name] = deps
    return edges


def layer(name):
    if name.startswith("umview.arch"):
        return 0
    if name in PRIMITIVES:
        return 1
    if name.startswith("umview.syscalls"):
        return 2
    if name.startswith("umview.modules"):
        return 4
    if name in ASSEMBLY:
        return 5
    return 3  # the machinery built on the table: dispatcher, cwd tracker, services


def test_dependencies_point_one_way():
    wrong = sorted(f"{a} ({layer(a)}) imports {b} ({layer(b)})"
                   for a, deps in graph().items() for b, _ in deps
                   if layer(b) > layer(a) and not (a == "umview" and b in ("umview.monitor", "umview.syscalls")))
    assert not wrong, wrong


def test_only_the_assembly_imports_modules():
    wrong = sorted(f"{a} imports {b}" for a, deps in graph().items() for b, _ in deps
                   if b.startswith("umview.modules") and not a.startswith("umview.modules")
                   and a not in ASSEMBLY)
    assert not wrong, wrong


def test_no_import_cycle():
    # a package that hands out a part of its own (umview.modules.viewfs's
    # lazy Viewfs) does not depend on it: that edge is not a cycle's
    edges = {a: {b for b, _ in deps if not b.startswith(a + ".")} for a, deps in graph().items()}
    state = {}

    def visit(n, stack):
        state[n] = 1
        for m in edges.get(n, ()):
            if state.get(m) == 1:
                raise AssertionError(" -> ".join(stack[stack.index(m):] + [m]) if m in stack else m)
            if not state.get(m):
                visit(m, stack + [m])
        state[n] = 2

    for n in edges:
        if not state.get(n):
            visit(n, [n])


def test_every_package_is_installed():
    """A package folder pyproject.toml does not list is left out of a
    regular (not editable) install: its module fails to import there."""
    import tomllib
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = {name for name, _, is_package in sources() if is_package}
    assert found - listed == set(), f"add to [tool.setuptools] packages: {sorted(found - listed)}"
