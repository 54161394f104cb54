"""The C core runs the seccomp filters a process installs itself as the kernel
does (um_seccomp_bpf_run, umview/csrc/ownseccomp.c): each program here runs
in the C core and, in a forked child, in the kernel, on the same call, and
the answers must agree. No ptrace: the child installs the filter itself."""
import ctypes
import os
import signal
import struct

import pytest

core = pytest.importorskip("umview.core")
ffi, lib = core.ffi, core.lib

# classic BPF (linux/bpf_common.h, linux/filter.h)
LD, LDX, ST, STX, ALU, JMP, RET, MISC = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07
W, ABS, IMM, MEM, LEN = 0x00, 0x20, 0x00, 0x60, 0x80
K, X = 0x00, 0x08
ADD, SUB, MUL, DIV, OR, AND, LSH, RSH, NEG, MOD, XOR = (0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80,
                                                        0x90, 0xA0)
JA, JEQ, JGT, JGE, JSET = 0x00, 0x10, 0x20, 0x30, 0x40
TAX, TXA = 0x00, 0x80
A_REG = 0x10  # BPF_A, for RET

RET_ALLOW, RET_ERRNO, RET_KILL_THREAD, RET_TRACE = 0x7FFF0000, 0x00050000, 0, 0x7FF00000
AUDIT_ARCH_X86_64 = 0xC000003E
NR_GETPPID = 110
OFF_NR, OFF_ARCH, OFF_IP = 0, 4, 8


def arg(i, high=False):
    return 16 + 8 * i + (4 if high else 0)


def ins(code, k=0, jt=0, jf=0):
    return (code, jt, jf, k & 0xFFFFFFFF)


def errno_of_a():
    """End: the program answers ERRNO with the low 7 bits of A (+1: never 0)."""
    return [ins(ALU | AND | K, 0x7F), ins(ALU | ADD | K, 1), ins(ALU | OR | K, RET_ERRNO), ins(RET | A_REG)]


def only_getppid(body):
    """Every call but getppid is allowed: the child must still run and exit."""
    return [ins(LD | W | ABS, OFF_NR), ins(JMP | JEQ | K, NR_GETPPID, 1, 0), ins(RET | K, RET_ALLOW)] + body


def pack(prog):
    return b"".join(struct.pack("<HBBI", *i) for i in prog)


def seccomp_data(args, nr=NR_GETPPID, arch=AUDIT_ARCH_X86_64, ip=0):
    return struct.pack("<iIQ6Q", nr, arch, ip, *args)


def in_core(prog, args):
    ret = ffi.new("uint32_t *")
    r = lib.um_seccomp_bpf_run(pack(prog), len(prog), seccomp_data(args), ret)
    return None if r else ret[0]


def in_kernel(prog, args):
    """What the kernel's getppid(args) gives with prog installed: ("errno",
    e), ("value", ...) or ("signal", s)."""
    libc = ctypes.CDLL(None, use_errno=True)
    code = pack(prog)
    buf = ctypes.create_string_buffer(code, len(code))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    fprog = Fprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
            if libc.syscall(317, 1, 0, ctypes.byref(fprog)):  # seccomp(SET_MODE_FILTER)
                os.write(w, b"install %d" % ctypes.get_errno())
                os._exit(1)
            res = libc.syscall(ctypes.c_long(NR_GETPPID), *(ctypes.c_ulong(a) for a in args))
            os.write(w, b"errno %d" % ctypes.get_errno() if res == -1 else b"value %d" % res)
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read().decode()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return ("signal", os.WTERMSIG(status))
    kind, value = said.split()
    return (kind, int(value))


def outcome(ret):
    """What a process sees of a filter's answer (no tracer, no listener)."""
    action = ret & 0xFFFF0000
    if action == RET_ERRNO:
        return ("errno", ret & 0xFFFF) if ret & 0xFFFF else ("value", 0)
    if action in (RET_KILL_THREAD, 0x80000000):
        return ("signal", signal.SIGSYS)
    if action == RET_ALLOW:
        return ("value", os.getpid())
    raise AssertionError(f"no outcome for {ret:#x} here")


