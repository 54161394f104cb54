/* inner.c - what Python needs to emulate ptrace for inner tracers: threads
 * whose stops go to Python, held stops resumed later, interrupts, and the
 * decision of a call an inner tracer let go (docs/internals.md, "Tracers
 * inside a view"). The policy (who traces whom, status words, requests) is
 * Python's (umview/innertrace.py). */
#include "internal.h"
#include <time.h>

/* The real options of a thread: the monitor's, and PTRACE_EVENT_EXIT if its
 * inner tracer wants it. PTRACE_SETOPTIONS needs the thread stopped: if it
 * runs, the loop sets them at its next stop. */
void apply_options(pid_t tid)
{
    struct um_thread *t = thr(tid);
    /* an inner tracer's tracee stops at its exit: for the tracer's
     * PTRACE_O_TRACEEXIT, or held there until the tracer collects its exit
     * (innertrace: its parent learns of it after its tracer, as natively) */
    t->opts_dirty = ptrace(PTRACE_SETOPTIONS, tid, 0, TRACE_OPTIONS | (t->inner ? PTRACE_O_TRACEEXIT : 0)) != 0 &&
                    errno == ESRCH;
}

int um_set_inner(int tid, int flags)
{
    struct um_thread *t = thr(tid);
    int was_inner = t->inner;
    t->inner = !!(flags & UM_INNER);
    t->inner_sys = t->inner && (flags & UM_INNER_SYSCALL);
    t->inner_seccomp = t->inner && (flags & UM_INNER_SECCOMP);
    t->inner_step = t->inner && (flags & UM_INNER_STEP);
    t->inner_emu = t->inner && (flags & UM_INNER_EMU);
    if (!t->inner) {
        t->inner_by = t->inner_vtid = 0; /* detached: no tracer's requests answered here */
        t->inner_resume = t->entry_by_c = 0;
        t->inner_tracer = 0;
        cpend_drop(tid);
    }
    if (t->inner != was_inner || t->opts_dirty)
        apply_options(tid);
    return 0;
}

int um_resume(int tid, int req, int sig)
{
    if (req != PTRACE_CONT && req != PTRACE_SINGLESTEP && req != PTRACE_LISTEN)
        return -EINVAL;
    /* a step goes through resume() too: a syscall stop the monitor waits for
     * still comes (UM_STOP_STEP then stands for the trap) */
    if (req == PTRACE_SINGLESTEP && !thr(tid)->inner_step && !thr(tid)->inner_emu)
        return -EINVAL; /* um_set_inner(UM_INNER_STEP or _EMU) first */
    long r = req != PTRACE_LISTEN ? (resume(tid, PTRACE_CONT, sig), 0) : ptrace(req, tid, 0, sig);
    if (r)
        return -errno;
    thr(tid)->listening = req == PTRACE_LISTEN;
    /* the filter, at its next stop; not from a group-stop: the interrupt
     * would end the listening at once, and the stop be reported again (the
     * trap after SIGCONT stacks it) */
    if (thr(tid)->need_filter && req != PTRACE_LISTEN)
        ptrace(PTRACE_INTERRUPT, tid, 0, 0);
    return 0;
}

/* The parent of tid, a zombie the monitor just collected (as its tracer): the
 * process its exit is now the kernel's to report to; 0 if it is gone already
 * (its parent reaped it) or cannot be read. Read at once: that parent may
 * reap it any moment. */
long zombie_parent(pid_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *end = strrchr(buf, ')');
    char state;
    long ppid;
    if (!end || sscanf(end + 1, " %c %ld", &state, &ppid) != 2 || (state != 'Z' && state != 'X'))
        return 0;
    return ppid;
}

int um_set_resume_signal(int tid, int sig)
{
    if (sig < 0 || sig > 64)
        return -EINVAL;
    thr(tid)->resume_sig = (unsigned char)sig;
    return 0;
}

int um_listening(int tid)
{
    return thr(tid)->listening;
}

int um_inner_stopped(int tid, int tracer, int vtid, int shown, int resume)
{
    struct um_thread *t = thr(tid);
    t->inner_by = t->inner ? tracer : 0;
    t->inner_vtid = t->inner_by ? vtid : 0;
    t->inner_shown = t->inner_by && shown;
    t->inner_resume = t->inner_by ? (unsigned)resume & 3 : 0;
    t->entry_by_c = 0; /* Python's stop or resume: its exit is Python's to report */
    cpend_drop(tid);
    return 0;
}

