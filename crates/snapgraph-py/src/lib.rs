//! Python bindings for snapgraph: the native module `snapgraph._snapgraph`, which the
//! `snapgraph` package (`python/snapgraph/__init__.py`) re-exports.
//!
//! Thin by design: each class and function wraps one call of the core
//! (`crates/snapgraph`) or the store crate (`crates/snapgraph-store`), converting ids
//! to and from 64-character hex strings, byte buffers to and from `bytes`, and errors,
//! once, into the exception hierarchy of `src/errors.rs`. Heavy calls release the GIL;
//! reads from a Python mapping take it back for each `__getitem__`.
//!
//! `unsafe` is denied in this crate's own code; PyO3's macros generate some (and
//! mark it allowed), which is why this crate does not take the workspace's
//! `forbid(unsafe_code)`.

#![deny(unsafe_code)]

use pyo3::prelude::*;

mod bench;
mod errors;
mod graph;
mod source;
mod store;
mod workspace;

/// The native module of the `snapgraph` package: import `snapgraph`, which re-exports
/// everything here.
#[pymodule]
fn _snapgraph(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<workspace::PyWorkspace>()?;
    m.add_class::<workspace::Commit>()?;
    m.add_class::<workspace::Restore>()?;
    m.add_class::<workspace::DriftCheck>()?;
    m.add_class::<workspace::Metadata>()?;
    m.add_class::<workspace::DirEntry>()?;
    m.add_class::<workspace::PyExternalRead>()?;
    m.add_class::<workspace::Capabilities>()?;
    m.add_class::<graph::PySnapshotGraph>()?;
    m.add_class::<graph::CheckoutPlan>()?;
    m.add_class::<graph::Diff>()?;
    m.add_class::<graph::Change>()?;
    m.add_class::<graph::ChangeEntry>()?;
    m.add_class::<graph::CommitObject>()?;
    m.add_class::<store::PyStore>()?;
    m.add_class::<store::PyRepo>()?;
    m.add_class::<store::Committed>()?;
    m.add_class::<store::SnapshotInfo>()?;
    m.add_class::<store::SyncReport>()?;
    m.add_class::<store::GcReport>()?;
    m.add_class::<store::VerifyReport>()?;
    m.add_class::<store::Problem>()?;
    m.add_function(wrap_pyfunction!(store::open, m)?)?;
    m.add_function(wrap_pyfunction!(store::sync, m)?)?;
    m.add_function(wrap_pyfunction!(store::gc, m)?)?;
    m.add_function(wrap_pyfunction!(store::verify, m)?)?;
    m.add_class::<bench::BenchRust>()?;
    m.add("FORMAT_VERSION", snapgraph::FORMAT_VERSION)?;
    Ok(())
}
