"""fs: filesystem images, archives, tmpfs and FUSE servers, mounted for the
processes of the view alone, without root, with the kernel doing the I/O.

    umview -p fs bash
    $ vumount -t ext4 disk.img /mnt          # or mount(8) as root; -o ro, server options
    $ vumount -t iso9660 cd.iso /media/cd
    $ vumount -t tar.gz src.tar.gz /src      # archivemount
    $ vumount -t tmpfs -o size=64m none /scratch
    $ squashfuse root.sqfs /mnt              # any FUSE server run in the view
    $ fusermount -u /mnt                     # or umount / vuumount

    umview -p fs,mount=disk.img:/mnt bash    # at start (type detected; or :TYPE)

Every mount is made in the namespace of the view's mount helper (helper.py):
a process in a private user + mount namespace, started with the first mount
and gone with the view. The FUSE servers are Debian's, run unmodified in that
namespace (fuse2fs, squashfuse, fuseiso, fusefat, fuse-zip, archivemount);
tmpfs is the kernel's. The view redirects the mount point to the helper's tree
(/proc/HELPER/root/TARGET), as viewfs redirects a move mount: files opened
there are real kernel files, and read, write, mmap, exec and getdents on
them never stop. The helper mounts each filesystem at the path the view shows
it at, so the kernel names its files by the view's path (/proc/self/fd,
/proc/self/maps, /proc/self/exe); /proc/self/mountinfo, /proc/self/mounts
and /etc/mtab read in the view list the view's mounts (MountTable).

A FUSE server started inside the view (its mount(2) of type fuse or fuse.NAME
with fd=N) is mounted by the helper on the server's own /dev/fuse connection;
as a normal user, /dev/fuse opened in the view is opened by the helper, in
its user namespace, which the kernel requires of a connection mounted there.
"""
import errno
import functools
import logging
import os
import re
import shutil
import stat

from umview import core, fdpass, longpath, pathwalk
from umview.engine import CONTINUE, Engine, Skip
from umview.service import Module, RedirectMount
from umview.syscalls import calls

from . import partitions
from .helper import HelperError, MountHelper

log = logging.getLogger("umview")

MS_RDONLY = 1
MS_NOSUID, MS_NODEV = 2, 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_MOVE = 8192
MNT_FORCE, MNT_DETACH = 1, 2
UMOUNT_NOFOLLOW = 8

#: filesystem type -> the FUSE server that serves it
SERVERS = {
    "ext2": "fuse2fs", "ext3": "fuse2fs", "ext4": "fuse2fs",
    "squashfs": "squashfuse",
    "iso9660": "fuseiso",
    "vfat": "fusefat", "msdos": "fusefat",
    "zip": "fuse-zip",
    "tar": "archivemount", "tar.gz": "archivemount", "tgz": "archivemount", "tar.bz2": "archivemount",
    "tar.xz": "archivemount", "tar.zst": "archivemount", "cpio": "archivemount", "archive": "archivemount",
}
#: View-OS names (umview 0.8's umfuse modules)
ALIASES = {"umfuseext2": "ext2", "umfusefat": "vfat", "umfuseiso9660": "iso9660", "umfusezip": "zip",
           "umfusearchive": "archive"}
KERNEL_TYPES = ("tmpfs",)


def detect_type(path, offset=0):
    """The filesystem type of an image or archive from its first bytes (at
    offset: a partition's), or None."""
    try:
        with open(longpath.open_regular(path, devices=True), "rb") as f:
            f.seek(offset)
            head = f.read(36 * 1024)
    except OSError:
        return None
    if head[1080:1082] == b"\x53\xef":
        return "ext4"
    if head[:4] in (b"hsqs", b"sqsh"):
        return "squashfs"
    if head[32769:32774] == b"CD001":
        return "iso9660"
    if head[:4] == b"PK\x03\x04" or head[:4] == b"PK\x05\x06":
        return "zip"
    if head[257:262] == b"ustar" or head[:2] == b"\x1f\x8b" or head[:3] == b"BZh" \
            or head[:6] == b"\xfd7zXZ\x00" or head[:4] == b"\x28\xb5\x2f\xfd" or head[:6] in (b"070701", b"070707"):
        return "archive"
    if head[510:512] == b"\x55\xaa" and (b"FAT" in head[54:62] or b"FAT" in head[82:90]):
        return "vfat"
    return None


