//! Command-line syntax (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Default `--batch-bytes` of `commit` and `import`: 64 MiB of content read before
/// it is written to the store (peak memory stays a small multiple of it).
pub const BATCH_BYTES: u64 = 64 << 20;

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
///
/// Each verb's arguments are built only when it is the one invoked (`defer`): a
/// per-turn command used to build every verb's, about a tenth of its own time.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Create a repository (`.snapgraph/`) in DIR (default: the current directory).
    Init {
        /// Where.
        dir: Option<PathBuf>,
        /// The store: `sqlite:PATH`, `dir:PATH`, `postgres://...`,
        /// `s3://BUCKET/PREFIX?endpoint=URL&region=NAME` (credentials from the AWS
        /// environment variables or ~/.aws) or `cache:LOCAL|REMOTE` (a remote store
        /// read through a local cache, e.g. `cache:sqlite:cache.db|postgres://...`)
        /// (default: a SQLite file in `.snapgraph/`).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
        /// Create it even inside another repository (a nested one).
        #[arg(long, short)]
        force: bool,
    },
    /// Snapshot the working directory onto a branch; with PATHs, only the changes
    /// under them, on top of the branch tip (the rest of the tree is kept).
    Commit(CommitArgs),
    /// Show what changed in the working directory since HEAD's commit (and whether
    /// HEAD is detached); a file moved with its content is `R old -> new`.
    Status {
        /// Also pair removed and added files of similar content as renames.
        #[arg(short = 'M', long = "find-renames")]
        find_renames: bool,
        /// The similarity `-M` needs, in percent.
        #[arg(long, value_name = "PERCENT", default_value_t = 50, value_parser = clap::value_parser!(u8).range(1..=100))]
        threshold: u8,
    },
    /// Show history, newest first.
    Log {
        /// Where to start (default: HEAD).
        rev: Option<String>,
        /// At most this many commits.
        #[arg(
            short = 'n',
            long = "max-count",
            visible_alias = "limit",
            default_value_t = 100
        )]
        limit: usize,
        /// One line per commit: `<12-hex id> <subject>`.
        #[arg(long)]
        oneline: bool,
        /// Only commits that changed these paths (relative to the current directory,
        /// as in git), after `--`.
        #[arg(last = true, value_name = "PATH")]
        paths: Vec<String>,
    },
    /// Show one commit: parents, metadata and changed files (`-p`: the patch).
    Show {
        /// The commit (default: HEAD).
        #[arg(default_value = "HEAD")]
        rev: String,
        /// How to print the changes.
        #[command(flatten)]
        format: DiffFormat,
    },
    /// Show the files that differ between A and B (default: HEAD and the working
    /// directory).
    Diff {
        /// The first revision (default: HEAD).
        a: Option<String>,
        /// The second revision (default: the working directory).
        b: Option<String>,
        /// How to print the changes.
        #[command(flatten)]
        format: DiffFormat,
        /// Exit with 1 when there are differences (0 when none).
        #[arg(long)]
        exit_code: bool,
        /// Only these paths (relative to the current directory, as in git), after `--`.
        #[arg(last = true, value_name = "PATH")]
        paths: Vec<String>,
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
    /// Put PATHs (files or directories) back as they are in a commit, with their
    /// modes, touching nothing else: what the commit lacks under them is removed;
    /// uncommitted changes it would discard refuse it without `--force`.
    Restore(RestoreArgs),
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
        /// Then repack the store (SQLite): `full` compresses every compressed record
        /// again at --level (kept when smaller) and moves records out of packs below
        /// half live; `sparse` only moves those; `none` skips it. Either rebuilds the
        /// file when pages are free. Objects are verified as they are rewritten.
        #[arg(long, value_name = "HOW", default_value = "full", value_parser = ["full", "sparse", "none"])]
        repack: String,
        /// The zstd level of a full repack (1 to 22).
        #[arg(long, default_value_t = snapgraph_store::repack::DEFAULT_LEVEL, value_parser = clap::value_parser!(i32).range(1..=22))]
        level: i32,
    },
    /// Re-hash objects and check every ref's history is complete; with SNAPSHOT
    /// (a snapshot, branch or commit), only its closure.
    Verify {
        /// Only this snapshot, branch or commit (and its history).
        snapshot: Option<String>,
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
        /// Write content to the store whenever this many bytes were read from the
        /// archive (what bounds the import's memory).
        #[arg(long, value_name = "BYTES", default_value_t = BATCH_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
        batch_bytes: u64,
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
        /// A shallow sync: only the last N commits with their files; older ones
        /// are sent as history only (hollow). Commits within N that the
        /// destination holds hollow are filled in.
        #[arg(long, value_name = "N")]
        depth: Option<std::num::NonZeroU64>,
    },
    /// Make a new working directory DIR from a repository directory or store URL:
    /// its own store holding every branch and snapshot, the default branch checked
    /// out.
    Clone {
        /// The source: a store URL or a repository directory.
        src: String,
        /// The new working directory (must not exist, or be empty).
        dir: PathBuf,
        /// Only the last N commits of each ref with their files; older commits come
        /// as history only (hollow: `log` shows them, checking them out fails).
        #[arg(long, value_name = "N")]
        depth: Option<std::num::NonZeroU64>,
        /// The new repository's store (default: a SQLite file in `.snapgraph/`).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
    },
    /// Drop snapshots, or old commits' files, by a retention policy (restic's
    /// `forget`): snapshots not kept are removed; with --branch, commits of the
    /// branch not kept become hollow (history stays, files go at the next gc).
    Forget(ForgetArgs),
    /// Rebuild refs from the objects: snapshots whose ref is gone, and
    /// unreferenced commits under `lost-found/`.
    Reindex,
    /// Watch the working directory (Linux inotify, in the foreground) so that
    /// `status` and `commit` look only at what changed; with --stop, stop the
    /// watcher that runs here. Without a watcher, commands scan the whole tree.
    Watch {
        /// Stop the running watcher.
        #[arg(long)]
        stop: bool,
    },
}

