#!/usr/bin/env python3
"""Compare umview with native, PRoot and strace on real workloads, in one run.

    python3 bench/run.py                      # full run (about 20 minutes)
    python3 bench/run.py --quick --only find  # smoke test (seconds)
    python3 bench/run.py --only fs-true,fs-tar,fs-read --configs fuse-native,umview-fs --cache /var/tmp/ub
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
  umview-sandbox  umview --sandbox: a cow view of / in a fresh layer, a
               private /tmp, no network, the guard module
  umview-vnet  umview -p vnet,private: a network namespace of the view's own
               (for the net workload)
  proot        Debian's proot, rootfs /, no options
  proot-b      proot -b /etc:/etc: PRoot with one bind, that it translates
               on every path (the closest PRoot has to a mounted view)
  strace       strace -f -o /dev/null
  umview-strace  umview -- strace -f -o /dev/null: strace inside a view, on the
               ptrace the monitor emulates (compare with strace)
  strace-floor  strace -f -o /dev/null under bench/notifloor.c trapping
               strace's ptrace and wait4 calls (each answered CONTINUE at
               once): the least an emulated ptrace built on seccomp user
               notifications adds to native strace -f, before any work of
               its own (the floor for umview-strace; built with gcc)
  unshare-net  unshare -rn with lo up: the kernel's own private network, the
               floor for umview-vnet (for the net workload)
  notif-floor  bench/notifloor.c: the path calls trapped by seccomp user
               notifications (with SYNC_WAKE_UP), each answered CONTINUE at
               once, reading nothing: the least any monitor built on them can
               cost, the floor for umview-unreal (built with gcc)
  umview-rootfs  umview -r ROOTFS (--rootfs: a root tree with the workload's
               tools, e.g. debootstrap --variant=minbase --include=make,gcc,
               libc6-dev,git), the bench's directory kept the host's
  proot-rootfs   proot -R ROOTFS -b the bench's directory: the same for PRoot

Configurations of the fs workloads (a disk image mounted; these run only the
fs workloads, and the fs workloads run only under them):
  fuse-native  the image mounted natively with fuse2fs -o ro (a fresh mount
               for every run, made and unmounted outside the timed run), the
               workload run on it: what ratios of fs workloads are over
  umview-fs    umview -p fs,mount=IMAGE:MOUNTPOINT,ro: the view mounts the
               image in its mount helper (start, mount and unmount are in the
               timed run: the fs-true workload measures them alone)
  umview-unreal-on-native  umview -p unreal on the native mount: the cost of
               any path module, to tell it from what the fs module adds
  umview-null-on-native  the null engine on the native mount: the fast path's
               cost alone (every path call trapped, resumed by C)
  proot-on-native  proot on the native mount
  fuse-native-1cpu, umview-fs-1cpu  the same as fuse-native and umview-fs,
               with every process on CPU 0 (taskset -c 0 on the FUSE server,
               the workload, umview and so its mount helper): no wake-up
               crosses CPUs

Standard library only. Workloads are prepared in a temporary directory that
is removed at the end (--keep keeps it); the fs workloads' image is made once
per run there, or kept in --cache DIR between runs.
"""
import argparse
import atexit
import contextlib
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

FS_CONFIGS = ("fuse-native", "umview-fs", "umview-unreal-on-native", "umview-null-on-native", "proot-on-native",
              "fuse-native-1cpu", "umview-fs-1cpu")
ONE_CPU = ["taskset", "-c", "0"]
ALL_CONFIGS = ("native", "umview", "umview-null", "umview-unreal", "umview-cow", "umview-sandbox", "umview-vnet", "proot",
               "proot-b", "strace", "umview-strace", "strace-floor", "unshare-net", "notif-floor") + FS_CONFIGS
