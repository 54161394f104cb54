/* servers.c - serving notifications on more than one thread
 *
 * One monitor thread serving every notification serializes the calls of
 * processes that run on different CPUs: under make -j2 the second compiler's
 * call waits while the first one's is answered, and the callers gather on
 * one CPU. So the listener also has serving threads (um_set_servers: one per
 * CPU by default), each kept on its CPU. They sleep until the main thread,
 * which polls the listener as before, finds a second call waiting while it
 * has not answered the first (calls overlap: servers_activate); then each
 * polls the listener, the kernel wakes them on the caller's CPU
 * (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) and the one there takes the call;
 * after IDLE_MS with no overlap they sleep again and the main thread polls.
 * A serving thread answers what C decides alone: the calls let through,
 * refused, or served under a move mount (emulate.c). Anything that needs
 * ptrace or Python (an interrupt to redirect the call, pinned paths, a
 * process's own filters, the region's guard) it hands to the main thread,
 * which owns ptrace: the notification, still unanswered, goes into a queue
 * and an eventfd wakes the main loop, which decides it anew (serve_req) as
 * if it had received it itself. While serving threads poll, the main
 * thread receives no notification itself.
 *
 * What the serving threads read, Python changes from the main thread: the
 * tables (claims, prefixes, the layer set, traps) and the memories of
 * pin.c. A read-write lock keeps them apart: a serving thread holds it for
 * reading while it decides and answers one call, the main thread takes it
 * for writing in every function that changes them (tables_write_lock), and
 * around a whole rebuild (um_tables_begin/end: a service added or removed).
 * Per-thread state a serving thread writes (pass_notif, creds_*,
 * landlocked) is in fields of its own, not in the bit fields the main
 * thread writes. Counters are per thread (stats, by call) and summed when
 * read. See docs/internals.md, "Serving threads".
 */
#include "internal.h"
#include <pthread.h>
#include <sys/eventfd.h>

#define MAX_SERVERS 16

static int wanted;          /* um_set_servers: how many to start with the listener */
static int servers_active;  /* how many poll the listener now (the main thread does not then) */
static int wake_fd[MAX_SERVERS]; /* eventfds: a serving thread's turn to poll */
#define IDLE_MS 100 /* a serving thread that saw no two calls overlap this long leaves them to the main thread */

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}
static int cpu_of[MAX_SERVERS]; /* the CPU each is kept on, -1: any */
static int pin_servers = 1;
int servers_running;        /* how many run */
int handover_fd = -1;       /* an eventfd: the main thread has notifications to serve */
static pthread_t server[MAX_SERVERS];
static volatile int stopping;
static pthread_rwlock_t tables_rw;
static pthread_once_t tables_rw_once = PTHREAD_ONCE_INIT;
static __thread int write_depth;

/* the queue of notifications handed to the main thread */
static pthread_mutex_t queue_mu = PTHREAD_MUTEX_INITIALIZER;
static struct seccomp_notif *queue;
static size_t queue_head, queue_len, queue_cap;

/* counters of the serving threads that have ended (their own died with them) */
static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;
static struct um_stats *live_stats[MAX_SERVERS];
static uint64_t *live_sc[MAX_SERVERS][2];
static struct um_stats ended_stats;
static uint64_t ended_sc[2][MAX_SC];

void um_set_servers(int n)
{
    pin_servers = n >= 0; /* negative: -n threads, on any CPU */
    n = n < 0 ? -n : n;
    wanted = n > MAX_SERVERS ? MAX_SERVERS : n;
}

/* writers first: the serving threads read almost always, and the main
 * thread's change must not wait for a gap between them */
static void tables_rw_init(void)
{
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&tables_rw, &a);
    pthread_rwlockattr_destroy(&a);
}

void tables_write_lock(void)
{
    if (servers_running && write_depth++ == 0)
        pthread_rwlock_wrlock(&tables_rw);
}

void tables_write_unlock(void)
{
    if (write_depth > 0 && --write_depth == 0)
        pthread_rwlock_unlock(&tables_rw);
}

void um_tables_begin(void) { tables_write_lock(); }
void um_tables_end(void) { tables_write_unlock(); }

