/* tables.c - the tables Python fills: syscall numbers per ABI, path arguments,
 * claims, prefixes, the write table, register maps and the filter's traps */
#include "internal.h"

/* Every setter Python calls is NAME_unlocked run under the tables' write
 * lock (servers.c: the serving threads read the tables meanwhile); one
 * line each: */
#define LOCKED(name, params, args)                                                                                     \
    int name params                                                                                                    \
    {                                                                                                                  \
        tables_write_lock();                                                                                           \
        int r = name##_unlocked args;                                                                                  \
        tables_write_unlock();                                                                                         \
        return r;                                                                                                      \
    }


static short nr_to_sc[UM_NABI][MAX_NR];
struct path_arg path_args[UM_NABI][MAX_SC][PATH_SLOTS];
uint16_t claim[UM_NABI][MAX_SC];
int nsc;
static int control_sc = -1; /* the neutral index of UM_NR_CONTROL (core.h) */

char *prefixes[256];
size_t prefix_len[256];
unsigned char prefix_kind[256]; /* UM_PREFIX_* */
char *prefix_src[256];           /* UM_PREFIX_MOVE: the source, else NULL */
size_t prefix_src_len[256];
char *prefix_upper[256];         /* UM_PREFIX_LAYERED: the upper layer's directory (um_prefix_set_upper), or NULL */
int nprefixes;

/* per neutral call: does it modify the file system (UM_WRITE_*), and which
 * argument says so */
unsigned char write_kind[MAX_SC];
signed char write_arg[MAX_SC];


/* the arch/ tables' register maps, until Python sets them: a view with no
 * engine loads no tables, yet answers the control call */
struct regmap regmap[UM_NABI] = {
    [UM_ABI_X86_64] = {UR(orig_rax), UR(rax), {UR(rdi), UR(rsi), UR(rdx), UR(r10), UR(r8), UR(r9)}},
    [UM_ABI_I386] = {UR(orig_rax), UR(rax), {UR(rbx), UR(rcx), UR(rdx), UR(rsi), UR(rdi), UR(rbp)}},
    [UM_ABI_X32] = {UR(orig_rax), UR(rax), {UR(rdi), UR(rsi), UR(rdx), UR(r10), UR(r8), UR(r9)}},
};

/* filter: per ABI, a bitmap of trapped numbers */
unsigned char trap[UM_NABI][MAX_NR];
/* traps added after the first process ran (filter_fixed): injected */
unsigned char extra_trap[UM_NABI][MAX_NR];
int extra_dirty;


int event_mask;
int spin_iterations;
__thread struct um_stats stats;

/* Once the first tracee runs, its filter is fixed: the trap table must keep
 * saying what the kernel does (a call Python claims later but that the
 * filter notifies must still be taken as a notification), so changes are
 * ignored from then on. */
int filter_fixed;

int um_init(void)
{
    filter_fixed = 0; /* a new view: its filter is yet to be built */
    memset(extra_trap, 0, sizeof extra_trap);
    extra_dirty = 0;
    return thread_table_init();
}

void um_stats_get(struct um_stats *out)
{
    *out = stats;
    servers_stats(out, NULL, NULL, 0);
}

static int um_table_reset_unlocked(int n)
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

LOCKED(um_table_reset, (int n), (n))

static int um_set_control_sc_unlocked(int sc)
{
    if (sc < -1 || sc >= nsc)
        return -EINVAL;
    control_sc = sc;
    return 0;
}

LOCKED(um_set_control_sc, (int sc), (sc))

/* the one bounds-checked look-up from (abi, nr) to a neutral index */
int lookup_sc(int abi, long nr)
{
    if (abi == UM_ABI_X32)
        nr &= ~X32_BIT;
    if (nr == UM_NR_CONTROL && abi >= 0 && abi < UM_NABI)
        return control_sc;
    if (abi < 0 || abi >= UM_NABI || nr < 0 || nr >= MAX_NR)
        return -1;
    return nr_to_sc[abi][nr];
}

