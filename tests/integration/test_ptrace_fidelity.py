"""The ptrace a view emulates, request by request, against the kernel's: each
program in progs/ptrace is a small tracer that prints what it saw; it prints
the same natively and in every view, with notifications on and off (the
monitor's stops differ between the two). docs/internals.md, "Tracers inside
a view"."""
import glob
import os
import re
import shutil
import tempfile

import pytest

from conftest import built_programs, need, run, umview_argv

PROGS = os.path.join(os.path.dirname(__file__), "progs", "ptrace")

# every mode a tracer may run in; a path the traced child opens, as the mode names it
MODES = {
    "no-module": ((), "/etc/hostname"),
    "unreal": (("-p", "unreal"), "/unreal/etc/hostname"),
    "cow": (("-p", "viewfs,mount={layer}:/:cow,except={progs}"), "/etc/hostname"),
    "sandbox": (("--sandbox",), "/etc/hostname"),
}


@pytest.fixture(scope="module")
def progs():
    """progs/ptrace/*.c built in /var/tmp (a sandbox's /tmp is its own)."""
    with built_programs("umview-ptrace-progs-", sorted(glob.glob(os.path.join(PROGS, "*.c")))) as exes:
        yield os.path.dirname(next(iter(exes.values())))


def native_and_viewed(progs, mode, notif, prog, *args, path_arg=False):
    """Run progs/prog natively and in mode; both results. With path_arg the
    mode's path for /etc/hostname is the last argument."""
    opts, path = MODES[mode]
    layer = tempfile.mkdtemp(prefix="umview-layer-")
    try:
        opts = tuple(o.format(layer=layer, progs=progs) for o in opts)
        exe = os.path.join(progs, prog)
        native = run([exe, *args, *(["/etc/hostname"] if path_arg else [])], timeout=60)
        env = dict(os.environ, UMVIEW_NOTIF=notif)
        viewed = run(umview_argv(*opts, "--", exe, *args, *([path] if path_arg else [])), env=env, timeout=60)
    finally:
        shutil.rmtree(layer, ignore_errors=True)
    return native, viewed


# each tracer program, what it shows (see its source), and a line its native
# output must have (it did what it tests)
TRACERS = {
    # PTRACE_SINGLESTEP at a syscall-entry stop steps (it ran on unstopped: 1
    # step where the kernel gives thousands), also over a call the view
    # decides in Python, whose exit stop the monitor takes (it stands for the
    # step's trap) and a notified call it interrupts (that try's trap is not
    # shown)
    "step": (("stepper", "step"), True, rb"steps [1-9]\d{3,} traps [1-9]\d{3,} other 0, then exited 0"),
    # PTRACE_SYSEMU and SYSEMU_SINGLESTEP skip the calls they stop at (EIO before)
    "sysemu": (("stepper", "sysemu"), False, rb"exited 42"),
    "emustep": (("stepper", "emustep"), False, rb"syscall stops 3, then exited 42"),
    # a signal given at a syscall stop is the kernel's (SI_KERNEL), one changed
    # at a signal-delivery stop the tracer's (SI_USER, its pid), one given at
    # an event stop ignored (it was sent by the monitor, SI_TKILL, every time)
    # a clone() with CLONE_PTRACE: the child is its parent's tracer's too, no
    # event (it ran untraced)
    "cloneptrace": (("cloneptrace",), False, rb"grandchild: stopped by 19, event 0\ngrandchild: exited 7"),
    "inject": (("inject",), False, rb"code 128 pid 0, given SIGUSR2\nhandler: sig 12 code 0 pid tracer\n"),
    # waits with nothing to report, which the view answers without the
    # kernel (a blocking one held at its stop, WNOHANG ones by the C core):
    # a signal still ends the blocking one, a later stop or an untraced
    # child's exit still reaches the WNOHANG ones; data requests the C core
    # serves at a stop (PEEKDATA, its EIO, GET_SYSCALL_INFO)
    "waits": (("waitquiet",), False, rb"blocking wait while both run: Interrupted system call\n(.|\n)*"
              rb"peek: 5eedf00d, errno 0\npeek of nothing: -1, errno 5\n(.|\n)*"
              rb"second child stopped: yes, by 19\n(.|\n)*untraced child exited: yes, status 5\nkilled: 2"),
    # strace -f's cycle (blocking wait, WNOHANG waits, GET_SYSCALL_INFO,
    # PTRACE_SYSCALL) over two tracees while SIGALRM interrupts the tracer
    # every 500 us: no ptrace() or WNOHANG wait fails, no stop is lost or
    # seen twice (an answer to a notified call that a signal's interruption
    # lost is given to its restart, not acted on again)
    "sigstorm": (("sigstorm",), False, rb"child 1: getppid entries 1000 exits 1000, exited 0\n"
                 rb"child 2: getppid entries 1000 exits 1000, exited 0\n"
                 rb"ptrace errors 0, WNOHANG errors 0, signals: many\n"),
}


