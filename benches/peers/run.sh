#!/usr/bin/env bash
# Real-history comparison: 30 consecutive Django releases (4.2.1 .. 4.2.30) stored in
# sequence by snapgraph's CLI, git, restic and borg, all repositories and working
# trees on tmpfs (/dev/shm) so the disk does not decide. Prints a markdown table.
#
#   benches/peers/run.sh            # everything (downloads ~300 MB once, into target/peers)
#   PEERS_VERSIONS=5 benches/peers/run.sh   # a quick run on the first 5 versions
#
# What is timed, per tool: each version's snapshot command only (replacing the
# working tree's files with the next release is done the same way for every tool,
# with rsync, and not timed). Then: the repository's size on disk, one incremental
# snapshot after a one-line change to one file, and restoring the 15th version
# into an empty directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PROJECT=django
FIRST_PATCH=1
COUNT=${PEERS_VERSIONS:-30}
CACHE=$ROOT/target/peers
SHM=${PEERS_TMP:-/dev/shm/snapgraph-peers}

need() { command -v "$1" >/dev/null 2>&1; }
if ! need git || ! need restic || ! need borg || ! need rsync || ! need curl; then
  echo "installing git, restic, borgbackup, rsync, curl from Debian" >&2
  apt-get update -qq >&2 && apt-get install -y -qq git restic borgbackup rsync curl >&2
fi
[ "$(stat -f -c %T "$(dirname "$SHM")")" = tmpfs ] || echo "warning: $(dirname "$SHM") is not tmpfs" >&2

echo "building snapgraph (release)" >&2
cargo build --release -q -p snapgraph-cli >&2
SG=$ROOT/target/release/snapgraph

# 1. Download and unpack the releases once (through PyPI's JSON API).
mkdir -p "$CACHE/sdist" "$CACHE/tree"
VERSIONS=()
for ((i = FIRST_PATCH; i < FIRST_PATCH + COUNT; i++)); do VERSIONS+=("4.2.$i"); done
INDEX=$CACHE/$PROJECT.json
for v in "${VERSIONS[@]}"; do
  [ -d "$CACHE/tree/$v" ] && continue
  [ -s "$INDEX" ] || curl -fsS -o "$INDEX" "https://pypi.org/pypi/$PROJECT/json"
  url=$(python3 - "$INDEX" "$v" <<'PY'
import json, sys, urllib.parse
index, version = sys.argv[1], sys.argv[2]
files = json.load(open(index))["releases"][version]
base = "https://pypi.org/pypi/django/json"
print(next(urllib.parse.urljoin(base, f["url"]) for f in files if f["packagetype"] == "sdist"))
PY
)
  echo "downloading $PROJECT $v" >&2
  curl -fsS -o "$CACHE/sdist/$v.tar.gz" "$url"
  rm -rf "$CACHE/tree/$v.tmp" && mkdir -p "$CACHE/tree/$v.tmp"
  tar xzf "$CACHE/sdist/$v.tar.gz" -C "$CACHE/tree/$v.tmp" --strip-components=1
  mv "$CACHE/tree/$v.tmp" "$CACHE/tree/$v"
done

rm -rf "$SHM" && mkdir -p "$SHM"
export RESTIC_PASSWORD=peers BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes BORG_RELOCATED_REPO_ACCESS_IS_OK=yes
export GIT_AUTHOR_NAME=peers GIT_AUTHOR_EMAIL=p@example.invalid GIT_COMMITTER_NAME=peers GIT_COMMITTER_EMAIL=p@example.invalid

now() { date +%s.%N; }
elapsed() { python3 -c "print(f'{$2 - $1:.3f}')"; }
sum() { python3 -c "import sys; print(f'{sum(map(float, sys.argv[1:])):.2f}')" "$@"; }

# Per tool: init / snapshot VERSION / restore VERSION DIR; each runs in its tree.
sg_init() { mkdir -p "$R" && (cd "$W" && "$SG" init --store "sqlite:$R/store.db" >/dev/null); }
sg_snap() { (cd "$W" && "$SG" commit -m "$1" >/dev/null && "$SG" tag "v$1" >/dev/null); }
sg_time() { (cd "$W" && "$SG" commit -m "$1" >/dev/null); }
sg_restore() { (cd "$W" && "$SG" checkout "v$1" --to "$2" >/dev/null); }

