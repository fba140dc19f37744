//! # snapgraph
//!
//! Content-addressed, verifiable history for in-memory workspaces. Commit after every
//! turn, check out any commit, fork, diff two points, and keep only what changed in a
//! key-value store you own.
//!
//! ```
//! use std::collections::HashMap;
//! use snapgraph::{CheckoutPolicy, CommitOptions, ObjectId, SnapshotGraph, Workspace};
//!
//! let mut store: HashMap<ObjectId, Vec<u8>> = HashMap::new();
//! let mut ws = Workspace::new();
//! ws.write("/log.txt", b"one\n")?;
//! ws.set_state(b"opaque interpreter state".to_vec());
//! let first = ws.commit(CommitOptions::new())?;
//! let first_id = first.id();
//! store.extend(first.into_objects());
//!
//! ws.write("/log.txt", b"one\ntwo\n")?;
//! let second = ws.commit(
//!     CommitOptions::new().parent(first_id).have(store.keys()).meta("message_id", "msg-2"),
//! )?;
//! let second_id = second.id();
//! store.extend(second.into_objects());
//!
//! let mut branch = Workspace::new();
//! // A checkout returns a `Restore`: drive its drift check before serving the files
//! // (`live(source)` gives a recorded external source's fingerprint now).
//! branch.checkout(first_id, &store, CheckoutPolicy::default())?.verify(|_source| None)?;
//! assert_eq!(branch.read("/log.txt")?, b"one\n");
//!
//! let diff = SnapshotGraph::diff(first_id, second_id, &store)?;
//! assert_eq!(diff.files_modified, vec!["/log.txt".to_string()]);
//! assert_eq!(SnapshotGraph::ancestry(second_id, &store, 100)?, vec![second_id, first_id]);
//! # Ok::<(), snapgraph::Error>(())
//! ```
//!
//! ## What the core does not do
//! No I/O: no files, network, clock or randomness. The caller passes bytes in
//! ([`Workspace::write`], [`Workspace::set_state`]) and persists what comes out
//! ([`Commit::into_objects`]); every read goes through an [`ObjectSource`] the caller
//! implements with one method.
//!
//! ## Panics
//! None on any input: bad paths, hostile stores and malformed objects produce typed
//! errors that name the path or object id. A panic is a bug.
//!
//! ## Layout
//! One module per concept: [`id`] (object ids), [`chunk`] (FastCDC parameters),
//! [`object`] (stored kinds and their canonical encoding), [`workspace`] (the
//! in-memory file system, commit and checkout), [`graph`] (diff, ancestry,
//! reachability, checkout planning), [`source`] (the store trait). `ARCHITECTURE.md`
//! is the map; `docs/FORMAT.md` specifies every byte.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod boundary;
pub mod chunk;
mod content;
pub mod drift;
mod emit;
pub mod graph;
pub mod id;
pub mod ingest;
pub mod limits;
pub mod object;
pub mod pack;
pub mod path;
mod pool;
pub mod source;
mod tree;
pub mod workspace;

pub use drift::{ContentDriftError, DriftCheck, DriftPolicy, DriftedSource, Restore};
pub use emit::{ObjectSet, ObjectSetIntoIter};
pub use graph::{Diff, GraphError, SnapshotGraph};
pub use id::{ObjectId, ParseIdError};
pub use limits::{LimitError, Limits};
pub use object::capability::CapabilityFingerprint;
pub use object::commit::CommitObject;
pub use object::reads::ExternalRead;
pub use object::{ObjectError, ObjectKind, FORMAT_VERSION};
pub use pack::{RestoreOptions, SnapshotError, SnapshotKey, SnapshotOptions};
pub use pool::BufferPool;
pub use source::{BoxError, EmptySource, ObjectSource};
pub use workspace::{
    default_parallelism, CheckoutError, CheckoutOptions, CheckoutPolicy, Commit, CommitError,
    CommitOptions, DirEntry, EntryKind, FsError, Metadata, PathError, Pieces, Workspace,
    PIECES_WINDOW,
};

/// Any error of this crate: each operation's error converts into it, so `?` works
/// across operations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file-system operation on a workspace failed.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// A commit failed.
    #[error(transparent)]
    Commit(#[from] CommitError),
    /// A checkout failed.
    #[error(transparent)]
    Checkout(#[from] CheckoutError),
    /// A history query failed.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// Loading an object failed.
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// A packed snapshot was refused.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// Recorded external content moved since the snapshot.
    #[error(transparent)]
    Drift(#[from] ContentDriftError),
    /// An id did not parse.
    #[error(transparent)]
    ParseId(#[from] ParseIdError),
}

impl From<PathError> for Error {
    fn from(e: PathError) -> Self {
        Error::Fs(FsError::InvalidPath(e))
    }
}
