//! Stores for [snapgraph](snapgraph): the storage the core leaves to its caller.
//!
//! - [`Store`]: the trait a backend implements: batched, fallible object access,
//!   refs changed only by compare-and-swap (atomically in batches) and a reflog.
//! - Adapters: [`MemoryStore`], and more (see the modules).
//! - [`codec`]: objects at rest, optionally zstd-compressed, verified on every read.
//! - [`conformance`]: the suite every adapter passes.
#![forbid(unsafe_code)]

pub mod codec;
pub mod conformance;
pub mod error;
pub mod memory;
pub mod refs;
pub mod store;

pub use codec::Compression;
pub use error::StoreError;
pub use memory::MemoryStore;
pub use store::{validate_ref_name, RefUpdate, ReflogEntry, Store};
