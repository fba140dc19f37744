//! `Repo`: branches, commits, checkouts, forks and tagged snapshots over any store.
//!
//! Ref layout: branches are `heads/NAME`, snapshots (tags) are `tags/NAME`, and
//! `snapgraph/` is reserved for the garbage collector's coordination refs (see
//! [`crate::gc`](mod@crate::gc)).
//!
//! Ordering is what makes a crash harmless: a commit's new objects are written, in
//! dependency order, before the branch moves, and the branch moves by
//! compare-and-swap. A crash at any point leaves at most unreferenced objects (which
//! the next GC removes), never a ref to something missing; a commit whose
//! [`Repo::commit`] returned is on its branch.

use std::collections::BTreeMap;
use std::time::Duration;

use snapgraph::{
    CheckoutError, CheckoutOptions, CheckoutPolicy, CommitError, CommitObject, CommitOptions,
    DriftPolicy, GraphError, ObjectId, SnapshotGraph, Workspace,
};

use crate::error::StoreError;
use crate::gc::Lease;
use crate::store::{validate_ref_name, RefUpdate, Store};
use crate::walk::BATCH;

/// Prefix of branch refs.
pub const HEADS: &str = "heads/";
/// Prefix of snapshot (tag) refs.
pub const TAGS: &str = "tags/";
/// Prefix of the refs [`Repo::reindex`] creates for commits no ref reached.
pub const LOST_FOUND: &str = "lost-found/";
/// Commit metadata key holding a commit message.
pub const MESSAGE_KEY: &str = "message";
/// Commit metadata key marking a snapshot commit: its value is the snapshot's name.
pub const TAG_KEY: &str = "snapgraph.tag";

/// Most bytes handed to one `put_many`.
const PUT_BYTES: u64 = 8 << 20;

/// What can go wrong in a [`Repo`] operation. Each variant names the ref, id or
/// snapshot involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RepoError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The workspace could not be committed.
    #[error(transparent)]
    Commit(#[from] CommitError),
    /// A commit could not be checked out.
    #[error(transparent)]
    Checkout(#[from] CheckoutError),
    /// The object graph is incomplete or invalid.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A garbage collection stopped.
    #[error(transparent)]
    Gc(#[from] crate::gc::GcError),
    /// A name that is no branch, snapshot or commit id the store holds.
    #[error("unknown revision {rev:?}: not a branch, snapshot or commit id in the store")]
    UnknownRevision {
        /// What was asked for.
        rev: String,
    },
    /// The branch is not where the workspace last saw it: someone else committed.
    /// Nothing moved and the workspace is unchanged: commit it to another branch
    /// (which forks), or check the branch out and redo the change.
    #[error("branch {branch} moved: the workspace is at {}, the branch at {}", show(.workspace), show(.branch_tip))]
    BranchMoved {
        /// The branch's ref.
        branch: String,
        /// The commit the workspace was at (its parent for this commit).
        workspace: Option<ObjectId>,
        /// Where the branch is now.
        branch_tip: Option<ObjectId>,
    },
    /// A branch or snapshot of that name exists.
    #[error("{name} already exists (at {id})")]
    AlreadyExists {
        /// The ref.
        name: String,
        /// What it points to.
        id: ObjectId,
    },
    /// Removing the snapshot would drop history other refs still build on.
    #[error("snapshot {name} is still needed by {}; remove with force to drop the name anyway", .needed_by.join(", "))]
    SnapshotInUse {
        /// The snapshot's ref.
        name: String,
        /// Refs whose history contains it.
        needed_by: Vec<String>,
    },
    /// A garbage collection is sweeping and did not finish within the wait.
    #[error("a garbage collection is sweeping (marker {marker}); if no collector runs, clear it with gc::clear_marker (snapgraph gc --clear-marker)")]
    GcInProgress {
        /// The sweep marker.
        marker: ObjectId,
    },
    /// Objects the commit reused were swept by a concurrent garbage collection before
    /// the branch could move. Check the branch out again and redo the change.
    #[error("commit {commit} lost {} reused objects to a concurrent garbage collection (first: {})", .missing.len(), .missing[0])]
    Swept {
        /// The commit that could not be published.
        commit: ObjectId,
        /// Objects it needs that are gone.
        missing: Vec<ObjectId>,
    },
    /// The commit is hollow (see [`crate::hollow`]): retention or a shallow sync let
    /// its snapshot go. Its history is there (`log` works), its files are not.
    #[error("commit {commit} was pruned: its history is kept but its snapshot is gone (hollow commit); check out a newer commit")]
    Pruned {
        /// The hollow commit.
        commit: ObjectId,
    },
    /// A retention policy keeps nothing by any rule.
    #[error(transparent)]
    Retention(#[from] crate::error::RetentionError),
    /// A ref name under the reserved `snapgraph/` prefix, or otherwise refused.
    #[error("{name:?} is reserved for snapgraph's own refs")]
    Reserved {
        /// The name.
        name: String,
    },
}

fn show(id: &Option<ObjectId>) -> String {
    id.map_or_else(|| "no commit".to_string(), |id| id.to_string())
}

/// Options of [`Repo::commit`].
#[derive(Debug, Clone, Default)]
pub struct RepoCommitOptions {
    /// Stored under [`MESSAGE_KEY`] in the commit's metadata.
    pub message: Option<String>,
    /// More metadata.
    pub meta: BTreeMap<String, String>,
    /// Parents besides the workspace's head (a merge).
    pub extra_parents: Vec<ObjectId>,
    /// Lets a workspace that was never checked out from the branch (no head, say an
    /// imported archive) become the branch's next commit, its parent the tip read at
    /// the start (still moved by compare-and-swap, so a concurrent commit is not
    /// lost). Without it such a commit onto an existing branch is refused.
    pub onto_tip: bool,
    /// Called as the write phase goes (see [`CommitProgress`]); set it with
    /// [`on_progress`](Self::on_progress).
    pub progress: Option<ProgressHook>,
}

/// How `Repo::commit_leased` publishes: the reflog message and the progress hook.
struct Publish<'a> {
    message: &'a str,
    progress: Option<&'a ProgressHook>,
}

/// How a commit's publishing write that failed ended, for the caller to go on.
enum Landed {
    /// The branch holds the commit already: an earlier round applied this very
    /// update and its reply was lost.
    Earlier,
    /// The branch moved elsewhere (to this value).
    Moved(Option<ObjectId>),
    /// A guard of the collection protocol failed: a sweep began.
    Swept,
    /// Anything else.
    Failed(RepoError),
}

impl Landed {
    /// Classifies `error`, from a write moving branch `name` to `commit`.
    fn of(error: RepoError, name: &str, commit: ObjectId) -> Self {
        match error {
            RepoError::Store(StoreError::RefConflict {
                name: n, actual, ..
            }) if n == name => {
                if actual == Some(commit) {
                    Landed::Earlier
                } else {
                    Landed::Moved(actual)
                }
            }
            RepoError::Store(StoreError::RefConflict { name: n, .. })
                if Lease::is_protocol_ref(&n) =>
            {
                Landed::Swept
            }
            e => Landed::Failed(e),
        }
    }
}

/// What a [`Repo::publish`] round writes: new objects (their closure held), then
/// the ref updates, with `out` returned on success.
struct Prepared<T> {
    objects: Vec<(ObjectId, Vec<u8>)>,
    updates: Vec<RefUpdate>,
    message: String,
    out: T,
}

/// A [`RepoCommitOptions::progress`] callback.
#[derive(Clone)]
pub struct ProgressHook(std::sync::Arc<dyn Fn(CommitProgress) + Send + Sync>);

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressHook")
    }
}

