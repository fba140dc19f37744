//! Stores and repositories: `snapgraph.open`, `Store`, `Repo`, `sync`, `gc`, `verify`.

use std::collections::BTreeMap;
use std::sync::Arc;

use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict};
use snapgraph::ObjectId;
use snapgraph_store::{
    GcOptions, Repo, RepoCommitOptions, Store, StoreError, SyncOptions, WalkProblem,
};

use crate::errors::Failure;
use crate::graph::CommitObject;
use crate::source::{parse_id, parse_ids};
use crate::workspace::PyWorkspace;

fn hexes(ids: &[ObjectId]) -> Vec<String> {
    ids.iter().map(ObjectId::to_hex).collect()
}

/// Runs `op` (a long store operation given `cancel`) on a thread of its own while
/// this one, the caller's, looks for Python's signals every few milliseconds
/// (`Python::check_signals`: Ctrl-C's `KeyboardInterrupt`, a handler's exception).
/// One raised sets `cancel`, so the operation stops at its next safe point with
/// its lease or sweep marker taken back (`snapgraph_store::cancel`), and is raised
/// once it has. Without this, Ctrl-C waited for a sync or gc to end (a minute,
/// waiting for a sweep or a lease), and a process killed meanwhile left the lease
/// or the marker behind.
fn interruptible<T: Send>(
    py: Python<'_>,
    cancel: &snapgraph_store::Cancel,
    op: impl FnOnce() -> T + Send,
) -> PyResult<T> {
    let done = (std::sync::Mutex::new(false), std::sync::Condvar::new());
    let ended = || {
        let (lock, cv) = &done;
        let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = cv
            .wait_timeout_while(guard, std::time::Duration::from_millis(20), |d| !*d)
            .unwrap_or_else(|p| p.into_inner());
        *guard
    };
    std::thread::scope(|s| {
        // Says the operation ended when dropped: after it returned or panicked.
        struct Ends<'a>(&'a (std::sync::Mutex<bool>, std::sync::Condvar));
        impl Drop for Ends<'_> {
            fn drop(&mut self) {
                let (lock, cv) = self.0;
                *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
                cv.notify_all();
            }
        }
        let running = s.spawn(|| {
            let _ends = Ends(&done);
            op()
        });
        let mut raised = None;
        // Woken as soon as the operation ends (a per-turn sync pays no poll).
        while !py.detach(ended) {
            if raised.is_none() {
                if let Err(e) = py.check_signals() {
                    cancel.cancel();
                    raised = Some(e);
                }
            }
        }
        let out = py.detach(|| running.join());
        match (raised, out) {
            (Some(e), _) => Err(e),
            (None, Ok(out)) => Ok(out),
            (None, Err(panic)) => std::panic::resume_unwind(panic),
        }
    })
}

/// A store of objects and refs (SQLite, a directory, PostgreSQL or memory), as
/// `snapgraph.open(url)` returns it. Usable wherever `objects` is accepted; every
/// read is verified. Every call releases the GIL.
#[pyclass(name = "Store", module = "snapgraph", frozen)]
pub struct PyStore {
    pub inner: Arc<dyn Store>,
}

/// Opens the store a URL names: `sqlite:PATH` (or a path ending in `.db` or
/// `.sqlite`), `dir:PATH`, `postgres://…` (`?snapgraph_schema=NAME` keeps the tables
/// in that schema) or `memory:`.
#[pyfunction]
pub fn open(py: Python<'_>, url: &str) -> Result<PyStore, Failure> {
    let store = py.detach(|| snapgraph_store::open(url))?;
    Ok(PyStore {
        inner: Arc::from(store),
    })
}

/// The `(id, bytes)` pairs of a mapping (in its iteration order) or of an iterable
/// of pairs.
fn pairs(objects: &Bound<'_, PyAny>) -> Result<Vec<(ObjectId, PyBackedBytes)>, Failure> {
    let items = if let Ok(d) = objects.cast::<PyDict>() {
        d.items().into_any()
    } else if objects.hasattr("items")? {
        objects.call_method0("items")?
    } else {
        objects.clone()
    };
    let mut out = Vec::with_capacity(items.len().unwrap_or(0));
    for item in items.try_iter()? {
        let (id, bytes): (String, PyBackedBytes) = item?.extract()?;
        out.push((parse_id(&id)?, bytes));
    }
    Ok(out)
}

