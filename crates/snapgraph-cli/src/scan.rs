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

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use indicatif::ProgressBar;
use rustix::fs::AtFlags;
use snapgraph::{EntryKind, ObjectSource, Workspace};

use crate::error::{CliError, IoContext, Result};
use crate::index::{digest_of, file_mode, Digest, FileStat, Index, IndexEntry};
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
    /// Every entry recorded, by workspace path (files and symlinks with their stat);
    /// after a lazy scan ([`ScanOptions::lazy`]), only those the index did not vouch
    /// for (see [`ScanReport::partial`]).
    pub stats: BTreeMap<String, Seen>,
    /// Whether [`ScanReport::stats`] leaves out the entries the index vouched for (a
    /// lazy scan: the index is complete for the workspace's head). Those are exactly
    /// as the index records them, so the next index is the old one with `stats`
    /// applied and [`ScanReport::removed`] taken out, and the scan pays nothing per
    /// unchanged entry.
    pub partial: bool,
    /// After a lazy scan: the index's entries the walk did not see (removed from the
    /// directory, newly ignored or inside a nested repository), sorted.
    pub removed: Vec<String>,
    /// Directories skipped because they hold a repository of their own.
    pub nested: Vec<std::path::PathBuf>,
    /// Whether the workspace certainly changed (an entry added, removed or of
    /// another kind, a mode, a symlink target or a file's size changed).
    pub changed: bool,
    /// Files re-read whose size did not change (their bytes may be the same).
    pub reread: u64,
    /// Files whose stat changed found byte for byte the tip's by its chunk ids
    /// ([`crate::recheck`]): read (and counted in `files_read`), not cut, their
    /// directories not loaded.
    pub files_compared: u64,
}

/// An entry a scan recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// A regular file and its stat; with the digest the index vouched for when the
    /// file was not read.
    File(FileStat, Option<Digest>),
    /// A symlink and its stat.
    Symlink(FileStat),
    /// A directory.
    Dir,
}

/// The index entry for `seen` at `path` of `ws` (after a commit or checkout of it);
/// `None` for a file whose digest is unknown.
pub fn index_entry(ws: &Workspace, path: &str, seen: &Seen) -> Option<IndexEntry> {
    Some(match seen {
        Seen::File(stat, vouched) => IndexEntry::File {
            stat: *stat,
            digest: match vouched {
                Some(d) => d.clone(),
                None => digest_of(ws, path)?,
            },
        },
        Seen::Symlink(stat) => IndexEntry::Symlink { stat: *stat },
        Seen::Dir => IndexEntry::Dir,
    })
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
#[derive(Clone, Copy)]
pub struct ScanOptions<'a> {
    /// The stat cache to trust (see [`crate::index`]).
    pub index: Option<&'a Index>,
    /// The repository's own `.snapgraph` directory (never recorded).
    pub skip: &'a Path,
    /// Only these workspace paths (and what lies below them) are brought in line
    /// with the directory; everything else in the workspace stays as it is (`commit
    /// PATH...`). `None`: the whole tree.
    pub only: Option<&'a [String]>,
    /// The source the workspace was checked out *lazily* from
    /// ([`snapgraph::CheckoutOptions::lazy`]: directories left in the store), when it
    /// was: only with an index complete for the workspace's head and no `only`. The
    /// scan then loads just the directories holding something the index does not
    /// vouch for, and takes removals from the index instead of the workspace.
    pub lazy: Option<&'a dyn ObjectSource>,
    /// With `lazy`: the paths a file-system watcher reported changed since the
    /// index was saved ([`crate::watch`]; sorted, none below another, each standing
    /// for itself and everything below it). The walk lists only their ancestors and
    /// stats only them and what lies below them; every other entry is as the index
    /// records it, and removals are sought only below them. `None`: the whole tree.
    pub watched: Option<&'a [String]>,
}

impl std::fmt::Debug for ScanOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanOptions")
            .field("index", &self.index.map(|ix| ix.tip))
            .field("skip", &self.skip)
            .field("only", &self.only)
            .field("lazy", &self.lazy.is_some())
            .field("watched", &self.watched)
            .finish()
    }
}

/// The directory holding the workspace path `path` (`/` for a top-level name).
fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// Where a path lies relative to [`ScanOptions::only`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
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

