"""fakeroot: the view's processes believe they are root (or the ids given).

    umview -0 -- sh -c 'id -u; chown 0:0 f; stat -c %u f'     # 0, 0
    umview -p fakeroot,uid=1000,gid=1000 CMD                   # or --uid/--gid
    umview -0 --sandbox -- dpkg -i pkg.deb                    # the owners kept in the layer
    umview -p fakeroot,db=owners.json -- make install          # fakeroot -i/-s

What it serves, as fakeroot(1) and proot -0 do, with no privilege at all:

- **ids**: getuid, geteuid, getgid, getegid, getresuid, getresgid, getgroups
  answer the view's ids (per thread, inherited at fork); setuid, setgid,
  setreuid, setregid, setresuid, setresgid, setfsuid, setfsgid and setgroups
  change them by the kernel's rules, fake root being privileged. The 16-bit
  calls of i386 and their *32 forms alike. ``/proc/PID/status`` of a process
  of the view (self, thread-self, PID, task/TID) shows them on its Uid:,
  Gid: and Groups: lines (a memfd with the rewritten text).
- **owners and modes**: chown, lchown, fchown, fchownat (and the i386 16-bit
  and *32 forms) run for real and, where the kernel refuses with EPERM (the
  file is not the user's to give away), succeed; chmod, fchmod, fchmodat,
  fchmodat2 likewise. What the process set is recorded (records.py) and
  every stat shows it back: stat, lstat, fstat, newfstatat, statx, and
  i386's stat, stat64, lstat64, fstat64, fstatat64 with their layouts. A
  file with no record shows its real owner, except that the user's own ids
  show as the view's (the user's files look root's).
- **devices**: mknod and mknodat of a character or block device make an
  empty regular file (what an unprivileged user may make), recorded as
  that device: stat shows its type and st_rdev.

Real calls, real errors: the process gets the kernel's errno whenever the
call fails for another reason than ownership (ENOENT, EACCES on the way,
ENOTDIR, ELOOP, EROFS): only EPERM becomes success. A chmod keeps the
owner's read and write bits (and search, on a directory) in the real mode,
as fakeroot does, so that the real user can still use the file: ``chmod
000 f`` shows 000 in the view and leaves f 0600 for real.

Not virtualized: the kernel's permission checks still use the real ids (an
open of a file mode 0600 owned by another user fails as before: fake root
reads nothing it could not); files a process makes are the user's (shown
as the view's ids); a file deleted keeps its record until an unlink,
rmdir or rename seen in the view removes its last name. This gives no
privilege at all (docs/security.md).
"""
import errno
import logging
import os
import re
import stat
import struct

from umview import core, fdpass
from umview.engine import CONTINUE, CONTINUE_AFTER, Engine, Skip
from umview.procs import PROCESSES
from umview.service import Module
from umview.syscalls import calls, table

from . import creds as C
from .records import Records, shown

log = logging.getLogger("umview")

#: the calls i386 has in a 16-bit form (its *32 names are the 32-bit ones)
LEGACY16 = frozenset(r.name for r in table.ROWS if r.name + "32" in r.i386_variants)
IDENTITY = LEGACY16 & calls("set-ids", "get-ids")
OVERFLOW_ID = 65534  # what a 16-bit call shows of an id above 65535 (overflowuid)
GET_ONE = {"getuid": ("uid", 0), "geteuid": ("uid", 1), "getgid": ("gid", 0), "getegid": ("gid", 1)}

CHOWNS = calls("chowns")
CHMODS = calls("chmods")
MKNODS = calls("mknods")
REMOVES = calls("unlinks", "renames")
AT_REMOVEDIR = 0x200
RENAME_EXCHANGE = 2

# struct stat as each ABI's stat calls fill it: field -> (offset, struct code)
_STAT64 = (144, {"dev": (0, "Q"), "ino": (8, "Q"), "mode": (24, "I"), "uid": (28, "I"), "gid": (32, "I"),
                 "rdev": (40, "Q")})
_I386_STAT = (64, {"dev": (0, "I"), "ino": (4, "I"), "mode": (8, "H"), "uid": (12, "H"), "gid": (14, "H"),
                   "rdev": (16, "I")})
_I386_STAT64 = (96, {"dev": (0, "Q"), "ino": (88, "Q"), "mode": (16, "I"), "uid": (24, "I"), "gid": (28, "I"),
                     "rdev": (32, "Q")})
