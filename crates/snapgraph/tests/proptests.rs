//! Property tests: random workspace histories against models and invariants.

mod common;

use std::collections::{BTreeMap, HashSet};

use common::{
    build_from, closure, fetch_loop, oracle_diff, persist, pseudo_random, snap, Snap, Store,
};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use snapgraph::graph::diff::{Change, ChangeKind, Visit};
use snapgraph::{
    CheckoutPolicy, CommitOptions, EntryKind, GraphError, Limits, ObjectError, ObjectId,
    SnapshotGraph, Workspace,
};

// ---------------------------------------------------------------- operations

const NAMES: [&str; 4] = ["a", "b", "c", "d"];
const TARGETS: [&str; 3] = ["a", "../b/c", "/abs/target"];

/// Content described by a few numbers, so failures print small.
#[derive(Clone, Copy)]
struct Bytes {
    len: usize,
    seed: u64,
    edit: usize,
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Bytes({}, seed {}, edit {})",
            self.len, self.seed, self.edit
        )
    }
}

impl Bytes {
    fn make(&self) -> Vec<u8> {
        if self.len <= 64 {
            return vec![self.seed as u8; self.len];
        }
        // Few seeds, so identical and nearly identical contents recur (dedup, reuse).
        let mut v = pseudo_random(self.len, self.seed);
        let at = self.edit % self.len;
        v[at] = v[at].wrapping_add(1);
        v
    }
}

fn bytes() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        // Inline (0 to 64 bytes).
        6 => (0usize..=64, 0u64..3).prop_map(|(len, seed)| Bytes { len, seed, edit: 0 }),
        // One chunk.
        3 => (65usize..6000, 0u64..3, 0usize..6000).prop_map(|(len, seed, edit)| Bytes { len, seed, edit }),
        // Several chunks and a manifest.
        1 => (66_000usize..200_000, 0u64..2, 0usize..200_000)
            .prop_map(|(len, seed, edit)| Bytes { len, seed, edit }),
    ]
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(0..NAMES.len(), 1..=3)
        .prop_map(|v| v.iter().map(|&i| format!("/{}", NAMES[i])).collect())
}

#[derive(Debug, Clone)]
enum Op {
    Write(String, Bytes),
    Remove(String),
    Mkdir(String),
    Rename(String, String),
    Symlink(String, usize),
    SetMode(String, u32),
    SetState(Bytes),
    /// Many small files in one directory, so directories span several tree nodes.
    Bulk(String, usize, u8),
    /// One file among those `Bulk` writes: sparse edits inside large directories.
    WriteN(String, usize, Bytes),
    RemoveN(String, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (path(), bytes()).prop_map(|(p, b)| Op::Write(p, b)),
        2 => path().prop_map(Op::Remove),
        2 => path().prop_map(Op::Mkdir),
        3 => (path(), path()).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => (path(), 0..TARGETS.len()).prop_map(|(p, t)| Op::Symlink(p, t)),
        2 => (path(), prop_oneof![Just(0o600u32), Just(0o755), Just(0o4711), Just(0o10000)])
            .prop_map(|(p, m)| Op::SetMode(p, m)),
        1 => bytes().prop_map(Op::SetState),
        1 => (path(), 50usize..400, any::<u8>()).prop_map(|(p, n, v)| Op::Bulk(p, n, v)),
        2 => (path(), 0usize..400, bytes()).prop_map(|(p, i, b)| Op::WriteN(p, i, b)),
        2 => (path(), 0usize..400).prop_map(|(p, i)| Op::RemoveN(p, i)),
    ]
}

fn ops(max: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 0..max)
}

