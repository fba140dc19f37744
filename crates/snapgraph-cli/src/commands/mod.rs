//! The commands, one file per verb family: each parses nothing (clap did), calls the
//! libraries, and prints its result (text, or JSON with `--json`) through
//! `Ctx::print`, so that a closed stdout ends the command quietly
//! ([`crate::output`]).
//!
//! - `init`: `init`;
//! - `worktree`: `commit`, `status`, `checkout` (the working directory);
//! - `restore`: `restore [--source REV] PATH...`, `checkout REV -- PATH...`;
//! - `patch`: how `diff`, `show` and `status` print changes (renames, patches);
//! - `history`: `log`, `show`, `diff`, `ls`, `cat`;
//! - `refs`: `branch`, `reflog`, `tag`, `fork`, `snapshots`;
//! - `maintenance`: `gc`, `verify`;
//! - `archive`: `pack`, `unpack`, `export`, `import`;
//! - `sync`: `sync`;
//! - `clone`: `clone`;
//! - `retention`: `forget`;
//! - `watch`: `watch`, `watch --stop` (the file-system watcher, [`crate::watch`]).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use snapgraph::{
    CheckoutOptions, CheckoutPolicy, CommitOptions, Diff, EntryKind, ObjectId, ObjectSource,
    SnapshotGraph, SnapshotKey, Workspace,
};

use crate::cli::{Cli, Command, SnapshotsAction};
use crate::error::{CliError, IoContext, Result};
use crate::index::{Digest, FileStat, Index, IndexEntry, SkeletonSource};
use crate::repo::{self, Workdir};
use crate::scan::{self, ScanReport};

mod archive;
mod clone;
mod history;
mod init;
mod maintenance;
mod patch;
mod refs;
mod restore;
mod retention;
mod sync;
mod watch;
mod worktree;

/// Global options every command sees.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// `--json`.
    pub json: bool,
    /// Progress bars wanted.
    pub progress: bool,
    /// The directory the command runs in.
    pub cwd: PathBuf,
    /// Print nothing (a command run as a step of another, like `clone`'s checkout).
    pub silent: bool,
}

impl Ctx {
    fn bar(&self, len: Option<u64>, what: &str) -> indicatif::ProgressBar {
        crate::progress::bar(self.progress, len, what)
    }

    fn open(&self) -> Result<Workdir> {
        repo::discover(&self.cwd)
    }

    /// Prints `value` as one JSON line with `--json`, else runs `text` on stdout.
    fn print(
        &self,
        value: Value,
        text: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<()> {
        if self.silent {
            return Ok(());
        }
        crate::output::with_stdout(|w| {
            if self.json {
                writeln!(w, "{value}")
            } else {
                text(w)
            }
        })
    }
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    let cwd = match &cli.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().at(".")?,
    };
    let ctx = Ctx {
        json: cli.json,
        progress: !cli.quiet,
        cwd,
        silent: false,
    };
    match cli.command {
        Command::Init { dir, store, force } => init::init(&ctx, dir, store.as_deref(), force),
        Command::Commit(args) => worktree::commit(&ctx, &args),
        Command::Status {
            find_renames,
            threshold,
        } => worktree::status(&ctx, find_renames.then_some(threshold)),
        Command::Log {
            rev,
            limit,
            oneline,
            paths,
        } => history::log(&ctx, rev.as_deref(), limit, oneline, &paths),
        Command::Show { rev, format } => history::show(&ctx, &rev, &format),
        Command::Diff {
            a,
            b,
            format,
            exit_code,
            paths,
        } => history::diff(&ctx, a.as_deref(), b.as_deref(), &format, exit_code, &paths),
        Command::Ls { spec, recursive } => history::ls(&ctx, &spec, recursive),
        Command::Cat { spec } => history::cat(&ctx, &spec),
        Command::Checkout(args) if !args.paths.is_empty() => {
            if args.to.is_some() {
                return Err(CliError::Usage(
                    "checkout REV -- PATH... restores into the working directory; --to takes a whole commit".to_string(),
                ));
            }
            restore::restore(&ctx, Some(&args.rev), &args.paths, args.force)
        }
        Command::Checkout(args) => worktree::checkout(&ctx, &args, true),
        Command::Restore(args) => {
            restore::restore(&ctx, args.source.as_deref(), &args.paths, args.force)
        }
        Command::Branch {
            name,
            at,
            delete,
            force_delete,
        } => refs::branch(&ctx, name, at, delete, force_delete),
        Command::Reflog { reference } => refs::reflog(&ctx, reference.as_deref()),
        Command::Tag { name, at, label } => refs::tag(&ctx, &name, at.as_deref(), &label),
        Command::Fork { new, at } => refs::fork(&ctx, &new, &at),
        Command::Snapshots { action } => {
            refs::snapshots(&ctx, action.unwrap_or(SnapshotsAction::List))
        }
        Command::Gc {
            break_leases,
            clear_marker,
            wait,
            prune,
            dry_run,
            repack,
            level,
        } => maintenance::gc(
            &ctx,
            maintenance::GcArgs {
                break_leases,
                clear_marker,
                wait,
                prune,
                dry_run,
                repack: match repack.as_str() {
                    "none" => None,
                    "sparse" => Some(snapgraph_store::RepackOptions::sparse()),
                    _ => Some(snapgraph_store::RepackOptions::full(level)),
                },
            },
        ),
        Command::Verify {
            snapshot,
            read_data,
        } => maintenance::verify(&ctx, snapshot.as_deref(), read_data),
        Command::Pack {
            rev,
            output,
            key_file,
            compress,
        } => archive::pack(&ctx, &rev, &output, key_file.as_deref(), compress),
        Command::Unpack {
            file,
            key_file,
            branch,
        } => archive::unpack(&ctx, &file, key_file.as_deref(), branch),
        Command::Export { rev, output } => archive::export(&ctx, &rev, &output),
        Command::Import {
            file,
            message,
            branch,
            batch_bytes,
        } => archive::import(&ctx, &file, message, branch, batch_bytes),
        Command::Sync {
            src,
            dst,
            reference,
            force,
            depth,
        } => sync::sync(&ctx, &src, &dst, reference.as_deref(), force, depth),
        Command::Clone {
            src,
            dir,
            depth,
            store,
        } => clone::clone(&ctx, &src, &dir, depth, store.as_deref()),
        Command::Forget(args) => retention::forget(&ctx, &args),
        Command::Reindex => maintenance::reindex(&ctx),
        Command::Watch { stop } => watch::watch(&ctx, stop),
    }
}

