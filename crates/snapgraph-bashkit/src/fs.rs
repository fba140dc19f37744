//! `bashkit::FileSystem` on a snapgraph workspace.
//!
//! Each method does what Bashkit's own `InMemoryFs` does, with the same error kinds
//! and messages (Bashkit's builtins turn those into `No such file or directory`,
//! `Not a directory`, `File exists`, ...), so a script prints the same on both; the
//! differential test (`tests/differential.rs`) holds the two to that. Like every
//! layer below Bashkit's own symlink-following layer, it never follows a symlink
//! itself. Paths are checked twice: by Bashkit's `FsLimits` (as `InMemoryFs` checks
//! them) and by the workspace, which refuses what it cannot store (relative paths,
//! `..` above `/`, NUL, names over 255 bytes); both come back as `InvalidInput`.
//!
//! Where the workspace cannot hold what `InMemoryFs` would make, the operation fails
//! instead: FIFOs (`mkfifo` is not supported), modes above `0o7777`, a new mode for
//! `/`, and a symlink over a directory.

use std::io::{Error as IoError, ErrorKind};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use bashkit::{
    async_trait, DirEntry, FileSystem, FileSystemExt, FileType, FsLimits, FsUsage, Metadata,
    VfsEntry, VfsEntryKind, VfsSnapshot,
};
use snapgraph::workspace::path as wpath;
use snapgraph::{EntryKind, FsError, Workspace};

use crate::state::{child_path, parent_path, Inner, Stamp, Usage};
use crate::SnapgraphFs;

/// `InMemoryFs` answers a read of `/dev/urandom` or `/dev/random` with this many bytes.
const DEV_RANDOM_READ_BYTES: usize = 8192;
/// ... and of `/dev/zero` with this many zeros.
const DEV_ZERO_READ_BYTES: usize = 1 << 20;
/// Mode of a file `write_file` creates or replaces.
const FILE_MODE: u32 = 0o644;

type Result<T> = bashkit::Result<T>;

fn io(kind: ErrorKind, message: impl Into<String>) -> bashkit::Error {
    IoError::new(kind, message.into()).into()
}

fn other(message: impl Into<String>) -> bashkit::Error {
    IoError::other(message.into()).into()
}

fn not_found(message: &str) -> bashkit::Error {
    io(ErrorKind::NotFound, message)
}

fn invalid(message: impl Into<String>) -> bashkit::Error {
    io(ErrorKind::InvalidInput, message)
}

/// A workspace error Bashkit's way (only reached where the checks before an
/// operation did not already give `InMemoryFs`'s answer).
fn fs_error(e: FsError) -> bashkit::Error {
    match e {
        FsError::NotFound { .. } => not_found("not found"),
        FsError::NotADirectory { .. } => io(ErrorKind::NotADirectory, "not a directory"),
        FsError::IsADirectory { .. } => other("is a directory"),
        FsError::IsASymlink { .. } => not_found("file not found"),
        FsError::NotASymlink { .. } => other("not a symlink"),
        FsError::AlreadyExists { .. } => io(ErrorKind::AlreadyExists, "file exists"),
        FsError::IntoItself { .. } => invalid("cannot move a directory into itself"),
        e @ (FsError::InvalidPath(_)
        | FsError::InvalidMode { .. }
        | FsError::InvalidTarget { .. }) => invalid(e.to_string()),
        e => other(e.to_string()),
    }
}

/// What a normalized path names, as far as the checks below need to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    File {
        mode: u32,
        size: u64,
    },
    Dir {
        mode: u32,
    },
    Symlink {
        mode: u32,
        size: u64,
    },
    /// Nothing there; every existing ancestor is a directory.
    Missing,
    /// An ancestor is a regular file.
    UnderFile,
    /// An ancestor is a symlink (left to Bashkit's following layer to resolve).
    UnderLink,
}

impl Found {
    fn exists(self) -> bool {
        matches!(
            self,
            Found::File { .. } | Found::Dir { .. } | Found::Symlink { .. }
        )
    }

