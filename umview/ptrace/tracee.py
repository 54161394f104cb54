"""The emulation's record of one traced thread (Tracee), of an exited one
its tracer has not collected (_Exited), and the status words of stops."""

import os
import sys


_DEBUG = bool(os.environ.get("UMVIEW_DEBUG_PTRACE"))


def _dbg(*what):
    if _DEBUG:
        print("umview ptrace:", *what, file=sys.stderr, flush=True)


def _stop(sig, event=0):
    """The wait status of a ptrace stop."""
    return 0x7F | (sig << 8) | (event << 16)


def _u64(value):
    return value & 0xFFFFFFFFFFFFFFFF


def _s64(value):
    value = _u64(value)
    return value - (1 << 64) if value >> 63 else value


class Tracee:
    """A thread of the view and its inner tracer, as the kernel would keep them."""

    __slots__ = ("tid", "tracer", "tgid", "seized", "options", "state", "kind", "status", "eventmsg",
                 "sys", "step", "shown_nr", "real_child", "clone", "expect_initial", "interrupt", "pgid",
                 "proc", "emu", "emu_entry", "vtid", "exiting", "released")

    def __init__(self, tid, tracer, tgid, seized, options=0):
        self.tid = tid
        self.tracer = tracer  # the tracer's tid (None: TRACEME, any thread of tgid until it asks)
        self.tgid = tgid      # the tracer's process
        self.seized = seized
        self.options = options
        self.state = "running"  # running | stopped (held, the tracer knows) | listening
        self.kind = None        # the stop it is held at: entry exit signal group event initial interrupt
        self.status = None      # the stop's wait status, until a wait takes it
        self.eventmsg = 0
        self.sys = False        # resumed with PTRACE_SYSCALL
        self.step = False
        self.emu = False        # resumed with PTRACE_SYSEMU(_SINGLESTEP): the kernel skips its calls
        self.emu_entry = False  # held at an entry stop reached so: the call is skipped, not decided
        self.vtid = tid         # its id in its tracer's pid namespace (_tracer_view)
        self.shown_nr = None    # the number the tracer sees at the exit of a call the view changed
        self.real_child = False  # its process is a child of the tracer's (the real wait reports its exit)
        self.clone = False      # a thread: waited for only with __WALL or __WCLONE
        self.expect_initial = False
        self.interrupt = False
        self.pgid = None
        self.proc = None        # its process (tgid)
        self.exiting = False    # at its PTRACE_EVENT_EXIT stop, reported (the option asked)
        self.released = False   # held at its exit (_exiting), then let go on to die


class _Exited:
    """An exit to report to an inner tracer (a tracee not its child)."""

    __slots__ = ("tid", "status", "clone", "pgid", "proc", "vtid")

    def __init__(self, tid, status, clone, pgid, proc=None, vtid=None):
        self.tid, self.status, self.clone, self.pgid = tid, status, clone, pgid
        self.proc = proc  # the process of a thread (clone)
        self.vtid = tid if vtid is None else vtid  # its id in its tracer's pid namespace
