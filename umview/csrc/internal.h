/* internal.h - what the files of umview's C core (umview/csrc/) share.
 * The public API is umview/core.h (also the cffi cdef); nothing here is
 * visible outside the module (built with -fvisibility=hidden).
 *
 * One loop on waitpid(-1, __WALL) owns every ptrace stop. A seccomp filter,
 * built from the calls Python says an engine may claim, makes only those calls
 * stop (SECCOMP_RET_TRACE); every other call runs with no stop at all. At a
 * trapped call C decodes it (PTRACE_GET_SYSCALL_INFO), looks the number up in
 * the per-ABI table, and decides from the claim table and the path-prefix
 * table whether Python must see it. If not, the tracee is resumed with
 * PTRACE_CONT: one stop, no exit stop, no Python.
 *
 * The files, one per concern: loop.c (um_next, waiting, signals, group-stop,
 * held forks), notif.c (the listener: serve, hand over, answer, addfd),
 * decide.c (the fast-path decision), layerset.c (the layer set), filter.c
 * (building, installing and stacking filters), ownseccomp.c (a seccomp
 * stop of a filter the process installed itself), tracee.c (memory and
 * registers), spawn.c (spawn, attach), inject.c (injected calls), tables.c
 * (what Python fills), thread.c (per-thread state).
 *
 * See docs/internals.md for signals, group-stop, exec and thread exit.
 */
#ifndef UM_INTERNAL_H
#define UM_INTERNAL_H
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include "core.h"
#include "um_sysnums.h" /* every syscall number C uses: arch/, by arch/cheader.py */

/* Debian 12's headers predate these (Linux 6.16) */
#ifndef PTRACE_GET_SYSCALL_INFO
#define PTRACE_GET_SYSCALL_INFO 0x420e
#endif
#define UM_PTRACE_SET_SYSCALL_INFO 0x4212
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS _IOW('!', 4, uint64_t) /* Linux 6.6 */
#endif
#define UM_NOTIF_SYNC_WAKE_UP 1 /* SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP */
#define SI_ENTRY 1
#define SI_EXIT 2
#define SI_SECCOMP 3
#define X32_BIT 0x40000000L
/* the kernel's restart codes (include/linux/errno.h), seen at a syscall-exit stop */
#define ERESTARTSYS_ 512
#define ERESTARTNOINTR_ 513
#define ERESTARTNOHAND_ 514
#define ERESTART_RESTARTBLOCK_ 516
/* how every tracee is seized, spawned or attached (um_attach); children inherit them */
#define TRACE_OPTIONS \
    (PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | \
     PTRACE_O_TRACEEXEC | PTRACE_O_TRACESECCOMP | PTRACE_O_EXITKILL)
/* every RET_TRACE of the monitor's filters carries its data (core.h) */
#define RET_TRACE_UM (SECCOMP_RET_TRACE | UM_SECCOMP_DATA)
#define AT_FDCWD_ -100
#define AT_EMPTY_PATH_ 0x1000
/* openat2(2) (Linux 5.6): struct open_how and its resolve flags */
struct um_open_how {
    uint64_t flags, mode, resolve;
};
#define RESOLVE_NO_MAGICLINKS_ 0x02
#define RESOLVE_NO_SYMLINKS_ 0x04
#define RESOLVE_BENEATH_ 0x08
#define RESOLVE_IN_ROOT_ 0x10

/* struct ptrace_syscall_info as of Linux 6.16 (88 bytes; SET wants it whole) */
struct um_sci {
    uint8_t op;
    uint8_t reserved;
    uint16_t flags;
    uint32_t arch;
    uint64_t instruction_pointer;
    uint64_t stack_pointer;
    union {
        struct { uint64_t nr; uint64_t args[6]; } entry;
        struct { int64_t rval; uint8_t is_error; } exit;
        struct { uint64_t nr; uint64_t args[6]; uint32_t ret_data; uint32_t reserved2; } seccomp;
    };
};

#define MAX_NR 1024 /* numbers above this (x32 bias removed) are unknown */
#define MAX_SC 2048
#define PATH_SLOTS 2

