"""chroot(2) in a view: served by the view, for any user, with no way out.

progs/chroot_breakout.c tries one way out of a chroot each and writes a
victim file outside the tree if it gets there. Natively (as root) the ways
the kernel leaves open do reach the victim, so the tests cannot pass
vacuously; in a view (as root and as nobody) no way does.
"""
import os
import stat
import shutil
import subprocess
import tempfile

import pytest

from conftest import copy_host_programs, need, need_user, umview_for

PROGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs")
# the ways a real chroot leaves open to root (the others the kernel closes too)
NATIVE_WAYS = ("cwd", "dirfd", "openat2", "rechroot")
WAYS = NATIVE_WAYS + ("dotdot", "symlink", "abslink", "procroot")


def _built(name, *flags):
    """progs/NAME.c built where every user may run it (a generator: the
    fixture's body, which removes it at the end)."""
    need("gcc")
    out = tempfile.mkdtemp(prefix=f"umview-{name}-", dir="/var/tmp")
    try:
        os.chmod(out, 0o755)
        exe = os.path.join(out, name)
        subprocess.run(["gcc", "-O1", *flags, "-o", exe, os.path.join(PROGS, name + ".c")], check=True)
        yield exe
    finally:
        shutil.rmtree(out, ignore_errors=True)


@pytest.fixture(scope="module")
def breakout():
    yield from _built("chroot_breakout", "-static")


@pytest.fixture
def place():
    """(tree, victim): an empty tree everyone may write (with a proc
    directory for procfs), and a victim file outside it."""
    tree = tempfile.mkdtemp(prefix="umview-chroot-tree-", dir="/var/tmp")
    box = tempfile.mkdtemp(prefix="umview-chroot-victim-", dir="/var/tmp")
    try:
        os.mkdir(os.path.join(tree, "proc"))
        os.chmod(tree, 0o777)
        os.chmod(box, 0o777)
        victim = os.path.join(box, "victim")
        with open(victim, "w") as f:
            f.write("victim\n")
        os.chmod(victim, 0o666)
        yield tree, victim
    finally:
        shutil.rmtree(tree, ignore_errors=True)
        shutil.rmtree(box, ignore_errors=True)


def content(path):
    with open(path) as f:
        return f.read()


