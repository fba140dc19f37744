//! The one place where Rust errors become Python exceptions.
//!
//! Every binding returns `Result<_, Failure>`; [`Failure`] holds the Rust error as it
//! came out of the core or the store crate, and its conversion into a `PyErr` picks
//! the exception class of the error's family, keeps the Rust message (which names
//! the object id or path) and sets the ids and paths as attributes. Errors that wrap
//! others (a checkout error inside a snapshot error inside a repository error) are
//! unwrapped to the innermost family, so `except snapgraph.CorruptObjectError`
//! catches a corrupt object however deep the call that met it.

use pyo3::prelude::*;
use pyo3::{IntoPyObjectExt, PyTypeInfo};
use snapgraph::LimitError as CoreLimit;
use snapgraph::{
    BoxError, CheckoutError, CommitError, ContentDriftError, FsError, GraphError, ObjectError,
    ObjectId, ParseIdError, PathError, SnapshotError,
};
use snapgraph_store::{GcError, RepoError, StoreError, SyncError};

/// The exception classes. `create_exception!` expands to `unsafe impl PyTypeInfo`
/// (generated code, sound by PyO3's contract); nothing else in this module is unsafe.
#[allow(unsafe_code)]
pub mod classes {
    use pyo3::create_exception;
    use pyo3::exceptions::PyException;

    create_exception!(
        snapgraph,
        Error,
        PyException,
        "Base class of every snapgraph error. `code` names the Rust variant (snake case); \
         `id`, `path` and the other attributes name what the error is about."
    );
    create_exception!(
        snapgraph,
        InvalidIdError,
        Error,
        "A string that is not a 64-character hex object id (`id`: the string given)."
    );
    create_exception!(
        snapgraph,
        InvalidPathError,
        Error,
        "A malformed workspace path (`path`, `reason`)."
    );
    create_exception!(
        snapgraph,
        FsError,
        Error,
        "A workspace file operation failed on `path` (not found, not a directory, exists, ...; \
         `code` says which)."
    );
    create_exception!(
        snapgraph,
        ObjectError,
        Error,
        "An object could not be used (`id`). Base of the object families below."
    );
    create_exception!(
        snapgraph,
        ObjectNotFoundError,
        ObjectError,
        "The objects given do not hold object `id`."
    );
    create_exception!(
        snapgraph,
        CorruptObjectError,
        ObjectError,
        "Object `id` does not hash to its id (`actual`, when known): bit rot, truncation, a \
         swapped object."
    );
    create_exception!(
        snapgraph,
        WrongKindError,
        ObjectError,
        "Object `id` is of kind `actual` where a reference promised `expected`."
    );
    create_exception!(
        snapgraph,
        MalformedObjectError,
        ObjectError,
        "Object `id` hashes right but does not decode (unknown kind, newer version, \
         non-canonical body, too large)."
    );
    create_exception!(
        snapgraph,
        SourceError,
        ObjectError,
        "The caller's objects failed while reading `id` (the exception `__getitem__` raised \
         is the `__cause__`)."
    );
    create_exception!(
        snapgraph,
        LimitError,
        Error,
        "A limit was exceeded (`what`, `limit`; `id` the commit or `path` the path)."
    );
    create_exception!(
        snapgraph,
        CommitError,
        Error,
        "A commit was refused (unknown or duplicate parent `id`, content not loaded at `path`)."
    );
    create_exception!(
        snapgraph,
        CapabilityError,
        Error,
        "Commit `id` needs capabilities the workspace lacks (`missing`, `extra`) or content at \
         `path` needs `feature`."
    );
    create_exception!(
        snapgraph,
        DriftError,
        Error,
        "External content moved since commit `id` (`drifted`: list of (source, snapshot, live, \
         cached_at); `unchecked`: sources never supplied)."
    );
    create_exception!(
        snapgraph,
        HistoryError,
        Error,
        "A commit's history is not what it claims (`id`, `parent`)."
    );
    create_exception!(
        snapgraph,
        SnapshotError,
        Error,
        "A packed snapshot was refused (not a snapshot, corrupt, keyed/unkeyed mismatch, too \
         new). Nothing was applied."
    );
    create_exception!(
        snapgraph,
        NotAuthenticError,
        SnapshotError,
        "A keyed snapshot's MAC does not verify with this key. Nothing was applied."
    );
    create_exception!(
        snapgraph,
        StoreError,
        Error,
        "A store's backend failed (`context`: the path, id, ref or operation)."
    );
    create_exception!(
        snapgraph,
        InvalidRefNameError,
        Error,
        "A ref or branch name that stores refuse or that snapgraph reserves (`name`)."
    );
    create_exception!(
        snapgraph,
        RefConflictError,
        Error,
        "A ref is not where the caller expected (`name`, `expected`, `actual`): someone else \
         moved it, it exists already, or it diverged. Nothing moved."
    );
    create_exception!(
        snapgraph,
        UnknownRevisionError,
        Error,
        "A name that is no branch, snapshot or commit id the store holds (`name`)."
    );
    create_exception!(
        snapgraph,
        GcConflictError,
        Error,
        "A garbage collection and a writer met: a sweep in progress (`id`: its marker), \
         leases still held (`leases`), or objects swept under a commit (`id`, `missing`)."
    );
    create_exception!(
        snapgraph,
        PrunedError,
        Error,
        "A hollow commit (`id`): retention or a shallow sync let its snapshot go. Its history \
         is kept (`log` works), its files are not: check out a newer commit."
    );
}

