//! The commands: each takes its parsed arguments and prints its result (text, or
//! JSON with `--json`).
//!
//! ## Checkout into the working directory
//!
//! The commit is written into a staging directory inside `.snapgraph/` (so on the
//! same file system), then swapped in: every top-level entry of the working
//! directory is renamed into a second directory inside `.snapgraph/`, every entry
//! of the staging directory renamed into place, and the old entries deleted. A
//! failure during the swap renames everything back. Top-level entries ignored by
//! the root `.snapgraphignore` stay where they are (unless the commit has an entry of
//! the same name). Without `--force`, a working directory that differs from the
//! current branch's tip is refused. Checking out a branch by name makes it current;
//! checking out anything else keeps the current branch (the next commit then records
//! the checked-out content on top of it). `restore` never changes the current branch.
//!
//! With `--to DIR`, the staging directory is a sibling of DIR and is renamed to DIR
//! in one step: DIR appears complete or not at all.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use snapgraph::{
    CheckoutOptions, CheckoutPolicy, CommitOptions, Diff, EntryKind, ObjectId, ObjectSource,
    SnapshotGraph, SnapshotKey, SnapshotOptions, Workspace,
};
use snapgraph_store::{RepoCommitOptions, Store, SyncOptions};

use crate::cli::{CheckoutArgs, Cli, Command, SnapshotsAction};
use crate::error::{CliError, IoContext, Result};
use crate::index::{Index, IndexEntry, INDEX_VERSION};
use crate::repo::{self, Workdir};
use crate::scan::{self, ScanReport};

/// Global options every command sees.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// `--json`.
    pub json: bool,
    /// Progress bars wanted.
    pub progress: bool,
    /// The directory the command runs in.
    pub cwd: PathBuf,
}

impl Ctx {
    fn bar(&self, len: Option<u64>, what: &str) -> indicatif::ProgressBar {
        crate::progress::bar(self.progress, len, what)
    }

    fn open(&self) -> Result<Workdir> {
        repo::discover(&self.cwd)
    }

    fn print(&self, value: Value, text: impl FnOnce()) {
        if self.json {
            println!("{value}");
        } else {
            text();
        }
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
    };
    match cli.command {
        Command::Init { dir, store } => init(&ctx, dir, store.as_deref()),
        Command::Commit {
            path,
            message,
            branch,
            meta,
        } => commit(&ctx, path, message, branch, &meta),
        Command::Status => status(&ctx),
        Command::Log { rev, limit } => log(&ctx, rev.as_deref(), limit),
        Command::Show { rev } => show(&ctx, &rev),
        Command::Diff { a, b, stat } => diff(&ctx, &a, b.as_deref(), stat),
        Command::Ls { spec, recursive } => ls(&ctx, &spec, recursive),
        Command::Cat { spec } => cat(&ctx, &spec),
        Command::Checkout(args) => checkout(&ctx, &args, true),
        Command::Restore(args) => checkout(&ctx, &args, false),
        Command::Branch { name, at, delete } => branch(&ctx, name, at, delete),
        Command::Tag { name, at, label } => tag(&ctx, &name, at.as_deref(), &label),
        Command::Fork { new, at } => fork(&ctx, &new, &at),
        Command::Snapshots { action } => snapshots(&ctx, action.unwrap_or(SnapshotsAction::List)),
        Command::Gc {
            break_leases,
            clear_marker,
            wait,
        } => gc(&ctx, break_leases, clear_marker, wait),
        Command::Verify { read_data } => verify(&ctx, read_data),
        Command::Pack {
            rev,
            output,
            key_file,
            compress,
        } => pack(&ctx, &rev, &output, key_file.as_deref(), compress),
        Command::Unpack {
            file,
            key_file,
            branch,
        } => unpack(&ctx, &file, key_file.as_deref(), branch),
        Command::Export { rev, output } => export(&ctx, &rev, &output),
        Command::Import {
            file,
            message,
            branch,
        } => import(&ctx, &file, message, branch),
        Command::Sync {
            src,
            dst,
            reference,
            force,
        } => sync(&ctx, &src, &dst, reference.as_deref(), force),
    }
}

// ------------------------------------------------------------------ helpers

fn parse_pairs(pairs: &[String], what: &str) -> Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(CliError::Usage(format!("{what} {p:?}: expected KEY=VALUE"))),
        })
        .collect()
}

fn resolve_path(ctx: &Ctx, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        ctx.cwd.join(p)
    }
}

/// A workspace holding commit `id`'s trees, file bytes left in `source`.
fn shallow(id: ObjectId, source: &dyn ObjectSource) -> Result<Workspace> {
    let mut ws = Workspace::new();
    let _ = ws.checkout_with(
        id,
        source,
        CheckoutOptions::new()
            .policy(CheckoutPolicy::Force)
            .shallow(true),
    )?;
    Ok(ws)
}

/// The store's objects plus those of an uncommitted working-directory commit.
struct Overlay<'a> {
    base: &'a dyn ObjectSource,
    extra: HashMap<ObjectId, Vec<u8>>,
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