    /// Kind and size for the usage counters.
    fn entry(self) -> Option<(EntryKind, u64)> {
        match self {
            Found::File { size, .. } => Some((EntryKind::File, size)),
            Found::Symlink { size, .. } => Some((EntryKind::Symlink, size)),
            Found::Dir { .. } => Some((EntryKind::Dir, 0)),
            _ => None,
        }
    }

    /// The size a file or symlink counts toward Bashkit's total (none for the rest).
    fn counted_size(self) -> Option<u64> {
        match self {
            Found::File { size, .. } | Found::Symlink { size, .. } => Some(size),
            _ => None,
        }
    }
}

fn look(ws: &Workspace, path: &str) -> Found {
    match ws.metadata(path) {
        Ok(m) => match m.kind {
            EntryKind::File => Found::File {
                mode: m.mode,
                size: m.size,
            },
            EntryKind::Dir => Found::Dir { mode: m.mode },
            EntryKind::Symlink => Found::Symlink {
                mode: m.mode,
                size: m.size,
            },
        },
        Err(FsError::NotADirectory { path: blocker }) => match ws.metadata(&blocker) {
            Ok(m) if m.kind == EntryKind::File => Found::UnderFile,
            Ok(m) if m.kind == EntryKind::Symlink => Found::UnderLink,
            _ => Found::Missing,
        },
        Err(_) => Found::Missing,
    }
}

/// Bashkit's error for a path whose parent is not a directory: `ENOTDIR` when an
/// ancestor is a regular file, else "parent directory not found".
fn missing_parent(ws: &Workspace, path: &str) -> bashkit::Error {
    match look(ws, parent_path(path)) {
        Found::File { .. } | Found::UnderFile => io(ErrorKind::NotADirectory, "not a directory"),
        _ => not_found("parent directory not found"),
    }
}

/// Whether the parent of `path` is a directory (`/` always is).
fn parent_is_dir(ws: &Workspace, path: &str) -> bool {
    path == "/" || matches!(look(ws, parent_path(path)), Found::Dir { .. })
}

fn file_type(kind: EntryKind) -> FileType {
    match kind {
        EntryKind::File => FileType::File,
        EntryKind::Dir => FileType::Directory,
        EntryKind::Symlink => FileType::Symlink,
    }
}

fn metadata(kind: EntryKind, mode: u32, size: u64, stamp: Stamp) -> Metadata {
    Metadata {
        file_type: file_type(kind),
        // Bashkit reports 0 for directories; the workspace reports the entry count.
        size: if kind == EntryKind::Dir { 0 } else { size },
        mode,
        modified: stamp.modified,
        created: stamp.created,
    }
}

fn random_bytes() -> Result<Vec<u8>> {
    let mut buf = vec![0; DEV_RANDOM_READ_BYTES];
    getrandom::fill(&mut buf).map_err(|_| other("random device unavailable"))?;
    Ok(buf)
}

impl Inner {
    /// Checks a path as `InMemoryFs` does (Bashkit's limits), then as the workspace
    /// does, and returns its normalized form.
    fn path(&self, path: &Path) -> Result<String> {
        self.limits
            .validate_path(path)
            .map_err(|e| invalid(e.to_string()))?;
        let text = path
            .to_str()
            .ok_or_else(|| invalid(format!("path is not UTF-8: {}", path.display())))?;
        let comps = wpath::parse(text).map_err(|e| invalid(e.to_string()))?;
        Ok(wpath::join(&comps))
    }

    /// `InMemoryFs::check_write_limits`: one file of `new_size` bytes at `path`.
    fn check_write(&self, path: &str, new_size: u64) -> Result<()> {
        self.limits
            .check_file_size(new_size)
            .map_err(|e| invalid(e.to_string()))?;
        let old = look(&self.ws, path).counted_size();
        if old.is_none() {
            self.limits
                .check_file_count(self.usage.files)
                .map_err(|e| invalid(e.to_string()))?;
        }
        let total = self
            .usage
            .total_bytes()
            .saturating_sub(old.unwrap_or(0))
            .saturating_add(new_size);
        if total > self.limits.max_total_bytes {
            return Err(other(format!(
                "filesystem full: {total} bytes would exceed {} byte limit",
                self.limits.max_total_bytes
            )));
        }
        Ok(())
    }

