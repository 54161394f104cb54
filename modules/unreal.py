"""unreal: ``/unreal/X`` is the real ``X``.

The module registers the mount twice, the second nesting on the first, so that
``/unreal/unreal/X`` is ``/unreal/X`` is ``X``: the newer registration turns
``/unreal/unreal/X`` into ``/unreal/X`` and hands the call to the older one,
which turns it into ``X``. ``/unreal/unreal/unreal/X`` reaches the kernel as
``/unreal/X`` and fails with ENOENT, as nothing real lives there. It is the
smallest redirecting module and the oracle of path handling: an operation on
``X``, ``/unreal/X`` and ``/unreal/unreal/X`` must give the same result.

    umview -p unreal ls /unreal/etc
    umview -p unreal,mountpoint=/real,depth=1 cat /real/etc/hostname
"""
from umview.service import Module, RedirectMount


class Unreal(Module):
    name = "unreal"
    description = "/unreal/X is X (registered twice: /unreal/unreal/X is X too)"
    options_help = "mountpoint=PATH (default /unreal), depth=N registrations (default 2)"

    def __init__(self, options):
        super().__init__(options)
        self.check_options({"mountpoint", "depth"})
        self.mountpoint = str(self.options.get("mountpoint", "/unreal"))
        try:
            self.depth = int(self.options.get("depth", 2))
        except ValueError:
            raise ValueError(f"module unreal: depth={self.options['depth']!r} is not a number") from None
        if not self.mountpoint.startswith("/") or self.mountpoint.rstrip("/") == "":
            raise ValueError(f"module unreal: mountpoint={self.mountpoint!r} must be an absolute path other than /")
        if self.depth < 1:
            raise ValueError("module unreal: depth must be at least 1")

    @staticmethod
    def real_path(rel):
        return b"/" + rel

    def engines(self):
        return [RedirectMount(self.mountpoint, self.real_path, name=f"unreal#{i + 1}")
                for i in range(self.depth)]