static int um_map_nr_unlocked(int abi, long nr, int sc)
{
    if (abi == UM_ABI_X32)
        nr &= ~X32_BIT;
    if (abi < 0 || abi >= UM_NABI || nr < 0 || nr >= MAX_NR || sc < 0 || sc >= nsc)
        return -EINVAL;
    nr_to_sc[abi][nr] = (short)sc;
    return 0;
}

LOCKED(um_map_nr, (int abi, long nr, int sc), (abi, nr, sc))

static int um_set_path_arg_unlocked(int abi, int sc, int slot, int path_idx, int dirfd_idx, int emptyflg_idx)
{
    if (abi < 0 || abi >= UM_NABI || sc < 0 || sc >= nsc || slot < 0 || slot >= PATH_SLOTS || path_idx < 0 || path_idx > 5 ||
        dirfd_idx < -1 || dirfd_idx > 5 || emptyflg_idx < -1 || emptyflg_idx > 5)
        return -EINVAL;
    path_args[abi][sc][slot].path = (signed char)path_idx;
    path_args[abi][sc][slot].dirfd = (signed char)dirfd_idx;
    path_args[abi][sc][slot].emptyflg = (signed char)emptyflg_idx;
    return 0;
}

LOCKED(um_set_path_arg, (int abi, int sc, int slot, int path_idx, int dirfd_idx, int emptyflg_idx),
       (abi, sc, slot, path_idx, dirfd_idx, emptyflg_idx))

int um_set_nofollow(int abi, int sc, int slot, int kind, int arg, uint32_t mask)
{
    if (abi < 0 || abi >= UM_NABI || sc < 0 || sc >= nsc || slot < 0 || slot >= PATH_SLOTS || kind < UM_FOLLOWS ||
        kind > UM_NOFOLLOW_OPENHOW || arg < -1 || arg > 5 || (arg < 0 && kind > UM_NOFOLLOW_ALWAYS))
        return -EINVAL;
    tables_write_lock();
    path_args[abi][sc][slot].nofollow = (signed char)kind;
    path_args[abi][sc][slot].nofollow_arg = (signed char)arg;
    path_args[abi][sc][slot].nofollow_mask = mask;
    tables_write_unlock();
    return 0;
}

static int um_set_claim_unlocked(int abi, int sc, int mode)
{
    if (abi < 0 || abi >= UM_NABI || sc < 0 || sc >= nsc)
        return -EINVAL;
    claim[abi][sc] = (uint16_t)mode;
    return 0;
}

LOCKED(um_set_claim, (int abi, int sc, int mode), (abi, sc, mode))


static int um_prefix_clear_unlocked(void)
{
    for (int i = 0; i < nprefixes; i++) {
        free(prefixes[i]);
        free(prefix_src[i]);
        prefix_src[i] = NULL;
        free(prefix_upper[i]);
        prefix_upper[i] = NULL;
    }
    nprefixes = 0;
    return 0;
}

LOCKED(um_prefix_clear, (void), ())

