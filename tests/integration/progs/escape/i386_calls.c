/* i386 system calls (int $0x80) from a 64-bit process: the i386 ABI's
 * numbers and 32-bit pointers (the path lives in MAP_32BIT memory).
 *
 *   i386_calls fchmod VICTIM   open VICTIM O_RDONLY (x86_64), i386 fchmod(fd, 0600)
 *   i386_calls chmod VICTIM    i386 chmod(VICTIM, 0600)
 */
#include "escape.h"
#include <sys/mman.h>

static long int80(long nr, long a, long b)
{
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b) : "memory", "r8", "r9", "r10", "r11");
    return ret;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        unsupported("usage: i386_calls fchmod|chmod VICTIM");
    if (int80(20 /* i386 getpid */, 0, 0) == -ENOSYS)
        unsupported("this kernel runs no i386 calls (IA32_EMULATION)");
    long ret;
    if (!strcmp(argv[1], "fchmod")) {
        int fd = open(argv[2], O_RDONLY);
        if (fd < 0)
            fail("open O_RDONLY");
        ret = int80(94 /* i386 fchmod */, fd, 0600);
    } else if (!strcmp(argv[1], "chmod")) {
        char *low = mmap(NULL, 4096 * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
        if (low == MAP_FAILED)
            fail("mmap MAP_32BIT");
        strncpy(low, argv[2], 4096 * 2 - 1);
        ret = int80(15 /* i386 chmod */, (long)low, 0600);
    } else {
        unsupported("unknown mode");
    }
    if (ret < 0) {
        errno = -ret;
        fail(argv[1]);
    }
    return 0;
}
