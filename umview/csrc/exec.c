/* exec.c - what an exec runs: a #! line's interpreter, the ELF loader a
 * program names, and whether the view places them elsewhere */
#include "internal.h"

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
int exec_needs_python(const char *path)
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
