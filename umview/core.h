/* core.h - the C core of umview: the ptrace loop, the seccomp filter, the
 * fast path that decides without Python, and tracee memory/register access.
 *
 * Policy lives in Python. Python fills the tables below (syscall numbers per
 * ABI, what each neutral syscall's arguments are, which calls are claimed and
 * how, the path-prefix table) and then calls um_next() in a loop: C runs the
 * tracees and returns only for events Python asked for.
 *
 * This header is also the cffi cdef (build_core.py strips the preprocessor
 * lines), so it holds declarations only, in plain C that cffi can parse.
 */

#define UM_CORE_VERSION 31

/* ABIs, as decoded from ptrace_syscall_info.arch and the number */
#define UM_ABI_X86_64 0
#define UM_ABI_I386 1
#define UM_ABI_X32 2
#define UM_NABI 3

/* how a neutral syscall is claimed (a bit set; 0 = nobody cares) */
#define UM_CLAIM_ALL 1    /* every call goes to Python */
#define UM_CLAIM_PATH 2   /* calls with a path argument under a prefix of the table */
#define UM_CLAIM_REFUSE 4 /* refuse with ENOSYS (a variant no engine can decode) */
#define UM_CLAIM_FD 8     /* calls whose fd (argument 0) is a file under a plain prefix */
#define UM_CLAIM_VCWD 16  /* calls of threads whose cwd is virtual (um_set_vcwd) */
#define UM_CLAIM_FAMILY 32 /* socket calls whose family (argument 0) is in the family set
                            * (um_set_families; a family outside 0..63 always) */
#define UM_CLAIM_NOTIFY 64 /* with UM_TRAP_NOTIF: a call that needs Python is handed over
                            * as the notification itself (UM_EV_NOTIF), not redirected */
#define UM_CLAIM_UNIXADDR 128 /* bind/connect whose address (args[1], length args[2]) is an
                               * AF_UNIX path (not abstract): an unreadable one stays the kernel's */
#define UM_CLAIM_CREDS 256 /* a call that may change what the kernel checks a process's
                           * access with (setuid, setgroups, capset, unshare, setns,
                           * landlock_restrict_self...): C serves no call of that
                           * thread again before it has looked at it anew */
#define UM_CLAIM_SOCKNAME 1024 /* calls that give back a socket's address (getsockname,
                                * getpeername, accept): to Python only once the view has
                                * bound an AF_UNIX name it rewrote (um_set_socknames) */
#define UM_CLAIM_CHDIR 2048 /* with UM_CLAIM_PATH, a call that makes its path the cwd
                             * (chdir): a merged directory of a layered prefix
                             * (UM_LAYER_DIR) is entered natively, its lower path being
                             * the view's (syscalls/table.py CWD_SETTERS) */
#define UM_CLAIM_EXEC 512  /* with UM_CLAIM_PATH, an exec: its #! interpreter or ELF loader
                            * (PT_INTERP) is checked as its path is (Engine.exec_syscalls) */

/* how the filter traps a number: a ptrace stop, or a seccomp user
 * notification (for calls C decides alone; see docs/internals.md) */
#define UM_TRAP_TRACE 1
#define UM_TRAP_NOTIF 2
#define UM_TRAP_NOTIF_RW 3 /* a notification, but a ptrace stop when the call's open flags
                            * (its UM_WRITE_OFLAGS argument, um_set_write) ask to write: a
                            * write under a layered prefix needs Python, which a notification
                            * reaches only through an interrupt and a second entry stop */
#define UM_TRAP_VALUES 4 /* a ptrace stop only where the low word of one argument is one of
                          * the values um_filter_trap_values gave (the ioctl requests that
                          * change a file through any fd); the call runs unseen otherwise */
#define UM_TRAP_NOTIF_VALUES 5 /* a notification where the low word of one argument is one of
                                * the values (um_inner_notif), the call let run otherwise */
#define UM_TRAP_NOTIF_VALUES_TRACE 6 /* the same, but a ptrace stop otherwise */
#define UM_MAX_TRAP_VALUES 16

/* event kinds returned by um_next() */
#define UM_EV_DONE 0         /* no tracee left */
#define UM_EV_SYSCALL 1      /* a claimed call at its entry (seccomp stop) */
#define UM_EV_SYSCALL_EXIT 2 /* the exit of a call Python asked to see */
#define UM_EV_FORK 3         /* a new tracee: msg = new tid, flags: UM_FORK_* */
#define UM_EV_EXEC 4         /* tid execed; msg = former tid */
#define UM_EV_EXIT 5         /* tid is gone; status = its wait status; with UM_INNER_EVENT, msg =
                              * the parent of the zombie it left (0: none, reaped already) */
#define UM_EV_ERROR 6        /* waitpid failed unexpectedly; msg = errno */
#define UM_EV_NOTIF 7        /* a claimed call waiting as a user notification (UM_CLAIM_NOTIFY):
                              * abi, sc, nr, args, ip as at UM_EV_SYSCALL; no ptrace stop, so
                              * no um_inject, no register access; replies: CONTINUE, SKIP,
                              * REDIRECT; um_notif_addfd completes it with an fd */
