/* thread.c - per-thread state and the outstanding stop */
#include "internal.h"

long pid_max = 4194304;

/* One struct um_thread per possible tid: (pid_max + 1) records mapped
 * MAP_NORESERVE, so only the pages of tids in use are ever backed (tids are
 * handed out in order: a page holds consecutive ones). */
static struct um_thread *threads;
static pid_t max_seen;

pid_t first_pid;
int first_status = -1;
int ssi_state; /* 0 unknown, 1 works, -1 absent */

/* the one outstanding stop handed to Python, and its thread */
struct um_sci cur_sci;
pid_t cur_tid;

int um_core_version(void) { return UM_CORE_VERSION; }
const char *um_sysnums_digest(void) { return UM_SYSNUMS_DIGEST; }

int thread_table_init(void)
{
    if (threads)
        return 0;
    FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
    if (f) {
        if (fscanf(f, "%ld", &pid_max) != 1)
            pid_max = 4194304;
        fclose(f);
    }
    void *m = mmap(NULL, ((size_t)pid_max + 1) * sizeof *threads, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -ENOMEM;
    threads = m;
    return 0;
}

struct um_thread *thr(pid_t tid)
{
    static struct um_thread scratch;
    if (tid <= 0 || tid > pid_max || !threads) {
        memset(&scratch, 0, sizeof scratch);
        return &scratch;
    }
    if (tid > max_seen)
        max_seen = tid;
    return &threads[tid];
}

/* The text after "FIELD:" in /proc/TID/status into buf: 0, or -1. */
static int status_text(pid_t tid, const char *field, char *buf, size_t size)
{
    char path[64], line[128];
    size_t n = strlen(field);
    int found = -1;
    snprintf(path, sizeof path, "/proc/%d/status", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            snprintf(buf, size, "%s", line + n + 1);
            found = 0;
            break;
        }
    fclose(f);
    return found;
}

/* A signal mask of /proc/TID/status ("SigPnd", "SigBlk"), 0 if unknown. */
uint64_t proc_status_mask(pid_t tid, const char *field)
{
    char text[64];
    return status_text(tid, field, text, sizeof text) ? 0 : strtoull(text, NULL, 16);
}

/* Has process tgid a thread that is not a zombie (one that may still report
 * an event)? */
int process_alive(pid_t tgid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", tgid);
    DIR *dir = opendir(path);
    if (!dir)
        return 0;
    int alive = 0;
    struct dirent *de;
    while (!alive && (de = readdir(dir))) {
        int t = atoi(de->d_name);
        if (t <= 0)
            continue;
        char stat[512];
        snprintf(path, sizeof path, "/proc/%d/task/%d/stat", tgid, t);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(stat, 1, sizeof stat - 1, f);
        fclose(f);
        stat[n] = 0;
        char *end = strrchr(stat, ')');
        alive = end && end[1] == ' ' && end[2] != 'Z' && end[2] != 'X';
    }
    closedir(dir);
    return alive;
}

void thread_forget(pid_t tid)
{
    struct um_thread *t = thr(tid);
    if (t->wait_held)
        hold_wait_drop(tid);
    cpend_drop(tid);
    free(t->note);
    own_filters_drop(t);
    mm_leave(tid);
    memset(t, 0, sizeof *t);
}

int status_field(pid_t tid, const char *name, int absent)
{
    char text[64];
    int value;
    return status_text(tid, name, text, sizeof text) || sscanf(text, "%d", &value) != 1 ? absent : value;
}

pid_t tgid_of(pid_t tid) { return status_field(tid, "Tgid", tid); }

void each_thread(pid_t tgid, void (*fn)(pid_t tid, void *arg), void *arg)
{
    char task[64];
    snprintf(task, sizeof task, "/proc/%d/task", tgid);
    DIR *dir = opendir(task);
    if (!dir)
        return;
    struct dirent *de;
    while ((de = readdir(dir))) {
        int t = atoi(de->d_name);
        if (t > 0)
            fn(t, arg);
    }
    closedir(dir);
}

/* Remember that the call tid waits in was decided for Python, with what C
 * resolved for it. Without memory for the note the restart is decided again. */
void note_redirect(pid_t tid, int abi, int sc, uint64_t nr, const uint64_t *args, const char (*path)[UM_PATH_BUF],
                   const int *path_len, const int *path_kind, const struct um_decide_slot *slots)
{
    struct um_thread *t = thr(tid);
    if (!t->note && !(t->note = malloc(sizeof *t->note)))
        return;
    struct um_note *n = t->note;
    n->abi = abi;
    n->sc = sc;
    n->nr = nr;
    memcpy(n->args, args, sizeof n->args);
    for (int s = 0; s < PATH_SLOTS; s++) {
        n->path_len[s] = path_len[s];
        n->path_kind[s] = path_kind[s];
        if (path_len[s] >= 0)
            memcpy(n->path[s], path[s], (size_t)path_len[s] + 1);
    }
    raw_from_slots(n->raw, n->raw_len, slots);
}

/* The note of tid if it is for this call, else NULL; either way tid has no
 * note any more (a signal handler may have run first: then the entry stop
 * is another call, decided on its own). */
struct um_note *note_take(pid_t tid, int abi, uint64_t nr, const uint64_t *args)
{
    struct um_thread *t = thr(tid);
    struct um_note *n = t->note;
    t->note = NULL;
    if (n && (n->abi != abi || n->nr != nr || memcmp(n->args, args, sizeof n->args) != 0)) {
        free(n);
        n = NULL;
    }
    return n;
}

/* The call of thread tid decided at a stop (its number as the kernel sees
 * it, its arguments as they run) is let through at its coming seccomp check
 * without a second look: the kernel checks it after an entry stop, and again
 * after a seccomp stop that changed its number. */
void pass_set(pid_t tid, uint64_t nr, const uint64_t *args)
{
    struct um_thread *t = thr(tid);
    t->pass_notif = 1;
    t->pass_nr = nr;
    memcpy(t->pass_args, args, sizeof t->pass_args);
}

/* Is this notification or seccomp stop of tid (nr, args) the call pass_set
 * named? The pass is used up either way, and by the call's exit stop: a
 * signal may end the call before its notification is received, and what
 * comes then (the call restarted with the arguments its exit stop put back,
 * or a call of the signal handler) must be looked at again. A pass that was
 * not used up let stress-ng's unlink and open(O_CREAT), restarted after a
 * SIGALRM with their own paths, run on the real tree. */
int pass_taken(pid_t tid, uint64_t nr, const uint64_t *args)
{
    struct um_thread *t = thr(tid);
    int same = t->pass_notif && t->pass_nr == nr && memcmp(t->pass_args, args, sizeof t->pass_args) == 0;
    t->pass_notif = 0;
    return same;
}

pid_t thread_max_seen(void) { return max_seen; }

int um_set_vcwd(int tid, int on)
{
    if (tid <= 0 || tid > pid_max)
        return -EINVAL;
    thr(tid)->vcwd = thr(tid)->faithful = 0;
    thr(tid)->vroot = (on & UM_VROOT) != 0;
    if (on & UM_VCWD)
        thr(tid)->vcwd = 1;
    if ((on & UM_VCWD) && (on & UM_VCWD_FAITHFUL))
        thr(tid)->faithful = 1;
    return 0;
}
