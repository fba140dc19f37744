//! Repo: branches, commits, checkouts, forks, snapshots, and what a commit costs.

use std::collections::BTreeMap;

use snapgraph::{ObjectId, Workspace};
use snapgraph_store::{
    gc, verify, MemoryStore, RefStore, Repo, RepoCommitOptions, RepoError, StoreError,
};

fn files(ws: &mut Workspace, n: usize, salt: u8) {
    for i in 0..n {
        let body: Vec<u8> = (0..4096).map(|j| (i * 31 + j * 7) as u8 ^ salt).collect();
        ws.write(&format!("/d{}/f{i}.txt", i % 10), body).unwrap();
    }
}

#[test]
fn commit_checkout_fork_and_log() {
    let repo = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    files(&mut ws, 200, 0);
    let first = repo
        .commit(&mut ws, "main", RepoCommitOptions::message("first"))
        .unwrap();
    assert_eq!(first.previous, None);
    assert_eq!(repo.branch("main").unwrap(), Some(first.id));
    assert_eq!(first.objects_written, repo.store().len());

    // A turn: one file changes; only what changed is written.
    ws.write("/d3/f3.txt", b"changed".repeat(1000)).unwrap();
    let second = repo
        .commit(&mut ws, "main", RepoCommitOptions::message("second"))
        .unwrap();
    assert_eq!(second.previous, Some(first.id));
    assert!(
        second.objects_written <= 6,
        "wrote {}",
        second.objects_written
    );
    assert!(
        second.bytes_written < 12_000,
        "wrote {} bytes",
        second.bytes_written
    );

    let back = repo.checkout("main").unwrap();
    assert_eq!(
        back.read("/d3/f3.txt").unwrap(),
        &b"changed".repeat(1000)[..]
    );
    let old = repo.checkout(&first.id.to_hex()).unwrap();
    assert_ne!(
        old.read("/d3/f3.txt").unwrap(),
        back.read("/d3/f3.txt").unwrap()
    );

    let log = repo.log("main", 10).unwrap();
    let ids: Vec<ObjectId> = log.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, vec![second.id, first.id]);
    assert_eq!(
        log[0].1.meta.get("message").map(String::as_str),
        Some("second")
    );

    // Fork at the first commit and diverge.
    assert_eq!(
        repo.fork("experiment", &first.id.to_hex()).unwrap(),
        first.id
    );
    assert!(matches!(
        repo.fork("experiment", "main"),
        Err(RepoError::AlreadyExists { .. })
    ));
    let mut exp = repo.checkout("experiment").unwrap();
    exp.write("/new.txt", b"fork only").unwrap();
    let forked = repo
        .commit(&mut exp, "experiment", RepoCommitOptions::default())
        .unwrap();
    assert_eq!(forked.previous, Some(first.id));
    assert_eq!(repo.branch("main").unwrap(), Some(second.id));
    let names: Vec<String> = repo
        .branches()
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, vec!["experiment", "main"]);

    assert!(matches!(
        repo.checkout("nope"),
        Err(RepoError::UnknownRevision { .. })
    ));
    assert!(matches!(
        repo.checkout(&ObjectId::hash_stored(b"x").to_hex()),
        Err(RepoError::UnknownRevision { .. })
    ));
    assert!(verify(repo.store(), true).unwrap().is_clean());
}

#[test]
fn a_branch_that_moved_is_not_overwritten() {
    let repo = Repo::new(MemoryStore::new());
    let mut a = Workspace::new();
    a.write("/x", b"1").unwrap();
    repo.commit(&mut a, "main", RepoCommitOptions::default())
        .unwrap();
    let mut b = repo.checkout("main").unwrap();

    a.write("/x", b"2").unwrap();
    let from_a = repo
        .commit(&mut a, "main", RepoCommitOptions::default())
        .unwrap();
    b.write("/x", b"3").unwrap();
    match repo.commit(&mut b, "main", RepoCommitOptions::default()) {
        Err(RepoError::BranchMoved {
            branch, branch_tip, ..
        }) => {
            assert_eq!(branch, "heads/main");
            assert_eq!(branch_tip, Some(from_a.id));
        }
        other => panic!("expected BranchMoved, got {other:?}"),
    }
    assert_eq!(
        repo.branch("main").unwrap(),
        Some(from_a.id),
        "a's update kept"
    );
    // b's work is not lost: it can go to a new branch.
    let saved = repo.commit(&mut b, "b-work", RepoCommitOptions::default());
    assert!(saved.is_ok(), "{saved:?}");
    assert_eq!(repo.checkout("b-work").unwrap().read("/x").unwrap(), b"3");
}

