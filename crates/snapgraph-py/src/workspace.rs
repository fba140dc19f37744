//! `snapgraph.Workspace` and what its operations return: `Commit`, `Restore`,
//! `DriftCheck`, `Metadata`, `DirEntry`, `ExternalRead`, `Capabilities`.

use std::collections::BTreeMap;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict};
use snapgraph::{
    CapabilityFingerprint, CheckoutOptions, CheckoutPolicy, CommitOptions, DriftPolicy, EntryKind,
    ExternalRead, Limits, ObjectId, RestoreOptions, SnapshotKey, SnapshotOptions, Workspace,
};

use crate::errors::Failure;
use crate::source::{parse_id, parse_ids, Objects};

/// An in-memory file system plus opaque state bytes, committed and checked out as a
/// whole. Paths are absolute (`/dir/file`); symlinks are stored, never followed.
#[pyclass(name = "Workspace", module = "snapgraph")]
pub struct PyWorkspace {
    pub inner: Workspace,
}

impl PyWorkspace {
    pub fn wrap(inner: Workspace) -> Self {
        Self { inner }
    }
}

/// Bytes `Workspace.write_stream` asks its reader for per call.
const READ_BLOCK: usize = 1 << 20;

fn policy(name: &str) -> PyResult<CheckoutPolicy> {
    match name {
        "superset" => Ok(CheckoutPolicy::Superset),
        "strict" => Ok(CheckoutPolicy::Strict),
        "force" => Ok(CheckoutPolicy::Force),
        other => Err(PyValueError::new_err(format!(
            "policy must be \"superset\", \"strict\" or \"force\", not {other:?}"
        ))),
    }
}

fn drift_policy(name: &str) -> PyResult<DriftPolicy> {
    match name {
        "strict" => Ok(DriftPolicy::Strict),
        "off" => Ok(DriftPolicy::Off),
        other => Err(PyValueError::new_err(format!(
            "drift must be \"strict\" or \"off\", not {other:?}"
        ))),
    }
}

/// A 32-byte snapshot key from Python bytes.
fn key(key: &[u8]) -> PyResult<SnapshotKey> {
    SnapshotKey::try_from(key).map_err(|_| {
        PyValueError::new_err(format!("a snapshot key is 32 bytes, not {}", key.len()))
    })
}

fn limits_from(
    base: Limits,
    max_files: Option<u64>,
    max_bytes: Option<u64>,
    max_unpacked_bytes: Option<u64>,
) -> Limits {
    let mut l = base;
    if let Some(v) = max_files {
        l.max_files = v;
    }
    if let Some(v) = max_bytes {
        l.max_bytes = v;
    }
    if let Some(v) = max_unpacked_bytes {
        l.max_unpacked_bytes = v;
    }
    l
}

#[pymethods]
impl PyWorkspace {
    /// An empty workspace with default limits and no capability fingerprint.
    #[new]
    fn new() -> Self {
        Self::wrap(Workspace::new())
    }

    /// Writes a file, creating parent directories. Raises `InvalidPathError`,
    /// `FsError` (a parent is a file, the path is a directory or symlink).
    fn write(&mut self, path: &str, data: PyBackedBytes) -> Result<(), Failure> {
        Ok(self.inner.write(path, &*data)?)
    }

