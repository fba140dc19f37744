//! The directory adapter: objects, refs and reflogs as plain files under one root.
//!
//! ```text
//! root/objects/ab/cdef…     one file per object: the first byte of the hex id names
//!                           the fan-out directory, the other 62 hex digits the file;
//!                           the content is `codec::encode` of the stored bytes
//! root/refs/<name>          one file per ref, the ref name as a relative path
//!                           (`heads/main`); the content is the hex id and "\n"
//! root/logs/<name with / as %>   the ref's reflog, one line per move (see below)
//! root/tmp/                 temporary files, renamed into place when complete
//! root/lock                 locked (`flock`) exclusively by `update_refs`, shared by
//!                           ref readers: several processes may share one root
//! root/journal              present only while an `update_refs` batch is applied
//! root/schema               "2" and a line feed: the layout version (absent: 1)
//! ```
//!
//! Schema 2 adds delta records (`codec`, tag 2) to schema 1 and nothing else, so a
//! schema-1 root is upgraded in place when opened: `schema` is written before any
//! delta can be, and older builds (which do not know the file) are the only ones
//! that could misread the store.
//!
//! # Objects
//!
//! An object is written to a unique file in `tmp/`, fsynced, and renamed into place
//! (a rename over an existing file is harmless: same id, same content); when a call
//! has renamed its objects it fsyncs the fan-out directories it wrote into and
//! `objects/` itself, so everything `put_many` wrote is durable when it returns. A
//! reader never sees a partial object: a name under `objects/` only ever points to
//! a complete, fsynced file. A crash during a call keeps any subset of that call's
//! objects, each of them complete; on journaling file systems (ext4, XFS) the renames
//! reach the disk in the order made, so in practice a prefix. `for_each_id` lists
//! only files whose names make a valid lowercase hex id; anything else (temporary
//! files, editor droppings) is ignored. Temporary files older than a day (left by a
//! crash) are removed when a store is opened.
//!
//! # Refs
//!
//! Ref names are checked by [`validate_ref_name`] before any path is built, so they
//! cannot leave `refs/` or `logs/`. Because refs are paths, a ref cannot be created
//! when a prefix of its name is a ref (`heads/a` exists, `heads/a/b` is asked) or
//! when refs exist under its name; such an update is refused with
//! [`StoreError::InvalidRefName`] before anything changes (the rule git has). Reflogs
//! are flat files (`/` written as `%`, which ref names cannot contain) so that the
//! reflog kept after a ref is deleted never blocks a later name.
//!
//! A reflog line is `old new message`: `old` and `new` are 64 lowercase hex digits, or
//! `-` for none (a created or deleted ref); the message is escaped (`\` as `\\`, a
//! line feed as `\n`, a carriage return as `\r`), so one line is one entry. A last line
//! without its line feed (a torn append) is ignored by readers and cut off by the
//! next append.
//!
//! `update_refs` takes the exclusive lock, then: (1) replays a leftover journal if a
//! crash left one, (2) checks the batch ([`apply_updates`]), (3) writes the changing
//! updates and the message to `journal` (temporary file, fsync, rename, fsync of the
//! root), (4) writes each new ref value (temporary file, fsync, rename) or removes the
//! ref file, fsyncing the directories touched, (5) appends and fsyncs each reflog
//! entry, (6) removes the journal and fsyncs the root. A crash anywhere leaves either
//! nothing (before the journal's rename) or a journal that the next store operation on
//! refs rolls forward: refs not yet at their new value are set (only if they still
//! hold the expected one), reflog entries not yet appended are appended. So a batch is
//! atomic across crashes, a move that returned is durable, and the reflog has exactly
//! one entry per move, in order. Readers (`get_ref`, `list_refs`, `reflog`) hold the
//! shared lock, so they see a batch entirely or not at all. One consequence: an I/O
//! error after step (3) is returned to the caller, yet the batch is completed by the
//! next operation on refs (it passed its checks and was journaled), like a database
//! commit whose acknowledgement was lost; a caller that retries after such an error
//! gets a [`StoreError::RefConflict`] showing the value it had asked for.
//!
//! File locks are `flock`-style (`std::fs::File::lock`): advisory, per open file, and
//! reliable on local file systems; network file systems may not honour them.