@pytest.mark.parametrize("way", NATIVE_WAYS)
def test_natively_root_leaves_a_chroot_this_way(breakout, place, way):
    need_user("root")
    tree, victim = place
    r = subprocess.run([breakout, way, tree, victim], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert content(victim) == "escaped\n"


@pytest.mark.parametrize("user", ["root", "nobody"])
@pytest.mark.parametrize("way", WAYS)
def test_a_chroot_in_a_view_has_no_way_out(breakout, place, way, user):
    need_user(user)
    tree, victim = place
    # a mount gives the view its path engines; /proc in the tree is procfs
    view = umview_for(user, "-p", f"viewfs,mount=/proc:{tree}/proc", "--", breakout, way, tree, victim)
    r = subprocess.run(view, capture_output=True, timeout=60)
    assert content(victim) == "victim\n"
    assert r.returncode == 1, (r.stdout, r.stderr)  # the way failed, with its errno
    assert not r.stderr.startswith(b"chroot:"), r.stderr  # chroot itself worked, for any user


@pytest.mark.parametrize("user", ["root", "nobody"])
@pytest.mark.parametrize("way", WAYS)
def test_every_way_out_of_a_chroot_in_a_view_leads_inside_it(breakout, place, way, user):
    """The same path below the tree (and below its sub, the second root of
    rechroot): each way names that one, the real victim stays."""
    need_user(user)
    tree, victim = place
    inside = []
    for root in (tree, os.path.join(tree, "sub")):
        copy = root + victim
        os.makedirs(os.path.dirname(copy))
        with open(copy, "w") as f:
            f.write("inside\n")
        os.chmod(copy, 0o666)
        inside.append(copy)
    for d, _, _ in os.walk(tree):
        os.chmod(d, 0o777)
    view = umview_for(user, "-p", f"viewfs,mount=/proc:{tree}/proc", "--", breakout, way, tree, victim)
    r = subprocess.run(view, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert content(victim) == "victim\n"
    assert [content(p) for p in inside] == (["inside\n", "escaped\n"] if way == "rechroot"
                                            else ["escaped\n", "inside\n"])


def test_a_chroot_outside_any_view_with_paths_stays_the_kernels(breakout, place):
    """Without a path module the view has nothing to serve chroot with: the
    kernel's own (a normal user gets EPERM, as natively)."""
    need_user("nobody")
    tree, victim = place
    r = subprocess.run(umview_for("nobody", "--", breakout, "dotdot", tree, victim), capture_output=True,
                       timeout=60)
    assert r.returncode == 1 and r.stderr.startswith(b"chroot: Operation not permitted"), r.stderr


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_unix_socket_bound_in_a_chroot_is_made_below_its_root(breakout, place, user):
    """The kernel would make it at the path from the real root: outside the
    tree, where the process could not reach."""
    need_user(user)
    tree, victim = place
    box = os.path.dirname(victim)
    os.makedirs(tree + box)
    for d, _, _ in os.walk(tree):
        os.chmod(d, 0o777)
    view = umview_for(user, "-p", f"viewfs,mount=/proc:{tree}/proc", "--", breakout, "bind", tree, victim)
    r = subprocess.run(view, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"bound {box}/sock\n".encode()
    assert not os.path.exists(os.path.join(box, "sock"))
    assert stat.S_ISSOCK(os.lstat(tree + box + "/sock").st_mode)


def test_proc_cwd_and_root_links_say_the_views_paths(place):
    """readlink of /proc/self/cwd gives what getcwd gives (the kernel's link
    names the real directory a mount made of it), and /proc/self/root the
    process's root as it sees it."""
    tree, _ = place
    os.makedirs(os.path.join(tree, "in"))
    script = (f"cd /unreal{tree} && readlink /proc/self/cwd && readlink /proc/$$/cwd; "
              f"exec chroot {tree} /bin/sh -c 'cd /in && /bin/readlink /proc/self/cwd /proc/self/root'")
    need("ldd")
    copy_host_programs(tree, ("sh", "readlink"))
    native_sh = subprocess.run(["sh", "-c", f"cd {tree} && readlink /proc/self/cwd"], capture_output=True)
    assert native_sh.stdout == f"{tree}\n".encode()
    r = subprocess.run(umview_for("root", "-p", "unreal", "--", "sh", "-c", script), capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == [f"/unreal{tree}"] * 2 + ["/in", "/"]


@pytest.fixture(scope="module")
def fs_share():
    yield from _built("fs_share")


def test_a_child_sharing_the_fs_moves_its_parents_cwd_in_the_view(fs_share, place):
    """clone(CLONE_FS): the child's chdir is the parent's too, natively and
    into a directory the view shows."""
    tree, _ = place
    os.makedirs(os.path.join(tree, "sub"))
    native = subprocess.run([fs_share, os.path.join(tree, "sub")], capture_output=True, timeout=60)
    assert native.stdout == f"{tree}/sub\n".encode(), native.stderr
    r = subprocess.run(umview_for("root", "-p", "unreal", "--", fs_share, f"/unreal{tree}/sub"),
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"/unreal{tree}/sub\n".encode()


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_child_sharing_the_fs_chroots_its_parent_too(fs_share, place, user):
    need_user(user)
    tree, _ = place
    os.makedirs(os.path.join(tree, "sub"))
    open(os.path.join(tree, "marker"), "w").close()
    if user == "root":  # natively: the parent's root is the tree now
        native = subprocess.run([fs_share, os.path.join(tree, "sub"), tree], capture_output=True, timeout=60)
        assert native.stdout == b"/sub\nmarker\n", native.stderr
    r = subprocess.run(umview_for(user, "-p", "unreal", "--", fs_share, os.path.join(tree, "sub"), tree),
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"/sub\nmarker\n"
