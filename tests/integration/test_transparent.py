"""Differential tests: the same command natively and under umview (no engine)
gives the same stdout, stderr and exit status."""
import pytest

from conftest import assert_same, run_both

COMMANDS = [
    "echo hello",
    "true",
    "false",
    "exit 42",
    "ls / | sort | head -20",
    "cat /etc/passwd | grep root | wc -l",
    "for i in 1 2 3; do echo $i; done | tac",
    "seq 1 2000 | sort -n | tail -3",
    "echo err >&2; exit 3",
    "(sleep 0.1; echo bg) & wait; echo done",
    "trap 'echo trapped' USR1; kill -USR1 $$; echo after",
    "sleep 5 & pid=$!; kill $pid; wait $pid; echo status=$?",
    "kill -TERM $$",
    "out=$(sh -c 'kill -KILL $$'); echo child=$?",
    "python3 -c 'import threading; ts=[threading.Thread(target=sum, args=([1]*1000,)) for _ in range(20)];"
    " [t.start() for t in ts]; [t.join() for t in ts]; print(len(ts))'",
    "python3 -c 'import subprocess; print(subprocess.run([\"echo\", \"sub\"], capture_output=True).stdout)'",
]


@pytest.mark.parametrize("cmd", COMMANDS)
def test_command_same_as_native(cmd, tmp_path):
    native, viewed = run_both(cmd, cwd=tmp_path)
    assert_same(native, viewed)
