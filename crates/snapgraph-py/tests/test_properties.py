"""Property: commit then checkout round-trips arbitrary workspaces, through
incremental commits (have_in) and a packed snapshot, with identical ids for
identical trees."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import snapgraph

names = st.sampled_from(["a", "b", "c", "dir", "x.txt", "ü", "sp ace", ".hidden"])
paths = st.lists(names, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts))
contents = st.one_of(
    st.binary(max_size=64),
    st.binary(min_size=1, max_size=8).map(lambda b: b * 2000),  # chunked, repetitive
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("write"), paths, contents),
        st.tuples(st.just("mkdir"), paths, st.none()),
        st.tuples(st.just("remove"), paths, st.none()),
        st.tuples(st.just("state"), st.none(), st.binary(max_size=32)),
        st.tuples(st.just("commit"), st.none(), st.none()),
    ),
    max_size=30,
)


def apply(ws, op):
    kind, path, data = op
    try:
        if kind == "write":
            ws.write(path, data)
        elif kind == "mkdir":
            ws.mkdir(path)
        elif kind == "remove":
            ws.remove(path)
        elif kind == "state":
            ws.set_state(data)
    except snapgraph.FsError:
        pass  # e.g. writing below a file: refused, nothing changed


def view(ws):
    out = []
    for p, m in ws.walk():
        out.append((p, m.kind, m.mode, ws.read(p) if m.kind == "file" else None))
    return out, ws.state()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_commit_checkout_round_trips(operations):
    ws = snapgraph.Workspace()
    objects = {}
    commits = []  # (id, view at commit time)
    head = None
    for op in operations + [("commit", None, None)]:
        if op[0] == "commit":
            c = ws.commit(parents=[head] if head else None, have_in=objects)
            objects.update(c.objects)
            head = c.id
            commits.append((c.id, view(ws)))
        else:
            apply(ws, op)
    for cid, expected in commits:
        restored = snapgraph.Workspace()
        restored.checkout(cid, objects)
        assert view(restored) == expected
    last_id, last_view = commits[-1]
    packed = ws.snapshot()
    assert view(snapgraph.Workspace.from_snapshot(packed)) == last_view
    assert snapgraph.SnapshotGraph.ancestry(last_id, objects, limit=1000) == [
        cid for cid, _ in reversed(commits)
    ]


leaf_files = st.dictionaries(
    st.tuples(st.integers(0, 3), st.integers(0, 5)).map(lambda t: f"/d{t[0]}/f{t[1]}"),
    st.binary(max_size=200),
    max_size=16,
)


@settings(max_examples=40, deadline=None)
@given(leaf_files)
def test_same_tree_same_ids_in_any_write_order(files):
    a, b = snapgraph.Workspace(), snapgraph.Workspace()
    for p, d in files.items():
        a.write(p, d)
    for p, d in reversed(list(files.items())):
        b.write(p, d)
    assert view(a) == view(b)
    assert a.commit().id == b.commit().id
