"""Listing directories of layered mounts (umview.modules.viewfs.layers.Listings), without ptrace."""
import os

from umview.modules.viewfs.layers import Layers, Listings


def test_old_listing_directories_go_once_unused_but_not_while_held(tmp_path):
    upper, lower = tmp_path / "upper", tmp_path / "lower"
    (upper / "d").mkdir(parents=True)
    (lower / "d").mkdir(parents=True)
    (lower / "d" / "a").write_text("")
    layers = Layers(os.fsencode(upper), os.fsencode(lower), "cow")
    listings = Listings()
    try:
        first = listings.get(layers, b"d")
        held = os.open(first, os.O_RDONLY | os.O_DIRECTORY)  # a process reading it
        try:
            for i in range(3 * Listings.STALE_MAX):
                (upper / "d" / f"f{i}").write_text("")
                listings.forget(b"d")
                latest = listings.get(layers, b"d")
            names = sorted(os.fsdecode(n) for n in os.listdir(latest))
            assert names == sorted(["a"] + [f"f{i}" for i in range(3 * Listings.STALE_MAX)])
            kept = os.listdir(listings.root)
            assert len(kept) <= Listings.STALE_MAX + 2
            # the one still open is kept, and still lists what it listed
            assert os.path.basename(first) in [os.fsencode(k) for k in kept]
            assert sorted(os.listdir(f"/proc/self/fd/{held}")) == ["a"]
            assert listings.relative(first + b"/a") == b"d/a"
        finally:
            os.close(held)
    finally:
        listings.close()
    assert not os.path.exists(listings.root)
