"""The control channel and its commands (docs/services.md): services added,
used, listed and deleted from inside a view; each command outside a view."""
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import entry_for, need_user, run, umview_argv, umview_for
from umview.modules.viewfs import layerfmt

BIN = os.path.dirname(sys.executable)
COMMANDS = ["um_add_service", "um_del_service", "um_ls_service", "um_fsalias", "um_attach", "viewname", "vuname"]


def env():
    return dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""), LC_ALL="C")


def in_view(script, *opts):
    r = run(umview_argv(*opts, "--", "bash", "-c", script), env=env())
    return r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace"), r.returncode


def test_control_number_matches_core():
    from umview import control
    from umview.core import lib

    assert control.NR_CONTROL == lib.UM_NR_CONTROL


def test_add_use_list_delete_in_one_session():
    # a process started before um_add_service obeys it once it is loaded
    out, err, rc = in_view(
        "(sleep 0.5; cat /unreal/etc/hostname) & "
        "um_add_service unreal && um_ls_service && cat /unreal/etc/hostname && wait && "
        "um_del_service unreal && um_ls_service && ! test -e /unreal/etc/hostname && echo gone",
        "--services")
    host = open("/etc/hostname").read()
    assert rc == 0, err
    assert out.count(host) == 2
    assert "unreal: /unreal/X is X" in out
    assert out.endswith("gone\n")


THREADS_AND_READ = r"""
import os, threading, time
out = []
def worker():
    time.sleep(0.8)  # asleep while the filter is stacked: the sleep restarts
    try:
        out.append(open("/unreal/etc/hostname").read())
    except OSError as e:
        out.append(e.strerror)
ts = [threading.Thread(target=worker) for _ in range(3)]
for t in ts:
    t.start()
r, w = os.pipe()
if os.fork() == 0:
    time.sleep(1.0)
    os.write(w, b"data")
    os._exit(0)
got = os.read(r, 10)  # blocked in read meanwhile: it restarts and gets the data
for t in ts:
    t.join()
os.wait()
print(out.count(open("/etc/hostname").read()), got.decode(), flush=True)
"""


def test_a_service_added_without_reserve_reaches_running_processes(tmp_path):
    # no --services: the filter does not trap path calls; um_add_service
    # stacks one on every process, threads included, in the middle of
    # blocking calls that must restart unharmed
    script = tmp_path / "t.py"
    script.write_text(THREADS_AND_READ)
    out, err, rc = in_view(f"python3 {script} & sleep 0.3; um_add_service unreal && wait", "--stats")
    assert rc == 0, err
    assert out == "3 data\n"
    assert re.search(r"filters stacked at run time +[1-9]", err), err


@pytest.mark.skipif(not os.access(os.path.join(BIN, "umview"), os.X_OK), reason="umview not installed beside python")
def test_the_views_commands_are_found_without_their_directory_on_path():
    # .venv/bin/umview bash with the system's PATH: um_ls_service was "not
    # found" (127); the view's PATH now ends with their directory, and a PATH
    # that reaches them already is left as it is
    argv = [os.path.join(BIN, "umview"), "--norc", "--", "bash", "-c", 'um_ls_service && printf "%s\n" "$PATH"']
    r = run(argv, env=dict(os.environ, PATH="/usr/bin:/bin"))
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert r.stdout.decode().splitlines()[-1] == "/usr/bin:/bin" + os.pathsep + BIN
    r = run(argv, env=dict(os.environ, PATH=BIN + ":/usr/bin:/bin"))
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert r.stdout.decode().splitlines()[-1] == BIN + ":/usr/bin:/bin"


def test_permanent_service_cannot_be_deleted():
    out, err, rc = in_view("um_add_service -p unreal && um_del_service unreal; echo rc=$?; um_ls_service",
                           "--services")
    assert "rc=1" in out and "EBUSY" in err
    assert "[permanent]" in out