#[pymethods]
impl PyStore {
    /// The verified bytes of object `id`; raises `KeyError` if absent.
    fn __getitem__<'py>(&self, py: Python<'py>, id: &str) -> Result<Bound<'py, PyBytes>, Failure> {
        match self.get(py, id)? {
            Some(b) => Ok(b),
            None => Err(PyKeyError::new_err(id.to_string()).into()),
        }
    }

    /// The verified bytes of object `id`, or None if absent.
    fn get<'py>(&self, py: Python<'py>, id: &str) -> Result<Option<Bound<'py, PyBytes>>, Failure> {
        let id = parse_id(id)?;
        let store = &self.inner;
        let mut got = py.detach(|| snapgraph_store::ObjectStore::get_many(&**store, &[id]))?;
        Ok(got.pop().flatten().map(|b| PyBytes::new(py, &b)))
    }

    /// Whether the store holds object `id`.
    fn __contains__(&self, py: Python<'_>, id: &str) -> Result<bool, Failure> {
        let id = parse_id(id)?;
        let store = &self.inner;
        Ok(py.detach(|| store.has_many(&[id]))?.is_empty())
    }

    /// Writes objects: a mapping of hex id to bytes (`Commit.objects`) or an iterable
    /// of `(id, bytes)` pairs, in the order given (referenced objects first, as
    /// `Commit.objects` lists them). Held ones are left as they are. Every object is
    /// re-hashed first, and bytes that are not their id's (or not an object) raise
    /// `CorruptObjectError` naming the id, with nothing of the batch written: a store
    /// keeps the first bytes put under an id, so wrong ones would stay that object.
    fn put(&self, py: Python<'_>, objects: &Bound<'_, PyAny>) -> Result<(), Failure> {
        let owned = pairs(objects)?;
        let batch: Vec<(ObjectId, &[u8])> = owned.iter().map(|(i, b)| (*i, &**b)).collect();
        let store = &self.inner;
        py.detach(|| {
            snapgraph_store::check_put(&batch)?;
            Ok(store.put_many(&batch)?)
        })
    }

    /// The ids among `ids` (any iterable of hex str) the store does not hold, in the
    /// order given.
    fn missing(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> Result<Vec<String>, Failure> {
        let ids = parse_ids(ids)?;
        let store = &self.inner;
        Ok(hexes(&py.detach(|| store.has_many(&ids))?))
    }

    /// Every object id held, in no particular order.
    fn ids(&self, py: Python<'_>) -> Result<Vec<String>, Failure> {
        let store = &self.inner;
        let mut out = Vec::new();
        py.detach(|| {
            store.for_each_id(&mut |id| {
                out.push(id.to_hex());
                Ok::<(), StoreError>(())
            })
        })?;
        Ok(out)
    }

    /// The value of a ref (`heads/main`, `tags/x`), or None.
    fn get_ref(&self, py: Python<'_>, name: &str) -> Result<Option<String>, Failure> {
        let store = &self.inner;
        Ok(py.detach(|| store.get_ref(name))?.map(|i| i.to_hex()))
    }

    /// Every ref whose name starts with `prefix`, sorted by name, as (name, id).
    #[pyo3(signature = (prefix = ""))]
    fn list_refs(&self, py: Python<'_>, prefix: &str) -> Result<Vec<(String, String)>, Failure> {
        let store = &self.inner;
        let refs = py.detach(|| store.list_refs(prefix))?;
        Ok(refs.into_iter().map(|(n, i)| (n, i.to_hex())).collect())
    }
}

/// Branches, commits, checkouts, forks and labelled snapshots over one store. Every
/// call releases the GIL; on any error the workspace given is unchanged.
#[pyclass(name = "Repo", module = "snapgraph", frozen)]
pub struct PyRepo {
    inner: Repo<Arc<dyn Store>>,
}

#[pymethods]
impl PyRepo {
    /// A repository over `store` (from `snapgraph.open`).
    #[new]
    fn new(store: &PyStore) -> Self {
        Self {
            inner: Repo::new(store.inner.clone()),
        }
    }

    /// Opens the store `url` names (see `snapgraph.open`) as a repository.
    #[staticmethod]
    fn open(py: Python<'_>, url: &str) -> Result<Self, Failure> {
        Ok(Self::new(&open(py, url)?))
    }

