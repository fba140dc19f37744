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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use indicatif::ProgressBar;
use rustix::fs::AtFlags;
use snapgraph::{EntryKind, ObjectSource, Workspace};

use crate::ahead::{self, Ahead, Kept};
use crate::error::{CliError, IoContext, Result, Unrecorded};
use crate::index::{digest_of, file_mode, Digest, FileStat, Index, IndexEntry, Listing};
use crate::repo::DOT_DIR;

/// The name of ignore files.
pub const IGNORE_FILE: &str = ".snapgraphignore";

/// The error of a name a snapshot cannot hold, with the way around it.
const NOT_UTF8_NAME: &str =
    "file name is not valid UTF-8 (snapshots hold UTF-8 names; a .snapgraphignore rule leaves it out)";

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
    /// Directories listed (see [`WalkReport`]).
    pub dirs_listed: u64,
    /// Directories whose listing the index vouched for (not listed).
    pub dirs_reused: u64,
}

/// An entry a scan recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// A regular file and its stat; with the digest the index vouched for when the
    /// file was not read.
    File(FileStat, Option<Digest>),
    /// A symlink and its stat.
    Symlink(FileStat),
    /// A directory, with its listing when the walk took one.
    Dir(Option<Listing>),
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
        Seen::Dir(listing) => IndexEntry::Dir { listing: *listing },
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
    /// Stats an earlier walk over `index` took ([`Survey::kept`]): used where the
    /// index vouches for them, instead of taking them again ([`Kept`]).
    pub kept: Option<&'a Kept>,
    /// With `watched` from a [`survey`] (taken after this command's clock probe): the
    /// listings it took ([`Survey::listings`]). A directory is then recorded with its
    /// listing there, or else with the one the index records (the survey saw it
    /// hold), whether the narrowed walk passes it or not, instead of with none.
    pub listings: Option<&'a HashMap<String, Listing>>,
}

impl<'a> ScanOptions<'a> {
    /// A whole-tree scan that trusts no stat cache and skips the repository's own
    /// directory `skip`: callers set what they use with struct update syntax
    /// (`ScanOptions { index, ..ScanOptions::new(&dot) }`).
    pub fn new(skip: &'a Path) -> Self {
        ScanOptions {
            index: None,
            skip,
            only: None,
            lazy: None,
            watched: None,
            kept: None,
            listings: None,
        }
    }
}

impl std::fmt::Debug for ScanOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanOptions")
            .field("index", &self.index.map(|ix| ix.tip))
            .field("skip", &self.skip)
            .field("only", &self.only)
            .field("lazy", &self.lazy.is_some())
            .field("watched", &self.watched)
            .field("kept", &self.kept.is_some())
            .field("listings", &self.listings.map(HashMap::len))
            .finish()
    }
}

/// The directory holding the workspace path `path` (`/` for a top-level name).
pub(crate) fn parent_of(path: &str) -> &str {
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
    /// A directory's listing now, for the next index (every directory but the root
    /// in a walk without `only`).
    pub listing: Option<Listing>,
    /// Its position in the entries of the index the walk was given to reuse
    /// listings from, when the walk knows it without a look-up (an entry of a
    /// reused listing); `None` says nothing (look it up).
    pub at: Option<usize>,
}

/// What a [`walk`] saw besides the entries it visited.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WalkReport {
    /// Directories skipped because they hold a repository of their own, sorted.
    pub nested: Vec<PathBuf>,
    /// Directories listed (`getdents`), the root included.
    pub listed: u64,
    /// Directories whose listing was taken from the index instead.
    pub reused: u64,
}

