"""pytest plugin: sandboxed test sessions, and a fresh copy-on-write layer per test.

Registered with the ``pytest11`` entry point (or ``-p umview.pytest_plugin``)
and off unless asked: loading it adds the options and the marker below and
nothing else (it imports no more than pytest has already imported).

``pytest --umview-sandbox[=PRESET]``
    The session runs in ``umview --sandbox[=PRESET]``: outside a view, the
    plugin runs the same command (the interpreter with the arguments this
    process was started with, ``sys.orig_argv``; ``python -m pytest ARGS``
    when pytest was started from another program) under umview, in a fork of
    this process (the same interpreter and sys.path), and returns its status. Inside a view it does nothing more (the
    control channel says where it runs). At the end a line says what the
    sandbox did: ``umview: sandbox of /, no network: N changes outside the
    sandbox's /tmp, thrown away``. A bare ``--umview-sandbox`` before a test
    path takes the default preset (``pytest --umview-sandbox tests/``).

``@pytest.mark.umview(cow="/", net=False, layer="per-test", fail_outside_tmp=None)``
    In a view (a session run with --umview-sandbox, or under umview), the
    test gets a fresh copy-on-write layer of ``cow`` for its setup, call and
    teardown: a ``viewfs,mount=LAYER:COW:cow,fresh`` service added through
    the control channel before it and removed after it, in a view of this
    pytest process's own (nested in the session's, so that xdist workers do
    not meet). ``fresh``: the layer starts from what lay under the session's
    cow layer, so a marked test sees neither what other tests wrote nor what
    the session wrote outside /tmp. pytest's temporary directories
    (tmp_path) and, in a sandbox, /tmp stay outside the layer. ``net=False``:
    a ``vnet,null`` service too (no network); ``net=True`` keeps what the
    session has (in a sandbox without ``=net``: none). ``layer=None``: no
    layer (only ``net``). Outside any view a marked test is skipped, with
    the reason: run pytest with --umview-sandbox.

``umview_changes`` (fixture)
    A callable: ``umview_changes()`` returns what the test changed so far in
    its layer (``umview.modules.viewfs.layerdiff.changes``: created, modified, deleted,
    renamed). The layer is taken off while it is read and put back. A test
    that asks for it gets a layer as if marked. After the test the changes
    are in the report (``user_properties``: ``umview_changes``) and listed in
    the terminal summary.

``--umview-fail-outside-tmp`` (or the marker's ``fail_outside_tmp=True``)
    A test whose layer holds changes outside its tmp_path and the temporary
    directory fails (an error at teardown) with the list of paths.
"""
import os
import sys

import pytest

PRESETS = ("default", "net")
MARKER = ("umview(cow='/', net=False, layer='per-test', fail_outside_tmp=None): run the test in a fresh "
          "copy-on-write layer of cow (umview), without network unless net=True; needs a view: "
          "pytest --umview-sandbox")
NEEDS_VIEW = ("needs a umview view for its fresh layer: run pytest with --umview-sandbox "
              "(or under umview --sandbox)")
LAYER_VALUES = ("per-test", None)


def pytest_addoption(parser):
    group = parser.getgroup("umview", "umview: sandboxed tests")
    group.addoption("--umview-sandbox", nargs="?", const="default", default=None, metavar="PRESET",
                    help="run the session in umview --sandbox (a copy-on-write view of / thrown away at the "
                    "end, a private /tmp, no network); PRESET net keeps the network")
    group.addoption("--umview-fail-outside-tmp", action="store_true", default=False,
                    help="a test with a umview layer fails if it changed files outside its tmp_path and "
                    "the temporary directory")


def pytest_load_initial_conftests(early_config, parser, args):
    if "--umview-sandbox" in args:
        from umview.cli import bare_preset  # lazy: only a session that asks pays

        args[:] = bare_preset(args, "--umview-sandbox", PRESETS)


def pytest_configure(config):
    config.addinivalue_line("markers", MARKER)


def pytest_unconfigure(config):
    # an interrupted test's layer (its services go with this process's view)
    if _VIEW.layer is not None:
        import shutil

        shutil.rmtree(_VIEW.layer[0], ignore_errors=True)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    preset = config.getoption("umview_sandbox", None)
    if preset is None or config.option.help or config.option.version:
        return None
    if preset not in PRESETS:
        raise pytest.UsageError(f"--umview-sandbox={preset}: unknown preset (known: {', '.join(PRESETS)})")
    from umview import control  # lazy: only a session that asks pays

    if control.in_view():
        return None  # run here: the sandbox (or the view the user made) is this one
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        capman.suspend_global_capture(in_=True)  # the view's pytest writes to the terminal itself
    return Sandboxed(preset).run(_command(config))


def _command(config):
    """The command that started this pytest: sys.orig_argv when pytest got
    its arguments (python -m pytest ARGS, the pytest script, a launcher that
    passes them on), else python -m pytest ARGS."""
    args = list(config.invocation_params.args)
    orig = list(getattr(sys, "orig_argv", ()))
    if orig and orig[len(orig) - len(args):] == args:
        return [sys.executable, *orig[1:]]
    return [sys.executable, "-m", "pytest", *args]


