/* inject.c - injecting system calls into stopped tracees */
#include "internal.h"

/* The address of a `syscall` instruction in the thread's vDSO: where an
 * injected call is made from a stop that is not a system call's. */
uint64_t vdso_syscall(pid_t tid)
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
        struct pollfd fds[3] = {{.fd = sigchld_fd, .events = POLLIN}, {.fd = handover_fd, .events = POLLIN},
                                {.fd = servers_polling() ? -1 : listener_fd, .events = POLLIN}};
        if (poll(fds, 3, -1) < 0 && errno != EINTR)
            return -1;
        if (fds[0].revents) {
            /* um_next's wait looks with WNOHANG before it sleeps: nothing lost */
            struct signalfd_siginfo si[8];
            while (read(sigchld_fd, si, sizeof si) > 0)
                ;
        }
        /* Python is busy: a call for it is redirected */
        if (fds[1].revents & POLLIN)
            serve_handed(0);
        if (fds[2].fd >= 0 && (fds[2].revents & POLLIN))
            serve_notification(0);
    }
}

/* Resume tid with PTRACE_SYSCALL until its next syscall stop of kind op
 * (SI_ENTRY or SI_EXIT), and read it. Seccomp stops of the injected call are
 * resumed; a signal-delivery stop (SIGSTOP: the others are blocked) is
 * suppressed and its signal kept in *sigs to be sent again. -ESRCH if the
 * thread died (its status is kept for um_next). */
int inject_step(pid_t tid, int op, struct um_sci *si, uint64_t *sigs)
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
long run_call(pid_t tid, const struct user_regs_struct *base, uint64_t at, long nr,
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


/* The command name (comm) of a thread at the exit stop of an exec that
 * succeeded: set with prctl(PR_SET_NAME) run from its vDSO, as the program
 * would, the registers then put back. For an exec the view turned into its
 * loader's, whose name the kernel took (docs/internals.md, exec). x86_64
 * (and x32) processes only: -ENOSYS for an i386 one, or with no vDSO. */
int um_set_comm(int tid, const char *name)
{
    if (tid <= 0 || tid != cur_tid || cur_sci.op != SI_EXIT)
        return -EINVAL;
    struct user_regs_struct saved;
    int e = get_regs(tid, &saved);
    if (e)
        return e;
    if (saved.cs == 0x23)
        return -ENOSYS;
    uint64_t at = vdso_syscall(tid);
    if (!at)
        return -ENOSYS;
    char buf[16] = {0};
    strncpy(buf, name, sizeof buf - 1);
    /* below the red zone of the fresh stack: nothing lives there yet */
    uint64_t addr = (saved.rsp - 128 - 64) & ~(uint64_t)15;
    if (um_write_mem(tid, addr, buf, sizeof buf) != (int)sizeof buf)
        return -EFAULT;
    uint64_t mask, all = ~0ULL, sigs = 0;
    if (ptrace(PTRACE_GETSIGMASK, tid, sizeof mask, &mask) || ptrace(PTRACE_SETSIGMASK, tid, sizeof all, &all))
        return -errno;
    thr(tid)->injecting = 1;
    long r = run_call(tid, &saved, at, 157 /* prctl */, 15 /* PR_SET_NAME */, addr, 0, &sigs);
    thr(tid)->injecting = 0;
    if (r == -ESRCH)
        return (int)r; /* gone: its status is deferred */
    if (ptrace(PTRACE_SETREGS, tid, 0, &saved) || ptrace(PTRACE_SETSIGMASK, tid, sizeof mask, &mask))
        return -errno;
    resend_signals(tid, sigs);
    return r < 0 ? (int)r : 0;
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
    thr(tid)->injecting = 1;
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
        if (e && e != -ESRCH && kill(tid, SIGKILL) == 0) {
            /* its own call is lost: it must not go on as if it had run */
            write_failed(tid, "the registers could not be rewound after an injected call: the thread is killed", e);
            e = -ESRCH;
        }
        if (!e)
            e = inject_step(tid, SI_ENTRY, &si, &sigs);
        if (!e) {
            cur_sci = si; /* SET_SYSCALL_INFO must name this stop's op */
            thr(tid)->injected = 1;
        }
    }
    thr(tid)->injecting = 0;
    if (e == -ESRCH)
        return e;
    write_failed(tid, "the signal mask could not be restored after an injected call",
                 ptrace(PTRACE_SETSIGMASK, tid, sizeof mask, &mask) ? -errno : 0);
    resend_signals(tid, sigs);
    return e;
}

/* Send tid again the signals inject_step kept from it. */
void resend_signals(pid_t tid, uint64_t sigs)
{
    for (int s = 1; s <= 64; s++)
        if (sigs & (1ULL << (s - 1)))
            syscall(SYS_tkill, tid, s);
}
