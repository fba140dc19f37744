//! Sync: copy exactly the objects a destination lacks, then move its ref.
//!
//! Stores keep one invariant (see [`Store`]): holding an object means holding
//! everything under it. Sync uses it both ways:
//!
//! - **Discovery, top-down.** Starting from the source ref's commit, each level of
//!   the object graph is asked of the destination in batched `has_many` calls (one
//!   round trip per 1,000 ids of a level). An object the destination holds is not
//!   descended into: a whole unchanged subtree, or the whole history under the
//!   destination's old tip, costs one id in one query. Absent objects are read from
//!   the source (chunks are not: they reference nothing) and their references form
//!   the next level. The cost follows what is new, not the history's size.
//! - **Writing, bottom-up.** Absent objects are written children first, in batches,
//!   so that the destination never holds an object without its closure, even if
//!   the sync is interrupted. An interrupted sync therefore resumes by running again:
//!   its discovery stops at everything already written.
//!
//! The ref moves last, by compare-and-swap from the destination's old value, only
//! as a fast-forward unless forced, and guarded against a concurrent garbage
//! collection of the destination like a commit is (see [`crate::gc`](mod@crate::gc)).

use std::num::NonZeroU64;
use std::time::Duration;

use hashbrown::{HashMap, HashSet};
use snapgraph::object::references;
use snapgraph::{ObjectId, ObjectKind, SnapshotGraph};

use crate::error::StoreError;
use crate::gc::Lease;
use crate::hollow::hollow_commits;
use crate::store::{validate_ref_name, RefUpdate, Store};
use crate::walk::BATCH;

/// Chunks fetched from the source per call (at most 64 KiB each).
const CHUNK_BATCH: usize = 128;

/// Which side of a sync an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The store copied from.
    Source,
    /// The store copied to.
    Destination,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Source => "source",
            Side::Destination => "destination",
        })
    }
}

/// What can stop a sync. Nothing moves on the destination unless the sync
/// completes; objects already written stay (they are complete subtrees) and make
/// the next attempt shorter.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    /// A store failed.
    #[error("{side} store: {source}")]
    Store {
        /// Which store.
        side: Side,
        /// Its error.
        #[source]
        source: StoreError,
    },
    /// The source has no such ref.
    #[error("the source has no ref {name}")]
    UnknownRef {
        /// The ref.
        name: String,
    },
    /// The source lacks an object its ref needs: its closure is incomplete.
    #[error("the source lacks object {id}, referenced by {referenced_by}")]
    MissingInSource {
        /// The absent object.
        id: ObjectId,
        /// The object referencing it.
        referenced_by: ObjectId,
    },
    /// An object read from the source did not verify or decode.
    #[error("object {id} from the source is invalid: {reason}")]
    Invalid {
        /// The object.
        id: ObjectId,
        /// What is wrong.
        reason: String,
    },
    /// One id is referenced as two kinds in the source's history (a tree's id used
    /// as a file chunk, say): the history cannot be checked out, so nothing is sent.
    #[error("object {id} is referenced as a {first} and as a {then} (by {referenced_by})")]
    KindConflict {
        /// The object.
        id: ObjectId,
        /// The kind it was first referenced as.
        first: ObjectKind,
        /// The other kind.
        then: ObjectKind,
        /// The object making the second reference.
        referenced_by: ObjectId,
    },
    /// The destination's ref is not an ancestor of the source's: moving it would
    /// drop commits from it. Use `force` to move it anyway.
    #[error("{name} has diverged: the destination is at {destination}, which is not an ancestor of the source's {source_tip}")]
    NotFastForward {
        /// The ref.
        name: String,
        /// The destination's value.
        destination: ObjectId,
        /// The source's value.
        source_tip: ObjectId,
    },
    /// The destination's ref moved during the sync.
    #[error("{name} moved on the destination during the sync (now {})", .actual.map_or("absent".to_string(), |a| a.to_string()))]
    RefMoved {
        /// The ref.
        name: String,
        /// Its value now.
        actual: Option<ObjectId>,
    },
    /// The caller cancelled the sync ([`SyncOptions::cancel`]): nothing moved on the
    /// destination and its writer's lease is released; objects written stay
    /// (complete subtrees), unreferenced until a collection, and shorten the next
    /// attempt.
    #[error("sync of {name} cancelled: nothing moved on the destination")]
    Cancelled {
        /// The ref.
        name: String,
    },
    /// A collection of the destination is sweeping and did not end within the wait.
    #[error("a garbage collection of the destination is sweeping (marker {marker})")]
    GcInProgress {
        /// The sweep marker.
        marker: ObjectId,
    },
}