/// What the walk found at a path (from the directory listing: no `lstat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// A directory (not a nested repository).
    Dir,
    /// A regular file.
    File,
    /// A symlink.
    Symlink,
    /// A socket, FIFO or device.
    Other,
}

/// One entry of a [`walk`].
#[derive(Debug)]
pub struct Walked<'a> {
    /// Its path on disk.
    pub full: &'a Path,
    /// Its workspace path (`/a/b`).
    pub path: &'a str,
    /// What it is.
    pub found: Found,
    /// Where it lies relative to the walk's `only`.
    pub scope: Scope,
    /// Its `lstat` (files and symlinks; taken relative to the open directory, so
    /// without a walk of the whole path).
    pub stat: Option<FileStat>,
}

/// Walks the directory `root` the way every scan does, parents before children,
/// calling `visit` for each entry recorded (or on the way to `only`'s paths) until it
/// returns `false`; returns the nested repositories skipped, sorted.
///
/// Skipped: `skip` (the repository's own directory) and any `.snapgraph` at the
/// top; entries a `.snapgraphignore` ignores (gitignore syntax, in any directory,
/// applying below it, the deepest file deciding first); directories holding a
/// `.snapgraph` directory (another repository: listed in the result); entries
/// outside `only`. Refused: names that are not UTF-8 and names a file system could
/// fold into `.snapgraph` ([`crate::materialize::is_reserved_name`]). An ignore file
/// is read only where the directory listing shows one, and only directories are
/// probed for a `.snapgraph` of their own: regular files are not stat'ed here.
pub fn walk(
    root: &Path,
    skip: &Path,
    only: Option<&[String]>,
    visit: &mut dyn FnMut(Walked<'_>) -> Result<bool>,
) -> Result<Vec<PathBuf>> {
    let mut nested = Vec::new();
    // `skip` is compared only in its parent directory, by name.
    let skip_at = skip.parent().zip(skip.file_name());
    // Directories to list: on disk, workspace path, scope, the ignore files in
    // force. Each is visited when listed (so a nested repository is known from its
    // own listing, without a probe), before anything below it.
    let mut stack: Vec<(PathBuf, String, Scope, Rc<Vec<Gitignore>>)> = vec![(
        root.to_path_buf(),
        String::new(),
        Scope::Inside,
        Rc::new(Vec::new()),
    )];
    // One listing's names, reused: (start in `name_bytes`, end, kind).
    let mut name_bytes: Vec<u8> = Vec::new();
    let mut names: Vec<(usize, usize, Kind)> = Vec::new();
    // The full and workspace paths of the entry at hand: the directory's, then the
    // name pushed and truncated again (no allocation per entry).
    let mut full: Vec<u8> = Vec::new();
    let mut path = String::new();
    // The listing's buffer, reused by every directory: `RawDir` hands out names
    // borrowed from it (no allocation per entry, as `Dir`'s owned names were).
    let mut dirents: Vec<u8> = Vec::with_capacity(DIRENT_BUFFER);
    while let Some((dir, dir_path, dir_scope, parent_rules)) = stack.pop() {
        let fd = open_dir(&dir)?;
        name_bytes.clear();
        names.clear();
        let mut listing = rustix::fs::RawDir::new(&fd, dirents.spare_capacity_mut());
        while let Some(e) = listing.next() {
            let e = e.map_err(|e| CliError::io(&dir, e.into()))?;
            let name = e.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let kind = match e.file_type() {
                rustix::fs::FileType::Unknown => {
                    let st =
                        rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| {
                            CliError::io(dir.join(std::ffi::OsStr::from_bytes(name)), e.into())
                        })?;
                    Kind::of(rustix::fs::FileType::from_raw_mode(st.st_mode))
                }
                other => Kind::of(other),
            };
            let start = name_bytes.len();
            name_bytes.extend_from_slice(name);
            names.push((start, name_bytes.len(), kind));
        }
        let fd = &fd;
        let name_of = |&(start, end, _): &(usize, usize, Kind)| &name_bytes[start..end];
        if !dir_path.is_empty() {
            if names
                .iter()
                .any(|n| name_of(n) == DOT_DIR.as_bytes() && n.2 == Kind::Dir)
            {
                nested.push(dir);
                continue;
            }
            let name = dir_path.rsplit('/').next().unwrap_or_default();
            if crate::materialize::is_reserved_name(name) {
                return Err(reserved(&dir));
            }
            let go_on = visit(Walked {
                full: &dir,
                path: &dir_path,
                found: Found::Dir,
                scope: dir_scope,
                stat: None,
            })?;
            if !go_on {
                break;
            }
        }
        names.sort_unstable_by(|a, b| name_of(a).cmp(name_of(b)));
        let mut rules = parent_rules;
        if names.iter().any(|n| name_of(n) == IGNORE_FILE.as_bytes()) {
            let file = dir.join(IGNORE_FILE);
            let mut b = GitignoreBuilder::new(&dir);
            if let Some(e) = b.add(&file) {
                return Err(walk_error(&file, e));
            }
            let g = b.build().map_err(|e| walk_error(&file, e))?;
            let mut all = (*rules).clone();
            all.push(g);
            rules = Rc::new(all);
        }
        let skip_name = skip_at
            .filter(|(parent, _)| *parent == dir.as_path())
            .map(|(_, name)| name.as_bytes());
        full.clear();
        full.extend_from_slice(dir.as_os_str().as_bytes());
        full.push(b'/');
        let full_len = full.len();
        path.clear();
        path.push_str(&dir_path);
        path.push('/');
        let path_len = path.len();
        let mut subdirs = Vec::new();
        let mut stopped = false;
        for n in &names {
            let (name, kind) = (name_of(n), n.2);
            if (dir_path.is_empty() && name == DOT_DIR.as_bytes()) || skip_name == Some(name) {
                continue;
            }
            full.extend_from_slice(name);
            let full_path = Path::new(std::ffi::OsStr::from_bytes(&full));
            let is_dir = kind == Kind::Dir;
            let ignored = rules
                .iter()
                .rev()
                .map(|g| g.matched(full_path, is_dir))
                .find(|m| !m.is_none());
            if matches!(ignored, Some(Match::Ignore(_))) {
                full.truncate(full_len);
                continue;
            }
            let name = std::str::from_utf8(name)
                .map_err(|_| CliError::bad_path(full_path, "file name is not valid UTF-8"))?;
            path.push_str(name);
            let scope = scope_of(only, &path);
            if scope == Scope::Outside {
                // Neither walked nor recorded.
            } else if is_dir {
                // Visited when listed (below), where a nested repository shows.
                subdirs.push((full_path.to_path_buf(), path.clone(), scope));
            } else {
                if crate::materialize::is_reserved_name(name) {
                    return Err(reserved(full_path));
                }
                let found = match kind {
                    Kind::Symlink => Found::Symlink,
                    Kind::File => Found::File,
                    _ => Found::Other,
                };
                let stat = match found {
                    Found::File | Found::Symlink => Some(FileStat::of_stat(
                        &rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW)
                            .map_err(|e| CliError::io(full_path, e.into()))?,
                    )),
                    _ => None,
                };
                if !visit(Walked {
                    full: full_path,
                    path: &path,
                    found,
                    scope,
                    stat,
                })? {
                    stopped = true;
                    break;
                }
            }
            full.truncate(full_len);
            path.truncate(path_len);
        }
        if stopped {
            break;
        }
        // Reversed onto the stack: directories are walked in name order.
        for (full, path, scope) in subdirs.into_iter().rev() {
            stack.push((full, path, scope, rules.clone()));
        }
    }
    nested.sort();
    Ok(nested)
}

