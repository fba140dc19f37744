//! `SnapshotGraph` (history queries) and `CheckoutPlan` (the resumable fetch loop).

use js_sys::{Array, Object};
use snapgraph::graph::diff::{Change, ChangeEntry, ChangeKind};
use snapgraph::{GraphError, Limits, ObjectId};
use wasm_bindgen::prelude::*;

use crate::error;
use crate::js::{self, set, to_js, JsResult, JsSource};
use crate::workspace::{fingerprint_object, kind_name, read_object};

fn strings(v: &[String]) -> Array {
    v.iter().map(|s| JsValue::from_str(s)).collect()
}

/// `{ kind: "file" | "symlink", mode, size, id? }` of one side of a change, or `null`.
fn change_entry(e: Option<&ChangeEntry>) -> JsValue {
    let Some(e) = e else {
        return JsValue::NULL;
    };
    let o = js::object();
    set(&o, "kind", &JsValue::from_str(kind_name(e.kind)));
    set(&o, "mode", &JsValue::from_f64(f64::from(e.mode)));
    set(&o, "size", &js::number(e.size));
    if let Some(id) = e.id {
        set(&o, "id", &JsValue::from_str(&id.to_hex()));
    }
    o.into()
}

/// `{ path, kind, old, new }`, the Node package's change shape.
fn change(c: &Change) -> Object {
    let kind = match c.kind {
        ChangeKind::Added => "added",
        ChangeKind::Removed => "removed",
        ChangeKind::Modified => "modified",
        ChangeKind::TypeChanged => "typeChanged",
        ChangeKind::ModeChanged => "modeChanged",
        // A kind added to the core after this binding (the Node package says "other").
        _ => "other",
    };
    let o = js::object();
    set(&o, "path", &JsValue::from_str(&c.path));
    set(&o, "kind", &JsValue::from_str(kind));
    set(&o, "old", &change_entry(c.old.as_ref()));
    set(&o, "new", &change_entry(c.new.as_ref()));
    o
}

/// Runs a query of commit `id` over `objects`, converting the arguments and the error.
fn query<T>(
    id: &str,
    objects: &JsValue,
    f: impl FnOnce(ObjectId, &JsSource) -> Result<T, GraphError>,
) -> JsResult<T> {
    let id = js::id(id)?;
    let source = JsSource::new(objects, "objects")?;
    f(id, &source).map_err(|e| to_js(error::graph(&e)))
}

/// History queries over any object source (a `Map`, an object with `get(id)`, or a
/// record of hex ids). Every object read is verified.
#[wasm_bindgen]
pub struct SnapshotGraph;

#[wasm_bindgen]
impl SnapshotGraph {
    /// What changed from commit `a` to commit `b`: `{ changes, filesAdded,
    /// filesModified, filesRemoved, stateChanged, readsAdded, readsChanged,
    /// readsRemoved }`, paths absolute and sorted. Each change is `{ path, kind:
    /// "added" | "removed" | "modified" | "typeChanged" | "modeChanged", old, new }`
    /// with sides `{ kind, mode, size, id? }` (`null` for the absent side; `id` absent
    /// for inline content and symlinks). `limits.maxFiles` bounds the entries read per
    /// side.
    #[wasm_bindgen(unchecked_return_type = "Diff")]
    pub fn diff(
        a: &str,
        b: &str,
        #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Partial<Limits> | undefined")] limits: JsValue,
    ) -> JsResult<Object> {
        let (a, b) = (js::id(a)?, js::id(b)?);
        let source = JsSource::new(&objects, "objects")?;
        let mut l = Limits::default();
        if let Some(n) = js::opt_u64(&limits, "maxFiles")? {
            l.max_files = n;
        }
        let d = snapgraph::SnapshotGraph::diff_with_limits(a, b, &source, &l)
            .map_err(|e| to_js(error::graph(&e)))?;
        let o = js::object();
        let changes: Array = d.changes.iter().map(|c| JsValue::from(change(c))).collect();
        set(&o, "changes", &changes);
        set(&o, "filesAdded", &strings(&d.files_added));
        set(&o, "filesModified", &strings(&d.files_modified));
        set(&o, "filesRemoved", &strings(&d.files_removed));
        set(&o, "stateChanged", &JsValue::from_bool(d.state_changed));
        set(&o, "readsAdded", &strings(&d.reads_added));
        set(&o, "readsChanged", &strings(&d.reads_changed));
        set(&o, "readsRemoved", &strings(&d.reads_removed));
        Ok(o)
    }

