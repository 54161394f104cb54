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

/* Does path p name the cwd itself (".", "./.", ".//": "." components
 * only)? A chdir there leaves the cwd, real and virtual, as it was: under a
 * faithful cwd the path rules alone decide it (a loop of chdir(".") is
 * strace's filter_seccomp-perf benchmark). */
static int names_cwd(const char *p)
{
    if (p[0] != '.')
        return 0;
    for (const char *c = p; *c; c++)
        if (*c == '.' ? c[1] == '.' : *c != '/')
            return 0;
    return 1;
}

/* At equal length (one string given two kinds) the kind that sends more
 * calls to Python wins: plain, then kernel, then layered. */
static int tie_rank(int kind)
{
    return kind == UM_PREFIX_PLAIN || kind == UM_PREFIX_MOVE ? 3 : kind == UM_PREFIX_KERNEL ? 2 : kind == UM_PREFIX_LAYERED ? 1 : 0;
}

/* The kind of the longest prefix holding the normalized absolute path p
 * (a real subtree of a layered mount stays real, a layered one inside that
 * is layered again), -1 if none; *at (if given) gets its index. With
 * plain_first, a plain prefix holding p wins whatever its length: p is a
 * path of the view, which that engine must see; so does a move prefix
 * (UM_PREFIX_MOVE), unless one of its exceptions (a longer real prefix:
 * Python gives a move that kind only when no other engine has a prefix
 * there) holds p. Without, p is a real path (an fd's, or where a faithful
 * cwd leads): a plain or move prefix that merely contains it lexically (a
 * move mount of /tmp, whose source lies in the real /tmp) says nothing; the
 * prefix of its directory (the source: an alias) does. */
static int prefix_match(const char *p, int *at, int plain_first)
{
    int kind = -1, where = -1, move = -1;
    size_t best = 0, real_len = 0;
    for (int i = 0; i < nprefixes; i++) {
        size_t l = prefix_len[i];
        int k = prefix_kind[i];
        if (l > 1 && (strncmp(p, prefixes[i], l) != 0 || (p[l] != 0 && p[l] != '/')))
            continue;
        if (plain_first && k == UM_PREFIX_PLAIN) {
            kind = k;
            where = i;
            move = -1;
            break;
        }
        if (plain_first && k == UM_PREFIX_MOVE)
            move = i;
        if (k == UM_PREFIX_REAL && l > real_len)
            real_len = l;
        if (kind < 0 || l > best || (l == best && tie_rank(k) > tie_rank(kind))) {
            kind = k;
            where = i;
            best = l;
        }
    }
    if (move >= 0 && real_len <= prefix_len[move]) {
        kind = UM_PREFIX_MOVE;
        where = move;
    }
    if (at)
        *at = where;
    return kind;
}

static int prefix_kind_at(const char *p, int *at) { return prefix_match(p, at, 1); }
static int prefix_kind_of(const char *p) { return prefix_match(p, NULL, 1); }
static int prefix_kind_longest(const char *p) { return prefix_match(p, NULL, 0); }
static int is_alias(int kind) { return kind == UM_PREFIX_ALIAS || kind == UM_PREFIX_ALIAS_CLEAN; }
/* a prefix whose calls go to Python (a move's, unless C serves them) */
static int is_plain(int kind) { return kind == UM_PREFIX_PLAIN || kind == UM_PREFIX_MOVE; }

/* Is the (absolute) base directory of a relative path at or under prefix i? */
static int base_under(const char *base, int i)
{
    size_t l = prefix_len[i];
    return l == 1 || (strncmp(base, prefixes[i], l) == 0 && (base[l] == 0 || base[l] == '/'));
}

int um_prefix_kind(const char *p) { return p[0] == '/' ? prefix_kind_of(p) : -EINVAL; }

int um_openat2(int dirfd, const char *path, uint64_t flags, uint64_t resolve)
{
    struct um_open_how how = {flags, 0, resolve};
    int fd = (int)syscall(UM_NR_X86_64_openat2, dirfd, path, &how, sizeof how);
    return fd < 0 ? -errno : fd;
}


/* Is there a symlink on this absolute path (as the kernel would walk it,
 * ".." included, the last component followed if follow)? One openat2 with
 * RESOLVE_NO_SYMLINKS (Linux 5.6+) answers (with O_NOFOLLOW it opens a last
 * component that is a symlink); procfs is left alone (its magic links name
 * the tracee's own files, the kernel resolves them right). */
static int openat2_state; /* 0 unknown/works, -1 absent */
static int check_symlinks; /* set by Python when an engine walks symlinks in the view */
static uint64_t family_set;  /* socket families engines claim (UM_CLAIM_FAMILY): bit f = family f */
static int fd_check;       /* set by Python: an empty or NULL path's dirfd is looked at (um_decide) */

void um_set_symlink_check(int on) { check_symlinks = on; }
void um_set_families(uint64_t bits) { family_set = bits; }
static int socknames;  /* UM_CLAIM_SOCKNAME calls go to Python (a rewritten AF_UNIX name is bound) */
void um_set_socknames(int on) { socknames = on; }
void um_set_fd_check(int on) { fd_check = on; }

static int symlink_on_path(const char *raw, int follow)
{
    if (openat2_state < 0 || strncmp(raw, "/proc/", 6) == 0)
        return 0;
    struct um_open_how how = {O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW), 0, RESOLVE_NO_SYMLINKS_};
    int fd = (int)syscall(UM_NR_X86_64_openat2, AT_FDCWD_, raw, &how, sizeof how);
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
static int visit_needs_python(const char *p, size_t n, uint64_t hash, int final, int writes)
{
    int k = prefix_kind_of(p);
    if (is_plain(k) || k == UM_PREFIX_KERNEL)
        return 1;
    if (k == UM_PREFIX_DEVICES)
        return writes; /* reached through a symlink: Python looks */
    if (k != UM_PREFIX_LAYERED)
        return 0;
    if (writes)
        return 1;
    const struct layer_slot *e = layer_find_hashed(p, n, hash);
    return e && (layer_hides(e->kind) || final);
}

#define MAX_LINKS 40 /* the kernel's MAXSYMLINKS */