/// The working directory committed in memory (no ref moves, nothing written):
/// its commit id and the objects the store lacks.
fn working_commit<'a>(
    ctx: &Ctx,
    wd: &'a Workdir,
) -> Result<(ObjectId, Option<ObjectId>, Overlay<'a>, ScanReport)> {
    let branch = wd.head_branch()?;
    let tip = wd.repo.branch(&branch)?;
    let store: &dyn ObjectSource = wd.repo.store();
    let mut ws = match tip {
        Some(t) => shallow(t, store)?,
        None => Workspace::new(),
    };
    let index = Index::load(&wd.dot.join("index"), &wd.root);
    let pb = ctx.bar(None, "scanning");
    let report = scan::scan(&wd.root, &mut ws, index.as_ref(), &wd.dot, &pb)?;
    pb.finish_and_clear();
    let mut opts = CommitOptions::new().have_in(store);
    if let Some(t) = tip {
        opts = opts.parent(t);
    }
    let c = ws.commit(opts)?;
    let id = c.id();
    let extra = c
        .into_objects()
        .into_iter()
        .map(|(i, b)| (i, b.to_vec()))
        .collect();
    Ok((id, tip, Overlay { base: store, extra }, report))
}

fn files_of_commit(id: ObjectId, source: &dyn ObjectSource) -> Result<Vec<String>> {
    let ws = shallow(id, source)?;
    Ok(ws
        .walk()
        .into_iter()
        .filter(|(_, m)| m.kind != EntryKind::Dir)
        .map(|(p, _)| p)
        .collect())
}

/// The diff from `a` (or nothing) to `b`.
fn diff_of(a: Option<ObjectId>, b: ObjectId, source: &dyn ObjectSource) -> Result<Diff> {
    match a {
        Some(a) => Ok(SnapshotGraph::diff(a, b, source)?),
        None => {
            let mut d = Diff::default();
            d.files_added = files_of_commit(b, source)?;
            Ok(d)
        }
    }
}

fn diff_json(d: &Diff) -> Value {
    json!({
        "added": d.files_added,
        "modified": d.files_modified,
        "removed": d.files_removed,
    })
}

fn print_diff(d: &Diff, stat: bool) {
    if stat {
        println!(
            "{} added, {} modified, {} removed",
            d.files_added.len(),
            d.files_modified.len(),
            d.files_removed.len()
        );
        return;
    }
    let mut lines: Vec<(&str, char)> = Vec::new();
    lines.extend(d.files_added.iter().map(|p| (p.as_str(), 'A')));
    lines.extend(d.files_modified.iter().map(|p| (p.as_str(), 'M')));
    lines.extend(d.files_removed.iter().map(|p| (p.as_str(), 'D')));
    lines.sort();
    for (p, c) in lines {
        println!("{c} {}", p.trim_start_matches('/'));
    }
}

fn changed(d: &Diff) -> usize {
    d.files_added.len() + d.files_modified.len() + d.files_removed.len()
}

/// Splits `REV:PATH` (PATH optional when `need_path` is false) into the revision
/// and a workspace path.
fn split_spec(spec: &str, need_path: bool) -> Result<(String, String)> {
    let (rev, path) = match spec.split_once(':') {
        Some((r, p)) => (r, p),
        None if need_path => {
            return Err(CliError::Usage(format!(
                "{spec:?}: expected REV:PATH (for example main:src/lib.rs)"
            )))
        }
        None => (spec, ""),
    };
    let path = format!("/{}", path.trim_matches('/'));
    Ok((rev.to_string(), path))
}

