/* A process that installs seccomp filters of its own, then makes calls.
 * Each argument is a step, done in order (filters stack as they come):
 *
 *   filter:ACTION:NAME[:DATA]  a filter returning ACTION (errno, trace, trap,
 *                              log, allow, kill_thread, kill_process) with
 *                              DATA (errno or SECCOMP_RET_DATA) for NAME,
 *                              RET_ALLOW for every other call
 *   listen:NAME                a filter returning RET_USER_NOTIF for NAME,
 *                              with SECCOMP_FILTER_FLAG_NEW_LISTENER; a
 *                              thread of ours answers every notification
 *                              with SECCOMP_USER_NOTIF_FLAG_CONTINUE
 *   tfilter:ACTION:NAME[:DATA] as filter:, for every thread (SECCOMP_FILTER_FLAG_TSYNC)
 *   prctl:ACTION:NAME[:DATA]   as filter:, through prctl(PR_SET_SECCOMP)
 *   thread:NAME                start a thread that will make the call at `go`
 *   go                         let that thread make its call, and wait for it
 *   wait:PATH                  wait until PATH exists
 *   call:NAME                  make the call (no arguments but a buffer)
 *   write:PATH:TEXT            open PATH for writing (O_TRUNC|O_CREAT) and
 *                              write TEXT
 *   fork                       the steps after it run in a child, which
 *                              the parent waits for
 *
 * Each step prints one line: what it did and its result (errno names, so
 * that native and umview runs compare as text). A SIGSYS (RET_TRAP) prints
 * what its siginfo says. No core dumps (RET_KILL_*). NAME is one of the few
 * below; x86_64 only. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct named { const char *name; unsigned value; };

static const struct named calls[] = {
    {"getppid", SYS_getppid}, {"uname", SYS_uname}, {"getuid", SYS_getuid},
    {"openat", SYS_openat}, {"getcwd", SYS_getcwd}, {"getpid", SYS_getpid},
};

static const struct named actions[] = {
    {"errno", SECCOMP_RET_ERRNO}, {"trace", SECCOMP_RET_TRACE}, {"trap", SECCOMP_RET_TRAP},
    {"log", SECCOMP_RET_LOG}, {"allow", SECCOMP_RET_ALLOW}, {"kill_thread", SECCOMP_RET_KILL_THREAD},
    {"kill_process", SECCOMP_RET_KILL_PROCESS}, {"notify", SECCOMP_RET_USER_NOTIF},
};

#define LOOKUP(table, name) lookup(table, sizeof table / sizeof table[0], name)

static unsigned lookup(const struct named *table, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(table[i].name, name) == 0)
            return table[i].value;
    fprintf(stderr, "unknown name %s\n", name);
    exit(2);
}

static int nr_of(const char *name) { return (int)LOOKUP(calls, name); }

static const char *err_name(int e)
{
    static char buf[32];
    switch (e) {
    case 0: return "ok";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EBUSY: return "EBUSY";
    case EINVAL: return "EINVAL";
    case ENOSYS: return "ENOSYS";
    case EFAULT: return "EFAULT";
    case EROFS: return "EROFS";
    case ENOTSUP: return "ENOTSUP";
    }
    snprintf(buf, sizeof buf, "errno %d", e);
    return buf;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* one write per line: the order stays the same through a pipe, and a
     * SIGSYS handler may use it */
    size_t n = strlen(buf);
    buf[n++] = '\n';
    if (write(1, buf, n) < 0)
        _exit(3);
}

static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    say("SIGSYS code=%d syscall=%d errno(data)=%d arch=%s", si->si_code, si->si_syscall, si->si_errno,
        si->si_arch == AUDIT_ARCH_X86_64 ? "x86_64" : "other");
}

static long prog_of(struct sock_filter *f, int nr, unsigned ret)
{
    struct sock_filter p[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, ret),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    memcpy(f, p, sizeof p);
    return sizeof p / sizeof p[0];
}

static int listener = -1;

static void *supervise(void *arg)
{
    (void)arg;
    for (;;) {
        struct seccomp_notif req;
        struct seccomp_notif_resp resp;
        memset(&req, 0, sizeof req);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req)) {
            if (errno == EINTR || errno == ENOENT)
                continue;
            return NULL;
        }
        memset(&resp, 0, sizeof resp);
        resp.id = req.id;
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    }
}

