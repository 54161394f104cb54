/* tracee_tracer.c - a tracer that is itself traced (run under strace): it
 * traces its child, which it sees stop once and exit; it got
 * PTRACE_EVENT_EXIT stops it never asked for, its own tracer's option
 * inherited (tests/integration/test_ptrace_fidelity.py). */
#include <signal.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    pid_t c = fork();
    if (c == 0) {
        ptrace(PTRACE_TRACEME, 0, 0, 0);
        raise(SIGSTOP);
        _exit(3);
    }
    int st;
    while (waitpid(c, &st, 0) == c) {
        if (WIFSTOPPED(st)) {
            printf("stopped %d event %d\n", WSTOPSIG(st), st >> 16);
            ptrace(PTRACE_CONT, c, 0, 0);
        } else {
            printf("exit %d\n", WEXITSTATUS(st));
            break;
        }
    }
    return 0;
}
