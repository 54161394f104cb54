"""Calls under a move mount that the C core serves itself (umview/csrc/emulate.c).

Under a viewfs move mount (and umview -r) the C core answers lookups (stat,
lstat, readlink, access) and opens for reading at their notification, as
the monitor, on the real path. Each test runs one program natively on the
mount's source and in the view on its target and compares every answer;
the view's counters show that C did serve calls (so the comparison is of C's
answers, not only Python's), and a run with UMVIEW_SERVE=0 (Python alone)
gives the same. Identities that differ from the monitor's (a process that
became another user, or restricted itself with Landlock) must get the
kernel's own answers, which the native run shows to differ.
"""
import json
import os
import shutil
import stat

import pytest

from conftest import SYSTEM_PY, as_user, make_lookup_tree, need_user, run, umview_for

LOOKUPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs", "lookups.py")
# C serves calls at notifications only: with UMVIEW_NOTIF=0 (or
# UMVIEW_SERVE=0) the same answers come from Python, and the counters say so
SERVING = os.environ.get("UMVIEW_NOTIF", "1") != "0" and os.environ.get("UMVIEW_SERVE", "1") != "0"


@pytest.fixture
def tree():
    """A source tree with files, directories, symlinks, a FIFO, a directory
    only root may enter and a read-only file, and an empty target; both
    under a directory anyone may enter."""
    top = __import__("tempfile").mkdtemp(prefix="umview-served-", dir="/var/tmp")
    os.chmod(top, 0o755)
    src, target = os.path.join(top, "src"), os.path.join(top, "target")
    make_lookup_tree(src)
    os.makedirs(target)
    os.chmod(os.path.join(src, "private"), 0o700)
    for d, dirs, files in os.walk(src):
        if not d.endswith("private"):
            os.chmod(d, 0o755)
    try:
        yield src, target
    finally:
        shutil.rmtree(top, ignore_errors=True)


def lookups(user, base, *args, view=None, env=None):
    """(output, the view's counters or None) of lookups.py on base, natively
    or in a view of the move mount view = (source, target)."""
    cmd = [SYSTEM_PY, LOOKUPS, base, *args]
    stats = None
    if view is None:
        r = run(as_user(user, cmd) if user != "root" else cmd, timeout=60)
    else:
        fd, stats_file = __import__("tempfile").mkstemp(prefix="umview-stats-", dir="/var/tmp")
        os.close(fd)
        os.chmod(stats_file, 0o666)
        try:
            r = run(umview_for(user, "--stats-file", stats_file, "-p", f"viewfs,mount={view[0]}:{view[1]}", "--",
                               *cmd), env=dict(os.environ, **(env or {})), timeout=120)
            with open(stats_file) as f:
                stats = json.load(f)
        finally:
            os.unlink(stats_file)
    assert r.returncode == 0, r.stderr
    return r.stdout.decode(), stats


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_lookups_and_opens_under_a_move_mount_answer_as_the_kernel_does_on_the_source(tree, user):
    need_user(user)
    src, target = tree
    native, _ = lookups(user, src)
    viewed, stats = lookups(user, target, view=tree)
    assert viewed.splitlines() == native.splitlines()
    if SERVING:
        assert stats["served"] > 100, stats  # C answered them, not only Python
        assert stats["served_fallback"] > 0, stats  # the symlinks and the FIFO: Python's
    python_only, stats = lookups(user, target, view=tree, env={"UMVIEW_SERVE": "0"})
    assert python_only.splitlines() == native.splitlines()
    assert stats["served"] == 0


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_serving_threads_answer_as_the_main_thread_does(tree, user):
    # UMVIEW_SERVERS=2: threads beside the main one serve the notifications,
    # hand what needs ptrace or Python to the main thread (docs/internals.md)
    need_user(user)
    src, target = tree
    native, _ = lookups(user, src)
    viewed, stats = lookups(user, target, view=tree, env={"UMVIEW_SERVERS": "2"})
    assert viewed.splitlines() == native.splitlines()
    if SERVING:
        assert stats["served"] > 100 and stats["served_fallback"] > 0, stats
        assert stats["python_events"] > 0, stats  # the handed-over calls reached Python


def test_a_process_that_becomes_another_user_is_checked_as_that_user(tree):
    need_user("root")
    src, target = tree
    as_root, _ = lookups("root", src)
    native, _ = lookups("root", src, "setuid")
    assert "stat private/f EACCES" in native and "stat private/f EACCES" not in as_root
    viewed, stats = lookups("root", target, "setuid", view=tree)
    assert viewed.splitlines() == native.splitlines()
    assert stats["served"] == 0 and (stats["served_fallback"] > 0 or not SERVING), stats


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_process_under_landlock_gets_its_rules_on_opens(tree, user):
    need_user(user)
    src, target = tree
    native, _ = lookups(user, src, "landlock")
    if native.startswith("no landlock"):
        pytest.skip("the kernel has no Landlock")
    assert "open f EACCES" in native
    viewed, stats = lookups(user, target, "landlock", view=tree)
    assert viewed.splitlines() == native.splitlines()
    assert stats["served"] > 0 or not SERVING, stats  # lookups still served: Landlock does not restrict them


