//! Moving a clean working directory from one commit to another by what differs.
//!
//! `checkout REV` into the working directory wrote the whole commit into a staging
//! directory and swapped every top-level entry: a one-file switch on 50,000 files
//! cost what a first checkout costs. When the working directory is clean (the dirty
//! check found it holding the tip's tree, plus entries a scan does not record:
//! ignored files, nested repositories), [`switch`] touches only what differs:
//!
//! 1. **Compare** the tip's and the target's trees with the core's diff
//!    ([`SnapshotGraph::diff_with`], directories included): the trees both hold
//!    alike are skipped unread, so what is read follows what differs, not what the
//!    trees hold. The target's new names are checked as a checkout checks every name
//!    ([`crate::materialize::check_component`]); the directories of the files it
//!    writes are loaded into its lazy checkout, for their bytes, from the nodes the
//!    diff read (kept in memory: each differs, so the diff read it; a large
//!    directory's nodes that did not differ are read then).
//! 2. **Stage**: the target's new and changed files are written, verified, into a
//!    fresh staging directory in `.snapgraph/`; nothing in the working directory has
//!    changed yet, so a bad object fails here with nothing to undo.
//! 3. **Apply**, logging how to undo each step: entries the target drops or
//!    replaces are moved, deepest first, into an `old-*` directory in
//!    `.snapgraph/`; then the target's new entries are put in place, parents first
//!    (directories made, staged files renamed in, symlinks made); then modes. An
//!    unrecorded entry where the target puts one is moved aside too, where that
//!    loses nothing (the same bytes or link, an empty directory, a socket: checked
//!    once the files are staged, before anything changes; else the checkout is
//!    refused, [`CliError::UnrecordedInTheWay`], stop 57); a directory the target
//!    drops but which still holds unrecorded entries stays, unless the target puts
//!    a file there: then, as the full swap does, the checkout is refused
//!    ([`CliError::Dirty`]); an unrecorded directory where the target puts one
//!    becomes the target's, with what it holds (as in the full swap and git). Any
//!    failure undoes every step taken, in reverse.
//! 4. The `old-*` and staging directories are deleted.
//!
//! Declined (`Ok(None)`: the caller writes the whole commit) when the files written
//! and taken away (a file replaced by a directory counts as taken) are more than
//! one in [`MOST_CHANGED`] of the larger tree's (and [`MOST_CHANGED_MIN`]): writing
//! most of a tree is what the full checkout does best, on every core. The diff stops
//! as soon as that is sure. Declined too when a directory holding a change (or
//! changed itself) lacks any of its owner's rights, in the tip or the target.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use std::ops::ControlFlow;

use snapgraph::graph::diff::{Change, ChangeEntry, ChangeKind, Visit};
use snapgraph::{BoxError, EntryKind, Limits, ObjectId, ObjectSource, SnapshotGraph, Workspace};

use crate::error::{CliError, IoContext, Result};
use crate::guard::{Guard, Taken, Theirs};
use crate::index::FileStat;
use crate::materialize::{Materialized, PlannedEntry};

/// The share of the files (and at least [`MOST_CHANGED_MIN`]) past which
/// [`switch`] declines: one in four.
pub const MOST_CHANGED: usize = 4;

/// Changed files a switch always takes on, however small the tree.
pub const MOST_CHANGED_MIN: usize = 256;

/// One step taken in the working directory, and how to undo it.
#[derive(Debug)]
enum Undo {
    /// An entry now at `.0`, which was at `.1`: renamed back.
    Moved(PathBuf, PathBuf),
    /// A directory made: removed.
    Made(PathBuf),
    /// A symlink made: removed.
    Linked(PathBuf),
    /// A mode changed from `.1`: set back.
    Mode(PathBuf, u32),
}

/// What [`switch_with`] calls before each step of its apply (tests make one fail).
pub type StepHook<'a> = &'a mut dyn FnMut(usize) -> std::io::Result<()>;

/// The tip a [`switch`] starts from: its commit, and how many regular files and
/// entries of every kind (the root aside) its tree holds, as the caller's stat
/// cache, complete for it, counts them; the target's counts follow by what differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tip {
    /// The commit the working directory holds.
    pub id: ObjectId,
    /// Regular files.
    pub files: u64,
    /// Entries: files, directories and symlinks.
    pub entries: u64,
    /// The working directory holds changes of its own that the switch keeps (a
    /// checkout of its moved branch): it does not decline for size, since the
    /// whole commit written would overwrite them.
    pub keeps_changes: bool,
}

/// What a [`switch`] did.
#[derive(Debug, Default)]
pub struct Switched {
    /// The target's totals (files, directories, symlinks, bytes), as a full
    /// checkout reports them; no entries: the stat cache is patched from
    /// [`Switched::put`] and [`Switched::removed`].
    pub done: Materialized,
    /// The paths written or re-moded, with their kinds: what the stat cache must
    /// record anew.
    pub put: Vec<(String, EntryKind)>,
    /// The tip's paths the target lacks.
    pub removed: Vec<String>,
}

/// What differs between the tip and the target, as a switch applies it, gathered
/// from the core's diff ([`snapgraph::SnapshotGraph::diff_with`], directories
/// included): what the walk reads follows what differs, not what the trees hold.
#[derive(Debug, Default)]
struct Differ {
    /// Entries the target adds or replaces (its side).
    add: Vec<PlannedEntry>,
    /// Entries kept whose mode changes (files and directories; a symlink's mode is
    /// not set).
    modes: Vec<PlannedEntry>,
    /// The tip's entries the target drops or replaces.
    remove: Vec<(String, ChangeEntry)>,
    /// Each directory that differs: its mode in the tip and in the target.
    dirs: HashMap<String, (Option<u32>, Option<u32>)>,
    /// Files written (added, or replaced by a file).
    written: usize,
    /// The tip's files the target has nothing of the same kind for (dropped, or
    /// replaced by a directory).
    taken: usize,
    /// What the target holds more (or less) than the tip: files, directories,
    /// symlinks.
    delta: [i64; 3],
    /// The tip's files, for the early stop.
    tip_files: u64,
    /// Set when the diff was stopped: too much differs.
    declined: bool,
    /// Never stop for size ([`Tip::keeps_changes`]).
    whole: bool,
}

impl Differ {
    /// Past this, the switch surely declines ([`MOST_CHANGED`]: the larger tree
    /// holds at most the tip's files and those written).
    fn too_much(&self) -> bool {
        if self.whole {
            return false;
        }
        let larger = self.tip_files as usize + self.written;
        self.written + self.taken > MOST_CHANGED_MIN.max(larger / MOST_CHANGED)
    }

    fn count(&mut self, side: &ChangeEntry, sign: i64) {
        let at = match side.kind {
            EntryKind::File => 0,
            EntryKind::Dir => 1,
            EntryKind::Symlink => 2,
        };
        self.delta[at] += sign;
    }

