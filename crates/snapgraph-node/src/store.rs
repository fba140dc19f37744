//! Stores: `open(url)`, the `Store` trait's batched calls, `Repo`, and `sync`,
//! `gc`, `verify`. Stores are shared (`Send + Sync`), so every call that touches one
//! also comes as a Promise-returning `…Async` that runs on the thread pool.

use std::collections::BTreeMap;
use std::sync::Arc;

use indexmap::IndexMap;
use napi::bindgen_prelude::{
    AsyncTask, Buffer, ClassInstance, Either, Null, Object, Uint8ArraySlice,
};
use napi_derive::napi;
use snapgraph::ObjectId;
use snapgraph_store::{
    sync_with, verify as rs_verify, GcOptions, GcReport as RsGcReport, RefUpdate, Repo as RsRepo,
    RepoCommitOptions, SnapshotInfo as RsSnapshotInfo, Store as RsStore, SyncOptions,
    SyncReport as RsSyncReport, VerifyReport as RsVerifyReport, WalkProblem,
};

use crate::convert::{self, from_nullable, hexes, nullable, CommitInfo, Nullable, OrJs};
use crate::error::Result;
use crate::task::{spawn, Job};
use crate::workspace::{get, Workspace};

type Shared = Arc<dyn RsStore>;

/// A snapgraph store: SQLite, PostgreSQL, a directory, or memory.
#[napi]
pub struct Store {
    pub(crate) inner: Shared,
}

/// A ref and the commit it names.
#[napi(object)]
pub struct RefEntry {
    /// The ref's full name (`heads/main`, `tags/v1`, ...).
    pub name: String,
    /// The commit.
    pub id: String,
}

/// One move of a ref.
#[napi(object)]
pub struct ReflogEntry {
    /// The value before (`null`: created).
    pub old: Either<String, Null>,
    /// The value after (`null`: deleted).
    pub new: Either<String, Null>,
    /// The message given with the move.
    pub message: String,
}

/// One compare-and-swap of `Store.updateRefs`.
#[napi(object)]
pub struct RefUpdateArg {
    /// The ref.
    pub name: String,
    /// The value it must hold (`null`: absent).
    pub expected: Option<Either<String, Null>>,
    /// The value to set (`null`: delete).
    pub new: Option<Either<String, Null>>,
}

fn optional_id(hex: Option<Nullable<String>>) -> Result<Option<ObjectId>> {
    from_nullable(hex).as_deref().map(convert::id).transpose()
}

fn owned_objects(
    objects: IndexMap<String, Uint8ArraySlice<'_>>,
) -> Result<Vec<(ObjectId, Vec<u8>)>> {
    objects
        .into_iter()
        .map(|(k, v)| Ok((convert::id(&k)?, v.as_ref().to_vec())))
        .collect()
}

/// Re-hashes every object, then writes the batch: bytes that are not their id's
/// are refused (`CORRUPT`, naming the id) with nothing written.
fn put(store: &dyn RsStore, objects: &[(ObjectId, Vec<u8>)]) -> Result<()> {
    let batch: Vec<(ObjectId, &[u8])> = objects.iter().map(|(i, b)| (*i, b.as_slice())).collect();
    snapgraph_store::check_put(&batch).or_js()?;
    store.put_many(&batch).or_js()
}

fn get_many(store: &dyn RsStore, ids: &[ObjectId]) -> Result<Vec<Option<Buffer>>> {
    Ok(snapgraph_store::ObjectStore::get_many(store, ids)
        .or_js()?
        .into_iter()
        .map(|b| b.map(Buffer::from))
        .collect())
}

fn all_ids(store: &dyn RsStore) -> Result<Vec<String>> {
    let mut out = Vec::new();
    store
        .for_each_id(&mut |id| {
            out.push(id.to_hex());
            Ok(())
        })
        .or_js()?;
    Ok(out)
}

