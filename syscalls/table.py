# SPDX-License-Identifier: GPL-2.0-or-later
"""The syscall table: one row per system call, by neutral name.

(Over 700 lines: data, one row per call.)

The one source of truth for what a call means to umview (data only; the
derived views are in ``syscalls/__init__.py``), in the spirit of strace's
``syscallent.h`` and VUOS's ``vu_syscalls.conf``. Each row of ``ROWS`` holds:

- the call's arguments, kind and name (``"dirfd path oflags int:mode"``);
- its classes: what it does, for the modules that ask (``calls("opens")``)
  instead of spelling out names, and strace's trace classes TP and TN (TF
  and TD follow from the kinds: a path, an fd);
- its nofollow rule per path, its write rule, the path slots that name an
  entry it makes, removes or renames, the flags argument that may carry
  AT_EMPTY_PATH;
- its i386 layout where it differs, the i386-only names that do its job, and
  whether only i386 has it;
- a support note where umview does something of its own with it.

Every set of call names in the project is derived from the rows: the C core's
tables, the engines' claim sets, docs/path-syscalls.md, the trace classes and
the modules' classes. Syscall numbers and register maps per ABI live in
``arch/``.

Hand-written data. A first draft came from python-ptrace's prototypes; every call that
carries a path or an fd was then checked against its man page and the kernel's
SYSCALL_DEFINE. Kinds:

    path    NUL-terminated pathname read from tracee memory (resolved by the kernel)
    dirfd   directory fd a 'path' is relative to (AT_FDCWD = -100); it is always the
            argument right before its path
    fd      file descriptor
    atflags AT_* flags (AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH, ...)
    oflags  O_* open flags
    str     other NUL-terminated string (xattr name, fstype, the target of a symlink)
    ptr     other pointer
    int     other integer

An argument is named after its kind (path, dirfd, fd, flags for oflags and atflags,
string for str, ptr, argN for a plain int; a kind seen twice gets a 2 on the second:
path, path2) unless the row names it (``int:mode``). Engines read arguments by name
(``call.mode``, ``call.flags``), whatever the ABI.

The argument order is x86_64's and x32's. On i386 a 64-bit argument takes two
registers (low word first: NAME_lo, NAME_hi, which ``call.NAME`` joins) and the old
'mmap' (old_mmap) and 'select' (old_select) take one pointer to a block holding the
real arguments: ``i386=`` gives those layouts.
Note AT_EMPTY_PATH with "" and a NULL path for utimensat/fanotify_mark/fsconfig: the
call then acts on the dirfd itself; the engine decides, not this table.
"""
from functools import lru_cache
from typing import NamedTuple

AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
AT_SYMLINK_FOLLOW = 0x400
AT_EMPTY_PATH = 0x1000
O_CREAT = 0o100
O_EXCL = 0o200
O_NOFOLLOW = 0o400000

# How a call decides not to follow a symlink in the last component of its path(s)
# (``nofollow=``). A call without one always follows. Rules:
#   ("always",)               never follows (acts on the link, or creates the name)
#   ("if_set", arg, mask)     does not follow when args[arg] & mask
#   ("unless_set", arg, mask) follows only when args[arg] & mask
#   ("oflags", arg)           O_NOFOLLOW in args[arg], or O_CREAT|O_EXCL both set
#   ("open_how", arg)         struct open_how at args[arg]: O_NOFOLLOW in .flags or
#                             RESOLVE_NO_SYMLINKS in .resolve (the caller reads it)
# A rule applies to every path argument of the call unless ``nofollow_arg=`` (path
# argument index -> rule) overrides it for one.
#
# Path calls that may modify the file system (``writes=``): under a layered mount
# (viewfs merge, cow, mincow) the C core hands these to Python, which copies up or
# records a whiteout; every other path call there runs on the real (lower) tree
# natively. Rules (UM_WRITE_* of umview/core.h):
#   ("always",)          the call writes whenever it succeeds
#   ("oflags", arg)      open flags in args[arg]: writes iff O_WRONLY, O_RDWR, O_CREAT or
#                        O_TRUNC is set (O_TMPFILE carries O_WRONLY or O_RDWR)
#   ("open_how", arg)    the same flags, in the struct open_how args[arg] points to
#   ("access", arg)      an access(2) mode in args[arg]: counts iff W_OK, whose answer
#                        is the copy's where a write would copy up
# Judgement calls: mount, umount, pivot_root, move_mount, mount_setattr and fspick change
# what the tree looks like; acct and swapon write into their file; swapoff and quotactl
# change the state of a file or device. Writes: they go to the module that decides.
# chroot, chdir, execve and uselib only read; so do inotify/fanotify marks, open_tree
# (a detached copy) and name_to_handle_at. Those are of class "reads": a path call must
# be of one side or the other (a unit test checks).
#
# ``names=``: the path slots (0: the call's first path argument, 1: its second) that
# name an entry the call makes, removes or renames. The kernel walks their parent and
# checks the last component itself (fs/namei.c, filename_parentat and
# filename_create): "." and ".." there fail (rmdir: EINVAL, ENOTEMPTY; unlink: EISDIR;
# rename: EBUSY; a call that makes the name: EEXIST), so does "/" (EBUSY), and a mount
# point is busy. A view must not turn "d/." into "d" for them.
#
# ``empty_path=``: the index of the flags argument that may carry AT_EMPTY_PATH: an
# empty path then means the dirfd itself.
#
# ``i386_variants=``: i386-only names doing the call's job with another layout or
# number, so that an engine claiming the x86_64 name also traps these on i386.
# Same-named calls with an old layout (i386 'mmap' = old_mmap, 'select' = old_select)
# have an ``i386=`` layout instead. socketcall and ipc multiplex a whole family each.
# ``only="i386"``: i386 names with no x86_64 counterpart (never implemented, or without
# an x86_64 equivalent). x32's names are a subset of x86_64's (its calls 512-547 have
# x86_64 names with x32 layouts and numbers): nothing to say for it today.
#
# Classes (``calls(CLASS)`` in syscalls/__init__.py):
#   opens, mkdirs, mknods, symlinks, links, unlinks, renames      make, remove, rename names
#   truncates, chmods, chowns, utimes, xattr-writes              change a file's data or metadata
#   metadata (chmods, chowns, utimes, xattr-writes, file_setattr)
#   null-is-fd (a NULL path names the dirfd's file; elsewhere it is EFAULT)
#   stats, accesses, readlinks                                    look at a name
#   stat64s (i386's calls that fill a struct stat64), oldstats (__old_kernel_stat)
#   execs, exits, waits                                           a process's life
#   set-ids (the set*id calls), creds (those and every call that changes what the
#   process may do: capset, unshare, setns, landlock_restrict_self), get-ids
#   classic-mounts (mount(2), umount2(2) and i386's umount: by type and target)
#   mounts, sockaddrs (bind and connect: an AF_UNIX path), clock-sets, clock-adjusts
#   time64 (takes 64-bit times on i386 too: its *64 and *_time64 calls, futex2's)
#   utimens (utimensat's timespecs: UTIME_NOW, UTIME_OMIT), chdirs (the cwd changes)
#   socknames (a socket address comes back), bypasses (reach files past their paths)
#   open-trees (open_tree and open_tree_attr: an fd of a mount tree, or a detached copy)
#   roots (chroot, setns: the root or mount namespace becomes one the caller names)
#   admin (the machine's own administration: accounting, swap, reboot, kexec, modules)
#   host-waits (the caller answers others' faults or file events: they wait for it)
#   by-pid (argument 0 names another process, whose memory or fds the call reaches)
#   msghdrs (sends with a struct msghdr, whose name may be an address)
#   cwd (its path becomes the cwd), reads (a path call that writes nothing)
#   reads-data, writes-data (read and pread64, write and pwrite64: a buffer and its count)
#   mmaps (mmap, mmap2), returns-addr (the result is an address), returns-mode (umask)
#   TP, TN                                                        strace's %process, %network
ALWAYS = ("always",)


