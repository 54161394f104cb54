/* File system calls through another ABI than the process's own, with no libc.
 *
 *   abicalls OP:ARG[:ARG] ...     one call per argument, "OP = RESULT" per line
 *
 * Built two ways (tests/integration/test_abis.py):
 *   gcc -m32 -nostdlib -static ...         a real i386 process (int $0x80)
 *   gcc -DX32 -nostdlib -static ...        a 64-bit process making x32 calls
 *                                          (syscall with __X32_SYSCALL_BIT)
 * Output and exit go through the process's own ABI. OPs: open:PATH:FLAGS (octal;
 * the fd is closed again), creat:PATH, chmod:PATH:MODE, fchmod:PATH:MODE (opened
 * read-only first), fchown:PATH:UID:GID, rename:OLD:NEW, unlink:PATH,
 * truncate:PATH:LENGTH, utimensat:PATH (times 0), mkdir:PATH, socket:FAMILY,
 * owntrace:OP: a seccomp filter of its own (installed through this ABI, with
 * its 32-bit struct sock_fprog) that answers RET_TRACE to the ABI's call of OP
 * (open or mkdir); 0 once installed.
 * Ids (i386: the 16-bit calls, and their *32 forms): getuid, getuid32,
 * geteuid, getgid, setuid:UID, chown:PATH:UID:GID, mknod:PATH:MODE:DEV (octal
 * mode, decimal dev); stat:FIELD:PATH and (i386) stat64:FIELD:PATH give
 * FIELD (uid, gid, mode, rdev) of the ABI's struct stat or stat64.
 */
typedef unsigned long ulong;

#ifdef X32
#define BIT 0x40000000L
enum { NR_open = 2, NR_creat = 85, NR_close = 3, NR_chmod = 90, NR_fchmod = 91, NR_fchown = 93,
       NR_rename = 82, NR_unlink = 87, NR_truncate = 76, NR_utimensat = 280, NR_mkdir = 83,
       NR_socket = 41, NR_prctl = 157, NR_seccomp = 317, NR_getuid = 102, NR_getuid32 = 102,
       NR_geteuid = 107, NR_getgid = 104, NR_setuid = 105, NR_chown = 92, NR_mknod = 133,
       NR_stat = 4, NR_stat64 = -1 };
/* struct stat: offsets and sizes of uid, gid, mode, rdev */
static const int STAT_AT[4] = {28, 32, 24, 40}, STAT_SIZE[4] = {4, 4, 4, 8}, STAT64_AT[4] = {0}, STAT64_SIZE[4] = {0};
#define ARCH 0xC000003EL /* AUDIT_ARCH_X86_64: x32 calls are x86_64's, with the bit */
static long call6(long nr, long a, long b, long c, long d)
{
    long r;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = 0; /* a fifth argument of 0 (prctl checks it) */
    __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return r;
}
#define NATIVE(nr, a, b, c) call6(nr, a, b, c, 0)
#define ABI(nr, a, b, c, d) call6((nr) | BIT, a, b, c, d)
#define SYS_write 1
#define SYS_exit 60
#else
enum { NR_open = 5, NR_creat = 8, NR_close = 6, NR_chmod = 15, NR_fchmod = 94,
       NR_fchown = 207 /* fchown32 */, NR_rename = 38, NR_unlink = 10, NR_truncate = 92,
       NR_utimensat = 320, NR_mkdir = 39, NR_socket = 359, NR_prctl = 172, NR_seccomp = 354,
       NR_getuid = 24, NR_getuid32 = 199, NR_geteuid = 49, NR_getgid = 47, NR_setuid = 23,
       NR_chown = 182 /* 16-bit */, NR_mknod = 14, NR_stat = 106, NR_stat64 = 195 };