struct path_arg {
    signed char path;     /* arg index of the path, -1 = none */
    signed char dirfd;    /* arg index of its dirfd, -1 = relative to cwd */
    signed char emptyflg; /* arg index of AT flags honouring AT_EMPTY_PATH, -1 = none */
    signed char nofollow; /* UM_FOLLOWS or UM_NOFOLLOW_* (-1: follows) */
    signed char nofollow_arg; /* the argument its rule reads */
    uint32_t nofollow_mask;   /* ... and the bits it tests there */
};

struct regmap {
    int nr, ret, args[6];
};
#define UR(f) (int)offsetof(struct user_regs_struct, f)
#define REG(r, off) (*(unsigned long long *)((char *)(r) + (off)))

struct own_filter; /* ownseccomp.c */

/* What the loop knows of one thread, indexed by tid (thread.c: a lazily
 * touched array over pid_max). Zero is a thread never seen. */
struct um_thread {
    unsigned seen : 1;        /* a tracee (counted in stats.processes) */
    unsigned announced : 1;   /* its parent's fork/clone event was seen (or it is the first) */
    unsigned held : 1;        /* a new tracee kept stopped until its parent's event is seen */
    unsigned exit_wanted : 1; /* Python asked for this call's exit stop */
    unsigned execed : 1;      /* execve succeeded while its exit stop was pending */
    unsigned vcwd : 1;        /* its cwd is virtual: relative paths need Python */
    unsigned vroot : 1;       /* its root is virtual: every path needs Python */
    unsigned faithful : 1;    /* with vcwd: the kernel's cwd shows the names the virtual one
                               * does, so a relative path without ".." needs no Python */
    unsigned redirected : 1;  /* a notification needs Python: interrupted, its restart awaited */
    unsigned await_entry : 1; /* resumed with PTRACE_SYSCALL for the restarted call's entry stop */
    /* (pass_notif, below: a serving thread clears it) */
    unsigned need_filter : 1; /* its process lacks the filter of the current traps: stack one
                               * on it at its next interrupt stop (um_filter_inject) */
    unsigned injected : 1;    /* um_inject ran: the pending call waits at its syscall-entry stop */
    unsigned injecting : 1;   /* in um_inject: its notifications are answered CONTINUE */
    unsigned inner : 1;       /* it has an inner tracer: its stops go to Python (um_set_inner) */
    unsigned inner_sys : 1;   /* ... who wants its syscall stops: resumed with PTRACE_SYSCALL */
    unsigned inner_step : 1;  /* ... who single-steps it: resumed with PTRACE_SINGLESTEP */
    unsigned inner_emu : 1;   /* ... who resumed it with PTRACE_SYSEMU(_SINGLESTEP) */
    unsigned listening : 1;   /* left in its group-stop with PTRACE_LISTEN (um_listening) */
    unsigned want_hold : 1;   /* its wait, if let through unchanged, is held at its stop (um_hold_wait) */
    unsigned wait_held : 1;   /* ... and so it is, until answered, released or its time is up */
    unsigned inner_shown : 1; /* ... held at a stop where it sees another call number (um_inner_stopped) */
    unsigned inner_resume : 2; /* ... one its tracer's resume may end in C (UM_RESUME_*) */
    unsigned quiet_hold : 1;  /* as a tracer: ... and its blocking wait may be held by C (UM_QUIET_HOLD) */
    unsigned entry_by_c : 1;  /* ... resumed by C from its entry stop: its exit stop C may report */
    unsigned inner_sysgood : 1; /* its tracer asked for PTRACE_O_TRACESYSGOOD (um_set_inner_tracer) */
    pid_t inner_tracer;       /* its tracer's thread, 0 if not known */
    int cpend_word;           /* a syscall stop C reported, pending for its tracer's wait: its
                               * status word (0: none) */
    pid_t cpend_tracer;       /* ... the tracer thread it is pending for */
    int cpending;             /* as a tracer thread: how many are pending for it (read by
                               * serving threads) */
    int memo_state;           /* as a tracer thread: its last notified call the monitor acted
                               * for (inner_memo): 1 answered, 2 the answer lost to a signal or
                               * an interrupt (its restart gets it), 0 none */
    long memo_rval;
    uint64_t memo_nr, memo_args[4];
    pid_t inner_tvtid;        /* the id that tracer names it by */
    pid_t inner_by;           /* ... held at a stop this tracer thread knows of: 0 if not */
    uint64_t quiet_gen;       /* as a tracer: its WNOHANG wait finds nothing while family_gen
                               * + 1 is this (um_nohang_quiet); 0 not known */
    pid_t inner_vtid;         /* ... the id that tracer names it by */
    unsigned char resume_sig; /* its next resume sends this signal (um_set_resume_signal) */
    unsigned char injected_sig; /* resume_sig sent at a syscall-entry stop: its exit checks it */
    unsigned char defer_sig;  /* that signal ended the call's wait for the monitor: the call
                               * is made again, the signal sent at its exit */
    unsigned exit_sig : 1;    /* resume_sig is a deferred one, for a syscall-exit stop */
    unsigned drop_step_trap : 1; /* its notified call was interrupted while stepped: the step's
                                  * trap of that first try is the monitor's doing, not shown */
    unsigned py_int : 1;      /* Python interrupted it (um_interrupt): the stop is Python's */
    unsigned inner_seccomp : 1; /* ... who asked for PTRACE_EVENT_SECCOMP stops */
    unsigned opts_dirty : 1;
    unsigned seccomp_redirect : 1; /* its restart's entry stop is its inner tracer's seccomp stop */
    uint32_t seccomp_data;    /* ... with this SECCOMP_RET_DATA */
    unsigned seccomp_stand_in : 1; /* held at that entry stop: its filters' TRACE was reported */  /* its ptrace options change at its next stop (it was running) */
    uint64_t pass_nr, pass_args[6]; /* ... that call: its number (as the kernel sees it), arguments */
    long wait_nr;             /* blocked in a wait made pause: restart as this call (um_set_wait_nr) */
    struct um_note *note;     /* redirected: the decision for the restart (decide once) */
    struct own_filter *own;   /* the seccomp filters it installed itself, newest first
                               * (shared, counted; OWN_UNKNOWN: some the monitor did not see) */
    struct own_filter *own_pending; /* one it is installing, kept at the call's exit stop */
    int mm;                   /* its memory (pin.c): 0 not known */
    unsigned mm_gen;          /* changes with mm (each new memory, exec): what a /proc/TID/maps fd was opened on */
    int slot;                 /* its slot in that memory's region, + 1; 0 none yet */
    unsigned pinned : 1;      /* its call runs pinned: pin_args go back at the exit stop */
    int pin_abi;
    uint64_t pin_args[6];
    /* written by serving threads (servers.c): fields of their own, not bits
     * of a word the main thread writes too */
    unsigned char pass_notif; /* decided at a stop: let its coming notification through (pass_set) */
    unsigned char creds_same; /* emulate.c: its identity is the monitor's: C may serve its calls */
    unsigned char landlocked; /* it (or an ancestor) called landlock_restrict_self: C opens nothing for it */
    uint64_t creds_gen;       /* ... the identity generation creds_same was read at (0: never) */
};

