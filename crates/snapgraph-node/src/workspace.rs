//! `Workspace`, its commit and checkout results, and packed snapshots.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use indexmap::IndexMap;
use napi::bindgen_prelude::{
    AsyncTask, Buffer, Either, Function, JsObjectValue, JsValue, Null, Object, ToNapiValue,
    Uint8ArraySlice, Unknown,
};
use napi::{Env, ValueType};
use napi_derive::napi;
use snapgraph::{
    CheckoutOptions, CheckoutPolicy, CommitOptions as RsCommitOptions, DriftCheck, DriftPolicy,
    ExternalRead, ObjectId, ObjectSource, SnapshotKey, SnapshotOptions as RsSnapshotOptions,
    Workspace as RsWorkspace,
};

use crate::convert::{self, Capabilities, DirEntry, JsLimits, Metadata, OrJs, Read, WalkEntry};
use crate::error::{error, invalid, napi, Result};
use crate::source::{Bytes, JsSource, ObjectsArg};
use crate::task::{spawn, spawn_built, spawn_then, Build, Built, Job};
use crate::value::{self, ObjectsAs};

/// Where a workspace lives. A call takes it out for its duration and puts it back,
/// so a reentrant call (from an `objects` function) or a call while a `…Async` call
/// holds it finds the slot empty and throws `BUSY`; no lock is held while
/// JavaScript or the engine runs.
type Slot = Arc<Mutex<Option<RsWorkspace>>>;

/// Bytes `Workspace.writeStream` asks its `read` callback for per call.
const STREAM_BLOCK: u32 = 1 << 20;

fn busy() -> crate::error::Error {
    error(
        "BUSY",
        "the workspace is in use by a pending async call (or by the call that invoked this callback)",
    )
}

fn take(slot: &Slot) -> Result<RsWorkspace> {
    slot.lock()
        .map_err(|_| error("OTHER", "workspace lock poisoned by an earlier panic"))?
        .take()
        .ok_or_else(busy)
}

fn put(slot: &Slot, ws: RsWorkspace) {
    if let Ok(mut guard) = slot.lock() {
        *guard = Some(ws);
    }
}

/// An in-memory file system with interpreter state: write, commit, check out.
#[napi]
pub struct Workspace {
    slot: Slot,
}

impl Workspace {
    /// Wraps a Rust workspace.
    pub fn wrap(ws: RsWorkspace) -> Self {
        Self {
            slot: Arc::new(Mutex::new(Some(ws))),
        }
    }

    /// Runs `f` on the workspace, taken out of its slot for the call.
    pub fn with<T>(&self, f: impl FnOnce(&mut RsWorkspace) -> Result<T>) -> Result<T> {
        let mut ws = take(&self.slot)?;
        let out = f(&mut ws);
        put(&self.slot, ws);
        out
    }

    /// Lends the workspace to work on the thread pool; it is back in its slot once
    /// the promise is settled (on the JavaScript thread), so every call made while
    /// the promise is pending throws `BUSY`.
    pub fn lend<T, F>(&self, f: F) -> Result<AsyncTask<Job<T>>>
    where
        T: Send + napi::bindgen_prelude::ToNapiValue + napi::bindgen_prelude::TypeName + 'static,
        F: FnOnce(&mut RsWorkspace) -> Result<T> + Send + 'static,
    {
        let (work, after) = self.loan(f)?;
        Ok(spawn_then(work, after))
    }

    /// [`lend`](Self::lend), with the value built into JavaScript by `build`.
    fn lend_built<T, F>(&self, build: Build<T>, f: F) -> Result<AsyncTask<Built<T>>>
    where
        T: Send + 'static,
        F: FnOnce(&mut RsWorkspace) -> Result<T> + Send + 'static,
    {
        let (work, after) = self.loan(f)?;
        Ok(spawn_built(work, after, build))
    }

    /// The workspace taken out of its slot: the work to run on it off the event loop,
    /// and what puts it back (run on the JavaScript thread once the promise settles).
    #[allow(clippy::type_complexity)]
    fn loan<T, F>(
        &self,
        f: F,
    ) -> Result<(
        impl FnOnce() -> Result<T> + Send + 'static,
        impl FnOnce() + Send + 'static,
    )>
    where
        T: Send + 'static,
        F: FnOnce(&mut RsWorkspace) -> Result<T> + Send + 'static,
    {
        let ws = take(&self.slot)?;
        let carry: Slot = Arc::new(Mutex::new(None));
        let back = carry.clone();
        let slot = self.slot.clone();
        let work = move || {
            let mut ws = ws;
            let out = f(&mut ws);
            put(&carry, ws);
            out
        };
        let after = move || {
            if let Some(ws) = back.lock().ok().and_then(|mut g| g.take()) {
                put(&slot, ws);
            }
        };
        Ok((work, after))
    }
}