use std::collections::{BTreeSet, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use snapgraph::ObjectId;

use crate::codec::{self, Compression};
use crate::error::StoreError;
use crate::refs::{apply_updates, check_batch};
use crate::store::{validate_ref_name, ObjectStore, ReadCheck, RefStore, RefUpdate, ReflogEntry};

/// Temporary files older than this are removed when a store is opened.
const STALE_TMP: Duration = Duration::from_secs(24 * 60 * 60);

/// How many threads write the objects of a large `put_many` batch.
const WRITERS: usize = 8;

/// The layout version this build writes and reads.
pub const SCHEMA_VERSION: u32 = 2;

/// The first line of a journal.
const JOURNAL_HEADER: &str = "snapgraph refs journal 1";

/// Options of a [`DirStore`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirOptions {
    /// How objects are compressed at rest (zstd level 1 by default).
    pub compression: Compression,
}

/// A file of the store that does not have the shape the layout promises. It comes as
/// the source of a [`StoreError::Backend`] whose context names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DirError {
    /// A ref file, reflog line or journal that cannot be read.
    #[error("{} is malformed: {what}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong (with the line number for a reflog).
        what: String,
    },
    /// The root was written by a newer version of this adapter.
    #[error("{} has snapgraph schema version {found}; this build knows up to {supported}", path.display())]
    NewerSchema {
        /// The `schema` file.
        path: PathBuf,
        /// The version it records.
        found: u32,
        /// The newest version this build knows.
        supported: u32,
    },
}

/// A store in a directory (see the module documentation for the layout).
#[derive(Debug)]
pub struct DirStore {
    root: PathBuf,
    objects: PathBuf,
    refs: PathBuf,
    logs: PathBuf,
    tmp: PathBuf,
    lock_path: PathBuf,
    journal: PathBuf,
    compression: Compression,
}

/// A backend error naming `path` and the operation.
fn io_err(op: &str, path: &Path, e: io::Error) -> StoreError {
    StoreError::backend(format!("dir {op} {}", path.display()), e)
}

fn malformed(path: &Path, what: impl Into<String>) -> StoreError {
    StoreError::backend(
        format!("dir reading {}", path.display()),
        DirError::Malformed {
            path: path.to_path_buf(),
            what: what.into(),
        },
    )
}

/// Makes the directory's entries (creations, renames, removals) durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        // Directories cannot be opened for syncing here; renames are made durable by
        // the file system's own journal.
        let _ = dir;
        Ok(())
    }
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Whether an error means "nothing there" for a path that is looked up.
fn is_absent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory | io::ErrorKind::IsADirectory
    )
}

fn show(id: Option<ObjectId>) -> String {
    id.map_or_else(|| "-".to_string(), |id| id.to_hex())
}

fn parse_opt_id(s: &str) -> Option<Option<ObjectId>> {
    if s == "-" {
        return Some(None);
    }
    if s.len() == 64 && is_lower_hex(s) {
        return ObjectId::from_hex(s).ok().map(Some);
    }
    None
}