/// Applies one operation; returns whether it succeeded. Failing operations must fail
/// with a typed error (a panic fails the test).
fn apply(ws: &mut Workspace, op: &Op) -> bool {
    match op {
        Op::Write(p, b) => ws.write(p, b.make()).is_ok(),
        Op::Remove(p) => ws.remove(p).is_ok(),
        Op::Mkdir(p) => ws.mkdir(p).is_ok(),
        Op::Rename(a, b) => ws.rename(a, b).is_ok(),
        Op::Symlink(p, t) => ws.symlink(p, TARGETS[*t]).is_ok(),
        Op::SetMode(p, m) => ws.set_mode(p, *m).is_ok(),
        Op::SetState(b) => {
            ws.set_state(b.make());
            true
        }
        Op::Bulk(dir, n, v) => {
            let mut ok = true;
            for i in 0..*n {
                let data = vec![v.wrapping_add(i as u8); i % 70];
                ok &= ws.write(&format!("{dir}/n{i:03}"), data).is_ok();
            }
            ok
        }
        Op::WriteN(dir, i, b) => ws.write(&format!("{dir}/n{i:03}"), b.make()).is_ok(),
        Op::RemoveN(dir, i) => ws.remove(&format!("{dir}/n{i:03}")).is_ok(),
    }
}

// ---------------------------------------------------------------- a model file system

/// The documented semantics, over a map from path components to nodes.
#[derive(Debug, Clone, Default)]
struct Model {
    nodes: BTreeMap<Vec<String>, (EntryKind, u32, Vec<u8>)>,
    state: Vec<u8>,
}

fn comps(p: &str) -> Vec<String> {
    p.split('/')
        .filter(|c| !c.is_empty())
        .map(String::from)
        .collect()
}

impl Model {
    fn kind(&self, c: &[String]) -> Option<EntryKind> {
        if c.is_empty() {
            return Some(EntryKind::Dir);
        }
        self.nodes.get(c).map(|n| n.0)
    }

    /// Every proper prefix that exists is a directory.
    fn parents_ok(&self, c: &[String]) -> bool {
        (1..c.len()).all(|i| matches!(self.kind(&c[..i]), None | Some(EntryKind::Dir)))
    }

    fn make_dirs(&mut self, c: &[String]) {
        for i in 1..=c.len() {
            self.nodes
                .entry(c[..i].to_vec())
                .or_insert((EntryKind::Dir, 0o755, Vec::new()));
        }
    }

    fn subtree(&self, c: &[String]) -> Vec<Vec<String>> {
        self.nodes
            .keys()
            .filter(|k| k.starts_with(c))
            .cloned()
            .collect()
    }

    fn apply(&mut self, op: &Op) -> bool {
        match op {
            Op::Write(p, b) => self.write(&comps(p), b.make()),
            Op::Remove(p) => {
                let c = comps(p);
                if !self.parents_ok(&c) || self.kind(&c).is_none() {
                    return false;
                }
                for k in self.subtree(&c) {
                    self.nodes.remove(&k);
                }
                true
            }
            Op::Mkdir(p) => {
                let c = comps(p);
                if !self.parents_ok(&c) || !matches!(self.kind(&c), None | Some(EntryKind::Dir)) {
                    return false;
                }
                self.make_dirs(&c);
                true
            }
            Op::Rename(a, b) => {
                let (src, dst) = (comps(a), comps(b));
                if !self.parents_ok(&src) || self.kind(&src).is_none() {
                    return false;
                }
                if src == dst {
                    return true;
                }
                if dst.len() > src.len() && dst.starts_with(&src) {
                    return false;
                }
                if !self.parents_ok(&dst) {
                    return false;
                }
                let sk = self.kind(&src);
                match self.kind(&dst) {
                    Some(EntryKind::Dir) => return false,
                    Some(_) if sk == Some(EntryKind::Dir) => return false,
                    Some(_) => {
                        self.nodes.remove(&dst);
                    }
                    None => {}
                }
                self.make_dirs(&dst[..dst.len() - 1]);
                for k in self.subtree(&src) {
                    let node = self.nodes.remove(&k).unwrap();
                    let mut nk = dst.clone();
                    nk.extend_from_slice(&k[src.len()..]);
                    self.nodes.insert(nk, node);
                }
                true
            }
            Op::Symlink(p, t) => {
                let c = comps(p);
                if !self.parents_ok(&c) || self.kind(&c).is_some() {
                    return false;
                }
                self.make_dirs(&c[..c.len() - 1]);
                self.nodes.insert(
                    c,
                    (EntryKind::Symlink, 0o777, TARGETS[*t].as_bytes().to_vec()),
                );
                true
            }
            Op::SetMode(p, m) => {
                let c = comps(p);
                if *m > 0o7777 || !self.parents_ok(&c) {
                    return false;
                }
                match self.nodes.get_mut(&c) {
                    Some(n) => {
                        n.1 = *m;
                        true
                    }
                    None => false,
                }
            }
            Op::SetState(b) => {
                self.state = b.make();
                true
            }
            Op::Bulk(dir, n, v) => {
                let mut ok = true;
                for i in 0..*n {
                    let mut c = comps(dir);
                    c.push(format!("n{i:03}"));
                    ok &= self.write(&c, vec![v.wrapping_add(i as u8); i % 70]);
                }
                ok
            }
            Op::WriteN(dir, i, b) => self.apply(&Op::Write(format!("{dir}/n{i:03}"), *b)),
            Op::RemoveN(dir, i) => self.apply(&Op::Remove(format!("{dir}/n{i:03}"))),
        }
    }

