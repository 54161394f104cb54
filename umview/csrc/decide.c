/* decide.c - the fast-path decision: gather what a call names from the
 * tracee, resolve it, and look the tables up (paths.c: the path text;
 * exec.c: what an exec runs) */
#include "internal.h"

/* the decision's settings, from Python (um_set_*) */
int check_symlinks;       /* an engine walks symlinks in the view */
static uint64_t family_set; /* socket families engines claim (UM_CLAIM_FAMILY): bit f = family f */
static int fd_check;      /* an empty or NULL path's dirfd is looked at (um_decide) */
static int socknames;     /* UM_CLAIM_SOCKNAME calls go to Python (a rewritten AF_UNIX name is bound) */
void um_set_symlink_check(int on) { check_symlinks = on; }
void um_set_families(uint64_t bits) { family_set = bits; }
void um_set_socknames(int on) { socknames = on; }
void um_set_fd_check(int on) { fd_check = on; }

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
