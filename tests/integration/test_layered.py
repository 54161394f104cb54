"""Layered prefixes: under a layered mount (viewfs merge/cow/mincow) the C
core hands Python only the calls that write or whose path the layer set
names; every other path call runs natively. The LayerRecorder engine logs
each call that reaches Python, so the tests read C's decisions from the log.
"""
import json
import os
import sys
import textwrap

import pytest

from conftest import TEST_ENGINES, run, umview_argv

# Each step of a script begins with os.stat(MARK/<step>): MARK is a HIDE
# entry, so that stat reaches Python and splits the log into steps.
PRELUDE = textwrap.dedent('''
    import os, sys
    L, OUT, MARK = (os.fsencode(a) for a in sys.argv[1:4])
    def step(name):
        try:
            os.stat(MARK + b"/" + name.encode())
        except FileNotFoundError:
            pass
    def read(p):
        with open(p, "rb") as f:
            return f.read()
''')


@pytest.fixture
def tree(tmp_path):
    """tmp/layer: the layered prefix; tmp/out: outside it; tmp/layer/mark: markers."""
    layer = tmp_path / "layer"
    for d in ("dir", "hidden", "real", "mark", "sub"):
        (layer / d).mkdir(parents=True)
    (tmp_path / "out").mkdir()
    for f in ("plain.txt", "changed.txt", "dir/lower.txt", "dir/upper.txt", "hidden/f", "sub/g"):
        (layer / f).write_text(f"content of {f}\n")
    return tmp_path


def entries(tree, **kinds):
    return "\n".join(f"{kind}:{tree / 'layer' / path}" for path, kind in kinds.items())


def run_layered(tree, body, *args, entries_text="", notif=None, real=None, plain=None, fd_check=False,
                layer=None):
    """Run PRELUDE + body under umview with the recorder; return (steps, stats, result)
    where steps maps a step name to the log lines after its marker."""
    log, stats = tree / "calls.log", tree / "stats.json"
    log.write_bytes(b"")
    env = dict(os.environ, UMVIEW_TEST_LOG=str(log), UMVIEW_TEST_LAYER=str(layer or tree / "layer"),
               UMVIEW_TEST_ENTRIES=entries_text + f"\nhide:{tree / 'layer' / 'mark'}")
    if real:
        env["UMVIEW_TEST_REAL"] = str(real)
    if plain:
        env["UMVIEW_TEST_PLAIN"] = str(plain)
    if fd_check:
        env["UMVIEW_TEST_FD_CHECK"] = "1"
    if notif is not None:
        env["UMVIEW_NOTIF"] = "1" if notif else "0"
    script = PRELUDE + textwrap.dedent(body)
    r = run(umview_argv("--stats-file", str(stats), "--engine", f"{TEST_ENGINES}:LayerRecorder", "--",
                        sys.executable, "-c", script, str(tree / "layer"), str(tree / "out"),
                        str(tree / "layer" / "mark"), *args), env=env, cwd=tree)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    steps, cur = {}, None
    mark = os.fsencode(tree / "layer" / "mark") + b"/"
    for line in log.read_bytes().splitlines():
        name, _, paths = line.partition(b" ")
        if name in (b"newfstatat", b"stat") and paths.startswith(mark):
            cur = steps.setdefault(paths[len(mark):].decode(), [])
        elif cur is not None:
            cur.append(line.decode(errors="replace"))
    return steps, json.loads(stats.read_text().splitlines()[-1]), r


READS = '''
    step("plain"); read(L + b"/plain.txt"); os.stat(L + b"/plain.txt"); os.listdir(L + b"/sub")
    step("changed"); read(L + b"/changed.txt")
    step("under-hide"); read(L + b"/hidden/f")
    step("under-dir"); read(L + b"/dir/lower.txt"); os.access(L + b"/dir/lower.txt", os.R_OK)
    step("dir-itself"); os.stat(L + b"/dir")
    step("dir-upper"); read(L + b"/dir/upper.txt")
    step("end")
'''


@pytest.mark.parametrize("notif", [True, False], ids=["notif", "ptrace"])
def test_reads_reach_python_only_where_the_layer_set_says(tree, notif):
    ents = entries(tree, **{"changed.txt": "hide", "hidden": "hide", "dir": "dir", "dir/upper.txt": "hide"})
    steps, st, _ = run_layered(tree, READS, entries_text=ents, notif=notif)
    assert steps["plain"] == []
    assert steps["changed"] and all("changed.txt" in c for c in steps["changed"])
    assert steps["under-hide"] and all("hidden/f" in c for c in steps["under-hide"])
    assert steps["under-dir"] == []
    assert steps["dir-itself"] and all(c.endswith("/layer/dir") for c in steps["dir-itself"])
    assert steps["dir-upper"] and all("dir/upper.txt" in c for c in steps["dir-upper"])
    assert st["fast_continue"] > 50  # the interpreter's own start-up stayed in C


WRITES = '''
    step("rdonly"); os.close(os.open(L + b"/plain.txt", os.O_RDONLY))
    step("wronly"); os.close(os.open(L + b"/plain.txt", os.O_WRONLY))
    step("creat"); os.close(os.open(L + b"/new.txt", os.O_WRONLY | os.O_CREAT))
    step("mkdir"); os.mkdir(L + b"/newdir")
    step("rename"); os.rename(L + b"/new.txt", L + b"/renamed.txt")
    step("chmod"); os.chmod(L + b"/renamed.txt", 0o600)
    step("unlink"); os.unlink(L + b"/renamed.txt")
    step("real-write"); os.mkdir(L + b"/real/d"); open(L + b"/real/d/f", "w").write("x"); os.chmod(L + b"/real/d/f", 0o600)
    step("end")
'''


