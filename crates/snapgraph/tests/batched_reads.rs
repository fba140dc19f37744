//! Batched reads (issue #12): checkout, diff and checkout planning read a level of
//! the object graph per call, so a source with per-call latency (a database, an
//! object store) costs round trips proportional to the graph's depth, not to its
//! number of objects. Each test failed before tree loading, diff and `CheckoutPlan`
//! used `get_many`/`contains_many` (one call per object then).

mod common;

use std::borrow::Cow;
use std::cell::Cell;

use common::{persist, Store};
use snapgraph::graph::reachable::CheckoutPlan;
use snapgraph::{
    BoxError, CheckoutOptions, CheckoutPolicy, CommitOptions, DriftPolicy, ObjectId, ObjectSource,
    SnapshotGraph, Workspace,
};

/// A source that answers like a store with one round trip per call: counts calls
/// of any kind.
struct Calls<'a> {
    inner: &'a Store,
    calls: Cell<usize>,
}

impl<'a> Calls<'a> {
    fn new(inner: &'a Store) -> Self {
        Self {
            inner,
            calls: Cell::new(0),
        }
    }
    fn take(&self) -> usize {
        self.calls.replace(0)
    }
}

impl ObjectSource for Calls<'_> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        self.calls.set(self.calls.get() + 1);
        ObjectSource::get(self.inner, id)
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        self.calls.set(self.calls.get() + 1);
        ObjectSource::contains(self.inner, id)
    }
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Cow<'_, [u8]>>>, BoxError> {
        self.calls.set(self.calls.get() + 1);
        ids.iter()
            .map(|id| ObjectSource::get(self.inner, id))
            .collect()
    }
    fn contains_many(&self, ids: &[ObjectId]) -> Result<Vec<bool>, BoxError> {
        self.calls.set(self.calls.get() + 1);
        ids.iter()
            .map(|id| ObjectSource::contains(self.inner, id))
            .collect()
    }
}

/// 2,000 files of 5,000 bytes (one chunk each) in 200 directories two levels deep.
fn wide_tree() -> Workspace {
    let mut ws = Workspace::new();
    for f in 0..2_000u32 {
        let mut body = common::pseudo_random(5_000, u64::from(f) + 1);
        body[..4].copy_from_slice(&f.to_le_bytes());
        ws.write(&format!("/d{:02}/e{}/f{f:04}", f % 20, f / 20 % 10), body)
            .unwrap();
    }
    ws
}

#[test]
fn checkout_costs_calls_per_level_not_per_object() {
    let mut ws = wide_tree();
    let mut store = Store::new();
    let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    assert!(store.len() > 2_200, "{} objects", store.len()); // 2,000 chunks, 221 trees
    let src = Calls::new(&store);

    let mut full = Workspace::new();
    full.checkout(id, &src, CheckoutPolicy::default())
        .unwrap()
        .verify(|_| None)
        .unwrap();
    assert_eq!(
        full.read("/d17/e9/f1997").unwrap(),
        ws.read("/d17/e9/f1997").unwrap()
    );
    // The commit, each tree level of the whole commit (root, 20 directories, 200
    // directories of 10 entries), then the content (10 MB: manifest roots and
    // chunks) in windows of at most 8 MiB or 1,024 objects: 28 calls when written,
    // against one per object (2,221) before.
    let calls = src.take();
    assert!(calls <= 32, "full checkout: {calls} calls");

    let mut shallow = Workspace::new();
    shallow
        .checkout_with(
            id,
            &src,
            CheckoutOptions::new().shallow(true).drift(DriftPolicy::Off),
        )
        .unwrap()
        .verify(|_| None)
        .unwrap();
    let calls = src.take();
    assert!(calls <= 6, "shallow checkout: {calls} calls");
}