A0, A1 = ins(LD | W | ABS, arg(0)), ins(LD | W | ABS, arg(1))
PROGRAMS = {
    "add": [A0, ins(ALU | ADD | K, 7)],
    "sub-x": [A1, ins(MISC | TAX), A0, ins(ALU | SUB | X)],
    "mul-xor-or": [A0, ins(ALU | MUL | K, 13), ins(ALU | XOR | K, 0x55), ins(ALU | OR | K, 2)],
    "div-x": [A1, ins(MISC | TAX), A0, ins(ALU | DIV | X)],
    "div-k": [A0, ins(ALU | DIV | K, 3)],
    "lsh-x": [A1, ins(MISC | TAX), A0, ins(ALU | LSH | X)],
    "rsh-x": [A1, ins(MISC | TAX), A0, ins(ALU | RSH | X)],
    "lsh-rsh-k": [A0, ins(ALU | LSH | K, 31), ins(ALU | RSH | K, 29)],
    "neg": [A0, ins(ALU | NEG)],
    "high-word": [ins(LD | W | ABS, arg(2, high=True))],
    "arch-len": [ins(LD | W | ABS, OFF_ARCH), ins(LDX | W | LEN), ins(MISC | TXA)],
    "memory": [A0, ins(ST, 3), A1, ins(STX, 0), ins(LDX | MEM, 3), ins(MISC | TXA), ins(ALU | ADD | K, 1),
               ins(ST, 15), ins(LD | MEM, 15)],
    "imm": [ins(LD | IMM, 41), ins(LDX | IMM, 2), ins(ALU | ADD | X)],
    "jumps": [A0, ins(JMP | JGT | K, 10, 0, 2), ins(LD | IMM, 20), ins(JMP | JA, 1), ins(LD | IMM, 30),
              ins(JMP | JSET | K, 4, 0, 1), ins(ALU | ADD | K, 1)],
    "jumps-x": [A1, ins(MISC | TAX), A0, ins(JMP | JGE | X, 0, 0, 1), ins(LD | IMM, 5), ins(JMP | JEQ | X, 0, 0, 1),
                ins(LD | IMM, 6)],
}
ARGS = [(5, 0, 0, 0, 0, 0), (100, 3, 1 << 36, 0, 0, 0), (7, 35, 0xFFFFFFFF00000000, 0, 0, 0), (2**32 - 3, 33, 0, 0, 0, 0)]


@pytest.mark.parametrize("args", ARGS, ids=lambda a: "-".join(map(str, a[:2])))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_core_runs_a_filter_as_the_kernel_does(name, args):
    prog = only_getppid(PROGRAMS[name] + errno_of_a())
    ret = in_core(prog, args)
    assert ret is not None
    assert outcome(ret) == in_kernel(prog, args)  # ("install", errno): the kernel refused it


def test_division_by_a_zero_x_answers_kill_thread():
    prog = only_getppid([A1, ins(MISC | TAX), A0, ins(ALU | DIV | X)] + errno_of_a())
    assert in_core(prog, (9, 0, 0, 0, 0, 0)) == RET_KILL_THREAD
    assert in_kernel(prog, (9, 0, 0, 0, 0, 0)) == ("signal", signal.SIGSYS)


def test_other_calls_and_trace_data():
    prog = only_getppid([ins(RET | K, RET_TRACE | 0x1234)])
    assert in_core(prog, (0,) * 6) == RET_TRACE | 0x1234
    ret = ffi.new("uint32_t *")
    assert lib.um_seccomp_bpf_run(pack(prog), len(prog), seccomp_data((0,) * 6, nr=39), ret) == 0
    assert ret[0] == RET_ALLOW


@pytest.mark.parametrize("prog", [
    [ins(LD | W | ABS, 64), ins(RET | A_REG)],           # past struct seccomp_data
    [ins(LD | W | ABS, 2), ins(RET | A_REG)],            # not word-aligned
    [ins(LD | MEM, 16), ins(RET | A_REG)],               # no such scratch word
    [ins(LD | IMM, 1)],                                  # runs off its end
    [ins(JMP | JA, 5), ins(RET | K, 0)],                 # jumps past its end
    [ins(LD | W | 0x40, 0), ins(RET | A_REG)],           # a packet load (BPF_IND)
    [ins(LD | IMM, 7), ins(ALU | MOD | K, 3), ins(RET | A_REG)],  # seccomp takes no BPF_MOD
], ids=["past-data", "unaligned", "scratch", "no-ret", "far-jump", "ind-load", "mod"])
def test_programs_the_kernel_refuses_are_refused(prog):
    assert in_core(prog, (0,) * 6) is None
    assert in_kernel(prog, (0,) * 6) == ("install", 22)  # EINVAL
