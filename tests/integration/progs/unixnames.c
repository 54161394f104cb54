/* unixnames DIR: AF_UNIX sockets bound by a relative name, an absolute one
 * and one of the whole 108 bytes (no NUL), stream and datagram; prints what
 * getsockname, getpeername and accept give back, with the lengths,
 * and connects to the address getsockname gave. Run natively and in a view:
 * the outputs must match. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void show(const char *what, struct sockaddr_un *a, socklen_t len, socklen_t size)
{
    printf("%s len=%u", what, (unsigned)len);
    if (len > 2) {
        size_t n = (len < size ? len : size) - 2;
        printf(" path=%.*s", (int)strnlen(a->sun_path, n), a->sun_path);
    }
    printf("\n");
}

static int bound(int type, const char *name, int nul)
{
    int fd = socket(AF_UNIX, type, 0);
    struct sockaddr_un a = {AF_UNIX};
    size_t n = strlen(name);
    memcpy(a.sun_path, name, n);
    if (bind(fd, (struct sockaddr *)&a, 2 + n + nul) < 0) {
        printf("bind %zu: %m\n", n);
        exit(1);
    }
    return fd;
}

int main(int argc, char **argv)
{
    if (argc < 2 || chdir(argv[1]) < 0)
        return 2;
    char absolute[200], longname[109];
    snprintf(absolute, sizeof absolute, "%s/abs.sock", argv[1]);
    memset(longname, 'n', 108);
    longname[108] = 0;
    const char *names[] = {"rel.sock", absolute, longname};
    for (int i = 0; i < 3; i++) {
        struct sockaddr_un a, b;
        socklen_t len = sizeof a, blen;
        char client[16];
        int srv = bound(SOCK_STREAM, names[i], i != 2);
        listen(srv, 1);
        getsockname(srv, (struct sockaddr *)&a, &len);
        show("getsockname", &a, len, sizeof a);
        socklen_t small = 6;  /* a short buffer: the bytes that fit, the full length */
        getsockname(srv, (struct sockaddr *)&b, &small);
        show("getsockname-short", &b, small, 6);
        snprintf(client, sizeof client, "client%d", i);
        int cli = bound(SOCK_STREAM, client, 1);
        if (connect(cli, (struct sockaddr *)&a, len < sizeof a ? len : sizeof a) < 0)
            printf("connect to getsockname's: %m\n");
        blen = sizeof b;
        int conn = accept(srv, (struct sockaddr *)&b, &blen);
        show("accept", &b, blen, sizeof b);
        blen = sizeof b;
        getpeername(cli, (struct sockaddr *)&b, &blen);
        show("getpeername", &b, blen, sizeof b);
        blen = sizeof b;
        getsockname(conn, (struct sockaddr *)&b, &blen);
        show("getsockname-accepted", &b, blen, sizeof b);
        if (i == 0) {  /* the kernel's own list shows the name as bound */
            FILE *f = fopen("/proc/net/unix", "r");
            char line[512];
            int seen = 0;
            while (f && fgets(line, sizeof line, f))
                seen += strlen(line) > 10 && strcmp(line + strlen(line) - 10, " rel.sock\n") == 0;
            printf("/proc/net/unix rel.sock: %d\n", seen);
            if (f)
                fclose(f);
        }
        close(srv), close(cli), close(conn);
    }
    int d = bound(SOCK_DGRAM, "dgram.sock", 1);
    struct sockaddr_un a;
    socklen_t len = sizeof a;
    getsockname(d, (struct sockaddr *)&a, &len);
    show("getsockname-dgram", &a, len, sizeof a);
    return 0;
}
