"""Reads of the upper layer's files that the C core serves itself.

In a copy-on-write view, a file the view wrote lies in the upper layer, and
the layer set names it LAYER_FILE: a call that only reads it (stat, lstat,
readlink, access, an open for reading) is answered by the C core on the
upper path at its notification (umview/csrc/emulate.c), not rewritten in
Python. Each test makes the upper files in the view, then compares what a
program sees with the C core serving against a run with UMVIEW_SERVE=0
(Python alone) on the same layer, and the view's answers after changes
against the same changes made natively.
"""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import NOBODY, SYSTEM_PY, make_lookup_tree, need_user, run, umview_for

LOOKUPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs", "lookups.py")
SERVING = os.environ.get("UMVIEW_NOTIF", "1") != "0" and os.environ.get("UMVIEW_SERVE", "1") != "0"


@pytest.fixture
def layered(request):
    """(tree, layer): a tree like test_move_served's (files, directories,
    symlinks, a FIFO, a private directory, a read-only file) owned by the
    test's user, and an empty layer directory for a cow mount of it."""
    user = request.param
    need_user(user)
    top = tempfile.mkdtemp(prefix="umview-upper-", dir="/var/tmp")
    os.chmod(top, 0o755)
    tree, layer = os.path.join(top, "tree"), os.path.join(top, "layer")
    make_lookup_tree(tree)
    os.makedirs(layer)
    uid = 0 if user == "root" else NOBODY
    for d, dirs, files in os.walk(top):
        for n in [d] + [os.path.join(d, x) for x in files + dirs]:
            os.lchown(n, uid, uid)
    os.chmod(os.path.join(tree, "private"), 0o700)
    try:
        yield user, tree, layer
    finally:
        shutil.rmtree(top, ignore_errors=True)


def in_view(user, tree, layer, *cmd, env=None):
    """(completed run, the view's counters) of cmd in a cow view of tree."""
    fd, stats_file = tempfile.mkstemp(prefix="umview-stats-", dir="/var/tmp")
    os.close(fd)
    os.chmod(stats_file, 0o666)
    try:
        r = run(umview_for(user, "--stats-file", stats_file, "-p", f"viewfs,mount={layer}:{tree}:cow", "--", *cmd),
                env=dict(os.environ, **(env or {})), timeout=120)
        with open(stats_file) as f:
            return r, json.load(f)
    finally:
        os.unlink(stats_file)


@pytest.mark.parametrize("layered", ["root", "nobody"], indirect=True)
def test_reads_of_upper_files_answer_as_python_does(layered):
    user, tree, layer = layered
    # every regular file copied up (its times changed in the view), and a
    # symlink of the upper layer's own
    made, _ = in_view(user, tree, layer, "sh", "-c", 'find "$0" -type f -exec touch -m -d @1000000000 {} + && '
                      'ln -s d/f "$0/upper_link"', tree)
    assert made.returncode == 0, made.stderr
    assert os.path.getmtime(os.path.join(tree, "f")) != 1000000000  # the real file did not change
    assert os.path.getmtime(os.path.join(layer, "f")) == 1000000000  # the upper copy did
    served, stats = in_view(user, tree, layer, SYSTEM_PY, LOOKUPS, tree)
    python, pstats = in_view(user, tree, layer, SYSTEM_PY, LOOKUPS, tree, env={"UMVIEW_SERVE": "0"})
    assert served.returncode == 0 and python.returncode == 0, served.stderr + python.stderr
    assert served.stdout.decode().splitlines() == python.stdout.decode().splitlines()
    assert "stat f ('-rw-r--r--', 7," in served.stdout.decode()
    assert pstats["served"] == 0
    if SERVING:
        assert stats["served"] > 50, stats  # C answered the upper files' reads
        assert stats["served_fallback"] == 0 or stats["served_fallback"] < stats["served"], stats


