/* decide.c - the fast-path decision: resolve paths, look up the tables */
#include "internal.h"

/* ------------------------------------------------------------------ */
/* path resolution for the fast path (lexical: no symlinks)            */
/* ------------------------------------------------------------------ */

/* Normalize an absolute path in place: collapse "//", drop ".", apply "..". */
static int normalize(char *p)
{
    char *out = p, *in = p;
    if (*in != '/')
        return -EINVAL;
    while (*in) {
        while (*in == '/')
            in++;
        if (!*in)
            break;
        char *end = strchrnul(in, '/');
        size_t l = (size_t)(end - in);
        if (l == 1 && in[0] == '.') {
            /* skip */
        } else if (l == 2 && in[0] == '.' && in[1] == '.') {
            while (out > p && *--out != '/')
                ;
        } else {
            *out++ = '/';
            memmove(out, in, l);
            out += l;
        }
        in = end;
    }
    if (out == p)
        *out++ = '/';
    *out = 0;
    return (int)(out - p);
}

static int read_link(const char *proc, char *out, int size)
{
    ssize_t n = readlink(proc, out, (size_t)size - 1);
    if (n < 0)
        return -errno;
    if (n >= size - 1)
        return -ENAMETOOLONG;
    out[n] = 0;
    return (int)n;
}

/* Does a path have a ".." component? */
static int has_dotdot(const char *p)
{
    for (const char *c = p; (c = strstr(c, "..")) != NULL; c += 2)
        if ((c == p || c[-1] == '/') && (c[2] == 0 || c[2] == '/'))
            return 1;
    return 0;
}

/* Resolve path argument `slot` of the call to an absolute, lexically
 * normalized path in out. An empty path with AT_EMPTY_PATH stands for its
 * dirfd: with fd_ok it resolves to the fd's path, without it -ENOENT (the
 * call acts on an open file, not on a path). Returns the length or -errno
 * (unreadable, too long, or the base directory is not a directory).
 * *climbs (if given): a relative path with a ".." component. */
static int resolve(int tid, const struct path_arg *pa, const uint64_t *args, char *out, int size, int fd_ok,
                   char *raw, int *climbs)
{
    if (climbs)
        *climbs = 0;
    if (pa->path < 0)
        return -ENOENT;
    char rel[PATH_MAX + 1];
    int n = um_read_string(tid, args[pa->path], rel, sizeof rel);
    if (n < 0)
        return n;
    stats.path_reads++;
    if (rel[0] == '/') {
        if (n >= size)
            return -ENAMETOOLONG;
        memcpy(out, rel, (size_t)n + 1);
        if (raw)
            memcpy(raw, rel, (size_t)n + 1);
        return normalize(out);
    }
    int dotdot = has_dotdot(rel);
    if (climbs)
        *climbs = dotdot;
    int dirfd = pa->dirfd >= 0 ? (int)args[pa->dirfd] : AT_FDCWD_;
    /* relative to a virtual cwd: only Python knows where that is */
    if (!fd_ok && n > 0 && dirfd == AT_FDCWD_ && thr(tid)->vcwd && !(thr(tid)->faithful && !dotdot))
        return -EAGAIN;
    /* "" is ENOENT unless AT_EMPTY_PATH makes it the dirfd itself */
    if (n == 0 && (!fd_ok || pa->emptyflg < 0 || !(args[pa->emptyflg] & AT_EMPTY_PATH_)))
        return -ENOENT;
    char proc[64];
    if (dirfd == AT_FDCWD_)
        snprintf(proc, sizeof proc, "/proc/%d/cwd", tid);
    else
        snprintf(proc, sizeof proc, "/proc/%d/fd/%d", tid, dirfd);
    int b = read_link(proc, out, size);
    if (b < 0)
        return b == -ENOENT ? -EBADF : b;
    if (out[0] != '/')
        return -ENOTDIR; /* a pipe, socket or anon inode: not a directory */
    if (n == 0)
        return normalize(out);
    if (b + 1 + n >= size)
        return -ENAMETOOLONG;
    out[b] = '/';
    memcpy(out + b + 1, rel, (size_t)n + 1);
    if (raw)
        memcpy(raw, out, (size_t)(b + 1 + n) + 1);
    return normalize(out);
}