def _readable(path, name):
    """Fail with the reason if the image path cannot be read (its type can
    then not be told: the cause is that, not its content)."""
    try:
        with open(longpath.open_regular(path, devices=True), "rb"):
            pass
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise HelperError(exc.errno, f"cannot read {name}: {exc.strerror}") from None


def _holds_dev_fuse(pid):
    """Has process pid (a string) a /dev/fuse connection open?"""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/fuse":
                return True
        except OSError:
            pass
    return False


def loop_backing_file(path):
    """The file behind a loop device (mount(8) run as root sets one up for an
    image before mount(2)), or None. The server then opens the file itself,
    and the device, made with autoclear, goes when mount(8) closes it."""
    try:
        st = os.stat(path)
        if not stat.S_ISBLK(st.st_mode):
            return None
        with open(f"/sys/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}/loop/backing_file", "rb") as f:
            backing = f.read().rstrip(b"\n")
    except OSError:
        return None
    return backing if backing.startswith(b"/") and os.path.exists(backing) else None


@functools.lru_cache(None)
def _libfuse2(server):
    """Is server linked with libfuse 2? It refuses a mount point that is not
    empty unless told "nonempty"; the kernel's mount(2) takes any directory
    (libfuse 3 dropped the check)."""
    path = shutil.which(server)
    try:
        with open(path, "rb") as f:
            return b"libfuse.so.2\0" in f.read()
    except (OSError, TypeError):
        return False


def _owner_ids(value):
    """The owner=UID:GID option (owner=root: 0:0): what a normal user is in
    the mount helper's user namespace, so the ids the images record for the
    view's files (a fake root's: root's). None: the user's own ids."""
    if value is None:
        return None
    if value == "root":
        return (0, 0)
    uid, sep, gid = str(value).partition(":")
    if not (sep and uid.isdigit() and gid.isdigit()):
        raise ValueError(f"module fs: owner={value}: expected UID:GID or root")
    return (int(uid), int(gid))


def server_argv(server, source, target, options, readonly, owner=None):
    """The command line that runs server in the foreground on target. owner:
    (uid, gid) of the user in the user namespace of its own the user's
    helper runs it in, where the other ids an image records are not mapped."""
    opts = [o for o in options if o not in ("rw", "ro", "defaults")]
    if owner is not None and not any(o.startswith(("uid=", "gid=")) for o in opts):
        # the kernel refuses to write a file whose owner it cannot map
        # (inode_permission: HAS_UNMAPPED_ID), so every file of the image
        # is shown as the user's, as the user may change it when running
        # the server natively (libfuse's own uid= and gid= options)
        opts += [f"uid={owner[0]}", f"gid={owner[1]}"]
    if _libfuse2(server) and "nonempty" not in opts:
        opts.append("nonempty")  # a mount over a directory with files in it, as the kernel's
    pre = []
    if server == "fuseiso":
        # no ~/.mtab.fuseiso (the home of the passwd entry, not $HOME): a
        # file written outside the view; where that home is not writable
        # (nobody's /nonexistent) fuseiso exits once mounted: a dead mount
        pre.append("-n")
    elif server == "fuse2fs" and owner is not None:
        # a normal user's image: fuse2fs -o fakeroot, as the user would run
        # it, lets the user read and write every file of it
        opts += [o for o in ("fakeroot",) if o not in opts]
    elif server == "fuse2fs":
        # root's: the kernel checks permissions, as its ext4 driver does:
        # fuse2fs's own check (1.47.0) refuses a normal user
        # open(O_CREAT|O_RDWR, 0444) of the file it creates, and git cannot
        # write an object
        opts += [o for o in ("default_permissions", "fakeroot") if o not in opts]
    if readonly:
        opts.append("ro")
        if server == "fuse-zip":
            pre.append("-r")
        elif server == "archivemount":
            opts.append("readonly")
    elif server == "fusefat":
        opts.append("rw+")  # fusefat is read-only unless asked
    argv = [server, *pre, source, target, "-f"]
    if opts:
        argv += ["-o", ",".join(opts)]
    return argv


def _lookup(path, what):
    """os.stat(path), or OSError with the errno the kernel would give a
    mount(2) that looks it up (ENOENT, EACCES, ENOTDIR, ...)."""
    try:
        return os.stat(path)
    except OSError as exc:
        raise OSError(exc.errno, f"{what}: {os.strerror(exc.errno)}") from None


