"""Notifications served by threads beside the main one (UMVIEW_SERVERS: the
lead alone, with threads kept on a CPU, on any CPU, or the main thread alone;
umview/csrc/servers.c): processes on both CPUs at once, calls the C core
answers on a serving thread, calls handed to the main thread for Python, and
the same answers as natively."""
import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import need_user, run, umview_argv, umview_for

# two shells at once, each reading files through the unreal mount (Python
# rewrites those) and looking up real ones (C lets them through)
SCRIPT = ('work() { i=0; while [ $i -lt 150 ]; do cat "$1/etc/hostname"; test -e /usr/bin/env && '
          'stat -c %s "$1/etc/hostname"; i=$((i+1)); done; }; work "$ROOT" > "$OUT.a" & '
          'work "$ROOT" > "$OUT.b" & wait; cat "$OUT.a" "$OUT.b"; rm -f "$OUT.a" "$OUT.b"')


@pytest.mark.parametrize("user", ["root", "nobody"])
@pytest.mark.parametrize("servers", ["2", "-2", "1", "0"])
def test_two_processes_at_once_get_the_same_answers_with_serving_threads(user, servers):
    need_user(user)
    out = f"/tmp/umview-serving-{os.getpid()}-{user}-{servers.strip('-')}"
    native = run(["sh", "-c", SCRIPT], env=dict(os.environ, ROOT="", OUT=out))
    assert native.returncode == 0, native.stderr
    assert len(native.stdout.splitlines()) == 600
    fd, stats_file = tempfile.mkstemp(prefix="umview-stats-", dir="/var/tmp")  # one nobody may write
    os.close(fd)
    os.chmod(stats_file, 0o666)
    try:
        viewed = run(umview_for(user, "--stats-file", stats_file, "-p", "unreal", "--", "sh", "-c", SCRIPT),
                     env=dict(os.environ, ROOT="/unreal", OUT=out, UMVIEW_SERVERS=servers))
        with open(stats_file) as f:
            stats = json.loads(f.read().splitlines()[-1])
    finally:
        os.unlink(stats_file)
    assert viewed.returncode == 0, viewed.stderr
    assert viewed.stdout == native.stdout
    if os.environ.get("UMVIEW_NOTIF", "1") != "0":
        assert stats["fast_continue"] > 250, stats  # answered by the serving threads
        assert stats["python_events"] > 600, stats  # handed over, served by Python


# services added and removed over and over while two shells look up a file
# of the sandbox's private /tmp: each rebuild of the C tables clears the
# prefixes and claims and fills them again, and a serving thread deciding a
# lookup in between once let it through to the real /tmp (ENOENT; EACCES for
# a mkdir): pytest's xdist workers, each adding a layer per test, hit it
CHURN = ('echo x > /tmp/umview-probe; '
         'churn() { i=0; while [ $i -lt 30 ]; do um_add_service unreal > /dev/null && um_del_service unreal || exit 1; '
         'i=$((i+1)); done; : > /tmp/umview-churned; }; '
         'look() { bad=0; n=0; while ! test -e /tmp/umview-churned; do test -e /tmp/umview-probe || bad=$((bad+1)); '
         'n=$((n+1)); done; echo "$n lookups, $bad missed"; }; '
         'churn & look & look & wait')


def test_lookups_never_see_the_tables_half_rebuilt_while_services_come_and_go():
    need_user("root")
    bin_dir = os.path.dirname(sys.executable)
    r = run(umview_argv("--sandbox", "--", "sh", "-c", CHURN),
            env=dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"], UMVIEW_SERVERS="2"), timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert len(lines) == 2 and all(line.endswith(" lookups, 0 missed") for line in lines), r.stdout
    assert not os.path.exists("/tmp/umview-probe") and not os.path.exists("/tmp/umview-churned")


# two shells making stats as fast as they can, each answered by a serving
# thread; meanwhile the serving threads get their own signal (the one that
# stops them) as often as tgkill can send it. SEND and ID_VALID take the
# listener's lock interruptibly: one that fails with EINTR and is not made
# again leaves its caller waiting for good (a make under -p unreal hung so,
# about one run in fifteen, while the serving threads had a timer signal;
# without the retry this test hung in two runs of four)
STATS = ('work() { i=0; while [ $i -lt 30000 ]; do test -e /usr/bin/env || exit 1; i=$((i+1)); done; }; '
         'echo started; work & work & wait')


@pytest.mark.parametrize("servers", ["2", "1"])
def test_signals_at_the_serving_threads_lose_no_answer(servers):
    need_user("root")
    proc = subprocess.Popen(umview_argv("-p", "unreal", "--", "sh", "-c", STATS),
                            env=dict(os.environ, UMVIEW_SERVERS=servers), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    sent = 0
    try:
        assert proc.stdout.readline() == b"started\n"  # the monitor's threads have their handler by now
        libc = ctypes.CDLL(None, use_errno=True)
        while proc.poll() is None and time.monotonic() < deadline:
            # at the threads beside the main one (a signal to the process
            # goes to the main thread, which does not block it)
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid]
            except FileNotFoundError:
                break
            for tid in tids:
                if libc.syscall(234, proc.pid, tid, signal.SIGRTMIN + 6) == 0:  # tgkill
                    sent += 1
            time.sleep(0)
        assert proc.poll() is not None, f"the view hung ({sent} signals sent)"
    finally:
        if proc.poll() is None:
            subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)])
            proc.kill()
        out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert sent > 100
