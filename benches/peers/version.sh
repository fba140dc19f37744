#!/usr/bin/env bash
# Instructions of storing one version (issue #18's "store 30 versions", counted):
# releases 1-5 of `synth.py` committed and tagged the way `run.sh` stores them
# (rsync of the next release over the tree, `commit`, `tag`), release 6 rsynced
# over the tree, then `snapgraph commit` of release 6 under callgrind (user space,
# all threads), for each binary given. Counts do not depend on the machine's load,
# so two builds compare on a shared machine; the top functions (inclusive) follow.
#
#   benches/peers/version.sh [SNAPGRAPH...]       # default: target/release/snapgraph
#   VERSION_TMP=/dev/shm/v benches/peers/version.sh old/snapgraph new/snapgraph
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
TMP=${VERSION_TMP:-/dev/shm/snapgraph-version}
BINS=("$@")
[ ${#BINS[@]} -eq 0 ] && BINS=("$ROOT/target/release/snapgraph")
for b in valgrind callgrind_annotate python3 rsync; do
    command -v $b >/dev/null || { echo "version.sh: needs $b" >&2; exit 1; }
done
rm -rf "$TMP" && mkdir -p "$TMP"
python3 benches/peers/synth.py "$TMP/releases" 6 >/dev/null
sync_to() { rsync -a --delete --modify-window=-1 --exclude=/.snapgraph "$TMP/releases/$1/" "$2/"; }
i=0
for bin in "${BINS[@]}"; do
    i=$((i + 1))
    W=$TMP/sg$i/work R=$TMP/sg$i/repo
    mkdir -p "$W" "$R"
    "$bin" -C "$W" init --store "sqlite:$R/store.db" >/dev/null
    for v in 1 2 3 4 5; do
        sync_to $v "$W"
        "$bin" -C "$W" commit -q -m "$v" >/dev/null
        "$bin" -C "$W" tag -q "v$v" >/dev/null
    done
    sync_to 6 "$W"
    valgrind --tool=callgrind --dump-instr=no --callgrind-out-file="$TMP/cg$i.out" \
        "$bin" -C "$W" commit -q -m 6 >/dev/null 2>"$TMP/cg$i.err"
    total=$(awk '/^summary:/ {printf "%.1f M", $2 / 1e6}' "$TMP/cg$i.out")
    echo "## $bin: commit of release 6 after 5: $total instructions"
    echo
    echo '```'
    { callgrind_annotate --inclusive=yes "$TMP/cg$i.out" 2>/dev/null || true; } \
        | grep -E 'hash_object|recheck::|scan::(walk|scan_batched)|Index::(load|save)|commit_leased|load_dir|diff_of|similar::bases|get_raw|decode_many|ZSTD_(compress|decompress)[A-Za-z_]*$|sqlite3VdbeExec' \
        | sed 's/ \[.*//' | head -25 || true
    echo '```'
done
