"""Shared fixtures: run a command natively and under umview, compare."""
import contextlib
import functools
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
EXAMPLES = os.path.join(REPO, "examples")
LYING_ENGINE = os.path.join(EXAMPLES, "lying_engine.py") + ":LyingEngine"
TEST_ENGINES = os.path.join(HERE, "engines.py")

# Every process a test starts inherits this variable (tests that build their
# own environment start from os.environ); at the end of the session no process
# may still carry it. The value is unique, so concurrent sessions do not meet.
MARKER_VAR = "UMVIEW_TEST_MARKER"
MARKER = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
os.environ[MARKER_VAR] = MARKER

# A view's PATH gets the directory of umview's commands when it lacks it
# (umview.cli.commands_on_path): the suite's PATH has it already, so that a
# view's environment is the test's byte for byte (a differential test of
# gdb compares stack addresses, which the environment's size moves)
_BIN = os.path.dirname(sys.executable)
if shutil.which("um_add_service") is None and os.access(os.path.join(_BIN, "um_add_service"), os.X_OK):
    os.environ["PATH"] = os.environ.get("PATH", os.defpath) + os.pathsep + _BIN


def umview_argv(*opts):
    """argv prefix that runs umview from the installed package."""
    return [sys.executable, "-m", "umview.cli", *opts]


def engine_opts(cls):
    """--engine option loading a class of tests/engines.py."""
    return ["--engine", f"{TEST_ENGINES}:{cls}"]


def run(argv, *, cwd=None, env=None, input=None, timeout=300):
    return subprocess.run(argv, cwd=cwd, env=env, input=input, capture_output=True, timeout=timeout)


def run_session(argv, what, timeout, env=None):
    """Run argv in a session of its own, stdout and stderr together; its exit
    code and output (bytes). Past timeout seconds, or once it ends, whatever
    is left of the session is killed; a timeout fails the test (what: whose
    run it was)."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{what}: more than {timeout}s\n" + out.decode(errors="replace")[-3000:])
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    return proc.returncode, out


def run_both(cmd, *, opts=(), shell=True, **kw):
    """Run cmd natively and under umview; return (native, umview) results."""
    argv = ["bash", "-c", cmd] if shell else list(cmd)
    native = run(argv, **kw)
    viewed = run(umview_argv(*opts, "--", *argv), **kw)
    return native, viewed


def assert_same(native, viewed):
    assert viewed.stderr.decode(errors="replace") == native.stderr.decode(errors="replace")
    assert viewed.stdout.decode(errors="replace") == native.stdout.decode(errors="replace")
    assert viewed.returncode == native.returncode


def need(*programs):
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} on PATH")


def lying_env(scratch, base=None, **extra):
    """Environment for the example LyingEngine whose protected and aliased
    paths lie in `scratch`, a directory the command under test never uses."""
    os.makedirs(scratch, exist_ok=True)
    env = dict(os.environ if base is None else base)
    env.update(
        LYING_PROTECT=os.path.join(scratch, "protected"),
        LYING_ALIAS=os.path.join(scratch, "alias"),
        LYING_TARGET=os.path.join(scratch, "target"),
    )
    env.update(extra)
    return env


@pytest.fixture
def workdir(tmp_path):
    return tmp_path


def marked_processes():
    """(pid, cmdline) of live processes, other than this one, whose
    environment carries this session's marker."""
    needle = f"{MARKER_VAR}={MARKER}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone, or not ours to read
            continue
        found.append((int(entry), cmd))
    return found


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind():
    """At the end of the session no process started by a test is left (a
    leftover tracee, a stopped job, an orphaned child). Leftovers are killed,
    then reported as an error."""
    yield
    deadline = time.monotonic() + 5
    left = marked_processes()
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = marked_processes()
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if left:
        pytest.fail("processes left behind by the tests (killed now):\n"
                    + "\n".join(f"  {pid}: {cmd}" for pid, cmd in left), pytrace=False)


def view_dirs(where, kind, pid=None):
    """The directories a view made in where: umview-KIND-PID-XXXX (a
    sandbox's, a layered mount's listings), of process pid if given, as
    {name: pid}."""
    try:
        names = os.listdir(where)
    except OSError:
        return {}
    out = {}
    for n in names:
        m = re.fullmatch(rf"umview-{kind}-(\d+)-.*", n)
        if m and (pid is None or int(m.group(1)) == pid):
            out[n] = int(m.group(1))
    return out


@pytest.fixture(scope="session", autouse=True)
def no_listing_directory_left_behind():
    """At the end of the session no listing directory of a view the session
    started is left (a layered mount's are removed with the view, also when
    a module fails to load): one made during it whose monitor is gone.
    Another view running on the machine is not the session's."""
    before = set(view_dirs("/dev/shm", "listing"))
    yield
    left = sorted(n for n, pid in view_dirs("/dev/shm", "listing").items()
                  if n not in before and not os.path.exists(f"/proc/{pid}"))
    if left:
        pytest.fail(f"left in /dev/shm by the tests: {', '.join(left)}", pytrace=False)


# --- running as another user ---

NOBODY = 65534


def as_user(user, argv):
    if user == "root":
        return list(argv)
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]


# the test's python may live where an unprivileged user cannot reach it (a
# pyenv under /root): umview then runs on the system python, with this
# environment's site-packages (same minor version; the C core is abi3)
SYSTEM_PY = "/usr/bin/python3"
LAUNCH = ("import importlib, site, sys; site.addsitedir(sys.argv[1]); mod, _, fn = sys.argv[2].partition(':'); "
          "sys.exit(getattr(importlib.import_module(mod), fn)(sys.argv[3:]))")


