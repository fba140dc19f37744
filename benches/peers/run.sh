#!/usr/bin/env bash
# Real-history comparison: 30 consecutive releases stored in sequence by snapgraph's
# CLI, git, restic and borg, all repositories and working trees on tmpfs (/dev/shm) so
# the disk does not decide. Prints markdown tables.
#
#   benches/peers/run.sh            # everything (downloads ~300 MB once, into target/peers)
#   PEERS_VERSIONS=5 benches/peers/run.sh   # a quick run on the first 5 versions
#   PEERS_DATA=synthetic benches/peers/run.sh   # generated releases (synth.py), no download
#   PEERS_TOOLS="snapgraph git" benches/peers/run.sh   # only these tools
#   PEERS_BIG_MIB=0 benches/peers/run.sh   # skip the 1 GiB tree (memory and throughput)
#   (snapgraph's no-change and one-file turns are also timed with `snapgraph watch`
#   running in the working tree: the "(watch)" columns; git has none on Linux)
#   PEERS_SG_BEFORE=/path/to/old/snapgraph benches/peers/run.sh   # also an older build,
#       as the tool "snapgraph-before", for before/after figures from one run
#
# Data: PEERS_DATA=django (default) is Django 4.2.1 .. 4.2.30 from PyPI; synthetic is
# benches/peers/synth.py's stand-in of the same shape (about 1,800 files, 21 MiB,
# 2-4 % of the files edited per release), for machines that may not download.
#
# The tools run interleaved: every version, repetition and step goes through each
# tool in turn (the first one rotating), so that a machine drifting during the run
# weighs on all of them alike.
#
# What is timed, per tool: each version's snapshot command only (replacing the
# working tree's files with the next release is done the same way for every tool,
# with rsync, and not timed). Then: the repository's size on disk, a snapshot with
# nothing changed, one incremental snapshot after a one-line change to one file, and
# restoring the middle version into an empty directory; then each tool's own
# maintenance (`snapgraph gc`: collect, repack at zstd 19, vacuum; `git gc`;
# `restic prune`; `borg compact`), timed once, and the size and a restore after it
# (git's size after `git gc` is its figure of record, so ours is after our gc too);
# the peak memory column is
# the largest maximum resident set size of the snapshot commands (/usr/bin/time). The short operations run
# PEERS_REPEAT times (default 5) and the median is shown. Times are taken with bash's
# $EPOCHREALTIME (no process start of a clock around them). The machine may be shared:
# compare the columns of one run, not runs of different days.
#
# Then a tree of PEERS_BIG_MIB MiB (default 1024: files of 4 KiB to 8 MiB, random
# bytes) is committed, checked out and imported from a tar by snapgraph, and added
# and committed by git, each under /usr/bin/time -v: wall time, throughput and peak
# memory (maximum resident set size).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
DATA=${PEERS_DATA:-django}
COUNT=${PEERS_VERSIONS:-30}
REPEAT=${PEERS_REPEAT:-5}
BIG_MIB=${PEERS_BIG_MIB:-1024}
read -r -a TOOLS <<< "${PEERS_TOOLS:-snapgraph git restic borg}"
# An older build runs first; named in PEERS_TOOLS as well, it is still run once.
if [ -n "${PEERS_SG_BEFORE:-}" ]; then
  rest=()
  for t in "${TOOLS[@]}"; do [ "$t" = snapgraph-before ] || rest+=("$t"); done
  TOOLS=(snapgraph-before "${rest[@]}")
fi
CACHE=$ROOT/target/peers
SHM=${PEERS_TMP:-/dev/shm/snapgraph-peers}

need() { command -v "$1" >/dev/null 2>&1; }
missing=()
for t in "${TOOLS[@]}"; do
  case $t in
    git) need git || missing+=(git) ;;
    restic) need restic || missing+=(restic) ;;
    borg) need borg || missing+=(borgbackup) ;;
  esac
done
need rsync || missing+=(rsync)
[ -x /usr/bin/time ] || missing+=(time)
[ "$DATA" = synthetic ] || need curl || missing+=(curl)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} from Debian" >&2
  apt-get update -qq >&2 && apt-get install -y -qq "${missing[@]}" >&2
fi
[ "$(stat -f -c %T "$(dirname "$SHM")")" = tmpfs ] || echo "warning: $(dirname "$SHM") is not tmpfs" >&2

