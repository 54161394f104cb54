/* emulate.c - calls under a move mount, and reads of a layered mount's
 * upper files, that C serves itself
 *
 * (The upper files: a layered prefix with an upper directory, whose layer
 * set names a regular file UM_LAYER_FILE, shows it as UPPER/rest; a call
 * that only reads it is served below as under a move mount, on that path:
 * upper_realize. See docs/internals.md, "Reads of the upper layer's
 * files".)
 *
 * Under a move mount (viewfs move, umview -r: UM_PREFIX_MOVE) every path of
 * the view is a real path with its first part replaced: the view's /usr/x
 * is ROOTFS/usr/x. Python rewrites such a call's path and lets the kernel
 * run it: a redirect, a ptrace stop, Python, an exit stop to put the
 * register back. For the calls that only look a path up (stat, readlink,
 * access) or open a file to read, C instead runs the call itself, in the
 * monitor, on the real path, and answers the notification with its result:
 * the buffer written into the process's memory, or the fd added to its
 * table (SECCOMP_IOCTL_NOTIF_ADDFD). No ptrace stop at all.
 *
 * That is the process's call only where the monitor is the process as far
 * as the kernel's checks go, and where the kernel walks the real path as the
 * view would. So C serves a call only if:
 * - the process has the monitor's identity: its uids, gids, groups and
 *   capabilities, its mount and user namespaces, its root, its LSM label
 *   (AppArmor, SELinux) where there is one (read from /proc
 *   once per thread, and again after any call that may change them: the
 *   calls claimed UM_CLAIM_CREDS, an exec);
 * - the path is absolute, has no ".." that climbs above the mount or passes
 *   through an exception of it (decide.c, move_literal), and the thread has
 *   no virtual root, virtual cwd or inner tracer;
 * - the walk stays the view's: the real path is looked up with
 *   RESOLVE_NO_SYMLINKS, or, with a symlink on it, from the source with the
 *   kernel keeping the walk inside (RESOLVE_IN_ROOT for a move over /,
 *   RESOLVE_BENEATH elsewhere) and ending in no exception (move_holds);
 *   a walk that fails or leaves is Python's;
 * - an open: of a regular file or directory (opening a device or FIFO may
 *   block or act), for reading, without O_CREAT, O_TMPFILE, O_TRUNC or
 *   O_PATH (ADDFD passes no O_PATH file), by a process under no Landlock
 *   domain that may rule reads (the kernel would check its rules; the
 *   monitor's open would not): none of its own, and the sandbox's handles
 *   no read right (landlock_reads).
 * Anything else goes to Python as before: the call is looked at, not
 * answered (stats.served_fallback). See docs/internals.md, "Move prefixes:
 * calls C serves under a move mount".
 */
#include "internal.h"

static int serve_flags;
void um_set_serve(int flags) { serve_flags = flags; }

/* x86_64's calls (served for that ABI only: the structures are the monitor's) */

#define AT_SYMLINK_NOFOLLOW_ 0x100
#define AT_EACCESS_ 0x200
#define AT_NO_AUTOMOUNT_ 0x800
#define AT_STATX_SYNC_TYPE_ 0x6000
#define O_TMPFILE_BIT 020000000
#define STATX_RESERVED_ 0x80000000U

/* ------------------------------------------------------------------ */
/* identity                                                            */
/* ------------------------------------------------------------------ */

static uint64_t creds_gen = 1; /* bumped by every call that may change an identity */

void creds_changed(pid_t tid, int landlock)
{
    __atomic_fetch_add(&creds_gen, 1, __ATOMIC_SEQ_CST);
    if (landlock)
        thr(tid)->landlocked = 1;
}

/* What the kernel checks access with, of /proc/<who>: the status lines of
 * uids, gids, groups and capabilities, the namespaces and the LSM label. Its
 * length, or -1. */
