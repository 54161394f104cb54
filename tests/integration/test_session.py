"""The acceptance session of the services: one interactive `umview bash`
driven through a pseudo-terminal, as a user would type it: the rc file,
services added, used, listed and deleted, a process attached, filesystem
aliases, the view name."""
import os
import re
import subprocess
import sys

import pytest

from conftest import umview_argv
from terminal import Terminal

BIN = os.path.dirname(sys.executable)


class Session:
    def __init__(self, term):
        self.term = term
        self.n = 0

    def do(self, command):
        """Type a command line; its output and exit status."""
        self.n += 1
        mark = f"@@{self.n}@@"
        self.term.send(f"{command}; echo {mark}$?{mark}\n".encode())
        # the terminal echoes the line as typed ("$?"), then the output
        m = self.term.expect(re.compile(re.escape(mark.encode()) + rb"(\d+)" + re.escape(mark.encode())))
        start = self.term.seen.rfind(b"\n", 0, m.start())
        # (the line may be echoed twice: by the terminal, then by readline)
        echo_end = self.term.seen.find(b"\n", self.term.seen.rfind(f"echo {mark}".encode(), 0, m.start()))
        out = self.term.seen[echo_end + 1:start + 1] if start > echo_end else b""
        return out.decode(errors="replace").replace("\r\n", "\n"), int(m.group(1))


@pytest.fixture
def session(tmp_path):
    rc = tmp_path / "rc"
    rc.write_text("viewname from-rc\nexport RC_WAS_HERE=yes\n")
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"], LC_ALL="C", TERM="dumb", PS1="$ ",
               HOME=str(tmp_path))
    term = Terminal(umview_argv("--services", "-f", str(rc), "--", "bash", "--norc", "--noprofile", "-i"), env)
    try:
        yield Session(term)
        term.send(b"exit\n")
        assert term.wait() == 0
    finally:
        term.close()


def test_a_whole_session_of_services_through_a_terminal(session, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "f").write_text("from the source\n")
    host = open("/etc/hostname").read()

    assert session.do("viewname; echo $RC_WAS_HERE") == ("from-rc\nyes\n", 0)
    assert session.do("cat /unreal/etc/hostname")[1] != 0
    assert session.do("um_add_service unreal") == ("", 0)
    assert session.do("cat /unreal/etc/hostname") == (host, 0)
    # a process started outside, brought in: it sees /unreal from then on
    outside = subprocess.Popen(["bash", "-c", 'while [ ! -e "$1/go" ]; do sleep 0.05; done; '
                                'cat /unreal/etc/hostname > "$1/seen"', "outside", str(tmp_path)])
    try:
        assert session.do(f"um_attach {outside.pid} && touch {tmp_path}/go") == ("", 0)
        assert outside.wait(timeout=30) == 0
    finally:
        outside.kill()
        outside.wait()
    assert (tmp_path / "seen").read_text() == host
    assert session.do("um_add_service viewfs && um_fsalias bind viewfs") == ("", 0)
    out, st = session.do("um_ls_service")
    assert st == 0 and [line.split(":")[0] for line in out.splitlines()] == ["unreal", "viewfs"]
    assert session.do(f"mount -t bind {src} {dst} && cat {dst}/f") == ("from the source\n", 0)
    out, st = session.do("um_del_service viewfs")
    assert st == 1 and "EBUSY" in out
    assert session.do(f"umount {dst} && um_del_service viewfs && ls {dst} | wc -l") == ("0\n", 0)
    out, st = session.do(f"mount -t bind {src} {dst}")
    assert st != 0 and "unknown filesystem type 'bind'" in out  # the alias left with its service
    assert session.do("um_del_service unreal && um_ls_service | wc -l") == ("0\n", 0)
    assert session.do("test -e /unreal/etc/hostname")[1] == 1
    assert session.do("vuname -N; viewname renamed; vuname -N") == ("from-rc\nrenamed\n", 0)
