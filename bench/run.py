#!/usr/bin/env python3
"""Compare umview with native, PRoot and strace on real workloads, in one run.

    python3 bench/run.py                      # full run (about 15 minutes)
    python3 bench/run.py --quick --only find  # smoke test (seconds)
    python3 bench/run.py --only find,git --configs native,umview-null --spin 0,100,1000

Every workload runs under every configuration, repetitions interleaved (one
round runs each configuration once, in an order rotated from round to round),
so a slow patch of this noisy VM hits all configurations alike. The table
gives median wall-clock seconds and the ratio to native of the same run;
"vs proot" is the configuration's median over PRoot's. The umview runs write
their counters with --stats-file and the medians of those are printed too.

Configurations:
  native       the command itself
  umview       umview with no engine (seccomp filter traps nothing)
  umview-null  umview with bench/null_path_engine.py:NullPathEngine, which
               claims every path syscall and virtualizes none: the cost of
               the C fast path (one seccomp stop per path call, no Python)
  umview-unreal  umview -p unreal: a path module loaded, the workload's paths
               outside its mount (fast path, plus the symlink check, plus
               Python for paths that go through a symlink)
  umview-cow   umview -p viewfs,mount=LAYER:/:cow: a copy-on-write view of
               the whole file system, a fresh empty layer for every run
  umview-vnet  umview -p vnet,private: a network namespace of the view's own
               (for the net workload)
  proot        Debian's proot, rootfs /, no options
  proot-b      proot -b /etc:/etc: PRoot with one bind, that it translates
               on every path (the closest PRoot has to a mounted view)
  strace       strace -f -o /dev/null
  umview-strace  umview -- strace -f -o /dev/null: strace inside a view, on the
               ptrace the monitor emulates (compare with strace)
  unshare-net  unshare -rn with lo up: the kernel's own private network, the
               floor for umview-vnet (for the net workload)

Standard library only. Workloads are prepared in a temporary directory that
is removed at the end (--keep keeps it).
"""
import argparse
import hashlib
import json
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
NULL_ENGINE = os.path.join(HERE, "null_path_engine.py") + ":NullPathEngine"

ALL_CONFIGS = ("native", "umview", "umview-null", "umview-unreal", "umview-cow", "umview-vnet", "proot",
               "proot-b", "strace", "umview-strace", "unshare-net")
ALL_WORKLOADS = ("true", "make", "find", "git", "pyimport", "pytest", "regrtest", "net")

PY_IMPORTS = "import email, json, http.client, asyncio, decimal, xml.dom.minidom, argparse, logging, unittest"
# Regression tests that do file I/O and take a few seconds together natively.
# (test_glob is left out: PRoot takes 40x native on it, 20 s, and would dominate the run.)
PY_TESTS = ["test_shutil", "test_tempfile", "test_fileio", "test_posixpath", "test_filecmp",
            "test_genericpath", "test_linecache", "test_pathlib"]
PY_TESTS_QUICK = ["test_posixpath", "test_filecmp"]
# The CPython regression subset of tests/conformance/test_cpython.py (about a
# minute natively): the work the cow view of / is measured on.
REGRTESTS = ["test_os", "test_posix", "test_subprocess", "test_signal", "test_threading",
             "test_fileio", "test_stat"]

STAT_KEYS = ("processes", "stops", "seccomp_stops", "notifications", "fast_continue", "python_events",
             "skipped", "rewritten", "exit_stops", "path_reads")


# --------------------------------------------------------------------------
# workloads
# --------------------------------------------------------------------------

class Workload:
    """A command to time, how to prepare it once and reset it before each run,
    and whether its stdout must be identical to native's."""

    name = ""
    compare_stdout = False

    def __init__(self, root, args):
        self.root = root
        self.args = args
        self.cwd = root

    def prepare(self):
        pass

    def missing(self):
        """Why this workload cannot run here, or None."""
        return None

    def reset(self):
        pass

    def command(self):
        raise NotImplementedError

    def describe(self):
        return " ".join(self.command())


