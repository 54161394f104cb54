/* What lets a process hold up others (test_escapes.py, issue 28): it tries
 * userfaultfd (user-mode faults only, as a normal user may), the ioctl of
 * /dev/userfaultfd and fanotify_init, and prints for each "ok" or the name
 * of its errno. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/fanotify.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <linux/userfaultfd.h>
static void say(const char *what, long r) { printf("%s %s\n", what, r < 0 ? strerrorname_np(errno) : "ok"); }
int main(void)
{
    say("userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY));
    int fd = open("/dev/userfaultfd", O_RDONLY | O_CLOEXEC);
    say("dev-userfaultfd", fd < 0 ? -1 : ioctl(fd, USERFAULTFD_IOC_NEW, O_CLOEXEC));
    say("fanotify", fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID, O_RDONLY));
    return 0;
}