static void handover(const struct seccomp_notif *req)
{
    pthread_mutex_lock(&queue_mu);
    if (queue_len == queue_cap) {
        size_t cap = queue_cap ? 2 * queue_cap : 64;
        struct seccomp_notif *q = malloc(cap * sizeof *q);
        if (!q) {
            pthread_mutex_unlock(&queue_mu);
            return; /* the caller waits unanswered: as if RECV had not taken it */
        }
        for (size_t i = 0; i < queue_len; i++)
            q[i] = queue[(queue_head + i) % queue_cap];
        free(queue);
        queue = q;
        queue_cap = cap;
        queue_head = 0;
    }
    queue[(queue_head + queue_len++) % queue_cap] = *req;
    pthread_mutex_unlock(&queue_mu);
    uint64_t one = 1;
    if (write(handover_fd, &one, sizeof one) != sizeof one) {
        /* the counter is full: the main thread wakes anyway */
    }
}

int handover_take(struct seccomp_notif *req)
{
    pthread_mutex_lock(&queue_mu);
    int got = queue_len > 0;
    if (got) {
        *req = queue[queue_head];
        queue_head = (queue_head + 1) % queue_cap;
        queue_len--;
    }
    pthread_mutex_unlock(&queue_mu);
    return got;
}

/* Put a taken notification back first in the queue, and wake the main
 * thread for it again. */
void handover_again(const struct seccomp_notif *req)
{
    pthread_mutex_lock(&queue_mu);
    queue_head = (queue_head + queue_cap - 1) % queue_cap;
    queue[queue_head] = *req;
    queue_len++;
    pthread_mutex_unlock(&queue_mu);
    uint64_t one = 1;
    if (write(handover_fd, &one, sizeof one) != sizeof one) {
        /* full: it wakes anyway */
    }
}

void handover_drain(void)
{
    uint64_t n;
    if (read(handover_fd, &n, sizeof n) < 0) {
        /* nothing counted: the queue says what is there */
    }
}

static void wake(int sig) { (void)sig; }

static void *serve_loop(void *arg)
{
    int i = (int)(intptr_t)arg;
    if (cpu_of[i] >= 0) {
        /* one per CPU, kept there: a caller's notification wakes the one
         * beside it (SYNC_WAKE_UP), which answers with no migration */
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu_of[i], &one);
        pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    }
    sigset_t only;
    sigfillset(&only);
    sigdelset(&only, SIGRTMIN + 6);
    pthread_sigmask(SIG_SETMASK, &only, NULL);
    pthread_mutex_lock(&stats_mu);
    live_stats[i] = &stats;
    live_sc[i][0] = sc_counts(0);
    live_sc[i][1] = sc_counts(1);
    pthread_mutex_unlock(&stats_mu);
    while (!stopping) {
        /* asleep until the main thread sees calls overlap (servers_activate) */
        uint64_t n;
        if (read(wake_fd[i], &n, sizeof n) < 0)
            continue; /* EINTR: stopping? */
        int gone = 0;
        long overlapped = now_ms();
        while (!stopping && now_ms() - overlapped < IDLE_MS) {
            struct seccomp_notif req;
            memset(&req, 0, sizeof req);
            /* poll first: a caller wakes its poller on its own CPU
             * (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP), a thread blocked in
             * RECV anywhere; and look again before taking it, one of the
             * others woken with this one may have */
            struct pollfd p = {.fd = listener_fd, .events = POLLIN};
            int r = poll(&p, 1, IDLE_MS);
            if (r == 0)
                break; /* quiet: the main thread alone again */
            if (r < 0)
                continue;
            if (!(p.revents & POLLIN) && (p.revents & (POLLHUP | POLLERR | POLLNVAL))) {
                gone = 1; /* every process with the filter is gone */
                break;
            }
            if (!(p.revents & POLLIN) || poll(&p, 1, 0) != 1 || !(p.revents & POLLIN))
                continue;
            if (ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_RECV, &req)) {
                if (errno == EINTR || errno == ENOENT)
                    continue; /* stopping, or the caller is gone */
                gone = 1;
                break;
            }
            if (poll(&p, 1, 0) == 1 && (p.revents & POLLIN))
                overlapped = now_ms(); /* another call waits beside this one */
            pthread_rwlock_rdlock(&tables_rw);
            int mine = serve_alone(&req);
            pthread_rwlock_unlock(&tables_rw);
            if (!mine)
                handover(&req);
        }
        if (__atomic_sub_fetch(&servers_active, 1, __ATOMIC_SEQ_CST) == 0) {
            uint64_t one = 1; /* the last one: the main thread polls the listener again */
            if (write(handover_fd, &one, sizeof one) != sizeof one) {
                /* full: it wakes anyway */
            }
        }
        if (gone)
            break;
    }
    pthread_mutex_lock(&stats_mu);
    uint64_t *s = (uint64_t *)&stats, *e = (uint64_t *)&ended_stats;
    for (size_t k = 0; k < sizeof stats / sizeof(uint64_t); k++)
        e[k] += s[k];
    for (int w = 0; w < 2; w++)
        for (int k = 0; k < MAX_SC; k++)
            ended_sc[w][k] += live_sc[i][w][k];
    live_stats[i] = NULL;
    live_sc[i][0] = live_sc[i][1] = NULL;
    pthread_mutex_unlock(&stats_mu);
    return NULL;
}

