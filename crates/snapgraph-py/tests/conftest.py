"""Shared fixtures: small workspaces and object dicts."""

import pytest

import snapgraph


@pytest.fixture
def ws():
    w = snapgraph.Workspace()
    w.write("/src/main.py", b"print('hi')\n")
    w.write("/README.md", b"# demo\n")
    w.set_state(b"interpreter state 1")
    return w


@pytest.fixture
def history(ws):
    """Two commits of `ws` in a dict: (objects, first_id, second_id, ws)."""
    objects = {}
    first = ws.commit(meta={"turn": "1"})
    objects.update(first.objects)
    ws.write("/src/main.py", b"print('bye')\n")
    ws.write("/new.txt", b"new")
    ws.remove("/README.md")
    second = ws.commit(parents=[first.id], have=objects.keys(), meta={"turn": "2"})
    objects.update(second.objects)
    return objects, first.id, second.id, ws
