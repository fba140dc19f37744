//! Closure walks over a store, level by level with batched reads: what GC marks,
//! what verify checks.

use hashbrown::{HashMap, HashSet};
use snapgraph::object::references;
use snapgraph::{ObjectId, ObjectKind};

use crate::error::StoreError;
use crate::store::Store;

/// Ids per `get_many`/`has_many` call: large enough that a round trip per batch is
/// cheap next to the work, small enough to bound memory.
pub(crate) const BATCH: usize = 1_000;

/// A problem met while walking.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

/// Marks the closure of `roots` (history included: commits' parents are followed)
/// into `seen`, reading every non-chunk object once, in batches of [`BATCH`]; chunks
/// are marked without being read. Objects already in `seen` are not walked again, so
/// a second call with more roots costs only what is new. Problems are reported, not
/// fatal: the walk goes on around them. Backend errors are fatal.
pub(crate) fn mark(
    store: &dyn Store,
    roots: impl IntoIterator<Item = (ObjectId, ObjectKind)>,
    seen: &mut HashSet<ObjectId>,
    problems: &mut Vec<WalkProblem>,
) -> Result<u64, StoreError> {
    let mut level: Vec<(ObjectId, ObjectKind, Option<ObjectId>)> = roots
        .into_iter()
        .filter(|(id, _)| seen.insert(*id))
        .map(|(id, kind)| (id, kind, None))
        .collect();
    let mut read = 0u64;
    while !level.is_empty() {
        let mut next = Vec::new();
        for batch in level.chunks(BATCH) {
            let to_read: Vec<ObjectId> = batch
                .iter()
                .filter(|(_, kind, _)| *kind != ObjectKind::Chunk)
                .map(|(id, _, _)| *id)
                .collect();
            let before = problems.len();
            let got = read_batch(store, &to_read, problems)?;
            // Objects of this batch found invalid (not merely absent).
            let invalid: HashSet<ObjectId> = problems[before..]
                .iter()
                .map(|p| match p {
                    WalkProblem::Missing { id, .. } | WalkProblem::Invalid { id, .. } => *id,
                })
                .collect();
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
                    Ok((_, children)) => {
                        for (child, ckind) in children {
                            if seen.insert(child) {
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
    store: &dyn Store,
    ids: &[ObjectId],
    problems: &mut Vec<WalkProblem>,
) -> Result<HashMap<ObjectId, Vec<u8>>, StoreError> {
    let mut out = HashMap::with_capacity(ids.len());
    match Store::get_many(&store, ids) {
        Ok(got) => {
            for (id, bytes) in ids.iter().zip(got) {
                if let Some(b) = bytes {
                    out.insert(*id, b);
                }
            }
        }
        Err(StoreError::Corrupt { .. }) => {
            for id in ids {
                match Store::get_many(&store, std::slice::from_ref(id)) {
                    Ok(mut got) => {
                        if let Some(b) = got.pop().flatten() {
                            out.insert(*id, b);
                        }
                    }
                    Err(StoreError::Corrupt { id, reason }) => {
                        problems.push(WalkProblem::Invalid { id, reason })
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Err(e) => return Err(e),
    }
    Ok(out)
}
