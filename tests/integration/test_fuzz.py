"""The monitor survives random system calls from inside a sandbox (issue 13,
item 5): Debian's trinity, run as nobody with a fixed seed and a bounded
number of calls in a cow sandbox of /, pointed at a victim directory in
/var/tmp (files, a subdirectory, a symlink, all nobody's). Natively the same
run changes the victim; in the sandbox no real file changes, the monitor
neither crashes nor hangs, and no process is left behind.

What trinity found is tested one by one, deterministically, in
test_not_dumpable.py and test_sandbox_robustness.py."""
import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time

import pytest

from conftest import NOBODY, as_user, marked_processes, need, need_user, umview_for

pytestmark = pytest.mark.slow

SEED = "4"
CALLS = "15000"
# Calls that reach processes outside the view: it does not virtualize process
# ids, so they would act on other processes of nobody (other tests', and the
# monitor itself when it runs as nobody; kill(-1, ...) ends them all):
# signals, another process's memory, limits, priority, CPUs and profiling.
EXCLUDED = ["kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_send_signal",
            "process_vm_writev", "process_vm_readv", "process_madvise", "pidfd_getfd", "ptrace",
            "prlimit64", "setpriority", "ioprio_set", "sched_setaffinity", "sched_setparam",
            "sched_setscheduler", "sched_setattr", "migrate_pages", "move_pages", "perf_event_open"]


def trinity_args(victim):
    # -q -l off: quiet, no log files; -C 2: two children (2 CPUs);
    # --disable-fds=sockets: trinity 2023.01 crashes building its socket
    # cache on this kind of machine, natively too
    args = ["-q", "-l", "off", "-V", victim, "-s", SEED, "-N", CALLS, "-C", "2", "--disable-fds=sockets"]
    for name in EXCLUDED:
        args += ["-x", name]
    return args


# trinity's own status is printed: umview's exit status is then the shell's,
# and a monitor that dies of a signal shows as one
RUN = 'trinity "$@"; echo "trinity exited $?"'


def make_victim(parent):
    d = os.path.join(parent, "victim")
    os.makedirs(os.path.join(d, "sub"))
    for i in range(1, 6):
        with open(os.path.join(d, f"f{i}"), "w") as f:
            f.write(f"file {i}\n")
    with open(os.path.join(d, "sub", "g"), "w") as f:
        f.write("inner\n")
    os.symlink("f1", os.path.join(d, "link"))
    for root, dirs, files in os.walk(parent):
        for n in [root] + [os.path.join(root, x) for x in dirs + files]:
            os.lchown(n, NOBODY, NOBODY)
    os.chmod(parent, 0o755)
    return d


def checksum(top):
    """Names, kinds, modes, owners, sizes, mtimes, ctimes, contents and
    symlink targets of everything under top (atimes: reads change them)."""
    out = []
    for root, dirs, files in os.walk(top):
        dirs.sort()
        for n in [root] + sorted(os.path.join(root, x) for x in dirs + files):
            st = os.lstat(n)
            if stat.S_ISREG(st.st_mode):
                # the first 64 MiB: trinity may truncate a file to terabytes
                # (sparse); what lies further is in its size and times
                h = hashlib.sha256()
                with open(n, "rb") as f:
                    for _ in range(64):
                        chunk = f.read(1 << 20)
                        if not chunk:
                            break
                        h.update(chunk)
                what = h.hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                what = os.readlink(n)
            else:
                what = None
            out.append((os.path.relpath(n, top), st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns,
                        st.st_ctime_ns, what))
    return out


IPC = {"shm": "-m", "msg": "-q", "sem": "-s"}


def ipc_of_nobody():
    """The System V IPC objects nobody made: {(kind, id)}. Process ids and
    IPC are not virtualized: trinity's shmget, msgget and semget make them
    in the host's namespace, in a view as natively, and they outlive it
    (docs/security.md)."""
    found = set()
    for kind in IPC:
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                head = f.readline().split()
                for line in f:
                    row = dict(zip(head, line.split()))
                    if row.get("cuid") == str(NOBODY):
                        found.add((kind, row[head[1]]))
        except OSError:
            pass
    return found


@pytest.fixture
def scratch():
    """A directory in /var/tmp (a sandbox has a /tmp of its own) that nobody
    may enter: the victim and trinity's working directory."""
    need("trinity")
    need_user("nobody")
    d = tempfile.mkdtemp(prefix="umview-fuzz-", dir="/var/tmp")
    work = os.path.join(d, "work")
    os.mkdir(work)
    victim = make_victim(d)
    ipc = ipc_of_nobody()
    yield d, victim, work
    shutil.rmtree(d)
    for kind, ident in ipc_of_nobody() - ipc:
        subprocess.run(["ipcrm", IPC[kind], ident], capture_output=True)


