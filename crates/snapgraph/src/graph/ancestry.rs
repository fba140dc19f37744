//! `SnapshotGraph::ancestry`: commits newest first, in topological order.

use std::collections::BinaryHeap;

use super::{load_commit, GraphError, SnapshotGraph};
use crate::id::ObjectId;
use crate::object::ObjectError;
use crate::source::ObjectSource;

impl SnapshotGraph {
    /// `id` and its ancestors, newest first, at most `limit` of them.
    ///
    /// The order is topological (a commit always comes before its parents, merges
    /// included): commits are taken highest generation first, ties broken by id, so
    /// the order is deterministic. The walk stops at ancestors the source lacks
    /// (a shallow store is fine); `id` itself must be present. A parent whose
    /// generation is not lower than its child's is an error.
    pub fn ancestry<S: ObjectSource + ?Sized>(
        id: ObjectId,
        source: &S,
        limit: usize,
    ) -> Result<Vec<ObjectId>, GraphError> {
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        let first = load_commit(source, &id)?;
        let mut seen = hashbrown::HashSet::new();
        seen.insert(id);
        let mut heap = BinaryHeap::new();
        heap.push((first.generation, id, first.parents));
        while let Some((generation, cid, parents)) = heap.pop() {
            out.push(cid);
            if out.len() >= limit {
                break;
            }
            for p in parents {
                if !seen.insert(p) {
                    continue;
                }
                let parent = match load_commit(source, &p) {
                    Ok(c) => c,
                    Err(ObjectError::NotFound { .. }) => continue,
                    Err(e) => return Err(e.into()),
                };
                if parent.generation >= generation {
                    return Err(GraphError::Generation {
                        id: cid,
                        generation,
                        parent: p,
                        parent_generation: parent.generation,
                    });
                }
                heap.push((parent.generation, p, parent.parents));
            }
        }
        Ok(out)
    }
}
