"""The kernel's rules for names hold in every view: ".", ".." and "/" as last
components of calls that make, remove and rename names, trailing slashes,
missing or non-directory components before "..", names of NAME_MAX bytes,
a directory removed and made again (pjdfstest found each of these broken
in a cow view: rmdir("d/sub/..") removed d).

progs/names.py runs some sixty cases, each in a tree of its own, and prints
each call's errno and what each tree holds after it. The same program runs
natively and in each mode of view, as root and as a normal user, over
trees made before the view starts (a layered view's lower layer) and made
inside it (its upper layer); the outputs must be equal.
"""
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import NOBODY, SYSTEM_PY, as_user, need_user, run, umview_argv, umview_for

NAMES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs", "names.py")
# progs/names.py's DEVICES
DEVICES = ("mknod device", "mknod device existing", "mknod device in a file", "mknod device missing dir",
           "mknod device slash", "mknod device dot", "mknod device too long", "mknod device path max")

# how a mode mounts the cases' directory BASE (LAYER: an empty directory
# for the layer or source; VIEW: where the view shows BASE)
MODES = {
    "plain": ([], "{base}"),
    "unreal": (["-p", "unreal"], "/unreal{base}"),
    "cow of /": (["-p", "viewfs,mount={layer}:/:cow"], "{base}"),
    "merge of /": (["-p", "viewfs,mount={layer}:/:merge"], "{base}"),
    "mincow of /": (["-p", "viewfs,mount={layer}:/:mincow"], "{base}"),
    "cow": (["-p", "viewfs,mount={layer}:{base}:cow"], "{base}"),
    "merge": (["-p", "viewfs,mount={layer}:{base}:merge"], "{base}"),
    "mincow": (["-p", "viewfs,mount={layer}:{base}:mincow"], "{base}"),
    "move": (["-p", "viewfs,mount={base}:{layer}"], "{layer}"),
    "sandbox": (["--sandbox"], "{base}"),
    "read-only sandbox cwd": (["--sandbox=ro"], "{base}"),
}
# modes whose view depends on the directory umview starts in: --sandbox=ro
# makes it copy-on-write (over the read-only mount of / it is older than)
IN_CWD = {"read-only sandbox cwd"}
# moving a directory the lower layer has gives EXDEV in a copy-on-write
# view, as in overlayfs without redirect_dir (mv then copies): these cases
# are compared on trees the view made
LOWER_DIR_MOVES = {"rename dirs slashes", "rename over full dir", "rename dir over empty dir",
                   "dir renamed over removed"}


@pytest.fixture
def dirs(request):
    """(user, base for the native run, base for the view's, layer): empty
    directories in /var/tmp (a sandbox hides the real /tmp), the user's."""
    user = request.param
    need_user(user)
    top = tempfile.mkdtemp(prefix="umview-names-", dir="/var/tmp")
    os.chmod(top, 0o755)
    paths = [os.path.join(top, n) for n in ("native", "view", "layer")]
    for p in paths:
        os.mkdir(p)
        if user != "root":
            os.chown(p, NOBODY, NOBODY)
    try:
        yield (user, *paths)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def python(user):
    return "python3" if user == "root" else SYSTEM_PY


