"""Partitions of a disk image: which bytes of the image a mount serves.

The partition table (MBR or GPT, with logical partitions) is read by
util-linux's ``sfdisk --json``; a partition is chosen by number
(``part=2``), by its GPT name (``part=root``) or by its type
(``parttype=linux``, a code, a GUID or a name of TYPES). ``offset=BYTES``
and ``sizelimit=BYTES`` name a range as mount(8)'s loop options do.

The chosen bytes are shown to the filesystem's server as a file of their
own by nbdkit's offset filter behind nbdfuse (Debian's ``nbdkit`` and
``libnbd-bin``): the server reads and writes those bytes only, and no loop
device (root's) is needed. fs's helper runs that pair on the mount point
first, and the server opens the file there before its own mount covers it.
"""
import errno
import json
import os
import re
import shutil
import subprocess

#: the mount options this file reads (the server never sees them)
OPTIONS = ("part", "parttype", "offset", "sizelimit")

#: partition types by name: the MBR codes and GPT GUIDs that sfdisk reports
TYPES = {
    "linux": {"83", "0FC63DAF-8483-4772-8E79-3D69D8477DE4"},
    "efi": {"ef", "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"},
    "fat": {"1", "4", "6", "b", "c", "e", "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7"},
    "swap": {"82", "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F"},
    "linux-root-x86-64": {"4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709"},
    "linux-root-arm64": {"B921B045-1DF0-41C3-AF44-4C6F280D3FAE"},
    "extended": {"5", "f", "85"},
}
#: the server of the chosen bytes: nbdfuse names its file so
FILE = "nbd"


class Partition:
    __slots__ = ("number", "start", "size", "type", "name")

    def __init__(self, number, start, size, ptype, name):
        self.number, self.start, self.size, self.type, self.name = number, start, size, ptype, name

    def type_name(self):
        for name, codes in TYPES.items():
            if self.type.lower() in {c.lower() for c in codes}:
                return name
        return self.type


def read_table(image):
    """The partitions of the disk image at path image (sfdisk --json), in
    the table's order; [] if it has no partition table. OSError with what
    to do if sfdisk is missing or the image cannot be read."""
    sfdisk = shutil.which("sfdisk") or next((p for p in ("/usr/sbin/sfdisk", "/sbin/sfdisk") if os.path.exists(p)),
                                             None)
    if sfdisk is None:
        raise OSError(errno.ENOENT, "reading a partition table needs sfdisk (apt-get install fdisk)")
    with open(image, "rb"):
        pass  # the image's own errno (ENOENT, EACCES) before sfdisk's words
    r = subprocess.run([sfdisk, "--json", os.fsdecode(image)], capture_output=True, timeout=60)
    if r.returncode != 0 or not r.stdout.strip():
        return []  # no partition table: "does not contain a recognized partition table"
    table = json.loads(r.stdout)["partitiontable"]
    unit = int(table.get("sectorsize", 512))
    device = table.get("device", "")
    out = []
    for i, p in enumerate(table.get("partitions", ())):
        node = p.get("node", "")
        m = re.fullmatch(r"p?(\d+)", node[len(device):]) if node.startswith(device) else None
        number = int(m.group(1)) if m else i + 1
        out.append(Partition(number, int(p["start"]) * unit, int(p["size"]) * unit, str(p.get("type", "")),
                             p.get("name", "")))
    return out


def _bytes(text, what):
    try:
        value = int(str(text), 0)
    except ValueError:
        raise OSError(errno.EINVAL, f"{what}={text}: a number of bytes") from None
    if value < 0:
        raise OSError(errno.EINVAL, f"{what}={text}: a number of bytes")
    return value


def region(image, options):
    """(offset, size or None, what) for the mount options of image (a list
    of "key=value" strings), or None if they name no part of it. OSError
    EINVAL saying why if they name none that exists."""
    opts = dict(o.split("=", 1) for o in options if "=" in o and o.split("=", 1)[0] in OPTIONS)
    if not opts:
        return None
    if ("offset" in opts or "sizelimit" in opts) and ("part" in opts or "parttype" in opts):
        raise OSError(errno.EINVAL,
                      "offset= and sizelimit= name bytes, part= and parttype= a partition: one or the other")
    if "part" not in opts and "parttype" not in opts:
        offset = _bytes(opts.get("offset", "0"), "offset")
        size = _bytes(opts["sizelimit"], "sizelimit") if "sizelimit" in opts else None
        return offset, size, f"bytes {offset}" + (f"-{offset + size}" if size is not None else "-")
    parts = read_table(image)
    name = os.fsdecode(image)
    if not parts:
        raise OSError(errno.EINVAL, f"{name} has no partition table (sfdisk finds none)")
    chosen = parts
    if "part" in opts:
        want = opts["part"]
        chosen = [p for p in chosen if (str(p.number) == want if want.isdigit() else p.name == want)]
    if "parttype" in opts:
        want = opts["parttype"].lower()
        codes = {c.lower() for c in TYPES.get(want, {want})}
        chosen = [p for p in chosen if p.type.lower() in codes]
    listing = "; ".join(f"{p.number}: {p.type_name()}" + (f" {p.name!r}" if p.name else "") for p in parts)
    if not chosen:
        raise OSError(errno.EINVAL, f"{name}: no partition {','.join(f'{k}={v}' for k, v in opts.items())} "
                      f"(it has {listing})")
    if len(chosen) > 1:
        raise OSError(errno.EINVAL, f"{name}: {len(chosen)} partitions of type {opts['parttype']} "
                      f"({', '.join(str(p.number) for p in chosen)}): choose one with part=N")
    p = chosen[0]
    return p.start, p.size, f"partition {p.number}"


def server_argv(image, offset, size, target, readonly=False):
    """nbdfuse serving image's bytes [offset, offset+size) as target/nbd
    (read-only if readonly)."""
    for tool, package in (("nbdfuse", "libnbd-bin"), ("nbdkit", "nbdkit")):
        if not shutil.which(tool):
            raise OSError(errno.ENODEV, f"a partition or an offset needs {tool} (apt-get install {package})")
    ro = ["-r"] if readonly else []
    argv = ["nbdfuse", *ro, os.fsdecode(target), "--command", "nbdkit", "-s", *ro, "--exit-with-parent",
            "file", os.fsdecode(image), "--filter=offset", f"offset={offset}"]
    if size is not None:
        argv.append(f"range={size}")
    return argv
