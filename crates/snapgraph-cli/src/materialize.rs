//! Writing a commit to disk, safely.
//!
//! A commit is first checked out shallow (trees only) and every path is validated
//! before anything is created: each component must be a plain name (not empty, `.`
//! or `..`, without `/` or NUL, nothing a file system could fold into `.snapgraph`),
//! and no path may lie below a symlink of the commit.
//! Then everything is written into a **fresh staging directory** that this process
//! creates (mode `0o700`): every directory with `create_dir` (which fails if
//! anything exists), every file with `create_new` (`O_CREAT|O_EXCL`, which never
//! follows a symlink), every symlink with `symlink` as recorded, never followed.
//! Since the staging directory is new and every directory in it is one we created,
//! and symlinks are only ever leaves, no write can leave it.
//!
//! File and directory modes are written masked to `0o777` (no set-id or sticky bits
//! from a commit). A directory is created with its mode when that leaves its owner
//! every right and the umask takes none of its bits (`0o755` under umask `022`: no
//! `chmod` at all); any other directory mode is applied last, deepest first, so
//! that a read-only directory can still be filled. The staging directory itself is
//! `0o700` until it is renamed into place, so nobody else reaches what is inside
//! meanwhile. File bytes are fetched, verified and written by a few threads, each
//! taking a run of files in walk order (at most [`BATCH_FILES`] files and
//! [`BATCH_BYTES`] recorded bytes) whose objects it reads in one batch and then
//! writes one file at a time, so memory stays near one batch per thread; the
//! helpers read their first runs while the directories are still being made.
//!
//! The staging directory is then renamed into place (see [`crate::commands`]):
//! all or nothing for a new target directory.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use indicatif::ProgressBar;
use snapgraph::object::manifest::Manifest;
use snapgraph::{BoxError, EntryKind, ObjectId, ObjectKind, ObjectSource, Workspace};

use crate::error::{CliError, IoContext, Result};

/// One validated entry to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedEntry {
    /// The workspace path (`/a/b`), each component checked ([`check_component`]).
    pub path: String,
    /// What it is.
    pub kind: EntryKind,
    /// Its recorded mode.
    pub mode: u32,
}

/// What was written.
#[derive(Debug, Default, Clone)]
pub struct Materialized {
    /// Regular files.
    pub files: u64,
    /// Directories (the root excluded).
    pub dirs: u64,
    /// Symlinks.
    pub symlinks: u64,
    /// File bytes.
    pub bytes: u64,
    /// Every entry written, with the digest of each file whose digest is known,
    /// for the stat cache.
    pub entries: Vec<(String, EntryKind, Option<crate::index::Digest>)>,
}

/// Whether a file system could take `name` for `.snapgraph`, the repository
/// directory (git's rule for `.git`): ASCII case folded, the code points HFS+
/// ignores removed, trailing dots and spaces and an NTFS stream suffix (`:...`)
/// dropped, and the 8.3 short name `SNAPGR~N`.
pub fn is_reserved_name(name: &str) -> bool {
    // Fast path for the common case (the scan asks for every entry): an ASCII name
    // can only fold into `.snapgraph` or `snapgr~N` if it starts with one of them.
    if name.is_ascii() {
        let b = name.as_bytes();
        let dot = b.len() >= 10 && b[..10].eq_ignore_ascii_case(b".snapgraph");
        let short = b.len() >= 8 && b[..7].eq_ignore_ascii_case(b"snapgr~");
        if !dot && !short {
            return false;
        }
    }
    // Code points HFS+ ignores when comparing names (git's `is_hfs_dotgit`).
    let ignorable = |c: char| matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}');
    let mut folded: String = name
        .chars()
        .filter(|c| !ignorable(*c))
        .flat_map(char::to_lowercase)
        .collect();
    if let Some(i) = folded.find(':') {
        folded.truncate(i);
    }
    let folded = folded.trim_end_matches(['.', ' ']);
    if folded == crate::repo::DOT_DIR {
        return true;
    }
    folded
        .strip_prefix("snapgr~")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Checks one path component.