    /// The store.
    #[getter]
    fn store(&self) -> PyStore {
        PyStore {
            inner: self.inner.store().clone(),
        }
    }

    /// Commits `ws` to `branch` and moves the branch to it: the parent is the
    /// workspace's head, and a branch not at that head raises `RefConflictError`
    /// (`code` "branch_moved"). `parents`: extra parents (a merge); `onto_tip`: let
    /// a workspace that never saw the branch become its next commit.
    #[pyo3(signature = (ws, branch, message = None, meta = None, parents = None, onto_tip = false))]
    #[allow(clippy::too_many_arguments)] // the keyword arguments are the Python API
    fn commit(
        &self,
        py: Python<'_>,
        mut ws: PyRefMut<'_, PyWorkspace>,
        branch: &str,
        message: Option<String>,
        meta: Option<BTreeMap<String, String>>,
        parents: Option<&Bound<'_, PyAny>>,
        onto_tip: bool,
    ) -> Result<Committed, Failure> {
        let options = RepoCommitOptions {
            message,
            meta: meta.unwrap_or_default(),
            extra_parents: parents.map(parse_ids).transpose()?.unwrap_or_default(),
            onto_tip,
            ..RepoCommitOptions::default()
        };
        let ws = &mut ws.inner;
        let repo = &self.inner;
        let c = py.detach(|| repo.commit(ws, branch, options))?;
        Ok(Committed {
            id: c.id.to_hex(),
            previous: c.previous.map(|p| p.to_hex()),
            objects_written: c.objects_written,
            bytes_written: c.bytes_written,
        })
    }

    /// A new workspace at `rev` (a branch, a snapshot name or a commit id).
    fn checkout(&self, py: Python<'_>, rev: &str) -> Result<PyWorkspace, Failure> {
        let repo = &self.inner;
        Ok(PyWorkspace::wrap(py.detach(|| repo.checkout(rev))?))
    }

    /// `checkout` reading trees only: file content stays in the store until
    /// `Workspace.load_content`, and commits back into this repository need none of it.
    fn checkout_shallow(&self, py: Python<'_>, rev: &str) -> Result<PyWorkspace, Failure> {
        let repo = &self.inner;
        Ok(PyWorkspace::wrap(py.detach(|| repo.checkout_shallow(rev))?))
    }

    /// The commit `rev` names (hex); raises `UnknownRevisionError`.
    fn resolve(&self, py: Python<'_>, rev: &str) -> Result<String, Failure> {
        let repo = &self.inner;
        Ok(py.detach(|| repo.resolve(rev))?.to_hex())
    }

    /// The tip of branch `name`, or None.
    fn branch(&self, py: Python<'_>, name: &str) -> Result<Option<String>, Failure> {
        let repo = &self.inner;
        Ok(py.detach(|| repo.branch(name))?.map(|i| i.to_hex()))
    }

    /// Every branch as (name, tip), sorted by name.
    fn branches(&self, py: Python<'_>) -> Result<Vec<(String, String)>, Failure> {
        let repo = &self.inner;
        let b = py.detach(|| repo.branches())?;
        Ok(b.into_iter().map(|(n, i)| (n, i.to_hex())).collect())
    }

    /// `rev` and its ancestors, newest first, at most `limit`.
    #[pyo3(signature = (rev, limit = 100))]
    fn log(&self, py: Python<'_>, rev: &str, limit: usize) -> Result<Vec<CommitObject>, Failure> {
        let repo = &self.inner;
        let entries = py.detach(|| repo.log(rev, limit))?;
        Ok(entries
            .into_iter()
            .map(|(id, c)| CommitObject::new(id, c))
            .collect())
    }

    /// Records a snapshot named `name` of `rev`, with string `labels`; refuses an
    /// existing name (`RefConflictError`, `code` "already_exists").
    #[pyo3(signature = (name, rev, labels = None))]
    fn tag(
        &self,
        py: Python<'_>,
        name: &str,
        rev: &str,
        labels: Option<BTreeMap<String, String>>,
    ) -> Result<SnapshotInfo, Failure> {
        let repo = &self.inner;
        let info = py.detach(|| repo.tag(name, rev, labels.unwrap_or_default()))?;
        Ok(SnapshotInfo::from(info))
    }

