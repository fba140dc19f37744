//! The memory adapter passes the conformance suite.

use snapgraph_store::{conformance, MemoryStore};

#[test]
fn memory_store_conforms() {
    conformance::run(&MemoryStore::new());
}

/// The memory store says it answers from memory, through every wrapper a commit sees
/// it in; a database does not. A `Repo` over it commits with one walk (no probe
/// batch) and the result reads back.
#[test]
fn memory_store_answers_in_memory_and_commits_through_a_repo() {
    use snapgraph::{ObjectId, ObjectSource, Workspace};
    use snapgraph_store::sqlite::SqliteStore;
    use snapgraph_store::{CallerVerifies, ObjectStore, Paired, Repo, RepoCommitOptions};
    use std::sync::Arc;

    fn source(s: impl ObjectSource) -> bool {
        s.answers_in_memory()
    }
    let mem = MemoryStore::new();
    assert!(ObjectStore::answers_in_memory(&mem));
    assert!(source(&mem) && source(CallerVerifies(&mem)) && source(Arc::new(MemoryStore::new())));
    assert!(ObjectStore::answers_in_memory(&Paired::new(
        MemoryStore::new(),
        MemoryStore::new()
    )));
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(dir.path().join("s.db")).unwrap();
    assert!(!ObjectStore::answers_in_memory(&sqlite) && !source(&sqlite));

    // The same two commits over the memory store (one walk) and over SQLite (the
    // probe and one batch): the same ids, the same objects written.
    let turns = |repo_commit: &mut dyn FnMut(&mut Workspace, &str) -> (ObjectId, usize)| {
        let mut ws = Workspace::new();
        for i in 0..200 {
            ws.write(&format!("/d{}/f{i}", i % 7), format!("file {i}").repeat(50))
                .unwrap();
        }
        let first = repo_commit(&mut ws, "first");
        ws.write("/d3/f3", b"changed").unwrap();
        let second = repo_commit(&mut ws, "second");
        (first, second)
    };
    let mem_repo = Repo::new(MemoryStore::new());
    let in_memory = turns(&mut |ws, _| {
        let c = mem_repo
            .commit(ws, "main", RepoCommitOptions::default())
            .unwrap();
        (c.id, c.objects_written)
    });
    let sqlite_repo = Repo::new(sqlite);
    let batched = turns(&mut |ws, _| {
        let c = sqlite_repo
            .commit(ws, "main", RepoCommitOptions::default())
            .unwrap();
        (c.id, c.objects_written)
    });
    assert_eq!(in_memory, batched);
    assert!(in_memory.1 .1 > 0 && in_memory.1 .1 < in_memory.0 .1);
    let back = mem_repo.checkout("main").unwrap();
    assert_eq!(back.read("/d3/f3").unwrap(), b"changed");
    assert_eq!(back.read("/d4/f4").unwrap(), "file 4".repeat(50).as_bytes());
}
