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
//! - `gen_shared`: `gen`, then the data moved into an `Arc<[u8]>` (a copy)
//! - `write_shared_commit`: `gen_shared`, then `write_shared` (the workspace keeps the
//!   caller's `Arc<[u8]>`: no copy at write) and `commit`
//! - `store`: `write_commit`, then the commit's objects moved into a `HashMap`
//! - `checkout`: `store`, then `checkout` of the commit from the `HashMap` into a new
//!   workspace

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;

use fastcdc::v2020::{FastCDC, Normalization};
use snapgraph::{CheckoutPolicy, CommitOptions, ObjectId, Workspace};

#[path = "../benches/common/mod.rs"]
mod common;

const BYTES: usize = 64 << 20;
const PATH: &str = "/big.bin";

fn cut_points(data: &[u8]) -> Vec<(usize, usize)> {
    FastCDC::with_level(data, 4 << 10, 16 << 10, 64 << 10, Normalization::Level1)
        .map(|c| (c.offset, c.length))
        .collect()
}

fn commit(data: Vec<u8>, shared: Option<Arc<[u8]>>) -> (ObjectId, snapgraph::Commit) {
    let mut ws = Workspace::new();
    ws.set_parallelism(1);
    match shared {
        Some(bytes) => ws.write_shared(PATH, bytes).expect("write"),
        None => ws.write(PATH, &data).expect("write"),
    }
    let c = ws.commit(CommitOptions::new()).expect("commit");
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
                let mut ws = Workspace::new();
                ws.set_parallelism(1);
                let restore = ws
                    .checkout(id, &store, CheckoutPolicy::default())
                    .expect("checkout");
                black_box(&restore);
                black_box(&ws);
            }
            black_box(&store);
        }
        other => {
            eprintln!("unknown mode {other:?}: see the doc comment of benches/callgrind/main.rs");
            std::process::exit(2);
        }
    }
}
