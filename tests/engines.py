"""Engines the integration tests load with --engine tests/engines.py:CLASS.

Each is as small as the behaviour it provokes. Prefixes come from the
environment so a test can aim an engine at its own temporary directory.
"""
import errno
import os

from umview import CONTINUE, CONTINUE_AFTER, Engine, Skip

#: path calls whose path arguments the C core reads and resolves
CLAIMED_PATH_CALLS = frozenset({
    "open", "openat", "openat2", "creat", "unlink", "unlinkat", "mkdir", "mkdirat",
    "rmdir", "rename", "renameat", "renameat2", "readlink", "readlinkat",
    "newfstatat", "stat", "lstat", "statx", "access", "faccessat", "faccessat2",
    "chdir", "symlink", "symlinkat", "link", "linkat", "truncate", "chmod", "fchmodat",
})


class PassPathsEverywhere(Engine):
    """Claims the common path calls under "/" and passes them all on: every
    such call reaches Python, and must behave exactly as natively."""

    name = "pass-paths"
    path_syscalls = CLAIMED_PATH_CALLS
    prefixes = ("/",)

    def enter(self, call):
        call.paths()  # decode, as a real module would
        return CONTINUE


class RaiseUnderPrefix(Engine):
    """Raises a non-OSError on path calls under $UMVIEW_TEST_RAISE: at entry
    for names starting with "enter", at exit for names starting with "exit"."""

    name = "raiser"
    path_syscalls = frozenset({"open", "openat", "openat2"})

    def __init__(self):
        self.prefixes = (os.environ["UMVIEW_TEST_RAISE"],)

    def enter(self, call):
        base = os.path.basename(call.paths()[0] or b"")
        if base.startswith(b"enter"):
            raise RuntimeError(f"deliberate failure in enter for {base!r}")
        if base.startswith(b"exit"):
            return CONTINUE_AFTER
        return CONTINUE

    def exit(self, call):
        raise RuntimeError("deliberate failure in exit")


class RefuseOpen(Engine):
    """Claims open(2) (not openat) under "/" and refuses it with EPERM."""

    name = "refuse-open"
    path_syscalls = frozenset({"open"})
    prefixes = ("/",)

    def enter(self, call):
        return Skip.errno(errno.EPERM)


class LayerRecorder(Engine):
    """Records every path call the C core hands to Python, and passes it on.

    Its prefixes come from the environment: $UMVIEW_TEST_LAYER (layered),
    $UMVIEW_TEST_REAL (real, inside it), $UMVIEW_TEST_PLAIN (plain); the
    layer set from $UMVIEW_TEST_ENTRIES, lines "dir:PATH" or "hide:PATH";
    $UMVIEW_TEST_FD_CHECK=1 turns the fd check on. Each call is one line
    "name path path" of $UMVIEW_TEST_LOG ("-" for a path it cannot resolve).
    """

    name = "layer-recorder"

    def __init__(self):
        from umview import core
        from umview.syscalls import PATH_SYSCALLS

        env = os.environb
        self.path_syscalls = PATH_SYSCALLS
        self.layered_prefixes = tuple(env[k] for k in (b"UMVIEW_TEST_LAYER",) if env.get(k))
        self.real_prefixes = tuple(env[k] for k in (b"UMVIEW_TEST_REAL",) if env.get(k))
        self.prefixes = tuple(env[k] for k in (b"UMVIEW_TEST_PLAIN",) if env.get(k))
        self.fd_check = env.get(b"UMVIEW_TEST_FD_CHECK") == b"1"
        for line in env.get(b"UMVIEW_TEST_ENTRIES", b"").split():
            kind, _, path = line.partition(b":")
            core.layer_add(path, core.LAYER_DIR if kind == b"dir" else core.LAYER_HIDE)
        self.log = open(env[b"UMVIEW_TEST_LOG"], "ab", buffering=0)

    def wants(self, call):
        return call.name in self.path_syscalls  # whatever C sent, lexically under a prefix or not

    def enter(self, call):
        self.log.write(call.name.encode() + b" " + b" ".join(p or b"-" for p in call.paths()) + b"\n")
        return CONTINUE


