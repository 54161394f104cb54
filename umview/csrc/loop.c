/* loop.c - the loop: um_next, waiting, signals, group-stop, held forks */
#include "internal.h"

/* ------------------------------------------------------------------ */
/* the loop                                                            */
/* ------------------------------------------------------------------ */

void resume(pid_t tid, int req, int sig)
{
    struct um_thread *t = thr(tid);
    if (t->resume_sig && req != PTRACE_LISTEN) {
        if (!sig) {
            sig = t->resume_sig;
            /* given at a syscall-entry stop (not the exit's, below): the
             * call may end in its wait for the monitor (the exit stop) */
            t->injected_sig = t->exit_sig ? 0 : (unsigned char)sig;
        }
        t->resume_sig = 0;
        t->exit_sig = 0;
    }
    if ((t->exit_wanted || t->await_entry || t->inner_sys || t->pinned) && req == PTRACE_CONT)
        req = PTRACE_SYSCALL; /* keep the syscall stop we (or an inner tracer) wait for */
    else if (t->inner_emu && req == PTRACE_CONT) /* its inner tracer emulates its calls: */
        req = t->inner_step ? PTRACE_SYSEMU_SINGLESTEP : PTRACE_SYSEMU; /* the kernel skips them */
    else if (t->inner_step && req == PTRACE_CONT)
        req = PTRACE_SINGLESTEP; /* its inner tracer steps it: the trap comes as the kernel's */
    ptrace(req, tid, 0, sig);
}

/* Exits seen while waiting on one thread (an injection), or collected ahead
 * (um_reap): handed to the loop by wait_any before it waits for more. */
#define MAX_DEFERRED 64
static struct { pid_t tid; int status; } deferred[MAX_DEFERRED];
static int ndeferred;

/* Counts the fork, vfork and clone events and the exits the loop took: a
 * process's children and threads are as they were while it stays the same
 * (um_family_gen). */
static uint64_t family_gen;

uint64_t um_family_gen(void)
{
    return __atomic_load_n(&family_gen, __ATOMIC_ACQUIRE); /* read by serving threads too (inner.c) */
}

void family_gen_bump(void)
{
    __atomic_add_fetch(&family_gen, 1, __ATOMIC_RELEASE);
}

int defer_full(void)
{
    return ndeferred >= MAX_DEFERRED;
}

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

int is_stop_signal(int sig)
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
 * parent killed before that event would leave one held forever: an exit
 * releases those whose creating process has no live thread left, an exec
 * (which kills every other thread) the fork children of its process. Not any
 * held one at any exit: a thread's exit while another thread is created let
 * the new one run before its creator's event, unseen by an inner tracer that
 * waits for its first stop (gdb: "wait returned unexpected status 0x0"). */
#define MAX_HELD 64
static pid_t held[MAX_HELD];
static int nheld;