/* Walk a raw absolute path with a symlink on it as the kernel would, with
 * readlinkat(2) on the real tree, and check every path the walk reaches: a
 * link may lead under a prefix, or to a path the layer set names, although
 * the path does not lie there lexically. The last component is followed
 * even for calls that do not follow it: that checks one path more, which can
 * only send a call to Python that did not need it. A component the real tree
 * lacks ends the readlinks (the kernel stops there too), but the rest is
 * still checked lexically: the upper layer may have it. Returns 1 if Python
 * must see the call, or the walk is unsure; 0 if it may run natively.
 * Linear in the path's length: each component is looked up from its
 * parent's fd and hashed once, as a continuation of its parent's hash. */
static int proc_magic(const char *p);
static int proc_mem(const char *p);

static int walk_needs_python(const char *raw, int writes)
{
    static __thread char rest[2 * PATH_MAX + 2]; /* still to walk */
    /* the resolved path's ancestors, at each depth: its length, its hash */
    static __thread struct { size_t len; uint64_t h; } up[PATH_MAX / 2 + 2];
    char cur[PATH_MAX + 1]; /* resolved so far, normalized, no trailing '/' */
    char link[PATH_MAX + 1];
    size_t n = strlen(raw), clen = 1;
    int links = 0, missing = 0, depth = 0, answer = 1;
    stats.layer_walks++;
    if (raw[0] != '/' || n >= sizeof rest)
        return 1;
    /* the directory cur names: each component is looked at from its parent
     * (readlinkat, openat), never again from the root */
    int dirfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return 1;
    memcpy(rest, raw, n + 1);
    strcpy(cur, "/");
    up[0].len = 1;
    up[0].h = layer_hash_more(LAYER_HASH_START, "/", 1);
    for (char *r = rest;;) {
        while (*r == '/')
            r++;
        if (!*r)
            break;
        char *end = strchrnul(r, '/');
        size_t l = (size_t)(end - r);
        if (l == 1 && r[0] == '.') {
            r = end;
            continue;
        }
        if (l == 2 && r[0] == '.' && r[1] == '.') {
            /* ".." leaves the resolved directory; past a component the real
             * tree lacks, only the view knows where it leads */
            if (missing)
                goto out;
            if (depth > 0)
                depth--;
            clen = up[depth].len;
            cur[clen] = 0;
            int fd = openat(dirfd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0)
                goto out;
            close(dirfd);
            dirfd = fd;
            r = end;
            continue;
        }
        if (clen + 1 + l > PATH_MAX)
            goto out;
        if (clen > 1)
            cur[clen++] = '/';
        const char *name = cur + clen;
        memcpy(cur + clen, r, l);
        clen += l;
        cur[clen] = 0;
        r = end;
        uint64_t h = layer_hash_more(up[depth].h, cur + up[depth].len, clen - up[depth].len);
        depth++;
        up[depth].len = clen;
        up[depth].h = h;
        if (visit_needs_python(cur, clen, h, 0, writes))
            goto out;
        if (clen >= 6 && strncmp(cur, "/proc/", 6) == 0) {
            /* the monitor must not follow procfs links in its own context:
             * a magic link goes to Python (proc_magic), the rest is real */
            char whole[2 * PATH_MAX + 2];
            snprintf(whole, sizeof whole, "%s%s", cur, r);
            answer = proc_magic(whole) || (writes && proc_mem(whole));
            goto out;
        }
        if (missing)
            continue;
        /* a directory (one call for most components): step into it */
        int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
            close(dirfd);
            dirfd = fd;
            continue;
        }
        if (errno != ENOTDIR && errno != ENOENT)
            goto out;
        /* a symlink, a file, or nothing */
        ssize_t t = readlinkat(dirfd, name, link, sizeof link);
        if (t < 0 && errno == EINVAL) {
            missing = 1; /* a file: a component after it is ENOTDIR natively */
            continue;
        }
        if (t < 0) {
            if (errno == ENOENT || errno == ENOTDIR) {
                missing = 1;
                continue;
            }
            goto out;
        }
        if (t == 0 || t >= (ssize_t)sizeof link) {
            answer = t == 0 ? 0 : 1; /* an empty target is ENOENT natively */
            goto out;
        }
        if (++links > MAX_LINKS) {
            answer = 0; /* the kernel gives ELOOP by itself */
            goto out;
        }
        /* rest = link + "/" + what follows the link */
        size_t m = strlen(r);
        if ((size_t)t + 1 + m + 1 > sizeof rest)
            goto out;
        memmove(rest + t + 1, r, m + 1);
        memcpy(rest, link, (size_t)t);
        rest[t] = '/';
        r = rest;
        /* a relative target is walked from the link's directory (dirfd still
         * is), an absolute one from "/" */
        depth = link[0] == '/' ? 0 : depth - 1;
        clen = up[depth].len;
        cur[clen] = 0; /* cur[0] is always '/' */
        if (link[0] == '/') {
            int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (fd < 0)
                goto out;
            close(dirfd);
            dirfd = fd;
        }
    }
    answer = visit_needs_python(cur, clen, up[depth].h, 1, writes);
out:
    close(dirfd);
    return answer;
}


/* The next component of a path at *c (skipping "/" and "." ones, not
 * ".."): its start, with *len its length; NULL at the end. */
static const char *next_comp(const char **c, size_t *len)
{
    for (;;) {
        while (**c == '/')
            (*c)++;
        if (!**c)
            return NULL;
        const char *s = *c, *e = strchrnul(s, '/');
        *c = e;
        if (e - s == 1 && s[0] == '.')
            continue;
        *len = (size_t)(e - s);
        return s;
    }
}

static int comp_is(const char *s, size_t l, const char *name) { return l == strlen(name) && !strncmp(s, name, l); }

/* Does the absolute path p (raw or normalized) go through a magic link of
 * procfs that names a file of a process: /proc/P/root, /proc/P/cwd or
 * /proc/P/fd/N (P also as P/task/T), as itself or with a rest after it,
 * before any ".."? The kernel follows those to the real file, past every
 * mount of the view; the cwd tracker resolves them in the view
 * (umview/cwd.py). */
/* /proc/P/mem or /proc/P/task/T/mem: a write through it ignores page
 * protections, the read-only region of pinned paths among them (pin.c), so
 * a call that opens it for writing goes to Python (the guard refuses it). */