    fn stop_if_too_much(&mut self) -> ControlFlow<()> {
        self.declined = self.too_much();
        match self.declined {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        }
    }
}

impl Visit for Differ {
    fn visit(&mut self, c: Change) -> ControlFlow<()> {
        if let Some(old) = &c.old {
            self.count(old, -1);
        }
        if let Some(new) = &c.new {
            self.count(new, 1);
        }
        match (c.kind, c.old, c.new) {
            (ChangeKind::ModeChanged, _, Some(new)) => {
                if new.kind == EntryKind::File {
                    self.modes.push(PlannedEntry {
                        path: c.path,
                        kind: new.kind,
                        mode: new.mode,
                    });
                }
            }
            (_, old, new) => {
                if let Some(old) = old {
                    self.taken += usize::from(old.kind == EntryKind::File && new.is_none());
                    self.remove.push((c.path.clone(), old));
                }
                if let Some(new) = new {
                    self.written += usize::from(new.kind == EntryKind::File);
                    self.add.push(PlannedEntry {
                        path: c.path,
                        kind: new.kind,
                        mode: new.mode,
                    });
                }
            }
        }
        self.stop_if_too_much()
    }

    fn visit_dir(&mut self, c: Change) -> ControlFlow<()> {
        let (old, new) = (c.old.map(|e| e.mode), c.new.map(|e| e.mode));
        self.dirs.insert(c.path.clone(), (old, new));
        match (old, new) {
            (Some(_), None) => {
                self.delta[1] -= 1;
                if let Some(was) = c.old {
                    self.remove.push((c.path, was));
                }
            }
            (None, Some(mode)) => {
                self.delta[1] += 1;
                self.add.push(PlannedEntry {
                    path: c.path,
                    kind: EntryKind::Dir,
                    mode,
                });
            }
            (Some(was), Some(mode)) if was & 0o7777 != mode & 0o7777 => {
                self.modes.push(PlannedEntry {
                    path: c.path,
                    kind: EntryKind::Dir,
                    mode,
                });
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// Moves the working directory at `root` (holding the tip's tree, per the dirty
/// check) to commit `id`, checked out lazily in `to` (its file bytes in `source`),
/// touching only what differs; `dot` is `.snapgraph/`. The trees read are those
/// that differ (and, in `to`, the directories of what is written, loaded for its
/// bytes). `Ok(None)`: declined (too much changes, or a directory its owner may not
/// write), nothing done. What it takes out of the working directory is checked by
/// `guard` (the dirty check's knowledge) before it is deleted: a change made since
/// that check undoes the switch ([`CliError::ChangedMeanwhile`]).
pub fn switch<S: ObjectSource + ?Sized>(
    root: &Path,
    dot: &Path,
    tip: &Tip,
    to: &mut Workspace,
    id: ObjectId,
    source: &S,
    guard: &Guard<'_>,
) -> Result<Option<Switched>> {
    switch_with(root, dot, tip, to, id, source, guard, &mut |_| Ok(()))
}

/// [`switch`], calling `hook` before each step of the apply.
#[allow(clippy::too_many_arguments)] // `switch`'s, and the hook tests inject
pub fn switch_with<S: ObjectSource + ?Sized>(
    root: &Path,
    dot: &Path,
    tip: &Tip,
    to: &mut Workspace,
    id: ObjectId,
    source: &S,
    guard: &Guard<'_>,
    hook: StepHook<'_>,
) -> Result<Option<Switched>> {
    // The tip's files the target cannot hold (it holds fewer files and symlinks,
    // by its root's totals) are taken away at least: past the share, the switch
    // declines before the diff reads a tree (a rewind to an early, small commit).
    if let Ok((target_files_and_links, _)) = to.totals("/") {
        let taken_at_least = tip.files.saturating_sub(target_files_and_links) as usize;
        if !tip.keeps_changes
            && taken_at_least > MOST_CHANGED_MIN.max(tip.files as usize / MOST_CHANGED)
        {
            return Ok(None);
        }
    }
    let mut d = Differ {
        tip_files: tip.files,
        whole: tip.keeps_changes,
        ..Differ::default()
    };
    // Every directory the switch writes in differs, so the diff reads its node: kept,
    // the loads below take it from memory instead of reading it again one by one.
    let kept = Kept {
        source,
        kept: RefCell::new(HashMap::new()),
    };
    SnapshotGraph::diff_with(tip.id, id, &kept, &Limits::default(), &mut d)?;
    crate::timings::phase_with("diffed", || {
        format!(
            "{} put, {} taken away",
            d.add.len() + d.modes.len(),
            d.remove.len()
        )
    });
    let target_files = tip.files.saturating_add_signed(d.delta[0]);
    let larger = tip.files.max(target_files) as usize;
    let most = d.written + d.taken > MOST_CHANGED_MIN.max(larger / MOST_CHANGED);
    if d.declined || (most && !tip.keeps_changes) {
        return Ok(None);
    }
    // A directory its owner may not fill (read-only, say) would need its mode lifted
    // and set back around each change: the full checkout does that already. Every
    // directory holding a change differs, so the diff named it with its modes.
    let fillable = |m: &Option<u32>| m.is_none_or(|m| m & 0o700 == 0o700);
    if !d.dirs.values().all(|(a, b)| fillable(a) && fillable(b)) {
        return Ok(None);
    }
    // The target's new names are checked as a checkout checks every name (those it
    // shares with the tip are in the working directory already).
    for e in &d.add {
        let hostile = |reason: &str| CliError::Hostile {
            commit: id,
            path: e.path.clone(),
            reason: reason.to_string(),
        };
        let rest = e
            .path
            .strip_prefix('/')
            .ok_or_else(|| hostile("not an absolute workspace path"))?;
        for c in rest.split('/') {
            crate::materialize::check_component(c).map_err(hostile)?;
        }
    }
    // Parents first for what is put, deepest first for what is taken away (a path
    // sorts after its directory's).
    d.add.sort_by(|x, y| x.path.cmp(&y.path));
    d.modes.sort_by(|x, y| x.path.cmp(&y.path));
    d.remove.sort_by(|x, y| y.0.cmp(&x.0));
    // What is in the way of an entry the tip lacks, judged by the ignore rules the
    // dirty check saw (the apply may put the target's ignore files first): an
    // unrecorded entry gives way; one a scan records was made since the dirty
    // check found the directory clean, and is refused before anything changes.
    let taken_away: HashSet<&str> = d.remove.iter().map(|(p, _)| p.as_str()).collect();
    let mut unrecorded: HashSet<&str> = HashSet::new();
    let mut in_the_way: Vec<&PlannedEntry> = Vec::new();
    for e in &d.add {
        if taken_away.contains(e.path.as_str()) {
            continue;
        }
        let at = root.join(e.path.trim_start_matches('/'));
        let Ok(m) = std::fs::symlink_metadata(&at) else {
            continue;
        };
        if m.is_dir() && e.kind == EntryKind::Dir {
            continue;
        }
        if crate::scan::records(root, &e.path)? {
            return Err(CliError::ChangedMeanwhile {
                path: at,
                what: "created while the checkout ran".into(),
            });
        }
        unrecorded.insert(&e.path);
        in_the_way.push(e);
    }
    // The directories of the files and symlinks put, read for their bytes.
    let mut loaded: HashSet<&str> = HashSet::new();
    let mut parents: Vec<&str> = Vec::new();
    for e in d.add.iter().chain(&d.modes) {
        let parent = crate::scan::parent_of(&e.path);
        if e.kind != EntryKind::Dir && loaded.insert(parent) {
            parents.push(parent);
        }
    }
    to.load_dirs(&parents, &kept)?;
    // The nodes stay kept: the guard reads the tip's directories of what it cannot
    // vouch for from them.
    let to: &Workspace = to;
    crate::timings::phase_with("directories read", || format!("{}", loaded.len()));

    // Stage the new files (nothing in the working directory changes yet).
    let staging = dot.join(crate::repo::unique_name("staging"));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&staging)
        .at(&staging)?;
    let umask = crate::materialize::process_umask();
    let mut staged: HashMap<&str, PathBuf> = HashMap::new();
    for (n, e) in d
        .add
        .iter()
        .filter(|e| e.kind == EntryKind::File)
        .enumerate()
    {
        let at = staging.join(n.to_string());
        // A signal (`crate::interrupt`, armed by the caller) stops the switch while
        // it stages: nothing in the working directory has changed.
        let written = crate::interrupt::check(crate::interrupt::NOTHING_CHECKED_OUT)
            .and_then(|()| stage_file(to, source, e, &at, umask));
        if let Err(err) = written {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(err);
        }
        staged.insert(&e.path, at);
    }
    crate::timings::phase_with("staged", || format!("{} files", staged.len()));
    // An unrecorded entry gives way only where that loses nothing (the same bytes,
    // the same link, an empty directory: `crate::guard::replaced_losslessly`);
    // else the checkout is refused before anything changes (stop 57).
    for e in in_the_way {
        let at = root.join(e.path.trim_start_matches('/'));
        let judged = (|| -> Result<()> {
            let link;
            let theirs = match e.kind {
                // Every file the target puts was staged above; one that was not
                // (never) cannot be compared, and refuses.
                EntryKind::File => match staged.get(e.path.as_str()) {
                    Some(p) => Theirs::Written(p),
                    None => Theirs::Dir,
                },
                EntryKind::Symlink => {
                    link = to.read_link(&e.path)?.to_string();
                    Theirs::Link(std::ffi::OsStr::new(&link))
                }
                EntryKind::Dir => Theirs::Dir,
            };
            if crate::guard::replaced_losslessly(&at, theirs)? {
                return Ok(());
            }
            Err(CliError::UnrecordedInTheWay {
                path: at.clone(),
                theirs: match e.kind {
                    EntryKind::File => "file",
                    EntryKind::Symlink => "symlink",
                    EntryKind::Dir => "directory",
                },
            })
        })();
        if let Err(err) = judged {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(err);
        }
    }
    let add: Vec<&PlannedEntry> = d.add.iter().collect();
    let modes: Vec<&PlannedEntry> = d.modes.iter().collect();
    let remove: Vec<(&str, ChangeEntry)> = d.remove.iter().map(|(p, e)| (p.as_str(), *e)).collect();
    let aside = dot.join(crate::repo::unique_name("old"));
    let changes = Changes {
        root,
        aside: &aside,
        to,
        add: &add,
        modes: &modes,
        remove: &remove,
        staged: &staged,
        umask,
        guard,
        source: &kept,
        unrecorded: &unrecorded,
    };
    // From the apply on, a signal waits for the end of the checkout.
    let applied = crate::interrupt::check(crate::interrupt::NOTHING_CHECKED_OUT)
        .and_then(|()| {
            crate::interrupt::test_point("apply");
            std::fs::create_dir(&aside).at(&aside)
        })
        .and_then(|()| apply(&changes, hook));
    let _ = std::fs::remove_dir_all(&staging);
    if let Err(e) = applied {
        // Everything was put back: what is aside is empty, or holds what could not be.
        let _ = std::fs::remove_dir(&aside);
        return Err(e);
    }
    std::fs::remove_dir_all(&aside).at(&aside)?;
    crate::timings::phase("applied");

    let in_target: HashSet<&str> = d.add.iter().map(|e| e.path.as_str()).collect();
    let removed = d
        .remove
        .iter()
        .filter(|(p, _)| !in_target.contains(p.as_str()))
        .map(|(p, _)| p.clone())
        .collect();
    let put = d
        .add
        .iter()
        .chain(&d.modes)
        .map(|e| (e.path.clone(), e.kind))
        .collect();
    // The tree's own totals (its root's entries total what lies below them: files
    // and symlinks, and bytes) and the entries counted by what differs.
    let (files_and_links, bytes) = to.totals("/")?;
    let symlinks = files_and_links.saturating_sub(target_files);
    let entries = tip.entries.saturating_add_signed(d.delta.iter().sum());
    let done = Materialized {
        files: target_files,
        dirs: entries.saturating_sub(target_files + symlinks),
        symlinks,
        bytes,
        entries: Vec::new(),
    };
    Ok(Some(Switched { done, put, removed }))
}

/// A source that keeps what it read from `source` (tree nodes, for a switch: the
/// diff reads no file's content) and answers from what it kept. The engine verifies
/// each object it is given, as from any source.
struct Kept<'s, S: ?Sized> {
    source: &'s S,
    kept: RefCell<HashMap<ObjectId, Vec<u8>>>,
}

impl<S: ObjectSource + ?Sized> ObjectSource for Kept<'_, S> {
    fn get(&self, id: &ObjectId) -> std::result::Result<Option<Cow<'_, [u8]>>, BoxError> {
        Ok(self.get_many(std::slice::from_ref(id))?.pop().flatten())
    }