static int hold(pid_t tid)
{
    if (nheld >= MAX_HELD)
        return 0;
    held[nheld++] = tid;
    thr(tid)->held = 1;
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

/* The process a held child's creator is a thread of: its own if it is a
 * thread, else its parent; -1 if it cannot be told. */
static pid_t creator_process(pid_t child)
{
    int tgid = status_field(child, "Tgid", -1);
    if (tgid <= 0)
        return -1;
    return tgid != child ? tgid : status_field(child, "PPid", -1);
}

/* Release the held children whose fork event cannot come any more: after an
 * exit, those whose creating process is dead (or cannot be told); after the
 * exec of process execed (> 0), its fork children. */
static void release_orphans(pid_t execed)
{
    for (int i = nheld - 1; i >= 0; i--) {
        pid_t t = held[i];
        pid_t creator = creator_process(t);
        int orphan = execed > 0 ? creator == execed && status_field(t, "Tgid", -1) == t
                                : creator <= 0 || !process_alive(creator);
        if (!orphan)
            continue;
        held[i] = held[--nheld];
        thr(t)->held = 0;
        thr(t)->announced = 1;
        ptrace(PTRACE_CONT, t, 0, 0);
    }
}

/* Complete the reply Python gave to the outstanding event (or to one it
 * held: um_finish). With UM_HOLD the thread is left stopped. */
void finish_reply(struct um_event *ev)
{
    pid_t tid = ev->tid;
    int abi = ev->abi;
    int hold = ev->flags & UM_HOLD;
    /* asked for this event alone, whatever it is (um_hold_wait); not for a
     * tracer that is traced itself (its tracer's stops come first) */
    int asked_hold = thr(tid)->want_hold, held = 0;
    int want_hold = asked_hold && !thr(tid)->inner;
    thr(tid)->want_hold = 0;
    if (ev->kind == UM_EV_SYSCALL) {
        /* after um_inject the call waits at its entry stop, whatever stop
         * Python was handed */
        int from_entry = (ev->flags & UM_FROM_ENTRY) || thr(tid)->injected;
        thr(tid)->injected = 0;
        if (ev->reply == UM_REPLY_SKIP) {
            /* the number given with the arguments does not matter: -1 */
            stats.skipped++;
            if (ev->changed & (UM_CHANGED_ARGS | UM_CHANGED_NR))
                stats.rewritten++;
            skip_call(tid, abi, ev->args, ev->rval);
            thr(tid)->exit_wanted = 0;
            resume(tid, PTRACE_CONT, 0);
        } else if ((ev->changed & (UM_CHANGED_ARGS | UM_CHANGED_NR)) &&
                   (stats.rewritten++, rewrite_call(tid, abi, ev->nr, ev->args) != 0)) {
            /* not rewritten: failed with EIO (or gone, or killed) */
            thr(tid)->exit_wanted = 0;
            resume(tid, PTRACE_CONT, 0);
        } else {
            if (from_entry) {
                /* taken at its entry stop: the seccomp check still comes; its
                 * notification or seccomp stop must pass without a second look */
                long nr = ev->nr;
                if (abi == UM_ABI_X32)
                    nr &= ~X32_BIT;
                if (nr >= 0 && nr < MAX_NR && trap[abi][nr])
                    pass_set(tid, (uint64_t)ev->nr, ev->args);
            } else if ((ev->changed & UM_CHANGED_NR) && notifies_again(abi, ev->nr, ev->args)) {
                /* its number changed at a seccomp stop: the kernel checks the
                 * new call again, and a notification of it must pass without
                 * a second look (sent to Python, the call would restart after
                 * its exit stop restored the arguments: fchmod made fchmodat
                 * got EFAULT) */
                pass_set(tid, (uint64_t)ev->nr, ev->args);
            }
            if (ev->reply == UM_REPLY_CONTINUE_AFTER) {
                thr(tid)->exit_wanted = 1;
                ptrace(PTRACE_SYSCALL, tid, 0, 0);
            } else {
                thr(tid)->exit_wanted = 0;
                /* an inner tracer's wait at its seccomp stop, as it came:
                 * held there for the stop it waits for (inner.c) */
                held = want_hold && !from_entry && !(ev->changed & (UM_CHANGED_ARGS | UM_CHANGED_NR)) &&
                       hold_wait(tid, ev->nr, ev->args);
                if (!held)
                    resume(tid, PTRACE_CONT, 0);
            }
        }
    } else if (ev->kind == UM_EV_SYSCALL_EXIT) {
        /* restore what entry changed (the syscall ABI preserves argument
         * registers), then give the result */
        if ((ev->changed & UM_CHANGED_ARGS) && !(ev->flags & UM_EXIT_AFTER_EXEC))
            write_failed(tid, "the arguments of a call could not be restored at its exit",
                         set_args_regs(tid, abi, ev->args));
        if (ev->changed & UM_CHANGED_RVAL)
            write_failed(tid, "the result of a call could not be set at its exit", set_return(tid, abi, ev->rval));
        if (!hold)
            resume(tid, PTRACE_CONT, 0);
    } else if (ev->kind == UM_EV_NOTIF) {
        finish_notif(ev);
    } else if (ev->kind == UM_EV_FORK || ev->kind == UM_EV_EXEC) {
        /* a held child with an inner tracer stays at its first stop for Python */
        if (ev->kind == UM_EV_FORK && (ev->flags & UM_FORK_HELD) && !thr((pid_t)ev->msg)->inner) {
            resume((pid_t)ev->msg, PTRACE_CONT, 0);
            if (thr((pid_t)ev->msg)->need_filter)
                ptrace(PTRACE_INTERRUPT, (pid_t)ev->msg, 0, 0);
        }
        if (!hold)
            resume(tid, PTRACE_CONT, 0);
    } else if (ev->kind == UM_EV_STOP && !hold) {
        /* resumed as the loop would have: a signal delivered, a group-stop listened */
        int sig = WSTOPSIG(ev->status), event = (unsigned)ev->status >> 16;
        if (event == PTRACE_EVENT_STOP && is_stop_signal(sig))
            thr(tid)->listening = ptrace(PTRACE_LISTEN, tid, 0, 0) == 0;
        else
            resume(tid, PTRACE_CONT, event == 0 && sig != (SIGTRAP | 0x80) ? sig : 0);
    }
    if (asked_hold && !held)
        family_gen_bump(); /* a wait Python meant to hold went on into the kernel's: it may reap */
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

/* A stop of a thread Python watches (an inner tracer's tracee, or one it
 * interrupted): UM_EV_STOP; at a syscall stop the call as it stands. */
static int stop_event(struct um_event *ev, pid_t tid, int status, long msg, const struct um_sci *si)
{
    process_event(ev, UM_EV_STOP, tid, msg, 0, status);
    if (si) {
        cur_sci = *si;
        cur_tid = tid;
        ev->abi = abi_of(si);
        if (ev->abi < 0)
            ev->abi = UM_ABI_X86_64;
        ev->ip = si->instruction_pointer;
        ev->sp = si->stack_pointer;
        if (si->op == SI_EXIT) {
            ev->rval = si->exit.rval;
        } else {
            ev->nr = (long)si->entry.nr;
            memcpy(ev->args, si->entry.args, sizeof ev->args);
            ev->sc = lookup_sc(ev->abi, (long)si->entry.nr);
        }
    }
    return UM_EV_STOP;
}

/* A wait an inner tracer blocks in, made pause (um_set_wait_nr), and ended
 * by a signal: make it restart as the wait, as the wait itself would have
 * (pause restarts only when no handler ran). */
static void restore_wait(pid_t tid)
{
    struct user_regs_struct r;
    long nr = thr(tid)->wait_nr;
    thr(tid)->wait_nr = 0;
    if (get_regs(tid, &r))
        return;
    long pause_nr = r.cs == 0x23 ? 29 : 34;
    if ((long long)r.orig_rax != pause_nr || (long)r.rax != -ERESTARTNOHAND_)
        return;
    r.orig_rax = (unsigned long long)nr;
    r.rax = (unsigned long long)-ERESTARTSYS_;
    write_failed(tid, "a waiting tracer's wait could not be made to restart",
                 ptrace(PTRACE_SETREGS, tid, 0, &r) ? -errno : 0);
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

/* What C resolved for each path slot, into the event (struct um_event). */
void event_paths(struct um_event *ev, const char (*path)[UM_PATH_BUF], const int *len, const int *kind)
{
    for (int s = 0; s < PATH_SLOTS; s++) {
        ev->path_len[s] = len[s];
        ev->path_kind[s] = kind[s];
        if (len[s] >= 0)
            memcpy(ev->path[s], path[s], (size_t)len[s] + 1);
        else
            ev->path[s][0] = 0;
    }
}

void raw_from_slots(char (*raw)[UM_PATH_BUF], int *raw_len, const struct um_decide_slot *slots)
{
    for (int s = 0; s < PATH_SLOTS; s++) {
        raw_len[s] = -1;
        if (!slots || (slots[s].state != UM_SLOT_PATH && slots[s].state != UM_SLOT_EMPTY))
            continue;
        const char *str = slots[s].state == UM_SLOT_EMPTY ? "" : slots[s].str;
        size_t n = strnlen(str, UM_PATH_BUF - 1);
        memcpy(raw[s], str, n);
        raw[s][n] = 0;
        raw_len[s] = (int)n;
    }
}

void event_raw(struct um_event *ev, const char (*raw)[UM_PATH_BUF], const int *raw_len)
{
    for (int s = 0; s < PATH_SLOTS; s++) {
        ev->raw_len[s] = raw ? raw_len[s] : -1;
        if (raw && raw_len[s] >= 0)
            memcpy(ev->raw[s], raw[s], (size_t)raw_len[s] + 1);
    }
}

/* Hand Python a claimed call stopped at its seccomp or entry stop (the two
 * layouts of ptrace_syscall_info agree on nr and args), with the paths C
 * resolved for it. */
int call_event(struct um_event *ev, pid_t tid, const struct um_sci *si, int abi, int sc, int flags,
                      const char (*path)[UM_PATH_BUF], const int *path_len, const int *path_kind)
{
    event_paths(ev, path, path_len, path_kind);
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
/* Is the call in r (at its exit or a signal-delivery stop) one a signal
 * interrupted only in its wait for the monitor: -ERESTARTSYS, notified, and
 * not on a FIFO, a device or a socket (which may block natively)? */
static int interrupted_wait(pid_t tid, const struct user_regs_struct *rp)
{
    struct user_regs_struct r = *rp;
    if ((int)r.rax != -ERESTARTSYS_ || (long long)r.orig_rax < 0)
        return 0;
    long raw = (long)r.orig_rax;
    int abi = r.cs == 0x23 ? UM_ABI_I386 : (raw & X32_BIT) ? UM_ABI_X32 : UM_ABI_X86_64;
    long nr = raw & ~X32_BIT;
    int sc = lookup_sc(abi, raw);
    uint64_t args[6];
    for (int i = 0; i < 6; i++)
        args[i] = REG(&r, regmap[abi].args[i]);
    /* a call the filter notifies with these arguments (a blocking wait4 is
     * not: an inner tracer's WNOHANG one is, um_inner_notif) */
    if (nr >= MAX_NR || !notifies_again(abi, raw, args))
        return 0;
    if (sc >= 0 && path_args[abi][sc][0].path >= 0) {
        char path[PATH_MAX + 1];
        struct stat st;
        if (um_resolve_path(tid, abi, sc, 0, args, path, sizeof path) > 0 && stat(path, &st) == 0 &&
            (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode)))
            return 0;
    }
    return 1;
}

static void keep_notified_call(pid_t tid)
{
    struct user_regs_struct r;
    if (get_regs(tid, &r))
        return;
    inner_memo_stop(tid, &r); /* an inner tracer's call whose answer may be lost (inner.c) */
    if (!interrupted_wait(tid, &r))
        return;
    r.rax = (unsigned long long)-ERESTARTNOINTR_;
    write_failed(tid, "a notified call could not be made to restart after a signal (it may fail with EINTR)",
                 ptrace(PTRACE_SETREGS, tid, 0, &r) ? -errno : 0);
}

/* Run a call C lets through pinned (pin.c); if it cannot be pinned it
 * fails with that errno rather than run on memory another thread may
 * change. */
static void run_pinned(pid_t tid, struct um_decide_in *in)
{
    int e = pin_call(tid, in);
    if (e == -ESRCH)
        return;
    if (e) {
        stats.refused++;
        skip_call(tid, in->abi, in->args, e);
        ptrace(PTRACE_CONT, tid, 0, 0);
        return;
    }
    stats.fast_continue++;
    ptrace(PTRACE_SYSCALL, tid, 0, 0);
}

/* A call's decision, at its seccomp stop (from 0) or at the entry stop of
 * its restart (UM_FROM_ENTRY), as the loop carries it out: refused (from an
 * ABI or of a kind no engine can decode, or whose arguments the monitor may
 * not read): skipped with that errno; run natively, pinned where its paths
 * could change under it; or Python's: 1, the event filled and *r what
 * um_next returns. 0 when the thread was resumed. */
static int decided(struct um_event *ev, pid_t tid, const struct um_sci *si, int abi, uint64_t nr,
                   const uint64_t *args, int from, int *r)
{
    static struct um_decide_in dec;
    dec.abi = abi;
    dec.nr = nr;
    memcpy(dec.args, args, sizeof dec.args);
    int d = decide_call(tid, &dec, NULL), err = refusal(tid, d);
    if (err) {
        stats.refused++;
        cur_sci = *si;
        skip_call(tid, abi < 0 ? UM_ABI_X86_64 : abi, args, err);
        if (from)
            resume(tid, PTRACE_CONT, 0);
        else
            ptrace(PTRACE_CONT, tid, 0, 0);
        return 0;
    }
    if (d == UM_DECIDE_NATIVE && needs_pin(tid, &dec)) {
        cur_sci = *si;
        run_pinned(tid, &dec);
        return 0;
    }
    if (d != UM_DECIDE_PYTHON) {
        if (!from)
            stats.fast_continue++;
        resume(tid, PTRACE_CONT, 0);
        return 0;
    }
    raw_from_slots(ev->raw, ev->raw_len, dec.slot);
    *r = call_event(ev, tid, si, abi, dec.sc, from, dec.path, dec.path_len, dec.path_kind);
    return 1;
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
            family_gen_bump();
            if (tid == first_pid)
                first_status = status;
            if (thr(tid)->held)
                unhold(tid);
            if (nheld)
                release_orphans(0);
            int inner = thr(tid)->inner;
            thread_forget(tid);
            if ((event_mask & UM_WANT_EXIT) || inner) /* msg: the parent that now reports it */
                return process_event(ev, UM_EV_EXIT, tid, inner ? zombie_parent(tid) : 0,
                                     inner ? UM_INNER_EVENT : 0, status);
            continue;
        }
        if (!WIFSTOPPED(status))
            continue;
        stats.stops++;
        thr(tid)->listening = 0;
        if (thr(tid)->opts_dirty)
            apply_options(tid);
        if (!thr(tid)->seen) {
            thr(tid)->seen = 1;
            stats.processes++;
        }
        int sig = WSTOPSIG(status);
        int event = (unsigned)status >> 16;

        if (thr(tid)->memo_state == 1 && event == PTRACE_EVENT_STOP) {
            /* an interrupt may have ended the wait of a notified call of an
             * inner tracer's whose answer was sent (inner.c) */
            struct user_regs_struct r;
            if (get_regs(tid, &r) == 0)
                inner_memo_stop(tid, &r);
        }
        if (sig == SIGTRAP && event == PTRACE_EVENT_SECCOMP) {
            stats.seccomp_stops++;
            if (ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof si, &si) <= 0 || si.op != SI_SECCOMP ||
                pass_taken(tid, si.seccomp.nr, si.seccomp.args)) {
                /* a call decided at its entry stop (after um_inject) */
                resume(tid, PTRACE_CONT, 0);
                continue;
            }
            if (untraced_clone(abi_of(&si), si.seccomp.nr, si.seccomp.args)) {
                /* the child is traced as every other (core.h) */
                uint64_t args[6];
                memcpy(args, si.seccomp.args, sizeof args);
                args[0] &= ~(uint64_t)UM_CLONE_UNTRACED;
                cur_sci = si;
                if (set_args_regs(tid, abi_of(&si), args) == 0) {
                    resume(tid, PTRACE_CONT, 0);
                } else {
                    skip_call(tid, abi_of(&si), si.seccomp.args, -EPERM);
                    ptrace(PTRACE_CONT, tid, 0, 0);
                }
                continue;
            }
            int guard = region_refusal(tid, abi_of(&si), si.seccomp.nr, si.seccomp.args);
            if (guard) {
                /* it would change the memory pinned paths live in (pin.c) */
                stats.refused++;
                cur_sci = si;
                skip_call(tid, abi_of(&si), si.seccomp.args, guard);
                ptrace(PTRACE_CONT, tid, 0, 0);
                continue;
            }
            int own = own_trace_stop(tid, &si);
            if (own == 2) /* for the inner tracer: PTRACE_EVENT_SECCOMP, with the filter's data */
                return stop_event(ev, tid, status, (long)si.seccomp.ret_data, &si);
            if (own)
                continue; /* a RET_TRACE of the process's own filter (ownseccomp.c) */
            if (inner_request(tid, &si))
                continue; /* an inner tracer's request C answers (inner.c) */
            int r;
            if (decided(ev, tid, &si, abi_of(&si), si.seccomp.nr, si.seccomp.args, 0, &r))
                return r;
            continue;
        }
        if (sig == (SIGTRAP | 0x80)) {
            if (ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof si, &si) <= 0) {
                thr(tid)->exit_wanted = thr(tid)->await_entry = 0;
                ptrace(PTRACE_CONT, tid, 0, 0);
                continue;
            }
            if (si.op == SI_ENTRY && thr(tid)->seccomp_redirect) {
                /* a process filter's TRACE the monitor's notification hid, for
                 * the inner tracer (ownseccomp.c): a seccomp stop it is */
                struct um_thread *t = thr(tid);
                t->seccomp_redirect = t->await_entry = 0;
                t->seccomp_stand_in = 1;
                free(note_take(tid, -1, 0, NULL));
                return stop_event(ev, tid, 0x7f | (SIGTRAP << 8) | (PTRACE_EVENT_SECCOMP << 16), t->seccomp_data, &si);
            }
            if (si.op == SI_ENTRY && !thr(tid)->await_entry && (thr(tid)->inner_sys || thr(tid)->inner_emu)) {
                if (inner_stop(tid, UM_RESUME_ENTRY))
                    continue; /* reported to its tracer by C (inner.c) */
                return stop_event(ev, tid, status, UM_STOP_ENTRY, &si); /* the inner tracer's */
            }
            if (si.op == SI_ENTRY && (thr(tid)->inner_sys || thr(tid)->inner_emu) && !thr(tid)->defer_sig) {
                /* the restart of a notified call the monitor interrupted,
                 * now that a tracer wants syscall stops (it attached while
                 * the call waited: strace -p of a process in a loop of calls
                 * the view serves): natively the call's entry, which it has
                 * not seen. The call is decided as it stands when the
                 * tracer resumes it, its notification's memo dropped */
                thr(tid)->await_entry = 0;
                free(note_take(tid, -1, 0, NULL));
                return stop_event(ev, tid, status, UM_STOP_ENTRY, &si);
            }
            if (si.op == SI_ENTRY) {
                thr(tid)->drop_step_trap = 0; /* had it come, it came before this */
                /* the restart of a call a notification sent to Python (or,
                 * after a signal handler ran, some other call: then the
                 * notification comes again and is looked at again) */
                thr(tid)->await_entry = 0;
                int abi = abi_of(&si);
                int sc = abi < 0 ? -1 : lookup_sc(abi, (long)si.entry.nr);
                long nr = abi == UM_ABI_X32 ? (long)(si.entry.nr & ~X32_BIT) : (long)si.entry.nr;
                struct um_note *note = note_take(tid, abi, si.entry.nr, si.entry.args);
                if (sc < 0 || nr < 0 || nr >= MAX_NR || !notifies(trap[abi][nr])) {
                    free(note);
                    resume(tid, PTRACE_CONT, 0);
                    continue;
                }
                if (note) {
                    /* decided at its notification: straight to Python */
                    stats.decided_once++;
                    event_raw(ev, (const char (*)[UM_PATH_BUF])note->raw, note->raw_len);
                    int r = call_event(ev, tid, &si, abi, sc, UM_FROM_ENTRY, note->path, note->path_len,
                                       note->path_kind);
                    free(note);
                    return r;
                }
                int r;
                if (decided(ev, tid, &si, abi, si.entry.nr, si.entry.args, UM_FROM_ENTRY, &r))
                    return r;
                continue;
            }
            /* a syscall-exit stop */
            stats.exit_stops++;
            if (thr(tid)->injected_sig) {
                /* a signal an inner tracer gave at the entry stop: natively
                 * the call runs, then the signal is delivered. Here it ended
                 * the call's wait for the monitor: that try is hidden, the
                 * signal's delivery discarded (defer_sig), the call made
                 * again, and the signal given anew at its exit */
                struct um_thread *t = thr(tid);
                struct user_regs_struct r;
                int sig = t->injected_sig;
                t->injected_sig = 0;
                if (si.op == SI_EXIT && get_regs(tid, &r) == 0 && interrupted_wait(tid, &r)) {
                    t->defer_sig = (unsigned char)sig;
                    t->await_entry = 1;
                    resume(tid, PTRACE_CONT, 0);
                    continue;
                }
            }
            if (thr(tid)->defer_sig && si.op == SI_EXIT) {
                thr(tid)->resume_sig = thr(tid)->defer_sig; /* at this exit's resume */
                thr(tid)->exit_sig = 1;
                thr(tid)->defer_sig = 0;
            }
            thr(tid)->pass_notif = 0; /* its call is over, whether or not its check came (pass_taken) */
            if (si.op == SI_EXIT)
                pin_restore(tid, thr(tid)->execed);
            own_filter_exit(tid, &si); /* a filter of its own installed (ownseccomp.c) */
            if (!thr(tid)->exit_wanted || si.op != SI_EXIT) {
                thr(tid)->exit_wanted = 0;
                if (si.op == SI_EXIT && thr(tid)->redirected && si.exit.is_error &&
                    (si.exit.rval == -ERESTARTSYS_ || si.exit.rval == -ERESTARTNOINTR_ ||
                     si.exit.rval == -ERESTARTNOHAND_)) {
                    /* the end of a notified call the monitor interrupted: no
                     * exit of the process's (its restart comes, or stands for
                     * a seccomp stop), whoever asked for exit stops */
                    resume(tid, PTRACE_CONT, 0);
                    continue;
                }
                if (si.op == SI_EXIT && thr(tid)->inner_sys) {
                    if (inner_stop(tid, UM_RESUME_EXIT))
                        continue; /* reported to its tracer by C (inner.c) */
                    return stop_event(ev, tid, status, UM_STOP_EXIT, &si); /* the inner tracer's */
                }
                if (si.op == SI_EXIT && thr(tid)->inner_step) /* the step ends here (a PTRACE_SYSCALL */
                    return stop_event(ev, tid, status, UM_STOP_STEP, &si); /* took its trap's place) */
                resume(tid, PTRACE_CONT, 0);
                continue;
            }
            int execed = thr(tid)->execed;
            thr(tid)->exit_wanted = thr(tid)->execed = 0;
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
                family_gen_bump();
                ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg);
                pid_t child = (pid_t)msg, held_release = 0;
                /* its first stop came, and it was let go before this event (any
                 * exit releases the held, see release_all_held): it runs */
                int ran = msg > 0 && thr(child)->seen && !thr(child)->held;
                if (msg > 0 && !thr(child)->seen) {
                    thr(child)->seen = 1;
                    stats.processes++;
                }
                if (msg > 0) {
                    /* the child inherits the cwd state; if its first stop came
                     * first it was held: it may run now */
                    struct um_thread *c = thr(child), *parent = thr(tid);
                    int held = c->held;
                    c->held = 0;
                    c->announced = 1;
                    c->vcwd = parent->vcwd;
                    c->faithful = parent->faithful;
                    c->vroot = parent->vroot;
                    c->landlocked = parent->landlocked;
                    c->need_filter |= parent->need_filter;
                    if (parent->inner && !c->inner)
                        c->opts_dirty = 1; /* it inherited the real PTRACE_O_TRACEEXIT: off at its next stop */
                    mm_child(child, tid, mm_event_shares(tid));
                    own_filters_inherit(c, parent);
                    if (held) {
                        unhold(child);
                        held_release = child;
                    }
                }
                if ((event_mask & UM_WANT_FORK) || thr(tid)->inner)
                    return process_event(ev, UM_EV_FORK, tid, (long)msg,
                                         (event == PTRACE_EVENT_CLONE ? UM_FORK_THREAD
                                          : event == PTRACE_EVENT_VFORK ? UM_FORK_VFORK : 0) |
                                             (held_release ? UM_FORK_HELD : 0) | (ran ? UM_FORK_RAN : 0) |
                                             (thr(tid)->inner ? UM_INNER_EVENT : 0),
                                         status);
                if (held_release)
                    resume(held_release, PTRACE_CONT, 0);
                if (held_release && thr(held_release)->need_filter)
                    ptrace(PTRACE_INTERRUPT, held_release, 0, 0);
            } else if (event == PTRACE_EVENT_EXEC) {
                ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg);
                if ((pid_t)msg != tid && msg > 0) {
                    /* a non-leader thread execed: it now has the leader's tid */
                    struct um_thread was = *thr((pid_t)msg);
                    thr((pid_t)msg)->note = NULL; /* moves with the record */
                    own_filters_moved(thr((pid_t)msg));
                    thread_forget((pid_t)msg);
                    thread_forget(tid);
                    *thr(tid) = was;
                    thr(tid)->seen = 1;
                }
                if ((pid_t)msg != tid && msg > 0)
                    thr(tid)->mm = thr(tid)->slot = 0; /* its records left the old memory */
                mm_new(tid);
                thr(tid)->pinned = 0;
                thr(tid)->creds_gen = 0; /* a set-user-ID program, file capabilities */
                if (nheld)
                    release_orphans(tid); /* its other threads, a fork's creator among them, are gone */
                if (thr(tid)->exit_wanted)
                    thr(tid)->execed = 1;
                if ((event_mask & UM_WANT_EXEC) || thr(tid)->inner)
                    return process_event(ev, UM_EV_EXEC, tid, (long)msg, thr(tid)->inner ? UM_INNER_EVENT : 0,
                                         status);
            } else if (event == PTRACE_EVENT_EXIT) {
                /* an inner tracer's tracee (the option is set for them
                 * alone; a thread whose creator's was inherits it until its
                 * next stop, kernel/ptrace.c): Python's, to report if its
                 * tracer asked, or to hold until its tracer collects the exit */
                if (thr(tid)->inner) {
                    ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg);
                    return stop_event(ev, tid, status, (long)msg, NULL);
                }
            } else if (event == PTRACE_EVENT_STOP && thr(tid)->redirected) {
                /* our interrupt of a notified call: catch its restart */
                thr(tid)->redirected = 0;
                thr(tid)->await_entry = 1;
                thr(tid)->drop_step_trap = thr(tid)->inner_step; /* the try ended as if stepped over */
                if (thr(tid)->need_filter) { /* the filter's interrupt: again */
                    resume(tid, PTRACE_CONT, 0);
                    ptrace(PTRACE_INTERRUPT, tid, 0, 0);
                    continue;
                }
                if (thr(tid)->py_int) {
                    /* Python's interrupt too (an inner tracer's PTRACE_INTERRUPT
                     * as the call waited): one stop for both, and Python's */
                    thr(tid)->py_int = 0;
                    return stop_event(ev, tid, status, 0, NULL);
                }
            } else if (event == PTRACE_EVENT_STOP) {
                /* the first stop of a new tracee, or after PTRACE_INTERRUPT. A
                 * child whose parent's fork event is not in yet waits for it,
                 * so that it never runs before its inherited state is known */
                if (!thr(tid)->announced && hold(tid))
                    continue;
                if (thr(tid)->need_filter)
                    inject_filter(tid);
                if (thr(tid)->py_int || thr(tid)->inner) {
                    /* Python's interrupt, or an inner tracer's tracee (its first
                     * stop, an interrupt, a listened stop that ended): Python's */
                    thr(tid)->py_int = 0;
                    return stop_event(ev, tid, status, 0, NULL);
                }
            }
            resume(tid, PTRACE_CONT, 0);
            continue;
        }
        if (event == PTRACE_EVENT_STOP && thr(tid)->inner)
            return stop_event(ev, tid, status, 0, NULL); /* a group-stop, for its inner tracer */
        if (event == PTRACE_EVENT_STOP) {
            if (is_stop_signal(sig)) {
                stats.group_stops++;
                thr(tid)->listening = ptrace(PTRACE_LISTEN, tid, 0, 0) == 0;
                if (tid == first_pid)
                    propagate_stop();
            } else {
                resume(tid, PTRACE_CONT, 0);
            }
            continue;
        }
        /* a signal-delivery stop: deliver it as the kernel would have */
        stats.signals++;
        if (thr(tid)->defer_sig == sig && thr(tid)->await_entry) {
            /* the injected signal that ended a call's wait: discarded, so
             * that the call is made again (ERESTARTSYS with no handler run);
             * sent anew at its exit (above) */
            resume(tid, PTRACE_CONT, 0);
            continue;
        }
        if (listener_fd >= 0)
            keep_notified_call(tid);
        if (thr(tid)->wait_nr)
            restore_wait(tid);
        if (sig == SIGTRAP && thr(tid)->drop_step_trap) {
            siginfo_t info;
            thr(tid)->drop_step_trap = 0;
            if (ptrace(PTRACE_GETSIGINFO, tid, 0, &info) == 0 && info.si_code == TRAP_BRKPT) {
                resume(tid, PTRACE_CONT, 0); /* the interrupted try's trap: its restart steps again */
                continue;
            }
        }
        if (thr(tid)->inner)
            return stop_event(ev, tid, status, 0, NULL); /* its inner tracer decides */
        resume(tid, PTRACE_CONT, sig);
    }
}
