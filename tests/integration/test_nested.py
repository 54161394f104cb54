"""A view inside a view: `umview` run in a view asks its monitor for a nested
view (docs/user-guide.md, "A view inside a view"; umview/views.py)."""
import os
import re
import shlex
import shutil
import sys
import tempfile

import pytest

from conftest import TEST_ENGINES, run, umview_argv

BIN = os.path.dirname(sys.executable)
UMVIEW = " ".join(shlex.quote(a) for a in umview_argv())  # the inner umview, as a shell word list
HOSTNAME = open("/etc/hostname", "rb").read()


def env(**extra):
    return dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""), LC_ALL="C", **extra)


def outer(script, *opts, **kw):
    """Run a shell script in a view made with opts."""
    return run(umview_argv(*opts, "--", "sh", "-c", script), env=kw.pop("env", None) or env(), **kw)


def engine_list(text):
    """um_ls_service -e lines -> [(epoch, name, view)]."""
    out = []
    for line in text.splitlines():
        m = re.match(r"\s*(\d+) \d (\S+).*\(view (\d+)\)$", line)
        if m:
            out.append((int(m.group(1)), m.group(2), int(m.group(3))))
    return out


@pytest.fixture
def sync_dir():
    """A directory real in every view below (a cow view of / keeps /dev real):
    files there let processes of two views wait for each other."""
    d = tempfile.mkdtemp(prefix="nested-sync-", dir="/dev/shm")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def wait_for(path):
    return f"i=0; while [ ! -e {path} ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"


def test_native_redirection_writes_the_file(tmp_path):
    # the baseline of the next test: natively, the same shell line does write
    target = tmp_path / "x"
    r = run(["sh", "-c", f"cat /etc/hostname > {target}"])
    assert r.returncode == 0 and target.read_bytes() == HOSTNAME


def test_inner_unreal_inside_an_outer_cow_view_writes_into_the_layer(tmp_path):
    layer, target = tmp_path / "layer", tmp_path / "target"
    layer.mkdir()
    target.mkdir()
    name = f"umview-nested-{os.getpid()}"
    r = outer(f"{UMVIEW} -p unreal -- sh -c 'cat /unreal/etc/hostname > /etc/{name}; "
              f"cat /unreal/etc/hostname > {target}/x; cat /etc/{name}'",
              "-p", f"viewfs,mount={layer}:/:cow")
    try:
        assert r.returncode == 0, r.stderr
        assert r.stdout == HOSTNAME  # the inner view sees what it wrote
        assert (layer / "etc" / name).read_bytes() == HOSTNAME
        assert (layer / target.relative_to("/") / "x").read_bytes() == HOSTNAME
        assert not os.path.exists(f"/etc/{name}")
        assert not (target / "x").exists()
    finally:
        if os.path.exists(f"/etc/{name}"):
            os.unlink(f"/etc/{name}")


def test_inner_engines_are_listed_newer_than_the_outer_ones():
    r = outer(f"{UMVIEW} -p unreal,mountpoint=/in -- um_ls_service -e; echo --; um_ls_service", "-p", "unreal")
    assert r.returncode == 0, r.stderr
    inner, _, after = r.stdout.decode().partition("--\n")
    engines = engine_list(inner)
    views = [v for _, _, v in engines]
    assert views == sorted(views, reverse=True) and views[0] == 1 and views[-1] == 0
    assert ("unreal#1" in [n for _, n, v in engines if v == 1]
            and "unreal#1" in [n for _, n, v in engines if v == 0])
    # one control engine: the inner one answers (the outer is not on the inner's stack)
    assert [n for _, n, _ in engines].count("control") == 1
    assert min(e for e, _, v in engines if v == 1) > max(e for e, _, v in engines if v == 0)
    assert after == "unreal: /unreal/X is X (registered twice: /unreal/unreal/X is X too)\n"


def test_inner_engine_sees_the_call_first_and_the_outer_sees_its_rewrite(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "from").write_text("from\n")
    (d / "to").write_text("to\n")
    log = tmp_path / "log"
    e = env(NEST_DIR=str(d), NEST_LOG=str(log))
    r = outer(f"cat {d}/from; {UMVIEW} --engine {TEST_ENGINES}:NestInner -- cat {d}/from",
              "--engine", f"{TEST_ENGINES}:NestOuter", env=e)
    assert (r.stdout, r.returncode) == (b"from\nto\n", 0), r.stderr
    assert log.read_text().splitlines() == [
        # the outer view's process: the outer engine alone
        f"nest-outer enter {d}/from", "nest-outer exit ok",
        # the inner view's: inner first, the outer sees the rewritten call; exits the reverse
        f"nest-inner enter {d}/from", f"nest-outer enter {d}/to", "nest-outer exit ok", "nest-inner exit ok",
    ]