def test_viewname_set_and_get():
    out, err, rc = in_view("viewname; viewname first; viewname; viewname -p second; vuname -N", "-V", "start")
    assert rc == 0, err
    assert out.split("\n") == ["start", "first", "second", "second", ""]


def test_vuname_in_view():
    out, err, rc = in_view("vuname -U -V -N; vuname -s -N", "-V", "v1")
    assert rc == 0, err
    server, view, name = out.split("\n")[0].split()
    assert int(server) > 0 and view == "0" and name == "v1"
    assert out.split("\n")[1] == os.uname().sysname + " v1"


def test_fsalias_then_mount(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    (src / "f").write_text("through the alias\n")
    out, err, rc = in_view(f"um_fsalias vb viewfs && vumount -t vb {src} {dst} && cat {dst}/f && "
                           f"vuumount {dst} && um_fsalias vb && vumount -t vb {src} {dst}; echo rc=$?",
                           "-p", "viewfs")
    assert "through the alias\n" in out
    assert out.endswith("rc=32\n"), err  # the alias deleted: the kernel answers


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if c != "vuname"])
def test_outside_a_view(cmd):
    args = {"um_add_service": ["unreal"], "um_del_service": ["unreal"], "um_fsalias": ["a", "viewfs"],
            "um_attach": ["1"]}
    r = subprocess.run([os.path.join(BIN, cmd)] + args.get(cmd, []), capture_output=True, env=env())
    assert r.returncode != 0
    assert b"not running inside umview" in r.stderr


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help(cmd):
    r = subprocess.run([os.path.join(BIN, cmd), "--help"], capture_output=True, env=env())
    assert r.returncode == 0 and b"usage:" in r.stdout


@pytest.mark.parametrize("opts", [[], ["-a"], ["-s", "-r"], ["-n"]])
def test_vuname_outside_is_uname(opts):
    want = subprocess.run([shutil.which("uname")] + opts, capture_output=True)
    got = subprocess.run([os.path.join(BIN, "vuname")] + opts, capture_output=True, env=env())
    assert (got.returncode, got.stdout) == (want.returncode, want.stdout)


def test_rc_file_runs_inside_the_view_before_the_command(tmp_path):
    rc = tmp_path / "rc"
    rc.write_text("um_add_service unreal\nviewname fromrc\nexport FROM_RC=yes\n")
    r = run(umview_argv("--services", "-f", str(rc), "--", "bash", "-c",
                        'echo "$FROM_RC $(viewname)"; cat /unreal/etc/hostname'), env=env())
    assert r.returncode == 0, r.stderr
    with open("/etc/hostname", "rb") as f:
        assert r.stdout == b"yes fromrc\n" + f.read()


def test_home_rc_file_is_read_unless_norc_and_a_failing_one_stops(tmp_path):
    (tmp_path / ".umviewrc").write_text("viewname athome\n")
    e = dict(env(), HOME=str(tmp_path))
    assert run(umview_argv("--", "viewname"), env=e).stdout == b"athome\n"
    assert run(umview_argv("--norc", "--", "viewname"), env=e).stdout == b"\n"
    (tmp_path / ".umviewrc").write_text("exit 3\n")
    r = run(umview_argv("--", "echo", "never"), env=e)
    assert r.returncode == 3 and r.stdout == b""


def test_missing_rc_file_is_an_error():
    r = run(umview_argv("-f", "/nonexistent/umviewrc", "--", "true"), env=env())
    assert r.returncode == 2 and b"/nonexistent/umviewrc" in r.stderr


@pytest.fixture
def src_tree(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "f").write_text("in the source\n")
    (tmp_path / "tgt").mkdir()
    return tmp_path