git_init() { git init -q --bare "$R" && git --git-dir="$R" config core.bare false; }
g() { git --git-dir="$R" --work-tree="$W" "$@"; }
git_snap() { g add -A && g commit -q -m "$1" && g tag "v$1"; }
git_time() { g add -A && g commit -q -m "$1"; }
git_restore() { mkdir -p "$2" && git --git-dir="$R" archive "v$1" | tar -x -C "$2"; }

restic_init() { restic -q -r "$R" init >/dev/null; }
restic_snap() { (cd "$W" && restic -q -r "$R" backup --tag "v$1" . >/dev/null); }
restic_time() { (cd "$W" && restic -q -r "$R" backup . >/dev/null); }
restic_restore() {
  local id
  id=$(restic -q -r "$R" snapshots --tag "v$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["short_id"])')
  restic -q -r "$R" restore "$id" --target "$2" >/dev/null
}

borg_init() { borg init -e none "$R"; }
borg_snap() { (cd "$W" && borg create "$R::v$1" .); }
borg_time() { (cd "$W" && borg create "$R::edit" .); }
borg_restore() { mkdir -p "$2" && (cd "$2" && borg extract "$R::v$1"); }

TOOLS=(snapgraph git restic borg)
declare -A PREFIX=([snapgraph]=sg [git]=git [restic]=restic [borg]=borg)
declare -A TOTAL SIZE INCR RESTORE
MIDDLE=${VERSIONS[$((COUNT / 2))]}
for tool in "${TOOLS[@]}"; do
  p=${PREFIX[$tool]}
  W=$SHM/$tool-tree R=$SHM/$tool-repo
  mkdir -p "$W"
  "${p}_init"
  times=()
  for v in "${VERSIONS[@]}"; do
    rsync -a --delete --exclude=/.snapgraph "$CACHE/tree/$v/" "$W/"
    t0=$(now); "${p}_snap" "$v"; t1=$(now)
    times+=("$(elapsed "$t0" "$t1")")
  done
  TOTAL[$tool]=$(sum "${times[@]}")
  SIZE[$tool]=$(du -sb "$R" | cut -f1)
  echo "# local change" >> "$W/django/__init__.py"
  t0=$(now); "${p}_time" "edit"; t1=$(now)
  INCR[$tool]=$(elapsed "$t0" "$t1")
  out=$SHM/$tool-restore
  t0=$(now); "${p}_restore" "$MIDDLE" "$out"; t1=$(now)
  RESTORE[$tool]=$(elapsed "$t0" "$t1")
  diff -r -q "$CACHE/tree/$MIDDLE" "$out" >/dev/null || echo "warning: $tool restore of $MIDDLE differs" >&2
  echo "$tool done: total ${TOTAL[$tool]} s" >&2
done

files=$(find "$CACHE/tree/${VERSIONS[0]}" -type f | wc -l)
bytes=$(du -sb "$CACHE/tree/${VERSIONS[0]}" | cut -f1)
echo
echo "$COUNT releases of $PROJECT (${VERSIONS[0]} .. ${VERSIONS[-1]}; $files files, $((bytes / 1048576)) MiB each), tmpfs, $(nproc) cores, $(date -u +%Y-%m-%d)"
echo
echo "| tool | version | total time (s) | repository size (MiB) | incremental snapshot, 1 file (s) | restore $MIDDLE (s) |"
echo "|---|---|---:|---:|---:|---:|"
ver() {
  case $1 in
    snapgraph) "$SG" --version | awk '{print $2}' ;;
    git) git --version | awk '{print $3}' ;;
    restic) restic version | awk '{print $2}' ;;
    borg) borg --version | awk '{print $2}' ;;
  esac
}
for tool in "${TOOLS[@]}"; do
  mib=$(python3 -c "print(f'{${SIZE[$tool]} / 1048576:.1f}')")
  echo "| $tool | $(ver "$tool") | ${TOTAL[$tool]} | $mib | ${INCR[$tool]} | ${RESTORE[$tool]} |"
done
rm -rf "$SHM"
