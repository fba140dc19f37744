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

use std::collections::HashSet;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::json;
use snapgraph::{EntryKind, ObjectSource};

use super::{checked_out_at, worktree::path_in_workdir, Below, Ctx};
use crate::error::{CliError, IoContext, Result};
use crate::materialize::PlannedEntry;

fn under(path: &str, top: &str) -> bool {
    top == "/" || path == top || path.starts_with(&format!("{top}/"))
}

pub(super) fn restore(ctx: &Ctx, source: Option<&str>, paths: &[PathBuf]) -> Result<()> {
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
    for e in parents.iter().copied().chain(chosen.iter().copied()) {
        crate::interrupt::check(crate::interrupt::RESTORE_PART)?;
        let target = fs(e);
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
                let written = match written {
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
                std::fs::remove_file(&target).at(&target)?;
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
