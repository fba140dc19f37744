"""Hostile objects from a dict: corrupt, truncated, swapped, missing, wrong kind, a
source that raises. Each raises its typed exception naming the id, and the workspace
is left exactly as it was."""

import pytest

import snapgraph


def snapshot_of(ws):
    return [(p, m.kind, ws.read(p) if m.kind == "file" else None) for p, m in ws.walk()], ws.state(), ws.head


@pytest.fixture
def target():
    w = snapgraph.Workspace()
    w.write("/mine.txt", b"untouched")
    w.set_state(b"my state")
    return w


def file_object(objects, commit_id):
    """An id of a non-commit object of the commit (a tree or a content object)."""
    return next(k for k in objects if k != commit_id)


def test_corrupt_object(history, target):
    objects, first, _, _ = history
    before = snapshot_of(target)
    victim = file_object(objects, first)
    bad = dict(objects)
    data = bytearray(bad[victim])
    data[-1] ^= 0xFF
    bad[victim] = bytes(data)
    with pytest.raises(snapgraph.CorruptObjectError) as e:
        target.checkout(first, bad)
    assert e.value.id == victim
    assert victim in str(e.value)
    assert e.value.actual and e.value.actual != victim
    assert isinstance(e.value, snapgraph.ObjectError)
    assert snapshot_of(target) == before