fn src_err(source: StoreError) -> SyncError {
    SyncError::Store {
        side: Side::Source,
        source,
    }
}

fn dst_err(source: StoreError) -> SyncError {
    SyncError::Store {
        side: Side::Destination,
        source,
    }
}

/// Options of [`sync_with`].
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Move the destination's ref even if it is not an ancestor of the source's.
    pub force: bool,
    /// How long to wait for a sweeping collection of the destination.
    pub gc_wait: Duration,
    /// A shallow sync: only the last `depth` commits of the ref (the tip and the
    /// commits fewer than `depth` parent steps below it) are sent with their
    /// snapshots; older commits are sent as commit objects only and recorded
    /// hollow in the destination (see [`crate::hollow`]), so `log` and ancestry
    /// work there and a checkout of them is [`crate::RepoError::Pruned`]. Commits
    /// within the depth that the destination holds hollow are filled in from the
    /// source (a later, deeper sync completes an earlier shallow one). `None`
    /// (the default): every commit as the source holds it, and commits the
    /// destination holds hollow stay so.
    pub depth: Option<NonZeroU64>,
    /// Set, it stops the sync at its next safe point ([`crate::cancel`]): between
    /// discovery levels and batches of objects written, and while it waits for a
    /// sweep to end.
    pub cancel: crate::Cancel,
}

impl Default for SyncOptions {
    fn default() -> Self {
        Self {
            force: false,
            gc_wait: Duration::from_secs(60),
            depth: None,
            cancel: crate::Cancel::default(),
        }
    }
}

impl SyncOptions {
    /// These options with [`depth`](Self::depth) set (a shallow sync).
    pub fn with_depth(mut self, depth: NonZeroU64) -> Self {
        self.depth = Some(depth);
        self
    }

    /// These options with [`force`](Self::force) set.
    pub fn with_force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }
}

/// What a sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// The destination ref's value before.
    pub from: Option<ObjectId>,
    /// Its value now.
    pub to: Option<ObjectId>,
    /// Objects sent (absent from the destination).
    pub objects: usize,
    /// Their stored bytes.
    pub bytes: u64,
    /// Objects whose presence was asked of the destination.
    pub examined: usize,
    /// `has_many` round trips to the destination.
    pub queries: usize,
    /// Levels of the object graph discovery went through.
    pub levels: usize,
    /// Commits sent without their snapshots, now hollow in the destination.
    pub hollow: usize,
    /// Commits the destination held hollow whose snapshots were sent.
    pub filled: usize,
}

/// [`sync_with`] with default options.
pub fn sync(src: &dyn Store, dst: &dyn Store, name: &str) -> Result<SyncReport, SyncError> {
    sync_with(src, dst, name, &SyncOptions::default())
}

/// Copies what `dst` lacks of `src`'s ref `name` (history included), then moves
/// `dst`'s ref to the same commit. See the module docs.
pub fn sync_with(
    src: &dyn Store,
    dst: &dyn Store,
    name: &str,
    options: &SyncOptions,
) -> Result<SyncReport, SyncError> {
    sync_cancellable(src, dst, name, options).map_err(|e| match e {
        SyncError::Store {
            source: StoreError::Cancelled { .. },
            ..
        } => SyncError::Cancelled {
            name: name.to_string(),
        },
        e => e,
    })
}