int um_resolve_path(int tid, int abi, int sc, int slot, const uint64_t *args, char *out, int size)
{
    if (abi < 0 || abi >= UM_NABI || sc < 0 || sc >= nsc || slot < 0 || slot >= PATH_SLOTS || size < 2)
        return -EINVAL;
    return resolve(tid, &path_args[abi][sc][slot], args, out, size, 1, NULL, NULL);
}

/* How the prefix table sees a normalized absolute path: UM_PREFIX_PLAIN if
 * a plain prefix holds it; otherwise the kind of the longest layered or real
 * prefix holding it (a real subtree of a layered mount stays real, a layered
 * one inside that is layered again; at equal length layered wins, the safer
 * side); -1 if no prefix holds it. */
static int prefix_kind_of(const char *p)
{
    int kind = -1;
    size_t best = 0;
    for (int i = 0; i < nprefixes; i++) {
        size_t l = prefix_len[i];
        if (l > 1 && (strncmp(p, prefixes[i], l) != 0 || (p[l] != 0 && p[l] != '/')))
            continue;
        if (prefix_kind[i] == UM_PREFIX_PLAIN)
            return UM_PREFIX_PLAIN;
        if (kind < 0 || l > best || (l == best && prefix_kind[i] == UM_PREFIX_LAYERED)) {
            kind = prefix_kind[i];
            best = l;
        }
    }
    return kind;
}

int um_prefix_kind(const char *p) { return p[0] == '/' ? prefix_kind_of(p) : -EINVAL; }

/* Does this call modify the file system (the write table)? */
static int call_writes(int tid, int sc, const uint64_t *args)
{
    const uint64_t wflags = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC; /* O_TMPFILE has O_RDWR or O_WRONLY */
    uint64_t flags;
    switch (write_kind[sc]) {
    case UM_WRITE_ALWAYS:
        return 1;
    case UM_WRITE_OFLAGS:
        return (args[write_arg[sc]] & wflags) != 0;
    case UM_WRITE_OPENHOW:
        /* unreadable: Python (and then the kernel) gives the EFAULT */
        if (um_read_mem(tid, args[write_arg[sc]], &flags, sizeof flags) != sizeof flags)
            return 1;
        return (flags & wflags) != 0;
    case UM_WRITE_ACCESS:
        return (args[write_arg[sc]] & 2 /* W_OK */) != 0;
    }
    return 0;
}

/* Is there a symlink on this absolute path (as the kernel would walk it,
 * ".." included, the last component followed)? One openat2 with
 * RESOLVE_NO_SYMLINKS (Linux 5.6+) answers; procfs is left alone (its magic
 * links name the tracee's own files, the kernel resolves them right). */
struct um_open_how {
    uint64_t flags, mode, resolve;
};
static int openat2_state; /* 0 unknown/works, -1 absent */
static int check_symlinks; /* set by Python when an engine walks symlinks in the view */
static uint64_t family_set;  /* socket families engines claim (UM_CLAIM_FAMILY): bit f = family f */
static int fd_check;       /* set by Python: see fd_needs_python */

void um_set_symlink_check(int on) { check_symlinks = on; }
void um_set_families(uint64_t bits) { family_set = bits; }
void um_set_fd_check(int on) { fd_check = on; }

static int symlink_on_path(const char *raw)
{
    if (openat2_state < 0 || strncmp(raw, "/proc/", 6) == 0)
        return 0;
    struct um_open_how how = {O_PATH | O_CLOEXEC, 0, 0x04 /* RESOLVE_NO_SYMLINKS */};
    int fd = (int)syscall(437 /* openat2 */, AT_FDCWD_, raw, &how, sizeof how);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (errno == ENOSYS || errno == E2BIG)
        openat2_state = -1;
    return errno == ELOOP;
}

/* One path a symlink walk reaches: must Python see the call because of it?
 * Intermediate paths matter only if something below them is hidden; the
 * final one also if the upper layer changes the directory itself. */
static int visit_needs_python(const char *p, size_t n, int final, int writes)
{
    int k = prefix_kind_of(p);
    if (k == UM_PREFIX_PLAIN)
        return 1;
    if (k != UM_PREFIX_LAYERED)
        return 0;
    if (writes)
        return 1;
    const struct layer_slot *e = layer_find(p, n);
    return e && (e->kind == UM_LAYER_HIDE || final);
}

#define MAX_LINKS 40 /* the kernel's MAXSYMLINKS */

