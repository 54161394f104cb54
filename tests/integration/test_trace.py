"""umview --trace: an strace-like log, checked against strace itself where it
can be, and against what the modules do (the call as the process made it,
the result as it got it)."""
import os
import re
import shutil
import signal
import sys

import pytest

from conftest import run, umview_argv

STRACE = shutil.which("strace") or ("/usr/bin/strace" if os.path.exists("/usr/bin/strace") else None)
LINE = re.compile(r"^(\d+) (\w+)\((.*)\) = (-?\w+|\?)(?: (E[A-Z0-9]+) \(.*?\))?( \[.*)?$")


def traced(tmp_path, *opts, cmd, env=None):
    """Run cmd under umview --trace; return (completed process, log lines)."""
    log = tmp_path / "trace.log"
    r = run(umview_argv("--trace", str(log), *opts, "--", *cmd), cwd=tmp_path,
            env=env or dict(os.environ, LC_ALL="C"))
    return r, log.read_text().splitlines()


def calls(lines, names=None):
    """(pid, name, args, result, errno name, marks) of each complete call line."""
    out = []
    for line in lines:
        m = LINE.match(line)
        if m and (names is None or m.group(2) in names):
            out.append(m.groups())
    return out


def strace_pairs(tmp_path, names, cmd):
    """(name, result) of each call strace -f logs for cmd."""
    log = tmp_path / "strace.log"
    r = run([STRACE, "-f", "-qq", "-o", str(log), "-e", "trace=" + ",".join(names), *cmd],
            cwd=tmp_path, env=dict(os.environ, LC_ALL="C"))
    assert r.returncode == 0, r.stderr
    pairs = []
    for line in log.read_text().splitlines():
        m = re.match(r"^(?:\d+ +)?(\w+)\(.*\) += (-?\w+)", line)
        if m:
            pairs.append(m.groups())
    return pairs


PATH_CALLS = ["execve", "openat", "access", "newfstatat", "readlink", "getdents64", "close", "read"]


@pytest.mark.skipif(STRACE is None, reason="strace is not installed")
@pytest.mark.parametrize("cmd", [["cat", "FILE"], ["ls", "-a", "DIR"],
                                 [sys.executable, "-S", "-c", "open('FILE').read()"]],
                         ids=["cat", "ls", "python"])
def test_trace_names_and_results_match_strace(tmp_path, cmd):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_text("hello\n")
    cmd = [a.replace("FILE", str(tmp_path / "d" / "f")).replace("DIR", str(tmp_path / "d")) for a in cmd]
    cmd[0] = shutil.which(cmd[0])
    want = strace_pairs(tmp_path, PATH_CALLS, cmd)
    r, lines = traced(tmp_path, "--trace-calls", ",".join(PATH_CALLS), cmd=cmd)
    assert r.returncode == 0, r.stderr
    got = [(name, res) for _, name, _, res, _, _ in calls(lines)]
    assert len(want) > 5 and got == want


