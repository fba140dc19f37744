"""Stores (memory, SQLite, directory, PostgreSQL when configured), Repo, sync, gc,
verify."""

import os

import pytest

import snapgraph


def store_urls(tmp_path):
    urls = ["memory:", f"sqlite:{tmp_path / 'h.db'}", f"dir:{tmp_path / 'objs'}"]
    pg = os.environ.get("SNAPGRAPH_PG_URL")
    if pg:
        sep = "&" if "?" in pg else "?"
        urls.append(f"{pg}{sep}snapgraph_schema=py_{os.getpid()}_{tmp_path.name[-12:]}".replace("-", "_"))
    return urls


@pytest.fixture(params=["memory", "sqlite", "dir", "postgres"])
def url(request, tmp_path):
    urls = dict(zip(["memory", "sqlite", "dir", "postgres"], store_urls(tmp_path)))
    if request.param not in urls:
        pytest.skip("SNAPGRAPH_PG_URL is not set (scripts/test.d/30-python sets it)")
    return urls[request.param]


def test_store_is_an_objects_source(url):
    store = snapgraph.open(url)
    ws = snapgraph.Workspace()
    ws.write("/a.txt", b"a")
    c = ws.commit()
    store.put(c.objects)
    assert c.id in store
    assert store[c.id] == c.objects[c.id]
    assert store.get("00" * 32) is None
    with pytest.raises(KeyError):
        store["00" * 32]
    assert store.missing(list(c.objects) + ["00" * 32]) == ["00" * 32]
    assert set(store.ids()) == set(c.objects)
    other = snapgraph.Workspace()
    other.checkout(c.id, store)
    assert other.read("/a.txt") == b"a"
    ws.write("/b.txt", b"b")
    c2 = ws.commit(parents=[c.id], have_in=store)
    assert set(c2.objects).isdisjoint(c.objects)
    store.put(c2.objects.items())
    assert snapgraph.SnapshotGraph.ancestry(c2.id, store) == [c2.id, c.id]


def test_repo_flow(url):
    repo = snapgraph.Repo.open(url)
    ws = snapgraph.Workspace()
    ws.write("/notes.txt", b"turn 1")
    first = repo.commit(ws, "main", message="turn 1", meta={"k": "v"})
    assert first.previous is None
    assert first.objects_written > 0
    ws = repo.checkout_shallow("main")
    ws.write("/notes.txt", b"turn 2")
    second = repo.commit(ws, "main", message="turn 2")
    assert second.previous == first.id
    log = repo.log("main")
    assert [e.id for e in log] == [second.id, first.id]
    assert log[1].meta["k"] == "v"
    assert log[0].parents == [first.id]
    assert repo.resolve("main") == second.id
    assert repo.branch("main") == second.id
    assert repo.branch("nope") is None
    info = repo.tag("before-refactor", "main", {"score": "0.93"})
    assert info.target == second.id and info.labels == {"score": "0.93"}
    assert [s.name for s in repo.snapshots()] == ["before-refactor"]
    assert repo.inspect("before-refactor").target == second.id
    forked = repo.fork("experiment", first.id)
    assert forked == first.id
    assert repo.branches() == [("experiment", first.id), ("main", second.id)]
    assert repo.checkout("before-refactor").read("/notes.txt") == b"turn 2"
    assert repo.checkout("experiment").read("/notes.txt") == b"turn 1"
    refs = dict(repo.store.list_refs("heads/"))
    assert refs == {"heads/experiment": first.id, "heads/main": second.id}
    with pytest.raises(snapgraph.RefConflictError) as e:
        repo.delete_branch("experiment", second.id)
    assert (e.value.name, e.value.expected, e.value.actual) == ("heads/experiment", second.id, first.id)
    repo.delete_branch("experiment", first.id)
    assert repo.branch("experiment") is None
    report = snapgraph.verify(repo.store)
    assert report.is_clean() and report.refs == 2  # heads/main and the snapshot
    gc = snapgraph.gc(repo.store)
    assert gc.deleted == [] and gc.problems == []


