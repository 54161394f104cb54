"""The fs module's pure parts: telling an image's type, the servers' command
lines, the view's mount table, options, and the user-namespace hint. (Real
mounts: tests/integration/test_fs_*.py.)"""
import os

import pytest

from umview.modules import fs as fs_module
from umview.modules.fs import Fs, detect_type, server_argv, view_table
from umview.modules.fs.helper import userns_hint


@pytest.fixture(autouse=True)
def libfuse3_servers(monkeypatch):
    """The command lines below are a libfuse 3 server's, whatever this
    machine's servers are linked with (see the nonempty test)."""
    monkeypatch.setattr(fs_module, "_libfuse2", lambda server: False)


def test_a_libfuse2_server_may_mount_over_a_directory_with_files(monkeypatch):
    # libfuse 2 refuses a mount point that is not empty; mount(2) does not
    monkeypatch.setattr(fs_module, "_libfuse2", lambda server: server == "fuse2fs")
    assert server_argv("fuse2fs", "/i.img", "/mnt", [], False)[-1] == "nonempty,default_permissions,fakeroot"
    assert server_argv("squashfuse", "/i.img", "/mnt", [], False) == ["squashfuse", "/i.img", "/mnt", "-f"]


def _image(tmp_path, name, at, data, size=40 * 1024):
    buf = bytearray(size)
    buf[at:at + len(data)] = data
    p = tmp_path / name
    p.write_bytes(bytes(buf))
    return str(p)


@pytest.mark.parametrize("at,data,expected", [
    (1080, b"\x53\xef", "ext4"),
    (0, b"hsqs", "squashfs"),
    (32769, b"CD001", "iso9660"),
    (0, b"PK\x03\x04", "zip"),
    (257, b"ustar", "archive"),
    (0, b"\x1f\x8b", "archive"),
    (0, b"\xfd7zXZ\x00", "archive"),
])
def test_detect_type_reads_the_magic_of_each_format(tmp_path, at, data, expected):
    assert detect_type(_image(tmp_path, "img", at, data)) == expected


def test_detect_type_of_a_fat_boot_sector(tmp_path):
    p = _image(tmp_path, "fat", 510, b"\x55\xaa")
    with open(p, "r+b") as f:
        f.seek(82)
        f.write(b"FAT32   ")
    assert detect_type(p) == "vfat"


def test_detect_type_of_unknown_or_missing_is_none(tmp_path):
    assert detect_type(_image(tmp_path, "zeros", 0, b"")) is None
    assert detect_type(str(tmp_path / "missing")) is None


def test_server_argv_runs_in_the_foreground_with_the_options():
    assert server_argv("squashfuse", "/i.img", "/mnt", ["offset=512"], False) == \
        ["squashfuse", "/i.img", "/mnt", "-f", "-o", "offset=512"]
    assert server_argv("squashfuse", "/i.img", "/mnt", ["rw", "defaults"], False) == \
        ["squashfuse", "/i.img", "/mnt", "-f"]


def test_server_argv_read_only_in_each_servers_words():
    assert server_argv("squashfuse", "/i", "/m", [], True) == ["squashfuse", "/i", "/m", "-f", "-o", "ro"]
    assert server_argv("fuse-zip", "/z", "/m", ["ro"], True) == ["fuse-zip", "-r", "/z", "/m", "-f", "-o", "ro"]
    assert server_argv("archivemount", "/a", "/m", [], True)[-1] == "ro,readonly"
    # fusefat writes only when asked
    assert server_argv("fusefat", "/f", "/m", [], False)[-1] == "rw+"
    assert server_argv("fusefat", "/f", "/m", [], True)[-1] == "ro"


def test_server_argv_fuseiso_keeps_no_mtab_in_the_home():
    assert server_argv("fuseiso", "/c.iso", "/m", [], True) == ["fuseiso", "-n", "/c.iso", "/m", "-f", "-o", "ro"]


def test_server_argv_fuse2fs_leaves_permissions_to_the_kernel():
    # fuse2fs 1.47.0's own check refuses open(O_CREAT|O_RDWR, 0444) of a new file
    assert server_argv("fuse2fs", "/i", "/m", [], False) == \
        ["fuse2fs", "/i", "/m", "-f", "-o", "default_permissions,fakeroot"]
    assert server_argv("fuse2fs", "/i", "/m", ["fakeroot", "ro"], True) == \
        ["fuse2fs", "/i", "/m", "-f", "-o", "fakeroot,default_permissions,ro"]


MOUNTINFO = (b"22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
             b"30 22 0:5 / /tmp rw shared:2 - tmpfs tmpfs rw\n")
HELPER_MOUNTINFO = (b"40 39 254:0 / / rw,relatime master:1 - ext4 /dev/vda rw\n"
                    b"41 40 0:5 / /tmp rw master:2 - tmpfs tmpfs rw\n"
                    b"65 41 0:39 / /tmp/my\\040mnt rw,nosuid,nodev - fuse.ext4 /tmp/i.img rw,user_id=0\n"
                    b"66 65 0:40 / /tmp/my\\040mnt/sub rw - tmpfs none rw,size=1024k\n")


