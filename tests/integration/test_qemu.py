"""qemu: programs of another machine (arm64) run in a view through
qemu-user, without root and without binfmt_misc: a static program, its
children's execs, a dynamically linked program in an arm64 root tree (-r),
as root and as nobody. The reference is the emulator run by hand (what
binfmt_misc would run) and PRoot's -q where it is installed; natively the
kernel refuses the program (ENOEXEC), which the tests show first.

The arm64 packages (busybox-static, libc6, coreutils) are Debian's, fetched
by .ci/run with apt-get download into ARM64_DEBS; without them the tests
skip and say so.
"""
import glob
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import need, need_user, run, umview_for

ARM64_DEBS = os.environ.get("UMVIEW_ARM64_DEBS", "/var/cache/umview-tests/arm64")
EMULATOR = "qemu-aarch64-static"


def _deb(name):
    found = sorted(glob.glob(os.path.join(ARM64_DEBS, f"{name}_*_arm64.deb")))
    if not found:
        pytest.skip(f"no {name}:arm64 package in {ARM64_DEBS} (.ci/run fetches it with apt-get download)")
    return found[-1]


@pytest.fixture(scope="module")
def arm64():
    """(a static arm64 busybox, an arm64 root tree with libc6 and coreutils),
    both readable by every user."""
    need(EMULATOR, "dpkg-deb")
    base = tempfile.mkdtemp(prefix="umview-qemu-", dir="/var/tmp")
    os.chmod(base, 0o755)
    try:
        bb = os.path.join(base, "bb")
        subprocess.run(["dpkg-deb", "-x", _deb("busybox-static"), bb], check=True)
        tree = os.path.join(base, "tree")
        for name in ("libc6", "coreutils"):
            subprocess.run(["dpkg-deb", "-x", _deb(name), tree], check=True)
        with open(os.path.join(tree, "etc", "hostname"), "w") as f:
            f.write("armtree\n")
        shutil.copy(os.path.join(bb, "bin", "busybox"), os.path.join(tree, "bin", "busybox"))  # its shell
        for dirpath, dirs, _ in os.walk(base):
            os.chmod(dirpath, 0o755)
        yield os.path.join(bb, "bin", "busybox"), tree
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_natively_the_kernel_refuses_the_program(arm64):
    busybox, _ = arm64
    if os.path.exists("/proc/sys/fs/binfmt_misc/qemu-aarch64"):
        pytest.skip("binfmt_misc runs arm64 programs on this machine: nothing to show")
    with pytest.raises(OSError) as exc:
        subprocess.run([busybox, "true"])
    assert exc.value.errno == 8  # ENOEXEC


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_static_arm64_program_and_its_childrens_execs_run_as_under_binfmt(arm64, user):
    need_user(user)
    busybox, _ = arm64
    script = f'echo "$0"; uname -m; {busybox} readlink /proc/self/exe; exec {busybox} echo child exec'
    r = run(umview_for(user, "--qemu", "--", busybox, "sh", "-c", script), timeout=120)
    assert (r.returncode, r.stdout) == (0, f"sh\naarch64\n{busybox}\nchild exec\n".encode()), r.stderr
    # what the emulator run by hand says of the same (binfmt_misc's way), where it needs no exec
    alone = run([shutil.which(EMULATOR), "-0", busybox, busybox, "uname", "-m"], timeout=60)
    assert alone.stdout == b"aarch64\n"
    if shutil.which("proot"):
        p = run(["proot", "-q", EMULATOR, busybox, "sh", "-c", script], timeout=120)
        if p.returncode == 0:
            assert p.stdout == r.stdout


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_an_arm64_root_tree_runs_its_dynamically_linked_programs(arm64, user):
    """-r TREE: the guest's loader and libc are the tree's, opened by qemu
    through the view."""
    need_user(user)
    _, tree = arm64
    script = "/bin/uname -m && /bin/cat /etc/hostname && /bin/readlink /proc/self/exe && /bin/busybox ls /usr/share"
    r = run(umview_for(user, "--qemu", "-r", tree, "--", "/bin/busybox", "sh", "-c", script), timeout=120)
    native_ls = sorted(os.listdir(os.path.join(tree, "usr", "share")))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split("\n") == ["aarch64", "armtree", "/bin/readlink", *native_ls, ""], r.stderr


def test_a_host_program_is_left_to_the_kernel_and_a_missing_emulator_is_named(arm64, tmp_path):
    busybox, _ = arm64
    r = run(umview_for("root", "--qemu", "--", "readlink", "/proc/self/exe"), timeout=60)
    native = run(["readlink", "/proc/self/exe"], timeout=60)
    assert (r.returncode, r.stdout) == (0, native.stdout)
    empty = tmp_path / "no-emulators"
    empty.mkdir()
    r = run(umview_for("root", f"--qemu={empty}", "--", busybox, "true"), timeout=60)
    assert r.returncode != 0
    assert (f"qemu: {busybox} is a program for aarch64, and neither qemu-aarch64-static nor qemu-aarch64 is in "
            f"{empty}: it cannot run (apt-get install qemu-user-static)").encode() in r.stderr, r.stderr
