/* inner.c - what Python needs to emulate ptrace for inner tracers: threads
 * whose stops go to Python, held stops resumed later, interrupts, and the
 * decision of a call an inner tracer let go (docs/internals.md, "Tracers
 * inside a view"). The policy (who traces whom, status words, requests) is
 * Python's (umview/innertrace.py). */
#include "internal.h"

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
    defer_status(tid, *status); /* the loop reports it, as it came */
    return WIFEXITED(*status) || WIFSIGNALED(*status);
}