fn sync_cancellable(
    src: &dyn Store,
    dst: &dyn Store,
    name: &str,
    options: &SyncOptions,
) -> Result<SyncReport, SyncError> {
    validate_ref_name(name).map_err(src_err)?;
    let tip = src
        .get_ref(name)
        .map_err(src_err)?
        .ok_or_else(|| SyncError::UnknownRef {
            name: name.to_string(),
        })?;
    // A first round without a lease where the destination writes objects and refs
    // at once (`crate::gc`, "Optimistic writers"): the collection token read before
    // discovery looks at the destination, and everything written in one step guarded
    // by it, when what is missing fits one write. Otherwise, or once a sweep got in
    // the way, rounds under a lease.
    if options.depth.is_none() && dst.writes_objects_with_refs() {
        let token = dst
            .get_ref_for_update(crate::gc::GC_TOKEN)
            .map_err(dst_err)?;
        if dst.get_ref(crate::gc::GC_SWEEP).map_err(dst_err)?.is_none() {
            match attempt_at_once(src, dst, name, tip, options, token) {
                Ok(Some(report)) => return Ok(report),
                // Too much for one write, or a sweep began: under a lease.
                Ok(None) => {}
                Err(SyncError::Store {
                    side: Side::Destination,
                    source: StoreError::RefConflict { name: n, .. },
                }) if Lease::is_protocol_ref(&n) => {}
                Err(e) => return Err(e),
            }
        }
    }
    loop {
        let lease = Lease::acquire_with(dst, options.gc_wait, &options.cancel)
            .map_err(dst_err)?
            .map_err(|marker| SyncError::GcInProgress { marker })?;
        if let Err(e) = dst.fence_leased(lease.token()) {
            lease.release(dst);
            return Err(dst_err(e));
        }
        match attempt(src, dst, name, tip, options, &lease) {
            Ok(report) => return Ok(report),
            // A collection of the destination began sweeping: what we relied on
            // may be gone. Run again under a new lease; discovery stops at
            // whatever survived.
            Err(SyncError::Store {
                side: Side::Destination,
                source: StoreError::RefConflict { name: n, .. },
            }) if Lease::is_protocol_ref(&n) => lease.release(dst),
            Err(e) => {
                lease.release(dst);
                return Err(e);
            }
        }
    }
}

/// What a sync found to do, once it looked at the destination.
enum Plan {
    /// Nothing to write: the destination holds it all, its ref where asked.
    Done(SyncReport),
    /// Objects to write and refs to move.
    Write {
        report: SyncReport,
        found: Box<Found>,
        updates: Vec<RefUpdate>,
        message: String,
    },
}

/// Reads the destination's ref, discovers what it lacks, checks the move is a
/// fast-forward (unless forced) and prepares the ref updates.
fn plan(
    src: &dyn Store,
    dst: &dyn Store,
    name: &str,
    tip: ObjectId,
    options: &SyncOptions,
) -> Result<Plan, SyncError> {
    let before = dst.get_ref(name).map_err(dst_err)?;
    let mut report = SyncReport {
        from: before,
        to: Some(tip),
        ..SyncReport::default()
    };
    if before == Some(tip) && options.depth.is_none() {
        return Ok(Plan::Done(report));
    }
    let found = discover(src, dst, tip, options, &mut report)?;
    if before == Some(tip) && found.absent.is_empty() && found.filled.is_empty() {
        return Ok(Plan::Done(report));
    }
    if let Some(old) = before {
        if !options.force && !is_ancestor(dst, &found.present_commits, tip, old) {
            return Err(SyncError::NotFastForward {
                name: name.to_string(),
                destination: old,
                source_tip: tip,
            });
        }
    }
    let mut updates = Vec::new();
    if before != Some(tip) {
        updates.push(RefUpdate::new(name, before, Some(tip)));
    }
    // The filled-in commits stop being hollow with the publication of their trees.
    updates.extend(crate::hollow::removal_updates(&found.filled));
    report.hollow = found.hollow.len();
    report.filled = found.filled.len();
    Ok(Plan::Write {
        report,
        found: Box::new(found),
        updates,
        message: format!("sync to {tip}"),
    })
}

/// [`StoreError::Cancelled`] (as the destination's, which [`sync_with`] reports as
/// [`SyncError::Cancelled`]) once the caller cancelled.
fn cancelled(options: &SyncOptions, op: &'static str) -> Result<(), SyncError> {
    match options.cancel.is_cancelled() {
        true => Err(dst_err(StoreError::Cancelled { op })),
        false => Ok(()),
    }
}

/// The publishing update's outcome, as the sync reports it.
fn published(name: &str, outcome: Result<(), StoreError>) -> Result<(), SyncError> {
    match outcome {
        Ok(()) => Ok(()),
        Err(StoreError::RefConflict {
            name: n, actual, ..
        }) if n == name => Err(SyncError::RefMoved { name: n, actual }),
        Err(e) => Err(dst_err(e)),
    }
}

