"""The pytest plugin (umview.pytest_plugin) on a sample project written into
a temporary directory, whose tests write to /etc and $HOME and try the
network: run with --umview-sandbox (as root and as nobody) the real files
stay byte-identical, each marked test gets a fresh layer (test B does not
see what test A wrote) and the changes are reported per test. The same
sample code run natively does change the files (victims in /var/tmp stand
for /etc and $HOME there), so the tests cannot pass vacuously."""
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from conftest import as_user, entry_for, need_user

USERS = ["root", "nobody"]
NAME = "umview-plugin-sample"

SAMPLE_OPS = f'''
import errno, os, socket
ETC = os.environ.get("SAMPLE_ETC", "/etc")
NAME = "{NAME}"

def write_a():
    with open(os.path.join(ETC, NAME), "w") as f:
        f.write("a\\n")
    with open(os.path.join(ETC, "hosts"), "a") as f:
        f.write("# sample\\n")
    with open(os.path.join(os.path.expanduser("~"), "." + NAME), "w") as f:
        f.write("a\\n")

def sees_a():
    return os.path.exists(os.path.join(ETC, NAME)) or "# sample" in open(os.path.join(ETC, "hosts")).read()

def remove_hostname():
    os.unlink(os.path.join(ETC, "hostname"))

def network(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return "connected"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc))
'''

SAMPLE_TESTS = '''
import os
import pytest
import sample_ops


@pytest.mark.umview
def test_a_writes_etc_and_home(umview_changes):
    sample_ops.write_a()
    found = umview_changes()
    print("A-SEES", sorted(e["path"] for k in ("created", "modified") for e in found[k]))


@pytest.mark.umview
def test_b_does_not_see_what_a_wrote():
    assert not sample_ops.sees_a()
    sample_ops.remove_hostname()


@pytest.mark.umview
def test_c_tries_the_network():
    print("NETWORK", sample_ops.network(int(os.environ["SAMPLE_PORT"])))


@pytest.mark.umview
def test_d_writes_only_its_tmp_path(tmp_path):
    (tmp_path / "scratch").write_text("x")


def test_e_unmarked_runs_in_the_session_sandbox():
    with open(os.path.join(sample_ops.ETC, "umview-plugin-session"), "w") as f:
        f.write("session\\n")
    assert not os.environ.get("SAMPLE_FAIL")
'''


@pytest.fixture
def sample():
    """The sample project, a victim /etc and $HOME (in /var/tmp) for the
    native runs, a $HOME for nobody, a listening socket; removed after."""
    d = tempfile.mkdtemp(prefix="umview-plugin-test-", dir="/var/tmp")
    os.chmod(d, 0o755)
    project = os.path.join(d, "project")
    os.mkdir(project)
    with open(os.path.join(project, "sample_ops.py"), "w") as f:
        f.write(SAMPLE_OPS)
    with open(os.path.join(project, "test_sample.py"), "w") as f:
        f.write(SAMPLE_TESTS)
    # victims of the native runs; nobody's $HOME in a sandbox (its own is /nonexistent)
    victim = {"etc": os.path.join(d, "etc"), "home": os.path.join(d, "home"), "nobody": os.path.join(d, "nobody")}
    for v in victim.values():
        os.mkdir(v)
    for n in ("hosts", "hostname"):
        shutil.copy(os.path.join("/etc", n), victim["etc"])
    for path in [project, *victim.values()]:
        for root, dirs, files in os.walk(path):
            os.chmod(root, 0o777)
            for n in files:
                os.chmod(os.path.join(root, n), 0o666)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield {"dir": d, "project": project, "victim": victim, "port": listener.getsockname()[1]}
    finally:
        listener.close()
        shutil.rmtree(d)


def home_of(user, sample):
    return os.path.expanduser("~") if user == "root" else sample["victim"]["nobody"]


def tree_sum(*paths):
    """A checksum of names, types, modes, owners and contents under paths
    (one level below a directory: what the sample touches)."""
    h = hashlib.sha256()
    for path in paths:
        names = sorted(os.listdir(path)) if os.path.isdir(path) else [""]
        for n in names:
            p = os.path.join(path, n) if n else path
            st = os.lstat(p)
            h.update(f"{p}\0{st.st_mode}\0{st.st_uid}\0{st.st_gid}\0".encode())
            if os.path.isfile(p) and not os.path.islink(p) and st.st_size < 1 << 20:
                try:
                    with open(p, "rb") as f:
                        h.update(f.read())
                except OSError:
                    h.update(b"unreadable")
    return h.hexdigest()