/// Walks the directory `root` the way every scan does, parents before children,
/// calling `visit` for each entry recorded (or on the way to `only`'s paths) until it
/// returns `false`; returns the nested repositories skipped and how many
/// directories were listed.
///
/// Skipped: `skip` (the repository's own directory) and any `.snapgraph` at the
/// top; entries a `.snapgraphignore` ignores (gitignore syntax, in any directory,
/// applying below it, the deepest file deciding first); directories holding a
/// `.snapgraph` directory (another repository: listed in the result); entries
/// outside `only`. Refused: names that are not UTF-8 and names a file system could
/// fold into `.snapgraph` ([`crate::materialize::is_reserved_name`]). An ignore file
/// is read only where the directory listing shows one, and only directories are
/// probed for a `.snapgraph` of their own: regular files are not stat'ed here.
///
/// With `recorded` (an index complete for the branch tip) and no `only`, a
/// directory whose [`Listing`] the index vouches for is not listed: its entries are
/// the index's (see [`crate::index`], "A directory's listing is reused"). Without
/// `only`, every directory but the root is visited with its listing now
/// ([`Walked::listing`]), for the next index.
///
/// With `recorded` holding at least [`ahead::MIN_ENTRIES`] entries on a machine of more
/// than one core, a helper thread stats the recorded files from the far end of the
/// index while the walk goes on ([`crate::ahead`]).
pub fn walk(
    root: &Path,
    skip: &Path,
    only: Option<&[String]>,
    recorded: Option<&Index>,
    visit: &mut dyn FnMut(Walked<'_>) -> Result<bool>,
) -> Result<WalkReport> {
    walk_kept(root, skip, only, recorded, None, visit).map(|(report, _)| report)
}

/// [`walk`], using the stats `kept` from an earlier walk over the same `recorded`
/// where the index vouches for them ([`Kept::vouched`]), and returning the stats
/// this walk took (with `recorded` of at least [`ahead::MIN_ENTRIES`] entries and no
/// `only`).
pub fn walk_kept(
    root: &Path,
    skip: &Path,
    only: Option<&[String]>,
    recorded: Option<&Index>,
    kept: Option<&Kept>,
    visit: &mut dyn FnMut(Walked<'_>) -> Result<bool>,
) -> Result<(WalkReport, Option<Kept>)> {
    // Listings are taken (and reused) for a walk of the whole tree only: a narrowed
    // walk filters them by scope.
    let recorded = recorded.filter(|_| only.is_none());
    let kept = kept.zip(recorded);
    let Some(stats) = recorded
        .filter(|ix| ix.entries.len() >= ahead::MIN_ENTRIES)
        .map(|ix| Ahead::new(&ix.entries).leaving(kept.map(|(k, _)| k), ix.probe_ns))
    else {
        return walk_with(root, skip, only, recorded, None, kept, visit).map(|r| (r, None));
    };
    let report = std::thread::scope(|threads| {
        let stats = &stats;
        // On one core a helper would only take turns with the walk: the stats are
        // then all the walk's own, kept all the same.
        let helper = (crate::cpus::cores() > 1).then(|| {
            let beside = crate::cpus::Beside::here();
            let helper = std::thread::Builder::new()
                .name("snapgraph-stat".into())
                .spawn_scoped(threads, move || {
                    beside.leave();
                    // The root opened again here (its error, if any, is the walk's
                    // to report): no stat is taken ahead without it.
                    if let Ok(fd) = open_dir(root) {
                        stats.run(&fd);
                    }
                });
            beside.yield_to();
            helper
        });
        // A walk that ends (done, stopped early or failed) stops the helper.
        struct Stop<'a, 'b>(&'a Ahead<'b>);
        impl Drop for Stop<'_, '_> {
            fn drop(&mut self) {
                self.0.stop();
            }
        }
        let _stop = Stop(stats);
        // Without a helper (one core, or the thread could not start) `take` leaves
        // every stat to the walk.
        drop(helper);
        walk_with(root, skip, only, recorded, Some(stats), kept, visit)
    })?;
    Ok((report, Some(stats.into_kept())))
}

/// [`walk`], with the stats `ahead` takes (see [`crate::ahead`]) and those `kept`
/// from an earlier walk over `recorded`.
fn walk_with(
    root: &Path,
    skip: &Path,
    only: Option<&[String]>,
    recorded: Option<&Index>,
    ahead: Option<&Ahead<'_>>,
    kept: Option<(&Kept, &Index)>,
    visit: &mut dyn FnMut(Walked<'_>) -> Result<bool>,
) -> Result<WalkReport> {
    let mut report = WalkReport::default();
    // `skip` is compared only in its parent directory, by name.
    let skip_at = skip.parent().zip(skip.file_name());
    let record = only.is_none();
    // Directories to list, each visited when listed (so a nested repository is known
    // from its own listing, without a probe), before anything below it.
    let mut stack: Vec<Pending> = vec![Pending {
        at: None,
        dir: root.to_path_buf(),
        path: String::new(),
        scope: Scope::Inside,
        rules: Rc::new(Vec::new()),
        fingerprint: [0; 32],
        parent: None,
    }];
    // One listing's names, reused: (start in `name_bytes`, end, kind).
    let mut name_bytes: Vec<u8> = Vec::new();
    let mut names: Vec<(usize, usize, Kind)> = Vec::new();
    // The stats of a reused listing's files and symlinks, taken before it is trusted
    // (in `names`' order; `None` for directories).
    let mut stats: Vec<Option<FileStat>> = Vec::new();
    // The full and workspace paths of the entry at hand: the directory's, then the
    // name pushed and truncated again (no allocation per entry).
    let mut full: Vec<u8> = Vec::new();
    let mut path = String::new();
    // The listing's buffer, reused by every directory: `RawDir` hands out names
    // borrowed from it (no allocation per entry, as `Dir`'s owned names were).
    let mut dirents: Vec<u8> = Vec::with_capacity(DIRENT_BUFFER);
    // The root, open (set when it is listed, first): directories whose listings
    // hold are stat'ed by their path below it, not opened.
    let mut root_fd: Option<Rc<rustix::fd::OwnedFd>> = None;
    // The path below the root of an entry stat'ed by path, reused.
    let mut below_buf = String::new();
    // A reused listing's entries, borrowed from the index.
    let mut children: Vec<(usize, &str, &IndexEntry)> = Vec::new();
    while let Some(Pending {
        at: dir_at,
        dir,
        path: dir_path,
        scope: dir_scope,
        rules: parent_rules,
        fingerprint: parent_fingerprint,
        parent,
    }) = stack.pop()
    {
        // The directory's own stat (the root has no entry, so no listing of its own
        // is recorded). A directory whose recorded listing may hold is stat'ed by
        // its path below the root (ahead, by the helper, or here) and opened only
        // if the listing does not hold: its entries are then stat'ed by path too.
        // Any other directory is opened by name in its open parent (one lookup, not
        // one per component of the whole path; by its path below the root when the
        // parent was not opened), the root by its path, and `fstat`ed, before it is
        // listed.
        let below = dir_path.trim_start_matches('/');
        let listed_at = match (recorded, record) {
            (Some(ix), true) if !dir_path.is_empty() => dir_at
                .or_else(|| ix.entries.position(&dir_path))
                .filter(|&i| {
                    matches!(
                        ix.entries.at(i),
                        Some((_, IndexEntry::Dir { listing: Some(_) }))
                    )
                }),
            _ => None,
        };
        let fstat = |fd: &rustix::fd::OwnedFd| -> Result<FileStat> {
            Ok(FileStat::of_stat(
                &rustix::fs::fstat(fd).map_err(|e| CliError::io(&dir, e.into()))?,
            ))
        };
        let by_path = match (listed_at, &root_fd) {
            (Some(i), Some(root_fd)) => ahead
                .and_then(|a| a.take(i))
                .filter(|s| Kind::of_mode(s.mode) == Kind::Dir)
                .or_else(|| {
                    let now = rustix::fs::statat(&**root_fd, below, AtFlags::SYMLINK_NOFOLLOW)
                        .ok()
                        .map(|s| FileStat::of_stat(&s))
                        .filter(|s| Kind::of_mode(s.mode) == Kind::Dir)?;
                    if let Some(a) = ahead {
                        a.keep(i, now);
                    }
                    Some(now)
                })
                .map(|now| (DirAt::Below(root_fd.clone()), now)),
            _ => None,
        };
        let (mut dir_at_fd, mut dir_stat) = match by_path {
            Some((at, now)) => (at, Some(now)),
            None => {
                let fd = match open_in(parent.as_ref(), root_fd.as_ref(), &dir, below) {
                    Ok(fd) => fd,
                    // Gone since its parent was listed: absent, with all it held.
                    Err(e) if !dir_path.is_empty() && e.vanished() => continue,
                    Err(e) => return Err(e),
                };
                let now = if record && !dir_path.is_empty() {
                    Some(fstat(&fd)?)
                } else {
                    None
                };
                (DirAt::Open(fd), now)
            }
        };
        if dir_path.is_empty() {
            if let DirAt::Open(fd) = &dir_at_fd {
                root_fd = Some(fd.clone());
            }
        }
        name_bytes.clear();
        names.clear();
        stats.clear();
        let mut ignore_bytes: Option<Vec<u8>> = None;
        let reused = match (recorded, dir_stat) {
            (Some(ix), Some(now)) => reuse_listing(
                ix,
                &dir,
                &dir_path,
                &dir_at_fd.stat_in(below),
                &now,
                &parent_fingerprint,
                &mut ignore_bytes,
                &mut name_bytes,
                &mut names,
                &mut stats,
                &mut children,
                &mut below_buf,
                ahead,
                kept,
            )?,
            _ => false,
        };
        if reused {
            report.reused += 1;
        } else {
            // The listing does not hold: the directory is listed, opened now if it
            // was not, with a stat taken now, before the listing.
            let fd = match &dir_at_fd {
                DirAt::Open(fd) => fd.clone(),
                DirAt::Below(_) => {
                    let fd = match open_in(parent.as_ref(), root_fd.as_ref(), &dir, below) {
                        Ok(fd) => fd,
                        Err(e) if e.vanished() => continue,
                        Err(e) => return Err(e),
                    };
                    dir_stat = Some(fstat(&fd)?);
                    dir_at_fd = DirAt::Open(fd.clone());
                    fd
                }
            };
            name_bytes.clear();
            names.clear();
            stats.clear();
            match list_dir(&fd, &dir, &mut dirents, &mut name_bytes, &mut names) {
                Ok(()) => {}
                // Removed while open (`getdents` of a removed directory fails with
                // ENOENT): absent, with all it held.
                Err(e) if !dir_path.is_empty() && e.vanished() => continue,
                Err(e) => return Err(e),
            }
            report.listed += 1;
        }
        let stat_in = dir_at_fd.stat_in(below);
        let name_of = |&(start, end, _): &(usize, usize, Kind)| &name_bytes[start..end];
        if !dir_path.is_empty() && !reused {
            if names
                .iter()
                .any(|n| name_of(n) == DOT_DIR.as_bytes() && n.2 == Kind::Dir)
            {
                report.nested.push(dir);
                continue;
            }
            let name = dir_path.rsplit('/').next().unwrap_or_default();
            if crate::materialize::is_reserved_name(name) {
                return Err(reserved(&dir));
            }
        }
        if !reused {
            names.sort_unstable_by(|a, b| name_of(a).cmp(name_of(b)));
        }
        // The ignore rules in force here: the parent's, and this directory's own
        // file (read once: its bytes are both the rules and their fingerprint).
        let ignore_file = if reused {
            ignore_bytes.is_some()
        } else {
            names
                .iter()
                .any(|n| name_of(n) == IGNORE_FILE.as_bytes() && n.2 != Kind::Dir)
        };
        let mut rules = parent_rules;
        let mut fingerprint = parent_fingerprint;
        if ignore_file {
            let file = dir.join(IGNORE_FILE);
            let bytes = match ignore_bytes.take() {
                Some(b) => b,
                None => std::fs::read(&file).at(&file)?,
            };
            let mut all = (*rules).clone();
            all.push(ignore_rules(&dir, &file, &bytes)?);
            rules = Rc::new(all);
            fingerprint = rules_fingerprint(&fingerprint, Some(&bytes));
        }
        full.clear();
        full.extend_from_slice(dir.as_os_str().as_bytes());
        full.push(b'/');
        let full_len = full.len();
        // What the walk passes over here: the repository's own directory and what
        // the rules ignore (a reused listing holds only what these same rules let
        // through).
        if !reused {
            let skip_name = skip_at
                .filter(|(parent, _)| *parent == dir.as_path())
                .map(|(_, name)| name.as_bytes());
            names.retain(|&(start, end, kind)| {
                let name = &name_bytes[start..end];
                if (dir_path.is_empty() && name == DOT_DIR.as_bytes()) || skip_name == Some(name) {
                    return false;
                }
                full.truncate(full_len);
                full.extend_from_slice(name);
                let full_path = Path::new(std::ffi::OsStr::from_bytes(&full));
                !ignored_by(&rules, full_path, kind == Kind::Dir)
            });
            full.truncate(full_len);
        }
        if !dir_path.is_empty() {
            let go_on = visit(Walked {
                full: &dir,
                path: &dir_path,
                found: Found::Dir,
                scope: dir_scope,
                stat: None,
                listing: dir_stat.map(|stat| Listing {
                    stat,
                    rules: fingerprint,
                    ignore_file,
                    entries: u32::try_from(names.len()).unwrap_or(u32::MAX),
                }),
                at: dir_at,
            })?;
            if !go_on {
                break;
            }
        }
        path.clear();
        path.push_str(&dir_path);
        path.push('/');
        let path_len = path.len();
        let mut subdirs = Vec::new();
        let mut stopped = false;
        for (i, n) in names.iter().enumerate() {
            let (name, kind) = (name_of(n), n.2);
            full.extend_from_slice(name);
            let full_path = Path::new(std::ffi::OsStr::from_bytes(&full));
            let is_dir = kind == Kind::Dir;
            // A reused listing's names are the index's children, in its order.
            let child = reused.then(|| children.get(i)).flatten();
            let name = match child {
                Some(&(_, name, _)) => name,
                None => std::str::from_utf8(name)
                    .map_err(|_| CliError::bad_path(full_path, NOT_UTF8_NAME))?,
            };
            let at = child.map(|&(at, _, _)| at);
            path.push_str(name);
            let scope = scope_of(only, &path);
            if scope == Scope::Outside {
                // Neither walked nor recorded.
            } else if is_dir {
                // Visited when listed (below), where a nested repository shows.
                subdirs.push((full_path.to_path_buf(), path.clone(), scope, at));
            } else {
                if !reused && crate::materialize::is_reserved_name(name) {
                    return Err(reserved(full_path));
                }
                let found = match kind {
                    Kind::Symlink => Found::Symlink,
                    Kind::File => Found::File,
                    _ => Found::Other,
                };
                let stat = match (found, stats.get(i).copied().flatten()) {
                    (_, Some(taken)) => Some(taken),
                    (Found::File | Found::Symlink, None) => {
                        // A recorded entry's stat may have been taken ahead, or kept.
                        let at = at.or_else(|| {
                            recorded
                                .filter(|_| ahead.is_some() || kept.is_some())
                                .and_then(|ix| ix.entries.position(&path))
                        });
                        match stat_child(ahead, kept, at, &stat_in, name, kind, &mut below_buf) {
                            Ok(st) => Some(st),
                            // Gone since the listing: absent, not visited.
                            Err(e)
                                if e == rustix::io::Errno::NOENT
                                    || e == rustix::io::Errno::NOTDIR =>
                            {
                                full.truncate(full_len);
                                path.truncate(path_len);
                                continue;
                            }
                            Err(e) => return Err(CliError::io(full_path, e.into())),
                        }
                    }
                    _ => None,
                };
                if !visit(Walked {
                    full: full_path,
                    path: &path,
                    found,
                    scope,
                    stat,
                    listing: None,
                    at,
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
        // Reversed onto the stack: directories are walked in name order. They share
        // this directory's descriptor, if it was opened (so at most one per level of
        // the walk is open); else they are opened by their path below the root.
        for (full, path, scope, at) in subdirs.into_iter().rev() {
            stack.push(Pending {
                at,
                dir: full,
                path,
                scope,
                rules: rules.clone(),
                fingerprint,
                parent: dir_at_fd.opened(),
            });
        }
    }
    report.nested.sort();
    Ok(report)
}

/// How the walk reaches a directory: open, or (its recorded listing may hold) by its
/// path below the root, whose descriptor this holds.
enum DirAt {
    Open(Rc<rustix::fd::OwnedFd>),
    Below(Rc<rustix::fd::OwnedFd>),
}

impl DirAt {
    /// Where its entries are stat'ed; `below` is its path below the root.
    fn stat_in<'a>(&'a self, below: &'a str) -> StatIn<'a> {
        match self {
            DirAt::Open(fd) => StatIn::Dir(fd),
            DirAt::Below(root) => StatIn::Below(root, below),
        }
    }

    /// Its descriptor, if it was opened.
    fn opened(&self) -> Option<Rc<rustix::fd::OwnedFd>> {
        match self {
            DirAt::Open(fd) => Some(fd.clone()),
            DirAt::Below(_) => None,
        }
    }
}

/// Where a directory's entries are stat'ed: by name in the open directory, or by
/// path below the open root (the directory's path below it, then the name).
enum StatIn<'a> {
    Dir(&'a rustix::fd::OwnedFd),
    Below(&'a rustix::fd::OwnedFd, &'a str),
}

impl StatIn<'_> {
    /// The `lstat` of the entry `name`; `buf` holds its path below the root.
    fn stat(&self, name: &str, buf: &mut String) -> rustix::io::Result<FileStat> {
        let (fd, path) = match *self {
            StatIn::Dir(fd) => (fd, name),
            StatIn::Below(root, dir) => {
                buf.clear();
                buf.push_str(dir);
                buf.push('/');
                buf.push_str(name);
                (root, buf.as_str())
            }
        };
        Ok(FileStat::of_stat(&rustix::fs::statat(
            fd,
            path,
            AtFlags::SYMLINK_NOFOLLOW,
        )?))
    }
}

/// Opens the directory `dir` (`below` the root): by name in its open `parent`, else
/// by path below the open root, else (the root itself) by its path.
fn open_in(
    parent: Option<&Rc<rustix::fd::OwnedFd>>,
    root: Option<&Rc<rustix::fd::OwnedFd>>,
    dir: &Path,
    below: &str,
) -> Result<Rc<rustix::fd::OwnedFd>> {
    Ok(Rc::new(match (parent, dir.file_name(), root) {
        (Some(parent), Some(name), _) => open_dir_at(parent, name, dir)?,
        (None, Some(_), Some(root)) if !below.is_empty() => {
            open_dir_at(root, std::ffi::OsStr::new(below), dir)?
        }
        _ => open_dir(dir)?,
    }))
}

/// A directory the walk has yet to list.
struct Pending {
    /// Its position in the index's entries, when known ([`Walked::at`]).
    at: Option<usize>,
    /// On disk.
    dir: PathBuf,
    /// Its workspace path (empty for the root).
    path: String,
    /// Where it lies relative to the walk's `only`.
    scope: Scope,
    /// The ignore files in force in it (its parent's and above).
    rules: Rc<Vec<Gitignore>>,
    /// Their fingerprint ([`rules_fingerprint`]).
    fingerprint: [u8; 32],
    /// Its parent, open (`None` for the root, and for a directory whose parent's
    /// listing held: it is opened by its path below the root, if it must be).
    parent: Option<Rc<rustix::fd::OwnedFd>>,
}

/// The fingerprint of the ignore rules in force in a directory: its parent's
/// (all zeros above the root) when it holds no ignore file, else BLAKE3 of the
/// parent's, the file's length (u64 little-endian) and its bytes. Equal
/// fingerprints mean the same ignore files, byte for byte, on the way down.
pub fn rules_fingerprint(parent: &[u8; 32], ignore_file: Option<&[u8]>) -> [u8; 32] {
    match ignore_file {
        None => *parent,
        Some(bytes) => *blake3::Hasher::new()
            .update(parent)
            .update(&(bytes.len() as u64).to_le_bytes())
            .update(bytes)
            .finalize()
            .as_bytes(),
    }
}

/// Whether a scan of `root` would record the entry at the workspace path `path`
/// (`/a/b`): a file, directory or symlink that no ignore file from the root down
/// ignores (nor any directory above it), not the repository's own directory, and
/// neither in nor a nested repository. Reads the ignore files on the way (an
/// unreadable or invalid one is an error naming it). A path that is not there, or
/// is a socket, FIFO or device, is not recorded.
pub fn records(root: &Path, path: &str) -> Result<bool> {
    Ok(unrecorded(root, path)?.is_none())
}

/// Why a scan of `root` would not record the entry at the workspace path `path`
/// (see [`records`]); `None` when it would.
pub fn unrecorded(root: &Path, path: &str) -> Result<Option<Unrecorded>> {
    let names: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let mut rules: Vec<Gitignore> = Vec::new();
    let mut dir = root.to_path_buf();
    for (i, name) in names.iter().enumerate() {
        let at = || names[..=i].join("/");
        if i == 0 && *name == DOT_DIR {
            return Ok(Some(Unrecorded::Repository(at())));
        }
        let file = dir.join(IGNORE_FILE);
        match std::fs::read(&file) {
            Ok(bytes) => rules.push(ignore_rules(&dir, &file, &bytes)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if e.kind() == std::io::ErrorKind::IsADirectory => {}
            Err(e) => return Err(CliError::io(&file, e)),
        }
        let full = dir.join(name);
        let kind = match std::fs::symlink_metadata(&full) {
            Ok(m) => Kind::of(rustix::fs::FileType::from_raw_mode(
                std::os::unix::fs::MetadataExt::mode(&m),
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Some(Unrecorded::Absent));
            }
            Err(e) => return Err(CliError::io(&full, e)),
        };
        let is_dir = kind == Kind::Dir;
        if ignored_by(&rules, &full, is_dir) {
            return Ok(Some(Unrecorded::Ignored(at())));
        }
        if is_dir && is_repository(&full) {
            return Ok(Some(Unrecorded::Repository(at())));
        }
        let last = i + 1 == names.len();
        if !last && !is_dir {
            return Ok(Some(Unrecorded::Absent));
        }
        if last {
            return Ok(match kind {
                Kind::File | Kind::Dir | Kind::Symlink => None,
                _ => Some(Unrecorded::Special),
            });
        }
        dir = full;
    }
    Ok(Some(Unrecorded::Absent))
}

/// What a walk of `root` finds that the stat cache `ix` (whole, complete for the
/// tip the working directory holds) does not record: the top-most entries a scan
/// would not record either (ignored by the ignore files from the root down, nested
/// repositories, sockets, FIFOs, devices), relative to `root` and sorted; and the
/// workspace paths of those it would record (made since the cache was, as far as
/// the working directory was found clean: a full checkout's dirty check). Lists
/// each recorded directory once (no `stat`: the listing's types) and compares its
/// names with the cache's children: what `unrecorded_entries`' two walks with the
/// `ignore` crate found, at a fraction of their cost on a large tree.
pub fn unrecorded_in(root: &Path, ix: &Index) -> Result<(Vec<PathBuf>, Vec<String>)> {
    let mut out = Vec::new();
    let mut unknown = Vec::new();
    let mut children = Vec::new();
    let mut stack: Vec<(PathBuf, String, Rc<Vec<Gitignore>>)> =
        vec![(root.to_path_buf(), String::new(), Rc::new(Vec::new()))];
    while let Some((dir, path, parent_rules)) = stack.pop() {
        let mut names: Vec<(std::ffi::OsString, Kind)> = Vec::new();
        for e in std::fs::read_dir(&dir).at(&dir)? {
            let e = e.at(&dir)?;
            let t = e.file_type().at(e.path())?;
            let kind = if t.is_dir() {
                Kind::Dir
            } else if t.is_file() {
                Kind::File
            } else if t.is_symlink() {
                Kind::Symlink
            } else {
                Kind::Other
            };
            names.push((e.file_name(), kind));
        }
        let mut rules = parent_rules;
        if names
            .iter()
            .any(|(n, k)| n.as_bytes() == IGNORE_FILE.as_bytes() && *k != Kind::Dir)
        {
            let file = dir.join(IGNORE_FILE);
            let bytes = std::fs::read(&file).at(&file)?;
            let mut all = (*rules).clone();
            all.push(ignore_rules(&dir, &file, &bytes)?);
            rules = Rc::new(all);
        }
        ix.entries.children_into(&path, &mut children);
        let known: HashMap<&str, &IndexEntry> = children.iter().map(|(_, n, e)| (*n, *e)).collect();
        for (name, kind) in names {
            if path.is_empty() && name.as_bytes() == DOT_DIR.as_bytes() {
                continue;
            }
            let full = dir.join(&name);
            let Some(n) = name.to_str() else {
                // Not a name a scan records: made since, or never recorded.
                unknown.push(format!("{path}/{}", name.to_string_lossy()));
                continue;
            };
            match known.get(n) {
                Some(IndexEntry::Dir { .. }) if kind == Kind::Dir => {
                    stack.push((full, format!("{path}/{n}"), rules.clone()));
                }
                Some(_) => {}
                None => {
                    let is_dir = kind == Kind::Dir;
                    if ignored_by(&rules, &full, is_dir)
                        || (is_dir && is_repository(&full))
                        || kind == Kind::Other
                    {
                        out.push(full.strip_prefix(root).unwrap_or(&full).to_path_buf());
                    } else {
                        unknown.push(format!("{path}/{n}"));
                    }
                }
            }
        }
    }
    out.sort();
    Ok((out, unknown))
}

/// Whether the ignore files `rules` (the root's first) ignore the entry at `full`:
/// the last of them with a matching pattern decides, as git has it.
fn ignored_by(rules: &[Gitignore], full: &Path, is_dir: bool) -> bool {
    let decided = rules
        .iter()
        .rev()
        .map(|g| g.matched(full, is_dir))
        .find(|m| !m.is_none());
    matches!(decided, Some(Match::Ignore(_)))
}

/// Whether the directory `full` holds a repository of its own (a nested one, for
/// a walk from above it).
fn is_repository(full: &Path) -> bool {
    full.join(DOT_DIR)
        .symlink_metadata()
        .is_ok_and(|m| m.is_dir())
}

/// The rules of the ignore file `file` of `dir`, from its bytes (as
/// `GitignoreBuilder::add` reads a file: line by line, a UTF-8 byte-order mark
/// before the first line dropped; any line that is not UTF-8 or not a valid glob is
/// an error naming the file).
fn ignore_rules(dir: &Path, file: &Path, bytes: &[u8]) -> Result<Gitignore> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| CliError::bad_path(file, "ignore file is not valid UTF-8"))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut b = GitignoreBuilder::new(dir);
    for line in text.lines() {
        b.add_line(Some(file.to_path_buf()), line)
            .map_err(|e| walk_error(file, e))?;
    }
    b.build().map_err(|e| walk_error(file, e))
}

/// Lists the open directory `fd` (at `dir`) into `names` (unsorted), with each
/// entry's type from the listing (or an `lstat` where the file system gives none).
fn list_dir(
    fd: &rustix::fd::OwnedFd,
    dir: &Path,
    dirents: &mut Vec<u8>,
    name_bytes: &mut Vec<u8>,
    names: &mut Vec<(usize, usize, Kind)>,
) -> Result<()> {
    let mut listing = rustix::fs::RawDir::new(fd, dirents.spare_capacity_mut());
    while let Some(e) = listing.next() {
        let e = e.map_err(|e| CliError::io(dir, e.into()))?;
        let name = e.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let kind = match e.file_type() {
            rustix::fs::FileType::Unknown => {
                let st = rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| {
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
    Ok(())
}

/// Whether the listing `ix` records for the directory `dir` (workspace path
/// `dir_path`, its entries stat'ed in `dir_in`, whose stat is `now`) holds now, and if so its
/// entries in `names` (sorted, as a listing would give them after sorting) with
/// the stats of its files and symlinks in `stats`, and its ignore file's bytes in
/// `ignore_bytes` (see [`crate::index`], "A directory's listing is reused"). A
/// listing that does not hold leaves the directory to be listed; so does a stat
/// that fails or shows another type than recorded (the directory changed after
/// `now` was taken). Fails only when the ignore file the listing records cannot be
/// read.
#[allow(clippy::too_many_arguments)] // the walk's reused buffers
fn reuse_listing<'a>(
    ix: &'a Index,
    dir: &Path,
    dir_path: &str,
    dir_in: &StatIn<'_>,
    now: &FileStat,
    parent_fingerprint: &[u8; 32],
    ignore_bytes: &mut Option<Vec<u8>>,
    name_bytes: &mut Vec<u8>,
    names: &mut Vec<(usize, usize, Kind)>,
    stats: &mut Vec<Option<FileStat>>,
    children: &mut Vec<(usize, &'a str, &'a IndexEntry)>,
    below_buf: &mut String,
    ahead: Option<&Ahead<'_>>,
    kept: Option<(&Kept, &Index)>,
) -> Result<bool> {
    let Some(IndexEntry::Dir {
        listing: Some(listing),
    }) = ix.entries.get(dir_path)
    else {
        return Ok(false);
    };
    if !ix.trusted(&listing.stat, now) {
        return Ok(false);
    }
    if listing.ignore_file {
        let file = dir.join(IGNORE_FILE);
        match std::fs::read(&file) {
            Ok(bytes) => *ignore_bytes = Some(bytes),
            // Gone since the `fstat`: the directory changed; list it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(CliError::io(&file, e)),
        }
    }
    let fingerprint = rules_fingerprint(parent_fingerprint, ignore_bytes.as_deref());
    if fingerprint != listing.rules {
        return Ok(false);
    }
    // A listing that held more than the index records (a nested repository, a
    // socket, FIFO or device: never recorded) is listed again, so that they are
    // reported as a listing would.
    ix.entries.children_into(dir_path, children);
    if children.len() != listing.entries as usize {
        return Ok(false);
    }
    for &(at, name, entry) in children.iter() {
        let kind = match entry {
            IndexEntry::File { .. } => Kind::File,
            IndexEntry::Symlink { .. } => Kind::Symlink,
            IndexEntry::Dir { .. } => Kind::Dir,
        };
        let stat = match kind {
            Kind::Dir => None,
            _ => {
                let Ok(st) = stat_child(ahead, kept, Some(at), dir_in, name, kind, below_buf)
                else {
                    return Ok(false);
                };
                if Kind::of_mode(st.mode) != kind {
                    return Ok(false);
                }
                Some(st)
            }
        };
        let start = name_bytes.len();
        name_bytes.extend_from_slice(name.as_bytes());
        names.push((start, name_bytes.len(), kind));
        stats.push(stat);
    }
    Ok(true)
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

/// The `lstat` of `name` in `dir`, the index's entry `at`: one an
/// earlier walk `kept` that the index vouches for, else the one taken ahead (see
/// [`crate::ahead`]), when it shows the kind `want`; else one taken now (and kept
/// for a later walk).
#[allow(clippy::too_many_arguments)] // the walk's reused buffer
fn stat_child(
    ahead: Option<&Ahead<'_>>,
    kept: Option<(&Kept, &Index)>,
    at: Option<usize>,
    dir: &StatIn<'_>,
    name: &str,
    want: Kind,
    buf: &mut String,
) -> rustix::io::Result<FileStat> {
    if let Some(i) = at {
        // Kept first: the helper leaves those entries alone (no wait for it).
        let earlier = kept
            .and_then(|(k, ix)| k.vouched(&ix.entries, ix.probe_ns, i))
            .filter(|s| Kind::of_mode(s.mode) == want)
            .or_else(|| ahead.and_then(|a| a.take(i)))
            .filter(|s| Kind::of_mode(s.mode) == want);
        if let Some(taken) = earlier {
            return Ok(taken);
        }
    }
    let stat = dir.stat(name, buf)?;
    if let (Some(a), Some(i)) = (ahead, at) {
        a.keep(i, stat);
    }
    Ok(stat)
}

impl Kind {
    /// The kind of a full `st_mode`.
    fn of_mode(mode: u32) -> Self {
        Self::of(rustix::fs::FileType::from_raw_mode(
            mode as rustix::fs::RawMode,
        ))
    }

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

/// Opens the directory `name` of the open directory `parent` (at `dir` on disk) for
/// listing and `statat`, refusing a symlink.
fn open_dir_at(
    parent: &rustix::fd::OwnedFd,
    name: &std::ffi::OsStr,
    dir: &Path,
) -> Result<rustix::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::openat(
        parent,
        name,
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
/// `paths` sorted, without any path that lies below another of them (`/` covers
/// everything).
pub fn minimal(mut paths: Vec<String>) -> Vec<String> {
    paths.sort();
    paths.dedup();
    if paths.iter().any(|p| p == "/") {
        return vec!["/".to_string()];
    }
    let mut kept: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(paths.len());
    for p in paths {
        // Sorted: every ancestor of `p` in the list came before it.
        let below = p
            .match_indices('/')
            .skip(1)
            .any(|(i, _)| kept.contains(&p[..i]));
        if !below {
            kept.insert(p.clone());
            out.push(p);
        }
    }
    out
}

/// What a whole walk over a complete index found different from it ([`survey`]).
#[derive(Debug, Default)]
pub struct Survey {
    /// The workspace paths where the directory differs from the index, sorted, none
    /// below another (as a watcher reports them: [`ScanOptions::watched`]); `None`
    /// when there were more than the survey's limit (the walk then stopped there).
    pub changed: Option<Vec<String>>,
    /// The listing now of each directory whose recorded listing does not hold (of
    /// another stat, ignore rules or length, racy, or none), new directories included.
    pub listings: HashMap<String, Listing>,
    /// Recorded files seen with their recorded, non-racy stat: the files the index
    /// vouches for outside [`Survey::changed`].
    pub files: u64,
    /// Directories skipped because they hold a repository of their own, sorted.
    pub nested: Vec<PathBuf>,
    /// The stats the walk took, for a whole-tree scan after it ([`ScanOptions::kept`]).
    pub kept: Option<Kept>,
}

/// Walks the whole directory `root` against `index` (complete for the tip) and says
/// where it differs: an entry added, removed, of another kind, or a file or symlink
/// whose stat is not the recorded, non-racy one (see [`crate::index`]). A directory
/// whose listing no longer holds is a difference only through its entries; its
/// listing now is returned for the next index.
///
/// The caller takes its clock probe *before* the survey: every stat and listing it
/// takes is then as good for the next index as a scan's own. A lazy scan narrowed to
/// [`Survey::changed`] ([`ScanOptions::watched`], [`ScanOptions::listings`]) then
/// costs what changed: every other entry was seen as the index records it. More than
/// `limit` paths (each standing for itself and what lies below it) stop the walk:
/// [`Survey::changed`] is then `None`, and the caller scans the whole tree.
pub fn survey(root: &Path, index: &Index, skip: &Path, limit: usize) -> Result<Survey> {
    let mut seen = vec![false; index.entries.len()];
    let mut changed: Vec<String> = Vec::new();
    // Directories reported whole (new, or retyped into one): what lies below them is
    // theirs.
    let mut whole: HashSet<String> = HashSet::new();
    let mut listings: HashMap<String, Listing> = HashMap::new();
    let mut files = 0u64;
    let mut narrowable = true;
    let (report, kept) = walk_kept(root, skip, None, Some(index), None, &mut |w| {
        let at = w.at.or_else(|| index.entries.position(w.path));
        if let Some(i) = at {
            seen[i] = true;
        }
        let recorded = at.and_then(|i| index.entries.at(i)).map(|(_, e)| e);
        let inside_whole = !whole.is_empty() && whole.contains(parent_of(w.path));
        let same = match (w.found, recorded) {
            (Found::Dir, Some(IndexEntry::Dir { listing })) => {
                let holds = matches!((listing, &w.listing), (Some(was), Some(now)) if was == now && index.trusted(&was.stat, &now.stat));
                if !holds {
                    match w.listing {
                        Some(now) => {
                            listings.insert(w.path.to_string(), now);
                        }
                        // Every directory but the root comes with its listing.
                        None => narrowable = false,
                    }
                }
                true
            }
            (Found::File, Some(IndexEntry::File { stat, .. }))
            | (Found::Symlink, Some(IndexEntry::Symlink { stat })) => {
                let same = w.stat.is_some_and(|now| index.trusted(stat, &now));
                files += u64::from(same && w.found == Found::File);
                same
            }
            _ => false,
        };
        if !same {
            if w.found == Found::Dir {
                match w.listing {
                    Some(now) => {
                        listings.insert(w.path.to_string(), now);
                    }
                    None => narrowable = false,
                }
                whole.insert(w.path.to_string());
            }
            if !inside_whole {
                changed.push(w.path.to_string());
            }
        } else if inside_whole && w.found == Found::Dir {
            whole.insert(w.path.to_string());
        }
        // Paths are counted before they are made minimal: a limit of `limit` after
        // that is only surer, and the walk stops the sooner.
        narrowable &= changed.len() <= limit;
        Ok(narrowable)
    })?;
    if narrowable {
        // Removals: recorded entries the walk did not see.
        changed.extend(
            seen.iter()
                .zip(&index.entries)
                .filter(|(seen, _)| !**seen)
                .map(|(_, (path, _))| path.to_string()),
        );
        changed = minimal(changed);
        narrowable = changed.len() <= limit;
    }
    Ok(Survey {
        changed: narrowable.then_some(changed),
        listings,
        files,
        nested: report.nested,
        kept,
    })
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
    scan_batched(root, ws, options, progress, &mut crate::batches::Whole)
}

/// [`scan`], handing what it reads to `batches` ([`crate::batches`]): each file read
/// whole into `ws` (a caller committing in bounded batches hands the content over
/// there: [`snapgraph_store::Batched::write`]), and the objects of each file it
/// streams in.
pub fn scan_batched(
    root: &Path,
    ws: &mut Workspace,
    options: ScanOptions<'_>,
    progress: &ProgressBar,
    batches: &mut dyn crate::batches::Batches,
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
    if options.listings.is_some() && watched.is_none() {
        return Err(CliError::bad_path(
            root,
            "a survey's listings apply to a scan narrowed to its paths only",
        ));
    }
    // A directory's listing as recorded: the survey's where it took one, else the
    // index's (the survey saw it hold); the walk's own without a survey.
    let listing_of = |path: &str, walked: Option<Listing>| match options.listings {
        Some(listings) => listings.get(path).copied().or_else(|| {
            match complete.and_then(|ix| ix.entries.get(path)) {
                Some(IndexEntry::Dir { listing }) => *listing,
                _ => None,
            }
        }),
        None => walked,
    };
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
    // compared with the tip's content before anything is loaded (lazy scans only),
    // handed to `found` as the walk meets them (`recheck::while_walking` hashes them
    // on other threads meanwhile).
    let mut bytes_to_read = 0u64;
    // Asked only if the walk finds a file to hash, not for every turn (the CLI never
    // sets a workspace's parallelism: its workspaces use the default).
    let threads = snapgraph::default_parallelism;
    let mut walk = |found: &mut dyn FnMut(crate::recheck::Candidate)| {
        walk_kept(
            root,
            options.skip,
            options.only.or(watched),
            complete,
            options.kept,
            &mut |w| {
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
                    if let (
                        Found::File,
                        Some(stat),
                        Some((key, IndexEntry::File { stat: s, digest })),
                    ) = (w.found, w.stat, recorded)
                    {
                        if ix.trusted(s, &stat) {
                            report.files_skipped += 1;
                            if report.partial {
                                vouched.push(key);
                            } else {
                                report.stats.insert(
                                    path.to_string(),
                                    Seen::File(stat, Some(digest.clone())),
                                );
                            }
                            return Ok(true);
                        }
                        if lazy.is_some()
                            && s.size == stat.size
                            && file_mode(s.mode) == file_mode(stat.mode)
                        {
                            found(crate::recheck::Candidate {
                                full: full.to_path_buf(),
                                path: path.to_string(),
                                stat,
                                digest: digest.clone(),
                            });
                            return Ok(true);
                        }
                    }
                    // A directory where the tip has one: nothing to do in the workspace (its
                    // mode is always the default), so a lazy one stays unloaded. Its listing
                    // is recorded when it is not the index's (a watcher's narrowed walk has
                    // none: the listing is then reset, see `crate::index`).
                    if let (true, Found::Dir, Some((key, IndexEntry::Dir { listing }))) =
                        (report.partial, w.found, recorded)
                    {
                        vouched.push(key);
                        let now = listing_of(path, w.listing);
                        if *listing != now {
                            report.stats.insert(path.to_string(), Seen::Dir(now));
                        }
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
                        report
                            .stats
                            .insert(path.to_string(), Seen::Dir(listing_of(path, w.listing)));
                    }
                    Found::Symlink => {
                        let stat = w.stat.ok_or_else(|| CliError::bad_path(full, "no stat"))?;
                        let target = match std::fs::read_link(full) {
                            Ok(target) => target,
                            // Gone since its stat: absent (see `read_all`).
                            Err(e) if crate::error::vanished(&e) => {
                                if current.is_some() {
                                    ws.remove(path)?;
                                    report.changed = true;
                                }
                                if complete.is_some_and(|ix| ix.entries.contains_key(path)) {
                                    report.removed.push(path.to_string());
                                }
                                return Ok(true);
                            }
                            Err(e) => return Err(CliError::io(full, e)),
                        };
                        let target = target.to_str().ok_or_else(|| {
                            CliError::bad_path(
                                full,
                                "symlink target is not valid UTF-8 (snapshots hold UTF-8 \
                                 names and targets; a .snapgraphignore rule leaves it out)",
                            )
                        })?;
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
                            crate::quote::quote_path(full)
                        );
                        return Ok(true);
                    }
                }
                Ok(true)
            },
        )
    };
    let (walked, to_compare, same) = match lazy {
        Some(source) => {
            let ((walked, _), to_compare, same) =
                crate::recheck::while_walking(source, threads, walk)?;
            (walked, to_compare, same)
        }
        // Only a lazy scan has candidates.
        None => (walk(&mut |_| {})?.0, Vec::new(), Vec::new()),
    };
    if let (Some(source), false) = (lazy, to_compare.is_empty()) {
        let compared_bytes = to_compare.iter().map(|c| c.stat.size).sum();
        crate::progress::phase(progress, "comparing", compared_bytes);
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
    let (files, modes): (Vec<_>, Vec<_>) = to_read
        .into_iter()
        .map(|(full, path, size, mode)| ((full, path, size), mode))
        .unzip();
    crate::batches::read_all(ws, &files, batches, lazy, |ws, i, len| {
        let path = &files[i].1;
        let Some(len) = len else {
            // Gone since the walk saw it: absent, as if the walk had come later
            // (taken out of the workspace by `read_all`). Whether it was new
            // (already a change) or the tip's, the workspace changed.
            report.stats.remove(path);
            report.changed = true;
            // A stat cache complete for the tip records it: its removal is told
            // like any other the walk found (the next cache drops it).
            if complete.is_some_and(|ix| ix.entries.contains_key(path)) {
                report.removed.push(path.clone());
            }
            return Ok(());
        };
        report.files_read += 1;
        report.bytes_read += len;
        progress.inc(len);
        progress.set_message(format!("{}/{files_to_read} files", report.files_read));
        if ws.metadata(path)?.mode != modes[i] {
            ws.set_mode(path, modes[i])?;
        }
        Ok(())
    })?;
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
        let candidates: Box<dyn Iterator<Item = &str>> = match watched {
            Some(paths) => Box::new(paths.iter().flat_map(|p| ix.entries.below(p))),
            None => Box::new(ix.entries.keys()),
        };
        for path in candidates {
            if !report.stats.contains_key(path) && !vouched.contains(path) {
                report.removed.push(path.to_string());
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
    // A survey's listings of recorded directories the narrowed walk did not pass:
    // none of their entries changed, so each listing holds what the index records.
    if let (Some(listings), Some(ix)) = (options.listings, complete) {
        for (path, listing) in listings {
            if !report.stats.contains_key(path)
                && !report.removed.contains(path)
                && matches!(ix.entries.get(path), Some(IndexEntry::Dir { listing: was }) if *was != Some(*listing))
            {
                report.stats.insert(path.clone(), Seen::Dir(Some(*listing)));
            }
        }
    }
    // A file gone before it was read may be found gone by the removals too.
    report.removed.sort_unstable();
    report.removed.dedup();
    report.nested = walked.nested;
    report.dirs_listed = walked.listed;
    report.dirs_reused = walked.reused;
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
