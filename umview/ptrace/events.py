"""The stops of tracees as the monitor's loop reports them (signal stops,
syscall stops, fork, exec, exit) turned into the stops and events their
inner tracers wait for."""

import os
import signal
import struct
import time

from umview.core import lib
from umview.ptrace.abi import (_CLONE_PTRACE, EVENT_CLONE, EVENT_EXEC, EVENT_EXIT, EVENT_FORK, EVENT_SECCOMP,
                               EVENT_STOP, EVENT_VFORK, EVENT_VFORK_DONE, GETREGS, lib_PTRACE_CONT,
                               lib_PTRACE_LISTEN, NR, O_EXITKILL, O_TRACECLONE, O_TRACEEXEC, O_TRACEEXIT,
                               O_TRACEFORK, O_TRACESYSGOOD, O_TRACEVFORK, _ORIG_RAX, _RDI, _USER_REGS)
from umview.ptrace.procfs import _notices, _ppid, _tgid, _tgkill
from umview.ptrace.tracee import _dbg, _DEBUG, _Exited, _stop, Tracee


class Events:
    """InnerTracing's handling of its tracees' stops (a part of the engine)."""

    def stop_event(self, ev):
        """A UM_EV_STOP. True: hold the thread (reported to its tracer)."""
        tid, status = ev.tid, ev.status
        t = self.tracees.get(tid)
        _dbg("stop", tid, hex(status), ev.msg, t is not None, tid in self.waiters)
        if t is None:
            if tid in self.waiters:
                self._answer_waiter(tid)
            return False
        sig, event = (status >> 8) & 0xFF, (status >> 16) & 0xFFFF
        if ev.msg == lib.UM_STOP_STEP and sig == signal.SIGTRAP | 0x80:
            return self._report(t, _stop(signal.SIGTRAP), "step")
        if ev.msg in (lib.UM_STOP_ENTRY, lib.UM_STOP_EXIT) and sig == signal.SIGTRAP | 0x80:
            kind = "entry" if ev.msg == lib.UM_STOP_ENTRY else "exit"
            if kind == "entry":
                t.shown_nr = None
                t.emu_entry = t.emu
            word = _stop(signal.SIGTRAP | (0x80 if t.options & O_TRACESYSGOOD else 0))
            return self._report(t, word, kind)
        if event == EVENT_STOP:
            if sig != signal.SIGTRAP:  # a group-stop
                return self._report(t, _stop(sig, EVENT_STOP) if t.seized else _stop(sig), "group")
            if t.expect_initial:
                return self._initial(t)
            if t.interrupt or t.state == "listening":
                t.interrupt = False
                return self._report(t, _stop(signal.SIGTRAP, EVENT_STOP), "interrupt")
            return False  # the monitor's own interrupt
        if event == EVENT_SECCOMP:
            t.eventmsg = ev.msg  # the filter's SECCOMP_RET_DATA
            t.shown_nr = None
            return self._report(t, _stop(signal.SIGTRAP, EVENT_SECCOMP), "seccomp")
        if event == EVENT_EXIT:
            t.eventmsg = ev.msg  # the exit status
            if t.options & O_TRACEEXIT:
                t.exiting = True
                return self._report(t, _stop(signal.SIGTRAP, event), "event")
            return self._exiting(t)
        if event == EVENT_VFORK_DONE:
            t.eventmsg = ev.msg
            return self._report(t, _stop(signal.SIGTRAP, event), "event")
        if event == 0 and sig:
            return self._report(t, _stop(sig), "signal")
        return False

    def syscall_exit(self, tid):
        """The exit of a call the engines handled: True if its tracer wants the stop."""
        t = self.tracees.get(tid)
        if t is not None and t.step:
            return self._report(t, _stop(signal.SIGTRAP), "step")  # natively the step's trap, here
        if t is None or not t.sys:
            return False
        return self._report(t, _stop(signal.SIGTRAP | (0x80 if t.options & O_TRACESYSGOOD else 0)), "exit")

    def fork_event(self, ev):
        """A fork/vfork/clone event of a tracee: True to hold the parent."""
        t = self.tracees.get(ev.tid)
        _dbg("fork", ev.tid, ev.msg, hex(ev.flags), t is not None)
        if t is None:
            return False
        flags = ev.flags
        event, option = ((EVENT_CLONE, O_TRACECLONE) if flags & lib.UM_FORK_THREAD
                         else (EVENT_VFORK, O_TRACEVFORK) if flags & lib.UM_FORK_VFORK
                         else (EVENT_FORK, O_TRACEFORK))
        if ev.msg <= 0:
            return False
        if not t.options & option:
            if self._clone_ptrace(ev.tid):
                self._attach_child(t, ev, event)  # traced too, and no event (kernel/fork.c)
            return False
        self._attach_child(t, ev, event)
        t.eventmsg = self.tracees[ev.msg].vtid if ev.msg in self.tracees else self._virtual(t.tgid, ev.msg)
        return self._report(t, _stop(signal.SIGTRAP, event), "event")

    def _clone_ptrace(self, tid):
        """Did tid's clone (at its fork event stop) ask for CLONE_PTRACE?"""
        try:
            regs = self._get(tid, GETREGS, 0, _USER_REGS)
        except OSError:
            return False
        orig, flags = struct.unpack_from("<qQ", regs, _ORIG_RAX)[0], struct.unpack_from("<Q", regs, _RDI)[0]
        return orig == NR["clone"] and bool(flags & _CLONE_PTRACE)

    def _attach_child(self, t, ev, event):
        """The child of tracee t's fork event, traced by t's tracer."""
        flags = ev.flags
        child = Tracee(ev.msg, t.tracer, t.tgid, t.seized, t.options)
        child.pgid = t.pgid
        child.proc = _tgid(ev.msg)
        child.clone = event == EVENT_CLONE and child.proc != ev.msg
        child.expect_initial = True
        child.vtid = self._virtual(t.tgid, child.tid)
        self.tracees[child.tid] = child
        self._sync(child)
        if flags & lib.UM_FORK_HELD and not self._initial(child):
            lib.um_resume(child.tid, lib_PTRACE_CONT, 0)  # held at its first stop by the C core
        elif flags & lib.UM_FORK_RAN:
            lib.um_interrupt(ev.msg)  # its first stop is past: a stop to stand for it

    def exec_event(self, ev):
        t = self.tracees.get(ev.msg)
        if t is None:
            return False
        former = t.vtid
        if ev.msg != ev.tid:
            # a thread execed: it now has the leader's tid, and is the leader
            # (clone no more, its parent the leader's). The old leader
            # reports no death (ptrace(2), execve under ptrace): it is gone
            # without a trace; the other threads' exits came as exits
            old = self.tracees.pop(ev.tid, None)
            del self.tracees[ev.msg]
            lib.um_inner_stopped(ev.msg, 0, 0, 0, 0)  # that tid is gone
            t.tid = ev.tid
            t.clone = False
            if old is not None:
                t.vtid, t.real_child, t.pgid = old.vtid, old.real_child, old.pgid
            else:
                t.vtid = self._virtual(t.tgid, ev.tid)
                t.real_child = _ppid(ev.tid) == t.tgid
            self.tracees[ev.tid] = t
            self._sync(t)
        if t.options & O_TRACEEXEC:
            t.eventmsg = former
            return self._report(t, _stop(signal.SIGTRAP, EVENT_EXEC), "event")
        if not t.seized:
            _tgkill(t.tid, signal.SIGTRAP)  # the legacy SIGTRAP after a successful execve
        return False

    def exit_event(self, tid, status, parent=None):
        """A thread of the view is gone: a tracee's exit goes to its tracer;
        a tracer's tracees are detached (or killed: PTRACE_O_EXITKILL)."""
        _dbg("exit", tid, hex(status))
        self._sigchld.pop(tid, None)
        self._levels.pop(tid, None)
        self.waiters.pop(tid, None)
        t = self.tracees.pop(tid, None)
        if t is not None:
            self._gone(t, status, parent)
            if not t.clone:
                self._reparented(t)
        held = self._held.pop(tid, None)
        if held is not None:
            self._reparented(held)  # its exit went to its tracer at its exit stop
        for other in [o for o in self._held.values() if o.tgid == tid]:
            self._release(other.tid)  # its tracer is gone: its parent's now
        for tgid, entries in list(self.exited.items()):
            if any(e.clone and e.proc == tid for e in entries):
                self._wake(tgid)  # a thread's exit held for this leader's (_leader_exiting)
        for other in [o for o in self.tracees.values() if o.tracer == tid or (o.tracer is None and o.tgid == tid)]:
            _dbg("detach", other.tid, other.state, other.kind)
            del self.tracees[other.tid]
            lib.um_set_inner(other.tid, 0)
            if other.options & O_EXITKILL:
                _tgkill(other.tid, signal.SIGKILL)
            elif other.state == "stopped":
                if other.kind in ("entry", "seccomp"):
                    self.monitor.defer(lambda tid=other.tid: self._decide(tid))
                else:
                    lib.um_resume(other.tid, lib_PTRACE_LISTEN if other.kind == "group" else lib_PTRACE_CONT,
                                  0)
        if tid in self.exited and not any(o.tgid == tid for o in self.tracees.values()):
            self.exited.pop(tid, None)

    def _exiting(self, t):
        """Tracee t at its exit (PTRACE_EVENT_EXIT, its status in eventmsg).
        Natively a traced process's exit is its tracer's to collect first:
        its parent is notified (SIGCHLD, its wait) when the tracer reaps it
        (kernel/exit.c). Here the monitor, the real tracer, would reap it at
        once, and the parent heard of it before the tracer. So the last
        thread of a process whose parent is not its tracer gives its tracer
        its exit now and waits at this stop until the tracer's wait takes it
        (_release). True: so held."""
        if t.clone or t.real_child:
            return False
        try:
            if len(os.listdir(f"/proc/{t.tid}/task")) != 1:
                return False  # its exit is the last thread's
        except OSError:
            return False
        parent = _ppid(t.tid)
        if not parent or parent == t.tgid:
            return False
        _dbg("exiting", t.tid, hex(t.eventmsg), "held for", t.tgid)
        del self.tracees[t.tid]
        lib.um_set_inner(t.tid, 0)
        self._held[t.tid] = t
        self.exited.setdefault(t.tgid, []).append(_Exited(t.tid, t.eventmsg, t.clone, t.pgid, t.proc, t.vtid))
        self._wake(t.tgid)
        return True

    def _release(self, tid):
        """A process held at its exit (_exiting) goes on to die: its tracer
        took its exit, or is gone."""
        t = self._held.get(tid)
        if t is not None and not t.released:
            t.released = True
            lib.um_resume(tid, lib_PTRACE_CONT, 0)

    def _reparented(self, gone):
        """A traced process is gone: its children are now another's (the
        kernel reparents them at its exit, before the monitor collects it),
        maybe its tracer's (the init of a pid namespace, a subreaper); that
        tracer then is their parent, and the kernel reports their exits."""
        for t in self.tracees.values():
            if t.tgid == gone.tgid and not t.clone and not t.real_child:
                t.real_child = _ppid(t.tid) == t.tgid

    def _gone(self, t, status, parent=None):
        if not t.clone:
            # a zombie for its parent now (read by the C core as it collected
            # the exit, before that parent may reap it): the tracer may have
            # become that parent since the attach (an orphan reparented to
            # it, the init of a pid namespace or a subreaper)
            if parent is None:
                parent = _ppid(t.tid, zombie=True)
            if parent:
                t.real_child = parent == t.tgid
            _dbg("gone", t.tid, "parent", parent, "tracer", t.tgid, "real child", t.real_child)
        if t.real_child and not t.clone:
            self._release_held(t.tgid)  # the kernel's wait finds the exit
            return  # its tracer reaps it with its own wait, as its parent
        self.exited.setdefault(t.tgid, []).append(_Exited(t.tid, status, t.clone, t.pgid, t.proc, t.vtid))
        self._wake(t.tgid)

    def _initial(self, t):
        """The first stop of an auto-attached child."""
        t.expect_initial = False
        if t.seized:
            return self._report(t, _stop(signal.SIGTRAP, EVENT_STOP), "interrupt")
        # a child attached the old way starts with a SIGSTOP; the caller
        # resumes it (once: a second PTRACE_CONT could land on the SIGSTOP's
        # own stop and discard the signal, the thread then ran on unseen)
        _tgkill(t.tid, signal.SIGSTOP)
        return False

    def _report(self, t, word, kind):
        _dbg("report", t.tid, hex(word), kind, "to", t.tgid)
        t.state = "stopped"
        t.kind = kind
        t.status = word
        if t.tracer is not None and not _DEBUG:
            # its data requests are the C core's to answer now (um_inner_stopped),
            # and at a syscall stop a plain PTRACE_SYSCALL or CONT (take_resumes)
            resume = 0
            if kind in ("entry", "exit") and not (t.step or t.emu or t.emu_entry or t.exiting):
                resume = lib.UM_RESUME_ENTRY if kind == "entry" else lib.UM_RESUME_EXIT
            lib.um_inner_stopped(t.tid, t.tracer, t.vtid, t.shown_nr is not None, resume)
        self._wake(t.tgid)
        return True

    def _wake(self, tgid):
        """A stop or exit for tracer process tgid: end a wait it blocks in, and
        send it SIGCHLD as the kernel does, where it can see it."""
        if self._quiet:
            self._unquiet()
        for waiter in [w for w in self.waiters if self.tgid_of(w) == tgid]:
            if lib.um_wait_held(waiter):
                # answered once this event is done with: a wake may come
                # in the middle of serving a wait (_serve_wait reaps, the
                # exit wakes), which must not serve one inside it
                self.monitor.defer(lambda waiter=waiter: self._answer_held(waiter))
            else:
                lib.um_interrupt(waiter)
        if self._sees_sigchld(tgid):
            os.kill(tgid, signal.SIGCHLD)

    def _sees_sigchld(self, tgid):
        """_notices(tgid, SIGCHLD), asked again at most every quarter second
        (a tracer sets up its SIGCHLD before it traces)."""
        now = time.monotonic()
        when, sees = self._sigchld.get(tgid, (None, False))
        if when is None or now - when > 0.25:
            sees = _notices(tgid, signal.SIGCHLD)
            self._sigchld[tgid] = (now, sees)
        return sees
