"""Services: modules loaded by name, and the mounts they serve.

A module is a Python class registered by name (`umview.assembly.BUILTIN`, plus
the ``umview.modules`` entry-point group for third parties), loaded with
``umview -p NAME[,OPTION[=VALUE]...]``. Loading it gives the engines it
registers, each with its own epoch: a module that mounts twice registers two
engines, and the later one is the newer.

A *redirecting* module maps a path inside its mount to a real path and lets
the kernel do the work, so the files it serves are real and I/O on them never
stops. It implements ``real_path(rel)``; ``RedirectMount`` is the engine that
rewrites every path argument under the mount point.
"""
import errno
import os
import struct

from umview import core
from umview.engine import CONTINUE, Engine, Skip
from umview.pathwalk import last_dot
from umview.syscalls import PATH_SYSCALLS, calls

AF_UNIX = 1
SUN_PATH_MAX = 108  # sizeof(sockaddr_un.sun_path)
SOCKADDR_UN_SIZE = 2 + SUN_PATH_MAX

# The AF_UNIX names a bind of the view gave the kernel in place of the one
# the process gave (a mount's real path, a layer's, a short alias): the
# kernel keeps the name it was given, and getsockname, getpeername and
# accept give it back. stored name -> the name before the rewrite (a chain
# where two engines rewrote, newest first: each records its own step).
_BOUND_NAMES = {}
_BOUND_INODES = {}  # the socket (its fd link, socket:[INODE]) -> the name it was bound by
SOCKNAME_SYSCALLS = calls("socknames")


def record_bound_name(call, stored):
    """A bind about to give the kernel the name stored (bytes, as passed)
    where the call's address names another path now: what it names now is
    what getsockname shows the view (a bind that fails leaves a name no
    socket has; the next bind to the same stored name replaces it)."""
    if call.name != "bind":
        return
    try:
        shown = RedirectMount._sockaddr(call)
    except OSError:
        return
    if shown is None or shown == stored:
        return
    if not _BOUND_NAMES:
        core.lib.um_set_socknames(1)  # from now on the C core hands over SOCKNAME_SYSCALLS
    _BOUND_NAMES[stored] = shown
    inode = _socket_inode(call.tid, call.args[0])
    if inode is not None:
        _BOUND_INODES[inode] = stored


def _socket_inode(tid, fd):
    link = core.proc_link(tid, core.signed32(fd))
    if link is None or not link.startswith(b"socket:["):
        return None
    return link


def shown_name(stored):
    """The name the view shows for a name the kernel holds, or None."""
    shown = None
    for _ in range(8):  # each engine's step, newest last
        step = _BOUND_NAMES.get(stored)
        if step is None:
            break
        shown = stored = step
    return shown


def sockname_enter(call):
    """At the entry of a SOCKNAME_SYSCALLS call: the address buffer and its
    length as given (the kernel writes back the full length), or None."""
    addr, lenp = call.args[1], call.args[2]
    if not _BOUND_NAMES or not addr or not lenp:
        return None
    try:
        size = struct.unpack("i", call.read_mem(lenp, 4))[0]
    except OSError:
        return None
    return (addr, lenp, size) if size >= 0 else None


def sockname_exit(call, given):
    """At the exit of a SOCKNAME_SYSCALLS call that succeeded: where the
    address the kernel wrote is a name the view rewrote at bind, write the
    one the process bound, as the kernel does (the bytes that fit the
    buffer, and the full length)."""
    addr, lenp, size = given
    try:
        length = struct.unpack("i", call.read_mem(lenp, 4))[0]
        if length <= 2 or size <= 2:
            return
        data = call.read_mem(addr, min(size, length))
    except OSError:
        return
    if struct.unpack_from("H", data)[0] != AF_UNIX or data[2:3] in (b"", b"\0"):
        return  # not AF_UNIX, unnamed, or an abstract name
    if length > len(data):
        # cut short by the buffer (or a name of the whole 108 bytes, which
        # has no room for its NUL): the one stored name of that length
        # that starts so
        head = data[2:]
        mine = _BOUND_INODES.get(_socket_inode(call.tid, call.args[0])) if call.name == "getsockname" else None
        stored = [mine] if mine is not None and len(mine) + 3 == length and mine.startswith(head) else [
            n for n in _BOUND_NAMES if len(n) + 3 == length and n.startswith(head)]
        shown = shown_name(stored[0]) if len(stored) == 1 else None
    else:
        shown = shown_name(data[2:].split(b"\0", 1)[0])
    if shown is None:
        return
    full = struct.pack("H", AF_UNIX) + shown + b"\0"
    try:
        call.write_mem(addr, full[:size])
        call.write_mem(lenp, struct.pack("i", len(full)))
    except OSError:
        pass