    fn check_dir_count(&self) -> Result<()> {
        self.limits
            .check_dir_count(self.usage.dirs)
            .map_err(|e| invalid(e.to_string()))
    }

    /// Removes the file or symlink at `path` (what `found` says is there), counted.
    fn drop_leaf(&mut self, path: &str, found: Found) -> Result<()> {
        if let Some((kind @ (EntryKind::File | EntryKind::Symlink), size)) = found.entry() {
            self.ws.remove(path).map_err(fs_error)?;
            self.usage.sub(kind, size);
            self.times.remove_tree(path);
        }
        Ok(())
    }

    /// Writes a new file or replaces one (mode back to 0o644, as `InMemoryFs`
    /// does), after the checks.
    fn put_file(&mut self, path: &str, found: Found, content: &[u8]) -> Result<()> {
        match found {
            Found::Symlink { .. } => self.drop_leaf(path, found)?,
            Found::File { size, .. } => self.usage.sub(EntryKind::File, size),
            _ => {}
        }
        self.ws.write(path, content).map_err(fs_error)?;
        self.usage.add(EntryKind::File, content.len() as u64);
        if matches!(found, Found::File { mode, .. } if mode != FILE_MODE) {
            self.ws.set_mode(path, FILE_MODE).map_err(fs_error)?;
        }
        self.times.created(path, SystemTime::now());
        Ok(())
    }

    fn stamp(&self, path: &str) -> Stamp {
        self.times.get(path)
    }

    fn read_file(&self, path: &str) -> Result<Vec<u8>> {
        match look(&self.ws, path) {
            Found::File { .. } => Ok(self.ws.read(path).map_err(fs_error)?.to_vec()),
            Found::Dir { .. } => Err(other("is a directory")),
            Found::Symlink { .. } => Err(not_found("file not found")),
            Found::UnderFile => Err(io(ErrorKind::NotADirectory, "not a directory")),
            Found::Missing | Found::UnderLink => Err(not_found("file not found")),
        }
    }

    fn write_file(&mut self, path: &str, content: &[u8]) -> Result<()> {
        if !parent_is_dir(&self.ws, path) {
            return Err(missing_parent(&self.ws, path));
        }
        let found = look(&self.ws, path);
        if let Found::Dir { .. } = found {
            return Err(other("is a directory"));
        }
        self.check_write(path, content.len() as u64)?;
        self.put_file(path, found, content)
    }

    fn append_file(&mut self, path: &str, content: &[u8]) -> Result<()> {
        match look(&self.ws, path) {
            Found::Dir { .. } => Err(other("is a directory")),
            Found::Symlink { .. } => Err(not_found("file not found")),
            Found::File { size, .. } => {
                let len = content.len() as u64;
                self.limits
                    .check_file_size(size.saturating_add(len))
                    .map_err(|e| invalid(e.to_string()))?;
                let total = self.usage.file_bytes.saturating_add(len);
                if total > self.limits.max_total_bytes {
                    return Err(other(format!(
                        "filesystem full: {total} bytes would exceed {} byte limit",
                        self.limits.max_total_bytes
                    )));
                }
                let mut bytes = self.ws.read(path).map_err(fs_error)?.to_vec();
                bytes.extend_from_slice(content);
                self.ws.write(path, bytes).map_err(fs_error)?;
                self.usage.file_bytes += len;
                self.times.set_modified(path, SystemTime::now());
                Ok(())
            }
            found @ (Found::Missing | Found::UnderFile | Found::UnderLink) => {
                self.check_write(path, content.len() as u64)?;
                if !parent_is_dir(&self.ws, path) {
                    return Err(missing_parent(&self.ws, path));
                }
                self.put_file(path, found, content)
            }
        }
    }