@pytest.mark.parametrize("notif", ["0", "1"])
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("tracer", sorted(TRACERS))
def test_a_tracer_sees_what_it_sees_natively(progs, mode, notif, tracer):
    argv, path_arg, proof = TRACERS[tracer]
    native, viewed = native_and_viewed(progs, mode, notif, *argv, path_arg=path_arg)
    assert native.returncode == 0, native.stderr
    assert re.search(proof, native.stdout), native.stdout
    assert (viewed.returncode, viewed.stdout) == (native.returncode, native.stdout), viewed.stderr


PROC_STATES = """
sleep 30 & s=$!
strace -qq -o /dev/null -p $s & t=$!
# strace has attached and let it run on (natively "t" for a moment between the two)
i=0
until grep -q "TracerPid:.$t$" /proc/$s/status && grep -q "State:.S" /proc/$s/status || [ $i -ge 200 ]; do
    sleep 0.05; i=$((i+1))
done
grep -E "State|TracerPid" /proc/$s/status | sed "s/$t/STRACE/"
cut -d' ' -f3 /proc/$s/stat /proc/$s/task/$s/stat
exec 3< /proc/$$/status; readlink /proc/$$/fd/3 | sed "s/$$/SELF/"; stat -f -c %T /proc/$$/fd/3
grep TracerPid <&3; exec 3<&-
kill -STOP $s; sleep 0.3
grep -E "State|TracerPid" /proc/$s/status /proc/$s/task/$s/status | sed "s/$t/STRACE/; s/$s/PID/g"
kill $t; wait $t 2>/dev/null  # dash says "Terminated" or not, as strace died before the wait or in it
sleep 0.2  # detached, it goes back to its group-stop (natively "R" for a moment)
grep -E "State|TracerPid" /proc/$s/status
cut -d' ' -f3 /proc/$s/stat
kill -CONT $s; sleep 0.2
grep -E "State|TracerPid" /proc/$s/status
kill -KILL $s
"""


@pytest.mark.parametrize("mode", ["no-module", "cow"])
def test_proc_status_shows_the_inner_tracer_and_the_states_of_stops(tmp_path, mode):
    """/proc/PID/status and stat as natively while strace attaches, the
    process stops and strace detaches: TracerPid is strace's (it was the
    monitor's), "t (tracing stop)" only at a stop strace knows of, and the
    process strace left in its group-stop is "T (stopped)" (it was "t"). A
    process's own status shows TracerPid 0 (it showed the monitor), and its
    fd reads as the /proc file, whose filesystem is procfs (it was a memfd)."""
    need("strace")
    script = tmp_path / "states.sh"
    script.write_text(PROC_STATES)
    native = run(["sh", str(script)], timeout=60)
    assert native.returncode == 0 and b"T (stopped)" in native.stdout and b"t (tracing stop)" in native.stdout, native
    layer = tempfile.mkdtemp(prefix="umview-layer-")
    try:
        opts = MODES[mode][0]
        opts = tuple(o.format(layer=layer, progs=tmp_path) for o in opts)
        viewed = run(umview_argv(*opts, "--", "sh", str(script)), timeout=60)
    finally:
        shutil.rmtree(layer, ignore_errors=True)
    assert (viewed.returncode, viewed.stdout, viewed.stderr) == (native.returncode, native.stdout, native.stderr)


OWN_STATUS = """
grep TracerPid /proc/self/status
exec 3< /proc/self/status; readlink /proc/self/fd/3 | sed "s/$$/SELF/"
stat -f -c %T /proc/self/fd/3; python3 -c 'import os; print(os.fstatvfs(3).f_namemax)'
"""


