"""Layers.probe and ensure_dir on deep trees (no ptrace): the walk with
directory fds must say what a lookup of every path prefix says, whiteouts,
opaque directories and files over lower directories included, at any depth."""
import os
import random
import stat

import pytest

from umview.engine import Call
from umview.syscalls import spec
from umview.modules.viewfs import layerfmt
from umview.modules.viewfs.layers import VOID, Layers, _lstat, probe_memo


def reference_probe(layers, rel):
    """The probe as it was written first: a lookup of each prefix by path.
    (upper lstat, lower lstat, hidden, the void path below a whiteout)"""
    comps = rel.split(b"/") if rel else []
    hidden = False
    upper_dir = True
    void = None
    ust = _lstat(layers.upper)
    for i, c in enumerate(comps):
        parent = b"/".join(comps[:i])
        if void is not None:
            void += b"/" + c
        if upper_dir:
            ust = _lstat(layers.up(_join(parent, c)))
            if layerfmt.is_whiteout(ust):
                ust = None
                hidden = True
                void = layers.up(parent) + b"/" + VOID
            elif not hidden and i > 0 and layerfmt.is_opaque(layers.up(parent)):
                hidden = True
            if ust is None:
                upper_dir = False
            elif not stat.S_ISDIR(ust.st_mode):
                upper_dir = False
                if i < len(comps) - 1:
                    hidden = True
                    ust = None
        else:
            ust = None
    if comps and upper_dir and ust is not None and layerfmt.is_opaque(layers.up(rel)):
        return ust, None, True, None
    lst = None if hidden else _lstat(layers.low(rel))
    return ust, lst, hidden, void


def _join(a, b):
    return a + b"/" + b if a else b


def summary(st):
    return None if st is None else (st.st_ino, stat.S_IFMT(st.st_mode))


def node_summary(node):
    return summary(node.upper), summary(node.lower), node.hidden, node.real


def ref_summary(layers, rel):
    ust, lst, hidden, void = reference_probe(layers, rel)
    real = void or (layers.up(rel) if ust is not None or hidden else layers.low(rel))
    return summary(ust), summary(lst), hidden, real


def FakeCall():
    """A call of no process: only its per-call state is used."""
    return Call(1, "x86_64", 0, "openat", 257, [0] * 6, 0, 0x7000_0000, spec("openat"))


def open_fds():
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def layers(tmp_path):
    up, low = tmp_path / "upper", tmp_path / "lower"
    up.mkdir()
    low.mkdir()
    return Layers(os.fsencode(up), os.fsencode(low), "cow")


def build_random_tree(layers, rng, depth):
    """Two chains of `depth` directories, one per layer, sharing a prefix, with
    whiteouts, opaque markers, files over lower directories and symlinks put
    at random depths. Returns the rels of every prefix worth probing."""
    names = [b"d%d" % rng.randrange(3) for _ in range(depth)]
    rels = []
    for i in range(1, depth + 1):
        rels.append(b"/".join(names[:i]))
    for base, share in ((layers.lower, 1.0), (layers.upper, rng.uniform(0.3, 1.0))):
        stop = int(depth * share)
        p = base
        for i, n in enumerate(names[:stop]):
            p = p + b"/" + n
            os.mkdir(p)
            r = rng.random()
            if r < 0.05:
                open(p + b"/sib", "wb").close()
            if base == layers.upper and r < 0.08:
                assert layerfmt.set_opaque(p)
            elif base == layers.upper and r < 0.16:
                # the next lower name removed: the upper chain ends here
                layerfmt.make_whiteout(p + b"/" + (names[i + 1] if i + 1 < depth else b"x"))
                break
            elif base == layers.upper and r < 0.18 and i + 1 < stop:
                # a file (or a symlink) of the upper layer over a lower directory, at the end
                tail = p + b"/" + names[i + 1]
                if rng.random() < 0.5:
                    open(tail, "wb").close()
                else:
                    os.symlink(b".", tail)
                break
    rels += [r + b"/sib" for r in rels[::7]] + [r + b"/missing/x" for r in rels[::11]] + [b""]
    return rels


