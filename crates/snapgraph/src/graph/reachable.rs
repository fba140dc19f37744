//! Reachability: what a commit needs, what a history needs, and what is missing.

use super::cuts::CutCheck;
use super::{GraphError, SnapshotGraph};
use crate::id::ObjectId;
use crate::object::manifest::{Manifest, ManifestWalk};
use crate::object::{check, fetch_many, sized_refs_of, ObjectError, ObjectKind, Ref, Seen};
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
    /// The tree and manifest nodes read so far, proven cut canonically once nothing
    /// is missing.
    cuts: CutCheck,
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
            cuts: CutCheck::default(),
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
                    let refs = sized_refs_of(&oid, kind, loaded.body(), false)?;
                    self.cuts.note_refs(oid, kind, &loaded.stored, &refs)?;
                    for r in refs {
                        if self.seen.first(r.id, r.kind)? {
                            next.push((r.id, r.kind));
                        }
                    }
                }
            }
            frontier = next;
        }
        if missing.is_empty() {
            // Everything is held: what checkout proves by rebuilding, proven once.
            std::mem::take(&mut self.cuts).check()?;
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

/// Chunks verified per batched read of [`walk`], at most, and the bytes they may hold
/// together (as their references record them).
const WALK_CHUNKS: usize = 1024;
const WALK_CHUNK_BYTES: u64 = 8 << 20;

/// The walk of [`SnapshotGraph::reachable`] and
/// [`reachable_history`](SnapshotGraph::reachable_history): breadth first, one level
/// of the object graph per batched read (commits, trees, capabilities and reads
/// objects in batches of [`PLAN_BATCH`]; chunks in batches of [`WALK_CHUNKS`] or
/// [`WALK_CHUNK_BYTES`]; the next level of every manifest being walked in one read),
/// so that a source with per-call latency costs round trips proportional to the
/// graph's depth, not its number of objects. Every object is verified; the kind of
/// every reference is checked, also of references to ids already met; manifests are
/// walked by the one manifest walker with its checks ([`ManifestWalk`]); every
/// chunk's length is checked against what references it; and a content root
/// referenced twice must be claimed the same size both times. Then the objects are
/// listed children before parents (a post-order of the references, in their order),
/// each once.
fn walk<S: ObjectSource + ?Sized>(
    id: ObjectId,
    source: &S,
    parents: bool,
) -> Result<Vec<ObjectId>, GraphError> {
    let mut w = Walk::default();
    let _first = w.seen.first(id, ObjectKind::Commit)?;
    let mut frontier = vec![(id, ObjectKind::Commit)];
    while !frontier.is_empty() || !w.manifests.is_empty() {
        let (chunks, objects): (Vec<_>, Vec<_>) = frontier
            .into_iter()
            .partition(|(_, kind)| *kind == ObjectKind::Chunk);
        let mut next = Vec::new();
        for batch in objects.chunks(PLAN_BATCH) {
            let ids: Vec<ObjectId> = batch.iter().map(|(id, _)| *id).collect();
            for (&(oid, kind), stored) in batch.iter().zip(fetch_many(source, &ids)?) {
                let stored = stored.ok_or(ObjectError::NotFound { id: oid })?;
                let loaded = check(&oid, stored, kind, true)?;
                let refs = sized_refs_of(&oid, kind, loaded.body(), parents)?;
                w.cuts.note_refs(oid, kind, &loaded.stored, &refs)?;
                w.follow(oid, refs, &mut next)?;
            }
        }
        let mut at = 0;
        while at < chunks.len() {
            let (mut end, mut bytes) = (at, 0u64);
            while end < chunks.len() && end - at < WALK_CHUNKS && bytes < WALK_CHUNK_BYTES {
                bytes = bytes.saturating_add(w.lens.get(&chunks[end].0).copied().unwrap_or(0));
                end += 1;
            }
            let ids: Vec<ObjectId> = chunks[at..end].iter().map(|(id, _)| *id).collect();
            for (cid, stored) in ids.iter().zip(fetch_many(source, &ids)?) {
                let stored = stored.ok_or(ObjectError::NotFound { id: *cid })?;
                // Chunks reference nothing: verified, not decoded.
                let loaded = check(cid, stored, ObjectKind::Chunk, true)?;
                let len = loaded.body().len() as u64;
                if w.lens.get(cid).is_some_and(|&claimed| claimed != len) {
                    return Err(ObjectError::malformed(
                        *cid,
                        ObjectKind::Chunk,
                        format!("{len} bytes where a reference says {}", w.lens[cid]),
                    )
                    .into());
                }
            }
            at = end;
        }
        w.manifest_level(source, &mut next)?;
        frontier = next;
    }
    std::mem::take(&mut w.cuts).check()?;
    Ok(w.post_order(id))
}

/// What [`walk`] keeps between levels.
#[derive(Default)]
struct Walk {
    /// Every id met, with its kind.
    seen: Seen,
    /// The references of every object read, in their order.
    children: hashbrown::HashMap<ObjectId, Vec<ObjectId>>,
    /// The length every reference to a chunk claims.
    lens: hashbrown::HashMap<ObjectId, u64>,
    /// The size every reference to a content root (a manifest's) claims.
    roots: hashbrown::HashMap<ObjectId, u64>,
    /// Manifests being walked.
    manifests: Vec<ManifestWalk>,
    /// The tree and manifest nodes read, proven cut canonically at the end.
    cuts: CutCheck,
}

impl Walk {
    /// Records `oid`'s references, checks their kinds and sizes, and queues those met
    /// for the first time (manifest roots start a manifest walk instead).
    fn follow(
        &mut self,
        oid: ObjectId,
        refs: Vec<Ref>,
        next: &mut Vec<(ObjectId, ObjectKind)>,
    ) -> Result<(), GraphError> {
        let mut kids = Vec::with_capacity(refs.len());
        for r in refs {
            kids.push(r.id);
            let first = self.seen.first(r.id, r.kind)?;
            match (r.kind, r.size) {
                (ObjectKind::Chunk, Some(size)) => self.claim_len(r.id, size)?,
                // A manifest's root (referenced by a file entry or the state);
                // its nodes are read by its walk.
                (ObjectKind::Manifest, Some(size)) => {
                    if let Some(&claimed) = self.roots.get(&r.id) {
                        if claimed != size {
                            return Err(ObjectError::malformed(
                                r.id,
                                ObjectKind::Manifest,
                                format!("referenced as {claimed} and as {size} bytes"),
                            )
                            .into());
                        }
                    } else {
                        self.roots.insert(r.id, size);
                        self.manifests.push(ManifestWalk::new(r.id, size));
                    }
                    continue;
                }
                _ => {}
            }
            if first {
                next.push((r.id, r.kind));
            }
        }
        self.children.insert(oid, kids);
        Ok(())
    }

    /// Records the length a reference claims for chunk `id`: every reference must
    /// claim the same.
    fn claim_len(&mut self, id: ObjectId, size: u64) -> Result<(), GraphError> {
        let claimed = *self.lens.entry(id).or_insert(size);
        if claimed != size {
            return Err(ObjectError::malformed(
                id,
                ObjectKind::Chunk,
                format!("referenced as {claimed} and as {size} bytes"),
            )
            .into());
        }
        Ok(())
    }

    /// Reads the next level of every manifest being walked in one batched read (each
    /// node once), feeds each walk its nodes, and queues the chunks of finished ones.
    fn manifest_level<S: ObjectSource + ?Sized>(
        &mut self,
        source: &S,
        next: &mut Vec<(ObjectId, ObjectKind)>,
    ) -> Result<(), GraphError> {
        if self.manifests.is_empty() {
            return Ok(());
        }
        let mut ids: Vec<ObjectId> = Vec::new();
        let mut nodes: hashbrown::HashMap<ObjectId, Manifest> = hashbrown::HashMap::new();
        for m in &self.manifests {
            for id in m.wanted() {
                if nodes.insert(*id, Manifest::Leaf(Vec::new())).is_none() {
                    ids.push(*id);
                }
            }
        }
        for batch in ids.chunks(PLAN_BATCH) {
            for (nid, stored) in batch.iter().zip(fetch_many(source, batch)?) {
                let stored = stored.ok_or(ObjectError::NotFound { id: *nid })?;
                let loaded = check(nid, stored, ObjectKind::Manifest, true)?;
                let node = Manifest::decode(nid, loaded.body())?;
                self.cuts
                    .note_refs(*nid, ObjectKind::Manifest, &loaded.stored, &[])?;
                if !self.children.contains_key(nid) {
                    // Child manifests are read by the walk; chunks are queued when
                    // met first (their lengths checked here).
                    let refs = sized_refs_of(nid, ObjectKind::Manifest, loaded.body(), false)?;
                    let mut kids = Vec::with_capacity(refs.len());
                    for r in refs {
                        kids.push(r.id);
                        let first = self.seen.first(r.id, r.kind)?;
                        if r.kind == ObjectKind::Chunk {
                            self.claim_len(r.id, r.size.unwrap_or(0))?;
                            if first {
                                next.push((r.id, r.kind));
                            }
                        }
                    }
                    self.children.insert(*nid, kids);
                }
                nodes.insert(*nid, node);
            }
        }
        let mut walking = Vec::with_capacity(self.manifests.len());
        for mut m in std::mem::take(&mut self.manifests) {
            let level: Vec<Manifest> = m.wanted().iter().map(|id| nodes[id].clone()).collect();
            if m.feed(level)?.is_none() {
                walking.push(m);
            }
        }
        self.manifests = walking;
        Ok(())
    }

    /// Every object met, children before parents, each once: the post-order of the
    /// references from `root`, in their order.
    fn post_order(&self, root: ObjectId) -> Vec<ObjectId> {
        let mut out = Vec::with_capacity(self.children.len() + self.lens.len());
        let mut done = hashbrown::HashSet::new();
        let mut stack = vec![(root, false)];
        while let Some((oid, expanded)) = stack.pop() {
            if expanded {
                out.push(oid);
                continue;
            }
            if !done.insert(oid) {
                continue;
            }
            stack.push((oid, true));
            if let Some(kids) = self.children.get(&oid) {
                stack.extend(
                    kids.iter()
                        .rev()
                        .filter(|k| !done.contains(*k))
                        .map(|k| (*k, false)),
                );
            }
        }
        out
    }
}
