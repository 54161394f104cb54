/* stat() and access() under a storm of SIGALRM whose handler lacks SA_RESTART:
 * natively never EINTR. With an argument, open() of that FIFO (no writer)
 * with alarm(1): EINTR natively. */
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
int main(int argc, char **argv)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART */
    sigaction(SIGALRM, &sa, NULL);
    if (argc > 1) { /* fifo mode */
        alarm(1);
        int fd = open(argv[1], O_RDONLY);
        printf("fifo open: %d %s\n", fd, fd < 0 ? strerror(errno) : "");
        return 0;
    }
    struct itimerval it = {{0, 200}, {0, 200}};
    setitimer(ITIMER_REAL, &it, NULL);
    long eintr = 0, other = 0;
    struct stat st;
    for (int i = 0; i < 20000; i++) {
        if (stat("/etc/hostname", &st) < 0) {
            if (errno == EINTR) eintr++; else other++;
        }
        if (access("/etc/passwd", R_OK) < 0) {
            if (errno == EINTR) eintr++; else other++;
        }
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("eintr=%ld other=%ld signals>0=%d\n", eintr, other, hits > 0);
    return 0;
}