/* What C did for inner tracers, until Python takes it (um_take_notes) */
#define MAX_NOTES 256
static struct um_inner_note notes[MAX_NOTES];
static int nnotes;

int um_take_notes(struct um_inner_note *out, int max)
{
    int n = nnotes < max ? nnotes : max;
    memcpy(out, notes, (size_t)n * sizeof *out);
    memmove(notes, notes + n, (size_t)(nnotes - n) * sizeof *notes);
    nnotes -= n;
    return n;
}

int um_notes_pending(void) { return nnotes; }

static void note(pid_t tid, int what, const uint64_t *args)
{
    struct um_inner_note *n = &notes[nnotes++];
    n->tid = tid;
    n->what = what;
    if (args)
        memcpy(n->args, args, sizeof n->args);
    else
        memset(n->args, 0, sizeof n->args);
}

int um_set_inner_tracer(int tid, int tracer, int vtid, int sysgood)
{
    struct um_thread *t = thr(tid);
    t->inner_tracer = tracer;
    t->inner_tvtid = vtid;
    t->inner_sysgood = !!sysgood;
    return 0;
}

/* Syscall stops C reported that their tracers have not waited for yet,
 * oldest first (as Python's books serve them) */
#define MAX_CPEND 64
static pid_t cpend[MAX_CPEND];
static int ncpend;

static void cpend_add(pid_t tid, pid_t tracer, int word)
{
    struct um_thread *t = thr(tid);
    cpend[ncpend++] = tid;
    t->cpend_word = word;
    t->cpend_tracer = tracer;
    __atomic_add_fetch(&thr(tracer)->cpending, 1, __ATOMIC_RELEASE);
}

void cpend_drop(pid_t tid)
{
    struct um_thread *t = thr(tid);
    if (!t->cpend_word)
        return;
    t->cpend_word = 0;
    for (int i = 0; i < ncpend; i++)
        if (cpend[i] == tid) {
            memmove(cpend + i, cpend + i + 1, (size_t)(ncpend - i - 1) * sizeof *cpend);
            ncpend--;
            break;
        }
    struct um_thread *w = thr(t->cpend_tracer);
    if (w->cpending > 0)
        __atomic_sub_fetch(&w->cpending, 1, __ATOMIC_RELEASE);
}

int um_inner_taken(int tid)
{
    cpend_drop(tid);
    return 0;
}

/* A wait4 of tracer thread tracer (args) that a pending stop C reported
 * answers: for any child or that tracee, __WALL with or without WNOHANG, no
 * rusage. The status word written, the stop taken: 1 with *rval the id the
 * tracer names the tracee by; 0 if none. */
static int take_cpend(pid_t tracer, const uint64_t *args, long *rval)
{
    uint32_t options = (uint32_t)args[2];
    if (!thr(tracer)->cpending || args[3] || (options & ~(uint32_t)(WNOHANG | __WALL)) || !(options & __WALL))
        return 0;
    for (int i = 0; i < ncpend; i++) {
        struct um_thread *t = thr(cpend[i]);
        if (t->cpend_tracer != tracer || ((int)args[0] != -1 && (int)args[0] != t->inner_tvtid))
            continue;
        int word = t->cpend_word;
        if (args[1] && um_write_mem(tracer, args[1], &word, sizeof word) != sizeof word)
            return 0;
        pid_t tid = cpend[i];
        *rval = t->inner_tvtid;
        cpend_drop(tid);
        note(tid, UM_NOTE_TAKEN, NULL);
        return 1;
    }
    return 0;
}

/* The call of pid, held at its syscall-entry stop, decided as it now stands
 * (um_decide_stopped's way) where C decides it alone: 1 if it may go on (or
 * was refused: skipped with its errno), 0 if Python must see it (or it is
 * its own filter's, or a seccomp stop stood in for): then nothing is done. */
