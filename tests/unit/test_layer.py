"""The C core's layer set, prefix kinds and write table, through cffi (no ptrace)."""
import errno

import pytest

from umview import core
from umview.syscalls import table as signatures
from umview.core import lib


@pytest.fixture
def layer():
    core.layer_clear()
    yield
    core.layer_clear()


def test_layer_set_adds_replaces_and_deletes(layer):
    core.layer_add(b"/a/b", core.LAYER_DIR)
    assert lib.um_layer_get(b"/a/b") == core.LAYER_DIR
    assert lib.um_layer_get(b"/a/b/") == core.LAYER_DIR  # keys are normalized paths
    assert lib.um_layer_get(b"/a") == 0
    core.layer_add(b"/a/b", core.LAYER_HIDE)
    assert lib.um_layer_get(b"/a/b") == core.LAYER_HIDE
    core.layer_del(b"/a/b")
    assert lib.um_layer_get(b"/a/b") == 0
    with pytest.raises(OSError) as exc:
        core.layer_del(b"/a/b")
    assert exc.value.errno == errno.ENOENT


def test_layer_set_rejects_relative_paths_and_unknown_kinds(layer):
    for path, kind in ((b"a/b", core.LAYER_DIR), (b"/a", 0), (b"/a", 4)):
        with pytest.raises(OSError):
            core.layer_add(path, kind)


def test_layer_set_holds_thousands_through_growth_and_deletion(layer):
    paths = [b"/usr/lib/python3/x%d.py" % i for i in range(20000)]
    for p in paths:
        core.layer_add(p, core.LAYER_HIDE)
    for p in paths[::2]:
        core.layer_del(p)
    for p in paths[:100]:  # tombstones reused
        core.layer_add(p, core.LAYER_DIR)
    assert [lib.um_layer_get(p) for p in paths[:100]] == [core.LAYER_DIR] * 100
    assert all(lib.um_layer_get(p) == (core.LAYER_HIDE if i % 2 else 0) for i, p in enumerate(paths) if i >= 100)
    core.layer_clear()
    assert lib.um_layer_get(paths[1]) == 0


def test_the_longest_real_or_layered_prefix_wins_and_plain_beats_both():
    core.check(lib.um_prefix_clear())
    try:
        for p, kind in ((b"/", lib.UM_PREFIX_LAYERED), (b"/proc", lib.UM_PREFIX_REAL),
                        (b"/proc/sys/x", lib.UM_PREFIX_LAYERED), (b"/srv", lib.UM_PREFIX_PLAIN),
                        (b"/srv/real", lib.UM_PREFIX_REAL)):
            core.check(lib.um_prefix_add_kind(p, kind))
        kinds = {p: lib.um_prefix_kind(p) for p in (b"/", b"/usr/lib", b"/proc", b"/process", b"/proc/1",
                                                    b"/proc/sys/x/y", b"/srv/real/f")}
        assert kinds == {b"/": 1, b"/usr/lib": 1, b"/proc": 2, b"/process": 1, b"/proc/1": 2,
                         b"/proc/sys/x/y": 1, b"/srv/real/f": 0}
        core.check(lib.um_prefix_clear())
        core.check(lib.um_prefix_add_kind(b"/srv", lib.UM_PREFIX_REAL))
        assert lib.um_prefix_kind(b"/usr") == -1
    finally:
        lib.um_prefix_clear()


def test_every_path_call_is_either_a_write_or_read_only():
    path_calls = set(signatures.PATH_ARGS) | set(signatures.I386_PATH_ARGS)
    assert set(signatures.WRITES) | signatures.READ_ONLY == path_calls
    assert not set(signatures.WRITES) & signatures.READ_ONLY
    for name, rule in signatures.WRITES.items():
        if rule[0] != "always":
            kinds = {"oflags": ("oflags",), "open_how": ("ptr",), "access": ("int",)}[rule[0]]
            assert signatures.SIGNATURES[name][rule[1]] in kinds, name


def test_two_mounts_naming_one_path_share_it_until_the_last_drops_it(layer):
    # a fresh layered mount beside another (viewfs fresh) names the same
    # paths: removing one mount must keep the other's names, with its kind
    from umview.modules.viewfs.layers import LayerSet

    shared, older, fresh = LayerSet(), object(), object()
    shared.add(older, b"/etc/f", core.LAYER_HIDE)
    shared.add(fresh, b"/etc/f", core.LAYER_DIR)
    assert lib.um_layer_get(b"/etc/f") == core.LAYER_HIDE  # the stronger: more goes to Python
    shared.drop(older, b"/etc/f")
    assert lib.um_layer_get(b"/etc/f") == core.LAYER_DIR
    shared.add(older, b"/etc/f", core.LAYER_HIDE)
    shared.drop(fresh, b"/etc/f")
    assert lib.um_layer_get(b"/etc/f") == core.LAYER_HIDE
    shared.drop(older, b"/etc/f")
    assert lib.um_layer_get(b"/etc/f") == 0


def test_an_upper_file_two_mounts_name_is_hidden_not_served_from_either(layer):
    # LAYER_FILE lets the C core read the file in the prefix's one upper
    # layer; with two mounts naming it, which layer holds it is theirs to say
    from umview.modules.viewfs.layers import LayerSet

    shared, older, fresh = LayerSet(), object(), object()
    shared.add(older, b"/etc/f", core.LAYER_FILE)
    assert lib.um_layer_get(b"/etc/f") == core.LAYER_FILE
    shared.add(fresh, b"/etc/f", core.LAYER_DIR)
    assert lib.um_layer_get(b"/etc/f") == core.LAYER_HIDE
    shared.drop(fresh, b"/etc/f")
    assert lib.um_layer_get(b"/etc/f") == core.LAYER_FILE
    shared.add(fresh, b"/etc/f", core.LAYER_HIDE)
    shared.drop(older, b"/etc/f")
    assert lib.um_layer_get(b"/etc/f") == core.LAYER_HIDE
    shared.drop(fresh, b"/etc/f")
