/* ownseccomp.c - seccomp stops that a filter of the process's own made
 *
 * A process of the view may install seccomp filters itself. The kernel runs
 * them with the monitor's, newest first, and acts on the answer of highest
 * precedence: their ERRNO, KILL and TRAP need nothing from the monitor. Their
 * RET_TRACE is a PTRACE_EVENT_SECCOMP stop for the real tracer, the monitor,
 * with the data of the newest filter that said TRACE. The monitor's filters
 * say UM_SECCOMP_DATA (core.h); a stop with other data, or with that data for
 * a call none of them traps, is the process's. As the process sees it, its
 * filters run before the call reaches the machine (the monitor and its
 * modules stand in for the kernel): such a call goes to the process's own
 * tracer, or without one fails with ENOSYS and is never executed, whatever the
 * monitor would have made of it. See docs/internals.md, "A process's own
 * seccomp filters". */
#include "internal.h"

/* THE HOOK for an inner tracer (a process of the view that traces this one
 * through the emulated ptrace, with PTRACE_O_TRACESECCOMP): a filter of the
 * process's own returned RET_TRACE with data for the call tid is stopped at
 * (si: its PTRACE_GET_SYSCALL_INFO at the seccomp stop; abi: UM_ABI_*, or -1
 * for an arch the monitor does not model). Return 1 if the stop was taken
 * (the thread stays stopped for the inner tracer, which sees a
 * PTRACE_EVENT_SECCOMP with this data in its GETEVENTMSG); 0 if the thread
 * has no such tracer, and the call fails with ENOSYS as the kernel fails it.
 *
 * An emulation that takes the stop owns the thread's resumption. When the
 * inner tracer lets the call go on (possibly rewritten, or skipped with -1),
 * the kernel runs the filters again but takes RET_TRACE as allow: no stop of
 * the monitor's own comes. So the monitor must decide the call then, as at a
 * stop of its own filter, whenever monitor_may_trace(abi, nr) says one of its
 * filters traps the call as it then is (decide_call, then the fast path or
 * Python, as um_next does for a stop with UM_SECCOMP_DATA). */
int inner_tracer_seccomp_stop(pid_t tid, const struct um_sci *si, int abi, uint32_t data)
{
    (void)tid;
    (void)si;
    (void)abi;
    (void)data;
    return 0; /* no emulated ptrace yet */
}

/* At a seccomp stop: if a filter of the process's own made it, deal with it
 * (the inner tracer's, or ENOSYS) and return 1: the thread is resumed or
 * held. 0: the stop is the monitor's, for um_next to decide. */
int own_trace_stop(pid_t tid, const struct um_sci *si)
{
    uint32_t data = si->seccomp.ret_data;
    int abi = abi_of(si);
    if (abi < 0)
        return 0; /* an arch the monitor's filters refuse: um_next refuses it */
    if (data == UM_SECCOMP_DATA && monitor_may_trace(abi, si->seccomp.nr))
        return 0;
    stats.own_trace++;
    if (inner_tracer_seccomp_stop(tid, si, abi, data))
        return 1;
    /* "If there is no tracer present, the system call is not executed and
     * returns a failure status with errno set to ENOSYS" (seccomp(2)) */
    cur_sci = *si;
    skip_call(tid, abi, si->seccomp.args, -ENOSYS);
    thr(tid)->exit_wanted = 0;
    ptrace(PTRACE_CONT, tid, 0, 0);
    return 1;
}