def test_repo_errors(url):
    repo = snapgraph.Repo.open(url)
    ws = snapgraph.Workspace()
    ws.write("/f", b"1")
    repo.commit(ws, "main")
    stale = repo.checkout("main")
    ws.write("/f", b"2")
    repo.commit(ws, "main")
    stale.write("/f", b"3")
    before = stale.head
    with pytest.raises(snapgraph.RefConflictError) as e:
        repo.commit(stale, "main")
    assert e.value.code == "branch_moved"
    assert e.value.name == "heads/main"
    assert e.value.expected == before
    assert stale.head == before and stale.read("/f") == b"3"
    with pytest.raises(snapgraph.UnknownRevisionError) as e:
        repo.checkout("no-such-branch")
    assert e.value.name == "no-such-branch"
    first = repo.log("main")[-1].id
    with pytest.raises(snapgraph.RefConflictError) as e:
        repo.fork("main", first)  # main exists at another commit
    assert e.value.code == "already_exists"
    with pytest.raises(snapgraph.InvalidRefNameError) as e:
        repo.commit(ws, "bad name")
    assert e.value.name == "heads/bad name"
    with pytest.raises(snapgraph.InvalidRefNameError) as e:
        repo.commit(ws, "a/../b")


def test_sync_copies_only_what_is_missing(tmp_path):
    src = snapgraph.open("memory:")
    dst = snapgraph.open(f"sqlite:{tmp_path / 'dst.db'}")
    repo = snapgraph.Repo(src)
    ws = snapgraph.Workspace()
    ws.write("/a", b"a" * 10_000)
    c1 = repo.commit(ws, "main")
    r1 = snapgraph.sync(src, dst, "heads/main")
    assert (r1.from_, r1.to) == (None, c1.id)
    assert r1.objects == len(src.ids())
    ws.write("/b", b"b")
    c2 = repo.commit(ws, "main")
    r2 = snapgraph.sync(src, dst, "heads/main")
    assert r2.from_ == c1.id and r2.to == c2.id
    assert 0 < r2.objects < r1.objects + 3
    assert dst.get_ref("heads/main") == c2.id
    assert snapgraph.verify(dst).is_clean()
    with pytest.raises(snapgraph.UnknownRevisionError):
        snapgraph.sync(src, dst, "heads/none")


