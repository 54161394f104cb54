/* chdir calls (failing: the names do not exist) in a process and in its
 * child, around a fork: what strace --seccomp-bpf -f reports of them. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    if (chdir("forkchdir.parent") == 0)
        return 2;
    pid_t pid = fork();
    if (pid < 0)
        return 3;
    if (pid == 0) {
        if (chdir("forkchdir.child") == 0)
            return 2;
        _exit(chdir("forkchdir.exit") == 0 ? 2 : 0);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || status != 0)
        return 4;
    return chdir("forkchdir.done") == 0 ? 2 : 0;
}
