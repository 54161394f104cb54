"""Thin Python layer over the C core (umview/csrc/*.c, built as umview._umcore).

It loads the compiled core, checks that it is the build this source expects,
and turns C error codes (negative errno) into OSError. Nothing here knows
about engines or modules.
"""
import contextlib
import errno
import functools
import os

_EXPECTED_VERSION = 31

try:
    from umview._umcore import ffi, lib
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError(
        "umview's C core (umview._umcore) is not built: reinstall with "
        "`pip install .` (or `pip install -e .`) on a machine with gcc and the "
        f"Python headers ({exc})"
    ) from exc

if lib.um_core_version() != _EXPECTED_VERSION or lib.UM_CORE_VERSION != _EXPECTED_VERSION:
    raise ImportError(
        f"umview's C core is a stale build (version {lib.um_core_version()}, this source "
        f"wants {_EXPECTED_VERSION}): rebuild it with `pip install .` (or `pip install -e .`)"
    )


def check(ret):
    """Return ret, or raise OSError when the C core returned -errno."""
    if ret < 0:
        raise OSError(-ret, os.strerror(-ret))
    return ret


def read_mem(tid, addr, size):
    """Read size bytes of tracee memory; OSError(EFAULT) if not all readable."""
    buf = ffi.new("char[]", size or 1)
    n = check(lib.um_read_mem(tid, addr, buf, size))
    if n != size:
        raise OSError(errno.EFAULT, os.strerror(errno.EFAULT))
    return ffi.buffer(buf, size)[:]


def write_mem(tid, addr, data):
    """Write bytes into tracee memory; OSError(EFAULT) if it cannot."""
    n = check(lib.um_write_mem(tid, addr, data, len(data)))
    if n != len(data):
        raise OSError(errno.EFAULT, os.strerror(errno.EFAULT))


def pin_string(tid, abi_id, page, data, at=0):
    """Copy data (a path, without its NUL) into page ``page`` of the thread's
    slot of the read-only region for pinned paths (um_pin_string): its
    address, or 0 if its memory has no other user and ``at`` (where the
    string lies, or where the stack would take it) is memory no other
    process can change (then it will do). The thread must be at the stop
    Python holds."""
    return check(lib.um_pin_string(tid, abi_id, page, data, len(data), at))


def changeable(tid, addr, data):
    """Could another process change the string data (a path, without its
    NUL) at addr in tid's memory before the kernel reads it (um_changeable)?"""
    return bool(lib.um_changeable(tid, addr, data, len(data)))


_PATH_MAX = 4096


def read_string(tid, addr, limit=_PATH_MAX):
    """Read a NUL-terminated string (without the NUL), at most limit-1 bytes.

    Never reads past the page holding the NUL. OSError(EFAULT) for a bad
    pointer, OSError(ENAMETOOLONG) if there is no NUL within limit-1 bytes.
    """
    # um_read_string reads at most size-1 bytes looking for the NUL: one more
    # than limit-1, or a string of limit-1 bytes (a path of 4095) is too long
    buf = ffi.new("char[]", limit + 1)
    n = check(lib.um_read_string(tid, addr, buf, limit + 1))
    return ffi.buffer(buf, n)[:]


def inject(tid, abi_id, nr, args):
    """Run system call ``nr`` with ``args`` (up to six integers) in thread
    ``tid``, stopped at the entry of the call Python is handling, and return
    its raw result (>= 0, or -errno). The thread then waits at the entry of
    its own call again. OSError if the call could not be run (ESRCH: the
    thread died; EINVAL: tid is not the thread of the pending call)."""
    result = ffi.new("int64_t *")
    full = [a & 0xFFFFFFFFFFFFFFFF for a in args] + [0] * (6 - len(args))
    check(lib.um_inject(tid, abi_id, nr, ffi.new("uint64_t[6]", full), result))
    return result[0]


AT_FDCWD = -100

_PTRACE_GETREGS = 12
_USER_REGS_WORDS = 27
#: indices of struct user_regs_struct (x86_64's: a 32-bit process's registers
#: are shown to the monitor in it too)
REG_RBX, REG_RDI, REG_ORIG_RAX, REG_CS, REG_SP = 5, 14, 15, 17, 19
#: the code segment of a process running i386 code (REG_CS)
I386_CS = 0x23


def user_regs(tid):
    """The registers of a thread stopped where Python holds it (an exec
    event, a call's entry), as the 27 words of struct user_regs_struct
    (REG_SP, REG_CS, ...). OSError(ESRCH) if it is not stopped."""
    buf = ffi.new("uint64_t[]", _USER_REGS_WORDS)
    check(lib.um_ptrace(_PTRACE_GETREGS, tid, 0, int(ffi.cast("uintptr_t", buf))))
    return tuple(buf)