class Module:
    """Base class of modules. ``options`` is the dict parsed from the -p spec
    (``{"cow": True, "except": "/a:/b"}``); unknown options must be refused
    with ``ValueError`` so that a typo is an error the user sees."""

    name = "module"
    description = ""
    options_help = ""
    #: why the module cannot work under a sandbox's Landlock ruleset (its
    #: processes reach files through a process outside the ruleset, which
    #: Landlock forbids), or None; a sandbox loading it at start then runs
    #: without Landlock, and says so
    landlock_conflict = None

    def __init__(self, options):
        self.options = dict(options)
        self.view = None  # its View (umview.views), once the view runs (add_engine/remove_engine)
        #: the engines registered before this module was loaded (set by the loader)
        self.older = ()
        #: while the module makes the mounts of its options (before the
        #: view runs): those made so far
        self.mounting = None
        #: the directory relative paths in options are relative to: umview's,
        #: or that of the process that added the service
        try:
            self.cwd = os.getcwd()
        except OSError:
            self.cwd = "/"

    def engines(self):
        """The engines this module registers at load, oldest first (called
        once, after ``older`` is set)."""
        return []

    def realize(self, path, own=()):
        """A path of the view as this module's own operations reach it (the
        nested view): through the redirecting engines registered before what
        the module is about to register, then the kernel. At load those are
        the engines of the modules loaded before it; while the view runs, every
        mount of the view is older than a mount being made. So a viewfs SOURCE
        may lie under /unreal or under another mount. own: the engines the
        module made before the view runs (its mounts at start)."""
        return realize(self._mounts(own), path)

    def realized_by(self, path, own=()):
        """The mounts that realize() passes path through, newest first."""
        return realized_by(self._mounts(own), path)

    def _mounts(self, own):
        if self.mounting is not None:
            engines = (*self.older, *self.mounting, *own)
        elif self.view is None:
            engines = (*self.older, *own)
        else:
            engines = self.view.engines
        return [e for e in engines if isinstance(e, RedirectMount)]

    def start(self):
        """The view is about to run (``self.view`` is set)."""

    def close(self):
        """The view is over: remove what the module made (temporary files)."""

    def busy(self):
        """In use (mounts of it exist): um_del_service answers EBUSY."""
        return False

    def mount_specs(self, spec, third):
        """The mounts of a mount=SOURCE:TARGET[:THIRD][;...] option: (source,
        target, third or None) each; a missing or empty part is an error
        (an empty TARGET would mean the current directory)."""
        form = f"mount=SOURCE:TARGET[:{third}]"
        if spec is True or not spec or not spec.strip(";"):
            raise ValueError(f"module {self.name}: {form} (mount= names nothing)")
        out = []
        for item in spec.split(";"):
            if not item:
                continue
            parts = item.split(":")
            if len(parts) not in (2, 3) or not all(parts):
                raise ValueError(f"module {self.name}: mount={item!r}: "
                                 f"expected SOURCE:TARGET[:{third}], each part given")
            out.append((parts[0], parts[1], parts[2] if len(parts) == 3 else None))
        return out

    def check_options(self, allowed):
        unknown = sorted(set(self.options) - set(allowed))
        if unknown:
            raise ValueError(f"module {self.name}: unknown option {', '.join(unknown)}"
                             + (f" (known: {self.options_help})" if self.options_help else ""))


