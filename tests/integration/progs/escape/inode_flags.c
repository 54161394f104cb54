/* Inode flags set through a read-only fd: FS_IOC_SETFLAGS and
 * FS_IOC_FSSETXATTR need only ownership, not a writable open, so a cow view
 * that copies up on open-for-writing never sees them. Toggles the "no dump"
 * flag (one every filesystem with flags has, and harmless).
 *
 *   inode_flags setflags|fsxattr VICTIM
 */
#include "escape.h"
#include <linux/fs.h>
#include <sys/ioctl.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        unsupported("usage: inode_flags setflags|fsxattr VICTIM");
    int fd = open(argv[2], O_RDONLY);
    if (fd < 0)
        fail("open O_RDONLY");
    if (!strcmp(argv[1], "setflags")) {
        int flags;
        if (ioctl(fd, FS_IOC_GETFLAGS, &flags)) {
            if (errno == ENOTTY || errno == EOPNOTSUPP)
                unsupported("this filesystem has no inode flags (FS_IOC_GETFLAGS)");
            fail("FS_IOC_GETFLAGS");
        }
        flags ^= FS_NODUMP_FL;
        if (ioctl(fd, FS_IOC_SETFLAGS, &flags))
            fail("FS_IOC_SETFLAGS");
    } else if (!strcmp(argv[1], "fsxattr")) {
        struct fsxattr attr;
        if (ioctl(fd, FS_IOC_FSGETXATTR, &attr)) {
            if (errno == ENOTTY || errno == EOPNOTSUPP)
                unsupported("this filesystem has no FS_IOC_FSGETXATTR");
            fail("FS_IOC_FSGETXATTR");
        }
        attr.fsx_xflags ^= FS_XFLAG_NODUMP;
        if (ioctl(fd, FS_IOC_FSSETXATTR, &attr))
            fail("FS_IOC_FSSETXATTR");
    } else {
        unsupported("unknown mode");
    }
    return 0;
}