class Row(NamedTuple):
    name: str
    args: tuple          # ((kind, name or None), ...)
    classes: frozenset
    nofollow: tuple | None
    nofollow_arg: dict   # path argument index -> rule
    writes: tuple | None
    names: tuple
    empty_path: int | None
    i386: tuple | None   # ((kind, name or None), ...) where i386 lays the call out otherwise
    i386_variants: tuple
    only: str | None
    note: str | None


def _args(text):
    return tuple((a.partition(":")[0], a.partition(":")[2] or None) for a in text.split())


def R(name, args="", classes="", *, nofollow=None, nofollow_arg=None, writes=None, names=(), empty_path=None,
      i386=None, i386_variants="", only=None, note=None):
    """One row of ROWS (see the module docstring)."""
    return Row(name, _args(args), frozenset(classes.split()), nofollow, nofollow_arg or {}, writes, names,
               empty_path, _args(i386) if i386 is not None else None, tuple(i386_variants.split()), only,
               note)


_ = ""  # no arguments

ROWS: tuple[Row, ...] = (
    # --- paths: open/create --------------------------------------------------------
    R("open", "path oflags int:mode", "opens", nofollow=("oflags", 1), writes=("oflags", 1)),
    R("openat", "dirfd path oflags int:mode", "opens", nofollow=("oflags", 2), writes=("oflags", 2)),
    # struct open_how *, size
    R("openat2", "dirfd path ptr:how int:size", "opens", nofollow=("open_how", 2), writes=("open_how", 2)),
    R("creat", "path int:mode", "opens", writes=ALWAYS),
    R("open_by_handle_at", "fd:mount_fd ptr:handle oflags", "bypasses",
       note="EPERM: a handle reaches a file past the view's paths"),
    R("name_to_handle_at", "dirfd path ptr:handle ptr:mount_id atflags", "reads",
       nofollow=("unless_set", 4, AT_SYMLINK_FOLLOW), empty_path=4),
    R("mkdir", "path int:mode", "mkdirs", nofollow=ALWAYS, writes=ALWAYS, names=(0,)),
    R("mkdirat", "dirfd path int:mode", "mkdirs", nofollow=ALWAYS, writes=ALWAYS, names=(0,)),
    R("mknod", "path int:mode int:dev", "mknods", nofollow=ALWAYS, writes=ALWAYS, names=(0,)),
    R("mknodat", "dirfd path int:mode int:dev", "mknods", nofollow=ALWAYS, writes=ALWAYS, names=(0,)),
    # --- paths: stat and access ----------------------------------------------------
    R("stat", "path ptr:statbuf", "stats reads", i386_variants="stat64 oldstat"),
    R("lstat", "path ptr:statbuf", "stats reads", nofollow=ALWAYS, i386_variants="lstat64 oldlstat"),
    R("oldstat", "path ptr:statbuf", "stats reads oldstats"),
    R("oldlstat", "path ptr:statbuf", "stats reads oldstats", nofollow=ALWAYS),
    R("stat64", "path ptr:statbuf", "stats reads stat64s"),
    R("lstat64", "path ptr:statbuf", "stats reads stat64s", nofollow=ALWAYS),
    R("newfstatat", "dirfd path ptr:statbuf atflags", "stats reads",
       nofollow=("if_set", 3, AT_SYMLINK_NOFOLLOW), empty_path=3, i386_variants="fstatat64"),
    R("fstatat64", "dirfd path ptr:statbuf atflags", "stats reads stat64s",
       nofollow=("if_set", 3, AT_SYMLINK_NOFOLLOW), empty_path=3),
    R("statx", "dirfd path atflags int:mask ptr:statxbuf", "reads",
       nofollow=("if_set", 2, AT_SYMLINK_NOFOLLOW), empty_path=2),
    R("statfs", "path ptr:buf", "reads", i386_variants="statfs64"),
    R("statfs64", "path int:size ptr:buf", "reads"),
    R("access", "path int:mode", "accesses", writes=("access", 1)),
    # the kernel call has no flags argument
    R("faccessat", "dirfd path int:mode", "accesses", writes=("access", 2)),
    R("faccessat2", "dirfd path int:mode atflags", "accesses",
       nofollow=("if_set", 3, AT_SYMLINK_NOFOLLOW), writes=("access", 2), empty_path=3),
    R("readlink", "path ptr:buf int:size", "readlinks reads", nofollow=ALWAYS),
    R("readlinkat", "dirfd path ptr:buf int:size", "readlinks reads", nofollow=ALWAYS),
    R("getcwd", "ptr:buf int:size"),  # output buffer
    # --- paths: change attributes ---------------------------------------------------
    R("chmod", "path int:mode", "chmods metadata", writes=ALWAYS),
    R("fchmodat", "dirfd path int:mode", "chmods metadata", writes=ALWAYS),  # no flags: always follows
    R("fchmodat2", "dirfd path int:mode atflags", "chmods metadata",
       nofollow=("if_set", 3, AT_SYMLINK_NOFOLLOW), writes=ALWAYS, empty_path=3),
    R("chown", "path int:uid int:gid", "chowns metadata", writes=ALWAYS, i386_variants="chown32"),
    R("lchown", "path int:uid int:gid", "chowns metadata", nofollow=ALWAYS, writes=ALWAYS,
       i386_variants="lchown32"),
    R("chown32", "path int:uid int:gid", "chowns metadata", writes=ALWAYS),
    R("lchown32", "path int:uid int:gid", "chowns metadata", nofollow=ALWAYS, writes=ALWAYS),
    R("fchownat", "dirfd path int:uid int:gid atflags", "chowns metadata",
       nofollow=("if_set", 4, AT_SYMLINK_NOFOLLOW), writes=ALWAYS, empty_path=4),
    R("truncate", "path int:length", "truncates", writes=ALWAYS, i386_variants="truncate64"),
    R("truncate64", "path int:length", "truncates", writes=ALWAYS, i386="path int:length_lo int:length_hi"),
    R("utime", "path ptr:times", "utimes metadata", writes=ALWAYS),
    R("utimes", "path ptr:times", "utimes metadata", writes=ALWAYS),
    R("futimesat", "dirfd path ptr:times", "utimes metadata null-is-fd", writes=ALWAYS),
    # path may be NULL: acts on dirfd
    R("utimensat", "dirfd path ptr:times atflags", "utimes metadata null-is-fd utimens",
       nofollow=("if_set", 3, AT_SYMLINK_NOFOLLOW), writes=ALWAYS, empty_path=3,
       i386_variants="utimensat_time64"),
    R("utimensat_time64", "dirfd path ptr:times atflags", "utimes metadata null-is-fd utimens time64",
       nofollow=("if_set", 3, AT_SYMLINK_NOFOLLOW), writes=ALWAYS),
    R("file_getattr", "dirfd path ptr int atflags", "reads", nofollow=("if_set", 4, AT_SYMLINK_NOFOLLOW)),
    R("file_setattr", "dirfd path ptr int atflags", "metadata",
       nofollow=("if_set", 4, AT_SYMLINK_NOFOLLOW), writes=ALWAYS),
    # --- paths: xattrs (the attribute name is a 'str') -------------------------------
    R("setxattr", "path str:attr ptr:value int:size int:flags", "xattr-writes metadata", writes=ALWAYS),
    R("lsetxattr", "path str:attr ptr:value int:size int:flags", "xattr-writes metadata",
       nofollow=ALWAYS, writes=ALWAYS),
    R("fsetxattr", "fd str:attr ptr:value int:size int:flags", "xattr-writes metadata"),
    R("setxattrat", "dirfd path atflags str ptr int", "xattr-writes metadata",
       nofollow=("if_set", 2, AT_SYMLINK_NOFOLLOW), writes=ALWAYS, empty_path=2),
    R("getxattr", "path str:attr ptr:value int:size", "reads"),
    R("lgetxattr", "path str:attr ptr:value int:size", "reads", nofollow=ALWAYS),
    R("fgetxattr", "fd str:attr ptr:value int:size"),
    R("getxattrat", "dirfd path atflags str ptr int", "reads",
       nofollow=("if_set", 2, AT_SYMLINK_NOFOLLOW), empty_path=2),
    R("listxattr", "path ptr int", "reads"),
    R("llistxattr", "path ptr int", "reads", nofollow=ALWAYS),
    R("flistxattr", "fd ptr int"),
    R("listxattrat", "dirfd path atflags ptr int", "reads",
       nofollow=("if_set", 2, AT_SYMLINK_NOFOLLOW), empty_path=2),
    R("removexattr", "path str:attr", "xattr-writes metadata", writes=ALWAYS),
    R("lremovexattr", "path str:attr", "xattr-writes metadata", nofollow=ALWAYS, writes=ALWAYS),
    R("fremovexattr", "fd str:attr", "xattr-writes metadata"),
    R("removexattrat", "dirfd path atflags str", "xattr-writes metadata",
       nofollow=("if_set", 2, AT_SYMLINK_NOFOLLOW), writes=ALWAYS, empty_path=2),
    # --- paths: names (link, unlink, rename, symlink) ---------------------------------
    R("link", "path:oldpath path:newpath", "links", nofollow=ALWAYS, writes=ALWAYS, names=(1,)),
    R("linkat", "dirfd:olddirfd path:oldpath dirfd:newdirfd path:newpath atflags", "links",
       nofollow=("unless_set", 4, AT_SYMLINK_FOLLOW), nofollow_arg={3: ALWAYS}, writes=ALWAYS, names=(1,),
       empty_path=4),
    R("unlink", "path", "unlinks", nofollow=ALWAYS, writes=ALWAYS, names=(0,)),
    # AT_REMOVEDIR
    R("unlinkat", "dirfd path atflags", "unlinks", nofollow=ALWAYS, writes=ALWAYS, names=(0,)),
    R("rmdir", "path", "unlinks", nofollow=ALWAYS, writes=ALWAYS, names=(0,)),
    R("rename", "path:oldpath path:newpath", "renames", nofollow=ALWAYS, writes=ALWAYS, names=(0, 1)),
    R("renameat", "dirfd:olddirfd path:oldpath dirfd:newdirfd path:newpath", "renames",
       nofollow=ALWAYS, writes=ALWAYS, names=(0, 1)),
    # RENAME_* flags
    R("renameat2", "dirfd:olddirfd path:oldpath dirfd:newdirfd path:newpath int:flags", "renames",
       nofollow=ALWAYS, writes=ALWAYS, names=(0, 1)),
    # the symlink target is stored, never resolved: 'str'; only linkpath is a path
    R("symlink", "str:target path:linkpath", "symlinks", nofollow=ALWAYS, writes=ALWAYS, names=(0,)),
    R("symlinkat", "str:target dirfd:newdirfd path:linkpath", "symlinks",
       nofollow=ALWAYS, writes=ALWAYS, names=(0,)),
    # --- paths: process and system ------------------------------------------------------
    R("execve", "path ptr:argv ptr:envp", "execs TP reads"),
    R("execveat", "dirfd path ptr:argv ptr:envp atflags", "execs TP reads",
       nofollow=("if_set", 4, AT_SYMLINK_NOFOLLOW), empty_path=4),
    R("chdir", "path", "cwd reads chdirs"),
    R("fchdir", "fd", "chdirs"),
    R("chroot", "path", "reads roots"),
    R("pivot_root", "path path", "mounts", writes=ALWAYS),
    R("acct", "path", "admin", writes=ALWAYS),  # NULL turns accounting off
    R("swapon", "path int", "admin", writes=ALWAYS),
    R("swapoff", "path", "admin", writes=ALWAYS),
    R("uselib", "path", "reads"),
    R("quotactl", "int path int ptr", "", writes=ALWAYS),  # block device; NULL for some commands
    R("quotactl_fd", "fd int int ptr"),
    R("inotify_add_watch", "fd path int:mask", "reads", nofollow=("if_set", 2, 0x1000000)),
    R("inotify_rm_watch", "fd int"),
    # path may be NULL
    R("fanotify_mark", "fd int:flags int:mask dirfd path", "reads",
       nofollow=("if_set", 1, 0x4), i386="fd int:flags int:mask_lo int:mask_hi dirfd path"),
    R("fanotify_init", "int oflags", "host-waits"),
    # --- paths: mounts. mount's source is a path or not depending on fstype: 'str' ----
    R("mount", "str:source path:target str:fstype int:flags ptr:data", "mounts classic-mounts",
       writes=ALWAYS,
       note="served for the types of the loaded modules (viewfs, fs); others are the kernel's"),
    R("umount", "path:target", "mounts classic-mounts", writes=ALWAYS),  # i386 oldumount
    R("umount2", "path:target int:flags", "mounts classic-mounts",
       nofollow=("if_set", 1, 0x8), writes=ALWAYS, i386_variants="umount",
       note="served for the mounts of the view's modules; others are the kernel's"),
    # AT_* | OPEN_TREE_*
    R("open_tree", "dirfd path atflags", "mounts reads open-trees",
       nofollow=("if_set", 2, AT_SYMLINK_NOFOLLOW), empty_path=2),
    R("open_tree_attr", "dirfd path atflags ptr int", "mounts reads open-trees",
       nofollow=("if_set", 2, AT_SYMLINK_NOFOLLOW), empty_path=2),
    # MOVE_MOUNT_* flags
    R("move_mount", "dirfd path dirfd path int", "mounts",
       nofollow=("unless_set", 4, 0x1), nofollow_arg={3: ("unless_set", 4, 0x10)}, writes=ALWAYS),
    R("fspick", "dirfd path int", "mounts", nofollow=("if_set", 2, 0x2), writes=ALWAYS),  # FSPICK_* flags
    R("mount_setattr", "dirfd path atflags ptr int", "mounts",
       nofollow=("if_set", 2, AT_SYMLINK_NOFOLLOW), writes=ALWAYS, empty_path=2),
    R("fsopen", "str int", "mounts"),
    # key, value, aux: value is a path and aux a dirfd for FSCONFIG_SET_PATH*, an fd
    # in aux for FSCONFIG_SET_FD: decided by cmd, so not typed here
    R("fsconfig", "fd int str ptr int"),
    R("fsmount", "fd int int", "mounts"),
    R("statmount", "ptr ptr int int"),
    R("listmount", "ptr ptr int int"),
    # --- fds: I/O ---------------------------------------------------------------------------
    R("read", "fd ptr:buf int:count", "reads-data"),
    R("write", "fd ptr:buf int:count", "writes-data"),
    R("readv", "fd ptr int"),
    R("writev", "fd ptr int"),
    R("pread64", "fd ptr:buf int:count int:pos", "reads-data",
       i386="fd ptr:buf int:count int:pos_lo int:pos_hi"),
    R("pwrite64", "fd ptr:buf int:count int:pos", "writes-data",
       i386="fd ptr:buf int:count int:pos_lo int:pos_hi"),
    R("preadv", "fd ptr int int int"),
    R("pwritev", "fd ptr int int int"),
    R("preadv2", "fd ptr int int int int"),
    R("pwritev2", "fd ptr int int int int"),
    R("lseek", "fd int:offset int:whence", "", i386_variants="_llseek"),
    R("_llseek", "fd int int ptr int"),
    R("sendfile", "fd fd ptr int", "", i386_variants="sendfile64"),
    R("sendfile64", "fd fd ptr int"),
    R("splice", "fd ptr fd ptr int int"),
    R("tee", "fd fd int int"),
    R("vmsplice", "fd ptr int int"),
    R("copy_file_range", "fd ptr fd ptr int int"),
    R("readahead", "fd int int", "", i386="fd int int int"),
    R("fadvise64", "fd int int int", "", i386="fd int int int int", i386_variants="fadvise64_64"),
    R("fadvise64_64", "fd int int int", "", i386="fd int int int int int"),
    R("fallocate", "fd int int int", "", i386="fd int int int int int"),
    R("sync_file_range", "fd int int int", "", i386="fd int int int int int"),
    R("cachestat", "fd ptr ptr int"),
    R("getdents", "fd ptr:dirp int:count", "", i386_variants="readdir"),
    R("getdents64", "fd ptr:dirp int:count"),
    R("readdir", "fd ptr int"),
    # --- fds: metadata and control ----------------------------------------------------------
    R("close", "fd"),
    R("close_range", "int int int"),  # bounds of a range (last is often ~0U)
    R("dup", "fd"),
    R("dup2", "fd fd:newfd"),
    R("dup3", "fd fd:newfd oflags"),  # O_CLOEXEC
    # arg is an int, a pointer or an fd bound per cmd
    R("fcntl", "fd int:cmd int:cmdarg", "", i386_variants="fcntl64"),
    R("fcntl64", "fd int:cmd int:cmdarg"),
    R("ioctl", "fd int:request int:argp"),
    R("flock", "fd int"),
    R("fsync", "fd"),
    R("fdatasync", "fd"),
    R("syncfs", "fd"),
    R("fstat", "fd ptr", "stats", i386_variants="fstat64 oldfstat"),
    R("oldfstat", "fd ptr", "stats oldstats"),
    R("fstat64", "fd ptr", "stats stat64s"),
    R("fstatfs", "fd ptr", "", i386_variants="fstatfs64"),
    R("fstatfs64", "fd int ptr"),
    R("fchmod", "fd int:mode", "chmods metadata"),
    R("fchown", "fd int:uid int:gid", "chowns metadata", i386_variants="fchown32"),
    R("fchown32", "fd int:uid int:gid", "chowns metadata"),
    R("ftruncate", "fd int:length", "", i386_variants="ftruncate64"),
    R("ftruncate64", "fd int:length", "", i386="fd int:length_lo int:length_hi"),
    R("mmap", "ptr:addr int:length int:prot int:flags fd int:offset", "mmaps returns-addr",
       i386="ptr", i386_variants="mmap2"),
    R("mmap2", "ptr:addr int:length int:prot int:flags fd int:pgoff", "mmaps returns-addr"),
    R("finit_module", "fd str int", "admin"),
    R("kexec_file_load", "fd fd int str int", "admin"),
    R("setns", "fd int", "creds TP roots"),
    R("landlock_create_ruleset", "ptr int int"),
    R("landlock_add_rule", "fd int ptr int"),
    R("landlock_restrict_self", "fd int", "creds"),
    # --- fds: new kinds of fd ------------------------------------------------------------
    R("pipe", "ptr"),
    R("pipe2", "ptr oflags"),
    R("eventfd", "int"),
    R("eventfd2", "int int"),
    R("signalfd", "fd ptr int"),  # fd -1 creates a new one
    R("signalfd4", "fd ptr int int"),
    R("timerfd_create", "int int"),
    R("timerfd_gettime", "fd ptr", "", i386_variants="timerfd_gettime64"),
    R("timerfd_settime", "fd int:flags ptr:new ptr:old", "", i386_variants="timerfd_settime64"),
    R("timerfd_gettime64", "fd ptr", "time64"),
    R("timerfd_settime64", "fd int:flags ptr:new ptr:old", "time64"),
    R("inotify_init", ""),
    R("inotify_init1", "int"),
    R("epoll_create", "int"),
    R("epoll_create1", "int"),
    R("epoll_ctl", "fd int fd ptr"),
    R("epoll_wait", "fd ptr int int"),
    R("epoll_pwait", "fd ptr int int ptr int"),
    R("epoll_pwait2", "fd ptr int ptr ptr int"),
    R("epoll_ctl_old", ""),  # never implemented
    R("epoll_wait_old", ""),
    R("memfd_create", "str int"),
    R("memfd_secret", "int"),
    R("userfaultfd", "int", "host-waits"),
    R("perf_event_open", "ptr int int fd int"),  # group_fd may be -1
    R("bpf", "int ptr int"),
    R("io_uring_setup", "int ptr", "bypasses",
       note="ENOSYS: its operations reach files past the view's paths"),
    R("io_uring_enter", "fd int int int ptr int"),
    R("io_uring_register", "fd int ptr int"),
    R("pidfd_open", "int int", "TP by-pid"),
    R("pidfd_getfd", "fd int int"),  # targetfd lives in the other process
    R("pidfd_send_signal", "fd int ptr int", "TP"),
    R("process_madvise", "fd ptr int int int"),
    R("process_mrelease", "fd int"),
    # --- polling ------------------------------------------------------------------------------
    R("poll", "ptr int int"),
    R("ppoll", "ptr int ptr ptr int", "", i386_variants="ppoll_time64"),
    R("ppoll_time64", "ptr int ptr ptr int", "time64"),
    R("select", "int ptr ptr ptr ptr", "", i386="ptr", i386_variants="_newselect"),
    R("_newselect", "int ptr ptr ptr ptr"),
    R("pselect6", "int ptr ptr ptr ptr ptr", "", i386_variants="pselect6_time64"),
    R("pselect6_time64", "int ptr ptr ptr ptr ptr", "time64"),
    # --- sockets ------------------------------------------------------------------------------
    R("socket", "int:domain int:type int:protocol", "TN", i386_variants="socketcall"),
    R("socketpair", "int:domain int:type int:protocol ptr:sv", "TN", i386_variants="socketcall"),
    R("bind", "fd ptr:addr int:addrlen", "sockaddrs TN", i386_variants="socketcall"),
    R("connect", "fd ptr:addr int:addrlen", "sockaddrs TN", i386_variants="socketcall"),
    R("listen", "fd int", "TN", i386_variants="socketcall"),
    R("accept", "fd ptr ptr", "TN socknames", i386_variants="socketcall"),
    R("accept4", "fd ptr ptr int", "TN socknames", i386_variants="socketcall"),
    R("getsockname", "fd ptr ptr", "TN socknames", i386_variants="socketcall"),
    R("getpeername", "fd ptr ptr", "TN socknames", i386_variants="socketcall"),
    R("sendto", "fd ptr int int ptr int", "TN", i386_variants="socketcall"),
    R("recvfrom", "fd ptr int int ptr ptr", "TN", i386_variants="socketcall"),
    R("sendmsg", "fd ptr int", "TN msghdrs", i386_variants="socketcall"),
    R("recvmsg", "fd ptr int", "TN", i386_variants="socketcall"),
    R("sendmmsg", "fd ptr int int", "TN msghdrs", i386_variants="socketcall"),
    R("recvmmsg", "fd ptr int int ptr", "TN", i386_variants="socketcall recvmmsg_time64"),
    R("recvmmsg_time64", "fd ptr int int ptr", "time64"),
    R("shutdown", "fd int", "TN", i386_variants="socketcall"),
    R("setsockopt", "fd int:level int:optname ptr:optval int:optlen", "TN", i386_variants="socketcall"),
    R("getsockopt", "fd int:level int:optname ptr:optval ptr:optlen", "TN", i386_variants="socketcall"),
    R("socketcall", "int:call ptr:argp", "TN"),  # i386: call number, pointer to the real arguments
    R("getpmsg", ""),  # never implemented (STREAMS)
    R("putpmsg", ""),
    # --- SysV IPC and POSIX message queues (queue names are not filesystem paths) --------
    R("ipc", "int:call int:first int:second int:third ptr int:fifth"),
    R("semget", "int int int", "", i386_variants="ipc"),
    R("semctl", "int int int int", "", i386_variants="ipc"),
    R("semop", "int ptr int", "", i386_variants="ipc"),
    R("semtimedop", "int ptr int ptr", "", i386_variants="ipc semtimedop_time64"),
    R("semtimedop_time64", "int ptr int ptr", "time64"),
    R("msgget", "int int", "", i386_variants="ipc"),
    R("msgsnd", "int ptr int int", "", i386_variants="ipc"),
    R("msgrcv", "int ptr int int int", "", i386_variants="ipc"),
    R("msgctl", "int int ptr", "", i386_variants="ipc"),
    R("shmget", "int int int", "", i386_variants="ipc"),
    R("shmat", "int:shmid ptr:shmaddr int:shmflg", "returns-addr", i386_variants="ipc"),
    R("shmdt", "ptr", "", i386_variants="ipc"),
    R("shmctl", "int int ptr", "", i386_variants="ipc"),
    R("mq_open", "str oflags int ptr"),
    R("mq_unlink", "str"),
    R("mq_timedsend", "int:mqdes ptr:msg_ptr int:msg_len int:msg_prio ptr:abs_timeout", "",
       i386_variants="mq_timedsend_time64"),
    R("mq_timedreceive", "int:mqdes ptr:msg_ptr int:msg_len ptr:msg_prio ptr:abs_timeout", "",
       i386_variants="mq_timedreceive_time64"),
    R("mq_timedsend_time64", "int:mqdes ptr:msg_ptr int:msg_len int:msg_prio ptr:abs_timeout", "time64"),
    R("mq_timedreceive_time64", "int:mqdes ptr:msg_ptr int:msg_len ptr:msg_prio ptr:abs_timeout", "time64"),
    R("mq_notify", "int ptr"),
    R("mq_getsetattr", "int ptr ptr"),
    # --- memory -------------------------------------------------------------------------------
    R("brk", "ptr:brk", "returns-addr"),
    R("munmap", "ptr:addr int:length"),
    R("mremap", "ptr:addr int:old_len int:new_len int:flags ptr:new_addr", "returns-addr"),
    R("mprotect", "ptr:addr int:length int:prot"),
    R("pkey_mprotect", "ptr:addr int:length int:prot int:pkey"),
    R("pkey_alloc", "int int"),
    R("pkey_free", "int"),
    R("madvise", "ptr:addr int:length int:advice"),
    R("mincore", "int int ptr"),
    R("msync", "int int int"),
    R("mlock", "int int"),
    R("mlock2", "int int int"),
    R("munlock", "int int"),
    R("mlockall", "int"),
    R("munlockall", ""),
    R("remap_file_pages", "int int int int int"),
    R("mbind", "int int int ptr int int"),
    R("get_mempolicy", "ptr ptr int int int"),
    R("set_mempolicy", "int ptr int"),
    R("set_mempolicy_home_node", "int int int int"),
    R("migrate_pages", "int int ptr ptr"),
    R("move_pages", "int int ptr ptr ptr int"),
    R("map_shadow_stack", "int int int"),
    R("mseal", "int int int"),
    R("process_vm_readv", "int ptr int ptr int int", "by-pid"),
    R("process_vm_writev", "int ptr int ptr int int", "by-pid"),
    # --- processes and threads ------------------------------------------------------------
    R("fork", "", "TP"),
    R("vfork", "", "TP"),
    # x86: flags, stack, ptid, ctid, tls
    R("clone", "int:flags int:stack ptr:parent_tid ptr:child_tid int:tls", "TP",
       note="CLONE_UNTRACED is taken off: the child stays in the view"),
    R("clone3", "ptr int", "TP",
       note="ENOSYS in every view: its flags lie where the filter cannot read them, and"
            " CLONE_UNTRACED would leave the view; the C library falls back to clone"),
    R("exit", "int:error_code", "exits TP"),
    R("exit_group", "int:error_code", "exits TP"),
    R("wait4", "int ptr int ptr", "waits TP", i386_variants="waitpid"),
    R("waitpid", "int ptr int", "waits TP"),
    R("waitid", "int int ptr int ptr", "waits TP"),
    R("kill", "int:pid int:sig", "TP"),
    R("tkill", "int:pid int:sig", "TP"),
    R("tgkill", "int:tgid int:pid int:sig", "TP"),
    R("getpid", ""),
    R("getppid", ""),
    R("gettid", ""),
    R("getpgid", "int"),
    R("setpgid", "int int"),
    R("getpgrp", ""),
    R("getsid", "int"),
    R("setsid", ""),
    R("unshare", "int:flags", "creds TP"),
    R("set_tid_address", "ptr"),
    R("set_robust_list", "ptr int"),
    R("get_robust_list", "int ptr ptr"),
    R("rseq", "ptr int int int"),
    R("futex", "ptr:uaddr int:op int:val ptr:timeout ptr:uaddr2 int:val3", "", i386_variants="futex_time64"),
    R("futex_time64", "ptr:uaddr int:op int:val ptr:timeout ptr:uaddr2 int:val3", "time64"),
    R("futex_waitv", "ptr:waiters int:nr_futexes int:flags ptr:timeout int:clockid", "time64"),
    R("futex_wake", "ptr int int int"),
    R("futex_wait", "ptr:uaddr int:val int:mask int:flags ptr:timeout int:clockid", "time64"),
    R("futex_requeue", "ptr int int int"),
    R("ptrace", "int:request int:pid int:addr int:data",
       note="emulated for tracers inside the view (x86_64 tracers; i386 ones get ENOSYS)"),
    R("kcmp", "int int int int int"),  # idx may be an fd of another process
    R("prctl", "int int int int int"),
    R("arch_prctl", "int int"),
    R("personality", "int"),
    R("seccomp", "int:op int:flags ptr:uargs",
       note="a listener of the process's own is refused; its other filters stack under the view's"),
    R("sched_yield", ""),
    R("sched_setparam", "int ptr"),
    R("sched_getparam", "int ptr"),
    R("sched_setscheduler", "int int ptr"),
    R("sched_getscheduler", "int"),
    R("sched_get_priority_max", "int"),
    R("sched_get_priority_min", "int"),
    R("sched_rr_get_interval", "int ptr", "", i386_variants="sched_rr_get_interval_time64"),
    R("sched_rr_get_interval_time64", "int ptr", "time64"),
    R("sched_setaffinity", "int int ptr"),
    R("sched_getaffinity", "int int ptr"),
    R("sched_setattr", "int ptr int"),
    R("sched_getattr", "int ptr int int"),
    R("getpriority", "int int"),
    R("setpriority", "int int int", "", i386_variants="nice"),
    R("nice", "int"),
    R("ioprio_get", "int int"),
    R("ioprio_set", "int int int"),
    R("getcpu", "ptr ptr ptr"),
    R("getrlimit", "int:resource ptr:rlim", "", i386_variants="ugetrlimit"),
    R("ugetrlimit", "int ptr"),
    R("setrlimit", "int:resource ptr:rlim"),
    R("prlimit64", "int int ptr ptr"),
    R("getrusage", "int ptr"),
    R("times", "ptr"),
    R("umask", "int:mode", "returns-mode"),
    R("uretprobe", ""),
    R("uprobe", ""),
    R("modify_ldt", "int ptr int"),
    R("set_thread_area", "ptr"),
    R("get_thread_area", "ptr"),
    R("iopl", "int"),
    R("ioperm", "int int int"),
    R("vm86", "int ptr", "", only="i386"),
    R("vm86old", "ptr", "", only="i386"),
    R("restart_syscall", ""),
    R("pause", ""),
    # --- signals ------------------------------------------------------------------------------
    R("rt_sigaction", "int:sig ptr:act ptr:oact int:sigsetsize", "", i386_variants="sigaction signal"),
    R("rt_sigprocmask", "int:how ptr:set ptr:oset int:sigsetsize", "",
       i386_variants="sigprocmask sgetmask ssetmask"),
    R("rt_sigpending", "ptr int", "", i386_variants="sigpending"),
    R("rt_sigsuspend", "ptr int", "", i386_variants="sigsuspend"),
    R("rt_sigtimedwait", "ptr ptr ptr int", "", i386_variants="rt_sigtimedwait_time64"),
    R("rt_sigtimedwait_time64", "ptr ptr ptr int", "time64"),
    R("rt_sigqueueinfo", "int:tgid int:sig ptr:uinfo", "TP"),
    R("rt_tgsigqueueinfo", "int int int ptr", "TP"),
    R("rt_sigreturn", "", "", i386_variants="sigreturn"),
    R("sigaltstack", "ptr ptr"),
    R("sigaction", "int ptr ptr"),
    R("signal", "int ptr"),
    R("sigprocmask", "int:how ptr:set ptr:oset"),
    R("sigpending", "ptr"),
    R("sigsuspend", "int int int"),
    R("sigreturn", ""),
    R("sgetmask", ""),
    R("ssetmask", "int"),
    # --- identity -----------------------------------------------------------------------------
    R("getuid", "", "get-ids", i386_variants="getuid32"),
    R("geteuid", "", "get-ids", i386_variants="geteuid32"),
    R("getgid", "", "get-ids", i386_variants="getgid32"),
    R("getegid", "", "get-ids", i386_variants="getegid32"),
    R("getuid32", "", "get-ids"),
    R("geteuid32", "", "get-ids"),
    R("getgid32", "", "get-ids"),
    R("getegid32", "", "get-ids"),
    R("setuid", "int:uid", "set-ids creds", i386_variants="setuid32"),
    R("setgid", "int:gid", "set-ids creds", i386_variants="setgid32"),
    R("setuid32", "int:uid", "set-ids creds"),
    R("setgid32", "int:gid", "set-ids creds"),
    R("setreuid", "int:ruid int:euid", "set-ids creds", i386_variants="setreuid32"),
    R("setregid", "int:rgid int:egid", "set-ids creds", i386_variants="setregid32"),
    R("setreuid32", "int:ruid int:euid", "set-ids creds"),
    R("setregid32", "int:rgid int:egid", "set-ids creds"),
    R("setresuid", "int:ruid int:euid int:suid", "set-ids creds", i386_variants="setresuid32"),
    R("setresgid", "int:rgid int:egid int:sgid", "set-ids creds", i386_variants="setresgid32"),
    R("setresuid32", "int:ruid int:euid int:suid", "set-ids creds"),
    R("setresgid32", "int:rgid int:egid int:sgid", "set-ids creds"),
    R("getresuid", "ptr:ruidp ptr:euidp ptr:suidp", "get-ids", i386_variants="getresuid32"),
    R("getresgid", "ptr:rgidp ptr:egidp ptr:sgidp", "get-ids", i386_variants="getresgid32"),
    R("getresuid32", "ptr:ruidp ptr:euidp ptr:suidp", "get-ids"),
    R("getresgid32", "ptr:rgidp ptr:egidp ptr:sgidp", "get-ids"),
    R("setfsuid", "int:uid", "set-ids creds", i386_variants="setfsuid32"),
    R("setfsgid", "int:gid", "set-ids creds", i386_variants="setfsgid32"),
    R("setfsuid32", "int:uid", "set-ids creds"),
    R("setfsgid32", "int:gid", "set-ids creds"),
    R("getgroups", "int:ngroups ptr:list", "get-ids", i386_variants="getgroups32"),
    R("setgroups", "int:ngroups ptr:list", "set-ids creds", i386_variants="setgroups32"),
    R("getgroups32", "int:ngroups ptr:list", "get-ids"),
    R("setgroups32", "int:ngroups ptr:list", "set-ids creds"),
    R("capget", "ptr ptr"),
    R("capset", "ptr ptr", "creds"),
    R("lsm_get_self_attr", "int ptr ptr int"),
    R("lsm_set_self_attr", "int ptr int int"),
    R("lsm_list_modules", "ptr ptr int"),
    R("listns", "ptr ptr int int"),
    # --- time ---------------------------------------------------------------------------------
    R("time", "ptr:tloc"),
    R("stime", "ptr:tptr", "clock-sets"),
    R("gettimeofday", "ptr:tv ptr:tz"),
    R("settimeofday", "ptr:tv ptr:tz", "clock-sets", i386_variants="stime"),
    R("adjtimex", "ptr:buf", "clock-adjusts"),
    R("clock_gettime", "int:clock ptr:tp", "", i386_variants="clock_gettime64"),
    R("clock_settime", "int:clock ptr:tp", "clock-sets", i386_variants="clock_settime64"),
    R("clock_getres", "int ptr", "", i386_variants="clock_getres_time64"),
    R("clock_adjtime", "int:clock ptr:buf", "clock-adjusts", i386_variants="clock_adjtime64"),
    R("clock_nanosleep", "int:clock int:flags ptr:rqtp ptr:rmtp", "", i386_variants="clock_nanosleep_time64"),
    R("clock_gettime64", "int:clock ptr:tp", "time64"),
    R("clock_settime64", "int:clock ptr:tp", "clock-sets time64"),
    R("clock_getres_time64", "int ptr", "time64"),
    R("clock_adjtime64", "int:clock ptr:buf", "clock-adjusts time64"),
    R("clock_nanosleep_time64", "int:clock int:flags ptr:rqtp ptr:rmtp", "time64"),
    R("nanosleep", "ptr ptr"),
    R("alarm", "int"),
    R("getitimer", "int ptr"),
    R("setitimer", "int ptr ptr"),
    R("timer_create", "int ptr ptr"),
    R("timer_settime", "int:timer int:flags ptr:new ptr:old", "", i386_variants="timer_settime64"),
    R("timer_gettime", "int ptr", "", i386_variants="timer_gettime64"),
    R("timer_settime64", "int:timer int:flags ptr:new ptr:old", "time64"),
    R("timer_gettime64", "int ptr", "time64"),
    R("timer_getoverrun", "int"),
    R("timer_delete", "int"),
    # --- system -------------------------------------------------------------------------------
    R("uname", "ptr:buf", "", i386_variants="olduname oldolduname"),
    R("olduname", "ptr:buf"),
    R("oldolduname", "ptr:buf"),
    R("sethostname", "ptr:buf int:len"),  # length-delimited, not NUL-terminated
    R("setdomainname", "ptr:buf int:len"),
    R("sysinfo", "ptr"),
    R("syslog", "int ptr int"),
    R("sysfs", "int int int"),  # arg1 is a string for option 1
    R("_sysctl", "ptr"),
    R("ustat", "int ptr"),
    R("sync", ""),
    R("vhangup", ""),
    R("reboot", "int int int ptr", "admin"),
    R("kexec_load", "int int ptr int", "admin"),
    R("init_module", "ptr int str", "admin"),
    R("delete_module", "str int", "admin"),
    R("create_module", "str int"),
    R("query_module", "str int ptr int ptr"),
    R("get_kernel_syms", "ptr"),
    R("nfsservctl", "int ptr ptr"),
    R("add_key", "str str ptr int int"),
    R("request_key", "str str str int"),
    R("keyctl", "int int int int int"),
    R("io_setup", "int ptr"),
    R("io_destroy", "int"),
    R("io_submit", "int int ptr"),
    R("io_cancel", "int ptr ptr"),
    R("io_getevents", "int int int ptr ptr"),
    R("io_pgetevents", "int int int ptr ptr ptr", "", i386_variants="io_pgetevents_time64"),
    R("io_pgetevents_time64", "int int int ptr ptr ptr", "time64"),
    R("lookup_dcookie", "int ptr int", "", i386="int int ptr int"),
    R("membarrier", "int int int"),
    R("getrandom", "ptr:buf int:count int:flags"),
    R("bdflush", "int int", "", only="i386"),
    # never implemented on x86 (sys_ni_syscall): no arguments worth decoding
    R("afs_syscall", ""),
    R("break", "", "", only="i386"),
    R("ftime", "", "", only="i386"),
    R("gtty", "", "", only="i386"),
    R("stty", "", "", only="i386"),
    R("idle", "", "", only="i386"),
    R("lock", "", "", only="i386"),
    R("mpx", "", "", only="i386"),
    R("prof", "", "", only="i386"),
    R("profil", "", "", only="i386"),
    R("ulimit", "", "", only="i386"),
    R("security", ""),
    R("tuxcall", ""),
    R("vserver", ""),
)

