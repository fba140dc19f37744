//! Regression tests of issue #12's core defects: each failed before its fix.

mod common;

use common::{bare_commit, dir_entry, inline_file, persist, Store};
use snapgraph::graph::reachable::CheckoutPlan;
use snapgraph::object::commit::MAX_GENERATION;
use snapgraph::object::tree::{Content, Entry, EntryNode, TreeNode};
use snapgraph::{
    CheckoutPolicy, CommitError, CommitObject, CommitOptions, ExternalRead, GraphError,
    ObjectError, ObjectId, ObjectKind, SnapshotGraph, SnapshotOptions, Workspace,
};

fn put(store: &mut Store, kind: ObjectKind, body: &[u8]) -> ObjectId {
    let stored = common::stored(kind, body);
    let id = ObjectId::hash_stored(&stored);
    store.insert(id, stored);
    id
}

fn put_commit(store: &mut Store, c: &CommitObject) -> ObjectId {
    put(
        store,
        ObjectKind::Commit,
        &postcard::to_allocvec(c).unwrap(),
    )
}

fn put_tree(store: &mut Store, node: &TreeNode) -> ObjectId {
    put(
        store,
        ObjectKind::Tree,
        &postcard::to_allocvec(node).unwrap(),
    )
}

// Defect 2: a checkout's drift check can be driven in one call, and it fails when a
// recorded source moved (the Restore is #[must_use]; dropping it was silent).
#[test]
fn restore_verify_drives_the_drift_check() {
    let mut ws = Workspace::new();
    ws.write("/cache/page.html", b"<html>").unwrap();
    ws.record_read(ExternalRead {
        source: "https://example.invalid/page".into(),
        fingerprint: "etag-1".into(),
        revision: None,
        size: 6,
        cached_at: Some("/cache/page.html".into()),
    })
    .unwrap();
    let mut store = Store::new();
    let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());

    let mut other = Workspace::new();
    let restore = other
        .checkout(id, &store, CheckoutPolicy::default())
        .unwrap();
    assert!(restore.drift_check().is_some());
    restore.clone().verify(|_| Some("etag-1".into())).unwrap();
    let drifted = restore
        .clone()
        .verify(|_| Some("etag-2".into()))
        .unwrap_err();
    assert_eq!(drifted.drifted[0].source, "https://example.invalid/page");
    // Unanswered sources do not pass.
    assert!(restore.verify(|_| None).is_err());
}

// Defect 3: a merge naming another workspace's commit, with the store given by have_in.
#[test]
fn have_in_answers_parent_lookups() {
    let mut store = Store::new();
    let mut a = Workspace::new();
    a.write("/a", b"a").unwrap();
    let ca = persist(&mut store, a.commit(CommitOptions::new()).unwrap());

    let mut b = Workspace::new();
    b.write("/b", b"b").unwrap();
    let cb = persist(&mut store, b.commit(CommitOptions::new()).unwrap());
    let merge = b
        .commit(CommitOptions::new().parent(cb).parent(ca).have_in(&store))
        .unwrap();
    assert_eq!(merge.generation(), 2);

    // No source holds it: UnknownParent, naming it.
    let empty = Store::new();
    let mut c = Workspace::new();
    let e = c
        .commit(CommitOptions::new().parent(ca).have_in(&empty))
        .unwrap_err();
    assert!(
        matches!(e, CommitError::UnknownParent { id } if id == ca),
        "{e:?}"
    );
    // A parent source that lacks it passes to the have_in store.
    let child = c
        .commit(
            CommitOptions::new()
                .parent(ca)
                .parent_source(&empty)
                .have_in(&store),
        )
        .unwrap();
    assert_eq!(child.generation(), 2);
}

// Defect 4: generations above 2^53 - 1 are refused by decoders, and a parent at the
// maximum is refused at commit time instead of saturating.
#[test]
fn generation_bound_is_enforced() {
    let mut store = Store::new();
    let mut ws = Workspace::new();
    let root = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    let tree = SnapshotGraph::commit(root, &store).unwrap().tree;

    let at_max = put_commit(&mut store, &bare_commit(tree, vec![root], MAX_GENERATION));
    assert_eq!(
        SnapshotGraph::commit(at_max, &store).unwrap().generation,
        MAX_GENERATION
    );
    let e = Workspace::new()
        .commit(CommitOptions::new().parent(at_max).have_in(&store))
        .unwrap_err();
    assert!(
        matches!(e, CommitError::GenerationOverflow { id, generation } if id == at_max && generation == MAX_GENERATION),
        "{e:?}"
    );

    for generation in [MAX_GENERATION + 1, u64::MAX] {
        let over = put_commit(&mut store, &bare_commit(tree, vec![root], generation));
        assert!(matches!(
            SnapshotGraph::commit(over, &store),
            Err(GraphError::Object(ObjectError::Malformed { id, .. })) if id == over
        ));
        let e = Workspace::new()
            .commit(CommitOptions::new().parent(over).parent_source(&store))
            .unwrap_err();
        assert!(
            matches!(&e, CommitError::Parent(ObjectError::Malformed { id, .. }) if *id == over),
            "{e:?}"
        );
    }
}

