//! Remote requests of a sandbox starting from a PostgreSQL history through a
//! `CachingStore` (SQLite cache): a shallow checkout plus a few file reads against a
//! full checkout, cold and warm cache. Every call reaching the remote is counted by
//! `CountingStore`, so the figures do not depend on the machine's load.
//!
//! ```text
//! eval "$(scripts/postgres)"
//! cargo run --release -p snapgraph-store --features postgres --example cache_calls
//! ```
//! The history lives in a fresh schema of `$SNAPGRAPH_PG_URL`, dropped at the end.

use std::time::{Duration, Instant};

use snapgraph::Workspace;
use snapgraph_store::cache::CachingStore;
use snapgraph_store::counting::{CountingStore, Counts};
use snapgraph_store::postgres::{PgOptions, PgStore};
use snapgraph_store::sqlite::SqliteStore;
use snapgraph_store::{Repo, RepoCommitOptions};

const FILES: usize = 2_000;
const READS: usize = 5;
const RUNS: usize = 3;

fn body(seed: usize) -> Vec<u8> {
    let mut x = (seed as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..4_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn path(f: usize) -> String {
    format!("/dir{:02}/file{f:05}.txt", f % 20)
}

fn main() {
    let base = std::env::var("SNAPGRAPH_PG_URL")
        .expect("set SNAPGRAPH_PG_URL (eval \"$(scripts/postgres)\")");
    let schema = format!("bench_cache_{}", std::process::id());
    let remote = || {
        let options = PgOptions {
            schema: Some(schema.clone()),
            ..PgOptions::default()
        };
        CountingStore::new(PgStore::connect_with(&base, options).unwrap())
    };
    {
        let repo = Repo::new(remote());
        let mut ws = Workspace::new();
        for f in 0..FILES {
            ws.write(&path(f), body(f)).unwrap();
        }
        repo.commit(&mut ws, "main", RepoCommitOptions::default())
            .unwrap();
    }
    let reads: Vec<String> = (0..READS).map(|i| path(i * 397 % FILES)).collect();

    // Each scenario: a fresh remote connection; `warm` reuses the cache file of the
    // previous cold run.
    let mut rows = Vec::new();
    for what in [
        "full, no cache",
        "full, cold cache",
        "shallow + reads, cold cache",
        "shallow + reads, warm cache",
    ] {
        let mut times = Vec::new();
        let mut counts = Counts::default();
        for _ in 0..RUNS {
            let dir = tempfile::tempdir().unwrap();
            let cache = || SqliteStore::open(dir.path().join("cache.db")).unwrap();
            let sandbox = |cached: bool, shallow: bool| -> (Counts, Duration) {
                let t = Instant::now();
                let c = if cached {
                    let repo = Repo::new(CachingStore::new(cache(), remote()));
                    let mut ws = if shallow {
                        repo.checkout_shallow("main").unwrap()
                    } else {
                        repo.checkout("main").unwrap()
                    };
                    for p in &reads {
                        ws.load_content(p, repo.store()).unwrap();
                        assert_eq!(ws.read(p).unwrap().len(), 4_000);
                    }
                    repo.store().remote().counts()
                } else {
                    let repo = Repo::new(remote());
                    let ws = repo.checkout("main").unwrap();
                    assert!(ws.walk().len() >= FILES);
                    repo.store().counts()
                };
                (c, t.elapsed())
            };
            let (c, t) = match what {
                "full, no cache" => sandbox(false, false),
                "full, cold cache" => sandbox(true, false),
                "shallow + reads, cold cache" => sandbox(true, true),
                _ => {
                    sandbox(true, true);
                    sandbox(true, true)
                }
            };
            counts = c;
            times.push(t);
        }
        times.sort();
        rows.push((what, counts, times[RUNS / 2]));
    }
    println!("{FILES} files of 4,000 bytes (one chunk each), {READS} files read after a shallow checkout");
    println!("| sandbox | remote calls | get_many calls / ids | bytes fetched | ref calls | median ms of {RUNS} |");
    println!("|---|---|---|---|---|---|");
    for (what, c, t) in rows {
        println!(
            "| {what} | {} | {} / {} | {} | {} | {:.0} |",
            c.calls(),
            c.get_calls,
            c.get_ids,
            c.get_bytes,
            c.ref_calls,
            t.as_secs_f64() * 1e3
        );
    }

    let mut client = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .unwrap();
}