def test_view_table_adds_the_views_mounts_under_their_parents():
    out = view_table(MOUNTINFO, HELPER_MOUNTINFO,
                     [(b"/tmp/my mnt", b"/tmp/my mnt"), (b"/tmp/my mnt/sub", b"/tmp/my mnt/sub")], True)
    lines = out.splitlines()
    assert lines[:2] == MOUNTINFO.splitlines()
    # parent: the view's mount it lies on; no propagation fields; escaped path
    assert lines[2] == b"65 30 0:39 / /tmp/my\\040mnt rw,nosuid,nodev - fuse.ext4 /tmp/i.img rw,user_id=0"
    assert lines[3] == b"66 65 0:40 / /tmp/my\\040mnt/sub rw - tmpfs none rw,size=1024k"


def test_view_table_shows_the_view_path_of_a_mount_made_elsewhere_in_the_helper():
    helper = b"65 41 0:39 / /tmp/layer/mnt rw - fuse.ext4 /i rw\n"
    out = view_table(MOUNTINFO, helper, [(b"/mnt", b"/tmp/layer/mnt")], True)
    assert out.splitlines()[-1] == b"65 22 0:39 / /mnt rw - fuse.ext4 /i rw"


def test_view_table_in_mounts_format():
    mounts = b"/dev/vda / ext4 rw 0 0\n"
    helper = b"/dev/vda / ext4 rw 0 0\nnone /tmp/t tmpfs rw,size=1024k 0 0\n"
    out = view_table(mounts, helper, [(b"/tmp/t", b"/tmp/t")], False)
    assert out == mounts + b"none /tmp/t tmpfs rw,size=1024k 0 0\n"


def test_view_table_stacked_mounts_each_take_their_own_line():
    helper = b"65 41 0:39 / /m rw - fuse.ext4 /a rw\n66 65 0:40 / /m rw - tmpfs none rw\n"
    out = view_table(MOUNTINFO, helper, [(b"/m", b"/m"), (b"/m", b"/m")], True).splitlines()
    assert out[-2].startswith(b"65 22 ") and out[-1].startswith(b"66 65 ")


def test_options_mount_at_start_with_type_and_mount_options(tmp_path):
    fs = Fs({"mount": f"{tmp_path}/a.img:/mnt:ext4;{tmp_path}/b.iso:/media", "ro": True, "fakeroot": True})
    assert fs.initial == [(os.fsencode(f"{tmp_path}/a.img"), b"/mnt", "ext4"),
                          (os.fsencode(f"{tmp_path}/b.iso"), b"/media", None)]
    assert fs.initial_options == ["ro", "fakeroot"]


@pytest.mark.parametrize("options,message", [
    ({"mount": "a.img:/mnt:btrfs"}, "unknown type 'btrfs'"),
    ({"mount": "a.img"}, "expected SOURCE:TARGET"),
    ({"mount": True}, "mount=SOURCE:TARGET"),
    ({"ro": True}, "without mount="),
])
def test_bad_options_are_refused_with_what_to_write(options, message):
    with pytest.raises(ValueError, match=message):
        Fs(options)


def test_known_types_include_view_os_aliases_and_any_fuse_server():
    fs = Fs({})
    for t in ("ext2", "ext4", "squashfs", "iso9660", "vfat", "zip", "tar.gz", "tmpfs", "umfuseext2",
              "umfuseiso9660", "umfusefat", "fuse", "fuse.bindfs", "auto"):
        assert fs._known(t), t
    assert not fs._known("btrfs")
    fs.add_fsalias("img", "ext4")
    assert fs.user_aliases == {"img": "ext4"}
    fs.del_fsalias("img")
    assert fs.user_aliases == {}


def test_userns_hint_names_the_cause_and_the_fix(tmp_path):
    (tmp_path / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "sys" / "user").mkdir(parents=True)
    assert userns_hint(str(tmp_path)) == ""
    (tmp_path / "sys/kernel/apparmor_restrict_unprivileged_userns").write_text("1\n")
    hint = userns_hint(str(tmp_path))
    assert "AppArmor" in hint and "sysctl kernel.apparmor_restrict_unprivileged_userns=0" in hint
    (tmp_path / "sys/kernel/apparmor_restrict_unprivileged_userns").write_text("0\n")
    (tmp_path / "sys/kernel/unprivileged_userns_clone").write_text("0\n")
    assert "kernel.unprivileged_userns_clone=1" in userns_hint(str(tmp_path))
    (tmp_path / "sys/kernel/unprivileged_userns_clone").write_text("1\n")
    (tmp_path / "sys/user/max_user_namespaces").write_text("0\n")
    assert "user.max_user_namespaces" in userns_hint(str(tmp_path))


def test_a_normal_users_server_shows_every_file_as_the_users():
    """In the helper's user namespace root's ids are not mapped, and the
    kernel refuses to write a file whose owner it cannot map: the files are
    the user's (libfuse's uid=, gid=), and fuse2fs runs as the user would
    run it on an image of their own (-o fakeroot, no kernel checks)."""
    assert server_argv("fuse2fs", "/i.img", "/mnt", [], False, (1000, 100))[-1] == "uid=1000,gid=100,fakeroot"
    assert server_argv("fusefat", "/f", "/m", [], False, (1000, 100))[-1] == "uid=1000,gid=100,rw+"
    assert server_argv("fusefat", "/f", "/m", ["uid=7"], False, (1000, 100))[-1] == "uid=7,rw+"  # the user's own
