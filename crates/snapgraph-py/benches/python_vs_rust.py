"""Per-turn commit and checkout through Python next to the same work in Rust, in one
process and one run (the Rust side is `snapgraph._snapgraph._bench_rust`, which runs
the protocol of `benches/benches/common` on the very same paths and bytes).

Workload: 2,000 files of 4 KB in 20 directories, committed once; then each turn
rewrites one file with new bytes and commits with the previous commit as parent and
the store as `have_in`, and the new objects go into the store (a `dict` in Python, a
`HashMap` in Rust). Blocks of Python and Rust turns alternate so that both see the
same machine load. Checkout: the final head into a fresh workspace from the same
store.

    python benches/python_vs_rust.py [--turns 2000] [--rounds 4]
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


def python_turns(files, edits, checkouts, have_keys=False):
    ws = snapgraph.Workspace()
    for p, data in files:
        ws.write(p, data)
    first = ws.commit()
    objects = dict(first.objects)
    head = first.id
    per_turn = []
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
    per_checkout = []
    for _ in range(checkouts):
        t = time.perf_counter()
        fresh = snapgraph.Workspace()
        fresh.checkout(head, objects)
        per_checkout.append(time.perf_counter() - t)
        del fresh
    return per_turn, per_checkout


def us(xs):
    return statistics.median(xs) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=2_000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--checkouts", type=int, default=5)
    args = ap.parse_args()
    py_t, rs_t, py_c, rs_c, keys_t = [], [], [], [], []
    for r in range(args.rounds):
        files, edits = workload(args.turns, seed=r)
        order = [0, 1] if r % 2 == 0 else [1, 0]
        for side in order:
            if side == 0:
                t, c = python_turns(files, edits, args.checkouts)
                py_t += t
                py_c += c
            else:
                t, c = _snapgraph._bench_rust(files, edits, args.checkouts)
                rs_t += t
                rs_c += c
        t, _ = python_turns(files, edits[: args.turns // 4], 0, have_keys=True)
        keys_t += t
        print(
            f"round {r + 1}: turn python {us(py_t):.1f} us, rust {us(rs_t):.1f} us; "
            f"checkout python {us(py_c) / 1e3:.2f} ms, rust {us(rs_c) / 1e3:.2f} ms"
        )
    print()
    print("| measure (median) | Python | Rust | Python / Rust |")
    print("|---|---|---|---|")
    print(f"| per-turn commit, `have_in=dict` (write + commit + store insert) | {us(py_t):.1f} µs | {us(rs_t):.1f} µs | {us(py_t) / us(rs_t):.2f}x |")
    print(f"| per-turn commit, `have=objects.keys()` (Bashkit style) | {us(keys_t):.1f} µs | {us(rs_t):.1f} µs (`have_in`) | {us(keys_t) / us(rs_t):.2f}x |")
    print(f"| checkout, 2,000 x 4 KB from a dict / `HashMap` | {us(py_c) / 1e3:.2f} ms | {us(rs_c) / 1e3:.2f} ms | {us(py_c) / us(rs_c):.2f}x |")
    print(f"\n{len(py_t)} Python and {len(rs_t)} Rust turns, {len(py_c)} + {len(rs_c)} checkouts, {args.rounds} alternating rounds")


if __name__ == "__main__":
    main()