/// One sync under a lease, released by the publishing update (or here, when there
/// is nothing to write).
fn attempt(
    src: &dyn Store,
    dst: &dyn Store,
    name: &str,
    tip: ObjectId,
    options: &SyncOptions,
    lease: &Lease,
) -> Result<SyncReport, SyncError> {
    let (mut report, found, mut updates, message) = match plan(src, dst, name, tip, options)? {
        Plan::Done(report) => {
            lease.clone().release(dst);
            return Ok(report);
        }
        Plan::Write {
            report,
            found,
            updates,
            message,
        } => (report, found, updates, message),
    };
    // Hollow records before the commit objects they excuse (see crate::hollow).
    crate::hollow::record(dst, &found.hollow).map_err(dst_err)?;
    write(src, tip, &found, options, &mut report, &mut |batch| {
        dst.put_many(batch).map_err(dst_err)?;
        Ok(true)
    })?;
    cancelled(options, "publishing")?;
    updates.extend(lease.release_updates());
    published(name, dst.update_refs(&updates, &message))?;
    Ok(report)
}

/// One sync without a lease, guarded by the collection token `token` read before
/// it looked at the destination: the missing objects and the ref moves in one
/// step ([`RefStore::update_refs_with_objects`]). `Ok(None)`, nothing written,
/// when they do not fit one write, hollow records are needed, or the destination
/// declines.
fn attempt_at_once(
    src: &dyn Store,
    dst: &dyn Store,
    name: &str,
    tip: ObjectId,
    options: &SyncOptions,
    token: Option<ObjectId>,
) -> Result<Option<SyncReport>, SyncError> {
    let (mut report, found, mut updates, message) = match plan(src, dst, name, tip, options)? {
        Plan::Done(report) => return Ok(Some(report)),
        Plan::Write {
            report,
            found,
            updates,
            message,
        } => (report, found, updates, message),
    };
    if !found.hollow.is_empty() || found.absent.len() > ONE_WRITE {
        return Ok(None);
    }
    // Everything in memory for one write, within the bounds of a commit's: the
    // source is read no further once they are passed.
    let mut objects: Vec<(ObjectId, Vec<u8>)> = Vec::new();
    let mut bytes = 0u64;
    write(src, tip, &found, options, &mut report, &mut |batch| {
        bytes += batch.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
        objects.extend(batch.iter().map(|(id, b)| (*id, b.to_vec())));
        Ok(bytes <= ONE_WRITE_BYTES)
    })?;
    if bytes > ONE_WRITE_BYTES {
        return Ok(None);
    }
    updates.push(RefUpdate::guard(crate::gc::GC_TOKEN, token));
    updates.push(RefUpdate::guard(crate::gc::GC_SWEEP, None));
    let objects: Vec<(ObjectId, &[u8])> = objects.iter().map(|(id, b)| (*id, &b[..])).collect();
    let bases = vec![None; objects.len()];
    match dst.update_refs_with_objects(&objects, &bases, &updates, &message) {
        Ok(false) => Ok(None),
        outcome => {
            published(name, outcome.map(|_| ()))?;
            Ok(Some(report))
        }
    }
}

/// Most objects, and bytes, a sync guarded by a token writes in its one step (a
/// per-turn sync's few); more go under a lease in batches.
const ONE_WRITE: usize = 1_000;
/// See [`ONE_WRITE`].
const ONE_WRITE_BYTES: u64 = 8 << 20;

/// What discovery found.
struct Found {
    /// Absent objects with their kinds, in discovery order.
    absent: Vec<(ObjectId, ObjectKind)>,
    /// Stored bytes of absent non-chunk objects.
    bytes: HashMap<ObjectId, Vec<u8>>,
    /// References of absent non-chunk objects.
    children: HashMap<ObjectId, Vec<ObjectId>>,
    /// Commits found present in the destination.
    present_commits: HashSet<ObjectId>,
    /// Absent commits sent without their snapshots.
    hollow: Vec<ObjectId>,
    /// Commits the destination holds hollow whose snapshots are sent.
    filled: Vec<ObjectId>,
}

