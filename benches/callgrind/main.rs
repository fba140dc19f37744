//! The workloads `benches/callgrind/run.sh` counts instructions of under callgrind.
//!
//! Each mode does a prefix of the same work on 64 MiB of pseudo-random bytes, on one
//! thread; the script subtracts one mode's count from another's, so each row is the
//! instructions of one step alone (data generation, the commit before a checkout and
//! process start-up cancel out). Run `callgrind MODE`; modes:
//!
//! - `gen`: generate the data
//! - `cut`: `gen`, then FastCDC 2020 cut points (4/16/64 KiB) into a list
//! - `cut_hash`: `cut`, then `blake3::hash` of each chunk (the cut-and-hash ceiling
//!   minus `gen`; the BLAKE3 ceiling minus `cut`)
//! - `write_commit`: `gen`, then `Workspace::write` of one 64 MiB file and `commit`
//! - `write_owned_commit`: `gen`, then `Workspace::write_owned` (the `Vec` taken over,
//!   no copy) and `commit`
//! - `gen_shared`: `gen`, then the data moved into an `Arc<[u8]>` (a copy)
//! - `write_shared_commit`: `gen_shared`, then `write_shared` (the workspace keeps the
//!   caller's `Arc<[u8]>`: no copy at write) and `commit`
//! - `store`: `write_commit`, then the commit's objects moved into a `HashMap`
//! - `checkout`: `store`, then `checkout` of the commit from the `HashMap` into a new
//!   workspace
//! - `checkout_owned`: `store`, then the same `checkout` from a source that hands each
//!   object's buffer over (`Cow::Owned`, as a database's reads do), draining the map
//!
//! Two-thread modes (run with `--separate-threads=yes`: each thread's count apart; a
//! row's time is bounded below by its busiest thread's):
//!
//! - `hash2`: `cut`, then `blake3::hash` of each chunk on two threads (the chunks
//!   split in two runs of about equal bytes, the second on a spawned thread): the
//!   two-thread BLAKE3 ceiling
//! - `write_commit2`, `write_owned_commit2`: `gen`, then `write` (a copy) or
//!   `write_owned` (the `Vec` taken over) and `commit`, `set_parallelism(2)`
//! - `write_shared_commit2`: `gen_shared`, then `write_shared` and `commit` on two
//!   threads
//! - `checkout2`, `checkout_owned2`: `store`, then `checkout` on two threads from the
//!   `HashMap` or from the owning source
//!
//! Modes of the figures that must not get worse (each `*_setup` mode builds the same
//! fixture as the mode it is subtracted from, and stops before the measured step):
//!
//! - `turns_setup` / `turns`: 2,000 files of 4 KB in 20 directories committed into a
//!   `HashMap`, then `TURNS` turns of rewriting one file and committing against it
//! - `small_setup` / `small_checkout`: that commit, then its checkout into a new
//!   workspace (2,000 single-chunk files)
//! - `diff_setup` / `diff`: two commits of the 2,000 files apart by 1,000 changes, then
//!   `SnapshotGraph::diff` of them (and of two commits apart by one change)
//! - `edit_setup` / `edit16`: one 64 MiB file committed, then `EDITS` times a
//!   16-byte edit written with `write_shared` (the `edit_setup` mode writes the same
//!   bytes without committing) and committed against the store

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;

use fastcdc::v2020::{FastCDC, Normalization};
use snapgraph::{
    BoxError, CheckoutPolicy, CommitOptions, ObjectId, ObjectSource, SnapshotGraph, Workspace,
};

#[path = "../benches/common/mod.rs"]
mod common;

const BYTES: usize = 64 << 20;
const PATH: &str = "/big.bin";
/// Turns counted by the `turns` mode.
const TURNS: usize = 100;
/// 16-byte edits counted by the `edit16` mode.
const EDITS: usize = 4;