/* Walk a raw absolute path with a symlink on it as the kernel would, with
 * readlink(2) on the real tree, and check every path the walk reaches: a
 * link may lead under a prefix, or to a path the layer set names, although
 * the path does not lie there lexically. The last component is followed
 * even for calls that do not follow it: that checks one path more, which can
 * only send a call to Python that did not need it. A component the real tree
 * lacks ends the readlinks (the kernel stops there too), but the rest is
 * still checked lexically: the upper layer may have it. Returns 1 if Python
 * must see the call, or the walk is unsure; 0 if it may run natively. */
static int walk_needs_python(const char *raw, int writes)
{
    char cur[PATH_MAX + 1];      /* resolved so far, normalized, no trailing '/' */
    char rest[2 * PATH_MAX + 2]; /* still to walk */
    char link[PATH_MAX + 1];
    size_t n = strlen(raw), clen = 1;
    int links = 0, missing = 0;
    stats.layer_walks++;
    if (raw[0] != '/' || n >= sizeof rest)
        return 1;
    memcpy(rest, raw, n + 1);
    strcpy(cur, "/");
    for (char *r = rest;;) {
        while (*r == '/')
            r++;
        if (!*r)
            break;
        char *end = strchrnul(r, '/');
        size_t l = (size_t)(end - r), parent = clen;
        if (l == 1 && r[0] == '.') {
            r = end;
            continue;
        }
        if (l == 2 && r[0] == '.' && r[1] == '.') {
            /* ".." leaves the resolved directory; past a component the real
             * tree lacks, only the view knows where it leads */
            if (missing)
                return 1;
            char *slash = strrchr(cur, '/');
            clen = slash == cur ? 1 : (size_t)(slash - cur);
            cur[clen] = 0;
            r = end;
            continue;
        }
        if (clen + 1 + l > PATH_MAX)
            return 1;
        if (clen > 1)
            cur[clen++] = '/';
        memcpy(cur + clen, r, l);
        clen += l;
        cur[clen] = 0;
        r = end;
        if (visit_needs_python(cur, clen, 0, writes))
            return 1;
        if (clen >= 6 && strncmp(cur, "/proc/", 6) == 0)
            return 0; /* its magic links are the tracee's: see symlink_on_path */
        if (missing)
            continue;
        ssize_t t = readlink(cur, link, sizeof link);
        if (t < 0) {
            if (errno == EINVAL)
                continue; /* not a symlink */
            if (errno == ENOENT || errno == ENOTDIR) {
                missing = 1;
                continue;
            }
            return 1;
        }
        if (t == 0 || t >= (ssize_t)sizeof link)
            return t == 0 ? 0 : 1; /* an empty target is ENOENT natively */
        if (++links > MAX_LINKS)
            return 0; /* the kernel gives ELOOP by itself */
        /* rest = link + "/" + what follows the link */
        size_t m = strlen(r);
        if ((size_t)t + 1 + m + 1 > sizeof rest)
            return 1;
        memmove(rest + t + 1, r, m + 1);
        memcpy(rest, link, (size_t)t);
        rest[t] = '/';
        r = rest;
        /* a relative target is walked from the link's directory, an absolute one from "/" */
        clen = link[0] == '/' ? 1 : parent;
        cur[clen] = 0; /* cur[0] is always '/' */
    }
    return visit_needs_python(cur, clen, 1, writes);
}

/* An empty path with AT_EMPTY_PATH, or a NULL one (utimensat, futimesat),
 * names the dirfd itself (glibc's fstat is newfstatat(fd, "",
 * AT_EMPTY_PATH)): Python sees the call if that fd's file lies under a plain
 * prefix (a module that serves directory listings from a private directory
 * must translate fstat on them), or if the call writes and the file lies
 * under a layered prefix (a lower file changed through an fd, as futimens or
 * fchownat(fd, "", AT_EMPTY_PATH) do, must be copied up first). Costs a
 * readlink, so only with fd_check. */
