"""FUSE servers run unmodified inside a view (modules/fs, docs/modules.md).

A server started in the view (squashfuse, fuse2fs, bindfs, fuse-zip) opens
/dev/fuse and mounts it with mount(2) type fuse.NAME, fd=N; the view's mount
helper mounts that connection in its own namespace and the view redirects the
mount point there. Each test runs the same shell script natively as root (the
server mounting in the host) and in a view, as root and as nobody, with
seccomp notifications on and off (UMVIEW_NOTIF=0), and compares what the
script prints and leaves behind. The unmounts: fusermount -u, fusermount3
-u, umount, vuumount, and the server's own at SIGTERM/SIGINT (libfuse).

A view that runs longer than WAIT seconds is hung: every process of the test
is killed (the FUSE servers first: a monitor waiting on a filesystem whose
server waits on the monitor cannot die before that) and the test fails.
"""
import os
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import uuid
import zipfile

import pytest

from conftest import NOBODY, entry_for, need, need_user, run, umview_for

USERS = ["root", "nobody"]
NOTIF = ["1", "0"]
WAIT = 60
MARK = "UMVIEW_FS_SERVERS_TREE"

# shell functions every script has: wait until a path is (no longer) a mount
# point, and what a mounted tree shows (names, contents, types, modes: not
# owners, which a user namespace maps)
PRELUDE = r"""
mounted() { for i in $(seq 400); do mountpoint -q "$1" && return 0; sleep 0.025; done; echo "no $1"; return 1; }
gone() { for i in $(seq 400); do mountpoint -q "$1" || return 0; sleep 0.025; done; echo "$1 still mounted"; return 1; }
probe() { (cd "$1" && find . | LC_ALL=C sort && cat a.txt link sub/b && readlink link abslink \
           && stat -c '%n %s %F %a' a.txt sub sub/b link); }
trap 'for m in mnt mnt2; do mountpoint -q $m && fusermount -u -z $m; done 2>/dev/null' EXIT  # a test that fails
"""