static int proc_mem(const char *p)
{
    const char *c = p, *s;
    size_t l;
    if (!(s = next_comp(&c, &l)) || !comp_is(s, l, "proc") || !(s = next_comp(&c, &l)) || comp_is(s, l, "..") ||
        !(s = next_comp(&c, &l)))
        return 0;
    if (comp_is(s, l, "task") && (!(s = next_comp(&c, &l)) || comp_is(s, l, "..") || !(s = next_comp(&c, &l))))
        return 0;
    return comp_is(s, l, "mem") && !next_comp(&c, &l);
}

static int proc_magic(const char *p)
{
    const char *c = p, *s;
    size_t l;
    if (!(s = next_comp(&c, &l)) || !comp_is(s, l, "proc"))
        return 0;
    if (!(s = next_comp(&c, &l)) || comp_is(s, l, ".."))
        return 0;
    if (!(s = next_comp(&c, &l)))
        return 0;
    if (comp_is(s, l, "task")) {
        if (!(s = next_comp(&c, &l)) || comp_is(s, l, "..") || !(s = next_comp(&c, &l)))
            return 0;
    }
    if (comp_is(s, l, "root") || comp_is(s, l, "cwd") || comp_is(s, l, "exe"))
        return 1;
    return comp_is(s, l, "fd") && (s = next_comp(&c, &l)) != NULL && !comp_is(s, l, "..");
}

/* ------------------------------------------------------------------ */
/* move mounts: the real path of a view's path, literally              */
/* ------------------------------------------------------------------ */

/* Does a ".." of the absolute path raw (as the process gave it, made
 * absolute) leave a directory that the kernel, walking the real tree, would
 * find other than the view shows it: one under a plain or kernel prefix
 * (another directory serves it), or one a layered mount hides or replaces
 * (removed, made only in the upper layer, a file there)? The normalized
 * path skips that directory; the kernel walks it, and it must be one, in
 * the view: "gone/../f" fails with ENOENT, where "f" would not. A
 * relative path's base (its first base_len bytes) is a directory the
 * kernel holds, not one it walks: a ".." out of it goes where the kernel
 * takes it. */
static int climbs_through_view(const char *raw, size_t base_len)
{
    static __thread char cur[UM_PATH_BUF];
    size_t len = 0; /* cur holds the components walked so far: "/a/b", "" for / */
    for (const char *c = raw; *c;) {
        if (*c == '/') {
            c++;
            continue;
        }
        const char *s = strchr(c, '/');
        size_t l = s ? (size_t)(s - c) : strlen(c);
        if (l == 2 && c[0] == '.' && c[1] == '.') {
            if (len > base_len) {
                cur[len] = 0;
                int k = prefix_kind_of(cur);
                if (is_plain(k) || k == UM_PREFIX_KERNEL || (k == UM_PREFIX_LAYERED && layer_hides_dir(cur, len)))
                    return 1;
            }
            if (len > 0) {
                while (len > 0 && cur[len - 1] != '/')
                    len--;
                len--; /* its "/" */
            }
        } else if (!(l == 1 && c[0] == '.')) {
            if (len + 1 + l >= sizeof cur)
                return 1;
            cur[len++] = '/';
            memcpy(cur + len, c, l);
            len += l;
        }
        c += l;
    }
    return 0;
}

/* Is the path of slot st (resolved: path, n bytes) one whose upper file or
 * directory (UM_LAYER_FILE, UM_LAYER_DIR) the kernel reaches from the upper
 * layer as the view reaches it? It has no trailing "/" and no "..": its
 * lexical form is then the walk of the view, whose directories down to an
 * upper entry are all upper directories (emulate.c's lookup there allows no
 * symlink). A "." is walked as the directory before it, and emulate.c
 * serves the lexical form, which drops it: inside the path the entry found
 * below it shows that one is a directory; a last "." is taken only on an
 * upper directory ("f/." on a file is ENOTDIR natively: Python's). */
static int upper_literal(const struct um_decide_slot *st, const char *raw, const char *path, size_t n)
{
    size_t l = strlen(st->str);
    int last_dot = l > 0 && st->str[l - 1] == '.' && (l == 1 || st->str[l - 2] == '/');
    return st->state == UM_SLOT_PATH && l > 0 && st->str[l - 1] != '/' && !has_dotdot(st->str) && raw[0] == '/' &&
           (!last_dot || layer_upper_dir(path, n));
}

/* Is the absolute path raw (as the process gave it) one whose real path
 * under move prefix i the kernel walks as the view does, symlinks aside:
 * every directory the walk passes through (a ".." included) lies under the
 * same move prefix, none in one of its exceptions, and no ".." climbs above
 * the move's target? (Symlinks: emulate.c's lookup leaves no symlink or
 * keeps the walk inside the source, open_view.) */
static int move_literal(const char *raw, int i)
{
    if (!has_dotdot(raw))
        return 1; /* every directory on the way holds the final path */
    static __thread char cur[UM_PATH_BUF];
    size_t clen = 0, tlen = prefix_len[i] == 1 ? 0 : prefix_len[i];
    const char *c = raw, *s;
    size_t l;
    cur[0] = 0;
    while ((s = next_comp(&c, &l)) != NULL) {
        if (comp_is(s, l, "..")) {
            if (clen <= tlen)
                return 0; /* above the target: another tree */
            while (clen > 0 && cur[--clen] != '/')
                ;
            cur[clen] = 0;
        } else {
            if (clen + 1 + l >= sizeof cur)
                return 0;
            cur[clen++] = '/';
            memcpy(cur + clen, s, l);
            clen += l;
            cur[clen] = 0;
        }
        int at = -1;
        if (clen > 0 && (prefix_match(cur, &at, 1) != UM_PREFIX_MOVE || at != i))
            return 0;
    }
    return 1;
}

int move_holds(int i, const char *real)
{
    static __thread char view[UM_PATH_BUF];
    size_t n = prefix_src_len[i], tl = prefix_len[i] == 1 ? 0 : prefix_len[i];
    if (n && (strncmp(real, prefix_src[i], n) != 0 || (real[n] != 0 && real[n] != '/')))
        return 0;
    size_t rest = strlen(real + n);
    if (tl + rest + 2 > sizeof view)
        return 0;
    memcpy(view, prefixes[i], tl);
    memcpy(view + tl, real + n, rest + 1);
    if (tl + rest == 0)
        strcpy(view, "/");
    int at = -1;
    return prefix_match(view, &at, 1) == UM_PREFIX_MOVE && at == i;
}

