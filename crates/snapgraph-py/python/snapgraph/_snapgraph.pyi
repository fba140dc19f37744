"""Type stubs of the native module (kept by hand beside crates/snapgraph-py/src)."""

from typing import (
    Iterable,
    List,
    Literal,
    Mapping,
    MutableMapping,
    Optional,
    Protocol,
    Union,
    final,
)

FORMAT_VERSION: int

class _Objects(Protocol):
    """Anything with ``__getitem__(hex_id) -> bytes`` (a KeyError or None: absent)."""

    def __getitem__(self, key: str, /) -> Optional[bytes]: ...

Objects = Union["Store", _Objects, Mapping[str, bytes]]
"""Where objects are read from: a snapgraph store, a dict, or any lazy mapping."""

class _Reader(Protocol):
    """Anything with ``read(n) -> bytes`` (``b""`` at the end), such as a binary file."""

    def read(self, n: int, /) -> bytes: ...

class _Writer(Protocol):
    """Anything with ``write(bytes)``, such as a binary file."""

    def write(self, data: bytes, /) -> object: ...

Policy = Literal["superset", "strict", "force"]
DriftPolicy = Literal["strict", "off"]

# ----- errors -----

class Error(Exception):
    """Base class of every snapgraph error. Attributes an error does not set are None."""

    code: Optional[str]
    id: Optional[str]
    path: Optional[str]
    name: Optional[str]
    reason: Optional[str]
    actual: Optional[str]
    expected: Optional[str]
    what: Optional[str]
    limit: Optional[int]
    count: Optional[int]
    size: Optional[int]
    missing: Optional[list[str]]
    extra: Optional[list[str]]
    feature: Optional[str]
    drifted: Optional[list[tuple[str, str, Optional[str], Optional[str]]]]
    unchecked: Optional[list[str]]
    parent: Optional[str]
    context: Optional[str]
    side: Optional[str]
    leases: Optional[list[str]]
    needed_by: Optional[list[str]]
    referenced_by: Optional[str]
    mode: Optional[int]
    to: Optional[str]

class InvalidIdError(Error): ...
class InvalidPathError(Error): ...
class FsError(Error): ...
class ObjectError(Error): ...
class ObjectNotFoundError(ObjectError): ...
class CorruptObjectError(ObjectError): ...
class WrongKindError(ObjectError): ...
class MalformedObjectError(ObjectError): ...
class SourceError(ObjectError): ...
class LimitError(Error): ...
class CommitError(Error): ...
class CapabilityError(Error): ...
class DriftError(Error): ...
class HistoryError(Error): ...
class SnapshotError(Error): ...
class NotAuthenticError(SnapshotError): ...
class StoreError(Error): ...
class InvalidRefNameError(Error): ...
class RefConflictError(Error): ...
class UnknownRevisionError(Error): ...
class GcConflictError(Error): ...
class PrunedError(Error): ...

# ----- workspace -----

@final
class Metadata:
    kind: Literal["file", "dir", "symlink"]
    mode: int
    size: int

@final
class DirEntry:
    name: str
    metadata: Metadata

@final
class ExternalRead:
    source: str
    fingerprint: str
    revision: Optional[str]
    size: int
    cached_at: Optional[str]

@final
class Capabilities:
    builtins: list[str]
    features: list[str]
    fs_backend: Optional[str]
    engine_version: Optional[str]

@final
class Commit:
    """A new commit: its id and the objects to persist."""

    @property
    def id(self) -> str: ...
    @property
    def generation(self) -> int: ...
    @property
    def objects(self) -> dict[str, bytes]:
        """A new dict of the objects the destination lacks, referenced objects first."""
    @property
    def object_count(self) -> int: ...
    @property
    def stored_bytes(self) -> int: ...
    @property
    def is_complete(self) -> bool: ...
    @property
    def packed(self) -> Optional[bytes]:
        """The commit as a packed snapshot, or None when it is incremental."""

@final
class DriftCheck:
    def pending(self) -> list[str]: ...
    def expected(self) -> dict[str, str]: ...
    def supply(self, source: str, live: Optional[str]) -> bool: ...
    def supply_all(self, live: Mapping[str, Optional[str]]) -> int: ...
    def finish(self) -> None:
        """Raises DriftError unless every source was supplied and none moved."""

@final
class Restore:
    @property
    def commit(self) -> str: ...
    @property
    def pins(self) -> list[ExternalRead]: ...
    def revision_for(self, source: str) -> Optional[str]: ...
    @property
    def stale(self) -> list[str]: ...
    @property
    def drift_check(self) -> Optional[DriftCheck]: ...