BY_NAME: dict[str, Row] = {r.name: r for r in ROWS}
if len(BY_NAME) != len(ROWS):
    raise ValueError("syscalls.table: a call has two rows")


def _names(kinds, given):
    """The argument names of a layout: the row's, else after the kinds."""
    out = []
    for i, (kind, name) in enumerate(zip(kinds, given)):
        if name is None:
            base = _KIND_NAMES.get(kind, kind if kind != "int" else f"arg{i}")
            seen = sum(1 for k in kinds[:i] if _KIND_NAMES.get(k, k) == _KIND_NAMES.get(kind, kind))
            name = base if not seen or kind == "int" else f"{base}{seen + 1}"
        out.append(name)
    return tuple(out)


_KIND_NAMES = {"oflags": "flags", "atflags": "flags", "str": "string"}

# --- the views the rest of umview reads (derived: do not write to them) ----------------
SIGNATURES: dict[str, tuple[str, ...]] = {r.name: tuple(k for k, _ in r.args) for r in ROWS}
I386_SIGNATURES: dict[str, tuple[str, ...]] = {r.name: tuple(k for k, _ in r.i386) for r in ROWS if r.i386}
ARG_NAMES: dict[str, tuple[str, ...]] = {r.name: _names(SIGNATURES[r.name], [n for _, n in r.args])
                                         for r in ROWS}
