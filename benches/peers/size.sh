#!/usr/bin/env bash
# Repository size only: the releases of `run.sh` (its download cache, target/peers/tree)
# stored in sequence by one or more snapgraph binaries (SQLite store) and by git, on
# tmpfs; then each one's size after its own gc (`snapgraph gc`, `git gc`). Prints a markdown table with the size, the
# total time of the 30 commits and the time to restore the middle version.
#
#   benches/peers/size.sh                         # target/release/snapgraph vs git
#   SG_BINS="before=/tmp/sg-main after=target/release/snapgraph" benches/peers/size.sh
#   PEERS_VERSIONS=5 benches/peers/size.sh        # the first 5 versions only
#
# Run benches/peers/run.sh once first (it downloads and unpacks the releases). Binaries
# are measured one after the other in one run, so ratios between them are fair on a
# shared machine; absolute times are not.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
COUNT=${PEERS_VERSIONS:-30}
TREES=$ROOT/target/peers/tree
SHM=${PEERS_TMP:-/dev/shm/snapgraph-size}
SG_BINS=${SG_BINS:-snapgraph=$ROOT/target/release/snapgraph}
[ -d "$TREES/4.2.1" ] || { echo "no releases in $TREES: run benches/peers/run.sh first" >&2; exit 1; }

VERSIONS=()
for ((i = 1; i <= COUNT; i++)); do VERSIONS+=("4.2.$i"); done
MIDDLE=${VERSIONS[$((COUNT / 2))]}
now() { date +%s.%N; }
elapsed() { python3 -c "print(f'{$2 - $1:.3f}')"; }
mib() { python3 -c "print(f'{$1 / 1048576:.2f}')"; }
export GIT_AUTHOR_NAME=peers GIT_AUTHOR_EMAIL=p@example.invalid GIT_COMMITTER_NAME=peers GIT_COMMITTER_EMAIL=p@example.invalid

rows=()
rm -rf "$SHM" && mkdir -p "$SHM"
for spec in $SG_BINS; do
  name=${spec%%=*} bin=${spec#*=}
  W=$SHM/$name-tree R=$SHM/$name-repo
  mkdir -p "$W" "$R"
  (cd "$W" && "$bin" init --store "sqlite:$R/store.db" >/dev/null)
  total=0
  for v in "${VERSIONS[@]}"; do
    rsync -a --delete --modify-window=-1 --exclude=/.snapgraph "$TREES/$v/" "$W/"
    t0=$(now)
    (cd "$W" && "$bin" commit -m "$v" >/dev/null && "$bin" tag "v$v" >/dev/null)
    t1=$(now)
    total=$(python3 -c "print(f'{$total + $t1 - $t0:.3f}')")
  done
  size=$(du -sb "$R" | cut -f1)
  t0=$(now); (cd "$W" && "$bin" checkout "v$MIDDLE" --to "$SHM/$name-restore" >/dev/null); t1=$(now)
  diff -r -q "$TREES/$MIDDLE" "$SHM/$name-restore" >/dev/null || echo "warning: $name restore of $MIDDLE differs" >&2
  rows+=("| snapgraph ($name) | $(mib "$size") | $total | $(elapsed "$t0" "$t1") |")
  # Its own gc (a build without --repack collects only), then the size and a restore.
  (cd "$W" && { "$bin" gc -q --repack full >/dev/null 2>&1 || "$bin" gc -q >/dev/null; })
  size=$(du -sb "$R" | cut -f1)
  rm -rf "$SHM/$name-restore"
  t0=$(now); (cd "$W" && "$bin" checkout "v$MIDDLE" --to "$SHM/$name-restore" >/dev/null); t1=$(now)
  diff -r -q "$TREES/$MIDDLE" "$SHM/$name-restore" >/dev/null || echo "warning: $name restore of $MIDDLE after gc differs" >&2
  rows+=("| snapgraph ($name) after \`snapgraph gc\` | $(mib "$size") | | $(elapsed "$t0" "$t1") |")
  echo "$name done" >&2
done

W=$SHM/git-tree R=$SHM/git-repo
mkdir -p "$W" && git init -q --bare "$R" && git --git-dir="$R" config core.bare false
total=0
for v in "${VERSIONS[@]}"; do
  rsync -a --delete --modify-window=-1 "$TREES/$v/" "$W/"
  t0=$(now)
  git --git-dir="$R" --work-tree="$W" add -A && git --git-dir="$R" --work-tree="$W" commit -q -m "$v"
  git --git-dir="$R" tag "v$v"
  t1=$(now)
  total=$(python3 -c "print(f'{$total + $t1 - $t0:.3f}')")
done
loose=$(du -sb "$R" | cut -f1)
git --git-dir="$R" gc -q
packed=$(du -sb "$R" | cut -f1)
mkdir -p "$SHM/git-restore"
t0=$(now); git --git-dir="$R" archive "v$MIDDLE" | tar -x -C "$SHM/git-restore"; t1=$(now)
rows+=("| git (loose) | $(mib "$loose") | $total | |")
rows+=("| git after \`git gc\` | $(mib "$packed") | | $(elapsed "$t0" "$t1") |")

files=$(find "$TREES/${VERSIONS[0]}" -type f | wc -l)
bytes=$(du -sb "$TREES/${VERSIONS[0]}" | cut -f1)
echo
echo "$COUNT releases of django (${VERSIONS[0]} .. ${VERSIONS[-1]}; $files files, $((bytes / 1048576)) MiB each), tmpfs, $(nproc) cores, $(date -u +%Y-%m-%d)"
echo
echo "| repository | size (MiB) | $COUNT commits (s) | restore $MIDDLE (s) |"
echo "|---|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
rm -rf "$SHM"
