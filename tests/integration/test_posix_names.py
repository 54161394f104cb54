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

from conftest import NOBODY, SYSTEM_PY, as_user, need_user, run, umview_for

NAMES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs", "names.py")

# how a mode mounts the cases' directory BASE (LAYER: an empty directory
# for the layer or source; VIEW: where the view shows BASE)
MODES = {
    "plain": ([], "{base}"),
    "unreal": (["-p", "unreal"], "/unreal{base}"),
    "cow of /": (["-p", "viewfs,mount={layer}:/:cow"], "{base}"),
    "cow": (["-p", "viewfs,mount={layer}:{base}:cow"], "{base}"),
    "merge": (["-p", "viewfs,mount={layer}:{base}:merge"], "{base}"),
    "mincow": (["-p", "viewfs,mount={layer}:{base}:mincow"], "{base}"),
    "move": (["-p", "viewfs,mount={base}:{layer}"], "{layer}"),
    "sandbox": (["--sandbox"], "{base}"),
}
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


def names(user, what, base, *opts):
    """names.py WHAT BASE, natively or with umview OPTS ("both": setup,
    then run, in one view)."""
    argv = [python(user), NAMES, what, base]
    if what == "both":
        argv = ["sh", "-c", f'"$0" "$1" setup "$2" && exec "$0" "$1" run "$2"', python(user), NAMES, base]
    if opts:
        r = run(umview_for(user, *opts, "--", *argv), timeout=300)
    else:
        r = run(as_user(user, argv), timeout=300)
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
    if made == "in the view":
        got = by_case(names(user, "both", where, *opts))
    else:
        names(user, "setup", base)
        got = by_case(names(user, "run", where, *opts))
        if mode in ("cow of /", "cow", "sandbox"):
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
