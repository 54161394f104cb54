"""What the C core's table setters accept, through cffi (no ptrace)."""
import errno

import pytest

from umview.core import ffi, lib

REGS_SIZE = ffi.sizeof("struct user_regs_struct")
GOOD = [ffi.offsetof("struct user_regs_struct", r) for r in ("rdi", "rsi", "rdx", "r10", "r8", "r9")]
NR = ffi.offsetof("struct user_regs_struct", "orig_rax")
RET = ffi.offsetof("struct user_regs_struct", "rax")


def set_regmap(nr, ret, args):
    return lib.um_set_regmap(lib.UM_ABI_X86_64, nr, ret, ffi.new("int[6]", args))


def test_regmap_of_register_offsets_is_accepted():
    assert set_regmap(NR, RET, GOOD) == 0


@pytest.mark.parametrize("bad", [-8, REGS_SIZE, REGS_SIZE - 4, 4, 1, 1 << 20])
@pytest.mark.parametrize("where", ["nr", "ret", "arg"])
def test_regmap_offset_outside_the_registers_or_unaligned_is_einval(bad, where):
    nr, ret, args = NR, RET, list(GOOD)
    if where == "nr":
        nr = bad
    elif where == "ret":
        ret = bad
    else:
        args[5] = bad
    assert set_regmap(nr, ret, args) == -errno.EINVAL
    assert set_regmap(NR, RET, GOOD) == 0  # the valid map is still taken


def test_regmap_of_an_unknown_abi_is_einval():
    assert lib.um_set_regmap(lib.UM_NABI, NR, RET, ffi.new("int[6]", GOOD)) == -errno.EINVAL


def test_claim_is_set_per_abi_and_checked():
    assert lib.um_table_reset(4) == 0
    try:
        assert lib.um_set_claim(lib.UM_ABI_I386, 3, lib.UM_CLAIM_REFUSE) == 0
        assert lib.um_set_claim(lib.UM_ABI_X86_64, 3, lib.UM_CLAIM_ALL) == 0
        assert lib.um_set_claim(lib.UM_NABI, 3, 0) == -errno.EINVAL
        assert lib.um_set_claim(-1, 3, 0) == -errno.EINVAL
        assert lib.um_set_claim(lib.UM_ABI_X32, 4, 0) == -errno.EINVAL
    finally:
        lib.um_table_reset(0)


def test_value_traps_past_the_table_trap_the_whole_call_and_say_so():
    vals = ffi.new("uint32_t[]", [0x5401])
    assert lib.um_filter_clear() == 0
    try:
        n = 0
        while True:  # distinct calls until the table is full
            r = lib.um_filter_trap_values(lib.UM_ABI_X86_64, n, 1, vals, 1)
            if r:
                break
            n += 1
        assert r == lib.UM_TRAP_VALUES_FULL
        assert n >= 12  # the guard and a layered mount need 12 on three ABIs
        # a call already in the table still takes values
        assert lib.um_filter_trap_values(lib.UM_ABI_X86_64, 0, 1, ffi.new("uint32_t[]", [7]), 1) == 0
    finally:
        assert lib.um_filter_clear() == 0
