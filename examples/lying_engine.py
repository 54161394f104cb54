"""An engine that exercises the three actions on real programs.

    umview --engine examples/lying_engine.py:LyingEngine -- sh -c 'echo $$; uname -n; rm /tmp/keep'

- getpid() lies: the kernel never runs it (Skip) and the process gets
  $LYING_PID (default 4242).
- uname() runs, and at its exit (CONTINUE_AFTER) the nodename in the
  process's buffer is replaced by $LYING_NODENAME (default "umview-lie").
- unlink/unlinkat/rmdir of a path at or under $LYING_PROTECT (default
  /tmp/umview-protected) are refused with EPERM (Skip(-EPERM)).
- opening $LYING_ALIAS (default /tmp/umview-alias) opens $LYING_TARGET
  (default /etc/hostname) instead: the path argument is rewritten (CONTINUE)
  and restored when the call returns.
"""
import errno
import os

from umview import CONTINUE, CONTINUE_AFTER, Engine, Skip, calls

UTSNAME_FIELD = 65  # struct utsname: six char[65] fields; nodename is the second


class LyingEngine(Engine):
    name = "lying"
    description = "lies about getpid and the nodename, protects a path, aliases a file"
    # the calls it answers, each its own way (one name per handler), and the
    # path calls of two classes of the syscall table: a call the table adds
    # to a class joins at once
    handlers = {"getpid": "_getpid", "uname": "_uname"}
    syscalls = frozenset(handlers)
    path_syscalls = calls("unlinks", "opens")

    def __init__(self):
        self.pid = int(os.environ.get("LYING_PID", "4242"))
        self.nodename = os.environ.get("LYING_NODENAME", "umview-lie").encode()[:64]
        self.protect = os.environ.get("LYING_PROTECT", "/tmp/umview-protected").encode()
        self.alias = os.environ.get("LYING_ALIAS", "/tmp/umview-alias").encode()
        self.target = os.environ.get("LYING_TARGET", "/etc/hostname").encode()
        self.prefixes = (self.protect, self.alias)

    def enter(self, call):
        if call.name in self.handlers:
            return getattr(self, self.handlers[call.name])(call)
        path = call.paths()[0]
        if call.of_class("unlinks"):
            if path == self.protect or (path or b"").startswith(self.protect + b"/"):
                return Skip.errno(errno.EPERM)
            return CONTINUE
        if path == self.alias:
            call.set_arg("path", self.target)  # arguments by name: the same on every ABI
        return CONTINUE

    def _getpid(self, call):
        return Skip(self.pid)

    def _uname(self, call):
        return CONTINUE_AFTER  # the nodename is changed at exit

    def exit(self, call):
        if call.name == "uname" and call.retval == 0:
            field = self.nodename + b"\0" * (UTSNAME_FIELD - len(self.nodename))
            call.write_mem(call.raw("buf") + UTSNAME_FIELD, field)