/// Opens a store by URL: `sqlite:PATH`, `dir:PATH`, `postgres://…`, `memory:`.
#[napi]
pub fn open(url: String) -> Result<Store> {
    Ok(Store {
        inner: Arc::from(snapgraph_store::open(&url).or_js()?),
    })
}

/// `open` on the thread pool (a PostgreSQL connection is network I/O).
#[napi(ts_return_type = "Promise<Store>")]
pub fn open_async(url: String) -> AsyncTask<Job<Store>> {
    spawn(move || open(url))
}

#[napi]
impl Store {
    /// `open(url)` as a static.
    #[napi(factory)]
    pub fn open(url: String) -> Result<Store> {
        open(url)
    }

    /// The verified bytes of each id, in order; `null` where absent.
    #[napi]
    pub fn get_many(&self, ids: Vec<String>) -> Result<Vec<Option<Buffer>>> {
        get_many(&*self.inner, &convert::ids(&ids)?)
    }

    /// `getMany` on the thread pool.
    #[napi(ts_return_type = "Promise<Array<Buffer | null>>")]
    pub fn get_many_async(&self, ids: Vec<String>) -> Result<AsyncTask<Job<Vec<Option<Buffer>>>>> {
        let (store, ids) = (self.inner.clone(), convert::ids(&ids)?);
        Ok(spawn(move || get_many(&*store, &ids)))
    }

    /// The ids among `ids` the store does not hold, in the order given (Rust's
    /// `Store::has_many`, Python's `Store.missing`).
    #[napi]
    pub fn missing(&self, ids: Vec<String>) -> Result<Vec<String>> {
        Ok(hexes(self.inner.has_many(&convert::ids(&ids)?).or_js()?))
    }

