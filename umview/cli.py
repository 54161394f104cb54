"""The `umview` command.

(One file over 700 lines: the parser, the sandbox's presets and their
Landlock bound, and running a view with its reports are the command's
three parts, each used only here; the parsers of the other commands are in
cliparse.py and commands.py.)
"""
import argparse
import errno
import functools
import importlib
import os
import sys

from umview.cliparse import Parser

USAGE_EPILOG = """\
examples:
  umview                      a shell ($SHELL) whose processes run under umview
  umview bash                 the same, with bash
  umview --stats -- make -j2  run a build, then print how many calls stopped
  umview -p unreal ls /unreal/etc   /unreal/X is X
  umview --engine examples/lying_engine.py:LyingEngine -- uname -n
  umview --trace - cat /etc/hostname          an strace-like log on stderr
  umview -p unreal --trace t.log --trace-kernel cat /unreal/etc/hostname
  umview bash                 then, inside: um_add_service unreal; ls /unreal/etc
  umview -p vnet,null pytest  no network (AF_INET/AF_INET6: EAFNOSUPPORT), AF_UNIX works
  umview -p vnet,private CMD  its own loopback only, any user; vnet,netns=NAME[,create]
  umview --sandbox -- make install    change anything, the real files stay; no network
  umview --sandbox net --keep-layer L -- pip install .   keep the changes in L
  umview --sandbox --report r.json -- make install   and what it changed (JSON; a summary on stderr)
  umview-layer diff L; umview-layer apply L   show a kept layer's changes, or make them real
  umview --sandbox=ro -- make test   writes but in /tmp and . (copy-on-write) fail: EROFS
  umview -r ~/debian -- bash  a distribution's root tree as /, for any user (as proot -R)
  umview -0 -- tar xf a.tar   a fake root: the archive's owners are kept and shown (not real)
  umview -0 --sandbox -- dpkg -i pkg.deb    install a package as fake root; the system stays

Inside a view: um_add_service, um_del_service, um_ls_service, um_attach,
um_fsalias, viewname, vuname, vumount, vuumount (docs/services.md). Where
PATH does not reach them (umview run as .venv/bin/umview), the view's PATH
gets their directory at its end.
umview run inside a view makes a view nested in it (same monitor): its
modules see the command's calls first, then the outer view's; it ends with
the command. --services, --stats, --stats-file, --spin and -v belong to the
outermost umview (docs/user-guide.md, "A view inside a view").
At start, /etc/umviewrc then ~/.umviewrc (or -f FILE) run inside the view
before the command (docs/services.md).
examples/ is in umview's source, and installed in PREFIX/share/umview/examples
(PREFIX: the venv's directory, or ~/.local); so are the man pages (man umview)
and bash and zsh completion (PREFIX/share/bash-completion/completions/umview).

The exit status is the command's: its exit code, or, if it was killed by a
signal, umview dies of the same signal (a shell then reports 128+N).
SIGTERM, SIGINT or SIGHUP sent to umview (kill, timeout; not the terminal's)
go to every process of the view; those left after UMVIEW_TERM_GRACE seconds
(10) are killed, and umview exits 128+N.
"""


TRY_HELP = "try 'umview --help'"  # after the line that says what is wrong with the arguments
SANDBOX_PRESETS = ("default", "net", "ro")
# what -r keeps of the host (as proot -R does, without the host's users): the
# kernel's file systems, the sockets of /run, the name service's files
ROOTFS_HOST_PATHS = ("/proc", "/sys", "/dev", "/tmp", "/run", "/etc/resolv.conf", "/etc/hosts")


@functools.cache
def _help_width():
    """The terminal's width, as argparse takes it (shutil.get_terminal_size),
    asked once: argparse asks again for every formatter it makes (once per
    add_argument, to check the metavar) and imports shutil to do it, 5 ms of
    every start."""
    columns = 0
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        pass
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            pass
    return (columns if columns > 0 else 80) - 2


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog, *args, width=None, **kw):
        super().__init__(prog, *args, width=_help_width() if width is None else width, **kw)


