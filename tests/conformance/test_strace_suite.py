"""strace's own test suite, a subset chosen for breadth, natively and with
strace inside views: every test must end as it does natively (PASS, SKIP or
FAIL alike). strace checks its output to the byte, so these exercise the
emulated ptrace the way a tracer really uses it (docs/conformance.md has
the whole suite's figures).

The suite comes from Debian's source package of the installed strace,
fetched with apt (a private sources list: the machine's apt configuration is
not changed), configured, and only the test programs the subset runs built:
about 1.5 minutes on 2 cores; then about 20 s natively and 1 minute a view.
UMVIEW_STRACE_TESTS=DIR uses a tree already configured there (its tests/
directory) and builds what is missing in it.
"""
import glob
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import need, run_session, umview_argv

pytestmark = pytest.mark.slow

# fork/vfork/exec, -f and -ff, attach and detach (running, stopped), signals
# and their siginfo, waits, ptrace and PTRACE_GET_SYSCALL_INFO as decoded,
# seccomp (strict, filters, --seccomp-bpf), syscall injection and tampering
# (-e inject, poke, under a traced strace), status qualifiers, threads with
# execve, pidfd, restart, -D (TracerPid), pid namespaces, fstatfs of /proc,
# Unix socket names (-y, -yy), creat of a running program
SUBSET = ["net-y-unix", "net-yy-unix", "creat.gen", "fork-f.gen", "vfork-f.gen", "execve", "execveat.gen", "chdir.gen", "openat.gen",
          "fstat.gen", "statfs.gen", "fstatfs.gen", "kill.gen", "signal_receive.gen", "siginfo.gen",
          "wait4.gen", "waitid.gen", "ptrace.gen", "ptrace_syscall_info.gen", "seccomp-filter.gen",
          "seccomp-strict", "filter_seccomp.gen", "attach-f-p", "attach-p-cmd", "strace-ff",
          "qual_inject-retval", "qual_signal", "status-successful.gen", "status-failed.gen",
          "threads-execve", "status-unfinished-threads", "pidfd_open.gen", "pidfd_send_signal.gen",
          "poke", "poke-ptrace", "strace-D", "getpid--pidns-translation.gen", "clone_ptrace",
          "detach-stopped", "detach-running", "restart_syscall", "readlink.gen", "nsyscalls"]
# the programs they run (found by reading the test scripts for ../PROGRAM)
PROGRAMS = ["attach-f-p", "attach-f-p-cmd", "attach-p-cmd-cmd", "attach-p-cmd-p", "chdir",
            "clone_ptrace", "creat", "execve", "execveat", "fork-f", "fstat", "fstatfs",
            "getpid--pidns-translation", "is_linux_mips_n64", "kill", "net-y-unix", "net-yy-unix", "nsyscalls", "openat",
            "pidfd_open", "pidfd_send_signal", "poke", "print_ppid_tracerpid", "ptrace",
            "ptrace_syscall_info", "qual_inject-retval", "qual_signal", "readlink",
            "restart_syscall", "seccomp-filter", "seccomp-strict", "set_ptracer_any", "siginfo",
            "signal_receive", "sleep", "statfs", "status-failed", "status-none-f",
            "status-successful", "status-unfinished-threads", "threads-execve", "vfork-f", "wait4",
            "waitid"]
RUN_TIMEOUT = 600
MODES = {"no-module": (), "cow": ("-p", "viewfs,mount={layer}:/:cow")}


def _apt(private, cwd, *args):
    """apt-get run in cwd with a sources list of its own (deb-src lines for
    the installed strace's origins), its lists and cache under private."""
    opts = [f"-oDir::Etc::SourceList={private}/sources.list", "-oDir::Etc::SourceParts=/nonexistent",
            f"-oDir::State::Lists={private}/lists", f"-oDir::Cache={private}/cache", "-qq"]
    return subprocess.run(["apt-get", *opts, *args], cwd=cwd, capture_output=True, timeout=600)


