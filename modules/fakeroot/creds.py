"""The ids a process of a fakeroot view believes it has, and the kernel's
rules for changing them (credentials(7), setuid(2), setreuid(2),
setresuid(2), setfsuid(2), setgroups(2)), applied to those ids alone: the
process's real credentials never change.

Ids are kept per thread, as the kernel keeps them (glibc makes a setuid
apply to every thread by having each make the call). "Privileged" is the
fake effective uid being 0: what CAP_SETUID and CAP_SETGID are for root.
Pure functions, no tracee: tests/unit/test_fakeroot_rules.py.
"""
import errno
from dataclasses import dataclass, replace

NGROUPS_MAX = 65536
#: (uid_t)-1: "leave this id unchanged" (and never a valid id)
UNCHANGED = 0xFFFFFFFF


@dataclass(frozen=True)
class Creds:
    ruid: int
    euid: int
    suid: int
    fsuid: int
    rgid: int
    egid: int
    sgid: int
    fsgid: int
    groups: tuple

    @classmethod
    def of(cls, uid, gid):
        """A process that logged in as uid:gid (its only group: gid)."""
        return cls(uid, uid, uid, uid, gid, gid, gid, gid, (gid,))

    @property
    def privileged(self):
        return self.euid == 0

    def ids(self, kind):
        """(real, effective, saved, filesystem) of kind "uid" or "gid"."""
        k = kind[0]
        return (getattr(self, f"r{k}id"), getattr(self, f"e{k}id"), getattr(self, f"s{k}id"),
                getattr(self, f"fs{k}id"))

    def _with(self, kind, r, e, s, fs):
        k = kind[0]
        return replace(self, **{f"r{k}id": r, f"e{k}id": e, f"s{k}id": s, f"fs{k}id": fs})


def _refuse():
    raise OSError(errno.EPERM, "not permitted with these ids")


def set_id(c, kind, new):
    """setuid(new) / setgid(new): all four ids if privileged, else the
    effective (and filesystem) one, to the real or saved id."""
    if new == UNCHANGED:
        raise OSError(errno.EINVAL, "invalid id")
    r, _, s, _ = c.ids(kind)
    if c.privileged:
        return c._with(kind, new, new, new, new)
    if new in (r, s):
        return c._with(kind, r, new, s, new)
    return _refuse()


def set_re(c, kind, real, eff):
    """setreuid / setregid: -1 (UNCHANGED) leaves an id. Unprivileged, the
    real id may become the real or effective one, the effective id any of
    real, effective, saved. The saved id follows the new effective one when
    the real id is set, or the effective one set to other than the real."""
    r, e, s, _ = c.ids(kind)
    if not c.privileged:
        if real != UNCHANGED and real not in (r, e):
            _refuse()
        if eff != UNCHANGED and eff not in (r, e, s):
            _refuse()
    nr = r if real == UNCHANGED else real
    ne = e if eff == UNCHANGED else eff
    ns = ne if real != UNCHANGED or (eff != UNCHANGED and eff != r) else s
    return c._with(kind, nr, ne, ns, ne)


def set_res(c, kind, real, eff, saved):
    """setresuid / setresgid: unprivileged, each id given must be one of the
    current real, effective, saved."""
    r, e, s, _ = c.ids(kind)
    if not c.privileged and any(x != UNCHANGED and x not in (r, e, s) for x in (real, eff, saved)):
        _refuse()
    ne = e if eff == UNCHANGED else eff
    return c._with(kind, r if real == UNCHANGED else real, ne, s if saved == UNCHANGED else saved, ne)


def set_fs(c, kind, new):
    """setfsuid / setfsgid: (new creds, the former filesystem id, which the
    call returns whether it changed or not)."""
    r, e, s, fs = c.ids(kind)
    if new != UNCHANGED and (c.privileged or new in (r, e, s, fs)):
        return c._with(kind, r, e, s, new), fs
    return c, fs


def set_groups(c, groups):
    if len(groups) > NGROUPS_MAX:
        raise OSError(errno.EINVAL, "too many groups")
    if not c.privileged:
        _refuse()
    return replace(c, groups=tuple(groups))