static const int STAT_AT[4] = {12, 14, 8, 16}, STAT_SIZE[4] = {2, 2, 2, 4};
static const int STAT64_AT[4] = {24, 28, 16, 32}, STAT64_SIZE[4] = {4, 4, 4, 8};
#define BIT 0L
#define ARCH 0x40000003L /* AUDIT_ARCH_I386 */
static long call6(long nr, long a, long b, long c, long d)
{
    long r;
    /* a fifth argument of 0 (prctl checks it) */
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(a), "c"(b), "d"(c), "S"(d), "D"(0L) : "memory");
    return r;
}
#define NATIVE(nr, a, b, c) call6(nr, a, b, c, 0)
#define ABI(nr, a, b, c, d) call6(nr, a, b, c, d)
#define SYS_write 4
#define SYS_exit 1
#endif

static int len(const char *s) { int n = 0; while (s[n]) n++; return n; }
static void out(const char *s) { NATIVE(SYS_write, 1, (long)s, len(s)); }
static void out_num(long v)
{
    char buf[24], *p = buf + sizeof buf - 1;
    int neg = v < 0;
    unsigned long u = neg ? -(unsigned long)v : (unsigned long)v;
    *p = 0;
    do { *--p = '0' + (char)(u % 10); u /= 10; } while (u);
    if (neg) *--p = '-';
    out(p);
}
static int eq(const char *a, const char *b) { while (*a && *a == *b) a++, b++; return *a == *b; }
static long num(const char *s, int base)
{
    long v = 0;
    for (; *s; s++) v = v * base + (*s - '0');
    return v;
}
/* split "a:b:c" in place; returns the number of fields */
static int split(char *s, char **f, int max)
{
    int n = 0;
    f[n++] = s;
    for (; *s && n < max; s++)
        if (*s == ':') { *s = 0; f[n++] = s + 1; }
    return n;
}

/* field FIELD of a struct stat (or stat64) the call nr filled for path */
static long stat_field(long nr, const int *at, const int *size, const char *field, const char *path)
{
    static unsigned char buf[256] __attribute__((aligned(8)));
    int i = eq(field, "uid") ? 0 : eq(field, "gid") ? 1 : eq(field, "mode") ? 2 : 3;
    long r = ABI(nr, (long)path, (long)buf, 0, 0);
    if (r < 0) return r;
    const unsigned char *p = buf + at[i];
    unsigned long v = 0;
    for (int b = size[i] - 1; b >= 0; b--) v = v << 8 | p[b];
    return (long)v;
}