// Declares the TypeScript interface only: the value is built by `value::commit`
// (napi-rs's derived conversion cost more than the engine's own per-turn work).
/// What a commit produced.
#[napi(object)]
#[allow(dead_code)]
pub struct CommitResult {
    /// The commit's id.
    pub id: String,
    /// Its generation (1 for a root commit).
    pub generation: f64,
    /// Objects to persist, keyed by id, in dependency order (referenced objects
    /// first, the commit last): writing them in this order keeps a store closed. A
    /// null-prototype object (like `querystring.parse`'s): use `Object.entries`,
    /// `Object.hasOwn` or `id in objects`, not `objects.hasOwnProperty`. With the
    /// commit option `objectsAs: 'map'`, a `Map` in the same order instead
    /// (`CommitResultOf`). Up to
    /// 16 MiB of objects, each `Buffer` is a view into one buffer per commit (like
    /// Node's pooled small `Buffer`s; `Buffer.from(b)` copies one out).
    pub objects: IndexMap<String, Buffer>,
    /// How many objects.
    pub object_count: u32,
    /// Their total size in bytes.
    pub stored_bytes: f64,
    /// The commit as a self-contained packed snapshot, or `null` when `have` made it
    /// incremental.
    pub packed: Either<Buffer, Null>,
    /// Whether `objects` holds everything the commit needs.
    pub is_complete: bool,
}

/// What a checkout or restore hands back about the restored commit's external
/// reads: pins to serve, stale paths, and the drift check to drive before first use.
#[napi]
pub struct Restore {
    commit: ObjectId,
    pins: Vec<ExternalRead>,
    stale: Vec<String>,
    check: Option<DriftCheck>,
}

impl From<snapgraph::Restore> for Restore {
    fn from(r: snapgraph::Restore) -> Self {
        Self {
            commit: r.commit(),
            pins: r.pins().to_vec(),
            stale: r.stale().to_vec(),
            check: r.into_drift_check(),
        }
    }
}

#[napi]
impl Restore {
    /// The restored commit.
    #[napi(getter)]
    pub fn commit(&self) -> String {
        self.commit.to_hex()
    }

    /// Reads recorded with a revision: serve exactly these revisions.
    #[napi]
    pub fn pins(&self) -> Vec<Read> {
        self.pins.iter().map(Read::from).collect()
    }

    /// The pinned revision of `source`, if any.
    #[napi]
    pub fn revision_for(&self, source: String) -> Option<String> {
        self.pins
            .iter()
            .find(|r| r.source == source)
            .and_then(|r| r.revision.clone())
    }

    /// Workspace paths whose cached bytes must be re-read live.
    #[napi]
    pub fn stale(&self) -> Vec<String> {
        self.stale.clone()
    }

    /// Whether a drift check must run before first use.
    #[napi]
    pub fn needs_drift_check(&self) -> bool {
        self.check.is_some()
    }

    /// Sources the drift check still needs a live fingerprint for, sorted.
    #[napi]
    pub fn pending(&self) -> Vec<String> {
        self.check
            .as_ref()
            .map(DriftCheck::pending)
            .unwrap_or_default()
    }

