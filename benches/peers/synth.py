#!/usr/bin/env python3
"""A synthetic stand-in for 30 consecutive releases of a Python project.

    synth.py OUT COUNT [FILES] [MIB]

Writes OUT/1 .. OUT/COUNT, each a tree of about FILES files (default 1,800) and MIB MiB
(default 21) in nested packages, shaped like the Django sdists `run.sh` downloads by
default: source-like text (words from a fixed vocabulary, indented lines), a few
binary files (random bytes: images, compiled catalogues), a version file that
changes every release. Between consecutive releases 2-4 % of the files are edited
(a few lines replaced or inserted), a few are added and a few removed, as patch
releases do. Deterministic: the same arguments write the same bytes (seeded PRNG),
so runs on different days compare.
"""

import os
import random
import sys

WORDS = (
    "self def return import from class if else elif for in while try except "
    "finally with as lambda yield None True False and or not is pass raise "
    "request response model field query cache settings template context value "
    "name path url view form widget error message user group permission session "
    "database connection cursor migration schema table column index key object "
    "list dict str int bool len range super init args kwargs get set update "
    "delete create save filter exclude order by values annotate aggregate"
).split()


def text(rng, size):
    lines = []
    n = 0
    while n < size:
        indent = "    " * rng.randrange(0, 4)
        line = indent + " ".join(rng.choice(WORDS) for _ in range(rng.randrange(2, 12)))
        lines.append(line)
        n += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


def edit(rng, data):
    lines = data.split(b"\n")
    for _ in range(rng.randrange(1, 6)):
        at = rng.randrange(0, len(lines))
        new = text(rng, rng.randrange(20, 400)).rstrip(b"\n").split(b"\n")
        if rng.random() < 0.5:
            lines[at : at + 1] = new
        else:
            lines[at:at] = new
    return b"\n".join(lines)


def main():
    out, count = sys.argv[1], int(sys.argv[2])
    files = int(sys.argv[3]) if len(sys.argv) > 3 else 1800
    mib = float(sys.argv[4]) if len(sys.argv) > 4 else 21
    rng = random.Random(20260101)
    avg = int(mib * 1048576 / files)
    dirs = ["project"]
    for i in range(files // 9):
        parent = rng.choice(dirs)
        dirs.append(f"{parent}/{rng.choice(WORDS)}{i}")
    tree = {}
    for i in range(files):
        d = rng.choice(dirs)
        if i % 60 == 0:
            tree[f"{d}/asset{i}.bin"] = rng.randbytes(rng.randrange(avg // 4, avg * 2))
        else:
            size = int(rng.expovariate(1 / avg)) + 64
            tree[f"{d}/module{i}.py"] = text(rng, size)
    next_id = files
    for release in range(1, count + 1):
        if release > 1:
            names = sorted(tree)
            for name in rng.sample(names, max(1, len(names) * rng.randrange(2, 5) // 100)):
                if name.endswith(".py"):
                    tree[name] = edit(rng, tree[name])
            for name in rng.sample(sorted(tree), rng.randrange(0, 4)):
                del tree[name]
            for _ in range(rng.randrange(0, 6)):
                tree[f"{rng.choice(dirs)}/module{next_id}.py"] = text(rng, avg)
                next_id += 1
        tree["project/__init__.py"] = f'VERSION = "1.0.{release}"\n'.encode()
        base = os.path.join(out, str(release))
        tmp = base + ".tmp"
        for name, data in tree.items():
            path = os.path.join(tmp, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        os.rename(tmp, base)


if __name__ == "__main__":
    main()
