#!/usr/bin/env bash
# One-file turns on trees of other shapes than run.sh's, two builds of snapgraph in
# strict alternation (benches/peers/alternate.py): where a turn's cost may follow what
# exists instead of what changed (stop 46 found three such places).
#
#   benches/peers/shapes.sh ROUNDS OLD/snapgraph NEW/snapgraph [SHAPE...]
#
# Shapes (all by default):
#   file20k  2,000 files in 200 directories; the file edited holds 20 KiB
#            (a batch over the store dictionary's 16 KiB threshold)
#   wide     the same, plus one directory of 5,000 files; the file edited is in it
#   big      50,000 files in 500 directories of 100, `snapgraph watch` running
#            (started with NEW); the index file is about 5 MB
#   csv      the 2,000 files of file20k plus a 1.5 MB CSV file, the file edited
#            (a file over batches::OVER_MIN, read over its committed version)
#   log      one 16.6 MB log file (over batches::STREAM_MIN: streamed in), the
#            file edited
# Each turn appends a line to the file and commits (`commit -q -m t`); both builds
# commit on the same tree and store, in turn. Trees and stores under
# $SHAPES_TMP (default /dev/shm/snapgraph-shapes), made again on every run, their
# first commit by OLD (not timed). Prints alternate.py's medians per shape.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 3 ] || { sed -n '2,21p' "$0" >&2; exit 2; }
ROUNDS=$1
OLD=$(realpath "$2")
NEW=$(realpath "$3")
shift 3
SHAPES=("$@")
[ ${#SHAPES[@]} -gt 0 ] || SHAPES=(file20k wide big csv log)
TMP=${SHAPES_TMP:-/dev/shm/snapgraph-shapes}
HERE=$PWD

# files DIR DIRS PER: DIRS directories of PER small text files under DIR.
files() {
  python3 - "$1" "$2" "$3" <<'PY'
import os, random, sys
root, dirs, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(46)
for d in range(dirs):
    path = os.path.join(root, f"pkg{d // 50}", f"sub{d % 50}")
    os.makedirs(path, exist_ok=True)
    for i in range(per):
        with open(os.path.join(path, f"m{i}.py"), "w") as f:
            f.write(f"x = {d * per + i}\n" * rng.randint(5, 60))
PY
}

# lines FILE csv|log COUNT: a text file of COUNT pseudo-random CSV rows or log lines.
lines() {
  python3 - "$1" "$2" "$3" <<'PY'
import random, sys
path, kind, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(2 if kind == "csv" else 1)
with open(path, "w") as f:
    for i in range(count):
        if kind == "csv":
            f.write(f"{i},{rng.getrandbits(64):x},{rng.randint(1, 10**6)},{rng.random():.6f}\n")
        else:
            f.write(f"{i} INFO request id={rng.getrandbits(64):x} path=/api/v1/items/"
                    f"{rng.randint(1, 10**6)} status=200 ms={rng.randint(1, 900)}\n")
PY
}

for shape in "${SHAPES[@]}"; do
  dir=$TMP/$shape
  if [ -S "$dir/w/.snapgraph/watch.sock" ]; then
    "$NEW" -C "$dir/w" watch --stop -q >/dev/null 2>&1 || true
  fi
  rm -rf "$dir" && mkdir -p "$dir/w" "$dir/r"
  case $shape in
    file20k)
      files "$dir/w" 200 10
      edit=pkg0/sub0/big.py
      python3 -c "import sys; open(sys.argv[1], 'w').write('value = 1\n' * 2048)" "$dir/w/$edit"
      ;;
    wide)
      files "$dir/w" 200 10
      mkdir -p "$dir/w/wide"
      python3 -c "
import sys
for i in range(5000):
    open(f'{sys.argv[1]}/f{i:05d}.txt', 'w').write(f'file {i}\n' * 20)
" "$dir/w/wide"
      edit=wide/f02500.txt
      ;;
    big)
      files "$dir/w" 500 100
      edit=pkg3/sub7/m5.py
      ;;
    csv)
      files "$dir/w" 200 10
      edit=data.csv
      lines "$dir/w/$edit" csv 40000
      ;;
    log)
      edit=app.log
      lines "$dir/w/$edit" log 200000
      ;;
    *) echo "shapes.sh: no shape $shape" >&2; exit 2 ;;
  esac
  (cd "$dir/w" && "$OLD" init -q --store "sqlite:$dir/r/store.db" >/dev/null \
    && "$OLD" commit -q -m first >/dev/null)
  if [ "$shape" = big ]; then
    (cd "$dir/w" && "$NEW" watch -q >/dev/null 2>&1 &)
    for _ in $(seq 100); do [ -S "$dir/w/.snapgraph/watch.sock" ] && break; sleep 0.05; done
    # The first commit with the watcher scans everything and stores its token.
    echo '# first' >>"$dir/w/$edit" && (cd "$dir/w" && "$NEW" commit -q -m t >/dev/null)
  fi
  cat >"$dir/turn.sh" <<EOF
#!/bin/sh
cd "$dir/w" || exit 1
echo '# x' >> "$edit"
exec "\$1" commit -q -m t
EOF
  chmod +x "$dir/turn.sh"
  echo "== $shape ($edit)"
  python3 "$HERE/benches/peers/alternate.py" "$ROUNDS" \
    "old::$dir/turn.sh $OLD" "new::$dir/turn.sh $NEW"
  if [ "$shape" = big ]; then
    "$NEW" -C "$dir/w" watch --stop -q >/dev/null 2>&1 || true
  fi
done