int move_realize(const char *raw, int i, char *out, size_t size)
{
    if (i < 0 || i >= nprefixes || prefix_kind[i] != UM_PREFIX_MOVE)
        return -EINVAL;
    /* consume the target's components from raw ("." and "//" skipped) */
    const char *c = raw, *t = prefixes[i], *s, *ts;
    size_t l, tl;
    while ((ts = next_comp(&t, &tl)) != NULL) {
        s = next_comp(&c, &l);
        if (!s || l != tl || strncmp(s, ts, l) != 0)
            return -EINVAL;
    }
    size_t n = prefix_src_len[i], rest = strlen(c);
    if (n + rest + 2 > size)
        return -ENAMETOOLONG;
    memcpy(out, prefix_src[i], n);
    memcpy(out + n, c, rest + 1);
    if (n + rest == 0) {
        out[0] = '/';
        out[1] = 0;
        return 1;
    }
    return (int)(n + rest);
}

/* ------------------------------------------------------------------ */
/* gathering: what the decision needs from the tracee                  */
/* ------------------------------------------------------------------ */

/* What the dirfd (or, for AT_FDCWD, the cwd) of thread tid names, into base.
 * 0, or -EBADF for a bad fd (the kernel says so too). */
static int read_base(pid_t tid, int dirfd, char *base)
{
    char proc[64];
    if (dirfd == AT_FDCWD_)
        snprintf(proc, sizeof proc, "/proc/%d/cwd", tid);
    else
        snprintf(proc, sizeof proc, "/proc/%d/fd/%d", tid, dirfd);
    int b = read_link(proc, base, UM_PATH_BUF);
    if (b < 0)
        return b == -ENOENT ? -EBADF : b;
    return 0;
}

/* Did the kernel refuse the monitor a read of the process (its memory, its
 * /proc/PID/cwd or fd/N)? It does when the process is not dumpable
 * (prctl(PR_SET_DUMPABLE, 0), or it runs a program it may not read) and the
 * monitor lacks CAP_SYS_PTRACE: being its tracer is not enough. */
static int refused(int err) { return err == -EPERM || err == -EACCES; }

/* Read path argument pa of the call, and the directory it starts from when
 * it is relative; for an empty or NULL path that names its dirfd, that
 * fd's file only if fd_base (a readlink that fstat, glibc's
 * newfstatat(fd, "", AT_EMPTY_PATH), would pay at every call). */
static void gather_slot(pid_t tid, const struct path_arg *pa, const uint64_t *args, struct um_decide_slot *s,
                        int fd_base)
{
    s->state = UM_SLOT_NONE;
    s->base_known = 0;
    s->str[0] = 0;
    if (pa->path < 0)
        return;
    int dirfd = pa->dirfd >= 0 ? (int)args[pa->dirfd] : AT_FDCWD_;
    s->cwd_relative = dirfd == AT_FDCWD_;
    int n;
    if (args[pa->path] == 0 && pa->dirfd >= 0) {
        s->state = UM_SLOT_NULL;
    } else if ((n = um_read_string(tid, args[pa->path], s->str, UM_PATH_BUF)) < 0) {
        s->state = UM_SLOT_ERROR;
        s->err = refused(n) ? -EACCES : n;
        return;
    } else {
        stats.path_reads++;
        if (s->str[0] == '/') {
            s->state = UM_SLOT_PATH;
            return;
        }
        if (n > 0) {
            s->state = UM_SLOT_PATH;
        } else if (pa->dirfd >= 0 && pa->emptyflg >= 0 && (args[pa->emptyflg] & AT_EMPTY_PATH_)) {
            s->state = UM_SLOT_EMPTY;
        } else {
            s->state = UM_SLOT_ERROR; /* "" is ENOENT unless AT_EMPTY_PATH makes it the dirfd */
            s->err = -ENOENT;
            return;
        }
    }
    if (s->state != UM_SLOT_PATH && !fd_base)
        return;
    int e = read_base(tid, dirfd, s->base);
    if (refused(e)) {
        s->state = UM_SLOT_ERROR;
        s->err = -EACCES;
        return;
    }
    if (e && s->state == UM_SLOT_PATH) {
        s->state = UM_SLOT_ERROR;
        s->err = e;
    }
    s->base_known = !e;
}

/* Fill in what um_decide needs for this call, reading only what its claim
 * bits ask for. Returns 1 if it read tracee memory or /proc (a notification
 * must then be checked as still valid before acting on it), else 0. */
static int gather(pid_t tid, struct um_decide_in *in)
{
    int abi = in->abi, read = 0;
    in->vcwd = (thr(tid)->vcwd ? UM_VCWD : 0) | (thr(tid)->faithful ? UM_VCWD_FAITHFUL : 0) |
               (thr(tid)->vroot ? UM_VROOT : 0);
    in->walk = 1;
    in->fd0[0] = 0;
    in->unix_path = 0;
    in->how_readable = 0;
    in->unreadable = 0;
    for (int s = 0; s < PATH_SLOTS; s++)
        in->slot[s].state = UM_SLOT_NONE;
    int sc = abi < 0 || abi >= UM_NABI ? -1 : lookup_sc(abi, (long)in->nr);
    if (sc < 0)
        return 0;
    int c = claim[abi][sc];
    if (c & (UM_CLAIM_REFUSE | UM_CLAIM_ALL))
        return 0;
    if ((c & UM_CLAIM_FD) && (int)in->args[0] >= 0) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/%d/fd/%d", tid, (int)in->args[0]);
        int e = read_link(proc, in->fd0, UM_PATH_BUF);
        if (e < 0)
            in->fd0[0] = 0; /* a bad fd: the kernel says so */
        in->unreadable |= refused(e);
        read = 1;
    }
    if ((c & UM_CLAIM_UNIXADDR) && in->args[2] > 2) {
        unsigned char head[3];
        int n = um_read_mem(tid, in->args[1], head, sizeof head);
        in->unix_path = n == (int)sizeof head && head[0] == AF_UNIX && head[1] == 0 && head[2] != 0;
        in->unreadable |= refused(n);
        read = 1;
    }
    if (!(c & UM_CLAIM_PATH))
        return read;
    for (int s = 0; s < PATH_SLOTS; s++) {
        gather_slot(tid, &path_args[abi][sc][s], in->args, &in->slot[s], fd_check);
        in->unreadable |= in->slot[s].state == UM_SLOT_ERROR && in->slot[s].err == -EACCES;
    }
    if (write_kind[sc] == UM_WRITE_OPENHOW)
        in->how_readable = um_read_mem(tid, in->args[write_arg[sc]], &in->how_flags, sizeof in->how_flags) ==
                           (int)sizeof in->how_flags;
    return 1;
}

