/* chroot into the parent of VICTIM's directory, then write "/DIR/NAME": the
 * kernel resolves it from the new root, the view may not.
 *
 *   chroot_parent VICTIM   as root directly; as another user in a new user
 *                          namespace first (unshare(CLONE_NEWUSER))
 */
#include "escape.h"

int main(int argc, char **argv)
{
    if (argc != 2)
        unsupported("usage: chroot_parent VICTIM");
    char *dir = dir_of(argv[1]);
    if (geteuid() != 0)
        own_namespaces(0);
    if (chroot(dir_of(dir)))
        fail("chroot");
    if (chdir("/"))
        fail("chdir /");
    char path[4096];
    snprintf(path, sizeof path, "/%s/%s", name_of(dir), name_of(argv[1]));
    write_path(path);
    return 0;
}
