//! An agent-style session: commit after every turn, fork, diff and rewind.
//!
//! `cargo run --release -p snapgraph --example turns`

use std::collections::HashMap;
use std::time::Instant;

use snapgraph::{CheckoutPolicy, CommitOptions, ObjectId, SnapshotGraph, Workspace};

fn main() -> Result<(), snapgraph::Error> {
    let mut store: HashMap<ObjectId, Vec<u8>> = HashMap::new();
    let mut ws = Workspace::new();

    // A workspace of 2,000 files of 4 KB in 20 directories.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut bytes = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 24) as u8
            })
            .collect()
    };
    for i in 0..2000 {
        ws.write(&format!("/dir{:02}/file{i:04}.dat", i % 20), bytes(4000))?;
    }
    let t = Instant::now();
    let first = ws.commit(CommitOptions::new().meta("turn", "0"))?;
    println!(
        "turn 0: commit {} ({} objects, {} bytes) in {:?}",
        first.id(),
        first.object_count(),
        first.stored_bytes(),
        t.elapsed()
    );
    let mut head = first.id();
    store.extend(first.into_objects());

    // Ten turns, each editing one file and the interpreter state.
    for turn in 1..=10 {
        ws.write(
            &format!("/dir{:02}/file{:04}.dat", turn % 20, turn * 7),
            bytes(4000),
        )?;
        ws.set_state(format!("turn={turn}").into_bytes());
        let t = Instant::now();
        let c = ws.commit(
            CommitOptions::new()
                .parent(head)
                .have_in(&store)
                .meta("turn", turn.to_string()),
        )?;
        let elapsed = t.elapsed();
        println!(
            "turn {turn}: commit {} ({} new objects, {} new bytes) in {elapsed:?}",
            c.id(),
            c.object_count(),
            c.stored_bytes()
        );
        head = c.id();
        let objects = c.into_objects();
        store.extend(objects);
    }

    let history = SnapshotGraph::ancestry(head, &store, 100)?;
    println!("history: {} commits, newest {}", history.len(), history[0]);

    // Fork from turn 3 and diff against the tip.
    let turn3 = history[history.len() - 4];
    let mut fork = Workspace::new();
    let t = Instant::now();
    let _ = fork.checkout(turn3, &store, CheckoutPolicy::default())?;
    println!("checkout of turn 3 in {:?}", t.elapsed());
    let diff = SnapshotGraph::diff(turn3, head, &store)?;
    println!(
        "turn 3 -> tip: {} modified, {} added, {} removed, state changed: {}",
        diff.files_modified.len(),
        diff.files_added.len(),
        diff.files_removed.len(),
        diff.state_changed
    );
    println!("fork state: {}", String::from_utf8_lossy(fork.state()));
    println!("store: {} objects", store.len());
    Ok(())
}
