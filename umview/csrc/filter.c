/* filter.c - the seccomp filter: building it, installing it, stacking it on
 * running tracees */
#include "internal.h"

/* ------------------------------------------------------------------ */
/* the seccomp filter                                                  */
/* ------------------------------------------------------------------ */



static void emit(struct bpf_buf *b, struct sock_filter s)
{
    if (b->n >= MAX_INSNS) {
        b->overflow = 1;
        return;
    }
    b->f[b->n++] = s;
}

void emit_insn(struct bpf_buf *b, struct sock_filter s) { emit(b, s); }


/* The open-flags argument of number nr (with its bias) that UM_TRAP_NOTIF_RW
 * tests, or -1 if the call has none (then it is a plain notification). */
static int rw_arg(int abi, long nr)
{
    int sc = lookup_sc(abi, nr);
    return sc >= 0 && write_kind[sc] == UM_WRITE_OFLAGS ? write_arg[sc] : -1;
}

/* Does the monitor's filter answer call nr (with its bias) with args by a
 * notification (RET_USER_NOTIF)? Its RET_TRACE, when the kernel checks a call
 * changed at a seccomp stop again, is taken as allow: no second stop. */
int notifies_again(int abi, long nr, const uint64_t *args)
{
    long n = abi == UM_ABI_X32 ? nr & ~X32_BIT : nr;
    if (abi < 0 || abi >= UM_NABI || n < 0 || n >= MAX_NR || !notifies(trap[abi][n]))
        return 0;
    if (by_values(trap[abi][n])) {
        const struct value_trap *vt = value_trap_of(abi, n);
        for (int i = 0; vt && i < vt->n; i++)
            if ((uint32_t)args[vt->arg] == vt->v[i])
                return 1;
        return 0;
    }
    int arg = trap[abi][n] == UM_TRAP_NOTIF_RW ? rw_arg(abi, nr) : -1;
    return arg < 0 || !((uint32_t)args[arg] & UM_O_WRITES);
}

/* Emit a binary search over the sorted numbers nrs[lo..hi): on a match,
 * RET_TRACE or RET_USER_NOTIF as the number's trap class says (for
 * UM_TRAP_NOTIF_RW: TRACE if the low word of its open flags has a write bit),
 * RET_ALLOW otherwise. The accumulator holds the number. Long jumps use
 * BPF_JA (32-bit offset) so any table size fits. */
static void emit_search(struct bpf_buf *b, int abi, const long *nrs, const unsigned char *how, int lo, int hi,
                        uint32_t bias)
{
    if (hi - lo <= 4) {
        for (int i = lo; i < hi; i++) {
            const struct value_trap *vt = by_values(how[nrs[i]]) ? value_trap_of(abi, nrs[i]) : NULL;
            if (vt) {
                /* UM_TRAP_VALUES: a stop for the values, else allowed; the
                 * NOTIF_VALUES classes: a notification for them, else allowed
                 * or a stop */
                uint32_t hit = how[nrs[i]] == UM_TRAP_VALUES ? RET_TRACE_UM : SECCOMP_RET_USER_NOTIF;
                uint32_t miss = how[nrs[i]] == UM_TRAP_NOTIF_VALUES_TRACE ? RET_TRACE_UM : SECCOMP_RET_ALLOW;
                /* the accumulator is the argument from here on: every path returns */
                emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nrs[i] | bias, 0,
                                                     (uint8_t)(2 * vt->n + 2)));
                emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                                     offsetof(struct seccomp_data, args) + 8 * (uint32_t)vt->arg));
                for (int v = 0; v < vt->n; v++) {
                    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, vt->v[v], 0, 1));
                    emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, hit));
                }
                emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, miss));
                continue;
            }
            int arg = how[nrs[i]] == UM_TRAP_NOTIF_RW ? rw_arg(abi, nrs[i] | bias) : -1;
            if (arg >= 0) {
                /* the accumulator is the flags from here on: every path returns */
                emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nrs[i] | bias, 0, 4));
                emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                                     offsetof(struct seccomp_data, args) + 8 * (uint32_t)arg));
                emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, UM_O_WRITES, 0, 1));
                emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, RET_TRACE_UM));
                emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF));
                continue;
            }
            uint32_t ret = notifies(how[nrs[i]]) ? SECCOMP_RET_USER_NOTIF : RET_TRACE_UM;
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
    emit_search(b, abi, nrs, how, lo, mid, bias);
    if (!b->overflow)
        b->f[ja].k = (uint32_t)(b->n - ja - 1);
    emit_search(b, abi, nrs, how, mid, hi, bias);
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
    emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, RET_TRACE_UM));
}

