"""commit / checkout from dicts, lazy mappings and have sets."""

import threading

import pytest

import snapgraph


def test_first_commit_is_complete_and_self_contained(ws):
    c = ws.commit()
    assert len(c.id) == 64 and int(c.id, 16) >= 0
    assert c.is_complete
    assert c.object_count == len(c.objects) > 0
    assert c.stored_bytes == sum(len(b) for b in c.objects.values())
    assert all(isinstance(b, bytes) for b in c.objects.values())
    assert list(c.objects)[-1] == c.id  # dependency order: the commit last
    assert c.generation == 1
    assert ws.head == c.id
    packed = c.packed
    assert isinstance(packed, bytes)
    assert snapgraph.Workspace.from_snapshot(packed).read("/README.md") == b"# demo\n"


def test_incremental_commit_emits_only_what_have_lacks(history):
    objects, first, second, ws = history
    ws.write("/new.txt", b"newer")  # /src is unchanged: its tree is left out
    third = ws.commit(parents=[second], have=list(objects))
    assert not third.is_complete
    assert third.packed is None
    assert set(third.objects).isdisjoint(objects)
    assert third.id in third.objects


def test_have_and_have_in_give_the_same_commit(history):
    objects, first, second, ws = history
    a = ws.copy()
    b = ws.copy()
    a.write("/x", b"1")
    b.write("/x", b"1")
    ca = a.commit(parents=[second], have=objects.keys())
    cb = b.commit(parents=[second], have_in=objects)
    assert ca.id == cb.id
    assert ca.objects == cb.objects


def test_checkout_restores_files_and_state(history):
    objects, first, second, _ = history
    ws = snapgraph.Workspace()
    restore = ws.checkout(first, objects)
    assert restore.commit == first
    assert restore.drift_check is None
    assert ws.read("/README.md") == b"# demo\n"
    assert ws.read("/src/main.py") == b"print('hi')\n"
    assert ws.state() == b"interpreter state 1"
    assert ws.head == first
    ws.checkout(second, objects)
    assert not ws.exists("/README.md")
    assert ws.read("/new.txt") == b"new"


def test_commit_after_checkout_continues_history(history):
    objects, first, second, _ = history
    ws = snapgraph.Workspace()
    ws.checkout(first, objects)
    ws.write("/branch.txt", b"b")
    c = ws.commit(parents=[first], have_in=objects)
    objects.update(c.objects)
    assert snapgraph.SnapshotGraph.ancestry(c.id, objects) == [c.id, first]


class LazyRows:
    """A caller's own mapping over a database: only __getitem__."""

    def __init__(self, rows):
        self.rows = rows
        self.asked = []

    def __getitem__(self, key):
        self.asked.append(key)
        return self.rows[key]  # KeyError when absent


def test_lazy_mapping_with_only_getitem(history):
    objects, first, second, _ = history
    lazy = LazyRows(objects)
    ws = snapgraph.Workspace()
    ws.checkout(second, lazy)
    assert ws.read("/new.txt") == b"new"
    assert lazy.asked and set(lazy.asked) <= set(objects)


def test_mapping_returning_none_means_absent(history):
    objects, first, _, _ = history

    class Nones:
        def __getitem__(self, key):
            return None

    with pytest.raises(snapgraph.ObjectNotFoundError) as e:
        snapgraph.Workspace().checkout(first, Nones())
    assert e.value.id == first


def test_checkout_policies(history):
    objects, first, _, _ = history
    ws = snapgraph.Workspace()
    ws.set_capabilities(features=["sqlite"])
    ws.write("/f", b"x")
    c = ws.commit()
    objects.update(c.objects)
    bare = snapgraph.Workspace()
    with pytest.raises(snapgraph.CapabilityError) as e:
        bare.checkout(c.id, objects)
    assert e.value.id == c.id
    assert e.value.missing == ["feature:sqlite"]
    assert not bare.exists("/f")
    bare.checkout(c.id, objects, policy="force")
    assert bare.read("/f") == b"x"
    with pytest.raises(ValueError):
        bare.checkout(c.id, objects, policy="lenient")