static int fd_needs_python(int tid, int sc, const struct path_arg *pa, const uint64_t *args)
{
    char c, proc[64], path[PATH_MAX + 1];
    if (pa->dirfd < 0)
        return 0;
    if (args[pa->path] != 0) {
        if (pa->emptyflg < 0 || !(args[pa->emptyflg] & AT_EMPTY_PATH_))
            return 0;
        if (um_read_mem(tid, args[pa->path], &c, 1) != 1 || c != 0)
            return 0;
    }
    int fd = (int)args[pa->dirfd];
    if (fd == AT_FDCWD_)
        snprintf(proc, sizeof proc, "/proc/%d/cwd", tid);
    else
        snprintf(proc, sizeof proc, "/proc/%d/fd/%d", tid, fd);
    if (read_link(proc, path, sizeof path) < 0 || path[0] != '/')
        return 0; /* a bad fd (the kernel says so), or a pipe, socket ... */
    int k = prefix_kind_of(path);
    return k == UM_PREFIX_PLAIN || (k == UM_PREFIX_LAYERED && call_writes(tid, sc, args));
}

/* Is fd's file under a plain prefix (a private directory of a module, such
 * as viewfs's listing directories, whose getdents it fixes)? A readlink. */
static int fd_under_plain(int tid, int fd)
{
    char proc[64], path[PATH_MAX + 1];
    if (fd < 0)
        return 0;
    snprintf(proc, sizeof proc, "/proc/%d/fd/%d", tid, fd);
    if (read_link(proc, path, sizeof path) < 0 || path[0] != '/')
        return 0; /* a bad fd (the kernel says so), or a pipe, socket ... */
    return prefix_kind_of(path) == UM_PREFIX_PLAIN;
}

/* Does Python need to see this trapped call? For each path argument: under
 * a plain prefix, yes; under a layered one (and no real one inside it), if
 * the call writes or the layer set names the path; and if a symlink is on
 * the way, whatever the walk finds (see docs/internals.md). */
int needs_python(int tid, int abi, int sc, const uint64_t *args)
{
    int c = claim[abi][sc];
    if (c & UM_CLAIM_ALL)
        return 1;
    if ((c & UM_CLAIM_FD) && fd_under_plain(tid, (int)args[0]))
        return 1;
    if ((c & UM_CLAIM_VCWD) && thr(tid)->vcwd)
        return 1;
    if (c & UM_CLAIM_FAMILY) {
        int family = (int)args[0];
        if (family < 0 || family >= 64 || (family_set >> family) & 1)
            return 1;
    }
    if ((c & UM_CLAIM_UNIXADDR) && args[2] > 2) {
        unsigned char head[3];
        if (um_read_mem(tid, args[1], head, sizeof head) == (int)sizeof head && head[0] == AF_UNIX &&
            head[1] == 0 && head[2] != 0)
            return 1;
    }
    if (!(c & UM_CLAIM_PATH))
        return 0;
    char buf[PATH_MAX + 1], raw[PATH_MAX + 1];
    int writes = -1; /* looked up once, when a layered path needs it */
    for (int s = 0; s < PATH_SLOTS; s++) {
        const struct path_arg *pa = &path_args[abi][sc][s];
        if (pa->path < 0)
            continue;
        /* an empty path with AT_EMPTY_PATH names an open file, not a path:
         * whoever owns that fd decides, not the prefix table */
        int climbs;
        int n = resolve(tid, pa, args, buf, sizeof buf, 0, raw, &climbs);
        if (fd_check && (n == -ENOENT || n == -EFAULT) && fd_needs_python(tid, sc, pa, args))
            return 1;
        if (n == -ENAMETOOLONG || n == -EFAULT || n == -ENOENT || n == -ENOTDIR || n == -EBADF)
            continue; /* the kernel gives the tracee the same errno */
        if (n < 0)
            return 1; /* unsure: let Python decide */
        int k = prefix_kind_of(buf);
        if (k == UM_PREFIX_PLAIN)
            return 1;
        /* ".." from a directory of a layer's upper directory: its parent
         * there lacks what the view shows (the lower layer's names) */
        if (climbs && (k == UM_PREFIX_ALIAS || prefix_kind_of(raw) == UM_PREFIX_ALIAS))
            return 1;
        if (k == UM_PREFIX_LAYERED) {
            if (writes < 0)
                writes = call_writes(tid, sc, args);
            if (writes || layer_hit(buf, (size_t)n))
                return 1;
        }
        if (check_symlinks && nprefixes > 0 && symlink_on_path(raw)) {
            if (writes < 0)
                writes = call_writes(tid, sc, args);
            if (walk_needs_python(raw, writes))
                return 1;
        }
    }
    return 0;
}
