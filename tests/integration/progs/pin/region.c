/* The read-only region the monitor keeps pinned paths in (umview/csrc/pin.c),
 * attacked from inside: can the process change it?
 *
 *   region OP      OP: mprotect munmap mremap-from mremap-onto mmap-fixed
 *                      madvise shmat proc-mem
 *
 * A thread is started (the memory then has two users) and /dev/null opened
 * for writing: under umview that call runs pinned, which maps the region.
 * The region is found in /proc/self/maps: a 16 MiB read-only private
 * anonymous mapping below 4 GiB. Natively there is none: the program maps a
 * look-alike itself, so that a native run shows each operation succeeding.
 * Prints "monitor's" or "own", then "OP: ok" or "OP: <strerror>"; exit 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#define SIZE (16UL << 20)

static void *idle(void *arg)
{
    (void)arg;
    pause();
    return NULL;
}

static uintptr_t find_region(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    uintptr_t found = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi, off;
        char perms[8];
        unsigned dmaj, dmin;
        unsigned long ino;
        if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &lo, &hi, perms, &off, &dmaj, &dmin, &ino) == 7 &&
            hi - lo == SIZE && !strcmp(perms, "r--p") && ino == 0 && hi <= (1UL << 32))
            found = lo;
    }
    if (f)
        fclose(f);
    return found;
}

static void say(const char *op, int failed)
{
    printf("%s: %s\n", op, failed ? strerror(errno) : "ok");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: region OP\n");
        return 2;
    }
    const char *op = argv[1];
    pthread_t t;
    if (pthread_create(&t, NULL, idle, NULL))
        return 1;
    int fd = open("/dev/null", O_WRONLY);
    if (fd < 0)
        return 1;
    close(fd);
    uintptr_t r = find_region();
    if (r) {
        printf("monitor's\n");
    } else {
        void *own = mmap(NULL, SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_32BIT, -1, 0);
        if (own == MAP_FAILED)
            return 1;
        r = (uintptr_t)own;
        printf("own\n");
    }
    void *p = (void *)r;
    if (!strcmp(op, "mprotect")) {
        say(op, mprotect(p, 4096, PROT_READ | PROT_WRITE) != 0);
    } else if (!strcmp(op, "munmap")) {
        say(op, munmap((char *)p + 4096, 4096) != 0);
    } else if (!strcmp(op, "mremap-from")) {
        say(op, mremap(p, 4096, 4096, MREMAP_MAYMOVE | MREMAP_FIXED, (char *)p + SIZE + (1 << 20)) == MAP_FAILED);
    } else if (!strcmp(op, "mremap-onto")) {
        void *q = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        say(op, q == MAP_FAILED || mremap(q, 4096, 4096, MREMAP_MAYMOVE | MREMAP_FIXED, p) == MAP_FAILED);
    } else if (!strcmp(op, "mmap-fixed")) {
        say(op, mmap(p, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED);
    } else if (!strcmp(op, "madvise")) {
        say(op, madvise(p, 4096, MADV_DONTNEED) != 0);
    } else if (!strcmp(op, "shmat")) {
        int id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
        if (id < 0) {
            say(op, 1);
        } else {
            say(op, shmat(id, p, SHM_REMAP) == (void *)-1);
            shmctl(id, IPC_RMID, NULL);
        }
    } else if (!strcmp(op, "proc-mem")) {
        int m = open("/proc/self/mem", O_RDWR);
        say(op, m < 0 || pwrite(m, "x", 1, (off_t)r) != 1);
    } else {
        fprintf(stderr, "unknown OP %s\n", op);
        return 2;
    }
    fflush(stdout);
    _exit(0);
}