#[test]
fn a_fresh_workspace_replaces_an_existing_branch_only_when_asked() {
    let repo = Repo::new(MemoryStore::new());
    let mut a = Workspace::new();
    a.write("/x", b"1").unwrap();
    let first = repo
        .commit(&mut a, "main", RepoCommitOptions::default())
        .unwrap();
    let mut fresh = Workspace::new();
    fresh.write("/y", b"2").unwrap();
    match repo.commit(&mut fresh, "main", RepoCommitOptions::default()) {
        Err(RepoError::BranchMoved {
            workspace: None,
            branch_tip,
            ..
        }) => {
            assert_eq!(branch_tip, Some(first.id))
        }
        other => panic!("expected BranchMoved, got {other:?}"),
    }
    assert_eq!(fresh.head(), None, "the workspace is unchanged");
    assert_eq!(repo.log("main", 5).unwrap().len(), 1);

    // Unless asked: `onto_tip` makes it the branch's next commit (an import).
    let options = RepoCommitOptions {
        onto_tip: true,
        ..RepoCommitOptions::default()
    };
    let second = repo.commit(&mut fresh, "main", options).unwrap();
    assert_eq!(second.previous, Some(first.id));
    assert_eq!(repo.log("main", 5).unwrap()[1].0, first.id);
    let now = repo.checkout("main").unwrap();
    assert!(
        !now.exists("/x") && now.exists("/y"),
        "the content is replaced"
    );
}

#[test]
fn snapshots_with_labels() {
    let repo = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    files(&mut ws, 20, 1);
    let c = repo
        .commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    let labels: BTreeMap<String, String> = [
        ("stage".to_string(), "eval".to_string()),
        ("score".to_string(), "0.93".to_string()),
    ]
    .into();
    let snap = repo.tag("before-refactor", "main", labels.clone()).unwrap();
    assert_eq!(snap.target, c.id);
    assert_eq!(snap.labels, labels);
    assert!(matches!(
        repo.tag("before-refactor", "main", BTreeMap::new()),
        Err(RepoError::AlreadyExists { .. })
    ));
    assert_eq!(repo.snapshots().unwrap(), vec![snap.clone()]);
    assert_eq!(repo.inspect("before-refactor").unwrap(), snap);

    // A snapshot restores exactly like its target.
    let restored = repo.checkout("before-refactor").unwrap();
    let original = repo.checkout("main").unwrap();
    assert_eq!(restored.walk(), original.walk());
    for (path, meta) in original.walk() {
        if meta.kind == snapgraph::EntryKind::File {
            assert_eq!(restored.read(&path).unwrap(), original.read(&path).unwrap());
        }
    }

    // A branch forked from the snapshot needs it: removal refused unless forced.
    repo.fork("from-snap", "before-refactor").unwrap();
    match repo.remove_snapshot("before-refactor", false) {
        Err(RepoError::SnapshotInUse { needed_by, .. }) => {
            assert_eq!(needed_by, vec!["heads/from-snap".to_string()])
        }
        other => panic!("expected SnapshotInUse, got {other:?}"),
    }
    repo.remove_snapshot("before-refactor", true).unwrap();
    assert!(repo.snapshots().unwrap().is_empty());
    // The forked branch still restores: its history kept the objects.
    gc(repo.store(), &[]).unwrap();
    assert!(repo.checkout("from-snap").is_ok());

    // An unused snapshot goes without force, and GC frees what only it held.
    let mut ws2 = repo.checkout("main").unwrap();
    ws2.write("/only-in-snapshot.bin", vec![9u8; 100_000])
        .unwrap();
    repo.commit(&mut ws2, "tmp", RepoCommitOptions::default())
        .unwrap();
    repo.tag("scratch", "tmp", BTreeMap::new()).unwrap();
    let tip = repo.branch("tmp").unwrap().unwrap();
    repo.delete_branch("tmp", tip).unwrap();
    let before = repo.store().len();
    repo.remove_snapshot("scratch", false).unwrap();
    let report = gc(repo.store(), &[]).unwrap();
    assert!(!report.deleted.is_empty());
    assert_eq!(repo.store().len(), before - report.deleted.len());
    assert!(verify(repo.store(), true).unwrap().is_clean());
}

#[test]
fn ref_names_are_checked() {
    let repo = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    ws.write("/x", b"1").unwrap();
    for bad in ["../escape", "a b", ""] {
        assert!(matches!(
            repo.commit(&mut ws, bad, RepoCommitOptions::default()),
            Err(RepoError::Store(StoreError::InvalidRefName { .. }))
        ));
    }
    assert!(repo.store().list_refs("").unwrap().is_empty());
}