def test_coreutils_stat_through_statx_matches_the_source(tree):
    need_user("root")
    src, target = tree
    script = ('for n in f d rel_link missing d/../f private/f fifo f/; do '
              'stat -c "%n|%F|%s|%i|%a|%h|%N" "$1/$n" 2>&1; echo "$?"; done')
    native = run(["sh", "-c", script, "sh", src])
    viewed = run(umview_for("root", "-p", f"viewfs,mount={src}:{target}", "--", "sh", "-c", script, "sh", target))
    assert viewed.returncode == native.returncode == 0
    assert viewed.stdout.decode().replace(target, "BASE") == native.stdout.decode().replace(src, "BASE")


def _root_tree(top):
    """A root tree of the host's sh, stat, readlink and cat with their
    libraries, and /data with links of every kind (absolute, relative,
    climbing above the root, to a directory)."""
    import subprocess

    root = os.path.join(top, "root")
    for name in ("sh", "stat", "readlink", "cat"):
        program = shutil.which(name)
        out = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
        for lib in [w for line in out.splitlines() for w in line.split() if w.startswith("/")]:
            dest = os.path.join(root, lib.lstrip("/"))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(os.path.realpath(lib), dest)
        os.makedirs(os.path.join(root, "bin"), exist_ok=True)
        shutil.copy2(os.path.realpath(program), os.path.join(root, "bin", name))
    data = os.path.join(root, "data")
    os.makedirs(os.path.join(data, "sub"))
    with open(os.path.join(data, "file"), "w") as f:
        f.write("in the tree\n")
    for name, target in (("rel", "file"), ("abs", "/data/file"), ("dirlink", "/data"), ("up", "../../../data/file"),
                         ("sub/back", "../file"), ("chain", "abs"), ("dangling", "/nowhere"), ("loop", "loop")):
        os.symlink(target, os.path.join(data, name))
    for d, _, _ in os.walk(top):
        os.chmod(d, 0o755)
    return root


LINK_SCRIPT = ('for n in /data/file /data/rel /data/abs /data/dirlink/file /data/dirlink/sub/back /data/up '
               '/data/chain /data/dangling /data/loop /data/sub/../rel /data/abs/; do '
               'stat -c "%n %F %s %i" "$n" 2>&1; stat -L -c "%n %F %s %i" "$n" 2>&1; readlink "$n"; '
               'cat "$n" 2>&1; done; true')


def test_symlinks_of_a_root_tree_are_followed_inside_it_as_chroot_follows_them():
    need_user("root")
    top = __import__("tempfile").mkdtemp(prefix="umview-served-", dir="/var/tmp")
    try:
        root = _root_tree(top)
        native = run(["chroot", root, "/bin/sh", "-c", LINK_SCRIPT])
        stats_file = os.path.join(top, "stats")
        viewed = run(umview_for("root", "--stats-file", stats_file, "-r", root, "--host-paths", "/var/tmp/none",
                                "--", "/bin/sh", "-c", LINK_SCRIPT), cwd="/var/tmp")
        assert viewed.returncode == native.returncode == 0, viewed.stderr
        assert viewed.stdout.decode().splitlines() == native.stdout.decode().splitlines()
        assert "in the tree" in viewed.stdout.decode()
        with open(stats_file) as f:
            stats = json.load(f)
        # links walked by the kernel inside the tree (RESOLVE_IN_ROOT), not by
        # Python; only the walks that fail through a link (dangling, loop,
        # abs/) are Python's: 8 lookups
        assert not SERVING or (stats["served"] > 50 and stats["served_fallback"] <= 10), stats
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_a_link_in_a_root_tree_to_a_host_path_leads_to_the_hosts_file():
    need_user("root")
    top = __import__("tempfile").mkdtemp(prefix="umview-served-", dir="/var/tmp")
    try:
        root = _root_tree(top)
        host = os.path.join(top, "host")  # a host path of the view, and a directory of the tree alike
        for base, text in ((host, "the host's\n"), (os.path.join(root, host.lstrip("/")), "the tree's own\n")):
            os.makedirs(base, exist_ok=True)
            with open(os.path.join(base, "f"), "w") as f:
                f.write(text)
        os.symlink(os.path.join(host, "f"), os.path.join(root, "data", "to_host"))
        os.symlink(os.path.join("..", host.lstrip("/"), "f"), os.path.join(root, "data", "rel_to_host"))
        for d, _, _ in os.walk(top):
            os.chmod(d, 0o755)
        script = 'for n in /data/to_host /data/rel_to_host; do cat "$n"; stat -L -c "%s %i" "$n"; done'
        viewed = run(umview_for("root", "-r", root, "--host-paths", host, "--", "/bin/sh", "-c", script),
                     cwd="/var/tmp")
        assert viewed.returncode == 0, viewed.stderr
        st = os.stat(os.path.join(host, "f"))
        assert viewed.stdout.decode().splitlines() == ["the host's", f"{st.st_size} {st.st_ino}"] * 2
    finally:
        shutil.rmtree(top, ignore_errors=True)
