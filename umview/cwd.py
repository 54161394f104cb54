"""The virtual current directory of the processes in a view.

When a process changes into a directory that a mount serves, the kernel's cwd
is the real directory the mount redirected to, but the process must keep
seeing the path it named: `cd /unreal/etc && pwd -P` prints `/unreal/etc`,
and `..` from the mount point leads back where the process came from, not to
the parent of the real directory.

CwdTracker is the newest of the path engines, so it sees each call as the
process made it. For a process whose cwd is virtual it

- answers getcwd(2) with the virtual path;
- turns relative paths (those relative to the cwd, AT_FDCWD) into absolute
  virtual paths before the mounts see them (the C core hands every such call
  to Python: it knows which processes have a virtual cwd);
- follows chdir(2) and fchdir(2): the cwd is virtual exactly when the path
  the kernel received differs from the one the process named;
- marks a virtual cwd *faithful* when the kernel's cwd shows the same names
  all the way down (a mount's image of it, no other mount below): the C core
  then lets relative paths without ".." through to the kernel;
- runs ``#!`` scripts whose interpreter lies under a mount (the kernel would
  look for the interpreter in the real file system): execve(2) of such a
  script becomes the execve of the interpreter, with the argument list the
  kernel would have made; likewise a program whose ELF loader lies under a
  mount runs that loader (the view's), and readlink of /proc/self/exe says
  the program (umview/cwdexec.py);
- serves chroot(2) for any user: the process gets a root in the view, below
  which every path it names is resolved (all its path calls come here:
  UM_VROOT), with no way out through "..", symlinks, /proc/self/root, or a
  cwd or dirfd left outside (they count as the root).

fchdir needs the virtual path of a directory fd: the tracker remembers it for
fds opened through a mount, and checks at fchdir time that the fd still refers
to the same real file (fd numbers are reused after close).

The cwd, the root, the fd paths and the program's name are kept in the
process's record (umview.procs), which the monitor keeps at fork, exec and
exit: a child inherits its parent's, or shares them with it if clone(2) had
CLONE_FS (or CLONE_FILES). The tracker has no state of its own per process.
Not handled: unshare(CLONE_FS), which leaves them joined.
"""
import errno
import logging
import os
import re

from umview import core, fdpass, longpath
from umview.core import lib
from umview.cwdexec import EXECS, ExecInView
from umview.engine import CONTINUE, CONTINUE_AFTER, Engine, Skip, _normalize, under_any
from umview.pathwalk import dotted, plain_path, walk
from umview.procs import PROCESSES, Process
from umview.service import (SOCKNAME_SYSCALLS, RedirectMount, ViewLookup, realize, sockname_enter, sockname_exit,
                            unrealize)
from umview.syscalls import PATH_SYSCALLS, calls

AT_FDCWD = core.AT_FDCWD
_signed = core.signed32
AT_EMPTY_PATH = 0x1000
AT_EACCESS = 0x200
OPENS = calls("opens")
RESOLVE_IN_ROOT = 0x10
# what follows /proc/ in a magic link to a process's root, cwd or open file
PROC_LINK = re.compile(rb"(self|thread-self|[0-9]+)(?:/task/([0-9]+))?/(root|cwd|exe|fd/([0-9]+))(?:/(.*))?\Z", re.S)


