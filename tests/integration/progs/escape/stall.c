/* open() of a path in a page a userfaultfd holds and nobody fills: a
 * monitor reading the path waits for good (test_escapes.py: how umview ends
 * after SIGTERM). Exit 77 where no userfaultfd handles kernel faults. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
int main(void)
{
    long uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
    struct uffdio_api api = {.api = UFFD_API};
    char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct uffdio_register reg = {.range = {(unsigned long)page, 4096}, .mode = UFFDIO_REGISTER_MODE_MISSING};
    if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) || ioctl(uffd, UFFDIO_REGISTER, &reg))
        return 77;
    printf("ready\n");
    fflush(stdout);
    return open(page, O_RDONLY) < 0;
}