/// A source that gives each object's buffer away (`Cow::Owned`), as a store that
/// decodes what it reads does; each object can be read once.
struct Owning(RefCell<HashMap<ObjectId, Vec<u8>>>);

impl ObjectSource for Owning {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        Ok(self.0.borrow_mut().remove(id).map(Cow::Owned))
    }
}

/// Checks `id` out of `source` into a new workspace on one thread.
fn checkout_one<S: ObjectSource>(id: ObjectId, source: &S) {
    checkout_on(id, source, 1)
}

/// Checks `id` out of `source` into a new workspace on `threads` threads.
fn checkout_on<S: ObjectSource>(id: ObjectId, source: &S, threads: usize) {
    let mut ws = Workspace::new();
    ws.set_parallelism(threads);
    let restore = ws
        .checkout(id, source, CheckoutPolicy::default())
        .expect("checkout");
    black_box((&restore, &ws));
}

/// The fixtures of the figures that must not get worse; `measure` says whether to run
/// the measured step after building them.
fn unchanged_figures(mode: &str, measure: bool) {
    match mode {
        "turns" => {
            let mut t = common::Turns::with_dirs(2_000, 20, TURNS * 8);
            t.ws.set_parallelism(1);
            let edits: Vec<(usize, Vec<u8>)> = (0..TURNS).map(|_| t.next_edit()).collect();
            if measure {
                for (idx, data) in &edits {
                    black_box(t.apply(*idx, data));
                }
            }
            black_box(&t.store);
        }
        "small_checkout" => {
            let t = common::Turns::new(2_000, 0);
            if measure {
                checkout_one(t.head, &t.store);
            }
            black_box(&t.store);
        }
        "diff" => {
            let mut t = common::Turns::new(2_000, 0);
            t.ws.set_parallelism(1);
            let c0 = t.head;
            t.edit_many(1);
            let c1 = t.head;
            t.edit_many(1_000);
            let c2 = t.head;
            if measure {
                let d1 = SnapshotGraph::diff(c0, c1, &t.store).expect("diff");
                let d1000 = SnapshotGraph::diff(c1, c2, &t.store).expect("diff");
                assert_eq!(d1.files_modified.len() + d1000.files_modified.len(), 1_001);
                black_box((d1, d1000));
            }
            black_box(&t.store);
        }
        "edit16" => {
            let mut f = common::BigFile::new();
            f.ws.set_parallelism(1);
            for _ in 0..EDITS {
                f.edit16();
                let data = f.shared();
                f.ws.write_shared(common::BIG_PATH, data).expect("write");
                if measure {
                    black_box(f.commit());
                }
            }
            black_box(&f.store);
        }
        _ => unreachable!("a mode of unchanged_figures"),
    }
}

fn cut_points(data: &[u8]) -> Vec<(usize, usize)> {
    FastCDC::with_level(data, 4 << 10, 16 << 10, 64 << 10, Normalization::Level1)
        .map(|c| (c.offset, c.length))
        .collect()
}

/// How `commit_on` hands the file to the workspace.
enum Write {
    /// `write` of borrowed bytes (a copy).
    Copy(Vec<u8>),
    /// `write_owned` (the buffer taken over).
    Owned(Vec<u8>),
    /// `write_shared`.
    Shared(Arc<[u8]>),
}

fn commit(data: Vec<u8>, shared: Option<Arc<[u8]>>) -> (ObjectId, snapgraph::Commit) {
    match shared {
        Some(bytes) => commit_on(Write::Shared(bytes), 1),
        None => commit_on(Write::Copy(data), 1),
    }
}