#define UM_EV_STOP 8         /* a stop of a thread Python watches (um_set_inner): status is the
                              * wait status the monitor got; msg is the ptrace event message at
                              * an event stop, UM_STOP_ENTRY / UM_STOP_EXIT at a syscall stop
                              * (then abi, nr, args, rval are filled). Reply: CONTINUE (C resumes
                              * it as it would have: a signal is delivered) or, with UM_HOLD in
                              * flags, leave it stopped for um_resume / um_decide_stopped. */

#define UM_PATH_BUF 4097 /* a path of PATH_MAX bytes and its NUL */
#define UM_PATH_SLOTS 2  /* path arguments of a call, at most (rename, link, ...) */

#define UM_FORK_THREAD 1
#define UM_FORK_VFORK 2
#define UM_FORK_HELD 8 /* internal: the child waits for this event's reply */
#define UM_FORK_RAN 128 /* the child was let run before this event (its first stop is past) */
#define UM_EXIT_AFTER_EXEC 4 /* ev->flags at UM_EV_SYSCALL_EXIT: the call execed */
#define UM_FROM_ENTRY 16     /* internal: a UM_EV_SYSCALL taken at a syscall-entry stop */
#define UM_HOLD 32           /* Python sets it in ev->flags at UM_EV_STOP, UM_EV_SYSCALL_EXIT,
                              * UM_EV_FORK and UM_EV_EXEC: do what the reply says but leave the
                              * thread stopped (an inner tracer's stop); um_resume ends it */
#define UM_INNER_EVENT 64    /* ev->flags at UM_EV_FORK/EXEC/EXIT: the thread has an inner tracer */
#define UM_STOP_ENTRY 1      /* ev->msg at a UM_EV_STOP syscall stop */
#define UM_STOP_EXIT 2
#define UM_STOP_STEP 3       /* a syscall-exit stop of a single-stepped thread: natively its step's trap */

/* which optional events Python wants (um_set_event_mask) */
#define UM_WANT_FORK 1
#define UM_WANT_EXEC 2
#define UM_WANT_EXIT 4

/* replies Python gives to a UM_EV_SYSCALL / UM_EV_SYSCALL_EXIT event */
#define UM_REPLY_CONTINUE 0       /* run it, no exit stop */
#define UM_REPLY_CONTINUE_AFTER 1 /* run it and report UM_EV_SYSCALL_EXIT */
#define UM_REPLY_SKIP 2           /* do not run it; the tracee gets ev->rval */
#define UM_REPLY_REDIRECT 3       /* UM_EV_NOTIF only: interrupt the thread and take the
                                   * call again at a ptrace stop (UM_EV_SYSCALL) */

/* ev->changed bits: what Python modified in the event */
#define UM_CHANGED_ARGS 1
#define UM_CHANGED_NR 2
#define UM_CHANGED_RVAL 4

struct um_event {
    int kind;
    int tid;
    int abi;
    int sc;              /* neutral syscall index, -1 if unknown */
    long nr;             /* number as the kernel sees it */
    uint64_t args[6];
    int64_t rval;        /* result at exit; result to give on SKIP */
    uint64_t ip;
    uint64_t sp;
    int status;          /* wait status for UM_EV_EXIT */
    long msg;            /* event message (new tid, former tid, errno) */
    int flags;
    /* At UM_EV_SYSCALL and UM_EV_NOTIF, what the C core resolved for each
     * path slot (um_set_path_arg): path[i] is the absolute, lexically
     * normalized path (as um_resolve_path gives it), path_len[i] its length,
     * or -1 where C did not resolve it (no such slot, a NULL or unreadable
     * pointer, a path relative to a virtual cwd, an empty path it did not
     * look at, or a call claimed whole); path_kind[i] the UM_PREFIX_* kind
     * it falls under, -1 for none. Python may take them instead of
     * resolving again (docs/internals.md, "The decision"). */
    char path[UM_PATH_SLOTS][UM_PATH_BUF];
    int path_len[UM_PATH_SLOTS];
    int path_kind[UM_PATH_SLOTS];
    /* ... and each path argument as C read it from the process's memory
     * (raw[i], raw_len[i] bytes: "" for an empty path), -1 where C read none:
     * what Python decides on too (Call.read_string), so that a path another
     * thread changes meanwhile cannot make the two disagree */
    char raw[UM_PATH_SLOTS][UM_PATH_BUF];
    int raw_len[UM_PATH_SLOTS];
    /* filled in by Python before the next um_next() call */
    int reply;
    int changed;
};

struct um_stats {
    uint64_t stops;           /* every ptrace stop */
    uint64_t seccomp_stops;   /* trapped calls */
    uint64_t exit_stops;      /* syscall-exit stops (only on request) */
    uint64_t fast_continue;   /* trapped calls resumed by C, no Python */
    uint64_t python_events;   /* events handed to Python */
    uint64_t skipped;         /* calls skipped with a result (virtualized) */
    uint64_t rewritten;       /* calls whose number or args were changed */
    uint64_t path_reads;      /* path strings read by the fast path */
    uint64_t refused;         /* calls refused by C: ENOSYS, or EACCES (UM_DECIDE_UNREADABLE) */
    uint64_t signals;         /* signals re-injected */
    uint64_t group_stops;
    uint64_t processes;       /* tracees seen (including the first) */
    uint64_t notifications;   /* calls trapped by a user notification (fast path) */
    uint64_t layer_walks;     /* paths with a symlink walked in C (see needs_python) */
    uint64_t injected;        /* filters stacked on running processes (um_filter_inject, um_attach) */
    uint64_t inject_failed;   /* ... that could not be (a 32-bit process, no vDSO) */
    uint64_t notif_events;    /* notified calls handed to Python as notifications */
    uint64_t addfd;           /* ... completed with an fd (um_notif_addfd) */
    uint64_t decided_once;    /* redirected notifications taken at their restart's entry stop
                               * without a second decision */
    uint64_t notif_stale;     /* notifications dropped: no longer valid once C had read the
                               * caller's memory (SECCOMP_IOCTL_NOTIF_ID_VALID) */
    uint64_t write_failed;    /* register or syscall-info writes that failed on a live thread
                               * (each also said on stderr; see docs/internals.md) */
    uint64_t own_trace;       /* seccomp stops of a RET_TRACE of the process's own filter
                               * (without an inner tracer: failed with ENOSYS) */
    uint64_t pinned;          /* calls let through with their paths pinned (pin.c) */
    uint64_t owned_pages;     /* path strings in a private file mapping made the process's own (pin.c) */
    uint64_t regions;         /* regions mapped for pinned paths (one per memory that needed one) */
    uint64_t served;          /* calls under a move mount that C served itself (emulate.c) */
    uint64_t served_fallback; /* ... that it looked at and left to Python (a symlink on the
                               * way, another file type, another identity) */
    uint64_t inner_served;    /* inner tracers' ptrace requests that C answered from a held
                               * stop (um_inner_stopped) */
};

int um_core_version(void);
int um_init(void);
void um_stats_get(struct um_stats *out);
/* Per call (the table's index, up to n): how many were trapped and decided,
 * and how many of those went to Python. Returns how many entries were
 * written (at most n). */
int um_sc_stats(uint64_t *trapped, uint64_t *python, int n);

/* --- tables (filled by Python before um_spawn) --- */
int um_table_reset(int nsc);
int um_map_nr(int abi, long nr, int sc);
int um_set_path_arg(int abi, int sc, int slot, int path_idx, int dirfd_idx, int emptyok_flags_idx);
int um_set_claim(int abi, int sc, int mode); /* the claim bits of sc on one ABI */
int um_prefix_clear(void);

/* kinds of prefix (see docs/internals.md, "Layered prefixes") */
#define UM_PREFIX_PLAIN 0   /* calls with a path under it go to Python */
#define UM_PREFIX_LAYERED 1 /* a layered mount (viewfs merge/cow/mincow): the lower
                             * layer is the real tree at the same path; Python sees
                             * writes and paths the layer set names */
#define UM_PREFIX_REAL 2    /* always real: an except= path of a layered mount */
#define UM_PREFIX_ALIAS 3   /* real, but another path of the view stands for it (a
                             * layer's upper directory): a path relative to a dirfd
                             * or cwd in it that climbs with ".." goes to Python */
#define UM_PREFIX_KERNEL 4  /* a mount whose tree the kernel names by the view's own
                             * path (modules/fs: a helper's mount at the same path):
                             * absolute paths under it go to Python; a path relative
                             * to a cwd or dirfd already under it is resolved there by
                             * the kernel, unless it climbs with ".." */
#define UM_PREFIX_DEVICES 5 /* as LAYERED with nothing in the layer set (writes go to
                             * Python), except an open for writing of a node that
                             * exists and is a character device, FIFO or socket, with
                             * no symlink on its path: the kernel's (/dev/null, ttys) */
#define UM_PREFIX_ALIAS_CLEAN 6 /* an alias whose tree the view shows at one place, with
                                 * no mount below and none newer over it (a move mount's
                                 * source): also a path relative to a dirfd in it that
                                 * does not climb is the kernel's, inside a plain prefix */
#define UM_PREFIX_MOVE 7 /* a move mount (viewfs move): its paths are the source's with
                          * the target's part replaced (um_prefix_add_move). As PLAIN
                          * in every way, except that a call C can serve itself is
                          * answered by C at its notification (docs/internals.md,
                          * "Calls C serves under a move mount") */
int um_prefix_add_kind(const char *prefix, int kind);
/* a UM_PREFIX_MOVE prefix: target shows source (both absolute) */
int um_prefix_add_move(const char *target, const char *source);
/* a UM_PREFIX_LAYERED prefix (added before): upper holds its UM_LAYER_FILE
 * files at the same path below it (the view's target/a/b is upper/a/b) */
int um_prefix_set_upper(const char *target, const char *upper);
/* which calls under a move prefix C may serve itself at a notification:
 * UM_SERVE_LOOKUP (stat, lstat, newfstatat, statx, readlink(at), access,
 * faccessat(2)), UM_SERVE_OPEN (open, openat without O_CREAT or O_TMPFILE);
 * 0 (the default): none */
#define UM_SERVE_LOOKUP 1
#define UM_SERVE_OPEN 2
void um_set_serve(int flags);
/* How many threads serve notifications beside the main thread (servers.c),
 * started when the listener is: 0 (the default) for none; n > 0 threads
 * kept one on each CPU the monitor may use (the first n of them); -n: n
 * threads on any CPU */
void um_set_servers(int n);
/* Around a change of many tables (a rebuild after a service is added or
 * removed): serving threads decide no call until um_tables_end, so none sees
 * a table half cleared. Nests; the single changes lock on their own. */
void um_tables_begin(void);
void um_tables_end(void);
int um_prefix_kind(const char *path); /* the kind a path falls under, -1 for none */
/* openat2(2) in the monitor itself (Python has no binding): an fd, or -errno */
int um_openat2(int dirfd, const char *path, uint64_t flags, uint64_t resolve);

/* the layer set: absolute virtual paths under layered prefixes */
#define UM_LAYER_DIR 1  /* an upper directory the lower shows through: names below it
                         * that are not in the set are lower-only and run natively */
#define UM_LAYER_HIDE 2 /* this path and all below go to Python (an upper file or
                         * symlink, a whiteout, an opaque directory) */