#[test]
fn diff_costs_calls_per_level_not_per_directory() {
    let mut ws = wide_tree();
    let mut store = Store::new();
    let a = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    // A change in every one of the 200 leaf directories.
    for d in 0..20 {
        for e in 0..10 {
            ws.write(&format!("/d{d:02}/e{e}/new"), b"x").unwrap();
        }
    }
    let b = persist(
        &mut store,
        ws.commit(CommitOptions::new().parent(a)).unwrap(),
    );
    let src = Calls::new(&store);
    let diff = SnapshotGraph::diff(a, b, &src).unwrap();
    assert_eq!(diff.files_added.len(), 200);
    assert!(diff.files_modified.is_empty() && diff.files_removed.is_empty());
    // Two commits, then a batched read per directory depth (root, 20, 200): 53 calls
    // when written, against one per tree node (over 220) before.
    let calls = src.take();
    assert!(calls <= 60, "diff: {calls} calls");
}

#[test]
fn checkout_plan_costs_calls_per_level_not_per_object() {
    let mut ws = wide_tree();
    let mut remote = Store::new();
    let id = persist(&mut remote, ws.commit(CommitOptions::new()).unwrap());
    let mut local = Store::new();
    let mut plan = CheckoutPlan::new(id);
    let mut calls = 0;
    loop {
        let src = Calls::new(&local);
        let missing = plan.missing(&src).unwrap();
        calls += src.take();
        if missing.is_empty() {
            break;
        }
        for m in missing {
            local.insert(m, remote[&m].clone());
        }
    }
    assert_eq!(local.len(), remote.len());
    // Each round reads what the last one fetched and asks for the level below: about
    // two calls per level of the object graph (18 when written), against one per
    // object (2,221) before.
    assert!(calls <= 20, "plan: {calls} calls over the fetch loop");
}

/// The objects `id` needs, children before parents, read one object per call: the
/// order `reachable` gave before it read a level per call (a post-order of the
/// references, in their order), as an oracle.
fn reachable_one_by_one(id: ObjectId, store: &Store, parents: bool) -> Vec<ObjectId> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![(id, false)];
    while let Some((oid, expanded)) = stack.pop() {
        if expanded {
            out.push(oid);
            continue;
        }
        if !seen.insert(oid) {
            continue;
        }
        stack.push((oid, true));
        let (_, refs) = snapgraph::object::references(&oid, &store[&oid]).unwrap();
        stack.extend(
            refs.into_iter()
                .rev()
                // Without `parents`, the only commit references are parents.
                .filter(|(_, kind)| parents || *kind != snapgraph::ObjectKind::Commit)
                .filter(|(child, _)| !seen.contains(child))
                .map(|(child, _)| (child, false)),
        );
    }
    out
}

#[test]
fn reachable_costs_calls_per_level_not_per_object() {
    let mut ws = wide_tree();
    // Two large files (multi-level manifests) and one that repeats the first.
    let big = common::pseudo_random(3 << 20, 99);
    ws.write("/big/a.bin", &big).unwrap();
    ws.write("/big/copy.bin", &big).unwrap();
    ws.write("/big/b.bin", common::pseudo_random(2 << 20, 98))
        .unwrap();
    let mut store = Store::new();
    let mut id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    let first = id;
    for turn in 0..4u32 {
        ws.write(&format!("/d00/e0/turn{turn}"), turn.to_le_bytes())
            .unwrap();
        id = persist(
            &mut store,
            ws.commit(CommitOptions::new().parent(id)).unwrap(),
        );
    }
    assert!(store.len() > 2_500, "{} objects", store.len());
    let src = Calls::new(&store);

    let objects = SnapshotGraph::reachable(first, &src).unwrap();
    let calls = src.take();
    // The same objects in the same order as a walk of one object per call.
    assert_eq!(objects, reachable_one_by_one(first, &store, false));
    // The commit, four tree levels (root; 20 directories and /big; 200 directories),
    // the manifest levels, then 15 MB of chunks in batches of at most 8 MiB or 1,024:
    // 11 calls when written, against one per object (about 2,600) before.
    assert!(calls <= 16, "reachable: {calls} calls");

    let history = SnapshotGraph::reachable_history(id, &src).unwrap();
    let calls = src.take();
    assert_eq!(history, reachable_one_by_one(id, &store, true));
    // One more level per commit of the history, and each commit's changed trees: 14
    // calls when written.
    assert!(calls <= 24, "reachable_history: {calls} calls");
}
