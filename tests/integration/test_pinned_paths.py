"""Pinned paths (umview/csrc/pin.c, docs/internals.md "Pinned paths"): while
another thread of execution shares a process's memory, the path strings the
view decided on are what the kernel reads, from a read-only region of the
process that the process cannot change.

- the region cannot be changed from inside: mprotect, munmap, mremap (from
  and onto it), mmap(MAP_FIXED), madvise, shmat(SHM_REMAP) over it fail with
  EPERM in every view, and /proc/self/mem opened for writing fails with
  EACCES in a sandbox (the guard module); the same program natively does
  each of them on a look-alike mapping of its own (progs/pin/region.c);
- pinning changes nothing a program sees: threads working with relative
  paths below a cwd, with dirfds and with absolute paths give the same files
  and output natively and in a copy-on-write view, and calls of a
  single-threaded program are never pinned (it pays nothing).

The races pinning closes are in test_escapes.py (path_race, below_sp).
"""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import NOBODY, built_programs, need, need_user, run, umview_argv, umview_for

PROG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs", "pin", "region.c")
OPS = ("mprotect", "munmap", "mremap-from", "mremap-onto", "mmap-fixed", "madvise", "shmat")
NOTIF = {"notif-on": None, "notif-off": "0"}


@pytest.fixture(scope="module")
def region_prog():
    with built_programs("umview-pin-prog-", [PROG]) as exes:
        yield exes["region"]