def _fetch(work):
    """Debian's strace source of the installed version, unpacked in work:
    its directory, or pytest.skip with apt's reason."""
    need("apt-get", "apt-cache", "dpkg-query", "gcc", "make")
    version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "strace"],
                             capture_output=True, text=True).stdout.strip()
    if not version:
        pytest.skip("strace is not installed from a Debian package (apt-get install strace)")
    policy = subprocess.run(["apt-cache", "policy", "strace"], capture_output=True, text=True).stdout
    origins = sorted(set(re.findall(r"^\s+\d+ (https?://\S+) (\S+)/(\S+) ", policy, re.M)))
    if not origins:
        pytest.skip("no apt origin of strace's package to fetch its source from")
    private = os.path.join(work, "apt")
    for sub in ("lists/partial", "cache/archives/partial"):
        os.makedirs(os.path.join(private, sub))
    with open(os.path.join(private, "sources.list"), "w") as f:
        f.writelines(f"deb-src {uri} {suite} {component}\n" for uri, suite, component in origins)
    for step in (["update"], ["source", "--download-only", f"strace={version}"]):
        r = _apt(private, work, *step)
        if r.returncode:
            pytest.skip(f"apt-get {step[0]} for strace's source failed: {r.stderr.decode()[-500:]}")
    tarball = [t for t in glob.glob(os.path.join(work, "strace_*.orig.tar.*")) if not t.endswith(".asc")]
    if not tarball:
        pytest.skip("apt-get source gave no strace_*.orig.tar.* to unpack")
    subprocess.run(["tar", "xf", tarball[0], "-C", work], check=True)
    return glob.glob(os.path.join(work, "strace-*/"))[0]


def _build(tests):
    """configure the tree if needed, then the subset's test programs."""
    top = os.path.dirname(os.path.normpath(tests))
    if not os.path.exists(os.path.join(tests, "Makefile")):
        r = subprocess.run(["./configure", "--enable-mpers=no"], cwd=top, capture_output=True,
                           timeout=900)
        assert r.returncode == 0, r.stdout.decode()[-3000:] + r.stderr.decode()[-3000:]
    for targets in (["scno.h"], ["libtests.a"], PROGRAMS):
        r = subprocess.run(["make", "-j2", *targets], cwd=tests, capture_output=True, timeout=900)
        assert r.returncode == 0, r.stdout.decode()[-3000:] + r.stderr.decode()[-3000:]


@pytest.fixture(scope="module")
def strace_tests():
    """The tests/ directory of strace's source, the subset's programs built."""
    given = os.environ.get("UMVIEW_STRACE_TESTS")
    if given:
        _build(given)
        yield given
        return
    work = tempfile.mkdtemp(prefix="umview-strace-suite-", dir="/var/tmp")
    try:
        tests = os.path.join(_fetch(work), "tests")
        _build(tests)
        yield tests
    finally:
        shutil.rmtree(work, ignore_errors=True)


def suite(tests, prefix=()):
    """Run the subset with make check (-j2, as the suite runs) under prefix:
    {test: PASS | SKIP | FAIL | ERROR}, and the log of what did not pass."""
    script = ('cd "$1" && rm -f ./*.log ./*.trs && make -k -j2 check TESTS="$2" check_PROGRAMS="$3" '
              '>/dev/null 2>&1; for f in ./*.trs; do n=${f#./}; '
              'echo "=${n%.trs} $(sed -n "s/^:test-result: //p" "$f")"; done; '
              'for f in ./*.log; do grep -q "^:test-result: PASS" "${f%.log}.trs" 2>/dev/null || '
              '{ echo "--- $f"; tail -20 "$f"; }; done')
    tests_arg = " ".join(t + ".test" for t in SUBSET)
    argv = [*prefix, "sh", "-c", script, "suite", tests, tests_arg, " ".join(PROGRAMS)]
    # the strace the package installed: the suite's own would need src/ built
    env = dict(os.environ, STRACE=shutil.which("strace") or "strace")
    _, out = run_session(argv, " ".join(prefix) or "native", RUN_TIMEOUT, env)
    text = out.decode(errors="replace")
    results = dict(re.findall(r"^=(\S+) (\S+)$", text, re.M))
    return results, text


@pytest.fixture(scope="module")
def native(strace_tests):
    need("strace")
    results, log = suite(strace_tests)
    assert set(results) == set(SUBSET), log[-3000:]
    assert list(results.values()).count("PASS") >= len(SUBSET) * 3 // 4, results
    return results


@pytest.mark.parametrize("mode", sorted(MODES))
def test_strace_suite_ends_as_natively(strace_tests, native, mode):
    layer = tempfile.mkdtemp(prefix="umview-layer-", dir="/var/tmp")
    try:
        opts = tuple(o.format(layer=layer) for o in MODES[mode])
        viewed, log = suite(strace_tests, umview_argv(*opts, "--"))
    finally:
        shutil.rmtree(layer, ignore_errors=True)
    differ = {t: (native[t], viewed.get(t)) for t in SUBSET if viewed.get(t) != native[t]}
    assert not differ, f"(native, view) of the tests that differ: {differ}\n{log[-6000:]}"