    /// `missing` on the thread pool.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn missing_async(&self, ids: Vec<String>) -> Result<AsyncTask<Job<Vec<String>>>> {
        let (store, ids) = (self.inner.clone(), convert::ids(&ids)?);
        Ok(spawn(move || Ok(hexes(store.has_many(&ids).or_js()?))))
    }

    /// The same as `missing`: the ids among `ids` the store does
    /// **not** hold (named after Rust's `Store::has_many`; kept for the callers that
    /// use it).
    ///
    /// @deprecated Use `missing`: the name reads as the ids held, the answer is the
    /// ids missing.
    #[napi]
    pub fn has_many(&self, ids: Vec<String>) -> Result<Vec<String>> {
        self.missing(ids)
    }

    /// `hasMany` on the thread pool: the ids missing, as `missingAsync`.
    ///
    /// @deprecated Use `missingAsync`.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn has_many_async(&self, ids: Vec<String>) -> Result<AsyncTask<Job<Vec<String>>>> {
        self.missing_async(ids)
    }

    /// Writes objects (a commit's `objects`, in their order); held ones are left.
    /// Each is re-hashed first: bytes that are not their id's throw `CORRUPT`
    /// naming the id, and nothing of the batch is written (a store keeps the first
    /// bytes put under an id, so wrong ones would stay that object).
    #[napi(ts_args_type = "objects: Record<string, Uint8Array>")]
    pub fn put_many(&self, objects: IndexMap<String, Uint8ArraySlice<'_>>) -> Result<()> {
        put(&*self.inner, &owned_objects(objects)?)
    }

    /// `putMany` on the thread pool (the bytes are copied first).
    #[napi(
        ts_args_type = "objects: Record<string, Uint8Array>",
        ts_return_type = "Promise<void>"
    )]
    pub fn put_many_async(
        &self,
        objects: IndexMap<String, Uint8ArraySlice<'_>>,
    ) -> Result<AsyncTask<Job<()>>> {
        let (store, objects) = (self.inner.clone(), owned_objects(objects)?);
        Ok(spawn(move || put(&*store, &objects)))
    }

    /// Deletes objects; absent ones are ignored. (GC does this safely; this is the
    /// raw call.)
    #[napi]
    pub fn delete_many(&self, ids: Vec<String>) -> Result<()> {
        self.inner.delete_many(&convert::ids(&ids)?).or_js()
    }

    /// Every object id held, in no particular order.
    #[napi]
    pub fn ids(&self) -> Result<Vec<String>> {
        all_ids(&*self.inner)
    }

    /// `ids` on the thread pool.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn ids_async(&self) -> AsyncTask<Job<Vec<String>>> {
        let store = self.inner.clone();
        spawn(move || all_ids(&*store))
    }

    /// The value of a ref.
    #[napi]
    pub fn get_ref(&self, name: String) -> Result<Option<String>> {
        Ok(self.inner.get_ref(&name).or_js()?.map(|i| i.to_hex()))
    }

    /// Applies every compare-and-swap or none (`REF_CONFLICT` naming the first ref
    /// that did not hold its expected value).
    #[napi]
    pub fn update_refs(&self, updates: Vec<RefUpdateArg>, message: String) -> Result<()> {
        let updates = updates
            .into_iter()
            .map(|u| {
                Ok(RefUpdate::new(
                    u.name,
                    optional_id(u.expected)?,
                    optional_id(u.new)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        self.inner.update_refs(&updates, &message).or_js()
    }

    /// Every ref whose name starts with `prefix`, sorted by name.
    #[napi]
    pub fn list_refs(&self, prefix: Option<String>) -> Result<Vec<RefEntry>> {
        Ok(self
            .inner
            .list_refs(prefix.as_deref().unwrap_or(""))
            .or_js()?
            .into_iter()
            .map(|(name, id)| RefEntry {
                name,
                id: id.to_hex(),
            })
            .collect())
    }

    /// The moves of a ref, oldest first.
    #[napi]
    pub fn reflog(&self, name: String) -> Result<Vec<ReflogEntry>> {
        Ok(self
            .inner
            .reflog(&name)
            .or_js()?
            .into_iter()
            .map(|e| ReflogEntry {
                old: nullable(e.old.map(|i| i.to_hex())),
                new: nullable(e.new.map(|i| i.to_hex())),
                message: e.message,
            })
            .collect())
    }
}

/// A store argument: a `Store` or a `Repo` (its store).
pub type StoreArg<'a> = Either<ClassInstance<'a, Store>, ClassInstance<'a, Repo>>;

fn store_of(arg: &StoreArg<'_>) -> Shared {
    match arg {
        Either::A(s) => s.inner.clone(),
        Either::B(r) => r.store_arc(),
    }
}

// ----- sync, gc, verify -----

/// What a sync did.
#[napi(object)]
pub struct SyncReport {
    /// The destination's ref before (`null`: absent).
    pub from: Either<String, Null>,
    /// The destination's ref after.
    pub to: Either<String, Null>,
    /// Objects written to the destination.
    pub objects: f64,
    /// Their bytes.
    pub bytes: f64,
    /// Objects examined.
    pub examined: f64,
    /// `hasMany` queries sent to the destination.
    pub queries: f64,
    /// Levels of the object graph walked.
    pub levels: f64,
}

impl From<RsSyncReport> for SyncReport {
    fn from(r: RsSyncReport) -> Self {
        Self {
            from: nullable(r.from.map(|i| i.to_hex())),
            to: nullable(r.to.map(|i| i.to_hex())),
            objects: r.objects as f64,
            bytes: r.bytes as f64,
            examined: r.examined as f64,
            queries: r.queries as f64,
            levels: r.levels as f64,
        }
    }
}

/// A problem a walk met: a missing or invalid object, one referenced as two kinds, or
/// one reachable that the collector's marking would not keep.
#[napi(object)]
pub struct Problem {
    /// `'missing'`, `'invalid'`, `'kindConflict'` or `'unmarked'` (`'other'` for a
    /// kind of problem newer than this binding).
    pub kind: String,
    /// The object.
    pub id: String,
    /// An object referencing a missing one (`null` for a root or an invalid one).
    pub referenced_by: Either<String, Null>,
    /// What is wrong with an invalid one.
    pub reason: Option<String>,
}

fn problems(list: Vec<WalkProblem>) -> Vec<Problem> {
    list.into_iter()
        .map(|p| {
            let text = p.to_string();
            match p {
                WalkProblem::Missing { id, referenced_by } => Problem {
                    kind: "missing".into(),
                    id: id.to_hex(),
                    referenced_by: nullable(referenced_by.map(|i| i.to_hex())),
                    reason: None,
                },
                WalkProblem::Invalid { id, reason } => Problem {
                    kind: "invalid".into(),
                    id: id.to_hex(),
                    referenced_by: nullable(None),
                    reason: Some(reason),
                },
                WalkProblem::KindConflict {
                    id, referenced_by, ..
                } => Problem {
                    kind: "kindConflict".into(),
                    id: id.to_hex(),
                    referenced_by: nullable(referenced_by.map(|i| i.to_hex())),
                    reason: Some(text),
                },
                WalkProblem::Unmarked { id } => Problem {
                    kind: "unmarked".into(),
                    id: id.to_hex(),
                    referenced_by: nullable(None),
                    reason: Some(text),
                },
                other => Problem {
                    kind: "other".into(),
                    id: other.id().to_hex(),
                    referenced_by: nullable(None),
                    reason: Some(text),
                },
            }
        })
        .collect()
}

/// What a collection did.
#[napi(object)]
pub struct GcReport {
    /// Objects deleted, referrers first.
    pub deleted: Vec<String>,
    /// Objects kept.
    pub kept: f64,
    /// Refs marked from.
    pub refs: f64,
    /// Problems met while marking (the sweep skips nothing it could not mark).
    pub problems: Vec<Problem>,
}

impl From<RsGcReport> for GcReport {
    fn from(r: RsGcReport) -> Self {
        Self {
            deleted: hexes(r.deleted),
            kept: r.kept as f64,
            refs: r.refs as f64,
            problems: problems(r.problems),
        }
    }
}

/// What a verification found.
#[napi(object)]
pub struct VerifyReport {
    /// Refs checked.
    pub refs: f64,
    /// Objects reachable from them.
    pub reachable: f64,
    /// Objects held.
    pub objects: f64,
    /// Objects re-hashed.
    pub rehashed: f64,
    /// Bytes re-hashed.
    pub bytes: f64,
    /// Objects no ref reaches.
    pub unreachable: f64,
    /// Missing and invalid objects.
    pub problems: Vec<Problem>,
    /// Refs whose closure is incomplete or invalid.
    pub broken_refs: Vec<String>,
    /// No problems and no broken refs.
    pub is_clean: bool,
}

impl From<RsVerifyReport> for VerifyReport {
    fn from(r: RsVerifyReport) -> Self {
        let is_clean = r.is_clean();
        Self {
            refs: r.refs as f64,
            reachable: r.reachable as f64,
            objects: r.objects as f64,
            rehashed: r.rehashed as f64,
            bytes: r.bytes as f64,
            unreachable: r.unreachable as f64,
            problems: problems(r.problems),
            broken_refs: r.broken_refs,
            is_clean,
        }
    }
}

fn sync_options(options: Option<Object<'_>>) -> Result<SyncOptions> {
    let mut s = SyncOptions::default();
    if let Some(o) = options {
        s.force = get::<bool>(&o, "force")?.unwrap_or(false);
    }
    Ok(s)
}

fn gc_options(options: Option<Object<'_>>) -> Result<GcOptions> {
    let mut g = GcOptions::default();
    if let Some(o) = options {
        if let Some(pins) = get::<Vec<String>>(&o, "pins")? {
            g.pins = convert::ids(&pins)?;
        }
    }
    Ok(g)
}

fn run_sync(src: &Shared, dst: &Shared, name: &str, options: &SyncOptions) -> Result<SyncReport> {
    Ok(SyncReport::from(
        sync_with(&**src, &**dst, name, options).or_js()?,
    ))
}

/// Copies what `dst` lacks of ref `name` from `src`, then moves `dst`'s ref
/// (fast-forward only unless `{ force: true }`).
#[napi(
    ts_args_type = "src: Store | Repo, dst: Store | Repo, name: string, options?: { force?: boolean }"
)]
pub fn sync(
    src: StoreArg<'_>,
    dst: StoreArg<'_>,
    name: String,
    options: Option<Object<'_>>,
) -> Result<SyncReport> {
    run_sync(
        &store_of(&src),
        &store_of(&dst),
        &name,
        &sync_options(options)?,
    )
}

/// `sync` on the thread pool.
#[napi(
    ts_args_type = "src: Store | Repo, dst: Store | Repo, name: string, options?: { force?: boolean }",
    ts_return_type = "Promise<SyncReport>"
)]
pub fn sync_async(
    src: StoreArg<'_>,
    dst: StoreArg<'_>,
    name: String,
    options: Option<Object<'_>>,
) -> Result<AsyncTask<Job<SyncReport>>> {
    let (src, dst, options) = (store_of(&src), store_of(&dst), sync_options(options)?);
    Ok(spawn(move || run_sync(&src, &dst, &name, &options)))
}

