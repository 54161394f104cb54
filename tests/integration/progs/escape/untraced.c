/* clone(CLONE_UNTRACED): a child the tracer is not told about. It waits for
 * its parent to exit (end of file on a pipe) and two seconds more (a view
 * would have ended by then), then writes VICTIM; it keeps stdout open
 * meanwhile, so whoever reads the output waits for it.
 *
 *   untraced VICTIM    the parent exits 0 at once
 */
#include "escape.h"

static int pipefd[2];
static const char *victim;

static int child(void *unused)
{
    (void)unused;
    char c;
    close(pipefd[1]);
    while (read(pipefd[0], &c, 1) > 0)
        ;
    sleep(2);
    write_path(victim);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        unsupported("usage: untraced VICTIM");
    victim = argv[1];
    if (pipe(pipefd))
        fail("pipe");
    size_t size = 256 * 1024;
    char *stack = malloc(size);
    if (clone(child, stack + size, CLONE_UNTRACED | SIGCHLD, NULL) < 0)
        fail("clone");
    return 0;
}
