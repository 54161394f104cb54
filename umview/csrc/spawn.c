/* spawn.c - spawning the first process, attaching, the listener set-up */
#include "internal.h"
#include <pthread.h>
#include <time.h>

/* ------------------------------------------------------------------ */
/* spawning                                                            */
/* ------------------------------------------------------------------ */

/* Signals the monitor passes on instead of acting on them. One the kernel
 * sent to the whole foreground group (Ctrl-C, Ctrl-Z, a resize: si_code
 * SI_KERNEL) reached the tracees by itself and is dropped; one sent to the
 * monitor alone (kill, timeout, a CI runner) is forwarded: SIGTERM, SIGINT
 * and SIGHUP, which end a view, to every process of the view, the others to
 * the first process, so that `kill -USR1 <umview>` does what it does to the
 * command natively. */
static const int passed_signals[] = {SIGINT,  SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU, SIGTERM,
                                     SIGHUP,  SIGUSR1, SIGUSR2, SIGALRM, SIGPIPE, SIGWINCH};
#define NPASSED (int)(sizeof passed_signals / sizeof passed_signals[0])
static struct sigaction saved_actions[NPASSED];

/* The end a SIGTERM, SIGINT or SIGHUP sent to umview promises, whatever the
 * view's processes do with it (ignore it, handle it for long, or hold the
 * monitor up): the signal goes to every process of the view at once;
 * term_grace seconds later every one still there is killed, and if the
 * monitor has still not ended TERM_LAST seconds after that (stuck in a call
 * a tracee's death does not end), it kills itself (the janitor and
 * PTRACE_O_EXITKILL then clean up); umview then exits 128+N
 * (um_term_signal). The timers' functions run on a thread of their own
 * (SIGEV_THREAD), not on the main thread, which may be the one stuck, nor
 * in the handler (reading /proc is no async-signal-safe work). A signal of
 * the terminal (Ctrl-C: SI_KERNEL) reached the view's foreground processes
 * itself and starts nothing: an interactive shell in the view lives on. */
#define TERM_GRACE 10 /* seconds; UMVIEW_TERM_GRACE overrides */
#define TERM_LAST 5
static timer_t term_timer, spread_timer;
static volatile sig_atomic_t term_armed = -1; /* -1 no timer, 0 idle, 1 counting */
static volatile sig_atomic_t term_sig;       /* the first of them sent to umview, or 0 */
static int term_grace = TERM_GRACE;

int um_term_signal(void) { return term_sig; }

/* sig to every process this monitor traces but skip (the first process,
 * which pass_signal sent it to already: a second one would run its handler
 * twice, where a single kill(1) runs it once) */
static void signal_tracees(int sig, pid_t skip)
{
    DIR *d = opendir("/proc");
    if (!d)
        return;
    pid_t me = getpid();
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid > 0 && pid != me && pid != skip && status_field(pid, "TracerPid", 0) == me)
            kill(pid, sig);
    }
    closedir(d);
}

static void term_spread(union sigval v)
{
    (void)v;
    signal_tracees(term_sig, first_pid);
}

static void term_deadline(union sigval v)
{
    (void)v;
    static const char msg[] = "umview: the view did not end within its grace time after SIGTERM, SIGINT or "
                              "SIGHUP: its processes are killed\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    signal_tracees(SIGKILL, 0);
    sleep(TERM_LAST);
    kill(getpid(), SIGKILL);
}

static void arm_term_deadline(int sig)
{
    if (term_armed != 0)
        return;
    term_armed = 1;
    term_sig = sig;
    struct itimerspec now = {{0, 0}, {0, 1}}, its = {{0, 0}, {term_grace, 0}};
    timer_settime(spread_timer, 0, &now, NULL); /* async-signal-safe */
    timer_settime(term_timer, 0, &its, NULL);
}

static void pass_signal(int sig, siginfo_t *info, void *uc)
{
    (void)uc;
    if (info->si_code == SI_KERNEL || info->si_pid == getpid())
        return;
    if (first_pid > 0)
        kill(first_pid, sig);
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP)
        arm_term_deadline(sig);
}

/* A thread that waits for the passed signals (sigtimedwait, waking once a
 * second): a signal sent to umview while the main thread waits in a call
 * that only SIGKILL ends (reading a tracee's page that a userfaultfd holds)
 * stays pending for the process, and this thread takes it, running
 * pass_signal here. SIGCHLD is
 * blocked in it from its start: taken here, the loop's signalfd would
 * miss it. */
static void *signal_watch(void *arg)
{
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < NPASSED; i++)
        sigaddset(&set, passed_signals[i]);
    struct timespec second = {1, 0};
    for (;;) {
        siginfo_t info;
        int sig = sigtimedwait(&set, &info, &second);
        if (sig > 0) {
            struct sigaction now;
            if (sigaction(sig, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) && now.sa_sigaction == pass_signal)
                pass_signal(sig, &info, NULL);
            else if (now.sa_handler != SIG_IGN)
                kill(getpid(), sig); /* not ours (restored at the end): as it would have been */
        }
    }
    return NULL;
}

