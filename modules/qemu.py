"""qemu: programs of other machines run through qemu-user, as binfmt_misc
would run them, without root.

    umview --qemu -r ~/arm64-tree -- /bin/bash       # the tree's own bash, emulated
    umview -p qemu -- ./hello-riscv64
    umview -p qemu,dir=/opt/qemu/bin -- ./prog-ppc64le

An execve or execveat whose program is an ELF file for another machine
(arm64, armhf, riscv64, ppc64el, s390x, mips, loongarch64, ...) becomes the
exec of the matching emulator, ``qemu-ARCH-static`` or ``qemu-ARCH`` found
in ``dir=`` or on PATH, with the arguments binfmt_misc's "P" flag gives it:
``-0 ARGV0 PROGRAM ARGS...``. PROGRAM is the path as the process named it,
so qemu opens it, and the guest's ELF loader, libraries and files, through
the view: a -r tree, cow layers and fs mounts apply to the guest as to any
process (its system calls are the emulator's). A guest's own exec of a guest
program comes here again. qemu-user shows the guest its own path in
/proc/self/exe, its argv[0], and the guest's machine in uname(2).

The engine is the oldest of the view (it sees a call after every mount has
rewritten it), so it reads the file the kernel would run. Without an
emulator the exec is the kernel's (ENOEXEC), and the monitor says once what
to install. A program of the host's own machines (x86_64, i386) is never
touched; nor is a #! script (its interpreter's exec comes here in turn).
"""
import logging
import os
import shutil
import stat
import struct

from umview import core
from umview.cwdexec import AT_EMPTY_PATH, EXECS, HOST_MACHINES, ExecInView
from umview.engine import CONTINUE, Engine, under_any
from umview.service import Module, unrealize
from umview.syscalls import calls

log = logging.getLogger("umview")

AT_FDCWD = core.AT_FDCWD


def qemu_arch(head):
    """qemu-user's name for the machine of an ELF header (bytes, 64 or
    more), or None: not ELF, or a machine it has no emulator for."""
    if len(head) < 20 or not head.startswith(b"\x7fELF") or head[4] not in (1, 2) or head[5] not in (1, 2):
        return None
    wide, little = head[4] == 2, head[5] == 1
    machine = struct.unpack_from("<H" if little else ">H", head, 18)[0]
    names = {
        183: "aarch64" if little else "aarch64_be",
        40: "arm" if little else "armeb",
        243: "riscv64" if wide else "riscv32",
        21: "ppc64le" if little else "ppc64",
        20: "ppc",
        22: "s390x",
        8: ("mips64el" if little else "mips64") if wide else ("mipsel" if little else "mips"),
        258: "loongarch64",
        2: "sparc", 43: "sparc64",
        4: "m68k",
        42: "sh4" if little else "sh4eb",
        15: "hppa",
        94: "xtensa" if little else "xtensaeb",
        92: "or1k",
        164: "hexagon",
        88: "microblazeel" if little else "microblaze",
        106: "nios2",
        9215: "alpha", 0x9026: "alpha",
    }
    return None if machine in HOST_MACHINES else names.get(machine)


