/* chdir("."), with a SIGUSR1 handler that ends the process: under strace
 * -e inject=chdir:signal=USR1 the call runs, then the handler (exit 0). */
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

static void on_usr1(int sig)
{
    (void)sig;
    syscall(SYS_exit_group, 0);
}

int main(void)
{
    struct sigaction act = {.sa_handler = on_usr1};
    if (sigaction(SIGUSR1, &act, 0))
        return 2;
    syscall(SYS_chdir, ".");
    return 1;
}
