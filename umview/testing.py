"""Conformance tests that every module showing a real directory at another path
must pass; a module's test suite reuses them in a few lines:

    from umview.testing import RedirectConformance

    class TestUnreal(RedirectConformance):
        def view(self, real, tmp):
            return ["-p", "unreal"], "/unreal" + str(real)

Each test runs the same bash script twice on two identical fresh trees: natively
with ``$D`` the first tree, and under ``umview OPTIONS`` with ``$D`` the path at
which the view shows the second tree. stdout, stderr and exit status must be the
same (paths written as ``<D>``), and so must the two trees afterwards.
"""
import hashlib
import os
import subprocess
import sys

import pytest

SCRIPTS = {
    # abs-link's size is the length of its target, which differs between the two trees
    "listing": 'ls -la --time-style=+ --ignore=abs-link "$D" "$D/sub" | sed "s/^total.*//"; ls -d "$D"/*',
    "stat": 'stat -c "%n %s %a %F %h" "$D"/[!a]* "$D/sub/deeper/f2" "$D/sub/"; stat -c "%n %F" "$D/abs-link"',
    "readlink": 'readlink "$D/rel-link" "$D/dangling" "$D/abs-link"; readlink -f "$D/rel-link" "$D/abs-link";'
                ' readlink "$D/file"; echo $?',
    "symlinks": 'cat "$D/abs-link/deeper/f2"; ls "$D/abs-link"; cd "$D/abs-link/deeper" && /bin/pwd && cat f2;'
                ' stat -c "%F" "$D/abs-link" "$D/abs-link/"; stat -L -c "%F" "$D/abs-link"; ls "$D/abs-link/../"',
    "find": 'find "$D" -maxdepth 2 | sort; find "$D" -type l | sort',
    "read": 'cat "$D/file" "$D/rel-link" "$D/sub/deeper/f2"; head -c 3 "$D/file"; echo; wc -c < "$D/file"',
    "errors": 'cat "$D/nope"; ls "$D/file/x"; cd "$D/file"; mkdir "$D/sub"; rmdir "$D/sub"; cat "$D/dangling";'
              ' echo done',
    "write": 'echo new > "$D/w"; mkdir -p "$D/d/e"; mv "$D/w" "$D/d/w2"; ln -s w2 "$D/d/l"; cat "$D/d/l";'
             ' cp "$D/file" "$D/d/e/"; chmod 600 "$D/d/e/file"; ln "$D/d/e/file" "$D/d/hard";'
             ' truncate -s 2 "$D/d/hard"; cat "$D/d/e/file"; echo; rm "$D/d/l"; touch "$D/t"; rmdir "$D/d" ; ls "$D"',
    "cwd": 'cd "$D/sub" && /bin/pwd && ls .. && cd deeper && cat f2 && cd ../.. && /bin/pwd && cat ./sub/../file'
           ' && (cd sub; sh -c "/bin/pwd; ls")',
    "python": '"$PY" -c "import os, sys; d = sys.argv[1]; os.chdir(d); print(os.getcwd());'
              ' print(sorted((p, sorted(ds), sorted(fs)) for p, ds, fs in os.walk(\'.\')));'
              ' fd = os.open(\'sub\', os.O_RDONLY); print(os.stat(\'deeper/f2\', dir_fd=fd).st_size);'
              ' os.fchdir(fd); print(os.getcwd()); print(os.path.realpath(\'deeper\'))" "$D"',
    "tar": 'tar -C "$D" -cf - file sub | tar -tvf - | sed "s/ .* / /" | sort',
}


def _make_tree(root, seen_as):
    """The test tree at real path root; seen_as is where the process sees it
    (an absolute symlink inside points at seen_as/sub, as a user would make it)."""
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "file").write_text("content\n")
    (root / "sub" / "deeper" / "f2").write_text("two\n")
    os.symlink("file", root / "rel-link")
    os.symlink("missing", root / "dangling")
    os.symlink(os.path.join(str(seen_as), "sub"), root / "abs-link")
    os.chmod(root / "sub", 0o750)


def _snapshot(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir", st.st_mode & 0o7777)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", st.st_mode & 0o7777, st.st_nlink, hashlib.sha256(f.read()).hexdigest())
    return out


class RedirectConformance:
    """Mixin for the tests of a module that shows a real directory at a path."""

    #: how umview is started (argv prefix); the default runs the installed package
    umview = [sys.executable, "-m", "umview.cli"]

    def view(self, real, tmp):
        """(umview options, path at which the view shows the directory real)."""
        raise NotImplementedError

    def _run(self, argv, d, cwd):
        env = dict(os.environ, D=str(d), PY=sys.executable, LC_ALL="C")
        return subprocess.run(argv, capture_output=True, cwd=cwd, env=env, timeout=120)

    @pytest.mark.parametrize("script", sorted(SCRIPTS))
    def test_same_as_on_the_real_directory(self, script, tmp_path):
        native_tree, viewed_tree = tmp_path / "native" / "tree", tmp_path / "viewed" / "tree"
        native_tree.parent.mkdir()
        viewed_tree.parent.mkdir()
        opts, vpath = self.view(viewed_tree, tmp_path)
        _make_tree(native_tree, native_tree)
        _make_tree(viewed_tree, vpath)
        cmd = ["bash", "-c", SCRIPTS[script]]
        native = self._run(cmd, native_tree, tmp_path)
        viewed = self._run([*self.umview, *opts, "--", *cmd], vpath, tmp_path)

        def norm(b, d):
            return b.decode(errors="replace").replace(str(d), "<D>")

        assert norm(viewed.stdout, vpath) == norm(native.stdout, native_tree)
        assert norm(viewed.stderr, vpath) == norm(native.stderr, native_tree)
        assert viewed.returncode == native.returncode
        def snap(tree, seen):
            return {k: (v[0], v[1].replace(str(seen), "<D>")) if v[0] == "link" else v
                    for k, v in _snapshot(tree).items()}

        assert snap(viewed_tree, vpath) == snap(native_tree, native_tree)
