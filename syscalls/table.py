# SPDX-License-Identifier: GPL-2.0-or-later
"""The syscall table: what each system call's arguments are, per neutral name.

The one source of truth for what a call means to umview (data only; the
derived views are in ``syscalls/__init__.py``): the kind and name of each
argument, which calls write the file system, which do not follow a symlink in
their last component, which take AT_EMPTY_PATH, the strace-like trace classes,
and the i386 and x32 variants of each call. The C core's tables, the engines'
claim sets, docs/path-syscalls.md and the trace engine's classes are all
derived from it. Syscall numbers and register maps per ABI live in ``arch/``.

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

SIGNATURES is ABI-neutral (x86_64 and x32 argument order). On i386 a 64-bit argument
takes two registers and a few old calls share a name but take one struct pointer:
I386_SIGNATURES overrides those, and I386_PATH_ARGS / I386_FD_ARGS follow it.
Note AT_EMPTY_PATH with "" and a NULL path for utimensat/fanotify_mark/fsconfig: the
call then acts on the dirfd itself; the engine decides, not this table.
"""

AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
AT_SYMLINK_FOLLOW = 0x400
AT_EMPTY_PATH = 0x1000
O_CREAT = 0o100
O_EXCL = 0o200
O_NOFOLLOW = 0o400000

_ = ()  # no arguments