use classes::*;

/// Every error a binding can return, converted to a Python exception at the boundary.
#[derive(Debug)]
pub enum Failure {
    /// An error of the core.
    Core(snapgraph::Error),
    /// A store's error.
    Store(StoreError),
    /// A repository operation's error.
    Repo(RepoError),
    /// A sync's error.
    Sync(SyncError),
    /// A garbage collection's error.
    Gc(GcError),
    /// Already a Python exception (argument conversion, a caller's callback).
    Py(PyErr),
}

macro_rules! from_core {
    ($($t:ty),*) => {$(
        impl From<$t> for Failure {
            fn from(e: $t) -> Self {
                Failure::Core(e.into())
            }
        }
    )*};
}
from_core!(
    FsError,
    PathError,
    CommitError,
    CheckoutError,
    GraphError,
    ObjectError,
    SnapshotError,
    ContentDriftError,
    ParseIdError
);

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Store(e)
    }
}
impl From<RepoError> for Failure {
    fn from(e: RepoError) -> Self {
        Failure::Repo(e)
    }
}
impl From<SyncError> for Failure {
    fn from(e: SyncError) -> Self {
        Failure::Sync(e)
    }
}
impl From<GcError> for Failure {
    fn from(e: GcError) -> Self {
        Failure::Gc(e)
    }
}
impl From<PyErr> for Failure {
    fn from(e: PyErr) -> Self {
        Failure::Py(e)
    }
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> Self {
        Python::attach(|py| match f {
            Failure::Py(e) => e,
            Failure::Core(e) => core(py, e),
            Failure::Store(e) => store(py, e),
            Failure::Repo(e) => repo(py, e),
            Failure::Sync(e) => sync(py, e),
            Failure::Gc(e) => gc(py, e),
        })
    }
}

/// A bad id given by the caller, naming the string.
pub fn invalid_id(given: &str, e: ParseIdError) -> Failure {
    Python::attach(|py| {
        Failure::Py(raise::<InvalidIdError>(
            py,
            format!("{given:?} is not an object id: {e}"),
            "invalid_id",
            vec![("id", given.into_py_any(py))],
            None,
        ))
    })
}

