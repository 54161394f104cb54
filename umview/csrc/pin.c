/* pin.c - path strings the kernel reads from memory the process cannot change
 *
 * Between the monitor reading a path argument and the kernel reading it
 * again, another thread of execution that shares the caller's memory (a
 * thread, a CLONE_VM process, the parent of a vfork child) can change it: a
 * call the view let through for /dev/null then opens a real file the view
 * hides or keeps copy-on-write (TOCTOU). So can it change a path the monitor
 * rewrote, if it lies in the caller's writable memory (below the stack
 * pointer).
 *
 * Each memory (mm) is followed from the tracer's events: a fork makes a new
 * one, a clone with CLONE_VM (threads, vfork, posix_spawn) shares it, an exec
 * replaces it, an exit leaves it. While an mm has more than one user, a call
 * that C lets through (UM_DECIDE_NATIVE), that writes, and whose paths C
 * read is "pinned": the strings C decided on are copied into the region, a
 * read-only mapping the monitor adds to that mm (by an injected mmap, the
 * first time one is needed) and writes through /proc/PID/mem, and the path
 * registers point there until the call's exit stop puts them back. A path
 * relative to a dirfd or the cwd is pinned as the absolute path C resolved
 * (another thread could change the fd table or the cwd meanwhile). Python's
 * rewritten paths (Call.set_string) go to the region too (um_pin_string).
 *
 * Each thread of the mm has its own slot of the region (REGION_PAGES pages,
 * one string per page, so that no string can be cut short by a page the
 * process drops). Every filter stops the calls that could change the region
 * (mmap with MAP_FIXED, mprotect, pkey_mprotect, munmap, mremap, madvise,
 * shmat with SHM_REMAP at an address below 4 GiB: the region lies there, so
 * other calls never stop); region_refusal fails those that would touch it
 * with EPERM, as the kernel fails them on a sealed mapping (mseal(2)).
 * Writes to the process's memory through /proc/PID/mem (which ignore page
 * protections) are the guard module's to refuse; an inner tracer's POKE into
 * the region fails with EIO (um_ptrace). See docs/internals.md, "Pinned
 * paths".
 */
#include "internal.h"

#define PAGE 4096
#define REGION_PAGES 4
#define REGION_SLOT (REGION_PAGES * PAGE)
#define REGION_SLOTS 1024
#define REGION_SIZE ((uint64_t)REGION_SLOTS * REGION_SLOT) /* 16 MiB, reserved, never written */

struct um_mm {
    int users;     /* threads using it; 0: a free record */
    int unknown;   /* its users are not known (um_attach of a process with threads): always shared */
    uint64_t region;
    uint32_t used[REGION_SLOTS / 32];
    int next_free;
    int mem;       /* its /proc/PID/mem, open (fd + 1; 0: not yet): it stands for this mm
                    * whichever of its threads ends or execs, while one user is left */
};

static struct um_mm *mms; /* [0] unused: mm 0 is "not known" */
static int nmms, free_mm;
static unsigned mm_generation;

static int mm_alloc(void)
{
    int id = free_mm;
    if (id) {
        free_mm = mms[id].next_free;
    } else {
        if (nmms == 0)
            nmms = 1;
        struct um_mm *n = realloc(mms, (size_t)(nmms + 1) * sizeof *n);
        if (!n)
            return 0;
        mms = n;
        id = nmms++;
    }
    memset(&mms[id], 0, sizeof mms[id]);
    mms[id].users = 1;
    return id;
}

static struct um_mm *mm_of(pid_t tid)
{
    int id = thr(tid)->mm;
    return id > 0 && id < nmms && mms[id].users > 0 ? &mms[id] : NULL;
}

static void mm_leave_unlocked(pid_t tid)
{
    struct um_thread *t = thr(tid);
    struct um_mm *m = mm_of(tid);
    if (m) {
        if (t->slot > 0)
            m->used[(t->slot - 1) / 32] &= ~(1u << ((t->slot - 1) % 32));
        if (--m->users == 0) {
            if (m->mem)
                close(m->mem - 1);
            m->mem = 0;
            m->next_free = free_mm;
            free_mm = t->mm;
        }
    }
    t->mm = t->slot = 0;
    t->mm_gen = ++mm_generation;
}

