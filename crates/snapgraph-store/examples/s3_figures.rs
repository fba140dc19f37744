//! Figures of issue #17 for the S3 store beside SQLite and PostgreSQL, in one run:
//! first commit of a big file, per-turn commit at 2,000 files, checkout of the 2,000
//! files and of the big file (fresh clients, `Repo::checkout`), sync of 50 turns from
//! a SQLite source, GC after 50 garbage turns, bytes at rest.
//!
//! ```text
//! eval "$(scripts/postgres)"; eval "$(scripts/s3)"
//! cargo run -p snapgraph-store --features s3,postgres --example s3_figures -- [BIG_MIB]
//! ```
//! `BIG_MIB` (default 128) scales the big file; the issue asks for 1,024. The dev
//! profile builds dependencies at opt-level 3 (the root Cargo.toml), so `--release`
//! is not needed to measure the store's requests and is a build of its own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use snapgraph::Workspace;
use snapgraph_store::counting::CountingStore;
use snapgraph_store::postgres::{PgOptions, PgStore};
use snapgraph_store::s3::{S3Location, S3Requests, S3Store};
use snapgraph_store::sqlite::SqliteStore;
use snapgraph_store::{gc, sync, Paired, Repo, RepoCommitOptions, Store};

const FILES: usize = 2_000;
const TURNS: usize = 20;
const NEW: usize = 50;