// ------------------------------------------------------------------ helpers

/// Runs `read` (a scan or an import) with [`Batches`](crate::batches::Batches) that
/// hand a workspace's content over ([`Workspace::hand_over`]) whenever the bytes read
/// whole reach half of `batch_bytes`, and the objects of each file streamed in as
/// they come, to a writer thread, which writes each set under `batched`'s lease
/// while `read` goes on reading and cutting the next: the store's write (encoding,
/// SQLite's single-threaded insert) overlaps the next batch's read, FastCDC and
/// BLAKE3 instead of following them. The thread starts at the first hand-over (a
/// commit of small changes starts none). The channel holds nothing: a set waits
/// until the writer takes it, so at most two batches' bytes are in memory. A
/// writer's error is the one returned (the read stops at its next hand-over).
pub(super) fn pipelined<S: snapgraph_store::Store, T>(
    batched: &mut snapgraph_store::Batched<'_, S>,
    batch_bytes: u64,
    read: impl FnOnce(&mut dyn crate::batches::Batches) -> Result<T>,
) -> Result<T> {
    type Writer<'s> = (
        std::sync::mpsc::SyncSender<snapgraph::ObjectSet>,
        std::thread::ScopedJoinHandle<'s, Result<()>>,
    );
    /// The writer thread, started by the first set handed over.
    struct Pipeline<'s, 'b, 'r, S: snapgraph_store::Store> {
        scope: &'s std::thread::Scope<'s, 'b>,
        batched: Option<&'b mut snapgraph_store::Batched<'r, S>>,
        writer: Option<Writer<'s>>,
        unwritten: u64,
        half: u64,
    }
    impl<S: snapgraph_store::Store> Pipeline<'_, '_, '_, S> {
        fn send(&mut self, set: snapgraph::ObjectSet) -> Result<()> {
            crate::interrupt::check(crate::interrupt::NOTHING_COMMITTED)?;
            if let Some(b) = self.batched.take() {
                // From the first batch a lease is held until the commit publishes:
                // a signal then stops the commit instead of the process.
                crate::interrupt::arm();
                crate::interrupt::test_point("batch");
                let (tx, rx) = std::sync::mpsc::sync_channel::<snapgraph::ObjectSet>(0);
                // Off this core (see `crate::cpus`): it writes while this one reads.
                let beside = crate::cpus::Beside::here();
                let handle = self.scope.spawn(move || -> Result<()> {
                    beside.leave();
                    for set in rx {
                        b.write_set(set)?;
                    }
                    Ok(())
                });
                beside.yield_to();
                self.writer = Some((tx, handle));
            }
            let stopped = || CliError::Usage("the store writer stopped".into());
            let (tx, _) = self.writer.as_ref().ok_or_else(stopped)?;
            // A failed send: the writer stopped on an error, which `join` returns.
            tx.send(set).map_err(|_| stopped())
        }
    }
    impl<S: snapgraph_store::Store> crate::batches::Batches for Pipeline<'_, '_, '_, S> {
        fn file_read(&mut self, ws: &mut Workspace, bytes: u64) -> Result<()> {
            crate::interrupt::check(crate::interrupt::NOTHING_COMMITTED)?;
            self.unwritten += bytes;
            if self.unwritten >= self.half {
                self.unwritten = 0;
                self.send(ws.hand_over(None))?;
            }
            Ok(())
        }
        fn objects(&mut self, set: snapgraph::ObjectSet) -> Result<()> {
            self.send(set)
        }
        fn streams(&self) -> bool {
            true
        }
    }
    std::thread::scope(|scope| {
        let mut pipeline = Pipeline {
            scope,
            batched: Some(batched),
            writer: None,
            unwritten: 0,
            half: (batch_bytes / 2).max(1),
        };
        let read = read(&mut pipeline);
        if let Some((tx, handle)) = pipeline.writer.take() {
            drop(tx);
            handle
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))?;
        }
        // A signal received while the last batches were written stops the commit
        // before it publishes.
        read.and_then(|r| crate::interrupt::check(crate::interrupt::NOTHING_COMMITTED).map(|()| r))
    })
}

