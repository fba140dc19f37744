//! Hostile stores: missing, corrupt, swapped, mis-typed and hand-crafted malformed
//! objects must give typed errors naming the object, never a panic, and a failed
//! checkout must leave the workspace exactly as it was.

mod common;

use std::borrow::Cow;
use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::{
    bare_commit, dir_entry, inline_file, persist, pseudo_random, snap, Counting, Snap, Store,
};
use snapgraph::object::manifest::{ChunkRef, Manifest, ManifestChild};
use snapgraph::object::tree::{Content, Entry, EntryNode, TreeChild, TreeNode};
use snapgraph::LimitError;
use snapgraph::{
    BoxError, CapabilityFingerprint, CheckoutError, CheckoutPolicy, CommitObject, CommitOptions,
    GraphError, Limits, ObjectError, ObjectId, ObjectKind, ObjectSource, SnapshotGraph, Workspace,
};

// ---------------------------------------------------------------- helpers

/// The error an operation must report for one damaged object.
#[derive(Debug, Clone, Copy)]
enum Expect {
    NotFound(ObjectId),
    Corrupt(ObjectId, ObjectId),
}

fn matches_expect(e: &ObjectError, x: Expect) -> bool {
    match (e, x) {
        (ObjectError::NotFound { id }, Expect::NotFound(want)) => *id == want,
        (ObjectError::Corrupt { id, actual }, Expect::Corrupt(want, want_actual)) => {
            *id == want && *actual == want_actual
        }
        _ => false,
    }
}

fn checkout_err<T: std::fmt::Debug>(r: Result<T, CheckoutError>) -> ObjectError {
    match r {
        Err(CheckoutError::Object(e)) => e,
        other => panic!("expected an object error, got {other:?}"),
    }
}

fn graph_err<T: std::fmt::Debug>(r: Result<T, GraphError>) -> ObjectError {
    match r {
        Err(GraphError::Object(e)) => e,
        other => panic!("expected an object error, got {other:?}"),
    }
}

fn observable(ws: &Workspace) -> (Snap, Option<ObjectId>) {
    (snap(ws), ws.head())
}

/// Stores `kind || version || body` under its hash (the current version for known
/// kinds).
fn put(store: &mut Store, kind: u8, body: &[u8]) -> ObjectId {
    let stored = match ObjectKind::from_byte(kind) {
        Some(k) => common::stored(k, body),
        None => [&[kind, 1][..], body].concat(),
    };
    let id = ObjectId::hash_stored(&stored);
    store.insert(id, stored);
    id
}

fn put_tree(store: &mut Store, node: &TreeNode) -> ObjectId {
    put(store, 3, &postcard::to_allocvec(node).unwrap())
}

fn put_manifest(store: &mut Store, node: &Manifest) -> ObjectId {
    put(store, 2, &postcard::to_allocvec(node).unwrap())
}

fn put_chunk(store: &mut Store, data: &[u8]) -> ObjectId {
    put(store, 1, data)
}

fn put_commit(store: &mut Store, c: &CommitObject) -> ObjectId {
    put(store, 4, &postcard::to_allocvec(c).unwrap())
}

/// A store holding one commit whose root tree is `node`.
fn commit_of_tree(store: &mut Store, node: &TreeNode) -> (ObjectId, ObjectId) {
    let tree = put_tree(store, node);
    (put_commit(store, &bare_commit(tree, vec![], 1)), tree)
}

/// A workspace with something in it, to check that failed checkouts change nothing.
fn bystander() -> Workspace {
    let mut ws = Workspace::new();
    ws.write("/keep/me.txt", b"precious").unwrap();
    ws.write("/big", pseudo_random(80_000, 4)).unwrap();
    ws.set_state(b"bystander state".to_vec());
    let c = ws.commit(CommitOptions::new()).unwrap();
    let _ = c.id();
    ws.write("/uncommitted", b"also precious").unwrap();
    ws
}

/// Asserts that every query on the commit reports `Malformed` naming `bad` (as a
/// tree), and that checkout leaves the workspace unchanged. `structural` faults are
/// visible in the node alone, so reachability and planning see them too.
fn assert_malformed_tree(store: &Store, commit: ObjectId, bad: ObjectId, structural: bool) {
    let is_bad = |e: &ObjectError| matches!(e, ObjectError::Malformed { id, kind: ObjectKind::Tree, reason } if *id == bad && !reason.is_empty());
    let mut ws = bystander();
    let before = observable(&ws);
    let e = checkout_err(ws.checkout(commit, store, CheckoutPolicy::Force));
    assert!(is_bad(&e), "checkout: {e:?}");
    assert_eq!(observable(&ws), before);
    if structural {
        let e = graph_err(SnapshotGraph::reachable(commit, store));
        assert!(is_bad(&e), "reachable: {e:?}");
        let e = graph_err(SnapshotGraph::plan_checkout(commit, store));
        assert!(is_bad(&e), "plan_checkout: {e:?}");
        let mut with_empty = store.clone();
        let empty = put_tree(&mut with_empty, &TreeNode::Leaf(vec![]));
        let empty_commit = put_commit(&mut with_empty, &bare_commit(empty, vec![], 1));
        let e = graph_err(SnapshotGraph::diff(empty_commit, commit, &with_empty));
        assert!(is_bad(&e), "diff: {e:?}");
    }
}

// ---------------------------------------------------------------- damage every object

struct Fixture {
    store: Store,
    target: ObjectId,
    empty: ObjectId,
    snap: Snap,
}

fn fixture() -> Fixture {
    let mut ws = Workspace::new();
    ws.write("/docs/readme.md", b"read me").unwrap();
    ws.write("/docs/chunk.txt", pseudo_random(3000, 11))
        .unwrap();
    // Large enough for a manifest with an index node (the cut depends on the ids).
    ws.write("/data/big.bin", pseudo_random(4_000_000, 12))
        .unwrap();
    for i in 0..400 {
        ws.write(&format!("/wide/f{i:03}"), format!("{i}")).unwrap();
    }
    ws.write("/wide/z/deeper/file", b"z").unwrap();
    ws.symlink("/link", "docs/readme.md").unwrap();
    ws.mkdir("/empty").unwrap();
    ws.set_mode("/docs", 0o700).unwrap();
    ws.set_state(pseudo_random(90_000, 13));
    ws.set_capabilities(CapabilityFingerprint::new().builtin("sh"));
    ws.record_read(snapgraph::ExternalRead {
        source: "s3://bucket/key".into(),
        fingerprint: "etag".into(),
        revision: Some("v1".into()),
        size: 7,
        cached_at: Some("/docs/readme.md".into()),
    })
    .unwrap();
    let mut store = Store::new();
    let target = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    let mut empty_ws = Workspace::new();
    empty_ws.set_capabilities(CapabilityFingerprint::new().builtin("sh"));
    let empty = persist(&mut store, empty_ws.commit(CommitOptions::new()).unwrap());
    // The fixture has every kind of structure the damage loop should exercise.
    let kinds: HashSet<(u8, bool)> = SnapshotGraph::reachable(target, &store)
        .unwrap()
        .iter()
        .map(|id| {
            let b = &store[id];
            let internal = match b[0] {
                2 => matches!(
                    Manifest::decode(id, &b[2..]).unwrap(),
                    Manifest::Internal { .. }
                ),
                3 => matches!(
                    TreeNode::decode(id, &b[2..]).unwrap(),
                    TreeNode::Internal { .. }
                ),
                _ => false,
            };
            (b[0], internal)
        })
        .collect();
    for k in [
        (1, false),
        (2, false),
        (2, true),
        (3, false),
        (3, true),
        (4, false),
        (5, false),
        (6, false),
    ] {
        assert!(kinds.contains(&k), "fixture lacks {k:?}: {kinds:?}");
    }
    Fixture {
        store,
        target,
        empty,
        snap: snap(&ws),
    }
}

/// How many times, at most, the queries of one [`check_damage`] call (two checkouts,
/// the two reachability walks, a plan, two diffs, ancestry and a commit read: nine)
/// may ask for each object of the store between them: linear in the store, so damage
/// can never make a query re-read objects without bound. Observed: at most 5.2 per
/// object (1,206 reads of a 234-object store).
const READS_PER_OBJECT: u64 = 12;

/// Runs every query against a store where one object is damaged, and checks each
/// reports exactly `expect` (or succeeds, where the query does not read that kind).
fn check_damage(
    f: &Fixture,
    damaged: &Store,
    victim: ObjectId,
    kind: u8,
    expect: Expect,
    ws: &mut Workspace,
) {
    // Counts the objects read (each id of a batch once).
    let counted = Counting::new(damaged);
    check_damage_in(f, &counted, victim, kind, expect, ws);
    let reads = counted.objects.get() as u64;
    assert!(
        reads <= READS_PER_OBJECT * damaged.len() as u64,
        "{reads} reads of a {}-object store damaged at {victim}",
        damaged.len()
    );
}