def env_for(user, sample, **extra):
    env = dict(os.environ, SAMPLE_PORT=str(sample["port"]), PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    if user != "root":
        env["HOME"] = sample["victim"]["nobody"]
    env.update(extra)
    return env


def pytest_in(user, sample, *args, **extra):
    """python -m pytest ARGS on the sample project, as user; the result."""
    argv = as_user(user, entry_for(user, "pytest:main", "-p", "umview.pytest_plugin", "-p", "no:cacheprovider",
                                   *args))
    return subprocess.run(argv, cwd=sample["project"], env=env_for(user, sample, **extra),
                          capture_output=True, timeout=300)


def native(user, sample, code):
    """Run the sample's own code natively, as user, on the victims."""
    argv = as_user(user, [sys.executable if user == "root" else "/usr/bin/python3", "-c",
                          "import sys; sys.path.insert(0, '.'); import sample_ops as s; " + code])
    return subprocess.run(argv, cwd=sample["project"], capture_output=True, timeout=60,
                          env=env_for(user, sample, SAMPLE_ETC=sample["victim"]["etc"],
                                      HOME=sample["victim"]["home"]))


@pytest.mark.parametrize("user", USERS)
def test_a_sandboxed_session_leaves_etc_and_home_unchanged_and_isolates_marked_tests(sample, user):
    need_user(user)
    # natively the sample's code changes /etc's and $HOME's stand-ins, one
    # test sees what the other wrote, and the network answers
    r = native(user, sample, f"s.write_a(); print(s.sees_a()); print(s.network({sample['port']}))")
    assert r.stdout == b"True\nconnected\n", r.stderr
    assert os.path.exists(os.path.join(sample["victim"]["etc"], NAME))
    assert os.path.exists(os.path.join(sample["victim"]["home"], "." + NAME))
    home = home_of(user, sample)
    before = tree_sum("/etc", home)
    r = pytest_in(user, sample, "-s", "--umview-sandbox")
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, out + r.stderr.decode(errors="replace")
    assert tree_sum("/etc", home) == before
    assert not os.path.exists(f"/etc/{NAME}") and not os.path.exists(os.path.join(home, "." + NAME))
    assert "5 passed" in out
    # inside the test, its layer shows what it made so far
    assert f"A-SEES {sorted([f'/etc/{NAME}', '/etc/hosts', os.path.join(home, '.' + NAME)])}" in out, out
    assert "NETWORK EAFNOSUPPORT" in out
    # the changes of each test, in the terminal summary
    assert "what each test changed in its layer" in out
    assert "test_sample.py::test_a_writes_etc_and_home: 3 changes" in out
    assert f"  C /etc/{NAME} (file)" in out and "  M /etc/hosts (size" in out
    assert f"  C {os.path.join(home, '.' + NAME)} (file)" in out
    assert "test_sample.py::test_b_does_not_see_what_a_wrote: 1 change\n  D /etc/hostname (file)" in out
    assert "test_sample.py::test_d_writes_only_its_tmp_path: 0 changes" in out
    # the note of the session sandbox: what the unmarked test left there
    assert "umview: sandbox of /, no network: 1 change outside the sandbox's /tmp, thrown away" in out


def test_marked_tests_outside_a_view_are_skipped_with_the_way_to_run_them(sample):
    need_user("root")
    r = pytest_in("root", sample, "-rs", SAMPLE_ETC=sample["victim"]["etc"])
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, out
    assert "1 passed, 4 skipped" in out and "run pytest with --umview-sandbox" in out
    # the unmarked test ran natively: it changed the real (victim) file
    assert os.path.exists(os.path.join(sample["victim"]["etc"], "umview-plugin-session"))


def test_fail_outside_tmp_lists_the_paths_a_test_wrote(sample):
    need_user("root")
    r = pytest_in("root", sample, "--umview-sandbox", "--umview-fail-outside-tmp", "-k", "test_a or test_d")
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 1, out
    assert "2 passed, 3 deselected, 1 error" in out, out
    assert "ERROR at teardown of test_a_writes_etc_and_home" in out
    assert "the test changed files outside its tmp_path" in out and f"C /etc/{NAME} (file)" in out
    assert "test_d_writes_only_its_tmp_path" not in out.split("short test summary info")[-1]


def test_x_and_k_select_and_stop_as_without_the_plugin_and_the_status_is_pytests(sample):
    need_user("root")
    r = pytest_in("root", sample, "--umview-sandbox", "-x", "-k", "test_e or test_b", SAMPLE_FAIL="1")
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 1, out
    assert "1 failed, 1 passed, 3 deselected" in out
    r = pytest_in("root", sample, "-x", "--umview-sandbox", "test_sample.py", "-k", "test_b")
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0 and "1 passed, 4 deselected" in out, out


def test_with_xdist_each_worker_has_its_own_layers(sample):
    need_user("root")
    try:
        import xdist  # noqa: F401
    except ImportError:
        pytest.skip("pytest-xdist is not installed (pip install pytest-xdist, or .[test])")
    before = tree_sum("/etc")
    r = pytest_in("root", sample, "--umview-sandbox", "-n", "2")
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, out + r.stderr.decode(errors="replace")
    assert "5 passed" in out and "test_sample.py::test_a_writes_etc_and_home: 3 changes" in out
    assert tree_sum("/etc") == before


def test_the_plugin_is_inert_unless_asked(sample):
    need_user("root")
    # loaded (-p and the entry point both name it), no option, no marker used:
    # nothing of umview is imported
    code = ("import sys, pytest; rc = pytest.main(['-q', '-p', 'no:cacheprovider', '-k', 'test_e']); "
            "print('UMVIEW-MODULES', sorted(m for m in sys.modules if m.startswith('umview') "
            "and m != 'umview.pytest_plugin'))")
    r = subprocess.run([sys.executable, "-c", code], cwd=sample["project"], capture_output=True, timeout=120,
                       env=env_for("root", sample, SAMPLE_ETC=sample["victim"]["etc"]))
    out = r.stdout.decode(errors="replace")
    assert "1 passed" in out and "UMVIEW-MODULES ['umview']" in out, out


def test_an_unknown_preset_says_the_known_ones(sample):
    need_user("root")
    r = pytest_in("root", sample, "--umview-sandbox=bogus")
    assert r.returncode == 4 and b"--umview-sandbox=bogus: unknown preset (known: default, net)" in r.stderr, r.stderr