echo "building snapgraph (release)" >&2
cargo build --release -q -p snapgraph-cli >&2
SG_AFTER=$ROOT/target/release/snapgraph
SG=$SG_AFTER

# 1. The releases, once: downloaded (through PyPI's JSON API) or generated.
VERSIONS=()
case $DATA in
  django)
    PROJECT=django
    EDIT_FILE=django/__init__.py
    TREES=$CACHE/tree
    mkdir -p "$CACHE/sdist" "$TREES"
    for ((i = 1; i <= COUNT; i++)); do VERSIONS+=("4.2.$i"); done
    INDEX=$CACHE/$PROJECT.json
    for v in "${VERSIONS[@]}"; do
      [ -d "$TREES/$v" ] && continue
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
      rm -rf "$TREES/$v.tmp" && mkdir -p "$TREES/$v.tmp"
      tar xzf "$CACHE/sdist/$v.tar.gz" -C "$TREES/$v.tmp" --strip-components=1
      mv "$TREES/$v.tmp" "$TREES/$v"
    done
    ;;
  synthetic)
    PROJECT="a synthetic project (benches/peers/synth.py)"
    EDIT_FILE=project/__init__.py
    TREES=$CACHE/synthetic-$COUNT
    for ((i = 1; i <= COUNT; i++)); do VERSIONS+=("$i"); done
    if [ ! -d "$TREES/$COUNT" ]; then
      echo "generating $COUNT synthetic releases" >&2
      rm -rf "$TREES" && mkdir -p "$TREES"
      python3 benches/peers/synth.py "$TREES" "$COUNT"
    fi
    ;;
  *) echo "PEERS_DATA: django or synthetic, not $DATA" >&2; exit 2 ;;
esac

rm -rf "$SHM" && mkdir -p "$SHM"
export RESTIC_PASSWORD=peers BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes BORG_RELOCATED_REPO_ACCESS_IS_OK=yes
export GIT_AUTHOR_NAME=peers GIT_AUTHOR_EMAIL=p@example.invalid GIT_COMMITTER_NAME=peers GIT_COMMITTER_EMAIL=p@example.invalid

