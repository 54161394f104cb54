"""fs: an image a normal user owns is the user's to change, as when the
user runs the FUSE server natively. An ext4 image of root's files (a system
image), owned by nobody: nobody writes, creates, removes and appends in the
view what nobody does natively through fuse2fs -o fakeroot (the reference,
run first), and the two images end up the same, e2fsck-clean.

Not the same: the owners the view shows. In the mount helper's user
namespace root's ids are not mapped, so every file shows as the user's;
natively they show as the image records them (issue 32, item 4). Under -0
the user is root there, and the fake root's new files are root's in the
image, as root's changes through a loop mount make them.
"""
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import as_user, need, need_user, run, umview_for

pytestmark = pytest.mark.usefixtures("dev_fuse_for_nobody")

CHANGES = """m=$1
echo changed > $m/etc/hostname
echo more >> $m/etc/readonly
mkdir $m/etc/newdir && echo new > $m/etc/newdir/file
rm $m/etc/gone
cat $m/etc/hostname $m/etc/readonly $m/etc/newdir/file
"""


def _image(base, name):
    """An ext4 image of root's files, owned by nobody."""
    tree = os.path.join(base, f"tree-{name}")
    os.makedirs(os.path.join(tree, "etc"))
    for f, text, mode in (("hostname", "orig\n", 0o644), ("readonly", "ro\n", 0o444), ("gone", "x\n", 0o600)):
        path = os.path.join(tree, "etc", f)
        with open(path, "w") as out:
            out.write(text)
        os.chmod(path, mode)
    img = os.path.join(base, f"{name}.ext4")
    subprocess.run(["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-d", tree, img, "8M"], check=True,
                   capture_output=True)
    shutil.chown(img, "nobody")
    mnt = os.path.join(base, f"mnt-{name}")
    os.makedirs(mnt)
    shutil.chown(mnt, "nobody")
    return img, mnt


def _listing(img):
    """(mode, uid, gid, size, name) of each entry of /etc and /etc/newdir, as debugfs reads the image."""
    out = []
    for d in ("/etc", "/etc/newdir"):
        text = subprocess.run(["debugfs", "-R", f"ls -l {d}", img], capture_output=True, text=True).stdout
        for line in text.splitlines():
            m = re.match(r"\s*\d+\s+(\d+)\s+\(\d+\)\s+(\d+)\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+(.*)$", line)
            if m and m.group(5) not in (".", ".."):
                out.append((d, *m.groups()))
    return sorted(out)


@pytest.fixture
def place():
    """A directory nobody may read, with the script of CHANGES: (dir, script)."""
    need("fuse2fs", "mkfs.ext4", "debugfs", "e2fsck")
    need_user("nobody")
    base = tempfile.mkdtemp(prefix="umview-user-images-", dir="/var/tmp")
    os.chmod(base, 0o755)
    try:
        script = os.path.join(base, "changes.sh")
        with open(script, "w") as f:
            f.write(CHANGES)
        yield base, script
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_users_image_of_roots_files_is_changed_as_fuse2fs_fakeroot_changes_it_natively(place):
    need("fusermount")
    base, script = place
    img, mnt = _image(base, "native")
    native = run(as_user("nobody", ["sh", "-c", f"fuse2fs -o fakeroot {img} {mnt} && sh {script} {mnt}; "
                                    f"r=$?; fusermount -u {mnt}; exit $r"]), timeout=120)
    assert native.returncode == 0, native.stderr
    vimg, vmnt = _image(base, "view")
    viewed = run(umview_for("nobody", "-p", f"fs,mount={vimg}:{vmnt}", "--", "sh", script, vmnt), timeout=120)
    assert (viewed.returncode, viewed.stdout) == (0, native.stdout), viewed.stderr
    assert viewed.stdout == b"changed\nro\nmore\nnew\n"
    assert _listing(vimg) == _listing(img) != []
    for i in (img, vimg):
        fsck = run(["e2fsck", "-fn", i], timeout=60)
        assert fsck.returncode == 0, fsck.stdout


def test_a_fake_roots_new_files_in_a_users_image_are_roots_as_roots_own_changes_natively(place):
    """umview -0: to the images -p fs mounts for a normal user the user is
    root (owner=0:0), so what the fake root makes there is recorded as
    root's, as when root changes the image natively (a loop mount, the
    reference); owner=UID:GID names other ids. Without -0 the user's files
    are the user's (the test above)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("the reference is root's loop mount")
    base, script = place
    img, mnt = _image(base, "native")
    native = run(["unshare", "-m", "sh", "-c", f"mount -o loop {img} {mnt} && sh {script} {mnt}"], timeout=120)
    assert native.returncode == 0, native.stderr
    vimg, vmnt = _image(base, "view")
    viewed = run(umview_for("nobody", "-0", "-p", f"fs,mount={vimg}:{vmnt}", "--", "sh", "-c",
                            f"sh {script} {vmnt} && ls -n {vmnt}/etc/newdir"), timeout=120)
    assert viewed.returncode == 0, viewed.stderr
    assert viewed.stdout.startswith(native.stdout)
    assert re.search(rb"-rw-r--r-- 1 0 0 4 .* file\n$", viewed.stdout), viewed.stdout
    new = [row for row in _listing(vimg) if row[-1] in ("newdir", "file")]
    assert new == [row for row in _listing(img) if row[-1] in ("newdir", "file")]
    assert {row[2:4] for row in new} == {("0", "0")}
    oimg, omnt = _image(base, "owner")
    r = run(umview_for("nobody", "-p", f"fs,mount={oimg}:{omnt},owner=1234:4321", "--", "sh", script, omnt),
            timeout=120)
    assert r.returncode == 0, r.stderr
    assert {row[2:4] for row in _listing(oimg) if row[-1] in ("newdir", "file")} == {("1234", "4321")}
    for i in (img, vimg, oimg):
        fsck = run(["e2fsck", "-fn", i], timeout=60)
        assert fsck.returncode == 0, fsck.stdout