def build_parser():
    p = Parser(
        prog="umview",
        description="Run a command whose processes see the real system, except where a "
        "loaded engine or module changes their view (a partial virtual machine).",
        epilog=USAGE_EPILOG,
        formatter_class=_HelpFormatter,
    )
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="the command and its arguments (default: $SHELL, else /bin/sh)")
    p.add_argument("-p", "--module", action="append", default=[], metavar="NAME[,OPT[=V]...]",
                   help="load a module (e.g. unreal); may be repeated, later ones are newer; "
                   "--list-modules shows them")
    p.add_argument("--services", action="store_true",
                   help="trap from the start what any known module may claim, so that modules "
                   "loaded later with um_add_service need no filter stacked on the running "
                   "processes (every path call then stops; see docs/services.md)")
    p.add_argument("--sandbox", nargs="?", const="default", choices=SANDBOX_PRESETS, metavar="PRESET",
                   help="run COMMAND in a sandbox: a copy-on-write view of / in a fresh layer (thrown away "
                   "at the end), a private /tmp and /dev/shm, no network; PRESET net keeps the host's network, ro "
                   "makes writes outside /tmp and the current directory (copy-on-write there, thrown away) fail with "
                   "EROFS instead. -p modules are added on top")
    p.add_argument("--keep-layer", metavar="DIR",
                   help="with --sandbox: the layer is DIR (made if missing) and is kept; a later "
                   "--sandbox --keep-layer DIR sees what this one changed")
    p.add_argument("--sandbox-write", metavar="DIR", action="append", default=[],
                   help="with --sandbox: writes in DIR reach the real DIR (not thrown away), where the rest of "
                   "the sandbox is copy-on-write or read-only; repeat for more")
    p.add_argument("--sandbox-keep", metavar="DIR", action="append", default=[],
                   help="with --sandbox: DIR, under /tmp, stays visible in the sandbox (copy-on-write, as "
                   "the rest of /) although the sandbox's /tmp is its own; repeat for more (those the "
                   "command names always do: the current directory, the program's and its interpreter's, "
                   "the paths its arguments name, -r's tree)")
    p.add_argument("--report", metavar="FILE",
                   help="with --sandbox: when COMMAND ends, write what it changed in the layer (created, "
                   "modified, deleted, renamed) as JSON to FILE ('-': stdout) and a summary on stderr; "
                   "with --keep-layer, what the whole layer changes")
    p.add_argument("-r", "--rootfs", metavar="DIR",
                   help="DIR is / for COMMAND (a distribution's root tree, e.g. made by debootstrap), "
                   "any user; the host's paths of --host-paths stay the host's. Writes there go to DIR "
                   "(with --sandbox: to the sandbox's layer, DIR stays as it is)")
    p.add_argument("--qemu", nargs="?", const="", metavar="DIR",
                   help="programs of other machines (arm64, armhf, riscv64, ppc64el, s390x, ...) run through "
                   "qemu-user, as binfmt_misc would run them: qemu-ARCH-static or qemu-ARCH from DIR or PATH "
                   "(apt-get install qemu-user-static). With -r, a tree of another machine runs. Short for "
                   "-p qemu[,dir=DIR]")
    p.add_argument("--host-paths", metavar="P1:P2", default=None,
                   help="with -r: the host paths that stay the host's (default: " + ":".join(ROOTFS_HOST_PATHS)
                   + ":$HOME); '' for none")
    p.add_argument("-0", "--root", action="store_true",
                   help="a fake root user (as fakeroot and proot -0): the command's processes see uid and "
                   "gid 0, chown, chmod and mknod of devices seem to work and stat shows what they set; "
                   "no real privilege. Short for -p fakeroot (docs/modules.md, fakeroot)")
    p.add_argument("--uid", metavar="UID",
                   help="as -0, but the processes see this uid (and --gid's gid, default 0)")
    p.add_argument("--gid", metavar="GID",
                   help="as -0, but the processes see this gid (and --uid's uid, default 0)")
    p.add_argument("-V", "--viewname", default="", metavar="NAME",
                   help="the view's name (viewname and vuname -N show it)")
    p.add_argument("-f", "--rcfile", metavar="FILE",
                   help="shell commands to run inside the view before COMMAND (um_add_service, mount,"
                        " viewname...), instead of /etc/umviewrc then ~/.umviewrc")
    p.add_argument("--norc", action="store_true", help="run no rc file")
    p.add_argument("--list-modules", action="store_true", help="list the modules umview knows and exit")
    p.add_argument("-e", "--engine", action="append", default=[], metavar="FILE.py:CLASS",
                   help="load an engine class from a Python file or module "
                   "(MODULE:CLASS); may be repeated, later ones are newer")
    p.add_argument("--trace", metavar="FILE",
                   help="write one line per system call, strace-like, to FILE ('-': stderr): "
                   "the call as the process made it and the result it got; a call a module "
                   "rewrote ends in [rewritten], one it served in [virtual]. Every traced "
                   "call stops the process (about as slow as strace -f)")
    p.add_argument("--trace-calls", metavar="NAME,...",
                   help="trace only these calls; classes: %%file (path calls), %%process, "
                   "%%network, %%desc (fd calls)")
    p.add_argument("--trace-kernel", action="store_true",
                   help="for a rewritten call, also show it as the kernel received it")
    p.add_argument("--stats", action="store_true",
                   help="print stop and Python-crossing counts on stderr at the end")
    p.add_argument("--stats-file", metavar="FILE",
                   help="append the same counts as one JSON line to FILE")
    p.add_argument("--spin", type=int, default=0, metavar="N",
                   help="poll waitpid N times before sleeping (trades CPU for latency; default 0)")
    p.add_argument("-v", "--verbose", action="store_true", help="log what engines do")
    return p


def load_engine(spec):
    """Instantiate an engine from 'path/to/file.py:Class' or 'package.module:Class'."""
    if ":" not in spec:
        raise ValueError(f"--engine {spec!r}: expected FILE.py:CLASS or MODULE:CLASS")
    where, _, cls_name = spec.rpartition(":")
    if where.endswith(".py") or os.sep in where:
        if not os.path.exists(where):
            raise ValueError(f"--engine {spec!r}: no such file {where!r}")
        name = "umview_engine_" + os.path.splitext(os.path.basename(where))[0]
        import importlib.util as import_util  # lazy: only an engine given as a file needs it

        mod_spec = import_util.spec_from_file_location(name, where)
        module = import_util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    try:
        cls = getattr(module, cls_name)
    except AttributeError:
        raise ValueError(f"--engine {spec!r}: {where} has no {cls_name!r}") from None
    from umview.engine import Engine  # lazy, as the monitor in main(): it loads the C core

    engine = cls()
    if not isinstance(engine, Engine):
        raise ValueError(f"--engine {spec!r}: {cls_name} is not an engine (a subclass of umview.Engine)")
    return engine