def test_unreal_trace_shows_the_call_as_made_and_the_real_result(tmp_path):
    r, lines = traced(tmp_path, "-p", "unreal", cmd=["cat", "/unreal/etc/hostname"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == open("/etc/hostname", "rb").read()
    opens = [ln for ln in lines if "hostname" in ln and " openat(" in ln]
    assert len(opens) == 1, lines
    assert re.match(r'^\d+ openat\(AT_FDCWD, "/unreal/etc/hostname", O_RDONLY\) = 3 \[rewritten\]$',
                    opens[0]), opens


def test_trace_kernel_shows_the_rewritten_path(tmp_path):
    r, lines = traced(tmp_path, "-p", "unreal", "--trace-kernel", "--trace-calls", "openat",
                      cmd=["cat", "/unreal/etc/hostname"])
    assert r.returncode == 0, r.stderr
    assert any(ln.endswith('openat(AT_FDCWD, "/unreal/etc/hostname", O_RDONLY) = 3 '
                           '[rewritten: openat(AT_FDCWD, "/etc/hostname", O_RDONLY)]') for ln in lines), lines


def test_virtualized_call_is_marked(tmp_path):
    from conftest import LYING_ENGINE

    r, lines = traced(tmp_path, "--engine", LYING_ENGINE, "--trace-calls", "getpid",
                      cmd=[sys.executable, "-S", "-c", "import os; print(os.getpid())"])
    assert r.returncode == 0, r.stderr
    pid = r.stdout.decode().strip()
    assert f"getpid() = {pid} [virtual]" in "\n".join(lines)


def test_failing_call_shows_errno_name(tmp_path):
    r, lines = traced(tmp_path, "--trace-calls", "openat", cmd=["cat", "/nonexistent/x"])
    assert r.returncode == 1
    assert any(ln.endswith('openat(AT_FDCWD, "/nonexistent/x", O_RDONLY) = -1 ENOENT (No such file or directory)')
               for ln in lines), lines


def test_trace_calls_restricts_the_log(tmp_path):
    r, lines = traced(tmp_path, "--trace-calls", "%file", cmd=["cat", "/etc/hostname"])
    assert r.returncode == 0
    names = {c[1] for c in calls(lines)}
    assert "openat" in names and "execve" in names
    assert not names & {"read", "write", "close", "mmap", "brk"}, names


def test_unknown_trace_call_is_an_error():
    r = run(umview_argv("--trace", "-", "--trace-calls", "nosuchcall", "--", "true"))
    assert r.returncode == 2 and b"nosuchcall" in r.stderr


def test_forked_child_calls_carry_its_pid(tmp_path):
    # the child sleeps, so the parent's wait4 surely blocks while it runs
    prog = ("import os, time\npid = os.fork()\nif pid == 0:\n    os.access('/child-was-here', 0)\n"
            "    time.sleep(0.3)\n    os._exit(7)\nos.waitpid(pid, 0)\nprint(pid)\n")
    r, lines = traced(tmp_path, "--trace-calls", "access,wait4,exit_group",
                      cmd=[sys.executable, "-S", "-c", prog])
    assert r.returncode == 0, r.stderr
    child = r.stdout.decode().strip()
    text = "\n".join(lines)
    # one line, or split if the parent's wait4 entry came between (strace -f does the same)
    assert (f'{child} access("/child-was-here", F_OK) = -1 ENOENT' in text
            or f'{child} access("/child-was-here", F_OK <unfinished ...>\n' in text
            and f'{child} <... access resumed>) = -1 ENOENT' in text), text
    assert f"{child} +++ exited with 7 +++" in text
    assert f"{child} exit_group(7) = ?" in text
    # the parent's wait4 blocks while the child runs: split like strace -f
    assert re.search(rf"^\d+ wait4\({child}, .* <unfinished \.\.\.>$", text, re.M)
    assert re.search(rf"^\d+ <\.\.\. wait4 resumed>\) = {child}$", text, re.M)


def test_bad_pointer_prints_its_address(tmp_path):
    prog = "import ctypes; ctypes.CDLL(None).syscall(21, ctypes.c_void_p(0xdead0000), 0)"
    r, lines = traced(tmp_path, "--trace-calls", "access", cmd=[sys.executable, "-S", "-c", prog])
    assert r.returncode == 0, r.stderr
    assert "access(0xdead0000, F_OK) = -1 EFAULT (Bad address)" in "\n".join(lines)


def test_log_is_complete_when_the_command_is_killed(tmp_path):
    prog = "import os; open('/etc/hostname').close(); os.kill(os.getpid(), 9)"
    r, lines = traced(tmp_path, "--trace-calls", "openat,kill", cmd=[sys.executable, "-S", "-c", prog])
    assert r.returncode == -signal.SIGKILL
    text = "\n".join(lines)
    assert '"/etc/hostname", O_RDONLY|O_CLOEXEC) = 3' in text
    assert re.search(r"kill\(\d+, SIGKILL\)", text)
    assert lines[-1].endswith("+++ killed by SIGKILL +++"), lines[-3:]


def test_trace_to_stderr(tmp_path):
    r = run(umview_argv("--trace", "-", "--trace-calls", "openat", "--", "cat", "/etc/hostname"))
    assert r.returncode == 0
    assert b'openat(AT_FDCWD, "/etc/hostname", O_RDONLY) = 3' in r.stderr
    assert r.stdout == open("/etc/hostname", "rb").read()


def test_trace_as_a_service_at_start_is_the_trace_option(tmp_path):
    log = tmp_path / "svc.log"
    r = run(umview_argv("-p", "unreal", "-p", f"trace,{log}", "--", "cat", "/unreal/etc/hostname"),
            env=dict(os.environ, LC_ALL="C"))
    assert r.returncode == 0
    opens = [c for c in calls(log.read_text().splitlines(), {"openat"}) if "/unreal/etc/hostname" in c[2]]
    assert len(opens) == 1 and opens[0][3] == "3" and "rewritten" in opens[0][5]


def test_trace_added_and_deleted_at_run_time_logs_only_in_between(tmp_path):
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, LC_ALL="C", PATH=bindir + os.pathsep + os.environ["PATH"])
    script = ("cat /etc/hostname.before 2>/dev/null; um_add_service trace,rt.log,calls=%file && "
              "cat /etc/hostname && um_ls_service -e | grep -c trace && um_del_service trace && "
              "cat /etc/hostname.after 2>/dev/null; true")
    r = run(umview_argv("--services", "--", "bash", "-c", script), cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "rt.log").read_text()
    assert '"/etc/hostname"' in text
    assert "hostname.before" not in text and "hostname.after" not in text


def test_trace_service_needs_its_file():
    r = run(umview_argv("-p", "trace", "true"))
    assert r.returncode == 2 and b"trace,FILE" in r.stderr


def test_full_trace_added_at_run_time_stacks_a_filter_and_logs_every_call(tmp_path):
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, LC_ALL="C", PATH=bindir + os.pathsep + os.environ["PATH"])
    log = tmp_path / "x.log"
    r = run(umview_argv("--", "bash", "-c", f"um_add_service trace,{log} && cat /etc/hostname && "
                        "um_del_service trace && echo after"), env=env)
    assert r.returncode == 0, r.stderr
    names = {c[1] for c in calls(log.read_text().splitlines())}
    # calls no module claims are in the log: the stacked filter traps them
    assert {"openat", "read", "write", "close", "mmap", "execve"} <= names
    assert "after" not in log.read_text()