    /// The bytes of a file. Raises `FsError` (`code` "not_found", "is_a_directory",
    /// "is_a_symlink", "not_loaded" after a shallow checkout).
    fn read<'py>(&self, py: Python<'py>, path: &str) -> Result<Bound<'py, PyBytes>, Failure> {
        Ok(PyBytes::new(py, self.inner.read(path)?))
    }

    /// The target of a symlink.
    fn read_link(&self, path: &str) -> Result<String, Failure> {
        Ok(self.inner.read_link(path)?.to_string())
    }

    /// Removes a file, symlink or directory (with everything under it).
    fn remove(&mut self, path: &str) -> Result<(), Failure> {
        Ok(self.inner.remove(path)?)
    }

    /// Creates a directory and its missing parents (an existing directory is fine).
    fn mkdir(&mut self, path: &str) -> Result<(), Failure> {
        Ok(self.inner.mkdir(path)?)
    }

    /// Moves a file, symlink or directory; an existing file or symlink at `dst` is
    /// replaced, an existing directory raises `FsError`. Missing parents are created.
    fn rename(&mut self, src: &str, dst: &str) -> Result<(), Failure> {
        Ok(self.inner.rename(src, dst)?)
    }

    /// Creates a symlink at `path` pointing to `target` (stored, never followed).
    fn symlink(&mut self, path: &str, target: &str) -> Result<(), Failure> {
        Ok(self.inner.symlink(path, target)?)
    }

    /// Sets the permission bits (0 to 0o7777) of a path.
    fn set_mode(&mut self, path: &str, mode: u32) -> Result<(), Failure> {
        Ok(self.inner.set_mode(path, mode)?)
    }

    /// The entries of a directory, sorted by name.
    #[pyo3(signature = (path = "/"))]
    fn list(&self, path: &str) -> Result<Vec<DirEntry>, Failure> {
        Ok(self
            .inner
            .list(path)?
            .into_iter()
            .map(|e| DirEntry {
                name: e.name,
                metadata: e.metadata.into(),
            })
            .collect())
    }

    /// What a path is: kind, mode and size.
    fn metadata(&self, path: &str) -> Result<Metadata, Failure> {
        Ok(self.inner.metadata(path)?.into())
    }

    /// Whether something exists at `path` (False for a malformed path).
    fn exists(&self, path: &str) -> bool {
        self.inner.exists(path)
    }

    /// Every path except `/`, depth first in sorted order, with its metadata.
    fn walk(&self) -> Vec<(String, Metadata)> {
        self.inner
            .walk()
            .into_iter()
            .map(|(p, m)| (p, m.into()))
            .collect()
    }

    /// Whether a file's bytes are in memory (False for files a shallow checkout left
    /// in the store).
    fn is_loaded(&self, path: &str) -> bool {
        self.inner.is_loaded(path)
    }

    /// Replaces the opaque state bytes (an interpreter's variables, say).
    fn set_state(&mut self, state: PyBackedBytes) {
        self.inner.set_state(state.to_vec());
    }

    /// The opaque state bytes.
    fn state<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.inner.state())
    }

    /// The commit this workspace was last committed or checked out at (hex), or None.
    #[getter]
    fn head(&self) -> Option<String> {
        self.inner.head().map(|h| h.to_hex())
    }

    /// Sets the capability fingerprint of the environment: what a checkout of a
    /// commit made here will require of the workspace it is restored into.
    #[pyo3(signature = (builtins = Vec::new(), features = Vec::new(), fs_backend = None, engine_version = None))]
    fn set_capabilities(
        &mut self,
        builtins: Vec<String>,
        features: Vec<String>,
        fs_backend: Option<String>,
        engine_version: Option<String>,
    ) {
        let mut fp = CapabilityFingerprint::new();
        for b in builtins {
            fp = fp.builtin(b);
        }
        for f in features {
            fp = fp.feature(f);
        }
        if let Some(b) = fs_backend {
            fp = fp.fs_backend(b);
        }
        if let Some(v) = engine_version {
            fp = fp.engine_version(v);
        }
        self.inner.set_capabilities(fp);
    }

    /// The capability fingerprint, if one was set (or adopted from a snapshot).
    #[getter]
    fn capabilities(&self) -> Option<Capabilities> {
        self.inner.capabilities().map(Capabilities::from)
    }

    /// Declares that content starting with `prefix` needs `feature`: a checkout of
    /// such content into a workspace lacking the feature is refused under every
    /// policy (`CapabilityError`, `code` "feature_required").
    fn require_feature_for_prefix(&mut self, prefix: PyBackedBytes, feature: String) {
        self.inner
            .require_feature_for_prefix(prefix.to_vec(), feature);
    }

    /// Records a read of an external source (an S3 object, a URL); the next commits
    /// store it and a restore checks it for drift. `cached_at` is the workspace path
    /// where the bytes were cached, if they were.
    #[pyo3(signature = (source, fingerprint, revision = None, size = 0, cached_at = None))]
    fn record_read(
        &mut self,
        source: String,
        fingerprint: String,
        revision: Option<String>,
        size: u64,
        cached_at: Option<String>,
    ) -> Result<(), Failure> {
        Ok(self.inner.record_read(ExternalRead {
            source,
            fingerprint,
            revision,
            size,
            cached_at,
        })?)
    }

    /// Forgets the record of `source`; returns whether there was one.
    fn forget_read(&mut self, source: &str) -> bool {
        self.inner.forget_read(source).is_some()
    }

    /// The recorded external reads, sorted by source.
    #[getter]
    fn external_reads(&self) -> Vec<PyExternalRead> {
        self.inner
            .external_reads()
            .cloned()
            .map(PyExternalRead::from)
            .collect()
    }

    /// Paths whose cached bytes must be re-read live after a restore.
    #[getter]
    fn stale_paths(&self) -> Vec<String> {
        self.inner.stale_paths().map(str::to_string).collect()
    }

    /// Sets the checkout and snapshot limits; omitted ones keep their value.
    #[pyo3(signature = (max_files = None, max_bytes = None, max_unpacked_bytes = None))]
    fn set_limits(
        &mut self,
        max_files: Option<u64>,
        max_bytes: Option<u64>,
        max_unpacked_bytes: Option<u64>,
    ) {
        let l = limits_from(
            self.inner.limits(),
            max_files,
            max_bytes,
            max_unpacked_bytes,
        );
        self.inner.set_limits(l);
    }

    /// The limits as a dict (`max_files`, `max_bytes`, `max_unpacked_bytes`).
    #[getter]
    fn limits<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let l = self.inner.limits();
        let d = PyDict::new(py);
        d.set_item("max_files", l.max_files)?;
        d.set_item("max_bytes", l.max_bytes)?;
        d.set_item("max_unpacked_bytes", l.max_unpacked_bytes)?;
        Ok(d)
    }

    /// How many threads a commit may use to hash new content (ids never depend on it).
    fn set_parallelism(&mut self, threads: usize) {
        self.inner.set_parallelism(threads);
    }

    /// An independent copy sharing all unchanged data (O(1): the in-process fork).
    fn copy(&self) -> Self {
        Self::wrap(self.inner.clone())
    }

    fn __copy__(&self) -> Self {
        self.copy()
    }

    /// Commits the files and state.
    ///
    /// `parents`: parent commit ids (hex), first parent first; none for a root
    /// commit. `have`: ids (any iterable of hex str) the destination already holds,
    /// each with its whole closure; `have_in`: a store or mapping to ask instead
    /// (cheaper than listing every id). Objects the destination holds are left out of
    /// `Commit.objects`. `meta`: string metadata. `exclude_files` / `exclude_state`:
    /// the commit records an empty root directory or empty state instead (the
    /// workspace keeps its own). The GIL is released while hashing.
    #[pyo3(signature = (parents = None, have = None, have_in = None, meta = None, exclude_files = false, exclude_state = false))]
    #[allow(clippy::too_many_arguments)] // the keyword arguments are the Python API
    fn commit(
        &mut self,
        py: Python<'_>,
        parents: Option<&Bound<'_, PyAny>>,
        have: Option<&Bound<'_, PyAny>>,
        have_in: Option<&Bound<'_, PyAny>>,
        meta: Option<BTreeMap<String, String>>,
        exclude_files: bool,
        exclude_state: bool,
    ) -> Result<Commit, Failure> {
        let parents = parents.map(parse_ids).transpose()?.unwrap_or_default();
        let have = have.map(parse_ids).transpose()?;
        let have_in = have_in.map(Objects::from_py).transpose()?;
        let ws = &mut self.inner;
        let commit = py.detach(|| {
            let mut options = CommitOptions::new()
                .parents(parents)
                .exclude_files(exclude_files)
                .exclude_state(exclude_state);
            if let Some(have) = &have {
                options = options.have(have.iter().copied());
            }
            if let Some(src) = &have_in {
                options = options.have_in(src.source());
            }
            for (k, v) in meta.into_iter().flatten() {
                options = options.meta(k, v);
            }
            ws.commit(options)
        });
        let commit = match &have_in {
            Some(objects) => objects.finish(commit.map_err(Failure::from))?,
            None => commit?,
        };
        Ok(Commit::new(commit))
    }

    /// Replaces files and state with those of commit `commit_id`, read from
    /// `objects` (a store, a dict of hex id to bytes, or any object with
    /// `__getitem__`). All or nothing: every object is verified before the workspace
    /// changes. `policy`: "superset" (default), "strict" or "force" for
    /// capabilities; `drift`: "strict" (default, the returned `Restore` carries the
    /// check) or "off"; `shallow`: load trees only, file content on demand with
    /// `load_content`. The GIL is released while loading from a store.
    #[pyo3(signature = (commit_id, objects, policy = "superset", drift = "strict", shallow = false))]
    fn checkout(
        &mut self,
        py: Python<'_>,
        commit_id: &str,
        objects: &Bound<'_, PyAny>,
        policy: &str,
        drift: &str,
        shallow: bool,
    ) -> Result<Restore, Failure> {
        let id = parse_id(commit_id)?;
        let objects = Objects::from_py(objects)?;
        let (policy, drift) = (self::policy(policy)?, drift_policy(drift)?);
        let ws = &mut self.inner;
        let options = CheckoutOptions::new()
            .policy(policy)
            .drift(drift)
            .shallow(shallow);
        let restore = py.detach(|| ws.checkout_with(id, objects.source(), options));
        Ok(Restore::new(
            objects.finish(restore.map_err(Failure::from))?,
        ))
    }

    /// Fetches and verifies the bytes of a file a shallow checkout left in the store.
    fn load_content(
        &mut self,
        py: Python<'_>,
        path: &str,
        objects: &Bound<'_, PyAny>,
    ) -> Result<(), Failure> {
        let objects = Objects::from_py(objects)?;
        let ws = &mut self.inner;
        let loaded = py.detach(|| ws.load_content(path, objects.source()));
        objects.finish(loaded.map_err(Failure::from))
    }

    /// Writes the file at `path` from `reader` (any object with `read(n) -> bytes`,
    /// such as a file opened in binary mode), read 1 MiB at a time and cut into its
    /// objects as it arrives: the file is never whole in memory. Each object goes to
    /// `objects` as it is made (a `snapgraph.Store`, or a mapping of hex id to bytes
    /// set with `objects[id] = bytes`); the workspace keeps the file's reference, as
    /// after a shallow checkout, and the next commit does not emit its objects (they
    /// are the ones `objects` received: store them before the commit). The objects
    /// and ids are those `write` and a commit would make. Returns the file's size.
    /// Raises `FsError` for a path `write` refuses, and whatever `reader` raises.
    ///
    /// Over a file a shallow checkout left in `objects` (a store), the chunks the
    /// new bytes still hold are hashed against that version's instead of cut, and
    /// not put again: an edit of a large file costs a hash of it and a cut of what
    /// changed. `size`, the new size when known, lets an unchanged tail after a
    /// change of length be found too (without it only an unchanged start is).
    #[pyo3(signature = (path, reader, objects, size = None))]
    fn write_stream(
        &mut self,
        py: Python<'_>,
        path: &str,
        reader: &Bound<'_, PyAny>,
        objects: &Bound<'_, PyAny>,
        size: Option<u64>,
    ) -> Result<u64, Failure> {
        let store = objects
            .cast::<crate::store::PyStore>()
            .ok()
            .map(|s| s.get().inner.clone());
        if store.is_none() && !objects.hasattr("__setitem__")? {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "objects must be a snapgraph store or a mapping of hex id to bytes (with \
                 __setitem__), not {}",
                objects.get_type().name()?
            ))
            .into());
        }
        let put = |set: snapgraph::ObjectSet| -> Result<(), Failure> {
            match &store {
                Some(store) => {
                    let batch: Vec<(ObjectId, &[u8])> =
                        set.iter().map(|(id, b)| (*id, b)).collect();
                    Ok(py.detach(|| store.put_many(&batch))?)
                }
                None => {
                    for (id, b) in set.iter() {
                        objects.set_item(id.to_string(), PyBytes::new(py, b))?;
                    }
                    Ok(())
                }
            }
        };
        // Over the version a shallow checkout left in the store, when there is one
        // (its manifest unreadable: the new bytes do not need it, cut them afresh).
        let over = match &store {
            Some(store) => {
                let source: &dyn snapgraph_store::Store = &**store;
                let ws = &self.inner;
                py.detach(|| {
                    let expected = size.or_else(|| ws.metadata(path).ok().map(|m| m.size));
                    ws.ingest_over(path, source, expected.unwrap_or(0))
                        .ok()
                        .flatten()
                })
            }
            None => None,
        };
        let mut ingest = over.unwrap_or_default();
        // Gathered into store writes of a few MiB (fewer transactions and syncs).
        let mut pending = snapgraph::ObjectSet::new();
        loop {
            let block = reader.call_method1("read", (READ_BLOCK,))?;
            let block = block.cast::<PyBytes>().map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(format!(
                    "reader.read must return bytes, not {}",
                    block
                        .get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ))
            })?;
            let bytes = block.as_bytes();
            if bytes.is_empty() {
                break;
            }
            pending.append(py.detach(|| ingest.push(bytes)));
            if pending.stored_bytes() >= snapgraph::ingest::PUT_BYTES {
                put(std::mem::take(&mut pending))?;
            }
        }
        let size = ingest.len();
        let (file, last) = py.detach(|| ingest.finish());
        pending.append(last);
        if !pending.is_empty() {
            put(pending)?;
        }
        self.inner.write_ingested(path, file)?;
        Ok(size)
    }

    /// Writes the bytes of the file at `path` to `writer` (any object with
    /// `write(bytes)`), a window of chunks at a time for a file a shallow checkout
    /// left in `objects`: never whole in memory. Every chunk is re-hashed and checked
    /// as `load_content` checks it; the bytes are proven the file only once this
    /// returns (on an error, what was written is not the file: write somewhere you
    /// discard then). A loaded file is written in one call. Chunks are fetched
    /// from a store without holding the GIL (a mapping's `__getitem__` takes it).
    /// Returns the bytes written. Raises what `load_content` raises, and whatever
    /// `writer` raises.
    fn read_stream(
        &self,
        py: Python<'_>,
        path: &str,
        objects: &Bound<'_, PyAny>,
        writer: &Bound<'_, PyAny>,
    ) -> Result<u64, Failure> {
        let objects = Objects::from_py(objects)?;
        let mut written = 0u64;
        let mut write = |piece: &[u8]| -> Result<(), Failure> {
            writer.call_method1("write", (PyBytes::new(py, piece),))?;
            written += piece.len() as u64;
            Ok(())
        };
        match &objects {
            // A store's window of chunks is fetched and checked without the GIL
            // (other Python threads run meanwhile); `writer` is called with it.
            Objects::Store(store) => {
                let store: &dyn snapgraph_store::Store = &**store;
                let mut pieces = self.inner.content_pieces(path, store)?;
                while let Some(piece) = py.detach(|| pieces.next()) {
                    write(&piece?)?;
                }
            }
            // A mapping's reads take the GIL for each `__getitem__` anyway.
            Objects::Mapping(_) => {
                let wrote = (|| -> Result<(), Failure> {
                    for piece in self.inner.content_pieces(path, objects.source())? {
                        write(&piece?)?;
                    }
                    Ok(())
                })();
                objects.finish(wrote)?;
            }
        }
        Ok(written)
    }

    /// The workspace as one self-contained packed snapshot (the same workspace always
    /// packs to the same bytes). Raises `CommitError` ("content_not_loaded") if a
    /// shallow checkout left file content in the store.
    #[pyo3(signature = (exclude_files = false, exclude_state = false, compress = false))]
    fn snapshot<'py>(
        &self,
        py: Python<'py>,
        exclude_files: bool,
        exclude_state: bool,
        compress: bool,
    ) -> Result<Bound<'py, PyBytes>, Failure> {
        let options = SnapshotOptions {
            exclude_files,
            exclude_state,
            compress,
        };
        let ws = &self.inner;
        let bytes = py.detach(|| ws.snapshot_with(options, None))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// A snapshot authenticated with a BLAKE3 keyed MAC (`key`: 32 bytes), for bytes
    /// that cross a trust boundary.
    #[pyo3(signature = (key, exclude_files = false, exclude_state = false, compress = false))]
    fn snapshot_keyed<'py>(
        &self,
        py: Python<'py>,
        key: PyBackedBytes,
        exclude_files: bool,
        exclude_state: bool,
        compress: bool,
    ) -> Result<Bound<'py, PyBytes>, Failure> {
        let key = self::key(&key)?;
        let options = SnapshotOptions {
            exclude_files,
            exclude_state,
            compress,
        };
        let ws = &self.inner;
        let bytes = py.detach(|| ws.snapshot_with(options, Some(&key)))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// A fresh workspace restored from a snapshot (adopting its capabilities).
    /// Limits given apply to the restore and stay with the new workspace: use them
    /// for snapshots from outside a trust boundary.
    #[staticmethod]
    #[pyo3(signature = (data, max_files = None, max_bytes = None, max_unpacked_bytes = None))]
    fn from_snapshot(
        py: Python<'_>,
        data: PyBackedBytes,
        max_files: Option<u64>,
        max_bytes: Option<u64>,
        max_unpacked_bytes: Option<u64>,
    ) -> Result<Self, Failure> {
        let limits = limits_from(Limits::default(), max_files, max_bytes, max_unpacked_bytes);
        let ws = py.detach(|| {
            Workspace::from_snapshot_with(&data, RestoreOptions::new().limits(limits))
        })?;
        Ok(Self::wrap(ws))
    }

    /// `from_snapshot` for a keyed snapshot: a wrong key raises `NotAuthenticError`.
    #[staticmethod]
    #[pyo3(signature = (data, key, max_files = None, max_bytes = None, max_unpacked_bytes = None))]
    fn from_snapshot_keyed(
        py: Python<'_>,
        data: PyBackedBytes,
        key: PyBackedBytes,
        max_files: Option<u64>,
        max_bytes: Option<u64>,
        max_unpacked_bytes: Option<u64>,
    ) -> Result<Self, Failure> {
        let key = self::key(&key)?;
        let limits = limits_from(Limits::default(), max_files, max_bytes, max_unpacked_bytes);
        let ws = py.detach(|| {
            Workspace::from_snapshot_with(&data, RestoreOptions::new().key(&key).limits(limits))
        })?;
        Ok(Self::wrap(ws))
    }

    /// Replaces files and state with a snapshot's, keeping this workspace's
    /// capabilities, limits and content rules. Nothing changes on error.
    fn restore_snapshot(
        &mut self,
        py: Python<'_>,
        data: PyBackedBytes,
    ) -> Result<Restore, Failure> {
        let ws = &mut self.inner;
        let restore = py.detach(|| ws.restore_snapshot(&data))?;
        Ok(Restore::new(restore))
    }

    /// `restore_snapshot` for a keyed snapshot.
    fn restore_snapshot_keyed(
        &mut self,
        py: Python<'_>,
        data: PyBackedBytes,
        key: PyBackedBytes,
    ) -> Result<Restore, Failure> {
        let key = self::key(&key)?;
        let ws = &mut self.inner;
        let restore = py.detach(|| ws.restore_snapshot_keyed(&data, &key))?;
        Ok(Restore::new(restore))
    }

    fn __repr__(&self) -> String {
        match self.inner.head() {
            Some(h) => format!("<snapgraph.Workspace at {h}>"),
            None => "<snapgraph.Workspace (no commit)>".to_string(),
        }
    }
}

