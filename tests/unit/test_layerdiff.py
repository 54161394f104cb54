"""umview.modules.viewfs.layerdiff: what a cow layer changed, read against its lower tree.
Layers are made with the cow engine's own file-system side (Layers: copy-up,
whiteouts, opaque directories), no tracee involved."""
import json
import os

import pytest

from umview.modules.viewfs import layerdiff, layerfmt
from umview.modules.viewfs.layers import Layers


@pytest.fixture
def tree(tmp_path):
    lower = tmp_path / "lower"
    (lower / "etc" / "app").mkdir(parents=True)
    (lower / "etc" / "hosts").write_text("127.0.0.1 localhost\n")
    (lower / "etc" / "same").write_text("abcd\n")
    (lower / "etc" / "app" / "a.conf").write_text("a\n")
    (lower / "etc" / "app" / "sub").mkdir()
    (lower / "etc" / "app" / "sub" / "b").write_text("b\n")
    (lower / "etc" / "link").symlink_to("hosts")
    (lower / "srv").mkdir()
    (lower / "srv" / "old").write_text("data\n")
    upper = tmp_path / "upper"
    upper.mkdir()
    return Layers(os.fsencode(upper), os.fsencode(lower), "cow"), str(upper), str(lower)


def by_path(entries):
    return {e["path"]: e for e in entries}


def test_a_layer_with_no_change_reports_nothing(tree):
    layers, upper, lower = tree
    c = layerdiff.changes(upper, lower, "/")
    assert c == {"layer": upper, "target": "/", "created": [], "modified": [], "deleted": [], "renamed": []}
    assert layerdiff.summary(c).startswith("0 created, 0 modified, 0 deleted, 0 renamed")


def test_a_copy_up_left_unchanged_or_only_touched_is_no_change(tree):
    layers, upper, lower = tree
    node = layers.probe(b"etc/same")
    layers.copy_up(node)
    os.utime(os.path.join(upper, "etc/same"), (1, 1))  # touch: times alone
    assert layerdiff.changes(upper, lower)["modified"] == []


def test_modified_files_say_what_changed(tree):
    layers, upper, lower = tree
    layers.copy_up(layers.probe(b"etc/hosts"))
    with open(os.path.join(upper, "etc/hosts"), "a") as f:
        f.write("10.0.0.1 x\n")
    layers.copy_up(layers.probe(b"etc/same"))
    with open(os.path.join(upper, "etc/same"), "w") as f:
        f.write("ABCD\n")  # same size, other bytes
    os.chmod(os.path.join(upper, "etc/same"), 0o600)
    layers.copy_up(layers.probe(b"etc/link"))
    os.unlink(os.path.join(upper, "etc/link"))
    os.symlink("same", os.path.join(upper, "etc/link"))
    m = by_path(layerdiff.changes(upper, lower, "/")["modified"])
    assert m["/etc/hosts"] == {"path": "/etc/hosts", "type": "file", "content": True, "size": [20, 31]}
    assert m["/etc/same"] == {"path": "/etc/same", "type": "file", "content": True, "mode": ["0644", "0600"]}
    assert m["/etc/link"] == {"path": "/etc/link", "type": "symlink", "content": True, "target": ["hosts", "same"]}
    assert set(m) == {"/etc/hosts", "/etc/same", "/etc/link"}  # /etc, copied up on the way, is no change


def test_a_created_directory_is_one_summary_line_and_each_name_below_an_entry(tree):
    layers, upper, lower = tree
    layers.ensure_dir(b"etc")
    with open(os.path.join(upper, "etc/new"), "w") as f:
        f.write("n\n")
    os.makedirs(os.path.join(upper, "opt/tool/bin"))
    open(os.path.join(upper, "opt/tool/bin/t"), "w").close()
    c = layerdiff.changes(upper, lower, "/")
    assert c["created"] == [{"path": "/etc/new", "type": "file"},
                            {"path": "/opt", "type": "dir", "entries": 3},
                            {"path": "/opt/tool", "type": "dir", "under": "/opt"},
                            {"path": "/opt/tool/bin", "type": "dir", "under": "/opt"},
                            {"path": "/opt/tool/bin/t", "type": "file", "under": "/opt"}]
    summary = layerdiff.summary(c)
    assert "C /opt (dir, 3 entries below)" in summary and "/opt/tool" not in summary
    assert summary.startswith("2 created,")


def test_a_directory_deleted_recursively_is_one_summary_line_and_each_name_below_an_entry(tree):
    layers, upper, lower = tree
    # as rm -rf does it in a cow view: the names below first, then the directory
    for rel in (b"etc/app/sub/b", b"etc/app/sub", b"etc/app/a.conf", b"etc/app"):
        layers.remove_upper(rel)
        layers.whiteout(rel)
    layers.whiteout(b"srv/old")
    c = layerdiff.changes(upper, lower, "/")
    assert c["deleted"] == [{"path": "/etc/app", "type": "dir", "entries": 3},
                            {"path": "/etc/app/a.conf", "type": "file", "under": "/etc/app"},
                            {"path": "/etc/app/sub", "type": "dir", "under": "/etc/app"},
                            {"path": "/etc/app/sub/b", "type": "file", "under": "/etc/app"},
                            {"path": "/srv/old", "type": "file"}]
    assert "D /etc/app (dir, 3 entries below)" in layerdiff.summary(c)


