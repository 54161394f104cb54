"""A process's own seccomp filters inside a view (docs/internals.md, "A
process's own seccomp filters").

progs/own_seccomp.c installs filters of its own and then makes calls; each
test runs it natively and under umview (with no module, and in a cow view of
/; with seccomp user notifications on and off) and compares. Every test also
checks what makes it not vacuous: the native run shows the filter acting (an
errno, a SIGSYS, a real file changed), and where the view changes something
(a RET_TRACE with no tracer, a listener of its own) the counters or the
files show that the monitor's path was taken.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from conftest import NOBODY, as_user, need, need_user, run, umview_for
from test_abis import progs  # noqa: F401 - the fixture: abicalls built for i386 and x32

PROGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs")
NOTIF = ["1", "0"]
VIEWS = ["none", "cow"]


@pytest.fixture(scope="module")
def prog():
    """progs/own_seccomp.c, built where an unprivileged user may run it."""
    need("gcc")
    out = tempfile.mkdtemp(prefix="umview-own-seccomp-")
    os.chmod(out, 0o755)
    exe = os.path.join(out, "own_seccomp")
    r = run(["gcc", "-O1", "-Wall", "-pthread", "-o", exe, os.path.join(PROGS, "own_seccomp.c")])
    if r.returncode:
        shutil.rmtree(out, ignore_errors=True)
        pytest.skip(f"cannot build the test program: {r.stderr.decode()[-300:]}")
    yield exe
    shutil.rmtree(out, ignore_errors=True)


@pytest.fixture
def scratch():
    """Directories an unprivileged user may reach (tmp_path is 0700)."""
    made = []

    def make(owner="root"):
        d = tempfile.mkdtemp(prefix="umview-own-")
        os.chmod(d, 0o755)
        if owner != "root":
            os.chown(d, NOBODY, NOBODY)
        made.append(d)
        return d
    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


def view_opts(view, layer):
    return ["-p", f"viewfs,mount={layer}:/:cow"] if view == "cow" else []


def in_view(prog, steps, *, view, notif, layer, user="root", stats=None):
    opts = view_opts(view, layer) + (["--stats-file", stats] if stats else [])
    env = dict(os.environ, UMVIEW_NOTIF=notif)
    return run(umview_for(user, *opts, "--", prog, *steps), env=env)


def own_trace_stops(stats):
    with open(stats) as f:
        return json.loads(f.read().splitlines()[-1])["own_trace"]


# --- actions the kernel takes alone: ERRNO, TRAP, LOG, ALLOW, KILL --------------------

NATIVE_ACTIONS = {
    # steps -> what the native run must show (the filter acts)
    "errno": (["filter:errno:getppid:13", "call:getppid", "call:uname"], "call getppid: -1 EACCES"),
    "errno-by-prctl": (["prctl:errno:uname:1", "call:uname"], "call uname: -1 EPERM"),
    "errno-in-a-child": (["filter:errno:getppid:1", "fork", "call:getppid"], "call getppid: -1 EPERM"),
    "trap": (["filter:trap:getppid:7", "call:getppid"], "SIGSYS code=1 syscall=110 errno(data)=7"),
    "log": (["filter:log:getppid", "call:getppid"], "call getppid: > 0"),
    "allow": (["filter:allow:getppid", "call:getppid"], "call getppid: > 0"),
    "kill-process": (["filter:kill_process:getppid", "call:getppid"], None),
    "kill-thread": (["filter:kill_thread:getppid", "call:getppid"], None),
    "errno-on-a-path-call": (["filter:errno:openat:30", "call:openat"], "call openat: -1 EROFS"),
    # a filter of one thread (no TSYNC) leaves a thread made before it alone
    "trace-of-another-thread": (["thread:openat", "filter:trace:openat:1", "go"], "call openat: -1 EFAULT"),
}


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("case", sorted(NATIVE_ACTIONS))
def test_own_filter_actions_act_as_natively(prog, scratch, case, view, notif):
    steps, shows = NATIVE_ACTIONS[case]
    native = run([prog, *steps])
    if shows is None:
        assert native.returncode == -signal.SIGSYS, native
    else:
        assert shows in native.stdout.decode(), native.stdout
    viewed = in_view(prog, steps, view=view, notif=notif, layer=scratch())
    assert (viewed.stdout, viewed.returncode) == (native.stdout, native.returncode), viewed.stderr


# --- RET_TRACE with no tracer: ENOSYS, not executed -----------------------------------

TRACE_CASES = {
    "trace": ["filter:trace:getppid:0x1234", "call:getppid"],
    # the data the monitor's own filters use, on a call they do not trap
    "trace-with-the-monitors-data": ["filter:trace:getppid:0x554d", "call:getppid"],
    "trace-by-prctl-in-a-child": ["prctl:trace:uname:5", "fork", "call:uname"],
    # a call the cow view traps too (an open for writing): the process's
    # filter, newer, gives the stop its data; it is still not executed
    "trace-on-a-write-the-view-traps": ["filter:trace:openat:9", "write:{victim}:changed", "call:getppid"],
    # a call the cow view notifies (with notifications on): the monitor's
    # RET_USER_NOTIF outranks the process's TRACE, so the monitor runs the
    # process's filters itself, in that thread, its children, its threads
    "trace-on-a-call-the-view-notifies": ["filter:trace:openat:1", "call:openat"],
    "trace-on-a-notified-call-in-a-child": ["prctl:trace:openat:2", "fork", "call:openat"],
    "trace-for-every-thread": ["thread:openat", "tfilter:trace:openat:1", "go"],
}


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("case", sorted(TRACE_CASES))
def test_own_ret_trace_without_a_tracer_fails_with_enosys(prog, scratch, case, view, notif):
    d = scratch()
    victim = os.path.join(d, "victim")
    steps = [s.format(victim=victim) for s in TRACE_CASES[case]]
    with open(victim, "w") as f:
        f.write("real\n")
    native = run([prog, *steps])
    assert "-1 ENOSYS" in native.stdout.decode() or "open ENOSYS" in native.stdout.decode(), native.stdout
    stats = os.path.join(d, "stats")
    layer = scratch()
    viewed = in_view(prog, steps, view=view, notif=notif, layer=layer, stats=stats)
    assert (viewed.stdout, viewed.returncode) == (native.stdout, native.returncode), viewed.stderr
    assert own_trace_stops(stats) >= 1  # the monitor saw the stop and refused the call
    with open(victim) as f:
        assert f.read() == "real\n"
    assert not os.path.exists(os.path.join(layer, victim.lstrip("/")))


def test_own_ret_trace_hidden_by_a_filter_the_monitor_stacks_later(prog, scratch):
    """The process installs its TRACE on openat, then a service added at run
    time stacks a filter of the monitor that traps openat too: the newer
    filter's data (the monitor's) is the one the stop carries, and the
    monitor finds the process's TRACE by running its filter."""
    d = scratch()
    flag, stats = os.path.join(d, "flag"), os.path.join(d, "stats")
    steps = ["filter:trace:openat:4", f"wait:{flag}", "call:openat"]
    with open(flag, "w"):
        pass
    native = run([prog, *steps])
    assert native.stdout.decode().splitlines() == ["filter trace:openat:4: ok", "waited", "call openat: -1 ENOSYS"]
    os.unlink(flag)
    bindir = os.path.dirname(sys.executable)
    script = f'"$0" "$@" & sleep 0.2; um_add_service unreal && : > {flag}; wait'
    viewed = run(umview_for("root", "--stats-file", stats, "--", "sh", "-c", script, prog, *steps),
                 env=dict(os.environ, PATH=bindir + os.pathsep + os.environ["PATH"]), timeout=60)
    assert (viewed.stdout, viewed.returncode) == (native.stdout, 0), viewed.stderr
    with open(stats) as f:
        counts = json.loads(f.read().splitlines()[-1])
    assert counts["injected"] >= 1 and counts["own_trace"] >= 1, counts


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("abi", ["i386", "x32"])
def test_own_ret_trace_of_another_abi(progs, scratch, abi, notif):
    """A filter installed through the i386 (or x32) seccomp(2), whose struct
    sock_fprog has the 32-bit layout, is copied as the kernel reads it: its
    TRACE on open fails a read-only open (which a cow view notifies) with
    ENOSYS, as natively. Where the kernel lacks the ABI (x32, mostly) the
    installation fails alike."""
    d = scratch()
    victim = os.path.join(d, "victim")
    with open(victim, "w") as f:
        f.write("real\n")
    steps = [f"open:{victim}:0", "owntrace:open", f"open:{victim}:0"]
    native = run([progs[abi], *steps])
    if abi == "i386":
        assert native.stdout.decode().splitlines()[1:] == ["owntrace:open = 0", f"open:{victim}:0 = -38"]
    viewed = in_view(progs[abi], steps, view="cow", notif=notif, layer=scratch())
    assert (viewed.stdout, viewed.returncode) == (native.stdout, native.returncode), viewed.stderr