    /// Every source the drift check covers, with its snapshot fingerprint.
    #[napi]
    pub fn expected(&self) -> IndexMap<String, String> {
        self.check
            .as_ref()
            .map(|c| {
                c.expected()
                    .map(|(s, f)| (s.to_string(), f.to_string()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Supplies the live fingerprint of `source` (`null`: it no longer exists).
    /// False, recording nothing, for a source the check does not cover.
    #[napi]
    pub fn supply(&mut self, source: String, live: Option<String>) -> bool {
        self.check
            .as_mut()
            .is_some_and(|c| c.supply(&source, live.as_deref()))
    }

    /// Succeeds when every covered source was supplied and none moved; else throws
    /// `DRIFT` naming them. Calling it again gives the same answer.
    #[napi]
    pub fn finish(&self) -> Result<()> {
        match &self.check {
            Some(c) => c.clone().finish().or_js(),
            None => Ok(()),
        }
    }
}

/// What `commit` reads out of its options object.
struct CommitArgs<'a> {
    parents: Vec<ObjectId>,
    have_ids: Vec<ObjectId>,
    have_in: Option<JsSource<'a>>,
    parent_source: Option<JsSource<'a>>,
    meta: BTreeMap<String, String>,
    exclude_files: bool,
    exclude_state: bool,
    objects_as: ObjectsAs,
}

/// Option `name` of an options object (`undefined`: `None`).
pub(crate) fn get<'a, V: napi::bindgen_prelude::FromNapiValue>(
    o: &Object<'a>,
    name: &str,
) -> Result<Option<V>> {
    o.get::<V>(name)
        .map_err(|e| invalid(format!("option {name}: {}", e.reason)))
}

/// Option `name` of an options object as it is, for a caller that tests its type
/// before converting it (a conversion that fails builds an error message first).
fn raw<'a>(o: &Object<'a>, name: &std::ffi::CStr) -> Result<(Unknown<'a>, ValueType)> {
    let v: Unknown<'a> = o
        .get_c_named_property_unchecked(name)
        .map_err(|e| invalid(format!("option {}: {}", name.to_string_lossy(), e.reason)))?;
    let t = v
        .get_type()
        .map_err(|e| invalid(format!("option {}: {}", name.to_string_lossy(), e.reason)))?;
    Ok((v, t))
}

impl<'a> CommitArgs<'a> {
    /// Reads the options. `have` is tested for the per-turn shape first (a `Map` or a
    /// `Set`: an object with `get` or `has`) before napi-rs's conversions are tried:
    /// each one that fails builds an error message, and a class test looks up a
    /// constructor.
    fn parse(options: Option<Object<'a>>) -> Result<Self> {
        let mut args = CommitArgs {
            parents: Vec::new(),
            have_ids: Vec::new(),
            have_in: None,
            parent_source: None,
            meta: BTreeMap::new(),
            exclude_files: false,
            exclude_state: false,
            objects_as: ObjectsAs::Record,
        };
        let Some(o) = options else {
            return Ok(args);
        };
        if let Some(p) = get::<Vec<String>>(&o, "parents")? {
            args.parents = convert::ids(&p)?;
        }
        let (have, kind) = raw(&o, c"have")?;
        match kind {
            ValueType::Undefined => {}
            ValueType::Object if !have.is_array().map_err(napi)? => {
                let object: Object<'a> = o.get_c_named_property_unchecked(c"have").map_err(napi)?;
                args.have_in = match JsSource::with_methods(object)? {
                    Some(source) => Some(source),
                    None => get::<ObjectsArg<'a>>(&o, "have")?
                        .map(JsSource::new)
                        .transpose()?,
                };
            }
            _ => match get::<Either<Vec<String>, ObjectsArg<'a>>>(&o, "have")? {
                Some(Either::A(ids)) => args.have_ids = convert::ids(&ids)?,
                Some(Either::B(source)) => args.have_in = Some(JsSource::new(source)?),
                None => {}
            },
        }
        if let Some(source) = get::<ObjectsArg<'a>>(&o, "parentSource")? {
            args.parent_source = Some(JsSource::new(source)?);
        }
        if let Some(meta) = get::<BTreeMap<String, String>>(&o, "meta")? {
            args.meta = meta;
        }
        args.exclude_files = get::<bool>(&o, "excludeFiles")?.unwrap_or(false);
        args.exclude_state = get::<bool>(&o, "excludeState")?.unwrap_or(false);
        args.objects_as = ObjectsAs::parse(get::<String>(&o, "objectsAs")?.as_deref())?;
        Ok(args)
    }

    /// The core's options, borrowing the sources.
    fn options(&self) -> RsCommitOptions<'_> {
        let mut opts = RsCommitOptions::new().parents(self.parents.iter().copied());
        if !self.have_ids.is_empty() {
            opts = opts.have(self.have_ids.iter());
        }
        if let Some(s) = &self.have_in {
            opts = opts.have_in(s as &dyn ObjectSource);
        }
        if let Some(s) = &self.parent_source {
            opts = opts.parent_source(s as &dyn ObjectSource);
        }
        for (k, v) in &self.meta {
            opts = opts.meta(k.clone(), v.clone());
        }
        opts.exclude_files(self.exclude_files)
            .exclude_state(self.exclude_state)
    }
}

/// The options of a checkout.
struct CheckoutArgs {
    policy: CheckoutPolicy,
    drift: DriftPolicy,
    shallow: bool,
}

impl CheckoutArgs {
    fn parse(options: Option<Object<'_>>) -> Result<Self> {
        let Some(o) = options else {
            return Ok(Self {
                policy: CheckoutPolicy::default(),
                drift: DriftPolicy::default(),
                shallow: false,
            });
        };
        Ok(Self {
            policy: convert::policy(get::<String>(&o, "policy")?.as_deref())?,
            drift: convert::drift(get::<String>(&o, "drift")?.as_deref())?,
            shallow: get::<bool>(&o, "shallow")?.unwrap_or(false),
        })
    }

    fn run<S: ObjectSource + ?Sized>(
        &self,
        ws: &mut RsWorkspace,
        id: ObjectId,
        source: &S,
    ) -> Result<Restore> {
        let options = CheckoutOptions::new()
            .policy(self.policy)
            .drift(self.drift)
            .shallow(self.shallow);
        Ok(Restore::from(
            ws.checkout_with(id, source, options).or_js()?,
        ))
    }
}

