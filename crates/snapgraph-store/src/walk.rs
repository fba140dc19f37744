//! Closure walks over a store, level by level with batched reads: what GC marks,
//! what verify checks.

use hashbrown::{HashMap, HashSet};
use snapgraph::object::references;
use snapgraph::{ObjectId, ObjectKind};

use crate::error::StoreError;
use crate::store::ObjectStore;

/// Ids per `get_many`/`has_many` call: large enough that a round trip per batch is
/// cheap next to the work, small enough to bound memory.
pub(crate) const BATCH: usize = 1_000;

/// The objects a walk has marked, with the kind they were first referenced as.
pub(crate) type Marked = HashMap<ObjectId, ObjectKind>;

/// A problem met while walking.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WalkProblem {
    /// A referenced object is absent.
    Missing {
        /// The absent object.
        id: ObjectId,
        /// An object referencing it (`None` for a root).
        referenced_by: Option<ObjectId>,
    },
    /// An object did not verify or decode, or has another kind than its referrer
    /// says.
    Invalid {
        /// The object.
        id: ObjectId,
        /// What is wrong.
        reason: String,
    },
    /// One id referenced as two kinds (a tree's id used as a file chunk, say): at
    /// most one of the references can be right, and checkout refuses the other.
    KindConflict {
        /// The object.
        id: ObjectId,
        /// The kind it was first referenced as.
        first: ObjectKind,
        /// The other kind.
        then: ObjectKind,
        /// The object making the second reference (`None` for a root).
        referenced_by: Option<ObjectId>,
    },
    /// Reachable from a ref (found by [`crate::verify()`]'s own walk) but not marked by
    /// the collector's walk: a collection would delete it. A bug in the collector.
    Unmarked {
        /// The object.
        id: ObjectId,
    },
}

impl WalkProblem {
    /// The object the problem is about.
    pub fn id(&self) -> ObjectId {
        match self {
            WalkProblem::Missing { id, .. }
            | WalkProblem::Invalid { id, .. }
            | WalkProblem::KindConflict { id, .. }
            | WalkProblem::Unmarked { id } => *id,
        }
    }
}

impl std::fmt::Display for WalkProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkProblem::Missing {
                id,
                referenced_by: Some(by),
            } => write!(f, "object {id} is missing (referenced by {by})"),
            WalkProblem::Missing { id, .. } => write!(f, "object {id} is missing"),
            WalkProblem::Invalid { id, reason } => write!(f, "object {id} is invalid: {reason}"),
            WalkProblem::KindConflict {
                id,
                first,
                then,
                referenced_by,
            } => {
                write!(f, "object {id} is referenced as a {first} and as a {then}")?;
                match referenced_by {
                    Some(by) => write!(f, " (by {by})"),
                    None => write!(f, " (by a ref)"),
                }
            }
            WalkProblem::Unmarked { id } => write!(
                f,
                "object {id} is reachable but the collector's marking misses it (a collection would delete it)"
            ),
        }
    }
}

/// Marks `id` as referenced as `kind` by `by`: `true` when it is new (to be
/// walked); a conflicting earlier kind is a [`WalkProblem::KindConflict`].
fn note(
    seen: &mut Marked,
    id: ObjectId,
    kind: ObjectKind,
    by: Option<ObjectId>,
    problems: &mut Vec<WalkProblem>,
) -> bool {
    match seen.entry(id) {
        hashbrown::hash_map::Entry::Vacant(v) => {
            v.insert(kind);
            true
        }
        hashbrown::hash_map::Entry::Occupied(o) => {
            let first = *o.get();
            if first != kind {
                problems.push(WalkProblem::KindConflict {
                    id,
                    first,
                    then: kind,
                    referenced_by: by,
                });
            }
            false
        }
    }
}

