"""Exec in a view, the cwd tracker's part (CwdTracker inherits it).

The kernel looks for a #! script's interpreter, and for a program's ELF
loader (PT_INTERP), in the real file system, past the view's mounts. Where
either lies under a mount or below a virtual root, the exec becomes the one
the kernel would make in the view: the interpreter's, with the argument list
the kernel would build, or the view's loader, given the program (and its
name as argv[0] where the loader takes --argv0). The program an exec runs
through its loader is what /proc/PID/exe shows, from the process's record
(umview.procs: Thread.exe_pending, then Process.exe at the exec event).
"""
import os

from umview import core, longpath
from umview.pathwalk import walk
from umview.procs import PROCESSES

AT_FDCWD = core.AT_FDCWD
_signed = core.signed32
AT_EMPTY_PATH = 0x1000
EXECS = {"execve": (0, 1), "execveat": (1, 2)}  # path and argv argument indexes
BINPRM_BUF_SIZE = 256  # what the kernel reads of a #! line
PT_INTERP = 3
HOST_MACHINES = (3, 62)  # EM_386, EM_X86_64: what the kernel runs here


class ExecInView:
    """The exec half of umview.cwd.CwdTracker (it provides realize, opaque,
    _leave_to_kernel, _may_execute and _inside)."""

    def _interpreter(self, call, root=b"/"):
        """An exec of a #! script where the script or its interpreter lies
        under a mount: the kernel would look for the interpreter outside the
        view's mounts, and would hand it the script's real path, which means
        another file in the view (a script in a sandbox's /tmp: sh then
        cannot open /tmp/umview-sandbox-X/tmp/s) or shows where the mount
        comes from. So the exec becomes the interpreter's, with the
        arguments the kernel would give it and the script as the process
        named it, once the process may execute the script (the kernel's own
        check, made by the process: faccessat2). None, or a Skip with the
        errno the exec gets."""
        pidx, aidx = EXECS[call.name]
        if call.name == "execveat" and call.flags & AT_EMPTY_PATH:
            return None
        path = call.paths()[0]
        if path is None or self._leave_to_kernel(path):
            return None
        script_real = self.realize(path)
        try:
            with open(longpath.open_regular(script_real), "rb") as f:
                head = f.read(BINPRM_BUF_SIZE)
        except OSError:
            return None  # the kernel says why
        if head.startswith(b"\x7fELF"):
            return self._elf_interpreter(call, path, script_real, root)
        if not head.startswith(b"#!"):
            return None
        line = head[2:].split(b"\n", 1)[0].strip(b" \t")
        interp, _, arg = line.replace(b"\t", b" ").partition(b" ")
        arg = arg.strip(b" ")
        if not interp.startswith(b"/"):
            return None
        resolved, crossed = walk(root.rstrip(b"/") + interp, self.realize, True, opaque=self.opaque, root=root)
        if not crossed and script_real == path and root == b"/":
            return None  # neither under a mount nor a virtual root: the kernel does it
        refused = self._may_execute(call, script_real)
        if refused is not None:
            return refused
        # the kernel's argument list: interpreter, its optional argument, the
        # script as the process named it, then the process's argv[1:]
        script = core.read_string(call.tid, call.orig_args[pidx])
        if call.name == "execveat" and not script.startswith(b"/") and _signed(call.args[0]) != AT_FDCWD:
            script = b"/dev/fd/%d/%s" % (_signed(call.args[0]), script)  # the kernel's name for it
        return self._exec_instead(call, resolved, [interp] + ([arg] if arg else []) + [script], 1, root)

    def _elf_interpreter(self, call, path, real, root):
        """An exec of a dynamically linked program whose ELF interpreter (the
        dynamic loader its PT_INTERP names) lies under a mount: the kernel
        would load the real tree's loader, which would then load the view's
        libraries (a guest root file system's libc with the host's ld.so:
        they must match). _exec_instead runs the view's loader."""
        loader = self._view_loader(real, root)
        if loader is None:
            return None  # static, not ELF, unreadable, or the loader the kernel finds is the view's
        return self._exec_instead(call, path, [], 0, root, loader)

    def _view_loader(self, real, root):
        """(its PT_INTERP, the view path of that loader below root) for the
        program at real path, where the kernel would not find the view's
        loader (it lies under a mount, or the process has a root of the
        view's); else None."""
        interp = elf_interp(real)
        if interp is None:
            return None
        loader, crossed = walk(root.rstrip(b"/") + interp, self.realize, True, opaque=self.opaque, root=root)
        return (interp, loader) if crossed or root != b"/" else None

    @staticmethod
    def set_argv(call, aidx, items):
        """Make the exec's argv (argument aidx) the list items: strings
        (written below the stack) or pointers of the process's own."""
        word = 8 if call.abi == "x86_64" else 4
        ptrs = []
        for s in items:
            if isinstance(s, int):
                ptrs.append(s)
                continue
            where = call.alloc(len(s) + 1)
            call.write_mem(where, s + b"\0")
            ptrs.append(where)
        where = call.alloc(word * (len(ptrs) + 1))
        call.write_mem(where, b"".join(p.to_bytes(word, "little") for p in ptrs + [0]))
        call.args[aidx] = where

    @staticmethod
    def _argv(call, aidx):
        """The pointers of the exec's argv (a list), None if too many to
        rebuild here."""
        argv = []
        addr = call.args[aidx]
        word = 8 if call.abi == "x86_64" else 4  # i386 and x32 pointers are 32 bits
        while addr and len(argv) < 8192:
            ptr = int.from_bytes(call.read_mem(addr + word * len(argv), word), "little")
            if not ptr:
                return argv
            argv.append(ptr)
        return None if addr else argv

    def _exec_instead(self, call, program, head, skip, root=b"/", loader=False):
        """Turn the exec into one of program (a view path) with the argument
        list head (strings, or pointers of the process's own) followed by
        the process's argv[skip:]. If program is dynamically linked and its
        loader lies under a mount or a virtual root, the view's loader (the
        one below the root) is run instead, which
        loads the program itself (its opens go through the view), given the
        argument list's first string as argv[0] where the loader takes
        --argv0 (glibc 2.33, musl 1.2.3; an older one shows the program's
        path). /proc/self/exe then names the loader: readlink of it is
        answered with the program (_proc_readlink). loader: _view_loader's
        answer for program if the caller has it. None, or a Skip with the
        exec's errno."""
        pidx, aidx = EXECS[call.name]
        argv = self._argv(call, aidx)
        if argv is None:
            return None  # too many to rebuild here: leave it to the kernel
        named = getattr(call.state(self), "named", None)
        if named is None:
            named = call.read_string(pidx)
        full = list(head) + argv[skip:]
        exe = None
        real = self.realize(program)
        if loader is False:
            loader = self._view_loader(real, root)
        if loader is not None:
            interp, loader = loader
            refused = self._may_execute(call, real)  # which the loader's exec does not check
            if refused is not None:
                return refused
            name = [b"--argv0", full[0]] if full and _takes_argv0(self.realize(loader)) else []
            # the program as the process names it (the loader opens it
            # through the view, below the process's root)
            inside = self._inside(root, program)
            full = [interp] + name + [inside] + full[1:]
            exe, program = inside, loader
            # the name the kernel gives it: the last component of the path
            # the process gave (the script's, for a #! script)
            call.state(self).comm = os.path.basename(named) or str(call.args[0] & 0xFFFFFFFF).encode()
        self.set_argv(call, aidx, full)
        call.set_string(pidx, program)
        if call.name == "execveat":
            call.args[0] = AT_FDCWD & 0xFFFFFFFFFFFFFFFF  # the new path is absolute
        PROCESSES.record(call.tid).exe_pending = exe
        return None


