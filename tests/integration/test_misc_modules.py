"""The uname and time modules (docs/modules.md): what a view shows of the
system's names and of the wall clock, differential against the same command
run natively, as root and as an unprivileged user. Setting the names or the
clock in a view never reaches the host: those tests run the modules in a
view nested in one whose oldest engine refuses every call that would
(tests/engines.py RefuseHostChanges), and check that none got there."""
import os
import shlex
import shutil
import socket
import sys
import tempfile
import time

import pytest

from conftest import TEST_ENGINES, as_user, need_user, run, umview_argv, umview_for

PROGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "progs")
BIN = os.path.dirname(sys.executable)
USERS = ["root", "nobody"]
PY = "/usr/bin/python3"  # one every user can run
DAY = 86400
SLACK = 300  # seconds a run may take between two readings, however loaded the machine


def env(**extra):
    return dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""), LC_ALL="C", TZ="UTC", **extra)


def in_view(user, opts, script):
    """Run a shell script as user in a view made with opts."""
    if user != "root":
        need_user(user)
    return run(umview_for(user, *opts, "--", "sh", "-c", script), env=env())


def native(user, script):
    return run(as_user(user, ["sh", "-c", script]), env=env())


def lines(r):
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout.decode().splitlines()


@pytest.fixture(scope="module")
def progs():
    """clockview (glibc, dynamic and static) and clock32 (a real i386
    process, no libc, if gcc can build one), where any user may run them."""
    out = tempfile.mkdtemp(prefix="umview-clock-")
    os.chmod(out, 0o755)
    built = {}
    try:
        for name, argv in (("clockview", ["-O1"]), ("clockview-static", ["-O1", "-static"])):
            r = run(["gcc", *argv, "-o", os.path.join(out, name), os.path.join(PROGS, "clockview.c"), "-lpthread"])
            assert r.returncode == 0, r.stderr.decode()
            built[name] = os.path.join(out, name)
        r = run(["gcc", "-m32", "-nostdlib", "-static", "-fno-pie", "-no-pie", "-O1", "-fno-stack-protector",
                 "-fno-builtin", "-o", os.path.join(out, "clock32"), os.path.join(PROGS, "clock32.c")])
        if r.returncode == 0 and run([os.path.join(out, "clock32")]).returncode == 0:
            built["clock32"] = os.path.join(out, "clock32")
        yield built
    finally:
        shutil.rmtree(out, ignore_errors=True)


def need_i386(progs):
    if "clock32" not in progs:
        pytest.skip("gcc -m32 -nostdlib cannot build an i386 program here, or this kernel runs none")
    return progs["clock32"]


def values(out):
    """'name value' lines -> {name: value}."""
    return dict(line.split(" ", 1) for line in out)


@pytest.fixture
def host_names():
    """The host's node and domain names are the same after the test (and
    put back if a bug changed them)."""
    before = os.uname()
    yield before
    after = os.uname()
    if os.geteuid() == 0 and after.nodename != before.nodename:
        socket.sethostname(before.nodename)
    assert (after.nodename, socket.gethostname()) == (before.nodename, before.nodename)


# --- uname ---

NAMES = (f"uname -n; hostname; cat /proc/sys/kernel/hostname; "
         f"{PY} -c 'import os, socket; print(socket.gethostname()); print(os.uname().nodename)'")


@pytest.mark.parametrize("user", USERS)
def test_every_way_of_reading_the_host_name_shows_the_views(user):
    r = in_view(user, ["-p", "uname,nodename=viewbox"], NAMES)
    assert lines(r) == ["viewbox"] * 5


def test_fields_the_view_does_not_set_are_the_kernels():
    script = "uname -s; uname -r; uname -v; uname -m; uname -o"
    nat = native("root", script)
    r = in_view("root", ["-p", "uname,nodename=viewbox"], script + "; uname -a")
    got = lines(r)
    assert got[:5] == lines(nat)
    assert got[5] == lines(native("root", "uname -a"))[0].replace(os.uname().nodename, "viewbox", 1)


def test_release_version_machine_domainname_and_their_proc_files():
    r = in_view("root", ["-p", "uname,release=9.9.9-view,version=#1 view,machine=m68k,sysname=Hurd,domainname=dom"],
                "uname -r; uname -v; uname -m; uname -s; domainname; "
                "cat /proc/sys/kernel/osrelease /proc/sys/kernel/version /proc/sys/kernel/ostype "
                "/proc/sys/kernel/domainname")
    assert lines(r) == ["9.9.9-view", "#1 view", "m68k", "Hurd", "dom", "9.9.9-view", "#1 view", "Hurd", "dom"]


def test_unset_proc_files_stay_real():
    r = in_view("root", ["-p", "uname,nodename=viewbox"], "cat /proc/sys/kernel/osrelease")
    assert lines(r) == [os.uname().release]


