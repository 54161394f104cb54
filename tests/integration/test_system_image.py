"""A system image of another machine, built and changed by a normal user
with no root at any step (issue 32's story), as a user would type it:

1. debootstrap --foreign --arch=arm64: the first stage runs natively under
   a fake root that records owners and modes in a file (-p fakeroot,db=);
2. the second stage runs in the tree under qemu (--qemu -r TREE), with the
   same records;
3. a GPT disk image whose second partition is an ext4 made from the tree
   (sfdisk, mkfs.ext4 -d under the same records: the image gets root's
   owners, setuid bits and devices);
4. that partition mounted with -p fs, -r into it, and apt-get install of an
   arm64 package whose maintainer script runs, under -0 and qemu (apt-get
   update and an install from the archive there take some 45 s more under
   qemu: measured by hand, docs/performance.md);
5. the same local package installed into the tree in a sandbox, --report's
   list of it, and umview-layer apply of the layer onto the tree.

The reference is the image itself, read by e2fsprogs after the view:
e2fsck finds it clean, debugfs shows the package's file, its owner (root)
and dpkg's record, and no byte outside the partition changed. PRoot
(proot -0 -q qemu-aarch64-static) does none of these steps as a normal
user here (docs/performance.md, "A system image of another machine").
"""
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import as_user, digest_outside, entry_for, need, need_user, umview_for

pytestmark = pytest.mark.usefixtures("dev_fuse_for_nobody")

HOST_PATHS = "/proc:/sys:/dev:/tmp"
POSTINST = "#!/bin/sh\nmkdir -p /var/lib/umview-story\necho \"$(uname -m) $(id -u)\" > /var/lib/umview-story/ran\n"


def _as_nobody(base, *argv, timeout=900):
    return subprocess.run(as_user("nobody", ["env", f"HOME={base}", *argv]), cwd=base, capture_output=True,
                          timeout=timeout)


def _view(base, *opts, timeout=900):
    return subprocess.run(umview_for("nobody", *opts), cwd=base, capture_output=True, timeout=timeout,
                          env=dict(os.environ, HOME=base))


def _deb(base):
    """base/debs/umview-story.deb: an arm64 package with a file and a postinst, built by nobody."""
    pkg = os.path.join(base, "debs", "pkg")
    for d in ("DEBIAN", "usr/share/umview-story"):
        os.makedirs(os.path.join(pkg, d))
    with open(os.path.join(pkg, "DEBIAN", "control"), "w") as f:
        f.write("Package: umview-story\nVersion: 1.0\nArchitecture: arm64\n"
                "Maintainer: umview tests <tests@example.org>\nDescription: a package of the story\n")
    with open(os.path.join(pkg, "DEBIAN", "postinst"), "w") as f:
        f.write(POSTINST)
    os.chmod(os.path.join(pkg, "DEBIAN", "postinst"), 0o755)
    with open(os.path.join(pkg, "usr", "share", "umview-story", "hello"), "w") as f:
        f.write("hello from the story\n")
    subprocess.run(["chown", "-R", "nobody:nogroup", pkg], check=True)
    deb = os.path.join(base, "debs", "umview-story.deb")
    subprocess.run(["chown", "nobody:nogroup", os.path.dirname(pkg)], check=True)
    r = _as_nobody(base, "dpkg-deb", "--root-owner-group", "--build", pkg, deb)
    assert r.returncode == 0, (r.stdout[-3000:] + r.stderr[-3000:]).decode(errors="replace")
    return deb


def _apt_mirror():
    """The Debian archive apt uses here (deb.debian.org if none is named),
    and the suite this system is (bookworm if it does not say)."""
    import glob
    import re

    mirror, suite = "http://deb.debian.org/debian", "bookworm"
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        m = next((m for m in re.finditer(r"^(?:URIs:\s*|deb\s+(?:\[[^]]*\]\s+)?)(\S+)", text, re.M)
                  if "security" not in m.group(1)), None)
        if m is not None:
            mirror = m.group(1)
            break
    with open("/etc/os-release") as f:
        for line in f:
            if line.startswith("VERSION_CODENAME=") and line.strip().split("=", 1)[1]:
                suite = line.strip().split("=", 1)[1]
    return mirror, suite


