//! `SnapshotGraph`: history queries over an `objects` value, and Bashkit's free
//! functions of the same queries.

use napi::bindgen_prelude::{Either, Null};
use napi_derive::napi;
use snapgraph::graph::reachable::CheckoutPlan as RsCheckoutPlan;
use snapgraph::{Diff, SnapshotGraph as Rs};

use crate::convert::{self, hexes, Capabilities, CommitInfo, OrJs, Read};
use crate::error::Result;
use crate::source::{JsSource, ObjectsArg};

/// One side of a change: what the entry was.
#[napi(object)]
pub struct ChangeEntry {
    /// `'file'` or `'symlink'`.
    pub kind: String,
    /// Permission bits.
    pub mode: u32,
    /// Bytes (a symlink's: its target's).
    pub size: f64,
    /// The content object (chunk or manifest root); absent for inline content and
    /// symlinks.
    pub id: Option<String>,
}

/// A changed file or symlink.
#[napi(object)]
pub struct Change {
    /// Its path.
    pub path: String,
    /// `'added'`, `'removed'`, `'modified'`, `'typeChanged'` or `'modeChanged'`.
    pub kind: String,
    /// The entry before (`null` when added).
    pub old: Either<ChangeEntry, Null>,
    /// The entry after (`null` when removed).
    pub new: Either<ChangeEntry, Null>,
}

fn change_entry(e: Option<snapgraph::graph::diff::ChangeEntry>) -> Either<ChangeEntry, Null> {
    match e {
        Some(e) => Either::A(ChangeEntry {
            kind: convert::kind_name(e.kind).to_string(),
            mode: e.mode,
            size: e.size as f64,
            id: e.id.map(|i| i.to_hex()),
        }),
        None => Either::B(Null),
    }
}

fn change(c: snapgraph::graph::diff::Change) -> Change {
    use snapgraph::graph::diff::ChangeKind as K;
    let kind = match c.kind {
        K::Added => "added",
        K::Removed => "removed",
        K::Modified => "modified",
        K::TypeChanged => "typeChanged",
        K::ModeChanged => "modeChanged",
        #[allow(unreachable_patterns)]
        _ => "other",
    };
    Change {
        path: c.path,
        kind: kind.to_string(),
        old: change_entry(c.old),
        new: change_entry(c.new),
    }
}

/// What changed from one commit to another.
#[napi(object)]
pub struct DiffResult {
    /// Every change, as values, in path order.
    pub changes: Vec<Change>,
    /// Files (and symlinks) present only in the second commit.
    pub files_added: Vec<String>,
    /// Files whose content, kind or mode changed.
    pub files_modified: Vec<String>,
    /// Files present only in the first commit.
    pub files_removed: Vec<String>,
    /// Whether the interpreter state differs.
    pub state_changed: bool,
    /// External read sources recorded only in the second commit.
    pub reads_added: Vec<String>,
    /// Sources whose record changed.
    pub reads_changed: Vec<String>,
    /// Sources recorded only in the first commit.
    pub reads_removed: Vec<String>,
}

impl From<Diff> for DiffResult {
    fn from(d: Diff) -> Self {
        Self {
            changes: d.changes.into_iter().map(change).collect(),
            files_added: d.files_added,
            files_modified: d.files_modified,
            files_removed: d.files_removed,
            state_changed: d.state_changed,
            reads_added: d.reads_added,
            reads_changed: d.reads_changed,
            reads_removed: d.reads_removed,
        }
    }
}

/// What changed from commit `a` to commit `b`.
pub fn diff(a: &str, b: &str, objects: ObjectsArg<'_>) -> Result<DiffResult> {
    let (a, b) = (convert::id(a)?, convert::id(b)?);
    let source = JsSource::new(objects)?;
    Ok(DiffResult::from(Rs::diff(a, b, &source).or_js()?))
}

/// `id` and its ancestors, newest first, at most `limit`.
pub fn ancestry(id: &str, objects: ObjectsArg<'_>, max: Option<f64>) -> Result<Vec<String>> {
    let id = convert::id(id)?;
    let source = JsSource::new(objects)?;
    Ok(hexes(
        Rs::ancestry(id, &source, convert::limit(max)?).or_js()?,
    ))
}

/// Every object commit `id` needs, dependency order.
pub fn reachable(id: &str, objects: ObjectsArg<'_>) -> Result<Vec<String>> {
    let id = convert::id(id)?;
    let source = JsSource::new(objects)?;
    Ok(hexes(Rs::reachable(id, &source).or_js()?))
}

/// The objects still missing for a checkout of `id`.
pub fn plan_checkout(id: &str, objects: ObjectsArg<'_>) -> Result<Vec<String>> {
    let id = convert::id(id)?;
    let source = JsSource::new(objects)?;
    Ok(hexes(Rs::plan_checkout(id, &source).or_js()?))
}

/// The capability fingerprint commit `id` recorded.
pub fn capabilities(id: &str, objects: ObjectsArg<'_>) -> Result<Option<Capabilities>> {
    let id = convert::id(id)?;
    let source = JsSource::new(objects)?;
    Ok(Rs::capabilities(id, &source)
        .or_js()?
        .as_ref()
        .map(Capabilities::from))
}

/// History queries; every object read is verified.
#[napi]
pub struct SnapshotGraph {}

