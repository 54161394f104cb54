"""A process that is not dumpable cannot be read by a monitor without
CAP_SYS_PTRACE: the kernel refuses it the process's memory and its
/proc/PID/cwd and fd/N, tracer or not.

- prctl(PR_SET_DUMPABLE, 0) (trinity's children, ssh-agent, gpg-agent) is
  emulated for such a monitor (umview/bypass.py): the process reads back 0,
  stays readable, and its file calls are served as any other's.
- A process the kernel makes not dumpable itself (the exec of a file the
  user may run but not read) gets EACCES for the calls the view must look
  into, instead of running them unseen on the real tree (found by trinity:
  the victim's files were renamed, chmod'ed and deleted through a cow view
  of /)."""
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import NOBODY, as_user, need_user, umview_for

# Opens a directory of the victim first (a lower fd), then stops being
# dumpable and changes the victim by path and by fd.
SCRIPT = r"""
import ctypes, errno, os, sys
d = sys.argv[1]
fd = os.open(d + "/sub", os.O_RDONLY)
libc = ctypes.CDLL(None, use_errno=True)
if sys.argv[2] == "prctl":
    assert libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE, 0
print("dumpable", libc.prctl(3, 0, 0, 0, 0))  # PR_GET_DUMPABLE
for what, act in [("chmod", lambda: os.chmod(d + "/f1", 0o600)),
                  ("unlink", lambda: os.unlink(d + "/f2")),
                  ("rename", lambda: os.rename(d + "/f3", d + "/f4")),
                  ("relative", lambda: (os.chdir(d), os.unlink("f5"))),
                  ("fchmod", lambda: os.fchmod(fd, 0o700))]:
    try:
        act()
        print(what, "ok")
    except OSError as e:
        print(what, errno.errorcode[e.errno])
"""
CALLS = ["chmod", "unlink", "rename", "relative", "fchmod"]


def _victim():
    d = tempfile.mkdtemp(prefix="umview-not-dumpable-", dir="/var/tmp")
    os.mkdir(os.path.join(d, "sub"))
    for n in ("f1", "f2", "f3", "f4", "f5"):
        with open(os.path.join(d, n), "w") as f:
            f.write(n)
    for p in [d, os.path.join(d, "sub")] + [os.path.join(d, n) for n in ("f1", "f2", "f3", "f4", "f5")]:
        os.chown(p, NOBODY, NOBODY)
    os.chmod(d, 0o755)
    return d


def _state(d):
    return sorted((n, os.lstat(os.path.join(d, n)).st_mode, open(os.path.join(d, n), "rb").read()
                   if os.path.isfile(os.path.join(d, n)) else None) for n in os.listdir(d))


def _run(argv, d, how, env=None, python="/usr/bin/python3"):
    return subprocess.run(argv + [python, "-c", SCRIPT, d, how], capture_output=True, timeout=120, env=env)


@pytest.fixture
def unreadable_python():
    """A copy of python that nobody may run but not read: its exec makes the
    process not dumpable (the kernel's would_dump)."""
    d = tempfile.mkdtemp(prefix="umview-not-dumpable-py-", dir="/var/tmp")
    os.chmod(d, 0o755)
    exe = os.path.join(d, "python3")
    shutil.copy(os.path.realpath("/usr/bin/python3"), exe)
    os.chmod(exe, 0o711)
    yield exe
    shutil.rmtree(d)


@pytest.fixture
def victim():
    d = _victim()
    yield d
    shutil.rmtree(d)


EXPECTED_OK = ["dumpable", "0"] + [w for c in CALLS for w in (c, "ok")]


@pytest.mark.parametrize("how", ["prctl", "exec"])
def test_natively_a_process_that_is_not_dumpable_changes_the_victim(victim, how, unreadable_python):
    need_user("nobody")
    before = _state(victim)
    r = _run(as_user("nobody", []), victim, how, python=unreadable_python if how == "exec" else "/usr/bin/python3")
    assert r.stdout.decode().split()[2:] == EXPECTED_OK[2:], r.stderr
    assert _state(victim) != before


@pytest.mark.parametrize("notif", ["1", "0"])
@pytest.mark.parametrize("user", ["nobody", "root"])
def test_pr_set_dumpable_in_a_sandbox_is_served_and_changes_no_real_file(victim, user, notif):
    """prctl(PR_SET_DUMPABLE, 0) succeeds and reads back 0; the process's
    calls work, in the layer (a normal user's monitor emulates the flag, a
    root one reads the process anyway)."""
    need_user(user)
    before = _state(victim)
    r = _run(umview_for(user, "--sandbox", "--"), victim, "prctl", dict(os.environ, UMVIEW_NOTIF=notif))
    assert r.stdout.decode().split() == EXPECTED_OK, r.stderr
    assert b"is not dumpable" not in r.stderr
    assert _state(victim) == before


@pytest.mark.parametrize("notif", ["1", "0"])
def test_a_process_made_not_dumpable_by_its_exec_gets_eacces_in_a_sandbox_of_a_normal_user(
        victim, notif, unreadable_python):
    """Its calls fail with EACCES (the dynamic loader cannot even open the
    libraries) and a message says why; no real file changes."""
    need_user("nobody")
    before = _state(victim)
    r = _run(umview_for("nobody", "--sandbox", "--"), victim, "exec", dict(os.environ, UMVIEW_NOTIF=notif),
             python=unreadable_python)
    assert r.returncode != 0 and b"Permission denied" in r.stderr, r.stderr
    assert b"is not dumpable" in r.stderr and b"run umview as root" in r.stderr
    assert _state(victim) == before