@pytest.mark.parametrize("mode", ["unreal", "cow", "sandbox"])
def test_own_status_before_any_tracer(progs, mode):
    """In a view with a path module, before any inner tracer: a process's
    own status says TracerPid 0 (it said the monitor; strace-D.test run
    alone), and the copy that says so reads as the file, on procfs."""
    native = run(["sh", "-c", OWN_STATUS], timeout=60)
    assert native.stdout.startswith(b"TracerPid:\t0\n/proc/SELF/status\nproc\n"), native
    layer = tempfile.mkdtemp(prefix="umview-layer-")
    try:
        opts = tuple(o.format(layer=layer, progs=progs) for o in MODES[mode][0])
        viewed = run(umview_argv(*opts, "--", "sh", "-c", OWN_STATUS), timeout=60)
    finally:
        shutil.rmtree(layer, ignore_errors=True)
    assert (viewed.returncode, viewed.stdout) == (native.returncode, native.stdout), viewed.stderr


STOPPED = """
sleep 30 & p=$!
kill -STOP $p; sleep 0.3
strace -o "$1" -p $p & s=$!
until grep -q "TracerPid:.$s$" /proc/$p/status; do sleep 0.05; done
sleep 0.5; kill -INT $s; wait $s
echo "reports: $(grep -c 'stopped by SIGSTOP' "$1")"
grep State /proc/$p/status
kill -CONT $p; sleep 0.2; grep State /proc/$p/status
kill -KILL $p
"""


@pytest.mark.parametrize("mode", ["no-module", "unreal"])
def test_strace_p_of_a_stopped_process(tmp_path, mode):
    """strace attaches to a process in its group-stop: one "stopped by
    SIGSTOP" report (there were thousands a second: the LISTEN was followed
    by the interrupt that stacks the new filter, which ended it at once), and
    after the detach the process is stopped, then runs on SIGCONT."""
    need("strace")
    out = tmp_path / "strace.out"
    native = run(["sh", "-c", STOPPED, "sh", str(out)], timeout=60)
    assert native.stdout == b"reports: 1\nState:\tT (stopped)\nState:\tS (sleeping)\n", native
    viewed = run(umview_argv(*MODES[mode][0], "--", "sh", "-c", STOPPED, "sh", str(out)), timeout=60)
    assert (viewed.returncode, viewed.stdout) == (native.returncode, native.stdout), viewed.stderr


@pytest.mark.parametrize("notif", ["0", "1"])
@pytest.mark.parametrize("mode", ["no-module", "unreal"])
def test_a_tracer_under_strace_gets_only_the_stops_it_asked_for(progs, mode, notif):
    """strace traces a tracer: the tracer's child inherited the real
    PTRACE_O_TRACEEXIT the monitor set for strace, and its exit stop went to
    the tracer, which never asked for it."""
    need("strace")
    prog = os.path.join(progs, "tracee_tracer")
    native = run(["strace", "-qq", "-o", "/dev/null", prog], timeout=60)
    assert native.stdout == b"stopped 19 event 0\nexit 3\n", native
    viewed = run(umview_argv(*MODES[mode][0], "--", "strace", "-qq", "-o", "/dev/null", prog),
                 env=dict(os.environ, UMVIEW_NOTIF=notif), timeout=60)
    assert (viewed.returncode, viewed.stdout) == (native.returncode, native.stdout), viewed.stderr


PIDNS = ("sh -c 'true & wait; (sleep 0.1; exit 3) & wait $!; echo $?; "
         "sh -c \"true & exec sleep 0.2\" & wait'")


@pytest.mark.parametrize("notif", ["0", "1"])
def test_a_tracer_in_a_pid_namespace_of_its_own(notif):
    """strace -f as the init of a new pid namespace (unshare -pf): the ids in
    its requests, waits and fork events are its namespace's (they were the
    monitor's, and strace hung on pids it never heard of); a grandchild
    orphaned to it is its own child then, whose exit the kernel reports to
    it, not the view too (strace crashed on the second report)."""
    need("strace", "unshare")
    argv = ["unshare", "-Urpf", "strace", "-f", "-qq", "-e", "trace=exit_group", "-o", "/dev/null", "sh", "-c", PIDNS]
    native = run(argv, timeout=60)
    if native.returncode and b"unshare" in native.stderr:
        pytest.skip("no unprivileged pid namespaces here")
    assert native.stdout == b"3\n", native
    viewed = run(umview_argv("--", *argv), env=dict(os.environ, UMVIEW_NOTIF=notif), timeout=60)
    assert (viewed.returncode, viewed.stdout, viewed.stderr) == (native.returncode, native.stdout, native.stderr)


