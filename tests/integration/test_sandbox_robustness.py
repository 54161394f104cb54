"""What fuzzing a sandbox with trinity found (tests/integration/test_fuzz.py),
each as a small deterministic test: the same program natively first, so that
a test cannot pass vacuously."""
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import HERE, NOBODY, as_user, need, need_user, umview_for

PROGS = os.path.join(HERE, "integration", "progs")

USERS = ["root", "nobody"]


@pytest.fixture
def victim():
    """/var/tmp/DIR (a sandbox has a /tmp of its own) with a file and a
    subdirectory that nobody owns."""
    d = tempfile.mkdtemp(prefix="umview-robust-", dir="/var/tmp")
    os.mkdir(os.path.join(d, "sub"))
    with open(os.path.join(d, "f"), "w") as f:
        f.write("f\n")
    for p in (d, os.path.join(d, "sub"), os.path.join(d, "f")):
        os.chown(p, NOBODY, NOBODY)
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d)


# fchmod on an fd of a lower file (opened read-only, never copied up): the
# view copies the file up and makes the call by path (fchmodat); with
# notifications on, the kernel's second look at the new number was sent to
# Python, the call restarted after its arguments were restored: EFAULT. (The
# fd itself still shows the lower file, a limit docs/modules.md states.)
FCHMOD = r"""
import os, stat, sys
for name in sys.argv[1:]:
    fd = os.open(name, os.O_RDONLY)
    os.fchmod(fd, 0o500)
    print(oct(stat.S_IMODE(os.stat(name).st_mode)))
"""


@pytest.mark.parametrize("notif", ["1", "0"])
@pytest.mark.parametrize("user", USERS)
def test_fchmod_of_a_lower_file_in_a_sandbox_changes_the_view_only(victim, user, notif):
    need_user(user)
    names = [os.path.join(victim, "f"), os.path.join(victim, "sub")]
    native = tempfile.mkdtemp(prefix="umview-robust-native-", dir="/var/tmp")
    try:
        shutil.copytree(victim, native, dirs_exist_ok=True, symlinks=True)
        ref = subprocess.run(["python3", "-c", FCHMOD, native + "/f", native + "/sub"], capture_output=True)
        assert ref.stdout == b"0o500\n" * 2, ref.stderr
    finally:
        shutil.rmtree(native)
    r = subprocess.run(umview_for(user, "--sandbox", "--", "python3", "-c", FCHMOD, *names), capture_output=True,
                       timeout=120, env=dict(os.environ, UMVIEW_NOTIF=notif))
    assert r.stdout == b"0o500\n" * 2, r.stderr
    assert [oct(os.stat(n).st_mode & 0o777) for n in names] == ["0o644", "0o755"]


@pytest.mark.parametrize("user", USERS)
def test_a_sandbox_is_removed_even_if_its_command_took_the_permissions_of_its_directories(victim, user):
    need_user(user)
    script = f"mkdir -p {victim}/new/deep && touch {victim}/new/deep/f && chmod 0 {victim}/new/deep {victim}/new" \
             f" {victim}/sub && echo done"
    # the sandbox's directory is made in $TMPDIR: one of the test's own, which
    # other sandboxes running meanwhile do not use
    tmpdir = tempfile.mkdtemp(prefix="umview-robust-tmpdir-", dir="/var/tmp")
    try:
        os.chmod(tmpdir, 0o777)
        r = subprocess.run(umview_for(user, "--sandbox", "--", "sh", "-c", script), capture_output=True,
                           timeout=120, env=dict(os.environ, TMPDIR=tmpdir))
        left = os.listdir(tmpdir)
    finally:
        shutil.rmtree(tmpdir)
    assert r.stdout == b"done\n", r.stderr
    assert left == [], "the sandbox's directory was left behind"
    assert sorted(os.listdir(victim)) == ["f", "sub"]
    assert os.stat(os.path.join(victim, "sub")).st_mode & 0o777 == 0o755


def test_natively_that_command_takes_the_permissions(victim):
    need_user("nobody")
    script = f"mkdir -p {victim}/new/deep && chmod 0 {victim}/new/deep {victim}/new && echo done"
    r = subprocess.run(as_user("nobody", ["sh", "-c", script]), capture_output=True)
    assert r.stdout == b"done\n", r.stderr
    assert os.stat(os.path.join(victim, "new")).st_mode & 0o777 == 0
    os.chmod(os.path.join(victim, "new"), 0o700)
    os.chmod(os.path.join(victim, "new", "deep"), 0o700)


@pytest.fixture(scope="module")
def storm_writes(tmp_path_factory):
    need("gcc")
    exe = tempfile.mkdtemp(prefix="umview-robust-prog-", dir="/var/tmp")  # nobody runs it
    os.chmod(exe, 0o755)
    subprocess.run(["gcc", "-O2", "-o", exe + "/storm", os.path.join(PROGS, "signal_storm_writes.c")], check=True)
    yield exe + "/storm"
    shutil.rmtree(exe)


