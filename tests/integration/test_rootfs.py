"""umview -r ROOTFS: another root tree as /, for any user (as proot -R).

The root trees here are made by the test from the host's own programs and
libraries, with a loader at a path only the tree has, so that a program of
the tree cannot run natively: the differential proof that what runs in the
view is the tree's. A Debian tree made by debootstrap, with its own shell
and apt, runs in tests/integration/test_system_image.py (slow).
"""
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import as_user, copy_host_programs, libraries, need, need_user, umview_for

PROGRAMS = ("sh", "bash", "cat", "ls", "env", "rm", "mkdir")
GUEST_LOADER = "/guestlib/ld.so"  # where only the tree has a loader


@pytest.fixture
def tree():
    """A root tree of the host's sh, bash, cat, ls, env, rm and mkdir with their
    libraries (at /bin, so its own / is complete), an os-release of its own, a
    #! script, and `hello`, whose loader is at a path only the tree has."""
    need("gcc", "ldd")
    root = tempfile.mkdtemp(prefix="umview-rootfs-", dir="/var/tmp")
    try:
        copy_host_programs(root, PROGRAMS)
        os.makedirs(os.path.join(root, "etc"))
        with open(os.path.join(root, "etc", "os-release"), "w") as f:
            f.write('PRETTY_NAME="umview test tree"\n')
        with open(os.path.join(root, "bin", "script"), "w") as f:
            f.write('#!/bin/sh\necho "script $0 $*"\n')
        os.chmod(os.path.join(root, "bin", "script"), 0o755)
        loader = os.path.realpath(libraries(shutil.which("cat"))[-1])
        assert "ld-linux" in loader, loader
        os.makedirs(os.path.join(root, os.path.dirname(GUEST_LOADER).lstrip("/")))
        shutil.copy2(loader, os.path.join(root, GUEST_LOADER.lstrip("/")))
        src = os.path.join(root, "hello.c")
        with open(src, "w") as f:
            f.write('#include <stdio.h>\n#include <unistd.h>\n'
                    'int main(int argc, char **argv) { char exe[4096]; '
                    'ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1); exe[n < 0 ? 0 : n] = 0; '
                    'printf("argv0=%s exe=%s argc=%d\\n", argv[0], exe, argc); return 0; }\n')
        subprocess.run(["gcc", "-o", os.path.join(root, "bin", "hello"), src,
                        f"-Wl,--dynamic-linker={GUEST_LOADER}"], check=True)
        os.unlink(src)
        for d, dirs, _ in os.walk(root):
            os.chmod(d, 0o755)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def view(user, root, *cmd, opts=()):
    # from a directory that is none of the host's paths -r keeps (the
    # checkout may lie under /tmp): the command starts at the tree's /
    return subprocess.run(umview_for(user, "-r", root, *opts, "--", *cmd), capture_output=True, timeout=120,
                          cwd="/var/tmp")


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_program_whose_loader_only_the_root_tree_has_runs_with_the_trees_loader(tree, user):
    need_user(user)
    with pytest.raises(FileNotFoundError):  # the kernel finds no /guestlib/ld.so on the host
        subprocess.run([os.path.join(tree, "bin", "hello"), "a"], capture_output=True)
    r = view(user, tree, "hello", "a", "b")
    assert r.returncode == 0, r.stderr
    # the name the process gave, its own path as /proc/self/exe, its arguments
    assert r.stdout == b"argv0=hello exe=/bin/hello argc=3\n"


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_program_of_the_root_tree_is_named_after_itself_not_its_loader(tree, user):
    # the kernel names a process after the last component of the path given
    # to exec (ps, pgrep and killall read it): natively "cat", "sh", and a
    # script's own name, not its interpreter's
    need_user(user)
    with open(os.path.join(tree, "bin", "named.sh"), "w") as f:
        f.write("#!/bin/sh\ncat /proc/$$/comm\n")
    os.chmod(os.path.join(tree, "bin", "named.sh"), 0o755)
    r = view(user, tree, "sh", "-c", "cat /proc/self/comm; cat /proc/$$/comm; named.sh; cd /bin && ./named.sh")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == ["cat", "sh", "named.sh", "named.sh"]


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_the_root_tree_is_slash_and_the_host_paths_stay_the_hosts(tree, user):
    need_user(user)
    r = view(user, tree, "sh", "-c", "cat /etc/os-release; ls /; pwd; cd /bin && pwd && ls hello; "
             "ls -d /proc/self/fd /dev/null /tmp; test -e /usr/share || echo no-usr-share")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines[0] == 'PRETTY_NAME="umview test tree"'
    assert sorted(lines[1:1 + len(os.listdir(tree))]) == sorted(os.listdir(tree))
    rest = lines[1 + len(os.listdir(tree)):]
    assert rest[:3] == ["/", "/bin", "hello"]  # started at the tree's /
    assert rest[3:6] == ["/dev/null", "/proc/self/fd", "/tmp"]
    assert rest[6:] == ["no-usr-share"]  # the host's /usr is not the tree's


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_host_path_below_directories_the_tree_lacks_is_reached_one_lookup_at_a_time(tree, user):
    """--host-paths DIR (or $HOME) where the tree has no DIR's parents: each
    directory on the way can be looked up and listed, as the kernel's bind
    mount's (glibc's realpath lstats every one; apt-get install of a .deb
    there failed with 'flAbsPath ... realpath (2: No such file or
    directory)'); the host's directory shows from the first one the tree
    lacks."""
    need_user(user)
    base = tempfile.mkdtemp(prefix="umview-hostpath-", dir="/var/tmp")
    try:
        os.makedirs(os.path.join(base, "deep", "inner"))
        with open(os.path.join(base, "deep", "inner", "f"), "w") as f:
            f.write("host\n")
        for d, _, _ in os.walk(base):
            os.chmod(d, 0o755)
        assert not os.path.exists(tree + "/var")
        inner = os.path.join(base, "deep", "inner")
        r = view(user, tree, "sh", "-c", f"ls -d {base} && ls {base}/deep && cd {inner} && cat f && pwd -P",
                 opts=("--host-paths", f"/proc:{inner}"))
        assert (r.returncode, r.stdout.decode()) == (0, f"{base}\ninner\nhost\n{inner}\n"), r.stderr
        r = view(user, tree, "ls", "/", opts=("--host-paths", f"/proc:{inner}"))
        assert sorted(r.stdout.decode().split()) == sorted(os.listdir(tree))  # the tree's /, no more
    finally:
        shutil.rmtree(base)


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_an_open_files_proc_link_names_it_by_its_path_in_the_tree_as_in_a_chroot(tree, user):
    """readlink of /proc/self/fd/N and /proc/PID/fd/N of a file of the tree:
    its path in the tree, as in root's chroot (the kernel names the real
    path: the tree's place on the host); a host path stays the host's."""
    need_user(user)
    script = ("exec 3</etc/os-release 4</bin 5</proc/self/status; "
              'for f in /proc/self/fd/3 /proc/$$/fd/4 /proc/$$/fd/5; do l=$(ls -l $f); echo "${l##* -> }"; done')
    r = view(user, tree, "sh", "-c", script)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines()[:2] == ["/etc/os-release", "/bin"]
    assert r.stdout.decode().splitlines()[2].startswith("/proc/")
    if os.geteuid() == 0 and shutil.which("chroot") and shutil.which("unshare"):
        os.makedirs(os.path.join(tree, "proc"))
        native = subprocess.run(["unshare", "-m", "sh", "-c", f'mount -t proc proc {tree}/proc && exec chroot {tree} '
                                 '/bin/sh -c "$0"', script], capture_output=True, timeout=60)
        lines = native.stdout.decode().splitlines()
        assert lines[:2] == ["/etc/os-release", "/bin"] and lines[2].startswith("/proc/"), native.stderr


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_the_libraries_a_program_loads_are_the_root_trees(tree, user):
    need_user(user)
    r = view(user, tree, "cat", "/proc/self/maps")
    assert r.returncode == 0, r.stderr
    libs = {line.split()[-1] for line in r.stdout.decode().splitlines() if ".so" in line}
    assert libs and all(p.startswith(tree + "/") for p in libs), libs