/* ACTION:NAME[:DATA] -> the filter's return value and the number */
static unsigned parse(char *spec, int *nr)
{
    char *action = strtok(spec, ":"), *name = strtok(NULL, ":"), *data = strtok(NULL, ":");
    if (!action || !name) {
        fprintf(stderr, "bad filter %s\n", spec);
        exit(2);
    }
    *nr = nr_of(name);
    return LOOKUP(actions, action) | (data ? (unsigned)strtoul(data, NULL, 0) & SECCOMP_RET_DATA : 0);
}

static void install(char *spec, int by_prctl, unsigned flags)
{
    char copy[256];
    snprintf(copy, sizeof copy, "%s", spec);
    int nr;
    unsigned ret = parse(spec, &nr);
    struct sock_filter f[8];
    struct sock_fprog prog = {(unsigned short)prog_of(f, nr, ret), f};
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    long r = by_prctl ? prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)
                      : syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
    say("%s %s: %s", by_prctl ? "prctl" : flags ? "tfilter" : "filter", copy, err_name(r ? errno : 0));
}

static void listen_on(const char *name)
{
    struct sock_filter f[8];
    struct sock_fprog prog = {(unsigned short)prog_of(f, nr_of(name), SECCOMP_RET_USER_NOTIF), f};
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    say("listen %s: %s", name, err_name(fd < 0 ? errno : 0));
    if (fd < 0)
        return;
    listener = (int)fd;
    pthread_t t;
    if (pthread_create(&t, NULL, supervise, NULL))
        exit(4);
    pthread_detach(t);
}

static void call(const char *name)
{
    char buf[4096];
    errno = 0;
    long r = syscall(nr_of(name), buf, sizeof buf);
    if (r < 0)
        say("call %s: -1 %s", name, err_name(errno));
    else
        say("call %s: %s", name, r == 0 ? "0" : "> 0");
}

static void write_file(char *spec)
{
    char *path = strtok(spec, ":"), *text = strtok(NULL, "");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        say("write: open %s", err_name(errno));
        return;
    }
    ssize_t n = write(fd, text ? text : "", text ? strlen(text) : 0);
    close(fd);
    say("write: %s", n < 0 ? err_name(errno) : "ok");
}

static pthread_t waiting;
static int go_pipe[2] = {-1, -1};

static void *call_at_go(void *name)
{
    char c;
    if (read(go_pipe[0], &c, 1) == 1)
        call(name);
    return NULL;
}

static void wait_for(const char *path)
{
    struct timespec tick = {0, 10 * 1000 * 1000};
    while (access(path, F_OK) != 0)
        nanosleep(&tick, NULL);
    say("waited");
}

int main(int argc, char **argv)
{
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSYS, &sa, NULL);
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (strncmp(a, "filter:", 7) == 0)
            install(a + 7, 0, 0);
        else if (strncmp(a, "tfilter:", 8) == 0)
            install(a + 8, 0, SECCOMP_FILTER_FLAG_TSYNC);
        else if (strncmp(a, "prctl:", 6) == 0)
            install(a + 6, 1, 0);
        else if (strncmp(a, "thread:", 7) == 0) {
            if (pipe(go_pipe) || pthread_create(&waiting, NULL, call_at_go, a + 7))
                return 4;
        } else if (strcmp(a, "go") == 0) {
            if (write(go_pipe[1], "g", 1) != 1 || pthread_join(waiting, NULL))
                return 4;
        } else if (strncmp(a, "wait:", 5) == 0)
            wait_for(a + 5);
        else if (strncmp(a, "listen:", 7) == 0)
            listen_on(a + 7);
        else if (strncmp(a, "call:", 5) == 0)
            call(a + 5);
        else if (strncmp(a, "write:", 6) == 0)
            write_file(a + 6);
        else if (strcmp(a, "fork") == 0) {
            pid_t c = fork();
            if (c < 0)
                return 5;
            if (c > 0) {
                int st;
                waitpid(c, &st, 0);
                if (WIFSIGNALED(st))
                    say("child killed by signal %d", WTERMSIG(st));
                else
                    say("child exited %d", WEXITSTATUS(st));
                return 0;
            }
        } else {
            fprintf(stderr, "bad step %s\n", a);
            return 2;
        }
    }
    return 0;
}
