//! `Paired`: one backend's objects with another's refs, and the conformance suite's
//! two parts run on their own.

use snapgraph::Workspace;
use snapgraph_store::{
    conformance, gc, verify, MemoryStore, ObjectStore, Paired, RefStore, Repo, RepoCommitOptions,
};

#[test]
fn each_part_conforms_alone() {
    conformance::run_objects(&MemoryStore::new());
    conformance::run_refs(&MemoryStore::new());
}

#[test]
fn memory_objects_with_memory_refs_conform() {
    conformance::run(&Paired::new(MemoryStore::new(), MemoryStore::new()));
}

#[cfg(feature = "sqlite")]
#[test]
fn memory_objects_with_sqlite_refs_conform() {
    let refs = snapgraph_store::sqlite::SqliteStore::in_memory().unwrap();
    conformance::run(&Paired::new(MemoryStore::new(), refs));
}

#[cfg(feature = "dir")]
#[test]
fn memory_objects_with_directory_refs_conform() {
    let dir = tempfile::tempdir().unwrap();
    let refs = snapgraph_store::dir::DirStore::open(dir.path().join("refs")).unwrap();
    conformance::run(&Paired::new(MemoryStore::new(), refs));
}

/// Objects go only to the object backend, refs only to the ref backend, and a
/// repository over the pair commits, checks out, collects and verifies.
#[test]
fn a_repo_over_a_pair_keeps_each_part_in_its_backend() {
    let repo = Repo::new(Paired::new(MemoryStore::new(), MemoryStore::new()));
    let mut ws = Workspace::new();
    ws.write("/a.txt", b"one").unwrap();
    let first = repo
        .commit(&mut ws, "main", RepoCommitOptions::message("one"))
        .unwrap();
    ws.write("/a.txt", b"two").unwrap();
    let second = repo
        .commit(&mut ws, "main", RepoCommitOptions::message("two"))
        .unwrap();
    let pair = repo.store();
    assert!(pair.refs.is_empty(), "no object in the ref backend");
    assert!(!pair.objects.is_empty());
    assert!(
        pair.objects.list_refs("").unwrap().is_empty(),
        "no ref in the object backend"
    );
    assert_eq!(pair.refs.get_ref("heads/main").unwrap(), Some(second.id));
    assert!(pair
        .objects
        .has_many(&[first.id, second.id])
        .unwrap()
        .is_empty());

    let back = repo.checkout(&first.id.to_hex()).unwrap();
    assert_eq!(back.read("/a.txt").unwrap(), b"one");
    repo.delete_branch("main", second.id).unwrap();
    let report = gc(pair, &[]).unwrap();
    assert!(
        !report.deleted.is_empty(),
        "garbage in the object backend is collected"
    );
    assert!(pair.objects.is_empty());
    assert!(verify(pair, true).unwrap().is_clean());
}