SIGNATURES: dict[str, tuple[str, ...]] = {
    # --- paths: open/create --------------------------------------------------------
    "open": ("path", "oflags", "int"),
    "openat": ("dirfd", "path", "oflags", "int"),
    "openat2": ("dirfd", "path", "ptr", "int"),  # struct open_how *, size
    "creat": ("path", "int"),
    "open_by_handle_at": ("fd", "ptr", "oflags"),
    "name_to_handle_at": ("dirfd", "path", "ptr", "ptr", "atflags"),
    "mkdir": ("path", "int"),
    "mkdirat": ("dirfd", "path", "int"),
    "mknod": ("path", "int", "int"),
    "mknodat": ("dirfd", "path", "int", "int"),
    # --- paths: stat and access ----------------------------------------------------
    "stat": ("path", "ptr"),
    "lstat": ("path", "ptr"),
    "oldstat": ("path", "ptr"),
    "oldlstat": ("path", "ptr"),
    "stat64": ("path", "ptr"),
    "lstat64": ("path", "ptr"),
    "newfstatat": ("dirfd", "path", "ptr", "atflags"),
    "fstatat64": ("dirfd", "path", "ptr", "atflags"),
    "statx": ("dirfd", "path", "atflags", "int", "ptr"),
    "statfs": ("path", "ptr"),
    "statfs64": ("path", "int", "ptr"),
    "access": ("path", "int"),
    "faccessat": ("dirfd", "path", "int"),  # the kernel call has no flags argument
    "faccessat2": ("dirfd", "path", "int", "atflags"),
    "readlink": ("path", "ptr", "int"),
    "readlinkat": ("dirfd", "path", "ptr", "int"),
    "getcwd": ("ptr", "int"),  # output buffer
    # --- paths: change attributes ---------------------------------------------------
    "chmod": ("path", "int"),
    "fchmodat": ("dirfd", "path", "int"),  # no flags: always follows
    "fchmodat2": ("dirfd", "path", "int", "atflags"),
    "chown": ("path", "int", "int"),
    "lchown": ("path", "int", "int"),
    "chown32": ("path", "int", "int"),
    "lchown32": ("path", "int", "int"),
    "fchownat": ("dirfd", "path", "int", "int", "atflags"),
    "truncate": ("path", "int"),
    "truncate64": ("path", "int"),
    "utime": ("path", "ptr"),
    "utimes": ("path", "ptr"),
    "futimesat": ("dirfd", "path", "ptr"),
    "utimensat": ("dirfd", "path", "ptr", "atflags"),  # path may be NULL: acts on dirfd
    "utimensat_time64": ("dirfd", "path", "ptr", "atflags"),
    "file_getattr": ("dirfd", "path", "ptr", "int", "atflags"),
    "file_setattr": ("dirfd", "path", "ptr", "int", "atflags"),
    # --- paths: xattrs (the attribute name is a 'str') -------------------------------
    "setxattr": ("path", "str", "ptr", "int", "int"),
    "lsetxattr": ("path", "str", "ptr", "int", "int"),
    "fsetxattr": ("fd", "str", "ptr", "int", "int"),
    "setxattrat": ("dirfd", "path", "atflags", "str", "ptr", "int"),
    "getxattr": ("path", "str", "ptr", "int"),
    "lgetxattr": ("path", "str", "ptr", "int"),
    "fgetxattr": ("fd", "str", "ptr", "int"),
    "getxattrat": ("dirfd", "path", "atflags", "str", "ptr", "int"),
    "listxattr": ("path", "ptr", "int"),
    "llistxattr": ("path", "ptr", "int"),
    "flistxattr": ("fd", "ptr", "int"),
    "listxattrat": ("dirfd", "path", "atflags", "ptr", "int"),
    "removexattr": ("path", "str"),
    "lremovexattr": ("path", "str"),
    "fremovexattr": ("fd", "str"),
    "removexattrat": ("dirfd", "path", "atflags", "str"),
    # --- paths: names (link, unlink, rename, symlink) ---------------------------------
    "link": ("path", "path"),
    "linkat": ("dirfd", "path", "dirfd", "path", "atflags"),
    "unlink": ("path",),
    "unlinkat": ("dirfd", "path", "atflags"),  # AT_REMOVEDIR
    "rmdir": ("path",),
    "rename": ("path", "path"),
    "renameat": ("dirfd", "path", "dirfd", "path"),
    "renameat2": ("dirfd", "path", "dirfd", "path", "int"),  # RENAME_* flags
    # the symlink target is stored, never resolved: 'str'; only linkpath is a path
    "symlink": ("str", "path"),
    "symlinkat": ("str", "dirfd", "path"),
    # --- paths: process and system ------------------------------------------------------
    "execve": ("path", "ptr", "ptr"),
    "execveat": ("dirfd", "path", "ptr", "ptr", "atflags"),
    "chdir": ("path",),
    "fchdir": ("fd",),
    "chroot": ("path",),
    "pivot_root": ("path", "path"),
    "acct": ("path",),  # NULL turns accounting off
    "swapon": ("path", "int"),
    "swapoff": ("path",),
    "uselib": ("path",),
    "quotactl": ("int", "path", "int", "ptr"),  # block device; NULL for some commands
    "quotactl_fd": ("fd", "int", "int", "ptr"),
    "inotify_add_watch": ("fd", "path", "int"),
    "inotify_rm_watch": ("fd", "int"),
    "fanotify_mark": ("fd", "int", "int", "dirfd", "path"),  # path may be NULL
    "fanotify_init": ("int", "oflags"),
    # --- paths: mounts. mount's source is a path or not depending on fstype: 'str' ----
    "mount": ("str", "path", "str", "int", "ptr"),
    "umount": ("path",),  # i386 oldumount
    "umount2": ("path", "int"),
    "open_tree": ("dirfd", "path", "atflags"),  # AT_* | OPEN_TREE_*
    "open_tree_attr": ("dirfd", "path", "atflags", "ptr", "int"),
    "move_mount": ("dirfd", "path", "dirfd", "path", "int"),  # MOVE_MOUNT_* flags
    "fspick": ("dirfd", "path", "int"),  # FSPICK_* flags
    "mount_setattr": ("dirfd", "path", "atflags", "ptr", "int"),
    "fsopen": ("str", "int"),
    # key, value, aux: value is a path and aux a dirfd for FSCONFIG_SET_PATH*, an fd
    # in aux for FSCONFIG_SET_FD: decided by cmd, so not typed here
    "fsconfig": ("fd", "int", "str", "ptr", "int"),
    "fsmount": ("fd", "int", "int"),
    "statmount": ("ptr", "ptr", "int", "int"),
    "listmount": ("ptr", "ptr", "int", "int"),
    # --- fds: I/O ---------------------------------------------------------------------------
    "read": ("fd", "ptr", "int"),
    "write": ("fd", "ptr", "int"),
    "readv": ("fd", "ptr", "int"),
    "writev": ("fd", "ptr", "int"),
    "pread64": ("fd", "ptr", "int", "int"),
    "pwrite64": ("fd", "ptr", "int", "int"),
    "preadv": ("fd", "ptr", "int", "int", "int"),
    "pwritev": ("fd", "ptr", "int", "int", "int"),
    "preadv2": ("fd", "ptr", "int", "int", "int", "int"),
    "pwritev2": ("fd", "ptr", "int", "int", "int", "int"),
    "lseek": ("fd", "int", "int"),
    "_llseek": ("fd", "int", "int", "ptr", "int"),
    "sendfile": ("fd", "fd", "ptr", "int"),
    "sendfile64": ("fd", "fd", "ptr", "int"),
    "splice": ("fd", "ptr", "fd", "ptr", "int", "int"),
    "tee": ("fd", "fd", "int", "int"),
    "vmsplice": ("fd", "ptr", "int", "int"),
    "copy_file_range": ("fd", "ptr", "fd", "ptr", "int", "int"),
    "readahead": ("fd", "int", "int"),
    "fadvise64": ("fd", "int", "int", "int"),
    "fadvise64_64": ("fd", "int", "int", "int"),
    "fallocate": ("fd", "int", "int", "int"),
    "sync_file_range": ("fd", "int", "int", "int"),
    "cachestat": ("fd", "ptr", "ptr", "int"),
    "getdents": ("fd", "ptr", "int"),
    "getdents64": ("fd", "ptr", "int"),
    "readdir": ("fd", "ptr", "int"),
    # --- fds: metadata and control ----------------------------------------------------------
    "close": ("fd",),
    "close_range": ("int", "int", "int"),  # bounds of a range (last is often ~0U)
    "dup": ("fd",),
    "dup2": ("fd", "fd"),
    "dup3": ("fd", "fd", "oflags"),  # O_CLOEXEC
    "fcntl": ("fd", "int", "int"),  # arg is an int, a pointer or an fd bound per cmd
    "fcntl64": ("fd", "int", "int"),
    "ioctl": ("fd", "int", "int"),
    "flock": ("fd", "int"),
    "fsync": ("fd",),
    "fdatasync": ("fd",),
    "syncfs": ("fd",),
    "fstat": ("fd", "ptr"),
    "oldfstat": ("fd", "ptr"),
    "fstat64": ("fd", "ptr"),
    "fstatfs": ("fd", "ptr"),
    "fstatfs64": ("fd", "int", "ptr"),
    "fchmod": ("fd", "int"),
    "fchown": ("fd", "int", "int"),
    "fchown32": ("fd", "int", "int"),
    "ftruncate": ("fd", "int"),
    "ftruncate64": ("fd", "int"),
    "mmap": ("int", "int", "int", "int", "fd", "int"),
    "mmap2": ("int", "int", "int", "int", "fd", "int"),
    "finit_module": ("fd", "str", "int"),
    "kexec_file_load": ("fd", "fd", "int", "str", "int"),
    "setns": ("fd", "int"),
    "landlock_create_ruleset": ("ptr", "int", "int"),
    "landlock_add_rule": ("fd", "int", "ptr", "int"),
    "landlock_restrict_self": ("fd", "int"),
    # --- fds: new kinds of fd ------------------------------------------------------------
    "pipe": ("ptr",),
    "pipe2": ("ptr", "oflags"),
    "eventfd": ("int",),
    "eventfd2": ("int", "int"),
    "signalfd": ("fd", "ptr", "int"),  # fd -1 creates a new one
    "signalfd4": ("fd", "ptr", "int", "int"),
    "timerfd_create": ("int", "int"),
    "timerfd_gettime": ("fd", "ptr"),
    "timerfd_settime": ("fd", "int", "ptr", "ptr"),
    "timerfd_gettime64": ("fd", "ptr"),
    "timerfd_settime64": ("fd", "int", "ptr", "ptr"),
    "inotify_init": _,
    "inotify_init1": ("int",),
    "epoll_create": ("int",),
    "epoll_create1": ("int",),
    "epoll_ctl": ("fd", "int", "fd", "ptr"),
    "epoll_wait": ("fd", "ptr", "int", "int"),
    "epoll_pwait": ("fd", "ptr", "int", "int", "ptr", "int"),
    "epoll_pwait2": ("fd", "ptr", "int", "ptr", "ptr", "int"),
    "epoll_ctl_old": _,  # never implemented
    "epoll_wait_old": _,
    "memfd_create": ("str", "int"),
    "memfd_secret": ("int",),
    "userfaultfd": ("int",),
    "perf_event_open": ("ptr", "int", "int", "fd", "int"),  # group_fd may be -1
    "bpf": ("int", "ptr", "int"),
    "io_uring_setup": ("int", "ptr"),
    "io_uring_enter": ("fd", "int", "int", "int", "ptr", "int"),
    "io_uring_register": ("fd", "int", "ptr", "int"),
    "pidfd_open": ("int", "int"),
    "pidfd_getfd": ("fd", "int", "int"),  # targetfd lives in the other process
    "pidfd_send_signal": ("fd", "int", "ptr", "int"),
    "process_madvise": ("fd", "ptr", "int", "int", "int"),
    "process_mrelease": ("fd", "int"),
    # --- polling ------------------------------------------------------------------------------
    "poll": ("ptr", "int", "int"),
    "ppoll": ("ptr", "int", "ptr", "ptr", "int"),
    "ppoll_time64": ("ptr", "int", "ptr", "ptr", "int"),
    "select": ("int", "ptr", "ptr", "ptr", "ptr"),
    "_newselect": ("int", "ptr", "ptr", "ptr", "ptr"),
    "pselect6": ("int", "ptr", "ptr", "ptr", "ptr", "ptr"),
    "pselect6_time64": ("int", "ptr", "ptr", "ptr", "ptr", "ptr"),
    # --- sockets ------------------------------------------------------------------------------
    "socket": ("int", "int", "int"),
    "socketpair": ("int", "int", "int", "ptr"),
    "bind": ("fd", "ptr", "int"),
    "connect": ("fd", "ptr", "int"),
    "listen": ("fd", "int"),
    "accept": ("fd", "ptr", "ptr"),
    "accept4": ("fd", "ptr", "ptr", "int"),
    "getsockname": ("fd", "ptr", "ptr"),
    "getpeername": ("fd", "ptr", "ptr"),
    "sendto": ("fd", "ptr", "int", "int", "ptr", "int"),
    "recvfrom": ("fd", "ptr", "int", "int", "ptr", "ptr"),
    "sendmsg": ("fd", "ptr", "int"),
    "recvmsg": ("fd", "ptr", "int"),
    "sendmmsg": ("fd", "ptr", "int", "int"),
    "recvmmsg": ("fd", "ptr", "int", "int", "ptr"),
    "recvmmsg_time64": ("fd", "ptr", "int", "int", "ptr"),
    "shutdown": ("fd", "int"),
    "setsockopt": ("fd", "int", "int", "ptr", "int"),
    "getsockopt": ("fd", "int", "int", "ptr", "ptr"),
    "socketcall": ("int", "ptr"),  # i386: call number, pointer to the real arguments
    "getpmsg": _,  # never implemented (STREAMS)
    "putpmsg": _,
    # --- SysV IPC and POSIX message queues (queue names are not filesystem paths) --------
    "ipc": ("int", "int", "int", "int", "ptr", "int"),
    "semget": ("int", "int", "int"),
    "semctl": ("int", "int", "int", "int"),
    "semop": ("int", "ptr", "int"),
    "semtimedop": ("int", "ptr", "int", "ptr"),
    "semtimedop_time64": ("int", "ptr", "int", "ptr"),
    "msgget": ("int", "int"),
    "msgsnd": ("int", "ptr", "int", "int"),
    "msgrcv": ("int", "ptr", "int", "int", "int"),
    "msgctl": ("int", "int", "ptr"),
    "shmget": ("int", "int", "int"),
    "shmat": ("int", "ptr", "int"),
    "shmdt": ("ptr",),
    "shmctl": ("int", "int", "ptr"),
    "mq_open": ("str", "oflags", "int", "ptr"),
    "mq_unlink": ("str",),
    "mq_timedsend": ("int", "ptr", "int", "int", "ptr"),
    "mq_timedreceive": ("int", "ptr", "int", "ptr", "ptr"),
    "mq_timedsend_time64": ("int", "ptr", "int", "int", "ptr"),
    "mq_timedreceive_time64": ("int", "ptr", "int", "ptr", "ptr"),
    "mq_notify": ("int", "ptr"),
    "mq_getsetattr": ("int", "ptr", "ptr"),
    # --- memory -------------------------------------------------------------------------------
    "brk": ("int",),
    "munmap": ("int", "int"),
    "mremap": ("int", "int", "int", "int", "int"),
    "mprotect": ("int", "int", "int"),
    "pkey_mprotect": ("int", "int", "int", "int"),
    "pkey_alloc": ("int", "int"),
    "pkey_free": ("int",),
    "madvise": ("int", "int", "int"),
    "mincore": ("int", "int", "ptr"),
    "msync": ("int", "int", "int"),
    "mlock": ("int", "int"),
    "mlock2": ("int", "int", "int"),
    "munlock": ("int", "int"),
    "mlockall": ("int",),
    "munlockall": _,
    "remap_file_pages": ("int", "int", "int", "int", "int"),
    "mbind": ("int", "int", "int", "ptr", "int", "int"),
    "get_mempolicy": ("ptr", "ptr", "int", "int", "int"),
    "set_mempolicy": ("int", "ptr", "int"),
    "set_mempolicy_home_node": ("int", "int", "int", "int"),
    "migrate_pages": ("int", "int", "ptr", "ptr"),
    "move_pages": ("int", "int", "ptr", "ptr", "ptr", "int"),
    "map_shadow_stack": ("int", "int", "int"),
    "mseal": ("int", "int", "int"),
    "process_vm_readv": ("int", "ptr", "int", "ptr", "int", "int"),
    "process_vm_writev": ("int", "ptr", "int", "ptr", "int", "int"),
    # --- processes and threads ------------------------------------------------------------
    "fork": _,
    "vfork": _,
    "clone": ("int", "int", "ptr", "ptr", "int"),  # x86: flags, stack, ptid, ctid, tls
    "clone3": ("ptr", "int"),
    "exit": ("int",),
    "exit_group": ("int",),
    "wait4": ("int", "ptr", "int", "ptr"),
    "waitpid": ("int", "ptr", "int"),
    "waitid": ("int", "int", "ptr", "int", "ptr"),
    "kill": ("int", "int"),
    "tkill": ("int", "int"),
    "tgkill": ("int", "int", "int"),
    "getpid": _,
    "getppid": _,
    "gettid": _,
    "getpgid": ("int",),
    "setpgid": ("int", "int"),
    "getpgrp": _,
    "getsid": ("int",),
    "setsid": _,
    "unshare": ("int",),
    "set_tid_address": ("ptr",),
    "set_robust_list": ("ptr", "int"),
    "get_robust_list": ("int", "ptr", "ptr"),
    "rseq": ("ptr", "int", "int", "int"),
    "futex": ("ptr", "int", "int", "ptr", "ptr", "int"),
    "futex_time64": ("ptr", "int", "int", "ptr", "ptr", "int"),
    "futex_waitv": ("ptr", "int", "int", "ptr", "int"),
    "futex_wake": ("ptr", "int", "int", "int"),
    "futex_wait": ("ptr", "int", "int", "int", "ptr", "int"),
    "futex_requeue": ("ptr", "int", "int", "int"),
    "ptrace": ("int", "int", "int", "int"),
    "kcmp": ("int", "int", "int", "int", "int"),  # idx may be an fd of another process
    "prctl": ("int", "int", "int", "int", "int"),
    "arch_prctl": ("int", "int"),
    "personality": ("int",),
    "seccomp": ("int", "int", "ptr"),
    "sched_yield": _,
    "sched_setparam": ("int", "ptr"),
    "sched_getparam": ("int", "ptr"),
    "sched_setscheduler": ("int", "int", "ptr"),
    "sched_getscheduler": ("int",),
    "sched_get_priority_max": ("int",),
    "sched_get_priority_min": ("int",),
    "sched_rr_get_interval": ("int", "ptr"),
    "sched_rr_get_interval_time64": ("int", "ptr"),
    "sched_setaffinity": ("int", "int", "ptr"),
    "sched_getaffinity": ("int", "int", "ptr"),
    "sched_setattr": ("int", "ptr", "int"),
    "sched_getattr": ("int", "ptr", "int", "int"),
    "getpriority": ("int", "int"),
    "setpriority": ("int", "int", "int"),
    "nice": ("int",),
    "ioprio_get": ("int", "int"),
    "ioprio_set": ("int", "int", "int"),
    "getcpu": ("ptr", "ptr", "ptr"),
    "getrlimit": ("int", "ptr"),
    "ugetrlimit": ("int", "ptr"),
    "setrlimit": ("int", "ptr"),
    "prlimit64": ("int", "int", "ptr", "ptr"),
    "getrusage": ("int", "ptr"),
    "times": ("ptr",),
    "umask": ("int",),
    "uretprobe": _,
    "uprobe": _,
    "modify_ldt": ("int", "ptr", "int"),
    "set_thread_area": ("ptr",),
    "get_thread_area": ("ptr",),
    "iopl": ("int",),
    "ioperm": ("int", "int", "int"),
    "vm86": ("int", "ptr"),
    "vm86old": ("ptr",),
    "restart_syscall": _,
    "pause": _,
    # --- signals ------------------------------------------------------------------------------
    "rt_sigaction": ("int", "ptr", "ptr", "int"),
    "rt_sigprocmask": ("int", "ptr", "ptr", "int"),
    "rt_sigpending": ("ptr", "int"),
    "rt_sigsuspend": ("ptr", "int"),
    "rt_sigtimedwait": ("ptr", "ptr", "ptr", "int"),
    "rt_sigtimedwait_time64": ("ptr", "ptr", "ptr", "int"),
    "rt_sigqueueinfo": ("int", "int", "ptr"),
    "rt_tgsigqueueinfo": ("int", "int", "int", "ptr"),
    "rt_sigreturn": _,
    "sigaltstack": ("ptr", "ptr"),
    "sigaction": ("int", "ptr", "ptr"),
    "signal": ("int", "ptr"),
    "sigprocmask": ("int", "ptr", "ptr"),
    "sigpending": ("ptr",),
    "sigsuspend": ("int", "int", "int"),
    "sigreturn": _,
    "sgetmask": _,
    "ssetmask": ("int",),
    # --- identity -----------------------------------------------------------------------------
    "getuid": _,
    "geteuid": _,
    "getgid": _,
    "getegid": _,
    "getuid32": _,
    "geteuid32": _,
    "getgid32": _,
    "getegid32": _,
    "setuid": ("int",),
    "setgid": ("int",),
    "setuid32": ("int",),
    "setgid32": ("int",),
    "setreuid": ("int", "int"),
    "setregid": ("int", "int"),
    "setreuid32": ("int", "int"),
    "setregid32": ("int", "int"),
    "setresuid": ("int", "int", "int"),
    "setresgid": ("int", "int", "int"),
    "setresuid32": ("int", "int", "int"),
    "setresgid32": ("int", "int", "int"),
    "getresuid": ("ptr", "ptr", "ptr"),
    "getresgid": ("ptr", "ptr", "ptr"),
    "getresuid32": ("ptr", "ptr", "ptr"),
    "getresgid32": ("ptr", "ptr", "ptr"),
    "setfsuid": ("int",),
    "setfsgid": ("int",),
    "setfsuid32": ("int",),
    "setfsgid32": ("int",),
    "getgroups": ("int", "ptr"),
    "setgroups": ("int", "ptr"),
    "getgroups32": ("int", "ptr"),
    "setgroups32": ("int", "ptr"),
    "capget": ("ptr", "ptr"),
    "capset": ("ptr", "ptr"),
    "lsm_get_self_attr": ("int", "ptr", "ptr", "int"),
    "lsm_set_self_attr": ("int", "ptr", "int", "int"),
    "lsm_list_modules": ("ptr", "ptr", "int"),
    "listns": ("ptr", "ptr", "int", "int"),
    # --- time ---------------------------------------------------------------------------------
    "time": ("ptr",),
    "stime": ("ptr",),
    "gettimeofday": ("ptr", "ptr"),
    "settimeofday": ("ptr", "ptr"),
    "adjtimex": ("ptr",),
    "clock_gettime": ("int", "ptr"),
    "clock_settime": ("int", "ptr"),
    "clock_getres": ("int", "ptr"),
    "clock_adjtime": ("int", "ptr"),
    "clock_nanosleep": ("int", "int", "ptr", "ptr"),
    "clock_gettime64": ("int", "ptr"),
    "clock_settime64": ("int", "ptr"),
    "clock_getres_time64": ("int", "ptr"),
    "clock_adjtime64": ("int", "ptr"),
    "clock_nanosleep_time64": ("int", "int", "ptr", "ptr"),
    "nanosleep": ("ptr", "ptr"),
    "alarm": ("int",),
    "getitimer": ("int", "ptr"),
    "setitimer": ("int", "ptr", "ptr"),
    "timer_create": ("int", "ptr", "ptr"),
    "timer_settime": ("int", "int", "ptr", "ptr"),
    "timer_gettime": ("int", "ptr"),
    "timer_settime64": ("int", "int", "ptr", "ptr"),
    "timer_gettime64": ("int", "ptr"),
    "timer_getoverrun": ("int",),
    "timer_delete": ("int",),
    # --- system -------------------------------------------------------------------------------
    "uname": ("ptr",),
    "olduname": ("ptr",),
    "oldolduname": ("ptr",),
    "sethostname": ("ptr", "int"),  # length-delimited, not NUL-terminated
    "setdomainname": ("ptr", "int"),
    "sysinfo": ("ptr",),
    "syslog": ("int", "ptr", "int"),
    "sysfs": ("int", "int", "int"),  # arg1 is a string for option 1
    "_sysctl": ("ptr",),
    "ustat": ("int", "ptr"),
    "sync": _,
    "vhangup": _,
    "reboot": ("int", "int", "int", "ptr"),
    "kexec_load": ("int", "int", "ptr", "int"),
    "init_module": ("ptr", "int", "str"),
    "delete_module": ("str", "int"),
    "create_module": ("str", "int"),
    "query_module": ("str", "int", "ptr", "int", "ptr"),
    "get_kernel_syms": ("ptr",),
    "nfsservctl": ("int", "ptr", "ptr"),
    "add_key": ("str", "str", "ptr", "int", "int"),
    "request_key": ("str", "str", "str", "int"),
    "keyctl": ("int", "int", "int", "int", "int"),
    "io_setup": ("int", "ptr"),
    "io_destroy": ("int",),
    "io_submit": ("int", "int", "ptr"),
    "io_cancel": ("int", "ptr", "ptr"),
    "io_getevents": ("int", "int", "int", "ptr", "ptr"),
    "io_pgetevents": ("int", "int", "int", "ptr", "ptr", "ptr"),
    "io_pgetevents_time64": ("int", "int", "int", "ptr", "ptr", "ptr"),
    "lookup_dcookie": ("int", "ptr", "int"),
    "membarrier": ("int", "int", "int"),
    "getrandom": ("ptr", "int", "int"),
    "bdflush": ("int", "int"),
    # never implemented on x86 (sys_ni_syscall): no arguments worth decoding
    "afs_syscall": _,
    "break": _,
    "ftime": _,
    "gtty": _,
    "stty": _,
    "idle": _,
    "lock": _,
    "mpx": _,
    "prof": _,
    "profil": _,
    "ulimit": _,
    "security": _,
    "tuxcall": _,
    "vserver": _,
}

