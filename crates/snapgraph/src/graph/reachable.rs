//! Reachability: what a commit needs, what a history needs, and what is missing.

use super::{GraphError, SnapshotGraph};
use crate::id::ObjectId;
use crate::object::{check, fetch_many, load, refs_of, verify, ObjectError, ObjectKind, Seen};
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
    /// Each call re-reads everything present; a fetch loop that calls it round after
    /// round should use [`CheckoutPlan`], which resumes where the last round stopped.
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
    /// restored
    ///     .checkout(commit.id(), &local, CheckoutPolicy::default())?
    ///     .verify(|_| None)?; // drive the drift check (nothing recorded here)
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    pub fn plan_checkout<S: ObjectSource + ?Sized>(
        id: ObjectId,
        source: &S,
    ) -> Result<Vec<ObjectId>, GraphError> {
        CheckoutPlan::new(id).missing(source)
    }
}

/// [`SnapshotGraph::plan_checkout`] that remembers where it stopped: each call to
/// [`missing`](Self::missing) explores only from the objects the previous call found
/// missing, so a whole fetch loop reads each object once, instead of re-walking
/// everything present every round.
///
/// ```
/// use snapgraph::graph::reachable::CheckoutPlan;
/// use snapgraph::{CommitOptions, Workspace};
/// use std::collections::HashMap;
///
/// let mut ws = Workspace::new();
/// ws.write("/a/b.txt", vec![1u8; 50_000])?;
/// let commit = ws.commit(CommitOptions::new())?;
/// let remote: HashMap<_, _> = commit.objects().iter().map(|(i, b)| (*i, b.to_vec())).collect();
///
/// let mut local = HashMap::new();
/// let mut plan = CheckoutPlan::new(commit.id());
/// loop {
///     let missing = plan.missing(&local)?;
///     if missing.is_empty() { break; }
///     for id in missing { local.insert(id, remote[&id].clone()); }
/// }
/// assert_eq!(local.len(), remote.len());
/// # Ok::<(), snapgraph::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct CheckoutPlan {
    root: ObjectId,
    /// Objects to look at next round (missing last time), with their kinds.
    pending: Vec<(ObjectId, ObjectKind)>,
    /// Every object ever queued, with its kind, so shared subtrees are explored once
    /// and an id referenced as two kinds is refused.
    seen: Seen,
}

impl CheckoutPlan {
    /// A plan for checking out commit `id`.
    pub fn new(id: ObjectId) -> Self {
        let mut seen = Seen::default();
        let _first = seen.first(id, ObjectKind::Commit);
        Self {
            root: id,
            pending: vec![(id, ObjectKind::Commit)],
            seen,
        }
    }

    /// Whether the last call found nothing missing.
    pub fn is_done(&self) -> bool {
        self.pending.is_empty()
    }

    /// The objects still missing below those found since the last call. Objects
    /// present are verified as they are read; chunks are only asked for by
    /// [`contains`](ObjectSource::contains). After an error the plan starts over from
    /// the commit, so nothing is skipped.
    pub fn missing<S: ObjectSource + ?Sized>(
        &mut self,
        source: &S,
    ) -> Result<Vec<ObjectId>, GraphError> {
        let result = self.round(source);
        if result.is_err() {
            *self = Self::new(self.root);
        }
        result
    }

    /// One round, a level of the object graph at a time: each level's objects are
    /// read in one batched read ([`ObjectSource::get_many`]) and its chunks asked for
    /// in one [`ObjectSource::contains_many`], so a round costs calls proportional to
    /// the graph's depth, not its size.
    fn round<S: ObjectSource + ?Sized>(&mut self, source: &S) -> Result<Vec<ObjectId>, GraphError> {
        let mut frontier = std::mem::take(&mut self.pending);
        let mut missing = Vec::new();
        while !frontier.is_empty() {
            let (chunks, objects): (Vec<_>, Vec<_>) = frontier
                .into_iter()
                .partition(|(_, kind)| *kind == ObjectKind::Chunk);
            for batch in chunks.chunks(PLAN_BATCH) {
                let ids: Vec<ObjectId> = batch.iter().map(|(id, _)| *id).collect();
                for (item, present) in batch.iter().zip(contains_many(source, &ids)?) {
                    if !present {
                        missing.push(*item);
                    }
                }
            }
            let mut next = Vec::new();
            for batch in objects.chunks(PLAN_BATCH) {
                let ids: Vec<ObjectId> = batch.iter().map(|(id, _)| *id).collect();
                for (&(oid, kind), stored) in batch.iter().zip(fetch_many(source, &ids)?) {
                    let Some(stored) = stored else {
                        missing.push((oid, kind));
                        continue;
                    };
                    let loaded = check(&oid, stored, kind, true)?;
                    for (child, ckind) in refs_of(&oid, kind, loaded.body(), false)? {
                        if self.seen.first(child, ckind)? {
                            next.push((child, ckind));
                        }
                    }
                }
            }
            frontier = next;
        }
        let ids = missing.iter().map(|(id, _)| *id).collect();
        self.pending = missing;
        Ok(ids)
    }
}

/// Ids asked for in one batched call by [`CheckoutPlan`].
const PLAN_BATCH: usize = 4096;

/// [`ObjectSource::contains_many`], checked to answer once per id; a batch error
/// names no object, so the ids are then asked one by one to find the one that fails.
fn contains_many<S: ObjectSource + ?Sized>(
    source: &S,
    ids: &[ObjectId],
) -> Result<Vec<bool>, ObjectError> {
    let answers = match source.contains_many(ids) {
        Ok(answers) => answers,
        Err(_) => ids
            .iter()
            .map(|id| {
                source
                    .contains(id)
                    .map_err(|source| ObjectError::Source { id: *id, source })
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    if answers.len() != ids.len() {
        return Err(ObjectError::Source {
            id: ids[0],
            source: format!(
                "contains_many answered {} items for {} ids",
                answers.len(),
                ids.len()
            )
            .into(),
        });
    }
    Ok(answers)
}

/// Iterative post-order walk: children before parents, each object once, verified.
fn walk<S: ObjectSource + ?Sized>(
    id: ObjectId,
    source: &S,
    parents: bool,
) -> Result<Vec<ObjectId>, GraphError> {
    let mut out = Vec::new();
    let mut seen = Seen::default();
    // (id, kind, children already pushed)
    let mut stack = vec![(id, ObjectKind::Commit, false)];
    while let Some((oid, kind, expanded)) = stack.pop() {
        if expanded {
            out.push(oid);
            continue;
        }
        if !seen.first(oid, kind)? {
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
            // Checked here too, not only when popped: a reference to an id already
            // walked under another kind must fail.
            if seen.contains(&child) {
                seen.first(child, ckind)?;
            } else {
                stack.push((child, ckind, false));
            }
        }
    }
    Ok(out)
}