ALL_WORKLOADS = ("true", "make", "find", "git", "pyimport", "pytest", "regrtest", "net",
                 "fs-true", "fs-tar", "fs-read")

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
    #: the configurations it runs under (Config.kind), and the one its ratios are over
    kind = "plain"
    reference = "native"
    #: a workload of the same kind that measures the fixed start-up of each
    #: configuration, taken off for the "net" ratio
    startup = None

    def __init__(self, root, args):
        self.root = root
        self.args = args
        self.cwd = root

    def prepare(self):
        pass

    def session(self, config):
        """A context around one run under config (None: the native warm-up
        and profile runs), outside the timed run."""
        return contextlib.nullcontext()

    def own_seconds(self, stderr):
        """The time the command says its own work took (dd does), or None."""
        return None

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


class FsImage:
    """The ext4 image (no journal) the fs workloads share: DIRS x 100 small
    files under files/ and one file of BIG_MB MiB, big. Made once with
    mkfs.ext4 -d from a tree staged next to it (the image file is sparse:
    only what the tree holds is written), then reused: in the run's
    temporary directory, or kept in --cache DIR between runs."""

    PER_DIR = 100

    def __init__(self, where, files, big_mb):
        self.dirs = max(1, files // self.PER_DIR)
        self.files = self.dirs * self.PER_DIR
        self.big_mb = big_mb
        self.path = os.path.join(where, f"fs-{self.files}files-{big_mb}M.ext4")

    def make(self):
        if os.path.exists(self.path):
            return
        stage = self.path + ".tree"
        shutil.rmtree(stage, ignore_errors=True)
        for d in range(self.dirs):
            sub = os.path.join(stage, "files", f"d{d:03d}")
            os.makedirs(sub)
            for i in range(self.PER_DIR):
                with open(os.path.join(sub, f"f{i:03d}"), "w") as f:
                    f.write(f"file {d}/{i}\n" * (1 + i % 40))
        block = os.urandom(1 << 20)
        with open(os.path.join(stage, "big"), "wb") as f:
            for _ in range(self.big_mb):
                f.write(block)
        # room for the data, a 4 KiB block a small file, and mkfs's metadata
        size_mb = self.big_mb + self.files * 8 // 1024 + 64
        tmp = self.path + ".tmp"
        try:
            subprocess.run(["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-N", str(self.files * 5 // 4 + 1024),
                            "-d", stage, tmp, f"{size_mb}M"], check=True, stdout=subprocess.DEVNULL)
            os.rename(tmp, self.path)  # only a whole image is reused
        finally:
            shutil.rmtree(stage, ignore_errors=True)
            if os.path.exists(tmp):
                os.unlink(tmp)

    def describe(self):
        return f"ext4 image, {self.files:,} files in {self.dirs} directories + one {self.big_mb} MiB file"


def mount_count(mountpoint):
    """How many mounts /proc/self/mountinfo lists at mountpoint."""
    esc = mountpoint.replace("\\", "\\134").replace(" ", "\\040")
    with open("/proc/self/mountinfo") as f:
        return sum(1 for line in f if line.split(" ", 5)[4] == esc)


@contextlib.contextmanager
def fuse_mounted(image, mountpoint, prefix=(), timeout=60):
    """image mounted read-only on mountpoint by fuse2fs (run in the
    foreground, as this process's child, after prefix: taskset...) for the
    with block; unmounted and its server gone after it, whatever happens."""
    before = mount_count(mountpoint)
    server = subprocess.Popen([*prefix, "fuse2fs", image, mountpoint, "-f", "-o", "ro"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout
        while mount_count(mountpoint) == before:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"fuse2fs did not mount {image} on {mountpoint} (exit {server.returncode})")
            time.sleep(0.005)
        yield mountpoint
    finally:
        fusermount = shutil.which("fusermount") or shutil.which("fusermount3") or "fusermount"
        if mount_count(mountpoint) > before:
            if subprocess.run([fusermount, "-u", mountpoint], stderr=subprocess.DEVNULL).returncode:
                subprocess.run([fusermount, "-uz", mountpoint])  # busy: detach it
        try:
            server.wait(timeout)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


class FsWorkload(Workload):
    """A workload on the fs image, mounted natively (fuse2fs) or in the view
    (umview-fs) at the same mount point."""
    kind = "fs"
    reference = "fuse-native"
    startup = "fs-true"

    def __init__(self, root, args):
        super().__init__(root, args)
        if args.fs_image is None:
            files, big_mb = (2000, 64) if args.quick else (20000, 1024)
            args.fs_image = FsImage(args.cache or root, files, big_mb)
        self.image = args.fs_image
        self.mountpoint = os.path.join(root, "mnt")

    def missing(self):
        for tool in ("fuse2fs", "mkfs.ext4"):
            if not shutil.which(tool):
                return f"no {tool} (apt-get install fuse2fs e2fsprogs)"
        if not (shutil.which("fusermount") or shutil.which("fusermount3")):
            return "no fusermount (apt-get install fuse3)"
        if not os.access("/dev/fuse", os.R_OK | os.W_OK):
            return "/dev/fuse is not usable here"
        return None

    def prepare(self):
        self.image.make()
        os.makedirs(self.mountpoint, exist_ok=True)

    def session(self, config):
        if config is None or config.native_mount:
            return fuse_mounted(self.image.path, self.mountpoint, config.pin if config else ())
        return contextlib.nullcontext()


class FsTrueWorkload(FsWorkload):
    """/bin/true with the image mounted: under umview-fs, the view's start,
    its mount helper, fuse2fs mounting the image and the unmount at the end
    (fuse-native mounts outside the timed run)."""
    name = "fs-true"
    startup = None

    def command(self):
        return ["/bin/true"]

    def describe(self):
        return f"/bin/true with the image mounted ({self.image.describe()})"


class FsTarWorkload(FsWorkload):
    """GNU tar of the tree to /dev/null: with /dev/null as the archive tar
    reads no file's data, so this is the stats and directory reads; -v
    lists the files, compared with the native listing."""
    name = "fs-tar"
    compare_stdout = True

    def command(self):
        return ["tar", "-C", self.mountpoint, "-cvf", "/dev/null", "files"]

    def describe(self):
        return f"tar -C MNT -cvf /dev/null files  ({self.image.files:,} files in {self.image.dirs} directories)"


class FsReadWorkload(FsWorkload):
    """dd of the big file: its own time (what it prints: from its open to
    its last read) is the throughput, without start-up, mount and unmount
    (an unmount after reading 1 GiB spends 0.2 s dropping its page cache:
    in the timed run for umview-fs, outside it for fuse-native)."""
    name = "fs-read"

    def command(self):
        return ["dd", f"if={self.mountpoint}/big", "of=/dev/null", "bs=1M"]

    def own_seconds(self, stderr):
        m = re.search(r"bytes .* copied, ([0-9.]+) s", stderr)
        return float(m.group(1)) if m else None

    def describe(self):
        return f"dd if=MNT/big of=/dev/null bs=1M  (one {self.image.big_mb} MiB file)"


WORKLOAD_CLASSES = {c.name: c for c in (TrueWorkload, MakeWorkload, FindWorkload, GitWorkload,
                                        PyImportWorkload, PyTestWorkload, RegrtestWorkload, NetWorkload,
                                        FsTrueWorkload, FsTarWorkload, FsReadWorkload)}


# --------------------------------------------------------------------------
# configurations
# --------------------------------------------------------------------------

class Config:
    def __init__(self, name, prefix, tool, spin=None, native_mount=False, pin=()):
        self.name = name
        self.prefix = prefix  # list, or a callable(stats_file, workload) -> list
        self.tool = tool
        self.spin = spin
        self.umview = callable(prefix)
        #: which workloads it runs (Workload.kind)
        self.kind = "fs" if name.split("/")[0].split("@")[0] in FS_CONFIGS else "plain"
        #: an fs workload's image mounted natively around each run (Workload.session),
        #: its server run after pin (taskset ...)
        self.native_mount = native_mount
        self.pin = pin

    def argv(self, workload, stats_file):
        prefix = self.prefix(stats_file, workload) if self.umview else self.prefix
        return prefix + workload.command()


def build_notifloor():
    """bench/notifloor.c compiled into a directory removed at exit: (path, None),
    or (None, why not)."""
    gcc = shutil.which("gcc")
    if not gcc:
        return None, "no gcc to build bench/notifloor.c"
    where = tempfile.mkdtemp(prefix="umview-notifloor-")
    atexit.register(shutil.rmtree, where, True)
    tool = os.path.join(where, "notifloor")
    r = subprocess.run([gcc, "-O2", "-pthread", "-o", tool, os.path.join(HERE, "notifloor.c")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, "bench/notifloor.c does not build here: " + r.stderr.strip().splitlines()[-1]
    return tool, None


def build_configs(args):
    wanted = args.configs
    configs, notes = [], []
    umview = args.umview
    for name in wanted:
        if name == "native":
            configs.append(Config("native", [], None))
        elif name in ("fuse-native", "fuse-native-1cpu"):
            pin = ONE_CPU if name.endswith("-1cpu") else []
            configs.append(Config(name, pin, None, native_mount=True, pin=pin))
        elif name in ("umview", "umview-null", "umview-unreal", "umview-cow", "umview-sandbox", "umview-vnet",
                      "umview-strace",
                      "umview-fs", "umview-unreal-on-native", "umview-null-on-native", "umview-fs-1cpu"):
            if not umview:
                notes.append(f"{name}: skipped, no umview found (build the venv or pass --umview)")
                continue
            builds = [(umview, "")] + ([(args.baseline, "@base")] if args.baseline else [])
            for (build, tag), spin in ((b, s) for b in builds for s in args.spin):
                label = (name if len(args.spin) == 1 else f"{name}/spin={spin}") + tag

                def prefix(stats_file, workload, name=name, spin=spin, umview=build):
                    p = (ONE_CPU if name.endswith("-1cpu") else []) + [umview, "--stats-file", stats_file]
                    if spin:
                        p += ["--spin", str(spin)]
                    if name in ("umview-null", "umview-null-on-native"):
                        p += ["--engine", NULL_ENGINE]
                    elif name in ("umview-unreal", "umview-unreal-on-native"):
                        p += ["-p", "unreal"]
                    elif name in ("umview-fs", "umview-fs-1cpu"):
                        p += ["-p", f"fs,mount={workload.image.path}:{workload.mountpoint},ro"]
                    elif name == "umview-cow":
                        # a fresh layer per run, next to the stats file (removed with it)
                        layer = tempfile.mkdtemp(prefix="layer-", dir=os.path.dirname(stats_file))
                        p += ["-p", f"viewfs,mount={layer}:/:cow"]
                    elif name == "umview-sandbox":
                        # its own fresh layer, private /tmp, no network; the
                        # workload's temporary files go to that /tmp, as a
                        # user's would (TMPDIR names the bench's directory)
                        return p + ["--sandbox", "--", "env", "TMPDIR=/tmp"]
                    elif name == "umview-vnet":
                        p += ["-p", "vnet,private"]
                    elif name == "umview-strace":
                        return p + ["--", shutil.which("strace") or "strace", "-f", "-o", "/dev/null"]
                    return p + ["--"]

                configs.append(Config(label, prefix, build, spin, native_mount=name.endswith("-on-native")))
        elif name in ("proot", "proot-on-native"):
            tool = shutil.which("proot")
            if not tool:
                notes.append(f"{name}: skipped, not installed (apt-get install proot)")
                continue
            configs.append(Config(name, [tool], tool, native_mount=name == "proot-on-native"))
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
        elif name in ("umview-rootfs", "proot-rootfs"):
            tool = umview if name == "umview-rootfs" else shutil.which("proot")
            if not args.rootfs or not tool:
                notes.append(f"{name}: skipped, " + ("no --rootfs given" if not args.rootfs else
                                                     "no umview or proot found"))
                continue
            if name == "proot-rootfs":
                configs.append(Config(name, [tool, "-R", args.rootfs, "-b", args.dir], tool))
                continue

            def prefix(stats_file, workload, umview=umview):
                home = os.environ.get("HOME", "/root")
                keep = ["/proc", "/sys", "/dev", "/tmp", "/run", "/etc/resolv.conf", "/etc/hosts", home, args.dir]
                return [umview, "--stats-file", stats_file, "-r", args.rootfs, "--host-paths", ":".join(keep), "--"]

            configs.append(Config(name, prefix, umview))
        elif name == "notif-floor":
            tool, why = build_notifloor()
            if not tool:
                notes.append(f"notif-floor: skipped, {why}")
                continue
            configs.append(Config("notif-floor", [tool, "--"], tool))
        elif name == "strace-floor":
            tool, why = build_notifloor()
            strace = shutil.which("strace")
            if not tool or not strace:
                notes.append(f"strace-floor: skipped, {why or 'strace not installed (apt-get install strace)'}")
                continue
            configs.append(Config("strace-floor", [tool, "-s", "ptrace,wait4", "--", strace, "-f", "-o", "/dev/null"],
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
    results = {w.name: {c.name: {"wall": [], "cpu": [], "own": [], "stats": [], "failures": []}
                        for c in configs} for w in workloads}
    reference = {}
    out_path = os.path.join(scratch, "stdout")
    stats_path = os.path.join(scratch, "stats.jsonl")

    # warm-up: one native run per workload (page cache, pyc, git index), its
    # stdout and exit status (a test suite may fail natively: the same is expected)
    native_code = {}
    for w in workloads:
        w.reset()
        with w.session(None):
            _, _, code, err = run_once(w.command(), w.cwd, env, args.timeout, out_path)
        if code != 0:
            print(f"warning: {w.name} fails natively (exit {code}; the same exit is expected of the "
                  f"others): {err.strip()[-300:]}", file=sys.stderr)
        reference[w.name] = digest(out_path)
        native_code[w.name] = code

    for rnd in range(args.repeat):
        for w in workloads:
            mine = [c for c in configs if c.kind == w.kind]
            if not mine:
                continue
            k = rnd % len(mine)
            order = mine[k:] + mine[:k]
            for c in order:
                w.reset()
                if os.path.exists(stats_path):
                    os.unlink(stats_path)
                argv = c.argv(w, stats_path)
                with w.session(c):
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
                own = w.own_seconds(err)
                if own is not None:
                    r["own"].append(own)
                if c.umview:
                    st = read_stats(stats_path)
                    if st:
                        r["stats"].append({k2: st.get(k2) for k2 in STAT_KEYS})
                        r.setdefault("calls", []).append(st.get("calls") or {})
                        r.setdefault("monitor_cpu", []).append(st.get("monitor_cpu"))
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


def summarize(results, configs, workloads):
    summary = {}
    for w in workloads:
        wname, per = w.name, results[w.name]
        native = median(per.get(w.reference, {}).get("wall", []))
        proot = median(per.get("proot", {}).get("wall", []))
        native_min = min(per.get(w.reference, {}).get("wall", []) or [0]) or None
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
                # per call, [trapped, to Python]: the median of each over the runs
                names = {n for calls in r.get("calls", []) for n in calls}
                row["calls"] = {n: [median([c.get(n, [0, 0])[i] for c in r["calls"]]) for i in (0, 1)]
                                for n in names}
                row["monitor_cpu"] = median([x for x in r.get("monitor_cpu", []) if x is not None])
            if r["own"]:
                own, ref_own = median(r["own"]), median(per.get(w.reference, {}).get("own", []))
                row["own_median_s"] = own
                row["ratio_own"] = own / ref_own if ref_own else None
            s[c.name] = row
        summary[wname] = s
    # less each configuration's fixed start-up (its median on w.startup)
    for w in workloads:
        start = summary.get(w.startup)
        if not start:
            continue
        s, ref = summary[w.name], w.reference

        def net(name):
            m, m0 = s[name]["median_s"], start[name]["median_s"]
            return None if m is None or m0 is None else m - m0

        for c in configs:
            a, b = net(c.name), net(ref) if ref in s else None
            s[c.name]["net_s"] = a
            s[c.name]["ratio_net"] = a / b if a is not None and b else None
    return summary


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def print_report(summary, configs, workloads, notes):
    print()
    print("Median wall-clock seconds; median over native's median in the same run; fastest run")
    print("over native's fastest (min/min: less sensitive to other load); median over PRoot's;")
    print("paired: median over rounds of the ratio to PRoot's run in the same round.")
    print("The fs workloads' \"native\" is fuse-native; their \"net\" line takes each")
    print("configuration's fs-true median (its start-up, mount and unmount) off both sides;")
    print("\"own\" is the time the command reports for its own work (dd), and its ratio.")
    for kind in dict.fromkeys(w.kind for w in workloads):
        names = [c.name for c in configs if c.kind == kind]
        if not names:
            continue
        print()
        width = max(12, max(len(n) for n in names) + 2)
        print(f"{'workload':10}" + "".join(f"{n:>{width}}" for n in names))
        for w in (w for w in workloads if w.kind == kind):
            s = summary[w.name]

            def line(label, key, spec, unit):
                print(f"{label:10}" + "".join(f"{fmt(s[n].get(key), spec) + unit:>{width}}" for n in names))

            line(w.name, "median_s", ".3f", "s")
            line("  x native", "ratio_native", ".2f", "x")
            line("  min/min", "ratio_native_min", ".2f", "x")
            if any(s[n].get("ratio_net") is not None for n in names):
                line("  net", "ratio_net", ".2f", "x")
            if any(s[n].get("ratio_own") is not None for n in names):
                line("  own", "own_median_s", ".3f", "s")
                line("  x native", "ratio_own", ".2f", "x")
            if any(s[n]["ratio_proot"] is not None for n in names):
                line("  x proot", "ratio_proot", ".2f", "x")
                line("  paired", "ratio_proot_paired", ".2f", "x")
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
        print()
        print("the calls trapped most (median per run: trapped, handed to Python), and the")
        print("monitor's CPU seconds (its C loop and Python)")
        for w in workloads:
            for c in umv:
                row = summary[w.name][c.name]
                calls = sorted(row.get("calls", {}).items(), key=lambda kv: -kv[1][0])[:6]
                if not calls:
                    continue
                cpu = row.get("monitor_cpu")
                print(f"{w.name:10}{c.name:>24}  " + (f"monitor {cpu:.2f}s  " if cpu is not None else "")
                      + ", ".join(f"{n} {t:.0f}/{p:.0f}" for n, (t, p) in calls))
    failures = [(w.name, c.name, f) for w in workloads for c in configs for f in summary[w.name][c.name]["failures"]]
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
        with w.session(None):
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
    p.add_argument("--rootfs", metavar="DIR",
                   help="the root tree of the umview-rootfs and proot-rootfs configurations")
    p.add_argument("--dir", default="/var/tmp",
                   help="where the temporary directory goes (default %(default)s: not /tmp, which a "
                   "sandbox replaces by its own)")
    p.add_argument("--cache", metavar="DIR",
                   help="keep the fs workloads' disk image in DIR and reuse it in later runs "
                        "(default: made in the temporary directory each run)")
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
    args.fs_image = None  # made by the first fs workload (FsImage)
    if args.cache:
        os.makedirs(args.cache, exist_ok=True)
    return args


def main(argv=None):
    sys.stdout.reconfigure(line_buffering=True)
    # killed: unwind, so that native mounts are unmounted and the directory removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args = parse_args(argv)
    configs, notes = build_configs(args)
    if not configs:
        raise SystemExit("no configuration to run")
    # not under /tmp: a sandbox's /tmp is its own, and a workload there would
    # keep the real /tmp in sight (--sandbox-keep), which no user's would
    scratch = tempfile.mkdtemp(prefix="umview-bench-", dir=args.dir)
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
        for ref in dict.fromkeys(w.reference for w in workloads):
            if ref not in [c.name for c in configs]:
                notes.append(f"no {ref} configuration: ratios to it are not available")
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
        summary = summarize(results, configs, workloads)
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