C_UNIT = r"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "common.h"

struct item_%(i)d { int key; double weight; char label[32]; };

static int cmp_%(i)d(const void *a, const void *b)
{
    const struct item_%(i)d *x = a, *y = b;
    return (x->key > y->key) - (x->key < y->key);
}

int unit_%(i)d(int n)
{
    struct item_%(i)d *v = calloc((size_t)n, sizeof *v);
    int sum = 0;
    if (!v)
        return -1;
    for (int k = 0; k < n; k++) {
        v[k].key = (k * %(mul)d + %(i)d) %% 97;
        v[k].weight = sqrt((double)k + %(i)d);
        snprintf(v[k].label, sizeof v[k].label, "u%(i)d-%%d", k);
    }
    qsort(v, (size_t)n, sizeof *v, cmp_%(i)d);
    for (int k = 0; k < n; k++)
        sum += v[k].key + (int)strlen(v[k].label) + COMMON_BIAS;
    free(v);
    return sum;
}
"""


class TrueWorkload(Workload):
    """/bin/true: the fixed start-up and tear-down cost of each tool."""
    name = "true"
    compare_stdout = True

    def command(self):
        return ["/bin/true"]


class MakeWorkload(Workload):
    name = "make"

    def prepare(self):
        n = self.args.c_files
        self.cwd = os.path.join(self.root, "cbuild")
        os.makedirs(self.cwd)
        with open(os.path.join(self.cwd, "common.h"), "w") as f:
            f.write("#define COMMON_BIAS 3\n")
            f.write("".join(f"int unit_{i}(int n);\n" for i in range(n)))
        for i in range(n):
            with open(os.path.join(self.cwd, f"unit{i}.c"), "w") as f:
                f.write(C_UNIT % {"i": i, "mul": 7 + 2 * i})
        with open(os.path.join(self.cwd, "main.c"), "w") as f:
            f.write('#include <stdio.h>\n#include "common.h"\nint main(void)\n{\n    long s = 0;\n')
            f.write("".join(f"    s += unit_{i}(50);\n" for i in range(n)))
            f.write('    printf("%ld\\n", s);\n    return 0;\n}\n')
        objs = " ".join(f"unit{i}.o" for i in range(n))
        with open(os.path.join(self.cwd, "Makefile"), "w") as f:
            f.write("CC = gcc\nCFLAGS = -O2 -Wall\n")
            f.write(f"OBJS = main.o {objs}\n\n")
            f.write("prog: $(OBJS)\n\t$(CC) -o $@ $(OBJS) -lm\n\n")
            f.write("%.o: %.c common.h\n\t$(CC) $(CFLAGS) -c -o $@ $<\n\n")
            f.write("clean:\n\trm -f prog $(OBJS)\n")

    def reset(self):
        subprocess.run(["make", "-s", "clean"], cwd=self.cwd, check=True,
                       stdout=subprocess.DEVNULL)

    def command(self):
        return ["make", "-s", "-j2"]

    def describe(self):
        return f"make -s -j2  ({self.args.c_files} C files + main.c, gcc -O2, link)"


class FindWorkload(Workload):
    name = "find"
    compare_stdout = True

    def command(self):
        return ["find", self.args.find_root, "-name", "*.h"]

    def describe(self):
        return f"find {self.args.find_root} -name '*.h'"


class GitWorkload(Workload):
    name = "git"
    compare_stdout = True

    def prepare(self):
        n = self.args.git_files
        self.cwd = os.path.join(self.root, "gitrepo")
        os.makedirs(self.cwd)
        per_dir = 50
        for i in range(n):
            d = os.path.join(self.cwd, f"dir{i // per_dir:03d}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, f"file{i:05d}.txt"), "w") as f:
                f.write(f"file {i}\n" + "x" * (i % 200) + "\n")
        git = ["git", "-C", self.cwd]
        quiet = {"stdout": subprocess.DEVNULL, "check": True}
        subprocess.run(git + ["init", "-q"], **quiet)
        subprocess.run(git + ["config", "user.name", "umview bench"], **quiet)
        subprocess.run(git + ["config", "user.email", "bench@umview.invalid"], **quiet)
        subprocess.run(git + ["config", "commit.gpgsign", "false"], **quiet)
        subprocess.run(git + ["add", "-A"], **quiet)
        subprocess.run(git + ["commit", "-q", "-m", "bench files"], **quiet)
        # one untracked and one modified file so that status has something to say
        with open(os.path.join(self.cwd, "untracked.txt"), "w") as f:
            f.write("new\n")
        with open(os.path.join(self.cwd, "dir000", "file00000.txt"), "a") as f:
            f.write("changed\n")
        subprocess.run(git + ["status"], **quiet)  # refresh the index once

    def command(self):
        return ["git", "status"]

    def describe(self):
        return f"git status  (repository of {self.args.git_files} committed files)"


class PyImportWorkload(Workload):
    name = "pyimport"
    compare_stdout = True

    def command(self):
        return [self.args.python, "-c", PY_IMPORTS]

    def describe(self):
        return f"{self.args.python} -c '{PY_IMPORTS}'"


class PyTestWorkload(Workload):
    name = "pytest"

    def command(self):
        return [self.args.python, "-m", "test", "-q"] + self.args.py_tests

    def missing(self):
        mods = ",".join("test." + t for t in self.args.py_tests)
        probe = subprocess.run([self.args.python, "-c", f"import {mods}"], capture_output=True)
        if probe.returncode:
            return (f"{self.args.python} lacks the regression tests (on Debian they are in "
                    "libpython3.X-testsuite)")
        return None

    def describe(self):
        return " ".join(self.command())


class RegrtestWorkload(PyTestWorkload):
    name = "regrtest"

    def command(self):
        return [self.args.python, "-m", "test", "-q"] + (REGRTESTS[-2:] if self.args.quick else REGRTESTS)


NET_CLIENT = r"""
import socket, sys, threading
n = int(sys.argv[1])
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(64)
def serve():
    for _ in range(n):
        c, _ = srv.accept()
        c.sendall(c.recv(64))
        c.close()
