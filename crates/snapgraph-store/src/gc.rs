//! Garbage collection: keep what refs and pins reach, delete the rest, and never
//! delete what a concurrent commit is about to reference.
//!
//! # The rule
//!
//! A commit may reuse any object the store holds (that is how a turn costs what it
//! changed), including objects no ref reaches yet or any more, and stores keep the
//! invariant "holding an object means holding its closure", which commits and syncs
//! rely on to skip whole subtrees. A collector deleting unreachable objects while a
//! writer is between "the store has X" and "my branch points at a commit using X"
//! would break both: the commit, and every object the writer writes above X. Clocks
//! cannot settle the race (no clock is shared), so the store's refs do:
//!
//! - **Leases.** Every writer ([`crate::Repo`] operations, [`crate::sync()`]) first
//!   creates a lease ref `snapgraph/lease/ID`, then looks at the store and writes its
//!   objects, then moves its branch and deletes its lease in one atomic update
//!   (except optimistic writers, below, on stores that write objects and refs at
//!   once).
//! - **The sweep marker and token.** `snapgraph/gc-sweep` exists exactly while a
//!   collector sweeps; `snapgraph/gc` holds a token every sweep changes. Creating a
//!   lease and publishing are both guarded by "no sweep, token unchanged".
//!
//! A collector marks everything reachable from refs and pins while writers run
//! freely. It then starts the sweep (token changed, marker created, atomically): from
//! here no lease can be created and no writer can publish. It waits until no lease
//! is left: writers that held one finish writing, fail their guarded publish, drop
//! their lease and wait for the sweep to end. With no lease left, nobody is writing
//! or can start, so the collector marks again from refs that moved since its first
//! pass, lists the objects, and deletes every unmarked one, referrers before what
//! they reference (so a collector killed midway still leaves every held object's
//! closure complete). Then it ends the sweep.
//!
//! **Progress.** A sweep makes every writer holding a lease start over, and a
//! writer waiting for a sweep to end sleeps between looks: against a collector
//! that starts its next run as soon as one ends, a writer could lose every time.
//! So a writer that finds a sweep running records that it waits
//! (`snapgraph/wait/ID`, allowed during a sweep: it grants nothing) and turns it
//! into its lease `snapgraph/lease/ID` in the same atomic update that takes the
//! lease. Before announcing a sweep, a collector waits (within its lease wait)
//! until every ID it saw as a lease or a wait has gone, that is, until those
//! writers published or gave up; writers that come later are let through by the
//! next run, so neither side can starve the other. A waiting writer renews its
//! wait (a new value) every [`WAIT_BEAT`]; a wait whose value stays the same for
//! [`GcOptions::wait_grace`] is a writer killed while waiting, and the collector
//! removes it (compare-and-swap on the value it saw) instead of waiting for it. A
//! wait grants nothing, so removing a live one is harmless: its writer registers
//! again, or takes its lease alone.
//!
//! Why it is safe: every object a writer relies on is either reachable from a ref
//! or was seen present by a writer holding a lease; a sweep deletes only after all
//! leases are gone, and every lease holder that overlapped a sweep fails to publish
//! and starts over (re-checking its closure under a new lease). Nothing depends on
//! time. A writer only waits while a sweep runs; a collector waits for leases.
//!
//! **Optimistic writers.** A store that writes objects and refs in one atomic step
//! ([`RefStore::writes_objects_with_refs`]: SQLite, PostgreSQL, memory) lets a writer skip the
//! lease. The writer reads the token, and checks that no sweep marker is set, before
//! it looks at the store; it then writes its objects and moves its refs in one
//! guarded step ([`RefStore::update_refs_with_objects`]: "token unchanged, no
//! sweep"). Why it is as safe as a lease: objects are deleted only while a sweep
//! runs, and every sweep changes the token when it begins and again when it ends,
//! tokens never repeating. So if the token is the one read before the writer looked,
//! no sweep began since, nothing the writer found was deleted, and its one write
//! lands whole before any later sweep marks (which then sees its refs). If the token
//! moved, the guarded step wrote nothing, and the writer goes on under a lease: a
//! lease granted under the token it read means nothing was deleted in between;
//! otherwise it checks its commit's closure first, exactly as after a sweep under a
//! lease. A writer never writes an object outside a guarded step, so none is
//! written while a sweep deletes (the invariant "holding an object means holding
//! its closure" stays true), and a writer that finds a sweep running takes a lease,
//! which waits. [`crate::Repo`] commits that fit one write (at most one batch of
//! objects, no chunk delta-encoded against another new one), snapshots, forks and
//! [`crate::sync()`]s of what fits one write (a sync that is not shallow) go this
//! way: one write transaction instead of three, which on a disk is two
//! `fsync`s fewer per turn. On such a store larger commits read the token the same
//! way and take the lease after looking, with the same check. A writer's first guarded step that a
//! sweep defeats is its last optimistic one, so a collector that loops cannot
//! starve it: the lease path's waiting guarantees progress.
//!
//! Hollow commits ([`crate::hollow`]) are marked without their snapshots: their
//! records are read before the first pass (a commit hollowed later keeps its
//! snapshot this time) and again once no lease is held, when a commit filled in
//! since (a deeper sync published its trees) gets its snapshot marked before
//! anything is deleted. Records of commits not kept are dropped after the deletion.
//!
//! A process killed while holding a lease (or mid-sweep) leaves its ref behind: a
//! collection then stops with [`GcError::LeasesHeld`] (and writers wait for a dead
//! sweep, then fail with [`crate::RepoError::GcInProgress`]). [`break_leases`] and
//! [`clear_marker`] remove them; call them only when no writer or collector runs.
//! A caller that wants to stop one (Ctrl-C) sets a [`crate::Cancel`] instead
//! ([`GcOptions::cancel`], [`crate::SyncOptions::cancel`], [`Lease::acquire_with`]):
//! the operation stops at its next safe point and takes its ref back first.