def why_not_traced(err):
    """Why umview could not trace its command, when the kernel refused with
    EPERM because umview itself is traced: ptrace allows one tracer a
    process, and a tracer that follows forks (strace -f, gdb) has taken the
    command first. "" otherwise."""
    if err != errno.EPERM:
        return ""
    try:
        with open("/proc/self/status") as f:
            tracer = int(next(line for line in f if line.startswith("TracerPid:")).split()[1])
    except (OSError, StopIteration, ValueError):
        return ""
    if not tracer:
        return ""
    # (inside a view, umview asks for a nested view instead: nested_main)
    try:
        with open(f"/proc/{tracer}/comm") as f:
            who = f"{f.read().strip()}, pid {tracer}"
    except OSError:
        who = f"pid {tracer}"
    return (f"\n  umview is itself traced ({who}), and a tracer that follows children (strace -f, "
            "gdb) took the command first: ptrace allows one tracer a process. Trace umview "
            "without following children (strace without -f), or trace the command alone")


def _in_view():
    """Is this process in a view? The control call asks its monitor (about
    1.5 ms, ctypes' import). /proc/self/status cannot tell: a view shows its
    processes untraced (TracerPid 0) unless a tracer of the view traces them."""
    from umview import control  # lazy: ctypes

    return control.in_view()


#: options that concern the monitor process, which the outermost umview runs
MONITOR_ONLY = (("services", "--services"), ("stats", "--stats"), ("stats_file", "--stats-file"),
                ("spin", "--spin"), ("verbose", "--verbose"))


def refuse_monitor_options(args):
    """Options that a umview inside a view cannot take: a message, or ""."""
    for attr, opt in MONITOR_ONLY:
        if getattr(args, attr):
            return (f"umview: {opt} concerns the monitor, which the outermost umview runs: "
                    "not for a view inside a view (give it to the outer umview)")
    return ""


def nested_main(args, command, sandbox=None):
    """umview inside a view: ask the monitor for a view nested in this one,
    whose processes are this one and its future children, with the modules
    and engines of the options (and a sandbox's: then Landlock bounds this
    process first); then exec the command (docs/user-guide.md, "A view
    inside a view")."""
    from umview import control  # lazy, as in main

    refused = refuse_monitor_options(args)
    if refused:
        print(refused, file=sys.stderr)
        return 2
    request = {"modules": [list(s) if isinstance(s, tuple) else s for s in with_rootfs(args)],
               "viewname": args.viewname, "engines": [], "trace": []}
    ruleset = None
    if sandbox is not None:
        # in a view with a layered view of / already (a sandbox in a
        # sandbox), the sandbox's cow view starts from the real tree beside
        # it (viewfs "fresh"): a layered mount over a layered one is not
        # supported; elsewhere "fresh" changes nothing
        request["modules"] = [[n, {**o, "fresh": True} if n == "viewfs" and o["mount"].endswith(":/:cow") else o]
                              for n, o in sandbox.specs()] + request["modules"]
        request["anchor"] = [os.fsdecode(r) for r in sandbox.anchor_roots()]
        try:
            ruleset = sandbox.landlock(_module_classes(args.module))
        except (OSError, ValueError, ImportError) as exc:
            print(f"umview: --sandbox: cannot bound its writes with Landlock: {exc}", file=sys.stderr)
            return 2
    keep = []  # files opened here for the monitor to take (closed at exec: O_CLOEXEC)
    try:
        for name, options in trace_service(args):
            options = dict(options)
            path = options.pop("file")
            if path == "-":
                options["fd"] = 2
            else:
                try:
                    f = open(path, "w")  # as this process: in its view, with its rights
                except OSError as exc:
                    print(f"umview: module trace: {path}: {exc.strerror}", file=sys.stderr)
                    return 2
                keep.append(f)
                options["fd"] = f.fileno()
            request["trace"].append([name, options])
    except ValueError as exc:
        print(f"umview: {exc}\n{TRY_HELP}", file=sys.stderr)
        return 2
    for spec in args.engine:
        where, colon, cls = spec.rpartition(":")
        if colon and (where.endswith(".py") or os.sep in where):
            spec = os.path.abspath(where) + ":" + cls  # the monitor has another cwd
        request["engines"].append(spec)
    try:
        control.nest(request)
    except control.NotInView:  # the view went away meanwhile: nothing to nest in
        print(f"umview: {control.NOT_IN_VIEW}", file=sys.stderr)
        return 1
    except OSError as exc:
        # a request the monitor could not make (a module or engine that does
        # not load): as at top level, where the help is follows
        help_ = f"\n{TRY_HELP}" if exc.errno == errno.EINVAL else ""
        print(f"umview: {exc.strerror}{help_}", file=sys.stderr)
        return 2
    for f in keep:
        f.close()
    if ruleset is not None:
        try:
            ruleset.enforce()
        except OSError as exc:
            print(f"umview: --sandbox: cannot bound its writes with Landlock: {exc.strerror}", file=sys.stderr)
            return 2
        ruleset.close()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        where = rootfs_cwd(args)
        if where:
            os.chdir(where)  # now the view's: the root tree's /
        os.execvp(command[0], command)
    except FileNotFoundError:
        print(f"umview: {command[0]}: command not found", file=sys.stderr)
        return 127
    except OSError as exc:
        print(f"umview: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return 126


def _module_classes(specs):
    """The module classes of -p specs (Sandbox.landlock asks them)."""
    from umview.assembly import module_class
    from umview.control import parse_spec

    return [module_class(parse_spec(spec)[0]) for spec in specs]


def nested_sandbox(args, command):
    """--sandbox inside a view: the sandbox is a view nested in this one. Its
    directory is made here, in this view; a child asks for the nested view
    and runs the command (nested_main) while this process, which stays in
    the outer view, waits for it, writes --report and removes the
    directory, as a top-level umview does after its view."""
    import signal

    refused = refuse_monitor_options(args)
    if refused:
        print(refused, file=sys.stderr)
        return 2
    try:
        named = args.command[1:] if args.command[:1] == ["--"] else args.command  # before the rc files
        sandbox = Sandbox(args.sandbox, args.keep_layer, args.sandbox_keep + sandbox_needs(named, args.rootfs),
                          args.sandbox_write)
    except OSError as exc:
        print(f"umview: --sandbox: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    try:
        report = None
        if args.report:
            try:
                report = sys.stdout if args.report == "-" else open(args.report, "w")
            except OSError as exc:
                print(f"umview: --report {args.report}: {exc.strerror}", file=sys.stderr)
                return 2
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = nested_main(args, command, sandbox)
            finally:
                os._exit(code)
        # the terminal's signals reach the command too; a stop of it stops this
        # process (so the shell sees the job stop), and a continue goes on to it
        old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGQUIT)}
        for sig in (signal.SIGTERM, signal.SIGHUP):
            old[sig] = signal.signal(sig, lambda sig, _frame: os.kill(pid, sig))
        try:
            while True:
                _, status = os.waitpid(pid, os.WUNTRACED)
                if not os.WIFSTOPPED(status):
                    break
                os.kill(os.getpid(), signal.SIGSTOP)
                os.kill(pid, signal.SIGCONT)
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)
        if report is not None:
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 2 and not os.path.isdir(sandbox.layer):
                report.close()  # the view was refused (its message is out): nothing to report
            else:
                write_report(report, sandbox.layer)
    finally:
        sandbox.close()
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    from umview.monitor import die_like

    die_like(status)


