//! Concurrent writers through `Repo`: threads committing to one branch (retrying on
//! `BranchMoved`) and to their own branches, on every adapter that can be shared.
//! No update may be lost, no object may be corrupt.

use std::sync::atomic::{AtomicUsize, Ordering};

use snapgraph::ObjectId;
use snapgraph_store::dir::DirStore;
#[cfg(feature = "postgres")]
use snapgraph_store::postgres::{PgOptions, PgStore};
use snapgraph_store::sqlite::SqliteStore;
use snapgraph_store::{verify, MemoryStore, Repo, RepoCommitOptions, RepoError, Store};

const THREADS: usize = 4;
const COMMITS: usize = 12;

fn writers(store: &dyn Store) {
    let repo = Repo::new(store);
    let retries = AtomicUsize::new(0);
    let published: Vec<Vec<ObjectId>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let repo = &repo;
                let retries = &retries;
                s.spawn(move || {
                    let mut mine = Vec::new();
                    let mut own = repo.checkout("main").unwrap_or_default();
                    for i in 0..COMMITS {
                        // Shared branch: read-modify-commit, redo on conflict.
                        loop {
                            let mut ws = match repo.branch("shared").unwrap() {
                                Some(_) => repo.checkout("shared").unwrap(),
                                None => snapgraph::Workspace::new(),
                            };
                            ws.write(&format!("/t{t}/n{i}"), format!("{t}:{i}"))
                                .unwrap();
                            match repo.commit(&mut ws, "shared", RepoCommitOptions::default()) {
                                Ok(c) => {
                                    mine.push(c.id);
                                    break;
                                }
                                Err(RepoError::BranchMoved { .. }) => {
                                    retries.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(e) => panic!("{e}"),
                            }
                        }
                        // Own branch: never conflicts.
                        own.write("/counter", i.to_string()).unwrap();
                        own.write(&format!("/blob{}", i % 3), vec![t as u8; 70_000 + i])
                            .unwrap();
                        repo.commit(
                            &mut own,
                            &format!("writer-{t}"),
                            RepoCommitOptions::default(),
                        )
                        .unwrap();
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let history: Vec<ObjectId> = repo
        .log("shared", usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        history.len(),
        THREADS * COMMITS,
        "every commit on the shared branch"
    );
    for id in published.iter().flatten() {
        assert!(history.contains(id), "commit {id} lost");
    }
    let last = repo.checkout("shared").unwrap();
    for t in 0..THREADS {
        for i in 0..COMMITS {
            assert_eq!(
                last.read(&format!("/t{t}/n{i}")).unwrap(),
                format!("{t}:{i}").as_bytes()
            );
        }
        assert_eq!(
            repo.log(&format!("writer-{t}"), usize::MAX).unwrap().len(),
            COMMITS
        );
    }
    let report = verify(store, true).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    eprintln!("{} conflicts retried", retries.load(Ordering::Relaxed));
}

#[test]
fn memory() {
    writers(&MemoryStore::new());
}

#[test]
fn sqlite() {
    let dir = tempfile::tempdir().unwrap();
    writers(&SqliteStore::open(dir.path().join("s.db")).unwrap());
}

#[test]
fn directory() {
    let dir = tempfile::tempdir().unwrap();
    writers(&DirStore::open(dir.path()).unwrap());
}

#[cfg(feature = "postgres")]
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn postgres() {
    let url = std::env::var("SNAPGRAPH_PG_URL").expect(
        "SNAPGRAPH_PG_URL is unset: run scripts/postgres (or scripts/test), or build the tests with SNAPGRAPH_SKIP_PG=1 to skip them",
    );
    let schema = format!("concurrency_{}", std::process::id());
    let store = PgStore::connect_with(
        &url,
        PgOptions {
            schema: Some(schema.clone()),
            ..PgOptions::default()
        },
    )
    .unwrap();
    writers(&store);
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .unwrap();
}