threading.Thread(target=serve, daemon=True).start()
total = 0
for _ in range(n):
    s = socket.create_connection(srv.getsockname())
    s.sendall(b"ping")
    total += len(s.recv(64))
    s.close()
print(total)
"""


class NetWorkload(Workload):
    name = "net"
    compare_stdout = True

    def command(self):
        n = 200 if self.args.quick else 2000
        return [self.args.python, "-c", NET_CLIENT, str(n)]

    def describe(self):
        return "python: a loopback echo server and N connections (socket, connect, send, recv, close)"


WORKLOAD_CLASSES = {c.name: c for c in (TrueWorkload, MakeWorkload, FindWorkload, GitWorkload,
                                        PyImportWorkload, PyTestWorkload, RegrtestWorkload, NetWorkload)}


# --------------------------------------------------------------------------
# configurations
# --------------------------------------------------------------------------

class Config:
    def __init__(self, name, prefix, tool, spin=None):
        self.name = name
        self.prefix = prefix  # list, or a callable(stats_file) -> list
        self.tool = tool
        self.spin = spin
        self.umview = callable(prefix)

    def argv(self, cmd, stats_file):
        prefix = self.prefix(stats_file) if self.umview else self.prefix
        return prefix + cmd


def build_configs(args):
    wanted = args.configs
    configs, notes = [], []
    umview = args.umview
    for name in wanted:
        if name == "native":
            configs.append(Config("native", [], None))
        elif name in ("umview", "umview-null", "umview-unreal", "umview-cow", "umview-vnet", "umview-strace"):
            if not umview:
                notes.append(f"{name}: skipped, no umview found (build the venv or pass --umview)")
                continue
            builds = [(umview, "")] + ([(args.baseline, "@base")] if args.baseline else [])
            for (build, tag), spin in ((b, s) for b in builds for s in args.spin):
                label = (name if len(args.spin) == 1 else f"{name}/spin={spin}") + tag

                def prefix(stats_file, name=name, spin=spin, umview=build):
                    p = [umview, "--stats-file", stats_file]
                    if spin:
                        p += ["--spin", str(spin)]
                    if name == "umview-null":
                        p += ["--engine", NULL_ENGINE]
                    elif name == "umview-unreal":
                        p += ["-p", "unreal"]
                    elif name == "umview-cow":
                        # a fresh layer per run, next to the stats file (removed with it)
                        layer = tempfile.mkdtemp(prefix="layer-", dir=os.path.dirname(stats_file))
                        p += ["-p", f"viewfs,mount={layer}:/:cow"]
                    elif name == "umview-vnet":
                        p += ["-p", "vnet,private"]
                    elif name == "umview-strace":
                        return p + ["--", shutil.which("strace") or "strace", "-f", "-o", "/dev/null"]
                    return p + ["--"]

                configs.append(Config(label, prefix, build, spin))
        elif name == "proot":
            tool = shutil.which("proot")
            if not tool:
                notes.append("proot: skipped, not installed (apt-get install proot)")
                continue
            configs.append(Config("proot", [tool], tool))
        elif name == "proot-b":
            tool = shutil.which("proot")
            if not tool:
                notes.append("proot-b: skipped, not installed (apt-get install proot)")
                continue
            configs.append(Config("proot-b", [tool, "-b", "/etc:/etc"], tool))
        elif name == "unshare-net":
            tool = shutil.which("unshare")
            if not tool:
                notes.append("unshare-net: skipped, no unshare(1)")
                continue
            configs.append(Config("unshare-net", [tool, "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"],
                                  tool))
        elif name == "strace":
            tool = shutil.which("strace")
            if not tool:
                notes.append("strace: skipped, not installed (apt-get install strace)")
                continue
            configs.append(Config("strace", [tool, "-f", "-o", "/dev/null"], tool))
        else:
            raise SystemExit(f"unknown configuration {name!r}; choose from {', '.join(ALL_CONFIGS)}")
    return configs, notes


# --------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------

def run_once(argv, cwd, env, timeout, out_path):
    """Run argv, stdout to out_path; wall seconds, CPU seconds, exit code, stderr tail."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=timeout)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            code = "timeout"
        wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, code, err[-2000:].decode(errors="replace")


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_stats(path):
    try:
        with open(path) as f:
            lines = [ln for ln in f if ln.strip()]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def bench(args, workloads, configs, scratch):
    env = dict(os.environ, LC_ALL="C", TMPDIR=os.path.join(scratch, "tmp"))
    os.makedirs(env["TMPDIR"], exist_ok=True)
    results = {w.name: {c.name: {"wall": [], "cpu": [], "stats": [], "failures": []}
                        for c in configs} for w in workloads}
    reference = {}
    out_path = os.path.join(scratch, "stdout")
    stats_path = os.path.join(scratch, "stats.jsonl")

    # warm-up: one native run per workload (page cache, pyc, git index), its
    # stdout and exit status (a test suite may fail natively: the same is expected)
    native_code = {}
    for w in workloads:
        w.reset()
        _, _, code, err = run_once(w.command(), w.cwd, env, args.timeout, out_path)
        if code != 0:
            print(f"warning: {w.name} fails natively (exit {code}; the same exit is expected of the "
                  f"others): {err.strip()[-300:]}", file=sys.stderr)
        reference[w.name] = digest(out_path)
        native_code[w.name] = code

    for rnd in range(args.repeat):
        for w in workloads:
            k = rnd % len(configs)
            order = configs[k:] + configs[:k]
            for c in order:
                w.reset()
                if os.path.exists(stats_path):
                    os.unlink(stats_path)
                argv = c.argv(w.command(), stats_path)
                wall, cpu, code, err = run_once(argv, w.cwd, env, args.timeout, out_path)
                r = results[w.name][c.name]
                problem = None
                if code != native_code[w.name]:
                    problem = f"exit {code} (native: {native_code[w.name]}): {err.strip()[-300:]}"
                elif w.compare_stdout and digest(out_path) != reference[w.name]:
                    problem = "stdout differs from native"
                if problem:
                    r["failures"].append(problem)
                    print(f"  ! {w.name} under {c.name}: {problem}", file=sys.stderr)
                if code == "timeout":
                    continue
                r["wall"].append(wall)
                r["cpu"].append(cpu)
                if c.umview:
                    st = read_stats(stats_path)
                    if st:
                        r["stats"].append({k2: st.get(k2) for k2 in STAT_KEYS})
                if args.verbose:
                    print(f"  round {rnd + 1} {w.name:9} {c.name:22} {wall:8.3f}s", file=sys.stderr)
        print(f"round {rnd + 1}/{args.repeat} done", file=sys.stderr)
    return results


