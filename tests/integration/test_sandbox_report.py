"""What a sandbox changed: umview --sandbox --report, umview-layer diff and
apply, and --sandbox=ro. Each command is first shown to change the real
files natively (so a test cannot pass vacuously); in the sandbox the real
trees stay byte-identical (checksums before and after) and the report lists
what changed. As root and as nobody where it makes sense."""
import hashlib
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import NOBODY, as_user, entry_for, need_user, umview_for

USERS = ["root", "nobody"]
PY = "/usr/bin/python3"  # nobody may not reach the test's own python


def checksum(top):
    """Everything a tree holds (names, types, modes, owners, bytes, symlink
    targets), as one digest; times left out."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for n in [""] + sorted(dirnames + filenames):
            p = os.path.join(dirpath, n) if n else dirpath
            st = os.lstat(p)
            h.update(f"{os.path.relpath(p, top)} {st.st_mode:o} {st.st_uid}:{st.st_gid}\n".encode())
            if os.path.islink(p):
                h.update(os.readlink(p).encode())
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()


def make_tree(top, owner=None):
    """A victim tree: a file to change, one to rename, a directory tree to
    delete."""
    os.makedirs(os.path.join(top, "doomed", "sub"))
    for rel, data in (("config", "orig\n"), ("move-me", "moving\n"), ("doomed/a", "a\n"),
                      ("doomed/sub/b", "b\n")):
        with open(os.path.join(top, rel), "w") as f:
            f.write(data)
    os.chmod(top, 0o755)
    if owner is not None:
        for dirpath, dirnames, filenames in os.walk(top):
            for n in [dirpath] + [os.path.join(dirpath, x) for x in dirnames + filenames]:
                os.lchown(n, owner, owner)


@pytest.fixture
def victim():
    d = tempfile.mkdtemp(prefix="umview-report-test-", dir="/var/tmp")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


CHANGE = ("cd {t} && echo changed >> config && chmod 600 config && mv move-me moved && rm -rf doomed"
          " && mkdir -p new/deep && echo n > new/deep/file && ln -s config link")


def native_changes(victim, owner):
    """The script natively, on a copy of the tree: it does change it."""
    t = os.path.join(victim, "native")
    make_tree(t, owner)
    before = checksum(t)
    r = subprocess.run(as_user("nobody" if owner else "root", ["sh", "-c", CHANGE.format(t=t)]),
                       capture_output=True)
    assert r.returncode == 0, r.stderr
    assert checksum(t) != before and not os.path.exists(os.path.join(t, "doomed"))


def by_path(entries):
    return {e["path"]: e for e in entries}


@pytest.mark.parametrize("user", USERS)
def test_the_report_lists_what_the_sandbox_created_modified_deleted_and_renamed(victim, user):
    need_user(user)
    owner = NOBODY if user == "nobody" else None
    native_changes(victim, owner)
    os.chmod(victim, 0o777)  # the report is written as the user
    t = os.path.join(victim, "tree")
    make_tree(t, owner)
    before = checksum(t)
    report = os.path.join(victim, "report.json")
    r = subprocess.run(umview_for(user, "--sandbox", "--report", report, "--", "sh", "-c",
                                  CHANGE.format(t=t) + " && exit 3"), capture_output=True, timeout=120)
    assert r.returncode == 3, r.stderr  # the command's exit status
    assert checksum(t) == before
    with open(report) as f:
        c = json.load(f)
    assert set(c) == {"layer", "target", "created", "modified", "deleted", "renamed"}
    assert by_path(c["modified"]) == {f"{t}/config": {"path": f"{t}/config", "type": "file", "content": True,
                                                     "size": [5, 13], "mode": ["0644", "0600"]}}
    # every name, those below a created or deleted directory "under" it
    doomed = f"{t}/doomed"
    assert c["deleted"] == [{"path": doomed, "type": "dir", "entries": 3},
                            {"path": f"{doomed}/a", "type": "file", "under": doomed},
                            {"path": f"{doomed}/sub", "type": "dir", "under": doomed},
                            {"path": f"{doomed}/sub/b", "type": "file", "under": doomed}]
    assert c["renamed"] == [{"path": f"{t}/moved", "type": "file", "from": f"{t}/move-me", "to": f"{t}/moved"}]
    assert c["created"] == [{"path": f"{t}/link", "type": "symlink"},
                            {"path": f"{t}/new", "type": "dir", "entries": 2},
                            {"path": f"{t}/new/deep", "type": "dir", "under": f"{t}/new"},
                            {"path": f"{t}/new/deep/file", "type": "file", "under": f"{t}/new"}]
    err = r.stderr.decode()
    assert "2 created, 1 modified, 1 deleted, 1 renamed" in err
    assert f"M {t}/config (size 5 -> 13, mode 0644 -> 0600)" in err
    assert f"D {t}/doomed (dir, 3 entries below)" in err


@pytest.mark.parametrize("user", USERS)
def test_a_file_only_opened_for_writing_or_touched_is_no_change_but_an_owner_is(victim, user):
    need_user(user)
    owner = NOBODY if user == "nobody" else None
    os.chmod(victim, 0o777)
    t = os.path.join(victim, "tree")
    make_tree(t, owner)
    script = (f"touch -d 2001-01-01 {t}/config && {PY} -c \"open('{t}/move-me', 'r+')\""
              + (f" && chown {NOBODY} {t}/doomed/a" if user == "root" else ""))
    native = os.path.join(victim, "native")
    make_tree(native, owner)
    mtime = os.stat(os.path.join(native, "config")).st_mtime
    r = subprocess.run(as_user(user, ["sh", "-c", script.replace(t, native)]), capture_output=True)
    assert r.returncode == 0 and os.stat(os.path.join(native, "config")).st_mtime != mtime, r.stderr
    report = os.path.join(victim, "report.json")
    r = subprocess.run(umview_for(user, "--sandbox", "--report", report, "--", "sh", "-c", script),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    c = json.load(open(report))
    # (copied into the layer all the same: the report tells what differs)
    expected = [{"path": f"{t}/doomed/a", "type": "file", "content": False, "owner": ["0:0", f"{NOBODY}:0"]}]
    assert c["modified"] == (expected if user == "root" else [])
    assert c["created"] == [] and c["deleted"] == [] and c["renamed"] == []


def test_report_to_stdout_and_the_private_tmp_is_not_in_the_layer(victim):
    need_user("root")
    layer = os.path.join(victim, "layer")
    r = subprocess.run(umview_for("root", "--sandbox", "--keep-layer", layer, "--report", "-", "--",
                                  "sh", "-c", "echo x > /tmp/umview-report-scratch && cat /tmp/umview-report-scratch"),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out, _, rest = r.stdout.partition(b"\n")
    assert out == b"x"
    c = json.loads(rest)
    assert c["layer"] == layer and c["created"] == [] and c["modified"] == []
    assert not os.path.exists(os.path.join(layer, "tmp")), "the private /tmp's files landed in the layer"


def test_report_options_say_what_they_go_with():
    need_user("root")
    for opts, msg in ((["--report", "r.json"], b"--report goes with --sandbox"),
                      (["--sandbox=ro", "--report", "r.json"], b"--sandbox=ro has no layer"),
                      (["--sandbox", "--report", "/nonexistent/dir/r.json"], b"--report /nonexistent/dir/r.json")):
        r = subprocess.run(umview_for("root", *opts, "true"), capture_output=True, timeout=60)
        assert r.returncode == 2 and msg in r.stderr, r.stderr


# --- the "Done when" cases ---

MAKEFILE = """\
PREFIX ?= /usr/local
install:
\tmkdir -p $(PREFIX)/bin $(PREFIX)/share/{name}
\tprintf '#!/bin/sh\\necho hello\\n' > $(PREFIX)/bin/{name}
\tchmod 755 $(PREFIX)/bin/{name}
\techo data > $(PREFIX)/share/{name}/data
"""


def test_make_install_in_a_sandbox_leaves_the_real_tree_and_reports_it(victim):
    need_user("root")
    name = f"umview-report-test-{os.getpid()}"
    src = os.path.join(victim, "src")
    os.mkdir(src)
    with open(os.path.join(src, "Makefile"), "w") as f:
        f.write(MAKEFILE.format(name=name))
    # natively make install installs (into a scratch prefix)
    prefix = os.path.join(victim, "prefix")
    r = subprocess.run(["make", "-s", "-C", src, "install", f"PREFIX={prefix}"], capture_output=True)
    assert r.returncode == 0 and os.path.isfile(os.path.join(prefix, "bin", name)), r.stderr
    before = checksum("/usr/local")
    report = os.path.join(victim, "report.json")
    r = subprocess.run(umview_for("root", "--sandbox", "--report", report, "--", "sh", "-c",
                                  f"make -s -C {src} install && {name}"), capture_output=True, timeout=120)
    assert r.returncode == 0 and r.stdout == b"hello\n", r.stderr
    assert checksum("/usr/local") == before
    c = json.load(open(report))
    created = by_path(c["created"])
    assert created[f"/usr/local/bin/{name}"] == {"path": f"/usr/local/bin/{name}", "type": "file"}
    assert created[f"/usr/local/share/{name}"] == {"path": f"/usr/local/share/{name}", "type": "dir", "entries": 1}
    assert created[f"/usr/local/share/{name}/data"] == {"path": f"/usr/local/share/{name}/data", "type": "file",
                                                         "under": f"/usr/local/share/{name}"}
    assert c["deleted"] == [] and c["renamed"] == []


def test_pip_install_in_a_sandbox_leaves_the_real_tree_and_reports_it(victim):
    need_user("root")
    if not os.path.exists(PY) or any(subprocess.run([PY, "-c", f"import {m}"], capture_output=True).returncode
                                     for m in ("pip", "setuptools, wheel")):
        pytest.skip(f"needs {PY} with pip, setuptools and wheel (the package is built offline)")
    pkg = os.path.join(victim, "pkg")
    mod = f"umview_report_test_{os.getpid()}"
    os.makedirs(os.path.join(pkg, mod))
    with open(os.path.join(pkg, "setup.py"), "w") as f:
        f.write(f"from setuptools import setup\nsetup(name='{mod}', version='1.0', packages=['{mod}'])\n")
    with open(os.path.join(pkg, mod, "__init__.py"), "w") as f:
        f.write("HELLO = 'installed'\n")
    pip = [PY, "-m", "pip", "install", "-q", "--break-system-packages", "--no-index", "--no-build-isolation",
           "--no-cache-dir", "./pkg"]
    # natively pip installs (under a scratch --root)
    root = os.path.join(victim, "root")
    r = subprocess.run(pip + ["--root", root], capture_output=True, cwd=victim, timeout=300)
    assert r.returncode == 0, r.stderr
    assert any(mod in dirnames for _, dirnames, _ in os.walk(root))
    site = "/usr/local/lib"
    before = checksum(site)
    report = os.path.join(victim, "report.json")
    r = subprocess.run(umview_for("root", "--sandbox", "--report", report, "--", "sh", "-c",
                                  " ".join(pip) + f" && cd / && {PY} -c 'import {mod}; print({mod}.HELLO)'"),
                       capture_output=True, cwd=victim, timeout=300)
    assert r.returncode == 0 and r.stdout == b"installed\n", r.stderr
    assert checksum(site) == before
    c = json.load(open(report))
    paths = [e["path"] for e in c["created"]]
    assert any(p.endswith(f"/dist-packages/{mod}") for p in paths), paths
    assert any(f"/dist-packages/{mod}-1.0" in p for p in paths), paths


def test_dpkg_i_of_a_local_package_in_a_sandbox_leaves_the_real_tree_and_reports_it(victim):
    need_user("root")
    if shutil.which("dpkg") is None or shutil.which("dpkg-deb") is None:
        pytest.skip("needs dpkg and dpkg-deb")
    name = f"umview-report-test-{os.getpid()}"
    build = os.path.join(victim, "build")
    os.makedirs(os.path.join(build, "DEBIAN"))
    os.makedirs(os.path.join(build, "usr", "share", name))
    with open(os.path.join(build, "usr", "share", name, "file"), "w") as f:
        f.write("hello\n")
    with open(os.path.join(build, "DEBIAN", "control"), "w") as f:
        f.write(f"Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.org>\n"
                "Description: umview test package\n")
    deb = os.path.join(victim, "t.deb")
    subprocess.run(["dpkg-deb", "--build", build, deb], check=True, capture_output=True)
    # natively dpkg -i installs (into a scratch --root with a database of its own)
    root = os.path.join(victim, "root")
    for d in ("info", "updates", "triggers"):
        os.makedirs(os.path.join(root, "var/lib/dpkg", d))
    open(os.path.join(root, "var/lib/dpkg/status"), "w").close()
    r = subprocess.run(["dpkg", f"--root={root}", "--force-script-chrootless", "-i", deb], capture_output=True)
    assert r.returncode == 0 and os.path.isfile(os.path.join(root, "usr/share", name, "file")), r.stderr
    before = {d: checksum(d) for d in ("/var/lib/dpkg",)}
    assert not os.path.exists(f"/usr/share/{name}")
    report = os.path.join(victim, "report.json")
    r = subprocess.run(umview_for("root", "--sandbox", "--report", report, "--", "sh", "-c",
                                  f"dpkg -i {deb} >/dev/null && dpkg-query -W -f '${{Status}}\\n' {name} "
                                  f"&& cat /usr/share/{name}/file"), capture_output=True, timeout=300)
    assert r.returncode == 0 and r.stdout == b"install ok installed\nhello\n", r.stderr
    assert {d: checksum(d) for d in before} == before and not os.path.exists(f"/usr/share/{name}")
    c = json.load(open(report))
    assert f"/usr/share/{name}" in by_path(c["created"])
    assert "/var/lib/dpkg/status" in by_path(c["modified"])
    assert f"/var/lib/dpkg/info/{name}.list" in by_path(c["created"])


@pytest.fixture
def system_victims():
    """Directory trees under /etc and /srv (made for the test, removed after),
    the user nobody's, so nobody may delete them natively too."""
    name = f"umview-report-test-{os.getpid()}"
    dirs = [os.path.join("/etc", name), os.path.join("/srv", name)]
    for d in dirs:
        make_tree(d, NOBODY)
    yield dirs
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("user", USERS)
def test_deleting_whole_directories_under_etc_and_srv_in_a_sandbox(victim, system_victims, user):
    need_user(user)
    native_changes(victim, NOBODY)  # (the tree's own script: rm -rf of a directory works natively)
    os.chmod(victim, 0o777)
    before = {d: checksum(d) for d in system_victims}
    report = os.path.join(victim, "report.json")
    r = subprocess.run(umview_for(user, "--sandbox", "--report", report, "--", "sh", "-c",
                                  "rm -rf " + " ".join(system_victims) + " && ls " + " ".join(system_victims)),
                       capture_output=True, timeout=120)
    assert r.returncode != 0 and b"No such file" in r.stderr, r.stderr  # gone in the sandbox
    assert {d: checksum(d) for d in system_victims} == before
    c = json.load(open(report))
    assert [e for e in c["deleted"] if "under" not in e] == [{"path": d, "type": "dir", "entries": 6}
                                                              for d in sorted(system_victims)]
    assert len(c["deleted"]) == 7 * len(system_victims)  # and each name below them
    assert c["created"] == [] and c["modified"] == [] and c["renamed"] == []