/* seccomp(2)'s filter flags as of Linux 6.18 (SECCOMP_FILTER_FLAG_MASK):
 * TSYNC, LOG, SPEC_ALLOW, NEW_LISTENER, TSYNC_ESRCH, WAIT_KILLABLE_RECV */
#define OWN_TSYNC_ESRCH (1U << 4)
#define OWN_FILTER_FLAGS 0x3fU

/* Filters of the process's own (docs/internals.md, "A process's own seccomp
 * filters"). A listener would outrank the view (RET_USER_NOTIF beats
 * RET_TRACE, and a CONTINUE answer skips every filter of lower precedence):
 * seccomp(2) asking for one (SECCOMP_SET_MODE_FILTER with
 * SECCOMP_FILTER_FLAG_NEW_LISTENER) fails with EBUSY, as the kernel refuses a
 * second listener in a filter tree, after the flags it refuses first (an
 * unknown one, TSYNC with a listener but not TSYNC_ESRCH: EINVAL, which the
 * call gets by running). Any other filter it installs, and every
 * prctl(PR_SET_SECCOMP) (which cannot ask for a listener: its flags are 0),
 * stops: own_trace_stop runs it and keeps a copy. op, flags and option are
 * ints: their low words. The accumulator holds the number (with its bias)
 * and holds it again after. */
static void emit_own_filters(struct bpf_buf *b, uint32_t nr_seccomp, uint32_t nr_prctl)
{
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr_seccomp, 0, 9));
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args)));
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_SET_MODE_FILTER, 0, 11));
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args) + 8));
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, SECCOMP_FILTER_FLAG_NEW_LISTENER, 0, 4));
    /* flags the kernel refuses first (EINVAL, before it looks at anything
     * else): an unknown one, TSYNC with a listener but without TSYNC_ESRCH.
     * The call stops, and the kernel refuses it when it runs */
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, ~(uint32_t)OWN_FILTER_FLAGS, 3, 0));
    emit(b, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, SECCOMP_FILTER_FLAG_TSYNC | OWN_TSYNC_ESRCH));
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_FILTER_FLAG_TSYNC, 1, 0));
    emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EBUSY));
    emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, RET_TRACE_UM));
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr_prctl, 0, 4));
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args)));
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PR_SET_SECCOMP, 0, 1));
    emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, RET_TRACE_UM));
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
}

/* clone with CLONE_UNTRACED stops (untraced_clone takes the flag off);
 * clone3 fails with ENOSYS (core.h). The accumulator holds the number and
 * holds it again after. */
static void emit_clone_guard(struct bpf_buf *b, uint32_t nr_clone, uint32_t nr_clone3)
{
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr_clone3, 0, 1));
    emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS));
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr_clone, 0, 4));
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args)));
    emit(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, UM_CLONE_UNTRACED, 0, 1));
    emit(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, RET_TRACE_UM));
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
}

/* Is this a clone with CLONE_UNTRACED (what emit_clone_guard stops)? */
int untraced_clone(int abi, uint64_t nr, const uint64_t *args)
{
    return nr == (uint64_t)(abi == UM_ABI_I386 ? UM_NR_I386_clone : abi == UM_ABI_X32 ? UM_NR_X32_clone
                                                                                      : UM_NR_X86_64_clone) &&
           ((uint32_t)args[0] & UM_CLONE_UNTRACED);
}

/* What emit_own_filters stops, as C sees it: 1 for seccomp(2) installing a
 * filter without a listener, 2 for prctl(PR_SET_SECCOMP), else 0. */
