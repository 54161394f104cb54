"""bench/notifloor.c, the floor the benchmark compares umview with: it must
trap the path calls and let each run unchanged, or its figures mean nothing."""
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import REPO


@pytest.fixture(scope="module")
def notifloor():
    gcc = shutil.which("gcc")
    if not gcc:
        pytest.skip("no gcc")
    where = tempfile.mkdtemp(prefix="umview-notifloor-test-")
    tool = os.path.join(where, "notifloor")
    subprocess.run([gcc, "-O2", "-Wall", "-Werror", "-pthread", "-o", tool,
                    os.path.join(REPO, "bench", "notifloor.c")], check=True)
    yield tool
    shutil.rmtree(where)


def test_notifloor_answers_every_path_call_and_changes_no_result(notifloor):
    cmd = ["sh", "-c", "ls -la /etc /usr/bin | wc -l; readlink /proc/self/exe; test -e /nonexistent; echo $?"]
    native = subprocess.run(cmd, capture_output=True, text=True)
    floored = subprocess.run([notifloor, "--"] + cmd, capture_output=True, text=True)
    assert native.returncode == 0 and floored.returncode == 0, floored.stderr
    assert floored.stdout == native.stdout
    answered = int(floored.stderr.split("notifloor: ")[-1].split()[0])
    assert answered > 100, floored.stderr  # ls stats every entry through the floor


def test_notifloor_keeps_the_exit_status_and_refuses_unknown_calls(notifloor):
    assert subprocess.run([notifloor, "--", "sh", "-c", "exit 3"], capture_output=True).returncode == 3
    bad = subprocess.run([notifloor, "-s", "nosuchcall", "--", "true"], capture_output=True, text=True)
    assert bad.returncode == 2 and "nosuchcall" in bad.stderr
    only = subprocess.run([notifloor, "-s", "readlink", "--", "readlink", "/proc/self/exe"],
                          capture_output=True, text=True)
    assert only.returncode == 0 and "1 calls answered" in only.stderr
