//! Command-line syntax (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Versioned, verifiable history of real directories.
#[derive(Debug, Parser)]
#[command(name = "snapgraph", version, about, propagate_version = true)]
pub struct Cli {
    /// Print machine-readable JSON instead of text (read commands and reports).
    #[arg(long, global = true)]
    pub json: bool,
    /// No progress bars.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// Run as if started in DIR.
    // Its own id: a global arg named `dir` would also capture `init DIR`.
    #[arg(short = 'C', global = true, value_name = "DIR", id = "chdir")]
    pub dir: Option<PathBuf>,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a repository (`.snapgraph/`) in DIR (default: the current directory).
    Init {
        /// Where.
        dir: Option<PathBuf>,
        /// The store: `sqlite:PATH`, `dir:PATH`, `postgres://...` or
        /// `cache:LOCAL|REMOTE` (a remote store read through a local cache, e.g.
        /// `cache:sqlite:cache.db|postgres://...`) (default: a SQLite file in
        /// `.snapgraph/`).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
        /// Create it even inside another repository (a nested one).
        #[arg(long, short)]
        force: bool,
    },
    /// Snapshot the working directory onto a branch; with PATHs, only the changes
    /// under them, on top of the branch tip (the rest of the tree is kept).
    Commit {
        /// Files or directories inside the working directory to take changes from.
        paths: Vec<PathBuf>,
        /// The commit message.
        #[arg(short, long)]
        message: Option<String>,
        /// The branch (default: the current one).
        #[arg(long, short)]
        branch: Option<String>,
        /// Extra metadata, `KEY=VALUE` (repeatable).
        #[arg(long, value_name = "KEY=VALUE")]
        meta: Vec<String>,
        /// Create a commit even when nothing changed.
        #[arg(long)]
        allow_empty: bool,
    },
    /// Show what changed in the working directory since the current branch's tip.
    Status,
    /// Show history, newest first.
    Log {
        /// Where to start (default: the current branch).
        rev: Option<String>,
        /// At most this many commits.
        #[arg(short = 'n', long, default_value_t = 100)]
        limit: usize,
    },
    /// Show one commit: parents, metadata and changed files.
    Show {
        /// The commit.
        rev: String,
    },
    /// Show the files that differ between A and B (default: the working directory).
    Diff {
        /// The first revision.
        a: String,
        /// The second revision (default: the working directory).
        b: Option<String>,
        /// Only counts.
        #[arg(long)]
        stat: bool,
    },
    /// List a directory of a commit: `REV` or `REV:PATH`.
    Ls {
        /// `REV[:PATH]`.
        spec: String,
        /// List everything below, recursively.
        #[arg(short, long)]
        recursive: bool,
    },
    /// Print a file of a commit: `REV:PATH`.
    Cat {
        /// `REV:PATH`.
        spec: String,
    },
    /// Materialize a commit: into DIR with `--to`, else into the working directory
    /// (which it replaces; checking out a branch makes it current).
    Checkout(CheckoutArgs),
    /// Like `checkout`, but never changes the current branch.
    Restore(CheckoutArgs),
    /// List branches, create one (`branch NAME [--at REV]`) or delete one (`-d`).
    Branch {
        /// The branch to create or delete.
        name: Option<String>,
        /// Where to create it (default: the current branch's tip).
        #[arg(long)]
        at: Option<String>,
        /// Delete the branch; refused when no other branch or snapshot reaches its
        /// tip (use -D). Its tip stays recoverable for the gc grace period.
        #[arg(short, long)]
        delete: bool,
        /// Delete the branch even if its commits are reached from nowhere else.
        #[arg(short = 'D', long = "force-delete")]
        force_delete: bool,
    },
    /// Show the moves of a ref, newest first (kept after the ref is deleted): where
    /// to find a deleted or overwritten branch tip.
    Reflog {
        /// A branch, `heads/NAME` or `tags/NAME` (default: the current branch).
        #[arg(name = "REF")]
        reference: Option<String>,
    },
    /// Record a named, labelled snapshot of a commit.
    Tag {
        /// The snapshot's name.
        name: String,
        /// The commit (default: the current branch's tip).
        #[arg(long)]
        at: Option<String>,
        /// Labels, `KEY=VALUE` (repeatable).
        #[arg(long, value_name = "KEY=VALUE")]
        label: Vec<String>,
    },
    /// Create branch NEW at a commit.
    Fork {
        /// The new branch.
        new: String,
        /// The commit.
        #[arg(long)]
        at: String,
    },
    /// List, inspect or remove snapshots.
    Snapshots {
        /// What to do (default: list).
        #[command(subcommand)]
        action: Option<SnapshotsAction>,
    },
    /// Delete objects no branch or snapshot reaches.
    Gc {
        /// First remove leases left by killed writers. Only when no other snapgraph
        /// process writes to this store.
        #[arg(long)]
        break_leases: bool,
        /// First remove the sweep marker of a collector that died. Only when no
        /// other collection runs.
        #[arg(long)]
        clear_marker: bool,
        /// How long to wait for writers' leases before giving up, in seconds.
        #[arg(long, default_value_t = 60)]
        wait: u64,
        /// Drop deleted and overwritten branch tips older than this: `now`, `never`
        /// or a duration like `14d`, `12h`, `30m`, `90s` (default: the config's
        /// `gc.grace`, else 14 days).
        #[arg(long, value_name = "WHEN")]
        prune: Option<String>,
        /// Only list what would be dropped and how many objects would go.
        #[arg(long, short = 'n')]
        dry_run: bool,
    },
    /// Re-hash objects and check every ref's history is complete.
    Verify {
        /// Re-hash every object, file chunks included.
        #[arg(long)]
        read_data: bool,
    },
    /// Write a commit as a packed snapshot file.
    Pack {
        /// The commit.
        rev: String,
        /// The file to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Authenticate with the 32-byte key in this file (raw or 64 hex digits).
        #[arg(long)]
        key_file: Option<PathBuf>,
        /// Compress the body with zstd.
        #[arg(long)]
        compress: bool,
    },
    /// Store a packed snapshot and create a branch at it.
    Unpack {
        /// The snapshot file.
        file: PathBuf,
        /// The key it was packed with.
        #[arg(long)]
        key_file: Option<PathBuf>,
        /// The branch to create (default: `unpacked-` and the id's first 12 digits).
        #[arg(long, short)]
        branch: Option<String>,
    },
    /// Write a commit as a deterministic tar archive (`.tar.zst`: compressed).
    Export {
        /// The commit.
        rev: String,
        /// The archive to write.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Commit the contents of a tar archive (`.tar` or `.tar.zst`) onto a branch.
    Import {
        /// The archive.
        file: PathBuf,
        /// The commit message.
        #[arg(short, long)]
        message: Option<String>,
        /// The branch (default: the current one).
        #[arg(long, short)]
        branch: Option<String>,
    },
    /// Copy a branch or snapshot (default: all of them) from one store to another.
    Sync {
        /// The source: a store URL or a repository directory.
        src: String,
        /// The destination: a store URL or a repository directory.
        dst: String,
        /// The ref: a branch, `heads/NAME` or `tags/NAME`.
        #[arg(name = "REF")]
        reference: Option<String>,
        /// Move the destination's ref even if it is not an ancestor.
        #[arg(long)]
        force: bool,
    },
}

/// Arguments of `checkout` and `restore`.
#[derive(Debug, Args)]
pub struct CheckoutArgs {
    /// The commit, branch or snapshot.
    pub rev: String,
    /// Write into DIR (which must not exist, or be empty) instead.
    #[arg(long, value_name = "DIR")]
    pub to: Option<PathBuf>,
    /// Replace the working directory even if it has uncommitted changes.
    #[arg(long, short)]
    pub force: bool,
}

/// `snapshots` subcommands.
#[derive(Debug, Subcommand)]
pub enum SnapshotsAction {
    /// List snapshots.
    List,
    /// Show one snapshot.
    Inspect {
        /// Its name.
        name: String,
    },
    /// Remove one snapshot (its objects go at the next gc).
    Remove {
        /// Its name.
        name: String,
        /// Remove even if branches build on it.
        #[arg(long)]
        force: bool,
    },
}
