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
count() { # label, command...
    local label=$1
    shift
    valgrind --tool=callgrind --callgrind-out-file="$tmp/$label" "$@" >"$tmp/$label.log" 2>&1
    grep -o 'refs: *[0-9,]*' "$tmp/$label.log" | tr -dc 0-9
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