/// A new commit: its id and the objects to persist (only those the destination
/// lacks, referenced objects first).
#[pyclass(module = "snapgraph", frozen)]
pub struct Commit {
    inner: snapgraph::Commit,
}

impl Commit {
    fn new(inner: snapgraph::Commit) -> Self {
        Self { inner }
    }
}

#[pymethods]
impl Commit {
    /// The commit's id, 64 hex characters.
    #[getter]
    fn id(&self) -> String {
        self.inner.id().to_hex()
    }

    /// Its generation (1 for a root commit).
    #[getter]
    fn generation(&self) -> u64 {
        self.inner.generation()
    }

    /// The objects to persist, as a new dict of hex id to bytes in dependency order
    /// (insert them in this order and a store holding an object holds its closure).
    #[getter]
    fn objects<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (id, bytes) in self.inner.objects().iter() {
            d.set_item(id.to_hex(), PyBytes::new(py, bytes))?;
        }
        Ok(d)
    }

    /// How many objects there are to persist.
    #[getter]
    fn object_count(&self) -> usize {
        self.inner.object_count()
    }

    /// How many bytes there are to persist.
    #[getter]
    fn stored_bytes(&self) -> u64 {
        self.inner.stored_bytes()
    }

    /// Whether the objects restore the commit on their own (no `have` left any out).
    #[getter]
    fn is_complete(&self) -> bool {
        self.inner.is_complete()
    }

    /// The commit as one packed snapshot, or None when it is incremental.
    #[getter]
    fn packed<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.inner.packed().map(|b| PyBytes::new(py, &b))
    }

    fn __repr__(&self) -> String {
        format!(
            "<snapgraph.Commit {} ({} objects, {} bytes)>",
            self.inner.id(),
            self.inner.object_count(),
            self.inner.stored_bytes()
        )
    }
}

