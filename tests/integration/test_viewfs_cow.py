"""viewfs in modes cow, mincow and merge.

A differential test on a scratch tree: the same shell script runs natively on a
copy of the tree and under umview in a layered view of the original; the trees
the two runs leave (as the view shows it) must be the same, and what the
original became must follow the mode (cow: untouched; mincow, for a tree the
user may write, and merge: changed as natively). A second view on the same
layer sees what the first one left.

Then the acceptance of a copy-on-write view of `/`: a program believes it
changed the system (files in /etc, /usr/local, /opt, /srv, a pip install into
the system site-packages, a git repository) while every real file stays
byte-identical; the layer holds the changes and a later view sees them. And
bad input in such a view gives the errno the kernel gives natively.
"""
import base64
import csv
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile

import pytest

from conftest import NOBODY, as_user, need_user, run, umview_argv, umview_for  # noqa: F401
from umview.modules.viewfs import layerfmt

HERE = os.path.dirname(os.path.abspath(__file__))
PROGS = os.path.join(HERE, "progs")
USERS = ["root", "nobody"]


@pytest.fixture
def scratch():
    """A temporary directory that an unprivileged user may reach (pytest's
    tmp_path is mode 0700 under root's own directory)."""
    d = tempfile.mkdtemp(prefix="umview-cow-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def chown_tree(path, uid):
    for dirpath, dirnames, filenames in os.walk(path):
        os.lchown(dirpath, uid, uid)
        for n in dirnames + filenames:
            os.lchown(os.path.join(dirpath, n), uid, uid)


# --- what a tree looks like: names, types, modes, contents, link targets ------------

SNAPSHOT = r"""
import hashlib, json, os, stat, sys
out = {}
root = sys.argv[1]
for dirpath, dirnames, filenames in os.walk(root):
    dirnames.sort()
    for n in sorted(dirnames + filenames):
        p = os.path.join(dirpath, n)
        st = os.lstat(p)
        rel = os.path.relpath(p, root)
        if stat.S_ISLNK(st.st_mode):
            out[rel] = ["l", os.readlink(p)]
        elif stat.S_ISDIR(st.st_mode):
            out[rel] = ["d", oct(stat.S_IMODE(st.st_mode))]
        elif stat.S_ISREG(st.st_mode):
            with open(p, "rb") as f:
                out[rel] = ["f", oct(stat.S_IMODE(st.st_mode)), hashlib.sha256(f.read()).hexdigest()]
        else:
            out[rel] = ["?", oct(st.st_mode)]
print(json.dumps(out, sort_keys=True))
"""


def snapshot(root):
    """The tree under root, as this process sees it."""
    r = subprocess.run([sys.executable, "-c", SNAPSHOT, root], capture_output=True, check=True)
    return json.loads(r.stdout)


def make_tree(root):
    """A scratch tree with a bit of everything the script changes."""
    def w(rel, data, mode=0o644):
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(data)
        os.chmod(p, mode)

    for rel in ("file1", "file2", "file3", "file4", "touched", "replaced"):
        w("lower/" + rel, f"lower {rel}\n")
    w("lower/exec", "#!/bin/sh\necho hi\n", 0o755)
    w("lower/trunc", "0123456789\n")
    w("lower/subdir/a", "a\n")
    w("lower/subdir/deeper/b", "b\n")
    w("lower/cpsrc/x", "x\n", 0o600)
    os.symlink("x", os.path.join(root, "lower/cpsrc/lx"))
    w("lowerdir2/inner/f", "inner\n")
    w("lowerdir2/g", "g\n", 0o640)
    w("full/f", "full\n")
    os.symlink("lower/file1", os.path.join(root, "lnk"))
    os.makedirs(os.path.join(root, "opt"))
    os.makedirs(os.path.join(root, "empty"))
    os.chmod(os.path.join(root, "lowerdir2/inner"), 0o750)


SCRIPT = r"""
set -u
cd "$ROOT" || exit 99
s() { "$@"; echo "$* -> $?"; }
s sh -c 'echo x > new.txt'
s sh -c 'echo more >> lower/file1'
s rm lower/file2
s rm -r lower/subdir
s mkdir -p a/b/c
s mv lower/file3 a/b/file3
s mv lowerdir2 moved2
s mkdir newdir
s sh -c 'echo n > newdir/f'
s mv newdir newdir2
s chmod 600 lower/file1
s chmod 700 lower/exec
s chmod 711 moved2/inner
s ln -s ../lower/file1 a/link
s ln lower/file4 a/hard
s sh -c 'echo via-hard-link >> a/hard'
s cat lower/file4
s touch lower/touched new-touched
s truncate -s 3 lower/trunc
s cp -a lower/cpsrc cpdst
s tar xf "$TARBALL" -C opt
s mkdir lower/subdir
s sh -c 'echo again > lower/subdir/new'
s rm lnk
s ln -s lower/exec lnk
s rmdir empty
s mkdir empty
python3 - <<'EOF'
import errno, os
def attempt(label, f, *a):
    try:
        f(*a)
        print(label, "ok")
    except OSError as e:
        print(label, errno.errorcode[e.errno])
attempt("rename over an existing file:", os.rename, "new.txt", "lower/replaced")
attempt("O_CREAT|O_EXCL on a lower file:", os.open, "lower/file4", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
attempt("rmdir of a non-empty dir:", os.rmdir, "full")
attempt("rmdir of a non-empty copied-up dir:", os.rmdir, "lower")
attempt("mkdir of an existing dir:", os.mkdir, "lower")
attempt("unlink of a dir:", os.unlink, "lower")
attempt("unlink of a removed file:", os.unlink, "lower/file2")
attempt("rename to a missing dir:", os.rename, "lower/touched", "nodir/x")
for d in (".", "lower", "a", "a/b", "moved2", "opt", "lower/subdir"):
    print(d, sorted(os.listdir(d)))
print(open("lower/replaced").read(), end="")
print(open("lower/file1").read(), end="")
print(os.readlink("a/link"), os.readlink("lnk"))
print(os.stat("a/hard").st_nlink, os.path.samestat(os.stat("a/hard"), os.stat("lower/file4")))
EOF
s cat a/link moved2/inner/f newdir2/f opt/t/readme
find . -mindepth 1 | sort
"""


def make_tarball(path):
    src = path + ".src"
    os.makedirs(src + "/t/sub")
    with open(src + "/t/readme", "w") as f:
        f.write("from the tarball\n")
    with open(src + "/t/sub/tool", "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(src + "/t/sub/tool", 0o755)
    os.symlink("sub/tool", src + "/t/tool")
    subprocess.run(["tar", "cf", path, "-C", src, "t"], check=True)
    shutil.rmtree(src)


def script_env(root, scratch):
    return dict(os.environ, ROOT=root, TARBALL=os.path.join(scratch, "t.tar"), LC_ALL="C", HOME=scratch,
                PATH="/usr/local/bin:/usr/bin:/bin")


@pytest.fixture
def trees(scratch):
    """(original tree, native copy, layer): the copy, made with cp -a, is what
    the script runs on natively."""
    orig, native, layer = (os.path.join(scratch, n) for n in ("orig", "native", "layer"))
    os.mkdir(orig)
    make_tree(orig)
    make_tarball(os.path.join(scratch, "t.tar"))
    subprocess.run(["cp", "-a", orig, native], check=True)
    return orig, native, layer


def view_argv(user, layer, target, mode, *cmd):
    return umview_for(user, "-p", f"viewfs,mount={layer}:{target}:{mode}", "--", *cmd)


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("mode", ["cow", "mincow", "merge"])
def test_script_in_a_layered_view_does_what_it_does_natively(trees, scratch, mode, user):
    need_user(user)
    orig, native, layer = trees
    if user != "root":
        chown_tree(scratch, NOBODY)
    before = snapshot(orig)
    nat = run(as_user(user, ["bash", "-c", SCRIPT]), env=script_env(native, scratch), cwd=scratch)
    assert nat.returncode == 0, nat.stderr
    assert b"-> 1" not in nat.stdout, nat.stdout.decode()  # the script itself is sound
    expected = snapshot(native)
    viewed = run(view_argv(user, layer, orig, mode, "bash", "-c", SCRIPT + '\npython3 -c "$SNAP" "$ROOT"'),
                 env=dict(script_env(orig, scratch), SNAP=SNAPSHOT), cwd=scratch)
    out, _, snap = viewed.stdout.decode().rpartition("\n{")
    assert out.splitlines() == nat.stdout.decode().splitlines(), viewed.stderr.decode()
    assert (viewed.stderr.decode(), viewed.returncode) == (nat.stderr.decode(), nat.returncode)
    assert json.loads("{" + snap) == expected
    # the real tree: untouched by cow, changed as natively by mincow (the user
    # may write all of it); merge changes what was there in place and puts new
    # names in the layer, so only the union is checked
    if mode == "cow":
        assert snapshot(orig) == before
        assert os.listdir(layer)
    elif mode == "mincow":
        assert snapshot(orig) == expected
    # a second view on the same layer sees the same tree
    again = run(view_argv(user, layer, orig, mode, "python3", "-c", SNAPSHOT, orig), env=script_env(orig, scratch))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == expected


# --- a copy-on-write view of / -------------------------------------------------------

PKG = "umview_probe_pkg"


def make_wheel(directory):
    """A tiny pure-Python wheel, written by hand (no build, no network)."""
    files = {
        f"{PKG}/__init__.py": b'VALUE = "probe 1.0"\n',
        f"{PKG}-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: umview-probe-pkg\nVersion: 1.0\n",
        f"{PKG}-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([name, f"sha256={digest}", len(data)])
    writer.writerow([f"{PKG}-1.0.dist-info/RECORD", "", ""])
    files[f"{PKG}-1.0.dist-info/RECORD"] = record.getvalue().encode()
    path = os.path.join(directory, f"{PKG}-1.0-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return path


ACCEPTANCE = r"""
set -eu
echo x > /etc/umview-probe
rm /etc/hostname
mkdir -p /usr/local/share/p
mv /etc/umview-probe /etc/umview-probe2
mv /etc/debian_version /usr/local/share/p/debian_version
chmod 600 /etc/issue
ln -s /etc/umview-probe2 /usr/local/share/p/link
mkdir /opt/umview-probe
tar xf "$TARBALL" -C /opt/umview-probe
/usr/bin/python3 -m pip install -q --no-index --no-cache-dir --break-system-packages \
    --disable-pip-version-check --root-user-action=ignore "$WHEEL"
cd /srv
git init -q
echo hello > README
git add README
git -c user.name=umview -c user.email=umview@example.org commit -q -m 'first commit'
echo done
"""

CHECK = r"""
set -u
cat /etc/umview-probe2 /usr/local/share/p/link /opt/umview-probe/t/readme
test -e /etc/hostname && echo hostname still there
test -e /etc/umview-probe && echo probe still there
test -e /etc/debian_version && echo debian_version still there
cmp -s /usr/local/share/p/debian_version "$SCRATCH/debian_version" && echo debian_version moved
stat -c %a /etc/issue
/usr/bin/python3 -c 'import umview_probe_pkg as p, os; print(p.VALUE); print(os.path.dirname(p.__file__))'
git -C /srv log --format=%s
ls /srv/.git/HEAD
"""


def fingerprint(roots, contents=True, limit=4 << 20):
    """{path: what it is} for everything under roots, not following links:
    type and mode, link target, and the sha256 of regular files (of those up
    to `limit` bytes; size, mtime and ctime of larger ones: any write
    changes the ctime)."""
    out = {}

    def one(p):
        st = os.lstat(p)
        kind = stat.S_IFMT(st.st_mode)
        entry = [kind, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid]
        if stat.S_ISLNK(st.st_mode):
            entry.append(os.readlink(p))
        elif stat.S_ISREG(st.st_mode) and contents:
            if st.st_size <= limit:
                with open(p, "rb") as f:
                    entry.append(hashlib.sha256(f.read()).hexdigest())
            else:
                entry += [st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        out[p] = tuple(entry)

    for root in roots:
        one(root)
        for dirpath, dirnames, filenames in os.walk(root):
            for n in dirnames + filenames:
                one(os.path.join(dirpath, n))
    return out


def outside():
    """What the real system looks like where the acceptance script writes."""
    top = {os.path.join("/", n): os.lstat(os.path.join("/", n)).st_mode for n in os.listdir("/")}
    return top, fingerprint(["/etc", "/usr/local", "/opt", "/srv"])


@pytest.mark.parametrize("user", USERS)
def test_cow_view_of_root_changes_nothing_real(scratch, user):
    need_user(user)
    for prog in ("git", "tar"):
        if shutil.which(prog) is None:
            pytest.skip(f"needs {prog}")
    if subprocess.run(["/usr/bin/python3", "-m", "pip", "--version"], capture_output=True).returncode:
        pytest.skip("needs pip for /usr/bin/python3")
    if not os.path.exists("/etc/hostname") or not os.path.exists("/etc/debian_version") \
            or not os.path.exists("/etc/issue"):
        pytest.skip("needs /etc/hostname, /etc/debian_version and /etc/issue")
    make_tarball(os.path.join(scratch, "t.tar"))
    wheel = make_wheel(scratch)
    shutil.copy("/etc/debian_version", os.path.join(scratch, "debian_version"))
    layer = os.path.join(scratch, "layer")
    home = os.path.join(scratch, "home")
    os.mkdir(home)
    if user != "root":
        chown_tree(scratch, NOBODY)
    env = dict(os.environ, TARBALL=os.path.join(scratch, "t.tar"), WHEEL=wheel, SCRATCH=scratch, HOME=home,
               LC_ALL="C", PATH="/usr/local/bin:/usr/bin:/bin", PIP_CONFIG_FILE="/dev/null")
    env.pop("PYTHONPATH", None)
    before = outside()
    viewed = run(view_argv(user, layer, "/", "cow", "bash", "-c", ACCEPTANCE + CHECK), env=env, cwd=scratch)
    after = outside()
    assert viewed.returncode == 0, viewed.stderr.decode()
    lines = viewed.stdout.decode().splitlines()
    assert lines[0] == "done", viewed.stderr.decode()
    expected_check = ["x", "x", "from the tarball", "debian_version moved", "600", "probe 1.0"]
    assert lines[1:7] == expected_check, viewed.stderr.decode()
    site = lines[7]
    assert site.startswith("/usr/"), site  # the system's site-packages, not the user's
    assert lines[8:] == ["first commit", "/srv/.git/HEAD"]
    # outside: every real file as it was, nothing new
    assert after[0] == before[0]
    assert after[1] == before[1]
    for p in ("/etc/umview-probe", "/etc/umview-probe2", "/usr/local/share/p", "/opt/umview-probe",
              "/srv/.git", "/srv/README", site):
        assert not os.path.lexists(p), p
    assert os.path.exists("/etc/hostname")
    # the layer holds the changes
    for rel in ("etc/hostname", "etc/debian_version"):
        assert layerfmt.is_whiteout(os.lstat(os.path.join(layer, rel))), rel
    for rel in ("etc/umview-probe2", "etc/issue",
                "usr/local/share/p/link", "usr/local/share/p/debian_version", "opt/umview-probe/t/readme",
                "srv/.git/HEAD", "srv/README", site.lstrip("/") + "/__init__.py"):
        assert os.path.lexists(os.path.join(layer, rel)), rel
    # a second view on the same layer sees them
    again = run(view_argv(user, layer, "/", "cow", "bash", "-c", CHECK), env=env, cwd=scratch)
    assert again.stdout.decode().splitlines() == lines[1:], again.stderr.decode()
    assert outside() == before


# --- bad input in a cow view of / ------------------------------------------------------

LOOPS = r"""
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
os.chdir(d)
os.symlink("loop2", "loop1")
os.symlink("loop1", "loop2")
os.symlink("self", "self")
with open("file", "w") as f:
    f.write("a file\n")
def attempt(label, f, *a, **kw):
    try:
        r = f(*a, **kw)
        if isinstance(r, int) and (label.startswith("open") or ": open" in label):
            os.close(r)
        print(label, "ok")
    except OSError as e:
        print(label, errno.errorcode[e.errno])
for p in ("loop1", "self", "loop1/x", d + "/loop2/x/y"):
    attempt(f"open {p[-9:]}:", os.open, p, os.O_RDONLY)
    attempt(f"open O_CREAT {p[-9:]}:", os.open, p, os.O_WRONLY | os.O_CREAT, 0o600)
    attempt(f"stat {p[-9:]}:", os.stat, p)
    attempt(f"lstat {p[-9:]}:", os.lstat, p)
    attempt(f"mkdir {p[-9:]}:", os.mkdir, p + "/sub")
    attempt(f"chdir {p[-9:]}:", os.chdir, p)
    attempt(f"chmod {p[-9:]}:", os.chmod, p, 0o600)
    attempt(f"rename to {p[-9:]}:", os.rename, "file", p + "/f")
for flags in (os.O_RDONLY, os.O_RDONLY | os.O_PATH, os.O_RDWR):
    fd = os.open("file", flags)
    for label, f, a in (("openat", os.open, ("x", os.O_RDONLY)), ("openat-creat", os.open, ("x", os.O_CREAT | os.O_WRONLY, 0o600)),
                        ("mkdirat", os.mkdir, ("x",)), ("stat", os.stat, ("x",)), ("unlinkat", os.unlink, ("x",)),
                        ("symlinkat", None, None), ("readlinkat", os.readlink, ("x",))):
        if f is None:
            attempt(f"file dirfd {flags}: {label}:", os.symlink, "t", "x", dir_fd=fd)
        else:
            attempt(f"file dirfd {flags}: {label}:", f, *a, dir_fd=fd)
    os.close(fd)
attempt("unlink loop1:", os.unlink, "loop1")
print(sorted(os.listdir(".")))
"""


def test_bad_input_in_a_cow_view_of_root_fails_as_natively(scratch):
    layer = os.path.join(scratch, "layer")
    work = os.path.join(scratch, "work")
    os.mkdir(work)
    env = dict(os.environ, PATH="/usr/local/bin:/usr/bin:/bin", LC_ALL="C")
    argv = [sys.executable, os.path.join(PROGS, "bad_paths.py")]
    native = run(argv, cwd=work, env=env)
    viewed = run(umview_argv("-p", f"viewfs,mount={layer}:/:cow", "--", *argv), cwd=work, env=env)
    assert native.returncode == 0, native.stderr
    for line in ("path of 1 MiB: openat: ENAMETOOLONG", "last 3 bytes of a page: openat: EFAULT",
                 "file dirfd: openat: ENOTDIR"):
        assert line.encode() in native.stdout
    assert viewed.stdout.decode() == native.stdout.decode()
    assert (viewed.stderr, viewed.returncode) == (native.stderr, native.returncode)
    assert os.listdir(work) == []
    # symlink loops and a file as dirfd: in a real directory (natively) and in
    # one the view made (the layer holds it)
    native = run([sys.executable, "-c", LOOPS, os.path.join(scratch, "native-loops")], env=env)
    assert native.returncode == 0, native.stderr
    assert b"open loop1: ELOOP" in native.stdout and b"file dirfd 0: openat: ENOTDIR" in native.stdout
    for where in (os.path.join(scratch, "view-loops"), "/srv/umview-loops"):
        viewed = run(umview_argv("-p", f"viewfs,mount={layer}:/:cow", "--", sys.executable, "-c", LOOPS, where),
                     env=env)
        assert viewed.stdout.decode() == native.stdout.decode(), where
        assert (viewed.stderr, viewed.returncode) == (native.stderr, native.returncode)
    assert not os.path.lexists(os.path.join(scratch, "view-loops"))
    assert not os.path.lexists("/srv/umview-loops")


FD_CHANGES = r"""
import os, sys
root = sys.argv[1]
f = os.open(root + "/f", os.O_RDONLY)
d = os.open(root + "/d", os.O_RDONLY | os.O_DIRECTORY)
os.fchmod(f, 0o600)
os.utime(f, (7, 7))               # futimens: utimensat(fd, NULL, ...)
os.fchmod(d, 0o700)
os.chown(f, 1, 1)                 # fchown
os.setxattr(f, "user.umview", b"1")
print(oct(os.stat(root + "/f").st_mode), os.stat(root + "/f").st_mtime, os.stat(root + "/f").st_uid,
      oct(os.stat(root + "/d").st_mode), os.getxattr(root + "/f", "user.umview"))
"""


def test_changes_through_an_fd_of_a_lower_file_are_made_on_a_copy(scratch):
    # fchmod, futimens, fchown and fsetxattr act on an open file, not a path:
    # on a file of the lower layer they must land on its copy, never the real file
    need_user("root")
    low = os.path.join(scratch, "low")
    os.makedirs(os.path.join(low, "d"))
    with open(os.path.join(low, "f"), "w") as f:
        f.write("real\n")
    os.utime(os.path.join(low, "f"), (1000, 1000))
    try:
        os.setxattr(os.path.join(scratch, "low", "f"), "user.probe", b"0")
        os.removexattr(os.path.join(scratch, "low", "f"), "user.probe")
    except OSError:
        pytest.skip("this file system has no user xattrs")
    before = fingerprint([low])
    stats = [os.stat(os.path.join(low, n)) for n in ("f", "d")]
    r = run(view_argv("root", os.path.join(scratch, "layer"), "/", "cow", sys.executable, "-c", FD_CHANGES, low))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == ["0o100600", "7.0", "1", "0o40700", "b'1'"]
    assert fingerprint([low]) == before
    after = [os.stat(os.path.join(low, n)) for n in ("f", "d")]
    assert [(s.st_mode, s.st_mtime_ns, s.st_uid, s.st_ctime_ns) for s in after] == \
        [(s.st_mode, s.st_mtime_ns, s.st_uid, s.st_ctime_ns) for s in stats]
    assert os.listxattr(os.path.join(low, "f")) == []


SOCKETS = r"""
import os, socket, sys
path = os.path.join(sys.argv[1], "s")
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
srv.listen(1)
cli = socket.socket(socket.AF_UNIX)
cli.connect(path)
conn, _ = srv.accept()
cli.sendall(b"ping")
print(conn.recv(4).decode(), os.path.exists(path))
"""


def test_unix_socket_bound_in_a_cow_view_lives_in_the_layer_even_with_a_long_path(scratch):
    # the layer's path is longer than the view's: past 108 bytes, sun_path
    # cannot hold it, and the socket must still be made (in the layer)
    need_user("root")
    deep = os.path.join(scratch, "low", "d" * 40)
    os.makedirs(deep)
    layer = os.path.join(scratch, "l" * 40)
    assert len(os.path.join(deep, "s")) < 108 <= len(layer + os.path.join(deep, "s"))
    r = run(view_argv("root", layer, "/", "cow", sys.executable, "-c", SOCKETS, deep))
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"ping True\n"
    assert not os.path.exists(os.path.join(deep, "s"))
    assert stat.S_ISSOCK(os.lstat(layer + os.path.join(deep, "s")).st_mode)


@pytest.mark.parametrize("mode", ["cow", "move"])
def test_unix_socket_names_read_back_as_bound(scratch, mode):
    # the kernel keeps the name a socket was bound by, and getsockname,
    # getpeername and accept give it back (progs/unixnames.c: relative,
    # absolute and 108-byte names, short buffers); the view bound the
    # layer's (or the mount's source's) name, which the process must not see
    need_user("root")
    exe = os.path.join(scratch, "unixnames")
    subprocess.run(["gcc", "-O2", "-o", exe, os.path.join(PROGS, "unixnames.c")], check=True)
    low = os.path.join(scratch, "low", "d" * 20)
    os.makedirs(low)
    native = run([exe, low])
    assert native.returncode == 0, native.stdout
    assert b"path=rel.sock" in native.stdout and b"len=111 path=nnnn" in native.stdout
    shutil.rmtree(low)
    os.makedirs(low)
    if mode == "cow":
        source, target = os.path.join(scratch, "l" * 60), "/"
    else:
        source, target = os.path.join(scratch, "s" * 60), low
        os.makedirs(source)
    r = run(view_argv("root", source, target, mode, exe, low))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.decode() == native.stdout.decode()
    assert os.listdir(low) == []  # every socket was made in the layer or the source


BUSY = r"""
import os, subprocess, sys, time
prog = sys.argv[1]
p = subprocess.Popen([prog, "30"])
time.sleep(0.3)
for what, act in (("open-w", lambda: os.close(os.open(prog, os.O_WRONLY))),
                  ("open-rw", lambda: os.close(os.open(prog, os.O_RDWR))),
                  ("open-rdonly-trunc", lambda: os.close(os.open(prog, os.O_RDONLY | os.O_TRUNC))),
                  ("creat", lambda: os.close(os.open(prog, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))),
                  ("truncate", lambda: os.truncate(prog, 0)),
                  ("open-r-creat", lambda: os.close(os.open(prog, os.O_RDONLY | os.O_CREAT)))):
    try:
        act()
        print(what, "ok")
    except OSError as e:
        print(what, e.strerror)
p.kill()
p.wait()
os.close(os.open(prog, os.O_WRONLY | os.O_APPEND))  # once it ends, writable again
print("after", "ok")
"""


@pytest.mark.parametrize("user", USERS)
def test_a_running_program_cannot_be_opened_for_writing(scratch, user):
    # the kernel refuses write access to a file some process runs (ETXTBSY),
    # after the permission checks; a copy-up would have given the writer a
    # copy of it instead (strace's creat test)
    need_user(user)
    low = os.path.join(scratch, "low")
    os.makedirs(low)
    prog = os.path.join(low, "prog")
    shutil.copy("/bin/sleep", prog)
    if user != "root":
        chown_tree(scratch, NOBODY)
    native = run(as_user(user, ["/usr/bin/python3", "-c", BUSY, prog]))
    assert native.returncode == 0, native.stderr
    assert b"creat Text file busy" in native.stdout  # the kernel's own answer
    shutil.copy("/bin/sleep", prog)
    before = fingerprint([low])
    r = run(view_argv(user, os.path.join(scratch, "layer"), "/", "cow", "/usr/bin/python3", "-c", BUSY, prog))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == native.stdout.decode()
    assert fingerprint([low]) == before


INODES = r"""
import os, sys
root = sys.argv[1]
open(os.path.join(root, "new"), "w").close()   # the directory is now merged
os.unlink(os.path.join(root, "gone"))
for d in (root, os.path.join(root, "sub")):
    for e in sorted(os.scandir(d), key=lambda e: e.name):
        print(e.name, e.inode() == os.lstat(e.path).st_ino)
"""


def test_listing_of_a_merged_directory_gives_each_files_own_inode(scratch):
    # the listing comes from placeholders: d_ino must still be what stat says
    need_user("root")
    low = os.path.join(scratch, "low")
    os.makedirs(os.path.join(low, "sub"))
    for n in ("f", "gone", "sub/g"):
        open(os.path.join(low, n), "w").close()
    os.symlink("f", os.path.join(low, "l"))
    r = run(view_argv("root", os.path.join(scratch, "layer"), "/", "cow", sys.executable, "-c", INODES, low))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split("\n") == ["f True", "l True", "new True", "sub True", "g True", ""]
    r = run(view_argv("root", os.path.join(scratch, "layer"), "/", "cow", "ls", "-ia", low))
    inodes = dict(reversed(line.split()) for line in r.stdout.decode().splitlines())
    r2 = run(view_argv("root", os.path.join(scratch, "layer"), "/", "cow", "stat", "-c", "%n %i",
                       low, os.path.dirname(low), *(os.path.join(low, n) for n in ("f", "l", "new", "sub"))))
    stats = dict(line.split() for line in r2.stdout.decode().splitlines())
    assert inodes == {".": stats[low], "..": stats[os.path.dirname(low)],
                      **{n: stats[os.path.join(low, n)] for n in ("f", "l", "new", "sub")}}


NEW_DIR_WORK = r"""
import os, sys
root = sys.argv[1]
os.mkdir(os.path.join(root, "new"))
os.chdir(os.path.join(root, "new"))
for i in range(200):
    with open(f"f{i}", "w") as f:
        f.write(str(i))
    os.stat(f"f{i}")
    os.chdir(".")
os.mkdir("sub")
fd = os.open("sub", os.O_RDONLY)
print(os.getcwd() == os.path.join(root, "new"), len(os.listdir(".")))
print(open("../lower-file").read(), open(os.open("../../lower-file", os.O_RDONLY, dir_fd=fd)).read())
os.fchdir(fd)
print(os.getcwd() == os.path.join(root, "new", "sub"), open("../f7").read())
"""


def test_work_in_a_new_directory_stays_with_the_kernel_and_dotdot_leads_to_the_view(scratch):
    # a directory only the layer holds shows the same names as its real
    # upper directory: the kernel resolves relative names there by itself;
    # ".." (from the cwd or a dirfd) climbs into the view, lower names included
    need_user("root")
    low = os.path.join(scratch, "low")
    os.makedirs(low)
    with open(os.path.join(low, "lower-file"), "w") as f:
        f.write("lower")
    stats = os.path.join(scratch, "stats.json")
    r = run(umview_for("root", "--stats-file", stats, "-p", f"viewfs,mount={scratch}/layer:/:cow", "--",
                       sys.executable, "-c", NEW_DIR_WORK, low))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split("\n") == ["True 201", "lower lower", "True 7", ""]
    assert not os.path.exists(os.path.join(low, "new"))
    with open(stats) as f:
        counts = json.loads(f.readline())
    # 600 calls on names in the new directory (chdir(".") among them): a few
    # dozen reach Python
    assert counts["python_events"] < 100, counts


MERGED_DIR_WORK = r"""
import os, sys
root = sys.argv[1]
with open(os.path.join(root, "made-here"), "w") as f:  # natively new, in a view a copy-up
    f.write("made")
os.chdir(root)
for i in range(100):
    os.chdir(".")
    os.stat("lower-file")
os.chdir("sub")
os.chdir("..")
print(os.getcwd() == root, sorted(os.listdir(".")), open("lower-file").read(), open("made-here").read())
print(os.path.samefile(".", root), os.readlink("/proc/self/cwd") == root)
"""


def test_work_in_a_merged_directory_stays_with_the_kernel(scratch):
    # a directory of the lower layer that the upper one also has (a file
    # made in it): the cwd is the lower directory, whose path is the view's,
    # so chdir to it and relative names stay in C; they read as natively
    need_user("root")
    outs = {}
    for where in ("native", "view"):
        low = os.path.join(scratch, where)
        os.makedirs(os.path.join(low, "sub"))
        with open(os.path.join(low, "lower-file"), "w") as f:
            f.write("lower")
        stats = os.path.join(scratch, "stats.json")
        argv = [sys.executable, "-S", "-c", MERGED_DIR_WORK, low]
        if where == "view":
            argv = umview_for("root", "--stats-file", stats, "-p", f"viewfs,mount={scratch}/layer:/:cow", "--",
                              *argv)
        r = run(argv)
        assert r.returncode == 0, r.stderr
        outs[where] = r.stdout
    assert outs["view"] == outs["native"]
    assert b"True ['lower-file', 'made-here', 'sub'] lower made\nTrue True\n" == outs["view"]
    assert not os.path.exists(os.path.join(scratch, "view", "made-here"))
    with open(stats) as f:
        counts = json.loads(f.readline())
    # 100 chdir(".") and 100 stat in a merged directory: C's, not Python's
    assert counts["calls"]["chdir"][1] <= 3, counts["calls"]["chdir"]
    assert counts["python_events"] < 150, counts


REMADE_DIR_WORK = r"""
set -e
cd "$1"
rm -rf d && mkdir d && mkdir d/sub
ls -a d/sub; echo ---
cd d
i=0; while [ $i -lt 100 ]; do : > "f$i"; read -r x < "f$i" || :; i=$((i+1)); done
rm f*; ls -a
mkdir sub/s2; cd sub; ls -a
cat lowfile 2>/dev/null || echo "no lowfile"
echo z > lowfile; cat lowfile; rm lowfile; ls -a; cd ..
rmdir sub/s2; mv sub sub2; ls -a . sub2; mv sub2 sub; ls -a; pwd
"""


def test_a_directory_removed_and_made_again_shows_nothing_of_the_lower_one_and_stays_with_the_kernel(scratch):
    # rm -rf d && mkdir d (d opaque in the layer) && mkdir d/sub: natively
    # d/sub is empty, in the view it listed the lower d/sub's names (which
    # then could not be opened); and in d relative names went to Python
    need_user("root")
    outs = {}
    for where in ("native", "view"):
        low = os.path.join(scratch, where)
        os.makedirs(os.path.join(low, "d", "sub", "s2"))
        for name, text in (("d/sub/lowfile", "x"), ("d/f", "y")):
            with open(os.path.join(low, name), "w") as f:
                f.write(text)
        stats = os.path.join(scratch, "stats.json")
        argv = ["sh", "-c", REMADE_DIR_WORK, "sh", low]
        if where == "view":
            argv = umview_for("root", "--stats-file", stats, "-p", f"viewfs,mount={scratch}/layer:{low}:cow", "--",
                              *argv)
        r = run(argv)
        assert r.returncode == 0, r.stderr
        outs[where] = r.stdout.replace(low.encode(), b"LOW")
    assert outs["view"] == outs["native"]
    assert outs["view"].startswith(b".\n..\n---\n")
    assert os.path.exists(os.path.join(scratch, "view", "d", "sub", "lowfile"))
    # nothing of the layer's bookkeeping below the opaque d
    assert not any(n.startswith(b"lowfile") for n in os.listdir(os.path.join(scratch, "layer", "d", "sub").encode()))
    with open(stats) as f:
        counts = json.loads(f.readline())
    # 200 calls on names in d: the kernel's, in d's upper directory (about
    # 70 events in all; 1,000 when d's relative names were Python's)
    assert counts["python_events"] < 150, counts


OPEN_ONE = "import os, sys; os.close(os.open(sys.argv[1], int(sys.argv[2])))"


def test_a_new_file_in_a_cow_view_costs_one_stop_at_entry_and_one_at_exit(scratch):
    # the filter sends an open for writing under a layered mount straight to a
    # ptrace stop (Python must copy up or make the name): no notification, no
    # interrupt, no second entry; a read-only open stays a notification
    from umview.core import lib

    if not lib.um_notif_supported() or os.environ.get("UMVIEW_NOTIF") == "0":
        pytest.skip("no same-CPU seccomp notifications (Linux 6.6+), or UMVIEW_NOTIF=0")
    counts = {}
    for what, path, flags in (("read", "/etc/hostname", os.O_RDONLY),
                              ("write", "/etc/umview-new-file", os.O_WRONLY | os.O_CREAT)):
        stats = os.path.join(scratch, f"{what}.json")
        r = run(umview_for("root", "--stats-file", stats, "-p", f"viewfs,mount={scratch}/layer:/:cow", "--",
                           sys.executable, "-S", "-c", OPEN_ONE, path, str(flags)))
        assert r.returncode == 0, r.stderr
        with open(stats) as f:
            counts[what] = json.loads(f.readline())
    read, write = counts["read"], counts["write"]
    assert os.path.exists(os.path.join(scratch, "layer", "etc", "umview-new-file"))
    assert not os.path.exists("/etc/umview-new-file")
    assert write["notifications"] == read["notifications"] - 1
    assert write["seccomp_stops"] == read["seccomp_stops"] + 1
    assert write["stops"] == read["stops"] + 2  # its seccomp stop and its exit stop


DEEP_TREE = r"""
import errno, json, os, sys
base, n = sys.argv[1], int(sys.argv[2])
out = {}
p = base
for i in range(n):
    p += "/12345678"
    os.mkdir(p)
f = p + "/file"
with open(f, "w") as fh:
    fh.write("deep\n")
st = os.stat(f)
out["path_bytes"] = len(f)
out["stat"] = [st.st_size, oct(st.st_mode), st.st_nlink]
out["lstat_dir"] = oct(os.lstat(p).st_mode)
with open(f) as fh:
    out["read"] = fh.read()
out["access"] = os.access(f, os.R_OK | os.W_OK)
os.unlink(f)
def errno_of(fn, *args):
    try:
        fn(*args)
    except OSError as e:
        return errno.errorcode[e.errno]
    return "ok"
out["stat_gone"] = errno_of(os.stat, f)
out["too_long"] = errno_of(os.mkdir, p + "/" + "x" * (4200 - len(p)))
out["listing"] = os.listdir(p)
print(json.dumps(out, sort_keys=True))
"""


def test_tree_nearly_path_max_deep_in_a_cow_view_of_root_works_as_natively_in_linear_time():
    # a path of N components costs a call O(N) in the monitor: ~440 levels,
    # each made, then stat, open and unlink of a file about 4,000 bytes deep,
    # take a few seconds; quadratic probing took minutes (the timeout fails it)
    dirs = [tempfile.mkdtemp(prefix="umview-deep-") for _ in range(3)]
    native, viewed, layer = dirs
    try:
        levels = (4000 - len(viewed) - len("/file")) // len("/12345678")
        want = run([sys.executable, "-c", DEEP_TREE, native, str(levels)], timeout=60)
        got = run(umview_argv("-p", f"viewfs,mount={layer}:/:cow", "--",
                              sys.executable, "-c", DEEP_TREE, viewed, str(levels)), timeout=60)
        assert got.returncode == 0, got.stderr
        assert json.loads(got.stdout) == json.loads(want.stdout)
        assert json.loads(got.stdout)["path_bytes"] > 3950
        assert os.listdir(viewed) == []  # the tree lives in the layer
        assert os.path.isdir(layer + viewed + "/12345678/12345678")
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


FD_LINKS = r"""
cd "$1"; echo new > made; echo low >> low
exec 3< made 4>> low 5< .
readlink /proc/self/fd/3 /proc/$$/fd/4 /proc/self/fd/5 | sed "s|$1|DIR|"
ls -l /proc/$$/fd/3 | sed "s|.*-> ||; s|$1|DIR|"
strace -y -e trace=read cat made 2>&1 >/dev/null | grep made | sed "s|$1|DIR|"
rm made; readlink /proc/self/fd/3 | sed "s|$1|DIR|"
cp /bin/sleep nap; ./nap 1 & sleep 0.2; readlink /proc/$!/exe | sed "s|$1|DIR|"; kill $!
"""


def test_fd_links_of_layer_files_name_the_view_path(scratch):
    """readlink of /proc/PID/fd/N (ls -l, strace -y and -P, by self or by
    number) and /proc/PID/exe for a file the view made or copied up gives the
    path the file has in the view, as natively; it gave the layer's path
    (strace's fstat.gen test in a cow view of / failed so)."""
    need_user("root")
    if shutil.which("strace") is None:
        pytest.skip("needs strace")
    for where in ("native", "view"):
        os.makedirs(os.path.join(scratch, where))
        with open(os.path.join(scratch, where, "low"), "w") as f:
            f.write("x\n")
    native = run(["sh", "-c", FD_LINKS, "sh", os.path.join(scratch, "native")])
    assert native.returncode == 0 and b"DIR/made (deleted)" in native.stdout, native
    layer = os.path.join(scratch, "layer")
    viewed = run(view_argv("root", layer, "/", "cow", "sh", "-c", FD_LINKS, "sh", os.path.join(scratch, "view")))
    assert (viewed.returncode, viewed.stdout) == (native.returncode, native.stdout), viewed.stderr
