# SPDX-License-Identifier: GPL-2.0-or-later
"""syscalls/: the table of argument kinds, names and rules, and what is derived from it
(no ptrace needed)."""
import pytest

from umview import arch, syscalls
from umview.engine import Call
from umview.syscalls import table as sig

X32_BIT = 0x40000000


def test_every_name_has_a_signature():
    assert sorted(set(arch.NAMES) - set(sig.SIGNATURES)) == []
    kinds = {"path", "dirfd", "fd", "atflags", "oflags", "str", "ptr", "int"}
    for table in (sig.SIGNATURES, sig.I386_SIGNATURES):
        for name, args in table.items():
            assert set(args) <= kinds and len(args) <= 6, name


@pytest.mark.parametrize("abi", ["x86_64", "i386"])
def test_path_and_fd_indexes_match_kinds(abi):
    path_args = sig.I386_PATH_ARGS if abi == "i386" else sig.PATH_ARGS
    fd_args = sig.I386_FD_ARGS if abi == "i386" else sig.FD_ARGS
    for name, pairs in path_args.items():
        kinds = sig.signature(name, abi)
        for p, d in pairs:
            assert kinds[p] == "path", name
            assert d is None or kinds[d] == "dirfd", name
        dirfds = [i for i, k in enumerate(kinds) if k == "dirfd"]
        assert sorted(d for _, d in pairs if d is not None) == dirfds, name
    for name, idx in fd_args.items():
        assert all(sig.signature(name, abi)[i] in ("fd", "dirfd") for i in idx), name


def test_hand_checked_path_args():
    expect = {
        "renameat": ((1, 0), (3, 2)), "linkat": ((1, 0), (3, 2)), "symlinkat": ((2, 1),),
        "open": ((0, None),), "mount": ((1, None),), "umount2": ((0, None),),
        "execveat": ((1, 0),), "fanotify_mark": ((4, 3),), "move_mount": ((1, 0), (3, 2)),
        "symlink": ((1, None),), "quotactl": ((1, None),), "inotify_add_watch": ((1, None),),
    }
    for name, pairs in expect.items():
        assert sig.PATH_ARGS[name] == pairs, name
    assert sig.I386_PATH_ARGS["fanotify_mark"] == ((5, 4),)
    assert sig.FD_ARGS["openat"] == (0,) and sig.FD_ARGS["move_mount"] == (0, 2)


def test_nofollow_rules_name_path_calls():
    for name, rule in sig.NOFOLLOW.items():
        assert name in sig.PATH_ARGS, name
        if len(rule) > 1:
            assert rule[1] < len(sig.SIGNATURES[name]), name
    assert sig.nofollow_rule("linkat", 1) == ("unless_set", 4, sig.AT_SYMLINK_FOLLOW)
    assert sig.nofollow_rule("linkat", 3) == sig.ALWAYS
    assert sig.nofollow_rule("stat", 0) is None


def test_every_abi_only_name_is_covered():
    x86_names = set(arch.X86_64.numbers)
    for abi, variants, only in (("i386", sig.I386_VARIANTS, sig.I386_ONLY),
                                ("x32", sig.X32_VARIANTS, sig.X32_ONLY)):
        names = set(arch.abi_by_name(abi).numbers)
        covered = {n for v in variants.values() for n in v} | set(only)
        assert sorted(names - x86_names - covered) == [], abi
        assert set(variants) <= x86_names, abi
        assert covered <= names, abi


def test_every_call_has_one_name_per_argument_on_every_abi():
    for name in sig.SIGNATURES:
        for abi in syscalls.ABIS:
            spec = syscalls.spec(name, abi)
            names = [a.name for a in spec.args]
            assert len(names) == len(set(names)), (name, abi, names)


def test_no_argument_name_hides_an_attribute_of_call():
    # call.NAME reads an argument only where Call has no attribute NAME
    call = Call(1, "x86_64", 0, "getpid", 39, [0] * 6, 0, 0x7000_0000, syscalls.spec("getpid"))
    attributes = set(dir(call)) | set(vars(call))
    for name in sig.SIGNATURES:
        for abi in syscalls.ABIS:
            for a in syscalls.spec(name, abi).args:
                assert a.name not in attributes, (name, abi, a.name)


def call_of(name, abi, args):
    return Call(1, abi, 0, name, 0, args, 0, 0x7000_0000, syscalls.spec(name, abi))


@pytest.mark.parametrize("abi", syscalls.ABIS)
def test_arguments_decode_by_name_alike_on_every_abi(abi):
    garbage = 0xDEAD_BEEF_0000_0000 if abi == "i386" else 0  # int $0x80 reads the low half
    call = call_of("openat", abi, [(2**64 - 100) | garbage if abi != "i386" else 0xFFFFFF9C | garbage,
                                   0, 0o101 | garbage, 0o644 | garbage, 0, 0])
    assert call.dirfd == syscalls.AT_FDCWD
    assert call.flags == 0o101
    assert call.mode == 0o644
    assert call.path is None  # NULL
    assert call.index_of("flags") == 2
    chown = call_of("fchownat", abi, [5, 0, 1000, 2**32 - 1, 0x100, 0])
    assert (chown.dirfd, chown.uid, chown.gid, chown.flags) == (5, 1000, 2**32 - 1, 0x100)


def test_a_64_bit_value_split_over_two_i386_registers_is_joined():
    call = call_of("truncate64", "i386", [0, 0x1234_5678, 0x9, 0, 0, 0])
    assert call.length == 0x9_1234_5678
    assert call_of("truncate64", "x86_64", [0, 0x9_1234_5678, 0, 0, 0, 0]).length == 0x9_1234_5678


def test_an_unknown_argument_name_is_an_attribute_error():
    with pytest.raises(AttributeError):
        call_of("openat", "x86_64", [0] * 6).uid


def test_path_slots_of_a_spec_follow_the_abi():
    assert syscalls.spec("fanotify_mark", "x86_64").path_slots == ((4, 3),)
    assert syscalls.spec("fanotify_mark", "i386").path_slots == ((5, 4),)
    assert syscalls.spec("renameat2").nofollow == (sig.ALWAYS, sig.ALWAYS)
    assert syscalls.spec("openat").writes == ("oflags", 2)


def test_trace_classes_come_from_the_table():
    classes = syscalls.trace_classes(set(arch.NAMES))
    assert "openat" in classes["%file"] and "read" in classes["%desc"]
    assert "clone" in classes["%process"] and "connect" in classes["%network"]
    assert classes["%file"] <= set(arch.NAMES)
