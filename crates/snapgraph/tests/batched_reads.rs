//! Batched reads (issue #12): checkout, diff and checkout planning read a level of
//! the object graph per call, so a source with per-call latency (a database, an
//! object store) costs round trips proportional to the graph's depth, not to its
//! number of objects. Each test failed before tree loading, diff and `CheckoutPlan`
//! used `get_many`/`contains_many` (one call per object then).

mod common;

use common::{persist, Counting, Store};
use proptest::prelude::*;
use snapgraph::graph::diff::{Change, ChangeKind, Recorder};
use snapgraph::graph::reachable::CheckoutPlan;
use snapgraph::{
    CheckoutOptions, CheckoutPolicy, CommitOptions, DriftPolicy, Limits, ObjectId, SnapshotGraph,
    Workspace,
};

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
    let src = Counting::new(&store);

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
    let calls = src.take_calls();
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
    let calls = src.take_calls();
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
    let src = Counting::new(&store);
    let diff = SnapshotGraph::diff(a, b, &src).unwrap();
    assert_eq!(diff.files_added.len(), 200);
    assert!(diff.files_modified.is_empty() && diff.files_removed.is_empty());
    // Two commits, then a batched read per directory depth (root, 20, 200) and per
    // index level below it: 6 calls, against 53 when each directory's index levels
    // were read apart and one per tree node (over 220) before that.
    let calls = src.take_calls();
    assert!(calls <= 8, "diff: {calls} calls");
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
        let src = Counting::new(&local);
        let missing = plan.missing(&src).unwrap();
        calls += src.take_calls();
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
    let src = Counting::new(&store);

    let objects = SnapshotGraph::reachable(first, &src).unwrap();
    let calls = src.take_calls();
    // The same objects in the same order as a walk of one object per call.
    assert_eq!(objects, reachable_one_by_one(first, &store, false));
    // The commit, four tree levels (root; 20 directories and /big; 200 directories),
    // the manifest levels, then 15 MB of chunks in batches of at most 8 MiB or 1,024:
    // 11 calls when written, against one per object (about 2,600) before.
    assert!(calls <= 16, "reachable: {calls} calls");

    let history = SnapshotGraph::reachable_history(id, &src).unwrap();
    let calls = src.take_calls();
    assert_eq!(history, reachable_one_by_one(id, &store, true));
    // One more level per commit of the history, and each commit's changed trees: 14
    // calls when written.
    assert!(calls <= 24, "reachable_history: {calls} calls");
}

/// The changes of a diff as its delegate received them, through `source`.
fn recorded(a: ObjectId, b: ObjectId, source: &dyn snapgraph::ObjectSource) -> Vec<Change> {
    let mut rec = Recorder::default();
    SnapshotGraph::diff_with(a, b, source, &Limits::default(), &mut rec).unwrap();
    rec.changes
}

/// The order the delegate receives changes in: breadth first, a directory's changes
/// by name, directories of one depth in path order.
fn delegate_order(changes: &[Change]) -> Vec<Change> {
    let mut sorted = changes.to_vec();
    sorted.sort_by(|x, y| {
        let parts = |p: &str| p.split('/').map(str::to_owned).collect::<Vec<_>>();
        (parts(&x.path).len(), parts(&x.path)).cmp(&(parts(&y.path).len(), parts(&y.path)))
    });
    sorted
}

#[test]
fn diff_of_many_large_directories_costs_calls_per_level() {
    // 200 directories of 150 files each: every directory is several leaves under an
    // index node, and so is the root (200 directory entries).
    let mut ws = Workspace::new();
    for d in 0..200u32 {
        for f in 0..150u32 {
            ws.write(&format!("/d{d:03}/f{f:03}"), format!("{d}.{f}"))
                .unwrap();
        }
    }
    let mut store = Store::new();
    let a = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    // In every directory, a change in its first and its last leaf.
    for d in 0..200u32 {
        ws.write(&format!("/d{d:03}/f000"), b"changed").unwrap();
        ws.write(&format!("/d{d:03}/f149"), b"changed").unwrap();
    }
    let b = persist(
        &mut store,
        ws.commit(CommitOptions::new().parent(a)).unwrap(),
    );
    // Each changed directory has more than one changed node below its root.
    let commit = SnapshotGraph::commit(a, &store).unwrap();
    let root = &store[&commit.tree];
    assert!(
        matches!(
            snapgraph::object::tree::TreeNode::decode(&commit.tree, &root[2..]).unwrap(),
            snapgraph::object::tree::TreeNode::Internal { .. }
        ),
        "the root directory is one leaf"
    );

    let src = Counting::new(&store);
    let changes = recorded(a, b, &src);
    let calls = src.take_calls();
    assert_eq!(changes.len(), 400);
    assert!(changes.iter().all(|c| c.kind == ChangeKind::Modified));
    // Two commits, then per directory depth one read of the roots and one per index
    // level below (the root directory and the 200 directories have two or three
    // levels): 7 calls when written, against one per directory, side and level
    // (over 400) when each directory's index levels were read apart.
    assert!(calls <= 8, "diff: {calls} calls");
    // The same changes, in the same order, as read one object per call.
    let one_by_one = Counting::unbatched(&store);
    assert_eq!(recorded(a, b, &one_by_one), changes);
    assert!(one_by_one.take_calls() > 800);
    assert_eq!(delegate_order(&changes), changes);
    let d = SnapshotGraph::diff(a, b, &store).unwrap();
    assert_eq!(d.files_modified.len(), 400);
    assert!(d.files_modified.windows(2).all(|w| w[0] < w[1]));
}