pub fn check_component(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("empty path component");
    }
    if name == "." || name == ".." {
        return Err("'.' or '..' path component (path traversal)");
    }
    if name.contains('/') || name.contains('\0') {
        return Err("path component contains '/' or NUL");
    }
    if is_reserved_name(name) {
        return Err(
            "reserved name: a file system may fold it into .snapgraph, the repository directory",
        );
    }
    Ok(())
}

impl PlannedEntry {
    /// The path relative to the root (`a/b`): plain names joined by `/`, safe to
    /// join to a directory.
    pub fn relative(&self) -> &str {
        &self.path[1..]
    }

    /// Where it goes below `base`.
    pub fn under(&self, base: &Path) -> PathBuf {
        base.join(self.relative())
    }
}

/// Validates entries (in the workspace's walk order: parents before children) and
/// returns them planned, or the first hostile one.
///
/// Only an entry's parent is looked up: a directory is accepted only below an
/// accepted directory (or at the root), so the parent's acceptance vouches for
/// every ancestor: none is a symlink or a file, and none is missing.
pub fn plan(
    commit: ObjectId,
    entries: impl IntoIterator<Item = (String, EntryKind, u32)>,
) -> Result<Vec<PlannedEntry>> {
    let hostile = |path: &str, reason: &str| CliError::Hostile {
        commit,
        path: path.to_string(),
        reason: reason.to_string(),
    };
    let entries = entries.into_iter();
    let mut dirs: hashbrown::HashSet<String> = hashbrown::HashSet::new();
    let mut symlinks: hashbrown::HashSet<String> = hashbrown::HashSet::new();
    let mut taken: hashbrown::HashSet<String> =
        hashbrown::HashSet::with_capacity(entries.size_hint().0);
    let mut out = Vec::with_capacity(entries.size_hint().0);
    for (path, kind, mode) in entries {
        let Some(rest) = path.strip_prefix('/') else {
            return Err(hostile(&path, "not an absolute workspace path"));
        };
        for c in rest.split('/') {
            check_component(c).map_err(|r| hostile(&path, r))?;
        }
        if let Some(cut) = rest.rfind('/') {
            let parent = &path[..cut + 1];
            if symlinks.contains(parent) {
                return Err(hostile(
                    &path,
                    &format!("lies below the symlink {parent} (would write through it)"),
                ));
            }
            if !dirs.contains(parent) {
                return Err(hostile(
                    &path,
                    &format!("parent {parent} is not a directory"),
                ));
            }
        }
        if !taken.insert(path.clone()) {
            return Err(hostile(&path, "appears twice"));
        }
        match kind {
            EntryKind::Dir => {
                dirs.insert(path.clone());
            }
            EntryKind::Symlink => {
                symlinks.insert(path.clone());
            }
            EntryKind::File => {}
        }
        out.push(PlannedEntry { path, kind, mode });
    }
    Ok(out)
}

/// Writes the shallow workspace `ws` (at commit `commit`, file bytes in `source`)
/// into `dest`, which must not exist; it is created with mode `0o700` and keeps it
/// (the caller renames it into place and sets the root's mode). On error `dest` is
/// left for the caller to remove.
///
/// Directories and symlinks are created first, in walk order, by this thread; files
/// are fetched, verified and written by up to [`WRITERS`] threads (this one among
/// them once the directories exist), each reading a run of files' objects in one
/// batch, then writing one file at a time from its verified pieces ([`copy_out`];
/// `ws` is shared and never changed), so memory stays near one batch per thread.
/// The helpers read their first batch while the directories are made, and write
/// nothing before they exist.
pub fn materialize<S: ObjectSource + Sync + ?Sized>(
    ws: &Workspace,
    source: &S,
    commit: ObjectId,
    dest: &Path,
    progress: &ProgressBar,
) -> Result<Materialized> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    materialize_with(ws, source, commit, dest, progress, threads)
}

