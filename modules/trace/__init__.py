"""trace: an strace-like log of the view's calls, as a service.

    umview -p trace,/tmp/log make                 # = umview --trace /tmp/log make
    um_add_service trace,/tmp/log,calls=%file     # from inside a running view
    um_del_service trace                          # stop logging

One option without ``=`` is the log file (``-`` is umview's stderr; a relative
path is relative to the directory umview, or the process adding the service,
runs in); or ``fd=N``, a file descriptor umview holds (a nested view's trace
logs to the inner umview's stderr or file this way: the monitor takes the fd
from it, see umview.servicecontrol.ServiceControl.nest). ``calls=NAME:NAME`` or classes (``%file``, ``%process``,
``%network``, ``%desc``) restricts the log; ``kernel`` adds the call as the
kernel finally received it. The engine is the newest of all (engine.py beside this file).
Loaded while the view runs, it logs from that moment, and claims only what it
logs: with ``calls=`` a view's filter is more likely to trap it already
(docs/services.md, "Claims beyond the running filter").
"""
import os

from umview.service import Module

from .engine import TraceEngine, expand_classes, open_trace


class Trace(Module):
    name = "trace"
    description = "strace-like log of the calls of the view"
    options_help = "FILE (the log, required; - is stderr) or fd=N (umview's fd N), calls=NAME:%CLASS:..., kernel"

    def __init__(self, options):
        super().__init__(options)
        files = [k for k, v in self.options.items() if v is True and k != "kernel"]
        if "file" in self.options:
            files.append(self.options["file"])
        self.fd = None
        if "fd" in self.options:
            try:
                self.fd = int(self.options["fd"])
            except ValueError:
                raise ValueError(f"module trace: fd={self.options['fd']!r} is not a number") from None
            files.append(f"fd {self.fd}")
        unknown = [k for k, v in self.options.items() if v is not True and k not in ("calls", "file", "fd")]
        if unknown:
            raise ValueError(f"module trace: unknown option {', '.join(unknown)} (known: {self.options_help})")
        if len(files) != 1:
            raise ValueError("module trace: give the log file once: trace,FILE (- for stderr) or trace,fd=N")
        self.path = files[0]
        calls = self.options.get("calls")
        self.calls = None if calls is None else expand_classes(str(calls).replace("+", ":").split(":"))
        self.kernel = bool(self.options.get("kernel"))
        self.engine = None

    def engines(self):
        if self.fd is not None:
            try:
                out = os.fdopen(self.fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace")
            except OSError as exc:
                raise ValueError(f"module trace: fd {self.fd}: {exc.strerror}") from None
            self.engine = TraceEngine(out, self.calls, kernel=self.kernel)
            return [self.engine]
        path = self.path
        if path != "-":
            # an absolute path is one of the view; a relative one is relative
            # to a real directory (the adding process's cwd, as the kernel has it)
            path = self.realize(os.fsencode(path)) if path.startswith("/") else os.path.join(self.cwd, path)
        try:
            out = open_trace(path)
        except OSError as exc:
            raise ValueError(f"module trace: {self.path}: {exc.strerror}") from None
        self.engine = TraceEngine(out, self.calls, kernel=self.kernel)
        return [self.engine]

    def start(self):
        if self.view is not None and self.view.running:
            self.engine.started()  # the command's first execve is long past

    def close(self):
        if self.engine is not None:
            self.engine.close()
            self.engine = None