class RedirectMount(Engine):
    """One mount of a redirecting module: every path argument that lies at or
    under ``target`` is rewritten to ``real_path(rel)``, where ``rel`` is the
    part below the target (b"" for the target itself, else b"a/b"), and the
    call goes on to the older engines and the kernel.

    Paths are resolved lexically against the thread's cwd or the call's dirfd
    (see Call.paths). An empty path with AT_EMPTY_PATH names an open file and
    is left alone.
    """

    def __init__(self, target, real_path, name="mount", path_syscalls=None, exceptions=()):
        target = target.encode() if isinstance(target, str) else target
        if not target.startswith(b"/"):
            raise ValueError(f"mount point {target!r} is not an absolute path")
        self.target = target.rstrip(b"/") or b"/"
        self.prefixes = (self.target,)
        # subpaths that stay real (viewfs except=): absolute, normalized
        self.exceptions = tuple(e.rstrip(b"/") for e in exceptions)
        self.real_path = real_path
        self.name = name
        self.path_syscalls = frozenset(PATH_SYSCALLS if path_syscalls is None else path_syscalls)
        # AF_UNIX socket paths: the address is a struct, not a path argument;
        # the C core hands over the bind/connect calls whose address is one
        self.unix_addr_syscalls = calls("sockaddrs")
        #: older mounts this one stands in for under its target (a viewfs
        #: ``fresh`` layered mount beside the layered mount it was made over):
        #: a path it resolved is not theirs to resolve again
        self.replaces = frozenset()

    def wants(self, call):
        if call.name in self.unix_addr_syscalls:
            return self._socket_path(call) is not None
        return super().wants(call)

    def resolved(self, call, key):
        """This mount resolves the call's path argument key (an argument
        index, or "addr", "fd"): a mount it replaces must not again."""
        st = call.state(RedirectMount)
        if getattr(st, "resolved", None) is None:
            st.resolved = {}
        st.resolved[key] = self

    def replaced(self, call, key):
        """Has a newer mount that replaces this one resolved key already?"""
        by = (getattr(call.state(RedirectMount), "resolved", None) or {}).get(key)
        return by is not None and self in by.replaces

    def relative(self, path):
        """The part of an absolute path below the mount point, or None (not
        under it, or under one of its exceptions)."""
        for e in self.exceptions:
            if path == e or path.startswith(e + b"/"):
                return None
        t = self.target
        if t == b"/":
            return path.lstrip(b"/")
        if path == t:
            return b""
        if path.startswith(t + b"/"):
            return path[len(t) + 1:]
        return None

    def shows_same_names(self, rel, real):
        """Is real (a cwd) this mount's image of rel, all the way down? Then
        the kernel resolves paths relative to it without ".." as the view
        does (see CwdTracker)."""
        below = (self.target.rstrip(b"/") + b"/" + rel if rel else self.target) + b"/"
        return real == self.real_path(rel) and not any(e.startswith(below) for e in self.exceptions)

    def names_mount_point(self, call, rels, exists):
        """For a call that removes, makes or renames the mount point itself
        (rels: {path slot: rel}, b"" for the target; exists(rel): is rel in
        the view): what the kernel answers for a mount point (rmdir and
        rename: EBUSY; unlink: EISDIR; a call that makes it: EEXIST), never a
        change of the directory the mount shows there. None for any other
        call."""
        names = call.spec.names if call.spec is not None else ()
        if not any(slot in names and rel == b"" for slot, rel in rels.items()):
            return None
        if call.of_class("unlinks"):
            rmdir = call.name == "rmdir" or call.name == "unlinkat" and call.flags & 0x200  # AT_REMOVEDIR
            return Skip.errno(errno.EBUSY if rmdir else errno.EISDIR)
        if call.of_class("renames"):
            if rels.get(0) and not exists(rels[0]):
                return None  # the kernel's ENOENT first
            return Skip.errno(errno.EBUSY)
        return Skip.errno(errno.EEXIST)

    def literal_relative(self, raw):
        """For an absolute path as written (b"/mnt/a/../b/"), the part below the
        mount point as written, when its ".." never climb above the mount
        point; else None. Keeping it literal keeps what the kernel checks on
        the way: a trailing slash, a missing directory before "..". """
        rel = self.relative(raw)
        if rel is None:
            return None
        depth = 0
        for comp in rel.split(b"/"):
            if comp == b"..":
                depth -= 1
                if depth < 0:
                    return None
            elif comp not in (b"", b"."):
                depth += 1
        return rel

    def enter(self, call):
        if call.name in self.unix_addr_syscalls:
            if self.replaced(call, "addr"):
                return CONTINUE
            self.resolved(call, "addr")
            return self._redirect_socket(call)
        rewrites, rels = [], {}
        for slot, path in enumerate(call.paths()):
            if path is None:
                continue
            index = call.path_indices[slot]
            rel = self.relative(path) if not self.replaced(call, index) else None
            if rel is None:
                continue
            self.resolved(call, index)
            raw = call.read_string(index)
            if raw == b"":
                continue  # AT_EMPTY_PATH: the call acts on its dirfd
            if not last_dot(raw):  # "TARGET/." is the kernel's own LAST_DOT
                rels[slot] = rel
            literal = self.literal_relative(raw) if raw.startswith(b"/") else None
            if literal is not None:
                rel = literal
            elif raw.endswith(b"/"):
                rel += b"/"
            rewrites.append((index, self.real_path(rel)))
        answer = self.names_mount_point(call, rels, lambda rel: os.path.lexists(self.real_path(rel)))
        if answer is not None:
            return answer
        for index, real in rewrites:
            call.set_string(index, real)  # PATH_MAX or more: Call.run_long_paths
        return CONTINUE

    @staticmethod
    def _sockaddr(call):
        addr, length = call.raw("addr"), call.addrlen
        if not addr or length <= 2 or length > 2 + SUN_PATH_MAX:
            return None
        data = call.read_mem(addr, length)
        if struct.unpack_from("H", data)[0] != AF_UNIX or data[2] == 0:
            return None  # not AF_UNIX, or an abstract address
        return data[2:].split(b"\0", 1)[0]

    def _socket_path(self, call):
        """The absolute path of an AF_UNIX bind/connect under this mount, or
        None. A relative one is relative to the thread's cwd in the view
        (the cwd tracker's view_socket_path, where the kernel's cwd is
        another directory: a layer's upper one, a mount's source)."""
        path = getattr(call.state(RedirectMount), "view_socket_path", None)
        if path is False:
            return None  # relative to a faithful cwd: the kernel names it as the view does
        if path is not None:
            return path if self.relative(os.path.normpath(path)) is not None else None
        try:
            path = self._sockaddr(call)
        except OSError:
            return None  # a bad pointer: the kernel says EFAULT
        if path is None:
            return None
        if not path.startswith(b"/"):
            try:
                path = os.fsencode(os.readlink(f"/proc/{call.tid}/cwd")) + b"/" + path
            except OSError:
                return None
        return path if self.relative(os.path.normpath(path)) is not None else None

    def _redirect_socket(self, call):
        path = os.path.normpath(self._socket_path(call))
        self._point_sockaddr(call, self.real_path(self.relative(path)))
        return CONTINUE

    @staticmethod
    def _sockaddr_args(call, path):
        """call's arguments with its sockaddr_un naming path (written in the
        process's scratch memory)."""
        addr = struct.pack("H", AF_UNIX) + path + b"\0"
        where = call.alloc(len(addr))
        call.write_mem(where, addr)
        args = list(call.args)
        args[call.index_of("addr")] = where
        # a name of the whole 108 bytes goes without its NUL, as the
        # process may give it (the kernel ends it)
        args[call.index_of("addrlen")] = min(len(addr), SOCKADDR_UN_SIZE)
        return args

    @classmethod
    def _point_sockaddr(cls, call, real):
        """Make the call's sockaddr_un name the real path."""
        if len(real) >= SUN_PATH_MAX:
            raise OSError(errno.ENAMETOOLONG, "socket path too long once redirected")
        record_bound_name(call, real)
        args = cls._sockaddr_args(call, real)
        for name in ("addr", "addrlen"):
            call.set_arg(name, args[call.index_of(name)])