# which struct each call of the stat family fills, per ABI (__old_kernel_stat,
# of i386's oldstat and the like, is not faked)
_STAT = calls("stats") - calls("stat64s", "oldstats")
STAT_LAYOUTS = {
    **{(abi, n): _STAT64 for abi in ("x86_64", "x32") for n in _STAT},
    **{("i386", n): _I386_STAT for n in _STAT},
    **{("i386", n): _I386_STAT64 for n in calls("stat64s")},
}
STATS = frozenset(n for _, n in STAT_LAYOUTS) | {"statx"}
# struct statx (the same on every ABI): the fields fakeroot reads or changes
_STATX_IDS = struct.Struct("=IIH")  # at 20: uid, gid, mode
_STATX_INO = struct.Struct("=Q")  # at 32
_STATX_DEV = struct.Struct("=IIII")  # at 128: rdev major, minor, dev major, minor

# /proc/PID/status and /proc/PID/task/TID/status
STATUS = re.compile(rb"^/proc/(self|thread-self|\d+)(?:/task/(\d+))?/status$")


def _names(*bases):
    """Neutral names of these calls and their i386 *32 forms."""
    return frozenset(bases) | frozenset(b + "32" for b in bases if b in LEGACY16)


class FakerootEngine(Engine):
    """The one engine of the module: ids, owners, modes and devices."""

    name = "fakeroot"
    description = "the view's processes are root (or the ids given): ids, owners, modes, devices"
    syscalls = _names(*IDENTITY, *CHOWNS, *CHMODS, *MKNODS, *REMOVES, *STATS)
    # /proc/PID/status: its Uid:, Gid: and Groups: lines
    path_syscalls = calls("opens")
    prefixes = (b"/proc",)
    proc_files = frozenset({b"status"})

    def __init__(self, module):
        self.module = module
        self.first = C.Creds.of(module.uid, module.gid)

    # --- threads: their credentials are in their records (umview.procs),
    # per thread and inherited at clone as the kernel's; each names the
    # fakeroot engine that set them (a nested view's own fakeroot starts
    # from its first ids) ---
    def of(self, tid):
        t = PROCESSES.threads.get(tid)
        c = t.creds if t is not None else None
        return c[1] if c is not None and c[0] is self else self.first

    def _set(self, tid, creds):
        PROCESSES.record(tid).creds = (self, creds)

    # --- the pipeline ---
    def wants(self, call):
        if call.name in self.path_syscalls:
            paths = call.paths()
            return bool(paths) and paths[0] is not None and STATUS.match(paths[0]) is not None
        return call.name in self.syscalls

    def enter(self, call):
        name = call.name
        base = name[:-2] if name.endswith("32") else name
        narrow = call.abi == "i386" and name in LEGACY16  # the 16-bit form
        if base in IDENTITY:
            return self._identity(call, base, narrow)
        if name in STATS or base in CHOWNS:
            return CONTINUE_AFTER  # decided at exit, on what the kernel did
        if base in REMOVES:
            return self._removing(call) if self.module.records.by_key else CONTINUE
        if base in CHMODS:
            mode = call.mode
            call.state(self).mode = mode
            if mode & 0o600 != 0o600:
                call.set_arg("mode", mode | 0o600)  # the real user keeps reading and writing it
            return CONTINUE_AFTER
        if base in MKNODS:
            mode = call.mode
            if stat.S_IFMT(mode) not in (stat.S_IFCHR, stat.S_IFBLK):
                return CONTINUE
            st = call.state(self)
            st.kind, st.rdev = stat.S_IFMT(mode), call.dev
            call.set_arg("mode", stat.S_IFREG | stat.S_IMODE(mode))
            call.set_arg("dev", 0)
            return CONTINUE_AFTER
        if name in self.path_syscalls:
            return self._status(call)
        return CONTINUE

    def exit(self, call):
        name = call.name
        base = name[:-2] if name.endswith("32") else name
        if name in STATS:
            if call.retval == 0:
                self._show(call)
        elif base in CHOWNS:
            self._chowned(call, call.abi == "i386" and name in LEGACY16)
        elif base in CHMODS:
            self._chmoded(call)
        elif base in MKNODS:
            if call.retval == 0:
                st = call.state(self)
                found = self._real_stat(call)
                if found is not None:
                    self.module.records.set(found[1], kind=st.kind, rdev=st.rdev)
        elif base in REMOVES:
            if call.retval == 0:
                for key in call.state(self).gone:
                    self.module.records.forget(key)

    # --- ids ---
    def _identity(self, call, base, narrow):
        tid = call.tid
        c = self.of(tid)

        def arg(name):
            v = call.arg(name)
            if narrow:
                v &= 0xFFFF
                return C.UNCHANGED if v == 0xFFFF else v
            return v

        def out(v):
            return v if not narrow or v <= 0xFFFF else OVERFLOW_ID

        if base in GET_ONE:
            kind, i = GET_ONE[base]
            return Skip(out(c.ids(kind)[i]))
        kind = base[-3:]  # "uid" or "gid"
        if base.startswith("getres"):
            k = kind[0]
            code = "<H" if narrow else "<I"
            for which, v in zip("res", c.ids(kind)):
                call.write_mem(call.arg(f"{which}{k}idp"), struct.pack(code, out(v)))
            return Skip(0)
        if base == "set" + kind:  # setuid, setgid
            self._set(tid, C.set_id(c, kind, arg(kind)))
        elif base.startswith("setres"):
            self._set(tid, C.set_res(c, kind, arg(f"r{kind}"), arg(f"e{kind}"), arg(f"s{kind}")))
        elif base.startswith("setre"):
            self._set(tid, C.set_re(c, kind, arg(f"r{kind}"), arg(f"e{kind}")))
        elif base.startswith("setfs"):
            creds, former = C.set_fs(c, kind, arg(kind))
            self._set(tid, creds)
            return Skip(out(former))
        elif base == "getgroups":
            return self._getgroups(call, c, narrow, out)
        elif base == "setgroups":
            self._set(tid, C.set_groups(c, self._read_groups(call, narrow)))
        return Skip(0)

    @staticmethod
    def _getgroups(call, c, narrow, out):
        size = core.signed32(call.ngroups)
        if size < 0:
            raise OSError(errno.EINVAL, "negative size")
        if size == 0:
            return Skip(len(c.groups))
        if size < len(c.groups):
            raise OSError(errno.EINVAL, "the list is too small")
        if c.groups:
            call.write_mem(call.raw("list"), struct.pack(f"<{len(c.groups)}{'H' if narrow else 'I'}",
                                                         *(out(g) for g in c.groups)))
        return Skip(len(c.groups))

    @staticmethod
    def _read_groups(call, narrow):
        size = core.signed32(call.ngroups)
        if size < 0 or size > C.NGROUPS_MAX:
            raise OSError(errno.EINVAL, "bad number of groups")
        width = 2 if narrow else 4
        data = call.read_mem(call.raw("list"), size * width) if size else b""
        return struct.unpack(f"<{size}{'H' if narrow else 'I'}", data)

    def _status(self, call):
        """/proc/PID/status of a process of the view, with its fake ids."""
        flags = call.open_flags()
        if flags & 3:
            return CONTINUE  # opened for writing: the kernel's answer
        m = STATUS.match(call.paths()[0])
        who = m.group(2) or m.group(1)
        text = fdpass.view_proc_file(call, who, b"status")
        if text is None:
            return CONTINUE
        try:
            c = self.of(fdpass.proc_pid(who, call.tid))
        except OSError:
            return CONTINUE
        return fdpass.hand_over_content(call, status_text(text, c), flags, "umview-status")

    # --- files ---
    def _real_stat(self, call):
        """(os.stat_result, key) of the file the call acted on, as the kernel
        was given it (the older engines' rewritten path, relative to the
        thread's cwd or dirfd), or None."""
        where, follow = kernel_path(call)
        if where is None:
            return None
        try:
            st = os.stat(where, follow_symlinks=follow)
        except OSError:
            return None
        return st, (st.st_dev, st.st_ino)

    def _chowned(self, call, narrow):
        if call.retval not in (0, -errno.EPERM):
            return  # the kernel's own error: missing file, search permission, read-only...
        found = self._real_stat(call)
        if found is None:
            return
        st, key = found
        uid, gid = call.uid, call.gid
        if narrow:
            uid, gid = (C.UNCHANGED if v & 0xFFFF == 0xFFFF else v & 0xFFFF for v in (uid, gid))
        m = self.module
        mode, cur_uid, cur_gid, _ = shown(m.records, m.real, m.ids, _fields(st))
        fields = {"uid": cur_uid if uid == C.UNCHANGED else uid, "gid": cur_gid if gid == C.UNCHANGED else gid}
        if (uid, gid) != (C.UNCHANGED, C.UNCHANGED) and not stat.S_ISDIR(mode):
            # as the kernel: a change of owner clears set-user-ID, and
            # set-group-ID where it means "run as the group"
            kept = mode & ~stat.S_ISUID
            if mode & stat.S_IXGRP:
                kept &= ~stat.S_ISGID
            if kept != mode:
                fields["mode"] = stat.S_IMODE(kept)
        m.records.set(key, **fields)
        call.retval = 0

    def _chmoded(self, call):
        if call.retval not in (0, -errno.EPERM):
            return
        found = self._real_stat(call)
        if found is None:
            return
        st, key = found
        mode = call.state(self).mode
        self.module.records.set(key, mode=stat.S_IMODE(mode))
        if call.retval == 0 and stat.S_ISDIR(st.st_mode) and st.st_mode & 0o700 != 0o700:
            where, _ = kernel_path(call)
            try:
                os.chmod(where, stat.S_IMODE(st.st_mode) | 0o700)  # the real user keeps entering it
            except OSError:
                pass
        call.retval = 0

    def _removing(self, call):
        """unlink, rmdir, rename over a name: the records of the files whose
        last name goes, forgotten if the call succeeds (their inode numbers
        are free again)."""
        paths = call.paths()
        if call.name.startswith("rename"):
            if call.name == "renameat2" and call.flags & RENAME_EXCHANGE:
                return CONTINUE
            paths = paths[1:]  # the name replaced
        gone = []
        for p in paths:
            if p is None:
                continue
            try:
                st = os.lstat(self.module.realize(p))
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if (st.st_nlink <= 1 or stat.S_ISDIR(st.st_mode)) and self.module.records.get(key) is not None:
                gone.append(key)
        if not gone:
            return CONTINUE
        call.state(self).gone = gone
        return CONTINUE_AFTER

    def _show(self, call):
        """Rewrite the stat buffer the kernel filled: the recorded owner,
        group, mode and device type."""
        m = self.module
        if call.name == "statx":
            addr = call.orig_args[call.index_of("statxbuf")]
            buf = call.read_mem(addr, 144)
            uid, gid, mode = _STATX_IDS.unpack_from(buf, 20)
            ino, = _STATX_INO.unpack_from(buf, 32)
            rmaj, rmin, dmaj, dmin = _STATX_DEV.unpack_from(buf, 128)
            rdev = os.makedev(rmaj, rmin)
            new = shown(m.records, m.real, m.ids, (os.makedev(dmaj, dmin), ino, mode, uid, gid, rdev))
            if new != (mode, uid, gid, rdev):
                call.write_mem(addr + 20, _STATX_IDS.pack(new[1], new[2], new[0] & 0xFFFF))
                if new[3] != rdev:
                    call.write_mem(addr + 128, struct.pack("=II", os.major(new[3]), os.minor(new[3])))
            return
        size, layout = STAT_LAYOUTS[(call.abi, call.name)]
        index = call.index_of("statbuf" if "statbuf" in call.spec.by_name else "ptr")
        addr = call.orig_args[index]
        buf = bytearray(call.read_mem(addr, size))
        got = {f: struct.unpack_from("<" + code, buf, off)[0] for f, (off, code) in layout.items()}
        new = shown(m.records, m.real, m.ids, (got["dev"], got["ino"], got["mode"], got["uid"], got["gid"],
                                                got["rdev"]))
        if new == (got["mode"], got["uid"], got["gid"], got["rdev"]):
            return
        for f, v in zip(("mode", "uid", "gid", "rdev"), new):
            off, code = layout[f]
            if code == "H" and f != "mode" and v > 0xFFFF:
                v = OVERFLOW_ID
            struct.pack_into("<" + code, buf, off, v & ((1 << (8 * struct.calcsize(code))) - 1))
        call.write_mem(addr, bytes(buf))