@pytest.mark.parametrize("script, status", [("exit 7", 7), ("kill -TERM $$", -15)])
def test_the_inner_commands_status_passes_through(script, status):
    r = outer(f"{UMVIEW} -p unreal -- sh -c {shlex.quote(script)}; exit $?", "-p", "unreal")
    native = run(["sh", "-c", f"sh -c {shlex.quote(script)}; exit $?"])
    assert r.returncode == native.returncode == (status if status > 0 else 128 - status), r.stderr
    r = outer(f"exec {UMVIEW} -p unreal -- sh -c {shlex.quote(script)}", "-p", "unreal")
    assert r.returncode == status, r.stderr


def test_an_outer_process_alongside_does_not_see_the_inner_views_mount(sync_dir):
    check = "cat /unreal/etc/hostname 2>&1; echo status=$?"
    inner = f"cat /unreal/etc/hostname > {sync_dir}/in; {wait_for(sync_dir + '/done')}"
    r = outer(f"{UMVIEW} -p unreal -- sh -c {shlex.quote(inner)} & {wait_for(sync_dir + '/in')}; "
              f"{check}; touch {sync_dir}/done; wait", "-p", "unreal,mountpoint=/o")
    native = run(["sh", "-c", check], env=env())
    assert r.returncode == 0, r.stderr
    assert open(f"{sync_dir}/in", "rb").read() == HOSTNAME  # the inner view did see it meanwhile
    assert r.stdout == native.stdout and b"No such file" in native.stdout


def test_an_inner_real_prefix_does_not_hide_an_outer_layered_mount(tmp_path, sync_dir):
    # the C core's prefix table is one union: the inner cow view of / keeps
    # a/b real (except=), the outer view layers a; an outer process writing
    # under a/b must still write into the outer layer
    a, upper, upper2 = tmp_path / "a", tmp_path / "upper", tmp_path / "upper2"
    for p in (a / "b", upper, upper2):
        p.mkdir(parents=True)
    inner = (f"vumount -t viewfs -o cow,except={a}/b {upper2} / && touch {sync_dir}/in && "
             f"{wait_for(sync_dir + '/done')}")
    r = outer(f"{UMVIEW} -p viewfs -- sh -c {shlex.quote(inner)} & {wait_for(sync_dir + '/in')}; "
              f"echo outer > {a}/b/f; cat {a}/b/f; touch {sync_dir}/done; wait",
              "-p", f"viewfs,mount={upper}:{a}:cow")
    assert (r.stdout, r.returncode) == (b"outer\n", 0), r.stderr
    assert os.path.exists(f"{sync_dir}/in")
    assert (upper / "b" / "f").read_text() == "outer\n"
    assert not (a / "b" / "f").exists()


def test_views_nest_three_deep_in_order():
    # each view mounts unreal at its own point: a path crosses them innermost first
    host = HOSTNAME.decode()
    script = (f"{UMVIEW} -p unreal,mountpoint=/b -- {UMVIEW} -p unreal,mountpoint=/c -- "
              f"{UMVIEW} -p unreal,mountpoint=/d -- sh -c "
              "'cat /d/c/b/a/etc/hostname; cat /a/b/c/d/etc/hostname 2>/dev/null || echo wrong-order-fails; "
              "um_ls_service -e; vuname -V'")
    r = outer(script, "-p", "unreal,mountpoint=/a")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert out.startswith(host + "wrong-order-fails\n")
    views = [v for _, _, v in engine_list(out)]
    assert views == sorted(views, reverse=True) and set(views) == {0, 1, 2, 3}
    assert out.endswith("\n3\n")


