#!/bin/sh
# Run a test command sandboxed by umview: it may "change" the whole system (a
# copy-on-write view of /) and reaches no network; the real files stay as
# they were. What it changed is listed, then thrown away (or kept with -k).
#
#   examples/sandboxed_tests.sh pytest -q
#   examples/sandboxed_tests.sh -k make install      # keep the layer, print where
#
# The exit status is the command's.
set -eu
keep=0
if [ "${1:-}" = "-k" ]; then keep=1; shift; fi
[ $# -gt 0 ] || { echo "usage: $0 [-k] COMMAND [ARG...]" >&2; exit 2; }
layer=$(mktemp -d "${TMPDIR:-/tmp}/umview-sandbox.XXXXXX")
status=0
umview -p "viewfs,mount=$layer/upper:/:cow" -p vnet,null -- "$@" || status=$?
echo "--- what the command changed:" >&2
umview-layer diff "$layer/upper" >&2 || true
if [ "$keep" = 1 ]; then
    echo "--- kept: $layer/upper (umview -p viewfs,mount=$layer/upper:/:cow sees it again)" >&2
else
    rm -rf "$layer"
fi
exit "$status"