void mm_leave(pid_t tid)
{
    tables_write_lock();
    mm_leave_unlocked(tid);
    tables_write_unlock();
}

static void mm_new_unlocked(pid_t tid)
{
    mm_leave(tid);
    thr(tid)->mm = mm_alloc();
    thr(tid)->mm_gen = ++mm_generation;
}

void mm_new(pid_t tid)
{
    tables_write_lock();
    mm_new_unlocked(tid);
    tables_write_unlock();
}

/* The child of a fork or clone event: it shares its parent's memory or has
 * a copy of it (where the region, if any, is mapped at the same address). */
static void mm_child_unlocked(pid_t child, pid_t parent, int shares)
{
    mm_leave(child);
    struct um_mm *pm = mm_of(parent);
    if (!pm)
        return; /* not known: always taken as shared */
    if (shares) {
        pm->users++;
        thr(child)->mm = thr(parent)->mm;
        thr(child)->mm_gen = thr(parent)->mm_gen;
        return;
    }
    uint64_t region = pm->region;
    int id = mm_alloc();
    thr(child)->mm = id;
    thr(child)->mm_gen = ++mm_generation;
    if (id)
        mms[id].region = region;
}

void mm_child(pid_t child, pid_t parent, int shares)
{
    tables_write_lock();
    mm_child_unlocked(child, parent, shares);
    tables_write_unlock();
}

/* Does the new child of tid (at its fork, vfork or clone event) share its
 * memory? From the call that made it: fork no, vfork yes, clone if it has
 * CLONE_VM; anything else (not known): yes. */
int mm_event_shares(pid_t tid)
{
    struct user_regs_struct r;
    if (get_regs(tid, &r))
        return 1;
    long nr = (long)r.orig_rax;
    int i386 = r.cs == 0x23;
    if (!i386)
        nr &= ~X32_BIT;
    if (nr == (i386 ? 2 : 57)) /* fork */
        return 0;
    if (nr == (i386 ? UM_NR_I386_clone : UM_NR_X86_64_clone))
        return ((i386 ? (uint32_t)r.rbx : (uint64_t)r.rdi) & 0x100 /* CLONE_VM */) != 0;
    return 1;
}

/* Attached (um_attach): a process with one thread has an mm of its own; with
 * more, which share what is not known. */
static void mm_attached_unlocked(pid_t tid, int threads)
{
    mm_new(tid);
    if (threads != 1 && mm_of(tid))
        mm_of(tid)->unknown = 1;
}

void mm_attached(pid_t tid, int threads)
{
    tables_write_lock();
    mm_attached_unlocked(tid, threads);
    tables_write_unlock();
}

int um_mm_shared(int tid) { return tid > 0 && mm_shared(tid); }

int mm_shared(pid_t tid)
{
    struct um_mm *m = mm_of(tid);
    return !m || m->unknown || m->users > 1;
}

/* ------------------------------------------------------------------ */
/* the region                                                          */
/* ------------------------------------------------------------------ */

static int overlaps(const struct um_mm *m, uint64_t addr, uint64_t len)
{
    if (!m || !m->region)
        return 0;
    uint64_t end = addr + ((len + PAGE - 1) & ~(uint64_t)(PAGE - 1));
    if (end < addr)
        end = UINT64_MAX; /* wraps: up to the top */
    if (len == 0)
        end = addr + 1;
    return addr < m->region + REGION_SIZE && end > m->region;
}

#define MAP_FIXED_ 0x10
#define MREMAP_FIXED_ 2
#define SHM_REMAP_ 040000
#define IPC_SHMAT_ 21

static int mmap_touches(const struct um_mm *m, uint64_t addr, uint64_t len, uint64_t flags)
{
    return (flags & MAP_FIXED_) && overlaps(m, addr, len);
}

