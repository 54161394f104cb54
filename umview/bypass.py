"""Calls that would reach files by a way no path engine sees, refused or
emulated in a view whose modules serve paths (redirecting or layered mounts).

- io_uring_setup: the operations of a ring (IORING_OP_OPENAT, RENAMEAT,
  UNLINKAT, MKDIRAT, ...) are run by the kernel without a system call the
  view's filter sees, so they would act on the real files under a mount (a
  cow view of / would let them write the real tree). ENOSYS, what a kernel
  without io_uring answers: liburing users and runtimes fall back to plain
  system calls.
- open_by_handle_at: opens a file by its handle (name_to_handle_at), not its
  path, so what a mount shows there is skipped. EPERM, what the kernel
  answers a caller without CAP_DAC_READ_SEARCH (every normal user).
- prctl(PR_SET_DUMPABLE, 0), for a monitor without CAP_SYS_PTRACE (a normal
  user's): the kernel would refuse the monitor the process's memory and its
  /proc/PID/cwd and fd/N, so the view could no longer see its paths (its
  file calls would fail with EACCES: ssh-agent, gpg-agent and trinity's
  children make themselves so). The call succeeds and PR_GET_DUMPABLE
  answers what the process set, until its next exec, as the kernel would;
  the process stays readable by its tracer (and by the user's other
  processes, which the flag would have kept out). A root monitor leaves the
  call to the kernel: it reads such processes anyway.

The cwd tracker's companion: registered with it (umview.assembly).
"""
import errno
import os

from umview.engine import CONTINUE, Engine, Skip
from umview.procs import PROCESSES
from umview.syscalls import calls

PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4


class PathBypass(Engine):
    name = "pathbypass"
    description = ("io_uring_setup (ENOSYS) and open_by_handle_at (EPERM) refused: they bypass the view's paths; "
                   "PR_SET_DUMPABLE emulated for a normal user's monitor")
    syscalls = calls("bypasses")
    per_view = "pathbypass"

    def __init__(self):
        if os.geteuid() != 0:
            self.value_syscalls = {"prctl": (0, frozenset({PR_GET_DUMPABLE, PR_SET_DUMPABLE}))}

    def wants(self, call):
        if call.name == "prctl":
            return call.args[0] & 0xFFFFFFFF in (PR_GET_DUMPABLE, PR_SET_DUMPABLE)
        return call.name in self.syscalls

    def enter(self, call):
        if call.name == "prctl":
            return self._dumpable(call)
        if call.name == "io_uring_setup":
            return Skip.errno(errno.ENOSYS)
        return Skip.errno(errno.EPERM)

    def _dumpable(self, call):
        """The flag is the process's (its record: umview.procs): a fork copies
        it, an exec resets it, as the kernel's (it belongs to the memory)."""
        try:
            p = PROCESSES.record(call.tid).process
        except OSError:
            return CONTINUE
        if call.args[0] & 0xFFFFFFFF == PR_GET_DUMPABLE:
            return Skip(p.dumpable) if p.dumpable is not None else CONTINUE
        value = call.args[1]
        if value not in (0, 1):
            return CONTINUE  # the kernel's EINVAL (2, SUID_DUMP_ROOT, is refused too)
        if value == 1:
            p.dumpable = None
            return CONTINUE
        p.dumpable = 0
        return Skip(0)