@pytest.mark.parametrize("seed", range(12))
def test_probe_matches_a_lookup_of_every_prefix_on_deep_random_trees(layers, seed):
    rng = random.Random(seed)
    rels = build_random_tree(layers, rng, depth=rng.choice([5, 40, 150]))
    before = open_fds()
    call = FakeCall()
    for rel in rels:
        expected = ref_summary(layers, rel)
        assert node_summary(layers.probe(rel)) == expected, rel
        # with a memo, first the deepest path then its prefixes from the memo
        assert node_summary(layers.probe(rel, probe_memo(call, layers))) == expected, rel
    for rel in rels:
        assert node_summary(layers.probe(rel, probe_memo(call, layers))) == ref_summary(layers, rel), rel
    assert open_fds() == before


def test_whiteout_opaque_dir_and_file_over_dir_at_depth(layers):
    deep = b"/".join([b"123"] * 200)
    os.makedirs(layers.low(deep + b"/a/b/c"))
    for x in (b"gone", b"kept", b"shadow"):
        os.makedirs(layers.low(deep + b"/" + x + b"/in"))
    os.makedirs(layers.up(deep + b"/a/b"))
    layerfmt.make_whiteout(layers.up(deep + b"/gone"))
    assert layerfmt.set_opaque(layers.up(deep + b"/a/b"))
    open(layers.up(deep + b"/shadow"), "wb").close()
    call = FakeCall()
    memo = probe_memo(call, layers)
    gone = layers.probe(deep + b"/gone/in", memo)
    assert (gone.exists, gone.hidden) == (False, True)
    opaque = layers.probe(deep + b"/a/b", memo)
    assert (opaque.upper is not None, opaque.lower, opaque.hidden) == (True, None, True)
    assert not layers.probe(deep + b"/a/b/c", memo).exists
    over = layers.probe(deep + b"/shadow/in", memo)
    assert (over.exists, over.hidden, over.real) == (False, True, layers.up(deep + b"/shadow/in"))
    assert stat.S_ISREG(layers.probe(deep + b"/shadow", memo).st.st_mode)
    kept = layers.probe(deep + b"/kept/in", memo)
    assert (kept.upper, kept.is_dir, kept.real) == (None, True, layers.low(deep + b"/kept/in"))
    # every ancestor was remembered on the way
    assert all(b"/".join([b"123"] * i) in memo for i in range(1, 201))


def test_memo_is_dropped_when_the_layers_change(layers):
    os.makedirs(layers.low(b"a/b"))
    open(layers.low(b"a/b/f"), "wb").close()
    call = FakeCall()
    node = layers.probe(b"a/b/f", probe_memo(call, layers))
    assert node.upper is None
    layers.copy_up(node)
    assert layers.probe(b"a/b/f", probe_memo(call, layers)).upper is not None


def mkdirs(base, rel):
    """os.makedirs without its recursion (a chain of 1,500 directories)."""
    fd = os.open(base, os.O_PATH | os.O_DIRECTORY)
    try:
        for c in rel.split(b"/"):
            try:
                os.mkdir(c, dir_fd=fd)
            except FileExistsError:
                pass
            new = os.open(c, os.O_PATH | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = new
    finally:
        os.close(fd)


def rmtree_deep(path):
    """shutil.rmtree without its recursion."""
    dirs, todo = [], [os.fsencode(path)]
    while todo:
        d = todo.pop()
        dirs.append(d)
        with os.scandir(d) as it:
            for e in it:
                (todo.append if e.is_dir(follow_symlinks=False) else os.unlink)(e.path)
    for d in reversed(dirs):
        os.rmdir(d)


def test_ensure_dir_copies_up_a_chain_deeper_than_the_recursion_limit(layers):
    try:
        _ensure_deep_chain(layers)
    finally:
        for base in (layers.upper, layers.lower):
            rmtree_deep(base)


def _ensure_deep_chain(layers):
    deep = b"/".join([b"d"] * 1500)
    mkdirs(layers.lower, deep)
    os.chmod(layers.low(b"d/d"), 0o751)
    before = open_fds()
    assert layers.ensure_dir(deep) == layers.up(deep)
    assert stat.S_IMODE(os.stat(layers.up(b"d/d")).st_mode) & 0o751 == 0o751
    assert layers.probe(deep).upper is not None
    with pytest.raises(OSError):
        layers.ensure_dir(deep + b"/missing/x")
    open(layers.low(deep + b"/file"), "wb").close()
    with pytest.raises(NotADirectoryError):
        layers.ensure_dir(deep + b"/file")
    assert open_fds() == before