/// [`materialize`] on `threads` writer threads (clamped to 1..=[`WRITERS`]): the
/// files written are the same, byte for byte and mode for mode, for any count.
pub fn materialize_with<S: ObjectSource + Sync + ?Sized>(
    ws: &Workspace,
    source: &S,
    commit: ObjectId,
    dest: &Path,
    progress: &ProgressBar,
    threads: usize,
) -> Result<Materialized> {
    let walked = ws.walk();
    // Each entry's recorded size, in walk order (the plan's order too).
    let sizes: Vec<u64> = walked.iter().map(|(_, m)| m.size).collect();
    let planned = plan(commit, walked.into_iter().map(|(p, m)| (p, m.kind, m.mode)))?;
    progress.set_length(planned.len() as u64);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(dest)
        .at(dest)?;
    let (files, file_sizes): (Vec<&PlannedEntry>, Vec<u64>) = planned
        .iter()
        .zip(&sizes)
        .filter(|(e, _)| e.kind == EntryKind::File)
        .unzip();
    crate::timings::phase_with("planned", || format!("{} files to write", files.len()));
    let threads = threads.clamp(1, WRITERS).min(files.len().max(1));
    let batches = batches(&file_sizes);
    let umask = process_umask();
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    // Opened once the directories exist (`false`: making them failed). A writer reads
    // its first batch before it waits here, while the directories are made.
    let made = Gate::default();
    let write_some = || -> Result<Materialized> {
        let mut out = Materialized::default();
        while !failed.load(Ordering::Relaxed) {
            let Some(batch) = batches.get(next.fetch_add(1, Ordering::Relaxed)) else {
                break;
            };
            // The batch's content objects in one read (the store decodes each delta
            // base once for the batch and reads packed records in pack order); each
            // file then takes its own objects from it and verifies them as before.
            let bytes = file_sizes[batch.clone()].iter().sum();
            let fetched = Fetched::new(ws, source, &files[batch.clone()], bytes);
            if !made.wait() {
                break;
            }
            for e in &files[batch.clone()] {
                if failed.load(Ordering::Relaxed) {
                    break;
                }
                // A signal (`crate::interrupt`, armed by the caller) stops the
                // writing between files; the caller removes what was written.
                let r = crate::interrupt::check(crate::interrupt::NOTHING_CHECKED_OUT)
                    .and_then(|()| write_file(ws, &fetched, dest, e, umask, &mut out));
                if r.is_err() {
                    failed.store(true, Ordering::Relaxed);
                    return r.map(|()| out);
                }
                progress.inc(1);
            }
        }
        Ok(out)
    };
    // Directories and symlinks, in walk order (parents first), on this thread.
    let make = || -> Result<(Materialized, Vec<&PlannedEntry>)> {
        let opener = made.opener();
        let r = make_dirs(ws, &planned, dest, umask, progress);
        opener.open(r.is_ok());
        crate::timings::phase("directories made");
        r
    };
    let (mut done, late, results) = if threads <= 1 {
        let (done, late) = make()?;
        (done, late, vec![write_some()])
    } else {
        // This thread writes too, once it has made the directories, beside
        // `threads - 1` helpers started off its core (see `crate::cpus`): left to the
        // kernel, a helper could wait behind it.
        std::thread::scope(|s| {
            let beside = crate::cpus::Beside::here();
            let handles: Vec<_> = (1..threads)
                .map(|_| {
                    s.spawn(move || {
                        beside.leave();
                        write_some()
                    })
                })
                .collect();
            beside.yield_to();
            let dirs = make();
            let mut results = Vec::new();
            if dirs.is_ok() {
                results.push(write_some());
            }
            results.extend(handles.into_iter().map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(CliError::bad_path(
                        dest,
                        "a checkout writer thread panicked",
                    ))
                })
            }));
            dirs.map(|(done, late)| (done, late, results))
        })?
    };
    crate::timings::phase("files written");
    for r in results {
        let part = r?;
        done.files += part.files;
        done.bytes += part.bytes;
        done.entries.extend(part.entries);
    }
    for e in late.iter().rev() {
        let target = e.under(dest);
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(e.mode & 0o777))
            .at(&target)?;
    }
    Ok(done)
}

