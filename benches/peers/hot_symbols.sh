#!/usr/bin/env bash
# Writes crates/snapgraph-cli/hot-symbols.txt: every function a per-turn command
# runs (callgrind, all threads), which the `snapgraph` binary's link places side by
# side (lld's --symbol-ordering-file, see crates/snapgraph-cli/build.rs). Scattered
# over 13 MB of text, a turn's code took about 160 distinct 64 KiB windows, so
# about 80 file-backed page faults a command (the kernel maps a window per fault);
# gathered, about 30 windows.
#
#   benches/peers/hot_symbols.sh [SNAPGRAPH]   # default: target/release/snapgraph
#
# The commands: on synthetic releases 1-2 (synth.py), an unwatched no-change and
# one-file commit, `status`, then the same two turns with `snapgraph watch` running.
# Valgrind hides AVX-512 from the program, so the functions chosen for it
# natively (glibc's `*_avx512_*` and `*_evex*` string functions, BLAKE3's AVX-512
# code) are added by name from the binary. Names are sorted (a stable diff); a name
# the binary no longer has is ignored by the linker, so the file only goes stale
# (rerun this after large changes), it never breaks a build. Needs valgrind, rsync,
# python3, nm.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SG=$(realpath "${1:-target/release/snapgraph}")
OUT=$ROOT/crates/snapgraph-cli/hot-symbols.txt
TMP=$(mktemp -d /dev/shm/hot-symbols.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
python3 benches/peers/synth.py "$TMP/releases" 2 >/dev/null
W=$TMP/work
mkdir -p "$W" "$TMP/repo"
rsync -a "$TMP/releases/1/" "$W/"
cd "$W"
"$SG" init -q --store "sqlite:$TMP/repo/store.db" >/dev/null
"$SG" commit -q -m one >/dev/null
rsync -a --delete --exclude=/.snapgraph "$TMP/releases/2/" "$W/"
"$SG" commit -q -m two >/dev/null
n=0
cg() {
    n=$((n + 1))
    valgrind --tool=callgrind --demangle=no --callgrind-out-file="$TMP/cg.$n" "$@" >/dev/null 2>&1 || true
}
EDIT=project/__init__.py
cg "$SG" commit -q -m same
echo '# x' >> $EDIT
cg "$SG" commit -q -m edit
echo '# y' >> $EDIT
cg "$SG" status
"$SG" commit -q -m y >/dev/null
"$SG" watch -q >/dev/null 2>&1 &
for _ in $(seq 100); do [ -S .snapgraph/watch.sock ] && break; sleep 0.05; done
"$SG" commit -q -m warm >/dev/null || true
cg "$SG" commit -q -m same
echo '# z' >> $EDIT
cg "$SG" commit -q -m edit
"$SG" watch --stop -q >/dev/null || true
wait
{
    cat "$TMP"/cg.* | grep -oE '^c?fn=\([0-9]+\) .*' | sed -E "s/^c?fn=\([0-9]+\) //; s/'[0-9]+$//" | grep -v '^0x'
    nm "$SG" | awk '$2 ~ /^[tT]$/ {print $3}' | grep -E 'avx512|_evex' || true
} | LC_ALL=C sort -u > "$OUT"
echo "$(wc -l < "$OUT") symbols in $OUT" >&2