def test_natively_trinity_changes_the_victim(scratch):
    top, victim, work = scratch
    before = checksum(top)
    r = subprocess.run(as_user("nobody", ["sh", "-c", RUN, "sh", *trinity_args(victim)]), cwd=work,
                       capture_output=True, timeout=300)
    assert b"trinity exited 0" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert checksum(victim) != before


def _left_behind(before):
    # the janitor of the sandbox exits once the monitor is gone
    deadline = time.monotonic() + 5
    while True:
        left = [p for p in marked_processes() if p[0] not in before]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


@pytest.mark.parametrize("monitor", ["nobody", "root"])
def test_trinity_as_nobody_in_a_sandbox_changes_no_real_file(scratch, monitor):
    """monitor nobody: trinity's children make themselves not dumpable, so
    their file calls fail with EACCES (test_not_dumpable.py); the monitor
    must still survive them all. monitor root: it reads them, and serves
    them all (trinity switches to nobody inside the view)."""
    need_user(monitor)
    top, victim, work = scratch
    before = checksum(top)
    others = {p[0] for p in marked_processes()}
    command = ["sh", "-c", RUN, "sh", *trinity_args(victim)]
    if monitor == "root":
        command = as_user("nobody", command)
    try:
        r = subprocess.run(umview_for(monitor, "--sandbox", "--", *command), cwd=work, capture_output=True,
                           timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("the sandbox hung: trinity did not end in 240 s")
    out = r.stdout.decode(errors="replace")
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, f"umview ended with {r.returncode}:\n{err[-3000:]}"
    assert "Traceback" not in err, err[-3000:]
    # trinity stops at -N or one call past it, as its children race to the limit
    ran = re.search(r"Ran (\d+) syscalls", out + err)
    assert ran and int(ran.group(1)) >= int(CALLS) and "trinity exited 0" in out, (out + err)[-3000:]
    left = _left_behind(others)
    assert not left, f"left behind: {left}"
    assert checksum(top) == before


@pytest.mark.parametrize("seed, notif", [("4242", "notif-on"), ("7", "notif-off")])
def test_trinity_with_a_fifo_among_its_victims_ends_by_itself(scratch, seed, notif):
    """A FIFO among trinity's victim files: an exec of it made the monitor
    open it for reading, and wait for a writer with every process of the
    view (issue 28; seed 4242 hung 3 runs of 3). The run ends by itself,
    changes no real file and leaves no process and no sandbox directory."""
    top, victim, work = scratch
    os.mkfifo(os.path.join(victim, "fifo"))
    os.lchown(os.path.join(victim, "fifo"), NOBODY, NOBODY)
    before = checksum(top)
    others = {p[0] for p in marked_processes()}
    tmp = tempfile.mkdtemp(prefix="umview-fuzz-tmp-", dir="/tmp")
    os.chmod(tmp, 0o777)
    env = dict(os.environ, TMPDIR=tmp)
    env.pop("UMVIEW_NOTIF", None)
    if notif == "notif-off":
        env["UMVIEW_NOTIF"] = "0"
    args = trinity_args(victim)
    args[args.index("-s") + 1] = seed
    try:
        try:
            r = subprocess.run(umview_for("nobody", "--sandbox", "--", "sh", "-c", RUN, "sh", *args), cwd=work,
                               env=env, capture_output=True, timeout=240)
        except subprocess.TimeoutExpired:
            pytest.fail("the sandbox hung: trinity did not end in 240 s")
        out = (r.stdout + r.stderr).decode(errors="replace")
        assert r.returncode == 0 and "trinity exited 0" in out, out[-3000:]
        assert not _left_behind(others), f"left behind: {_left_behind(others)}"
        assert os.listdir(tmp) == [], "the sandbox's directory was left"
        assert checksum(top) == before
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_stress_ng_dentry_in_a_sandbox_finds_the_files_it_made(user):
    """stress-ng --dentry makes, looks up and removes thousands of files under
    a storm of SIGALRM: in a sandbox its open(O_CREAT) got ENOENT and its
    rmdir ENOTEMPTY, 1 run in 4 (calls restarted after a signal ran on the
    real tree; test_sandbox_robustness.py has the deterministic test)."""
    need("stress-ng")
    need_user(user)
    work = tempfile.mkdtemp(prefix="umview-fuzz-stress-", dir="/var/tmp")
    try:
        os.chmod(work, 0o777)
        before = checksum(work)
        r = subprocess.run(umview_for(user, "--sandbox", "--", "stress-ng", "--dentry", "2", "-t", "5"), cwd=work,
                           capture_output=True, timeout=120)
        after = checksum(work)
    finally:
        shutil.rmtree(work)
    out = (r.stdout + r.stderr).decode(errors="replace")
    assert r.returncode == 0 and "fail" not in out and "successful run completed" in out, out[-3000:]
    assert after == before
