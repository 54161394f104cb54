"""What a read-only file system answers a call that would change it.

The kernel refuses such a call with EROFS (mnt_want_write, or
sb_permission for an open for writing), but only once it has made the
checks that come first: the walk of the paths, the last component of a call
that makes, removes or renames a name (".", "..", a trailing "/"), whether
the name is there already (fs/namei.c: filename_create takes the write
access late, so EEXIST wins), what the file is (a directory opened for
writing is EISDIR, a device or a FIFO may be written). refusal() makes those
checks in the kernel's order, on the real paths (umview.namei: lookups by
the monitor, which change nothing), and returns the errno the call gets, or
0 for what a read-only file system allows.
"""
import errno
import stat

from umview import longpath, namei
from umview.syscalls import calls
from umview.openflags import O_CREAT, O_DIRECTORY, O_EXCL, O_RDWR, O_TRUNC, O_WRONLY, is_tmpfile

AT_REMOVEDIR, AT_SYMLINK_FOLLOW, AT_EMPTY_PATH = 0x200, 0x400, 0x1000
RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT = 1, 2, 4
UNLINKS = calls("unlinks")
RENAMES = calls("renames")
LINKS = calls("links")
OPENS = calls("opens")
TRUNCATES = calls("truncates")


def _special(st):
    return st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode))


def unreadable(call):
    """{path slot: errno} for the file names of call the kernel cannot read
    (getname: EFAULT, ENAMETOOLONG), "target" for a symlink's target: it
    gives these errnos where it would look at the name."""
    bad, slot = {}, 0
    for a in call.spec.args if call.spec is not None else ():
        key = slot if a.kind == "path" else "target"
        if a.kind == "path":
            slot += 1
        elif not (a.kind == "str" and call.of_class("symlinks")):
            continue
        if not call.args[a.index]:
            if a.kind != "path" or not call.of_class("null-is-fd"):
                bad[key] = errno.EFAULT  # (NULL names the dirfd's file there)
            continue
        try:
            call.read_string(a.index)
        except OSError as exc:
            bad[key] = exc.errno
    return bad


def refusal(call, reals, flags=None, bad=None, others=None):
    """The errno a read-only file system gives call, whose path slots under
    it are reals ({slot: real path as written, made absolute}); 0 where it
    allows the call. flags: an open's flags (creat's, openat2's read); bad:
    unreadable(call); others: the slots on another mount of the view (the
    kernel walks them too, in its order, and a rename or link between two
    mounts is EXDEV)."""
    bad, others = bad or {}, others or {}
    name = call.name
    names = call.spec.names if call.spec is not None else ()
    if name in TRUNCATES:
        bits = call.spec.by_name["length"].bits if "length" in call.spec.by_name else 64
        if call.length >> (bits - 1) & 1:
            return errno.EINVAL  # negative: do_sys_truncate says so before the lookup
    if name == "renameat2" and (call.flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT) or
                                call.flags & (RENAME_NOREPLACE | RENAME_WHITEOUT) and call.flags & RENAME_EXCHANGE):
        return errno.EINVAL
    if name == "linkat" and call.flags & ~(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH):
        return errno.EINVAL
    if name == "unlinkat" and call.flags & ~AT_REMOVEDIR:
        return errno.EINVAL
    if "target" in bad:
        return bad["target"]  # do_symlinkat: the target first

    def parent_error(slot):
        real = reals.get(slot, others.get(slot))
        return bad.get(slot) or (namei.parent_error(real) if real is not None else 0)

    if name in UNLINKS:
        err = parent_error(0)
        if err or 0 not in reals:
            return err or errno.EROFS
        kind = namei.last_type(reals[0])
        if name == "rmdir" or name == "unlinkat" and call.flags & AT_REMOVEDIR:
            return {"dot": errno.EINVAL, "dotdot": errno.ENOTEMPTY, "root": errno.EBUSY}.get(kind, errno.EROFS)
        return errno.EISDIR if kind != "norm" else errno.EROFS
    if name in RENAMES:
        for slot in (0, 1):
            err = parent_error(slot)
            if err:
                return err
        if (0 in others) != (1 in others):
            return errno.EXDEV  # do_renameat2: the two parents' mounts differ
        if 0 in reals and namei.last_type(reals[0]) != "norm":
            return errno.EBUSY
        if 1 in reals and namei.last_type(reals[1]) != "norm":
            return errno.EEXIST if name == "renameat2" and call.flags & RENAME_NOREPLACE else errno.EBUSY
        return errno.EROFS
    if name in LINKS:
        # do_linkat: the old name's lookup, filename_create of the new one
        # (EROFS there on this mount), then EXDEV between two mounts
        if 0 in bad:
            return bad[0]
        old = reals.get(0, others.get(0))
        if old is not None:
            err = namei.old_name_error(old, name == "linkat" and call.flags & AT_SYMLINK_FOLLOW)
            if err:
                return err
        if 1 not in reals and 1 not in bad:
            new = others.get(1)
            return (namei.create_error(new) if new is not None else 0) or errno.EXDEV
    if names:
        # filename_create: the walk, the last component, then the name
        # itself; the write access is taken last
        if names[-1] in bad:
            return bad[names[-1]]
        real = reals.get(names[-1])
        if real is None:
            return errno.EROFS
        return namei.create_error(real, want_dir=call.of_class("mkdirs")) or errno.EROFS
    if call.of_class("sockaddrs"):
        real = reals.get(0)
        if real is None:
            return errno.EROFS
        err = namei.parent_error(real)
        if err:
            return err
        return errno.EADDRINUSE if longpath.lexists(real) else errno.EROFS
    if bad:
        return next(iter(bad.values()))
    real = next(iter(reals.values()), None)
    if real is None:
        return errno.EROFS
    if name in OPENS:
        return _open_refusal(real, flags)
    follow = call.spec.follows(0, call.args) if call.spec is not None else True
    err, st = namei.lookup(real, follow=follow or real.endswith(b"/"), directory=real.endswith(b"/"))
    if err:
        return err
    if name in TRUNCATES:
        if stat.S_ISDIR(st.st_mode):
            return errno.EISDIR
        if not stat.S_ISREG(st.st_mode):
            return errno.EINVAL
    if call.of_class("accesses") and _special(st):
        return 0  # a device, FIFO or socket may be written on a read-only mount
    return errno.EROFS


def _open_refusal(real, flags):
    parent, last, trailing = namei.split(real)
    creat = flags & O_CREAT and not is_tmpfile(flags)
    writes = flags & (O_WRONLY | O_RDWR | O_TRUNC)
    if creat and last not in (b".", b"..", b""):
        err = namei.parent_error(real)
        if err:
            return err
        if trailing:
            return errno.EISDIR
        if len(last) > namei.NAME_MAX:
            return errno.ENAMETOOLONG
        err, st = namei.lookup(real)
        if err == errno.ENOENT and not longpath.lexists(real):
            return errno.EROFS  # it would be made
        if err:
            return err
        if flags & O_EXCL:
            return errno.EEXIST
    else:
        err, st = namei.lookup(real, directory=trailing or bool(flags & O_DIRECTORY))
        if err:
            return err
        if creat and flags & O_EXCL:
            return errno.EEXIST
        if is_tmpfile(flags):
            return errno.EROFS  # an unnamed file would be made in the directory
    if stat.S_ISDIR(st.st_mode):
        return errno.EISDIR if writes or creat or is_tmpfile(flags) else 0
    if _special(st) or not writes:
        return 0
    return errno.EROFS
