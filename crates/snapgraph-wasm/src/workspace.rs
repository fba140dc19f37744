//! `Workspace`, `Commit`, `Restore` and `DriftCheck` for JavaScript.

use js_sys::{Array, Object, Uint8Array};
use snapgraph::{
    CapabilityFingerprint, CheckoutOptions, CheckoutPolicy, CommitOptions, DriftPolicy, EntryKind,
    ExternalRead, Limits, Metadata, RestoreOptions, SnapshotOptions,
};
use wasm_bindgen::prelude::*;

use crate::error;
use crate::held::HeldSource;
use crate::js::{self, invalid, set, to_js, JsResult, JsSource};

/// An in-memory file system with opaque state bytes, committed turn by turn.
#[wasm_bindgen]
pub struct Workspace {
    inner: snapgraph::Workspace,
}

impl Workspace {
    fn wrap(mut inner: snapgraph::Workspace) -> Self {
        // No threads in a browser's main wasm instance: hash on the calling thread.
        inner.set_parallelism(1);
        Self { inner }
    }
}

pub(crate) fn kind_name(k: EntryKind) -> &'static str {
    match k {
        EntryKind::File => "file",
        EntryKind::Dir => "dir",
        EntryKind::Symlink => "symlink",
    }
}

fn metadata_object(m: &Metadata) -> Object {
    let o = js::object();
    set(&o, "kind", &JsValue::from_str(kind_name(m.kind)));
    set(&o, "mode", &JsValue::from_f64(f64::from(m.mode)));
    set(&o, "size", &js::number(m.size));
    o
}

fn policy(options: &JsValue) -> JsResult<CheckoutPolicy> {
    Ok(match js::opt_string(options, "policy")?.as_deref() {
        None | Some("superset") => CheckoutPolicy::Superset,
        Some("strict") => CheckoutPolicy::Strict,
        Some("force") => CheckoutPolicy::Force,
        Some(other) => {
            return Err(invalid(format!(
                "policy must be \"superset\", \"strict\" or \"force\", got {other:?}"
            )))
        }
    })
}

fn drift_policy(options: &JsValue) -> JsResult<DriftPolicy> {
    Ok(match js::opt_string(options, "drift")?.as_deref() {
        None | Some("strict") => DriftPolicy::Strict,
        Some("off") => DriftPolicy::Off,
        Some(other) => {
            return Err(invalid(format!(
                "drift must be \"strict\" or \"off\", got {other:?}"
            )))
        }
    })
}

fn snapshot_options(options: &JsValue) -> JsResult<SnapshotOptions> {
    Ok(SnapshotOptions {
        exclude_files: js::opt_bool(options, "excludeFiles")?,
        exclude_state: js::opt_bool(options, "excludeState")?,
        compress: js::opt_bool(options, "compress")?,
    })
}

/// Reads `{ builtins?, features?, fsBackend?, engineVersion? }`.
pub(crate) fn fingerprint_from(v: &JsValue) -> JsResult<CapabilityFingerprint> {
    if !v.is_object() {
        return Err(invalid("a capability fingerprint must be an object"));
    }
    let mut fp = CapabilityFingerprint::new();
    for (key, builtin) in [("builtins", true), ("features", false)] {
        let list = js::get(v, key);
        if list.is_undefined() || list.is_null() {
            continue;
        }
        let Some(iter) = js_sys::try_iter(&list).ok().flatten() else {
            return Err(invalid(format!("{key} must be an array of strings")));
        };
        for item in iter {
            let name = item?
                .as_string()
                .ok_or_else(|| invalid(format!("{key} must be an array of strings")))?;
            fp = if builtin {
                fp.builtin(name)
            } else {
                fp.feature(name)
            };
        }
    }
    if let Some(b) = js::opt_string(v, "fsBackend")? {
        fp = fp.fs_backend(b);
    }
    if let Some(e) = js::opt_string(v, "engineVersion")? {
        fp = fp.engine_version(e);
    }
    Ok(fp)
}

