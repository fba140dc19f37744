#!/usr/bin/env bash
# run.sh's store column (each release committed, then tagged) for two builds of
# snapgraph in strict alternation: one version at a time, the two builds in turn, the
# first one rotating from version to version, each build on its own tree and store.
# A run.sh run times each tool once; on a guest whose speed drifts, its store column
# moved by 5 % between two builds of equal speed. This repeats the whole sequence.
#
#   benches/peers/store_alternate.sh ROUNDS OLD/snapgraph NEW/snapgraph
#
# Releases: target/peers/synthetic-30 (made by `PEERS_DATA=synthetic
# benches/peers/run.sh`, or by `python3 benches/peers/synth.py target/peers/synthetic-30 30`),
# or $STORE_ALT_RELEASES. Trees and stores under $STORE_ALT_TMP (default
# /dev/shm/snapgraph-store-alt). Prints each round's two totals (wall, bash's
# $EPOCHREALTIME around the two commands) and the means.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 3 ] || { sed -n '2,15p' "$0" >&2; exit 2; }
ROUNDS=$1
BINS=("$2" "$3")
REL=${STORE_ALT_RELEASES:-$PWD/target/peers/synthetic-30}
TMP=${STORE_ALT_TMP:-/dev/shm/snapgraph-store-alt}
[ -d "$REL/30" ] || { echo "store_alternate.sh: no releases in $REL" >&2; exit 1; }
sum=(0 0)
for ((r = 0; r < ROUNDS; r++)); do
  cd /
  total=(0 0)
  for k in 0 1; do
    rm -rf "$TMP/$k" && mkdir -p "$TMP/$k/w" "$TMP/$k/r"
    (cd "$TMP/$k/w" && "${BINS[$k]}" init -q --store "sqlite:$TMP/$k/r/store.db" >/dev/null)
  done
  for v in $(seq 1 30); do
    order=(0 1)
    [ $(((v + r) % 2)) = 1 ] && order=(1 0)
    for k in "${order[@]}"; do
      rsync -a --delete --exclude=/.snapgraph "$REL/$v/" "$TMP/$k/w/"
      cd "$TMP/$k/w"
      s=$EPOCHREALTIME
      "${BINS[$k]}" commit -q -m "$v" >/dev/null
      "${BINS[$k]}" tag -q "v$v" >/dev/null
      e=$EPOCHREALTIME
      total[$k]=$(echo "${total[$k]} + $e - $s" | bc -l)
      cd /
    done
  done
  printf 'round %d: %s %.3f s, %s %.3f s\n' "$r" "${BINS[0]}" "${total[0]}" "${BINS[1]}" "${total[1]}"
  for k in 0 1; do sum[$k]=$(echo "${sum[$k]} + ${total[$k]}" | bc -l); done
done
printf 'mean of %d: %s %.3f s, %s %.3f s\n' "$ROUNDS" "${BINS[0]}" "$(echo "${sum[0]} / $ROUNDS" | bc -l)" "${BINS[1]}" "$(echo "${sum[1]} / $ROUNDS" | bc -l)"
rm -rf "$TMP"
