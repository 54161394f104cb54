/* The wall clock as a C program sees it through glibc (the vDSO, where the
 * process has one), and absolute waits on it.
 *
 *   clockview read      "vdso 0|1", then seconds of CLOCK_REALTIME, gettimeofday,
 *                       time(), CLOCK_TAI, one per line ("realtime N", ...)
 *   clockview sleep     clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME) to now + 1 s
 *   clockview timerfd   a CLOCK_REALTIME timerfd armed with TFD_TIMER_ABSTIME at now + 1 s
 *   clockview timer     a CLOCK_REALTIME POSIX timer armed with TIMER_ABSTIME at now + 1 s
 *   clockview cond      pthread_cond_timedwait to now + 1 s (a futex with FUTEX_CLOCK_REALTIME)
 *
 * The waits print "elapsed MS": CLOCK_MONOTONIC milliseconds the wait took
 * (about 1000 when the deadline was read and waited for on the same clock).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static long long ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

static struct timespec in_one_second(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += 1;
    return t;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "read";
    if (!strcmp(what, "read")) {
        struct timespec rt, tai;
        struct timeval tv;
        clock_gettime(CLOCK_REALTIME, &rt);
        gettimeofday(&tv, NULL);
        time_t t = time(NULL);
        clock_gettime(CLOCK_TAI, &tai);
        printf("vdso %d\nrealtime %lld\ngettimeofday %lld\ntime %lld\ntai %lld\n",
               getauxval(AT_SYSINFO_EHDR) != 0, (long long)rt.tv_sec, (long long)tv.tv_sec, (long long)t,
               (long long)tai.tv_sec);
        return 0;
    }
    long long start = ms();
    struct timespec deadline = in_one_second();
    if (!strcmp(what, "sleep")) {
        if (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &deadline, NULL))
            return perror("clock_nanosleep"), 1;
    } else if (!strcmp(what, "timerfd")) {
        int fd = timerfd_create(CLOCK_REALTIME, 0);
        struct itimerspec its = {{0, 0}, deadline};
        uint64_t n;
        if (fd < 0 || timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL) || read(fd, &n, sizeof n) != sizeof n)
            return perror("timerfd"), 1;
    } else if (!strcmp(what, "timer")) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGALRM);
        sigprocmask(SIG_BLOCK, &set, NULL);
        timer_t timer;
        struct itimerspec its = {{0, 0}, deadline};
        if (timer_create(CLOCK_REALTIME, NULL, &timer) || timer_settime(timer, TIMER_ABSTIME, &its, NULL))
            return perror("timer"), 1;
        int sig;
        sigwait(&set, &sig);
    } else if (!strcmp(what, "cond")) {
        pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        pthread_cond_t c = PTHREAD_COND_INITIALIZER;
        pthread_mutex_lock(&m);
        while (pthread_cond_timedwait(&c, &m, &deadline) == 0)
            ;
    } else {
        fprintf(stderr, "clockview: unknown %s\n", what);
        return 2;
    }
    printf("elapsed %lld\n", ms() - start);
    return 0;
}