/// A workspace generated from `seed`: `dirs` directories (the first `big` of 100 to
/// 400 files, the others of up to 20), some with a subdirectory.
fn random_tree(seed: u64, dirs: usize, big: usize) -> Workspace {
    let mut rng = seed | 1;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let mut ws = Workspace::new();
    for d in 0..dirs {
        let files = if d < big { 100 + next(300) } else { next(20) };
        for f in 0..files {
            let path = match next(5) {
                0 => format!("/d{d}/s{}/g{f}", next(2)),
                _ => format!("/d{d}/f{f}"),
            };
            ws.write(&path, format!("{}", next(4))).unwrap();
        }
    }
    ws
}

/// Edits `ws` at random: rewrites, removals, new files, mode changes, symlinks, a
/// whole directory removed or added.
fn random_edits(ws: &mut Workspace, seed: u64) {
    let mut rng = seed | 1;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let files: Vec<String> = ws
        .walk()
        .into_iter()
        .filter(|(_, m)| m.kind == snapgraph::EntryKind::File)
        .map(|(p, _)| p)
        .collect();
    for path in &files {
        match next(40) {
            0..=2 => ws.write(path, format!("edit {}", next(9))).unwrap(),
            3 => ws.remove(path).unwrap(),
            4 => ws.set_mode(path, 0o755).unwrap(),
            5 => {
                ws.remove(path).unwrap();
                ws.symlink(path, "/elsewhere").unwrap();
            }
            6 => ws.write(&format!("{path}.new"), b"new").unwrap(),
            _ => {}
        }
    }
    let dirs: Vec<String> = ws
        .list("/")
        .unwrap()
        .into_iter()
        .map(|e| format!("/{}", e.name))
        .collect();
    if let Some(d) = dirs.get(next(dirs.len().max(1) as u64) as usize) {
        if next(3) == 0 {
            ws.remove(d).unwrap();
        }
    }
    for f in 0..next(150) {
        ws.write(&format!("/added/x{f}"), b"a").unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// On random trees with large directories, the diff read a level per call gives
    /// exactly the changes, in the same order, of the diff read one object per call,
    /// those a naive comparison predicts, in the documented order, for calls bounded
    /// by the depth.
    #[test]
    fn batched_diff_equals_the_one_by_one_diff(
        seed in any::<u64>(),
        dirs in 1usize..24,
        big in 0usize..4,
        edits in any::<u64>(),
    ) {
        let mut ws = random_tree(seed, dirs, big);
        let mut store = Store::new();
        let a = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
        let sa = common::snap(&ws);
        random_edits(&mut ws, edits);
        let b = persist(&mut store, ws.commit(CommitOptions::new().parent(a)).unwrap());
        let sb = common::snap(&ws);
        for (x, y) in [(a, b), (b, a)] {
            let src = Counting::new(&store);
            let batched = recorded(x, y, &src);
            let calls = src.take_calls();
            let one_by_one = recorded(x, y, &Counting::unbatched(&store));
            prop_assert_eq!(&batched, &one_by_one);
            prop_assert_eq!(delegate_order(&batched), batched.clone());
            // Three directory depths, plus the two commits. A directory's node
            // tree has at most three levels here (leaves, then index nodes, which
            // are cut by content too: a directory of 304 entries took three levels
            // in the committed regression), and a depth costs a call per level of
            // its deepest tree, however many directories it holds.
            prop_assert!(calls <= 2 + 3 * 3, "{} calls", calls);
        }
        let d = SnapshotGraph::diff(a, b, &store).unwrap();
        let (added, modified, removed, _) = common::oracle_diff(&sa, &sb);
        prop_assert_eq!(d.files_added, added);
        prop_assert_eq!(d.files_modified, modified);
        prop_assert_eq!(d.files_removed, removed);
    }
}