/// Refuses a new branch or snapshot name a command line would misread
/// ([`crate::rev::misread_as`]) with [`CliError::ReservedName`]. Names made before
/// this check keep working: only where a name is made.
pub(super) fn check_new_name(name: &str) -> Result<()> {
    match crate::rev::misread_as(name) {
        None => Ok(()),
        Some(reason) => Err(CliError::ReservedName {
            name: name.to_string(),
            reason,
        }),
    }
}

pub(super) fn parse_pairs(pairs: &[String], what: &str) -> Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(CliError::Usage(format!("{what} {p:?}: expected KEY=VALUE"))),
        })
        .collect()
}

pub(super) fn resolve_path(ctx: &Ctx, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        ctx.cwd.join(p)
    }
}

/// The workspace paths (`/a/b`, `/` for the root) of `-- PATH` arguments that
/// limit a history (`diff`, `log`): relative to the current directory, as git's
/// pathspecs and `commit PATH` are; an absolute one below the working directory
/// `root` (as the current directory was named, or its canonical path). `.` and
/// `..` are taken lexically: a path of history need not exist in the working
/// directory, so nothing is resolved on disk but the current directory itself. A
/// path that leads out of the working directory is an error naming it (it would
/// match nothing).
pub(super) fn history_paths(ctx: &Ctx, root: &Path, paths: &[String]) -> Result<Vec<String>> {
    use std::path::Component;
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    // Where the command runs, below the root (whose path is canonical).
    let cwd = std::fs::canonicalize(&ctx.cwd).unwrap_or_else(|_| ctx.cwd.clone());
    let here: Vec<&std::ffi::OsStr> = match cwd.strip_prefix(root) {
        Ok(rel) => rel.iter().collect(),
        Err(_) => Vec::new(),
    };
    let outside = |p: &str| {
        CliError::bad_path(
            Path::new(p),
            format!("outside the working directory {}", root.display()),
        )
    };
    paths
        .iter()
        .map(|p| {
            let given = Path::new(p);
            let (mut at, rest) = if !given.is_absolute() {
                (here.clone(), given)
            } else if let Ok(rest) = given.strip_prefix(root) {
                (Vec::new(), rest)
            } else if let Ok(rest) = given.strip_prefix(&ctx.cwd) {
                (here.clone(), rest)
            } else {
                return Err(outside(p));
            };
            for c in rest.components() {
                match c {
                    Component::Normal(name) => at.push(name),
                    Component::ParentDir => {
                        at.pop().ok_or_else(|| outside(p))?;
                    }
                    Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
                }
            }
            let names: Vec<&str> = at
                .iter()
                .map(|n| {
                    n.to_str()
                        .ok_or_else(|| CliError::bad_path(Path::new(p), "not valid UTF-8"))
                })
                .collect::<Result<_>>()?;
            Ok(format!("/{}", names.join("/")))
        })
        .collect()
}

/// A workspace holding commit `id`'s trees, file bytes left in `source`.
pub(super) fn shallow(id: ObjectId, source: &dyn ObjectSource) -> Result<Workspace> {
    checked_out(id, source, CheckoutOptions::new().shallow(true))
}

/// Commit `id` checked out lazily (its root directory only: see
/// [`CheckoutOptions::lazy`]); the scan loads the directories it must change.
pub(super) fn lazy(id: ObjectId, source: &dyn ObjectSource) -> Result<Workspace> {
    checked_out(id, source, CheckoutOptions::new().lazy(true))
}

/// How much of a commit's tree below a path [`checked_out_at`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Below {
    /// The path itself (a directory's entries), nothing under it.
    Nothing,
    /// Also each subdirectory's own entries: a listing then shows how many each
    /// holds, as a full read would.
    Children,
    /// Everything under it.
    All,
}

