//! The stat cache (`.snapgraph/index`): for each file of the last commit or checkout
//! of the working directory, the `lstat` fields that change when a file is written
//! (size, mtime and ctime in nanoseconds, inode, device, mode) and the digest of what
//! was recorded (`c:HEX`, the content's root object id, or `i:HEX`, the bytes
//! themselves for content small enough to live inline in its tree entry).
//!
//! A file is taken as unchanged, and not read, when its stat equals the recorded one
//! *and* the branch tip holds a file at that path with the recorded digest. Everything
//! else is read ("re-hash on doubt").
//!
//! **Racy files** (git's racy-git rule). The index records `probe_ns`, the file
//! system's clock (the mtime of a probe file) taken *before* the stats were. A file
//! whose recorded mtime is not older than `probe_ns` could have been changed again
//! within the same timestamp tick without its stat changing, so it is re-read next
//! time. A file older than the probe cannot: a later write would give it an mtime of
//! at least the probe's tick.
//!
//! The index is JSON, written atomically (temporary file, fsync, rename), and only
//! ever a cache: a missing, unreadable or foreign one (another root) means every file
//! is read.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::Result;

/// Format version of the index file.
pub const INDEX_VERSION: u32 = 1;

/// The `lstat` fields compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStat {
    /// Length in bytes.
    pub size: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
    /// Status change time, ns since the epoch.
    pub ctime_ns: i64,
    /// Inode number.
    pub ino: u64,
    /// Device.
    pub dev: u64,
    /// Full `st_mode`.
    pub mode: u32,
}

impl FileStat {
    /// The fields of `m`.
    pub fn of(m: &std::fs::Metadata) -> Self {
        Self {
            size: m.size(),
            mtime_ns: m.mtime().saturating_mul(1_000_000_000) + m.mtime_nsec(),
            ctime_ns: m.ctime().saturating_mul(1_000_000_000) + m.ctime_nsec(),
            ino: m.ino(),
            dev: m.dev(),
            mode: m.mode(),
        }
    }
}

/// One recorded file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// Its stat when recorded.
    pub stat: FileStat,
    /// What was recorded (`c:` content id or `i:` inline bytes, hex).
    pub digest: String,
}

/// The stat cache.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Index {
    /// [`INDEX_VERSION`].
    pub version: u32,
    /// The directory the paths are relative to.
    pub root: PathBuf,
    /// The file system's clock before the stats were taken (ns).
    pub probe_ns: i64,
    /// Files by workspace path (`/a/b`).
    pub entries: BTreeMap<String, IndexEntry>,
}

impl Index {
    /// Loads the index at `path` if it exists, is readable and describes `root`.
    pub fn load(path: &Path, root: &Path) -> Option<Index> {
        let bytes = std::fs::read(path).ok()?;
        Self::parse(&bytes, root)
    }

    /// The index in `bytes` (an index file's contents) if they parse, have this
    /// version and describe `root`; anything else is `None` (a cache, never an
    /// error).
    pub fn parse(bytes: &[u8], root: &Path) -> Option<Index> {
        let index: Index = serde_json::from_slice(bytes).ok()?;
        (index.version == INDEX_VERSION && index.root == root).then_some(index)
    }

    /// The entry for `path` if it can be trusted for a file whose stat is now `stat`:
    /// equal stats and not racy.
    pub fn clean(&self, path: &str, stat: &FileStat) -> Option<&IndexEntry> {
        self.entries
            .get(path)
            .filter(|e| e.stat == *stat && e.stat.mtime_ns < self.probe_ns)
    }

    /// Writes the index atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        // Fails only for a root path that is not UTF-8 (JSON strings are).
        let bytes = serde_json::to_vec(self)
            .map_err(|e| crate::error::CliError::bad_path(&self.root, e.to_string()))?;
        crate::repo::write_atomic(path, &bytes)
    }
}
