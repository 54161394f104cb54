"""The control channel: how a process inside a view talks to its monitor.

One private system call number, ``NR_CONTROL`` (core.h's UM_NR_CONTROL), far
above any real one on every ABI. The seccomp filter of a view always traps it
and the monitor answers it (the ServiceControl engine); outside a view the
kernel refuses it with ENOSYS, which is how a command knows where it runs.
Argument 0 is an operation code; docs/services.md lists the operations.

This module is the client side and has no heavy imports: the console scripts
(umview.commands) load it at every start.
"""
import errno
import os

NR_CONTROL = 0x564F53  # "VOS"; = UM_NR_CONTROL of core.h (a unit test checks)
#: the neutral name the monitor gives the control call
CONTROL = "umview_control"

# operation codes (argument 0)
ADD_SERVICE = 1    # (spec, flags, errbuf, errlen): flags PERMANENT
DEL_SERVICE = 2    # (name, 0, errbuf, errlen)
LIST_SERVICES = 3  # (buf, len) -> bytes of "name\tdescription\tflags\n" lines
GET_VIEWNAME = 4   # (buf, len) -> length of the name
SET_VIEWNAME = 5   # (name)
VIEW_INFO = 6      # (buf, len) -> bytes of "server id\nview id\nview name\n"
FSALIAS = 7        # (alias, fstype or NULL to delete, errbuf, errlen)
LIST_ENGINES = 8   # (buf, len) -> bytes of "epoch\trank\tengine\tservice\n" lines, newest first
ATTACH = 9         # (pid, 0, errbuf, errlen): trace pid and its future children in this view
NEST = 10          # (request, len, errbuf, errlen): a view nested in this one for the caller (umview inside a view)

MAX_REQUEST = 1 << 20  # bytes of a NEST request

PERMANENT = 1

NOT_IN_VIEW = "not running inside umview"


class NotInView(OSError):
    """The kernel answered the control call: this process is not in a view."""


_libc = None


# ctypes is imported lazily in this module: the console scripts (um_* commands)
# start with it only when they make the control call.


def _syscall(*args):
    import ctypes

    global _libc
    if _libc is None:
        # the libc the process already has (find_library runs ldconfig: 8 ms)
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    cargs = [a if isinstance(a, (ctypes.Array, ctypes.c_char_p)) else ctypes.c_long(a) for a in args]
    r = _libc.syscall(ctypes.c_long(NR_CONTROL), *cargs)
    if r < 0:
        e = ctypes.get_errno()
        if e == errno.ENOSYS:
            raise NotInView(e, NOT_IN_VIEW)
        return r, e
    return r, 0


def _check(r, e, errbuf=None):
    if e:
        msg = errbuf.value.decode(errors="replace") if errbuf is not None and errbuf.value else os.strerror(e)
        raise OSError(e, msg)
    return r


def _with_error(op, a1, a2=0):
    import ctypes

    errbuf = ctypes.create_string_buffer(1024)
    r, e = _syscall(op, a1, a2, errbuf, len(errbuf))
    return _check(r, e, errbuf)


def _read(op):
    import ctypes

    size = 4096
    while True:
        buf = ctypes.create_string_buffer(size)
        r = _check(*_syscall(op, buf, size))
        if r <= size:
            return buf.raw[:r]
        size = r


def _str(s):
    import ctypes

    return ctypes.c_char_p(os.fsencode(s))


def in_view():
    """Is this process inside a umview view?"""
    try:
        _syscall(VIEW_INFO, 0, 0)
    except NotInView:
        return False
    return True


def add_service(spec, permanent=False):
    _with_error(ADD_SERVICE, _str(spec), PERMANENT if permanent else 0)


def del_service(name):
    _with_error(DEL_SERVICE, _str(name))


def list_services():
    """[(name, description, flags)] of the loaded services, oldest first."""
    out = []
    for line in _read(LIST_SERVICES).decode(errors="replace").splitlines():
        name, _, rest = line.partition("\t")
        desc, _, flags = rest.partition("\t")
        out.append((name, desc, flags))
    return out


def list_engines():
    """[(epoch, rank, engine name, service name, view id)] in the order a call enters them."""
    out = []
    for line in _read(LIST_ENGINES).decode(errors="replace").splitlines():
        epoch, rank, name, service, view = line.split("\t")
        out.append((int(epoch), int(rank), name, service, int(view)))
    return out


def nest(request):
    """Make this process (and its future children) the first of a view
    nested in the current one, with the modules and engines of request (a
    dict: see umview.servicecontrol.ServiceControl.nest)."""
    import ctypes
    import json

    data = json.dumps(request).encode()
    if len(data) > MAX_REQUEST:
        raise OSError(7, "nested view request too long")  # E2BIG
    buf = ctypes.create_string_buffer(data, len(data))
    _with_error(NEST, buf, len(data))


def attach(pid):
    _with_error(ATTACH, int(pid))


def fsalias(alias, fstype=None):
    _with_error(FSALIAS, _str(alias), _str(fstype) if fstype is not None else 0)


def get_viewname():
    return _read(GET_VIEWNAME).decode(errors="replace")


def set_viewname(name):
    _check(*_syscall(SET_VIEWNAME, _str(name)))


def view_info():
    """(server id, view id, view name): the monitor's pid, the view's number in it, its name."""
    server, view, name = _read(VIEW_INFO).decode(errors="replace").split("\n")[:3]
    return int(server), int(view), name


def parse_spec(spec):
    """'viewfs,cow,except=/a:/b' -> ('viewfs', {'cow': True, 'except': '/a:/b'})."""
    name, _, rest = spec.partition(",")
    name = name.strip()
    if not name:
        raise ValueError(f"-p {spec!r}: no module name")
    options = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = item.partition("=")
        options[key] = value if eq else True
    return name, options
