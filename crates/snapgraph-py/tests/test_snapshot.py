"""Packed snapshots: plain, options, keyed, and refused ones."""

import pytest

import snapgraph

KEY = bytes(range(32))


def test_snapshot_round_trip(ws):
    data = ws.snapshot()
    assert data == ws.snapshot()  # deterministic
    fresh = snapgraph.Workspace.from_snapshot(data)
    assert fresh.read("/src/main.py") == b"print('hi')\n"
    assert fresh.state() == b"interpreter state 1"
    other = snapgraph.Workspace()
    other.write("/gone", b"x")
    restore = other.restore_snapshot(data)
    assert isinstance(restore.commit, str)
    assert not other.exists("/gone")
    assert other.read("/README.md") == b"# demo\n"


def test_snapshot_options(ws):
    no_files = ws.snapshot(exclude_files=True)
    target = snapgraph.Workspace()
    target.write("/kept", b"k")
    target.restore_snapshot(no_files)
    assert target.read("/kept") == b"k"
    assert target.state() == b"interpreter state 1"
    no_state = ws.snapshot(exclude_state=True)
    target.set_state(b"mine")
    target.restore_snapshot(no_state)
    assert target.state() == b"mine"
    assert target.read("/README.md") == b"# demo\n"
    packed = ws.snapshot(compress=True)
    assert snapgraph.Workspace.from_snapshot(packed).read("/README.md") == b"# demo\n"


def test_keyed_snapshot(ws):
    data = ws.snapshot_keyed(KEY)
    assert snapgraph.Workspace.from_snapshot_keyed(data, KEY).read("/README.md") == b"# demo\n"
    other = snapgraph.Workspace()
    other.restore_snapshot_keyed(data, KEY)
    assert other.state() == b"interpreter state 1"


def test_wrong_key_and_key_mismatch_change_nothing(ws):
    data = ws.snapshot_keyed(KEY)
    target = snapgraph.Workspace()
    target.write("/mine", b"m")
    with pytest.raises(snapgraph.NotAuthenticError):
        target.restore_snapshot_keyed(data, bytes(32))
    with pytest.raises(snapgraph.SnapshotError) as e:
        target.restore_snapshot(data)
    assert e.value.code == "key_required"
    with pytest.raises(snapgraph.SnapshotError) as e:
        target.restore_snapshot_keyed(ws.snapshot(), KEY)
    assert e.value.code == "not_keyed"
    with pytest.raises(ValueError):
        target.restore_snapshot_keyed(data, b"short")
    assert [p for p, _ in target.walk()] == ["/mine"]


def test_damaged_snapshots_are_refused(ws):
    data = ws.snapshot()
    target = snapgraph.Workspace()
    target.write("/mine", b"m")
    with pytest.raises(snapgraph.SnapshotError) as e:
        target.restore_snapshot(b"not a snapshot at all")
    assert e.value.code == "not_a_snapshot"
    for bad in [data[: len(data) // 2], data[:-1], data[:10] + bytes([data[10] ^ 1]) + data[11:]]:
        with pytest.raises(snapgraph.SnapshotError):
            target.restore_snapshot(bad)
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x40
    with pytest.raises(snapgraph.SnapshotError):
        snapgraph.Workspace.from_snapshot(bytes(flipped))
    assert target.read("/mine") == b"m"


def test_limits_on_from_snapshot(ws):
    data = ws.snapshot()
    with pytest.raises(snapgraph.LimitError) as e:
        snapgraph.Workspace.from_snapshot(data, max_files=1)
    assert e.value.what == "files"


def test_from_snapshot_adopts_capabilities_restore_checks_them():
    ws = snapgraph.Workspace()
    ws.set_capabilities(features=["sqlite"])
    ws.write("/f", b"x")
    data = ws.snapshot()
    adopted = snapgraph.Workspace.from_snapshot(data)
    assert adopted.capabilities.features == ["sqlite"]
    bare = snapgraph.Workspace()
    with pytest.raises(snapgraph.CapabilityError) as e:
        bare.restore_snapshot(data)
    assert e.value.missing == ["feature:sqlite"]
    assert not bare.exists("/f")
