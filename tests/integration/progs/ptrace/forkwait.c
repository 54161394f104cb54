/* A parent that forks children one by one, each exiting at once, and waits
 * for each, with a SIGCHLD handler: under strace -f, when does the parent
 * hear of a child's exit, against when strace collects it? */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_child(int sig)
{
    (void)sig;
}

int main(void)
{
    signal(SIGCHLD, on_child);
    for (int i = 0; i < 20; i++) {
        pid_t pid = fork();
        if (pid < 0)
            return 3;
        if (pid == 0)
            _exit(i);
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != i)
            return 4;
    }
    return 0;
}
