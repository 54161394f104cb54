/* servers.c - serving notifications on threads beside the main one
 *
 * The main thread owns ptrace and serves the stops; notifications need no
 * ptrace, and a thread that waits for nothing else can block in RECV, where
 * the main thread would poll the listener with its other fds first (a
 * system call more for each notification). So the lead, a serving thread on
 * no CPU of its own, takes every notification. It follows the callers from
 * CPU to CPU (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP wakes it on the caller's),
 * which serializes processes that run on different CPUs: under make -j2 the
 * second compiler's call waits while the first one's is answered, and the
 * callers gather on one CPU. So there are also threads kept on a CPU each
 * (um_set_servers: one per CPU by default). They sleep until the lead finds
 * a second call waiting while it has not answered the first (calls overlap:
 * servers_activate); then the lead sleeps and each of them waits in RECV,
 * the kernel wakes them on the caller's CPU and the one there takes the
 * call; once IDLE_MS have passed in which no two of them served at once,
 * each sleeps again after its next call, and the last one wakes the lead. A serving thread answers what C
 * decides alone: the calls let through, refused, or served under a move
 * mount (emulate.c). Anything that needs ptrace or Python (an interrupt to
 * redirect the call, pinned paths, a process's own filters, the region's
 * guard) it hands to the main thread, which owns ptrace: the notification,
 * still unanswered, goes into a queue and an eventfd wakes the main loop,
 * which decides it anew (serve_req) as if it had received it itself. While
 * serving threads run, the main thread receives no notification itself.
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

#define MAX_SERVERS 17 /* the lead and 16 kept on a CPU */

static int wanted;          /* um_set_servers: how many to start with the listener */
static int servers_active;  /* how many of those kept on a CPU serve now (the lead does not then) */
static int wake_fd[MAX_SERVERS]; /* eventfds: a serving thread's turn to serve */
static int lead_alive;      /* the lead serves, or hands to those kept on a CPU: the main thread polls no listener */
#define IDLE_MS 100 /* serving threads that saw no two calls served at once this long leave them to the lead */

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

/* n: 0, none (the main thread serves); 1, the lead alone; n >= 2, the lead
 * and n threads kept on a CPU each while calls overlap; -n, those n on any CPU */
void um_set_servers(int n)
{
    pin_servers = n >= 0;
    n = n < 0 ? -n : n;
    wanted = n > MAX_SERVERS - 1 ? MAX_SERVERS - 1 : n;
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

static void stats_enter(int i)
{
    pthread_mutex_lock(&stats_mu);
    live_stats[i] = &stats;
    live_sc[i][0] = sc_counts(0);
    live_sc[i][1] = sc_counts(1);
    pthread_mutex_unlock(&stats_mu);
}

static void stats_leave(int i)
{
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
}

static void wake_main(void)
{
    uint64_t one = 1;
    if (write(handover_fd, &one, sizeof one) != sizeof one) {
        /* full: it wakes anyway */
    }
}

/* Take the next notification into *req: 1; 0 when RECV was interrupted (a
 * signal: stopping) or the caller is gone; -1 when every
 * process with the filter is gone. RECV, not poll: a thread woken in RECV
 * that finds the call taken by another sleeps again in the kernel, where a
 * poller would return, look, and contend for the listener's lock with the
 * thread that takes it. */
static int take(struct seccomp_notif *req)
{
    memset(req, 0, sizeof *req);
    if (ioctl(listener_fd, SECCOMP_IOCTL_NOTIF_RECV, req) == 0)
        return 1;
    if (errno == EINTR)
        return 0;
    struct pollfd p = {.fd = listener_fd, .events = POLLIN};
    if (errno == ENOENT && !(poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLNVAL))))
        return 0; /* the caller is gone */
    return -1;
}

static void answer(const struct seccomp_notif *req)
{
    pthread_rwlock_rdlock(&tables_rw);
    int mine = serve_alone(req);
    pthread_rwlock_unlock(&tables_rw);
    if (!mine)
        handover(req);
}

static void servers_activate(void);

/* The lead: every notification while calls do not overlap. It looks for a
 * second call waiting (a process waiting for an answer makes no other call,
 * so two waiting calls are two callers) only when the caller is not the
 * last one: one thread's calls come one at a time. */
