"""ptrace for the processes of a view, emulated by the monitor.

ptrace allows one tracer per thread, and the monitor is it. A process of the
view that calls ptrace() (strace, gdb, a python-ptrace tool) becomes the
*inner tracer* of its tracee in the monitor's books (``Tracee``): its tracee's
stops reach the monitor as usual, are held there (the thread stays stopped)
and reported to the inner tracer's wait4/waitid with the status words the
kernel would give; its requests (PEEK/POKE, GETREGS, GETREGSET,
GET_SYSCALL_INFO, ...) are served on the tracee by the monitor, which is its
real tracer; its CONT/SYSCALL/LISTEN/DETACH resume the held stop.

The inner tracer is the newest engine of its tracees (the original authors'
order): at a syscall-entry stop it sees the call as the process made it, and
only when it resumes the tracee does the monitor decide the call (as it now
stands) through the C core and the engines; at the exit stop it sees the
result the engines made, and a call they skipped shows its own number.

A tracer's wait that finds no emulated stop blocks in the kernel: as the real
wait4/waitid when the tracer has children that may end it, else rewritten to
pause(); a stop for it then interrupts it (um_interrupt) and the wait is
answered at that interrupt stop. See docs/internals.md, "Tracers inside a
view".

The package's one interface to the rest of umview is InnerTracing, an engine
the monitor makes and calls (umview/monitor.py): its claims and enter/exit
as every engine's, and the monitor loop's reports of its tracees' stops
(stop_event, syscall_exit, fork_event, exec_event, exit_event). Its rooms:

    abi.py       ptrace's requests, options, events, wait options, registers
    tracee.py    the record of one traced thread, and of an exited one
    procfs.py    what it reads of /proc about threads and processes
    engine.py    InnerTracing: claims, the calls it enters, pid namespaces
    requests.py  the requests of inner tracers, and resuming a held stop
    events.py    tracees' stops turned into the stops their tracers wait for
    waits.py     wait4, waitid and waitpid of inner tracers
    procview.py  /proc/PID/status and stat as a tracer sees them

The C core's part is its stop loop and um_resume/um_interrupt (loop.c): the
emulation holds a stop there and resumes it when the inner tracer asks.
"""
from umview.ptrace.engine import InnerTracing

__all__ = ["InnerTracing"]