/// Makes the directories and symlinks of `planned` below `dest`, in walk order.
/// A directory is created with its recorded mode when that leaves its owner every
/// right (to fill it) and the umask takes nothing from it; the others are created
/// `0o700` and returned, parents first, for their modes to be set once they are
/// filled. (`dest` itself is private: nobody else can reach them meanwhile.)
fn make_dirs<'p>(
    ws: &Workspace,
    planned: &'p [PlannedEntry],
    dest: &Path,
    umask: Option<u32>,
    progress: &ProgressBar,
) -> Result<(Materialized, Vec<&'p PlannedEntry>)> {
    let mut done = Materialized::default();
    let mut late = Vec::new();
    for e in planned {
        let target = e.under(dest);
        match e.kind {
            EntryKind::Dir => {
                if !make_dir(&target, e.mode, umask)? {
                    late.push(e);
                }
                done.dirs += 1;
                done.entries.push((e.path.clone(), e.kind, None));
                progress.inc(1);
            }
            EntryKind::Symlink => {
                let link = ws.read_link(&e.path)?.to_string();
                std::os::unix::fs::symlink(&link, &target).at(&target)?;
                done.symlinks += 1;
                done.entries.push((e.path.clone(), e.kind, None));
                progress.inc(1);
            }
            EntryKind::File => {}
        }
    }
    Ok((done, late))
}

/// Creates the directory `target` (which must not exist) with the recorded `mode`
/// (masked to `0o777`) when that leaves its owner every right (to fill it) and the
/// process's `umask` takes none of its bits; otherwise `0o700`, for the caller to
/// set the mode once the directory is filled. Whether the mode is set.
pub(crate) fn make_dir(target: &Path, mode: u32, umask: Option<u32>) -> Result<bool> {
    let mode = mode & 0o777;
    let now = mode & 0o700 == 0o700 && umask.is_some_and(|u| mode & u == 0);
    std::fs::DirBuilder::new()
        .mode(if now { mode } else { 0o700 })
        .create(target)
        .at(target)?;
    Ok(now)
}

/// A one-way gate the writers wait at until the directories are made: opened once,
/// with whether they were.
#[derive(Default)]
struct Gate {
    state: std::sync::Mutex<Option<bool>>,
    opened: std::sync::Condvar,
}

/// Opens its [`Gate`] with `false` when dropped unopened (a panic while the
/// directories are made): no writer waits for ever, and the scope can end.
struct Opener<'g>(&'g Gate, bool);

impl Opener<'_> {
    fn open(mut self, ok: bool) {
        self.0.open(ok);
        self.1 = true;
    }
}

impl Drop for Opener<'_> {
    fn drop(&mut self) {
        if !self.1 {
            self.0.open(false);
        }
    }
}

impl Gate {
    fn opener(&self) -> Opener<'_> {
        Opener(self, false)
    }

    fn open(&self, ok: bool) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        *state = Some(ok);
        self.opened.notify_all();
    }

    /// Whether the directories were made, once they are (or failed).
    fn wait(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            match *state {
                Some(ok) => return ok,
                None => state = self.opened.wait(state).unwrap_or_else(|p| p.into_inner()),
            }
        }
    }
}

/// Threads writing files in [`materialize`] (at most).
pub const WRITERS: usize = 4;

/// Files larger than this are read in a batch of their own, their chunks a window at
/// a time ([`Workspace::content_pieces`], as every file is written): a checkout's
/// memory does not grow with its largest file.
pub const STREAM_MIN: u64 = BATCH_BYTES;