fn read_key(path: Option<&Path>) -> Result<Option<SnapshotKey>> {
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

/// Writes a new stat cache for `root` from `digests`, taking stats now (after a
/// probe of the file-system clock, see [`crate::index`]).
fn write_index_after_checkout(wd: &Workdir, digests: &[(String, String)]) -> Result<()> {
    let probe_ns = repo::fs_now(&wd.dot)?;
    let mut entries = BTreeMap::new();
    for (path, digest) in digests {
        let full = wd.root.join(path.trim_start_matches('/'));
        if let Ok(m) = std::fs::symlink_metadata(&full) {
            entries.insert(
                path.clone(),
                IndexEntry {
                    stat: crate::index::FileStat::of(&m),
                    digest: digest.clone(),
                },
            );
        }
    }
    Index {
        version: INDEX_VERSION,
        root: wd.root.clone(),
        probe_ns,
        entries,
    }
    .save(&wd.dot.join("index"))
}

fn unique_name(base: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{base}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

// ------------------------------------------------------------------ commands

fn init(ctx: &Ctx, dir: Option<PathBuf>, store: Option<&str>) -> Result<()> {
    let dir = resolve_path(ctx, dir.as_deref().unwrap_or(Path::new(".")));
    std::fs::create_dir_all(&dir).at(&dir)?;
    let wd = repo::init(&dir, store)?;
    ctx.print(json!({"root": wd.root, "store": wd.store_url}), || {
        println!(
            "initialized snapgraph repository in {} (store {})",
            wd.dot.display(),
            wd.store_url
        )
    });
    Ok(())
}

fn commit(
    ctx: &Ctx,
    path: Option<PathBuf>,
    message: Option<String>,
    branch: Option<String>,
    meta: &[String],
) -> Result<()> {
    let meta = parse_pairs(meta, "--meta")?;
    let wd = ctx.open()?;
    let root = match path {
        Some(p) => {
            let p = resolve_path(ctx, &p);
            std::fs::canonicalize(&p).at(&p)?
        }
        None => wd.root.clone(),
    };
    let branch = match branch {
        Some(b) => b,
        None => wd.head_branch()?,
    };
    let store: &dyn ObjectSource = wd.repo.store();
    let tip = wd.repo.branch(&branch)?;
    let mut ws = match tip {
        Some(t) => shallow(t, store)?,
        None => Workspace::new(),
    };
    let index_path = wd.dot.join("index");
    let index = Index::load(&index_path, &root);
    let probe_ns = repo::fs_now(&wd.dot)?;
    let pb = ctx.bar(None, "scanning");
    let report = scan::scan(&root, &mut ws, index.as_ref(), &wd.dot, &pb)?;
    pb.finish_and_clear();
    let committed = wd.repo.commit(
        &mut ws,
        &branch,
        RepoCommitOptions {
            message,
            meta,
            extra_parents: Vec::new(),
            onto_tip: false,
        },
    )?;
    // The stat cache for the next commit.
    let mut entries = BTreeMap::new();
    for (path, stat) in &report.stats {
        if let Some(digest) = scan::digest_of(&ws, path) {
            entries.insert(
                path.clone(),
                IndexEntry {
                    stat: *stat,
                    digest,
                },
            );
        }
    }
    Index {
        version: INDEX_VERSION,
        root: root.clone(),
        probe_ns,
        entries,
    }
    .save(&index_path)?;
    let d = diff_of(committed.previous, committed.id, store)?;
    ctx.print(
        json!({
            "id": committed.id.to_string(),
            "branch": branch,
            "previous": committed.previous.map(|p| p.to_string()),
            "files_read": report.files_read,
            "bytes_read": report.bytes_read,
            "files_skipped": report.files_skipped,
            "files_changed": changed(&d),
            "files_added": d.files_added.len(),
            "files_modified": d.files_modified.len(),
            "files_removed": d.files_removed.len(),
            "new_objects": committed.objects_written,
            "new_bytes": committed.bytes_written,
        }),
        || {
            println!("[{branch} {}] committed", committed.id);
            println!(
                "files read: {}, files changed: {} (+{} ~{} -{}), new objects: {}, new bytes: {}",
                report.files_read,
                changed(&d),
                d.files_added.len(),
                d.files_modified.len(),
                d.files_removed.len(),
                committed.objects_written,
                committed.bytes_written
            );
        },
    );
    Ok(())
}

fn status(ctx: &Ctx) -> Result<()> {
    let wd = ctx.open()?;
    let (id, tip, overlay, _) = working_commit(ctx, &wd)?;
    let d = diff_of(tip, id, &overlay)?;
    ctx.print(diff_json(&d), || {
        if changed(&d) == 0 {
            println!(
                "nothing changed since {}",
                wd.head_branch().unwrap_or_default()
            );
        } else {
            print_diff(&d, false);
        }
    });
    Ok(())
}

fn log(ctx: &Ctx, rev: Option<&str>, limit: usize) -> Result<()> {
    let wd = ctx.open()?;
    let id = wd.resolve(rev.unwrap_or("HEAD"))?;
    let entries = wd.repo.log(&id.to_string(), limit)?;
    let value: Vec<Value> = entries
        .iter()
        .map(|(id, c)| {
            json!({
                "id": id.to_string(),
                "parents": c.parents.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "generation": c.generation,
                "meta": c.meta,
            })
        })
        .collect();
    ctx.print(Value::Array(value), || {
        for (id, c) in &entries {
            println!("commit {id}");
            if c.parents.len() > 1 {
                let ps: Vec<String> = c.parents.iter().map(ToString::to_string).collect();
                println!("merge: {}", ps.join(" "));
            }
            for (k, v) in &c.meta {
                if k != "message" {
                    println!("{k}: {v}");
                }
            }
            println!();
            println!("    {}", c.meta.get("message").map_or("", String::as_str));
            println!();
        }
    });
    Ok(())
}

fn show(ctx: &Ctx, rev: &str) -> Result<()> {
    let wd = ctx.open()?;
    let id = wd.resolve(rev)?;
    let store: &dyn ObjectSource = wd.repo.store();
    let c = SnapshotGraph::commit(id, store)?;
    let d = diff_of(c.parents.first().copied(), id, store)?;
    ctx.print(
        json!({
            "id": id.to_string(),
            "tree": c.tree.to_string(),
            "parents": c.parents.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "generation": c.generation,
            "meta": c.meta,
            "diff": diff_json(&d),
        }),
        || {
            println!("commit {id}");
            println!("tree {}", c.tree);
            for p in &c.parents {
                println!("parent {p}");
            }
            println!("generation {}", c.generation);
            for (k, v) in &c.meta {
                println!("{k}: {v}");
            }
            println!();
            print_diff(&d, false);
        },
    );
    Ok(())
}

fn diff(ctx: &Ctx, a: &str, b: Option<&str>, stat: bool) -> Result<()> {
    let wd = ctx.open()?;
    let a = wd.resolve(a)?;
    let d = match b {
        Some(b) => {
            let b = wd.resolve(b)?;
            SnapshotGraph::diff(a, b, wd.repo.store())?
        }
        None => {
            let (id, _, overlay, _) = working_commit(ctx, &wd)?;
            SnapshotGraph::diff(a, id, &overlay)?
        }
    };
    let mut v = diff_json(&d);
    if stat {
        v = json!({
            "added": d.files_added.len(),
            "modified": d.files_modified.len(),
            "removed": d.files_removed.len(),
        });
    }
    ctx.print(v, || print_diff(&d, stat));
    Ok(())
}

fn entry_json(name: &str, m: &snapgraph::Metadata, target: Option<&str>) -> Value {
    let kind = match m.kind {
        EntryKind::File => "file",
        EntryKind::Dir => "dir",
        EntryKind::Symlink => "symlink",
    };
    json!({"name": name, "kind": kind, "mode": format!("{:04o}", m.mode), "size": m.size, "target": target})
}

fn ls(ctx: &Ctx, spec: &str, recursive: bool) -> Result<()> {
    let wd = ctx.open()?;
    let (rev, path) = split_spec(spec, false)?;
    let id = wd.resolve(&rev)?;
    let ws = shallow(id, wd.repo.store())?;
    let meta = ws.metadata(&path).map_err(|_| CliError::NotInCommit {
        commit: id,
        path: path.clone(),
    })?;
    let mut rows: Vec<(String, snapgraph::Metadata)> = Vec::new();
    if meta.kind != EntryKind::Dir {
        rows.push((path.trim_start_matches('/').to_string(), meta.clone()));
    } else if recursive {
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        for (p, m) in ws.walk() {
            if let Some(rest) = p.strip_prefix(&prefix) {
                rows.push((rest.to_string(), m));
            }
        }
    } else {
        for e in ws.list(&path)? {
            rows.push((e.name, e.metadata));
        }
    }
    let full = |name: &str| {
        if meta.kind != EntryKind::Dir {
            path.clone()
        } else if path == "/" {
            format!("/{name}")
        } else {
            format!("{path}/{name}")
        }
    };
    let targets: Vec<Option<String>> = rows
        .iter()
        .map(|(n, m)| {
            (m.kind == EntryKind::Symlink)
                .then(|| ws.read_link(&full(n)).ok().map(str::to_string))
                .flatten()
        })
        .collect();
    let value: Vec<Value> = rows
        .iter()
        .zip(&targets)
        .map(|((n, m), t)| entry_json(n, m, t.as_deref()))
        .collect();
    ctx.print(Value::Array(value), || {
        for ((n, m), t) in rows.iter().zip(&targets) {
            let kind = match m.kind {
                EntryKind::File => "file",
                EntryKind::Dir => "dir",
                EntryKind::Symlink => "link",
            };
            let suffix = t.as_ref().map(|t| format!(" -> {t}")).unwrap_or_default();
            println!("{:04o} {kind:4} {:>12} {n}{suffix}", m.mode, m.size);
        }
    });
    Ok(())
}

fn cat(ctx: &Ctx, spec: &str) -> Result<()> {
    let wd = ctx.open()?;
    let (rev, path) = split_spec(spec, true)?;
    let id = wd.resolve(&rev)?;
    let store: &dyn ObjectSource = wd.repo.store();
    let mut ws = shallow(id, store)?;
    match ws.metadata(&path) {
        Ok(m) if m.kind == EntryKind::File => {}
        Ok(m) if m.kind == EntryKind::Symlink => {
            return Err(CliError::Usage(format!(
                "{path} in commit {id} is a symlink to {}",
                ws.read_link(&path)?
            )))
        }
        Ok(_) => {
            return Err(CliError::Usage(format!(
                "{path} in commit {id} is a directory (use ls)"
            )))
        }
        Err(_) => return Err(CliError::NotInCommit { commit: id, path }),
    }
    ws.load_content(&path, store)?;
    let mut out = std::io::stdout().lock();
    out.write_all(ws.read(&path)?).at("<stdout>")?;
    out.flush().at("<stdout>")?;
    Ok(())
}

fn checkout(ctx: &Ctx, args: &CheckoutArgs, move_head: bool) -> Result<()> {
    let wd = ctx.open()?;
    let id = wd.resolve(&args.rev)?;
    let store: &dyn ObjectSource = wd.repo.store();
    let mut ws = shallow(id, store)?;
    let root_mode = ws.metadata("/")?.mode & 0o777;
    let pb = ctx.bar(Some(0), "checkout");
    let (target, done) = match &args.to {
        Some(to) => {
            let to = resolve_path(ctx, to);
            match std::fs::symlink_metadata(&to) {
                Ok(m) if m.is_dir() => {
                    if std::fs::read_dir(&to).at(&to)?.next().is_some() {
                        return Err(CliError::bad_path(&to, "exists and is not empty"));
                    }
                }
                Ok(_) => return Err(CliError::bad_path(&to, "exists and is not a directory")),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(CliError::io(&to, e)),
            }
            let name = to
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| CliError::bad_path(&to, "needs a final UTF-8 name"))?;
            let parent = to.parent().unwrap_or(Path::new("."));
            let staging = parent.join(unique_name(&format!(".{name}.snapgraph-staging")));
            let done = match crate::materialize::materialize(&mut ws, store, id, &staging, &pb) {
                Ok(d) => d,
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&staging);
                    return Err(e);
                }
            };
            let swap = std::fs::rename(&staging, &to).and_then(|()| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&to, std::fs::Permissions::from_mode(root_mode))
            });
            if let Err(e) = swap {
                let _ = std::fs::remove_dir_all(&staging);
                return Err(CliError::io(&to, e));
            }
            (to, done)
        }
        None => {
            if !args.force {
                let (wid, tip, overlay, report) = working_commit(ctx, &wd)?;
                let dirty = match tip {
                    Some(t) => {
                        SnapshotGraph::commit(wid, &overlay)?.tree
                            != SnapshotGraph::commit(t, &overlay)?.tree
                    }
                    None => report.entries > 0,
                };
                if dirty {
                    let summary = match tip {
                        Some(t) => {
                            let d = SnapshotGraph::diff(t, wid, &overlay)?;
                            format!(
                                "{} added, {} modified, {} removed",
                                d.files_added.len(),
                                d.files_modified.len(),
                                d.files_removed.len()
                            )
                        }
                        None => "files present and nothing committed".to_string(),
                    };
                    return Err(CliError::Dirty {
                        path: wd.root.clone(),
                        summary,
                    });
                }
            }
            let staging = wd.dot.join(unique_name("staging"));
            let done = match crate::materialize::materialize(&mut ws, store, id, &staging, &pb) {
                Ok(d) => d,
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&staging);
                    return Err(e);
                }
            };
            let r = swap_into(&wd, &staging);
            let _ = std::fs::remove_dir_all(&staging);
            r?;
            write_index_after_checkout(&wd, &done.digests)?;
            if move_head && wd.repo.branch(&args.rev).ok().flatten() == Some(id) {
                wd.set_head_branch(&args.rev)?;
            }
            (wd.root.clone(), done)
        }
    };
    pb.finish_and_clear();
    ctx.print(
        json!({
            "id": id.to_string(),
            "to": target,
            "files": done.files,
            "dirs": done.dirs,
            "symlinks": done.symlinks,
            "bytes": done.bytes,
        }),
        || {
            println!(
                "checked out {id} into {}: {} files, {} directories, {} symlinks, {} bytes",
                target.display(),
                done.files,
                done.dirs,
                done.symlinks,
                done.bytes
            )
        },
    );
    Ok(())
}

