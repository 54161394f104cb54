/* notif.c - seccomp user notifications: serving, handing to Python, answering */
#include "internal.h"

/* The notification Python holds (UM_EV_NOTIF): 1 received, for um_next to
 * hand over; 2 handed over; 3 answered by um_notif_addfd. */
static struct seccomp_notif held_notif;
static int notif_state;
/* the decision of the last notification served (of held_notif while held);
 * a serving thread's own (servers.c) */
/* SEND, ADDFD and ID_VALID take the listener's lock interruptibly: a
 * signal that comes while another thread holds it fails them with EINTR
 * before they act, and a reply never sent leaves its caller waiting for
 * good. So again, then. (RECV is not retried: a signal is how a serving
 * thread is told to stop.) An ADDFD interrupted later, while it waits for
 * the caller to take the fd, has already answered for it: no signal must
 * reach a serving thread then (servers.c sends one only to stop). */
int notif_ioctl(unsigned long request, void *arg)
{
    int r;
    do
        r = ioctl(listener_fd, request, arg);
    while (r < 0 && errno == EINTR);
    return r;
}

static __thread struct um_decide_in dec;

#ifndef SECCOMP_IOCTL_NOTIF_ID_VALID
#define SECCOMP_IOCTL_NOTIF_ID_VALID _IOW('!', 2, uint64_t)
#endif

/* how serve_req serves a notification */
#define SERVE_MAY_HAND 1 /* a UM_CLAIM_NOTIFY call may be held for Python (um_next's wait) */
#define SERVE_HANDED 2   /* a serving thread handed it over: it tried serve_move already */
#define SERVE_ALONE 4    /* on a serving thread: what needs the main thread is left (returns 0) */
static int serve_req(const struct seccomp_notif *req, int how);

#define NOTIF_STALE -1   /* dropped: as one RECV could not take */
#define NOTIF_REFUSED -2 /* resp says the errno */

/* Is the notification stale, now that C read the caller's memory or /proc
 * files (the caller died, or a signal ended its wait: what was read may be
 * another process's)? */
int notif_stale(const struct seccomp_notif *req)
{
    if (notif_ioctl(SECCOMP_IOCTL_NOTIF_ID_VALID, (void *)&req->id) == 0)
        return 0;
    stats.notif_stale++;
    return 1;
}

/* Decide a notified call of tid into dec: UM_DECIDE_NATIVE or _PYTHON;
 * NOTIF_REFUSED with the errno in resp (ENOSYS, EACCES); NOTIF_STALE if the
 * notification is no longer valid once C read what it decided on. A call
 * to let run is not checked here: its answer, CONTINUE, is all that acts on
 * it, and the kernel refuses that answer to a stale notification (ENOENT)
 * as it would refuse the check; what acts on the thread (an interrupt, for
 * Python or for pinning) is checked first. *read: whether C read. */
static int decide_notif(pid_t tid, const struct seccomp_notif *req, int abi, struct seccomp_notif_resp *resp,
                        int *read)
{
    dec.abi = abi;
    dec.nr = req->data.nr;
    memcpy(dec.args, req->data.args, sizeof dec.args);
    int d = decide_call(tid, &dec, read);
    if (*read && d != UM_DECIDE_NATIVE && notif_stale(req))
        return NOTIF_STALE;
    int err = refusal(tid, d);
    if (err) {
        stats.refused++;
        resp->flags = 0;
        resp->error = err;
        return NOTIF_REFUSED;
    }
    return d;
}

void serve_notification(int may_hand)
{
    struct seccomp_notif req;
    memset(&req, 0, sizeof req);
    if (ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_RECV, &req))
        return; /* interrupted, or the caller is gone */
    stats.notifications++;
    serve_req(&req, may_hand ? SERVE_MAY_HAND : 0);
}

/* Serve the notifications serving threads handed over (servers.c), until
 * one is held for Python (notif_state 1). */
void serve_handed(int may_hand)
{
    struct seccomp_notif req;
    handover_drain();
    while (notif_state != 1 && handover_take(&req))
        serve_req(&req, SERVE_HANDED | (may_hand ? SERVE_MAY_HAND : 0));
    if (notif_state == 1 && handover_take(&req)) {
        /* more to serve after Python's: the next wait wakes for it */
        handover_again(&req);
    }
}

/* On a serving thread: answer what C decides alone, as the main thread
 * would; 0 (nothing answered) for what needs the main thread: an interrupt
 * (the call needs Python, or pinned paths), the process's own filters, the
 * region of pinned paths (pin.c's memories), a notification for Python to
 * hold. */
int serve_alone(const struct seccomp_notif *req)
{
    stats.notifications++;
    return serve_req(req, SERVE_ALONE);
}