static int entry_decided_in_c(pid_t pid)
{
    static struct um_decide_in dec;
    struct um_sci si;
    if (thr(pid)->seccomp_stand_in || ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof si, &si) <= 0 ||
        si.op != SI_ENTRY || own_filters_trace(pid, &si))
        return 0;
    int abi = abi_of(&si);
    long nr = abi == UM_ABI_X32 ? (long)(si.entry.nr & ~X32_BIT) : (long)si.entry.nr;
    if (abi < 0 || nr < 0 || nr >= MAX_NR || !trap[abi][nr])
        return 1;
    dec.abi = abi;
    dec.nr = si.entry.nr;
    memcpy(dec.args, si.entry.args, sizeof dec.args);
    int d = decide_call(pid, &dec, NULL);
    if (d == UM_DECIDE_PYTHON) {
        decided_again(dec.sc, d); /* Python decides it (um_decide_stopped): counted then */
        return 0;
    }
    int err = refusal(pid, d);
    if (err) {
        stats.refused++;
        cur_sci = si;
        skip_call(pid, abi, si.entry.args, err);
    } else {
        pass_set(pid, si.entry.nr, si.entry.args); /* decided: its seccomp stop or notification passes */
    }
    return 1;
}

/* PTRACE_SYSCALL or PTRACE_CONT with no signal, of its tracer, on pid held at
 * a syscall stop its tracer knows of that C may end (um_inner_stopped's
 * resume): done as Python's Requests._resume would (the entry's call
 * decided first), the tracee noted for Python's records. 1 if done. */
static int resume_request(uint64_t req, pid_t pid, uint64_t sig)
{
    struct um_thread *t = thr(pid);
    int kind = t->inner_resume;
    if (sig || !kind || nnotes >= MAX_NOTES || t->inner_step || t->inner_emu || t->listening)
        return 0;
    if (kind == UM_RESUME_ENTRY && !entry_decided_in_c(pid))
        return 0;
    t->inner_sys = req == PTRACE_SYSCALL;
    t->inner_by = t->inner_vtid = 0;
    t->inner_shown = t->inner_resume = 0;
    t->entry_by_c = kind == UM_RESUME_ENTRY; /* no number shown otherwise at its exit */
    cpend_drop(pid); /* a stop resumed before a wait took it: no wait reports it (Python's too) */
    note(pid, req == PTRACE_SYSCALL ? UM_NOTE_RESUME_SYSCALL : UM_NOTE_RESUME_CONT, NULL);
    if (kind == UM_RESUME_ENTRY)
        resume(pid, PTRACE_CONT, 0);
    else
        um_resume(pid, PTRACE_CONT, 0);
    return 1;
}

int um_nohang_quiet(int tid, int quiet)
{
    thr(tid)->quiet_hold = (quiet & UM_QUIET_HOLD) != 0;
    __atomic_store_n(&thr(tid)->quiet_gen, quiet ? um_family_gen() + 1 : 0, __ATOMIC_RELEASE);
    return 0;
}

/* Is tracer thread tid's process quiet (um_nohang_quiet) and its blocking
 * wait4 with these arguments one Python would hold: for any child or the
 * one tracee vtid (0: any), __WALL, no rusage? */
static int quiet_for_c(pid_t tid)
{
    struct um_thread *w = thr(tid);
    return w->quiet_hold && !w->inner && w->quiet_gen == um_family_gen() + 1;
}

static int holdable_wait(pid_t tid, const uint64_t *args, pid_t vtid)
{
    return quiet_for_c(tid) && !thr(tid)->cpending && ((int)args[0] == -1 || (vtid && (int)args[0] == vtid)) &&
           (uint32_t)args[2] == __WALL && !args[3];
}

/* wait4(-1, status, WNOHANG | __WALL, rusage) of a tracer Python found
 * nothing for, nothing having come since (um_nohang_quiet): 0, as Python
 * would answer, and the kernel writes nothing. Read on serving threads too:
 * a stop or exit the main thread has not yet taken is, for the tracer, one
 * that has not come yet. */
static int nohang_quiet(pid_t tid, const uint64_t *args)
{
    return (int)args[0] == -1 && args[2] == (WNOHANG | __WALL) &&
           !__atomic_load_n(&thr(tid)->cpending, __ATOMIC_ACQUIRE) &&
           __atomic_load_n(&thr(tid)->quiet_gen, __ATOMIC_ACQUIRE) == um_family_gen() + 1;
}