type Attrs = Vec<(&'static str, PyResult<Py<PyAny>>)>;

/// An exception of class `T` with `message`, `code`, the attributes and a cause.
fn raise<T: PyTypeInfo>(
    py: Python<'_>,
    message: impl Into<String>,
    code: &str,
    attrs: Attrs,
    cause: Option<PyErr>,
) -> PyErr {
    let err = PyErr::new::<T, _>(message.into());
    let value = err.value(py);
    let set = || -> PyResult<()> {
        value.setattr("code", code)?;
        for (name, v) in attrs {
            value.setattr(name, v?)?;
        }
        Ok(())
    };
    if let Err(e) = set() {
        return e;
    }
    if let Some(cause) = cause {
        err.set_cause(py, Some(cause));
    }
    err
}

fn hex(py: Python<'_>, id: ObjectId) -> PyResult<Py<PyAny>> {
    id.to_hex().into_py_any(py)
}

fn opt_hex(py: Python<'_>, id: Option<ObjectId>) -> PyResult<Py<PyAny>> {
    id.map(|i| i.to_hex()).into_py_any(py)
}

fn val<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: T) -> PyResult<Py<PyAny>> {
    v.into_py_any(py)
}

fn core(py: Python<'_>, e: snapgraph::Error) -> PyErr {
    match e {
        snapgraph::Error::Fs(e) => fs(py, e),
        snapgraph::Error::Commit(e) => commit(py, e),
        snapgraph::Error::Checkout(e) => checkout(py, e),
        snapgraph::Error::Graph(e) => graph(py, e),
        snapgraph::Error::Object(e) => object(py, e),
        snapgraph::Error::Snapshot(e) => snapshot(py, e),
        snapgraph::Error::Drift(e) => drift(py, e),
        snapgraph::Error::ParseId(e) => {
            raise::<InvalidIdError>(py, e.to_string(), "invalid_id", vec![], None)
        }
        other => raise::<Error>(py, other.to_string(), "other", vec![], None),
    }
}

fn fs(py: Python<'_>, e: FsError) -> PyErr {
    let msg = e.to_string();
    let (code, path) = match &e {
        FsError::InvalidPath(p) => {
            return raise::<InvalidPathError>(
                py,
                msg,
                "invalid_path",
                vec![("path", val(py, &p.path)), ("reason", val(py, p.reason))],
                None,
            )
        }
        FsError::NotFound { path } => ("not_found", path.clone()),
        FsError::NotADirectory { path } => ("not_a_directory", path.clone()),
        FsError::IsADirectory { path } => ("is_a_directory", path.clone()),
        FsError::IsASymlink { path } => ("is_a_symlink", path.clone()),
        FsError::NotASymlink { path } => ("not_a_symlink", path.clone()),
        FsError::AlreadyExists { path } => ("already_exists", path.clone()),
        FsError::Root { .. } => ("root", "/".to_string()),
        FsError::IntoItself { from, to } => {
            return raise::<classes::FsError>(
                py,
                msg,
                "into_itself",
                vec![("path", val(py, from)), ("to", val(py, to))],
                None,
            )
        }
        FsError::InvalidMode { path, mode } => {
            return raise::<classes::FsError>(
                py,
                msg,
                "invalid_mode",
                vec![("path", val(py, path)), ("mode", val(py, *mode))],
                None,
            )
        }
        FsError::InvalidTarget { path, .. } => ("invalid_target", path.clone()),
        FsError::NotLoaded { path } => ("not_loaded", path.clone()),
        _ => ("other", String::new()),
    };
    raise::<classes::FsError>(py, msg, code, vec![("path", val(py, path))], None)
}