    /// Starts branch `new_branch` at `at` (a revision); returns its commit id.
    fn fork(&self, py: Python<'_>, new_branch: &str, at: &str) -> Result<String, Failure> {
        let repo = &self.inner;
        Ok(py.detach(|| repo.fork(new_branch, at))?.to_hex())
    }

    /// Deletes branch `name` if it is still at `expected`.
    fn delete_branch(&self, py: Python<'_>, name: &str, expected: &str) -> Result<(), Failure> {
        let expected = parse_id(expected)?;
        let repo = &self.inner;
        Ok(py.detach(|| repo.delete_branch(name, expected))?)
    }

    /// Every snapshot, by name.
    fn snapshots(&self, py: Python<'_>) -> Result<Vec<SnapshotInfo>, Failure> {
        let repo = &self.inner;
        let s = py.detach(|| repo.snapshots())?;
        Ok(s.into_iter().map(SnapshotInfo::from).collect())
    }

    /// One snapshot by name.
    fn inspect(&self, py: Python<'_>, name: &str) -> Result<SnapshotInfo, Failure> {
        let repo = &self.inner;
        Ok(SnapshotInfo::from(py.detach(|| repo.inspect(name))?))
    }
}

/// What `Repo.commit` wrote.
#[pyclass(module = "snapgraph", frozen, get_all)]
pub struct Committed {
    /// The new commit.
    id: String,
    /// The branch's previous tip.
    previous: Option<String>,
    /// Objects written (new to the store).
    objects_written: usize,
    /// Their stored bytes (before compression).
    bytes_written: u64,
}

#[pymethods]
impl Committed {
    fn __repr__(&self) -> String {
        format!(
            "<snapgraph.Committed {} ({} objects written)>",
            self.id, self.objects_written
        )
    }
}

/// A labelled snapshot of a repository.
#[pyclass(module = "snapgraph", frozen, get_all)]
pub struct SnapshotInfo {
    /// Its name.
    name: String,
    /// The tag commit's id.
    id: String,
    /// The commit it labels.
    target: String,
    /// Its labels.
    labels: BTreeMap<String, String>,
}

impl From<snapgraph_store::SnapshotInfo> for SnapshotInfo {
    fn from(s: snapgraph_store::SnapshotInfo) -> Self {
        Self {
            name: s.name,
            id: s.id.to_hex(),
            target: s.target.to_hex(),
            labels: s.labels,
        }
    }
}

#[pymethods]
impl SnapshotInfo {
    fn __repr__(&self) -> String {
        format!("<snapgraph.SnapshotInfo {} -> {}>", self.name, self.target)
    }
}

/// Copies what `dst` lacks of `src`'s ref `name` (history included), then moves
/// `dst`'s ref to the same commit (fast-forward only unless `force`).
#[pyfunction]
#[pyo3(signature = (src, dst, name, force = false))]
pub fn sync(
    py: Python<'_>,
    src: &PyStore,
    dst: &PyStore,
    name: &str,
    force: bool,
) -> Result<SyncReport, Failure> {
    let options = SyncOptions {
        force,
        ..SyncOptions::default()
    };
    let (s, d) = (&src.inner, &dst.inner);
    let r = interruptible(py, &options.cancel, || {
        snapgraph_store::sync_with(&**s, &**d, name, &options)
    })??;
    Ok(SyncReport {
        from_: r.from.map(|i| i.to_hex()),
        to: r.to.map(|i| i.to_hex()),
        objects: r.objects,
        bytes: r.bytes,
        examined: r.examined,
        queries: r.queries,
    })
}

/// What a sync did.
#[pyclass(module = "snapgraph", frozen, get_all)]
pub struct SyncReport {
    /// The destination's ref before (None: absent).
    from_: Option<String>,
    /// The destination's ref after.
    to: Option<String>,
    /// Objects copied.
    objects: usize,
    /// Their bytes.
    bytes: u64,
    /// Objects examined.
    examined: usize,
    /// `has_many` queries made of the destination.
    queries: usize,
}

