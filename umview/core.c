/* core.c - umview's C core.
 *
 * One loop on waitpid(-1, __WALL) owns every ptrace stop. A seccomp filter,
 * built from the calls Python says an engine may claim, makes only those calls
 * stop (SECCOMP_RET_TRACE); every other call runs with no stop at all. At a
 * trapped call C decodes it (PTRACE_GET_SYSCALL_INFO), looks the number up in
 * the per-ABI table, and decides from the claim table and the path-prefix
 * table whether Python must see it. If not, the tracee is resumed with
 * PTRACE_CONT: one stop, no exit stop, no Python.
 *
 * See docs/internals.md for signals, group-stop, exec and thread exit.
 */
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

/* Debian 12's headers predate these (Linux 6.16) */
#ifndef PTRACE_GET_SYSCALL_INFO
#define PTRACE_GET_SYSCALL_INFO 0x420e
#endif
#define UM_PTRACE_SET_SYSCALL_INFO 0x4212
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS _IOW('!', 4, uint64_t) /* Linux 6.6 */
#endif
#define UM_NOTIF_SYNC_WAKE_UP 1 /* SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP */
#define SYS_pidfd_open_ 434
#define SYS_pidfd_getfd_ 438
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
#define AT_FDCWD_ -100
#define AT_EMPTY_PATH_ 0x1000

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

/* ------------------------------------------------------------------ */
/* tables                                                              */
/* ------------------------------------------------------------------ */

#define MAX_NR 1024 /* numbers above this (x32 bias removed) are unknown */
#define MAX_SC 2048
#define PATH_SLOTS 2

struct path_arg {
    signed char path;     /* arg index of the path, -1 = none */
    signed char dirfd;    /* arg index of its dirfd, -1 = relative to cwd */
    signed char emptyflg; /* arg index of AT flags honouring AT_EMPTY_PATH, -1 = none */
};

static short nr_to_sc[UM_NABI][MAX_NR];
static struct path_arg path_args[UM_NABI][MAX_SC][PATH_SLOTS];
static unsigned char claim[MAX_SC];
static int nsc;
static int control_sc = -1; /* the neutral index of UM_NR_CONTROL (core.h) */

static char *prefixes[256];
static size_t prefix_len[256];
static unsigned char prefix_kind[256]; /* UM_PREFIX_* */
static int nprefixes;

/* per neutral call: does it modify the file system (UM_WRITE_*), and which
 * argument says so */
static unsigned char write_kind[MAX_SC];
static signed char write_arg[MAX_SC];

struct regmap {
    int nr, ret, args[6];
};
#define UR(f) (int)offsetof(struct user_regs_struct, f)
/* the arch/ tables' register maps, until Python sets them: a view with no
 * engine loads no tables, yet answers the control call */
static struct regmap regmap[UM_NABI] = {
    [UM_ABI_X86_64] = {UR(orig_rax), UR(rax), {UR(rdi), UR(rsi), UR(rdx), UR(r10), UR(r8), UR(r9)}},
    [UM_ABI_I386] = {UR(orig_rax), UR(rax), {UR(rbx), UR(rcx), UR(rdx), UR(rsi), UR(rdi), UR(rbp)}},
    [UM_ABI_X32] = {UR(orig_rax), UR(rax), {UR(rdi), UR(rsi), UR(rdx), UR(r10), UR(r8), UR(r9)}},
};

/* filter: per ABI, a bitmap of trapped numbers */
static unsigned char trap[UM_NABI][MAX_NR];
/* traps added after the first process ran (filter_fixed): injected */
static unsigned char extra_trap[UM_NABI][MAX_NR];
static int extra_dirty;


static int event_mask;
static int spin_iterations;
static struct um_stats stats;

/* per-tid flags, indexed by tid (lazily zero pages: costs only what is touched) */
#define TF_EXIT_WANTED 1
#define TF_SEEN 2
#define TF_EXECED 4    /* execve succeeded while its exit stop was pending */
#define TF_VCWD 8      /* its cwd is virtual: relative paths need Python */
#define TF_ANNOUNCED 16 /* its parent's fork/clone event was seen (or it is the first) */
#define TF_HELD 32     /* new tracee kept stopped until its parent's event is seen */
#define TF_REDIRECT 64 /* a notification needs Python: interrupted, its restart is awaited */
#define TF_AWAIT_ENTRY 128 /* resumed with PTRACE_SYSCALL for the restarted call's entry stop */
#define TF_PASS 256    /* handled at its entry stop: let its coming notification through */
#define TF_FAITHFUL 512 /* with TF_VCWD: the kernel's cwd shows the names the virtual one
                         * does, so a relative path without ".." needs no Python */
#define TF_NEEDFILTER 1024 /* its process lacks the filter of the current traps: stack
                            * one on it at its next interrupt stop (um_filter_inject) */
#define TF_INJECTED 2048  /* um_inject ran: the pending call waits at its syscall-entry stop */
#define TF_INJECTING 4096 /* in um_inject: its notifications are answered CONTINUE */
typedef uint16_t tflag_t;
static tflag_t *tflags;
static long pid_max = 4194304;

static pid_t first_pid;
static int first_status = -1;
static int ssi_state; /* 0 unknown, 1 works, -1 absent */

/* the one outstanding stop handed to Python, and its thread */
static struct um_sci cur_sci;
static pid_t cur_tid;

int um_core_version(void) { return UM_CORE_VERSION; }

static tflag_t *tf(pid_t tid)
{
    static tflag_t dummy;
    if (tid <= 0 || tid > pid_max) {
        dummy = 0;
        return &dummy;
    }
    return &tflags[tid];
}

/* Once the first tracee runs, its filter is fixed: the trap table must keep
 * saying what the kernel does (a call Python claims later but that the
 * filter notifies must still be taken as a notification), so changes are
 * ignored from then on. */
static int filter_fixed;

int um_init(void)
{
    filter_fixed = 0; /* a new view: its filter is yet to be built */
    memset(extra_trap, 0, sizeof extra_trap);
    extra_dirty = 0;
    if (!tflags) {
        FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
        if (f) {
            if (fscanf(f, "%ld", &pid_max) != 1)
                pid_max = 4194304;
            fclose(f);
        }
        tflags = calloc((size_t)pid_max + 1, sizeof *tflags);
        if (!tflags)
            return -ENOMEM;
    }
    return 0;
}

void um_stats_get(struct um_stats *out) { *out = stats; }

int um_table_reset(int n)
{
    if (n < 0 || n > MAX_SC)
        return -EINVAL;
    nsc = n;
    control_sc = -1;
    for (int a = 0; a < UM_NABI; a++)
        for (int i = 0; i < MAX_NR; i++)
            nr_to_sc[a][i] = -1;
    memset(path_args, -1, sizeof path_args);
    memset(claim, 0, sizeof claim);
    memset(write_kind, 0, sizeof write_kind);
    return 0;
}

int um_set_control_sc(int sc)
{
    if (sc < -1 || sc >= nsc)
        return -EINVAL;
    control_sc = sc;
    return 0;
}

/* the one bounds-checked look-up from (abi, nr) to a neutral index */
static int lookup_sc(int abi, long nr)
{
    if (abi == UM_ABI_X32)
        nr &= ~X32_BIT;
    if (nr == UM_NR_CONTROL && abi >= 0 && abi < UM_NABI)
        return control_sc;
    if (abi < 0 || abi >= UM_NABI || nr < 0 || nr >= MAX_NR)
        return -1;
    return nr_to_sc[abi][nr];
}

int um_map_nr(int abi, long nr, int sc)
{
    if (abi == UM_ABI_X32)
        nr &= ~X32_BIT;
    if (abi < 0 || abi >= UM_NABI || nr < 0 || nr >= MAX_NR || sc < 0 || sc >= nsc)
        return -EINVAL;
    nr_to_sc[abi][nr] = (short)sc;
    return 0;
}

int um_set_path_arg(int abi, int sc, int slot, int path_idx, int dirfd_idx, int emptyflg_idx)
{
    if (abi < 0 || abi >= UM_NABI || sc < 0 || sc >= nsc || slot < 0 || slot >= PATH_SLOTS || path_idx < 0 || path_idx > 5 ||
        dirfd_idx < -1 || dirfd_idx > 5 || emptyflg_idx < -1 || emptyflg_idx > 5)
        return -EINVAL;
    path_args[abi][sc][slot].path = (signed char)path_idx;
    path_args[abi][sc][slot].dirfd = (signed char)dirfd_idx;
    path_args[abi][sc][slot].emptyflg = (signed char)emptyflg_idx;
    return 0;
}

int um_set_claim(int sc, int mode)
{
    if (sc < 0 || sc >= nsc)
        return -EINVAL;
    claim[sc] = (unsigned char)mode;
    return 0;
}


int um_prefix_clear(void)
{
    for (int i = 0; i < nprefixes; i++)
        free(prefixes[i]);
    nprefixes = 0;
    return 0;
}

int um_prefix_add_kind(const char *p, int kind)
{
    size_t l = strlen(p);
    if (nprefixes >= (int)(sizeof prefixes / sizeof prefixes[0]))
        return -ENOSPC;
    if (l == 0 || p[0] != '/' || kind < UM_PREFIX_PLAIN || kind > UM_PREFIX_ALIAS)
        return -EINVAL;
    while (l > 1 && p[l - 1] == '/')
        l--;
    prefixes[nprefixes] = strndup(p, l);
    if (!prefixes[nprefixes])
        return -ENOMEM;
    prefix_kind[nprefixes] = (unsigned char)kind;
    prefix_len[nprefixes++] = l;
    return 0;
}

int um_prefix_add(const char *p) { return um_prefix_add_kind(p, UM_PREFIX_PLAIN); }

int um_set_write(int sc, int kind, int argidx)
{
    if (sc < 0 || sc >= nsc || kind < UM_WRITE_NO || kind > UM_WRITE_ACCESS ||
        (kind >= UM_WRITE_OFLAGS && (argidx < 0 || argidx > 5)))
        return -EINVAL;
    write_kind[sc] = (unsigned char)kind;
    write_arg[sc] = (signed char)argidx;
    return 0;
}

int um_set_regmap(int abi, int nr_off, int ret_off, const int *arg_offs)
{
    if (abi < 0 || abi >= UM_NABI)
        return -EINVAL;
    regmap[abi].nr = nr_off;
    regmap[abi].ret = ret_off;
    for (int i = 0; i < 6; i++)
        regmap[abi].args[i] = arg_offs[i];
    return 0;
}

int um_filter_clear(void)
{
    if (filter_fixed)
        return 0;
    memset(trap, 0, sizeof trap);
    return 0;
}

int um_filter_trap_nr(int abi, long nr, int how)
{
    if (abi == UM_ABI_X32)
        nr &= ~X32_BIT;
    if (abi < 0 || abi >= UM_NABI || nr < 0 || nr >= MAX_NR || (how != UM_TRAP_TRACE && how != UM_TRAP_NOTIF))
        return -EINVAL;
    if (filter_fixed) {
        /* a trap the running filter lacks: for a filter stacked on each
         * tracee (um_filter_inject) */
        if (!trap[abi][nr] && !extra_trap[abi][nr]) {
            extra_trap[abi][nr] = UM_TRAP_TRACE;
            extra_dirty = 1;
        }
        return 0;
    }
    /* a call both classes want is traced: ptrace can do all a notification can */
    if (trap[abi][nr] != UM_TRAP_TRACE)
        trap[abi][nr] = (unsigned char)how;
    return 0;
}