# i386 layouts that differ from SIGNATURES: a 64-bit argument takes two registers (low
# word first), and the old 'mmap' (old_mmap) and 'select' (old_select) take one pointer
# to a block holding the real arguments.
I386_SIGNATURES: dict[str, tuple[str, ...]] = {
    "mmap": ("ptr",),
    "select": ("ptr",),
    "fanotify_mark": ("fd", "int", "int", "int", "dirfd", "path"),
    "pread64": ("fd", "ptr", "int", "int", "int"),
    "pwrite64": ("fd", "ptr", "int", "int", "int"),
    "truncate64": ("path", "int", "int"),
    "ftruncate64": ("fd", "int", "int"),
    "readahead": ("fd", "int", "int", "int"),
    "fadvise64": ("fd", "int", "int", "int", "int"),
    "fadvise64_64": ("fd", "int", "int", "int", "int", "int"),
    "fallocate": ("fd", "int", "int", "int", "int", "int"),
    "sync_file_range": ("fd", "int", "int", "int", "int", "int"),
    "lookup_dcookie": ("int", "int", "ptr", "int"),
}


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


# How a call decides not to follow a symlink in the last component of its path(s).
# A call not listed here always follows. Rules:
#   ("always",)               never follows (acts on the link, or creates the name)
#   ("if_set", arg, mask)     does not follow when args[arg] & mask
#   ("unless_set", arg, mask) follows only when args[arg] & mask
#   ("oflags", arg)           O_NOFOLLOW in args[arg], or O_CREAT|O_EXCL both set
#   ("open_how", arg)         struct open_how at args[arg]: O_NOFOLLOW in .flags or
#                             RESOLVE_NO_SYMLINKS in .resolve (the caller reads it)
# A rule applies to every path argument of the call unless NOFOLLOW_ARG overrides it.
ALWAYS = ("always",)
NOFOLLOW: dict[str, tuple] = {
    # act on the link itself
    "lstat": ALWAYS, "lstat64": ALWAYS, "oldlstat": ALWAYS,
    "lchown": ALWAYS, "lchown32": ALWAYS,
    "lgetxattr": ALWAYS, "lsetxattr": ALWAYS, "llistxattr": ALWAYS, "lremovexattr": ALWAYS,
    "readlink": ALWAYS, "readlinkat": ALWAYS,
    # remove or rename the name; link(2) does not follow oldpath on Linux
    "unlink": ALWAYS, "unlinkat": ALWAYS, "rmdir": ALWAYS,
    "rename": ALWAYS, "renameat": ALWAYS, "renameat2": ALWAYS, "link": ALWAYS,
    # create the name (a dangling symlink there gives EEXIST, it is not followed)
    "mkdir": ALWAYS, "mkdirat": ALWAYS, "mknod": ALWAYS, "mknodat": ALWAYS,
    "symlink": ALWAYS, "symlinkat": ALWAYS,
    # open family
    "open": ("oflags", 1),
    "openat": ("oflags", 2),
    "openat2": ("open_how", 2),
    # *at calls with AT_SYMLINK_NOFOLLOW
    "newfstatat": ("if_set", 3, AT_SYMLINK_NOFOLLOW),
    "fstatat64": ("if_set", 3, AT_SYMLINK_NOFOLLOW),
    "statx": ("if_set", 2, AT_SYMLINK_NOFOLLOW),
    "faccessat2": ("if_set", 3, AT_SYMLINK_NOFOLLOW),
    "fchmodat2": ("if_set", 3, AT_SYMLINK_NOFOLLOW),
    "fchownat": ("if_set", 4, AT_SYMLINK_NOFOLLOW),
    "utimensat": ("if_set", 3, AT_SYMLINK_NOFOLLOW),
    "utimensat_time64": ("if_set", 3, AT_SYMLINK_NOFOLLOW),
    "execveat": ("if_set", 4, AT_SYMLINK_NOFOLLOW),  # ELOOP on a symlink
    "setxattrat": ("if_set", 2, AT_SYMLINK_NOFOLLOW),
    "getxattrat": ("if_set", 2, AT_SYMLINK_NOFOLLOW),
    "listxattrat": ("if_set", 2, AT_SYMLINK_NOFOLLOW),
    "removexattrat": ("if_set", 2, AT_SYMLINK_NOFOLLOW),
    "file_getattr": ("if_set", 4, AT_SYMLINK_NOFOLLOW),
    "file_setattr": ("if_set", 4, AT_SYMLINK_NOFOLLOW),
    "open_tree": ("if_set", 2, AT_SYMLINK_NOFOLLOW),
    "open_tree_attr": ("if_set", 2, AT_SYMLINK_NOFOLLOW),
    "mount_setattr": ("if_set", 2, AT_SYMLINK_NOFOLLOW),
    # calls whose default is not to follow
    "linkat": ("unless_set", 4, AT_SYMLINK_FOLLOW),
    "name_to_handle_at": ("unless_set", 4, AT_SYMLINK_FOLLOW),
    "move_mount": ("unless_set", 4, 0x01),  # MOVE_MOUNT_F_SYMLINKS (from path)
    # flags of their own
    "umount2": ("if_set", 1, 0x8),  # UMOUNT_NOFOLLOW
    "fspick": ("if_set", 2, 0x2),  # FSPICK_SYMLINK_NOFOLLOW
    "inotify_add_watch": ("if_set", 2, 0x01000000),  # IN_DONT_FOLLOW
    "fanotify_mark": ("if_set", 1, 0x04),  # FAN_MARK_DONT_FOLLOW
}
# (name, path_index) -> rule, where one path of a call differs from the call's rule.
NOFOLLOW_ARG: dict[tuple[str, int], tuple] = {
    ("linkat", 3): ALWAYS,  # newpath is created
    ("move_mount", 3): ("unless_set", 4, 0x10),  # MOVE_MOUNT_T_SYMLINKS (to path)
}


