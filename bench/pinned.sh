#!/bin/sh
# Pinned paths' cost (docs/performance.md): N open(O_WRONLY|O_CREAT) of PATH
# by a process with THREADS (0 or 1) extra idle threads, natively and in
# `umview --sandbox` of each umview given, 9 runs interleaved; min and median
# in ms ("...0": the same with no opens, the start-up).
#   sh bench/pinned.sh N PATH THREADS UMVIEW...
set -e
N=$1 P=$2 TH=$3
shift 3
dir=$(mktemp -d /var/tmp/umview-pinned-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cc -O1 -pthread -o "$dir/wopen" "$(dirname "$0")/wopen.c"
ms() { s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
for i in 1 2 3 4 5 6 7 8 9; do
    echo "native $(ms "$dir/wopen" "$TH" "$N" "$P")"
    k=0
    for u in "$@"; do
        k=$((k + 1))
        echo "umview$k $(ms "$u" --sandbox -- "$dir/wopen" "$TH" "$N" "$P")"
        echo "umview${k}-start $(ms "$u" --sandbox -- "$dir/wopen" "$TH" 0 "$P")"
    done
done | sort -k1,1 -k2n | awk '{v[$1] = v[$1] " " $2; n[$1]++}
    END {for (k in v) {split(substr(v[k], 2), a, " "); printf "%-16s min %6d  median %6d\n", k, a[1], a[int((n[k] + 1) / 2)]}}' | sort