I386_ARG_NAMES: dict[str, tuple[str, ...]] = {r.name: _names(I386_SIGNATURES[r.name], [n for _, n in r.i386])
                                              for r in ROWS if r.i386}
NOFOLLOW: dict[str, tuple] = {r.name: r.nofollow for r in ROWS if r.nofollow}
# (name, path_index) -> rule, where one path of a call differs from the call's rule.
NOFOLLOW_ARG: dict[tuple[str, int], tuple] = {(r.name, i): rule for r in ROWS
                                              for i, rule in r.nofollow_arg.items()}
WRITES: dict[str, tuple] = {r.name: r.writes for r in ROWS if r.writes}
NAMES: dict[str, tuple[int, ...]] = {r.name: r.names for r in ROWS if r.names}
EMPTY_PATH_FLAGS: dict[str, int] = {r.name: r.empty_path for r in ROWS if r.empty_path is not None}
I386_VARIANTS: dict[str, tuple[str, ...]] = {r.name: r.i386_variants for r in ROWS if r.i386_variants}
I386_ONLY: tuple[str, ...] = tuple(r.name for r in ROWS if r.only == "i386")
X32_VARIANTS: dict[str, tuple[str, ...]] = {}
X32_ONLY: tuple[str, ...] = ()


@lru_cache(maxsize=None)
def calls(*classes):
    """The names of the calls of any of these classes (frozenset; one
    look-up per set of classes, then remembered)."""
    unknown = set(classes) - CLASSES
    if unknown:
        raise KeyError(f"syscalls.table: no class {', '.join(sorted(unknown))}")
    return frozenset(r.name for r in ROWS if r.classes & set(classes))


