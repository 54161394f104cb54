"""pip install of the package, as the README's first line does it: the
commands, their man pages, completion and the examples land in the venv."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_pip_install_in_a_venv_brings_man_pages_completion_and_examples(tmp_path):
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # a copy of the source: the build writes build/ and *.egg-info beside it
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", "build", "*.egg-info", ".git", "__pycache__",
                                                             "*.so", ".pytest_cache"))
    # with its dependencies, as the README's line does
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(src)], capture_output=True, timeout=900)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    for name in ("umview", "umview-layer", "umview-image", "vumount", "um_add_service"):
        assert (venv / "share" / "man" / "man1" / f"{name}.1").is_file()
        assert (venv / "share" / "bash-completion" / "completions" / name).is_file()
        assert (venv / "share" / "zsh" / "site-functions" / f"_{name}").is_file()
    assert (venv / "share" / "umview" / "examples" / "lying_engine.py").is_file()
    r = subprocess.run([str(venv / "bin" / "umview-layer"), "--version"], capture_output=True)
    assert r.returncode == 0 and r.stdout.startswith(b"umview-layer "), r.stderr
    if shutil.which("man"):
        # man finds pages through PATH: BIN's ../share/man
        env = dict(os.environ, PATH=f"{venv / 'bin'}:/usr/bin:/bin")
        env.pop("MANPATH", None)
        r = subprocess.run(["man", "-w", "umview"], capture_output=True, env=env)
        assert r.returncode == 0 and r.stdout.decode().strip() == str(venv / "share" / "man" / "man1" / "umview.1"), \
            (r.stdout, r.stderr)
    # the rest of the README's line: `.venv/bin/umview bash`, the venv not on
    # PATH; the view's commands are found all the same, at PATH's end
    env = dict(os.environ, PATH="/usr/bin:/bin", SHELL="/bin/sh")
    r = subprocess.run([str(venv / "bin" / "umview"), "bash"], input=b"um_ls_service; echo \"PATH=$PATH\"; exit 3\n",
                       capture_output=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 3, r.stderr
    assert f"PATH=/usr/bin:/bin:{venv / 'bin'}\n".encode() in r.stdout, r.stdout
    assert b"not running inside umview" not in r.stderr and b"command not found" not in r.stderr, r.stderr