/// Commit `id` with its trees read where `paths` need them: the directories on the
/// way to each, each itself if it is one, and under each as `below` says (every
/// tree for all of the root). A command about a few paths of a large tree then reads
/// their directories, not the tree.
pub(super) fn checked_out_at(
    id: ObjectId,
    source: &dyn ObjectSource,
    paths: &[&str],
    below: Below,
) -> Result<Workspace> {
    if below == Below::All && paths.contains(&"/") {
        return shallow(id, source);
    }
    let mut ws = lazy(id, source)?;
    ws.load_dirs(paths, source)?;
    if below == Below::Nothing {
        return Ok(ws);
    }
    // A level at a time, each level's directories read in one batch.
    let mut level: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
    while !level.is_empty() {
        let mut subs = Vec::new();
        for dir in &level {
            let Ok(entries) = ws.list(dir) else { continue };
            for e in entries {
                if e.metadata.kind == EntryKind::Dir {
                    subs.push(format!("{}/{}", dir.trim_end_matches('/'), e.name));
                }
            }
        }
        let refs: Vec<&str> = subs.iter().map(String::as_str).collect();
        ws.load_dirs(&refs, source)?;
        level = match below {
            Below::All => subs,
            _ => Vec::new(),
        };
    }
    Ok(ws)
}

/// A new workspace holding commit `id` as `options` say, whatever capabilities it
/// recorded.
fn checked_out(
    id: ObjectId,
    source: &dyn ObjectSource,
    options: CheckoutOptions,
) -> Result<Workspace> {
    let mut ws = Workspace::new();
    let _ = ws.checkout_with(id, source, options.policy(CheckoutPolicy::Force))?;
    Ok(ws)
}

/// The store's objects plus those of an uncommitted working-directory commit.
pub(super) struct Overlay<'a> {
    base: &'a dyn ObjectSource,
    extra: HashMap<ObjectId, Vec<u8>>,
}

/// Commits `ws` in memory on `parent` (the objects `store` has are not made again):
/// the commit's id, and `store` with its new objects over it. The working
/// directory's commit of `status`, `diff`, a checkout's dirty check and `restore`.
pub(super) fn commit_in_memory<'a>(
    ws: &mut Workspace,
    store: &'a dyn ObjectSource,
    parent: Option<ObjectId>,
) -> Result<(ObjectId, Overlay<'a>)> {
    let mut opts = CommitOptions::new().have_in(store);
    if let Some(p) = parent {
        opts = opts.parent(p);
    }
    let made = ws.commit(opts)?;
    let id = made.id();
    let extra = made
        .into_objects()
        .into_iter()
        .map(|(i, b)| (i, b.to_vec()))
        .collect();
    Ok((id, Overlay { base: store, extra }))
}

impl ObjectSource for Overlay<'_> {
    fn get(
        &self,
        id: &ObjectId,
    ) -> std::result::Result<Option<std::borrow::Cow<'_, [u8]>>, snapgraph::BoxError> {
        match self.extra.get(id) {
            Some(b) => Ok(Some(std::borrow::Cow::Borrowed(b))),
            None => self.base.get(id),
        }
    }
    fn contains(&self, id: &ObjectId) -> std::result::Result<bool, snapgraph::BoxError> {
        Ok(self.extra.contains_key(id) || self.base.contains(id)?)
    }
}

/// Reads through a store sharing one snapshot while this lives
/// ([`snapgraph_store::ObjectStore::share_reads`]): for a phase of many small reads
/// (the directories a scan loads, the chunk lists it compares against, a diff's
/// trees), which SQLite then makes in one read transaction. A write through the store
/// ends the snapshot (the next read begins another); so does dropping this.
pub(super) struct SharedReads<'a>(&'a dyn snapgraph_store::ObjectStore);

impl<'a> SharedReads<'a> {
    pub(super) fn new(store: &'a dyn snapgraph_store::ObjectStore) -> Self {
        // A hint: a store that cannot share reads answers each as before.
        let _ = store.share_reads(true);
        Self(store)
    }
}

impl Drop for SharedReads<'_> {
    fn drop(&mut self) {
        // Ending a read transaction cannot lose anything; a failure here shows again
        // (and is reported) at the next transaction of the store.
        let _ = self.0.share_reads(false);
    }
}

/// What a command that commits the working directory in memory (`status`, `diff`
/// against it) reads before its store is open: the index, and, for an index complete
/// for some commit, what changed since it was saved ([`Seen`]). The store can then
/// open on its own thread meanwhile ([`repo::Opening`]); what was seen is used only
/// if the index is complete for the tip read once the store is open.
#[derive(Default)]
pub(super) struct Early {
    index: Option<Index>,
    seen: Option<Seen>,
    /// The watcher's token, if one answered with one: a command that saves the
    /// index for the tree it saw stores it beside (see `crate::watch`).
    token: Option<String>,
    /// The commit the working directory is compared with, where it is not HEAD's
    /// ([`Early::behind`]); HEAD's commit when [`Early::behind`] read it.
    against: Option<ObjectId>,
    head: Option<Option<ObjectId>>,
}

/// A working directory whose branch moved since it was checked out or last
/// committed (another working directory on the same store committed to it, a sync
/// moved it): it holds `base` (with any changes of its own), its branch is at `tip`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Behind {
    /// The commit the stat cache is complete for.
    pub base: ObjectId,
    /// HEAD's commit now.
    pub tip: Option<ObjectId>,
}