fn check_damage_in(
    f: &Fixture,
    damaged: &Counting<'_, Store>,
    victim: ObjectId,
    kind: u8,
    expect: Expect,
    ws: &mut Workspace,
) {
    let before = observable(ws);
    // Serial and threaded verification (the fixture's large file takes the threaded
    // path from two threads on), whatever the machine's CPU count.
    for threads in [1, 4] {
        ws.set_parallelism(threads);
        let e = checkout_err(ws.checkout(f.target, damaged, CheckoutPolicy::Force));
        assert!(
            matches_expect(&e, expect),
            "checkout on {threads} threads: {e:?}, want {expect:?}"
        );
        assert_eq!(
            observable(ws),
            before,
            "a failed checkout on {threads} threads changed the workspace"
        );
    }

    let e = graph_err(SnapshotGraph::reachable(f.target, damaged));
    assert!(
        matches_expect(&e, expect),
        "reachable: {e:?}, want {expect:?}"
    );
    let e = graph_err(SnapshotGraph::reachable_history(f.target, damaged));
    assert!(matches_expect(&e, expect), "reachable_history: {e:?}");

    let plan = SnapshotGraph::plan_checkout(f.target, damaged);
    match expect {
        Expect::NotFound(_) => assert_eq!(plan.unwrap(), vec![victim], "plan_checkout"),
        // Chunks are only asked for by presence: a damaged one is found by checkout.
        Expect::Corrupt(..) if kind == 1 => assert_eq!(plan.unwrap(), vec![]),
        Expect::Corrupt(..) => {
            let e = graph_err(plan);
            assert!(matches_expect(&e, expect), "plan_checkout: {e:?}");
        }
    }

    // Diff reads commits, trees and (when they differ) read records only.
    for (a, b) in [(f.empty, f.target), (f.target, f.empty)] {
        let d = SnapshotGraph::diff(a, b, damaged);
        if kind == 3 || kind == 4 || kind == 6 {
            let e = graph_err(d);
            assert!(matches_expect(&e, expect), "diff: {e:?}, want {expect:?}");
        } else {
            assert_eq!(d.unwrap(), SnapshotGraph::diff(a, b, &f.store).unwrap());
        }
    }
    if kind == 4 {
        let e = graph_err(SnapshotGraph::ancestry(f.target, damaged, 10));
        assert!(matches_expect(&e, expect), "ancestry: {e:?}");
        let e = graph_err(SnapshotGraph::commit(f.target, damaged));
        assert!(matches_expect(&e, expect), "commit: {e:?}");
    }
}

#[test]
fn every_damaged_object_is_reported_by_id() {
    let f = fixture();
    let victims = SnapshotGraph::reachable(f.target, &f.store).unwrap();
    assert!(victims.len() > 30, "{} objects", victims.len());
    let mut ws = bystander();
    for (i, &victim) in victims.iter().enumerate() {
        let original = &f.store[&victim];
        let kind = original[0];

        // (i) removed
        let mut d = f.store.clone();
        d.remove(&victim);
        check_damage(&f, &d, victim, kind, Expect::NotFound(victim), &mut ws);

        // (ii) truncated, to half and to nothing
        for len in [original.len() / 2, 0] {
            let mut d = f.store.clone();
            let cut = original[..len].to_vec();
            let actual = ObjectId::hash_stored(&cut);
            d.insert(victim, cut);
            check_damage(
                &f,
                &d,
                victim,
                kind,
                Expect::Corrupt(victim, actual),
                &mut ws,
            );
        }

        // (iii) one bit flipped, in the header and in the body
        for pos in [0, original.len() - 1, original.len() / 2] {
            let mut bytes = original.clone();
            bytes[pos] ^= 1 << (i % 8);
            let actual = ObjectId::hash_stored(&bytes);
            let mut d = f.store.clone();
            d.insert(victim, bytes);
            check_damage(
                &f,
                &d,
                victim,
                kind,
                Expect::Corrupt(victim, actual),
                &mut ws,
            );
        }

        // (iv) holding another object's bytes (of the same kind when there is one)
        let other = victims
            .iter()
            .copied()
            .find(|o| *o != victim && f.store[o][0] == kind)
            .unwrap_or(victims[(i + 1) % victims.len()]);
        if other != victim {
            let mut d = f.store.clone();
            d.insert(victim, f.store[&other].clone());
            check_damage(
                &f,
                &d,
                victim,
                kind,
                Expect::Corrupt(victim, other),
                &mut ws,
            );
        }
    }
    // No query re-reads without bound on damage: `check_damage` counts the reads of
    // each call (a bound on work, not on this machine's wall clock).
    // After all that, the untouched store still restores.
    let _ = ws
        .checkout(f.target, &f.store, CheckoutPolicy::Force)
        .unwrap();
    assert_eq!(snap(&ws), f.snap);
}

#[test]
fn swapped_pairs_are_reported() {
    let f = fixture();
    let victims = SnapshotGraph::reachable(f.target, &f.store).unwrap();
    let mut ws = bystander();
    let before = observable(&ws);
    for pair in victims.windows(2).step_by(3) {
        let (a, b) = (pair[0], pair[1]);
        let mut d = f.store.clone();
        d.insert(a, f.store[&b].clone());
        d.insert(b, f.store[&a].clone());
        let ok = |e: &ObjectError| {
            matches_expect(e, Expect::Corrupt(a, b)) || matches_expect(e, Expect::Corrupt(b, a))
        };
        let e = checkout_err(ws.checkout(f.target, &d, CheckoutPolicy::Force));
        assert!(ok(&e), "checkout: {e:?}");
        assert_eq!(observable(&ws), before);
        let e = graph_err(SnapshotGraph::reachable(f.target, &d));
        assert!(ok(&e), "reachable: {e:?}");
    }
}

#[test]
fn damaged_parents_and_shallow_history() {
    let mut store = Store::new();
    let mut ws = Workspace::new();
    ws.write("/a", b"1").unwrap();
    let c1 = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    ws.write("/a", b"2").unwrap();
    let c2 = ws
        .commit(CommitOptions::new().parent(c1).have_in(&store))
        .unwrap();
    let c2 = persist(&mut store, c2);
    let mut d = store.clone();
    let mut bytes = d[&c1].clone();
    bytes[5] ^= 0x40;
    let actual = ObjectId::hash_stored(&bytes);
    d.insert(c1, bytes);
    // Queries that follow parents report the damaged parent...
    let e = graph_err(SnapshotGraph::ancestry(c2, &d, 10));
    assert!(matches_expect(&e, Expect::Corrupt(c1, actual)), "{e:?}");
    let e = graph_err(SnapshotGraph::reachable_history(c2, &d));
    assert!(matches_expect(&e, Expect::Corrupt(c1, actual)), "{e:?}");
    // ...and those that do not are unaffected.
    SnapshotGraph::reachable(c2, &d).unwrap();
    let mut fresh = Workspace::new();
    let _ = fresh.checkout(c2, &d, CheckoutPolicy::default()).unwrap();
    assert_eq!(SnapshotGraph::ancestry(c2, &d, 1).unwrap(), vec![c2]);
    // A commit whose parent is damaged cannot be a parent source.
    let e = Workspace::new()
        .commit(CommitOptions::new().parent(c1).parent_source(&d))
        .unwrap_err();
    assert!(
        matches!(&e, snapgraph::CommitError::Parent(oe) if matches_expect(oe, Expect::Corrupt(c1, actual))),
        "{e:?}"
    );
}

// ---------------------------------------------------------------- wrong kinds

#[test]
fn objects_of_the_wrong_kind() {
    let mut store = Store::new();
    let chunk = put_chunk(&mut store, &pseudo_random(100, 1));
    let leaf = put_tree(&mut store, &TreeNode::Leaf(vec![inline_file("a", b"x")]));

    // The commit's tree is a chunk.
    let c = put_commit(&mut store, &bare_commit(chunk, vec![], 1));
    let wrong = |e: &ObjectError, id: ObjectId, expected: ObjectKind, actual: ObjectKind| matches!(e, ObjectError::WrongKind { id: i, expected: x, actual: a } if *i == id && *x == expected && *a == actual);
    let mut ws = bystander();
    let before = observable(&ws);
    let e = checkout_err(ws.checkout(c, &store, CheckoutPolicy::Force));
    assert!(
        wrong(&e, chunk, ObjectKind::Tree, ObjectKind::Chunk),
        "{e:?}"
    );
    assert_eq!(observable(&ws), before);
    let e = graph_err(SnapshotGraph::reachable(c, &store));
    assert!(
        wrong(&e, chunk, ObjectKind::Tree, ObjectKind::Chunk),
        "{e:?}"
    );
    let e = graph_err(SnapshotGraph::plan_checkout(c, &store));
    assert!(
        wrong(&e, chunk, ObjectKind::Tree, ObjectKind::Chunk),
        "{e:?}"
    );
    let good = put_commit(&mut store, &bare_commit(leaf, vec![], 1));
    let e = graph_err(SnapshotGraph::diff(good, c, &store));
    assert!(
        wrong(&e, chunk, ObjectKind::Tree, ObjectKind::Chunk),
        "{e:?}"
    );

    // A tree where a commit is expected.
    let e = graph_err(SnapshotGraph::ancestry(leaf, &store, 5));
    assert!(
        wrong(&e, leaf, ObjectKind::Commit, ObjectKind::Tree),
        "{e:?}"
    );
    let e = checkout_err(ws.checkout(leaf, &store, CheckoutPolicy::Force));
    assert!(
        wrong(&e, leaf, ObjectKind::Commit, ObjectKind::Tree),
        "{e:?}"
    );

    // A subdirectory entry pointing at a chunk.
    let root = put_tree(
        &mut store,
        &TreeNode::Leaf(vec![dir_entry("d", chunk, 0, 0)]),
    );
    let c2 = put_commit(&mut store, &bare_commit(root, vec![], 1));
    let e = checkout_err(ws.checkout(c2, &store, CheckoutPolicy::Force));
    assert!(
        wrong(&e, chunk, ObjectKind::Tree, ObjectKind::Chunk),
        "{e:?}"
    );
    let e = graph_err(SnapshotGraph::diff(good, c2, &store));
    assert!(
        wrong(&e, chunk, ObjectKind::Tree, ObjectKind::Chunk),
        "{e:?}"
    );
    let e = graph_err(SnapshotGraph::reachable(c2, &store));
    assert!(
        wrong(&e, chunk, ObjectKind::Tree, ObjectKind::Chunk),
        "{e:?}"
    );

    // File content pointing at a tree, as a chunk and as a manifest.
    for content in [Content::Chunk(leaf), Content::Manifest(leaf)] {
        let expected = content.object().unwrap().1;
        let root = put_tree(
            &mut store,
            &TreeNode::Leaf(vec![Entry {
                name: "f".into(),
                mode: 0o644,
                node: EntryNode::File { size: 100, content },
            }]),
        );
        let c3 = put_commit(&mut store, &bare_commit(root, vec![], 1));
        let e = checkout_err(ws.checkout(c3, &store, CheckoutPolicy::Force));
        assert!(wrong(&e, leaf, expected, ObjectKind::Tree), "{e:?}");
        let e = graph_err(SnapshotGraph::reachable(c3, &store));
        assert!(wrong(&e, leaf, expected, ObjectKind::Tree), "{e:?}");
        assert_eq!(observable(&ws), before);
    }
}

