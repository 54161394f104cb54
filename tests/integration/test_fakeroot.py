"""umview -0 (the fakeroot module): a fake root user, as nobody and as root.

Differential: what fails natively for an unprivileged user (chown to root,
install -o root, mknod of a device) is shown failing first, so that a test
cannot pass by doing nothing; in the view it succeeds, stat shows what was
set, and the real files keep their real owners."""
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import NOBODY, as_user, need, need_user, umview_for
from test_abis import progs  # noqa: F401 - the fixture: abicalls built for i386 and x32

USERS = ["root", "nobody"]
PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@pytest.fixture
def work():
    """A directory outside /tmp (a sandbox has its own /tmp) that nobody owns."""
    d = tempfile.mkdtemp(prefix="umview-fakeroot-test-", dir="/var/tmp")
    os.chmod(d, 0o755)
    os.chown(d, NOBODY, NOBODY)
    yield d
    shutil.rmtree(d)


def sh(user, script, cwd, *opts, timeout=120):
    """Run script with sh as user, in a fake-root view with opts (None: natively)."""
    if opts == (None,):
        argv = as_user(user, ["sh", "-c", script])
    else:
        argv = umview_for(user, *opts, "--", "sh", "-c", script)
    return subprocess.run(argv, cwd=cwd, capture_output=True, timeout=timeout, env={**os.environ, "LC_ALL": "C"})


def make_file(d, name, uid=NOBODY, mode=0o644):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write("data\n")
    os.chmod(path, mode)
    os.chown(path, uid, uid)
    return path


def make_deb(d, name):
    """d/NAME.deb, nobody's: package NAME, one file /usr/share/NAME/hello of root's."""
    pkg = os.path.join(d, f"{name}-pkg")
    os.makedirs(os.path.join(pkg, "DEBIAN"))
    os.makedirs(os.path.join(pkg, "usr", "share", name))
    with open(os.path.join(pkg, "DEBIAN", "control"), "w") as f:
        f.write(f"Package: {name}\nVersion: 1.0\nArchitecture: all\n"
                "Maintainer: umview tests <tests@example.org>\nDescription: a test package\n")
    make_file(os.path.join(pkg, "usr", "share", name), "hello", uid=0)
    deb = os.path.join(d, f"{name}.deb")
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", pkg, deb], check=True, capture_output=True)
    os.chown(deb, NOBODY, NOBODY)
    return deb


def owners_tar(d):
    """owners.tar: dir owned by bin (2), dir/file by daemon (1), made natively by root."""
    src = tempfile.mkdtemp(dir=d)
    os.mkdir(os.path.join(src, "dir"))
    make_file(os.path.join(src, "dir"), "file", uid=1)
    os.chown(os.path.join(src, "dir"), 2, 2)
    tar = os.path.join(d, "owners.tar")
    subprocess.run(["tar", "-C", src, "-cf", tar, "dir"], check=True)
    shutil.rmtree(src)
    os.chown(tar, NOBODY, NOBODY)
    return tar


@pytest.mark.parametrize("user", USERS)
def test_fake_root_chown_succeeds_stat_shows_it_and_tar_keeps_the_archives_owners(work, user):
    need_user(user)
    need("tar")
    f = make_file(work, "f")
    owners_tar(work)
    if user == "nobody":
        native = sh(user, "id -u; chown 0:0 f; stat -c %u f", work, None)
        assert b"Operation not permitted" in native.stderr
        assert native.stdout == b"65534\n65534\n"
        assert os.stat(f).st_uid == NOBODY
    r = sh(user, "id -u; chown 0:0 f; stat -c %u f; tar xf owners.tar; stat -c %U dir/file; stat -c %U dir",
           work, "-0")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"0\n0\ndaemon\nbin\n"
    if user == "nobody":
        # nothing real changed hands: the files are nobody's
        for p in (f, os.path.join(work, "dir"), os.path.join(work, "dir", "file")):
            assert os.stat(p).st_uid == NOBODY, p
    else:
        assert os.stat(f).st_uid == 0  # real root's chown is real
        assert os.stat(os.path.join(work, "dir", "file")).st_uid == 1


@pytest.mark.parametrize("user", USERS)
def test_install_o_root_m_4755_works_and_the_real_user_keeps_the_file(work, user):
    need_user(user)
    make_file(work, "src", mode=0o755)
    script = "install -o root -g root -m 4755 src dst && stat -c '%U %G %a' dst"
    if user == "nobody":
        native = sh(user, script, work, None)
        assert native.returncode != 0 and b"Operation not permitted" in native.stderr
        if os.path.exists(os.path.join(work, "dst")):
            os.unlink(os.path.join(work, "dst"))
    r = sh(user, script + " && cat dst", work, "-0")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"root root 4755\ndata\n"
    st = os.stat(os.path.join(work, "dst"))
    assert st.st_uid == (NOBODY if user == "nobody" else 0)
    assert st.st_mode & 0o600 == 0o600