static int identity(const char *who, char *out, size_t size)
{
    static const char *const keys[] = {"Uid:", "Gid:", "Groups:", "CapInh:", "CapPrm:", "CapEff:"};
    char path[64], text[8192];
    snprintf(path, sizeof path, "/proc/%s/status", who);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = 0;
    size_t len = 0;
    for (char *line = text; line && *line;) {
        char *end = strchrnul(line, '\n');
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            size_t kl = strlen(keys[k]);
            if ((size_t)(end - line) >= kl && !strncmp(line, keys[k], kl)) {
                size_t l = (size_t)(end - line);
                if (len + l + 1 >= size)
                    return -1;
                memcpy(out + len, line, l);
                len += l;
                out[len++] = '\n';
            }
        }
        line = *end ? end + 1 : NULL;
    }
    static const char *const links[] = {"ns/mnt", "ns/user"};
    for (size_t k = 0; k < sizeof links / sizeof links[0]; k++) {
        snprintf(path, sizeof path, "/proc/%s/%s", who, links[k]);
        ssize_t l = readlink(path, out + len, size - len - 2);
        if (l <= 0)
            return -1;
        len += (size_t)l;
        out[len++] = '\n';
    }
    /* the LSM's label (AppArmor, SELinux): a program confined by a profile
     * of its own is checked by its rules, which the monitor's call would
     * not be; none readable (no such LSM): nothing added, for both */
    snprintf(path, sizeof path, "/proc/%s/attr/current", who);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t l = read(fd, out + len, size - len - 1);
        close(fd);
        if (l > 0)
            len += (size_t)l;
    }
    out[len] = 0;
    return (int)len;
}

/* Does tid check access as the monitor does (cached per thread until an
 * identity may have changed)? */
static int same_identity(pid_t tid)
{
    static __thread char own[2048];
    static __thread int own_len = -1;
    struct um_thread *t = thr(tid);
    uint64_t gen = __atomic_load_n(&creds_gen, __ATOMIC_SEQ_CST);
    if (t->creds_gen == gen)
        return t->creds_same;
    if (own_len < 0 && (own_len = identity("self", own, sizeof own)) < 0)
        return 0;
    char theirs[2048], who[16], root[8];
    snprintf(who, sizeof who, "%d", tid);
    int n = identity(who, theirs, sizeof theirs);
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/root", tid);
    ssize_t r = readlink(p, root, sizeof root);
    if (n < 0)
        return 0; /* gone, or unreadable: not cached */
    t->creds_gen = gen;
    t->creds_same = n == own_len && !memcmp(theirs, own, (size_t)n) && r == 1 && root[0] == '/';
    return t->creds_same;
}

/* ------------------------------------------------------------------ */
/* serving                                                             */
/* ------------------------------------------------------------------ */

/* Where C looks a real path up: from the root with no symlink allowed, or
 * (a symlink on the way) from the move's source with the kernel keeping the
 * walk inside it (RESOLVE_IN_ROOT for a move over /, whose absolute links
 * mean the source's; RESOLVE_BENEATH for one elsewhere, whose absolute links
 * lead out of it: those stay Python's). */
struct lookup {
    int dirfd;
    const char *path;
    uint64_t resolve;
};

static int open_at(const struct lookup *lk, uint64_t flags)
{
    struct um_open_how how = {flags | O_CLOEXEC, 0, lk->resolve | RESOLVE_NO_MAGICLINKS_};
    int fd = (int)syscall(UM_NR_X86_64_openat2, lk->dirfd, lk->path, &how, sizeof how);
    return fd < 0 ? -errno : fd;
}

/* Open real (the path under move prefix i) with flags, as a lookup of the
 * view would reach it; *lk says how, for a second open of the same file.
 * The fd, or -errno: the call's own (a lookup error), or -ELOOP when C
 * cannot tell (Python walks it). *srcfd: a directory fd to close, or -1. */