def nofollow_rule(name, path_index):
    """Return the NOFOLLOW rule for one path argument, or None if it always follows."""
    return NOFOLLOW_ARG.get((name, path_index), NOFOLLOW.get(name))


# Path calls that may modify the file system: under a layered mount (viewfs merge,
# cow, mincow) the C core hands these to Python, which copies up or records a
# whiteout; every other path call there runs on the real (lower) tree natively.
# Rules (UM_WRITE_* of umview/core.h):
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
# (a detached copy) and name_to_handle_at. READ_ONLY lists them all, so that a path call
# added to SIGNATURES must be put on one side (a unit test checks).
WRITES: dict[str, tuple] = {
    "open": ("oflags", 1), "openat": ("oflags", 2), "openat2": ("open_how", 2),
    "creat": ALWAYS,
    "mkdir": ALWAYS, "mkdirat": ALWAYS, "mknod": ALWAYS, "mknodat": ALWAYS,
    "link": ALWAYS, "linkat": ALWAYS, "symlink": ALWAYS, "symlinkat": ALWAYS,
    "unlink": ALWAYS, "unlinkat": ALWAYS, "rmdir": ALWAYS,
    "rename": ALWAYS, "renameat": ALWAYS, "renameat2": ALWAYS,
    "chmod": ALWAYS, "fchmodat": ALWAYS, "fchmodat2": ALWAYS,
    "chown": ALWAYS, "lchown": ALWAYS, "chown32": ALWAYS, "lchown32": ALWAYS, "fchownat": ALWAYS,
    "truncate": ALWAYS, "truncate64": ALWAYS,
    "utime": ALWAYS, "utimes": ALWAYS, "futimesat": ALWAYS,
    "utimensat": ALWAYS, "utimensat_time64": ALWAYS,
    "file_setattr": ALWAYS,
    "setxattr": ALWAYS, "lsetxattr": ALWAYS, "setxattrat": ALWAYS,
    "removexattr": ALWAYS, "lremovexattr": ALWAYS, "removexattrat": ALWAYS,
    "mount": ALWAYS, "umount": ALWAYS, "umount2": ALWAYS, "pivot_root": ALWAYS,
    "move_mount": ALWAYS, "mount_setattr": ALWAYS, "fspick": ALWAYS,
    "acct": ALWAYS, "swapon": ALWAYS, "swapoff": ALWAYS, "quotactl": ALWAYS,
    "access": ("access", 1), "faccessat": ("access", 2), "faccessat2": ("access", 2),
}
# Path slots (0: the call's first path argument, 1: its second) that name an entry the
# call makes, removes or renames. The kernel walks their parent and checks the last
# component itself (fs/namei.c, filename_parentat and filename_create): "." and ".."
# there fail (rmdir: EINVAL, ENOTEMPTY; unlink: EISDIR; rename: EBUSY; a call that makes
# the name: EEXIST), so does "/" (EBUSY), and a mount point is busy. A view must not
# turn "d/." into "d" for them.
NAMES: dict[str, tuple[int, ...]] = {
    "mkdir": (0,), "mkdirat": (0,), "mknod": (0,), "mknodat": (0,),
    "symlink": (0,), "symlinkat": (0,), "link": (1,), "linkat": (1,),
    "unlink": (0,), "unlinkat": (0,), "rmdir": (0,),
    "rename": (0, 1), "renameat": (0, 1), "renameat2": (0, 1),
}
# calls whose path becomes the cwd: under a layered prefix a merged directory is
# entered at its lower path, which is the view's (UM_CLAIM_CHDIR)
CWD_SETTERS = frozenset({"chdir"})
READ_ONLY = frozenset({
    "stat", "lstat", "oldstat", "oldlstat", "stat64",
    "lstat64", "newfstatat", "fstatat64", "statx", "statfs", "statfs64", "readlink",
    "readlinkat", "getxattr", "lgetxattr", "getxattrat", "listxattr", "llistxattr",
    "listxattrat", "file_getattr", "execve", "execveat", "chdir", "chroot", "uselib",
    "inotify_add_watch", "fanotify_mark", "name_to_handle_at", "open_tree", "open_tree_attr",
})