    fn get_many(
        &self,
        ids: &[ObjectId],
    ) -> std::result::Result<Vec<Option<Cow<'_, [u8]>>>, BoxError> {
        let mut kept = self.kept.borrow_mut();
        let absent: Vec<ObjectId> = ids
            .iter()
            .filter(|id| !kept.contains_key(id))
            .copied()
            .collect();
        if !absent.is_empty() {
            for (id, got) in absent.iter().zip(self.source.get_many(&absent)?) {
                if let Some(b) = got {
                    kept.insert(*id, b.into_owned());
                }
            }
        }
        Ok(ids
            .iter()
            .map(|id| kept.get(id).map(|b| Cow::Owned(b.clone())))
            .collect())
    }

    fn will_read(&self, ids: &[ObjectId]) {
        self.source.will_read(ids)
    }
}

/// Writes file `e` of `ws` at `at` (a new name), verified, with its mode.
fn stage_file<S: ObjectSource + ?Sized>(
    ws: &Workspace,
    source: &S,
    e: &PlannedEntry,
    at: &Path,
    umask: Option<u32>,
) -> Result<()> {
    let mode = e.mode & 0o777;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(at)
        .at(at)?;
    crate::materialize::copy_out(ws, &e.path, source, &mut f, at)?;
    if umask.is_none_or(|u| mode & u != 0) {
        f.set_permissions(std::fs::Permissions::from_mode(mode))
            .at(at)?;
    }
    Ok(())
}

