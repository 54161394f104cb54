"""Escape attempts from a sandbox (issue 13, item 4): no ordinary kernel
interface lets a process in `umview --sandbox` (a copy-on-write view of /)
change a real file.

One small C program per interface (progs/escape/*.c) takes the path of a
victim file, in a directory of its own in /var/tmp that the user running it
may write, and tries to change it through that interface. Each runs as root
and as nobody, with seccomp notifications on (UMVIEW_NOTIF unset) and off
(UMVIEW_NOTIF=0):

- natively (as that user, on a fresh victim directory) it changes the victim
  directory, so the test cannot pass vacuously;
- in `umview --sandbox -- PROG VICTIM` the real victim directory (names,
  contents, modes, owners, mtimes and ctimes, inode flags) stays as it was:
  the program may fail with an errno, or its change lands in the layer; and
  no process it started outlives the view.

The interfaces (program, mode):

- io_uring: IORING_OP_OPENAT+WRITE, RENAMEAT, UNLINKAT, MKDIRAT, raw system
  calls (io_uring.c write|rename|unlink|mkdir);
- paths through /proc/self/root/VICTIM, /proc/<own pid>/root/VICTIM,
  /proc/<parent pid>/root/VICTIM, /proc/self/cwd/NAME after a chdir to the
  victim's directory (proc_link.c);
- a read-only fd of the victim reopened for writing through /proc/self/fd/N,
  /proc/<own pid>/fd/N, /proc/self/task/TID/fd/N, /dev/fd/N and
  openat(<fd of /proc/self/fd>, "N") (reopen_fd.c);
- FS_IOC_SETFLAGS and FS_IOC_FSSETXATTR on a read-only fd, toggling the
  no-dump flag (inode_flags.c; skipped where the filesystem has no flags);
- openat2 with RESOLVE_IN_ROOT from the parent of the victim's directory,
  path "/DIR/victim" (openat2_in_root.c);
- a race on the path buffer of open(O_WRONLY), flipped between /dev/null (a
  path the view leaves to the kernel) and the victim by a thread, a CLONE_VM
  process, or a thread of the parent of a vfork child making the opens
  (path_race.c; 5000 tries, more until one wins);
- a thread overwriting, with the victim's path, the path the view writes
  below the stack pointer of the thread calling chmod (below_sp.c: a probe
  call finds where; 2000 tries);
- a race on a path component in a directory of /tmp: a directory holding a
  file of the victim's name, removed and replaced by a symlink to the
  victim's directory and back, and such a directory swapped with such a
  symlink by RENAME_EXCHANGE, and that exchange raced by a chmod rather
  than an open (component_race.c; 5000 tries, more until one wins; marked
  slow: about 10 s each in a view);
- unshare(CLONE_NEWUSER|CLONE_NEWNS), a bind mount of the victim's directory
  on a directory in /dev/shm (a path the view leaves to the kernel), a write
  there (userns_bind.c);
- chroot into the parent of the victim's directory, then a write by the
  absolute path from there (chroot_parent.c; as nobody in a new user
  namespace);
- umount2("/") and umount2("/", MNT_DETACH), then a write (umount_root.c; as
  root in a mount namespace of its own: unshare -m);
- as root: open_by_handle_at of the victim's handle for writing
  (by_handle.c), acct(VICTIM) (acct.c);
- a clone(CLONE_UNTRACED) child writing the victim two seconds after its
  parent (the view's command) has exited (untraced.c): it must neither
  change the victim nor be running when umview returns;
- a symlink made in the view (in the real layer directory) pointing into the
  lower tree, written through (layer_symlink.c); and the layer directory is
  not reachable by its real path from inside
  (test_the_layer_directory_is_not_reachable_from_inside);
- a seccomp user-notification filter of the process's own whose supervisor
  answers CONTINUE (own_notif.c);
- the monitor (the TracerPid; natively the parent): PTRACE_SEIZE and a
  syscall injection that makes it write the victim, and /proc/PID/mem opened
  read-write (ptrace_monitor.c seize|mem; mem changes no file: natively it
  succeeds, in the view it must fail);
- i386 fchmod and chmod through int $0x80 from a 64-bit process, the path in
  MAP_32BIT memory (i386_calls.c);
- x32 openat and fchmod (x32_calls.c; skipped where the kernel has no x32);
- a race on a path buffer in memory another process writes: a file mapped
  MAP_SHARED or MAP_PRIVATE (not yet written by the process), a memfd,
  shared anonymous memory; a forked child flips it between the victim and a
  name that does not exist, while the process makes chmod, chown (root),
  setxattr, utimensat or truncate on it (shared_map.c; 20,000 tries).

Below these: abstract sockets and signals to the host, userfaultfd and
fanotify, an exec of a FIFO, core files, and how umview ends on SIGTERM and
SIGKILL (issue 28).

Interfaces the monitor does not stop yet are marked xfail(raises=Escaped),
with the reason: only what the view let through counts as the expected
failure (a native run that fails is a failure). The mark is strict except
for the races (RACES: a run may lose every try): when a fix lands, the case
passes and its mark must go.
"""
import ctypes
import fcntl
import glob
import hashlib
import os
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass

import pytest

from conftest import NOBODY, as_user, need, need_user, processes_with_arg, run, umview_for, view_dirs

PROGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs", "escape")
USERS = ["root", "nobody"]
NOTIF = {"notif-on": None, "notif-off": "0"}
RUN_VAR = "UMVIEW_ESCAPE_RUN"
UNSUPPORTED = 77  # a program's exit status: this machine lacks the interface
FS_IOC_GETFLAGS = 0x80086601


@dataclass(frozen=True)
class Case:
    prog: str
    args: tuple = ()
    users: tuple = tuple(USERS)
    changes: bool = True  # natively the victim changes (else: natively the calls succeed)
    own_mount_ns: bool = False  # as root, run in a mount namespace of its own
    slow: bool = False

    @property
    def id(self):
        return "-".join((self.prog, *self.args))


CASES = [
    *(Case("io_uring", (op,)) for op in ("write", "rename", "unlink", "mkdir")),
    *(Case("proc_link", (mode,)) for mode in ("root-self", "root-pid", "root-parent", "cwd")),
    *(Case("reopen_fd", (mode,)) for mode in ("proc-fd", "pid-fd", "task-fd", "dev-fd", "openat")),
    *(Case("inode_flags", (mode,)) for mode in ("setflags", "fsxattr")),
    Case("openat2_in_root"),
    *(Case("path_race", (mode,)) for mode in ("thread", "clone-vm", "vfork")),
    Case("below_sp"),
    *(Case("component_race", (mode,), slow=True) for mode in ("symlink", "exchange", "chmod")),
    Case("userns_bind"),
    Case("chroot_parent"),
    *(Case("umount_root", (mode,), own_mount_ns=True) for mode in ("plain", "detach")),
    Case("by_handle", users=("root",)),
    Case("acct", users=("root",)),
    Case("untraced"),
    Case("layer_symlink"),
    Case("own_notif"),
    Case("ptrace_monitor", ("seize",)),
    Case("ptrace_monitor", ("mem",), changes=False),
    *(Case("i386_calls", (mode,)) for mode in ("fchmod", "chmod")),
    *(Case("x32_calls", (mode,)) for mode in ("open", "fchmod")),
    *(Case("shared_map", ("file-shared", call), users=("root",) if call == "chown" else tuple(USERS))
      for call in ("chmod", "chown", "setxattr", "utimensat", "truncate")),
    *(Case("shared_map", (kind, "chmod")) for kind in ("file-private", "memfd", "anon")),
]

# What still escapes: (case id, user or None for any, notif id or None for any) -> why
ESCAPES = {}
# races: the program may lose every try in a run (then no change is seen)
RACES = {"path_race-thread", "path_race-clone-vm", "path_race-vfork", "below_sp", "component_race-symlink",
         "component_race-exchange", "component_race-chmod", *(c.id for c in CASES if c.prog == "shared_map")}


def escape_reason(case, user, notif):
    for (cid, u, n), why in ESCAPES.items():
        if cid == case.id and u in (None, user) and n in (None, notif):
            return why
    return None


class Escaped(AssertionError):
    """What a program did in the view reached the real tree (or the monitor)."""


def escape_unless(held, message):
    if not held:
        raise Escaped(message)


def params():
    out = []
    for case in CASES:
        for user in case.users:
            for notif in NOTIF:
                why = escape_reason(case, user, notif)
                # only an Escaped counts: a native run that fails is a failure
                xfail = pytest.mark.xfail(strict=case.id not in RACES, raises=Escaped, reason=f"escapes: {why}")
                marks = [xfail] if why else []
                if case.slow:
                    marks.append(pytest.mark.slow)
                out.append(pytest.param(case, user, notif, id=f"{case.id}-as-{user}-{notif}", marks=marks))
    return out


