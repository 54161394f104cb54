"""Man pages and completion are made from every command's own parser."""
import os
import subprocess
import tomllib

import pytest

from umview import manuals

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_every_installed_command_gets_a_man_page_and_completion(tmp_path):
    pytest.importorskip("argparse_manpage")
    pytest.importorskip("shtab")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        scripts = set(tomllib.load(f)["project"]["scripts"])
    made = manuals.write(str(tmp_path), "9.9")
    for where, prefix, suffix in (("share/man/man1", "", ".1"), ("share/bash-completion/completions", "", ""),
                                  ("share/zsh/site-functions", "_", "")):
        names = {os.path.basename(p).removeprefix(prefix).removesuffix(suffix) for p in made[where]}
        assert names == scripts, where
    page = os.path.join(tmp_path, "man", "man1", "umview.1")
    text = open(page).read()
    assert '"umview 9.9"' in text and "\\-\\-sandbox" in text and ".SH SEE ALSO" in text
    if subprocess.run(["sh", "-c", "command -v man"], capture_output=True).returncode == 0:
        r = subprocess.run(["man", "-P", "cat", "-l", page], capture_output=True, env=dict(os.environ, MANWIDTH="80"))
        assert r.returncode == 0 and b"--keep-layer" in r.stdout, r.stderr
    bash = os.path.join(tmp_path, "bash-completion", "completions", "umview")
    r = subprocess.run(["bash", "-c", f'source "{bash}" && complete -p umview'], capture_output=True)
    assert r.returncode == 0 and b"umview" in r.stdout, r.stderr