static long run(char **f, int n)
{
    const char *op = f[0];
    long fd, r;
    if (eq(op, "getuid")) return ABI(NR_getuid, 0, 0, 0, 0);
    if (eq(op, "getuid32")) return ABI(NR_getuid32, 0, 0, 0, 0);
    if (eq(op, "geteuid")) return ABI(NR_geteuid, 0, 0, 0, 0);
    if (eq(op, "getgid")) return ABI(NR_getgid, 0, 0, 0, 0);
    if (eq(op, "setuid") && n == 2) return ABI(NR_setuid, num(f[1], 10), 0, 0, 0);
    if (eq(op, "chown") && n == 4) return ABI(NR_chown, (long)f[1], num(f[2], 10), num(f[3], 10), 0);
    if (eq(op, "mknod") && n == 4) return ABI(NR_mknod, (long)f[1], num(f[2], 8), num(f[3], 10), 0);
    if (eq(op, "stat") && n == 3) return stat_field(NR_stat, STAT_AT, STAT_SIZE, f[1], f[2]);
    if (eq(op, "stat64") && n == 3 && NR_stat64 > 0) return stat_field(NR_stat64, STAT64_AT, STAT64_SIZE, f[1], f[2]);
    if (eq(op, "open") && n == 3) {
        r = ABI(NR_open, (long)f[1], num(f[2], 8), 0644, 0);
        if (r >= 0) ABI(NR_close, r, 0, 0, 0);
        return r < 0 ? r : 0;
    }
    if (eq(op, "creat") && n == 2) {
        r = ABI(NR_creat, (long)f[1], 0644, 0, 0);
        if (r >= 0) ABI(NR_close, r, 0, 0, 0);
        return r < 0 ? r : 0;
    }
    if (eq(op, "chmod") && n == 3) return ABI(NR_chmod, (long)f[1], num(f[2], 8), 0, 0);
    if ((eq(op, "fchmod") && n == 3) || (eq(op, "fchown") && n == 4)) {
        fd = ABI(NR_open, (long)f[1], 0, 0, 0);
        if (fd < 0) return fd;
        r = eq(op, "fchmod") ? ABI(NR_fchmod, fd, num(f[2], 8), 0, 0)
                             : ABI(NR_fchown, fd, num(f[2], 10), num(f[3], 10), 0);
        ABI(NR_close, fd, 0, 0, 0);
        return r;
    }
    if (eq(op, "rename") && n == 3) return ABI(NR_rename, (long)f[1], (long)f[2], 0, 0);
    if (eq(op, "unlink") && n == 2) return ABI(NR_unlink, (long)f[1], 0, 0, 0);
    if (eq(op, "truncate") && n == 3) return ABI(NR_truncate, (long)f[1], num(f[2], 10), 0, 0);
    if (eq(op, "utimensat") && n == 2) {
        static long times[4]; /* two struct timespec of zeros: the epoch */
        return ABI(NR_utimensat, -100, (long)f[1], (long)times, 0);
    }
    if (eq(op, "mkdir") && n == 2) return ABI(NR_mkdir, (long)f[1], 0755, 0, 0);
    if (eq(op, "socket") && n == 2) {
        r = ABI(NR_socket, num(f[1], 10), 1 /* SOCK_STREAM */, 0, 0);
        if (r >= 0) ABI(NR_close, r, 0, 0, 0);
        return r < 0 ? r : 0;
    }
    if (eq(op, "owntrace") && n == 2) {
        /* static: a 32-bit address even in the x32 build (non-PIE) */
        static struct { unsigned short code; unsigned char jt, jf; unsigned int k; } prog[6];
        static struct { unsigned short len; unsigned int filter; } fprog = {6, 0};
        long nr = (eq(f[1], "open") ? NR_open : NR_mkdir) | BIT;
        prog[0].code = 0x20, prog[0].k = 4;                         /* ld [arch] */
        prog[1].code = 0x15, prog[1].k = (unsigned)ARCH, prog[1].jf = 3; /* jeq ARCH, 0, allow */
        prog[2].code = 0x20, prog[2].k = 0;                         /* ld [nr] */
        prog[3].code = 0x15, prog[3].k = (unsigned)nr, prog[3].jf = 1;   /* jeq nr, 0, allow */
        prog[4].code = 0x06, prog[4].k = 0x7ff00000 | 7;            /* ret TRACE|7 */
        prog[5].code = 0x06, prog[5].k = 0x7fff0000;                /* ret ALLOW */
        fprog.filter = (unsigned int)(unsigned long)prog;
        r = ABI(NR_prctl, 38 /* PR_SET_NO_NEW_PRIVS */, 1, 0, 0);
        return r < 0 ? r : ABI(NR_seccomp, 1 /* SECCOMP_SET_MODE_FILTER */, 0, (long)&fprog, 0);
    }
    out("bad op: ");
    out(op);
    out("\n");
    NATIVE(SYS_exit, 2, 0, 0);
    return 0;
}

__attribute__((used)) void main_(long argc, char **argv);
__attribute__((used)) void main_(long argc, char **argv)
{
    for (long i = 1; i < argc; i++) {
        char *f[5];
        out(argv[i]);
        int n = split(argv[i], f, 5);
        out(" = ");
        out_num(run(f, n));
        out("\n");
    }
    NATIVE(SYS_exit, 0, 0, 0);
}

#ifdef X32
__asm__(".globl _start\n_start:\n mov (%rsp), %rdi\n lea 8(%rsp), %rsi\n and $-16, %rsp\n call main_\n hlt\n");
#else
__asm__(".globl _start\n_start:\n mov (%esp), %eax\n lea 4(%esp), %edx\n and $-16, %esp\n sub $8, %esp\n"
        " push %edx\n push %eax\n call main_\n hlt\n");
#endif