/// Deletes every object no ref (and no pin) reaches; safe with concurrent writers.
#[napi(ts_args_type = "store: Store | Repo, options?: { pins?: string[] }")]
pub fn gc(store: StoreArg<'_>, options: Option<Object<'_>>) -> Result<GcReport> {
    let options = gc_options(options)?;
    Ok(GcReport::from(
        snapgraph_store::gc::collect_with(&*store_of(&store), &options).or_js()?,
    ))
}

/// `gc` on the thread pool.
#[napi(
    ts_args_type = "store: Store | Repo, options?: { pins?: string[] }",
    ts_return_type = "Promise<GcReport>"
)]
pub fn gc_async(
    store: StoreArg<'_>,
    options: Option<Object<'_>>,
) -> Result<AsyncTask<Job<GcReport>>> {
    let (store, options) = (store_of(&store), gc_options(options)?);
    Ok(spawn(move || {
        Ok(GcReport::from(
            snapgraph_store::gc::collect_with(&*store, &options).or_js()?,
        ))
    }))
}

/// Checks every ref's closure; with `readData` (default true) re-hashes every
/// object too.
#[napi(ts_args_type = "store: Store | Repo, readData?: boolean")]
pub fn verify(store: StoreArg<'_>, read_data: Option<bool>) -> Result<VerifyReport> {
    Ok(VerifyReport::from(
        rs_verify(&*store_of(&store), read_data.unwrap_or(true)).or_js()?,
    ))
}

