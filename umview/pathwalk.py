"""Symlink-aware resolution of a path in a view.

The C core matches paths lexically. That is exact unless a symlink is on the
way: a real symlink pointing into a mount point (``/tmp/l -> /unreal/etc``), or
a symlink inside a mounted directory whose absolute target must be read in the
view, not in the real file system. For those calls the path is walked here
component by component, as the kernel walks it, but in the view: each prefix is
looked up through the mounts (``realize``), ``..`` is applied to the virtual
path, and symlinks are followed with the kernel's limit of 40.

The result is an absolute virtual path with no symlink in it (but the last
component when the call does not follow it), which the mounts then rewrite
lexically and the kernel resolves without surprise.
"""
import errno
import os
import stat

MAXSYMLINKS = 40
AT_FDCWD_ = -100


def dotted(path):
    """Has the path (bytes) a "." or ".." component?"""
    if b"." not in path:
        return False
    comps = path.split(b"/")
    return b"." in comps or b".." in comps


def last_dot(path):
    """Is the last component of the path (bytes) "." or ".."?"""
    comps = [c for c in path.split(b"/") if c]
    return bool(comps) and comps[-1] in (b".", b"..")


def walk(path, realize, follow_last=True, lstat=os.lstat, readlink=os.readlink, opaque=(), proc=None, root=b"/",
         last_dot=False):
    """Resolve absolute ``path`` (bytes) in the view.

    ``realize(vpath)`` gives the real path the kernel would use for a virtual
    path. Returns (resolved virtual path, whether the walk went through a
    mount: if not, the kernel resolves the original path the same way).
    Raises OSError(ELOOP) after 40 symlinks. A component that does not exist
    or is not a directory ends the walk: the rest is appended as is, and the
    kernel gives the errno. ``opaque``: view paths (mount points) the walk
    must not look at or below: reaching one ends the walk there, the rest
    appended as is, for the kernel to resolve. ``proc(rest, follow)``: for
    a path under /proc (rest: what follows ``/proc/``; follow: whether the
    walk follows its end), the view's path a magic link there stands for
    (then followed, as a symlink to it), or None to leave it to the kernel.
    ``root``: the process's root in the view (a virtual chroot), at or
    above path: ".." stops there, absolute symlinks start there, /proc is
    the one below it, and a magic link to a place outside it leads to it.
    ``last_dot``: a last component "." or ".." is kept as it is, after the
    directory it follows is resolved (the kernel does not walk it in a call
    that changes names: rmdir("d/.") is EINVAL, not rmdir("d")).
    """
    if not path.startswith(b"/"):
        raise ValueError("walk wants an absolute path")
    todo = [c for c in path.split(b"/") if c]
    dot = None
    if last_dot and todo and todo[-1] in (b".", b".."):
        dot = todo.pop()
        follow_last = True  # what precedes it is walked as a directory
    top = [c for c in root.split(b"/") if c]  # the components ".." does not climb above
    trailing_slash = path.endswith(b"/") and len(path) > 1
    if trailing_slash:
        follow_last = True  # "link/" always means the directory the link names
    done = []
    links = 0
    crossed = False
    ahead = True  # show realize the path ahead before the next lookup
    todo.reverse()  # popped from the end: O(1) a component
    while todo:
        comp = todo.pop()
        if comp == b".":
            continue
        if comp == b"..":
            if len(done) > len(top) or done[:len(top)] != top:
                if done:
                    done.pop()
            ahead = True
            continue
        if opaque and _under(done + [comp], opaque):
            done.append(comp)
            done.extend(reversed(todo))
            crossed = True  # a mount's: the mounts rewrite the path
            break
        if ahead:
            # the whole path as far as it is known: a realize that remembers
            # (a layered mount's, per call) looks it up in one pass, and
            # then each prefix below costs nothing
            path_ahead = done + [comp]
            for c in reversed(todo):
                if c == b"..":
                    break
                if c != b".":
                    path_ahead.append(c)
            realize(b"/" + b"/".join(path_ahead))
            ahead = False
        if done == top + [b"proc"]:
            # procfs: /proc/self and the magic links name the tracee's own
            # files; the monitor must not follow them in its own context
            target = proc(b"/".join([comp] + todo[::-1]), follow_last) if proc else None
            if target is not None and top and not _under([c for c in target.split(b"/") if c], [root]):
                target = root  # out of the process's root: not for it to reach
            if target is not None:
                links += 1
                if links > MAXSYMLINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
                done, todo, ahead, crossed = [], [c for c in target.split(b"/") if c][::-1], True, True
                continue
            done.append(comp)
            done.extend(reversed(todo))
            break
        cand = b"/" + b"/".join(done + [comp])
        last = not todo
        real = realize(cand)
        crossed = crossed or real != cand
        try:
            st = lstat(real)
        except OSError:
            done.append(comp)
            done.extend(reversed(todo))  # the kernel will say what is missing
            break
        if stat.S_ISLNK(st.st_mode) and (not last or follow_last):
            links += 1
            if links > MAXSYMLINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
            target = readlink(real)
            if isinstance(target, str):
                target = os.fsencode(target)
            if target.startswith(b"/"):
                done = list(top)
            todo += reversed([c for c in target.split(b"/") if c])
            ahead = True
            continue
        if not last and not stat.S_ISDIR(st.st_mode):
            done.append(comp)
            done.extend(reversed(todo))  # ENOTDIR: the kernel will say so
            break
        done.append(comp)
    result = b"/" + b"/".join(done)
    if dot is not None:
        result = result.rstrip(b"/") + b"/" + dot
    if trailing_slash and result != b"/":
        result += b"/"
    return result, crossed