/* Is this ptrace request (args: the call's) one data_request may answer: a
 * data request of tracer tid on a tracee held at a stop the tracer knows
 * of (um_inner_stopped)? */
static int data_request_ours(pid_t tid, const uint64_t *args)
{
    pid_t pid = (pid_t)args[1]; /* the kernel takes it as a pid_t */
    if (pid <= 0)
        return 0;
    struct um_thread *t = thr(pid);
    return t->inner_by == tid && t->inner_vtid == pid;
}

/* A data request of an inner tracer on a tracee held at a stop it knows of,
 * run here as Python would (umview/ptrace/requests.py: the kernel's request
 * run on the tracee, its result copied to the tracer): 1 with *rval the
 * call's result, 0 if it is Python's to answer. The main thread's alone
 * (ptrace). */
static int data_request(pid_t tid, const uint64_t *args, long *rval)
{
    if (!data_request_ours(tid, args))
        return 0;
    uint64_t req = args[0], addr = args[2], data = args[3];
    pid_t pid = (pid_t)args[1];
    struct um_thread *t = thr(pid);
    union {
        struct um_sci sci;
        struct user_regs_struct regs;
        uint64_t word;
        char bytes[128];
    } buf;
    long r;
    size_t len;
    switch (req) {
    case PTRACE_SYSCALL:
    case PTRACE_CONT:
        if (!resume_request(req, pid, data))
            return 0;
        *rval = 0;
        return 1;
    case PTRACE_GET_SYSCALL_INFO:
        /* the kernel copies min(its size, the tracer's) and returns its size */
        memset(&buf, 0, sizeof buf);
        r = ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof buf.sci, &buf.sci);
        len = r > 0 ? (size_t)r : 0;
        if (len > sizeof buf.sci)
            len = sizeof buf.sci; /* a newer kernel's longer record: what Python copies too */
        if (len > addr)
            len = (size_t)addr;
        break;
    case PTRACE_GETREGS:
        if (t->inner_shown)
            return 0; /* orig_rax shows the number the tracer saw (Tracee.shown_nr) */
        r = ptrace(PTRACE_GETREGS, pid, 0, &buf.regs);
        len = sizeof buf.regs;
        break;
    case PTRACE_PEEKUSER:
        if (t->inner_shown)
            return 0;
        /* fallthrough */
    case PTRACE_PEEKTEXT:
    case PTRACE_PEEKDATA:
        /* the system call stores the word at data (glibc's wrapper returns it) */
        r = syscall(SYS_ptrace, (long)req, pid, addr, &buf.word);
        len = sizeof buf.word;
        break;
    default:
        return 0;
    }
    if (r < 0)
        r = -errno;
    else if (len && um_write_mem(tid, data, &buf, len) < 0)
        r = -EFAULT;
    else if (req != PTRACE_GET_SYSCALL_INFO)
        r = 0;
    *rval = r;
    return 1;
}

/* Count an inner tracer's call C answered, as a trapped call C decided
 * (--stats). */
static void count_served(int abi, uint64_t nr)
{
    int sc = lookup_sc(abi, (long)nr);
    if (sc >= 0 && sc < MAX_SC)
        sc_counts(0)[sc]++;
    stats.inner_served++;
}

/* A notification answered is not always an answer received: a signal (or
 * an interrupt) that ends the caller's wait just before the answer is sent
 * leaves the call -ERESTARTSYS whatever the answer (kernel/seccomp.c), and
 * the call is made again. For the calls of inner tracers the monitor acts
 * on (a tracee resumed, a stop taken by a wait) the answer is kept
 * (memo_state 1) until the caller's next call; at a signal-delivery or
 * interrupt stop that shows the call restarting, it is marked lost (2), and
 * the restart gets it instead of acting again. The main thread's. */
int inner_handable(const struct seccomp_notif *req)
{
    return req->data.arch == AUDIT_ARCH_X86_64 &&
           (req->data.nr == UM_NR_X86_64_ptrace || req->data.nr == UM_NR_X86_64_wait4);
}

void inner_memo(const struct seccomp_notif *req, long rval)
{
    struct um_thread *t = thr((pid_t)req->pid);
    t->memo_nr = req->data.nr;
    memcpy(t->memo_args, req->data.args, sizeof t->memo_args);
    t->memo_rval = rval;
    __atomic_store_n(&t->memo_state, 1, __ATOMIC_RELEASE);
}