class InjectGetppid(Engine):
    """getpid answers the parent's pid, asked by a getppid injected into the
    caller (Call.inject), then the getpid is skipped."""

    name = "inject-getppid"
    syscalls = frozenset({"getpid"})

    def enter(self, call):
        return Skip(call.inject("getppid"))


class InjectThenRun(Engine):
    """Every getpid first runs two injected calls, then the getpid itself
    runs, with an exit stop; each enter and exit is logged in $INJECT_LOG
    (the same getpid must reach Python once)."""

    name = "inject-then-run"
    syscalls = frozenset({"getpid"})

    def __init__(self):
        self.log = open(os.environ["INJECT_LOG"], "a", buffering=1)

    def enter(self, call):
        uid = call.inject("getuid")
        buf = call.alloc(64)
        n = call.inject("getcwd", buf, 64)
        cwd = call.read_mem(buf, n - 1) if n > 0 else b"?"
        self.log.write(f"enter {call.tid} uid={uid} cwd={cwd.decode()}\n")
        return CONTINUE_AFTER

    def exit(self, call):
        self.log.write(f"exit {call.tid} {call.retval}\n")


class SkipMkdirWithFailingWrites(Engine):
    """Skips mkdir(2) under $UMVIEW_TEST_FAIL_DIR with EPERM after making the
    C core's register writes fail ($UMVIEW_TEST_FAIL_WRITES: UM_FAIL_* bits),
    as a kernel refusing them would."""

    name = "skip-failing"
    path_syscalls = frozenset({"mkdir", "mkdirat"})

    def __init__(self):
        self.prefixes = (os.environ["UMVIEW_TEST_FAIL_DIR"],)

    def enter(self, call):
        from umview.core import lib

        lib.um_test_fail_writes(int(os.environ["UMVIEW_TEST_FAIL_WRITES"]))
        return Skip.errno(errno.EPERM)


class _NestLogger(Engine):
    """Logs to $NEST_LOG the open/openat paths it sees under $NEST_DIR at
    entry, and the result at exit (the nested views' order oracle)."""

    path_syscalls = frozenset({"open", "openat"})

    def __init__(self):
        self.prefixes = (os.environ["NEST_DIR"],)
        self.log = open(os.environ["NEST_LOG"], "a", buffering=1)

    def enter(self, call):
        self.log.write(f"{self.name} enter {os.fsdecode(call.paths()[0])}\n")
        return CONTINUE_AFTER

    def exit(self, call):
        self.log.write(f"{self.name} exit {'ok' if call.retval >= 0 else 'error'}\n")


class NestInner(_NestLogger):
    """Logs as above, and rewrites an open of $NEST_DIR/from to $NEST_DIR/to."""

    name = "nest-inner"

    def enter(self, call):
        action = super().enter(call)
        if call.paths()[0] == os.fsencode(os.environ["NEST_DIR"]) + b"/from":
            call.set_arg("path", os.fsencode(os.environ["NEST_DIR"]) + b"/to")
        return action


class NestOuter(_NestLogger):
    """Logs as above."""

    name = "nest-outer"


class RefuseHostChanges(Engine):
    """A safety net older than the modules under test (an outer view, with
    the modules in a view nested in it): the calls that would set the host's
    clock or names, or write /proc/sys/kernel, are refused with EHWPOISON
    and their names appended to $UMVIEW_TEST_NET. The modules must serve
    them, so that none ever gets here."""

    name = "refuse-host-changes"
    syscalls = frozenset({"clock_settime", "settimeofday", "adjtimex", "clock_adjtime",
                          "sethostname", "setdomainname"})
    path_syscalls = frozenset({"open", "openat", "openat2"})
    prefixes = ("/proc/sys/kernel",)

    def enter(self, call):
        if call.name in self.path_syscalls:
            flags = call.flags if call.name != "openat2" else int.from_bytes(call.read_mem(call.how, 8), "little")
            if not flags & 3:
                return CONTINUE  # opened for reading
        with open(os.environ["UMVIEW_TEST_NET"], "a") as f:
            f.write(call.name + "\n")
        return Skip(-errno.EHWPOISON)