def trace_service(args):
    """--trace FILE [--trace-calls ...] [--trace-kernel] as the trace service
    (modules/trace): [(name, options)], loaded before the -p modules so that
    FILE is a real path, not one of the view; none without --trace."""
    if not args.trace:
        if args.trace_calls or args.trace_kernel:
            raise ValueError("--trace-calls and --trace-kernel need --trace FILE")
        return []
    options = {"file": args.trace}
    if args.trace_calls:
        options["calls"] = ":".join(args.trace_calls.split(","))
    if args.trace_kernel:
        options["kernel"] = True
    return [("trace", options)]


def rc_files(args):
    """The rc files to run: -f FILE, else those of /etc/umviewrc and
    ~/.umviewrc that exist; none with --norc."""
    if args.norc:
        return []
    if args.rcfile:
        with open(args.rcfile):  # missing or unreadable: the user's error to see
            pass
        return [os.path.abspath(args.rcfile)]
    home = os.path.expanduser("~/.umviewrc")
    return [f for f in ("/etc/umviewrc", home) if os.path.isfile(f)]


def with_rc_files(command, args):
    """COMMAND, preceded by the rc files run inside the view: one sh sources
    them (so what they export reaches COMMAND) and execs COMMAND in place; a
    failing rc file stops there with its status."""
    files = rc_files(args)
    if not files:
        return command
    script = "".join(f'. "${i + 1}" || exit $?; ' for i in range(len(files))) \
        + f'shift {len(files)}; exec "$@"'
    return ["/bin/sh", "-c", script, "umviewrc", *files, *command]