use std::time::{Duration, Instant};

use hashbrown::{HashMap, HashSet};
use snapgraph::object::references;
use snapgraph::{ObjectId, ObjectKind};

use crate::error::StoreError;
use crate::hollow::{hollow_commits, removal_updates};
use crate::store::{ObjectStore, RefStore, RefUpdate, Store};
use crate::walk::{mark, Marked, WalkProblem, BATCH};

/// Prefix of the refs snapgraph keeps for itself.
pub const RESERVED: &str = "snapgraph/";
/// The collection token, changed by every sweep.
pub const GC_TOKEN: &str = "snapgraph/gc";
/// Present while a sweep runs.
pub const GC_SWEEP: &str = "snapgraph/gc-sweep";
/// Prefix of writers' leases.
pub const LEASES: &str = "snapgraph/lease/";
/// Prefix of writers waiting for a sweep to end before they take a lease (the
/// lease gets the same id).
pub const WAITERS: &str = "snapgraph/wait/";

/// Why a collection stopped. The store is consistent after any of them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GcError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writers' leases were still held when the wait ended; nothing was deleted. A
    /// lease of a killed writer stays until [`break_leases`].
    #[error("{} writer lease(s) still held after waiting, nothing deleted (first: {})", .leases.len(), .leases[0])]
    LeasesHeld {
        /// The lease refs.
        leases: Vec<String>,
    },
    /// The caller cancelled the collection ([`GcOptions::cancel`]). Its sweep, if
    /// it had begun, was ended: writers go on. `deleted` objects were deleted
    /// (referrers before what they reference: every held object's closure is
    /// complete), the rest is left for the next collection.
    #[error("garbage collection cancelled: {deleted} objects deleted, the rest left for the next collection")]
    Cancelled {
        /// Objects deleted before it stopped.
        deleted: usize,
    },
    /// Another collection is sweeping.
    #[error("another garbage collection is sweeping (marker {marker})")]
    SweepInProgress {
        /// Its marker.
        marker: ObjectId,
    },
}

