"""Where the kernel refuses a normal user a user namespace, a mount in a view
fails with a message that names the cause and the fix; root needs none.

The refusal is made for real, without touching the machine's settings: the
test runs in a user namespace of its own (uids and gids 0-65535 mapped to
themselves, so nobody is nobody there) whose user.max_user_namespaces is 0,
so that no namespace can be made below it (user_namespaces(7): the limit is
per user namespace)."""
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import as_user, entry_for, need_user

CLONE_NEWUSER = 0x10000000

# fork; the child unshares a user namespace and waits; the parent writes its
# maps; the child becomes its root, sets the limit to 0, and execs argv
NO_USERNS = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
ready, go = os.pipe(), os.pipe()
pid = os.fork()
if pid == 0:
    if libc.unshare(%d) != 0:
        os._exit(90)
    os.write(ready[1], b"x")
    os.read(go[0], 1)
    os.setgid(0)
    os.setuid(0)
    with open("/proc/sys/user/max_user_namespaces", "w") as f:
        f.write("0")
    os.execvp(sys.argv[1], sys.argv[1:])
os.read(ready[0], 1)
for name in ("uid_map", "gid_map"):
    with open("/proc/%%d/%%s" %% (pid, name), "w") as f:
        f.write("0 0 65536")
os.write(go[1], b"x")
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
""" % CLONE_NEWUSER


def _in_a_namespace_without_user_namespaces(argv, **kw):
    return subprocess.run([sys.executable, "-c", NO_USERNS, *argv], capture_output=True, timeout=60, **kw)


@pytest.fixture
def base():
    """A directory every user can reach (pytest's tmp_path is root's alone)."""
    d = tempfile.mkdtemp(prefix="umview-fs-userns-")
    os.chmod(d, 0o755)
    yield pathlib.Path(d)
    shutil.rmtree(d)


@pytest.fixture
def target(base):
    d = base / "mnt"
    d.mkdir()
    os.chmod(d, 0o777)
    return str(d)


def _vumount(base, user):
    """A vumount that user can run (umview's console scripts may use a
    python only root can reach)."""
    path = base / f"vumount-{user}"
    path.write_text(f'#!/bin/sh\nexec {shlex.join(entry_for(user, "umview.commands:vumount_main"))} "$@"\n')
    os.chmod(path, 0o755)
    return str(path)


def test_without_user_namespaces_a_users_mount_fails_naming_the_cause_and_the_fix(base, target):
    need_user("nobody")
    # the setting is in force there: natively a normal user cannot make one
    probe = _in_a_namespace_without_user_namespaces(as_user("nobody", ["unshare", "-U", "true"]))
    assert probe.returncode != 0, probe
    script = f"{_vumount(base, 'nobody')} -t tmpfs -o size=1m none {target}; echo status=$?"
    r = _in_a_namespace_without_user_namespaces(
        as_user("nobody", entry_for("nobody", "umview.cli:main", "-p", "fs", "--", "sh", "-c", script)))
    err = r.stderr.decode(errors="replace")
    assert b"status=32" in r.stdout, err
    assert "cannot make a user namespace for the mount helper" in err, err
    assert "user.max_user_namespaces" in err and "sysctl" in err, err
    assert "Operation not permitted" in err, err
    assert os.listdir(target) == []


def test_without_user_namespaces_root_still_mounts(base, target):
    need_user("root")
    script = f"{_vumount(base, 'root')} -t tmpfs -o size=1m none {target} && echo hi > {target}/f && cat {target}/f"
    r = _in_a_namespace_without_user_namespaces(entry_for("root", "umview.cli:main", "-p", "fs", "--", "sh", "-c",
                                                          script))
    assert r.stdout == b"hi\n", r.stderr
    assert os.listdir(target) == []