static int open_view(int i, const char *real, uint64_t flags, struct lookup *lk, int *srcfd)
{
    *lk = (struct lookup){AT_FDCWD_, real, RESOLVE_NO_SYMLINKS_};
    *srcfd = -1;
    int fd = open_at(lk, flags);
    if (fd != -ELOOP)
        return fd;
    /* a symlink on the way: walked by the kernel inside the source */
    int in_root = prefix_len[i] == 1 && prefixes[i][0] == '/';
    const char *rest = real + prefix_src_len[i];
    if (!in_root)
        while (*rest == '/')
            rest++;
    *srcfd = open(prefix_src_len[i] ? prefix_src[i] : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*srcfd < 0)
        return -ELOOP;
    *lk = (struct lookup){*srcfd, *rest ? rest : ".", in_root ? RESOLVE_IN_ROOT_ : RESOLVE_BENEATH_};
    fd = open_at(lk, flags);
    if (fd < 0)
        return -ELOOP; /* where the walk failed (an exception of the view?) only Python knows */
    /* where it led must be the view's there too: not into an exception */
    char p[64], where[PATH_MAX + 1];
    snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(p, where, sizeof where - 1);
    if (n <= 0 || n >= (ssize_t)sizeof where - 1) {
        close(fd);
        return -ELOOP;
    }
    where[n] = 0;
    if (!move_holds(i, where)) {
        close(fd);
        return -ELOOP;
    }
    return fd;
}

