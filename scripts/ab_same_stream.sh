#!/usr/bin/env bash
# Compares mem_same_stream between two commits in one process: builds the
# library at each (RelWithDebInfo, like `ordo bench`), prefixes every symbol
# one build defines with a_ or b_, links both into tools/ab/same_stream_ab.c
# and runs it (see there). Figures from separate runs of `ordo bench` move
# with the machine's spells; a ratio measured this way does not.
#
# usage: scripts/ab_same_stream.sh OLD_COMMIT NEW_COMMIT [ROUNDS [PAIRS_PER_BATCH]]
# prints a JSON line per link order and one summary; a ratio below 1 means
# NEW is faster.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
    echo "usage: $0 OLD_COMMIT NEW_COMMIT [ROUNDS [PAIRS_PER_BATCH]]" >&2
    exit 2
fi
old=$(git rev-parse --verify "$1^{commit}")
new=$(git rev-parse --verify "$2^{commit}")
work=$(mktemp -d)
cleanup() {
    git worktree remove --force "$work/a" 2>/dev/null || true
    git worktree remove --force "$work/b" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

build() { # commit side
    git worktree add --detach -q "$work/$2" "$1"
    cmake -S "$work/$2" -B "$work/$2/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$work/$2/build" --target ordo_static -j"$(nproc)" >/dev/null
    nm --defined-only -g "$work/$2/build/lib/libordo.a" 2>/dev/null |
        awk -v p="$2_" 'NF == 3 { print $3, p $3 }' | sort -u >"$work/$2.map"
    objcopy --redefine-syms="$work/$2.map" "$work/$2/build/lib/libordo.a" "$work/lib$2.a"
}
build "$old" a
build "$new" b
# Where each build's code lands moves a ratio by a few percent: both link
# orders run, and the summary is the geometric mean of their medians.
for order in ab ba; do
    libs=("$work/liba.a" "$work/libb.a")
    [ "$order" = ba ] && libs=("$work/libb.a" "$work/liba.a")
    cc -std=c11 -O2 -Wall -Wextra -Werror -Iinclude tools/ab/same_stream_ab.c "${libs[@]}" \
        -lpthread -ldl -lm -o "$work/same_stream_ab_$order"
    "$work/same_stream_ab_$order" "${@:3}" | sed "s/^{/{\"link_order\":\"$order\",/" |
        tee -a "$work/results"
done
python3 - "$work/results" <<'PY'
import json, math, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
mean = math.exp(sum(math.log(r["b_over_a_median"]) for r in runs) / len(runs))
print(json.dumps({"name": "mem_same_stream_ab", "link_orders": len(runs),
                  "b_over_a_geomean": round(mean, 4)}))
PY