@final
class Workspace:
    """An in-memory file system plus opaque state bytes."""

    def __init__(self) -> None: ...
    def write(self, path: str, data: bytes) -> None: ...
    def read(self, path: str) -> bytes: ...
    def read_link(self, path: str) -> str: ...
    def remove(self, path: str) -> None: ...
    def mkdir(self, path: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def symlink(self, path: str, target: str) -> None: ...
    def set_mode(self, path: str, mode: int) -> None: ...
    def list(self, path: str = "/") -> List[DirEntry]: ...
    def metadata(self, path: str) -> Metadata: ...
    def exists(self, path: str) -> bool: ...
    def walk(self) -> List[tuple[str, Metadata]]: ...
    def is_loaded(self, path: str) -> bool: ...
    def set_state(self, state: bytes) -> None: ...
    def state(self) -> bytes: ...
    @property
    def head(self) -> Optional[str]: ...
    def set_capabilities(
        self,
        builtins: Iterable[str] = ...,
        features: Iterable[str] = ...,
        fs_backend: Optional[str] = None,
        engine_version: Optional[str] = None,
    ) -> None: ...
    @property
    def capabilities(self) -> Optional[Capabilities]: ...
    def require_feature_for_prefix(self, prefix: bytes, feature: str) -> None: ...
    def record_read(
        self,
        source: str,
        fingerprint: str,
        revision: Optional[str] = None,
        size: int = 0,
        cached_at: Optional[str] = None,
    ) -> None: ...
    def forget_read(self, source: str) -> bool: ...
    @property
    def external_reads(self) -> List[ExternalRead]: ...
    @property
    def stale_paths(self) -> List[str]: ...
    def set_limits(
        self,
        max_files: Optional[int] = None,
        max_bytes: Optional[int] = None,
        max_unpacked_bytes: Optional[int] = None,
    ) -> None: ...
    @property
    def limits(self) -> dict[str, int]: ...
    def set_parallelism(self, threads: int) -> None: ...
    def copy(self) -> Workspace: ...
    def __copy__(self) -> Workspace: ...
    def commit(
        self,
        parents: Optional[Iterable[str]] = None,
        have: Optional[Iterable[str]] = None,
        have_in: Optional[Objects] = None,
        meta: Optional[Mapping[str, str]] = None,
        exclude_files: bool = False,
        exclude_state: bool = False,
    ) -> Commit: ...
    def checkout(
        self,
        commit_id: str,
        objects: Objects,
        policy: Policy = "superset",
        drift: DriftPolicy = "strict",
        shallow: bool = False,
    ) -> Restore: ...
    def load_content(self, path: str, objects: Objects) -> None: ...
    def write_stream(
        self,
        path: str,
        reader: _Reader,
        objects: Union["Store", MutableMapping[str, bytes]],
        size: Optional[int] = None,
    ) -> int:
        """Writes a file from ``reader`` (1 MiB reads), cut into its objects as it
        arrives, each put into ``objects``; the workspace keeps the reference. Over
        a file a shallow checkout left in a store, the chunks still held are hashed,
        not cut or put again (``size``, the new size if known, finds an unchanged
        tail too)."""
    def read_stream(self, path: str, objects: Objects, writer: _Writer) -> int:
        """Writes a file to ``writer`` a window of verified chunks at a time (fetched
        from a store without holding the GIL); the bytes are the file only once this
        returns."""
    def snapshot(
        self, exclude_files: bool = False, exclude_state: bool = False, compress: bool = False
    ) -> bytes: ...
    def snapshot_keyed(
        self,
        key: bytes,
        exclude_files: bool = False,
        exclude_state: bool = False,
        compress: bool = False,
    ) -> bytes: ...
    @staticmethod
    def from_snapshot(
        data: bytes,
        max_files: Optional[int] = None,
        max_bytes: Optional[int] = None,
        max_unpacked_bytes: Optional[int] = None,
    ) -> Workspace: ...
    @staticmethod
    def from_snapshot_keyed(
        data: bytes,
        key: bytes,
        max_files: Optional[int] = None,
        max_bytes: Optional[int] = None,
        max_unpacked_bytes: Optional[int] = None,
    ) -> Workspace: ...
    def restore_snapshot(self, data: bytes) -> Restore: ...
    def restore_snapshot_keyed(self, data: bytes, key: bytes) -> Restore: ...

# ----- graph -----

@final
class ChangeEntry:
    kind: Literal["file", "symlink"]
    mode: int
    size: int
    id: Optional[str]

@final
class Change:
    path: str
    kind: Literal["added", "removed", "modified", "type_changed", "mode_changed"]
    old: Optional[ChangeEntry]
    new: Optional[ChangeEntry]

@final
class Diff:
    @property
    def changes(self) -> list[Change]: ...
    files_added: list[str]
    files_modified: list[str]
    files_removed: list[str]
    state_changed: bool
    reads_added: list[str]
    reads_changed: list[str]
    reads_removed: list[str]
    def is_empty(self) -> bool: ...

@final
class CommitObject:
    id: str
    tree: str
    parents: list[str]
    generation: int
    state_size: int
    capabilities: Optional[str]
    reads: Optional[str]
    meta: dict[str, str]

@final
class SnapshotGraph:
    @staticmethod
    def diff(a: str, b: str, objects: Objects) -> Diff: ...
    @staticmethod
    def ancestry(commit_id: str, objects: Objects, limit: int = 100) -> list[str]: ...
    @staticmethod
    def reachable(commit_id: str, objects: Objects) -> list[str]: ...
    @staticmethod
    def reachable_history(commit_id: str, objects: Objects) -> list[str]: ...
    @staticmethod
    def plan_checkout(commit_id: str, objects: Objects) -> list[str]: ...
    @staticmethod
    def commit(commit_id: str, objects: Objects) -> CommitObject: ...
    @staticmethod
    def capabilities(commit_id: str, objects: Objects) -> Optional[Capabilities]: ...
    @staticmethod
    def external_reads(commit_id: str, objects: Objects) -> list[ExternalRead]: ...

@final
class CheckoutPlan:
    def __new__(cls, commit_id: str) -> CheckoutPlan: ...
    def missing(self, objects: Objects) -> list[str]: ...
    @property
    def is_done(self) -> bool: ...

# ----- stores -----

@final
class Store:
    def __getitem__(self, key: str, /) -> bytes: ...
    def get(self, id: str) -> Optional[bytes]: ...
    def __contains__(self, key: str, /) -> bool: ...
    def put(self, objects: Union[Mapping[str, bytes], Iterable[tuple[str, bytes]]]) -> None:
        """Writes objects in the order given; held ones are left. Every object is
        re-hashed first: bytes that are not their id's raise CorruptObjectError and
        nothing of the batch is written."""
    def missing(self, ids: Iterable[str]) -> list[str]: ...
    def ids(self) -> list[str]: ...
    def get_ref(self, name: str) -> Optional[str]: ...
    def list_refs(self, prefix: str = "") -> list[tuple[str, str]]: ...

def open(url: str) -> Store: ...

@final
class Committed:
    id: str
    previous: Optional[str]
    objects_written: int
    bytes_written: int

@final
class SnapshotInfo:
    name: str
    id: str
    target: str
    labels: dict[str, str]

@final
class Repo:
    def __new__(cls, store: Store) -> Repo: ...
    @staticmethod
    def open(url: str) -> Repo: ...
    @property
    def store(self) -> Store: ...
    def commit(
        self,
        ws: Workspace,
        branch: str,
        message: Optional[str] = None,
        meta: Optional[Mapping[str, str]] = None,
        parents: Optional[Iterable[str]] = None,
        onto_tip: bool = False,
    ) -> Committed: ...
    def checkout(self, rev: str) -> Workspace: ...
    def checkout_shallow(self, rev: str) -> Workspace: ...
    def resolve(self, rev: str) -> str: ...
    def branch(self, name: str) -> Optional[str]: ...
    def branches(self) -> list[tuple[str, str]]: ...
    def log(self, rev: str, limit: int = 100) -> list[CommitObject]: ...
    def tag(self, name: str, rev: str, labels: Optional[Mapping[str, str]] = None) -> SnapshotInfo: ...
    def fork(self, new_branch: str, at: str) -> str: ...
    def delete_branch(self, name: str, expected: str) -> None: ...
    def snapshots(self) -> list[SnapshotInfo]: ...
    def inspect(self, name: str) -> SnapshotInfo: ...

@final
class SyncReport:
    from_: Optional[str]
    to: Optional[str]
    objects: int
    bytes: int
    examined: int
    queries: int

@final
class Problem:
    kind: Literal["missing", "invalid", "kind_conflict", "unmarked", "other"]
    id: str
    referenced_by: Optional[str]
    reason: Optional[str]

@final
class GcReport:
    deleted: list[str]
    kept: int
    refs: int
    problems: list[Problem]

@final
class VerifyReport:
    refs: int
    reachable: int
    objects: int
    rehashed: int
    bytes: int
    unreachable: int
    broken_refs: list[str]
    problems: list[Problem]
    def is_clean(self) -> bool: ...

def sync(src: Store, dst: Store, name: str, force: bool = False) -> SyncReport: ...
def gc(store: Store, pins: Optional[Iterable[str]] = None) -> GcReport: ...
def verify(store: Store, read_data: bool = True) -> VerifyReport: ...

@final
class _BenchRust:
    """Benchmark baseline (benches/python_vs_rust.py); not API."""

    def __new__(cls, files: list[tuple[str, bytes]]) -> _BenchRust: ...
    def turns(self, edits: list[tuple[str, bytes]]) -> list[float]: ...
    def checkouts(self, n: int) -> list[float]: ...
