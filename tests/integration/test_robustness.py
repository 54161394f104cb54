"""What umview must survive: bad pointers in claimed calls, an engine that
crashes, its own sudden death, and system calls from the i386 ABI."""
import errno
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import LYING_ENGINE, engine_opts, lying_env, need, processes_with_arg, run, umview_argv

PY = sys.executable
PROGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs")


# --- bad path arguments ---------------------------------------------------------

@pytest.mark.parametrize("engine", ["none", "PassPathsEverywhere", "lying"])
def test_bad_path_pointers_and_overlong_paths_fail_as_natively(tmp_path, engine):
    """EFAULT for pointers to nothing and strings running into an unmapped
    page, ENAMETOOLONG for 4096-byte and 1 MiB paths, EBADF/ENOTDIR for bad
    dirfds: the C core reading the path must not change the kernel's answer."""
    argv = [PY, os.path.join(PROGS, "bad_paths.py")]
    env = lying_env(tmp_path / "lying")
    opts = {"none": [], "lying": ["--engine", LYING_ENGINE]}.get(engine)
    opts = engine_opts(engine) if opts is None else opts
    work = tmp_path / "work"
    work.mkdir()
    native = run(argv, cwd=work, env=env)
    viewed = run(umview_argv(*opts, "--", *argv), cwd=work, env=env)
    assert native.returncode == 0, native.stderr
    assert b"last 3 bytes of a page: openat: EFAULT" in native.stdout
    assert b"path of 1 MiB: openat: ENAMETOOLONG" in native.stdout
    assert viewed.stdout.decode() == native.stdout.decode()
    assert (viewed.stderr, viewed.returncode) == (native.stderr, native.returncode)
    assert os.listdir(work) == []


# --- a crashing engine ------------------------------------------------------------

def test_engine_raising_a_non_oserror_fails_the_call_with_eio_and_umview_goes_on(tmp_path):
    boom = tmp_path / "boom"
    boom.mkdir()
    (boom / "enter-x").write_text("content\n")
    (boom / "plain").write_text("plain content\n")
    env = dict(os.environ, UMVIEW_TEST_RAISE=str(boom))
    script = ("cat boom/enter-x; echo cat=$?; echo data > boom/exit-y; echo redirect=$?;"
              " cat boom/plain; echo after")
    r = run(umview_argv(*engine_opts("RaiseUnderPrefix"), "--", "bash", "-c", script), cwd=tmp_path, env=env)
    assert r.stdout == b"cat=1\nredirect=1\nplain content\nafter\n"
    assert r.returncode == 0
    err = r.stderr.decode()
    assert "cat: boom/enter-x: Input/output error" in err
    assert "boom/exit-y: Input/output error" in err
    assert "umview: engine raiser raised in enter(openat)" in err
    assert "umview: engine raiser raised in exit(openat)" in err
    assert "RuntimeError: deliberate failure in enter" in err


# --- the monitor killed -------------------------------------------------------------

def session_members(sid):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != b"Z":
            found.append(int(entry))
    return found