    fn write(&mut self, c: &[String], data: Vec<u8>) -> bool {
        if !self.parents_ok(c) {
            return false;
        }
        match self.nodes.get_mut(c) {
            Some((EntryKind::File, _, bytes)) => {
                *bytes = data;
                true
            }
            Some(_) => false,
            None => {
                self.make_dirs(&c[..c.len() - 1]);
                self.nodes
                    .insert(c.to_vec(), (EntryKind::File, 0o644, data));
                true
            }
        }
    }

    fn snap(&self) -> Snap {
        Snap {
            paths: self
                .nodes
                .iter()
                .map(|(k, v)| (format!("/{}", k.join("/")), v.clone()))
                .collect(),
            state: self.state.clone(),
        }
    }
}

fn run(ops: &[Op]) -> Workspace {
    let mut ws = Workspace::new();
    for op in ops {
        apply(&mut ws, op);
    }
    ws
}

fn tree_of(id: ObjectId, store: &impl snapgraph::ObjectSource) -> ObjectId {
    SnapshotGraph::commit(id, store).unwrap().tree
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        max_shrink_iters: 2000,
        // Relative to the package root, where cargo runs tests.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/proptests.txt",
        ))),
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(config(512))]

    /// Every operation does what the documented semantics say, and fails exactly when
    /// they say it fails.
    #[test]
    fn workspace_matches_the_model(ops in ops(40)) {
        let mut ws = Workspace::new();
        let mut model = Model::default();
        for (i, op) in ops.iter().enumerate() {
            let got = apply(&mut ws, op);
            let want = model.apply(op);
            prop_assert_eq!(got, want, "op {} {:?}", i, op);
            if matches!(op, Op::Bulk(..)) {
                continue;
            }
            prop_assert_eq!(snap(&ws), model.snap(), "after op {} {:?}", i, op);
        }
        prop_assert_eq!(snap(&ws), model.snap());
    }
}

/// Two snapshots committed into one store: `first`'s, and `second` applied to it
/// (to an empty workspace when `unrelated`).
struct Compared {
    sa: Snap,
    sb: Snap,
    store: Store,
    ia: ObjectId,
    ib: ObjectId,
}

