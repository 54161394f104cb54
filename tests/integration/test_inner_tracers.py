"""Tracers inside a view: strace runs under umview on the ptrace the monitor
emulates (umview.ptrace) and gives the log it gives natively; under a
module it shows each call as the process made it and the result the process
got (the original authors' order)."""
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import need, run, umview_argv

TRACED = "trace=%file,%process,%signal"


def _normalize(text):
    text = re.sub(r"0x[0-9a-f]+", "0xX", text)
    # when a child's SIGCHLD arrives depends on the scheduler, natively too
    # (and so whether a shell's SIGCHLD handler finds a child with WNOHANG,
    # whether a fork is interrupted by it and restarted)
    text = re.sub(r"(?m)^(--- SIGCHLD .*|rt_sigreturn\(.*|wait4\(.*WNOHANG.*|.*\(To be restarted\))\n", "", text)
    text = re.sub(r"\b\d{3,}\b", "N", text)  # pids, tids
    # a view refuses clone3 (ENOSYS: its flags are in memory, where the
    # filter cannot take CLONE_UNTRACED off) and the C library falls back
    # to clone with the same flags: one child either way
    text = re.sub(r"(?m)^clone3\(.*= -1 ENOSYS .*\n", "", text)
    text = re.sub(r"(?m)^clone3?\(.*\) += ", "clone(...) = ", text)
    return text


def strace_ff(tmp_path, name, cmd, opts=(), env=None, strace_opts=()):
    """strace -ff of cmd in tmp_path/work, natively or in a view (opts:
    umview's); the logs of every process, normalized and sorted (their pids
    differ), and the status."""
    logdir = tmp_path / name
    logdir.mkdir()
    (tmp_path / "work").mkdir(exist_ok=True)
    argv = ["strace", "-ff", "-qq", *strace_opts, "-e", TRACED, "-o", str(logdir / "log"), *cmd]
    if opts is not None:
        argv = umview_argv(*opts, "--", *argv)
    r = run(argv, cwd=tmp_path / "work", env=env)
    logs = sorted(_normalize(p.read_text()) for p in logdir.iterdir())
    return r, logs


COMMANDS = {
    "coreutils": ["sh", "-c", "ls -l /etc/hostname >/dev/null; cat /etc/hostname | wc -c; "
                              "cp /etc/hostname copy && rm copy; mkdir d && rmdir d"],
    "pipeline": ["sh", "-c", "echo hi | tr a-z A-Z | (read x; echo $x); (exit 3)"],
    "python": [sys.executable, "-c",
               "import subprocess, threading\n"
               "for _ in range(3):\n"
               "    t = threading.Thread(target=lambda: open('/etc/hostname').close()); t.start(); t.join()\n"
               "print(subprocess.run(['true']).returncode)"],
    "make": ["make", "-s"],
}
MAKEFILE = b"all: a b\n\tcat a b > c\na:\n\techo a > a\nb:\n\techo b > b\n"


@pytest.mark.parametrize("what", sorted(COMMANDS))
def test_strace_f_logs_inside_a_view_what_it_logs_natively(tmp_path, what):
    need("strace", "make")
    results = []
    for where, opts in (("native", None), ("view", ())):
        shutil.rmtree(tmp_path / "work", ignore_errors=True)
        (tmp_path / "work").mkdir()
        (tmp_path / "work" / "Makefile").write_bytes(MAKEFILE)
        results.append(strace_ff(tmp_path, where, COMMANDS[what], opts=opts))
    (native, nlogs), (viewed, vlogs) = results
    assert viewed.stderr == native.stderr
    assert viewed.stdout == native.stdout
    assert viewed.returncode == native.returncode
    assert len(nlogs) > 1
    assert vlogs == nlogs, "\n".join(difflib.unified_diff("".join(nlogs).splitlines(), "".join(vlogs).splitlines(),
                                                         "native", "view", lineterm="", n=1))


@pytest.mark.parametrize("notif", ["0", "1"])
@pytest.mark.parametrize("module", [(), ("-p", "unreal"), ("-p", "viewfs,mount={layer}:/:cow,except={top}")],
                         ids=["no-module", "unreal", "cow"])
def test_strace_seccomp_bpf_logs_inside_a_view_what_it_logs_natively(tmp_path, module, notif):
    """strace --seccomp-bpf: its own filter's RET_TRACE stops reach it as
    PTRACE_EVENT_SECCOMP, also for calls the view's notification traps (an
    exec too: in a cow view strace once saw its exec event without it). The
    cow view leaves tmp_path real, where strace's logs and the work lie."""
    need("strace")
    layer = tempfile.mkdtemp(prefix="umview-layer-")
    module = tuple(m.format(layer=layer, top=tmp_path) for m in module)
    env = dict(os.environ, UMVIEW_NOTIF=notif)
    cmd = COMMANDS["coreutils"]
    try:
        results = [strace_ff(tmp_path, where, cmd, opts=opts, env=env, strace_opts=["--seccomp-bpf"])
                   for where, opts in (("native", None), ("view", module))]
    finally:
        shutil.rmtree(layer)
    (native, nlogs), (viewed, vlogs) = results
    assert (viewed.returncode, viewed.stdout, viewed.stderr) == (native.returncode, native.stdout, native.stderr)
    assert len(nlogs) > 1
    assert vlogs == nlogs


def test_strace_gives_the_status_of_its_command_inside_a_view():
    need("strace")
    native = run(["strace", "-f", "-o", "/dev/null", "sh", "-c", "kill -TERM $$"])
    viewed = run(umview_argv("--", "strace", "-f", "-o", "/dev/null", "sh", "-c", "kill -TERM $$"))
    assert native.returncode == viewed.returncode != 0
    r = run(umview_argv("--", "strace", "-f", "-o", "/dev/null", "sh", "-c", "exit 7"))
    assert r.returncode == 7


