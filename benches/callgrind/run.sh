#!/usr/bin/env bash
# Instruction counts of ingest and checkout against their ceilings, under callgrind
# (issue #21). One command: `benches/callgrind/run.sh [OUT_DIR]`.
#
# Installs valgrind from Debian if it is missing, builds the workloads
# (benches/callgrind/main.rs) with the bench profile, runs each mode once under
# callgrind and prints the table of BENCHMARKS.md: each row is the difference of two
# modes, so data generation (and the commit before a checkout) is subtracted.
# Counts do not depend on the machine's load. The two-thread modes run with
# `--separate-threads=yes`: each thread is counted apart, and since a two-thread run
# takes at least as long as its busiest thread, the two-thread table compares busiest
# threads (the calling thread minus the setup its mode shares with a one-thread mode;
# a spawned thread, counted over every scope it ran in, as valgrind reuses the slot).
set -euo pipefail

cd "$(dirname "$0")/../.."
out=${1:-target/callgrind}
mkdir -p "$out"

if ! command -v valgrind >/dev/null; then
    if [ "$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi
    if ! apt-cache policy valgrind | grep -q Candidate; then $sudo apt-get update; fi
    $sudo apt-get install -y valgrind
fi

# CALLGRIND_BIN runs a binary built earlier instead (a "before" build, say).
bin=${CALLGRIND_BIN:-target/release/examples/callgrind}
if [ -z "${CALLGRIND_BIN:-}" ]; then
    cargo build --profile bench -p snapgraph-benches --example callgrind
fi

modes="gen cut cut_hash write_commit write_owned_commit gen_shared write_shared_commit store
    checkout checkout_owned turns_setup turns small_setup small_checkout diff_setup diff edit_setup
    edit16"
modes2="hash2 write_commit2 write_owned_commit2 write_shared_commit2 checkout2 checkout_owned2"
declare -A ir
for m in $modes; do
    valgrind --tool=callgrind --callgrind-out-file="$out/$m.out" "$bin" "$m" \
        2>"$out/$m.log"
    # The `summary:` line of a callgrind file is the total instruction count.
    ir[$m]=$(awk '/^summary:/ {print $2}' "$out/$m.out")
done
# Two-thread modes: `main` is the calling thread's count, `other` the busiest other
# thread's, `others` all other threads' together.
declare -A main other others
for m in $modes2; do
    rm -f "$out/$m.out"-*
    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out/$m.out" \
        "$bin" "$m" 2>"$out/$m.log"
    main[$m]=$(awk '/^summary:/ {print $2}' "$out/$m.out-01")
    other[$m]=0
    others[$m]=0
    for f in "$out/$m.out"-*; do
        [ "$f" = "$out/$m.out-01" ] && continue
        n=$(awk '/^summary:/ {print $2}' "$f")
        others[$m]=$((others[$m] + n))
        [ "$n" -gt "${other[$m]}" ] && other[$m]=$n
    done
done

awk -v gen="${ir[gen]}" -v cut="${ir[cut]}" -v cut_hash="${ir[cut_hash]}" \
    -v wc="${ir[write_commit]}" -v woc="${ir[write_owned_commit]}" -v gs="${ir[gen_shared]}" -v wsc="${ir[write_shared_commit]}" \
    -v store="${ir[store]}" -v co="${ir[checkout]}" -v coo="${ir[checkout_owned]}" \
    -v ts="${ir[turns_setup]}" -v t="${ir[turns]}" -v ss="${ir[small_setup]}" \
    -v sc="${ir[small_checkout]}" -v ds="${ir[diff_setup]}" -v d="${ir[diff]}" \
    -v es="${ir[edit_setup]}" -v e="${ir[edit16]}" 'BEGIN {
    ceiling = cut_hash - gen; b3 = cut_hash - cut
    ingest = wc - gen; owned_w = woc - gen; shared = wsc - gs; checkout = co - store; owned = coo - store
    m = 1e6; k = 1e3
    print "| work | instructions | vs its ceiling |"
    print "|---|---:|---:|"
    printf "| ceiling: FastCDC v2020 4/16/64 KiB cut points + `blake3::hash` of each chunk | %.0f M | 100%% |\n", ceiling / m
    printf "| `Workspace::write` + `commit` of one 64 MiB file | %.0f M | %.1f%% |\n", ingest / m, 100 * ceiling / ingest
    printf "| `Workspace::write_owned` + `commit` of the same | %.0f M | %.1f%% |\n", owned_w / m, 100 * ceiling / owned_w
    printf "| `Workspace::write_shared` + `commit` of the same | %.0f M | %.1f%% |\n", shared / m, 100 * ceiling / shared
    printf "| ceiling: `blake3::hash` of each chunk of the same 64 MiB | %.0f M | 100%% |\n", b3 / m
    printf "| `checkout` of that commit from a `HashMap` (minus the commit) | %.0f M | %.1f%% |\n", checkout / m, 100 * b3 / checkout
    printf "| `checkout` of that commit from an owning source (`Cow::Owned`) | %.0f M | %.1f%% |\n", owned / m, 100 * b3 / owned
    print ""
    print "| figure that must not get worse | instructions |"
    print "|---|---:|"
    printf "| per-turn commit (2,000 files of 4 KB, one rewritten; per turn of 100) | %.1f k |\n", (t - ts) / 100 / k
    printf "| checkout of those 2,000 files from a `HashMap` | %.2f M |\n", (sc - ss) / m
    printf "| `diff` of commits 1 and 1,000 changes apart (both) | %.2f M |\n", (d - ds) / m
    printf "| 16-byte edit of a 64 MiB file: `commit` (per edit of 4) | %.2f M |\n", (e - es) / 4 / m
}'
# Two threads: the calling thread minus its one-thread setup, the busiest other thread,
# all threads together; ingest against the one-thread cut-and-hash ceiling, checkout
# against the two-thread BLAKE3 ceiling, each by busiest thread.
{
    echo "ceiling $((ir[cut_hash] - ir[gen]))"
    for m in $modes2; do
        case $m in
            hash2) base=${ir[cut]} ;;
            write_shared_commit2) base=${ir[gen_shared]} ;;
            checkout*) base=${ir[store]} ;;
            *) base=${ir[gen]} ;;
        esac
        echo "$m $((main[$m] - base)) ${other[$m]} ${others[$m]}"
    done
} | awk '
    $1 == "ceiling" { ceiling = $2; next }
    { mine[$1] = $2; other[$1] = $3; total[$1] = $2 + $4; busy[$1] = ($2 > $3 ? $2 : $3) }
    END {
        m = 1e6
        label["hash2"] = "ceiling: `blake3::hash` of each chunk, two runs of equal bytes"
        label["write_commit2"] = "`write` + `commit`"
        label["write_owned_commit2"] = "`write_owned` + `commit`"
        label["write_shared_commit2"] = "`write_shared` + `commit`"
        label["checkout2"] = "`checkout` from a `HashMap`"
        label["checkout_owned2"] = "`checkout` from an owning source"
        print ""
        print "| two threads (`set_parallelism(2)`) | calling thread | other thread | total | vs its ceiling, by busiest thread |"
        print "|---|---:|---:|---:|---:|"
        n = split("write_commit2 write_owned_commit2 write_shared_commit2 hash2 checkout2 checkout_owned2", order, " ")
        for (i = 1; i <= n; i++) {
            k = order[i]
            if (k == "hash2") vs = "100% (2-thread BLAKE3 ceiling)"
            else if (k ~ /^checkout/) vs = sprintf("%.1f%% of the 2-thread BLAKE3 ceiling", 100 * busy["hash2"] / busy[k])
            else vs = sprintf("%.2fx the 1-thread cut+hash ceiling", ceiling / busy[k])
            printf "| %s | %.1f M | %.1f M | %.1f M | %s |\n", label[k], mine[k] / m, other[k] / m, total[k] / m, vs
        }
    }'
echo "callgrind files in $out (callgrind_annotate $out/MODE.out)"