/* ------------------------------------------------------------------ */
/* resolving a gathered path (lexical: no symlinks)                    */
/* ------------------------------------------------------------------ */

/* The slot's path made absolute and normalized into out (UM_PATH_BUF
 * bytes), as um_resolve_path gives it: an empty path with AT_EMPTY_PATH
 * stands for its dirfd's file. Its length, or -errno (unreadable, too long,
 * the base not a directory; -EAGAIN: the base was not gathered). raw (if
 * given) gets the absolute path before normalizing, *climbs whether a
 * relative path has a ".." component. */
static int slot_path(const struct um_decide_slot *s, char *out, char *raw, int *climbs)
{
    *climbs = 0;
    if (s->state == UM_SLOT_ERROR)
        return s->err;
    if (s->state == UM_SLOT_NULL)
        return -EFAULT;
    if (s->state != UM_SLOT_PATH && s->state != UM_SLOT_EMPTY)
        return -ENOENT;
    size_t n = strnlen(s->str, UM_PATH_BUF);
    if (n >= UM_PATH_BUF)
        return -ENAMETOOLONG;
    if (s->state == UM_SLOT_PATH && s->str[0] == '/') {
        memcpy(out, s->str, n + 1);
    } else {
        if (s->state == UM_SLOT_PATH)
            *climbs = has_dotdot(s->str);
        if (!s->base_known)
            return -EAGAIN;
        if (s->base[0] != '/')
            return -ENOTDIR; /* a pipe, socket or anon inode: not a directory */
        size_t b = strnlen(s->base, UM_PATH_BUF);
        if (b + (n ? 1 + n : 0) >= UM_PATH_BUF)
            return -EOVERFLOW; /* the kernel takes it (relative), C cannot hold it absolute */
        memcpy(out, s->base, b + 1);
        if (n) {
            out[b] = '/';
            memcpy(out + b + 1, s->str, n + 1);
        }
    }
    if (raw)
        strcpy(raw, out);
    return normalize(out);
}

int um_resolve_path(int tid, int abi, int sc, int slot, const uint64_t *args, char *out, int size)
{
    static struct um_decide_slot s;
    static char buf[UM_PATH_BUF];
    int climbs;
    if (abi < 0 || abi >= UM_NABI || sc < 0 || sc >= nsc || slot < 0 || slot >= PATH_SLOTS || size < 2)
        return -EINVAL;
    gather_slot(tid, &path_args[abi][sc][slot], args, &s, 1);
    int n = slot_path(&s, buf, NULL, &climbs);
    if (n < 0)
        return n;
    if (n >= size)
        return -ENAMETOOLONG;
    memcpy(out, buf, (size_t)n + 1);
    return n;
}

/* Does this call modify the file system (the write table)? */
static int call_writes(const struct um_decide_in *in, int sc)
{
    switch (write_kind[sc]) {
    case UM_WRITE_ALWAYS:
        return 1;
    case UM_WRITE_OFLAGS:
        return (in->args[write_arg[sc]] & UM_O_WRITES) != 0;
    case UM_WRITE_OPENHOW:
        /* unreadable: Python (and then the kernel) gives the EFAULT */
        return !in->how_readable || (in->how_flags & UM_O_WRITES) != 0;
    case UM_WRITE_ACCESS:
        return (in->args[write_arg[sc]] & 2 /* W_OK */) != 0;
    }
    return 0;
}

/* UM_PREFIX_DEVICES: is this write an open of an existing character device,
 * FIFO or socket, with no symlink on its path (raw: absolute, as given)? */
static int opens_a_device(const struct um_decide_in *in, int sc, const char *raw)
{
    if (write_kind[sc] != UM_WRITE_OFLAGS && write_kind[sc] != UM_WRITE_OPENHOW)
        return 0;
    if (symlink_on_path(raw, 1))
        return 0;
    struct stat st;
    if (lstat(raw, &st))
        return 0;
    return S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
}

int decided_writes(const struct um_decide_in *in) { return in->sc >= 0 && call_writes(in, in->sc); }

/* ------------------------------------------------------------------ */
/* the decision                                                        */
/* ------------------------------------------------------------------ */

/* Does the call follow a symlink in the last component of path slot s?
 * (syscalls.follows_last; an open_how it could not read: it follows) */
static int follows_last(const struct um_decide_in *in, int sc, int s)
{
    if (in->abi < 0 || in->abi >= UM_NABI || sc < 0 || sc >= nsc || s < 0 || s >= PATH_SLOTS)
        return 1;
    const struct path_arg *pa = &path_args[in->abi][sc][s];
    uint64_t a = pa->nofollow_arg >= 0 ? in->args[pa->nofollow_arg] : 0;
    switch (pa->nofollow) {
    case UM_NOFOLLOW_ALWAYS:
        return 0;
    case UM_NOFOLLOW_IF_SET:
        return !(a & pa->nofollow_mask);
    case UM_NOFOLLOW_UNLESS_SET:
        return (a & pa->nofollow_mask) != 0;
    case UM_NOFOLLOW_OFLAGS:
        return !((a & O_NOFOLLOW) || ((a & O_CREAT) && (a & O_EXCL)));
    case UM_NOFOLLOW_OPENHOW:
        return !(in->how_readable && (in->how_flags & O_NOFOLLOW));
    default:
        return 1;
    }
}

int um_follows_last(const struct um_decide_in *in, int sc, int slot) { return follows_last(in, sc, slot); }