/// Options of [`collect_with`].
#[derive(Debug, Clone)]
pub struct GcOptions {
    /// Commits to keep (with their history) besides every ref's.
    pub pins: Vec<ObjectId>,
    /// How long to wait for writers' leases once the sweep has started.
    pub lease_wait: Duration,
    /// A writer's wait (`snapgraph/wait/ID`) whose value has not changed for this
    /// long is a dead writer's (a live one renews it every [`WAIT_BEAT`]): the
    /// collection removes it instead of waiting for it (10 s).
    pub wait_grace: Duration,
    /// Set, it stops the collection at its next safe point ([`crate::cancel`]):
    /// between batches while it marks or deletes, and while it waits for writers.
    pub cancel: crate::Cancel,
}

impl Default for GcOptions {
    fn default() -> Self {
        Self {
            pins: Vec::new(),
            lease_wait: Duration::from_secs(60),
            wait_grace: Duration::from_secs(10),
            cancel: crate::Cancel::default(),
        }
    }
}

/// How often a writer waiting for a sweep to end renews its wait ref (a new value),
/// so that collections can tell a live waiter from a dead one
/// ([`GcOptions::wait_grace`]).
pub const WAIT_BEAT: Duration = Duration::from_secs(1);

/// What a collection did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Objects deleted, referrers before what they reference.
    pub deleted: Vec<ObjectId>,
    /// Objects kept (reachable or pinned, and the delta bases below them).
    pub kept: usize,
    /// Of those, objects kept only because a kept delta record needs them as its base
    /// (FORMAT.md section 12).
    pub bases: usize,
    /// Refs marked from (including refs that moved during the collection).
    pub refs: usize,
    /// Problems met while marking (a ref whose closure is incomplete). Nothing
    /// below a missing object can be marked, so its absence is reported here; the
    /// collection still removes only unmarked objects.
    pub problems: Vec<WalkProblem>,
    /// Hollow commits met (kept, their snapshots not marked: see
    /// [`crate::hollow`]).
    pub hollow: usize,
    /// Hollow records dropped because their commit is gone.
    pub hollow_records_dropped: usize,
    /// Bytes of storage that held nothing an id names, removed
    /// ([`ObjectStore::remove_orphans`]: an S3 pack whose writer died before its
    /// index).
    pub orphan_bytes: u64,
}

/// [`collect_with`] keeping `pins` and waiting up to a minute for leases.
pub fn collect(store: &dyn Store, pins: &[ObjectId]) -> Result<GcReport, GcError> {
    collect_with(
        store,
        &GcOptions {
            pins: pins.to_vec(),
            ..GcOptions::default()
        },
    )
}

/// Collects garbage in `store`: marks from every ref (history included) and from
/// the pins, then deletes every other object. See the module docs for why it is
/// safe with concurrent writers.
pub fn collect_with(store: &dyn Store, options: &GcOptions) -> Result<GcReport, GcError> {
    collect_cancellable(store, options).map_err(|e| match e {
        GcError::Store(StoreError::Cancelled { .. }) => GcError::Cancelled { deleted: 0 },
        e => e,
    })
}

