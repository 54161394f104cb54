"""The janitor: a process that removes the monitor's temporary directories
if the monitor dies without removing them itself (SIGKILL, a crash).

    janitor.remove_at_death(path)   # the first call starts it
    ...
    shutil.rmtree(path)             # the monitor removes it itself at the end,
    janitor.forget(path)            # and the janitor exits once it guards nothing

The monitor forks twice (the janitor is not its child, so the C loop's
waitpid(-1) never sees it), keeps the write end of a pipe and sends it a
line per change: "+PATH" to guard, "-PATH" to forget. The janitor reads until
EOF, which comes when the monitor closes the pipe (nothing left to guard) or
dies however it dies; it then removes the paths it still guards and exits.
It runs in a session of its own, deaf to the terminal's signals.
"""
import os
import shutil
import signal

_pipe = None  # the write end, once started


def _start():
    global _pipe
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked processes
        code = 0
        try:
            if os.fork() == 0:
                os.close(w)
                code = _serve(r)
        finally:
            os._exit(code)
    os.close(r)
    os.waitpid(child, 0)
    os.set_inheritable(w, False)
    _pipe = w


_guarded = set()


def remove_at_death(path):
    """Have path (a directory or file of the monitor's) removed if the
    monitor ends without removing it."""
    path = os.path.abspath(os.fsdecode(path))
    if "\n" in path:
        return  # not a name the janitor can be told: the monitor's own removal only
    if _pipe is None:
        _start()
    _send(b"+", path)
    _guarded.add(path)


def forget(path):
    """The monitor removed path itself; with nothing left to guard the
    janitor exits."""
    path = os.path.abspath(os.fsdecode(path))
    if path not in _guarded:
        return
    _guarded.discard(path)
    _send(b"-", path)
    if not _guarded:
        _stop()


def remove_tree(path):
    """Remove a directory (or file) of the monitor's, also where a process of
    the view took the owner's permissions away (chmod 0 of a directory in a
    layer, or of a listing directory through its fd): those directories are
    given back u+rwx, then it is removed again."""
    if not os.path.isdir(path) or os.path.islink(path):
        try:
            os.unlink(path)
        except OSError:
            pass
        return
    shutil.rmtree(path, ignore_errors=True)
    if not os.path.lexists(path):
        return
    todo = [path]
    while todo:
        d = todo.pop()
        try:
            if os.lstat(d).st_mode & 0o700 != 0o700:
                os.chmod(d, 0o700)
            with os.scandir(d) as entries:
                todo += [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
    shutil.rmtree(path, ignore_errors=True)


def _send(op, path):
    try:
        os.write(_pipe, op + path.encode(errors="surrogateescape") + b"\n")
    except OSError:
        pass  # the janitor is gone (killed): the monitor's own removal only


def _stop():
    global _pipe
    if _pipe is not None:
        os.close(_pipe)
        _pipe = None


def _harden():  # pragma: no cover - runs in the janitor
    """Not dumpable, as the monitor: a process of the view running as the
    same user may neither ptrace it (stopped, it would outlive the monitor;
    driven, it would write the real tree) nor read its memory. Named
    umview-janitor, so that ps tells it from the monitor."""
    import ctypes  # lazy: only the janitor pays for it

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    libc.prctl(15, b"umview-janitor", 0, 0, 0)  # PR_SET_NAME


def _serve(r):  # pragma: no cover - runs in the janitor
    os.setsid()
    _harden()
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGHUP, signal.SIGTTIN, signal.SIGTTOU):
        signal.signal(sig, signal.SIG_IGN)
    devnull = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(3, r)
    os.closerange(r + 1, 1 << 16)
    data = b""
    while True:
        try:
            chunk = os.read(r, 65536)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    guarded = []
    for line in data.split(b"\n"):
        path = line[1:].decode(errors="surrogateescape")
        if line[:1] == b"+":
            guarded.append(path)
        elif line[:1] == b"-" and path in guarded:
            guarded.remove(path)
    for path in guarded:
        remove_tree(path)
    return 0
