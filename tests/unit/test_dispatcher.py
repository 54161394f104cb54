"""The engine pipeline without ptrace: order, actions, errors."""
import errno
import logging

import pytest

from umview.engine import CONTINUE, CONTINUE_AFTER, Call, Engine, Skip, under_any
from umview.monitor import Dispatcher
from umview.syscalls import spec
from umview.syscalls.core_tables import SyscallTable


class Recorder(Engine):
    def __init__(self, name, log, action=CONTINUE, names=("getpid",)):
        self.name = name
        self.log = log
        self.action = action
        self.syscalls = frozenset(names)

    def enter(self, call):
        self.log.append(("enter", self.name))
        if isinstance(self.action, BaseException):
            raise self.action
        return self.action

    def exit(self, call):
        self.log.append(("exit", self.name, call.retval))


@pytest.fixture(scope="module")
def table():
    return SyscallTable()


def make_call(table, name="getpid"):
    return Call(1, "x86_64", table.index[name], name, 39, [0] * 6, 0, 0x7000_0000, spec(name))


def test_entry_walks_newest_first_and_exit_oldest_first(table):
    log = []
    d = Dispatcher(table)
    for n in ("old", "mid", "new"):
        d.add(Recorder(n, log, CONTINUE_AFTER))
    call = make_call(table)
    reply, _, exits = d.enter(call)
    call.retval = 7
    d.exit(call, exits)
    assert [e[:2] for e in log] == [("enter", "new"), ("enter", "mid"), ("enter", "old"),
                                     ("exit", "old"), ("exit", "mid"), ("exit", "new")]


def test_skip_ends_the_walk_and_newer_engines_see_its_result(table):
    log = []
    d = Dispatcher(table)
    d.add(Recorder("old", log, CONTINUE_AFTER))
    d.add(Recorder("skipper", log, Skip(42)))
    d.add(Recorder("new", log, CONTINUE_AFTER))
    call = make_call(table)
    reply, rval, _ = d.enter(call)
    assert rval == 42
    assert log == [("enter", "new"), ("enter", "skipper"), ("exit", "new", 42)]


def test_continue_asks_for_no_exit(table):
    from umview.core import lib

    d = Dispatcher(table)
    d.add(Recorder("a", [], CONTINUE))
    reply, _, exits = d.enter(make_call(table))
    assert reply == lib.UM_REPLY_CONTINUE and exits == []


def test_oserror_in_enter_is_the_calls_errno(table):
    d = Dispatcher(table)
    d.add(Recorder("a", [], OSError(errno.EACCES, "no")))
    _, rval, _ = d.enter(make_call(table))
    assert rval == -errno.EACCES


def test_engine_bug_fails_the_call_with_eio_and_logs(table, caplog):
    d = Dispatcher(table)
    d.add(Recorder("buggy", [], ZeroDivisionError("oops")))
    with caplog.at_level(logging.ERROR, logger="umview"):
        _, rval, _ = d.enter(make_call(table))
    assert rval == -errno.EIO
    assert "buggy" in caplog.text and "ZeroDivisionError" in caplog.text


def test_engines_not_claiming_a_call_are_not_asked(table):
    log = []
    d = Dispatcher(table)
    d.add(Recorder("pid", log, Skip(1), names=("getpid",)))
    d.add(Recorder("uname", log, Skip(2), names=("uname",)))
    _, rval, _ = d.enter(make_call(table, "getpid"))
    assert rval == 1 and log == [("enter", "pid")]


def test_unknown_syscall_name_is_rejected_at_load(table):
    d = Dispatcher(table)
    d.add(Recorder("bad", [], names=("no_such_call",)))
    with pytest.raises(ValueError, match="no_such_call"):
        d.claims()


def test_claiming_a_name_traps_its_i386_variants_as_refused(table):
    from umview.core import lib

    d = Dispatcher(table)
    d.add(Recorder("stat", [], names=("stat",)))
    modes, _ = d.claims()
    assert modes["stat"] == lib.UM_CLAIM_ALL
    assert modes["stat64"] == lib.UM_CLAIM_REFUSE


def test_under_any_matches_whole_components():
    assert under_any(b"/unreal/x", ["/unreal"])
    assert under_any(b"/unreal", ["/unreal/"])
    assert not under_any(b"/unrealistic", ["/unreal"])
    assert under_any(b"/anything", ["/"])


class PathClaimer(Engine):
    def __init__(self, plain=(), layered=(), real=()):
        self.path_syscalls = frozenset({"openat", "stat"})
        self.prefixes, self.layered_prefixes, self.real_prefixes = plain, layered, real


def test_prefix_kinds_merge_towards_the_one_that_sends_more_to_python(table):
    from umview.core import lib

    d = Dispatcher(table)
    d.add(PathClaimer(layered=(b"/",), real=(b"/proc", b"/srv")))
    d.add(PathClaimer(plain=(b"/srv",), layered=(b"/proc",)))
    modes, prefixes = d.claims()
    assert modes["openat"] == lib.UM_CLAIM_PATH
    assert prefixes == {b"/": lib.UM_PREFIX_LAYERED, b"/proc": lib.UM_PREFIX_LAYERED,
                        b"/srv": lib.UM_PREFIX_PLAIN}


def test_an_engine_with_only_layered_prefixes_wants_calls_under_them(table):
    e = PathClaimer(layered=(b"/work",))
    e.name = "layered"
    call = make_call(table, "stat")
    call._paths = [b"/work/f"]
    assert e.wants(call)
    call._paths = [b"/elsewhere"]
    assert not e.wants(call)


def test_notified_call_an_engine_wants_to_see_return_is_redirected_to_ptrace(table):
    """A call that waits as a seccomp notification has no exit stop: an
    engine asking for one (or rewriting it) ends the walk, and the C core
    takes the call again at a ptrace stop, where the walk is made anew."""
    from umview.core import lib

    log = []
    d = Dispatcher(table)
    d.add(Recorder("old", log, Skip(3)))
    d.add(Recorder("new", log, CONTINUE_AFTER))
    call = make_call(table)
    call.notified = True
    assert d.enter(call) == (lib.UM_REPLY_REDIRECT, 0, [])
    assert log == [("enter", "new")]


def test_notified_call_skipped_or_continued_stays_a_notification(table):
    from umview.core import lib

    d = Dispatcher(table)
    d.add(Recorder("old", [], CONTINUE))
    d.add(Recorder("new", [], Skip(-errno.EAFNOSUPPORT)))
    call = make_call(table)
    call.notified = True
    assert d.enter(call)[:2] == (lib.UM_REPLY_SKIP, -errno.EAFNOSUPPORT)
    d.remove(d.engines[-1])
    assert d.enter(call)[0] == lib.UM_REPLY_CONTINUE


def test_notified_call_refuses_what_needs_a_ptrace_stop(table):
    call = make_call(table)
    call.notified = True
    for what in (lambda: call.inject("getpid"), lambda: call.alloc(8)):
        with pytest.raises(RuntimeError, match="seccomp notification"):
            what()
    with pytest.raises(RuntimeError, match="not a notification"):
        make_call(table).complete_with_fd(0)
