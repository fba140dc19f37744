//! Reachability: what a commit needs, what a history needs, and what is missing.

use super::{refs_of, GraphError, SnapshotGraph};
use crate::id::ObjectId;
use crate::object::{load, verify, ObjectError, ObjectKind};
use crate::source::ObjectSource;

impl SnapshotGraph {
    /// Every object commit `id` needs to be restored (parents not followed), the
    /// commit included, each verified. Referenced objects come before the objects
    /// referencing them, the commit last: writing in this order keeps a store closed.
    /// A missing object is an error naming it.
    pub fn reachable<S: ObjectSource + ?Sized>(
        id: ObjectId,
        source: &S,
    ) -> Result<Vec<ObjectId>, GraphError> {
        walk(id, source, false)
    }

    /// Every object of `id`'s whole history (parents followed): what a garbage
    /// collector must keep for this commit. Same order and errors as
    /// [`reachable`](Self::reachable).
    pub fn reachable_history<S: ObjectSource + ?Sized>(
        id: ObjectId,
        source: &S,
    ) -> Result<Vec<ObjectId>, GraphError> {
        walk(id, source, true)
    }

    /// The objects still missing for a checkout of `id`, among those reachable
    /// through objects the source holds. Fetch them and call again until it returns
    /// nothing; then the checkout has everything.
    ///
    /// Each call reveals at least one more level of the object graph, so the number
    /// of rounds is at most its depth plus one: the commit, then for each directory
    /// level on the deepest path its tree levels (1 for directories under about 64
    /// entries, 2 up to about 4,000, 3 up to about 250,000), then the manifest levels
    /// of a large file (same growth, per 64 chunks), then chunks. Objects present are
    /// verified as they are read; chunks are only asked for by
    /// [`contains`](ObjectSource::contains).
    ///
    /// ```
    /// use snapgraph::{SnapshotGraph, Workspace, CommitOptions, CheckoutPolicy};
    /// use std::collections::HashMap;
    ///
    /// let mut ws = Workspace::new();
    /// ws.write("/a/b/c.txt", vec![7u8; 100_000])?;
    /// let commit = ws.commit(CommitOptions::new())?;
    /// let remote: HashMap<_, _> = commit.objects().iter().map(|(i, b)| (*i, b.to_vec())).collect();
    ///
    /// let mut local = HashMap::new();
    /// let mut rounds = 0;
    /// loop {
    ///     let missing = SnapshotGraph::plan_checkout(commit.id(), &local)?;
    ///     if missing.is_empty() { break; }
    ///     for id in missing { local.insert(id, remote[&id].clone()); }
    ///     rounds += 1;
    /// }
    /// assert!(rounds <= 8);
    /// let mut restored = Workspace::new();
    /// restored.checkout(commit.id(), &local, CheckoutPolicy::default())?;
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    pub fn plan_checkout<S: ObjectSource + ?Sized>(
        id: ObjectId,
        source: &S,
    ) -> Result<Vec<ObjectId>, GraphError> {
        let mut missing = Vec::new();
        let mut seen = hashbrown::HashSet::new();
        let mut stack = vec![(id, ObjectKind::Commit)];
        seen.insert(id);
        while let Some((oid, kind)) = stack.pop() {
            if kind == ObjectKind::Chunk {
                let present = source
                    .contains(&oid)
                    .map_err(|source| ObjectError::Source { id: oid, source })?;
                if !present {
                    missing.push(oid);
                }
                continue;
            }
            let loaded = match load(source, &oid, kind) {
                Ok(l) => l,
                Err(ObjectError::NotFound { .. }) => {
                    missing.push(oid);
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            for (child, ckind) in refs_of(&oid, kind, loaded.body(), false)?.into_iter().rev() {
                if seen.insert(child) {
                    stack.push((child, ckind));
                }
            }
        }
        Ok(missing)
    }
}

/// Iterative post-order walk: children before parents, each object once, verified.
fn walk<S: ObjectSource + ?Sized>(
    id: ObjectId,
    source: &S,
    parents: bool,
) -> Result<Vec<ObjectId>, GraphError> {
    let mut out = Vec::new();
    let mut seen = hashbrown::HashSet::new();
    // (id, kind, children already pushed)
    let mut stack = vec![(id, ObjectKind::Commit, false)];
    while let Some((oid, kind, expanded)) = stack.pop() {
        if expanded {
            out.push(oid);
            continue;
        }
        if !seen.insert(oid) {
            continue;
        }
        stack.push((oid, kind, true));
        if kind == ObjectKind::Chunk {
            // Chunks reference nothing: verify without decoding.
            let stored = source
                .get(&oid)
                .map_err(|source| ObjectError::Source { id: oid, source })?
                .ok_or(ObjectError::NotFound { id: oid })?;
            let (actual, _) = verify(&oid, &stored)?;
            if actual != kind {
                return Err(ObjectError::WrongKind {
                    id: oid,
                    expected: kind,
                    actual,
                }
                .into());
            }
            continue;
        }
        let loaded = load(source, &oid, kind)?;
        for (child, ckind) in refs_of(&oid, kind, loaded.body(), parents)?
            .into_iter()
            .rev()
        {
            if !seen.contains(&child) {
                stack.push((child, ckind, false));
            }
        }
    }
    Ok(out)
}