def _session_dirs():
    """What the session's python needs under /tmp, which the sandbox's own
    /tmp would hide: its prefix (a virtualenv), its executable's directory
    and its import path, and where its modules came from (an editable
    install's source tree is no entry of the path)."""
    dirs = [sys.prefix, os.path.dirname(sys.executable)] + [p for p in sys.path if p and os.path.isdir(p)]
    dirs += [os.path.dirname(f) for f in (getattr(m, "__file__", None) for m in list(sys.modules.values()))
             if isinstance(f, str) and f.startswith("/tmp/")]
    out = []
    for d in sorted(dirs, key=len):
        real = os.path.realpath(d)
        if real.startswith("/tmp/") and not any(real == o or real.startswith(o + "/") for o in out):
            out.append(real)
    return out


class Sandboxed:
    """The session run in umview --sandbox by a child of this process (a
    fork: the same interpreter, modules and sys.path; umview's main ends its
    process as the command ended), with the layer kept in a directory of
    ours until its changes are counted."""

    def __init__(self, preset):
        self.preset = preset

    def run(self, command):
        import shutil
        import tempfile

        from umview.modules.viewfs import layerdiff

        parent = tempfile.mkdtemp(prefix="umview-pytest-")
        layer = os.path.join(parent, "layer")
        try:
            keep = [a for d in _session_dirs() for a in ("--sandbox-keep", d)]
            status = self._monitor([f"--sandbox={self.preset}", "--keep-layer", layer, *keep, "--", *command])
            try:
                found = layerdiff.changes(layer)
            except OSError as exc:
                note = f"the layer could not be read ({exc.strerror})"
            else:
                n = sum(len(layerdiff.top(found[k])) for k in layerdiff.KINDS)
                note = f"{n} change{'s' if n != 1 else ''} outside the sandbox's /tmp, thrown away"
            net = "the host's network" if self.preset == "net" else "no network"
            print(f"umview: sandbox of /, {net}: {note}", flush=True)
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code
        finally:
            shutil.rmtree(parent, ignore_errors=True)

    @staticmethod
    def _monitor(argv):
        """Run umview with argv in a child; its wait status. Meanwhile this
        process ignores the terminal's SIGINT and SIGQUIT, as system(3)
        does: the view's pytest gets them and ends as it would."""
        import signal

        sys.stdout.flush()
        sys.stderr.flush()
        old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGQUIT)}
        try:
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    for sig, handler in old.items():
                        signal.signal(sig, handler)
                    from umview import cli

                    code = cli.main(argv)
                finally:
                    os._exit(code if isinstance(code, int) else 1)
            return os.waitpid(pid, 0)[1]
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)


# --- per-test layers ---

class OwnView:
    """This process's own view (nested in the session's) and the services
    of the running test."""

    def __init__(self):
        self.nested = False
        self.services = []  # names added for the running test, oldest first
        self.layer = None   # (directory, target) of the running test's layer
        self.spec = None

    def enter(self, item, cow, net, keep):
        import tempfile

        from umview import control

        if not self.nested:
            control.nest({"modules": [], "viewname": "", "engines": [], "trace": []})
            self.nested = True
        if cow is not None:
            cow = os.path.normpath(os.fsdecode(cow))
            if not cow.startswith("/") or any(c in cow for c in ":,;"):
                pytest.fail(f"umview marker: cow={cow!r} wants an absolute path without : , ;", pytrace=False)
            layer = tempfile.mkdtemp(prefix="umview-test-layer-")
            spec = f"viewfs,mount={layer}:{cow}:cow,fresh"
            kept = [k for k in keep if k == cow or k.startswith(cow.rstrip("/") + "/")]
            if kept:
                spec += ",except=" + ":".join(kept)
            self.layer, self.spec = (layer, cow), spec  # (removed by leave, also if the add fails)
            self._add(spec, "viewfs")
        if not net:
            self._add("vnet,null", "vnet")

    def _add(self, spec, name):
        from umview import control

        try:
            control.add_service(spec)
        except OSError as exc:
            self.leave()
            pytest.fail(f"umview: cannot add {spec}: {exc.strerror}", pytrace=False)
        self.services.append(name)

    def changes(self):
        """What the running test changed in its layer so far: the layer is
        taken off while it is read (inside it, the tree below it cannot be
        named), then put back."""
        from umview import control
        from umview.modules.viewfs import layerdiff

        if self.layer is None:
            return None
        control.del_service("viewfs")
        try:
            return layerdiff.changes(self.layer[0], self.layer[1], self.layer[1])
        finally:
            control.add_service(self.spec)

    def leave(self):
        """Remove the test's services, newest first; the changes of its
        layer (or None), the layer removed."""
        import shutil

        from umview import control
        from umview.modules.viewfs import layerdiff

        errors = []
        for name in reversed(self.services):
            try:
                control.del_service(name)
            except OSError as exc:
                errors.append(f"{name}: {exc.strerror}")
        self.services = []
        found = None
        if self.layer is not None:
            layer, target = self.layer
            self.layer = self.spec = None
            try:
                found = layerdiff.changes(layer, target, target)
            finally:
                shutil.rmtree(layer, ignore_errors=True)
        if errors:
            raise RuntimeError("umview: could not remove the test's services: " + "; ".join(errors))
        return found