def elf_interp(real):
    """The PT_INTERP path of the ELF file real (bytes), or None: not ELF,
    statically linked, unreadable, or a program of another machine than
    the host's (the kernel cannot run it, nor its loader: the qemu module
    runs it through an emulator, which loads it)."""
    import struct

    try:
        with open(longpath.open_regular(real), "rb") as f:
            ident = f.read(64)
            if len(ident) < 52 or not ident.startswith(b"\x7fELF") or ident[5] not in (1, 2):
                return None
            end = "<" if ident[5] == 1 else ">"
            if struct.unpack_from(end + "H", ident, 18)[0] not in HOST_MACHINES:
                return None
            if ident[4] == 2:  # 64-bit
                phoff, = struct.unpack_from(end + "Q", ident, 32)
                phentsize, phnum = struct.unpack_from(end + "HH", ident, 54)
                fmt, at = end + "IIQQQQ", (2, 5)  # p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz
            elif ident[4] == 1:
                phoff, = struct.unpack_from(end + "I", ident, 28)
                phentsize, phnum = struct.unpack_from(end + "HH", ident, 42)
                fmt, at = end + "IIIIII", (1, 4)  # p_type, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz
            else:
                return None
            if phentsize < struct.calcsize(fmt) or phnum > 4096:
                return None
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            for i in range(len(table) // phentsize):
                ph = struct.unpack_from(fmt, table, i * phentsize)
                if ph[0] == PT_INTERP:
                    if ph[at[1]] > 4096:
                        return None
                    f.seek(ph[at[0]])
                    name = f.read(ph[at[1]]).split(b"\0", 1)[0]
                    return name or None
    except (OSError, struct.error):
        return None
    return None


_ARGV0 = {}  # (real path, mtime, size) -> does that loader take --argv0


def _takes_argv0(loader):
    """Does the dynamic loader at real path loader take --argv0 (glibc
    2.33, musl 1.2.3)? Its usage text says so."""
    try:
        st = os.stat(loader)
        key = (loader, st.st_mtime_ns, st.st_size)
        if key not in _ARGV0:
            with open(longpath.open_regular(loader), "rb") as f:
                _ARGV0[key] = b"--argv0" in f.read(8 << 20)
        return _ARGV0[key]
    except OSError:
        return False