/// Files read in one batch at most.
pub const BATCH_FILES: usize = 128;

/// Recorded bytes read in one batch at most: with [`WRITERS`] threads, a checkout
/// holds at most this much fetched and not yet written per thread (plus the file
/// being written).
pub const BATCH_BYTES: u64 = 2 << 20;

/// Files of `sizes` (recorded, in walk order) cut into runs read with one batched fetch each: at most
/// [`BATCH_FILES`] files and [`BATCH_BYTES`] recorded bytes a run, a file larger
/// than that alone in its own (its chunks are fetched a window at a time by the
/// core). Runs are in walk order, so files of one directory, whose delta bases are
/// often the same object, share a run.
fn batches(sizes: &[u64]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, &size) in sizes.iter().enumerate() {
        if i > start && (i - start == BATCH_FILES || bytes.saturating_add(size) > BATCH_BYTES) {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes = bytes.saturating_add(size);
    }
    if start < sizes.len() {
        out.push(start..sizes.len());
    }
    out
}

/// The content objects of a batch of files (each file's single chunk or manifest
/// root), read from the store in one [`ObjectSource::get_many`] and handed to the
/// files' reads by value: a file's read takes its objects out (no copy; an object
/// two files of the batch share is copied for all but its last use), and asks the
/// store for anything else (a manifest's chunks, an object the batch lacks). Nothing
/// is trusted: `content_pieces` re-hashes every object as if it came from the store.
/// A batch whose read fails holds nothing, so each file's load meets (and reports,
/// with its path) the error on its own.
struct Fetched<'s, S: ?Sized> {
    held: std::sync::Mutex<HashMap<ObjectId, (Vec<u8>, usize)>>,
    rest: &'s S,
}

impl<'s, S: ObjectSource + ?Sized> Fetched<'s, S> {
    /// Reads the content objects of `files` (whose recorded sizes add up to
    /// `bytes`) in one batch and, when they fit in [`BATCH_BYTES`], the chunks of
    /// the one-level manifests among them in a second: a manifest's file then takes
    /// its chunks from the batch instead of reading them from the store on its own
    /// (a read, a transaction and a walk along a pack's overflow pages per file).
    fn new(ws: &Workspace, rest: &'s S, files: &[&PlannedEntry], bytes: u64) -> Self {
        let mut uses: HashMap<ObjectId, usize> = HashMap::new();
        let mut ids = Vec::new();
        let mut manifests: Vec<ObjectId> = Vec::new();
        for e in files {
            if ws.is_loaded(&e.path) {
                continue;
            }
            if let Some((id, kind)) = ws.file_content_object(&e.path) {
                let n = uses.entry(id).or_default();
                if *n == 0 {
                    ids.push(id);
                    if kind == ObjectKind::Manifest {
                        manifests.push(id);
                    }
                }
                *n += 1;
            }
        }
        let mut held = HashMap::new();
        hold(rest, ids, &uses, &mut held);
        if bytes <= BATCH_BYTES && !manifests.is_empty() {
            // Chunk ids as the manifests list them (each root verified first; one
            // of another format version or with index nodes is left to the load).
            let mut chunk_uses: HashMap<ObjectId, usize> = HashMap::new();
            let mut chunks = Vec::new();
            for root in &manifests {
                let Some((stored, n)) = held.get(root) else {
                    continue;
                };
                let leaf = snapgraph::object::verify(root, stored)
                    .ok()
                    .filter(|&(kind, version)| {
                        kind == ObjectKind::Manifest && version == snapgraph::FORMAT_VERSION
                    })
                    .and_then(|_| Manifest::decode(root, stored.get(2..)?).ok());
                if let Some(Manifest::Leaf(list)) = leaf {
                    for c in list {
                        let m = chunk_uses.entry(c.id).or_default();
                        if *m == 0 && !held.contains_key(&c.id) {
                            chunks.push(c.id);
                        }
                        *m += n;
                    }
                }
            }
            hold(rest, chunks, &chunk_uses, &mut held);
        }
        Self {
            held: std::sync::Mutex::new(held),
            rest,
        }
    }