def test_feature_required_by_content_is_refused_under_force():
    ws = snapgraph.Workspace()
    ws.write("/db.sqlite", b"SQLite format 3\x00rest")
    c = ws.commit()
    target = snapgraph.Workspace()
    target.require_feature_for_prefix(b"SQLite format 3\x00", "sqlite")
    with pytest.raises(snapgraph.CapabilityError) as e:
        target.checkout(c.id, c.objects, policy="force")
    assert e.value.code == "feature_required"
    assert e.value.path == "/db.sqlite"
    assert e.value.feature == "sqlite"


def test_limits_refuse_before_anything_changes(history):
    objects, first, _, _ = history
    ws = snapgraph.Workspace()
    ws.write("/mine", b"m")
    ws.set_limits(max_files=1)
    with pytest.raises(snapgraph.LimitError) as e:
        ws.checkout(first, objects)
    assert e.value.what == "files"
    assert e.value.limit == 1
    assert e.value.id == first
    assert ws.read("/mine") == b"m"


def test_shallow_checkout_and_load_content(history):
    objects, first, _, _ = history
    big = snapgraph.Workspace()
    big.write("/big.bin", bytes(range(256)) * 400)
    c = big.commit()
    objects.update(c.objects)
    ws = snapgraph.Workspace()
    ws.checkout(c.id, objects, shallow=True)
    assert not ws.is_loaded("/big.bin")
    with pytest.raises(snapgraph.FsError) as e:
        ws.read("/big.bin")
    assert e.value.code == "not_loaded"
    with pytest.raises(snapgraph.CommitError) as e:
        ws.snapshot()
    assert e.value.code == "content_not_loaded"
    assert e.value.path == "/big.bin"
    ws.load_content("/big.bin", objects)
    assert ws.read("/big.bin") == bytes(range(256)) * 400


def test_drift_check_is_driven_by_the_caller():
    ws = snapgraph.Workspace()
    ws.record_read("s3://b/k", "etag-1", cached_at="/cache/k")
    ws.write("/cache/k", b"cached")
    c = ws.commit()
    restore = snapgraph.Workspace().checkout(c.id, c.objects)
    check = restore.drift_check
    assert check.pending() == ["s3://b/k"]
    assert check.expected() == {"s3://b/k": "etag-1"}
    assert check.supply("s3://b/k", "etag-2")
    assert not check.supply("s3://other", "x")
    with pytest.raises(snapgraph.DriftError) as e:
        check.finish()
    assert e.value.id == c.id
    assert e.value.drifted == [("s3://b/k", "etag-1", "etag-2", "/cache/k")]
    with pytest.raises(RuntimeError):
        check.finish()
    ok = restore.drift_check
    assert ok.supply_all({"s3://b/k": "etag-1"}) == 1
    ok.finish()
    # Unchecked sources are drift too.
    with pytest.raises(snapgraph.DriftError) as e:
        restore.drift_check.finish()
    assert e.value.unchecked == ["s3://b/k"]
    # drift="off": no check, the cached copy is stale.
    off = snapgraph.Workspace()
    r = off.checkout(c.id, c.objects, drift="off")
    assert r.drift_check is None
    assert r.stale == ["/cache/k"]
    assert off.stale_paths == ["/cache/k"]


def test_pins_are_returned():
    ws = snapgraph.Workspace()
    ws.record_read("git://repo/file", "fp", revision="abc123")
    c = ws.commit()
    r = snapgraph.Workspace().checkout(c.id, c.objects)
    assert [p.source for p in r.pins] == ["git://repo/file"]
    assert r.revision_for("git://repo/file") == "abc123"
    assert r.revision_for("other") is None


def test_parents_errors(history):
    objects, first, second, ws = history
    with pytest.raises(snapgraph.CommitError) as e:
        ws.commit(parents=[first, first])
    assert e.value.code == "duplicate_parent"
    assert e.value.id == first
    stranger = snapgraph.Workspace()
    with pytest.raises(snapgraph.CommitError) as e:
        stranger.commit(parents=["ab" * 32])
    assert e.value.code == "unknown_parent"
    assert e.value.id == "ab" * 32
    with pytest.raises(snapgraph.InvalidIdError) as e:
        ws.commit(parents=["not-hex"])
    assert e.value.id == "not-hex"
    with pytest.raises(TypeError):
        ws.commit(parents=first)  # one str, not a list of ids


def test_have_accepts_any_iterable_of_ids(history):
    objects, _, second, ws = history
    ws.write("/g", b"g")
    c = ws.commit(parents=[second], have=(k for k in objects))
    assert not c.is_complete