/* The calls the filter stops at a low address: per ABI, the number, what
 * the call does to memory (how region_refusal reads its arguments), and up
 * to two address arguments (-1: none; both -1: every call of that number). */
enum { RG_MMAP, RG_OLD_MMAP, RG_RANGE, RG_MREMAP, RG_SHMAT, RG_IPC };
static const struct { int abi; long nr; int kind; signed char arg[2]; } guarded[] = {
    {UM_ABI_X86_64, UM_NR_X86_64_mmap, RG_MMAP, {0, -1}},
    {UM_ABI_X86_64, UM_NR_X86_64_mprotect, RG_RANGE, {0, -1}},
    {UM_ABI_X86_64, UM_NR_X86_64_munmap, RG_RANGE, {0, -1}},
    {UM_ABI_X86_64, UM_NR_X86_64_mremap, RG_MREMAP, {0, 4}},
    {UM_ABI_X86_64, UM_NR_X86_64_madvise, RG_RANGE, {0, -1}},
    {UM_ABI_X86_64, UM_NR_X86_64_shmat, RG_SHMAT, {1, -1}},
    {UM_ABI_X86_64, UM_NR_X86_64_pkey_mprotect, RG_RANGE, {0, -1}},
    {UM_ABI_I386, UM_NR_I386_mmap, RG_OLD_MMAP, {-1, -1}}, /* old_mmap: its arguments in memory */
    {UM_ABI_I386, UM_NR_I386_ipc, RG_IPC, {-1, -1}},
    {UM_ABI_I386, UM_NR_I386_mmap2, RG_MMAP, {0, -1}},
    {UM_ABI_I386, UM_NR_I386_mprotect, RG_RANGE, {0, -1}},
    {UM_ABI_I386, UM_NR_I386_munmap, RG_RANGE, {0, -1}},
    {UM_ABI_I386, UM_NR_I386_mremap, RG_MREMAP, {0, 4}},
    {UM_ABI_I386, UM_NR_I386_madvise, RG_RANGE, {0, -1}},
    {UM_ABI_I386, UM_NR_I386_shmat, RG_SHMAT, {1, -1}},
    {UM_ABI_I386, UM_NR_I386_pkey_mprotect, RG_RANGE, {0, -1}},
};
#define NGUARDED (int)(sizeof guarded / sizeof guarded[0])

/* The row of guarded for this call (x32: as x86_64), or -1. */
static int guarded_row(int abi, uint64_t nr)
{
    if (abi == UM_ABI_X32)
        nr &= ~(uint64_t)X32_BIT;
    int sabi = abi == UM_ABI_X32 ? UM_ABI_X86_64 : abi;
    for (int i = 0; i < NGUARDED; i++)
        if (guarded[i].abi == sabi && guarded[i].nr == (long)nr)
            return i;
    return -1;
}

/* Would this call (one of those the filter stops at a low address) change
 * the caller's region? -EPERM if so, else 0. */
int region_refusal(pid_t tid, int abi, uint64_t nr, const uint64_t *a)
{
    struct um_mm *m = mm_of(tid);
    if (!m || !m->region || abi < 0 || abi >= UM_NABI)
        return 0;
    int row = guarded_row(abi, nr);
    if (row < 0)
        return 0;
    uint64_t v[6]; /* an i386 call's arguments are 32 bits */
    for (int i = 0; i < 6; i++)
        v[i] = abi == UM_ABI_I386 ? (uint32_t)a[i] : a[i];
    int touches = 0;
    switch (guarded[row].kind) {
    case RG_OLD_MMAP: {
        uint32_t s[6];
        touches = um_read_mem(tid, v[0], s, sizeof s) != (int)sizeof s || mmap_touches(m, s[0], s[1], s[3]);
        break;
    }
    case RG_MMAP:
        touches = mmap_touches(m, v[0], v[1], v[3]);
        break;
    case RG_RANGE:
        touches = overlaps(m, v[0], v[1]);
        break;
    case RG_MREMAP:
        touches = overlaps(m, v[0], v[1]) || ((v[3] & MREMAP_FIXED_) && overlaps(m, v[4], v[2]));
        break;
    case RG_SHMAT:
        touches = (v[2] & SHM_REMAP_) && v[1] < m->region + REGION_SIZE;
        break;
    case RG_IPC:
        touches = (v[0] & 0xffff) == IPC_SHMAT_ && (v[2] & SHM_REMAP_) && v[4] < m->region + REGION_SIZE;
        break;
    }
    return touches ? -EPERM : 0;
}

