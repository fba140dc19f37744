//! `snapgraph.SnapshotGraph`: history queries over any objects, and what they return.

use std::collections::BTreeMap;

use pyo3::prelude::*;
use snapgraph::graph::diff;
use snapgraph::graph::reachable::CheckoutPlan as CorePlan;
use snapgraph::{EntryKind, GraphError, ObjectId, ObjectSource, SnapshotGraph};

use crate::errors::Failure;
use crate::source::{parse_id, Objects};
use crate::workspace::{Capabilities, PyExternalRead};

fn hexes(ids: Vec<ObjectId>) -> Vec<String> {
    ids.iter().map(ObjectId::to_hex).collect()
}

/// Runs one query on commit `id` over `objects` without the GIL.
fn query<T: Send>(
    py: Python<'_>,
    id: &str,
    objects: &Bound<'_, PyAny>,
    f: impl FnOnce(ObjectId, &dyn ObjectSource) -> Result<T, GraphError> + Send,
) -> Result<T, Failure> {
    let id = parse_id(id)?;
    let objects = Objects::from_py(objects)?;
    objects.finish(py.detach(|| f(id, objects.source())).map_err(Failure::from))
}

/// The history queries. Each takes commit ids (hex) and the objects to read (a store,
/// a dict of hex id to bytes, or any object with `__getitem__`); every object read is
/// verified. The GIL is released while they run.
#[pyclass(name = "SnapshotGraph", module = "snapgraph", frozen)]
pub struct PySnapshotGraph;

#[pymethods]
impl PySnapshotGraph {
    /// What differs between commits `a` and `b`.
    #[staticmethod]
    fn diff(py: Python<'_>, a: &str, b: &str, objects: &Bound<'_, PyAny>) -> Result<Diff, Failure> {
        let a = parse_id(a)?;
        let inner = query(py, b, objects, |b, src| SnapshotGraph::diff(a, b, src))?;
        Ok(Diff { inner })
    }

    /// `commit_id` and its ancestors, newest first (topological), at most `limit`.
    /// Stops at ancestors the objects lack.
    #[staticmethod]
    #[pyo3(signature = (commit_id, objects, limit = 100))]
    fn ancestry(
        py: Python<'_>,
        commit_id: &str,
        objects: &Bound<'_, PyAny>,
        limit: usize,
    ) -> Result<Vec<String>, Failure> {
        let id = parse_id(commit_id)?;
        let objects = Objects::from_py(objects)?;
        let ids = py.detach(|| SnapshotGraph::ancestry(id, objects.source(), limit));
        Ok(hexes(objects.finish(ids.map_err(Failure::from))?))
    }

    /// Every object the commit needs to be restored (parents not followed), referenced
    /// objects first, the commit last. A missing object raises `ObjectNotFoundError`.
    #[staticmethod]
    fn reachable(
        py: Python<'_>,
        commit_id: &str,
        objects: &Bound<'_, PyAny>,
    ) -> Result<Vec<String>, Failure> {
        let id = parse_id(commit_id)?;
        let objects = Objects::from_py(objects)?;
        let ids = py.detach(|| SnapshotGraph::reachable(id, objects.source()));
        Ok(hexes(objects.finish(ids.map_err(Failure::from))?))
    }

    /// Every object of the commit's whole history (parents followed): what a garbage
    /// collector keeps for it.
    #[staticmethod]
    fn reachable_history(
        py: Python<'_>,
        commit_id: &str,
        objects: &Bound<'_, PyAny>,
    ) -> Result<Vec<String>, Failure> {
        let id = parse_id(commit_id)?;
        let objects = Objects::from_py(objects)?;
        let ids = py.detach(|| SnapshotGraph::reachable_history(id, objects.source()));
        Ok(hexes(objects.finish(ids.map_err(Failure::from))?))
    }