    fn mkdir(&mut self, path: &str, recursive: bool) -> Result<()> {
        if recursive {
            let comps = wpath::parse(path).map_err(|e| invalid(e.to_string()))?;
            for i in 1..=comps.len() {
                let prefix = wpath::join(&comps[..i]);
                match look(&self.ws, &prefix) {
                    Found::Dir { .. } => {}
                    Found::Missing => {
                        self.check_dir_count()?;
                        self.ws.mkdir(&prefix).map_err(fs_error)?;
                        self.usage.dirs += 1;
                        self.times.created(&prefix, SystemTime::now());
                    }
                    _ => return Err(io(ErrorKind::AlreadyExists, "file exists")),
                }
            }
            return Ok(());
        }
        if !parent_is_dir(&self.ws, path) {
            return Err(missing_parent(&self.ws, path));
        }
        if look(&self.ws, path).exists() {
            return Err(io(ErrorKind::AlreadyExists, "directory exists"));
        }
        self.check_dir_count()?;
        self.ws.mkdir(path).map_err(fs_error)?;
        self.usage.dirs += 1;
        self.times.created(path, SystemTime::now());
        Ok(())
    }

    fn remove(&mut self, path: &str, recursive: bool) -> Result<()> {
        match look(&self.ws, path) {
            Found::Dir { .. } => {
                let entries = self.ws.list(path).map_err(fs_error)?;
                if !recursive && !entries.is_empty() {
                    return Err(other("directory not empty"));
                }
                if path == "/" {
                    if !recursive {
                        return Err(other("remove: not allowed on /"));
                    }
                    // `rm -rf /` empties the root; the root itself stays.
                    for entry in entries {
                        let child = child_path("/", &entry.name);
                        let tree =
                            self.tree_usage(&child, entry.metadata.kind, entry.metadata.size)?;
                        self.ws.remove(&child).map_err(fs_error)?;
                        self.usage.sub_tree(tree);
                    }
                    self.times.remove_tree("/");
                    return Ok(());
                }
                let tree = Usage::of_tree(&self.ws, path).map_err(fs_error)?;
                self.ws.remove(path).map_err(fs_error)?;
                self.usage.sub_tree(tree);
                self.times.remove_tree(path);
                Ok(())
            }
            found @ (Found::File { .. } | Found::Symlink { .. }) => self.drop_leaf(path, found),
            _ => Err(not_found("not found")),
        }
    }

    /// Usage of one entry of a directory listing (a whole tree for a directory).
    fn tree_usage(&self, path: &str, kind: EntryKind, size: u64) -> Result<Usage> {
        if kind == EntryKind::Dir {
            return Usage::of_tree(&self.ws, path).map_err(fs_error);
        }
        let mut usage = Usage::default();
        usage.add(kind, size);
        Ok(usage)
    }

    fn stat(&self, path: &str) -> Result<Metadata> {
        let (kind, mode, size) = match look(&self.ws, path) {
            Found::File { mode, size } => (EntryKind::File, mode, size),
            Found::Dir { mode } => (EntryKind::Dir, mode, 0),
            Found::Symlink { mode, size } => (EntryKind::Symlink, mode, size),
            Found::UnderFile => return Err(io(ErrorKind::NotADirectory, "not a directory")),
            Found::Missing | Found::UnderLink => return Err(not_found("not found")),
        };
        Ok(metadata(kind, mode, size, self.stamp(path)))
    }