_VIEW = OwnView()
_STATE = {"in_view": None}
_KEY = pytest.StashKey()


def _in_view():
    if _STATE["in_view"] is None:
        from umview import control

        _STATE["in_view"] = control.in_view()
    return _STATE["in_view"]


def _settings(item):
    """(cow, net, fail_outside_tmp) for a test that gets a umview layer or
    network setting, or None."""
    marker = item.get_closest_marker("umview")
    if marker is None and "umview_changes" not in getattr(item, "fixturenames", ()):
        return None
    kw = dict(marker.kwargs) if marker is not None else {}
    if marker is not None and marker.args:
        pytest.fail("the umview marker takes keyword arguments only", pytrace=False)
    unknown = set(kw) - {"cow", "net", "layer", "fail_outside_tmp"}
    if unknown:
        pytest.fail(f"umview marker: unknown argument(s) {', '.join(sorted(unknown))} "
                    "(known: cow, net, layer, fail_outside_tmp)", pytrace=False)
    layer = kw.get("layer", "per-test")
    if layer not in LAYER_VALUES:
        pytest.fail(f"umview marker: layer={layer!r} (known: 'per-test', None)", pytrace=False)
    cow = kw.get("cow", "/") if layer is not None else None
    fail = kw.get("fail_outside_tmp")
    if fail is None:
        fail = item.config.getoption("umview_fail_outside_tmp", False)
    return cow, bool(kw.get("net", False)), bool(fail)


def _kept(config):
    """Paths a test's layer leaves to the session: pytest's temporary
    directories (tmp_path)."""
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return []
    return [os.path.realpath(str(factory.getbasetemp()))]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    settings = _settings(item)
    if settings is None:
        return
    if not _in_view():
        pytest.skip(NEEDS_VIEW)
    cow, net, fail = settings
    _VIEW.enter(item, cow, net, _kept(item.config))
    item.stash[_KEY] = (cow, fail)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    if _KEY not in item.stash:
        return (yield)
    try:
        result = yield  # the fixtures' finalizers run in the layer too
    finally:
        cow, fail = item.stash[_KEY]
        del item.stash[_KEY]
        found = _VIEW.leave()  # also when a finalizer failed: the next test starts clean
    if found is None:
        return result
    item.user_properties.append(("umview_changes", found))
    if fail:
        allowed = [os.path.realpath(p) for p in _tmp_dirs(item)]
        outside = [e for k in ("created", "modified", "deleted") for e in found[k]
                   if not _under(e["path"], allowed)]
        outside += [e for e in found["renamed"] if not (_under(e["from"], allowed) and _under(e["to"], allowed))]
        if outside:
            from umview.modules.viewfs import layerdiff

            lines = [layerdiff.describe(k, e) for k in layerdiff.KINDS for e in found[k] if e in outside]
            pytest.fail("umview: the test changed files outside its tmp_path:\n  " + "\n  ".join(lines),
                        pytrace=False)
    return result


def _tmp_dirs(item):
    import tempfile

    dirs = [tempfile.gettempdir()]
    factory = getattr(item.config, "_tmp_path_factory", None)
    if factory is not None:
        dirs.append(str(factory.getbasetemp()))
    return dirs


def _under(path, dirs):
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


@pytest.fixture
def umview_changes(request):
    """A callable that returns what the test changed so far in its umview
    layer (umview.modules.viewfs.layerdiff.changes); the test gets a layer as if marked
    with @pytest.mark.umview."""
    def changes():
        found = _VIEW.changes()
        if found is None:
            pytest.fail("umview_changes: this test has no umview layer (marker layer=None)", pytrace=False)
        return found
    return changes


# --- the report ---

_REPORTED = []


def pytest_runtest_logreport(report):
    if report.when != "teardown":
        return
    for name, value in getattr(report, "user_properties", ()):
        if name == "umview_changes":
            _REPORTED.append((report.nodeid, value))


def pytest_terminal_summary(terminalreporter):
    if not _REPORTED:
        return
    from umview.modules.viewfs import layerdiff

    terminalreporter.section("umview: what each test changed in its layer")
    for nodeid, found in _REPORTED:
        lines = [layerdiff.describe(k, e) for k in layerdiff.KINDS for e in found[k]]
        terminalreporter.write_line(f"{nodeid}: {len(lines)} change{'s' if len(lines) != 1 else ''}")
        for line in lines:
            terminalreporter.write_line(f"  {line}")