def _escape(path):
    for ch in b"\\ \t\n":
        path = path.replace(bytes([ch]), b"\\%03o" % ch)
    return path


def _unescape(field):
    return re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field)


class FsMount(RedirectMount):
    """One filesystem of the view: target (the view's path) shows the
    helper's mount at ns_target (the path in its namespace)."""

    def __init__(self, module, target, ns_target, fstype, source, traced_server=False):
        self.module = module
        self.ns_target = ns_target.rstrip(b"/") or b"/"
        self.fstype = fstype
        self.source = source
        #: served by a FUSE server that runs in the view: the monitor must
        #: never wait on this filesystem (the server may be waiting on the
        #: monitor), so symlinks in it are left to the kernel
        self.opaque = traced_server
        #: mounts of the helper's under this one on ns_target (the server of
        #: a partition's bytes: partitions.py), unmounted after it
        self.stacked = 0
        super().__init__(target, self._real, name=f"fs {target.decode(errors='replace')} ({fstype})")
        # relative lookups from a cwd or dirfd already in the mount run in the kernel
        self.prefixes, self.kernel_prefixes = (), (self.target,)

    def _real(self, rel):
        base = self.module.helper.root + self.ns_target.rstrip(b"/")
        return base + b"/" + rel if rel else base + (b"/" if self.ns_target == b"/" else b"")

    def ns_path(self, rel):
        """The path in the helper's namespace (what the kernel shows of it)."""
        return self.ns_target.rstrip(b"/") + b"/" + rel if rel else self.ns_target

    def virtual_of(self, real):
        """The view's path of a file as the kernel names it (readlink of
        /proc/PID/cwd or fd: its path in the helper's namespace), or None."""
        base = self.ns_target.rstrip(b"/")
        if real == self.ns_target or real.startswith(base + b"/"):
            v = self.target.rstrip(b"/") + real[len(base):] or b"/"
            return v if self.relative(v) is not None else None
        return None

    def shows_same_names(self, rel, real):
        return real == self.ns_path(rel)


class FsControl(Engine):
    """mount(2) and umount2(2) of the types the module serves, and (as a
    normal user) open of /dev/fuse."""

    name = "fs"
    syscalls = calls("classic-mounts")
    mounts_later = True
    newest = True  # umount of a target reaches it before the mount rewrites the path
    path_syscalls = calls("opens")

    def __init__(self, module):
        self.module = module
        self.prefixes = (b"/dev/fuse",) if os.geteuid() != 0 else ()

    def wants(self, call):
        if call.name in self.syscalls:
            return True
        if call.name not in self.path_syscalls:
            return False
        paths = call.paths()
        return bool(paths) and paths[0] == b"/dev/fuse"

    def on_exit(self, tid):
        self.module.process_gone(tid)

    def enter(self, call):
        try:
            if call.name == "mount":
                return self.module.mount_call(call)
            if call.of_class("classic-mounts"):
                return self.module.umount_call(call)  # umount2, i386's umount
            return self.module.open_dev_fuse(call)
        except HelperError as exc:
            if exc.strerror != os.strerror(exc.errno):  # more than an errno: why, for the user
                log.warning("fs: %s", exc.strerror)
            return Skip.errno(exc.errno)


class MountTable(Engine):
    """/proc/PID/mountinfo, /proc/PID/mounts (and /proc/mounts, /etc/mtab)
    opened in the view: the real table with the view's mounts added, in a
    memfd handed to the process."""

    name = "fs:mounttable"
    path_syscalls = calls("opens")
    prefixes = (b"/proc", b"/etc/mtab")
    FILES = re.compile(rb"^/proc/(self|thread-self|\d+)(?:/task/(\d+))?/(mountinfo|mounts)$")

    def __init__(self, module):
        self.module = module

    def wants(self, call):
        if call.name not in self.path_syscalls:
            return False
        paths = call.paths()
        if not paths or paths[0] is None:
            return False
        p = paths[0]
        return p in (b"/proc/mounts", b"/etc/mtab") or bool(self.FILES.match(p))

    def enter(self, call):
        p = call.paths()[0]
        if p in (b"/proc/mounts", b"/etc/mtab"):
            who, kind = b"self", b"mounts"
        else:
            m = self.FILES.match(p)
            who, kind = m.group(2) or m.group(1), m.group(3)
        flags = call.arg("flags") if call.name != "openat2" else 0
        if call.name == "openat2" or (flags & 3) != os.O_RDONLY:
            return CONTINUE  # the kernel says what writing to it does
        text = fdpass.view_proc_file(call, who, kind)
        if text is None:
            return CONTINUE  # outside the view, or no such process: the kernel's answer
        return fdpass.hand_over_content(call, self.module.mount_table(text, kind == b"mountinfo"), flags,
                                        "umview-" + kind.decode())