# x86_64 name -> i386-only names doing the same job with another layout or number, so
# that an engine claiming the x86_64 name also traps these on i386. Same-named calls
# with an old layout (i386 'mmap' = old_mmap, 'select' = old_select) are in
# I386_SIGNATURES instead. socketcall and ipc multiplex a whole family each.
_SOCKETCALL = ("socketcall",)
_IPC = ("ipc",)
I386_VARIANTS: dict[str, tuple[str, ...]] = {
    # files
    "stat": ("stat64", "oldstat"),
    "lstat": ("lstat64", "oldlstat"),
    "fstat": ("fstat64", "oldfstat"),
    "newfstatat": ("fstatat64",),
    "statfs": ("statfs64",),
    "fstatfs": ("fstatfs64",),
    "chown": ("chown32",),
    "lchown": ("lchown32",),
    "fchown": ("fchown32",),
    "truncate": ("truncate64",),
    "ftruncate": ("ftruncate64",),
    "fcntl": ("fcntl64",),
    "lseek": ("_llseek",),
    "getdents": ("readdir",),
    "sendfile": ("sendfile64",),
    "fadvise64": ("fadvise64_64",),
    "utimensat": ("utimensat_time64",),
    "umount2": ("umount",),
    "mmap": ("mmap2",),
    # polling and waiting
    "select": ("_newselect",),
    "pselect6": ("pselect6_time64",),
    "ppoll": ("ppoll_time64",),
    "futex": ("futex_time64",),
    "io_pgetevents": ("io_pgetevents_time64",),
    "wait4": ("waitpid",),
    # identity
    "getuid": ("getuid32",),
    "geteuid": ("geteuid32",),
    "getgid": ("getgid32",),
    "getegid": ("getegid32",),
    "setuid": ("setuid32",),
    "setgid": ("setgid32",),
    "setreuid": ("setreuid32",),
    "setregid": ("setregid32",),
    "setresuid": ("setresuid32",),
    "setresgid": ("setresgid32",),
    "getresuid": ("getresuid32",),
    "getresgid": ("getresgid32",),
    "setfsuid": ("setfsuid32",),
    "setfsgid": ("setfsgid32",),
    "getgroups": ("getgroups32",),
    "setgroups": ("setgroups32",),
    # system and process
    "uname": ("olduname", "oldolduname"),
    "getrlimit": ("ugetrlimit",),
    "setpriority": ("nice",),
    # signals
    "rt_sigaction": ("sigaction", "signal"),
    "rt_sigprocmask": ("sigprocmask", "sgetmask", "ssetmask"),
    "rt_sigpending": ("sigpending",),
    "rt_sigsuspend": ("sigsuspend",),
    "rt_sigreturn": ("sigreturn",),
    "rt_sigtimedwait": ("rt_sigtimedwait_time64",),
    # time (the *_time64 calls take 64-bit time_t on i386)
    "settimeofday": ("stime",),
    "clock_gettime": ("clock_gettime64",),
    "clock_settime": ("clock_settime64",),
    "clock_getres": ("clock_getres_time64",),
    "clock_adjtime": ("clock_adjtime64",),
    "clock_nanosleep": ("clock_nanosleep_time64",),
    "timer_gettime": ("timer_gettime64",),
    "timer_settime": ("timer_settime64",),
    "timerfd_gettime": ("timerfd_gettime64",),
    "timerfd_settime": ("timerfd_settime64",),
    "sched_rr_get_interval": ("sched_rr_get_interval_time64",),
    "mq_timedsend": ("mq_timedsend_time64",),
    "mq_timedreceive": ("mq_timedreceive_time64",),
    # sockets: i386 has direct calls since Linux 4.3, but libc may still use socketcall
    "socket": _SOCKETCALL,
    "socketpair": _SOCKETCALL,
    "bind": _SOCKETCALL,
    "connect": _SOCKETCALL,
    "listen": _SOCKETCALL,
    "accept": _SOCKETCALL,
    "accept4": _SOCKETCALL,
    "getsockname": _SOCKETCALL,
    "getpeername": _SOCKETCALL,
    "sendto": _SOCKETCALL,
    "recvfrom": _SOCKETCALL,
    "sendmsg": _SOCKETCALL,
    "recvmsg": _SOCKETCALL,
    "sendmmsg": _SOCKETCALL,
    "recvmmsg": ("socketcall", "recvmmsg_time64"),
    "shutdown": _SOCKETCALL,
    "setsockopt": _SOCKETCALL,
    "getsockopt": _SOCKETCALL,
    # SysV IPC: direct calls since Linux 5.1, ipc(2) multiplexes them all
    "semget": _IPC,
    "semctl": _IPC,
    "semop": _IPC,
    "semtimedop": ("ipc", "semtimedop_time64"),
    "msgget": _IPC,
    "msgsnd": _IPC,
    "msgrcv": _IPC,
    "msgctl": _IPC,
    "shmget": _IPC,
    "shmat": _IPC,
    "shmdt": _IPC,
    "shmctl": _IPC,
}