fn compared(first: &[Op], second: &[Op], unrelated: bool) -> Compared {
    let mut a = run(first);
    let mut b = if unrelated {
        Workspace::new()
    } else {
        a.clone()
    };
    for op in second {
        apply(&mut b, op);
    }
    let (sa, sb) = (snap(&a), snap(&b));
    let mut store = Store::new();
    let ia = persist(&mut store, a.commit(CommitOptions::new()).unwrap());
    let cb = b.commit(CommitOptions::new().have_in(&store)).unwrap();
    let ib = persist(&mut store, cb);
    Compared {
        sa,
        sb,
        store,
        ia,
        ib,
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// (a) A commit restores exactly what was committed.
    #[test]
    fn commit_checkout_round_trip(ops in ops(30)) {
        let mut ws = run(&ops);
        let before = snap(&ws);
        let c = ws.commit(CommitOptions::new()).unwrap();
        prop_assert_eq!(snap(&ws), before.clone(), "commit does not change the workspace");
        let mut other = Workspace::new();
        other.write("/junk", b"junk").unwrap();
        let _ = other.checkout(c.id(), c.objects(), CheckoutPolicy::default()).unwrap();
        prop_assert_eq!(snap(&other), before.clone());
        // The restored workspace commits to the same id, emitting only the commit
        // when told the store holds everything.
        let again = other.commit(CommitOptions::new()).unwrap();
        prop_assert_eq!(again.id(), c.id());
        let held = other.commit(CommitOptions::new().have_in(c.objects())).unwrap();
        prop_assert_eq!(held.object_count(), 1);
    }

    /// (b) The root tree depends only on the final contents, not on how they were
    /// reached: built fresh in several orders, or with commits in between.
    #[test]
    fn history_independence(ops in ops(30), every in 1usize..6, order_seed in any::<u64>()) {
        let mut ws = Workspace::new();
        for (i, op) in ops.iter().enumerate() {
            apply(&mut ws, op);
            if i % every == 0 {
                let _ = ws.commit(CommitOptions::new()).unwrap();
            }
        }
        let final_snap = snap(&ws);
        let c = ws.commit(CommitOptions::new()).unwrap();
        let tree = tree_of(c.id(), c.objects());

        let paths: Vec<&String> = final_snap.paths.keys().collect();
        let mut shuffled = paths.clone();
        let mut s = order_seed | 1;
        for i in (1..shuffled.len()).rev() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            shuffled.swap(i, (s % (i as u64 + 1)) as usize);
        }
        for order in [paths.clone(), paths.iter().rev().copied().collect(), shuffled] {
            let mut fresh = build_from(order, &final_snap);
            prop_assert_eq!(snap(&fresh), final_snap.clone());
            let fc = fresh.commit(CommitOptions::new()).unwrap();
            prop_assert_eq!(tree_of(fc.id(), fc.objects()), tree);
            prop_assert_eq!(fc.id(), c.id());
        }
    }

    /// (c) Incremental commits against an accumulated store equal full commits, emit
    /// nothing the store holds, and the store restores every commit.
    #[test]
    fn incremental_equals_full(batches in prop::collection::vec(ops(10), 1..5)) {
        let mut ws = Workspace::new();
        let mut store = Store::new();
        let mut parent: Option<ObjectId> = None;
        let mut history = Vec::new();
        for batch in &batches {
            for op in batch {
                apply(&mut ws, op);
            }
            let opts = || match parent {
                Some(p) => CommitOptions::new().parent(p),
                None => CommitOptions::new(),
            };
            let full = ws.clone().commit(opts()).unwrap();
            let incr = ws.commit(opts().have_in(&store)).unwrap();
            prop_assert_eq!(incr.id(), full.id());
            // Complete exactly when the store held nothing the commit needs.
            prop_assert_eq!(
                incr.is_complete(),
                full.objects().ids().all(|id| !store.contains_key(id))
            );
            for id in incr.objects().ids() {
                prop_assert!(!store.contains_key(id), "re-emitted {}", id);
            }
            let incr_ids: HashSet<ObjectId> = incr.objects().ids().copied().collect();
            for id in full.objects().ids() {
                prop_assert!(store.contains_key(id) || incr_ids.contains(id), "lost {}", id);
            }
            let order: Vec<ObjectId> = incr.objects().ids().copied().collect();
            let id = persist(&mut store, incr);
            // Referenced objects come first, the commit last.
            common::assert_children_first(&order, &store, false);
            prop_assert_eq!(order.last(), Some(&id));
            history.push((id, snap(&ws)));
            parent = Some(id);
        }
        for (id, expected) in &history {
            let mut other = Workspace::new();
            let _ = other.checkout(*id, &store, CheckoutPolicy::default()).unwrap();
            prop_assert_eq!(&snap(&other), expected);
        }
        let tip = history.last().unwrap().0;
        let all: HashSet<ObjectId> = SnapshotGraph::reachable_history(tip, &store).unwrap().into_iter().collect();
        prop_assert_eq!(all, store.keys().copied().collect::<HashSet<_>>());
    }

    /// A checked-out workspace (whose tree layouts come from the store) commits edits
    /// exactly like a workspace built from scratch with the same contents.
    #[test]
    fn edits_after_checkout_commit_like_fresh(first in ops(25), second in ops(15)) {
        let mut a = run(&first);
        let mut store = Store::new();
        let base = persist(&mut store, a.commit(CommitOptions::new()).unwrap());
        let mut ws = Workspace::new();
        let _ = ws.checkout(base, &store, CheckoutPolicy::default()).unwrap();
        for op in &second {
            apply(&mut ws, op);
        }
        let s = snap(&ws);
        let incr = ws.commit(CommitOptions::new().parent(base).have_in(&store)).unwrap();
        let mut fresh = build_from(s.paths.keys(), &s);
        let full = fresh.commit(CommitOptions::new().parent(base).parent_source(&store)).unwrap();
        prop_assert_eq!(incr.id(), full.id());
        let id = persist(&mut store, incr);
        let mut back = Workspace::new();
        let _ = back.checkout(id, &store, CheckoutPolicy::default()).unwrap();
        prop_assert_eq!(snap(&back), s);
    }

    /// (d) Diff equals a naive comparison of the two snapshots.
    #[test]
    fn diff_matches_oracle(first in ops(25), second in ops(15), unrelated in any::<bool>()) {
        let Compared { sa, sb, store, ia, ib } = compared(&first, &second, unrelated);
        let (added, modified, removed, state) = oracle_diff(&sa, &sb);
        let d = SnapshotGraph::diff(ia, ib, &store).unwrap();
        prop_assert_eq!(&d.files_added, &added);
        prop_assert_eq!(&d.files_modified, &modified);
        prop_assert_eq!(&d.files_removed, &removed);
        prop_assert_eq!(d.state_changed, state);
        prop_assert_eq!(d.is_empty(), added.is_empty() && modified.is_empty() && removed.is_empty() && !state);
        let r = SnapshotGraph::diff(ib, ia, &store).unwrap();
        prop_assert_eq!(r.files_added, removed);
        prop_assert_eq!(r.files_removed, added);
        prop_assert_eq!(r.files_modified, modified);
    }

    /// (d') A delegate that takes directories gets every directory that differs,
    /// each as the snapshots say (added, removed, holding something else, or only
    /// re-moded), before anything below it; its files are the diff's.
    #[test]
    fn diff_hands_over_directories_as_the_snapshots_say(first in ops(25), second in ops(15), unrelated in any::<bool>()) {
        let Compared { sa, sb, store, ia, ib } = compared(&first, &second, unrelated);

        #[derive(Default)]
        struct Both(Vec<Change>, Vec<Change>, Vec<String>);
        impl Visit for Both {
            fn visit(&mut self, c: Change) -> std::ops::ControlFlow<()> {
                self.2.push(c.path.clone());
                self.0.push(c);
                std::ops::ControlFlow::Continue(())
            }
            fn visit_dir(&mut self, c: Change) -> std::ops::ControlFlow<()> {
                self.2.push(c.path.clone());
                self.1.push(c);
                std::ops::ControlFlow::Continue(())
            }
        }
        let mut got = Both::default();
        SnapshotGraph::diff_with(ia, ib, &store, &Limits::default(), &mut got).unwrap();
        let mut files = got.0.clone();
        files.sort_by(|x, y| x.path.cmp(&y.path));
        prop_assert_eq!(files, SnapshotGraph::diff(ia, ib, &store).unwrap().changes);

        let below = |s: &Snap, dir: &str| -> Vec<(String, common::Node)> {
            let prefix = format!("{dir}/");
            s.paths.iter().filter(|(p, _)| p.starts_with(&prefix)).map(|(p, n)| (p.clone(), n.clone())).collect()
        };
        let dir = |s: &Snap, p: &str| s.paths.get(p).filter(|n| n.0 == EntryKind::Dir).map(|n| n.1);
        let mut expected = BTreeMap::new();
        for p in sa.paths.keys().chain(sb.paths.keys()) {
            let kind = match (dir(&sa, p), dir(&sb, p)) {
                (Some(_), None) => Some(ChangeKind::Removed),
                (None, Some(_)) => Some(ChangeKind::Added),
                (Some(x), Some(y)) if below(&sa, p) != below(&sb, p) => {
                    let _ = (x, y);
                    Some(ChangeKind::Modified)
                }
                (Some(x), Some(y)) => (x != y).then_some(ChangeKind::ModeChanged),
                (None, None) => None,
            };
            if let Some(kind) = kind {
                expected.insert(p.clone(), (kind, dir(&sa, p), dir(&sb, p)));
            }
        }
        let dirs: BTreeMap<String, (ChangeKind, Option<u32>, Option<u32>)> = got
            .1
            .iter()
            .map(|c| {
                for side in [&c.old, &c.new].into_iter().flatten() {
                    assert_eq!(side.kind, EntryKind::Dir, "{}", c.path);
                }
                (c.path.clone(), (c.kind, c.old.map(|e| e.mode), c.new.map(|e| e.mode)))
            })
            .collect();
        prop_assert_eq!(dirs.len(), got.1.len(), "each directory once");
        prop_assert_eq!(dirs, expected);
        // A directory comes before what lies below it.
        for (i, p) in got.2.iter().enumerate() {
            let prefix = format!("{p}/");
            prop_assert!(!got.2[..i].iter().any(|q| q.starts_with(&prefix)), "{} after what it holds", p);
        }
    }

    /// (e) Fetching what plan_checkout asks for converges in a few rounds to exactly
    /// the commit's objects, and the checkout then succeeds.
    #[test]
    fn plan_checkout_converges(ops in ops(30)) {
        let mut ws = run(&ops);
        let c = ws.commit(CommitOptions::new()).unwrap();
        let (local, rounds) = fetch_loop(c.id(), c.objects());
        // Commit, then per directory level (depth at most 4 here, tree nodes two
        // levels at most), then manifest levels and chunks.
        prop_assert!(rounds <= 14, "{} rounds", rounds);
        let want: HashSet<ObjectId> = c.objects().ids().copied().collect();
        prop_assert_eq!(local.keys().copied().collect::<HashSet<_>>(), want);
        let mut other = Workspace::new();
        let _ = other.checkout(c.id(), &local, CheckoutPolicy::default()).unwrap();
        prop_assert_eq!(snap(&other), snap(&ws));
    }
}