int own_filter_call(int abi, uint64_t nr, const uint64_t *args)
{
    int i386 = abi == UM_ABI_I386, x32 = abi == UM_ABI_X32;
    if (nr == (uint64_t)(i386 ? UM_NR_I386_seccomp : x32 ? UM_NR_X32_seccomp : UM_NR_X86_64_seccomp))
        return (uint32_t)args[0] == SECCOMP_SET_MODE_FILTER &&
               (!((uint32_t)args[1] & SECCOMP_FILTER_FLAG_NEW_LISTENER) || /* or one the kernel refuses */
                ((uint32_t)args[1] & ~OWN_FILTER_FLAGS) ||                   /* by its flags (EINVAL): */
                ((uint32_t)args[1] & (SECCOMP_FILTER_FLAG_TSYNC | OWN_TSYNC_ESRCH)) == /* as the filter */
                    SECCOMP_FILTER_FLAG_TSYNC);
    if (nr == (uint64_t)(i386 ? UM_NR_I386_prctl : x32 ? UM_NR_X32_prctl : UM_NR_X86_64_prctl))
        return (uint32_t)args[0] == PR_SET_SECCOMP ? 2 : 0;
    return 0;
}

/* The filter of the trap table tab (trap classes per ABI and number). */
static int build_filter_of(struct bpf_buf *b, unsigned char (*tab)[MAX_NR], uint32_t guard_ret)
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
    emit_own_filters(b, UM_NR_X86_64_seccomp, UM_NR_X86_64_prctl);
    emit_clone_guard(b, UM_NR_X86_64_clone, UM_NR_X86_64_clone3);
    emit_region_guard(b, UM_ABI_X86_64, 0, guard_ret);
    emit_search(b, UM_ABI_X86_64, nrs, tab[UM_ABI_X86_64], 0, collect(tab[UM_ABI_X86_64], nrs), 0);

    int lx32 = b->n;
    b->f[jx32 + 1].k = (uint32_t)(lx32 - (jx32 + 1) - 1);
    emit_control(b, (uint32_t)X32_BIT);
    emit_own_filters(b, UM_NR_X32_seccomp, UM_NR_X32_prctl);
    emit_clone_guard(b, UM_NR_X32_clone, UM_NR_X32_clone3);
    emit_region_guard(b, UM_ABI_X32, (uint32_t)X32_BIT, guard_ret);
    emit_search(b, UM_ABI_X32, nrs, tab[UM_ABI_X32], 0, collect(tab[UM_ABI_X32], nrs), (uint32_t)X32_BIT);

    int l32 = b->n;
    b->f[j32 + 1].k = (uint32_t)(l32 - (j32 + 1) - 1);
    emit(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
    emit_control(b, 0);
    emit_own_filters(b, UM_NR_I386_seccomp, UM_NR_I386_prctl);
    emit_clone_guard(b, UM_NR_I386_clone, UM_NR_I386_clone3);
    emit_region_guard(b, UM_ABI_I386, 0, guard_ret);
    emit_search(b, UM_ABI_I386, nrs, tab[UM_ABI_I386], 0, collect(tab[UM_ABI_I386], nrs), 0);
    return b->overflow ? -E2BIG : 0;
}

/* The first filter: the region's calls stop as its other traps do (a
 * notification where it has a listener) */
static int build_filter(struct bpf_buf *b)
{
    return build_filter_of(b, trap, any_notif() ? SECCOMP_RET_USER_NOTIF : RET_TRACE_UM);
}

/* Could a filter of the monitor return RET_TRACE for this call (nr with its
 * bias)? The control call, a filter's installation, and any number it traps:
 * the first filter traps the spawn's (a notified one only with write flags,
 * but a stacked filter traps it as a ptrace stop), a stacked one also those
 * added since. Generous where it cannot know which filters a process has: a
 * call it says yes to is taken as the monitor's. */
int monitor_may_trace(int abi, uint64_t nr, const uint64_t *args)
{
    if (abi < 0 || abi >= UM_NABI)
        return 0;
    if (own_filter_call(abi, nr, args) || untraced_clone(abi, nr, args) || region_guarded(abi, nr, args))
        return 1;
    if (abi == UM_ABI_X32)
        nr &= ~(uint64_t)X32_BIT;
    if (nr == UM_NR_CONTROL)
        return 1;
    return nr < MAX_NR && ((trap[abi][nr] && trap[abi][nr] != UM_TRAP_NOTIF_VALUES) || extra_trap[abi][nr]);
}

