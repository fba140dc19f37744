//! What a checkout takes out of the working directory must be what its dirty check
//! saw: an edit made while the checkout ran is never deleted.
//!
//! A checkout into the working directory first checks that it is clean (it holds
//! the tip's tree), then writes the target and moves the tip's entries out of the
//! way, into a directory of `.snapgraph/` it deletes at the end. Between the check
//! and the move there is time: a full checkout writes the whole commit first (a
//! second or more on a large tree), a switch stages its files. An editor saving, or
//! an agent's process writing, meanwhile would have its work deleted with the old
//! tree. So, once the entries are out of the working directory (a rename: no new
//! `open` by path reaches them any more) and before anything is deleted, each entry
//! taken is checked again by the dirty check's own rule:
//!
//! - a file or symlink whose `lstat` the stat cache vouches for (equal to the
//!   recorded one, and older than its clock probe: [`Index::trusted`]) holds what
//!   the tip holds. An entry moved by itself is `lstat`ed just before its move
//!   (the rename changes its change time) and again after: equal but for that
//!   change time, nothing wrote to it through a descriptor opened before;
//! - any other file is read and compared with the tip's content by its ids
//!   ([`crate::recheck::same_as_tip`], then a whole cut with
//!   [`snapgraph::ingest::Ingest`] where that finds no proof), a symlink's target
//!   with the tip's, a directory is walked (a full checkout's) or must still be
//!   empty (a switch moves only empty ones);
//! - an entry the tip does not hold at that path appeared while the checkout ran
//!   (the dirty check found none), unless the caller names it expendable: an
//!   ignored entry where the commit puts one, which the commit replaces as in git.
//!   Sockets, FIFOs and devices are never recorded and hold no data: the guard
//!   passes them (a full checkout keeps them in place, as ignored entries).
//!
//! An unrecorded entry where the commit puts one is replaced only where that loses
//! nothing, or with `--force` (stop 57; before, the commit's entry won, as in git,
//! and a local `.env` ignored since it was committed went without a word): see
//! [`replaced_losslessly`] and [`CliError::UnrecordedInTheWay`].
//!
//! The first entry that fails is [`CliError::ChangedMeanwhile`], naming its path in
//! the working directory; the caller undoes every step it took, so the edit is back
//! where it was made. What is left open: a write through a descriptor opened before
//! the move and made after its check, in the microseconds until the deletion
//! (git's checkout has the same window, and a wider one: it checks nothing again).
//! `--force` skips the dirty check and this one alike.
//!
//! What this costs: one `lstat` per entry taken (a switch's few; a full checkout's
//! whole old tree, walked once on both cores beside the new stat cache's build:
//! [`Guard::walk_tree_beside`]) and a read only of what the stat cache cannot vouch
//! for. A switch names the tip's content ids its diff read ([`Taken::tip`]); the
//! tip's directories are read only for the rest (inline content, symlink targets,
//! a full checkout's doubts), from the caller's source.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use snapgraph::chunk::CHUNK_MAX;
use snapgraph::graph::diff::ChangeEntry;
use snapgraph::{CheckoutOptions, CheckoutPolicy, EntryKind, ObjectId, ObjectSource, Workspace};

use crate::error::{CliError, IoContext, Result};
use crate::index::{Digest, FileStat, Index, IndexEntry};
use crate::recheck::Candidate;

/// An entry a checkout moved out of the working directory.
#[derive(Debug, Clone)]
pub struct Taken {
    /// Where it is now.
    pub now: PathBuf,
    /// Its workspace path (where it was: `/a/b`).
    pub path: String,
    /// Its `lstat` at its old place just before it was moved (`None`: it moved with
    /// a directory above it, so its own stat did not change).
    pub before: Option<FileStat>,
    /// What the tip holds there, when the caller knows (a switch's diff names it):
    /// a file's content is then compared without reading the tip's directory.
    pub tip: Option<ChangeEntry>,
}

impl Taken {
    /// It, seen as `kind` with `stat`, as an entry to compare with the tip.
    fn doubt(&self, kind: EntryKind, stat: FileStat) -> Doubt {
        Doubt {
            now: self.now.clone(),
            path: self.path.clone(),
            kind,
            stat,
            tip: self.tip,
        }
    }
}

/// The dirty check's knowledge, kept for the check of what a checkout takes away.
pub struct Guard<'a> {
    /// The working directory (errors name paths in it).
    root: &'a Path,
    /// The commit the dirty check found the working directory holding (`None`:
    /// nothing committed, and nothing was there).
    tip: Option<ObjectId>,
    /// The stat cache that check trusted, complete for `tip` (whole, or the part a
    /// watcher's report needed); `None` vouches for nothing.
    index: Option<&'a Index>,
}

