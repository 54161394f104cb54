/* ownseccomp.c - the seccomp filters a process of the view installs itself
 *
 * The kernel runs them with the monitor's, newest first, and acts on the
 * first-seen answer of highest precedence: their ERRNO, KILL and TRAP need
 * nothing from the monitor. Their RET_TRACE is a PTRACE_EVENT_SECCOMP stop
 * for the real tracer, the monitor, with the data of the newest filter that
 * said TRACE; the monitor's filters say UM_SECCOMP_DATA (core.h). As the
 * process sees it, its filters run before the call reaches the machine (the
 * monitor and its modules stand in for the kernel): a call they TRACE goes to
 * the process's own tracer, or without one fails with ENOSYS and is never
 * executed, whatever the monitor would have made of it.
 *
 * Two answers of the monitor's filters hide such a TRACE: a RET_USER_NOTIF
 * (it outranks TRACE: the monitor gets a notification, and its CONTINUE would
 * run the call), and the TRACE of a filter the monitor stacked after the
 * process's (its data is the one reported). So the monitor keeps a copy of
 * every filter a process installs (the filters stop seccomp(2) and
 * prctl(PR_SET_SECCOMP) for it: emit_own_filters) and runs them itself, as
 * the kernel would, where they may have been hidden. See docs/internals.md,
 * "A process's own seccomp filters". */
#include "internal.h"

/* One filter a thread installed; a thread's list is its newest, prev the one
 * before (a list may end in OWN_UNKNOWN). Shared by the threads and children
 * that inherited it, freed with its last holder. */
struct own_filter {
    int refs;
    struct own_filter *prev;
    /* while pending (own_pending): the call that installs it */
    uint64_t nr;
    unsigned flags;
    int len;
    struct sock_filter insns[];
};

static struct own_filter *own_ref(struct own_filter *f)
{
    if (f && f != OWN_UNKNOWN)
        f->refs++;
    return f;
}

static void own_unref(struct own_filter *f)
{
    while (f && f != OWN_UNKNOWN && --f->refs == 0) {
        struct own_filter *prev = f->prev;
        free(f);
        f = prev;
    }
}

static void own_set(struct um_thread *t, struct own_filter *f)
{
    f = own_ref(f);
    own_unref(t->own);
    t->own = f;
}

void own_filters_drop(struct um_thread *t)
{
    own_set(t, NULL);
    free(t->own_pending);
    t->own_pending = NULL;
}

/* The record of a thread moves to another tid (a non-leader's exec): its
 * filters go with the copy, the old record lets them be. */
void own_filters_moved(struct um_thread *from)
{
    from->own = NULL;
    from->own_pending = NULL;
}

/* A new thread or process has the filters of the thread that made it. */
void own_filters_inherit(struct um_thread *child, const struct um_thread *parent) { own_set(child, parent->own); }

/* A thread seized by um_attach may have filters from before: unknown. */
void own_filters_attached(pid_t tid)
{
    own_set(thr(tid), status_field(tid, "Seccomp", 0) == SECCOMP_MODE_FILTER ? OWN_UNKNOWN : NULL);
}

/* ------------------------------------------------------------------ */
/* running a filter as the kernel does                                 */
/* ------------------------------------------------------------------ */

/* Run one classic BPF program, of the instructions the kernel's seccomp
 * accepts (seccomp_check_filter), on sd: 0 and its answer in *ret, or
 * -EINVAL for a program the kernel would have refused (BPF_MOD among them:
 * seccomp does not take it). 32-bit ALU; a
 * division by a zero X ends the program with 0, as the kernel's conversion
 * to eBPF does; a shift by X takes X modulo 32, as its interpreter does. */
