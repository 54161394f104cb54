"""umview --stats: the C core's counters of a run (struct um_stats) and the
calls it trapped, as a report and as JSON (--stats-file)."""
from umview import core
from umview.core import ffi, lib


class Stats:
    """The C core's counters (struct um_stats)."""

    FIELDS = ("stops", "seccomp_stops", "exit_stops", "fast_continue", "python_events", "skipped",
              "rewritten", "path_reads", "refused", "signals", "group_stops", "processes",
              "notifications", "layer_walks", "injected", "inject_failed", "notif_events", "addfd",
              "decided_once", "notif_stale", "write_failed", "own_trace", "pinned", "owned_pages", "regions",
              "served", "served_fallback", "inner_served")

    TOP = 12  # calls listed by format()

    def __init__(self, calls=None, monitor_cpu=None, **counts):
        for f in self.FIELDS:
            setattr(self, f, counts[f])
        #: name -> [trapped, handed to Python], for the calls trapped at least once
        self.calls = dict(calls or {})
        #: CPU seconds of the monitor process (its C loop and Python)
        self.monitor_cpu = monitor_cpu

    @classmethod
    def from_core(cls, table=None):
        """The counters now; with the syscall table the monitor mirrored
        (Monitor.table), also per call."""
        import resource

        st = ffi.new("struct um_stats *")
        lib.um_stats_get(st)
        calls = {}
        if table is not None:
            n = len(table.names)
            trapped, python = ffi.new("uint64_t[]", n), ffi.new("uint64_t[]", n)
            n = core.check(lib.um_sc_stats(trapped, python, n))
            for name in table.names:
                i = table.index[name]
                if i < n and trapped[i]:
                    calls[name] = [trapped[i], python[i]]
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return cls(calls=calls, monitor_cpu=round(ru.ru_utime + ru.ru_stime, 3),
                   **{f: getattr(st, f) for f in cls.FIELDS})

    def as_dict(self):
        return {**{f: getattr(self, f) for f in self.FIELDS}, "monitor_cpu": self.monitor_cpu,
                "calls": self.calls}

    def top_calls(self, n=TOP):
        """The n calls trapped most often: (name, trapped, handed to Python)."""
        return sorted(((k, t, p) for k, (t, p) in self.calls.items()), key=lambda c: (-c[1], c[0]))[:n]

    def format(self):
        return "\n".join(
            [
                "umview statistics:",
                f"  processes and threads traced  {self.processes}",
                f"  ptrace stops                  {self.stops}",
                f"  trapped calls (ptrace stops)  {self.seccomp_stops}",
                f"  trapped calls (notifications) {self.notifications}",
                f"    resumed by C, no Python     {self.fast_continue}",
                f"    refused (ENOSYS/EACCES) by C {self.refused}",
                f"    run with pinned paths       {self.pinned}"
                + (f" ({self.regions} regions mapped)" if self.regions else "")
                + (f"; {self.owned_pages} strings in a file's pages made the process's own" if self.owned_pages
                   else ""),
                f"    served by C on a real path  {self.served}"
                + (f" ({self.served_fallback} looked at, left to Python)" if self.served_fallback else ""),
                f"    answered by Python          {self.notif_events}"
                + (f" ({self.addfd} with an fd)" if self.addfd else ""),
                f"  events handed to Python       {self.python_events}",
            ]
            + ([f"  inner tracers' requests by C  {self.inner_served}"] if self.inner_served else [])
            + [
                f"  calls virtualized (skipped)   {self.skipped}",
                f"  calls rewritten               {self.rewritten}",
                f"  syscall-exit stops            {self.exit_stops}",
                f"  path strings read             {self.path_reads}",
                f"  symlink walks in C            {self.layer_walks}",
                f"  filters stacked at run time   {self.injected}"
                + (f" ({self.inject_failed} could not be)" if self.inject_failed else ""),
                f"  signals delivered             {self.signals}",
                f"  group-stops                   {self.group_stops}",
            ]
            + ([f"  register writes that failed   {self.write_failed}"] if self.write_failed else [])
            + ([f"  own filters' RET_TRACE (ENOSYS) {self.own_trace}"] if self.own_trace else [])
            + ([f"  monitor CPU time              {self.monitor_cpu:.2f} s"] if self.monitor_cpu is not None else [])
            + (["  trapped calls by name         trapped  to Python"]
               + [f"    {name:26}{t:>10}{p:>11}" for name, t, p in self.top_calls()]
               + ([f"    ... {len(self.calls) - self.TOP} more (--stats-file has them all)"]
                  if len(self.calls) > self.TOP else []) if self.calls else [])
        )
