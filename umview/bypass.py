"""Calls that would reach files by a way no path engine sees, refused in a
view whose modules serve paths (redirecting or layered mounts).

- io_uring_setup: the operations of a ring (IORING_OP_OPENAT, RENAMEAT,
  UNLINKAT, MKDIRAT, ...) are run by the kernel without a system call the
  view's filter sees, so they would act on the real files under a mount (a
  cow view of / would let them write the real tree). ENOSYS, what a kernel
  without io_uring answers: liburing users and runtimes fall back to plain
  system calls.
- open_by_handle_at: opens a file by its handle (name_to_handle_at), not its
  path, so what a mount shows there is skipped. EPERM, what the kernel
  answers a caller without CAP_DAC_READ_SEARCH (every normal user).

The cwd tracker's companion: registered with it (umview.assembly).
"""
import errno

from umview.engine import Engine, Skip


class PathBypass(Engine):
    name = "pathbypass"
    description = "io_uring_setup (ENOSYS) and open_by_handle_at (EPERM) refused: they bypass the view's paths"
    syscalls = frozenset({"io_uring_setup", "open_by_handle_at"})
    per_view = "pathbypass"

    def enter(self, call):
        if call.name == "io_uring_setup":
            return Skip.errno(errno.ENOSYS)
        return Skip.errno(errno.EPERM)
