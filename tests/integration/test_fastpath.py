"""The fast path: calls no engine owns are decided in C, never in Python."""
import json
import os

from conftest import run, umview_argv

ENGINE_SRC = '''
from umview import Engine
from umview.syscalls import PATH_SYSCALLS

class NullPath(Engine):
    name = "nullpath"
    path_syscalls = PATH_SYSCALLS
    prefixes = ("/nonexistent-umview-prefix",)
'''


def stats_of(tmp_path, cmd, engine=True):
    (tmp_path / "nullpath.py").write_text(ENGINE_SRC)
    stats = tmp_path / "stats.json"
    opts = ["--stats-file", str(stats)]
    if engine:
        opts += ["--engine", f"{tmp_path / 'nullpath.py'}:NullPath"]
    r = run(umview_argv(*opts, "--", *cmd), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return json.loads(stats.read_text().splitlines()[-1]), r


def test_unclaimed_paths_never_reach_python(tmp_path):
    st, r = stats_of(tmp_path, ["find", "/usr/include", "-name", "*.h"])
    trapped = st["seccomp_stops"] + st["notifications"]
    assert trapped > 100  # find's path calls were trapped ...
    assert st["fast_continue"] == trapped  # ... and all resumed by C
    assert st["python_events"] <= 2 * st["processes"]  # only exec/exit events
    assert st["exit_stops"] == 0


def test_no_engine_traps_nothing(tmp_path):
    st, _ = stats_of(tmp_path, ["sh", "-c", "ls / > /dev/null; cat /etc/hostname"], engine=False)
    assert st["seccomp_stops"] == st["notifications"] == st["python_events"] == 0


def test_fast_path_output_same_as_native(tmp_path):
    cmd = ["ls", "-la", "--time-style=+", "/etc", "/usr/include"]
    _, r = stats_of(tmp_path, cmd)
    native = run(cmd, cwd=tmp_path)
    assert (r.stdout, r.stderr) == (native.stdout, native.stderr)


def test_fast_path_uses_notifications_when_the_kernel_has_them(tmp_path):
    from umview.core import lib

    if not lib.um_notif_supported() or os.environ.get("UMVIEW_NOTIF") == "0":
        import pytest

        pytest.skip("no same-CPU seccomp notifications (Linux 6.6+), or UMVIEW_NOTIF=0")
    st, _ = stats_of(tmp_path, ["ls", "/usr/include"])
    # every call but the execs (which an inner tracer's own filter must see
    # stop first: a ptrace stop each, decided in C all the same)
    execs = st["calls"].get("execve", [0, 0])
    assert st["notifications"] > 0 and st["seccomp_stops"] == execs[0] and execs[1] == 0


def test_ptrace_only_fast_path_gives_the_same_results(tmp_path, monkeypatch):
    """UMVIEW_NOTIF=0: every trapped call is a ptrace stop, as before 6.6."""
    cmd = ["ls", "-la", "--time-style=+", "/etc", "/usr/include"]
    monkeypatch.setenv("UMVIEW_NOTIF", "0")
    st, r = stats_of(tmp_path, cmd)
    assert st["notifications"] == 0 and st["seccomp_stops"] > 0
    native = run(cmd, cwd=tmp_path)
    assert (r.stdout, r.stderr) == (native.stdout, native.stderr)


def test_stats_count_the_trapped_calls_by_name(tmp_path):
    """find stats and opens each entry: the counts by name add up to every
    trapped call, none of them went to Python, and the monitor's CPU time is
    there; --stats prints the same list."""
    st, _ = stats_of(tmp_path, ["find", "/usr/include", "-name", "*.h"])
    calls = st["calls"]
    assert sum(t for t, _ in calls.values()) == st["seccomp_stops"] + st["notifications"]
    assert sum(p for _, p in calls.values()) == 0
    assert calls["newfstatat"][0] > 100 or calls.get("fstat", [0])[0] > 100
    assert st["monitor_cpu"] > 0
    (tmp_path / "nullpath.py").write_text(ENGINE_SRC)
    r = run(umview_argv("--stats", "--engine", f"{tmp_path / 'nullpath.py'}:NullPath", "--", "find", "/usr/include"),
            cwd=tmp_path)
    assert b"trapped calls by name" in r.stderr and b"openat" in r.stderr and b"monitor CPU time" in r.stderr


def test_execs_stay_in_c_unless_what_they_run_lies_under_a_mount(tmp_path):
    """Under a redirecting mount the C core reads each program's head: a
    program, a failed PATH probe and a #! script whose interpreter is real
    run with no Python; a script whose interpreter lies under the mount, or
    reaches it through a symlink, goes to Python and runs as /unreal/X is X
    says (natively, with the real interpreter, the same lines come out)."""
    os.symlink("/unreal/bin", tmp_path / "ubin")
    scripts = {"real": "/bin/sh", "view": "/unreal/bin/sh", "link": f"{tmp_path}/ubin/sh"}
    for name, interp in scripts.items():
        (tmp_path / name).write_text(f"#!{interp}\necho {name} $0\n")
        (tmp_path / name).chmod(0o755)
    cmd = 'true; ./real; ./view; ./link; ./missing 2>/dev/null; echo $?'
    stats = tmp_path / "stats.json"
    r = run(umview_argv("-p", "unreal", "--stats-file", str(stats), "--", "sh", "-c", cmd), cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"real ./real\nview ./view\nlink ./link\n127\n", b"")
    st = json.loads(stats.read_text().splitlines()[-1])
    trapped, python = st["calls"]["execve"]
    assert trapped >= 6 and python == 2, st["calls"]
