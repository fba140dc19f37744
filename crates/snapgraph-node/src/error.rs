//! Errors at the boundary: every Rust error becomes a JavaScript `Error` whose
//! `message` is the Rust error's text (it names the id, path or ref) and whose `code`
//! is a stable string per error family. The table is in README.md; the WebAssembly
//! binding uses the same codes.

use snapgraph::{
    CheckoutError, CommitError, ContentDriftError, FsError, GraphError, ObjectError, ParseIdError,
    SnapshotError,
};
use snapgraph_store::{GcError, RepoError, StoreError, SyncError};

/// The `code` of a thrown error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code(pub &'static str);

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.0
    }
}

/// The error every binding call returns: thrown as an `Error` with `code`.
pub type Error = napi::Error<Code>;

/// `Result` of every binding call. Named `Result` so napi-derive recognizes it.
pub type Result<T> = std::result::Result<T, Error>;

/// An error with `code` and `message`.
pub fn error(code: &'static str, message: impl Into<String>) -> Error {
    napi::Error::new(Code(code), message.into())
}

/// An argument the binding cannot convert.
pub fn invalid(message: impl Into<String>) -> Error {
    error("INVALID_ARGUMENT", message)
}

/// Any error with a code, converted at the boundary.
pub fn js<E: Coded>(e: E) -> Error {
    error(e.code(), e.to_string())
}

/// napi-rs's own errors (a JavaScript value of the wrong type, a failed property
/// read) become `INVALID_ARGUMENT`.
pub fn napi(e: napi::Error) -> Error {
    invalid(e.reason.clone())
}

/// A value in an `objects` argument that is not bytes; carried through
/// `ObjectError::Source` and reported as `INVALID_ARGUMENT`.
#[derive(Debug)]
pub struct NotBytes(pub String);

impl std::fmt::Display for NotBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotBytes {}

/// The stable code of an error family.
pub trait Coded: std::fmt::Display {
    /// The code (see README.md).
    fn code(&self) -> &'static str;
}

impl Coded for ParseIdError {
    fn code(&self) -> &'static str {
        "INVALID_ID"
    }
}

impl Coded for FsError {
    fn code(&self) -> &'static str {
        match self {
            FsError::InvalidPath(_) => "INVALID_PATH",
            FsError::NotFound { .. } => "NOT_FOUND",
            FsError::NotADirectory { .. } => "NOT_A_DIRECTORY",
            FsError::IsADirectory { .. } => "IS_A_DIRECTORY",
            FsError::IsASymlink { .. } => "IS_A_SYMLINK",
            FsError::NotASymlink { .. } => "NOT_A_SYMLINK",
            FsError::AlreadyExists { .. } => "ALREADY_EXISTS",
            FsError::Root { .. } | FsError::IntoItself { .. } => "INVALID_OPERATION",
            FsError::InvalidMode { .. } | FsError::InvalidTarget { .. } => "INVALID_ARGUMENT",
            FsError::NotLoaded { .. } => "NOT_LOADED",
            _ => "OTHER",
        }
    }
}

impl Coded for ObjectError {
    fn code(&self) -> &'static str {
        match self {
            ObjectError::NotFound { .. } => "NOT_FOUND",
            ObjectError::Source { source, .. } if source.is::<NotBytes>() => "INVALID_ARGUMENT",
            // A snapgraph store read through the core: its own family (CORRUPT, ...).
            ObjectError::Source { source, .. } => source
                .downcast_ref::<StoreError>()
                .map_or("BACKEND", Coded::code),
            ObjectError::Corrupt { .. }
            | ObjectError::UnknownKind { .. }
            | ObjectError::Malformed { .. } => "CORRUPT",
            ObjectError::TooLarge { .. } => "LIMIT",
            ObjectError::WrongKind { .. } => "WRONG_KIND",
            ObjectError::UnsupportedVersion { .. } => "UNSUPPORTED_VERSION",
            _ => "OTHER",
        }
    }
}

impl Coded for CommitError {
    fn code(&self) -> &'static str {
        match self {
            CommitError::UnknownParent { .. } => "UNKNOWN_PARENT",
            CommitError::DuplicateParent { .. } => "INVALID_ARGUMENT",
            CommitError::TooManyParents { .. } | CommitError::TooLarge { .. } => "LIMIT",
            CommitError::Parent(e) => e.code(),
            CommitError::ContentNotLoaded { .. } => "NOT_LOADED",
            _ => "OTHER",
        }
    }
}

