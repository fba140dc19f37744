#!/usr/bin/env bash
# mkstore.sh SG DIR: stores the 30 synthetic releases (target/peers/synthetic-30, as
# run.sh leaves them; generate with `python3 benches/peers/synth.py DIR 30`) with the
# snapgraph binary SG into DIR/tree (working tree) and DIR/repo (SQLite store),
# committing and tagging vN for each release, the way run.sh does. For counting one
# restore: cd DIR/tree && valgrind --tool=callgrind SG checkout -q v16 --to /dev/shm/r16
set -euo pipefail
SG=$1; D=$2
T=${PEERS_TREES:-$(cd "$(dirname "$0")/../.." && pwd)/target/peers/synthetic-30}
rm -rf "$D"; mkdir -p "$D/tree" "$D/repo"
cd "$D/tree" && "$SG" init --store "sqlite:$D/repo/store.db" >/dev/null
for v in $(seq 1 30); do
  rsync -a --delete --modify-window=-1 --exclude=/.snapgraph "$T/$v/" "$D/tree/"
  "$SG" commit -q -m "$v" >/dev/null && "$SG" tag -q "v$v" >/dev/null
done