void inner_memo_stop(pid_t tid, const struct user_regs_struct *r)
{
    struct um_thread *t = thr(tid);
    long long e = (long long)r->rax;
    if (t->memo_state != 1)
        return;
    if ((e == -ERESTARTSYS_ || e == -ERESTARTNOINTR_ || e == -ERESTARTNOHAND_) && r->orig_rax == t->memo_nr &&
        r->rdi == t->memo_args[0] && r->rsi == t->memo_args[1] && r->rdx == t->memo_args[2] &&
        r->r10 == t->memo_args[3])
        __atomic_store_n(&t->memo_state, 2, __ATOMIC_RELEASE);
    else
        t->memo_state = 0; /* it went on: the answer came */
}

/* tid's lost answer, if this call is its restart: 1 with *rval; any memo
 * of tid's is gone after */
static int memo_take(pid_t tid, uint64_t nr, const uint64_t *args, long *rval)
{
    struct um_thread *t = thr(tid);
    int lost = t->memo_state == 2 && t->memo_nr == nr && !memcmp(t->memo_args, args, sizeof t->memo_args);
    if (lost)
        *rval = t->memo_rval;
    if (t->memo_state)
        t->memo_state = 0;
    return lost;
}

static void answer_inner(const struct seccomp_notif *req, long r)
{
    struct seccomp_notif_resp resp;
    memset(&resp, 0, sizeof resp);
    resp.id = req->id;
    if (r < 0)
        resp.error = (int32_t)r;
    else
        resp.val = r;
    inner_memo(req, r); /* before the answer: the caller may run at once */
    notif_ioctl(SECCOMP_IOCTL_NOTIF_SEND, &resp); /* ENOENT: the caller is gone, or its restart comes */
}

/* A seccomp stop of thread tid's ptrace or wait4 call: a data request, or a
 * WNOHANG wait that finds nothing, answered here without handing Python the
 * event: 1 if answered (the call skipped with its result, tid resumed), else
 * 0. Only the x86_64 ABI: the layouts are the monitor's own. A tracer that
 * is itself traced has the call go through its tracer's stops first
 * (Python's path). */
int inner_request(pid_t tid, const struct um_sci *si)
{
    long r = 0;
    if (thr(tid)->memo_state)
        thr(tid)->memo_state = 0; /* another call: the answer came */
    if (abi_of(si) != UM_ABI_X86_64 || thr(tid)->inner)
        return 0;
    const uint64_t *args = si->seccomp.args;
    if (si->seccomp.nr == UM_NR_X86_64_wait4) {
        if (nnotes < MAX_NOTES && quiet_for_c(tid) && take_cpend(tid, args, &r)) {
            /* a stop C reported, pending for it: answered with it below */
        } else if (nnotes < MAX_NOTES && holdable_wait(tid, args, 0) && hold_wait(tid, (long)si->seccomp.nr, args)) {
            /* a blocking wait that finds nothing, of a quiet tracer: held at
             * its stop as Python would (Waits._wait, um_hold_wait) */
            note(tid, UM_NOTE_WAIT, args);
            count_served(UM_ABI_X86_64, si->seccomp.nr);
            return 1;
        } else if (!nohang_quiet(tid, args)) {
            return 0;
        }
    } else if (si->seccomp.nr != UM_NR_X86_64_ptrace || !data_request(tid, args, &r)) {
        return 0;
    }
    count_served(UM_ABI_X86_64, si->seccomp.nr);
    cur_sci = *si;
    skip_call(tid, UM_ABI_X86_64, si->seccomp.args, r);
    resume(tid, PTRACE_CONT, 0);
    return 1;
}

/* The same calls come as notifications where the view has a listener
 * (um_inner_notif): answered the same way, without a stop of the tracer's.
 * 1 if answered, 0 if not one C answers (it goes the way of other notified
 * calls: to Python through an interrupt), -1 on a serving thread (alone)
 * for a request the main thread may answer (ptrace is its). */