def _ticks_during(call):
    """How many times another Python thread ran strictly inside `call()`. With the
    GIL held for the whole call at most one tick lands at its edges (a `list.sort()`
    of 10 million items gives 0 or 1); released, hundreds do."""
    import time

    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.0002)

    t = threading.Thread(target=ticker)
    t.start()
    time.sleep(0.01)
    try:
        start = time.perf_counter()
        call()
        end = time.perf_counter()
    finally:
        stop.set()
        t.join()
    return sum(1 for x in ticks if start < x < end)


@pytest.fixture(scope="module")
def big():
    ws = snapgraph.Workspace()
    for i in range(400):
        ws.write(f"/d/{i}", bytes([i % 251]) * 100_000)
    return ws


def test_gil_is_released_during_commit(big):
    assert _ticks_during(lambda: big.copy().commit()) >= 10


def test_gil_is_released_during_checkout_from_a_store_and_snapshots(big):
    store = snapgraph.open("memory:")
    c = big.copy().commit()
    store.put(c.objects)
    assert _ticks_during(lambda: snapgraph.Workspace().checkout(c.id, store)) >= 10
    data = big.snapshot()
    assert _ticks_during(lambda: big.snapshot()) >= 10
    assert _ticks_during(lambda: snapgraph.Workspace.from_snapshot(data)) >= 10


def test_commit_can_leave_out_files_or_state(ws):
    """The commit records an empty root directory or empty state; the workspace keeps
    its own."""
    full = ws.commit()
    no_state = ws.commit(parents=[full.id], exclude_state=True)
    no_files = ws.commit(parents=[no_state.id], exclude_files=True)
    objects = {**full.objects, **no_state.objects, **no_files.objects}
    assert snapgraph.SnapshotGraph.commit(no_state.id, objects).state_size == 0
    assert snapgraph.SnapshotGraph.diff(full.id, no_files.id, objects).files_removed == [
        "/README.md",
        "/src/main.py",
    ]
    assert ws.read("/README.md") == b"# demo\n" and ws.state() == b"interpreter state 1"
    restored = snapgraph.Workspace()
    restored.checkout(no_files.id, objects)
    assert restored.walk() == [] and restored.state() == b"interpreter state 1"


def _pseudo_random(n, seed):
    """Incompressible bytes, deterministic."""
    import hashlib

    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.blake2b(f"{seed}:{counter}".encode(), digest_size=64).digest()
        counter += 1
    return bytes(out[:n])


class _Reader:
    """A reader that records the sizes asked for."""

    def __init__(self, data):
        self.data, self.at, self.asked = data, 0, []

    def read(self, n):
        self.asked.append(n)
        piece = self.data[self.at : self.at + n]
        self.at += len(piece)
        return piece


def test_write_stream_makes_what_write_makes_and_read_stream_gives_it_back(tmp_path):
    import io

    data = _pseudo_random(3_500_000, 1)
    whole = snapgraph.Workspace()
    whole.write("/d/big.bin", data)
    expected = whole.commit()

    # Into a dict: every object the stream made, as the whole write's commit made it.
    objects = {}
    ws = snapgraph.Workspace()
    reader = _Reader(data)
    assert ws.write_stream("/d/big.bin", reader, objects) == len(data)
    assert set(reader.asked) == {1 << 20}
    assert not ws.is_loaded("/d/big.bin")
    assert ws.metadata("/d/big.bin").size == len(data)
    c = ws.commit()
    assert c.id == expected.id
    content = {k: v for k, v in expected.objects.items() if k not in c.objects}
    assert content == objects
    objects.update(c.objects)

    # Out again, a window at a time, from the dict and from a store.
    out = io.BytesIO()
    assert ws.read_stream("/d/big.bin", objects, out) == len(data)
    assert out.getvalue() == data
    store = snapgraph.open(f"sqlite:{tmp_path / 's.db'}")
    ws2 = snapgraph.Workspace()
    assert ws2.write_stream("/big.bin", io.BytesIO(data), store) == len(data)
    # Stored in writes of a few MiB: the SQLite store keeps the large chunks in its
    # segment file beside the database (back both up together).
    assert [p.name for p in (tmp_path / "s.db-segments").iterdir()] == ["1.seg"]
    c2 = ws2.commit()
    store.put(c2.objects)
    back = snapgraph.Workspace()
    back.checkout(c2.id, store, shallow=True)
    out = io.BytesIO()
    back.read_stream("/big.bin", store, out)
    assert out.getvalue() == data
    # A loaded file is one write.
    out = io.BytesIO()
    assert whole.read_stream("/d/big.bin", {}, out) == len(data)
    assert out.getvalue() == data


