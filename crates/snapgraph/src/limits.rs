//! Format constants and the resource limits a workspace enforces.
//!
//! Constants here are part of the on-disk format (`docs/FORMAT.md`): changing one
//! changes ids, so it needs a format version bump. [`Limits`] are per-workspace
//! settings that only decide what a checkout accepts; `Budget` holds one walk to them
//! and [`LimitError`] says which one it ran into.

use crate::id::ObjectId;

/// Content of at most this many bytes is stored inline in its tree entry.
pub const INLINE_MAX: usize = 64;
/// Longest entry name, in bytes.
pub const MAX_NAME_LEN: usize = 255;
/// Longest path, in bytes.
pub const MAX_PATH_LEN: usize = 4096;
/// Longest symlink target, in bytes.
pub const MAX_SYMLINK_LEN: usize = 4096;
/// Highest level of an internal tree or manifest node.
pub const MAX_LEVEL: u8 = 32;
/// Most entries, children or chunks in one tree or manifest node.
pub const MAX_NODE_ITEMS: usize = 1024;
/// Most parents of one commit.
pub const MAX_PARENTS: usize = 256;
/// Deepest path, in components; also bounds how deep checkout and commit recurse.
pub const MAX_DEPTH: usize = 256;

/// What a checkout, a restore or a diff may materialize. Checked before anything is
/// fetched or allocated, from the totals recorded in the tree (and re-checked against
/// what is loaded). `SECURITY.md` lists every limit the engine enforces.
///
/// Content is deduplicated, so a small snapshot or store can describe far more bytes
/// than it holds (a file of zeros is one chunk however long it is): these limits, not
/// the size of the input, bound what a checkout allocates. Lower them for input you do
/// not trust.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most files and symlinks one checkout may create (default 10 million). Directories
    /// are counted apart and bounded by the same number. A diff reads at most as many
    /// entries of each side.
    pub max_files: u64,
    /// Most file bytes one checkout may hold in memory, the state's bytes included
    /// (default 16 GiB).
    pub max_bytes: u64,
    /// Most bytes a compressed snapshot body may unpack to (default 1 GiB). Each record
    /// counts its length, its 4-byte length prefix and
    /// [`RECORD_OVERHEAD`] bytes for its index entry, and is charged before its bytes
    /// are allocated, so a small compressed body that would expand to gigabytes fails
    /// with [`SnapshotError::TooLarge`](crate::SnapshotError::TooLarge) after at most
    /// this much work.
    pub max_unpacked_bytes: u64,
}

/// What each record of a compressed snapshot body counts against
/// [`Limits::max_unpacked_bytes`] beyond its bytes: the cost of keeping one more object
/// (its id and index entry), so that a body of many tiny objects is bounded too.
pub const RECORD_OVERHEAD: u64 = 64;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_files: 10_000_000,
            max_bytes: 16 << 30,
            max_unpacked_bytes: 1 << 30,
        }
    }
}

pub(crate) fn check_symlink_target(target: &str) -> Result<(), &'static str> {
    if target.is_empty() {
        return Err("empty symlink target");
    }
    if target.len() > MAX_SYMLINK_LEN {
        return Err("symlink target longer than 4096 bytes");
    }
    if target.as_bytes().contains(&0) {
        return Err("symlink target contains NUL");
    }
    Ok(())
}

/// A limit a checkout, a restore or a diff ran into: the one error of the accounting
/// they share (the crate's `Budget`), carried by
/// [`CheckoutError::Limit`](crate::CheckoutError::Limit) and
/// [`GraphError::Limit`](crate::GraphError::Limit).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    /// The commit holds more of something than [`Limits`] allow.
    #[error("commit {commit} exceeds the limit on {what}: {limit}")]
    Exceeded {
        /// The commit.
        commit: ObjectId,
        /// `"files"` (files and symlinks), `"directories"`, `"index entries"` (of
        /// internal tree nodes, counted by diff) or `"bytes"`.
        what: &'static str,
        /// The limit.
        limit: u64,
    },
    /// A path in the commit has more than [`MAX_DEPTH`] components.
    #[error("{path}: directories nest deeper than {MAX_DEPTH}")]
    TooDeep {
        /// The first path found with more than [`MAX_DEPTH`] components.
        path: String,
    },
    /// A path in the commit is longer than [`MAX_PATH_LEN`] bytes, so no workspace
    /// call could name it.
    #[error("{path}: path longer than {MAX_PATH_LEN} bytes")]
    PathTooLong {
        /// The first path found longer than the limit.
        path: String,
    },
}

