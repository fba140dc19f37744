//! # snapgraph-bashkit
//!
//! [Bashkit](https://docs.rs/bashkit)'s interpreter running on a snapgraph
//! [`Workspace`]: [`SnapgraphFs`] implements [`bashkit::FileSystem`], so every file a
//! script writes lands in the workspace, and a commit after each `exec` costs what the
//! turn changed, not what the file system holds.
//!
//! ```
//! use std::collections::HashMap;
//! use std::sync::Arc;
//!
//! use bashkit::Bash;
//! use snapgraph::{CheckoutPolicy, CommitOptions, ObjectId, SnapshotGraph};
//! use snapgraph_bashkit::SnapgraphFs;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
//! let mut store: HashMap<ObjectId, Vec<u8>> = HashMap::new();
//!
//! let fs = SnapgraphFs::new();
//! let mut bash = Bash::builder().fs(Arc::new(fs.clone())).build();
//!
//! rt.block_on(bash.exec("mkdir -p /work && echo one > /work/log"))?;
//! let first = fs.commit(CommitOptions::new())?;
//! let first_id = first.id();
//! store.extend(first.into_objects());
//!
//! rt.block_on(bash.exec("echo two >> /work/log"))?;
//! let second = fs.commit(CommitOptions::new().parent(first_id).have_in(&store))?;
//! let second_id = second.id();
//! store.extend(second.into_objects());
//!
//! // Rewind: the next script sees the files of the first turn.
//! let _restore = fs.checkout(first_id, &store, CheckoutPolicy::default())?;
//! assert_eq!(rt.block_on(bash.exec("cat /work/log"))?.stdout, "one\n");
//!
//! let diff = SnapshotGraph::diff(first_id, second_id, &store)?;
//! assert_eq!(diff.files_modified, vec!["/work/log".to_string()]);
//! # Ok(())
//! # }
//! ```
//!
//! ## The handle
//! A [`SnapgraphFs`] is a cheap handle: clones share one workspace (give one clone to
//! `Bash::builder().fs(..)` and keep another for history), and [`fork`](SnapgraphFs::fork)
//! makes an independent one that shares content until either side writes.
//! [`commit`](SnapgraphFs::commit) and [`checkout`](SnapgraphFs::checkout) are the
//! workspace's, with the same options; [`commit_to`](SnapgraphFs::commit_to) and
//! [`checkout_from`](SnapgraphFs::checkout_from) go through a
//! [`snapgraph_store::Repo`] (a branch in SQLite, PostgreSQL, a directory, ...).
//!
//! ## What is stored
//! File bytes, directories, symlinks (stored, never followed here: Bashkit's own
//! layer above follows them) and modes are the workspace's, so they are committed.
//! Modification times live beside the workspace, not in it: they are not content, so
//! commit ids stay independent of history. A checkout sets every time to the moment
//! of the checkout, as git's does. [`SnapgraphFs::new`] lays out what Bashkit's
//! `InMemoryFs::new` does (`/tmp`, `/home/user`, `/dev` with `null`, `random`,
//! `urandom`, `/dev/fd`), and the same device files behave as there.
//!
//! ## Errors and panics
//! File-system errors are Bashkit's (`bashkit::Error::Io` with the kind and message
//! its `InMemoryFs` gives, so scripts print the same); a path the workspace cannot hold
//! (`..` above `/`, NUL, not UTF-8, names over 255 bytes) is an `InvalidInput` error.
//! History operations return the workspace's and the repository's typed errors. No
//! input panics.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod fs;
mod state;

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bashkit::FsLimits;
use snapgraph::{
    CheckoutError, CheckoutPolicy, Commit, CommitError, CommitOptions, DriftPolicy, FsError,
    Limits, ObjectId, ObjectSource, Restore, Workspace,
};
use snapgraph_store::{Committed, Repo, RepoCommitOptions, RepoError, Store};

use crate::state::Inner;

/// Directories `InMemoryFs::new` creates, with their modes.
const LAYOUT_DIRS: &[(&str, u32)] = &[
    ("/tmp", 0o1777),
    ("/home", 0o755),
    ("/home/user", 0o755),
    ("/dev", 0o755),
    ("/dev/fd", 0o755),
];
/// Device files `InMemoryFs::new` creates (empty, mode 0o666).
const LAYOUT_DEVICES: &[&str] = &["/dev/null", "/dev/urandom", "/dev/random"];

/// A Bashkit file system on a snapgraph workspace, with history.
///
/// Clones share the same workspace; [`fork`](Self::fork) makes an independent copy.
/// See the [crate docs](crate) for an example.
#[derive(Clone)]
pub struct SnapgraphFs {
    shared: Arc<Mutex<Inner>>,
}

impl fmt::Debug for SnapgraphFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        f.debug_struct("SnapgraphFs")
            .field("head", &inner.ws.head())
            .field("files", &inner.usage.files)
            .field("dirs", &inner.usage.dirs)
            .field("bytes", &inner.usage.total_bytes())
            .finish()
    }
}

impl Default for SnapgraphFs {
    fn default() -> Self {
        Self::new()
    }
}