static int bpf_run(const struct sock_filter *f, int len, const struct seccomp_data *sd, uint32_t *ret)
{
    uint32_t A = 0, X = 0, M[BPF_MEMWORDS] = {0};
    for (int pc = 0; pc < len; pc++) {
        const struct sock_filter *in = &f[pc];
        uint32_t k = in->k, v = BPF_SRC(in->code) == BPF_X ? X : k;
        switch (in->code) {
        case BPF_LD | BPF_W | BPF_ABS:
            if (k >= sizeof *sd || (k & 3))
                return -EINVAL;
            memcpy(&A, (const char *)sd + k, sizeof A);
            continue;
        case BPF_LD | BPF_W | BPF_LEN:
            A = sizeof *sd;
            continue;
        case BPF_LDX | BPF_W | BPF_LEN:
            X = sizeof *sd;
            continue;
        case BPF_LD | BPF_IMM:
            A = k;
            continue;
        case BPF_LDX | BPF_IMM:
            X = k;
            continue;
        case BPF_MISC | BPF_TAX:
            X = A;
            continue;
        case BPF_MISC | BPF_TXA:
            A = X;
            continue;
        case BPF_ALU | BPF_NEG:
            A = -A;
            continue;
        case BPF_RET | BPF_K:
            *ret = k;
            return 0;
        case BPF_RET | BPF_A:
            *ret = A;
            return 0;
        case BPF_JMP | BPF_JA:
            if (k >= (uint32_t)(len - pc - 1))
                return -EINVAL;
            pc += (int)k;
            continue;
        }
        if (in->code == (BPF_LD | BPF_MEM) || in->code == (BPF_LDX | BPF_MEM) || in->code == BPF_ST ||
            in->code == BPF_STX) {
            if (k >= BPF_MEMWORDS)
                return -EINVAL;
            if (in->code == (BPF_LD | BPF_MEM))
                A = M[k];
            else if (in->code == (BPF_LDX | BPF_MEM))
                X = M[k];
            else
                M[k] = in->code == BPF_ST ? A : X;
        } else if (BPF_CLASS(in->code) == BPF_ALU) {
            switch (BPF_OP(in->code)) {
            case BPF_ADD: A += v; break;
            case BPF_SUB: A -= v; break;
            case BPF_MUL: A *= v; break;
            case BPF_AND: A &= v; break;
            case BPF_OR: A |= v; break;
            case BPF_XOR: A ^= v; break;
            case BPF_LSH: A = A << (v & 31); break;
            case BPF_RSH: A = A >> (v & 31); break;
            case BPF_DIV:
                if (v == 0) {
                    *ret = 0;
                    return 0;
                }
                A /= v;
                break;
            default:
                return -EINVAL;
            }
        } else if (BPF_CLASS(in->code) == BPF_JMP) {
            int taken;
            switch (BPF_OP(in->code)) {
            case BPF_JEQ: taken = A == v; break;
            case BPF_JGT: taken = A > v; break;
            case BPF_JGE: taken = A >= v; break;
            case BPF_JSET: taken = (A & v) != 0; break;
            default: return -EINVAL;
            }
            pc += taken ? in->jt : in->jf;
        } else {
            return -EINVAL;
        }
    }
    return -EINVAL; /* ran off its end */
}

int um_seccomp_bpf_run(const char *insns, int len, const char *data, uint32_t *ret)
{
    if (len <= 0 || len > BPF_MAXINSNS)
        return -EINVAL;
    struct seccomp_data sd;
    memcpy(&sd, data, sizeof sd);
    struct sock_filter *f = malloc((size_t)len * sizeof *f);
    if (!f)
        return -ENOMEM;
    memcpy(f, insns, (size_t)len * sizeof *f);
    int r = bpf_run(f, len, &sd, ret);
    free(f);
    return r;
}

/* Do the filters of list f (the newest first) answer RET_TRACE for sd, as
 * the kernel combines them (the first-seen answer of highest precedence)?
 * Then 1 and its data in *data. Filters the monitor does not know (an
 * OWN_UNKNOWN end, a program it cannot run) are left out: they could only
 * have answered with more precedence, and then this call would not be here
 * (at a seccomp stop nothing above TRACE was answered, at a notification
 * nothing above USER_NOTIF). */