@pytest.mark.parametrize("notif", ["0", "1"])
@pytest.mark.parametrize("mode", ["no-module", "unreal"])
def test_strace_f_of_a_thread_that_is_not_the_leader_calling_execve(progs, tmp_path, mode, notif):
    """The exec comes with the leader's tid, the other threads exit, the old
    leader reports no death: strace -f logs what it logs natively (it died
    of SIGSEGV on a second exec after the view reported the leader's death
    and kept the execed thread a thread)."""
    need("strace")
    prog = os.path.join(progs, "thread_exec")
    logs = {}
    results = {}
    for where in ("native", "view"):
        log = tmp_path / where
        argv = ["strace", "-f", "-qq", "-e", "trace=execve,exit,exit_group", "-o", str(log), prog]
        if where == "view":
            argv = umview_argv(*MODES[mode][0], "--", *argv)
        results[where] = run(argv, env=dict(os.environ, UMVIEW_NOTIF=notif), timeout=60)
        logs[where] = sorted(re.sub(r"0x[0-9a-f]+|\d{3,}", "N", re.sub(r"^\d+ +", "", line)) for line in log.read_text().splitlines())
    native, viewed = results["native"], results["view"]
    assert native.returncode == 0 and native.stdout == b"execed twice\n", native
    assert any("superseded by execve" in line for line in logs["native"]), logs["native"]
    assert (viewed.returncode, viewed.stdout) == (native.returncode, native.stdout), viewed.stderr
    assert logs["view"] == logs["native"]


@pytest.mark.parametrize("mode", ["unreal", "cow"])
def test_strace_seccomp_bpf_f_sees_a_childs_calls_once(progs, tmp_path, mode):
    """strace --seccomp-bpf -f, where the view notifies the traced calls: the
    monitor interrupts a notified call to show strace its seccomp stop, and
    the exit stop of that interrupted try (-ERESTARTSYS) reached strace, which
    then took every later stop of the child for the other kind ("= ?
    ERESTARTSYS", a syscall_0xfffffffffffffffe line) about 1 run in 2."""
    need("strace")
    argv = ["strace", "-qq", "-e", "signal=none", "-e", "trace=chdir", "--seccomp-bpf", "-f",
            os.path.join(progs, "forkchdir")]

    def calls(out):
        return re.sub(rb"\[pid +\d+\]", b"[pid PID]", out)

    native = run(argv, cwd=tmp_path, timeout=60)
    assert native.returncode == 0 and calls(native.stderr).count(b"chdir(") == 4, native
    layer = tempfile.mkdtemp(prefix="umview-layer-")
    try:
        opts = tuple(o.format(layer=layer, progs=progs) for o in MODES[mode][0])
        for _ in range(6):  # the race took about 1 run in 2
            viewed = run(umview_argv(*opts, "--", *argv), cwd=tmp_path, timeout=60)
            assert (viewed.returncode, calls(viewed.stderr)) == (native.returncode, calls(native.stderr))
    finally:
        shutil.rmtree(layer, ignore_errors=True)


def _heard_early(trace):
    """In strace -f's output: how many times a parent's wait returned a
    child, or its SIGCHLD came, before strace reported that child's exit."""
    early, exited = 0, set()
    for line in trace.decode().splitlines():
        if m := re.match(r"(\d+) +\+\+\+ exited with", line):
            exited.add(m.group(1))
        elif m := re.search(r"wait4.*= (\d+)$|si_pid=(\d+)", line):
            early += (m.group(1) or m.group(2)) not in exited
    return early


@pytest.mark.parametrize("mode", ["no-module", "unreal"])
def test_a_traced_parent_hears_of_its_childs_exit_after_the_tracer(progs, tmp_path, mode):
    """strace -f of a parent that waits for its children: natively strace
    collects a child's exit ("+++ exited") before the parent's wait returns
    and its SIGCHLD comes (the kernel notifies the parent when the tracer
    reaps). The monitor, the real tracer, reaped at once, and the parent
    heard first (17 to 20 of 20 children)."""
    need("strace")
    out = tmp_path / "trace"
    argv = ["strace", "-f", "-q", "-e", "trace=wait4", "-e", "signal=SIGCHLD", "-o", str(out),
            os.path.join(progs, "forkwait")]
    native = run(argv, timeout=60)
    trace = out.read_bytes()
    assert native.returncode == 0 and trace.count(b"+++ exited with") == 21 and not _heard_early(trace), trace
    viewed = run(umview_argv(*MODES[mode][0], "--", *argv), timeout=60)
    trace = out.read_bytes()
    assert viewed.returncode == 0 and trace.count(b"+++ exited with") == 21, viewed.stderr
    assert _heard_early(trace) == 0, trace