fn body(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn file(f: usize) -> String {
    format!("/dir{:02}/file{f:05}.txt", f % 20)
}

fn turn(ws: &mut Workspace, t: usize) {
    let f = (t * 7_919) % FILES;
    ws.write(&file(f), body((FILES + t) as u64, 4_000)).unwrap();
}

fn files_workspace() -> Workspace {
    let mut ws = Workspace::new();
    for f in 0..FILES {
        ws.write(&file(f), body(f as u64, 4_000)).unwrap();
    }
    ws
}

/// A fresh client of a store, and its S3 store when it has one.
type Client = (Box<dyn Store>, Option<Arc<S3Store>>);

/// One store under measurement: how to open a fresh client of it, and its S3
/// requests (if any).
struct Target {
    name: &'static str,
    open: Box<dyn Fn() -> Client>,
}

fn s3_location(prefix: &str) -> S3Location {
    let url = std::env::var("SNAPGRAPH_S3_URL").expect("SNAPGRAPH_S3_URL (scripts/s3)");
    let mut l = S3Location::parse(&url).unwrap();
    l.prefix = prefix.to_string();
    l
}

fn pg(schema: &str) -> PgStore {
    let url = std::env::var("SNAPGRAPH_PG_URL").expect("SNAPGRAPH_PG_URL (scripts/postgres)");
    let options = PgOptions {
        schema: Some(schema.to_string()),
        ..Default::default()
    };
    PgStore::connect_with(&url, options).unwrap()
}

fn show(r: Option<S3Requests>) -> String {
    match r {
        None => String::new(),
        Some(r) => format!(
            "; S3: {} requests ({} GET, {} PUT, {} HEAD, {} LIST, {} DELETE), {:.1} KiB sent, {:.1} KiB received, {} round trips",
            r.total(),
            r.gets,
            r.puts,
            r.heads,
            r.lists,
            r.deletes,
            r.bytes_sent as f64 / 1024.0,
            r.bytes_received as f64 / 1024.0,
            r.round_trips
        ),
    }
}

fn line(
    what: &str,
    time: Duration,
    counts: snapgraph_store::counting::Counts,
    s3: Option<S3Requests>,
) {
    println!(
        "  {what}: {time:.2?}; {} store calls ({} get_many, {} has_many, {} put_many, {} ref){}",
        counts.calls(),
        counts.get_calls,
        counts.has_calls,
        counts.put_calls,
        counts.ref_calls,
        show(s3)
    );
}

fn main() {
    let big_mib: usize = std::env::args()
        .nth(1)
        .map_or(128, |a| a.parse().expect("BIG_MIB"));
    let run = format!("fig{}", std::process::id());
    let tmp = tempfile_dir(&run);
    let sqlite_path = tmp.join("target.db");

    // The sync source: the 2,000 files, then 50 more turns after a first full sync.
    let source = Repo::new(SqliteStore::open(tmp.join("source.db")).unwrap());
    let mut src_ws = files_workspace();
    source
        .commit(&mut src_ws, "main", RepoCommitOptions::message("base"))
        .unwrap();
    source.fork("base", "main").unwrap();
    for i in 0..NEW {
        turn(&mut src_ws, i);
        source
            .commit(&mut src_ws, "main", RepoCommitOptions::default())
            .unwrap();
    }

    let sp = sqlite_path.clone();
    let (s3a, s3b, pga, pgb) = (
        format!("{run}/paired"),
        format!("{run}/bucket"),
        format!("{run}_pg"),
        format!("{run}_pgrefs"),
    );
    let targets = vec![
        Target {
            name: "SQLite",
            open: Box::new(move || (Box::new(SqliteStore::open(&sp).unwrap()), None)),
        },
        Target {
            name: "PostgreSQL",
            open: Box::new(move || (Box::new(pg(&pga)), None)),
        },
        Target {
            name: "S3 objects + PostgreSQL refs",
            open: Box::new(move || {
                let s3 = Arc::new(S3Store::open(&s3_location(&s3a), Default::default()).unwrap());
                (Box::new(Paired::new(s3.clone(), pg(&pgb))), Some(s3))
            }),
        },
        Target {
            name: "S3 objects and refs in the bucket",
            open: Box::new(move || {
                let s3 = Arc::new(S3Store::open(&s3_location(&s3b), Default::default()).unwrap());
                (Box::new(s3.clone()), Some(s3))
            }),
        },
    ];

    println!("big file {big_mib} MiB (scaled from 1 GiB), {FILES} files of 4 KB, {TURNS} turns");
    let big = body(7, big_mib << 20);
    for t in &targets {
        println!("{}", t.name);
        let (store, s3) = (t.open)();
        let s3req = |s3: &Option<Arc<S3Store>>| s3.as_ref().map(|s| s.take_requests());
        let repo = Repo::new(CountingStore::new(store));
        s3req(&s3);

        let mut ws = Workspace::new();
        ws.write("/big.bin", &big[..]).unwrap();
        let t0 = Instant::now();
        repo.commit(&mut ws, "big", RepoCommitOptions::message("big"))
            .unwrap();
        line(
            &format!("first commit of {big_mib} MiB"),
            t0.elapsed(),
            repo.store().take(),
            s3req(&s3),
        );

        let mut ws = files_workspace();
        let t0 = Instant::now();
        repo.commit(&mut ws, "files", RepoCommitOptions::message("files"))
            .unwrap();
        line(
            "first commit of 2,000 files",
            t0.elapsed(),
            repo.store().take(),
            s3req(&s3),
        );

        let t0 = Instant::now();
        for i in 0..TURNS {
            turn(&mut ws, 50_000 + i);
            repo.commit(&mut ws, "files", RepoCommitOptions::default())
                .unwrap();
        }
        let mut c = repo.store().take();
        let per = t0.elapsed() / TURNS as u32;
        let mut r = s3req(&s3);
        if let Some(r) = &r {
            println!(
                "  {TURNS} turns in all: {} S3 requests ({} GET, {} PUT, {} HEAD, {} LIST), {} round trips",
                r.total(),
                r.gets,
                r.puts,
                r.heads,
                r.lists,
                r.round_trips
            );
        }
        c.get_calls /= TURNS as u64;
        c.has_calls /= TURNS as u64;
        c.put_calls /= TURNS as u64;
        c.ref_calls /= TURNS as u64;
        c.other_object_calls /= TURNS as u64;
        if let Some(r) = &mut r {
            let n = TURNS as u64;
            r.gets /= n;
            r.puts /= n;
            r.heads /= n;
            r.lists /= n;
            r.deletes /= n;
            r.bytes_sent /= n;
            r.bytes_received /= n;
            r.round_trips /= n;
        }
        line("per-turn commit at 2,000 files (mean of 20)", per, c, r);

        for branch in ["files", "big"] {
            let (fresh, fresh_s3) = (t.open)();
            let reader = Repo::new(CountingStore::new(fresh));
            // Not the checkout's: opening reads the layout marker (one GET).
            s3req(&fresh_s3);
            let t0 = Instant::now();
            // Repo::checkout on every store: one batched get_many per tree level
            // (on S3, concurrent ranged GETs: one round trip per level).
            let out = reader.checkout(branch).unwrap();
            let took = t0.elapsed();
            let probe = if branch == "big" {
                "/big.bin"
            } else {
                "/dir00/file00000.txt"
            };
            assert!(out.read(probe).is_ok());
            line(
                &format!("checkout of {branch} (fresh client)"),
                took,
                reader.store().take(),
                s3req(&fresh_s3),
            );
            println!(
                "    graph depth: {} levels (target: at most depth + 2 round trips)",
                depth(&reader, branch)
            );
            s3req(&fresh_s3);
        }

        // Sync: the source's base first (not measured), then its 50 turns since.
        sync(source.store(), repo.store(), "heads/base").unwrap();
        repo.store().take();
        s3req(&s3);
        let t0 = Instant::now();
        let report = sync(source.store(), repo.store(), "heads/main").unwrap();
        let took = t0.elapsed();
        println!(
            "  sync of {NEW} turns: {} objects, {:.1} KiB, {} queries over {} levels",
            report.objects,
            report.bytes as f64 / 1024.0,
            report.queries,
            report.levels
        );
        line("  (sync)", took, repo.store().take(), s3req(&s3));

        if let Some(s3) = &s3 {
            let u = s3.usage().unwrap();
            println!(
                "  at rest: {:.2} MiB in {} packs, {} indexes",
                u.bytes as f64 / (1 << 20) as f64,
                u.packs,
                u.indexes
            );
        }

        let mut side = repo.checkout("files").unwrap();
        for i in 0..NEW {
            turn(&mut side, 90_000 + i);
            repo.commit(&mut side, "side", RepoCommitOptions::default())
                .unwrap();
        }
        let tip = repo.branch("side").unwrap().unwrap();
        repo.delete_branch("side", tip).unwrap();
        repo.store().take();
        s3req(&s3);
        let t0 = Instant::now();
        let report = gc(repo.store(), &[]).unwrap();
        let took = t0.elapsed();
        println!(
            "  gc after {NEW} garbage turns: deleted {}, kept {}",
            report.deleted.len(),
            report.kept
        );
        line("  (gc)", took, repo.store().take(), s3req(&s3));
        if let Some(s3) = &s3 {
            let u = s3.usage().unwrap();
            println!(
                "  at rest after gc: {:.2} MiB in {} packs",
                u.bytes as f64 / (1 << 20) as f64,
                u.packs
            );
        }
        drop(repo);
        if t.name == "SQLite" {
            // Closing the last connection folds the WAL into the database file.
            let size = std::fs::metadata(&sqlite_path).map_or(0, |m| m.len());
            println!(
                "  at rest after gc (SQLite file): {:.2} MiB",
                size as f64 / (1 << 20) as f64
            );
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Levels of `branch`'s object graph (commit, tree levels, manifest levels, chunks):
/// the batched reads of one `CheckoutPlan` round over a store holding it all (one
/// `get_many` per level of objects, one `has_many` for the chunks; fewer than 4,096
/// ids per level here).
fn depth(repo: &Repo<CountingStore<Box<dyn Store>>>, branch: &str) -> u64 {
    let tip = repo.branch(branch).unwrap().unwrap();
    repo.store().take();
    let missing = snapgraph::graph::CheckoutPlan::new(tip)
        .missing(repo.store())
        .unwrap();
    assert!(missing.is_empty());
    let c = repo.store().take();
    c.get_calls + u64::from(c.has_calls > 0)
}

fn tempfile_dir(run: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("snapgraph-{run}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