#define UM_LAYER_FILE 3 /* as HIDE, but an upper regular file the view shows as it is:
                         * a call that only reads it may be served by C on its upper
                         * path, where the prefix has one (um_prefix_set_upper) */
int um_layer_add(const char *path, int kind); /* replaces the kind if present */
int um_layer_del(const char *path);           /* -ENOENT if absent */
void um_layer_clear(void);
int um_layer_get(const char *path);           /* its kind, 0 if absent */

/* which calls modify the file system (Python sees them under a layered prefix) */
#define UM_WRITE_NO 0
#define UM_WRITE_ALWAYS 1  /* mkdir, unlink, rename, chmod, utimensat, setxattr, ... */
/* The open flags that make an open a write: O_WRONLY | O_RDWR | O_CREAT |
 * O_TRUNC (O_TMPFILE carries O_WRONLY or O_RDWR). The one definition: C's
 * filter and decision and Python's umview.openflags use it. */
#define UM_O_WRITES 01103
#define UM_WRITE_OFLAGS 2  /* args[argidx] are open flags: writes iff they have a bit of UM_O_WRITES */
#define UM_WRITE_OPENHOW 3 /* args[argidx] points to struct open_how (its flags;
                            * unreadable counts as writing) */
#define UM_WRITE_ACCESS 4  /* args[argidx] is an access(2) mode: "writes" iff W_OK (the
                            * answer is the copy's where a write would copy up) */