static int own_traces(const struct own_filter *f, const struct seccomp_data *sd, uint32_t *data)
{
    uint32_t ret = SECCOMP_RET_ALLOW, cur;
    for (; f && f != OWN_UNKNOWN; f = f->prev)
        if (bpf_run(f->insns, f->len, sd, &cur) == 0 &&
            (int32_t)(cur & SECCOMP_RET_ACTION_FULL) < (int32_t)(ret & SECCOMP_RET_ACTION_FULL))
            ret = cur;
    if ((ret & SECCOMP_RET_ACTION_FULL) != SECCOMP_RET_TRACE)
        return 0;
    *data = ret & SECCOMP_RET_DATA;
    return 1;
}

/* ------------------------------------------------------------------ */
/* a filter installed                                                  */
/* ------------------------------------------------------------------ */

/* A copy of the program a struct sock_fprog at uargs points to (its 32-bit
 * layout for i386 and x32, as the kernel reads it for a compat call), or
 * NULL if it cannot be read or the kernel would refuse its length. */
static struct own_filter *read_prog(pid_t tid, int abi, uint64_t uargs)
{
    uint16_t len;
    uint64_t insns;
    if (abi == UM_ABI_X86_64) {
        struct { uint16_t len; uint16_t pad[3]; uint64_t filter; } p;
        if (um_read_mem(tid, uargs, &p, sizeof p) != (int)sizeof p)
            return NULL;
        len = p.len;
        insns = p.filter;
    } else {
        struct { uint16_t len; uint16_t pad; uint32_t filter; } p;
        if (um_read_mem(tid, uargs, &p, sizeof p) != (int)sizeof p)
            return NULL;
        len = p.len;
        insns = p.filter;
    }
    if (len == 0 || len > BPF_MAXINSNS)
        return NULL;
    size_t size = (size_t)len * sizeof(struct sock_filter);
    struct own_filter *f = malloc(sizeof *f + size);
    if (!f)
        return NULL;
    if (um_read_mem(tid, insns, f->insns, size) != (int)size) {
        free(f);
        return NULL;
    }
    f->refs = 0;
    f->prev = NULL;
    f->len = len;
    return f;
}

static void own_synced(pid_t tid, void *f) { own_set(thr(tid), f); }

/* A copy installed by thread tid (flags: the seccomp(2) flags) becomes its
 * newest filter, or with SECCOMP_FILTER_FLAG_TSYNC every thread's of its
 * process; NULL: installed, but not read. */
static void own_installed(pid_t tid, struct own_filter *f, unsigned flags)
{
    struct own_filter *put = f ? f : OWN_UNKNOWN;
    if (f)
        f->prev = own_ref(thr(tid)->own);
    if (flags & SECCOMP_FILTER_FLAG_TSYNC)
        each_thread(tgid_of(tid), own_synced, put);
    own_set(thr(tid), put); /* also if /proc did not list it */
}

/* The thread stopped at seccomp(2) or prctl(2) installing a filter of its
 * own (kind: own_filter_call). It is run to its exit here and, if it
 * succeeded, the copy is kept (own_installed); 1: the thread is resumed. A
 * thread whose inner tracer wants its syscall stops runs it the usual way
 * (the exit stop is the tracer's), and the copy waits for the exit
 * (own_filter_exit); so does one an engine claims (it may skip or rewrite
 * it), whose filters become unknown: 0, um_next goes on with the call. */
