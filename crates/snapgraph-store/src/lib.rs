//! Stores for [`snapgraph`]: the storage the core leaves to its caller.
//!
//! - [`Store`]: what a backend implements, in two parts: [`ObjectStore`] (batched,
//!   fallible object access) and [`RefStore`] (refs changed only by compare-and-swap,
//!   atomically in batches, and a reflog). Every type with both parts is a `Store`;
//!   [`Paired`] joins one backend's objects with another's refs.
//! - Adapters, each behind a cargo feature of its name but memory: [`MemoryStore`],
//!   `dir::DirStore` (`dir`, default), `sqlite::SqliteStore` (`sqlite`, default: the
//!   embedded store) and `postgres::PgStore` (`postgres`: the server), all passing
//!   [`conformance`] (its object and ref parts also run alone).
//! - [`cache::CachingStore`]: a local store in front of a remote one (reads fill it,
//!   writes go through), opened as `cache:LOCAL|REMOTE`.
//! - [`codec`]: objects at rest, zstd-compressed when it pays, verified on every read.
//! - [`Repo`]: branches, commits, checkouts, forks and labelled snapshots.
//! - [`sync()`]: copy only what another store lacks, then move its ref.
//! - [`gc`](mod@gc): mark from refs and pins, sweep the rest, safe with concurrent commits.
//! - [`verify()`]: re-hash every object and check every ref's closure.
//! - [`fault::FaultyStore`]: a wrapper failing the N-th call, for reliability tests;
//!   [`counting::CountingStore`]: one counting calls, for round-trip tests and benches.
//!
//! ```
//! use snapgraph::Workspace;
//! use snapgraph_store::{gc, open, sync, verify, Repo, RepoCommitOptions};
//!
//! let repo = Repo::new(open("memory:")?); // or "sqlite:history.db", "postgres://…"
//! let mut ws = Workspace::new();
//! ws.write("/notes.txt", b"turn 1")?;
//! repo.commit(&mut ws, "main", RepoCommitOptions::message("turn 1"))?;
//!
//! let mut ws = repo.checkout_shallow("main")?; // trees only, no file content read
//! ws.write("/notes.txt", b"turn 2")?;
//! let c = repo.commit(&mut ws, "main", RepoCommitOptions::message("turn 2"))?;
//! repo.tag("before-refactor", "main", [("score".into(), "0.93".into())].into())?;
//! repo.fork("experiment", &c.id.to_hex())?;
//!
//! let server = open("memory:")?;
//! let sent = sync(repo.store(), &*server, "heads/main")?; // only what it lacks
//! assert_eq!(sent.to, Some(c.id));
//! gc(repo.store(), &[])?; // safe with concurrent writers
//! assert!(verify(repo.store(), true)?.is_clean());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

pub mod cache;
pub mod cancel;
pub mod codec;
pub mod conformance;
pub mod counting;
pub mod cpus;
#[cfg(feature = "dir")]
pub mod dir;
pub mod error;
pub mod fault;
pub mod gc;
pub mod hollow;
#[cfg(feature = "sqlite")]
mod known;
pub mod memory;
pub mod open;
pub mod pgpass;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod refs;
pub mod repack;
pub mod repo;
pub mod retention;
#[cfg(feature = "s3")]
pub mod s3;
mod similar;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod store;
pub mod sync;
pub mod verify;
mod walk;

pub use cancel::Cancel;
pub use codec::Compression;
pub use error::{DeltaProblem, StoreError};
pub use gc::{collect as gc, GcError, GcOptions, GcReport};
pub use memory::MemoryStore;
pub use open::{open, open_with, OpenOptions};
pub use repack::{RepackOptions, RepackReport};
pub use repo::{
    Batched, CommitProgress, Committed, ProgressHook, ReindexReport, Repo, RepoCommitOptions,
    RepoError, SnapshotInfo,
};
pub use store::{
    check_put, validate_ref_name, CallerVerifies, ObjectStore, Paired, ReadCheck, RefStore,
    RefUpdate, ReflogEntry, Store,
};
pub use sync::{sync, sync_with, SyncError, SyncOptions, SyncReport};
pub use verify::{verify, verify_one, VerifyReport};
pub use walk::WalkProblem;
