"""SnapshotGraph queries and the resumable CheckoutPlan."""

import snapgraph
from snapgraph import SnapshotGraph


def test_diff(history):
    objects, first, second, _ = history
    d = SnapshotGraph.diff(first, second, objects)
    assert d.files_added == ["/new.txt"]
    assert d.files_modified == ["/src/main.py"]
    assert d.files_removed == ["/README.md"]
    assert d.state_changed is False
    assert not d.is_empty()
    assert SnapshotGraph.diff(first, first, objects).is_empty()


def test_ancestry_and_commit(history):
    objects, first, second, _ = history
    assert SnapshotGraph.ancestry(second, objects) == [second, first]
    assert SnapshotGraph.ancestry(second, objects, limit=1) == [second]
    c = SnapshotGraph.commit(second, objects)
    assert c.id == second
    assert c.parents == [first]
    assert c.generation == 2
    assert c.meta == {"turn": "2"}
    assert c.state_size == len(b"interpreter state 1")


def test_reachable(history):
    objects, first, second, _ = history
    r1 = SnapshotGraph.reachable(first, objects)
    assert r1[-1] == first
    assert set(r1) <= set(objects)
    history_ids = SnapshotGraph.reachable_history(second, objects)
    assert set(history_ids) == set(objects)  # both commits, nothing else in the dict


def test_plan_checkout_fetch_loop(history):
    objects, _, second, _ = history
    local = {}
    rounds = 0
    while True:
        missing = SnapshotGraph.plan_checkout(second, local)
        if not missing:
            break
        for i in missing:
            local[i] = objects[i]
        rounds += 1
    assert 1 <= rounds <= 8
    assert set(local) == set(SnapshotGraph.reachable(second, objects))
    ws = snapgraph.Workspace()
    ws.checkout(second, local)
    assert ws.read("/new.txt") == b"new"


def test_checkout_plan_reads_each_object_once(history):
    objects, _, second, _ = history
    local = {}
    plan = snapgraph.CheckoutPlan(second)
    fetched = []
    while True:
        missing = plan.missing(local)
        if not missing:
            break
        for i in missing:
            local[i] = objects[i]
        fetched += missing
    assert plan.is_done
    assert len(fetched) == len(set(fetched))
    assert set(local) == set(SnapshotGraph.reachable(second, objects))


def test_capabilities_and_external_reads_of_a_commit():
    ws = snapgraph.Workspace()
    ws.set_capabilities(builtins=["ls"], engine_version="1.2")
    ws.record_read("s3://b/k", "etag")
    c = ws.commit()
    caps = SnapshotGraph.capabilities(c.id, c.objects)
    assert caps.builtins == ["ls"]
    assert caps.engine_version == "1.2"
    (r,) = SnapshotGraph.external_reads(c.id, c.objects)
    assert (r.source, r.fingerprint) == ("s3://b/k", "etag")
    plain = snapgraph.Workspace().commit()
    assert SnapshotGraph.capabilities(plain.id, plain.objects) is None


def test_diff_changes_are_values(history):
    objects, first, second, _ = history
    d = SnapshotGraph.diff(first, second, objects)
    by_path = {c.path: c for c in d.changes}
    assert set(by_path) == {"/new.txt", "/src/main.py", "/README.md"}
    added, modified, removed = by_path["/new.txt"], by_path["/src/main.py"], by_path["/README.md"]
    assert (added.kind, added.old, added.new.size) == ("added", None, 3)
    assert (removed.kind, removed.new, removed.old.kind) == ("removed", None, "file")
    assert modified.kind == "modified"
    assert modified.old.size == len(b"print('hi')\n") and modified.new.size == len(b"print('bye')\n")
