"""umview-image: what a disk image holds, and how a view mounts it.

    umview-image ls disk.img [--json]

One line per partition (util-linux's sfdisk reads the table): its number,
where it starts and its size in bytes, its type and GPT name, the
filesystem found at its start, and the mount option that chooses it. An
image without a partition table is one filesystem. (The fs module's
command: modules/fs/partitions.py reads the table.)
"""
import argparse
import json
import os
import sys

from umview.cliparse import Parser

# (the fs module, which loads the C core, is imported when a command runs:
# the parser alone makes the man page at build time, before the core is built)


def build_parser():
    p = Parser(
        prog="umview-image",
        description="List the partitions of a disk image and what a view would mount of each "
        "(umview -p fs,mount=IMAGE:DIR,part=N).",
        epilog="examples:\n"
        "  umview-image ls disk.img\n"
        "  umview -p fs,mount=disk.img:/mnt,part=2 bash\n"
        "  vumount -t ext4 -o part=root disk.img /mnt     (inside a view with -p fs)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = sub.add_parser("ls", help="list the partitions and the filesystem of each",
                       description="List the partitions of IMAGE: number, start and size in bytes, type, GPT "
                       "name, the filesystem found there, and the option that mounts it.")
    a.add_argument("image", metavar="IMAGE", help="a disk image (a file, or a block device you may read)")
    a.add_argument("--json", action="store_true", help="print the list as JSON")
    return p


def _rows(image):
    from umview.modules.fs import SERVERS, detect_type, partitions

    parts = partitions.read_table(image)
    if not parts:
        fs = detect_type(image)
        return [{"number": None, "start": 0, "size": os.stat(image).st_size, "type": None, "name": None,
                 "filesystem": fs, "server": SERVERS.get(fs or ""), "option": ""}]
    rows = []
    for p in parts:
        fs = None if p.type_name() == "extended" else detect_type(image, p.start)
        rows.append({"number": p.number, "start": p.start, "size": p.size, "type": p.type_name(),
                     "name": p.name or None, "filesystem": fs, "server": SERVERS.get(fs or ""),
                     "option": f"part={p.number}"})
    return rows


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        rows = _rows(args.image)
    except OSError as exc:
        print(f"umview-image: {args.image}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return 0
    if rows[0]["number"] is None:
        fs = rows[0]["filesystem"]
        print(f"{args.image}: no partition table; " + (f"one {fs} filesystem ({rows[0]['server']})" if fs else
                                                        "no filesystem umview knows"))
        return 0
    print(f"{'N':>3} {'start':>12} {'size':>12}  {'type':<18} {'name':<12} {'filesystem':<10} mount option")
    for r in rows:
        fs = r["filesystem"] or "-"
        print(f"{r['number']:>3} {r['start']:>12} {r['size']:>12}  {r['type'][:18]:<18} {(r['name'] or '-')[:12]:<12} "
              f"{fs:<10} {r['option'] if r['filesystem'] else '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
