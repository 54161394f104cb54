/* The clocks and the system's names as a real i386 process (int $0x80, no
 * libc) reads them, one "CALL VALUE" line each:
 *
 *   vdso 0|1              is there an AT_SYSINFO_EHDR entry in its auxiliary vector
 *   time, gettimeofday, clock_gettime, clock_gettime64    seconds of CLOCK_REALTIME
 *   uname, olduname, oldolduname                          the node name
 *
 * Built with gcc -m32 -nostdlib -static (tests/integration/test_misc_modules.py).
 */
typedef unsigned int u32;

enum { NR_exit = 1, NR_write = 4, NR_time = 13, NR_oldolduname = 59, NR_gettimeofday = 78,
       NR_olduname = 109, NR_uname = 122, NR_clock_gettime = 265, NR_clock_gettime64 = 403 };
enum { AT_NULL = 0, AT_SYSINFO_EHDR = 33 };

static long sys(long nr, long a, long b)
{
    long r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(a), "c"(b) : "memory");
    return r;
}

static int len(const char *s) { int n = 0; while (s[n]) n++; return n; }
static void put(const char *s)
{
    long r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(NR_write), "b"(1), "c"(s), "d"(len(s)) : "memory");
}
static void put_num(long long v)
{
    char buf[24], *p = buf + sizeof buf - 1;
    int neg = v < 0;
    unsigned long long u = neg ? -(unsigned long long)v : (unsigned long long)v;
    *p = 0;
    do { *--p = '0' + (char)(u % 10); u /= 10; } while (u);
    if (neg) *--p = '-';
    put(p);
}
static void line(const char *name, long long v) { put(name); put(" "); put_num(v); put("\n"); }
static void name_line(const char *name, const char *v) { put(name); put(" "); put(v); put("\n"); }

void cmain(u32 *sp)
{
    u32 argc = sp[0];
    u32 *p = sp + 1 + argc + 1; /* envp */
    while (*p)
        p++;
    int vdso = 0;
    for (p++; p[0] != AT_NULL; p += 2)
        if (p[0] == AT_SYSINFO_EHDR)
            vdso = 1;
    line("vdso", vdso);
    line("time", (int)sys(NR_time, 0, 0));
    int tv[2];
    sys(NR_gettimeofday, (long)tv, 0);
    line("gettimeofday", tv[0]);
    int ts[2];
    sys(NR_clock_gettime, 0, (long)ts);
    line("clock_gettime", ts[0]);
    long long ts64[2];
    sys(NR_clock_gettime64, 0, (long)ts64);
    line("clock_gettime64", ts64[0]);
    char uts[6 * 65];
    sys(NR_uname, (long)uts, 0);
    name_line("uname", uts + 65);
    sys(NR_olduname, (long)uts, 0);
    name_line("olduname", uts + 65);
    sys(NR_oldolduname, (long)uts, 0);
    name_line("oldolduname", uts + 9);
    sys(NR_exit, 0, 0);
}

__asm__(".globl _start\n"
        "_start:\n"
        "  mov %esp, %eax\n"
        "  and $-16, %esp\n"
        "  sub $12, %esp\n"
        "  push %eax\n"
        "  call cmain\n"
        "  hlt\n");