/// What changed in the working directory since its index was saved.
pub(super) enum Seen {
    /// A watcher's report (see `crate::watch`), which stands for the survey as in a
    /// commit: nothing changed is answered without a walk, and a list of changes
    /// narrows the scan; nested repositories are then not listed.
    Reported(Vec<String>),
    /// A survey of the whole directory against the index. No clock probe: nothing
    /// is recorded, so its stats decide only this answer.
    Surveyed(scan::Survey),
}

impl Seen {
    /// The answer of the watcher of the working directory at `root` to `asked`
    /// (see [`crate::watch::ask`]), else a survey of it against `ix`.
    fn look(
        root: &Path,
        dot: &Path,
        ix: &Index,
        asked: Option<crate::watch::Asked>,
    ) -> Result<Seen> {
        let reported = asked.and_then(Self::reported);
        Ok(match reported {
            Some(paths) => Seen::Reported(paths),
            None => Seen::Surveyed(scan::survey(root, ix, dot, crate::watch::MAX_PATHS)?),
        })
    }

    /// The paths the watcher's answer to `asked` names as changed, sorted and none
    /// below another, if it names at most [`crate::watch::MAX_PATHS`].
    fn reported(asked: crate::watch::Asked) -> Option<Vec<String>> {
        Self::of_answer(asked.answer()).0
    }

    /// [`reported`](Self::reported) of a watcher's answer, and its token.
    fn of_answer(answer: crate::watch::Answer) -> (Option<Vec<String>>, Option<String>) {
        let paths = answer
            .changed
            .map(scan::minimal)
            .filter(|p| p.len() <= crate::watch::MAX_PATHS);
        (paths, answer.token)
    }
}

impl Behind {
    /// Whether the working directory (its commit `wid`) holds the branch's tip after
    /// all: its stat cache was stale (a save lost in a crash after the commit moved
    /// the branch), so it is not behind.
    pub(super) fn holds_tip(&self, wid: ObjectId, source: &dyn ObjectSource) -> Result<bool> {
        let Some(tip) = self.tip else {
            return Ok(false);
        };
        Ok(SnapshotGraph::commit(wid, source)?.tree == SnapshotGraph::commit(tip, source)?.tree)
    }
}

impl Early {
    /// Whether the working directory is behind its branch ([`Behind`]): its stat
    /// cache is complete for a commit other than HEAD's, one the store holds whole
    /// (not hollow). The
    /// working commit is then compared with that commit, which is what the
    /// directory holds: its own changes are what differs from it.
    pub(super) fn behind(&mut self, wd: &Workdir) -> Result<Option<Behind>> {
        let Some(base) = self.index.as_ref().and_then(Index::base) else {
            return Ok(None);
        };
        let tip = wd.head_commit()?;
        self.head = Some(tip);
        // A commit hollowed by retention (its files gone at the next gc) or one the
        // store lacks cannot be compared with: HEAD's commit is, as before.
        let readable = SnapshotGraph::commit(base, wd.repo.store()).is_ok()
            && !snapgraph_store::hollow::is_hollow(wd.store(), base).unwrap_or(true);
        if tip == Some(base) || !readable {
            return Ok(None);
        }
        // Behind means the branch moved on from the commit held: that commit is
        // below its tip. Not so after `commit --branch OTHER` (the directory holds
        // OTHER's new commit, HEAD's branch never had it), nor when the branch was
        // deleted or forced elsewhere: the directory is compared with HEAD, as
        // before stop 55, and commits onto it.
        match tip {
            Some(t) if SnapshotGraph::is_ancestor(base, [t], wd.store())? => {}
            _ => return Ok(None),
        }
        self.against = Some(base);
        Ok(Some(Behind { base, tip }))
    }

    /// The index of the working directory at `root` and, when it is complete for
    /// some commit, what changed since ([`Seen::look`]).
    pub(super) fn read(root: &Path) -> Result<Early> {
        let dot = root.join(repo::DOT_DIR);
        let index_path = dot.join("index");
        // Asked before the index is opened, answered after; a list of changes then
        // reads the index in part (see `commit`).
        let asked = crate::watch::ask(&dot, &index_path);
        let Some(asked) = asked else {
            let index = Index::load(&index_path, root);
            let seen = match &index {
                Some(ix) if ix.tip.is_some() => Some(Seen::look(root, &dot, ix, None)?),
                _ => None,
            };
            return Ok(Early {
                index,
                seen,
                token: None,
                against: None,
                head: None,
            });
        };
        let opened = Index::open_part(&index_path, root);
        let (reported, token) = Seen::of_answer(asked.answer());
        let index = match (opened, &reported) {
            (Some(opened), Some(paths)) => opened
                .read(paths)
                .or_else(|| Index::load(&index_path, root)),
            _ => Index::load(&index_path, root),
        };
        let seen = match (&index, reported) {
            (Some(ix), _) if ix.tip.is_none() => None,
            (None, _) => None,
            (Some(_), Some(paths)) => Some(Seen::Reported(paths)),
            (Some(ix), None) => Some(Seen::Surveyed(scan::survey(
                root,
                ix,
                &dot,
                crate::watch::MAX_PATHS,
            )?)),
        };
        Ok(Early {
            index,
            seen,
            token,
            against: None,
            head: None,
        })
    }
}

