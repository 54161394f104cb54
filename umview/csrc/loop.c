/* loop.c - the loop: um_next, waiting, signals, group-stop, held forks */
#include "internal.h"

/* ------------------------------------------------------------------ */
/* the loop                                                            */
/* ------------------------------------------------------------------ */

static void resume(pid_t tid, int req, int sig)
{
    if ((*tf(tid) & (TF_EXIT_WANTED | TF_AWAIT_ENTRY)) && req == PTRACE_CONT)
        req = PTRACE_SYSCALL; /* keep the syscall stop we wait for */
    ptrace(req, tid, 0, sig);
}

/* Exits seen while waiting on one thread (an injection): handed to the loop
 * by wait_any before it waits for more. */
#define MAX_DEFERRED 64
static struct { pid_t tid; int status; } deferred[MAX_DEFERRED];
static int ndeferred;

void defer_status(pid_t tid, int status)
{
    if (ndeferred < MAX_DEFERRED) {
        deferred[ndeferred].tid = tid;
        deferred[ndeferred++].status = status;
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
