//! Per-operation workloads for instruction counts under callgrind (BENCHMARKS.md,
//! "Core API v2, second round"): `op_instructions MODE N` runs the setup of `MODE`,
//! then the operation `N` times, on one thread. The difference of two runs (`N` and
//! `0`) divided by `N` is the operation's instructions alone; counts do not depend on
//! the machine's load.
//!
//! Modes (2,000 files of 4,000 pseudo-random bytes in 20 directories):
//! - `commit`: per turn, one file rewritten, committed with `have_in` the store, the
//!   new objects inserted into the store (a `HashMap`);
//! - `checkout`: a full checkout of the commit from the `HashMap`;
//! - `diff1`, `diff1000`: a diff of two commits 1 or 1,000 changed files apart;
//! - `reachable`: `SnapshotGraph::reachable` of the commit (every object verified).
//!
//! ```sh
//! cargo build --profile bench -p snapgraph --example op_instructions
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/c.out \
//!     target/release/examples/op_instructions commit 200
//! ```

use std::collections::HashMap;
use std::hint::black_box;

use snapgraph::{CheckoutPolicy, CommitOptions, ObjectId, SnapshotGraph, Workspace};

fn bytes(n: usize, seed: &mut u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            (*seed >> 24) as u8
        })
        .collect()
}

fn path(i: usize) -> String {
    format!("/dir{:02}/file{i:04}.dat", i % 20)
}

fn main() -> Result<(), snapgraph::Error> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut store: HashMap<ObjectId, Vec<u8>> = HashMap::new();
    let mut ws = Workspace::new();
    ws.set_parallelism(1);
    for i in 0..2000 {
        ws.write(&path(i), bytes(4000, &mut seed))?;
    }
    let first = ws.commit(CommitOptions::new())?;
    let a = first.id();
    store.extend(first.into_objects());
    // Every mode makes the same edits up front, so runs differ by the operations only.
    let edits: Vec<Vec<u8>> = (0..1000).map(|_| bytes(4000, &mut seed)).collect();
    let b = {
        let mut other = ws.clone();
        for (i, data) in edits.iter().enumerate() {
            other.write(&path(i * 2), data)?;
        }
        let c = other.commit(CommitOptions::new().parent(a).have_in(&store))?;
        let id = c.id();
        store.extend(c.into_objects());
        id
    };
    let one = {
        let mut other = ws.clone();
        other.write(&path(7), &edits[0])?;
        let c = other.commit(CommitOptions::new().parent(a).have_in(&store))?;
        let id = c.id();
        store.extend(c.into_objects());
        id
    };
    let mut parent = a;
    for turn in 0..n {
        match mode.as_str() {
            "commit" => {
                ws.write(&path(turn * 7 % 2000), &edits[turn % 1000])?;
                let c = ws.commit(CommitOptions::new().parent(parent).have_in(&store))?;
                parent = c.id();
                store.extend(c.into_objects());
            }
            "checkout" => {
                let mut fresh = Workspace::new();
                fresh.set_parallelism(1);
                fresh
                    .checkout(a, &store, CheckoutPolicy::default())?
                    .verify(|_| None)?;
                black_box(&fresh);
            }
            "diff1" => {
                black_box(SnapshotGraph::diff(a, one, &store)?);
            }
            "diff1000" => {
                black_box(SnapshotGraph::diff(a, b, &store)?);
            }
            "reachable" => {
                black_box(SnapshotGraph::reachable(a, &store)?);
            }
            other => {
                eprintln!("unknown mode {other:?}: see the doc comment of this example");
                std::process::exit(2);
            }
        }
    }
    black_box(&store);
    Ok(())
}
