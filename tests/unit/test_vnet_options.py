"""vnet's options: modes, families, and the errors a user sees (no ptrace,
no namespace: the module is built, not started)."""
import pytest

from umview.modules.vnet import AF_NETLINK, AF_UNIX, Vnet

AF_INET, AF_INET6, AF_PACKET = 2, 10, 17


def test_no_option_is_null_claiming_every_family_but_unix():
    v = Vnet({})
    assert v.mode == "null"
    assert all(v.claims(f) for f in (AF_INET, AF_INET6, AF_PACKET, AF_NETLINK, 0, 40))
    assert not v.claims(AF_UNIX)
    assert [e.families for e in v.engines()] == [frozenset(range(64)) - {AF_UNIX}]


def test_family_restricts_the_claim_like_mstack():
    v = Vnet({"private": True, "family": "inet6:netlink"})
    assert [f for f in (AF_INET, AF_INET6, AF_PACKET, AF_NETLINK) if v.claims(f)] == [AF_INET6, AF_NETLINK]
    assert "inet6:netlink only" in v.description
    assert Vnet({"family": "ipv4"}).claims(AF_INET) and not Vnet({"family": "ipv4"}).claims(AF_INET6)


@pytest.mark.parametrize("options, message", [
    ({"null": True, "private": True}, "choose one of"),
    ({"netns": True}, "netns=NAME"),
    ({"netns": "../x"}, "netns=NAME"),
    ({"private": True, "create": True}, "create goes with netns"),
    ({"family": "inet:ipx"}, "unknown family 'ipx'"),
    ({"family": True}, "family=F1:F2"),
    ({"nul": True}, "unknown option nul"),
])
def test_bad_options_say_what_is_wrong(options, message):
    with pytest.raises(ValueError, match=message):
        Vnet(options)