/// The working directory committed in memory (no ref moves, nothing written):
/// its commit id and the objects the store lacks.
///
/// With an index complete for the tip, a survey of the directory (`scan::survey`)
/// answers "nothing changed" itself, or narrows the scan to what differs, on a
/// workspace checked out lazily: the working commit then costs what changed, as a
/// per-turn commit does. More differences than a survey names, or no such index:
/// every tree is checked out (shallow) and the whole tree scanned.
pub(super) fn working_commit<'a>(ctx: &Ctx, wd: &'a Workdir, early: Early) -> Result<Working<'a>> {
    let Early {
        mut index,
        seen,
        token,
        against,
        head,
    } = early;
    let against = against.map(Some).or(head);
    let (id, tip, overlay, report) = working_commit_in(ctx, wd, &mut index, seen, against)?;
    Ok(Working {
        id,
        tip,
        overlay,
        report,
        index,
        token,
    })
}

/// What [`working_commit`] found.
pub(super) struct Working<'a> {
    /// The working directory's commit (the tip's id when nothing differs).
    pub id: ObjectId,
    /// The branch tip (or detached commit) it was compared with, or the commit it
    /// holds when it is behind its branch ([`Early::behind`]).
    pub tip: Option<ObjectId>,
    /// The store, with the objects of [`Working::id`] it lacks.
    pub overlay: Overlay<'a>,
    /// What the scan did.
    pub report: ScanReport,
    /// The stat cache as read (whole, or the part a watcher's report needed), not
    /// updated by what was seen.
    pub index: Option<Index>,
    /// The watcher's token, asked for before anything was looked at (see
    /// [`Early`]): stored beside an index saved for the tree as seen, it lets the
    /// next command ask the watcher what changed since.
    pub token: Option<String>,
}

/// [`working_commit`] with the index read early in `index` (replaced by a whole read
/// where a part would not do).
fn working_commit_in<'a>(
    ctx: &Ctx,
    wd: &'a Workdir,
    index: &mut Option<Index>,
    seen: Option<Seen>,
    against: Option<Option<ObjectId>>,
) -> Result<(ObjectId, Option<ObjectId>, Overlay<'a>, ScanReport)> {
    let tip = match against {
        Some(known) => known,
        None => wd.head_commit()?,
    };
    let store: &dyn ObjectSource = wd.repo.store();
    let index_path = wd.dot.join("index");
    // A partly read index serves a scan narrowed to the watcher's report of the tip
    // it is complete for, only.
    if index.as_ref().is_some_and(|ix| {
        ix.is_part() && (tip.is_none() || ix.tip != tip || !matches!(seen, Some(Seen::Reported(_))))
    }) {
        *index = Index::load(&index_path, &wd.root);
    }
    // The survey's stats serve the whole-tree scan below where the index vouches
    // for them.
    let mut kept = None;
    if let (Some(t), Some(ix)) = (tip, &*index) {
        if ix.tip == Some(t) {
            let unchanged = |files: u64, nested: Vec<PathBuf>| {
                let report = ScanReport {
                    files_skipped: files,
                    entries: ix.entry_count() as u64,
                    nested,
                    ..ScanReport::default()
                };
                let overlay = Overlay {
                    base: store,
                    extra: HashMap::new(),
                };
                (t, tip, overlay, report)
            };
            // What was seen before the tip was known, or now: a watcher's report
            // or a survey (see `Early`).
            let seen = match seen {
                Some(seen) => seen,
                None => Seen::look(
                    &wd.root,
                    &wd.dot,
                    ix,
                    crate::watch::ask(&wd.dot, &index_path),
                )?,
            };
            let survey = match seen {
                Seen::Reported(paths) if paths.is_empty() => {
                    return Ok(unchanged(ix.file_count(), Vec::new()));
                }
                Seen::Reported(paths) => scan::Survey {
                    changed: Some(paths),
                    ..scan::Survey::default()
                },
                Seen::Surveyed(survey) => survey,
            };
            match survey.changed {
                Some(paths) if paths.is_empty() => {
                    return Ok(unchanged(survey.files, survey.nested));
                }
                Some(paths) => {
                    let mut ws = lazy(t, store)?;
                    let pb = ctx.bar(None, "scanning");
                    let mut report = scan::scan_batched(
                        &wd.root,
                        &mut ws,
                        scan::ScanOptions {
                            index: Some(ix),
                            lazy: Some(store),
                            watched: Some(&paths),
                            ..scan::ScanOptions::new(&wd.dot)
                        },
                        &pb,
                        &mut crate::batches::Hashed,
                    )?;
                    pb.finish_and_clear();
                    // The narrowed walk saw part of the tree; the survey saw it all.
                    report.nested = survey.nested;
                    report.files_skipped += survey.files;
                    let (id, overlay) = commit_in_memory(&mut ws, store, tip)?;
                    return Ok((id, tip, overlay, report));
                }
                None => kept = survey.kept,
            }
        }
    }
    if let Some(ix) = index {
        ix.load_skeleton(&index_path);
    }
    let mut ws = match (tip, &*index) {
        (Some(t), Some(ix)) => shallow(t, &SkeletonSource::new(&ix.skeleton, store))?,
        (Some(t), None) => shallow(t, store)?,
        (None, _) => Workspace::new(),
    };
    let pb = ctx.bar(None, "scanning");
    let report = scan::scan_batched(
        &wd.root,
        &mut ws,
        scan::ScanOptions {
            index: index.as_ref(),
            kept: kept.as_ref(),
            ..scan::ScanOptions::new(&wd.dot)
        },
        &pb,
        &mut crate::batches::Hashed,
    )?;
    pb.finish_and_clear();
    let (id, overlay) = commit_in_memory(&mut ws, store, tip)?;
    Ok((id, tip, overlay, report))
}

