"""The README's examples, each line run as written (as root) in a directory
that has what the line names: a Makefile, a git repository, ./prog,
disk.img, examples/. Each must end as the README promises (status 0, no
traceback), in order, as a new user would type them."""
import os
import re
import subprocess
import sys

import pytest

from conftest import need, need_user

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
MAKEFILE = """\
all:
\t@echo built
install:
\tmkdir -p $(DESTDIR)$(CURDIR)/prefix/share/hello && echo hi > $(DESTDIR)$(CURDIR)/prefix/share/hello/README
test:
\techo ok > test.out && cat test.out
"""
# covered by tests of their own: a distribution's root tree takes debootstrap
# minutes (tests/integration/test_rootfs.py runs -r on one)
ELSEWHERE = {"umview -r ~/debian -- bash"}


def examples_block():
    """The text of the README's first sh block under "## Examples"."""
    text = open(os.path.join(ROOT, "README.md")).read()
    return re.search(r"^## Examples\n.*?^```sh\n(.*?)^```", text, re.S | re.M).group(1)


def examples():
    """The lines of examples_block(), their comments cut off."""
    return [re.sub(r"\s+#\s.*$", "", line).strip() for line in examples_block().splitlines() if line.strip()]


@pytest.mark.slow
def test_the_readme_examples_run_as_written(tmp_path):
    need_user("root")
    for tool in ("make", "git", "gcc", "gdb", "strace", "mkfs.ext4", "fuse2fs", "script"):
        need(tool)
    work = tmp_path / "work"
    work.mkdir()
    (work / "Makefile").write_text(MAKEFILE)
    os.symlink(os.path.join(ROOT, "examples"), work / "examples")
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    (work / "prog.c").write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-g", "-o", "prog", "prog.c"], cwd=work, check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(work / "disk.img"), "16M"], check=True, capture_output=True)
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"], HOME=str(tmp_path), SHELL="/bin/sh")
    lines = examples()
    assert len(lines) >= 15, lines
    for line in lines:
        if line in ELSEWHERE:
            continue
        argv = ["bash", "-c", line]
        stdin = subprocess.DEVNULL  # the interactive ones (a shell, gdb) end at once
        data = None
        if line.startswith("umview-layer apply"):
            # it asks first, on a terminal: one, and the user's yes
            argv, stdin, data = ["script", "-qec", line, "/dev/null"], None, b"y\n"
        r = subprocess.run(argv, cwd=work, env=env, stdin=stdin, input=data, capture_output=True, timeout=300)
        assert r.returncode == 0, f"{line}: status {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        assert b"Traceback" not in r.stderr, f"{line}\n{r.stderr.decode(errors='replace')}"
    # what the lines changed: the kept layer, applied; nothing else
    assert (work / "prefix" / "share" / "hello" / "README").read_text() == "hi\n"
    assert not (work / "test.out").exists()  # --sandbox=ro's build was thrown away
