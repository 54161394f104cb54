"""fs: a partition of a disk image (GPT, and MBR with a logical partition)
mounted in a view, as root and as nobody, by number, GPT name, type or byte
offset, and listed by umview-image.

The reference is the kernel's: root's loop mount of the same bytes
(mount -o loop,offset=,sizelimit= in a private mount namespace) shows the same
tree. A write lands in the partition's bytes only: every byte outside it is
unchanged, and e2fsck of the partition is clean after the view.
"""
import json
import os
import shlex
import shutil
import subprocess
import tempfile

import pytest

from conftest import as_user, copy_host_programs, digest_outside, entry_for, need, need_user, run, umview_for

# the servers a view of nobody runs open /dev/fuse as nobody
pytestmark = pytest.mark.usefixtures("dev_fuse_for_nobody")

MiB = 1 << 20
# partition tables (sfdisk scripts): (table, {number: (start MiB, size MiB)})
GPT = ('label: gpt\nstart=1MiB, size=8MiB, type=uefi, name="boot"\n'
       'start=9MiB, size=20MiB, type=linux, name="root"\n')
MBR = ("label: dos\nstart=1MiB, size=8MiB, type=83\nstart=9MiB, size=22MiB, type=5\n"
       "start=10MiB, size=20MiB, type=83\n")
SHOW = ("cd {m} && find . -path ./lost+found -prune -o ! -path . -printf '%y %m %s %p\\n' | LC_ALL=C sort"
        " && cat etc/hostname")


def _sectors(img):
    """{number: (offset, size)} in bytes, from sfdisk (the oracle of the table)."""
    table = json.loads(subprocess.run(["sfdisk", "--json", img], capture_output=True, check=True).stdout)
    out = {}
    for p in table["partitiontable"]["partitions"]:
        n = int(p["node"][len(img):].lstrip("p"))
        out[n] = (p["start"] * 512, p["size"] * 512)
    return out


def _make(path, table, fill):
    """A 32 MiB disk image with table, and an ext4 in each partition of
    fill: {number: tree directory}."""
    with open(path, "wb") as f:
        f.truncate(32 * MiB)
    subprocess.run(["sfdisk", "-q", path], input=table.encode(), check=True, capture_output=True)
    parts = _sectors(path)
    for n, tree in fill.items():
        offset, size = parts[n]
        subprocess.run(["mkfs.ext4", "-q", "-F", "-d", tree, "-E", f"offset={offset}", path, f"{size // 1024}k"],
                       check=True, capture_output=True)
    return parts


@pytest.fixture(scope="module")
def disks():
    need("sfdisk", "mkfs.ext4", "e2fsck", "debugfs", "nbdfuse", "nbdkit", "fuse2fs")
    base = tempfile.mkdtemp(prefix="umview-fs-parts-")
    os.chmod(base, 0o755)
    try:
        trees = {}
        for name, host in (("boot", "bootpart"), ("root", "armhost")):
            t = trees[name] = os.path.join(base, f"tree-{name}")
            os.makedirs(os.path.join(t, "etc"))
            with open(os.path.join(t, "etc", "hostname"), "w") as f:
                f.write(host + "\n")
            os.makedirs(os.path.join(t, "usr", "bin"))
            with open(os.path.join(t, "usr", "bin", name), "w") as f:
                f.write("#!/bin/sh\necho " + name + "\n")
        yield base, trees
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _disk(disks, user, table=GPT, fill=None):
    """A fresh disk image in a directory of user's own: (dir, image, parts)."""
    base, trees = disks
    d = tempfile.mkdtemp(prefix=f"disk-{user}-", dir=base)
    img = os.path.join(d, "disk.img")
    fill = fill or {1: trees["boot"], 2: trees["root"]}
    if user != "root":
        # the files are the user's in the image, as in one the user made
        # (an image of root's files is root's to change: issue 32, item 4)
        for n, tree in list(fill.items()):
            fill[n] = shutil.copytree(tree, os.path.join(d, f"tree{n}"))
            for dirpath, dirs, files in os.walk(fill[n]):
                for name in [dirpath, *(os.path.join(dirpath, x) for x in dirs + files)]:
                    shutil.chown(name, user, user if user != "nobody" else "nogroup")
    parts = _make(img, table, fill)
    os.makedirs(os.path.join(d, "mnt"))
    if user != "root":
        shutil.chown(d, user)
        for f in (img, os.path.join(d, "mnt")):
            shutil.chown(f, user)
    return d, img, parts


def _partition_copy(img, offset, size, where):
    with open(img, "rb") as f:
        f.seek(offset)
        data = f.read(size)
    with open(where, "wb") as f:
        f.write(data)
    return where