def net_view(script, *modules):
    """script in a view of modules nested in a view whose oldest engine
    refuses what would change the host; (result, what reached the net)."""
    with tempfile.NamedTemporaryFile(prefix="umview-net-", delete=False) as f:
        net = f.name
    try:
        inner = " ".join(shlex.quote(a) for a in (*umview_argv(*modules), "--", "sh", "-c", script))
        r = run(umview_argv("--engine", f"{TEST_ENGINES}:RefuseHostChanges", "--", "sh", "-c", inner),
                env=env(UMVIEW_TEST_NET=net))
        with open(net) as f:
            return r, f.read().split()
    finally:
        os.unlink(net)


def test_sethostname_as_root_of_the_view_renames_the_view_never_the_host(host_names):
    need_user("root")
    r, reached = net_view("hostname renamed && hostname && uname -n && cat /proc/sys/kernel/hostname && "
                          "sh -c hostname && domainname viewdom && domainname",
                          "-p", "uname,nodename=viewbox")
    assert lines(r) == ["renamed"] * 4 + ["viewdom"]
    assert reached == []


def test_a_view_with_no_names_set_still_keeps_sethostname_to_itself(host_names):
    need_user("root")
    r, reached = net_view("uname -n; hostname other; uname -n", "-p", "uname")
    assert lines(r) == [host_names.nodename, "other"]
    assert reached == []


def test_sethostname_as_a_normal_user_fails_with_eperm_as_natively(host_names):
    need_user("nobody")
    script = (f"hostname x; echo $?; domainname y; echo $?; {PY} -c 'import socket\n"
              "try: socket.sethostname(\"x\")\nexcept OSError as e: print(e.errno)'")
    nat = native("nobody", script)
    r = in_view("nobody", ["-p", "uname,nodename=viewbox"], script + "; hostname")
    assert r.stdout.decode().splitlines() == nat.stdout.decode().splitlines() + ["viewbox"]
    assert r.stderr == nat.stderr
    assert nat.stdout.decode().splitlines()[2] == "1"  # EPERM


def test_writing_proc_sys_kernel_hostname_is_refused_in_the_view(host_names):
    need_user("root")
    r, reached = net_view(f"echo {host_names.nodename} > /proc/sys/kernel/hostname; echo $?; hostname",
                          "-p", "uname,nodename=viewbox")
    status, name = r.stdout.decode().splitlines()
    assert status != "0" and name == "viewbox"
    assert b"Permission denied" in r.stderr
    assert reached == []


def test_vuname_shows_the_views_name():
    r = in_view("root", ["-p", "uname,nodename=viewbox"], "vuname -n; vuname -a")
    out = lines(r)
    assert out[0] == "viewbox"
    assert " viewbox " in out[1]


def test_uname_added_at_run_time_renames_the_running_view():
    r = in_view("root", [], "hostname; um_add_service uname,nodename=late && hostname && uname -n")
    assert lines(r) == [os.uname().nodename, "late", "late"]


def test_i386_uname_and_its_old_variants_show_the_views_name(progs):
    exe = need_i386(progs)
    r = in_view("root", ["-p", "uname,nodename=viewbox"], exe)
    got = values(lines(r))
    assert (got["uname"], got["olduname"], got["oldolduname"]) == ("viewbox",) * 3


@pytest.mark.parametrize("opt, message", [
    ("uname,nodename=" + "x" * 65, "65 bytes long; the kernel keeps at most 64"),
    ("uname,nodename", "nodename needs a value"),
    ("uname,hostname=x", "unknown option hostname"),
    ("time,offset=soon", "offset='soon' is not a number of seconds"),
    ("time,freeze=yesterday", "freeze='yesterday' is not an ISO 8601 date and time"),
    ("time,offset=1,freeze=2030-01-01", "offset and freeze exclude each other"),
    ("time,start", "start needs a value"),
])
def test_bad_options_say_what_to_do(opt, message):
    r = run(umview_argv("-p", opt, "--", "true"))
    assert r.returncode == 2
    assert message in r.stderr.decode(), r.stderr


def test_list_modules_shows_uname_and_time():
    out = run(umview_argv("--list-modules")).stdout.decode()
    assert "\nuname " in out and "\ntime " in out


# --- time ---

@pytest.mark.parametrize("user", USERS)
def test_date_and_python_time_run_a_day_ahead_with_offset(user):
    before = time.time()
    r = in_view(user, ["-p", f"time,offset={DAY}"], f"date +%s; {PY} -c 'import time; print(int(time.time()))'")
    after = time.time()
    for seen in map(int, lines(r)):
        assert before + DAY - 1 <= seen <= after + DAY + 1


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("prog", ["clockview", "clockview-static"])
def test_a_c_program_reading_the_clock_through_glibc_gets_the_views_time(progs, prog, user):
    """glibc reads the clock in the vDSO natively; in the view the vDSO is
    hidden from it, and its real calls are shifted."""
    nat = values(lines(native(user, f"{progs[prog]} read")))
    assert nat["vdso"] == "1"
    r = in_view(user, ["-p", "time,offset=-86400.5"], f"{progs[prog]} read")
    got = values(lines(r))
    assert got["vdso"] == "0"
    for key in ("realtime", "gettimeofday", "time", "tai"):
        assert -DAY - 2 <= int(got[key]) - int(nat[key]) <= -DAY + SLACK, key


