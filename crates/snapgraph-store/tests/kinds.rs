//! Every walker of the store crate (the closure walk of GC and verify, and sync)
//! checks the kind of every reference, including references to ids it has already
//! seen: an id referenced as two kinds is a typed problem or error naming it. And
//! verify reports what checkout refuses of a directory (a non-canonical cut).

use snapgraph::object::tree::Content;
use snapgraph::{CommitObject, CommitOptions, ObjectId, ObjectKind, SnapshotGraph, Workspace};
use snapgraph_store::{
    gc, sync, verify, MemoryStore, ObjectStore, RefStore, SyncError, WalkProblem,
};

/// A store holding one ordinary commit; returns it decoded.
fn store_with_commit(text: &[u8]) -> (MemoryStore, ObjectId, CommitObject) {
    let store = MemoryStore::new();
    let mut ws = Workspace::new();
    ws.write("/a.txt", text).unwrap();
    ws.write("/d/b.txt", b"below").unwrap();
    let commit = ws.commit(CommitOptions::new()).unwrap();
    let batch: Vec<(ObjectId, &[u8])> = commit.objects().iter().map(|(i, b)| (*i, b)).collect();
    store.put_many(&batch).unwrap();
    let decoded = SnapshotGraph::commit(commit.id(), &store).unwrap();
    (store, commit.id(), decoded)
}

/// Puts `bad` and points `heads/bad` at it.
fn publish(store: &MemoryStore, bad: &CommitObject) -> ObjectId {
    let (id, stored) = bad.to_stored();
    store.put_many(&[(id, &stored)]).unwrap();
    store
        .compare_and_swap_ref("heads/bad", None, id, "hostile")
        .unwrap();
    id
}

fn conflict_on(problems: &[WalkProblem], want: ObjectId) -> bool {
    problems
        .iter()
        .any(|p| matches!(p, WalkProblem::KindConflict { id, .. } if *id == want))
}

#[test]
fn a_commit_whose_parent_is_its_own_root_tree() {
    let (store, good_id, good) = store_with_commit(b"one");
    let bad = CommitObject {
        parents: vec![good.tree],
        generation: good.generation + 1,
        ..good.clone()
    };
    let bad_id = publish(&store, &bad);

    let report = verify(&store, false).unwrap();
    assert!(
        conflict_on(&report.problems, good.tree),
        "verify names the tree: {:?}",
        report.problems
    );
    assert_eq!(report.broken_refs, vec!["heads/bad".to_string()]);
    let shown = report
        .problems
        .iter()
        .find(|p| p.id() == good.tree)
        .unwrap()
        .to_string();
    assert!(shown.contains(&good.tree.to_string()), "{shown}");

    let collected = gc(&store, &[]).unwrap();
    assert!(conflict_on(&collected.problems, good.tree));
    assert_eq!(
        collected.deleted,
        vec![good_id],
        "only the unreferenced commit goes"
    );

    let dst = MemoryStore::new();
    match sync(&store, &dst, "heads/bad") {
        Err(SyncError::KindConflict {
            id, referenced_by, ..
        }) => {
            assert_eq!(id, good.tree);
            assert_eq!(referenced_by, bad_id);
        }
        other => panic!("expected a kind conflict, got {other:?}"),
    }
    assert!(dst.is_empty(), "nothing sent");
    assert_eq!(dst.get_ref("heads/bad").unwrap(), None);
}

/// The second reference is to an id the destination already holds: discovery does
/// not descend there, but still checks the kind.
#[test]
fn sync_checks_references_to_ids_the_destination_holds() {
    let (store, good_id, good) = store_with_commit(b"one");
    let dst = MemoryStore::new();
    store
        .compare_and_swap_ref("heads/good", None, good_id, "good")
        .unwrap();
    sync(&store, &dst, "heads/good").unwrap();
    let bad = CommitObject {
        parents: vec![good_id, good.tree],
        generation: good.generation + 1,
        ..good.clone()
    };
    publish(&store, &bad);
    assert!(matches!(
        sync(&store, &dst, "heads/bad"),
        Err(SyncError::KindConflict { id, .. }) if id == good.tree
    ));
}

