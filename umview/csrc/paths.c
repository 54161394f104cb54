/* paths.c - path text for the fast path: normalizing, the prefix table, the
 * symlink walk, /proc's magic links, move mounts' literal paths */
#include "internal.h"

/* ------------------------------------------------------------------ */
/* path resolution for the fast path (lexical: no symlinks)            */
/* ------------------------------------------------------------------ */

/* Normalize an absolute path in place: collapse "//", drop ".", apply "..". */
int normalize(char *p)
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

int read_link(const char *proc, char *out, int size)
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
int has_dotdot(const char *p)
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
int names_cwd(const char *p)
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
int prefix_match(const char *p, int *at, int plain_first)
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

/* a prefix whose calls go to Python (a move's, unless C serves them) */

/* Is the (absolute) base directory of a relative path at or under prefix i? */
int base_under(const char *base, int i)
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


int symlink_on_path(const char *raw, int follow)
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

int walk_needs_python(const char *raw, int writes)
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
const char *next_comp(const char **c, size_t *len)
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


/* Does the absolute path p (raw or normalized) go through a magic link of
 * procfs that names a file of a process: /proc/P/root, /proc/P/cwd or
 * /proc/P/fd/N (P also as P/task/T), as itself or with a rest after it,
 * before any ".."? The kernel follows those to the real file, past every
 * mount of the view; the cwd tracker resolves them in the view
 * (umview/cwd.py). */
/* /proc/P/mem or /proc/P/task/T/mem: a write through it ignores page
 * protections, the read-only region of pinned paths among them (pin.c), so
 * a call that opens it for writing goes to Python (the guard refuses it). */
int proc_mem(const char *p)
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

int proc_magic(const char *p)
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
int climbs_through_view(const char *raw, size_t base_len)
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
int upper_literal(const struct um_decide_slot *st, const char *raw, const char *path, size_t n)
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
int move_literal(const char *raw, int i)
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

