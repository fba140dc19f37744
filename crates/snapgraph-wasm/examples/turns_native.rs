//! The page's per-turn benchmark (`benchmark()` in `examples/browser/app.js`), natively:
//! the same protocol, so `scripts/browser-bench` can print the two side by side.
//!
//! 2,000 files of 4,000 random bytes in 20 directories, written and committed once;
//! then 1,000 warm-up turns (as many as the page, whose module Chromium is still
//! compiling with its optimizing tier before that) and 40 batches of 10 timed turns,
//! each turn rewriting one file (its content made beforehand), committing against the
//! store (`have_in`) and inserting the new objects. One thread, as in the browser.
//! Prints one JSON line.
//!
//! `cargo run --release -p snapgraph-wasm --example turns_native`
//!
//! With an argument N (at most 300) it runs N untimed turns after the first commit
//! instead, with their content made up front for 300 turns, and prints nothing: the
//! native half of `crates/snapgraph-wasm/bench/instructions.sh` (callgrind, 0 and N
//! turns; the difference over N is one turn).
//!
//! `turns_native cpu [ROUNDS = 15] [TURNS = 200] [WARMUP = 1000]`: the page's CPU-time
//! protocol (`examples/browser/bench-cpu.mjs`): WARMUP turns, then ROUNDS rounds of
//! TURNS turns, each timed by this thread's CPU time (Linux: `/proc/thread-self/schedstat`,
//! nanoseconds on a CPU); prints one JSON line of the per-turn median and minimum.

use std::collections::HashMap;
use std::time::Instant;

use snapgraph::{CommitOptions, ObjectId, Workspace};

const FILES: usize = 2000;
const DIRS: usize = 20;
const SIZE: usize = 4000;
const WARMUP: usize = 1000;
const BATCHES: usize = 40;
const BATCH: usize = 10;

fn path(i: usize) -> String {
    format!("/d{:04}/f{:06}.bin", i % DIRS, i)
}

/// xorshift64 bytes: content the commit cannot deduplicate, like the page's
/// `crypto.getRandomValues`.
fn random(state: &mut u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(SIZE + 8);
    while out.len() < SIZE {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(SIZE);
    out
}

/// Nanoseconds this thread has run on a CPU (0 where /proc/thread-self is missing).
fn thread_cpu_ns() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

fn main() -> Result<(), snapgraph::Error> {
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut ws = Workspace::new();
    ws.set_parallelism(1);
    let mut store: HashMap<ObjectId, Vec<u8>> = HashMap::new();
    let t0 = Instant::now();
    for i in 0..FILES {
        ws.write(&path(i), random(&mut rng))?;
    }
    let first = ws.commit(CommitOptions::new())?;
    store.extend(first.into_objects());
    let first_ms = t0.elapsed().as_secs_f64() * 1e3;

    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("cpu") {
        let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
        let (rounds, turns, warmup) = (arg(1, 15).max(1), arg(2, 200).max(1), arg(3, 1000));
        let mut edit = 0usize;
        let mut run = |ws: &mut Workspace, data: Vec<Vec<u8>>| -> Result<(), snapgraph::Error> {
            for d in data {
                ws.write(&path((edit * 7919) % FILES), d)?;
                edit += 1;
                let head = ws.head().into_iter();
                let c = ws.commit(CommitOptions::new().parents(head).have_in(&store))?;
                store.extend(c.into_objects());
            }
            Ok(())
        };
        let data = (0..warmup).map(|_| random(&mut rng)).collect();
        run(&mut ws, data)?;
        let mut per_turn = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let data = (0..turns).map(|_| random(&mut rng)).collect();
            let c0 = thread_cpu_ns();
            run(&mut ws, data)?;
            per_turn.push((thread_cpu_ns() - c0) / turns as f64 / 1e3);
        }
        per_turn.sort_by(f64::total_cmp);
        println!(
            "{{\"files\": {FILES}, \"rounds\": {rounds}, \"turns\": {turns}, \"warmup\": {warmup}, \"cpuMedianUs\": {:.0}, \"cpuMinUs\": {:.0}}}",
            per_turn[rounds / 2],
            per_turn[0],
        );
        return Ok(());
    }

    if let Some(n) = args.first() {
        let n: usize = n.parse().unwrap_or(0).min(300);
        let data: Vec<Vec<u8>> = (0..300).map(|_| random(&mut rng)).collect();
        for (k, d) in data.into_iter().take(n).enumerate() {
            ws.write(&path((k * 7919) % FILES), d)?;
            let head = ws.head().into_iter();
            let c = ws.commit(CommitOptions::new().parents(head).have_in(&store))?;
            store.extend(c.into_objects());
        }
        return Ok(());
    }

    let mut edit = 0usize;
    let mut turn = |ws: &mut Workspace, data: Vec<u8>| -> Result<(), snapgraph::Error> {
        let i = (edit * 7919) % FILES;
        edit += 1;
        ws.write(&path(i), data)?;
        let head = ws.head().into_iter();
        let c = ws.commit(CommitOptions::new().parents(head).have_in(&store))?;
        let objects = c.into_objects();
        store.extend(objects);
        Ok(())
    };
    let mut fresh = |n: usize| (0..n).map(|_| random(&mut rng)).collect::<Vec<_>>();
    for d in fresh(WARMUP) {
        turn(&mut ws, d)?;
    }
    let mut per_turn = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let data = fresh(BATCH);
        let s = Instant::now();
        for d in data {
            turn(&mut ws, d)?;
        }
        per_turn.push(s.elapsed().as_secs_f64() * 1e6 / BATCH as f64);
    }
    per_turn.sort_by(f64::total_cmp);
    let median = per_turn[per_turn.len() / 2];
    let mean = per_turn.iter().sum::<f64>() / per_turn.len() as f64;
    println!(
        "{{\"files\": {FILES}, \"turns\": {}, \"medianUs\": {median:.0}, \"meanUs\": {mean:.0}, \"minUs\": {:.0}, \"maxUs\": {:.0}, \"firstCommitMs\": {first_ms:.0}}}",
        BATCHES * BATCH,
        per_turn[0],
        per_turn[per_turn.len() - 1],
    );
    Ok(())
}