pub(super) fn files_of_commit(id: ObjectId, source: &dyn ObjectSource) -> Result<Vec<String>> {
    let ws = shallow(id, source)?;
    Ok(ws
        .walk()
        .into_iter()
        .filter(|(_, m)| m.kind != EntryKind::Dir)
        .map(|(p, _)| p)
        .collect())
}

/// The diff from `a` (or nothing) to `b`.
pub(super) fn diff_of(a: Option<ObjectId>, b: ObjectId, source: &dyn ObjectSource) -> Result<Diff> {
    match a {
        Some(a) => Ok(SnapshotGraph::diff(a, b, source)?),
        None => {
            let mut d = Diff::default();
            d.files_added = files_of_commit(b, source)?;
            Ok(d)
        }
    }
}

pub(super) fn diff_json(d: &Diff) -> Value {
    json!({
        "added": d.files_added,
        "modified": d.files_modified,
        "removed": d.files_removed,
    })
}

pub(super) fn changed(d: &Diff) -> usize {
    d.files_added.len() + d.files_modified.len() + d.files_removed.len()
}

pub(super) fn read_key(path: Option<&Path>) -> Result<Option<SnapshotKey>> {
    let Some(path) = path else { return Ok(None) };
    let bytes = std::fs::read(path).at(path)?;
    if bytes.len() == 32 {
        let mut k = [0u8; 32];
        k.copy_from_slice(&bytes);
        return Ok(Some(k));
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut k = [0u8; 32];
    match hex::decode_to_slice(text.trim(), &mut k) {
        Ok(()) => Ok(Some(k)),
        Err(_) => Err(CliError::bad_path(
            path,
            "a key file holds 32 raw bytes or 64 hex digits",
        )),
    }
}

/// Writes a new stat cache for the working directory, just written with commit
/// `id`'s `entries` ([`crate::materialize::Materialized::entries`]), taking stats now
/// (after a probe of the file-system clock, see [`crate::index`]).
pub(super) fn index_after_checkout(
    wd: &Workdir,
    id: ObjectId,
    entries: &[(String, EntryKind, Option<Digest>)],
) -> Result<Index> {
    let probe_ns = crate::index::fs_now(&wd.dot)?;
    let mut index = Index::new(&wd.root, probe_ns);
    let mut complete = true;
    // In the walk's order (parents before children): sorted once at the end.
    let mut recorded = Vec::with_capacity(entries.len());
    for (path, kind, digest) in entries {
        let full = wd.root.join(path.trim_start_matches('/'));
        let entry = match (kind, digest) {
            (EntryKind::Dir, _) => Some(IndexEntry::Dir { listing: None }),
            // The same `lstat` as the scan's, field for field.
            (EntryKind::File, Some(d)) => {
                FileStat::lstat(&full).ok().map(|stat| IndexEntry::File {
                    stat,
                    digest: d.clone(),
                })
            }
            (EntryKind::Symlink, _) => FileStat::lstat(&full)
                .ok()
                .map(|stat| IndexEntry::Symlink { stat }),
            _ => None,
        };
        match entry {
            Some(e) => recorded.push((path.clone(), e)),
            None => complete = false,
        }
    }
    index.entries = crate::index::Entries::from_unsorted(recorded);
    index.tip = Some(id).filter(|_| complete);
    Ok(index)
}

pub(super) use crate::repo::unique_name;

#[cfg(test)]
mod tests {
    use super::*;
    use snapgraph_store::counting::CountingStore;
    use snapgraph_store::{MemoryStore, ObjectStore};

    /// 12 directories of 4 subdirectories of 3 files each (a symlink in one),
    /// committed into a counting memory store; the commit, and how many tree nodes
    /// it has.
    fn tree() -> (CountingStore<MemoryStore>, ObjectId, u64) {
        let mut ws = Workspace::new();
        for d in 0..12 {
            for s in 0..4 {
                for f in 0..3 {
                    let body = format!("d{d} s{s} f{f}\n").repeat(9 + f);
                    ws.write(&format!("/d{d}/s{s}/f{f}"), body.into_bytes())
                        .unwrap();
                }
            }
        }
        ws.symlink("/d3/link", "s1/f0").unwrap();
        let c = ws.commit(CommitOptions::new()).unwrap();
        let id = c.id();
        let objects: Vec<(ObjectId, Vec<u8>)> = c.into_objects().into_iter().collect();
        let trees = objects
            .iter()
            .filter(|(_, b)| b.first() == Some(&snapgraph::ObjectKind::Tree.byte()))
            .count() as u64;
        let store = CountingStore::new(MemoryStore::new());
        let batch: Vec<_> = objects.iter().map(|(i, b)| (*i, &b[..])).collect();
        store.put_many(&batch).unwrap();
        store.take();
        (store, id, trees)
    }

    /// What a command reads of `path` (and below, as `below` says) in `ws`.
    fn view(ws: &Workspace, path: &str, below: Below) -> Vec<String> {
        let mut out = vec![format!("{path}: {:?}", ws.metadata(path))];
        let Ok(m) = ws.metadata(path) else {
            return out;
        };
        if m.kind != EntryKind::Dir || below == Below::Nothing {
            return out;
        }
        let mut dirs = vec![path.to_string()];
        while let Some(dir) = dirs.pop() {
            for e in ws.list(&dir).unwrap() {
                let p = format!("{}/{}", dir.trim_end_matches('/'), e.name);
                out.push(format!("{p}: {:?}", e.metadata));
                match e.metadata.kind {
                    EntryKind::Dir if below == Below::All => dirs.push(p),
                    EntryKind::Symlink => out.push(ws.read_link(&p).unwrap().to_string()),
                    EntryKind::File => out.push(format!("{:?}", ws.file_content_object(&p))),
                    _ => {}
                }
            }
        }
        out
    }

    /// A command about some paths reads the directories on their way and what it
    /// shows below them, and sees there exactly what a read of every tree sees.
    #[test]
    fn a_path_is_read_as_the_whole_tree_holds_it_and_costs_its_directories() {
        let (store, id, trees) = tree();
        let whole = shallow(id, &store).unwrap();
        assert_eq!(store.take().get_ids, 1 + trees, "the commit and every node");
        // (path, below, tree nodes read at most: the root, the path's directories
        // and what is read below them)
        let cases = [
            ("/d7/s2/f1", Below::Nothing, 3),
            ("/d7/s2", Below::Nothing, 3),
            ("/d7", Below::Children, 6),
            ("/d7", Below::All, 6),
            ("/d3/link", Below::Nothing, 2),
            ("/d7/nope/deeper", Below::Nothing, 2),
            ("/nope", Below::Children, 1),
            ("/d7/s2/f1/under-a-file", Below::Nothing, 3),
            ("/", Below::Children, 1 + 12),
        ];
        for (path, below, nodes) in cases {
            let part = checked_out_at(id, &store, &[path], below).unwrap();
            let read = store.take().get_ids;
            assert!(read <= 1 + nodes, "{path} {below:?}: {read} ids read");
            assert!(read < trees, "{path} {below:?}");
            assert_eq!(
                view(&part, path, below),
                view(&whole, path, below),
                "{path}"
            );
        }
        // Several paths, and the root in full (every tree, as before).
        let part = checked_out_at(id, &store, &["/d1", "/d2/s0"], Below::All).unwrap();
        for p in ["/d1", "/d2/s0"] {
            assert_eq!(view(&part, p, Below::All), view(&whole, p, Below::All));
        }
        store.take();
        let all = checked_out_at(id, &store, &["/"], Below::All).unwrap();
        assert_eq!(store.take().get_ids, 1 + trees);
        assert_eq!(all.walk(), whole.walk());
    }

    /// A diff's side reads the directories of the files it shows, not the tree.
    #[test]
    fn a_diff_side_reads_the_directories_of_its_files() {
        let (store, id, trees) = tree();
        let mut side = patch::Side::open(Some(id), &store);
        let bytes = side.bytes("/d5/s1/f2").unwrap().unwrap();
        assert_eq!(bytes, "d5 s1 f2\n".repeat(11).into_bytes());
        let read = store.take().get_ids;
        // The commit, the root, /d5, /d5/s1, the file's chunk.
        assert!(read <= 5, "{read} ids read of {trees} tree nodes");
        assert_eq!(side.bytes("/d9/nope").unwrap(), Some(Vec::new()));
        assert_eq!(side.bytes("/d3/link").unwrap(), Some(b"s1/f0".to_vec()));
    }
}