impl SnapgraphFs {
    /// A file system laid out as Bashkit's `InMemoryFs::new()` (`/tmp`, `/home/user`,
    /// `/dev/null`, ...), with Bashkit's default limits (`FsLimits::default()`: 100 MB,
    /// 10 MB per file, 10,000 files).
    pub fn new() -> Self {
        Self::with_limits(FsLimits::default())
    }

    /// Like [`new`](Self::new) with other limits.
    pub fn with_limits(limits: FsLimits) -> Self {
        Self::from_workspace_with_limits(bashkit_layout(), limits)
    }

    /// A file system showing `ws` as it is (nothing is added), with Bashkit's default
    /// limits. Its head, if any, is the parent of the next commit a
    /// [`Repo`] makes.
    pub fn from_workspace(ws: Workspace) -> Self {
        Self::from_workspace_with_limits(ws, FsLimits::default())
    }

    /// Like [`from_workspace`](Self::from_workspace) with other limits. The
    /// workspace's checkout limits are lowered to Bashkit's file count and total
    /// bytes, so a checkout cannot load more than a script could have written.
    pub fn from_workspace_with_limits(mut ws: Workspace, limits: FsLimits) -> Self {
        let current = ws.limits();
        ws.set_limits(Limits {
            max_files: current
                .max_files
                .min(limits.max_file_count.max(limits.max_dir_count)),
            max_bytes: current.max_bytes.min(limits.max_total_bytes),
            ..current
        });
        Self {
            shared: Arc::new(Mutex::new(Inner::new(ws, limits))),
        }
    }

    /// The state, whatever a panic elsewhere left (every operation leaves it whole).
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A copy of the workspace as it is now (O(1): content is shared).
    pub fn workspace(&self) -> Workspace {
        self.lock().ws.clone()
    }

    /// The commit the workspace last made or checked out.
    pub fn head(&self) -> Option<ObjectId> {
        self.lock().ws.head()
    }

    /// Commits the workspace ([`Workspace::commit`]): re-chunks and re-hashes only
    /// what was written since the last commit or checkout. The caller persists the
    /// objects (`commit.into_objects()`) and states the parents in `options`.
    pub fn commit(&self, options: CommitOptions<'_>) -> Result<Commit, CommitError> {
        self.lock().ws.commit(options)
    }

    /// Replaces every file with those of commit `id` ([`Workspace::checkout`]), all
    /// or nothing; the next `exec` sees them. Every time reads as now afterwards.
    pub fn checkout<S: ObjectSource + ?Sized>(
        &self,
        id: ObjectId,
        source: &S,
        policy: CheckoutPolicy,
    ) -> Result<Restore, CheckoutError> {
        let mut inner = self.lock();
        let restore = inner.ws.checkout(id, source, policy)?;
        inner.recount();
        inner.reset_times();
        Ok(restore)
    }

    /// An independent file system with the same files, times and limits: writes on
    /// either side never show on the other. O(1) for the workspace (directories and
    /// bytes are shared copy-on-write); the times of paths written since the last
    /// checkout are copied.
    pub fn fork(&self) -> SnapgraphFs {
        let copy = self.lock().clone();
        SnapgraphFs {
            shared: Arc::new(Mutex::new(copy)),
        }
    }

    /// Commits the workspace to `branch` of `repo` ([`Repo::commit`]): writes only the
    /// objects the store lacks and moves the branch by compare-and-swap. The workspace
    /// must be at the branch's tip (or the branch new); on error nothing changes.
    pub fn commit_to<S: Store>(
        &self,
        repo: &Repo<S>,
        branch: &str,
        options: RepoCommitOptions,
    ) -> Result<Committed, RepoError> {
        repo.commit(&mut self.lock().ws, branch, options)
    }

    /// Checks out `rev` (a branch, snapshot or commit id) of `repo`
    /// ([`Repo::checkout_into`]), all or nothing. External reads, which scripts do not
    /// record, would be restored stale-marked ([`DriftPolicy::Off`]).
    pub fn checkout_from<S: Store>(
        &self,
        repo: &Repo<S>,
        rev: &str,
        policy: CheckoutPolicy,
    ) -> Result<Restore, RepoError> {
        let mut inner = self.lock();
        let restore = repo.checkout_into(&mut inner.ws, rev, policy, DriftPolicy::Off)?;
        inner.recount();
        inner.reset_times();
        Ok(restore)
    }
}

/// The directories and device files of `InMemoryFs::new()`.
fn bashkit_layout() -> Workspace {
    fn build() -> Result<Workspace, FsError> {
        let mut ws = Workspace::new();
        for (dir, mode) in LAYOUT_DIRS {
            ws.mkdir(dir)?;
            ws.set_mode(dir, *mode)?;
        }
        for dev in LAYOUT_DEVICES {
            ws.write(dev, b"")?;
            ws.set_mode(dev, 0o666)?;
        }
        Ok(ws)
    }
    // Fixed, valid paths and modes: an error here is a bug in this file.
    build().expect("Bashkit's default layout is a valid workspace")
}
