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


def walk(path, realize, follow_last=True, lstat=os.lstat, readlink=os.readlink):
    """Resolve absolute ``path`` (bytes) in the view.

    ``realize(vpath)`` gives the real path the kernel would use for a virtual
    path. Returns (resolved virtual path, whether the walk went through a
    mount: if not, the kernel resolves the original path the same way).
    Raises OSError(ELOOP) after 40 symlinks. A component that does not exist
    or is not a directory ends the walk: the rest is appended as is, and the
    kernel gives the errno.
    """
    if not path.startswith(b"/"):
        raise ValueError("walk wants an absolute path")
    todo = [c for c in path.split(b"/") if c]
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
            if done:
                done.pop()
            ahead = True
            continue
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
        if done == [b"proc"]:
            # procfs: /proc/self and the magic links name the tracee's own
            # files; the monitor must not follow them in its own context
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
                done = []
            todo += reversed([c for c in target.split(b"/") if c])
            ahead = True
            continue
        if not last and not stat.S_ISDIR(st.st_mode):
            done.append(comp)
            done.extend(reversed(todo))  # ENOTDIR: the kernel will say so
            break
        done.append(comp)
    result = b"/" + b"/".join(done)
    if trailing_slash and result != b"/":
        result += b"/"
    return result, crossed