# i386-only names with no x86_64 counterpart: never implemented (sys_ni_syscall) or
# without an x86_64 equivalent.
I386_ONLY: tuple[str, ...] = (
    "bdflush", "break", "ftime", "gtty", "idle", "lock", "mpx", "prof", "profil",
    "stty", "ulimit", "vm86", "vm86old",
)

# x32 names are a subset of the x86_64 names (its calls 512-547 have x86_64 names with
# x32 layouts and numbers), so nothing to map today. Kept for symmetry and checked by test.
X32_VARIANTS: dict[str, tuple[str, ...]] = {}
X32_ONLY: tuple[str, ...] = ()


# Calls whose flags argument may carry AT_EMPTY_PATH: an empty path then means the
# dirfd itself. name -> index of that flags argument.
EMPTY_PATH_FLAGS: dict[str, int] = {
    "newfstatat": 3, "fstatat64": 3, "statx": 2, "fchownat": 4, "linkat": 4,
    "name_to_handle_at": 4, "execveat": 4, "open_tree": 2, "fchmodat2": 3,
    "utimensat": 3, "faccessat2": 3, "mount_setattr": 2, "open_tree_attr": 2,
    "getxattrat": 2, "setxattrat": 2, "listxattrat": 2, "removexattrat": 2,
}


