//! `restore [--source REV] PATH...` and `checkout REV -- PATH...`: put files or
//! directories back as a commit has them, with their modes, touching nothing else.
//!
//! Each PATH must be in the commit. A file or symlink is written beside its place
//! and renamed over it; a directory gets every entry the commit has below it, and
//! loses the files that HEAD's commit has below it and the source lacks (they are
//! in HEAD, so nothing is lost); files neither commit has (untracked, ignored) stay.
//! The commit is checked like any checkout ([`crate::materialize::plan`]: no
//! traversal, nothing below a symlink), and the working directory is checked first:
//! a parent that is not a directory there, or a directory where the commit has a
//! file, refuses the whole restore before anything is written. HEAD does not move.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::json;
use snapgraph::{EntryKind, ObjectId, ObjectSource, SnapshotGraph, Workspace};

use super::{checked_out_at, commit_in_memory, diff_of, worktree::path_in_workdir, Below, Ctx};
use crate::error::{CliError, IoContext, Result};
use crate::index::{FileStat, Index};
use crate::materialize::PlannedEntry;
use crate::repo::Workdir;
use crate::scan::Seen;

fn under(path: &str, top: &str) -> bool {
    top == "/" || path == top || path.starts_with(&format!("{top}/"))
}

pub(super) fn restore(
    ctx: &Ctx,
    source: Option<&str>,
    paths: &[PathBuf],
    force: bool,
) -> Result<()> {
    let wd = ctx.open()?;
    // One command at a time changes the working directory (`crate::lock`).
    let _lock = crate::lock::acquire(&wd.dot, crate::lock::Mode::Exclusive, "restore")?;
    let id = wd.resolve(source.unwrap_or("HEAD"))?;
    // The core re-hashes every object a checkout or `load_content` reads: the store
    // leaves the hash to it (each object hashed once).
    let verifying = snapgraph_store::CallerVerifies(&**wd.repo.store());
    let store: &dyn ObjectSource = &verifying;
    let tops: Vec<String> = paths
        .iter()
        .map(|p| path_in_workdir(ctx, &wd.root, p))
        .collect::<Result<_>>()?;
    // The chosen paths' trees, not the commit's (nor HEAD's below).
    let at: Vec<&str> = tops.iter().map(String::as_str).collect();
    let ws = checked_out_at(id, store, &at, Below::All)?;
    let planned =
        crate::materialize::plan(id, ws.walk().into_iter().map(|(p, m)| (p, m.kind, m.mode)))?;
    for t in &tops {
        if t != "/" && !planned.iter().any(|e| e.path == *t) {
            return Err(CliError::NotInCommit {
                commit: id,
                path: t.clone(),
            });
        }
    }
    let chosen: Vec<&PlannedEntry> = planned
        .iter()
        .filter(|e| tops.iter().any(|t| under(&e.path, t)))
        .collect();
    // Parents of each chosen top: directories of the commit, which must be real
    // directories (or absent) in the working directory.
    let mut parents: Vec<&PlannedEntry> = Vec::new();
    let mut seen = HashSet::new();
    for t in &tops {
        for e in planned.iter().filter(|e| {
            e.kind == EntryKind::Dir && *t != e.path && under(t, &e.path) && e.path != "/"
        }) {
            if seen.insert(e.path.clone()) {
                parents.push(e);
            }
        }
    }
    parents.sort_by(|a, b| a.path.cmp(&b.path));
    let fs = |e: &PlannedEntry| -> PathBuf { e.under(&wd.root) };
    // Check everything before writing anything.
    for e in parents.iter().copied().chain(chosen.iter().copied()) {
        let target = fs(e);
        match (std::fs::symlink_metadata(&target), e.kind) {
            (Err(err), _) if err.kind() == std::io::ErrorKind::NotFound => {}
            (Err(err), _) => return Err(CliError::io(&target, err)),
            (Ok(m), EntryKind::Dir) if !m.file_type().is_dir() => {
                return Err(CliError::bad_path(
                    &target,
                    format!("the commit has a directory here, the working directory a {}; move it away first", kind_name(&m)),
                ))
            }
            (Ok(m), EntryKind::File | EntryKind::Symlink) if m.file_type().is_dir() => {
                return Err(CliError::bad_path(
                    &target,
                    "the commit has a file here, the working directory a directory; move it away first",
                ))
            }
            _ => {}
        }
    }
    // What differs from the source under the paths, and the uncommitted work the
    // restore would overwrite or remove.
    let mut compared = compare(ctx, &wd, id, &tops)?;
    if !force {
        let mut lost = std::mem::take(&mut compared.lost);
        // Entries a scan does not record (ignored, say a `.env` committed before
        // it was ignored) where the restore writes the source's: kept, unless they
        // hold it already.
        for p in &compared.unrecorded {
            if !holds_source(&ws, p, store, &wd.root.join(p.trim_start_matches('/')))? {
                lost.push(p.clone());
            }
        }
        lost.sort();
        if !lost.is_empty() {
            return Err(CliError::WouldDiscard {
                path: wd.root.clone(),
                shown: crate::output::quote_list(
                    &lost
                        .iter()
                        .map(|p| p.trim_start_matches('/').to_string())
                        .collect::<Vec<_>>(),
                ),
                paths: lost,
            });
        }
    }
    // Files HEAD has below a chosen directory and the source lacks.
    let in_source: HashSet<&str> = planned.iter().map(|e| e.path.as_str()).collect();
    let mut stale = Vec::new();
    if let Some(head) = wd.head_commit()? {
        if head != id {
            let head_ws = checked_out_at(head, store, &at, Below::All)?;
            for (p, m) in head_ws.walk() {
                if m.kind != EntryKind::Dir
                    && !in_source.contains(p.as_str())
                    && tops.iter().any(|t| under(&p, t))
                {
                    stale.push(p);
                }
            }
        }
    }
    let (mut files, mut dirs, mut symlinks, mut bytes, mut removed) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    // A signal stops the restore between entries (`crate::interrupt`): each one
    // written is whole, and no temporary file is left for a commit to record.
    crate::interrupt::arm();
    crate::interrupt::test_point("write");
    // Files and symlinks already as the source has them are left alone (their stat
    // cache entries stay true).
    let to_write = chosen
        .iter()
        .copied()
        .filter(|e| e.kind == EntryKind::Dir || compared.differs.contains(&e.path));
    // What the stat cache records anew: each entry written, each removed.
    let mut put: Vec<(String, EntryKind)> = Vec::new();
    let mut gone: Vec<String> = Vec::new();
    for e in parents.iter().copied().chain(to_write) {
        crate::interrupt::check(crate::interrupt::RESTORE_PART)?;
        let target = fs(e);
        if e.kind != EntryKind::Dir || !target.is_dir() {
            put.push((e.path.clone(), e.kind));
        }
        match e.kind {
            EntryKind::Dir => {
                if !target.is_dir() {
                    std::fs::DirBuilder::new()
                        .mode(0o700)
                        .create(&target)
                        .at(&target)?;
                    dirs += 1;
                }
            }
            EntryKind::Symlink => {
                let link = ws.read_link(&e.path)?.to_string();
                let tmp = temp_beside(&target);
                std::os::unix::fs::symlink(&link, &tmp).at(&tmp)?;
                if !force {
                    let written = files + symlinks + removed;
                    if let Err(err) = still_as_seen(&compared, &e.path, &target, written) {
                        let _ = std::fs::remove_file(&tmp);
                        return Err(err);
                    }
                }
                rename(&tmp, &target)?;
                symlinks += 1;
            }
            EntryKind::File => {
                // Written beside its place and renamed over it: its verified pieces
                // are streamed (`copy_out`), and an error removes what was written.
                let tmp = temp_beside(&target);
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&tmp)
                    .at(&target)?;
                let written = crate::materialize::copy_out(&ws, &e.path, store, &mut f, &target)
                    .and_then(|c| {
                        f.set_permissions(std::fs::Permissions::from_mode(e.mode & 0o777))
                            .at(&target)?;
                        Ok(c.bytes)
                    });
                drop(f);
                let checked = written.and_then(|n| match force {
                    true => Ok(n),
                    false => {
                        let written = files + symlinks + removed;
                        still_as_seen(&compared, &e.path, &target, written).map(|()| n)
                    }
                });
                let written = match checked {
                    Ok(n) => n,
                    Err(err) => {
                        let _ = std::fs::remove_file(&tmp);
                        return Err(err);
                    }
                };
                rename(&tmp, &target)?;
                files += 1;
                bytes += written;
            }
        }
    }
    for p in &stale {
        crate::interrupt::check(crate::interrupt::RESTORE_PART)?;
        let target = wd.root.join(p.trim_start_matches('/'));
        match std::fs::symlink_metadata(&target) {
            Ok(m) if !m.file_type().is_dir() => {
                if !force {
                    still_as_seen(&compared, p, &target, files + symlinks + removed)?;
                }
                std::fs::remove_file(&target).at(&target)?;
                gone.push(p.clone());
                removed += 1;
            }
            _ => {}
        }
    }
    // Directory modes last, deepest first (a read-only directory is filled first).
    let mut all_dirs: Vec<&PlannedEntry> = parents
        .iter()
        .copied()
        .chain(chosen.iter().copied())
        .filter(|e| e.kind == EntryKind::Dir)
        .collect();
    all_dirs.sort_by(|a, b| b.path.cmp(&a.path));
    for e in all_dirs {
        let target = fs(e);
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(e.mode & 0o777))
            .at(&target)?;
    }
    record(&wd, id, &ws, compared, put, gone)?;
    ctx.print(
        json!({
            "id": id.to_string(), "paths": tops, "files": files, "dirs_created": dirs,
            "symlinks": symlinks, "bytes": bytes, "removed": removed,
        }),
        |w| {
            writeln!(
                w,
                "restored {} from {id}: {files} files, {symlinks} symlinks, {dirs} directories created, {removed} removed, {bytes} bytes",
                tops.iter()
                    .map(|t| crate::output::quote(t.trim_start_matches('/')).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        },
    )
}

/// Records in the stat cache what a restore from the commit the cache is complete
/// for (HEAD's, as after every commit) wrote: each entry put with its new stat and
/// the source's digest, as a switch records its writes
/// ([`super::worktree::index_after_switch`]). The next `status` or commit then
/// reads none of them; before, it read every file restored (a directory of 1,800
/// files restored cost each `status` 60 ms until a commit). A restore from another
/// commit leaves the cache as it is: what it wrote differs from the tip, the next
/// commit reads it as any change. So does one interrupted before this point.
fn record(
    wd: &Workdir,
    source: ObjectId,
    ws: &Workspace,
    compared: Compared,
    mut put: Vec<(String, EntryKind)>,
    gone: Vec<String>,
) -> Result<()> {
    let Some(ix) = compared.index else {
        return Ok(());
    };
    if ix.tip != Some(source) || wd.head_commit()? != Some(source) || put.is_empty() {
        return Ok(());
    }
    // An entry the scan does not record (an ignored file the source has) stays out.
    let unrecorded: HashSet<&str> = compared.unrecorded.iter().map(String::as_str).collect();
    put.retain(|(p, _)| !unrecorded.contains(p.as_str()));
    let delta = super::worktree::index_after_switch(wd, &ix, source, ws, &put, &gone)?;
    ix.save_delta(&wd.dot.join("index"), delta)
}

/// The working directory under a restore's paths, compared with the source.
struct Compared {
    /// Files and symlinks (workspace paths) under the paths whose working version
    /// differs from the source's, or that one side lacks.
    differs: HashSet<String>,
    /// Those of them the restore would overwrite or remove whose working version
    /// neither HEAD's commit nor the commit the directory holds (its stat cache's,
    /// when it is behind its branch) has as it is: the work a restore without
    /// `--force` must not discard. Sorted.
    lost: Vec<String>,
    /// Files and symlinks the source has under the paths where the directory holds
    /// an entry a scan does not record (ignored, a socket...): the scan cannot say
    /// what they hold ([`holds_source`] does).
    unrecorded: Vec<String>,
    /// The stat cache the scan trusted, as loaded.
    index: Option<Index>,
    /// The `lstat` of each file and symlink under the paths as the scan took it
    /// (before reading it): what the entry must still be when the restore replaces
    /// or removes it ([`still_as_seen`]).
    seen: HashMap<String, FileStat>,
}

/// Before a restore without `--force` replaces or removes the entry at `target`
/// (workspace path `path`): it must be as its check saw it, the same `lstat` (or
/// still absent), else it changed since it was judged committed (or already as the
/// source has it) and is `CliError::ChangedDuringRestore`, naming it; `written`
/// entries were written before. An entry the scan does not record (ignored) was
/// judged by its bytes (`holds_source`) and is not checked again. The window left
/// is the few system calls between this `lstat` and the rename or unlink.
fn still_as_seen(compared: &Compared, path: &str, target: &Path, written: u64) -> Result<()> {
    if compared.unrecorded.iter().any(|u| u == path) {
        return Ok(());
    }
    let now = match FileStat::lstat(target) {
        Ok(stat) => Some(stat),
        Err(e) if crate::error::vanished(&e) => None,
        Err(e) => return Err(CliError::io(target, e)),
    };
    let what = match (compared.seen.get(path), now) {
        (Some(then), Some(now)) if *then == now => return Ok(()),
        (None, None) => return Ok(()),
        (Some(_), Some(_)) => "modified",
        (Some(_), None) => "deleted",
        (None, Some(_)) => "created",
    };
    Err(CliError::ChangedDuringRestore {
        path: target.to_path_buf(),
        what,
        written,
    })
}

/// Whether the entry at `full` (workspace path `path`) is what the source `ws` has
/// there: the same symlink target, or the same bytes (read a piece of the source
/// at a time beside the file, stopping at the first difference).
fn holds_source(ws: &Workspace, path: &str, store: &dyn ObjectSource, full: &Path) -> Result<bool> {
    use std::io::Read;
    let m = match std::fs::symlink_metadata(full) {
        Ok(m) => m,
        Err(e) if crate::error::vanished(&e) => return Ok(true),
        Err(e) => return Err(CliError::io(full, e)),
    };
    let theirs = ws.metadata(path)?;
    if m.file_type().is_symlink() {
        let link = std::fs::read_link(full).at(full)?;
        return Ok(theirs.kind == EntryKind::Symlink && ws.read_link(path).ok() == link.to_str());
    }
    if !m.is_file() || theirs.kind != EntryKind::File || m.len() != theirs.size {
        return Ok(false);
    }
    let mut f = std::fs::File::open(full).at(full)?;
    let mut buf = Vec::new();
    for piece in ws.content_pieces(path, store)? {
        let piece = piece?;
        buf.resize(piece.len(), 0);
        if f.read_exact(&mut buf).is_err() || buf[..] != piece[..] {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Compares the working directory under `tops` with `source`.
///
/// The working directory's commit is made in memory with only `tops` brought in
/// line with the directory (HEAD's trees elsewhere, read only where `tops` need
/// them), through the stat cache: a file it vouches for is not read. Three diffs
/// then say it all, each pruned where trees are equal: against the source (what
/// the restore changes), against HEAD's commit and the held one (what is
/// uncommitted). A path the source lacks is removed only if HEAD has it.
fn compare(ctx: &Ctx, wd: &Workdir, source: ObjectId, tops: &[String]) -> Result<Compared> {
    let store: &dyn ObjectSource = wd.repo.store();
    let head = wd.head_commit()?;
    let index = Index::load(&wd.dot.join("index"), &wd.root);
    let at: Vec<&str> = tops.iter().map(String::as_str).collect();
    let mut ws = match head {
        Some(h) => checked_out_at(h, store, &at, Below::All)?,
        None => Workspace::new(),
    };
    let pb = ctx.bar(None, "scanning");
    let report = crate::scan::scan_batched(
        &wd.root,
        &mut ws,
        crate::scan::ScanOptions {
            index: index.as_ref(),
            only: Some(tops),
            ..crate::scan::ScanOptions::new(&wd.dot)
        },
        &pb,
        &mut crate::batches::Hashed,
    )?;
    pb.finish_and_clear();
    let seen: HashMap<String, FileStat> = report
        .stats
        .iter()
        .filter_map(|(p, s)| match s {
            Seen::File(stat, _) | Seen::Symlink(stat) => Some((p.clone(), *stat)),
            Seen::Dir(_) => None,
        })
        .collect();
    let (work, overlay) = commit_in_memory(&mut ws, store, head)?;
    let chosen = |p: &String| tops.iter().any(|t| under(p, t));
    // What differs from `base` (or everything, with no base) under the tops.
    let changed_from = |base: Option<ObjectId>| -> Result<(HashSet<String>, HashSet<String>)> {
        let d = diff_of(base, work, &overlay)?;
        let added: HashSet<String> = d.files_added.into_iter().filter(chosen).collect();
        let mut changed: HashSet<String> = d.files_modified.into_iter().filter(chosen).collect();
        changed.extend(added.iter().cloned());
        Ok((changed, added))
    };
    let d = SnapshotGraph::diff(source, work, &overlay)?;
    let differs: HashSet<String> = d
        .files_modified
        .iter()
        .chain(&d.files_added)
        .chain(&d.files_removed)
        .filter(|p| chosen(p))
        .cloned()
        .collect();
    // In the source, not in the working commit, yet something is there.
    let unrecorded: Vec<String> = d
        .files_removed
        .iter()
        .filter(|p| chosen(p))
        .filter(|p| {
            std::fs::symlink_metadata(wd.root.join(p.trim_start_matches('/')))
                .is_ok_and(|m| !m.is_dir())
        })
        .cloned()
        .collect();
    let (mut uncommitted, not_in_head) = changed_from(head)?;
    if uncommitted.is_empty() {
        return Ok(Compared {
            differs,
            lost: Vec::new(),
            unrecorded,
            index,
            seen,
        });
    }
    // Behind its branch, the directory holds an older commit of it: what that
    // commit has is committed too.
    let held = index
        .as_ref()
        .and_then(Index::base)
        .filter(|b| Some(*b) != head);
    if let Some(held) = held {
        if SnapshotGraph::commit(held, store).is_ok() {
            let (from_held, _) = changed_from(Some(held))?;
            uncommitted.retain(|p| from_held.contains(p));
        }
    }
    let mut lost: Vec<String> = d
        .files_modified
        .into_iter()
        .chain(
            d.files_added
                .into_iter()
                .filter(|p| !not_in_head.contains(p)),
        )
        .filter(|p| uncommitted.contains(p))
        .collect();
    lost.sort();
    Ok(Compared {
        differs,
        lost,
        unrecorded,
        index,
        seen,
    })
}

fn kind_name(m: &std::fs::Metadata) -> &'static str {
    if m.file_type().is_symlink() {
        "symlink"
    } else {
        "file"
    }
}

fn temp_beside(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(super::unique_name(&format!(".{name}.snapgraph-restore")))
}

fn rename(tmp: &Path, target: &Path) -> Result<()> {
    std::fs::rename(tmp, target).map_err(|e| {
        let _ = std::fs::remove_file(tmp);
        CliError::io(target, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compared(seen: HashMap<String, FileStat>, unrecorded: Vec<String>) -> Compared {
        Compared {
            differs: HashSet::new(),
            lost: Vec::new(),
            unrecorded,
            index: None,
            seen,
        }
    }

    #[test]
    fn an_entry_changed_since_its_check_stops_the_restore_naming_it() {
        let t = tempfile::tempdir().unwrap();
        let file = |name: &str| t.path().join(name);
        for name in ["same", "edited", "deleted", "link"] {
            std::fs::write(file(name), b"checked").unwrap();
        }
        std::fs::remove_file(file("link")).unwrap();
        std::os::unix::fs::symlink("same", file("link")).unwrap();
        let seen: HashMap<String, FileStat> = ["same", "edited", "deleted", "link"]
            .iter()
            .map(|n| (format!("/{n}"), FileStat::lstat(&file(n)).unwrap()))
            .collect();
        let c = compared(seen, vec!["/ignored".into()]);
        // What the check saw, and what was absent then and now, pass.
        still_as_seen(&c, "/same", &file("same"), 0).unwrap();
        still_as_seen(&c, "/link", &file("link"), 0).unwrap();
        still_as_seen(&c, "/absent", &file("absent"), 0).unwrap();
        // An edit of the same size, a deletion, a file created since: refused.
        std::fs::write(file("edited"), b"CHECKED").unwrap();
        std::fs::remove_file(file("deleted")).unwrap();
        std::fs::write(file("new"), b"new").unwrap();
        std::fs::remove_file(file("link")).unwrap();
        std::os::unix::fs::symlink("elsewhere", file("link")).unwrap();
        for (path, what) in [
            ("/edited", "modified"),
            ("/deleted", "deleted"),
            ("/new", "created"),
            ("/link", "modified"),
        ] {
            match still_as_seen(&c, path, &file(&path[1..]), 3) {
                Err(CliError::ChangedDuringRestore {
                    path: p,
                    what: w,
                    written: 3,
                }) => assert_eq!((p, w), (file(&path[1..]), what)),
                other => panic!("{path}: {other:?}"),
            }
        }
        // An entry the scan does not record was judged by its bytes: not by a stat.
        std::fs::write(file("ignored"), b"x").unwrap();
        still_as_seen(&c, "/ignored", &file("ignored"), 0).unwrap();
    }
}