class Sandbox:
    """--sandbox: the modules of a sandbox view and the directories they
    use. A fresh directory (under $TMPDIR) holds the private /tmp and,
    unless --keep-layer names one, the copy-on-write layer of /; it is
    removed when the view ends. The layer's files are the user's (a cow
    view copies up as the user; docs/modules.md, viewfs)."""

    def __init__(self, preset, keep_layer=None, keep=(), write=()):
        import tempfile

        from umview import janitor

        self.preset = preset
        self.bounds = None  # what Landlock bounds, in words (Sandbox.landlock)
        self.keep = [os.path.realpath(k) for k in keep]
        #: --sandbox-write's: real, and writable, whatever the preset
        self.write = [os.path.realpath(w) for w in write]
        # real paths: the engines rewrite to them, Landlock and
        # Call.run_anchored rely on them having no symlink
        self.dir = os.path.realpath(tempfile.mkdtemp(prefix=f"umview-sandbox-{os.getpid()}-"))
        janitor.remove_at_death(self.dir)  # also if umview is killed
        # every user of the view reaches the layer and the private /tmp
        # through it (a root sandbox whose command drops to another user);
        # nobody may list it
        os.chmod(self.dir, 0o711)
        self.tmp = os.path.join(self.dir, "tmp")
        # /dev/shm (POSIX shared memory and semaphores) likewise: the real
        # one is the machine's, as /tmp is
        self.shm = os.path.join(self.dir, "shm")
        for d in (self.tmp, self.shm):
            os.mkdir(d)
            os.chmod(d, 0o1777)  # as /tmp and /dev/shm
        if keep_layer is not None:
            os.makedirs(keep_layer, 0o755, exist_ok=True)  # as a fresh layer: the mode of /
            self.layer = os.path.realpath(keep_layer)
        else:
            self.layer = os.path.join(self.dir, "layer")
        if not os.path.realpath(self.layer).startswith("/tmp/"):
            # the layer is real to the kernel: under the sandbox's private
            # /tmp the view hides it, elsewhere a process of the sandbox can
            # change it directly (a symlink there is followed to a real file)
            print(f"umview: warning: the layer {self.layer} is reachable from inside the sandbox, which "
                  "can then change it directly; put it under /tmp (--keep-layer, TMPDIR) to hide it",
                  file=sys.stderr)

    def specs(self):
        """The -p specs of the sandbox, oldest first: the cow view of /, then
        /tmp over it (the layer and the private /tmp, both in $TMPDIR or
        elsewhere, are out of the view's reach when they lie in /tmp)."""
        # the private /tmp is a real directory: its files do not land in the
        # layer (nor fail under ro)
        own = {"except": ":".join([self.tmp, self.shm, *self.write])} \
            if ":" not in self.dir and "," not in self.dir else {}
        # the guard first: the oldest engine, it refuses what no module served;
        # on a kernel without Landlock's scopes (before 6.12) it keeps the
        # sandbox's signals and abstract connections inside itself
        guard = ("guard", {"daemons": "end"})
        from umview import landlock

        if landlock.abi() < 6:
            guard[1]["outside"] = "signals" if self.preset == "net" else "signals:abstract"

        try:
            cwd = os.path.realpath(os.getcwd())
        except OSError:
            cwd = "/"
        if self.preset == "ro":
            specs = [guard, ("viewfs", {"mount": "/:/:ro", **own})]
            written = any(cwd == w or cwd.startswith(w.rstrip("/") + "/") for w in self.write)
            if cwd != "/" and own and not written and not any(c in cwd for c in SPEC_SEPARATORS):
                # read-only but where the command works: the directory it
                # starts in is copy-on-write (make test builds its objects;
                # thrown away). Its layer is real to the ro mount, and the
                # mount is older than /tmp's, which would hide the layer
                layer = os.path.join(self.dir, "cwd-layer")
                specs[1][1]["except"] += f":{layer}"
                specs.append(("viewfs", {"mount": f"{layer}:{cwd}:cow"}))
        else:
            specs = [guard, ("viewfs", {"mount": f"{self.layer}:/:cow", **own})]
        # /dev/shm before /tmp: its source lies in $TMPDIR, which the next
        # mount hides
        specs.append(("viewfs", {"mount": f"{self.shm}:/dev/shm"}))
        tmp = {"mount": f"{self.tmp}:/tmp"}
        # the directory the sandbox starts in stays (copy-on-write): a
        # command run from a project under /tmp finds it; so do --sandbox-keep's
        keep = [d for d in dict.fromkeys([cwd, *self.keep, *self.write])
                if d.startswith("/tmp/") and not any(c in d for c in SPEC_SEPARATORS)]
        if keep:
            tmp["except"] = ":".join(keep)
        specs.append(("viewfs", tmp))
        if self.preset != "net":
            specs.append(("vnet", {"null": True}))
        return specs

    def landlock(self, modules=()):
        """The kernel's bound on where the sandbox writes (umview.landlock):
        beneath its directory (the private /tmp and /dev/shm, the layer) and
        --keep-layer's, files of devices and of /proc, and the files open for
        writing that the command inherits; or None (with a warning) if the
        kernel has no Landlock or a module of the view cannot work under it
        (Module.landlock_conflict)."""
        from umview import landlock

        def without(why):
            self.bounds = f"no Landlock ({why})"
            print(f"umview: warning: {why}: this sandbox runs without Landlock, and a process that races the "
                  "view on a path component can write a real file (docs/security.md)", file=sys.stderr)

        for m in modules:
            if m.landlock_conflict:
                return without(f"module {m.name}: {m.landlock_conflict}")
        version = landlock.abi()
        if not version:
            return without("the kernel has no Landlock (landlock(7))")
        # signals and abstract names stay inside (Linux 6.12); --sandbox=net
        # keeps the host's abstract sockets (a session bus, an X server)
        scoped = landlock.SCOPE_SIGNAL | (0 if self.preset == "net" else landlock.SCOPE_ABSTRACT_UNIX_SOCKET)
        try:
            ruleset = landlock.Ruleset(version, scoped)
        except OSError as exc:
            return without(str(exc))
        self.bounds = landlock.describe(version, ruleset.scoped)
        try:
            ruleset.allow(self.dir, landlock.TREE_WRITES)
            for w in self.write:
                ruleset.allow(w, landlock.TREE_WRITES)  # --sandbox-write's, real
            if self.preset != "ro" and not self.layer.startswith(self.dir + "/"):
                ruleset.allow(self.layer, landlock.TREE_WRITES)  # --keep-layer's (made already)
            for d in ("/dev", "/proc"):
                ruleset.allow(d, landlock.FILE_WRITES)
            for f in landlock.inherited_writable_files():
                ruleset.allow(f, landlock.FILE_WRITES)
        except OSError:
            ruleset.close()
            raise
        return ruleset

    def anchor_roots(self):
        """Where the sandbox's processes make and swap names, for
        Monitor.anchor_roots."""
        roots = [self.dir] + ([self.layer] if self.preset != "ro" else [])
        return tuple(os.fsencode(r).rstrip(b"/") + b"/" for r in dict.fromkeys(roots))

    def close(self):
        from umview import janitor

        janitor.remove_tree(self.dir)
        janitor.forget(self.dir)


