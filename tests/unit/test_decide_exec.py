"""The C core's decision on an exec (UM_CLAIM_EXEC): the program's path is
decided as any path argument is, and then what it runs, its #! interpreter
or the ELF loader it names (PT_INTERP), as a path too. A real tree in
tmp_path; a plain prefix and a layered one in it."""
import os
import struct

import pytest

from umview.core import ffi, lib

EXECVE = 0
NR_EXECVE = 59
NATIVE, PYTHON = lib.UM_DECIDE_NATIVE, lib.UM_DECIDE_PYTHON


def elf(interp, bits=64):
    """A minimal ELF executable head whose PT_INTERP is interp (None: a
    statically linked one)."""
    if bits == 64:
        ehsize, phsize = 64, 56
        head = b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0x401000, ehsize, 0, 0,
                                                                ehsize, phsize, 1, 0, 0, 0)
        off = ehsize + phsize
        ph = struct.pack("<IIQQQQQQ", 3 if interp else 1, 4, off, 0, 0, len(interp or b"") + 1, 0, 1)
    else:
        ehsize, phsize = 52, 32
        head = b"\x7fELF\x01\x01\x01" + bytes(9) + struct.pack("<HHIIIIIHHHHHH", 2, 3, 1, 0x8048000, ehsize, 0, 0,
                                                                ehsize, phsize, 1, 0, 0, 0)
        off = ehsize + phsize
        ph = struct.pack("<IIIIIIII", 3 if interp else 1, off, 0, 0, len(interp or b"") + 1, 0, 4, 1)
    return head + ph + (interp + b"\0" if interp else b"")


@pytest.fixture
def tree(tmp_path):
    top = os.fsencode(tmp_path)
    for d in ("plain", "lay", "bin"):
        (tmp_path / d).mkdir()
    os.symlink(tmp_path / "plain", tmp_path / "link")
    assert lib.um_table_reset(1) == 0
    assert lib.um_map_nr(lib.UM_ABI_X86_64, NR_EXECVE, EXECVE) == 0
    assert lib.um_set_claim(lib.UM_ABI_X86_64, EXECVE, lib.UM_CLAIM_PATH | lib.UM_CLAIM_EXEC) == 0
    assert lib.um_set_path_arg(lib.UM_ABI_X86_64, EXECVE, 0, 0, -1, -1) == 0
    lib.um_prefix_clear()
    assert lib.um_prefix_add_kind(top + b"/plain", lib.UM_PREFIX_PLAIN) == 0
    assert lib.um_prefix_add_kind(top + b"/lay", lib.UM_PREFIX_LAYERED) == 0
    lib.um_layer_clear()
    assert lib.um_layer_add(top + b"/lay/changed", lib.UM_LAYER_DIR) == 0
    lib.um_set_symlink_check(1)
    yield top
    lib.um_set_symlink_check(0)
    lib.um_layer_clear()
    lib.um_prefix_clear()
    lib.um_table_reset(0)


def decide_exec(top, name, content=None, mode=0o755):
    """um_decide for execve of top/bin/name, made with content first
    (bytes; None: left as it is)."""
    path = top + b"/bin/" + name
    if content is not None:
        with open(path, "wb") as f:
            f.write(content)
        os.chmod(path, mode)
    return decide_path(path)


def decide_path(path):
    """um_decide for execve of the absolute path."""
    d = ffi.new("struct um_decide_in *")
    d.abi = lib.UM_ABI_X86_64
    d.nr = NR_EXECVE
    d.args = [1, 0, 0, 0, 0, 0]
    d.walk = 1
    s = d.slot[0]
    s.state = lib.UM_SLOT_PATH
    s.cwd_relative = 1
    s.str = path
    d.slot[1].state = lib.UM_SLOT_NONE
    return lib.um_decide(d)


@pytest.mark.parametrize("line, want", [
    (b"#!/bin/sh\n", NATIVE),
    (b"#! \t/bin/sh -e\n", NATIVE),
    (b"#!sh\n", NATIVE),                        # relative: the kernel's, from the cwd
    (b"#!%s/plain/sh\n", PYTHON),               # under a plain prefix
    (b"#!  %s/plain/sh -x\n", PYTHON),
    (b"#!%s/link/sh\n", PYTHON),                # through a symlink to it
    (b"#!%s/plain/../bin/sh\n", NATIVE),        # out of it again
    (b"#!%s/lay/sh\n", NATIVE),                 # layered, but the layer did not change it
    (b"#!%s/lay/changed\n", PYTHON),            # ... and where it did
    (b"echo no interpreter\n", NATIVE),         # the kernel's ENOEXEC (or the shell's)
])
def test_an_exec_goes_to_python_where_its_interpreter_lies_under_a_prefix(tree, line, want):
    if b"%s" in line:
        line = line % tree
    assert decide_exec(tree, b"script", line) == want


@pytest.mark.parametrize("bits", [64, 32])
@pytest.mark.parametrize("interp, want", [
    (None, NATIVE),                             # statically linked
    (b"/lib64/ld-linux-x86-64.so.2", NATIVE),
    (b"%s/plain/ld.so", PYTHON),
    (b"%s/link/ld.so", PYTHON),
])
def test_an_exec_goes_to_python_where_its_elf_loader_lies_under_a_prefix(tree, bits, interp, want):
    if interp and b"%s" in interp:
        interp = interp % tree
    assert decide_exec(tree, b"prog", elf(interp, bits)) == want


def test_an_exec_the_kernel_fails_anyway_stays_with_the_kernel(tree, tmp_path):
    assert decide_exec(tree, b"missing") == NATIVE
    assert decide_exec(tree, b"missing/x") == NATIVE
    os.mkdir(tmp_path / "bin" / "dir")
    assert decide_exec(tree, b"dir") == NATIVE
    os.mkfifo(tmp_path / "bin" / "fifo")
    assert decide_exec(tree, b"fifo") == NATIVE  # looked at, never opened for reading: no wait


def test_an_exec_of_a_program_under_a_prefix_goes_to_python(tree):
    assert decide_path(tree + b"/plain/prog") == PYTHON
