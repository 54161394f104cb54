"""Call.inject (core um_inject): one system call run by a stopped tracee for
the monitor, after which its own call is decided as usual."""
import os
import sys

import pytest

from conftest import engine_opts, run, umview_argv

PROG = "import os; print(os.getpid() == int(os.readlink('/proc/self')), os.getpid() == os.getppid())"


@pytest.mark.parametrize("notif", ["1", "0"])
def test_injected_call_result_is_what_the_call_returns(notif):
    env = dict(os.environ, UMVIEW_NOTIF=notif)
    r = run(umview_argv(*engine_opts("InjectGetppid"), "--", sys.executable, "-S", "-c", PROG), env=env)
    assert r.stdout == b"False True\n", r.stderr
    assert r.returncode == 0


@pytest.mark.parametrize("notif", ["1", "0"])
def test_call_after_injections_runs_once_and_reaches_python_once(tmp_path, notif):
    log = tmp_path / "log"
    env = dict(os.environ, UMVIEW_NOTIF=notif, INJECT_LOG=str(log))
    r = run(umview_argv(*engine_opts("InjectThenRun"), "--", sys.executable, "-S", "-c", PROG),
            env=env, cwd=tmp_path)
    assert r.stdout == b"True False\n", r.stderr
    lines = log.read_text().splitlines()
    enters = [line for line in lines if line.startswith("enter")]
    assert enters and len(lines) == 2 * len(enters)
    for enter, exit_ in zip(lines[::2], lines[1::2]):
        tid = enter.split()[1]
        assert enter == f"enter {tid} uid={os.getuid()} cwd={tmp_path}"
        assert exit_ == f"exit {tid} {tid}"  # getpid's own result, once