fn commit_on(data: Write, threads: usize) -> (ObjectId, snapgraph::Commit) {
    let mut ws = Workspace::new();
    ws.set_parallelism(threads);
    // The caller's copy of borrowed bytes is dropped with the rest after the commit.
    let mut kept = Vec::new();
    match data {
        Write::Copy(bytes) => {
            ws.write(PATH, &bytes).expect("write");
            kept = bytes;
        }
        Write::Owned(bytes) => ws.write_owned(PATH, bytes).expect("write"),
        Write::Shared(bytes) => ws.write_shared(PATH, bytes).expect("write"),
    }
    let c = ws.commit(CommitOptions::new()).expect("commit");
    black_box(&kept);
    // The workspace (and its copy of the bytes) is dropped in every mode after this.
    (c.id(), c)
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let data = common::pseudo_random(BYTES, 0xCA11);
    match mode.as_str() {
        "gen" => {
            black_box(&data);
        }
        "cut" | "cut_hash" => {
            let cuts = cut_points(black_box(&data));
            if mode == "cut_hash" {
                for &(at, len) in &cuts {
                    black_box(blake3::hash(&data[at..at + len]));
                }
            }
            black_box(cuts);
        }
        "hash2" => {
            let cuts = cut_points(black_box(&data));
            let total: usize = cuts.iter().map(|&(_, len)| len).sum();
            let half = cuts
                .iter()
                .scan(0, |acc, &(_, len)| {
                    *acc += len;
                    Some(*acc)
                })
                .position(|acc| acc >= total / 2)
                .map_or(cuts.len(), |i| i + 1);
            let (a, b) = cuts.split_at(half);
            let hash = |part: &[(usize, usize)]| {
                for &(at, len) in part {
                    black_box(blake3::hash(&data[at..at + len]));
                }
            };
            std::thread::scope(|scope| {
                let other = scope.spawn(|| hash(b));
                hash(a);
                other.join().expect("hashing thread");
            });
            black_box(cuts);
        }
        "write_commit2" => {
            let _kept = black_box(commit_on(Write::Copy(data), 2));
        }
        "write_owned_commit2" => {
            let _kept = black_box(commit_on(Write::Owned(data), 2));
        }
        "write_shared_commit2" => {
            let shared = Arc::<[u8]>::from(data);
            let _kept = black_box(commit_on(Write::Shared(shared), 2));
        }
        "checkout2" => {
            let (id, c) = commit(data, None);
            let store: HashMap<ObjectId, Vec<u8>> = c.into_objects().into_iter().collect();
            checkout_on(id, &store, 2);
            black_box(&store);
        }
        "checkout_owned2" => {
            let (id, c) = commit(data, None);
            let store = Owning(RefCell::new(c.into_objects().into_iter().collect()));
            checkout_on(id, &store, 2);
            black_box(&store);
        }
        "write_owned_commit" => {
            let _kept = black_box(commit_on(Write::Owned(data), 1));
        }
        "gen_shared" => {
            black_box(Arc::<[u8]>::from(data));
        }
        "write_commit" => {
            let _kept = black_box(commit(data, None));
        }
        "write_shared_commit" => {
            let shared = Arc::<[u8]>::from(data);
            let _kept = black_box(commit(Vec::new(), Some(shared)));
        }
        "store" | "checkout" => {
            let (id, c) = commit(data, None);
            let store: HashMap<ObjectId, Vec<u8>> = c.into_objects().into_iter().collect();
            if mode == "checkout" {
                checkout_one(id, &store);
            }
            black_box(&store);
        }
        "checkout_owned" => {
            let (id, c) = commit(data, None);
            let store = Owning(RefCell::new(c.into_objects().into_iter().collect()));
            checkout_one(id, &store);
            black_box(&store);
        }
        "turns" | "small_checkout" | "diff" | "edit16" => unchanged_figures(&mode, true),
        "turns_setup" | "small_setup" | "diff_setup" | "edit_setup" => {
            let measured = match mode.as_str() {
                "small_setup" => "small_checkout",
                "edit_setup" => "edit16",
                other => other.trim_end_matches("_setup"),
            };
            unchanged_figures(measured, false)
        }
        other => {
            eprintln!("unknown mode {other:?}: see the doc comment of benches/callgrind/main.rs");
            std::process::exit(2);
        }
    }
}
