"""time: the wall clock a view shows.

    umview -p time,offset=86400 -- date                   # a day ahead, and running
    umview -p time,start=2030-01-01T00:00:00Z -- date     # from that instant on, running
    umview -p time,freeze=2030-01-01T00:00:00Z -- date    # that instant, standing still
    umview -p time -- sh                                  # the real time, settable in the view

CLOCK_REALTIME and the clocks that follow it (CLOCK_REALTIME_COARSE,
CLOCK_REALTIME_ALARM, CLOCK_TAI) read through clock_gettime, gettimeofday and
time (and i386's clock_gettime64) give the view's time: the call runs and its
result is shifted at exit, so errors are the kernel's. CLOCK_MONOTONIC, the
boot clocks and CPU-time clocks stay real, and so do file times (the kernel
stamps a file made in the view with the real time).

The vDSO: glibc, musl and Go read these clocks in the vDSO without a system
call. At each exec of a process of the view (the first process's too) the
module hides the vDSO from the new program: the AT_SYSINFO_EHDR entry of its
auxiliary vector becomes AT_IGNORE (umview/auxv.py), so libc finds none and
makes real calls, which the module sees. i386's AT_SYSINFO (the syscall
entry point, not the clocks) stays. A process already running when the
module is added with um_add_service keeps its vDSO: only what it execs next
sees the view's time.

Setting the clock in the view (clock_settime(CLOCK_REALTIME), settimeofday,
i386's stime) never sets the host's: it sets the view's time, for every
process of the view, with the kernel's rules (EFAULT, EINVAL, then EPERM
without CAP_SYS_TIME, which the monitor asks the kernel with
settimeofday(NULL, NULL): a pure permission check). A frozen clock stays
frozen at the new instant. settimeofday's timezone is ignored (it is the
kernel's, for the whole machine). adjtimex and clock_adjtime(CLOCK_REALTIME)
that only read work (their time is shifted); one that would adjust the
clock fails with EPERM, for root too.

Absolute sleeps on the realtime clocks (clock_nanosleep with TIMER_ABSTIME,
timerfd_settime with TFD_TIMER_ABSTIME, timer_settime with TIMER_ABSTIME,
futex waits with FUTEX_CLOCK_REALTIME or FUTEX_LOCK_PI, mq_timedsend and
mq_timedreceive) are shifted to wake when the view's clock reaches their
time; on a frozen clock, after as long as that time lies ahead of the frozen
instant. Only the calls with an absolute realtime deadline stop (the filter
tests the clock or the flags argument).
"""
import datetime
import errno
import logging
import re
import struct
import time as _time

from umview import auxv, core, fdpass
from umview.engine import CONTINUE, CONTINUE_AFTER, Engine, Skip
from umview.service import Module
from umview.syscalls import calls

log = logging.getLogger("umview")

CLOCK_REALTIME, CLOCK_REALTIME_COARSE, CLOCK_REALTIME_ALARM, CLOCK_TAI = 0, 5, 8, 11
#: the clocks that read the wall clock (TAI: the wall clock plus a whole number of seconds)
REALTIME_CLOCKS = frozenset({CLOCK_REALTIME, CLOCK_REALTIME_COARSE, CLOCK_REALTIME_ALARM, CLOCK_TAI})
TIMER_ABSTIME = 1
TFD_TIMER_ABSTIME, TFD_TIMER_CANCEL_ON_SET = 1, 2
FUTEX_LOCK_PI, FUTEX_WAIT_BITSET, FUTEX_WAIT_REQUEUE_PI, FUTEX_LOCK_PI2 = 6, 9, 11, 13
FUTEX_PRIVATE_FLAG, FUTEX_CLOCK_REALTIME = 128, 256
ADJ_OFFSET_SS_READ = 0xA001
STA_NANO = 0x2000
NS = 1_000_000_000
US = 1_000


def _futex_ops():
    """futex ops whose timeout is an absolute CLOCK_REALTIME time."""
    ops = {FUTEX_LOCK_PI}
    for op in (FUTEX_WAIT_BITSET, FUTEX_WAIT_REQUEUE_PI, FUTEX_LOCK_PI2):
        ops.add(op | FUTEX_CLOCK_REALTIME)
    return frozenset(o | p for o in ops for p in (0, FUTEX_PRIVATE_FLAG))