def test_chmod_000_shows_000_and_leaves_the_file_readable_by_its_user(work):
    need_user("nobody")
    f = make_file(work, "f")
    make_file(work, "g")  # nobody's, but 0644 really: the kernel lets its owner chmod it
    os.mkdir(os.path.join(work, "d"))
    os.chown(os.path.join(work, "d"), NOBODY, NOBODY)
    r = sh("nobody", "chmod 000 f && chmod 4755 g && chmod 0 d && stat -c %a f g d && cat f && ls d", work, "-0")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"0\n4755\n0\ndata\n"
    assert os.stat(f).st_mode & 0o777 == 0o600
    assert os.stat(os.path.join(work, "d")).st_mode & 0o777 == 0o700


def test_mknod_of_a_device_makes_an_empty_file_that_stat_shows_as_the_device(work):
    need_user("nobody")
    native = sh("nobody", "mknod null c 1 3", work, None)
    assert native.returncode != 0 and b"Operation not permitted" in native.stderr
    r = sh("nobody", "mknod null c 1 3 && mknod sda b 8 0 && stat -c '%F %t %T %U' null sda", work, "-0")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"character special file 1 3 root\nblock special file 8 0 root\n"
    st = os.stat(os.path.join(work, "null"))
    assert st.st_size == 0 and st.st_mode & 0o170000 == 0o100000 and st.st_uid == NOBODY


def test_errors_other_than_ownership_stay_the_kernels(work):
    need_user("nobody")
    r = sh("nobody", "chown 0:0 missing; chmod 600 missing; mknod missing/x c 1 3; stat -c %u missing", work, "-0")
    assert r.stderr.count(b"No such file or directory") == 4, r.stderr
    os.chmod(work, 0o555)  # not writable by its owner: mknod's EACCES
    r = sh("nobody", "mknod x c 1 3", work, "-0")
    assert b"Permission denied" in r.stderr


@pytest.mark.parametrize("user", USERS)
def test_ids_set_in_the_view_are_per_process_inherited_and_shown_in_proc_status(work, user):
    need_user(user)
    script = ("id -u; id -g; grep -E '^(Uid|Gid|Groups):' /proc/self/status; "
              "python3 -c 'import os; os.setgroups([4]); os.setgid(50); os.setuid(1000); print(os.getresuid(), "
              "os.getresgid(), os.getgroups()); os.system(\"id -u\");\n"
              "try: os.setuid(0)\nexcept PermissionError: print(\"EPERM\")'; id -u")
    r = sh(user, script, work, "-0")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (b"0\n0\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t0 \n"
                        b"(1000, 1000, 1000) (50, 50, 50) [4]\n1000\nEPERM\n0\n")


def test_uid_and_gid_options_give_other_ids_and_the_users_files_show_as_theirs(work):
    need_user("nobody")
    make_file(work, "f")
    r = sh("nobody", "id -u; id -g; stat -c '%u %g' f", work, "--uid", "1000", "--gid", "100")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"1000\n100\n1000 100\n"


def test_db_file_keeps_what_was_set_for_a_later_view(work):
    need_user("nobody")
    make_file(work, "f")
    db = os.path.join(work, "db.json")
    r = sh("nobody", "chown 1:2 f && chmod 4711 f", work, "-p", f"fakeroot,db={db}")
    assert r.returncode == 0, r.stderr
    r = sh("nobody", "stat -c '%u %g %a' f", work, "-p", f"fakeroot,db={db}")
    assert r.stdout == b"1 2 4711\n", r.stderr
    r = sh("nobody", "stat -c '%u %g %a' f", work, "-0")
    assert r.stdout == b"0 0 4711\n"  # without the db: the owner is forgotten, the mode was real