/// What a checkout or restore hands back about the restored commit's external
/// reads: pins to serve, paths to re-read, and the drift check to run before use.
#[pyclass(module = "snapgraph")]
pub struct Restore {
    commit: ObjectId,
    pins: Vec<ExternalRead>,
    stale: Vec<String>,
    drift: Option<snapgraph::DriftCheck>,
}

impl Restore {
    pub fn new(r: snapgraph::Restore) -> Self {
        let commit = r.commit();
        let pins = r.pins().to_vec();
        let stale = r.stale().to_vec();
        Self {
            commit,
            pins,
            stale,
            drift: r.into_drift_check(),
        }
    }
}

#[pymethods]
impl Restore {
    /// The restored commit (hex).
    #[getter]
    fn commit(&self) -> String {
        self.commit.to_hex()
    }

    /// Reads recorded with a revision: serve exactly these revisions.
    #[getter]
    fn pins(&self) -> Vec<PyExternalRead> {
        self.pins
            .iter()
            .cloned()
            .map(PyExternalRead::from)
            .collect()
    }

    /// The revision to serve for `source`, if it is pinned.
    fn revision_for(&self, source: &str) -> Option<String> {
        self.pins
            .iter()
            .find(|r| r.source == source)
            .and_then(|r| r.revision.clone())
    }