/// Bytes of the buffer a directory is listed into (one `getdents64` fills it with
/// a few hundred entries; a larger directory takes more calls).
const DIRENT_BUFFER: usize = 32 * 1024;

/// An entry's type as a directory listing gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Symlink,
    Other,
}

impl Kind {
    fn of(t: rustix::fs::FileType) -> Self {
        match t {
            rustix::fs::FileType::Directory => Kind::Dir,
            rustix::fs::FileType::RegularFile => Kind::File,
            rustix::fs::FileType::Symlink => Kind::Symlink,
            _ => Kind::Other,
        }
    }
}

/// Opens a directory for listing and `statat`, refusing a symlink.
fn open_dir(dir: &Path) -> Result<rustix::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| CliError::io(dir, e.into()))
}

fn reserved(full: &Path) -> CliError {
    CliError::bad_path(
        full,
        "reserved name: a file system may fold it into .snapgraph, the repository directory",
    )
}

/// Whether the directory `root` is exactly what `index` recorded, with no doubt:
/// `Some(files)` when the walk finds exactly the recorded entries, each of the
/// recorded kind, every file and symlink with its recorded, non-racy stat (see
/// [`crate::index`]); `None` at the first difference or doubt (then the caller
/// scans). The index must be complete ([`Index::tip`]) for the answer to mean "the
/// tip's tree"; the caller checks that. Nested repositories are returned for the
/// caller to report.
pub fn unchanged(root: &Path, index: &Index, skip: &Path) -> Result<Option<(u64, Vec<PathBuf>)>> {
    let mut matched = 0usize;
    let mut files = 0u64;
    let mut same = true;
    let nested = walk(root, skip, None, &mut |w| {
        let recorded = index.entries.get(w.path);
        same = match (w.found, recorded) {
            (Found::Dir, Some(IndexEntry::Dir)) => true,
            (Found::File, Some(IndexEntry::File { stat, .. }))
            | (Found::Symlink, Some(IndexEntry::Symlink { stat })) => {
                files += u64::from(w.found == Found::File);
                w.stat.is_some_and(|now| index.trusted(stat, &now))
            }
            _ => false,
        };
        matched += 1;
        Ok(same)
    })?;
    Ok((same && matched == index.entries.len()).then_some((files, nested)))
}