int um_set_write(int sc, int kind, int argidx);
/* whether a path slot's call follows a symlink in the last component
 * (syscalls.table NOFOLLOW): a call that does not never walks one there */
#define UM_FOLLOWS 0             /* always follows */
#define UM_NOFOLLOW_ALWAYS 1     /* never (lstat, readlink, unlink, mkdir, ...) */
#define UM_NOFOLLOW_IF_SET 2     /* not if args[arg] & mask (AT_SYMLINK_NOFOLLOW) */
#define UM_NOFOLLOW_UNLESS_SET 3 /* only if args[arg] & mask (AT_SYMLINK_FOLLOW) */
#define UM_NOFOLLOW_OFLAGS 4     /* not with O_NOFOLLOW, or O_CREAT|O_EXCL, in args[arg] */
#define UM_NOFOLLOW_OPENHOW 5    /* not with O_NOFOLLOW in the struct open_how's flags */
int um_set_nofollow(int abi, int sc, int slot, int kind, int arg, uint32_t mask);
void um_set_fd_check(int on); /* AT_EMPTY_PATH calls on an fd under a plain prefix go to Python */
/* offsets into struct user_regs_struct; -EINVAL unless each is in it and 8-byte aligned */
int um_set_regmap(int abi, int nr_off, int ret_off, const int *arg_offs);
int um_filter_trap_nr(int abi, long nr, int how); /* no effect once um_spawn ran: the filter is fixed */
/* trap nr only where argument arg's low word is one of values[0..n)
 * (UM_TRAP_VALUES); a trap of every such call, asked before or after, wins.
 * UM_TRAP_VALUES_FULL: the table of such calls (MAX_VALUE_TRAPS) is full, so
 * every call nr stops (right, slower) */