/// `{ builtins, features, fsBackend, engineVersion }` (absent names are `null`).
pub(crate) fn fingerprint_object(fp: &CapabilityFingerprint) -> Object {
    let o = js::object();
    let strings =
        |s: &std::collections::BTreeSet<String>| s.iter().map(JsValue::from).collect::<Array>();
    set(&o, "builtins", &strings(&fp.builtins));
    set(&o, "features", &strings(&fp.features));
    let opt = |s: &Option<String>| s.as_deref().map_or(JsValue::NULL, JsValue::from_str);
    set(&o, "fsBackend", &opt(&fp.fs_backend));
    set(&o, "engineVersion", &opt(&fp.engine_version));
    o
}

/// Reads `{ source, fingerprint, revision?, size?, cachedAt? }`.
fn read_from(v: &JsValue) -> JsResult<ExternalRead> {
    if !v.is_object() {
        return Err(invalid("an external read must be an object"));
    }
    Ok(ExternalRead {
        source: js::req_string(v, "source")?,
        fingerprint: js::opt_string(v, "fingerprint")?.unwrap_or_default(),
        revision: js::opt_string(v, "revision")?,
        size: js::opt_u64(v, "size")?.unwrap_or(0),
        cached_at: js::opt_string(v, "cachedAt")?,
    })
}

/// `{ source, fingerprint, revision, size, cachedAt }`.
pub(crate) fn read_object(r: &ExternalRead) -> Object {
    let o = js::object();
    let opt = |s: &Option<String>| s.as_deref().map_or(JsValue::NULL, JsValue::from_str);
    set(&o, "source", &JsValue::from_str(&r.source));
    set(&o, "fingerprint", &JsValue::from_str(&r.fingerprint));
    set(&o, "revision", &opt(&r.revision));
    set(&o, "size", &js::number(r.size));
    set(&o, "cachedAt", &opt(&r.cached_at));
    o
}

fn limits_object(l: &Limits) -> Object {
    let o = js::object();
    set(&o, "maxFiles", &js::number(l.max_files));
    set(&o, "maxBytes", &js::number(l.max_bytes));
    set(&o, "maxUnpackedBytes", &js::number(l.max_unpacked_bytes));
    o
}

fn limits_from(v: &JsValue, base: Limits) -> JsResult<Limits> {
    if !v.is_object() {
        return Err(invalid("limits must be an object"));
    }
    Ok(Limits {
        max_files: js::opt_u64(v, "maxFiles")?.unwrap_or(base.max_files),
        max_bytes: js::opt_u64(v, "maxBytes")?.unwrap_or(base.max_bytes),
        max_unpacked_bytes: js::opt_u64(v, "maxUnpackedBytes")?.unwrap_or(base.max_unpacked_bytes),
    })
}

fn opt_object(v: &JsValue, what: &str) -> JsResult<()> {
    if v.is_undefined() || v.is_null() || v.is_object() {
        Ok(())
    } else {
        Err(invalid(format!("{what} must be an object")))
    }
}

#[wasm_bindgen]
impl Workspace {
    /// An empty workspace.
    #[wasm_bindgen(constructor)]
    pub fn new() -> Workspace {
        Self::wrap(snapgraph::Workspace::new())
    }

    /// An independent copy (a fork): O(1), the first write after it copies only the
    /// directories on its path.
    pub fn copy(&self) -> Workspace {
        Self::wrap(self.inner.clone())
    }

    /// The commit the workspace was last committed as or checked out from, or `null`.
    #[wasm_bindgen(unchecked_return_type = "string | null")]
    pub fn head(&self) -> JsValue {
        self.inner.head().map_or(JsValue::NULL, |h| js::hex(&h))
    }

    /// Whether a file's bytes are in memory (false for files a shallow checkout left
    /// in the store).
    #[wasm_bindgen(js_name = isLoaded)]
    pub fn is_loaded(&self, path: &str) -> bool {
        self.inner.is_loaded(path)
    }

    /// The id of a file's content root (a chunk or a manifest), once committed or
    /// checked out; `null` otherwise.
    #[wasm_bindgen(js_name = fileContentId, unchecked_return_type = "string | null")]
    pub fn file_content_id(&self, path: &str) -> JsValue {
        self.inner
            .file_content_id(path)
            .map_or(JsValue::NULL, |i| JsValue::from_str(&i.to_hex()))
    }

    /// Writes a file (creating parent directories). `data`: `Uint8Array` or a string
    /// (stored as UTF-8).
    pub fn write(
        &mut self,
        path: &str,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array | string")] data: JsValue,
    ) -> JsResult<()> {
        let data = js::bytes(&data, "data", true)?;
        self.inner
            .write(path, data)
            .map_err(|e| to_js(error::fs(&e)))
    }