int inner_notif(const struct seccomp_notif *req, int alone)
{
    pid_t tid = (pid_t)req->pid;
    const uint64_t *args = (const uint64_t *)req->data.args;
    long r = 0;
    /* one a signal ended while it waited (a serving thread handed it
     * over, or Python held the main thread): its restart is the one to
     * act on, maybe served already */
    if (!alone && inner_handable(req) && notif_stale(req))
        return 1;
    if (__atomic_load_n(&thr(tid)->memo_state, __ATOMIC_ACQUIRE) && inner_handable(req)) {
        if (alone)
            return -1; /* the memos are the main thread's */
        if (memo_take(tid, req->data.nr, args, &r)) {
            answer_inner(req, r);
            return 1;
        }
    }
    if (req->data.arch != AUDIT_ARCH_X86_64 || thr(tid)->inner)
        return 0;
    if (req->data.nr == UM_NR_X86_64_wait4) {
        if (__atomic_load_n(&thr(tid)->cpending, __ATOMIC_ACQUIRE)) {
            /* stops C reported are pending for it: the main thread's */
            if (alone)
                return -1;
            if (nnotes >= MAX_NOTES || !quiet_for_c(tid) || !take_cpend(tid, args, &r))
                return 0;
        } else if (!nohang_quiet(tid, args)) {
            return 0;
        }
    } else if (req->data.nr == UM_NR_X86_64_ptrace) {
        if (!data_request_ours(tid, args))
            return 0;
        if (alone)
            return -1;
        /* the tracer cannot be gone and its tid another's: it is the
         * monitor's tracee, reaped by this thread. Its wait may have ended
         * (a signal): the request is run again at its restart */
        if (!data_request(tid, args, &r))
            return 0;
    } else {
        return 0;
    }
    count_served(UM_ABI_X86_64, req->data.nr);
    answer_inner(req, r);
    return 1;
}

int um_interrupt(int tid)
{
    thr(tid)->py_int = 1;
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0)) {
        thr(tid)->py_int = 0;
        return -errno;
    }
    return 0;
}

int um_set_wait_nr(int tid, long nr)
{
    thr(tid)->wait_nr = nr;
    return 0;
}

int um_decide_stopped(int tid, struct um_event *ev)
{
    static struct um_decide_in dec;
    struct um_sci si;
    if (ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof si, &si) <= 0)
        return -errno;
    if (si.op != SI_ENTRY && si.op != SI_SECCOMP) {
        resume(tid, PTRACE_CONT, 0);
        return 0;
    }
    int stand_in = thr(tid)->seccomp_stand_in; /* this entry stop was its seccomp stop (loop.c) */
    thr(tid)->seccomp_stand_in = 0;
    if (si.op == SI_ENTRY && !stand_in && own_filters_trace(tid, &si)) {
        resume(tid, PTRACE_CONT, 0); /* its own filter's TRACE: at its seccomp check (ownseccomp.c) */
        return 0;
    }
    int abi = abi_of(&si);
    long nr = abi == UM_ABI_X32 ? (long)(si.entry.nr & ~X32_BIT) : (long)si.entry.nr;
    /* at a seccomp stop of the process's own filter the kernel takes TRACE as
     * allow afterwards: no stop of the monitor's comes, decide every call one
     * of its filters may trap */
    int trapped = abi >= 0 && nr >= 0 && nr < MAX_NR &&
                  (si.op == SI_SECCOMP ? monitor_may_trace(abi, si.entry.nr, si.entry.args) : trap[abi][nr]);
    dec.abi = abi;
    dec.nr = si.entry.nr;
    memcpy(dec.args, si.entry.args, sizeof dec.args);
    int d = abi < 0 || !trapped ? UM_DECIDE_NATIVE : decide_call(tid, &dec, NULL);
    if (d == UM_DECIDE_PYTHON) {
        /* at an entry stop its seccomp check is still to come (pass_notif);
         * at a seccomp stop it is past */
        raw_from_slots(ev->raw, ev->raw_len, dec.slot);
        return call_event(ev, tid, &si, abi, dec.sc, si.op == SI_ENTRY ? UM_FROM_ENTRY : 0, dec.path, dec.path_len,
                          dec.path_kind);
    }
    int err = refusal(tid, d);
    if (err) {
        stats.refused++;
        cur_sci = si;
        skip_call(tid, abi < 0 ? UM_ABI_X86_64 : abi, si.entry.args, err);
    } else if (trapped && si.op == SI_ENTRY) {
        pass_set(tid, si.entry.nr, si.entry.args); /* decided: its seccomp stop or notification passes */
    }
    resume(tid, PTRACE_CONT, 0);
    return 0;
}