# --------------------------------------------------------------------------
# reporting
# --------------------------------------------------------------------------

def median(xs):
    return statistics.median(xs) if xs else None


def paired(xs, ys):
    """Median over rounds of x/y in the same round (the configurations of one
    workload run back to back, so a burst of outside load hits both)."""
    if not xs or len(xs) != len(ys):
        return None
    return statistics.median(x / y for x, y in zip(xs, ys))


def summarize(results, configs):
    summary = {}
    for wname, per in results.items():
        native = median(per.get("native", {}).get("wall", []))
        proot = median(per.get("proot", {}).get("wall", []))
        native_min = min(per.get("native", {}).get("wall", []) or [0]) or None
        s = {}
        for c in configs:
            r = per[c.name]
            m = median(r["wall"])
            lo = min(r["wall"]) if r["wall"] else None
            row = {"median_s": m, "min_s": lo, "runs": len(r["wall"]), "cpu_median_s": median(r["cpu"]),
                   "ratio_native_min": (lo / native_min) if (lo and native_min) else None,
                   "ratio_native": (m / native) if (m and native) else None,
                   "ratio_proot": (m / proot) if (m and proot) else None,
                   "ratio_proot_paired": paired(r["wall"], per.get("proot", {}).get("wall", [])),
                   "failures": r["failures"]}
            if r["stats"]:
                row["stats"] = {k: median([x[k] for x in r["stats"] if x.get(k) is not None])
                                for k in STAT_KEYS}
            s[c.name] = row
        summary[wname] = s
    return summary


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def print_report(summary, configs, workloads, notes):
    print()
    print("Median wall-clock seconds; median over native's median in the same run; fastest run")
    print("over native's fastest (min/min: less sensitive to other load); median over PRoot's;")
    print("paired: median over rounds of the ratio to PRoot's run in the same round.")
    print()
    names = [c.name for c in configs]
    width = max(12, max(len(n) for n in names) + 2)
    print(f"{'workload':10}" + "".join(f"{n:>{width}}" for n in names))
    for w in workloads:
        s = summary[w.name]
        print(f"{w.name:10}" + "".join(f"{fmt(s[n]['median_s'], '.3f') + 's':>{width}}" for n in names))
        print(f"{'  x native':10}" + "".join(f"{fmt(s[n]['ratio_native'], '.2f') + 'x':>{width}}" for n in names))
        print(f"{'  min/min':10}" + "".join(f"{fmt(s[n]['ratio_native_min'], '.2f') + 'x':>{width}}" for n in names))
        if any(s[n]["ratio_proot"] is not None for n in names):
            print(f"{'  x proot':10}" + "".join(f"{fmt(s[n]['ratio_proot'], '.2f') + 'x':>{width}}" for n in names))
            print(f"{'  paired':10}" + "".join(f"{fmt(s[n]['ratio_proot_paired'], '.2f') + 'x':>{width}}" for n in names))
    umv = [c for c in configs if c.umview]
    if umv:
        print()
        print("umview counters (median per run): processes, ptrace stops, calls trapped by a")
        print("ptrace stop, calls trapped by a user notification, resumed by C without Python,")
        print("events handed to Python, virtualized (skipped), exit stops")
        print()
        print(f"{'workload':10}{'config':>24}{'procs':>8}{'stops':>10}{'trap-pt':>10}{'trap-nt':>10}"
              f"{'C-only':>10}{'python':>8}{'virt':>6}{'exit':>6}")
        for w in workloads:
            for c in umv:
                st = summary[w.name][c.name].get("stats")
                if not st:
                    continue
                print(f"{w.name:10}{c.name:>24}{fmt(st['processes'], '.0f'):>8}{fmt(st['stops'], '.0f'):>10}"
                      f"{fmt(st['seccomp_stops'], '.0f'):>10}{fmt(st.get('notifications', 0), '.0f'):>10}"
                      f"{fmt(st['fast_continue'], '.0f'):>10}"
                      f"{fmt(st['python_events'], '.0f'):>8}{fmt(st['skipped'], '.0f'):>6}"
                      f"{fmt(st['exit_stops'], '.0f'):>6}")
    failures = [(w.name, n, f) for w in workloads for n in names for f in summary[w.name][n]["failures"]]
    if failures:
        print()
        print("FAILURES (the workload failed or its output differed from native):")
        for wname, n, f in failures:
            print(f"  {wname} under {n}: {f}")
    for note in notes:
        print(f"note: {note}")