    /// The bytes of a file.
    pub fn read(&self, path: &str) -> JsResult<Uint8Array> {
        self.inner
            .read(path)
            .map(js::u8array)
            .map_err(|e| to_js(error::fs(&e)))
    }

    /// The target of a symlink.
    #[wasm_bindgen(js_name = readLink)]
    pub fn read_link(&self, path: &str) -> JsResult<String> {
        self.inner
            .read_link(path)
            .map(str::to_owned)
            .map_err(|e| to_js(error::fs(&e)))
    }

    /// Whether anything exists at `path`.
    pub fn exists(&self, path: &str) -> bool {
        self.inner.exists(path)
    }

    /// Creates a directory (and its parents); nothing happens if it exists.
    pub fn mkdir(&mut self, path: &str) -> JsResult<()> {
        self.inner.mkdir(path).map_err(|e| to_js(error::fs(&e)))
    }

    /// Creates a symlink (never followed).
    pub fn symlink(&mut self, path: &str, target: &str) -> JsResult<()> {
        self.inner
            .symlink(path, target)
            .map_err(|e| to_js(error::fs(&e)))
    }

    /// Removes a file, symlink or directory (with everything under it).
    pub fn remove(&mut self, path: &str) -> JsResult<()> {
        self.inner.remove(path).map_err(|e| to_js(error::fs(&e)))
    }

    /// Moves a file or directory.
    pub fn rename(&mut self, from: &str, to: &str) -> JsResult<()> {
        self.inner
            .rename(from, to)
            .map_err(|e| to_js(error::fs(&e)))
    }

    /// Sets permission bits (0 to 0o7777): anything else, `NaN` or a fraction
    /// included, throws `INVALID_ARGUMENT` (a `u32` argument would have wrapped
    /// `2 ** 40` to 0 and taken `NaN` as 0 without a word).
    #[wasm_bindgen(js_name = setMode)]
    pub fn set_mode(&mut self, path: &str, mode: f64) -> JsResult<()> {
        let mode = js::u64_value(&JsValue::from_f64(mode), &format!("{path}: mode"))?;
        let mode = u32::try_from(mode).map_err(|_| {
            let message = format!("{path}: mode {mode:o} is out of range (0 to 7777)");
            to_js(error::Described::new(error::INVALID_ARGUMENT, message).with_path(path))
        })?;
        self.inner
            .set_mode(path, mode)
            .map_err(|e| to_js(error::fs(&e)))
    }

