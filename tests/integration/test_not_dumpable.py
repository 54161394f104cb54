"""A process that is not dumpable (prctl(PR_SET_DUMPABLE, 0), as trinity's
children, ssh-agent or gpg-agent make themselves) cannot be read by a monitor
without CAP_SYS_PTRACE: the kernel refuses it the process's memory and its
/proc/PID/cwd and fd/N, tracer or not. Its path and fd calls then fail with
EACCES instead of running unseen on the real tree (found by trinity: the
victim's files were renamed, chmod'ed and deleted through a cow view of /)."""
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
assert libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE, 0
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


def _run(argv, d, env=None):
    return subprocess.run(argv + ["/usr/bin/python3", "-c", SCRIPT, d], capture_output=True, timeout=120, env=env)


@pytest.fixture
def victim():
    d = _victim()
    yield d
    shutil.rmtree(d)


def test_natively_a_process_that_is_not_dumpable_changes_the_victim(victim):
    need_user("nobody")
    before = _state(victim)
    r = _run(as_user("nobody", []), victim)
    assert r.stdout.decode().split() == [w for c in CALLS for w in (c, "ok")], r.stderr
    assert _state(victim) != before


@pytest.mark.parametrize("notif", ["1", "0"])
@pytest.mark.parametrize("user", ["nobody", "root"])
def test_a_process_that_is_not_dumpable_changes_no_real_file_in_a_sandbox(victim, user, notif):
    """As nobody (no CAP_SYS_PTRACE) its calls fail with EACCES and a message
    says why; as root the monitor reads it and serves it as any other."""
    need_user(user)
    before = _state(victim)
    r = _run(umview_for(user, "--sandbox", "--"), victim, dict(os.environ, UMVIEW_NOTIF=notif))
    result = "EACCES" if user == "nobody" else "ok"
    assert r.stdout.decode().split() == [w for c in CALLS for w in (c, result)], r.stderr
    assert (b"is not dumpable" in r.stderr and b"run umview as root" in r.stderr) == (user == "nobody")
    assert _state(victim) == before