int um_finish(struct um_event *ev)
{
    if (ev->kind == UM_EV_DONE)
        return -EINVAL;
    if (ev->kind == UM_EV_SYSCALL || ev->kind == UM_EV_SYSCALL_EXIT) {
        /* the register writes need the stop's syscall info */
        if (ptrace(PTRACE_GET_SYSCALL_INFO, ev->tid, sizeof cur_sci, &cur_sci) <= 0)
            return -errno;
        cur_tid = ev->tid;
    }
    finish_reply(ev);
    return 0;
}

long um_ptrace(long req, int tid, uint64_t addr, uint64_t data)
{
    if ((req == PTRACE_POKETEXT || req == PTRACE_POKEDATA) && region_poke_refused(tid, addr, 8))
        return -EIO; /* the pinned paths' memory (pin.c): not the inner tracer's to change */
    long r = syscall(SYS_ptrace, req, tid, addr, data);
    return r < 0 ? -errno : r;
}

int um_reap(int tid, int *status)
{
    if (defer_full())
        return 0; /* no room to keep it for the loop: the loop collects it */
    pid_t p = waitpid(tid, status, __WALL | WNOHANG);
    if (p < 0)
        return -errno;
    if (p == 0)
        return 0;
    defer_status(tid, *status); /* the loop reports it, as it came (and counts it then) */
    return WIFEXITED(*status) || WIFSIGNALED(*status);
}

/* Waits of inner tracers held at their seccomp stop. A tracer's blocking wait
 * that finds no stop yet, and that nothing but the emulation can end (each
 * child of its process a live tracee of its own: Python asks, um_hold_wait),
 * stays at its stop instead of blocking in the kernel: the stop it waits for
 * answers it there (um_answer_wait), which costs one stop of the tracer's
 * where blocking cost its interrupt, the interrupt stop and its answer. A
 * signal cannot end a wait held so, nor can what the monitor does not see:
 * after HOLD_WAIT_NS (or at a real child's exit, um_release_wait) it goes on
 * into the kernel's wait, which the emulation then interrupts as before. */
#define MAX_HELD_WAITS 64
#define HOLD_WAIT_NS 20000000ULL /* 20 ms: the most a signal to a held tracer waits */
static struct {
    pid_t tid;
    long nr;
    uint64_t args[6];
    uint64_t deadline;
} held_waits[MAX_HELD_WAITS];
static int nheld_waits;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

int um_hold_wait(int tid)
{
    thr(tid)->want_hold = 1;
    return 0;
}

/* Hold tid at its stop (finish_reply): 1 if held, 0 if it must go on (no
 * room, or no timed wait for the loop: chld_watch). */
int hold_wait(pid_t tid, long nr, const uint64_t *args)
{
    if (nheld_waits >= MAX_HELD_WAITS || !chld_watch())
        return 0;
    held_waits[nheld_waits].nr = nr;
    memcpy(held_waits[nheld_waits].args, args, sizeof held_waits[nheld_waits].args);
    held_waits[nheld_waits].tid = tid;
    held_waits[nheld_waits++].deadline = now_ns() + HOLD_WAIT_NS;
    thr(tid)->wait_held = 1;
    return 1;
}

void hold_wait_drop(pid_t tid)
{
    thr(tid)->wait_held = 0;
    for (int i = 0; i < nheld_waits; i++)
        if (held_waits[i].tid == tid) {
            held_waits[i] = held_waits[--nheld_waits];
            return;
        }
}

/* The poll timeout until the first held wait's time is up: -1 if none. */
int held_wait_timeout(void)
{
    if (!nheld_waits)
        return -1;
    uint64_t first = held_waits[0].deadline;
    for (int i = 1; i < nheld_waits; i++)
        if (held_waits[i].deadline < first)
            first = held_waits[i].deadline;
    uint64_t now = now_ns();
    return first <= now ? 0 : (int)((first - now + 999999) / 1000000);
}

