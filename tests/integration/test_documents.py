"""The README's and the user guide's commands, each run as the document
shows it, in order, and its output compared with what the document says it
printed.

A block of ```sh holds commands. In the guide's transcripts a command starts
with "$ " (a trailing backslash continues it) and the lines up to the next
command are what it printed; in the README a line without "$ " is a command
and the "$ " lines after a shell started under umview are typed into it. A
command that starts a shell under umview (`umview -p fs bash`) opens a
session: the commands after it go to that shell, up to `$ exit` or the end
of the block.

What is compared: each line shown is found among the lines printed, in
order, with numbers, hex addresses and sandbox directory names free (they
differ from run to run) and "vm" standing for this machine's host name; a
"..." line stands for any lines. A command shown without output must exit 0;
none may print a Python traceback it does not show.

The documents' scratch paths are made unique for the run (/tmp/dg, the
README's /tmp/layer and /tmp/log: a directory of the test's own) and so are
the few names outside /tmp a command changes for real (umview-layer apply
onto /, except= paths under /var/tmp, a network namespace); the rest is as
written. The sections the documents say any user can follow run again as
nobody. What is run elsewhere, or cannot be here, is listed in ELSEWHERE
with the reason."""
import importlib.metadata
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile

import pytest

from conftest import NOBODY, SYSTEM_PY, _reachable_by_nobody, as_user, need, need_user
from test_readme import MAKEFILE, examples_block

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)

# commands a test of their own runs, or that this machine cannot show
ELSEWHERE = {
    # the README's "Set up and run" and "Run the tests": tests/integration/test_install.py, and CI itself
    "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/umview bash":
        "tests/integration/test_install.py",
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -q -rs": "CI",
    # the README's Examples block: tests/integration/test_readme.py
    # a distribution's tree takes debootstrap minutes: tests/integration/test_system_image.py
    "debootstrap --variant=minbase bookworm ~/debian http://deb.debian.org/debian":
        "tests/integration/test_system_image.py",
    "umview -r ~/debian -- bash": "tests/integration/test_system_image.py",
    # arm64 programs: Debian's arm64 packages, fetched by .ci/run
    "umview --qemu -- ./busybox-arm64 uname -m": "tests/integration/test_qemu.py",
    "umview --qemu -r ~/arm64-tree -- /bin/bash": "tests/integration/test_qemu.py",
    # shows the message where user namespaces are off (tests/unit/test_fs.py)
    "vumount -t tmpfs none /tmp/dg/mnt": "tests/unit/test_fs.py (needs user.max_user_namespaces=0)",
}
# whole sections run elsewhere
ELSEWHERE_SECTIONS = {
    # debootstrap's two stages, qemu and apt take minutes: the story as one slow test
    "## A system image of another machine, without root": "tests/integration/test_system_image.py",
}
# commands the guide shows run inside a view of the section's module
INSIDE = {"vumount -t ext4 /etc/passwd /tmp/dg/mnt": "umview -p fs --norc sh"}
# what any user can do, the documents say, runs as nobody too: the README's
# blocks whose lead-in says "any user", the guide's sections by heading (but
# a line needing root: sudo, or apply onto /)
ANY_USER = {"docs/user-guide.md": ("## A throw-away copy-on-write view of `/`", "## Networks with vnet")}
ROOT_ONLY = ("sudo ", "umview-layer apply --yes", "examples/sandboxed_tests.sh")
# util-linux mount refuses a normal user: the guide says vumount for them
AS_NORMAL_USER = [("sh -c 'mount -t", "sh -c 'vumount -t"), ("umount /;", "vuumount /;")]
NOBODY_ONLY = ("/tmp/dg-mc",)  # "As nobody:" mincow; as root it writes /etc for real



# --- reading the documents ------------------------------------------------------------

