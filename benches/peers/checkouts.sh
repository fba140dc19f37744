#!/usr/bin/env bash
# The repositories and checkout steps that BENCHMARKS.md's checkout figures time
# (stops 51-54): one script, so that a figure names a command anyone can run again.
# Each step that is timed runs one checkout and nothing else, for
# `benches/peers/alternate.py`:
#
#   benches/peers/checkouts.sh releases SG DIR   # the 30 synthetic releases, each rsync'ed and committed
#   benches/peers/checkouts.sh wide SG DIR       # 50,000 small files in 500 directories, then one edited
#   benches/peers/checkouts.sh few SG DIR        # `wide`, and a branch `few` holding one file of it
#   benches/peers/checkouts.sh big SG DIR        # 1 GiB (run.sh's big tree) on main, a branch `few` of one file
#   benches/peers/checkouts.sh toggle SG DIR     # HEAD~1 <-> main (a switch: a release's changes)
#   benches/peers/checkouts.sh toggle-full SG DIR  # HEAD~29 <-> main (the switch declines: a full checkout)
#   benches/peers/checkouts.sh toggle-few SG DIR   # few <-> main
#   benches/peers/checkouts.sh racy SG DIR [RUNS]  # `checkout --force` then a commit, RUNS times: commits that read a file (DIR on ext4: /tmp)
#
#   python3 benches/peers/alternate.py 30 \
#     "before::benches/peers/checkouts.sh toggle OLD /dev/shm/a" \
#     "after::benches/peers/checkouts.sh toggle target/release/snapgraph /dev/shm/b"
#
# DIR/tree is the working directory, DIR/repo/store.db its store; each build needs its
# own DIR (a build reading another's index finds it foreign). `releases` reads the
# releases from $RELEASES (default /dev/shm/releases-30), made by
# `python3 benches/peers/synth.py DIR 30` if missing. The figures include bash's start.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
what=${1:?usage: checkouts.sh STEP SG DIR}
SG=${2:?usage: checkouts.sh STEP SG DIR}
# Absolute: the steps run in other directories.
case $SG in */*) SG=$(realpath "$SG") ;; *) SG=$(command -v "$SG") ;; esac
D=${3:?usage: checkouts.sh STEP SG DIR}

# fresh: an empty DIR/tree with a repository whose store is DIR/repo/store.db.
fresh() {
  rm -rf "$D"
  mkdir -p "$D/tree" "$D/repo"
  (cd "$D/tree" && "$SG" init --store "sqlite:$D/repo/store.db" >/dev/null)
}
# branch_of_one NAME FILE: a branch NAME holding FILE alone (from main), main checked out.
branch_of_one() {
  cd "$D/tree"
  "$SG" branch "$1" >/dev/null && "$SG" checkout -q "$1" >/dev/null
  find . -path ./.snapgraph -prune -o -type f ! -path "./$2" -print0 | xargs -0 rm -f
  find . -path ./.snapgraph -prune -o -type d -empty -print0 | xargs -0 -r rmdir 2>/dev/null || true
  "$SG" commit -q -m "$1" >/dev/null && "$SG" checkout -q main >/dev/null
}
on_main() { [ "$(cat "$D/tree/.snapgraph/HEAD")" = main ]; }

case $what in
releases)
  R=${RELEASES:-/dev/shm/releases-30}
  [ -d "$R/30" ] || python3 "$HERE/synth.py" "$R" 30 >/dev/null
  fresh
  for v in $(seq 1 30); do
    rsync -a --delete --modify-window=-1 --exclude=/.snapgraph "$R/$v/" "$D/tree/"
    (cd "$D/tree" && "$SG" commit -q -m "$v" >/dev/null)
  done
  ;;
wide | few)
  fresh
  python3 - "$D/tree" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(500):
    p = os.path.join(root, f"pkg{d // 50:02}", f"mod{d:03}")
    os.makedirs(p, exist_ok=True)
    for f in range(100):
        with open(os.path.join(p, f"f{f:03}.txt"), "w") as fh:
            fh.write(f"file {d} {f}\n" * (1 + (d * f) % 40))
PY
  cd "$D/tree"
  "$SG" commit -q -m base >/dev/null
  echo edit >> pkg03/mod170/f050.txt
  "$SG" commit -q -m edit >/dev/null
  [ "$what" = few ] && branch_of_one few pkg00/mod000/f000.txt
  ;;
big)
  fresh
  # run.sh's big tree: files of 4 KiB to 8 MiB of random bytes, 1 GiB in all.
  python3 "$HERE/bigtree.py" "$D/tree" "${BIG_MIB:-1024}"
  (cd "$D/tree" && "$SG" commit -q -m big >/dev/null)
  branch_of_one few d0/e0/f0
  ;;
toggle)
  if on_main; then "$SG" -C "$D/tree" checkout -q HEAD~1; else "$SG" -C "$D/tree" checkout -q main; fi >/dev/null
  ;;
toggle-full)
  if on_main; then "$SG" -C "$D/tree" checkout -q HEAD~29; else "$SG" -C "$D/tree" checkout -q main; fi >/dev/null
  ;;
toggle-few)
  if on_main; then "$SG" -C "$D/tree" checkout -q few; else "$SG" -C "$D/tree" checkout -q main; fi >/dev/null
  ;;
racy)
  # DIR on a file system with coarse timestamps (ext4: a jiffy), not tmpfs.
  # A file of 3 MB written by the checkout, so that the stat cache's clock probe
  # and the last write may share a timestamp tick: a commit right after must read
  # no file (a racy entry is read again, which is safe but slow).
  fresh
  cd "$D/tree"
  head -c 3000000 /dev/urandom > big.bin
  echo small > small.txt
  "$SG" commit -q -m racy >/dev/null
  read_any=0
  for _ in $(seq 1 "${4:-20}"); do
    rm big.bin
    "$SG" checkout -q main --force >/dev/null
    read=$("$SG" commit --json -m again | python3 -c 'import json, sys; print(json.load(sys.stdin)["files_read"])')
    [ "${read:-0}" -gt 0 ] && read_any=$((read_any + 1))
  done
  echo "$read_any of ${4:-20} commits after a checkout read a file"
  ;;
*)
  echo "checkouts.sh: unknown step $what" >&2
  exit 2
  ;;
esac