def test_ctrl_c_stops_a_waiting_sync_and_leaves_nothing_held(tmp_path):
    """Ctrl-C (KeyboardInterrupt) during a sync stops it at its next safe point:
    here it waits for a collector's sweep of the destination (its marker, as a
    collector leaves it while it deletes), which would take the minute of its wait.
    The interrupt comes at once, and the sync leaves no lease or wait ref behind;
    before, Ctrl-C waited for the sync to end.

    Python's own SIGINT handler is installed for the test: a process started with
    SIGINT ignored (a background job, as CI may run it) keeps it ignored, and then
    `interrupt_main` does nothing."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _sync_interrupted_while_waiting(tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)


def _sync_interrupted_while_waiting(tmp_path):
    import _thread
    import threading
    import time

    src = snapgraph.open("memory:")
    repo = snapgraph.Repo(src)
    ws = snapgraph.Workspace()
    ws.write("/a", b"a" * 10_000)
    c = repo.commit(ws, "main")
    dst = snapgraph.open(f"dir:{tmp_path / 'dst'}")
    marker = tmp_path / "dst" / "refs" / "snapgraph" / "gc-sweep"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("ab" * 32)
    assert dst.get_ref("snapgraph/gc-sweep") == "ab" * 32
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        snapgraph.sync(src, dst, "heads/main")
    assert time.monotonic() - started < 10
    assert dst.list_refs("snapgraph/wait/") == []
    assert dst.list_refs("snapgraph/lease/") == []
    assert dst.get_ref("heads/main") is None
    marker.unlink()
    snapgraph.sync(src, dst, "heads/main")
    assert dst.get_ref("heads/main") == c.id


def test_gc_removes_unreachable_objects():
    store = snapgraph.open("memory:")
    ws = snapgraph.Workspace()
    ws.write("/keep", b"k")
    repo = snapgraph.Repo(store)
    kept = repo.commit(ws, "main")
    loose = snapgraph.Workspace()
    loose.write("/loose", b"loose bytes")
    c = loose.commit()
    store.put(c.objects)
    report = snapgraph.gc(store)
    assert set(report.deleted) >= {c.id}
    assert c.id not in store and kept.id in store
    pinned = loose.copy()
    c2 = pinned.commit()
    store.put(c2.objects)
    assert snapgraph.gc(store, pins=[c2.id]).deleted == []


def test_verify_reports_corruption(tmp_path):
    store = snapgraph.open(f"dir:{tmp_path / 'objs'}")
    repo = snapgraph.Repo(store)
    ws = snapgraph.Workspace()
    ws.write("/f", b"x" * 5000)
    repo.commit(ws, "main")
    files = [p for p in (tmp_path / "objs" / "objects").rglob("*") if p.is_file()]
    assert files
    # Damage every object file: verify lists problems instead of raising.
    for p in files:
        p.write_bytes(b"\x00garbage")
    report = snapgraph.verify(store)
    assert not report.is_clean()
    assert report.problems and report.problems[0].kind in ("missing", "invalid")


def test_bad_store_url():
    with pytest.raises(snapgraph.StoreError) as e:
        snapgraph.open("ftp://nowhere")
    assert "ftp://nowhere" in str(e.value)
    assert e.value.context


def test_repo_merge_and_onto_tip():
    repo = snapgraph.Repo.open("memory:")
    ws = snapgraph.Workspace()
    ws.write("/f", b"1")
    base = repo.commit(ws, "main")
    repo.fork("side", "main")
    side = repo.checkout("side")
    side.write("/side", b"s")
    side_tip = repo.commit(side, "side").id
    ws.write("/f", b"2")
    merged = repo.commit(ws, "main", message="merge", parents=[side_tip])
    assert repo.log("main", limit=1)[0].parents == [base.id, side_tip]
    assert merged.previous == base.id
    fresh = snapgraph.Workspace()
    fresh.write("/imported", b"i")
    with pytest.raises(snapgraph.RefConflictError):
        repo.commit(fresh, "main")
    onto = repo.commit(fresh, "main", onto_tip=True)
    assert onto.previous == merged.id
    assert repo.checkout("main").read("/imported") == b"i"


def test_bytes_put_under_a_wrong_id_are_refused_and_nothing_is_written(url):
    """A store keeps the first bytes put under an id (a later put of the right ones
    is a no-op), so `put` re-hashes every object before writing any: wrong bytes
    would otherwise stay that object, and a commit asking the store would count it
    as held."""
    store = snapgraph.open(url)
    ws = snapgraph.Workspace()
    ws.write("/f", b"x" * 1000)
    c = ws.commit()
    good = {k: v for k, v in c.objects.items() if k != c.id}
    for wrong in (b"not the commit's bytes", b"", c.objects[next(iter(good))]):
        with pytest.raises(snapgraph.CorruptObjectError) as e:
            store.put({**good, c.id: wrong})
        assert e.value.id == c.id
        assert store.missing(list(c.objects)) == list(c.objects)
    store.put(c.objects)
    assert snapgraph.Workspace().checkout(c.id, store).commit == c.id


def test_a_store_holding_wrong_bytes_refuses_them_when_read(tmp_path):
    """Bytes that reached the store some other way (a disk's fault, a hand edit) are
    refused by every read, naming the id."""
    root = tmp_path / "objs"
    store = snapgraph.open(f"dir:{root}")
    ws = snapgraph.Workspace()
    ws.write("/f", b"x" * 1000)
    c = ws.commit()
    store.put(c.objects)
    other = next(k for k in c.objects if k != c.id)
    path = lambda id: root / "objects" / id[:2] / id[2:]
    path(c.id).write_bytes(path(other).read_bytes())
    with pytest.raises(snapgraph.CorruptObjectError) as e:
        store[c.id]
    assert e.value.id == c.id
    with pytest.raises(snapgraph.ObjectError):
        snapgraph.Workspace().checkout(c.id, store)


def test_checkout_of_a_pruned_commit_raises_pruned_error(tmp_path):
    # A commit another tool made hollow (the CLI's retention, or a shallow sync): the
    # store keeps the commit object and the record `snapgraph/hollow/ID` (docs/FORMAT.md,
    # "Hollow commits"), not its snapshot. The record and the missing snapshot are
    # written here the way the directory store lays them out.
    root = tmp_path / "objs"
    repo = snapgraph.Repo(snapgraph.open(f"dir:{root}"))
    ws = snapgraph.Workspace()
    ws.write("/notes.txt", b"turn 1")
    first = repo.commit(ws, "main", message="turn 1").id
    ws = repo.checkout("main")
    ws.write("/notes.txt", b"turn 2")
    second = repo.commit(ws, "main", message="turn 2").id
    keep = {first, second}
    for p in (root / "objects").rglob("*"):
        if p.is_file() and p.parent.name + p.name not in keep:
            p.unlink()
    hollow = root / "refs" / "snapgraph" / "hollow"
    hollow.mkdir(parents=True)
    for c in keep:
        (hollow / c).write_text(c + "\n")
    repo = snapgraph.Repo.open(f"dir:{root}")
    with pytest.raises(snapgraph.PrunedError) as e:
        repo.checkout("main")
    assert e.value.code == "pruned" and e.value.id == second
    assert second in str(e.value)
    assert isinstance(e.value, snapgraph.Error)
    # Its history is kept.
    assert [c.id for c in repo.log("main")] == [second, first]