/* Does the kernel meet a symlink on slot s's path (raw: made absolute, not
 * normalized)? Most calls are answered without a system call. A relative
 * path starts from its dirfd's or cwd's directory, which the kernel holds
 * as a dentry, not as a string: no symlink lies on the way there (the base
 * /proc gave names that directory, and it is not walked again). So when
 * every component before the last one is "." or "..", only the last can be
 * a symlink, and only a call that follows it walks it (a trailing "/"
 * follows it always). Otherwise one openat2 (symlink_on_path). */
static int symlink_walked(const struct um_decide_in *in, int sc, int s, const char *raw)
{
    const struct um_decide_slot *st = &in->slot[s];
    int follow = follows_last(in, sc, s);
    if (st->state != UM_SLOT_PATH || st->str[0] == '/' || !st->base_known || st->base[0] != '/')
        return symlink_on_path(raw, follow);
    const char *c = st->str, *name = NULL, *comp;
    size_t len = 0, name_len = 0;
    while ((comp = next_comp(&c, &len)) != NULL) {
        if (name)
            return symlink_on_path(raw, follow); /* a name walked as a directory */
        if (!comp_is(comp, len, "..")) {
            name = comp;
            name_len = len;
        }
    }
    if (!name)
        return 0; /* "." and ".." alone: directories, no link */
    if (name[name_len] == '/')
        return symlink_on_path(raw, 1); /* "name/" or "name/.": followed, as a directory */
    if (!follow)
        return 0;
    if (strncmp(raw, "/proc/", 6) == 0)
        return 0; /* as symlink_on_path: the kernel resolves procfs's links right */
    /* the last component alone may be one: readlink says (EINVAL: not one) */
    char link[2];
    return readlink(raw, link, sizeof link) >= 0;
}

/* The claim bits of a call: its entry in the claim table; for a number no
 * table knows, refused if the filter traps it (a control call with no one
 * to answer: ENOSYS) or from an ABI no one decodes, else none. */
static int claim_of(int abi, uint64_t nr, int sc)
{
    if (abi < 0 || abi >= UM_NABI)
        return UM_CLAIM_REFUSE;
    if (sc >= 0)
        return claim[abi][sc];
    return (nr & ~(uint64_t)X32_BIT) != UM_NR_CONTROL && !trap[abi][nr & (MAX_NR - 1)] ? 0 : UM_CLAIM_REFUSE;
}

/* ------------------------------------------------------------------ */
/* exec: what the program runs                                          */
/* ------------------------------------------------------------------ */

/* Does the view place an exec's interpreter (a #! line's, or the ELF
 * loader a program names) elsewhere than the kernel would find it? As a
 * path argument is decided: under a prefix (a layered one: where the
 * layer set names it), or reached through a symlink that leads there. A
 * relative one is the kernel's (from the cwd), as Python leaves it. */
static int interp_needs_python(const char *interp)
{
    static __thread char norm[UM_PATH_BUF];
    size_t n = strnlen(interp, sizeof norm);
    if (interp[0] != '/')
        return 0;
    if (n >= sizeof norm)
        return 1;
    memcpy(norm, interp, n + 1);
    int len = normalize(norm);
    int k = prefix_kind_of(norm);
    if (k >= 0 && k != UM_PREFIX_REAL && (k != UM_PREFIX_LAYERED || layer_hit(norm, (size_t)len)))
        return 1;
    if (check_symlinks && nprefixes > 0 && symlink_on_path(interp, 1))
        return walk_needs_python(interp, 0);
    return 0;
}

#define EXEC_HEAD 256    /* the kernel's BINPRM_BUF_SIZE: what it reads of a #! line */
#define PT_INTERP_ 3

/* The PT_INTERP of an ELF file whose head h (n bytes) fd's file starts
 * with, into out; 0 if it names none (static, another byte order, too
 * odd to run: the kernel's), -1 if the monitor cannot tell. As
 * cwd.elf_interp reads it. */
static int elf_interp(int fd, const unsigned char *h, ssize_t n, char *out, size_t size)
{
    uint64_t phoff;
    uint16_t phentsize, phnum;
    size_t need;
    if (h[5] != 1)
        return 0; /* big-endian: not an x86 program */
    if (h[4] == 2 && n >= 64) {
        memcpy(&phoff, h + 32, 8);
        memcpy(&phentsize, h + 54, 2);
        memcpy(&phnum, h + 56, 2);
        need = 56;
    } else if (h[4] == 1 && n >= 52) {
        uint32_t o;
        memcpy(&o, h + 28, 4);
        phoff = o;
        memcpy(&phentsize, h + 42, 2);
        memcpy(&phnum, h + 44, 2);
        need = 32;
    } else {
        return 0;
    }
    static __thread unsigned char table[16384];
    if (phentsize < need || phnum > 4096)
        return 0;
    if ((size_t)phentsize * phnum > sizeof table)
        return -1;
    ssize_t got = pread(fd, table, (size_t)phentsize * phnum, (off_t)phoff);
    if (got < 0)
        return -1;
    for (size_t i = 0; (i + 1) * phentsize <= (size_t)got; i++) {
        const unsigned char *ph = table + i * phentsize;
        uint32_t type;
        memcpy(&type, ph, 4);
        if (type != PT_INTERP_)
            continue;
        uint64_t off, len;
        if (h[4] == 2) {
            memcpy(&off, ph + 8, 8);
            memcpy(&len, ph + 32, 8);
        } else {
            uint32_t o, l;
            memcpy(&o, ph + 4, 4);
            memcpy(&l, ph + 16, 4);
            off = o;
            len = l;
        }
        if (len > 4096)
            return 0;
        if (len >= size)
            return -1;
        got = pread(fd, out, (size_t)len, (off_t)off);
        if (got < 0)
            return -1;
        out[got] = 0; /* up to its first NUL */
        return out[0] != 0;
    }
    return 0;
}

/* Must Python see an exec of the program at path (absolute, decided to
 * run natively) because of what it runs: a #! interpreter, or an ELF
 * loader, that the view places elsewhere? (CwdTracker._interpreter; a
 * file the monitor cannot open or read is left to the kernel there too.)
 * The file is opened O_PATH and looked at before it is read: opening a
 * device or a FIFO for reading could act or block. */
