//! The Rust baseline the Python benchmark (`benches/python_vs_rust.py`) measures in
//! the same process, so the two figures share one run of a shared machine. Private
//! (`snapgraph._snapgraph._BenchRust`): not part of the package's API.

use std::collections::HashMap;
use std::time::Instant;

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use snapgraph::{CheckoutPolicy, CommitOptions, ObjectId, Workspace};

use crate::errors::Failure;

/// The per-turn protocol of `benches/benches/common` in Rust, on paths and bytes
/// handed in from Python: `new` writes `files` and commits them (untimed); `turns`
/// times, for each (path, bytes), write + commit (parent, `have_in` the store) +
/// inserting the new objects into a `HashMap` store; `checkouts` times checkouts of
/// the head into a fresh workspace. Each call runs without the GIL, so the caller can
/// also wrap it in a CPU clock.
#[pyclass(name = "_BenchRust", module = "snapgraph")]
pub struct BenchRust {
    ws: Workspace,
    store: HashMap<ObjectId, Vec<u8>>,
    head: ObjectId,
}

#[pymethods]
impl BenchRust {
    #[new]
    fn new(py: Python<'_>, files: Vec<(String, PyBackedBytes)>) -> Result<Self, Failure> {
        py.detach(|| {
            let mut ws = Workspace::new();
            for (p, data) in &files {
                ws.write(p, &**data)?;
            }
            let first = ws.commit(CommitOptions::new())?;
            let head = first.id();
            let mut store = HashMap::new();
            store.extend(first.into_objects());
            Ok(Self { ws, store, head })
        })
    }

    /// Seconds of each turn.
    fn turns(
        &mut self,
        py: Python<'_>,
        edits: Vec<(String, PyBackedBytes)>,
    ) -> Result<Vec<f64>, Failure> {
        let Self { ws, store, head } = self;
        py.detach(|| {
            let mut per_turn = Vec::with_capacity(edits.len());
            for (p, data) in &edits {
                let t = Instant::now();
                ws.write(p, &**data)?;
                let c = ws.commit(CommitOptions::new().parent(*head).have_in(&*store))?;
                *head = c.id();
                store.extend(c.into_objects());
                per_turn.push(t.elapsed().as_secs_f64());
            }
            Ok(per_turn)
        })
    }

    /// Seconds of each of `n` checkouts of the head into a fresh workspace.
    fn checkouts(&self, py: Python<'_>, n: usize) -> Result<Vec<f64>, Failure> {
        let (store, head) = (&self.store, self.head);
        py.detach(|| {
            let mut per_checkout = Vec::with_capacity(n);
            for _ in 0..n {
                let t = Instant::now();
                let mut fresh = Workspace::new();
                let restore = fresh.checkout(head, store, CheckoutPolicy::default())?;
                per_checkout.push(t.elapsed().as_secs_f64());
                drop((restore, fresh));
            }
            Ok(per_checkout)
        })
    }
}
