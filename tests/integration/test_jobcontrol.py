"""Job control through a real terminal: Ctrl-Z, fg and Ctrl-C, with the
interactive shell under umview, and with umview as a job of a native shell.

Each scenario also runs natively (no umview), which checks the test's own
expectations on this machine.
"""
import os
import pty
import re
import select
import signal
import time
import uuid

import pytest

from conftest import need, umview_argv

PROMPT = b"umview-test-prompt$ "
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


def states_of(arg):
    """Process states (R, S, T, t, ...) of the live processes with `arg` in argv."""
    states = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if arg not in f.read().split(b"\0"):
                    continue
            state = proc_stat(int(entry))[0]
        except OSError:
            continue
        if state != b"Z":
            states.append(state.decode())
    return states


def wait_for_states(arg, accept, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        states = states_of(arg)
        if states and all(s in accept for s in states):
            return states
        if time.monotonic() > deadline:
            raise AssertionError(f"processes with {arg!r} are in states {states}, wanted {accept}")
        time.sleep(0.05)


def shell_env():
    env = dict(os.environ, TERM="dumb", PS1=PROMPT.decode(), HISTFILE=os.devnull)
    env.pop("PROMPT_COMMAND", None)
    return env


@pytest.fixture
def terminal():
    opened = []

    def start(argv, env):
        t = Terminal(argv, env)
        opened.append(t)
        return t

    yield start
    for t in opened:
        t.close()


def unique_sleep():
    return f"30.{uuid.uuid4().int % 10**8:08d}"


@pytest.mark.parametrize("where", ["native", "umview"])
def test_interactive_bash_stops_resumes_and_interrupts_its_job(terminal, where):
    need("bash", "sleep")
    bash = ["bash", "--norc", "--noprofile", "-i"]
    argv = bash if where == "native" else umview_argv("--", *bash)
    t = terminal(argv, shell_env())
    t.expect(PROMPT)
    duration = unique_sleep()
    t.send(f"sleep {duration}\r".encode())
    wait_for_states(duration.encode(), "S")

    t.send(b"\x1a")  # Ctrl-Z
    t.expect(re.compile(rb"\[1\]\+\s+Stopped\s+sleep " + duration.encode()))
    t.expect(PROMPT)
    wait_for_states(duration.encode(), "Tt")

    t.send(b"fg\r")
    t.expect(b"sleep " + duration.encode())
    wait_for_states(duration.encode(), "S")

    t.send(b"\x03")  # Ctrl-C
    t.expect(PROMPT)
    assert states_of(duration.encode()) == []
    t.send(b"echo alive $((6 * 7))\r")
    t.expect(b"alive 42")
    t.expect(PROMPT)

    t.send(b"exit\r")
    assert t.wait() == 0


@pytest.mark.parametrize("where", ["native", "umview"])
def test_native_bash_stops_resumes_and_interrupts_umview_as_its_job(terminal, where):
    need("bash", "sleep")
    t = terminal(["bash", "--norc", "--noprofile", "-i"], shell_env())
    t.expect(PROMPT)
    duration = unique_sleep()
    prefix = "" if where == "native" else " ".join(umview_argv("--")) + " "
    t.send(f"{prefix}sleep {duration}\r".encode())
    wait_for_states(duration.encode(), "S")

    t.send(b"\x1a")
    t.expect(re.compile(rb"\[1\]\+\s+Stopped\s+.*sleep " + duration.encode()))
    t.expect(PROMPT)
    wait_for_states(duration.encode(), "Tt")

    t.send(b"fg\r")
    t.expect(b"sleep " + duration.encode())
    wait_for_states(duration.encode(), "S")

    t.send(b"\x03")
    t.expect(PROMPT)
    t.send(b"echo status=$?\r")
    t.expect(b"status=130")
    t.expect(PROMPT)
    assert states_of(duration.encode()) == []

    t.send(b"exit\r")
    assert t.wait() == 0
