"""CPython's own regression tests for the process, file and signal APIs,
natively and under umview: every test that passes natively must pass under
umview (a failure that is also there natively is fine), and none may be
skipped under umview that runs natively.

About 1,200 test cases in 7 files; natively ~1 minute on 2 cores, under
umview ~1 minute without an engine and ~1.5 minutes with an engine that
sends every path call through Python.
"""
import os
import sys
import xml.etree.ElementTree as ET

import pytest

from conftest import engine_opts, run_session, umview_argv

pytestmark = pytest.mark.slow

TESTS = ["test_os", "test_posix", "test_subprocess", "test_signal", "test_threading",
         "test_fileio", "test_stat"]
RUN_TIMEOUT = 400  # seconds for one run of all files
FILE_TIMEOUT = 240  # regrtest dumps the tracebacks and stops past this, per file


def regrtest(prefix, workdir, seen_as=None, layer=None):
    """Run the regression tests (serially, one process) under `prefix`;
    (exit code, {test case: "passed" | "skipped" | "failed"}, log). With
    seen_as, the tests work in the directory the view shows at that path
    (their cwd and TMPDIR), which is workdir for real. With layer (a cow
    view), what they write lands in that layer."""
    workdir.mkdir(exist_ok=True)
    xml = workdir / "results.xml" if layer is None else layer / str(workdir).lstrip("/") / "results.xml"
    inside = str(seen_as or workdir)
    argv = [*prefix, "bash", "-c", 'cd "$1" && shift && exec "$@"', "regrtest", inside,
            sys.executable, "-m", "test", "--timeout", str(FILE_TIMEOUT),
            "--junit-xml", os.path.join(inside, "results.xml"), *TESTS]
    env = dict(os.environ, TMPDIR=inside)
    returncode, log = run_session(argv, f"{' '.join(prefix) or 'native'} run", RUN_TIMEOUT, env)
    log = log.decode(errors="replace")
    if not xml.exists():
        pytest.fail(f"no results from {' '.join(argv)}:\n{log[-3000:]}")
    return returncode, outcomes(xml), log


def outcomes(xml):
    results = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            results[case.get("name")] = "failed"
        elif case.find("skipped") is not None:
            results[case.get("name")] = "skipped"
        else:
            results[case.get("name")] = "passed"
    return results


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    try:
        import test.libregrtest  # noqa: F401
        import test.test_os  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"this Python has no regression test suite ({exc})")
    return regrtest([], tmp_path_factory.mktemp("cpython") / "native")


# unreal (-p unreal, the tests under /unreal) is the same redirecting mount as
# viewfs's move mount, registered twice: left out to keep CI under 25 minutes;
# so is PassPathsEverywhere (every path call of the tests handed to Python
# and passed on, 90 s): viewfs and cow-root hand Python the tests' own paths
# and change them, and test_robustness passes bad paths through it
@pytest.mark.parametrize("engine", ["no-engine", "viewfs", "cow-root"])
def test_cpython_regression_tests_pass_under_umview_as_natively(native, engine, tmp_path):
    """no-engine: the tests in a real directory.
    viewfs: the tests working (cwd, TMPDIR) inside a path module's mount.
    cow-root: in a copy-on-write view of the whole file system."""
    native_rc, native_results, native_log = native
    workdir, seen_as, layer = tmp_path / "umview", None, None
    if engine == "no-engine":
        opts = []
    elif engine == "viewfs":
        workdir.mkdir()
        (tmp_path / "mnt").mkdir()
        opts, seen_as = ["-p", f"viewfs,mount={workdir}:{tmp_path / 'mnt'}"], tmp_path / "mnt"
    elif engine == "cow-root":
        layer = tmp_path / "layer"
        opts = ["-p", f"viewfs,mount={layer}:/:cow"]
    else:
        opts = engine_opts(engine)
    rc, results, log = regrtest(umview_argv(*opts, "--"), workdir, seen_as, layer)

    assert len(native_results) > 1000, native_log[-3000:]
    missing = sorted(set(native_results) - set(results))
    assert not missing, f"test cases that never ran under umview: {missing[:20]}\n{log[-3000:]}"
    worse = sorted(name for name, outcome in results.items()
                   if outcome != native_results.get(name) and native_results.get(name) == "passed")
    assert not worse, ("pass natively, not under umview: "
                       + ", ".join(f"{n} ({results[n]})" for n in worse) + "\n" + log[-5000:])
    if native_rc == 0:
        assert rc == 0, log[-3000:]
