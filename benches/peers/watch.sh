#!/usr/bin/env bash
# watch.sh SG: CPU (perf's task-clock, median of 7) and syscalls (strace -c -f) of a
# no-change and a one-file `snapgraph commit`, without and with `snapgraph watch`
# running, then git add -A && commit on the same tree; synthetic releases 1 and 2
# (benches/peers/synth.py: 1,801 files, 202 dirs), tmpfs. Needs rsync, perf, strace.
#   benches/peers/watch.sh target/release/snapgraph
set -euo pipefail
SG=$(realpath "$1")
T=${PEERS_TREES:-$(cd "$(dirname "$0")/../.." && pwd)/target/peers/synthetic-2}
if [ ! -d "$T/2" ]; then rm -rf "$T" && mkdir -p "$T" && python3 "$(dirname "$0")/synth.py" "$T" 2; fi
W=/dev/shm/wmeas/tree R=/dev/shm/wmeas/repo
rm -rf /dev/shm/wmeas && mkdir -p $W $R
rsync -a $T/1/ $W/
(cd $W && $SG init -q --store sqlite:$R/store.db >/dev/null && $SG commit -q -m one >/dev/null)
rsync -a --delete --modify-window=-1 --exclude=/.snapgraph $T/2/ $W/
$SG -C $W commit -q -m two >/dev/null
$SG -C $W commit -q -m same >/dev/null || true
EDIT=$W/project/__init__.py
tc() { perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | awk -F, '/task-clock/ {print $1}'; }
sc() { strace -c -f -o /tmp/strace.out "$@" >/dev/null 2>&1; awk '$NF == "total" {print $4}' /tmp/strace.out; }
median() { python3 -c "import sys,statistics; print(f'{statistics.median(map(float,sys.argv[1:])):.2f}')" "$@"; }
run() {
  local label=$1
  local a=() b=()
  for i in 1 2 3 4 5 6 7; do a+=("$(tc $SG -C $W commit -q -m same)"); done
  for i in 1 2 3 4 5 6 7; do echo "# $label $i" >> $EDIT; b+=("$(tc $SG -C $W commit -q -m edit)"); done
  local sn sc1
  sn=$(sc $SG -C $W commit -q -m same)
  echo "# $label s" >> $EDIT
  sc1=$(sc $SG -C $W commit -q -m edit)
  echo "$label: no-change task-clock ms median $(median "${a[@]}") syscalls $sn; one-file task-clock ms median $(median "${b[@]}") syscalls $sc1"
}
run "scan (no watcher)"
$SG -C $W watch -q >/dev/null 2>/tmp/watch.err &
wp=$!
for _ in $(seq 100); do [ -S $W/.snapgraph/watch.sock ] && break; sleep 0.05; done
$SG -C $W commit -q -m warm >/dev/null || true
run "watch"
# the daemon's own CPU over the watched runs
echo "daemon: $(ps -o times= -p $wp) s CPU total (startup walk + events of all runs)"
$SG -C $W watch --stop -q >/dev/null; wait $wp || true
# git for reference
G=/dev/shm/wmeas/git; rm -rf $G; git init -q --bare $G; git --git-dir=$G config core.bare false
g() { git --git-dir=$G --work-tree=$W "$@"; }
export GIT_AUTHOR_NAME=p GIT_AUTHOR_EMAIL=p@e.invalid GIT_COMMITTER_NAME=p GIT_COMMITTER_EMAIL=p@e.invalid
g add -A && g commit -q -m base
gt() { perf stat -x, -e task-clock bash -c "git --git-dir=$G --work-tree=$W add -A && { git --git-dir=$G --work-tree=$W commit -q -m \$1 >/dev/null || true; }" _ "$1" 2>&1 >/dev/null | awk -F, '/task-clock/ {print $1}'; }
a=(); b=()
for i in 1 2 3 4 5 6 7; do a+=("$(gt same)"); done
for i in 1 2 3 4 5 6 7; do echo "# git $i" >> $EDIT; b+=("$(gt edit)"); done
echo "git add -A && commit (incl. one bash): no-change task-clock ms median $(median "${a[@]}"); one-file $(median "${b[@]}")"