@pytest.fixture(scope="module")
def progs():
    """progs/escape/*.c built where every user may run them, also inside a
    sandbox (whose /tmp is its own: /var/tmp). The directory, and why each
    program that could not be built (old kernel headers?) was not."""
    need("gcc")
    out = tempfile.mkdtemp(prefix="umview-escape-progs-", dir="/var/tmp")
    os.chmod(out, 0o755)
    try:
        unbuilt = {}
        for src in sorted(glob.glob(os.path.join(PROGS, "*.c"))):
            name = os.path.basename(src)[:-2]
            r = run(["gcc", "-O1", "-Wall", "-Wno-unused-function", "-pthread", "-o", os.path.join(out, name), src])
            if r.returncode:
                unbuilt[name] = r.stderr.decode(errors="replace")[-400:]
        yield out, unbuilt
    finally:
        shutil.rmtree(out, ignore_errors=True)


@pytest.fixture
def victim_dirs():
    """victim_dirs(user): a new directory in /var/tmp holding "victim", both
    the user's; all removed afterwards."""
    made = []

    def make(user):
        d = tempfile.mkdtemp(prefix="umview-escape-", dir="/var/tmp")
        made.append(d)
        os.chmod(d, 0o755)
        path = os.path.join(d, "victim")
        with open(path, "w") as f:
            f.write("orig\n")
        os.chmod(path, 0o644)
        if user != "root":
            os.chown(d, NOBODY, NOBODY)
            os.chown(path, NOBODY, NOBODY)
        return path
    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)
        # userns_bind's mount point, should it have failed to remove it
        shutil.rmtree(f"/dev/shm/escape-bind-{os.path.basename(d)}", ignore_errors=True)