# --- argument names ---------------------------------------------------------------------
# Engines read arguments by name (``call.mode``, ``call.flags``), whatever the ABI. A
# call not listed names its arguments after their kinds: path, dirfd, fd, flags (oflags
# and atflags), string (str), ptr, and argN for a plain int; a kind seen twice gets a
# 2 on the second (path, path2). I386_ARG_NAMES follows I386_SIGNATURES: a 64-bit value
# split over two registers is NAME_lo and NAME_hi, and ``call.NAME`` joins them.
_STAT = ("path", "statbuf")
_CHOWN = ("path", "uid", "gid")
_XATTR_SET = ("path", "attr", "value", "size", "flags")
_XATTR_GET = ("path", "attr", "value", "size")
ARG_NAMES: dict[str, tuple[str, ...]] = {
    "open": ("path", "flags", "mode"),
    "openat": ("dirfd", "path", "flags", "mode"),
    "openat2": ("dirfd", "path", "how", "size"),
    "creat": ("path", "mode"),
    "open_by_handle_at": ("mount_fd", "handle", "flags"),
    "name_to_handle_at": ("dirfd", "path", "handle", "mount_id", "flags"),
    "mkdir": ("path", "mode"),
    "mkdirat": ("dirfd", "path", "mode"),
    "mknod": ("path", "mode", "dev"),
    "mknodat": ("dirfd", "path", "mode", "dev"),
    "stat": _STAT, "lstat": _STAT, "oldstat": _STAT, "oldlstat": _STAT, "stat64": _STAT,
    "lstat64": _STAT,
    "newfstatat": ("dirfd", "path", "statbuf", "flags"),
    "fstatat64": ("dirfd", "path", "statbuf", "flags"),
    "statx": ("dirfd", "path", "flags", "mask", "statxbuf"),
    "statfs": ("path", "buf"),
    "statfs64": ("path", "size", "buf"),
    "access": ("path", "mode"),
    "faccessat": ("dirfd", "path", "mode"),
    "faccessat2": ("dirfd", "path", "mode", "flags"),
    "readlink": ("path", "buf", "size"),
    "readlinkat": ("dirfd", "path", "buf", "size"),
    "getcwd": ("buf", "size"),
    "chmod": ("path", "mode"),
    "fchmodat": ("dirfd", "path", "mode"),
    "fchmodat2": ("dirfd", "path", "mode", "flags"),
    "fchmod": ("fd", "mode"),
    "chown": _CHOWN, "lchown": _CHOWN, "chown32": _CHOWN, "lchown32": _CHOWN,
    "fchownat": ("dirfd", "path", "uid", "gid", "flags"),
    "fchown": ("fd", "uid", "gid"),
    "fchown32": ("fd", "uid", "gid"),
    "truncate": ("path", "length"),
    "truncate64": ("path", "length"),
    "ftruncate": ("fd", "length"),
    "ftruncate64": ("fd", "length"),
    "utime": ("path", "times"),
    "utimes": ("path", "times"),
    "futimesat": ("dirfd", "path", "times"),
    "utimensat": ("dirfd", "path", "times", "flags"),
    "utimensat_time64": ("dirfd", "path", "times", "flags"),
    "setxattr": _XATTR_SET, "lsetxattr": _XATTR_SET,
    "fsetxattr": ("fd", "attr", "value", "size", "flags"),
    "getxattr": _XATTR_GET, "lgetxattr": _XATTR_GET,
    "fgetxattr": ("fd", "attr", "value", "size"),
    "removexattr": ("path", "attr"), "lremovexattr": ("path", "attr"),
    "fremovexattr": ("fd", "attr"),
    "link": ("oldpath", "newpath"),
    "linkat": ("olddirfd", "oldpath", "newdirfd", "newpath", "flags"),
    "unlink": ("path",),
    "unlinkat": ("dirfd", "path", "flags"),
    "rmdir": ("path",),
    "rename": ("oldpath", "newpath"),
    "renameat": ("olddirfd", "oldpath", "newdirfd", "newpath"),
    "renameat2": ("olddirfd", "oldpath", "newdirfd", "newpath", "flags"),
    "symlink": ("target", "linkpath"),
    "symlinkat": ("target", "newdirfd", "linkpath"),
    "execve": ("path", "argv", "envp"),
    "execveat": ("dirfd", "path", "argv", "envp", "flags"),
    "chdir": ("path",),
    "fchdir": ("fd",),
    "chroot": ("path",),
    "inotify_add_watch": ("fd", "path", "mask"),
    "fanotify_mark": ("fd", "flags", "mask", "dirfd", "path"),
    "mount": ("source", "target", "fstype", "flags", "data"),
    "umount": ("target",),
    "umount2": ("target", "flags"),
    "read": ("fd", "buf", "count"),
    "write": ("fd", "buf", "count"),
    "getdents": ("fd", "dirp", "count"),
    "getdents64": ("fd", "dirp", "count"),
    "close": ("fd",),
    "dup": ("fd",),
    "dup2": ("fd", "newfd"),
    "dup3": ("fd", "newfd", "flags"),
    "fcntl": ("fd", "cmd", "cmdarg"),
    "fcntl64": ("fd", "cmd", "cmdarg"),
    "ioctl": ("fd", "request", "argp"),
    "socket": ("domain", "type", "protocol"),
    "socketpair": ("domain", "type", "protocol", "sv"),
    "bind": ("fd", "addr", "addrlen"),
    "connect": ("fd", "addr", "addrlen"),
    "socketcall": ("call", "argp"),
    "kill": ("pid", "sig"),
    "ptrace": ("request", "pid", "addr", "data"),
    "seccomp": ("op", "flags", "uargs"),
    "unshare": ("flags",),
    "clone": ("flags", "stack", "parent_tid", "child_tid", "tls"),
    "uname": ("buf",),
    "olduname": ("buf",),
    "oldolduname": ("buf",),
    "sethostname": ("buf", "len"),
    "setdomainname": ("buf", "len"),
    "time": ("tloc",),
    "stime": ("tptr",),
    "gettimeofday": ("tv", "tz"),
    "settimeofday": ("tv", "tz"),
    "adjtimex": ("buf",),
    "clock_gettime": ("clock", "tp"),
    "clock_gettime64": ("clock", "tp"),
    "clock_settime": ("clock", "tp"),
    "clock_settime64": ("clock", "tp"),
    "clock_adjtime": ("clock", "buf"),
    "clock_adjtime64": ("clock", "buf"),
    "clock_nanosleep": ("clock", "flags", "rqtp", "rmtp"),
    "clock_nanosleep_time64": ("clock", "flags", "rqtp", "rmtp"),
    "timerfd_settime": ("fd", "flags", "new", "old"),
    "timerfd_settime64": ("fd", "flags", "new", "old"),
    "timer_settime": ("timer", "flags", "new", "old"),
    "timer_settime64": ("timer", "flags", "new", "old"),
    "futex": ("uaddr", "op", "val", "timeout", "uaddr2", "val3"),
    "futex_time64": ("uaddr", "op", "val", "timeout", "uaddr2", "val3"),
    "futex_wait": ("uaddr", "val", "mask", "flags", "timeout", "clockid"),
    "futex_waitv": ("waiters", "nr_futexes", "flags", "timeout", "clockid"),
    "mq_timedsend": ("mqdes", "msg_ptr", "msg_len", "msg_prio", "abs_timeout"),
    "mq_timedsend_time64": ("mqdes", "msg_ptr", "msg_len", "msg_prio", "abs_timeout"),
    "mq_timedreceive": ("mqdes", "msg_ptr", "msg_len", "msg_prio", "abs_timeout"),
    "mq_timedreceive_time64": ("mqdes", "msg_ptr", "msg_len", "msg_prio", "abs_timeout"),
    "getrandom": ("buf", "count", "flags"),
    # identity (the 16-bit i386 calls name theirs alike: their ids are the low 16 bits)
    "setuid": ("uid",), "setuid32": ("uid",), "setgid": ("gid",), "setgid32": ("gid",),
    "setfsuid": ("uid",), "setfsuid32": ("uid",), "setfsgid": ("gid",), "setfsgid32": ("gid",),
    "setreuid": ("ruid", "euid"), "setreuid32": ("ruid", "euid"),
    "setregid": ("rgid", "egid"), "setregid32": ("rgid", "egid"),
    "setresuid": ("ruid", "euid", "suid"), "setresuid32": ("ruid", "euid", "suid"),
    "setresgid": ("rgid", "egid", "sgid"), "setresgid32": ("rgid", "egid", "sgid"),
    "getresuid": ("ruidp", "euidp", "suidp"), "getresuid32": ("ruidp", "euidp", "suidp"),
    "getresgid": ("rgidp", "egidp", "sgidp"), "getresgid32": ("rgidp", "egidp", "sgidp"),
    "getgroups": ("ngroups", "list"), "getgroups32": ("ngroups", "list"),
    "setgroups": ("ngroups", "list"), "setgroups32": ("ngroups", "list"),
}
I386_ARG_NAMES: dict[str, tuple[str, ...]] = {
    "fanotify_mark": ("fd", "flags", "mask_lo", "mask_hi", "dirfd", "path"),
    "pread64": ("fd", "buf", "count", "pos_lo", "pos_hi"),
    "pwrite64": ("fd", "buf", "count", "pos_lo", "pos_hi"),
    "truncate64": ("path", "length_lo", "length_hi"),
    "ftruncate64": ("fd", "length_lo", "length_hi"),
}
# Plain int arguments that the kernel reads as 32-bit C ints (flags, modes, ids): their
# decoded value is the register's low 32 bits on every ABI, as the kernel sees it.
INT32_NAMES = frozenset({
    "mode", "dev", "uid", "gid", "ruid", "euid", "suid", "rgid", "egid", "sgid", "ngroups",
    "domain", "type", "protocol", "sig", "cmd", "op",
    "addrlen", "call", "request", "clock", "clockid", "timer", "len", "mqdes",
})


# --- trace classes (strace's -e trace=%CLASS) -------------------------------------------
# %file and %desc are derived from the argument kinds (a path, an fd); the others are
# listed.
PROCESS_CALLS = frozenset({
    "clone", "clone3", "fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4",
    "waitpid", "waitid", "kill", "tkill", "tgkill", "pidfd_open", "pidfd_send_signal",
    "rt_sigqueueinfo", "rt_tgsigqueueinfo", "unshare", "setns",
})
NETWORK_CALLS = frozenset({
    "socket", "socketpair", "bind", "listen", "accept", "accept4", "connect", "getsockname",
    "getpeername", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
    "shutdown", "setsockopt", "getsockopt", "socketcall",
})
