"""Real programs natively and under umview: the same stdout, stderr, exit
status and files left behind.

Every umview-side run happens twice: with no engine, and with the example
LyingEngine loaded. That engine claims getpid and uname outright and the
path calls open/openat/openat2/unlink/unlinkat/rmdir under two paths the
commands never touch, so every open and unlink of these programs is trapped,
decoded and resolved by the C fast path and then let through: nothing the
engine does not own may change. (The commands avoid getpid, which the engine
does own: a process finds its own pid with readlink /proc/self.)
"""
import hashlib
import os
import signal
import stat
import sys
import textwrap

import pytest

from conftest import LYING_ENGINE, lying_env, need, run, umview_argv

PY = sys.executable


@pytest.fixture(params=["no-engine", "lying-engine", "unreal-cwd"])
def viewer(request, tmp_path):
    """How umview is run: (umview options, environment for both runs, prefix
    under which the umview run sees its working directory)."""
    if request.param == "no-engine":
        return [], dict(os.environ), ""
    if request.param == "unreal-cwd":
        # the program works in /unreal/<its directory>: every path it uses
        # goes through the unreal module and the virtual cwd
        return ["-p", "unreal"], dict(os.environ), "/unreal"
    return ["--engine", LYING_ENGINE], lying_env(tmp_path / "lying-scratch"), ""


