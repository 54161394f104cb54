/* umount2 of what the view mounts on / (a copy-on-write view's layer), then
 * a write of VICTIM. Run only in a mount namespace of its own (the test
 * makes one: unshare -m), where a real umount of / harms nothing else.
 *
 *   umount_root plain|detach VICTIM    umount2("/", 0 or MNT_DETACH), then
 *                                      write VICTIM whatever umount2 answered
 */
#include "escape.h"

int main(int argc, char **argv)
{
    if (argc != 3)
        unsupported("usage: umount_root plain|detach VICTIM");
    int flags = !strcmp(argv[1], "detach") ? MNT_DETACH : 0;
    if (umount2("/", flags))
        printf("umount2 /: %s\n", strerror(errno));
    else
        printf("umount2 /: done\n");
    write_path(argv[2]);
    return 0;
}
