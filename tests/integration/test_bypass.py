"""Calls that would reach files around the view's paths are refused in a
view with path mounts (umview/bypass.py): io_uring_setup (ENOSYS) and
open_by_handle_at (EPERM). Each is first shown to work natively."""
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import as_user, need_user, umview_for

URING = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
params = ctypes.create_string_buffer(120)  # struct io_uring_params
fd = libc.syscall(425, 8, params)
print(fd >= 0 or os.strerror(ctypes.get_errno()))
"""

# write a file through a handle: name_to_handle_at, then open_by_handle_at
BY_HANDLE = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
handle = ctypes.create_string_buffer(8 + 128)
ctypes.c_uint.from_buffer(handle).value = 128
mount_id = ctypes.c_int()
if libc.name_to_handle_at(-100, sys.argv[1].encode(), handle, ctypes.byref(mount_id), 0):
    print("name_to_handle_at", os.strerror(ctypes.get_errno())); sys.exit(1)
mount_fd = os.open(os.path.dirname(sys.argv[1]), os.O_RDONLY)
fd = libc.open_by_handle_at(mount_fd, handle, os.O_WRONLY | os.O_TRUNC)
if fd < 0:
    print(os.strerror(ctypes.get_errno())); sys.exit(0)
os.write(fd, b"through a handle\n")
print("written")
"""


@pytest.fixture
def victim():
    d = tempfile.mkdtemp(prefix="umview-bypass-", dir="/var/tmp")
    os.chmod(d, 0o755)
    path = os.path.join(d, "victim")
    with open(path, "w") as f:
        f.write("orig\n")
    yield path
    shutil.rmtree(d)


def cow_view(user, layer, *argv):
    return subprocess.run(umview_for(user, "-p", f"viewfs,mount={layer}:/:cow", "--", *argv),
                          capture_output=True, timeout=60)


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_io_uring_setup_is_refused_with_enosys_in_a_view_with_path_mounts(tmp_path, user):
    need_user(user)
    native = subprocess.run([sys.executable, "-c", URING], capture_output=True)
    if native.stdout != b"True\n":
        pytest.skip(f"no io_uring here natively: {native.stdout!r}")
    layer = tempfile.mkdtemp(prefix="umview-bypass-layer-", dir="/var/tmp")
    os.chmod(layer, 0o777)
    try:
        r = cow_view(user, layer + "/upper", "python3", "-c", URING)
        assert r.stdout == b"Function not implemented\n", r.stderr
        # a view without path modules has no reason to refuse it
        r = subprocess.run(umview_for(user, "--", "python3", "-c", URING), capture_output=True, timeout=60)
        assert r.stdout == b"True\n", r.stderr
    finally:
        shutil.rmtree(layer)


def test_open_by_handle_at_cannot_write_a_real_file_from_a_cow_view(victim):
    need_user("root")
    copy = victim + ".native"
    shutil.copy(victim, copy)
    native = subprocess.run([sys.executable, "-c", BY_HANDLE, copy], capture_output=True)
    assert native.stdout == b"written\n", native
    assert open(copy).read() == "through a handle\n"
    layer = tempfile.mkdtemp(prefix="umview-bypass-layer-", dir="/var/tmp")
    try:
        r = cow_view("root", layer + "/upper", sys.executable, "-c", BY_HANDLE, victim)
        assert r.stdout == b"Operation not permitted\n", r.stderr
        assert open(victim).read() == "orig\n"
    finally:
        shutil.rmtree(layer)


MEM = r"""
import os, sys
try:
    open(f"/proc/{sys.argv[1]}/mem", "r+b").close()
    print("opened")
except OSError as exc:
    print(exc.strerror)
"""


def test_a_process_of_the_view_cannot_open_the_monitors_memory():
    # natively a process may open the memory of another of its user's
    # (its parent, here); in a view, the monitor's is closed to it
    need_user("nobody")
    script = f'exec python3 -c {shlex.quote(MEM)} "$PPID"'
    native = subprocess.run(as_user("nobody", ["sh", "-c", f"sh -c {shlex.quote(script)}; true"]),
                            capture_output=True, timeout=60)
    if native.stdout != b"opened\n":
        pytest.skip(f"the kernel refuses it natively here (Yama?): {native.stdout!r}")
    r = subprocess.run(umview_for("nobody", "--", "sh", "-c", script), capture_output=True, timeout=60)
    assert r.stdout == b"Permission denied\n", r.stderr
