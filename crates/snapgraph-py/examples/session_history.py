"""Per-turn session history on Python's sqlite3, the flow Bashkit documents.

Every turn of an agent session commits the workspace; the only write path is one
`INSERT OR IGNORE` of the objects the database lacks. Then: rewind to an earlier
turn, diff two turns, continue from the rewound turn on a side branch, restore a
turn into a fresh cache that fetches only missing rows (a `plan_checkout` loop), and
collect garbage as the union of `reachable` over the turns still kept.

Run it as is: `python examples/session_history.py [DB_PATH]` (default: in memory).
"""

import sqlite3
import sys

import snapgraph

db = sqlite3.connect(sys.argv[1] if len(sys.argv) > 1 else ":memory:")
db.executescript(
    """
    CREATE TABLE IF NOT EXISTS objects (id TEXT PRIMARY KEY, data BLOB NOT NULL);
    CREATE TABLE IF NOT EXISTS turns (
        turn INTEGER PRIMARY KEY, commit_id TEXT NOT NULL, branch TEXT NOT NULL
    );
    """
)


def known_ids():
    """Every object id the database holds: the `have` of the next commit."""
    return [row[0] for row in db.execute("SELECT id FROM objects")]


def save(commit, turn, branch):
    """The whole write path: objects the database lacks, then the turn's row."""
    db.executemany("INSERT OR IGNORE INTO objects (id, data) VALUES (?, ?)", commit.objects.items())
    db.execute("INSERT INTO turns VALUES (?, ?, ?)", (turn, commit.id, branch))
    db.commit()


class Rows:
    """The database as snapgraph's `objects`: a lazy mapping reading one row per id."""

    def __init__(self, conn):
        self.conn = conn

    def __getitem__(self, object_id):
        row = self.conn.execute("SELECT data FROM objects WHERE id = ?", (object_id,)).fetchone()
        if row is None:
            raise KeyError(object_id)
        return row[0]

    def __contains__(self, object_id):
        return self.conn.execute("SELECT 1 FROM objects WHERE id = ?", (object_id,)).fetchone() is not None


def commit_of(turn):
    return db.execute("SELECT commit_id FROM turns WHERE turn = ?", (turn,)).fetchone()[0]


# ----- five turns on the main line -----
ws = snapgraph.Workspace()
ws.write("/workspace/README.md", b"# session\n")
head = None
for turn in range(1, 6):
    ws.write(f"/workspace/notes/turn-{turn}.md", f"what turn {turn} found\n".encode())
    ws.write("/workspace/log.txt", "".join(f"turn {t}\n" for t in range(1, turn + 1)).encode())
    ws.set_state(f"interpreter globals after turn {turn}".encode())
    commit = ws.commit(
        parents=[head] if head else None,
        have=known_ids(),
        meta={"turn": str(turn), "message_id": f"msg-{turn}"},
    )
    save(commit, turn, "main")
    head = commit.id
    print(f"turn {turn}: {commit.id[:12]} wrote {commit.object_count} objects, {commit.stored_bytes} bytes")

objects = Rows(db)

# ----- rewind to turn 2 -----
rewound = snapgraph.Workspace()
restore = rewound.checkout(commit_of(2), objects)
if restore.drift_check is not None:  # no external reads were recorded in this session
    restore.drift_check.finish()
assert rewound.read("/workspace/log.txt") == b"turn 1\nturn 2\n"
assert rewound.state() == b"interpreter globals after turn 2"
assert not rewound.exists("/workspace/notes/turn-3.md")
print("rewound to turn 2:", [e.name for e in rewound.list("/workspace/notes")])

# ----- what changed between turn 2 and turn 5 -----
diff = snapgraph.SnapshotGraph.diff(commit_of(2), commit_of(5), objects)
print("turn 2 -> 5: added", diff.files_added, "modified", diff.files_modified, "state changed", diff.state_changed)
assert diff.files_added == [f"/workspace/notes/turn-{t}.md" for t in (3, 4, 5)]
assert diff.files_modified == ["/workspace/log.txt"]

# ----- continue from turn 2 on a side branch (the in-process fork is a copy) -----
side = rewound.copy()
side.write("/workspace/notes/alternative.md", b"a different idea\n")
side_commit = side.commit(parents=[commit_of(2)], have=known_ids(), meta={"turn": "6"})
save(side_commit, 6, "side")
assert snapgraph.SnapshotGraph.ancestry(side_commit.id, objects) == [side_commit.id, commit_of(2), commit_of(1)]
print(f"side branch: {side_commit.id[:12]} wrote {side_commit.object_count} objects")

# ----- restore turn 5 into an empty cache, fetching only missing rows -----
cache = sqlite3.connect(":memory:")
cache.execute("CREATE TABLE objects (id TEXT PRIMARY KEY, data BLOB NOT NULL)")
local = Rows(cache)
fetched = rounds = 0
while True:
    missing = snapgraph.SnapshotGraph.plan_checkout(commit_of(5), local)
    if not missing:
        break
    marks = ",".join("?" * len(missing))
    rows = db.execute(f"SELECT id, data FROM objects WHERE id IN ({marks})", missing).fetchall()
    cache.executemany("INSERT OR IGNORE INTO objects VALUES (?, ?)", rows)
    fetched += len(rows)
    rounds += 1
restored = snapgraph.Workspace()
restored.checkout(commit_of(5), local)
assert restored.read("/workspace/notes/turn-5.md") == b"what turn 5 found\n"
total = db.execute("SELECT COUNT(*) FROM objects").fetchone()[0]
print(f"restored turn 5 from a cache: fetched {fetched} of {total} rows in {rounds} rounds")

# ----- GC: drop turns 3 and 4, keep what the remaining turns reach -----
db.execute("DELETE FROM turns WHERE turn IN (3, 4)")
keep = set()
for (commit_id,) in db.execute("SELECT commit_id FROM turns"):
    keep.update(snapgraph.SnapshotGraph.reachable(commit_id, objects))
doomed = [object_id for object_id in known_ids() if object_id not in keep]
db.executemany("DELETE FROM objects WHERE id = ?", [(i,) for i in doomed])
db.commit()
print(f"gc: kept {len(keep)} objects, deleted {len(doomed)}")
assert doomed, "turns 3 and 4 had objects of their own"
for turn in (1, 2, 5, 6):
    snapgraph.Workspace().checkout(commit_of(turn), objects)  # every kept turn still restores
print("ok")