def test_viewfs_source_under_an_older_unreal_mount(src_tree):
    # the module's own operations (resolving SOURCE) see the engines older than
    # the mount: unreal, loaded before; loaded after viewfs, at start, it is not
    t = src_tree
    out, err, rc = in_view(f"mount -t viewfs /unreal{t}/src {t}/tgt && cat {t}/tgt/f && "
                           f"echo more > {t}/tgt/g && ls {t}/tgt", "-p", "unreal", "-p", "viewfs")
    assert rc == 0, err
    assert out == "in the source\nf\ng\n"
    assert (t / "src" / "g").read_text() == "more\n" and not (t / "tgt" / "g").exists()
    r = run(umview_argv("-p", f"viewfs,mount=/unreal{t}/src:{t}/tgt", "-p", "unreal", "true"), env=env())
    assert r.returncode == 2 and b"No such file or directory" in r.stderr


def test_cow_view_over_a_directory_another_mount_provides(src_tree):
    t = src_tree
    out, err, rc = in_view(f"mount -t viewfs {t}/src {t}/tgt && mount -t viewfs -o cow {t}/layer {t}/tgt && "
                           f"echo changed >> {t}/tgt/f && echo new > {t}/tgt/n && rm {t}/tgt/f && ls {t}/tgt; "
                           f"umount {t}/tgt && cat {t}/tgt/f", "-p", "viewfs")
    assert rc == 0, err
    assert out == "n\nin the source\n"
    assert (t / "src" / "f").read_text() == "in the source\n"  # the lower is untouched
    assert sorted(os.listdir(t / "layer")) == ["f", "n"]
    assert layerfmt.is_whiteout(os.lstat(t / "layer" / "f"))  # f's whiteout


def test_deleting_the_middle_service_closes_the_stack(src_tree):
    # unreal at /ua (oldest), viewfs and its mount (middle), unreal at /ub
    # (newest): a call enters /ub, goes down through the mount to /ua; without
    # viewfs, /ub hands its call straight to /ua. (/ub shows what lies below
    # it: a mount made after it would not show through /ub.)
    t = src_tree
    out, err, rc = in_view(
        f"um_add_service unreal,mountpoint=/ua,depth=1 && um_add_service viewfs && "
        f"mount -t viewfs /ua{t}/src {t}/tgt && um_add_service unreal,mountpoint=/ub,depth=1 && "
        f"cat /ub{t}/tgt/f && "
        f"{{ um_del_service viewfs; echo busy=$?; }} && umount {t}/tgt && um_del_service viewfs && "
        f"um_ls_service | cut -d: -f1 && ls /ub{t}/tgt | wc -l && cat /ub/ua{t}/src/f && "
        f"um_del_service unreal && ! test -e /ub/etc && cat /ua{t}/src/f", "--services")
    assert rc == 0, err
    assert out == ("in the source\nbusy=1\nunreal\nunreal\n0\nin the source\nin the source\n")
    assert "EBUSY" in err


STORM = r"""
import errno, os, socket, sys, threading, time
# calls in flight and a storm of new ones across the removal of a service:
# none may fail with an errno the kernel would not give (EIO above all)
paths = ["/etc/hostname", "/unreal/etc/hostname", "/nonexistent", ".", sys.argv[2]]
bad = []
stop = time.monotonic() + 1.5
def storm():
    while time.monotonic() < stop:
        for p in paths:
            try:
                os.stat(p)
            except OSError as e:
                if e.errno != errno.ENOENT:
                    bad.append(e.strerror)
        try:
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()
        except OSError as e:
            if e.errno != errno.EAFNOSUPPORT:
                bad.append(e.strerror)
        time.clock_gettime(time.CLOCK_REALTIME)
fd = os.open(sys.argv[2], os.O_RDWR)  # open across the removal
os.write(fd, b"HELLO\n")
r, w = os.pipe()
got = []
ts = [threading.Thread(target=storm), threading.Thread(target=storm),
      threading.Thread(target=lambda: got.append(os.read(r, 10)))]
for t in ts:
    t.start()
time.sleep(0.75)  # asleep while the service goes
os.write(w, b"data")
for t in ts:
    t.join()
print("errors", sorted(set(bad)), "read", got, os.pread(fd, 6, 0), flush=True)
"""