def _native_loop(img, offset, size, script):
    """What script prints on root's loop mount of the bytes (the kernel's
    ext4), in a private mount namespace; None where the kernel cannot."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return None
    m = tempfile.mkdtemp(prefix="umview-loop-")
    try:
        r = run(["unshare", "-m", "sh", "-c",
                 f"mount -o ro,loop,offset={offset},sizelimit={size} {img} {m} && {script.format(m=m)}"], timeout=60)
        return r.stdout if r.returncode == 0 else None
    finally:
        os.rmdir(m)


@pytest.mark.parametrize("select", ["part=2", "part=root", "parttype=linux"])
@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_gpt_partition_mounts_by_number_name_or_type_and_writes_stay_in_it(disks, user, select):
    need_user(user)
    d, img, parts = _disk(disks, user)
    offset, size = parts[2]
    before = digest_outside(img, offset, size)
    native = _native_loop(img, offset, size, SHOW)
    mnt = os.path.join(d, "mnt")
    r = run(umview_for(user, "-p", f"fs,mount={img}:{mnt},{select}", "--", "sh", "-c",
                       SHOW.format(m=mnt) + f" && echo written > {mnt}/etc/added && cat {mnt}/etc/added"),
            timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith(b"armhost\nwritten\n"), r.stdout
    if native is not None:
        assert r.stdout == native + b"written\n"
    # the write is in partition 2, whose file system is clean; nothing else changed
    assert digest_outside(img, offset, size) == before
    copy = _partition_copy(img, offset, size, os.path.join(d, "p2.img"))
    fsck = run(["e2fsck", "-fn", copy], timeout=60)
    assert fsck.returncode == 0, fsck.stdout
    assert run(["debugfs", "-R", "cat /etc/added", copy], timeout=60).stdout == b"written\n"
    assert os.listdir(mnt) == []  # nothing was mounted where the host sees it


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_an_mbr_logical_partition_and_a_byte_offset_mount_inside_the_view(disks, user):
    """part=5 (a logical partition in an extended one, as sfdisk numbers
    it), and vumount -o offset=,sizelimit= as mount(8)'s loop options."""
    need_user(user)
    base, trees = disks
    d, img, parts = _disk(disks, user, MBR, {1: trees["boot"], 5: trees["root"]})
    mnt = os.path.join(d, "mnt")
    offset, size = parts[1]
    r = run(umview_for(user, "-p", f"fs,mount={img}:{mnt},part=5", "--", "cat", f"{mnt}/etc/hostname"), timeout=120)
    assert (r.returncode, r.stdout) == (0, b"armhost\n"), r.stderr
    tools = {}
    for name in ("vumount", "vuumount"):  # as user may run them
        tools[name] = os.path.join(d, name)
        with open(tools[name], "w") as f:
            f.write(f'#!/bin/sh\nexec {shlex.join(entry_for(user, f"umview.commands:{name}_main"))} "$@"\n')
        os.chmod(tools[name], 0o755)
    inner = (f"{tools['vumount']} -t ext4 -o offset={offset},sizelimit={size} {img} {mnt} && "
             f"cat {mnt}/etc/hostname && {tools['vuumount']} {mnt} && ls {mnt}")
    r = run(umview_for(user, "-p", "fs", "--", "sh", "-c", inner), timeout=120)
    assert (r.returncode, r.stdout) == (0, b"bootpart\n"), r.stderr
    native = _native_loop(img, offset, size, "cat {m}/etc/hostname")
    assert native in (None, b"bootpart\n")


def test_a_partition_that_is_not_there_is_refused_with_what_the_table_has(disks):
    d, img, _ = _disk(disks, "root")
    mnt = os.path.join(d, "mnt")
    for select, words in (("part=7", b"no partition part=7 (it has 1: efi 'boot'; 2: linux 'root')"),
                          ("part=2,offset=512", b"one or the other")):
        r = run(umview_for("root", "-p", f"fs,mount={img}:{mnt},{select}", "--", "true"), timeout=60)
        assert r.returncode != 0 and words in r.stderr, r.stderr
    plain = os.path.join(d, "plain.img")
    with open(plain, "wb") as f:
        f.truncate(MiB)
    r = run(umview_for("root", "-p", f"fs,mount={plain}:{mnt},part=1", "--", "true"), timeout=60)
    assert r.returncode != 0 and b"has no partition table" in r.stderr, r.stderr
    assert os.listdir(mnt) == []