/// The entries of a walk ([`Guard::walk_tree`]) the stat cache could not vouch
/// for, to compare with the tip ([`Guard::settle`]).
#[derive(Default)]
pub struct Doubts(Vec<Doubt>);

/// An entry the stat cache could not vouch for: compared with the tip.
struct Doubt {
    now: PathBuf,
    path: String,
    kind: EntryKind,
    stat: FileStat,
    tip: Option<ChangeEntry>,
}

impl<'a> Guard<'a> {
    /// A guard for the working directory `root`, found holding `tip` by a dirty
    /// check that trusted `index`.
    pub fn new(root: &'a Path, tip: Option<ObjectId>, index: Option<&'a Index>) -> Self {
        let index = index.filter(|ix| tip.is_some() && ix.tip == tip);
        Guard { root, tip, index }
    }

    /// The stat cache it vouches by, when it is one whole for the tip: it records
    /// every entry of the working directory the dirty check found clean.
    pub fn whole_index(&self) -> Option<&'a Index> {
        self.index.filter(|ix| !ix.is_part())
    }

    /// Checks entries a switch moved aside one by one (files, symlinks, empty
    /// directories); the tip's trees are read from `source` where needed.
    pub fn check(&self, taken: &[Taken], source: &dyn ObjectSource) -> Result<()> {
        let mut doubts = Vec::new();
        for t in taken {
            let stat = FileStat::lstat(&t.now).at(&t.now)?;
            self.look(
                t,
                stat,
                &mut doubts,
                &mut |dir: &Path, path: &str| match std::fs::read_dir(dir).at(dir)?.next() {
                    None => Ok(()),
                    Some(_) => Err(self.changed(path, "an entry was added to it")),
                },
            )?;
        }
        self.settle(Doubts(doubts), source)
    }

    /// Checks a whole tree a full checkout moved aside: `old` holds what were the
    /// working directory's entries (by name), `tops` their stats just before the
    /// move; entries at the workspace paths in `expendable`, and below them, are not
    /// checked. [`Guard::walk_tree`], then [`Guard::settle`].
    pub fn check_tree(
        &self,
        old: &Path,
        tops: &[(std::ffi::OsString, FileStat)],
        expendable: &HashSet<String>,
        source: &dyn ObjectSource,
    ) -> Result<()> {
        let doubts = self.walk_tree(old, tops, expendable)?;
        self.settle(doubts, source)
    }

    /// The walk of [`Guard::check_tree`], which reads no object: each entry's
    /// stat checked, the doubts returned for [`Guard::settle`].
    pub fn walk_tree(
        &self,
        old: &Path,
        tops: &[(std::ffi::OsString, FileStat)],
        expendable: &HashSet<String>,
    ) -> Result<Doubts> {
        self.walk_tree_beside(old, tops, expendable, || ()).0
    }

    /// [`Guard::walk_tree`] on this thread and a helper (off this core, see
    /// `crate::cpus`), the directories shared between them, this thread running
    /// `beside` first (a full checkout builds its stat cache there): a tree of
    /// 50,000 files costs one `fstatat` an entry, on both cores.
    pub fn walk_tree_beside<R>(
        &self,
        old: &Path,
        tops: &[(std::ffi::OsString, FileStat)],
        expendable: &HashSet<String>,
        beside: impl FnOnce() -> R,
    ) -> (Result<Doubts>, R) {
        // The units shared: the directories a level or two down (a tree under one
        // directory is shared a level deeper), listed on this thread first.
        let mut doubts = Vec::new();
        let mut units: Vec<(PathBuf, String)> = Vec::new();
        let top = self.walk_dir(old, "", Some(tops), expendable, &mut doubts, &mut units);
        if let Err(e) = top {
            return (Err(e), beside());
        }
        if units.len() < 8 {
            let mut deeper = Vec::new();
            for (dir, rel) in &units {
                let r = self.walk_dir(dir, rel, None, expendable, &mut doubts, &mut deeper);
                if let Err(e) = r {
                    return (Err(e), beside());
                }
            }
            units = deeper;
        }
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let walk_some = || -> Result<Vec<Doubt>> {
            let mut doubts = Vec::new();
            let mut stack = Vec::new();
            while let Some((dir, rel)) = units.get(next.fetch_add(1, Ordering::Relaxed)) {
                stack.push((dir.clone(), rel.clone()));
                while let Some((dir, rel)) = stack.pop() {
                    if failed.load(Ordering::Relaxed) {
                        return Ok(doubts);
                    }
                    let r = self.walk_dir(&dir, &rel, None, expendable, &mut doubts, &mut stack);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    r?;
                }
            }
            Ok(doubts)
        };
        let (mine, theirs, out) = std::thread::scope(|s| {
            let cpus = crate::cpus::Beside::here();
            let walk = &walk_some;
            let helper = s.spawn(move || {
                cpus.leave();
                walk()
            });
            cpus.yield_to();
            let out = beside();
            let mine = walk_some();
            let theirs = helper
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e));
            (mine, theirs, out)
        });
        let walked = mine.and_then(|m| {
            doubts.extend(m);
            doubts.extend(theirs?);
            Ok(Doubts(doubts))
        });
        (walked, out)
    }

    /// Lists the directory `dir` (the workspace path `rel`; `tops`: the entries'
    /// stats before their move, for the top of the tree) and looks at each entry
    /// ([`Guard::look`]), pushing its subdirectories to `dirs`.
    fn walk_dir(
        &self,
        dir: &Path,
        rel: &str,
        tops: Option<&[(std::ffi::OsString, FileStat)]>,
        expendable: &HashSet<String>,
        doubts: &mut Vec<Doubt>,
        dirs: &mut Vec<(PathBuf, String)>,
    ) -> Result<()> {
        let mut path = String::with_capacity(rel.len() + 32);
        for e in std::fs::read_dir(dir).at(dir)? {
            let e = e.at(dir)?;
            let name = e.file_name();
            path.clear();
            path.push_str(rel);
            path.push('/');
            match name.to_str() {
                Some(n) => path.push_str(n),
                None => {
                    path.push_str(&name.to_string_lossy());
                    return Err(self.changed(&path, "it appeared (not a UTF-8 name)"));
                }
            }
            if expendable.contains(&path) {
                continue;
            }
            let before = tops.and_then(|t| t.iter().find(|(n, _)| *n == name).map(|(_, s)| *s));
            // `fstatat` in the open directory: no walk of the whole path.
            let stat = match e.metadata() {
                Ok(m) => FileStat::of(&m),
                Err(err) => return Err(CliError::io(e.path(), err)),
            };
            let taken = Taken {
                now: e.path(),
                path: path.clone(),
                before,
                tip: None,
            };
            self.look(&taken, stat, doubts, &mut |d: &Path, p: &str| {
                dirs.push((d.to_path_buf(), p.to_string()));
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Looks at `t`: vouched for by its stat, pushed to `doubts`, handed to `dir`
    /// (a directory the stat cache or the tip records), or an error.
    fn look(
        &self,
        t: &Taken,
        stat: FileStat,
        doubts: &mut Vec<Doubt>,
        dir: &mut dyn FnMut(&Path, &str) -> Result<()>,
    ) -> Result<()> {
        let kind = match stat.mode & 0o170000 {
            0o100000 => EntryKind::File,
            0o120000 => EntryKind::Symlink,
            0o040000 => EntryKind::Dir,
            // Sockets, FIFOs, devices: never recorded, nothing in them to lose.
            _ => return Ok(()),
        };
        if kind == EntryKind::Dir {
            // A directory the stat cache does not record must be the tip's too.
            if !matches!(
                self.index.and_then(|ix| ix.entries.get(&t.path)),
                Some(IndexEntry::Dir { .. })
            ) {
                doubts.push(t.doubt(kind, stat));
            }
            return dir(&t.now, &t.path);
        }
        // Written to since its move (through a descriptor opened before it)?
        let seen = match t.before {
            Some(b) => {
                let moved_only = FileStat {
                    ctime_ns: b.ctime_ns,
                    ..stat
                };
                if moved_only != b {
                    return Err(self.changed(&t.path, "written to while the checkout moved it"));
                }
                b
            }
            None => stat,
        };
        let vouched = match (
            self.index,
            self.index.and_then(|ix| ix.entries.get(&t.path)),
        ) {
            (Some(ix), Some(IndexEntry::File { stat: s, .. })) if kind == EntryKind::File => {
                ix.trusted(s, &seen)
            }
            (Some(ix), Some(IndexEntry::Symlink { stat: s })) if kind == EntryKind::Symlink => {
                ix.trusted(s, &seen)
            }
            _ => false,
        };
        if !vouched {
            doubts.push(t.doubt(kind, stat));
        }
        Ok(())
    }

    /// Compares each doubt with the tip (its trees read from `source`): the first
    /// that differs is the error.
    pub fn settle(&self, doubts: Doubts, source: &dyn ObjectSource) -> Result<()> {
        let doubts = doubts.0;
        crate::timings::phase_with("taken entries looked at", || {
            format!("{} to compare with the tip", doubts.len())
        });
        if doubts.is_empty() {
            return Ok(());
        }
        let Some(tip) = self.tip else {
            return Err(self.changed(&doubts[0].path, "it appeared"));
        };
        // What the caller named the tip's: its kind, and a file's content object,
        // compared without the tip's directory (a content object up to a chunk
        // long is taken for one chunk: if it is a manifest, the whole cut below
        // still proves equal bytes). Inline content and symlink targets are in the
        // directory, read below with what the caller did not name.
        let mut candidates = Vec::new();
        let mut rest = Vec::new();
        for d in doubts {
            let Some(was) = d.tip else {
                rest.push(d);
                continue;
            };
            if was.kind != d.kind {
                return Err(self.changed(&d.path, "its kind changed"));
            }
            match (d.kind, was.id) {
                (EntryKind::Dir, _) => {}
                (EntryKind::File, Some(id)) => {
                    if crate::index::file_mode(d.stat.mode) != crate::index::file_mode(was.mode) {
                        return Err(self.changed(&d.path, "its mode changed"));
                    }
                    let digest = match was.size <= CHUNK_MAX as u64 {
                        true => Digest::Chunk(id),
                        false => Digest::Manifest(id),
                    };
                    candidates.push(Candidate {
                        full: d.now,
                        path: d.path,
                        stat: d.stat,
                        digest,
                    });
                }
                _ => rest.push(d),
            }
        }
        let doubts = rest;
        if doubts.is_empty() {
            return self.compare(candidates, source, None);
        }
        let mut ws = Workspace::new();
        let _ = ws.checkout_with(
            tip,
            source,
            CheckoutOptions::new()
                .lazy(true)
                .policy(CheckoutPolicy::Force),
        )?;
        // The directories holding the doubts (a directory's own entry is in its
        // parent), read a level at a time; a path under something the tip holds as
        // no directory is simply not in the tip.
        let mut parents: Vec<&str> = doubts
            .iter()
            .map(|d| crate::scan::parent_of(&d.path))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        parents.sort_unstable();
        if ws.load_dirs(&parents, source).is_err() {
            for p in &parents {
                if ws.load_dir(p, source).is_err() && in_tip(&ws, p) == Some(EntryKind::Dir) {
                    // A directory of the tip that cannot be read: the store's error.
                    ws.load_dir(p, source)?;
                }
            }
        }
        for d in &doubts {
            match (in_tip(&ws, &d.path), d.kind) {
                (None, _) => return Err(self.changed(&d.path, "it appeared")),
                (Some(t), k) if t != k => {
                    return Err(self.changed(&d.path, "its kind changed"));
                }
                // A directory of the tip: what it holds is looked at by itself.
                (_, EntryKind::Dir) => {}
                (_, EntryKind::Symlink) => {
                    let now = std::fs::read_link(&d.now).at(&d.now)?;
                    if now.to_str() != Some(ws.read_link(&d.path)?) {
                        return Err(self.changed(&d.path, "its target changed"));
                    }
                }
                (_, EntryKind::File) => {
                    let mode = ws.metadata(&d.path)?.mode;
                    if crate::index::file_mode(d.stat.mode) != crate::index::file_mode(mode) {
                        return Err(self.changed(&d.path, "its mode changed"));
                    }
                    let digest = crate::index::digest_of(&ws, &d.path).ok_or_else(|| {
                        CliError::bad_path(&d.now, "the tip's file has no content reference")
                    })?;
                    candidates.push(Candidate {
                        full: d.now.clone(),
                        path: d.path.clone(),
                        stat: d.stat,
                        digest,
                    });
                }
            }
        }
        crate::timings::phase("the tip's directories read");
        self.compare(candidates, source, Some(ws.parallelism()))
    }

    /// Compares each candidate's bytes with the tip's content it names (on
    /// `threads`, else as many as the machine offers): the first that differs is the
    /// error.
    fn compare(
        &self,
        candidates: Vec<Candidate>,
        source: &dyn ObjectSource,
        threads: Option<usize>,
    ) -> Result<()> {
        if candidates.is_empty() {
            return Ok(());
        }
        let threads = threads.unwrap_or_else(|| Workspace::new().parallelism());
        let same = crate::recheck::same_as_tip(&candidates, source, threads)?;
        // A content object taken for one chunk that is not: its chunk list read and
        // compared (a manifest, as a file of up to a chunk's length may be).
        let mut again = Vec::new();
        for (c, same) in candidates.into_iter().zip(same) {
            match (same, &c.digest) {
                (true, _) => {}
                (false, Digest::Chunk(id)) => again.push(Candidate {
                    digest: Digest::Manifest(*id),
                    ..c
                }),
                (false, _) => again.push(c),
            }
        }
        crate::timings::phase_with("compared by ids", || format!("{} again", again.len()));
        let same = match again
            .iter()
            .any(|c| matches!(c.digest, Digest::Manifest(_)))
        {
            true => crate::recheck::same_as_tip(&again, source, threads)?,
            false => vec![false; again.len()],
        };
        for (c, same) in again.iter().zip(same) {
            if !same && !cut_is(&c.full, &c.digest)? {
                return Err(self.changed(&c.path, "its bytes changed"));
            }
        }
        crate::timings::phase("taken entries compared with the tip");
        Ok(())
    }

    fn changed(&self, path: &str, what: &str) -> CliError {
        CliError::ChangedMeanwhile {
            path: self.root.join(path.trim_start_matches('/')),
            what: what.to_string(),
        }
    }
}

/// The kind of the entry at `path` in `ws`, its parent loaded (`None`: none
/// there). An entry of a loaded directory that reads as not loaded is a directory
/// left unloaded.
fn in_tip(ws: &Workspace, path: &str) -> Option<EntryKind> {
    match ws.metadata(path) {
        Ok(m) => Some(m.kind),
        Err(snapgraph::FsError::NotLoaded { .. }) => Some(EntryKind::Dir),
        Err(_) => None,
    }
}

/// Whether the bytes of the file at `full`, cut as a commit cuts them, are the
/// content `digest` records: the proof [`crate::recheck`] does not attempt (a file
/// longer than one chunk recorded as one, a manifest whose chunk list is not to be
/// had). Reads the file in pieces: memory stays bounded.
fn cut_is(full: &Path, digest: &Digest) -> Result<bool> {
    use std::io::Read;
    let mut file = std::fs::File::open(full).at(full)?;
    let mut ingest = snapgraph::ingest::Ingest::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CliError::io(full, e)),
        };
        drop(ingest.push(&buf[..n]));
    }
    let (ingested, _) = ingest.finish();
    Ok(match (ingested.content_id(), digest) {
        (Some(id), Digest::Chunk(d) | Digest::Manifest(d)) => id == *d,
        (None, Digest::Inline(_)) => {
            // At most 64 bytes: compared as they are.
            let bytes = std::fs::read(full).at(full)?;
            matches!(digest, Digest::Inline(b) if *b == bytes)
        }
        _ => false,
    })
}