/// Marks the closure of `roots` (history included: commits' parents are followed)
/// into `seen`, reading every non-chunk object once, in batches of [`BATCH`]; chunks
/// are marked without being read. Objects already in `seen` are not walked again, so
/// a second call with more roots costs only what is new, but every reference to
/// them is checked against the kind they were marked as
/// ([`WalkProblem::KindConflict`]). Problems are reported, not fatal: the walk goes
/// on around them. Backend errors are fatal.
///
/// Of a commit in `hollow` (see [`crate::hollow`]) only the parents are followed;
/// such commits met are pushed to `met`, so that a caller can mark their
/// snapshots later should they stop being hollow.
///
/// `cancel` set stops it between batches with [`StoreError::Cancelled`].
pub(crate) fn mark(
    store: &dyn ObjectStore,
    roots: impl IntoIterator<Item = (ObjectId, ObjectKind)>,
    seen: &mut Marked,
    problems: &mut Vec<WalkProblem>,
    hollow: &HashSet<ObjectId>,
    met: &mut Vec<ObjectId>,
    cancel: &crate::Cancel,
) -> Result<u64, StoreError> {
    let mut level: Vec<(ObjectId, ObjectKind, Option<ObjectId>)> = Vec::new();
    for (id, kind) in roots {
        if note(seen, id, kind, None, problems) {
            level.push((id, kind, None));
        }
    }
    let mut read = 0u64;
    while !level.is_empty() {
        let mut next = Vec::new();
        for batch in level.chunks(BATCH) {
            if cancel.is_cancelled() {
                return Err(StoreError::Cancelled { op: "marking" });
            }
            let to_read: Vec<ObjectId> = batch
                .iter()
                .filter(|(_, kind, _)| *kind != ObjectKind::Chunk)
                .map(|(id, _, _)| *id)
                .collect();
            let before = problems.len();
            let got = read_batch(store, &to_read, problems)?;
            // Objects of this batch found invalid (not merely absent).
            let invalid: HashSet<ObjectId> = problems[before..].iter().map(|p| p.id()).collect();
            for (id, kind, parent) in batch {
                if *kind == ObjectKind::Chunk {
                    continue;
                }
                let Some(stored) = got.get(id) else {
                    if !invalid.contains(id) {
                        problems.push(WalkProblem::Missing {
                            id: *id,
                            referenced_by: *parent,
                        });
                    }
                    continue;
                };
                read += stored.len() as u64;
                match references(id, stored) {
                    Ok((actual, _)) if actual != *kind => problems.push(WalkProblem::Invalid {
                        id: *id,
                        reason: format!("is a {actual}, referenced as a {kind}"),
                    }),
                    Ok((actual, children)) => {
                        let is_hollow = actual == ObjectKind::Commit && hollow.contains(id);
                        if is_hollow {
                            met.push(*id);
                        }
                        for (child, ckind) in children {
                            if is_hollow && ckind != ObjectKind::Commit {
                                continue;
                            }
                            if note(seen, child, ckind, Some(*id), problems) {
                                next.push((child, ckind, Some(*id)));
                            }
                        }
                    }
                    Err(e) => problems.push(WalkProblem::Invalid {
                        id: *id,
                        reason: e.to_string(),
                    }),
                }
            }
        }
        level = next;
    }
    Ok(read)
}

/// `get_many` of a batch; a corrupt object fails the whole call in most adapters, so
/// on `Corrupt` the batch is re-read one object at a time to isolate it.
pub(crate) fn read_batch(
    store: &dyn ObjectStore,
    ids: &[ObjectId],
    problems: &mut Vec<WalkProblem>,
) -> Result<HashMap<ObjectId, Vec<u8>>, StoreError> {
    let mut out = HashMap::with_capacity(ids.len());
    match crate::store::ObjectStore::get_many(&store, ids) {
        Ok(got) => {
            for (id, bytes) in ids.iter().zip(got) {
                if let Some(b) = bytes {
                    out.insert(*id, b);
                }
            }
        }
        Err(StoreError::Corrupt { .. } | StoreError::BadDelta { .. }) => {
            for id in ids {
                match crate::store::ObjectStore::get_many(&store, std::slice::from_ref(id)) {
                    Ok(mut got) => {
                        if let Some(b) = got.pop().flatten() {
                            out.insert(*id, b);
                        }
                    }
                    Err(StoreError::Corrupt { id, reason }) => {
                        problems.push(WalkProblem::Invalid { id, reason })
                    }
                    Err(e @ StoreError::BadDelta { .. }) => problems.push(WalkProblem::Invalid {
                        id: *id,
                        reason: e.to_string(),
                    }),
                    Err(e) => return Err(e),
                }
            }
        }
        Err(e) => return Err(e),
    }
    Ok(out)
}
