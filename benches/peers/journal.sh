#!/usr/bin/env bash
# Turns after partial releases, two builds of snapgraph in strict alternation
# (benches/peers/alternate.py): what the index's journal costs every later command
# (stop 47). Each build commits and tags releases 1-30 of `synth.py` into its own
# tree and store, each release copied with `rsync -a` (its whole-second quick check
# copies only the files whose size or second changed: a few dozen a release, the
# shape of a `git checkout` of the next version, whose index records are appended
# to the journal instead of replacing the base), then the turns are timed:
#
#   benches/peers/journal.sh ROUNDS OLD/snapgraph NEW/snapgraph [same|edit|add]
#
# same: `commit -q -m t` with nothing changed; edit: a line appended to
# project/__init__.py first; add: one new file first, named by the shell's process
# id (a record that adds a path; no process more than the other modes).
# Releases: target/peers/synthetic-30 (made by `PEERS_DATA=synthetic
# benches/peers/run.sh`, or by `python3 benches/peers/synth.py
# target/peers/synthetic-30 30`). Trees under $JOURNAL_TMP (default
# /dev/shm/snapgraph-journal), made again on every run.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 3 ] || { sed -n '2,17p' "$0" >&2; exit 2; }
ROUNDS=$1
OLD=$(realpath "$2")
NEW=$(realpath "$3")
MODE=${4:-same}
REL=$PWD/target/peers/synthetic-30
TMP=${JOURNAL_TMP:-/dev/shm/snapgraph-journal}
[ -d "$REL/30" ] || { echo "journal.sh: no releases in $REL" >&2; exit 1; }
rm -rf "$TMP" && mkdir -p "$TMP"
for k in old new; do
  bin=$OLD
  [ $k = new ] && bin=$NEW
  mkdir -p "$TMP/$k"
  (cd "$TMP/$k" && "$bin" init -q >/dev/null)
  for v in $(seq 1 30); do
    rsync -a --delete --exclude=/.snapgraph "$REL/$v/" "$TMP/$k/"
    (cd "$TMP/$k" && "$bin" commit -q -m "v$v" >/dev/null && "$bin" tag -q "v$v" >/dev/null)
  done
  cat > "$TMP/turn-$k.sh" <<EOF
#!/bin/sh
cd "$TMP/$k" || exit 1
case $MODE in
  edit) echo '# x' >> project/__init__.py ;;
  add) echo 'x = 1' > "project/new_\$\$.py" ;;
esac
exec "$bin" commit -q -m t
EOF
  chmod +x "$TMP/turn-$k.sh"
done
python3 benches/peers/alternate.py "$ROUNDS" "old::$TMP/turn-old.sh" "new::$TMP/turn-new.sh"