/// How far a commit's write phase is, as a value handed to the caller's hook: the
/// commit's objects are offered to the store in batches (those it holds are
/// skipped), and after each batch the hook hears how many were gone through. It
/// hears `done == 0` once before the first batch (the hashing is over then) and
/// `done == total` at the end. The library prints nothing; what to draw is the
/// caller's business.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommitProgress {
    /// Objects gone through so far.
    pub objects_done: usize,
    /// Objects the commit emitted (new and already held).
    pub objects_total: usize,
    /// Their bytes gone through so far.
    pub bytes_done: u64,
    /// Their bytes in all.
    pub bytes_total: u64,
}

impl RepoCommitOptions {
    /// Calls `hook` with the write phase's progress.
    #[must_use]
    pub fn on_progress(mut self, hook: impl Fn(CommitProgress) + Send + Sync + 'static) -> Self {
        self.progress = Some(ProgressHook(std::sync::Arc::new(hook)));
        self
    }
    /// Options with a message.
    pub fn message(message: impl Into<String>) -> Self {
        Self {
            message: Some(message.into()),
            ..Self::default()
        }
    }
}

/// What a commit wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The new commit.
    pub id: ObjectId,
    /// The branch's previous tip.
    pub previous: Option<ObjectId>,
    /// Objects written (new to the store).
    pub objects_written: usize,
    /// Their stored bytes (before the adapter's compression).
    pub bytes_written: u64,
}

/// What [`Repo::reindex`] rebuilt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReindexReport {
    /// Commits found among the objects.
    pub commits: usize,
    /// Snapshot refs recreated: name and snapshot commit.
    pub tags_restored: Vec<(String, ObjectId)>,
    /// Unreferenced head commits, now under `lost-found/`.
    pub lost_found: Vec<ObjectId>,
}

/// The objects a commit emitted, over the store: what the store will hold once they
/// are written again.
struct Overlay<'a, S> {
    objects: &'a snapgraph::ObjectSet,
    store: &'a S,
}

impl<S: Store> snapgraph::ObjectSource for Overlay<'_, S> {
    fn get(
        &self,
        id: &ObjectId,
    ) -> Result<Option<std::borrow::Cow<'_, [u8]>>, snapgraph::BoxError> {
        match self.objects.get_bytes(id) {
            Some(b) => Ok(Some(std::borrow::Cow::Borrowed(b))),
            None => self.store.get(id),
        }
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, snapgraph::BoxError> {
        Ok(self.objects.contains_id(id) || self.store.contains(id)?)
    }
    fn will_read(&self, ids: &[ObjectId]) {
        let below: Vec<ObjectId> = ids
            .iter()
            .filter(|id| !self.objects.contains_id(id))
            .copied()
            .collect();
        if !below.is_empty() {
            crate::store::ObjectStore::will_read(self.store, &below);
        }
    }
}

fn vec_source<'a>(id: &ObjectId, bytes: &'a [u8]) -> std::collections::HashMap<ObjectId, &'a [u8]> {
    std::collections::HashMap::from([(*id, bytes)])
}

/// A snapshot: a named, labelled commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// Its name (without `tags/`).
    pub name: String,
    /// The snapshot commit (the tag commit itself).
    pub id: ObjectId,
    /// The commit it labels.
    pub target: ObjectId,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

/// A store with branches, snapshots and the rules that keep them consistent.
#[derive(Debug)]
pub struct Repo<S> {
    store: S,
    gc_wait: Duration,
}

impl<S: Store> Repo<S> {
    /// A repository over `store`.
    pub fn new(store: S) -> Self {
        Self {
            store,
            gc_wait: Duration::from_secs(60),
        }
    }

