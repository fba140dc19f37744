//! Not a criterion bench: the figures criterion cannot give.
//!
//! - Bytes and objects each commit emits (criterion measures only time), and how many
//!   questions the commit asks the `have_in` store.
//! - Per-turn commit time under one fixed protocol for every workspace size (the same
//!   number of turns from the same starting point), because criterion picks its
//!   iteration count from the speed of the code, so a faster bench runs more turns and
//!   ends with a larger store and a longer history than a slower one.
//!
//! Run with `cargo bench -p snapgraph-benches --bench figures`.

mod common;

use std::time::{Duration, Instant};

use common::{summarize, BigFile, Turns};

/// Turns timed per workspace in the fixed protocol.
const TIMED_TURNS: usize = 10_000;

fn main() {
    // `cargo bench` passes `--bench`; a filter argument that does not name this target
    // skips it, so `cargo bench -p snapgraph-benches -- commit_turn` stays fast.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if !filters.is_empty() && !filters.iter().any(|f| "figures".contains(f.as_str())) {
        return;
    }
    println!("== snapgraph figures ==");
    for (n, dirs, turns) in [
        (2_000usize, 20usize, TIMED_TURNS),
        (100_000, 20, TIMED_TURNS),
        // As many files per directory as N=2,000 in 20 (100): isolates the cost of a
        // larger workspace and store from the cost of larger directories.
        (100_000, 1_000, TIMED_TURNS),
        // All files in one directory: the cost of a large directory.
        (100_000, 1, 2_000),
    ] {
        let label = format!("N={n} in {dirs} dir(s)");
        let mut t = Turns::with_dirs(n, dirs, 0);
        println!(
            "{label}: write all {:?}, first full commit {:?} (single runs): {} bytes, {} objects",
            t.write_time, t.first_commit_time, t.first_commit.bytes, t.first_commit.objects
        );
        let probe = t.probe(200);
        println!(
            "{}",
            summarize(&format!("{label}, one 4 KB file edited per commit"), &probe)
        );
        println!("{}", timed_turns(&label, &mut t, turns));
        let many = t.edit_many(1_000);
        println!(
            "{label}: 1,000 files edited in one commit: {} bytes, {} objects",
            many.bytes, many.objects
        );
    }
    let mut f = BigFile::new();
    println!(
        "64 MiB file: first full commit {:?} (single run, {} thread(s)): {} bytes, {} objects",
        f.first_commit_time,
        f.ws.parallelism(),
        f.first_commit.bytes,
        f.first_commit.objects
    );
    let probe: Vec<_> = (0..50).map(|_| f.probe()).collect();
    let over = probe.iter().filter(|e| e.bytes >= 64 << 10).count();
    println!(
        "{}",
        summarize("16-byte edit in the 64 MiB file, per commit", &probe)
    );
    println!(
        "16-byte edits emitting 64 KiB or more: {over} of {}",
        probe.len()
    );
    for e in probe.iter().filter(|e| e.bytes >= 64 << 10) {
        println!(
            "  one of them: {} bytes = {} of chunks + {} of manifest/tree/commit, {} objects",
            e.bytes,
            e.chunk_bytes,
            e.bytes - e.chunk_bytes,
            e.objects
        );
    }
}

/// Times `turns` turns (write + commit with `have_in` + store insert, as in the
/// criterion bench) and summarizes them.
fn timed_turns(label: &str, t: &mut Turns, turns: usize) -> String {
    let mut times: Vec<Duration> = Vec::with_capacity(turns);
    for _ in 0..turns {
        let (idx, data) = t.next_edit();
        let start = Instant::now();
        std::hint::black_box(t.apply(idx, &data));
        times.push(start.elapsed());
    }
    let tenth = turns / 10;
    let mean = |d: &[Duration]| d.iter().sum::<Duration>() / d.len() as u32;
    let (first, last) = (mean(&times[..tenth]), mean(&times[turns - tenth..]));
    let all = mean(&times);
    times.sort_unstable();
    let q = |f: f64| times[((turns as f64) * f) as usize];
    format!(
        "{label}: {turns} timed turns (write + commit + store insert): p10 {:?} / median {:?} / \
         p90 {:?} / mean {:?}; mean of the first 10% {:?}, of the last 10% {:?}; store now \
         {} objects",
        q(0.1),
        q(0.5),
        q(0.9),
        all,
        first,
        last,
        t.store.len()
    )
}