fn collect_cancellable(store: &dyn Store, options: &GcOptions) -> Result<GcReport, GcError> {
    let cancel = &options.cancel;
    let mut report = GcReport::default();
    let mut seen = Marked::new();

    // Phase 1: mark while writers run.
    let token = store.get_ref(GC_TOKEN)?;
    if let Some(marker) = store.get_ref(GC_SWEEP)? {
        return Err(GcError::SweepInProgress { marker });
    }
    let before = user_refs(store.list_refs("")?);
    // Hollow commits' snapshots are not marked. Read before marking: a commit
    // hollowed later keeps its snapshot this time (conservative); one filled in
    // later is marked again in the sweep.
    let hollow = hollow_commits(store)?;
    let mut met = Vec::new();
    let pinned = options.pins.iter().map(|id| (*id, ObjectKind::Commit));
    mark(
        store,
        roots(&before).chain(pinned),
        &mut seen,
        &mut report.problems,
        &hollow,
        &mut met,
        cancel,
    )?;

    // Writers holding a lease or waiting for one finish first (within the wait):
    // a sweep would make them start over, and a collector that loops could do so
    // for ever. Writers that come later are let through by the next collection.
    let deadline = Instant::now() + options.lease_wait;
    let_writers_through(store, deadline, options.wait_grace, cancel)?;
    if cancel.is_cancelled() {
        return Err(StoreError::Cancelled {
            op: "waiting for writers",
        }
        .into());
    }

    // Phase 2: announce the sweep; from here no lease is granted, nothing published.
    let marker = new_token(token);
    match store.update_refs(
        &[
            RefUpdate::new(GC_TOKEN, token, Some(marker)),
            RefUpdate::new(GC_SWEEP, None, Some(marker)),
        ],
        "gc: sweep begins",
    ) {
        Ok(()) => {}
        Err(StoreError::RefConflict { .. }) => {
            return Err(match store.get_ref(GC_SWEEP)? {
                Some(marker) => GcError::SweepInProgress { marker },
                // Only the token moved: another collection came and went. Its
                // sweep is over; this one can simply be run again.
                None => GcError::Store(StoreError::RefConflict {
                    name: GC_TOKEN.into(),
                    expected: token,
                    actual: store.get_ref(GC_TOKEN)?,
                }),
            });
        }
        Err(e) => {
            // The announcement may have landed with its reply lost: end it (nothing
            // was deleted), or its marker would block every writer.
            let _ = end_sweep(store, marker);
            return Err(e.into());
        }
    }
    let result = sweep(
        store,
        &before,
        (&mut seen, &mut met),
        &mut report,
        deadline,
        cancel,
    );
    // End the sweep even if it failed, so writers are not left waiting.
    let end = end_sweep(store, marker);
    result?;
    end?;
    report.kept = seen.len() + report.bases;
    Ok(report)
}

/// What a collection would keep of `roots` (commits, history included; hollow
/// commits' snapshots not): the marking alone, deleting nothing (for dry runs).
/// Problems met (a missing object) are left out of the set, not errors.
pub fn live_set(store: &dyn Store, roots: &[ObjectId]) -> Result<HashSet<ObjectId>, StoreError> {
    let hollow = hollow_commits(store)?;
    let mut seen = Marked::new();
    mark(
        store,
        roots.iter().map(|id| (*id, ObjectKind::Commit)),
        &mut seen,
        &mut Vec::new(),
        &hollow,
        &mut Vec::new(),
        &crate::Cancel::default(),
    )?;
    Ok(seen.into_keys().collect())
}

/// Ends the sweep announced with `marker` (a conflict: the marker was cleared by hand,
/// or never set). A failing store gets a few more tries, since a marker left behind
/// blocks every writer.
fn end_sweep(store: &dyn Store, marker: ObjectId) -> Result<(), StoreError> {
    let end_token = new_token(Some(marker));
    let mut end = Ok(());
    for attempt in 0..5u32 {
        end = store.update_refs(
            &[
                RefUpdate::new(GC_TOKEN, Some(marker), Some(end_token)),
                RefUpdate::new(GC_SWEEP, Some(marker), None),
            ],
            "gc: sweep ends",
        );
        match &end {
            Ok(()) => break,
            // An earlier try that failed may have landed (its reply lost).
            Err(StoreError::RefConflict { .. })
                if attempt > 0
                    && store.get_ref(GC_SWEEP)?.is_none()
                    && store.get_ref(GC_TOKEN)? == Some(end_token) =>
            {
                return Ok(());
            }
            Err(StoreError::RefConflict { .. }) => break,
            Err(_) => std::thread::sleep(Duration::from_millis(10 << attempt)),
        }
    }
    end
}