#define UM_TRAP_VALUES_FULL 1
int um_filter_trap_values(int abi, long nr, int arg, const uint32_t *values, int n);
int um_filter_clear(void);
/* After um_spawn, um_filter_trap_nr records the traps the running filter
 * lacks; um_filter_inject stacks a filter with every trap on each tracee at
 * its next interrupt stop (docs/internals.md). Returns the threads asked to
 * stop, 0 if no trap is new. */
int um_filter_inject(void);
/* Trace process pid (every thread) and its future children; 0 or -errno. */
int um_attach(int pid);

/* The control channel (docs/services.md): one private system call number, far
 * above any real one on every ABI (x32: with its bias). The filter always traps
 * it; lookup gives it the neutral index Python chose (um_set_control_sc), so
 * the monitor answers it; natively the kernel says ENOSYS. */
#define UM_NR_CONTROL 0x564f53 /* "VOS" */
int um_set_control_sc(int sc);

/* The SECCOMP_RET_DATA of every RET_TRACE the monitor's filters return
 * ("UM"). A seccomp stop with other data, or with this data for a call no
 * filter of the monitor traps, comes from a filter the process installed
 * itself (docs/internals.md, "A process's own seccomp filters"). */
#define UM_SECCOMP_DATA 0x554d
/* seccomp(2) and prctl(2): every filter of the monitor refuses a listener of
 * the process's own and stops the installation of its other filters,
 * whatever tables Python loaded. clone(2) and clone3(2), likewise trapped in
 * every filter: a child made with CLONE_UNTRACED would not be traced (it
 * would leave the view and outlive the monitor), so the flag is taken off
 * clone's flags; clone3 keeps its flags in memory the filter cannot read, so
 * it fails with ENOSYS and the C library falls back to clone. Their numbers,
 * as every syscall number C uses, come from arch/ (um_sysnums.h, made by
 * arch/cheader.py); the digest of the tables the core was built from: */
const char *um_sysnums_digest(void);
#define UM_CLONE_UNTRACED 0x00800000
void um_set_event_mask(int mask);
void um_set_spin(int iterations);

/* --- running --- */
/* A Landlock ruleset fd (landlock_create_ruleset) the first process enforces
 * on itself before its filter and exec (the sandbox's write boundary), or -1,
 * and the access rights it handles (LANDLOCK_ACCESS_FS_*: where it handles
 * none of reading, C may open a file for reading for the process). The
 * caller keeps and closes its fd. */
void um_set_landlock(int fd, uint64_t handled);
int um_spawn(char *const argv[]);
int um_next(struct um_event *ev);
int um_first_status(void);
int um_spawn_error(void);
int um_term_signal(void); /* SIGTERM, SIGINT or SIGHUP sent to umview (not the terminal's), or 0 */

/* --- inner tracers (docs/internals.md, "Tracers inside a view") ---
 * A thread whose inner tracer (a process of the view calling ptrace) is
 * recorded with um_set_inner has its stops handed to Python as UM_EV_STOP
 * (signal-delivery, group-stop, PTRACE_EVENT_STOP and PTRACE_EVENT_EXIT
 * stops, the option set for such threads alone; with UM_INNER_SYSCALL its
 * syscall-entry and -exit stops too) and its fork, exec and exit events as
 * process events with UM_INNER_EVENT. */
#define UM_INNER 1          /* it has an inner tracer */
#define UM_INNER_SYSCALL 2  /* ... who resumed it with PTRACE_SYSCALL: syscall stops */
#define UM_INNER_SECCOMP 8  /* ... who wants PTRACE_EVENT_SECCOMP stops of its own filters */
#define UM_INNER_STEP 16    /* ... who resumed it with PTRACE_SINGLESTEP: resumed so, and a
                             * syscall-exit stop the monitor took stands for the step's trap */
#define UM_INNER_EMU 32     /* ... who resumed it with PTRACE_SYSEMU(_SINGLESTEP): resumed so, its
                             * syscall-entry stops are the tracer's and the kernel skips the call */
int um_set_inner(int tid, int flags);
/* Resume a thread Python held (UM_HOLD): req is PTRACE_CONT (made PTRACE_SYSCALL
 * when a syscall stop is wanted), PTRACE_SINGLESTEP or PTRACE_LISTEN; sig the
 * signal to deliver at a signal-delivery stop. 0 or -errno. */
int um_resume(int tid, int req, int sig);
/* The signal an inner tracer gave with its resume of tid's syscall-entry stop:
 * sent by the monitor's own resume of that stop, as the kernel sends it
 * (si_code SI_KERNEL), whatever the view decides of the call. */
int um_set_resume_signal(int tid, int sig);
/* 1 if the monitor left tid in its group-stop (PTRACE_LISTEN) and no stop of
 * it came since: natively it is "T (stopped)", where /proc says "t". */