FUTEX_REALTIME_OPS = _futex_ops()

#: calls that only read the clock: their result is shifted at exit
READS = {"clock_gettime": "tp", "clock_gettime64": "tp", "gettimeofday": "tv", "time": "tloc"}
#: calls that set it: the view's clock is set instead
SETS = calls("clock-sets")
ADJUSTS = calls("clock-adjusts")
#: calls with an absolute deadline: name -> (argument of the deadline, offset of
#: the timespec in the structure it points to, in timespecs)
DEADLINES = {
    "clock_nanosleep": ("rqtp", 0), "clock_nanosleep_time64": ("rqtp", 0),
    "timerfd_settime": ("new", 1), "timerfd_settime64": ("new", 1),
    "timer_settime": ("new", 1), "timer_settime64": ("new", 1),
    "futex": ("timeout", 0), "futex_time64": ("timeout", 0),
    "futex_wait": ("timeout", 0), "futex_waitv": ("timeout", 0),
    "mq_timedsend": ("abs_timeout", 0), "mq_timedsend_time64": ("abs_timeout", 0),
    "mq_timedreceive": ("abs_timeout", 0), "mq_timedreceive_time64": ("abs_timeout", 0),
}


def word(call):
    """The struct format letter of a time_t (and of a timespec's nanoseconds)
    for the call: i386's old calls take 32 bits, its *64/*_time64 calls and
    every call of x86_64 and x32 64 bits (the table's class time64)."""
    return "i" if call.abi == "i386" and not call.of_class("time64") else "q"


def wrap(value, fmt):
    """value as the kernel stores it in a field of that format (it truncates)."""
    bits = 32 if fmt == "i" else 64
    return (value + (1 << bits - 1)) % (1 << bits) - (1 << bits - 1)


class ViewClock:
    """The view's wall clock: the real one plus an offset, or an instant
    standing still (frozen_ns). Times are integer nanoseconds since the epoch."""

    def __init__(self, offset_ns=0, frozen_ns=None):
        self.offset_ns = offset_ns
        self.frozen_ns = frozen_ns

    def view_ns(self, clock, real_ns):
        """What a reading real_ns of a realtime clock shows in the view."""
        if self.frozen_ns is None:
            return real_ns + self.offset_ns
        if clock == CLOCK_TAI:  # TAI - UTC, a whole number of seconds
            return self.frozen_ns + round((real_ns - _time.clock_gettime_ns(CLOCK_REALTIME)) / NS) * NS
        return self.frozen_ns

    def real_ns(self, clock, view_ns):
        """The real instant at which the view's clock reads view_ns (a
        deadline); on a frozen clock, now plus what lies ahead of the
        frozen instant."""
        if self.frozen_ns is None:
            return view_ns - self.offset_ns
        now = _time.clock_gettime_ns(CLOCK_TAI if clock == CLOCK_TAI else CLOCK_REALTIME)
        return now + view_ns - self.view_ns(clock, now)

    def set(self, view_ns):
        """The view's CLOCK_REALTIME reads view_ns now."""
        if self.frozen_ns is None:
            self.offset_ns = view_ns - _time.time_ns()
        else:
            self.frozen_ns = view_ns