/// Arguments of `forget`.
#[derive(Debug, Args)]
pub struct ForgetArgs {
    /// Keep the newest N.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub keep_last: usize,
    /// Keep the newest of each of the last N days that have one.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub keep_daily: usize,
    /// Keep the newest of each of the last N ISO weeks that have one.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub keep_weekly: usize,
    /// Keep the newest of each of the last N months that have one.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub keep_monthly: usize,
    /// Keep everything within this span of the newest, like `1y6m`, `14d`, `36h`.
    #[arg(long, value_name = "DURATION")]
    pub keep_within: Option<String>,
    /// Only these snapshots (repeatable; default: every snapshot, unless --branch).
    #[arg(long, value_name = "NAME")]
    pub tag: Vec<String>,
    /// Apply the policy to this branch's history (repeatable).
    #[arg(long, value_name = "NAME")]
    pub branch: Vec<String>,
    /// Only show what would be dropped.
    #[arg(long, short = 'n')]
    pub dry_run: bool,
}

/// How `diff` and `show` print changes.
#[derive(Debug, Args, Default, Clone)]
pub struct DiffFormat {
    /// Unified patches (git's format).
    #[arg(short = 'p', long = "patch")]
    pub patch: bool,
    /// Per-file counts of inserted and deleted lines, and totals.
    #[arg(long)]
    pub stat: bool,
    /// `STATUS<TAB>PATH` lines (`R<score><TAB>OLD<TAB>NEW` for renames).
    #[arg(long)]
    pub name_status: bool,
    /// Also pair removed and added files of similar content as renames.
    #[arg(short = 'M', long = "find-renames")]
    pub find_renames: bool,
    /// The similarity `-M` needs, in percent.
    #[arg(long, value_name = "PERCENT", default_value_t = 50, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub threshold: u8,
}

/// Arguments of `restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The commit to take them from (default: HEAD).
    #[arg(long, short, value_name = "REV")]
    pub source: Option<String>,
    /// Files or directories inside the working directory.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<std::path::PathBuf>,
    /// Discard uncommitted changes to them (without it, a restore that would
    /// overwrite or remove a changed file is refused, naming it).
    #[arg(long, short)]
    pub force: bool,
}

/// Arguments of `commit`.
#[derive(Debug, Args)]
pub struct CommitArgs {
    /// Files or directories inside the working directory to take changes from.
    pub paths: Vec<PathBuf>,
    /// The commit message.
    #[arg(short, long)]
    pub message: Option<String>,
    /// The branch (default: the current one).
    #[arg(long, short)]
    pub branch: Option<String>,
    /// Extra metadata, `KEY=VALUE` (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub meta: Vec<String>,
    /// Create a commit even when nothing changed.
    #[arg(long)]
    pub allow_empty: bool,
    /// Write new content to the store whenever this many bytes were read (what
    /// bounds the commit's memory).
    #[arg(long, value_name = "BYTES", default_value_t = BATCH_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_bytes: u64,
    /// Commit the whole directory even though its branch moved since it was
    /// checked out or last committed here (by another working directory on the same
    /// store, or a sync): the commit then undoes what those commits changed.
    #[arg(long, short)]
    pub force: bool,
}

/// Arguments of `checkout`.
#[derive(Debug, Args)]
pub struct CheckoutArgs {
    /// The commit, branch or snapshot.
    pub rev: String,
    /// Write into DIR (which must not exist, or be empty) instead.
    #[arg(long, value_name = "DIR")]
    pub to: Option<PathBuf>,
    /// Replace the working directory even if it has uncommitted changes (with
    /// PATHs: discard theirs).
    #[arg(long, short)]
    pub force: bool,
    /// Only put these paths back from REV (like `restore --source REV PATH...`;
    /// HEAD does not move), after `--`.
    #[arg(last = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
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
        /// Also verify its closure (re-hash its objects, check its history).
        #[arg(long)]
        verify: bool,
        /// With --verify: re-hash file chunks too.
        #[arg(long, requires = "verify")]
        read_data: bool,
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