# --- umview-layer diff and apply ---

def layer_cmd(user, *args, **kw):
    return subprocess.run(as_user(user, entry_for(user, "umview.modules.viewfs.layercmd:main", *args)), capture_output=True,
                          timeout=120, **kw)


LISTING = "cd {t} && find . | sort && for f in $(find . -type f | sort); do echo $f; cat $f; done && ls -l config"


@pytest.mark.parametrize("user", USERS)
def test_diff_then_apply_makes_the_real_tree_what_the_sandbox_saw(victim, user):
    need_user(user)
    owner = NOBODY if user == "nobody" else None
    os.chmod(victim, 0o777)
    native_changes(victim, owner)
    t = os.path.join(victim, "tree")
    make_tree(t, owner)
    layer = os.path.join(victim, "layer")
    r = subprocess.run(umview_for(user, "--sandbox", "--keep-layer", layer, "--", "sh", "-c", CHANGE.format(t=t)),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    seen = subprocess.run(umview_for(user, "--sandbox", "--keep-layer", layer, "--", "sh", "-c",
                                     LISTING.format(t=t)), capture_output=True, timeout=120)
    assert seen.returncode == 0, seen.stderr
    before = checksum(t)
    d = layer_cmd(user, "diff", layer)
    assert d.returncode == 0 and b"2 created, 1 modified, 1 deleted, 1 renamed" in d.stdout, d.stderr
    j = layer_cmd(user, "diff", "--json", layer)
    assert json.loads(j.stdout)["renamed"][0]["from"] == f"{t}/move-me"
    dry = layer_cmd(user, "apply", "--dry-run", layer)
    assert dry.returncode == 0 and b"dry run: nothing changed" in dry.stdout, dry.stderr
    assert checksum(t) == before
    # the layer is still usable by a later view after diff
    again = subprocess.run(umview_for(user, "--sandbox", "--keep-layer", layer, "--", "sh", "-c",
                                      LISTING.format(t=t)), capture_output=True, timeout=120)
    assert again.stdout == seen.stdout
    # no terminal and no --yes: apply asks for --yes
    no = layer_cmd(user, "apply", layer, stdin=subprocess.DEVNULL)
    assert no.returncode == 2 and b"give --yes" in no.stderr and checksum(t) == before
    done = layer_cmd(user, "apply", "--yes", "--clear", layer)
    assert done.returncode == 0, done.stderr
    assert b"5 of 5 changes applied" in done.stdout and b"emptied" in done.stdout
    real = subprocess.run(as_user(user, ["sh", "-c", LISTING.format(t=t)]), capture_output=True)
    assert real.stdout == seen.stdout
    assert os.listdir(layer) == []


def test_apply_refuses_inside_a_view_and_a_layer_a_view_uses(victim):
    need_user("root")
    layer = os.path.join(victim, "layer")
    t = os.path.join(victim, "tree")
    make_tree(t)
    r = subprocess.run(umview_for("root", "--sandbox", "--keep-layer", layer, "--", "sh", "-c",
                                  f"rm {t}/config"), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    inside = subprocess.run(umview_for("root", "--", *entry_for("root", "umview.modules.viewfs.layercmd:main", "apply", "--yes",
                                                               layer)), capture_output=True, timeout=120)
    assert inside.returncode == 2 and b"run apply outside umview" in inside.stderr, inside.stderr
    assert os.path.exists(f"{t}/config")
    # a view over the layer, until its stdin closes
    proc = subprocess.Popen(umview_for("root", "--sandbox", "--keep-layer", layer, "--", "sh", "-c",
                                       "echo ready; read x"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        busy = layer_cmd("root", "apply", "--yes", layer)
        assert busy.returncode == 2 and b"in use by a running view" in busy.stderr, busy.stderr
        assert os.path.exists(f"{t}/config")
    finally:
        proc.stdin.close()
        if proc.wait(timeout=60) != 0:
            proc.kill()
    done = layer_cmd("root", "apply", "--yes", layer)
    assert done.returncode == 0 and not os.path.exists(f"{t}/config"), done.stderr


# --- --sandbox=ro ---

@pytest.mark.parametrize("user", USERS)
def test_a_read_only_sandbox_refuses_writes_with_erofs_but_tmp_stays_writable(victim, user):
    need_user(user)
    owner = NOBODY if user == "nobody" else None
    t = os.path.join(victim, "tree")
    make_tree(t, owner)
    script = (f"echo x >> {t}/config; rm {t}/move-me; mkdir {t}/new; chmod 600 {t}/config; mv {t}/config {t}/c2; "
              "echo tmp > /tmp/umview-ro-test && cat /tmp/umview-ro-test && cat " + t + "/config")
    native = os.path.join(victim, "native")
    make_tree(native, owner)
    ref = subprocess.run(as_user(user, ["sh", "-c", script.replace(t, native)]), capture_output=True)
    assert not os.path.exists(os.path.join(native, "move-me")) and os.path.exists(os.path.join(native, "c2")), \
        ref.stderr
    os.unlink("/tmp/umview-ro-test")
    before = checksum(t)
    r = subprocess.run(umview_for(user, "--sandbox=ro", "--", "sh", "-c", script), capture_output=True, timeout=120)
    assert r.returncode == 0 and r.stdout == b"tmp\norig\n", r.stderr
    assert r.stderr.count(b"Read-only file system") == 5, r.stderr
    assert checksum(t) == before and not os.path.exists("/tmp/umview-ro-test")
    net = subprocess.run(umview_for(user, "--sandbox=ro", "--", "python3", "-c", "import socket; socket.socket()"),
                         capture_output=True, timeout=120)
    assert b"Address family not supported" in net.stderr


@pytest.mark.parametrize("user", USERS)
def test_a_read_only_sandbox_lets_make_test_build_in_its_directory(victim, user):
    # the README's `--sandbox=ro -- make test`: the project's own directory
    # was read-only too, so the build could not write its objects; it is now
    # copy-on-write (thrown away), the rest of the system stays read-only
    need_user(user)
    makefile = "test:\n\techo built > out.o\n\tcat out.o\n\techo x > ../outside || true\n"
    for where in ("native", "view"):
        d = os.path.join(victim, where, "project")
        os.makedirs(d)
        with open(os.path.join(d, "Makefile"), "w") as f:
            f.write(makefile)
        if user == "nobody":
            for x in (os.path.dirname(d), d):
                os.chown(x, NOBODY, NOBODY)
        argv = ["make", "-s", "test"]
        if where == "view":
            argv = umview_for(user, "--sandbox=ro", "--", *argv)
        r = subprocess.run(as_user(user, argv) if where == "native" else argv, capture_output=True, cwd=d,
                           timeout=120)
        assert r.returncode == 0 and r.stdout == b"built\n", r.stderr
        if where == "native":
            assert sorted(os.listdir(d)) == ["Makefile", "out.o"]  # natively it writes there
        else:
            assert sorted(os.listdir(d)) == ["Makefile"]
            assert b"Read-only file system" in r.stderr  # ../outside
            assert not os.path.exists(os.path.join(victim, "view", "outside"))


@pytest.mark.parametrize("preset", ["ro", "default"])
@pytest.mark.parametrize("user", USERS)
def test_sandbox_write_names_a_directory_written_for_real(victim, user, preset):
    # "real if the user says so": the build's results land in out/, for
    # real; the project's directory stays copy-on-write (ro) or as the rest
    need_user(user)
    proj, out = os.path.join(victim, "proj"), os.path.join(victim, "out")
    for d in (proj, out):
        os.makedirs(d)
        if user == "nobody":
            os.chown(d, NOBODY, NOBODY)
    with open(os.path.join(proj, "Makefile"), "w") as f:
        f.write(f"all:\n\techo built > obj.o\n\techo result > {out}/result\n")
    opts = ["--sandbox=ro" if preset == "ro" else "--sandbox", "--sandbox-write", out]
    r = subprocess.run(umview_for(user, *opts, "--", "make", "-s"), capture_output=True, cwd=proj, timeout=120)
    assert r.returncode == 0, r.stderr
    assert open(os.path.join(out, "result")).read() == "result\n"
    assert os.listdir(proj) == ["Makefile"]
    if user == "nobody":
        assert os.stat(os.path.join(out, "result")).st_uid == NOBODY


def test_sandbox_write_says_what_it_wants():
    need_user("root")
    for opts, msg in ((["--sandbox-write", "/var"], b"--sandbox-write goes with --sandbox"),
                      (["--sandbox", "--sandbox-write", "/nonexistent-dir"], b"not a directory"),
                      (["--sandbox", "--sandbox-write", "/"], b"the whole system")):
        r = subprocess.run(umview_for("root", *opts, "--", "true"), capture_output=True, timeout=60)
        assert r.returncode == 2 and msg in r.stderr, r.stderr


def test_a_viewfs_ro_mount_shows_its_source_and_refuses_writes(victim):
    need_user("root")
    src, target = os.path.join(victim, "src"), os.path.join(victim, "mnt")
    make_tree(src)
    os.mkdir(target)
    script = f"cat {target}/config; echo x > {target}/config; touch {target}/new; ls {target}"
    native = os.path.join(victim, "native")
    make_tree(native)
    ref = subprocess.run(["sh", "-c", script.replace(target, native)], capture_output=True)
    assert ref.returncode == 0 and os.path.exists(os.path.join(native, "new"))  # natively: written
    before = checksum(src)
    for opts in (["-p", f"viewfs,mount={src}:{target}:ro", "--", "sh", "-c", script],
                 ["-p", "viewfs", "--", "sh", "-c", f"mount -t viewfs -o ro {src} {target} && {script}"]):
        r = subprocess.run(umview_for("root", *opts), capture_output=True, timeout=120)
        assert r.stdout == b"orig\nconfig\ndoomed\nmove-me\n", r.stderr
        assert r.stderr.count(b"Read-only file system") == 2, r.stderr
        assert checksum(src) == before and os.listdir(target) == []


RMTREE = ("import os, shutil, sys\n"
          "for top in sys.argv[1:]:\n"
          "    os.makedirs(top + '/a/b')\n"
          "    open(top + '/a/b/f', 'w').close()\n"
          "    fd = os.open(top + '/a/b', os.O_RDONLY)\n"
          "    os.unlink('f', dir_fd=fd)\n"
          "    shutil.rmtree(top)\n"
          "    print(os.path.exists(top))\n")


@pytest.mark.parametrize("user", USERS)
def test_a_sandbox_removes_what_it_made_through_directory_fds_in_tmp_and_in_its_layer(victim, user):
    # shutil.rmtree, rm -rf: unlinkat(dirfd, name) in a directory made in
    # the sandbox (its fd is in the layer or the private /tmp, both under
    # $TMPDIR: the private /tmp's mount must not take those for its own)
    need_user(user)
    os.chmod(victim, 0o777)
    native = subprocess.run(as_user(user, [PY, "-c", RMTREE, f"{victim}/native"]), capture_output=True)
    assert native.stdout == b"False\n", native.stderr
    tops = [f"{victim}/made", f"/tmp/umview-report-test-{os.getpid()}"]
    r = subprocess.run(umview_for(user, "--sandbox", "--", PY, "-c", RMTREE, *tops), capture_output=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout == b"False\nFalse\n", r.stderr
    assert not any(os.path.exists(t) for t in tops)


@pytest.mark.parametrize("user", USERS)
def test_a_sandbox_lists_merged_directories_when_its_listings_live_under_tmp(victim, user):
    # XDG_RUNTIME_DIR under /tmp (some CI images): the cow view's listing
    # directories are there, under the sandbox's private /tmp, whose mount
    # must not take paths relative to them for its own
    need_user(user)
    os.chmod(victim, 0o777)
    t = os.path.join(victim, "tree")
    make_tree(t, NOBODY if user == "nobody" else None)
    script = f"touch {t}/doomed/new && cd {t} && find . | sort && rm -rf doomed && ls"
    native = os.path.join(victim, "native")
    make_tree(native, NOBODY if user == "nobody" else None)
    ref = subprocess.run(as_user(user, ["sh", "-c", script.replace(t, native)]), capture_output=True)
    xdg = tempfile.mkdtemp(prefix="umview-report-xdg-", dir="/tmp")
    try:
        os.chmod(xdg, 0o777)
        r = subprocess.run(umview_for(user, "--sandbox", "--", "sh", "-c", script), capture_output=True, timeout=120,
                           env={**os.environ, "XDG_RUNTIME_DIR": xdg})
    finally:
        shutil.rmtree(xdg)
    assert ref.returncode == 0 and b"./doomed/sub/b\n" in ref.stdout, ref.stderr
    assert (r.returncode, r.stdout) == (0, ref.stdout), r.stderr
    assert os.path.exists(os.path.join(t, "doomed")) and not os.path.exists(os.path.join(t, "doomed", "new"))