    /// Workspace paths whose cached bytes must be re-read live.
    #[getter]
    fn stale(&self) -> Vec<String> {
        self.stale.clone()
    }

    /// The drift check to drive before first use, or None when no read needs one.
    /// Each access hands out a fresh copy of the check.
    #[getter]
    fn drift_check(&self) -> Option<DriftCheck> {
        self.drift.clone().map(|c| DriftCheck { inner: Some(c) })
    }

    fn __repr__(&self) -> String {
        format!(
            "<snapgraph.Restore {} ({} pins, drift check: {})>",
            self.commit,
            self.pins.len(),
            if self.drift.is_some() {
                "pending"
            } else {
                "none"
            }
        )
    }
}

/// A check that the outside world has not moved since the snapshot: supply each
/// source's live fingerprint, then `finish()`.
#[pyclass(module = "snapgraph")]
pub struct DriftCheck {
    inner: Option<snapgraph::DriftCheck>,
}

impl DriftCheck {
    fn get(&mut self) -> PyResult<&mut snapgraph::DriftCheck> {
        self.inner
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("this drift check was already finished"))
    }
}

#[pymethods]
impl DriftCheck {
    /// Sources not yet supplied, sorted.
    fn pending(&mut self) -> PyResult<Vec<String>> {
        Ok(self.get()?.pending())
    }