// ---------------------------------------------------------------- ancestry on random DAGs

/// For each commit, the indices of its parents among the earlier ones.
fn dag() -> impl Strategy<Value = Vec<Vec<usize>>> {
    prop::collection::vec(
        prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        1..24,
    )
    .prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, ps)| {
                let mut out: Vec<usize> = if i == 0 {
                    Vec::new()
                } else {
                    ps.iter().map(|x| x.index(i)).collect()
                };
                let mut seen = HashSet::new();
                out.retain(|p| seen.insert(*p));
                out
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(config(384))]

    /// (f) Ancestry lists a commit before its parents, each once, every reachable
    /// present commit when the limit allows, a prefix of that under a smaller limit,
    /// and stops at commits the store lacks; `is_ancestor` agrees with that walk.
    #[test]
    fn ancestry_invariants(
        parents in dag(),
        tip in any::<prop::sample::Index>(),
        missing in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        limit in 0usize..30,
    ) {
        let mut ws = Workspace::new();
        let mut store = Store::new();
        let mut ids = Vec::new();
        for (i, ps) in parents.iter().enumerate() {
            let opts = CommitOptions::new()
                .parents(ps.iter().map(|&p| ids[p]))
                .meta("n", i.to_string());
            let c = ws.commit(opts).unwrap();
            let expected_gen = 1 + ps.iter().map(|&p| gens(&store, ids[p])).max().unwrap_or(0);
            prop_assert_eq!(c.generation(), expected_gen);
            ids.push(persist(&mut store, c));
        }
        let tip = ids[tip.index(ids.len())];
        let mut shallow = store.clone();
        for m in &missing {
            let victim = ids[m.index(ids.len())];
            if victim != tip {
                shallow.remove(&victim);
            }
        }
        // What a walk over present commits reaches.
        let mut reach = HashSet::new();
        let mut stack = vec![tip];
        while let Some(c) = stack.pop() {
            if !shallow.contains_key(&c) || !reach.insert(c) {
                continue;
            }
            stack.extend(SnapshotGraph::commit(c, &shallow).unwrap().parents);
        }

        // is_ancestor answers as that walk does, for every commit, present or not,
        // from the tip alone and from the tip beside another start.
        let other = ids[limit % ids.len()];
        let mut reach_other = HashSet::new();
        let mut stack = vec![other];
        while let Some(c) = stack.pop() {
            if !shallow.contains_key(&c) || !reach_other.insert(c) {
                continue;
            }
            stack.extend(SnapshotGraph::commit(c, &shallow).unwrap().parents);
        }
        for c in &ids {
            let below = SnapshotGraph::is_ancestor(*c, [tip], &shallow).unwrap();
            prop_assert_eq!(below, reach.contains(c) || *c == tip, "is_ancestor({}, [tip])", c);
            let either = SnapshotGraph::is_ancestor(*c, [other, tip], &shallow).unwrap();
            let expected = reach.contains(c) || reach_other.contains(c) || *c == tip || *c == other;
            prop_assert_eq!(either, expected, "is_ancestor({}, [other, tip])", c);
        }

        let all = SnapshotGraph::ancestry(tip, &shallow, usize::MAX).unwrap();
        prop_assert_eq!(all[0], tip);
        let pos: BTreeMap<ObjectId, usize> = all.iter().enumerate().map(|(i, c)| (*c, i)).collect();
        prop_assert_eq!(pos.len(), all.len(), "no duplicates");
        prop_assert_eq!(pos.keys().copied().collect::<HashSet<_>>(), reach);
        for (i, c) in all.iter().enumerate() {
            let obj = SnapshotGraph::commit(*c, &shallow).unwrap();
            for p in &obj.parents {
                if let Some(&j) = pos.get(p) {
                    prop_assert!(j > i, "parent {} listed before its child {}", p, c);
                }
            }
            if i > 0 {
                let prev = SnapshotGraph::commit(all[i - 1], &shallow).unwrap();
                prop_assert!(prev.generation >= obj.generation, "newest first");
            }
        }
        let limited = SnapshotGraph::ancestry(tip, &shallow, limit).unwrap();
        prop_assert_eq!(&limited[..], &all[..limit.min(all.len())]);

        // Without the tip itself, it is an error naming it.
        let mut no_tip = shallow.clone();
        no_tip.remove(&tip);
        let r = SnapshotGraph::ancestry(tip, &no_tip, 10);
        let named = matches!(r, Err(GraphError::Object(ObjectError::NotFound { id })) if id == tip);
        prop_assert!(named, "ancestry without the tip");

        // reachable_history of the full store covers every ancestor's objects.
        let hist: HashSet<ObjectId> = SnapshotGraph::reachable_history(tip, &store).unwrap().into_iter().collect();
        prop_assert_eq!(hist, closure(&store, tip, true));
    }
}

fn gens(store: &Store, id: ObjectId) -> u64 {
    SnapshotGraph::commit(id, store).unwrap().generation
}