/// Makes `ws` match the directory `root`, reading only files the index cannot vouch
/// for: first a walk (see [`walk`]) that stats files and symlinks (and counts what
/// must be read), then the reads, shown against those totals on `progress`.
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
    scan_batched(root, ws, options, progress, &mut |_, _| Ok(()))
}

/// [`scan`], calling `after_read(ws, bytes)` after each file read into `ws` (with
/// its length): a caller committing in bounded batches hands the content over
/// there ([`snapgraph_store::Batched::write`]).
pub fn scan_batched(
    root: &Path,
    ws: &mut Workspace,
    options: ScanOptions<'_>,
    progress: &ProgressBar,
    after_read: &mut dyn FnMut(&mut Workspace, u64) -> Result<()>,
) -> Result<ScanReport> {
    let meta = std::fs::metadata(root).at(root)?;
    if !meta.is_dir() {
        return Err(CliError::bad_path(root, "not a directory"));
    }
    let mut report = ScanReport::default();
    // An index complete for the workspace's commit lists exactly its entries, so a
    // file it vouches for needs no look at the workspace (see `crate::index`).
    let complete = options
        .index
        .filter(|ix| ix.tip.is_some() && ix.tip == ws.head());
    // A lazy workspace is read only where the index cannot answer, which it can only
    // when complete for the workspace's whole tree.
    let lazy = options
        .lazy
        .filter(|_| complete.is_some() && options.only.is_none());
    if options.lazy.is_some() && lazy.is_none() {
        return Err(CliError::bad_path(
            root,
            "a lazily checked-out workspace needs an index complete for its head",
        ));
    }
    // A watcher's report narrows a lazy scan: the walk goes only where it says.
    let watched = options.watched.filter(|_| lazy.is_some());
    if options.watched.is_some() && watched.is_none() {
        return Err(CliError::bad_path(
            root,
            "a watcher's report applies to a lazy scan only",
        ));
    }
    let mut indexed_seen = 0usize;
    // A lazy scan records only what the index does not vouch for; the paths it
    // vouched for (borrowed from the index) are kept for the removals, which need
    // them only when some entry of the index was not seen.
    report.partial = lazy.is_some();
    let mut vouched: Vec<&str> = Vec::new();
    // A hidden bar (`-q`, no terminal) is not ticked per entry.
    let shown = !progress.is_hidden();
    // Files to read: (full path, workspace path, size, mode).
    let mut to_read: Vec<(PathBuf, String, u64, u32)> = Vec::new();
    // Files whose stat changed where the tip has a file of the same size and mode:
    // compared with the tip's content before anything is loaded (lazy scans only).
    let mut to_compare: Vec<crate::recheck::Candidate> = Vec::new();
    let mut bytes_to_read = 0u64;
    let nested = walk(root, options.skip, options.only.or(watched), &mut |w| {
        let (full, path) = (w.full, w.path);
        // With a watcher's report, a directory on the way to a reported path is an
        // entry like any other (the index records it, and vouches for it).
        if w.scope == Scope::Ancestor && watched.is_none() {
            if w.found == Found::Dir && !ws.exists(path) {
                ws.mkdir(path)?;
                report.changed = true;
            }
            return Ok(true);
        }
        report.entries += 1;
        if shown {
            progress.inc(1);
        }
        if let Some(ix) = complete {
            // One look-up: counted as seen, and trusted if it is a clean file.
            // (Something that is not a file, directory or symlink is not recorded: a
            // recorded entry replaced by one counts as unseen, so it is removed.)
            let recorded = ix.entries.get_key_value(path);
            indexed_seen += usize::from(recorded.is_some() && w.found != Found::Other);
            if let (Found::File, Some(stat), Some((key, IndexEntry::File { stat: s, digest }))) =
                (w.found, w.stat, recorded)
            {
                if ix.trusted(s, &stat) {
                    report.files_skipped += 1;
                    if report.partial {
                        vouched.push(key);
                    } else {
                        report
                            .stats
                            .insert(path.to_string(), Seen::File(stat, Some(digest.clone())));
                    }
                    return Ok(true);
                }
                if lazy.is_some()
                    && s.size == stat.size
                    && file_mode(s.mode) == file_mode(stat.mode)
                {
                    to_compare.push(crate::recheck::Candidate {
                        full: full.to_path_buf(),
                        path: path.to_string(),
                        stat,
                        digest: digest.clone(),
                    });
                    return Ok(true);
                }
            }
            // A directory where the tip has one: nothing to do in the workspace (its
            // mode is always the default), so a lazy one stays unloaded.
            if let (true, Found::Dir, Some((key, IndexEntry::Dir))) =
                (report.partial, w.found, recorded)
            {
                vouched.push(key);
                return Ok(true);
            }
        }
        if let Some(source) = lazy {
            // Its directory, and itself if the tip has a directory there (an entry
            // retyped from one is compared with what it was).
            ws.load_dir(path, source)?;
        }
        let current = ws.metadata(path).ok();
        let kind = match w.found {
            Found::Dir => Some(EntryKind::Dir),
            Found::Symlink => Some(EntryKind::Symlink),
            Found::File => Some(EntryKind::File),
            Found::Other => None,
        };
        if kind.is_some() && current.as_ref().map(|c| c.kind) != kind {
            report.changed = true;
        }
        match w.found {
            Found::Dir => {
                if current.as_ref().is_some_and(|c| c.kind != EntryKind::Dir) {
                    ws.remove(path)?;
                }
                if current.as_ref().map(|c| c.kind) != Some(EntryKind::Dir) {
                    ws.mkdir(path)?;
                }
                report.stats.insert(path.to_string(), Seen::Dir);
            }
            Found::Symlink => {
                let stat = w.stat.ok_or_else(|| CliError::bad_path(full, "no stat"))?;
                let target = std::fs::read_link(full).at(full)?;
                let target = target
                    .to_str()
                    .ok_or_else(|| CliError::bad_path(full, "symlink target is not valid UTF-8"))?;
                let same = current
                    .as_ref()
                    .is_some_and(|c| c.kind == EntryKind::Symlink)
                    && ws.read_link(path).ok() == Some(target);
                if !same {
                    report.changed = true;
                    if current.is_some() {
                        ws.remove(path)?;
                    }
                    ws.symlink(path, target)?;
                }
                report.stats.insert(path.to_string(), Seen::Symlink(stat));
            }
            Found::File => {
                let stat = w.stat.ok_or_else(|| CliError::bad_path(full, "no stat"))?;
                let mode = file_mode(stat.mode);
                let vouched = current.as_ref().is_some_and(|c| {
                    c.kind == EntryKind::File
                        && c.size == stat.size
                        && options
                            .index
                            .and_then(|ix| ix.clean(path, &stat))
                            .is_some_and(|d| digest_of(ws, path).as_ref() == Some(d))
                });
                if current
                    .as_ref()
                    .is_some_and(|c| c.kind == EntryKind::File && c.mode != mode)
                {
                    report.changed = true;
                }
                if vouched {
                    report.files_skipped += 1;
                    if current.as_ref().is_some_and(|c| c.mode != mode) {
                        ws.set_mode(path, mode)?;
                    }
                } else {
                    match &current {
                        Some(c) if c.kind == EntryKind::File && c.size == stat.size => {
                            report.reread += 1
                        }
                        _ => report.changed = true,
                    }
                    if current.as_ref().is_some_and(|c| c.kind != EntryKind::File) {
                        ws.remove(path)?;
                    }
                    bytes_to_read += stat.size;
                    to_read.push((full.to_path_buf(), path.to_string(), stat.size, mode));
                }
                let digest = if vouched { digest_of(ws, path) } else { None };
                report
                    .stats
                    .insert(path.to_string(), Seen::File(stat, digest));
            }
            Found::Other => {
                eprintln!(
                    "warning: {}: not a file, directory or symlink; skipped",
                    full.display()
                );
                return Ok(true);
            }
        }
        Ok(true)
    })?;
    if let (Some(source), false) = (lazy, to_compare.is_empty()) {
        let compared_bytes = to_compare.iter().map(|c| c.stat.size).sum();
        crate::progress::phase(progress, "comparing", compared_bytes);
        let same = crate::recheck::same_as_tip(&to_compare, source, ws.parallelism())?;
        progress.set_position(compared_bytes);
        for (c, same) in to_compare.into_iter().zip(same) {
            if same {
                report.files_read += 1;
                report.bytes_read += c.stat.size;
                report.files_compared += 1;
                report
                    .stats
                    .insert(c.path, Seen::File(c.stat, Some(c.digest)));
                continue;
            }
            // Not proven the tip's: the ordinary path for a file read again (its
            // directory loaded, what the tip holds there compared by the commit).
            ws.load_dir(&c.path, source)?;
            let mode = file_mode(c.stat.mode);
            let current = ws.metadata(&c.path).ok();
            match &current {
                Some(m) if m.kind == EntryKind::File && m.size == c.stat.size => {
                    report.reread += 1;
                    if m.mode != mode {
                        report.changed = true;
                    }
                }
                _ => report.changed = true,
            }
            if current.as_ref().is_some_and(|m| m.kind != EntryKind::File) {
                ws.remove(&c.path)?;
            }
            bytes_to_read += c.stat.size;
            to_read.push((c.full, c.path.clone(), c.stat.size, mode));
            report.stats.insert(c.path, Seen::File(c.stat, None));
        }
    }
    let files_to_read = to_read.len() as u64;
    crate::progress::phase(progress, "reading", bytes_to_read);
    for (full, path, _, mode) in to_read {
        let data = std::fs::read(&full).at(&full)?;
        report.files_read += 1;
        report.bytes_read += data.len() as u64;
        progress.inc(data.len() as u64);
        progress.set_message(format!("{}/{files_to_read} files", report.files_read));
        let len = data.len() as u64;
        // The read buffer becomes the file's bytes (no copy into fresh memory).
        ws.write_owned(&path, data)?;
        if ws.metadata(&path)?.mode != mode {
            ws.set_mode(&path, mode)?;
        }
        after_read(ws, len)?;
    }
    // Removals: what the workspace holds and the walk did not see. With a complete
    // index that saw every one of its entries, there are none.
    let all_seen =
        complete.is_some_and(|ix| options.only.is_none() && indexed_seen == ix.entries.len());
    if let (false, Some(source), Some(ix)) = (all_seen, lazy, complete) {
        // The index lists exactly the workspace's entries: what it lists and the walk
        // did not see is gone (after an ancestor's removal, `exists` says no).
        let vouched: std::collections::HashSet<&str> = vouched.into_iter().collect();
        // With a watcher's report, only entries at or below a reported path can
        // have gone (everything else is as recorded).
        let candidates: Box<dyn Iterator<Item = &String>> = match watched {
            Some(paths) => Box::new(paths.iter().flat_map(|p| ix.entries.below(p))),
            None => Box::new(ix.entries.keys()),
        };
        for path in candidates {
            if !report.stats.contains_key(path) && !vouched.contains(path.as_str()) {
                report.removed.push(path.clone());
                ws.load_dir(parent_of(path), source)?;
                if ws.exists(path) {
                    ws.remove(path)?;
                    report.changed = true;
                }
            }
        }
    } else if !all_seen {
        for (path, _) in ws.walk() {
            if scope_of(options.only, &path) == Scope::Inside
                && !report.stats.contains_key(&path)
                && ws.exists(&path)
            {
                ws.remove(&path)?;
                report.changed = true;
            }
        }
    }
    report.nested = nested;
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