/// Replaces the working directory's top-level entries (but `.snapgraph/` and
/// ignored ones) with the staging directory's, rolling back on failure.
fn swap_into(wd: &Workdir, staging: &Path) -> Result<()> {
    let ignore_file = wd.root.join(scan::IGNORE_FILE);
    let ignore = {
        let mut b = ignore::gitignore::GitignoreBuilder::new(&wd.root);
        if ignore_file.is_file() {
            let _ = b.add(&ignore_file);
        }
        b.build().ok()
    };
    let mut incoming: Vec<std::ffi::OsString> = Vec::new();
    for e in std::fs::read_dir(staging).at(staging)? {
        incoming.push(e.at(staging)?.file_name());
    }
    let old = wd.dot.join(unique_name("old"));
    std::fs::create_dir(&old).at(&old)?;
    let mut moved_out: Vec<std::ffi::OsString> = Vec::new();
    let mut moved_in: Vec<std::ffi::OsString> = Vec::new();
    let rollback = |moved_out: &[std::ffi::OsString], moved_in: &[std::ffi::OsString]| {
        for n in moved_in {
            let _ = std::fs::rename(wd.root.join(n), staging.join(n));
        }
        for n in moved_out {
            let _ = std::fs::rename(old.join(n), wd.root.join(n));
        }
        let _ = std::fs::remove_dir_all(&old);
    };
    let entries: Vec<_> = std::fs::read_dir(&wd.root)
        .at(&wd.root)?
        .collect::<std::io::Result<Vec<_>>>()
        .at(&wd.root)?;
    for e in entries {
        let name = e.file_name();
        if name == repo::DOT_DIR {
            continue;
        }
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        let ignored = ignore
            .as_ref()
            .is_some_and(|g| g.matched(wd.root.join(&name), is_dir).is_ignore());
        if ignored && !incoming.contains(&name) {
            continue;
        }
        if let Err(err) = std::fs::rename(e.path(), old.join(&name)) {
            rollback(&moved_out, &moved_in);
            return Err(CliError::io(e.path(), err));
        }
        moved_out.push(name);
    }
    for name in &incoming {
        if let Err(err) = std::fs::rename(staging.join(name), wd.root.join(name)) {
            rollback(&moved_out, &moved_in);
            return Err(CliError::io(wd.root.join(name), err));
        }
        moved_in.push(name.clone());
    }
    std::fs::remove_dir_all(&old).at(&old)?;
    Ok(())
}