/// Deletes every object not reachable from a ref or from `pins` (commit ids, with
/// their history); safe with concurrent writers (they hold leases).
#[pyfunction]
#[pyo3(signature = (store, pins = None))]
pub fn gc(
    py: Python<'_>,
    store: &PyStore,
    pins: Option<&Bound<'_, PyAny>>,
) -> Result<GcReport, Failure> {
    let options = GcOptions {
        pins: pins.map(parse_ids).transpose()?.unwrap_or_default(),
        ..GcOptions::default()
    };
    let s = &store.inner;
    let r = interruptible(py, &options.cancel, || {
        snapgraph_store::gc::collect_with(&**s, &options)
    })??;
    Ok(GcReport {
        deleted: hexes(&r.deleted),
        kept: r.kept,
        refs: r.refs,
        problems: r.problems.into_iter().map(Problem::from).collect(),
    })
}

/// What a garbage collection did.
#[pyclass(module = "snapgraph", frozen, get_all)]
pub struct GcReport {
    /// Objects deleted.
    deleted: Vec<String>,
    /// Objects kept.
    kept: usize,
    /// Refs marked from.
    refs: usize,
    /// Problems met while marking (the sweep keeps what it could not walk).
    problems: Vec<Problem>,
}

/// Re-hashes every object (`read_data`: chunks too) and checks every ref's closure.
#[pyfunction]
#[pyo3(signature = (store, read_data = true))]
pub fn verify(py: Python<'_>, store: &PyStore, read_data: bool) -> Result<VerifyReport, Failure> {
    let s = &store.inner;
    let r = py.detach(|| snapgraph_store::verify(&**s, read_data))?;
    Ok(VerifyReport {
        clean: r.is_clean(),
        refs: r.refs,
        reachable: r.reachable,
        objects: r.objects,
        rehashed: r.rehashed,
        bytes: r.bytes,
        unreachable: r.unreachable,
        broken_refs: r.broken_refs,
        problems: r.problems.into_iter().map(Problem::from).collect(),
    })
}

/// What `verify` found.
#[pyclass(module = "snapgraph", frozen)]
pub struct VerifyReport {
    /// Refs checked.
    #[pyo3(get)]
    refs: usize,
    /// Objects reachable from them.
    #[pyo3(get)]
    reachable: usize,
    /// Objects held.
    #[pyo3(get)]
    objects: usize,
    /// Objects re-hashed.
    #[pyo3(get)]
    rehashed: usize,
    /// Bytes re-hashed.
    #[pyo3(get)]
    bytes: u64,
    /// Objects no ref reaches.
    #[pyo3(get)]
    unreachable: usize,
    /// Refs whose closure is incomplete or invalid.
    #[pyo3(get)]
    broken_refs: Vec<String>,
    /// Every problem found.
    #[pyo3(get)]
    problems: Vec<Problem>,
    clean: bool,
}

#[pymethods]
impl VerifyReport {
    /// Whether nothing is wrong.
    fn is_clean(&self) -> bool {
        self.clean
    }
}

/// A problem met while walking a store: a missing or an invalid object.
#[pyclass(module = "snapgraph", frozen, get_all)]
#[derive(Clone)]
pub struct Problem {
    /// "missing", "invalid", "kind_conflict" (referenced as two kinds) or "unmarked".
    kind: &'static str,
    /// The object.
    id: String,
    /// For "missing": an object referencing it (None for a ref's root).
    referenced_by: Option<String>,
    /// For "invalid": what is wrong.
    reason: Option<String>,
}

impl From<WalkProblem> for Problem {
    fn from(p: WalkProblem) -> Self {
        let id = p.id().to_hex();
        let (kind, referenced_by, reason) = match &p {
            WalkProblem::Missing { referenced_by, .. } => {
                ("missing", referenced_by.map(|i| i.to_hex()), None)
            }
            WalkProblem::Invalid { reason, .. } => ("invalid", None, Some(reason.clone())),
            WalkProblem::KindConflict { .. } => ("kind_conflict", None, Some(p.to_string())),
            WalkProblem::Unmarked { .. } => ("unmarked", None, Some(p.to_string())),
            _ => ("other", None, Some(p.to_string())),
        };
        Self {
            kind,
            id,
            referenced_by,
            reason,
        }
    }
}

#[pymethods]
impl Problem {
    fn __repr__(&self) -> String {
        format!("<snapgraph.Problem {} {}>", self.kind, self.id)
    }
}
