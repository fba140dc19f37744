//! Not a criterion bench: the Rust side of the Node binding's comparison
//! (`crates/snapgraph-node/bench/turns.mjs` runs it between its own rounds, so both
//! sides are measured in the same run on the same machine load).
//!
//! The protocol of `turns.mjs`, on the shared `Turns` fixture: 2,000 files of 4 KB in
//! 20 directories, `warmup` untimed turns (the same count as the Node side's), one
//! file rewritten per turn and committed with the store as
//! `have_in`, the new objects inserted into the store (timed: write + commit +
//! insert); then checkouts of the head into fresh workspaces (timed: `Workspace::new`
//! + `checkout`). Prints one JSON line of medians.
//!
//! `cargo bench -p snapgraph-benches --bench node_peer -- [turns] [checkouts] [warmup = 1000]`

mod common;

use std::time::Instant;

use common::Turns;
use snapgraph::{CheckoutPolicy, Workspace};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let turns = args.first().copied().unwrap_or(200).max(1);
    let checkouts = args.get(1).copied().unwrap_or(10).max(1);
    let warmup = args.get(2).copied().unwrap_or(1000);

    let mut t = Turns::with_dirs(2_000, 20, (warmup + turns) * 8);
    for _ in 0..warmup {
        let (idx, data) = t.next_edit();
        t.apply(idx, &data);
    }
    let mut commit_us = Vec::with_capacity(turns);
    for _ in 0..turns {
        let (idx, data) = t.next_edit();
        let start = Instant::now();
        std::hint::black_box(t.apply(idx, &data));
        commit_us.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let mut checkout_ms = Vec::with_capacity(checkouts);
    for _ in 0..checkouts {
        let start = Instant::now();
        let mut ws = Workspace::new();
        let restore = ws
            .checkout(t.head, &t.store, CheckoutPolicy::default())
            .expect("checkout");
        checkout_ms.push(start.elapsed().as_secs_f64() * 1e3);
        // No external reads were recorded: the restore has no drift check to drive.
        let _ = std::hint::black_box((restore, ws));
    }
    println!(
        "{{\"commit_turn_us\": {:.2}, \"checkout_ms\": {:.3}, \"turns\": {turns}, \"checkouts\": {checkouts}}}",
        median(commit_us),
        median(checkout_ms)
    );
}