fn branch(ctx: &Ctx, name: Option<String>, at: Option<String>, delete: bool) -> Result<()> {
    let wd = ctx.open()?;
    let Some(name) = name else {
        let current = wd.head_branch()?;
        let branches = wd.repo.branches()?;
        let value: Vec<Value> = branches
            .iter()
            .map(|(n, id)| json!({"name": n, "id": id.to_string(), "current": *n == current}))
            .collect();
        ctx.print(Value::Array(value), || {
            for (n, id) in &branches {
                let mark = if *n == current { '*' } else { ' ' };
                println!("{mark} {n} {id}");
            }
            if !branches.iter().any(|(n, _)| *n == current) {
                println!("* {current} (no commits yet)");
            }
        });
        return Ok(());
    };
    if delete {
        let tip = wd.repo.branch(&name)?.ok_or_else(|| {
            CliError::Repo(snapgraph_store::RepoError::UnknownRevision { rev: name.clone() })
        })?;
        if name == wd.head_branch()? {
            return Err(CliError::Usage(format!(
                "cannot delete the current branch {name}; check out another one first"
            )));
        }
        wd.repo.delete_branch(&name, tip)?;
        ctx.print(json!({"deleted": name, "id": tip.to_string()}), || {
            println!("deleted branch {name} (was {tip})")
        });
        return Ok(());
    }
    let at = wd.resolve(at.as_deref().unwrap_or("HEAD"))?;
    let id = wd.repo.fork(&name, &at.to_string())?;
    ctx.print(json!({"branch": name, "id": id.to_string()}), || {
        println!("created branch {name} at {id}")
    });
    Ok(())
}