def kernel_abis():
    """The ABIs this kernel runs: x86_64 and i386 always (a 32-bit program
    could not have started otherwise), x32 only where it was built with
    CONFIG_X86_X32_ABI, which most distributions leave out (its calls then
    fail with ENOSYS). Asked once, with an x32 getpid."""
    global _KERNEL_ABIS
    if _KERNEL_ABIS is None:
        _KERNEL_ABIS = frozenset(name for name, abi in (("x86_64", lib.UM_ABI_X86_64), ("i386", lib.UM_ABI_I386),
                                                        ("x32", lib.UM_ABI_X32)) if lib.um_abi_supported(abi))
    return _KERNEL_ABIS


_KERNEL_ABIS = None


def signed32(value):
    """A 32-bit argument (an fd, a dirfd) as the signed int the kernel reads."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def tracees(exclude=None):
    """The pids of the live processes (thread group leaders) this monitor
    traces, but exclude: one pass over /proc."""
    me = b"%d" % os.getpid()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == exclude:
            continue
        try:
            st = proc_status(int(name), "State", "TracerPid")
        except OSError:
            continue  # gone meanwhile
        if st.get("TracerPid") == [me] and st.get("State", [b"Z"])[0] not in (b"Z", b"X"):
            pids.append(int(name))
    return pids


def proc_status(tid, *keys):
    """Fields of /proc/TID/status: {key: its words} for each key asked
    ("Uid", "State", ...), read up to the last of them; a key the file lacks
    is missing from the answer. OSError if the thread is gone."""
    want, out = set(keys), {}
    with open(f"/proc/{tid}/status", "rb") as f:
        for line in f:
            key, _, value = line.partition(b":")
            key = key.decode()
            if key in want:
                out[key] = value.split()
                if len(out) == len(want):
                    break
    return out


def proc_link(tid, fd=AT_FDCWD):
    """What a thread's fd (or, for AT_FDCWD, its cwd) names, from
    /proc/TID/fd/N or /proc/TID/cwd: bytes (not a path for a pipe or a
    socket), or None if it cannot be read (a bad fd, a gone thread)."""
    where = "cwd" if fd == AT_FDCWD else f"fd/{fd}"
    try:
        return os.fsencode(os.readlink(f"/proc/{tid}/{where}"))
    except OSError:
        return None


def fd_flags(tid, fd):
    """The open flags of a thread's fd (/proc/TID/fdinfo/N), or None if they
    cannot be read (a bad fd, a gone thread)."""
    try:
        with open(f"/proc/{tid}/fdinfo/{fd}", "rb") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith(b"flags:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def may_not_read(tid):
    """Does the kernel refuse the monitor a look at thread tid (its memory,
    its /proc/TID/cwd and fd/N)? It does when the process is not dumpable
    and the monitor lacks CAP_SYS_PTRACE; a monitor that has it never asks."""
    if _can_ptrace_any():
        return False
    try:
        os.readlink(f"/proc/{tid}/cwd")
    except OSError as exc:
        return exc.errno in (errno.EACCES, errno.EPERM)
    return False


@functools.lru_cache(None)
def _can_ptrace_any():
    try:
        with open("/proc/self/status") as f:
            caps = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError):
        return False
    return bool(caps & (1 << 19))  # CAP_SYS_PTRACE


def resolve_path(tid, abi, sc, slot, args):
    """Path argument ``slot`` of neutral call ``sc`` made absolute against the
    thread's cwd or dirfd and normalized lexically; None if it cannot be."""
    buf = ffi.new("char[]", _PATH_MAX + 1)
    n = lib.um_resolve_path(tid, abi, sc, slot, ffi.new("uint64_t[6]", args), buf, _PATH_MAX + 1)
    return None if n < 0 else ffi.buffer(buf, n)[:]


# --- the layer set of layered prefixes (see docs/internals.md) ---
LAYER_DIR = lib.UM_LAYER_DIR
LAYER_HIDE = lib.UM_LAYER_HIDE
LAYER_FILE = lib.UM_LAYER_FILE


@contextlib.contextmanager
def tables_changing():
    """Around a rebuild of the C tables while the view runs: the serving
    threads decide no call until it is over, so none is decided on a table
    half cleared (a prefix missing, a claim zeroed)."""
    lib.um_tables_begin()
    try:
        yield
    finally:
        lib.um_tables_end()


def layer_add(path, kind):
    """Name an absolute virtual path (bytes) the upper layer changes: kind
    LAYER_DIR (an upper directory the lower tree shows through), LAYER_HIDE
    (this path and everything below it are the module's) or LAYER_FILE (as
    LAYER_HIDE, but a regular file of the upper layer the view shows as it
    is: see Engine.layer_uppers). Replaces the kind of a path already named."""
    check(lib.um_layer_add(path, kind))


def layer_del(path):
    """Forget a path of the layer set; OSError(ENOENT) if it is not there."""
    check(lib.um_layer_del(path))


def layer_clear():
    lib.um_layer_clear()