# --------------------------------------------------------------------------
# syscall profile (strace -f -c, natively)
# --------------------------------------------------------------------------

def profile(workloads, scratch, args, top=8):
    """The syscalls each workload makes natively, by count (strace -f -c)."""
    strace = shutil.which("strace")
    if not strace:
        print("note: --profile needs strace")
        return {}
    env = dict(os.environ, LC_ALL="C", TMPDIR=os.path.join(scratch, "tmp"))
    prof = {}
    print()
    print(f"Syscall profile (strace -f -c, native), top {top} by number of calls:")
    for w in workloads:
        w.reset()
        out = os.path.join(scratch, "strace.txt")
        run_once([strace, "-f", "-c", "-o", out] + w.command(), w.cwd, env, args.timeout,
                 os.path.join(scratch, "stdout"))
        rows, total = [], None
        with open(out) as f:
            for line in f:
                parts = line.split()
                if not parts or parts[0].startswith(("%", "-")):
                    continue
                # % time, seconds, usecs/call, calls, [errors], syscall
                if parts[-1] == "total":
                    total = int(parts[3])
                    continue
                if len(parts) >= 5 and re.fullmatch(r"\d+", parts[3]):
                    rows.append((parts[-1], int(parts[3])))
        rows.sort(key=lambda r: -r[1])
        prof[w.name] = {"total": total, "top": rows[:top]}
        tops = ", ".join(f"{n} {c}" for n, c in rows[:top])
        print(f"  {w.name:9} total {total}: {tops}")
    return prof


