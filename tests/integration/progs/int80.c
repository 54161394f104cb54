/* i386 system calls (int $0x80) from a 64-bit process.
 *
 *   int80 [PATH]   open(PATH or /etc/hostname) and getpid through int $0x80
 *
 * Build non-PIE (-no-pie): the path lives in a static buffer whose address
 * fits the 32-bit argument registers of the i386 ABI.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[4096] = "/etc/hostname";

static long int80(long nr, long a, long b, long c)
{
    long ret;
    __asm__ volatile("int $0x80"
                     : "=a"(ret)
                     : "a"(nr), "b"(a), "c"(b), "d"(c)
                     : "memory", "r8", "r9", "r10", "r11");
    return ret;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        strncpy(path, argv[1], sizeof path - 1);
    long fd = int80(5 /* i386 open */, (long)path, O_RDONLY, 0);
    if (fd >= 0) {
        char buf[256] = {0};
        long n = read((int)fd, buf, sizeof buf - 1);
        printf("open: fd, read %ld bytes: %s", n, buf);
    } else {
        printf("open: %ld\n", fd);
    }
    /* the real pid without asking getpid, which an engine may claim */
    char self[32] = {0};
    if (readlink("/proc/self", self, sizeof self - 1) < 0)
        return 2;
    long pid = int80(20 /* i386 getpid */, 0, 0, 0);
    if (pid == atol(self))
        printf("getpid: real\n");
    else
        printf("getpid: %ld\n", pid);
    return 0;
}