#: the classes a row may have (the legend above)
CLASSES = frozenset({
    "opens", "mkdirs", "mknods", "symlinks", "links", "unlinks", "renames",
    "truncates", "chmods", "chowns", "utimes", "xattr-writes", "metadata", "null-is-fd", "utimens",
    "stats", "stat64s", "oldstats", "accesses", "readlinks", "reads", "cwd", "chdirs",
    "execs", "exits", "waits", "set-ids", "creds", "get-ids",
    "socknames", "sockaddrs", "msghdrs", "bypasses", "mounts", "open-trees", "roots", "admin", "host-waits",
    "by-pid", "clock-sets", "clock-adjusts", "time64", "classic-mounts",
    "reads-data", "writes-data", "mmaps", "returns-addr", "returns-mode", "TP", "TN",
})
_unknown = {c for r in ROWS for c in r.classes} - CLASSES
if _unknown:
    raise ValueError(f"syscalls.table: rows with classes the legend lacks: {sorted(_unknown)}")
CWD_SETTERS = calls("cwd")
READ_ONLY = calls("reads")
PROCESS_CALLS = calls("TP")
NETWORK_CALLS = calls("TN")


def _path_args(sigs):
    out = {}
    for name, kinds in sigs.items():
        pairs = tuple(
            (i, i - 1 if i and kinds[i - 1] == "dirfd" else None)
            for i, k in enumerate(kinds) if k == "path")
        if pairs:
            out[name] = pairs
    return out