static int um_prefix_add_kind_unlocked(const char *p, int kind)
{
    size_t l = strlen(p);
    if (nprefixes >= (int)(sizeof prefixes / sizeof prefixes[0]))
        return -ENOSPC;
    if (l == 0 || p[0] != '/' || kind < UM_PREFIX_PLAIN || kind > UM_PREFIX_ALIAS_CLEAN)
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

LOCKED(um_prefix_add_kind, (const char *p, int kind), (p, kind))

static int um_prefix_add_move_unlocked(const char *target, const char *source)
{
    size_t l = strlen(source);
    if (l == 0 || source[0] != '/' || l >= UM_PATH_BUF)
        return -EINVAL;
    while (l > 1 && source[l - 1] == '/')
        l--;
    char *src = strndup(source, l);
    if (!src)
        return -ENOMEM;
    int e = um_prefix_add_kind(target, UM_PREFIX_PLAIN);
    if (e) {
        free(src);
        return e;
    }
    prefix_kind[nprefixes - 1] = UM_PREFIX_MOVE;
    prefix_src[nprefixes - 1] = src;
    prefix_src_len[nprefixes - 1] = l == 1 ? 0 : l; /* "/": nothing before the rest */
    return 0;
}

LOCKED(um_prefix_add_move, (const char *target, const char *source), (target, source))

static int um_prefix_set_upper_unlocked(const char *target, const char *upper)
{
    size_t l = strlen(target), u = strlen(upper);
    while (l > 1 && target[l - 1] == '/')
        l--;
    while (u > 1 && upper[u - 1] == '/')
        u--;
    if (u < 2 || upper[0] != '/' || u >= UM_PATH_BUF)
        return -EINVAL; /* "/" is no upper layer of anything */
    for (int i = 0; i < nprefixes; i++)
        if (prefix_kind[i] == UM_PREFIX_LAYERED && prefix_len[i] == l && !memcmp(prefixes[i], target, l)) {
            char *up = strndup(upper, u);
            if (!up)
                return -ENOMEM;
            free(prefix_upper[i]);
            prefix_upper[i] = up;
            return 0;
        }
    return -ENOENT;
}

LOCKED(um_prefix_set_upper, (const char *target, const char *upper), (target, upper))


static int um_set_write_unlocked(int sc, int kind, int argidx)
{
    if (sc < 0 || sc >= nsc || kind < UM_WRITE_NO || kind > UM_WRITE_ACCESS ||
        (kind >= UM_WRITE_OFLAGS && (argidx < 0 || argidx > 5)))
        return -EINVAL;
    write_kind[sc] = (unsigned char)kind;
    write_arg[sc] = (signed char)argidx;
    return 0;
}

LOCKED(um_set_write, (int sc, int kind, int argidx), (sc, kind, argidx))

/* A register's offset: a whole 8-byte field of struct user_regs_struct
 * (REG() reads and writes 8 bytes there). */
static int regmap_offset_ok(int off)
{
    return off >= 0 && off % 8 == 0 && (size_t)off + 8 <= sizeof(struct user_regs_struct);
}

static int um_set_regmap_unlocked(int abi, int nr_off, int ret_off, const int *arg_offs)
{
    if (abi < 0 || abi >= UM_NABI || !arg_offs || !regmap_offset_ok(nr_off) || !regmap_offset_ok(ret_off))
        return -EINVAL;
    for (int i = 0; i < 6; i++)
        if (!regmap_offset_ok(arg_offs[i]))
            return -EINVAL;
    regmap[abi].nr = nr_off;
    regmap[abi].ret = ret_off;
    for (int i = 0; i < 6; i++)
        regmap[abi].args[i] = arg_offs[i];
    return 0;
}

LOCKED(um_set_regmap, (int abi, int nr_off, int ret_off, const int *arg_offs), (abi, nr_off, ret_off, arg_offs))

/* the values of the UM_TRAP_VALUES numbers (filter.c) */
struct value_trap value_traps[MAX_VALUE_TRAPS];
int nvalue_traps;

static int um_filter_clear_unlocked(void)
{
    if (filter_fixed)
        return 0;
    memset(trap, 0, sizeof trap);
    nvalue_traps = 0;
    return 0;
}

LOCKED(um_filter_clear, (void), ())

const struct value_trap *value_trap_of(int abi, long nr)
{
    for (int i = 0; i < nvalue_traps; i++)
        if (value_traps[i].abi == abi && value_traps[i].nr == nr)
            return &value_traps[i];
    return NULL;
}

static int um_filter_trap_values_unlocked(int abi, long nr, int arg, const uint32_t *values, int n)
{
    if (abi == UM_ABI_X32)
        nr &= ~X32_BIT;
    if (abi < 0 || abi >= UM_NABI || nr < 0 || nr >= MAX_NR || arg < 0 || arg > 5 || n < 1 ||
        n > UM_MAX_TRAP_VALUES)
        return -EINVAL;
    if (filter_fixed || (trap[abi][nr] && trap[abi][nr] != UM_TRAP_VALUES))
        return um_filter_trap_nr(abi, nr, UM_TRAP_TRACE); /* a stacked filter traps all: slower, right */
    struct value_trap *t = (struct value_trap *)value_trap_of(abi, nr);
    if (!t) {
        if (nvalue_traps >= MAX_VALUE_TRAPS) {
            int r = um_filter_trap_nr(abi, nr, UM_TRAP_TRACE);
            return r < 0 ? r : UM_TRAP_VALUES_FULL; /* right, but every call stops: the caller logs it */
        }
        t = &value_traps[nvalue_traps++];
        t->abi = abi;
        t->nr = nr;
        t->arg = arg;
        t->n = 0;
    }
    if (t->arg != arg) {
        trap[abi][nr] = UM_TRAP_TRACE; /* two engines test two arguments: trap every call */
        return 0;
    }
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < t->n; j++)
            seen |= t->v[j] == values[i];
        if (!seen && t->n >= UM_MAX_TRAP_VALUES) {
            trap[abi][nr] = UM_TRAP_TRACE;
            return 0;
        }
        if (!seen)
            t->v[t->n++] = values[i];
    }
    trap[abi][nr] = UM_TRAP_VALUES;
    return 0;
}

