/* N open(O_WRONLY|O_CREAT) of PATH, with THREADS (0 or 1) extra idle threads: bench/pinned.sh */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static void *idle(void *a) { (void)a; pause(); return NULL; }
int main(int argc, char **argv) {
    int threads = atoi(argv[1]), n = atoi(argv[2]);
    pthread_t t;
    if (threads) pthread_create(&t, NULL, idle, NULL);
    for (int i = 0; i < n; i++) { int fd = open(argv[3], O_WRONLY | O_CREAT, 0644); if (fd >= 0) close(fd); }
    _exit(0);
}
