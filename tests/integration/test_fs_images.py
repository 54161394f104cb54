"""fs: real images and archives (ext4, squashfs, ISO 9660, zip, tar.gz) and
tmpfs mounted in a view, as root and as nobody.

The images are built once per module from one small tree: a subdirectory, a
relative and an absolute symlink, a shell script, a compiled program and the
shared library it links, a python package. The oracle is that tree (what a
check script prints natively on it and in the view on the mount), and for
root the kernel's own mount of the same image in a private mount namespace.
Whatever a test checks a protection or side effect with is first shown to
work natively. Nothing is mounted in the host's namespace.
"""
import hashlib
import os
import pwd
import select
import shlex
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import NOBODY, as_user, entry_for, marked_processes, need, need_user, run, umview_for

# the servers a view of nobody runs open /dev/fuse as nobody
pytestmark = pytest.mark.usefixtures("dev_fuse_for_nobody")

USERS = ["root", "nobody"]
KINDS = ["ext4", "squashfs", "iso9660", "zip", "tar.gz"]
PASSWD = "/etc/passwd"  # where the absolute symlink points

LIB_C = "int lib_answer(void) { return 42; }\n"
MAIN_C = r"""#include <stdio.h>
#include <unistd.h>
int lib_answer(void);
int main(void)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n < 0 ? 0 : n] = 0;
    printf("answer %d from %s\n", lib_answer(), exe);
    return 0;
}
"""

# check.sh DIR SRC: what the tree at DIR shows, DIR written as DIR (the same
# text natively on SRC and in the view on a mount of an image of SRC). The
# mode of "." is left out: a mount's root is the server's (fuseiso 555).
CHECK = r"""d=$1 src=$2
show() {
    cd "$d" || exit 9
    find . -path ./lost+found -prune -o ! -path . -printf '%y %m %u %p\n' | LC_ALL=C sort
    find . -path ./lost+found -prune -o -type f -printf '%s %p\n' | LC_ALL=C sort
    cat rel sub/hello.txt abs | md5sum
    readlink rel abs
    ./run.sh
    LD_LIBRARY_PATH="$d/sub" ./prog
    LD_LIBRARY_PATH="$d/sub" ldd ./prog | grep -o '/[^ ]*libanswer.so'
    PYTHONPATH="$d" python3 -c 'import os, pkg; print(pkg.VALUE, os.path.relpath(pkg.__file__), pkg.mod.__name__)'
    diff -r -x lost+found "$src" . && echo same as the source
    for f in prog sub/libanswer.so pkg/mod.py; do cmp "$src/$f" "$f" && echo "$f identical"; done
    tar cf - --exclude=./lost+found . | tar tf - | LC_ALL=C sort
}
show | sed "s|$d|DIR|g"
"""

MMAP = r"""import mmap, os, sys
path = sys.argv[1]
with open(path, "wb") as f:
    f.write(b"\0" * 4096)
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[:17] = b"written by mmap\n\0"
m.flush()
m.close()
os.close(fd)
with open(path, "rb") as f:
    print(f.read(16).decode(), end="")
"""


# what a process may do to a file and directory of DIR: errno names
WRITES = r"""import errno, os, sys
d = sys.argv[1]
print("access W_OK", os.access(d + "/sub/hello.txt", os.W_OK), os.access(d + "/sub", os.W_OK))
for name, act in [("open for writing", lambda: os.close(os.open(d + "/sub/hello.txt", os.O_WRONLY))),
                  ("create", lambda: os.close(os.open(d + "/sub/new", os.O_CREAT | os.O_WRONLY, 0o644))),
                  ("mkdir", lambda: os.mkdir(d + "/sub/dir")),
                  ("rename", lambda: os.rename(d + "/sub/hello.txt", d + "/sub/moved")),
                  ("unlink", lambda: os.unlink(d + "/sub/hello.txt")),
                  ("chmod", lambda: os.chmod(d + "/sub/hello.txt", 0o600))]:
    try:
        act()
        print(name, "done")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
"""


def uid_of(user):
    return 0 if user == "root" else NOBODY


def chown_tree(path, user):
    if os.geteuid() != 0:
        return
    uid = uid_of(user)
    os.lchown(path, uid, uid)
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(top, name), uid, uid)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def has_kernel_fs(fstype):
    with open("/proc/filesystems") as f:
        return any(line.split()[-1] == fstype for line in f if line.strip())