def test_an_opaque_directory_deletes_what_it_hid_and_its_names_compare_with_the_lower_ones(tree):
    layers, upper, lower = tree
    layers.whiteout(b"etc/app")
    layers.unwhiteout(b"etc/app")
    os.mkdir(os.path.join(upper, "etc/app"))
    layers.make_opaque(b"etc/app")
    with open(os.path.join(upper, "etc/app/a.conf"), "w") as f:
        f.write("a\n")  # the same bytes again
    c = layerdiff.changes(upper, lower, "/")
    assert c["deleted"] == [{"path": "/etc/app/sub", "type": "dir", "entries": 1},
                            {"path": "/etc/app/sub/b", "type": "file", "under": "/etc/app/sub"}]
    assert c["created"] == [] and c["modified"] == []


def test_a_name_whose_type_changed_is_deleted_and_created(tree):
    layers, upper, lower = tree
    layers.ensure_dir(b"srv")
    os.mkdir(os.path.join(upper, "srv/old"))
    c = layerdiff.changes(upper, lower, "/")
    assert c["deleted"] == [{"path": "/srv/old", "type": "file"}]
    assert c["created"] == [{"path": "/srv/old", "type": "dir", "entries": 0}]


def _rename(layers, upper, old, new, mark=True):
    """A rename of a lower file as the cow engine makes it."""
    layers.copy_up(layers.probe(old))
    if mark:
        layers.mark_origin(old)
    layers.ensure_dir(os.path.dirname(new))
    os.rename(layers.up(old), layers.up(new))
    layers.whiteout(old)


def test_a_renamed_lower_file_is_reported_as_a_rename_with_what_else_changed(tree):
    layers, upper, lower = tree
    _rename(layers, upper, b"etc/hosts", b"srv/hosts")
    with open(os.path.join(upper, "srv/hosts"), "a") as f:
        f.write("more\n")
    c = layerdiff.changes(upper, lower, "/")
    assert c["renamed"] == [{"path": "/srv/hosts", "type": "file", "from": "/etc/hosts", "to": "/srv/hosts",
                             "content": True, "size": [20, 25]}]
    assert c["deleted"] == [] and c["created"] == []
    assert "R /etc/hosts -> /srv/hosts (size 20 -> 25)" in layerdiff.summary(c)


def test_a_file_renamed_twice_keeps_its_first_origin(tree):
    layers, upper, lower = tree
    _rename(layers, upper, b"srv/old", b"srv/mid")
    os.rename(os.path.join(upper, "srv/mid"), os.path.join(upper, "srv/last"))  # an upper file: no copy-up
    c = layerdiff.changes(upper, lower, "/")
    assert [(e["from"], e["to"]) for e in c["renamed"]] == [("/srv/old", "/srv/last")]


def test_a_rename_whose_old_name_shows_again_is_a_creation(tree):
    layers, upper, lower = tree
    _rename(layers, upper, b"srv/old", b"srv/copy")
    layers.unwhiteout(b"srv/old")  # the name made again (here: the lower file shows)
    c = layerdiff.changes(upper, lower, "/")
    assert c["renamed"] == [] and c["created"] == [{"path": "/srv/copy", "type": "file"}]


def test_without_a_recorded_origin_a_rename_is_a_deletion_and_a_creation(tree):
    layers, upper, lower = tree
    _rename(layers, upper, b"srv/old", b"srv/new", mark=False)
    c = layerdiff.changes(upper, lower, "/")
    assert c["renamed"] == []
    assert c["deleted"] == [{"path": "/srv/old", "type": "file"}]
    assert c["created"] == [{"path": "/srv/new", "type": "file"}]


def test_paths_are_reported_under_the_target_and_the_report_is_json(tree):
    layers, upper, lower = tree
    layers.whiteout(b"srv/old")
    c = layerdiff.changes(upper, lower, "/mnt/x")
    assert c["deleted"] == [{"path": "/mnt/x/srv/old", "type": "file"}]
    assert json.loads(json.dumps(c)) == c


def _first_format_layer(upper):
    """What umview's first format (aufs's .wh. files) kept for: /etc/hosts
    removed, /etc/app removed and made again (opaque), a copy-up of
    /srv/old in progress, fakeroot's records."""
    os.makedirs(os.path.join(upper, "etc", "app"))
    open(os.path.join(upper, "etc", ".wh.hosts"), "w").close()
    open(os.path.join(upper, "etc", "app", ".wh..wh..opq"), "w").close()
    open(os.path.join(upper, "etc", "app", "new"), "w").close()
    os.makedirs(os.path.join(upper, "srv"))
    open(os.path.join(upper, "srv", ".wh..cp.old"), "w").close()
    open(os.path.join(upper, ".wh..wh.umview-fakeroot.json"), "w").close()