def realize(mounts, path):
    """The real path the mounts (oldest first) make of a path of the view:
    each, newest first, rewrites what lies under it, as the engine chain does."""
    return _realize(mounts, path, None)[0]


def unrealize(mounts, real):
    """The view's path of a real path that a mount shows, or None: the path
    the newest of mounts (oldest first) whose virtual_of answers gives, as
    the mounts newer than it show that path in turn (older_view_of: an
    image's mount point made the source of -r's move mount of /)."""
    for i in range(len(mounts) - 1, -1, -1):
        virtual_of = getattr(mounts[i], "virtual_of", None)
        v = virtual_of(real) if virtual_of else None
        if v is not None:
            for m in mounts[i + 1:]:
                older_view_of = getattr(m, "older_view_of", None)
                v = (older_view_of(v) if older_view_of else None) or v
            return v
    return None


def realized_by(mounts, path):
    """The mounts (of mounts, oldest first) that rewrite path on its way to
    realize()'s answer, newest first."""
    return _realize(mounts, path, None)[2]


def _realize(mounts, path, call):
    """(realize(), the node of a layered mount that made the real path or
    None, the mounts that rewrote it). With a call, a mount that has
    view_node(call, rel) (a layered one) answers from what it remembers of
    the call's paths."""
    node = None
    replaced = frozenset()
    used = []
    for m in reversed(mounts):
        if m in replaced:
            continue
        rel = m.relative(path)
        if rel is not None:
            view_node = getattr(m, "view_node", None) if call is not None else None
            node = view_node(call, rel) if view_node is not None else None
            path = node.real if node is not None else m.real_path(rel)
            replaced |= m.replaces
            used.append(m)
    return path, node, used


class ViewLookup:
    """realize() and lstat() for pathwalk.walk over the paths of one call.

    walk looks up every prefix of a path; a layered mount would probe each
    prefix anew (the whole path under it, each time). Here the mount probes
    the path once for the call (view_node) and remembers every prefix, and
    lstat of the real path just realized is the node's, with no lookup."""

    def __init__(self, mounts, call):
        self.mounts = mounts
        self.call = call
        self.last = None  # (real path, node) of the last realize()

    def realize(self, vpath):
        real, node, _ = _realize(self.mounts, vpath, self.call)
        self.last = (real, node) if node is not None else None
        return real

    def lstat(self, real):
        if self.last is not None and self.last[0] == real:
            st = self.last[1].st
            if st is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
            return st
        return os.lstat(real)