/// Whether the commit's entry `theirs` (written into a staging directory, or a
/// symlink's target) may replace the unrecorded entry `ours` (ignored,
/// a nested repository, a socket...) with nothing lost: a file with the same bytes,
/// a symlink with the same target, an empty directory, or something that holds no
/// data (a socket, a FIFO). A directory where the commit has one too is for the
/// caller to look into (what it holds that the commit lacks can stay): here it is
/// a loss unless empty.
pub fn replaced_losslessly(ours: &Path, theirs: Theirs<'_>) -> Result<bool> {
    let m = match std::fs::symlink_metadata(ours) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(CliError::io(ours, e)),
    };
    let t = m.file_type();
    if t.is_dir() {
        return Ok(std::fs::read_dir(ours).at(ours)?.next().is_none());
    }
    if t.is_symlink() {
        let link = std::fs::read_link(ours).at(ours)?;
        return Ok(match theirs {
            Theirs::Link(target) => link.as_os_str() == target,
            Theirs::Written(p) => std::fs::read_link(p).is_ok_and(|l| l == link),
            Theirs::Dir => false,
        });
    }
    if !t.is_file() {
        return Ok(true);
    }
    let Theirs::Written(p) = theirs else {
        return Ok(false);
    };
    match std::fs::symlink_metadata(p) {
        Ok(tm) if tm.is_file() && tm.len() == m.len() => same_bytes(ours, p),
        Ok(_) => Ok(false),
        Err(e) => Err(CliError::io(p, e)),
    }
}

