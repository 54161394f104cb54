"""The control channel and its commands (docs/services.md): services added,
used, listed and deleted from inside a view; each command outside a view."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import run, umview_argv

BIN = os.path.dirname(sys.executable)
COMMANDS = ["um_add_service", "um_del_service", "um_ls_service", "um_fsalias", "viewname", "vuname"]


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


def test_add_refused_when_filter_does_not_trap():
    out, err, rc = in_view("um_add_service unreal; echo rc=$?")
    assert "rc=1" in out
    assert "does not trap" in err and "--services" in err and "(EINVAL)" in err


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
    args = {"um_add_service": ["unreal"], "um_del_service": ["unreal"], "um_fsalias": ["a", "viewfs"]}
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
    assert sorted(os.listdir(t / "layer")) == [".wh.f", "n"]


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