LOCKED(um_filter_trap_values, (int abi, long nr, int arg, const uint32_t *values, int n),
       (abi, nr, arg, values, n))

static int um_filter_trap_nr_unlocked(int abi, long nr, int how)
{
    if (abi == UM_ABI_X32)
        nr &= ~X32_BIT;
    if (abi < 0 || abi >= UM_NABI || nr < 0 || nr >= MAX_NR || (how != UM_TRAP_TRACE && !notifies((unsigned char)how)))
        return -EINVAL;
    if (filter_fixed) {
        /* a trap the running filter lacks: for a filter stacked on each
         * tracee (um_filter_inject) */
        if ((!trap[abi][nr] || trap[abi][nr] == UM_TRAP_NOTIF_VALUES) && !extra_trap[abi][nr]) {
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

LOCKED(um_filter_trap_nr, (int abi, long nr, int how), (abi, nr, how))

/* Number nr of abi a notification where argument arg's low word is one of
 * values, and as how_else says otherwise (UM_TRAP_NOTIF_VALUES: let run;
 * _TRACE: a stop). Left as it is where something else traps it already. */
static void trap_notif_values(int abi, long nr, int arg, const uint32_t *values, int n, int how_else)
{
    if ((trap[abi][nr] && trap[abi][nr] != UM_TRAP_TRACE) || value_trap_of(abi, nr) ||
        nvalue_traps >= MAX_VALUE_TRAPS || n > UM_MAX_TRAP_VALUES)
        return;
    struct value_trap *t = &value_traps[nvalue_traps++];
    t->abi = abi;
    t->nr = nr;
    t->arg = arg;
    t->n = n;
    memcpy(t->v, values, (size_t)n * sizeof *values);
    trap[abi][nr] = (unsigned char)how_else;
}

static int um_inner_notif_unlocked(void)
{
    static const uint32_t reqs[] = {PTRACE_PEEKTEXT, PTRACE_PEEKDATA, PTRACE_PEEKUSER, PTRACE_GETREGS,
                                    PTRACE_GET_SYSCALL_INFO, PTRACE_CONT, PTRACE_SYSCALL};
    static const uint32_t nohang[] = {WNOHANG | __WALL};
    if (filter_fixed)
        return -EBUSY;
    /* every other request stops as before: the trap of the view's ptrace */
    trap_notif_values(UM_ABI_X86_64, UM_NR_X86_64_ptrace, 0, reqs, 7, UM_TRAP_NOTIF_VALUES_TRACE);
    /* other waits are trapped (a filter stacked) once there is a tracer */
    trap_notif_values(UM_ABI_X86_64, UM_NR_X86_64_wait4, 2, nohang, 1,
                      trap[UM_ABI_X86_64][UM_NR_X86_64_wait4] == UM_TRAP_TRACE ? UM_TRAP_NOTIF_VALUES_TRACE
                                                                               : UM_TRAP_NOTIF_VALUES);
    return 0;
}

LOCKED(um_inner_notif, (void), ())

void um_set_event_mask(int mask) { event_mask = mask; }
void um_set_spin(int n) { spin_iterations = n < 0 ? 0 : n; }