/* Does some filter of the monitor stop this call for the region? */
int region_guarded(int abi, uint64_t nr, const uint64_t *args)
{
    int i = guarded_row(abi, nr);
    if (i < 0)
        return 0;
    if (guarded[i].arg[0] < 0)
        return 1;
    for (int k = 0; k < 2; k++) {
        int g = guarded[i].arg[k];
        uint64_t v = g < 0 ? 0 : args[g];
        if (abi == UM_ABI_I386)
            v &= 0xffffffff;
        if (g >= 0 && v != 0 && v >> 32 == 0)
            return 1;
    }
    return 0;
}

/* Emit the filter's part for the region (the accumulator holds the number,
 * with its bias, and holds it again after): ret for a guarded call with a
 * nonzero address below 4 GiB. */
void emit_region_guard(struct bpf_buf *b, int abi, uint32_t bias, uint32_t ret)
{
    const uint32_t nr_off = offsetof(struct seccomp_data, nr);
    for (int i = 0; i < NGUARDED; i++) {
        if (guarded[i].abi != (abi == UM_ABI_X32 ? UM_ABI_X86_64 : abi))
            continue;
        uint32_t nr = (uint32_t)guarded[i].nr | bias;
        if (guarded[i].arg[0] < 0) {
            emit_insn(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1));
            emit_insn(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, ret));
            continue;
        }
        for (int k = 0; k < 2; k++) {
            int g = guarded[i].arg[k];
            if (g < 0)
                continue;
            uint32_t lo = (uint32_t)(offsetof(struct seccomp_data, args) + 8 * (uint32_t)g);
            if (abi == UM_ABI_I386) {
                /* nr? lo != 0? ret; reload */
                emit_insn(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 4));
                emit_insn(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, lo));
                emit_insn(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0));
                emit_insn(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, ret));
                emit_insn(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, nr_off));
            } else {
                /* nr? hi == 0? lo != 0? ret; reload (the high word follows the low one) */
                emit_insn(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 6));
                emit_insn(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, lo + 4));
                emit_insn(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3));
                emit_insn(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, lo));
                emit_insn(b, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0));
                emit_insn(b, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, ret));
                emit_insn(b, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, nr_off));
            }
        }
    }
}

/* Map the region into tid's memory (tid at a stop the monitor holds:
 * cur_tid), by an injected mmap. 0 or -errno. */
static int region_map(pid_t tid, int abi, struct um_mm *m)
{
    const long MAP_PRIVATE_ = 2, MAP_ANON_ = 0x20, MAP_NORESERVE_ = 0x4000, MAP_32BIT_ = 0x40;
    long flags = MAP_PRIVATE_ | MAP_ANON_ | MAP_NORESERVE_;
    long nr;
    if (abi == UM_ABI_I386) {
        nr = 192; /* mmap2: below 4 GiB from a 32-bit call */
    } else {
        nr = 9 | (abi == UM_ABI_X32 ? X32_BIT : 0);
        if (abi == UM_ABI_X86_64)
            flags |= MAP_32BIT_; /* below 2 GiB, where the filter looks */
    }
    uint64_t args[6] = {0, REGION_SIZE, PROT_READ, (uint64_t)flags, (uint64_t)-1, 0};
    if (abi == UM_ABI_I386)
        args[4] = 0xffffffff;
    int64_t res = 0;
    int e = um_inject(tid, abi, nr, args, &res);
    if (e)
        return e;
    if (res < 0 && res > -4096)
        return (int)res;
    if ((uint64_t)res >> 32 || (uint64_t)res + REGION_SIZE > (1ULL << 32))
        return -ENOMEM; /* not where the filter guards it: left unused */
    m->region = (uint64_t)res;
    stats.regions++;
    return 0;
}