// Defect 5: an id referenced as two kinds is refused by every walker, even when the
// second reference meets an id already seen.
#[test]
fn walkers_check_the_kind_of_every_reference() {
    let mut store = Store::new();
    let sub = put_tree(&mut store, &TreeNode::Leaf(vec![inline_file("x", b"x")]));
    let chunk_alias = Entry {
        name: "f".into(),
        mode: 0o644,
        node: EntryNode::File {
            size: 100,
            content: Content::Chunk(sub),
        },
    };
    let root_tree = put_tree(
        &mut store,
        &TreeNode::Leaf(vec![dir_entry("d", sub, 1, 1), chunk_alias]),
    );
    let commit = put_commit(&mut store, &bare_commit(root_tree, vec![], 1));
    let wrong_kind = |e: &ObjectError| matches!(e, ObjectError::WrongKind { id, .. } if *id == sub);
    match SnapshotGraph::reachable(commit, &store) {
        Err(GraphError::Object(e)) if wrong_kind(&e) => {}
        other => panic!("reachable: {other:?}"),
    }
    match CheckoutPlan::new(commit).missing(&store) {
        Err(GraphError::Object(e)) if wrong_kind(&e) => {}
        other => panic!("plan: {other:?}"),
    }
    assert!(Workspace::new()
        .checkout(commit, &store, CheckoutPolicy::default())
        .is_err());

    // A commit whose parent is its own root tree.
    let mut ws = Workspace::new();
    ws.write("/a", b"a").unwrap();
    let base = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    let tree = SnapshotGraph::commit(base, &store).unwrap().tree;
    let odd = put_commit(&mut store, &bare_commit(tree, vec![tree], 2));
    match SnapshotGraph::reachable_history(odd, &store) {
        Err(GraphError::Object(ObjectError::WrongKind { id, .. })) if id == tree => {}
        other => panic!("reachable_history: {other:?}"),
    }
}

// Defect 7: commits leave out files or state, with SnapshotOptions' meaning.
#[test]
fn commits_can_exclude_files_or_state() {
    let mut store = Store::new();
    let mut ws = Workspace::new();
    ws.write("/f.txt", b"file").unwrap();
    ws.set_state(b"state".to_vec());
    let no_files = persist(
        &mut store,
        ws.commit(CommitOptions::new().exclude_files(true)).unwrap(),
    );
    assert_eq!(ws.head(), Some(no_files));
    assert_eq!(
        ws.read("/f.txt").unwrap(),
        b"file",
        "the workspace keeps its files"
    );
    let no_state = persist(
        &mut store,
        ws.commit(CommitOptions::new().parent(no_files).exclude_state(true))
            .unwrap(),
    );
    assert_eq!(ws.state(), b"state", "the workspace keeps its state");

    let mut a = Workspace::new();
    let _ = a
        .checkout(no_files, &store, CheckoutPolicy::default())
        .unwrap();
    assert!(a.list("/").unwrap().is_empty());
    assert_eq!(a.state(), b"state");
    let mut b = Workspace::new();
    let _ = b
        .checkout(no_state, &store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(b.read("/f.txt").unwrap(), b"file");
    assert_eq!(b.state(), b"");
    assert_eq!(
        SnapshotGraph::commit(no_state, &store).unwrap().generation,
        2
    );

    // The same meaning as a snapshot's options: the commit inside such a snapshot is
    // the commit made with the same exclusions.
    let snap = ws
        .snapshot_with_options(SnapshotOptions {
            exclude_files: true,
            ..SnapshotOptions::default()
        })
        .unwrap();
    let root = snapgraph::pack::parse_packed(&snap, None).unwrap().root;
    let mut fresh = ws.clone();
    assert_eq!(
        fresh
            .commit(CommitOptions::new().exclude_files(true))
            .unwrap()
            .id(),
        root
    );
}

// Batched reads: checkout fetches a large file's chunks through get_many, a window
// at a time, not one get per chunk.
#[test]
fn checkout_reads_chunks_in_batches() {
    let mut ws = Workspace::new();
    ws.write("/big.bin", common::pseudo_random(4 << 20, 9))
        .unwrap();
    let mut store = Store::new();
    let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    let chunks = store
        .values()
        .filter(|b| b[0] == ObjectKind::Chunk.byte())
        .count();
    assert!(chunks > 100, "{chunks} chunks");
    let src = common::Counting::new(&store);
    let mut other = Workspace::new();
    other
        .checkout(id, &src, CheckoutPolicy::default())
        .unwrap()
        .verify(|_| None)
        .unwrap();
    assert_eq!(
        other.read("/big.bin").unwrap(),
        ws.read("/big.bin").unwrap()
    );
    // A window per 64 chunks, plus the commit's tree and manifest levels.
    let windows = chunks.div_ceil(64);
    assert!(
        (windows..windows + 4).contains(&src.get_batches.get()),
        "{} batches for {chunks} chunks",
        src.get_batches.get()
    );
    assert!(
        src.gets.get() < 10,
        "{} single gets for {chunks} chunks",
        src.gets.get()
    );
}