fn escape(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for c in message.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next()? {
                '\\' => out.push('\\'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

fn log_line(old: Option<ObjectId>, new: Option<ObjectId>, message: &str) -> String {
    format!("{} {} {}\n", show(old), show(new), escape(message))
}

/// The complete lines of a file's text: a last line without its line feed (a torn
/// append) is left out.
fn complete_lines(text: &str) -> impl Iterator<Item = &str> {
    let end = text.rfind('\n').map_or(0, |i| i + 1);
    text[..end].lines()
}

/// Parses a reflog line; `None` if malformed.
fn parse_log_line(line: &str) -> Option<ReflogEntry> {
    let mut parts = line.splitn(3, ' ');
    let old = parse_opt_id(parts.next()?)?;
    let new = parse_opt_id(parts.next()?)?;
    let message = unescape(parts.next()?)?;
    Some(ReflogEntry { old, new, message })
}

/// The updates of one `update_refs` batch, as its journal records them.
struct Journal {
    message: String,
    updates: Vec<RefUpdate>,
}

impl Journal {
    fn encode(&self) -> String {
        let mut out = format!("{JOURNAL_HEADER}\n{}\n", escape(&self.message));
        for u in &self.updates {
            out.push_str(&format!(
                "{} {} {}\n",
                u.name,
                show(u.expected),
                show(u.new)
            ));
        }
        out
    }

    fn decode(text: &str) -> Option<Self> {
        if !text.ends_with('\n') {
            return None;
        }
        let mut lines = text.lines();
        if lines.next()? != JOURNAL_HEADER {
            return None;
        }
        let message = unescape(lines.next()?)?;
        let mut updates = Vec::new();
        for line in lines {
            let mut parts = line.split(' ');
            let name = parts.next()?;
            validate_ref_name(name).ok()?;
            let expected = parse_opt_id(parts.next()?)?;
            let new = parse_opt_id(parts.next()?)?;
            if parts.next().is_some() {
                return None;
            }
            updates.push(RefUpdate::new(name, expected, new));
        }
        Some(Self { message, updates })
    }
}

/// Takes the lock on `root/lock` (released when the file is dropped).
// `File::lock` and `File::lock_shared` are stable since Rust 1.89 (the workspace's
// rust-version).
fn take_lock(path: &Path, exclusive: bool) -> Result<File, StoreError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| io_err("opening lock", path, e))?;
    let locked = if exclusive {
        file.lock()
    } else {
        file.lock_shared()
    };
    locked.map_err(|e| io_err("locking", path, e))?;
    Ok(file)
}

impl DirStore {
    /// Opens (creating if needed) the store at `root`, with default options.
    pub fn open(root: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(root, DirOptions::default())
    }

    /// Opens (creating if needed) the store at `root`.
    ///
    /// Fails with a [`StoreError::Backend`] naming the path if a directory or the lock
    /// file cannot be created (a file in the way, no permission).
    pub fn open_with(root: impl AsRef<Path>, options: DirOptions) -> Result<Self, StoreError> {
        let root = root.as_ref().to_path_buf();
        let store = Self {
            objects: root.join("objects"),
            refs: root.join("refs"),
            logs: root.join("logs"),
            tmp: root.join("tmp"),
            lock_path: root.join("lock"),
            journal: root.join("journal"),
            root,
            compression: options.compression,
        };
        let mut created = false;
        for dir in [
            &store.root,
            &store.objects,
            &store.refs,
            &store.logs,
            &store.tmp,
        ] {
            match fs::metadata(dir) {
                Ok(m) if m.is_dir() => {}
                _ => {
                    fs::create_dir_all(dir).map_err(|e| io_err("creating", dir, e))?;
                    created = true;
                }
            }
        }
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&store.lock_path)
            .map_err(|e| io_err("creating", &store.lock_path, e))?;
        if store.check_schema()? {
            created = true;
        }
        if created {
            sync_dir(&store.root).map_err(|e| io_err("syncing", &store.root, e))?;
        }
        store.remove_stale_tmp();
        Ok(store)
    }

    /// Refuses a newer layout; writes `schema` into a new or schema-1 root (true when
    /// it did, so the caller fsyncs the root).
    fn check_schema(&self) -> Result<bool, StoreError> {
        let path = self.root.join("schema");
        match fs::read_to_string(&path) {
            Ok(text) => {
                let found: u32 = text.trim_end_matches('\n').parse().map_err(|_| {
                    StoreError::backend(
                        format!("dir open {}", path.display()),
                        DirError::Malformed {
                            path: path.clone(),
                            what: "not a version number".into(),
                        },
                    )
                })?;
                if found > SCHEMA_VERSION {
                    return Err(StoreError::backend(
                        format!("dir open {}", path.display()),
                        DirError::NewerSchema {
                            path,
                            found,
                            supported: SCHEMA_VERSION,
                        },
                    ));
                }
                Ok(false)
            }
            Err(e) if is_absent(&e) => {
                self.write_atomic(&path, format!("{SCHEMA_VERSION}\n").as_bytes())?;
                Ok(true)
            }
            Err(e) => Err(io_err("reading", &path, e)),
        }
    }

    /// The records of `ids` as files hold them (`None`: absent).
    fn records(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        ids.iter()
            .map(|id| {
                let (_, path) = self.object_paths(id);
                match fs::read(&path) {
                    Ok(record) => Ok(Some(record)),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(io_err(&format!("reading object {id} at"), &path, e)),
                }
            })
            .collect()
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Best effort: removes temporary files a crash left behind long ago.
    fn remove_stale_tmp(&self) {
        let Ok(entries) = fs::read_dir(&self.tmp) else {
            return;
        };
        let now = SystemTime::now();
        for entry in entries.flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > STALE_TMP);
            if old {
                let _ = fs::remove_file(entry.path());
            }
        }
    }

    fn object_paths(&self, id: &ObjectId) -> (PathBuf, PathBuf) {
        let hex = id.to_hex();
        let dir = self.objects.join(&hex[..2]);
        let file = dir.join(&hex[2..]);
        (dir, file)
    }

    fn ref_path(&self, name: &str) -> PathBuf {
        self.refs.join(name)
    }

    fn log_path(&self, name: &str) -> PathBuf {
        self.logs.join(name.replace('/', "%"))
    }

    /// Writes `bytes` to a new unique file in `tmp/` and fsyncs it; returns its path.
    fn write_temp(&self, bytes: &[u8]) -> Result<PathBuf, StoreError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let pid = std::process::id();
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = self.tmp.join(format!("{pid}-{n}.tmp"));
            let mut file = match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err("creating", &path, e)),
            };
            let written = file.write_all(bytes).and_then(|()| file.sync_all());
            if let Err(e) = written {
                drop(file);
                let _ = fs::remove_file(&path);
                return Err(io_err("writing", &path, e));
            }
            return Ok(path);
        }
    }

    /// Encodes and writes each object to a fsynced temporary file, on several threads
    /// for large batches (fsyncs of different files overlap: the file system commits
    /// them together). One answer per object, in order.
    fn write_temps(
        &self,
        todo: &[(ObjectId, &[u8], Option<ObjectId>)],
    ) -> Vec<Result<PathBuf, StoreError>> {
        let one = |(id, bytes, base): &(ObjectId, &[u8], Option<ObjectId>)| {
            let record = match base {
                None => codec::encode(bytes, self.compression),
                Some(_) => {
                    codec::encode_many(&[(*id, *bytes)], &[*base], self.compression, &mut |ids| {
                        self.records(ids)
                    })?
                    .pop()
                    .unwrap_or_default()
                }
            };
            self.write_temp(&record)
        };
        if todo.len() < 2 * WRITERS {
            return todo.iter().map(one).collect();
        }
        let per = todo.len().div_ceil(WRITERS);
        std::thread::scope(|s| {
            let chunks: Vec<_> = todo
                .chunks(per)
                .map(|chunk| {
                    let handle = std::thread::Builder::new()
                        .name("snapgraph-dir-writer".into())
                        .spawn_scoped(s, move || chunk.iter().map(one).collect::<Vec<_>>());
                    (chunk, handle)
                })
                .collect();
            let mut out = Vec::with_capacity(todo.len());
            for (chunk, handle) in chunks {
                match handle {
                    Ok(handle) => match handle.join() {
                        Ok(results) => out.extend(results),
                        Err(_) => out.extend(chunk.iter().map(|(id, _, _)| {
                            Err(StoreError::backend(
                                format!("dir put_many of object {id} in {}", self.root.display()),
                                "writer thread panicked",
                            ))
                        })),
                    },
                    // No thread to be had: write this chunk here.
                    Err(_) => out.extend(chunk.iter().map(one)),
                }
            }
            out
        })
    }

    /// Writes `bytes` to `dest` atomically (temporary file, fsync, rename). The caller
    /// fsyncs `dest`'s directory.
    fn write_atomic(&self, dest: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let tmp = self.write_temp(bytes)?;
        fs::rename(&tmp, dest).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            io_err("renaming into", dest, e)
        })
    }

    /// Creates the directories from `base` down to `dir` (which is under `base`),
    /// recording in `to_sync` each directory that got a new entry.
    fn create_dirs(
        base: &Path,
        dir: &Path,
        to_sync: &mut BTreeSet<PathBuf>,
    ) -> Result<(), StoreError> {
        let Ok(rel) = dir.strip_prefix(base) else {
            return Ok(());
        };
        let mut at = base.to_path_buf();
        for component in rel.components() {
            let parent = at.clone();
            at.push(component);
            match fs::create_dir(&at) {
                Ok(()) => {
                    to_sync.insert(parent);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_err("creating", &at, e)),
            }
        }
        Ok(())
    }

    fn sync_dirs(dirs: &BTreeSet<PathBuf>) -> Result<(), StoreError> {
        for dir in dirs {
            sync_dir(dir).map_err(|e| io_err("syncing", dir, e))?;
        }
        Ok(())
    }

    // ----- refs -----

    /// Takes the lock for reading refs; rolls a leftover journal forward first (under
    /// the exclusive lock, which is then kept).
    fn lock_for_reading(&self) -> Result<File, StoreError> {
        let shared = take_lock(&self.lock_path, false)?;
        if !self.journal_exists()? {
            return Ok(shared);
        }
        drop(shared);
        let exclusive = take_lock(&self.lock_path, true)?;
        self.recover()?;
        Ok(exclusive)
    }

    fn journal_exists(&self) -> Result<bool, StoreError> {
        match fs::symlink_metadata(&self.journal) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_err("checking", &self.journal, e)),
        }
    }

    /// Rolls a leftover journal forward (caller holds the exclusive lock).
    fn recover(&self) -> Result<(), StoreError> {
        let text = match fs::read_to_string(&self.journal) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err("reading", &self.journal, e)),
        };
        let journal = Journal::decode(&text)
            .ok_or_else(|| malformed(&self.journal, "not a refs journal this build reads"))?;
        self.apply(&journal, true)?;
        self.remove_journal()
    }

    fn remove_journal(&self) -> Result<(), StoreError> {
        fs::remove_file(&self.journal).map_err(|e| io_err("removing", &self.journal, e))?;
        sync_dir(&self.root).map_err(|e| io_err("syncing", &self.root, e))
    }

    /// Reads a ref's file (caller holds a lock).
    fn read_ref(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        let path = self.ref_path(name);
        let text = match fs::read(&path) {
            Ok(t) => t,
            Err(e) if is_absent(&e) => return Ok(None),
            Err(e) => return Err(io_err("reading ref", &path, e)),
        };
        Self::parse_ref(&path, &text).map(Some)
    }

    fn parse_ref(path: &Path, text: &[u8]) -> Result<ObjectId, StoreError> {
        let hex = text.strip_suffix(b"\n").unwrap_or(text);
        std::str::from_utf8(hex)
            .ok()
            .and_then(|h| parse_opt_id(h).flatten())
            .ok_or_else(|| malformed(path, "not a 64-digit lowercase hex id and a line feed"))
    }

    /// Refuses creations whose path collides with existing refs or with each other.
    fn check_paths(&self, changing: &[&RefUpdate]) -> Result<(), StoreError> {
        let conflict = |name: &str| StoreError::InvalidRefName {
            name: name.to_string(),
            reason: "a prefix of it, or a name under it, is a ref (the directory store \
                     keeps refs as paths)",
        };
        let created: Vec<&str> = changing
            .iter()
            .filter(|u| u.expected.is_none() && u.new.is_some())
            .map(|u| u.name.as_str())
            .collect();
        for name in &created {
            let mut on_disk = true;
            for (i, _) in name.match_indices('/') {
                let prefix = &name[..i];
                if created.contains(&prefix) {
                    return Err(conflict(name));
                }
                if !on_disk {
                    continue;
                }
                let path = self.ref_path(prefix);
                match fs::symlink_metadata(&path) {
                    Ok(m) if !m.is_dir() => return Err(conflict(name)),
                    Ok(_) => {}
                    Err(e) if is_absent(&e) => on_disk = false,
                    Err(e) => return Err(io_err("checking", &path, e)),
                }
            }
            let path = self.ref_path(name);
            match fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => {
                    // Empty directories (left by a crash) are cleared; refs are kept.
                    if !Self::remove_empty_tree(&path) {
                        return Err(conflict(name));
                    }
                }
                Ok(_) => {}
                Err(e) if is_absent(&e) => {}
                Err(e) => return Err(io_err("checking", &path, e)),
            }
        }
        Ok(())
    }

    /// Removes `dir` if it holds nothing but empty directories; whether it did.
    fn remove_empty_tree(dir: &Path) -> bool {
        let Ok(entries) = fs::read_dir(dir) else {
            return false;
        };
        for entry in entries {
            let Ok(entry) = entry else {
                return false;
            };
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if !is_dir || !Self::remove_empty_tree(&entry.path()) {
                return false;
            }
        }
        fs::remove_dir(dir).is_ok()
    }

    /// Applies a journal's updates: the ref files, then the reflogs (caller holds the
    /// exclusive lock). `recovering`: the journal was left by a crash, so some of it
    /// may be applied already.
    fn apply(&self, journal: &Journal, recovering: bool) -> Result<(), StoreError> {
        let mut to_sync = BTreeSet::new();
        let mut log = Vec::with_capacity(journal.updates.len());
        for u in &journal.updates {
            let current = self.read_ref(&u.name)?;
            if current == u.new {
                log.push(u);
                continue;
            }
            if current != u.expected {
                // Only a journal whose removal was lost can get here: the batch was
                // applied and the ref moved on since. Leave it.
                continue;
            }
            log.push(u);
            let path = self.ref_path(&u.name);
            let parent = path.parent().unwrap_or(&self.refs).to_path_buf();
            match u.new {
                Some(id) => {
                    Self::create_dirs(&self.refs, &parent, &mut to_sync)?;
                    self.write_atomic(&path, format!("{}\n", id.to_hex()).as_bytes())?;
                    to_sync.insert(parent);
                }
                None => {
                    match fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(e) if is_absent(&e) => {}
                        Err(e) => return Err(io_err("removing ref", &path, e)),
                    }
                    // Remove the directories the ref leaves empty.
                    let mut dir = parent;
                    while dir != self.refs && fs::remove_dir(&dir).is_ok() {
                        dir = dir.parent().unwrap_or(&self.refs).to_path_buf();
                    }
                    to_sync.insert(dir);
                }
            }
        }
        for dir in &to_sync {
            match sync_dir(dir) {
                Ok(()) => {}
                // Emptied and removed by a later update of the batch: its parent,
                // synced too, records the removal.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("syncing", dir, e)),
            }
        }
        for u in log.iter().filter(|u| crate::refs::logged(&u.name)) {
            self.append_log(&u.name, u.expected, u.new, &journal.message, recovering)?;
        }
        Ok(())
    }

    /// Appends one entry to a ref's reflog and fsyncs it. `only_if_missing`: skip it
    /// if it is the last entry already.
    fn append_log(
        &self,
        name: &str,
        old: Option<ObjectId>,
        new: Option<ObjectId>,
        message: &str,
        only_if_missing: bool,
    ) -> Result<(), StoreError> {
        let path = self.log_path(name);
        let fail = |e| io_err("appending to reflog", &path, e);
        let existed = match fs::symlink_metadata(&path) {
            Ok(_) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(fail(e)),
        };
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(fail)?;
        let len = file.metadata().map_err(fail)?.len();
        if len > 0 {
            let mut last = [0u8];
            file.seek(SeekFrom::End(-1)).map_err(fail)?;
            file.read_exact(&mut last).map_err(fail)?;
            if last[0] != b'\n' || only_if_missing {
                let mut text = Vec::new();
                file.seek(SeekFrom::Start(0)).map_err(fail)?;
                file.read_to_end(&mut text).map_err(fail)?;
                let end = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                if end as u64 != len {
                    // A torn append: cut it off.
                    file.set_len(end as u64).map_err(fail)?;
                }
                if only_if_missing {
                    let complete = String::from_utf8_lossy(&text[..end]);
                    let last = complete_lines(&complete).last().and_then(parse_log_line);
                    if last.is_some_and(|e| e.old == old && e.new == new && e.message == message) {
                        return Ok(());
                    }
                }
            }
        }
        file.write_all(log_line(old, new, message).as_bytes())
            .map_err(fail)?;
        file.sync_all().map_err(fail)?;
        if !existed {
            sync_dir(&self.logs).map_err(|e| io_err("syncing", &self.logs, e))?;
        }
        Ok(())
    }

    /// Walks `dir` (the refs under `base`), collecting refs starting with `prefix`.
    fn walk_refs(
        &self,
        dir: &Path,
        base: &str,
        prefix: &str,
        out: &mut Vec<(String, ObjectId)>,
    ) -> Result<(), StoreError> {
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if is_absent(&e) => return Ok(()),
            Err(e) => return Err(io_err("listing refs in", dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| io_err("listing refs in", dir, e))?;
            let Some(component) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let name = format!("{base}{component}");
            if validate_ref_name(&name).is_err() {
                continue;
            }
            let path = entry.path();
            let kind = entry
                .file_type()
                .map_err(|e| io_err("listing refs in", dir, e))?;
            if kind.is_dir() {
                let sub = format!("{name}/");
                if sub.starts_with(prefix) || prefix.starts_with(&sub) {
                    self.walk_refs(&path, &sub, prefix, out)?;
                }
            } else if kind.is_file() && name.starts_with(prefix) {
                let text = match fs::read(&path) {
                    Ok(t) => t,
                    Err(e) if is_absent(&e) => continue,
                    Err(e) => return Err(io_err("reading ref", &path, e)),
                };
                out.push((name, Self::parse_ref(&path, &text)?));
            }
        }
        Ok(())
    }
}