    /// `id` and its ancestors, newest first (topological), at most `limit` (default:
    /// all). The walk stops at ancestors the source lacks; `id` itself must be there.
    #[wasm_bindgen(unchecked_return_type = "string[]")]
    pub fn ancestry(
        id: &str,
        #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
        limit: Option<f64>,
    ) -> JsResult<Array> {
        let limit = match limit {
            None => usize::MAX,
            Some(n) => js::u64_value(&JsValue::from_f64(n), "limit")?
                .try_into()
                .unwrap_or(usize::MAX),
        };
        query(id, &objects, |i, s| {
            snapgraph::SnapshotGraph::ancestry(i, s, limit)
        })
        .map(|v| js::id_array(&v))
    }

    /// The decoded commit: `{ id, tree, parents, generation, meta, stateSize,
    /// capabilities, reads }` (ids hex, `capabilities` and `reads` ids or `null`).
    #[wasm_bindgen(unchecked_return_type = "CommitInfo")]
    pub fn commit(
        id: &str,
        #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
    ) -> JsResult<Object> {
        let cid = js::id(id)?;
        let source = JsSource::new(&objects, "objects")?;
        let c =
            snapgraph::SnapshotGraph::commit(cid, &source).map_err(|e| to_js(error::graph(&e)))?;
        let o = js::object();
        set(&o, "id", &JsValue::from_str(&cid.to_hex()));
        set(&o, "tree", &JsValue::from_str(&c.tree.to_hex()));
        set(&o, "parents", &js::id_array(&c.parents));
        set(&o, "generation", &js::number(c.generation));
        set(&o, "stateSize", &js::number(c.state_size));
        let meta = js::object();
        for (k, v) in &c.meta {
            set(&meta, k, &JsValue::from_str(v));
        }
        set(&o, "meta", &meta);
        let opt = |i: Option<snapgraph::ObjectId>| {
            i.map_or(JsValue::NULL, |i| JsValue::from_str(&i.to_hex()))
        };
        set(&o, "capabilities", &opt(c.capabilities));
        set(&o, "reads", &opt(c.reads));
        Ok(o)
    }

    /// Every object commit `id` needs to be restored (parents not followed), each
    /// verified, referenced objects first and the commit last.
    #[wasm_bindgen(unchecked_return_type = "string[]")]
    pub fn reachable(
        id: &str,
        #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
    ) -> JsResult<Array> {
        query(id, &objects, snapgraph::SnapshotGraph::reachable).map(|v| js::id_array(&v))
    }

    /// Every object of `id`'s whole history (parents followed): what a collector keeps.
    #[wasm_bindgen(js_name = reachableHistory, unchecked_return_type = "string[]")]
    pub fn reachable_history(
        id: &str,
        #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
    ) -> JsResult<Array> {
        query(id, &objects, snapgraph::SnapshotGraph::reachable_history).map(|v| js::id_array(&v))
    }

    /// The objects still missing for a checkout of `id` among those reachable through
    /// objects the source holds; fetch them and call again until it returns `[]`.
    /// A loop over IndexedDB should use [`CheckoutPlan`], which resumes instead.
    #[wasm_bindgen(js_name = planCheckout, unchecked_return_type = "string[]")]
    pub fn plan_checkout(
        id: &str,
        #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
    ) -> JsResult<Array> {
        query(id, &objects, snapgraph::SnapshotGraph::plan_checkout).map(|v| js::id_array(&v))
    }

