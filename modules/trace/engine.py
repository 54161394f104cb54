"""The trace engine: an strace-like log of what the processes asked for and got.

``umview --trace FILE CMD`` loads a TraceEngine as the newest engine of all:
its ``enter`` sees each call as the process made it (before any module
rewrote it) and its ``exit``, called last, sees the result as the process gets
it. One line per call, printed at exit::

    1234 openat(AT_FDCWD, "/unreal/etc/hostname", O_RDONLY) = 3 [rewritten]

Argument kinds come from the syscall table (``call.spec``: which argument
is a path, a dirfd, an fd, open or AT_ flags); python-ptrace supplies the prototypes'
argument names and types, its flag tables, signal names and its per-call
constant names (lseek's whence, rt_sigprocmask's how, ...). Its own
formatters are not used: they read memory through a PtraceProcess and print
Python reprs (``'/etc' `` and ``O_RDONLY (0o0)``), not strace's C notation.

Ordering: the monitor is one thread, and a call's entry and exit are two
events. The line is printed at exit. If another thread's event comes between
(the call blocks, or two processes run at once), the entry is printed first,
ended with ``<unfinished ...>``, and the exit later as ``<... NAME resumed>``,
as ``strace -f`` does. See docs/trace.md.
"""
import errno as _errno
import os
import signal as _signal
import sys

from umview import arch, core
from umview.engine import CONTINUE_AFTER, Engine
from umview.syscalls import calls as class_calls, trace_classes

#: strace's -s default: longer strings and buffers are cut, with "..."
STRING_LIMIT = 32
#: python-ptrace's name of an argument where it is not the kernel's (which
#: syscalls/table.py uses)
_PTRACE_ARG_NAMES = {"whence": "origin"}
_NO_RETURN = class_calls("exits")
_MODE_RESULT = class_calls("returns-mode")
_ADDR_RESULT = class_calls("returns-addr")
_FILE_TYPES = {0o140000: "S_IFSOCK", 0o120000: "S_IFLNK", 0o100000: "S_IFREG", 0o60000: "S_IFBLK",
               0o40000: "S_IFDIR", 0o20000: "S_IFCHR", 0o10000: "S_IFIFO"}

_AT_FLAGS = (
    (0x100, "AT_SYMLINK_NOFOLLOW"), (0x200, "AT_REMOVEDIR"), (0x400, "AT_SYMLINK_FOLLOW"),
    (0x800, "AT_NO_AUTOMOUNT"), (0x1000, "AT_EMPTY_PATH"),
)
_MMAP_FLAGS = (
    (0x1, "MAP_SHARED"), (0x2, "MAP_PRIVATE"), (0x10, "MAP_FIXED"), (0x20, "MAP_ANONYMOUS"),
    (0x100, "MAP_GROWSDOWN"), (0x800, "MAP_DENYWRITE"), (0x1000, "MAP_EXECUTABLE"),
    (0x2000, "MAP_LOCKED"), (0x4000, "MAP_NORESERVE"), (0x8000, "MAP_POPULATE"),
    (0x10000, "MAP_NONBLOCK"), (0x20000, "MAP_STACK"), (0x40000, "MAP_HUGETLB"),
    (0x100000, "MAP_FIXED_NOREPLACE"),
)
_ACCESS_MODE = ((4, "R_OK"), (2, "W_OK"), (1, "X_OK"))
_O_CREAT, _O_TMPFILE = 0o100, 0o20200000
_AT_FDCWD = -100


def expand_classes(names):
    """Call names and strace-like classes (%file, %process, %network, %desc)
    -> a set of neutral names; ValueError for a name the tables lack."""
    known = set(arch.NAMES)
    classes = trace_classes(known)
    out = set()
    for name in names:
        name = name.strip()
        if not name:
            continue
        if name in classes:
            out |= classes[name]
        elif name in known:
            out.add(name)
        else:
            raise ValueError(f"unknown system call or class {name!r} "
                             f"(classes: {', '.join(sorted(classes))})")
    return out


# --- formatting -------------------------------------------------------------