class World:
    """The module's tree, images, scripts and per-user tools, in a directory
    every user can reach."""

    def __init__(self, base):
        self.base = base
        self.src = os.path.join(base, "src")
        self.images = {}    # kind -> path
        self.missing = {}   # kind -> why there is no image
        self.check = self.script("check.sh", CHECK)
        self.mmap = self.script("mmap_rw.py", MMAP)
        self.writes = self.script("writes.py", WRITES)
        self._tools = {}

    def script(self, name, text):
        path = os.path.join(self.base, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
        return path

    def image(self, kind):
        if kind not in self.images:
            pytest.skip(f"no {kind} image: {self.missing.get(kind, 'not built')}")
        return self.images[kind]

    def scratch(self, user, name):
        """A new directory owned by user (removed with the module's tree)."""
        path = tempfile.mkdtemp(prefix=name + "-", dir=self.base)
        os.chmod(path, 0o755)
        chown_tree(path, user)
        return path

    def tools(self, user):
        """A directory with vumount and vuumount that user can run."""
        if user not in self._tools:
            d = os.path.join(self.base, f"tools-{user}")
            os.makedirs(d, exist_ok=True)
            os.chmod(d, 0o755)
            for name in ("vumount", "vuumount"):
                argv = entry_for(user, f"umview.commands:{name}_main")
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    f.write(f'#!/bin/sh\nexec {shlex.join(argv)} "$@"\n')
                os.chmod(path, 0o755)
            home = os.path.join(self.base, f"home-{user}")
            os.makedirs(home, exist_ok=True)
            chown_tree(home, user)
            self._tools[user] = (d, home)
        return self._tools[user]

    def env(self, user, **extra):
        tools, home = self.tools(user)
        env = dict(os.environ, PATH=tools + ":" + os.environ.get("PATH", "/usr/bin:/bin"), HOME=home, LC_ALL="C")
        env.pop("PYTHONPATH", None)
        env.pop("LD_LIBRARY_PATH", None)
        env.update(extra)
        return env

    def native(self, user, script, **kw):
        return run(as_user(user, ["bash", "-c", script]), env=self.env(user), **kw)

    def view(self, user, opts, script, env=None, **kw):
        return run(umview_for(user, *opts, "--", "bash", "-c", script), env=env or self.env(user), **kw)


def build_tree(world):
    src = world.src
    os.makedirs(os.path.join(src, "sub"))
    os.makedirs(os.path.join(src, "pkg"))
    files = {"sub/hello.txt": "hello from the image\n", "sub/private.txt": "for its owner\n",
             "pkg/__init__.py": "from . import mod\nVALUE = mod.VALUE\n", "pkg/mod.py": "VALUE = 7\n",
             "run.sh": '#!/bin/sh\necho "script ran: $(cat "$(dirname "$0")/rel")"\n'}
    for name, text in files.items():
        with open(os.path.join(src, name), "w") as f:
            f.write(text)
    os.chmod(os.path.join(src, "run.sh"), 0o755)
    os.chmod(os.path.join(src, "sub", "private.txt"), 0o600)
    os.symlink("sub/hello.txt", os.path.join(src, "rel"))
    os.symlink(PASSWD, os.path.join(src, "abs"))
    build = os.path.join(world.base, "build")
    os.mkdir(build)
    for name, text in (("lib.c", LIB_C), ("main.c", MAIN_C)):
        with open(os.path.join(build, name), "w") as f:
            f.write(text)
    for argv in (["gcc", "-shared", "-fPIC", "-o", f"{src}/sub/libanswer.so", f"{build}/lib.c"],
                 ["gcc", "-o", f"{src}/prog", f"{build}/main.c", f"-L{src}/sub", "-lanswer"]):
        r = run(argv)
        assert r.returncode == 0, r.stderr
    os.chmod(src, 0o755)
    chown_tree(src, "nobody")


def build_images(world):
    src = world.src
    img = os.path.join(world.base, "img")
    os.mkdir(img)
    os.chmod(img, 0o755)
    tool = {"ext4": "mkfs.ext4", "squashfs": "mksquashfs", "zip": "zip", "tar.gz": "tar",
            "iso9660": "genisoimage" if shutil.which("genisoimage") else "xorriso"}
    for kind in KINDS:
        if shutil.which(tool[kind]) is None:
            world.missing[kind] = f"{tool[kind]} is not installed"
            continue
        path = os.path.join(img, "tree." + kind)
        if kind == "ext4":
            argv = ["mkfs.ext4", "-q", "-O", "^has_journal", "-d", src, path, "8M"]
        elif kind == "squashfs":
            argv = ["mksquashfs", src, path, "-quiet", "-no-progress", "-noappend"]
        elif kind == "iso9660":
            argv = [tool[kind], *(["-as", "mkisofs"] if tool[kind] == "xorriso" else []), "-quiet", "-R",
                    "-o", path, src]
        elif kind == "zip":
            argv = ["sh", "-c", f'cd "$0" && zip -qry "$1" .', src, path]
        else:
            argv = ["tar", "czf", path, "-C", src, "."]
        r = run(argv)
        assert r.returncode == 0, (argv, r.stderr)
        os.chmod(path, 0o644)
        chown_tree(path, "nobody")  # rw mounts of archives as nobody
        world.images[kind] = path


@pytest.fixture(scope="module")
def world():
    need("gcc")
    base = tempfile.mkdtemp(prefix="umview-fs-images-")
    os.chmod(base, 0o755)
    try:
        w = World(base)
        build_tree(w)
        build_images(w)
        yield w
    finally:
        shutil.rmtree(base, ignore_errors=True)


def private_ns(user):
    """A private mount namespace where user may mount (unshare(1))."""
    need("unshare")
    return ["unshare", "-m"] if user == "root" else ["unshare", "-r", "-m"]


def mount_lines(base, pid="self"):
    """The lines of /proc/PID/mountinfo that name something under base (the
    module's tree: other sessions on the machine may mount elsewhere)."""
    try:
        with open(f"/proc/{pid}/mountinfo") as f:
            return [line for line in f if base in line]
    except OSError:
        return []


# --- the images show the tree they were built from ---

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("user", USERS)
def test_image_mounted_at_start_shows_the_source_tree(world, user, kind):
    need_user(user)
    img = world.image(kind)
    mnt = world.scratch(user, "mnt")
    expected = world.native(user, f"bash {world.check} {world.src} {world.src}")
    assert expected.returncode == 0, expected.stderr
    assert b"answer 42 from DIR/prog" in expected.stdout and b"same as the source" in expected.stdout
    before = digest(img)
    spec = f"fs,mount={img}:{mnt}:{kind}" + (",ro" if kind == "ext4" else "")
    r = world.view(user, ["-p", spec], f"bash {world.check} {mnt} {world.src}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == expected.stdout.decode()
    assert b"/proc/" not in r.stdout + r.stderr
    assert digest(img) == before, "reading the image changed it"
    assert os.listdir(mnt) == []
    if user == "root" and kind in ("ext4", "squashfs") and has_kernel_fs(kind) and os.path.exists("/dev/loop-control"):
        native = run(private_ns(user) + ["bash", "-c", f"mount -o loop,ro -t {kind} {img} {mnt} && "
                                         f"bash {world.check} {mnt} {world.src}"])
        assert native.returncode == 0, native.stderr
        assert r.stdout.decode() == native.stdout.decode()


@pytest.mark.parametrize("kind", ["ext4", "squashfs"])
def test_root_views_mount_is_open_to_other_users_as_their_modes_say(world, kind):
    # a kernel mount made by root serves every user, by the files' modes: a
    # process of a root view that runs as another user (su, a daemon, apt's
    # sandbox) would see the image as it would that mount
    need_user("root")
    need("setpriv")
    img = world.image(kind)
    mnt = world.scratch("root", "mnt")
    other = shlex.join(["setpriv", "--reuid=1", "--regid=1", "--clear-groups"])
    script = f"{other} cat {mnt}/rel; {other} cat {mnt}/sub/private.txt; cat {mnt}/sub/private.txt"
    expected = ("hello from the image\nfor its owner\n", f"cat: {mnt}/sub/private.txt: Permission denied\n")
    if has_kernel_fs(kind) and os.path.exists("/dev/loop-control"):
        native = run(private_ns("root") + ["bash", "-c", f"mount -o loop,ro -t {kind} {img} {mnt} && {script}"])
        assert (native.stdout.decode(), native.stderr.decode()) == expected
    r = world.view("root", ["-p", f"fs,mount={img}:{mnt}:{kind},ro"], script)
    if r.stderr.decode().startswith(f"cat: {mnt}/rel: Permission denied\n"):
        pytest.xfail("the view reaches the mount through /proc/HELPER/root, which the kernel opens only for a "
                     "process that may ptrace the helper: another uid gets EACCES (and the servers would need "
                     "allow_other,default_permissions)")
    assert (r.stdout.decode(), r.stderr.decode()) == expected


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("user", USERS)
def test_read_only_mount_refuses_writes_with_erofs_as_the_kernel_does(world, user, kind):
    need_user(user)
    img = world.image(kind)
    mnt = world.scratch(user, "mnt")
    # natively: a read-only tmpfs holding the same names
    native = run(as_user(user, private_ns(user) + [
        "bash", "-c", f"mount -t tmpfs none {mnt} && mkdir {mnt}/sub && echo x > {mnt}/sub/hello.txt && "
        f"mount -o remount,bind,ro {mnt} && python3 {world.writes} {mnt}"]))
    assert native.returncode == 0, native.stderr
    assert native.stdout.decode().splitlines()[0] == "access W_OK False False"
    assert set(line.rsplit(" ", 1)[1] for line in native.stdout.decode().splitlines()[1:]) == {"EROFS"}
    before = digest(img)
    r = world.view(user, ["-p", "fs"], f"vumount -t {kind} -o ro {img} {mnt} && python3 {world.writes} {mnt}"
                   f" && vuumount {mnt}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == native.stdout.decode()
    assert digest(img) == before


@pytest.mark.parametrize("kind", ["ext4", "zip", "tar.gz"])
def test_write_protected_image_is_mounted_read_only_as_mount8_does(world, kind):
    need_user("nobody")
    if not (has_kernel_fs("ext4") and os.path.exists("/dev/loop-control")):
        pytest.skip("needs the kernel's ext4 and loop devices (to show mount(8)'s own answer)")
    img = world.image(kind)
    d = world.scratch("root", "protected")  # root's: nobody may not write the images in it
    protected, ext4 = (shutil.copy(i, d) for i in (img, world.image("ext4")))
    mnt = world.scratch("nobody", "mnt")
    # natively: mount(8) mounts a write-protected image read-only
    native = run(private_ns("root") + ["bash", "-c", f"mount --bind -o ro {d} {d} && mount -t ext4 {ext4} {mnt}"
                                       f" && findmnt -n -o OPTIONS {mnt} | cut -d, -f1"])
    assert native.stdout == b"ro\n", native.stderr
    before = digest(protected)
    r = world.view("nobody", ["-p", "fs"], f"vumount -t {kind} {protected} {mnt} && cat {mnt}/rel && "
                   f"echo more >> {mnt}/sub/hello.txt; vuumount {mnt}")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello from the image\n"
    assert "Read-only file system" in r.stderr.decode()
    assert digest(protected) == before


# --- a read-write ext4 image ---

def rw_ext4(world, user, journal=False):
    """A new ext4 image of the tree whose root user owns, and a mount point."""
    need("mkfs.ext4", "e2fsck", "debugfs")
    d = world.scratch(user, "rw")
    img, mnt = os.path.join(d, "rw.ext4"), os.path.join(d, "mnt")
    uid = uid_of(user)
    r = run(["mkfs.ext4", "-q", *([] if journal else ["-O", "^has_journal"]), "-E", f"root_owner={uid}:{uid}",
             "-d", world.src, img, "8M"])
    assert r.returncode == 0, r.stderr
    os.mkdir(mnt)
    chown_tree(d, user)
    return img, mnt


@pytest.mark.parametrize("journal", [False, True], ids=["no-journal", "journal"])
@pytest.mark.parametrize("user", USERS)
def test_rw_ext4_image_keeps_an_mmap_write_and_a_git_commit(world, user, journal):
    need_user(user)
    need("git")
    img, mnt = rw_ext4(world, user, journal)

    def listing():
        r = run(["debugfs", "-R", "ls -l /", img])
        assert r.returncode == 0, r.stderr
        return {line.split()[-1] for line in r.stdout.decode().splitlines() if line.strip()}

    assert {"prog", "sub"} <= listing() and not {"repo", "mapped"} & listing()
    git = "git -c user.name=Tester -c user.email=tester@example.org"
    r = world.view(user, ["-p", "fs"], f"""set -e
        vumount -t ext4 {img} {mnt}
        python3 {world.mmap} {mnt}/mapped
        mkdir {mnt}/repo && cd {mnt}/repo
        echo committed in the image > f
        git init -q && git add f && {git} commit -qm 'first commit'
        git log --format=%s
        cd /
        vuumount {mnt}
        ls -A {mnt} | wc -l""")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"written by mmap\nfirst commit\n0\n"
    fsck = run(["e2fsck", "-fn", img])
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    assert {"repo", "mapped"} <= listing()
    r = world.view(user, ["-p", f"fs,mount={img}:{mnt}:ext4,ro"],
                   f"cat {mnt}/mapped | head -c 16; git -C {mnt}/repo log --format=%s; "
                   f"git -C {mnt}/repo fsck --no-progress && cat {mnt}/repo/f")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"written by mmap\nfirst commit\ncommitted in the image\n"


@pytest.mark.parametrize("user", USERS)
def test_image_whose_server_dies_once_mounted_is_a_failed_mount_not_a_dead_one(world, user):
    # fuse2fs 1.47.0 mounts an image whose journal needs recovery (one a
    # kernel left mounted), then dies: natively a mount that answers ENOTCONN
    need_user(user)
    need("fuse2fs")
    img, mnt = rw_ext4(world, user, journal=True)
    r = run(["debugfs", "-w", "-R", "feature needs_recovery", img])
    assert r.returncode == 0, r.stderr
    native = run(as_user(user, private_ns(user) + [
        "bash", "-c", f"fuse2fs {img} {mnt}; stat -f {mnt}; umount -l {mnt}"]))
    if b"Transport endpoint is not connected" not in native.stderr:
        pytest.skip(f"this fuse2fs serves an image whose journal needs recovery: {native.stderr[-200:]!r}")
    r = world.view(user, ["-p", "fs"], f"vumount -t ext4 {img} {mnt}; echo $?; grep -c ' {mnt} ' /proc/self/mountinfo;"
                   f" vumount -t squashfs {world.image('squashfs')} {mnt} && cat {mnt}/rel")
    assert r.stdout == b"32\n0\nhello from the image\n", r.stderr
    assert f"fuse2fs did not mount {mnt}" in r.stderr.decode()


# --- what the view shows of a mount ---

@pytest.mark.parametrize("user", USERS)
def test_cwd_fds_maps_and_mount_table_name_the_views_path(world, user):
    need_user(user)
    need("findmnt", "df")
    img = world.image("ext4")
    mnt = world.scratch(user, "mnt")
    r = world.view(user, ["-p", "fs"], f"""set -e
        vumount -t ext4 -o ro {img} {mnt}
        cd {mnt}/sub
        pwd -P; /bin/pwd; readlink /proc/self/cwd
        exec 7< {mnt}/sub/hello.txt; readlink /proc/self/fd/7; exec 7<&-
        LD_LIBRARY_PATH={mnt}/sub python3 -c "import ctypes; ctypes.CDLL('libanswer.so'); \
print(*sorted({{l.split()[-1] for l in open('/proc/self/maps') if 'libanswer' in l}}))"
        LD_LIBRARY_PATH={mnt}/sub ../prog
        awk '$5 == "{mnt}" {{print $5, $(NF-1)}}' /proc/self/mountinfo
        awk '$2 == "{mnt}" {{print $2, $1}}' /proc/self/mounts /etc/mtab
        findmnt -n -o TARGET,SOURCE {mnt} | tr -s ' '
        df --output=target,source {mnt} | tail -n 1 | tr -s ' '
        cd {mnt}/sub && cd .. && pwd && pwd -P
        cd ..; pwd
        cat /proc/self/mountinfo /proc/self/mounts | grep -c '/proc/[0-9]*/' || true
        cd /; vuumount {mnt}""")
    assert r.returncode == 0, r.stderr
    parent = os.path.dirname(mnt)
    assert r.stdout.decode().splitlines() == [
        f"{mnt}/sub", f"{mnt}/sub", f"{mnt}/sub", f"{mnt}/sub/hello.txt", f"{mnt}/sub/libanswer.so",
        f"answer 42 from {mnt}/prog", *[f"{mnt} {img}"] * 5, f"{mnt}", f"{mnt}", parent, "0"]


@pytest.mark.parametrize("user", USERS)
def test_mount_on_a_symlink_mounts_on_the_directory_it_names(world, user):
    need_user(user)
    d = world.scratch(user, "link")
    mnt = os.path.join(d, "dir")
    os.mkdir(mnt)
    os.symlink("dir", os.path.join(d, "link"))
    chown_tree(d, user)
    link = os.path.join(d, "link")
    script = (f"cut -d' ' -f5 /proc/self/mountinfo | grep '^{d}'; ls {mnt}/sub | head -n 1; "
              f"UMOUNT {link} && ls -A {mnt} | wc -l")
    native = run(as_user(user, private_ns(user) + [
        "bash", "-c", f"mount -t tmpfs none {link} && mkdir {mnt}/sub && touch {mnt}/sub/hello.txt && "
        + script.replace("UMOUNT", "umount")]))
    assert native.stdout.decode() == f"{mnt}\nhello.txt\n0\n", native.stderr
    r = world.view(user, ["-p", "fs"], f"vumount -t squashfs {world.image('squashfs')} {link} && "
                   + script.replace("UMOUNT", "vuumount"))
    assert r.stdout.decode() == native.stdout.decode(), r.stderr


@pytest.mark.parametrize("user", USERS)
def test_mount_errors_are_the_kernels(world, user):
    need_user(user)
    d = world.scratch(user, "errors")
    img = world.image("squashfs")
    closed = os.path.join(d, "closed")  # root's, 0700: nobody may not look inside
    os.makedirs(os.path.join(closed, "mnt"))
    shutil.copy(img, closed)
    os.chmod(closed, 0o700)
    open(os.path.join(d, "file"), "w").close()
    # (source, target, the kernel's error, what shows it natively)
    cases = [(f"{d}/none.sqfs", d, "No such file or directory", f"cat {d}/none.sqfs"),
             (img, f"{d}/none", "No such file or directory", f"cd {d}/none"),
             (img, f"{d}/file", "Not a directory", f"cd {d}/file")]
    if user != "root":
        hidden = f"{closed}/{os.path.basename(img)}"
        cases += [(hidden, d, "Permission denied", f"cat {hidden}"),
                  (img, f"{closed}/mnt", "Permission denied", f"cd {closed}/mnt")]
    native = run(as_user(user, ["bash", "-c", "; ".join(c[3] for c in cases)]))
    assert [line.rsplit(": ", 1)[-1] for line in native.stderr.decode().splitlines()] == [c[2] for c in cases]
    r = world.view(user, ["-p", "fs"], "; ".join(f"vumount -t squashfs {src} {tgt}" for src, tgt, *_ in cases)
                   + f"; grep -c {d} /proc/self/mountinfo")
    assert r.stderr.decode().splitlines() == [f"vumount: mounting {src} on {tgt} failed: {err}"
                                              for src, tgt, err, _ in cases]
    assert r.stdout == b"0\n"


@pytest.mark.parametrize("user", USERS)
def test_umount_of_a_busy_mount_is_ebusy_and_the_mount_keeps_working(world, user):
    need_user(user)
    d = world.scratch(user, "busy")
    native = run(as_user(user, private_ns(user) + ["bash", "-c", f"mount -t tmpfs none {d} && cd {d} && umount {d}"]))
    assert native.returncode != 0 and b"busy" in native.stderr, native.stderr
    img = world.image("squashfs")
    mnt = world.scratch(user, "mnt")
    r = world.view(user, ["-p", "fs"], f"""
        vumount -t squashfs {img} {mnt} || exit 1
        cd {mnt}/sub
        vuumount {mnt}; echo "cwd inside: $?"
        cat hello.txt
        cd /
        sleep 600 < {mnt}/sub/hello.txt &
        vuumount {mnt}; echo "file open: $?"
        cat {mnt}/rel
        kill $!; wait $!
        vuumount {mnt}; echo "idle: $?"
        ls -A {mnt} | wc -l""")
    assert r.stdout.decode().splitlines() == [
        "cwd inside: 32", "hello from the image", "file open: 32", "hello from the image", "idle: 0", "0"], r.stderr
    assert r.stderr.decode().count("Device or resource busy") == 2, r.stderr


# --- tmpfs ---

@pytest.mark.parametrize("user", USERS)
def test_tmpfs_of_1m_refuses_more_and_its_files_vanish_with_it(world, user):
    need_user(user)
    d = world.scratch(user, "tmpfs")
    native = run(as_user(user, private_ns(user) + [
        "bash", "-c", f"mount -t tmpfs -o size=1m none {d} && head -c 2000000 /dev/zero > {d}/big"]))
    assert native.returncode != 0 and b"No space left on device" in native.stderr, native.stderr
    r = world.view(user, ["-p", "fs"], f"""
        vumount -t tmpfs -o size=1m none {d} || exit 1
        echo small > {d}/small && cat {d}/small
        head -c 2000000 /dev/zero > {d}/big; echo "big: $?"
        [ "$(stat -c %s {d}/big)" -le 1048576 ] && echo at most 1m
        df --output=size {d} | tail -n 1
        vuumount {d}; echo "umount: $?"
        ls -A {d} | wc -l""")
    assert r.stdout.decode().split() == ["small", "big:", "1", "at", "most", "1m", "1024",
                                         "umount:", "0", "0"], r.stderr
    assert "No space left on device" in r.stderr.decode()
    assert os.listdir(d) == []


# --- the host sees nothing, and nothing outlives the monitor ---

@pytest.mark.parametrize("user", USERS)
def test_host_mount_table_is_untouched_and_a_killed_monitor_leaves_nothing(world, user):
    need_user(user)
    img, mnt = rw_ext4(world, user)
    tmp = world.scratch(user, "tmpfs")
    outside = subprocess.Popen(["sleep", "600"])  # a process outside the view

    def of_the_view():  # (pid, command line) of this session's processes but outside
        return [(pid, cmd) for pid, cmd in marked_processes() if pid != outside.pid]

    try:
        assert of_the_view() == []
        host_before = mount_lines(world.base), mount_lines(world.base, outside.pid)
        assert host_before == ([], [])
        proc = subprocess.Popen(
            umview_for(user, "-p", f"fs,mount={img}:{mnt}:ext4", "--", "bash", "-c",
                       f"vumount -t tmpfs -o size=1m none {tmp} && echo kept > {mnt}/written && cd {mnt}/sub && "
                       f"grep -c ' {world.base}/' /proc/self/mountinfo && exec sleep 600"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=world.env(user))
        try:
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            line = proc.stdout.readline() if ready else b""
            assert line == b"2\n", (line, proc.stderr.read1() if proc.poll() is not None else b"")
            # inside, the view shows its two mounts; outside, nothing changed
            assert (mount_lines(world.base), mount_lines(world.base, outside.pid)) == host_before
            deadline = time.monotonic() + 10
            while not any(cmd == "sleep 600" for _, cmd in of_the_view()) and time.monotonic() < deadline:
                time.sleep(0.05)  # bash is yet to exec it
            procs = of_the_view()
            assert any(cmd.startswith("fuse2fs ") for _, cmd in procs), procs
            helpers = [pid for pid, _ in procs if pid != proc.pid and mount_lines(world.base, pid)]
            assert helpers, f"no process of the view has the mounts in its table: {procs}"
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        deadline = time.monotonic() + 10
        while of_the_view() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert of_the_view() == [], "left after kill -9 of the monitor"
        assert (mount_lines(world.base), mount_lines(world.base, outside.pid)) == host_before
        anywhere = [p for p in os.listdir("/proc") if p.isdigit() and mount_lines(world.base, p)]
        assert anywhere == [], f"processes that still see a mount: {anywhere}"
        assert os.listdir(mnt) == [] and os.listdir(tmp) == []
        # the image's server finished its work: the write is there, the image clean
        fsck = run(["e2fsck", "-fn", img])
        assert fsck.returncode == 0, fsck.stdout + fsck.stderr
        assert run(["debugfs", "-R", "cat /written", img]).stdout == b"kept\n"
    finally:
        outside.kill()
        outside.wait()


# --- mount(8) and umount(8) as root ---

def no_loop_device_left(img, timeout=5):
    """Is no loop device on img left (the kernel clears one after its last
    user, not always at once)?"""
    deadline = time.monotonic() + timeout
    while run(["losetup", "-j", img]).stdout.strip():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_mount8_as_root_serves_the_image_file_and_its_loop_device_goes_at_once(world):
    need_user("root")
    need("losetup", "mount", "umount", "findmnt")
    if not os.path.exists("/dev/loop-control"):
        pytest.skip("no loop devices here (/dev/loop-control)")
    img, sqfs = world.image("ext4"), world.image("squashfs")
    mnt = world.scratch("root", "mnt")
    # natively mount(8) sets up a loop device for an image file, kept while
    # mounted; in the view the server reads the file behind it, and the
    # device (autoclear) goes when mount(8) closes it
    native = run(private_ns("root") + ["bash", "-c", f"mount -o ro {img} {mnt} && losetup -j {img} | wc -l; "
                                       f"findmnt -n -o SOURCE {mnt}; umount {mnt}"])
    assert native.stdout.decode().split("\n")[0] == "1" and "/dev/loop" in native.stdout.decode(), native.stderr
    assert no_loop_device_left(img)
    r = world.view("root", ["-p", "fs"], f"""set -e
        mount -o ro {img} {mnt}
        for i in $(seq 50); do [ -z "$(losetup -j {img})" ] && break; sleep 0.1; done
        losetup -j {img} | wc -l
        findmnt -n -o FSTYPE,SOURCE {mnt} | tr -s ' '
        cat {mnt}/rel
        umount {mnt}
        mount -t squashfs {sqfs} {mnt}
        cat {mnt}/sub/hello.txt
        cd {mnt} && (umount {mnt} || echo "busy: $?") && cd /
        umount {mnt}
        ls -A {mnt} | wc -l""")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == [
        "0", f"fuse.ext4 {img}", "hello from the image", "hello from the image", "busy: 32", "0"], r.stderr
    assert b"target is busy" in r.stderr
    assert no_loop_device_left(img) and no_loop_device_left(sqfs)


# --- ISO 9660: fuseiso's own mount table ---

@pytest.mark.parametrize("user", USERS)
def test_iso_mount_writes_nothing_in_the_users_home(world, user):
    need_user(user)
    need("fuseiso")
    iso = world.image("iso9660")
    home = pwd.getpwuid(uid_of(user)).pw_dir
    mtab = os.path.join(home, ".mtab.fuseiso")
    mnt = world.scratch(user, "mnt")
    if user == "root":
        # natively fuseiso keeps ~/.mtab.fuseiso (of the passwd entry, not
        # $HOME): shown on a tmpfs over the home, in a private namespace
        native = run(private_ns(user) + ["bash", "-c", f"mount -t tmpfs none {home} && fuseiso {iso} {mnt} && "
                                         f"cat {mnt}/rel; umount {mnt}; ls -A {home}"])
        assert native.stdout == b"hello from the image\n.mtab.fuseiso\n", native.stderr

    def state():
        try:
            st = os.lstat(mtab)
            return st.st_mtime_ns, st.st_size
        except OSError:
            return None

    before = state()
    r = world.view(user, ["-p", "fs"], f"vumount -t iso9660 {iso} {mnt} && cat {mnt}/rel && vuumount {mnt}")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hello from the image\n"
    assert state() == before


def test_an_image_mounts_over_a_directory_with_files_as_mount_does(tmp_path):
    # mount(2) takes a directory that has files and hides them while
    # mounted; a libfuse 2 server (fuse2fs, fuse-zip, archivemount, fuseiso,
    # fusefat) refused one ("mountpoint is not empty"), so the README's
    # `-p fs,mount=disk.img:/mnt` failed where /mnt held anything
    need_user("root")
    need("mkfs.ext4", "fuse2fs")
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    (src / "in-the-image").write_text("image\n")
    mnt.mkdir()
    (mnt / "under-the-mount").write_text("hidden\n")
    img = tmp_path / "d.img"
    run(["mkfs.ext4", "-q", "-O", "^has_journal", "-d", str(src), str(img), "8M"])
    r = run(umview_for("root", "-p", f"fs,mount={img}:{mnt}", "--", "ls", str(mnt)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == ["in-the-image", "lost+found"]
    assert sorted(os.listdir(mnt)) == ["under-the-mount"]  # there again after the view
