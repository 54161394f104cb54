"""vumount and vuumount: mount(2) and umount2(2) with mount(8)'s syntax, for
users whose util-linux mount refuses (not root) inside a umview view.

    vumount -t viewfs [-o OPTIONS] SOURCE TARGET
    vuumount TARGET
"""
import argparse
import ctypes
import ctypes.util
import os
import sys

MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
FLAG_OPTIONS = {"ro": MS_RDONLY, "remount": MS_REMOUNT, "bind": MS_BIND}
HINT = ("is this a umview view with a module for that type? "
        "(e.g. `umview -p viewfs`; outside a view the kernel answers)")


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def vumount_main(argv=None):
    p = argparse.ArgumentParser(prog="vumount", description="mount(2) inside a umview view, "
                                "with mount(8)'s syntax (no root needed for umview's modules)")
    p.add_argument("-t", "--types", required=True, metavar="TYPE", help="filesystem type, e.g. viewfs")
    p.add_argument("-o", "--options", default="", metavar="OPTS",
                   help="comma-separated options (ro, bind, remount set flags; the rest is passed as data)")
    p.add_argument("source")
    p.add_argument("target")
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
            print(f"vumount: {HINT}", file=sys.stderr)
        return 32
    return 0


def vuumount_main(argv=None):
    p = argparse.ArgumentParser(prog="vuumount", description="umount2(2) inside a umview view")
    p.add_argument("-f", "--force", action="store_true", help="MNT_FORCE")
    p.add_argument("-l", "--lazy", action="store_true", help="MNT_DETACH")
    p.add_argument("target")
    args = p.parse_args(argv)
    flags = (1 if args.force else 0) | (2 if args.lazy else 0)
    r = _libc().umount2(os.fsencode(args.target), flags)
    if r != 0:
        e = ctypes.get_errno()
        print(f"vuumount: {args.target}: {os.strerror(e)}", file=sys.stderr)
        if e in (1, 22):
            print(f"vuumount: {HINT}", file=sys.stderr)
        return 32
    return 0