def bare_preset(argv, option, presets):
    """argv with a bare option that takes an optional preset, followed by
    an argument that is not one (the command, a path), given its default
    preset instead: umview --sandbox make, pytest --umview-sandbox tests/."""
    argv = list(argv)
    for i, a in enumerate(argv):
        if a == "--":
            break
        if a == option and i + 1 < len(argv) and argv[i + 1] not in presets \
                and not argv[i + 1].startswith("-"):
            argv[i] = f"{option}=default"
            break
    return argv


def _not_a_layer_dir(path):
    """Why --keep-layer cannot use path (None: a new or empty directory, or a
    layer a view kept)."""
    from umview.modules.viewfs import layerfmt  # lazy: only with --keep-layer

    if not os.path.lexists(path):
        return None
    if not os.path.isdir(path):
        return "not a directory (give a new or empty directory, or one a view kept)"
    why = layerfmt.why_not_a_layer(path)
    return f"not a layer: {why} (give a new or empty directory, or one a view kept)" if why else None


def commands_dir():
    """The directory of the view's commands (um_add_service...) installed
    with this umview: its script's, or its interpreter's scripts directory
    (a venv, pip --user). None if none has them."""
    import sysconfig  # lazy: for the view's PATH only

    # the umview script's own directory (not python -c's cwd)
    script = [os.path.dirname(os.path.abspath(sys.argv[0]))] if os.path.basename(sys.argv[0]) == "umview" else []
    candidates = [*script, sysconfig.get_path("scripts")]
    user = f"{os.name}_user"
    if user in sysconfig.get_scheme_names():
        candidates.append(sysconfig.get_path("scripts", user))
    return next((d for d in candidates if os.access(os.path.join(d, "um_add_service"), os.X_OK)), None)


