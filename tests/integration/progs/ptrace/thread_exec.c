/* thread_exec.c - a thread that is not the leader calls execve, while the
 * leader and another thread wait: under strace -f the tracer sees the other
 * threads exit, the exec with the leader's tid and the old tid as its event
 * message, and the leader vanish without a death of its own (strace crashed
 * on the death the view reported; tests/integration/test_ptrace_fidelity.py).
 * It does so twice: the thread that execed is the leader after, and the
 * second exec's leader vanishes too (the view had kept it a thread). */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static char *self, *next;

static void *sleeper(void *arg)
{
    (void)arg;
    pause();
    return NULL;
}

static void *execer(void *arg)
{
    (void)arg;
    usleep(20000);
    char *argv[] = {self, next, NULL};
    execv(self, argv);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1 && argv[1][0] == '2') {
        printf("execed twice\n");
        return 0;
    }
    self = argv[0];
    next = argc > 1 ? "2" : "1";
    pthread_t a, b;
    pthread_create(&a, NULL, sleeper, NULL);
    pthread_create(&b, NULL, execer, NULL);
    pause();
    return 1;
}
