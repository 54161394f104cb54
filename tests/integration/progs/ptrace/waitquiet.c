/* A tracer of two seized children, and what its waits find when there is
 * nothing, or something new, to report (the view answers such waits without
 * the kernel, and holds a blocking one at its stop for a while):
 * - a blocking waitpid while both run, ended by a signal (no SA_RESTART)
 *   that comes while the wait is held: EINTR;
 * - a data request at a stop: PTRACE_PEEKDATA of a word the child has,
 *   of an address it lacks (EIO), and the stop's PTRACE_GET_SYSCALL_INFO;
 * - WNOHANG waits after a stop was taken: nothing, then another child's
 *   stop once it stops, then an untraced child's exit once it exits. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile unsigned long marker = 0x5eedf00dUL;

static void on_alarm(int sig)
{
    (void)sig;
}

/* a child that waits for a byte on fd, then stops itself */
static pid_t child(int fd)
{
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        if (read(fd, &c, 1) != 1)
            _exit(3);
        raise(SIGSTOP);
        _exit(0);
    }
    return pid;
}

/* WNOHANG waits until one reports (at most 10 s): its pid, 0 if none did */
static pid_t nohang(int *status)
{
    for (int i = 0; i < 10000; i++) {
        pid_t p = waitpid(-1, status, __WALL | WNOHANG);
        if (p != 0)
            return p;
        usleep(1000);
    }
    return 0;
}

int main(void)
{
    int a[2], b[2], status;
    if (pipe(a) || pipe(b))
        return 2;
    pid_t c1 = child(a[0]), c2 = child(b[0]);
    if (c1 < 0 || c2 < 0 || ptrace(PTRACE_SEIZE, c1, 0, 0) || ptrace(PTRACE_SEIZE, c2, 0, 0))
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART */
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 0}, {0, 5000}}; /* 5 ms: while the wait is held */
    setitimer(ITIMER_REAL, &it, NULL);
    pid_t p = waitpid(-1, &status, __WALL);
    printf("blocking wait while both run: %s\n", p < 0 ? strerror(errno) : "a stop");

    printf("nohang before any stop: %d\n", (int)waitpid(-1, &status, __WALL | WNOHANG));
    if (write(a[1], "x", 1) != 1)
        return 2;
    p = waitpid(-1, &status, __WALL);
    printf("first child: %s, stopped by %d\n", p == c1 ? "yes" : "no", WIFSTOPPED(status) ? WSTOPSIG(status) : -1);
    errno = 0;
    long word = ptrace(PTRACE_PEEKDATA, c1, (void *)&marker, 0);
    printf("peek: %lx, errno %d\n", (unsigned long)word, errno);
    errno = 0;
    word = ptrace(PTRACE_PEEKDATA, c1, (void *)8, 0);
    printf("peek of nothing: %ld, errno %d\n", word, errno);
    struct __ptrace_syscall_info si;
    long n = ptrace(PTRACE_GET_SYSCALL_INFO, c1, sizeof si, &si);
    printf("syscall info at a signal stop: size %s, op %d\n", n > 0 ? "some" : "none", n > 0 ? si.op : -1);

    printf("nohang after the stop: %d\n", (int)waitpid(-1, &status, __WALL | WNOHANG));
    printf("nohang again: %d\n", (int)waitpid(-1, &status, __WALL | WNOHANG));
    if (write(b[1], "x", 1) != 1)
        return 2;
    p = nohang(&status);
    printf("nohang, second child stopped: %s, by %d\n", p == c2 ? "yes" : "no",
           WIFSTOPPED(status) ? WSTOPSIG(status) : -1);
    printf("nohang after it: %d\n", (int)waitpid(-1, &status, __WALL | WNOHANG));

    pid_t c3 = fork();
    if (c3 == 0)
        _exit(5);
    p = nohang(&status);
    printf("nohang, untraced child exited: %s, status %d\n", p == c3 ? "yes" : "no",
           WIFEXITED(status) ? WEXITSTATUS(status) : -1);

    kill(c1, SIGKILL);
    kill(c2, SIGKILL);
    int gone = 0;
    while (gone < 2 && (p = waitpid(-1, &status, __WALL)) > 0)
        gone += WIFSIGNALED(status);
    printf("killed: %d\n", gone);
    return 0;
}
