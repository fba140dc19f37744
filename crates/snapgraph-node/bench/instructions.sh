#!/usr/bin/env bash
# Instructions per turn through Node and through Rust, counted by callgrind (load does
# not change them, unlike wall-clock time on a shared machine): each side runs its
# loop for 0 and for N turns; (count(N) - count(0)) / N is one turn.
#
#   crates/snapgraph-node/bench/instructions.sh [N = 300]
#
# One command: it installs valgrind if missing, builds the package (npm ci if needed,
# npm run build: a no-op when it is current) and the Rust loop, then counts.
# SNAPGRAPH_NODE_INDEX=/path/to/index.js counts another build (before/after);
# SNAPGRAPH_WARM=200 runs 200 turns first in every run (steady state, see turn_loop.mjs).
# SNAPGRAPH_MODEL=1 also simulates the caches and branch predictor (slower) and prints
# per turn the I1 misses, D1 misses, mispredicts and "model cycles": 0.3 per
# instruction, 15 per I1 miss or mispredict, 10 per D1 read miss, 5 per D1 write miss
# (BENCHMARKS.md, "part by part"). SNAPGRAPH_OBJECTS=record: see turn_loop.mjs.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-300}
[ -d node_modules/@napi-rs/cli ] || npm_config_build_from_source=true npm ci --no-audit --no-fund >&2
npm run -s build >&2
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }
root=$(cd ../.. && pwd)
cargo build -q --profile bench -p snapgraph-benches --example turn_instructions
rust="$root/target/release/examples/turn_instructions"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sim=()
[ -n "${SNAPGRAPH_MODEL:-}" ] && sim=(--cache-sim=yes --branch-sim=yes)
count() { # label, command...
    local label=$1
    shift
    valgrind --tool=callgrind "${sim[@]}" --callgrind-out-file="$tmp/$label" "$@" >"$tmp/$label.log" 2>&1
    grep -m1 -o 'I *refs: *[0-9,]*' "$tmp/$label.log" | tr -dc 0-9
}
# The event totals of one run, named: "Ir=... I1mr=... ..." (callgrind's summary line).
events() {
    awk '/^events:/ { for (i = 2; i <= NF; i++) name[i] = $i }
         /^(summary|totals):/ { for (i = 2; i <= NF; i++) if (name[i] != "") v[name[i]] = $i }
         END { for (k in v) printf "%s=%s ", k, v[k] }' "$tmp/$1"
}
# Per-turn figures from two runs' events: label0 labelN name.
per_turn() {
    awk -v a="$(events "$1")" -v b="$(events "$2")" -v n="$n" -v who="$3" 'BEGIN {
        split(a, x, " "); split(b, y, " ")
        for (i in x) { split(x[i], kv, "="); e0[kv[1]] = kv[2] }
        for (i in y) { split(y[i], kv, "="); e1[kv[1]] = kv[2] }
        for (k in e1) d[k] = (e1[k] - e0[k]) / n
        model = 0.3 * d["Ir"] + 15 * (d["I1mr"] + d["Bcm"] + d["Bim"]) + 10 * d["D1mr"] + 5 * d["D1mw"]
        printf "%s per turn: instructions %.1f k, I1 misses %.2f k, D1 misses %.2f k (rd %.2f k + wr %.2f k), mispredicts %.2f k, model %.1f k\n",
            who, d["Ir"] / 1e3, d["I1mr"] / 1e3, (d["D1mr"] + d["D1mw"]) / 1e3, d["D1mr"] / 1e3, d["D1mw"] / 1e3, (d["Bcm"] + d["Bim"]) / 1e3, model / 1e3
        print model > "/dev/stderr"
    }'
}
# --predictable: V8's garbage collection single-threaded and at deterministic points, so
# two runs count the same (concurrent marking on helper threads made the count move by
# a third between runs); --expose-gc: the loop collects once at its end.
node=(node --predictable --expose-gc bench/turn_loop.mjs)
node0=$(count node0 "${node[@]}" 0)
nodeN=$(count nodeN "${node[@]}" "$n")
rust0=$(count rust0 "$rust" 0)
rustN=$(count rustN "$rust" "$n")
node=$(( (nodeN - node0) / n ))
rs=$(( (rustN - rust0) / n ))
echo "instructions per turn ($n turns): node $node, rust $rs, ratio $(awk "BEGIN{printf \"%.2f\", $node/$rs}")x"
if [ -n "${SNAPGRAPH_MODEL:-}" ]; then
    per_turn node0 nodeN node 2>/dev/null
    per_turn rust0 rustN rust 2>/dev/null
    m1=$(per_turn node0 nodeN node 2>&1 >/dev/null)
    m2=$(per_turn rust0 rustN rust 2>&1 >/dev/null)
    echo "model cycles per turn: node/rust $(awk "BEGIN{printf \"%.2f\", $m1/$m2}")x"
fi