def test_strace_inside_unreal_shows_the_path_the_process_used():
    need("strace")
    r = run(umview_argv("-p", "unreal", "--", "strace", "-qq", "-e", "trace=openat", "cat", "/unreal/etc/hostname"))
    assert r.returncode == 0, r.stderr
    with open("/etc/hostname", "rb") as f:
        assert r.stdout == f.read()  # the module served it
    assert b'openat(AT_FDCWD, "/unreal/etc/hostname", O_RDONLY) = 3\n' in r.stderr


def test_strace_in_a_cow_view_shows_the_write_as_the_process_made_it(tmp_path):
    need("strace")
    probe = tmp_path / "probe"
    # natively the same command creates the file: the test cannot pass vacuously
    subprocess.run(["sh", "-c", f"echo x > {probe}"], check=True)
    assert probe.read_text() == "x\n"
    probe.unlink()
    layer = tmp_path / "layer"
    layer.mkdir()
    r = run(umview_argv("-p", f"viewfs,mount={layer}:/:cow", "--", "strace", "-qq", "-e", "trace=openat",
                        "sh", "-c", f"echo x > {probe}; cat {probe}"))
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"x\n"
    assert not probe.exists()  # the real tree is untouched
    assert (layer / str(probe).lstrip("/")).read_text() == "x\n"
    assert f'openat(AT_FDCWD, "{probe}", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3'.encode() in r.stderr


def test_strace_shows_a_call_a_module_skipped_with_its_own_number_and_virtual_result():
    need("strace")
    code = "import socket\ntry:\n socket.socket()\nexcept OSError as e:\n print(e.errno)"
    r = run(umview_argv("-p", "vnet,null", "--", "strace", "-f", "-qq", "-e", "trace=socket",
                        "/usr/bin/python3", "-c", code))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == b"97"  # EAFNOSUPPORT
    assert re.search(rb"socket\(AF_INET, SOCK_STREAM\|SOCK_CLOEXEC, IPPROTO_IP\) = -1 EAFNOSUPPORT", r.stderr), r.stderr
    assert b"ENOSYS" not in r.stderr


def test_strace_raw_registers_at_the_exit_of_a_skipped_call_show_its_number():
    """-e raw=all prints the arguments as the registers hold them; -X raw the
    result: a skipped call keeps its number and arguments for the tracer."""
    need("strace")
    code = "import socket\ntry:\n socket.socket(socket.AF_INET6)\nexcept OSError:\n pass"
    r = run(umview_argv("-p", "vnet,null", "--", "strace", "-qq", "-e", "trace=socket", "-e", "raw=socket",
                        "/usr/bin/python3", "-c", code))
    assert re.search(rb"socket\(0xa, 0x80001, 0\)\s+= -1 EAFNOSUPPORT", r.stderr), r.stderr


def test_umview_inside_a_view_under_strace_inside_the_view(tmp_path):
    """A tracer inside a view tracing a nested view: strace sees the inner
    view's processes' calls as they made them."""
    need("strace")
    r = run(umview_argv("--", "strace", "-f", "-qq", "-e", "trace=openat", *umview_argv("-p", "unreal", "--"),
                        "cat", "/unreal/etc/hostname"))
    assert r.returncode == 0, r.stderr
    assert b'openat(AT_FDCWD, "/unreal/etc/hostname", O_RDONLY) = 3' in r.stderr


def test_a_tracer_that_exits_leaves_its_tracees_running(tmp_path):
    """strace killed while it traces: its tracee is detached and goes on, as
    natively (no PTRACE_O_EXITKILL)."""
    need("strace")
    out, started = tmp_path / "out", tmp_path / "started"
    script = (f"strace -qq -o /dev/null sh -c 'touch {started}; sleep 0.5; echo done > {out}' & s=$!; "
              f"until test -e {started}; do sleep 0.05; done; kill -KILL $s; wait $s; "
              f"until test -s {out}; do sleep 0.05; done")
    for argv in (["sh", "-c", script], umview_argv("--", "sh", "-c", script)):
        out.unlink(missing_ok=True)
        started.unlink(missing_ok=True)
        r = run(argv, timeout=60)
        assert r.returncode == 0, r.stderr
        assert out.read_text() == "done\n"


def test_ptrace_requests_of_an_unknown_kind_get_eio_and_others_esrch():
    code = ("import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "def pt(*a):\n"
            "    r = libc.ptrace(*a); return r, ctypes.get_errno()\n"
            "print(pt(7, os.getppid(), 0, 0)[1])\n"  # CONT on a process not traced: ESRCH
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    import time; time.sleep(2); os._exit(0)\n"
            "print(pt(0x4206, pid, 0, 0))\n"  # SEIZE
            "print(pt(0x4206, pid, 0, 0)[1])\n"  # again: EPERM
            "print(pt(0x4207, pid, 0, 0))\n"  # INTERRUPT
            "w = os.waitpid(pid, 0x40000000)\n"
            "print(hex(w[1]))\n"
            "print(pt(0x4299, pid, 0, 0)[1])\n"  # an unknown request: EIO
            "print(pt(8, pid, 0, 0))\n"  # KILL
            "print(os.waitpid(pid, 0)[1])\n")
    native = run(["/usr/bin/python3", "-c", code])
    viewed = run(umview_argv("--", "/usr/bin/python3", "-c", code))
    assert native.returncode == 0, native.stderr
    assert (viewed.stdout, viewed.stderr) == (native.stdout, native.stderr)