# --------------------------------------------------------------------------

def find_umview():
    local = os.path.join(REPO, ".venv", "bin", "umview")
    if os.access(local, os.X_OK):
        return local
    return shutil.which("umview")


def default_python():
    """A real interpreter, not a pyenv shim (a bash script that spawns several
    processes before the interpreter starts)."""
    venv_py = os.path.join(REPO, ".venv", "bin", "python3")
    cand = venv_py if os.path.exists(venv_py) else sys.executable
    return os.path.realpath(cand)


def machine_info():
    info = {"kernel": platform.release(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "loadavg": "%.2f %.2f %.2f" % os.getloadavg()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        with open("/etc/debian_version") as f:
            info["debian"] = f.read().strip()
    except OSError:
        pass
    for tool, flag in (("proot", "--version"), ("strace", "-V"), ("gcc", "--version"),
                       ("git", "--version")):
        path = shutil.which(tool)
        if path:
            out = subprocess.run([path, flag], capture_output=True, text=True).stdout
            m = re.search(r"\d+\.\d+(\.\d+)*", out)
            info[tool] = m.group(0) if m else "?"
    return info


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="workloads: " + ", ".join(ALL_WORKLOADS)
                                + "; configurations: " + ", ".join(ALL_CONFIGS))
    p.add_argument("--only", default=",".join(ALL_WORKLOADS),
                   help="comma-separated workloads to run (default: all)")
    p.add_argument("--configs", default=",".join(ALL_CONFIGS),
                   help="comma-separated configurations (default: all)")
    p.add_argument("--repeat", type=int, default=None, help="rounds (default 5, --quick 1)")
    p.add_argument("--spin", default="0",
                   help="value(s) for umview --spin; a comma-separated list makes one "
                   "umview configuration per value (default 0)")
    p.add_argument("--quick", action="store_true",
                   help="one round, smaller workloads: a smoke test")
    p.add_argument("--json", metavar="OUT", help="write all timings and counters to OUT")
    p.add_argument("--profile", action="store_true",
                   help="also count each workload's syscalls natively with strace -f -c")
    p.add_argument("--umview", default=find_umview(), help="the umview command (default: %(default)s)")
    p.add_argument("--baseline", metavar="UMVIEW",
                   help="another umview command (an older build) run in every umview configuration "
                        "too, labelled NAME@base: before/after figures from one run")
    p.add_argument("--python", default=default_python(),
                   help="interpreter for pyimport and pytest (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=None, help="seconds per run (default 600, --quick 60)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    p.add_argument("-v", "--verbose", action="store_true", help="print every run")
    args = p.parse_args(argv)
    args.only = [w for w in args.only.split(",") if w]
    for w in args.only:
        if w not in ALL_WORKLOADS:
            p.error(f"unknown workload {w!r}; choose from {', '.join(ALL_WORKLOADS)}")
    args.configs = [c for c in args.configs.split(",") if c]
    args.spin = [int(s) for s in args.spin.split(",") if s]
    if args.repeat is None:
        args.repeat = 1 if args.quick else 5
    if args.timeout is None:
        args.timeout = 60 if args.quick else 600
    args.c_files = 12 if args.quick else 60
    args.git_files = 200 if args.quick else 1500
    args.find_root = "/usr/include" if args.quick else "/usr"
    args.py_tests = PY_TESTS_QUICK if args.quick else PY_TESTS
    return args


def main(argv=None):
    sys.stdout.reconfigure(line_buffering=True)
    args = parse_args(argv)
    configs, notes = build_configs(args)
    if not configs:
        raise SystemExit("no configuration to run")
    if "native" not in [c.name for c in configs]:
        notes.append("no native configuration: ratios to native are not available")
    scratch = tempfile.mkdtemp(prefix="umview-bench-")
    try:
        workloads = []
        for n in args.only:
            w = WORKLOAD_CLASSES[n](scratch, args)
            why = w.missing()
            if why:
                notes.append(f"{n}: skipped, {why}")
            else:
                workloads.append(w)
        if not workloads:
            raise SystemExit("no workload to run: " + "; ".join(notes))
        for w in workloads:
            w.prepare()
        info = machine_info()
        print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()))
        print(f"umview: {args.umview}   python workloads: {args.python}")
        print(f"rounds: {args.repeat}   spin: {','.join(map(str, args.spin))}"
              f"   configurations: {', '.join(c.name for c in configs)}")
        for w in workloads:
            print(f"  {w.name:9} {w.describe()}")
        t0 = time.time()
        results = bench(args, workloads, configs, scratch)
        summary = summarize(results, configs)
        print_report(summary, configs, workloads, notes)
        prof = profile(workloads, scratch, args) if args.profile else None
        print(f"\ntotal time {time.time() - t0:.0f} s; load average at the end {os.getloadavg()}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"command": [sys.executable] + sys.argv, "machine": info,
                           "python": args.python, "umview": args.umview, "rounds": args.repeat,
                           "spin": args.spin,
                           "workloads": {w.name: w.describe() for w in workloads},
                           "summary": summary, "raw": results, "profile": prof,
                           "notes": notes}, f, indent=1)
    finally:
        if args.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 1 if any(summary[w.name][c.name]["failures"] for w in workloads for c in configs) else 0


if __name__ == "__main__":
    sys.exit(main())
