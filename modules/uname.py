"""uname: the system's names as a view shows them.

    umview -p uname,nodename=box -- hostname             # box
    umview -p uname,nodename=box,release=9.9 -- uname -a
    umview -p uname -- sh -c 'hostname other; hostname'  # as root of the view: other

uname(2) (and i386's olduname and oldolduname) returns the module's fields
where they are set and the kernel's elsewhere: the call runs, and its result
is rewritten at exit, so a bad pointer gets EFAULT as natively and a 32-bit
process keeps the machine name the kernel gives it ("i686"). glibc's
gethostname, getdomainname, hostname(1), uname(1), Python's os.uname() and
socket.gethostname() all read uname(2).

sethostname(2) and setdomainname(2) change the view's name, never the
host's, for every process of the view, with the kernel's rules: EPERM
without CAP_SYS_ADMIN over the caller's UTS namespace (the monitor asks the
kernel itself: the same call with a length of -1, which fails with EPERM for
a caller without it and with EINVAL, setting nothing, for one with it), then
EINVAL for a length outside 0..64, EFAULT for a bad pointer.

Opening /proc/sys/kernel/hostname, domainname, osrelease, ostype or version
for reading gives a memfd holding the view's value (its /proc/self/fd link
names the memfd). Opening one for writing is refused with EACCES, what a
normal user gets natively; as root of the view, set the name with
sethostname(2) (hostname NAME) instead. The module is not a sandbox: root
of the view can still reach the real files another way (an O_PATH fd
reopened through /proc/self/fd, /proc/self/root/...); --sandbox's guard
refuses every write under /proc/sys.
"""
import errno
import logging
import os

from umview import core, fdpass
from umview.engine import CONTINUE, CONTINUE_AFTER, Engine, Skip
from umview.openflags import O_DIRECTORY, O_PATH, writes
from umview.service import Module
from umview.syscalls import calls

log = logging.getLogger("umview")

#: struct new_utsname, in order; __NEW_UTS_LEN is 64 (65 bytes with the NUL)
FIELDS = ("sysname", "nodename", "release", "version", "machine", "domainname")
UTS_LEN = 64
#: the layouts of the structures each call fills: (field names, bytes per field)
LAYOUTS = {
    "uname": (FIELDS, UTS_LEN + 1),
    "olduname": (FIELDS[:5], UTS_LEN + 1),  # struct old_utsname: no domainname
    "oldolduname": (FIELDS[:5], 9),         # struct oldold_utsname: __OLD_UTS_LEN 8
}
SETTERS = {"sethostname": "nodename", "setdomainname": "domainname"}
PROC_FILES = {
    b"/proc/sys/kernel/hostname": "nodename",
    b"/proc/sys/kernel/domainname": "domainname",
    b"/proc/sys/kernel/osrelease": "release",
    b"/proc/sys/kernel/ostype": "sysname",
    b"/proc/sys/kernel/version": "version",
}
OPTIONS = {"nodename": "nodename", "domainname": "domainname", "release": "release", "version": "version",
           "machine": "machine", "sysname": "sysname"}


class UnameEngine(Engine):
    """uname(2) and its old variants, sethostname(2), setdomainname(2), and
    the opens of the /proc/sys/kernel files that show the names."""

    name = "uname"
    syscalls = frozenset({*LAYOUTS, *SETTERS})
    path_syscalls = calls("opens")
    prefixes = tuple(PROC_FILES)

    def __init__(self, values):
        #: field -> bytes, for the fields the view sets (the others are the kernel's)
        self.values = values
        self._refused_write = False

    def wants(self, call):
        if call.name in self.path_syscalls:
            paths = call.paths()
            return bool(paths) and paths[0] in PROC_FILES
        return call.name in self.syscalls

    def enter(self, call):
        if call.name in LAYOUTS:
            return CONTINUE_AFTER if self.values else CONTINUE
        if call.name in SETTERS:
            return self.set_name(call, SETTERS[call.name])
        return self.open_proc_file(call, PROC_FILES[call.paths()[0]])

    def exit(self, call):
        if call.retval != 0:
            return
        names, size = LAYOUTS[call.name]
        buf = call.buf
        for i, field in enumerate(names):
            value = self.values.get(field)
            if value is not None:
                call.write_mem(buf + i * size, value[:size - 1].ljust(size, b"\0"))

    def set_name(self, call, field):
        """Implements sethostname(2) and setdomainname(2) for the view."""
        # the kernel's own permission check, with nothing set: EPERM without
        # CAP_SYS_ADMIN over the caller's UTS namespace, else EINVAL (len < 0)
        # (or what a seccomp filter of the process's own answers)
        probe = call.inject(call.name, 0, -1)
        if probe != -errno.EINVAL:
            raise OSError(-probe if probe < 0 else errno.EPERM, "not permitted")
        length = core.signed32(call.len)
        if length < 0 or length > UTS_LEN:
            raise OSError(errno.EINVAL, "name too long")
        data = call.read_mem(call.buf, length) if length else b""
        self.values[field] = data.split(b"\0", 1)[0]
        return Skip(0)

    def open_proc_file(self, call, field):
        """An open of /proc/sys/kernel/FILE: a memfd with the view's value."""
        flags = call.open_flags()
        if flags & (O_PATH | O_DIRECTORY):
            return CONTINUE  # an O_PATH fd, or ENOTDIR: the kernel's
        if writes(flags):
            if not self._refused_write:
                self._refused_write = True
                log.warning("uname: writing %s in the view is refused (EACCES): set the name with "
                            "sethostname(2) or setdomainname(2) (hostname NAME) instead",
                            call.paths()[0].decode(errors="replace"))
            raise OSError(errno.EACCES, "the view's names are set with sethostname(2)")
        if field not in self.values:
            return CONTINUE  # a value the view leaves real
        return fdpass.hand_over_content(call, self.values[field] + b"\n", flags, f"umview-{field}")


class Uname(Module):
    name = "uname"
    description = "the view's host name and uname(2) fields (sethostname in the view changes them)"
    options_help = ("nodename=NAME, domainname=NAME, release=R, version=V, machine=M, sysname=S "
                    "(each at most 64 bytes; unset fields are the kernel's)")

    def __init__(self, options):
        super().__init__(options)
        self.check_options(set(OPTIONS))
        self.values = {}
        for opt, field in OPTIONS.items():
            if opt not in self.options:
                continue
            value = self.options[opt]
            if value is True:
                raise ValueError(f"module uname: {opt} needs a value ({opt}=...)")
            data = os.fsencode(str(value))
            if len(data) > UTS_LEN:
                raise ValueError(f"module uname: {opt}={value!r} is {len(data)} bytes long; the kernel "
                                 f"keeps at most {UTS_LEN}: give a shorter one")
            self.values[field] = data
        self.engine = UnameEngine(self.values)

    def engines(self):
        return [self.engine]
