//! The one error type every store operation returns.

use snapgraph::{BoxError, ObjectId};

/// What went wrong in a store. Every variant names the object, ref or path involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The backend (file system, database) failed; `context` says where (a path, an
    /// object id, a ref name, or the operation).
    #[error("store backend failed at {context}: {source}")]
    Backend {
        /// The path, id, ref or operation involved.
        context: String,
        /// The backend's own error.
        #[source]
        source: BoxError,
    },
    /// Stored bytes did not decode or did not hash to their id. The store must not
    /// be trusted for this object; `snapgraph-store`'s `verify` lists every such one.
    #[error("object {id} is corrupt in the store: {reason}")]
    Corrupt {
        /// The object.
        id: ObjectId,
        /// What is wrong.
        reason: String,
    },
    /// A compare-and-swap on a ref found another value than expected: someone else
    /// moved it first. Nothing was changed.
    #[error("ref {name} moved: expected {}, found {}", show(.expected), show(.actual))]
    RefConflict {
        /// The ref.
        name: String,
        /// The value the caller expected (`None`: absent).
        expected: Option<ObjectId>,
        /// The value the store holds (`None`: absent).
        actual: Option<ObjectId>,
    },
    /// A ref name that stores refuse (see `validate_ref_name`).
    #[error("invalid ref name {name:?}: {reason}")]
    InvalidRefName {
        /// The name.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The remote store behind a caching store (`cache::CachingStore`) failed in
    /// `op`; `source` is the remote's own error. Nothing of the failed call was
    /// cached.
    #[error("remote store failed in {op}: {source}")]
    Remote {
        /// The store operation (`get_many`, `put_many`, `update_refs`, ...).
        op: &'static str,
        /// The remote's error.
        #[source]
        source: Box<StoreError>,
    },
    /// A failure injected by `FaultyStore` (tests only).
    #[error("injected fault at {op} call {call}")]
    Injected {
        /// The operation that failed.
        op: &'static str,
        /// Which call of all the wrapper's calls it was (1-based).
        call: u64,
    },
}

fn show(id: &Option<ObjectId>) -> String {
    id.map_or_else(|| "nothing".to_string(), |id| id.to_string())
}

impl StoreError {
    /// A backend error with its context.
    pub fn backend(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Backend {
            context: context.into(),
            source: source.into(),
        }
    }
}
