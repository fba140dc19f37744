//! The Rust baselines the Python benchmark (`benches/python_vs_rust.py`) measures in
//! the same process, so the two figures share one run of a shared machine. Private
//! (`snapgraph._snapgraph._bench_rust`): not part of the package's API.

use std::collections::HashMap;
use std::time::Instant;

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use snapgraph::{CheckoutPolicy, CommitOptions, ObjectId, Workspace};

use crate::errors::Failure;

/// The per-turn protocol in Rust, on the same files and contents as the Python side:
/// `files` (path, first content) are written and committed untimed, then each of
/// `turns` (path, new content) is timed as write + commit (parent, `have_in` the
/// store) + inserting the new objects into a `HashMap` store; then `checkouts`
/// checkouts of the final head into a fresh workspace are timed. Returns the seconds
/// of each turn and of each checkout.
#[pyfunction]
#[pyo3(name = "_bench_rust", signature = (files, turns, checkouts = 0))]
pub fn rust_turns(
    py: Python<'_>,
    files: Vec<(String, PyBackedBytes)>,
    turns: Vec<(String, PyBackedBytes)>,
    checkouts: usize,
) -> Result<(Vec<f64>, Vec<f64>), Failure> {
    py.detach(|| {
        let mut ws = Workspace::new();
        for (p, data) in &files {
            ws.write(p, &**data)?;
        }
        let first = ws.commit(CommitOptions::new())?;
        let mut head = first.id();
        let mut store: HashMap<ObjectId, Vec<u8>> = HashMap::new();
        store.extend(first.into_objects());
        let mut per_turn = Vec::with_capacity(turns.len());
        for (p, data) in &turns {
            let t = Instant::now();
            ws.write(p, &**data)?;
            let c = ws.commit(CommitOptions::new().parent(head).have_in(&store))?;
            head = c.id();
            store.extend(c.into_objects());
            per_turn.push(t.elapsed().as_secs_f64());
        }
        let mut per_checkout = Vec::with_capacity(checkouts);
        for _ in 0..checkouts {
            let t = Instant::now();
            let mut fresh = Workspace::new();
            let restore = fresh.checkout(head, &store, CheckoutPolicy::default())?;
            per_checkout.push(t.elapsed().as_secs_f64());
            drop((restore, fresh));
        }
        Ok((per_turn, per_checkout))
    })
}