static void install_signal_passing(void)
{
    static int watching;
    if (!watching) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&a, 64 * 1024);
        sigset_t chld, old;
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        pthread_sigmask(SIG_BLOCK, &chld, &old); /* inherited: the thread never takes a SIGCHLD */
        watching = pthread_create(&t, &a, signal_watch, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&a);
    }
    if (term_armed < 0) {
        struct sigevent ev = {0}, spread = {0};
        ev.sigev_notify = spread.sigev_notify = SIGEV_THREAD;
        ev.sigev_notify_function = term_deadline;
        spread.sigev_notify_function = term_spread;
        if (timer_create(CLOCK_MONOTONIC, &ev, &term_timer) == 0 &&
            timer_create(CLOCK_MONOTONIC, &spread, &spread_timer) == 0)
            term_armed = 0;
        const char *g = getenv("UMVIEW_TERM_GRACE");
        if (g && atoi(g) > 0)
            term_grace = atoi(g);
    }
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
/* a Landlock ruleset the first process enforces on itself before its exec
 * (um_set_landlock), or -1 */
static int landlock_fd = -1;

int landlock_reads;
void um_set_landlock(int fd, uint64_t handled)
{
    const uint64_t reads = 1 << 0 | 1 << 2 | 1 << 3; /* EXECUTE, READ_FILE, READ_DIR */
    landlock_fd = fd;
    landlock_reads |= fd >= 0 && (handled & reads);
}

/* In the child: enforce the ruleset. Without CAP_SYS_ADMIN the kernel wants
 * no_new_privs first (as for the filter); with it (root), setuid programs
 * keep working. 0 or -errno. */
static int enforce_landlock(void)
{
    if (landlock_fd < 0)
        return 0;
    long r = syscall(UM_NR_X86_64_landlock_restrict_self, landlock_fd, 0);
    if (r < 0 && errno == EPERM) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
            return -errno;
        r = syscall(UM_NR_X86_64_landlock_restrict_self, landlock_fd, 0);
    }
    if (r < 0)
        return -errno;
    close(landlock_fd);
    return 0;
}
/* the user-notification listener: the child reports its number on setup_fd,
 * the monitor takes it with pidfd_getfd and then lets the child exec (go_fd) */
int setup_fd = -1, go_fd = -1, listener_fd = -1, sigchld_fd = -1;
sigset_t saved_mask;

/* Fork the first process, seize it, and let it install the filter and exec.
 * Returns its pid. A failure of the filter or of exec is reported by the child
 * through a CLOEXEC pipe (EOF means exec succeeded) and read after the loop
 * with um_spawn_error(): the loop must run meanwhile, since a claimed execve
 * stops in the tracer. */
int um_spawn(char *const argv[])
{
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
        r = enforce_landlock();
        if (r) {
            write_errno(err[1], -r);
            _exit(126);
        }
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
    /* Not dumpable from now on (the first process, forked before, is not
     * touched): a process of the view (the same user) may then neither
     * attach to the monitor nor open its /proc/PID/mem, fd/N (the seccomp
     * listener) or environ. Processes the monitor forks later to serve the
     * view make themselves dumpable where the view must reach them
     * (modules/fs/helper.py); exec makes a process dumpable again anyway. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    stats.processes++;
    thread_forget(pid);
    thr(pid)->seen = thr(pid)->announced = 1;
    mm_new(pid);
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
         * through a signalfd tells it a tracee stopped (notif.c) */
        chld_watch();
        setup_fd = lp[0];
        go_fd = go[1];
    } else {
        close(lp[0]);
        close(go[1]);
    }
    return pid;
}

/* The child reported its listener's number: take it, let the child exec. */
void take_listener(void)
{
    int n = -1;
    ssize_t k = read(setup_fd, &n, sizeof n);
    close(setup_fd);
    setup_fd = -1;
    if (k == sizeof n && n >= 0) {
        int pidfd = (int)syscall(UM_NR_X86_64_pidfd_open, first_pid, 0);
        if (pidfd >= 0) {
            listener_fd = (int)syscall(UM_NR_X86_64_pidfd_getfd, pidfd, n, 0);
            close(pidfd);
        }
        if (listener_fd >= 0) {
            uint64_t flag = UM_NOTIF_SYNC_WAKE_UP;
            ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flag);
            fcntl(listener_fd, F_SETFD, FD_CLOEXEC);
            servers_start();
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
        int pidfd = (int)syscall(UM_NR_X86_64_pidfd_open, c, 0);
        int l = pidfd < 0 ? -1 : (int)syscall(UM_NR_X86_64_pidfd_getfd, pidfd, fd, 0);
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
        thread_forget(t);
        thr(t)->seen = thr(t)->announced = thr(t)->need_filter = 1;
        mm_attached(t, status_field(pid, "Threads", 0));
        own_filters_attached(t);
        stats.processes++;
        ptrace(PTRACE_INTERRUPT, t, 0, 0);
        n++;
    }
    closedir(dir);
    return n ? 0 : (err ? err : -ESRCH);
}



/* Restore the signal dispositions um_spawn changed (for the monitor's own
 * exit: re-raising the first process's signal). */
void um_restore_signals(void)
{
    for (int i = 0; i < NPASSED; i++)
        sigaction(passed_signals[i], &saved_actions[i], NULL);
}

int um_abi_supported(int abi)
{
    static int x32 = -1;
    if (abi == UM_ABI_X86_64 || abi == UM_ABI_I386)
        return 1;
    if (abi != UM_ABI_X32)
        return 0;
    if (x32 < 0)
        x32 = syscall(UM_NR_X32_getpid) == getpid(); /* ENOSYS without x32 */
    return x32;
}