void um_set_event_mask(int mask) { event_mask = mask; }
void um_set_spin(int n) { spin_iterations = n < 0 ? 0 : n; }

/* ------------------------------------------------------------------ */
/* the layer set                                                       */
/* ------------------------------------------------------------------ */

/* The paths under layered prefixes that the upper layer changes, with their
 * kind (UM_LAYER_DIR or UM_LAYER_HIDE), mirrored from the Python module. A
 * look-up is made for every component of every path under a layered prefix,
 * so: open addressing with linear probing over (pointer, length) keys, which
 * lets a path's ancestors be looked up in place, without copying or
 * allocating. The table stays at most half full (tombstones included). */
struct layer_slot {
    char *path; /* NULL: empty; &layer_tomb: deleted */
    size_t len;
    int kind;
};
static struct layer_slot *layer_tab;
static size_t layer_cap, layer_used, layer_live; /* used = live + tombstones */
static char layer_tomb;

static size_t hash_path(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return (size_t)(h ^ (h >> 29));
}

static struct layer_slot *layer_find(const char *p, size_t n)
{
    if (!layer_live)
        return NULL;
    for (size_t i = hash_path(p, n) & (layer_cap - 1);; i = (i + 1) & (layer_cap - 1)) {
        struct layer_slot *e = &layer_tab[i];
        if (!e->path)
            return NULL;
        if (e->path != &layer_tomb && e->len == n && memcmp(e->path, p, n) == 0)
            return e;
    }
}

/* The empty or deleted slot where a key absent from the table goes. */
static struct layer_slot *layer_free_slot(const char *p, size_t n)
{
    for (size_t i = hash_path(p, n) & (layer_cap - 1);; i = (i + 1) & (layer_cap - 1))
        if (!layer_tab[i].path || layer_tab[i].path == &layer_tomb)
            return &layer_tab[i];
}

static int layer_rehash(size_t cap)
{
    struct layer_slot *old = layer_tab;
    size_t old_cap = layer_cap;
    layer_tab = calloc(cap, sizeof *layer_tab);
    if (!layer_tab) {
        layer_tab = old;
        return -ENOMEM;
    }
    layer_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].path && old[i].path != &layer_tomb)
            *layer_free_slot(old[i].path, old[i].len) = old[i];
    layer_used = layer_live;
    free(old);
    return 0;
}

/* strip trailing slashes, as um_prefix_add does: keys are normalized paths */
static size_t layer_key_len(const char *p)
{
    size_t l = strlen(p);
    while (l > 1 && p[l - 1] == '/')
        l--;
    return l;
}

int um_layer_add(const char *p, int kind)
{
    if (p[0] != '/' || (kind != UM_LAYER_DIR && kind != UM_LAYER_HIDE))
        return -EINVAL;
    size_t n = layer_key_len(p);
    struct layer_slot *e = layer_find(p, n);
    if (e) {
        e->kind = kind;
        return 0;
    }
    if ((layer_used + 1) * 2 > layer_cap) {
        size_t cap = 64;
        while (cap < (layer_live + 1) * 4)
            cap *= 2;
        int r = layer_rehash(cap);
        if (r)
            return r;
    }
    char *key = strndup(p, n);
    if (!key)
        return -ENOMEM;
    e = layer_free_slot(p, n);
    if (!e->path)
        layer_used++;
    *e = (struct layer_slot){key, n, kind};
    layer_live++;
    return 0;
}

int um_layer_del(const char *p)
{
    struct layer_slot *e = layer_find(p, layer_key_len(p));
    if (!e)
        return -ENOENT;
    free(e->path);
    e->path = &layer_tomb;
    layer_live--;
    return 0;
}

void um_layer_clear(void)
{
    for (size_t i = 0; i < layer_cap; i++)
        if (layer_tab[i].path && layer_tab[i].path != &layer_tomb)
            free(layer_tab[i].path);
    if (layer_tab)
        memset(layer_tab, 0, layer_cap * sizeof *layer_tab);
    layer_used = layer_live = 0;
}

int um_layer_get(const char *p)
{
    struct layer_slot *e = layer_find(p, layer_key_len(p));
    return e ? e->kind : 0;
}

/* Must Python see a call that reads the normalized path p, under a layered
 * prefix? Yes if p itself is in the set (the upper layer changes it), or a
 * proper ancestor is a HIDE entry (the lower tree below it is hidden). */
static int layer_hit(const char *p, size_t n)
{
    if (!layer_live)
        return 0;
    if (layer_find(p, n))
        return 1;
    const struct layer_slot *e = layer_find("/", 1);
    if (e && e->kind == UM_LAYER_HIDE)
        return 1;
    for (size_t i = 1; i < n; i++)
        if (p[i] == '/' && (e = layer_find(p, i)) && e->kind == UM_LAYER_HIDE)
            return 1;
    return 0;
}

/* ------------------------------------------------------------------ */
/* the seccomp filter                                                  */
/* ------------------------------------------------------------------ */

#define MAX_INSNS 4096
struct bpf_buf {
    struct sock_filter f[MAX_INSNS];
    int n;
    int overflow;
};

static void emit(struct bpf_buf *b, struct sock_filter s)
{
    if (b->n >= MAX_INSNS) {
        b->overflow = 1;
        return;
    }
    b->f[b->n++] = s;
}

/* Emit a binary search over the sorted numbers nrs[lo..hi): on a match,
 * RET_TRACE or RET_USER_NOTIF as the number's trap class says, RET_ALLOW
 * otherwise. The accumulator holds the number. Long jumps use BPF_JA (32-bit
 * offset) so any table size fits. */
static void emit_search(struct bpf_buf *b, const long *nrs, const unsigned char *how, int lo, int hi,
                        uint32_t bias)
{
    if (hi - lo <= 4) {
        for (int i = lo; i < hi; i++) {
            uint32_t ret = how[nrs[i]] == UM_TRAP_NOTIF ? SECCOMP_RET_USER_NOTIF : SECCOMP_RET_TRACE;
            emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nrs[i] | bias, 0, 1));
            emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, ret));
        }
        emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
        return;
    }
    int mid = (lo + hi) / 2;
    /* if nr >= nrs[mid]: fall into the "ja right"; else skip it to the left half */
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)nrs[mid] | bias, 0, 1));
    int ja = b->n;
    emit(b, (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 0));
    emit_search(b, nrs, how, lo, mid, bias);
    if (!b->overflow)
        b->f[ja].k = (uint32_t)(b->n - ja - 1);
    emit_search(b, nrs, how, mid, hi, bias);
}

static int collect(const unsigned char *tab, long *out)
{
    int n = 0;
    for (long i = 0; i < MAX_NR; i++)
        if (tab[i])
            out[n++] = i;
    return n;
}

/* the control channel: trapped on every ABI, whatever the modules claim */
static void emit_control(struct bpf_buf *b, uint32_t bias)
{
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, UM_NR_CONTROL | bias, 0, 1));
    emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE));
}

/* The filter of the trap table tab (trap classes per ABI and number). */
static int build_filter_of(struct bpf_buf *b, unsigned char (*tab)[MAX_NR])
{
    static long nrs[MAX_NR];
    b->n = 0;
    b->overflow = 0;
    /* [0] load arch; jump to the per-ABI sections patched below */
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
    int j64 = b->n;
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 1));
    emit(b, (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 0)); /* -> L64 */
    int j32 = b->n;
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_I386, 0, 1));
    emit(b, (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 0)); /* -> L32 */
    /* an ABI the filter does not model: refuse, never allow by default */
    emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));

    int l64 = b->n;
    b->f[j64 + 1].k = (uint32_t)(l64 - (j64 + 1) - 1);
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
    int jx32 = b->n;
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)X32_BIT, 0, 1));
    emit(b, (struct sock_filter)BPF_STMT(BPF_JMP | BPF_JA, 0)); /* -> LX32 */
    emit_control(b, 0);
    emit_search(b, nrs, tab[UM_ABI_X86_64], 0, collect(tab[UM_ABI_X86_64], nrs), 0);

    int lx32 = b->n;
    b->f[jx32 + 1].k = (uint32_t)(lx32 - (jx32 + 1) - 1);
    emit_control(b, (uint32_t)X32_BIT);
    emit_search(b, nrs, tab[UM_ABI_X32], 0, collect(tab[UM_ABI_X32], nrs), (uint32_t)X32_BIT);

    int l32 = b->n;
    b->f[j32 + 1].k = (uint32_t)(l32 - (j32 + 1) - 1);
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
    emit_control(b, 0);
    emit_search(b, nrs, tab[UM_ABI_I386], 0, collect(tab[UM_ABI_I386], nrs), 0);
    return b->overflow ? -E2BIG : 0;
}

static int build_filter(struct bpf_buf *b) { return build_filter_of(b, trap); }

static int any_notif(void)
{
    for (int a = 0; a < UM_NABI; a++)
        for (int i = 0; i < MAX_NR; i++)
            if (trap[a][i] == UM_TRAP_NOTIF)
                return 1;
    return 0;
}

/* Install the filter in the calling (child) process; *listener gets the fd
 * of its user notifications, or -1 if it has no notification trap. */
static int install_filter(int *listener)
{
    *listener = -1;
    static struct bpf_buf b;
    int r = build_filter(&b);
    if (r)
        return r;
    struct sock_fprog prog = {(unsigned short)b.n, b.f};
    unsigned long flags = any_notif() ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0;
    /* without CAP_SYS_ADMIN the kernel wants no_new_privs; with it (root),
     * leave setuid programs working as they do natively */
    long ret = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
    if (ret < 0 && errno == EACCES) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
            return -errno;
        ret = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
    }
    if (ret < 0)
        return -errno;
    if (flags)
        *listener = (int)ret;
    return 0;
}

/* ------------------------------------------------------------------ */
/* spawning                                                            */
/* ------------------------------------------------------------------ */

/* Signals the monitor passes on instead of acting on them. One the kernel
 * sent to the whole foreground group (Ctrl-C, Ctrl-Z, a resize: si_code
 * SI_KERNEL) reached the tracees by itself and is dropped; one sent to the
 * monitor alone (kill, timeout) is forwarded to the first process, so that
 * `kill -INT <umview>` does what `kill -INT <command>` does natively. */
static const int passed_signals[] = {SIGINT,  SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGTERM,
                                     SIGHUP,  SIGUSR1, SIGUSR2, SIGALRM, SIGPIPE, SIGWINCH};
#define NPASSED (int)(sizeof passed_signals / sizeof passed_signals[0])
static struct sigaction saved_actions[NPASSED];

static void pass_signal(int sig, siginfo_t *info, void *uc)
{
    (void)uc;
    if (info->si_code == SI_KERNEL || info->si_pid == getpid())
        return;
    if (first_pid > 0)
        kill(first_pid, sig);
}

