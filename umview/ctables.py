"""The syscall table mirrored into the C core.

The C core decides most trapped calls without Python from tables indexed by a
neutral syscall index: the number -> index map of each ABI, the register map,
the path slots (path and dirfd argument indices, the flags argument that may
carry AT_EMPTY_PATH), which calls write the file system and the nofollow
rules. All of it comes from ``syscalls/table.py`` and ``arch/`` here, once per
view. (It lived in syscalls/: the table package stays data, and imports
nothing of umview's.) Imported lazily: the table costs milliseconds that a
view without engines does not pay.
"""
from umview import arch, control, core
from umview.claims import ABI_IDS
from umview.core import ffi, lib
from umview.syscalls import EMPTY_PATH_FLAGS, PATH_SYSCALLS, WRITES, path_args, spec, variants
from umview.syscalls.table import CWD_SETTERS


_WRITE_KINDS = {"always": lib.UM_WRITE_ALWAYS, "oflags": lib.UM_WRITE_OFLAGS,
                "open_how": lib.UM_WRITE_OPENHOW, "access": lib.UM_WRITE_ACCESS}
_NOFOLLOW_KINDS = {"always": lib.UM_NOFOLLOW_ALWAYS, "if_set": lib.UM_NOFOLLOW_IF_SET,
                   "unless_set": lib.UM_NOFOLLOW_UNLESS_SET, "oflags": lib.UM_NOFOLLOW_OFLAGS,
                   "open_how": lib.UM_NOFOLLOW_OPENHOW}


def _nofollow_args(rule):
    """A NOFOLLOW rule (syscalls.table) as um_set_nofollow's kind, arg, mask."""
    if rule is None:
        return lib.UM_FOLLOWS, -1, 0
    return _NOFOLLOW_KINDS[rule[0]], rule[1] if len(rule) > 1 else -1, rule[2] if len(rule) > 2 else 0


class SyscallTable:
    """Neutral names <-> indices, numbers per ABI, mirrored into the C core."""

    def __init__(self):
        self.arch = arch
        # the pseudo-syscall of the control channel last (core.h, UM_NR_CONTROL)
        self.names = list(arch.NAMES) + [control.CONTROL]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.abis = {abi.name: abi for abi in arch.ABIS}
        #: neutral name -> names that trap with it on other ABIs
        self.variants = variants()
        self.path_calls = PATH_SYSCALLS
        #: calls whose path becomes the cwd (UM_CLAIM_CHDIR with their path claim)
        self.cwd_setters = CWD_SETTERS

    def spec(self, name, abi):
        return spec(name, abi)

    @staticmethod
    def writes_by_flags(name):
        """Does the call write the file system depending on open flags in an
        argument (open, openat: the filter can test them)?"""
        rule = WRITES.get(name)
        return rule is not None and rule[0] == "oflags"

    def load_into_core(self):
        core.check(lib.um_table_reset(len(self.names)))
        core.check(lib.um_set_control_sc(len(self.names) - 1))
        for abi in arch.ABIS:
            abi_id = ABI_IDS[abi.name]
            for nr, name in abi.syscalls.items():
                core.check(lib.um_map_nr(abi_id, nr, self.index[name]))
            offs = ffi.new("int[6]", [ffi.offsetof("struct user_regs_struct", r) for r in abi.arg_regs])
            core.check(lib.um_set_regmap(
                abi_id,
                ffi.offsetof("struct user_regs_struct", abi.nr_reg),
                ffi.offsetof("struct user_regs_struct", abi.ret_reg),
                offs,
            ))
            for name, slots in path_args(abi.name).items():
                if name not in abi.numbers:
                    continue
                nofollow = spec(name, abi.name).nofollow
                for slot, (path_idx, dirfd_idx) in enumerate(slots):
                    empty = EMPTY_PATH_FLAGS.get(name, -1) if slot == 0 else -1
                    core.check(lib.um_set_path_arg(
                        abi_id, self.index[name], slot, path_idx,
                        -1 if dirfd_idx is None else dirfd_idx, empty))
                    core.check(lib.um_set_nofollow(abi_id, self.index[name], slot, *_nofollow_args(nofollow[slot])))
        # the same argument positions on every ABI (open, openat, openat2)
        for name, rule in WRITES.items():
            if name in self.index:
                core.check(lib.um_set_write(self.index[name], _WRITE_KINDS[rule[0]],
                                            rule[1] if len(rule) > 1 else -1))
