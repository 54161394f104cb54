"""A 120-level deep tree of 30-character names, and 1,000 stats of its
deepest file (CPython's test_tarfile extracts a tree nearly this deep).
`deep_paths.py make ROOT` builds it; `deep_paths.py stat ROOT` stats it (and
first writes one file next to ROOT, so the view's layer set is not empty).
The C side's share, in a cow view of / (docs/internals.md, "Deep paths"):

    python3 bench/deep_paths.py make /tmp/deep/tree
    ln -s tree /tmp/deep/link      # the same through a symlink: the C walk
    umview --stats -p viewfs,mount=/tmp/deep/layer:/:cow -- \
        python3 bench/deep_paths.py stat /tmp/deep/tree
"""
import os
import sys
import time

mode, root = sys.argv[1], sys.argv[2]
names = [f"{i:03d}" + "d" * 27 for i in range(120)]
deepest = os.path.join(root, *names, "file")
if mode == "make":
    os.makedirs(os.path.dirname(deepest), exist_ok=True)
    open(deepest, "w").close()
    print(len(deepest), "bytes deep")
else:
    with open(os.path.join(os.path.dirname(root), "touched"), "w") as f:
        f.write("x")
    t = time.perf_counter()
    for _ in range(1000):
        os.stat(deepest)
    print(f"1000 stats of a {len(deepest)}-byte path: {time.perf_counter() - t:.3f} s")
