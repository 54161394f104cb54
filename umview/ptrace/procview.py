"""/proc as a tracer sees it: TracerPid and the stop states of
/proc/PID/status and stat, and the links and file systems of
/proc/PID/fd/N of the copies handed over for them."""

import errno
import os
import re

from umview import fdpass
from umview.core import lib
from umview.engine import CONTINUE, Skip
from umview.ptrace.procfs import _copy_of, _fd_link, _ns_ids, _PROC_FD, _PROC_FILE


class ProcView:
    """InnerTracing's /proc files (a part of the engine)."""

    def _proc_file(self, call):
        """/proc/PID[/task/TID]/status or stat of a process of the view:
        TracerPid is its inner tracer's (0 for the monitor), and a thread the
        monitor stops shows the state it has natively: "t (tracing stop)" only
        at a stop its tracer knows of, "T (stopped)" in a group-stop the
        monitor listens to, sleeping in a wait the monitor holds (a tracer's,
        um_hold_wait), else running."""
        flags = call.open_flags()
        if call.name == "openat2" or (flags & 3) != os.O_RDONLY:
            return CONTINUE
        m = _PROC_FILE.match(call.paths()[0])
        who, kind = m.group(2) or m.group(1), m.group(3)
        tid = fdpass.proc_pid(who, call.tid, self.tgid_of)
        if self._served_by_others(call, kind):
            return CONTINUE  # their copy shows this too (fdpass.proc_editor)
        text = fdpass.view_proc_file(call, who, kind, edit=False)
        if text is None:
            return CONTINUE
        new = self._proc_view(tid, text, kind == b"status")
        if new == text:
            return CONTINUE
        return fdpass.hand_over_content(call, new, flags, "umview:" + os.fsdecode(self._shown(call, m)))

    def _proc_edit(self, pid, name, text):
        return self._proc_view(pid, text, name == b"status") if name in (b"status", b"stat") else text

    def _served_by_others(self, call, kind):
        """Does an older engine of the caller's view answer this open with a
        copy of its own (fakeroot's status)?"""
        view = self.monitor.dispatcher.view_of(call.tid)
        return any(kind in e.proc_files and e.wants(call) for e in view.engines if e is not self)

    def _shown(self, call, m):
        """The path the kernel shows for the /proc file m names (its
        /proc/PID/fd link): self and thread-self resolved, in the caller's
        pid namespace."""
        who = m.group(1)
        if who in (b"self", b"thread-self"):
            ids = _ns_ids(call.tid, "NSpid")
            tid = ids[-1] if ids else call.tid
            tgids = _ns_ids(self.tgid_of(call.tid), "NSpid")
            tgid = tgids[-1] if tgids else self.tgid_of(call.tid)
            who = b"%d" % tgid if who == b"self" else b"%d/task/%d" % (tgid, tid)
        task = b"/task/" + m.group(2) if m.group(2) else b""
        return b"/proc/" + who + task + b"/" + m.group(3)

    def _proc_link(self, call):
        """readlink (statfs) of /proc/PID/fd/N where N is a copy _proc_file
        handed over: the path of (procfs, as) the file it stands for."""
        m = _PROC_FD.match(call.paths()[0])
        try:
            tid = fdpass.proc_pid(m.group(2) or m.group(1), call.tid, self.tgid_of)
        except ValueError:
            return CONTINUE
        link = _fd_link(tid, int(m.group(3)))
        if link is None:
            return CONTINUE  # the kernel says what is wrong
        path = _copy_of(link)
        if path is not None and call.name == "statfs":
            return self._proc_statfs(call, 1)
        if path is None and call.name != "statfs":
            # a file in a layer of the view: the path the view shows (a
            # tracer's -y, another process's fd)
            path = next(filter(None, (e.shown_path(link) for e in self.monitor.dispatcher.engines)), None)
        if path is None:
            return CONTINUE
        if call.size <= 0:
            return Skip(-errno.EINVAL)
        data = path[:call.size]
        try:
            call.write_mem(call.raw("buf"), data)
        except OSError:
            return Skip(-errno.EFAULT)
        return Skip(len(data))

    def _proc_statfs(self, call, at):
        """fstatfs of a copy _proc_file handed over, or statfs of its
        /proc/PID/fd link: what the kernel says of the file it stands for
        (the call run on /proc instead; at: the index of the buffer)."""
        path = call.alloc(len(b"/proc") + 1)
        call.write_mem(path, b"/proc\0")
        return Skip(call.inject("statfs", path, call.args[at]))

    def _proc_view(self, tid, text, status):
        held = self._held.get(tid)
        t = self.tracees.get(tid) or held
        state = re.search(rb"(?m)^State:\t(\S).*$" if status else rb"\) (\S) ", text)
        if state and state.group(1) == b"t" and (t is None or t.state not in ("stopped", "listening")):
            # a stop of the monitor's own, or a group-stop it listens to, or
            # the exit stop a process waits at for its tracer (_exiting)
            shown = (b"Z (zombie)" if held else
                     b"T (stopped)" if t is None and lib.um_listening(tid) else
                     b"S (sleeping)" if lib.um_wait_held(tid) else b"R (running)")
            shown = b"State:\t" + shown if status else b") " + shown[:1] + b" "
            text = text[:state.start()] + shown + text[state.end():]
        if status:
            tracer = 0 if t is None else (t.tracer or t.tgid)
            text = re.sub(rb"(?m)^TracerPid:\t\d+$", b"TracerPid:\t%d" % tracer, text, count=1)
        return text
