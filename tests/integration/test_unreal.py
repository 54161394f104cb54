"""unreal's oracle: an operation on X, /unreal/X and /unreal/unreal/X gives the
same result (up to the prefix), and /unreal/unreal/unreal/X does not exist."""
import json
import os
import sys

import pytest

from conftest import run, umview_argv

PREFIXES = ["", "/unreal", "/unreal/unreal"]


def in_view(script, cwd):
    """Run a bash script under umview -p unreal; the script gets $P."""
    outs = []
    for p in PREFIXES:
        r = run(umview_argv("-p", "unreal", "--", "bash", "-c", script), cwd=cwd,
                env=dict(os.environ, P=p, LC_ALL="C"))
        outs.append((r.stdout.decode(errors="replace").replace(p, "") if p else r.stdout.decode(errors="replace"),
                     r.stderr.decode(errors="replace").replace(p, "") if p else r.stderr.decode(errors="replace"),
                     r.returncode))
    return outs


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "tree"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "file").write_text("content\n")
    (root / "sub" / "deeper" / "f2").write_text("two\n")
    os.symlink("file", root / "rel-link")
    os.symlink(str(root / "sub"), root / "abs-link")
    os.symlink("missing", root / "dangling")
    os.chmod(root / "sub", 0o750)
    return root


