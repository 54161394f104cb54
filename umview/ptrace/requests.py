"""The requests of inner tracers: attach, the PEEK/POKE/GETREGS family,
options, and the resumption of a held stop (CONT, SYSCALL, SINGLESTEP,
LISTEN, DETACH)."""

import errno
import os
import signal
import struct

from umview import core
from umview.core import ffi, lib
from umview.engine import Skip
from umview.ptrace.abi import (ATTACH, CONT, DETACH, GET_RSEQ_CONFIGURATION, GET_SYSCALL_INFO,
                               GET_THREAD_AREA, GETEVENTMSG, GETFPREGS, GETREGS, GETREGSET, GETSIGINFO,
                               GETSIGMASK, INTERRUPT, KILL, lib_PTRACE_CONT, lib_PTRACE_LISTEN,
                               lib_PTRACE_SINGLESTEP, LISTEN, NR, O_MASK, O_SUSPEND_SECCOMP, O_TRACESECCOMP,
                               O_TRACESYSGOOD, _ORIG_RAX, PEEKDATA, PEEKSIGINFO, PEEKTEXT, PEEKUSER, POKEDATA, POKETEXT,
                               POKEUSER, _RIP, SEIZE, SET_SYSCALL_INFO, SET_THREAD_AREA, SETFPREGS,
                               SETOPTIONS, SETREGS, SETREGSET, SETSIGINFO, SETSIGMASK, SINGLEBLOCK,
                               SINGLESTEP, SYSCALL, SYSEMU, SYSEMU_SINGLESTEP, TRACEME, _TRAP_BRKPT,
                               _USER_REGS)
from umview.ptrace.procfs import _in_view, _may_attach, _pgid, _stat_fields, _tgid, _tgkill, _uid
from umview.ptrace.tracee import _dbg, Tracee, _u64