fn tag(ctx: &Ctx, name: &str, at: Option<&str>, labels: &[String]) -> Result<()> {
    let labels = parse_pairs(labels, "--label")?;
    let wd = ctx.open()?;
    let at = wd.resolve(at.unwrap_or("HEAD"))?;
    let info = wd.repo.tag(name, &at.to_string(), labels)?;
    ctx.print(snapshot_json(&info), || {
        println!("snapshot {} = {} (of {})", info.name, info.id, info.target)
    });
    Ok(())
}

fn fork(ctx: &Ctx, new: &str, at: &str) -> Result<()> {
    let wd = ctx.open()?;
    let at = wd.resolve(at)?;
    let id = wd.repo.fork(new, &at.to_string())?;
    ctx.print(json!({"branch": new, "id": id.to_string()}), || {
        println!("created branch {new} at {id}")
    });
    Ok(())
}

fn snapshot_json(s: &snapgraph_store::SnapshotInfo) -> Value {
    json!({"name": s.name, "id": s.id.to_string(), "target": s.target.to_string(), "labels": s.labels})
}

fn snapshots(ctx: &Ctx, action: SnapshotsAction) -> Result<()> {
    let wd = ctx.open()?;
    match action {
        SnapshotsAction::List => {
            let all = wd.repo.snapshots()?;
            ctx.print(
                Value::Array(all.iter().map(snapshot_json).collect()),
                || {
                    for s in &all {
                        let labels: Vec<String> =
                            s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        println!("{} {} {}", s.name, s.target, labels.join(" "));
                    }
                },
            );
        }
        SnapshotsAction::Inspect { name } => {
            let s = wd.repo.inspect(&name)?;
            ctx.print(snapshot_json(&s), || {
                println!("snapshot {}", s.name);
                println!("id {}", s.id);
                println!("target {}", s.target);
                for (k, v) in &s.labels {
                    println!("{k}: {v}");
                }
            });
        }
        SnapshotsAction::Remove { name, force } => {
            let s = wd.repo.remove_snapshot(&name, force)?;
            ctx.print(snapshot_json(&s), || {
                println!("removed snapshot {} (was {})", s.name, s.id)
            });
        }
    }
    Ok(())
}