int um_listening(int tid);
/* tid is held at a stop its inner tracer, thread tracer, knows of (Python's
 * Tracee.state "stopped"), and that tracer names it vtid: the data requests
 * whose answer is the thread's own as the kernel gives it
 * (PTRACE_GET_SYSCALL_INFO, PEEKTEXT, PEEKDATA; GETREGS and PEEKUSER unless
 * shown: the view changed the call's number, which the tracer sees as it
 * made it) are answered by C at the tracer's seccomp stop, without Python.
 * tracer 0: not so (running, listening, or its tracer not known yet).
 * resume: the stop is one the tracer's PTRACE_SYSCALL or PTRACE_CONT with
 * no signal may end in C too (UM_RESUME_ENTRY or _EXIT: a syscall stop,
 * the thread not stepped, emulated or exiting); 0 if Python must. */
int um_inner_stopped(int tid, int tracer, int vtid, int shown, int resume);
#define UM_RESUME_ENTRY 1
#define UM_RESUME_EXIT 2
/* What the C core did for inner tracers that Python's records must learn
 * before its next event (InnerTracing.take_notes), in order: */
#define UM_NOTE_RESUME_SYSCALL 1 /* tid resumed with PTRACE_SYSCALL (no signal) */
#define UM_NOTE_RESUME_CONT 2    /* ... with PTRACE_CONT */
#define UM_NOTE_ENTRY 3          /* tid held at its syscall-entry stop, which its tracer's
                                  * held wait took (the wait answered) */
#define UM_NOTE_EXIT 4           /* ... at its syscall-exit stop */
#define UM_NOTE_WAIT 5           /* tracer thread tid's wait4 (args) held at its stop */
#define UM_NOTE_PENDING_ENTRY 6  /* tid held at its syscall-entry stop, its status word (args[0])
                                  * for its tracer's next wait: C answers that wait if it can */
#define UM_NOTE_PENDING_EXIT 7   /* ... at its syscall-exit stop */
#define UM_NOTE_TAKEN 8          /* tid's pending status taken by its tracer's wait (C answered) */
struct um_inner_note {
    int tid;
    int what;
    uint64_t args[4];
};
/* The notes since the last call, at most max: how many. */
int um_take_notes(struct um_inner_note *notes, int max);
int um_notes_pending(void);
/* Thread tid's tracer is thread tracer (0: not known yet), which names it
 * vtid and asked for PTRACE_O_TRACESYSGOOD (sysgood): what the C core needs
 * to report its syscall stops itself (UM_NOTE_ENTRY, _EXIT). */
int um_set_inner_tracer(int tid, int tracer, int vtid, int sysgood);
/* Python's wait took tid's status (UM_NOTE_PENDING_*): no longer C's to give. */
int um_inner_taken(int tid);
/* Thread tid's wait4(-1, ..., WNOHANG | __WALL, ...) would find nothing
 * now (Python answered one so): C answers the next ones 0 itself until
 * quiet is 0 again or a fork or exit in the view (um_family_gen). */