fn commit(py: Python<'_>, e: CommitError) -> PyErr {
    let msg = e.to_string();
    match e {
        CommitError::UnknownParent { id } => raise::<classes::CommitError>(
            py,
            msg,
            "unknown_parent",
            vec![("id", hex(py, id))],
            None,
        ),
        CommitError::GenerationOverflow { id, .. } => raise::<LimitError>(
            py,
            msg,
            "generation_overflow",
            vec![("id", hex(py, id)), ("what", val(py, "generation"))],
            None,
        ),
        CommitError::DuplicateParent { id } => raise::<classes::CommitError>(
            py,
            msg,
            "duplicate_parent",
            vec![("id", hex(py, id))],
            None,
        ),
        CommitError::TooManyParents { count, max } => raise::<LimitError>(
            py,
            msg,
            "too_many_parents",
            vec![
                ("what", val(py, "parents")),
                ("limit", val(py, max)),
                ("count", val(py, count)),
            ],
            None,
        ),
        CommitError::Parent(e) => object(py, e),
        CommitError::TooLarge { size, limit } => raise::<LimitError>(
            py,
            msg,
            "too_large",
            vec![
                ("what", val(py, "commit bytes")),
                ("limit", val(py, limit)),
                ("size", val(py, size)),
            ],
            None,
        ),
        CommitError::ContentNotLoaded { path, id } => raise::<classes::CommitError>(
            py,
            msg,
            "content_not_loaded",
            vec![("path", val(py, path)), ("id", hex(py, id))],
            None,
        ),
        other => raise::<classes::CommitError>(py, other.to_string(), "other", vec![], None),
    }
}

fn checkout(py: Python<'_>, e: CheckoutError) -> PyErr {
    let msg = e.to_string();
    match e {
        CheckoutError::Object(e) => object(py, e),
        CheckoutError::Fs(e) => fs(py, e),
        CheckoutError::Capabilities {
            commit,
            missing,
            extra,
        } => raise::<CapabilityError>(
            py,
            msg,
            "capabilities",
            vec![
                ("id", hex(py, commit)),
                ("missing", val(py, missing)),
                ("extra", val(py, extra)),
            ],
            None,
        ),
        CheckoutError::FeatureRequired {
            commit,
            path,
            feature,
        } => raise::<CapabilityError>(
            py,
            msg,
            "feature_required",
            vec![
                ("id", hex(py, commit)),
                ("path", val(py, path)),
                ("feature", val(py, feature)),
            ],
            None,
        ),
        CheckoutError::Limit(e) => limit(py, msg, e),
        other => raise::<Error>(py, other.to_string(), "other", vec![], None),
    }
}

/// A limit of a checkout or a diff (the core's one `LimitError`).
fn limit(py: Python<'_>, msg: String, e: CoreLimit) -> PyErr {
    match e {
        CoreLimit::Exceeded {
            commit,
            what,
            limit,
        } => commit_limit(py, msg, commit, what, limit),
        CoreLimit::TooDeep { path } => path_limit(py, msg, "too_deep", path, "depth"),
        CoreLimit::PathTooLong { path } => {
            path_limit(py, msg, "path_too_long", path, "path length")
        }
        other => raise::<LimitError>(py, other.to_string(), "other", vec![], None),
    }
}

/// A depth or path-length limit met at `path`.
fn path_limit(py: Python<'_>, msg: String, code: &str, path: String, what: &str) -> PyErr {
    raise::<LimitError>(
        py,
        msg,
        code,
        vec![("path", val(py, path)), ("what", val(py, what))],
        None,
    )
}

/// A limit on what one commit may hold (`what`: files, bytes, directories...).
fn commit_limit(py: Python<'_>, msg: String, commit: ObjectId, what: &str, limit: u64) -> PyErr {
    raise::<LimitError>(
        py,
        msg,
        "limit_exceeded",
        vec![
            ("id", hex(py, commit)),
            ("what", val(py, what)),
            ("limit", val(py, limit)),
        ],
        None,
    )
}

fn graph(py: Python<'_>, e: GraphError) -> PyErr {
    let msg = e.to_string();
    match e {
        GraphError::Object(e) => object(py, e),
        GraphError::Generation { id, parent, .. } => raise::<HistoryError>(
            py,
            msg,
            "generation",
            vec![("id", hex(py, id)), ("parent", hex(py, parent))],
            None,
        ),
        GraphError::Limit(e) => limit(py, msg, e),
        other => raise::<Error>(py, other.to_string(), "other", vec![], None),
    }
}

