"""The engine pipeline without ptrace: order, actions, errors."""
import errno
import logging

import pytest

from umview.engine import CONTINUE, CONTINUE_AFTER, Call, Engine, Skip, under_any
from umview.monitor import Dispatcher
from umview.syscalls import spec
from umview.ctables import SyscallTable


@pytest.fixture(autouse=True)
def records():
    """The process records (umview.procs) of the made-up threads 100 and 1,
    which the tests' views join; none left after."""
    from umview.procs import PROCESSES

    PROCESSES.clear()
    PROCESSES.add(100)
    PROCESSES.add(1)
    yield PROCESSES
    PROCESSES.clear()


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


# --- views (umview/views.py): a stack per view, one union of claims ---

def make_call_of(table, tid, name="getpid"):
    return Call(tid, "x86_64", table.index[name], name, 39, [0] * 6, 0, 0x7000_0000, spec(name))


class PerView(Recorder):
    per_view = "probe"


def nested(table, log):
    """A root view with engines a (older) and b, and a view nested in it with c."""
    d = Dispatcher(table)
    d.add(Recorder("a", log, CONTINUE_AFTER))
    d.add(Recorder("b", log, CONTINUE_AFTER))
    inner = d.new_view(d.root)
    d.add(Recorder("c", log, CONTINUE_AFTER), inner)
    d.join(inner, [100])
    return d, inner


def test_a_nested_views_call_enters_its_engines_first_and_leaves_them_last(table):
    log = []
    d, _ = nested(table, log)
    call = make_call_of(table, 100)
    _, _, exits = d.enter(call)
    call.retval = 0
    d.exit(call, exits)
    assert [e[:2] for e in log] == [("enter", "c"), ("enter", "b"), ("enter", "a"),
                                     ("exit", "a"), ("exit", "b"), ("exit", "c")]


def test_an_outer_views_call_never_walks_the_inner_engines(table):
    log = []
    d, _ = nested(table, log)
    d.enter(make_call_of(table, 200))
    assert [e[:2] for e in log] == [("enter", "b"), ("enter", "a")]


def test_a_per_view_engine_of_a_nested_view_replaces_the_outer_one(table):
    log = []
    d = Dispatcher(table)
    d.add(PerView("outer-probe", log))
    d.add(Recorder("a", log))
    inner = d.new_view(d.root)
    d.add(PerView("inner-probe", log), inner)
    assert [e.name for e in inner.engines] == ["a", "inner-probe"]
    assert [e.name for e in d.root.engines] == ["outer-probe", "a"]


class ForkWatcher(Engine):
    def __init__(self, name, log):
        self.name, self.log = name, log

    def on_fork(self, parent, child, thread):
        self.log.append((self.name, parent, child))

    def on_exit(self, tid):
        self.log.append((self.name, "exit", tid))


def test_children_inherit_the_view_and_events_reach_its_stack_only(table):
    """The monitor's order: the records have each event first (a child is
    in its parent's view), then the engines of the thread's view."""
    log, closed = [], []
    d = Dispatcher(table)
    procs = d.procs
    d.add(ForkWatcher("outer", log))
    inner = d.new_view(d.root)
    d.add(ForkWatcher("inner", log), inner)
    d.on_empty = lambda v: (closed.append(v.id), d.drop_view(v))
    d.join(inner, [100])
    for parent, child in ((100, 101), (1, 2)):  # 1: an outer process
        procs.forked(parent, child, False, flags=0)
        d.on_fork(parent, child, False)
    assert d.view_of(101) is inner and d.view_of(2) is d.root
    assert log == [("outer", 100, 101), ("inner", 100, 101), ("outer", 1, 2)]
    d.on_exit_status(100, 0)
    procs.exited(100)
    assert closed == [] and inner.tids == {101}
    d.on_exit(101)
    d.on_exit_status(101, 0)
    procs.exited(101)
    assert closed == [inner.id] and d.views == [d.root]
    assert set(procs.threads) == {1, 2} and all(t.view is None for t in procs.threads.values())
    assert [e.name for e in d.engines] == ["outer"]


def test_a_view_with_a_view_nested_in_it_stays_open_until_that_one_closes(table):
    d = Dispatcher(table)
    v1 = d.new_view(d.root)
    d.join(v1, [100])
    v2 = d.new_view(v1)
    d.join(v2, [100])  # the only process of v1 asks for a view in it
    assert d.views == [d.root, v1, v2]
    d.on_exit_status(100, 0)
    assert d.views == [d.root]


def test_an_inner_real_prefix_never_hides_an_outer_layered_one(table):
    from umview.core import lib

    d = Dispatcher(table)
    d.add(PathClaimer(layered=(b"/srv",)))
    inner = d.new_view(d.root)
    d.add(PathClaimer(layered=(b"/",), real=(b"/srv/keep", b"/proc")), inner)
    _, prefixes = d.claims()
    # /srv/keep left out: the outer view's processes must reach its layered /srv there
    assert prefixes == {b"/": lib.UM_PREFIX_LAYERED, b"/srv": lib.UM_PREFIX_LAYERED, b"/proc": lib.UM_PREFIX_REAL}
    # in one view the engines' kinds merge as before
    d2 = Dispatcher(table)
    d2.add(PathClaimer(layered=(b"/srv",)))
    d2.add(PathClaimer(layered=(b"/",), real=(b"/srv/keep", b"/proc")))
    assert d2.claims()[1][b"/srv/keep"] == lib.UM_PREFIX_REAL


def test_a_variant_is_refused_for_the_view_claiming_it_only(table):
    from umview.core import lib

    d = Dispatcher(table)
    inner = d.new_view(d.root)
    d.add(Recorder("stat", [], names=("stat",)), inner)
    d.join(inner, [100])
    modes, _ = d.claims()
    assert modes["stat64"] == lib.UM_CLAIM_ALL  # not REFUSE: the outer view keeps it
    call = Call(100, "i386", table.index["stat64"], "stat64", 195, [0] * 6, 0, 0x7000_0000, spec("stat64"))
    assert d.enter(call)[:2] == (lib.UM_REPLY_SKIP, -errno.ENOSYS)
    call = Call(7, "i386", table.index["stat64"], "stat64", 195, [0] * 6, 0, 0x7000_0000, spec("stat64"))
    assert d.enter(call)[:2] == (lib.UM_REPLY_CONTINUE, 0)
