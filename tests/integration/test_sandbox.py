"""umview --sandbox: a copy-on-write view of / in a fresh layer, a private
/tmp, no network; --sandbox net keeps the network; --keep-layer DIR keeps the
layer for a later sandbox. Each protection is first shown to act natively
(the same script does change the real file), as root and as nobody."""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import NOBODY, entry_for, need, need_user, umview_for, view_dirs

USERS = ["root", "nobody"]


@pytest.fixture
def victim():
    """A directory outside /tmp (the sandbox has a /tmp of its own) with a
    file every user may write, removed afterwards."""
    d = tempfile.mkdtemp(prefix="umview-sandbox-test-", dir="/var/tmp")
    os.chmod(d, 0o777)
    path = os.path.join(d, "victim")
    with open(path, "w") as f:
        f.write("orig\n")
    os.chmod(path, 0o666)
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    yield d
    shutil.rmtree(d)


def _made_by(pid):
    """The sandbox and listing directories monitor pid made that are left."""
    return {**view_dirs(tempfile.gettempdir(), "sandbox", pid), **view_dirs("/dev/shm", "listing", pid)}


def run(user, opts, script, **kw):
    proc = subprocess.Popen(umview_for(user, *opts, "--", "sh", "-c", script), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not _made_by(proc.pid), "the sandbox's directory was left behind"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


CHANGE = "echo changed > {d}/victim && chmod 600 {d}/victim && touch {d}/new && cat {d}/victim && ls {d}"


@pytest.mark.parametrize("user", USERS)
def test_changes_in_a_sandbox_stay_in_it_and_the_real_files_are_untouched(victim, user):
    need_user(user)
    script = CHANGE.format(d=victim)
    # natively the script changes the real files (so the test can fail)
    native = tempfile.mkdtemp(prefix="umview-sandbox-native-", dir="/var/tmp")
    try:
        shutil.copy(os.path.join(victim, "victim"), native)
        os.chmod(native, 0o777)
        os.chmod(os.path.join(native, "victim"), 0o666)
        ref = subprocess.run(["sh", "-c", CHANGE.format(d=native)], capture_output=True)
        assert ref.returncode == 0 and open(os.path.join(native, "victim")).read() == "changed\n"
    finally:
        shutil.rmtree(native)
    r = run(user, ["--sandbox"], script)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"changed\nnew\nvictim\n"
    assert open(os.path.join(victim, "victim")).read() == "orig\n"
    assert os.stat(os.path.join(victim, "victim")).st_mode & 0o777 == 0o666
    assert os.listdir(victim) == ["victim"]


@pytest.mark.parametrize("user", USERS)
def test_a_sandbox_may_delete_system_files_that_stay(user):
    need_user(user)
    assert os.path.exists("/etc/hostname")
    r = run(user, ["--sandbox"], "rm /etc/hostname && test ! -e /etc/hostname && echo gone")
    assert r.stdout == b"gone\n", r.stderr
    assert os.path.exists("/etc/hostname")


@pytest.mark.parametrize("user", USERS)
def test_a_sandbox_has_a_private_tmp(user):
    need_user(user)
    fd, outside = tempfile.mkstemp(prefix="umview-sandbox-outside-", dir="/tmp")
    os.close(fd)
    try:
        name = f"umview-sandbox-inside-{os.getpid()}"
        r = run(user, ["--sandbox"], f"test ! -e {outside} && echo hidden; echo x > /tmp/{name} && cat /tmp/{name}")
        assert r.stdout == b"hidden\nx\n", r.stderr
        assert not os.path.exists(f"/tmp/{name}")
    finally:
        os.unlink(outside)


NET = "import socket; s = socket.socket(); print('socket')"


@pytest.mark.parametrize("user", USERS)
def test_a_sandbox_has_no_network_unless_the_net_preset(user):
    need_user(user)
    assert subprocess.run(["python3", "-c", NET], capture_output=True).stdout == b"socket\n"
    r = run(user, ["--sandbox"], f"python3 -c \"{NET}\"")
    assert r.returncode != 0 and b"Address family not supported" in r.stderr, r.stderr
    r = run(user, ["--sandbox", "net"], f"python3 -c \"{NET}\"")
    assert r.stdout == b"socket\n", r.stderr
    r = run(user, ["--sandbox=net"], f"python3 -c \"{NET}\"")
    assert r.stdout == b"socket\n", r.stderr


@pytest.mark.parametrize("user", USERS)
def test_a_kept_layer_holds_the_changes_for_a_later_sandbox(victim, user):
    need_user(user)
    layer = os.path.join(victim, "layer")
    r = run(user, ["--sandbox", "--keep-layer", layer], f"echo kept > {victim}/victim")
    assert r.returncode == 0, r.stderr
    assert open(os.path.join(victim, "victim")).read() == "orig\n"
    assert os.path.isfile(os.path.join(layer, victim.lstrip("/"), "victim"))
    r = run(user, ["--sandbox", "--keep-layer", layer], f"cat {victim}/victim")
    assert r.stdout == b"kept\n", r.stderr


def test_the_exit_status_is_the_commands_and_modules_add_on_top():
    need_user("root")
    r = run("root", ["--sandbox"], "exit 7")
    assert r.returncode == 7
    r = run("root", ["--sandbox", "-p", "unreal"], "cat /unreal/etc/hostname")
    assert r.stdout == open("/etc/hostname", "rb").read(), r.stderr
    # a bare --sandbox before the command: the default preset
    r = subprocess.run(umview_for("root", "--sandbox", "true"), capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_bad_sandbox_options_say_what_to_write():
    need_user("root")
    r = subprocess.run(umview_for("root", "--sandbox=bogus", "true"), capture_output=True, timeout=60)
    assert r.returncode == 2 and b"invalid choice: 'bogus'" in r.stderr
    r = subprocess.run(umview_for("root", "--keep-layer", "/x", "true"), capture_output=True, timeout=60)
    assert r.returncode == 2 and b"--keep-layer goes with --sandbox" in r.stderr


@pytest.mark.parametrize("user", USERS)
def test_kill_9_of_the_monitor_leaves_no_directory_behind(user):
    need_user(user)

    # the sandbox makes its directory and (a cow view) a listing directory;
    # the command says it runs on its stdout (a file would land in the layer)
    proc = subprocess.Popen(umview_for(user, "--sandbox", "--", "sh", "-c", "ls /etc >/dev/null; echo ready; "
                                       "exec sleep 60"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n", proc.stderr.read() if proc.poll() is not None else ""
        assert len(_made_by(proc.pid)) == 2, "the sandbox made no directory: nothing to check"
        proc.kill()  # the monitor itself (umview_for execs it: setpriv, python)
        proc.wait()
        deadline = time.monotonic() + 10
        while _made_by(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _made_by(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("user", USERS)
def test_a_sandbox_started_in_a_directory_under_tmp_still_finds_it_copy_on_write(user):
    need_user(user)
    d = tempfile.mkdtemp(prefix="umview-sandbox-cwd-", dir="/tmp")
    try:
        os.chmod(d, 0o777)
        with open(os.path.join(d, "f"), "w") as f:
            f.write("data\n")
        os.chmod(os.path.join(d, "f"), 0o666)
        r = run(user, ["--sandbox"], "cat f && echo new > f && cat f && pwd", cwd=d)
        assert r.stdout == f"data\nnew\n{d}\n".encode(), r.stderr
        assert open(os.path.join(d, "f")).read() == "data\n"
    finally:
        shutil.rmtree(d)


@pytest.mark.parametrize("user", USERS)
def test_a_sandbox_shows_the_command_what_it_names_under_tmp(user):
    # a program and its #! interpreter in a tree under /tmp (a venv's
    # bin/pytest), a file an argument names, a -r tree there: the private
    # /tmp hid them ("command not found", ENOENT); each stays, copy-on-write
    need_user(user)
    d = tempfile.mkdtemp(prefix="umview-sandbox-named-", dir="/tmp")
    data = tempfile.mkdtemp(prefix="umview-sandbox-data-", dir="/tmp")
    try:
        for x in (d, data):
            os.chmod(x, 0o755)
        os.makedirs(os.path.join(d, "bin"))
        os.makedirs(os.path.join(d, "lib"))
        os.symlink("/bin/sh", os.path.join(d, "bin", "interp"))
        with open(os.path.join(d, "lib", "greeting"), "w") as f:
            f.write("hello from the tree\n")
        prog = os.path.join(d, "bin", "prog")
        with open(prog, "w") as f:
            f.write(f"#!{d}/bin/interp\ncat {d}/lib/greeting \"$1\"\necho changed > \"$1\"\n")
        os.chmod(prog, 0o755)
        with open(os.path.join(data, "file"), "w") as f:
            f.write("the data\n")
        os.chmod(os.path.join(data, "file"), 0o666)
        argv = [prog, os.path.join(data, "file")]
        native_out = b"hello from the tree\nthe data\n"
        assert subprocess.run(["cat", os.path.join(d, "lib", "greeting"), argv[1]],
                              capture_output=True).stdout == native_out
        r = subprocess.run(umview_for(user, "--sandbox", "--", *argv), capture_output=True, timeout=60,
                           cwd="/")
        assert (r.returncode, r.stdout) == (0, native_out), r.stderr
        assert open(argv[1]).read() == "the data\n"  # written in the layer only
        # -r's tree under /tmp
        os.makedirs(os.path.join(data, "tree", "etc"))
        with open(os.path.join(data, "tree", "marker"), "w") as f:
            f.write("in the tree\n")
        r = subprocess.run(umview_for(user, "-r", os.path.join(data, "tree"), "--host-paths",
                                      "/usr:/lib:/lib64:/bin:/proc:/dev", "--sandbox", "--", "cat", "/marker"),
                           capture_output=True, timeout=60, cwd="/")
        assert (r.returncode, r.stdout) == (0, b"in the tree\n"), r.stderr
    finally:
        shutil.rmtree(d)
        shutil.rmtree(data)


def test_a_path_the_sandbox_hides_all_the_same_is_named():
    need_user("root")
    shm = tempfile.mkdtemp(prefix="umview-test-", dir="/dev/shm")
    try:
        r = subprocess.run(umview_for("root", "--sandbox", "--", "ls", shm), capture_output=True, timeout=60)
        assert r.returncode != 0
        assert f"umview: --sandbox hides {shm} from the command".encode() in r.stderr, r.stderr
    finally:
        shutil.rmtree(shm)


@pytest.mark.parametrize("user", USERS)
def test_a_daemon_left_by_the_command_ends_with_the_sandbox(user):
    """A double-forked daemon stays in the view (traced) and gets SIGTERM,
    then SIGKILL, when the command ends: the sandbox does not wait for it
    and leaves no process behind. Natively the daemon outlives the shell."""
    need_user(user)
    mark = f"umview-daemon-{os.getpid()}-{user}"
    # a daemon that ignores SIGTERM, named by its argument so that it can be found
    daemon = f"(setsid bash -c 'trap \"\" TERM; exec -a {mark} sleep 30' </dev/null >/dev/null 2>&1 &)"
    native = subprocess.run(["sh", "-c", daemon], timeout=30)
    assert native.returncode == 0
    try:
        time.sleep(0.3)
        assert subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode == 0, "natively it runs on"
    finally:
        subprocess.run(["pkill", "-KILL", "-f", mark])
    start = time.monotonic()
    r = run(user, ["--sandbox"], daemon + "; echo started")
    assert r.returncode == 0 and r.stdout == b"started\n", r.stderr
    assert time.monotonic() - start < 25, "the sandbox waited for its daemon"
    for _ in range(50):
        if subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode != 0:
            break
        time.sleep(0.1)
    else:
        subprocess.run(["pkill", "-KILL", "-f", mark])
        pytest.fail("the daemon outlived the sandbox")


@pytest.mark.parametrize("user", USERS)
def test_mount_and_umount_are_refused_in_a_sandbox_and_chroot_stays_in_it(victim, user):
    """Root natively can bind-mount over a directory (shown first, then
    undone); in a sandbox mount and umount of the cow view of / fail with
    EPERM; chroot works, in the view (a write below the new root lands in
    the layer), and the real victim stays."""
    need_user(user)
    if os.geteuid() == 0:
        target = tempfile.mkdtemp(dir="/var/tmp")
        try:
            assert subprocess.run(["mount", "--bind", victim, target]).returncode == 0
            assert os.path.exists(os.path.join(target, "victim"))
        finally:
            subprocess.run(["umount", target])
            os.rmdir(target)
    script = (f"mount --bind /var/tmp /mnt; echo mount=$?; umount -l /; echo umount=$?; "
              f"chroot / sh -c 'echo changed > {victim}/victim'; echo chroot=$?; cat {victim}/victim")
    r = run(user, ["--sandbox"], script)
    out = r.stdout.decode()
    assert "mount=0" not in out and "umount=0" not in out, out
    assert out.endswith("chroot=0\nchanged\n"), out  # the cow view of / is still there
    assert open(os.path.join(victim, "victim")).read() == "orig\n"


@pytest.mark.parametrize("user", USERS)
def test_find_and_rm_r_walk_a_tree_made_in_the_private_tmp(user):
    """The private /tmp is a directory in the real /tmp mounted over /tmp:
    calls relative to a directory fd there (find, rm -r) name the view's
    path, not the real one under the mount (which the view does not have).
    Natively the same script lists and removes the tree."""
    need_user(user)
    script = "mkdir -p /tmp/q/etc && touch /tmp/q/etc/f && find /tmp/q && cd /tmp/q && find . && rm -r /tmp/q && echo removed"
    native_dir = tempfile.mkdtemp(prefix="umview-sandbox-native-", dir="/var/tmp")
    try:
        ref = subprocess.run(["sh", "-c", script.replace("/tmp/", native_dir + "/")], capture_output=True)
        assert ref.returncode == 0, ref.stderr
        expected = ref.stdout.replace(native_dir.encode() + b"/", b"/tmp/")
    finally:
        shutil.rmtree(native_dir)
    r = run(user, ["--sandbox"], script)
    assert (r.returncode, r.stdout) == (0, expected), r.stderr


@pytest.mark.parametrize("user", USERS)
def test_a_sandbox_has_a_private_dev_shm_shared_by_its_processes(user):
    need_user(user)
    name = f"/dev/shm/umview-test-{os.getpid()}-{time.monotonic_ns()}"
    # natively the script makes a real file there (everyone may)
    native = subprocess.run(["sh", "-c", f"echo x > {name} && cat {name}"], capture_output=True)
    try:
        assert native.stdout == b"x\n" and os.path.exists(name)
    finally:
        os.unlink(name)
    script = (f"echo x > {name} && sh -c 'cat {name}' && python3 -c "
              "'import multiprocessing as m; s = m.Semaphore(); s.acquire(); s.release(); print(\"sem\")'")
    r = run(user, ["--sandbox"], script)
    assert r.stdout == b"x\nsem\n", r.stderr
    assert not os.path.exists(name)


@pytest.fixture
def domainname():
    with open("/proc/sys/kernel/domainname") as f:
        saved = f.read()
    yield saved
    with open("/proc/sys/kernel/domainname", "w") as f:
        f.write(saved)


def test_root_in_a_sandbox_cannot_change_sysctls(domainname):
    need_user("root")
    script = "echo umview-test > /proc/sys/kernel/domainname; cat /proc/sys/kernel/domainname"
    native = subprocess.run(["sh", "-c", script], capture_output=True)
    assert native.stdout == b"umview-test\n"  # natively root does
    with open("/proc/sys/kernel/domainname", "w") as f:
        f.write(domainname)
    r = run("root", ["--sandbox"], script)
    assert r.stdout.decode() == domainname, r.stderr
    assert b"Read-only file system" in r.stderr
    with open("/proc/sys/kernel/domainname") as f:
        assert f.read() == domainname


def _block_device():
    for name in sorted(os.listdir("/dev")):
        path = os.path.join("/dev", name)
        try:
            if stat.S_ISBLK(os.lstat(path).st_mode):
                return path
        except OSError:
            pass
    return None


def test_root_in_a_sandbox_cannot_change_dev(victim):
    need_user("root")
    entry = f"/dev/umview-test-{os.getpid()}"
    node = os.path.join(victim, "blk")
    script = f"touch {entry}; echo touch=$?; mknod {node} b 7 0; echo mknod=$?; echo x > /dev/null; echo null=$?"
    native = subprocess.run(["sh", "-c", script], capture_output=True)
    try:
        assert native.stdout == b"touch=0\nmknod=0\nnull=0\n"  # natively root does
    finally:
        for p in (entry, node):
            if os.path.lexists(p):
                os.unlink(p)
    r = run("root", ["--sandbox"], script)
    assert r.stdout == b"touch=1\nmknod=1\nnull=0\n", r.stderr
    assert not os.path.lexists(entry) and not os.path.lexists(node)
    disk = _block_device()
    if disk is None:
        return
    link = os.path.join(victim, "disk")
    os.symlink(disk, link)  # a symlink elsewhere leads to the disk as well
    for path in (disk, link):
        opener = f"python3 -c 'import os; os.close(os.open(\"{path}\", os.O_WRONLY)); print(\"opened\")'"
        assert subprocess.run(["sh", "-c", opener], capture_output=True).stdout == b"opened\n"
        r = run("root", ["--sandbox"], opener)
        assert b"Permission denied" in r.stderr and r.stdout == b"", (path, r.stderr)


@pytest.mark.parametrize("user", USERS)
def test_a_file_the_sandbox_hides_is_reopened_through_its_fd_only_as_the_fd_allows(user):
    """A file in the real /tmp, opened before the sandbox (a CI job's log
    as the command's stdout; a file read on fd 3), no path of the sandbox
    names: /dev/stdout reopens it for writing, as natively; the read-only
    fd's /proc/self/fd/3 does not."""
    need_user(user)
    d = tempfile.mkdtemp(prefix="umview-sandbox-hidden-", dir="/tmp")
    os.chmod(d, 0o777)
    try:
        hidden, out = os.path.join(d, "hidden"), os.path.join(d, "out")
        script = "echo x >> /proc/self/fd/3; echo append=$?; echo y >> /dev/stdout; cat /dev/fd/3"
        outer = 'exec 3<"$0" >>"$1"; shift; exec "$@"'

        def fresh():
            for p, text in ((hidden, "orig\n"), (out, "")):
                with open(p, "w") as f:
                    f.write(text)
                os.chmod(p, 0o666)

        fresh()
        native = subprocess.run(["sh", "-c", outer, hidden, out, "sh", "-c", script], capture_output=True)
        assert open(hidden).read() == "orig\nx\n", native.stderr  # natively the read-only fd's file is written
        fresh()
        r = subprocess.run(["sh", "-c", outer, hidden, out, *umview_for(user, "--sandbox", "--", "sh", "-c", script)],
                           capture_output=True, timeout=120)
        assert open(hidden).read() == "orig\n", r.stderr
        assert open(out).read() == "append=2\ny\norig\n", r.stderr
    finally:
        shutil.rmtree(d)


# Changes of metadata in the private /tmp and on copies in the layer: run on
# the file the view resolved (Call.run_anchored), through a symlink, on a
# symlink itself (-h), and with a relative path; the same as natively.
METADATA = """cd {d} && mkdir sub && echo a > sub/f && ln -s sub link && ln -s {d}/sub/f abs && \
chmod 600 link/f && touch -d 2001-02-03 abs && touch -h -d 2002-03-04 link && \
python3 -c 'import os; os.setxattr("abs", "user.k", b"v"); print(os.getxattr("sub/f", "user.k"))' && \
cd sub && chmod 640 f && chmod 700 ../sub && cd .. && \
stat -c '%n %A' sub abs && stat -c '%n %A %y' sub/f link | sed 's/\\.[0-9]* / /' && \
chmod 604 {v} && touch -d 2003-04-05 {v} && stat -c '%A %y' {v} | sed 's/\\.[0-9]* / /' && \
chmod 000 nothere; echo $?"""


@pytest.mark.parametrize("user", USERS)
def test_metadata_changes_in_a_sandbox_give_what_they_give_natively(victim, user):
    need_user(user)
    native_dir = tempfile.mkdtemp(prefix="umview-sandbox-native-", dir="/var/tmp")
    try:
        os.chmod(native_dir, 0o777)
        native_victim = os.path.join(native_dir, "victim")
        shutil.copy(os.path.join(victim, "victim"), native_victim)
        os.chmod(native_victim, 0o666)
        if os.geteuid() == 0:
            os.chown(native_victim, NOBODY, NOBODY)
        work = os.path.join(native_dir, "work")
        as_user = [] if user == "root" else ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        native = subprocess.run(as_user + ["sh", "-c", f"mkdir {work} && " + METADATA.format(d=work, v=native_victim)],
                                capture_output=True)
        assert native.returncode == 0, native.stderr
        assert oct(os.stat(native_victim).st_mode & 0o777) == "0o604"  # natively the real file changes
    finally:
        shutil.rmtree(native_dir)
    before = os.stat(os.path.join(victim, "victim"))
    r = run(user, ["--sandbox"], f"mkdir /tmp/work && " + METADATA.format(d="/tmp/work", v=f"{victim}/victim"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == native.stdout.decode().replace(work, "/tmp/work")
    after = os.stat(os.path.join(victim, "victim"))
    assert (after.st_mode, after.st_mtime_ns, after.st_ctime_ns) == (before.st_mode, before.st_mtime_ns,
                                                                      before.st_ctime_ns)


def test_a_sandbox_with_the_fs_module_reads_its_image_and_says_it_runs_without_landlock():
    # the fs module reaches its mounts through its helper's /proc/PID/root,
    # which Landlock forbids to a sandboxed process: the sandbox leaves
    # Landlock out (else: Permission denied) and says so
    need("mksquashfs", "squashfuse")
    d = tempfile.mkdtemp(prefix="umview-sandbox-fs-", dir="/var/tmp")
    try:
        os.mkdir(os.path.join(d, "src"))
        with open(os.path.join(d, "src", "a"), "w") as f:
            f.write("from the image\n")
        subprocess.run(["mksquashfs", os.path.join(d, "src"), os.path.join(d, "img"), "-quiet"], check=True,
                       capture_output=True)
        r = run("root", ["--sandbox", "-p", f"fs,mount={d}/img:/mnt"], "cat /mnt/a")
        assert (r.returncode, r.stdout) == (0, b"from the image\n"), r.stderr
        assert b"runs without Landlock" in r.stderr
    finally:
        shutil.rmtree(d)


# A directory fd of the sandbox's /tmp, and names below it: the kernel
# resolves them where the fd is (the private /tmp) when no mount of the view
# lies below /tmp; with one (here a move mount at /tmp/sub) the view must.
DIRFD = """python3 -c '
import json
import os
os.makedirs("/tmp/d", exist_ok=True)
open("/tmp/d/f", "w").write("private tmp\\n")
fd = os.open("/tmp", os.O_RDONLY)
print(open(os.open("d/f", os.O_RDONLY, dir_fd=fd)).read(), end="")
print(os.listdir(os.open("sub", os.O_RDONLY, dir_fd=fd)) if os.path.isdir("/tmp/sub") else "no sub")
print(open(os.open("sub/m", os.O_RDONLY, dir_fd=fd)).read() if os.path.isdir("/tmp/sub") else "", end="")
'"""


def test_names_below_a_dirfd_of_the_private_tmp_are_the_views_with_or_without_a_mount_below():
    d = tempfile.mkdtemp(prefix="umview-sandbox-mnt-", dir="/var/tmp")
    try:
        with open(os.path.join(d, "m"), "w") as f:
            f.write("mounted\n")
        r = run("root", ["--sandbox"], DIRFD)
        assert (r.returncode, r.stdout.decode()) == (0, "private tmp\nno sub\n"), r.stderr
        r = run("root", ["--sandbox", "-p", f"viewfs,mount={d}:/tmp/sub"], DIRFD)
        assert (r.returncode, r.stdout.decode()) == (0, "private tmp\n['m']\nmounted\n"), r.stderr
    finally:
        shutil.rmtree(d)


IOCTLS = """import fcntl, os, sys, termios
fd = os.open("/tmp/x", os.O_CREAT | os.O_RDWR)
for _ in range(int(sys.argv[1])):
    try:
        fcntl.ioctl(fd, termios.TCGETS, bytes(64))
    except OSError:
        pass
"""


def test_ioctls_no_module_wants_stay_in_the_kernel_in_a_sandbox(tmp_path):
    # the guard and the layered mount test values of four calls on three
    # ABIs: a table of 8 traps by value made every ioctl stop (and reach
    # Python); only the inode-changing requests may
    def python_events(n):
        stats = tmp_path / f"stats{n}"
        r = subprocess.run(umview_for("root", "--sandbox", "--stats-file", str(stats), "--", sys.executable, "-c",
                                      IOCTLS, str(n)), capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return json.loads(stats.read_text())["python_events"]

    assert python_events(400) - python_events(0) < 40


def _inner_umview(user, *opts):
    """A shell word list running umview with opts as user, from inside a view
    of that user."""
    import shlex

    return shlex.join(entry_for(user, "umview.cli:main", *opts))


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("outer", ["-p unreal", "--sandbox"])
def test_a_sandbox_inside_a_view_is_a_sandbox_nested_in_it(victim, user, outer):
    """umview --sandbox run in a view (a shell of umview -p unreal, or
    another sandbox) makes a nested view: the real files stay (the same
    script changes them natively: the first test of this file), its /tmp
    is its own, --report lists what it changed, its status and its
    daemons end as at top level, and its directory goes."""
    need_user(user)
    out = tempfile.mkdtemp(prefix="umview-nested-report-", dir="/var/tmp")  # the outer sandbox's /tmp is its own
    os.chmod(out, 0o777)
    report = os.path.join(out, "report.json")
    mark = f"umview-nested-daemon-{os.getpid()}-{user}"
    daemon = f"(setsid bash -c 'trap \"\" TERM; exec -a {mark} sleep 30' </dev/null >/dev/null 2>&1 &)"
    inner_script = (f"{CHANGE.format(d=victim)} && ls /tmp && echo in > /tmp/in && {daemon}; exit 3")
    inner = _inner_umview(user, "--sandbox", "--report", report, "--", "sh", "-c", inner_script)
    # the outer view's /tmp: the real one under -p unreal (removed at the end)
    outer_file = f"/tmp/umview-nested-outer-{os.getpid()}-{user}"
    # the sandbox directories the inner one may have left: those of other
    # views running meanwhile on the machine are not the test's
    script = (f"before=$(ls /tmp | grep umview-sandbox-); echo out > {outer_file}; {inner}; echo status $?; "
              f"cat {outer_file}; ls /tmp | grep umview-sandbox- | grep -cvxF \"$before\"; "
              f"cat {victim}/victim; cat {report}")  # an outer sandbox keeps the report in its layer
    r = run(user, outer.split(), script)
    try:
        assert r.returncode == 0, r.stderr
        # the inner /tmp was empty; the outer one still holds its file and no sandbox directory
        head = b"changed\nnew\nvictim\nstatus 3\nout\n0\norig\n"
        assert r.stdout.startswith(head), r.stderr
        assert open(os.path.join(victim, "victim")).read() == "orig\n"
        assert os.listdir(victim) == ["victim"]
        changes = json.loads(r.stdout[len(head):])
        assert {c["path"] for c in changes["created"]} == {os.path.join(victim, "new")}
        assert [c["path"] for c in changes["modified"]] == [os.path.join(victim, "victim")]
        for _ in range(50):
            if subprocess.run(["pgrep", "-f", mark], capture_output=True).returncode != 0:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the nested sandbox's daemon outlived it")
    finally:
        subprocess.run(["pkill", "-KILL", "-f", mark])
        shutil.rmtree(out)
        if os.path.exists(outer_file):
            os.unlink(outer_file)


def test_monitor_options_are_refused_for_a_sandbox_inside_a_view():
    r = run("root", ["-p", "unreal"], _inner_umview("root", "--sandbox", "--stats", "--", "true") + "; echo $?")
    assert r.stdout == b"2\n"
    assert b"--stats concerns the monitor" in r.stderr


@pytest.mark.parametrize("user", USERS)
def test_a_script_in_the_private_tmp_runs(user):
    """A #! script made in the sandbox's /tmp runs by its name there (the
    interpreter gets that name, which the view resolves; not the real path
    of the private /tmp, another file in the view); one without x fails as
    natively."""
    need_user(user)
    script = ("printf '#!/bin/sh\\necho \"$0 $1\"\\nexit 7\\n' > /tmp/s && chmod 755 /tmp/s && /tmp/s a; echo $?; "
              "cd /tmp && ./s b; echo $?; chmod 644 s && ./s; echo $?")
    r = run(user, ["--sandbox"], script)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"/tmp/s a\n7\n./s b\n7\n126\n"
