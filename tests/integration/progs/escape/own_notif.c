/* A seccomp user-notification filter of the process's own, whose supervisor
 * (a thread) answers every openat with SECCOMP_USER_NOTIF_FLAG_CONTINUE: the
 * kernel then runs the call without asking filters of lower precedence.
 *
 *   own_notif VICTIM    install the filter (main thread only), write VICTIM
 */
#include "escape.h"
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>

static volatile int listener = -1;

static void *supervise(void *unused)
{
    (void)unused;
    while (listener < 0)
        ;
    struct seccomp_notif req;
    struct seccomp_notif_resp resp;
    for (;;) {
        memset(&req, 0, sizeof req);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req))
            return NULL;
        memset(&resp, 0, sizeof resp);
        resp.id = req.id;
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2)
        unsupported("usage: own_notif VICTIM");
    pthread_t thread;
    if (pthread_create(&thread, NULL, supervise, NULL))
        fail("pthread_create");
    struct sock_filter insns[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof insns / sizeof *insns, .filter = insns};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        fail("PR_SET_NO_NEW_PRIVS");
    int fd = syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (fd < 0)
        fail("seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER)");
    listener = fd;
    write_path(argv[1]);
    return 0;
}