@functools.lru_cache(None)
def _reachable_by_nobody(python):
    # through a shell: what runs it inside a view is one (setpriv's own exec
    # may still get through a directory the user cannot search)
    return subprocess.run(as_user("nobody", ["sh", "-c", 'exec "$0" -c "import umview.core"', python]),
                          capture_output=True).returncode == 0


def entry_for(user, entry, *args):
    """argv (not switching user) that runs entry ("module:function", given
    the argument list) with a python that user can run, umview importable."""
    if user == "root" or _reachable_by_nobody(sys.executable):
        return [sys.executable, "-c", LAUNCH, sysconfig.get_paths()["purelib"], entry, *args]
    if not os.path.exists(SYSTEM_PY) or subprocess.run(
            [SYSTEM_PY, "-c", f"import sys; sys.exit(sys.version_info[:2] != {tuple(sys.version_info[:2])})"]).returncode:
        pytest.skip(f"an unprivileged user cannot run {sys.executable}, and {SYSTEM_PY} is another version")
    return [SYSTEM_PY, "-c", LAUNCH, sysconfig.get_paths()["purelib"], entry, *args]


def umview_for(user, *opts):
    """argv that runs umview with opts as user."""
    if user == "root":
        return umview_argv(*opts)
    return as_user(user, entry_for(user, "umview.cli:main", *opts))


def make_lookup_tree(root):
    """The tree progs/lookups.py looks at, made at root: files, directories,
    symlinks (relative, to a directory, absolute), a FIFO, a directory
    "private", a read-only file and an executable one."""
    os.makedirs(os.path.join(root, "d", "sub", "deep"))
    for path, text in (("f", "a file\n"), ("d/f", "in d\n"), ("d/sub/deep/file", "deep\n"), ("ro", "read only\n"),
                       ("exe", "#!/bin/sh\n"), ("private/f", "secret\n")):
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    os.chmod(os.path.join(root, "ro"), 0o444)
    os.chmod(os.path.join(root, "exe"), 0o755)
    os.symlink("f", os.path.join(root, "rel_link"))
    os.symlink("d", os.path.join(root, "dir_link"))
    os.symlink("/etc/hostname", os.path.join(root, "abs_link"))
    os.mkfifo(os.path.join(root, "fifo"))


def need_user(user):
    if os.geteuid() != 0:
        pytest.skip("needs root (to run as root, or to switch to an unprivileged user)")
    if user != "root" and shutil.which("setpriv") is None:
        pytest.skip("needs setpriv to run as an unprivileged user")


def processes_with_arg(arg):
    """pids of live processes (not zombies) with `arg` as one of their arguments."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if arg in args and state != b"Z":
            found.append(int(entry))
    return found


@contextlib.contextmanager
def built_programs(prefix, sources):
    """The C programs sources, built with gcc -O1 -Wall -pthread in a new
    directory of /var/tmp (a sandbox's /tmp is its own) that every user may
    read: {name: executable}. Removed afterwards."""
    need("gcc")
    out = tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")
    os.chmod(out, 0o755)
    try:
        exes = {}
        for src in sources:
            name = os.path.basename(src)[:-2]
            exes[name] = os.path.join(out, name)
            r = run(["gcc", "-O1", "-Wall", "-pthread", "-o", exes[name], src])
            assert r.returncode == 0, r.stderr.decode(errors="replace")
        yield exes
    finally:
        shutil.rmtree(out, ignore_errors=True)


@contextlib.contextmanager
def dev_fuse_for_all():
    """/dev/fuse open to every user while the block runs (the FUSE servers a
    normal user's view runs open it as that user; it is 0600 on some
    machines), its mode restored after; skips the test without it."""
    try:
        mode = os.stat("/dev/fuse").st_mode & 0o7777
    except OSError:
        pytest.skip("no /dev/fuse")
    changed = os.geteuid() == 0 and mode & 0o006 != 0o006
    if changed:
        os.chmod("/dev/fuse", mode | 0o006)
    try:
        yield
    finally:
        if changed:
            os.chmod("/dev/fuse", mode)


@pytest.fixture(scope="module")
def dev_fuse_for_nobody():
    """/dev/fuse open to every user for a module's tests (dev_fuse_for_all):
    the FUSE servers a normal user's view runs open it as that user."""
    with dev_fuse_for_all():
        yield


def digest_outside(path, offset, size):
    """A digest of every byte of the file path outside [offset, offset+size)
    (a disk image's bytes but one partition's)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read(offset))
        f.seek(offset + size)
        h.update(f.read())
    return h.hexdigest()


def libraries(program):
    """The libraries ldd says program loads, its loader included (last)."""
    out = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
    return [w for line in out.splitlines() for w in line.split() if w.startswith("/")]


def copy_host_programs(root, programs):
    """The host's programs (names found on PATH) in root/bin, with their
    libraries at their own paths below root: a root tree they run in."""
    os.makedirs(os.path.join(root, "bin"), exist_ok=True)
    for name in programs:
        program = shutil.which(name)
        for lib in libraries(program):
            dest = os.path.join(root, lib.lstrip("/"))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(os.path.realpath(lib), dest)
        shutil.copy2(os.path.realpath(program), os.path.join(root, "bin", name))
    return root
