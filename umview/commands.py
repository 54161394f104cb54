"""vumount and vuumount: mount(2) and umount2(2) with mount(8)'s syntax, for
users whose util-linux mount refuses (not root) inside a umview view.

    vumount -t viewfs [-o OPTIONS] SOURCE TARGET
    vuumount TARGET
"""
import argparse
import ctypes
import ctypes.util
import errno
import os
import sys

from umview import control
from umview.cliparse import Parser

MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
FLAG_OPTIONS = {"ro": MS_RDONLY, "remount": MS_REMOUNT, "bind": MS_BIND}


def _hint(fstype=None):
    """Why the kernel, not a module, answered a mount or umount."""
    if not control.in_view():
        return ("not inside a umview view, so the kernel answered: start one with a module that serves "
                "the type (`umview -p fs` for images, archives and tmpfs; `umview -p viewfs` for directories)")
    if fstype is None:
        return "not a mount point of this view's modules: the kernel answered"
    return (f"unless a service said why above, none of this view's serves type {fstype!r} and the kernel "
            "answered (um_ls_service lists the services; `um_add_service fs` serves images, archives, tmpfs)")


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def vumount_parser():
    p = Parser(prog="vumount", description="mount(2) inside a umview view, "
                                "with mount(8)'s syntax (no root needed for umview's modules)")
    p.add_argument("-t", "--types", default="auto", metavar="TYPE",
                   help="filesystem type, e.g. viewfs, ext4, iso9660, tmpfs (default: auto; the fs module tells "
                        "an image's or archive's type from its content)")
    p.add_argument("-o", "--options", default="", metavar="OPTS",
                   help="comma-separated options (ro, bind, remount set flags; the rest is passed as data)")
    p.add_argument("source")
    p.add_argument("target")
    return p


def vumount_main(argv=None):
    p = vumount_parser()
    args = p.parse_args(argv)
    flags, data = 0, []
    for opt in filter(None, args.options.split(",")):
        if opt in FLAG_OPTIONS:
            flags |= FLAG_OPTIONS[opt]
        else:
            data.append(opt)
    r = _libc().mount(os.fsencode(args.source), os.fsencode(args.target), os.fsencode(args.types),
                      ctypes.c_ulong(flags), ",".join(data).encode() or None)
    if r != 0:
        e = ctypes.get_errno()
        print(f"vumount: mounting {args.source} on {args.target} failed: {os.strerror(e)}", file=sys.stderr)
        if e in (1, 19):  # EPERM, ENODEV: the kernel, not a module, answered
            print(f"vumount: {_hint(args.types)}", file=sys.stderr)
        return 32
    return 0


def vuumount_parser():
    p = Parser(prog="vuumount", description="umount2(2) inside a umview view")
    p.add_argument("-f", "--force", action="store_true", help="MNT_FORCE")
    p.add_argument("-l", "--lazy", action="store_true", help="MNT_DETACH")
    p.add_argument("target")
    return p


def vuumount_main(argv=None):
    p = vuumount_parser()
    args = p.parse_args(argv)
    flags = (1 if args.force else 0) | (2 if args.lazy else 0)
    r = _libc().umount2(os.fsencode(args.target), flags)
    if r != 0:
        e = ctypes.get_errno()
        print(f"vuumount: {args.target}: {os.strerror(e)}", file=sys.stderr)
        if e in (1, 22):
            print(f"vuumount: {_hint()}", file=sys.stderr)
        return 32
    return 0


# --- the control channel's commands (umview.control, docs/services.md) ---