fn gc(ctx: &Ctx, break_leases: bool, clear_marker: bool, wait: u64) -> Result<()> {
    let wd = ctx.open()?;
    if break_leases {
        let n = snapgraph_store::gc::break_leases(wd.store())?;
        eprintln!("removed {n} writer lease(s)");
    }
    if clear_marker && snapgraph_store::gc::clear_marker(wd.store())? {
        eprintln!("removed a sweep marker");
    }
    let pb = ctx.bar(None, "gc");
    let options = snapgraph_store::GcOptions {
        lease_wait: std::time::Duration::from_secs(wait),
        ..Default::default()
    };
    let r = snapgraph_store::gc::collect_with(wd.store(), &options)?;
    pb.finish_and_clear();
    ctx.print(
        json!({"deleted": r.deleted.len(), "kept": r.kept, "refs": r.refs, "problems": r.problems.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>()}),
        || {
            println!(
                "gc: deleted {} objects, kept {}, marked from {} refs",
                r.deleted.len(),
                r.kept,
                r.refs
            );
            for p in &r.problems {
                println!("problem: {p:?}");
            }
        },
    );
    Ok(())
}

fn verify(ctx: &Ctx, read_data: bool) -> Result<()> {
    let wd = ctx.open()?;
    let pb = ctx.bar(None, "verify");
    let r = snapgraph_store::verify(wd.store(), read_data)?;
    pb.finish_and_clear();
    let problems: Vec<String> = r.problems.iter().map(|p| format!("{p:?}")).collect();
    ctx.print(
        json!({
            "clean": r.is_clean(), "refs": r.refs, "objects": r.objects,
            "reachable": r.reachable, "rehashed": r.rehashed, "bytes": r.bytes,
            "unreachable": r.unreachable, "problems": problems, "broken_refs": r.broken_refs,
        }),
        || {
            println!(
                "verify: {} refs, {} objects ({} reachable, {} unreachable), {} re-hashed ({} bytes): {}",
                r.refs,
                r.objects,
                r.reachable,
                r.unreachable,
                r.rehashed,
                r.bytes,
                if r.is_clean() { "ok" } else { "PROBLEMS" }
            );
            for p in &problems {
                println!("problem: {p}");
            }
            for b in &r.broken_refs {
                println!("broken ref: {b}");
            }
        },
    );
    if r.is_clean() {
        Ok(())
    } else {
        Err(CliError::VerifyFailed {
            count: r.problems.len(),
        })
    }
}

fn pack(ctx: &Ctx, rev: &str, output: &Path, key: Option<&Path>, compress: bool) -> Result<()> {
    let key = read_key(key)?;
    let wd = ctx.open()?;
    let id = wd.resolve(rev)?;
    let mut ws = Workspace::new();
    let _ = ws.checkout(id, wd.repo.store(), CheckoutPolicy::Force)?;
    let bytes = ws.snapshot_with(
        SnapshotOptions {
            compress,
            ..SnapshotOptions::default()
        },
        key.as_ref(),
    )?;
    let output = resolve_path(ctx, output);
    repo::write_atomic(&output, &bytes)?;
    ctx.print(
        json!({"id": id.to_string(), "file": output, "bytes": bytes.len(), "keyed": key.is_some()}),
        || {
            println!(
                "packed {id} into {} ({} bytes{})",
                output.display(),
                bytes.len(),
                if key.is_some() { ", keyed" } else { "" }
            )
        },
    );
    Ok(())
}

fn unpack(ctx: &Ctx, file: &Path, key: Option<&Path>, branch: Option<String>) -> Result<()> {
    let key = read_key(key)?;
    let wd = ctx.open()?;
    let file = resolve_path(ctx, file);
    let bytes = std::fs::read(&file).at(&file)?;
    let mut ws = match &key {
        Some(k) => Workspace::from_snapshot_keyed(&bytes, k),
        None => Workspace::from_snapshot(&bytes),
    }
    .map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
    let branch = match branch {
        Some(b) => b,
        None => {
            // Named after the commit: commit once in memory to learn its id (the
            // workspace keeps the objects it built, so the commit below reuses them).
            let id = ws.commit(CommitOptions::new())?.id();
            format!("unpacked-{}", &id.to_string()[..12])
        }
    };
    // Objects and branch under a writer's lease, so a concurrent `gc` cannot sweep
    // what the commit reuses before the branch exists.
    let id = wd
        .repo
        .commit_new_branch(&mut ws, &branch, RepoCommitOptions::default())?
        .id;
    ctx.print(json!({"id": id.to_string(), "branch": branch}), || {
        println!("unpacked {id} onto new branch {branch}")
    });
    Ok(())
}