static int exec_needs_python(const char *path)
{
    int pfd = open(path, O_PATH | O_CLOEXEC);
    if (pfd < 0)
        return 0; /* the kernel fails it alike, or Python could not read it either */
    struct stat st;
    char proc[64];
    int fd = -1;
    if (fstat(pfd, &st) == 0 && S_ISREG(st.st_mode)) {
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd);
        fd = open(proc, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    }
    close(pfd);
    if (fd < 0)
        return 0; /* not a file (EACCES natively), or unreadable */
    unsigned char head[EXEC_HEAD + 1];
    static __thread char interp[PATH_MAX + 1];
    int answer = 0;
    ssize_t n = pread(fd, head, EXEC_HEAD, 0);
    if (n >= 2 && head[0] == '#' && head[1] == '!') {
        /* the interpreter: the line's first word, after spaces and tabs */
        head[n] = 0;
        char *line = (char *)head + 2;
        line[strcspn(line, "\n")] = 0;
        line += strspn(line, " \t");
        line[strcspn(line, " \t")] = 0;
        answer = interp_needs_python(line);
    } else if (n >= 52 && memcmp(head, "\x7f" "ELF", 4) == 0) {
        int r = elf_interp(fd, head, n, interp, sizeof interp);
        answer = r < 0 || (r > 0 && interp_needs_python(interp));
    }
    close(fd);
    return answer;
}

/* Does Python need to see this call, from what was gathered and the
 * tables? For each path argument: under a plain prefix, yes; under a
 * layered one (and no real one inside it), if the call writes or the layer
 * set names the path; and if a symlink is on the way, whatever the walk
 * finds (see docs/internals.md). An empty or NULL path names its dirfd:
 * whoever owns that fd decides, not the prefix table (fd_check). Every path
 * slot is resolved for the event, also once the answer is known. */
int um_decide(struct um_decide_in *in)
{
    int abi = in->abi;
    for (int s = 0; s < PATH_SLOTS; s++) {
        in->path_len[s] = -1;
        in->path_kind[s] = -1;
    }
    in->move = in->upper = -1;
    in->sc = abi < 0 || abi >= UM_NABI ? -1 : lookup_sc(abi, (long)in->nr);
    int sc = in->sc, c = claim_of(abi, in->nr, sc);
    if (c & UM_CLAIM_REFUSE)
        return UM_DECIDE_REFUSE;
    if (sc < 0)
        return UM_DECIDE_NATIVE;
    if (in->unreadable)
        return UM_DECIDE_UNREADABLE; /* where it goes is unknown: it must not run unseen */
    int python = (c & UM_CLAIM_ALL) != 0;
    /* an fd's path is a real one: the longest prefix tells (the file of a
     * move mount's source, in a directory a plain prefix contains, is real) */
    if ((c & UM_CLAIM_FD) && in->fd0[0] == '/' && is_plain(prefix_kind_longest(in->fd0)))
        python = 1;
    if ((c & UM_CLAIM_VCWD) && (in->vcwd & UM_VCWD) &&
        !((in->vcwd & UM_VCWD_FAITHFUL) && in->slot[0].state == UM_SLOT_PATH && names_cwd(in->slot[0].str)))
        python = 1;
    if ((c & (UM_CLAIM_VCWD | UM_CLAIM_PATH)) && (in->vcwd & UM_VROOT))
        python = 1; /* under a virtual root: only Python knows where any path goes */
    if (c & UM_CLAIM_FAMILY) {
        int family = (int)in->args[0];
        if (family < 0 || family >= 64 || (family_set >> family) & 1)
            python = 1;
    }
    if ((c & UM_CLAIM_UNIXADDR) && in->unix_path)
        python = 1;
    if ((c & UM_CLAIM_SOCKNAME) && socknames)
        python = 1;
    if (!(c & UM_CLAIM_PATH))
        return python;
    static __thread char raw[UM_PATH_BUF];
    int writes = -1; /* looked up once, when a path needs it */
    for (int s = 0; s < PATH_SLOTS; s++) {
        const struct um_decide_slot *st = &in->slot[s];
        int climbs, n = slot_path(st, in->path[s], raw, &climbs);
        /* relative to a virtual cwd: only Python knows where that is */
        int unsure = st->state == UM_SLOT_PATH && st->str[0] != '/' && st->cwd_relative && (in->vcwd & UM_VCWD) &&
                     !((in->vcwd & UM_VCWD_FAITHFUL) && !climbs);
        int at = -1;
        if (n >= 0 && !unsure) {
            in->path_len[s] = n;
            in->path_kind[s] = prefix_kind_at(in->path[s], &at);
        }
        if (python)
            continue;
        if (st->state == UM_SLOT_EMPTY || st->state == UM_SLOT_NULL) {
            /* the dirfd's file: under a plain prefix (a module that serves
             * listings from a private directory translates fstat on them),
             * or written under a layered one (a lower file changed through
             * an fd, as futimens does, is copied up first) */
            if (fd_check && st->base_known && st->base[0] == '/') {
                int k = prefix_kind_longest(st->base);
                if (writes < 0 && k == UM_PREFIX_LAYERED)
                    writes = call_writes(in, sc);
                python = is_plain(k) || (k == UM_PREFIX_LAYERED && writes);
            }
            continue;
        }
        if (unsure || n == -EAGAIN) {
            python = 1;
            continue;
        }
        if (n < 0) {
            /* the kernel gives the tracee the same errno; any other failure
             * (a relative path too long for C once made absolute: where it
             * goes is Python's to say) is unsure */
            python = !(n == -ENAMETOOLONG || n == -EFAULT || n == -ENOENT || n == -ENOTDIR || n == -EBADF) &&
                     (n != -EOVERFLOW || nprefixes > 0);
            continue;
        }
        int k = in->path_kind[s];
        if (is_plain(k) && st->state == UM_SLOT_PATH && st->str[0] != '/' && !climbs) {
            /* below a faithful cwd (the view checked that the kernel's cwd
             * shows what the virtual one does, with no mount below), or
             * below a dirfd in a clean alias: what the kernel reaches is
             * what the view means */
            int longest = prefix_kind_longest(in->path[s]);
            if (st->cwd_relative ? (in->vcwd & UM_VCWD_FAITHFUL) != 0
                                 : longest == UM_PREFIX_ALIAS_CLEAN && st->base_known &&
                                       prefix_kind_longest(st->base) == UM_PREFIX_ALIAS_CLEAN)
                k = longest;
        }
        if (k == UM_PREFIX_MOVE && s == 0 && st->state == UM_SLOT_PATH && st->str[0] == '/' &&
            move_literal(st->str, at)) {
            in->move = at; /* C may serve it (emulate.c); Python if not */
            continue;
        }
        if (is_plain(k) || (check_symlinks && nprefixes > 0 && (proc_magic(in->path[s]) || proc_magic(raw)))) {
            python = 1;
            continue;
        }
        if (nprefixes > 0 && has_dotdot(raw) &&
            climbs_through_view(raw, st->str[0] == '/' ? 0 : strnlen(st->base, UM_PATH_BUF))) {
            python = 1; /* the view walks what the lexical path skips */
            continue;
        }
        if (nprefixes > 0 && proc_mem(in->path[s])) {
            if (writes < 0)
                writes = call_writes(in, sc);
            if (writes) {
                python = 1;
                continue;
            }
        }
        if (k == UM_PREFIX_KERNEL) {
            /* relative to a cwd or dirfd that the kernel already has in the
             * mount's tree (or in what lies under the mount point, opened
             * before the mount: as natively), with no "..": the kernel finds
             * what the view shows. Absolute, entering the mount from
             * outside, or climbing: Python rewrites it. */
            if (!(st->state == UM_SLOT_PATH && st->str[0] != '/' && !climbs && base_under(st->base, at)))
                python = 1;
            continue;
        }
        /* ".." from a directory of a layer's upper directory: its parent
         * there lacks what the view shows (the lower layer's names) */
        if (climbs && (is_alias(k) || is_alias(prefix_kind_of(raw)))) {
            python = 1;
            continue;
        }
        if (k == UM_PREFIX_LAYERED) {
            if (writes < 0)
                writes = call_writes(in, sc);
            /* into a merged directory: the kernel enters the lower one, whose
             * path is the view's, as the module would have it (no virtual cwd) */
            int enters = (c & UM_CLAIM_CHDIR) && !writes && !climbs && layer_upper_dir(in->path[s], (size_t)n);
            if (!enters && (writes || layer_hit(in->path[s], (size_t)n))) {
                if (!writes && s == 0 && at >= 0 && prefix_upper[at] && (size_t)n > prefix_len[at] &&
                    upper_literal(st, raw, in->path[s], (size_t)n) && layer_upper(in->path[s], (size_t)n))
                    in->upper = at; /* the upper layer's, read: C may serve it there (emulate.c) */
                else
                    python = 1;
                continue;
            }
        }
        if (k == UM_PREFIX_DEVICES) {
            if (writes < 0)
                writes = call_writes(in, sc);
            if (writes && !opens_a_device(in, sc, raw)) {
                python = 1;
                continue;
            }
        }
        if (in->walk && check_symlinks && nprefixes > 0 && symlink_walked(in, sc, s, raw)) {
            if (writes < 0)
                writes = call_writes(in, sc);
            python = walk_needs_python(raw, writes);
        }
    }
    if (!python && in->move < 0 && in->upper < 0 && (c & UM_CLAIM_EXEC)) {
        /* the program was decided; now what it runs. fexecve (an fd, no
         * path): Python */
        if (in->slot[0].state != UM_SLOT_PATH || in->path_len[0] < 0 || !in->walk)
            python = 1;
        else
            python = exec_needs_python(in->path[0]);
    }
    if (python)
        in->move = in->upper = -1;
    else if (in->move >= 0 || in->upper >= 0)
        python = 1; /* C serves it, or Python does */
    return python;
}

