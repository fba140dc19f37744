//! Round trips and time of a checkout of 2,000 files (the Core API v2 issue's
//! batched-reads figure): every call reaching the store is counted by
//! `CountingStore`, so a store with per-call latency pays `get_many` calls times its
//! round trip.
//!
//! ```text
//! eval "$(scripts/postgres)"
//! cargo run --release -p snapgraph-store --features postgres --example checkout_calls -- [URL]
//! ```
//! URL defaults to `$SNAPGRAPH_PG_URL` in a fresh schema (dropped at the end); any
//! `open` URL of an empty store works (`sqlite:PATH`, `memory:`).

use std::time::{Duration, Instant};

use snapgraph::Workspace;
use snapgraph_store::counting::CountingStore;
use snapgraph_store::{open, Repo, RepoCommitOptions};

const FILES: usize = 2_000;
const RUNS: usize = 5;

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

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let (url, schema) = match std::env::args().nth(1) {
        Some(url) => (url, None),
        None => {
            let base = std::env::var("SNAPGRAPH_PG_URL")
                .expect("give a store URL or set SNAPGRAPH_PG_URL (eval \"$(scripts/postgres)\")");
            let schema = format!("bench_checkout_{}", std::process::id());
            (
                format!("{base}?snapgraph_schema={schema}"),
                Some((base, schema)),
            )
        }
    };
    let repo = Repo::new(CountingStore::new(open(&url).unwrap()));
    let mut ws = Workspace::new();
    for f in 0..FILES {
        ws.write(&format!("/dir{:02}/file{f:05}.txt", f % 20), body(f))
            .unwrap();
    }
    repo.commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();

    for (what, shallow) in [("checkout", false), ("shallow checkout", true)] {
        let mut times = Vec::new();
        let mut counts = None;
        for _ in 0..RUNS {
            repo.store().take();
            let t = Instant::now();
            let ws = if shallow {
                repo.checkout_shallow("main").unwrap()
            } else {
                repo.checkout("main").unwrap()
            };
            times.push(t.elapsed());
            counts = Some(repo.store().take());
            assert!(ws.walk().len() >= FILES);
        }
        let c = counts.unwrap();
        println!(
            "{what} of {FILES} files from {}: {} store calls ({} get_many for {} ids, {} has_many, {} ref), median {:.1} ms of {RUNS}",
            url.split(['?', ':']).next().unwrap_or(""),
            c.calls(),
            c.get_calls,
            c.get_ids,
            c.has_calls,
            c.ref_calls,
            median(times).as_secs_f64() * 1e3
        );
    }

    drop(repo);
    if let Some((base, schema)) = schema {
        drop_schema(&base, &schema);
    }
}

fn drop_schema(base: &str, schema: &str) {
    let mut client = postgres::Client::connect(base, postgres::NoTls).unwrap();
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .unwrap();
}
