"""ptrace's ABI as the emulation serves it: requests, options, events, wait
options, and the x86_64 register layout (include/uapi/linux/ptrace.h,
arch/x86/include/uapi/asm/ptrace-abi.h, include/uapi/linux/wait.h)."""
import errno

from umview import arch


# requests (include/uapi/linux/ptrace.h, arch/x86/include/uapi/asm/ptrace-abi.h)
TRACEME, PEEKTEXT, PEEKDATA, PEEKUSER, POKETEXT, POKEDATA, POKEUSER, CONT, KILL, SINGLESTEP = range(10)
GETREGS, SETREGS, GETFPREGS, SETFPREGS, ATTACH, DETACH = 12, 13, 14, 15, 16, 17
SYSCALL, GET_THREAD_AREA, SET_THREAD_AREA, SYSEMU, SYSEMU_SINGLESTEP, SINGLEBLOCK = 24, 25, 26, 31, 32, 33
SETOPTIONS, GETEVENTMSG, GETSIGINFO, SETSIGINFO, GETREGSET, SETREGSET = range(0x4200, 0x4206)
SEIZE, INTERRUPT, LISTEN, PEEKSIGINFO, GETSIGMASK, SETSIGMASK = range(0x4206, 0x420C)
GET_SYSCALL_INFO, GET_RSEQ_CONFIGURATION, SET_SYSCALL_INFO = 0x420E, 0x420F, 0x4212

# options and events
O_TRACESYSGOOD, O_TRACEFORK, O_TRACEVFORK, O_TRACECLONE = 1, 2, 4, 8
O_TRACEEXEC, O_TRACEVFORKDONE, O_TRACEEXIT, O_TRACESECCOMP = 0x10, 0x20, 0x40, 0x80
O_EXITKILL, O_SUSPEND_SECCOMP = 0x100000, 0x200000
O_MASK = 0xFF | O_EXITKILL | O_SUSPEND_SECCOMP
EVENT_FORK, EVENT_VFORK, EVENT_CLONE, EVENT_EXEC, EVENT_VFORK_DONE, EVENT_EXIT = 1, 2, 3, 4, 5, 6
EVENT_SECCOMP, EVENT_STOP = 7, 128

# wait options
WNOHANG, WSTOPPED, WEXITED, WCONTINUED, WNOWAIT = 1, 2, 4, 8, 0x01000000
WNOTHREAD, WALL, WCLONE = 0x20000000, 0x40000000, 0x80000000
P_ALL, P_PID, P_PGID, P_PIDFD = 0, 1, 2, 3
CLD_EXITED, CLD_KILLED, CLD_DUMPED, CLD_TRAPPED = 1, 2, 3, 4

# the kernel's restart codes, seen in a blocked call's result at an interrupt
_RESTARTS = (-512, -513, -514, -516, -errno.EINTR)
_USER_REGS = 27 * 8      # struct user_regs_struct
_ORIG_RAX = 15 * 8       # its orig_rax
_RAX = 10 * 8
_TRAP_BRKPT = 1
_RDI = 14 * 8
_RIP = 16 * 8
#: the x86_64 numbers of the calls the emulation looks for in a tracee's
#: registers (arch/x86_64.py: the one table of numbers)
NR = arch.abi_by_name("x86_64").numbers
_CLONE_PTRACE = 0x2000
lib_PTRACE_CONT, lib_PTRACE_SINGLESTEP, lib_PTRACE_LISTEN = CONT, SINGLESTEP, LISTEN