static void install_signal_passing(void)
{
    for (int i = 0; i < NPASSED; i++) {
        struct sigaction sa = {0};
        sa.sa_sigaction = pass_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(passed_signals[i], &sa, &saved_actions[i]);
        /* ignored when umview started (e.g. SIGINT in a background job of a
         * script): the command inherited that, keep it for the monitor too.
         * Not SIGPIPE: Python ignores it itself, and the child resets it. */
        if (saved_actions[i].sa_handler == SIG_IGN && passed_signals[i] != SIGPIPE)
            sigaction(passed_signals[i], &saved_actions[i], NULL);
    }
}

static void write_errno(int fd, int e)
{
    ssize_t r = write(fd, &e, sizeof e);
    (void)r;
}

static int spawn_err_fd = -1;
/* the user-notification listener: the child reports its number on setup_fd,
 * the monitor takes it with pidfd_getfd and then lets the child exec (go_fd) */
static int setup_fd = -1, go_fd = -1, listener_fd = -1, sigchld_fd = -1;
static sigset_t saved_mask;

/* Fork the first process, seize it, and let it install the filter and exec.
 * Returns its pid. A failure of the filter or of exec is reported by the child
 * through a CLOEXEC pipe (EOF means exec succeeded) and read after the loop
 * with um_spawn_error(): the loop must run meanwhile, since a claimed execve
 * stops in the tracer. */
int um_spawn(char *const argv[], int flags)
{
    (void)flags;
    int go[2], err[2], lp[2];
    int r = um_init();
    if (r)
        return r;
    if (pipe2(go, O_CLOEXEC))
        return -errno;
    if (pipe2(err, O_CLOEXEC)) {
        r = -errno;
        close(go[0]);
        close(go[1]);
        return r;
    }
    if (pipe2(lp, O_CLOEXEC)) {
        r = -errno;
        close(go[0]); close(go[1]); close(err[0]); close(err[1]);
        return r;
    }
    pid_t parent = getpid();
    filter_fixed = 1;
    pid_t pid = fork();
    if (pid < 0) {
        r = -errno;
        close(go[0]); close(go[1]); close(err[0]); close(err[1]); close(lp[0]); close(lp[1]);
        return r;
    }
    if (pid == 0) {
        char c;
        close(go[1]);
        close(err[0]);
        close(lp[0]);
        /* if the monitor dies before it has seized us, die too */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        /* Python ignores SIGPIPE and SIGXFSZ: programs expect the default */
        signal(SIGPIPE, SIG_DFL);
        signal(SIGXFSZ, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* go on only once the monitor holds us (a byte, not EOF): a trapped
         * call with no tracer attached would fail with ENOSYS */
        ssize_t n;
        do
            n = read(go[0], &c, 1);
        while (n < 0 && errno == EINTR);
        if (n != 1)
            _exit(127);
        int listener;
        r = install_filter(&listener);
        if (r) {
            write_errno(err[1], -r);
            _exit(126);
        }
        if (listener >= 0) {
            /* the monitor takes the listener from us (pidfd_getfd), then says go */
            if (write(lp[1], &listener, sizeof listener) != sizeof listener)
                _exit(127);
            do
                n = read(go[0], &c, 1);
            while (n < 0 && errno == EINTR);
            if (n != 1)
                _exit(127);
            close(listener);
        }
        close(lp[1]);
        close(go[0]);
        execvp(argv[0], argv);
        write_errno(err[1], errno);
        _exit(errno == ENOENT ? 127 : 126);
    }
    close(go[0]);
    close(err[1]);
    close(lp[1]);
    if (ptrace(PTRACE_SEIZE, pid, 0, TRACE_OPTIONS)) {
        r = -errno;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, __WALL);
        close(go[1]);
        close(err[0]);
        close(lp[0]);
        return r;
    }
    first_pid = pid;
    first_status = -1;
    stats.processes++;
    *tf(pid) = TF_SEEN | TF_ANNOUNCED;
    install_signal_passing();
    if (write(go[1], "g", 1) != 1) {
        r = -errno;
        kill(pid, SIGKILL);
        close(go[1]);
        close(err[0]);
        close(lp[0]);
        return r;
    }
    spawn_err_fd = err[0];
    if (any_notif()) {
        /* the loop serves notifications and ptrace stops together: SIGCHLD
         * through a signalfd tells it a tracee stopped */
        sigset_t chld;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        sigprocmask(SIG_BLOCK, &chld, &saved_mask);
        sigchld_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
        setup_fd = lp[0];
        go_fd = go[1];
    } else {
        close(lp[0]);
        close(go[1]);
    }
    return pid;
}

/* The child reported its listener's number: take it, let the child exec. */
static void take_listener(void)
{
    int n = -1;
    ssize_t k = read(setup_fd, &n, sizeof n);
    close(setup_fd);
    setup_fd = -1;
    if (k == sizeof n && n >= 0) {
        int pidfd = (int)syscall(SYS_pidfd_open_, first_pid, 0);
        if (pidfd >= 0) {
            listener_fd = (int)syscall(SYS_pidfd_getfd_, pidfd, n, 0);
            close(pidfd);
        }
        if (listener_fd >= 0) {
            uint64_t flag = UM_NOTIF_SYNC_WAKE_UP;
            ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flag);
            fcntl(listener_fd, F_SETFD, FD_CLOEXEC);
        }
    }
    if (write(go_fd, "g", 1) != 1) {
        /* the child is gone */
    }
    close(go_fd);
    go_fd = -1;
}

/* Can this kernel serve the fast path with user notifications that wake on
 * the same CPU (Linux 6.6)? Tried once, in a throw-away child. */
int um_notif_supported(void)
{
    static int state; /* 0 unknown, 1 yes, -1 no */
    if (state)
        return state > 0;
    state = -1;
    int lp[2], go[2];
    if (pipe2(lp, O_CLOEXEC) || pipe2(go, O_CLOEXEC))
        return 0;
    pid_t c = fork();
    if (c < 0)
        return 0;
    if (c == 0) {
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = {4, f};
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        int fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
        char b;
        if (write(lp[1], &fd, sizeof fd) != sizeof fd || read(go[0], &b, 1) != 1)
            _exit(1);
        _exit(0);
    }
    int fd = -1, ok = 0;
    if (read(lp[0], &fd, sizeof fd) == sizeof fd && fd >= 0) {
        int pidfd = (int)syscall(SYS_pidfd_open_, c, 0);
        int l = pidfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd_, pidfd, fd, 0);
        uint64_t flag = UM_NOTIF_SYNC_WAKE_UP;
        ok = l >= 0 && ioctl(l, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flag) == 0;
        if (l >= 0)
            close(l);
        if (pidfd >= 0)
            close(pidfd);
    }
    if (write(go[1], "g", 1) != 1) {
        /* the child exits anyway */
    }
    waitpid(c, NULL, 0);
    close(lp[0]); close(lp[1]); close(go[0]); close(go[1]);
    state = ok ? 1 : -1;
    return ok;
}

/* After the loop: the errno with which the first process failed to install
 * the filter or to exec, or 0 if it ran. */
int um_spawn_error(void)
{
    int e = 0;
    if (spawn_err_fd < 0)
        return 0;
    ssize_t n;
    do
        n = read(spawn_err_fd, &e, sizeof e);
    while (n < 0 && errno == EINTR);
    close(spawn_err_fd);
    spawn_err_fd = -1;
    return n == (ssize_t)sizeof e ? e : 0;
}

int um_first_status(void) { return first_status; }

/* ------------------------------------------------------------------ */
/* tracee memory                                                       */
/* ------------------------------------------------------------------ */