    /// The held bytes of `id`, taken out at their last use.
    fn take(&self, id: &ObjectId) -> Option<Vec<u8>> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let (bytes, left) = held.get_mut(id)?;
        if *left > 1 {
            *left -= 1;
            return Some(bytes.clone());
        }
        held.remove(id).map(|(b, _)| b)
    }
}

/// Reads `ids` from `source` in one batch into `held`, each with its count of uses
/// from `uses`; a failed read holds nothing (each load then meets the error itself).
fn hold<S: ObjectSource + ?Sized>(
    source: &S,
    ids: Vec<ObjectId>,
    uses: &HashMap<ObjectId, usize>,
    held: &mut HashMap<ObjectId, (Vec<u8>, usize)>,
) {
    if ids.is_empty() {
        return;
    }
    if let Ok(got) = source.get_many(&ids) {
        if got.len() == ids.len() {
            for (id, bytes) in ids.into_iter().zip(got) {
                if let Some(b) = bytes {
                    held.insert(id, (b.into_owned(), uses[&id]));
                }
            }
        }
    }
}

impl<S: ObjectSource + ?Sized> ObjectSource for Fetched<'_, S> {
    fn get(&self, id: &ObjectId) -> std::result::Result<Option<Cow<'_, [u8]>>, BoxError> {
        match self.take(id) {
            Some(b) => Ok(Some(Cow::Owned(b))),
            None => self.rest.get(id),
        }
    }
    fn contains(&self, id: &ObjectId) -> std::result::Result<bool, BoxError> {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if held.contains_key(id) {
            return Ok(true);
        }
        drop(held);
        self.rest.contains(id)
    }
    fn get_many(
        &self,
        ids: &[ObjectId],
    ) -> std::result::Result<Vec<Option<Cow<'_, [u8]>>>, BoxError> {
        let mut out: Vec<Option<Cow<'_, [u8]>>> = Vec::with_capacity(ids.len());
        let mut absent = Vec::new();
        for id in ids {
            let b = self.take(id);
            if b.is_none() {
                absent.push(*id);
            }
            out.push(b.map(Cow::Owned));
        }
        if !absent.is_empty() {
            let mut read = self.rest.get_many(&absent)?.into_iter();
            for slot in out.iter_mut().filter(|o| o.is_none()) {
                *slot = read.next().flatten();
            }
        }
        Ok(out)
    }
    fn will_read(&self, ids: &[ObjectId]) {
        self.rest.will_read(ids)
    }
}

/// The process's umask, read from `/proc/self/status` (Linux 4.7 and later);
/// `None` when it cannot be read.
pub(crate) fn process_umask() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
    u32::from_str_radix(line.trim(), 8).ok()
}

/// What [`copy_out`] wrote.
#[derive(Debug)]
pub struct Copied {
    /// The file's length.
    pub bytes: u64,
    /// Its bytes, when they came as one piece of at most
    /// [`INLINE_MAX`](snapgraph::limits::INLINE_MAX) (content inline in its tree entry,
    /// or one small chunk).
    pub small: Option<Vec<u8>>,
}

/// Pieces written with one `writev` once they hold this many bytes (and at the end).
pub const WRITE_RUN: usize = 1 << 20;