/// What a [`switch`] applies (its step 3): the working directory at `root`, the
/// directory entries are moved aside into, the target `to`, the entries it adds or
/// replaces (parents first) and re-modes, the tip's entries it takes away (deepest
/// first), and where each new file was staged.
struct Changes<'a> {
    root: &'a Path,
    aside: &'a Path,
    to: &'a Workspace,
    add: &'a [&'a PlannedEntry],
    modes: &'a [&'a PlannedEntry],
    remove: &'a [(&'a str, ChangeEntry)],
    staged: &'a HashMap<&'a str, PathBuf>,
    umask: Option<u32>,
    /// Checks what was taken away before it is deleted.
    guard: &'a Guard<'a>,
    /// Where the guard reads the tip's trees.
    source: &'a dyn ObjectSource,
    /// The paths of what the apply may move aside where the target puts an entry
    /// the tip lacks: unrecorded entries, found before anything changed.
    unrecorded: &'a HashSet<&'a str>,
}

/// Applies `c`, undoing every step taken when one fails.
fn apply(c: &Changes<'_>, hook: StepHook<'_>) -> Result<()> {
    let mut log: Vec<Undo> = Vec::new();
    let r = steps(c, hook, &mut log);
    if r.is_err() {
        for u in log.into_iter().rev() {
            let _ = match u {
                // Never over an entry made meanwhile: what cannot go back stays
                // aside, in `.snapgraph/`.
                Undo::Moved(now, was) => crate::guard::rename_new(&now, &was),
                Undo::Made(dir) => std::fs::remove_dir(dir),
                Undo::Linked(link) => std::fs::remove_file(link),
                Undo::Mode(p, m) => std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)),
            };
        }
    }
    r
}

