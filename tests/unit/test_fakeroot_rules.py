"""fakeroot's pure parts: the kernel's rules for changing ids, what a stat
shows of a file, and the records kept in a layer or a db file."""
import errno
import os
import stat

import pytest

from umview.modules.fakeroot import creds as C
from umview.modules.fakeroot import status_text
from umview.modules.fakeroot.records import LAYER_FILE, Records, shown

U = C.UNCHANGED


def test_root_setuid_sets_every_uid_and_loses_the_privilege():
    c = C.set_id(C.Creds.of(0, 0), "uid", 1000)
    assert c.ids("uid") == (1000, 1000, 1000, 1000)
    with pytest.raises(OSError) as e:
        C.set_id(c, "uid", 0)
    assert e.value.errno == errno.EPERM


def test_seteuid_away_from_root_and_back_through_the_saved_uid():
    c = C.set_res(C.Creds.of(0, 0), "uid", U, 1000, U)  # glibc's seteuid(1000)
    assert c.ids("uid") == (0, 1000, 0, 1000)
    assert not c.privileged
    c = C.set_id(c, "uid", 0)  # the real and saved uid are 0: allowed
    assert c.ids("uid")[:2] == (0, 0) and c.privileged


def test_setreuid_sets_the_saved_uid_to_a_new_effective_one():
    assert C.set_re(C.Creds.of(0, 0), "uid", 5, 6).ids("uid") == (5, 6, 6, 6)
    assert C.set_re(C.Creds.of(0, 0), "uid", U, 6).ids("uid") == (0, 6, 6, 6)  # not the real uid
    assert C.set_re(C.Creds.of(0, 0), "uid", U, 0).ids("uid") == (0, 0, 0, 0)


def test_unprivileged_setresuid_only_among_its_own_ids():
    c = C.set_res(C.Creds.of(0, 0), "uid", 1, 2, 3)
    assert C.set_res(c, "uid", 3, 1, 2).ids("uid")[:3] == (3, 1, 2)
    with pytest.raises(OSError):
        C.set_res(c, "uid", 4, U, U)


def test_setgid_needs_root_euid_for_a_foreign_gid():
    c = C.set_id(C.Creds.of(0, 0), "gid", 50)
    assert c.ids("gid") == (50, 50, 50, 50) and c.privileged
    c = C.set_id(c, "uid", 7)
    with pytest.raises(OSError):
        C.set_id(c, "gid", 51)


def test_setfsuid_returns_the_former_one_whether_or_not_it_changed():
    c, former = C.set_fs(C.Creds.of(0, 0), "uid", 9)
    assert former == 0 and c.fsuid == 9
    c = C.set_id(c, "uid", 3)
    c2, former = C.set_fs(c, "uid", 4)
    assert former == 3 and c2 == c


def test_setgroups_needs_privilege_and_a_bounded_list():
    c = C.set_groups(C.Creds.of(0, 0), [1, 2])
    assert c.groups == (1, 2)
    with pytest.raises(OSError) as e:
        C.set_groups(C.set_id(c, "uid", 1), [3])
    assert e.value.errno == errno.EPERM
    with pytest.raises(OSError) as e:
        C.set_groups(c, range(C.NGROUPS_MAX + 1))
    assert e.value.errno == errno.EINVAL


def test_minus_one_is_not_an_id():
    with pytest.raises(OSError) as e:
        C.set_id(C.Creds.of(0, 0), "uid", U)
    assert e.value.errno == errno.EINVAL


def test_the_users_own_files_show_as_the_views_and_others_as_they_are():
    r = Records()
    real, view = (1000, 1000), (0, 0)
    assert shown(r, real, view, (1, 2, 0o100644, 1000, 1000, 0)) == (0o100644, 0, 0, 0)
    assert shown(r, real, view, (1, 3, 0o100644, 5, 1000, 0)) == (0o100644, 5, 0, 0)


def test_a_record_shows_owner_mode_and_device():
    r = Records()
    r.set((1, 2), uid=1, gid=2, mode=0o4755)
    r.set((1, 3), kind=stat.S_IFCHR, rdev=0x103)
    assert shown(r, (9, 9), (0, 0), (1, 2, 0o100600, 9, 9, 0)) == (0o104755, 1, 2, 0)
    assert shown(r, (9, 9), (0, 0), (1, 3, 0o100644, 9, 9, 0)) == (0o020644, 0, 0, 0x103)


def test_records_in_a_layer_follow_a_rename_and_come_back_by_path(tmp_path):
    upper = os.fsencode(tmp_path)
    (tmp_path / "a").write_text("x")
    st = os.lstat(tmp_path / "a")
    r = Records()
    r.set((st.st_dev, st.st_ino), uid=1, gid=2)
    r.set((st.st_dev, st.st_ino + 10 ** 9), uid=3)  # a file no longer there: left out
    os.rename(tmp_path / "a", tmp_path / "b")
    r.save_layer(upper)
    assert os.path.exists(os.path.join(upper, LAYER_FILE))
    back = Records()
    back.load_layer(upper)
    assert back.by_key == {(st.st_dev, st.st_ino): {"uid": 1, "gid": 2}}


def test_db_file_round_trip_and_a_bad_one_says_what_to_do(tmp_path):
    r = Records()
    r.set((5, 6), mode=0o700)
    r.save_db(str(tmp_path / "db.json"))
    back = Records()
    back.load_db(str(tmp_path / "db.json"))
    assert back.by_key == {(5, 6): {"mode": 0o700}}
    (tmp_path / "bad").write_text("{")
    with pytest.raises(ValueError, match="db="):
        Records().load_db(str(tmp_path / "bad"))


def test_status_shows_the_fake_ids():
    text = b"Name:\tsh\nUid:\t1000\t1000\t1000\t1000\nGid:\t5\t5\t5\t5\nGroups:\t5 27 \nVmRSS:\t1 kB\n"
    out = status_text(text, C.Creds.of(0, 0))
    assert out == b"Name:\tsh\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t0 \nVmRSS:\t1 kB\n"