fn discover(
    src: &dyn Store,
    dst: &dyn Store,
    tip: ObjectId,
    options: &SyncOptions,
    report: &mut SyncReport,
) -> Result<Found, SyncError> {
    let depth = options.depth;
    let mut found = Found {
        absent: Vec::new(),
        bytes: HashMap::new(),
        children: HashMap::new(),
        present_commits: HashSet::new(),
        hollow: Vec::new(),
        filled: Vec::new(),
    };
    // Hollow commits on each side: their snapshots are not there to send (source)
    // or may be filled in (destination, within the depth only).
    let src_hollow = hollow_commits(src).map_err(src_err)?;
    let dst_hollow = if depth.is_some() {
        hollow_commits(dst).map_err(dst_err)?
    } else {
        HashSet::new()
    };
    // Every id met, with the kind it was first referenced as: a second reference
    // as another kind is an error even when the id is not walked again.
    let mut seen: HashMap<ObjectId, ObjectKind> = HashMap::new();
    seen.insert(tip, ObjectKind::Commit);
    let mut level = vec![(tip, ObjectKind::Commit, tip)];
    while !level.is_empty() {
        // Only commits reference commits, so a commit's level (breadth first) is
        // its distance from the tip in parent steps.
        let distance = report.levels as u64;
        let deep = depth.is_some_and(|d| distance >= d.get());
        report.levels += 1;
        let mut next = Vec::new();
        for batch in level.chunks(BATCH) {
            cancelled(options, "discovery")?;
            let ids: Vec<ObjectId> = batch.iter().map(|(id, _, _)| *id).collect();
            report.examined += ids.len();
            report.queries += 1;
            let absent: HashSet<ObjectId> =
                dst.has_many(&ids).map_err(dst_err)?.into_iter().collect();
            // Absent objects are read to be sent and descended into; with a
            // depth, present commits within it too, to find hollow ones below.
            let to_read: Vec<ObjectId> = batch
                .iter()
                .filter(|(id, kind, _)| {
                    *kind != ObjectKind::Chunk
                        && (absent.contains(id)
                            || (depth.is_some() && !deep && *kind == ObjectKind::Commit))
                })
                .map(|(id, _, _)| *id)
                .collect();
            let got = if to_read.is_empty() {
                Vec::new()
            } else {
                crate::store::ObjectStore::get_many(&src, &to_read).map_err(src_err)?
            };
            let mut got: HashMap<ObjectId, Option<Vec<u8>>> =
                to_read.into_iter().zip(got).collect();
            for (id, kind, parent) in batch {
                let present = !absent.contains(id);
                if present && *kind == ObjectKind::Commit {
                    found.present_commits.insert(*id);
                }
                if present && (*kind != ObjectKind::Commit || depth.is_none() || deep) {
                    continue;
                }
                if !present {
                    found.absent.push((*id, *kind));
                }
                if *kind == ObjectKind::Chunk {
                    continue;
                }
                let stored = got.remove(id).flatten().ok_or(SyncError::MissingInSource {
                    id: *id,
                    referenced_by: *parent,
                })?;
                let (actual, refs) = references(id, &stored).map_err(|e| SyncError::Invalid {
                    id: *id,
                    reason: e.to_string(),
                })?;
                if actual != *kind {
                    return Err(SyncError::Invalid {
                        id: *id,
                        reason: format!("is a {actual}, referenced as a {kind}"),
                    });
                }
                // Which references to follow: of a commit sent hollow or a present
                // one (within the depth) that stays as it is, only the parents.
                let parents_only = *kind == ObjectKind::Commit
                    && if present {
                        !dst_hollow.contains(id) || src_hollow.contains(id)
                    } else {
                        deep || src_hollow.contains(id)
                    };
                if *kind == ObjectKind::Commit && present && !parents_only {
                    found.filled.push(*id);
                } else if *kind == ObjectKind::Commit && !present && parents_only {
                    found.hollow.push(*id);
                }
                let mut kids = Vec::with_capacity(refs.len());
                for (child, ckind) in refs {
                    if parents_only && ckind != ObjectKind::Commit {
                        continue;
                    }
                    // A present commit's parents are present: not written again.
                    if !(present && ckind == ObjectKind::Commit) {
                        kids.push(child);
                    }
                    match seen.entry(child) {
                        hashbrown::hash_map::Entry::Vacant(v) => {
                            v.insert(ckind);
                            next.push((child, ckind, *id));
                        }
                        hashbrown::hash_map::Entry::Occupied(o) if *o.get() != ckind => {
                            return Err(SyncError::KindConflict {
                                id: child,
                                first: *o.get(),
                                then: ckind,
                                referenced_by: *id,
                            });
                        }
                        hashbrown::hash_map::Entry::Occupied(_) => {}
                    }
                }
                found.children.insert(*id, kids);
                if !present {
                    found.bytes.insert(*id, stored);
                }
            }
        }
        level = next;
    }
    Ok(found)
}

