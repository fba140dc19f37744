//! Queries over stored history: diff, ancestry, reachability and checkout planning.
//!
//! Each query is a function of [`SnapshotGraph`] beside a module of its types. They
//! read through an [`ObjectSource`], verify every object they read, and do no I/O of
//! their own.

pub mod ancestry;
pub mod cuts;
pub mod diff;
pub mod reachable;

pub use ancestry::Ancestors;
pub use cuts::CutCheck;
pub use diff::{Change, ChangeEntry, ChangeKind, Diff, Recorder, Visit};
pub use reachable::CheckoutPlan;

use crate::id::ObjectId;
use crate::limits::LimitError;
use crate::object::capability::CapabilityFingerprint;
use crate::object::commit::CommitObject;
use crate::object::reads::{ExternalRead, ReadsObject};
use crate::object::{load, ObjectError, ObjectKind};
use crate::source::ObjectSource;

/// Why a graph query failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// An object is missing, corrupt, of the wrong kind or malformed.
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// A commit's parent does not have a lower generation number, so the history is
    /// not what the commit claims.
    #[error(
        "commit {id} has generation {generation} but its parent {parent} has {parent_generation}"
    )]
    Generation {
        /// The commit.
        id: ObjectId,
        /// Its generation.
        generation: u64,
        /// The parent.
        parent: ObjectId,
        /// The parent's generation.
        parent_generation: u64,
    },
    /// A query would read more entries of a commit than
    /// [`Limits::max_files`](crate::Limits::max_files) allows (a tree that repeats
    /// subtrees can describe far more paths than it has objects), or met a path deeper
    /// or longer than any workspace path.
    #[error(transparent)]
    Limit(#[from] LimitError),
}

/// The history queries. All are associated functions taking the source to read.
#[derive(Debug, Clone, Copy, Default)]
pub struct SnapshotGraph;

impl SnapshotGraph {
    /// Reads and verifies a commit.
    pub fn commit<S: ObjectSource + ?Sized>(
        id: ObjectId,
        source: &S,
    ) -> Result<CommitObject, GraphError> {
        Ok(CommitObject::decode(
            &id,
            load(source, &id, ObjectKind::Commit)?.body(),
        )?)
    }

    /// The capability fingerprint a commit recorded, without restoring it.
    pub fn capabilities<S: ObjectSource + ?Sized>(
        id: ObjectId,
        source: &S,
    ) -> Result<Option<CapabilityFingerprint>, GraphError> {
        let commit = Self::commit(id, source)?;
        match commit.capabilities {
            None => Ok(None),
            Some(cid) => Ok(Some(CapabilityFingerprint::decode(
                &cid,
                load(source, &cid, ObjectKind::Capabilities)?.body(),
            )?)),
        }
    }

    /// The external reads a commit recorded, sorted by source, without restoring it.
    pub fn external_reads<S: ObjectSource + ?Sized>(
        id: ObjectId,
        source: &S,
    ) -> Result<Vec<ExternalRead>, GraphError> {
        let commit = Self::commit(id, source)?;
        read_list(commit.reads, source)
    }
}

pub(crate) fn read_list<S: ObjectSource + ?Sized>(
    id: Option<ObjectId>,
    source: &S,
) -> Result<Vec<ExternalRead>, GraphError> {
    match id {
        None => Ok(Vec::new()),
        Some(rid) => {
            Ok(ReadsObject::decode(&rid, load(source, &rid, ObjectKind::Reads)?.body())?.0)
        }
    }
}

pub(crate) fn load_commit<S: ObjectSource + ?Sized>(
    source: &S,
    id: &ObjectId,
) -> Result<CommitObject, ObjectError> {
    let loaded = load(source, id, ObjectKind::Commit)?;
    CommitObject::decode(id, loaded.body())
}
