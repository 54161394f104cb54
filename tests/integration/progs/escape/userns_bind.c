/* A bind mount made in a new user and mount namespace: the view's paths
 * still lead to a directory of its choosing, over which the real directory
 * of VICTIM is now mounted.
 *
 *   userns_bind VICTIM   unshare(CLONE_NEWUSER|CLONE_NEWNS), mount --bind
 *                        VICTIM's directory DIR on a new directory S,
 *                        /dev/shm/escape-bind-<DIR's name> (a path a view of
 *                        / may leave to the kernel), write S/NAME
 */
#include "escape.h"

int main(int argc, char **argv)
{
    if (argc != 2)
        unsupported("usage: userns_bind VICTIM");
    char *scratch;
    if (asprintf(&scratch, "/dev/shm/escape-bind-%s", name_of(dir_of(argv[1]))) < 0)
        fail("asprintf");
    if (mkdir(scratch, 0700))
        fail(scratch);
    own_namespaces(1);
    const char *failed = NULL;
    if (mount(dir_of(argv[1]), scratch, NULL, MS_BIND, NULL)) {
        failed = "mount --bind";
    } else {
        int fd = open(joined(scratch, name_of(argv[1])), O_WRONLY | O_TRUNC);
        if (fd < 0 || write(fd, ESCAPED, strlen(ESCAPED)) < 0)
            failed = "write through the bind mount";
        if (fd >= 0)
            close(fd);
        umount2(scratch, MNT_DETACH);
    }
    int saved = errno;
    rmdir(scratch);
    errno = saved;
    if (failed)
        fail(failed);
    return 0;
}