    /// Every source the check covers, with its fingerprint at snapshot time.
    fn expected(&mut self) -> PyResult<BTreeMap<String, String>> {
        Ok(self
            .get()?
            .expected()
            .map(|(s, f)| (s.to_string(), f.to_string()))
            .collect())
    }

    /// Supplies the live fingerprint of `source` (None: it no longer exists).
    /// Returns False, recording nothing, for a source the check does not cover.
    #[pyo3(signature = (source, live))]
    fn supply(&mut self, source: &str, live: Option<&str>) -> PyResult<bool> {
        Ok(self.get()?.supply(source, live))
    }

    /// Supplies many sources (a dict of source to live fingerprint or None);
    /// returns how many the check covers.
    fn supply_all(&mut self, live: BTreeMap<String, Option<String>>) -> PyResult<usize> {
        let check = self.get()?;
        Ok(check.supply_all(live.iter().map(|(s, l)| (s.as_str(), l.as_deref()))))
    }

    /// Returns when every source was supplied and none moved; raises `DriftError`
    /// otherwise. A check finishes once.
    fn finish(&mut self) -> Result<(), Failure> {
        let check = self
            .inner
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this drift check was already finished"))?;
        Ok(check.finish()?)
    }
}

/// What a path is.
#[pyclass(module = "snapgraph", frozen, get_all)]
#[derive(Clone)]
pub struct Metadata {
    /// "file", "dir" or "symlink".
    kind: &'static str,
    /// Permission bits.
    mode: u32,
    /// File length, number of entries of a directory, or symlink target length.
    size: u64,
}