impl ObjectStore for DirStore {
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.get_many_checked(ids, ReadCheck::Store)
    }

    fn get_many_checked(
        &self,
        ids: &[ObjectId],
        check: ReadCheck,
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let records = self.records(ids)?;
        codec::decode_many_checked(ids, records, &mut |bases| self.records(bases), check)
    }

    fn has_many(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>, StoreError> {
        let mut absent = Vec::new();
        for id in ids {
            let (_, path) = self.object_paths(id);
            match fs::symlink_metadata(&path) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => absent.push(*id),
                Err(e) => return Err(io_err(&format!("checking object {id} at"), &path, e)),
            }
        }
        Ok(absent)
    }

    fn put_many(&self, objects: &[(ObjectId, &[u8])]) -> Result<(), StoreError> {
        self.put_many_with_bases(objects, &[])
    }

    fn keeps_deltas(&self) -> bool {
        true
    }

    fn put_many_with_bases(
        &self,
        objects: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
    ) -> Result<(), StoreError> {
        // Phase 1: every new object into a complete, fsynced temporary file.
        let mut todo: Vec<(ObjectId, &[u8], Option<ObjectId>)> = Vec::new();
        let mut seen = HashSet::new();
        for (i, (id, bytes)) in objects.iter().enumerate() {
            if !seen.insert(*id) {
                continue;
            }
            let (_, path) = self.object_paths(id);
            match fs::symlink_metadata(&path) {
                Ok(_) => {}
                Err(e) if is_absent(&e) => todo.push((*id, bytes, bases.get(i).copied().flatten())),
                Err(e) => return Err(io_err(&format!("checking object {id} at"), &path, e)),
            }
        }
        let written = self.write_temps(&todo);
        let mut staged: Vec<(PathBuf, PathBuf, PathBuf)> = Vec::with_capacity(todo.len());
        let mut failed = None;
        for ((id, _, _), tmp) in todo.iter().zip(written) {
            match tmp {
                Ok(tmp) => {
                    let (dir, path) = self.object_paths(id);
                    staged.push((tmp, dir, path));
                }
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        let cleanup = |staged: &[(PathBuf, PathBuf, PathBuf)]| {
            for (tmp, _, _) in staged {
                let _ = fs::remove_file(tmp);
            }
        };
        if let Some(e) = failed {
            cleanup(&staged);
            return Err(e);
        }
        if staged.is_empty() {
            return Ok(());
        }
        // Phase 2: renames in the order given, then the directories' fsyncs.
        let mut to_sync = BTreeSet::new();
        to_sync.insert(self.objects.clone());
        for (i, (tmp, dir, path)) in staged.iter().enumerate() {
            let mut renamed = fs::rename(tmp, path);
            if renamed
                .as_ref()
                .is_err_and(|e| e.kind() == io::ErrorKind::NotFound)
            {
                match fs::create_dir(dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => {
                        cleanup(&staged[i..]);
                        return Err(io_err("creating", dir, e));
                    }
                }
                renamed = fs::rename(tmp, path);
            }
            if let Err(e) = renamed {
                cleanup(&staged[i..]);
                return Err(io_err("renaming object into", path, e));
            }
            to_sync.insert(dir.clone());
        }
        Self::sync_dirs(&to_sync)
    }

    fn delete_many(&self, ids: &[ObjectId]) -> Result<(), StoreError> {
        let mut to_sync = BTreeSet::new();
        for id in ids {
            let (dir, path) = self.object_paths(id);
            match fs::remove_file(&path) {
                Ok(()) => {
                    to_sync.insert(dir);
                }
                Err(e) if is_absent(&e) => {}
                Err(e) => return Err(io_err(&format!("deleting object {id} at"), &path, e)),
            }
        }
        Self::sync_dirs(&to_sync)
    }

    fn for_each_id(
        &self,
        f: &mut dyn FnMut(ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let fail = |dir: &Path, e| io_err("listing objects in", dir, e);
        let fans = fs::read_dir(&self.objects).map_err(|e| fail(&self.objects, e))?;
        for fan in fans {
            let fan = fan.map_err(|e| fail(&self.objects, e))?;
            let name = fan.file_name();
            let Some(high) = name.to_str().filter(|n| n.len() == 2 && is_lower_hex(n)) else {
                continue;
            };
            if !fan.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let dir = fan.path();
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if is_absent(&e) => continue,
                Err(e) => return Err(fail(&dir, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| fail(&dir, e))?;
                let name = entry.file_name();
                let Some(low) = name.to_str().filter(|n| n.len() == 62 && is_lower_hex(n)) else {
                    continue;
                };
                if !entry.file_type().is_ok_and(|t| t.is_file()) {
                    continue;
                }
                if let Ok(id) = ObjectId::from_hex(format!("{high}{low}")) {
                    f(id)?;
                }
            }
        }
        Ok(())
    }

    fn for_each_delta(
        &self,
        f: &mut dyn FnMut(ObjectId, ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        // Each object file's first 34 bytes (tag, depth, base).
        let mut ids = Vec::new();
        self.for_each_id(&mut |id| {
            ids.push(id);
            Ok(())
        })?;
        let mut head = [0u8; 34];
        for id in ids {
            let (_, path) = self.object_paths(&id);
            let mut file = match File::open(&path) {
                Ok(f) => f,
                Err(e) if is_absent(&e) => continue,
                Err(e) => return Err(io_err(&format!("reading object {id} at"), &path, e)),
            };
            let mut got = 0;
            while got < head.len() {
                match file.read(&mut head[got..]) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(io_err(&format!("reading object {id} at"), &path, e)),
                }
            }
            if let Some((base, _)) = codec::delta_base(&head[..got]) {
                f(id, base)?;
            }
        }
        Ok(())
    }
}

impl RefStore for DirStore {
    fn get_ref(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        validate_ref_name(name)?;
        let _lock = self.lock_for_reading()?;
        self.read_ref(name)
    }

    fn update_refs(&self, updates: &[RefUpdate], message: &str) -> Result<(), StoreError> {
        check_batch(updates)?;
        let _lock = take_lock(&self.lock_path, true)?;
        self.recover()?;
        apply_updates(updates, |name| self.read_ref(name))?;
        let changing: Vec<&RefUpdate> = updates.iter().filter(|u| u.changes()).collect();
        if changing.is_empty() {
            return Ok(());
        }
        self.check_paths(&changing)?;
        let journal = Journal {
            message: message.to_string(),
            updates: changing.into_iter().cloned().collect(),
        };
        let tmp = self.write_temp(journal.encode().as_bytes())?;
        fs::rename(&tmp, &self.journal).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            io_err("renaming into", &self.journal, e)
        })?;
        sync_dir(&self.root).map_err(|e| io_err("syncing", &self.root, e))?;
        self.apply(&journal, false)?;
        self.remove_journal()
    }

    fn list_refs(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>, StoreError> {
        let _lock = self.lock_for_reading()?;
        // Start at the deepest directory the prefix names, when it is a valid name.
        let (dir, base) = match prefix.rfind('/') {
            Some(i) if validate_ref_name(&prefix[..i]).is_ok() => {
                (self.refs.join(&prefix[..i]), &prefix[..=i])
            }
            _ => (self.refs.clone(), ""),
        };
        let mut out = Vec::new();
        self.walk_refs(&dir, base, prefix, &mut out)?;
        out.sort();
        Ok(out)
    }

    fn reflog(&self, name: &str) -> Result<Vec<ReflogEntry>, StoreError> {
        validate_ref_name(name)?;
        let _lock = self.lock_for_reading()?;
        let path = self.log_path(name);
        let text = match fs::read(&path) {
            Ok(t) => t,
            Err(e) if is_absent(&e) => return Ok(Vec::new()),
            Err(e) => return Err(io_err("reading reflog", &path, e)),
        };
        let text =
            String::from_utf8(text).map_err(|e| malformed(&path, format!("not UTF-8 ({e})")))?;
        complete_lines(&text)
            .enumerate()
            .map(|(i, line)| {
                parse_log_line(line).ok_or_else(|| {
                    malformed(&path, format!("line {} is not a reflog entry", i + 1))
                })
            })
            .collect()
    }
}

crate::impl_object_source!(DirStore);
