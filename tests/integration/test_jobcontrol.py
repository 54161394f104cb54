"""Job control through a real terminal: Ctrl-Z, fg and Ctrl-C, with the
interactive shell under umview, and with umview as a job of a native shell.

Each scenario also runs natively (no umview), which checks the test's own
expectations on this machine.
"""
import os
import re
import time
import uuid

import pytest

from conftest import need, umview_argv
from terminal import TIMEOUT, Terminal, proc_stat

PROMPT = b"umview-test-prompt$ "


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


@pytest.mark.parametrize("where", ["native", "umview", "strace", "umview-strace"])
def test_interactive_bash_stops_resumes_and_interrupts_its_job(terminal, where):
    """Also with the shell under strace -f, natively and inside a view (an
    inner tracer: job control stays transparent through the emulated ptrace)."""
    need("bash", "sleep")
    bash = ["bash", "--norc", "--noprofile", "-i"]
    if "strace" in where:
        need("strace")
        bash = ["strace", "-f", "-qq", "-o", os.devnull, *bash]
    argv = umview_argv("--", *bash) if where.startswith("umview") else bash
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