static void lead_loop(void)
{
    pid_t last_caller = 0;
    while (!stopping) {
        if (__atomic_load_n(&servers_active, __ATOMIC_SEQ_CST) > 0) {
            uint64_t n; /* those kept on a CPU serve: asleep until the last one is idle */
            if (read(wake_fd[0], &n, sizeof n) < 0) {
                /* EINTR: stopping? */
            }
            continue;
        }
        struct seccomp_notif req;
        int r = take(&req);
        if (r < 0)
            break;
        if (r == 0)
            continue;
        struct pollfd q = {.fd = listener_fd, .events = POLLIN};
        int overlap = servers_running > 1 && (pid_t)req.pid != last_caller && poll(&q, 1, 0) == 1 &&
                      (q.revents & POLLIN);
        last_caller = (pid_t)req.pid;
        answer(&req);
        if (overlap)
            servers_activate();
    }
}

static long last_overlap; /* now_ms() when two serving threads last served at once */
static int in_flight;     /* how many of those kept on a CPU serve a call now */

/* One kept on a CPU: asleep until calls overlap, then every notification
 * the kernel gives it until, after a call it served, IDLE_MS have passed in
 * which no two of them served at once. No timer ends a RECV that waits: a
 * signal would also end an ADDFD in progress (emulate.c), which the kernel
 * has then answered for the caller with 0 and no fd. A thread that waits
 * while the others served is woken by every call and finds it taken until
 * they have gone to sleep; then the calls are its, and it sees the idle
 * time after the next one. Until the last one sleeps the lead does not
 * serve; a view that makes no call needs no serving. */
static void cpu_loop(int i)
{
    int gone = 0;
    while (!stopping && !gone) {
        uint64_t n;
        if (read(wake_fd[i], &n, sizeof n) < 0)
            continue; /* EINTR: stopping? */
        while (!stopping && now_ms() - __atomic_load_n(&last_overlap, __ATOMIC_RELAXED) < IDLE_MS) {
            struct seccomp_notif req;
            int r = take(&req);
            if (r < 0) {
                gone = 1;
                break;
            }
            if (r == 0)
                continue;
            if (__atomic_add_fetch(&in_flight, 1, __ATOMIC_SEQ_CST) > 1)
                __atomic_store_n(&last_overlap, now_ms(), __ATOMIC_RELAXED); /* another one serves beside it */
            answer(&req);
            __atomic_sub_fetch(&in_flight, 1, __ATOMIC_SEQ_CST);
        }
        if (__atomic_sub_fetch(&servers_active, 1, __ATOMIC_SEQ_CST) == 0) {
            uint64_t one = 1; /* the last one: the lead serves again */
            if (write(wake_fd[0], &one, sizeof one) != sizeof one) {
                /* cannot be full */
            }
        }
    }
}

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
    stats_enter(i);
    if (i == 0) {
        lead_loop();
        /* every process with the filter is gone, or stopping: the main
         * thread polls the listener again, and closes it at its hang-up */
        __atomic_store_n(&lead_alive, 0, __ATOMIC_SEQ_CST);
        wake_main();
    } else {
        cpu_loop(i);
    }
    stats_leave(i);
    return NULL;
}

int servers_polling(void) { return __atomic_load_n(&lead_alive, __ATOMIC_SEQ_CST); }

static void servers_activate(void)
{
    if (servers_running < 2 || __atomic_load_n(&servers_active, __ATOMIC_SEQ_CST))
        return;
    __atomic_store_n(&last_overlap, now_ms(), __ATOMIC_RELAXED);
    __atomic_store_n(&servers_active, servers_running - 1, __ATOMIC_SEQ_CST);
    uint64_t one = 1;
    for (int i = 1; i < servers_running; i++)
        if (write(wake_fd[i], &one, sizeof one) != sizeof one) {
            /* cannot be full */
        }
}

void servers_start(void)
{
    /* where an inner tracer's calls are all the filter notifies (a view
     * with no path module), the main thread serves them: a serving thread
     * would hand it the data requests (ptrace is its) at a wake-up's cost */
    if (!wanted || listener_fd < 0 || servers_running || !any_path_notif())
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
    /* the lead (0) on any CPU; the others, if two or more, one per CPU */
    int threads = wanted >= 2 ? 1 + wanted : 1;
    for (int i = 0, c = 0; i < MAX_SERVERS; i++) {
        cpu_of[i] = -1;
        if (pin_servers && i > 0 && i - 1 < ncpu) {
            while (!CPU_ISSET(c, &allowed))
                c++;
            cpu_of[i] = c++;
        }
    }
    servers_active = 0;
    lead_alive = 1;
    for (int i = 0; i < threads; i++) {
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
        lead_alive = 0;
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
    lead_alive = 0;
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
