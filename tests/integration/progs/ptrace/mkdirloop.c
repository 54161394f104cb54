/* mkdir of a directory that exists (argv[2]), again and again, for argv[1]
 * seconds: a process in a loop of calls a cow view serves in Python, for a
 * tracer to attach to while one waits for the monitor. */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    double seconds = atof(argv[1]);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        if (mkdir(argv[2], 0700) == 0 || errno != EEXIST)
            return 3;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
    return 0;
}
