/* Files made and removed in directory argv[1] under a storm of SIGALRM whose
 * handler lacks SA_RESTART: natively open(O_CREAT), mkdir, unlink and rmdir
 * never fail (none of them waits interruptibly). Prints the failures by
 * errno name and the count of rounds. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
static volatile long hits;
static void on_alarm(int s) { (void)s; hits++; }
static long failed[256];
static void check(int r)
{
    if (r < 0)
        failed[errno & 255]++;
}
int main(int argc, char **argv)
{
    if (argc < 3 || chdir(argv[1]) < 0)
        return 2;
    int rounds = atoi(argv[2]);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART */
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
    char name[64];
    for (int i = 0; i < rounds; i++) {
        snprintf(name, sizeof name, "f%d", i % 16);
        int fd = open(name, O_WRONLY | O_CREAT, 0600);
        check(fd);
        if (fd >= 0)
            close(fd);
        check(unlink(name));
        check(mkdir("d", 0700));
        check(rmdir("d"));
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    int any = 0;
    for (int e = 0; e < 256; e++)
        if (failed[e]) {
            printf("%s: %ld\n", strerror(e), failed[e]);
            any = 1;
        }
    printf("rounds: %d%s\n", rounds, any ? "" : ", no failure");
    return 0;
}
