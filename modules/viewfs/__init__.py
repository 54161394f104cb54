"""viewfs: mount a real directory over a path, for the processes of the view.

    umview -p viewfs bash
    $ mount -t viewfs ~/project /srv/app     # as root; or: vumount -t viewfs ...
    $ ls /srv/app                            # shows ~/project
    $ umount /srv/app

    umview -p viewfs,mount=/home/me/project:/srv/app make -C /srv/app

    umview -p viewfs,mount=/tmp/layer:/:cow bash   # a copy-on-write view of /

The mode is given with -o: ``move`` (the default: TARGET shows SOURCE and
nothing of what was there), ``merge`` (SOURCE over TARGET), ``cow`` (TARGET
appears writable; changes go to SOURCE, the real TARGET is never written) and
``mincow`` (as cow, but what the user may write is changed in place); see
layers.py beside this file. SOURCE of a layered mode is made if it does not exist.
``ro`` (or mount(2) with MS_RDONLY) shows SOURCE as move does, read-only: every
call that would change a file there fails with EROFS (``umview --sandbox=ro``
is a ro mount of / over /).
``-o except=P1:P2`` keeps those subpaths of TARGET real (absolute, or
relative to TARGET). A layered mount over what an older layered mount shows is
refused (EBUSY), unless ``-o fresh``: it then starts from what lay under that
mount (its lower layer) and hides that mount's changes while it is mounted (a
fresh layer per test in a sandbox; docs/modules.md).

Each mount is a RedirectMount engine registered when mount(2) succeeds, with
its own epoch: a later mount over /a hides an earlier one on /a/b. SOURCE is
resolved when mounting (relative to the caller's cwd) and must be a directory;
TARGET must exist, as for mount(2), unless it lies under another mount.

The module's rooms:

    module.py    the module (Viewfs), its mounts and mount(2)/umount2(2)
    layers.py    the layered mounts (merge, cow, mincow): probes, copy-up,
                 whiteouts, listings
    readonly.py  what a read-only file system answers
    layerfmt.py  the one definition of the cow layer's format
    layerdiff.py what a layer changed (--report, the pytest plugin)
    layercmd.py  umview-layer: diff and apply a layer

This package's own import is light: umview-layer and the pytest plugin use
the layer format without the C core, which module.py loads.
"""


def __getattr__(name):
    if name == "Viewfs":
        from .module import Viewfs  # the engine side: the C core, the syscall table

        return Viewfs
    raise AttributeError(name)
