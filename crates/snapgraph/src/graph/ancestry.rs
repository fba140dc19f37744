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
        // The generation of every commit met so far (`None` if the source lacks it),
        // so that each parent edge is checked, not only the first one to reach it.
        let mut seen = hashbrown::HashMap::new();
        seen.insert(id, Some(first.generation));
        let mut heap = BinaryHeap::new();
        heap.push((first.generation, id, first.parents));
        while let Some((generation, cid, parents)) = heap.pop() {
            out.push(cid);
            if out.len() >= limit {
                break;
            }
            for p in parents {
                let parent_generation = match seen.get(&p) {
                    Some(Some(g)) => *g,
                    Some(None) => continue,
                    None => match load_commit(source, &p) {
                        Ok(parent) => {
                            seen.insert(p, Some(parent.generation));
                            heap.push((parent.generation, p, parent.parents));
                            parent.generation
                        }
                        Err(ObjectError::NotFound { .. }) => {
                            seen.insert(p, None);
                            continue;
                        }
                        Err(e) => return Err(e.into()),
                    },
                };
                if parent_generation >= generation {
                    return Err(GraphError::Generation {
                        id: cid,
                        generation,
                        parent: p,
                        parent_generation,
                    });
                }
            }
        }
        Ok(out)
    }
}
