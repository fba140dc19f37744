//! The CLI's one error type: every variant names the path, revision or object
//! involved, and prints as one `error: ...` line (with its causes after `: `).

use std::path::{Path, PathBuf};

use snapgraph::{CheckoutError, CommitError, FsError, GraphError, ObjectId, SnapshotError};
use snapgraph_store::{GcError, RepoError, StoreError, SyncError};

/// Everything that can make a command fail. The binary prints it and exits with 1.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// No `.snapgraph/` in the directory or any parent.
    #[error("not a snapgraph repository (or any parent up to /): {}; run `snapgraph init` first", crate::quote::quote_path(.start))]
    NotARepo {
        /// Where the search started.
        start: PathBuf,
    },
    /// `init` found an existing repository.
    #[error("{}: already a snapgraph repository", crate::quote::quote_path(.path))]
    AlreadyInitialized {
        /// The `.snapgraph` directory.
        path: PathBuf,
    },
    /// A file-system call failed.
    #[error("{}: {source}", crate::quote::quote_path(.path))]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A path cannot be recorded or written (not UTF-8, reserved, hostile...).
    #[error("{}: {reason}", crate::quote::quote_path(.path))]
    BadPath {
        /// The path.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A commit holds something that must not be written to disk (path traversal,
    /// a path through a symlink, a name the platform cannot hold).
    #[error("refusing to check out commit {commit}: {}: {reason}", crate::quote::quote(.path))]
    Hostile {
        /// The commit.
        commit: ObjectId,
        /// The path in the commit.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A bad command-line value (`--meta` without `=`, a bad key file...).
    #[error("{0}")]
    Usage(String),
    /// The working directory has changes that a checkout would lose.
    #[error("{}: the working directory has uncommitted changes ({summary}); commit them or pass --force", crate::quote::quote_path(.path))]
    Dirty {
        /// The working directory.
        path: PathBuf,
        /// What changed.
        summary: String,
    },
    /// An entry a checkout was taking out of the working directory changed after
    /// the dirty check found the directory clean (see [`crate::guard`]); every step
    /// of the checkout was undone.
    #[error("{}: changed while the checkout ran ({what}); the checkout was undone: run it again, or pass --force to discard the change", crate::quote::quote_path(.path))]
    ChangedMeanwhile {
        /// The entry, in the working directory.
        path: PathBuf,
        /// What changed.
        what: String,
    },
    /// An entry a restore without `--force` was about to replace or remove changed
    /// after its check judged it (committed, or already as the source has it): the
    /// restore stopped before touching it; `written` entries were written before
    /// (each whole).
    #[error("{}: {what} while the restore ran; the restore stopped before replacing it ({written} entries written before): run it again, or pass --force to discard the change", crate::quote::quote_path(.path))]
    ChangedDuringRestore {
        /// The entry, in the working directory.
        path: PathBuf,
        /// How it changed: `modified`, `deleted` or `created`.
        what: &'static str,
        /// Entries the restore wrote or removed before it.
        written: u64,
    },
    /// A PATH named to `commit` that a commit does not record (ignored, a nested
    /// repository, a socket or FIFO): refused rather than reported as nothing to
    /// commit.
    #[error("{}: a commit does not record it: {why}", crate::quote::quote_path(.path))]
    NotRecorded {
        /// The path, in the working directory.
        path: PathBuf,
        /// Why not.
        why: Unrecorded,
    },
    /// A path inside a commit does not exist or is of the wrong kind.
    #[error("{}: not found in commit {commit}", crate::quote::quote(.path))]
    NotInCommit {
        /// The commit.
        commit: ObjectId,
        /// The path.
        path: String,
    },
    /// `verify` found problems.
    #[error("verify found {count} problem(s) in the store")]
    VerifyFailed {
        /// How many.
        count: usize,
    },
    /// The reader of stdout went away (`snapgraph log | head -1`): the binary ends
    /// quietly (exit status 141, see [`crate::output`]).
    #[error("stdout closed")]
    ClosedPipe,
    /// A store URL could not be opened (the URL is shown without its password).
    #[error("cannot open store {url}: {reason}")]
    OpenStore {
        /// The URL, password withheld.
        url: String,
        /// Why.
        reason: String,
    },
    /// The repository's store is missing, empty or not a snapgraph store; only
    /// `init` creates one.
    #[error("store {url} holds no snapgraph repository: {reason}; only `snapgraph init` creates a store")]
    NoRepositoryInStore {
        /// The URL, password withheld.
        url: String,
        /// What was found.
        reason: String,
    },
    /// `init` inside an existing repository, without `--force`.
    #[error("{}: inside the snapgraph repository {}; pass --force to nest one", crate::quote::quote_path(.path), crate::quote::quote_path(.outer))]
    InsideRepository {
        /// Where `init` was asked to create one.
        path: PathBuf,
        /// The enclosing repository's working directory.
        outer: PathBuf,
    },
    /// A credentials file that others could read (or a symlink) was refused.
    #[error("{}: refusing to use this credentials file: {reason}", crate::quote::quote_path(.path))]
    InsecureCredentials {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The config holds a store URL with a password (written by hand or by an older
    /// version): refused, since the config is not a secret file.
    #[error("{}: the store URL holds a password; move it to .snapgraph/credentials (mode 0600), PGPASSWORD or ~/.pgpass and remove it from the URL", crate::quote::quote_path(.path))]
    SecretInConfig {
        /// The config file.
        path: PathBuf,
    },
    /// An archive entry was refused (too large, a link to a missing name...).
    #[error("{}: entry {entry:?}: {reason}", crate::quote::quote_path(.file))]
    ArchiveEntry {
        /// The archive.
        file: PathBuf,
        /// The entry's name.
        entry: String,
        /// What is wrong.
        reason: String,
    },
    /// `branch -d` of a branch whose tip no other branch or snapshot reaches.
    #[error("branch {branch} is not merged: no other branch or snapshot reaches its tip {tip}; use -D to delete it anyway (it stays recoverable until the gc grace period ends)")]
    Unmerged {
        /// The branch.
        branch: String,
        /// Its tip.
        tip: ObjectId,
    },
    /// `HEAD` is detached and the command needs a branch (`commit` without
    /// `--branch`).
    #[error("HEAD is detached at {commit} (not on a branch); pass --branch NAME to commit onto a branch (a new one starts at {commit})")]
    Detached {
        /// The commit `HEAD` is at.
        commit: ObjectId,
    },
    /// A commit of the whole working directory onto its branch, which moved since
    /// the directory was checked out or last committed (another working directory
    /// on the same store committed to it, or a sync moved it): the commit would
    /// undo those commits' changes. `checkout BRANCH` brings them in first.
    #[error("branch {branch} moved to {tip} since this working directory was at {base} (another working directory or a sync moved it): a commit of the whole directory would undo those commits' changes; `snapgraph checkout {branch}` brings them in, keeping your changes to other paths, or pass --force to commit the directory as it is")]
    Behind {
        /// The branch.
        branch: String,
        /// The commit the working directory holds (its stat cache's).
        base: ObjectId,
        /// Where the branch is now.
        tip: ObjectId,
    },
    /// A signal (Ctrl-C) stopped a command where stopping is safe
    /// ([`crate::interrupt`]): a batched commit or import (nothing published, the
    /// writer's lease released), a checkout before its swap (nothing changed), a
    /// restore between files.
    #[error("interrupted by {signal}: {left}")]
    Interrupted {
        /// The signal's name.
        signal: &'static str,
        /// What the command left: [`crate::interrupt::NOTHING_COMMITTED`] and the
        /// others.
        left: String,
    },
    /// A new branch or snapshot name a command line would read as something else
    /// ([`crate::rev::misread_as`]).
    #[error("{name:?} cannot name a new branch or snapshot: it {reason}")]
    ReservedName {
        /// The name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// Another snapgraph command kept the working directory's lock
    /// ([`crate::lock`]) for the whole wait.
    #[error("{holder} is still working in {} after {waited_s} s; try again once it ends", crate::quote::quote_path(.root))]
    WorkdirBusy {
        /// The working directory.
        root: PathBuf,
        /// Who holds the lock, as it wrote it.
        holder: String,
        /// How long this command waited, in seconds.
        waited_s: u64,
    },
    /// A store of files inside the working directory, outside `.snapgraph/`: commits
    /// would snapshot it into itself and checkouts write old copies of it over it.
    #[error("store {} lies inside the working directory {}: every commit would snapshot it into itself and a checkout would write an old copy over it; keep it in .snapgraph/ (the default) or outside the working directory (move its files, with any -wal, -shm and -segments beside a SQLite file, and name the new place in .snapgraph/config)", crate::quote::quote_path(.store), crate::quote::quote_path(.root))]
    StoreInWorkdir {
        /// The store's file or directory.
        store: PathBuf,
        /// The working directory.
        root: PathBuf,
    },
    /// A checkout of the working directory's moved branch ([`CliError::Behind`])
    /// would write paths the directory changed itself: the branch's commits since
    /// changed them (or a directory above or below them) too.
    #[error("{}: {} path(s) changed here were changed on the branch too since this working directory's commit ({}); commit the directory as it is with `commit --force` (which undoes the branch's changes), or check out with --force to take the branch's versions (which discards yours)", crate::quote::quote_path(.path), .paths.len(), .shown)]
    Overlap {
        /// The working directory.
        path: PathBuf,
        /// The paths changed on both sides (workspace paths, `/a/b`).
        paths: Vec<String>,
        /// The first of them as text output quotes them.
        shown: String,
    },
    /// A checkout would replace an entry a commit does not record (ignored, or a
    /// nested repository) with the commit's, losing what it holds: it differs from
    /// the commit's entry at that path.
    #[error("{}: not recorded (ignored, or a nested repository), and the commit has a {theirs} here that would replace it; move it away, or pass --force to let the checkout replace it", crate::quote::quote_path(.path))]
    UnrecordedInTheWay {
        /// The entry, in the working directory.
        path: PathBuf,
        /// What the commit has there (`file`, `symlink`, `directory`).
        theirs: &'static str,
    },
    /// `restore PATH...` (or `checkout REV -- PATH...`) would overwrite or remove
    /// files whose changes no commit holds.
    #[error("{}: {} path(s) have uncommitted changes the restore would discard ({}); commit them first, or pass --force to discard them", crate::quote::quote_path(.path), .paths.len(), .shown)]
    WouldDiscard {
        /// The working directory.
        path: PathBuf,
        /// The paths (workspace paths, `/a/b`).
        paths: Vec<String>,
        /// The first of them as text output quotes them.
        shown: String,
    },
    /// `diff --exit-code` found differences: the binary exits with 1 and prints
    /// nothing more (the diff is the output).
    #[error("{count} path(s) differ")]
    Differences {
        /// How many changed paths were listed.
        count: usize,
    },
    /// `snapgraph watch` on a platform without inotify (Linux only).
    #[error("snapgraph watch needs Linux inotify; not available on {platform} (commits scan the directory as without a watcher)")]
    WatchUnsupported {
        /// The platform (`std::env::consts::OS`).
        platform: &'static str,
    },
    /// The watcher of a working directory could not start, run or be reached.
    #[error("watch {}: {reason}", crate::quote::quote_path(.root))]
    Watch {
        /// The working directory.
        root: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A revision could not be resolved.
    #[error(transparent)]
    Rev(#[from] crate::rev::RevError),
    /// A store call failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// A repository operation failed.
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// A garbage collection stopped (leases held, another sweep running).
    #[error("gc: {0}")]
    Gc(#[from] GcError),
    /// A sync failed.
    #[error("sync: {0}")]
    Sync(#[from] SyncError),
    /// A packed snapshot was refused.
    #[error("snapshot: {0}")]
    Snapshot(#[from] SnapshotError),
    /// Loading a commit failed.
    #[error(transparent)]
    Checkout(#[from] CheckoutError),
    /// Committing failed.
    #[error(transparent)]
    Commit(#[from] CommitError),
    /// A workspace operation failed.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// A history query failed.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

/// Whether a file-system call failed because its entry is no longer there: nothing
/// at the path, or a directory on the way replaced by something else.
pub fn vanished(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::NotFound || e.kind() == std::io::ErrorKind::NotADirectory
}

impl CliError {
    /// Whether this is a file-system call that found its entry gone (nothing at
    /// the path, or a directory on the way replaced): what a walk racing a
    /// process that deletes files meets ([`vanished`]).
    pub fn vanished(&self) -> bool {
        matches!(self, CliError::Io { source, .. } if vanished(source))
    }

    /// An I/O error at `path`.
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    /// A path that cannot be handled.
    pub fn bad_path(path: impl AsRef<Path>, reason: impl Into<String>) -> Self {
        Self::BadPath {
            path: path.as_ref().to_path_buf(),
            reason: reason.into(),
        }
    }
}

/// `Result` with [`CliError`].
pub type Result<T, E = CliError> = std::result::Result<T, E>;

/// Adds the path to an I/O result.
pub trait IoContext<T> {
    /// Maps the error to [`CliError::Io`] at `path`.
    fn at(self, path: impl AsRef<Path>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T> {
        self.map_err(|e| CliError::io(path, e))
    }
}

/// Why a scan does not record an entry ([`crate::scan::unrecorded`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unrecorded {
    /// Nothing is there (or a file is where a directory on the way should be).
    Absent,
    /// Ignored by an ignore file: the entry, or the directory above it at this path
    /// (below the root, without the leading `/`).
    Ignored(String),
    /// A repository's own directory, or a nested repository, at this path.
    Repository(String),
    /// A socket, FIFO or device.
    Special,
}

impl std::fmt::Display for Unrecorded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unrecorded::Absent => f.write_str("nothing is there"),
            Unrecorded::Ignored(at) => write!(f, "{at} is ignored by a .snapgraphignore rule"),
            Unrecorded::Repository(at) if at == ".snapgraph" => {
                f.write_str("it is the repository's own directory")
            }
            Unrecorded::Repository(at) => {
                write!(f, "{at} is a nested repository (it has its own .snapgraph)")
            }
            Unrecorded::Special => f.write_str("a socket, FIFO or device holds no content"),
        }
    }
}
