/* Reopening a read-only fd for writing through its /proc link: the kernel
 * reopens the file the fd holds (in a cow view, the lower, real file).
 *
 *   reopen_fd MODE VICTIM     open VICTIM O_RDONLY as fd N, then open for writing
 *     proc-fd   /proc/self/fd/N
 *     pid-fd    /proc/<own pid>/fd/N
 *     task-fd   /proc/self/task/TID/fd/N
 *     dev-fd    /dev/fd/N
 *     openat    openat(<fd of /proc/self/fd>, "N", O_WRONLY)
 */
#include "escape.h"

int main(int argc, char **argv)
{
    if (argc != 3)
        unsupported("usage: reopen_fd proc-fd|pid-fd|task-fd|dev-fd|openat VICTIM");
    const char *mode = argv[1], *victim = argv[2];
    int ro = open(victim, O_RDONLY);
    if (ro < 0)
        fail("open O_RDONLY");
    char path[256];
    int fd;
    if (!strcmp(mode, "openat")) {
        int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY);
        if (dir < 0)
            fail("/proc/self/fd");
        snprintf(path, sizeof path, "%d", ro);
        fd = openat(dir, path, O_WRONLY | O_TRUNC);
    } else {
        if (!strcmp(mode, "proc-fd"))
            snprintf(path, sizeof path, "/proc/self/fd/%d", ro);
        else if (!strcmp(mode, "pid-fd"))
            snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)getpid(), ro);
        else if (!strcmp(mode, "task-fd"))
            snprintf(path, sizeof path, "/proc/self/task/%d/fd/%d", (int)gettid(), ro);
        else if (!strcmp(mode, "dev-fd"))
            snprintf(path, sizeof path, "/dev/fd/%d", ro);
        else
            unsupported("unknown mode");
        fd = open(path, O_WRONLY | O_TRUNC);
    }
    if (fd < 0)
        fail(path);
    write_mark(fd, path);
    return 0;
}
