//! Format constants and the resource limits a workspace enforces.
//!
//! Constants here are part of the on-disk format (`docs/FORMAT.md`): changing one
//! changes ids, so it needs a format version bump. [`Limits`] are per-workspace
//! settings that only decide what a checkout accepts.

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