/* The address of page `page` of tid's slot in its region, the region mapped
 * and the slot taken if need be; 0 and *err on failure. */
static uint64_t slot_page(pid_t tid, int abi, int page, int *err)
{
    struct um_thread *t = thr(tid);
    if (!mm_of(tid))
        mm_new(tid); /* not known: an mm of its own, taken as shared */
    struct um_mm *m = mm_of(tid);
    if (!m) {
        *err = -ENOMEM;
        return 0;
    }
    if (!m->region && (*err = region_map(tid, abi, m)) != 0)
        return 0;
    if (!t->slot) {
        for (int i = 0; i < REGION_SLOTS && !t->slot; i++)
            if (!(m->used[i / 32] & (1u << (i % 32)))) {
                m->used[i / 32] |= 1u << (i % 32);
                t->slot = i + 1;
            }
        if (!t->slot) {
            *err = -EAGAIN; /* more threads than slots */
            return 0;
        }
    }
    return m->region + (uint64_t)(t->slot - 1) * REGION_SLOT + (uint64_t)page * PAGE;
}

/* Write into tid's memory past page protections (the region is read-only
 * for the process): /proc/PID/mem, opened once per mm. */
static int write_pinned(pid_t tid, uint64_t addr, const void *data, size_t len)
{
    struct um_mm *m = mm_of(tid);
    if (!m)
        return -ENOMEM;
    if (!m->mem) {
        char p[64];
        snprintf(p, sizeof p, "/proc/%d/mem", tid);
        int fd = open(p, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        m->mem = fd + 1;
    }
    ssize_t n = pwrite(m->mem - 1, data, len, (off_t)addr);
    return n == (ssize_t)len ? 0 : n < 0 ? -(errno == EIO ? EFAULT : errno) : -EIO;
}

int64_t um_pin_string(int tid, int abi, int page, const char *data, int len, uint64_t at)
{
    if (tid <= 0 || tid != cur_tid || abi < 0 || abi >= UM_NABI || page < 0 || page >= REGION_PAGES || len < 0 ||
        len >= PAGE)
        return -EINVAL;
    char buf[PAGE];
    memcpy(buf, data, (size_t)len);
    buf[len] = 0;
    data = buf;
    if (!mm_shared(tid) && !(at && changeable(tid, at, data, (size_t)len + 1)))
        return 0; /* no other thread of execution, and at (the string, or where the stack would take
                   * it) is the process's own memory: it will do */
    int err = 0;
    uint64_t slot = slot_page(tid, abi, page, &err);
    if (!slot)
        return err;
    err = write_pinned(tid, slot, buf, (size_t)len + 1);
    return err ? err : (int64_t)slot;
}

int um_changeable(int tid, uint64_t addr, const char *data, int len)
{
    char buf[PAGE];
    if (tid <= 0 || len < 0 || len >= PAGE)
        return 1;
    memcpy(buf, data, (size_t)len);
    buf[len] = 0;
    return changeable(tid, addr, buf, (size_t)len + 1);
}

int region_poke_refused(pid_t tid, uint64_t addr, uint64_t len)
{
    return overlaps(mm_of(tid), addr, len);
}

/* ------------------------------------------------------------------ */
/* pinning a call C lets through                                       */
/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* memory another process can change                                  */
/* ------------------------------------------------------------------ */

/* A process that shares its memory with no other thread still does not
 * own every page of it: a file mapped MAP_SHARED (or shared anonymous
 * memory, a memfd, System V shm) is written by any process that writes the
 * file, and a private mapping of a file shows the file's bytes until the
 * process writes the page. A path there can be flipped after the view
 * looked at it. Which mapping holds an address: PROCMAP_QUERY on
 * /proc/PID/maps (Linux 6.11; one ioctl, no text to parse). */
struct um_procmap_query {
    uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
    uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
    uint64_t vma_name_addr, build_id_addr;
};
#define UM_PROCMAP_QUERY _IOWR('f', 17, struct um_procmap_query)
#define UM_PROCMAP_VMA_SHARED 0x08

static int procmap_absent; /* ENOTTY seen: a kernel without PROCMAP_QUERY */

/* /proc/TID/maps and /proc/TID/mem of the threads this monitor thread looked
 * at last, by tid (each serving thread keeps its own: no lock). An fd stands
 * for the memory it was opened on: after an exec, or for a tid used again,
 * its calls fail (ESRCH) and it is opened anew. */
#define PROC_CACHE 16
static __thread struct { pid_t tid; unsigned gen; int maps, mem; } proc_fds[PROC_CACHE];

static int proc_fd(pid_t tid, int mem, int fresh)
{
    __typeof__(proc_fds[0]) *e = &proc_fds[(unsigned)tid % PROC_CACHE];
    unsigned gen = thr(tid)->mm_gen; /* a vfork child's fd, opened before its exec, names its parent's memory */
    if (e->tid != tid || e->gen != gen || fresh) {
        if (e->maps)
            close(e->maps - 1);
        if (e->mem)
            close(e->mem - 1);
        e->maps = e->mem = 0;
        e->tid = tid;
        e->gen = gen;
    }
    int *slot = mem ? &e->mem : &e->maps;
    if (!*slot) {
        char p[64];
        snprintf(p, sizeof p, "/proc/%d/%s", tid, mem ? "mem" : "maps");
        int fd = open(p, (mem ? O_RDWR : O_RDONLY) | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        *slot = fd + 1;
    }
    return *slot - 1;
}

/* Where the bytes [addr, addr + len) of tid lie: MEM_OWN (anonymous private
 * memory: only the process, stopped, writes it), MEM_FILE_PRIVATE (a
 * private mapping of a file: its unwritten pages follow the file) or
 * MEM_SHARED (shared, not mapped, or not known). */
enum { MEM_OWN, MEM_FILE_PRIVATE, MEM_SHARED };

static int memory_kind(pid_t tid, uint64_t addr, size_t len)
{
    if (procmap_absent)
        return MEM_OWN; /* not known: as before this check (docs/security.md) */
    int kind = MEM_OWN;
    uint64_t end = addr + len;
    for (int tries = 0; addr < end;) {
        int fd = proc_fd(tid, 0, tries > 0);
        if (fd < 0)
            return MEM_SHARED;
        struct um_procmap_query q;
        memset(&q, 0, sizeof q);
        q.size = sizeof q;
        q.query_addr = addr;
        if (ioctl(fd, UM_PROCMAP_QUERY, &q) != 0) {
            if (errno == ENOTTY || errno == EINVAL) {
                procmap_absent = errno == ENOTTY;
                return procmap_absent ? MEM_OWN : MEM_SHARED;
            }
            if (errno == ESRCH && tries++ == 0)
                continue; /* an fd of the memory before an exec: again */
            return MEM_SHARED; /* ENOENT: not mapped (the kernel's EFAULT comes from its own read) */
        }
        if (q.vma_flags & UM_PROCMAP_VMA_SHARED)
            return MEM_SHARED;
        if (q.inode || q.dev_major || q.dev_minor)
            kind = MEM_FILE_PRIVATE;
        if (q.vma_end <= addr)
            return MEM_SHARED;
        addr = q.vma_end;
    }
    return kind;
}

/* Make the string data (len bytes with its NUL) at addr, in a private file
 * mapping of tid, the process's own: written back through /proc/PID/mem,
 * which copies each page it writes (copy-on-write, as a debugger's
 * breakpoint does), so the file's later bytes no longer show there. 0, or
 * -errno (a mapping that takes no copy: pin it). */
static int own_pages(pid_t tid, uint64_t addr, const void *data, size_t len)
{
    for (int tries = 0; tries < 2; tries++) {
        int fd = proc_fd(tid, 1, tries > 0);
        if (fd < 0)
            return fd;
        ssize_t n = pwrite(fd, data, len, (off_t)addr);
        if (n == (ssize_t)len)
            return memory_kind(tid, addr, len) == MEM_SHARED ? -EAGAIN : 0;
        if (n >= 0 || errno != ESRCH)
            return -EIO;
    }
    return -ESRCH;
}

/* Is the string data (len bytes, its NUL included) at addr in tid's memory
 * where another process can change it before the kernel reads it? A private
 * file mapping is made the process's own here (own_pages): no. */
int changeable(pid_t tid, uint64_t addr, const void *data, size_t len)
{
    switch (memory_kind(tid, addr, len)) {
    case MEM_OWN:
        return 0;
    case MEM_FILE_PRIVATE:
        if (own_pages(tid, addr, data, len) == 0) {
            stats.owned_pages++;
            return 0;
        }
        return 1;
    default:
        return 1;
    }
}

/* Does a path C read for this call lie where another process can change it
 * (changeable), or, for openat2, its struct open_how? */
static int paths_changeable(pid_t tid, const struct um_decide_in *in)
{
    int abi = in->abi, sc = in->sc;
    for (int s = 0; s < PATH_SLOTS; s++) {
        const struct um_decide_slot *st = &in->slot[s];
        if (st->state != UM_SLOT_PATH && st->state != UM_SLOT_EMPTY)
            continue;
        uint64_t addr = in->args[path_args[abi][sc][s].path];
        if (abi == UM_ABI_I386)
            addr &= 0xffffffffu;
        const char *p = st->state == UM_SLOT_EMPTY ? "" : st->str;
        if (changeable(tid, addr, p, strnlen(p, UM_PATH_BUF) + 1))
            return 1;
    }
    if (write_kind[sc] == UM_WRITE_OPENHOW && in->how_readable) {
        int a = write_arg[sc];
        uint64_t size = in->args[a + 1];
        if (size >= sizeof in->how_flags && size <= PAGE &&
            memory_kind(tid, in->args[a], size) != MEM_OWN)
            return 1; /* its flags: pinned with the paths (pin_call) */
    }
    return 0;
}

/* Must this call, decided UM_DECIDE_NATIVE, be pinned before it runs? When
 * it writes (the write table: an open with write flags, chmod, unlink...)
 * and another thread shares its memory, or a path it names lies in memory
 * another process can change; and openat2 whose open_how lies there (its
 * flags could turn a read into a write). A call that only reads is not
 * looked up: a path flipped under it reads a file the view would have
 * shown otherwise, which the process may read anyway, and the lookup would
 * cost every stat and open of find or make (docs/performance.md). */
int needs_pin(pid_t tid, const struct um_decide_in *in)
{
    if (in->sc < 0 || !(claim[in->abi][in->sc] & UM_CLAIM_PATH))
        return 0;
    int any = 0;
    for (int s = 0; s < PATH_SLOTS; s++)
        any |= in->slot[s].state == UM_SLOT_PATH || in->slot[s].state == UM_SLOT_EMPTY;
    if (!any)
        return 0;
    int writes = decided_writes(in);
    if (writes && mm_shared(tid))
        return 1;
    return (writes || write_kind[in->sc] == UM_WRITE_OPENHOW) && paths_changeable(tid, in);
}

/* Does tid resolve absolute paths from the monitor's root (no chroot)? */
static int same_root(pid_t tid)
{
    char p[64], target[8];
    snprintf(p, sizeof p, "/proc/%d/root", tid);
    ssize_t n = readlink(p, target, sizeof target);
    return n == 1 && target[0] == '/';
}

/* Pin the call at tid's stop (a seccomp stop, or the entry stop of a call
 * restarted for it; cur_sci is that stop's) on the strings C decided on,
 * and ask for its exit stop, where pin_restore puts the registers back.
 * 0 if pinned; else -errno, and the call must not run. */
int pin_call(pid_t tid, struct um_decide_in *in)
{
    struct um_thread *t = thr(tid);
    int abi = in->abi, sc = in->sc, err = 0;
    uint64_t args[6];
    memcpy(args, in->args, sizeof args);
    cur_tid = tid;
    int at_entry = cur_sci.op == SI_ENTRY;
    for (int s = 0; s < PATH_SLOTS; s++) {
        const struct path_arg *pa = &path_args[abi][sc][s];
        const struct um_decide_slot *st = &in->slot[s];
        if (st->state != UM_SLOT_PATH && st->state != UM_SLOT_EMPTY)
            continue; /* NULL, or none: nothing in memory */
        static char abs_path[UM_PATH_BUF];
        const char *p = st->state == UM_SLOT_EMPTY ? "" : st->str; /* "": its dirfd's file, kept so */
        if (st->state == UM_SLOT_PATH && p[0] != '/') {
            /* relative: the fd table or the cwd may change too; the
             * absolute path C resolved it to, where that names it */
            size_t b = strnlen(st->base, UM_PATH_BUF), n = strnlen(p, UM_PATH_BUF);
            static const char deleted[] = " (deleted)";
            if (st->base_known && st->base[0] == '/' && same_root(tid) &&
                !(b >= sizeof deleted - 1 && !strcmp(st->base + b - (sizeof deleted - 1), deleted)) &&
                b + 1 + n < PAGE) {
                memcpy(abs_path, st->base, b);
                abs_path[b] = '/';
                memcpy(abs_path + b + 1, p, n + 1);
                p = abs_path;
            } /* else (a directory deleted, or out of reach): the string alone */
        }
        size_t n = strnlen(p, UM_PATH_BUF);
        if (n >= PAGE) {
            err = -ENAMETOOLONG;
            break;
        }
        uint64_t at = slot_page(tid, abi, s, &err);
        if (!at || (err = write_pinned(tid, at, p, n + 1)) != 0)
            break;
        args[pa->path] = at;
        if (pa->dirfd >= 0 && p == abs_path)
            args[pa->dirfd] = (uint64_t)(int64_t)AT_FDCWD_;
    }
    if (!err && write_kind[sc] == UM_WRITE_OPENHOW) {
        /* openat2: the flags C looked at are in memory too */
        int a = write_arg[sc];
        uint64_t size = args[a + 1];
        char how[PAGE];
        if (!in->how_readable || size < sizeof in->how_flags || size > sizeof how)
            err = -EAGAIN;
        else if (um_read_mem(tid, args[a], how, size) != (int)size)
            err = -EFAULT;
        else {
            memcpy(how, &in->how_flags, sizeof in->how_flags);
            uint64_t at = slot_page(tid, abi, 2, &err);
            if (at && !(err = write_pinned(tid, at, how, size)))
                args[a] = at;
        }
    }
    if (!err)
        err = set_args_regs(tid, abi, args);
    if (t->injected) {
        t->injected = 0; /* the region's mmap: now at the call's entry stop */
        at_entry = 1;
    }
    if (err)
        return err;
    if (at_entry) {
        long n = abi == UM_ABI_X32 ? (long)(in->nr & ~X32_BIT) : (long)in->nr;
        if (n >= 0 && n < MAX_NR && trap[abi][n])
            pass_set(tid, in->nr, args); /* the seccomp check still comes */
    }
    t->pinned = 1;
    t->pin_abi = abi;
    memcpy(t->pin_args, in->args, sizeof t->pin_args);
    stats.pinned++;
    return 0;
}

/* At tid's syscall-exit stop: the registers of a pinned call back as the
 * process passed them (the syscall ABI preserves them). */
void pin_restore(pid_t tid, int execed)
{
    struct um_thread *t = thr(tid);
    if (!t->pinned)
        return;
    t->pinned = 0;
    if (!execed)
        write_failed(tid, "the path registers of a pinned call could not be restored",
                     set_args_regs(tid, t->pin_abi, t->pin_args));
}