#[napi]
impl SnapshotGraph {
    /// What changed from commit `a` to commit `b`; identical subtrees are not read.
    #[napi(ts_args_type = "a: string, b: string, objects: Objects")]
    pub fn diff(a: String, b: String, objects: ObjectsArg<'_>) -> Result<DiffResult> {
        diff(&a, &b, objects)
    }

    /// `id` and its ancestors, newest first, topological, at most `limit`.
    #[napi(ts_args_type = "id: string, objects: Objects, limit?: number")]
    pub fn ancestry(
        id: String,
        objects: ObjectsArg<'_>,
        limit: Option<f64>,
    ) -> Result<Vec<String>> {
        ancestry(&id, objects, limit)
    }

    /// Every object commit `id` needs (parents not followed), referenced objects
    /// first, the commit last.
    #[napi(ts_args_type = "id: string, objects: Objects")]
    pub fn reachable(id: String, objects: ObjectsArg<'_>) -> Result<Vec<String>> {
        reachable(&id, objects)
    }

    /// Every object of `id`'s whole history (what a collector must keep).
    #[napi(ts_args_type = "id: string, objects: Objects")]
    pub fn reachable_history(id: String, objects: ObjectsArg<'_>) -> Result<Vec<String>> {
        let id = convert::id(&id)?;
        let source = JsSource::new(objects)?;
        Ok(hexes(Rs::reachable_history(id, &source).or_js()?))
    }

    /// The objects still missing for a checkout of `id`: fetch them and call again
    /// until it returns `[]` (or use a `CheckoutPlan`, which resumes).
    #[napi(ts_args_type = "id: string, objects: Objects")]
    pub fn plan_checkout(id: String, objects: ObjectsArg<'_>) -> Result<Vec<String>> {
        plan_checkout(&id, objects)
    }

    /// The capability fingerprint commit `id` recorded, if any.
    #[napi(ts_args_type = "id: string, objects: Objects")]
    pub fn capabilities(id: String, objects: ObjectsArg<'_>) -> Result<Option<Capabilities>> {
        capabilities(&id, objects)
    }

    /// The external reads commit `id` recorded.
    #[napi(ts_args_type = "id: string, objects: Objects")]
    pub fn external_reads(id: String, objects: ObjectsArg<'_>) -> Result<Vec<Read>> {
        let id = convert::id(&id)?;
        let source = JsSource::new(objects)?;
        Ok(Rs::external_reads(id, &source)
            .or_js()?
            .iter()
            .map(Read::from)
            .collect())
    }

    /// Commit `id`, decoded.
    #[napi(ts_args_type = "id: string, objects: Objects")]
    pub fn commit(id: String, objects: ObjectsArg<'_>) -> Result<CommitInfo> {
        let oid = convert::id(&id)?;
        let source = JsSource::new(objects)?;
        Ok(CommitInfo::new(oid, &Rs::commit(oid, &source).or_js()?))
    }
}

/// A checkout fetch loop that resumes where the last round stopped, so the whole
/// loop reads each object once.
#[napi]
pub struct CheckoutPlan {
    inner: RsCheckoutPlan,
}

#[napi]
impl CheckoutPlan {
    /// A plan for checking out commit `id`.
    #[napi(constructor)]
    pub fn new(id: String) -> Result<Self> {
        Ok(Self {
            inner: RsCheckoutPlan::new(convert::id(&id)?),
        })
    }

    /// The ids to fetch this round (`[]`: the checkout has everything).
    #[napi(ts_args_type = "objects: Objects")]
    pub fn missing(&mut self, objects: ObjectsArg<'_>) -> Result<Vec<String>> {
        let source = JsSource::new(objects)?;
        Ok(hexes(self.inner.missing(&source).or_js()?))
    }

    /// Whether the last round found nothing missing.
    #[napi]
    pub fn is_done(&self) -> bool {
        self.inner.is_done()
    }
}

/// Bashkit's name for `SnapshotGraph.diff`.
#[napi(ts_args_type = "a: string, b: string, objects: Objects")]
pub fn snapshot_diff(a: String, b: String, objects: ObjectsArg<'_>) -> Result<DiffResult> {
    diff(&a, &b, objects)
}

/// Bashkit's name for `SnapshotGraph.ancestry`.
#[napi(ts_args_type = "id: string, objects: Objects, limit?: number")]
pub fn snapshot_ancestry(
    id: String,
    objects: ObjectsArg<'_>,
    limit: Option<f64>,
) -> Result<Vec<String>> {
    ancestry(&id, objects, limit)
}

/// Bashkit's name for `SnapshotGraph.reachable`.
#[napi(ts_args_type = "id: string, objects: Objects")]
pub fn snapshot_reachable(id: String, objects: ObjectsArg<'_>) -> Result<Vec<String>> {
    reachable(&id, objects)
}

/// Bashkit's name for `SnapshotGraph.planCheckout`.
#[napi(ts_args_type = "id: string, objects: Objects")]
pub fn snapshot_plan_checkout(id: String, objects: ObjectsArg<'_>) -> Result<Vec<String>> {
    plan_checkout(&id, objects)
}

/// Bashkit's name for `SnapshotGraph.capabilities`.
#[napi(ts_args_type = "id: string, objects: Objects")]
pub fn snapshot_capabilities(id: String, objects: ObjectsArg<'_>) -> Result<Option<Capabilities>> {
    capabilities(&id, objects)
}