    /// The capability fingerprint commit `id` recorded, or `null`.
    #[wasm_bindgen(unchecked_return_type = "CapabilityFingerprint | null")]
    pub fn capabilities(
        id: &str,
        #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
    ) -> JsResult<JsValue> {
        query(id, &objects, snapgraph::SnapshotGraph::capabilities)
            .map(|fp| fp.map_or(JsValue::NULL, |fp| fingerprint_object(&fp).into()))
    }

    /// The external reads commit `id` recorded, sorted by source.
    #[wasm_bindgen(js_name = externalReads, unchecked_return_type = "ExternalRead[]")]
    pub fn external_reads(
        id: &str,
        #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
    ) -> JsResult<Array> {
        query(id, &objects, snapgraph::SnapshotGraph::external_reads)
            .map(|v| v.iter().map(|r| JsValue::from(read_object(r))).collect())
    }
}

/// A checkout's fetch loop that resumes where the last round stopped, so a whole
/// loop reads each object once:
///
/// ```js
/// const plan = new CheckoutPlan(id);
/// for (;;) {
///   const missing = plan.missing(cache);
///   if (missing.length === 0) break;
///   for (const [id, bytes] of await store.getMany(missing)) cache.set(id, bytes);
/// }
/// ws.checkout(id, cache);
/// ```
#[wasm_bindgen]
pub struct CheckoutPlan {
    inner: snapgraph::graph::CheckoutPlan,
}

#[wasm_bindgen]
impl CheckoutPlan {
    /// A plan for checking out commit `id`.
    #[wasm_bindgen(constructor)]
    pub fn new(id: &str) -> JsResult<CheckoutPlan> {
        Ok(Self {
            inner: snapgraph::graph::CheckoutPlan::new(js::id(id)?),
        })
    }

    /// Whether the last call found nothing missing.
    #[wasm_bindgen(js_name = isDone)]
    pub fn is_done(&self) -> bool {
        self.inner.is_done()
    }

    /// The objects still missing below those found since the last call. After an
    /// error the plan starts over from the commit.
    #[wasm_bindgen(unchecked_return_type = "string[]")]
    pub fn missing(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
    ) -> JsResult<Array> {
        let source = JsSource::new(&objects, "objects")?;
        self.inner
            .missing(&source)
            .map(|v| js::id_array(&v))
            .map_err(|e| to_js(error::graph(&e)))
    }
}

/// Bashkit's name for [`SnapshotGraph::diff`].
#[wasm_bindgen(js_name = snapshotDiff, unchecked_return_type = "Diff")]
pub fn snapshot_diff(
    a: &str,
    b: &str,
    #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
) -> JsResult<Object> {
    SnapshotGraph::diff(a, b, objects, JsValue::UNDEFINED)
}

/// Bashkit's name for [`SnapshotGraph::ancestry`].
#[wasm_bindgen(js_name = snapshotAncestry, unchecked_return_type = "string[]")]
pub fn snapshot_ancestry(
    id: &str,
    #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
    limit: Option<f64>,
) -> JsResult<Array> {
    SnapshotGraph::ancestry(id, objects, limit)
}

/// Bashkit's name for [`SnapshotGraph::reachable`].
#[wasm_bindgen(js_name = snapshotReachable, unchecked_return_type = "string[]")]
pub fn snapshot_reachable(
    id: &str,
    #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
) -> JsResult<Array> {
    SnapshotGraph::reachable(id, objects)
}

/// Bashkit's name for [`SnapshotGraph::plan_checkout`].
#[wasm_bindgen(js_name = snapshotPlanCheckout, unchecked_return_type = "string[]")]
pub fn snapshot_plan_checkout(
    id: &str,
    #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
) -> JsResult<Array> {
    SnapshotGraph::plan_checkout(id, objects)
}

/// Bashkit's name for [`SnapshotGraph::capabilities`].
#[wasm_bindgen(js_name = snapshotCapabilities, unchecked_return_type = "CapabilityFingerprint | null")]
pub fn snapshot_capabilities(
    id: &str,
    #[wasm_bindgen(unchecked_param_type = "ObjectSourceLike")] objects: JsValue,
) -> JsResult<JsValue> {
    SnapshotGraph::capabilities(id, objects)
}