    fn read_dir(&self, path: &str) -> Result<Vec<DirEntry>> {
        match look(&self.ws, path) {
            Found::Dir { .. } => {}
            Found::File { .. } | Found::Symlink { .. } => return Err(other("not a directory")),
            _ => return Err(not_found("not found")),
        }
        let entries = self.ws.list(path).map_err(fs_error)?;
        Ok(entries
            .into_iter()
            .map(|e| {
                let stamp = self.stamp(&child_path(path, &e.name));
                let m = e.metadata;
                DirEntry {
                    name: e.name,
                    metadata: metadata(m.kind, m.mode, m.size, stamp),
                }
            })
            .collect())
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        let src = look(&self.ws, from);
        if from == to {
            return if src.exists() {
                Ok(())
            } else {
                Err(not_found("not found"))
            };
        }
        if !parent_is_dir(&self.ws, to) {
            return Err(missing_parent(&self.ws, to));
        }
        if !src.exists() {
            return Err(not_found("not found"));
        }
        let dst = look(&self.ws, to);
        if let Found::Dir { .. } = src {
            if to.starts_with(from) && (from == "/" || to.as_bytes().get(from.len()) == Some(&b'/'))
            {
                return Err(invalid("cannot move a directory into itself"));
            }
            match dst {
                Found::Dir { .. } => {
                    if to == "/" || !self.ws.list(to).map_err(fs_error)?.is_empty() {
                        return Err(other("directory not empty"));
                    }
                    self.ws.remove(to).map_err(fs_error)?;
                    self.usage.sub(EntryKind::Dir, 0);
                }
                Found::File { .. } | Found::Symlink { .. } => {
                    return Err(other("cannot rename directory over file"))
                }
                _ => {}
            }
        } else {
            match dst {
                Found::Dir { .. } => return Err(other("cannot rename file over directory")),
                Found::File { .. } | Found::Symlink { .. } => {
                    if let Some((kind, size)) = dst.entry() {
                        self.usage.sub(kind, size);
                    }
                }
                _ => {}
            }
        }
        self.ws.rename(from, to).map_err(|e| {
            // Not reached (everything the workspace checks was checked above); keep
            // the counters true if it ever is.
            self.recount();
            fs_error(e)
        })?;
        self.times.rename_tree(from, to);
        Ok(())
    }

    fn copy(&mut self, from: &str, to: &str) -> Result<()> {
        let src = look(&self.ws, from);
        let size = match src {
            Found::File { size, .. } => size,
            Found::Symlink { .. } => 0,
            Found::Dir { .. } => return Err(other("cannot copy directory")),
            _ => return Err(not_found("not found")),
        };
        let dst = look(&self.ws, to);
        if let Found::Dir { .. } = dst {
            return Err(other("cannot copy file over directory"));
        }
        if !parent_is_dir(&self.ws, to) {
            return Err(missing_parent(&self.ws, to));
        }
        self.check_write(to, size)?;
        if from == to {
            return Ok(());
        }
        let stamp = self.stamp(from);
        match src {
            Found::File { mode, size } => {
                let bytes = self.ws.read(from).map_err(fs_error)?.to_vec();
                self.drop_leaf(to, dst)?;
                self.ws.write(to, bytes).map_err(fs_error)?;
                if mode != FILE_MODE {
                    self.ws.set_mode(to, mode).map_err(fs_error)?;
                }
                self.usage.add(EntryKind::File, size);
            }
            Found::Symlink { mode, size } => {
                let target = self.ws.read_link(from).map_err(fs_error)?.to_owned();
                self.drop_leaf(to, dst)?;
                self.ws.symlink(to, &target).map_err(fs_error)?;
                if mode != snapgraph::workspace::DEFAULT_SYMLINK_MODE {
                    self.ws.set_mode(to, mode).map_err(fs_error)?;
                }
                self.usage.add(EntryKind::Symlink, size);
            }
            _ => {}
        }
        self.times.set(to, stamp);
        Ok(())
    }

    fn symlink(&mut self, target: &Path, link: &str) -> Result<()> {
        self.limits
            .validate_path(target)
            .map_err(|e| invalid(e.to_string()))?;
        let target = target
            .to_str()
            .ok_or_else(|| invalid(format!("symlink target is not UTF-8: {}", target.display())))?;
        if !parent_is_dir(&self.ws, link) {
            return Err(not_found("parent directory not found"));
        }
        self.check_write(link, target.len() as u64)?;
        let found = look(&self.ws, link);
        if let Found::Dir { .. } = found {
            return Err(io(ErrorKind::AlreadyExists, "file exists"));
        }
        // Checked before anything is removed, so a bad target changes nothing.
        if target.is_empty()
            || target.len() > snapgraph::limits::MAX_SYMLINK_LEN
            || target.as_bytes().contains(&0)
        {
            return Err(invalid(format!("invalid symlink target {target:?}")));
        }
        self.drop_leaf(link, found)?;
        self.ws.symlink(link, target).map_err(|e| {
            self.recount();
            fs_error(e)
        })?;
        self.usage.add(EntryKind::Symlink, target.len() as u64);
        self.times.created(link, SystemTime::now());
        Ok(())
    }

