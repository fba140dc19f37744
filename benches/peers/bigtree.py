#!/usr/bin/env python3
"""The big tree of run.sh's throughput and memory rows (issue #18): MIB MiB of random
bytes in files of 4 KiB to 8 MiB, spread over 37 x 11 directories.

    benches/peers/bigtree.py DIR MIB

The sizes and paths come from a seeded generator (the same tree shape every time);
the bytes are os.urandom's (incompressible, never the same twice: no store can
dedupe them against an earlier run's).
"""

import os
import random
import sys


def main() -> None:
    if len(sys.argv) != 3 or not sys.argv[2].isdigit():
        sys.exit(__doc__)
    out, mib = sys.argv[1], int(sys.argv[2])
    rng = random.Random(7)
    left, i = mib * 1048576, 0
    while left > 0:
        size = min(left, rng.choice([4096, 65536, 262144, 1048576, 8388608]))
        path = os.path.join(out, f"d{i % 37}", f"e{i % 11}", f"f{i}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(os.urandom(size))
        left -= size
        i += 1


if __name__ == "__main__":
    main()