# A timed entry (see `timed`) as seconds: a wall entry is "T0 T1" ($EPOCHREALTIME
# before and after), a CPU entry "BEFORE|AFTER" (the children's line of bash's `times`).
VALUE='
import re, statistics, sys
def cpu(line):
    return sum(int(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([\d.]+)s", line))
def val(e):
    if "|" in e:
        before, after = e.split("|")
        return cpu(after) - cpu(before)
    if " " in e:
        t0, t1 = e.split()
        return float(t1) - float(t0)
    return float(e)
'
sum() { python3 -c "$VALUE
print(f'{sum(map(val, sys.argv[1:])):.2f}')" "$@"; }
# Medians to 10 us: a 2 ms turn rounded to 0.1 ms moved its ratio to git by up to 5 %.
median() { python3 -c "$VALUE
print(f'{statistics.median(map(val, sys.argv[1:])):.5f}')" "$@"; }
# timed VAR CMD...: runs CMD, adds its wall time to the array VAR and the CPU time
# (user + system) of the processes it ran to the array VAR_cpu, both as raw entries
# that `sum` and `median` turn into seconds. Nothing but builtins runs between two
# timed commands (the CPU time is bash's `times`, its children's rusage, written to
# a file and read back by `read`): a python3 start between turns, as this function
# had, left the next turn a millisecond slower (cold caches), a sixth of a per-turn
# commit.
timed() {
  local -n into=$1
  local -n cpu_into=${1}_cpu
  shift
  local c0 c1
  times > "$SHM/times0"
  local t0=$EPOCHREALTIME
  "$@"
  local t1=$EPOCHREALTIME
  times > "$SHM/times1"
  { read -r _; read -r c0; } < "$SHM/times0"
  { read -r _; read -r c1; } < "$SHM/times1"
  into+=("$t0 $t1")
  cpu_into+=("$c0|$c1")
}

# Per tool: init / snapshot VERSION / restore VERSION DIR; each runs in its tree.
sg_init() { mkdir -p "$R" && (cd "$W" && "$SG" init --store "sqlite:$R/store.db" >/dev/null); }
sg_snap() { (cd "$W" && "$SG" commit -q -m "$1" >/dev/null && "$SG" tag -q "v$1" >/dev/null); }
# The timed turn runs one process, as git's runs its two, with no subshell around it
# (`-C` instead of `cd`: a fork of this bash was a millisecond of every turn).
sg_time() { "$SG" -C "$W" commit -q -m "$1" >/dev/null; }
# The timed restore too (its target is absolute).
sg_restore() { "$SG" -C "$W" checkout -q "v$1" --to "$2" >/dev/null; }
# gc: a tool's own maintenance step. snapgraph-before is a build without repack
# (stop 28): its gc is the collection alone.
sg_gc() {
  if [ "$tool" = snapgraph-before ]; then (cd "$W" && "$SG" gc -q >/dev/null)
  else (cd "$W" && "$SG" gc -q --repack full >/dev/null); fi
}

# No automatic gc or maintenance: git starts them detached after a commit, and with
# the tools interleaved they would run beside the next tool's timed commands (git's
# own `git gc` step below is its maintenance, timed).
git_init() {
  git init -q --bare "$R" && git --git-dir="$R" config core.bare false &&
    git --git-dir="$R" config gc.auto 0 && git --git-dir="$R" config maintenance.auto false
}
g() { git --git-dir="$R" --work-tree="$W" "$@"; }
git_snap() { g add -A && g commit -q -m "$1" && g tag "v$1"; }
# With nothing changed, `git commit` reports it and exits 1: not an error here.
git_time() { g add -A && { g commit -q -m "$1" >/dev/null || g diff --cached --quiet; }; }
git_restore() { mkdir -p "$2" && git --git-dir="$R" archive "v$1" | tar -x -C "$2"; }
git_gc() { git --git-dir="$R" gc -q; }

restic_init() { restic -q -r "$R" init >/dev/null; }
restic_snap() { (cd "$W" && restic -q -r "$R" backup --tag "v$1" . >/dev/null); }
restic_time() { (cd "$W" && restic -q -r "$R" backup . >/dev/null); }
restic_restore() {
  local id
  id=$(restic -q -r "$R" snapshots --tag "v$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["short_id"])')
  restic -q -r "$R" restore "$id" --target "$2" >/dev/null
}
restic_gc() { restic -q -r "$R" prune >/dev/null; }

borg_init() { borg init -e none "$R"; }
borg_snap() { (cd "$W" && borg create "$R::v$1" .); }
borg_time() { (cd "$W" && borg create "$R::edit-$RANDOM$RANDOM" .); }
borg_restore() { mkdir -p "$2" && (cd "$2" && borg extract "$R::v$1"); }
borg_gc() { borg compact "$R" >/dev/null; }

# peaked VAR CMD...: runs CMD (a shell function) under /usr/bin/time, keeps the
# largest maximum resident set size seen (KiB) in PEAK[$tool], and adds CMD's wall
# and CPU time, taken inside the wrapper by `inner`, to the arrays VAR and VAR_cpu as
# `timed` would. The wrapper (/usr/bin/time, env, and a bash that parses this script's
# functions) costs about 17 ms a version here, the same for every tool, and is not
# part of what a tool does: it used to be inside the timed region (stop 39).
peaked() {
  local -n into=$1
  local -n cpu_into=${1}_cpu
  shift
  /usr/bin/time -f %M -o "$SHM/rss" env W="$W" R="$R" SG="$SG" SHM="$SHM" \
    bash -c "$(declare -f); inner $*"
  local kib c0 c1 wall
  kib=$(tail -n 1 "$SHM/rss")
  if [ "$kib" -gt "${PEAK[$tool]:-0}" ]; then PEAK[$tool]=$kib; fi
  { read -r _; read -r c0; } < "$SHM/times0"
  { read -r _; read -r c1; } < "$SHM/times1"
  read -r wall < "$SHM/wall"
  into+=("$wall")
  cpu_into+=("$c0|$c1")
}
# inner CMD...: runs CMD in the wrapper's bash, writing its wall time ("T0 T1") to
# $SHM/wall and the bash's children's CPU before and after (`times`) to
# $SHM/times0 and $SHM/times1: CMD's processes are that bash's only children. A CMD
# that fails fails the wrapper, and so the run (`set -e`).
inner() {
  times > "$SHM/times0"
  local t0=$EPOCHREALTIME
  "$@" || return
  local t1=$EPOCHREALTIME
  times > "$SHM/times1"
  echo "$t0 $t1" > "$SHM/wall"
}

declare -A PREFIX=([snapgraph]=sg [snapgraph-before]=sg [git]=git [restic]=restic [borg]=borg)
declare -A TOTAL TOTAL_CPU SIZE NOCHANGE INCR RESTORE NOCHANGE_CPU INCR_CPU RESTORE_CPU PEAK
declare -A GC GC_CPU SIZE_GC RESTORE_GC RESTORE_GC_CPU
declare -A NOCHANGE_W NOCHANGE_W_CPU INCR_W INCR_W_CPU
MIDDLE=${VERSIONS[$((COUNT / 2))]}
# The tools run interleaved: each version, repetition and step goes through every
# tool before the next one, the first tool rotating from round to round (as
# `alternate.py` does), so that a machine whose speed drifts during the run (by a
# third within minutes on the 2-vCPU guests of stops 39-41) weighs on every tool
# alike. Run tool after tool (before stop 41), the first tool's columns came out
# ahead of the same build's run second.
NT=${#TOOLS[@]}
# use K: the K-th tool's context (tool, p, SG, W, R) for the functions above.
use() {
  tool=${TOOLS[$1]}
  p=${PREFIX[$tool]}
  SG=$SG_AFTER
  [ "$tool" = snapgraph-before ] && SG=$PEERS_SG_BEFORE
  W=$SHM/$tool-tree R=$SHM/$tool-repo
}
# order ROUND: the tools' indices for that round, starting at ROUND modulo their count.
order() { local k; for ((k = 0; k < NT; k++)); do echo $(((k + $1) % NT)); done; }
# fresh NAME: empty arrays NAME_K and NAME_K_cpu for every tool K (what `timed` and
# `peaked` append to).
fresh() { local k; for ((k = 0; k < NT; k++)); do declare -g -a "$1_$k=()" "$1_${k}_cpu=()"; done; }
# med NAME / tot NAME: the median / sum of the array NAME (and of NAME_cpu, with cpu).
med() { local -n a=$1; median "${a[@]}"; }
tot() { local -n a=$1; sum "${a[@]}"; }
for ((k = 0; k < NT; k++)); do
  use $k
  mkdir -p "$W"
  "${p}_init"
done
fresh ST
round=0
for v in "${VERSIONS[@]}"; do
  for k in $(order $round); do
    use $k
    # --modify-window=-1: rsync's quick check compares whole seconds by default, so
    # a file of the same size whose mtime moved less than a second (synth.py writes
    # the releases within one) was left at its old content and every tool stored a
    # history without that edit; nanoseconds count now.
    rsync -a --delete --modify-window=-1 --exclude=/.snapgraph "$TREES/$v/" "$W/"
    peaked "ST_$k" "${p}_snap" "$v"
  done
  round=$((round + 1))
done
for ((k = 0; k < NT; k++)); do
  use $k
  TOTAL[$tool]=$(tot "ST_$k")
  TOTAL_CPU[$tool]=$(tot "ST_${k}_cpu")
  SIZE[$tool]=$(du -sb "$R" | cut -f1)
done
fresh NC
fresh IN
for ((i = 0; i < REPEAT; i++)); do
  for k in $(order $i); do use $k; timed "NC_$k" "${p}_time" "same"; done
done
for ((i = 0; i < REPEAT; i++)); do
  for k in $(order $i); do
    use $k
    echo "# local change $i" >> "$W/$EDIT_FILE"
    timed "IN_$k" "${p}_time" "edit"
  done
done
for ((k = 0; k < NT; k++)); do
  use $k
  NOCHANGE[$tool]=$(med "NC_$k") NOCHANGE_CPU[$tool]=$(med "NC_${k}_cpu")
  INCR[$tool]=$(med "IN_$k") INCR_CPU[$tool]=$(med "IN_${k}_cpu")
done
# The same two turns with `snapgraph watch` running in each snapgraph working tree
# (snapgraph only: git's builtin fsmonitor daemon does not exist on Linux, and its
# hook needs watchman, so git's columns stay the scans above). The first commit with
# the watcher scans everything and stores its token; it is not timed.
watched=()
declare -A WATCH_PID
for ((k = 0; k < NT; k++)); do
  use $k
  if [ "$p" = sg ] && "$SG" watch --help >/dev/null 2>&1; then
    "$SG" -C "$W" watch -q >/dev/null 2>"$SHM/watch-$k.err" &
    WATCH_PID[$k]=$!
    watched+=("$k")
  fi
done
for k in "${watched[@]}"; do
  use $k
  for _ in $(seq 100); do [ -S "$W/.snapgraph/watch.sock" ] && break; sleep 0.05; done
  sg_time "warm-up"
done
fresh NW
fresh IW
nw=${#watched[@]}
for ((i = 0; i < REPEAT; i++)); do
  for ((j = 0; j < nw; j++)); do
    k=${watched[$(((j + i) % nw))]}
    use $k
    timed "NW_$k" "${p}_time" "same"
  done
done
for ((i = 0; i < REPEAT; i++)); do
  for ((j = 0; j < nw; j++)); do
    k=${watched[$(((j + i) % nw))]}
    use $k
    echo "# watched change $i" >> "$W/$EDIT_FILE"
    timed "IW_$k" "${p}_time" "edit"
  done
done
for k in "${watched[@]}"; do
  use $k
  NOCHANGE_W[$tool]=$(med "NW_$k") NOCHANGE_W_CPU[$tool]=$(med "NW_${k}_cpu")
  INCR_W[$tool]=$(med "IW_$k") INCR_W_CPU[$tool]=$(med "IW_${k}_cpu")
  "$SG" -C "$W" watch --stop -q >/dev/null || true
  wait "${WATCH_PID[$k]}" || echo "warning: snapgraph watch: $(cat "$SHM/watch-$k.err")" >&2
done
# restores NAME WHEN: REPEAT restores of the middle version by every tool, interleaved.
restores() {
  fresh "$1"
  local i k out
  for ((i = 0; i < REPEAT; i++)); do
    for k in $(order "$i"); do
      use "$k"
      out=$SHM/$tool-restore-$i
      timed "$1_$k" "${p}_restore" "$MIDDLE" "$out"
      diff -r -q "$TREES/$MIDDLE" "$out" >/dev/null || echo "warning: $tool restore of $MIDDLE$2 differs" >&2
      rm -rf "$out"
    done
  done
}
restores RS ""
for ((k = 0; k < NT; k++)); do
  use $k
  RESTORE[$tool]=$(med "RS_$k") RESTORE_CPU[$tool]=$(med "RS_${k}_cpu")
done
# Each tool's own maintenance, once, then the size and restores after it.
fresh GCT
for ((k = 0; k < NT; k++)); do
  use $k
  timed "GCT_$k" "${p}_gc"
  GC[$tool]=$(med "GCT_$k") GC_CPU[$tool]=$(med "GCT_${k}_cpu")
  SIZE_GC[$tool]=$(du -sb "$R" | cut -f1)
done
restores RG " after gc"
for ((k = 0; k < NT; k++)); do
  use $k
  RESTORE_GC[$tool]=$(med "RG_$k") RESTORE_GC_CPU[$tool]=$(med "RG_${k}_cpu")
  rm -rf "$W" "$R"
  echo "$tool done: total ${TOTAL[$tool]} s" >&2
done

files=$(find "$TREES/${VERSIONS[0]}" -type f | wc -l)
bytes=$(du -sb "$TREES/${VERSIONS[0]}" | cut -f1)
ver() {
  case $1 in
    snapgraph) "$SG_AFTER" --version | awk '{print $2}' ;;
    snapgraph-before) echo "$("$PEERS_SG_BEFORE" --version | awk '{print $2}') (before)" ;;
    git) git --version | awk '{print $3}' ;;
    restic) restic version | awk '{print $2}' ;;
    borg) borg --version | awk '{print $2}' ;;
  esac
}
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
echo
echo "$COUNT releases of $PROJECT (${VERSIONS[0]} .. ${VERSIONS[-1]}; $files files, $((bytes / 1048576)) MiB each), tmpfs, $(nproc) cores, $(date -u +%Y-%m-%d); medians of $REPEAT for the last three columns"
echo
# A watch column's cell: the figure, or a dash for a tool without one.
wcell() { echo "${1:--}"; }
# git over a watch column: git's scan (it has no watcher on Linux) over ours watched.
wratio() { if [ -n "$2" ]; then echo "$(ratio "$1" "$2")x"; else echo -; fi; }
echo "| tool | version | store $COUNT versions (s) | peak memory storing (MiB) | repository size (MiB) | no-change snapshot (s) | one file changed (s) | no-change snapshot (watch) (s) | one file changed (watch) (s) | restore $MIDDLE (s) |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for tool in "${TOOLS[@]}"; do
  mib=$(python3 -c "print(f'{${SIZE[$tool]} / 1048576:.1f}')")
  echo "| $tool | $(ver "$tool") | ${TOTAL[$tool]} | $((PEAK[$tool] / 1024)) | $mib | ${NOCHANGE[$tool]} | ${INCR[$tool]} | $(wcell "${NOCHANGE_W[$tool]:-}") | $(wcell "${INCR_W[$tool]:-}") | ${RESTORE[$tool]} |"
done
for sg in snapgraph-before snapgraph; do
  if [ -n "${TOTAL[git]:-}" ] && [ -n "${TOTAL[$sg]:-}" ]; then
    echo "| git / $sg (times: higher is faster) | | $(ratio "${TOTAL[git]}" "${TOTAL[$sg]}")x | $(ratio "${PEAK[git]}" "${PEAK[$sg]}")x | $(ratio "${SIZE[git]}" "${SIZE[$sg]}")x | $(ratio "${NOCHANGE[git]}" "${NOCHANGE[$sg]}")x | $(ratio "${INCR[git]}" "${INCR[$sg]}")x | $(wratio "${NOCHANGE[git]}" "${NOCHANGE_W[$sg]:-}") | $(wratio "${INCR[git]}" "${INCR_W[$sg]:-}") | $(ratio "${RESTORE[git]}" "${RESTORE[$sg]}")x |"
  fi
done
echo
echo "The (watch) columns: snapgraph with \`snapgraph watch\` running in the working tree; git has no such column (its builtin fsmonitor daemon exists on macOS and Windows only, not Linux), so git / snapgraph there is git's scan over snapgraph watched."

echo
echo "CPU time (user + system; the store column summed, the others medians of $REPEAT): what a shared machine disturbs least"
echo
echo "| tool | store $COUNT versions (s) | no-change snapshot (s) | one file changed (s) | no-change snapshot (watch) (s) | one file changed (watch) (s) | restore $MIDDLE (s) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for tool in "${TOOLS[@]}"; do
  echo "| $tool | ${TOTAL_CPU[$tool]} | ${NOCHANGE_CPU[$tool]} | ${INCR_CPU[$tool]} | $(wcell "${NOCHANGE_W_CPU[$tool]:-}") | $(wcell "${INCR_W_CPU[$tool]:-}") | ${RESTORE_CPU[$tool]} |"
done
for sg in snapgraph-before snapgraph; do
  if [ -n "${TOTAL[git]:-}" ] && [ -n "${TOTAL[$sg]:-}" ]; then
    echo "| git / $sg | $(ratio "${TOTAL_CPU[git]}" "${TOTAL_CPU[$sg]}")x | $(ratio "${NOCHANGE_CPU[git]}" "${NOCHANGE_CPU[$sg]}")x | $(ratio "${INCR_CPU[git]}" "${INCR_CPU[$sg]}")x | $(wratio "${NOCHANGE_CPU[git]}" "${NOCHANGE_W_CPU[$sg]:-}") | $(wratio "${INCR_CPU[git]}" "${INCR_W_CPU[$sg]:-}") | $(ratio "${RESTORE_CPU[git]}" "${RESTORE_CPU[$sg]}")x |"
  fi
done

echo
echo "Repository size as the run leaves it and after each tool's own maintenance (snapgraph gc: collect, repack at zstd 19, vacuum; git gc; restic prune; borg compact), that step's time (one run) and a restore of $MIDDLE after it (median of $REPEAT; CPU = user + system)"
echo
echo "| tool | size as left (MiB) | size after gc (MiB) | gc (s) | gc CPU (s) | restore $MIDDLE after gc (s) | its CPU (s) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for tool in "${TOOLS[@]}"; do
  echo "| $tool | $(python3 -c "print(f'{${SIZE[$tool]} / 1048576:.2f}')") | $(python3 -c "print(f'{${SIZE_GC[$tool]} / 1048576:.2f}')") | ${GC[$tool]} | ${GC_CPU[$tool]} | ${RESTORE_GC[$tool]} | ${RESTORE_GC_CPU[$tool]} |"
done
for sg in snapgraph-before snapgraph; do
  if [ -n "${TOTAL[git]:-}" ] && [ -n "${TOTAL[$sg]:-}" ]; then
    echo "| git / $sg (sizes: higher is smaller) | $(ratio "${SIZE[git]}" "${SIZE[$sg]}")x | $(ratio "${SIZE_GC[git]}" "${SIZE_GC[$sg]}")x | $(ratio "${GC[git]}" "${GC[$sg]}")x | $(ratio "${GC_CPU[git]}" "${GC_CPU[$sg]}")x | $(ratio "${RESTORE_GC[git]}" "${RESTORE_GC[$sg]}")x | $(ratio "${RESTORE_GC_CPU[git]}" "${RESTORE_GC_CPU[$sg]}")x |"
  fi
done
# 2. A big tree: throughput and peak memory.
if [ "$BIG_MIB" -gt 0 ]; then
  BIG=$SHM/big
  echo "generating a $BIG_MIB MiB tree" >&2
  python3 benches/peers/bigtree.py "$BIG/tree" "$BIG_MIB"
  big_bytes=$(du -sb "$BIG/tree" | cut -f1)
  big_files=$(find "$BIG/tree" -type f | wc -l)
  tar -C "$BIG/tree" -cf "$BIG/tree.tar" .
  # measure LABEL CMD...: wall time and peak RSS of CMD (a shell function run by bash).
  declare -a BIG_ROWS=()
  measure() {
    local label=$1
    shift
    local t0=$EPOCHREALTIME
    /usr/bin/time -v -o "$BIG/time.txt" bash -c "$(declare -f "$1"); $*"
    local secs
    secs=$(python3 -c "print(f'{$EPOCHREALTIME - $t0:.3f}')")
    local kib cpu
    kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$BIG/time.txt")
    cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.2f", s}' "$BIG/time.txt")
    BIG_ROWS+=("| $label | $secs | $(python3 -c "print(f'{$big_bytes / $secs / 1e9:.2f}')") | $cpu | $((kib / 1024)) |")
  }
  big_sg_commit() { cd "$BIG/tree" && "$SG" init --store "sqlite:$BIG/sg.db" >/dev/null && "$SG" commit -q -m big >/dev/null; }
  big_sg_checkout() { cd "$BIG/tree" && "$SG" checkout -q main --to "$BIG/out" >/dev/null; }
  big_sg_import() { mkdir -p "$BIG/imp" && cd "$BIG/imp" && "$SG" init --store "sqlite:$BIG/imp.db" >/dev/null && "$SG" import -q "$BIG/tree.tar" -m big >/dev/null; }
  big_git_commit() { cd "$BIG/tree" && git init -q --separate-git-dir "$BIG/git" . && git add -A && git commit -q -m big; }
  big_git_checkout() { mkdir -p "$BIG/gout" && git --git-dir="$BIG/git" --work-tree="$BIG/gout" checkout -q -f HEAD -- .; }
  export SG BIG
  for sg in snapgraph-before snapgraph; do
    [[ " ${TOOLS[*]} " == *" $sg "* ]] || continue
    SG=$SG_AFTER
    [ "$sg" = snapgraph-before ] && SG=$PEERS_SG_BEFORE
    export SG
    measure "$sg commit (first)" big_sg_commit
    measure "$sg checkout --to" big_sg_checkout
    diff -r -q -x .snapgraph "$BIG/tree" "$BIG/out" >/dev/null 2>&1 || echo "warning: $sg checkout of the big tree differs" >&2
    rm -rf "$BIG/out" "$BIG/tree/.snapgraph" "$BIG/sg.db"
    measure "$sg import (tar)" big_sg_import
    rm -rf "$BIG/imp" "$BIG/imp.db"
  done
  if [[ " ${TOOLS[*]} " == *" git "* ]]; then
    measure "git add -A && commit (first)" big_git_commit
    measure "git checkout (new work tree)" big_git_checkout
    rm -rf "$BIG/gout" "$BIG/git" "$BIG/tree/.git"
  fi
  echo
  echo "A tree of $((big_bytes / 1048576)) MiB ($big_files files of 4 KiB to 8 MiB, random bytes), tmpfs, /usr/bin/time -v"
  echo
  echo "| operation | time (s) | GB/s | CPU, user + system (s) | peak memory (MiB) |"
  echo "|---|---:|---:|---:|---:|"
  printf '%s\n' "${BIG_ROWS[@]}"
fi
rm -rf "$SHM"