def test_writes_under_a_layered_prefix_reach_python_but_not_under_a_real_one(tree):
    steps, _, _ = run_layered(tree, WRITES, real=tree / "layer" / "real")
    assert steps["rdonly"] == []
    assert [c.split()[0] for c in steps["wronly"]] == ["openat"]
    assert [c.split()[0] for c in steps["creat"]] == ["openat"]
    assert [c.split()[0] for c in steps["mkdir"]] == ["mkdir"]
    assert [c.split()[0] for c in steps["rename"]] == ["rename"]
    assert [c.split()[0] for c in steps["chmod"]] == ["chmod"]
    assert [c.split()[0] for c in steps["unlink"]] == ["unlink"]
    assert steps["real-write"] == []
    assert (tree / "layer" / "real" / "d" / "f").read_text() == "x"


LINKS = '''
    os.symlink(L + b"/changed.txt", OUT + b"/to-changed")
    os.symlink(b"../layer/plain.txt", OUT + b"/to-plain")
    os.symlink(b"hidden", L + b"/to-hidden")
    os.symlink(L, OUT + b"/to-layer")
    step("via-link-to-entry"); read(OUT + b"/to-changed")
    step("via-link-to-plain"); read(OUT + b"/to-plain")
    step("via-relative-link-under-hide"); read(L + b"/to-hidden/f")
    step("via-dir-link-dotdot"); read(OUT + b"/to-layer/sub/../changed.txt")
    step("via-dir-link-plain"); read(OUT + b"/to-layer/sub/g")
    step("end")
'''


def test_a_symlink_that_leads_to_a_layer_entry_reaches_python(tree):
    ents = entries(tree, **{"changed.txt": "hide", "hidden": "hide"})
    steps, st, _ = run_layered(tree, LINKS, entries_text=ents)
    assert steps["via-link-to-entry"] and all("to-changed" in c for c in steps["via-link-to-entry"])
    assert steps["via-link-to-plain"] == []
    assert steps["via-relative-link-under-hide"]
    assert steps["via-dir-link-dotdot"]
    assert steps["via-dir-link-plain"] == []
    assert st["layer_walks"] >= 5


CHAIN = '''
    import errno
    base = os.fsencode(sys.argv[4])
    for n in (40, 41):
        d = base + b"/chain%d" % n
        os.mkdir(d)
        open(d + b"/target", "w").write("end of the chain\\n")
        for i in range(n):
            os.symlink(b"l%d" % (i + 1) if i + 1 < n else b"target", d + b"/l%d" % i)
    step("read")
    for n in (40, 41):
        d = base + b"/chain%d" % n
        try:
            print(n, read(d + b"/l0"))
        except OSError as e:
            print(n, errno.errorcode[e.errno])
'''


@pytest.mark.parametrize("where", ["layer", "out"])
def test_a_chain_of_41_symlinks_gives_eloop_as_natively(tree, where):
    native_dir, view_dir = tree / "native", tree / where / "chains"
    native_dir.mkdir()
    view_dir.mkdir()
    script = PRELUDE + textwrap.dedent(CHAIN)
    native = run([sys.executable, "-c", script, "-", "-", "-", str(native_dir)])
    assert native.returncode == 0, native.stderr
    steps, st, viewed = run_layered(tree, CHAIN, str(view_dir))
    assert viewed.stdout == native.stdout == b"40 b'end of the chain\\n'\n41 ELOOP\n"
    assert st["layer_walks"] >= 2
    # walked in C (no link is in the set): the kernel gave the ELOOP
    assert steps["read"] == []


def test_fstat_of_an_fd_under_a_plain_prefix_reaches_python_with_fd_check(tree):
    plain = tree / "out"
    (plain / "f").write_text("plain\n")
    body = '''
        fd = os.open(OUT + b"/f", os.O_RDONLY)
        step("fstat"); os.fstat(fd)
        step("fstat-real"); fd2 = os.open(L + b"/plain.txt", os.O_RDONLY); step("fstat-real2"); os.fstat(fd2)
        step("end")
    '''
    on, _, _ = run_layered(tree, body, plain=plain, fd_check=True)
    off, _, _ = run_layered(tree, body, plain=plain, fd_check=False)
    assert on["fstat"] == [f"newfstatat {plain / 'f'}"]
    assert on["fstat-real2"] == []
    assert off["fstat"] == []


def test_a_layered_root_is_served_by_notifications_and_stays_in_c(tree):
    from umview.core import lib

    if not lib.um_notif_supported() or os.environ.get("UMVIEW_NOTIF") == "0":
        pytest.skip("no same-CPU seccomp notifications (Linux 6.6+), or UMVIEW_NOTIF=0")
    ents = entries(tree, **{"changed.txt": "hide"})
    body = '''
        step("usr"); os.listdir(b"/usr/include"); os.stat(b"/etc/passwd"); read(b"/etc/hostname")
        step("changed"); read(L + b"/changed.txt")
        step("end")
    '''
    steps, st, _ = run_layered(tree, body, entries_text=ents, layer="/", real="/proc")
    assert steps["usr"] == []
    assert steps["changed"] and all("changed.txt" in c for c in steps["changed"])
    # notifications, not ptrace stops, for a layered / (but for the execs)
    assert st["seccomp_stops"] == st["calls"].get("execve", [0])[0]
    assert st["notifications"] - st["fast_continue"] <= 10  # the markers and changed.txt