def test_umview_image_lists_the_partitions_and_what_a_view_mounts(disks):
    d, img, parts = _disk(disks, "root")
    argv = as_user("root", entry_for("root", "umview.imagecmd:main", "ls", "--json", img))
    r = run(argv, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [(x["number"], x["start"], x["size"], x["type"], x["name"], x["filesystem"], x["option"]) for x in rows] == [
        (1, *parts[1], "efi", "boot", "ext4", "part=1"), (2, *parts[2], "linux", "root", "ext4", "part=2")]
    r = run(as_user("root", entry_for("root", "umview.imagecmd:main", "ls", os.path.join(d, "nope"))),
            timeout=60)
    assert r.returncode == 1 and b"No such file or directory" in r.stderr


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_fat_boot_partition_of_an_mbr_image_is_read_and_written_by_fusefat(disks, user):
    """A board image's FAT partition, chosen by type: fusefat serves the
    partition's bytes, a file written in the view is in them and fsck.fat
    finds the file system clean; for nobody too (its files show as
    nobody's: FAT records no owner)."""
    need("mkfs.vfat", "fsck.vfat", "mcopy", "mtype", "fusefat")
    need_user(user)
    base, trees = disks
    d = tempfile.mkdtemp(prefix="disk-fat-", dir=base)
    img, mnt = os.path.join(d, "board.img"), os.path.join(d, "mnt")
    os.makedirs(mnt)
    with open(img, "wb") as f:
        f.truncate(32 * MiB)
    subprocess.run(["sfdisk", "-q", img], input=b"label: dos\nstart=1MiB, size=12MiB, type=c\nstart=13MiB, type=83\n",
                   check=True, capture_output=True)
    offset, size = _sectors(img)[1]
    subprocess.run(["mkfs.vfat", "-n", "BOOT", "--offset", str(offset // 512), img, str(size // 1024)], check=True,
                   capture_output=True)
    cfg = os.path.join(d, "config.txt")
    with open(cfg, "w") as f:
        f.write("arm_64bit=1\n")
    subprocess.run(["mcopy", "-i", f"{img}@@{offset}", cfg, "::config.txt"], check=True, capture_output=True)
    if user != "root":
        for f in (d, img, mnt):
            shutil.chown(f, user)
    before = digest_outside(img, offset, size)
    r = run(umview_for(user, "-p", f"fs,mount={img}:{mnt},parttype=fat", "--", "sh", "-c",
                       f"cat {mnt}/config.txt && echo from the view > {mnt}/cmdline.txt"), timeout=120)
    assert (r.returncode, r.stdout) == (0, b"arm_64bit=1\n"), r.stderr
    assert digest_outside(img, offset, size) == before
    copy = _partition_copy(img, offset, size, os.path.join(d, "p1.fat"))
    fsck = run(["fsck.vfat", "-n", copy], timeout=60)
    assert fsck.returncode == 0, fsck.stdout
    # (mtools' own check of the FAT's first bytes refuses what fusefat writes there; fsck.fat does not)
    shown = run(["mtype", "-i", copy, "::cmdline.txt"], env=dict(os.environ, MTOOLS_SKIP_CHECK="1"), timeout=60)
    assert shown.stdout == b"from the view\n", shown.stderr


def _host_programs_tree(where, programs):
    """A root tree of host programs and the libraries ldd names for them."""
    copy_host_programs(where, programs)
    os.makedirs(os.path.join(where, "etc"), exist_ok=True)
    with open(os.path.join(where, "etc", "hostname"), "w") as f:
        f.write("imagehost\n")
    return where


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_r_into_a_partition_mounted_with_p_fs_runs_its_tree_as_chroot_does(disks, user):
    """-r DIR where DIR is the mount point of an image given with -p fs: the
    tree is the image's (-r is found through that mount), and names below a
    directory fd of the image (rm -r's unlinkat, dpkg's cleanup) are the
    tree's, as in root's chroot into a loop mount of the same bytes."""
    need("ldd")
    need_user(user)
    base, _ = disks
    tree = _host_programs_tree(tempfile.mkdtemp(prefix="tree-", dir=base), ("sh", "cat", "ls", "mkdir", "rm", "touch"))
    d, img, parts = _disk(disks, user, fill={2: tree})
    offset, size = parts[2]
    script = ("cat /etc/hostname && mkdir -p /d/e && touch /d/a /d/e/b && rm -r /d && ls / && "
              "cd /etc && rm -r ../bin/touch && ls ../bin && echo written > added")
    native = None
    if os.geteuid() == 0 and shutil.which("unshare"):
        copy = os.path.join(d, "native.img")
        shutil.copyfile(img, copy)
        m = tempfile.mkdtemp(prefix="umview-loop-")
        try:
            r = run(["unshare", "-m", "sh", "-c", f"mount -o loop,offset={offset},sizelimit={size} {copy} {m} && "
                     f"chroot {m} /bin/sh -c {shlex.quote(script)}"], timeout=60)
            assert r.returncode == 0, r.stderr
            native = r.stdout
        finally:
            os.rmdir(m)
            os.unlink(copy)
    mnt = os.path.join(d, "mnt")
    r = run(umview_for(user, "-p", f"fs,mount={img}:{mnt},part=2", "-r", mnt, "--host-paths", "/proc:/dev",
                       "--", "/bin/sh", "-c", script), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"imagehost\nbin\netc\nlib\nlib64\nlost+found\ncat\nls\nmkdir\nrm\nsh\n", r.stdout
    if native is not None:
        assert r.stdout == native
    copy = _partition_copy(img, offset, size, os.path.join(d, "p2.img"))
    assert run(["e2fsck", "-fn", copy], timeout=60).returncode == 0
    assert run(["debugfs", "-R", "cat /etc/added", copy], timeout=60).stdout == b"written\n"
    assert os.listdir(mnt) == []
