"""Landlock (landlock(7)): the kernel's own bound on where a sandbox writes.

The view decides where each call of a sandbox lands (the layer, the private
/tmp); Landlock makes the kernel refuse, with EACCES, a write that lands
anywhere else whatever the view decided: a directory swapped for a symlink
between the view's resolution of a path and the kernel's walk of it (a race
on a path component), or any interface the view does not know of. Rights
enforced (the "write" rights of the ABI the kernel has): writing a file,
truncating it (ABI 3), making and removing names, moving them between
directories (REFER, ABI 2). Reading, listing and executing are not
restricted, nor are changes of metadata (chmod, chown, utimes, xattrs: not in
Landlock's rights), opens of files that were open before, or anything outside
file paths. Where the kernel has them (ABI 6, Linux 6.12), its scopes keep
signals and connections to abstract AF_UNIX names inside the domain: a
process of the sandbox can signal no process outside it (the monitor, its
janitor and helpers included), nor reach a daemon listening on an abstract
name (a session bus, an X server).

The first process enforces the ruleset before its exec (um_set_landlock; a
sandbox nested in a view: the process that asked for it, Ruleset.enforce);
every process of the view inherits it and cannot lift it.
"""
import ctypes
import errno
import os
import stat
import struct

SYS_create_ruleset, SYS_add_rule, SYS_restrict_self = 444, 445, 446
PR_SET_NO_NEW_PRIVS = 38
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

# access rights (linux/landlock.h)
WRITE_FILE = 1 << 1
REMOVE_DIR, REMOVE_FILE = 1 << 4, 1 << 5
MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = (1 << b for b in range(6, 13))
REFER = 1 << 13     # ABI 2
TRUNCATE = 1 << 14  # ABI 3

# scopes (ABI 6, Linux 6.12): what a process of the domain may not reach
# outside it
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # connect/sendto to an abstract name bound outside
SCOPE_SIGNAL = 1 << 1                # a signal to a process outside
SCOPES = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL

#: writing to files that exist (devices, procfs files)
FILE_WRITES = WRITE_FILE | TRUNCATE
#: everything that changes a tree's names or contents
TREE_WRITES = FILE_WRITES | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK \
    | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM | REFER

_libc = None


def _syscall(*args):
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    r = _libc.syscall(*args)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def abi():
    """The Landlock ABI version of the running kernel, 0 if it has none (not
    built, not enabled at boot, or refused by a seccomp policy)."""
    try:
        return _syscall(SYS_create_ruleset, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
    except OSError:
        return 0


def describe(version, scoped):
    """What a sandbox's ruleset bounds, in words (--report)."""
    what = ["writes outside its directories"]
    if scoped & SCOPE_SIGNAL:
        what.append("signals to processes outside")
    if scoped & SCOPE_ABSTRACT_UNIX_SOCKET:
        what.append("abstract AF_UNIX names bound outside")
    return f"Landlock ABI {version} refuses " + ", ".join(what)


class Ruleset:
    """A ruleset handling the write rights of the kernel's ABI: what no rule
    allows is refused. fd is its file descriptor (close() it)."""

    def __init__(self, version, scoped=0):
        """scoped: SCOPE_* bits, kept where the kernel has them (ABI 6);
        self.scoped says which it took."""
        if version < 2:
            # ABI 1 refuses every rename or link across directories
            raise OSError(f"Landlock ABI {version}: renames across directories would fail; "
                          "the sandbox wants ABI 2 (Linux 5.19)")
        self.handled = TREE_WRITES if version >= 3 else TREE_WRITES & ~TRUNCATE
        self.scoped = scoped & SCOPES if version >= 6 else 0
        attr = struct.pack("=QQQ", self.handled, 0, self.scoped)
        self.fd = _syscall(SYS_create_ruleset, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), 0)

    def allow(self, path, rights):
        """Allow rights (masked to the handled ones) beneath the directory
        path, or on the file path (file rights alone); a file opened with
        O_PATH, so a device or FIFO is not opened."""
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                rights &= FILE_WRITES
            self.allow_fd(fd, rights)
        finally:
            os.close(fd)

    def allow_fd(self, fd, rights):
        rights &= self.handled
        if rights:
            # struct landlock_path_beneath_attr is packed: u64 then s32
            attr = struct.pack("=Qi", rights, fd)
            _syscall(SYS_add_rule, self.fd, RULE_PATH_BENEATH, ctypes.c_char_p(attr), 0)

    def enforce(self):
        """Restrict this thread (and what it forks and execs) to the ruleset,
        as the C core does in a view's first process (um_set_landlock):
        without CAP_SYS_ADMIN the kernel wants no_new_privs first; with it,
        setuid programs keep working. A nested sandbox's process, before its
        exec."""
        try:
            _syscall(SYS_restrict_self, self.fd, 0)
        except OSError as exc:
            if exc.errno != errno.EPERM:
                raise
            if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
                e = ctypes.get_errno()
                raise OSError(e, os.strerror(e)) from None
            _syscall(SYS_restrict_self, self.fd, 0)

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def inherited_writable_files():
    """The files behind this process's fds that a child inherits (no
    FD_CLOEXEC) open for writing, by /proc/self/fd path: a sandboxed
    process may reopen them through /proc/self/fd/N as the fd allows (a log
    given as stdout). Regular files only: Landlock does not check pipes,
    sockets and other pseudo files, and /dev has a rule of its own."""
    import fcntl

    out = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if os.get_inheritable(fd) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY \
                    and stat.S_ISREG(os.fstat(fd).st_mode):
                out.append(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own fd, gone
            continue
    return out