def _inode_flags(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        return struct.unpack("i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 4))[0]
    except OSError:
        return None
    finally:
        os.close(fd)


def snapshot(d):
    """Everything about the tree d that a change would show: names, types
    and modes, owners, sizes, contents, symlink targets, mtimes, ctimes,
    inode flags (not atimes: reading a file is no change)."""
    out = {}
    for root, dirs, files in os.walk(d):
        for name in ["", *dirs, *files]:
            path = os.path.join(root, name) if name else root
            st = os.lstat(path)
            if os.path.islink(path):
                data = os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    data = hashlib.sha256(f.read()).hexdigest()
            else:
                data = None
            out[os.path.relpath(path, d)] = (st.st_mode, st.st_uid, st.st_gid, st.st_size, data,
                                             st.st_mtime_ns, st.st_ctime_ns, _inode_flags(path))
    return out


def _left_running(run_id, progs):
    """pids of the test programs (their executable is in progs) still
    running with RUN_VAR=run_id in their environment, not dying (a tracee
    has SIGKILL pending when its tracer exits)."""
    needle = f"{RUN_VAR}={run_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if not os.readlink(f"/proc/{entry}/exe").startswith(progs + "/"):
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:  # gone meanwhile
            continue
        pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
        if status["State"].split()[0] not in ("Z", "X") and not pending & (1 << (signal.SIGKILL - 1)):
            found.append(int(entry))
    return found


def _wait_for_exit(pids, timeout):
    """Wait until the processes pids (not children) have ended, timeout
    seconds at most for all; kill those still running then."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except OSError:  # gone already
            continue
        try:
            if not select.select([fd], [], [], max(0, deadline - time.monotonic()))[0]:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.close(fd)


def attempt(argv, notif, progs, timeout=60):
    """Run argv (umview) with a marker in its environment. Returns its
    result (None if it had to be killed after timeout seconds) and the pids
    of the test programs still running when it returned: those outlived the
    view. They are let finish (untraced's child writes two seconds after its
    parent is gone: if that write escapes, the victim shows it), then
    killed if still there after timeout seconds."""
    run_id = uuid.uuid4().hex
    env = dict(os.environ, **{RUN_VAR: run_id})
    env.pop("UMVIEW_NOTIF", None)
    if NOTIF[notif] is not None:
        env["UMVIEW_NOTIF"] = NOTIF[notif]
    # output to files, not pipes: the wait is for umview, not for whoever holds its stdout
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
        try:
            proc.wait(timeout)
            hung = False
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            hung = True
        left = _left_running(run_id, progs)
        _wait_for_exit(left, timeout)
        if hung:
            return None, left
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, proc.returncode, out.read(), err.read()), left


def command(progs, case, victim):
    # through sh: the program's parent is a process of the same user (natively and in the view)
    return ["sh", "-c", '"$@"; exit $?', "sh", os.path.join(progs, case.prog), *case.args, victim]


def mount_ns(case, user):
    """umount_root as root: in a mount namespace of its own, where a real
    umount of / harms nothing else (as nobody it has no right to)."""
    if case.own_mount_ns and user == "root":
        need("unshare")
        return ["unshare", "--mount", "--propagation", "private", "--"]
    return []


def built(progs, name):
    """The path of progs/escape/NAME.c built (the progs fixture), or a skip."""
    out, unbuilt = progs
    if name in unbuilt:
        pytest.skip(f"cannot build {name}.c: {unbuilt[name]}")
    return os.path.join(out, name)


def _output(r):
    return (r.stdout + r.stderr).decode(errors="replace").strip()


@pytest.mark.parametrize("case, user, notif", params())
def test_an_escape_attempt_from_a_sandbox_leaves_the_real_files_untouched(progs, victim_dirs, case, user, notif):
    need_user(user)
    progs, unbuilt = progs
    if case.prog in unbuilt:
        pytest.skip(f"cannot build {case.prog}.c: {unbuilt[case.prog]}")
    try:
        # natively the program does change the victim (so the test can fail)
        victim = victim_dirs(user)
        before = snapshot(os.path.dirname(victim))
        # (its output is read to the end: a child that outlives it, holding stdout, has finished)
        native = run(mount_ns(case, user) + as_user(user, command(progs, case, victim)), timeout=60)
        for _ in range(2):
            # a race the machine's load kept the program from winning: again
            if native.returncode != 1 or b"no open reached the victim" not in native.stderr:
                break
            native = run(mount_ns(case, user) + as_user(user, command(progs, case, victim)), timeout=60)
        if native.returncode == UNSUPPORTED:
            pytest.skip(_output(native))
        assert native.returncode == 0, f"natively the program failed: {_output(native)}"
        if case.changes:
            assert snapshot(os.path.dirname(victim)) != before, "natively the program changed nothing"

        victim = victim_dirs(user)
        before = snapshot(os.path.dirname(victim))
        viewed, left = attempt(mount_ns(case, user) + umview_for(user, "--sandbox", "--",
                                                                 *command(progs, case, victim)), notif, progs)
        escape_unless(snapshot(os.path.dirname(victim)) == before,
                      f"a real file changed: {_output(viewed) if viewed else 'the view hung'}")
        assert viewed is not None, "the view hung (killed)"
        escape_unless(not left, f"processes of the program outlived the view: {left}")
        if not case.changes:
            escape_unless(viewed.returncode != 0, f"the calls succeeded in the view: {_output(viewed)}")
    finally:
        if case.prog == "acct" and os.geteuid() == 0:
            ctypes.CDLL(None, use_errno=True).acct(None)  # never left on


# inside the sandbox: make a file (it lands in the layer), wait for the
# layer's real path on stdin, then try to reach that file and to write there
REACH = r'''
echo inside > "$1/made-inside" || exit 1
echo ready
read -r layer
copy="$layer$1/made-inside"
if cat "$copy" 2>/dev/null; then echo "read $copy"; fi
if ls "$layer" >/dev/null 2>&1; then echo "listed $layer"; fi
if ln -s "$1/victim" "$layer$1/link" 2>/dev/null; then echo "made $layer$1/link"; fi
echo done
'''


@pytest.mark.parametrize("user", USERS)
def test_the_layer_directory_is_not_reachable_from_inside(victim_dirs, user):
    """A sandbox's layer (the real directory holding what the view changed)
    is not reachable by its real path from inside: a process cannot make a
    symlink there pointing into the lower tree, or change the copies."""
    need_user(user)
    vdir = os.path.dirname(victim_dirs(user))
    # the sandbox's directory is made in $TMPDIR: one of this test's own in /tmp
    tmp = tempfile.mkdtemp(prefix="umview-escape-tmp-", dir="/tmp")
    os.chmod(tmp, 0o777)
    proc = subprocess.Popen(umview_for(user, "--sandbox", "--", "sh", "-c", REACH, "sh", vdir),
                            env=dict(os.environ, TMPDIR=tmp),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n", proc.stderr.read() if proc.poll() is not None else ""
        made = os.listdir(tmp)
        assert len(made) == 1, f"not one sandbox directory in {tmp}: {made}"
        layer = os.path.join(tmp, made[0], "layer")
        # from outside, the user reaches the file made inside at its real path
        native = run(as_user(user, ["cat", layer + vdir + "/made-inside"]))
        assert native.stdout == b"inside\n", native.stderr
        out, err = proc.communicate(layer.encode() + b"\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    assert out == b"done\n", (out + err).decode(errors="replace")
    assert not os.path.exists(vdir + "/made-inside") and not os.path.lexists(vdir + "/link")


# exec of a FIFO, and of a script whose interpreter is one: natively EACCES
# at once (the kernel opens neither); the monitor looks at what an exec runs
# (a #! line, an ELF loader) and must not wait for a writer as an open for
# reading would
EXEC_FIFO = r'''
import errno, os, sys
fifo, script = sys.argv[1], sys.argv[2]
for path in (fifo, script):
    try:
        os.execv(path, [path])
    except OSError as e:
        print(errno.errorcode.get(e.errno, e.errno))
'''


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("mode", ["sandbox", "unreal", "cow"])
def test_an_exec_of_a_fifo_gets_the_kernels_errno_and_the_view_goes_on(victim_dirs, mode, user, notif):
    need_user(user)
    d = os.path.dirname(victim_dirs(user))
    fifo, script = os.path.join(d, "fifo"), os.path.join(d, "script")
    os.mkfifo(fifo, 0o755)
    with open(script, "w") as f:
        f.write(f"#!{fifo}\n")
    os.chmod(script, 0o755)
    if user != "root":
        os.chown(fifo, NOBODY, NOBODY)
        os.chown(script, NOBODY, NOBODY)
    argv = ["/usr/bin/python3", "-c", EXEC_FIFO]
    native = run(as_user(user, argv + [fifo, script]), timeout=60)
    assert native.stdout == b"EACCES\nEACCES\n", _output(native)
    if mode == "sandbox":
        view = ["--sandbox", "--"] + argv + [fifo, script]
    elif mode == "unreal":
        view = ["-p", "unreal", "--"] + argv + ["/unreal" + fifo, "/unreal" + script]
    else:
        layer = os.path.join(d, "layer")  # removed with d
        os.mkdir(layer)
        if user != "root":
            os.chown(layer, NOBODY, NOBODY)
        view = ["-p", f"viewfs,mount={layer}:/:cow", "--"] + argv + [fifo, script]
    viewed, _ = attempt(umview_for(user, *view), notif, "/nonexistent", timeout=30)
    assert viewed is not None, "the view hung on the FIFO (killed)"
    assert viewed.stdout == native.stdout, _output(viewed)


# ---------------------------------------------------------------------------
# What reaches the host without a path (issue 28): abstract AF_UNIX names,
# signals, and the interfaces that let a process hold others up.

ABSTRACT_CLIENT = r'''
import socket, sys
kind, name = sys.argv[1], b"\0" + sys.argv[2].encode()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM if kind == "stream" else socket.SOCK_DGRAM)
try:
    if kind == "stream":
        s.connect(name)
        s.sendall(b"write")
        s.recv(1)
    else:
        s.sendto(b"write", name)
    print("reached")
except OSError as e:
    print("refused", e.errno)
'''


class HostDaemon:
    """A process outside the view listening on an abstract name (a session
    bus, an X server): each message it gets makes it append to the victim."""

    def __init__(self, kind, victim):
        import socket
        import threading

        self.name = f"umview-test-{uuid.uuid4().hex}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM if kind == "stream" else socket.SOCK_DGRAM)
        self.sock.bind(b"\0" + self.name.encode())
        self.kind, self.victim, self.done = kind, victim, False
        if kind == "stream":
            self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.done:
            try:
                if self.kind == "stream":
                    conn, _ = self.sock.accept()
                    with conn:
                        conn.settimeout(5)
                        if conn.recv(16):
                            self._write()
                            conn.sendall(b"k")
                elif self.sock.recv(16):
                    self._write()
            except OSError:
                continue

    def _write(self):
        with open(self.victim, "a") as f:
            f.write("written by the host's daemon\n")

    def close(self):
        self.done = True
        self.thread.join()
        self.sock.close()


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("kind", ["stream", "dgram"])
def test_an_abstract_socket_of_the_host_is_out_of_reach_of_a_sandbox(victim_dirs, kind, user, notif):
    """A daemon of the host listening on an abstract name changes a file
    when asked: natively the client reaches it; from --sandbox it gets
    EPERM (Landlock's scope) and the file stays; --sandbox=net keeps such
    names reachable (it is the network preset)."""
    need_user(user)
    from umview import landlock

    if landlock.abi() < 6:
        pytest.skip("Landlock ABI 6 (Linux 6.12) scopes abstract sockets")
    victim = victim_dirs(user)
    daemon = HostDaemon(kind, victim)
    try:
        argv = ["/usr/bin/python3", "-c", ABSTRACT_CLIENT, kind, daemon.name]
        native = run(as_user(user, argv), timeout=60)
        assert native.stdout == b"reached\n", _output(native)
        for _ in range(50):
            if "daemon" in open(victim).read():
                break
            time.sleep(0.1)
        assert "daemon" in open(victim).read(), "natively the daemon changed nothing"
        with open(victim, "w") as f:
            f.write("orig\n")
        before = snapshot(os.path.dirname(victim))
        viewed, _ = attempt(umview_for(user, "--sandbox", "--", *argv), notif, "/nonexistent")
        assert viewed is not None, "the view hung"
        time.sleep(0.3)
        escape_unless(snapshot(os.path.dirname(victim)) == before and viewed.stdout.startswith(b"refused 1\n"),
                      f"the sandbox reached the host's daemon: {_output(viewed)}")
        net, _ = attempt(umview_for(user, "--sandbox=net", "--", *argv), notif, "/nonexistent")
        assert net is not None and net.stdout == b"reached\n", _output(net) if net else "hung"
    finally:
        daemon.close()


# inside: wait for the pids to try, then signal each; outside they are a
# process of the same user, the monitor and its janitor
SIGNALLER = r'''
import os, signal, sys
print("ready", flush=True)
for pid in sys.stdin.readline().split():
    try:
        os.kill(int(pid), signal.SIGKILL)
        print(pid, "killed")
    except OSError as e:
        print(pid, "refused", e.errno)
'''


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
def test_a_sandbox_cannot_signal_the_host_the_monitor_or_its_janitor(user, notif):
    need_user(user)
    from umview import landlock

    if landlock.abi() < 6:
        pytest.skip("Landlock ABI 6 (Linux 6.12) scopes signals")
    marker = f"umview-test-{uuid.uuid4().hex}"
    tmp = tempfile.mkdtemp(prefix="umview-escape-tmp-", dir="/tmp")
    os.chmod(tmp, 0o777)
    host = subprocess.Popen(as_user(user, ["sleep", "300"]))
    try:
        # natively the process kills the other one
        native = subprocess.run(as_user(user, ["/usr/bin/python3", "-c", SIGNALLER, marker]),
                                input=f"{host.pid}\n".encode(), capture_output=True, timeout=60)
        assert native.stdout.endswith(f"{host.pid} killed\n".encode()), _output(native)
        assert host.wait(10) == -signal.SIGKILL
        host = subprocess.Popen(as_user(user, ["sleep", "300"]))
        env = dict(os.environ, TMPDIR=tmp)
        if NOTIF[notif] is not None:
            env["UMVIEW_NOTIF"] = NOTIF[notif]
        view = subprocess.Popen(umview_for(user, "--sandbox", "--", "/usr/bin/python3", "-c", SIGNALLER, marker),
                                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert view.stdout.readline() == b"ready\n"
            ours = processes_with_arg(marker.encode())
            janitor = [p for p in ours if _comm(p) == "umview-janitor"]
            monitor = [p for p in ours if p == view.pid or _comm(p) == "umview"]
            assert janitor and monitor, (ours, [_comm(p) for p in ours])
            targets = [host.pid, *monitor, *janitor]
            out, err = view.communicate(" ".join(map(str, targets)).encode() + b"\n", timeout=60)
        finally:
            if view.poll() is None:
                view.kill()
                view.wait()
        lines = out.decode().split("\n")
        escape_unless(all(f"{p} refused 1" in lines for p in targets), f"a signal left the sandbox: {out} {err}")
        assert host.poll() is None, "the host's process died"
        assert view.returncode == 0, err
        assert os.listdir(tmp) == [], "the sandbox's directory was left"
    finally:
        host.kill()
        host.wait()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
def test_a_sandbox_cannot_make_what_holds_up_the_view_or_the_host(progs, user, notif):
    """userfaultfd (by the call or /dev/userfaultfd's ioctl) and fanotify:
    what the user can make natively, the sandbox refuses (EPERM; EACCES for
    the device's open, a normal user's errno)."""
    need_user(user)
    holders = built(progs, "holders")
    native = run(as_user(user, [holders]), timeout=60)
    assert native.returncode == 0, _output(native)
    can = [line.split()[0] for line in native.stdout.decode().splitlines() if line.endswith(" ok")]
    assert can, f"natively {user} can make none of them: {_output(native)}"
    viewed, _ = attempt(umview_for(user, "--sandbox", "--", holders), notif, "/nonexistent")
    assert viewed is not None, "the view hung"
    got = dict(line.split() for line in viewed.stdout.decode().splitlines())
    escape_unless(not any(v == "ok" for v in got.values()), f"made in the sandbox: {got}")
    assert got["userfaultfd"] == "EPERM" and got["fanotify"] == "EPERM", got
    assert got["dev-userfaultfd"] in ("EACCES", "ENOENT"), got


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("what", ["ignores-sigterm", "userfaultfd-stall"])
def test_umview_ends_within_its_grace_time_after_sigterm_whatever_the_view_does(progs, what, user, notif):
    """A command that ignores SIGTERM, or one that holds the monitor in a
    page of a userfaultfd (outside a sandbox, which refuses those): a SIGTERM
    to umview ends it within UMVIEW_TERM_GRACE seconds and five more, and
    nothing of the view runs on."""
    need_user(user)
    marker = f"umview-test-{uuid.uuid4().hex}"
    layer = tempfile.mkdtemp(prefix="umview-escape-layer-", dir="/var/tmp")
    try:
        if user != "root":
            os.chown(layer, NOBODY, NOBODY)
        if what == "userfaultfd-stall":
            if user != "root":
                pytest.skip("a normal user's userfaultfd handles no kernel faults (vm.unprivileged_userfaultfd)")
            cmd = ["sh", "-c", 'exec "$0"', built(progs, "stall"), marker]
        else:
            cmd = ["sh", "-c", 'trap "" TERM INT; echo ready; sleep 300; : "$0"', marker]
        env = dict(os.environ, UMVIEW_TERM_GRACE="2")
        if NOTIF[notif] is not None:
            env["UMVIEW_NOTIF"] = NOTIF[notif]
        view = subprocess.Popen(umview_for(user, "-p", f"viewfs,mount={layer}:/:cow", "--", *cmd), env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            line = view.stdout.readline()
            if line == b"" and view.wait(10) == 77:
                pytest.skip("no userfaultfd here")
            assert line == b"ready\n", view.stderr.read()
            time.sleep(0.5)  # into the open (or the sleep)
            start = time.monotonic()
            view.send_signal(signal.SIGTERM)
            view.wait(30)
            took = time.monotonic() - start
        finally:
            if view.poll() is None:
                view.kill()
                view.wait()
        assert took < 2 + 5 + 3, f"umview took {took:.1f} s to end after SIGTERM"
        assert b"grace time" in view.stderr.read()
        time.sleep(0.5)
        assert processes_with_arg(marker.encode()) == [], "processes of the view outlived it"
    finally:
        shutil.rmtree(layer, ignore_errors=True)


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("how", ["umview", "process-group"])
def test_sigkill_of_umview_leaves_no_process_and_no_sandbox_directory(how, user):
    need_user(user)
    marker = f"umview-test-{uuid.uuid4().hex}"
    tmp = tempfile.mkdtemp(prefix="umview-escape-tmp-", dir="/tmp")
    os.chmod(tmp, 0o777)
    try:
        cmd = ["sh", "-c", 'sleep 300 & setsid sleep 300 & echo ready; wait; : "$0"', marker]
        view = subprocess.Popen(umview_for(user, "--sandbox", "--", *cmd), env=dict(os.environ, TMPDIR=tmp),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            assert view.stdout.readline() == b"ready\n", view.stderr.read()
            assert len(os.listdir(tmp)) == 1
            if how == "umview":
                view.kill()
            else:
                os.killpg(view.pid, signal.SIGKILL)  # timeout, a CI runner, kill -- -PGID
            view.wait(10)
        finally:
            if view.poll() is None:
                view.kill()
                view.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (processes_with_arg(marker.encode()) or os.listdir(tmp)):
            time.sleep(0.2)
        assert processes_with_arg(marker.encode()) == [], "processes of the view outlived it"
        assert os.listdir(tmp) == [], "the sandbox's directory was left"
        # the layered mount's listing directories (in /dev/shm, or
        # $XDG_RUNTIME_DIR): those this view made are gone too
        made = view_dirs("/dev/shm", "listing", view.pid)
        deadline = time.monotonic() + 5
        while made and time.monotonic() < deadline:
            time.sleep(0.2)
            made = view_dirs("/dev/shm", "listing", view.pid)
        assert not made, f"left in /dev/shm: {made}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
def test_a_core_dump_in_a_sandbox_lands_on_no_real_file(victim_dirs, user, notif):
    """The kernel writes a crashing process's core file itself, in the
    process's cwd, past the view: natively it lands in the victim's
    directory; from a sandbox Landlock refuses it there (it would land in
    the sandbox's own /tmp, were the cwd there)."""
    need_user(user)
    with open("/proc/sys/kernel/core_pattern") as f:
        pattern = f.read().strip()
    if pattern.startswith("|") or "/" in pattern:
        pytest.skip(f"core files go elsewhere here (core_pattern {pattern!r})")
    cmd = ["sh", "-c", 'ulimit -c unlimited 2>/dev/null || exit 77; cd "$1" || exit 1; '
                       'sleep 30 & pid=$!; sleep 0.3; kill -SEGV $pid; wait $pid; exit 0', "sh"]
    victim = victim_dirs(user)
    d = os.path.dirname(victim)
    before = snapshot(d)
    native = run(as_user(user, cmd + [d]), timeout=60)
    if native.returncode == 77:
        pytest.skip("no core files allowed (hard RLIMIT_CORE)")
    if snapshot(d) == before:
        pytest.skip("natively no core file lands in the cwd here")
    victim = victim_dirs(user)
    d = os.path.dirname(victim)
    before = snapshot(d)
    viewed, _ = attempt(umview_for(user, "--sandbox", "--", *cmd, d), notif, "/nonexistent")
    assert viewed is not None, "the view hung"
    escape_unless(snapshot(d) == before, f"a core file landed in the real tree: {os.listdir(d)}")


OUTSIDE = r'''
import os, socket, sys
host_pid, host_name = int(sys.argv[1]), b"\0" + sys.argv[2].encode()
def attempt(what, fn):
    try:
        fn()
        print(what, "ok")
    except OSError as e:
        print(what, e.errno)
attempt("kill-host", lambda: os.kill(host_pid, 0))
attempt("kill-self", lambda: os.kill(os.getpid(), 0))
attempt("connect-host", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect(host_name))
attempt("sendto-host", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"x", host_name))
own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
own.bind(b"\0" + sys.argv[2].encode() + b"-own")
own.listen(1)
attempt("connect-own", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect(host_name + b"-own"))
'''


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
def test_the_guard_keeps_signals_and_abstract_names_inside_where_landlock_cannot(user, notif):
    """What a sandbox does on a kernel before 6.12 (no Landlock scopes):
    the guard (outside=signals:abstract) refuses a signal to a process
    outside the view (EPERM) and a connect or sendto to an abstract name
    bound outside (ECONNREFUSED); the view's own names and processes stay
    reachable. Natively each call reaches its target."""
    import socket

    need_user(user)
    name = f"umview-test-{uuid.uuid4().hex}"
    stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stream.bind(b"\0" + name.encode())
    stream.listen(8)
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    host = subprocess.Popen(as_user(user, ["sleep", "300"]))
    try:
        argv = ["/usr/bin/python3", "-c", OUTSIDE, str(host.pid), name]
        native = run(as_user(user, argv), timeout=60)
        assert native.stdout.decode().split() == ["kill-host", "ok", "kill-self", "ok", "connect-host", "ok",
                                                  "sendto-host", "111", "connect-own", "ok"], _output(native)
        # (no datagram socket has the name: natively ECONNREFUSED too; bound now)
        dgram.bind(b"\0" + name.encode())
        native = run(as_user(user, argv), timeout=60)
        assert b"sendto-host ok" in native.stdout, _output(native)
        viewed, _ = attempt(umview_for(user, "-p", "guard,outside=signals:abstract", "--", *argv), notif,
                            "/nonexistent")
        assert viewed is not None, "the view hung"
        got = viewed.stdout.decode().split()
        escape_unless(got == ["kill-host", "1", "kill-self", "ok", "connect-host", "111", "sendto-host", "111",
                              "connect-own", "ok"], f"reached outside: {_output(viewed)}")
        assert host.poll() is None
    finally:
        host.kill()
        host.wait()
        stream.close()
        dgram.close()