    /// How long a commit waits for a sweeping garbage collection before
    /// [`RepoError::GcInProgress`] (default 60 s).
    pub fn set_gc_wait(&mut self, wait: Duration) {
        self.gc_wait = wait;
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Gives the store back.
    pub fn into_store(self) -> S {
        self.store
    }

    /// The ref name of branch `name` (`heads/NAME`); a name already starting with
    /// `heads/` is kept.
    pub fn branch_ref(name: &str) -> String {
        if name.starts_with(HEADS) {
            name.to_string()
        } else {
            format!("{HEADS}{name}")
        }
    }

    fn tag_ref(name: &str) -> String {
        if name.starts_with(TAGS) {
            name.to_string()
        } else {
            format!("{TAGS}{name}")
        }
    }

    fn user_ref(name: String) -> Result<String, RepoError> {
        validate_ref_name(&name)?;
        Ok(name)
    }

    /// Resolves a revision: a full ref name (`heads/main`), a branch name, a snapshot
    /// name, or a 64-digit commit id the store holds.
    pub fn resolve(&self, rev: &str) -> Result<ObjectId, RepoError> {
        let unknown = || RepoError::UnknownRevision {
            rev: rev.chars().take(300).collect(),
        };
        if rev.len() == 64 {
            if let Ok(id) = ObjectId::from_hex(rev) {
                if self.store.has_many(&[id])?.is_empty() {
                    return Ok(id);
                }
                return Err(unknown());
            }
        }
        for name in [rev.to_string(), Self::branch_ref(rev), Self::tag_ref(rev)] {
            if validate_ref_name(&name).is_err() || name.starts_with(crate::gc::RESERVED) {
                continue;
            }
            if let Some(id) = self.store.get_ref(&name)? {
                return Ok(id);
            }
        }
        Err(unknown())
    }

    /// The tip of branch `name`, if it exists.
    pub fn branch(&self, name: &str) -> Result<Option<ObjectId>, RepoError> {
        Ok(self
            .store
            .get_ref(&Self::user_ref(Self::branch_ref(name))?)?)
    }

    /// Every branch, by name (without `heads/`).
    pub fn branches(&self) -> Result<Vec<(String, ObjectId)>, RepoError> {
        Ok(self
            .store
            .list_refs(HEADS)?
            .into_iter()
            .map(|(n, id)| (n[HEADS.len()..].to_string(), id))
            .collect())
    }

    /// Commits the workspace to `branch` and moves the branch to it.
    ///
    /// The parent is the workspace's head (the commit it was checked out at or last
    /// committed), and a branch that does not exist yet starts there (a fork); a
    /// fresh workspace starts a new branch with a root commit. If the branch exists
    /// and is not at the workspace's head (someone else committed, or the workspace
    /// never saw the branch), nothing
    /// moves and the error is [`RepoError::BranchMoved`]. Only objects the store
    /// lacks are written, children before parents, before the ref moves. On any
    /// error the workspace is left as it was (its head included), so the call can
    /// simply be retried.
    pub fn commit(
        &self,
        ws: &mut Workspace,
        branch: &str,
        options: RepoCommitOptions,
    ) -> Result<Committed, RepoError> {
        self.commit_with(ws, branch, options, &mut None)
    }

    /// [`commit`](Self::commit) under `lease` if one is held (taken from it), else a
    /// new one.
    fn commit_with(
        &self,
        ws: &mut Workspace,
        branch: &str,
        options: RepoCommitOptions,
        lease: &mut Option<Lease>,
    ) -> Result<Committed, RepoError> {
        let name = Self::user_ref(Self::branch_ref(branch))?;
        let head = ws.head();
        // The publish's compare-and-swap checks the tip: a store's cached value will
        // do when it agrees with the workspace, else the store is asked.
        let mut tip = self.store.get_ref_for_update(&name)?;
        if tip != head {
            tip = self.store.get_ref(&name)?;
        }
        // Allowed: the workspace is at the tip, or the branch is new (a fresh
        // workspace starts it with a root commit, a checked-out one forks it). A
        // branch that moved is refused below, unless it moved to exactly the commit
        // this call makes: an earlier call published it and its reply was lost.
        let moved = tip.is_some() && head != tip && !(head.is_none() && options.onto_tip);
        let mut opts = CommitOptions::new().parent_source(&self.store);
        if head.is_none() && options.onto_tip {
            opts = opts.parents(tip).have_in(&self.store);
        }
        if head.is_some() {
            opts = opts.parents(head);
            // The workspace knows what it last committed or checked out; the store
            // answers for everything else as the commit walks changed paths only.
            opts = opts.have_in(&self.store);
        }
        opts = opts.parents(options.extra_parents.iter().copied());
        if let Some(m) = &options.message {
            opts = opts.meta(MESSAGE_KEY, m.clone());
        }
        for (k, v) in &options.meta {
            opts = opts.meta(k.clone(), v.clone());
        }
        let message = options.message.as_deref().unwrap_or("commit");
        let moved_to = if moved { tip } else { None };
        let how = Publish {
            message,
            progress: options.progress.as_ref(),
        };
        self.commit_leased(ws, name, tip, moved_to, opts, how, lease)
    }

    /// Commits a workspace with no history here (an unpacked snapshot, an imported
    /// archive: its head, if any, is ignored) as the root commit of a new branch
    /// `branch` (plus `options.extra_parents`), like [`commit`](Self::commit): under
    /// a writer's lease, objects the store lacks written before the branch is created
    /// by compare-and-swap from nothing. So a concurrent garbage collection can
    /// neither delete what the commit reuses before the branch exists nor leave the
    /// branch naming swept objects. An existing branch is
    /// [`RepoError::AlreadyExists`], and nothing moves.
    pub fn commit_new_branch(
        &self,
        ws: &mut Workspace,
        branch: &str,
        options: RepoCommitOptions,
    ) -> Result<Committed, RepoError> {
        self.commit_new_branch_with(ws, branch, options, &mut None)
    }

    /// [`commit_new_branch`](Self::commit_new_branch) under `lease` if one is held.
    fn commit_new_branch_with(
        &self,
        ws: &mut Workspace,
        branch: &str,
        options: RepoCommitOptions,
        lease: &mut Option<Lease>,
    ) -> Result<Committed, RepoError> {
        let name = Self::user_ref(Self::branch_ref(branch))?;
        // An existing branch is refused below, unless it holds exactly the commit
        // this call makes (an earlier call's reply was lost).
        let existing = self.store.get_ref(&name)?;
        let mut opts = CommitOptions::new()
            .parent_source(&self.store)
            .have_in(&self.store)
            .parents(options.extra_parents.iter().copied());
        if let Some(m) = &options.message {
            opts = opts.meta(MESSAGE_KEY, m.clone());
        }
        for (k, v) in &options.meta {
            opts = opts.meta(k.clone(), v.clone());
        }
        let message = options.message.as_deref().unwrap_or("new branch");
        let how = Publish {
            message,
            progress: options.progress.as_ref(),
        };
        match self.commit_leased(ws, name, None, existing, opts, how, lease) {
            Err(RepoError::BranchMoved {
                branch,
                branch_tip: Some(id),
                ..
            }) => Err(RepoError::AlreadyExists { name: branch, id }),
            other => other,
        }
    }

    /// Commits `ws` with `opts` under a writer's lease, writes what the store
    /// lacks and moves ref `name` from `tip` to the commit, retrying across a
    /// concurrent sweep (see [`commit`](Self::commit)). `moved_to`: the ref is not
    /// where this commit expects but at that commit; if that is the very commit this
    /// call makes, an earlier call published it and lost its reply, so this one
    /// succeeds with nothing written; else [`RepoError::BranchMoved`]. `held`: a
    /// lease already taken (by a [`Batched`] commit), used and consumed.
    #[allow(clippy::too_many_arguments)]
    fn commit_leased(
        &self,
        ws: &mut Workspace,
        name: String,
        tip: Option<ObjectId>,
        moved_to: Option<ObjectId>,
        opts: CommitOptions<'_>,
        how: Publish<'_>,
        held: &mut Option<Lease>,
    ) -> Result<Committed, RepoError> {
        let Publish { message, progress } = how;
        // What the commit finds in the store cannot be collected until it publishes
        // (see `crate::gc`): either a lease is taken before it looks (a batched
        // commit's, any commit while a sweep runs, every commit on a store that
        // cannot write objects and refs at once), or the collection token is read
        // before it looks and every write after checks that it has not moved
        // ("Optimistic writers").
        let mut lease = held.take();
        let seen = match lease {
            None if self.store.writes_objects_with_refs() => self.seen_token()?,
            _ => None,
        };
        if lease.is_none() && seen.is_none() {
            lease = Some(self.lease()?);
        }
        let drop_lease = |lease: Option<Lease>| {
            if let Some(l) = lease {
                l.release(&self.store);
            }
        };
        // Commit a copy (cheap: directories are shared copy-on-write) so that a
        // failure anywhere below leaves the caller's workspace as it was, ready for
        // a retry.
        let mut draft = ws.clone();
        let commit = match draft.commit(opts) {
            Ok(c) => c,
            Err(e) => {
                drop_lease(lease);
                return Err(e.into());
            }
        };
        if let Some(actual) = moved_to {
            drop_lease(lease);
            if actual != commit.id() {
                return Err(RepoError::BranchMoved {
                    branch: name,
                    workspace: ws.head(),
                    branch_tip: Some(actual),
                });
            }
            // What the caller's call would have reported: the tip it moved from.
            let previous = tip.and(ws.head());
            *ws = draft;
            return Ok(Committed {
                id: commit.id(),
                previous,
                objects_written: 0,
                bytes_written: 0,
            });
        }
        let mut written = None;
        // Delta hints against the parent's snapshot, and an order that writes every
        // chunk hinted against another new chunk after it (a base is durable first).
        // Only for a store that uses them: finding them reads the parent's trees.
        let hints = if self.store.keeps_deltas() {
            crate::similar::bases(&self.store, commit.id(), commit.objects())
        } else {
            hashbrown::HashMap::new()
        };
        let groups = write_order(commit.objects(), &hints);
        // A commit small enough for one write, with no chunk hinted against another
        // new one, is written and published in one atomic step guarded by the token
        // read above, where the store can.
        let mut sweep_began = false;
        if let Some(token) = seen {
            if groups.len() <= 1
                && commit.objects().len() <= BATCH
                && commit.objects().stored_bytes() <= PUT_BYTES
            {
                let objects = groups.first().map_or(&[][..], |g| &g[..]);
                let done = self.put_and_publish(
                    commit.objects(),
                    objects,
                    &hints,
                    progress,
                    RefUpdate::new(name.clone(), tip, Some(commit.id())),
                    token,
                    message,
                );
                let counts = match done {
                    // The store declined: the lease path below.
                    Ok(None) => None,
                    Ok(Some(counts)) => Some(counts),
                    Err(e) => match Landed::of(e, &name, commit.id()) {
                        Landed::Earlier => Some((0, 0)),
                        Landed::Moved(actual) => {
                            return Err(RepoError::BranchMoved {
                                branch: name,
                                workspace: tip,
                                branch_tip: actual,
                            })
                        }
                        // A sweep began since the token was read: nothing was
                        // written.
                        Landed::Swept => {
                            sweep_began = true;
                            None
                        }
                        Landed::Failed(e) => return Err(e),
                    },
                };
                if let Some((objects_written, bytes_written)) = counts {
                    *ws = draft;
                    return Ok(Committed {
                        id: commit.id(),
                        previous: tip,
                        objects_written,
                        bytes_written,
                    });
                }
            }
        }
        // The lease path: every write under a lease. A lease granted under the token
        // read before the commit looked at the store means no sweep began since, so
        // all it found is still there; under another token (or after a sweep began)
        // the closure is checked first, as after a sweep below.
        let mut lease = match lease {
            Some(l) => l,
            None => self.lease()?,
        };
        if sweep_began || seen.is_some_and(|t| t != lease.token()) {
            lease = self.recheck_closure(lease, &commit)?;
        }
        loop {
            let attempt = self
                .put_new(commit.objects(), &groups, &hints, progress)
                .and_then(|counts| {
                    written.get_or_insert(counts);
                    let mut updates = vec![RefUpdate::new(name.clone(), tip, Some(commit.id()))];
                    updates.extend(lease.release_updates());
                    Ok(self.store.update_refs(&updates, message)?)
                });
            let Err(e) = attempt else { break };
            match Landed::of(e, &name, commit.id()) {
                Landed::Earlier => {
                    lease.release(&self.store);
                    break;
                }
                Landed::Moved(actual) => {
                    lease.release(&self.store);
                    return Err(RepoError::BranchMoved {
                        branch: name,
                        workspace: tip,
                        branch_tip: actual,
                    });
                }
                Landed::Swept => {
                    // A collection began sweeping while we held the lease: what we
                    // reused may be gone. Let it finish, then, under a new lease,
                    // check the closure (our own objects can be written again) and
                    // go round.
                    lease.release(&self.store);
                    let fresh = self.lease()?;
                    lease = self.recheck_closure(fresh, &commit)?;
                }
                Landed::Failed(e) => {
                    lease.release(&self.store);
                    return Err(e);
                }
            }
        }
        *ws = draft;
        let (objects_written, bytes_written) = written.unwrap_or_default();
        Ok(Committed {
            id: commit.id(),
            previous: tip,
            objects_written,
            bytes_written,
        })
    }

    /// The collection token (`snapgraph/gc`) read before a writer looks at the
    /// store, when no sweep runs (`None` when one does: the writer then takes a
    /// lease, which waits for it). See [`crate::gc`](mod@crate::gc), "Optimistic writers".
    fn seen_token(&self) -> Result<Option<Option<ObjectId>>, RepoError> {
        let token = self.store.get_ref_for_update(crate::gc::GC_TOKEN)?;
        Ok(match self.store.get_ref(crate::gc::GC_SWEEP)? {
            Some(_) => None,
            None => Some(token),
        })
    }

    /// Under `lease`, checks that the store holds the closure of `commit` (its own
    /// objects count: they are written again): after a sweep that may have
    /// deleted what the commit reused. [`RepoError::Swept`] if not (the lease
    /// released).
    fn recheck_closure(
        &self,
        lease: Lease,
        commit: &snapgraph::Commit,
    ) -> Result<Lease, RepoError> {
        let overlay = Overlay {
            objects: commit.objects(),
            store: &self.store,
        };
        let missing = match self.missing_closure(commit.id(), &overlay) {
            Ok(m) => m,
            Err(e) => {
                lease.release(&self.store);
                return Err(e);
            }
        };
        if !missing.is_empty() {
            lease.release(&self.store);
            return Err(RepoError::Swept {
                commit: commit.id(),
                missing,
            });
        }
        Ok(lease)
    }

    /// Writes the objects of `order` the store lacks and moves the branch by
    /// `update` in one atomic step ([`crate::RefStore::update_refs_with_objects`]),
    /// guarded by the collection token `token` read before the commit looked at the
    /// store and by the absence of a sweep. `Ok(None)`: the store declined (nothing
    /// done). Returns how many objects and bytes were new.
    #[allow(clippy::too_many_arguments)]
    fn put_and_publish(
        &self,
        all: &snapgraph::ObjectSet,
        order: &[(&ObjectId, &[u8])],
        hints: &hashbrown::HashMap<ObjectId, ObjectId>,
        progress: Option<&ProgressHook>,
        update: RefUpdate,
        token: Option<ObjectId>,
        message: &str,
    ) -> Result<Option<(usize, u64)>, RepoError> {
        let report = |objects_done, bytes_done| {
            if let Some(h) = progress {
                (h.0)(CommitProgress {
                    objects_done,
                    objects_total: all.len(),
                    bytes_done,
                    bytes_total: all.stored_bytes(),
                });
            }
        };
        report(0, 0);
        let ids: Vec<ObjectId> = order.iter().map(|(i, _)| **i).collect();
        let absent: hashbrown::HashSet<ObjectId> = self.store.has_many(&ids)?.into_iter().collect();
        let new: Vec<(ObjectId, &[u8])> = order
            .iter()
            .filter(|(i, _)| absent.contains(*i))
            .map(|(i, b)| (**i, *b))
            .collect();
        let bases: Vec<Option<ObjectId>> =
            new.iter().map(|(id, _)| hints.get(id).copied()).collect();
        let updates = [
            update,
            RefUpdate::guard(crate::gc::GC_TOKEN, token),
            RefUpdate::guard(crate::gc::GC_SWEEP, None),
        ];
        if !self
            .store
            .update_refs_with_objects(&new, &bases, &updates, message)?
        {
            return Ok(None);
        }
        report(all.len(), all.stored_bytes());
        Ok(Some((
            new.len(),
            new.iter().map(|(_, b)| b.len() as u64).sum(),
        )))
    }

    /// Objects `source` lacks below commit `id` (its snapshot, not its history).
    fn missing_closure(
        &self,
        id: ObjectId,
        source: &dyn snapgraph::ObjectSource,
    ) -> Result<Vec<ObjectId>, RepoError> {
        let mut plan = snapgraph::graph::reachable::CheckoutPlan::new(id);
        Ok(plan.missing(source)?)
    }

    /// Takes a writer's lease, waiting while a collection sweeps.
    /// The store is fenced ([`ObjectStore::fence_leased`]) once the lease is held.
    fn lease(&self) -> Result<Lease, RepoError> {
        let lease = Lease::acquire(&self.store, self.gc_wait)?
            .map_err(|marker| RepoError::GcInProgress { marker })?;
        if let Err(e) = self.store.fence_leased(lease.token()) {
            lease.release(&self.store);
            return Err(e.into());
        }
        Ok(lease)
    }

    /// Writes the objects the store lacks, group by group and in the order given
    /// (children first), in batches, each with its delta hint, reporting each batch to
    /// `progress`; returns how many objects and bytes were new.
    fn put_new(
        &self,
        objects: &snapgraph::ObjectSet,
        groups: &[Vec<(&ObjectId, &[u8])>],
        hints: &hashbrown::HashMap<ObjectId, ObjectId>,
        progress: Option<&ProgressHook>,
    ) -> Result<(usize, u64), RepoError> {
        let mut count = 0;
        let mut bytes = 0;
        let mut seen = CommitProgress {
            objects_done: 0,
            objects_total: objects.len(),
            bytes_done: 0,
            bytes_total: objects.stored_bytes(),
        };
        let report = |p: CommitProgress| {
            if let Some(h) = progress {
                (h.0)(p);
            }
        };
        report(seen);
        let mut batch: Vec<(ObjectId, &[u8])> = Vec::new();
        let mut batch_bytes = 0u64;
        let mut flush = |batch: &mut Vec<(ObjectId, &[u8])>| -> Result<(), RepoError> {
            seen.objects_done += batch.len();
            seen.bytes_done += batch.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
            let ids: Vec<ObjectId> = batch.iter().map(|(i, _)| *i).collect();
            let absent: hashbrown::HashSet<ObjectId> =
                self.store.has_many(&ids)?.into_iter().collect();
            let new: Vec<(ObjectId, &[u8])> = batch
                .drain(..)
                .filter(|(i, _)| absent.contains(i))
                .collect();
            count += new.len();
            bytes += new.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
            if !new.is_empty() {
                let bases: Vec<Option<ObjectId>> =
                    new.iter().map(|(id, _)| hints.get(id).copied()).collect();
                self.store.put_many_with_bases(&new, &bases)?;
            }
            report(seen);
            Ok(())
        };
        for group in groups {
            for (id, b) in group {
                batch.push((**id, b));
                batch_bytes += b.len() as u64;
                if batch.len() >= BATCH || batch_bytes >= PUT_BYTES {
                    flush(&mut batch)?;
                    batch_bytes = 0;
                }
            }
            if !batch.is_empty() {
                flush(&mut batch)?;
                batch_bytes = 0;
            }
        }
        Ok((count, bytes))
    }

    /// A workspace at revision `rev` (branch, snapshot or id), every object verified.
    /// External reads are restored stale-marked ([`DriftPolicy::Off`]); use
    /// [`checkout_into`](Self::checkout_into) to choose.
    pub fn checkout(&self, rev: &str) -> Result<Workspace, RepoError> {
        let mut ws = Workspace::new();
        let _ = self.checkout_into(&mut ws, rev, CheckoutPolicy::default(), DriftPolicy::Off)?;
        Ok(ws)
    }

    /// Checks `rev` out into an existing workspace (keeping its limits and
    /// capabilities), all or nothing.
    pub fn checkout_into(
        &self,
        ws: &mut Workspace,
        rev: &str,
        policy: CheckoutPolicy,
        drift: DriftPolicy,
    ) -> Result<snapgraph::Restore, RepoError> {
        let id = self.resolve(rev)?;
        ws.checkout_with(
            id,
            &self.store,
            CheckoutOptions::new().policy(policy).drift(drift),
        )
        .map_err(|e| self.pruned_or(id, e.into()))
    }

    /// `error`, or [`RepoError::Pruned`] when it comes from checking out a hollow
    /// commit (asked only once a checkout failed: the hot path pays nothing).
    pub fn pruned_or(&self, commit: ObjectId, error: RepoError) -> RepoError {
        match crate::hollow::is_hollow(&self.store, commit) {
            Ok(true) => RepoError::Pruned { commit },
            _ => error,
        }
    }

    /// A workspace at revision `rev` whose files carry only their content ids
    /// ([`CheckoutOptions::shallow`](snapgraph::CheckoutOptions::shallow)): trees are read and verified, file content
    /// is not. Committing it back with [`commit`](Self::commit) after a few writes
    /// costs what changed; reading an unloaded file needs
    /// [`Workspace::load_content`].
    pub fn checkout_shallow(&self, rev: &str) -> Result<Workspace, RepoError> {
        let id = self.resolve(rev)?;
        let mut ws = Workspace::new();
        let _ = ws
            .checkout_with(
                id,
                &self.store,
                CheckoutOptions::new()
                    .policy(CheckoutPolicy::default())
                    .shallow(true)
                    .drift(DriftPolicy::Off),
            )
            .map_err(|e| self.pruned_or(id, e.into()))?;
        Ok(ws)
    }

    /// Rebuilds the refs that can be rebuilt from the objects present: every
    /// snapshot commit whose `tags/NAME` ref is gone gets it back (if the name is
    /// free), and every other commit that no ref reaches and no commit names as a
    /// parent gets a `lost-found/ID` ref, so nothing committed is lost to a deleted
    /// or damaged ref (and the next GC keeps it). Reads every object once.
    pub fn reindex(&self) -> Result<ReindexReport, RepoError> {
        let mut ids = Vec::new();
        self.store.for_each_id(&mut |id| {
            ids.push(id);
            Ok(())
        })?;
        let mut commits = BTreeMap::new();
        for batch in ids.chunks(BATCH) {
            for (id, bytes) in batch
                .iter()
                .zip(crate::store::ObjectStore::get_many(&self.store, batch)?)
            {
                let Some(bytes) = bytes else { continue };
                if bytes.first() != Some(&snapgraph::ObjectKind::Commit.byte()) {
                    continue;
                }
                if let Ok(c) = SnapshotGraph::commit(*id, &vec_source(id, &bytes)) {
                    commits.insert(*id, c);
                }
            }
        }
        let mut reached = hashbrown::HashSet::new();
        let mut stack: Vec<ObjectId> = self
            .store
            .list_refs("")?
            .into_iter()
            .filter(|(n, _)| !n.starts_with(crate::gc::RESERVED))
            .map(|(_, id)| id)
            .collect();
        while let Some(c) = stack.pop() {
            if reached.insert(c) {
                if let Some(commit) = commits.get(&c) {
                    stack.extend(commit.parents.iter().copied());
                }
            }
        }
        let parents: hashbrown::HashSet<ObjectId> = commits
            .values()
            .flat_map(|c| c.parents.iter().copied())
            .collect();
        let mut report = ReindexReport {
            commits: commits.len(),
            ..ReindexReport::default()
        };
        for (id, c) in &commits {
            if reached.contains(id) {
                continue;
            }
            if let Some(name) = c.meta.get(TAG_KEY) {
                let ref_name = Self::tag_ref(name);
                if validate_ref_name(&ref_name).is_ok()
                    && self.store.get_ref(&ref_name)?.is_none()
                    && self
                        .store
                        .compare_and_swap_ref(&ref_name, None, *id, "reindex: snapshot restored")
                        .is_ok()
                {
                    report.tags_restored.push((name.clone(), *id));
                    continue;
                }
            }
            if !parents.contains(id) {
                let ref_name = format!("{LOST_FOUND}{id}");
                match self.store.compare_and_swap_ref(
                    &ref_name,
                    None,
                    *id,
                    "reindex: unreferenced head",
                ) {
                    Ok(()) | Err(StoreError::RefConflict { .. }) => report.lost_found.push(*id),
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(report)
    }

    /// Creates branch `new_branch` at revision `at`. Refuses an existing name.
    pub fn fork(&self, new_branch: &str, at: &str) -> Result<ObjectId, RepoError> {
        let name = Self::user_ref(Self::branch_ref(new_branch))?;
        self.publish(|| {
            let id = self.resolve(at)?;
            SnapshotGraph::commit(id, &self.store)?;
            Ok(Prepared {
                objects: Vec::new(),
                updates: vec![RefUpdate::new(name.clone(), None, Some(id))],
                message: format!("fork at {at}"),
                out: id,
            })
        })
    }

    /// Writes the objects and applies the ref updates `op` prepares, guarded against
    /// a concurrent sweep (see [`crate::gc`](mod@crate::gc)): `op` runs after the
    /// collection token is read, and runs again if a sweep began before the refs
    /// could move. A creation that finds the ref taken is
    /// [`RepoError::AlreadyExists`].
    ///
    /// On a store that writes objects and refs at once, the first round takes no
    /// lease: objects and refs are written in one step guarded by the token read
    /// before `op` ran ([`crate::gc`](mod@crate::gc), "Optimistic writers"); a sweep that began in
    /// between makes the next rounds take a lease. Elsewhere every round takes one,
    /// and the objects are written before the refs move.
    fn publish<T>(&self, op: impl Fn() -> Result<Prepared<T>, RepoError>) -> Result<T, RepoError> {
        if self.store.writes_objects_with_refs() {
            if let Some(token) = self.seen_token()? {
                let attempt = op().and_then(|p| {
                    let mut updates = p.updates;
                    updates.push(RefUpdate::guard(crate::gc::GC_TOKEN, token));
                    updates.push(RefUpdate::guard(crate::gc::GC_SWEEP, None));
                    let objects: Vec<(ObjectId, &[u8])> =
                        p.objects.iter().map(|(id, b)| (*id, &b[..])).collect();
                    let bases = vec![None; objects.len()];
                    let done = self
                        .store
                        .update_refs_with_objects(&objects, &bases, &updates, &p.message);
                    Ok(match done {
                        Ok(true) => Some(p.out),
                        // Declined after saying it could: under a lease below.
                        Ok(false) => None,
                        Err(e) => match Self::already_applied(e, &updates) {
                            Ok(()) => Some(p.out),
                            // A sweep began: under a lease below.
                            Err(StoreError::RefConflict { name, .. })
                                if Lease::is_protocol_ref(&name) =>
                            {
                                None
                            }
                            Err(StoreError::RefConflict {
                                name,
                                expected: None,
                                actual: Some(id),
                            }) => return Err(RepoError::AlreadyExists { name, id }),
                            Err(e) => return Err(e.into()),
                        },
                    })
                });
                if let Some(out) = attempt? {
                    return Ok(out);
                }
            }
        }
        loop {
            let lease = self.lease()?;
            let attempt = op().and_then(|p| {
                let objects: Vec<(ObjectId, &[u8])> =
                    p.objects.iter().map(|(id, b)| (*id, &b[..])).collect();
                self.store.put_many(&objects)?;
                let mut updates = p.updates;
                updates.extend(lease.release_updates());
                match self.store.update_refs(&updates, &p.message) {
                    Ok(()) => Ok((p.out, true)),
                    // Done, with this round's lease still to drop.
                    Err(e) => Self::already_applied(e, &updates)
                        .map(|()| (p.out, false))
                        .map_err(RepoError::from),
                }
            });
            match attempt {
                Ok((out, true)) => return Ok(out),
                Ok((out, false)) => {
                    lease.release(&self.store);
                    return Ok(out);
                }
                Err(RepoError::Store(StoreError::RefConflict { name, .. }))
                    if Lease::is_protocol_ref(&name) =>
                {
                    lease.release(&self.store);
                }
                Err(RepoError::Store(StoreError::RefConflict {
                    name,
                    expected: None,
                    actual: Some(id),
                })) => {
                    lease.release(&self.store);
                    return Err(RepoError::AlreadyExists { name, id });
                }
                Err(e) => {
                    lease.release(&self.store);
                    return Err(e);
                }
            }
        }
    }

    /// `Ok` when `error` says a ref already holds what `updates` set it to: an
    /// earlier call applied them and its reply was lost (batches are atomic, so all
    /// of it applied); else the error.
    fn already_applied(error: StoreError, updates: &[RefUpdate]) -> Result<(), StoreError> {
        match error {
            StoreError::RefConflict {
                ref name, actual, ..
            } if !Lease::is_protocol_ref(name)
                && updates
                    .iter()
                    .any(|u| &u.name == name && u.changes() && u.new == actual) =>
            {
                Ok(())
            }
            e => Err(e),
        }
    }

    /// Deletes branch `name` if it is still at `expected`.
    pub fn delete_branch(&self, name: &str, expected: ObjectId) -> Result<(), RepoError> {
        let name = Self::user_ref(Self::branch_ref(name))?;
        Ok(self.store.delete_ref(&name, expected, "delete branch")?)
    }

    /// Commits `id` and its ancestors, newest first, at most `limit`.
    pub fn log(&self, rev: &str, limit: usize) -> Result<Vec<(ObjectId, CommitObject)>, RepoError> {
        let id = self.resolve(rev)?;
        // The core's iterator yields decoded commits: each is read once.
        SnapshotGraph::ancestors(id, &self.store)
            .take(limit)
            .map(|r| Ok(r?))
            .collect()
    }

    /// Records a snapshot: a commit labelled `labels` whose only parent is `at` and
    /// whose snapshot is `at`'s (so it restores exactly like `at`), under
    /// `tags/NAME`. Refuses an existing name.
    pub fn tag(
        &self,
        name: &str,
        at: &str,
        labels: BTreeMap<String, String>,
    ) -> Result<SnapshotInfo, RepoError> {
        let ref_name = Self::user_ref(Self::tag_ref(name))?;
        let short = ref_name[TAGS.len()..].to_string();
        self.publish(|| {
            let target = self.resolve(at)?;
            let base = SnapshotGraph::commit(target, &self.store)?;
            let mut meta = labels.clone();
            meta.insert(TAG_KEY.to_string(), short.clone());
            let tag = CommitObject {
                parents: vec![target],
                generation: base.generation + 1,
                meta,
                ..base
            };
            let (id, stored) = tag.to_stored();
            Ok(Prepared {
                objects: vec![(id, stored)],
                updates: vec![RefUpdate::new(ref_name.clone(), None, Some(id))],
                message: format!("snapshot of {target}"),
                out: SnapshotInfo {
                    name: short.clone(),
                    id,
                    target,
                    labels: labels.clone(),
                },
            })
        })
    }

    /// Every snapshot, by name.
    pub fn snapshots(&self) -> Result<Vec<SnapshotInfo>, RepoError> {
        self.store
            .list_refs(TAGS)?
            .into_iter()
            .map(|(n, id)| self.snapshot_info(&n[TAGS.len()..], id))
            .collect()
    }

    /// One snapshot.
    pub fn inspect(&self, name: &str) -> Result<SnapshotInfo, RepoError> {
        let ref_name = Self::user_ref(Self::tag_ref(name))?;
        let id = self
            .store
            .get_ref(&ref_name)?
            .ok_or_else(|| RepoError::UnknownRevision {
                rev: ref_name.clone(),
            })?;
        self.snapshot_info(&ref_name[TAGS.len()..], id)
    }

    fn snapshot_info(&self, name: &str, id: ObjectId) -> Result<SnapshotInfo, RepoError> {
        let c = SnapshotGraph::commit(id, &self.store)?;
        let mut labels = c.meta;
        let is_tag = labels.remove(TAG_KEY).is_some();
        let target = match (is_tag, c.parents.as_slice()) {
            (true, [p]) => *p,
            _ => id, // a plain ref to a commit under tags/
        };
        Ok(SnapshotInfo {
            name: name.to_string(),
            id,
            target,
            labels: if is_tag { labels } else { BTreeMap::new() },
        })
    }

    /// Removes snapshot `name`. Its objects go at the next garbage collection unless
    /// other refs reach them. Refused with [`RepoError::SnapshotInUse`] when another
    /// ref's history contains the snapshot commit (a branch forked from it), unless
    /// `force`: the name goes, the history those refs need stays.
    pub fn remove_snapshot(&self, name: &str, force: bool) -> Result<SnapshotInfo, RepoError> {
        let info = self.inspect(name)?;
        let ref_name = Self::tag_ref(name);
        if !force {
            let gen = SnapshotGraph::commit(info.id, &self.store)?.generation;
            let mut needed_by = Vec::new();
            for (other, tip) in self.store.list_refs("")? {
                if other == ref_name || other.starts_with(crate::gc::RESERVED) {
                    continue;
                }
                if self.reaches(tip, info.id, gen)? {
                    needed_by.push(other);
                }
            }
            if !needed_by.is_empty() {
                return Err(RepoError::SnapshotInUse {
                    name: ref_name,
                    needed_by,
                });
            }
        }
        self.store
            .delete_ref(&ref_name, info.id, "remove snapshot")?;
        Ok(info)
    }

    /// Whether `target` (of generation `gen`) is `from` or an ancestor of it; walks
    /// only commits of higher generation.
    fn reaches(&self, from: ObjectId, target: ObjectId, gen: u64) -> Result<bool, RepoError> {
        let mut stack = vec![from];
        let mut seen = hashbrown::HashSet::new();
        while let Some(c) = stack.pop() {
            if c == target {
                return Ok(true);
            }
            if !seen.insert(c) {
                continue;
            }
            let commit = match SnapshotGraph::commit(c, &self.store) {
                Ok(commit) => commit,
                Err(_) if c != from => continue, // a shallow or damaged history
                Err(e) => return Err(e.into()),
            };
            if commit.generation > gen {
                stack.extend(commit.parents);
            }
        }
        Ok(false)
    }
}

/// The objects of a commit in the order to write them, in groups written one after
/// the other: chunks, then chunks whose delta hint is another chunk of this commit
/// (their bases are then durable before them), then everything else in dependency
/// order (in the first group when there is no second). Chunks reference nothing, so
/// any order among them keeps the store closed.
fn write_order<'a>(
    objects: &'a snapgraph::ObjectSet,
    hints: &hashbrown::HashMap<ObjectId, ObjectId>,
) -> Vec<Vec<(&'a ObjectId, &'a [u8])>> {
    let is_chunk = |b: &[u8]| b.first() == Some(&snapgraph::ObjectKind::Chunk.byte());
    let late = |id: &ObjectId| hints.get(id).is_some_and(|b| objects.contains_id(b));
    let mut groups = vec![Vec::new(), Vec::new(), Vec::new()];
    for (id, b) in objects.iter() {
        let g = match (is_chunk(b), late(id)) {
            (true, false) => 0,
            (true, true) => 1,
            (false, _) => 2,
        };
        groups[g].push((id, b));
    }
    // Without late chunks, one group: a batch is durable in its order, so the
    // chunks first and their referrers after them in one call keep the store
    // closed too, and a turn is one `put_many` (on S3, one pack and its index).
    if groups[1].is_empty() {
        let rest = std::mem::take(&mut groups[2]);
        groups[0].extend(rest);
    }
    groups.retain(|g| !g.is_empty());
    groups
}

/// A commit whose content is written in batches, so that committing a tree needs
/// memory for one batch rather than for the tree ([`Repo::batched`]).
///
/// The caller writes files into a [`Workspace`] and calls [`write`](Self::write)
/// whenever their bytes reach its budget: the content written since is handed over
/// ([`Workspace::hand_over`]) and the objects the store lacks are written, children
/// first. [`commit`](Self::commit) (or
/// [`commit_new_branch`](Self::commit_new_branch)) then commits the workspace, whose
/// trees refer to that content, and moves the branch as [`Repo::commit`] does. The
/// first `write` takes a writer's lease, held until the commit publishes: a
/// collection cannot delete the batches' objects in between. Dropped without a
/// commit, or after a failed one, it releases the lease; the batches' objects stay
/// as unreferenced garbage for the next collection, and no ref has moved.
///
/// ```
/// use snapgraph::Workspace;
/// use snapgraph_store::{MemoryStore, Repo, RepoCommitOptions};
///
/// let repo = Repo::new(MemoryStore::new());
/// let mut ws = Workspace::new();
/// let mut batched = repo.batched();
/// for i in 0..4u8 {
///     ws.write(&format!("/f{i}"), vec![i; 100_000])?;
///     batched.write(&mut ws)?; // a budget of one file
/// }
/// let done = batched.commit(&mut ws, "main", RepoCommitOptions::message("four files"))?;
/// assert_eq!(repo.checkout("main")?.read("/f3")?, vec![3u8; 100_000]);
/// assert!(done.objects_written > 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a batched commit publishes nothing until `commit`"]
pub struct Batched<'r, S: Store> {
    repo: &'r Repo<S>,
    lease: Option<Lease>,
    objects_written: usize,
    bytes_written: u64,
}

impl<S: Store> std::fmt::Debug for Batched<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batched")
            .field("leased", &self.lease.is_some())
            .field("objects_written", &self.objects_written)
            .field("bytes_written", &self.bytes_written)
            .finish()
    }
}

