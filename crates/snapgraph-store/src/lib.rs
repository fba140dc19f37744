//! Stores for [`snapgraph`]: the storage the core leaves to its caller.
//!
//! - [`Store`]: the trait a backend implements: batched, fallible object access,
//!   refs changed only by compare-and-swap (atomically in batches) and a reflog.
//! - Adapters: [`MemoryStore`], [`dir::DirStore`], [`sqlite::SqliteStore`] (the
//!   embedded default) and [`postgres::PgStore`] (the server), all passing
//!   [`conformance`].
//! - [`codec`]: objects at rest, zstd-compressed when it pays, verified on every read.
//! - [`Repo`]: branches, commits, checkouts, forks and labelled snapshots.
//! - [`sync()`]: copy only what another store lacks, then move its ref.
//! - [`gc`](mod@gc): mark from refs and pins, sweep the rest, safe with concurrent commits.
//! - [`verify()`]: re-hash every object and check every ref's closure.
//! - [`fault::FaultyStore`]: a wrapper failing the N-th call, for reliability tests.
#![forbid(unsafe_code)]

pub mod codec;
pub mod conformance;
pub mod dir;
pub mod error;
pub mod fault;
pub mod gc;
pub mod memory;
pub mod open;
pub mod postgres;
pub mod refs;
pub mod repo;
pub mod sqlite;
pub mod store;
pub mod sync;
pub mod verify;
mod walk;

pub use codec::Compression;
pub use error::StoreError;
pub use gc::{collect as gc, GcError, GcOptions, GcReport};
pub use memory::MemoryStore;
pub use open::open;
pub use repo::{Committed, ReindexReport, Repo, RepoCommitOptions, RepoError, SnapshotInfo};
pub use store::{validate_ref_name, RefUpdate, ReflogEntry, Store};
pub use sync::{sync, sync_with, SyncError, SyncOptions, SyncReport};
pub use verify::{verify, VerifyReport};
pub use walk::WalkProblem;