def test_a_script_of_the_root_tree_runs_with_the_trees_shell(tree):
    r = view("root", tree, "script", "x", "y")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"script /bin/script x y\n"


def test_the_current_directory_stays_when_it_is_one_of_the_hosts_paths(tree):
    here = tempfile.mkdtemp(prefix="umview-rootfs-cwd-", dir="/tmp")
    try:
        r = subprocess.run(umview_for("root", "-r", tree, "--", "sh", "-c", "pwd; ls"), capture_output=True,
                           timeout=120, cwd=here)
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode() == here + "\n"
        r = subprocess.run(umview_for("root", "-r", tree, "--host-paths", "/proc", "--", "sh", "-c", "pwd"),
                           capture_output=True, timeout=120, cwd=here)
        assert r.stdout == b"/\n", r.stderr  # /tmp is the tree's: its /
    finally:
        os.rmdir(here)


def test_bad_root_trees_and_host_paths_are_refused_with_what_to_do(tree):
    r = subprocess.run(umview_for("root", "-r", "/nonexistent/tree", "--", "true"), capture_output=True, timeout=60)
    assert r.returncode == 2 and b"not a directory" in r.stderr and b"debootstrap" in r.stderr
    r = subprocess.run(umview_for("root", "-r", tree, "--host-paths", "proc", "--", "true"), capture_output=True,
                       timeout=60)
    assert r.returncode == 2 and b"not an absolute path" in r.stderr
    r = subprocess.run(umview_for("root", "--host-paths", "/proc", "--", "true"), capture_output=True, timeout=60)
    assert r.returncode == 2 and b"goes with -r" in r.stderr


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_sandboxed_root_tree_changes_in_the_layer_and_stays_as_it_is(tree, user):
    need_user(user)
    victim = os.path.join(tree, "etc", "os-release")
    os.chmod(victim, 0o666)
    before = open(victim, "rb").read()
    native = subprocess.run(["sh", "-c", f"echo changed > {victim}.copy && cat {victim}.copy"], capture_output=True)
    assert native.stdout == b"changed\n"  # the same write, natively, changes a file of the tree
    os.unlink(victim + ".copy")
    r = subprocess.run(umview_for(user, "-r", tree, "--sandbox", "--report", "-", "--", "sh", "-c",
                                  "echo changed > /etc/os-release; cat /etc/os-release; rm /bin/script; "
                                  "ls /bin/script"), capture_output=True, timeout=120, cwd="/var/tmp")
    assert r.stdout.startswith(b"changed\n"), r.stderr
    assert b"No such file" in r.stderr  # gone in the view
    assert open(victim, "rb").read() == before and os.path.exists(os.path.join(tree, "bin", "script"))
    assert f'"path": "{victim}"'.encode() in r.stdout  # the report names the tree's file


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_names_below_a_cwd_or_directory_fd_in_a_sandboxed_tree_change_in_the_layer(tree, user):
    """mkdir -p works from the cwd (it enters each directory it makes), rm
    -r from directory fds (unlinkat): in -r TREE --sandbox those names are
    the sandbox's cow view's, as the tree's absolute paths are, and the tree
    stays as it is (the kernel would have written the tree: Landlock
    refused it, EACCES)."""
    need_user(user)
    for d, _, _ in os.walk(tree):
        os.chmod(d, 0o777)  # natively the user may change the tree: only the sandbox keeps it
    native = subprocess.run(as_user(user, ["sh", "-c", f"mkdir -p {tree}/x/y && rmdir {tree}/x/y {tree}/x"]),
                            capture_output=True)
    assert native.returncode == 0, native.stderr
    listing = sorted(os.listdir(os.path.join(tree, "etc")))
    # (no host path in /etc: a cwd there is then the tree's directory itself)
    r = subprocess.run(umview_for(user, "-r", tree, "--host-paths", "/proc:/dev:/tmp", "--sandbox", "--", "sh", "-c",
                                  "mkdir -p /etc/new/deep && ls -d /etc/new/deep && cd /etc && mkdir more && "
                                  "cd / && rm -r /etc && ls /etc"), capture_output=True, timeout=120, cwd="/var/tmp")
    assert r.stdout == b"/etc/new/deep\n", r.stderr
    assert b"ls: cannot access '/etc': No such file or directory" in r.stderr
    assert sorted(os.listdir(os.path.join(tree, "etc"))) == listing != []


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_chroot_into_a_root_tree_runs_its_programs_for_any_user(tree, user):
    need_user(user)
    need("chroot")
    script = "cat /etc/os-release; cd ../..; pwd; ls; hello; script s; cd /bin && pwd"
    if user != "root":  # natively the kernel refuses a normal user's chroot
        native = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                 "chroot", tree, "/bin/sh", "-c", script], capture_output=True, timeout=60)
        assert native.returncode != 0 and b"Operation not permitted" in native.stderr
    # any path module gives the view what serves chroot
    r = subprocess.run(umview_for(user, "-p", "unreal", "--", "chroot", tree, "/bin/sh", "-c", script),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode().splitlines()
    assert out[:2] == ['PRETTY_NAME="umview test tree"', "/"]
    assert sorted(out[2:2 + len(os.listdir(tree))]) == sorted(os.listdir(tree))
    assert out[2 + len(os.listdir(tree)):] == ["argv0=hello exe=/bin/hello argc=1", "script /bin/script s", "/bin"]