/// The steps of [`apply`], each logged in `log` as it is taken.
fn steps(c: &Changes<'_>, hook: StepHook<'_>, log: &mut Vec<Undo>) -> Result<()> {
    let Changes {
        root,
        aside,
        to,
        add,
        modes,
        remove,
        staged,
        umask,
        guard,
        source,
        unrecorded,
    } = *c;
    let full = |p: &str| root.join(p.trim_start_matches('/'));
    let mut n = 0usize;
    let mut step = |hook: &mut dyn FnMut(usize) -> std::io::Result<()>, at: &Path| {
        n += 1;
        hook(n).at(at)
    };
    let mut moved = 0usize;
    let mut move_aside = |from: PathBuf, log: &mut Vec<Undo>| -> Result<PathBuf> {
        let to = aside.join(moved.to_string());
        moved += 1;
        std::fs::rename(&from, &to).at(&from)?;
        log.push(Undo::Moved(to.clone(), from));
        Ok(to)
    };
    // The tip's entries moved aside, for the guard; their paths, where nothing may
    // appear again.
    let mut taken: Vec<Taken> = Vec::new();
    let mut gone: HashSet<&str> = HashSet::new();
    // Directories of the tip kept because they hold unrecorded entries.
    let mut held: HashSet<&str> = HashSet::new();
    for (p, was) in remove {
        let at = full(p);
        step(hook, &at)?;
        if was.kind == EntryKind::Dir {
            match std::fs::read_dir(&at).map(|mut entries| entries.next().is_some()) {
                Ok(true) => {
                    held.insert(*p);
                    continue;
                }
                Ok(false) => {}
                // Gone already (removed since the dirty check): nothing to move.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(CliError::io(&at, e)),
            }
        }
        // Its stat just before the move: the guard compares it with the index's
        // and with the stat after (the move changes only its change time).
        match FileStat::lstat(&at) {
            Ok(before) => {
                let now = move_aside(at, log)?;
                let before = (was.kind != EntryKind::Dir).then_some(before);
                taken.push(Taken {
                    now,
                    path: p.to_string(),
                    before,
                    tip: Some(*was),
                });
                gone.insert(p);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(CliError::io(&at, e)),
        }
    }
    // Directories whose mode is set last (deepest first), once they are filled.
    let mut late: Vec<&PlannedEntry> = Vec::new();
    for e in add {
        let at = full(&e.path);
        step(hook, &at)?;
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() && e.kind == EntryKind::Dir => {
                // An unrecorded directory, or one of the tip's kept for what it
                // holds: it is the target's now.
                if m.permissions().mode() & 0o777 != e.mode & 0o777 {
                    late.push(e);
                }
                continue;
            }
            Ok(_) if held.contains(e.path.as_str()) => {
                return Err(CliError::Dirty {
                    path: at,
                    summary: format!(
                        "ignored entries in a directory that the commit's file {} would replace",
                        e.path
                    ),
                });
            }
            // Where the tip's entry was taken away: made since.
            Ok(_) if gone.contains(e.path.as_str()) => {
                return Err(CliError::ChangedMeanwhile {
                    path: at,
                    what: "created while the checkout ran".into(),
                });
            }
            // Unrecorded (ignored, a nested repository, a socket...), as found
            // before the apply, and judged to lose nothing by giving way (after
            // the staging): the commit's entry takes its place. Anything
            // else was made since.
            Ok(_) if unrecorded.contains(e.path.as_str()) => {
                move_aside(at.clone(), log)?;
            }
            Ok(_) => {
                return Err(CliError::ChangedMeanwhile {
                    path: at,
                    what: "created while the checkout ran".into(),
                });
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(CliError::io(&at, err)),
        }
        match e.kind {
            EntryKind::Dir => {
                let moded = crate::materialize::make_dir(&at, e.mode, umask)?;
                log.push(Undo::Made(at));
                if !moded {
                    late.push(e);
                }
            }
            EntryKind::Symlink => {
                let target = to.read_link(&e.path)?.to_string();
                std::os::unix::fs::symlink(&target, &at).at(&at)?;
                log.push(Undo::Linked(at));
            }
            EntryKind::File => {
                let from = staged.get(e.path.as_str()).ok_or_else(|| {
                    CliError::bad_path(&at, "a file of the commit was not staged")
                })?;
                match crate::guard::rename_new(from, &at) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        return Err(CliError::ChangedMeanwhile {
                            path: at,
                            what: "created while the checkout ran".into(),
                        });
                    }
                    Err(e) => return Err(CliError::io(&at, e)),
                }
                log.push(Undo::Moved(at, from.clone()));
            }
        }
    }
    for e in modes.iter().chain(late.iter().rev()) {
        let at = full(&e.path);
        step(hook, &at)?;
        let was = std::fs::symlink_metadata(&at).at(&at)?.permissions().mode() & 0o7777;
        std::fs::set_permissions(&at, std::fs::Permissions::from_mode(e.mode & 0o777)).at(&at)?;
        log.push(Undo::Mode(at, was));
    }
    // Last, with every entry out of the way: what was taken is what the dirty
    // check saw (an edit made since fails here, and every step is undone).
    guard.check(&taken, source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use snapgraph::{CheckoutOptions, CheckoutPolicy, CommitOptions};
    use snapgraph_store::{CallerVerifies, MemoryStore, ObjectStore};
    use std::collections::BTreeMap;

    /// One entry of a test tree: a file (its content variant and whether it is
    /// executable), a symlink, or a directory (its mode).
    #[derive(Debug, Clone)]
    enum Made {
        File(u8, bool),
        Link(u8),
        Dir(u32),
    }

    /// Commits `tree` (path -> entry; parents made as needed) into `store`; the
    /// commit and its shallow checkout.
    fn commit(store: &MemoryStore, tree: &BTreeMap<String, Made>) -> (ObjectId, Workspace) {
        let mut ws = Workspace::new();
        for (p, m) in tree {
            match m {
                Made::File(v, x) => {
                    let body: Vec<u8> = (0..40 + *v as usize * 97).map(|i| (i as u8) ^ v).collect();
                    ws.write(p, body).unwrap();
                    if *x {
                        ws.set_mode(p, 0o755).unwrap();
                    }
                }
                Made::Link(v) => ws.symlink(p, &format!("target-{v}")).unwrap(),
                Made::Dir(_) => ws.mkdir(p).unwrap(),
            }
        }
        for (p, m) in tree {
            if let Made::Dir(mode) = m {
                ws.set_mode(p, *mode).unwrap();
            }
        }
        let c = ws.commit(CommitOptions::new()).unwrap();
        let id = c.id();
        let objects: Vec<(ObjectId, Vec<u8>)> = c.into_objects().into_iter().collect();
        let batch: Vec<_> = objects.iter().map(|(i, b)| (*i, &b[..])).collect();
        store.put_many(&batch).unwrap();
        (
            id,
            checkout_of(id, store, CheckoutOptions::new().shallow(true)),
        )
    }

    /// Commit `id` of `store` checked out as `options` say.
    fn checkout_of(id: ObjectId, store: &MemoryStore, options: CheckoutOptions) -> Workspace {
        let mut ws = Workspace::new();
        let _ = ws
            .checkout_with(
                id,
                &CallerVerifies(store),
                options.policy(CheckoutPolicy::Force),
            )
            .unwrap();
        ws
    }

    /// Every entry below `root` but `.snapgraph`: kind, mode, bytes or target.
    fn snapshot(root: &Path) -> BTreeMap<String, String> {
        fn walk(dir: &Path, rel: &str, out: &mut BTreeMap<String, String>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let e = e.unwrap();
                let name = e.file_name().into_string().unwrap();
                if rel.is_empty() && name == ".snapgraph" {
                    continue;
                }
                let p = format!("{rel}/{name}");
                let m = std::fs::symlink_metadata(e.path()).unwrap();
                let mode = m.permissions().mode() & 0o7777;
                let v = if m.file_type().is_symlink() {
                    format!("link {}", std::fs::read_link(e.path()).unwrap().display())
                } else if std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()) {
                    "socket".to_string()
                } else if m.is_dir() {
                    walk(&e.path(), &p, out);
                    format!("dir {mode:o}")
                } else {
                    format!("file {mode:o} {:?}", std::fs::read(e.path()).unwrap())
                };
                out.insert(p, v);
            }
        }
        let mut out = BTreeMap::new();
        walk(root, "", &mut out);
        out
    }

    /// A working directory holding `ws` (commit `id`) at `<t>/<name>`, with its
    /// `.snapgraph/`.
    fn checked_out(
        t: &Path,
        name: &str,
        store: &MemoryStore,
        id: ObjectId,
        ws: &Workspace,
    ) -> PathBuf {
        let root = t.join(name);
        let bar = indicatif::ProgressBar::hidden();
        crate::materialize::materialize_with(ws, &CallerVerifies(store), id, &root, &bar, 1)
            .unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(root.join(".snapgraph")).unwrap();
        root
    }

    fn tree(entries: &[(&str, Made)]) -> BTreeMap<String, Made> {
        entries
            .iter()
            .map(|(p, m)| (p.to_string(), m.clone()))
            .collect()
    }

    fn sample() -> (BTreeMap<String, Made>, BTreeMap<String, Made>) {
        let a = tree(&[
            ("/keep.txt", Made::File(1, false)),
            ("/edit.txt", Made::File(2, false)),
            ("/mode.txt", Made::File(3, false)),
            ("/gone/deep/x", Made::File(4, false)),
            ("/gone/y", Made::File(5, false)),
            ("/swap", Made::File(6, false)),
            ("/link", Made::Link(1)),
            ("/dir", Made::Dir(0o755)),
            ("/dir/f", Made::File(7, false)),
        ]);
        let b = tree(&[
            ("/keep.txt", Made::File(1, false)),
            ("/edit.txt", Made::File(9, false)),
            ("/mode.txt", Made::File(3, true)),
            ("/swap/inside", Made::File(6, false)),
            ("/link", Made::Link(2)),
            ("/dir", Made::Dir(0o750)),
            ("/dir/f", Made::File(7, false)),
            ("/new/sub/z", Made::File(8, true)),
            ("/empty", Made::Dir(0o700)),
        ]);
        (a, b)
    }

    /// The sample's two commits (`sample`) in a store, shallow.
    struct Sampled {
        t: tempfile::TempDir,
        store: MemoryStore,
        a: (ObjectId, Workspace),
        b: (ObjectId, Workspace),
    }

    fn sampled() -> Sampled {
        let store = MemoryStore::new();
        let (a, b) = sample();
        let a = commit(&store, &a);
        let b = commit(&store, &b);
        Sampled {
            t: tempfile::tempdir().unwrap(),
            store,
            a,
            b,
        }
    }

    /// The tip `ws` (commit `id`) as a stat cache complete for it counts it.
    fn tip(id: ObjectId, ws: &Workspace) -> Tip {
        let walked = ws.walk();
        Tip {
            id,
            files: walked
                .iter()
                .filter(|(_, m)| m.kind == EntryKind::File)
                .count() as u64,
            entries: walked.len() as u64,
            keeps_changes: false,
        }
    }

    /// Files, directories and symlinks of `ws`.
    fn kinds(ws: &Workspace) -> (u64, u64, u64) {
        let walked = ws.walk();
        let n = |k: EntryKind| walked.iter().filter(|(_, m)| m.kind == k).count() as u64;
        (n(EntryKind::File), n(EntryKind::Dir), n(EntryKind::Symlink))
    }

    /// Commit `id` checked out lazily, as the switch is handed it.
    fn lazy(id: ObjectId, store: &MemoryStore) -> Workspace {
        checkout_of(id, store, CheckoutOptions::new().lazy(true))
    }

    /// [`switch`] of the working directory `root` from `from` to `to`.
    fn plain(
        root: &Path,
        store: &MemoryStore,
        from: (ObjectId, &Workspace),
        to: ObjectId,
    ) -> Result<Option<Switched>> {
        let dot = root.join(".snapgraph");
        let mut lazy = lazy(to, store);
        switch(
            root,
            &dot,
            &tip(from.0, from.1),
            &mut lazy,
            to,
            &CallerVerifies(store),
            &Guard::new(root, Some(from.0), None),
        )
    }

    /// [`switch_with`] of the working directory `root` from `from` to `to`.
    fn go(
        root: &Path,
        store: &MemoryStore,
        from: &(ObjectId, Workspace),
        to: &(ObjectId, Workspace),
        hook: StepHook<'_>,
    ) -> Result<Option<Switched>> {
        let dot = root.join(".snapgraph");
        switch_with(
            root,
            &dot,
            &tip(from.0, &from.1),
            &mut lazy(to.0, store),
            to.0,
            &CallerVerifies(store),
            &Guard::new(root, Some(from.0), None),
            hook,
        )
    }

    /// A switch leaves the working directory as a fresh checkout of the target
    /// writes it, touching only what differs; what is aside and staged is gone.
    #[test]
    fn a_switch_writes_what_a_checkout_of_the_target_writes() {
        let Sampled { t, store, a, b } = sampled();
        let root = checked_out(t.path(), "w", &store, a.0, &a.1);
        let fresh = checked_out(t.path(), "fresh", &store, b.0, &b.1);
        let kept = std::fs::metadata(root.join("keep.txt")).unwrap();
        let s = go(&root, &store, &a, &b, &mut |_| Ok(()))
            .unwrap()
            .expect("taken");
        assert_eq!(snapshot(&root), snapshot(&fresh));
        // Untouched: the same inode, the same change time.
        let now = std::fs::metadata(root.join("keep.txt")).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            (now.ino(), now.ctime_nsec()),
            (kept.ino(), kept.ctime_nsec())
        );
        assert!(!s.put.iter().any(|(p, _)| p == "/keep.txt" || p == "/dir/f"));
        let mut removed = s.removed.clone();
        removed.sort();
        assert_eq!(removed, ["/gone", "/gone/deep", "/gone/deep/x", "/gone/y"]);
        assert_eq!(s.done.files, 6);
        assert_eq!(
            std::fs::read_dir(root.join(".snapgraph")).unwrap().count(),
            0
        );
    }

    /// A source that counts how often each object is asked of it.
    struct Asked<'s> {
        store: &'s MemoryStore,
        asked: std::sync::Mutex<HashMap<ObjectId, usize>>,
    }

    impl ObjectSource for Asked<'_> {
        fn get(&self, id: &ObjectId) -> std::result::Result<Option<Cow<'_, [u8]>>, BoxError> {
            *self.asked.lock().unwrap().entry(*id).or_default() += 1;
            CallerVerifies(self.store)
                .get(id)
                .map(|b| b.map(|b| Cow::Owned(b.into_owned())))
        }
    }

    /// A switch asks the store for each object once: the directories it loads for
    /// the files it writes are the nodes its diff read.
    #[test]
    fn a_switch_reads_each_object_once() {
        let Sampled { t, store, a, b } = sampled();
        let root = checked_out(t.path(), "w", &store, a.0, &a.1);
        let fresh = checked_out(t.path(), "fresh", &store, b.0, &b.1);
        let asked = Asked {
            store: &store,
            asked: Default::default(),
        };
        let mut to = lazy(b.0, &store);
        switch(
            &root,
            &root.join(".snapgraph"),
            &tip(a.0, &a.1),
            &mut to,
            b.0,
            &asked,
            &Guard::new(&root, Some(a.0), None),
        )
        .unwrap()
        .expect("taken");
        assert_eq!(snapshot(&root), snapshot(&fresh));
        let asked = asked.asked.into_inner().unwrap();
        let twice: Vec<_> = asked.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "asked more than once: {twice:?}");
        assert!(asked.len() > 4, "{asked:?}");
    }

    /// A failure at any step of the apply puts every entry back as it was (ignored
    /// entries included) and leaves nothing in `.snapgraph/`.
    #[test]
    fn a_failure_at_any_step_undoes_every_step() {
        let Sampled { t, store, a, b } = sampled();
        // The tip checked out with an ignored socket (it holds no data: it gives
        // way) where the target puts a directory, and an ignored file in a
        // directory the target drops.
        let ready = |name: &str| {
            let root = checked_out(t.path(), name, &store, a.0, &a.1);
            std::fs::write(root.join(".snapgraphignore"), b"/new\n*.log\n").unwrap();
            std::os::unix::net::UnixListener::bind(root.join("new")).unwrap();
            std::fs::write(root.join("gone/ignored.log"), b"ignored").unwrap();
            root
        };
        let root = ready("w");
        let before = snapshot(&root);
        let mut steps = 0;
        go(&root, &store, &a, &b, &mut |n| {
            steps = steps.max(n);
            Ok(())
        })
        .unwrap()
        .expect("taken");
        assert!(steps > 10, "{steps} steps");
        for fail in 1..=steps {
            let root = ready(&format!("w{fail}"));
            let r = go(&root, &store, &a, &b, &mut |n| match n == fail {
                true => Err(std::io::Error::other("injected")),
                false => Ok(()),
            });
            assert!(r.is_err(), "step {fail}");
            assert_eq!(snapshot(&root), before, "step {fail}");
            let dot = root.join(".snapgraph");
            assert_eq!(std::fs::read_dir(&dot).unwrap().count(), 0, "step {fail}");
        }
    }

    /// An edit made while the switch runs is never deleted: written through a
    /// descriptor opened before the switch, to a file the switch replaces, it
    /// undoes the switch at its last step and the file is back with the edit.
    #[test]
    fn an_edit_made_during_a_switch_undoes_it() {
        let Sampled { t, store, a, b } = sampled();
        let root = checked_out(t.path(), "w", &store, a.0, &a.1);
        let before = snapshot(&root);
        let mut steps = 0;
        go(&root, &store, &a, &b, &mut |n| {
            steps = steps.max(n);
            Ok(())
        })
        .unwrap();
        let root = checked_out(t.path(), "w2", &store, a.0, &a.1);
        let mut edited = std::fs::read(root.join("edit.txt")).unwrap();
        let mut f2 = std::fs::File::options()
            .append(true)
            .open(root.join("edit.txt"))
            .unwrap();
        let err = go(&root, &store, &a, &b, &mut |n| {
            if n == steps {
                std::io::Write::write_all(&mut f2, b"mine").unwrap();
            }
            Ok(())
        })
        .unwrap_err();
        match err {
            CliError::ChangedMeanwhile { path, .. } => assert_eq!(path, root.join("edit.txt")),
            other => panic!("{other}"),
        }
        let mut expected = before.clone();
        edited.extend_from_slice(b"mine");
        expected.insert("/edit.txt".into(), format!("file 644 {edited:?}"));
        assert_eq!(snapshot(&root), expected);
        assert_eq!(
            std::fs::read_dir(root.join(".snapgraph")).unwrap().count(),
            0
        );
    }

    /// A file a scan would record (not ignored) where the target puts an entry the
    /// tip lacks was made after the dirty check: the switch refuses it, with
    /// nothing changed; ignored, it gives way.
    #[test]
    fn an_untracked_file_where_the_target_puts_one_is_refused() {
        let Sampled { t, store, a, b } = sampled();
        let root = checked_out(t.path(), "w", &store, a.0, &a.1);
        std::fs::create_dir_all(root.join("new/sub")).unwrap();
        std::fs::write(root.join("new/sub/z"), b"mine").unwrap();
        let before = snapshot(&root);
        let err = go(&root, &store, &a, &b, &mut |_| Ok(())).unwrap_err();
        assert!(
            matches!(&err, CliError::ChangedMeanwhile { path, .. } if *path == root.join("new/sub/z")),
            "{err}"
        );
        assert_eq!(snapshot(&root), before);
        assert_eq!(
            std::fs::read_dir(root.join(".snapgraph")).unwrap().count(),
            0
        );
        // Ignored, it gives way only to the same bytes (stop 57).
        std::fs::write(root.join("new/.snapgraphignore"), b"z\n").unwrap();
        let before = snapshot(&root);
        let err = go(&root, &store, &a, &b, &mut |_| Ok(())).unwrap_err();
        assert!(
            matches!(&err, CliError::UnrecordedInTheWay { path, theirs: "file" } if *path == root.join("new/sub/z")),
            "{err}"
        );
        assert_eq!(snapshot(&root), before);
        let fresh = checked_out(t.path(), "fresh", &store, b.0, &b.1);
        let theirs = std::fs::read(fresh.join("new/sub/z")).unwrap();
        std::fs::write(root.join("new/sub/z"), &theirs).unwrap();
        go(&root, &store, &a, &b, &mut |_| Ok(())).unwrap().unwrap();
        assert_eq!(std::fs::read(root.join("new/sub/z")).unwrap(), theirs);
    }

    /// An entry made where the switch took the tip's away is never replaced: the
    /// switch is undone around it, and the tip's file, which cannot go back, stays
    /// in `.snapgraph/`.
    #[test]
    fn an_entry_made_where_the_tip_s_was_taken_is_never_replaced() {
        let Sampled { t, store, a, b } = sampled();
        let root = checked_out(t.path(), "w", &store, a.0, &a.1);
        let tip_bytes = std::fs::read(root.join("edit.txt")).unwrap();
        let at = root.join("edit.txt");
        let mut made = false;
        let err = go(&root, &store, &a, &b, &mut |_| {
            if !made && !at.exists() {
                std::fs::write(&at, b"mine").unwrap();
                made = true;
            }
            Ok(())
        })
        .unwrap_err();
        assert!(made);
        assert!(
            matches!(&err, CliError::ChangedMeanwhile { path, .. } if *path == at),
            "{err}"
        );
        assert_eq!(std::fs::read(&at).unwrap(), b"mine");
        let aside: Vec<_> = std::fs::read_dir(root.join(".snapgraph"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(aside.len(), 1, "{aside:?}");
        let kept: Vec<Vec<u8>> = std::fs::read_dir(&aside[0])
            .unwrap()
            .map(|e| std::fs::read(e.unwrap().path()).unwrap())
            .collect();
        assert_eq!(kept, [tip_bytes]);
    }

    /// Unrecorded entries: one where the target puts an entry gives way where that
    /// loses nothing (a socket here), and is refused otherwise (an ignored file
    /// where the target puts a directory: stop 57), with nothing changed; a
    /// directory the target drops stays while it holds one; a file of the target
    /// over such a directory is refused, with nothing changed.
    #[test]
    fn unrecorded_entries_give_way_stay_or_refuse() {
        let Sampled { t, store, a, b } = sampled();
        let root = checked_out(t.path(), "w", &store, a.0, &a.1);
        std::fs::write(root.join(".snapgraphignore"), b"/new\n*.log\n").unwrap();
        std::fs::write(root.join("new"), b"ignored").unwrap();
        let before = snapshot(&root);
        let err = go(&root, &store, &a, &b, &mut |_| Ok(())).unwrap_err();
        assert!(
            matches!(&err, CliError::UnrecordedInTheWay { path, theirs: "directory" } if *path == root.join("new")),
            "{err}"
        );
        assert_eq!(snapshot(&root), before);
        std::fs::remove_file(root.join("new")).unwrap();
        std::os::unix::net::UnixListener::bind(root.join("new")).unwrap();
        std::fs::write(root.join("gone/ignored.log"), b"kept").unwrap();
        std::fs::write(root.join("outside.log"), b"kept too").unwrap();
        go(&root, &store, &a, &b, &mut |_| Ok(())).unwrap().unwrap();
        let fresh = checked_out(t.path(), "fresh", &store, b.0, &b.1);
        let mut expected = snapshot(&fresh);
        let got = snapshot(&root);
        for p in [
            "/gone",
            "/gone/ignored.log",
            "/outside.log",
            "/.snapgraphignore",
        ] {
            expected.insert(p.to_string(), got[p].clone());
        }
        assert_eq!(got, expected);
        let kept = std::fs::read(root.join("gone/ignored.log")).unwrap();
        assert_eq!(kept, b"kept");

        // From the tip again, to a target with a file where the kept directory is.
        let c = commit(&store, &tree(&[("/gone", Made::File(3, false))]));
        let root = checked_out(t.path(), "w2", &store, a.0, &a.1);
        std::fs::write(root.join("gone/ignored.log"), b"kept").unwrap();
        let before = snapshot(&root);
        let err = go(&root, &store, &a, &c, &mut |_| Ok(())).unwrap_err();
        assert!(matches!(err, CliError::Dirty { .. }), "{err}");
        assert_eq!(snapshot(&root), before);
    }

    /// Past a quarter of the target's files (and the floor), the switch declines and
    /// changes nothing.
    #[test]
    fn a_switch_that_would_write_most_of_the_tree_declines() {
        let t = tempfile::tempdir().unwrap();
        let store = MemoryStore::new();
        let n = MOST_CHANGED_MIN + 40;
        let variant = |i: usize| (i % 200) as u8;
        let a: BTreeMap<String, Made> = (0..n)
            .map(|i| (format!("/f{i}"), Made::File(variant(i), false)))
            .collect();
        let b: BTreeMap<String, Made> = (0..n)
            .map(|i| (format!("/f{i}"), Made::File(variant(i) + 1, false)))
            .collect();
        let (ia, wa) = commit(&store, &a);
        let (ib, _) = commit(&store, &b);
        let root = checked_out(t.path(), "w", &store, ia, &wa);
        let before = snapshot(&root);
        let r = plain(&root, &store, (ia, &wa), ib);
        assert!(r.unwrap().is_none());
        assert_eq!(snapshot(&root), before);
        // Files taken away count too: more than the share by the target's own
        // totals, it declines before reading a tree.
        let c: BTreeMap<String, Made> = [("/f0".to_string(), Made::File(0, false))].into();
        let (ic, _) = commit(&store, &c);
        let r = plain(&root, &store, (ia, &wa), ic);
        assert!(r.unwrap().is_none());
        assert_eq!(snapshot(&root), before);
        let asked = Asked {
            store: &store,
            asked: Default::default(),
        };
        let r = switch(
            &root,
            &root.join(".snapgraph"),
            &tip(ia, &wa),
            &mut lazy(ic, &store),
            ic,
            &asked,
            &Guard::new(&root, Some(ia), None),
        );
        assert!(r.unwrap().is_none());
        assert!(asked.asked.into_inner().unwrap().is_empty());
    }

    fn made() -> impl Strategy<Value = Made> {
        prop_oneof![
            6 => (0u8..4, any::<bool>()).prop_map(|(v, x)| Made::File(v, x)),
            1 => (0u8..3).prop_map(Made::Link),
            2 => prop::sample::select(vec![0o755u32, 0o700, 0o750, 0o775]).prop_map(Made::Dir),
        ]
    }

    /// Trees over a small universe of paths, consistent (nothing below a file or a
    /// symlink).
    fn trees() -> impl Strategy<Value = BTreeMap<String, Made>> {
        let names = ["/a", "/a/b", "/a/b/c", "/a/d", "/e", "/e/f", "/g", "/a/b/h"];
        prop::collection::vec(prop::option::of(made()), names.len()).prop_map(move |picks| {
            let mut out = BTreeMap::new();
            for (p, m) in names.iter().zip(picks) {
                let Some(m) = m else { continue };
                // A parent that is not a directory of this tree drops the entry.
                let blocked = out.iter().any(|(q, k): (&String, &Made)| {
                    p.starts_with(&format!("{q}/")) && !matches!(k, Made::Dir(_))
                });
                if !blocked {
                    out.insert(p.to_string(), m);
                }
            }
            out
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// From any tree to any other, a switch writes what a checkout of the
        /// target writes (directory modes included), and an ignored file outside
        /// both trees stays.
        #[test]
        fn any_switch_is_a_fresh_checkout_of_the_target(a in trees(), b in trees()) {
            let t = tempfile::tempdir().unwrap();
            let store = MemoryStore::new();
            let (ia, wa) = commit(&store, &a);
            let (ib, wb) = commit(&store, &b);
            let root = checked_out(t.path(), "w", &store, ia, &wa);
            std::fs::write(root.join("zz-ignored.log"), b"mine").unwrap();
            let fresh = checked_out(t.path(), "fresh", &store, ib, &wb);
            let s = plain(&root, &store, (ia, &wa), ib).unwrap().expect("taken");
            let mut expected = snapshot(&fresh);
            expected.insert("/zz-ignored.log".into(), format!("file 644 {:?}", b"mine"));
            prop_assert_eq!(snapshot(&root), expected);
            // The totals a full checkout of the target reports.
            let (files, dirs, symlinks) = kinds(&wb);
            let bytes: u64 = wb.walk().iter().filter(|(_, m)| m.kind == EntryKind::File).map(|(_, m)| m.size).sum();
            prop_assert_eq!(
                (s.done.files, s.done.dirs, s.done.symlinks, s.done.bytes),
                (files, dirs, symlinks, bytes)
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// An edit made before any step of any switch (a file of the tip rewritten,
        /// or a file made where there is none) is never lost: the edit is where it
        /// was made whether the switch goes through or is undone; undone, everything
        /// else is as before; gone through, everything else is the target's.
        #[test]
        fn an_edit_at_any_step_is_never_lost(
            a in trees(),
            b in trees(),
            pick in 0usize..9,
            at_step in 1usize..16,
        ) {
            let names = ["/a", "/a/b", "/a/b/c", "/a/d", "/e", "/e/f", "/g", "/a/b/h", "/new.txt"];
            let edited = names[pick];
            let t = tempfile::tempdir().unwrap();
            let store = MemoryStore::new();
            let from = commit(&store, &a);
            let to = commit(&store, &b);
            let root = checked_out(t.path(), "w", &store, from.0, &from.1);
            let fresh = checked_out(t.path(), "fresh", &store, to.0, &to.1);
            let before = snapshot(&root);
            let full = root.join(&edited[1..]);
            let mut done = false;
            let r = go(&root, &store, &from, &to, &mut |n| {
                if n == at_step {
                    // A regular file, or nothing in a directory.
                    let editable = match std::fs::symlink_metadata(&full) {
                        Ok(m) => m.is_file(),
                        Err(_) => std::fs::symlink_metadata(full.parent().unwrap())
                            .is_ok_and(|m| m.is_dir()),
                    };
                    if editable {
                        std::fs::write(&full, b"EDIT").unwrap();
                        done = true;
                    }
                }
                Ok(())
            });
            if !done {
                prop_assert!(r.is_ok(), "{:?}", r.err());
                return Ok(());
            }
            prop_assert_eq!(std::fs::read(&full).ok(), Some(b"EDIT".to_vec()));
            // Everything but the edited path, the directories above it and what
            // was below it (the edit may stand where the tip's directory was).
            let rest = |mut m: BTreeMap<String, String>| {
                m.retain(|p, _| {
                    p != edited
                        && !edited.starts_with(&format!("{p}/"))
                        && !p.starts_with(&format!("{edited}/"))
                });
                m
            };
            match r {
                Ok(_) => prop_assert_eq!(rest(snapshot(&root)), rest(snapshot(&fresh))),
                Err(_) => {
                    prop_assert_eq!(rest(snapshot(&root)), rest(before.clone()));
                    // What the edit keeps from going back is kept in `.snapgraph/`.
                    let now = snapshot(&root);
                    let kept: Vec<String> = snapshot(&root.join(".snapgraph")).into_values().collect();
                    for (p, v) in &before {
                        if p.starts_with(&format!("{edited}/")) && v.starts_with("file") && now.get(p) != Some(v) {
                            prop_assert!(kept.contains(v), "{} lost", p);
                        }
                    }
                }
            }
        }
    }
}
