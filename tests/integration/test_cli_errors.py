"""What a user who types something wrong reads: the cause on one line, then
where the help is, with status 2; every command answers --version."""
import os
import shutil
import sys
import tempfile

import pytest

from conftest import NOBODY, need_user, run, umview_argv, umview_for

BIN = os.path.dirname(sys.executable)
COMMANDS = ["umview", "umview-layer", "umview-image", "vumount", "vuumount", "um_add_service", "um_del_service", "um_ls_service",
            "um_fsalias", "um_attach", "viewname", "vuname"]


def _tool(name):
    path = os.path.join(BIN, name)
    if not os.access(path, os.X_OK):
        pytest.skip(f"{name} is not installed beside python")
    return path


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_answers_version(name):
    r = run([_tool(name), "--version"])
    assert r.returncode == 0, r.stderr
    words = r.stdout.decode().split()
    assert words[0] == name and len(words) == 2 and words[1][0].isdigit(), words


@pytest.mark.parametrize("argv, cause", [
    (["umview", "--bogus"], "umview: unrecognized arguments: --bogus"),
    (["umview", "--keep-layer", "L", "true"], "umview: --keep-layer goes with --sandbox"),
    (["umview-layer"], "umview-layer: the following arguments are required: ACTION"),
    (["umview-layer", "diff"], "umview-layer diff: the following arguments are required: LAYER"),
    (["vumount", "x"], "vumount: the following arguments are required: target"),
])
def test_a_usage_error_is_its_cause_then_where_the_help_is(argv, cause):
    # no usage block before the line that matters
    prog = argv[0] + (" diff" if argv[1:2] == ["diff"] else "")
    r = run([_tool(argv[0]), *argv[1:]])
    assert r.returncode == 2
    assert r.stderr.decode() == f"{cause}\ntry '{prog} --help'\n"


@pytest.mark.parametrize("spec", ["viewfs,mount=/etc:", "viewfs,mount=", "fs,mount=", "viewfs,mount=:/x",
                                  "viewfs,mount=/a:/b:", "fs,mount=a:b:c:d", "viewfs,mount=;"])
def test_an_empty_or_malformed_mount_spec_is_an_error(spec, tmp_path):
    # mount=/etc: mounted /etc over the current directory, mount= did nothing
    r = run(umview_argv("-p", spec, "--", "touch", "made"), cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert err.startswith(f"umview: module {spec.split(',')[0]}: mount=") and err.endswith("try 'umview --help'\n")
    assert len(err.splitlines()) == 2
    assert os.listdir(tmp_path) == []


def test_keep_layer_says_what_is_wrong_with_the_directory(tmp_path):
    need_user("root")
    (tmp_path / "file").write_text("x")
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "passwd").write_text("x")
    for where, cause in (("file", "not a directory"), ("tree", "not a layer")):
        r = run(umview_for("root", "--sandbox", "--keep-layer", str(tmp_path / where), "--", "true"))
        assert r.returncode == 2
        assert r.stderr.decode().startswith(f"umview: --keep-layer {tmp_path / where}: {cause}"), r.stderr
    assert os.listdir(tmp_path / "tree") == ["passwd"]
    # a new directory, then the same one kept: a layer
    for _ in range(2):
        r = run(umview_for("root", "--sandbox", "--keep-layer", str(tmp_path / "kept"), "--", "sh", "-c",
                           "echo x > /etc/umview-cli-errors-probe"))
        assert r.returncode == 0, r.stderr
    assert not os.path.exists("/etc/umview-cli-errors-probe")


def test_umview_layer_refuses_what_is_not_a_layer(tmp_path):
    need_user("root")
    tool = _tool("umview-layer")
    (tmp_path / "tree" / "etc").mkdir(parents=True)
    (tmp_path / "tree" / "etc" / "passwd").write_text("x")
    for action in (["diff"], ["apply", "--yes"]):
        r = run([tool, *action, str(tmp_path / "tree"), "--target", str(tmp_path / "target")])
        assert r.returncode == 2
        assert r.stderr.decode().startswith(f"umview-layer: {tmp_path / 'tree'} is not a layer: ")
    assert not os.path.exists(tmp_path / "target")
    # an empty directory changes nothing; a layer a view kept is one
    (tmp_path / "empty").mkdir()
    r = run([tool, "diff", str(tmp_path / "empty")])
    assert r.returncode == 0 and r.stdout.startswith(b"0 created"), r.stderr
    (tmp_path / "target").mkdir()
    r = run(umview_for("root", "-p", f"viewfs,mount={tmp_path / 'layer'}:{tmp_path / 'target'}:cow", "--",
                       "touch", str(tmp_path / "target" / "new")))
    assert r.returncode == 0, r.stderr
    r = run([tool, "diff", str(tmp_path / "layer"), "--target", str(tmp_path / "target")])
    assert r.returncode == 0 and b"C " in r.stdout, (r.stdout, r.stderr)


def test_an_unreadable_image_says_so():
    # the type of an image the user cannot read cannot be told: the cause is
    # the permission, not the content
    need_user("nobody")
    d = tempfile.mkdtemp(prefix="umview-cli-")  # pytest's tmp_path is root's alone
    try:
        os.chmod(d, 0o755)
        img, mnt = os.path.join(d, "disk.img"), os.path.join(d, "mnt")
        with open(img, "wb") as f:
            f.write(b"\0" * 65536)
        os.chmod(img, 0o600)
        os.mkdir(mnt)
        os.chown(mnt, NOBODY, NOBODY)
        r = run(umview_for("nobody", "-p", f"fs,mount={img}:{mnt}", "--", "true"))
        assert r.returncode == 2
        assert f"cannot read {img}: Permission denied" in r.stderr.decode(), r.stderr
    finally:
        shutil.rmtree(d)
