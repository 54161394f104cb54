"""umview.landlock: the kernel's bound on where a sandbox writes. A ruleset
enforced in a child: writes beneath an allowed directory work, the same
writes elsewhere (which work without it, checked first) get EACCES; files of
devices are writable with FILE_WRITES alone; metadata stays outside
Landlock's reach (what Call.run_anchored is for)."""
import os
import subprocess
import sys
import tempfile

import pytest

from umview import landlock

CHILD = r"""
import errno, os, sys
from umview import landlock
allowed, real, enforce = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
r = landlock.Ruleset(landlock.abi())
r.allow(allowed, landlock.TREE_WRITES)
r.allow("/dev", landlock.FILE_WRITES)
if enforce:
    r.enforce()  # as a nested sandbox's process does before its exec
def attempt(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
attempt("write-allowed", lambda: open(os.path.join(allowed, "new"), "w").write("x"))
attempt("write-real", lambda: open(os.path.join(real, "f"), "a").write("x"))
attempt("create-real", lambda: open(os.path.join(real, "g"), "w"))
attempt("mkdir-real", lambda: os.mkdir(os.path.join(real, "d")))
attempt("truncate-real", lambda: os.truncate(os.path.join(real, "f"), 0))
attempt("devnull", lambda: open("/dev/null", "w").write("x"))
attempt("chmod-real", lambda: os.chmod(os.path.join(real, "f"), 0o600))
attempt("rename-out", lambda: os.rename(os.path.join(real, "f"), os.path.join(allowed, "f")))
"""


def _dirs():
    allowed, real = tempfile.mkdtemp(), tempfile.mkdtemp()
    with open(os.path.join(real, "f"), "w") as f:
        f.write("orig")
    return allowed, real


def test_a_ruleset_refuses_writes_outside_its_directories_and_leaves_metadata():
    if landlock.abi() < 3:
        pytest.skip("the kernel has no Landlock ABI 3 (Linux 6.2)")
    try:
        # natively (the ruleset made, not enforced) every attempt works
        allowed, real = _dirs()
        r = subprocess.run([sys.executable, "-c", CHILD, allowed, real, "0"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert all(line.endswith(" ok") for line in r.stdout.split("\n")[:-1]), r.stdout
        subprocess.run(["rm", "-rf", allowed, real])
        allowed, real = _dirs()
        r = subprocess.run([sys.executable, "-c", CHILD, allowed, real, "1"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split("\n") == [
            "write-allowed ok", "write-real EACCES", "create-real EACCES", "mkdir-real EACCES",
            "truncate-real EACCES", "devnull ok", "chmod-real ok", "rename-out EACCES", ""]
        assert open(os.path.join(real, "f")).read() == "orig"
        assert sorted(os.listdir(real)) == ["f"]
        assert os.stat(os.path.join(real, "f")).st_mode & 0o777 == 0o600  # not Landlock's: anchored by the view
    finally:
        subprocess.run(["rm", "-rf", allowed, real])


def test_inherited_writable_files_are_the_regular_files_open_for_writing(tmp_path):
    w = open(tmp_path / "w", "w")
    ro = open(tmp_path / "r", "w+")
    ro.close()
    ro = open(tmp_path / "r")
    rpipe, wpipe = os.pipe()
    os.set_inheritable(w.fileno(), True)
    os.set_inheritable(ro.fileno(), True)
    os.set_inheritable(wpipe, True)
    try:
        found = {os.path.realpath(p) for p in landlock.inherited_writable_files()}
        assert str(tmp_path / "w") in found
        assert str(tmp_path / "r") not in found
        assert not any(p.startswith("pipe:") for p in found)
    finally:
        w.close()
        ro.close()
        os.close(rpipe)
        os.close(wpipe)


def test_abi_one_is_refused_with_a_reason():
    with pytest.raises(OSError, match="ABI 2"):
        landlock.Ruleset(1)