def _control_parser(prog, description, epilog=None):
    return Parser(prog=prog, description=description, epilog=epilog,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def _run_control(prog, action, quiet=False):
    """Run action(); outside a view, or on a refusal, a message and status 1."""
    try:
        return action() or 0
    except control.NotInView:
        if not quiet:
            print(f"{prog}: {control.NOT_IN_VIEW}", file=sys.stderr)
        return 1
    except OSError as exc:
        if not quiet:
            print(f"{prog}: {exc.strerror} ({errno_name(exc.errno)})", file=sys.stderr)
        return 1


def errno_name(code):
    return errno.errorcode.get(code, str(code))


def um_add_service_parser():
    p = _control_parser("um_add_service", "Load a module into the running view: its engines are "
                        "added, each with a new epoch (the newest).",
                        "example: um_add_service viewfs; mount -t viewfs -o cow /tmp/l /\n"
                        "Calls the module claims that the view's filter does not trap are added "
                        "by a filter stacked on every process of the view.")
    p.add_argument("-p", "--permanent", action="store_true", help="um_del_service will refuse to remove it")
    p.add_argument("spec", metavar="MODULE[,OPTIONS]", help="as umview -p (umview --list-modules)")
    return p


def um_add_service_main(argv=None):
    p = um_add_service_parser()
    args = p.parse_args(argv)
    return _run_control(p.prog, lambda: control.add_service(args.spec, args.permanent))


def um_attach_parser():
    p = _control_parser("um_attach", "Bring a process started outside into this view: from now "
                        "on it and its future children see what the view's processes see. The "
                        "rules of ptrace apply (the same user, or CAP_SYS_PTRACE); the process "
                        "is killed if the view's monitor dies, and it gets no_new_privs unless "
                        "it is privileged.",
                        "example: sleep 1000 & (outside); um_attach $! (inside)")
    p.add_argument("pid", metavar="PID", type=int)
    return p


def um_attach_main(argv=None):
    p = um_attach_parser()
    args = p.parse_args(argv)
    return _run_control(p.prog, lambda: control.attach(args.pid))


def um_del_service_parser():
    p = _control_parser("um_del_service", "Remove a service (the newest of that name) from the "
                        "running view. EBUSY while it is permanent or its mounts exist.")
    p.add_argument("name", metavar="MODULE")
    return p


def um_del_service_main(argv=None):
    p = um_del_service_parser()
    args = p.parse_args(argv)
    return _run_control(p.prog, lambda: control.del_service(args.name))


def um_ls_service_parser():
    p = _control_parser("um_ls_service", "List the services of the running view, oldest first: "
                        "name and description (and 'permanent'); in a nested view, those of the "
                        "outer views first (flagged 'outer').")
    p.add_argument("-e", "--engines", action="store_true",
                   help="list the engines instead, in the order a call enters them (newest first): "
                        "epoch, rank (0 plain, 1 and 2 stay newest), engine, its service; in a "
                        "nested view, the view each belongs to")
    return p


def um_ls_service_main(argv=None):
    p = um_ls_service_parser()
    args = p.parse_args(argv)

    def show():
        if args.engines:
            engines = control.list_engines()
            nested = len({view for *_, view in engines}) > 1
            for epoch, rank, name, service, view in engines:
                print(f"{epoch:5} {rank} {name}" + (f"  [{service}]" if service else "")
                      + (f"  (view {view})" if nested else ""))
            return
        for name, desc, flags in control.list_services():
            print(f"{name}: {desc}" + (f" [{flags}]" if flags else ""))

    return _run_control(p.prog, show)


def um_fsalias_parser():
    p = _control_parser("um_fsalias", "Make mount -t ALIAS reach the service of FSTYPE; with no "
                        "FSTYPE, delete ALIAS.", "example: um_fsalias bind viewfs; mount -t bind SRC DST")
    p.add_argument("alias", metavar="ALIAS")
    p.add_argument("fstype", metavar="FSTYPE", nargs="?")
    return p


def um_fsalias_main(argv=None):
    p = um_fsalias_parser()
    args = p.parse_args(argv)
    return _run_control(p.prog, lambda: control.fsalias(args.alias, args.fstype))


def viewname_parser():
    p = _control_parser("viewname", "Show the view's name, or set it to NAME.")
    p.add_argument("-p", "--print", action="store_true", help="print the name (after setting it, with NAME)")
    p.add_argument("-q", "--quiet", action="store_true", help="no message outside a view (the status says it)")
    p.add_argument("name", metavar="NAME", nargs="?")
    return p


def viewname_main(argv=None):
    p = viewname_parser()
    args = p.parse_args(argv)

    def act():
        if args.name is not None:
            control.set_viewname(args.name)
        if args.name is None or args.print:
            print(control.get_viewname())

    return _run_control(p.prog, act, quiet=args.quiet)


UNAME_FIELDS = (("s", "kernel-name"), ("n", "nodename"), ("r", "kernel-release"), ("v", "kernel-version"),
                ("m", "machine"), ("p", "processor"), ("i", "hardware-platform"), ("o", "operating-system"))
VIEW_FIELDS = (("U", "serverid", "the monitor's id (its pid)"), ("V", "viewid", "the view's id"),
               ("N", "viewname", "the view's name"))


def vuname_parser():
    p = _control_parser("vuname", "Print system information as uname(1) does, and which view "
                        "this is: -U server id, -V view id, -N view name. Outside a view, uname.")
    p.add_argument("-a", "--all", action="store_true", help="all of the below (the view's fields in a view)")
    for short, long in UNAME_FIELDS:
        p.add_argument(f"-{short}", f"--{long}", action="store_true", dest=short, help=f"as uname -{short}")
    for short, long, what in VIEW_FIELDS:
        p.add_argument(f"-{short}", f"--{long}", action="store_true", dest=short, help=what)
    return p


def vuname_main(argv=None):
    """uname, plus the view: outside a view it is uname."""
    import subprocess  # lazy: only um_attach's re-exec needs it

    p = vuname_parser()
    args = p.parse_args(argv)
    std = [f"-{s}" for s, _ in UNAME_FIELDS if getattr(args, s)]
    if args.all:
        std = ["-a"]
    view = [s for s, _, _ in VIEW_FIELDS if getattr(args, s) or args.all]
    try:
        info = control.view_info()
    except control.NotInView:
        info = None
    if info is None:
        if view and not args.all:
            print(f"vuname: -{''.join(view)}: {control.NOT_IN_VIEW}", file=sys.stderr)
            return 1
        os.execvp("uname", ["uname"] + std)
    if not std and not view:
        std = ["-s"]
    out = []
    if std:
        r = subprocess.run(["uname"] + std, stdout=subprocess.PIPE)
        if r.returncode:
            return r.returncode
        out.append(r.stdout.decode().rstrip("\n"))
    values = dict(zip("UVN", info))
    out += [str(values[s]) for s in view]
    print(" ".join(out))
    return 0



#: the parser of each command of this module, by its name (man pages and completion: umview/manuals.py)
PARSERS = {"vumount": vumount_parser, "vuumount": vuumount_parser, "um_add_service": um_add_service_parser,
           "um_del_service": um_del_service_parser, "um_ls_service": um_ls_service_parser,
           "um_fsalias": um_fsalias_parser, "um_attach": um_attach_parser, "viewname": viewname_parser,
           "vuname": vuname_parser}
