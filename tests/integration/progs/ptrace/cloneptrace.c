/* cloneptrace.c - a traced process whose clone() asks for CLONE_PTRACE: its
 * child is traced by the same tracer, which gets the child's SIGSTOP and no
 * fork event (it set no PTRACE_O_TRACE* option). Prints the tracer's waits,
 * the grandchild's first (when the child's SIGCHLD comes, before or after the
 * tracer collects the grandchild's exit, differs: docs/internals.md); the
 * same natively and in a view (tests/integration/test_ptrace_fidelity.py). */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    pid_t child = fork();
    if (child == 0) {
        ptrace(PTRACE_TRACEME, 0, 0, 0);
        raise(SIGSTOP);
        long g = syscall(SYS_clone, CLONE_PTRACE | SIGCHLD, 0, 0, 0, 0);
        if (g == 0)
            _exit(7);
        int st;
        waitpid((pid_t)g, &st, 0);
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) + 10 : 99);
    }
    int st;
    pid_t w;
    char lines[2][512] = {"", ""};
    waitpid(child, &st, 0); /* its SIGSTOP */
    ptrace(PTRACE_CONT, child, 0, 0);
    while ((w = waitpid(-1, &st, __WALL)) > 0) {
        const char *who = w == child ? "child" : "grandchild";
        if (WIFSTOPPED(st)) {
            char *out = lines[w == child];
            snprintf(out + strlen(out), 512 - strlen(out), "%s: stopped by %d, event %d\n", who, WSTOPSIG(st),
                     st >> 16);
            ptrace(PTRACE_CONT, w, 0, WSTOPSIG(st) == SIGSTOP || WSTOPSIG(st) == SIGTRAP ? 0 : WSTOPSIG(st));
        } else {
            char *out = lines[w == child];
            snprintf(out + strlen(out), 512 - strlen(out), "%s: exited %d\n", who, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        }
    }
    printf("%s%s", lines[0], lines[1]);
    return 0;
}
