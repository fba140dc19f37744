#!/usr/bin/env bash
# One release's commit, builds in strict alternation (issue #18): releases 1-15 of
# `synth.py` committed once (by the first binary) and saved; then each round, every
# binary in turn commits release 16 onto a fresh copy of that saved state, under
# `perf stat` (task-clock, page faults, wall time). Prints each binary's means.
#
#   benches/peers/release_commit.sh ROUNDS OLD/snapgraph NEW/snapgraph
#   RELEASE_TMP=/dev/shm/rc benches/peers/release_commit.sh 20 ...
#
# The copy keeps every path (the index names its root, the config its store), so
# each run sees what a release's commit sees in run.sh's store column.
set -euo pipefail
cd "$(dirname "$0")/../.."
TMP=${RELEASE_TMP:-/dev/shm/snapgraph-release}
ROUNDS=${1:?rounds}
shift
[ $# -ge 1 ] || { echo "usage: $0 ROUNDS SNAPGRAPH..." >&2; exit 2; }
for b in perf rsync python3; do
    command -v $b >/dev/null || { echo "release_commit.sh: needs $b" >&2; exit 1; }
done
rm -rf "$TMP" && mkdir -p "$TMP"
python3 benches/peers/synth.py "$TMP/releases" 16 >/dev/null
RUN=$TMP/run SAVED=$TMP/saved
mkdir -p "$RUN/w" "$RUN/r"
(cd "$RUN/w" && "$1" init --store "sqlite:$RUN/r/store.db" >/dev/null)
for v in $(seq 1 15); do
    rsync -a --delete --modify-window=-1 --exclude=/.snapgraph "$TMP/releases/$v/" "$RUN/w/"
    (cd "$RUN/w" && "$1" commit -q -m "$v" >/dev/null)
done
rsync -a --delete --modify-window=-1 --exclude=/.snapgraph "$TMP/releases/16/" "$RUN/w/"
cp -a "$RUN" "$SAVED"
for ((i = 0; i < ROUNDS; i++)); do
    for bin in "$@"; do
        rm -rf "$RUN" && cp -a "$SAVED" "$RUN"
        (cd "$RUN/w" && perf stat -x, -e task-clock,page-faults,duration_time \
            -o "$TMP/perf.out" "$bin" commit -q -m 16 >/dev/null)
        awk -F, -v b="$bin" '/task-clock/ {c=$1} /page-faults/ {f=$1} /duration_time/ {w=$1/1e6}
            END {print b, c, f, w}' "$TMP/perf.out"
    done
done | awk '{n[$1]++; c[$1]+=$2; f[$1]+=$3; w[$1]+=$4}
    END {for (b in n) printf "%s  CPU %.1f ms  page faults %d  wall %.2f ms  (%d runs)\n", b, c[b]/n[b], f[b]/n[b], w[b]/n[b], n[b]}'
rm -rf "$TMP"