#[test]
fn a_tree_id_used_as_a_chunk_of_the_same_commit() {
    let (store, _, good) = store_with_commit(b"two");
    let bad = CommitObject {
        state: Content::Chunk(good.tree),
        state_size: 1_000,
        ..good.clone()
    };
    publish(&store, &bad);
    let report = verify(&store, false).unwrap();
    let found = report.problems.iter().find(|p| p.id() == good.tree);
    assert!(
        matches!(
            found,
            Some(WalkProblem::KindConflict {
                first: ObjectKind::Tree,
                then: ObjectKind::Chunk,
                ..
            })
        ),
        "{:?}",
        report.problems
    );
    assert!(matches!(
        sync(&store, &MemoryStore::new(), "heads/bad"),
        Err(SyncError::KindConflict { id, first: ObjectKind::Tree, then: ObjectKind::Chunk, .. })
            if id == good.tree
    ));
}

/// A tree referenced only as a chunk: walks do not read chunks, so verify checks
/// the kind when it reads data and sync when it fetches the chunk.
#[test]
fn a_tree_referenced_only_as_a_chunk() {
    let (store, _, good) = store_with_commit(b"three");
    let (other, _, other_commit) = store_with_commit(b"another tree");
    let tree = other_commit.tree;
    let mut ids = vec![tree];
    other
        .for_each_id(&mut |id| {
            ids.push(id);
            Ok(())
        })
        .unwrap();
    let got = other.get_many(&ids).unwrap();
    let objects: Vec<(ObjectId, Vec<u8>)> =
        ids.iter().zip(got).map(|(i, b)| (*i, b.unwrap())).collect();
    let batch: Vec<(ObjectId, &[u8])> = objects.iter().map(|(i, b)| (*i, &b[..])).collect();
    store.put_many(&batch).unwrap();
    let bad = CommitObject {
        state: Content::Chunk(tree),
        state_size: 1_000,
        ..good.clone()
    };
    publish(&store, &bad);

    let shallow = verify(&store, false).unwrap();
    assert!(!shallow.problems.iter().any(|p| p.id() == tree));
    let deep = verify(&store, true).unwrap();
    assert!(
        deep.problems.iter().any(|p| matches!(p,
            WalkProblem::Invalid { id, reason } if *id == tree && reason.contains("referenced as a chunk"))),
        "{:?}",
        deep.problems
    );
    let dst = MemoryStore::new();
    assert!(matches!(
        sync(&store, &dst, "heads/bad"),
        Err(SyncError::Invalid { id, .. }) if id == tree
    ));
    assert_eq!(dst.get_ref("heads/bad").unwrap(), None);
}

/// Stores `node` as a tree object and returns its id.
fn put_tree(store: &MemoryStore, node: &snapgraph::object::tree::TreeNode) -> ObjectId {
    let mut stored = vec![ObjectKind::Tree.byte(), snapgraph::FORMAT_VERSION];
    stored.extend(postcard::to_allocvec(node).unwrap());
    let id = ObjectId::hash_stored(&stored);
    store.put_many(&[(id, &stored)]).unwrap();
    id
}

// Verify's walk is its own, but what checkout refuses of a directory (here: a
// well-formed tree not cut as the format requires) it reports, naming the tree.
#[test]
fn verify_reports_a_non_canonical_tree() {
    use snapgraph::object::tree::{Entry, EntryNode, TreeChild, TreeNode};
    let (store, _, good) = store_with_commit(b"one");
    let file = |name: &str, data: &[u8]| Entry {
        name: name.into(),
        mode: 0o644,
        node: EntryNode::File {
            size: data.len() as u64,
            content: Content::Inline(data.to_vec()),
        },
    };
    // Two entries the format keeps in one leaf, cut into two.
    let la = put_tree(&store, &TreeNode::Leaf(vec![file("a", b"1")]));
    let lb = put_tree(&store, &TreeNode::Leaf(vec![file("b", b"2")]));
    let child = |first: &str, tree| TreeChild {
        first: first.into(),
        tree,
        files: 1,
        bytes: 1,
    };
    let split = put_tree(
        &store,
        &TreeNode::Internal {
            level: 1,
            children: vec![child("a", la), child("b", lb)],
        },
    );
    assert!(verify(&store, false).unwrap().is_clean());
    let bad = CommitObject {
        tree: split,
        parents: vec![],
        generation: 1,
        ..good
    };
    publish(&store, &bad);
    let report = verify(&store, false).unwrap();
    assert!(
        report.problems.iter().any(|p| matches!(
            p,
            WalkProblem::Invalid { id, reason } if *id == split && reason.contains("non-canonical tree")
        )),
        "{:?}",
        report.problems
    );
    assert_eq!(report.broken_refs, vec!["heads/bad".to_string()]);
    // Checkout refuses the same tree.
    let mut ws = Workspace::new();
    assert!(ws
        .checkout(bad.to_stored().0, &store, snapgraph::CheckoutPolicy::Force)
        .is_err());
}