/// The options of a packed snapshot.
fn snapshot_options(options: Option<Object<'_>>) -> Result<RsSnapshotOptions> {
    let mut s = RsSnapshotOptions::default();
    if let Some(o) = options {
        s.exclude_files = get::<bool>(&o, "excludeFiles")?.unwrap_or(false);
        s.exclude_state = get::<bool>(&o, "excludeState")?.unwrap_or(false);
        s.compress = get::<bool>(&o, "compress")?.unwrap_or(false);
    }
    Ok(s)
}

fn pack(ws: &RsWorkspace, options: RsSnapshotOptions, key: Option<&SnapshotKey>) -> Result<Buffer> {
    Ok(Buffer::from(ws.snapshot_with(options, key).or_js()?))
}

fn store_only(what: &str, source: &JsSource<'_>) -> Result<Arc<dyn snapgraph_store::Store>> {
    source.store().ok_or_else(|| {
        invalid(format!(
            "{what} runs off the event loop, where JavaScript values cannot be read: pass a Store or Repo (or use the synchronous call)"
        ))
    })
}

#[napi]
impl Workspace {
    /// An empty workspace: `/` and empty state.
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Self::wrap(RsWorkspace::new())
    }

    /// An independent copy sharing everything until either side writes (O(1)).
    #[napi]
    pub fn copy(&self) -> Result<Workspace> {
        self.with(|ws| Ok(Workspace::wrap(ws.clone())))
    }

    // ----- files -----

    /// Writes a file, creating parent directories.
    #[napi]
    pub fn write(&self, path: String, data: Uint8ArraySlice<'_>) -> Result<()> {
        self.with(|ws| ws.write(&path, data.as_ref()).or_js())
    }

    /// A file's bytes.
    #[napi]
    pub fn read(&self, path: String) -> Result<Buffer> {
        self.with(|ws| Ok(Buffer::from(ws.read(&path).or_js()?.to_vec())))
    }

    /// A symlink's target (symlinks are stored, never followed).
    #[napi]
    pub fn read_link(&self, path: String) -> Result<String> {
        self.with(|ws| Ok(ws.read_link(&path).or_js()?.to_string()))
    }

    /// Removes a file, symlink or directory (with everything under it).
    #[napi]
    pub fn remove(&self, path: String) -> Result<()> {
        self.with(|ws| ws.remove(&path).or_js())
    }

    /// Creates a directory and its parents; an existing directory is left as it is.
    #[napi]
    pub fn mkdir(&self, path: String) -> Result<()> {
        self.with(|ws| ws.mkdir(&path).or_js())
    }

    /// Moves a file, symlink or directory.
    #[napi]
    pub fn rename(&self, from: String, to: String) -> Result<()> {
        self.with(|ws| ws.rename(&from, &to).or_js())
    }

    /// Creates a symlink at `path` pointing at `target`.
    #[napi]
    pub fn symlink(&self, path: String, target: String) -> Result<()> {
        self.with(|ws| ws.symlink(&path, &target).or_js())
    }

    /// Sets permission bits (at most `0o7777`): anything else, `NaN` or a fraction
    /// included, throws `INVALID_ARGUMENT` (a `u32` argument would have wrapped
    /// `2 ** 40` to 0 and taken `NaN` as 0 without a word).
    #[napi]
    pub fn set_mode(&self, path: String, mode: f64) -> Result<()> {
        let mode = convert::count(&format!("{path}: mode"), mode)?;
        let mode = u32::try_from(mode).map_err(|_| {
            crate::error::invalid(format!("{path}: mode {mode:o} is out of range (0 to 7777)"))
        })?;
        self.with(|ws| ws.set_mode(&path, mode).or_js())
    }

    /// A directory's entries, sorted by name.
    #[napi]
    pub fn list(&self, path: String) -> Result<Vec<DirEntry>> {
        self.with(|ws| {
            Ok(ws
                .list(&path)
                .or_js()?
                .into_iter()
                .map(|e| DirEntry {
                    name: e.name,
                    kind: convert::kind_name(e.metadata.kind).to_string(),
                    mode: e.metadata.mode,
                    size: e.metadata.size as f64,
                })
                .collect())
        })
    }

    /// What is at `path`.
    #[napi]
    pub fn metadata(&self, path: String) -> Result<Metadata> {
        self.with(|ws| Ok(Metadata::from(ws.metadata(&path).or_js()?)))
    }

    /// Whether anything is at `path` (false for an invalid path).
    #[napi]
    pub fn exists(&self, path: String) -> Result<bool> {
        self.with(|ws| Ok(ws.exists(&path)))
    }

    /// Every path except `/`, depth-first in sorted order.
    #[napi]
    pub fn walk(&self) -> Result<Vec<WalkEntry>> {
        self.with(|ws| {
            Ok(ws
                .walk()
                .into_iter()
                .map(|(path, m)| WalkEntry {
                    path,
                    kind: convert::kind_name(m.kind).to_string(),
                    mode: m.mode,
                    size: m.size as f64,
                })
                .collect())
        })
    }

    // ----- state, configuration -----

    /// Replaces the opaque interpreter state.
    #[napi]
    pub fn set_state(&self, state: Uint8ArraySlice<'_>) -> Result<()> {
        self.with(|ws| {
            ws.set_state(state.as_ref().to_vec());
            Ok(())
        })
    }

    /// The opaque interpreter state.
    #[napi]
    pub fn state(&self) -> Result<Buffer> {
        self.with(|ws| Ok(Buffer::from(ws.state().to_vec())))
    }

    /// The commit this workspace was last committed or checked out at.
    #[napi]
    pub fn head(&self) -> Result<Option<String>> {
        self.with(|ws| Ok(ws.head().map(|h| h.to_hex())))
    }

    /// Threads a commit may hash new content on (1: the calling thread only).
    #[napi]
    pub fn parallelism(&self) -> Result<u32> {
        self.with(|ws| Ok(ws.parallelism() as u32))
    }

    /// Sets the threads a commit may use (at least 1: 0 counts as 1); ids never
    /// depend on it. A negative, fractional or `NaN` count throws
    /// `INVALID_ARGUMENT`.
    #[napi]
    pub fn set_parallelism(&self, threads: f64) -> Result<()> {
        let threads = usize::try_from(convert::count("threads", threads)?).unwrap_or(usize::MAX);
        self.with(|ws| {
            ws.set_parallelism(threads);
            Ok(())
        })
    }

    /// The limits checkouts and restores into this workspace obey.
    #[napi]
    pub fn limits(&self) -> Result<JsLimits> {
        self.with(|ws| Ok(JsLimits::from(ws.limits())))
    }

    /// Sets the limits (lower them for input you do not trust).
    #[napi]
    pub fn set_limits(&self, limits: JsLimits) -> Result<()> {
        let limits = limits.to_rust()?;
        self.with(|ws| {
            ws.set_limits(limits);
            Ok(())
        })
    }

    /// Sets what this environment offers; commits record it, checkouts compare.
    #[napi]
    pub fn set_capabilities(&self, capabilities: Capabilities) -> Result<()> {
        self.with(|ws| {
            ws.set_capabilities(capabilities.to_rust());
            Ok(())
        })
    }

    /// The fingerprint set on this workspace.
    #[napi]
    pub fn capabilities(&self) -> Result<Option<Capabilities>> {
        self.with(|ws| Ok(ws.capabilities().map(Capabilities::from)))
    }

    /// Declares that content starting with `prefix` needs `feature`.
    #[napi]
    pub fn require_feature_for_prefix(
        &self,
        prefix: Uint8ArraySlice<'_>,
        feature: String,
    ) -> Result<()> {
        self.with(|ws| {
            ws.require_feature_for_prefix(prefix.as_ref().to_vec(), feature);
            Ok(())
        })
    }

    // ----- recorded reads -----

    /// Records a read of an external source; the next commits store it.
    #[napi]
    pub fn record_read(&self, read: Read) -> Result<()> {
        let read = read.to_rust()?;
        self.with(|ws| ws.record_read(read).or_js())
    }

    /// Forgets the record of `source`; returns it if there was one.
    #[napi]
    pub fn forget_read(&self, source: String) -> Result<Option<Read>> {
        self.with(|ws| Ok(ws.forget_read(&source).as_ref().map(Read::from)))
    }

    /// The recorded external reads, sorted by source.
    #[napi]
    pub fn external_reads(&self) -> Result<Vec<Read>> {
        self.with(|ws| Ok(ws.external_reads().map(Read::from).collect()))
    }

    /// Paths whose cached bytes a restore marked stale.
    #[napi]
    pub fn stale_paths(&self) -> Result<Vec<String>> {
        self.with(|ws| Ok(ws.stale_paths().map(str::to_string).collect()))
    }

    /// Whether `path` is marked stale.
    #[napi]
    pub fn is_stale(&self, path: String) -> Result<bool> {
        self.with(|ws| Ok(ws.is_stale(&path)))
    }

    // ----- shallow checkouts -----

    /// Whether a file's bytes are in memory (false after a shallow checkout until
    /// `loadContent`).
    #[napi]
    pub fn is_loaded(&self, path: String) -> Result<bool> {
        self.with(|ws| Ok(ws.is_loaded(&path)))
    }

    /// The content id of a committed file (its chunk or manifest), if known.
    #[napi]
    pub fn file_content_id(&self, path: String) -> Result<Option<String>> {
        self.with(|ws| Ok(ws.file_content_id(&path).map(|i| i.to_hex())))
    }

    /// Fetches and verifies the bytes of a file a shallow checkout left in the store.
    #[napi(ts_args_type = "path: string, objects: Objects")]
    pub fn load_content(&self, path: String, objects: ObjectsArg<'_>) -> Result<()> {
        let source = JsSource::new(objects)?;
        self.with(|ws| ws.load_content(&path, &source).or_js())
    }

    /// Writes the file at `path` from `read`, called with a byte count (1 MiB) until
    /// it returns an empty array, `null` or `undefined` (e.g. `(n) => { const b =
    /// Buffer.alloc(n); const got = fs.readSync(fd, b); return b.subarray(0, got) }`),
    /// cutting the bytes into their objects as they arrive: the file is never whole
    /// in memory. Each object goes to `store` (a `Store` or `Repo`) as it is made; the
    /// workspace keeps the file's reference, as after a shallow checkout, and the next
    /// commit does not emit its objects. The ids are those `write` and a commit would
    /// make. Returns the file's size. Throws what `write` throws for the path
    /// (`IS_A_DIRECTORY`, ...), and `CALLBACK` when `read` throws.
    ///
    /// Over a file a shallow checkout left in `store`, the chunks the new bytes
    /// still hold are hashed against that version's instead of cut, and not put
    /// again: an edit of a large file costs a hash of it and a cut of what changed.
    /// `size`, the new size when known, lets an unchanged tail after a change of
    /// length be found too (without it only an unchanged start is).
    #[napi(
        ts_args_type = "path: string, read: (size: number) => Uint8Array | null | undefined, store: Store | Repo, size?: number"
    )]
    pub fn write_stream(
        &self,
        path: String,
        read: Function<'_, u32, Bytes<'_>>,
        store: Either<
            napi::bindgen_prelude::ClassInstance<'_, crate::store::Store>,
            napi::bindgen_prelude::ClassInstance<'_, crate::store::Repo>,
        >,
        size: Option<f64>,
    ) -> Result<f64> {
        let store = match store {
            Either::A(s) => s.inner.clone(),
            Either::B(r) => r.store_arc(),
        };
        let put = |set: snapgraph::ObjectSet| -> Result<()> {
            let batch: Vec<(ObjectId, &[u8])> = set.iter().map(|(id, b)| (*id, b)).collect();
            store.put_many(&batch).or_js()
        };
        // Over the version a shallow checkout left in the store, when there is one
        // (its manifest unreadable: the new bytes do not need it, cut them afresh).
        let source: &dyn snapgraph_store::Store = &*store;
        let size = size.map(|s| convert::count("size", s)).transpose()?;
        let over = self.with(|ws| {
            let expected = size
                .or_else(|| ws.metadata(&path).ok().map(|m| m.size))
                .unwrap_or(0);
            Ok(ws.ingest_over(&path, source, expected).ok().flatten())
        })?;
        let mut ingest = over.unwrap_or_default();
        // Gathered into store writes of a few MiB (fewer transactions and syncs).
        let mut pending = snapgraph::ObjectSet::new();
        loop {
            let block = read
                .call(STREAM_BLOCK)
                .map_err(|e| error("CALLBACK", format!("read threw: {}", e.reason)))?;
            let block = match block {
                napi::bindgen_prelude::Either3::A(b) => b,
                _ => break,
            };
            if block.as_ref().is_empty() {
                break;
            }
            pending.append(ingest.push(block.as_ref()));
            if pending.stored_bytes() >= snapgraph::ingest::PUT_BYTES {
                put(std::mem::take(&mut pending))?;
            }
        }
        let size = ingest.len();
        let (file, last) = ingest.finish();
        pending.append(last);
        if !pending.is_empty() {
            put(pending)?;
        }
        self.with(|ws| ws.write_ingested(&path, file).or_js())?;
        Ok(size as f64)
    }

    /// Hands the bytes of the file at `path` to `write`, a window of chunks at a time
    /// for a file a shallow checkout left in `objects` (never whole in memory), each
    /// chunk re-hashed and checked as `loadContent` checks it. The bytes are the file
    /// only once this returns: on an error, discard what `write` was given. A loaded
    /// file is one call. Returns the bytes handed over. Throws what `loadContent`
    /// throws, and `CALLBACK` when `write` throws.
    #[napi(ts_args_type = "path: string, objects: Objects, write: (chunk: Buffer) => void")]
    pub fn read_stream(
        &self,
        path: String,
        objects: ObjectsArg<'_>,
        write: Function<'_, Buffer, Unknown<'_>>,
    ) -> Result<f64> {
        let source = JsSource::new(objects)?;
        self.with(|ws| {
            let mut written = 0u64;
            for piece in ws.content_pieces(&path, &source).or_js()? {
                let piece = piece.or_js()?;
                written += piece.len() as u64;
                write
                    .call(Buffer::from(piece.into_owned()))
                    .map_err(|e| error("CALLBACK", format!("write threw: {}", e.reason)))?;
            }
            Ok(written as f64)
        })
    }

    // ----- commit, checkout -----

    /// Commits the workspace: `{ parents?, have?, parentSource?, meta?, objectsAs? }`.
    /// `have` lists ids the destination holds (with their closures) or is an
    /// `objects` value asked about changed paths, in one batch per commit;
    /// `objectsAs: 'map'` makes the result's `objects` a `Map`. On error nothing
    /// moves.
    #[napi(
        ts_generic_types = "O extends CommitOptions = CommitOptions",
        ts_args_type = "options?: O",
        ts_return_type = "CommitResultOf<O>"
    )]
    pub fn commit<'env>(
        &self,
        env: &'env Env,
        options: Option<Object<'_>>,
    ) -> Result<Unknown<'env>> {
        let args = CommitArgs::parse(options)?;
        let commit = self.with(|ws| ws.commit(args.options()).or_js())?;
        value::commit_as(env, commit, args.objects_as)
    }

    /// The per-turn `commit`, called by the JavaScript `commit` that `helpers::INSTALL`
    /// puts on the prototype (it takes this method off the prototype): the parents'
    /// ids one after the other (each 64 hex digits), `have` and its `get` and `has`
    /// methods as the JavaScript read them (`has` a function, or `have` undefined).
    /// Returns `value::Encoded`'s buffer (above 16 MiB the finished result instead),
    /// or `null` (nothing done) when the parents are not 64 hex digits each.
    #[napi(skip_typescript, js_name = "_commitTurn")]
    pub fn commit_turn<'env>(
        &self,
        env: &'env Env,
        parents: String,
        have: Option<Object<'_>>,
        get: Option<Function<'_, String, Bytes<'_>>>,
        has: Option<Function<'_, String, bool>>,
    ) -> Result<Unknown<'env>> {
        // Parents that are not 64 hex digits each: `null`, before anything is done, and
        // the JavaScript `commit` hands its options to the native `commit`, which
        // reports them.
        if !parents.len().is_multiple_of(64) {
            return Null.into_unknown(env).map_err(napi);
        }
        let Ok(parents) = parents
            .as_bytes()
            .chunks(64)
            .map(ObjectId::from_hex)
            .collect::<std::result::Result<Vec<_>, _>>()
        else {
            return Null.into_unknown(env).map_err(napi);
        };
        let have_in = have.map(|object| JsSource::Object { object, get, has });
        let mut opts = RsCommitOptions::new().parents(parents);
        if let Some(s) = &have_in {
            opts = opts.have_in(s as &dyn ObjectSource);
        }
        let commit = self.with(|ws| ws.commit(opts).or_js())?;
        match value::Encoded::new(commit) {
            Ok(encoded) => {
                let mut out = vec![0; encoded.size()];
                encoded.write_into(&mut out)?;
                Ok(value::buffer(env, out)?.to_unknown())
            }
            Err(large) => value::commit_large(env, large),
        }
    }

    /// `commit` on the thread pool. `have` and `parentSource` must be id lists or
    /// snapgraph stores (JavaScript values cannot be read off the event loop).
    #[napi(
        ts_generic_types = "O extends CommitOptions = CommitOptions",
        ts_args_type = "options?: O",
        ts_return_type = "Promise<CommitResultOf<O>>"
    )]
    pub fn commit_async(
        &self,
        options: Option<Object<'_>>,
    ) -> Result<AsyncTask<Built<snapgraph::Commit>>> {
        let args = CommitArgs::parse(options)?;
        let have_in = args
            .have_in
            .as_ref()
            .map(|s| store_only("commitAsync's have", s))
            .transpose()?;
        let parent_source = args
            .parent_source
            .as_ref()
            .map(|s| store_only("commitAsync's parentSource", s))
            .transpose()?;
        let (parents, have_ids, meta) = (args.parents, args.have_ids, args.meta);
        let (exclude_files, exclude_state) = (args.exclude_files, args.exclude_state);
        let build: Build<snapgraph::Commit> = match args.objects_as {
            ObjectsAs::Record => value::commit,
            ObjectsAs::Map => value::commit_map,
        };
        self.lend_built(build, move |ws| {
            let mut opts = RsCommitOptions::new()
                .parents(parents)
                .exclude_files(exclude_files)
                .exclude_state(exclude_state);
            if !have_ids.is_empty() {
                opts = opts.have(have_ids.iter());
            }
            if let Some(s) = &have_in {
                opts = opts.have_in(s.as_ref() as &dyn ObjectSource);
            }
            if let Some(s) = &parent_source {
                opts = opts.parent_source(s.as_ref() as &dyn ObjectSource);
            }
            for (k, v) in meta {
                opts = opts.meta(k, v);
            }
            ws.commit(opts).or_js()
        })
    }

    /// Replaces files and state with those of commit `id`, all or nothing:
    /// `{ policy?: 'superset' | 'strict' | 'force', drift?: 'strict' | 'off', shallow? }`.
    #[napi(ts_args_type = "id: string, objects: Objects, options?: CheckoutOptions")]
    pub fn checkout(
        &self,
        id: String,
        objects: ObjectsArg<'_>,
        options: Option<Object<'_>>,
    ) -> Result<Restore> {
        let id = convert::id(&id)?;
        let source = JsSource::new(objects)?;
        let args = CheckoutArgs::parse(options)?;
        self.with(|ws| args.run(ws, id, &source))
    }

    /// `checkout` on the thread pool, from a `Store` or `Repo`.
    #[napi(
        ts_args_type = "id: string, objects: Store | Repo, options?: CheckoutOptions",
        ts_return_type = "Promise<Restore>"
    )]
    pub fn checkout_async(
        &self,
        id: String,
        objects: ObjectsArg<'_>,
        options: Option<Object<'_>>,
    ) -> Result<AsyncTask<Job<Restore>>> {
        let id = convert::id(&id)?;
        let store = store_only("checkoutAsync", &JsSource::new(objects)?)?;
        let args = CheckoutArgs::parse(options)?;
        self.lend(move |ws| args.run(ws, id, &store))
    }

    // ----- packed snapshots -----

    /// The workspace as one self-contained packed snapshot:
    /// `{ excludeFiles?, excludeState?, compress? }`.
    #[napi(ts_args_type = "options?: SnapshotOptions")]
    pub fn snapshot(&self, options: Option<Object<'_>>) -> Result<Buffer> {
        let options = snapshot_options(options)?;
        self.with(|ws| pack(ws, options, None))
    }

    /// `snapshot` on the thread pool.
    #[napi(
        ts_args_type = "options?: SnapshotOptions",
        ts_return_type = "Promise<Buffer>"
    )]
    pub fn snapshot_async(&self, options: Option<Object<'_>>) -> Result<AsyncTask<Job<Buffer>>> {
        let options = snapshot_options(options)?;
        self.lend(move |ws| pack(ws, options, None))
    }

    /// A snapshot authenticated with a BLAKE3 keyed MAC (`key`: 32 bytes).
    #[napi]
    pub fn snapshot_keyed(&self, key: Uint8ArraySlice<'_>) -> Result<Buffer> {
        let key = convert::key(key.as_ref())?;
        self.with(|ws| pack(ws, RsSnapshotOptions::default(), Some(&key)))
    }

    /// A fresh workspace restored from a snapshot.
    #[napi(factory)]
    pub fn from_snapshot(bytes: Uint8ArraySlice<'_>) -> Result<Workspace> {
        Ok(Workspace::wrap(
            RsWorkspace::from_snapshot(bytes.as_ref()).or_js()?,
        ))
    }

    /// `fromSnapshot` on the thread pool.
    #[napi(ts_return_type = "Promise<Workspace>")]
    pub fn from_snapshot_async(bytes: Uint8ArraySlice<'_>) -> AsyncTask<Job<Workspace>> {
        let bytes = bytes.as_ref().to_vec();
        spawn(move || Ok(Workspace::wrap(RsWorkspace::from_snapshot(&bytes).or_js()?)))
    }

    /// A fresh workspace restored from a keyed snapshot.
    #[napi(factory)]
    pub fn from_snapshot_keyed(
        bytes: Uint8ArraySlice<'_>,
        key: Uint8ArraySlice<'_>,
    ) -> Result<Workspace> {
        let key = convert::key(key.as_ref())?;
        Ok(Workspace::wrap(
            RsWorkspace::from_snapshot_keyed(bytes.as_ref(), &key).or_js()?,
        ))
    }

    /// Replaces files and state with a snapshot's, keeping this workspace's
    /// configuration; on error nothing changes.
    #[napi]
    pub fn restore_snapshot(&self, bytes: Uint8ArraySlice<'_>) -> Result<Restore> {
        self.with(|ws| Ok(Restore::from(ws.restore_snapshot(bytes.as_ref()).or_js()?)))
    }

    /// `restoreSnapshot` on the thread pool.
    #[napi(ts_return_type = "Promise<Restore>")]
    pub fn restore_snapshot_async(
        &self,
        bytes: Uint8ArraySlice<'_>,
    ) -> Result<AsyncTask<Job<Restore>>> {
        let bytes = bytes.as_ref().to_vec();
        self.lend(move |ws| Ok(Restore::from(ws.restore_snapshot(&bytes).or_js()?)))
    }

    /// `restoreSnapshot` for a keyed snapshot: a wrong key fails before anything
    /// is applied.
    #[napi]
    pub fn restore_snapshot_keyed(
        &self,
        bytes: Uint8ArraySlice<'_>,
        key: Uint8ArraySlice<'_>,
    ) -> Result<Restore> {
        let key = convert::key(key.as_ref())?;
        self.with(|ws| {
            Ok(Restore::from(
                ws.restore_snapshot_keyed(bytes.as_ref(), &key).or_js()?,
            ))
        })
    }
}