class Requests:
    """InnerTracing's requests (a part of the engine)."""

    def _ptrace(self, call):
        req = call.args[0] & 0xFFFFFFFF
        pid = core.signed32(call.args[1])
        addr, data = _u64(call.args[2]), _u64(call.args[3])
        _dbg(call.tid, "ptrace", hex(req), pid, hex(addr), hex(data))
        if req == TRACEME:
            return self._traceme(call)
        if req in (ATTACH, SEIZE):
            return self._attach(call, req, self._global(call.tid, pid, scan=True), addr, data)
        t = self.tracees.get(self._global(call.tid, pid))
        pid = t.tid if t is not None else pid
        if t is None or not self._is_its_tracer(t, call.tid):
            return Skip(-errno.ESRCH)
        if req == KILL:
            _tgkill(pid, signal.SIGKILL)
            return Skip(0)
        if req == INTERRUPT:
            if not t.seized:
                return Skip(-errno.EIO)
            if t.state != "stopped":
                t.interrupt = True
                lib.um_interrupt(pid)
            return Skip(0)
        if req == LISTEN:
            if not t.seized:
                return Skip(-errno.EIO)
            if t.state != "stopped":
                return Skip(-errno.ESRCH)
            if t.kind != "group":
                return Skip(-errno.EIO)
            t.state = "listening"
            t.status = None
            lib.um_inner_stopped(pid, 0, 0, 0, 0)
            core.check(lib.um_resume(pid, lib_PTRACE_LISTEN, 0))
            return Skip(0)
        if t.state != "stopped":
            return Skip(-errno.ESRCH)
        try:
            return Skip(self._request(call, t, req, pid, addr, data))
        except OSError as exc:
            return Skip(-(exc.errno or errno.EIO))

    def _is_its_tracer(self, t, tid):
        if t.tracer is None and self.tgid_of(tid) == t.tgid:
            t.tracer = tid  # TRACEME: the parent's thread that asks first
            self._sync(t)
        return t.tracer == tid

    def _traceme(self, call):
        if call.tid in self.tracees:
            return Skip(-errno.EPERM)
        fields = _stat_fields(call.tid)
        if fields is None or fields[0] <= 1:
            return Skip(-errno.EPERM)
        ppid = fields[0]
        if not _in_view(ppid):
            return Skip(-errno.EPERM)
        t = Tracee(call.tid, None, ppid, seized=False)
        t.real_child = _tgid(call.tid) == call.tid
        self._add(t)
        self._kick_waits(ppid)
        return Skip(0)

    def _kick_waits(self, tgid):
        """The parent may already be in a wait the monitor let through (it was
        not a tracer then), or on its way into one: interrupt its threads, so
        that such a wait starts again through the monitor and finds its new
        tracee's stops (_answer_waiter)."""
        try:
            tasks = [int(t) for t in os.listdir(f"/proc/{tgid}/task")]
        except OSError:
            return
        for task in tasks:
            self.waiters.setdefault(task, None)
            if not lib.um_wait_held(task):  # a held wait is the monitor's already
                lib.um_interrupt(task)

    def _attach(self, call, req, pid, addr, data):
        if req == SEIZE:
            if addr != 0:
                return Skip(-errno.EIO)
            if data & ~O_MASK & 0xFFFFFFFF:
                return Skip(-errno.EINVAL)
            if data & O_SUSPEND_SECCOMP:
                return Skip(-errno.EPERM)  # it would suspend the view's own filter
        if pid <= 0 or not os.path.exists(f"/proc/{pid}"):
            return Skip(-errno.ESRCH)
        tgid = _tgid(call.tid)
        if _tgid(pid) == tgid:
            return Skip(-errno.EPERM)
        if pid in self.tracees or not _in_view(pid) or not _may_attach(call.tid, pid):
            return Skip(-errno.EPERM)
        t = Tracee(pid, call.tid, tgid, seized=req == SEIZE, options=data if req == SEIZE else 0)
        fields = _stat_fields(pid)
        t.real_child = fields is not None and fields[0] == tgid and _tgid(pid) == pid
        t.clone = _tgid(pid) != pid
        self._add(t)
        if req == ATTACH:
            _tgkill(pid, signal.SIGSTOP)
        return Skip(0)

    def _add(self, t):
        self._unquiet()  # a new tracee: its tracer's waits are Python's again
        t.pgid = _pgid(t.tid)
        self._activate()
        t.proc = _tgid(t.tid)
        t.vtid = self._virtual(t.tgid, t.tid)
        self.tracees[t.tid] = t
        self._sync(t)

    def _sync(self, t):
        """Tell the C core what t's tracer wants of its stops."""
        flags = lib.UM_INNER
        if t.sys:
            flags |= lib.UM_INNER_SYSCALL
        if t.options & O_TRACESECCOMP:
            flags |= lib.UM_INNER_SECCOMP
        if t.step:
            flags |= lib.UM_INNER_STEP
        if t.emu:
            flags |= lib.UM_INNER_EMU
        lib.um_set_inner(t.tid, flags)
        lib.um_set_inner_tracer(t.tid, t.tracer or 0, t.vtid, t.options & O_TRACESYSGOOD)

    def _request(self, call, t, req, pid, addr, data):
        tracer = call.tid
        if req in (PEEKTEXT, PEEKDATA, PEEKUSER):
            word = ffi.new("uint64_t *")
            if req == PEEKUSER and addr == _ORIG_RAX and t.shown_nr is not None:
                word[0] = _u64(t.shown_nr)
            else:
                core.check(lib.um_ptrace(req, pid, addr, int(ffi.cast("uintptr_t", word))))
            core.write_mem(tracer, data, struct.pack("<Q", word[0]))
            return 0
        if req in (POKETEXT, POKEDATA, POKEUSER):
            return core.check(lib.um_ptrace(req, pid, addr, data))
        if req in (CONT, SYSCALL, SINGLESTEP, DETACH, SYSEMU, SYSEMU_SINGLESTEP):
            if data > 64:
                return -errno.EIO
            return self._resume(t, req, data)
        if req == SINGLEBLOCK:
            return -errno.EIO  # not emulated (docs/internals.md)
        if req == GETREGS:
            buf = self._get(pid, GETREGS, 0, _USER_REGS)
            if t.shown_nr is not None:
                buf[_ORIG_RAX:_ORIG_RAX + 8] = struct.pack("<q", t.shown_nr)
            core.write_mem(tracer, data, bytes(buf))
            return 0
        if req == SETREGS:
            buf = bytearray(core.read_mem(tracer, data, _USER_REGS))
            if t.shown_nr is not None and struct.unpack_from("<q", buf, _ORIG_RAX)[0] == t.shown_nr:
                real = self._get(pid, GETREGS, 0, _USER_REGS)
                buf[_ORIG_RAX:_ORIG_RAX + 8] = real[_ORIG_RAX:_ORIG_RAX + 8]
            return self._put(pid, SETREGS, 0, buf)
        if req == GETFPREGS:
            core.write_mem(tracer, data, bytes(self._get(pid, GETFPREGS, 0, 512)))
            return 0
        if req == SETFPREGS:
            return self._put(pid, SETFPREGS, 0, core.read_mem(tracer, data, 512))
        if req in (GETREGSET, SETREGSET):
            base, length = struct.unpack("<QQ", core.read_mem(tracer, data, 16))
            length = min(length, 1 << 20)
            buf = ffi.new("char[]", max(length, 1))
            if req == SETREGSET:
                ffi.memmove(buf, core.read_mem(tracer, base, length), length)
            iov = ffi.new("uint64_t[2]", [int(ffi.cast("uintptr_t", buf)), length])
            core.check(lib.um_ptrace(req, pid, addr, int(ffi.cast("uintptr_t", iov))))
            if req == GETREGSET:
                if t.shown_nr is not None and addr == 1 and iov[1] >= _ORIG_RAX + 8:  # NT_PRSTATUS
                    ffi.memmove(buf + _ORIG_RAX, struct.pack("<q", t.shown_nr), 8)
                core.write_mem(tracer, base, ffi.buffer(buf, iov[1])[:])
            core.write_mem(tracer, data + 8, struct.pack("<Q", iov[1]))
            return 0
        if req == GETSIGINFO:
            if t.kind == "step":
                core.write_mem(tracer, data, self._step_siginfo(pid))
            else:
                core.write_mem(tracer, data, bytes(self._get(pid, GETSIGINFO, 0, 128)))
            return 0
        if req == SETSIGINFO:
            return self._put(pid, SETSIGINFO, 0, core.read_mem(tracer, data, 128))
        if req == PEEKSIGINFO:
            off, flags, nr = struct.unpack("<QIi", core.read_mem(tracer, addr, 16))
            nr = max(0, min(nr, 4096))
            args = ffi.new("char[]", struct.pack("<QIi", off, flags, nr))
            buf = ffi.new("char[]", max(nr, 1) * 128)
            n = core.check(lib.um_ptrace(req, pid, int(ffi.cast("uintptr_t", args)),
                                         int(ffi.cast("uintptr_t", buf))))
            if n:
                core.write_mem(tracer, data, ffi.buffer(buf, n * 128)[:])
            return n
        if req in (GETSIGMASK, SETSIGMASK):
            if addr != 8:
                return -errno.EINVAL
            if req == GETSIGMASK:
                core.write_mem(tracer, data, bytes(self._get(pid, req, 8, 8)))
                return 0
            return self._put(pid, req, 8, core.read_mem(tracer, data, 8))
        if req == GETEVENTMSG:
            core.write_mem(tracer, data, struct.pack("<Q", _u64(t.eventmsg)))
            return 0
        if req == SETOPTIONS:
            if data & ~O_MASK & 0xFFFFFFFFFFFFFFFF:
                return -errno.EINVAL
            if data & O_SUSPEND_SECCOMP:
                return -errno.EPERM
            t.options = data
            self._sync(t)
            return 0
        if req in (GET_SYSCALL_INFO, GET_RSEQ_CONFIGURATION):
            size = 88 if req == GET_SYSCALL_INFO else 32
            buf = ffi.new("char[]", size)
            n = core.check(lib.um_ptrace(req, pid, size, int(ffi.cast("uintptr_t", buf))))
            core.write_mem(tracer, data, ffi.buffer(buf, min(n, addr, size))[:])
            return n
        if req == SET_SYSCALL_INFO:
            size = min(addr, 88)
            return self._put(pid, req, size, core.read_mem(tracer, data, size))
        if req in (GET_THREAD_AREA, SET_THREAD_AREA):
            if req == GET_THREAD_AREA:
                core.write_mem(tracer, data, bytes(self._get(pid, req, addr, 16)))
                return 0
            return self._put(pid, req, addr, core.read_mem(tracer, data, 16))
        return -errno.EIO  # an unknown request, as the kernel says

    def _step_siginfo(self, pid):
        """The siginfo of a step's trap at the end of a system call (x86's
        user_single_step_report: SIGTRAP, TRAP_BRKPT, si_addr the next
        instruction), where the thread really is at a syscall-exit stop."""
        rip = struct.unpack_from("<Q", self._get(pid, GETREGS, 0, _USER_REGS), _RIP)[0]
        return struct.pack("<iiiiQ", signal.SIGTRAP, 0, _TRAP_BRKPT, 0, rip).ljust(128, b"\0")

    @staticmethod
    def _get(pid, req, addr, size):
        buf = ffi.new("char[]", size)
        core.check(lib.um_ptrace(req, pid, addr, int(ffi.cast("uintptr_t", buf))))
        return bytearray(ffi.buffer(buf, size)[:])

    @staticmethod
    def _put(pid, req, addr, data):
        buf = ffi.new("char[]", bytes(data))
        return core.check(lib.um_ptrace(req, pid, addr, int(ffi.cast("uintptr_t", buf))))

    # --- resuming a held stop ---
    _notes = None

    def take_notes(self):
        """What the C core did for inner tracers since Python's last event
        (um_take_notes), into these records, in order: a tracee resumed by
        its tracer's PTRACE_SYSCALL or CONT, as _resume leaves it; a syscall
        stop reported, its status taken by its tracer's wait, as _report and
        _answer_held leave them, or pending for its next wait, and later
        taken by one; a tracer's wait held, as _wait leaves it."""
        if self._notes is None:
            self._notes = ffi.new("struct um_inner_note[256]")
        notes = self._notes
        while True:
            n = lib.um_take_notes(notes, 256)
            for i in range(n):
                note = notes[i]
                what = note.what
                if what == lib.UM_NOTE_WAIT:
                    tid = note.tid
                    self.waiters[tid] = (NR["wait4"], "wait4", [note.args[0], note.args[1], note.args[2],
                                                              note.args[3], 0, 0])
                    self._kernel_waited.discard(self.tgid_of(tid))
                    continue
                t = self.tracees.get(note.tid)
                if t is None:
                    continue
                if what == lib.UM_NOTE_TAKEN:
                    t.status = None
                    continue
                if what in (lib.UM_NOTE_ENTRY, lib.UM_NOTE_EXIT, lib.UM_NOTE_PENDING_ENTRY,
                            lib.UM_NOTE_PENDING_EXIT):
                    entry = what in (lib.UM_NOTE_ENTRY, lib.UM_NOTE_PENDING_ENTRY)
                    if entry:
                        t.shown_nr = None
                        t.emu_entry = t.emu
                    t.state = "stopped"
                    t.kind = "entry" if entry else "exit"
                    if what in (lib.UM_NOTE_ENTRY, lib.UM_NOTE_EXIT):
                        t.status = None  # taken by the wait C answered
                        self.waiters.pop(t.tracer, None)
                    else:
                        t.status = note.args[0]  # for its tracer's next wait
                    continue
                t.sys = what == lib.UM_NOTE_RESUME_SYSCALL
                t.step = t.emu = False
                if t.kind != "exit":
                    t.shown_nr = None
                t.state = "running"
                t.status = None
                t.kind = None
            if n < 256:
                return

    def _resume(self, t, req, sig):
        kind = t.kind
        if req == DETACH:
            self._unquiet()  # a child no tracee now: the kernel's wait may report it
            del self.tracees[t.tid]
            lib.um_set_inner(t.tid, 0)
            t.sys = t.step = t.emu = False  # it runs on untraced (a step asked before is not kept)
        else:
            t.sys = req == SYSCALL
            t.step = req in (SINGLESTEP, SYSEMU_SINGLESTEP)
            t.emu = req in (SYSEMU, SYSEMU_SINGLESTEP)
            self._sync(t)
        t.state = "running"
        t.status = None
        t.kind = None
        lib.um_inner_stopped(t.tid, 0, 0, 0, 0)
        if kind != "exit":
            t.shown_nr = None
        tid = t.tid
        if t.exiting and req != DETACH and self._exiting(t):
            return 0  # held at its exit until its tracer collects it
        if kind == "group" and req == DETACH:
            lib.um_resume(tid, lib_PTRACE_LISTEN, 0)  # it stays in its group-stop
            return 0
        # a signal given at a syscall stop is sent (SI_KERNEL); at an event,
        # group-stop or interrupt it is ignored (kernel/signal.c, ptrace.h)
        deliver = sig if kind in ("signal", "step", "exit") else 0
        if sig and kind == "signal":
            self._signal_changed(t, sig)
        if sig and kind == "entry":
            lib.um_set_resume_signal(tid, sig)  # at the monitor's resume of the stop
        if kind == "entry" and t.emu_entry:
            # reached under PTRACE_SYSEMU: the kernel skips the call (the
            # view has nothing to decide), whatever this resume asks
            lib.um_resume(tid, lib_PTRACE_CONT, 0)
            return 0
        if kind in ("entry", "seccomp"):
            # the call goes on: now the view decides it, as it now stands
            self.monitor.defer(lambda: self._decide(tid))
            return 0
        core.check(lib.um_resume(tid, lib_PTRACE_SINGLESTEP if t.step else lib_PTRACE_CONT, deliver))
        return 0

    def _signal_changed(self, t, sig):
        """At a signal-delivery stop resumed with another signal the kernel
        delivers that one as sent by the tracer (SI_USER, its pid and uid):
        here the monitor resumes, so the siginfo says so first."""
        try:
            info = self._get(t.tid, GETSIGINFO, 0, 128)
        except OSError:
            return
        if struct.unpack_from("<i", info)[0] == sig:
            return  # the same signal, or one the tracer set with SETSIGINFO
        tracer = t.tracer or t.tgid
        self._put(t.tid, SETSIGINFO, 0, struct.pack("<iiiiiI", sig, 0, 0, 0, tracer, _uid(tracer)).ljust(128, b"\0"))

    def _decide(self, tid):
        ev = ffi.new("struct um_event *")
        if lib.um_decide_stopped(tid, ev) != lib.UM_EV_SYSCALL:
            return
        call = self.monitor.dispatch_entry(ev)
        t = self.tracees.get(tid)
        if t is not None and (ev.reply == lib.UM_REPLY_SKIP or ev.changed & lib.UM_CHANGED_NR):
            t.shown_nr = call.orig_nr
        lib.um_finish(ev)