/// The commit's entry an unrecorded one would give way to
/// ([`replaced_losslessly`]).
#[derive(Debug, Clone, Copy)]
pub enum Theirs<'a> {
    /// Written (or staged) at this path.
    Written(&'a Path),
    /// A symlink with this target, not written yet.
    Link(&'a std::ffi::OsStr),
    /// A directory, not made yet.
    Dir,
}

/// Whether two files of equal length hold the same bytes (read a block at a time).
fn same_bytes(a: &Path, b: &Path) -> Result<bool> {
    use std::io::Read;
    let mut fa = std::fs::File::open(a).at(a)?;
    let mut fb = std::fs::File::open(b).at(b)?;
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = read_full(&mut fa, &mut ba).at(a)?;
        let m = read_full(&mut fb, &mut bb).at(b)?;
        if n != m || ba[..n] != bb[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
    fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match f.read(&mut buf[n..])? {
                0 => break,
                k => n += k,
            }
        }
        Ok(n)
    }
}

/// Renames `from` to `to` unless something is at `to` (`renameat2` with
/// `RENAME_NOREPLACE`): an entry created there since the caller looked is never
/// replaced, the rename fails with `AlreadyExists` instead. A file system without
/// the flag gets a look and a plain rename (the window of the look).
pub fn rename_new(from: &Path, to: &Path) -> std::io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::INVAL || e == rustix::io::Errno::NOSYS => {
            match std::fs::symlink_metadata(to) {
                Ok(_) => Err(std::io::ErrorKind::AlreadyExists.into()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::rename(from, to),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use snapgraph::CommitOptions;
    use snapgraph_store::{CallerVerifies, MemoryStore, ObjectStore};
    use std::ffi::OsString;
    use std::os::unix::fs::PermissionsExt;

    /// A working directory holding a commit, and the stat cache a commit of it
    /// leaves (every entry recorded, none racy).
    pub(crate) struct Held {
        _t: tempfile::TempDir,
        pub root: PathBuf,
        pub dot: PathBuf,
        pub store: MemoryStore,
        pub tip: ObjectId,
        pub index: Index,
    }

    pub(crate) fn held() -> Held {
        let t = tempfile::tempdir().unwrap();
        let mut ws = Workspace::new();
        ws.write("/top.txt", b"top").unwrap();
        ws.write("/dir/small", b"tiny").unwrap();
        let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        ws.write("/dir/big.bin", big).unwrap();
        // Several chunks, though no longer than one chunk can be.
        let mid: Vec<u8> = (0..60_000u64)
            .map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8)
            .collect();
        ws.write("/dir/mid.bin", mid).unwrap();
        ws.write("/dir/sub/f.txt", vec![b'x'; 1000]).unwrap();
        ws.symlink("/dir/link", "small").unwrap();
        ws.mkdir("/empty").unwrap();
        let c = ws.commit(CommitOptions::new()).unwrap();
        let tip = c.id();
        let store = MemoryStore::new();
        let objects: Vec<(ObjectId, Vec<u8>)> = c.into_objects().into_iter().collect();
        let batch: Vec<_> = objects.iter().map(|(i, b)| (*i, &b[..])).collect();
        store.put_many(&batch).unwrap();
        let root = t.path().join("w");
        let bar = indicatif::ProgressBar::hidden();
        crate::materialize::materialize_with(&ws, &CallerVerifies(&store), tip, &root, &bar, 1)
            .unwrap();
        let dot = root.join(".snapgraph");
        std::fs::create_dir(&dot).unwrap();
        // The probe after every write: each stat is older, so vouched for.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let mut index = Index::new(&root, crate::index::fs_now(&dot).unwrap());
        index.tip = Some(tip);
        for (p, m) in ws.walk() {
            let stat = FileStat::lstat(&root.join(p.trim_start_matches('/'))).unwrap();
            let e = match m.kind {
                EntryKind::File => IndexEntry::File {
                    stat,
                    digest: crate::index::digest_of(&ws, &p).unwrap(),
                },
                EntryKind::Symlink => IndexEntry::Symlink { stat },
                EntryKind::Dir => IndexEntry::Dir { listing: None },
            };
            index.entries.insert(&p, e);
        }
        Held {
            _t: t,
            root,
            dot,
            store,
            tip,
            index,
        }
    }

    /// Moves the working directory's entries into a directory of `.snapgraph/`, as
    /// a full checkout's swap does: that directory and each entry's stat before.
    fn take(h: &Held) -> (PathBuf, Vec<(OsString, FileStat)>) {
        let old = h.dot.join("old");
        std::fs::create_dir(&old).unwrap();
        let mut tops = Vec::new();
        for e in std::fs::read_dir(&h.root).unwrap() {
            let e = e.unwrap();
            if e.file_name() == ".snapgraph" {
                continue;
            }
            tops.push((e.file_name(), FileStat::lstat(&e.path()).unwrap()));
            std::fs::rename(e.path(), old.join(e.file_name())).unwrap();
        }
        (old, tops)
    }

    fn check(h: &Held, index: Option<&Index>, expendable: &[&str]) -> Result<()> {
        let (old, tops) = take(h);
        let expendable = expendable.iter().map(|p| p.to_string()).collect();
        Guard::new(&h.root, Some(h.tip), index).check_tree(
            &old,
            &tops,
            &expendable,
            &CallerVerifies(&h.store),
        )
    }

    fn changed_at(r: Result<()>, h: &Held, path: &str) -> String {
        match r {
            Err(CliError::ChangedMeanwhile { path: p, what }) => {
                assert_eq!(p, h.root.join(path), "{what}");
                what
            }
            other => panic!("{path}: {other:?}"),
        }
    }

    /// What the dirty check saw passes, vouched for by the stat cache or, without
    /// one, compared with the tip's content; so does a file whose stat moved but
    /// whose bytes did not, and what holds no data (a socket).
    #[test]
    fn what_the_dirty_check_saw_passes() {
        let h = held();
        check(&h, Some(&h.index), &[]).unwrap();
        let h = held();
        check(&h, None, &[]).unwrap();
        let h = held();
        let f = std::fs::File::options()
            .write(true)
            .open(h.root.join("dir/big.bin"))
            .unwrap();
        f.set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
        check(&h, Some(&h.index), &[]).unwrap();
        let h = held();
        let _socket = std::os::unix::net::UnixListener::bind(h.root.join("dir/sock")).unwrap();
        check(&h, Some(&h.index), &[]).unwrap();
    }

    /// An edit the dirty check did not see fails the check, naming the entry where
    /// it was in the working directory: bytes changed (deep, or through a
    /// descriptor after the move), a symlink retargeted, an entry or a directory's
    /// entry added, a mode changed. Unrecorded entries the caller names expendable
    /// pass.
    #[test]
    fn an_edit_the_dirty_check_did_not_see_fails() {
        for index in [true, false] {
            let ix = |h: &Held| index.then(|| h.index.clone());
            let h = held();
            std::fs::write(h.root.join("dir/sub/f.txt"), vec![b'y'; 1000]).unwrap();
            let what = changed_at(check(&h, ix(&h).as_ref(), &[]), &h, "dir/sub/f.txt");
            assert_eq!(what, "its bytes changed");

            let h = held();
            let mut big = std::fs::read(h.root.join("dir/big.bin")).unwrap();
            big[150_000] ^= 1;
            std::fs::write(h.root.join("dir/big.bin"), big).unwrap();
            changed_at(check(&h, ix(&h).as_ref(), &[]), &h, "dir/big.bin");

            let h = held();
            std::fs::remove_file(h.root.join("dir/link")).unwrap();
            std::os::unix::fs::symlink("big.bin", h.root.join("dir/link")).unwrap();
            changed_at(check(&h, ix(&h).as_ref(), &[]), &h, "dir/link");

            let h = held();
            std::fs::write(h.root.join("dir/sub/new.txt"), b"mine").unwrap();
            let what = changed_at(check(&h, ix(&h).as_ref(), &[]), &h, "dir/sub/new.txt");
            assert_eq!(what, "it appeared");
            let h = held();
            std::fs::write(h.root.join("dir/sub/new.txt"), b"ignored").unwrap();
            check(&h, ix(&h).as_ref(), &["/dir/sub/new.txt"]).unwrap();

            let h = held();
            std::fs::write(h.root.join("empty/new.txt"), b"mine").unwrap();
            changed_at(check(&h, ix(&h).as_ref(), &[]), &h, "empty/new.txt");

            let h = held();
            let p = h.root.join("dir/small");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            changed_at(check(&h, ix(&h).as_ref(), &[]), &h, "dir/small");
        }
        // Written through a descriptor opened before the move, after it: the top
        // entry's stat moved by more than its change time.
        let h = held();
        let mut f = std::fs::File::options()
            .append(true)
            .open(h.root.join("top.txt"))
            .unwrap();
        let (old, tops) = take(&h);
        std::thread::sleep(std::time::Duration::from_millis(2));
        std::io::Write::write_all(&mut f, b" more").unwrap();
        let r = Guard::new(&h.root, Some(h.tip), Some(&h.index)).check_tree(
            &old,
            &tops,
            &HashSet::new(),
            &CallerVerifies(&h.store),
        );
        let what = changed_at(r, &h, "top.txt");
        assert_eq!(what, "written to while the checkout moved it");
    }

    /// With nothing committed, anything found appeared; a switch's taken entries
    /// are checked one by one, an empty directory must still be empty.
    #[test]
    fn nothing_committed_and_entries_taken_one_by_one() {
        let h = held();
        let (old, tops) = take(&h);
        let r = Guard::new(&h.root, None, None).check_tree(
            &old,
            &tops,
            &HashSet::new(),
            &CallerVerifies(&h.store),
        );
        assert!(matches!(r, Err(CliError::ChangedMeanwhile { .. })), "{r:?}");

        let h = held();
        let aside = h.dot.join("aside");
        std::fs::create_dir(&aside).unwrap();
        let mut taken = Vec::new();
        for (i, p) in ["/dir/small", "/empty", "/dir/link"].iter().enumerate() {
            let at = h.root.join(p.trim_start_matches('/'));
            let before = FileStat::lstat(&at).unwrap();
            let now = aside.join(i.to_string());
            std::fs::rename(&at, &now).unwrap();
            taken.push(Taken {
                now,
                path: p.to_string(),
                before: Some(before),
                tip: None,
            });
        }
        let guard = Guard::new(&h.root, Some(h.tip), None);
        guard.check(&taken, &CallerVerifies(&h.store)).unwrap();
        std::fs::write(aside.join("1/late.txt"), b"mine").unwrap();
        let r = guard.check(&taken, &CallerVerifies(&h.store));
        let what = changed_at(r, &h, "empty");
        assert_eq!(what, "an entry was added to it");
    }

    /// What the caller names the tip's (a switch's diff) is compared without the
    /// tip's directory: a file of several chunks, though no longer than one chunk
    /// can be, is still proven (the whole cut); changed bytes and another kind
    /// fail.
    #[test]
    fn entries_the_caller_names_are_compared_by_what_it_names() {
        let h = held();
        let mut ws = Workspace::new();
        let _ = ws
            .checkout_with(
                h.tip,
                &CallerVerifies(&h.store),
                CheckoutOptions::new().policy(CheckoutPolicy::Force),
            )
            .unwrap();
        let named = |p: &str| {
            let m = ws.metadata(p).unwrap();
            ChangeEntry {
                kind: m.kind,
                mode: m.mode,
                size: m.size,
                id: ws.file_content_object(p).map(|(id, _)| id),
            }
        };
        let (_, kind) = ws.file_content_object("/dir/mid.bin").unwrap();
        assert_eq!(kind, snapgraph::ObjectKind::Manifest, "the case under test");
        assert!((ws.metadata("/dir/mid.bin").unwrap().size as usize) <= CHUNK_MAX);
        let paths = ["/dir/mid.bin", "/dir/big.bin", "/dir/sub/f.txt", "/empty"];
        let check = || {
            let taken: Vec<Taken> = paths
                .iter()
                .map(|p| Taken {
                    now: h.root.join(p.trim_start_matches('/')),
                    path: p.to_string(),
                    before: None,
                    tip: Some(named(p)),
                })
                .collect();
            Guard::new(&h.root, Some(h.tip), None).check(&taken, &CallerVerifies(&h.store))
        };
        check().unwrap();
        let f = h.root.join("dir/sub/f.txt");
        std::fs::write(&f, vec![b'y'; 1000]).unwrap();
        changed_at(check(), &h, "dir/sub/f.txt");
        std::fs::write(&f, vec![b'x'; 1000]).unwrap();
        let mut mid = std::fs::read(h.root.join("dir/mid.bin")).unwrap();
        mid[30_000] ^= 1;
        std::fs::write(h.root.join("dir/mid.bin"), &mid).unwrap();
        changed_at(check(), &h, "dir/mid.bin");
        mid[30_000] ^= 1;
        std::fs::write(h.root.join("dir/mid.bin"), &mid).unwrap();
        check().unwrap();
        std::fs::remove_dir(h.root.join("empty")).unwrap();
        std::fs::write(h.root.join("empty"), b"a file now").unwrap();
        let what = changed_at(check(), &h, "empty");
        assert_eq!(what, "its kind changed");
    }

    /// An entry made at a path after its caller looked is never replaced.
    #[test]
    fn rename_new_never_replaces() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        std::fs::write(&a, b"a").unwrap();
        std::fs::write(&b, b"mine").unwrap();
        let e = rename_new(&a, &b).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&b).unwrap(), b"mine");
        std::fs::remove_file(&b).unwrap();
        rename_new(&a, &b).unwrap();
        assert_eq!(std::fs::read(&b).unwrap(), b"a");
    }
}