def quote(data, limit=STRING_LIMIT):
    """bytes as strace prints them: C escapes, octal for the rest, cut at limit."""
    cut = limit is not None and len(data) > limit
    if cut:
        data = data[:limit]
    out = ['"']
    special = {9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 34: '\\"', 92: "\\\\"}
    for i, b in enumerate(data):
        if b in special:
            out.append(special[b])
        elif 32 <= b < 127:
            out.append(chr(b))
        else:
            nxt = data[i + 1] if i + 1 < len(data) else None
            out.append("\\%03o" % b if nxt is not None and 48 <= nxt <= 57 else "\\%o" % b)
    out.append('"')
    if cut:
        out.append("...")
    return "".join(out)


def bits(value, table, zero="0"):
    """value as NAME|NAME|0x..., strace-like."""
    names = []
    for mask, name in table:
        if value & mask == mask:
            names.append(name)
            value &= ~mask
    if value:
        names.append(hex(value))
    return "|".join(names) if names else zero


def _signed(value):
    """A 64-bit register as a signed number (a result, an offset)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


def _addr(value):
    return "NULL" if value == 0 else hex(value)


def _open_flags(value):
    from ptrace.syscall.posix_arg import OPEN_FLAGS_BITMASK  # lazy: see TraceEngine.__init__

    value &= 0xFFFFFFFF
    acc = value & 3
    names = [("O_RDONLY", "O_WRONLY", "O_RDWR", "O_ACCMODE")[acc]]
    rest = value & ~3
    if rest & _O_TMPFILE == _O_TMPFILE:
        names.append("O_TMPFILE")
        rest &= ~_O_TMPFILE
    table = [(m, n) for m, n in OPEN_FLAGS_BITMASK if m not in (1, 2, _O_TMPFILE)]
    tail = bits(rest, table, zero="")
    return "|".join(names + ([tail] if tail else []))


def _signal_name(value):
    from ptrace.signames import signalName  # lazy: see TraceEngine.__init__

    return "0" if value == 0 else signalName(core.signed32(value))


def format_result(name, value):
    """The text after ' = '."""
    if value is None or name in _NO_RETURN:
        return "?"
    value = _signed(value)
    if -4096 < value < 0:
        code = -value
        ename = _errno.errorcode.get(code, f"E{code}")
        return f"-1 {ename} ({os.strerror(code)})"
    if name in _MODE_RESULT:
        return "0%o" % value if value else "000"
    if name in _ADDR_RESULT:
        return hex(value & (1 << 64) - 1)
    return str(value)


class Formatter:
    """Formats the arguments of one call of one thread from its registers and
    memory (``call.read_string`` / ``call.read_mem``): a bad pointer prints as
    its address, never raises."""

    def __init__(self, arg_dict):
        self.arg_dict = arg_dict  # python-ptrace's named constants per call and argument

    def args(self, call, args, at_exit=False, retval=None):
        """The argument list text. At entry, the input arguments; at exit
        (at_exit=True) the buffers a call filled (read's data) are read."""
        out = []
        for i, a in enumerate(call.spec.args if call.spec is not None else ()):
            text = self.arg(call, args, i, a, at_exit, retval)
            if text is None:  # an argument strace leaves out (open's mode without O_CREAT)
                break
            out.append(text)
        return ", ".join(out)

    def _string(self, call, addr, limit):
        if addr == 0:
            return "NULL"
        try:
            data = _read_string(call, addr)
        except OSError:
            return hex(addr)
        return quote(data, limit)

    def _buffer(self, call, addr, size):
        if addr == 0:
            return "NULL"
        size = max(0, min(size, STRING_LIMIT + 1))
        try:
            data = call.read_mem(addr, min(size, STRING_LIMIT)) if size else b""
        except OSError:
            return hex(addr)
        text = quote(data, None)
        return text + "..." if size > STRING_LIMIT else text

    def arg(self, call, args, i, a, at_exit, retval):
        """Argument i (a, its syscalls.Arg) as strace prints it, or None for
        one strace leaves out (open's mode without O_CREAT). The table's
        kind says how in general, its name (the kernel's) where strace has a
        printer of its own: a file mode, mmap's protection, a signal, a
        buffer and its count, argv and envp, named constants."""
        v = args[i] if i < len(args) else 0
        kind, pname = a.kind, a.name
        if kind == "path":
            return self._string(call, v, None)
        if kind == "str":
            return self._string(call, v, STRING_LIMIT)
        if kind == "dirfd":
            v = core.signed32(v)
            return "AT_FDCWD" if v == _AT_FDCWD else str(v)
        if kind == "fd":
            return str(core.signed32(v))
        if kind == "atflags":
            return bits(v & 0xFFFFFFFF, _AT_FLAGS)
        if kind == "oflags":
            return _open_flags(v)
        if pname == "mode":
            return self._mode(call, args, v)
        if pname == "dev" and call.of_class("mknods"):
            mode = args[call.spec.by_name["mode"].index]
            if mode & 0o170000 not in (0o20000, 0o60000):
                return None  # no device: strace leaves it out
            return f"makedev({os.major(v & 0xFFFFFFFF):#x}, {os.minor(v & 0xFFFFFFFF):#x})"
        if pname == "prot":
            return _prot(v)
        if pname == "flags" and call.of_class("mmaps"):
            return bits(v & 0xFFFFFFFF, _MMAP_FLAGS)
        if pname == "sig":
            return _signal_name(v)
        if pname == "buf" and call.of_class("reads-data"):
            if not at_exit or retval is None or _signed(retval) < 0:
                return hex(v)
            return self._buffer(call, v, _signed(retval))  # the data is known at exit only
        if pname == "buf" and call.of_class("writes-data"):
            return self._buffer(call, v, args[call.spec.by_name["count"].index])
        if pname in ("argv", "envp") and kind == "ptr":
            return self._vector(call, v, pname == "envp")
        if kind == "ptr":
            return _addr(v)
        names = self.arg_dict.get(call.name, {}).get(_PTRACE_ARG_NAMES.get(pname, pname))
        if names is not None:
            known = names.get(v & 0xFFFFFFFF)
            if known is not None:
                return known
        return str(core.signed32(v) if a.bits == 32 else _signed(v))

    @staticmethod
    def _mode(call, args, v):
        """A mode argument: access(2)'s R_OK|W_OK, a file type and
        permissions for mknod, else permissions in octal (an open's only
        where it makes a file)."""
        if call.of_class("accesses"):
            return bits(v & 0xFFFFFFFF, _ACCESS_MODE, "F_OK")
        if call.of_class("opens") and "flags" in call.spec.by_name:
            flags = args[call.spec.by_name["flags"].index]
            if not (flags & _O_CREAT or flags & _O_TMPFILE == _O_TMPFILE):
                return None
        perms = "0%o" % (v & 0o7777) if v & 0o7777 else "000"
        if call.of_class("mknods"):
            kind = _FILE_TYPES.get(v & 0o170000)
            return f"{kind}|{perms}" if kind else perms
        return perms

    def _words(self, call, addr, limit):
        size = 4 if call.abi in ("i386", "x32") else 8
        words = []
        while len(words) <= limit:
            word = int.from_bytes(call.read_mem(addr + size * len(words), size), "little")
            if word == 0:
                return words, False
            words.append(word)
        return words, True

    def _vector(self, call, addr, envp):
        """execve's argv as strace prints it; envp (envp=True) as a count."""
        if addr == 0:
            return "NULL"
        try:
            words, more = self._words(call, addr, 4096 if envp else 32)
        except OSError:
            return hex(addr)
        if envp:
            return f"{hex(addr)} /* {len(words)}{'+' if more else ''} vars */"
        items = [self._string(call, w, STRING_LIMIT) for w in words[:32]]
        return "[" + ", ".join(items) + (", ..." if more else "") + "]"


def _prot(v):
    from ptrace.syscall.posix_arg import MMAP_PROT_BITMASK  # lazy: see TraceEngine.__init__

    return bits(v & 0xFFFFFFFF, MMAP_PROT_BITMASK, "PROT_NONE")


def _read_string(call, addr):
    return core.read_string(call.tid, addr, 4096)


class _Open:
    """A call between its entry and its exit."""

    __slots__ = ("call", "head", "unfinished")

    def __init__(self, call, head):
        self.call = call
        self.head = head  # "name(args" as the process made the call
        self.unfinished = False


class TraceEngine(Engine):
    """Logs every claimed call, strace-like, to a text stream.

    ``out``: a writable text file (line-buffered, so a killed command leaves a
    complete log). ``calls``: neutral names to trace (None: every call of the
    syscall table; then every call stops). ``kernel``: also print the call as
    the kernel received it when a module rewrote it.
    """

    name = "trace"
    description = "strace-like log of every call and its result"
    #: newer than the engines marked newest (the cwd tracker, mount control):
    #: it sees the call as the process made it, and the result as it got it
    newest = 2

    def __init__(self, out, calls=None, kernel=False):
        # lazy: python-ptrace takes 70 ms to import, paid when a trace starts
        from ptrace.syscall.linux_constants import SYSCALL_ARG_DICT

        self.out = out
        self.shown = frozenset(arch.NAMES if calls is None else calls)
        # execve is always seen: the log starts at the command's first one
        self.syscalls = self.shown | class_calls("execs")
        self.kernel = kernel
        self.fmt = Formatter(SYSCALL_ARG_DICT)
        self._open = {}  # tid -> _Open
        # the monitor's own child runs a few calls (closing its pipe, the
        # PATH search of execvp) before the command starts: like strace,
        # which finds the program itself, log from the first successful execve
        self._started = False

    def _write(self, line):
        self.out.write(line + "\n")

    def _interrupt(self, tid):
        """Another thread's event comes: calls still open elsewhere print
        their entry now, ended with <unfinished ...>."""
        for other, op in self._open.items():
            if other != tid and not op.unfinished:
                self._write(f"{other} {op.head} <unfinished ...>")
                op.unfinished = True

    def enter(self, call):
        if self._started:
            self._interrupt(call.tid)
        try:
            head = f"{call.name}({self.fmt.args(call, call.orig_args)}"
        except Exception as exc:  # noqa: BLE001 - the log must never fail a call
            head = f"{call.name}(<cannot decode: {exc!r}>"
        self._open[call.tid] = _Open(call, head)
        return CONTINUE_AFTER

    def exit(self, call):
        op = self._open.pop(call.tid, None)
        if op is None:
            return
        if not self._started:
            if not call.of_class("execs") or call.retval != 0:
                return
            self._started = True
        if call.name not in self.shown:
            return
        self._interrupt(call.tid)
        marks = ""
        virtual = getattr(call, "skipped_by", None)
        rewritten = tuple(call.args) != tuple(call.orig_args)
        head = op.head
        try:
            if call.of_class("reads-data") and call.retval is not None:
                # the buffer is known only now
                head = f"{call.name}({self.fmt.args(call, call.orig_args, at_exit=True, retval=call.retval)}"
            if rewritten:
                marks += " [rewritten"
                if self.kernel:
                    marks += ": " + f"{call.name}({self.fmt.args(call, call.args, True, call.retval)})"
                marks += "]"
        except Exception as exc:  # noqa: BLE001
            marks += f" [cannot decode: {exc!r}]"
        if virtual:
            marks += " [virtual]"
        self._finish(call.tid, op, head, format_result(call.name, call.retval) + marks)

    def _finish(self, tid, op, head, tail):
        if op.unfinished:
            self._write(f"{tid} <... {op.call.name} resumed>) = {tail}")
        else:
            self._write(f"{tid} {head}) = {tail}")

    def on_exec(self, tid, former_tid):
        if former_tid != tid:
            # a non-leader thread execed: it now has the leader's tid
            self._open.pop(tid, None)
            op = self._open.pop(former_tid, None)
            if op is not None:
                self._open[tid] = op

    def on_exit(self, tid):
        op = self._open.pop(tid, None)
        if op is not None and self._started:
            self._finish(tid, op, op.head, "?")  # exit_group, or killed in the call

    def on_exit_status(self, tid, status):
        self._interrupt(tid)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                name = _signal.Signals(sig).name
            except ValueError:
                name = str(sig)
            core = " (core dumped)" if os.WCOREDUMP(status) else ""
            self._write(f"{tid} +++ killed by {name}{core} +++")
        elif os.WIFEXITED(status):
            self._write(f"{tid} +++ exited with {os.WEXITSTATUS(status)} +++")

    def started(self):
        """Log from now on (a tracer loaded while the view runs)."""
        self._started = True

    def close(self):
        if self.out is not sys.stderr and not self.out.closed:
            self.out.close()


def open_trace(path):
    """The text stream for --trace PATH ('-' is stderr), line-buffered."""
    if path == "-":
        return sys.stderr
    return open(path, "w", buffering=1, encoding="utf-8", errors="backslashreplace")
