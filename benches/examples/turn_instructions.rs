//! The Rust side of the Node binding's instruction count
//! (`crates/snapgraph-node/bench/instructions.sh`): the per-turn loop of
//! `node_peer` on the shared `Turns` fixture, for `N` turns (at most 300; the edits
//! for 300 are made up front whatever `N` is, so runs differ by their turns only).
//!
//! `cargo build --profile bench -p snapgraph-benches --example turn_instructions`

#[path = "../benches/common/mod.rs"]
mod common;

use common::Turns;

fn main() {
    let turns: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(300)
        .min(300);
    let mut t = Turns::with_dirs(2_000, 20, 300 * 8);
    let edits: Vec<(usize, Vec<u8>)> = (0..300).map(|_| t.next_edit()).collect();
    for (idx, data) in edits.iter().take(turns) {
        std::hint::black_box(t.apply(*idx, data));
    }
}
