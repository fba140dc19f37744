"""The cost of `Store.put` for a large commit: 64 files of 4 MiB of random bytes
(about 13,800 objects, 256 MiB) put into a fresh `memory:` and `sqlite:` store, the
best of three. Every object is re-hashed before any is written
(`snapgraph_store::check_put`); BENCHMARKS.md, stop 58, has the figures.

    target/python-venv/bin/python crates/snapgraph-py/benches/put.py
"""

import os
import tempfile
import time

import snapgraph as sg


def main() -> None:
    ws = sg.Workspace()
    for i in range(64):
        ws.write(f"/f{i}", os.urandom(4 << 20))
    objects = ws.commit().objects
    size = sum(map(len, objects.values()))
    tmp = tempfile.mkdtemp()
    for kind in ("memory", "sqlite"):
        best = float("inf")
        for r in range(3):
            store = sg.open("memory:" if kind == "memory" else f"sqlite:{tmp}/s{r}.db")
            start = time.perf_counter()
            store.put(objects)
            best = min(best, time.perf_counter() - start)
        print(
            f"{kind}: {len(objects)} objects, {size / 2**20:.0f} MiB: "
            f"{best * 1000:.0f} ms, {size / best / 1e9:.2f} GB/s"
        )


if __name__ == "__main__":
    main()