class TimeEngine(Engine):
    """The calls that read, set or wait for the wall clock, and the exec
    events (the vDSO is hidden from each new program)."""

    name = "time"
    # only the calls that read or wait for a realtime clock stop
    value_syscalls = {
        "clock_gettime": (0, REALTIME_CLOCKS), "clock_gettime64": (0, REALTIME_CLOCKS),
        "clock_nanosleep": (1, frozenset({TIMER_ABSTIME})), "clock_nanosleep_time64": (1, frozenset({TIMER_ABSTIME})),
        "timerfd_settime": (1, frozenset({TFD_TIMER_ABSTIME, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET})),
        "timerfd_settime64": (1, frozenset({TFD_TIMER_ABSTIME, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET})),
        "timer_settime": (1, frozenset({TIMER_ABSTIME})), "timer_settime64": (1, frozenset({TIMER_ABSTIME})),
        "futex": (1, FUTEX_REALTIME_OPS), "futex_time64": (1, FUTEX_REALTIME_OPS),
        "futex_wait": (5, frozenset({CLOCK_REALTIME})), "futex_waitv": (4, frozenset({CLOCK_REALTIME})),
    }
    # those whose arguments do not say which clock stop always
    syscalls = SETS | ADJUSTS | frozenset((set(READS) | set(DEADLINES)) - set(value_syscalls))

    def __init__(self, clock):
        self.clock = clock
        self._warned = set()

    def wants(self, call):
        return call.name in self.syscalls or call.name in self.value_syscalls

    def on_exec(self, tid, former_tid):
        try:
            auxv.ignore(tid, {auxv.AT_SYSINFO_EHDR})
        except OSError as exc:
            if exc.errno != errno.ESRCH:
                self._warn("exec", "time: could not hide the vDSO from process %d (%s): its libc may read "
                           "the real clock without a system call", tid, exc.strerror)

    def _warn(self, key, *args):
        if key not in self._warned:
            self._warned.add(key)
            log.warning(*args)

    # --- entry ---
    def enter(self, call):
        name = call.name
        if name in READS:
            if name.startswith("clock_") and core.signed32(call.clock) not in REALTIME_CLOCKS:
                return CONTINUE
            return CONTINUE_AFTER
        if name in SETS:
            return self.set_clock(call)
        if name in ADJUSTS:
            return self.adjust(call)
        return self.shift_deadline(call)

    def exit(self, call):
        if call.retval < 0 and call.retval > -4096:
            return
        if call.name == "time":
            self.exit_time(call)
        elif call.name in READS:
            self.exit_read(call)
        else:
            self.exit_adjust(call)

    # --- reading ---
    def exit_read(self, call):
        """clock_gettime, gettimeofday: shift the struct the kernel filled."""
        w = word(call)
        fmt = "<" + w + w
        addr = call.arg(READS[call.name])
        if not addr:
            return  # gettimeofday(NULL, tz)
        sec, frac = struct.unpack(fmt, call.read_mem(addr, struct.calcsize(fmt)))
        unit = US if call.name == "gettimeofday" else 1
        clock = core.signed32(call.clock) if call.name.startswith("clock_") else CLOCK_REALTIME
        view = self.clock.view_ns(clock, sec * NS + frac * unit)
        sec, frac = divmod(view, NS)
        call.write_mem(addr, struct.pack(fmt, wrap(sec, w), frac // unit))

    def exit_time(self, call):
        """time(2): the result, and *tloc."""
        w = word(call)
        sec = wrap(self.clock.view_ns(CLOCK_REALTIME, _time.time_ns()) // NS, w)
        if call.tloc:
            try:
                call.write_mem(call.tloc, struct.pack("<" + w, sec))
            except OSError:
                call.retval = -errno.EFAULT
                return
        call.retval = sec

    # --- setting ---
    def set_clock(self, call):
        """clock_settime(CLOCK_REALTIME), settimeofday, stime: the view's
        clock, with the kernel's errors in the kernel's order."""
        w = word(call)
        if "clock" in call.spec.by_name:  # clock_settime
            if core.signed32(call.clock) != CLOCK_REALTIME:
                return CONTINUE  # the kernel's: EINVAL for the clocks no one sets, a device clock its own
            sec, nsec = struct.unpack("<" + w + w, call.read_mem(call.tp, struct.calcsize(w + w)))
            if not 0 <= nsec < NS or sec < 0:
                raise OSError(errno.EINVAL, "invalid time")
        elif call.name == "settimeofday":
            if call.tv:
                sec, usec = struct.unpack("<" + w + w, call.read_mem(call.tv, struct.calcsize(w + w)))
                if not 0 <= usec <= 1_000_000:
                    raise OSError(errno.EINVAL, "invalid time")
                nsec = usec * US
            if call.tz:
                call.read_mem(call.tz, 8)  # EFAULT as natively; the timezone is the machine's: ignored
            if call.tv and sec < 0:
                raise OSError(errno.EINVAL, "invalid time")
        else:  # stime(time_t *)
            sec, nsec = struct.unpack("<" + w, call.read_mem(call.tptr, struct.calcsize(w)))[0], 0
            if sec < 0:
                raise OSError(errno.EINVAL, "invalid time")
        self.check_permission(call)
        if call.name != "settimeofday" or call.tv:
            self.clock.set(sec * NS + nsec)
        return Skip(0)

    @staticmethod
    def check_permission(call):
        """EPERM as the kernel says it (CAP_SYS_TIME, an LSM, a seccomp
        filter of the process's own): settimeofday(NULL, NULL) checks and
        sets nothing."""
        probe = call.inject("settimeofday", 0, 0)
        if probe < 0:
            raise OSError(-probe, "not permitted")

    # --- adjtimex ---
    def adjust(self, call):
        """adjtimex, clock_adjtime: reading works (the time in the result is
        shifted at exit); adjusting would adjust the host's clock: EPERM."""
        if call.name != "adjtimex" and core.signed32(call.clock) not in REALTIME_CLOCKS:
            return CONTINUE
        try:
            modes = struct.unpack("<I", call.read_mem(call.buf, 4))[0]
        except OSError:
            return CONTINUE  # EFAULT: the kernel's
        if modes in (0, ADJ_OFFSET_SS_READ):
            return CONTINUE_AFTER
        self.check_permission(call)
        self._warn("adjust", "time: %s that would adjust the host's clock refused (EPERM); a view sets its "
                   "own clock with clock_settime or settimeofday", call.name)
        raise OSError(errno.EPERM, "a view does not adjust the host's clock")

    def exit_adjust(self, call):
        """The time field of struct timex: 32-bit fields for i386's old
        calls, 64-bit ones otherwise; microseconds unless STA_NANO."""
        w = word(call)
        status_at, time_at = (20, 36) if w == "i" else (40, 72)
        status = struct.unpack("<i", call.read_mem(call.buf + status_at, 4))[0]
        fmt = "<" + w + w
        sec, frac = struct.unpack(fmt, call.read_mem(call.buf + time_at, struct.calcsize(fmt)))
        unit = 1 if status & STA_NANO else US
        clock = CLOCK_REALTIME if call.name == "adjtimex" else core.signed32(call.clock)
        sec, frac = divmod(self.clock.view_ns(clock, sec * NS + frac * unit), NS)
        call.write_mem(call.buf + time_at, struct.pack(fmt, wrap(sec, w), frac // unit))

    # --- deadlines ---
    def shift_deadline(self, call):
        """An absolute deadline on a realtime clock: rewritten to the real
        instant the view's clock reaches it."""
        clock = self.deadline_clock(call)
        if clock is None:
            return CONTINUE
        arg, index = DEADLINES[call.name]
        addr = call.arg(arg)
        if not addr:
            return CONTINUE  # no timeout
        w = word(call)
        fmt = "<" + w + w
        size = struct.calcsize(fmt)
        try:
            data = call.read_mem(addr, size * (index + 1))
        except OSError:
            return CONTINUE  # EFAULT: the kernel's
        sec, nsec = struct.unpack_from(fmt, data, size * index)
        if not 0 <= nsec < NS or sec < 0 or (index and sec == nsec == 0):
            return CONTINUE  # EINVAL, or a timer disarmed: the kernel's
        real = max(self.clock.real_ns(clock, sec * NS + nsec), 0)
        rsec, rnsec = divmod(real, NS)
        new = data[:size * index] + struct.pack(fmt, wrap(rsec, w), rnsec)
        where = call.alloc(len(new))
        call.write_mem(where, new)
        call.set_arg(arg, where)
        return CONTINUE

    def deadline_clock(self, call):
        """The realtime clock a call's absolute deadline is on, or None."""
        name = call.name
        if name.startswith("clock_nanosleep"):
            clock = core.signed32(call.clock)
            return clock if call.flags & TIMER_ABSTIME and clock in REALTIME_CLOCKS else None
        if "op" in call.spec.by_name:  # futex(2): the op says which clock
            return CLOCK_REALTIME if core.signed32(call.op) in FUTEX_REALTIME_OPS else None
        if "clockid" in call.spec.by_name:  # futex_wait, futex_waitv
            return CLOCK_REALTIME if core.signed32(call.clockid) == CLOCK_REALTIME else None
        if name.startswith("mq_timed"):
            return CLOCK_REALTIME
        if not call.flags & 1:  # TFD_TIMER_ABSTIME, TIMER_ABSTIME
            return None
        if name.startswith("timerfd"):
            return self._fdinfo_clock(call.tid, call.fd)
        return self._timer_clock(call.tid, core.signed32(call.timer))

    @staticmethod
    def _fdinfo_clock(tid, fd):
        try:
            with open(f"/proc/{tid}/fdinfo/{fd}", "rb") as f:
                m = re.search(rb"^clockid:\s*(-?\d+)", f.read(), re.M)
        except OSError:
            return None  # EBADF: the kernel's
        clock = int(m.group(1)) if m else None
        return clock if clock in REALTIME_CLOCKS else None

    def _timer_clock(self, tid, timer):
        try:
            with open(f"/proc/{fdpass.tgid_of(tid)}/timers", "rb") as f:
                text = f.read()
        except OSError:
            self._warn("timers", "time: /proc/PID/timers cannot be read (a kernel without "
                       "CONFIG_CHECKPOINT_RESTORE?): absolute timer_settime deadlines stay real")
            return None
        current = None
        for line in text.splitlines():  # "ID: N", then its "signal:", "notify:", "ClockID: C"
            key, _, value = line.partition(b":")
            if key == b"ID":
                current = int(value)
            elif key == b"ClockID" and current == timer:
                clock = int(value)
                return clock if clock in REALTIME_CLOCKS else None
        return None


def parse_instant(opt, value):
    """An ISO 8601 date and time (a zone, else the monitor's local time, as
    date -d) or @SECONDS since the epoch, as integer nanoseconds."""
    text = str(value)
    try:
        if text.startswith("@"):
            return round(float(text[1:]) * NS)
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"module time: {opt}={text!r} is not an ISO 8601 date and time: give e.g. "
                         f"{opt}=2030-01-01T12:00:00Z (or a zone such as +02:00; none means local time), "
                         f"or {opt}=@SECONDS since the epoch") from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time
    delta = when - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return (delta.days * 86400 + delta.seconds) * NS + delta.microseconds * US


class TimeModule(Module):
    name = "time"
    description = "the view's wall clock: ahead, behind, from a date, or frozen (set in the view, never the host's)"
    options_help = ("offset=SECONDS (may be negative, fractional), start=ISO8601 (runs from that instant), "
                    "freeze=ISO8601 (stands still at it); at most one; none: the real time, which root of "
                    "the view may set for the view")

    def __init__(self, options):
        super().__init__(options)
        self.check_options({"offset", "start", "freeze"})
        given = [o for o in ("offset", "start", "freeze") if o in self.options]
        if len(given) > 1:
            raise ValueError(f"module time: {' and '.join(given)} exclude each other: give one")
        for o in given:
            if self.options[o] is True:
                raise ValueError(f"module time: {o} needs a value ({o}=...; see umview --list-modules)")
        clock = ViewClock()
        if "offset" in self.options:
            try:
                seconds = float(self.options["offset"])
            except ValueError:
                raise ValueError(f"module time: offset={self.options['offset']!r} is not a number of seconds "
                                 "(e.g. offset=86400, offset=-3600.5)") from None
            if seconds != seconds or abs(seconds) > 1e13:
                raise ValueError(f"module time: offset={self.options['offset']!r} is out of range")
            clock.offset_ns = round(seconds * NS)
        elif "start" in self.options:
            clock.offset_ns = parse_instant("start", self.options["start"]) - _time.time_ns()
        elif "freeze" in self.options:
            clock.frozen_ns = parse_instant("freeze", self.options["freeze"])
        self.clock = clock
        self.engine = TimeEngine(clock)

    def engines(self):
        return [self.engine]