def _under(comps, prefixes):
    path = b"/" + b"/".join(comps)
    return any(path == p or path.startswith(p.rstrip(b"/") + b"/") for p in prefixes)


# --- resolving without symlinks (openat2, Linux 5.6) --------------------------

_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_O_LOOKUP = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


def _openat2(path, dir_fd, flags, resolve):
    from umview.core import lib  # the C core's binding (Python has none)

    fd = lib.um_openat2(dir_fd, path, flags, resolve)
    if fd < 0:
        raise OSError(-fd, os.strerror(-fd), path)
    return fd


def lstat_plain(path, dir_fd=AT_FDCWD_, beneath=False):
    """lstat of path, which must be reached without following any symlink on
    the way (the last component may be one: its own lstat); beneath: path is
    relative to dir_fd and may not leave it. OSError as openat2(2) gives it:
    ELOOP for a symlink on the way, ENOENT, ENOTDIR, EXDEV; ENOSYS before
    Linux 5.6."""
    fd = _openat2(path, dir_fd, _O_LOOKUP, _RESOLVE_NO_SYMLINKS | (_RESOLVE_BENEATH if beneath else 0))
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


#: prefix -> an O_PATH fd of the directory it names, for real paths that
#: go through a magic link the monitor may follow (/proc/HELPER/root of a
#: mount helper, modules/fs): openat2 refuses magic links with
#: RESOLVE_NO_SYMLINKS, so such a path is looked up from the fd
_roots = {}


def add_root(prefix, fd):
    """Look real paths under prefix (b"/proc/PID/root") up from fd."""
    _roots[prefix.rstrip(b"/")] = fd


def remove_root(prefix):
    return _roots.pop(prefix.rstrip(b"/"), None)


def plain_path(real, follow_last):
    """Does the real path resolve with no symlink on its way (nor at its end,
    if follow_last)? True, False, or None where its last component is
    missing (then its parent decides). One openat2(2)."""
    dir_fd = AT_FDCWD_
    for prefix, fd in _roots.items():
        if real.startswith(prefix + b"/") or real == prefix:
            dir_fd, real = fd, real[len(prefix):].lstrip(b"/") or b"."
            break
    try:
        # following the last component, a symlink there is ELOOP too
        os.close(_openat2(real, dir_fd, _O_LOOKUP & ~os.O_NOFOLLOW if follow_last else _O_LOOKUP,
                          _RESOLVE_NO_SYMLINKS))
    except FileNotFoundError:
        return None
    except OSError:
        return False
    return True