def test_truncated_object(history, target):
    objects, first, _, _ = history
    before = snapshot_of(target)
    bad = dict(objects)
    bad[first] = bad[first][: len(bad[first]) // 2]
    with pytest.raises(snapgraph.CorruptObjectError) as e:
        target.checkout(first, bad)
    assert e.value.id == first
    assert snapshot_of(target) == before


def test_swapped_objects(history, target):
    objects, first, _, _ = history
    before = snapshot_of(target)
    a, b = [k for k in objects if k != first][:2]
    bad = dict(objects)
    bad[a], bad[b] = bad[b], bad[a]
    with pytest.raises(snapgraph.CorruptObjectError) as e:
        target.checkout(first, bad)
    assert e.value.id in (a, b)
    assert snapshot_of(target) == before


def test_missing_object(history, target):
    objects, first, _, _ = history
    before = snapshot_of(target)
    victim = file_object(objects, first)
    bad = {k: v for k, v in objects.items() if k != victim}
    with pytest.raises(snapgraph.ObjectNotFoundError) as e:
        target.checkout(first, bad)
    assert e.value.id == victim
    assert snapshot_of(target) == before


def test_not_a_commit(history, target):
    objects, first, _, _ = history
    tree = snapgraph.SnapshotGraph.commit(first, objects).tree
    with pytest.raises(snapgraph.WrongKindError) as e:
        target.checkout(tree, objects)
    assert e.value.id == tree
    assert e.value.expected == "commit"
    assert e.value.actual != "commit"


def test_value_that_is_not_bytes(history, target):
    objects, first, _, _ = history
    bad = dict(objects)
    bad[first] = "a str"
    before = snapshot_of(target)
    with pytest.raises(snapgraph.SourceError) as e:
        target.checkout(first, bad)
    assert e.value.id == first
    assert isinstance(e.value.__cause__, TypeError)
    assert snapshot_of(target) == before


def test_source_that_raises(history, target):
    objects, first, _, _ = history

    class Broken:
        def __getitem__(self, key):
            raise ConnectionError(f"database down while reading {key}")

    before = snapshot_of(target)
    with pytest.raises(snapgraph.SourceError) as e:
        target.checkout(first, Broken())
    assert e.value.id == first
    assert isinstance(e.value.__cause__, ConnectionError)
    assert snapshot_of(target) == before


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_a_stop_raised_by_the_source_is_raised_as_itself(history, target, stop):
    """Ctrl-C while a mapping fetches (its __getitem__ raises KeyboardInterrupt), or a
    SystemExit there, reaches the caller as that exception: not wrapped in a
    SourceError, which an `except Exception` around the call would swallow, nor
    dropped where a failed `__contains__` counts as "not held" (a commit's
    `have_in`). The checkout leaves the workspace as it was; the commit makes none."""
    objects, first, second, _ = history

    class Stopping:
        def __init__(self):
            self.calls = 0

        def __getitem__(self, key):
            self.calls += 1
            if self.calls == 2:
                raise stop()
            return objects[key]

        def __contains__(self, key):
            raise stop()

    before = snapshot_of(target)
    with pytest.raises(stop) as e:
        target.checkout(first, Stopping())
    assert not isinstance(e.value, snapgraph.Error)
    assert snapshot_of(target) == before

    ws = snapgraph.Workspace()
    ws.write("/more.txt", bytes(range(256)) * 64)
    with pytest.raises(stop):
        ws.commit(parents=[first], have_in=Stopping())
    # Raised as a stop arriving just after the call would be: the commit may have
    # been made in the workspace, but its objects never reached the caller.
    # Committing again gives them: the same commit, with what `objects` lacks.
    again = ws.commit(parents=[first], have_in=objects)
    restored = snapgraph.Workspace()
    restored.checkout(again.id, {**objects, **again.objects})
    assert restored.read("/more.txt") == bytes(range(256)) * 64

    for query in (
        snapgraph.SnapshotGraph.ancestry,
        snapgraph.SnapshotGraph.reachable,
        snapgraph.SnapshotGraph.reachable_history,
        snapgraph.SnapshotGraph.plan_checkout,
    ):
        with pytest.raises(stop):
            query(second, Stopping())


def test_not_a_mapping(target):
    with pytest.raises(TypeError):
        target.checkout("ab" * 32, 42)


@pytest.mark.parametrize("bad_id", ["", "zz" * 32, "ab" * 31, "ab" * 33, "AB" * 32 + "x"])
def test_bad_commit_ids(history, target, bad_id):
    objects, _, _, _ = history
    with pytest.raises(snapgraph.InvalidIdError) as e:
        target.checkout(bad_id, objects)
    assert e.value.id == bad_id


def test_garbage_bytes_under_a_real_id(history, target):
    objects, first, _, _ = history
    for garbage in [b"", b"\x00", b"\xff" * 100]:
        bad = dict(objects)
        bad[first] = garbage
        with pytest.raises(snapgraph.ObjectError):
            target.checkout(first, bad)
    assert target.read("/mine.txt") == b"untouched"


def test_diff_and_graph_queries_refuse_hostile_objects(history):
    objects, first, second, _ = history
    victim = snapgraph.SnapshotGraph.reachable(second, objects)[0]
    bad = dict(objects)
    bad[victim] = b"\x07" + bad[victim][1:]
    with pytest.raises(snapgraph.CorruptObjectError) as e:
        snapgraph.SnapshotGraph.reachable(second, bad)
    assert e.value.id == victim
    missing = {k: v for k, v in objects.items() if k != second}
    with pytest.raises(snapgraph.ObjectNotFoundError) as e:
        snapgraph.SnapshotGraph.diff(first, second, missing)
    assert e.value.id == second


def test_source_that_reenters_the_workspace(history, target):
    """A mapping whose __getitem__ touches the workspace being checked out gets an
    exception (the workspace is borrowed), not a crash or a deadlock."""
    objects, first, _, _ = history

    class Reentrant:
        def __getitem__(self, key):
            target.read("/mine.txt")
            return objects[key]

    before = snapshot_of(target)
    with pytest.raises(snapgraph.SourceError) as e:
        target.checkout(first, Reentrant())
    assert isinstance(e.value.__cause__, RuntimeError)
    assert snapshot_of(target) == before


def test_concurrent_calls_on_one_workspace_are_refused_not_raced(history):
    """While one thread checks out (GIL released), another thread's call on the same
    workspace raises instead of racing it."""
    import threading

    objects, first, _, _ = history
    ws = snapgraph.Workspace()
    started, release = threading.Event(), threading.Event()

    class Slow:
        def __getitem__(self, key):
            started.set()
            release.wait(5)
            return objects[key]

    errors = []

    def run():
        try:
            ws.checkout(first, Slow())
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    assert started.wait(5)
    with pytest.raises(RuntimeError):
        ws.write("/x", b"racing")
    release.set()
    t.join()
    assert errors == []
    assert ws.read("/README.md") == b"# demo\n"
    assert not ws.exists("/x")


def test_every_error_attribute_reads_as_none_when_unset():
    ws = snapgraph.Workspace()
    with pytest.raises(snapgraph.FsError) as e:
        ws.read("/nope")
    assert e.value.id is None and e.value.limit is None and e.value.path == "/nope"