/* A call trapped by a user notification: let it run, or, if Python must see
 * it, either keep the notification for Python (a UM_CLAIM_NOTIFY call, when
 * may_hand: um_next's wait) or interrupt the waiting thread. The kernel then
 * abandons the notification and restarts the call after the interrupt stop;
 * resumed with PTRACE_SYSCALL, the thread stops at the restarted call's
 * entry, where the loop hands it to Python with all of ptrace's means (see
 * docs/internals.md); the decision is noted for that entry stop. A call
 * refused (UM_CLAIM_REFUSE) gets ENOSYS. Once C has read the caller's memory
 * or /proc files, the notification is checked to be still valid before it
 * is acted on (seccomp_unotify(2)): if the caller died or the call was
 * interrupted meanwhile, what was read may be another process's, and the
 * notification is dropped as one that RECV could not take. */
static int serve_req(const struct seccomp_notif *req, int how)
{
    pid_t tid = (pid_t)req->pid;
    const uint64_t *args = (const uint64_t *)req->data.args;
    int alone = (how & SERVE_ALONE) != 0, r;
    struct seccomp_notif_resp resp;
    memset(&resp, 0, sizeof resp);
    resp.id = req->id;
    resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    if (thr(tid)->injecting) {
        /* a call um_inject runs: the monitor's own, no look */
    } else if (pass_taken(tid, req->data.nr, args)) {
        /* decided at a stop (pass_set) */
    } else if (alone && __atomic_load_n(&thr(tid)->own, __ATOMIC_ACQUIRE) != NULL) {
        return 0; /* its own filters: ownseccomp.c's, the main thread's */
    } else if (!alone && own_trace_notif(req)) {
        return 1; /* its own filter's TRACE (ownseccomp.c): answered or taken */
    } else if ((r = inner_notif(req, alone)) != 0) {
        return r > 0; /* an inner tracer's data request or WNOHANG wait (inner.c) */
    } else {
        int abi = abi_from(req->data.arch, req->data.nr);
        if (alone && region_guarded(abi, req->data.nr, args))
            return 0; /* pin.c's memories are the main thread's */
        int guard = alone ? 0 : region_refusal(tid, abi, req->data.nr, args);
        if (guard) {
            /* it would change the memory pinned paths live in (pin.c) */
            stats.refused++;
            resp.flags = 0;
            resp.error = guard;
            notif_ioctl(SECCOMP_IOCTL_NOTIF_SEND, &resp);
            return 1;
        }
        int read;
        int d = decide_notif(tid, req, abi, &resp, &read);
        if (d == NOTIF_STALE)
            return 1;
        if (d == NOTIF_REFUSED) {
            /* answered with resp */
        } else if (d == UM_DECIDE_NATIVE && needs_pin(tid, &dec)) {
            /* another thread may change its path before the kernel reads
             * it: it runs pinned, from a ptrace stop (pin.c), where it is
             * looked at again */
            if (alone) {
                decided_again(dec.sc, d); /* the main thread decides it again */
                return 0;
            }
            if (read && notif_stale(req))
                return 1;
            if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0) {
                thr(tid)->redirected = 1;
                return 1;
            }
            stats.fast_continue++;
        } else if (d == UM_DECIDE_PYTHON && dec.sc >= 0) {
            if (!(how & SERVE_HANDED) && (dec.move >= 0 || dec.upper >= 0) && serve_move(tid, req, &dec))
                return 1; /* under a move mount, or an upper file: served by C (emulate.c) */
            if (alone) {
                decided_again(dec.sc, d);
                return 0;
            }
            if ((how & SERVE_MAY_HAND) && ((claim[abi][dec.sc] & UM_CLAIM_NOTIFY) || inner_handable(req))) {
                /* Python answers it as the notification (an inner tracer's
                 * call too: answered without a stop of the tracer's) */
                held_notif = *req;
                notif_state = 1;
                return 1; /* answered after Python's reply */
            }
            if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0) {
                thr(tid)->redirected = 1;
                note_redirect(tid, abi, dec.sc, req->data.nr, dec.args, dec.path, dec.path_len, dec.path_kind,
                              dec.slot);
                return 1; /* no answer: the interrupt ends the wait */
            }
            stats.fast_continue++;
        } else {
            stats.fast_continue++;
        }
    }
    notif_ioctl(SECCOMP_IOCTL_NOTIF_SEND, &resp);
    return 1;
}

/* Hand Python the notification serve_notification kept (no ptrace stop:
 * cur_tid is cleared, so um_inject refuses it). */