def _first_format_changes(c):
    assert by_path(c["deleted"]) == {"/etc/hosts": {"path": "/etc/hosts", "type": "file"},
                                     "/etc/app/a.conf": {"path": "/etc/app/a.conf", "type": "file"},
                                     "/etc/app/sub": {"path": "/etc/app/sub", "type": "dir", "entries": 1},
                                     "/etc/app/sub/b": {"path": "/etc/app/sub/b", "type": "file",
                                                        "under": "/etc/app/sub"}}
    assert c["created"] == [{"path": "/etc/app/new", "type": "file"}]


def test_a_layer_of_the_first_format_is_read_as_it_is(tree):
    layers, upper, lower = tree
    _first_format_layer(upper)
    assert layerfmt.legacy(upper)
    _first_format_changes(layerdiff.changes(upper, lower))
    assert layerfmt.legacy(upper)  # reading changed nothing


def test_a_view_upgrades_a_layer_of_the_first_format_to_the_same_changes(tree):
    layers, upper, lower = tree
    _first_format_layer(upper)
    layerfmt.upgrade(upper, lower)
    assert not layerfmt.legacy(upper)
    assert sorted(os.listdir(os.path.join(upper, "etc"))) == ["app", "hosts"]
    assert layerfmt.is_whiteout(os.lstat(os.path.join(upper, "etc", "hosts")))
    assert layerfmt.is_opaque(os.path.join(upper, "etc", "app"))
    assert os.listdir(os.path.join(upper, "srv")) == []  # the copy-up in progress is gone
    assert os.path.exists(os.path.join(upper, ".wh..wh.umview-fakeroot.json"))  # the layer's own stays
    _first_format_changes(layerdiff.changes(upper, lower))
    assert not layers.probe(b"etc/hosts").exists and not layers.probe(b"etc/app/a.conf").exists
    assert layers.probe(b"etc/app/new").exists and not layers.probe(b".wh..wh.umview-fakeroot.json").exists


def test_names_of_255_bytes_are_removed_copied_and_made_opaque_in_the_layer(tree):
    layers, upper, lower = tree
    long = b"n" * 255
    with open(os.path.join(lower, "srv").encode() + b"/" + long, "w") as f:
        f.write("lower\n")
    os.makedirs(os.path.join(lower, "srv").encode() + b"/d" + long[1:] + b"/in")
    layers.copy_up(layers.probe(b"srv/" + long))
    assert open(os.path.join(upper, "srv").encode() + b"/" + long).read() == "lower\n"
    layers.remove_upper(b"srv/" + long)
    layers.whiteout(b"srv/" + long)
    assert not layers.probe(b"srv/" + long).exists
    d = b"srv/d" + long[1:]
    layers.whiteout(d + b"/in")
    layers.remove_upper(d)
    layers.whiteout(d)
    layers.unwhiteout(d)
    os.mkdir(layers.up(d))
    layers.make_opaque(d)
    assert layers.probe(d).exists and not layers.probe(d + b"/in").exists
    c = layerdiff.changes(upper, lower)
    assert {e["path"] for e in c["deleted"]} == {"/srv/" + "n" * 255, "/srv/d" + "n" * 254 + "/in"}
    assert os.listdir(os.path.join(upper, "srv").encode()) and all(len(n) <= 255 for n in os.listdir(upper + "/srv"))


def test_where_the_layer_keeps_no_xattrs_an_opaque_directory_hides_each_lower_name(tree, monkeypatch):
    layers, upper, lower = tree
    monkeypatch.setattr(layerfmt, "set_opaque", lambda path: False)
    layers.ensure_dir(b"etc")
    layers.whiteout(b"etc/app")
    layers.remove_upper(b"etc/app")
    os.mkdir(layers.up(b"etc/app"))
    layers.make_opaque(b"etc/app")
    assert sorted(os.listdir(layers.up(b"etc/app"))) == [b"a.conf", b"sub"]  # whiteouts of both
    assert layers.listing(b"etc/app") == {}
    assert not layers.probe(b"etc/app/sub/b").exists


def test_the_summary_is_short(tree):
    layers, upper, lower = tree
    for i in range(60):
        open(os.path.join(upper, f"f{i}"), "w").close()
    text = layerdiff.summary(layerdiff.changes(upper, lower))
    assert text.splitlines()[0].startswith("60 created")
    assert text.splitlines()[-1] == "... and 10 more (see the JSON report)"


def test_a_layer_a_view_holds_cannot_be_locked_for_apply(tmp_path):
    held = layerdiff.hold(str(tmp_path))
    assert held is not None
    with pytest.raises(BlockingIOError):
        layerdiff.lock_for_apply(str(tmp_path))
    os.close(held)
    lock = layerdiff.lock_for_apply(str(tmp_path))
    assert layerdiff.hold(str(tmp_path)) is None  # being applied: a view does not get it
    os.close(lock)
    again = layerdiff.hold(str(tmp_path))
    assert again is not None
    os.close(again)