/// What one walk over a commit's trees (a checkout, one side of a diff) has read, held
/// against [`Limits`]: entries are charged as they are decoded, before they are kept
/// (a hostile tree can claim small totals, and a tree that repeats subtrees can
/// describe far more paths than it has objects), bytes as files are taken, and every
/// path against [`MAX_DEPTH`] and [`MAX_PATH_LEN`].
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    commit: ObjectId,
    limits: Limits,
    /// Files and symlinks, directories, index entries of internal nodes.
    entries: [u64; 3],
    bytes: u64,
}

impl Budget {
    /// A budget for walking `commit` within `limits`.
    pub fn new(commit: ObjectId, limits: Limits) -> Self {
        Self {
            commit,
            limits,
            entries: [0; 3],
            bytes: 0,
        }
    }

    fn exceeded(&self, what: &'static str, limit: u64) -> LimitError {
        LimitError::Exceeded {
            commit: self.commit,
            what,
            limit,
        }
    }

    /// Charges the entries of a decoded leaf (`files` files and symlinks, `dirs`
    /// directories: `object::tree::count_kinds`), each kind bounded by
    /// [`Limits::max_files`].
    pub fn leaf(&mut self, (files, dirs): (u64, u64)) -> Result<(), LimitError> {
        self.add(0, files)?;
        self.add(1, dirs)
    }

    /// Charges `n` index entries of an internal tree node (bounded by
    /// [`Limits::max_files`] too).
    pub fn index(&mut self, n: u64) -> Result<(), LimitError> {
        self.add(2, n)
    }

    fn add(&mut self, i: usize, n: u64) -> Result<(), LimitError> {
        self.entries[i] = self.entries[i].saturating_add(n);
        if self.entries[i] > self.limits.max_files {
            return Err(self.exceeded(
                ["files", "directories", "index entries"][i],
                self.limits.max_files,
            ));
        }
        Ok(())
    }

    /// Charges `n` bytes held in memory (a file's, the state's) against
    /// [`Limits::max_bytes`].
    pub fn bytes(&mut self, n: u64) -> Result<(), LimitError> {
        self.bytes = self.bytes.saturating_add(n);
        if self.bytes > self.limits.max_bytes {
            return Err(self.exceeded("bytes", self.limits.max_bytes));
        }
        Ok(())
    }

    /// Checks totals a tree records (`files` files and symlinks, `bytes` bytes)
    /// before anything is read, without charging them: what is read is charged as it
    /// is read.
    pub fn claim(&self, files: u64, bytes: u64) -> Result<(), LimitError> {
        if files > self.limits.max_files {
            return Err(self.exceeded("files", self.limits.max_files));
        }
        if bytes.saturating_add(self.bytes) > self.limits.max_bytes {
            return Err(self.exceeded("bytes", self.limits.max_bytes));
        }
        Ok(())
    }

    /// Checks a path of `components` components and `len` bytes; `path` names it
    /// in the error.
    pub fn path(
        &self,
        components: usize,
        len: usize,
        path: impl FnOnce() -> String,
    ) -> Result<(), LimitError> {
        if components > MAX_DEPTH {
            return Err(LimitError::TooDeep { path: path() });
        }
        if len > MAX_PATH_LEN {
            return Err(LimitError::PathTooLong { path: path() });
        }
        Ok(())
    }
}
