/* x32 system calls (__X32_SYSCALL_BIT) from a 64-bit process.
 *
 *   x32_calls open VICTIM     x32 openat(VICTIM, O_WRONLY|O_TRUNC), write
 *   x32_calls fchmod VICTIM   open VICTIM O_RDONLY (x86_64), x32 fchmod(fd, 0600)
 */
#include "escape.h"

#define X32 0x40000000L

int main(int argc, char **argv)
{
    if (argc != 3)
        unsupported("usage: x32_calls open|fchmod VICTIM");
    if (syscall(X32 | __NR_getpid) < 0 && errno == ENOSYS)
        unsupported("this kernel has no x32 ABI (CONFIG_X86_X32_ABI)");
    long ret;
    if (!strcmp(argv[1], "open")) {
        ret = syscall(X32 | __NR_openat, AT_FDCWD, argv[2], O_WRONLY | O_TRUNC);
        if (ret >= 0)
            write_mark(ret, "write");
    } else if (!strcmp(argv[1], "fchmod")) {
        int fd = open(argv[2], O_RDONLY);
        if (fd < 0)
            fail("open O_RDONLY");
        ret = syscall(X32 | __NR_fchmod, fd, 0600);
    } else {
        unsupported("unknown mode");
    }
    if (ret < 0)
        fail(argv[1]);
    return 0;
}
