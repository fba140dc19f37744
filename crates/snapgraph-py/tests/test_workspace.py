"""Workspace file calls, state, capabilities, reads, copy."""

import copy

import pytest

import snapgraph


def test_write_read_list_metadata():
    ws = snapgraph.Workspace()
    ws.write("/a/b/c.txt", b"hello")
    assert ws.read("/a/b/c.txt") == b"hello"
    assert ws.exists("/a/b")
    assert not ws.exists("/a/x")
    md = ws.metadata("/a/b/c.txt")
    assert (md.kind, md.size) == ("file", 5)
    assert ws.metadata("/a").kind == "dir"
    assert [e.name for e in ws.list("/a/b")] == ["c.txt"]
    assert [e.name for e in ws.list()] == ["a"]
    assert [p for p, _ in ws.walk()] == ["/a", "/a/b", "/a/b/c.txt"]


def test_write_accepts_bytearray_and_memoryview():
    ws = snapgraph.Workspace()
    ws.write("/x", bytearray(b"abc"))
    assert ws.read("/x") == b"abc"


def test_mkdir_rename_remove_symlink_mode():
    ws = snapgraph.Workspace()
    ws.mkdir("/d/e")
    ws.write("/d/e/f", b"1")
    ws.rename("/d", "/moved")
    assert ws.read("/moved/e/f") == b"1"
    assert not ws.exists("/d")
    ws.symlink("/link", "/moved/e/f")
    assert ws.read_link("/link") == "/moved/e/f"
    assert ws.metadata("/link").kind == "symlink"
    ws.set_mode("/moved/e/f", 0o600)
    assert ws.metadata("/moved/e/f").mode == 0o600
    ws.remove("/moved")
    assert [e.name for e in ws.list("/")] == ["link"]


def test_state_round_trips():
    ws = snapgraph.Workspace()
    assert ws.state() == b""
    ws.set_state(b"\x00\x01state")
    assert ws.state() == b"\x00\x01state"


def test_copy_is_independent():
    ws = snapgraph.Workspace()
    ws.write("/f", b"one")
    fork = ws.copy()
    fork.write("/f", b"two")
    assert ws.read("/f") == b"one"
    assert fork.read("/f") == b"two"
    assert copy.copy(ws).read("/f") == b"one"


def test_capabilities_and_limits():
    ws = snapgraph.Workspace()
    assert ws.capabilities is None
    ws.set_capabilities(builtins=["ls", "cat"], features=["sqlite"], fs_backend="mem")
    caps = ws.capabilities
    assert caps.builtins == ["cat", "ls"]
    assert caps.features == ["sqlite"]
    assert caps.fs_backend == "mem"
    ws.set_limits(max_files=10)
    assert ws.limits["max_files"] == 10
    assert ws.limits["max_bytes"] > 0


def test_record_read_and_forget():
    ws = snapgraph.Workspace()
    ws.record_read("s3://b/k", "etag1", size=3, cached_at="/cache/k")
    (r,) = ws.external_reads
    assert (r.source, r.fingerprint, r.size, r.cached_at) == ("s3://b/k", "etag1", 3, "/cache/k")
    assert ws.forget_read("s3://b/k")
    assert not ws.forget_read("s3://b/k")
    with pytest.raises(snapgraph.InvalidPathError):
        ws.record_read("s3://b/k", "e", cached_at="relative")


@pytest.mark.parametrize(
    "path", ["relative", "/a/\x00b", "/" + "x" * 300, "/../up", ""]
)
def test_bad_paths_raise_invalid_path_and_change_nothing(path):
    ws = snapgraph.Workspace()
    ws.write("/keep", b"k")
    with pytest.raises(snapgraph.InvalidPathError) as e:
        ws.write(path, b"x")
    assert e.value.path == path
    assert e.value.code == "invalid_path"
    assert isinstance(e.value, snapgraph.Error)
    assert [p for p, _ in ws.walk()] == ["/keep"]


def test_fs_errors_name_the_path():
    ws = snapgraph.Workspace()
    ws.write("/file", b"x")
    with pytest.raises(snapgraph.FsError) as e:
        ws.read("/missing")
    assert (e.value.code, e.value.path) == ("not_found", "/missing")
    assert "/missing" in str(e.value)
    with pytest.raises(snapgraph.FsError) as e:
        ws.write("/file/below", b"x")
    assert e.value.code == "not_a_directory"
    with pytest.raises(snapgraph.FsError) as e:
        ws.read("/")
    assert e.value.code == "is_a_directory"
    with pytest.raises(snapgraph.FsError) as e:
        ws.set_mode("/file", 0o77777)
    assert e.value.code == "invalid_mode"
    assert e.value.mode == 0o77777


def test_wrong_argument_types_raise_type_error():
    ws = snapgraph.Workspace()
    with pytest.raises(TypeError):
        ws.write("/f", "not bytes")
    with pytest.raises(TypeError):
        ws.write(3, b"x")