def test_freeze_stands_still_at_the_instant():
    r = in_view("root", ["-p", "time,freeze=2030-01-02T03:04:05Z"],
                f"date -u +%FT%T; sleep 1.2; date +%s; {PY} -c 'import time, datetime; print(time.time()); "
                f"print(datetime.datetime.now(datetime.timezone.utc).isoformat())'")
    assert lines(r) == ["2030-01-02T03:04:05", "1893553445", "1893553445.0", "2030-01-02T03:04:05+00:00"]


def test_start_runs_from_the_instant():
    r = in_view("root", ["-p", "time,start=@2000000000"], "date +%s; sleep 1.1; date +%s")
    first, second = map(int, lines(r))
    assert 2000000000 <= first < second <= 2000000000 + SLACK


def test_monotonic_and_boot_clocks_stay_real():
    script = f"{PY} -c 'import time; print(time.monotonic(), time.clock_gettime(time.CLOCK_BOOTTIME))'"
    nat = [float(x) for x in lines(native("root", script))[0].split()]
    got = [float(x) for x in lines(in_view("root", ["-p", f"time,offset={DAY}"], script))[0].split()]
    for a, b in zip(nat, got):
        assert 0 <= b - a <= SLACK


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("wait", ["sleep", "timerfd", "timer", "cond"])
def test_absolute_waits_on_the_realtime_clock_wake_at_the_views_time(progs, wait, user):
    """The program waits until its clock reads one second later than now:
    about a second, not a day early (an unshifted deadline a day in the real
    past would return at once)."""
    r = in_view(user, ["-p", f"time,offset=-{DAY}"], f"{progs['clockview']} {wait}")
    elapsed = int(values(lines(r))["elapsed"])
    assert 500 <= elapsed <= SLACK * 1000


def test_absolute_sleep_on_a_frozen_clock_sleeps_as_long_as_the_deadline_lies_ahead(progs):
    r = in_view("root", ["-p", "time,freeze=2030-01-01T00:00:00Z"], f"{progs['clockview']} sleep")
    assert 500 <= int(values(lines(r))["elapsed"]) <= SLACK * 1000


def test_setting_the_clock_as_root_of_the_view_sets_the_views_never_the_hosts():
    need_user("root")
    before = time.time()
    r, reached = net_view("date -s @2000000000 >/dev/null && date +%s && "
                          f"{PY} -c 'import time; time.clock_settime(time.CLOCK_REALTIME, 2100000000.5); "
                          "print(int(time.time()))' && date +%s",
                          "-p", "time")
    a, b, c = map(int, lines(r))
    assert 2000000000 <= a <= 2000000000 + SLACK
    assert 2100000000 <= b <= c <= 2100000000 + SLACK
    assert reached == []
    assert before <= time.time() <= before + SLACK


def test_setting_the_clock_as_a_normal_user_fails_with_eperm_as_natively():
    need_user("nobody")
    script = (f"{PY} -c 'import time\ntry: time.clock_settime(time.CLOCK_REALTIME, 2e9)\n"
              "except OSError as e: print(e.errno)'")
    nat = native("nobody", script)
    r = in_view("nobody", ["-p", "time,offset=60"], script)
    assert lines(r) == lines(nat) == ["1"]


def test_a_file_made_in_the_view_carries_the_real_time(tmp_path):
    f = tmp_path / "made"
    before = time.time()
    r = in_view("root", ["-p", f"time,offset={DAY}"], f"touch {f}; date +%s")
    assert int(lines(r)[0]) >= before + DAY - 1
    assert before - 1 <= f.stat().st_mtime <= time.time() + 1


def test_i386_clock_calls_and_auxv_get_the_views_time(progs):
    exe = need_i386(progs)
    nat = values(lines(run([exe])))
    assert nat["vdso"] == "1"
    got = values(lines(in_view("root", ["-p", f"time,offset={DAY}"], exe)))
    assert got["vdso"] == "0"
    for key in ("time", "gettimeofday", "clock_gettime", "clock_gettime64"):
        assert DAY - 1 <= int(got[key]) - int(nat[key]) <= DAY + SLACK, key


def test_time_added_at_run_time_shifts_what_runs_next():
    """A process running when the module is added keeps its vDSO; what it
    execs afterwards gets the view's time."""
    before = time.time()
    r = in_view("root", [], f"um_add_service time,offset={DAY} && date +%s")
    assert before + DAY - 1 <= int(lines(r)[0]) <= time.time() + DAY + 1
