"""The waits of inner tracers: wait4, waitid and waitpid answered from the
emulated stops, blocked in the kernel while there are none."""

import errno
import os
import signal
import struct

from umview import core
from umview.core import ffi, lib
from umview.engine import CONTINUE, CONTINUE_AFTER, Skip
from umview.ptrace.abi import (CLD_DUMPED, CLD_EXITED, CLD_KILLED, CLD_TRAPPED, GETREGS, NR, _ORIG_RAX,
                               P_PGID, P_PID, P_PIDFD, _RAX, _RESTARTS, SETREGS, _USER_REGS, WALL, WCLONE,
                               WCONTINUED, WEXITED, WNOHANG, WNOWAIT, WSTOPPED)
from umview.ptrace.procfs import _children, _exiting, _pgid, _uid, _zombie
from umview.ptrace.tracee import _dbg, _DEBUG, _u64


class Waits:
    """InnerTracing's waits (a part of the engine)."""

    def _wait(self, call):
        tgid = self.tgid_of(call.tid)
        if tgid in self._kernel_waited:
            # a wait of its own ran in the kernel since: it may have reaped
            # a child, which no fork or exit of the view's counts
            self._kernel_waited.discard(tgid)
            self._kids.pop(tgid, None)
        name = call.name
        args = self._wait_args(call.tid, name, [_u64(a) for a in call.args])
        self.waiters.pop(call.tid, None)  # a wait it left (a stop it was woken for may still come)
        served = self._serve_wait(call.tid, tgid, name, args)
        if _DEBUG:
            _dbg(call.tid, name, [hex(a) for a in args[:4]], "served", served)
        if served is not None:
            self._quieted(call.tid, tgid)
            return Skip(served)
        options = args[2] if name != "waitid" else args[3]
        self._kernel_waited.add(tgid)  # unless answered here (below)
        if not self._candidates(tgid, name, args):
            return CONTINUE  # none of its tracees is concerned: the kernel's own
        if options & WNOHANG:
            self._catch_up(tgid)
            served = self._serve_wait(call.tid, tgid, name, args)
            if served is not None:
                self._kernel_waited.discard(tgid)
                return Skip(served)
            if not self._real_candidates(tgid, name, args) or self._kernel_quiet(tgid, options):
                # no child of its own it waits for (the kernel would say
                # ECHILD, but its tracees are there, none ready), or none the
                # kernel could report now
                if name == "waitid" and args[2]:
                    core.write_mem(call.tid, args[2], bytes(128))
                self._kernel_waited.discard(tgid)
                self._quieted(call.tid, tgid)
                return Skip(0)
            call.state(self).nohang = (name, args)
            return CONTINUE_AFTER
        if not self._real_candidates(tgid, name, args):
            # no real child it waits for (a tracee not its child, gdb's
            # waitpid(pid, 0) of a fork child): the kernel would say ECHILD at
            # once; block in pause() until a stop comes
            lib.um_set_wait_nr(call.tid, call.nr)
            call.set_syscall("pause", [])
            self.waiters[call.tid] = call.state(self).paused = (call.orig_nr, name, args)
            self._unquiet_others(call.tid, tgid)
            return CONTINUE_AFTER
        self.waiters[call.tid] = (call.nr, name, args)
        self._unquiet_others(call.tid, tgid)
        if self._kernel_quiet(tgid, options):
            # only a stop or exit the monitor sees can end it: held at its
            # stop for that (um_hold_wait), not blocked in the kernel (which
            # it reaches only when released: _release_held, or its time up)
            lib.um_hold_wait(call.tid)
            self._kernel_waited.discard(tgid)
        return CONTINUE

    def exit(self, call):
        st = call.state(self)
        if getattr(st, "paused", None):
            # the pause a wait was made ends: the um_interrupt of a stop for
            # it ends here, not in a PTRACE_EVENT_STOP, when the thread
            # stopped at syscall exits (ptrace(2), PTRACE_INTERRUPT)
            if call.retval in _RESTARTS and self.waiters.get(call.tid) is st.paused:
                self._answer_at_exit(call, st.paused)
            return
        # a WNOHANG wait the kernel found nothing for: its tracees are there
        name, args = st.nohang
        if call.retval in (0, -errno.ECHILD):
            # what came for it while it ran (the monitor took other stops
            # meanwhile): it returns with that, as it would natively had the
            # wait been as quick (gdb's sees a leader exit with its threads)
            tgid = self.tgid_of(call.tid)
            self._catch_up(tgid)
            served = self._serve_wait(call.tid, tgid, name, args)
            if served is not None:
                call.retval = served
                return
        if call.retval == -errno.ECHILD:
            call.retval = 0
            if name == "waitid" and args[2]:
                core.write_mem(call.tid, args[2], bytes(128))

    def _match(self, tgid, name, args, tid, clone, pgid=None):
        """Does a wait of process tgid with these arguments take tid's stop or
        exit? pgid: tid's process group if known (read when needed)."""
        if name == "waitid":
            idtype, ident, options = args[0] & 0xFFFFFFFF, core.signed32(args[1]), args[3]
            if idtype == P_PID and tid != ident:
                return False
            if idtype == P_PGID and (pgid or _pgid(tid)) != (ident or _pgid(tgid)):
                return False
            if idtype == P_PIDFD:
                return False
        else:
            pid, options = core.signed32(args[0]), args[2]
            if pid > 0 and tid != pid:
                return False
            if pid == 0 and (pgid or _pgid(tid)) != _pgid(tgid):
                return False
            if pid < -1 and (pgid or _pgid(tid)) != -pid:
                return False
        if not options & WALL and clone != bool(options & WCLONE):
            return False
        return True

    def _candidates(self, tgid, name, args):
        return any(self._match(tgid, name, args, t.tid, t.clone)
                   for t in self.tracees.values() if t.tgid == tgid) or any(
            self._match(tgid, name, args, e.tid, e.clone, e.pgid) for e in self.exited.get(tgid, ()))

    def _real_candidates(self, tgid, name, args):
        """May a real child of process tgid end this wait (the kernel's wait
        then blocks, else it fails with ECHILD)?"""
        if name == "waitid" and args[0] & 0xFFFFFFFF == P_PIDFD:
            return True  # the real wait decides
        # a tracee that is its child (strace's command) answers without /proc
        if any(t.real_child and t.tgid == tgid and self._match(tgid, name, args, t.tid, False)
               for t in self.tracees.values()):
            return True
        children = self._children(tgid)
        if children is None:
            return True  # cannot tell: the real wait decides
        return any(self._match(tgid, name, args, c, False) for c in children)

    def _quieted(self, tid, tgid):
        """tid's wait was answered, or found nothing: if nothing else is there
        for its process, its WNOHANG waits find nothing until a stop or exit
        comes for it (_wake, _unquiet) or a fork or an exit in the view, and
        the C core answers them (um_nohang_quiet: strace -f's WNOHANG wait
        after each stop). Not for a tracer of threads, whose waits first
        collect the exits of an exiting process's threads (_catch_up)."""
        if self.exited.get(tgid) or any(t.clone or t.status is not None
                                        for t in self.tracees.values() if t.tgid == tgid):
            return
        if not self._kernel_quiet(tgid, 0):
            return
        quiet = lib.UM_QUIET
        if self._children(tgid) and not self._sees_sigchld(tgid) and not any(
                w != tid and self.tgid_of(w) == tgid for w in self.waiters):
            # its blocking wait would be held (_wait), and a stop end it (or
            # its next wait) with no SIGCHLD to send and no other waiter to
            # wake: the C core may do all that (inner.c)
            quiet |= lib.UM_QUIET_HOLD
        lib.um_nohang_quiet(tid, quiet)
        self._quiet.add(tid)

    def _unquiet_others(self, tid, tgid):
        """Thread tid of process tgid waits where only Python's wake ends its
        wait: the C core must not report stops to its other threads' waits
        on its own (UM_QUIET_HOLD)."""
        for other in [q for q in self._quiet if q != tid and self.tgid_of(q) == tgid]:
            lib.um_nohang_quiet(other, 0)
            self._quiet.discard(other)

    def _unquiet(self):
        """Something may be there for a WNOHANG wait again: Python answers."""
        for tid in self._quiet:
            lib.um_nohang_quiet(tid, 0)
        self._quiet.clear()

    def _children(self, tgid):
        """_children(tgid), read again only after a fork or an exit in the
        view (um_family_gen): strace -f asks at each wait."""
        gen = lib.um_family_gen()
        kept = self._kids.get(tgid)
        if kept is not None and kept[0] == gen:
            return kept[1]
        children = _children(tgid)
        if children is not None:
            if len(self._kids) > 256:
                self._kids.clear()
            self._kids[tgid] = (gen, children)
        return children

    def _kernel_quiet(self, tgid, options):
        """Has the kernel's own wait of process tgid nothing to report now,
        nor anything the monitor would not see first? So when each of its
        children is a tracee of its own, alive: their stops are the
        monitor's to report (the kernel gives them to the real tracer), and
        an exit reaches the parent's wait only once the monitor collected
        it, when the tracee is gone from these books. A stop or continue of
        a child's group the kernel reports to its parent too: a wait for
        those goes to the kernel. Spares strace -f's WNOHANG wait after each
        stop its exit stop, and lets its blocking wait be held at its stop
        (um_hold_wait) instead of blocking and being interrupted."""
        if options & (WSTOPPED | WCONTINUED):
            return False
        children = self._children(tgid)
        if children is None:
            return False
        tracees = self.tracees
        for child in children:
            t = tracees.get(child)
            if t is None or t.tgid != tgid:
                return False
        return True

    def _serve_wait(self, tid, tgid, name, args):
        """Answer a wait from an emulated stop or exit: its result, or None."""
        options = args[3] if name == "waitid" else args[2]
        nowait = name == "waitid" and options & WNOWAIT
        for t in self.tracees.values():
            if t.tgid == tgid and t.status is not None and self._match(tgid, name, args, t.tid, t.clone):
                word = t.status
                if not nowait:
                    t.status = None
                    lib.um_inner_taken(t.tid)  # if the C core reported it: no longer its to give
                return self._write_wait(tid, name, args, t.tid, word, t.vtid)
        if name == "waitid" and not options & WEXITED:
            return None
        entry = next((e for e in self.exited.get(tgid, ()) if self._match(tgid, name, args, e.tid, e.clone, e.pgid)),
                     None)
        if entry is None or entry.clone and self._leader_exiting(entry.proc) and not self._reap(entry.proc):
            return None
        _dbg("exit served", entry.tid, entry.vtid, hex(entry.status))
        if not nowait:
            self.exited[tgid].remove(entry)
            self._release(entry.tid)
        return self._write_wait(tid, name, args, entry.tid, entry.status, entry.vtid)

    def _reap(self, pid):
        """Collect pid's exit ahead of the monitor's loop (um_reap) and take
        it into these books now: True if the kernel had it."""
        status = ffi.new("int *")
        if lib.um_reap(pid, status) != 1:
            return False
        self.exit_event(pid, status[0])
        return True

    def _catch_up(self, tgid):
        """A WNOHANG wait of tracer tgid finds nothing: take in first the
        exits the kernel already has, and the monitor has not collected, of
        the threads (and then the leader) of an exiting process it traces (a
        zombie leader). Natively the wait sees them; gdb drops a zombie
        leader while it knows other threads, and then ran out of threads to
        wait for."""
        # only processes with traced threads: a single-threaded one's exit
        # has no leader to wait for (and strace -f's waits stay cheap)
        for proc in {t.proc for t in self.tracees.values() if t.tgid == tgid and t.clone}:
            if not _zombie(proc):
                continue
            try:
                tasks = [int(task) for task in os.listdir(f"/proc/{proc}/task")]
            except (OSError, ValueError):
                continue
            for task in tasks:
                if task != proc and task in self.tracees and _exiting(task):
                    self._reap(task)
            if tasks == [proc] and proc in self.tracees:
                self._reap(proc)  # the leader, its threads all gone

    def _leader_exiting(self, proc):
        """Has process proc's leader exited, its last thread gone, and the
        monitor yet to reap it? Natively its tracer finds the leader's exit
        at the wait after the last thread's (gdb, which drops a zombie leader
        while other threads remain, counts on it, else "No unwaited-for
        children left"): the monitor reaps it first (um_reap), or the
        thread's exit waits for the leader's."""
        if proc not in self.tracees or not _zombie(proc):
            return False
        try:
            return os.listdir(f"/proc/{proc}/task") == [str(proc)]
        except OSError:
            return False

    @staticmethod
    def _write_wait(tid, name, args, who, word, vwho):
        """Write the wait's results for who's status word; vwho: who's id in
        the waiter's pid namespace."""
        if name == "waitid":
            if args[2]:
                if os.WIFEXITED(word):
                    code, st = CLD_EXITED, os.WEXITSTATUS(word)
                elif os.WIFSIGNALED(word):
                    code, st = (CLD_DUMPED if word & 0x80 else CLD_KILLED), os.WTERMSIG(word)
                else:
                    code, st = CLD_TRAPPED, word >> 8
                uid = _uid(who)
                info = struct.pack("<iiiiiI", signal.SIGCHLD, 0, code, 0, vwho, uid) + struct.pack("<i", st)
                core.write_mem(tid, args[2], info.ljust(128, b"\0"))
            if args[4]:
                core.write_mem(tid, args[4], bytes(144))
            return 0
        if args[1]:
            core.write_mem(tid, args[1], struct.pack("<i", word))
        if args[3]:
            core.write_mem(tid, args[3], bytes(144))  # struct rusage: not kept for emulated stops
        return vwho

    def _answer_held(self, tid):
        """A stop or exit came for the process of tid, held in a wait
        (um_hold_wait): answer the wait at its stop if it is for it."""
        waiter = self.waiters.get(tid)
        if not lib.um_wait_held(tid):
            if waiter is not None:
                lib.um_interrupt(tid)  # released into the kernel's wait meanwhile
            return
        if waiter is None:
            lib.um_release_wait(tid)  # a wait whose arguments are not known: the kernel's
            return
        result = self._serve_waiter(tid, waiter)
        if result is not None:
            del self.waiters[tid]
            lib.um_answer_wait(tid, result)
            self._quieted(tid, self.tgid_of(tid))

    def _release_held(self, tgid):
        """Something the kernel reports ends the waits process tgid is held
        in (its child's exit): they go on into the kernel's wait."""
        for waiter in [w for w in self.waiters if self.tgid_of(w) == tgid]:
            lib.um_release_wait(waiter)
        self._kernel_waited.add(tgid)

    def _answer_waiter(self, tid):
        """The interrupt stop of a tracer blocked in a wait: answer it there if
        a stop or exit is now there for it; else it waits on."""
        waiter = self.waiters.pop(tid)
        try:
            regs = bytearray(self._get(tid, GETREGS, 0, _USER_REGS))
        except OSError:
            return
        orig, rax = struct.unpack_from("<q", regs, _ORIG_RAX)[0], struct.unpack_from("<q", regs, _RAX)[0]
        nrs = NR
        if waiter is None or orig not in (nrs["wait4"], nrs["waitid"], nrs["pause"]) or rax not in _RESTARTS:
            # not in a wait (it left it meanwhile), or a wait it may be in
            # without the monitor knowing its arguments (_kick_waits): it
            # goes on, and such a wait starts again through the monitor
            if waiter is not None:
                lib.um_set_wait_nr(tid, 0)
            return
        result = self._serve_waiter(tid, waiter)
        if result is None:
            self.waiters[tid] = waiter  # not for this wait: it goes on waiting
            return
        struct.pack_into("<q", regs, _RAX, result)
        self._put(tid, SETREGS, 0, regs)

    def _answer_at_exit(self, call, waiter):
        """The exit of a wait made pause(), interrupted: its result, if a stop
        or exit is now there for it (else it restarts, or a signal's handler
        runs and it restarts as the wait: um_set_wait_nr)."""
        result = self._serve_waiter(call.tid, waiter)
        if result is not None:
            del self.waiters[call.tid]
            call.retval = result

    def _serve_waiter(self, tid, waiter):
        """Serve the wait waiter (number, name, args) of tid from the
        arguments it was made with (the registers of a wait made pause() are
        zeroed until its exit stop): its result, or None."""
        _, name, args = waiter
        try:
            result = self._serve_wait(tid, self.tgid_of(tid), name, args)
        except OSError as exc:
            result = -(exc.errno or errno.EFAULT)
        if result is not None:
            lib.um_set_wait_nr(tid, 0)
        return result