def sh_blocks(doc):
    """(section heading, the prose just before, block lines) of each ```sh
    block of doc."""
    lines = open(os.path.join(ROOT, doc)).read().splitlines()
    heading, prose, i = "", [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            heading, prose = line, []
        elif line.startswith("```"):
            end = lines.index("```", i + 1)
            if line == "```sh":
                yield heading, " ".join(prose), lines[i + 1:end]
            i = end
            prose = []
        else:
            prose.append(line)
        i += 1


def cut_comment(line):
    return re.sub(r"\s+#\s.*$", "", line).rstrip()


def steps(block, transcript):
    """[(command, [shown lines], [(typed command, [shown lines])])]: in a
    transcript (the guide's) a command is a "$ " line and the lines after it
    are its output; elsewhere each line is a command, and "$ " lines are
    typed into the shell the line before opened."""
    out, i = [], 0
    while i < len(block):
        line = block[i]
        if transcript and not line.startswith("$ "):
            if out:
                (out[-1][2][-1][1] if out[-1][2] else out[-1][1]).append(line)
            i += 1
            continue
        typed = line.startswith("$ ")
        cmd = line[2:] if typed else line
        while cmd.endswith("\\") and i + 1 < len(block):
            i += 1
            cmd = cmd[:-1] + " " + block[i].strip()
        i += 1
        cmd = cut_comment(cmd).strip()
        if not cmd:
            continue
        if out and out[-1][3] and (typed or transcript):
            out[-1][2].append((cmd, []))
            if cmd == "exit":
                out[-1][3] = False
            continue
        out.append([cmd, [], [], opens_shell(cmd)])
    return [(c, shown, typed) for c, shown, typed, _ in out]


def opens_shell(cmd):
    words = cmd.split()
    if words[:1] == ["sudo"]:
        words = words[1:]
    return words[:1] == ["umview"] and len(words) > 1 and " -c " not in cmd and \
        (words[-1] in ("bash", "sh") or words[-2:] == ["--norc", "sh"])


# --- comparing ---------------------------------------------------------------------------

FREE = re.compile(r"(?P<hex>0x[0-9a-f]+)|(?P<num>\d+(?:\.\d+)?[KMGT]?)|(?P<sandbox>\S*umview-sandbox[^\s)]*)"
                  r"|(?P<space>\s+)|(?P<host>\bvm\b)")


def singular(line):
    """"3 changes" as "3 change": the count is free, so is its plural."""
    return re.sub(r"\b(\d+) (\w+?)s\b", r"\1 \2", line)


def pattern(shown):
    """A regex for a shown line (its comment cut)."""
    line = singular(re.sub(r"\s{2,}#\s.*$", "", shown).strip())
    out, at = [], 0
    for m in FREE.finditer(line):
        out.append(re.escape(line[at:m.start()]))
        kind = m.lastgroup
        out.append({"hex": r"0x[0-9a-f]+", "num": r"\d+(?:\.\d+)?[KMGT]?", "sandbox": r"\S*umview-sandbox[^\s)]*",
                    "space": r"\s+", "host": re.escape(socket.gethostname())}[kind])
        at = m.end()
    out.append(re.escape(line[at:]))
    return "".join(out)


def check_output(cmd, shown, status, printed):
    lines = [singular(line.strip()) for line in printed.splitlines()]
    wanted = [s for s in shown if s.strip()]
    if not wanted:
        assert status == 0, f"{cmd}: status {status}\n{printed[-3000:]}"
    elif not any("Error" in s for s in wanted):
        assert "Traceback" not in printed, f"{cmd}\n{printed[-3000:]}"
    at = 0
    for s in wanted:
        if re.fullmatch(r"\.{3,}", s.strip()):  # any lines (pytest's dots too)
            continue
        rx = re.compile(pattern(s))
        while at < len(lines) and not rx.fullmatch(lines[at]):
            at += 1
        assert at < len(lines), f"{cmd}: no line like {s!r} (in order) in what it printed:\n{printed[-3000:]}"
        at += 1


# --- the place the documents' commands run in --------------------------------------------

class Place:
    """A scratch directory standing for /tmp/dg (the working directory of
    the commands) with what they name, a home, and the user's PATH."""

    def __init__(self, user):
        self.user = user
        self.top = tempfile.mkdtemp(prefix="umview-doctest-")
        os.chmod(self.top, 0o755)
        self.dg = os.path.join(self.top, "dg")
        self.home = os.path.join(self.top, "home")
        self.subs = [("/var/tmp/dg-exc-probe", f"/var/tmp/dg-exc-probe-{os.getpid()}"),
                     ("/tmp/dg", self.dg), ("/tmp/layer", os.path.join(self.top, "layer")),
                     ("/tmp/log", os.path.join(self.top, "log")), ("umview-hello", f"umview-hello-{os.getpid()}")]
        self.netns = None
        self.sleeper = None
        self.touched = [f"/var/tmp/dg-exc-probe-{os.getpid()}", f"/usr/local/share/umview-hello-{os.getpid()}"]
        self.motd = None

    # the files the commands name
    def make(self):
        dg, home = self.dg, self.home
        for d in (dg, home, f"{dg}/mnt", f"{dg}/proj", f"{dg}/srv/app", f"{home}/project", f"{dg}/tests",
                  f"{self.top}/dg-mc-real", f"{self.top}/img/docs", f"{self.top}/boot", f"{self.top}/rootfs/etc", f"{self.top}/src",
                  f"{self.top}/pkg/DEBIAN", f"{self.top}/pkg/usr/share/doc-hello"):
            os.makedirs(d, exist_ok=True)
        write(f"{dg}/Makefile", MAKEFILE)
        write(f"{home}/project/Makefile", MAKEFILE)
        write(f"{dg}/proj/README", "from project\n")
        write(f"{dg}/srv/app/old", "in srv\n")
        write(f"{dg}/pytest.ini", "[pytest]\ntestpaths = tests\n")
        write(f"{dg}/tests/test_doc.py", "".join(f"def test_{n}():\n    pass\n" for n in range(4)))
        write(f"{dg}/server-tests.sh", "#!/bin/sh\nexec python3 -c 'import socket; s = socket.socket(); "
                                      "s.bind((\"127.0.0.1\", 8080)); s.listen(); print(\"listening\")'\n", 0o755)
        os.symlink(os.path.join(ROOT, "examples"), f"{dg}/examples")
        write(f"{self.top}/img/hello.txt", "hello from the image\n")
        run_ok(["mkfs.ext4", "-q", "-F", "-d", f"{self.top}/img", f"{dg}/disk.img", "16M"])
        # a disk image with a GPT: a boot partition, and one with the same files as disk.img
        write(f"{self.top}/boot/boot.txt", "boot\n")
        with open(f"{dg}/board.img", "wb") as f:
            f.truncate(32 << 20)
        subprocess.run(["sfdisk", "-q", f"{dg}/board.img"], check=True, capture_output=True,
                       input=b'label: gpt\nstart=1MiB, size=8MiB, type=uefi, name="boot"\n'
                             b'start=9MiB, size=20MiB, type=linux, name="root"\n')
        for tree, offset, size in (("boot", 1 << 20, "8192k"), ("img", 9 << 20, "20480k")):
            run_ok(["mkfs.ext4", "-q", "-F", "-d", f"{self.top}/{tree}", "-E", f"offset={offset}", f"{dg}/board.img",
                    size])
        run_ok(["mksquashfs", f"{self.top}/img", f"{dg}/root.sqfs", "-quiet", "-noappend"])
        run_ok(["genisoimage", "-quiet", "-o", f"{dg}/cd.iso", f"{self.top}/img"])
        write(f"{self.top}/src/Makefile", "all:\n\t@echo built from the archive\n")
        run_ok(["tar", "czf", f"{dg}/src.tar.gz", "-C", f"{self.top}/src", "Makefile"])
        write(f"{self.top}/rootfs/etc/hostname", "box\n")
        run_ok(["tar", "cf", f"{dg}/rootfs.tar", "--owner=0", "--group=0", "-C", self.top, "rootfs"])
        write(f"{self.top}/pkg/DEBIAN/control", "Package: umview-doc-hello\nVersion: 1.0\nArchitecture: all\n"
                                                 "Maintainer: umview <umview@example.org>\nDescription: a test\n")
        write(f"{self.top}/pkg/usr/share/doc-hello/README", "hello\n")
        run_ok(["dpkg-deb", "--root-owner-group", "-b", f"{self.top}/pkg", f"{dg}/pkg.deb"])
        os.makedirs(f"{dg}/dist")
        make_wheel(f"{dg}/dist/umview_doc_hello-1.0-py3-none-any.whl")
        os.chmod(f"{self.top}/dg-mc-real", 0o777)
        if self.user != "root":
            self.subs += AS_NORMAL_USER
            for where, dirs, files in os.walk(self.top):
                for n in [where] + [os.path.join(where, f) for f in dirs + files]:
                    os.lchown(n, NOBODY, NOBODY)
        self.bin = BIN if self.user == "root" else self.wrappers()
        self.env = dict(os.environ, HOME=home, PATH=self.bin + os.pathsep + os.environ["PATH"], SHELL="/bin/sh")
        self.env.pop("UMVIEW_RC", None)
        if self.user == "root" and shutil.which("ip"):
            self.netns = f"umview-doc-{os.getpid()}"
            run_ok(["ip", "netns", "add", self.netns])
            self.subs.append(("netns=lab", f"netns={self.netns}"))
        if self.user == "root" and os.path.exists("/etc/motd"):
            with open("/etc/motd", "rb") as f:
                self.motd = f.read()

    def wrappers(self):
        """A directory with each of umview's commands as a script nobody can
        run (the test's python may be out of its reach)."""
        python = sys.executable if _reachable_by_nobody(sys.executable) else SYSTEM_PY
        where = os.path.join(self.top, "bin")
        os.makedirs(where)
        purelib = sysconfig.get_paths()["purelib"]
        for ep in importlib.metadata.distribution("umview").entry_points:
            if ep.group != "console_scripts":
                continue
            mod, _, fn = ep.value.partition(":")
            write(os.path.join(where, ep.name),
                  f"#!{python}\nimport site, sys\nsite.addsitedir({purelib!r})\nsys.argv[0] = {ep.name!r}\n"
                  f"from {mod} import {fn}\nsys.exit({fn}())\n", 0o755)
        # and the user's pytest
        write(os.path.join(where, "pytest"), f"#!{python}\nimport site, sys\nsite.addsitedir({purelib!r})\n"
                                             "import pytest\nsys.exit(pytest.console_main())\n", 0o755)
        return where

    def sub(self, text):
        if "um_attach 4242" in text and self.sleeper is None:
            # a process started outside, for the view to take in: the view
            # then lasts as long as it does
            self.sleeper = subprocess.Popen(["sleep", "3"], start_new_session=True)
            self.subs.append(("um_attach 4242", f"um_attach {self.sleeper.pid}"))
        # in one pass: a name put in is not replaced again
        table = dict(self.subs)
        return re.sub("|".join(re.escape(k) for k in sorted(table, key=len, reverse=True)),
                      lambda m: table[m.group(0)], text)

    def argv(self, script):
        return as_user(self.user, ["bash", "-c", script])

    def run(self, cmd, shown, session):
        start = time.monotonic()
        try:
            self._run(cmd, shown, session)
        finally:
            print(f"{time.monotonic() - start:6.1f} s  {cmd}")

    def _run(self, cmd, shown, session):
        cmd = self.sub(cmd)
        shown = [self.sub(s) for s in shown]
        if cmd.startswith("sudo ") and self.user == "root" and not shutil.which("sudo"):
            cmd = cmd[5:]
        if not session:
            r = subprocess.run(self.argv(cmd), cwd=self.dg, env=self.env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
            check_output(cmd, shown, r.returncode, r.stdout.decode(errors="replace"))
            return
        # a shell under umview, the commands typed into it; each followed by
        # a mark with its status, so that its output is told apart
        script = []
        for typed, _ in session:
            typed = self.sub(typed)
            script.append(typed if typed == "exit" else f"{typed}\necho \"@@@ $?\"")
        r = subprocess.run(self.argv(cmd), cwd=self.dg, env=self.env, input=("\n".join(script) + "\n").encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
        printed = r.stdout.decode(errors="replace")
        # [output 1, status 1, output 2, status 2, ..., what came after]
        parts = re.split(r"^@@@ (\d+)\n", printed, flags=re.M)
        check_output(cmd, shown, r.returncode, parts[-1])
        for n, (typed, typed_shown) in enumerate(s for s in session if s[0] != "exit"):
            assert 2 * n + 2 < len(parts), f"{cmd}: the session ended before {typed!r}:\n{printed[-3000:]}"
            try:
                check_output(self.sub(typed), [self.sub(s) for s in typed_shown], int(parts[2 * n + 1]),
                             parts[2 * n])
            except AssertionError as e:
                raise AssertionError(f"{e}\n--- the session {cmd!r} printed:\n{printed[-4000:]}") from None

    def close(self):
        if self.sleeper:
            self.sleeper.kill()
            self.sleeper.wait()
        if self.netns:
            subprocess.run(["ip", "netns", "delete", self.netns], capture_output=True)
        if self.motd is not None:
            with open("/etc/motd", "r+b") as f:  # in place: the file keeps its inode
                f.write(self.motd)
                f.truncate()
        for path in self.touched:
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.unlink(path)
        shutil.rmtree(self.top, ignore_errors=True)


def write(path, text, mode=None):
    with open(path, "w") as f:
        f.write(text)
    if mode is not None:
        os.chmod(path, mode)


def run_ok(argv):
    r = subprocess.run(argv, capture_output=True)
    assert r.returncode == 0, (argv, r.stderr)


def make_wheel(path):
    """A pure wheel with one module, made by hand (a wheel is a zip)."""
    dist = "umview_doc_hello-1.0.dist-info"
    files = {"umview_doc_hello.py": "HELLO = 1\n",
             f"{dist}/METADATA": "Metadata-Version: 2.1\nName: umview-doc-hello\nVersion: 1.0\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: umview-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{dist}/RECORD"] = "".join(f"{n},,\n" for n in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for n, text in files.items():
            z.writestr(n, text)


# --- the tests -------------------------------------------------------------------------------

def runnable(doc, user):
    """(command, shown, session) of doc's commands user runs ("rc", lines,
    [] for an rc file the guide shows)."""
    readme_examples = examples_block()
    for heading, lead, block in sh_blocks(doc):
        if doc == "README.md" and "\n".join(block) + "\n" == readme_examples:
            continue  # tests/integration/test_readme.py
        if heading in ELSEWHERE_SECTIONS:
            continue
        if user != "root" and not ("any user" in lead.lower() if doc == "README.md" else heading in ANY_USER[doc]):
            continue
        transcript = doc != "README.md" and any(line.startswith("$ ") for line in block)
        if not transcript and doc != "README.md" and block and block[0].startswith("um_add_service"):
            yield "rc", block, []  # an rc file, not commands
            continue
        for cmd, shown, session in steps(block, transcript):
            if cmd in ELSEWHERE:
                continue
            if user == "root" and any(s in cmd for s in NOBODY_ONLY):
                continue
            if user != "root" and any(cmd.startswith(s) or s in cmd for s in ROOT_ONLY):
                continue
            yield cmd, shown, session


def network():
    try:
        socket.create_connection(("deb.debian.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("user", ["root", "nobody"])
@pytest.mark.parametrize("doc", ["README.md", "docs/user-guide.md"])
def test_the_documents_commands_run_as_shown(doc, user):
    need_user(user)
    for tool in ("make", "mkfs.ext4", "fuse2fs", "squashfuse", "mksquashfs", "genisoimage", "fuseiso",
                 "archivemount", "dpkg-deb", "debugfs", "strace", "curl", "ip"):
        need(tool)
    if user != "root" and not _reachable_by_nobody(sys.executable) and not os.path.exists(SYSTEM_PY):
        pytest.skip(f"nobody cannot run {sys.executable}")
    place = Place(user)
    rc = None
    try:
        place.make()
        has_network = network()
        for cmd, shown, session in runnable(doc, user):
            if cmd == "rc":
                # the rc file the guide shows: run before a command that uses its mount
                rc = os.path.join(place.top, "rc")
                write(rc, place.sub("\n".join(shown) + "\n"))
                place.run(f"umview -f {rc} -- cat /tmp/dg/mnt/hello.txt", ["hello from the image"], [])
                continue
            if "curl" in cmd and not has_network:
                continue  # `--sandbox net` keeps a network this machine has not
            if cmd.startswith("cat ~/.umviewrc"):
                # the guide shows the file: make it as shown, for the commands after it
                write(os.path.join(place.home, ".umviewrc"), "\n".join(s for s in shown) + "\n")
            if cmd in INSIDE:
                place.run(INSIDE[cmd], [], [(cmd, shown)])
                continue
            try:
                place.run(cmd, shown, session)
            finally:
                if cmd.startswith("umview sh -c 'viewname"):
                    os.unlink(os.path.join(place.home, ".umviewrc"))
    finally:
        place.close()


@pytest.mark.slow
def test_the_readme_engine_refuses_unlink_in_tmp(tmp_path):
    # the README's two python blocks, one script: rm of a file under /tmp fails
    need_user("root")
    text = open(os.path.join(ROOT, "README.md")).read()
    code = "\n".join(re.findall(r"^```python\n(.*?)^```", text, re.S | re.M))
    victim = tmp_path / "x"
    victim.write_text("kept\n")
    code = code.replace("/tmp/x", str(victim)) + "\nimport os\nraise SystemExit(os.waitstatus_to_exitcode(status))\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert r.returncode != 0 and b"Operation not permitted" in r.stderr, r.stderr
    assert victim.read_text() == "kept\n"
    # natively rm removes it
    subprocess.run(["rm", str(victim)], check=True)
    assert not victim.exists()