COMMANDS = {
    "ls": 'ls -la --time-style=+%s "$P$T" "$P$T/sub" /etc/hostname "$P/etc/hostname"',
    "stat": 'stat -c "%n %s %a %F %h %i" "$P$T"/* "$P$T/sub/deeper/f2"',
    "readlink": 'readlink "$P$T/rel-link" "$P$T/abs-link" "$P$T/dangling"; readlink -f "$P$T/rel-link"',
    "find": 'find "$P$T" -maxdepth 2 | sort',
    "cat": 'cat "$P$T/file" "$P$T/rel-link" "$P$T/abs-link/deeper/f2"',
    "errors": 'cat "$P$T/nope"; ls "$P$T/file/x"; cd "$P$T/file"; echo $?',
    "write": 'echo new > "$P$T/w"; mkdir "$P$T/d"; mv "$P$T/w" "$P$T/d/w2"; ln -s w2 "$P$T/d/l";'
             ' cat "$P$T/d/l"; rm -r "$P$T/d"; ls "$P$T"',
    "walk": f'{sys.executable} -c "import os,sys; [print(d, sorted(ds), sorted(fs)) for d, ds, fs in '
            f'sorted(os.walk(sys.argv[1]))]" "$P$T"',
    "dirfd": f'{sys.executable} -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); '
             f'print(os.stat(\'file\', dir_fd=fd).st_size, os.readlink(\'rel-link\', dir_fd=fd))" "$P$T"',
    "relative": 'cd / && cat "${P#/}$T/file" && ls "${P#/}$T/sub"',
    "cwd": 'cd "$P$T/sub" && pwd -P && /bin/pwd && ls .. && cd deeper && cat f2 && cd ../.. && /bin/pwd'
           ' && ls && cat ./sub/../file && (cd sub; sh -c "/bin/pwd; ls")',
    "cwd-python": f'cd "$P$T" && {sys.executable} -c "import os; print(os.getcwd()); os.chdir(\'sub\');'
                  f' print(os.getcwd(), os.listdir(\'..\')); fd = os.open(\'deeper\', os.O_RDONLY);'
                  f' os.chdir(\'/\'); os.fchdir(fd); print(os.getcwd(), os.listdir())"',
    "cwd-errors": 'cd "$P$T/nope"; echo $?; cd "$P$T/file"; echo $?; cd "$P$T" && /bin/pwd',
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_same_result_on_x_and_under_unreal(name, tree):
    outs = in_view(f"T={tree}; " + COMMANDS[name], cwd=tree.parent)
    assert outs[1] == outs[0]
    assert outs[2] == outs[0]


def test_cwd_outside_mounts_is_the_kernels(tree):
    """cd into a real symlinked directory shows what getcwd shows natively."""
    script = 'cd /bin && /bin/pwd; cd /tmp && /bin/pwd'
    native = run(["bash", "-c", script])
    viewed = run(umview_argv("-p", "unreal", "--", "bash", "-c", script))
    assert viewed.stdout == native.stdout


def test_three_levels_deep_is_enoent(tree):
    r = run(umview_argv("-p", "unreal", "--", "cat", f"/unreal/unreal/unreal{tree}/file"))
    assert r.returncode == 1
    assert b"No such file or directory" in r.stderr


def test_unknown_module_and_option_are_errors():
    r = run(umview_argv("-p", "nosuchmodule", "--", "true"))
    assert r.returncode == 2 and b"no module named 'nosuchmodule'" in r.stderr
    r = run(umview_argv("-p", "unreal,bogus", "--", "true"))
    assert r.returncode == 2 and b"unknown option bogus" in r.stderr


def test_real_files_untouched_outside_the_view(tree):
    r = run(umview_argv("-p", "unreal", "--", "cat", f"/unreal{tree}/file"))
    assert r.stdout == b"content\n"
    assert not os.path.exists("/unreal")


def test_real_symlink_into_the_mount_is_followed_in_the_view(tree, tmp_path):
    link = tmp_path / "into"
    os.symlink(f"/unreal{tree}/sub", link)
    script = f'cat {link}/deeper/f2; cd {link}/deeper && /bin/pwd; ls {link}/../; stat -c %F {link}'
    r = run(umview_argv("-p", "unreal", "--", "bash", "-c", script))
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split("\n") == ["two", f"/unreal{tree}/sub/deeper", "abs-link", "dangling",
                                             "file", "rel-link", "sub", "symbolic link", ""]


def test_symlink_loop_under_the_mount_is_eloop(tmp_path):
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    native = run(["cat", str(tmp_path / "a")])
    viewed = run(umview_argv("-p", "unreal", "--", "cat", f"/unreal{tmp_path}/a"))
    assert viewed.returncode == native.returncode == 1
    assert viewed.stderr.replace(b"/unreal", b"") == native.stderr
    assert b"Too many levels of symbolic links" in native.stderr


def test_proc_self_and_dev_fd_stay_the_processes_own(tmp_path):
    script = "readlink /proc/self/exe; cat /dev/stdin; ls -l /proc/self/fd/0 | sed 's/.*-> //'"
    r = run(umview_argv("-p", "unreal", "--", "bash", "-c", script), input=b"from stdin\n")
    lines = r.stdout.decode().split("\n")
    assert lines[0] == "/usr/bin/readlink" and lines[1] == "from stdin"
    assert not lines[2].startswith("/proc")


def test_unix_socket_bound_under_the_mount_is_real(tmp_path):
    script = ("import socket, stat, os, sys; p = sys.argv[1]; s = socket.socket(socket.AF_UNIX); s.bind(p);"
              " s.listen(); c = socket.socket(socket.AF_UNIX); c.connect(p);"
              " print(stat.S_ISSOCK(os.stat(p).st_mode))")
    r = run(umview_argv("-p", "unreal", "--", sys.executable, "-c", script, f"/unreal{tmp_path}/sock"))
    assert r.stdout == b"True\n", r.stderr
    assert (tmp_path / "sock").is_socket()


def test_trailing_slash_and_missing_dir_before_dotdot_as_natively(tmp_path):
    script = ("import os, sys; d = sys.argv[1]\n"
              "for f in (lambda: open(d + '/nodir/', 'wb'), lambda: os.stat(d + '/nodir/../'),"
              " lambda: os.mkdir(d + '/new/'), lambda: os.stat(d + '/new/')):\n"
              "    try: f(); print('ok')\n"
              "    except OSError as e: print(e.errno)")
    (tmp_path / "n").mkdir()
    (tmp_path / "v").mkdir()
    native = run([sys.executable, "-c", script, str(tmp_path / "n")])
    viewed = run(umview_argv("-p", "unreal", "--", sys.executable, "-c", script, f"/unreal{tmp_path}/v"))
    assert viewed.stdout == native.stdout, viewed.stderr


def test_script_whose_interpreter_lies_under_the_mount_runs(tmp_path):
    # the kernel looks for a #! interpreter in the real file system: natively
    # /unreal/bin/sh does not exist, in the view it is /bin/sh
    script = tmp_path / "s.sh"
    script.write_text('#!/unreal/bin/sh -e\necho "$0|$*"\n')
    script.chmod(0o755)
    native = run(["bash", "-c", f"{script} a"])
    assert native.returncode != 0
    r = run(umview_argv("-p", "unreal", "--", "bash", "-c",
                        f'cd {tmp_path} && ./s.sh a "b c" && /unreal{script} d && {script}'),
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == ["./s.sh|a b c", f"/unreal{script}|d", f"{script}|"]


INET_CONNECTS = """
import socket
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(64)
for _ in range(50):
    c = socket.create_connection(srv.getsockname())
    srv.accept()[0].close()
    c.close()
print("ok")
"""


def test_inet_bind_and_connect_stay_in_c_only_unix_paths_reach_python(tmp_path):
    """The mount claims bind/connect for AF_UNIX paths under it; the C core
    reads the address's family, so 51 AF_INET binds and connects never enter
    Python (a few other calls do: exec, the cwd tracker's start)."""
    stats = tmp_path / "stats"
    r = run(umview_argv("--stats-file", str(stats), "-p", "unreal", "--", sys.executable, "-S", "-c",
                        INET_CONNECTS))
    assert r.stdout == b"ok\n", r.stderr
    assert json.loads(stats.read_text())["python_events"] < 20
