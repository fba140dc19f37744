"""snapgraph: content-addressed, verifiable history for in-memory workspaces.

Commit a workspace (files plus opaque state bytes) after every turn, keep only the
objects your store lacks, check out any commit, diff, fork, and pack snapshots. The
engine is the Rust core (``crates/snapgraph``); this package binds it.

    import snapgraph

    objects = {}                                   # any mapping of hex id -> bytes
    ws = snapgraph.Workspace()
    ws.write("/notes.txt", b"turn 1")
    first = ws.commit(meta={"turn": "1"})
    objects.update(first.objects)

    ws.write("/notes.txt", b"turn 2")
    second = ws.commit(parents=[first.id], have=objects.keys())
    objects.update(second.objects)                 # only what was new

    old = snapgraph.Workspace()
    old.checkout(first.id, objects)
    assert old.read("/notes.txt") == b"turn 1"
    diff = snapgraph.SnapshotGraph.diff(first.id, second.id, objects)
    assert diff.files_modified == ["/notes.txt"]

Ids are 64-character hex strings. Every error is a ``snapgraph.Error`` subclass whose
message names the object id or path, also carried as attributes (``id``, ``path``,
``name``...) with ``code`` naming the Rust variant.
"""

from ._snapgraph import (
    FORMAT_VERSION,
    Capabilities,
    CapabilityError,
    Change,
    ChangeEntry,
    CheckoutPlan,
    Commit,
    CommitError,
    CommitObject,
    Committed,
    CorruptObjectError,
    Diff,
    DirEntry,
    DriftCheck,
    DriftError,
    Error,
    ExternalRead,
    FsError,
    GcConflictError,
    GcReport,
    HistoryError,
    InvalidIdError,
    InvalidPathError,
    InvalidRefNameError,
    LimitError,
    MalformedObjectError,
    Metadata,
    NotAuthenticError,
    ObjectError,
    ObjectNotFoundError,
    Problem,
    PrunedError,
    RefConflictError,
    Repo,
    Restore,
    SnapshotError,
    SnapshotGraph,
    SnapshotInfo,
    SourceError,
    Store,
    StoreError,
    SyncReport,
    UnknownRevisionError,
    VerifyReport,
    Workspace,
    WrongKindError,
    gc,
    open,
    sync,
    verify,
)

# `open` is left out of `__all__` so that `from snapgraph import *` does not shadow the
# builtin; call it as `snapgraph.open(url)`.
__all__ = [
    "FORMAT_VERSION",
    "Capabilities",
    "CapabilityError",
    "Change",
    "ChangeEntry",
    "CheckoutPlan",
    "Commit",
    "CommitError",
    "CommitObject",
    "Committed",
    "CorruptObjectError",
    "Diff",
    "DirEntry",
    "DriftCheck",
    "DriftError",
    "Error",
    "ExternalRead",
    "FsError",
    "GcConflictError",
    "GcReport",
    "HistoryError",
    "InvalidIdError",
    "InvalidPathError",
    "InvalidRefNameError",
    "LimitError",
    "MalformedObjectError",
    "Metadata",
    "NotAuthenticError",
    "ObjectError",
    "ObjectNotFoundError",
    "Problem",
    "PrunedError",
    "RefConflictError",
    "Repo",
    "Restore",
    "SnapshotError",
    "SnapshotGraph",
    "SnapshotInfo",
    "SourceError",
    "Store",
    "StoreError",
    "SyncReport",
    "UnknownRevisionError",
    "VerifyReport",
    "Workspace",
    "WrongKindError",
    "gc",
    "sync",
    "verify",
]
