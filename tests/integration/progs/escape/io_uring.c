/* io_uring: the kernel runs a ring's operations without a system call the
 * view's filter sees.
 *
 *   io_uring OP VICTIM
 *     write   IORING_OP_OPENAT (O_WRONLY|O_TRUNC), then IORING_OP_WRITE
 *     rename  IORING_OP_RENAMEAT VICTIM -> VICTIM.moved
 *     unlink  IORING_OP_UNLINKAT VICTIM
 *     mkdir   IORING_OP_MKDIRAT VICTIM.dir
 *
 * Raw system calls (no liburing): one submission, wait for its completion.
 */
#include "escape.h"
#include <linux/io_uring.h>
#include <sys/mman.h>

static int ring;
static struct io_uring_sqe *sqes;
static unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
static struct io_uring_cqe *cqes;

static void setup(void)
{
    struct io_uring_params p = {0};
    ring = syscall(__NR_io_uring_setup, 4, &p);
    if (ring < 0) {
        if (errno == ENOSYS || errno == EPERM) {
            FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "r");
            int disabled = 0;
            if (f && fscanf(f, "%d", &disabled) == 1 && disabled)
                unsupported("io_uring is disabled (/proc/sys/kernel/io_uring_disabled)");
        }
        fail("io_uring_setup");
    }
    size_t sq_size = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    if (cq_size > sq_size)
        sq_size = cq_size;  /* IORING_FEAT_SINGLE_MMAP: one mapping for both */
    char *sq = mmap(NULL, sq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING);
    sqes = mmap(NULL, p.sq_entries * sizeof *sqes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                IORING_OFF_SQES);
    if (sq == MAP_FAILED || sqes == MAP_FAILED)
        fail("mmap of the ring");
    sq_tail = (unsigned *)(sq + p.sq_off.tail);
    sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    sq_array = (unsigned *)(sq + p.sq_off.array);
    cq_head = (unsigned *)(sq + p.cq_off.head);
    cq_tail = (unsigned *)(sq + p.cq_off.tail);
    cq_mask = (unsigned *)(sq + p.cq_off.ring_mask);
    cqes = (struct io_uring_cqe *)(sq + p.cq_off.cqes);
}

/* submit sqe, wait for its completion, return its result (errno on failure) */
static int submit(struct io_uring_sqe *sqe, const char *what)
{
    unsigned tail = *sq_tail, i = tail & *sq_mask;
    sqes[i] = *sqe;
    sq_array[i] = i;
    __atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
    if (syscall(__NR_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
        fail("io_uring_enter");
    unsigned head = *cq_head;
    if (head == __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE)) {
        errno = EIO;
        fail("no completion");
    }
    int res = cqes[head & *cq_mask].res;
    __atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
    if (res < 0) {
        errno = -res;
        fail(what);
    }
    return res;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        unsupported("usage: io_uring write|rename|unlink|mkdir VICTIM");
    const char *op = argv[1], *victim = argv[2];
    char other[4096];
    setup();
    struct io_uring_sqe sqe = {0};
    sqe.fd = AT_FDCWD;
    sqe.addr = (unsigned long)victim;
    if (!strcmp(op, "write")) {
        sqe.opcode = IORING_OP_OPENAT;
        sqe.open_flags = O_WRONLY | O_TRUNC;
        int fd = submit(&sqe, "IORING_OP_OPENAT");
        memset(&sqe, 0, sizeof sqe);
        sqe.opcode = IORING_OP_WRITE;
        sqe.fd = fd;
        sqe.addr = (unsigned long)ESCAPED;
        sqe.len = strlen(ESCAPED);
        submit(&sqe, "IORING_OP_WRITE");
    } else if (!strcmp(op, "rename")) {
        snprintf(other, sizeof other, "%s.moved", victim);
        sqe.opcode = IORING_OP_RENAMEAT;
        sqe.len = AT_FDCWD;  /* the new dirfd */
        sqe.addr2 = (unsigned long)other;
        submit(&sqe, "IORING_OP_RENAMEAT");
    } else if (!strcmp(op, "unlink")) {
        sqe.opcode = IORING_OP_UNLINKAT;
        submit(&sqe, "IORING_OP_UNLINKAT");
    } else if (!strcmp(op, "mkdir")) {
        snprintf(other, sizeof other, "%s.dir", victim);
        sqe.opcode = IORING_OP_MKDIRAT;
        sqe.addr = (unsigned long)other;
        sqe.len = 0755;  /* the mode */
        submit(&sqe, "IORING_OP_MKDIRAT");
    } else {
        unsupported("unknown operation");
    }
    return 0;
}
