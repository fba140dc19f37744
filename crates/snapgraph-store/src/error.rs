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
    /// A delta record (stored against a base object, FORMAT.md section 12) cannot be
    /// read because of its base: absent, corrupt, in a loop, or a chain too deep.
    /// `id` is the delta, `base` the object it names.
    #[error("object {id} is stored as a delta of {base}, which {problem}")]
    BadDelta {
        /// The delta.
        id: ObjectId,
        /// Its base.
        base: ObjectId,
        /// What is wrong.
        problem: DeltaProblem,
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
    /// The caller cancelled the operation ([`crate::Cancel`]) during `op`: it
    /// stopped at a safe point. Operations that take a `Cancel` report it as their
    /// own variant ([`crate::GcError::Cancelled`], [`crate::SyncError::Cancelled`]).
    #[error("cancelled during {op}")]
    Cancelled {
        /// What the operation was doing.
        op: &'static str,
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

/// Why a delta record cannot be read ([`StoreError::BadDelta`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeltaProblem {
    /// The store does not hold the base.
    #[error("the store does not hold")]
    BaseMissing,
    /// The base is corrupt (its record does not decode or its bytes do not hash to
    /// its id).
    #[error("is corrupt: {reason}")]
    BaseCorrupt {
        /// What is wrong with the base.
        reason: String,
    },
    /// Following bases leads back to the delta.
    #[error("leads back to it (a cycle)")]
    Cycle,
    /// The delta records a depth of 0 or above the readers' limit (64).
    #[error("is at a depth of {depth}, outside 1..=64")]
    TooDeep {
        /// The depth the delta records.
        depth: u8,
    },
    /// The base's depth is not one less than the delta's.
    #[error("has depth {found}, not one less than the delta's")]
    BaseDepth {
        /// The base's recorded depth.
        found: u8,
    },
    /// The record was handed to a decoder that has no way to fetch bases.
    #[error("is needed to decode it (use codec::decode_many)")]
    NeedsBase,
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

/// What a retention rule could not accept (see `retention`; defined here, below
/// both `retention` and `repo`, whose [`RepoError`](crate::RepoError) carries it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RetentionError {
    /// No rule keeps anything: applying it would drop every candidate.
    #[error("no keep rule given (keep-last, keep-daily, keep-weekly, keep-monthly or keep-within): refusing to drop everything")]
    NoRule,
    /// A span that is not `1y2m3d4h`-like.
    #[error("invalid span {text:?}: expected numbers with units y, m, d, h (like 1y6m, 14d, 36h)")]
    InvalidSpan {
        /// The text given.
        text: String,
    },
}