/* A call a notification sent to Python, redirected to a ptrace stop: its
 * restart's entry stop goes to Python without a second decision if it is
 * the same call (ABI, number and arguments). */
struct um_note {
    int abi, sc;
    uint64_t nr, args[6];
    char path[PATH_SLOTS][UM_PATH_BUF];
    int path_len[PATH_SLOTS], path_kind[PATH_SLOTS];
    char raw[PATH_SLOTS][UM_PATH_BUF]; /* the strings read (struct um_event's raw) */
    int raw_len[PATH_SLOTS];
};


struct layer_slot {
    char *path; /* NULL: empty; &layer_tomb: deleted */
    size_t len;
    int kind;
};

#define MAX_INSNS 4096
struct bpf_buf {
    struct sock_filter f[MAX_INSNS];
    int n;
    int overflow;
};

#ifndef PTRACE_GETSIGMASK
#define PTRACE_GETSIGMASK 0x420a
#define PTRACE_SETSIGMASK 0x420b
#endif


/* decide.c */
int decide_call(pid_t tid, struct um_decide_in *in, int *read);
/* The real path of raw (absolute, as the process gave it: its ".." and a
 * trailing "/" kept) under move prefix i: the source, then what follows the
 * target. Its length, or -errno. */
int move_realize(const char *raw, int i, char *out, size_t size);
void decided_served(int sc); /* a call decided for Python was served by C */
void decided_again(int sc, int d); /* a decision the main thread makes again: not counted twice */
/* Is real, a path the kernel resolved in move prefix i's source, one the
 * view shows under that prefix (in none of its exceptions)? */