impl From<snapgraph::Metadata> for Metadata {
    fn from(m: snapgraph::Metadata) -> Self {
        Self {
            kind: match m.kind {
                EntryKind::File => "file",
                EntryKind::Dir => "dir",
                EntryKind::Symlink => "symlink",
            },
            mode: m.mode,
            size: m.size,
        }
    }
}

#[pymethods]
impl Metadata {
    fn __repr__(&self) -> String {
        format!(
            "Metadata(kind={:?}, mode=0o{:o}, size={})",
            self.kind, self.mode, self.size
        )
    }

    fn __eq__(&self, other: &Self) -> bool {
        (self.kind, self.mode, self.size) == (other.kind, other.mode, other.size)
    }
}

/// One entry of `Workspace.list`.
#[pyclass(module = "snapgraph", frozen, get_all)]
pub struct DirEntry {
    /// The entry's name.
    name: String,
    /// Its metadata.
    metadata: Metadata,
}

#[pymethods]
impl DirEntry {
    fn __repr__(&self) -> String {
        format!("DirEntry({:?}, {})", self.name, self.metadata.__repr__())
    }
}

/// One recorded read of an external source.
#[pyclass(name = "ExternalRead", module = "snapgraph", frozen, get_all)]
pub struct PyExternalRead {
    /// The source, as a URI.
    source: String,
    /// The backend's fingerprint of what was read (an ETag or similar).
    fingerprint: String,
    /// A stable revision, when the backend has one (a pin).
    revision: Option<String>,
    /// How many bytes were read.
    size: u64,
    /// The workspace path where the bytes were cached, if they were.
    cached_at: Option<String>,
}

impl From<ExternalRead> for PyExternalRead {
    fn from(r: ExternalRead) -> Self {
        Self {
            source: r.source,
            fingerprint: r.fingerprint,
            revision: r.revision,
            size: r.size,
            cached_at: r.cached_at,
        }
    }
}

#[pymethods]
impl PyExternalRead {
    fn __repr__(&self) -> String {
        format!(
            "ExternalRead(source={:?}, fingerprint={:?}, revision={:?})",
            self.source, self.fingerprint, self.revision
        )
    }
}

/// A capability fingerprint: what an environment offers.
#[pyclass(module = "snapgraph", frozen, get_all)]
pub struct Capabilities {
    /// Builtins, commands or tools the environment provides (sorted).
    builtins: Vec<String>,
    /// Semantic features (sorted).
    features: Vec<String>,
    /// The file-system backend's name, if named.
    fs_backend: Option<String>,
    /// The embedder's engine version, if given (informational).
    engine_version: Option<String>,
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

#[pymethods]
impl Capabilities {
    fn __repr__(&self) -> String {
        format!(
            "Capabilities(builtins={:?}, features={:?}, fs_backend={:?})",
            self.builtins, self.features, self.fs_backend
        )
    }
}