/// Waits until every writer holding a lease or waiting for one now has released
/// it (published, or given up), or until `deadline`; later writers are not waited
/// for, so a stream of writers cannot hold a collection off. A wait whose value
/// stays the same for `grace` belongs to a writer that died waiting (a live one
/// renews it every [`WAIT_BEAT`]): it is removed (by compare-and-swap on the value
/// seen, so a renewal in between keeps it) and not waited for. Nothing here is
/// needed for safety (the sweep still waits for every lease, and a wait grants
/// nothing), only for progress.
fn let_writers_through(
    store: &dyn RefStore,
    deadline: Instant,
    grace: Duration,
    cancel: &crate::Cancel,
) -> Result<(), StoreError> {
    // Each writer's id, with its wait's value (None: a lease) and when first seen.
    let ids = || -> Result<HashMap<String, Option<ObjectId>>, StoreError> {
        let mut ids = HashMap::new();
        for (name, _) in store.list_refs(LEASES)? {
            ids.insert(name[LEASES.len()..].to_string(), None);
        }
        for (name, value) in store.list_refs(WAITERS)? {
            ids.entry(name[WAITERS.len()..].to_string())
                .or_insert(Some(value));
        }
        Ok(ids)
    };
    let mut first: HashMap<String, (Option<ObjectId>, Instant)> = ids()?
        .into_iter()
        .map(|(id, value)| (id, (value, Instant::now())))
        .collect();
    let mut pause = Duration::from_millis(2);
    while !first.is_empty() && Instant::now() < deadline && !cancel.is_cancelled() {
        let now = ids()?;
        let mut expired = Vec::new();
        first.retain(|id, (value, since)| match now.get(id) {
            None => false,
            Some(current) if current != value => {
                *value = *current; // renewed (or turned into a lease)
                *since = Instant::now();
                true
            }
            Some(Some(stale)) if since.elapsed() >= grace => {
                expired.push((format!("{WAITERS}{id}"), *stale));
                false
            }
            Some(_) => true,
        });
        for (name, value) in expired {
            match store.delete_ref(&name, value, "gc: wait of a dead writer expired") {
                Ok(()) | Err(StoreError::RefConflict { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        if first.is_empty() {
            break;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
    Ok(())
}

fn user_refs(refs: Vec<(String, ObjectId)>) -> Vec<(String, ObjectId)> {
    refs.into_iter()
        .filter(|(n, _)| !n.starts_with(RESERVED))
        .collect()
}

fn roots(refs: &[(String, ObjectId)]) -> impl Iterator<Item = (ObjectId, ObjectKind)> + '_ {
    refs.iter().map(|(_, id)| (*id, ObjectKind::Commit))
}

fn sweep(
    store: &dyn Store,
    before: &[(String, ObjectId)],
    (seen, met): (&mut Marked, &mut Vec<ObjectId>),
    report: &mut GcReport,
    deadline: Instant,
    cancel: &crate::Cancel,
) -> Result<(), GcError> {
    // Wait for every writer that got a lease before the sweep began.
    let mut pause = Duration::from_millis(2);
    loop {
        let leases: Vec<String> = store
            .list_refs(LEASES)?
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        if leases.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            return Err(GcError::LeasesHeld { leases });
        }
        if cancel.is_cancelled() {
            return Err(GcError::Cancelled { deleted: 0 });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(200));
    }

    // Refs that moved while phase 1 marked: their commits were published before
    // the sweep began, so they are marked now (only what is new is walked).
    let after = user_refs(store.list_refs("")?);
    let moved: Vec<(String, ObjectId)> = after
        .iter()
        .filter(|r| !before.contains(r))
        .cloned()
        .collect();
    // Hollow records as they are now (nobody writes): a commit filled in since
    // the first pass (a deeper sync published its trees) gets its snapshot marked.
    let hollow = hollow_commits(store)?;
    let filled: Vec<ObjectId> = met
        .iter()
        .filter(|c| !hollow.contains(*c))
        .copied()
        .collect();
    met.retain(|c| hollow.contains(c));
    for c in &filled {
        seen.remove(c);
    }
    mark(
        store,
        roots(&moved).chain(filled.iter().map(|c| (*c, ObjectKind::Commit))),
        seen,
        &mut report.problems,
        &hollow,
        met,
        cancel,
    )?;
    report.refs = before.len() + moved.len();
    let met_set: HashSet<ObjectId> = met.iter().copied().collect();
    report.hollow = met_set.len();

    // A kept delta record needs its base (and the base's base): keep those too, even
    // when nothing reaches them any more. Nobody writes now, so the list is stable.
    let mut base_of: HashMap<ObjectId, ObjectId> = HashMap::new();
    store.for_each_delta(&mut |id, base| {
        base_of.insert(id, base);
        Ok(())
    })?;
    let mut all = Vec::new();
    store.for_each_id(&mut |id| {
        all.push(id);
        Ok(())
    })?;
    let mut bases: HashSet<ObjectId> = HashSet::new();
    for id in all.iter().filter(|id| seen.contains_key(*id)) {
        let mut cur = *id;
        while let Some(base) = base_of.get(&cur) {
            if seen.contains_key(base) || !bases.insert(*base) {
                break;
            }
            cur = *base;
        }
    }
    report.bases = bases.len();
    let doomed: Vec<ObjectId> = all
        .into_iter()
        .filter(|id| !seen.contains_key(id) && !bases.contains(id))
        .collect();
    let ordered = referrers_first(store, doomed, &base_of)?;
    let mut deleted = 0;
    for batch in ordered.chunks(BATCH) {
        if cancel.is_cancelled() {
            return Err(GcError::Cancelled { deleted });
        }
        store.delete_many(batch)?;
        deleted += batch.len();
    }
    report.deleted = ordered;
    // Nobody writes now: what no index names and its writer left long ago can go.
    report.orphan_bytes = store.remove_orphans()?;
    // Records of commits no longer held (deleted now, or never written by a sync
    // that stopped), after the objects: a record without its commit is harmless,
    // a commit without its snapshot and without a record would be damage.
    let stale: Vec<ObjectId> = hollow
        .iter()
        .filter(|c| !seen.contains_key(*c))
        .copied()
        .collect();
    for batch in stale.chunks(BATCH) {
        store.update_refs(
            &removal_updates(batch),
            "gc: hollow record of a deleted commit",
        )?;
    }
    report.hollow_records_dropped = stale.len();
    Ok(())
}

/// Orders objects to delete so that each comes before everything it references
/// (among them) and before its delta base (`base_of`): whatever prefix of the
/// deletion has happened, no remaining object misses a referenced one or its base.
/// Reads each object once; unreadable ones go first (they reference nothing anyone
/// can use).
fn referrers_first(
    store: &dyn ObjectStore,
    doomed: Vec<ObjectId>,
    base_of: &HashMap<ObjectId, ObjectId>,
) -> Result<Vec<ObjectId>, StoreError> {
    let set: HashSet<ObjectId> = doomed.iter().copied().collect();
    let mut children: HashMap<ObjectId, Vec<ObjectId>> = HashMap::new();
    let mut referenced = HashSet::new();
    for batch in doomed.chunks(BATCH) {
        let got = match crate::store::ObjectStore::get_many(&store, batch) {
            Ok(got) => got,
            // A corrupt object among them: read one by one, skipping the bad.
            Err(StoreError::Corrupt { .. } | StoreError::BadDelta { .. }) => batch
                .iter()
                .map(|id| {
                    Ok(
                        crate::store::ObjectStore::get_many(&store, std::slice::from_ref(id))
                            .ok()
                            .and_then(|mut v| v.pop().flatten()),
                    )
                })
                .collect::<Result<Vec<_>, StoreError>>()?,
            Err(e) => return Err(e),
        };
        for (id, bytes) in batch.iter().zip(got) {
            if let Some(base) = base_of.get(id).filter(|b| set.contains(*b)) {
                referenced.insert(*base);
                children.entry(*id).or_default().push(*base);
            }
            let Some(bytes) = bytes else { continue };
            if bytes.first() == Some(&ObjectKind::Chunk.byte()) {
                continue;
            }
            if let Ok((_, refs)) = references(id, &bytes) {
                let kids: Vec<ObjectId> = refs
                    .into_iter()
                    .map(|(c, _)| c)
                    .filter(|c| set.contains(c))
                    .collect();
                referenced.extend(kids.iter().copied());
                children.entry(*id).or_default().extend(kids);
            }
        }
    }
    // Reverse post-order from the objects nothing doomed references.
    let mut post = Vec::with_capacity(doomed.len());
    let mut done = HashSet::new();
    for root in doomed.iter().filter(|id| !referenced.contains(*id)) {
        let mut stack = vec![(*root, false)];
        while let Some((id, expanded)) = stack.pop() {
            if expanded {
                post.push(id);
                continue;
            }
            if !done.insert(id) {
                continue;
            }
            stack.push((id, true));
            if let Some(kids) = children.get(&id) {
                stack.extend(kids.iter().map(|k| (*k, false)));
            }
        }
    }
    // Objects only on reference cycles (impossible with hashes, but cheap to cover).
    post.extend(doomed.iter().filter(|id| !done.contains(*id)));
    post.reverse();
    Ok(post)
}

/// A writer's lease (see the module docs): held while the writer looks at the
/// store and writes; [`release_updates`](Self::release_updates) go into the
/// publishing ref update.
#[derive(Debug, Clone)]
pub struct Lease {
    name: String,
    value: ObjectId,
    token: Option<ObjectId>,
}

impl Lease {
    /// Takes a lease, waiting up to `wait` for a running sweep to end. The error
    /// carries the marker of a sweep that did not end in time.
    pub fn acquire(
        store: &dyn RefStore,
        wait: Duration,
    ) -> Result<Result<Self, ObjectId>, StoreError> {
        Self::acquire_with(store, wait, &crate::Cancel::default())
    }

    /// [`acquire`](Self::acquire), stopped by `cancel` while it waits for a sweep to
    /// end ([`StoreError::Cancelled`], its wait taken back).
    pub fn acquire_with(
        store: &dyn RefStore,
        wait: Duration,
        cancel: &crate::Cancel,
    ) -> Result<Result<Self, ObjectId>, StoreError> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(5);
        // One id from the wait to the lease: a collector lets both through.
        let value = new_token(None);
        let name = format!("{LEASES}{value}");
        let waiter = format!("{WAITERS}{value}");
        // The wait's current value and when it was set (renewed every WAIT_BEAT).
        let mut waiting: Option<(ObjectId, Instant)> = None;
        loop {
            // Possibly stale: the guard below checks it, and a conflict reads again.
            let token = store.get_ref_for_update(GC_TOKEN)?;
            let mut updates = vec![
                RefUpdate::new(name.clone(), None, Some(value)),
                RefUpdate::guard(GC_TOKEN, token),
                RefUpdate::guard(GC_SWEEP, None),
            ];
            if let Some((current, _)) = waiting {
                updates.push(RefUpdate::new(waiter.clone(), Some(current), None));
            }
            match store.update_refs(&updates, "lease") {
                Ok(()) => return Ok(Ok(Self { name, value, token })),
                // Our wait was broken by hand (`break_leases`) or expired by a
                // collector: take the lease alone.
                Err(StoreError::RefConflict { name: n, .. }) if n == waiter => {
                    waiting = None;
                    continue;
                }
                Err(StoreError::RefConflict { .. }) => {}
                Err(e) => {
                    // The write may have landed with its reply lost: take the lease
                    // back (best effort), or it would hold off every collection.
                    let _ = store.update_refs(
                        &[RefUpdate::new(name, Some(value), None)],
                        "lease not taken",
                    );
                    if let Some((current, _)) = waiting {
                        end_wait(store, &waiter, current);
                    }
                    return Err(e);
                }
            }
            match store.get_ref(GC_SWEEP)? {
                Some(marker) if start.elapsed() >= wait => {
                    if let Some((current, _)) = waiting {
                        end_wait(store, &waiter, current);
                    }
                    return Ok(Err(marker));
                }
                Some(_) => {
                    let renew = match waiting {
                        None => true,
                        Some((_, since)) => since.elapsed() >= WAIT_BEAT,
                    };
                    if renew {
                        // Say that we wait (and, renewing it, that we still live):
                        // the next collection lets us through before it sweeps
                        // again (else a collector that loops could start each sweep
                        // before we wake up, for ever).
                        let fresh = new_token(Some(value));
                        let expected = waiting.map(|(current, _)| current);
                        match store.update_refs(
                            &[RefUpdate::new(waiter.clone(), expected, Some(fresh))],
                            "wait for the sweep",
                        ) {
                            Ok(()) => waiting = Some((fresh, Instant::now())),
                            // Expired by a collector that took us for dead, or
                            // broken by hand: register again next time round.
                            Err(StoreError::RefConflict { .. }) => waiting = None,
                            Err(e) => {
                                end_wait(store, &waiter, fresh); // its reply may be lost
                                if let Some(current) = expected {
                                    end_wait(store, &waiter, current);
                                }
                                return Err(e);
                            }
                        }
                    }
                    if cancel.is_cancelled() {
                        if let Some((current, _)) = waiting {
                            end_wait(store, &waiter, current);
                        }
                        return Err(StoreError::Cancelled {
                            op: "waiting for a sweep to end",
                        });
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                None => {} // the token moved between our reads: try again
            }
        }
    }

    /// The updates that release the lease inside a publishing ref update, guarded
    /// so that it applies only if no sweep began since the lease was taken.
    pub fn release_updates(&self) -> [RefUpdate; 3] {
        [
            RefUpdate::new(self.name.clone(), Some(self.value), None),
            RefUpdate::guard(GC_TOKEN, self.token),
            RefUpdate::guard(GC_SWEEP, None),
        ]
    }

    /// The collection token (`snapgraph/gc`) the lease was granted under: what
    /// [`ObjectStore::fence_leased`] is told.
    pub fn token(&self) -> Option<ObjectId> {
        self.token
    }

    /// Whether a ref conflict on `name` is about the lease protocol (a sweep began)
    /// rather than the caller's own refs.
    pub fn is_protocol_ref(name: &str) -> bool {
        name.starts_with(RESERVED)
    }

    /// Drops the lease without publishing (best effort: a lease left behind only
    /// delays collections until [`break_leases`]).
    pub fn release(self, store: &dyn RefStore) {
        let _ = store.update_refs(
            &[RefUpdate::new(self.name, Some(self.value), None)],
            "lease released",
        );
    }
}

/// Removes a writer's wait (best effort: one left behind only slows collections
/// down until [`break_leases`]).
fn end_wait(store: &dyn RefStore, waiter: &str, value: ObjectId) {
    let _ = store.update_refs(&[RefUpdate::new(waiter, Some(value), None)], "wait ends");
}

/// Deletes every lease (and every writer's wait for one). Only when no writer
/// runs: a live writer would then publish objects a collection may be deleting.
/// Returns the leases deleted.
pub fn break_leases(store: &dyn RefStore) -> Result<usize, StoreError> {
    for (name, id) in store.list_refs(WAITERS)? {
        match store.delete_ref(&name, id, "wait broken by hand") {
            Ok(()) | Err(StoreError::RefConflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let leases = store.list_refs(LEASES)?;
    for (name, id) in &leases {
        match store.delete_ref(name, *id, "lease broken by hand") {
            Ok(()) | Err(StoreError::RefConflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(leases.len())
}

/// A fresh token: unique, not secret.
fn new_token(previous: Option<ObjectId>) -> ObjectId {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = blake3::Hasher::new();
    h.update(b"snapgraph gc token");
    h.update(
        previous
            .as_ref()
            .map_or(&[0u8; 32][..], |p| &p.as_bytes()[..]),
    );
    h.update(&std::process::id().to_le_bytes());
    h.update(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.update(&nanos.to_le_bytes());
    ObjectId::from_bytes(*h.finalize().as_bytes())
}

/// Removes a sweep marker left by a collector that died. Only call it when no
/// collector runs: a live collector would go on deleting while writers publish.
pub fn clear_marker(store: &dyn RefStore) -> Result<bool, StoreError> {
    let Some(marker) = store.get_ref(GC_SWEEP)? else {
        return Ok(false);
    };
    let token = store.get_ref(GC_TOKEN)?;
    store.update_refs(
        &[
            RefUpdate::new(GC_SWEEP, Some(marker), None),
            RefUpdate::new(GC_TOKEN, token, Some(new_token(token))),
        ],
        "gc: marker cleared by hand",
    )?;
    Ok(true)
}
