"""What the emulation reads of /proc about threads and processes: their
thread group, parent, group, ids, children, namespaces, state, the links
of their fds; and sending one thread a signal."""

import os
import re

from umview import core
from umview.procs import PROCESSES


# a copy _proc_file hands over is a memfd named for the file it stands for:
# /proc/self/fd/N of it reads "/memfd:umview:/proc/PID/status (deleted)"
_COPY_LINK = re.compile(rb"^/memfd:umview:(/proc/.*) \(deleted\)$")
_PROC_FD = re.compile(rb"^/proc/(self|thread-self|\d+)(?:/task/(\d+))?/fd/(\d+)$")
_OWN_STATUS = (b"/proc/self/status", b"/proc/thread-self/status")
_COPIES = b"/memfd:umview:"  # what the kernel shows as the path of a copy
_PROC_FILE = re.compile(rb"^/proc/(self|thread-self|\d+)(?:/task/(\d+))?/(status|stat)$")


def _fd_link(tid, fd):
    """What the kernel shows as the path of fd of thread tid (bytes), or None."""
    try:
        return os.fsencode(os.readlink(f"/proc/{tid}/fd/{fd}"))
    except (OSError, ValueError):
        return None


def _copy_of(link):
    """The path of the /proc file a copy _proc_file handed over stands for,
    given the copy's fd link; None for any other file."""
    m = link is not None and _COPY_LINK.match(link)
    return m.group(1) if m else None


def _tgid(tid):
    """Thread tid's process id (its record: umview.procs), None if it is gone."""
    return PROCESSES.tgid_or_none(tid)


def _stat_fields(tid):
    """(ppid, pgid) of a thread's process, or None."""
    try:
        with open(f"/proc/{tid}/stat", "rb") as f:
            rest = f.read().rsplit(b")", 1)[1].split()
        return int(rest[1]), int(rest[2])
    except (OSError, ValueError, IndexError):
        return None


def _tgkill(tid, sig):
    """Send sig to one thread (as the kernel's ptrace does), if it still exists."""
    global _LIBC
    tgid = _tgid(tid)
    if tgid is None:
        return
    if _LIBC is None:
        import ctypes  # lazy: only once a view has an inner tracer

        _LIBC = ctypes.CDLL(None, use_errno=True)
    _LIBC.syscall(234, tgid, tid, sig)  # SYS_tgkill on x86_64


_LIBC = None


def _in_view(pid):
    """Is pid traced by this monitor (a process of the view)?"""
    try:
        return int(core.proc_status(pid, "TracerPid")["TracerPid"][0]) == os.getpid()
    except (OSError, KeyError, ValueError):
        return False


def _may_attach(tracer, pid):
    """The kernel's ptrace access check (PTRACE_MODE_ATTACH_REALCREDS) for
    uids, gids and CAP_SYS_PTRACE."""
    try:
        me = core.proc_status(tracer, "Uid", "Gid", "CapEff")
        it = core.proc_status(pid, "Uid", "Gid")
    except OSError:
        return False
    if int(me["CapEff"][0], 16) >> 19 & 1:  # CAP_SYS_PTRACE
        return True
    uid, gid = me["Uid"][0], me["Gid"][0]
    if not (all(u == uid for u in it["Uid"][:3]) and all(g == gid for g in it["Gid"][:3])):
        return False
    try:
        return os.stat(f"/proc/{pid}").st_uid == int(uid)  # not dumpable: owned by root
    except OSError:
        return False


def _zombie(pid):
    """Has process pid exited, its exit not yet reaped?"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _exiting(tid, patience=0.02):
    """Is thread tid exiting? Once one is a zombie, it waits (a few ms at
    most) until it is one too: its process is going, it will be at once."""
    deadline = None
    while True:
        try:
            with open(f"/proc/{tid}/stat", "rb") as f:
                rest = f.read().rsplit(b")", 1)[1].split()
            state, flags = rest[0], int(rest[6])
        except (OSError, IndexError, ValueError):
            return False
        if state in (b"Z", b"X"):
            return True
        if not flags & 0x4:  # PF_EXITING
            return False
        if deadline is None:
            import time  # lazy: only when a traced process exits under its tracer's wait

            deadline = time.monotonic() + patience
        elif time.monotonic() > deadline:
            return False
        os.sched_yield()


def _ns_ids(tid, field):
    """NSpid or NSpgid of tid: its ids from the monitor's pid namespace down
    to its own."""
    try:
        return [int(x) for x in core.proc_status(tid, field)[field]]
    except (OSError, KeyError, ValueError):
        return []


def _ns_inode(tid):
    try:
        return os.stat(f"/proc/{tid}/ns/pid").st_ino
    except OSError:
        return None


def _all_tasks():
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                yield from (int(t) for t in os.listdir(f"/proc/{pid}/task"))
            except OSError:
                continue


def _ppid(tid, zombie=False):
    """The parent of tid's process, or None (gone; with zombie, also when it
    is not a zombie)."""
    try:
        with open(f"/proc/{tid}/stat", "rb") as f:
            rest = f.read().rsplit(b")", 1)[1].split()
        if zombie and rest[0] not in (b"Z", b"X"):
            return None
        return int(rest[1])
    except (OSError, ValueError, IndexError):
        return None


def _pgid(tid):
    fields = _stat_fields(tid)
    return fields[1] if fields else None


def _uid(tid):
    try:
        return int(core.proc_status(tid, "Uid")["Uid"][0])
    except (OSError, KeyError, ValueError):
        return 0


def _children(tgid):
    """The pids of process tgid's children (of any of its threads), or None."""
    children = []
    try:
        for task in os.listdir(f"/proc/{tgid}/task"):
            with open(f"/proc/{tgid}/task/{task}/children", "rb") as f:
                children.extend(int(c) for c in f.read().split())
    except (OSError, ValueError):
        return None
    return children


def _notices(tgid, sig):
    """Would process tgid see sig: caught, or blocked (a signalfd reads it)?
    A signal whose default action is to be ignored, unblocked, is dropped by
    the kernel unseen: not sent (it would cost the monitor a stop)."""
    try:
        st = core.proc_status(tgid, "SigBlk", "SigIgn", "SigCgt")
        blk, ign, cgt = (int(st[k][0], 16) >> (sig - 1) & 1 for k in ("SigBlk", "SigIgn", "SigCgt"))
    except (OSError, KeyError, ValueError):
        return False
    return not ign and bool(cgt or blk)
