"""cffi (API mode, out of line) build of umview's C core as umview._umcore.

The sources are umview/csrc/*.c (one file per concern, sharing
umview/csrc/internal.h, and the syscall numbers of arch/ as
build/gen/um_sysnums.h, written here by arch/cheader.py); the declarations are umview/core.h itself, so the header is the single place
that says what C offers Python. setup.py hands `ffi` to setuptools through
cffi_modules; `python3 build_core.py` builds in place for development.
"""
import glob
import os
import re
import sys

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "umview")
# the syscall numbers C uses, made from arch/ (arch/cheader.py)
GEN = os.path.join(HERE, "build", "gen")
sys.path.insert(0, HERE)
try:
    from arch import cheader
finally:
    sys.path.remove(HERE)
cheader.write(GEN)


def _cdef_text():
    with open(os.path.join(SRC, "core.h")) as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    # cffi reads integer #defines; drop any other preprocessor line
    return "\n".join(
        line for line in text.splitlines()
        if not line.lstrip().startswith("#") or re.match(r"\s*#define\s+\w+\s+-?\w+\s*$", line)
    )


def _relative(pattern):
    """The files matching pattern, relative to the current directory (setuptools
    wants relative source paths; it builds from the project directory)."""
    return sorted(os.path.relpath(p) for p in glob.glob(pattern))


ffi = FFI()
ffi.cdef(_cdef_text())
ffi.cdef("""
struct user_regs_struct { unsigned long long r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8,
    rax, rcx, rdx, rsi, rdi, orig_rax, rip, cs, eflags, rsp, ss, fs_base, gs_base, ds, es, fs, gs; };
""")
ffi.set_source(
    "umview._umcore",
    '#include <stdint.h>\n#include <stddef.h>\n#include <sys/user.h>\n#include "core.h"',
    sources=_relative(os.path.join(SRC, "csrc", "*.c")),
    include_dirs=[SRC, os.path.join(SRC, "csrc"), GEN],
    depends=_relative(os.path.join(SRC, "csrc", "*.h")) + _relative(os.path.join(SRC, "core.h")) +
    _relative(os.path.join(GEN, "*.h")),
    extra_compile_args=["-O2", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter"],
)

if __name__ == "__main__":
    ffi.compile(tmpdir=HERE, verbose=False)