/// `verify` on the thread pool.
#[napi(
    ts_args_type = "store: Store | Repo, readData?: boolean",
    ts_return_type = "Promise<VerifyReport>"
)]
pub fn verify_async(store: StoreArg<'_>, read_data: Option<bool>) -> AsyncTask<Job<VerifyReport>> {
    let store = store_of(&store);
    spawn(move || {
        Ok(VerifyReport::from(
            rs_verify(&*store, read_data.unwrap_or(true)).or_js()?,
        ))
    })
}

// ----- Repo -----

/// Branches, commits with compare-and-swap, checkouts, forks and labelled
/// snapshots over a store.
#[napi]
pub struct Repo {
    inner: Arc<RsRepo<Shared>>,
}

/// What `Repo.commit` wrote.
#[napi(object)]
pub struct Committed {
    /// The new commit.
    pub id: String,
    /// The branch's previous tip (`null`: a new branch).
    pub previous: Either<String, Null>,
    /// Objects new to the store.
    pub objects_written: f64,
    /// Their bytes.
    pub bytes_written: f64,
}

/// A labelled snapshot (a `tags/` ref).
#[napi(object)]
pub struct SnapshotInfo {
    /// Its name.
    pub name: String,
    /// The tag commit.
    pub id: String,
    /// The commit it labels.
    pub target: String,
    /// Its labels.
    pub labels: IndexMap<String, String>,
}