@pytest.fixture(scope="session")
def dev_fuse():
    """/dev/fuse open to every user (0666, as Debian ships it) while the
    tests run: nobody's servers open it (through the mount helper)."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    mode = stat.S_IMODE(os.stat("/dev/fuse").st_mode)
    changed = os.geteuid() == 0 and mode != 0o666
    if changed:
        os.chmod("/dev/fuse", 0o666)
    yield
    if changed:
        os.chmod("/dev/fuse", mode)


class Tree:
    """A scratch directory: src/ (files, a relative and an absolute
    symlink, a subdirectory), mnt/, and images of src; owned by the user."""

    def __init__(self, user):
        self.root = tempfile.mkdtemp(prefix="umview-fs-servers-")
        self.mark = uuid.uuid4().hex
        self.user = user
        os.chmod(self.root, 0o755)
        src = self.path("src")
        os.makedirs(os.path.join(src, "sub"))
        os.makedirs(self.path("mnt"))
        with open(os.path.join(src, "a.txt"), "w") as f:
            f.write("hello\n")
        with open(os.path.join(src, "sub", "b"), "w") as f:
            f.write("deep\n")
        os.symlink("a.txt", os.path.join(src, "link"))
        os.symlink("/etc/hostname", os.path.join(src, "abslink"))
        self.give(self.root)

    def give(self, top):
        """top and all below it to the user (images built after keep the
        user's ids in their files)."""
        if self.user != "root":
            os.lchown(top, NOBODY, NOBODY)
            for d, dirs, files in os.walk(top):
                for n in [os.path.join(d, x) for x in dirs + files]:
                    os.lchown(n, NOBODY, NOBODY)
        return top

    def mkdir(self, name):
        os.mkdir(self.path(name))
        self.give(self.path(name))

    def path(self, *names):
        return os.path.join(self.root, *names)

    def image(self, kind):
        src, out = self.path("src"), self.path("img." + kind)
        if kind == "sqfs":
            need("mksquashfs")
            r = run(["mksquashfs", src, out, "-quiet", "-noappend", "-all-root"])
        elif kind == "ext4":
            need("mkfs.ext4")
            owner = f"{NOBODY}:{NOBODY}" if self.user != "root" else "0:0"
            r = run(["mkfs.ext4", "-q", "-F", "-E", f"root_owner={owner}", "-d", src, out, "4M"])
        else:  # zip(1) keeps the owners (a user namespace shows others' as unmapped: no writes)
            need("zip")
            r = run(["zip", "-qr", out, "a.txt", "sub"], cwd=src)
        assert r.returncode == 0, r.stderr
        return self.give(out)

    def processes(self):
        """pids of the live processes started for this tree (the variable
        MARK in their environment: views, helpers, servers, daemons)."""
        needle = f"{MARK}={self.mark}".encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                continue
        return found

    def kill_all(self):
        """Kill every process of the tree, FUSE servers first."""
        pids = self.processes()
        servers = [p for p in pids if _comm(p) in ("bindfs", "squashfuse", "fuse2fs", "fuse-zip")]
        for group in (servers, pids):
            for p in group:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass

    def host_mounts(self):
        """Lines of the host's mount table (this process's) about the tree."""
        with open("/proc/self/mountinfo") as f:
            return [line for line in f if self.root in line]

    def env(self, notif="1"):
        return dict(os.environ, UMVIEW_NOTIF=notif, **{MARK: self.mark})

    def clean(self):
        self.kill_all()
        for line in self.host_mounts():  # what a native run left
            run(["umount", "-l", line.split()[4]])
        shutil.rmtree(self.root, ignore_errors=True)


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


@pytest.fixture
def trees(dev_fuse):
    made = []

    def make(user="root"):
        t = Tree(user)
        made.append(t)
        return t
    yield make
    for t in made:
        t.clean()


def native(tree, script):
    """The script run natively as root in the tree (servers mount in the
    host's namespace)."""
    r = subprocess.run(["bash", "-c", PRELUDE + script], cwd=tree.root, env=tree.env(), capture_output=True,
                       timeout=WAIT)
    assert not tree.host_mounts(), "the native run left a mount"
    return r


def viewed(tree, user, notif, script, wait=WAIT):
    """The script run in a view with the fs module, as user, in the tree."""
    argv = umview_for(user, "-p", "fs", "--", "bash", "-c", PRELUDE + script)
    proc = subprocess.Popen(argv, cwd=tree.root, env=tree.env(notif), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=wait)
    except subprocess.TimeoutExpired:
        tree.kill_all()
        out, err = proc.communicate()
        pytest.fail(f"the view hung (more than {wait} s); it printed:\n{out.decode(errors='replace')}\n"
                    f"{err.decode(errors='replace')}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def same(a, b):
    assert b.stdout.decode(errors="replace") == a.stdout.decode(errors="replace"), b.stderr
    assert b.returncode == a.returncode, b.stderr


def differential(trees, user, notif, script, image=None, view_script=None, ok=b"", wait=WAIT):
    """Run script natively as root in a tree and in a view as user in
    another (view_script there, if given), each with the image kind built;
    the native run must succeed with ok in its output (ok=None: it may
    fail), the view must print the same and leave nothing behind. The two
    trees."""
    t1, t2 = trees(), trees(user)
    for t in (t1, t2):
        if image:
            t.image(image)
    ref = native(t1, script)
    if ok is not None:
        assert ref.returncode == 0 and ok in ref.stdout, ref.stdout + ref.stderr
    r = viewed(t2, user, notif, view_script or script, wait=wait)
    same(ref, r)
    after_view(t2, r)
    return t1, t2, ref, r


def vuumount(user):
    """A shell command that runs vuumount as user."""
    return shlex.join(entry_for(user, "umview.commands:vuumount_main"))


def unmount_cmd(how, user, where="mnt", native_run=False):
    if how == "vuumount":
        return f"umount {where}" if native_run else f"{vuumount(user)} {where}"
    return {"fusermount": f"fusermount -u {where}", "fusermount3": f"fusermount3 -u {where}",
            "umount": f"umount {where}"}[how]


def after_view(tree, r):
    """What must hold once a view is over: nothing of it left running, no
    mount in the host."""
    assert not tree.host_mounts(), "a mount of the view reached the host"
    deadline = time.monotonic() + 10
    while tree.processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not tree.processes(), f"left running: {[_comm(p) for p in tree.processes()]}"


# --- mounted, used, unmounted ---------------------------------------------------

@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("how", ["fusermount", "fusermount3", "umount", "vuumount"])
def test_squashfuse_started_in_the_view_serves_as_natively_until_unmounted(trees, user, notif, how):
    need_user(user)
    need("squashfuse", "fusermount", "fusermount3")

    def script(native_run):
        return (f"squashfuse img.sqfs mnt && probe mnt && {unmount_cmd(how, user, native_run=native_run)}"
                " && echo unmounted && ls mnt && gone mnt")
    differential(trees, user, notif, script(True), "sqfs", view_script=script(False), ok=b"unmounted")


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
def test_fuse2fs_writes_in_the_view_reach_the_image(trees, user, notif):
    need_user(user)
    need("fuse2fs", "e2fsck", "debugfs")
    script = ("fuse2fs img.ext4 mnt && probe mnt && echo written > mnt/new.txt && mkdir mnt/d && rm mnt/sub/b"
              " && umount mnt && gone mnt && echo unmounted")
    t = trees(user)
    img = t.image("ext4")
    r = viewed(t, user, notif, script)
    assert r.returncode == 0 and r.stdout.endswith(b"unmounted\n"), r.stderr
    after_view(t, r)  # fuse2fs (a daemon of the view) is over: the image is written
    fsck = run(["e2fsck", "-fn", img])
    assert fsck.returncode == 0, fsck.stdout.decode() + fsck.stderr.decode()
    cat = run(["debugfs", "-R", "cat /new.txt", img])
    assert cat.stdout == b"written\n"
    names = [line.split()[-1] for line in run(["debugfs", "-R", "ls -l /sub", img]).stdout.splitlines() if line]
    assert names == [b".", b".."]
    assert b"d" in [line.split()[-1] for line in run(["debugfs", "-R", "ls -l /", img]).stdout.splitlines() if line]


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
def test_bindfs_in_the_view_writes_through_to_its_directory_as_natively(trees, user, notif):
    need_user(user)
    need("bindfs", "fusermount")
    script = ("bindfs src mnt && probe mnt && echo new > mnt/new.txt && mkdir mnt/d && mv mnt/a.txt mnt/d/"
              " && rm mnt/sub/b && ln -s d/a.txt mnt/l2 && cat mnt/l2 && fusermount -u mnt && gone mnt"
              " && ls -R src && cat src/new.txt")
    differential(trees, user, notif, script)


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
def test_fuse_zip_in_the_view_reads_and_writes_the_archive_as_natively(trees, user, notif):
    need_user(user)
    need("fuse-zip", "fusermount")
    script = ("fuse-zip img.zip mnt && (cd mnt && find . | LC_ALL=C sort && cat a.txt sub/b) && echo added >> mnt/a.txt"
              " && fusermount -u mnt && gone mnt")
    t1, t2, _, _ = differential(trees, user, notif, script, "zip")
    for t in (t1, t2):
        deadline = time.monotonic() + 10  # natively the daemon writes the archive after the unmount
        while t.processes() and time.monotonic() < deadline:
            time.sleep(0.05)
        with zipfile.ZipFile(t.path("img.zip")) as z:
            assert z.read("a.txt") == b"hello\nadded\n"
            assert z.read("sub/b") == b"deep\n"


# --- the server's own exit ------------------------------------------------------

FOREGROUND = "squashfuse -f img.sqfs mnt & pid=$!; mounted mnt && "
DAEMON = "bindfs src mnt && mounted mnt && pid=$(pgrep -x bindfs -n) && "


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
# (a job in the background of a shell without job control ignores SIGINT)
@pytest.mark.parametrize("server,sig", [("foreground", "TERM"), ("daemon", "TERM"), ("daemon", "INT")])
def test_a_server_stopped_by_a_signal_unmounts_its_filesystem(trees, user, notif, server, sig):
    need_user(user)
    need("squashfuse", "bindfs", "pgrep")
    start = FOREGROUND if server == "foreground" else DAEMON
    script = start + (f"cat mnt/a.txt && kill -{sig} $pid && gone mnt && echo gone && ls mnt"
                      " && (grep -c \" $PWD/mnt \" /proc/self/mounts || true)")
    differential(trees, user, notif, script, "sqfs", ok=b"gone")


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("how", ["fusermount", "umount"])
def test_a_killed_server_leaves_an_unconnected_mount_that_unmounts_as_natively(trees, user, notif, how):
    """As natively: the mount stays, every access says ENOTCONN (nothing
    waits), until fusermount -u or umount removes it."""
    need_user(user)
    need("squashfuse", "fusermount")
    script = (FOREGROUND + "kill -9 $pid; wait $pid; ls mnt; stat -c %n mnt/a.txt; cat mnt/link; "
              f"{unmount_cmd(how, user)} && gone mnt && echo unmounted && ls mnt")
    _, _, ref, r = differential(trees, user, notif, script, "sqfs", ok=b"unmounted", wait=30)
    def unconnected(err):
        return [line for line in err.splitlines() if b"not connected" in line]
    assert len(unconnected(ref.stderr)) == 3, ref.stderr
    assert unconnected(r.stderr) == unconnected(ref.stderr)


@pytest.mark.xfail(strict=True, reason="fusermount3's auto_unmount watcher checks the mount by bind-mounting its "
                   "parent in a private namespace and reading /proc/mounts again, which the view's table cannot show: "
                   "it says 'not mounted' and the mount stays unconnected until fusermount -u")
@pytest.mark.parametrize("user", USERS)
def test_a_killed_server_mounted_with_auto_unmount_loses_its_mount(trees, user):
    need_user(user)
    need("squashfuse", "fusermount3")
    script = ("squashfuse -f -o auto_unmount img.sqfs mnt & pid=$!; mounted mnt && cat mnt/a.txt && kill -9 $pid;"
              " wait $pid; for i in $(seq 80); do mountpoint -q mnt || break; sleep 0.025; done; ls mnt && echo gone")
    differential(trees, user, "1", script, "sqfs", ok=b"gone")


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
def test_a_view_whose_command_leaves_a_fuse_daemon_mounted_ends_with_the_command(trees, user, notif):
    # natively the command returns and the mount stays in the host; a
    # view's mount cannot outlive the view: it is undone, the daemon ends
    need_user(user)
    need("squashfuse", "pgrep")
    t = trees(user)
    t.image("sqfs")
    r = viewed(t, user, notif, "trap - EXIT; squashfuse img.sqfs mnt && cat mnt/a.txt", wait=15)
    assert r.stdout == b"hello\n", r.stderr
    assert r.returncode == 0, r.stderr
    left = subprocess.run(["pgrep", "-f", f"squashfuse img.sqfs {t.path('mnt')}"], capture_output=True).stdout
    assert not left and not t.host_mounts()


def test_a_fuse_daemon_stays_mounted_while_another_process_of_the_view_runs(trees):
    # the command is over, a background job still uses the mount: it stays
    need_user("root")
    need("squashfuse")
    t = trees()
    t.image("sqfs")
    r = viewed(t, "root", "1", "trap - EXIT; squashfuse img.sqfs mnt && (sleep 1; cat mnt/a.txt) &", wait=15)
    assert r.stdout == b"hello\n", r.stderr


# --- the host, and the monitor's death ------------------------------------------

def _wait_for(path, proc, seconds=WAIT):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.parametrize("user", USERS)
def test_mounts_of_servers_in_the_view_never_reach_the_host_table(trees, user):
    need_user(user)
    need("squashfuse", "bindfs")
    t = trees(user)
    t.image("sqfs")
    t.mkdir("mnt2")
    script = PRELUDE + ("bindfs src mnt && squashfuse -f img.sqfs mnt2 & mounted mnt && mounted mnt2 && touch ready"
                        " && while [ ! -e go ]; do sleep 0.02; done; fusermount -u mnt && fusermount -u mnt2"
                        " && gone mnt && gone mnt2 && wait && echo done")
    proc = subprocess.Popen(umview_for(user, "-p", "fs", "--", "bash", "-c", script), cwd=t.root, env=t.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert _wait_for(t.path("ready"), proc), proc.communicate(timeout=WAIT)
        assert not t.host_mounts()
        assert sorted(os.listdir(t.path("mnt"))) == [] and os.listdir(t.path("mnt2")) == []
        open(t.path("go"), "w").close()
        out, err = proc.communicate(timeout=WAIT)
    finally:
        t.kill_all()
    assert out.endswith(b"done\n"), err
    assert not t.host_mounts()


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
def test_killing_the_monitor_leaves_no_helper_or_server(trees, user, notif):
    need_user(user)
    need("squashfuse", "bindfs")
    t = trees(user)
    t.image("sqfs")
    t.mkdir("mnt2")
    # a daemon (bindfs), a foreground server, and a process using each mount
    script = PRELUDE + ("bindfs src mnt && mounted mnt && { squashfuse -f img.sqfs mnt2 & } && mounted mnt2"
                        " && { cd mnt/sub && sleep 300 & } && { cd mnt2 && sleep 300 & } && touch ready && wait")
    proc = subprocess.Popen(umview_for(user, "-p", "fs", "--", "bash", "-c", script), cwd=t.root,
                            env=t.env(notif), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert _wait_for(t.path("ready"), proc), proc.communicate(timeout=WAIT)
        comms = sorted(_comm(p) for p in t.processes())
        assert "bindfs" in comms and "squashfuse" in comms, comms
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=WAIT)
        deadline = time.monotonic() + 20
        while t.processes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not t.processes(), f"left running: {[_comm(p) for p in t.processes()]}"
        assert not t.host_mounts()
    finally:
        t.kill_all()


# --- the monitor never waits on a filesystem served in the view -----------------

LOOKUPS = r"""
bindfs src mnt && mounted mnt || exit 1
ls -l mnt | awk '{print $1, $NF}'
cat mnt/link mnt/abslink >/dev/null && echo links read
stat -L -c '%n %s' mnt/link mnt/sub/../a.txt
cd mnt/sub && cat b && cat ../link && ls .. | wc -l && cd ../..
ln -s mnt/sub into && cat into/b && cat into/../a.txt && ls -L into | wc -l
ln -s "$PWD/mnt" absinto && cat absinto/link && readlink -f absinto/link | sed "s|$PWD|D|"
printf '#!/bin/sh\necho script ran "$@"\n' > mnt/s.sh && chmod +x mnt/s.sh && mnt/s.sh 1 && (cd mnt && ./s.sh 2)
cp /bin/true mnt/true && mnt/true && echo binary ran
python3 -c 'import os, sys; print(sorted(f for _, _, fs in os.walk(sys.argv[1], followlinks=True) for f in fs))' mnt
find -L mnt -type f | LC_ALL=C sort | head -20
fusermount -u mnt && gone mnt && echo unmounted
"""


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
def test_lookups_under_a_filesystem_served_in_the_view_never_hang(trees, user, notif):
    """bindfs lstats its source at each request: a trapped call that waits
    on the monitor. Symlink walks, #! reads, any lookup the monitor made
    itself under the mount would wait on bindfs: both forever."""
    need_user(user)
    need("bindfs", "fusermount", "python3")
    differential(trees, user, notif, LOOKUPS, ok=b"binary ran\n", wait=40)


@pytest.mark.parametrize("user", USERS)
def test_a_mount_on_a_filesystem_served_in_the_view_is_refused_not_hung(trees, user):
    """Known limit: the helper (which the monitor waits for) would look up the
    mount point through the filesystem whose server waits on the monitor."""
    need_user(user)
    need("bindfs", "squashfuse")
    t = trees(user)
    t.image("sqfs")
    script = ("bindfs src mnt && mounted mnt && { squashfuse img.sqfs mnt/sub; echo status $?; }"
              " && { mountpoint -q mnt/sub || echo not mounted; } && cat mnt/sub/b && fusermount -u mnt && gone mnt"
              " && echo ok")
    r = viewed(t, user, "1", script, wait=30)
    assert r.stdout == b"status 4\nnot mounted\ndeep\nok\n", r.stdout + r.stderr  # 4: libfuse's "mount failed"
    assert b"served by a process of the view" in r.stderr and b"Device or resource busy" in r.stderr
    after_view(t, r)


# --- a tracer in the view -------------------------------------------------------

@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("server", ["squashfuse -f img.sqfs mnt", "bindfs -f src mnt"])
def test_a_server_traced_by_strace_in_the_view_mounts_and_serves(trees, user, notif, server):
    need_user(user)
    need("strace", "squashfuse", "bindfs", "fusermount")
    script = (f"strace -f -o trace.txt {server} & mounted mnt && probe mnt && fusermount -u mnt && gone mnt"
              " && wait && grep -c 'mount(' trace.txt >/dev/null && echo traced")
    differential(trees, user, notif, script, "sqfs", ok=b"traced\n")
