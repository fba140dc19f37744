"""Per-turn commit and checkout through Python next to the same work in Rust, in one
process and one run (the Rust side is `snapgraph._snapgraph._BenchRust`, which runs
the protocol of `benches/benches/common` on the very same paths and bytes).

Workload: 2,000 files of 4 KB in 20 directories, committed once; then each turn
rewrites one file with new bytes and commits with the previous commit as parent and
the store as `have_in`, and the new objects go into the store (a `dict` in Python, a
`HashMap` in Rust). Checkout: the final head into a fresh workspace from that store.
Rounds alternate which side goes first.

Two clocks: wall-clock medians per turn (time.perf_counter), and CPU time of the whole
turn loop (time.process_time, every thread of the process) divided by the turns. On a
machine shared with other jobs the wall clock also counts the time the process waited
for a core; CPU time does not, so its ratio is the steadier one.

    python benches/python_vs_rust.py [--turns 1000] [--rounds 6] [--checkouts 5]

Instruction counts, which the machine's load does not change: `--only py|rs` runs one
side's setup and `--turns` turns (or `--checkouts` checkouts) with no timing, for
valgrind; the difference of two runs with different counts is the cost per turn.

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python \
        benches/python_vs_rust.py --only py --turns 200 --checkouts 0
"""

import argparse
import random
import statistics
import time

import snapgraph
from snapgraph import _snapgraph

FILES, DIRS, SIZE = 2_000, 20, 4_000


def workload(turns, seed):
    rng = random.Random(seed)
    paths = [f"/d{i % DIRS:02}/f{i:05}.bin" for i in range(FILES)]
    files = [(p, rng.randbytes(SIZE)) for p in paths]
    edits = [(paths[t % FILES], rng.randbytes(SIZE)) for t in range(turns)]
    return files, edits


def python_side(files, edits, checkouts, have_keys=False):
    ws = snapgraph.Workspace()
    for p, data in files:
        ws.write(p, data)
    first = ws.commit()
    objects = dict(first.objects)
    head = first.id
    per_turn = []
    cpu = time.process_time()
    for p, data in edits:
        t = time.perf_counter()
        ws.write(p, data)
        if have_keys:
            c = ws.commit(parents=[head], have=objects.keys())
        else:
            c = ws.commit(parents=[head], have_in=objects)
        objects.update(c.objects)
        head = c.id
        per_turn.append(time.perf_counter() - t)
    turn_cpu = (time.process_time() - cpu) / max(len(edits), 1)
    per_checkout = []
    cpu = time.process_time()
    for _ in range(checkouts):
        t = time.perf_counter()
        fresh = snapgraph.Workspace()
        fresh.checkout(head, objects)
        per_checkout.append(time.perf_counter() - t)
        del fresh
    checkout_cpu = (time.process_time() - cpu) / max(checkouts, 1)
    return per_turn, turn_cpu, per_checkout, checkout_cpu


def rust_side(files, edits, checkouts):
    bench = _snapgraph._BenchRust(files)
    cpu = time.process_time()
    per_turn = bench.turns(edits)
    turn_cpu = (time.process_time() - cpu) / max(len(edits), 1)
    cpu = time.process_time()
    per_checkout = bench.checkouts(checkouts)
    checkout_cpu = (time.process_time() - cpu) / max(checkouts, 1)
    return per_turn, turn_cpu, per_checkout, checkout_cpu


def med(xs):
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--checkouts", type=int, default=5)
    ap.add_argument("--only", choices=["py", "rs"])
    args = ap.parse_args()
    if args.only:
        files, edits = workload(args.turns, seed=0)
        (python_side if args.only == "py" else rust_side)(files, edits, args.checkouts)
        return
    wall = {"py": [], "rs": [], "pyc": [], "rsc": [], "keys": []}
    cpu = {"py": [], "rs": [], "pyc": [], "rsc": [], "keys": []}
    for r in range(args.rounds):
        files, edits = workload(args.turns, seed=r)
        sides = [("py", python_side), ("rs", rust_side)]
        if r % 2:
            sides.reverse()
        for name, fn in sides:
            t, tc, c, cc = fn(files, edits, args.checkouts)
            wall[name] += t
            wall[name + "c"] += c
            cpu[name].append(tc)
            cpu[name + "c"].append(cc)
        t, tc, _, _ = python_side(files, edits[: args.turns // 4], 0, have_keys=True)
        wall["keys"] += t
        cpu["keys"].append(tc)
        print(
            f"round {r + 1}: turn CPU python {cpu['py'][-1] * 1e6:.1f} us, rust {cpu['rs'][-1] * 1e6:.1f} us "
            f"({cpu['py'][-1] / cpu['rs'][-1]:.2f}x); checkout CPU python {cpu['pyc'][-1] * 1e3:.1f} ms, "
            f"rust {cpu['rsc'][-1] * 1e3:.1f} ms ({cpu['pyc'][-1] / cpu['rsc'][-1]:.2f}x)",
            flush=True,
        )
    turn_ratios = sorted(p / q for p, q in zip(cpu["py"], cpu["rs"]))
    checkout_ratios = sorted(p / q for p, q in zip(cpu["pyc"], cpu["rsc"]))
    us = lambda x: f"{x * 1e6:.1f} µs"  # noqa: E731
    ms = lambda x: f"{x * 1e3:.2f} ms"  # noqa: E731
    print()
    print("| measure | Python | Rust | Python / Rust |")
    print("|---|---|---|---|")
    print(
        f"| per-turn commit, `have_in=dict`: CPU per turn (median of rounds) | {us(med(cpu['py']))} | "
        f"{us(med(cpu['rs']))} | {med(turn_ratios):.2f}x ({turn_ratios[0]:.2f} to {turn_ratios[-1]:.2f}) |"
    )
    print(
        f"| per-turn commit, `have_in=dict`: wall-clock median | {us(med(wall['py']))} | "
        f"{us(med(wall['rs']))} | {med(wall['py']) / med(wall['rs']):.2f}x |"
    )
    print(
        f"| checkout 2,000 x 4 KB from a dict / `HashMap`: CPU (median of rounds) | {ms(med(cpu['pyc']))} | "
        f"{ms(med(cpu['rsc']))} | {med(checkout_ratios):.2f}x ({checkout_ratios[0]:.2f} to {checkout_ratios[-1]:.2f}) |"
    )
    print(
        f"| checkout: wall-clock median | {ms(med(wall['pyc']))} | {ms(med(wall['rsc']))} | "
        f"{med(wall['pyc']) / med(wall['rsc']):.2f}x |"
    )
    print(
        f"| per-turn commit, `have=objects.keys()` (Bashkit's form): CPU | {us(med(cpu['keys']))} | "
        f"{us(med(cpu['rs']))} (`have_in`) | {med(cpu['keys']) / med(cpu['rs']):.1f}x |"
    )
    print(f"\n{args.rounds} rounds of {args.turns} turns and {args.checkouts} checkouts per side")


if __name__ == "__main__":
    main()