#[test]
fn unknown_kinds_versions_and_oversized_objects() {
    let mut store = Store::new();
    let mut ws = bystander();
    let before = observable(&ws);
    let unknown = put(&mut store, 9, b"whatever");
    let future = put(&mut store, 3, &[]);
    let mut future_bytes = store.remove(&future).unwrap();
    future_bytes[1] = snapgraph::FORMAT_VERSION + 1;
    let future = ObjectId::hash_stored(&future_bytes);
    store.insert(future, future_bytes);
    let zero_version = {
        let b = vec![3u8, 0, 0, 0];
        let id = ObjectId::hash_stored(&b);
        store.insert(id, b);
        id
    };
    let empty_object = {
        let id = ObjectId::hash_stored(&[]);
        store.insert(id, Vec::new());
        id
    };
    let huge = {
        let mut b = vec![3u8, 1];
        b.resize((4 << 20) + 1, 0);
        let id = ObjectId::hash_stored(&b);
        store.insert(id, b);
        id
    };
    for (tree, check) in [
        (
            unknown,
            &(|e: &ObjectError| matches!(e, ObjectError::UnknownKind { byte: 9, .. }))
                as &dyn Fn(&ObjectError) -> bool,
        ),
        (future, &|e| {
            matches!(
                e,
                ObjectError::UnsupportedVersion {
                    version,
                    kind: ObjectKind::Tree,
                    ..
                } if *version == snapgraph::FORMAT_VERSION + 1
            )
        }),
        (zero_version, &|e| {
            matches!(e, ObjectError::UnsupportedVersion { version: 0, .. })
        }),
        (empty_object, &|e| {
            matches!(e, ObjectError::UnknownKind { byte: 0, .. })
        }),
        (
            huge,
            &|e| matches!(e, ObjectError::TooLarge { size, limit, .. } if *size == (4 << 20) + 1 && *limit == 4 << 20),
        ),
    ] {
        let c = put_commit(&mut store, &bare_commit(tree, vec![], 1));
        let e = checkout_err(ws.checkout(c, &store, CheckoutPolicy::Force));
        assert!(check(&e) && e.id() == tree, "checkout: {e:?}");
        assert_eq!(observable(&ws), before);
        let e = graph_err(SnapshotGraph::reachable(c, &store));
        assert!(check(&e) && e.id() == tree, "reachable: {e:?}");
        let e = graph_err(SnapshotGraph::plan_checkout(c, &store));
        assert!(check(&e) && e.id() == tree, "plan: {e:?}");
        let mut with_empty = store.clone();
        let empty = put_tree(&mut with_empty, &TreeNode::Leaf(vec![]));
        let empty_commit = put_commit(&mut with_empty, &bare_commit(empty, vec![], 1));
        let e = graph_err(SnapshotGraph::diff(empty_commit, c, &with_empty));
        assert!(check(&e) && e.id() == tree, "diff: {e:?}");
    }
}

/// A source that fails for one id.
struct Failing<'a> {
    inner: &'a Store,
    bad: ObjectId,
}

impl ObjectSource for Failing<'_> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        if *id == self.bad {
            return Err("disk on fire".into());
        }
        ObjectSource::get(self.inner, id)
    }
}

#[test]
fn source_errors_are_carried_with_the_id() {
    let f = fixture();
    let victims = SnapshotGraph::reachable(f.target, &f.store).unwrap();
    let mut ws = bystander();
    let before = observable(&ws);
    for &bad in victims.iter().step_by(7) {
        let src = Failing {
            inner: &f.store,
            bad,
        };
        let is_source = |e: &ObjectError| matches!(e, ObjectError::Source { id, source } if *id == bad && source.to_string() == "disk on fire");
        let e = checkout_err(ws.checkout(f.target, &src, CheckoutPolicy::Force));
        assert!(is_source(&e), "{e:?}");
        assert_eq!(observable(&ws), before);
        let e = graph_err(SnapshotGraph::reachable(f.target, &src));
        assert!(is_source(&e), "{e:?}");
        let e = graph_err(SnapshotGraph::plan_checkout(f.target, &src));
        assert!(is_source(&e), "{e:?}");
    }
    // A have source that fails counts as holding nothing: everything is emitted.
    let mut w = Workspace::new();
    w.write("/x", pseudo_random(10_000, 1)).unwrap();
    let full = w.commit(CommitOptions::new()).unwrap();
    let held: Store = full
        .objects()
        .iter()
        .map(|(i, b)| (*i, b.to_vec()))
        .collect();
    let failing = Failing {
        inner: &held,
        bad: SnapshotGraph::commit(full.id(), full.objects())
            .unwrap()
            .tree,
    };
    let again = w
        .commit(CommitOptions::new().parent(full.id()).have_in(&failing))
        .unwrap();
    let emitted: HashSet<ObjectId> = again.objects().ids().copied().collect();
    assert!(
        emitted.contains(&failing.bad),
        "the unanswerable tree is emitted"
    );
}

// ---------------------------------------------------------------- malformed trees