impl From<RsSnapshotInfo> for SnapshotInfo {
    fn from(s: RsSnapshotInfo) -> Self {
        Self {
            name: s.name,
            id: s.id.to_hex(),
            target: s.target.to_hex(),
            labels: s.labels.into_iter().collect(),
        }
    }
}

/// What `Repo.reindex` rebuilt.
#[napi(object)]
pub struct ReindexReport {
    /// Commits found.
    pub commits: f64,
    /// Snapshot refs recreated.
    pub tags_restored: Vec<RefEntry>,
    /// Unreferenced head commits, now under `lost-found/`.
    pub lost_found: Vec<String>,
}

struct RepoCommitArgs(RepoCommitOptions);

impl RepoCommitArgs {
    fn parse(options: Option<Object<'_>>) -> Result<Self> {
        let mut r = RepoCommitOptions::default();
        if let Some(o) = options {
            r.message = get::<String>(&o, "message")?;
            r.meta = get::<BTreeMap<String, String>>(&o, "meta")?.unwrap_or_default();
            if let Some(p) = get::<Vec<String>>(&o, "extraParents")? {
                r.extra_parents = convert::ids(&p)?;
            }
            r.onto_tip = get::<bool>(&o, "ontoTip")?.unwrap_or(false);
        }
        Ok(Self(r))
    }
}

fn committed(c: snapgraph_store::Committed) -> Committed {
    Committed {
        id: c.id.to_hex(),
        previous: nullable(c.previous.map(|i| i.to_hex())),
        objects_written: c.objects_written as f64,
        bytes_written: c.bytes_written as f64,
    }
}

type SharedRepo = Arc<RsRepo<Shared>>;

fn log(repo: &SharedRepo, rev: &str, limit: usize) -> Result<Vec<CommitInfo>> {
    Ok(repo
        .log(rev, limit)
        .or_js()?
        .iter()
        .map(|(id, c)| CommitInfo::new(*id, c))
        .collect())
}

fn labels(l: Option<IndexMap<String, String>>) -> BTreeMap<String, String> {
    l.unwrap_or_default().into_iter().collect()
}

impl Repo {
    /// The store behind the repository.
    pub fn store_arc(&self) -> Shared {
        self.inner.store().clone()
    }
}

#[napi]
impl Repo {
    /// A repository over `store`.
    #[napi(constructor)]
    pub fn new(store: &Store) -> Self {
        Self {
            inner: Arc::new(RsRepo::new(store.inner.clone())),
        }
    }

    /// A repository over the store at `url` (see `open`).
    #[napi(factory, js_name = "open")]
    pub fn open_url(url: String) -> Result<Repo> {
        let store = open(url)?;
        Ok(Repo::new(&store))
    }

    /// `Repo.open` on the thread pool.
    #[napi(ts_return_type = "Promise<Repo>")]
    pub fn open_async(url: String) -> AsyncTask<Job<Repo>> {
        spawn(move || {
            let store = open(url)?;
            Ok(Repo::new(&store))
        })
    }

    /// The store behind the repository.
    #[napi(getter)]
    pub fn store(&self) -> Store {
        Store {
            inner: self.store_arc(),
        }
    }

    /// The commit a revision names: a branch, a snapshot name or an id.
    #[napi]
    pub fn resolve(&self, rev: String) -> Result<String> {
        Ok(self.inner.resolve(&rev).or_js()?.to_hex())
    }

    /// A branch's tip, if the branch exists.
    #[napi]
    pub fn branch(&self, name: String) -> Result<Option<String>> {
        Ok(self.inner.branch(&name).or_js()?.map(|i| i.to_hex()))
    }