def test_the_inner_views_engines_are_gone_when_its_command_ends(tmp_path):
    layer = tmp_path / "layer"
    layer.mkdir()
    # the cow mount's listings go to $XDG_RUNTIME_DIR (else /dev/shm): one of
    # this test's own, so that no other umview running meanwhile is counted
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    shm = f"ls {runtime} | grep -c '^umview-'"
    r = outer(f"{shm}; {UMVIEW} -p viewfs,mount={layer}:/tmp:cow -p unreal -- sh -c '{shm}; um_ls_service'; "
              f"echo --; {shm}; um_ls_service -e; test -e /unreal/etc/hostname || echo gone", "-p", "trace,/dev/null",
              env=dict(env(), XDG_RUNTIME_DIR=str(runtime)))
    assert r.returncode == 0, r.stderr
    before, inside, rest = r.stdout.decode().split("\n", 2)
    listing, _, after = rest.partition("--\n")
    after_count, tail = after.split("\n", 1)
    assert int(inside) > int(before) and after_count == before
    assert "unreal" in listing and "viewfs" in listing
    assert tail.split() == ["3", "2", "trace", "[trace]", "2", "2", "ptrace", "1", "2", "control", "gone"]


def test_the_control_channel_acts_on_the_inner_view():
    script = (f"{UMVIEW} -V inner -- sh -c 'viewname; vuname -V; um_add_service unreal && "
              "cat /unreal/etc/hostname; um_del_service trace; echo del=$?'; "
              "viewname; vuname -V; cat /unreal/etc/hostname 2>/dev/null || echo outer-has-no-unreal")
    r = outer(script, "-V", "outer", "-p", "trace,/dev/null")
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr
    assert out == f"inner\n1\n{HOSTNAME.decode()}del=1\nouter\n0\nouter-has-no-unreal\n"
    assert b"trace is a service of an outer view (view 0)" in r.stderr


def test_trace_inside_a_view_prints_a_trace(tmp_path):
    r = outer(f"{UMVIEW} --trace - -- true", "-p", "unreal")
    assert r.returncode == 0
    lines = r.stderr.decode().splitlines()
    assert re.match(r'\d+ execve\("/(usr/)?bin/true", \["true"\]', lines[0]), lines[:3]
    assert lines[-1].endswith("+++ exited with 0 +++")


def test_trace_file_is_opened_as_the_inner_umview_in_its_view(tmp_path):
    layer = tmp_path / "layer"
    layer.mkdir()
    r = outer(f"cd {tmp_path} && {UMVIEW} --trace t.log -- cat /dev/null && grep -c execve t.log",
              "-p", f"viewfs,mount={layer}:{tmp_path}:cow")
    assert (r.stdout, r.returncode) == (b"1\n", 0), r.stderr
    assert not (tmp_path / "t.log").exists()  # written in the outer view's layer
    assert b"+++ exited with 0 +++" in (layer / "t.log").read_bytes()


@pytest.mark.parametrize("opts", [["-p", "nosuch"], ["-p", "unreal,bogus=1"],
                                  ["--engine", "/nonexistent.py:X"], ["--trace-kernel"]])
def test_a_failing_request_says_what_umview_says_at_top_level(opts):
    top = run(umview_argv(*opts, "--", "true"), env=env())
    words = " ".join(shlex.quote(o) for o in opts)
    r = outer(f"{UMVIEW} {words} -- true; echo status=$?; um_ls_service -e", "-p", "unreal")
    assert top.returncode == 2 and top.stderr.startswith(b"umview: ")
    assert r.stderr == top.stderr
    out = r.stdout.decode()
    assert out.startswith("status=2\n") and "(view" not in out  # no inner view left


def test_options_of_the_monitor_are_refused_inside_a_view():
    r = outer(f"{UMVIEW} --stats -- true; echo status=$?", "-p", "unreal")
    assert r.stdout == b"status=2\n"
    assert b"--stats concerns the monitor" in r.stderr


def test_a_missing_command_is_127_as_at_top_level():
    top = run(umview_argv("--", "no-such-command-here"), env=env())
    r = outer(f"{UMVIEW} -p unreal -- no-such-command-here; echo status=$?")
    assert (top.returncode, r.stdout) == (127, b"status=127\n")
    assert r.stderr == top.stderr


def test_an_inner_mount_of_a_directory_in_an_outer_mount_shows_it(tmp_path):
    # the inner source is the outer /T's, which is /T/A for real: the outer
    # mount must not take the inner mount's paths as its own again
    t, mnt = tmp_path / "T", tmp_path / "mnt"
    (t / "A").mkdir(parents=True)
    mnt.mkdir()
    r = outer(f"mkdir {t}/x && echo hi > {t}/x/f && "
              f"{UMVIEW} -p viewfs,mount={t}/x:{mnt} -- sh -c 'cat {mnt}/f; echo new > {mnt}/g'",
              "-p", f"viewfs,mount={t}/A:{t}")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"hi\n"
    assert (t / "A" / "x" / "g").read_text() == "new\n"