static int own_filter_install(pid_t tid, const struct um_sci *si, int abi, int kind)
{
    const uint64_t *a = si->seccomp.args;
    int sc = lookup_sc(abi, (long)si->seccomp.nr);
    if (sc >= 0 && claim[abi][sc]) {
        own_set(thr(tid), OWN_UNKNOWN);
        return 0;
    }
    if (kind == 2 && a[1] != SECCOMP_MODE_FILTER)
        return 0; /* strict mode, or a bad mode: EINVAL (a view is in filter mode already) */
    unsigned flags = kind == 1 ? (uint32_t)a[1] : 0;
    struct own_filter *f = read_prog(tid, abi, a[2]);
    if (thr(tid)->inner_sys) {
        if (!f)
            f = calloc(1, sizeof *f); /* read nothing: an empty copy stands for unknown */
        if (f) {
            f->nr = si->seccomp.nr;
            f->flags = flags;
        }
        free(thr(tid)->own_pending);
        thr(tid)->own_pending = f;
        return 0;
    }
    struct um_sci ex;
    uint64_t sigs = 0;
    if (inject_step(tid, SI_EXIT, &ex, &sigs)) {
        free(f);
        return 1; /* gone: its status waits for the loop */
    }
    if (ex.exit.rval == 0)
        own_installed(tid, f, flags);
    else
        free(f);
    resend_signals(tid, sigs);
    resume(tid, PTRACE_CONT, 0);
    return 1;
}

/* At a syscall-exit stop: the installation own_filter_install left pending,
 * if this is its exit (the number is still the one stopped at) and it
 * succeeded. */
void own_filter_exit(pid_t tid, const struct um_sci *si)
{
    struct own_filter *f = thr(tid)->own_pending;
    if (!f)
        return;
    thr(tid)->own_pending = NULL;
    struct user_regs_struct r;
    if (si->op != SI_EXIT || si->exit.rval != 0 || get_regs(tid, &r) || r.orig_rax != f->nr) {
        free(f);
        return;
    }
    unsigned flags = f->flags;
    if (f->len == 0) {
        free(f);
        f = NULL;
    }
    own_installed(tid, f, flags);
}

/* ------------------------------------------------------------------ */
/* a call the process's filters TRACE                                  */
/* ------------------------------------------------------------------ */

/* THE HOOK for an inner tracer (a process of the view tracing this one
 * through the emulated ptrace, umview/innertrace.py): a filter of the
 * process's own answers RET_TRACE with data for the call sd of thread tid
 * (abi: UM_ABI_*). Return 1 if the inner tracer takes it, 0 if the thread
 * has no tracer that set PTRACE_O_TRACESECCOMP: then the call fails with
 * ENOSYS, as the kernel fails it ("a tracer will be notified if it requests
 * PTRACE_O_TRACESECCOMP"; a tracer without it gets no stop, the call ENOSYS).
 *
 * notif NULL: tid waits at a PTRACE_EVENT_SECCOMP stop; the inner tracer
 * should see a PTRACE_EVENT_SECCOMP stop with data in its GETEVENTMSG. Else
 * the call waits as notification notif of the monitor's listener (the
 * monitor's RET_USER_NOTIF outranked the process's TRACE): the hook must
 * answer it, or interrupt the thread (PTRACE_INTERRUPT: the kernel drops the
 * notification and restarts the call, as serve_notification's redirection
 * does) and show the inner tracer the seccomp stop at the restart's entry
 * stop, letting the notification that then comes again through (pass_notif).
 *
 * Wiring it to the emulation (not done): the thread record learns the
 * tracer's PTRACE_O_TRACESECCOMP from um_set_inner (a flag like
 * UM_INNER_SYSCALL); for such a thread own_trace_stop says so to um_next,
 * which hands Python a UM_EV_STOP with the status of a PTRACE_EVENT_SECCOMP
 * stop and msg = data; innertrace reports it and, when the tracer resumes
 * the thread, has the call decided as it then stands (um_decide_stopped, as
 * after a syscall-entry stop). The kernel runs the filters again after the
 * tracer's stop but takes RET_TRACE as allow: no stop of the monitor's own
 * comes, so that decision must cover every call monitor_may_trace() says one
 * of the monitor's filters traps (um_decide_stopped looks at trap[] alone). */
