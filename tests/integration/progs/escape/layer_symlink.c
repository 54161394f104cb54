/* A symlink made in the view (in a copy-on-write view of /, a real symlink
 * in the layer directory) pointing into the lower tree: if the kernel
 * follows it from the layer, it reaches the real file.
 *
 *   layer_symlink VICTIM    symlink /var/tmp/escape-link-PID -> VICTIM,
 *                           write through it, remove it
 */
#include "escape.h"

int main(int argc, char **argv)
{
    if (argc != 2)
        unsupported("usage: layer_symlink VICTIM");
    char link[64];
    snprintf(link, sizeof link, "/var/tmp/escape-link-%d", (int)getpid());
    if (symlink(argv[1], link))
        fail("symlink");
    int fd = open(link, O_WRONLY | O_TRUNC);
    int saved = errno;
    unlink(link);
    errno = saved;
    if (fd < 0)
        fail("open through the symlink");
    write_mark(fd, "write");
    return 0;
}
