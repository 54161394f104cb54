/* What every escape program shares (tests/integration/test_escapes.py).
 *
 * Each program takes the path of a VICTIM file (in a directory of its own,
 * writable by the user running it) and tries to change it through one kernel
 * interface. Exit status: 0 when its calls succeeded (natively: the victim
 * changed), 1 when a call failed (the message says which, with the errno),
 * 77 when this machine lacks the interface (the message says why: the test
 * is skipped).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define ESCAPED "escaped\n"

/* a call failed: say which and why, exit 1 */
static void __attribute__((noreturn)) fail(const char *what)
{
    fprintf(stderr, "%s: %s\n", what, strerror(errno));
    exit(1);
}

/* the interface is missing here: exit 77 */
static void __attribute__((noreturn)) unsupported(const char *why)
{
    fprintf(stderr, "unsupported: %s\n", why);
    exit(77);
}

/* write the mark into fd, then close it */
static void write_mark(int fd, const char *what)
{
    if (write(fd, ESCAPED, strlen(ESCAPED)) != (ssize_t)strlen(ESCAPED))
        fail(what);
    close(fd);
}

/* open path for writing (truncating it) and write the mark */
static void write_path(const char *path)
{
    int fd = open(path, O_WRONLY | O_TRUNC);
    if (fd < 0)
        fail(path);
    write_mark(fd, path);
}

/* the directory and the name of a path (copies) */
static char *dir_of(const char *path)
{
    char *copy = strdup(path);
    return strdup(dirname(copy));
}

static char *name_of(const char *path)
{
    char *copy = strdup(path);
    return strdup(basename(copy));
}

static char *joined(const char *a, const char *b)
{
    char *out;
    if (asprintf(&out, "%s/%s", a, b) < 0)
        fail("asprintf");
    return out;
}

/* become root of a new user namespace (and mount namespace when mounts is
 * set) mapped to the caller's ids, so an unprivileged user may chroot or
 * mount; private propagation, so no mount reaches the caller's namespace */
static void own_namespaces(int mounts)
{
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER | (mounts ? CLONE_NEWNS : 0)))
        fail("unshare");
    /* an unprivileged process may map its group only with setgroups denied */
    int fd = open("/proc/self/setgroups", O_WRONLY);
    if (fd < 0 || write(fd, "deny", 4) < 0)
        fail("/proc/self/setgroups");
    close(fd);
    char map[64];
    const char *files[] = {"/proc/self/uid_map", "/proc/self/gid_map"};
    unsigned ids[] = {uid, gid};
    for (int i = 0; i < 2; i++) {
        snprintf(map, sizeof map, "0 %u 1", ids[i]);
        fd = open(files[i], O_WRONLY);
        if (fd < 0 || write(fd, map, strlen(map)) < 0)
            fail(files[i]);
        close(fd);
    }
    if (mounts && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
        fail("mount --make-rprivate /");
}