def test_write_stream_over_a_shallow_checkout_makes_what_write_makes(tmp_path):
    """Over a file a shallow checkout left in a store, write_stream hashes the chunks
    the new bytes still hold instead of cutting them (the Rust tests show which it
    took); whatever changed, and whatever size is given as a hint, the file commits
    to what a whole write makes and reads back."""
    import io

    data = _pseudo_random(3_000_000, 3)
    store = snapgraph.open(f"sqlite:{tmp_path / 's.db'}")
    first = snapgraph.Workspace()
    first.write("/log", data)
    c1 = first.commit()
    store.put(c1.objects)
    changed = bytearray(data)
    changed[1_500_000] ^= 0xFF
    edits = {
        "a line appended": data + b"one more line\n",
        "a line prepended": b"first\n" + data,
        "a byte changed": bytes(changed),
        "cut short": data[:2_000_000],
        "other bytes": _pseudo_random(2_500_000, 4),
    }
    for what, new in edits.items():
        # The same commit made by a whole write on a full checkout.
        whole = snapgraph.Workspace()
        whole.checkout(c1.id, store)
        whole.write("/log", new)
        expected = whole.commit()
        for size in (len(new), None, 12345):
            ws = snapgraph.Workspace()
            ws.checkout(c1.id, store, shallow=True)
            assert ws.write_stream("/log", io.BytesIO(new), store, size=size) == len(new)
            assert not ws.is_loaded("/log")
            c = ws.commit()
            assert c.id == expected.id, (what, size)
            store.put(c.objects)
            back = snapgraph.Workspace()
            back.checkout(c.id, store, shallow=True)
            out = io.BytesIO()
            back.read_stream("/log", store, out)
            assert out.getvalue() == new, what


def test_streams_raise_typed_errors():
    import io

    data = _pseudo_random(300_000, 2)
    objects = {}
    ws = snapgraph.Workspace()
    ws.write_stream("/f", io.BytesIO(data), objects)
    c = ws.commit()
    objects.update(c.objects)
    shallow = snapgraph.Workspace()
    shallow.checkout(c.id, objects, shallow=True)
    # A damaged chunk: CorruptObjectError naming it.
    # The file's chunks: its objects the commit did not emit, over 4 KiB each
    # (its manifest node is a few hundred bytes).
    chunk_ids = [k for k, v in objects.items() if k not in c.objects and len(v) > 4000]
    victim = sorted(chunk_ids)[0]
    damaged = dict(objects)
    damaged[victim] = damaged[victim][:-1] + bytes([damaged[victim][-1] ^ 1])
    with pytest.raises(snapgraph.CorruptObjectError) as e:
        shallow.read_stream("/f", damaged, io.BytesIO())
    assert e.value.id == victim
    missing = dict(objects)
    del missing[victim]
    with pytest.raises(snapgraph.ObjectNotFoundError) as e:
        shallow.read_stream("/f", missing, io.BytesIO())
    assert e.value.id == victim
    with pytest.raises(snapgraph.FsError) as e:
        shallow.read_stream("/nope", objects, io.BytesIO())
    assert e.value.code == "not_found"
    # Paths `write` refuses, a reader that returns str, a sink that cannot take objects,
    # and the reader's and writer's own errors.
    ws.mkdir("/dir")
    with pytest.raises(snapgraph.FsError) as e:
        ws.write_stream("/dir", io.BytesIO(b"x" * 100), {})
    assert e.value.code == "is_a_directory"
    with pytest.raises(TypeError):
        ws.write_stream("/g", io.StringIO("text"), {})
    with pytest.raises(TypeError):
        ws.write_stream("/g", io.BytesIO(b"x"), 42)

    class Failing:
        def read(self, n):
            raise OSError("disk gone")

        def write(self, data):
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk gone"):
        ws.write_stream("/g", Failing(), {})
    with pytest.raises(OSError, match="disk full"):
        shallow.read_stream("/f", objects, Failing())
