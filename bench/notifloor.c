/* notifloor.c - the least a monitor built on seccomp user notifications
 * can cost a workload: run COMMAND with its path calls trapped by
 * SECCOMP_RET_USER_NOTIF, each answered SECCOMP_USER_NOTIF_FLAG_CONTINUE at
 * once, reading nothing and deciding nothing. The listener has Linux 6.6's
 * SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (as umview's), and one thread blocks
 * in SECCOMP_IOCTL_NOTIF_RECV (as umview's lead serving thread).
 *
 *   gcc -O2 -pthread -o /tmp/notifloor bench/notifloor.c
 *   /tmp/notifloor [-t THREADS] [-s CALL,...] -- COMMAND [ARG...]
 *
 * -s names the calls to trap (default: the path calls umview traps with a
 * notification under a path module, every call of syscalls/table.py's
 * PATH_ARGS this architecture has but the execs, which are ptrace stops,
 * and getcwd; -s may also name ptrace, wait4 and waitid, strace's own). -t: threads blocked in RECV (default 1; more than one are
 * kept on a CPU each). On exit it prints on stderr how many calls it
 * answered; its exit status is COMMAND's. bench/run.py runs it as the
 * notif-floor configuration.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS _IOW('!', 4, __u64)
#endif
#define SYNC_WAKE_UP 1
#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#elif defined(__i386__)
#define ARCH AUDIT_ARCH_I386
#else
#error "notifloor: add this architecture's AUDIT_ARCH_"
#endif

#define CALL(name) {#name, SYS_##name, 0}
#define ONLY_NAMED(name) {#name, SYS_##name, 1} /* trapped only where -s names it */
static const struct {
    const char *name;
    long nr;
    int named;
} calls[] = {
#ifdef SYS_open
    CALL(open), CALL(stat), CALL(lstat), CALL(access), CALL(readlink), CALL(creat), CALL(mkdir), CALL(rmdir),
    CALL(unlink), CALL(rename), CALL(link), CALL(symlink), CALL(chmod), CALL(chown), CALL(lchown), CALL(mknod),
    CALL(utime), CALL(utimes), CALL(futimesat),
#endif
    CALL(openat), CALL(newfstatat), CALL(faccessat), CALL(faccessat2), CALL(readlinkat), CALL(statx),
    CALL(openat2), CALL(mkdirat), CALL(unlinkat), CALL(renameat2), CALL(linkat), CALL(symlinkat),
    CALL(fchmodat), CALL(fchownat), CALL(mknodat), CALL(utimensat), CALL(truncate), CALL(chdir), CALL(chroot),
    CALL(statfs), CALL(getxattr), CALL(lgetxattr), CALL(setxattr), CALL(lsetxattr), CALL(listxattr),
    CALL(llistxattr), CALL(removexattr), CALL(lremovexattr), CALL(inotify_add_watch), CALL(name_to_handle_at),
    CALL(getcwd),
    /* not path calls: strace's own, for the strace-floor configuration */
    ONLY_NAMED(ptrace), ONLY_NAMED(wait4), ONLY_NAMED(waitid),
};
#define NCALLS (sizeof calls / sizeof *calls)

static int listener;
static long answered;

static void *serve(void *arg)
{
    long cpu = (long)arg;
    if (cpu >= 0) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET((int)cpu, &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    }
    struct seccomp_notif req;
    struct seccomp_notif_resp resp;
    for (;;) {
        memset(&req, 0, sizeof req);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req)) {
            struct pollfd p = {.fd = listener, .events = POLLIN};
            if (errno == EINTR || (errno == ENOENT && !(poll(&p, 1, 0) == 1 && (p.revents & POLLHUP))))
                continue;
            return NULL; /* every process with the filter is gone */
        }
        __atomic_add_fetch(&answered, 1, __ATOMIC_RELAXED);
        memset(&resp, 0, sizeof resp);
        resp.id = req.id;
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    }
}

/* The filter: on this architecture, RET_USER_NOTIF for the numbers in nrs[0..n). */
static int install(const long *nrs, int n)
{
    struct sock_filter f[2 * NCALLS + 6];
    int k = 0;
    f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (int i = 0; i < n; i++)
        f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nrs[i], (unsigned char)(n - i), 0);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
    struct sock_fprog prog = {(unsigned short)k, f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        return -1;
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
}

static void usage(void)
{
    fprintf(stderr, "usage: notifloor [-t THREADS] [-s CALL,...] -- COMMAND [ARG...]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    long nrs[NCALLS];
    int n = 0, threads = 1, opt;
    const char *only = NULL;
    while ((opt = getopt(argc, argv, "+t:s:")) != -1) {
        if (opt == 't')
            threads = atoi(optarg);
        else if (opt == 's')
            only = optarg;
        else
            usage();
    }
    if (optind >= argc || threads < 1 || threads > 64)
        usage();
    for (size_t i = 0; i < NCALLS; i++) {
        if (!only && calls[i].named)
            continue;
        if (only) {
            size_t len = strlen(calls[i].name);
            const char *p = only;
            int found = 0;
            while (!found && (p = strstr(p, calls[i].name)) != NULL) {
                found = (p == only || p[-1] == ',') && (p[len] == ',' || p[len] == '\0');
                p += len;
            }
            if (!found)
                continue;
        }
        nrs[n++] = calls[i].nr;
    }
    if (n == 0) {
        fprintf(stderr, "notifloor: no call of -s %s is known here\n", only);
        return 2;
    }
    int pass[2], go[2]; /* the listener's number up, then the word to exec down */
    if (pipe(pass) || pipe(go))
        return perror("pipe"), 1;
    pid_t child = fork();
    if (child < 0)
        return perror("fork"), 1;
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* its calls would fail ENOSYS with no one to answer */
        int fd = install(nrs, n);
        if (write(pass[1], &fd, sizeof fd) != sizeof fd || fd < 0)
            _exit(126);
        char taken; /* the listener is the parent's now */
        if (read(go[0], &taken, 1) != 1)
            _exit(126);
        close(fd);
        close(pass[0]);
        close(pass[1]);
        close(go[0]);
        close(go[1]);
        execvp(argv[optind], argv + optind);
        fprintf(stderr, "notifloor: %s: %s\n", argv[optind], strerror(errno));
        _exit(127);
    }
    int fd;
    if (read(pass[0], &fd, sizeof fd) != sizeof fd || fd < 0) {
        fprintf(stderr, "notifloor: the filter could not be installed\n");
        return 1;
    }
    int pidfd = (int)syscall(SYS_pidfd_open, child, 0);
    listener = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
    if (listener < 0)
        return perror("pidfd_getfd"), 1;
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, (__u64)SYNC_WAKE_UP))
        perror("notifloor: SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (before Linux 6.6)");
    pthread_t t;
    for (long i = 0; i < threads; i++)
        if (pthread_create(&t, NULL, serve, (void *)(threads > 1 ? i : -1L)))
            return perror("pthread_create"), 1;
    close(go[0]);
    if (write(go[1], "g", 1) != 1)
        return perror("write"), 1;
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    fprintf(stderr, "notifloor: %ld calls answered\n", __atomic_load_n(&answered, __ATOMIC_RELAXED));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