fn export(ctx: &Ctx, rev: &str, output: &Path) -> Result<()> {
    let wd = ctx.open()?;
    let id = wd.resolve(rev)?;
    let store: &dyn ObjectSource = wd.repo.store();
    let mut ws = shallow(id, store)?;
    let output = resolve_path(ctx, output);
    let dir = output.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(unique_name(".snapgraph-export"));
    let pb = ctx.bar(Some(0), "export");
    let result = (|| -> Result<u64> {
        let file = std::fs::File::create(&tmp).at(&tmp)?;
        let file = std::io::BufWriter::new(file);
        let (file, n) = if crate::tarball::is_zstd(&output) {
            let enc = zstd::Encoder::new(file, 3).at(&output)?;
            let (enc, n) = crate::tarball::export(&mut ws, store, id, enc, &pb)?;
            (enc.finish().at(&output)?, n)
        } else {
            crate::tarball::export(&mut ws, store, id, file, &pb)?
        };
        let file = file
            .into_inner()
            .map_err(|e| CliError::io(&tmp, e.into_error()))?;
        file.sync_all().at(&tmp)?;
        std::fs::rename(&tmp, &output).at(&output)?;
        Ok(n)
    })();
    pb.finish_and_clear();
    let n = match result {
        Ok(n) => n,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    ctx.print(
        json!({"id": id.to_string(), "file": output, "entries": n}),
        || println!("exported {id} to {} ({n} entries)", output.display()),
    );
    Ok(())
}

fn import(ctx: &Ctx, file: &Path, message: Option<String>, branch: Option<String>) -> Result<()> {
    let wd = ctx.open()?;
    let file = resolve_path(ctx, file);
    let f = std::fs::File::open(&file).at(&file)?;
    let reader: Box<dyn Read> = if crate::tarball::is_zstd(&file) {
        Box::new(zstd::Decoder::new(f).at(&file)?)
    } else {
        Box::new(std::io::BufReader::new(f))
    };
    let pb = ctx.bar(None, "import");
    let mut ws = crate::tarball::import(reader, &file, &pb)?;
    pb.finish_and_clear();
    let branch = match branch {
        Some(b) => b,
        None => wd.head_branch()?,
    };
    let committed = wd.repo.commit(
        &mut ws,
        &branch,
        RepoCommitOptions {
            message,
            // An archive replaces the branch's content as its next commit.
            onto_tip: true,
            ..RepoCommitOptions::default()
        },
    )?;
    ctx.print(
        json!({"id": committed.id.to_string(), "branch": branch, "new_objects": committed.objects_written, "new_bytes": committed.bytes_written}),
        || {
            println!("[{branch} {}] imported {}", committed.id, file.display());
            println!(
                "new objects: {}, new bytes: {}",
                committed.objects_written, committed.bytes_written
            );
        },
    );
    Ok(())
}

/// Opens a store named by URL, or the store of the repository at a directory.
fn open_any(ctx: &Ctx, spec: &str) -> Result<Box<dyn Store>> {
    let p = resolve_path(ctx, Path::new(spec));
    if !spec.contains(':') && p.join(repo::DOT_DIR).join("config").is_file() {
        let wd = repo::discover(&p)?;
        return Ok(wd.repo.into_store());
    }
    let cwd = &ctx.cwd;
    repo::open_store(&repo::absolutize_url(spec, cwd))
}

fn sync(ctx: &Ctx, src: &str, dst: &str, reference: Option<&str>, force: bool) -> Result<()> {
    let s = open_any(ctx, src)?;
    let d = open_any(ctx, dst)?;
    let refs: Vec<String> = match reference {
        Some(r) if r.contains('/') => vec![r.to_string()],
        Some(r) => {
            let branch = format!("heads/{r}");
            let tag = format!("tags/{r}");
            if s.get_ref(&branch)?.is_some() || s.get_ref(&tag)?.is_none() {
                vec![branch]
            } else {
                vec![tag]
            }
        }
        None => {
            let mut v: Vec<String> = s.list_refs("heads/")?.into_iter().map(|r| r.0).collect();
            v.extend(s.list_refs("tags/")?.into_iter().map(|r| r.0));
            v
        }
    };
    let pb = ctx.bar(Some(refs.len() as u64), "sync");
    let options = SyncOptions {
        force,
        ..SyncOptions::default()
    };
    let mut reports = Vec::new();
    for r in &refs {
        pb.set_message(r.clone());
        let report = snapgraph_store::sync_with(s.as_ref(), d.as_ref(), r, &options)?;
        reports.push((r.clone(), report));
        pb.inc(1);
    }
    pb.finish_and_clear();
    let value: Vec<Value> = reports
        .iter()
        .map(|(r, rep)| {
            json!({
                "ref": r, "from": rep.from.map(|i| i.to_string()), "to": rep.to.map(|i| i.to_string()),
                "objects": rep.objects, "bytes": rep.bytes, "examined": rep.examined, "queries": rep.queries,
            })
        })
        .collect();
    ctx.print(Value::Array(value), || {
        for (r, rep) in &reports {
            println!(
                "{r}: {} -> {}: {} objects, {} bytes sent",
                rep.from.map_or("nothing".to_string(), |i| i.to_string()),
                rep.to.map_or("nothing".to_string(), |i| i.to_string()),
                rep.objects,
                rep.bytes
            );
        }
        if reports.is_empty() {
            println!("nothing to sync");
        }
    });
    Ok(())
}