/* Is the notification still the caller's (it did not die or get interrupted)? */
static int still_valid(uint64_t id) { return notif_ioctl(SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0; }

/* Copy a result into the process's memory as the kernel's copy_to_user
 * would: -EFAULT where it cannot (a read-only or unmapped buffer). */
static int put(pid_t tid, uint64_t addr, const void *data, size_t len)
{
    struct iovec l = {(void *)data, len}, r = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_writev(tid, &l, 1, &r, 1, 0);
    return n == (ssize_t)len ? 0 : n >= 0 || errno == EFAULT ? -EFAULT : -errno;
}

static void answer(uint64_t id, int64_t val)
{
    struct seccomp_notif_resp resp;
    memset(&resp, 0, sizeof resp);
    resp.id = id;
    if (val < 0)
        resp.error = (int32_t)val;
    else
        resp.val = val;
    notif_ioctl(SECCOMP_IOCTL_NOTIF_SEND, &resp); /* ENOENT: the caller is gone */
    stats.served++;
}

/* An open of the real path: its fd added to the process's table. 1 served,
 * 0 for Python. */
static int serve_open(const struct seccomp_notif *req, const struct lookup *lk, uint64_t flags, int pathfd,
                      int upper)
{
    struct stat st, again;
    if (fstat(pathfd, &st) || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
        return 0; /* a device, FIFO or socket: opening it may block or act */
    if (upper && S_ISDIR(st.st_mode))
        return 0; /* a merged directory: its listing is Python's */
    /* O_NONBLOCK while the monitor opens it: a FIFO put at the name since
     * the fstat would otherwise hold this thread until a writer came */
    int fd = open_at(lk, flags | O_NONBLOCK);
    if (fd == -ELOOP || fd == -EXDEV || fd == -EINVAL || fd == -ENOSYS || fd == -EAGAIN || fd == -ENXIO)
        return 0; /* changed meanwhile, or flags openat2 refuses and open ignores */
    if (fd < 0) {
        answer(req->id, fd);
        return 1;
    }
    if (fstat(fd, &again) || again.st_dev != st.st_dev || again.st_ino != st.st_ino ||
        (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)) {
        close(fd); /* replaced meanwhile */
        return 0;
    }
    struct seccomp_notif_addfd a;
    memset(&a, 0, sizeof a);
    a.id = req->id;
    a.flags = SECCOMP_ADDFD_FLAG_SEND;
    a.srcfd = (uint32_t)fd;
    a.newfd_flags = (uint32_t)(flags & O_CLOEXEC);
    int r = notif_ioctl(SECCOMP_IOCTL_NOTIF_ADDFD, &a);
    int err = errno;
    close(fd);
    if (r >= 0)
        stats.served++;
    else if (err == EMFILE)
        answer(req->id, -err); /* the process's own limit */
    else if (err != ENOENT && err != EINPROGRESS)
        return 0; /* not answered: Python's */
    return 1;
}

static int serve(pid_t tid, const struct seccomp_notif *req, const struct um_decide_in *in);

/* The real path of in's first path under its upper layer (in->upper): the
 * layer's directory followed by what follows the prefix in the view's path. */
static int upper_realize(const struct um_decide_in *in, char *out, size_t size)
{
    int i = in->upper;
    size_t t = prefix_len[i] == 1 ? 0 : prefix_len[i], u = strlen(prefix_upper[i]);
    const char *rest = in->path[0] + t;
    size_t r = strlen(rest);
    if (rest[0] != '/')
        return -EINVAL; /* the mount point itself: um_decide does not send it here */
    if (u + r + 1 > size)
        return -ENAMETOOLONG;
    memcpy(out, prefix_upper[i], u);
    memcpy(out + u, rest, r + 1);
    return (int)(u + r);
}

int serve_move(pid_t tid, const struct seccomp_notif *req, const struct um_decide_in *in)
{
    int served = serve(tid, req, in);
    if (served)
        decided_served(in->sc);
    return served;
}

static int serve(pid_t tid, const struct seccomp_notif *req, const struct um_decide_in *in)
{
    if (!serve_flags || (in->move < 0 && in->upper < 0) || in->abi != UM_ABI_X86_64 || thr(tid)->inner)
        return 0;
    const uint64_t *a = in->args;
    int nofollow = 0, open = 0, statx_call = 0, readlink_call = 0, access_call = 0;
    uint64_t flags = 0, buf = 0;
    int bufsiz = 0, mode = 0, aflags = 0, sflags = 0;
    unsigned smask = 0;
    switch (in->nr) {
    case UM_NR_X86_64_stat: buf = a[1]; break;
    case UM_NR_X86_64_lstat: buf = a[1]; nofollow = 1; break;
    case UM_NR_X86_64_newfstatat:
        if (a[3] & ~(uint64_t)(AT_SYMLINK_NOFOLLOW_ | AT_EMPTY_PATH_ | AT_NO_AUTOMOUNT_))
            return 0; /* EINVAL: the kernel's to say */
        buf = a[2];
        nofollow = (a[3] & AT_SYMLINK_NOFOLLOW_) != 0;
        break;
    case UM_NR_X86_64_statx:
        sflags = (int)a[2];
        smask = (unsigned)a[3];
        if ((unsigned)sflags & ~(unsigned)(AT_SYMLINK_NOFOLLOW_ | AT_EMPTY_PATH_ | AT_NO_AUTOMOUNT_ |
                                           AT_STATX_SYNC_TYPE_) ||
            (sflags & AT_STATX_SYNC_TYPE_) == AT_STATX_SYNC_TYPE_ || (smask & STATX_RESERVED_))
            return 0;
        buf = a[4];
        nofollow = (sflags & AT_SYMLINK_NOFOLLOW_) != 0;
        statx_call = 1;
        break;
    case UM_NR_X86_64_readlink: case UM_NR_X86_64_readlinkat:
        readlink_call = 1;
        nofollow = 1;
        buf = in->nr == UM_NR_X86_64_readlink ? a[1] : a[2];
        bufsiz = (int)(in->nr == UM_NR_X86_64_readlink ? a[2] : a[3]);
        break;
    case UM_NR_X86_64_access: case UM_NR_X86_64_faccessat: case UM_NR_X86_64_faccessat2:
        access_call = 1;
        mode = (int)(in->nr == UM_NR_X86_64_access ? a[1] : a[2]);
        aflags = in->nr == UM_NR_X86_64_faccessat2 ? (int)a[3] : 0;
        if ((mode & ~7) || ((unsigned)aflags & ~(unsigned)(AT_EACCESS_ | AT_SYMLINK_NOFOLLOW_ | AT_EMPTY_PATH_)))
            return 0;
        nofollow = (aflags & AT_SYMLINK_NOFOLLOW_) != 0;
        break;
    case UM_NR_X86_64_open: case UM_NR_X86_64_openat:
        if (!(serve_flags & UM_SERVE_OPEN) || thr(tid)->landlocked || landlock_reads)
            return 0;
        flags = in->nr == UM_NR_X86_64_open ? a[1] : a[2];
        flags &= 0xffffffffULL;
        if ((flags & (O_CREAT | O_TMPFILE_BIT | O_TRUNC)) || (flags & O_ACCMODE) != O_RDONLY)
            return 0; /* makes or changes a file: Python */
        if (flags & O_PATH)
            return 0; /* ADDFD passes no O_PATH file (fget refuses them) */
        nofollow = (flags & O_NOFOLLOW) != 0;
        open = 1;
        break;
    default:
        return 0;
    }
    if (!open && !(serve_flags & UM_SERVE_LOOKUP))
        return 0;
    if (!same_identity(tid)) {
        stats.served_fallback++;
        return 0;
    }
    static __thread char real[UM_PATH_BUF];
    if ((in->upper >= 0 ? upper_realize(in, real, sizeof real) : move_realize(in->slot[0].str, in->move, real, sizeof real)) < 0 ||
        strlen(real) >= PATH_MAX) {
        stats.served_fallback++;
        return 0; /* Python says ENAMETOOLONG */
    }
    if (readlink_call && bufsiz <= 0) {
        answer(req->id, -EINVAL); /* before any lookup, as the kernel */
        return 1;
    }
    struct lookup lk = {AT_FDCWD_, real, RESOLVE_NO_SYMLINKS_};
    int srcfd = -1, fd = in->upper >= 0 ? open_at(&lk, O_PATH | (nofollow ? O_NOFOLLOW : 0))
                                       : open_view(in->move, real, O_PATH | (nofollow ? O_NOFOLLOW : 0), &lk, &srcfd);
    if (fd == -ELOOP || fd == -EXDEV || fd == -ENOSYS || fd == -E2BIG || fd == -EAGAIN || fd == -EINVAL) {
        if (srcfd >= 0)
            close(srcfd);
        stats.served_fallback++;
        return 0; /* C cannot tell where the view's walk goes: Python walks it */
    }
    if (fd < 0 && in->upper >= 0 && (fd == -ENOENT || fd == -ENOTDIR)) {
        stats.served_fallback++;
        return 0; /* the upper file went meanwhile: the lower one may show through */
    }
    if (fd < 0) {
        answer(req->id, fd); /* the lookup's own errno: ENOENT, ENOTDIR, EACCES... */
        return 1;
    }
    int64_t val = 0;
    if (open) {
        int served = serve_open(req, &lk, flags, fd, in->upper >= 0);
        close(fd);
        if (srcfd >= 0)
            close(srcfd);
        if (!served)
            stats.served_fallback++;
        return served;
    }
    if (srcfd >= 0)
        close(srcfd);
    if (statx_call) {
        struct statx stx;
        if (statx(fd, "", AT_EMPTY_PATH | (sflags & (AT_STATX_SYNC_TYPE_ | AT_NO_AUTOMOUNT_)), smask, &stx))
            val = -errno;
        else if (still_valid(req->id))
            val = put(tid, buf, &stx, sizeof stx);
        else
            val = -ESRCH;
    } else if (readlink_call) {
        char target[PATH_MAX + 1];
        ssize_t n = readlinkat(fd, "", target, (size_t)bufsiz < sizeof target ? (size_t)bufsiz : sizeof target);
        if (n < 0)
            val = errno == ENOENT ? -EINVAL : -errno; /* "": ENOENT when it is no symlink */
        else if (still_valid(req->id))
            val = put(tid, buf, target, (size_t)n) ?: n;
        else
            val = -ESRCH;
    } else if (access_call) {
        val = syscall(UM_NR_X86_64_faccessat2, fd, "", mode, AT_EMPTY_PATH | (aflags & AT_EACCESS_)) ? -errno : 0;
    } else {
        struct stat st;
        if (fstatat(fd, "", &st, AT_EMPTY_PATH))
            val = -errno;
        else if (still_valid(req->id))
            val = put(tid, buf, &st, sizeof st);
        else
            val = -ESRCH;
    }
    close(fd);
    if (val == -ESRCH)
        return 1; /* the caller is gone: nothing to answer */
    if (val == -EPERM && !access_call && buf) {
        stats.served_fallback++;
        return 0; /* the monitor may not write its memory: Python's */
    }
    answer(req->id, val);
    return 1;
}