SERVICES = ["trace,{d}/log", "unreal", "vnet", "uname,nodename=x", "time", "fakeroot", "guard",
            "viewfs,mount={d}/layer:{d}/tree:cow"]


@pytest.mark.parametrize("service", SERVICES, ids=lambda s: s.split(",")[0])
def test_removing_a_service_fails_no_call_in_flight_or_after(tmp_path, service):
    # um_del_service while calls run: those it took finish under it (the
    # trace engine's exit of a sleep wrote to its closed log: EIO, and Python
    # aborted), new ones go on without it; as natively, where nothing goes
    (tmp_path / "tree").mkdir()
    (tmp_path / "layer").mkdir()
    (tmp_path / "storm.py").write_text(STORM)
    outs = []
    for where in ("native", "view"):
        (tmp_path / "tree" / "f").write_text("hello\n")
        argv = [sys.executable, str(tmp_path / "storm.py"), "1.5", str(tmp_path / "tree" / "f")]
        if where == "view":
            svc = service.format(d=tmp_path)
            script = (f"um_add_service {svc} || exit 9; {shlex.join(argv)} & sleep 0.5; "
                      f"um_del_service {svc.split(',')[0]} || exit 8; wait $!")
            argv = umview_argv("--norc", "--", "bash", "-c", script)
        r = run(argv, env=env(), timeout=60)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        assert b"Traceback" not in r.stderr, r.stderr.decode(errors="replace")
        outs.append(r.stdout)
    assert outs[1] == outs[0] == b"errors [] read [b'data'] b'HELLO\\n'\n"


OUTSIDE = """
while [ ! -e "$1/go" ]; do sleep 0.05; done
cat /unreal/etc/hostname > "$1/out" 2>&1
bash -c 'cat /unreal/etc/hostname' >> "$1/out" 2>&1
touch "$1/done"
"""


def test_attach_brings_a_process_started_outside_and_its_children_into_the_view(tmp_path):
    outside = subprocess.Popen(["bash", "-c", OUTSIDE, "outside", str(tmp_path)])
    try:
        out, err, rc = in_view(f"um_attach {outside.pid} && touch {tmp_path}/go && "
                               f"while [ ! -e {tmp_path}/done ]; do sleep 0.05; done; "
                               f"um_attach {outside.pid}; echo again=$?", "-p", "unreal")
        assert outside.wait(timeout=30) == 0
        r = run(umview_argv("--", "um_attach", str(outside.pid)), env=env())
        assert r.returncode == 1 and b"no process" in r.stderr  # reaped: gone
    finally:
        outside.kill()
        outside.wait()
    assert rc == 0, err
    host = open("/etc/hostname").read()
    assert (tmp_path / "out").read_text() == host * 2  # the process and its child
    assert "again=1" in out  # still this view's until its parent reaps it


def test_attach_follows_ptrace_rules():
    out, err, rc = in_view(f"um_attach $$; echo self=$?; um_attach {os.getpid()}; echo parent=$?; "
                           "um_attach 999999999; echo none=$?")
    assert "self=1" in out and "EBUSY" in err
    assert "parent=1" in out and "runs umview itself" in err
    assert "none=1" in out and "ESRCH" in err


def test_attach_refuses_another_users_process():
    need_user("nobody")
    victim = subprocess.Popen(["sleep", "30"])  # root's
    try:
        attach = " ".join(shlex.quote(a) for a in entry_for("nobody", "umview.commands:um_attach_main"))
        r = run(umview_for("nobody", "--", "bash", "-c", f"{attach} {victim.pid}; echo rc=$?"), env=env())
        assert b"rc=1" in r.stdout and b"EPERM" in r.stderr, r.stderr
        assert victim.poll() is None  # untouched
        with open(f"/proc/{victim.pid}/status") as f:
            assert "TracerPid:\t0" in f.read()
    finally:
        victim.kill()
        victim.wait()
