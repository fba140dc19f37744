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
//! - nothing else: sockets, FIFOs and devices are skipped with a warning;
//! - not nested repositories: a directory holding a `.snapgraph/` is skipped and
//!   reported, and a name a file system could fold into `.snapgraph` is refused.
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
    /// Directories skipped because they hold a repository of their own.
    pub nested: Vec<std::path::PathBuf>,
    /// Whether the workspace certainly changed (an entry added, removed or of
    /// another kind, a mode, a symlink target or a file's size changed).
    pub changed: bool,
    /// Files re-read whose size did not change (their bytes may be the same).
    pub reread: u64,
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

/// What [`scan`] looks at besides the directory.
#[derive(Debug, Clone, Copy)]
pub struct ScanOptions<'a> {
    /// The stat cache to trust (see [`crate::index`]).
    pub index: Option<&'a Index>,
    /// The repository's own `.snapgraph` directory (never recorded).
    pub skip: &'a Path,
    /// Only these workspace paths (and what lies below them) are brought in line
    /// with the directory; everything else in the workspace stays as it is (`commit
    /// PATH...`). `None`: the whole tree.
    pub only: Option<&'a [String]>,
}

/// Where a path lies relative to [`ScanOptions::only`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Below (or at) one of the paths: recorded.
    Inside,
    /// A directory on the way to one of them: walked, not recorded.
    Ancestor,
    /// Elsewhere: neither walked nor recorded.
    Outside,
}

fn scope_of(only: Option<&[String]>, path: &str) -> Scope {
    let Some(only) = only else {
        return Scope::Inside;
    };
    let below =
        |a: &str, b: &str| a == b || (a.starts_with(b) && a.as_bytes().get(b.len()) == Some(&b'/'));
    if only.iter().any(|o| o == "/" || below(path, o)) {
        Scope::Inside
    } else if only.iter().any(|o| below(o, path)) {
        Scope::Ancestor
    } else {
        Scope::Outside
    }
}

/// Makes `ws` match the directory `root`, reading only files the index cannot vouch
/// for: first a walk that stats everything (and counts what must be read), then the
/// reads, shown against those totals on `progress`.
///
/// Names that a file system could fold into `.snapgraph` are refused
/// ([`crate::materialize::is_reserved_name`]); a directory holding a `.snapgraph`
/// directory is another repository: it is skipped (not recorded) and listed in
/// [`ScanReport::nested`].
pub fn scan(
    root: &Path,
    ws: &mut Workspace,
    options: ScanOptions<'_>,
    progress: &ProgressBar,
) -> Result<ScanReport> {
    let meta = std::fs::metadata(root).at(root)?;
    if !meta.is_dir() {
        return Err(CliError::bad_path(root, "not a directory"));
    }
    let mut report = ScanReport::default();
    let mut seen: HashSet<String> = HashSet::new();
    let skip = options.skip.to_path_buf();
    let nested = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let found = nested.clone();
    let only: Option<Vec<String>> = options.only.map(<[String]>::to_vec);
    let filter_root = root.to_path_buf();
    let walker = ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .parents(false)
        .follow_links(false)
        .add_custom_ignore_filename(IGNORE_FILE)
        .filter_entry(move |e| {
            if e.path() == skip || (e.depth() == 1 && e.file_name() == DOT_DIR) {
                return false;
            }
            if e.depth() == 0 {
                return true;
            }
            if let (Some(only), Ok(rel)) = (&only, e.path().strip_prefix(&filter_root)) {
                let path = match workspace_path(e.path(), rel) {
                    Ok(p) => p,
                    Err(_) => return true, // reported by the loop
                };
                if scope_of(Some(only), &path) == Scope::Outside {
                    return false;
                }
            }
            let is_dir = e.file_type().is_some_and(|t| t.is_dir());
            if is_dir
                && e.path()
                    .join(DOT_DIR)
                    .symlink_metadata()
                    .is_ok_and(|m| m.is_dir())
            {
                if let Ok(mut v) = found.lock() {
                    v.push(e.path().to_path_buf());
                }
                return false;
            }
            true
        })
        .build();
    // Files to read: (full path, workspace path, size, mode).
    let mut to_read: Vec<(std::path::PathBuf, String, u64, u32)> = Vec::new();
    let mut bytes_to_read = 0u64;
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
        let name = entry.file_name().to_str().unwrap_or_default();
        if crate::materialize::is_reserved_name(name) {
            return Err(CliError::bad_path(
                full,
                "reserved name: a file system may fold it into .snapgraph, the repository directory",
            ));
        }
        let scope = scope_of(options.only, &path);
        let m = std::fs::symlink_metadata(full).at(full)?;
        let ft = m.file_type();
        if scope == Scope::Ancestor {
            if ft.is_dir() && !ws.exists(&path) {
                ws.mkdir(&path)?;
                report.changed = true;
            }
            continue;
        }
        report.entries += 1;
        progress.inc(1);
        let current = ws.metadata(&path).ok();
        let kind = if ft.is_dir() {
            Some(EntryKind::Dir)
        } else if ft.is_symlink() {
            Some(EntryKind::Symlink)
        } else if ft.is_file() {
            Some(EntryKind::File)
        } else {
            None
        };
        if kind.is_some() && current.as_ref().map(|c| c.kind) != kind {
            report.changed = true;
        }
        if ft.is_dir() {
            if current.as_ref().is_some_and(|c| c.kind != EntryKind::Dir) {
                ws.remove(&path)?;
            }
            if !ws.exists(&path) {
                ws.mkdir(&path)?;
            }
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
                report.changed = true;
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
                    && options
                        .index
                        .and_then(|ix| ix.clean(&path, &stat))
                        .is_some_and(|e| digest_of(ws, &path).as_deref() == Some(&e.digest))
            });
            if current
                .as_ref()
                .is_some_and(|c| c.kind == EntryKind::File && c.mode != mode)
            {
                report.changed = true;
            }
            if vouched {
                report.files_skipped += 1;
                if ws.metadata(&path)?.mode != mode {
                    ws.set_mode(&path, mode)?;
                }
            } else {
                match &current {
                    Some(c) if c.kind == EntryKind::File && c.size == stat.size => {
                        report.reread += 1
                    }
                    _ => report.changed = true,
                }
                if current.as_ref().is_some_and(|c| c.kind != EntryKind::File) {
                    ws.remove(&path)?;
                }
                bytes_to_read += stat.size;
                to_read.push((full.to_path_buf(), path.clone(), stat.size, mode));
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
    let files_to_read = to_read.len() as u64;
    crate::progress::phase(progress, "reading", bytes_to_read);
    for (full, path, _, mode) in to_read {
        let data = std::fs::read(&full).at(&full)?;
        report.files_read += 1;
        report.bytes_read += data.len() as u64;
        progress.inc(data.len() as u64);
        progress.set_message(format!("{}/{files_to_read} files", report.files_read));
        ws.write(&path, data)?;
        if ws.metadata(&path)?.mode != mode {
            ws.set_mode(&path, mode)?;
        }
    }
    for (path, _) in ws.walk() {
        if scope_of(options.only, &path) == Scope::Inside
            && !seen.contains(&path)
            && ws.exists(&path)
        {
            ws.remove(&path)?;
            report.changed = true;
        }
    }
    report.nested = std::mem::take(
        &mut *nested
            .lock()
            .map_err(|_| CliError::bad_path(root, "scan thread panicked"))?,
    );
    report.nested.sort();
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