def commands_on_path(env):
    """Give env's PATH the directory of the view's commands at its end, if
    PATH does not find um_add_service (umview run by its path from a venv):
    that directory, or None."""
    import shutil  # lazy, as above

    path = env.get("PATH", os.defpath)
    if shutil.which("um_add_service", path=path):
        return None
    where = commands_dir()
    if where is None:
        return None
    env["PATH"] = f"{path}{os.pathsep}{where}" if path else where
    return where


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(bare_preset(sys.argv[1:] if argv is None else argv, "--sandbox", SANDBOX_PRESETS))
    if args.keep_layer and not args.sandbox:
        parser.error("--keep-layer goes with --sandbox")
    if args.report and not args.sandbox:
        parser.error("--report goes with --sandbox (for a layer of your own: umview-layer diff LAYER)")
    if args.sandbox == "ro" and (args.keep_layer or args.report):
        parser.error("--sandbox=ro has no layer: --keep-layer and --report go with the other presets")
    if args.sandbox_write and not args.sandbox:
        parser.error("--sandbox-write goes with --sandbox")
    for w in args.sandbox_write:
        if not os.path.isdir(w):
            parser.error(f"--sandbox-write {w}: not a directory")
        if os.path.realpath(w) == "/":
            parser.error(f"--sandbox-write {w}: that is the whole system (leave --sandbox out)")
        if any(c in os.path.realpath(w) for c in SPEC_SEPARATORS):
            parser.error(f"--sandbox-write {w}: a path with one of {SPEC_SEPARATORS!r} cannot be given")
    if args.keep_layer:
        why = _not_a_layer_dir(args.keep_layer)
        if why:
            parser.error(f"--keep-layer {args.keep_layer}: {why}")
    if args.host_paths is not None and not args.rootfs:
        parser.error("--host-paths goes with -r ROOTFS")
    if args.rootfs:
        try:
            rootfs_specs(args)  # its errors now, before anything runs
        except ValueError as exc:
            parser.error(str(exc))
    if args.qemu is not None:
        # its engine is the oldest of the view whatever the order (ForeignExec.newest)
        args.module.append("qemu" + (f",dir={os.path.abspath(args.qemu)}" if args.qemu else ""))
    if args.root or args.uid is not None or args.gid is not None:
        # the newest module: it sees the calls as the process made them and
        # the results (stat) as every other module left them
        args.module.append(f"fakeroot,uid={args.uid or 0},gid={args.gid or 0}")
        # and to the images -p fs mounts for a normal user, the user is the
        # fake user: the files the view makes there are recorded as its
        args.module = [f"{spec},owner={args.uid or 0}:{args.gid or 0}" if _fs_without_owner(spec) else spec
                       for spec in args.module]
    if args.engine or args.module or args.verbose or args.services or args.sandbox or args.rootfs:
        import logging  # lazy: 13 ms of start-up, for views that log (modules, engines)

        logging.basicConfig(format="umview: %(message)s",
                            level=logging.INFO if args.verbose else logging.WARNING)
    if args.list_modules:
        from umview.assembly import describe  # lazy, as the monitor below

        print("\n".join(describe()))
        return 0
    command = args.command
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        command = [os.environ.get("SHELL") or "/bin/sh"]
    try:
        command = with_rc_files(command, args)
    except OSError as exc:
        print(f"umview: rc file {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    if _in_view():
        return nested_sandbox(args, command) if args.sandbox else nested_main(args, command)
    commands_on_path(os.environ)
    sandbox = None
    if args.sandbox:
        keep = sandbox_needs(args.command[1:] if args.command[:1] == ["--"] else args.command, args.rootfs)
        try:
            sandbox = Sandbox(args.sandbox, args.keep_layer, args.sandbox_keep + keep, args.sandbox_write)
        except OSError as exc:
            print(f"umview: --sandbox: {exc.filename}: {exc.strerror}", file=sys.stderr)
            return 2
    report = None
    if args.report:
        try:
            report = sys.stdout if args.report == "-" else open(args.report, "w")  # now: a bad path fails early
        except OSError as exc:
            print(f"umview: --report {args.report}: {exc.strerror}", file=sys.stderr)
            sandbox.close()
            return 2
    try:
        result = run_view(args, command, sandbox)
        if report is not None and result[0] == "status":
            write_report(report, sandbox.layer, sandbox.bounds)
    finally:
        if sandbox is not None:
            sandbox.close()  # after the modules closed theirs (the listing directories)
    if result[0] == "exit":
        return result[1]
    from umview.monitor import die_like

    die_like(result[1])


# what a sandbox makes its own, hiding the real one, and the characters a
# kept path cannot have (a viewfs spec's separators)
PRIVATE_DIRS = ("/tmp", "/dev/shm")
SPEC_SEPARATORS = ":;,"


def sandbox_needs(command, rootfs=None):
    """The directories under /tmp a sandbox keeps (copy-on-write, as
    --sandbox-keep) because the command needs them: its program's, its #!
    interpreter's (a venv's bin/pytest needs the venv), those of the paths
    its arguments name, -r's tree; each the whole directory below /tmp it
    lies in (/tmp/venv, /tmp/project: what is beside a file is often needed
    too, and a lookup needs its directories). A path a sandbox hides all the
    same gets a line on stderr that says so."""
    import shutil  # lazy: only with --sandbox

    found = []
    program = shutil.which(command[0]) if command else None
    if program:
        program = os.path.abspath(program)
        found.append(program)
        try:
            with open(program, "rb") as f:
                head = f.read(256)
        except OSError:
            head = b""
        if head.startswith(b"#!") and head[2:].split():
            found.append(os.fsdecode(head[2:].split()[0]))
    for arg in command[1:]:
        for text in dict.fromkeys((arg, arg.partition("=")[2])):  # --opt=PATH too
            if text and os.path.lexists(text):
                found.append(os.path.abspath(text))
    if rootfs:
        found.append(os.path.abspath(rootfs))
    keep = []
    for path in found:
        for p in dict.fromkeys((path, os.path.realpath(path))):
            private = next((d for d in PRIVATE_DIRS if p.startswith(d + "/")), None)
            if private is None:
                continue
            if private == "/tmp":
                p = "/tmp/" + p[len("/tmp/"):].split("/")[0]
            if private == "/tmp" and not any(c in p for c in SPEC_SEPARATORS):
                keep.append(p)
            else:
                why = (f"its name has one of {SPEC_SEPARATORS!r}" if private == "/tmp"
                       else "the sandbox's /dev/shm is its own")
                print(f"umview: --sandbox hides {p} from the command ({why}): move it out of {private}",
                      file=sys.stderr)
    return list(dict.fromkeys(keep))


def rootfs_specs(args):
    """-r ROOTFS: a viewfs mount of ROOTFS over /, except the host paths."""
    if not args.rootfs:
        return []
    root = os.path.abspath(args.rootfs)
    if not os.path.isdir(root):
        raise ValueError(f"-r {args.rootfs}: not a directory (a distribution's root tree, e.g. made with "
                         "debootstrap --variant=minbase bookworm DIR)")
    if root == "/":
        raise ValueError("-r /: that is the real root already")
    if args.host_paths is None:
        home = os.environ.get("HOME")
        host = list(ROOTFS_HOST_PATHS) + ([home] if home and home.startswith("/") and home != "/" else [])
    else:
        host = [p for p in args.host_paths.split(":") if p]
        bad = [p for p in host if not p.startswith("/")]
        if bad:
            raise ValueError(f"--host-paths: {bad[0]!r} is not an absolute path")
    host = [os.path.normpath(p) for p in host]
    if any(p == "/" for p in host):
        raise ValueError("--host-paths: / would be the whole host")
    # the guest's root tree, except what stays the host's (and the root tree
    # itself, if it lies under one of those: /tmp/rootfs shows as /tmp/rootfs)
    options = {"mount": f"{root}:/"}
    if host:
        options["except"] = ":".join(host)
    return [("viewfs", options)]


def with_rootfs(args):
    """The -p modules' specs with -r's mount among them, in the order they
    load: -r first (the -p mounts are made in the tree), unless its tree lies
    in a mount a -p module makes at start (an image mounted with -p fs): it
    is then found through that mount, so it loads after that module."""
    rootfs = rootfs_specs(args)
    if not rootfs:
        return list(args.module)
    root = os.path.abspath(args.rootfs)
    under = [i for i, spec in enumerate(args.module) if _mounts_over(spec, root)]
    k = under[-1] + 1 if under else 0
    return args.module[:k] + rootfs + args.module[k:]


def _parsed(spec):
    """A -p spec's (name, options); (None, {}) for one the module's loading
    will refuse (it says why then)."""
    from umview.control import parse_spec  # lazy: cli starts without the package's modules
    try:
        return parse_spec(spec)
    except ValueError:
        return None, {}


def _fs_without_owner(spec):
    name, options = _parsed(spec)
    return name == "fs" and "owner" not in options


def _mounts_over(spec, path):
    """Does the -p spec mount something at start on path or above it?"""
    for item in str(_parsed(spec)[1].get("mount") or "").split(";"):
        parts = item.split(":")
        if len(parts) >= 2 and parts[1]:
            target = os.path.abspath(parts[1])
            if path == target or path.startswith(target.rstrip("/") + "/"):
                return True
    return False


def rootfs_cwd(args):
    """The directory a -r view starts in: the current one if it is one of
    the host's paths the view keeps, else the root tree's /."""
    if not args.rootfs:
        return None
    here = os.getcwd()
    keep = [p for p in rootfs_specs(args)[0][1].get("except", "").split(":") if p]
    if any(here == p or here.startswith(p.rstrip("/") + "/") for p in keep):
        return None
    return "/"


def write_report(out, layer, bounds=None):
    """--report: what the layer changes in the real tree, as JSON to out
    (closed unless stdout) and a summary on stderr, with what bounded the
    sandbox (bounds: Sandbox.bounds)."""
    import json

    from umview.modules.viewfs import layerdiff

    try:
        changes = layerdiff.changes(layer, "/", "/")
    except OSError as exc:
        print(f"umview: --report: cannot read the layer {layer}: {exc.strerror}", file=sys.stderr)
        return
    try:
        json.dump(changes, out, indent=1)
        out.write("\n")
        out.flush()
    except OSError as exc:
        print(f"umview: --report: {exc.strerror}", file=sys.stderr)
    finally:
        if out is not sys.stdout:
            out.close()
    if bounds:
        print(f"umview: sandbox bounds: {bounds}", file=sys.stderr)
    print("umview: sandbox changes: " + layerdiff.summary(changes), file=sys.stderr)


def run_view(args, command, sandbox):
    """Run command in a view made of the options: ("status", its wait
    status), or ("exit", umview's exit code) if it could not run."""
    # The C core loads with these (umview.core): imported here, not at the
    # top, so that a missing or stale build is a message and --help needs none.
    try:
        from umview.monitor import Monitor
        from umview.stats import Stats
    except ImportError as exc:
        print(f"umview: {exc}", file=sys.stderr)
        return ("exit", 1)
    modules = []
    try:
        from umview.assembly import Reserve, attach, close, load_service  # (C core: as above)
        from umview.control import parse_spec
        from umview.servicecontrol import ServiceControl

        control = ServiceControl(loader=load_service, view_name=args.viewname, engine_loader=load_engine)
        engines = [Reserve()] if args.services else []
        for spec in trace_service(args) + (sandbox.specs() if sandbox else []) + with_rootfs(args):
            module, new = load_service(spec, engines)
            modules.append(module)
            engines += new
            control.register(spec[0] if isinstance(spec, tuple) else parse_spec(spec)[0], module, new)
    except (ValueError, ImportError) as exc:
        print(f"umview: {exc}\n{TRY_HELP}", file=sys.stderr)
        if modules:
            close(modules)  # what the modules loaded before made (an image's mount, a layer's listings)
        return ("exit", 2)
    try:
        engines += [load_engine(s) for s in args.engine]
    except Exception as exc:  # noqa: BLE001 - any failure to load is the user's to see
        print(f"umview: cannot load engine: {exc}\n{TRY_HELP}", file=sys.stderr)
        return ("exit", 2)

    monitor = Monitor(engines, spin=args.spin, control=control)
    if sandbox is not None:
        monitor.anchor_roots = sandbox.anchor_roots()
        try:
            monitor.landlock = sandbox.landlock(modules)
        except OSError as exc:
            print(f"umview: --sandbox: cannot bound its writes with Landlock: {exc}", file=sys.stderr)
            close(control.modules())
            return ("exit", 2)
    try:
        attach(modules, monitor.view)
        where = rootfs_cwd(args)
        if where:
            os.chdir(where)  # the real /, which the view shows as the root tree's
        status = monitor.run(command)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            print(f"umview: {command[0]}: command not found", file=sys.stderr)
            return ("exit", 127)
        print(f"umview: cannot run {command[0]}: {exc.strerror}" + why_not_traced(exc.errno), file=sys.stderr)
        return ("exit", 126)
    except ValueError as exc:
        print(f"umview: {exc}", file=sys.stderr)
        return ("exit", 2)
    finally:
        close(control.modules())
        if monitor.landlock is not None:
            monitor.landlock.close()
    if args.stats or args.stats_file:
        stats = Stats.from_core(monitor.table)
        if args.stats:
            print(stats.format(), file=sys.stderr)
        if args.stats_file:
            import json  # lazy: only for --stats-file

            with open(args.stats_file, "a") as f:
                f.write(json.dumps({"command": command, **stats.as_dict()}) + "\n")
    from umview.core import lib  # loaded by the monitor already

    ended_by = lib.um_term_signal()
    if ended_by:
        return ("exit", 128 + ended_by)  # SIGTERM, SIGINT or SIGHUP sent to umview ended the view
    return ("status", status)


if __name__ == "__main__":
    sys.exit(main())
