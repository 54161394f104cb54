/* A tracer in the manner of strace -f, under a storm of signals: two
 * children traced with PTRACE_TRACEME each make ROUNDS getppid() calls; the
 * tracer takes each stop with a blocking wait4(-1, ..., __WALL), drains
 * with WNOHANG waits, reads PTRACE_GET_SYSCALL_INFO and resumes with
 * PTRACE_SYSCALL, while a timer sends it SIGALRM every 500 us to a handler
 * installed without SA_RESTART. Natively only the blocking wait may fail
 * with EINTR (retried); ptrace() and a WNOHANG wait never do, and every
 * stop comes once. Prints, per child, the getppid entry and exit stops it
 * saw and how it ended, and the failures of ptrace() and WNOHANG waits. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 1000

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

static pid_t child(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        ptrace(PTRACE_TRACEME, 0, 0, 0);
        raise(SIGSTOP);
        for (int i = 0; i < ROUNDS; i++)
            syscall(SYS_getppid);
        _exit(0);
    }
    return pid;
}

int main(void)
{
    pid_t kids[2] = {child(), child()};
    long entries[2] = {0, 0}, exits[2] = {0, 0};
    int ended[2] = {-1, -1}, live = 2;
    long ptrace_errors = 0, nohang_errors = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART */
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval every = {{0, 500}, {0, 500}};
    setitimer(ITIMER_REAL, &every, NULL);
    while (live) {
        int status;
        pid_t pid = wait4(-1, &status, __WALL, NULL);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid < 0)
            break;
        for (;;) {
            int k = pid == kids[0] ? 0 : pid == kids[1] ? 1 : -1;
            if (k < 0) {
                printf("a stop of an unknown pid\n");
                return 1;
            }
            if (WIFEXITED(status) || WIFSIGNALED(status)) {
                ended[k] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                live--;
            } else {
                int sig = WSTOPSIG(status), give = 0;
                if (sig == (SIGTRAP | 0x80)) {
                    struct __ptrace_syscall_info si;
                    if (ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof si, &si) <= 0) {
                        ptrace_errors++;
                    } else if (si.op == PTRACE_SYSCALL_INFO_ENTRY && si.entry.nr == SYS_getppid) {
                        entries[k]++;
                    } else if (si.op == PTRACE_SYSCALL_INFO_EXIT && si.exit.rval == getpid()) {
                        exits[k]++;
                    }
                } else if (sig == SIGSTOP) {
                    ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESYSGOOD);
                } else {
                    give = sig;
                }
                if (ptrace(PTRACE_SYSCALL, pid, 0, give))
                    ptrace_errors++;
            }
            pid = wait4(-1, &status, WNOHANG | __WALL, NULL);
            if (pid < 0) {
                if (errno != ECHILD)
                    nohang_errors++;
                break;
            }
            if (pid == 0)
                break;
        }
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    for (int k = 0; k < 2; k++)
        printf("child %d: getppid entries %ld exits %ld, exited %d\n", k + 1, entries[k], exits[k], ended[k]);
    printf("ptrace errors %ld, WNOHANG errors %ld, signals: %s\n", ptrace_errors, nohang_errors,
           alarms > 10 ? "many" : "few");
    return 0;
}