#[test]
fn reindex_restores_snapshots_and_rescues_unreferenced_heads() {
    let repo = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    ws.write("/a", b"1").unwrap();
    let base = repo
        .commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    let snap = repo
        .tag(
            "v1",
            "main",
            BTreeMap::from([("k".to_string(), "v".to_string())]),
        )
        .unwrap();
    ws.write("/a", b"2").unwrap();
    let lost = repo
        .commit(&mut ws, "feature", RepoCommitOptions::default())
        .unwrap();
    // Refs lost: the snapshot's and the feature branch's.
    repo.store().delete_ref("tags/v1", snap.id, "oops").unwrap();
    repo.store()
        .delete_ref("heads/feature", lost.id, "oops")
        .unwrap();

    let report = repo.reindex().unwrap();
    assert_eq!(report.tags_restored, vec![("v1".to_string(), snap.id)]);
    assert_eq!(report.lost_found, vec![lost.id]);
    assert_eq!(repo.inspect("v1").unwrap().labels, snap.labels);
    assert!(repo.checkout(&format!("lost-found/{}", lost.id)).is_ok());
    assert!(
        gc(repo.store(), &[]).unwrap().deleted.is_empty(),
        "rescued, so kept"
    );
    assert_eq!(repo.log("main", 9).unwrap()[0].0, base.id);
    // Idempotent.
    let again = repo.reindex().unwrap();
    assert!(again.tags_restored.is_empty() && again.lost_found.is_empty());
}

#[test]
fn a_new_branch_is_a_root_commit_and_an_existing_name_is_refused() {
    let repo = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    files(&mut ws, 5, 1);
    let first = repo
        .commit(&mut ws, "main", RepoCommitOptions::message("first"))
        .unwrap();
    // A workspace with a head: the head is not its parent on the new branch.
    ws.write("/extra", b"x").unwrap();
    let c = repo
        .commit_new_branch(&mut ws, "fresh", RepoCommitOptions::message("import"))
        .unwrap();
    let log = repo.log("fresh", 10).unwrap();
    assert_eq!(log.len(), 1, "a root commit");
    assert!(log[0].1.parents.is_empty());
    assert_eq!(ws.head(), Some(c.id));
    assert_eq!(repo.branch("fresh").unwrap(), Some(c.id));

    let mut other = Workspace::new();
    other.write("/y", b"y").unwrap();
    match repo.commit_new_branch(&mut other, "main", RepoCommitOptions::default()) {
        Err(RepoError::AlreadyExists { name, id }) => {
            assert_eq!(name, "heads/main");
            assert_eq!(id, first.id);
        }
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    assert_eq!(repo.branch("main").unwrap(), Some(first.id));
    assert_eq!(other.head(), None, "the workspace is unchanged");
}

#[test]
fn log_reads_each_commit_once() {
    let repo = Repo::new(snapgraph_store::counting::CountingStore::new(
        MemoryStore::new(),
    ));
    let mut ws = Workspace::new();
    for i in 0..10u8 {
        files(&mut ws, 3, i);
        repo.commit(&mut ws, "main", RepoCommitOptions::default())
            .unwrap();
    }
    repo.store().take();
    let log = repo.log("main", usize::MAX).unwrap();
    assert_eq!(log.len(), 10);
    let counts = repo.store().take();
    assert_eq!(counts.get_ids, 10, "one read per commit: {counts:?}");
    assert_eq!(repo.log("main", 4).unwrap().len(), 4);
    assert!(repo.store().take().get_ids <= 5);
}

#[test]
fn commit_reports_its_write_phase_to_the_progress_hook() {
    use std::sync::{Arc, Mutex};
    let repo = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    // Enough objects for several batches: many files, one of them chunked.
    for i in 0..3000 {
        ws.write(
            &format!("/d{}/f{i}", i % 7),
            format!("file {i} {}", "x".repeat(100)).as_bytes(),
        )
        .unwrap();
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook = Arc::clone(&seen);
    let options =
        RepoCommitOptions::message("many").on_progress(move |p| hook.lock().unwrap().push(p));
    let c = repo.commit(&mut ws, "main", options).unwrap();
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 3, "a start, batches, an end: {seen:?}");
    let (first, last) = (seen[0], seen[seen.len() - 1]);
    assert_eq!((first.objects_done, first.bytes_done), (0, 0));
    assert_eq!(last.objects_done, last.objects_total);
    assert_eq!(last.bytes_done, last.bytes_total);
    assert_eq!(
        last.objects_total, c.objects_written,
        "all new to the store"
    );
    assert!(seen
        .windows(2)
        .all(|w| w[0].objects_done <= w[1].objects_done && w[0].bytes_done <= w[1].bytes_done));
    // A second commit of the same content writes nothing, and still ends at total.
    let mut again = repo.checkout("main").unwrap();
    again.write("/new", b"n").unwrap();
    let ends = Arc::new(Mutex::new(None));
    let e = Arc::clone(&ends);
    let c2 = repo
        .commit(
            &mut again,
            "main",
            RepoCommitOptions::message("one more")
                .on_progress(move |p| *e.lock().unwrap() = Some(p)),
        )
        .unwrap();
    let end = ends.lock().unwrap().unwrap();
    assert_eq!(end.objects_done, end.objects_total);
    assert!(c2.objects_written <= end.objects_total);
}