def _fd_args(sigs):
    out = {}
    for name, kinds in sigs.items():
        idx = tuple(i for i, k in enumerate(kinds) if k in ("fd", "dirfd"))
        if idx:
            out[name] = idx
    return out


# name -> ((path_index, dirfd_index or None), ...); a dirfd is the argument right before
# its path, e.g. renameat ((1, 0), (3, 2)), symlinkat ((2, 1),), open ((0, None),).
PATH_ARGS: dict[str, tuple[tuple[int, int | None], ...]] = _path_args(SIGNATURES)
# name -> indexes of fd arguments, dirfds included.
FD_ARGS: dict[str, tuple[int, ...]] = _fd_args(SIGNATURES)
I386_PATH_ARGS = _path_args({**SIGNATURES, **I386_SIGNATURES})
I386_FD_ARGS = _fd_args({**SIGNATURES, **I386_SIGNATURES})


def signature(name, abi="x86_64"):
    """Return the argument kinds of ``name`` as ``abi`` ("x86_64", "i386", "x32") lays them."""
    if abi == "i386" and name in I386_SIGNATURES:
        return I386_SIGNATURES[name]
    return SIGNATURES[name]


def nofollow_rule(name, path_index):
    """Return the NOFOLLOW rule for one path argument, or None if it always follows."""
    return NOFOLLOW_ARG.get((name, path_index), NOFOLLOW.get(name))


# Plain int arguments that the kernel reads as 32-bit C ints (flags, modes, ids): their
# decoded value is the register's low 32 bits on every ABI, as the kernel sees it.
INT32_NAMES = frozenset({
    "mode", "dev", "uid", "gid", "ruid", "euid", "suid", "rgid", "egid", "sgid", "ngroups",
    "domain", "type", "protocol", "sig", "cmd", "op",
    "addrlen", "call", "request", "clock", "clockid", "timer", "len", "mqdes", "error_code",
    "level", "optname", "shmid", "shmflg",
})