int move_holds(int i, const char *real);
/* The -errno a refusing decision gives the call (UM_DECIDE_REFUSE: ENOSYS,
 * UM_DECIDE_UNREADABLE: EACCES, said once on stderr), 0 if d does not refuse. */
int refusal(pid_t tid, int d);

/* filter.c */
int any_notif(void);
void pass_set(pid_t tid, uint64_t nr, const uint64_t *args); /* thread.c */
int pass_taken(pid_t tid, uint64_t nr, const uint64_t *args);
int notifies_again(int abi, long nr, const uint64_t *args); /* filter.c */
int any_path_notif(void); /* filter.c */
int monitor_may_trace(int abi, uint64_t nr, const uint64_t *args);
int own_filter_call(int abi, uint64_t nr, const uint64_t *args);
int untraced_clone(int abi, uint64_t nr, const uint64_t *args);
int install_filter(int *listener);
extern int inject_ready;
void inject_filter(pid_t tid);
int build_inject(void);

/* ownseccomp.c */
#define OWN_UNKNOWN ((struct own_filter *)1)
int own_trace_stop(pid_t tid, const struct um_sci *si);
int own_trace_notif(const struct seccomp_notif *req);
int own_filters_trace(pid_t tid, const struct um_sci *si);
int inner_tracer_seccomp(pid_t tid, int abi, const struct seccomp_data *sd, uint32_t data,
                         const struct seccomp_notif *notif);
void own_filters_inherit(struct um_thread *child, const struct um_thread *parent);
void own_filters_drop(struct um_thread *t);
void own_filters_moved(struct um_thread *from);
void own_filter_exit(pid_t tid, const struct um_sci *si);
void own_filters_attached(pid_t tid);

/* inner.c */
int inner_request(pid_t tid, const struct um_sci *si);
int inner_stop(pid_t tid, int kind); /* inner.c: a syscall stop C reports itself */
void cpend_drop(pid_t tid);         /* inner.c: ... no longer pending */
int inner_notif(const struct seccomp_notif *req, int alone); /* inner.c */
int inner_handable(const struct seccomp_notif *req);       /* an inner tracer's ptrace or wait4 */
void inner_memo(const struct seccomp_notif *req, long rval); /* its answer, for its restart */
void inner_memo_stop(pid_t tid, const struct user_regs_struct *r); /* ... lost? */
uint64_t um_family_gen(void);
void family_gen_bump(void);

/* inject.c */
uint64_t vdso_syscall(pid_t tid);
int inject_step(pid_t tid, int op, struct um_sci *si, uint64_t *sigs);
void resend_signals(pid_t tid, uint64_t sigs);
long run_call(pid_t tid, const struct user_regs_struct *base, uint64_t at, long nr,
                     uint64_t a0, uint64_t a1, uint64_t a2, uint64_t *sigs);

/* layerset.c */
#define LAYER_HASH_START 1469598103934665603ULL /* FNV-1a offset basis */
uint64_t layer_hash_more(uint64_t h, const char *p, size_t n);
struct layer_slot *layer_find(const char *p, size_t n);
struct layer_slot *layer_find_hashed(const char *p, size_t n, uint64_t h);
int layer_hit(const char *p, size_t n);
int layer_hides(int kind); /* does the kind send the path and all below it to Python? */
/* is p an upper file or a merged directory (UM_LAYER_FILE, UM_LAYER_DIR)
 * with no hiding ancestor: a lookup there is one of the upper layer? */
int layer_upper(const char *p, size_t n);
int layer_upper_dir(const char *p, size_t n); /* an upper directory the view shows */
/* Is the directory the lower layer has at p (n bytes) not what the view
 * shows there: p, or an ancestor, is HIDE or FILE in the layer set? */
int layer_hides_dir(const char *p, size_t n);

/* loop.c */
void defer_status(pid_t tid, int status);
int defer_full(void);
void resume(pid_t tid, int req, int sig);
void finish_reply(struct um_event *ev);
int call_event(struct um_event *ev, pid_t tid, const struct um_sci *si, int abi, int sc, int flags,
               const char (*path)[UM_PATH_BUF], const int *path_len, const int *path_kind);
int is_stop_signal(int sig);