int um_nohang_quiet(int tid, int quiet);
#define UM_QUIET 1          /* nothing for its WNOHANG waits */
#define UM_QUIET_HOLD 2     /* ... and its blocking wait4(-1, ..., __WALL, NULL) would be held
                             * (a child, each a live tracee of its process's), no other thread of
                             * its process waits, and it hears no SIGCHLD: the C core holds such
                             * a wait, and reports syscall stops of its tracees itself (answering
                             * the held wait, or pending for its next wait) */
/* Before the first process runs, where the view has a listener: an inner
 * tracer's data requests (PTRACE_GET_SYSCALL_INFO, PEEKTEXT/DATA/USER,
 * GETREGS) and its wait4(..., WNOHANG | __WALL, ...) of the x86_64 ABI are
 * trapped as notifications, which the C core answers without a stop of the
 * tracer's where it can (inner.c), every other ptrace request as before. */
int um_inner_notif(void);
/* An inner tracer's blocking wait that only the emulation can end (Python
 * knows): asked while its UM_EV_SYSCALL is at hand, which Python answers
 * CONTINUE; if the call is then as it came, at its seccomp stop, it stays
 * there for at most 20 ms (docs/internals.md, "Tracers inside a view"). */
int um_hold_wait(int tid);
/* 1 if tid's wait is held so now. */
int um_wait_held(int tid);
/* A held wait's result: the call skipped with rval, the thread resumed. */
int um_answer_wait(int tid, long rval);
/* A held wait goes on into the kernel's wait (something the kernel reports
 * ends it: a real child's exit). 1 if it was held. */
int um_release_wait(int tid);
/* A count of the fork, vfork and clone events and the exits the loop has
 * taken: while it stays the same, the children and threads of a process of
 * the view are those it had (what Python read of /proc/PID/task may be kept).
 * An exit collected ahead (um_reap) counts when the loop reports it. */
uint64_t um_family_gen(void);
/* PTRACE_INTERRUPT tid; its coming PTRACE_EVENT_STOP goes to Python (UM_EV_STOP). */
int um_interrupt(int tid);
/* A held thread at a syscall-entry or seccomp stop: decide its call as it is
 * now (an inner tracer may have changed it). UM_EV_SYSCALL: ev is that call's
 * event (UM_FROM_ENTRY), for Python to dispatch and um_finish; 0: C resumed
 * it (nothing to see, or refused); -errno. */
int um_decide_stopped(int tid, struct um_event *ev);
/* Complete an event Python kept (a copy of the one um_next gave, or the one
 * um_decide_stopped filled) as um_next would have at its next call. */
int um_finish(struct um_event *ev);
/* While tid blocks in a wait rewritten to pause (an inner tracer waiting for
 * emulated stops), a signal that ends the pause makes it restart as call nr
 * (the wait), as the wait would have: -ERESTARTSYS. 0 clears it. */
int um_set_wait_nr(int tid, long nr);
/* ptrace(2) as the system call (PEEK* store the word at data), on a thread
 * the monitor traces: the result, or -errno. */
long um_ptrace(long req, int tid, uint64_t addr, uint64_t data);
/* Collect tid's exit now if the kernel has it (waitpid WNOHANG), ahead of the
 * loop, which still reports it (UM_EV_EXIT) at its next call: an inner
 * tracer's wait sees an exit the kernel already has, and a zombie leader whose
 * last thread is gone is released to its real parent at once, as natively.
 * 1 collected (its wait status in *status), 0 not there, -errno. */
int um_reap(int tid, int *status);

/* --- tracee access --- */
int um_read_mem(int tid, uint64_t addr, void *buf, size_t len);
int um_write_mem(int tid, uint64_t addr, const void *buf, size_t len);
int um_read_string(int tid, uint64_t addr, char *buf, int size);
int um_resolve_path(int tid, int abi, int sc, int slot, const uint64_t *args, char *out, int size);
int um_notif_supported(void);
/* Does this kernel run calls of abi (UM_ABI_*)? x86_64 and i386 yes; x32 only
 * with CONFIG_X86_X32_ABI (asked once, with an x32 getpid). */
int um_abi_supported(int abi);
#define UM_VCWD 1          /* um_set_vcwd: its cwd is virtual */
#define UM_VCWD_FAITHFUL 2 /* ... and the kernel's cwd shows the same names below it:
                            * relative paths without ".." stay with the kernel */
#define UM_VROOT 4         /* its root is virtual (chroot in the view): every path call
                            * needs Python */
int um_set_vcwd(int tid, int on);

/* Run one system call in the thread of the UM_EV_SYSCALL event Python holds
 * (stopped at its call's entry) and put its result (>= 0 or -errno) in
 * *result; the thread then waits at the entry stop of its own call again, and
 * the reply Python gives applies to that call as usual. 0, or -errno if it
 * could not be run (-ESRCH: the thread died; -EINVAL: no such pending call).
 * See docs/internals.md, "Injecting a call". */
int um_inject(int tid, int abi, long nr, const uint64_t *args, int64_t *result);
/* At the exit stop of an exec that succeeded: set the thread's command
 * name (prctl PR_SET_NAME, at most 15 bytes), as the program would. 0 or
 * -errno (-ENOSYS: an i386 process, or no vDSO). */
int um_set_comm(int tid, const char *name);
/* Copy a path (len bytes, NUL added) that a call at tid's stop (the one
 * Python holds) is made to read into page `page` (0-3) of tid's slot of its
 * pinned-path region, read-only for the process (pin.c; the region is mapped
 * by an injected mmap the first time): its address, 0 if tid's memory has no
 * other user and `at` (where the string lies, or would: 0 not known) is
 * memory no other process can change (the stack will do), or -errno. */
int64_t um_pin_string(int tid, int abi, int page, const char *data, int len, uint64_t at);
/* Is the string data (len bytes, without its NUL) at addr in tid's memory
 * where another process may change it before the kernel reads it (a
 * shared mapping, memory not known)? A private file mapping is made the
 * process's own first (written back through /proc/PID/mem): then 0 (pin.c). */
int um_changeable(int tid, uint64_t addr, const char *data, int len);
/* Does tid's memory have another user (a thread, a CLONE_VM process), or
 * is that not known? Then its paths are pinned (pin.c). */
int um_mm_shared(int tid);
/* Complete the UM_EV_NOTIF call Python holds with a copy of the monitor's
 * fd srcfd, installed at the caller's lowest free number with newfd_flags
 * (O_CLOEXEC or 0), in one step (SECCOMP_IOCTL_NOTIF_ADDFD with
 * SECCOMP_ADDFD_FLAG_SEND, Linux 5.14): the call returns that number. The
 * number, or -errno (-ENOENT: the caller died or a signal ended its wait;
 * -EMFILE; -EINVAL: no notification pending). Then the reply is not sent. */
int um_notif_addfd(int srcfd, unsigned int newfd_flags);
/* --- the fast-path decision, as a pure function (docs/internals.md) ---
 * At a trapped call the C core gathers what the claim bits of the call
 * need (path strings and the directories they are relative to, the file of
 * an fd, a socket address, open_how flags) into a struct um_decide_in, then
 * um_decide() decides from it and the tables alone: no tracee memory, no
 * system call, except the symlink check and walk when `walk` is set. */
#define UM_DECIDE_NATIVE 0 /* run it, no Python */
#define UM_DECIDE_PYTHON 1 /* hand it to Python */
#define UM_DECIDE_REFUSE 2 /* refuse it with ENOSYS (UM_CLAIM_REFUSE, an undecodable call) */
#define UM_DECIDE_UNREADABLE 3 /* refuse it with EACCES: the monitor may not read what it must look at
                                * (the process is not dumpable and the monitor lacks CAP_SYS_PTRACE) */

/* what was gathered for one path slot */
#define UM_SLOT_NONE 0  /* no path argument in this slot (or not gathered) */
#define UM_SLOT_PATH 1  /* str is the path as given; base the directory a relative one starts from */
#define UM_SLOT_EMPTY 2 /* "" with AT_EMPTY_PATH: the call acts on its dirfd, whose file base names */
#define UM_SLOT_NULL 3  /* a NULL path with a dirfd (utimensat): acts on the dirfd, as EMPTY */
#define UM_SLOT_ERROR 4 /* the kernel fails it alike (unreadable, too long, "" without
                         * AT_EMPTY_PATH, a bad dirfd): err is the -errno */