static int mem_fd_rw(int tid, uint64_t addr, void *buf, size_t len, int write)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/mem", tid);
    int fd = open(p, (write ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write ? pwrite(fd, buf, len, (off_t)addr) : pread(fd, buf, len, (off_t)addr);
    int e = errno;
    close(fd);
    if (n < 0)
        return -(e == EIO ? EFAULT : e);
    return (int)n;
}

int um_read_mem(int tid, uint64_t addr, void *buf, size_t len)
{
    struct iovec l = {buf, len}, r = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(tid, &l, 1, &r, 1, 0);
    if (n >= 0)
        return (int)n;
    if (errno == ENOSYS || errno == EPERM)
        return mem_fd_rw(tid, addr, buf, len, 0);
    return -errno;
}

int um_write_mem(int tid, uint64_t addr, const void *buf, size_t len)
{
    struct iovec l = {(void *)buf, len}, r = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_writev(tid, &l, 1, &r, 1, 0);
    if (n >= 0 && (size_t)n == len)
        return (int)n;
    /* read-only mappings, or no process_vm_writev: /proc/PID/mem writes through */
    return mem_fd_rw(tid, addr, (void *)buf, len, 1);
}

/* Read a NUL-terminated string without ever reading past the page that holds
 * its NUL: the first chunk stops at the page end, then page-sized chunks.
 * Returns its length, -EFAULT if its first byte is unreadable or it runs into
 * an unmapped page, -ENAMETOOLONG if no NUL within size-1 bytes. */
int um_read_string(int tid, uint64_t addr, char *buf, int size)
{
    int got = 0;
    if (size <= 0)
        return -EINVAL;
    while (got < size - 1) {
        uint64_t a = addr + (uint64_t)got;
        size_t chunk = 4096 - (a & 4095);
        if (got == 0 && chunk > 256)
            chunk = 256;
        if (chunk > (size_t)(size - 1 - got))
            chunk = (size_t)(size - 1 - got);
        int n = um_read_mem(tid, a, buf + got, chunk);
        if (n <= 0)
            return n < 0 ? n : -EFAULT;
        char *z = memchr(buf + got, 0, (size_t)n);
        if (z)
            return (int)(z - buf);
        got += n;
    }
    buf[size - 1] = 0;
    return -ENAMETOOLONG;
}

/* ------------------------------------------------------------------ */
/* path resolution for the fast path (lexical: no symlinks)            */
/* ------------------------------------------------------------------ */

/* Normalize an absolute path in place: collapse "//", drop ".", apply "..". */
static int normalize(char *p)
{
    char *out = p, *in = p;
    if (*in != '/')
        return -EINVAL;
    while (*in) {
        while (*in == '/')
            in++;
        if (!*in)
            break;
        char *end = strchrnul(in, '/');
        size_t l = (size_t)(end - in);
        if (l == 1 && in[0] == '.') {
            /* skip */
        } else if (l == 2 && in[0] == '.' && in[1] == '.') {
            while (out > p && *--out != '/')
                ;
        } else {
            *out++ = '/';
            memmove(out, in, l);
            out += l;
        }
        in = end;
    }
    if (out == p)
        *out++ = '/';
    *out = 0;
    return (int)(out - p);
}

static int read_link(const char *proc, char *out, int size)
{
    ssize_t n = readlink(proc, out, (size_t)size - 1);
    if (n < 0)
        return -errno;
    if (n >= size - 1)
        return -ENAMETOOLONG;
    out[n] = 0;
    return (int)n;
}

/* Does a path have a ".." component? */
static int has_dotdot(const char *p)
{
    for (const char *c = p; (c = strstr(c, "..")) != NULL; c += 2)
        if ((c == p || c[-1] == '/') && (c[2] == 0 || c[2] == '/'))
            return 1;
    return 0;
}

/* Resolve path argument `slot` of the call to an absolute, lexically
 * normalized path in out. An empty path with AT_EMPTY_PATH stands for its
 * dirfd: with fd_ok it resolves to the fd's path, without it -ENOENT (the
 * call acts on an open file, not on a path). Returns the length or -errno
 * (unreadable, too long, or the base directory is not a directory).
 * *climbs (if given): a relative path with a ".." component. */
static int resolve(int tid, const struct path_arg *pa, const uint64_t *args, char *out, int size, int fd_ok,
                   char *raw, int *climbs)
{
    if (climbs)
        *climbs = 0;
    if (pa->path < 0)
        return -ENOENT;
    char rel[PATH_MAX + 1];
    int n = um_read_string(tid, args[pa->path], rel, sizeof rel);
    if (n < 0)
        return n;
    stats.path_reads++;
    if (rel[0] == '/') {
        if (n >= size)
            return -ENAMETOOLONG;
        memcpy(out, rel, (size_t)n + 1);
        if (raw)
            memcpy(raw, rel, (size_t)n + 1);
        return normalize(out);
    }
    int dotdot = has_dotdot(rel);
    if (climbs)
        *climbs = dotdot;
    int dirfd = pa->dirfd >= 0 ? (int)args[pa->dirfd] : AT_FDCWD_;
    /* relative to a virtual cwd: only Python knows where that is */
    if (!fd_ok && n > 0 && dirfd == AT_FDCWD_ && (*tf(tid) & TF_VCWD) && !((*tf(tid) & TF_FAITHFUL) && !dotdot))
        return -EAGAIN;
    /* "" is ENOENT unless AT_EMPTY_PATH makes it the dirfd itself */
    if (n == 0 && (!fd_ok || pa->emptyflg < 0 || !(args[pa->emptyflg] & AT_EMPTY_PATH_)))
        return -ENOENT;
    char proc[64];
    if (dirfd == AT_FDCWD_)
        snprintf(proc, sizeof proc, "/proc/%d/cwd", tid);
    else
        snprintf(proc, sizeof proc, "/proc/%d/fd/%d", tid, dirfd);
    int b = read_link(proc, out, size);
    if (b < 0)
        return b == -ENOENT ? -EBADF : b;
    if (out[0] != '/')
        return -ENOTDIR; /* a pipe, socket or anon inode: not a directory */
    if (n == 0)
        return normalize(out);
    if (b + 1 + n >= size)
        return -ENAMETOOLONG;
    out[b] = '/';
    memcpy(out + b + 1, rel, (size_t)n + 1);
    if (raw)
        memcpy(raw, out, (size_t)(b + 1 + n) + 1);
    return normalize(out);
}

int um_resolve_path(int tid, int abi, int sc, int slot, const uint64_t *args, char *out, int size)
{
    if (abi < 0 || abi >= UM_NABI || sc < 0 || sc >= nsc || slot < 0 || slot >= PATH_SLOTS || size < 2)
        return -EINVAL;
    return resolve(tid, &path_args[abi][sc][slot], args, out, size, 1, NULL, NULL);
}

/* How the prefix table sees a normalized absolute path: UM_PREFIX_PLAIN if
 * a plain prefix holds it; otherwise the kind of the longest layered or real
 * prefix holding it (a real subtree of a layered mount stays real, a layered
 * one inside that is layered again; at equal length layered wins, the safer
 * side); -1 if no prefix holds it. */
static int prefix_kind_of(const char *p)
{
    int kind = -1;
    size_t best = 0;
    for (int i = 0; i < nprefixes; i++) {
        size_t l = prefix_len[i];
        if (l > 1 && (strncmp(p, prefixes[i], l) != 0 || (p[l] != 0 && p[l] != '/')))
            continue;
        if (prefix_kind[i] == UM_PREFIX_PLAIN)
            return UM_PREFIX_PLAIN;
        if (kind < 0 || l > best || (l == best && prefix_kind[i] == UM_PREFIX_LAYERED)) {
            kind = prefix_kind[i];
            best = l;
        }
    }
    return kind;
}

int um_prefix_kind(const char *p) { return p[0] == '/' ? prefix_kind_of(p) : -EINVAL; }

/* Does this call modify the file system (the write table)? */
static int call_writes(int tid, int sc, const uint64_t *args)
{
    const uint64_t wflags = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC; /* O_TMPFILE has O_RDWR or O_WRONLY */
    uint64_t flags;
    switch (write_kind[sc]) {
    case UM_WRITE_ALWAYS:
        return 1;
    case UM_WRITE_OFLAGS:
        return (args[write_arg[sc]] & wflags) != 0;
    case UM_WRITE_OPENHOW:
        /* unreadable: Python (and then the kernel) gives the EFAULT */
        if (um_read_mem(tid, args[write_arg[sc]], &flags, sizeof flags) != sizeof flags)
            return 1;
        return (flags & wflags) != 0;
    case UM_WRITE_ACCESS:
        return (args[write_arg[sc]] & 2 /* W_OK */) != 0;
    }
    return 0;
}

/* Is there a symlink on this absolute path (as the kernel would walk it,
 * ".." included, the last component followed)? One openat2 with
 * RESOLVE_NO_SYMLINKS (Linux 5.6+) answers; procfs is left alone (its magic
 * links name the tracee's own files, the kernel resolves them right). */
struct um_open_how {
    uint64_t flags, mode, resolve;
};
static int openat2_state; /* 0 unknown/works, -1 absent */
static int check_symlinks; /* set by Python when an engine walks symlinks in the view */
static uint64_t family_set;  /* socket families engines claim (UM_CLAIM_FAMILY): bit f = family f */
static int fd_check;       /* set by Python: see fd_needs_python */

void um_set_symlink_check(int on) { check_symlinks = on; }
void um_set_families(uint64_t bits) { family_set = bits; }
void um_set_fd_check(int on) { fd_check = on; }

static int symlink_on_path(const char *raw)
{
    if (openat2_state < 0 || strncmp(raw, "/proc/", 6) == 0)
        return 0;
    struct um_open_how how = {O_PATH | O_CLOEXEC, 0, 0x04 /* RESOLVE_NO_SYMLINKS */};
    int fd = (int)syscall(437 /* openat2 */, AT_FDCWD_, raw, &how, sizeof how);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (errno == ENOSYS || errno == E2BIG)
        openat2_state = -1;
    return errno == ELOOP;
}

/* One path a symlink walk reaches: must Python see the call because of it?
 * Intermediate paths matter only if something below them is hidden; the
 * final one also if the upper layer changes the directory itself. */
static int visit_needs_python(const char *p, size_t n, int final, int writes)
{
    int k = prefix_kind_of(p);
    if (k == UM_PREFIX_PLAIN)
        return 1;
    if (k != UM_PREFIX_LAYERED)
        return 0;
    if (writes)
        return 1;
    const struct layer_slot *e = layer_find(p, n);
    return e && (e->kind == UM_LAYER_HIDE || final);
}

#define MAX_LINKS 40 /* the kernel's MAXSYMLINKS */

/* Walk a raw absolute path with a symlink on it as the kernel would, with
 * readlink(2) on the real tree, and check every path the walk reaches: a
 * link may lead under a prefix, or to a path the layer set names, although
 * the path does not lie there lexically. The last component is followed
 * even for calls that do not follow it: that checks one path more, which can
 * only send a call to Python that did not need it. A component the real tree
 * lacks ends the readlinks (the kernel stops there too), but the rest is
 * still checked lexically: the upper layer may have it. Returns 1 if Python
 * must see the call, or the walk is unsure; 0 if it may run natively. */
static int walk_needs_python(const char *raw, int writes)
{
    char cur[PATH_MAX + 1];      /* resolved so far, normalized, no trailing '/' */
    char rest[2 * PATH_MAX + 2]; /* still to walk */
    char link[PATH_MAX + 1];
    size_t n = strlen(raw), clen = 1;
    int links = 0, missing = 0;
    stats.layer_walks++;
    if (raw[0] != '/' || n >= sizeof rest)
        return 1;
    memcpy(rest, raw, n + 1);
    strcpy(cur, "/");
    for (char *r = rest;;) {
        while (*r == '/')
            r++;
        if (!*r)
            break;
        char *end = strchrnul(r, '/');
        size_t l = (size_t)(end - r), parent = clen;
        if (l == 1 && r[0] == '.') {
            r = end;
            continue;
        }
        if (l == 2 && r[0] == '.' && r[1] == '.') {
            /* ".." leaves the resolved directory; past a component the real
             * tree lacks, only the view knows where it leads */
            if (missing)
                return 1;
            char *slash = strrchr(cur, '/');
            clen = slash == cur ? 1 : (size_t)(slash - cur);
            cur[clen] = 0;
            r = end;
            continue;
        }
        if (clen + 1 + l > PATH_MAX)
            return 1;
        if (clen > 1)
            cur[clen++] = '/';
        memcpy(cur + clen, r, l);
        clen += l;
        cur[clen] = 0;
        r = end;
        if (visit_needs_python(cur, clen, 0, writes))
            return 1;
        if (clen >= 6 && strncmp(cur, "/proc/", 6) == 0)
            return 0; /* its magic links are the tracee's: see symlink_on_path */
        if (missing)
            continue;
        ssize_t t = readlink(cur, link, sizeof link);
        if (t < 0) {
            if (errno == EINVAL)
                continue; /* not a symlink */
            if (errno == ENOENT || errno == ENOTDIR) {
                missing = 1;
                continue;
            }
            return 1;
        }
        if (t == 0 || t >= (ssize_t)sizeof link)
            return t == 0 ? 0 : 1; /* an empty target is ENOENT natively */
        if (++links > MAX_LINKS)
            return 0; /* the kernel gives ELOOP by itself */
        /* rest = link + "/" + what follows the link */
        size_t m = strlen(r);
        if ((size_t)t + 1 + m + 1 > sizeof rest)
            return 1;
        memmove(rest + t + 1, r, m + 1);
        memcpy(rest, link, (size_t)t);
        rest[t] = '/';
        r = rest;
        /* a relative target is walked from the link's directory, an absolute one from "/" */
        clen = link[0] == '/' ? 1 : parent;
        cur[clen] = 0; /* cur[0] is always '/' */
    }
    return visit_needs_python(cur, clen, 1, writes);
}

/* An empty path with AT_EMPTY_PATH, or a NULL one (utimensat, futimesat),
 * names the dirfd itself (glibc's fstat is newfstatat(fd, "",
 * AT_EMPTY_PATH)): Python sees the call if that fd's file lies under a plain
 * prefix (a module that serves directory listings from a private directory
 * must translate fstat on them), or if the call writes and the file lies
 * under a layered prefix (a lower file changed through an fd, as futimens or
 * fchownat(fd, "", AT_EMPTY_PATH) do, must be copied up first). Costs a
 * readlink, so only with fd_check. */
static int fd_needs_python(int tid, int sc, const struct path_arg *pa, const uint64_t *args)
{
    char c, proc[64], path[PATH_MAX + 1];
    if (pa->dirfd < 0)
        return 0;
    if (args[pa->path] != 0) {
        if (pa->emptyflg < 0 || !(args[pa->emptyflg] & AT_EMPTY_PATH_))
            return 0;
        if (um_read_mem(tid, args[pa->path], &c, 1) != 1 || c != 0)
            return 0;
    }
    int fd = (int)args[pa->dirfd];
    if (fd == AT_FDCWD_)
        snprintf(proc, sizeof proc, "/proc/%d/cwd", tid);
    else
        snprintf(proc, sizeof proc, "/proc/%d/fd/%d", tid, fd);
    if (read_link(proc, path, sizeof path) < 0 || path[0] != '/')
        return 0; /* a bad fd (the kernel says so), or a pipe, socket ... */
    int k = prefix_kind_of(path);
    return k == UM_PREFIX_PLAIN || (k == UM_PREFIX_LAYERED && call_writes(tid, sc, args));
}

/* Is fd's file under a plain prefix (a private directory of a module, such
 * as viewfs's listing directories, whose getdents it fixes)? A readlink. */
static int fd_under_plain(int tid, int fd)
{
    char proc[64], path[PATH_MAX + 1];
    if (fd < 0)
        return 0;
    snprintf(proc, sizeof proc, "/proc/%d/fd/%d", tid, fd);
    if (read_link(proc, path, sizeof path) < 0 || path[0] != '/')
        return 0; /* a bad fd (the kernel says so), or a pipe, socket ... */
    return prefix_kind_of(path) == UM_PREFIX_PLAIN;
}

/* Does Python need to see this trapped call? For each path argument: under
 * a plain prefix, yes; under a layered one (and no real one inside it), if
 * the call writes or the layer set names the path; and if a symlink is on
 * the way, whatever the walk finds (see docs/internals.md). */
static int needs_python(int tid, int abi, int sc, const uint64_t *args)
{
    int c = claim[sc];
    if (c & UM_CLAIM_ALL)
        return 1;
    if ((c & UM_CLAIM_FD) && fd_under_plain(tid, (int)args[0]))
        return 1;
    if ((c & UM_CLAIM_VCWD) && (*tf(tid) & TF_VCWD))
        return 1;
    if (c & UM_CLAIM_FAMILY) {
        int family = (int)args[0];
        if (family < 0 || family >= 64 || (family_set >> family) & 1)
            return 1;
    }
    if ((c & UM_CLAIM_UNIXADDR) && args[2] > 2) {
        unsigned char head[3];
        if (um_read_mem(tid, args[1], head, sizeof head) == (int)sizeof head && head[0] == AF_UNIX &&
            head[1] == 0 && head[2] != 0)
            return 1;
    }
    if (!(c & UM_CLAIM_PATH))
        return 0;
    char buf[PATH_MAX + 1], raw[PATH_MAX + 1];
    int writes = -1; /* looked up once, when a layered path needs it */
    for (int s = 0; s < PATH_SLOTS; s++) {
        const struct path_arg *pa = &path_args[abi][sc][s];
        if (pa->path < 0)
            continue;
        /* an empty path with AT_EMPTY_PATH names an open file, not a path:
         * whoever owns that fd decides, not the prefix table */
        int climbs;
        int n = resolve(tid, pa, args, buf, sizeof buf, 0, raw, &climbs);
        if (fd_check && (n == -ENOENT || n == -EFAULT) && fd_needs_python(tid, sc, pa, args))
            return 1;
        if (n == -ENAMETOOLONG || n == -EFAULT || n == -ENOENT || n == -ENOTDIR || n == -EBADF)
            continue; /* the kernel gives the tracee the same errno */
        if (n < 0)
            return 1; /* unsure: let Python decide */
        int k = prefix_kind_of(buf);
        if (k == UM_PREFIX_PLAIN)
            return 1;
        /* ".." from a directory of a layer's upper directory: its parent
         * there lacks what the view shows (the lower layer's names) */
        if (climbs && (k == UM_PREFIX_ALIAS || prefix_kind_of(raw) == UM_PREFIX_ALIAS))
            return 1;
        if (k == UM_PREFIX_LAYERED) {
            if (writes < 0)
                writes = call_writes(tid, sc, args);
            if (writes || layer_hit(buf, (size_t)n))
                return 1;
        }
        if (check_symlinks && nprefixes > 0 && symlink_on_path(raw)) {
            if (writes < 0)
                writes = call_writes(tid, sc, args);
            if (walk_needs_python(raw, writes))
                return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* registers                                                           */
/* ------------------------------------------------------------------ */

/* The ABI of a call from its audit arch and its number (x32: bit 30 set). */
static int abi_from(uint32_t arch, uint64_t nr)
{
    if (arch == AUDIT_ARCH_I386)
        return UM_ABI_I386;
    if (arch == AUDIT_ARCH_X86_64)
        return (nr & X32_BIT) ? UM_ABI_X32 : UM_ABI_X86_64;
    return -1;
}

static int abi_of(const struct um_sci *si) { return abi_from(si->arch, si->entry.nr); }

static int get_regs(int tid, struct user_regs_struct *r)
{
    return ptrace(PTRACE_GETREGS, tid, 0, r) ? -errno : 0;
}

#define REG(r, off) (*(unsigned long long *)((char *)(r) + (off)))

/* Write number and arguments of the stopped call (entry or seccomp stop). */
static int set_call(int tid, int abi, long nr, const uint64_t *args)
{
    if (ssi_state >= 0) {
        struct um_sci si = cur_sci;
        si.reserved = 0;
        si.flags = 0;
        si.entry.nr = (uint64_t)nr;
        memcpy(si.entry.args, args, sizeof si.entry.args);
        if (ptrace(UM_PTRACE_SET_SYSCALL_INFO, tid, sizeof si, &si) == 0) {
            ssi_state = 1;
            return 0;
        }
        if (errno == ESRCH)
            return -ESRCH;
        if (ssi_state == 0 && (errno == EIO || errno == EINVAL))
            ssi_state = -1; /* kernel before 6.16: registers from now on */
        else
            return -errno;
    }
    struct user_regs_struct r;
    int e = get_regs(tid, &r);
    if (e)
        return e;
    const struct regmap *m = &regmap[abi];
    REG(&r, m->nr) = (unsigned long long)nr;
    for (int i = 0; i < 6; i++)
        REG(&r, m->args[i]) = args[i];
    return ptrace(PTRACE_SETREGS, tid, 0, &r) ? -errno : 0;
}

static int set_args_regs(int tid, int abi, const uint64_t *args)
{
    struct user_regs_struct r;
    int e = get_regs(tid, &r);
    if (e)
        return e;
    for (int i = 0; i < 6; i++)
        REG(&r, regmap[abi].args[i]) = args[i];
    return ptrace(PTRACE_SETREGS, tid, 0, &r) ? -errno : 0;
}

static int set_return(int tid, int abi, int64_t val)
{
    return ptrace(PTRACE_POKEUSER, tid, regmap[abi].ret, (long)val) ? -errno : 0;
}

int um_ssi_available(void) { return ssi_state; }

int um_set_vcwd(int tid, int on)
{
    if (tid <= 0 || tid > pid_max)
        return -EINVAL;
    *tf(tid) &= (tflag_t)~(TF_VCWD | TF_FAITHFUL);
    if (on & UM_VCWD)
        *tf(tid) |= TF_VCWD;
    if ((on & UM_VCWD) && (on & UM_VCWD_FAITHFUL))
        *tf(tid) |= TF_FAITHFUL;
    return 0;
}

/* ------------------------------------------------------------------ */
/* the loop                                                            */
/* ------------------------------------------------------------------ */

static void resume(pid_t tid, int req, int sig)
{
    if ((*tf(tid) & (TF_EXIT_WANTED | TF_AWAIT_ENTRY)) && req == PTRACE_CONT)
        req = PTRACE_SYSCALL; /* keep the syscall stop we wait for */
    ptrace(req, tid, 0, sig);
}

/* ------------------------------------------------------------------ */
/* filters stacked on running tracees, and attaching                   */
/* ------------------------------------------------------------------ */

/* Exits seen while waiting on one thread (an injection): handed to the loop
 * by wait_any before it waits for more. */
#define MAX_DEFERRED 64
static struct { pid_t tid; int status; } deferred[MAX_DEFERRED];
static int ndeferred;

static void defer_status(pid_t tid, int status)
{
    if (ndeferred < MAX_DEFERRED) {
        deferred[ndeferred].tid = tid;
        deferred[ndeferred++].status = status;
    }
}

/* The address of a `syscall` instruction in the thread's vDSO: where an
 * injected call is made from a stop that is not a system call's. */
static uint64_t vdso_syscall(pid_t tid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/maps", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    unsigned long lo = 0, hi = 0;
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "[vdso]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
            found = 1;
            break;
        }
    fclose(f);
    if (!found || hi <= lo || hi - lo > 65536)
        return 0;
    static unsigned char buf[65536];
    size_t n = hi - lo;
    if (um_read_mem(tid, lo, buf, n) != (int)n)
        return 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (buf[i] == 0x0f && buf[i + 1] == 0x05)
            return lo + i;
    return 0;
}

static void serve_notification(int may_hand);

#ifndef PTRACE_GETSIGMASK
#define PTRACE_GETSIGMASK 0x420a
#define PTRACE_SETSIGMASK 0x420b
#endif

/* Wait for a stop or the death of one thread, serving notifications of the
 * others meanwhile (their stops stay queued for um_next). */
static pid_t wait_tid(pid_t tid, int *status)
{
    for (;;) {
        pid_t p = waitpid(tid, status, __WALL | (sigchld_fd >= 0 ? WNOHANG : 0));
        if (p != 0) {
            if (p < 0 && errno == EINTR)
                continue;
            return p;
        }
        struct pollfd fds[2] = {{.fd = sigchld_fd, .events = POLLIN}, {.fd = listener_fd, .events = POLLIN}};
        if (poll(fds, listener_fd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
            return -1;
        if (fds[0].revents) {
            /* um_next's wait looks with WNOHANG before it sleeps: nothing lost */
            struct signalfd_siginfo si[8];
            while (read(sigchld_fd, si, sizeof si) > 0)
                ;
        }
        if (listener_fd >= 0 && (fds[1].revents & POLLIN))
            serve_notification(0); /* Python is busy: a call for it is redirected */
    }
}

/* Resume tid with PTRACE_SYSCALL until its next syscall stop of kind op
 * (SI_ENTRY or SI_EXIT), and read it. Seccomp stops of the injected call are
 * resumed; a signal-delivery stop (SIGSTOP: the others are blocked) is
 * suppressed and its signal kept in *sigs to be sent again. -ESRCH if the
 * thread died (its status is kept for um_next). */
static int inject_step(pid_t tid, int op, struct um_sci *si, uint64_t *sigs)
{
    if (ptrace(PTRACE_SYSCALL, tid, 0, 0))
        return -errno;
    for (;;) {
        int status;
        pid_t p = wait_tid(tid, &status);
        if (p < 0)
            return -errno;
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            defer_status(tid, status);
            return -ESRCH;
        }
        if (!WIFSTOPPED(status))
            continue;
        stats.stops++;
        int sig = WSTOPSIG(status), event = (unsigned)status >> 16;
        if (sig == (SIGTRAP | 0x80)) {
            if (ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof *si, si) > 0 && si->op == op)
                return 0;
        } else if (sig == SIGTRAP && event == PTRACE_EVENT_SECCOMP) {
            stats.seccomp_stops++; /* the injected call trapped: it is the monitor's, run it */
        } else if (event == 0 && sig != SIGTRAP) {
            *sigs |= 1ULL << (sig - 1); /* delivered after the pending call: kept */
        }
        /* other events (an injected fork or exec is not supported) and
         * PTRACE_EVENT_STOP: on to the stop we wait for */
        if (ptrace(PTRACE_SYSCALL, tid, 0, 0))
            return -errno;
    }
}

/* Run one x86_64 system call in a thread stopped at an interrupt stop, from
 * the registers base with the instruction pointer at a syscall instruction.
 * Returns its result, or -ESRCH if the thread died (its status deferred).
 * Signals that arrive meanwhile are kept in *sigs for the caller to send again. */
static long run_call(pid_t tid, const struct user_regs_struct *base, uint64_t at, long nr,
                     uint64_t a0, uint64_t a1, uint64_t a2, uint64_t *sigs)
{
    struct user_regs_struct r = *base;
    r.rip = at;
    r.rax = (unsigned long long)nr;
    r.orig_rax = (unsigned long long)-1; /* no restart of what was interrupted */
    r.rdi = a0;
    r.rsi = a1;
    r.rdx = a2;
    r.r10 = r.r8 = r.r9 = 0;
    if (ptrace(PTRACE_SETREGS, tid, 0, &r))
        return -errno;
    struct um_sci si;
    int e = inject_step(tid, SI_EXIT, &si, sigs);
    return e ? e : (long)si.exit.rval;
}

static struct bpf_buf inject_buf;
static int inject_ready; /* inject_buf holds the filter of the current traps */

/* Stack a filter of every current trap (all as ptrace stops: a new listener
 * would be nobody's) on the process of a thread at an interrupt stop, for all
 * its threads (TSYNC). Its registers are put back as they were, with the
 * restart of an interrupted call done as the kernel would have. */
static void inject_filter(pid_t tid)
{
    struct user_regs_struct saved;
    char task[64];
    int tgid = tid;
    {
        char path[64], line[128];
        snprintf(path, sizeof path, "/proc/%d/status", tid);
        FILE *f = fopen(path, "r");
        if (f) {
            while (fgets(line, sizeof line, f))
                if (sscanf(line, "Tgid: %d", &tgid) == 1)
                    break;
            fclose(f);
        }
    }
    uint64_t sigs = 0;
    if (!inject_ready || get_regs(tid, &saved))
        goto done;
    if (saved.cs != 0x33) { /* a 32-bit process: not done (docs/internals.md) */
        stats.inject_failed++;
        goto done;
    }
    uint64_t at = vdso_syscall(tid);
    if (!at) {
        stats.inject_failed++;
        goto done;
    }
    size_t size = (size_t)inject_buf.n * sizeof inject_buf.f[0];
    uint64_t prog = (saved.rsp - 128 - size - 16) & ~(uint64_t)15, insns = prog + 16;
    struct { uint16_t len; uint16_t pad[3]; uint64_t filter; } fprog = {(uint16_t)inject_buf.n, {0}, insns};
    if (um_write_mem(tid, insns, inject_buf.f, size) != (int)size ||
        um_write_mem(tid, prog, &fprog, sizeof fprog) != (int)sizeof fprog) {
        stats.inject_failed++;
        goto done;
    }
    long r = run_call(tid, &saved, at, SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, prog, &sigs);
    if (r == -EACCES) {
        /* not privileged in its namespace: the kernel wants no_new_privs */
        r = run_call(tid, &saved, at, SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, &sigs);
        if (r == 0)
            r = run_call(tid, &saved, at, SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, prog,
                         &sigs);
    }
    if (r == -ESRCH)
        return;
    struct user_regs_struct back = saved;
    if ((long long)saved.orig_rax >= 0) {
        long long e = (long long)saved.rax;
        if (e == -ERESTARTSYS_ || e == -ERESTARTNOINTR_ || e == -ERESTARTNOHAND_) {
            back.rax = saved.orig_rax;
            back.rip -= 2;
        } else if (e == -ERESTART_RESTARTBLOCK_) {
            back.rax = SYS_restart_syscall;
            back.rip -= 2;
        }
    }
    ptrace(PTRACE_SETREGS, tid, 0, &back);
    for (int k = 1; k <= 64; k++)
        if (sigs & (1ULL << (k - 1)))
            syscall(SYS_tgkill, tgid, tid, k);
    if (r == 0) {
        stats.injected++;
    } else {
        stats.inject_failed++;
    }
done:
    /* done or not doable: no thread of the process asks again */
    *tf(tid) &= (tflag_t)~TF_NEEDFILTER;
    snprintf(task, sizeof task, "/proc/%d/task", tgid);
    DIR *dir = opendir(task);
    if (dir) {
        struct dirent *de;
        while ((de = readdir(dir))) {
            int t = atoi(de->d_name);
            if (t > 0)
                *tf(t) &= (tflag_t)~TF_NEEDFILTER;
        }
        closedir(dir);
    }
}

/* The filter to stack: every trap, the spawn's and those added since, all
 * as ptrace stops. */
static int build_inject(void)
{
    static unsigned char all[UM_NABI][MAX_NR];
    for (int a = 0; a < UM_NABI; a++)
        for (int i = 0; i < MAX_NR; i++)
            all[a][i] = trap[a][i] || extra_trap[a][i] ? UM_TRAP_TRACE : 0;
    int r = build_filter_of(&inject_buf, all);
    if (r)
        return r;
    inject_ready = 1;
    extra_dirty = 0;
    return 0;
}

/* The traps Python added since the first process ran: a filter with every
 * trap is stacked on each process at its next interrupt stop. Returns the
 * number of threads asked to stop, 0 if there is nothing new. */
int um_filter_inject(void)
{
    if (!extra_dirty)
        return 0;
    int r = build_inject();
    if (r)
        return r;
    int n = 0;
    for (long t = 1; t <= pid_max; t++)
        if ((tflags[t] & TF_SEEN) && ptrace(PTRACE_INTERRUPT, (pid_t)t, 0, 0) == 0) {
            tflags[t] |= TF_NEEDFILTER;
            n++;
        }
    return n;
}

/* Trace a process started outside the view, and its future children: seize
 * each of its threads (the kernel's ptrace permission rules apply to the
 * monitor; Python checks the caller's), then stack the view's filter on it at
 * its first interrupt stop. */
int um_attach(int pid)
{
    if (pid <= 0 || pid > pid_max)
        return -EINVAL;
    if (!inject_ready || extra_dirty) {
        int r = build_inject();
        if (r)
            return r;
    }
    char task[64];
    snprintf(task, sizeof task, "/proc/%d/task", pid);
    DIR *dir = opendir(task);
    if (!dir)
        return -errno;
    int n = 0, err = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        int t = atoi(de->d_name);
        if (t <= 0)
            continue;
        if (ptrace(PTRACE_SEIZE, t, 0, TRACE_OPTIONS)) {
            if (!err)
                err = -errno;
            continue;
        }
        *tf(t) = TF_SEEN | TF_ANNOUNCED | TF_NEEDFILTER;
        stats.processes++;
        ptrace(PTRACE_INTERRUPT, t, 0, 0);
        n++;
    }
    closedir(dir);
    return n ? 0 : (err ? err : -ESRCH);
}

/* The notification Python holds (UM_EV_NOTIF): 1 received, for um_next to
 * hand over; 2 handed over; 3 answered by um_notif_addfd. */
static struct seccomp_notif held_notif;
static int notif_state;

/* A call trapped by a user notification: let it run, or, if Python must see
 * it, either keep the notification for Python (a UM_CLAIM_NOTIFY call, when
 * may_hand: um_next's wait) or interrupt the waiting thread. The kernel then
 * abandons the notification and restarts the call after the interrupt stop;
 * resumed with PTRACE_SYSCALL, the thread stops at the restarted call's
 * entry, where the loop hands it to Python with all of ptrace's means (see
 * docs/internals.md). */
static void serve_notification(int may_hand)
{
    struct seccomp_notif req;
    memset(&req, 0, sizeof req);
    if (ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_RECV, &req))
        return; /* interrupted, or the caller is gone */
    stats.notifications++;
    pid_t tid = (pid_t)req.pid;
    struct seccomp_notif_resp resp;
    memset(&resp, 0, sizeof resp);
    resp.id = req.id;
    resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    if (*tf(tid) & TF_INJECTING) {
        /* a call um_inject runs: the monitor's own, no look */
    } else if (*tf(tid) & TF_PASS) {
        *tf(tid) &= (tflag_t)~TF_PASS;
    } else {
        int abi = abi_from(req.data.arch, req.data.nr);
        int sc = lookup_sc(abi, req.data.nr);
        if (sc >= 0 && needs_python(tid, abi, sc, (const uint64_t *)req.data.args)) {
            if (may_hand && (claim[sc] & UM_CLAIM_NOTIFY)) {
                held_notif = req;
                notif_state = 1;
                return; /* answered after Python's reply */
            }
            if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0) {
                *tf(tid) |= TF_REDIRECT;
                return; /* no answer: the interrupt ends the wait */
            }
        }
        stats.fast_continue++;
    }
    ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

/* Hand Python the notification serve_notification kept (no ptrace stop:
 * cur_tid is cleared, so um_inject refuses it). */
static int notif_event(struct um_event *ev)
{
    const struct seccomp_notif *n = &held_notif;
    memset(ev, 0, sizeof *ev);
    ev->kind = UM_EV_NOTIF;
    ev->tid = (int)n->pid;
    ev->abi = abi_from(n->data.arch, n->data.nr);
    ev->nr = n->data.nr;
    ev->sc = lookup_sc(ev->abi, ev->nr);
    memcpy(ev->args, n->data.args, sizeof ev->args);
    ev->ip = n->data.instruction_pointer;
    ev->reply = UM_REPLY_CONTINUE;
    cur_tid = 0;
    notif_state = 2;
    stats.python_events++;
    stats.notif_events++;
    return UM_EV_NOTIF;
}

int um_notif_addfd(int srcfd, unsigned int newfd_flags)
{
    if (notif_state != 2 || listener_fd < 0)
        return -EINVAL;
    struct seccomp_notif_addfd a;
    memset(&a, 0, sizeof a);
    a.id = held_notif.id;
    a.flags = SECCOMP_ADDFD_FLAG_SEND;
    a.srcfd = (uint32_t)srcfd;
    a.newfd_flags = newfd_flags;
    int fd = ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_ADDFD, &a);
    if (fd < 0)
        return -errno; /* not answered: the reply still goes (-ENOENT: it cannot) */
    notif_state = 3;
    stats.addfd++;
    stats.skipped++;
    return fd;
}