#[test]
fn hand_built_trees_match_the_engine() {
    // Sanity for the hand-built objects below: the same bytes the engine writes.
    let mut ws = Workspace::new();
    ws.write("/a", b"x").unwrap();
    ws.write("/d/b", b"yy").unwrap();
    let c = ws.commit(CommitOptions::new()).unwrap();
    let mut store = Store::new();
    let sub = put_tree(&mut store, &TreeNode::Leaf(vec![inline_file("b", b"yy")]));
    let root = put_tree(
        &mut store,
        &TreeNode::Leaf(vec![inline_file("a", b"x"), dir_entry("d", sub, 1, 2)]),
    );
    let commit = put_commit(&mut store, &bare_commit(root, vec![], 1));
    assert_eq!(commit, c.id());
    let mut other = Workspace::new();
    let _ = other
        .checkout(commit, &store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(other.read("/d/b").unwrap(), b"yy");
}

#[test]
fn malformed_leaf_entries() {
    let good = inline_file("a", b"x");
    let cases: Vec<(&str, Vec<Entry>)> = vec![
        (
            "unsorted",
            vec![inline_file("b", b"1"), inline_file("a", b"2")],
        ),
        (
            "duplicate",
            vec![inline_file("a", b"1"), inline_file("a", b"2")],
        ),
        ("slash in name", vec![inline_file("a/b", b"1")]),
        ("NUL in name", vec![inline_file("a\0b", b"1")]),
        ("empty name", vec![inline_file("", b"1")]),
        ("dot", vec![inline_file(".", b"1")]),
        ("dot dot", vec![inline_file("..", b"1")]),
        ("long name", vec![inline_file(&"n".repeat(256), b"1")]),
        (
            "mode out of range",
            vec![Entry {
                mode: 0o10000,
                ..good.clone()
            }],
        ),
        (
            "inline length differs from size",
            vec![Entry {
                name: "a".into(),
                mode: 0o644,
                node: EntryNode::File {
                    size: 5,
                    content: Content::Inline(b"abc".to_vec()),
                },
            }],
        ),
        (
            "inline too large",
            vec![Entry {
                name: "a".into(),
                mode: 0o644,
                node: EntryNode::File {
                    size: 65,
                    content: Content::Inline(vec![0; 65]),
                },
            }],
        ),
        (
            "small content as a chunk",
            vec![Entry {
                name: "a".into(),
                mode: 0o644,
                node: EntryNode::File {
                    size: 10,
                    content: Content::Chunk(ObjectId::from_bytes([1; 32])),
                },
            }],
        ),
        (
            "single chunk beyond the largest chunk",
            vec![Entry {
                name: "a".into(),
                mode: 0o644,
                node: EntryNode::File {
                    size: (64 << 10) + 1,
                    content: Content::Chunk(ObjectId::from_bytes([1; 32])),
                },
            }],
        ),
        (
            "empty symlink target",
            vec![Entry {
                name: "l".into(),
                mode: 0o777,
                node: EntryNode::Symlink {
                    target: String::new(),
                },
            }],
        ),
        (
            "symlink target with NUL",
            vec![Entry {
                name: "l".into(),
                mode: 0o777,
                node: EntryNode::Symlink {
                    target: "a\0".into(),
                },
            }],
        ),
    ];
    for (what, entries) in cases {
        let mut store = Store::new();
        let (commit, tree) = commit_of_tree(&mut store, &TreeNode::Leaf(entries));
        eprintln!("case: {what}");
        assert_malformed_tree(&store, commit, tree, true);
    }
}

#[test]
fn malformed_internal_nodes() {
    let mut store = Store::new();
    let leaf_a = put_tree(&mut store, &TreeNode::Leaf(vec![inline_file("a", b"1")]));
    let leaf_b = put_tree(&mut store, &TreeNode::Leaf(vec![inline_file("b", b"2")]));
    let child = |first: &str, tree| TreeChild {
        first: first.into(),
        tree,
        files: 1,
        bytes: 1,
    };
    let structural: Vec<(&str, TreeNode)> = vec![
        (
            "level 0",
            TreeNode::Internal {
                level: 0,
                children: vec![child("a", leaf_a)],
            },
        ),
        (
            "level above the maximum",
            TreeNode::Internal {
                level: 33,
                children: vec![child("a", leaf_a)],
            },
        ),
        (
            "no children",
            TreeNode::Internal {
                level: 1,
                children: vec![],
            },
        ),
        (
            "unsorted children",
            TreeNode::Internal {
                level: 1,
                children: vec![child("b", leaf_b), child("a", leaf_a)],
            },
        ),
        (
            "bad child key",
            TreeNode::Internal {
                level: 1,
                children: vec![child("a/", leaf_a)],
            },
        ),
    ];
    for (what, node) in structural {
        let (commit, tree) = commit_of_tree(&mut store, &node);
        eprintln!("case: {what}");
        assert_malformed_tree(&store, commit, tree, true);
    }

    // Faults only visible across nodes: checkout and diff find them.
    let across: Vec<(&str, TreeNode)> = vec![
        (
            "first key does not match the child",
            TreeNode::Internal {
                level: 1,
                children: vec![child("a", leaf_a), child("c", leaf_b)],
            },
        ),
        (
            "totals do not match the child",
            TreeNode::Internal {
                level: 1,
                children: vec![
                    child("a", leaf_a),
                    TreeChild {
                        files: 2,
                        ..child("b", leaf_b)
                    },
                ],
            },
        ),
        (
            "a level-1 node over another level-1 node",
            TreeNode::Internal {
                level: 1,
                children: vec![child("a", {
                    put_tree(
                        &mut store,
                        &TreeNode::Internal {
                            level: 1,
                            children: vec![child("a", leaf_a)],
                        },
                    )
                })],
            },
        ),
        (
            "an empty leaf below an index",
            TreeNode::Internal {
                level: 1,
                children: vec![
                    child("a", leaf_a),
                    TreeChild {
                        first: "b".into(),
                        tree: put_tree(&mut store, &TreeNode::Leaf(vec![])),
                        files: 0,
                        bytes: 0,
                    },
                ],
            },
        ),
    ];
    for (what, node) in across {
        let (commit, tree) = commit_of_tree(&mut store, &node);
        eprintln!("case: {what}");
        let mut ws = bystander();
        let before = observable(&ws);
        let e = checkout_err(ws.checkout(commit, &store, CheckoutPolicy::Force));
        assert!(
            matches!(
                &e,
                ObjectError::Malformed {
                    kind: ObjectKind::Tree,
                    ..
                }
            ),
            "{what}: {e:?}"
        );
        assert!(
            e.id() == tree || store.contains_key(&e.id()),
            "{what}: names a stored node"
        );
        assert_eq!(observable(&ws), before);
    }
}

#[test]
fn cross_node_duplicates_and_non_canonical_cuts() {
    let mut store = Store::new();
    // Two leaves that overlap: "a", "b" and "b", "c".
    let l1 = put_tree(
        &mut store,
        &TreeNode::Leaf(vec![inline_file("a", b"1"), inline_file("b", b"2")]),
    );
    let l2 = put_tree(
        &mut store,
        &TreeNode::Leaf(vec![inline_file("b", b"2"), inline_file("c", b"3")]),
    );
    let child = |first: &str, tree| TreeChild {
        first: first.into(),
        tree,
        files: 2,
        bytes: 2,
    };
    let (commit, root) = commit_of_tree(
        &mut store,
        &TreeNode::Internal {
            level: 1,
            children: vec![child("a", l1), child("b", l2)],
        },
    );
    assert_malformed_tree(&store, commit, root, false);
    let empty = put_tree(&mut store, &TreeNode::Leaf(vec![]));
    let empty_commit = put_commit(&mut store, &bare_commit(empty, vec![], 1));
    let e = graph_err(SnapshotGraph::diff(empty_commit, commit, &store));
    assert!(
        matches!(&e, ObjectError::Malformed { id, .. } if *id == root),
        "{e:?}"
    );

    // A well-formed but non-canonical split: a small directory cut into two leaves
    // (the format cuts it into one), so the same directory would have two ids.
    let mut store = Store::new();
    let la = put_tree(&mut store, &TreeNode::Leaf(vec![inline_file("a", b"1")]));
    let lb = put_tree(&mut store, &TreeNode::Leaf(vec![inline_file("b", b"2")]));
    let one = |first: &str, tree| TreeChild {
        first: first.into(),
        tree,
        files: 1,
        bytes: 1,
    };
    let (commit, root) = commit_of_tree(
        &mut store,
        &TreeNode::Internal {
            level: 1,
            children: vec![one("a", la), one("b", lb)],
        },
    );
    assert_malformed_tree(&store, commit, root, false);
}

#[test]
fn lying_directory_totals() {
    // A subdirectory entry claiming fewer files and bytes than its tree holds.
    let mut store = Store::new();
    let sub = put_tree(
        &mut store,
        &TreeNode::Leaf(vec![inline_file("x", b"12345"), inline_file("y", b"6")]),
    );
    let (commit, root) =
        commit_of_tree(&mut store, &TreeNode::Leaf(vec![dir_entry("d", sub, 1, 5)]));
    assert_malformed_tree(&store, commit, root, false);
    // And the totals are not trusted for limits either: the files are counted.
    let mut files = Vec::new();
    for i in 0..30 {
        files.push(inline_file(&format!("f{i:02}"), b"z"));
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    // Build the canonical tree for these 30 entries through the engine.
    let mut ws = Workspace::new();
    for e in &files {
        ws.write(&format!("/{}", e.name), b"z").unwrap();
    }
    let real = ws.commit(CommitOptions::new()).unwrap();
    store.extend(real.objects().iter().map(|(i, b)| (*i, b.to_vec())));
    let real_tree = SnapshotGraph::commit(real.id(), &store).unwrap().tree;
    let (liar, _) = commit_of_tree(
        &mut store,
        &TreeNode::Leaf(vec![dir_entry("d", real_tree, 0, 0)]),
    );
    let mut target = bystander();
    target.set_limits(Limits {
        max_files: 10,
        max_bytes: 1 << 30,
        ..Limits::default()
    });
    let before = observable(&target);
    assert!(matches!(
        target.checkout(liar, &store, CheckoutPolicy::Force),
        Err(CheckoutError::Limit(LimitError::Exceeded { what: "files", limit: 10, commit })) if commit == liar
    ));
    assert_eq!(observable(&target), before);
}

// ---------------------------------------------------------------- malformed content

#[test]
fn malformed_file_content() {
    let mut store = Store::new();
    let data = pseudo_random(200, 1);
    let chunk = put_chunk(&mut store, &data);
    let file = |size: u64, content: Content| {
        TreeNode::Leaf(vec![Entry {
            name: "f".into(),
            mode: 0o644,
            node: EntryNode::File { size, content },
        }])
    };
    let mut ws = bystander();
    let before = observable(&ws);
    let mut expect = |store: &Store, node: &TreeNode, bad: ObjectId, kind: ObjectKind| {
        let mut s = store.clone();
        let (commit, _) = commit_of_tree(&mut s, node);
        let e = checkout_err(ws.checkout(commit, &s, CheckoutPolicy::Force));
        assert!(
            matches!(&e, ObjectError::Malformed { id, kind: k, .. } if *id == bad && *k == kind),
            "{e:?}"
        );
        assert_eq!(observable(&ws), before);
    };
    // What the reachability walks must refuse as checkout does (they use the one
    // manifest walker, and check chunk lengths against their references).
    let walks_refuse = |store: &Store, node: &TreeNode, bad: ObjectId, kind: ObjectKind| {
        let mut s = store.clone();
        let (commit, _) = commit_of_tree(&mut s, node);
        for e in [
            graph_err(SnapshotGraph::reachable(commit, &s)),
            graph_err(SnapshotGraph::reachable_history(commit, &s)),
        ] {
            assert!(
                matches!(&e, ObjectError::Malformed { id, kind: k, .. } if *id == bad && *k == kind),
                "reachable: {e:?}"
            );
        }
    };
    // A single chunk whose length differs from the entry's size.
    expect(
        &store,
        &file(201, Content::Chunk(chunk)),
        chunk,
        ObjectKind::Chunk,
    );
    walks_refuse(
        &store,
        &file(201, Content::Chunk(chunk)),
        chunk,
        ObjectKind::Chunk,
    );

    // Manifests: built by hand from real chunks.
    let big = pseudo_random(100_000, 2);
    let cuts = snapgraph::chunk::cut_points(&big);
    assert!(cuts.len() >= 3);
    let mut refs = Vec::new();
    let mut start = 0;
    for end in cuts {
        let id = put_chunk(&mut store, &big[start..end]);
        refs.push(ChunkRef {
            id,
            len: (end - start) as u32,
        });
        start = end;
    }
    let m = put_manifest(&mut store, &Manifest::Leaf(refs.clone()));
    // Sanity: the hand-built manifest restores.
    {
        let mut s = store.clone();
        let (commit, _) = commit_of_tree(&mut s, &file(big.len() as u64, Content::Manifest(m)));
        let mut w = Workspace::new();
        let _ = w.checkout(commit, &s, CheckoutPolicy::Force).unwrap();
        assert_eq!(w.read("/f").unwrap(), &big[..]);
    }
    // Size differs from the entry.
    expect(
        &store,
        &file(big.len() as u64 + 1, Content::Manifest(m)),
        m,
        ObjectKind::Manifest,
    );
    walks_refuse(
        &store,
        &file(big.len() as u64 + 1, Content::Manifest(m)),
        m,
        ObjectKind::Manifest,
    );
    // A chunk whose length differs from the manifest's record.
    let mut lying = refs.clone();
    lying[0].len += 1;
    lying[1].len -= 1;
    let m2 = put_manifest(&mut store, &Manifest::Leaf(lying));
    expect(
        &store,
        &file(big.len() as u64, Content::Manifest(m2)),
        refs[0].id,
        ObjectKind::Chunk,
    );
    walks_refuse(
        &store,
        &file(big.len() as u64, Content::Manifest(m2)),
        refs[0].id,
        ObjectKind::Chunk,
    );
    // A manifest with a single chunk.
    let single = put_chunk(&mut store, &big[..1000]);
    let m3 = put_manifest(
        &mut store,
        &Manifest::Leaf(vec![ChunkRef {
            id: single,
            len: 1000,
        }]),
    );
    expect(
        &store,
        &file(1000, Content::Manifest(m3)),
        m3,
        ObjectKind::Manifest,
    );
    walks_refuse(
        &store,
        &file(1000, Content::Manifest(m3)),
        m3,
        ObjectKind::Manifest,
    );
    // Structurally bad manifests.
    for node in [
        Manifest::Leaf(vec![]),
        Manifest::Leaf(vec![ChunkRef { id: single, len: 0 }]),
        Manifest::Internal {
            level: 0,
            children: vec![ManifestChild {
                id: m,
                size: 100_000,
            }],
        },
        Manifest::Internal {
            level: 1,
            children: vec![],
        },
        Manifest::Internal {
            level: 1,
            children: vec![ManifestChild { id: m, size: 0 }],
        },
    ] {
        let bad = put_manifest(&mut store, &node);
        let size = node.size().max(65);
        expect(
            &store,
            &file(size, Content::Manifest(bad)),
            bad,
            ObjectKind::Manifest,
        );
        let mut s = store.clone();
        let (commit, _) = commit_of_tree(&mut s, &file(size, Content::Manifest(bad)));
        let e = graph_err(SnapshotGraph::reachable(commit, &s));
        assert!(
            matches!(&e, ObjectError::Malformed { id, .. } if *id == bad),
            "{e:?}"
        );
        let e = graph_err(SnapshotGraph::plan_checkout(commit, &s));
        assert!(
            matches!(&e, ObjectError::Malformed { id, .. } if *id == bad),
            "{e:?}"
        );
    }
    // An internal manifest node whose child is at the wrong level or size.
    let over = put_manifest(
        &mut store,
        &Manifest::Internal {
            level: 2,
            children: vec![ManifestChild {
                id: m,
                size: big.len() as u64,
            }],
        },
    );
    expect(
        &store,
        &file(big.len() as u64, Content::Manifest(over)),
        over,
        ObjectKind::Manifest,
    );
    walks_refuse(
        &store,
        &file(big.len() as u64, Content::Manifest(over)),
        over,
        ObjectKind::Manifest,
    );
    // A non-canonical manifest: the chunks split over two leaves the format would
    // keep in one.
    let l1 = put_manifest(&mut store, &Manifest::Leaf(refs[..2].to_vec()));
    let l2 = put_manifest(&mut store, &Manifest::Leaf(refs[2..].to_vec()));
    let s1: u64 = refs[..2].iter().map(|r| u64::from(r.len)).sum();
    let split = put_manifest(
        &mut store,
        &Manifest::Internal {
            level: 1,
            children: vec![
                ManifestChild { id: l1, size: s1 },
                ManifestChild {
                    id: l2,
                    size: big.len() as u64 - s1,
                },
            ],
        },
    );
    expect(
        &store,
        &file(big.len() as u64, Content::Manifest(split)),
        split,
        ObjectKind::Manifest,
    );
}

// ---------------------------------------------------------------- non-canonical cuts

/// Asserts that checkout, `reachable`, `reachable_history` and `plan_checkout` (the
/// stateless call and a resumable plan over a fetch loop) all refuse `commit` with
/// the same error: `Malformed` naming `bad` as a non-canonical `kind`.
fn assert_non_canonical(store: &Store, commit: ObjectId, bad: ObjectId, kind: ObjectKind) {
    let want = format!("non-canonical {kind} (nodes are not cut as the format requires)");
    let check = |what: &str, e: ObjectError| {
        assert!(
            matches!(&e, ObjectError::Malformed { id, kind: k, reason } if *id == bad && *k == kind && *reason == want),
            "{what}: {e:?}"
        );
    };
    let mut ws = bystander();
    let before = observable(&ws);
    check(
        "checkout",
        checkout_err(ws.checkout(commit, store, CheckoutPolicy::Force)),
    );
    assert_eq!(observable(&ws), before);
    check(
        "reachable",
        graph_err(SnapshotGraph::reachable(commit, store)),
    );
    check(
        "reachable_history",
        graph_err(SnapshotGraph::reachable_history(commit, store)),
    );
    check(
        "plan_checkout",
        graph_err(SnapshotGraph::plan_checkout(commit, store)),
    );
    // Fetched round by round: the plan refuses once nothing is missing.
    let mut local = Store::new();
    let mut plan = snapgraph::graph::CheckoutPlan::new(commit);
    let e = loop {
        match plan.missing(&local) {
            Ok(missing) => {
                assert!(!missing.is_empty(), "the plan accepted {bad}");
                local.extend(missing.iter().map(|m| (*m, store[m].clone())));
            }
            Err(e) => break e,
        }
    };
    check("CheckoutPlan", graph_err::<()>(Err(e)));
}

#[test]
fn non_canonical_tree_and_manifest_are_refused_by_every_walk() {
    // A small directory cut into two leaves (the format keeps it in one), one level
    // down so that the walks meet it as a directory entry's tree.
    let mut store = Store::new();
    let la = put_tree(&mut store, &TreeNode::Leaf(vec![inline_file("a", b"1")]));
    let lb = put_tree(&mut store, &TreeNode::Leaf(vec![inline_file("b", b"2")]));
    let one = |first: &str, tree| TreeChild {
        first: first.into(),
        tree,
        files: 1,
        bytes: 1,
    };
    let split = put_tree(
        &mut store,
        &TreeNode::Internal {
            level: 1,
            children: vec![one("a", la), one("b", lb)],
        },
    );
    let (commit, _) = commit_of_tree(
        &mut store,
        &TreeNode::Leaf(vec![dir_entry("d", split, 2, 2)]),
    );
    assert_non_canonical(&store, commit, split, ObjectKind::Tree);
    // The same directory cut canonically (one leaf) is accepted by all.
    let leaf = put_tree(
        &mut store,
        &TreeNode::Leaf(vec![inline_file("a", b"1"), inline_file("b", b"2")]),
    );
    let (good, _) = commit_of_tree(
        &mut store,
        &TreeNode::Leaf(vec![dir_entry("d", leaf, 2, 2)]),
    );
    let mut ws = Workspace::new();
    ws.checkout(good, &store, CheckoutPolicy::Force)
        .unwrap()
        .verify(|_| None)
        .unwrap();
    assert_eq!(ws.read("/d/b").unwrap(), b"2");
    SnapshotGraph::reachable(good, &store).unwrap();
    assert!(SnapshotGraph::plan_checkout(good, &store)
        .unwrap()
        .is_empty());

    // A file's chunks split over two manifest leaves the format keeps in one.
    let mut store = Store::new();
    let big = pseudo_random(100_000, 2);
    let mut refs = Vec::new();
    let mut start = 0;
    for end in snapgraph::chunk::cut_points(&big) {
        let id = put_chunk(&mut store, &big[start..end]);
        refs.push(ChunkRef {
            id,
            len: (end - start) as u32,
        });
        start = end;
    }
    assert!(refs.len() >= 3);
    let l1 = put_manifest(&mut store, &Manifest::Leaf(refs[..2].to_vec()));
    let l2 = put_manifest(&mut store, &Manifest::Leaf(refs[2..].to_vec()));
    let s1: u64 = refs[..2].iter().map(|r| u64::from(r.len)).sum();
    let split = put_manifest(
        &mut store,
        &Manifest::Internal {
            level: 1,
            children: vec![
                ManifestChild { id: l1, size: s1 },
                ManifestChild {
                    id: l2,
                    size: big.len() as u64 - s1,
                },
            ],
        },
    );
    let file = |content| {
        TreeNode::Leaf(vec![Entry {
            name: "f".into(),
            mode: 0o644,
            node: EntryNode::File {
                size: big.len() as u64,
                content,
            },
        }])
    };
    let (commit, _) = commit_of_tree(&mut store, &file(Content::Manifest(split)));
    assert_non_canonical(&store, commit, split, ObjectKind::Manifest);
    // As the state's content too.
    let empty = put_tree(&mut store, &TreeNode::Leaf(vec![]));
    let mut c = bare_commit(empty, vec![], 1);
    c.state_size = big.len() as u64;
    c.state = Content::Manifest(split);
    let stateful = put_commit(&mut store, &c);
    assert_non_canonical(&store, stateful, split, ObjectKind::Manifest);
    // The canonical manifest of the same chunks is accepted by all.
    let m = put_manifest(&mut store, &Manifest::Leaf(refs.clone()));
    let (good, _) = commit_of_tree(&mut store, &file(Content::Manifest(m)));
    let mut ws = Workspace::new();
    ws.checkout(good, &store, CheckoutPolicy::Force)
        .unwrap()
        .verify(|_| None)
        .unwrap();
    assert_eq!(ws.read("/f").unwrap(), &big[..]);
    SnapshotGraph::reachable_history(good, &store).unwrap();
    assert!(SnapshotGraph::plan_checkout(good, &store)
        .unwrap()
        .is_empty());
}

// ---------------------------------------------------------------- non-canonical encodings

#[test]
fn non_canonical_encodings_are_malformed() {
    let node = TreeNode::Leaf(vec![inline_file("a", b"x")]);
    let body = postcard::to_allocvec(&node).unwrap();
    // Leaf is variant 0, then the entry count 1: make the count an overlong varint.
    assert_eq!(&body[..2], &[0, 1]);
    let mut overlong = vec![0u8, 0x81, 0x00];
    overlong.extend_from_slice(&body[2..]);
    let mut trailing = body.clone();
    trailing.push(0);
    // The mode 0o644 = 420 is the varint [0xa4, 0x03]; pad it to three bytes.
    let pos = body.windows(2).position(|w| w == [0xa4, 0x03]).unwrap();
    let mut overlong_mode = body[..pos].to_vec();
    overlong_mode.extend_from_slice(&[0xa4, 0x83, 0x00]);
    overlong_mode.extend_from_slice(&body[pos + 2..]);
    let mut truncated = body.clone();
    truncated.pop();
    for (what, bytes) in [
        ("overlong count", overlong),
        ("trailing byte", trailing),
        ("overlong mode", overlong_mode),
        ("truncated body", truncated),
        ("unknown variant", vec![7, 0]),
    ] {
        let mut store = Store::new();
        let tree = put(&mut store, 3, &bytes);
        let commit = put_commit(&mut store, &bare_commit(tree, vec![], 1));
        eprintln!("case: {what}");
        assert_malformed_tree(&store, commit, tree, true);
    }

    // A commit body with an overlong generation.
    let mut store = Store::new();
    let empty = put_tree(&mut store, &TreeNode::Leaf(vec![]));
    let c = bare_commit(empty, vec![], 1);
    let body = postcard::to_allocvec(&c).unwrap();
    // tree (32 raw bytes), parents count 0, generation 1.
    assert_eq!(&body[32..34], &[0, 1]);
    let mut bad = body[..33].to_vec();
    bad.extend_from_slice(&[0x81, 0x00]);
    bad.extend_from_slice(&body[34..]);
    let id = put(&mut store, 4, &bad);
    let is_bad = |e: &ObjectError| matches!(e, ObjectError::Malformed { id: i, kind: ObjectKind::Commit, .. } if *i == id);
    let mut ws = bystander();
    let before = observable(&ws);
    let e = checkout_err(ws.checkout(id, &store, CheckoutPolicy::Force));
    assert!(is_bad(&e), "{e:?}");
    assert_eq!(observable(&ws), before);
    assert!(is_bad(&graph_err(SnapshotGraph::ancestry(id, &store, 5))));
    assert!(is_bad(&graph_err(SnapshotGraph::commit(id, &store))));
    assert!(is_bad(&graph_err(SnapshotGraph::reachable(id, &store))));
    assert!(is_bad(&graph_err(SnapshotGraph::plan_checkout(id, &store))));
    assert!(is_bad(&graph_err(SnapshotGraph::diff(id, id, &store))));
}

#[test]
fn malformed_commits() {
    let mut store = Store::new();
    let empty = put_tree(&mut store, &TreeNode::Leaf(vec![]));
    let root = put_commit(&mut store, &bare_commit(empty, vec![], 1));
    let cases: Vec<(&str, CommitObject)> = vec![
        ("root with generation 2", bare_commit(empty, vec![], 2)),
        ("root with generation 0", bare_commit(empty, vec![], 0)),
        ("child with generation 1", bare_commit(empty, vec![root], 1)),
        ("duplicate parent", bare_commit(empty, vec![root, root], 2)),
        (
            "too many parents",
            bare_commit(
                empty,
                (0..257u32)
                    .map(|i| {
                        let mut b = [0u8; 32];
                        b[..4].copy_from_slice(&i.to_le_bytes());
                        ObjectId::from_bytes(b)
                    })
                    .collect(),
                2,
            ),
        ),
        (
            "state inline length differs from size",
            CommitObject {
                state_size: 3,
                state: Content::Inline(vec![1]),
                ..bare_commit(empty, vec![], 1)
            },
        ),
    ];
    let mut ws = bystander();
    let before = observable(&ws);
    for (what, c) in cases {
        let id = put_commit(&mut store, &c);
        let is_bad = |e: &ObjectError| matches!(e, ObjectError::Malformed { id: i, kind: ObjectKind::Commit, .. } if *i == id);
        let e = checkout_err(ws.checkout(id, &store, CheckoutPolicy::Force));
        assert!(is_bad(&e), "{what}: {e:?}");
        assert_eq!(observable(&ws), before);
        assert!(
            is_bad(&graph_err(SnapshotGraph::ancestry(id, &store, 5))),
            "{what}"
        );
        assert!(
            is_bad(&graph_err(SnapshotGraph::reachable(id, &store))),
            "{what}"
        );
        assert!(
            is_bad(&graph_err(SnapshotGraph::diff(root, id, &store))),
            "{what}"
        );
        assert!(
            is_bad(&graph_err(SnapshotGraph::plan_checkout(id, &store))),
            "{what}"
        );
        // Nor can it be a parent: its generation is not to be trusted.
        match Workspace::new().commit(CommitOptions::new().parent(id).parent_source(&store)) {
            Err(snapgraph::CommitError::Parent(e)) => assert!(is_bad(&e), "{what}: {e:?}"),
            other => panic!("{what}: a malformed parent was accepted: {other:?}"),
        }
    }
}

// ---------------------------------------------------------------- generations

#[test]
fn parent_generation_not_lower_is_an_error() {
    let mut store = Store::new();
    let empty = put_tree(&mut store, &TreeNode::Leaf(vec![]));
    let r = put_commit(&mut store, &bare_commit(empty, vec![], 1));
    let p = put_commit(&mut store, &bare_commit(empty, vec![r], 5));
    for generation in [3, 5] {
        let c = put_commit(&mut store, &bare_commit(empty, vec![p], generation));
        match SnapshotGraph::ancestry(c, &store, 100) {
            Err(GraphError::Generation {
                id,
                generation: g,
                parent,
                parent_generation,
            }) => {
                assert_eq!((id, g, parent, parent_generation), (c, generation, p, 5));
            }
            other => panic!("generation {generation}: {other:?}"),
        }
        // `is_ancestor` checks each edge it walks down the same way.
        match SnapshotGraph::is_ancestor(r, [c], &store) {
            Err(GraphError::Generation {
                id,
                generation: g,
                parent,
                parent_generation,
            }) => {
                assert_eq!((id, g, parent, parent_generation), (c, generation, p, 5));
            }
            other => panic!("is_ancestor, generation {generation}: {other:?}"),
        }
    }
    // Generations may skip: 5 over 1 is fine.
    assert_eq!(SnapshotGraph::ancestry(p, &store, 100).unwrap(), vec![p, r]);
    assert!(SnapshotGraph::is_ancestor(r, [p], &store).unwrap());
    assert!(!SnapshotGraph::is_ancestor(p, [r], &store).unwrap());
}

#[test]
fn parent_generation_checked_when_the_parent_was_reached_first_elsewhere() {
    // T (10) -> P (5) -> R (1), and T -> C (3) -> P: C claims a generation below its
    // parent's, but P is first reached through T.
    let mut store = Store::new();
    let empty = put_tree(&mut store, &TreeNode::Leaf(vec![]));
    let r = put_commit(&mut store, &bare_commit(empty, vec![], 1));
    let p = put_commit(&mut store, &bare_commit(empty, vec![r], 5));
    let c = put_commit(&mut store, &bare_commit(empty, vec![p], 3));
    for parents in [vec![p, c], vec![c, p]] {
        let t = put_commit(&mut store, &bare_commit(empty, parents.clone(), 10));
        match SnapshotGraph::ancestry(t, &store, 100) {
            Err(GraphError::Generation {
                id,
                generation,
                parent,
                parent_generation,
            }) => {
                assert_eq!(
                    (id, generation, parent, parent_generation),
                    (c, 3, p, 5),
                    "{parents:?}"
                );
            }
            Ok(order) => panic!("accepted, in order {order:?} (C={c}, P={p})"),
            Err(e) => panic!("{e:?}"),
        }
    }
}

// ---------------------------------------------------------------- limits and depth

#[test]
fn checkout_limits_leave_the_workspace_unchanged() {
    let mut ws = Workspace::new();
    for i in 0..50 {
        ws.write(&format!("/d{}/f{i}", i % 5), vec![7u8; 1000])
            .unwrap();
    }
    let mut store = Store::new();
    let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    let mut target = bystander();
    let before = observable(&target);
    for (limits, what) in [
        (
            Limits {
                max_files: 10,
                max_bytes: u64::MAX,
                ..Limits::default()
            },
            "files",
        ),
        (
            Limits {
                max_files: 49,
                max_bytes: u64::MAX,
                ..Limits::default()
            },
            "files",
        ),
        (
            Limits {
                max_files: 1000,
                max_bytes: 49_999,
                ..Limits::default()
            },
            "bytes",
        ),
    ] {
        target.set_limits(limits);
        match target.checkout(id, &store, CheckoutPolicy::default()) {
            Err(CheckoutError::Limit(LimitError::Exceeded {
                commit,
                what: w,
                limit,
            })) => {
                assert_eq!(commit, id);
                assert_eq!(w, what);
                assert_eq!(
                    limit,
                    if what == "files" {
                        limits.max_files
                    } else {
                        limits.max_bytes
                    }
                );
            }
            other => panic!("{limits:?}: {other:?}"),
        }
        assert_eq!(observable(&target), before);
    }
    target.set_limits(Limits {
        max_files: 50,
        max_bytes: 50_000,
        ..Limits::default()
    });
    let _ = target
        .checkout(id, &store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(snap(&target), snap(&ws));
}

#[test]
fn repeated_subtrees_cannot_make_checkout_run_away() {
    // Each level is a directory of 16 subdirectories that are all the same tree: 16^12
    // directories in all, from 13 small objects. Every total is 0, so only counting
    // what is read can stop it.
    let mut store = Store::new();
    let mut tree = put_tree(&mut store, &TreeNode::Leaf(vec![]));
    for _ in 0..12 {
        let mut ws = Workspace::new();
        let names: Vec<String> = (0..16).map(|i| format!("d{i:02}")).collect();
        let entries: Vec<Entry> = names.iter().map(|n| dir_entry(n, tree, 0, 0)).collect();
        // Use the canonical cut for these names, as the engine would.
        for n in &names {
            ws.mkdir(&format!("/{n}")).unwrap();
        }
        let c = ws.commit(CommitOptions::new()).unwrap();
        let canonical = SnapshotGraph::commit(c.id(), c.objects()).unwrap().tree;
        let root_bytes = c.objects().get_bytes(&canonical).unwrap();
        let root_node = TreeNode::decode(&canonical, &root_bytes[2..]).unwrap();
        assert!(
            matches!(root_node, TreeNode::Leaf(_)),
            "16 entries fit a leaf"
        );
        tree = put_tree(&mut store, &TreeNode::Leaf(entries));
    }
    let commit = put_commit(&mut store, &bare_commit(tree, vec![], 1));
    let mut target = bystander();
    target.set_limits(Limits {
        max_files: 5_000,
        max_bytes: u64::MAX,
        ..Limits::default()
    });
    let before = observable(&target);
    let started = Instant::now();
    // Directories are counted apart from files (the budget diff shares), and named.
    assert!(matches!(
        target.checkout(commit, &store, CheckoutPolicy::Force),
        Err(CheckoutError::Limit(LimitError::Exceeded {
            what: "directories",
            ..
        }))
    ));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(observable(&target), before);
    // The graph queries that visit each object once are unaffected.
    assert_eq!(SnapshotGraph::reachable(commit, &store).unwrap().len(), 14);
    assert!(SnapshotGraph::plan_checkout(commit, &store)
        .unwrap()
        .is_empty());
}

#[test]
fn directories_nested_too_deep() {
    // 300 nested directories: deeper than any path may be.
    let mut store = Store::new();
    let mut tree = put_tree(&mut store, &TreeNode::Leaf(vec![]));
    for _ in 0..300 {
        tree = put_tree(
            &mut store,
            &TreeNode::Leaf(vec![dir_entry("d", tree, 0, 0)]),
        );
    }
    let commit = put_commit(&mut store, &bare_commit(tree, vec![], 1));
    let mut target = bystander();
    let before = observable(&target);
    match target.checkout(commit, &store, CheckoutPolicy::Force) {
        Err(CheckoutError::Limit(LimitError::TooDeep { path })) => {
            // The first directory whose path is longer than any path may be.
            assert_eq!(path, "/d".repeat(257));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(observable(&target), before);
    // Queries that do not materialize paths handle the depth without overflowing.
    assert_eq!(SnapshotGraph::reachable(commit, &store).unwrap().len(), 302);
    // A diff materializes paths, so it refuses the same path a checkout does.
    let empty = put_tree(&mut store, &TreeNode::Leaf(vec![]));
    let e = put_commit(&mut store, &bare_commit(empty, vec![], 1));
    match SnapshotGraph::diff(e, commit, &store) {
        Err(GraphError::Limit(LimitError::TooDeep { path })) => assert_eq!(path, "/d".repeat(257)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn shared_index_nodes_cannot_multiply_the_work() {
    // One directory whose index nodes share children: node i at each level lists
    // nodes i.. of the level below, each under its true first key, so every index
    // entry matches its child and all totals are 0. Read naively, the paths through
    // these M * H nodes number C(M + H, H): work exponential in the height from a
    // handful of objects. A well-formed directory never lists a node twice.
    const M: usize = 8;
    const H: usize = 12;
    let key = |j: usize| format!("k{j:02}");
    let mut store = Store::new();
    let empty = put_tree(&mut store, &TreeNode::Leaf(vec![]));
    let mut below: Vec<ObjectId> = (0..M)
        .map(|j| {
            put_tree(
                &mut store,
                &TreeNode::Leaf(vec![dir_entry(&key(j), empty, 0, 0)]),
            )
        })
        .collect();
    for level in 1..=H {
        below = (0..M)
            .map(|i| {
                let children = (i..M)
                    .map(|j| TreeChild {
                        first: key(j),
                        tree: below[j],
                        files: 0,
                        bytes: 0,
                    })
                    .collect();
                put_tree(
                    &mut store,
                    &TreeNode::Internal {
                        level: level as u8,
                        children,
                    },
                )
            })
            .collect();
    }
    let root = below[0];
    let commit = put_commit(&mut store, &bare_commit(root, vec![], 1));
    let empty_commit = put_commit(&mut store, &bare_commit(empty, vec![], 1));
    let objects = store.len();
    let counting = Counting::new(&store);

    let mut ws = bystander();
    let before = observable(&ws);
    let e = checkout_err(ws.checkout(commit, &counting, CheckoutPolicy::Force));
    assert!(
        matches!(
            &e,
            ObjectError::Malformed {
                kind: ObjectKind::Tree,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(observable(&ws), before);
    assert!(
        counting.objects.get() <= 4 * objects,
        "checkout read {} objects from a store of {objects}",
        counting.objects.get()
    );

    counting.take();
    let e = graph_err(SnapshotGraph::diff(empty_commit, commit, &counting));
    assert!(
        matches!(
            &e,
            ObjectError::Malformed {
                kind: ObjectKind::Tree,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        counting.objects.get() <= 4 * objects,
        "diff read {} objects from a store of {objects}",
        counting.objects.get()
    );
}

#[test]
fn state_bytes_count_against_the_byte_limit() {
    let mut ws = Workspace::new();
    ws.write("/f", vec![1u8; 1000]).unwrap();
    ws.set_state(pseudo_random(2 << 20, 3));
    let mut store = Store::new();
    let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    let mut target = bystander();
    target.set_limits(Limits {
        max_files: 100,
        max_bytes: 1 << 20,
        ..Limits::default()
    });
    let before = observable(&target);
    assert!(matches!(
        target.checkout(id, &store, CheckoutPolicy::Force),
        Err(CheckoutError::Limit(LimitError::Exceeded { what: "bytes", commit, .. })) if commit == id
    ));
    assert_eq!(observable(&target), before);
    // Files and state together: 1000 + 2 MiB.
    target.set_limits(Limits {
        max_files: 100,
        max_bytes: (2 << 20) + 999,
        ..Limits::default()
    });
    assert!(matches!(
        target.checkout(id, &store, CheckoutPolicy::Force),
        Err(CheckoutError::Limit(LimitError::Exceeded {
            what: "bytes",
            ..
        }))
    ));
    target.set_limits(Limits {
        max_files: 100,
        max_bytes: (2 << 20) + 1000,
        ..Limits::default()
    });
    let _ = target.checkout(id, &store, CheckoutPolicy::Force).unwrap();
    assert_eq!(target.state(), ws.state());
}

#[test]
fn a_state_claiming_huge_size_is_refused_before_allocating() {
    // A state manifest whose nodes repeat one 64 KiB chunk: 1024 chunks per leaf,
    // 1024 leaves under the root, 64 GiB claimed from three small objects.
    let mut store = Store::new();
    let chunk = put_chunk(&mut store, &pseudo_random(64 << 10, 5));
    let leaf = put_manifest(
        &mut store,
        &Manifest::Leaf(vec![
            ChunkRef {
                id: chunk,
                len: 64 << 10
            };
            1024
        ]),
    );
    let root = put_manifest(
        &mut store,
        &Manifest::Internal {
            level: 1,
            children: vec![
                ManifestChild {
                    id: leaf,
                    size: 64 << 20
                };
                1024
            ],
        },
    );
    let empty = put_tree(&mut store, &TreeNode::Leaf(vec![]));
    let commit = put_commit(
        &mut store,
        &CommitObject {
            state_size: 64 << 30,
            state: Content::Manifest(root),
            ..bare_commit(empty, vec![], 1)
        },
    );
    let mut target = bystander();
    let before = observable(&target);
    let started = Instant::now();
    assert!(matches!(
        target.checkout(commit, &store, CheckoutPolicy::Force),
        Err(CheckoutError::Limit(LimitError::Exceeded {
            what: "bytes",
            ..
        }))
    ));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(observable(&target), before);
}

// ---------------------------------------------------------------- random mutations

/// Re-encodes `id` (and everything above it on the way to `root`) with `victim`
/// replaced by `replacement`. Returns the new id of `root`.
fn rewrite(
    store: &mut Store,
    id: ObjectId,
    victim: ObjectId,
    replacement: ObjectId,
    memo: &mut std::collections::HashMap<ObjectId, ObjectId>,
) -> ObjectId {
    if id == victim {
        return replacement;
    }
    if let Some(n) = memo.get(&id) {
        return *n;
    }
    let bytes = store[&id].clone();
    let body = &bytes[2..];
    let mut sub = |store: &mut Store, x: ObjectId| rewrite(store, x, victim, replacement, memo);
    let swap_content =
        |store: &mut Store,
         c: &mut Content,
         sub: &mut dyn FnMut(&mut Store, ObjectId) -> ObjectId| match c {
            Content::Inline(_) => {}
            Content::Chunk(x) | Content::Manifest(x) => *x = sub(store, *x),
        };
    let new = match bytes[0] {
        4 => {
            let mut c = CommitObject::decode(&id, body).unwrap();
            c.tree = sub(store, c.tree);
            swap_content(store, &mut c.state, &mut sub);
            c.capabilities = c.capabilities.map(|x| sub(store, x));
            c.reads = c.reads.map(|x| sub(store, x));
            put_commit(store, &c)
        }
        3 => {
            let node = match TreeNode::decode(&id, body).unwrap() {
                TreeNode::Leaf(mut entries) => {
                    for e in &mut entries {
                        match &mut e.node {
                            EntryNode::File { content, .. } => {
                                swap_content(store, content, &mut sub)
                            }
                            EntryNode::Dir { tree, .. } => *tree = sub(store, *tree),
                            EntryNode::Symlink { .. } => {}
                        }
                    }
                    TreeNode::Leaf(entries)
                }
                TreeNode::Internal {
                    level,
                    mut children,
                } => {
                    for c in &mut children {
                        c.tree = sub(store, c.tree);
                    }
                    TreeNode::Internal { level, children }
                }
            };
            put_tree(store, &node)
        }
        2 => {
            let node = match Manifest::decode(&id, body).unwrap() {
                Manifest::Leaf(mut chunks) => {
                    for c in &mut chunks {
                        c.id = sub(store, c.id);
                    }
                    Manifest::Leaf(chunks)
                }
                Manifest::Internal {
                    level,
                    mut children,
                } => {
                    for c in &mut children {
                        c.id = sub(store, c.id);
                    }
                    Manifest::Internal { level, children }
                }
            };
            put_manifest(store, &node)
        }
        _ => id,
    };
    memo.insert(id, new);
    new
}

fn mutation_fixture() -> &'static (Store, ObjectId, Vec<ObjectId>) {
    static FIXTURE: std::sync::OnceLock<(Store, ObjectId, Vec<ObjectId>)> =
        std::sync::OnceLock::new();
    FIXTURE.get_or_init(|| {
        let mut ws = Workspace::new();
        ws.write("/a/inline", b"tiny").unwrap();
        ws.write("/a/chunk", pseudo_random(2000, 1)).unwrap();
        ws.write("/a/b/many", pseudo_random(150_000, 2)).unwrap();
        for i in 0..150 {
            ws.write(&format!("/wide/{i:03}"), [i as u8]).unwrap();
        }
        ws.symlink("/a/link", "inline").unwrap();
        ws.mkdir("/empty").unwrap();
        ws.set_mode("/a", 0o700).unwrap();
        ws.set_state(pseudo_random(70_000, 3));
        ws.set_capabilities(CapabilityFingerprint::new().builtin("sh").feature("f"));
        ws.record_read(snapgraph::ExternalRead {
            source: "s3://b/k".into(),
            fingerprint: "e".into(),
            revision: Some("r".into()),
            size: 4,
            cached_at: None,
        })
        .unwrap();
        let mut store = Store::new();
        let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
        let objects = SnapshotGraph::reachable(id, &store).unwrap();
        (store, id, objects)
    })
}

mod mutations {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 1000,
            failure_persistence: Some(Box::new(
                proptest::test_runner::FileFailurePersistence::Direct(
                    "proptest-regressions/hostile.txt",
                ),
            )),
            ..ProptestConfig::default()
        })]

        /// Any mutation of any object, re-linked so that it is reached: every query
        /// gives a typed answer, a failed checkout changes nothing, and whatever
        /// checkout accepts is exactly what the engine itself would write.
        #[test]
        fn mutated_objects_never_panic_and_accepted_means_canonical(
            victim in any::<prop::sample::Index>(),
            how in 0u8..6,
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let (base, root, objects) = mutation_fixture();
            let victim = objects[victim.index(objects.len())];
            let mut bytes = base[&victim].clone();
            let body_len = bytes.len() - 2;
            let pos = 2 + at.index(body_len.max(1)).min(body_len.saturating_sub(1));
            match how {
                0 if body_len > 0 => bytes[pos] ^= 1 << (byte % 8),
                1 if body_len > 0 => bytes[pos] = byte,
                2 => bytes.truncate(2 + at.index(body_len + 1)),
                3 => bytes.insert(2 + at.index(body_len + 1), byte),
                4 if body_len > 0 => {
                    bytes.remove(pos);
                }
                _ => bytes[usize::from(byte % 2)] = byte,
            }
            prop_assume!(bytes != base[&victim]);
            let mut store = base.clone();
            let mutated = ObjectId::hash_stored(&bytes);
            store.insert(mutated, bytes);
            let commit = rewrite(&mut store, *root, victim, mutated, &mut Default::default());

            let mut ws = bystander();
            let before = observable(&ws);
            let checked_out = ws.checkout(commit, &store, CheckoutPolicy::Force);
            let reachable = SnapshotGraph::reachable(commit, &store);
            let plan = SnapshotGraph::plan_checkout(commit, &store);
            let mut with_empty = store.clone();
            let empty = put_tree(&mut with_empty, &TreeNode::Leaf(vec![]));
            let empty_commit = put_commit(&mut with_empty, &bare_commit(empty, vec![], 1));
            let diff = SnapshotGraph::diff(empty_commit, commit, &with_empty);
            let _ = SnapshotGraph::ancestry(commit, &store, 10);
            let _ = SnapshotGraph::reachable_history(commit, &store);
            match checked_out {
                Err(_) => prop_assert_eq!(observable(&ws), before),
                Ok(_) => {
                    prop_assert!(reachable.is_ok(), "checkout accepted what reachable refuses: {:?}", reachable);
                    prop_assert!(diff.is_ok(), "checkout accepted what diff refuses: {:?}", diff);
                    prop_assert_eq!(plan.unwrap(), vec![]);
                    let c = SnapshotGraph::commit(commit, &store).unwrap();
                    let mut opts = CommitOptions::new().parents(c.parents.clone());
                    for (k, v) in &c.meta {
                        opts = opts.meta(k.clone(), v.clone());
                    }
                    if let Some(caps) = SnapshotGraph::capabilities(commit, &store).unwrap() {
                        ws.set_capabilities(caps);
                    }
                    // A victim relabelled to an older format version it is valid in
                    // (how 5 writing 1 over the version byte) is accepted, as every
                    // released version is, whether it is the commit or any object
                    // under it; the workspace writes every object in the current
                    // version, so only a graph all of the current version can be
                    // expected to come back with its id.
                    let all_current = reachable
                        .as_ref()
                        .unwrap()
                        .iter()
                        .all(|id| store[id][1] == snapgraph::FORMAT_VERSION);
                    if c.parents.is_empty() && all_current {
                        let again = ws.commit(opts).unwrap();
                        prop_assert_eq!(again.id(), commit, "accepted a non-canonical commit");
                    }
                }
            }
        }
    }
}