impl Coded for CheckoutError {
    fn code(&self) -> &'static str {
        match self {
            CheckoutError::Object(e) => e.code(),
            CheckoutError::Capabilities { .. } | CheckoutError::FeatureRequired { .. } => {
                "CAPABILITY"
            }
            CheckoutError::Limit(_) => "LIMIT",
            CheckoutError::Fs(e) => e.code(),
            _ => "OTHER",
        }
    }
}

impl Coded for GraphError {
    fn code(&self) -> &'static str {
        match self {
            GraphError::Object(e) => e.code(),
            GraphError::Generation { .. } => "CORRUPT",
            GraphError::Limit(_) => "LIMIT",
            _ => "OTHER",
        }
    }
}

impl Coded for SnapshotError {
    fn code(&self) -> &'static str {
        match self {
            SnapshotError::NotASnapshot | SnapshotError::Corrupt { .. } => "CORRUPT",
            SnapshotError::SnapshotTooNew { .. } => "SNAPSHOT_TOO_NEW",
            SnapshotError::NotAuthentic => "NOT_AUTHENTIC",
            SnapshotError::KeyRequired => "KEY_REQUIRED",
            SnapshotError::NotKeyed => "NOT_KEYED",
            SnapshotError::TooLarge { .. } => "LIMIT",
            SnapshotError::Checkout(e) => e.code(),
            SnapshotError::Io(_) => "BACKEND",
            _ => "OTHER",
        }
    }
}

impl Coded for ContentDriftError {
    fn code(&self) -> &'static str {
        "DRIFT"
    }
}

impl Coded for StoreError {
    fn code(&self) -> &'static str {
        match self {
            StoreError::Backend { .. } | StoreError::Injected { .. } => "BACKEND",
            StoreError::Corrupt { .. } | StoreError::BadDelta { .. } => "CORRUPT",
            StoreError::RefConflict { .. } => "REF_CONFLICT",
            StoreError::InvalidRefName { .. } => "INVALID_REF",
            // A caching store's remote failed: the remote's own kind.
            StoreError::Remote { source, .. } => source.code(),
            _ => "OTHER",
        }
    }
}

impl Coded for GcError {
    fn code(&self) -> &'static str {
        match self {
            GcError::Store(e) => e.code(),
            GcError::LeasesHeld { .. } => "LEASE_HELD",
            GcError::SweepInProgress { .. } => "GC_IN_PROGRESS",
            _ => "OTHER",
        }
    }
}

impl Coded for RepoError {
    fn code(&self) -> &'static str {
        match self {
            RepoError::Store(e) => e.code(),
            RepoError::Commit(e) => e.code(),
            RepoError::Checkout(e) => e.code(),
            RepoError::Graph(e) => e.code(),
            RepoError::Gc(e) => e.code(),
            RepoError::UnknownRevision { .. } => "NOT_FOUND",
            RepoError::BranchMoved { .. } => "REF_CONFLICT",
            RepoError::AlreadyExists { .. } => "ALREADY_EXISTS",
            RepoError::SnapshotInUse { .. } => "IN_USE",
            RepoError::GcInProgress { .. } => "GC_IN_PROGRESS",
            RepoError::Swept { .. } => "SWEPT",
            RepoError::Pruned { .. } => "PRUNED",
            RepoError::Reserved { .. } => "INVALID_REF",
            _ => "OTHER",
        }
    }
}

impl Coded for SyncError {
    fn code(&self) -> &'static str {
        match self {
            SyncError::Store { source, .. } => source.code(),
            SyncError::UnknownRef { .. } | SyncError::MissingInSource { .. } => "NOT_FOUND",
            SyncError::Invalid { .. } => "CORRUPT",
            SyncError::NotFastForward { .. } => "NOT_FAST_FORWARD",
            SyncError::RefMoved { .. } => "REF_CONFLICT",
            SyncError::GcInProgress { .. } => "GC_IN_PROGRESS",
            _ => "OTHER",
        }
    }
}
