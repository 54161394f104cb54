/* openat2 with RESOLVE_IN_ROOT: "/" in the path is the dirfd, so a path
 * that looks absolute is relative to a directory the process opened.
 *
 *   openat2_in_root VICTIM   dirfd = the parent of VICTIM's directory,
 *                            path "/DIRNAME/NAME", O_WRONLY|O_TRUNC
 */
#include "escape.h"
#include <linux/openat2.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        unsupported("usage: openat2_in_root VICTIM");
    char *dir = dir_of(argv[1]);
    int root = open(dir_of(dir), O_RDONLY | O_DIRECTORY);
    if (root < 0)
        fail("open the parent directory");
    char path[4096];
    snprintf(path, sizeof path, "/%s/%s", name_of(dir), name_of(argv[1]));
    struct open_how how = {.flags = O_WRONLY | O_TRUNC, .resolve = RESOLVE_IN_ROOT};
    int fd = syscall(__NR_openat2, root, path, &how, sizeof how);
    if (fd < 0) {
        if (errno == ENOSYS)
            unsupported("no openat2 on this kernel");
        fail("openat2");
    }
    write_mark(fd, "write");
    return 0;
}