/* Answer the notification Python held as it replied. */
static void finish_notif(struct um_event *ev)
{
    int answered = notif_state == 3;
    notif_state = 0;
    if (answered || listener_fd < 0)
        return;
    struct seccomp_notif_resp resp;
    memset(&resp, 0, sizeof resp);
    resp.id = held_notif.id;
    if (ev->reply == UM_REPLY_REDIRECT && ptrace(PTRACE_INTERRUPT, ev->tid, 0, 0) == 0) {
        *tf(ev->tid) |= TF_REDIRECT;
        return; /* as serve_notification does */
    }
    if (ev->reply == UM_REPLY_SKIP) {
        stats.skipped++;
        if (ev->rval < 0)
            resp.error = (int32_t)ev->rval;
        else
            resp.val = ev->rval;
    } else {
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    }
    ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_SEND, &resp); /* ENOENT: the caller is gone */
}

static void end_notifications(void)
{
    if (sigchld_fd < 0)
        return;
    int fds[] = {sigchld_fd, listener_fd, setup_fd, go_fd};
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    sigchld_fd = listener_fd = setup_fd = go_fd = -1;
    notif_state = 0;
    sigprocmask(SIG_SETMASK, &saved_mask, NULL);
}

/* Wait for the next ptrace stop, serving notifications meanwhile. */
static pid_t wait_notif(int *status)
{
    int check = 1; /* stops may be queued from before (SIGCHLD coalesces) */
    for (;;) {
        if (check) {
            pid_t pid = waitpid(-1, status, __WALL | WNOHANG);
            if (pid != 0)
                return pid;
            check = 0;
        }
        struct pollfd p[3];
        int n = 0, il = -1, is = -1;
        p[n].fd = sigchld_fd;
        p[n++].events = POLLIN;
        if (listener_fd >= 0) {
            il = n;
            p[n].fd = listener_fd;
            p[n++].events = POLLIN;
        }
        if (setup_fd >= 0) {
            is = n;
            p[n].fd = setup_fd;
            p[n++].events = POLLIN;
        }
        if (poll(p, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (p[0].revents) {
            struct signalfd_siginfo si[8];
            while (read(sigchld_fd, si, sizeof si) > 0)
                ;
            check = 1;
        }
        if (is >= 0 && p[is].revents)
            take_listener();
        if (il >= 0 && (p[il].revents & POLLIN)) {
            serve_notification(1);
            if (notif_state == 1)
                return 0; /* for Python: um_next hands it over */
        }
        else if (il >= 0 && (p[il].revents & (POLLHUP | POLLERR))) {
            close(listener_fd); /* every process with the filter is gone */
            listener_fd = -1;
        }
    }
}

static pid_t wait_any(int *status)
{
    pid_t pid;
    if (ndeferred > 0) {
        ndeferred--;
        *status = deferred[0].status;
        pid = deferred[0].tid;
        memmove(deferred, deferred + 1, (size_t)ndeferred * sizeof deferred[0]);
        return pid;
    }
    if (sigchld_fd >= 0)
        return wait_notif(status);
    for (int i = 0; i < spin_iterations; i++) {
        pid = waitpid(-1, status, __WALL | WNOHANG);
        if (pid != 0)
            return pid;
    }
    do
        pid = waitpid(-1, status, __WALL);
    while (pid < 0 && errno == EINTR);
    return pid;
}

static int is_stop_signal(int sig)
{
    return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

/* The first process entered a group-stop: stop the monitor too, so the shell
 * that started umview sees its job stopped; when the shell continues us,
 * continue the first process if the shell's SIGCONT could not reach it. */
static void propagate_stop(void)
{
    if (!isatty(0) && !isatty(2))
        return;
    kill(getpid(), SIGSTOP);
    if (first_pid > 0 && getpgid(first_pid) != getpgrp())
        kill(first_pid, SIGCONT);
}

/* New tracees held at their first stop until their parent's fork event. A
 * parent killed before that event would leave one held forever: any exit
 * releases them all (they then run without inherited state, a rare race). */
#define MAX_HELD 64
static pid_t held[MAX_HELD];
static int nheld;

static int hold(pid_t tid)
{
    if (nheld >= MAX_HELD)
        return 0;
    held[nheld++] = tid;
    *tf(tid) |= TF_HELD;
    return 1;
}

static void unhold(pid_t tid)
{
    for (int i = 0; i < nheld; i++)
        if (held[i] == tid) {
            held[i] = held[--nheld];
            return;
        }
}

static void release_all_held(void)
{
    while (nheld > 0) {
        pid_t t = held[--nheld];
        *tf(t) = (tflag_t)((*tf(t) & ~TF_HELD) | TF_ANNOUNCED);
        ptrace(PTRACE_CONT, t, 0, 0);
    }
}

/* Complete the reply Python gave to the outstanding event. */
static void finish_reply(struct um_event *ev)
{
    pid_t tid = ev->tid;
    int abi = ev->abi;
    if (ev->kind == UM_EV_SYSCALL) {
        /* after um_inject the call waits at its entry stop, whatever stop
         * Python was handed */
        int from_entry = (ev->flags & UM_FROM_ENTRY) || (*tf(tid) & TF_INJECTED);
        *tf(tid) &= (tflag_t)~TF_INJECTED;
        if (ev->changed & (UM_CHANGED_ARGS | UM_CHANGED_NR)) {
            stats.rewritten++;
            set_call(tid, abi, ev->nr, ev->args);
        }
        if (ev->reply == UM_REPLY_SKIP) {
            stats.skipped++;
            if (!(ev->changed & UM_CHANGED_NR)) {
                uint64_t a[6];
                memcpy(a, ev->args, sizeof a);
                set_call(tid, abi, -1, a);
            }
            set_return(tid, abi, ev->rval);
            *tf(tid) &= ~TF_EXIT_WANTED;
            ptrace(PTRACE_CONT, tid, 0, 0);
        } else {
            if (from_entry) {
                /* taken at its entry stop: the seccomp check still comes; its
                 * notification or seccomp stop must pass without a second look */
                long nr = ev->nr;
                if (abi == UM_ABI_X32)
                    nr &= ~X32_BIT;
                if (nr >= 0 && nr < MAX_NR && trap[abi][nr])
                    *tf(tid) |= TF_PASS;
            }
            if (ev->reply == UM_REPLY_CONTINUE_AFTER) {
                *tf(tid) |= TF_EXIT_WANTED;
                ptrace(PTRACE_SYSCALL, tid, 0, 0);
            } else {
                *tf(tid) &= ~TF_EXIT_WANTED;
                ptrace(PTRACE_CONT, tid, 0, 0);
            }
        }
    } else if (ev->kind == UM_EV_SYSCALL_EXIT) {
        /* restore what entry changed (the syscall ABI preserves argument
         * registers), then give the result */
        if ((ev->changed & UM_CHANGED_ARGS) && !(ev->flags & UM_EXIT_AFTER_EXEC))
            set_args_regs(tid, abi, ev->args);
        if (ev->changed & UM_CHANGED_RVAL)
            set_return(tid, abi, ev->rval);
        resume(tid, PTRACE_CONT, 0);
    } else if (ev->kind == UM_EV_NOTIF) {
        finish_notif(ev);
    } else if (ev->kind == UM_EV_FORK || ev->kind == UM_EV_EXEC) {
        if (ev->kind == UM_EV_FORK && (ev->flags & UM_FORK_HELD)) {
            resume((pid_t)ev->msg, PTRACE_CONT, 0);
            if (*tf((pid_t)ev->msg) & TF_NEEDFILTER)
                ptrace(PTRACE_INTERRUPT, (pid_t)ev->msg, 0, 0);
        }
        resume(tid, PTRACE_CONT, 0);
    }
    ev->kind = UM_EV_DONE;
}

/* A process event for Python (fork, exec, exit). */
static int process_event(struct um_event *ev, int kind, pid_t tid, long msg, int flags, int status)
{
    memset(ev, 0, sizeof *ev);
    ev->kind = kind;
    ev->tid = tid;
    ev->msg = msg;
    ev->flags = flags;
    ev->status = status;
    ev->sc = -1;
    stats.python_events++;
    return kind;
}

static int fill_syscall(struct um_event *ev, pid_t tid, const struct um_sci *si, int kind)
{
    ev->kind = kind;
    ev->tid = tid;
    ev->ip = si->instruction_pointer;
    ev->sp = si->stack_pointer;
    ev->reply = UM_REPLY_CONTINUE;
    ev->changed = 0;
    ev->msg = 0;
    ev->flags = 0;
    stats.python_events++;
    return kind;
}

/* Hand Python a claimed call stopped at its seccomp or entry stop (the two
 * layouts of ptrace_syscall_info agree on nr and args). */
static int call_event(struct um_event *ev, pid_t tid, const struct um_sci *si, int abi, int sc, int flags)
{
    cur_sci = *si;
    cur_tid = tid;
    ev->abi = abi;
    ev->sc = sc;
    ev->nr = (long)si->entry.nr;
    memcpy(ev->args, si->entry.args, sizeof ev->args);
    ev->rval = 0;
    ev->status = 0;
    fill_syscall(ev, tid, si, UM_EV_SYSCALL);
    ev->flags = flags;
    return UM_EV_SYSCALL;
}

/* A signal that ends a notified call's wait for the monitor makes the call
 * return -ERESTARTSYS: after a handler without SA_RESTART, EINTR, which stat,
 * access and the like never give natively. At the signal-delivery stop such a
 * call is made -ERESTARTNOINTR, which the kernel restarts after any handler.
 * A call on a FIFO, a device or a socket may block, and be interrupted,
 * natively: its -ERESTARTSYS is left as it is. */
static void keep_notified_call(pid_t tid)
{
    struct user_regs_struct r;
    if (get_regs(tid, &r) || (int)r.rax != -ERESTARTSYS_ || (long long)r.orig_rax < 0)
        return;
    long raw = (long)r.orig_rax;
    int abi = r.cs == 0x23 ? UM_ABI_I386 : (raw & X32_BIT) ? UM_ABI_X32 : UM_ABI_X86_64;
    long nr = raw & ~X32_BIT;
    int sc = lookup_sc(abi, raw);
    if (nr >= MAX_NR || trap[abi][nr] != UM_TRAP_NOTIF || sc < 0)
        return;
    if (path_args[abi][sc][0].path >= 0) {
        uint64_t args[6];
        for (int i = 0; i < 6; i++)
            args[i] = REG(&r, regmap[abi].args[i]);
        char path[PATH_MAX + 1];
        struct stat st;
        if (um_resolve_path(tid, abi, sc, 0, args, path, sizeof path) > 0 && stat(path, &st) == 0 &&
            (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode)))
            return;
    }
    r.rax = (unsigned long long)-ERESTARTNOINTR_;
    ptrace(PTRACE_SETREGS, tid, 0, &r);
}

int um_next(struct um_event *ev)
{
    if (ev->kind != UM_EV_DONE)
        finish_reply(ev);
    int status;
    struct um_sci si;
    for (;;) {
        pid_t tid = wait_any(&status);
        if (tid == 0)
            return notif_event(ev); /* a notification for Python (wait_notif) */
        if (tid < 0) {
            if (errno == ECHILD) {
                end_notifications();
                ev->kind = UM_EV_DONE;
                return UM_EV_DONE;
            }
            ev->kind = UM_EV_ERROR;
            ev->msg = errno;
            return UM_EV_ERROR;
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            if (tid == first_pid)
                first_status = status;
            if (*tf(tid) & TF_HELD)
                unhold(tid);
            if (nheld)
                release_all_held();
            *tf(tid) = 0;
            if (event_mask & UM_WANT_EXIT)
                return process_event(ev, UM_EV_EXIT, tid, 0, 0, status);
            continue;
        }
        if (!WIFSTOPPED(status))
            continue;
        stats.stops++;
        if (!(*tf(tid) & TF_SEEN)) {
            *tf(tid) |= TF_SEEN;
            stats.processes++;
        }
        int sig = WSTOPSIG(status);
        int event = (unsigned)status >> 16;

        if (sig == SIGTRAP && event == PTRACE_EVENT_SECCOMP) {
            stats.seccomp_stops++;
            if (ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof si, &si) <= 0 || si.op != SI_SECCOMP ||
                (*tf(tid) & TF_PASS)) {
                /* TF_PASS: a call Python saw at its entry stop (after um_inject) */
                *tf(tid) &= (tflag_t)~TF_PASS;
                resume(tid, PTRACE_CONT, 0);
                continue;
            }
            int abi = abi_of(&si);
            int sc = abi < 0 ? -1 : lookup_sc(abi, (long)si.seccomp.nr);
            int c = sc >= 0 ? claim[sc]
                    : abi >= 0 && (si.seccomp.nr & ~(uint64_t)X32_BIT) != UM_NR_CONTROL &&
                              !trap[abi][si.seccomp.nr & (MAX_NR - 1)]
                        ? 0
                        : UM_CLAIM_REFUSE; /* a control call with no one to answer: ENOSYS */
            if (c & UM_CLAIM_REFUSE) {
                /* a call from an ABI or of a kind no engine can decode */
                stats.refused++;
                cur_sci = si;
                set_call(tid, abi < 0 ? UM_ABI_X86_64 : abi, -1, si.seccomp.args);
                set_return(tid, abi < 0 ? UM_ABI_X86_64 : abi, -ENOSYS);
                ptrace(PTRACE_CONT, tid, 0, 0);
                continue;
            }
            if (!needs_python(tid, abi, sc, si.seccomp.args)) {
                stats.fast_continue++;
                resume(tid, PTRACE_CONT, 0);
                continue;
            }
            return call_event(ev, tid, &si, abi, sc, 0);
        }
        if (sig == (SIGTRAP | 0x80)) {
            if (ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof si, &si) <= 0) {
                *tf(tid) &= (tflag_t)~(TF_EXIT_WANTED | TF_AWAIT_ENTRY);
                ptrace(PTRACE_CONT, tid, 0, 0);
                continue;
            }
            if (si.op == SI_ENTRY) {
                /* the restart of a call a notification sent to Python (or,
                 * after a signal handler ran, some other call: then the
                 * notification comes again and is looked at again) */
                *tf(tid) &= (tflag_t)~TF_AWAIT_ENTRY;
                int abi = abi_of(&si);
                int sc = abi < 0 ? -1 : lookup_sc(abi, (long)si.entry.nr);
                long nr = abi == UM_ABI_X32 ? (long)(si.entry.nr & ~X32_BIT) : (long)si.entry.nr;
                if (sc < 0 || nr < 0 || nr >= MAX_NR || trap[abi][nr] != UM_TRAP_NOTIF ||
                    !needs_python(tid, abi, sc, si.entry.args)) {
                    resume(tid, PTRACE_CONT, 0);
                    continue;
                }
                return call_event(ev, tid, &si, abi, sc, UM_FROM_ENTRY);
            }
            /* a syscall-exit stop */
            stats.exit_stops++;
            if (!(*tf(tid) & TF_EXIT_WANTED) || si.op != SI_EXIT) {
                *tf(tid) &= (tflag_t)~TF_EXIT_WANTED;
                resume(tid, PTRACE_CONT, 0);
                continue;
            }
            int execed = *tf(tid) & TF_EXECED;
            *tf(tid) &= (tflag_t)~(TF_EXIT_WANTED | TF_EXECED);
            cur_sci = si;
            cur_tid = tid;
            ev->rval = si.exit.rval;
            /* abi, sc, nr, args: Python keeps them from the entry */
            ev->abi = si.arch == AUDIT_ARCH_I386 ? UM_ABI_I386 : UM_ABI_X86_64;
            ev->sc = -1;
            ev->nr = -1;
            fill_syscall(ev, tid, &si, UM_EV_SYSCALL_EXIT);
            ev->flags = execed ? UM_EXIT_AFTER_EXEC : 0;
            return UM_EV_SYSCALL_EXIT;
        }
        if (sig == SIGTRAP && event) {
            unsigned long msg = 0;
            if (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK || event == PTRACE_EVENT_CLONE) {
                ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg);
                pid_t child = (pid_t)msg, held_release = 0;
                if (msg > 0 && !(*tf(child) & TF_SEEN)) {
                    *tf(child) |= TF_SEEN;
                    stats.processes++;
                }
                if (msg > 0) {
                    /* the child inherits the cwd state; if its first stop came
                     * first it was held: it may run now */
                    tflag_t held = *tf(child) & TF_HELD;
                    *tf(child) = (tflag_t)((*tf(child) & ~(TF_HELD | TF_VCWD | TF_FAITHFUL)) |
                                           TF_ANNOUNCED |
                                           (*tf(tid) & (TF_VCWD | TF_FAITHFUL | TF_NEEDFILTER)));
                    if (held) {
                        unhold(child);
                        held_release = child;
                    }
                }
                if (event_mask & UM_WANT_FORK)
                    return process_event(ev, UM_EV_FORK, tid, (long)msg,
                                         (event == PTRACE_EVENT_CLONE ? UM_FORK_THREAD
                                          : event == PTRACE_EVENT_VFORK ? UM_FORK_VFORK : 0) |
                                             (held_release ? UM_FORK_HELD : 0),
                                         0);
                if (held_release)
                    resume(held_release, PTRACE_CONT, 0);
                if (held_release && (*tf(held_release) & TF_NEEDFILTER))
                    ptrace(PTRACE_INTERRUPT, held_release, 0, 0);
            } else if (event == PTRACE_EVENT_EXEC) {
                ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg);
                if ((pid_t)msg != tid && msg > 0) {
                    /* a non-leader thread execed: it now has the leader's tid */
                    tflag_t f = *tf((pid_t)msg);
                    *tf((pid_t)msg) = 0;
                    *tf(tid) = (tflag_t)(f | TF_SEEN);
                }
                if (*tf(tid) & TF_EXIT_WANTED)
                    *tf(tid) |= TF_EXECED;
                if (event_mask & UM_WANT_EXEC)
                    return process_event(ev, UM_EV_EXEC, tid, (long)msg, 0, 0);
            } else if (event == PTRACE_EVENT_STOP && (*tf(tid) & TF_REDIRECT)) {
                /* our interrupt of a notified call: catch its restart */
                *tf(tid) = (tflag_t)((*tf(tid) & ~TF_REDIRECT) | TF_AWAIT_ENTRY);
                if (*tf(tid) & TF_NEEDFILTER) { /* the filter's interrupt: again */
                    resume(tid, PTRACE_CONT, 0);
                    ptrace(PTRACE_INTERRUPT, tid, 0, 0);
                    continue;
                }
            } else if (event == PTRACE_EVENT_STOP) {
                /* the first stop of a new tracee, or after PTRACE_INTERRUPT. A
                 * child whose parent's fork event is not in yet waits for it,
                 * so that it never runs before its inherited state is known */
                if (!(*tf(tid) & TF_ANNOUNCED) && hold(tid))
                    continue;
                if (*tf(tid) & TF_NEEDFILTER)
                    inject_filter(tid);
            }
            resume(tid, PTRACE_CONT, 0);
            continue;
        }
        if (event == PTRACE_EVENT_STOP) {
            if (is_stop_signal(sig)) {
                stats.group_stops++;
                ptrace(PTRACE_LISTEN, tid, 0, 0);
                if (tid == first_pid)
                    propagate_stop();
            } else {
                resume(tid, PTRACE_CONT, 0);
            }
            continue;
        }
        /* a signal-delivery stop: deliver it as the kernel would have */
        stats.signals++;
        if (listener_fd >= 0)
            keep_notified_call(tid);
        resume(tid, PTRACE_CONT, sig);
    }
}

