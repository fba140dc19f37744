#!/usr/bin/env python3
"""Times commands in strict alternation: the figure of record for per-turn changes
on a machine whose speed drifts.

    benches/peers/alternate.py ROUNDS 'LABEL::COMMAND ARGS...' 'LABEL::COMMAND ...' ...

Each round runs every command once, the first one rotating from round to round,
so a drift of the machine's speed (tens of percent over minutes on a shared
2-vCPU guest) falls on every command alike; `hyperfine` runs all of one command's
runs before the next one's, and its blocks disagreed by more than the changes
measured. Prints each command's median wall time and mean CPU time (user +
system of the process and its threads, from the children's rusage). A command's
output is discarded; it is split on spaces (no shell: wrap one in a script).
The Python process start and fork are in every figure alike (about 1 ms here).
"""

import os
import statistics
import subprocess
import sys
import time


def main() -> None:
    if len(sys.argv) < 3 or not sys.argv[1].isdigit():
        sys.exit(__doc__)
    rounds = int(sys.argv[1])
    commands = []
    for spec in sys.argv[2:]:
        label, sep, command = spec.partition("::")
        if not sep or not command.split():
            sys.exit(f"alternate.py: not LABEL::COMMAND: {spec!r}")
        commands.append((label, command.split()))
    wall = {label: [] for label, _ in commands}
    cpu = {label: [] for label, _ in commands}
    with open(os.devnull, "w") as devnull:
        for r in range(rounds):
            k = r % len(commands)
            for label, argv in commands[k:] + commands[:k]:
                before = os.times()
                t0 = time.perf_counter()
                done = subprocess.run(argv, stdout=devnull, stderr=devnull)
                t1 = time.perf_counter()
                after = os.times()
                if done.returncode not in (0, 1):
                    sys.exit(f"alternate.py: {label} exited with {done.returncode}")
                wall[label].append(t1 - t0)
                cpu[label].append(
                    after.children_user
                    - before.children_user
                    + after.children_system
                    - before.children_system
                )
    width = max(len(label) for label, _ in commands)
    for label, _ in commands:
        print(
            f"{label:{width}}  median {statistics.median(wall[label]) * 1e3:7.2f} ms"
            f"   mean CPU {statistics.mean(cpu[label]) * 1e3:6.2f} ms"
        )


if __name__ == "__main__":
    main()