/// Whether `old` is `tip` or one of its ancestors. Discovery saw every commit
/// reachable from `tip` down to the first ones the destination holds; `old` is
/// usually among those, else it is looked for below them
/// ([`SnapshotGraph::is_ancestor`]: only commits of a higher generation than
/// `old`'s are walked). A destination whose history cannot be read there (a
/// commit damaged or of a bad generation) proves nothing: the ref is taken as
/// diverged, as a commit it lacks leaves it.
fn is_ancestor(dst: &dyn Store, present: &HashSet<ObjectId>, tip: ObjectId, old: ObjectId) -> bool {
    old == tip
        || present.contains(&old)
        || SnapshotGraph::is_ancestor(old, present.iter().copied(), dst).unwrap_or(false)
}

/// Where [`write`] hands each batch of objects; `false` stops the writing.
type Sink<'a> = dyn FnMut(&[(ObjectId, &[u8])]) -> Result<bool, SyncError> + 'a;

/// Hands the absent objects to `put`, children first, in batches, until it says to
/// stop.
fn write(
    src: &dyn Store,
    tip: ObjectId,
    found: &Found,
    options: &SyncOptions,
    report: &mut SyncReport,
    put: &mut Sink<'_>,
) -> Result<(), SyncError> {
    let kinds: HashMap<ObjectId, ObjectKind> = found.absent.iter().copied().collect();
    // Iterative post-order over the absent objects from the tip.
    let mut order = Vec::with_capacity(found.absent.len());
    let mut done = HashSet::new();
    // From the tip, and from each filled-in commit (present, its snapshot absent).
    let filled: HashSet<ObjectId> = found.filled.iter().copied().collect();
    let mut stack = vec![(tip, false)];
    stack.extend(found.filled.iter().map(|c| (*c, false)));
    while let Some((id, expanded)) = stack.pop() {
        if expanded {
            if kinds.contains_key(&id) {
                order.push(id);
            }
            continue;
        }
        if !(kinds.contains_key(&id) || filled.contains(&id)) || !done.insert(id) {
            continue;
        }
        stack.push((id, true));
        if let Some(kids) = found.children.get(&id) {
            stack.extend(kids.iter().rev().map(|k| (*k, false)));
        }
    }

    let mut i = 0;
    while i < order.len() {
        cancelled(options, "writing objects")?;
        // A batch: up to BATCH objects, at most CHUNK_BATCH of them chunks.
        let mut end = i;
        let mut chunks = Vec::new();
        while end < order.len() && end - i < BATCH && chunks.len() < CHUNK_BATCH {
            if kinds[&order[end]] == ObjectKind::Chunk {
                chunks.push(order[end]);
            }
            end += 1;
        }
        let fetched = if chunks.is_empty() {
            Vec::new()
        } else {
            crate::store::ObjectStore::get_many(&src, &chunks).map_err(src_err)?
        };
        let mut chunk_bytes: HashMap<ObjectId, Vec<u8>> = HashMap::new();
        for (id, bytes) in chunks.iter().zip(fetched) {
            let bytes = bytes.ok_or(SyncError::MissingInSource {
                id: *id,
                referenced_by: tip,
            })?;
            // Chunks are not read during discovery: their kind is checked here (the
            // kind byte is covered by the id the source verified).
            if bytes.first() != Some(&ObjectKind::Chunk.byte()) {
                let actual = bytes.first().copied().and_then(ObjectKind::from_byte);
                return Err(SyncError::Invalid {
                    id: *id,
                    reason: match actual {
                        Some(k) => format!("is a {k}, referenced as a chunk"),
                        None => "has no valid kind byte, referenced as a chunk".to_string(),
                    },
                });
            }
            chunk_bytes.insert(*id, bytes);
        }
        let batch: Vec<(ObjectId, &[u8])> = order[i..end]
            .iter()
            .map(|id| {
                let b = found.bytes.get(id).or_else(|| chunk_bytes.get(id));
                (*id, b.map_or(&[][..], |b| &b[..]))
            })
            .collect();
        report.objects += batch.len();
        report.bytes += batch.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
        if !put(&batch)? {
            break;
        }
        i = end;
    }
    Ok(())
}
