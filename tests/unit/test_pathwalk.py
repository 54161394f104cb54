"""Symlink-aware walking in a view, on a fake file system (no ptrace)."""
import errno
import os
import stat
from types import SimpleNamespace

import pytest

from umview.pathwalk import walk
from umview.syscalls import follows_last

DIR, FILE, LINK = stat.S_IFDIR | 0o755, stat.S_IFREG | 0o644, stat.S_IFLNK | 0o777


class FakeFS:
    def __init__(self, entries):
        self.entries = entries  # real path -> mode or (LINK, target)

    def lstat(self, p):
        e = self.entries.get(p)
        if e is None:
            raise OSError(errno.ENOENT, "no")
        return SimpleNamespace(st_mode=e[0] if isinstance(e, tuple) else e)

    def readlink(self, p):
        return self.entries[p][1]


def unreal(vpath):
    if vpath == b"/unreal" or vpath.startswith(b"/unreal/"):
        return vpath[len(b"/unreal"):] or b"/"
    return vpath


FS = FakeFS({
    b"/": DIR, b"/etc": DIR, b"/etc/hostname": FILE,
    b"/tmp": DIR, b"/tmp/into": (LINK, b"/unreal/etc"), b"/tmp/rel": (LINK, b"../etc"),
    b"/etc/abs": (LINK, b"/etc/hostname"), b"/tmp/loop": (LINK, b"/tmp/loop"),
    b"/tmp/file": FILE,
})


def w(path, follow=True):
    return walk(path, unreal, follow, lstat=FS.lstat, readlink=FS.readlink)[0]


def test_walk_says_whether_it_went_through_a_mount():
    assert walk(b"/tmp/into/hostname", unreal, lstat=FS.lstat, readlink=FS.readlink)[1]
    assert not walk(b"/tmp/rel/hostname", unreal, lstat=FS.lstat, readlink=FS.readlink)[1]


def test_symlink_into_a_mount_is_followed_in_the_view():
    assert w(b"/tmp/into/hostname") == b"/unreal/etc/hostname"


def test_relative_symlink_and_dotdot():
    assert w(b"/tmp/rel/hostname") == b"/etc/hostname"
    assert w(b"/tmp/../etc/./hostname") == b"/etc/hostname"


def test_last_component_kept_when_not_followed():
    assert w(b"/unreal/etc/abs", follow=False) == b"/unreal/etc/abs"
    assert w(b"/unreal/etc/abs") == b"/etc/hostname"


def test_trailing_slash_follows():
    assert w(b"/tmp/into/", follow=False) == b"/unreal/etc/"


def test_loop_gives_eloop():
    with pytest.raises(OSError) as e:
        w(b"/tmp/loop")
    assert e.value.errno == errno.ELOOP


def test_missing_or_not_a_directory_left_to_the_kernel():
    assert w(b"/tmp/nope/../etc") == b"/tmp/nope/../etc"
    assert w(b"/tmp/file/x") == b"/tmp/file/x"


def test_follows_last_rules():
    assert follows_last(None, [0] * 6)
    assert not follows_last(("always",), [0] * 6)
    assert not follows_last(("if_set", 3, 0x100), [0, 0, 0, 0x100, 0, 0])
    assert follows_last(("unless_set", 4, 0x400), [0, 0, 0, 0, 0x400, 0])
    assert not follows_last(("oflags", 1), [0, 0o100 | 0o200, 0, 0, 0, 0])
    assert not follows_last(("oflags", 1), [0, 0o400000, 0, 0, 0, 0])


def test_walk_shows_realize_the_whole_path_ahead_before_its_prefixes():
    seen = []

    def realize(vpath):
        seen.append(vpath)
        return unreal(vpath)

    assert walk(b"/tmp/into/hostname", realize, lstat=FS.lstat, readlink=FS.readlink)[0] == \
        b"/unreal/etc/hostname"
    # the path as named, then its prefixes; after the symlink, its target
    # with the rest, then the target's prefixes
    assert seen == [b"/tmp/into/hostname", b"/tmp", b"/tmp/into",
                    b"/unreal/etc/hostname", b"/unreal", b"/unreal/etc", b"/unreal/etc/hostname"]


def test_plain_path_tells_a_path_with_a_symlink_on_its_way(tmp_path):
    from umview.pathwalk import plain_path

    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "f").write_text("x")
    (tmp_path / "link").symlink_to("d")
    (tmp_path / "d" / "last").symlink_to("e")
    base = bytes(tmp_path)
    assert plain_path(base + b"/d/e/f", True) is True
    assert plain_path(base + b"/link/e/f", False) is False  # a symlink on the way
    assert plain_path(base + b"/d/last", False) is True     # the link itself (lstat)
    assert plain_path(base + b"/d/last", True) is False     # followed at the end
    assert plain_path(base + b"/d/e/new", True) is None     # missing: the parent decides


def test_a_last_dot_or_dotdot_is_kept_after_the_directory_it_follows(tmp_path):
    from umview.pathwalk import dotted, last_dot

    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to("d")
    base = os.fsencode(tmp_path)
    assert walk(base + b"/link/sub/..", lambda p: p, last_dot=True)[0] == base + b"/d/sub/.."
    assert walk(base + b"/link/./", lambda p: p, last_dot=True)[0] == base + b"/d/./"
    assert walk(base + b"/link/sub/..", lambda p: p)[0] == base + b"/d"
    assert dotted(b"a/./b") and dotted(b"..") and not dotted(b"a.b/.c/")
    assert last_dot(b"a/b/..//") and not last_dot(b"a/.b") and not last_dot(b"/")