def wait_until(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()


@pytest.mark.parametrize("engine", ["none", "lying"])
@pytest.mark.parametrize("stopped", [False, True], ids=["running", "one-stopped"])
def test_monitor_killed_with_sigkill_leaves_no_tracee(tmp_path, engine, stopped):
    marker = f"1000.{uuid.uuid4().int % 10**9:09d}"
    script = (f"sleep {marker} & sleep {marker} & (sleep {marker}; echo never) &"
              f" python3 -c 'import time; time.sleep(1000)' {marker} & sleep {marker}")
    opts = ["--engine", LYING_ENGINE] if engine == "lying" else []
    p = subprocess.Popen(umview_argv(*opts, "--", "bash", "-c", script), env=lying_env(tmp_path),
                         start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        started = wait_until(lambda: len(processes_with_arg(marker.encode())) >= 5, 20)
        assert started, "the traced processes did not start"
        if stopped:
            os.kill(processes_with_arg(marker.encode())[0], signal.SIGSTOP)
            time.sleep(0.2)
        os.kill(p.pid, signal.SIGKILL)
        assert p.wait(timeout=10) == -signal.SIGKILL
        gone = wait_until(lambda: not processes_with_arg(marker.encode()) and not session_members(p.pid), 5)
        assert gone, f"left behind: {processes_with_arg(marker.encode())} in session {session_members(p.pid)}"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for pid in processes_with_arg(marker.encode()) + session_members(p.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


# --- the i386 ABI from a 64-bit process ------------------------------------------------

@pytest.fixture(scope="module")
def int80(tmp_path_factory):
    """The int80 test program, built non-PIE; skips where it cannot run."""
    need("gcc")
    out = tmp_path_factory.mktemp("int80") / "int80"
    build = run(["gcc", "-O1", "-no-pie", "-o", str(out), os.path.join(PROGS, "int80.c")])
    if build.returncode:
        pytest.skip(f"cannot build a non-PIE x86_64 program: {build.stderr.decode()[-300:]}")
    native = run([str(out)])
    if b"open: fd" not in native.stdout:
        pytest.skip(f"no i386 emulation for int $0x80 here: {native.stdout.decode()!r}")
    return str(out)


def test_int80_calls_without_engine_run_as_natively(int80):
    native = run([int80])
    viewed = run(umview_argv("--", int80))
    assert native.stdout.endswith(b"getpid: real\n")
    assert (viewed.stdout, viewed.stderr, viewed.returncode) == (native.stdout, native.stderr, native.returncode)


def test_int80_open_claimed_by_an_engine_is_refused_never_run(int80):
    """The engine claims open(2) under "/" and refuses it with EPERM: the i386
    open must be decoded and refused (EPERM), or refused with ENOSYS; the
    real open must never happen."""
    r = run(umview_argv(*engine_opts("RefuseOpen"), "--", int80))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] in (f"open: {-errno.EPERM}".encode(), f"open: {-errno.ENOSYS}".encode())


def test_int80_getpid_claimed_by_the_lying_engine_lies_or_is_refused(int80, tmp_path):
    r = run(umview_argv("--engine", LYING_ENGINE, "--", int80), env=lying_env(tmp_path, LYING_PID="777"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] in (b"getpid: 777", f"getpid: {-errno.ENOSYS}".encode())


def test_int80_open_rewritten_by_an_engine_opens_the_target_or_is_refused(int80, tmp_path):
    env = lying_env(tmp_path / "lying")
    with open(env["LYING_TARGET"], "w") as f:
        f.write("the target\n")
    r = run(umview_argv("--engine", LYING_ENGINE, "--", int80, env["LYING_ALIAS"]), env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] in (b"open: fd, read 11 bytes: the target",
                                         f"open: {-errno.ENOSYS}".encode())


# --- signals sent to umview itself ------------------------------------------------------

# the trap also ends the background sleep: umview waits for every process of
# the view, natively the shell would leave it behind
TRAP_SCRIPT = ("trap 'echo caught; kill $!; exit 3' {sig}; echo ready;"
               " sleep 2 >/dev/null & wait; echo not interrupted")


def signalled(argv, sig):
    """Start argv, wait for its "ready" line, send sig to the started pid;
    (stdout, wait status)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert p.stdout.readline() == b"ready\n"
        p.send_signal(sig)
        out = p.stdout.read()
        return out, p.wait(timeout=20)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        p.stdout.close()


@pytest.mark.parametrize("sig", ["TERM", "HUP", "USR1", "USR2", "INT", "QUIT", "ALRM", "PIPE", "WINCH"])
def test_signal_sent_to_umview_reaches_the_command_trap(sig):
    # the command's trap runs as natively; SIGTERM, SIGHUP and SIGINT, which
    # end the whole view, make umview's status 128+N whatever the command's
    argv = ["bash", "-c", TRAP_SCRIPT.format(sig=sig)]
    signum = getattr(signal, "SIG" + sig)
    native = signalled(argv, signum)
    assert native == (b"caught\n", 3)
    ends = sig in ("TERM", "HUP", "INT")
    assert signalled(umview_argv("--", *argv), signum) == (native[0], 128 + signum if ends else native[1])


TREE = r"""
import os, signal, sys, time
# a process, a child, and a child in a session of its own, each ended by the
# signal; natively only the process umview started gets it
def on(sig, frame):
    os._exit(0)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, on)
# whatever the runner blocked (a mask is inherited; a handler does not unblock)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
# short sleeps: a Python handler runs between bytecodes, so a signal that
# comes after the write of "ready" but before a long sleep starts would wait
# for that sleep's end (natively too, in a narrower window)
def wait():
    for _ in range(3000):
        time.sleep(0.1)
for own_session in (False, True):
    if os.fork() == 0:
        if own_session:
            os.setsid()
        wait()
        os._exit(1)
print("ready", flush=True)
wait()
"""


@pytest.mark.parametrize("sandbox", [False, True], ids=["plain", "sandbox"])
@pytest.mark.parametrize("sig", ["TERM", "INT", "HUP"])
def test_sigterm_sigint_sighup_to_umview_reach_every_process_of_the_view(sig, sandbox):
    signum = getattr(signal, "SIG" + sig)
    marker = f"umview-test-{uuid.uuid4().hex}"
    for where in ("native", "view"):
        argv = [sys.executable, "-c", TREE, marker]
        if where == "view":
            argv = umview_argv(*(["--sandbox"] if sandbox else []), "--", *argv)
        # a grace longer than the test: the view ends by the signal alone
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, env=dict(os.environ, UMVIEW_TERM_GRACE="60"))
        try:
            assert p.stdout.readline() == b"ready\n"
            p.send_signal(signum)
            status = p.wait(timeout=30)
            time.sleep(0.3)
            left = processes_with_arg(marker.encode())
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            for pid in processes_with_arg(marker.encode()):
                os.kill(pid, signal.SIGKILL)
            p.stdout.close()
        if where == "native":
            assert status == 0 and len(left) == 2  # its children live on
        else:
            assert status == 128 + signum and left == []


# --- a rewritten call interrupted by signals --------------------------------------------

BLOCKING_OPEN = """\
import os, signal, sys, threading, time
path, target, restart = sys.argv[1], sys.argv[2], sys.argv[3] == "restart"
signal.signal(signal.SIGALRM, lambda *a: None)
signal.siginterrupt(signal.SIGALRM, not restart)
signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
def writer():
    time.sleep(0.6)
    with open(target, "w") as f:
        f.write("through the fifo\\n")
threading.Thread(target=writer).start()
with open(path) as f:  # blocks until the writer comes; SIGALRM every 50 ms meanwhile
    print(f.read(), end="")
"""


@pytest.mark.parametrize("restart", ["eintr", "restart"])
def test_rewritten_open_interrupted_by_signals_still_opens_the_target(tmp_path, restart):
    """The lying engine rewrites the path of an open that blocks on a FIFO;
    signals interrupt it again and again (EINTR and retry, or a kernel
    restart with SA_RESTART): every new attempt must be rewritten again."""
    env = lying_env(tmp_path)
    os.mkfifo(env["LYING_TARGET"])
    native = run([PY, "-c", BLOCKING_OPEN, env["LYING_TARGET"], env["LYING_TARGET"], restart],
                 env=env, timeout=30)
    viewed = run(umview_argv("--engine", LYING_ENGINE, "--", PY, "-c", BLOCKING_OPEN,
                             env["LYING_ALIAS"], env["LYING_TARGET"], restart), env=env, timeout=30)
    assert native.stdout == b"through the fifo\n"
    assert (viewed.stdout, viewed.stderr, viewed.returncode) == (native.stdout, native.stderr, native.returncode)


@pytest.fixture(scope="module")
def signal_storm(tmp_path_factory):
    if subprocess.run(["gcc", "--version"], capture_output=True).returncode:
        pytest.skip("needs gcc")
    exe = tmp_path_factory.mktemp("storm") / "signal_storm"
    subprocess.run(["gcc", "-O2", "-o", str(exe), os.path.join(PROGS, "signal_storm.c")], check=True)
    return str(exe)


@pytest.mark.parametrize("notif", ["1", "0"])
def test_calls_waiting_for_the_monitor_never_fail_with_eintr(signal_storm, tmp_path, notif):
    """stat and access with SIGALRM every 200 us and a handler without
    SA_RESTART: natively never EINTR; a notified call whose wait a signal
    ends is restarted, not failed. An open of a FIFO is still interrupted,
    as natively."""
    env = dict(os.environ, UMVIEW_NOTIF=notif)
    native = run([signal_storm], env=env)
    viewed = run(umview_argv("-p", "unreal", "--", signal_storm), env=env)
    assert native.stdout == b"eintr=0 other=0 signals>0=1\n"
    assert viewed.stdout == native.stdout
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    native = run([signal_storm, str(fifo)], env=env)
    viewed = run(umview_argv("-p", "unreal", "--", signal_storm, str(fifo)), env=env)
    assert native.stdout == b"fifo open: -1 Interrupted system call\n"
    assert viewed.stdout == native.stdout


# --- register writes the kernel refuses ----------------------------------------------

def _mkdir_with_failing_writes(tmp_path, mask):
    from umview.core import lib

    fail_dir = tmp_path / "fail"
    fail_dir.mkdir()
    env = dict(os.environ, UMVIEW_TEST_FAIL_DIR=str(fail_dir), UMVIEW_TEST_FAIL_WRITES=str(mask))
    script = f"import os\ntry:\n    os.mkdir({str(fail_dir / 'd')!r})\nexcept OSError as e:\n    print(e.errno)\n"
    stats = tmp_path / "stats.json"
    r = run(umview_argv(*engine_opts("SkipMkdirWithFailingWrites"), "--stats-file", str(stats), "--", PY, "-c",
                        script), env=env)
    import json

    return r, json.loads(stats.read_text().splitlines()[-1]), (fail_dir / "d").exists(), lib


def test_skip_falls_back_to_registers_when_set_syscall_info_fails(tmp_path):
    from umview.core import lib

    r, st, made, _ = _mkdir_with_failing_writes(tmp_path, lib.UM_FAIL_SSI)
    assert (r.stdout, r.returncode, made) == (f"{errno.EPERM}\n".encode(), 0, False), r.stderr
    assert st["write_failed"] == 0 and b"umview:" not in r.stderr


def test_skip_that_cannot_set_the_number_kills_the_thread_and_never_runs_the_call(tmp_path):
    from umview.core import lib

    r, st, made, _ = _mkdir_with_failing_writes(tmp_path, lib.UM_FAIL_SSI | lib.UM_FAIL_SETREGS)
    assert made is False
    assert r.returncode == 128 + signal.SIGKILL or r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
    assert st["write_failed"] == 1
    assert b"umview: thread " in r.stderr and b"could not be stopped: the thread is killed" in r.stderr


def test_skip_whose_result_cannot_be_set_still_does_not_run_the_call(tmp_path):
    from umview.core import lib

    r, st, made, _ = _mkdir_with_failing_writes(tmp_path, lib.UM_FAIL_POKEUSER)
    assert (r.returncode, made) == (0, False), r.stderr
    assert r.stdout == f"{errno.ENOSYS}\n".encode()  # nr = -1 ran: the kernel's ENOSYS
    assert st["write_failed"] == 1 and b"the result of a skipped call could not be set" in r.stderr


def test_umview_under_strace_f_says_why_it_cannot_trace_its_command(tmp_path):
    # natively strace -f takes umview's child first: ptrace allows one tracer
    need("strace")
    r = run(["strace", "-f", "-o", str(tmp_path / "log"), *umview_argv("--", "true")])
    assert r.returncode == 126
    assert b"umview is itself traced (strace" in r.stderr and b"strace without -f" in r.stderr
    r = run(["strace", "-o", str(tmp_path / "log"), *umview_argv("--", "true")])
    assert r.returncode == 0, r.stderr  # without -f it works


def test_umview_inside_a_view_runs_its_command_in_a_nested_view():
    # not a second tracer (ptrace allows one): the monitor nests a view (tests/integration/test_nested.py)
    r = run(umview_argv("--", *umview_argv("--", "sh", "-c", "exit 3")))
    assert (r.returncode, r.stderr) == (3, b"")