def snapshot(root, exclude=()):
    """relative path -> what matters of it: kind, permission bits, content
    digest or link target. Names in `exclude` (top-level) are left out."""
    tree = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d not in exclude]
            filenames = [f for f in filenames if f not in exclude]
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                tree[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                tree[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                with open(path, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                tree[rel] = ("file", stat.S_IMODE(st.st_mode), digest)
    return tree


def differential(tmp_path, viewer, argv, setup=None, timeout=120, exclude=()):
    """Run argv natively, then under umview, each in a fresh copy of the same
    working directory (same absolute path, so outputs may name it); compare
    stdout, stderr, exit status and the trees left behind."""
    opts, env, seen = viewer
    work = tmp_path / "work"
    results = []
    inside = ["bash", "-c", 'cd "$1" && shift && exec "$@"', "cd", f"{seen}{work}"] if seen else []
    for name, prefix in (("native", []), ("umview", umview_argv(*opts, "--") + inside)):
        work.mkdir()
        if setup:
            setup(work)
        r = run(prefix + list(argv), cwd=work, env=env, timeout=timeout)
        results.append((r, snapshot(work, exclude)))
        work.rename(tmp_path / name)
    (native, native_tree), (viewed, viewed_tree) = results

    def text(b):
        t = b.decode(errors="replace")
        return t.replace(f"{seen}{work}", str(work)) if seen else t

    assert text(viewed.stderr) == text(native.stderr)
    assert text(viewed.stdout) == text(native.stdout)
    assert viewed.returncode == native.returncode
    assert viewed_tree == native_tree
    return native


def write_files(root, files):
    for rel, content in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(content))


FIXED_TIME = 1_700_000_000


def make_tree(root):
    """A small tree with files, a subdirectory, an empty directory, an
    executable and a symlink, all with fixed times (so archives of it are
    byte-identical from one run to the next)."""
    src = os.path.join(root, "src")
    write_files(src, {
        "a.txt": "alpha\n" * 100,
        "b.txt": "",
        "sub/deep.txt": "deep\n" * 3000,
        "sub/run.sh": "#!/bin/sh\necho run\n",
    })
    os.chmod(os.path.join(src, "sub/run.sh"), 0o755)
    os.mkdir(os.path.join(src, "empty"))
    os.symlink("sub/deep.txt", os.path.join(src, "to-deep"))
    for dirpath, dirnames, filenames in os.walk(src, topdown=False):
        for name in dirnames + filenames:
            os.utime(os.path.join(dirpath, name), (FIXED_TIME, FIXED_TIME), follow_symlinks=False)
    os.utime(src, (FIXED_TIME, FIXED_TIME))


# --- builds -----------------------------------------------------------------

C_PROJECT = {
    "util.h": """\
        int add(int a, int b);
        const char *greet(void);
        """,
    "add.c": """\
        #include "util.h"
        int add(int a, int b) { return a + b; }
        """,
    "greet.c": """\
        #include "util.h"
        const char *greet(void) { return "hello from a multi-file build"; }
        """,
    "main.c": """\
        #include <stdio.h>
        #include "util.h"
        int main(int argc, char **argv) {
            printf("%s: %d args, 2+3=%d\\n", greet(), argc, add(2, 3));
            return 0;
        }
        """,
    "broken.c": """\
        int broken(void) { return undeclared_thing; }
        """,
    "Makefile": """\
        CFLAGS = -O2 -Wall
        prog: main.o add.o greet.o
        \t$(CC) -o $@ $^
        %.o: %.c util.h
        \t$(CC) $(CFLAGS) -c -o $@ $<
        broken: broken.o
        """,
}


def test_make_j2_builds_a_multi_file_program_as_natively(tmp_path, viewer):
    need("gcc", "make")
    native = differential(
        tmp_path, viewer,
        ["bash", "-c", "make -j2 CC=gcc 2>&1 | sort; echo make=${PIPESTATUS[0]}; ./prog x y"],
        setup=lambda d: write_files(d, C_PROJECT))
    assert b"hello from a multi-file build: 3 args, 2+3=5" in native.stdout


def test_failed_make_reports_the_compiler_error_and_status_as_natively(tmp_path, viewer):
    need("gcc", "make")
    native = differential(tmp_path, viewer, ["make", "-j2", "CC=gcc", "broken"],
                          setup=lambda d: write_files(d, C_PROJECT))
    assert native.returncode == 2
    assert b"undeclared_thing" in native.stderr


# --- git ----------------------------------------------------------------------

GIT_SCRIPT = """\
set -e
git -c init.defaultBranch=main init -q repo
cd repo
echo one > a; mkdir d; echo two > d/b
git add .
git commit -q -m first
echo three >> a
git commit -q -a -m second
echo new > untracked; echo more >> d/b; git rm -q --cached a
git log --format=%s
git status --porcelain
git rev-parse HEAD
git ls-files -s
"""


def test_git_init_add_commit_log_and_status_as_natively(tmp_path, viewer):
    need("git")
    opts, env, seen = viewer
    env = dict(env, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, HOME=str(tmp_path),
               GIT_AUTHOR_NAME="Tester", GIT_AUTHOR_EMAIL="t@example.org",
               GIT_COMMITTER_NAME="Tester", GIT_COMMITTER_EMAIL="t@example.org",
               GIT_AUTHOR_DATE="2024-01-01T00:00:00Z", GIT_COMMITTER_DATE="2024-01-01T00:00:00Z")
    native = differential(tmp_path, (opts, env, seen),
                          ["bash", "-c", GIT_SCRIPT],
                          # the index records inode numbers and times: compare git's view of it
                          exclude=("repo",))
    assert native.stdout.startswith(b"second\nfirst\n")
    assert b"?? untracked" in native.stdout


# --- tar and coreutils ----------------------------------------------------------

def test_tar_create_list_extract_gives_an_identical_tree(tmp_path, viewer):
    need("tar", "diff")
    native = differential(
        tmp_path, viewer,
        ["bash", "-c", "tar cf a.tar src && tar tf a.tar | sort && mkdir out && tar xf a.tar -C out"
         " && diff -r --no-dereference src out/src && echo identical"],
        setup=make_tree)
    assert native.stdout.endswith(b"identical\n")


COREUTILS_SCRIPT = """\
cp -r src copy
mv copy/a.txt copy/moved.txt
ln -s ../src/sub/deep.txt copy/link
readlink -f copy/link copy/to-deep
stat -c '%n %s %F' copy/moved.txt copy/sub/deep.txt copy/link copy/empty
find . -name '*.txt' | sort
find . -type l | sort
sort -r copy/sub/run.sh src/a.txt | uniq -c
du -s src copy
cat copy/link | wc -l
rm -r copy/sub; rmdir copy/empty; ls copy
"""


def test_coreutils_copy_move_link_stat_find_sort_du_as_natively(tmp_path, viewer):
    need("cp", "mv", "ln", "readlink", "stat", "find", "sort", "du")
    differential(tmp_path, viewer, ["bash", "-c", COREUTILS_SCRIPT], setup=make_tree)


# --- python -------------------------------------------------------------------

PY_THREADS_SUBPROCESS = """\
import subprocess, sys, threading
results = {}
def work(i):
    with open(f"t{i}.txt", "w") as f:
        f.write(f"thread {i}\\n")
    out = subprocess.run([sys.executable, "-c", f"print(open('t{i}.txt').read().upper(), end='')"],
                         capture_output=True, text=True, check=True).stdout
    results[i] = out
ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in ts: t.start()
for t in ts: t.join()
for i in sorted(results): print(results[i], end="")
print(subprocess.run("echo via-shell; exit 3", shell=True).returncode)
"""


def test_python_threads_running_subprocesses_as_natively(tmp_path, viewer):
    native = differential(tmp_path, viewer, [PY, "-c", PY_THREADS_SUBPROCESS])
    assert native.stdout.count(b"THREAD") == 8


PY_100_THREADS = """\
import os, threading
def work(i):
    name = f"f{i:03d}"
    with open(name, "w") as f:
        for j in range(50):
            f.write(f"{i} {j}\\n")
    with open(name, "a") as f:
        f.write("end\\n")
    with open(name) as f:
        lines = f.read().splitlines()
    assert len(lines) == 51 and lines[-1] == "end", (name, len(lines))
    os.rename(name, name + ".done")
    if i % 2:
        os.unlink(name + ".done")
ts = [threading.Thread(target=work, args=(i,)) for i in range(100)]
for t in ts: t.start()
for t in ts: t.join()
print(len(ts), len(os.listdir(".")), sum(os.stat(n).st_size for n in os.listdir(".")))
"""


def test_100_threads_doing_file_io_as_natively(tmp_path, viewer):
    native = differential(tmp_path, viewer, [PY, "-c", PY_100_THREADS])
    assert native.stdout.startswith(b"100 50 ")


EXEC_FROM_THREAD = """\
import os, sys, threading, time
me = os.readlink("/proc/self")
def busy():
    while True:
        with open("/etc/hostname") as f:
            f.read()
def go():
    time.sleep(0.2)
    os.execv(sys.executable, [sys.executable, "-c",
        "import os, sys; print('execed, same pid:', os.readlink('/proc/self') == sys.argv[1],"
        " 'threads:', len(os.listdir('/proc/self/task')))", me])
for _ in range(3):
    threading.Thread(target=busy, daemon=True).start()
threading.Thread(target=go).start()
time.sleep(60)
print("not reached")
"""


def test_exec_from_a_non_leader_thread_replaces_the_process(tmp_path, viewer):
    native = differential(tmp_path, viewer, [PY, "-c", EXEC_FROM_THREAD], timeout=60)
    assert native.stdout == b"execed, same pid: True threads: 1\n"


POSIX_SPAWN = """\
import os, sys
child = "import sys; print('child', sys.argv[1:]); sys.exit(7)"
pid = os.posix_spawn(sys.executable, [sys.executable, "-c", child, "a", "b"], os.environ)
print("status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
actions = [(os.POSIX_SPAWN_OPEN, 1, "out.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)]
pid = os.posix_spawn(sys.executable, [sys.executable, "-c", child, "to-file"], os.environ,
                     file_actions=actions)
print("status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), open("out.txt").read(), end="")
pid = os.posix_spawnp("echo", ["echo", "found", "on", "PATH"], os.environ)
print("status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
try:
    os.posix_spawn("/nonexistent/program", ["x"], os.environ)
except OSError as e:
    print("spawn failed:", e.strerror)
"""


def test_posix_spawn_vfork_children_run_and_report_as_natively(tmp_path, viewer):
    native = differential(tmp_path, viewer, [PY, "-c", POSIX_SPAWN])
    assert native.stdout.count(b"status 7") == 2


# --- shells, signals, process trees ---------------------------------------------

SHELL_JOBS = """\
# background output goes to files, so the order of the lines is the script's
trap 'echo got USR1' USR1
(sleep 0.2; echo first job done) > first.out &
p1=$!
sleep 30 &
p2=$!
(exit 5) &
p3=$!
kill $p2
wait $p2; echo "killed job: $?"
wait $p1; echo "first job: $?"; cat first.out
wait $p3; echo "third job: $?"
sh -c 'kill -USR1 $PPID'
for i in 1 2 3; do (echo "job $i" > job$i.out) & done; wait
cat job*.out; jobs; echo "all waited: $?"
trap 'echo leaving' EXIT
"""


def test_shell_background_jobs_wait_kill_and_trap_as_natively(tmp_path, viewer):
    native = differential(tmp_path, viewer, ["bash", "-c", SHELL_JOBS], timeout=60)
    assert b"killed job: 143" in native.stdout
    assert b"got USR1" in native.stdout


def test_pipeline_writer_dies_of_sigpipe_as_natively(tmp_path, viewer):
    native = differential(
        tmp_path, viewer,
        ["bash", "-c", "yes | head -1; echo ${PIPESTATUS[@]}; seq 1 1000000 | head -2;"
         " echo ${PIPESTATUS[@]}; (trap '' PIPE; yes 2>/dev/null | head -c 3); echo ${PIPESTATUS[@]}"])
    assert native.stdout.startswith(b"y\n141 0\n1\n2\n141 0\n")


FATAL = ("import os, resource, signal; resource.setrlimit(resource.RLIMIT_CORE, (0, 0));"
         " os.kill(int(os.readlink('/proc/self')), signal.{})")


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL", "SIGSEGV", "SIGHUP", "SIGUSR1", "SIGABRT", "SIGQUIT"])
def test_umview_dies_of_the_signal_that_killed_the_command(tmp_path, viewer, sig):
    signum = getattr(signal, sig)
    native = differential(tmp_path, viewer, [PY, "-c", FATAL.format(sig)])
    assert native.returncode == -signum


def test_shell_reports_128_plus_signal_for_a_killed_umview(tmp_path, viewer):
    opts, env, _ = viewer
    command = f"{PY} -c \"{FATAL.format('SIGTERM')}\"; echo status=$?"
    native = run(["bash", "-c", command], cwd=tmp_path, env=env)
    viewed = run(["bash", "-c", " ".join(umview_argv(*opts, "--")) + " " + command], cwd=tmp_path, env=env)
    assert native.stdout == b"status=143\n"
    assert (viewed.stdout, viewed.stderr) == (native.stdout, native.stderr)


FORK_TREE = """\
node() {
    pids=
    for c in $(($1 * 2 + 1)) $(($1 * 2 + 2)); do
        if [ "$c" -lt 500 ]; then node "$c" & pids="$pids $!"; fi
    done
    st=0
    for p in $pids; do wait "$p" || st=1; done
    echo "$1"
    exit $st
}
(node 0) | sort -n | awk '{ n++; s += $1 } END { print n " processes, sum " s }'
echo "tree status ${PIPESTATUS[0]}"
"""


def test_500_process_fork_tree_all_exit_0(tmp_path, viewer):
    need("awk")
    native = differential(tmp_path, viewer, ["bash", "-c", FORK_TREE], timeout=120)
    assert native.stdout == b"500 processes, sum 124750\ntree status 0\n"