    /// Every branch with its tip, sorted by name.
    #[napi]
    pub fn branches(&self) -> Result<Vec<RefEntry>> {
        Ok(self
            .inner
            .branches()
            .or_js()?
            .into_iter()
            .map(|(name, id)| RefEntry {
                name,
                id: id.to_hex(),
            })
            .collect())
    }

    /// Commits `ws` to `branch` and moves the branch by compare-and-swap:
    /// `{ message?, meta?, extraParents?, ontoTip? }`. Only what the store lacks is
    /// written. On error the workspace is unchanged.
    #[napi(ts_args_type = "ws: Workspace, branch: string, options?: RepoCommitOptions")]
    pub fn commit(
        &self,
        ws: &Workspace,
        branch: String,
        options: Option<Object<'_>>,
    ) -> Result<Committed> {
        let args = RepoCommitArgs::parse(options)?;
        ws.with(|w| Ok(committed(self.inner.commit(w, &branch, args.0).or_js()?)))
    }

    /// `commit` on the thread pool (the workspace is `BUSY` meanwhile).
    #[napi(
        ts_args_type = "ws: Workspace, branch: string, options?: RepoCommitOptions",
        ts_return_type = "Promise<Committed>"
    )]
    pub fn commit_async(
        &self,
        ws: &Workspace,
        branch: String,
        options: Option<Object<'_>>,
    ) -> Result<AsyncTask<Job<Committed>>> {
        let args = RepoCommitArgs::parse(options)?;
        let repo = self.inner.clone();
        ws.lend(move |w| Ok(committed(repo.commit(w, &branch, args.0).or_js()?)))
    }

    /// A new workspace at `rev`, every object verified.
    #[napi]
    pub fn checkout(&self, rev: String) -> Result<Workspace> {
        Ok(Workspace::wrap(self.inner.checkout(&rev).or_js()?))
    }

    /// `checkout` on the thread pool.
    #[napi(ts_return_type = "Promise<Workspace>")]
    pub fn checkout_async(&self, rev: String) -> AsyncTask<Job<Workspace>> {
        let repo = self.inner.clone();
        spawn(move || Ok(Workspace::wrap(repo.checkout(&rev).or_js()?)))
    }

    /// A new workspace at `rev` with trees only: file content stays in the store
    /// until `loadContent`, and a commit back costs what changed.
    #[napi]
    pub fn checkout_shallow(&self, rev: String) -> Result<Workspace> {
        Ok(Workspace::wrap(self.inner.checkout_shallow(&rev).or_js()?))
    }

    /// `checkoutShallow` on the thread pool.
    #[napi(ts_return_type = "Promise<Workspace>")]
    pub fn checkout_shallow_async(&self, rev: String) -> AsyncTask<Job<Workspace>> {
        let repo = self.inner.clone();
        spawn(move || Ok(Workspace::wrap(repo.checkout_shallow(&rev).or_js()?)))
    }

    /// Checks `rev` out into an existing workspace (keeping its limits and
    /// capabilities), all or nothing: `{ policy?, drift? }`.
    #[napi(ts_args_type = "ws: Workspace, rev: string, options?: CheckoutOptions")]
    pub fn checkout_into(
        &self,
        ws: &Workspace,
        rev: String,
        options: Option<Object<'_>>,
    ) -> Result<crate::workspace::Restore> {
        let (policy, drift) = match options {
            Some(o) => (
                convert::policy(get::<String>(&o, "policy")?.as_deref())?,
                convert::drift(get::<String>(&o, "drift")?.as_deref())?,
            ),
            None => (Default::default(), Default::default()),
        };
        ws.with(|w| {
            Ok(crate::workspace::Restore::from(
                self.inner.checkout_into(w, &rev, policy, drift).or_js()?,
            ))
        })
    }

    /// Commits of `rev` and its ancestors, newest first, at most `limit`.
    #[napi]
    pub fn log(&self, rev: String, limit: Option<f64>) -> Result<Vec<CommitInfo>> {
        log(&self.inner, &rev, convert::limit(limit)?)
    }

    /// `log` on the thread pool.
    #[napi(ts_return_type = "Promise<CommitInfo[]>")]
    pub fn log_async(
        &self,
        rev: String,
        limit: Option<f64>,
    ) -> Result<AsyncTask<Job<Vec<CommitInfo>>>> {
        let (repo, limit) = (self.inner.clone(), convert::limit(limit)?);
        Ok(spawn(move || log(&repo, &rev, limit)))
    }

    /// Labels `at` as snapshot `name` (a tag commit under `tags/`).
    #[napi]
    pub fn tag(
        &self,
        name: String,
        at: String,
        labels: Option<IndexMap<String, String>>,
    ) -> Result<SnapshotInfo> {
        Ok(SnapshotInfo::from(
            self.inner.tag(&name, &at, self::labels(labels)).or_js()?,
        ))
    }

    /// Every labelled snapshot, sorted by name.
    #[napi]
    pub fn snapshots(&self) -> Result<Vec<SnapshotInfo>> {
        Ok(self
            .inner
            .snapshots()
            .or_js()?
            .into_iter()
            .map(SnapshotInfo::from)
            .collect())
    }

    /// One labelled snapshot.
    #[napi]
    pub fn inspect(&self, name: String) -> Result<SnapshotInfo> {
        Ok(SnapshotInfo::from(self.inner.inspect(&name).or_js()?))
    }

    /// Drops a snapshot's name (`IN_USE` if a branch still needs it, unless `force`).
    #[napi]
    pub fn remove_snapshot(&self, name: String, force: Option<bool>) -> Result<SnapshotInfo> {
        Ok(SnapshotInfo::from(
            self.inner
                .remove_snapshot(&name, force.unwrap_or(false))
                .or_js()?,
        ))
    }

    /// Starts branch `newBranch` at revision `at`; returns the commit.
    #[napi]
    pub fn fork(&self, new_branch: String, at: String) -> Result<String> {
        Ok(self.inner.fork(&new_branch, &at).or_js()?.to_hex())
    }

    /// Deletes a branch if it is still at `expected`.
    #[napi]
    pub fn delete_branch(&self, name: String, expected: String) -> Result<()> {
        self.inner
            .delete_branch(&name, convert::id(&expected)?)
            .or_js()
    }

    /// Rebuilds refs from the objects present (lost snapshots, `lost-found/`).
    #[napi]
    pub fn reindex(&self) -> Result<ReindexReport> {
        let r = self.inner.reindex().or_js()?;
        Ok(ReindexReport {
            commits: r.commits as f64,
            tags_restored: r
                .tags_restored
                .into_iter()
                .map(|(name, id)| RefEntry {
                    name,
                    id: id.to_hex(),
                })
                .collect(),
            lost_found: hexes(r.lost_found),
        })
    }

    /// `sync(this, dst, 'heads/' + branch, options)`.
    #[napi(ts_args_type = "dst: Store | Repo, branch: string, options?: { force?: boolean }")]
    pub fn sync(
        &self,
        dst: StoreArg<'_>,
        branch: String,
        options: Option<Object<'_>>,
    ) -> Result<SyncReport> {
        run_sync(
            &self.store_arc(),
            &store_of(&dst),
            &RsRepo::<Shared>::branch_ref(&branch),
            &sync_options(options)?,
        )
    }

    /// `gc(this, options)`.
    #[napi(ts_args_type = "options?: { pins?: string[] }")]
    pub fn gc(&self, options: Option<Object<'_>>) -> Result<GcReport> {
        let options = gc_options(options)?;
        Ok(GcReport::from(
            snapgraph_store::gc::collect_with(&*self.store_arc(), &options).or_js()?,
        ))
    }

    /// `verify(this, readData)`.
    #[napi]
    pub fn verify(&self, read_data: Option<bool>) -> Result<VerifyReport> {
        Ok(VerifyReport::from(
            rs_verify(&*self.store_arc(), read_data.unwrap_or(true)).or_js()?,
        ))
    }
}