class Fs(Module):
    name = "fs"
    description = "filesystem images, archives, tmpfs and FUSE servers mounted for the view (no root)"
    options_help = ("mount=SOURCE:TARGET[:TYPE] (at start; repeat with ;); owner=UID:GID|root (a normal "
                    "user's ids in the images: what they record for the view's new files; -0 gives root); "
                    "other options are mount options of those mounts (ro, a server's own)")
    landlock_conflict = ("the view reaches its mounts through /proc/HELPER/root, which Landlock forbids to a "
                         "sandboxed process (the helper is outside the ruleset)")

    def __init__(self, options):
        super().__init__(options)
        spec = self.options.pop("mount", None)
        self.ids = _owner_ids(self.options.pop("owner", None))
        self.initial_options = [k if v is True else f"{k}={v}" for k, v in self.options.items()]
        self.fstypes = set(SERVERS) | set(ALIASES) | set(KERNEL_TYPES) | {"fuse", "fuseblk"}
        self.helper = None
        self.command_done = False  # the view's first process has ended
        self.user_aliases = {}  # um_fsalias ALIAS FSTYPE
        self.mounts = []
        self.control = FsControl(self)
        self.table = MountTable(self)
        self.table_added = False
        self.initial = []
        if spec is None and self.initial_options:
            raise ValueError(f"module fs: options {','.join(self.initial_options)} without mount=")
        for source, target, fstype in self.mount_specs(spec, "TYPE") if spec is not None else ():
            source = os.path.abspath(os.path.join(self.cwd, source))
            if fstype is not None and not self._known(fstype):
                raise ValueError(f"module fs: unknown type {fstype!r} (known: {', '.join(sorted(self.fstypes))}, "
                                 "fuse.NAME)")
            self.initial.append((os.fsencode(source), os.fsencode(os.path.abspath(target)), fstype))

    def add_fsalias(self, alias, fstype):
        self.user_aliases[alias] = fstype

    def del_fsalias(self, alias):
        self.user_aliases.pop(alias, None)

    def _known(self, fstype):
        return fstype in self.fstypes or fstype.startswith("fuse.") or fstype == "auto"

    # --- module life ---
    def engines(self):
        # the mounts of the options, made now as viewfs makes its own: in
        # the view the modules loaded before make (a tree of an image
        # mounted here, given to -r, is then found through them)
        self.mounting = self.mounts
        try:
            for source, target, fstype in self.initial:
                try:
                    self.mount(None, source, target, fstype, 0, list(self.initial_options))
                except OSError as exc:
                    self.close()
                    raise ValueError(f"module fs: cannot mount {os.fsdecode(source)} on {os.fsdecode(target)}: "
                                     f"{exc.strerror or exc}") from None
        finally:
            self.mounting = None
        self.table_added = bool(self.mounts)
        return [self.control, *self.mounts, *([self.table] if self.mounts else [])]

    def busy(self):
        return bool(self.mounts)

    def close(self):
        if self.helper is not None:
            pathwalk.remove_root(self.helper.root)
            os.close(self.root_fd)
            self.helper.stop()
            self.helper = None
        self.mounts = []

    # --- helpers ---
    def _helper(self):
        if self.helper is None:
            self.helper = MountHelper.start(self.ids)
            # the monitor's own lookups in the helper's tree start from its
            # root (pathwalk: openat2 will not follow /proc/PID/root itself)
            self.root_fd = os.open(self.helper.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            pathwalk.add_root(self.helper.root, self.root_fd)
        return self.helper

    def _ns(self, real):
        """A real path as the helper reaches it (its own tree: without the
        /proc/HELPER/root the view's processes go through)."""
        if self.helper is not None:
            root = self.helper.root
            if real == root or real.startswith(root + b"/"):
                return real[len(root):] or b"/"
        return real

    def _follow(self, target):
        """target with its symlinks followed in the view, as the kernel
        follows them to a mount point; not into a filesystem a FUSE server of
        the view serves (the monitor must never wait on one)."""
        return pathwalk.walk(target, self.realize, opaque=tuple(m.target for m in self.mounts if m.opaque))[0]

    def _not_on_opaque(self, path):
        """HelperError if path (of the view) lies on a filesystem served by
        a process of the view: neither the monitor nor the helper (which the
        monitor waits for) may look it up, as the server may be waiting on
        the monitor (see CwdTracker._leave_to_kernel)."""
        for m in self.mounts:
            if m.opaque and m.relative(path) is not None:
                raise HelperError(errno.EBUSY, f"{os.fsdecode(path)} is on {os.fsdecode(m.target)}, served by "
                                  "a process of the view: a mount cannot use it")

    def _mount_for(self, target):
        for m in reversed(self.mounts):
            if m.target == (target.rstrip(b"/") or b"/"):
                return m
        return None

    # --- mount(2), umount2(2), open("/dev/fuse") ---
    def mount_call(self, call):
        if not call.raw("fstype"):
            return CONTINUE
        fstype = call.read_string(call.index_of("fstype"), 256).decode(errors="replace")
        flags = call.arg("flags")
        if not self._known(fstype) or flags & (MS_REMOUNT | MS_BIND | MS_MOVE):
            return CONTINUE
        target = call.paths()[0]
        if target is None:
            return Skip.errno(errno.EFAULT)
        source = call.arg("source") or b""
        if source and not source.startswith(b"/") and (ALIASES.get(fstype, fstype) in SERVERS or fstype == "auto"):
            cwd = core.proc_link(call.tid, core.AT_FDCWD) or b"/"
            source = os.path.normpath(self._view_of(cwd) + b"/" + source)
        data = call.read_string(call.index_of("data")).decode(errors="replace") if call.raw("data") else ""
        options = [o for o in data.split(",") if o]
        self.mount(call, source, target, fstype, flags, options)
        return Skip(0)

    def _view_of(self, real):
        for m in reversed(self.mounts):
            v = m.virtual_of(real)
            if v is not None:
                return v
        return real

    def mount(self, call, source, target, fstype, flags, options):
        """Mount source on target (paths of the view) for the view; OSError."""
        fstype = self.user_aliases.get(fstype, fstype) or "auto"
        fstype = ALIASES.get(fstype, fstype)
        target = self._follow(target)
        self._not_on_opaque(target)
        real_target = self.realize(target)
        if not stat.S_ISDIR(_lookup(real_target, "mount point").st_mode):
            raise OSError(errno.ENOTDIR, "mount point")
        readonly = bool(flags & MS_RDONLY) or "ro" in options
        fd_opt = next((o for o in options if o.startswith("fd=")), None)
        traced = False
        part = None  # (offset, size, what): the bytes of source it mounts (partitions.py)
        helper = self._helper()
        ns_target = self._ns(real_target)
        if fstype in KERNEL_TYPES:
            helper.mount(source or fstype, ns_target, fstype, flags, ",".join(options))
        elif fd_opt is not None and (fstype in ("fuse", "fuseblk") or fstype.startswith("fuse.")):
            if call is None:
                raise OSError(errno.EINVAL, "fd= names a file descriptor of a process")
            # a FUSE server of the view mounting its own connection
            try:
                tfd = int(fd_opt[3:])
                fd = fdpass.take_fd(fdpass.tgid_of(call.tid), tfd)
            except (ValueError, OSError):
                raise OSError(errno.EINVAL, "fd= is not an open file of the caller") from None
            try:
                if helper.userns:
                    # in the helper's user namespace the kernel lets only
                    # processes of that namespace use an allow_other mount
                    # (fuse_allow_current_process), and the view's are not:
                    # without it, the user who mounted it (the user of every
                    # process of the view) may
                    options = [o for o in options if o != "allow_other"]
                data = ",".join("fd={fd}" if o == fd_opt else o for o in options)
                helper.mount(source or fstype, ns_target, fstype, flags, data, fd=fd)
            finally:
                os.close(fd)
            traced = True
        else:
            if source.startswith(b"/"):
                self._not_on_opaque(source)  # the server run by the helper reads it
                try:
                    part = partitions.region(self.realize(source), options)
                except OSError as exc:
                    raise HelperError(exc.errno, exc.strerror) from None
            options = [o for o in options if o.split("=", 1)[0] not in partitions.OPTIONS]
            if fstype.startswith("fuse."):
                server = fstype[5:]
            elif fstype in ("fuse", "fuseblk"):
                # mount.fuse's convention: SOURCE is "server#what"
                server, _, rest = os.fsdecode(source).partition("#")
                source = os.fsencode(rest)
            else:
                if fstype in (None, "auto"):
                    if source.startswith(b"/"):
                        _lookup(self.realize(source), os.fsdecode(source))
                    fstype = detect_type(self.realize(source), part[0] if part else 0) \
                        if source.startswith(b"/") else None
                    if fstype is None and source.startswith(b"/"):
                        _readable(self.realize(source), os.fsdecode(source))
                    if fstype is None:
                        raise HelperError(errno.EINVAL, f"cannot tell the type of {os.fsdecode(source)}: "
                                          "give it (-t TYPE, or mount=SOURCE:TARGET:TYPE)")
                server = SERVERS.get(fstype)
            if not server:
                raise HelperError(errno.ENODEV, f"no FUSE server for type {fstype}")
            if not shutil.which(server):
                package = set(SERVERS.values())
                raise HelperError(errno.ENODEV, f"type {fstype} needs {server}, which is not installed"
                                  + (f" (apt-get install {server})" if server in package else ""))
            src = source
            if source.startswith(b"/"):
                real_source = self.realize(source)
                _lookup(real_source, "source")
                backing = loop_backing_file(real_source) or real_source
                src = self._ns(backing)
                if not readonly and server == "fuse2fs" and not os.access(backing, os.W_OK):
                    # as mount(8) does, and fuse-zip and archivemount
                    # themselves; fuse2fs would fail ("Permission denied.
                    # Please run e2fsck")
                    log.warning("fs: %s is write-protected, mounted read-only", os.fsdecode(source))
                    readonly = True
                if part is not None:
                    # the partition's bytes as a file of their own on the
                    # mount point; the server opens it there, then mounts over it
                    try:
                        argv = partitions.server_argv(src, part[0], part[1], ns_target, readonly)
                    except OSError as exc:
                        raise HelperError(exc.errno, exc.strerror) from None
                    helper.run_server(argv, ns_target)
                    src = ns_target.rstrip(b"/") + b"/" + partitions.FILE.encode()
            owner = (self.ids or (os.getuid(), os.getgid())) if helper.userns else None
            try:
                helper.run_server(server_argv(server, os.fsdecode(src), os.fsdecode(ns_target), options, readonly,
                                              owner), ns_target)
            except OSError:
                if part is not None:
                    helper.umount(ns_target)
                raise
            if readonly:
                # read-only for the kernel too (fuse2fs keeps -o ro to itself):
                # access(W_OK) and writes answer EROFS, as on a kernel mount;
                # nosuid,nodev kept from libfuse's mount
                try:
                    helper.mount("none", ns_target, "none", MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, "")
                except OSError:
                    helper.umount(ns_target)
                    raise
            if owner is not None:
                # the kernel makes a FUSE mount's root inode owned by uid 0,
                # unmapped in the helper's namespace, until the server is
                # asked for its attributes: until then a create in the root
                # is refused (EACCES, HAS_UNMAPPED_ID). Ask now.
                try:
                    os.stat(helper.root + ns_target)
                except OSError:
                    pass
        m = FsMount(self, target, ns_target, fstype, source, traced_server=traced)
        m.stacked = int(part is not None)
        self.mounts.append(m)
        if self.view is not None:
            self.view.add_engine(m)
            if not self.table_added:
                self.view.add_engine(self.table)
                self.table_added = True
        return m

    def umount_call(self, call):
        target = call.paths()[0]
        if target is None:
            return CONTINUE
        m = self._mount_for(target)
        flags = call.arg("flags") if "flags" in call.spec.by_name else 0  # i386's umount: none
        if m is None and not flags & UMOUNT_NOFOLLOW:
            m = self._mount_for(self._follow(target))
        if m is None:
            return CONTINUE
        self.helper.umount(m.ns_target, flags & (MNT_FORCE | MNT_DETACH))
        self._unstack(m, flags & (MNT_FORCE | MNT_DETACH))
        self._forget(m)
        return Skip(0)

    def _unstack(self, m, flags):
        """Unmount what lies under m's mount (its partition's server), now
        that m's server is gone."""
        for _ in range(m.stacked):
            try:
                self.helper.umount(m.ns_target, flags)
            except OSError as exc:
                log.warning("fs: unmounting the partition under %s: %s", os.fsdecode(m.target), exc.strerror)

    def _forget(self, m):
        self.mounts.remove(m)
        self.view.remove_engine(m)
        if not self.mounts and self.table_added:
            self.view.remove_engine(self.table)
            self.table_added = False

    def process_gone(self, tid):
        """A thread of the view is gone. Once the view's command has ended
        and the only processes left are FUSE servers of the view's mounts
        (a daemon such as `squashfuse img mnt` left mounted), those mounts
        are undone, lazily, so that the servers end and the view with them:
        natively the command would return and leave the mount in the host,
        where a view's mount cannot stay."""
        if self.view is None or self.view.parent is not None:
            return
        if tid == getattr(self.view.monitor, "first_pid", None):
            self.command_done = True
        if not self.command_done or not any(m.opaque for m in self.mounts):
            return
        for pid in core.tracees(exclude=tid):
            try:
                if not _holds_dev_fuse(str(pid)):
                    return  # a process of the view that still runs: the mounts stay
            except OSError:
                continue  # gone meanwhile
        for m in [m for m in self.mounts if m.opaque]:
            try:
                self.helper.umount(m.ns_target, MNT_DETACH)
            except OSError as exc:
                log.warning("fs: unmounting %s after the view's command: %s", os.fsdecode(m.target), exc.strerror)
                continue
            log.info("fs: %s unmounted: the view's command is over and only its server is left",
                     os.fsdecode(m.target))
            self._forget(m)

    def open_dev_fuse(self, call):
        """/dev/fuse opened by the helper (in its user namespace: the kernel
        mounts there only a connection opened there)."""
        helper = self._helper()
        if not helper.userns:
            return CONTINUE
        flags = call.open_flags()
        fd = helper.open_dev_fuse(flags)
        try:
            return fdpass.hand_over(call, fd, flags)
        finally:
            os.close(fd)

    # --- the view's mount table ---
    def mount_table(self, text, mountinfo):
        """The real table (of the process's namespace) with the view's mounts
        appended, as the helper's namespace lists them."""
        if not self.mounts or self.helper is None:
            return text
        try:
            with open(b"/proc/%d/%s" % (self.helper.pid, b"mountinfo" if mountinfo else b"mounts"), "rb") as f:
                theirs = f.read()
        except OSError:
            return text
        return view_table(text, theirs, [(m.target, m.ns_target) for m in self.mounts], mountinfo)


def view_table(text, theirs, mounts, mountinfo):
    """A mount table (/proc/PID/mountinfo if mountinfo, else /proc/PID/mounts
    format) with the view's mounts appended: for each (target, ns_target),
    oldest first, the helper's line (from theirs, its own table) of its mount
    on ns_target, shown on target. In mountinfo the parent is the mount the
    target lies on in the table so far, and the propagation fields go (a
    view's mount is private to it)."""
    lines = text.splitlines()
    theirs = theirs.splitlines()
    out = list(lines)
    where = 4 if mountinfo else 1
    ids = {}  # mount point -> the id of the newest mount there
    if mountinfo:
        for line in lines:
            f = line.split(b" ")
            if len(f) > 4:
                ids[_unescape(f[4])] = f[0]
    used = set()
    for target, ns_target in mounts:
        esc = _escape(ns_target)
        # the n-th mount on a path in the view is the n-th there in the helper
        cands = [i for i, line in enumerate(theirs)
                 if line.split(b" ")[where:where + 1] == [esc] and i not in used]
        if not cands:
            continue
        used.add(cands[0])
        f = theirs[cands[0]].split(b" ")
        f[where] = _escape(target)
        if mountinfo:
            if b"-" not in f[6:]:
                continue
            parent, best = f[1], -1
            for point, mid in ids.items():
                p = point.rstrip(b"/")
                if (target == point or target.startswith(p + b"/")) and len(p) >= best:
                    best, parent = len(p), mid
            f[1] = parent
            f = f[:6] + f[f.index(b"-", 6):]
            ids[target] = f[0]
        out.append(b" ".join(f))
    return b"\n".join(out) + b"\n"