# A call decided at its entry stop passes its coming notification unlooked
# at; a SIGALRM that ended the call before that notification was received
# left the pass to the call's restart, with the arguments its exit stop had
# put back: stress-ng --dentry's open(O_CREAT) got ENOENT and its unlink
# left files (rmdir: ENOTEMPTY), and mkdir made the directory in the real tree
@pytest.mark.parametrize("user,notif", [("root", "1"), ("nobody", "1"), ("nobody", "0")])
def test_calls_restarted_after_a_signal_are_looked_at_again(storm_writes, victim, user, notif):
    need_user(user)
    rounds = "500"
    native = subprocess.run(as_user("nobody", [storm_writes, os.path.join(victim, "sub"), rounds]),
                            capture_output=True, timeout=120)
    assert native.stdout == f"rounds: {rounds}, no failure\n".encode(), native.stderr
    r = subprocess.run(umview_for(user, "--sandbox", "--", storm_writes, os.path.join(victim, "sub"), rounds),
                       capture_output=True, timeout=120, env=dict(os.environ, UMVIEW_NOTIF=notif))
    assert r.stdout == f"rounds: {rounds}, no failure\n".encode(), r.stderr
    assert os.listdir(os.path.join(victim, "sub")) == []


# The sandbox's directory (mode 0700, root's) held the layer and the private
# /tmp: a command of a root sandbox that switched to another user (su,
# setpriv, a daemon or apt dropping privileges) got EACCES for /tmp and for
# every file the view had copied up; trinity run so looped forever
@pytest.mark.parametrize("keep", [False, True])
def test_a_root_sandbox_serves_its_processes_that_switch_to_another_user(victim, keep):
    need_user("root")
    need("setpriv")
    script = f"touch /tmp/x && echo tmp && echo changed > {victim}/f && cat {victim}/f"
    native = subprocess.run(as_user("nobody", ["sh", "-c", script.replace("/tmp/x", f"{victim}/x")]),
                            capture_output=True)
    assert native.stdout == b"tmp\nchanged\n", native.stderr
    os.unlink(os.path.join(victim, "x"))
    with open(os.path.join(victim, "f"), "w") as f:
        f.write("f\n")
    layer = tempfile.mkdtemp(prefix="umview-robust-layer-", dir="/var/tmp")
    os.rmdir(layer)  # --keep-layer makes it
    try:
        r = subprocess.run(umview_for("root", "--sandbox", *(["--keep-layer", layer] if keep else []), "--",
                                      *as_user("nobody", ["sh", "-c", script])), capture_output=True, timeout=120)
    finally:
        shutil.rmtree(layer, ignore_errors=True)
    assert r.stdout == b"tmp\nchanged\n", r.stderr
    assert open(os.path.join(victim, "f")).read() == "f\n"


# The janitor (umview/janitor.py) was forked before the monitor made itself
# not dumpable: a process of the view running as the same user could ptrace
# it (stopped, it outlives the monitor: "a process named umview still
# running after the monitor returned"; driven, it writes the real tree) or
# read its memory. It is now not dumpable, and named umview-janitor.
def test_a_nobody_sandbox_cannot_reach_its_janitor():
    need_user("nobody")
    peek = 'for p in $(pgrep -x -u nobody umview-janitor); do head -c0 /proc/$p/environ && echo open; done; echo end'
    # natively nobody reads a process of its own that is dumpable
    sleeper = subprocess.Popen(as_user("nobody", ["sleep", "30"]))
    try:
        time.sleep(0.2)
        native = subprocess.run(as_user("nobody", ["sh", "-c", f"head -c0 /proc/{sleeper.pid}/environ && echo open"]),
                                capture_output=True)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert native.stdout == b"open\n", native.stderr
    r = subprocess.run(umview_for("nobody", "--sandbox", "--", "sh", "-c", peek), capture_output=True, timeout=120)
    assert r.stdout == b"end\n" and b"Permission denied" in r.stderr, r.stdout + r.stderr


# fchmod of an fd of a lower file or directory that the view has removed
# since (trinity: rmdir of the victim's subdirectory, then fchmod of the fd
# its main process had opened): the view had no such name, took the fd for
# one of an unlinked file, and let the kernel change the real file
GONE_SCRIPT = r"""
import os, sys
d = sys.argv[1]
fds = [os.open(d + "/sub", os.O_RDONLY), os.open(d + "/f", os.O_RDONLY)]
os.rmdir(d + "/sub")
os.unlink(d + "/f")
for fd in fds:
    os.fchmod(fd, 0o4700)
print("done")
"""


@pytest.mark.parametrize("user", USERS)
def test_fchmod_of_an_fd_whose_lower_file_the_view_removed_leaves_the_real_file(victim, user):
    need_user(user)
    native = tempfile.mkdtemp(prefix="umview-robust-native-", dir="/var/tmp")
    try:
        os.mkdir(native + "/sub")
        open(native + "/f", "w").close()
        # natively the removed file's inode does change (its fd shows it)
        ref = subprocess.run(["python3", "-c", GONE_SCRIPT.replace('print("done")',
                                                                   'print(oct(os.fstat(fds[0]).st_mode & 0o7777))'),
                              native], capture_output=True)
        assert ref.stdout == b"0o4700\n", ref.stderr
    finally:
        shutil.rmtree(native)
    before = [os.stat(os.path.join(victim, n)).st_mode for n in ("sub", "f")]
    r = subprocess.run(umview_for(user, "--sandbox", "--", "python3", "-c", GONE_SCRIPT, victim), capture_output=True,
                       timeout=120)
    assert r.stdout == b"done\n", r.stderr
    assert [os.stat(os.path.join(victim, n)).st_mode for n in ("sub", "f")] == before