/* Gather and decide: UM_DECIDE_*, with in->sc and the resolved paths set.
 * *read (if given): whether tracee memory or /proc was read. */
static __thread uint64_t sc_trapped[MAX_SC], sc_python[MAX_SC]; /* by call: decided, handed to Python */

uint64_t *sc_counts(int python) { return python ? sc_python : sc_trapped; }

int decide_call(pid_t tid, struct um_decide_in *in, int *read)
{
    int r = gather(tid, in);
    if (read)
        *read = r;
    int d = um_decide(in);
    if (in->sc >= 0 && (claim[in->abi][in->sc] & UM_CLAIM_CREDS))
        creds_changed(tid, (long)(in->nr & ~(uint64_t)X32_BIT) == UM_NR_X86_64_landlock_restrict_self);
    if (in->sc >= 0 && in->sc < MAX_SC) {
        sc_trapped[in->sc]++;
        if (d == UM_DECIDE_PYTHON)
            sc_python[in->sc]++;
    }
    return d;
}

void decided_served(int sc)
{
    if (sc >= 0 && sc < MAX_SC && sc_python[sc])
        sc_python[sc]--; /* C served it after all (emulate.c) */
}

void decided_again(int sc, int d)
{
    if (sc >= 0 && sc < MAX_SC && sc_trapped[sc]) {
        sc_trapped[sc]--; /* handed to the main thread, which decides it again */
        if (d == UM_DECIDE_PYTHON && sc_python[sc])
            sc_python[sc]--;
    }
}

int um_sc_stats(uint64_t *trapped, uint64_t *python, int n)
{
    if (n < 0)
        return -EINVAL;
    if (n > MAX_SC)
        n = MAX_SC;
    memcpy(trapped, sc_trapped, (size_t)n * sizeof *trapped);
    memcpy(python, sc_python, (size_t)n * sizeof *python);
    servers_stats(NULL, trapped, python, n);
    return n;
}

int refusal(pid_t tid, int d)
{
    static int said;
    if (d == UM_DECIDE_REFUSE)
        return -ENOSYS;
    if (d != UM_DECIDE_UNREADABLE)
        return 0;
    if (!said) {
        said = 1;
        fprintf(stderr, "umview: process %d is not dumpable and this monitor may not read it (it lacks "
                        "CAP_SYS_PTRACE): its calls that the view must look into fail with EACCES; run umview "
                        "as root to serve them\n", (int)tid);
    }
    return -EACCES;
}
