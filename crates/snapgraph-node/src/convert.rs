//! Plain values crossing the boundary: ids, keys, policies, metadata, reads.

use std::collections::BTreeSet;

use napi_derive::napi;
use snapgraph::{
    CapabilityFingerprint, CheckoutPolicy, DriftPolicy, EntryKind, ExternalRead, Limits,
    Metadata as RsMetadata, ObjectId, SnapshotKey,
};

use crate::error::{invalid, js, Result};

/// A value or `null` (where an absent id or buffer is part of the shape).
pub type Nullable<T> = napi::bindgen_prelude::Either<T, napi::bindgen_prelude::Null>;

/// `Some` as the value, `None` as `null`.
pub fn nullable<T>(v: Option<T>) -> Nullable<T> {
    match v {
        Some(v) => napi::bindgen_prelude::Either::A(v),
        None => napi::bindgen_prelude::Either::B(napi::bindgen_prelude::Null),
    }
}

/// A string argument that may be `null` or left out.
pub fn from_nullable(v: Option<Nullable<String>>) -> Option<String> {
    match v {
        Some(napi::bindgen_prelude::Either::A(s)) => Some(s),
        _ => None,
    }
}

/// An id from its 64 hex digits (`INVALID_ID` otherwise).
pub fn id(hex: &str) -> Result<ObjectId> {
    ObjectId::from_hex(hex).map_err(|e| crate::error::error("INVALID_ID", format!("{hex:?}: {e}")))
}

/// Many ids.
pub fn ids(hex: &[String]) -> Result<Vec<ObjectId>> {
    hex.iter().map(|h| id(h)).collect()
}

/// Ids as hex strings.
pub fn hexes(ids: impl IntoIterator<Item = ObjectId>) -> Vec<String> {
    ids.into_iter().map(|i| i.to_hex()).collect()
}

/// A 32-byte snapshot key.
pub fn key(bytes: &[u8]) -> Result<SnapshotKey> {
    SnapshotKey::try_from(bytes)
        .map_err(|_| invalid(format!("a snapshot key is 32 bytes, got {}", bytes.len())))
}

/// `'superset' | 'strict' | 'force'`.
pub fn policy(name: Option<&str>) -> Result<CheckoutPolicy> {
    Ok(match name {
        None | Some("superset") => CheckoutPolicy::Superset,
        Some("strict") => CheckoutPolicy::Strict,
        Some("force") => CheckoutPolicy::Force,
        Some(other) => {
            return Err(invalid(format!(
                "unknown checkout policy {other:?}: expected 'superset', 'strict' or 'force'"
            )))
        }
    })
}

/// `'strict' | 'off'`.
pub fn drift(name: Option<&str>) -> Result<DriftPolicy> {
    Ok(match name {
        None | Some("strict") => DriftPolicy::Strict,
        Some("off") => DriftPolicy::Off,
        Some(other) => {
            return Err(invalid(format!(
                "unknown drift policy {other:?}: expected 'strict' or 'off'"
            )))
        }
    })
}

/// A JavaScript number as a count: a non-negative integer.
pub fn count(what: &str, n: f64) -> Result<u64> {
    if n.is_finite() && n >= 0.0 && n.fract() == 0.0 && n <= 9_007_199_254_740_991.0 {
        Ok(n as u64)
    } else {
        Err(invalid(format!(
            "{what} must be a non-negative integer, got {n}"
        )))
    }
}

/// An optional `limit` argument: absent means no limit.
pub fn limit(n: Option<f64>) -> Result<usize> {
    match n {
        None => Ok(usize::MAX),
        Some(n) => Ok(usize::try_from(count("limit", n)?).unwrap_or(usize::MAX)),
    }
}

/// What is at a path.
#[napi(object)]
pub struct Metadata {
    /// `'file'`, `'dir'` or `'symlink'`.
    pub kind: String,
    /// Permission bits (`0o7777` at most).
    pub mode: u32,
    /// Bytes of a file, of a symlink's target, 0 for a directory.
    pub size: f64,
}

pub fn kind_name(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "file",
        EntryKind::Dir => "dir",
        EntryKind::Symlink => "symlink",
    }
}

impl From<RsMetadata> for Metadata {
    fn from(m: RsMetadata) -> Self {
        Self {
            kind: kind_name(m.kind).to_string(),
            mode: m.mode,
            size: m.size as f64,
        }
    }
}

/// One entry of a directory listing.
#[napi(object)]
pub struct DirEntry {
    /// The entry's name.
    pub name: String,
    /// `'file'`, `'dir'` or `'symlink'`.
    pub kind: String,
    /// Permission bits.
    pub mode: u32,
    /// Bytes (see `Metadata.size`).
    pub size: f64,
}

/// One path of `Workspace.walk()`.
#[napi(object)]
pub struct WalkEntry {
    /// The absolute path.
    pub path: String,
    /// `'file'`, `'dir'` or `'symlink'`.
    pub kind: String,
    /// Permission bits.
    pub mode: u32,
    /// Bytes (see `Metadata.size`).
    pub size: f64,
}

