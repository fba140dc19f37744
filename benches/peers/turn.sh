#!/usr/bin/env bash
# The CLI's per-turn snapshot against git's `add -A && commit` on the same synthetic
# tree (issue #18): user-space instructions (callgrind), syscalls (`strace -c -f`) and
# CPU time (`perf stat -e task-clock -r N`) of a no-change and a one-file commit, and
# of a late-file commit: one that edits the last file the walk meets (the first walk,
# `unchanged`, finds the change only at its end).
#
#   benches/peers/turn.sh [SNAPGRAPH...]          # default: target/release/snapgraph
#   TURN_RUNS=30 TURN_TMP=/dev/shm/turn benches/peers/turn.sh old/snapgraph new/snapgraph
#
# Each binary gets its own copy of the working directory and store (alternating
# binaries in one directory would make each read the other's index as foreign).
# Releases 1-3 of `synth.py` are committed, then each operation is measured; the
# one-file commit appends a line to project/__init__.py before each run (perf stat
# runs `sh -c "echo >> FILE; COMMIT"`; the shell's cost is in every row alike).
# Counts do not depend on the machine's load; CPU times do, a little.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
TMP=${TURN_TMP:-/dev/shm/snapgraph-turn}
RUNS=${TURN_RUNS:-20}
BINS=("$@")
[ ${#BINS[@]} -eq 0 ] && BINS=("$ROOT/target/release/snapgraph")
for b in valgrind strace perf git python3 rsync; do
    command -v $b >/dev/null || { echo "turn.sh: needs $b" >&2; exit 1; }
done
rm -rf "$TMP" && mkdir -p "$TMP"
python3 benches/peers/synth.py "$TMP/releases" 3 >/dev/null
EDIT=project/__init__.py
# The last file a walk meets (a directory's files before its subdirectories, names
# in byte order): an edit there is found by the first walk only at its end.
LATE=$(python3 - "$TMP/releases/3" <<'PY'
import os, sys
def last(d, rel=""):
    names = sorted(os.listdir(d), key=os.fsencode)
    is_dir = lambda n: os.path.isdir(os.path.join(d, n)) and not os.path.islink(os.path.join(d, n))
    for n in reversed([n for n in names if is_dir(n)]):
        found = last(os.path.join(d, n), rel + n + "/")
        if found:
            return found
    files = [n for n in names if not is_dir(n)]
    return rel + files[-1] if files else None
print(last(sys.argv[1]))
PY
)

# Instructions of one run of "$@" (callgrind, user space), in millions.
instructions() {
    valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" "$@" >/dev/null 2>"$TMP/cg.err" || true
    awk '/^summary:/ {printf "%.2f M", $2 / 1e6}' "$TMP/cg.out"
}
# Syscalls of "$@" (all processes): the total and the three most frequent.
syscalls() {
    strace -c -f -o "$TMP/st.out" "$@" >/dev/null 2>&1 || true
    printf '%s (%s)' "$(awk '$NF == "total" {print $4}' "$TMP/st.out")" \
        "$(awk '/^-/ {n++; next} n == 1 {print $4, $NF}' "$TMP/st.out" | sort -rn | head -3 | paste -sd, | sed 's/,/, /g')"
}
# Task-clock of "$@" over $RUNS runs: mean ms and the spread perf reports.
cpu() {
    perf stat -e task-clock -r "$RUNS" -x, -o "$TMP/perf.out" "$@" >/dev/null 2>&1 || true
    awk -F, '/task-clock/ {printf "%.2f ms (+-%s)", $1, $4}' "$TMP/perf.out"
}

echo "| tool | no-change instructions | one-file instructions | late-file instructions | no-change syscalls | one-file syscalls | no-change CPU | one-file CPU | late-file CPU |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
i=0
for bin in "${BINS[@]}"; do
    i=$((i + 1))
    W=$TMP/sg$i/work R=$TMP/sg$i/repo
    mkdir -p "$W" "$R"
    (cd "$W" && "$bin" init --store "sqlite:$R/store.db" >/dev/null)
    for v in 1 2 3; do
        rsync -a --delete --exclude=/.snapgraph "$TMP/releases/$v/" "$W/"
        (cd "$W" && "$bin" commit -q -m "$v" >/dev/null)
    done
    cd "$W"
    same=("$bin" commit -q -m same)
    edit=(sh -c "echo '# x' >> $EDIT && exec $bin commit -q -m edit")
    late=(sh -c "echo '# x' >> $LATE && exec $bin commit -q -m late")
    # Settled: the index written anew as one base (no journal, whose length would
    # move the counts from run to run), then past the racy-timestamp window of that
    # commit (a second on any file system), then two commits that find nothing, so
    # the index records every file and directory as trusted.
    rm -f .snapgraph/index .snapgraph/index.skeleton
    "${same[@]}" >/dev/null || true
    sleep 1.1
    "${same[@]}" >/dev/null || true
    "${same[@]}" >/dev/null || true
    ni=$(instructions "${same[@]}")
    echo '# x' >> $EDIT
    ei=$(instructions "$bin" commit -q -m edit)
    echo '# x' >> $LATE
    li=$(instructions "$bin" commit -q -m late)
    ns=$(syscalls "${same[@]}")
    echo '# x' >> $EDIT
    es=$(syscalls "$bin" commit -q -m edit)
    nc=$(cpu "${same[@]}")
    ec=$(cpu "${edit[@]}")
    lc=$(cpu "${late[@]}")
    cd "$ROOT"
    echo "| $bin | $ni | $ei | $li | $ns | $es | $nc | $ec | $lc |"
done

# git: two processes, `add -A` then `commit` (which finds nothing to commit when
# nothing changed), as benches/peers/run.sh times them.
W=$TMP/git/work R=$TMP/git/repo
mkdir -p "$W"
git init -q --bare "$R" && git --git-dir="$R" config core.bare false
g() { git --git-dir="$R" --work-tree="$W" "$@"; }
for v in 1 2 3; do
    rsync -a --delete "$TMP/releases/$v/" "$W/"
    g add -A && g commit -q -m "$v"
done
turn="git --git-dir=$R --work-tree=$W add -A && { git --git-dir=$R --work-tree=$W commit -q -m t >/dev/null || true; }"
cd "$W"
sleep 1.1
sh -c "$turn"
sh -c "$turn"
nc=$(cpu sh -c "$turn")
ec=$(cpu sh -c "echo '# x' >> $EDIT && $turn")
lc=$(cpu sh -c "echo '# x' >> $LATE && $turn")
ns=$(syscalls sh -c "$turn")
echo '# x' >> $EDIT
es=$(syscalls sh -c "$turn")
ni=$(instructions git --git-dir="$R" --work-tree="$W" add -A)
cd "$ROOT"
echo "| git (add -A; commit) | $ni (add -A alone) | | | $ns | $es | $nc | $ec | $lc |"