/// Writes the bytes of the file at `path` into `file` (`at` names it in errors), in
/// order: [`Workspace::content_pieces`], each piece verified as it comes (a
/// manifest's chunks a window at a time, so a file is never whole in memory; a
/// one-chunk or inline file is one piece), gathered into one `writev` per
/// [`WRITE_RUN`] bytes (a `write` per chunk cost a fifth more CPU on a tree of
/// large files). `file` may hold part of the file when an error (a bad chunk, a
/// manifest not in canonical form, found after the last piece) comes back, so the
/// caller writes somewhere it removes on error. Nothing in `ws` changes: no file's
/// bytes are loaded into it (which cost a path parse and a copy-on-write change of
/// the tree per file, then another to free them).
pub fn copy_out<S: ObjectSource + ?Sized>(
    ws: &Workspace,
    path: &str,
    source: &S,
    file: &mut std::fs::File,
    at: &Path,
) -> Result<Copied> {
    let mut copied = Copied {
        bytes: 0,
        small: None,
    };
    let mut pending: Vec<Cow<'_, [u8]>> = Vec::new();
    let mut pending_bytes = 0usize;
    for (n, piece) in ws.content_pieces(path, source)?.enumerate() {
        let piece = piece?;
        copied.small =
            (n == 0 && piece.len() <= snapgraph::limits::INLINE_MAX).then(|| piece.to_vec());
        copied.bytes += piece.len() as u64;
        pending_bytes += piece.len();
        pending.push(piece);
        if pending_bytes >= WRITE_RUN {
            write_pieces(file, &pending).at(at)?;
            pending.clear();
            pending_bytes = 0;
        }
    }
    write_pieces(file, &pending).at(at)?;
    Ok(copied)
}

