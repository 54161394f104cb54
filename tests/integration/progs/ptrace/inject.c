/* inject.c - signals a tracer gives with its resumes, and the siginfo the
 * tracee's handler gets (tests/integration/test_ptrace_fidelity.py):
 *  - at a syscall-entry and a syscall-exit stop: sent by the kernel (SI_KERNEL);
 *  - at a signal-delivery stop, another signal than the one stopped for:
 *    delivered as sent by the tracer (SI_USER, the tracer's pid);
 *  - at an event stop (fork) and at a group-stop: ignored.
 * Prints what the handler saw; the same natively and in a view. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t tracer;
static volatile int got;

static void handler(int sig, siginfo_t *si, void *uc)
{
    char buf[128];
    int n = snprintf(buf, sizeof buf, "handler: sig %d code %d pid %s\n", sig, si->si_code,
                     si->si_pid == 0 ? "0" : si->si_pid == tracer ? "tracer" : "other");
    write(1, buf, (size_t)n);
    got++;
}

static void child(void)
{
    struct sigaction sa = {.sa_sigaction = handler, .sa_flags = SA_SIGINFO | SA_RESTART};
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    ptrace(PTRACE_TRACEME, 0, 0, 0);
    raise(SIGSTOP);
    syscall(SYS_getppid);      /* entry: SIGUSR1 */
    syscall(SYS_getpgid, 0);   /* exit: SIGUSR1 */
    syscall(SYS_gettid);       /* raises SIGUSR1, changed to SIGUSR2 */
    pid_t c = fork();          /* fork event: SIGUSR1 ignored */
    if (c == 0)
        _exit(0);
    waitpid(c, NULL, 0);
    printf("handlers ran %d times\n", got);
    fflush(stdout);
    _exit(0);
}

int main(void)
{
    int st;
    tracer = getpid();
    setvbuf(stdout, NULL, _IONBF, 0);
    pid_t pid = fork();
    if (pid == 0)
        child();
    waitpid(pid, &st, 0);
    ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEFORK);
    ptrace(PTRACE_SYSCALL, pid, 0, 0);
    int entry = 1, gave_exit = 0, raised = 0;
    while (waitpid(pid, &st, __WALL) == pid && WIFSTOPPED(st)) {
        int sig = 0;
        if (WSTOPSIG(st) == (SIGTRAP | 0x80)) {
            struct user_regs_struct r;
            ptrace(PTRACE_GETREGS, pid, 0, &r);
            if (entry && r.orig_rax == SYS_getppid)
                sig = SIGUSR1;
            if (!entry && r.orig_rax == SYS_getpgid && !gave_exit++)
                sig = SIGUSR1;
            if (entry && r.orig_rax == SYS_gettid && !raised++)
                syscall(SYS_tgkill, pid, pid, SIGUSR1);
            entry = !entry;
        } else if (st >> 16 == PTRACE_EVENT_FORK) {
            unsigned long c;
            ptrace(PTRACE_GETEVENTMSG, pid, 0, &c);
            printf("fork event: SIGUSR1 given\n");
            sig = SIGUSR1;
            ptrace(PTRACE_CONT, pid, 0, sig);
            waitpid((pid_t)c, &st, __WALL);           /* its first stop */
            ptrace(PTRACE_DETACH, (pid_t)c, 0, 0);
            ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESYSGOOD); /* the rest, untraced */
            continue;
        } else if (WSTOPSIG(st) == SIGUSR1) {
            siginfo_t si;
            ptrace(PTRACE_GETSIGINFO, pid, 0, &si);
            printf("signal stop: SIGUSR1 code %d pid %s, given SIGUSR2\n", si.si_code,
                   si.si_pid == 0 ? "0" : si.si_pid == getpid() ? "tracer" : si.si_pid == pid ? "self" : "other");
            sig = SIGUSR2;
        } else {
            sig = WSTOPSIG(st) == SIGTRAP ? 0 : WSTOPSIG(st);
        }
        ptrace(PTRACE_SYSCALL, pid, 0, sig);
    }
    printf("child %s %d\n", WIFEXITED(st) ? "exited" : "killed", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    return 0;
}
