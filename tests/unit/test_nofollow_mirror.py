"""The NOFOLLOW rules of the syscall table, mirrored into the C core
(um_set_nofollow), give the answer Python gives (syscalls.follows_last) for
every path call, path slot and ABI, whatever flags stand in any argument."""
import os

import pytest

from umview.core import ffi, lib
from umview.syscalls import follows_last, path_args, spec
from umview.claims import ABI_IDS
from umview.ctables import SyscallTable

# every flag a rule tests, alone and together, and none
FLAGS = [0, 0x100, 0x400, os.O_NOFOLLOW, os.O_CREAT, os.O_CREAT | os.O_EXCL, 0x1, 0x2, 0x4, 0x8, 0x10,
         0x01000000, 0xFFFFFFFF]


@pytest.fixture(scope="module")
def table():
    t = SyscallTable()
    t.load_into_core()
    yield t
    lib.um_table_reset(0)


@pytest.mark.parametrize("abi", sorted(ABI_IDS))
def test_c_follows_the_last_component_exactly_when_python_does(table, abi):
    checked = 0
    d = ffi.new("struct um_decide_in *")
    d.abi = ABI_IDS[abi]
    d.how_readable = 0
    for name, slots in path_args(abi).items():
        if name not in table.abis[abi].numbers:
            continue
        rules = spec(name, abi).nofollow
        for slot in range(len(slots)):
            for pos in range(6):
                for flags in FLAGS:
                    args = [0] * 6
                    args[pos] = flags
                    d.args = args
                    want = follows_last(rules[slot], args)
                    assert bool(lib.um_follows_last(d, table.index[name], slot)) == want, \
                        (name, abi, slot, pos, hex(flags), rules[slot])
                    checked += 1
    assert checked > 1000  # the table has path calls on every ABI


def test_an_open_how_that_says_nofollow_is_not_followed(table):
    d = ffi.new("struct um_decide_in *")
    d.abi = lib.UM_ABI_X86_64
    sc = table.index["openat2"]
    assert lib.um_follows_last(d, sc, 0) == 1  # unread: it follows
    d.how_readable = 1
    d.how_flags = os.O_NOFOLLOW
    assert lib.um_follows_last(d, sc, 0) == 0
    d.how_flags = os.O_RDONLY
    assert lib.um_follows_last(d, sc, 0) == 1
