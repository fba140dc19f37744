#!/usr/bin/env python3
"""The median time of each phase of a one-file per-turn commit (SNAPGRAPH_TIMINGS).

    benches/peers/phases.py SNAPGRAPH TREE [RUNS] [FILE]

Appends a line to FILE (default project/__init__.py, the file run.sh edits) in the
working directory TREE before each of RUNS (default 30) commits, and prints the
median gap before each phase line and of the whole timeline. Digits in a phase's
label are folded (`index loaded (N entries)`), so runs whose details differ share a
row. Start `snapgraph watch` in TREE first for the watched turn's phases. The
figures are the command's own (from its first instruction), not the process start.
"""

import collections
import os
import re
import statistics
import subprocess
import sys


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sg, tree = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    edit = os.path.join(tree, sys.argv[4] if len(sys.argv) > 4 else "project/__init__.py")
    gaps = collections.defaultdict(list)
    totals = []
    env = dict(os.environ, SNAPGRAPH_TIMINGS="1")
    for i in range(runs):
        with open(edit, "a") as f:
            f.write(f"# phase {i}\n")
        out = subprocess.run(
            [sg, "-C", tree, "commit", "-q", "-m", "phases"],
            env=env, capture_output=True, text=True, check=True,
        ).stderr
        before = 0.0
        for m in re.finditer(r"\+([\d.]+) ms  (.*)", out):
            at = float(m.group(1))
            gaps[re.sub(r"\d+", "N", m.group(2))].append(at - before)
            before = at
        totals.append(before)
    for label, values in gaps.items():
        print(f"{statistics.median(values):8.3f} ms  {label}")
    print(f"{statistics.median(totals):8.3f} ms  the whole timeline")


if __name__ == "__main__":
    main()
