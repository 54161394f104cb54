/* tracee.c - tracee memory and registers */
#include "internal.h"

/* ------------------------------------------------------------------ */
/* tracee memory                                                       */
/* ------------------------------------------------------------------ */

static int mem_fd_rw(int tid, uint64_t addr, void *buf, size_t len, int write)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/mem", tid);
    int fd = open(p, (write ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write ? pwrite(fd, buf, len, (off_t)addr) : pread(fd, buf, len, (off_t)addr);
    int e = errno;
    close(fd);
    if (n < 0)
        return -(e == EIO ? EFAULT : e);
    return (int)n;
}

int um_read_mem(int tid, uint64_t addr, void *buf, size_t len)
{
    struct iovec l = {buf, len}, r = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(tid, &l, 1, &r, 1, 0);
    if (n >= 0)
        return (int)n;
    if (errno == ENOSYS || errno == EPERM)
        return mem_fd_rw(tid, addr, buf, len, 0);
    return -errno;
}

int um_write_mem(int tid, uint64_t addr, const void *buf, size_t len)
{
    struct iovec l = {(void *)buf, len}, r = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_writev(tid, &l, 1, &r, 1, 0);
    if (n >= 0 && (size_t)n == len)
        return (int)n;
    /* read-only mappings, or no process_vm_writev: /proc/PID/mem writes through */
    return mem_fd_rw(tid, addr, (void *)buf, len, 1);
}

/* Read a NUL-terminated string without ever reading past the page that holds
 * its NUL: the first chunk stops at the page end, then page-sized chunks.
 * Returns its length, -EFAULT if its first byte is unreadable or it runs into
 * an unmapped page, -ENAMETOOLONG if no NUL within size-1 bytes. */
int um_read_string(int tid, uint64_t addr, char *buf, int size)
{
    int got = 0;
    if (size <= 0)
        return -EINVAL;
    while (got < size - 1) {
        uint64_t a = addr + (uint64_t)got;
        size_t chunk = 4096 - (a & 4095);
        if (got == 0 && chunk > 256)
            chunk = 256;
        if (chunk > (size_t)(size - 1 - got))
            chunk = (size_t)(size - 1 - got);
        int n = um_read_mem(tid, a, buf + got, chunk);
        if (n <= 0)
            return n < 0 ? n : -EFAULT;
        char *z = memchr(buf + got, 0, (size_t)n);
        if (z)
            return (int)(z - buf);
        got += n;
    }
    buf[size - 1] = 0;
    return -ENAMETOOLONG;
}

/* ------------------------------------------------------------------ */
/* registers                                                           */
/* ------------------------------------------------------------------ */

/* The ABI of a call from its audit arch and its number (x32: bit 30 set). */
int abi_from(uint32_t arch, uint64_t nr)
{
    if (arch == AUDIT_ARCH_I386)
        return UM_ABI_I386;
    if (arch == AUDIT_ARCH_X86_64)
        return (nr & X32_BIT) ? UM_ABI_X32 : UM_ABI_X86_64;
    return -1;
}

int abi_of(const struct um_sci *si) { return abi_from(si->arch, si->entry.nr); }

int get_regs(int tid, struct user_regs_struct *r)
{
    return ptrace(PTRACE_GETREGS, tid, 0, r) ? -errno : 0;
}



/* Register writes that fail on purpose (um_test_fail_writes): UM_FAIL_* bits */
static int fail_writes;

void um_test_fail_writes(int mask) { fail_writes = mask; }

static long poke(int req, pid_t tid, long addr, void *data, int fail_bit)
{
    if (fail_writes & fail_bit) {
        errno = EIO;
        return -1;
    }
    return ptrace(req, tid, addr, data);
}

/* Write number and arguments of the stopped call (entry or seccomp stop):
 * PTRACE_SET_SYSCALL_INFO where the kernel has it (Linux 6.16), else, or if
 * it fails, the registers. 0 or -errno (-ESRCH: the thread is gone). */
int set_call(int tid, int abi, long nr, const uint64_t *args)
{
    if (ssi_state >= 0) {
        struct um_sci si = cur_sci;
        si.reserved = 0;
        si.flags = 0;
        si.entry.nr = (uint64_t)nr;
        memcpy(si.entry.args, args, sizeof si.entry.args);
        if (poke(UM_PTRACE_SET_SYSCALL_INFO, tid, sizeof si, &si, UM_FAIL_SSI) == 0) {
            ssi_state = 1;
            return 0;
        }
        if (errno == ESRCH)
            return -ESRCH;
        if (ssi_state == 0 && (errno == EIO || errno == EINVAL))
            ssi_state = -1; /* kernel before 6.16: registers from now on */
        /* else: the registers, for this call */
    }
    struct user_regs_struct r;
    int e = get_regs(tid, &r);
    if (e)
        return e;
    const struct regmap *m = &regmap[abi];
    REG(&r, m->nr) = (unsigned long long)nr;
    for (int i = 0; i < 6; i++)
        REG(&r, m->args[i]) = args[i];
    return poke(PTRACE_SETREGS, tid, 0, &r, UM_FAIL_SETREGS) ? -errno : 0;
}

int set_args_regs(int tid, int abi, const uint64_t *args)
{
    struct user_regs_struct r;
    int e = get_regs(tid, &r);
    if (e)
        return e;
    for (int i = 0; i < 6; i++)
        REG(&r, regmap[abi].args[i]) = args[i];
    return poke(PTRACE_SETREGS, tid, 0, &r, UM_FAIL_SETREGS) ? -errno : 0;
}

int set_return(int tid, int abi, int64_t val)
{
    return poke(PTRACE_POKEUSER, tid, regmap[abi].ret, (void *)(intptr_t)val, UM_FAIL_POKEUSER) ? -errno : 0;
}

/* If err says a write to a live thread failed (0 is success, -ESRCH a
 * thread gone: neither is reported): count it, and say it on stderr. */
void write_failed(pid_t tid, const char *what, int err)
{
    if (err == 0 || err == -ESRCH)
        return;
    stats.write_failed++;
    fprintf(stderr, "umview: thread %d: %s (%s)\n", (int)tid, what, strerror(-err));
}

/* The stopped call must not run: its number becomes -1 and the tracee gets
 * rval. A thread whose number cannot be set is killed (SIGKILL ends its
 * stop without running the call) rather than let run a call the monitor
 * refused. 0, or -errno if something failed. */
int skip_call(pid_t tid, int abi, const uint64_t *args, int64_t rval)
{
    int e = set_call(tid, abi, -1, args);
    if (e) {
        if (e != -ESRCH && kill(tid, SIGKILL) == 0)
            write_failed(tid, "a call to skip could not be stopped: the thread is killed", e);
        return e;
    }
    e = set_return(tid, abi, rval);
    write_failed(tid, "the result of a skipped call could not be set", e);
    return e;
}

/* Rewrite the stopped call's number and arguments. If that fails it must
 * not run as it is: it fails with EIO (skip_call). 0 if rewritten. */
int rewrite_call(pid_t tid, int abi, long nr, const uint64_t *args)
{
    int e = set_call(tid, abi, nr, args);
    if (e && e != -ESRCH) {
        write_failed(tid, "a rewritten call could not be written: it fails with EIO", e);
        skip_call(tid, abi, args, -EIO);
    }
    return e;
}