    /// The objects still missing for a checkout of the commit, among those reachable
    /// through objects present. Fetch them and call again until it returns [].
    /// (`CheckoutPlan` does the same without re-reading what earlier rounds read.)
    #[staticmethod]
    fn plan_checkout(
        py: Python<'_>,
        commit_id: &str,
        objects: &Bound<'_, PyAny>,
    ) -> Result<Vec<String>, Failure> {
        let id = parse_id(commit_id)?;
        let objects = Objects::from_py(objects)?;
        let ids = py.detach(|| SnapshotGraph::plan_checkout(id, objects.source()));
        Ok(hexes(objects.finish(ids.map_err(Failure::from))?))
    }

    /// Reads and verifies one commit.
    #[staticmethod]
    fn commit(
        py: Python<'_>,
        commit_id: &str,
        objects: &Bound<'_, PyAny>,
    ) -> Result<CommitObject, Failure> {
        query(py, commit_id, objects, |id, src| {
            Ok(CommitObject::new(id, SnapshotGraph::commit(id, src)?))
        })
    }

    /// The capability fingerprint the commit recorded, or None.
    #[staticmethod]
    fn capabilities(
        py: Python<'_>,
        commit_id: &str,
        objects: &Bound<'_, PyAny>,
    ) -> Result<Option<Capabilities>, Failure> {
        let c = query(py, commit_id, objects, |id, src| {
            SnapshotGraph::capabilities(id, src)
        })?;
        Ok(c.as_ref().map(Capabilities::from))
    }

    /// The external reads the commit recorded, sorted by source.
    #[staticmethod]
    fn external_reads(
        py: Python<'_>,
        commit_id: &str,
        objects: &Bound<'_, PyAny>,
    ) -> Result<Vec<PyExternalRead>, Failure> {
        let reads = query(py, commit_id, objects, |id, src| {
            SnapshotGraph::external_reads(id, src)
        })?;
        Ok(reads.into_iter().map(PyExternalRead::from).collect())
    }
}

/// `SnapshotGraph.plan_checkout` that remembers where it stopped: each `missing()`
/// call explores only from what the previous call found missing, so a fetch loop
/// reads each object once.
#[pyclass(module = "snapgraph")]
pub struct CheckoutPlan {
    inner: CorePlan,
}

#[pymethods]
impl CheckoutPlan {
    /// A plan for checking out `commit_id`.
    #[new]
    fn new(commit_id: &str) -> Result<Self, Failure> {
        Ok(Self {
            inner: CorePlan::new(parse_id(commit_id)?),
        })
    }

    /// The ids to fetch next; [] once the objects hold everything the checkout needs.
    fn missing(
        &mut self,
        py: Python<'_>,
        objects: &Bound<'_, PyAny>,
    ) -> Result<Vec<String>, Failure> {
        let objects = Objects::from_py(objects)?;
        let plan = &mut self.inner;
        let ids = py.detach(|| plan.missing(objects.source()));
        Ok(hexes(objects.finish(ids.map_err(Failure::from))?))
    }

    /// Whether the last `missing()` call found nothing missing.
    #[getter]
    fn is_done(&self) -> bool {
        self.inner.is_done()
    }
}

/// What differs between two commits. Paths are of regular files and symlinks.
#[pyclass(module = "snapgraph", frozen)]
pub struct Diff {
    inner: snapgraph::Diff,
}

#[pymethods]
impl Diff {
    /// Every change as a value (path, kind, old and new entry), sorted by path.
    #[getter]
    fn changes(&self) -> Vec<Change> {
        self.inner.changes.iter().map(Change::from).collect()
    }

    /// Files present only in the second commit.
    #[getter]
    fn files_added(&self) -> Vec<String> {
        self.inner.files_added.clone()
    }

    /// Files in both whose content, mode or kind differs.
    #[getter]
    fn files_modified(&self) -> Vec<String> {
        self.inner.files_modified.clone()
    }

    /// Files present only in the first commit.
    #[getter]
    fn files_removed(&self) -> Vec<String> {
        self.inner.files_removed.clone()
    }

    /// Whether the opaque state bytes differ.
    #[getter]
    fn state_changed(&self) -> bool {
        self.inner.state_changed
    }

    /// External read sources recorded only by the second commit.
    #[getter]
    fn reads_added(&self) -> Vec<String> {
        self.inner.reads_added.clone()
    }