/* ------------------------------------------------------------------ */
/* injection: one system call run by a stopped tracee for the monitor  */
/* ------------------------------------------------------------------ */


int um_inject(int tid, int abi, long nr, const uint64_t *args, int64_t *result)
{
    if (tid <= 0 || tid != cur_tid || cur_sci.op == SI_EXIT || abi < 0 || abi >= UM_NABI)
        return -EINVAL; /* only a thread at the entry of the call Python holds */
    struct user_regs_struct saved, r;
    int e = get_regs(tid, &saved);
    if (e)
        return e;
    /* block every signal it can: none may run a handler between the injected
     * call and the rewound one (SIGKILL and SIGSTOP cannot be blocked) */
    uint64_t mask, all = ~0ULL, sigs = 0;
    if (ptrace(PTRACE_GETSIGMASK, tid, sizeof mask, &mask) || ptrace(PTRACE_SETSIGMASK, tid, sizeof all, &all))
        return -errno;
    const struct regmap *m = &regmap[abi];
    r = saved;
    REG(&r, m->nr) = (unsigned long long)nr;
    for (int i = 0; i < 6; i++)
        REG(&r, m->args[i]) = args[i];
    e = ptrace(PTRACE_SETREGS, tid, 0, &r) ? -errno : 0;
    *tf(tid) |= TF_INJECTING;
    struct um_sci si;
    for (int tries = 0; !e; tries++) {
        e = inject_step(tid, SI_EXIT, &si, &sigs);
        int64_t rv = e ? 0 : si.exit.rval;
        if ((rv == -ERESTARTSYS_ || rv == -ERESTARTNOINTR_ || rv == -ERESTARTNOHAND_) && tries < 100) {
            /* interrupted before it did anything (a seccomp notification's
             * wait ends on a signal that was pending before the mask was
             * set): restart it as the kernel would, from its entry */
            struct user_regs_struct again = r;
            again.rip = saved.rip - 2;
            REG(&again, m->ret) = (unsigned long long)nr;
            e = ptrace(PTRACE_SETREGS, tid, 0, &again) ? -errno : inject_step(tid, SI_ENTRY, &si, &sigs);
            continue;
        }
        *result = rv == -ERESTART_RESTARTBLOCK_ ? -EINTR : rv;
        break;
    }
    if (!e) {
        /* rewind, as the kernel restarts a call: back over the 2-byte
         * syscall instruction (syscall, int $0x80, or sysenter's int $0x80
         * in the vDSO), the original registers, the number in the return
         * register, then run to the entry stop of the same call again */
        r = saved;
        r.rip -= 2;
        REG(&r, m->ret) = REG(&saved, m->nr);
        e = ptrace(PTRACE_SETREGS, tid, 0, &r) ? -errno : 0;
        if (!e)
            e = inject_step(tid, SI_ENTRY, &si, &sigs);
        if (!e) {
            cur_sci = si; /* SET_SYSCALL_INFO must name this stop's op */
            *tf(tid) |= TF_INJECTED;
        }
    }
    *tf(tid) &= (tflag_t)~TF_INJECTING;
    if (e == -ESRCH)
        return e;
    ptrace(PTRACE_SETSIGMASK, tid, sizeof mask, &mask);
    for (int s = 1; s <= 64; s++)
        if (sigs & (1ULL << (s - 1)))
            syscall(SYS_tkill, tid, s);
    return e;
}

/* Restore the signal dispositions um_spawn changed (for the monitor's own
 * exit: re-raising the first process's signal). */
void um_restore_signals(void)
{
    for (int i = 0; i < NPASSED; i++)
        sigaction(passed_signals[i], &saved_actions[i], NULL);
}