/// Writes `pieces` in order, as few `writev` calls as the kernel takes them in.
fn write_pieces(file: &mut std::fs::File, pieces: &[Cow<'_, [u8]>]) -> std::io::Result<()> {
    use std::io::IoSlice;
    let mut slices: Vec<IoSlice<'_>> = pieces.iter().map(|p| IoSlice::new(p)).collect();
    let mut left = &mut slices[..];
    IoSlice::advance_slices(&mut left, 0);
    while !left.is_empty() {
        match file.write_vectored(left) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut left, n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn write_file<S: ObjectSource + ?Sized>(
    ws: &Workspace,
    source: &S,
    dest: &Path,
    e: &PlannedEntry,
    umask: Option<u32>,
    done: &mut Materialized,
) -> Result<()> {
    let target = e.under(dest);
    // Created with its final mode (the staging directory is private, so no one
    // sees a file before it is written); chmod'ed only where the umask would
    // take bits from it. One open, one write, one close for most files.
    let mode = e.mode & 0o777;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&target)
        .at(&target)?;
    // The digest the index records: the content object's id, or for content with
    // none (inline in its tree entry) the bytes themselves, handed over as one piece.
    let object = ws.file_content_object(&e.path);
    let copied = copy_out(ws, &e.path, source, &mut f, &target)?;
    let written = copied.bytes;
    let digest = match object {
        Some((id, ObjectKind::Chunk)) => Some(crate::index::Digest::Chunk(id)),
        Some((id, _)) => Some(crate::index::Digest::Manifest(id)),
        None => copied.small.map(crate::index::Digest::Inline),
    }
    // A mode the scan would record otherwise (not 0644 or 0755) leaves the
    // digest unknown: the index is then not complete for this commit.
    .filter(|_| crate::index::file_mode(e.mode) == e.mode);
    if umask.is_none_or(|u| mode & u != 0) {
        f.set_permissions(std::fs::Permissions::from_mode(mode))
            .at(&target)?;
    }
    done.files += 1;
    done.bytes += written;
    done.entries.push((e.path.clone(), e.kind, digest));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> ObjectId {
        ObjectId::from_bytes([7; 32])
    }

    /// Writers waiting at the gate learn whether the directories were made; an
    /// opener dropped unopened (a panic while they were made) opens it with `false`,
    /// so that no writer waits for ever.
    #[test]
    fn the_gate_tells_every_waiter_and_never_stays_shut() {
        for ok in [true, false] {
            let gate = Gate::default();
            let seen = std::thread::scope(|s| {
                let waiters: Vec<_> = (0..3).map(|_| s.spawn(|| gate.wait())).collect();
                gate.opener().open(ok);
                waiters
                    .into_iter()
                    .map(|w| w.join().unwrap())
                    .collect::<Vec<_>>()
            });
            assert_eq!(seen, vec![ok; 3]);
            assert_eq!(gate.wait(), ok, "a late waiter");
        }
        let gate = Gate::default();
        let waited = std::thread::scope(|s| {
            let waiter = s.spawn(|| gate.wait());
            drop(gate.opener());
            waiter.join().unwrap()
        });
        assert!(!waited);
    }

    fn err_of(entries: Vec<(&str, EntryKind)>) -> String {
        plan(
            id(),
            entries.into_iter().map(|(p, k)| (p.to_string(), k, 0o644)),
        )
        .unwrap_err()
        .to_string()
    }

    #[test]
    fn refuses_traversal_and_symlink_escape() {
        let e = err_of(vec![("/../etc/passwd", EntryKind::File)]);
        assert!(
            e.contains("/../etc/passwd") && e.contains("traversal"),
            "{e}"
        );
        let e = err_of(vec![("/a/./b", EntryKind::File)]);
        assert!(e.contains("traversal"), "{e}");
        let e = err_of(vec![
            ("/link", EntryKind::Symlink),
            ("/link/x", EntryKind::File),
        ]);
        assert!(e.contains("/link/x") && e.contains("symlink /link"), "{e}");
        let e = err_of(vec![("/a/b", EntryKind::File)]);
        assert!(e.contains("parent /a"), "{e}");
        // Deeper below a symlink, with no directory between: the parent is not one.
        let e = err_of(vec![
            ("/link", EntryKind::Symlink),
            ("/link/x/y", EntryKind::File),
        ]);
        assert!(
            e.contains("/link/x/y") && e.contains("parent /link/x"),
            "{e}"
        );
        // A file's name as a parent.
        let e = err_of(vec![("/f", EntryKind::File), ("/f/x", EntryKind::File)]);
        assert!(e.contains("parent /f is not a directory"), "{e}");
        let e = err_of(vec![("/a", EntryKind::File), ("/a", EntryKind::File)]);
        assert!(e.contains("twice"), "{e}");
        let e = err_of(vec![("a", EntryKind::File)]);
        assert!(e.contains("absolute"), "{e}");
        let e = err_of(vec![("/a//b", EntryKind::File)]);
        assert!(e.contains("empty"), "{e}");
        for name in [
            ".snapgraph",
            ".SnapGraph",
            ".snapgraph.",
            ".snapgraph ",
            "SNAPGR~1",
            ".snap\u{200c}graph",
            ".snapgraph::$INDEX_ALLOCATION",
        ] {
            let e = err_of(vec![(&format!("/{name}"), EntryKind::Dir)]);
            assert!(e.contains("reserved"), "{name:?}: {e}");
        }
        assert!(!is_reserved_name(".snapgraphignore"));
        assert!(!is_reserved_name("snapgraph"));
    }

    #[test]
    fn pieces_are_written_whole_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut file = std::fs::File::create(&path).unwrap();
        // Empty pieces among them, more than one `writev` takes at once (1,024).
        let pieces: Vec<Cow<'_, [u8]>> = (0..3000u32)
            .map(|i| Cow::Owned(vec![(i % 251) as u8; (i % 7) as usize]))
            .collect();
        write_pieces(&mut file, &pieces).unwrap();
        write_pieces(&mut file, &[]).unwrap();
        drop(file);
        let expected: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    #[test]
    fn accepts_a_normal_tree() {
        let p = plan(
            id(),
            [
                ("/d".to_string(), EntryKind::Dir, 0o755),
                ("/d/f".to_string(), EntryKind::File, 0o644),
                ("/l".to_string(), EntryKind::Symlink, 0o777),
            ],
        )
        .unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[1].relative(), "d/f");
        assert_eq!(p[1].under(Path::new("/x")), Path::new("/x/d/f"));
    }
}