    /// External read sources recorded by both with a different record.
    #[getter]
    fn reads_changed(&self) -> Vec<String> {
        self.inner.reads_changed.clone()
    }

    /// External read sources recorded only by the first commit.
    #[getter]
    fn reads_removed(&self) -> Vec<String> {
        self.inner.reads_removed.clone()
    }

    /// Whether nothing differs.
    fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    fn __repr__(&self) -> String {
        format!(
            "<snapgraph.Diff +{} ~{} -{} state_changed={}>",
            self.inner.files_added.len(),
            self.inner.files_modified.len(),
            self.inner.files_removed.len(),
            self.inner.state_changed
        )
    }
}

/// One change of a diff.
#[pyclass(module = "snapgraph", frozen, get_all)]
pub struct Change {
    /// Absolute path.
    path: String,
    /// "added", "removed", "modified", "type_changed" or "mode_changed".
    kind: &'static str,
    /// The entry in the first commit (None when added).
    old: Option<ChangeEntry>,
    /// The entry in the second commit (None when removed).
    new: Option<ChangeEntry>,
}

impl From<&diff::Change> for Change {
    fn from(c: &diff::Change) -> Self {
        Self {
            path: c.path.clone(),
            kind: match c.kind {
                diff::ChangeKind::Added => "added",
                diff::ChangeKind::Removed => "removed",
                diff::ChangeKind::Modified => "modified",
                diff::ChangeKind::TypeChanged => "type_changed",
                diff::ChangeKind::ModeChanged => "mode_changed",
                _ => "other",
            },
            old: c.old.map(ChangeEntry::from),
            new: c.new.map(ChangeEntry::from),
        }
    }
}

#[pymethods]
impl Change {
    fn __repr__(&self) -> String {
        format!("Change({:?}, {:?})", self.kind, self.path)
    }
}

/// One side of a change: what the entry was.
#[pyclass(module = "snapgraph", frozen, get_all)]
#[derive(Clone)]
pub struct ChangeEntry {
    /// "file" or "symlink".
    kind: &'static str,
    /// Permission bits.
    mode: u32,
    /// Length in bytes (a symlink's: its target's).
    size: u64,
    /// The content object (hex), None for content inline in the tree and symlinks.
    id: Option<String>,
}

impl From<diff::ChangeEntry> for ChangeEntry {
    fn from(e: diff::ChangeEntry) -> Self {
        Self {
            kind: match e.kind {
                EntryKind::File => "file",
                EntryKind::Dir => "dir",
                EntryKind::Symlink => "symlink",
            },
            mode: e.mode,
            size: e.size,
            id: e.id.map(|i| i.to_hex()),
        }
    }
}

/// A decoded commit (as `SnapshotGraph.commit` and `Repo.log` return it).
#[pyclass(module = "snapgraph", frozen, get_all)]
pub struct CommitObject {
    /// The commit's id.
    id: String,
    /// Its root tree node's id.
    tree: String,
    /// Parent commit ids, first parent first.
    parents: Vec<String>,
    /// 1 for a root commit, else 1 + the largest parent generation.
    generation: u64,
    /// Length of the opaque state bytes.
    state_size: u64,
    /// The capability fingerprint's id, if one was recorded.
    capabilities: Option<String>,
    /// The recorded external reads' id, if any were recorded.
    reads: Option<String>,
    /// Caller metadata.
    meta: BTreeMap<String, String>,
}

impl CommitObject {
    pub fn new(id: ObjectId, c: snapgraph::CommitObject) -> Self {
        Self {
            id: id.to_hex(),
            tree: c.tree.to_hex(),
            parents: hexes(c.parents),
            generation: c.generation,
            state_size: c.state_size,
            capabilities: c.capabilities.map(|i| i.to_hex()),
            reads: c.reads.map(|i| i.to_hex()),
            meta: c.meta,
        }
    }
}

#[pymethods]
impl CommitObject {
    fn __repr__(&self) -> String {
        format!(
            "<snapgraph.CommitObject {} generation {} parents {:?}>",
            self.id, self.generation, self.parents
        )
    }
}
