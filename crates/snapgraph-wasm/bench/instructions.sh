#!/usr/bin/env bash
# Instructions per turn of the page's per-turn commit (2,000 files) through the wasm
# module under Node and natively, counted by callgrind (load does not change them,
# unlike wall-clock time on a shared machine): each side runs its loop for 0 and for N
# turns; (count(N) - count(0)) / N is one turn. Node runs with --no-liftoff (the module
# compiled by the optimizing tier from the start, as a page reaches it after warm-up)
# and --predictable (V8's collector single-threaded and deterministic).
#
#   crates/snapgraph-wasm/bench/instructions.sh [N = 300]
#
# SNAPGRAPH_WASM_PKG=/path/to/pkg counts another build of the module (before/after);
# SNAPGRAPH_WARM=200 runs 200 turns first in every run (steady state, see turn_loop.mjs).
set -euo pipefail
cd "$(dirname "$0")/../../.."
n=${1:-300}
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }
[ -n "${SNAPGRAPH_WASM_PKG:-}" ] || scripts/build-wasm >&2
cargo build -q --release -p snapgraph-wasm --example turns_native
native=target/release/examples/turns_native
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() { # label, command...
    local label=$1
    shift
    valgrind --tool=callgrind --callgrind-out-file="$tmp/$label" "$@" >"$tmp/$label.log" 2>&1
    grep -o 'refs: *[0-9,]*' "$tmp/$label.log" | tr -dc 0-9
}
node=(node --predictable --no-liftoff --expose-gc crates/snapgraph-wasm/bench/turn_loop.mjs)
wasm0=$(count wasm0 "${node[@]}" 0)
wasmN=$(count wasmN "${node[@]}" "$n")
native0=$(count native0 "$native" 0)
nativeN=$(count nativeN "$native" "$n")
wasm=$(( (wasmN - wasm0) / n ))
rs=$(( (nativeN - native0) / n ))
echo "instructions per turn ($n turns): wasm $wasm, native $rs, ratio $(awk "BEGIN{printf \"%.2f\", $wasm/$rs}")x"