# calls whose arguments umview's log prints as strace does, text for text
ARG_CALLS = ["getppid", "umask", "openat", "write", "lseek", "close", "chmod", "fchmodat", "access", "faccessat",
             "faccessat2", "mkdir", "mkdirat", "mknod", "mknodat", "rename", "renameat", "renameat2", "unlink",
             "unlinkat", "rmdir", "kill", "mmap", "munmap", "mprotect"]
ARG_PROGRAM = """
import mmap, os, signal, sys
d = sys.argv[1]
os.getppid()
os.umask(0o22)
fd = os.open(d + "/f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
os.write(fd, b"hello\\n\\x01")
os.lseek(fd, 0, os.SEEK_END)
os.close(fd)
os.chmod(d + "/f", 0o600)
os.access(d + "/f", os.R_OK | os.W_OK)
os.access(d + "/f", os.F_OK)
os.mkdir(d + "/sub", 0o755)
os.mkfifo(d + "/fifo", 0o644)
os.rename(d + "/f", d + "/g")
os.unlink(d + "/g")
os.rmdir(d + "/sub")
os.kill(0, 0)
m = mmap.mmap(-1, 8192, prot=mmap.PROT_READ | mmap.PROT_WRITE)
m.close()
os.getppid()
"""


def between_markers(lines):
    """The (name, args, result) of the lines between the two getppid calls,
    hex addresses as ADDR."""
    out, inside = [], False
    for name, args, result in lines:
        if name == "getppid":
            inside = not inside
            continue
        if inside:
            out.append((name, re.sub(r"0x[0-9a-f]+", "ADDR", args), re.sub(r"0x[0-9a-f]+", "ADDR", result)))
    return out


@pytest.mark.skipif(STRACE is None, reason="strace is not installed")
def test_trace_prints_arguments_as_strace_does(tmp_path):
    """The log's arguments come from umview's own syscall table (names and
    kinds): a mode in octal (open's only with O_CREAT), mknod's file type,
    access's R_OK|W_OK and F_OK, open flags, a written buffer, lseek's
    whence, a signal, mmap's protection and flags."""
    prog = tmp_path / "calls.py"
    prog.write_text(ARG_PROGRAM)
    d = tmp_path / "d"
    d.mkdir()
    cmd = [sys.executable, "-S", str(prog), str(d)]
    log = tmp_path / "strace.log"
    r = run([STRACE, "-qq", "-o", str(log), "-e", "trace=" + ",".join(ARG_CALLS), *cmd], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    want = between_markers(re.match(r"^(\w+)\((.*)\) += (.*)$", line).groups()
                           for line in log.read_text().splitlines() if re.match(r"^\w+\(.*\) += ", line))
    for p in d.iterdir():
        p.unlink()
    r, lines = traced(tmp_path, "--trace-calls", ",".join(ARG_CALLS), cmd=cmd)
    assert r.returncode == 0, r.stderr
    got = between_markers((name, args, res + (f" {err} ({msg})" if err else ""))
                          for name, args, res, err, msg in
                          (re.match(r"^\d+ (\w+)\((.*)\) = (-?\w+|\?)(?: (E[A-Z0-9]+) \((.*?)\))?", line).groups()
                           for line in lines if re.match(r"^\d+ \w+\(.*\) = ", line)))
    assert len(want) >= 15 and got == want
