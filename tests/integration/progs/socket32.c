/* An i386 program (no libc: built with gcc -m32 -nostdlib -static) that
 * makes sockets with the direct i386 calls and with socketcall, and prints
 * each result (a number, or -errno).
 *
 *   socket32        socket(AF_INET), socket(AF_UNIX), socketcall(SYS_SOCKET, AF_INET),
 *                   then connect(AF_INET socket, 127.0.0.1:PORT) with PORT from argv[1]
 */
static int sys3(int nr, int a, int b, int c)
{
    int r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
    return r;
}

static void out(int v)
{
    char buf[16], t[16];
    int n = 0, k = 0;
    unsigned u = v < 0 ? -v : v;
    do
        t[k++] = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        buf[n++] = '-';
    while (k)
        buf[n++] = t[--k];
    buf[n++] = '\n';
    sys3(4, 1, (int)buf, n); /* write */
}

static int port_of(const char *s)
{
    int p = 0;
    while (*s >= '0' && *s <= '9')
        p = p * 10 + *s++ - '0';
    return p;
}

__attribute__((force_align_arg_pointer)) void start(int *sp)
{
    int s = sys3(359, 2, 1, 0); /* socket(AF_INET, SOCK_STREAM, 0) */
    out(s);
    out(sys3(359, 1, 1, 0)); /* socket(AF_UNIX, SOCK_STREAM, 0) */
    int args[3] = {2, 1, 0};
    out(sys3(102, 1, (int)args, 0)); /* socketcall(SYS_SOCKET, {AF_INET, SOCK_STREAM, 0}) */
    if (sp[0] > 1 && s >= 0) {
        int port = port_of((const char *)sp[2]);
        unsigned char addr[16] = {2, 0, (unsigned char)(port >> 8), (unsigned char)port, 127, 0, 0, 1};
        out(sys3(362, s, (int)addr, 16)); /* connect */
    }
    sys3(1, 0, 0, 0); /* exit */
}

__asm__(".globl _start\n_start:\n  push %esp\n  call start\n");