    fn read_link(&self, path: &str) -> Result<PathBuf> {
        match look(&self.ws, path) {
            Found::Symlink { .. } => Ok(PathBuf::from(self.ws.read_link(path).map_err(fs_error)?)),
            Found::File { .. } | Found::Dir { .. } => Err(other("not a symlink")),
            _ => Err(not_found("not found")),
        }
    }

    fn chmod(&mut self, path: &str, mode: u32) -> Result<()> {
        let current = match look(&self.ws, path) {
            Found::File { mode, .. } | Found::Dir { mode } | Found::Symlink { mode, .. } => mode,
            _ => return Err(not_found("not found")),
        };
        if current == mode {
            // Unchanged: nothing for the next commit to look at.
            return Ok(());
        }
        self.ws.set_mode(path, mode).map_err(fs_error)
    }

    fn set_modified_time(&mut self, path: &str, time: SystemTime) -> Result<()> {
        if !look(&self.ws, path).exists() {
            return Err(not_found("not found"));
        }
        self.times.set_modified(path, time);
        Ok(())
    }

    /// Every entry, as `InMemoryFs::snapshot` lists them (the root included).
    fn vfs_snapshot(&self) -> Option<VfsSnapshot> {
        let mut entries = vec![VfsEntry {
            path: PathBuf::from("/"),
            kind: VfsEntryKind::Directory,
            mode: self.ws.metadata("/").map(|m| m.mode).unwrap_or(0o755),
        }];
        for (path, meta) in self.ws.walk() {
            let kind = match meta.kind {
                EntryKind::Dir => VfsEntryKind::Directory,
                EntryKind::File => VfsEntryKind::File {
                    // A file a shallow checkout left in the store cannot be listed
                    // with its bytes: no snapshot rather than a wrong one.
                    content: self.ws.read(&path).ok()?.to_vec(),
                },
                EntryKind::Symlink => VfsEntryKind::Symlink {
                    target: PathBuf::from(self.ws.read_link(&path).ok()?),
                },
            };
            entries.push(VfsEntry {
                path: PathBuf::from(path),
                kind,
                mode: meta.mode,
            });
        }
        Some(VfsSnapshot::from_entries(entries))
    }

    /// Replaces every entry with the snapshot's, all or nothing: everything is
    /// checked and built on a copy first.
    fn vfs_restore(&mut self, snapshot: &VfsSnapshot) -> Result<()> {
        let mut ws = self.ws.clone();
        for entry in ws.list("/").map_err(fs_error)? {
            ws.remove(&child_path("/", &entry.name)).map_err(fs_error)?;
        }
        let mut entries: Vec<(String, &VfsEntry)> = Vec::new();
        let mut total = 0u64;
        let mut files = 0u64;
        for entry in snapshot.entries() {
            let path = self.path(&entry.path)?;
            if let VfsEntryKind::File { content } = &entry.kind {
                self.limits
                    .check_file_size(content.len() as u64)
                    .map_err(|e| invalid(e.to_string()))?;
                total += content.len() as u64;
            }
            if !matches!(entry.kind, VfsEntryKind::Directory) {
                files += 1;
            }
            entries.push((path, entry));
        }
        if total > self.limits.max_total_bytes {
            return Err(other("snapshot total bytes exceed limit"));
        }
        self.limits
            .check_final_file_count(files)
            .map_err(|e| invalid(e.to_string()))?;
        // Parents before children.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, entry) in entries {
            if path == "/" {
                continue;
            }
            match &entry.kind {
                VfsEntryKind::Directory => ws.mkdir(&path),
                VfsEntryKind::File { content } => ws.write(&path, content),
                VfsEntryKind::Symlink { target } => {
                    let target = target.to_str().ok_or_else(|| {
                        invalid(format!("symlink target is not UTF-8: {}", target.display()))
                    })?;
                    ws.symlink(&path, target)
                }
                VfsEntryKind::Fifo => {
                    return Err(io(
                        ErrorKind::Unsupported,
                        format!("{path}: FIFOs cannot be stored in a snapgraph workspace"),
                    ))
                }
            }
            .map_err(fs_error)?;
            ws.set_mode(&path, entry.mode).map_err(fs_error)?;
        }
        self.ws = ws;
        self.recount();
        self.reset_times();
        Ok(())
    }
}