@pytest.mark.parametrize("mode", ["no-module", "unreal"])
def test_strace_of_strace_f(progs, tmp_path, mode):
    """Tracers two deep: strace traces strace -f, which traces a program
    that forks; the inner strace's trace is what it is natively (strace's
    poke-ptrace and poke-unaligned tests hung so)."""
    need("strace")
    out = tmp_path / "inner"
    argv = ["strace", "-qq", "-o", "/dev/null", "strace", "-f", "-qq", "-e", "trace=chdir", "-e", "signal=none", "-o", str(out),
            os.path.join(progs, "forkchdir")]

    def calls():
        return re.sub(rb"(?m)^\d+ +", b"", out.read_bytes())

    native = run(argv, cwd=tmp_path, timeout=60)
    expected = calls()
    assert native.returncode == 0 and expected.count(b"chdir(") == 4, (native, expected)
    viewed = run(umview_argv(*MODES[mode][0], "--", *argv), cwd=tmp_path, timeout=60)
    assert (viewed.returncode, calls()) == (0, expected), viewed.stderr


ATTACH_LOOP = """
"$1" 3 "$2" & p=$!
sleep 0.3
timeout -s INT 0.7 strace -qq -p $p -e trace=mkdir -o "$2.trace"; echo "strace $?" >&2
wait $p; echo "status $?"
cat "$2.trace"; rm "$2.trace"
"""


@pytest.mark.parametrize("mode", ["cow", "sandbox"])
def test_strace_p_of_a_process_in_a_loop_of_served_calls(progs, mode):
    """strace -p attaches to a process that makes calls the view serves in
    Python (mkdir of a directory of the lower layer), one after the other:
    every line strace writes is such a call. Attached while a call waited
    for the monitor, the restart's entry stop was taken for the monitor's
    own, and strace saw an exit first, then took every stop for the other
    kind (syscall_0xffffffffffffffef lines: strace's attach-p-cmd test in a
    cow view failed 7 runs in 8)."""
    need("strace")
    made = tempfile.mkdtemp(prefix="umview-mkdirloop-", dir="/var/tmp")
    layer = tempfile.mkdtemp(prefix="umview-layer-")
    argv = ["sh", "-c", ATTACH_LOOP, "sh", os.path.join(progs, "mkdirloop"), made]
    good = re.compile(rb'^mkdir\("[^"]*", 0700(\) += -1 EEXIST \(File exists\)| <detached \.\.\.>)$')

    def bad_lines(r):
        lines = r.stdout.splitlines()
        assert lines[0] == b"status 0" and len(lines) > 10, r
        return [line for line in lines[1:] if not good.match(line)]

    try:
        assert bad_lines(run(argv, timeout=60)) == []
        opts = tuple(o.format(layer=layer, progs=progs) for o in MODES[mode][0])
        for _ in range(2):  # it failed 7 runs in 8
            assert bad_lines(run(umview_argv(*opts, "--", *argv), timeout=60)) == []
    finally:
        shutil.rmtree(layer, ignore_errors=True)
        os.rmdir(made)


@pytest.mark.parametrize("mode", ["unreal", "cow"])
def test_a_signal_strace_injects_at_a_served_call_comes_after_it(progs, tmp_path, mode):
    """strace -e inject=chdir:signal=USR1 on a call the view serves: the
    kernel sends the signal at the entry stop, the call runs, the handler
    then. Here the signal ended the call's wait for the monitor: strace
    showed chdir(".") = ? ERESTARTSYS, and the handler ran before the call
    (strace's qual_inject-signal tests)."""
    need("strace")
    argv = ["strace", "-qq", "-e", "trace=chdir,exit_group", "-e", "inject=chdir:signal=USR1",
            os.path.join(progs, "injectsig")]
    native = run(argv, cwd=tmp_path, timeout=60)
    assert native.returncode == 0 and re.match(rb'chdir\("."\) += 0\n--- SIGUSR1 ', native.stderr), native
    layer = tempfile.mkdtemp(prefix="umview-layer-")
    try:
        opts = tuple(o.format(layer=layer, progs=progs) for o in MODES[mode][0])
        viewed = run(umview_argv(*opts, "--", *argv), cwd=tmp_path, timeout=60)
    finally:
        shutil.rmtree(layer, ignore_errors=True)
    assert (viewed.returncode, viewed.stderr) == (native.returncode, native.stderr)