def _head(real):
    """The first 64 bytes of the regular file at real (looked at with
    O_PATH first: opening a device or a FIFO could act or block), or None."""
    try:
        pfd = os.open(real, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return None  # the kernel says why
    try:
        if not stat.S_ISREG(os.fstat(pfd).st_mode):
            return None
        fd = os.open(f"/proc/self/fd/{pfd}", os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    finally:
        os.close(pfd)
    try:
        return os.pread(fd, 64, 0)
    except OSError:
        return None
    finally:
        os.close(fd)


def find_emulator(arch, where=None):
    """The path of qemu-ARCH-static, else qemu-ARCH, in the directory where
    or on PATH; None if neither is there. (A static one runs under any
    root tree: a dynamic one needs the host's libraries at their paths.)"""
    for name in (f"qemu-{arch}-static", f"qemu-{arch}"):
        path = shutil.which(name, path=where) if where else shutil.which(name)
        if path:
            return os.path.abspath(path)
    return None


class ForeignExec(Engine):
    name = "qemu"
    description = "programs of other machines run through qemu-user"
    syscalls = calls("execs")
    newest = -1  # the oldest engine of its view: it sees the path the kernel would get

    def __init__(self, module, where=None):
        self.module = module
        self.where = where
        self._found = {}    # arch -> emulator path or None
        self._warned = set()

    def wants(self, call):
        return call.name in EXECS

    def _program(self, call):
        """(the file's real path as the kernel would open it, its path as
        qemu is to open it in the process, through the view), or None."""
        pidx, _ = EXECS[call.name]
        try:
            given = call.read_string(pidx)  # as rewritten by the newer engines: the kernel's
            named = core.read_string(call.tid, call.orig_args[pidx])  # as the process wrote it
        except OSError:
            return None
        dirfd = AT_FDCWD
        if call.name == "execveat":
            dirfd = core.signed32(call.args[0])
            if call.args[4] & AT_EMPTY_PATH and not given:
                return b"/proc/%d/fd/%d" % (call.tid, dirfd), b"/proc/self/fd/%d" % dirfd
        if given.startswith(b"/"):
            real = given
        elif dirfd == AT_FDCWD:
            real = b"/proc/%d/cwd/%s" % (call.tid, given)
        else:
            real = b"/proc/%d/fd/%d/%s" % (call.tid, dirfd, given)
        if given != named:
            # a newer engine made it another file (the #! interpreter the
            # cwd tracker runs) or a mount's real one: the view's name of it
            return real, self._view_of(given)
        if not named.startswith(b"/") and dirfd != AT_FDCWD:
            named = b"/proc/self/fd/%d/%s" % (dirfd, named)
        return real, named

    def _served_in_view(self, real):
        """Does real lie on a filesystem a process of the view serves (an
        opaque fs mount)? The monitor must not read it: the server may be
        waiting on the monitor. (Its foreign programs are the kernel's.)"""
        view = getattr(self.module, "view", None)
        opaque = [m.target for m in (view.engines if view is not None else ()) if getattr(m, "opaque", False)]
        # (a path relative to a cwd or dirfd, read through /proc: where that
        # lies is not known here)
        return bool(opaque) and (real.startswith(b"/proc/") or under_any(self._view_of(real), opaque))

    def _view_of(self, real):
        """The view's path of a real file that a mount shows (the newest
        mount that says), else the path itself."""
        view = getattr(self.module, "view", None)
        return unrealize(view.engines if view is not None else (), real) or real

    def enter(self, call):
        found = self._program(call)
        if found is None:
            return CONTINUE
        real, named = found
        if self._served_in_view(real):
            return CONTINUE
        head = _head(real)
        arch = qemu_arch(head) if head else None
        if arch is None:
            return CONTINUE
        if arch not in self._found:
            self._found[arch] = find_emulator(arch, self.where)
        emulator = self._found[arch]
        if emulator is None:
            if arch not in self._warned:
                self._warned.add(arch)
                log.warning("qemu: %s is a program for %s, and neither qemu-%s-static nor qemu-%s is %s: it "
                            "cannot run (apt-get install qemu-user-static)", os.fsdecode(named), arch, arch, arch,
                            f"in {self.where}" if self.where else "on PATH")
            return CONTINUE
        return self._run_under(call, emulator, named)

    @staticmethod
    def _run_under(call, emulator, named):
        """The exec becomes emulator's: -0 ARGV0 PROGRAM ARGV[1:]."""
        pidx, aidx = EXECS[call.name]
        argv = ExecInView._argv(call, aidx)
        if argv is None:
            return CONTINUE  # too many arguments to rebuild here
        argv0 = call.read_mem(argv[0], 4096).split(b"\0", 1)[0] if argv else named
        ExecInView.set_argv(call, aidx, [os.fsencode(emulator), b"-0", argv0, named] + argv[1:])
        call.set_string(pidx, os.fsencode(emulator))
        if call.name == "execveat":
            call.args[0] = AT_FDCWD & 0xFFFFFFFFFFFFFFFF
            call.args[4] &= ~AT_EMPTY_PATH
        return CONTINUE


class Qemu(Module):
    name = "qemu"
    description = "programs of other machines (arm64, riscv64, ...) run through qemu-user"
    options_help = "dir=DIR: where qemu-ARCH-static or qemu-ARCH are (default: PATH)"

    def __init__(self, options):
        super().__init__(options)
        self.check_options({"dir"})
        where = self.options.get("dir")
        if where is True:
            raise ValueError("module qemu: dir needs a value (dir=DIR)")
        if where is not None and not os.path.isdir(str(where)):
            raise ValueError(f"module qemu: dir={where}: not a directory")
        self.engine = ForeignExec(self, os.path.abspath(str(where)) if where else None)

    def engines(self):
        return [self.engine]