@pytest.fixture
def layer():
    d = tempfile.mkdtemp(prefix="umview-pin-layer-", dir="/var/tmp")
    os.chmod(d, 0o777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _env(notif):
    env = dict(os.environ)
    env.pop("UMVIEW_NOTIF", None)
    if notif is not None:
        env["UMVIEW_NOTIF"] = notif
    return env


@pytest.mark.parametrize("notif", NOTIF.values(), ids=NOTIF.keys())
@pytest.mark.parametrize("user", ["root", "nobody"])
@pytest.mark.parametrize("op", OPS)
def test_the_pinned_path_region_cannot_be_changed_from_inside(region_prog, layer, op, user, notif):
    need_user(user)
    native = run([region_prog, op])
    assert native.stdout.decode().splitlines() == ["own", f"{op}: ok"], native  # natively it can be done
    viewed = run(umview_for(user, "-p", f"viewfs,mount={layer}:/var/tmp:cow", "--", region_prog, op),
                 env=_env(notif))
    assert viewed.returncode == 0, viewed.stderr.decode()
    assert viewed.stdout.decode().splitlines() == ["monitor's", f"{op}: Operation not permitted"], viewed


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_sandbox_refuses_writing_memory_through_proc_pid_mem(region_prog, user):
    need_user(user)
    native = run([region_prog, "proc-mem"])
    assert native.stdout.decode().splitlines() == ["own", "proc-mem: ok"], native
    viewed = run(umview_for(user, "--sandbox", "--", region_prog, "proc-mem"))
    assert viewed.returncode == 0, viewed.stderr.decode()
    assert viewed.stdout.decode().splitlines() == ["monitor's", "proc-mem: Permission denied"], viewed
    assert b"/proc/PID/mem for writing refused" in viewed.stderr


THREADS = r"""
import os, sys, threading
os.chdir(sys.argv[1])
def work(n):
    d = f"t{n}"
    os.mkdir(d)
    with open(f"{d}/a", "w") as f:          # relative to the cwd
        f.write(f"thread {n}\n")
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    with open(os.open("b", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:  # relative to a dirfd
        f.write("b\n")
    os.rename("b", "c", src_dir_fd=fd, dst_dir_fd=fd)
    os.chmod(os.path.join(sys.argv[1], d, "a"), 0o600)   # absolute
    os.symlink("a", f"{d}/link")
    os.unlink(f"{d}/c")
    os.close(fd)
threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
for t in threads: t.start()
for t in threads: t.join()
for root, dirs, files in sorted(os.walk(".")):
    for name in sorted(files):
        p = os.path.join(root, name)
        st = os.lstat(p)
        print(p, oct(st.st_mode), open(p).read().strip() if not os.path.islink(p) else os.readlink(p))
"""


@pytest.mark.parametrize("notif", NOTIF.values(), ids=NOTIF.keys())
def test_threads_see_the_same_files_with_their_calls_pinned(layer, tmp_path, notif):
    native_dir = tmp_path / "native"
    native_dir.mkdir()
    native = run(["python3", "-c", THREADS, str(native_dir)])
    assert native.returncode == 0, native.stderr.decode()
    work = tempfile.mkdtemp(prefix="umview-pin-work-", dir="/var/tmp")
    try:
        stats = os.path.join(layer, "..", os.path.basename(layer) + ".stats")
        viewed = run(umview_argv("-p", f"viewfs,mount={layer}:{work}:cow", "--stats-file", stats, "--",
                                 "python3", "-c", THREADS, work), env=_env(notif))
        assert viewed.returncode == 0, viewed.stderr.decode()
        assert viewed.stdout == native.stdout
        assert os.listdir(work) == [], "the cow view wrote the real directory"
        with open(stats) as f:
            counts = json.loads(f.read().splitlines()[-1])
        os.unlink(stats)
        assert counts["pinned"] > 0 and counts["regions"] >= 1, counts
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_a_single_threaded_program_is_never_pinned(layer, tmp_path):
    stats = str(tmp_path / "stats")
    cmd = "for i in 1 2 3; do echo $i > /dev/null; mkdir -p d$i; echo x > d$i/f; done; ls -R"
    viewed = run(umview_argv("-p", f"viewfs,mount={layer}:{tmp_path}:cow", "--stats-file", stats, "--",
                             "bash", "-c", f"cd {tmp_path} && {cmd}"))
    assert viewed.returncode == 0, viewed.stderr.decode()
    with open(stats) as f:
        counts = json.loads(f.read().splitlines()[-1])
    assert counts["pinned"] == 0 and counts["regions"] == 0, counts


UNPINNABLE = r'''
import ctypes, errno, mmap, os, resource, sys
d = sys.argv[1]
buf = mmap.mmap(-1, 4096, flags=mmap.MAP_SHARED)  # memory a forked child could change
path = os.path.join(d, "fifo").encode() + b"\0"
buf[:len(path)] = path
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
with open("/proc/self/status") as f:
    vm = next(int(l.split()[1]) for l in f if l.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (4 << 20), resource.RLIM_INFINITY))
libc = ctypes.CDLL(None, use_errno=True)
r = libc.mkfifo(ctypes.c_void_p(addr), 0o600)
print("mkfifo", "ok" if r == 0 else errno.errorcode[ctypes.get_errno()])
resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
print("after", os.path.exists(d))
'''


@pytest.mark.parametrize("notif", NOTIF)
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_call_that_cannot_be_pinned_fails_and_the_view_goes_on(tmp_path, user, notif):
    """A path in shared memory that a call the view let through unchanged
    names is pinned; where the region cannot be mapped (an address-space
    limit leaves no room for it) the call fails with that errno instead of
    running unpinned, and the view goes on (it once ended with "cannot run
    sh" under trinity)."""
    need_user(user)
    d = tempfile.mkdtemp(prefix="umview-pin-", dir="/var/tmp")
    try:
        os.chmod(d, 0o777)
        argv = ["/usr/bin/python3", "-c", UNPINNABLE, d]
        env = dict(os.environ)
        env.pop("UMVIEW_NOTIF", None)
        if NOTIF[notif] is not None:
            env["UMVIEW_NOTIF"] = NOTIF[notif]
        # the guard alone: it sees mknod and lets a FIFO's through unchanged
        # (a module that rewrites the path writes its own copy instead)
        r = run(umview_for(user, "-p", "guard", "--", *argv), env=env, timeout=120)
        out = r.stdout.decode()
        assert r.returncode == 0 and "after True" in out, (out + r.stderr.decode())[-2000:]
        assert "mkfifo ENOMEM" in out, out
        assert not os.path.exists(os.path.join(d, "fifo"))
    finally:
        shutil.rmtree(d, ignore_errors=True)