class CwdTracker(ExecInView, Engine):
    name = "cwd"
    description = "virtual current directories"
    mirrors_mounts = True
    # fchdir always (is the fd one opened through a mount?); getcwd and chdir
    # of threads with a virtual cwd (chdir under a mount is a path claim);
    # execve as a path call, and while a redirecting mount exists also where
    # the #! interpreter or ELF loader it runs lies under it (the C core
    # reads the program's head: exec_syscalls)
    syscalls = (calls("chdirs") - PATH_SYSCALLS) | (calls("roots") & PATH_SYSCALLS)
    vcwd_syscalls = (calls("chdirs") & PATH_SYSCALLS) | {"getcwd"}
    newest = True
    mounts_later = True
    walks_symlinks = True
    # AF_UNIX socket paths of a process under a virtual root (the mounts
    # claim them too: no call stops for this alone)
    unix_addr_syscalls = calls("sockaddrs")
    # and the calls that give such a name back: the name the process bound,
    # not the one a mount made of it (service.record_bound_name)
    sockname_syscalls = SOCKNAME_SYSCALLS
    per_view = "cwd"  # a nested view's tracker follows every mount of its stack

    def __init__(self):
        self.path_syscalls = PATH_SYSCALLS
        self.prefixes = ()
        self.targets = ()
        self.mounts = ()    # mount engines, oldest first
        self.opaque = ()    # mount points the monitor never looks under

    def set_mounts(self, mounts):
        self.mounts = tuple(mounts)
        self.targets = tuple(m.target for m in mounts)
        # a layered mount's lower files are the real ones at the same path:
        # an interpreter there is found by the kernel, one in the upper layer
        # is behind a path the layer set names (its script's call reaches us)
        redirecting = any(m.target in m.prefixes or m.target in m.kernel_prefixes for m in mounts)
        self.exec_syscalls = frozenset(EXECS) if redirecting else frozenset()
        # claim what the mounts claim, with the same kinds: a layered mount
        # lets the C core keep most calls under it, and so must the tracker
        self.prefixes = tuple(dict.fromkeys(p for m in mounts for p in m.prefixes))
        self.kernel_prefixes = tuple(dict.fromkeys(p for m in mounts for p in m.kernel_prefixes))
        self.layered_prefixes = tuple(dict.fromkeys(p for m in mounts for p in getattr(m, "layered_prefixes", ())))
        self.real_prefixes = tuple(dict.fromkeys(p for m in mounts for p in getattr(m, "real_prefixes", ())))
        # not their alias prefixes: whether one is clean is its mount's to
        # say (Dispatcher._clean), and the C core keeps them as it is
        # filesystems served by processes of the view (modules/fs: a FUSE
        # server run in the view): see _leave_to_kernel
        self.opaque = tuple(m.target for m in mounts if getattr(m, "opaque", False))

    def realize(self, vpath):
        """The real path the mounts make of a virtual path (newest first, as the
        engine chain does)."""
        return realize(self.mounts, vpath)

    # --- processes (their records: umview.procs) ---
    @staticmethod
    def _proc(tid):
        """The record of thread tid's process; an empty one if it is gone."""
        t = PROCESSES.threads.get(tid)
        if t is not None:
            return t.process
        try:
            return PROCESSES.process(tid)
        except OSError:
            return Process(tid)

    def _set_vcwd(self, tid, virtual):
        """The cwd of thread tid's process, and of every process sharing it
        (CLONE_FS), becomes virtual (None: the kernel's, unless the process
        has a virtual root, under which every cwd is the view's to say)."""
        fs = self._proc(tid).fs
        if virtual is None and fs.root is not None:
            real = self._cwd_target(tid)
            virtual = (self._from_real(real) or real) if real and real.startswith(b"/") else fs.root
        faithful = None
        if virtual is not None and fs.root is None:  # under a virtual root every path is Python's
            real = self._cwd_target(tid)
            if real is not None and self._faithful(virtual, real):
                faithful = real
        fs.set(virtual, faithful, also=(tid,))

    def _faithful(self, virtual, real):
        """Does the real directory show the names the virtual one does, all
        the way down (a mount's image of the directory, with no other mount
        below it)? Then the kernel may resolve relative paths without "..".
        """
        below = virtual.rstrip(b"/") + b"/"
        if any(t.startswith(below) for t in self.targets):
            return False
        for m in reversed(self.mounts):
            rel = m.relative(virtual)
            if rel is not None:
                shows = getattr(m, "shows_same_names", None)
                return bool(shows and shows(rel, real))
        return False

    @staticmethod
    def _below_faithful(fs, real):
        """The virtual path of a real path at or below the faithful cwd of
        the FsContext fs (as it was when it was entered), or None."""
        base = fs.faithful
        if base is None or not (real == base or real.startswith(base.rstrip(b"/") + b"/")):
            return None
        return fs.cwd.rstrip(b"/") + real[len(base.rstrip(b"/")):] or b"/"

    def _from_real(self, real):
        """The virtual path of a real directory that a mount shows, or None."""
        return unrealize(self.mounts, real)

    # --- calls ---
    def wants(self, call):
        if call.name in SOCKNAME_SYSCALLS:
            return True
        if call.name in self.unix_addr_syscalls:
            return self._proc(call.tid).fs.root is not None or self._relative_socket(call) is not None
        if call.name in self.syscalls or call.name in self.vcwd_syscalls:
            return True
        if call.path_indices and self._proc(call.tid).fs.cwd is not None:
            return True
        # a path call reaching Python with mounts present lies under a mount or
        # has a symlink on its way (the C core checked): walk it in the view
        return bool(self.mounts)

    def enter(self, call):
        fs = self._proc(call.tid).fs
        vcwd, root = fs.cwd, fs.root
        if call.name in SOCKNAME_SYSCALLS:
            given = sockname_enter(call)
            if given is None:
                return CONTINUE
            call.state(self).sockname = given
            return CONTINUE_AFTER
        if call.name in self.unix_addr_syscalls:
            if root is not None:
                return self._rooted_socket(call, root, vcwd)
            # the mounts read it (RedirectMount._socket_path)
            call.state(RedirectMount).view_socket_path = self._relative_socket(call)
            return CONTINUE
        if call.name == "getcwd":
            if vcwd is None:
                return CONTINUE
            data = self._inside(root, vcwd) + b"\0"
            if call.size < len(data):
                return Skip.errno(errno.ERANGE)
            call.write_mem(call.raw("buf"), data)
            return Skip(len(data))
        if call.of_class("readlinks"):
            answer = self._proc_readlink(call)
            if answer is not None:
                return answer
        if call.name == "openat2" and self.mounts:
            refused = self._in_root(call)
            if refused is not None:
                return refused
        if call.name in EXECS and (self.mounts or root):
            try:  # the path as the process gave it: it names the process (comm)
                call.state(self).named = call.read_string(EXECS[call.name][0])
            except OSError:
                pass
        if vcwd is not None:
            self._absolutize(call, vcwd, root)
        if (self.mounts or root) and call.path_indices:
            self._resolve_symlinks(call, root or b"/")
        if call.name == "chroot":
            return self._chroot(call)
        if call.name == "fchdir":
            return CONTINUE_AFTER
        if call.name in EXECS and (self.mounts or root):
            # the loader run for the program: its exit names the process
            # after the program (the kernel named it after the loader)
            return self._interpreter(call, root or b"/") or (
                CONTINUE_AFTER if getattr(call.state(self), "comm", None) else CONTINUE)
        if call.name in OPENS:
            # the path as named here, and made absolute: if a mount rewrites
            # it, the monitor names the fd by it in the process's record at
            # the call's exit (procs.Processes.opened; an open no mount
            # rewrites takes no exit stop for this)
            paths = call.paths()
            if paths and paths[0] is not None and under_any(paths[0], self.targets):
                call.fd_path = (call.read_string(call.path_indices[0]), paths[0])
            return CONTINUE
        if call.name == "chdir":
            # the path as named here, and made absolute: at exit, a different
            # string in the argument means a mount redirected it
            st = call.state(self)
            st.named = call.read_string(call.path_indices[0])
            st.virtual = self._virtual_path(call, 0)
            return CONTINUE_AFTER
        return CONTINUE

    def exit(self, call):
        if call.retval is None or call.retval < 0:
            return
        if call.name in SOCKNAME_SYSCALLS:
            sockname_exit(call, call.state(self).sockname)
            return
        if call.name in EXECS:
            comm = getattr(call.state(self), "comm", None)
            if comm is not None:
                err = lib.um_set_comm(call.tid, comm[:15])
                if err < 0 and err != -errno.ENOSYS:
                    logging.getLogger("umview").debug("the name of process %d stays its loader's: %s", call.tid,
                                                      os.strerror(-err))
            return
        p = self._proc(call.tid)
        if call.name == "chdir":
            virtual = call.state(self).virtual
            self._set_vcwd(call.tid, virtual if p.fs.root is not None or self._moved(call) else None)
        elif call.name == "fchdir":
            fd = call.fd
            entry = p.fds.get(fd)
            real = self._fd_target(call.tid, fd)
            if entry is not None and real != entry[1]:
                entry = None
            # an fd the kernel opened by itself below a faithful cwd: its
            # place below the virtual cwd, or what the mount showing it says
            if entry is None and real is not None:
                virtual = self._below_faithful(p.fs, real) or self._from_real(real)
            else:
                virtual = entry[0] if entry else None
            self._set_vcwd(call.tid, virtual)

    def _chroot(self, call):
        """chroot(2), served for any user: the process's root becomes the
        directory in the view (paths, "..", symlinks, /proc/self/root, exec
        and its loader are resolved below it from now on, by the view), for
        its threads and, inherited, its children. The kernel's root stays
        the real one. The directory must exist and be searchable, as for the
        kernel. The cwd stays where it is, but a cwd (or a dirfd) outside the
        root counts as the root: nothing outside it can be named."""
        try:
            if not call.read_string(call.path_indices[0]):
                return Skip.errno(errno.ENOENT)
        except OSError as exc:
            return Skip.errno(exc.errno)
        vpath = call.paths()[0]
        if vpath is None:
            return None  # the kernel's errno
        real = self.realize(vpath)
        refused = self._may_enter(call, real, os.X_OK)
        if refused is not None:
            return refused
        fs = self._proc(call.tid).fs
        if vpath == b"/" and fs.root is None:
            return Skip(0)
        fs.root = vpath
        self._set_vcwd(call.tid, fs.cwd)  # now a virtual cwd, whose paths are all the view's
        return Skip(0)

    def _rooted_socket(self, call, root, vcwd):
        """bind/connect of an AF_UNIX path by a process under a virtual root:
        the kernel would name the path from the real root, so the address
        becomes the view's path below the root (then the mounts', as any
        socket path)."""
        try:
            path = RedirectMount._sockaddr(call)
        except OSError:
            return CONTINUE  # a bad pointer: the kernel's EFAULT
        if path is None:
            return CONTINUE  # an abstract name, or not AF_UNIX
        if path.startswith(b"/"):
            full = root.rstrip(b"/") + path
        else:
            base = vcwd if vcwd is not None and under_any(vcwd, (root,)) else root
            full = base.rstrip(b"/") + b"/" + path
        resolved, _ = walk(full, self.realize, False, opaque=self.opaque, root=root)
        RedirectMount._point_sockaddr(call, resolved)
        return CONTINUE

    def _relative_socket(self, call):
        """For a bind/connect of a relative AF_UNIX path: False where the
        kernel names it as the view does (the cwd is faithful: a mount's
        image of the virtual one, such as a directory the view made in a
        layer; the path stays relative, as short as the process made it); the
        absolute path in the view where the kernel's cwd is another
        directory than the view's; None where it is the view's (the mounts
        look at it as they would)."""
        try:
            path = RedirectMount._sockaddr(call)
        except OSError:
            return None
        if not path or path.startswith(b"/"):
            return None
        fs = self._proc(call.tid).fs
        if fs.faithful is not None:
            return False
        real = core.proc_link(call.tid)
        if real is None or not real.startswith(b"/"):
            return None
        virtual = fs.cwd or self._from_real(real)
        if virtual is None or virtual == real:
            return None
        return virtual.rstrip(b"/") + b"/" + path

    @staticmethod
    def _inside(root, vpath):
        """The view path vpath as a process whose root in the view is root
        names it (a path outside the root counts as the root)."""
        if root is None or root == b"/":
            return vpath
        base = root.rstrip(b"/")
        return vpath[len(base):] if vpath.startswith(base + b"/") else b"/"

    @classmethod
    def _may_execute(cls, call, real):
        """The kernel's checks of a script it would run, which the exec of its
        interpreter no longer makes: a regular file, executable by the
        process (mode, ACLs, a noexec mount: faccessat2 with AT_EACCESS, run
        by the process). None if it may, else Skip(-errno)."""
        return cls._may_enter(call, real, os.X_OK, regular=True)

    @staticmethod
    def _may_enter(call, real, mode, regular=False):
        """None if the process may use the real file real as an executable
        (regular=True) or a directory: that type, and mode allowed by its
        own faccessat2 with AT_EACCESS; else Skip(-errno)."""
        import stat

        try:
            st = os.stat(real)
        except OSError as exc:
            return Skip.errno(exc.errno)
        if regular and not stat.S_ISREG(st.st_mode):
            return Skip.errno(errno.EACCES)
        if not regular and not stat.S_ISDIR(st.st_mode):
            return Skip.errno(errno.ENOTDIR)
        where = call.alloc(len(real) + 1)
        call.write_mem(where, real + b"\0")
        r = call.inject("faccessat2", AT_FDCWD & 0xFFFFFFFFFFFFFFFF, where, mode, AT_EACCESS)
        if r < 0 and r != -errno.ENOSYS:  # (before Linux 5.8: no check but the mode's, by the kernel's exec)
            return Skip.errno(-r)
        return None

    # --- helpers ---
    @staticmethod
    def _absolutize(call, vcwd, root=None):
        """Relative (to the cwd) path arguments become absolute virtual paths;
        under a virtual root, absolute ones become the view's paths below it,
        and a cwd outside the root (left there by chroot) counts as the root."""
        if root is not None and not under_any(vcwd, (root,)):
            vcwd = root
        for slot, index in enumerate(call.path_indices):
            try:
                path = call.read_string(index)
            except OSError:
                continue  # the kernel gives the errno
            if not path:
                continue
            if path.startswith(b"/"):
                if root is None:
                    continue
                joined = root.rstrip(b"/") + path
            else:
                d = call.dirfd_indices[slot]
                if d is not None and _signed(call.args[d]) != AT_FDCWD:
                    continue  # below a dirfd: _resolve_symlinks
                joined = vcwd.rstrip(b"/") + b"/" + path
            call.set_string(index, joined)  # PATH_MAX or more: Call.run_long_paths

    def _resolve_symlinks(self, call, root=b"/"):
        """Walk each path argument in the view (symlinks followed through the
        mounts, absolute ones and ".." from root); rewrite it where that
        differs from the lexical result."""
        for slot, index in enumerate(call.path_indices):
            try:
                path = call.read_string(index)
            except OSError:
                continue  # a bad pointer or no NUL: the kernel gives the errno
            if not path:
                continue
            if not path.startswith(b"/"):
                d = call.dirfd_indices[slot]
                base = core.proc_link(call.tid, AT_FDCWD if d is None else _signed(call.args[d]))
                if base is None:
                    continue  # a bad dirfd: the kernel says EBADF
                if not base.startswith(b"/"):
                    continue  # ENOTDIR from the kernel
                # a directory a mount shows (opened or entered by the kernel
                # below a faithful cwd): walk from its path in the view, so
                # that ".." leads where the view says
                virtual = self._from_real(base)
                if root != b"/" and not under_any(virtual or base, (root,)):
                    virtual = root  # a dirfd from outside the root (opened before chroot): the root
                full = (virtual or base) + b"/" + path
                if virtual is not None and virtual != base or dotted(path):
                    # the fd's real path is not the view's (a layer's upper
                    # directory, a mount's source): the mounts must see the
                    # view's path, or one over the real path (the sandbox's
                    # /tmp over a layer in $TMPDIR) would take it for its own.
                    # A path with "." or ".." is made absolute as written:
                    # the mounts walk it as the kernel would (the resolved
                    # path C made of it drops a missing directory before
                    # "..", and the "." or ".." it ends with)
                    call.set_string(index, full)  # PATH_MAX or more: Call.run_long_paths
                    path = full
            else:
                full = path
            if self._leave_to_kernel(full):
                continue
            follow = call.spec.follows(slot, call.args) or full.endswith(b"/")
            view = ViewLookup(self.mounts, call)
            if self._plain(view, full, follow):
                continue  # the walk would give the path as it is: the mounts rewrite it lexically
            resolved, crossed = walk(full, view.realize, follow, lstat=view.lstat, opaque=self.opaque,
                                     proc=lambda rest, f: self._proc_link(call, rest, f), root=root,
                                     last_dot=True)
            # no mount on the way and no root of the view's: the kernel
            # resolves the original path the same way
            if (crossed or root != b"/") and resolved != path:
                call.set_string(index, resolved)

    def _proc_link(self, call, rest, follow):
        """The view's path that /proc/REST names, for a magic link of procfs
        to a process's root, cwd or open file (with what follows it), or None
        to leave the path to the kernel. The kernel would follow such a link
        to the real file, past every mount of the view: /proc/self/root/etc
        is the real /etc, /proc/self/fd/N of a lower file opened for reading
        reopens the real file for writing. Here the root is the view's /, a
        cwd is the process's virtual one, an open file is named by its path
        in the view (it is then opened as that path is: a cow view copies it
        up). Pipes, sockets and other files without a path stay the
        kernel's."""
        m = PROC_LINK.match(rest)
        if m is None:
            return None
        who, task, what, fd, after = m.groups()
        if after is None and not follow:
            return None  # the link itself (readlink, lstat): the kernel's
        pid = fdpass.proc_pid(who, call.tid, PROCESSES.tgid)
        tid = int(task) if task else pid
        p = self._proc(tid)
        if what == b"root":
            base = p.fs.root or b"/"
        elif what == b"exe":
            base = p.exe
            if base is None:
                return None  # the kernel's: the program it ran
        elif what == b"cwd":
            base = p.fs.cwd
            if base is None:
                real = self._cwd_target(tid)
                if real is None or not real.startswith(b"/"):
                    return None  # gone: the kernel says so
                base = self._from_real(real) or real
        else:
            real, base = self._fd_names(p, tid, int(fd))
            if real is None:
                return None  # no such fd, or a file no path names
            if base is None and after is None and self.realize(real) != real:
                # a file the view hides (opened before it, as a sandbox's
                # stdout in the real /tmp): no path of the view names it. The
                # kernel reopens it, if that asks for no more than the fd has
                if not _within_fd_access(call, tid, int(fd)):
                    raise OSError(errno.EACCES, os.strerror(errno.EACCES))
                return None
            base = base or real
        return base.rstrip(b"/") + b"/" + after if after else base

    def _fd_names(self, p, tid, fd):
        """(the kernel's path of thread tid's fd, the view's path of it) for
        a file a path names (p: its process's record); (None, None) for none
        (no such fd, a pipe, a deleted file), the view's None where no mount
        shows the real path."""
        real = self._fd_target(tid, fd)
        if real is None or not real.startswith(b"/") or real.endswith(b" (deleted)"):
            return None, None
        entry = p.fds.get(fd)
        return real, entry[0] if entry is not None and entry[1] == real else self._from_real(real)

    def _proc_readlink(self, call):
        """readlink of /proc/PID/exe, cwd, root or fd/N where the view knows
        better than the kernel: the program of an exec that ran the view's
        loader (_elf_interpreter), not the loader; a virtual cwd, not the
        real directory a mount made of it; a virtual root; the view's path
        of an open file a mount shows elsewhere. Each as the reading process
        names it (below its own root). None: the kernel's answer."""
        path = call.paths()[0] if call.paths() else None
        m = PROC_LINK.match(path[len(b"/proc/"):]) if path and path.startswith(b"/proc/") else None
        if m is None or m.group(5) is not None:
            return None
        who, task, what, fd = m.group(1), m.group(2), m.group(3), m.group(4)
        pid = fdpass.proc_pid(who, call.tid, PROCESSES.tgid)
        p = self._proc(int(task) if task else pid)
        mine = self._proc(call.tid).fs.root
        if fd is not None:
            # a file a mount shows at another path (-r's tree: the kernel
            # names the tree's real path); one the kernel names right, or
            # with no path, is the kernel's to say
            real, value = self._fd_names(p, int(task) if task else pid, int(fd))
            if value is None or value == real and mine is None:
                return None
            value = self._inside(mine, value)
        elif what == b"exe":
            value = p.exe
        elif what == b"cwd":
            value = p.fs.cwd
            value = self._inside(mine, value) if value is not None else None
        else:
            value = p.fs.root
            if value is not None:
                value = self._inside(mine, value)
            elif mine is not None:
                value = b"/"  # a root above the reader's: as far as it can see
        size = _signed(call.args[call.index_of("size")])
        if value is None or size <= 0:
            return None  # the kernel's link, or its EINVAL
        data = value[:size]
        call.write_mem(call.raw("buf"), data)
        return Skip(len(data))

    def _in_root(self, call):
        """(None, or the Skip of a refusal) openat2 with RESOLVE_IN_ROOT: the path is resolved with the dirfd
        as its root ("/" and ".." stop there). The kernel would do that in
        the real tree, past the mounts (an absolute path the mounts rewrote
        would land under the dirfd's real directory; one they left alone would
        name the real file). It becomes the view's path below the dirfd's
        view path, ".." clamped at it, without RESOLVE_IN_ROOT. A symlink on
        the way (which the kernel would resolve in that root) is refused with
        ELOOP, as RESOLVE_NO_SYMLINKS does: resolving it here is not done."""
        size = call.args[3]
        if size < 24 or size > 4096 or not call.args[2]:
            return  # the kernel's EINVAL or E2BIG or EFAULT
        try:
            how = bytearray(call.read_mem(call.args[2], size))
        except OSError:
            return
        resolve = int.from_bytes(how[16:24], "little")
        if not resolve & RESOLVE_IN_ROOT:
            return
        base = core.proc_link(call.tid, _signed(call.args[0]))
        if base is None or not base.startswith(b"/"):
            return  # EBADF or ENOTDIR from the kernel
        p = self._proc(call.tid)
        entry = p.fds.get(_signed(call.args[0]))
        if entry is not None and entry[1] == base:
            base = entry[0]
        elif _signed(call.args[0]) == AT_FDCWD and p.fs.cwd is not None:
            base = p.fs.cwd
        else:
            base = self._from_real(base) or base
        root = p.fs.root
        if root is not None and not under_any(base, (root,)):
            base = root  # a dirfd from outside the root: the root
        path = call.read_string(call.path_indices[0])
        rel = _normalize(path)  # ".." stops at the root, as RESOLVE_IN_ROOT's
        full = base.rstrip(b"/") + rel if rel != b"/" else base
        follow = not int.from_bytes(how[0:8], "little") & os.O_NOFOLLOW
        view = ViewLookup(self.mounts, call)
        if not self._plain(view, full, follow) and \
                walk(full, view.realize, follow, lstat=view.lstat, opaque=self.opaque)[0] != full:
            return Skip.errno(errno.ELOOP)  # a symlink on the way (a missing name: the kernel's ENOENT)
        how[16:24] = (resolve & ~RESOLVE_IN_ROOT).to_bytes(8, "little")
        where = call.alloc(len(how))
        call.write_mem(where, bytes(how))
        call.args[2] = where
        call.args[0] = AT_FDCWD & 0xFFFFFFFFFFFFFFFF
        # (under a virtual root, as the process names it: _absolutize adds the root)
        call.set_string(call.path_indices[0], self._inside(root, full))
        return None

    def _leave_to_kernel(self, vpath):
        """Does the absolute view path vpath lie, without "..", on a
        filesystem served by a process of the view (an opaque mount)? Then
        the monitor must not look it up: the server may itself be waiting
        on the monitor (in a trapped call of its own: bindfs lstats its
        source at each request), and both would wait forever. The mount
        rewrites such a path lexically and the kernel walks the rest (walk
        stops at an opaque mount point for the same reason). What is given
        up there: symlinks inside such a filesystem are followed by the
        kernel, in the helper's tree, so an absolute one names the real
        root's file, not the view's; and a #! script there is run by the
        kernel, which looks for its interpreter outside the view's mounts."""
        if not self.opaque:
            return False
        comps = [c for c in vpath.split(b"/") if c and c != b"."]
        return b".." not in comps and under_any(b"/" + b"/".join(comps), self.opaque)

    @staticmethod
    def _plain(view, vpath, follow):
        """Is there no symlink on the way of the absolute view path vpath
        (nor at its end if the call follows it), and no "..": asked of the
        real path the mounts make of it, in one lookup by the kernel, instead
        of a walk component by component."""
        comps = [c for c in vpath.split(b"/") if c and c != b"."]
        if b".." in comps:
            return False
        path = b"/" + b"/".join(comps)
        plain = plain_path(view.realize(path), follow)
        if plain is None and comps:  # a new name: its parent decides
            plain = plain_path(view.realize(b"/" + b"/".join(comps[:-1])), True)
        return bool(plain)

    @staticmethod
    def _virtual_path(call, slot):
        """The absolute virtual path of path slot (after _absolutize), or None."""
        paths = call.paths()
        return paths[slot] if paths else None

    def _redirected(self, call):
        """Did an older engine rewrite the path the kernel received?"""
        st = call.state(self)
        if st.virtual is None:
            return False
        try:
            return call.read_string(call.path_indices[0]) != st.named
        except OSError:
            return False

    def _moved(self, call):
        """Is the cwd a chdir left the kernel with another directory than the
        one the process named? A mount may have rewritten the path to the
        very directory named (a layered mount's merged directory: its lower
        one), and then the cwd is real: the same path, and the same
        directory there (not one a mount of another namespace shows at
        that path, as modules/fs's helper's)."""
        if not self._redirected(call):
            return False
        virtual = _normalize(call.state(self).virtual)
        if self._cwd_target(call.tid) != virtual:
            return True
        try:
            there, cwd = longpath.stat_(virtual), os.stat(f"/proc/{call.tid}/cwd")
        except OSError:
            return True
        return (there.st_dev, there.st_ino) != (cwd.st_dev, cwd.st_ino)

    _cwd_target = staticmethod(core.proc_link)
    _fd_target = staticmethod(core.proc_link)


def _within_fd_access(call, tid, fd):
    """Does the call (reopening fd's file through /proc) write only if the fd
    is open for writing?"""
    try:
        if not call.writes():
            return True
    except OSError:
        return False
    flags = core.fd_flags(tid, fd)
    return flags is not None and flags & 3 in (os.O_WRONLY, os.O_RDWR)
