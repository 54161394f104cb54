"""Every ABI is served like x86_64 under every module: a real i386 process
(int $0x80) and x32 calls (a 64-bit process, __X32_SYSCALL_BIT) in a cow view
of / change the layer, never the real files; where the kernel lacks an ABI
(most kernels build no x32) its calls fail with ENOSYS in the view as
natively. Each program first runs natively on a copy of the same files, to
show it does change them there (so the test cannot pass vacuously)."""
import json
import os
import shutil
import tempfile

import pytest

from conftest import NOBODY, as_user, need_user, run, umview_for

PROGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs")
FLAGS = ["-nostdlib", "-static", "-fno-pie", "-no-pie", "-O1", "-fno-stack-protector", "-fno-builtin"]
USERS = ["root", "nobody"]
NOTIF = ["1", "0"]

SNAPSHOT = r"""
import json, os, sys
d = sys.argv[1]
out = {}
for n in sorted(os.listdir(d)):
    st = os.lstat(os.path.join(d, n))
    data = open(os.path.join(d, n), "rb").read() if os.path.isfile(os.path.join(d, n)) else b""
    out[n] = [st.st_mode, st.st_uid, st.st_gid, data.hex(), st.st_mtime_ns == 0]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def progs():
    """abicalls built as a real i386 program and as an x86_64 one making x32
    calls, where an unprivileged user may run them."""
    out = tempfile.mkdtemp(prefix="umview-abicalls-")
    os.chmod(out, 0o755)
    try:
        built = {}
        for abi, extra in (("i386", ["-m32"]), ("x32", ["-DX32"])):
            exe = os.path.join(out, f"abicalls-{abi}")
            r = run(["gcc", *extra, *FLAGS, "-o", exe, os.path.join(PROGS, "abicalls.c")])
            if r.returncode:
                pytest.skip(f"cannot build the {abi} test program: {r.stderr.decode()[-300:]}")
            built[abi] = exe
        probe = run([built["i386"], "mkdir:/proc/no"])
        if b" = " not in probe.stdout:
            pytest.skip("this kernel runs no i386 programs")
        yield built
    finally:
        shutil.rmtree(out, ignore_errors=True)


def victims(user):
    """A directory of files the user owns (natively, the program changes them)."""
    d = tempfile.mkdtemp(prefix="umview-abi-")
    for name in ("trunc", "mode", "owner", "short", "times", "moved", "gone", "chmod"):
        with open(os.path.join(d, name), "w") as f:
            f.write(f"{name} data\n")
    if user != "root":
        for name in os.listdir(d) + [""]:
            os.chown(os.path.join(d, name), NOBODY, NOBODY)
    os.chmod(d, 0o755)
    return d


def calls(d, user):
    owner = "1:1" if user == "root" else f"{NOBODY}:{NOBODY}"
    return [f"open:{d}/trunc:1001", f"fchmod:{d}/mode:600", f"fchown:{d}/owner:{owner}",
            f"truncate:{d}/short:2", f"utimensat:{d}/times", f"rename:{d}/moved:{d}/moved2",
            f"unlink:{d}/gone", f"creat:{d}/made", f"mkdir:{d}/dir", f"chmod:{d}/chmod:600"]


def snapshot(d, user="root", prefix=()):
    r = run([*prefix, *as_user(user, ["/usr/bin/python3", "-c", SNAPSHOT, d])] if not prefix
            else [*prefix, "/usr/bin/python3", "-c", SNAPSHOT, d])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def scratch():
    made = []
    yield made
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("abi", ["i386", "x32"])
def test_calls_of_another_abi_in_a_cow_view_leave_the_real_files_untouched(progs, abi, user, notif, scratch):
    need_user(user)
    native_dir, view_dir = victims(user), victims(user)
    layer = tempfile.mkdtemp(prefix="umview-abi-layer-")
    scratch += [native_dir, view_dir, layer]
    if user != "root":
        os.chown(layer, NOBODY, NOBODY)

    before = snapshot(native_dir)
    native = run(as_user(user, [progs[abi], *calls(native_dir, user)]))
    native_after = snapshot(native_dir)
    results = native.stdout.decode().replace(native_dir, "D")
    if abi == "i386":
        assert native_after != before, "natively the program changes the files"
        assert " = -" not in results, results

    real_before = snapshot(view_dir)
    env = dict(os.environ, UMVIEW_NOTIF=notif)
    script = f'"$0" "$@" && /usr/bin/python3 -c \'{SNAPSHOT}\' {view_dir}'
    viewed = run(umview_for(user, "-p", f"viewfs,mount={layer}:/:cow", "--", "sh", "-c", script,
                            progs[abi], *calls(view_dir, user)), env=env)
    lines = viewed.stdout.decode().replace(view_dir, "D").splitlines()
    assert viewed.returncode == native.returncode, viewed.stderr
    assert "\n".join(lines[:-1]) + "\n" == results  # the same results as natively
    assert snapshot(view_dir) == real_before, "a real file changed under the view"
    seen = json.loads(lines[-1])
    # what the view shows is what the program did natively (new files' times aside)
    assert seen == native_after
    assert os.listdir(layer) if native_after != before else True


@pytest.mark.parametrize("abi", ["i386", "x32"])
def test_sockets_of_another_abi_in_a_view_without_network_fail_as_on_x86_64(progs, abi):
    native = run([progs[abi], "socket:2", "socket:1"])
    viewed = run(umview_for("root", "-p", "vnet,null", "--", progs[abi], "socket:2", "socket:1"))
    inet, unix = viewed.stdout.decode().splitlines()
    native_inet, native_unix = native.stdout.decode().splitlines()
    assert unix == native_unix  # AF_UNIX as natively
    if native_inet == "socket:2 = 0":
        assert inet == "socket:2 = -97"  # EAFNOSUPPORT, as an x86_64 socket() gets
    else:
        assert inet == native_inet  # the kernel lacks the ABI: ENOSYS as natively


@pytest.mark.parametrize("module", ["unreal", "move", "merge"])
@pytest.mark.parametrize("abi", ["i386", "x32"])
def test_calls_of_another_abi_through_a_redirecting_mount_act_on_the_real_files_as_natively(
        progs, abi, module, scratch):
    """unreal and viewfs move/merge redirect the paths: the program's calls,
    made on the mount's paths, change the real files exactly as the same calls
    made natively on the real paths do."""
    native_dir, view_dir = victims("root"), victims("root")
    mnt = tempfile.mkdtemp(prefix="umview-abi-mnt-")
    scratch += [native_dir, view_dir, mnt]
    native = run([progs[abi], *calls(native_dir, "root")])
    if module == "unreal":
        opts, seen = ["-p", "unreal"], "/unreal" + view_dir
    else:
        upper = tempfile.mkdtemp(prefix="umview-abi-upper-")
        scratch.append(upper)
        # merge: the real directory is the lower layer under an empty upper one
        source = view_dir if module == "move" else upper
        target = mnt if module == "move" else view_dir
        opts, seen = ["-p", f"viewfs,mount={source}:{target}" + ("" if module == "move" else ":merge")], target
    viewed = run(umview_for("root", *opts, "--", progs[abi], *calls(seen, "root")))
    assert viewed.returncode == native.returncode, viewed.stderr
    assert viewed.stdout.decode().replace(seen, "D") == native.stdout.decode().replace(native_dir, "D")
    if module != "merge":
        assert snapshot(view_dir) == snapshot(native_dir)
