"""A program driven through a pseudo-terminal, for the interactive tests."""
import os
import pty
import re
import select
import signal
import time

TIMEOUT = 20


class Terminal:
    """A program in a new session whose controlling terminal is a pty."""

    def __init__(self, argv, env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: exec at once, whatever happens
            try:
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        self.seen = b""  # everything read so far
        self.pos = 0  # where the next expect starts looking
        self.status = None

    def send(self, data):
        os.write(self.fd, data)

    def _read(self, timeout):
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 4096)
        except OSError:  # EIO: no process holds the terminal any more
            data = b""
        self.seen += data
        return bool(data)

    def expect(self, pattern, timeout=TIMEOUT):
        """Read until `pattern` (literal bytes or a compiled regex) appears
        after the last match."""
        regex = re.compile(re.escape(pattern)) if isinstance(pattern, bytes) else pattern
        deadline = time.monotonic() + timeout
        while True:
            m = regex.search(self.seen, self.pos)
            if m:
                self.pos = m.end()
                return m
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(min(left, 0.5)):
                raise AssertionError(f"no {regex.pattern!r} on the terminal; it shows:\n"
                                     f"{self.seen[self.pos:].decode(errors='replace')!r}\n"
                                     f"(all output: {self.seen.decode(errors='replace')!r})")

    def wait(self, timeout=TIMEOUT):
        """Drain the output until the program ends; its wait status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
                return status
            self._read(0.1)
        raise AssertionError(f"still running after {timeout}s; terminal: {self.seen.decode(errors='replace')!r}")

    def close(self):
        """Kill whatever is left in the session, reap, close the terminal."""
        if self.status is None:
            for pid in session_members(self.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        os.close(self.fd)


def session_members(sid):
    pids = []
    for entry in os.listdir("/proc"):
        try:
            fields = proc_stat(int(entry))
        except (ValueError, OSError):
            continue
        if int(fields[3]) == sid:
            pids.append(int(entry))
    return pids


def proc_stat(pid):
    """/proc/PID/stat fields after the command name: [state, ppid, pgrp, session, ...]."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()
