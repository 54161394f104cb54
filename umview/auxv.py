"""The auxiliary vector of a program at its exec event.

At the PTRACE_EVENT_EXEC stop (what an engine's ``on_exec`` runs at) the new
program has not run one instruction. Its stack pointer points at what the
kernel laid out for it::

    argc, argv[0..argc-1], NULL, envp[0..], NULL, (type, value) ... (AT_NULL, 0)

in words of the program's size: 8 bytes for x86_64, 4 for i386 and x32. The
dynamic loader, or a static program's libc, reads the auxiliary vector from
there (glibc, musl and Go's runtime alike; /proc/PID/auxv keeps the kernel's
own copy, which nothing of the program reads to find the vDSO). An engine
may change an entry before anyone read it: ``ignore`` turns entries into
AT_IGNORE, so the program finds none of that type (the time module hides the
vDSO, AT_SYSINFO_EHDR, so that libc makes real clock_gettime calls).
"""
import errno

from umview import core

AT_NULL, AT_IGNORE, AT_SYSINFO, AT_SYSINFO_EHDR = 0, 1, 32, 33
_ELFCLASS32 = 1
_MAX_WORDS = 1 << 20  # argc + argv + envp + auxv beyond this is not a stack the kernel made
_PAGE = 4096


def word_size(tid, regs=None):
    """4 for a 32-bit program (i386 by its code segment, x32 by its ELF
    class), else 8."""
    regs = regs if regs is not None else core.user_regs(tid)
    if regs[core.REG_CS] == core.I386_CS:
        return 4
    try:
        with open(f"/proc/{tid}/exe", "rb") as f:
            ident = f.read(5)
    except OSError:
        return 8  # an execute-only binary: x32 ones are left to the x86_64 layout
    return 4 if ident[:4] == b"\x7fELF" and ident[4] == _ELFCLASS32 else 8


class _Words:
    """Reads the words of the stack in order, a page at a time."""

    def __init__(self, tid, addr, size):
        self.tid, self.addr, self.size = tid, addr, size
        self.buf, self.at, self.count = b"", 0, 0

    def next(self):
        self.count += 1
        if self.count > _MAX_WORDS:
            raise OSError(errno.E2BIG, "no end of the auxiliary vector in sight")
        if self.at + self.size > len(self.buf):
            start = self.addr
            self.buf = core.read_mem(self.tid, start, _PAGE - start % _PAGE)
            self.at = 0
        word = int.from_bytes(self.buf[self.at:self.at + self.size], "little")
        self.at += self.size
        self.addr += self.size
        return word


def entries(tid):
    """(word size, [(address of its type word, type, value), ...]) of the
    auxiliary vector of thread tid, stopped at its exec event, AT_NULL left
    out. OSError if the stack cannot be read."""
    regs = core.user_regs(tid)
    size = word_size(tid, regs)
    sp = regs[core.REG_SP] & (0xFFFFFFFF if size == 4 else 0xFFFFFFFFFFFFFFFF)
    words = _Words(tid, sp, size)
    argc = words.next()
    for _ in range(argc + 1):  # argv and its NULL
        words.next()
    while words.next():  # envp up to its NULL
        pass
    out = []
    while True:
        addr = words.addr
        kind, value = words.next(), words.next()
        if kind == AT_NULL:
            return size, out
        out.append((addr, kind, value))


def ignore(tid, types):
    """Make the auxiliary vector entries of the given types AT_IGNORE in
    thread tid, stopped at its exec event: the program finds none. Returns
    how many were changed."""
    size, found = entries(tid)
    n = 0
    for addr, kind, _ in found:
        if kind in types:
            core.write_mem(tid, addr, AT_IGNORE.to_bytes(size, "little"))
            n += 1
    return n