impl SnapgraphFs {
    /// Runs `op` on the state with `path` checked and normalized.
    fn with_path<T>(
        &self,
        path: &Path,
        op: impl FnOnce(&mut Inner, &str) -> Result<T>,
    ) -> Result<T> {
        let mut inner = self.lock();
        let path = inner.path(path)?;
        op(&mut inner, &path)
    }

    fn with_paths<T>(
        &self,
        from: &Path,
        to: &Path,
        op: impl FnOnce(&mut Inner, &str, &str) -> Result<T>,
    ) -> Result<T> {
        let mut inner = self.lock();
        let from = inner.path(from)?;
        let to = inner.path(to)?;
        op(&mut inner, &from, &to)
    }
}

#[async_trait]
impl FileSystemExt for SnapgraphFs {
    fn usage(&self) -> FsUsage {
        let inner = self.lock();
        let u = inner.usage;
        FsUsage::new(u.total_bytes(), u.files, u.dirs)
    }

    fn limits(&self) -> FsLimits {
        self.lock().limits.clone()
    }

    fn vfs_snapshot(&self) -> Option<VfsSnapshot> {
        self.lock().vfs_snapshot()
    }

    fn vfs_restore(&self, snapshot: &VfsSnapshot) -> Result<()> {
        self.lock().vfs_restore(snapshot)
    }

    fn backend_kind(&self) -> &'static str {
        "snapgraph"
    }
}

#[async_trait]
impl FileSystem for SnapgraphFs {
    async fn read_file(&self, path: &Path) -> Result<Vec<u8>> {
        self.with_path(path, |inner, p| match p {
            "/dev/urandom" | "/dev/random" => random_bytes(),
            "/dev/zero" => Ok(vec![0; DEV_ZERO_READ_BYTES]),
            _ => inner.read_file(p),
        })
    }

    async fn write_file(&self, path: &Path, content: &[u8]) -> Result<()> {
        self.with_path(path, |inner, p| match p {
            "/dev/null" | "/dev/zero" => Ok(()),
            _ => inner.write_file(p, content),
        })
    }

    async fn append_file(&self, path: &Path, content: &[u8]) -> Result<()> {
        self.with_path(path, |inner, p| match p {
            "/dev/null" | "/dev/zero" => Ok(()),
            _ => inner.append_file(p, content),
        })
    }

    async fn mkdir(&self, path: &Path, recursive: bool) -> Result<()> {
        self.with_path(path, |inner, p| inner.mkdir(p, recursive))
    }

    async fn remove(&self, path: &Path, recursive: bool) -> Result<()> {
        self.with_path(path, |inner, p| inner.remove(p, recursive))
    }

    async fn stat(&self, path: &Path) -> Result<Metadata> {
        self.with_path(path, |inner, p| inner.stat(p))
    }

    async fn read_dir(&self, path: &Path) -> Result<Vec<DirEntry>> {
        self.with_path(path, |inner, p| inner.read_dir(p))
    }

    async fn exists(&self, path: &Path) -> Result<bool> {
        self.with_path(path, |inner, p| Ok(look(&inner.ws, p).exists()))
    }

    async fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.with_paths(from, to, |inner, f, t| inner.rename(f, t))
    }

    async fn copy(&self, from: &Path, to: &Path) -> Result<()> {
        self.with_paths(from, to, |inner, f, t| inner.copy(f, t))
    }

    async fn symlink(&self, target: &Path, link: &Path) -> Result<()> {
        self.with_path(link, |inner, l| inner.symlink(target, l))
    }

    async fn read_link(&self, path: &Path) -> Result<PathBuf> {
        self.with_path(path, |inner, p| inner.read_link(p))
    }

    async fn chmod(&self, path: &Path, mode: u32) -> Result<()> {
        self.with_path(path, |inner, p| inner.chmod(p, mode))
    }

    async fn set_modified_time(&self, path: &Path, time: SystemTime) -> Result<()> {
        self.with_path(path, |inner, p| inner.set_modified_time(p, time))
    }
}