def _strace_lines(text):
    """strace -f lines as they compare: no pids, addresses or dirfd numbers."""
    out = []
    # strace's own notice of a new thread may land inside a line it is
    # writing (natively too): the line is whole without it
    text = re.sub(r"strace: Process \d+ attached\n", "", text)
    for line in text.splitlines():
        line = re.sub(r"^(\[pid +\d+\] |\d+ +)", "", line)
        if line.startswith(("+++", "---", "strace: Process ")):
            continue
        line = re.sub(r"openat\(-?\d+, 0x1000", "openat(FD, 0x1000", line)
        out.append(re.sub(r"\s+= ", " = ", re.sub(r"0x[0-9a-f]{6,}", "ADDR", line)))
    return out


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("view", VIEWS)
def test_own_ret_trace_under_an_inner_tracer_without_seccomp_stops(prog, scratch, view, notif):
    """strace -f inside the view (the emulated ptrace; strace asks for no
    seccomp stops) sees what it sees natively: the process's TRACE fails its
    calls with ENOSYS, for the thread, the threads it syncs and its child,
    also for a call the view traps and decides at the tracer's entry stop."""
    need("strace")
    steps = ["filter:trace:openat:1", "call:openat", "thread:openat", "tfilter:trace:getppid:1", "go", "fork",
             "call:getppid"]
    argv = ["strace", "-f", "-e", "trace=openat,getppid,seccomp"]
    native = run([*argv, prog, *steps])
    assert native.stdout.decode().count("ENOSYS") == 3, native.stdout
    env = dict(os.environ, UMVIEW_NOTIF=notif)
    with subprocess.Popen(umview_for("root", *view_opts(view, scratch()), "--", *argv, prog, *steps), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            # the monitor passes SIGTERM to strace, and ends its view cleanly
            p.terminate()
            p.communicate(timeout=30)
            pytest.skip("strace did not get going under the emulated ptrace: a start-up race of the "
                        "emulation (it hangs now and then in a view without this test's filters too)")
    viewed = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    assert (viewed.stdout, viewed.returncode) == (native.stdout, native.returncode), viewed.stderr
    assert _strace_lines(viewed.stderr.decode()) == _strace_lines(native.stderr.decode())


# --- a listener of its own: refused (EBUSY), never a way around the view ------------------

@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_own_listener_cannot_write_through_a_cow_view(prog, scratch, user, notif):
    """The program installs a filter notifying openat to a thread of its own,
    which answers CONTINUE, then writes a file: natively it is written; in a
    cow view of / seccomp() fails with EBUSY, and the write goes to the layer
    (with a listener of its own, the CONTINUE would skip the view's filter)."""
    need_user(user)
    d, layer = scratch(user), scratch(user)
    victim = os.path.join(d, "victim")
    for path in (victim,):
        with open(path, "w") as f:
            f.write("real\n")
        if user != "root":
            os.chown(path, NOBODY, NOBODY)
    steps = ["listen:openat", f"write:{victim}:changed", "call:getppid"]

    native = run(as_user(user, [prog, *steps]))
    assert native.stdout.decode().splitlines() == ["listen openat: ok", "write: ok", "call getppid: > 0"]
    with open(victim) as f:
        assert f.read() == "changed", "natively the program writes through its listener"
    with open(victim, "w") as f:
        f.write("real\n")

    viewed = in_view(prog, steps, view="cow", notif=notif, layer=layer, user=user)
    assert viewed.stdout.decode().splitlines() == ["listen openat: EBUSY", "write: ok", "call getppid: > 0"], \
        viewed.stderr
    assert viewed.returncode == 0
    with open(victim) as f:
        assert f.read() == "real\n", "a real file changed under the view"
    with open(os.path.join(layer, victim.lstrip("/"))) as f:
        assert f.read() == "changed"


@pytest.mark.parametrize("notif", NOTIF)
def test_own_listener_is_refused_in_a_view_without_modules(prog, notif):
    """Consistently, also where the view traps nothing (a module may be added
    later, and a listener installed before would outrank its filter)."""
    native = run([prog, "listen:getuid", "call:getuid"])
    assert native.stdout.decode().splitlines() == ["listen getuid: ok", "call getuid: 0"]
    viewed = run(umview_for("root", "--", prog, "listen:getuid", "call:getuid"),
                 env=dict(os.environ, UMVIEW_NOTIF=notif))
    assert viewed.stdout.decode().splitlines() == ["listen getuid: EBUSY", "call getuid: 0"], viewed.stderr


SECCOMP_FLAGS = (
    "import ctypes, errno\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.prctl(38, 1, 0, 0, 0)\n"  # PR_SET_NO_NEW_PRIVS
    "insn = (ctypes.c_uint64 * 1)(0x7fff000000000006)\n"  # BPF_RET|BPF_K, SECCOMP_RET_ALLOW
    "prog = (ctypes.c_uint64 * 2)(1, ctypes.addressof(insn))\n"
    "for flags in (8 | 0x80000000, 8 | 1, 8 | 0x40, 8 | 0x100):\n"
    "    r = libc.syscall(317, 1, flags, prog)\n"  # seccomp(SET_MODE_FILTER, flags, prog)
    "    print(hex(flags), r, errno.errorcode.get(ctypes.get_errno()) if r < 0 else '')\n"
)


@pytest.mark.parametrize("notif", NOTIF)
def test_a_listener_with_flags_the_kernel_refuses_gets_its_einval_not_ebusy(notif):
    """The kernel checks the flags first (an unknown one, TSYNC with a
    listener without TSYNC_ESRCH: EINVAL) and refuses a second listener last
    (EBUSY): the view refused every listener with EBUSY, before the flags."""
    native = run(["/usr/bin/python3", "-c", SECCOMP_FLAGS])
    assert native.stdout.decode().count("EINVAL") == 4, native
    viewed = run(umview_for("root", "--", "/usr/bin/python3", "-c", SECCOMP_FLAGS),
                 env=dict(os.environ, UMVIEW_NOTIF=notif))
    assert (viewed.returncode, viewed.stdout) == (native.returncode, native.stdout), viewed.stderr


# --- the view stays after a filter of its own -------------------------------------------

@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("how", ["filter:errno:getppid:1", "prctl:trace:uname:3", "filter:log:openat"])
def test_a_process_with_its_own_filter_keeps_the_view(prog, scratch, how, notif):
    d, layer = scratch(), scratch()
    victim = os.path.join(d, "victim")
    steps = [how, f"write:{victim}:inside", "fork", f"write:{victim}:child"]
    with open(victim, "w") as f:
        f.write("real\n")
    native = run([prog, *steps])
    assert native.returncode == 0 and "write: ok" in native.stdout.decode()
    with open(victim) as f:
        assert f.read() == "child", "natively the program changes the file"
    with open(victim, "w") as f:
        f.write("real\n")

    viewed = in_view(prog, steps, view="cow", notif=notif, layer=layer)
    assert (viewed.stdout, viewed.returncode) == (native.stdout, native.returncode), viewed.stderr
    with open(victim) as f:
        assert f.read() == "real\n", "a real file changed under the view"
    with open(os.path.join(layer, victim.lstrip("/"))) as f:
        assert f.read() == "child"
