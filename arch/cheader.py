# SPDX-License-Identifier: GPL-2.0-or-later
"""The syscall numbers of arch/ as a C header: the C core's only source of
them (build_core.py writes it at build time, into build/gen/um_sysnums.h).

Each call of each ABI is ``UM_NR_<ABI>_<name>``, ABI one of X86_64, I386
and X32, the number as the kernel shows it in orig_rax and seccomp_data.nr
(x32's with X32_SYSCALL_BIT). ``UM_SYSNUMS_DIGEST`` names the tables the
header was made from; the core hands it back (um_sysnums_digest), so a test
can tell that the compiled core and arch/ agree (tests/unit/test_arch.py).
"""

import hashlib

from . import ABIS

PREFIX = {"x86_64": "UM_NR_X86_64_", "i386": "UM_NR_I386_", "x32": "UM_NR_X32_"}


def digest():
    """A short hash of every (ABI, number, name) in arch/."""
    h = hashlib.sha256()
    for abi in ABIS:
        for nr, name in sorted(abi.syscalls.items()):
            h.update(f"{abi.name} {nr} {name}\n".encode())
    return h.hexdigest()[:16]


def header():
    """The text of um_sysnums.h."""
    out = ["/* um_sysnums.h: made by arch/cheader.py from arch/ at build time; do not edit */",
           "#ifndef UM_SYSNUMS_H", "#define UM_SYSNUMS_H", f'#define UM_SYSNUMS_DIGEST "{digest()}"']
    for abi in ABIS:
        for nr, name in sorted(abi.syscalls.items()):
            out.append(f"#define {PREFIX[abi.name]}{name} {nr:#x}" if abi.nr_bias
                       else f"#define {PREFIX[abi.name]}{name} {nr}")
    out.append("#endif")
    return "\n".join(out) + "\n"


def write(directory):
    """Write um_sysnums.h into directory (made if missing), unless it holds
    that text already (its time then stays, and nothing is rebuilt)."""
    import os

    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "um_sysnums.h")
    text = header()
    try:
        with open(path) as f:
            if f.read() == text:
                return path
    except OSError:
        pass
    with open(path, "w") as f:
        f.write(text)
    return path