    /// `{ kind: "file" | "dir" | "symlink", mode, size }` of a path.
    #[wasm_bindgen(
        unchecked_return_type = "{ kind: 'file' | 'dir' | 'symlink'; mode: number; size: number }"
    )]
    pub fn metadata(&self, path: &str) -> JsResult<JsValue> {
        self.inner
            .metadata(path)
            .map(|m| metadata_object(&m).into())
            .map_err(|e| to_js(error::fs(&e)))
    }

    /// The entries of a directory, sorted by name: `{ name, kind, mode, size }`.
    #[wasm_bindgen(
        unchecked_return_type = "Array<{ name: string; kind: 'file' | 'dir' | 'symlink'; mode: number; size: number }>"
    )]
    pub fn list(&self, path: &str) -> JsResult<Array> {
        let entries = self.inner.list(path).map_err(|e| to_js(error::fs(&e)))?;
        Ok(entries
            .iter()
            .map(|e| {
                let o = metadata_object(&e.metadata);
                set(&o, "name", &JsValue::from_str(&e.name));
                JsValue::from(o)
            })
            .collect())
    }

    /// Every path except `/`, depth-first in sorted order: `{ path, kind, mode, size }`.
    #[wasm_bindgen(
        unchecked_return_type = "Array<{ path: string; kind: 'file' | 'dir' | 'symlink'; mode: number; size: number }>"
    )]
    pub fn walk(&self) -> Array {
        self.inner
            .walk()
            .iter()
            .map(|(p, m)| {
                let o = metadata_object(m);
                set(&o, "path", &JsValue::from_str(p));
                JsValue::from(o)
            })
            .collect()
    }

    /// Sets the opaque state bytes committed with the files.
    #[wasm_bindgen(js_name = setState)]
    pub fn set_state(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] state: JsValue,
    ) -> JsResult<()> {
        self.inner.set_state(js::bytes(&state, "state", false)?);
        Ok(())
    }

    /// The opaque state bytes.
    pub fn state(&self) -> Uint8Array {
        js::u8array(self.inner.state())
    }

    /// Sets what this environment offers: `{ builtins?, features?, fsBackend?,
    /// engineVersion? }`.
    #[wasm_bindgen(js_name = setCapabilities)]
    pub fn set_capabilities(&mut self, fingerprint: JsValue) -> JsResult<()> {
        self.inner.set_capabilities(fingerprint_from(&fingerprint)?);
        Ok(())
    }

    /// The fingerprint set on this workspace, or `null`.
    pub fn capabilities(&self) -> JsValue {
        self.inner
            .capabilities()
            .map_or(JsValue::NULL, |fp| fingerprint_object(fp).into())
    }

    /// Declares that content starting with `prefix` needs `feature`.
    #[wasm_bindgen(js_name = requireFeatureForPrefix)]
    pub fn require_feature_for_prefix(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] prefix: JsValue,
        feature: &str,
    ) -> JsResult<()> {
        let prefix = js::bytes(&prefix, "prefix", false)?;
        self.inner.require_feature_for_prefix(prefix, feature);
        Ok(())
    }

    /// Records a read of an external source: `{ source, fingerprint, revision?, size?,
    /// cachedAt? }`.
    #[wasm_bindgen(js_name = recordRead)]
    pub fn record_read(&mut self, read: JsValue) -> JsResult<()> {
        let r = read_from(&read)?;
        self.inner.record_read(r).map_err(|e| to_js(error::fs(&e)))
    }

    /// Forgets the record of `source`; returns it, or `null`.
    #[wasm_bindgen(js_name = forgetRead)]
    pub fn forget_read(&mut self, source: &str) -> JsValue {
        self.inner
            .forget_read(source)
            .map_or(JsValue::NULL, |r| read_object(&r).into())
    }

    /// The recorded external reads, sorted by source.
    #[wasm_bindgen(js_name = externalReads)]
    pub fn external_reads(&self) -> Array {
        self.inner
            .external_reads()
            .map(|r| JsValue::from(read_object(r)))
            .collect()
    }

    /// Paths whose cached bytes a restore marked stale.
    #[wasm_bindgen(js_name = stalePaths)]
    pub fn stale_paths(&self) -> Array {
        self.inner.stale_paths().map(JsValue::from_str).collect()
    }

    /// Whether `path` is marked stale.
    #[wasm_bindgen(js_name = isStale)]
    pub fn is_stale(&self, path: &str) -> bool {
        self.inner.is_stale(path)
    }

    /// `{ maxFiles, maxBytes, maxUnpackedBytes }`.
    pub fn limits(&self) -> Object {
        limits_object(&self.inner.limits())
    }

    /// Sets some or all of `{ maxFiles, maxBytes, maxUnpackedBytes }`.
    #[wasm_bindgen(js_name = setLimits)]
    pub fn set_limits(&mut self, limits: JsValue) -> JsResult<()> {
        let l = limits_from(&limits, self.inner.limits())?;
        self.inner.set_limits(l);
        Ok(())
    }

    /// Records the workspace as a commit.
    ///
    /// `options`: `{ parents?: string[], have?: string[] | HaveSet | source, meta?:
    /// Record<string, string>, excludeFiles?: boolean, excludeState?: boolean,
    /// parentSource?: source }`. `have` as an array declares ids the destination holds
    /// (with their closures); as a [`HaveSet`](crate::HaveSet) or a source (a `Map`, an
    /// object with `get`/`has`) it is asked per object along changed paths, which is
    /// what a per-turn commit into a growing store wants: a `HaveSet` inside the
    /// module, a source in one call into JavaScript. A source also answers parent
    /// lookups (a merge with another workspace's commit needs no `parentSource`).
    /// `excludeFiles`/`excludeState` record an empty root directory or empty state; the
    /// workspace keeps its files and state.
    #[wasm_bindgen(unchecked_return_type = "CommitResult")]
    pub fn commit(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "CommitOptions | undefined")] options: JsValue,
    ) -> JsResult<Object> {
        // The common fields in one call into JavaScript (`commitOptions`, js.rs); the
        // others are read one by one, only when present.
        let read = js::commit_options(&options)
            .ok_or_else(|| invalid("commit options must be an object"))?;
        let (flags, held_key, joined) = js::split_commit_options(&read);
        let has = |bit| flags & bit != 0;
        let parents = if has(js::OPT_PARENTS_JOINED) {
            js::parse_joined(joined, "parents")?
        } else if has(js::OPT_PARENTS_OTHER) {
            js::ids(&js::get(&options, "parents"), "parents")?
        } else {
            Vec::new()
        };
        let (mut have_ids, mut have_source, mut have_held) = (None, None, None);
        if has(js::OPT_HAVE_FREED) {
            return Err(invalid("have: this HaveSet was freed"));
        } else if has(js::OPT_HAVE_HELD) {
            have_held = Some(HeldSource::by_key(held_key)?);
        } else if has(js::OPT_HAVE_OTHER) {
            let have = js::get(&options, "have");
            if Array::is_array(&have) {
                have_ids = Some(js::ids(&have, "have")?);
            } else {
                have_source = Some(JsSource::new(&have, "have")?);
            }
        }
        let parent_source = if has(js::OPT_PARENT_SOURCE) {
            Some(JsSource::new(
                &js::get(&options, "parentSource"),
                "parentSource",
            )?)
        } else {
            None
        };
        for (bad, key) in [
            (js::OPT_EXCLUDE_FILES_BAD, "excludeFiles"),
            (js::OPT_EXCLUDE_STATE_BAD, "excludeState"),
        ] {
            if has(bad) {
                return Err(invalid(format!("{key} must be a boolean")));
            }
        }
        let mut o = CommitOptions::new()
            .parents(parents)
            .exclude_files(has(js::OPT_EXCLUDE_FILES))
            .exclude_state(has(js::OPT_EXCLUDE_STATE));
        if let Some(ids) = &have_ids {
            o = o.have(ids);
        }
        if let Some(s) = &have_source {
            o = o.have_in(s);
        }
        if let Some(s) = &have_held {
            o = o.have_in(s);
        }
        if let Some(s) = &parent_source {
            o = o.parent_source(s);
        }
        if has(js::OPT_META) {
            let meta: Object = js::get(&options, "meta")
                .dyn_into()
                .map_err(|_| invalid("meta must be an object of strings"))?;
            for entry in Object::entries(&meta).iter() {
                let pair: Array = entry.unchecked_into();
                let (k, v) = (pair.get(0).as_string(), pair.get(1).as_string());
                match (k, v) {
                    (Some(k), Some(v)) => o = o.meta(k, v),
                    _ => return Err(invalid("meta values must be strings")),
                }
            }
        }
        let commit = self.inner.commit(o).map_err(|e| to_js(error::commit(&e)))?;
        Ok(commit_object(commit))
    }

    /// Replaces files and state with those of commit `id`, all or nothing.
    ///
    /// `objects`: a `Map`, an object with `get(id)`, or a record of hex ids.
    /// `options`: `{ policy?: "superset" | "strict" | "force", drift?: "strict" | "off",
    /// shallow?: boolean }`.
    pub fn checkout(
        &mut self,
        id: &str,
        #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
        #[wasm_bindgen(unchecked_param_type = "CheckoutOptions | undefined")] options: JsValue,
    ) -> JsResult<Restore> {
        opt_object(&options, "checkout options")?;
        let id = js::id(id)?;
        let source = JsSource::new(&objects, "objects")?;
        let o = CheckoutOptions::new()
            .policy(policy(&options)?)
            .drift(drift_policy(&options)?)
            .shallow(js::opt_bool(&options, "shallow")?);
        self.inner
            .checkout_with(id, &source, o)
            .map(Restore::from)
            .map_err(|e| to_js(error::checkout(&e)))
    }

    /// Loads the bytes of a file a shallow checkout left in the store.
    #[wasm_bindgen(js_name = loadContent)]
    pub fn load_content(
        &mut self,
        path: &str,
        #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
    ) -> JsResult<()> {
        let source = JsSource::new(&objects, "objects")?;
        self.inner
            .load_content(path, &source)
            .map_err(|e| to_js(error::checkout(&e)))
    }

    /// The workspace as one self-contained packed snapshot (what `snapgraph pack`
    /// writes). `options`: `{ excludeFiles?, excludeState?, compress? }`.
    pub fn snapshot(
        &self,
        #[wasm_bindgen(unchecked_param_type = "SnapshotOptions | undefined")] options: JsValue,
    ) -> JsResult<Uint8Array> {
        opt_object(&options, "snapshot options")?;
        let o = snapshot_options(&options)?;
        self.inner
            .snapshot_with(o, None)
            .map(|b| js::u8array(&b))
            .map_err(|e| to_js(error::commit(&e)))
    }

    /// A snapshot authenticated with a 32-byte key (BLAKE3 keyed MAC).
    #[wasm_bindgen(js_name = snapshotKeyed)]
    pub fn snapshot_keyed(
        &self,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] key: JsValue,
        #[wasm_bindgen(unchecked_param_type = "SnapshotOptions | undefined")] options: JsValue,
    ) -> JsResult<Uint8Array> {
        opt_object(&options, "snapshot options")?;
        let k = js::key(&key)?;
        let o = snapshot_options(&options)?;
        self.inner
            .snapshot_with(o, Some(&k))
            .map(|b| js::u8array(&b))
            .map_err(|e| to_js(error::commit(&e)))
    }

    /// A fresh workspace restored from a packed snapshot. `limits` (optional) bounds
    /// what it may unpack: use it for bytes from outside a trust boundary.
    #[wasm_bindgen(js_name = fromSnapshot)]
    pub fn from_snapshot(
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] bytes: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Partial<Limits> | undefined")] limits: JsValue,
    ) -> JsResult<Workspace> {
        Self::from_snapshot_inner(&bytes, None, &limits)
    }

    /// [`fromSnapshot`](Self::from_snapshot) for a keyed snapshot.
    #[wasm_bindgen(js_name = fromSnapshotKeyed)]
    pub fn from_snapshot_keyed(
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] bytes: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] key: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Partial<Limits> | undefined")] limits: JsValue,
    ) -> JsResult<Workspace> {
        let k = js::key(&key)?;
        Self::from_snapshot_inner(&bytes, Some(&k), &limits)
    }

    /// Replaces files and state with a snapshot's, keeping this workspace's
    /// configuration; on error nothing changes.
    #[wasm_bindgen(js_name = restoreSnapshot)]
    pub fn restore_snapshot(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] bytes: JsValue,
    ) -> JsResult<Restore> {
        let bytes = js::bytes(&bytes, "bytes", false)?;
        self.inner
            .restore_snapshot(&bytes)
            .map(Restore::from)
            .map_err(|e| to_js(error::snapshot(&e)))
    }

    /// [`restoreSnapshot`](Self::restore_snapshot) for a keyed snapshot.
    #[wasm_bindgen(js_name = restoreSnapshotKeyed)]
    pub fn restore_snapshot_keyed(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] bytes: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] key: JsValue,
    ) -> JsResult<Restore> {
        let k = js::key(&key)?;
        let bytes = js::bytes(&bytes, "bytes", false)?;
        self.inner
            .restore_snapshot_keyed(&bytes, &k)
            .map(Restore::from)
            .map_err(|e| to_js(error::snapshot(&e)))
    }
}