/* pin.c */
void emit_insn(struct bpf_buf *b, struct sock_filter s); /* filter.c */
int decided_writes(const struct um_decide_in *in);       /* decide.c */
void mm_leave(pid_t tid);
void mm_new(pid_t tid);
void mm_child(pid_t child, pid_t parent, int shares);
int mm_event_shares(pid_t tid);
void mm_attached(pid_t tid, int threads);
int mm_shared(pid_t tid);
int changeable(pid_t tid, uint64_t addr, const void *data, size_t len);
int region_refusal(pid_t tid, int abi, uint64_t nr, const uint64_t *args);
int region_guarded(int abi, uint64_t nr, const uint64_t *args);
void emit_region_guard(struct bpf_buf *b, int abi, uint32_t bias, uint32_t ret);
int region_poke_refused(pid_t tid, uint64_t addr, uint64_t len);
int needs_pin(pid_t tid, const struct um_decide_in *in);
int pin_call(pid_t tid, struct um_decide_in *in);
void pin_restore(pid_t tid, int execed);

/* servers.c */
extern int servers_running, handover_fd;
void servers_start(void);
void servers_stop(void);
int notif_ioctl(unsigned long request, void *arg); /* a listener ioctl, again after EINTR (not RECV) */
int notif_stale(const struct seccomp_notif *req); /* notif.c: no longer valid (counted) */
int servers_polling(void);   /* do serving threads take the notifications now (not the main thread)? */
void tables_write_lock(void);   /* around every change of what serving threads read */
void tables_write_unlock(void);
int handover_take(struct seccomp_notif *req); /* 1 and *req: one handed to the main thread */
void handover_drain(void);
void handover_again(const struct seccomp_notif *req);
void servers_stats(struct um_stats *sum, uint64_t *trapped, uint64_t *python, int n);
uint64_t *sc_counts(int python); /* decide.c: this thread's counts by call (trapped, or handed to Python) */
/* notif.c: serve a notification on a serving thread; 0 if the main thread must */
int serve_alone(const struct seccomp_notif *req);
void serve_handed(int may_hand);

/* emulate.c */
/* A call under a move prefix (in->move >= 0) at its notification req: C
 * serves it and answers; 1 if so (or the caller is gone), 0 if Python must. */
int serve_move(pid_t tid, const struct seccomp_notif *req, const struct um_decide_in *in);
/* tid made a call that may change its identity (landlock: landlock_restrict_self) */
void creds_changed(pid_t tid, int landlock);

/* inner.c */
long zombie_parent(pid_t tid);
void apply_options(pid_t tid);

/* notif.c */
void serve_notification(int may_hand);
int notif_event(struct um_event *ev);
void finish_notif(struct um_event *ev);
void end_notifications(void);
pid_t wait_notif(int *status);
int chld_watch(void);

/* inner.c: waits of inner tracers held at their seccomp stop */
int hold_wait(pid_t tid, long nr, const uint64_t *args);
void hold_wait_drop(pid_t tid);
int held_wait_timeout(void);
void held_waits_expire(void);

/* spawn.c */
extern int setup_fd, go_fd, listener_fd, sigchld_fd;
extern int landlock_reads; /* the first process runs under a Landlock domain that rules reads (um_set_landlock) */
extern sigset_t saved_mask;
void take_listener(void);

/* loop.c */
void event_paths(struct um_event *ev, const char (*path)[UM_PATH_BUF], const int *len, const int *kind);
/* raw (and raw_len) of an event or a note from the slots C gathered (NULL: none read) */
void raw_from_slots(char (*raw)[UM_PATH_BUF], int *raw_len, const struct um_decide_slot *slots);
void event_raw(struct um_event *ev, const char (*raw)[UM_PATH_BUF], const int *raw_len);

