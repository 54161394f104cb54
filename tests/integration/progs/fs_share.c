/* A child made with clone(CLONE_FS) changes into DIR (and, given ROOT,
 * chroots there); the parent, which shares its root and cwd, then says
 * where it is:
 *
 *   fs_share DIR [ROOT]   prints the parent's getcwd, then (with ROOT)
 *                         whether /marker exists for it
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static char stack[1 << 16];

static int child(void *arg)
{
    char **a = arg;
    if (chdir(a[0]))
        _exit(1);
    if (a[1] && chroot(a[1]))
        _exit(2);
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    int status, pid = clone(child, stack + sizeof stack, CLONE_FS | SIGCHLD, argv + 1);
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
        perror("child");
        return 1;
    }
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) {
        perror("getcwd");
        return 1;
    }
    printf("%s\n", cwd);
    if (argc > 2)
        printf("%s\n", access("/marker", F_OK) == 0 ? "marker" : "no marker");
    return 0;
}
