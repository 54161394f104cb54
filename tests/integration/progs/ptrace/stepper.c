/* stepper.c - a tracer that single-steps and emulates calls, as debuggers and
 * user-mode kernels do (tests/integration/test_inner_tracers.py).
 *
 *   stepper step PATH    count single steps from a syscall-entry stop until
 *                        the child exits; the child opens PATH on the way
 *   stepper sysemu       PTRACE_SYSEMU: the child's getppid() is skipped and
 *                        answered by the tracer; no exit stop comes
 *   stepper emustep      PTRACE_SYSEMU_SINGLESTEP over a loop and a call
 *
 * Prints what it saw; the same output natively and in a view. */
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

static const char *path = "/";

static void child(void)
{
    ptrace(PTRACE_TRACEME, 0, 0, 0);
    raise(SIGSTOP);
    long ppid = syscall(SYS_getppid);
    volatile long x = 0;
    for (long i = 0; i < 1000; i++)
        x += i;
    long fd = syscall(SYS_openat, -100, path, 0);
    if (fd >= 0)
        syscall(SYS_close, fd);
    for (;;) /* a tracer that emulates calls skips the first one too */
        syscall(SYS_exit_group, ppid == 4242 ? 42 : fd >= 0 ? 0 : 1);
}

static pid_t start(void)
{
    int st;
    pid_t pid = fork();
    if (pid == 0)
        child();
    waitpid(pid, &st, 0);
    ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESYSGOOD);
    return pid;
}

static const char *what(int st)
{
    static char buf[64];
    if (WIFEXITED(st))
        snprintf(buf, sizeof buf, "exited %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, sizeof buf, "killed %d", WTERMSIG(st));
    else if (WSTOPSIG(st) == (SIGTRAP | 0x80))
        snprintf(buf, sizeof buf, "syscall stop");
    else
        snprintf(buf, sizeof buf, "stopped %d event %d", WSTOPSIG(st), st >> 16);
    return buf;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (argc > 2)
        path = argv[2];
    int st;
    pid_t pid = start();
    if (!strcmp(argv[1], "step")) {
        ptrace(PTRACE_SYSCALL, pid, 0, 0); /* getppid's entry */
        waitpid(pid, &st, 0);
        printf("first: %s\n", what(st));
        long steps = 0, traps = 0, other = 0;
        for (;;) {
            ptrace(PTRACE_SINGLESTEP, pid, 0, 0);
            if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st))
                break;
            steps++;
            if (WSTOPSIG(st) == SIGTRAP) {
                siginfo_t si;
                ptrace(PTRACE_GETSIGINFO, pid, 0, &si);
                traps += si.si_code == TRAP_BRKPT || si.si_code == TRAP_TRACE;
            } else {
                other++;
                printf("other: %s\n", what(st));
            }
        }
        printf("steps %ld traps %ld other %ld, then %s\n", steps, traps, other, what(st));
    } else if (!strcmp(argv[1], "sysemu")) {
        long stops = 0;
        ptrace(PTRACE_SYSEMU, pid, 0, 0);
        while (waitpid(pid, &st, 0) == pid && WIFSTOPPED(st)) {
            struct user_regs_struct r;
            ptrace(PTRACE_GETREGS, pid, 0, &r);
            stops++;
            printf("stop %ld: %s nr %lld rax %lld\n", stops, what(st), (long long)r.orig_rax, (long long)r.rax);
            if (r.orig_rax == SYS_getppid) {
                r.rax = 4242; /* answered by the tracer, not run */
                ptrace(PTRACE_SETREGS, pid, 0, &r);
                ptrace(PTRACE_SYSEMU, pid, 0, 0);
            } else {
                ptrace(PTRACE_CONT, pid, 0, 0); /* the rest runs (this one skipped still) */
            }
        }
        printf("%s\n", what(st));
    } else if (!strcmp(argv[1], "emustep")) {
        long steps = 0, sysstops = 0;
        ptrace(PTRACE_SYSEMU_SINGLESTEP, pid, 0, 0);
        while (waitpid(pid, &st, 0) == pid && WIFSTOPPED(st)) {
            struct user_regs_struct r;
            steps++;
            if (WSTOPSIG(st) == (SIGTRAP | 0x80)) {
                sysstops++;
                ptrace(PTRACE_GETREGS, pid, 0, &r);
                printf("syscall stop after %ld steps: nr %lld\n", steps, (long long)r.orig_rax);
                if (r.orig_rax == SYS_getppid) {
                    r.rax = 4242;
                    ptrace(PTRACE_SETREGS, pid, 0, &r);
                } else if (r.orig_rax != SYS_exit_group) {
                    r.rax = -1; /* the other calls: failed by the tracer */
                    ptrace(PTRACE_SETREGS, pid, 0, &r);
                } else {
                    ptrace(PTRACE_CONT, pid, 0, 0); /* this one is skipped still, the next runs */
                    continue;
                }
            }
            ptrace(PTRACE_SYSEMU_SINGLESTEP, pid, 0, 0);
        }
        printf("steps %ld syscall stops %ld, then %s\n", steps, sysstops, what(st));
    }
    return 0;
}