def names(user, what, base, *opts, cases=(), cwd=None, env=None):
    """names.py WHAT BASE [CASE...], natively or with umview OPTS ("both":
    setup, then run, in one view), started in cwd, with env (added)."""
    if env:
        env = {**os.environ, **env}
    argv = [python(user), NAMES, what, base, *cases]
    if what == "both":
        argv = ["sh", "-c", f'"$0" "$1" setup "$2" && exec "$0" "$1" run "$2"', python(user), NAMES, base]
    if opts:
        r = run(umview_for(user, *opts, "--", *argv), cwd=cwd, env=env, timeout=300)
    else:
        r = run(as_user(user, argv), cwd=cwd, env=env, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout.decode()


def by_case(output):
    """{case: its lines} of a names.py run."""
    cases, current = {}, None
    for line in output.splitlines():
        if not line.startswith("    "):
            current = line.split(":", 1)[0]
            cases[current] = []
        cases[current].append(line)
    return cases


def view_opts(mode, base, layer):
    opts, where = MODES[mode]
    return [o.format(base=base, layer=layer) for o in opts], where.format(base=base, layer=layer)


@pytest.mark.parametrize("dirs", ["root", "nobody"], indirect=True)
@pytest.mark.parametrize("made", ["before the view", "in the view"])
@pytest.mark.parametrize("mode", list(MODES))
def test_names_follow_the_kernels_rules_in_every_view(dirs, made, mode):
    user, native, base, layer = dirs
    names(user, "setup", native)
    want = by_case(names(user, "run", native))
    opts, where = view_opts(mode, base, layer)
    cwd = where if mode in IN_CWD else None
    if made == "in the view":
        got = by_case(names(user, "both", where, *opts, cwd=cwd))
    else:
        names(user, "setup", base)
        got = by_case(names(user, "run", where, *opts, cwd=cwd))
        if mode in ("cow of /", "cow", "sandbox", *IN_CWD):
            for case in LOWER_DIR_MOVES:
                assert got.pop(case)[0] == f"{case}: EXDEV"
                want.pop(case)
    assert got == want


@pytest.mark.parametrize("dirs", ["root"], indirect=True)
def test_a_removed_name_of_255_bytes_stays_removed_in_a_later_view(dirs):
    user, native, base, layer = dirs
    long = "n" * 255
    with open(os.path.join(base, long), "w") as f:
        f.write("lower\n")
    opts = ["-p", f"viewfs,mount={layer}:{base}:cow"]
    r = run(umview_for(user, *opts, "--", "rm", os.path.join(base, long)))
    assert r.returncode == 0, r.stderr
    assert os.path.exists(os.path.join(base, long))  # the real file stays
    r = run(umview_for(user, *opts, "--", "ls", "-a", base))
    assert r.stdout.decode().split() == [".", ".."]


@pytest.mark.parametrize("dirs", ["root", "nobody"], indirect=True)
def test_a_read_only_view_answers_as_a_read_only_mount(dirs):
    """--sandbox=ro against the kernel's own read-only bind mount of the
    same trees (made by root in a mount namespace of the test's): EROFS
    only after the checks the kernel makes first (the walk, ".", "..", a
    trailing "/", EEXIST, EISDIR), and nothing where writing is allowed."""
    user, native, base, layer = dirs
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) for the native read-only mount")
    # calls between the read-only mount and a writable one (progs/names.py
    # ACROSS): the directory the sandbox starts in, copy-on-write
    others = [os.path.join(os.path.dirname(native), n) for n in ("native-other", "view-other")]
    for d in others:
        os.mkdir(d)
        if user != "root":
            os.chown(d, NOBODY, NOBODY)
    names(user, "setup", native, env={"NAMES_OTHER": others[0]})
    argv = as_user(user, ["env", f"NAMES_OTHER={others[0]}", python(user), NAMES, "run", native])
    ro = f"mount --bind {native} {native} && mount -o remount,bind,ro {native} && exec \"$@\""
    r = run(["unshare", "-m", "sh", "-c", ro, "sh", *argv], timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    want = by_case(r.stdout.decode())
    assert want["across link to"][0] == "across link to: EXDEV"
    names(user, "setup", base, env={"NAMES_OTHER": others[1]})
    got = names(user, "run", base, "--sandbox=ro", cwd=others[1], env={"NAMES_OTHER": others[1]})
    assert by_case(got) == want


@pytest.mark.parametrize("dirs", ["root", "nobody"], indirect=True)
def test_names_follow_the_kernels_rules_in_a_root_tree(dirs):
    """umview -r TREE: the cases run in a directory of the tree (the host's
    programs and libraries stay the host's), as natively."""
    user, native, tree, _ = dirs
    names(user, "setup", native)
    want = by_case(names(user, "run", native))
    os.makedirs(os.path.join(tree, "work", "base"))
    shutil.copy(NAMES, os.path.join(tree, "work", "names.py"))
    if user != "root":
        for d in ("work", "work/base", "work/names.py"):
            os.chown(os.path.join(tree, d), NOBODY, NOBODY)
    argv = ["sh", "-c", f'"$0" /work/names.py setup /work/base && exec "$0" /work/names.py run /work/base',
            python(user)]
    r = run(umview_for(user, "-r", tree, "--host-paths", "/usr:/lib:/lib64:/bin:/etc:/proc:/dev:/sys:/tmp",
                       "--", *argv), cwd="/var/tmp", timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert by_case(r.stdout.decode()) == want


def test_names_on_an_image_as_on_the_same_image_mounted_natively(tmp_path):
    """-p fs: an ext4 image served by fuse2fs in the view, against the same
    image mounted natively by fuse2fs (root: /dev/fuse)."""
    need_user("root")
    for tool in ("fuse2fs", "mkfs.ext4", "fusermount3"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool}")
    outs = []
    for where in ("native", "view"):
        img, mnt = tmp_path / f"{where}.img", tmp_path / f"{where}-mnt"
        mnt.mkdir()
        subprocess.run(["mkfs.ext4", "-q", "-F", str(img), "64M"], check=True, capture_output=True)
        script = f'python3 {NAMES} setup {mnt} && exec python3 {NAMES} run {mnt}'
        if where == "native":
            subprocess.run(["fuse2fs", str(img), str(mnt)], check=True, capture_output=True)
            try:
                r = run(["sh", "-c", script], timeout=300)
            finally:
                subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True)
        else:
            r = run(umview_argv("-p", f"fs,mount={img}:{mnt}", "--", "sh", "-c", script), timeout=300)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        outs.append(by_case(r.stdout.decode()))
    assert outs[1] == outs[0]


@pytest.mark.parametrize("dirs", ["root"], indirect=True)
def test_a_sandbox_refuses_devices_where_the_kernel_does_without_cap_mknod(dirs):
    """The guard's EPERM for mknod of a device comes where the kernel's own
    comes to a process without CAP_MKNOD: after the walk, EEXIST, a
    trailing "/" and ENAMETOOLONG (pjdfstest's mknod tests)."""
    user, native, base, _ = dirs
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv")
    cases = DEVICES
    names(user, "setup", native, cases=cases)
    r = run(["setpriv", "--bounding-set", "-mknod", "python3", NAMES, "run", native, *cases], timeout=300)
    assert r.returncode == 0, r.stderr
    want = by_case(r.stdout.decode())
    assert want["mknod device"][0] == "mknod device: EPERM"
    names(user, "setup", base, cases=cases)
    assert by_case(names(user, "run", base, "--sandbox", cases=cases)) == want
