"""viewfs, mode move: a real directory shown over a path, just for the view."""
import os
import shlex
import shutil
import sys

import pytest

from conftest import entry_for, need_user, run, umview_argv, umview_for

BIN = os.path.dirname(sys.executable)
VUMOUNT = os.path.join(BIN, "vumount")
VUUMOUNT = os.path.join(BIN, "vuumount")


@pytest.fixture
def dirs(tmp_path):
    src = tmp_path / "project"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "f").write_text("from the project\n")
    (src / "Makefile").write_text("all:\n\t@echo built in $(CURDIR)\n")
    target = tmp_path / "srv" / "app"
    target.mkdir(parents=True)
    (target / "hidden").write_text("real content of the target\n")
    return src, target


def in_view(script, tmp_path, *opts):
    return run(umview_argv("-p", "viewfs", *opts, "--", "bash", "-c", script), cwd=tmp_path,
               env=dict(os.environ, VUMOUNT=VUMOUNT, VUUMOUNT=VUUMOUNT))


def test_mount_shows_source_over_target_and_umount_restores(dirs, tmp_path):
    src, target = dirs
    r = in_view(f'"$VUMOUNT" -t viewfs {src} {target} && ls {target} && cat {target}/sub/f;'
                f' "$VUUMOUNT" {target} && ls {target}', tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"Makefile\nsub\nfrom the project\nhidden\n"


def test_writes_through_the_mount_land_in_the_source(dirs, tmp_path):
    src, target = dirs
    r = in_view(f'"$VUMOUNT" -t viewfs {src} {target} && echo new > {target}/sub/n && mkdir {target}/d'
                f' && mv {target}/sub/n {target}/d/m', tmp_path)
    assert r.returncode == 0, r.stderr
    assert (src / "d" / "m").read_text() == "new\n"
    assert not (target / "d").exists()


def test_cwd_inside_the_mount_and_dotdot_back_out(dirs, tmp_path):
    src, target = dirs
    r = in_view(f'"$VUMOUNT" -t viewfs {src} {target} && cd {target}/sub && /bin/pwd && cat f'
                f' && cd ../.. && /bin/pwd && ls', tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split("\n")[:4] == [f"{target}/sub", "from the project", str(target.parent), "app"]


def test_make_runs_in_the_mounted_directory(dirs, tmp_path):
    src, target = dirs
    r = in_view(f'"$VUMOUNT" -t viewfs {src} {target} && make -s -C {target}', tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"built in {target}".encode()


def test_mount_option_at_start(dirs, tmp_path):
    src, target = dirs
    r = run(umview_argv("-p", f"viewfs,mount={src}:{target}", "--", "cat", f"{target}/sub/f"))
    assert r.stdout == b"from the project\n", r.stderr


def test_later_mount_hides_earlier_one_below_it(dirs, tmp_path):
    src, target = dirs
    other, third = tmp_path / "other", tmp_path / "third"
    for d in (other, third):
        (d / "sub").mkdir(parents=True)
        (d / "sub" / "f").write_text(d.name + "\n")
    r = in_view(f'"$VUMOUNT" -t viewfs {src} {target} && "$VUMOUNT" -t viewfs {other}/sub {target}/sub'
                f' && cat {target}/sub/f && "$VUMOUNT" -t viewfs {third} {target} && cat {target}/sub/f'
                f' && "$VUUMOUNT" {target} && cat {target}/sub/f', tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"other\nthird\nother\n"


def test_mount_errors_are_the_kernels(dirs, tmp_path):
    src, target = dirs
    r = in_view(f'"$VUMOUNT" -t viewfs {src}/nope {target}; "$VUMOUNT" -t viewfs {src} {target}/nope;'
                f' "$VUMOUNT" -t viewfs -o copyonwrite {src} {target}; echo done', tmp_path)
    assert r.stdout == b"done\n"
    err = r.stderr.decode()
    assert err.count("No such file or directory") == 2
    assert "Invalid argument" in err and "unknown mount option(s) copyonwrite" in err


def test_vumount_outside_a_view_says_so(dirs):
    src, target = dirs
    r = run([VUMOUNT, "-t", "viewfs", str(src), str(target)])
    assert r.returncode != 0
    assert b"umview view" in r.stderr


def test_except_keeps_subpaths_real(dirs, tmp_path):
    src, target = dirs
    (target / "keep").mkdir()
    (target / "keep" / "k").write_text("real keep\n")
    (src / "keep").mkdir()
    (src / "keep" / "k").write_text("source keep\n")
    r = in_view(f'"$VUMOUNT" -t viewfs -o except=keep {src} {target} && cat {target}/keep/k {target}/sub/f;'
                f' "$VUUMOUNT" {target}; "$VUMOUNT" -t viewfs -o except=/elsewhere {src} {target}; echo $?',
                tmp_path)
    assert r.stdout == b"real keep\nfrom the project\n32\n", r.stderr


def test_dotdot_from_a_dirfd_inside_the_mount_climbs_in_the_view(dirs, tmp_path):
    # the kernel's fd is on the source: its ".." is the source's parent, the
    # view's is the target's (where "hidden" was replaced, "beside" is not)
    src, target = dirs
    (target.parent / "beside").write_text("next to the mount point\n")
    script = ("import os, sys; t = sys.argv[1]; fd = os.open(t + '/sub', os.O_RDONLY);"
              " print(open(os.open('../../beside', os.O_RDONLY, dir_fd=fd)).read(), end='');"
              " os.chdir(t + '/sub'); print(open('../../beside').read(), end='');"
              " os.fchdir(fd); print(os.getcwd() == t + '/sub')")
    r = run(umview_argv("-p", f"viewfs,mount={src}:{target}", "--", sys.executable, "-c", script, str(target)))
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"next to the mount point\nnext to the mount point\nTrue\n"


def test_relative_except_of_a_cow_view_of_root_stays_real(tmp_path):
    # except=P relative to a TARGET of "/" names /P: writes there are real,
    # writes elsewhere land in the layer
    real, layer = tmp_path / "real", tmp_path / "layer"
    real.mkdir()
    r = in_view(f'"$VUMOUNT" -t viewfs -o cow,except={str(real).lstrip("/")} {layer} / &&'
                f' echo kept > {real}/f && echo layered > {tmp_path}/g', tmp_path)
    assert r.returncode == 0, r.stderr
    assert (real / "f").read_text() == "kept\n"
    assert not (tmp_path / "g").exists()
    assert not os.path.exists(f"{layer}{real}/f")


def test_a_fresh_layered_mount_starts_from_what_lay_under_the_older_one_and_leaves_it_intact(tmp_path):
    # a fresh cow of / over a cow of / (a layer per test in a sandbox): it
    # shows the real tree, not the older layer; unmounted, the older layer's
    # view is back; the real file is never written (natively it would be)
    first, second, victim = tmp_path / "first", tmp_path / "second", tmp_path / "victim"
    victim.mkdir()
    (victim / "f").write_text("orig\n")
    native = run(["bash", "-c", f"echo first > {victim}/f && cat {victim}/f"])
    assert native.stdout == b"first\n"
    (victim / "f").write_text("orig\n")
    # (the fresh layer where the first mount writes for real: an except= path)
    r = in_view(f'"$VUMOUNT" -t viewfs -o cow,except={second} {first} / && echo first > {victim}/f &&'
                f' echo made > {victim}/g &&'
                f' "$VUMOUNT" -t viewfs -o cow,fresh {second} / && cat {victim}/f && test ! -e {victim}/g &&'
                f' echo fresh > {victim}/f && echo h > {victim}/h && ls {victim} &&'
                f' "$VUUMOUNT" / && cat {victim}/f {victim}/g && test ! -e {victim}/h && echo back', tmp_path)
    assert r.stdout == b"orig\nf\nh\nfirst\nmade\nback\n", r.stderr
    assert (victim / "f").read_text() == "orig\n" and sorted(os.listdir(victim)) == ["f"]
    assert (first / str(victim).lstrip("/") / "f").read_text() == "first\n"
    assert (second / str(victim).lstrip("/") / "f").read_text() == "fresh\n"
    assert not (first / str(victim).lstrip("/") / "h").exists()


@pytest.mark.parametrize("user", ["root", "nobody"])
def test_a_fresh_layer_in_the_tree_a_sandbox_protects_is_refused_and_nothing_is_made(user):
    # a fresh mount writes its layer for real: a layer in /var/tmp (copy-on-
    # write in a sandbox) would be a way out, so would mincow (lower files
    # written in place); a fresh cow layer in the sandbox's /tmp works
    need_user(user)
    name = f"umview-fresh-escape-{os.getpid()}-{user}"
    add = " ".join(shlex.quote(a) for a in entry_for(user, "umview.commands:um_add_service_main"))
    dele = " ".join(shlex.quote(a) for a in entry_for(user, "umview.commands:um_del_service_main"))
    script = (f"{add} viewfs,mount=/var/tmp/{name}:/:cow,fresh; echo refused=$?; test ! -e /var/tmp/{name} &&"
              f" mkdir /tmp/{name} && {{ {add} viewfs,mount=/tmp/{name}:/:mincow,fresh; echo mincow=$?; }} &&"
              f" {add} viewfs,mount=/tmp/{name}:/:cow,fresh && echo x > /etc/{name} &&"
              f" ls /tmp/{name}/etc && {dele} viewfs && test ! -e /etc/{name} && echo removed")
    try:
        r = run(umview_for(user, "--sandbox", "--", "sh", "-c", script))
        assert r.stdout == f"refused=1\nmincow=1\n{name}\nremoved\n".encode(), r.stderr
        assert b"keeps copy-on-write" in r.stderr and b"fresh goes with cow" in r.stderr
        assert not os.path.exists(f"/var/tmp/{name}") and not os.path.exists(f"/etc/{name}")
    finally:
        shutil.rmtree(f"/var/tmp/{name}", ignore_errors=True)


def test_a_layered_mount_over_a_layered_mount_is_refused_and_the_view_still_works(tmp_path):
    # natively a second overlay over the first would work; here the lower
    # layer would not be what the first mount shows: refused with EBUSY (not
    # an empty view where every command vanishes), a move mount over it works
    first, second, moved = tmp_path / "first", tmp_path / "second", tmp_path / "moved"
    moved.mkdir()
    r = in_view(f'"$VUMOUNT" -t viewfs -o cow {first} / && "$VUMOUNT" -t viewfs -o cow {second} /;'
                f' echo $?; cat /etc/hostname >/dev/null && echo still; "$VUMOUNT" -t viewfs {moved} /mnt && echo moved',
                tmp_path)
    assert r.stdout == b"32\nstill\nmoved\n", r.stderr
    assert b"Device or resource busy" in r.stderr and b"not supported" in r.stderr
    r = run(umview_argv("-p", f"viewfs,mount={first}:/:cow;{second}:/usr:cow", "--", "true"))
    assert r.returncode == 2 and b"module viewfs: a cow mount over /usr" in r.stderr


@pytest.mark.parametrize("how", ["options", "vumount"])
def test_a_mount_whose_source_another_mount_shows_from_inside_its_own_target(tmp_path, how):
    # /T shows /T/A (as a sandbox's /tmp shows a directory of the real /tmp);
    # a second mount's source /T/x is /T/A/x for real: its paths must not be
    # taken as /T's again (/T/A/A/x)
    t = tmp_path / "T"
    (t / "A" / "x").mkdir(parents=True)
    (t / "A" / "x" / "f").write_text("in A/x\n")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = f"cat {mnt}/f && echo new > {mnt}/g && cd {mnt} && cat g && ls {t}/x"
    if how == "options":
        r = run(umview_argv("-p", f"viewfs,mount={t}/A:{t}", "-p", f"viewfs,mount={t}/x:{mnt}", "--",
                            "sh", "-c", script))
    else:
        r = run(umview_argv("-p", f"viewfs,mount={t}/A:{t}", "--", "sh", "-c",
                            f'"$VUMOUNT" -t viewfs {t}/x {mnt} && {script}'), env=dict(os.environ, VUMOUNT=VUMOUNT))
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"in A/x\nnew\nf\ng\n"
    assert (t / "A" / "x" / "g").read_text() == "new\n"
    assert not (t / "A" / "A").exists() and not (mnt / "g").exists()


def test_a_script_under_the_mount_runs_with_the_name_the_process_gave(dirs, tmp_path):
    # the kernel hands a #! interpreter the script's name as the exec gave
    # it: natively the name the process used, which the view must keep
    # (not the real path it rewrote it to); a script that may not be
    # executed fails as natively
    src, target = dirs
    for d in (src, target):
        (d / "s").write_text('#!/bin/sh\necho "$0 $1"\n')
        (d / "s").chmod(0o755)
        (d / "x").write_text('#!/bin/sh\necho ran\n')
        (d / "x").chmod(0o644)
    script = f"{target}/s a; cd {target} && ./s b; ./x; echo $?; ./sub; echo $?"
    native = run(["sh", "-c", script.replace(str(target), str(src))])
    r = run(umview_argv("-p", f"viewfs,mount={src}:{target}", "--", "sh", "-c", script))
    assert r.returncode == 0, r.stderr
    assert native.stdout == f"{src}/s a\n./s b\n126\n126\n".encode()
    assert r.stdout == f"{target}/s a\n./s b\n126\n126\n".encode()