struct um_decide_slot {
    int state;          /* UM_SLOT_* */
    int err;            /* UM_SLOT_ERROR: -errno */
    int cwd_relative;   /* relative to the cwd (AT_FDCWD, or no dirfd argument) */
    int base_known;     /* base holds what the dirfd or cwd names ("" + 1: not a path) */
    char str[UM_PATH_BUF];
    char base[UM_PATH_BUF];
};

struct um_decide_in {
    int abi;                 /* UM_ABI_* */
    uint64_t nr;             /* the number as the kernel sees it (x32: with its bit) */
    uint64_t args[6];
    int vcwd;                /* the thread's UM_VCWD | UM_VCWD_FAITHFUL (um_set_vcwd) */
    struct um_decide_slot slot[UM_PATH_SLOTS];
    char fd0[UM_PATH_BUF];   /* UM_CLAIM_FD: what the fd args[0] names ("" if not a path) */
    int unix_path;           /* UM_CLAIM_UNIXADDR: args[1] is an AF_UNIX path address */
    int how_readable;        /* UM_WRITE_OPENHOW: how_flags were read */
    uint64_t how_flags;      /* ... struct open_how's flags */
    int walk;                /* may check for symlinks on the real tree (system calls) */
    int unreadable;          /* reading the process's memory or /proc/PID/{cwd,fd} was refused */
    /* out */
    int sc;                  /* the neutral index, -1 if unknown */
    char path[UM_PATH_SLOTS][UM_PATH_BUF]; /* as in struct um_event */
    int path_len[UM_PATH_SLOTS];
    int path_kind[UM_PATH_SLOTS];
    int move;                /* the UM_PREFIX_MOVE prefix (its index) whose mount C may serve the
                              * call under (emulate.c), -1 if none; um_decide then says PYTHON */
    int upper;               /* the UM_PREFIX_LAYERED prefix (its index) whose upper layer holds
                              * the file a reading call names (UM_LAYER_FILE): C may serve it
                              * there (emulate.c), -1 if none; um_decide then says PYTHON */
};
int um_decide(struct um_decide_in *in);
/* whether call sc (of in->abi, with in->args, and in->how_* for openat2)
 * follows a symlink in the last component of path slot (um_set_nofollow) */
int um_follows_last(const struct um_decide_in *in, int sc, int slot);
void um_set_symlink_check(int on);
void um_set_families(uint64_t bits); /* bit f: socket family f is claimed (UM_CLAIM_FAMILY) */
void um_set_socknames(int on); /* UM_CLAIM_SOCKNAME calls go to Python */
void um_restore_signals(void);

/* For tests: make the core's register writes fail with EIO, as a kernel
 * refusing them would (a bit set of UM_FAIL_*; 0 = real writes). */
#define UM_FAIL_SSI 1      /* PTRACE_SET_SYSCALL_INFO */
#define UM_FAIL_SETREGS 2  /* PTRACE_SETREGS */
#define UM_FAIL_POKEUSER 4 /* PTRACE_POKEUSER (the return value) */
void um_test_fail_writes(int mask);

/* Run a classic BPF seccomp program as the C core runs the filters a process
 * installs itself (len instructions of 8 bytes, struct sock_filter) on a
 * struct seccomp_data (64 bytes): 0 and the program's answer in *ret, or
 * -EINVAL for a program the kernel would refuse (docs/internals.md, "A
 * process's own seccomp filters"). */
int um_seccomp_bpf_run(const char *insns, int len, const char *data, uint32_t *ret);