def _fields(st):
    return st.st_dev, st.st_ino, st.st_mode, st.st_uid, st.st_gid, st.st_rdev


def kernel_path(call):
    """(a path the monitor can stat for the file the call acted on, as the
    kernel was given it at its entry: the older engines' rewritten path;
    whether to follow a last symlink), or (None, False)."""
    tid = call.tid
    if not call.path_indices:  # fchown, fchmod: the fd
        return b"/proc/%d/fd/%d" % (tid, call.fd), True
    try:
        raw = call.read_string(call.path_indices[0])
    except OSError:
        return None, False
    dirfd_index = call.dirfd_indices[0]
    dirfd = core.signed32(call.args[dirfd_index]) if dirfd_index is not None else core.AT_FDCWD
    base = b"/proc/%d/cwd" % tid if dirfd == core.AT_FDCWD else b"/proc/%d/fd/%d" % (tid, dirfd)
    if raw == b"":
        return base, True  # AT_EMPTY_PATH: the dirfd's file
    if raw.startswith(b"/"):
        # /proc/self in the monitor would be the monitor's
        raw = re.sub(rb"^/proc/(self|thread-self)(?=/|$)",
                     lambda m: b"/proc/%d" % (fdpass.tgid_of(tid) if m.group(1) == b"self" else tid), raw)
        return raw, call.spec.follows(0, call.args)
    return base + b"/" + raw, call.spec.follows(0, call.args)