int inner_tracer_seccomp(pid_t tid, int abi, const struct seccomp_data *sd, uint32_t data,
                         const struct seccomp_notif *notif)
{
    (void)abi;
    (void)sd;
    struct um_thread *t = thr(tid);
    if (!t->inner || !t->inner_seccomp)
        return 0;
    /* at a seccomp stop of a thread whose inner tracer asked for them: its
     * stop (2: um_next hands it to Python as UM_EV_STOP) */
    if (!notif)
        return 2;
    /* the monitor's notification hid it: the call is interrupted, unanswered,
     * and its restart's entry stop stands for the seccomp stop (loop.c) */
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0))
        return 0;
    t->redirected = 1;
    t->seccomp_redirect = 1;
    t->seccomp_data = data;
    return 1;
}

/* At a seccomp stop: if a filter of the process's own answered TRACE, deal
 * with it (the inner tracer's, or ENOSYS); if the monitor's filter stopped a
 * filter's installation, do it; then 1: the thread is resumed or held. 0:
 * the stop is the monitor's, for um_next to decide. A stop is the process's
 * if its data is not UM_SECCOMP_DATA, or is but for a call no filter of the
 * monitor traces (a process may use that data), or if its filters, run here,
 * answer TRACE (a filter the monitor stacked later reported its own data). */
int own_trace_stop(pid_t tid, const struct um_sci *si)
{
    int abi = abi_of(si);
    if (abi < 0)
        return 0; /* an arch the monitor's filters refuse: um_next refuses it */
    struct seccomp_data sd = {(int)si->seccomp.nr, si->arch, si->instruction_pointer, {0}};
    memcpy(sd.args, si->seccomp.args, sizeof sd.args);
    uint32_t data = si->seccomp.ret_data, own_data;
    int own = data != UM_SECCOMP_DATA || !monitor_may_trace(abi, si->seccomp.nr, si->seccomp.args);
    if (!own && own_traces(thr(tid)->own, &sd, &own_data)) {
        own = 1;
        data = own_data;
    }
    if (!own) {
        int kind = own_filter_call(abi, si->seccomp.nr, si->seccomp.args);
        return kind ? own_filter_install(tid, si, abi, kind) : 0;
    }
    stats.own_trace++;
    int inner = inner_tracer_seccomp(tid, abi, &sd, data, NULL);
    if (inner)
        return inner;
    /* "If there is no tracer present, the system call is not executed and
     * returns a failure status with errno set to ENOSYS" (seccomp(2)) */
    cur_sci = *si;
    skip_call(tid, abi, si->seccomp.args, -ENOSYS);
    thr(tid)->exit_wanted = 0;
    resume(tid, PTRACE_CONT, 0); /* an inner tracer's syscall-exit stop still comes */
    return 1;
}

/* At a syscall-entry stop, before the monitor decides the call there (and
 * lets its seccomp check pass unlooked at, pass_notif): do the thread's own
 * filters answer TRACE for it? Then the monitor leaves it to that check
 * (own_trace_stop, own_trace_notif), which comes before the call runs. */
int own_filters_trace(pid_t tid, const struct um_sci *si)
{
    int abi = abi_of(si);
    uint32_t data;
    if (abi < 0 || !thr(tid)->own)
        return 0;
    struct seccomp_data sd = {(int)si->entry.nr, si->arch, si->instruction_pointer, {0}};
    memcpy(sd.args, si->entry.args, sizeof sd.args);
    return own_traces(thr(tid)->own, &sd, &data);
}

/* At a notification, before the monitor decides it: do the process's own
 * filters answer TRACE for the call (hidden by the monitor's USER_NOTIF)?
 * Then the inner tracer's, or answered with ENOSYS; 1. */
int own_trace_notif(const struct seccomp_notif *req)
{
    pid_t tid = (pid_t)req->pid;
    uint32_t data;
    if (!own_traces(thr(tid)->own, &req->data, &data))
        return 0;
    stats.own_trace++;
    if (inner_tracer_seccomp(tid, abi_from(req->data.arch, req->data.nr), &req->data, data, req))
        return 1;
    struct seccomp_notif_resp resp;
    memset(&resp, 0, sizeof resp);
    resp.id = req->id;
    resp.error = -ENOSYS;
    notif_ioctl(SECCOMP_IOCTL_NOTIF_SEND, &resp);
    return 1;
}