fn object(py: Python<'_>, e: ObjectError) -> PyErr {
    let id = e.id();
    let msg = e.to_string();
    match e {
        ObjectError::NotFound { .. } => {
            raise::<ObjectNotFoundError>(py, msg, "not_found", vec![("id", hex(py, id))], None)
        }
        ObjectError::Source { source, .. } => {
            let cause = source_cause(py, source);
            raise::<SourceError>(py, msg, "source", vec![("id", hex(py, id))], Some(cause))
        }
        ObjectError::Corrupt { actual, .. } => raise::<CorruptObjectError>(
            py,
            msg,
            "corrupt",
            vec![("id", hex(py, id)), ("actual", hex(py, actual))],
            None,
        ),
        ObjectError::WrongKind {
            expected, actual, ..
        } => raise::<WrongKindError>(
            py,
            msg,
            "wrong_kind",
            vec![
                ("id", hex(py, id)),
                ("expected", val(py, expected.to_string())),
                ("actual", val(py, actual.to_string())),
            ],
            None,
        ),
        ObjectError::TooLarge { .. } => {
            raise::<MalformedObjectError>(py, msg, "too_large", vec![("id", hex(py, id))], None)
        }
        ObjectError::UnknownKind { .. } => {
            raise::<MalformedObjectError>(py, msg, "unknown_kind", vec![("id", hex(py, id))], None)
        }
        ObjectError::UnsupportedVersion { .. } => raise::<MalformedObjectError>(
            py,
            msg,
            "unsupported_version",
            vec![("id", hex(py, id))],
            None,
        ),
        ObjectError::Malformed { .. } => {
            raise::<MalformedObjectError>(py, msg, "malformed", vec![("id", hex(py, id))], None)
        }
        _ => raise::<classes::ObjectError>(py, msg, "other", vec![("id", hex(py, id))], None),
    }
}

/// The exception a caller's source failed with: the Python exception its
/// `__getitem__` raised, or a store's error converted like any other.
fn source_cause(py: Python<'_>, source: BoxError) -> PyErr {
    match source.downcast::<PyErr>() {
        Ok(e) => *e,
        Err(source) => match source.downcast::<StoreError>() {
            Ok(e) => store(py, *e),
            Err(other) => raise::<Error>(py, other.to_string(), "other", vec![], None),
        },
    }
}

fn snapshot(py: Python<'_>, e: SnapshotError) -> PyErr {
    let msg = e.to_string();
    match e {
        SnapshotError::Checkout(e) => checkout(py, e),
        SnapshotError::NotAuthentic => {
            raise::<NotAuthenticError>(py, msg, "not_authentic", vec![], None)
        }
        SnapshotError::TooLarge { limit } => raise::<LimitError>(
            py,
            msg,
            "too_large",
            vec![
                ("what", val(py, "unpacked bytes")),
                ("limit", val(py, limit)),
            ],
            None,
        ),
        SnapshotError::NotASnapshot => {
            raise::<classes::SnapshotError>(py, msg, "not_a_snapshot", vec![], None)
        }
        SnapshotError::SnapshotTooNew { .. } => {
            raise::<classes::SnapshotError>(py, msg, "snapshot_too_new", vec![], None)
        }
        SnapshotError::Corrupt { .. } => {
            raise::<classes::SnapshotError>(py, msg, "corrupt", vec![], None)
        }
        SnapshotError::KeyRequired => {
            raise::<classes::SnapshotError>(py, msg, "key_required", vec![], None)
        }
        SnapshotError::NotKeyed => {
            raise::<classes::SnapshotError>(py, msg, "not_keyed", vec![], None)
        }
        other => raise::<classes::SnapshotError>(py, other.to_string(), "other", vec![], None),
    }
}

fn drift(py: Python<'_>, e: ContentDriftError) -> PyErr {
    let msg = e.to_string();
    let drifted: Vec<(String, String, Option<String>, Option<String>)> = e
        .drifted
        .iter()
        .map(|d| {
            (
                d.source.clone(),
                d.snapshot.clone(),
                d.live.clone(),
                d.cached_at.clone(),
            )
        })
        .collect();
    raise::<DriftError>(
        py,
        msg,
        "drift",
        vec![
            ("id", hex(py, e.commit)),
            ("drifted", val(py, drifted)),
            ("unchecked", val(py, e.unchecked)),
        ],
        None,
    )
}

