"""Shared fixtures: run a command natively and under umview, compare."""
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
EXAMPLES = os.path.join(REPO, "examples")


def umview_argv(*opts):
    """argv prefix that runs umview from the installed package."""
    return [sys.executable, "-m", "umview.cli", *opts]


def run(argv, *, cwd=None, env=None, input=None, timeout=300):
    return subprocess.run(argv, cwd=cwd, env=env, input=input, capture_output=True, timeout=timeout)


def run_both(cmd, *, opts=(), shell=True, **kw):
    """Run cmd natively and under umview; return (native, umview) results."""
    argv = ["bash", "-c", cmd] if shell else list(cmd)
    native = run(argv, **kw)
    viewed = run(umview_argv(*opts, "--", *argv), **kw)
    return native, viewed


def assert_same(native, viewed):
    assert viewed.stderr.decode(errors="replace") == native.stderr.decode(errors="replace")
    assert viewed.stdout.decode(errors="replace") == native.stdout.decode(errors="replace")
    assert viewed.returncode == native.returncode


def need(*programs):
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} on PATH")


@pytest.fixture
def workdir(tmp_path):
    return tmp_path
