/* stopcost.c - what one intercepted system call costs on this machine, by
 * mechanism: a ptrace seccomp stop (what umview's C core uses today) against
 * a seccomp user notification answered with CONTINUE, with and without the
 * Linux 6.6 synchronous wake-up flag.
 *
 *   gcc -O2 -o /tmp/stopcost bench/stopcost.c && /tmp/stopcost [N]
 *
 * Each mode forks a child that makes N getppid() calls trapped by a filter,
 * and times the child's loop (ns per call, wall clock, child side).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS _IOW('!', 4, __u64)
#endif
#define SYNC_WAKE_UP 1
#ifndef PTRACE_GET_SYSCALL_INFO
#define PTRACE_GET_SYSCALL_INFO 0x420e
#endif

static long n_calls = 20000;

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int install(unsigned ret, unsigned flags)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, ret),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog p = {4, f};
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &p);
}

/* child body: report ns/call through the pipe */
static void child_loop(int out)
{
    double t = now_ns();
    for (long i = 0; i < n_calls; i++)
        syscall(SYS_getppid);
    double per = (now_ns() - t) / n_calls;
    if (write(out, &per, sizeof per) != sizeof per)
        _exit(1);
    _exit(0);
}

static double run_ptrace(void)
{
    int p[2], go[2];
    if (pipe(p) || pipe(go))
        return -1;
    pid_t c = fork();
    if (c == 0) {
        char b;
        if (read(go[0], &b, 1) != 1)
            _exit(1);
        install(SECCOMP_RET_TRACE, 0);
        child_loop(p[1]);
    }
    ptrace(PTRACE_SEIZE, c, 0, PTRACE_O_TRACESECCOMP | PTRACE_O_EXITKILL);
    if (write(go[1], "g", 1) != 1)
        return -1;
    unsigned char info[88];
    int st;
    while (waitpid(c, &st, __WALL) == c && !WIFEXITED(st) && !WIFSIGNALED(st)) {
        int sig = WSTOPSIG(st), ev = st >> 16;
        if (ev == PTRACE_EVENT_SECCOMP) {
            ptrace(PTRACE_GET_SYSCALL_INFO, c, sizeof info, info);
            sig = 0;
        } else if (sig == SIGTRAP)
            sig = 0;
        ptrace(PTRACE_CONT, c, 0, sig);
    }
    double per;
    return read(p[0], &per, sizeof per) == sizeof per ? per : -1;
}

static double run_notif(int sync)
{
    int p[2], fdp[2];
    if (pipe(p) || pipe(fdp))
        return -1;
    pid_t c = fork();
    if (c == 0) {
        int fd = install(SECCOMP_RET_USER_NOTIF, SECCOMP_FILTER_FLAG_NEW_LISTENER);
        if (write(fdp[1], &fd, sizeof fd) != sizeof fd)
            _exit(1);
        child_loop(p[1]);
    }
    int cfd;
    if (read(fdp[0], &cfd, sizeof cfd) != sizeof cfd || cfd < 0)
        return -1;
    int pidfd = (int)syscall(SYS_pidfd_open, c, 0);
    int fd = (int)syscall(SYS_pidfd_getfd, pidfd, cfd, 0);
    if (fd < 0) {
        perror("pidfd_getfd");
        kill(c, SIGKILL);
        return -1;
    }
    if (sync && ioctl(fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, (unsigned long long)SYNC_WAKE_UP)) {
        perror("SECCOMP_IOCTL_NOTIF_SET_FLAGS");
        kill(c, SIGKILL);
        waitpid(c, NULL, 0);
        return -1;
    }
    struct seccomp_notif req;
    struct seccomp_notif_resp resp;
    for (;;) {
        memset(&req, 0, sizeof req);
        if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req))
            break; /* the child is gone */
        memset(&resp, 0, sizeof resp);
        resp.id = req.id;
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    }
    waitpid(c, NULL, 0);
    double per;
    return read(p[0], &per, sizeof per) == sizeof per ? per : -1;
}

static double run_plain(void)
{
    int p[2];
    if (pipe(p))
        return -1;
    pid_t c = fork();
    if (c == 0)
        child_loop(p[1]);
    waitpid(c, NULL, 0);
    double per;
    return read(p[0], &per, sizeof per) == sizeof per ? per : -1;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        n_calls = atol(argv[1]);
    for (int round = 0; round < 3; round++) {
        printf("round %d: plain %.2f us   ptrace seccomp stop %.2f us   user-notif %.2f us   "
               "user-notif+sync %.2f us\n",
               round, run_plain() / 1e3, run_ptrace() / 1e3, run_notif(0) / 1e3, run_notif(1) / 1e3);
        fflush(stdout);
    }
    return 0;
}
