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
//!   Sockets, FIFOs and devices are never recorded and hold no data: they go.
//!
//! The first entry that fails is [`CliError::ChangedMeanwhile`], naming its path in
//! the working directory; the caller undoes every step it took, so the edit is back
//! where it was made. What is left open: a write through a descriptor opened before
//! the move and made after its check, in the microseconds until the deletion
//! (git's checkout has the same window, and a wider one: it checks nothing again).
//! `--force` skips the dirty check and this one alike.
//!
//! What this costs: one `lstat` per entry taken (a switch's few, a full checkout's
//! whole old tree, walked once) and a read only of what the stat cache cannot vouch
//! for. The tip's tree is read only for those, from the caller's source (a switch
//! hands it the nodes its diff read).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

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

/// An entry the stat cache could not vouch for: compared with the tip.
struct Doubt {
    now: PathBuf,
    path: String,
    kind: EntryKind,
    stat: FileStat,
}

impl<'a> Guard<'a> {
    /// A guard for the working directory `root`, found holding `tip` by a dirty
    /// check that trusted `index`.
    pub fn new(root: &'a Path, tip: Option<ObjectId>, index: Option<&'a Index>) -> Self {
        let index = index.filter(|ix| tip.is_some() && ix.tip == tip);
        Guard { root, tip, index }
    }

    /// Checks entries a switch moved aside one by one (files, symlinks, empty
    /// directories); the tip's trees are read from `source` where needed.
    pub fn check(&self, taken: &[Taken], source: &dyn ObjectSource) -> Result<()> {
        let mut doubts = Vec::new();
        for t in taken {
            self.look(t, &mut doubts, &mut |dir: &Path, path: &str| {
                match std::fs::read_dir(dir).at(dir)?.next() {
                    None => Ok(()),
                    Some(_) => Err(self.changed(path, "an entry was added to it")),
                }
            })?;
        }
        self.settle(doubts, source)
    }

    /// Checks a whole tree a full checkout moved aside: `old` holds what were the
    /// working directory's entries (by name), `tops` their stats just before the
    /// move; entries at the workspace paths in `expendable`, and below them, are not
    /// checked.
    pub fn check_tree(
        &self,
        old: &Path,
        tops: &[(std::ffi::OsString, FileStat)],
        expendable: &HashSet<String>,
        source: &dyn ObjectSource,
    ) -> Result<()> {
        let mut doubts = Vec::new();
        let mut dirs: Vec<(PathBuf, String)> = vec![(old.to_path_buf(), String::new())];
        while let Some((dir, rel)) = dirs.pop() {
            for e in std::fs::read_dir(&dir).at(&dir)? {
                let e = e.at(&dir)?;
                let name = e.file_name();
                let path = match name.to_str() {
                    Some(n) => format!("{rel}/{n}"),
                    None => {
                        let shown = format!("{rel}/{}", name.to_string_lossy());
                        return Err(self.changed(&shown, "it appeared (not a UTF-8 name)"));
                    }
                };
                if expendable.contains(&path) {
                    continue;
                }
                let before = match rel.is_empty() {
                    true => tops.iter().find(|(n, _)| *n == name).map(|(_, s)| *s),
                    false => None,
                };
                let taken = Taken {
                    now: e.path(),
                    path,
                    before,
                };
                self.look(&taken, &mut doubts, &mut |d: &Path, p: &str| {
                    dirs.push((d.to_path_buf(), p.to_string()));
                    Ok(())
                })?;
            }
        }
        self.settle(doubts, source)
    }

    /// Looks at `t`: vouched for by its stat, pushed to `doubts`, handed to `dir`
    /// (a directory the stat cache or the tip records), or an error.
    fn look(
        &self,
        t: &Taken,
        doubts: &mut Vec<Doubt>,
        dir: &mut dyn FnMut(&Path, &str) -> Result<()>,
    ) -> Result<()> {
        let stat = match FileStat::lstat(&t.now) {
            Ok(s) => s,
            Err(e) => return Err(CliError::io(&t.now, e)),
        };
        let kind = match stat.mode & 0o170000 {
            0o100000 => EntryKind::File,
            0o120000 => EntryKind::Symlink,
            0o040000 => EntryKind::Dir,
            // Sockets, FIFOs, devices: never recorded, nothing in them to lose.
            _ => return Ok(()),
        };
        if kind == EntryKind::Dir {
            return match self.index.and_then(|ix| ix.entries.get(&t.path)) {
                Some(IndexEntry::Dir { .. }) => dir(&t.now, &t.path),
                _ => {
                    doubts.push(Doubt {
                        now: t.now.clone(),
                        path: t.path.clone(),
                        kind,
                        stat,
                    });
                    Ok(())
                }
            };
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
        let vouched = match (self.index, self.index.and_then(|ix| ix.entries.get(&t.path))) {
            (Some(ix), Some(IndexEntry::File { stat: s, .. })) if kind == EntryKind::File => {
                ix.trusted(s, &seen)
            }
            (Some(ix), Some(IndexEntry::Symlink { stat: s })) if kind == EntryKind::Symlink => {
                ix.trusted(s, &seen)
            }
            _ => false,
        };
        if !vouched {
            doubts.push(Doubt {
                now: t.now.clone(),
                path: t.path.clone(),
                kind,
                stat,
            });
        }
        Ok(())
    }

    /// Compares each doubt with the tip (its trees read from `source`): the first
    /// that differs is the error.
    fn settle(&self, doubts: Vec<Doubt>, source: &dyn ObjectSource) -> Result<()> {
        if doubts.is_empty() {
            return Ok(());
        }
        let Some(tip) = self.tip else {
            return Err(self.changed(&doubts[0].path, "it appeared"));
        };
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
        let mut candidates = Vec::new();
        for d in &doubts {
            match (in_tip(&ws, &d.path), d.kind) {
                (None, _) => return Err(self.changed(&d.path, "it appeared")),
                (Some(t), k) if t != k => {
                    return Err(self.changed(&d.path, "its kind changed"));
                }
                (_, EntryKind::Dir) => {
                    // A directory of the tip the stat cache did not record: only a
                    // switch's (empty) ones reach here; a full checkout's index
                    // records every directory of the tip.
                    if std::fs::read_dir(&d.now).at(&d.now)?.next().is_some() {
                        return Err(self.changed(&d.path, "an entry was added to it"));
                    }
                }
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
        let threads = ws.parallelism();
        let same = crate::recheck::same_as_tip(&candidates, source, threads)?;
        for (c, same) in candidates.iter().zip(same) {
            if !same && !cut_is(&c.full, &c.digest)? {
                return Err(self.changed(&c.path, "its bytes changed"));
            }
        }
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