int servers_polling(void) { return __atomic_load_n(&servers_active, __ATOMIC_SEQ_CST) > 0; }

void servers_activate(void)
{
    if (!servers_running || servers_polling())
        return;
    __atomic_store_n(&servers_active, servers_running, __ATOMIC_SEQ_CST);
    uint64_t one = 1;
    for (int i = 0; i < servers_running; i++)
        if (write(wake_fd[i], &one, sizeof one) != sizeof one) {
            /* cannot be full */
        }
}

void servers_start(void)
{
    if (!wanted || listener_fd < 0 || servers_running)
        return;
    pthread_once(&tables_rw_once, tables_rw_init);
    handover_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (handover_fd < 0)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = wake; /* no SA_RESTART: a blocked RECV returns EINTR */
    sigaction(SIGRTMIN + 6, &sa, NULL);
    stopping = 0;
    cpu_set_t allowed;
    int ncpu = 0;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int c = 0; c < CPU_SETSIZE && ncpu < MAX_SERVERS; c++)
            if (CPU_ISSET(c, &allowed))
                ncpu++;
    for (int i = 0, c = 0; i < MAX_SERVERS; i++) {
        cpu_of[i] = -1;
        if (pin_servers && i < ncpu) {
            while (!CPU_ISSET(c, &allowed))
                c++;
            cpu_of[i] = c++;
        }
    }
    servers_active = 0;
    for (int i = 0; i < wanted; i++) {
        wake_fd[i] = eventfd(0, EFD_CLOEXEC);
        if (wake_fd[i] < 0)
            break;
        if (pthread_create(&server[i], NULL, serve_loop, (void *)(intptr_t)i)) {
            close(wake_fd[i]);
            break;
        }
        servers_running++;
    }
    if (!servers_running) {
        close(handover_fd);
        handover_fd = -1;
    }
}

void servers_stop(void)
{
    if (!servers_running)
        return;
    stopping = 1;
    for (int i = 0; i < servers_running; i++)
        pthread_kill(server[i], SIGRTMIN + 6);
    for (int i = 0; i < servers_running; i++) {
        /* a RECV that began after the signal: signal again until it ends */
        struct timespec t;
        for (;;) {
            clock_gettime(CLOCK_REALTIME, &t);
            t.tv_nsec += 20 * 1000 * 1000;
            if (t.tv_nsec >= 1000000000L) {
                t.tv_sec++;
                t.tv_nsec -= 1000000000L;
            }
            if (pthread_timedjoin_np(server[i], NULL, &t) == 0)
                break;
            pthread_kill(server[i], SIGRTMIN + 6);
        }
    }
    for (int i = 0; i < servers_running; i++)
        close(wake_fd[i]);
    servers_running = 0;
    servers_active = 0;
    close(handover_fd);
    handover_fd = -1;
    /* what they handed over and the main thread did not serve: the callers
     * wait on, their notifications were received; nothing can answer them
     * once the listener is closed, and their processes are gone by then */
    pthread_mutex_lock(&queue_mu);
    queue_len = queue_head = 0;
    pthread_mutex_unlock(&queue_mu);
}

void servers_stats(struct um_stats *sum, uint64_t *trapped, uint64_t *python, int n)
{
    pthread_mutex_lock(&stats_mu);
    const size_t words = sizeof(struct um_stats) / sizeof(uint64_t);
    if (sum) {
        uint64_t *t = (uint64_t *)sum;
        const uint64_t *e = (const uint64_t *)&ended_stats;
        for (size_t k = 0; k < words; k++)
            t[k] += e[k];
        for (int i = 0; i < MAX_SERVERS; i++) {
            if (!live_stats[i])
                continue;
            const uint64_t *s = (const uint64_t *)live_stats[i];
            for (size_t k = 0; k < words; k++)
                t[k] += s[k];
        }
    }
    if (trapped)
        for (int k = 0; k < n && k < MAX_SC; k++) {
            trapped[k] += ended_sc[0][k];
            python[k] += ended_sc[1][k];
            for (int i = 0; i < MAX_SERVERS; i++)
                if (live_sc[i][0]) {
                    trapped[k] += live_sc[i][0][k];
                    python[k] += live_sc[i][1][k];
                }
        }
    pthread_mutex_unlock(&stats_mu);
}
