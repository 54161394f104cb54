"""guard: refuse the calls that act outside the view's paths, for a sandbox.

A view changes what paths name; some calls change it again behind the view's
back, or act on the whole machine whatever the paths say. In a sandbox
(``umview --sandbox`` loads this module first, so that it is the oldest
engine and sees only what no module served) they fail with EPERM, what a
normal user gets from them natively:

- the mount table: mount, umount, umount2, pivot_root and the new mount API
  (fsopen, fspick, fsmount, move_mount, open_tree with OPEN_TREE_CLONE,
  mount_setattr): a bind mount or an unmount changes what a path names for
  the kernel, past the view's mounts (as root, for the whole machine). The
  mounts a module serves (viewfs, fs) are served before this module sees the
  call;
- the root: chroot (a process's root in the kernel would no longer be the
  one the view resolves paths against), setns into a mount namespace;
- the machine: acct (accounting of every process into a file), swapon,
  swapoff, reboot, kexec_load, kexec_file_load, init_module, finit_module,
  delete_module.

A refusal is logged once per call name. Nothing here is a path of its own:
the module claims only these rare calls.

    umview -p guard -p viewfs,mount=LAYER:/:cow -- CMD
"""
import errno
import logging

from umview import core
from umview.engine import CONTINUE, Engine, Skip
from umview.service import Module

log = logging.getLogger("umview")

CLONE_NEWNS = 0x00020000
OPEN_TREE_CLONE = 1

MOUNTS = frozenset({"mount", "umount", "umount2", "pivot_root", "fsopen", "fspick", "fsmount",
                    "move_mount", "mount_setattr", "open_tree", "open_tree_attr"})
ROOT = frozenset({"chroot", "setns"})
MACHINE = frozenset({"acct", "swapon", "swapoff", "reboot", "kexec_load", "kexec_file_load",
                     "init_module", "finit_module", "delete_module"})


class Guard(Engine):
    name = "guard"
    description = "mount, chroot, setns (mount namespace), acct, swap, reboot, kexec, kernel modules: EPERM"

    syscalls = MOUNTS | ROOT | MACHINE

    def __init__(self):
        self.told = set()

    def wants(self, call):
        return call.name in self.syscalls

    def enter(self, call):
        name = call.name
        if name in ("open_tree", "open_tree_attr") and not call.args[2] & OPEN_TREE_CLONE:
            return CONTINUE  # an O_PATH fd of the tree, as open(O_PATH): the path engines had it
        if name == "setns" and not self._mount_ns(call):
            return CONTINUE
        if name not in self.told:
            self.told.add(name)
            log.warning("guard: %s refused (EPERM): it would act outside the view's paths "
                        "(docs/security.md)", name)
        return Skip.errno(errno.EPERM)

    @staticmethod
    def _mount_ns(call):
        """Would setns(fd, nstype) enter a mount namespace? nstype 0 takes
        the type from the fd; a pidfd enters the namespaces nstype names."""
        nstype = call.args[1] & 0xFFFFFFFF
        if nstype & CLONE_NEWNS:
            return True
        if nstype:
            return False
        link = core.proc_link(call.tid, core.signed32(call.args[0]))
        return link is None or link.startswith(b"mnt:")


class GuardModule(Module):
    name = "guard"
    description = "refuse mount, chroot, setns (mount ns), acct, swap, reboot, kexec, kernel modules (EPERM)"
    options_help = ""

    def __init__(self, options):
        super().__init__(options)
        self.check_options(set())

    def engines(self):
        return [Guard()]