int notif_event(struct um_event *ev)
{
    const struct seccomp_notif *n = &held_notif;
    memset(ev, 0, sizeof *ev);
    ev->kind = UM_EV_NOTIF;
    ev->tid = (int)n->pid;
    ev->abi = abi_from(n->data.arch, n->data.nr);
    ev->nr = n->data.nr;
    ev->sc = lookup_sc(ev->abi, ev->nr);
    memcpy(ev->args, n->data.args, sizeof ev->args);
    event_paths(ev, dec.path, dec.path_len, dec.path_kind);
    raw_from_slots(ev->raw, ev->raw_len, dec.slot);
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
    int fd = notif_ioctl(SECCOMP_IOCTL_NOTIF_ADDFD, &a);
    if (fd < 0)
        return -errno; /* not answered: the reply still goes (-ENOENT: it cannot) */
    notif_state = 3;
    stats.addfd++;
    stats.skipped++;
    return fd;
}

/* Answer the notification Python held as it replied. */
void finish_notif(struct um_event *ev)
{
    int answered = notif_state == 3;
    notif_state = 0;
    if (answered || listener_fd < 0)
        return;
    struct seccomp_notif_resp resp;
    memset(&resp, 0, sizeof resp);
    resp.id = held_notif.id;
    if (ev->reply == UM_REPLY_REDIRECT && ptrace(PTRACE_INTERRUPT, ev->tid, 0, 0) == 0) {
        const struct seccomp_notif *n = &held_notif;
        thr(ev->tid)->redirected = 1;
        /* Python decided: its restart goes straight to Python */
        note_redirect(ev->tid, abi_from(n->data.arch, n->data.nr), ev->sc, n->data.nr,
                      (const uint64_t *)n->data.args, ev->path, ev->path_len, ev->path_kind, dec.slot);
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
    /* an inner tracer's call Python acted for: its restart, if a signal
     * ended its wait, gets the same answer (inner_memo) */
    if (ev->reply == UM_REPLY_SKIP && inner_handable(&held_notif))
        inner_memo(&held_notif, ev->rval);
    notif_ioctl(SECCOMP_IOCTL_NOTIF_SEND, &resp); /* ENOENT: the caller is gone */
}

void end_notifications(void)
{
    if (sigchld_fd < 0)
        return;
    servers_stop();
    int fds[] = {sigchld_fd, listener_fd, setup_fd, go_fd};
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    sigchld_fd = listener_fd = setup_fd = go_fd = -1;
    notif_state = 0;
    sigprocmask(SIG_SETMASK, &saved_mask, NULL);
}

/* SIGCHLD through a signalfd, so that the loop's wait for a stop can time
 * out (a held wait's time, inner.c) where no notification made it so at
 * spawn: 1 if it is, else 0. */
int chld_watch(void)
{
    if (sigchld_fd >= 0)
        return 1;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &chld, &saved_mask))
        return 0;
    sigchld_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sigchld_fd < 0) {
        sigprocmask(SIG_SETMASK, &saved_mask, NULL);
        return 0;
    }
    return 1;
}

/* Wait for the next ptrace stop, serving notifications meanwhile. */
pid_t wait_notif(int *status)
{
    int check = 1; /* stops may be queued from before (SIGCHLD coalesces) */
    for (;;) {
        if (check) {
            pid_t pid = waitpid(-1, status, __WALL | WNOHANG);
            if (pid != 0)
                return pid;
            check = 0;
        }
        struct pollfd p[4];
        int n = 0, il = -1, is = -1, ih = -1;
        p[n].fd = sigchld_fd;
        p[n++].events = POLLIN;
        if (servers_running) {
            /* what the serving threads hand over */
            ih = n;
            p[n].fd = handover_fd;
            p[n++].events = POLLIN;
        }
        if (listener_fd >= 0 && !servers_polling()) {
            /* only the main thread polls the listener: no RECV can block */
            il = n;
            p[n].fd = listener_fd;
            p[n++].events = POLLIN;
        }
        if (setup_fd >= 0) {
            is = n;
            p[n].fd = setup_fd;
            p[n++].events = POLLIN;
        }
        int ready = poll(p, (nfds_t)n, held_wait_timeout());
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (ready == 0) {
            held_waits_expire(); /* into the kernel's wait (inner.c) */
            continue;
        }
        if (p[0].revents) {
            struct signalfd_siginfo si[8];
            while (read(sigchld_fd, si, sizeof si) > 0)
                ;
            check = 1;
        }
        if (is >= 0 && p[is].revents)
            take_listener();
        if (ih >= 0 && (p[ih].revents & POLLIN)) {
            serve_handed(1);
            if (notif_state == 1)
                return 0; /* for Python: um_next hands it over */
        }
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