/// Per-workspace limits on what a checkout may allocate.
#[napi(object, js_name = "Limits")]
pub struct JsLimits {
    /// Most files and symlinks one checkout may create.
    pub max_files: f64,
    /// Most file bytes one checkout may hold.
    pub max_bytes: f64,
    /// Most bytes a compressed snapshot body may unpack to.
    pub max_unpacked_bytes: f64,
}

impl From<Limits> for JsLimits {
    fn from(l: Limits) -> Self {
        Self {
            max_files: l.max_files as f64,
            max_bytes: l.max_bytes as f64,
            max_unpacked_bytes: l.max_unpacked_bytes as f64,
        }
    }
}

impl JsLimits {
    pub fn to_rust(&self) -> Result<Limits> {
        Ok(Limits {
            max_files: count("maxFiles", self.max_files)?,
            max_bytes: count("maxBytes", self.max_bytes)?,
            max_unpacked_bytes: count("maxUnpackedBytes", self.max_unpacked_bytes)?,
        })
    }
}

/// The environment a snapshot was taken in.
#[napi(object)]
pub struct Capabilities {
    /// Builtin commands offered.
    pub builtins: Vec<String>,
    /// Features offered.
    pub features: Vec<String>,
    /// The file-system backend's name.
    pub fs_backend: Option<String>,
    /// The engine's version.
    pub engine_version: Option<String>,
}

impl From<&CapabilityFingerprint> for Capabilities {
    fn from(c: &CapabilityFingerprint) -> Self {
        Self {
            builtins: c.builtins.iter().cloned().collect(),
            features: c.features.iter().cloned().collect(),
            fs_backend: c.fs_backend.clone(),
            engine_version: c.engine_version.clone(),
        }
    }
}

impl Capabilities {
    pub fn to_rust(&self) -> CapabilityFingerprint {
        let mut c = CapabilityFingerprint::new();
        c.builtins = self.builtins.iter().cloned().collect::<BTreeSet<_>>();
        c.features = self.features.iter().cloned().collect::<BTreeSet<_>>();
        c.fs_backend = self.fs_backend.clone();
        c.engine_version = self.engine_version.clone();
        c
    }
}

/// Content read from outside the workspace, recorded so a restore can check it.
#[napi(object)]
pub struct Read {
    /// Where it came from (a URL, a path outside the workspace).
    pub source: String,
    /// The content's fingerprint when read (empty: unverifiable).
    pub fingerprint: String,
    /// A pinned revision, if the source has revisions.
    pub revision: Option<String>,
    /// Bytes read.
    pub size: f64,
    /// The workspace path holding the cached bytes, if any.
    pub cached_at: Option<String>,
}

impl From<&ExternalRead> for Read {
    fn from(r: &ExternalRead) -> Self {
        Self {
            source: r.source.clone(),
            fingerprint: r.fingerprint.clone(),
            revision: r.revision.clone(),
            size: r.size as f64,
            cached_at: r.cached_at.clone(),
        }
    }
}

impl Read {
    pub fn to_rust(&self) -> Result<ExternalRead> {
        Ok(ExternalRead {
            source: self.source.clone(),
            fingerprint: self.fingerprint.clone(),
            revision: self.revision.clone(),
            size: count("size", self.size)?,
            cached_at: self.cached_at.clone(),
        })
    }
}

/// A decoded commit.
#[napi(object)]
pub struct CommitInfo {
    /// The commit's id.
    pub id: String,
    /// The root tree.
    pub tree: String,
    /// Parent commits, in order.
    pub parents: Vec<String>,
    /// 1 for a root commit, else one more than the highest parent's.
    pub generation: f64,
    /// Bytes of the interpreter state.
    pub state_size: f64,
    /// The capability fingerprint object, if recorded.
    pub capabilities: Option<String>,
    /// The external reads object, if recorded.
    pub reads: Option<String>,
    /// Metadata (message, labels, ...).
    pub meta: std::collections::HashMap<String, String>,
}

impl CommitInfo {
    pub fn new(id: ObjectId, c: &snapgraph::CommitObject) -> Self {
        Self {
            id: id.to_hex(),
            tree: c.tree.to_hex(),
            parents: hexes(c.parents.iter().copied()),
            generation: c.generation as f64,
            state_size: c.state_size as f64,
            capabilities: c.capabilities.map(|i| i.to_hex()),
            reads: c.reads.map(|i| i.to_hex()),
            meta: c.meta.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }
    }
}

/// Converts `Result<T, E>` with a coded error.
pub trait OrJs<T> {
    /// The value, or the error with its code.
    fn or_js(self) -> Result<T>;
}

impl<T, E: crate::error::Coded> OrJs<T> for std::result::Result<T, E> {
    fn or_js(self) -> Result<T> {
        self.map_err(js)
    }
}