def test_a_kept_layer_keeps_the_owners_for_a_later_sandbox(work):
    need_user("nobody")
    make_file(work, "f")
    keep = tempfile.mkdtemp(prefix="umview-fakeroot-layer-")  # under /tmp: out of the sandbox's sight
    os.chown(keep, NOBODY, NOBODY)
    try:
        opts = ("-0", "--sandbox", "--keep-layer", os.path.join(keep, "layer"))
        r = sh("nobody", f"chown 1:2 {work}/f && mknod {work}/tty c 5 0 && mv {work}/f {work}/g", "/", *opts)
        assert r.returncode == 0, r.stderr
        r = sh("nobody", f"stat -c '%u %g %F' {work}/g {work}/tty; ls -a {work}", "/", *opts)
        assert r.returncode == 0, r.stderr
        assert r.stdout == b"1 2 regular file\n0 0 character special file\n.\n..\ng\ntty\n"
    finally:
        shutil.rmtree(keep)
    assert os.listdir(work) == ["f"] and os.stat(os.path.join(work, "f")).st_uid == NOBODY  # untouched


def test_dpkg_installs_a_package_in_a_fake_root_sandbox_as_nobody(work):
    need_user("nobody")
    need("dpkg-deb", "dpkg")
    deb = make_deb(work, "umview-fakeroot-test")
    native = sh("nobody", f"{PATH} dpkg -i {deb}", work, None)
    assert native.returncode != 0  # natively: requires superuser privilege
    r = sh("nobody", f"export {PATH}; dpkg -i {deb} && dpkg -s umview-fakeroot-test | grep Status && "
           "stat -c '%U %a' /usr/share/umview-fakeroot-test/hello", work, "-0", "--sandbox", timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith(b"Status: install ok installed\nroot 644\n")
    assert not os.path.exists("/usr/share/umview-fakeroot-test")


def test_apt_get_installs_a_local_package_in_a_fake_root_sandbox_as_nobody(work):
    """apt-get takes its locks first: root's empty 0640 files (dpkg's
    lock-frontend, apt's lists and archives locks), which nobody may not
    read. Their copies in the layer need no read (they are empty), so the
    fake root writes them as root does; natively apt-get refuses nobody."""
    need_user("nobody")
    need("dpkg-deb", "dpkg", "apt-get")
    deb = make_deb(work, "umview-apt-test")
    native = sh("nobody", f"{PATH} apt-get install -y {deb}", work, None)
    assert native.returncode != 0 and b"lock-frontend" in native.stderr  # natively: "are you root?"
    r = sh("nobody", f"export {PATH}; apt-get install -y {deb} >/dev/null && dpkg -s umview-apt-test | grep Status && "
           "stat -c '%U %a' /usr/share/umview-apt-test/hello", work, "-0", "--sandbox", timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith(b"Status: install ok installed\nroot 644\n")
    assert not os.path.exists("/usr/share/umview-apt-test")
    assert not os.path.exists("/var/lib/dpkg/info/umview-apt-test.list")


def test_fake_root_options_say_what_to_write():
    need_user("root")
    r = subprocess.run(umview_for("root", "--uid", "x", "true"), capture_output=True, timeout=60)
    assert r.returncode == 2 and b"--uid 1000" in r.stderr
    r = subprocess.run(umview_for("root", "-p", "fakeroot,db", "true"), capture_output=True, timeout=60)
    assert r.returncode == 2 and b"db= needs a file name" in r.stderr
    r = subprocess.run(umview_for("root", "--help"), capture_output=True, timeout=60)
    assert b"-0, --root" in r.stdout


def test_i386_processes_see_the_same_fake_ids_owners_and_devices_in_their_layouts(work, progs):
    """A real i386 process: the 16-bit calls (getuid, chown, stat) and the
    32-bit ones (getuid32, stat64) with their structures."""
    need_user("nobody")
    make_file(work, "f")
    ops = ["getuid", "getuid32", "stat:uid:f", "chown:f:1:2", "stat:uid:f", "stat:gid:f", "stat64:uid:f",
           "stat64:gid:f", "mknod:null:20644:259", "stat:mode:null", "stat64:rdev:null", "chown:missing:1:1",
           "setuid:1000", "getuid", "getuid32", "setuid:0"]
    native = subprocess.run(as_user("nobody", [progs["i386"], "chown:f:1:2", "mknod:null:20644:259"]),
                            cwd=work, capture_output=True)
    assert native.stdout == b"chown:f:1:2 = -1\nmknod:null:20644:259 = -1\n"  # EPERM, both
    r = subprocess.run(umview_for("nobody", "-0", "--", progs["i386"], *ops), cwd=work, capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    results = [line.split(" = ")[1] for line in r.stdout.decode().splitlines()]
    assert results == ["0", "0", "0", "0", "1", "2", "1", "2", "0", str(0o20644), "259", "-2",  # ENOENT stays
                       "0", "1000", "1000", "-1"]  # EPERM: no way back to root
    assert os.stat(os.path.join(work, "f")).st_uid == NOBODY