fn store(py: Python<'_>, e: StoreError) -> PyErr {
    let msg = e.to_string();
    match e {
        StoreError::Backend { context, source } => {
            // The backend's own error is kept as the cause, as text (it is a Rust
            // error: an SQLite, PostgreSQL or I/O failure).
            let cause = raise::<Error>(py, source.to_string(), "backend", vec![], None);
            raise::<classes::StoreError>(
                py,
                msg,
                "backend",
                vec![("context", val(py, context))],
                Some(cause),
            )
        }
        StoreError::Corrupt { id, .. } => {
            raise::<CorruptObjectError>(py, msg, "corrupt", vec![("id", hex(py, id))], None)
        }
        StoreError::BadDelta { id, base, .. } => raise::<CorruptObjectError>(
            py,
            msg,
            "corrupt",
            vec![("id", hex(py, id)), ("base", hex(py, base))],
            None,
        ),
        StoreError::RefConflict {
            name,
            expected,
            actual,
        } => raise::<RefConflictError>(
            py,
            msg,
            "ref_conflict",
            vec![
                ("name", val(py, name)),
                ("expected", opt_hex(py, expected)),
                ("actual", opt_hex(py, actual)),
            ],
            None,
        ),
        StoreError::InvalidRefName { name, reason } => raise::<InvalidRefNameError>(
            py,
            msg,
            "invalid_ref_name",
            vec![("name", val(py, name)), ("reason", val(py, reason))],
            None,
        ),
        // A caching store's remote failed: the remote's own error.
        StoreError::Remote { source, .. } => store(py, *source),
        other => raise::<classes::StoreError>(py, other.to_string(), "other", vec![], None),
    }
}

fn repo(py: Python<'_>, e: RepoError) -> PyErr {
    let msg = e.to_string();
    match e {
        RepoError::Store(e) => store(py, e),
        RepoError::Commit(e) => commit(py, e),
        RepoError::Checkout(e) => checkout(py, e),
        RepoError::Graph(e) => graph(py, e),
        RepoError::Gc(e) => gc(py, e),
        RepoError::UnknownRevision { rev } => raise::<UnknownRevisionError>(
            py,
            msg,
            "unknown_revision",
            vec![("name", val(py, rev))],
            None,
        ),
        RepoError::BranchMoved {
            branch,
            workspace,
            branch_tip,
        } => raise::<RefConflictError>(
            py,
            msg,
            "branch_moved",
            vec![
                ("name", val(py, branch)),
                ("expected", opt_hex(py, workspace)),
                ("actual", opt_hex(py, branch_tip)),
            ],
            None,
        ),
        RepoError::AlreadyExists { name, id } => raise::<RefConflictError>(
            py,
            msg,
            "already_exists",
            vec![
                ("name", val(py, name)),
                ("expected", val(py, None::<String>)),
                ("actual", hex(py, id)),
            ],
            None,
        ),
        RepoError::SnapshotInUse { name, needed_by } => raise::<RefConflictError>(
            py,
            msg,
            "snapshot_in_use",
            vec![("name", val(py, name)), ("needed_by", val(py, needed_by))],
            None,
        ),
        RepoError::GcInProgress { marker } => raise::<GcConflictError>(
            py,
            msg,
            "gc_in_progress",
            vec![("id", hex(py, marker))],
            None,
        ),
        RepoError::Swept { commit, missing } => {
            let missing: Vec<String> = missing.iter().map(ObjectId::to_hex).collect();
            raise::<GcConflictError>(
                py,
                msg,
                "swept",
                vec![("id", hex(py, commit)), ("missing", val(py, missing))],
                None,
            )
        }
        RepoError::Reserved { name } => {
            raise::<InvalidRefNameError>(py, msg, "reserved", vec![("name", val(py, name))], None)
        }
        RepoError::Pruned { commit } => {
            raise::<PrunedError>(py, msg, "pruned", vec![("id", hex(py, commit))], None)
        }
        other => raise::<Error>(py, other.to_string(), "other", vec![], None),
    }
}

