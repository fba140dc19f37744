//! Figures for the store issue: sync of 50 new turns over a 1,000-turn history of
//! 2,000 files, and garbage collection of that history.
//!
//! ```text
//! cargo run --release -p snapgraph-store --example store_figures -- [SRC_URL DST_URL]
//! ```
//! Defaults: two SQLite files in a temporary directory. Any `open` URL works
//! (`dir:PATH`, `postgres://…`, `memory:`); the stores must start empty.

use std::time::Instant;

use snapgraph::Workspace;
use snapgraph_store::{gc, open, sync, Repo, RepoCommitOptions, Store};

const FILES: usize = 2_000;
const HISTORY: usize = 1_000;
const NEW: usize = 50;

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

fn turn(ws: &mut Workspace, t: usize) {
    let f = (t * 7_919) % FILES;
    ws.write(
        &format!("/dir{:02}/file{f:05}.txt", f % 20),
        body(FILES + t),
    )
    .unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let tmp = std::env::temp_dir().join(format!("snapgraph-figures-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let src_url = args
        .first()
        .cloned()
        .unwrap_or(format!("sqlite:{}", tmp.join("src.db").display()));
    let dst_url = args
        .get(1)
        .cloned()
        .unwrap_or(format!("sqlite:{}", tmp.join("dst.db").display()));
    let src = Repo::new(open(&src_url).unwrap());
    let dst: Box<dyn Store> = open(&dst_url).unwrap();

    let mut ws = Workspace::new();
    for f in 0..FILES {
        ws.write(&format!("/dir{:02}/file{f:05}.txt", f % 20), body(f))
            .unwrap();
    }
    let t0 = Instant::now();
    src.commit(&mut ws, "main", RepoCommitOptions::message("base"))
        .unwrap();
    for t in 1..HISTORY {
        turn(&mut ws, t);
        src.commit(&mut ws, "main", RepoCommitOptions::default())
            .unwrap();
    }
    let build = t0.elapsed();

    let t0 = Instant::now();
    let full = sync(src.store(), &dst, "heads/main").unwrap();
    let full_time = t0.elapsed();

    let mut new_objects = 0;
    for t in HISTORY..HISTORY + NEW {
        turn(&mut ws, t);
        new_objects += src
            .commit(&mut ws, "main", RepoCommitOptions::default())
            .unwrap()
            .objects_written;
    }
    let t0 = Instant::now();
    let inc = sync(src.store(), &dst, "heads/main").unwrap();
    let inc_time = t0.elapsed();
    assert_eq!(inc.objects, new_objects);

    // Garbage: a branch of 50 more turns, deleted.
    let mut side = src.checkout("main").unwrap();
    for t in 0..NEW {
        turn(&mut side, 10 * HISTORY + t);
        src.commit(&mut side, "side", RepoCommitOptions::default())
            .unwrap();
    }
    let tip = src.branch("side").unwrap().unwrap();
    src.delete_branch("side", tip).unwrap();
    let t0 = Instant::now();
    let report = gc(src.store(), &[]).unwrap();
    let gc_time = t0.elapsed();

    println!("source {src_url}\ndestination {dst_url}");
    println!(
        "history: {HISTORY} turns of {FILES} files built in {:.2?} ({:.2?}/commit)",
        build,
        build / HISTORY as u32
    );
    println!(
        "full sync: {} objects, {:.1} MiB in {:.2?}; {} queries over {} levels",
        full.objects,
        full.bytes as f64 / (1 << 20) as f64,
        full_time,
        full.queries,
        full.levels
    );
    println!(
        "sync of {NEW} new turns: {} objects, {:.1} KiB in {:.2?}; {} objects examined, {} queries over {} levels",
        inc.objects,
        inc.bytes as f64 / 1024.0,
        inc_time,
        inc.examined,
        inc.queries,
        inc.levels
    );
    println!(
        "gc of the {}-turn history (+{NEW} garbage turns): {:.2?}, kept {}, deleted {}",
        HISTORY + NEW,
        gc_time,
        report.kept,
        report.deleted.len()
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