impl Workspace {
    fn from_snapshot_inner(
        bytes: &JsValue,
        key: Option<&[u8; 32]>,
        limits: &JsValue,
    ) -> JsResult<Workspace> {
        let bytes = js::bytes(bytes, "bytes", false)?;
        let mut o = RestoreOptions::new().key(key);
        if !(limits.is_undefined() || limits.is_null()) {
            o = o.limits(limits_from(limits, Limits::default())?);
        }
        snapgraph::Workspace::from_snapshot_with(&bytes, o)
            .map(Self::wrap)
            .map_err(|e| to_js(error::snapshot(&e)))
    }
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

/// `{ id, generation, objects, objectCount, storedBytes, packed, isComplete }`, the
/// Node package's commit result: `objects` maps hex ids to `Uint8Array`s in
/// dependency order (referenced objects first; write them in this order), each a view
/// of one buffer copied out of wasm memory for the commit (as Node's `Buffer`s are);
/// `packed` is the commit as a packed snapshot when it is complete, else `null`.
fn commit_object(c: snapgraph::Commit) -> Object {
    let packed = c.packed().map_or(JsValue::NULL, |b| js::u8array(&b).into());
    let (count, stored) = (c.object_count(), c.stored_bytes());
    // The commit's id and the objects' ids in one string, the objects in one buffer
    // and their sizes in another, for one call of the `commitResult` helper (js.rs)
    // instead of crossings per object.
    let mut keys = String::with_capacity(64 * (count + 1));
    js::push_hex(&mut keys, &c.id());
    let mut data = Vec::with_capacity(usize::try_from(stored).unwrap_or(0));
    let mut sizes = Vec::with_capacity(count);
    for (id, bytes) in c.objects().iter() {
        js::push_hex(&mut keys, id);
        data.extend_from_slice(bytes);
        // An object is at most MAX_OBJECT_SIZE bytes, far below 4 GiB.
        sizes.push(bytes.len() as u32);
    }
    js::commit_result(
        c.generation() as f64,
        count as f64,
        stored as f64,
        c.is_complete(),
        &packed,
        &keys,
        &data,
        &sizes,
    )
}

/// What a checkout or restore hands back about the commit's recorded external reads:
/// pins to serve, stale paths, and the drift check to drive before first use
/// (`pending`, `supply`, `finish`).
#[wasm_bindgen]
pub struct Restore {
    commit: snapgraph::ObjectId,
    pins: Vec<ExternalRead>,
    stale: Vec<String>,
    check: Option<snapgraph::DriftCheck>,
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

#[wasm_bindgen]
impl Restore {
    /// The restored commit.
    #[wasm_bindgen(getter)]
    pub fn commit(&self) -> String {
        self.commit.to_hex()
    }