def status_text(text, c):
    """The text of /proc/PID/status with the Uid:, Gid: and Groups: lines of c."""
    def line(m):
        key = m.group(1)
        if key == b"Uid":
            values = (c.ruid, c.euid, c.suid, c.fsuid)
        elif key == b"Gid":
            values = (c.rgid, c.egid, c.sgid, c.fsgid)
        else:
            # (the kernel ends the list with a space, even an empty one)
            return b"Groups:\t" + b" ".join(b"%d" % g for g in c.groups) + b" \n"
        return key + b":\t" + b"\t".join(b"%d" % v for v in values) + b"\n"

    return re.sub(rb"^(Uid|Gid|Groups):[^\n]*\n", line, text, flags=re.M)


class Fakeroot(Module):
    name = "fakeroot"
    description = "a fake root user: ids, chown, chmod, mknod of devices seem to work, stat shows them"
    options_help = ("uid=N, gid=N (the ids the processes see; default 0), db=FILE (keep what they set "
                    "there, read it at start: as fakeroot -s/-i; else in a cow layer of the view if any)")

    def __init__(self, options):
        super().__init__(options)
        self.check_options({"uid", "gid", "db"})
        ids = []
        for key in ("uid", "gid"):
            value = self.options.get(key, 0)
            try:
                n = int(value)
            except (TypeError, ValueError):
                n = -1
            if n < 0 or n >= C.UNCHANGED or value is True:
                raise ValueError(f"module fakeroot: {key}={value!r} is not a {key} (a number from 0 to "
                                 f"{C.UNCHANGED - 1}; e.g. -p fakeroot,{key}=1000, or umview --{key} 1000)")
            ids.append(n)
        #: the ids the view shows (those of its first process)
        self.uid, self.gid = self.ids = tuple(ids)
        #: the user's own ids, whose files show as the view's
        self.real = (os.getuid(), os.getgid())
        db = self.options.get("db")
        if db is True or db == "":
            raise ValueError("module fakeroot: db= needs a file name (e.g. -p fakeroot,db=owners.json)")
        self.db = os.path.join(self.cwd, db) if db else None
        self.records = Records()
        if self.db is not None:
            self.records.load_db(self.db)
        self.layers = []  # the upper directories of the view's cow layers, where records are kept

    def engines(self):
        if self.db is None:
            for e in self.older:
                layers = getattr(e, "layers", None)
                if layers is not None and getattr(e, "mode", None) == "cow" and layers.upper not in self.layers:
                    self.layers.append(layers.upper)
                    self.records.load_layer(layers.upper)
        return [FakerootEngine(self)]

    def close(self):
        try:
            if self.db is not None:
                self.records.save_db(self.db)
            for upper in self.layers:
                self.records.save_layer(upper)
        except OSError as exc:
            where = self.db or os.fsdecode(b", ".join(self.layers))
            log.warning("fakeroot: the owners and modes set in the view could not be kept in %s: %s",
                        where, exc.strerror)
