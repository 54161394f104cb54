"""The process records (umview.procs), as the monitor keeps them at fork,
exec and exit, against the kernel's rules: threads share their process's
record, a child copies its parent's root, cwd and fd table or shares them
under CLONE_FS and CLONE_FILES, an exec leaves the leader's tid alone in the
process and unshares a shared fd table, and the last thread's exit drops
the process."""
import os
import threading

import pytest

from umview.engine import Call
from umview.procs import CLONE_FILES, CLONE_FS, Processes
from umview.syscalls import spec


@pytest.fixture
def procs():
    p = Processes()
    p.following = True
    return p


def test_threads_share_their_process_and_a_child_copies_it(procs):
    procs.add(100)
    procs.forked(100, 101, True)
    procs.forked(100, 200, False, flags=0)
    assert procs.tgid(101) == 100 and procs.tgid(200) == 200
    parent, child = procs.process(100), procs.process(200)
    assert procs.process(101) is parent and parent.threads == {100, 101}
    assert child.fs is not parent.fs and child.fds is not parent.fds
    # what the parent changes now, the child does not see
    parent.fds[3] = (b"/v", b"/r")
    assert 3 not in child.fds


def test_clone_fs_and_clone_files_share_what_they_name(procs):
    procs.add(100)
    procs.process(100).fs.root = b"/jail"
    procs.process(100).fds[5] = (b"/jail/d", b"/real/d")
    procs.forked(100, 200, False, flags=CLONE_FS)
    procs.forked(100, 300, False, flags=CLONE_FILES)
    p, fs_child, files_child = procs.process(100), procs.process(200), procs.process(300)
    assert fs_child.fs is p.fs and files_child.fs is not p.fs and files_child.fs.root == b"/jail"
    assert files_child.fds is p.fds and fs_child.fds == p.fds and fs_child.fds is not p.fds
    assert p.fs.users == {p, fs_child}


def test_a_thread_exec_leaves_the_leader_tid_alone_and_unshares_the_fd_table(procs):
    procs.add(100)
    procs.forked(100, 101, True)
    procs.forked(100, 102, True)
    procs.forked(100, 200, False, flags=CLONE_FILES)
    procs.process(100).fds[4] = (b"/v", b"/r")
    procs.thread(102).exe_pending = b"/bin/prog"
    procs.execed(100, 102)  # thread 102 execed: it is now 100
    p = procs.process(100)
    assert p.threads == {100} and procs.known(101) is None and procs.known(102) is None
    assert p.exe == b"/bin/prog" and procs.thread(100).exe_pending is None
    assert p.fds == {4: (b"/v", b"/r")} and p.fds is not procs.process(200).fds


def test_the_last_threads_exit_drops_the_process(procs):
    procs.add(100)
    procs.forked(100, 101, True)
    procs.forked(100, 200, False, flags=CLONE_FS)
    fs = procs.process(100).fs
    procs.exited(100)
    assert procs.tgid(101) == 100 and procs.process(101) in fs.users
    procs.exited(101)
    assert procs.known(101) is None and 100 not in procs.groups and fs.users == {procs.process(200)}


def test_a_thread_no_event_named_is_found_in_proc_and_kept_only_if_its_exit_will_be_seen(procs):
    seen = {}
    ready, done = threading.Event(), threading.Event()

    def run():
        seen["tid"] = threading.get_native_id()
        ready.set()
        done.wait(10)

    t = threading.Thread(target=run)
    t.start()
    try:
        ready.wait(10)
        assert procs.tgid(seen["tid"]) == os.getpid()
        # not a tracee of this process (the monitor's, in a view): its exit
        # would never be reported, so no record is kept
        assert procs.known(seen["tid"]) is None and procs.known(os.getpid()) is None
        # a record the monitor keeps (a joining thread's) is one for its process
        assert procs.record(seen["tid"]).process is procs.record(os.getpid()).process
    finally:
        done.set()
        t.join()
    with pytest.raises(OSError):
        procs.tgid(2 ** 22 + 1)  # no such thread (above any pid_max)
    assert procs.tgid_or_none(2 ** 22 + 1) is None


def test_an_open_a_mount_rewrote_names_its_fd_by_the_view_path(procs):
    """What the monitor does at the exit of an open the cwd tracker marked
    (Call.fd_path): the fd is named by the view path only if an engine
    rewrote the path (the exit stop is there for that rewrite anyway)."""
    fd = os.open("/etc", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for kernel_got, recorded in ((b"/etc", False), (b"/real/etc", True)):
            call = Call(os.getpid(), "x86_64", 0, "openat", 257, [0, 0x1000, 0, 0, 0, 0], 0, 0x7000_0000,
                        spec("openat"))
            call.known_string(1, kernel_got)
            call.fd_path = (b"/etc", b"/view/etc")
            call.retval = fd
            procs.opened(call)
            fds = procs.process(os.getpid()).fds
            assert (fds.get(fd) == (b"/view/etc", b"/etc")) is recorded, fds
    finally:
        os.close(fd)


def test_one_resolver_of_thread_groups():
    """Only umview/procs.py reads a thread's Tgid: every other part asks
    it (there were four resolvers, each with its own cache or none)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    readers = []
    for top in ("umview", "modules"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                path = os.path.join(dirpath, f)
                if f.endswith(".py") and '"Tgid"' in open(path).read():
                    readers.append(os.path.relpath(path, root))
    assert readers == ["umview/procs.py"]