    /// Reads recorded with a revision: serve exactly these revisions.
    #[wasm_bindgen(unchecked_return_type = "ExternalRead[]")]
    pub fn pins(&self) -> Array {
        self.pins
            .iter()
            .map(|r| JsValue::from(read_object(r)))
            .collect()
    }

    /// The pinned revision of `source`, if any.
    #[wasm_bindgen(js_name = revisionFor)]
    pub fn revision_for(&self, source: &str) -> Option<String> {
        self.pins
            .iter()
            .find(|r| r.source == source)
            .and_then(|r| r.revision.clone())
    }

    /// Workspace paths whose cached bytes must be re-read live.
    #[wasm_bindgen(unchecked_return_type = "string[]")]
    pub fn stale(&self) -> Array {
        self.stale.iter().map(|s| JsValue::from_str(s)).collect()
    }

    /// Whether a drift check must run before first use.
    #[wasm_bindgen(js_name = needsDriftCheck)]
    pub fn needs_drift_check(&self) -> bool {
        self.check.is_some()
    }

    /// Sources the drift check still needs a live fingerprint for, sorted.
    #[wasm_bindgen(unchecked_return_type = "string[]")]
    pub fn pending(&self) -> Array {
        self.check
            .as_ref()
            .map(|c| c.pending().iter().map(|s| JsValue::from_str(s)).collect())
            .unwrap_or_default()
    }

    /// Every source the drift check covers, with its snapshot fingerprint:
    /// `{ [source]: fingerprint }`.
    #[wasm_bindgen(unchecked_return_type = "Record<string, string>")]
    pub fn expected(&self) -> Object {
        let o = js::object();
        if let Some(c) = &self.check {
            for (s, f) in c.expected() {
                set(&o, s, &JsValue::from_str(f));
            }
        }
        o
    }

    /// Supplies the live fingerprint of `source` (`null`: it no longer exists).
    /// False, recording nothing, for a source the check does not cover.
    pub fn supply(&mut self, source: &str, live: Option<String>) -> bool {
        self.check
            .as_mut()
            .is_some_and(|c| c.supply(source, live.as_deref()))
    }

    /// Succeeds when every covered source was supplied and none moved; else throws
    /// `DRIFT` naming them. Calling it again gives the same answer.
    pub fn finish(&self) -> JsResult<()> {
        match &self.check {
            Some(c) => c.clone().finish().map_err(|e| to_js(error::drift(&e))),
            None => Ok(()),
        }
    }
}
