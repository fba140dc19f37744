//! Scanning a real directory into a workspace: the first half of `commit`.
//!
//! The walk (the `ignore` crate) respects `.snapgraphignore` files (gitignore syntax,
//! in any directory, applying below it), never follows symlinks, and skips the
//! repository's own `.snapgraph/`. What is recorded:
//!
//! - regular files, with mode `0o755` if any execute bit is set and `0o644`
//!   otherwise (like git: other permission bits, owners and times are not history);
//! - symlinks, as symlinks with their target exactly as read (relative or absolute;
//!   never followed, on commit or on checkout);
//! - directories, empty ones included, with mode `0o755`;
//! - nothing else: sockets, FIFOs and devices are skipped with a warning.
//!
//! The scan updates a workspace holding the branch tip (a shallow checkout: file
//! bytes stay in the store), so a file the stat cache vouches for is neither read
//! nor re-hashed, and the commit costs what changed.

use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use indicatif::ProgressBar;
use snapgraph::{EntryKind, Workspace};

use crate::error::{CliError, IoContext, Result};
use crate::index::{FileStat, Index};
use crate::repo::DOT_DIR;

/// The name of ignore files.
pub const IGNORE_FILE: &str = ".snapgraphignore";

/// What a scan did.
#[derive(Debug, Default)]
pub struct ScanReport {
    /// Regular files read.
    pub files_read: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Regular files the stat cache vouched for (not read).
    pub files_skipped: u64,
    /// Entries seen (files, directories, symlinks).
    pub entries: u64,
    /// The stat of every regular file recorded, by workspace path.
    pub stats: BTreeMap<String, FileStat>,
}

/// The mode recorded for a file with `st_mode` `mode`.
pub fn file_mode(mode: u32) -> u32 {
    if mode & 0o111 != 0 {
        0o755
    } else {
        0o644
    }
}

/// The digest the index records for the file at `path` in `ws` (see
/// [`crate::index`]); `None` if there is no file there or its bytes are neither
/// stored as an object nor loaded.
pub fn digest_of(ws: &Workspace, path: &str) -> Option<String> {
    if let Some(id) = ws.file_content_id(path) {
        return Some(format!("c:{id}"));
    }
    if ws.is_loaded(path) {
        let data = ws.read(path).ok()?;
        if data.len() <= snapgraph::limits::INLINE_MAX {
            return Some(format!("i:{}", hex::encode(data)));
        }
    }
    None
}

/// The workspace path (`/a/b`) of `rel`, a path relative to the scanned root.
pub fn workspace_path(full: &Path, rel: &Path) -> Result<String> {
    let mut out = String::new();
    for c in rel.components() {
        match c {
            std::path::Component::Normal(name) => {
                let name = name
                    .to_str()
                    .ok_or_else(|| CliError::bad_path(full, "file name is not valid UTF-8"))?;
                out.push('/');
                out.push_str(name);
            }
            _ => return Err(CliError::bad_path(full, "unexpected path component")),
        }
    }
    Ok(out)
}

/// Makes `ws` match the directory `root`, reading only files the index cannot vouch
/// for. `skip` is the repository's `.snapgraph` directory.
pub fn scan(
    root: &Path,
    ws: &mut Workspace,
    index: Option<&Index>,
    skip: &Path,
    progress: &ProgressBar,
) -> Result<ScanReport> {
    let meta = std::fs::metadata(root).at(root)?;
    if !meta.is_dir() {
        return Err(CliError::bad_path(root, "not a directory"));
    }
    let mut report = ScanReport::default();
    let mut seen: HashSet<String> = HashSet::new();
    let skip = skip.to_path_buf();
    let walker = ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .parents(false)
        .follow_links(false)
        .add_custom_ignore_filename(IGNORE_FILE)
        .filter_entry(move |e| !(e.path() == skip || (e.depth() == 1 && e.file_name() == DOT_DIR)))
        .build();
    for entry in walker {
        let entry = entry.map_err(|e| walk_error(root, e))?;
        if entry.depth() == 0 {
            continue;
        }
        let full = entry.path();
        let rel = full
            .strip_prefix(root)
            .map_err(|_| CliError::bad_path(full, "outside the scanned directory"))?;
        let path = workspace_path(full, rel)?;
        let m = std::fs::symlink_metadata(full).at(full)?;
        let ft = m.file_type();
        report.entries += 1;
        progress.inc(1);
        let current = ws.metadata(&path).ok();
        if ft.is_dir() {
            if current.as_ref().is_some_and(|c| c.kind != EntryKind::Dir) {
                ws.remove(&path)?;
            }
            ws.mkdir(&path)?;
        } else if ft.is_symlink() {
            let target = std::fs::read_link(full).at(full)?;
            let target = target
                .to_str()
                .ok_or_else(|| CliError::bad_path(full, "symlink target is not valid UTF-8"))?;
            let same = current
                .as_ref()
                .is_some_and(|c| c.kind == EntryKind::Symlink)
                && ws.read_link(&path).ok() == Some(target);
            if !same {
                if current.is_some() {
                    ws.remove(&path)?;
                }
                ws.symlink(&path, target)?;
            }
        } else if ft.is_file() {
            let stat = FileStat::of(&m);
            let mode = file_mode(m.mode());
            let vouched = current.as_ref().is_some_and(|c| {
                c.kind == EntryKind::File
                    && c.size == stat.size
                    && index
                        .and_then(|ix| ix.clean(&path, &stat))
                        .is_some_and(|e| digest_of(ws, &path).as_deref() == Some(&e.digest))
            });
            if vouched {
                report.files_skipped += 1;
            } else {
                let data = std::fs::read(full).at(full)?;
                report.files_read += 1;
                report.bytes_read += data.len() as u64;
                progress.set_message(format!("{} read", indicatif::HumanBytes(report.bytes_read)));
                if current.as_ref().is_some_and(|c| c.kind != EntryKind::File) {
                    ws.remove(&path)?;
                }
                ws.write(&path, data)?;
            }
            if ws.metadata(&path)?.mode != mode {
                ws.set_mode(&path, mode)?;
            }
            report.stats.insert(path.clone(), stat);
        } else {
            eprintln!(
                "warning: {}: not a file, directory or symlink; skipped",
                full.display()
            );
            continue;
        }
        seen.insert(path);
    }
    for (path, _) in ws.walk() {
        if !seen.contains(&path) && ws.exists(&path) {
            ws.remove(&path)?;
        }
    }
    Ok(report)
}

fn walk_error(root: &Path, e: ignore::Error) -> CliError {
    fn find(e: &ignore::Error) -> Option<(&Path, String)> {
        match e {
            ignore::Error::WithPath { path, err } => Some((path, err.to_string())),
            ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
                find(err)
            }
            ignore::Error::Partial(errs) => errs.iter().find_map(find),
            _ => None,
        }
    }
    match find(&e) {
        Some((path, reason)) => CliError::bad_path(path, reason),
        None => CliError::bad_path(root, e.to_string()),
    }
}