int any_notif(void)
{
    for (int a = 0; a < UM_NABI; a++)
        for (int i = 0; i < MAX_NR; i++)
            if (notifies(trap[a][i]))
                return 1;
    return 0;
}

/* Does the filter notify any call but an inner tracer's (um_inner_notif)? */
int any_path_notif(void)
{
    for (int a = 0; a < UM_NABI; a++)
        for (int i = 0; i < MAX_NR; i++)
            if (notifies(trap[a][i]) && trap[a][i] != UM_TRAP_NOTIF_VALUES && trap[a][i] != UM_TRAP_NOTIF_VALUES_TRACE)
                return 1;
    return 0;
}

/* Install the filter in the calling (child) process; *listener gets the fd
 * of its user notifications, or -1 if it has no notification trap. */
int install_filter(int *listener)
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


static struct bpf_buf inject_buf;
int inject_ready; /* inject_buf holds the filter of the current traps */

static void filter_stacked(pid_t tid, void *arg)
{
    (void)arg;
    thr(tid)->need_filter = 0;
}

/* Stack a filter of every current trap (all as ptrace stops: a new listener
 * would be nobody's) on the process of a thread at an interrupt stop, for all
 * its threads (TSYNC). Its registers are put back as they were, with the
 * restart of an interrupted call done as the kernel would have (or left to
 * the kernel, when a signal is to be delivered). */
void inject_filter(pid_t tid)
{
    struct user_regs_struct saved;
    pid_t tgid = tgid_of(tid);
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
    /* An interrupted call with a restart code. With a signal to deliver (one
     * pending for the thread, or one kept meanwhile and sent again below) the
     * kernel does the restart itself, from these registers, when it delivers
     * it: a tracer that sees that signal's stop sees the call interrupted as
     * without the injection (gdb attaching to a sleeping process), and a
     * handler without SA_RESTART gets EINTR as natively. With none it would
     * not look: do the restart it would have done. */
    uint64_t pending = proc_status_mask(tid, "SigPnd") & ~proc_status_mask(tid, "SigBlk");
    if ((long long)saved.orig_rax >= 0 && !sigs && !pending) {
        long long e = (long long)saved.rax;
        if (e == -ERESTARTSYS_ || e == -ERESTARTNOINTR_ || e == -ERESTARTNOHAND_) {
            back.rax = saved.orig_rax;
            back.rip -= 2;
        } else if (e == -ERESTART_RESTARTBLOCK_) {
            back.rax = SYS_restart_syscall;
            back.rip -= 2;
        }
    }
    if (ptrace(PTRACE_SETREGS, tid, 0, &back) && errno != ESRCH) {
        /* it stands at the vDSO's syscall instruction with the injected
         * call's registers: it cannot go on */
        int e = -errno;
        if (kill(tid, SIGKILL) == 0)
            write_failed(tid, "the registers could not be restored after stacking a filter: the thread is killed", e);
    }
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
    thr(tid)->need_filter = 0;
    each_thread(tgid, filter_stacked, NULL);
}

/* The filter to stack: every trap, the spawn's and those added since, all
 * as ptrace stops. */
int build_inject(void)
{
    static unsigned char all[UM_NABI][MAX_NR];
    for (int a = 0; a < UM_NABI; a++)
        for (int i = 0; i < MAX_NR; i++)
            all[a][i] = (trap[a][i] && trap[a][i] != UM_TRAP_NOTIF_VALUES) || extra_trap[a][i] ? UM_TRAP_TRACE : 0;
    int r = build_filter_of(&inject_buf, all, RET_TRACE_UM);
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
    for (pid_t t = 1; t <= thread_max_seen(); t++)
        if (thr(t)->seen && ptrace(PTRACE_INTERRUPT, (pid_t)t, 0, 0) == 0) {
            thr(t)->need_filter = 1;
            n++;
        }
    return n;
}
