"""umview's syscall layer: the table (``syscalls.table``) and what is derived from it.

``spec(name, abi)`` is everything umview knows about one system call as one
ABI lays it out: its arguments (index, kind, name), its path slots (each path
argument with the dirfd it is relative to), whether it writes the file system,
its nofollow rule per path, the flags argument that may carry AT_EMPTY_PATH,
and its trace classes. The C core's tables (``umview.monitor.SyscallTable``),
engines' claim sets (``PATH_SYSCALLS``, ``FD_SYSCALLS``), the trace engine's
classes and docs/path-syscalls.md are all computed from it, so a fact about a
call is written once, in ``syscalls/table.py``.

Engines do not read specs themselves: a ``Call`` decodes its arguments by
name through its spec (``call.flags``, ``call.mode``, ``call.path``), the same
way on x86_64, i386 and x32.
"""
from functools import lru_cache

from umview.syscalls import table
from umview.syscalls.table import (ALWAYS, AT_EMPTY_PATH, AT_FDCWD, AT_SYMLINK_FOLLOW,
                                   AT_SYMLINK_NOFOLLOW, EMPTY_PATH_FLAGS, I386_VARIANTS, READ_ONLY,
                                   WRITES, X32_VARIANTS, calls, nofollow_rule)

__all__ = ["ABIS", "ALWAYS", "AT_EMPTY_PATH", "AT_FDCWD", "AT_SYMLINK_FOLLOW", "AT_SYMLINK_NOFOLLOW",
           "Arg", "EMPTY_PATH_FLAGS", "calls", "FD_SYSCALLS", "PATH_SYSCALLS", "READ_ONLY", "Spec", "WRITES",
           "follows_last", "nofollow_rule", "path_args", "spec", "trace_classes", "variants"]

#: the ABIs an x86_64 tracer meets, as ``arch`` names them
ABIS = ("x86_64", "i386", "x32")

#: every path-carrying call, on any ABI (the claim set of a path module)
PATH_SYSCALLS = frozenset(table.PATH_ARGS) | frozenset(table.I386_PATH_ARGS)
#: every call with an fd or dirfd argument
FD_SYSCALLS = frozenset(table.FD_ARGS) | frozenset(table.I386_FD_ARGS)

_KIND_NAMES = {"oflags": "flags", "atflags": "flags", "str": "string"}


class Arg:
    """One argument of a call on one ABI: its register index, kind and name.
    ``bits``: how many low bits of the register the kernel reads."""

    __slots__ = ("index", "kind", "name", "bits", "signed")

    def __init__(self, index, kind, name, bits, signed):
        self.index, self.kind, self.name, self.bits, self.signed = index, kind, name, bits, signed

    def decode(self, raw):
        value = raw & ((1 << self.bits) - 1)
        if self.signed and value >> (self.bits - 1):
            value -= 1 << self.bits
        return value

    def __repr__(self):
        return f"Arg({self.index}, {self.kind!r}, {self.name!r})"


class Spec:
    """What umview knows of call ``name`` on ``abi`` (see the module docstring)."""

    def __init__(self, name, abi):
        self.name = name
        self.abi = abi
        kinds = table.signature(name, abi) if name in table.SIGNATURES else ()
        names = (table.I386_ARG_NAMES.get(name) if abi == "i386" else None) or table.ARG_NAMES.get(name)
        if names is not None and len(names) != len(kinds):
            raise ValueError(f"syscalls.table: {name} on {abi} has {len(kinds)} kinds, {len(names)} names")
        self.args = tuple(self._arg(i, k, names[i] if names else None, kinds[:i])
                          for i, k in enumerate(kinds))
        self.by_name = {a.name: a for a in self.args}
        # a 64-bit value in two i386 registers: NAME_lo and NAME_hi
        self.pairs = {a.name[:-3]: (a.index, self.by_name[a.name[:-3] + "_hi"].index)
                      for a in self.args if a.name.endswith("_lo") and a.name[:-3] + "_hi" in self.by_name}
        self.path_slots = (table.I386_PATH_ARGS if abi == "i386" else table.PATH_ARGS).get(name, ())
        self.writes = WRITES.get(name)
        #: the path slots naming an entry the call makes, removes or renames (table.NAMES)
        self.names = table.NAMES.get(name, ())
        self.nofollow = tuple(nofollow_rule(name, p) for p, _ in self.path_slots)
        self.empty_path_flags = EMPTY_PATH_FLAGS.get(name)
        #: the row's classes (syscalls.table: "opens", "execs", ...)
        self.classes = table.BY_NAME[name].classes if name in table.BY_NAME else frozenset()

    def follows(self, slot, args):
        """Does the call follow a symlink in the last component of path
        ``slot``, given its raw arguments? (follows_last)"""
        return follows_last(self.nofollow[slot], args)

    def _arg(self, index, kind, name, before):
        if name is None:
            base = _KIND_NAMES.get(kind, kind if kind != "int" else f"arg{index}")
            seen = sum(1 for k in before if _KIND_NAMES.get(k, k) == _KIND_NAMES.get(kind, kind))
            name = base if not seen or kind == "int" else f"{base}{seen + 1}"
        if self.abi == "i386":
            bits = 32  # int $0x80: the kernel reads the low half of each register
        elif kind in ("fd", "dirfd", "oflags", "atflags") or name in table.INT32_NAMES:
            bits = 32
        else:
            bits = 64
        return Arg(index, kind, name, bits, kind in ("fd", "dirfd"))

    def __repr__(self):
        return f"<Spec {self.name}/{self.abi} {[a.name for a in self.args]}>"


@lru_cache(maxsize=None)
def spec(name, abi="x86_64"):
    """The Spec of call ``name`` (a neutral name) on ``abi``."""
    return Spec(name, abi)


def path_args(abi):
    """{name: ((path index, dirfd index or None), ...)} of the path calls of ``abi``."""
    return table.I386_PATH_ARGS if abi == "i386" else table.PATH_ARGS


def variants():
    """{neutral name: names that do its job on another ABI} (i386 and x32)."""
    out = {}
    for t in (I386_VARIANTS, X32_VARIANTS):
        for name, others in t.items():
            out.setdefault(name, set()).update(others)
    return out


def trace_classes(known):
    """strace's classes (%file, %desc, %process, %network) as sets of the
    names in ``known``."""
    network = table.NETWORK_CALLS & known
    return {"%file": set(PATH_SYSCALLS) & known, "%process": set(table.PROCESS_CALLS & known),
            "%network": set(network), "%net": set(network), "%desc": set(FD_SYSCALLS) & known}


def follows_last(rule, args):
    """Does a call with this nofollow ``rule`` follow a symlink in the last
    component, given its raw arguments? (open_how: read by the caller, which
    follows unless the struct says otherwise.)"""
    if rule is None:
        return True
    kind = rule[0]
    if kind == "always":
        return False
    if kind == "if_set":
        return not args[rule[1]] & rule[2]
    if kind == "unless_set":
        return bool(args[rule[1]] & rule[2])
    if kind == "oflags":
        flags = args[rule[1]]
        return not (flags & table.O_NOFOLLOW or (flags & table.O_CREAT and flags & table.O_EXCL))
    return True