/* tables.c */
extern struct path_arg path_args[UM_NABI][MAX_SC][PATH_SLOTS];
extern uint16_t claim[UM_NABI][MAX_SC];
extern int nsc;
extern char *prefixes[256];
extern size_t prefix_len[256];
extern unsigned char prefix_kind[256];
extern char *prefix_src[256];
extern size_t prefix_src_len[256];
extern char *prefix_upper[256];
extern int nprefixes;
extern unsigned char write_kind[MAX_SC];
extern signed char write_arg[MAX_SC];
extern struct regmap regmap[UM_NABI];
extern unsigned char trap[UM_NABI][MAX_NR];
extern unsigned char extra_trap[UM_NABI][MAX_NR];
#define MAX_VALUE_TRAPS 64 /* (abi, number) pairs: the guard and a layered mount need 12 */
struct value_trap {
    int abi, arg, n;
    long nr;
    uint32_t v[UM_MAX_TRAP_VALUES];
};
const struct value_trap *value_trap_of(int abi, long nr);
extern int extra_dirty;
extern int event_mask;
extern int spin_iterations;
extern __thread struct um_stats stats; /* this thread's: um_stats_get sums them */
extern int filter_fixed;
int lookup_sc(int abi, long nr);
/* does the filter trap this class with a user notification (for some arguments)? */
static inline int notifies(unsigned char how)
{
    return how == UM_TRAP_NOTIF || how == UM_TRAP_NOTIF_RW || how == UM_TRAP_NOTIF_VALUES ||
           how == UM_TRAP_NOTIF_VALUES_TRACE;
}
static inline int by_values(unsigned char how)
{
    return how == UM_TRAP_VALUES || how == UM_TRAP_NOTIF_VALUES || how == UM_TRAP_NOTIF_VALUES_TRACE;
}

/* thread.c */
extern long pid_max;
extern pid_t first_pid;
extern int first_status;
extern int ssi_state;
extern struct um_sci cur_sci;
extern pid_t cur_tid;
struct um_thread *thr(pid_t tid); /* never NULL: a scratch record for a tid out of range */
void thread_forget(pid_t tid);      /* the thread is gone: its tid starts afresh */
int status_field(pid_t tid, const char *name, int absent); /* a number of /proc/TID/status */
pid_t tgid_of(pid_t tid);           /* its process (from /proc), tid if unknown */
void each_thread(pid_t tgid, void (*fn)(pid_t tid, void *arg), void *arg); /* from /proc */
uint64_t proc_status_mask(pid_t tid, const char *field);
int process_alive(pid_t tgid);
pid_t thread_max_seen(void);        /* the highest tid ever recorded */
void note_redirect(pid_t tid, int abi, int sc, uint64_t nr, const uint64_t *args, const char (*path)[UM_PATH_BUF],
                   const int *path_len, const int *path_kind, const struct um_decide_slot *slots);
struct um_note *note_take(pid_t tid, int abi, uint64_t nr, const uint64_t *args); /* free() it */
int thread_table_init(void);

/* tracee.c */
int abi_from(uint32_t arch, uint64_t nr);
int abi_of(const struct um_sci *si);
int get_regs(int tid, struct user_regs_struct *r);
int set_call(int tid, int abi, long nr, const uint64_t *args);
int set_args_regs(int tid, int abi, const uint64_t *args);
int set_return(int tid, int abi, int64_t val);
int skip_call(pid_t tid, int abi, const uint64_t *args, int64_t rval);
int rewrite_call(pid_t tid, int abi, long nr, const uint64_t *args);
void write_failed(pid_t tid, const char *what, int err);



/* paths.c: path text for the fast path */
int normalize(char *p);
int read_link(const char *proc, char *out, int size);
int has_dotdot(const char *p);
int names_cwd(const char *p);
int prefix_match(const char *p, int *at, int plain_first);
static inline int prefix_kind_at(const char *p, int *at) { return prefix_match(p, at, 1); }
static inline int prefix_kind_of(const char *p) { return prefix_match(p, NULL, 1); }
static inline int prefix_kind_longest(const char *p) { return prefix_match(p, NULL, 0); }
static inline int is_alias(int kind) { return kind == UM_PREFIX_ALIAS || kind == UM_PREFIX_ALIAS_CLEAN; }
static inline int is_plain(int kind) { return kind == UM_PREFIX_PLAIN || kind == UM_PREFIX_MOVE; }
static inline int comp_is(const char *s, size_t l, const char *name) { return l == strlen(name) && !strncmp(s, name, l); }
int base_under(const char *base, int i);
int symlink_on_path(const char *raw, int follow);
int walk_needs_python(const char *raw, int writes);
const char *next_comp(const char **c, size_t *len);
int proc_mem(const char *p);
int proc_magic(const char *p);
int climbs_through_view(const char *raw, size_t base_len);
int upper_literal(const struct um_decide_slot *st, const char *raw, const char *path, size_t n);
int move_literal(const char *raw, int i);
/* decide.c: the decision's settings */
extern int check_symlinks;
/* exec.c: what an exec runs */
int exec_needs_python(const char *path);

#endif