CHANGES = ('cd "$0"; for n in f d/f ro; do cat $n; done; stat -c "%s %a" f; '
           'echo changed > f; cat f; stat -c %s f; chmod 600 f; stat -c %a f; test -r f && echo readable; '
           'mv f moved; cat f 2>&1 | sed "s/.*: //"; cat moved; ln -s moved link; readlink link; cat link; '
           'rm moved; cat link 2>&1 | sed "s/.*: //"; echo again > moved; cat link; '
           'rm d/f; test -e d/f || echo d/f gone; readlink d/f 2>&1 | sed "s/.*: //"')


@pytest.mark.parametrize("layered", ["root", "nobody"], indirect=True)
def test_upper_files_changed_moved_and_removed_in_the_view_read_as_natively(layered):
    user, tree, layer = layered
    copy = tree + ".native"
    subprocess.run(["cp", "-a", tree, copy], check=True)  # owners, modes, the FIFO and links as they are
    try:
        cmd = ["sh", "-c", CHANGES]
        native = run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] * (user != "root")
                     + cmd + [copy])
        assert b"changed" in native.stdout and b"d/f gone" in native.stdout, native.stderr
        # the files first copied up in one view, then changed in another
        made, _ = in_view(user, tree, layer, "sh", "-c", 'find "$0" -type f -exec touch {} +', tree)
        assert made.returncode == 0, made.stderr
        viewed, stats = in_view(user, tree, layer, *cmd, tree)
        assert viewed.stdout == native.stdout, viewed.stderr
        assert viewed.returncode == native.returncode
        with open(os.path.join(tree, "f")) as f:
            assert f.read() == "a file\n"  # the real tree is as it was
        assert os.path.exists(os.path.join(tree, "d", "f"))
        if SERVING:
            assert stats["served"] > 0, stats
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def in_sandbox(user, layer, *cmd, env=None):
    """(completed run, counters) of cmd in a sandbox whose layer is kept in layer."""
    fd, stats_file = tempfile.mkstemp(prefix="umview-stats-", dir="/var/tmp")
    os.close(fd)
    os.chmod(stats_file, 0o666)
    try:
        r = run(umview_for(user, "--stats-file", stats_file, "--sandbox", "--keep-layer", layer, "--", *cmd),
                env=dict(os.environ, **(env or {})), timeout=120)
        with open(stats_file) as f:
            return r, json.load(f)
    finally:
        os.unlink(stats_file)


OPENS = "import os, sys\nfor _ in range(200):\n    os.close(os.open(sys.argv[1], os.O_RDONLY))\n"


@pytest.mark.parametrize("layered", ["root", "nobody"], indirect=True)
def test_a_sandbox_opens_its_files_in_c_but_not_for_a_process_with_landlock_rules_of_its_own(layered):
    user, tree, layer = layered
    made, _ = in_sandbox(user, layer, "sh", "-c", 'find "$0" -type f -exec touch {} +', tree)
    assert made.returncode == 0, made.stderr
    # the sandbox's own Landlock domain rules writes only: opens for reading
    # are served (200 of them here, each an fd added to the process)
    opened, stats = in_sandbox(user, layer, SYSTEM_PY, "-c", OPENS, os.path.join(tree, "f"))
    assert opened.returncode == 0, opened.stderr
    if SERVING:
        assert stats["served"] >= 200, stats
    # a process that restricts its own reads gets its rules' EACCES, as
    # Python's answers give it (the monitor's open would not check them)
    served, _ = in_sandbox(user, layer, SYSTEM_PY, LOOKUPS, tree, "landlock")
    python, _ = in_sandbox(user, layer, SYSTEM_PY, LOOKUPS, tree, "landlock", env={"UMVIEW_SERVE": "0"})
    assert served.returncode == 0 and python.returncode == 0, served.stderr + python.stderr
    if served.stdout.startswith(b"no landlock"):
        pytest.skip("no Landlock here: " + served.stdout.decode().strip())
    assert served.stdout.decode().splitlines() == python.stdout.decode().splitlines()
    assert "open f EACCES" in served.stdout.decode()