fn sync(py: Python<'_>, e: SyncError) -> PyErr {
    let msg = e.to_string();
    match e {
        SyncError::Store { side, source } => {
            let err = store(py, source);
            if let Err(e) = err.value(py).setattr("side", side.to_string()) {
                return e;
            }
            err
        }
        SyncError::UnknownRef { name } => raise::<UnknownRevisionError>(
            py,
            msg,
            "unknown_ref",
            vec![("name", val(py, name))],
            None,
        ),
        SyncError::MissingInSource { id, referenced_by } => raise::<ObjectNotFoundError>(
            py,
            msg,
            "missing_in_source",
            vec![
                ("id", hex(py, id)),
                ("referenced_by", hex(py, referenced_by)),
            ],
            None,
        ),
        SyncError::Invalid { id, .. } => {
            raise::<CorruptObjectError>(py, msg, "invalid", vec![("id", hex(py, id))], None)
        }
        SyncError::NotFastForward {
            name,
            destination,
            source_tip,
        } => raise::<RefConflictError>(
            py,
            msg,
            "not_fast_forward",
            vec![
                ("name", val(py, name)),
                ("expected", hex(py, source_tip)),
                ("actual", hex(py, destination)),
            ],
            None,
        ),
        SyncError::RefMoved { name, actual } => raise::<RefConflictError>(
            py,
            msg,
            "ref_moved",
            vec![("name", val(py, name)), ("actual", opt_hex(py, actual))],
            None,
        ),
        SyncError::GcInProgress { marker } => raise::<GcConflictError>(
            py,
            msg,
            "gc_in_progress",
            vec![("id", hex(py, marker))],
            None,
        ),
        other => raise::<Error>(py, other.to_string(), "other", vec![], None),
    }
}

fn gc(py: Python<'_>, e: GcError) -> PyErr {
    let msg = e.to_string();
    match e {
        GcError::Store(e) => store(py, e),
        GcError::LeasesHeld { leases } => raise::<GcConflictError>(
            py,
            msg,
            "leases_held",
            vec![("leases", val(py, leases))],
            None,
        ),
        GcError::SweepInProgress { marker } => raise::<GcConflictError>(
            py,
            msg,
            "sweep_in_progress",
            vec![("id", hex(py, marker))],
            None,
        ),
        other => raise::<Error>(py, other.to_string(), "other", vec![], None),
    }
}

/// Every attribute any snapgraph exception may carry. The base class has each as
/// `None`, so reading one an error does not set (`e.limit` of a depth limit) gives
/// `None`, never `AttributeError`.
const ATTRIBUTES: &[&str] = &[
    "code",
    "id",
    "path",
    "name",
    "reason",
    "actual",
    "expected",
    "what",
    "limit",
    "count",
    "size",
    "missing",
    "extra",
    "feature",
    "drifted",
    "unchecked",
    "parent",
    "context",
    "side",
    "leases",
    "needed_by",
    "referenced_by",
    "mode",
    "to",
];

/// Adds the exception classes to the module, the base class with `None` defaults for
/// every attribute in [`ATTRIBUTES`].
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let error = Error::type_object(py);
    for name in ATTRIBUTES {
        error.setattr(*name, py.None())?;
    }
    macro_rules! add {
        ($($c:ident),*) => {$(
            m.add(stringify!($c), classes::$c::type_object(py))?;
        )*};
    }
    add!(
        Error,
        InvalidIdError,
        InvalidPathError,
        FsError,
        ObjectError,
        ObjectNotFoundError,
        CorruptObjectError,
        WrongKindError,
        MalformedObjectError,
        SourceError,
        LimitError,
        CommitError,
        CapabilityError,
        DriftError,
        HistoryError,
        SnapshotError,
        NotAuthenticError,
        StoreError,
        InvalidRefNameError,
        RefConflictError,
        UnknownRevisionError,
        GcConflictError,
        PrunedError
    );
    Ok(())
}
