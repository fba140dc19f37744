//! Repacking: rewriting how a store keeps its objects at rest, never which objects it
//! holds ([`ObjectStore::repack`](crate::ObjectStore::repack)).
//!
//! A repack decodes each record it rewrites, re-hashes the stored bytes against the
//! id (so damage is reported, never copied), encodes them again and swaps the new
//! record in with a compare-and-swap on the old one, one batch per transaction. It
//! adds and deletes no object, and keeps every record's delta depth (a whole record
//! stays whole, a delta keeps its base), so it needs no lease and no sweep: a writer
//! that saw an object present, or encoded a delta against it, finds it present with
//! the same depth after any number of repacks. Only the SQLite adapter repacks
//! (schema 3 packs); the others answer `None`.

/// What a repack rewrites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RepackOptions {
    /// `Some(level)`: every compressed record (whole, against the store's dictionary,
    /// or a delta) is compressed again at this zstd level and kept when smaller, and
    /// every pack is rewritten (what `snapgraph gc` does; git's `gc` likewise repacks
    /// everything). `None`: records are moved, not recompressed, and only out of packs
    /// whose live records fill less than half of them.
    pub level: Option<i32>,
    /// Rebuild the database file (SQLite `VACUUM`) afterwards when at least a
    /// sixteenth of its pages are free, so the freed bytes leave the file.
    pub vacuum: bool,
}

/// The zstd level of a full repack by default: on the 30 synthetic releases of
/// `benches/peers` it keeps 16 % fewer bytes than the writers' level 3 against the
/// same dictionary (BENCHMARKS.md, "clisize2").
pub const DEFAULT_LEVEL: i32 = 19;

impl Default for RepackOptions {
    fn default() -> Self {
        Self {
            level: Some(DEFAULT_LEVEL),
            vacuum: true,
        }
    }
}

impl RepackOptions {
    /// A full repack at `level` (see [`RepackOptions::level`]), vacuumed.
    pub fn full(level: i32) -> Self {
        Self {
            level: Some(level),
            vacuum: true,
        }
    }

    /// Only packs below half live are rewritten, records moved as they are, vacuumed.
    pub fn sparse() -> Self {
        Self {
            level: None,
            vacuum: true,
        }
    }
}

/// What a repack did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RepackReport {
    /// Records decoded, verified and written again (moved or recompressed).
    pub rewritten: u64,
    /// Of those, records whose new encoding is smaller.
    pub recompressed: u64,
    /// Records left as they were because a concurrent writer or collector changed
    /// or deleted their row between the read and the swap.
    pub skipped: u64,
    /// Sum of the old records' lengths minus the new ones'.
    pub record_bytes_saved: u64,
    /// Packs deleted (their last live record moved out).
    pub packs_removed: u64,
    /// Packs written.
    pub packs_written: u64,
    /// Segment files deleted (SQLite schema 4): their last live record moved out, or
    /// no row named them.
    pub segments_removed: u64,
    /// The database file's bytes before (pages in use and free), its segment files
    /// included.
    pub file_bytes_before: u64,
    /// The database file's bytes after.
    pub file_bytes_after: u64,
    /// Whether the file was rebuilt (`VACUUM`).
    pub vacuumed: bool,
}