@pytest.mark.slow
def test_an_arm64_debian_image_is_built_and_changed_by_a_normal_user_with_no_root():
    need("debootstrap", "qemu-aarch64-static", "sfdisk", "mkfs.ext4", "e2fsck", "debugfs", "nbdfuse", "nbdkit",
         "fuse2fs", "dpkg-deb")
    need_user("nobody")
    base = tempfile.mkdtemp(prefix="umview-story-", dir="/var/tmp")
    try:
        os.chmod(base, 0o755)
        shutil.chown(base, "nobody", "nogroup")
        tree, img, mnt = (os.path.join(base, n) for n in ("tree", "disk.img", "mnt"))
        records = f"fakeroot,db={base}/owners.db"
        mirror, suite = _apt_mirror()
        r = _view(base, "-p", records, "--", "debootstrap", "--foreign", "--arch=arm64", "--variant=minbase",
                  suite, tree, mirror)
        if r.returncode != 0 and b"Failure trying to run" not in r.stderr + r.stdout:
            pytest.skip(f"debootstrap's first stage failed (no archive reachable?): {r.stderr.decode()[-300:]}")
        assert r.returncode == 0, (r.stdout[-3000:] + r.stderr[-3000:]).decode(errors="replace")
        r = _view(base, "-p", records, "--qemu", "-r", tree, "--host-paths", HOST_PATHS, "--",
                  "/debootstrap/debootstrap", "--second-stage")
        assert r.returncode == 0 and b"Base system installed successfully" in r.stdout, r.stdout[-2000:]
        r = _view(base, "-p", records, "--", "sh", "-c",
                  f"truncate -s 700M {img} && printf 'label: gpt\\nsize=16MiB, type=uefi, name=boot\\n"
                  f"type=linux, name=root\\n' | sfdisk -q {img}")
        assert r.returncode == 0, (r.stdout[-3000:] + r.stderr[-3000:]).decode(errors="replace")
        part = json.loads(subprocess.run(["sfdisk", "--json", img], capture_output=True, check=True).stdout)
        p2 = part["partitiontable"]["partitions"][1]
        offset, size = p2["start"] * 512, p2["size"] * 512
        r = _view(base, "-p", records, "--", "mkfs.ext4", "-q", "-L", "root", "-E", f"offset={offset}", "-d", tree,
                  img, f"{size // 1024}k")
        assert r.returncode == 0, (r.stdout[-3000:] + r.stderr[-3000:]).decode(errors="replace")
        before = digest_outside(img, offset, size)
        deb = _deb(base)
        os.makedirs(mnt)
        shutil.chown(mnt, "nobody", "nogroup")
        # the package is the host's: its directory stays the host's in the tree
        r = _view(base, "-0", "--qemu", "-p", f"fs,mount={img}:{mnt},part=2", "-r", mnt, "--host-paths",
                  f"{HOST_PATHS}:{os.path.dirname(deb)}", "--", "/bin/sh", "-c",
                  f"uname -m && apt-get install -y -q {deb} && cat /usr/share/umview-story/hello "
                  "/var/lib/umview-story/ran && ls -ln /usr/bin/passwd")
        assert r.returncode == 0, (r.stdout[-3000:] + r.stderr[-3000:]).decode(errors="replace")
        out = r.stdout.decode()
        assert out.startswith("aarch64\n"), out
        assert "hello from the story\naarch64 0\n" in out, out
        assert "-rwsr-xr-x 1 0 0 " in out, out  # the image's setuid root program, as the records made it
        assert digest_outside(img, offset, size) == before
        where = f"{img}?offset={offset}"
        fsck = subprocess.run(["e2fsck", "-fn", where], capture_output=True, timeout=120)
        assert fsck.returncode == 0, fsck.stdout

        def debugfs(request):
            return subprocess.run(["debugfs", "-R", request, where], capture_output=True, timeout=60).stdout.decode()
        assert debugfs("cat /usr/share/umview-story/hello") == "hello from the story\n"
        assert debugfs("cat /var/lib/umview-story/ran") == "aarch64 0\n"
        assert "User:     0   Group:     0" in debugfs("stat /usr/share/umview-story/hello")
        assert "Mode:  04755" in debugfs("stat /usr/bin/passwd")
        status = debugfs("cat /var/lib/dpkg/status")
        assert "Package: umview-story\nStatus: install ok installed\n" in status
        assert os.listdir(mnt) == []
        # the same install into the tree itself, in a sandbox: --report
        # lists it, and umview-layer applies it to the tree, which is the user's
        layer = tempfile.mkdtemp(prefix="umview-story-layer-", dir="/tmp")
        shutil.chown(layer, "nobody", "nogroup")
        try:
            r = _view(base, "-0", "--qemu", "-r", tree, "--host-paths", f"{HOST_PATHS}:{os.path.dirname(deb)}",
                      "--sandbox", "--keep-layer", layer, "--report", f"{base}/report.json", "--", "apt-get",
                      "install", "-y", "-q", deb)
            assert r.returncode == 0, (r.stdout[-3000:] + r.stderr[-3000:]).decode(errors="replace")
            with open(f"{base}/report.json") as f:
                created = {c["path"] for c in json.load(f)["created"]}
            hello = f"{tree}/usr/share/umview-story/hello"
            assert any(c.endswith("/usr/share/umview-story/hello") for c in created), created
            assert not os.path.exists(hello)
            r = _as_nobody(base, *entry_for("nobody", "umview.modules.viewfs.layercmd:main", "apply", "--yes",
                                            layer), timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr
            with open(hello) as f:
                assert f.read() == "hello from the story\n"
        finally:
            shutil.rmtree(layer, ignore_errors=True)
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", base])