void held_waits_expire(void)
{
    uint64_t now = now_ns();
    for (int i = 0; i < nheld_waits;) {
        if (held_waits[i].deadline <= now) {
            pid_t tid = held_waits[i].tid;
            hold_wait_drop(tid); /* moves the last one here */
            resume(tid, PTRACE_CONT, 0);
            family_gen_bump(); /* the kernel's wait may reap a child: Python reads /proc again */
        } else {
            i++;
        }
    }
}

int um_wait_held(int tid)
{
    return thr(tid)->wait_held;
}

int um_answer_wait(int tid, long rval)
{
    if (!thr(tid)->wait_held)
        return -EINVAL;
    hold_wait_drop(tid);
    struct um_sci si;
    if (ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof si, &si) <= 0)
        return -errno;
    if (si.op != SI_SECCOMP) {
        resume(tid, PTRACE_CONT, 0);
        return -EINVAL;
    }
    stats.skipped++;
    cur_sci = si;
    skip_call(tid, abi_of(&si), si.seccomp.args, rval);
    resume(tid, PTRACE_CONT, 0);
    return 0;
}

int um_release_wait(int tid)
{
    if (!thr(tid)->wait_held)
        return 0;
    hold_wait_drop(tid);
    resume(tid, PTRACE_CONT, 0);
    return 1;
}

/* Thread t is held at a syscall stop (kind) its tracer thread tracer knows
 * of, as um_inner_stopped says it for Python's stops */
static void stopped_for(struct um_thread *t, pid_t tracer, int kind)
{
    t->entry_by_c = 0;
    t->inner_by = tracer;
    t->inner_vtid = t->inner_tvtid;
    t->inner_shown = 0;
    t->inner_resume = (unsigned)kind;
}

/* A syscall stop (kind: UM_RESUME_ENTRY or _EXIT) of thread tid that its
 * tracer waits for, reported by C as Python would (Events._report, then
 * Waits._answer_held): its tracer thread is held in a wait4 that takes it
 * (holdable_wait: nothing else is there for its process), so the status
 * word goes to the wait, which returns the id the tracer names it by, and
 * the thread stays at its stop, which C may end at the tracer's resume. An
 * exit stop only after an entry C resumed (no other number shown). 1 if so
 * (the thread held), else 0 (Python's). */
int inner_stop(pid_t tid, int kind)
{
    struct um_thread *t = thr(tid);
    pid_t tracer = t->inner_tracer;
    if (!tracer || !t->inner || t->inner_step || t->inner_emu || nnotes >= MAX_NOTES ||
        (kind == UM_RESUME_EXIT && !t->entry_by_c) || t->cpend_word)
        return 0;
    int word = 0x7f | ((SIGTRAP | (t->inner_sysgood ? 0x80 : 0)) << 8);
    if (!thr(tracer)->wait_held) {
        /* its tracer is not waiting (busy with another stop): pending for
         * its next wait, unless the tracer may be blocked in the kernel's
         * wait (then not quiet: a held wait that went on, or one of another
         * thread), which only Python's interrupt would end */
        if (ncpend >= MAX_CPEND || !quiet_for_c(tracer))
            return 0;
        uint64_t args[4] = {(uint64_t)(uint32_t)word, 0, 0, 0};
        stopped_for(t, tracer, kind);
        cpend_add(tid, tracer, word);
        note(tid, kind == UM_RESUME_ENTRY ? UM_NOTE_PENDING_ENTRY : UM_NOTE_PENDING_EXIT, args);
        stats.inner_served++;
        return 1;
    }
    int i;
    for (i = 0; i < nheld_waits && held_waits[i].tid != tracer; i++)
        ;
    if (i == nheld_waits || held_waits[i].nr != UM_NR_X86_64_wait4 ||
        !holdable_wait(tracer, held_waits[i].args, t->inner_tvtid))
        return 0;
    if (held_waits[i].args[1] && um_write_mem(tracer, held_waits[i].args[1], &word, sizeof word) != sizeof word)
        return 0;
    stopped_for(t, tracer, kind);
    note(tid, kind == UM_RESUME_ENTRY ? UM_NOTE_ENTRY : UM_NOTE_EXIT, NULL);
    thr(tracer)->wait_nr = 0;
    stats.inner_served++;
    um_answer_wait(tracer, t->inner_tvtid);
    return 1;
}