impl<S: Store> Repo<S> {
    /// Starts a commit written in batches (see [`Batched`]). Takes nothing yet: the
    /// lease comes with the first batch.
    pub fn batched(&self) -> Batched<'_, S> {
        Batched {
            repo: self,
            lease: None,
            objects_written: 0,
            bytes_written: 0,
        }
    }
}

impl<S: Store> Batched<'_, S> {
    /// Hands over the content `ws` holds written since its last commit and writes
    /// the objects the store lacks (in batches of at most 8 MiB per store call).
    /// Returns how many objects and stored bytes were new. On an error the objects
    /// written so far stay (garbage until a commit refers to them); `ws` keeps only
    /// references to the content handed over, so give up the commit (drop this).
    pub fn write(&mut self, ws: &mut Workspace) -> Result<(usize, u64), RepoError> {
        self.write_set(ws.hand_over(None))
    }

    /// Writes the objects of `set` the store lacks, as [`write`](Self::write) does
    /// with what it hands over: `set` must come from [`Workspace::hand_over`] (with no
    /// `have_in`) of the workspace this commit will commit. Split so that a caller may
    /// write one batch on another thread while it reads and hands over the next
    /// (`Batched` is `Send` when the store is): the CLI's first commit and `import`
    /// do.
    pub fn write_set(&mut self, set: snapgraph::ObjectSet) -> Result<(usize, u64), RepoError> {
        if self.lease.is_none() {
            self.lease = Some(self.repo.lease()?);
        }
        // Consumed in order (referenced objects first), each chunk's stored form
        // built as it comes: the batch's bytes are in memory once, plus one put.
        let (mut count, mut bytes) = (0, 0);
        let mut batch: Vec<(ObjectId, Vec<u8>)> = Vec::new();
        let mut batch_bytes = 0u64;
        for (id, stored) in set {
            batch_bytes += stored.len() as u64;
            batch.push((id, stored));
            if batch.len() >= BATCH || batch_bytes >= PUT_BYTES {
                let (c, b) = self.put_absent(&mut batch)?;
                (count, bytes) = (count + c, bytes + b);
                batch_bytes = 0;
            }
        }
        let (c, b) = self.put_absent(&mut batch)?;
        (count, bytes) = (count + c, bytes + b);
        self.objects_written += count;
        self.bytes_written += bytes;
        Ok((count, bytes))
    }

    /// Writes the objects of `batch` the store lacks (emptying it); returns how many
    /// objects and bytes were new.
    fn put_absent(&self, batch: &mut Vec<(ObjectId, Vec<u8>)>) -> Result<(usize, u64), RepoError> {
        if batch.is_empty() {
            return Ok((0, 0));
        }
        let store = &self.repo.store;
        let ids: Vec<ObjectId> = batch.iter().map(|(i, _)| *i).collect();
        let absent: hashbrown::HashSet<ObjectId> = store.has_many(&ids)?.into_iter().collect();
        let new: Vec<(ObjectId, &[u8])> = batch
            .iter()
            .filter(|(i, _)| absent.contains(i))
            .map(|(i, b)| (*i, &b[..]))
            .collect();
        let counts = (new.len(), new.iter().map(|(_, b)| b.len() as u64).sum());
        if !new.is_empty() {
            store.put_many(&new)?;
        }
        drop(new);
        batch.clear();
        Ok(counts)
    }

    /// Objects and stored bytes written by the batches so far.
    pub fn written(&self) -> (usize, u64) {
        (self.objects_written, self.bytes_written)
    }

    /// Commits `ws` to `branch` as [`Repo::commit`] does, under this commit's lease;
    /// the counts include the batches'.
    pub fn commit(
        mut self,
        ws: &mut Workspace,
        branch: &str,
        options: RepoCommitOptions,
    ) -> Result<Committed, RepoError> {
        let repo = self.repo;
        let done = repo.commit_with(ws, branch, options, &mut self.lease)?;
        Ok(self.add_to(done))
    }

    /// Commits `ws` as the root of a new branch as [`Repo::commit_new_branch`] does,
    /// under this commit's lease; the counts include the batches'.
    pub fn commit_new_branch(
        mut self,
        ws: &mut Workspace,
        branch: &str,
        options: RepoCommitOptions,
    ) -> Result<Committed, RepoError> {
        let repo = self.repo;
        let done = repo.commit_new_branch_with(ws, branch, options, &mut self.lease)?;
        Ok(self.add_to(done))
    }

    fn add_to(&self, mut done: Committed) -> Committed {
        done.objects_written += self.objects_written;
        done.bytes_written += self.bytes_written;
        done
    }
}

impl<S: Store> Drop for Batched<'_, S> {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            lease.release(&self.repo.store);
        }
    }
}
