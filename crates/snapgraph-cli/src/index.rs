//! The stat cache (`.snapgraph/index`): what the working directory held when it was
//! last committed or checked out, so that the next commit reads only what changed.
//!
//! It records, for each entry the scan recorded, its kind; for files the `lstat`
//! fields that change when a file is written (size, mtime and ctime in nanoseconds,
//! inode, device, mode) and the digest of what was recorded (the content's chunk id
//! or manifest root id, saying which, or the bytes themselves for content small
//! enough to live inline in its tree entry); for symlinks their `lstat` fields; for
//! directories their [`Listing`] (their own stat and the ignore rules in force).
//! Beside the entries it keeps the **workspace skeleton**: the stored bytes of the commit and tree nodes that the last
//! shallow checkout of the branch tip read, and those the commit's diff then read (the
//! new tip's changed trees), so that the next checkout reads them from here instead
//! of the store.
//!
//! ## When it is trusted
//!
//! - **A file is unchanged**, and not read, when its stat equals the recorded one,
//!   is not racy (below), *and* the branch tip holds a file at that path with the
//!   recorded digest. Everything else is read ("re-hash on doubt").
//! - **Nothing changed at all**, and no tree is loaded, when the index is
//!   *complete* for the branch tip ([`Index::tip`] is the tip's id: the entries are
//!   exactly that commit's tree) and the walk finds exactly the recorded entries,
//!   each of the recorded kind, every file and symlink with its recorded, non-racy
//!   stat ([`crate::scan::survey`], for a commit and for `status`). The survey
//!   names each difference, and the scan after it looks at just those (see "The
//!   survey" in ARCHITECTURE.md).
//! - **A directory needs no look** when the index is complete for the branch tip
//!   and records a directory at that path: a per-turn commit then checks the tip out
//!   lazily ([`snapgraph::CheckoutOptions::lazy`]) and reads from the store only the
//!   directories holding an entry the index does not vouch for (a file whose stat
//!   differs or is racy, an entry added, removed or retyped), since the complete
//!   index lists exactly the tip's tree. The skeleton is not used on that path.
//!   Directory mtimes are never trusted to skip the files inside: an edit in place
//!   changes the file's times, not its directory's, so every file is still stat'ed.
//! - **A directory's listing is reused** (no `getdents`, no sort, no ignore-rule
//!   matching) when the index is complete for the branch tip, records the directory
//!   with a [`Listing`], the directory's `fstat` now equals the recorded one and is
//!   not racy (its mtime older than `probe_ns`, as for files), and the ignore rules
//!   in force there are the recorded ones (the fingerprint over the bytes of every
//!   ignore file of the directory and its ancestors, read now, equals
//!   [`Listing::rules`]). Creating, removing or renaming an entry, or any `chmod`
//!   or `touch` of the directory, changes its ctime (which no caller can set), so an
//!   equal stat means the same names; equal rules mean the same names are ignored.
//!   Its entries are then the index's children of that path, each still stat'ed
//!   (a stat that fails or shows another type means the directory changed after
//!   its `fstat`: it is listed after all). The root is always listed (it has no
//!   entry). Sockets, FIFOs and nested repositories are never recorded, so a
//!   directory holding one is listed every time ([`Listing::entries`] counts
//!   them), and they are reported as before. A walk narrowed to some paths
//!   (`commit PATH...`, a watcher's report) neither reuses nor records listings,
//!   and a lazy scan narrowed by a watcher resets the listing of every directory it
//!   walks.
//! - **Skeleton objects** are content-addressed: the engine re-hashes each one it
//!   reads, so an object of another commit or branch, one the store no longer holds
//!   or one corrupted on disk is never taken for another; one missing is read from
//!   the store.
//!
//! **Racy files** (git's racy-git rule). The index records `probe_ns`, the file
//! system's clock (the mtime of a probe file) taken *before* the stats were. A file
//! whose recorded mtime is not older than `probe_ns` could have been changed again
//! within the same timestamp tick without its stat changing, so it is re-read next
//! time. A file older than the probe cannot: a later write would give it an mtime of
//! at least the probe's tick.
//!
//! **Other processes.** The branch tip is read from the store on every command, so
//! a commit made by another process (another working directory on the same store, a
//! `sync`) makes the tip differ from [`Index::tip`] and the fast path is not taken;
//! the per-file rule still holds because it compares digests with the tree of the
//! tip actually read. Another branch (`checkout`, `-b`) is the same case. The ignore
//! rules are applied by every walk, so an edited `.snapgraphignore` (itself a
//! recorded file, whose stat changes) or a file that became ignored changes the
//! walk's entries, which the fast path compares.
//!
//! ## Bytes
//!
//! Both files are a **base** and a **journal** of records appended after it, so that
//! a commit that changed a few paths writes a few records instead of the whole cache:
//!
//! - base: `SGINDEX\0` (the skeleton: `SGSKEL\0\0`), the version ([`INDEX_VERSION`],
//!   u32 little-endian), the CRC-32 (IEEE, u32 little-endian) of everything after it
//!   up to the body's end, the body's length (u64 little-endian), the BLAKE3 hash of
//!   the body, then the body: the postcard encoding of the root, `probe_ns`, `tip` and
//!   the entries sorted by path (the skeleton: its objects sorted by id). A reader
//!   checks the CRC, which catches damage at a fifth of BLAKE3's instructions per byte (it
//!   is paid by every command); the BLAKE3 hash, computed when the base is written, is
//!   not recomputed: it names the base for the journal's chain (version 3 checked
//!   the base by recomputing it);
//! - each record: its payload's length (u32 little-endian), a chain hash, then the
//!   payload. The chain hash of a record is BLAKE3 of the previous link's hash (the
//!   base's body hash for the first record) followed by the payload, so a record
//!   belongs to exactly one base and one predecessor. An index record's payload is
//!   the postcard encoding of the new `probe_ns` and `tip`, the paths removed and the
//!   entries added or changed; a skeleton record's, the objects added.
//!
//! Reading applies records in order and stops at the first one that is cut short,
//! fails its hash or does not decode: what precedes it is a complete earlier state,
//! which is all a cache needs (it was true when written, and the rules above hold
//! against a directory and a branch that moved on since: the stats differ, or the
//! tip does). A record is appended only to a file without such a tail, whose
//! journal holds fewer than [`JOURNAL_RECORDS`] records and, with the record, stays
//! within half its base (at least [`JOURNAL_MIN`] bytes) and within one change (a
//! path removed, an entry added or changed) for [`JOURNAL_CHANGE_RATIO`] entries (at
//! least [`JOURNAL_CHANGES_MIN`]), which every command replays; otherwise the save rewrites
//! base and journal as one new base, atomically (temporary file, fsync, rename). So a
//! record as large as the base (a release `rsync`ed over the tree restats every
//! entry) becomes the new base instead of a journal that every later command reads
//! and merges. Appends are one `write` each at the end of the file
//! (`O_APPEND`); they are not fsynced, since a lost or torn append leaves exactly such
//! an earlier state. A process that rewrote the file since it was read (another
//! command in the same working directory) changed the base hash, so a record
//! appended by a process that read the old base is dropped when read. The skeleton
//! keeps every object appended until it is rewritten, which happens once it holds
//! more than twice the objects the last checkout read.
//!
//! The bodies are written by postcard and read by a decoder written out for them
//! (`Wire`: the same bytes, the same values or an error, checked against postcard's
//! decoder by a proptest), into a vector sorted by path ([`Entries`]): a body whose
//! paths are not strictly increasing is no index. The file is read through a window
//! of 64 KiB and its body decoded as it arrives ([`Index::load`]):
//! the whole file is never held (a 5 MB index of 50,000 files faulted in 1,200
//! fresh pages and unmapped them again, a third of its load), the checksum is
//! computed on the way, and the base's problems are reported in the order a
//! whole-file read found them (the checksum before the decode).
//!
//! Beside each base the save writes its **block table** (`.snapgraph/index.table`,
//! [`table`]): where each block of 256 entries of the body lies, its first path and
//! CRC-32, and the base's entry and file counts, bound to the base by its BLAKE3
//! hash. A commit that asked a watcher reads through it only the entries at, above
//! and below the reported paths and the journal's paths ([`Index::open_part`]), so
//! that a watched turn costs what changed, not the index's size; a table that does
//! not check means the whole index is read, and a base without one (an earlier
//! build's) is rewritten once instead of appended to.
//!
//! A per-turn commit (a lazy scan, see [`crate::scan::ScanReport::partial`]) knows
//! its change without comparing indexes: it appends the record built from what the
//! scan did not vouch for ([`Index::save_delta`]), so its cost follows the change.
//!
//! Only ever a cache: a missing, unreadable, corrupted, older (version 1 was JSON,
//! version 2 had no journal, version 3 a BLAKE3 checksum, version 4 neither the
//! directories' listings nor whether a content id names a chunk or a manifest,
//! version 5 varints for a stat's size, inode, device and mode) or foreign one
//! (another root) means every file is read.

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use serde::{Deserialize, Serialize};
use snapgraph::{BoxError, ObjectId, ObjectKind, ObjectSource, Workspace};

use crate::error::{IoContext, Result};

pub mod table;

/// The file system's clock now, in nanoseconds since the epoch: the modification
/// time of a file created in `dir` (the racy-file rule compares file times with it,
/// so it must come from the same clock and have the same granularity).
pub fn fs_now(dir: &Path) -> Result<i64> {
    let probe = dir.join(format!(".probe-{}", std::process::id()));
    let f = std::fs::File::create(&probe).at(&probe)?;
    let m = f.metadata().at(&probe)?;
    drop(f);
    let _ = std::fs::remove_file(&probe);
    Ok(FileStat::of(&m).mtime_ns)
}

/// The mode recorded for a file with `st_mode` `mode`.
pub fn file_mode(mode: u32) -> u32 {
    if mode & 0o111 != 0 {
        0o755
    } else {
        0o644
    }
}

/// The digest the index records for the file at `path` in `ws` (see
/// the module docs); `None` if there is no file there or its bytes are neither
/// stored as an object nor loaded.
pub fn digest_of(ws: &Workspace, path: &str) -> Option<Digest> {
    match ws.file_content_object(path) {
        Some((id, ObjectKind::Chunk)) => return Some(Digest::Chunk(id)),
        Some((id, _)) => return Some(Digest::Manifest(id)),
        None => {}
    }
    if ws.is_loaded(path) {
        let data = ws.read(path).ok()?;
        if data.len() <= snapgraph::limits::INLINE_MAX {
            return Some(Digest::Inline(data.to_vec()));
        }
    }
    None
}

/// Format version of the index file.
pub const INDEX_VERSION: u32 = 6;

/// A journal shorter than this many bytes is appended to whatever its base's size.
pub const JOURNAL_MIN: u64 = 64 * 1024;

/// A journal of this many records is not appended to (the next save rewrites the
/// base), whatever its size. Every command reads and checks every record (about
/// 0.8 us each: a BLAKE3 link, a decode, a merge), so a journal of per-turn records
/// that grew to its byte bound (about 700 records of one-file turns beside a 230 KB
/// base) cost each turn up to 0.6 ms. With a record costing `c` and a rewrite `R`,
/// a bound of `sqrt(2R/c)` records makes their sum per turn least; 64 takes a
/// rewrite (serialise, frame, write, fsync, rename) at about two thousand records'
/// cost, an estimate, not a measurement of the rewrite alone: over 600 one-file
/// turns this bound made the mean turn 6.6 % faster, rewrites included
/// (BENCHMARKS.md, "Stop 33").
pub const JOURNAL_RECORDS: usize = 64;

/// A journal holds at most one change (a path removed, an entry added or changed)
/// for this many entries of its base (at least [`JOURNAL_CHANGES_MIN`]); the save
/// that would pass it rewrites the base. Every command replays every change (decode,
/// sort, merge: about 0.3 us each), so the byte bound alone let a few releases'
/// records (about 800 changes beside 2,000 entries, within half the base's bytes)
/// cost every later command 0.21-0.26 ms, a tenth of a no-change turn, until the
/// 64th record. A full journal now replays in about 0.04 ms; the rewrite that empties
/// it costs about 0.3 ms (BENCHMARKS.md, "Stop 47").
pub const JOURNAL_CHANGE_RATIO: usize = 16;

/// The changes a journal may hold after any base, however small (see
/// [`JOURNAL_CHANGE_RATIO`]): as many as [`JOURNAL_RECORDS`] one-file turns.
pub const JOURNAL_CHANGES_MIN: usize = 64;

const MAGIC: &[u8; 8] = b"SGINDEX\0";

/// The `lstat` fields compared. In the index every field is fixed-width
/// little-endian (`postcard::fixint::le`; 44 bytes): as varints a time in ns took 9
/// bytes and most of a decode's work (version 5 made the times fixed), and the other
/// four fields' varints were still most of what remained (version 6 made them fixed:
/// 18 bytes more a stat, about half of a decode's instructions fewer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStat {
    /// Length in bytes.
    #[serde(with = "postcard::fixint::le")]
    pub size: u64,
    /// Modification time, ns since the epoch.
    #[serde(with = "postcard::fixint::le")]
    pub mtime_ns: i64,
    /// Status change time, ns since the epoch.
    #[serde(with = "postcard::fixint::le")]
    pub ctime_ns: i64,
    /// Inode number.
    #[serde(with = "postcard::fixint::le")]
    pub ino: u64,
    /// Device.
    #[serde(with = "postcard::fixint::le")]
    pub dev: u64,
    /// Full `st_mode`.
    #[serde(with = "postcard::fixint::le")]
    pub mode: u32,
}

impl FileStat {
    /// The fields of `s`, as [`FileStat::of`] reads them from a `Metadata`.
    #[allow(clippy::unnecessary_cast)] // the field types differ between targets
    pub fn of_stat(s: &rustix::fs::Stat) -> Self {
        Self {
            size: s.st_size as u64,
            mtime_ns: (s.st_mtime as i64).saturating_mul(1_000_000_000) + s.st_mtime_nsec as i64,
            ctime_ns: (s.st_ctime as i64).saturating_mul(1_000_000_000) + s.st_ctime_nsec as i64,
            ino: s.st_ino as u64,
            dev: s.st_dev as u64,
            mode: s.st_mode as u32,
        }
    }

    /// This stat made one that no stat taken now equals and that is racy under any
    /// clock probe (its mtime the largest there is): an entry recorded with it is
    /// read again by the next scan, and what it recorded (the digest) still serves
    /// that read. Git smudges a racy entry's size the same way when it writes an
    /// index whose timestamp would vouch for it.
    pub fn smudged(self) -> Self {
        Self {
            mtime_ns: i64::MAX,
            ..self
        }
    }

    /// The `lstat` of `path` (never following a symlink).
    pub fn lstat(path: &Path) -> std::io::Result<Self> {
        Ok(Self::of_stat(&rustix::fs::lstat(path)?))
    }

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

/// What a file's entry recorded: how its bytes are stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Digest {
    /// Content stored as one chunk: that chunk's id (the hash of all the bytes).
    Chunk(ObjectId),
    /// Content stored as a manifest: its root's id (the bytes are its chunk list's
    /// spans, each hashed at its recorded length).
    Manifest(ObjectId),
    /// The bytes themselves (content inline in its tree entry).
    Inline(Vec<u8>),
}

impl Digest {
    /// The id of the object storing the content (`None` for inline bytes).
    pub fn id(&self) -> Option<ObjectId> {
        match self {
            Digest::Chunk(id) | Digest::Manifest(id) => Some(*id),
            Digest::Inline(_) => None,
        }
    }
}

/// A directory's listing as a scan recorded it, so that a later walk may take the
/// directory's entries from the index instead of listing it again (see the module
/// docs, "A directory's listing").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    /// The directory's own stat (`fstat` of the open directory, taken before it
    /// was listed): any entry added, removed or renamed in it changes its mtime
    /// and ctime.
    pub stat: FileStat,
    /// The ignore rules in force in it: a BLAKE3 chain over the bytes of every
    /// ignore file of the directory and of its ancestors (see
    /// [`crate::scan::rules_fingerprint`]).
    pub rules: [u8; 32],
    /// Whether the directory holds an ignore file (recorded as an entry or, when
    /// it ignores itself, not).
    pub ignore_file: bool,
    /// How many names the listing held past the ignore rules (what the index
    /// records, and also nested repositories, sockets, FIFOs and devices, which it
    /// does not): a listing is reused only when the index records all of them.
    pub entries: u32,
}

/// One recorded entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexEntry {
    /// A regular file: its stat when recorded and what was recorded.
    File {
        /// Its stat.
        stat: FileStat,
        /// What was recorded.
        digest: Digest,
    },
    /// A symlink and its stat (a new target means a new symlink: a new stat).
    Symlink {
        /// Its stat.
        stat: FileStat,
    },
    /// A directory, and its listing when the scan that recorded it took one that
    /// a later walk may reuse (`None`: after a checkout, under `commit PATH...` or
    /// a watcher's narrowed walk; the directory is then listed again).
    Dir {
        /// What it was listed as.
        listing: Option<Listing>,
    },
}

/// An index's entries: sorted by path, as the file stores them, so that reading
/// them is one decode into a vector (no tree of nodes built entry by entry) and a
/// look-up that follows a walk is one comparison (see [`Entries::get`]).
///
/// The paths live one after the other in one string, each entry holding its span:
/// a decode copies them into it and checks UTF-8 once over all of them, instead of
/// one allocation and one check per path (most of a decode's work when each path
/// was its own `String`). A path removed or replaced leaves its bytes behind until
/// the entries are built anew (a process reads and changes an index a few times).
#[derive(Default)]
pub struct Entries {
    /// Every path recorded, one after the other.
    paths: String,
    /// Strictly increasing paths, as spans of `paths`.
    sorted: Vec<Slot>,
    /// Where the next look-up is tried first: just after the last one found
    /// (atomic only so that a walk and its helper thread may share the entries: a
    /// hint is checked before it is used, so one another thread moved costs a
    /// binary search, never a wrong answer).
    hint: AtomicUsize,
}

impl Clone for Entries {
    fn clone(&self) -> Self {
        Self {
            paths: self.paths.clone(),
            sorted: self.sorted.clone(),
            hint: AtomicUsize::new(self.hint.load(Relaxed)),
        }
    }
}

/// One entry of [`Entries`]: where its path lies in the path string, and what it
/// records.
#[derive(Clone)]
struct Slot {
    at: usize,
    len: usize,
    entry: IndexEntry,
}

impl PartialEq for Entries {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Entries {}

impl std::fmt::Debug for Entries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Entries {
    /// As the sequence of `(path, entry)` pairs a `Vec<(String, IndexEntry)>` is.
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// The entries of an [`Entries`] in path order, with their paths.
#[derive(Clone)]
pub struct Iter<'a> {
    paths: &'a str,
    slots: std::slice::Iter<'a, Slot>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a IndexEntry);

    fn next(&mut self) -> Option<Self::Item> {
        let s = self.slots.next()?;
        Some((span(self.paths, s), &s.entry))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.slots.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let s = self.slots.next_back()?;
        Some((span(self.paths, s), &s.entry))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// A slot's path within `paths` (a span [`Entries`] built on a char boundary).
fn span<'a>(paths: &'a str, s: &Slot) -> &'a str {
    paths.get(s.at..s.at + s.len).unwrap_or_default()
}

/// A slot's path's bytes (what look-ups compare: `str`'s order is its bytes', and
/// a byte slice needs no character-boundary checks).
fn key<'a>(paths: &'a str, s: &Slot) -> &'a [u8] {
    paths.as_bytes().get(s.at..s.at + s.len).unwrap_or_default()
}

impl Entries {
    /// The entries of `v`, sorted by path; of two with one path the later wins.
    pub fn from_unsorted(mut v: Vec<(String, IndexEntry)>) -> Self {
        // Stable: equal paths keep their order, and the last of each run is kept.
        v.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out = Self {
            paths: String::with_capacity(v.iter().map(|(p, _)| p.len()).sum()),
            sorted: Vec::with_capacity(v.len()),
            hint: AtomicUsize::new(0),
        };
        for (p, e) in v {
            if out.sorted.last().is_some_and(|l| span(&out.paths, l) == p) {
                if let Some(l) = out.sorted.last_mut() {
                    l.entry = e;
                }
            } else {
                out.push(&p, e);
            }
        }
        out
    }

    /// Appends `path` (after every recorded path) and its entry.
    fn push(&mut self, path: &str, entry: IndexEntry) {
        let at = self.paths.len();
        self.paths.push_str(path);
        self.sorted.push(Slot {
            at,
            len: path.len(),
            entry,
        });
    }

    /// Whether the paths are strictly increasing (as every index file stores them).
    #[cfg(test)]
    fn is_sorted(&self) -> bool {
        self.sorted
            .windows(2)
            .all(|w| span(&self.paths, &w[0]) < span(&self.paths, &w[1]))
    }

    /// The path of entry `i`, as bytes (empty past the end).
    fn key(&self, i: usize) -> &[u8] {
        self.sorted
            .get(i)
            .map(|s| key(&self.paths, s))
            .unwrap_or_default()
    }

    /// The position of `path`: tried first where the last look-up left off (a walk
    /// asks for a directory's entries in order) and at the last one found (a
    /// directory is looked up when its listing is reused, then when it is visited),
    /// then by binary search.
    fn find(&self, path: &str) -> std::result::Result<usize, usize> {
        let h = self.hint.load(Relaxed);
        let path = path.as_bytes();
        let found = if h < self.sorted.len() && self.key(h) == path {
            Ok(h)
        } else if h > 0 && h <= self.sorted.len() && self.key(h - 1) == path {
            Ok(h - 1)
        } else {
            self.sorted
                .binary_search_by(|s| key(&self.paths, s).cmp(path))
        };
        if let Ok(i) = found {
            self.hint.store(i + 1, Relaxed);
        }
        found
    }

    /// The entry at `path`.
    pub fn get(&self, path: &str) -> Option<&IndexEntry> {
        self.get_key_value(path).map(|(_, e)| e)
    }

    /// The recorded path and entry at `path`.
    pub fn get_key_value(&self, path: &str) -> Option<(&str, &IndexEntry)> {
        self.at(self.find(path).ok()?)
    }

    /// The position of `path` among the entries in path order, if recorded.
    pub fn position(&self, path: &str) -> Option<usize> {
        self.find(path).ok()
    }

    /// The path and entry at position `i` in path order.
    pub fn at(&self, i: usize) -> Option<(&str, &IndexEntry)> {
        let s = self.sorted.get(i)?;
        Some((span(&self.paths, s), &s.entry))
    }

    /// Where these entries lie in memory: the same while they are not changed, and
    /// another one for a copy (what [`crate::ahead::Kept`] checks that its stats
    /// are of).
    pub fn identity(&self) -> usize {
        self.sorted.as_ptr() as usize
    }

    /// Whether `path` is recorded.
    pub fn contains_key(&self, path: &str) -> bool {
        self.find(path).is_ok()
    }

    /// Records `entry` at `path`, returning the entry it replaces (cheap at the end,
    /// a move of the entries after it elsewhere).
    pub fn insert(&mut self, path: impl AsRef<str>, entry: IndexEntry) -> Option<IndexEntry> {
        let path = path.as_ref();
        if self
            .sorted
            .last()
            .is_none_or(|l| span(&self.paths, l) < path)
        {
            self.push(path, entry);
            return None;
        }
        match self.find(path) {
            Ok(i) => Some(std::mem::replace(&mut self.sorted[i].entry, entry)),
            Err(i) => {
                let at = self.paths.len();
                self.paths.push_str(path);
                self.sorted.insert(
                    i,
                    Slot {
                        at,
                        len: path.len(),
                        entry,
                    },
                );
                None
            }
        }
    }

    /// Removes the entry at `path`.
    pub fn remove(&mut self, path: &str) -> Option<IndexEntry> {
        let i = self.find(path).ok()?;
        self.hint.store(i, Relaxed);
        Some(self.sorted.remove(i).entry)
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// The entries in path order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            paths: &self.paths,
            slots: self.sorted.iter(),
        }
    }

    /// `path` and the paths below it, in order (`/`: all of them).
    pub fn below<'a>(&'a self, path: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let all = path == "/";
        let start = if all {
            0
        } else {
            self.sorted.partition_point(|s| span(&self.paths, s) < path)
        };
        self.sorted[start..]
            .iter()
            .map(|s| span(&self.paths, s))
            .take_while(move |p| all || *p == path || p.starts_with(path))
            .filter(move |p| all || *p == path || p.as_bytes().get(path.len()) == Some(&b'/'))
    }

    /// The entries directly inside the directory `dir` (a workspace path such as
    /// `/a/b`; the empty string for the root), with their positions and names, in
    /// name order (the order a sorted listing gives), into `out` (cleared first).
    /// The search starts just after `dir`'s own entry and steps over each child's
    /// subtree by galloping, so the cost follows the children, not the index or the
    /// subtrees.
    pub fn children_into<'a>(&'a self, dir: &str, out: &mut Vec<(usize, &'a str, &'a IndexEntry)>) {
        out.clear();
        let mut prefix = String::with_capacity(dir.len() + 1);
        prefix.push_str(dir);
        prefix.push('/');
        let from = if dir.is_empty() {
            0
        } else {
            match self.find(dir) {
                Ok(i) => i + 1,
                Err(i) => i,
            }
        };
        let prefix = prefix.as_bytes();
        // Paths that sort between `dir` and `dir/` (`dir-x`, `dir.y`) come first.
        let mut at = self.gallop(from, |p| p < prefix);
        while let Some(s) = self.sorted.get(at) {
            let p = key(&self.paths, s);
            let Some(rest) = p.strip_prefix(prefix) else {
                break;
            };
            match rest.iter().position(|&b| b == b'/') {
                None => {
                    // After the prefix's `/`: a character boundary.
                    let name = self
                        .paths
                        .get(s.at + prefix.len()..s.at + s.len)
                        .unwrap_or_default();
                    out.push((at, name, &s.entry));
                    at += 1;
                }
                Some(i) => {
                    // Below a child (listed before it only when a name sorts
                    // between the child and its own `/`): all paths under
                    // `dir/child/` are contiguous from here.
                    let sub = &p[..prefix.len() + i + 1];
                    at = self.gallop(at, |q| q.starts_with(sub));
                }
            }
        }
    }

    /// The first position at or after `from` whose path `keep` refuses, where
    /// `keep` holds for a run of paths starting at `from` and for none after it:
    /// doubling steps, then a binary search in the last one, so the cost follows
    /// the run's length.
    fn gallop(&self, from: usize, keep: impl Fn(&[u8]) -> bool) -> usize {
        let rest = &self.sorted[from.min(self.sorted.len())..];
        let mut hi = 1;
        while hi <= rest.len() && keep(key(&self.paths, &rest[hi - 1])) {
            hi *= 2;
        }
        let lo = hi / 2;
        let hi = hi.min(rest.len());
        from + lo + rest[lo..hi].partition_point(|s| keep(key(&self.paths, s)))
    }

    /// The paths, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.iter().map(|(p, _)| p)
    }

    /// `self` with `changes` applied in one merge: for each path, `None` removes it,
    /// `Some` records that entry.
    fn merge(&mut self, changes: Changes) {
        if changes.is_empty() {
            return;
        }
        if changes.len().saturating_mul(MERGE_WALK_RATIO) >= self.sorted.len() {
            self.merge_walking(changes);
        } else {
            self.merge_searching(changes);
        }
    }

    /// [`merge`](Self::merge) by a binary search for each change.
    fn merge_searching(&mut self, changes: Changes) {
        // A journal of per-turn records is mostly new stats of recorded paths:
        // those are replaced in place, and only additions and removals (if any) pay
        // for a new vector (a copy of every entry into fresh memory).
        let mut rest = Vec::new();
        for (path, change) in changes.0 {
            match (
                self.sorted
                    .binary_search_by(|s| key(&self.paths, s).cmp(path.as_bytes())),
                change,
            ) {
                (Ok(i), Some(entry)) => self.sorted[i].entry = entry,
                (_, change) => rest.push((path, change)),
            }
        }
        self.hint.store(0, Relaxed);
        if !rest.is_empty() {
            // Still in path order, each path once.
            self.merge_in_place(Changes(rest));
        }
    }

    /// [`merge`](Self::merge)'s additions and removals (`changes` in path order,
    /// none of them a new entry for a recorded path) made in the vector itself:
    /// removed slots dropped and the rest moved up in one pass, then the vector
    /// grown by the additions and the slots after each moved down from the back to
    /// make room, each slot moved at most twice. A journal record that added or
    /// removed one file made every later command copy every slot into a fresh
    /// vector (a page fault for each 36 of them: 70 us of a 2,000-entry load).
    fn merge_in_place(&mut self, changes: Changes) {
        let mut added: Vec<(String, IndexEntry)> = Vec::new();
        let mut gone: Vec<usize> = Vec::new();
        for (path, change) in changes.0 {
            match change {
                Some(entry) => added.push((path, entry)),
                None => {
                    if let Ok(i) = self.find(&path) {
                        gone.push(i);
                    }
                }
            }
        }
        if !gone.is_empty() {
            let (mut i, mut gone) = (0, gone.into_iter().peekable());
            self.sorted.retain(|_| {
                let keep = gone.next_if_eq(&i).is_none();
                i += 1;
                keep
            });
        }
        if !added.is_empty() {
            let n = self.sorted.len();
            let mut slots = Vec::with_capacity(added.len());
            for (path, entry) in added {
                slots.push(Slot {
                    at: self.paths.len(),
                    len: path.len(),
                    entry,
                });
                self.paths.push_str(&path);
            }
            let room = Slot {
                at: 0,
                len: 0,
                entry: IndexEntry::Dir { listing: None },
            };
            self.sorted.resize(n + slots.len(), room);
            // Slots in [read, write) are room; each addition, from the last, first
            // lets the slots after it move down past it.
            let (mut read, mut write) = (n, n + slots.len());
            while let Some(slot) = slots.pop() {
                let path = key(&self.paths, &slot);
                while read > 0 && key(&self.paths, &self.sorted[read - 1]) > path {
                    read -= 1;
                    write -= 1;
                    self.sorted.swap(read, write);
                }
                write -= 1;
                self.sorted[write] = slot;
            }
        }
        self.hint.store(0, Relaxed);
    }
}

impl Entries {
    /// The entries of decoded `paths` (one after the other) and their slots: the
    /// paths checked as UTF-8 once together, then each slot's start checked to be a
    /// character boundary (so that each path alone is UTF-8, as decoding each as a
    /// `String` would require).
    fn of_parts(paths: Vec<u8>, sorted: Vec<Slot>) -> WireResult<Self> {
        let paths = String::from_utf8(paths).map_err(|_| WireError("a path is not UTF-8"))?;
        if !sorted.iter().all(|s| paths.is_char_boundary(s.at)) {
            return Err(WireError("a path is not UTF-8"));
        }
        Ok(Entries {
            paths,
            sorted,
            hint: AtomicUsize::new(0),
        })
    }

    /// [`merge`](Self::merge) in one walk of both sorted runs (the entries and the
    /// changes): for changes to many of the entries (a release `rsync`ed over the
    /// tree gives every entry a new stat, and a binary search per change, each step a
    /// comparison of paths, cost 0.7 ms of a release's commit on 2,000 entries), and
    /// for the additions and removals a binary-search merge leaves (they need a new
    /// vector anyway). A replaced entry keeps its path's span; only added paths are
    /// appended to the path string.
    fn merge_walking(&mut self, changes: Changes) {
        let old = std::mem::take(&mut self.sorted);
        let mut out = Vec::with_capacity(old.len() + changes.len());
        let base = self.paths.len();
        let mut added = String::new();
        let mut add = |out: &mut Vec<Slot>, path: &str, entry: IndexEntry| {
            out.push(Slot {
                at: base + added.len(),
                len: path.len(),
                entry,
            });
            added.push_str(path);
        };
        let mut changes = changes.0.into_iter().peekable();
        for slot in old {
            let at = key(&self.paths, &slot);
            // Changes before this entry: new paths (a removal of one not recorded
            // changes nothing).
            while let Some((path, _)) = changes.peek() {
                if path.as_bytes() >= at {
                    break;
                }
                if let Some((path, Some(entry))) = changes.next() {
                    add(&mut out, &path, entry);
                }
            }
            match changes.peek() {
                Some((path, _)) if path.as_bytes() == at => {
                    if let Some((_, Some(entry))) = changes.next() {
                        out.push(Slot { entry, ..slot });
                    }
                }
                _ => out.push(slot),
            }
        }
        for (path, change) in changes {
            if let Some(entry) = change {
                add(&mut out, &path, entry);
            }
        }
        self.paths.push_str(&added);
        self.sorted = out;
        self.hint.store(0, Relaxed);
    }
}

/// Changes to merge into [`Entries`]: at most one for each path, in strictly
/// increasing path order; `None` removes the path, `Some` records that entry.
#[derive(Debug, Clone, Default)]
struct Changes(Vec<(String, Option<IndexEntry>)>);

impl Changes {
    /// `changes` in the order they were made: of several for one path, the last
    /// wins. Sorted (a stable sort, fast on the nearly sorted runs a walk and its
    /// journal records give) instead of inserted one by one into a map: for a
    /// release's two thousand new stats the map's inserts were 3.9 M instructions
    /// of the commit's index rewrite.
    fn in_order(mut changes: Vec<(String, Option<IndexEntry>)>) -> Self {
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, Option<IndexEntry>)> = Vec::with_capacity(changes.len());
        for change in changes {
            match out.last_mut() {
                Some(last) if last.0 == change.0 => *last = change,
                _ => out.push(change),
            }
        }
        Self(out)
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
impl From<std::collections::BTreeMap<String, Option<IndexEntry>>> for Changes {
    /// A map's changes (sorted, one per path).
    fn from(map: std::collections::BTreeMap<String, Option<IndexEntry>>) -> Self {
        Self(map.into_iter().collect())
    }
}

/// Entries with [`Changes`] applied, in path order, read from both without building
/// them ([`Entries::merged`]).
struct Merged<'a> {
    old: std::iter::Peekable<Iter<'a>>,
    changes: std::iter::Peekable<std::slice::Iter<'a, (String, Option<IndexEntry>)>>,
}

impl<'a> Iterator for Merged<'a> {
    type Item = (&'a str, &'a IndexEntry);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let order = match (self.old.peek(), self.changes.peek()) {
                (None, None) => return None,
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some((old, _)), Some((new, _))) => (*old).cmp(new.as_str()),
            };
            if order == std::cmp::Ordering::Less {
                return self.old.next();
            }
            if order == std::cmp::Ordering::Equal {
                self.old.next();
            }
            if let Some((path, Some(entry))) = self.changes.next() {
                return Some((path.as_str(), entry));
            }
        }
    }
}

impl Entries {
    /// These entries with `changes` applied, in path order, and how many they are:
    /// what a new base after a journal record encodes, without a copy of the
    /// entries to apply the changes to.
    fn merged<'a>(&'a self, changes: &'a Changes) -> (usize, Merged<'a>) {
        let mut n = self.len();
        for (path, change) in &changes.0 {
            match (self.find(path).is_ok(), change) {
                (true, None) => n -= 1,
                (false, Some(_)) => n += 1,
                _ => {}
            }
        }
        let merged = Merged {
            old: self.iter().peekable(),
            changes: changes.0.iter().peekable(),
        };
        (n, merged)
    }
}

/// Changes to at least one entry in this many are merged in one walk
/// ([`Entries::merge_walking`]), fewer by a binary search each.
const MERGE_WALK_RATIO: usize = 8;

impl<'a> IntoIterator for &'a Entries {
    type Item = (&'a str, &'a IndexEntry);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The stat cache.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Index {
    /// The directory the paths are relative to.
    pub root: Vec<u8>,
    /// The file system's clock before the stats were taken (ns).
    pub probe_ns: i64,
    /// The commit whose whole tree the entries are, if they are one (a full scan
    /// that committed or found nothing to commit, a checkout into the working
    /// directory); `None` after `commit PATH...`.
    pub tip: Option<ObjectId>,
    /// Entries by workspace path (`/a/b`): every one the scan recorded when
    /// [`Index::tip`] is set, files only otherwise.
    pub entries: Entries,
    /// Stored bytes of the commit and tree nodes a shallow checkout of the branch
    /// tip read (see the module docs).
    pub skeleton: HashMap<ObjectId, Vec<u8>>,
    /// Where the index file read stood (appends go after it).
    log: Tail,
    /// Where the skeleton file read stood.
    skeleton_log: Tail,
    /// `Some` when [`Index::entries`] holds only part of the index (a watched
    /// turn's paths, read through the block table: see [`table`]): how many
    /// entries and files the whole holds.
    part: Option<table::Counts>,
}

/// Where a base-and-journal file that was read ends: the hash of its last valid link
/// and the bytes up to the end of that link, and whether the file holds nothing else
/// (no torn or foreign tail) and may be appended to. Not part of an index's value:
/// two indexes with the same contents are equal wherever their files stand.
#[derive(Debug, Clone, Copy, Default)]
struct Tail {
    /// The chain hash to append after, the base's size, the file's size; `None` when
    /// nothing was read or the file cannot be appended to.
    at: Option<([u8; 32], u64, u64)>,
    /// How many records the journal read holds.
    records: usize,
    /// How many changes (paths removed, entries added or changed) its records hold.
    changes: usize,
    /// The BLAKE3 hash of the base's body (what its block table names).
    base: [u8; 32],
}

impl PartialEq for Tail {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Tail {}

impl Tail {
    /// Whether a record may be appended: the file read was whole and its journal is
    /// small (see the module docs).
    fn appendable(&self) -> Option<[u8; 32]> {
        let (head, base, len) = self.at?;
        let journal = len - base;
        (journal < journal_limit(base) && self.records < JOURNAL_RECORDS).then_some(head)
    }

    /// The journal record of `payload` to append, if the file may be appended to and
    /// its journal, with the record, stays within [`journal_limit`]; `None`: rewrite
    /// the file as a new base. A record as large as the base itself (a release
    /// `rsync`ed over the tree gives every entry a new stat) is never appended: every
    /// later command would read and merge it after the base it replaces.
    fn record_for(&self, payload: &[u8]) -> Option<Vec<u8>> {
        let head = self.appendable()?;
        let (_, base, len) = self.at?;
        let after = (len - base).saturating_add(payload.len() as u64 + RECORD_HEADER);
        if after > journal_limit(base) {
            return None;
        }
        Some(record(&head, payload)?.0)
    }

    /// Whether an index journal may take a record of `changes` changes (paths
    /// removed, entries added or changed) beside about `entries` entries: with the
    /// record, it stays within [`journal_changes_limit`].
    fn takes_changes(&self, changes: usize, entries: usize) -> bool {
        self.changes.saturating_add(changes) <= journal_changes_limit(entries)
    }
}

/// The most changes a journal after a base of `entries` entries carries: one in
/// [`JOURNAL_CHANGE_RATIO`], at least [`JOURNAL_CHANGES_MIN`].
fn journal_changes_limit(entries: usize) -> usize {
    JOURNAL_CHANGES_MIN.max(entries / JOURNAL_CHANGE_RATIO)
}

/// The most bytes of journal a base of `base` bytes carries: half of it, at least
/// [`JOURNAL_MIN`].
fn journal_limit(base: u64) -> u64 {
    JOURNAL_MIN.max(base / 2)
}

/// A journal record's bytes before its payload: the length and the chain hash.
const RECORD_HEADER: u64 = 4 + 32;

/// An index base's body, as read.
#[cfg(test)]
#[derive(Debug, PartialEq)]
struct Body {
    root: Vec<u8>,
    probe_ns: i64,
    tip: Option<ObjectId>,
    entries: Entries,
}

/// An index base's body, as postcard writes it (borrowed from the index): the
/// encoding of the root, `probe_ns`, `tip` and the `(path, entry)` pairs, which
/// [`WireOut::body`] writes.
#[cfg(test)]
#[derive(Serialize)]
struct BodyOut<'a> {
    root: &'a Vec<u8>,
    probe_ns: i64,
    tip: Option<ObjectId>,
    entries: &'a Entries,
}

/// An index journal record, as postcard writes it (borrowed from the new index),
/// which [`WireOut::delta`] writes.
#[cfg(test)]
#[derive(Serialize)]
struct DeltaOut<'a> {
    probe_ns: i64,
    tip: Option<ObjectId>,
    removed: Vec<&'a str>,
    upserts: Vec<(&'a str, &'a IndexEntry)>,
}

/// An index journal record, as read.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
struct DeltaIn {
    probe_ns: i64,
    tip: Option<ObjectId>,
    removed: Vec<String>,
    upserts: Vec<(String, IndexEntry)>,
}

/// A reader of the postcard encoding of [`Body`] and [`DeltaIn`], written out for
/// the two types (what serde's generic visitors do byte by byte, per field, is most
/// of a no-change command's instructions): the same bytes give the same values or
/// an error, which a test checks against postcard's own decoder. Varints as
/// postcard writes them (7 bits a byte, at most 10 for a u64 and 5 for a u32, no
/// bits past the type's width), signed integers zigzagged, a stat's fields fixed
/// little-endian (`postcard::fixint::le`: 8 bytes each, 4 for the mode), an `Option`
/// one byte (0
/// or 1), an enum its variant as a u32 varint, sequences and strings their length
/// first, an id its 32 bytes.
struct Wire<'a> {
    rest: &'a [u8],
}

/// Why [`Wire`] stopped.
#[derive(Debug)]
struct WireError(&'static str);

type WireResult<T> = std::result::Result<T, WireError>;

/// What [`Wire`] says when the bytes end inside an item.
const CUT_SHORT: &str = "cut short";

impl<'a> Wire<'a> {
    fn byte(&mut self) -> WireResult<u8> {
        let (&b, rest) = self.rest.split_first().ok_or(WireError(CUT_SHORT))?;
        self.rest = rest;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> WireResult<&'a [u8]> {
        if n > self.rest.len() {
            return Err(WireError(CUT_SHORT));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    /// A varint of at most `bytes` bytes whose last byte is at most `last_max`.
    fn varint(&mut self, bytes: usize, last_max: u8) -> WireResult<u64> {
        let mut out = 0u64;
        for (i, &b) in self.rest.iter().take(bytes).enumerate() {
            out |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                if i == bytes - 1 && b > last_max {
                    return Err(WireError("varint overflows"));
                }
                self.rest = &self.rest[i + 1..];
                return Ok(out);
            }
        }
        Err(WireError(if self.rest.len() < bytes {
            CUT_SHORT
        } else {
            "varint too long"
        }))
    }

    fn u64(&mut self) -> WireResult<u64> {
        self.varint(10, 0x01)
    }

    fn u32(&mut self) -> WireResult<u32> {
        self.varint(5, 0x0f).map(|v| v as u32)
    }

    fn i64(&mut self) -> WireResult<i64> {
        let n = self.u64()?;
        Ok(((n >> 1) as i64) ^ -((n & 1) as i64))
    }

    fn len(&mut self) -> WireResult<usize> {
        usize::try_from(self.u64()?).map_err(|_| WireError("length overflows"))
    }

    fn bytes(&mut self) -> WireResult<&'a [u8]> {
        let n = self.len()?;
        self.take(n)
    }

    fn string(&mut self) -> WireResult<String> {
        let b = self.bytes()?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| WireError("a path is not UTF-8"))
    }

    fn id(&mut self) -> WireResult<ObjectId> {
        let b = self.take(32)?;
        let mut a = [0u8; 32];
        a.copy_from_slice(b);
        Ok(ObjectId::from_bytes(a))
    }

    fn option_id(&mut self) -> WireResult<Option<ObjectId>> {
        match self.byte()? {
            0 => Ok(None),
            1 => self.id().map(Some),
            _ => Err(WireError("bad option tag")),
        }
    }

    /// A stat: five 8-byte and one 4-byte little-endian fields, read as one block.
    fn stat(&mut self) -> WireResult<FileStat> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<44>()
            .ok_or(WireError(CUT_SHORT))?;
        self.rest = rest;
        let word = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&head[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let mut mode = [0u8; 4];
        mode.copy_from_slice(&head[40..44]);
        Ok(FileStat {
            size: word(0),
            mtime_ns: word(8) as i64,
            ctime_ns: word(16) as i64,
            ino: word(24),
            dev: word(32),
            mode: u32::from_le_bytes(mode),
        })
    }

    fn bool(&mut self) -> WireResult<bool> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(WireError("bad bool")),
        }
    }

    fn listing(&mut self) -> WireResult<Option<Listing>> {
        match self.byte()? {
            0 => Ok(None),
            1 => {
                let stat = self.stat()?;
                let mut rules = [0u8; 32];
                rules.copy_from_slice(self.take(32)?);
                Ok(Some(Listing {
                    stat,
                    rules,
                    ignore_file: self.bool()?,
                    entries: self.u32()?,
                }))
            }
            _ => Err(WireError("bad option tag")),
        }
    }

    fn entry(&mut self) -> WireResult<IndexEntry> {
        match self.u32()? {
            0 => {
                let stat = self.stat()?;
                let digest = match self.u32()? {
                    0 => Digest::Chunk(self.id()?),
                    1 => Digest::Manifest(self.id()?),
                    2 => Digest::Inline(self.bytes()?.to_vec()),
                    _ => return Err(WireError("bad digest variant")),
                };
                Ok(IndexEntry::File { stat, digest })
            }
            1 => Ok(IndexEntry::Symlink { stat: self.stat()? }),
            2 => Ok(IndexEntry::Dir {
                listing: self.listing()?,
            }),
            _ => Err(WireError("bad entry variant")),
        }
    }

    /// A sequence's length, and a capacity no hostile length can inflate (every
    /// element takes at least one byte).
    fn seq(&mut self) -> WireResult<(usize, usize)> {
        let n = self.len()?;
        Ok((n, n.min(self.rest.len())))
    }

    /// A sequence of `(path, entry)` pairs, each path its own `String` (a journal
    /// record's few).
    fn pairs(&mut self) -> WireResult<Vec<(String, IndexEntry)>> {
        let (n, cap) = self.seq()?;
        let mut out = Vec::with_capacity(cap);
        for _ in 0..n {
            let path = self.string()?;
            out.push((path, self.entry()?));
        }
        Ok(out)
    }

    #[cfg(test)]
    /// A sequence of `(path, entry)` pairs, in the order read, as [`Entries`]: the
    /// paths copied one after the other into one string, checked as UTF-8 once,
    /// then each span's start checked to be a character boundary (so that each
    /// path alone is UTF-8, as decoding each as a `String` would require).
    fn entries(&mut self) -> WireResult<Entries> {
        let (n, cap) = self.seq()?;
        // The paths' bytes are at most what is left to read: reserved once, so that
        // the string is never copied as it grows (reserved memory never written is
        // never touched: the overestimate costs no page).
        let mut paths: Vec<u8> = Vec::with_capacity(self.rest.len());
        let mut sorted = Vec::with_capacity(cap);
        for _ in 0..n {
            let path = self.bytes()?;
            let at = paths.len();
            paths.extend_from_slice(path);
            sorted.push(Slot {
                at,
                len: path.len(),
                entry: self.entry()?,
            });
        }
        Entries::of_parts(paths, sorted)
    }

    #[cfg(test)]
    fn body(bytes: &'a [u8]) -> WireResult<Body> {
        let mut w = Wire { rest: bytes };
        Ok(Body {
            root: w.bytes()?.to_vec(),
            probe_ns: w.i64()?,
            tip: w.option_id()?,
            entries: w.entries()?,
        })
    }

    fn delta(bytes: &'a [u8]) -> WireResult<DeltaIn> {
        let mut w = Wire { rest: bytes };
        let probe_ns = w.i64()?;
        let tip = w.option_id()?;
        let (n, cap) = w.seq()?;
        let mut removed = Vec::with_capacity(cap);
        for _ in 0..n {
            removed.push(w.string()?);
        }
        Ok(DeltaIn {
            probe_ns,
            tip,
            removed,
            upserts: w.pairs()?,
        })
    }
}

/// Bytes [`Index::read_from`] reads per `read` of an index file: the window its
/// body is decoded through.
const READ_WINDOW: usize = 64 * 1024;

/// Reads into `buf` until it is full or `src` ends (or fails); how many bytes it got.
fn read_up_to(src: &mut impl std::io::Read, buf: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buf.len() {
        match src.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    got
}

/// An index base's body read through a window: the bytes of `buf[start..end]` are
/// read and not yet decoded, `left` are still to read from `src`; every byte read
/// goes through the checksum.
struct Window<'s, R> {
    src: &'s mut R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    left: u64,
    /// Body bytes read so far.
    read: u64,
    crc: crc32fast::Hasher,
}

impl<R: std::io::Read> Window<'_, R> {
    /// Reads more of the body after what is left undecoded (moved to the front; the
    /// buffer doubled when it is full of one undecoded item). False at the body's
    /// end, or when `src` ends or fails before it.
    fn refill(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            let more = self
                .buf
                .len()
                .min(usize::try_from(self.left).unwrap_or(usize::MAX));
            self.buf.resize(self.buf.len() + more, 0);
        }
        let room =
            (self.buf.len() - self.end).min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let got = read_up_to(self.src, &mut self.buf[self.end..self.end + room]);
        self.crc.update(&self.buf[self.end..self.end + got]);
        self.end += got;
        self.left -= got as u64;
        self.read += got as u64;
        got == room
    }

    /// The next item `decode` reads, read again over a larger window while it finds
    /// the window cut short and the body goes on (`decode` must read only its
    /// argument). Also answers where in the window the item began.
    fn next<T>(
        &mut self,
        decode: impl Fn(&mut Wire<'_>) -> WireResult<T>,
    ) -> WireResult<(usize, T)> {
        loop {
            let mut w = Wire {
                rest: &self.buf[self.start..self.end],
            };
            match decode(&mut w) {
                Ok(v) => {
                    let at = self.start;
                    self.start = self.end - w.rest.len();
                    return Ok((at, v));
                }
                Err(e) if e.0 == CUT_SHORT && self.left > 0 => {
                    if !self.refill() && self.left > 0 {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads the rest of the body (for the checksum), decoding none of it.
    fn drain(&mut self) {
        self.start = 0;
        self.end = 0;
        while self.left > 0 {
            if !self.refill() {
                break;
            }
            self.end = 0;
        }
    }
}

/// An index base's body, as [`Index::read_from`] decodes it.
struct Decoded {
    root: Vec<u8>,
    probe_ns: i64,
    tip: Option<ObjectId>,
    entries: Entries,
    /// Whether the paths came in strictly increasing order.
    sorted: bool,
}

/// The body [`Wire::body`] reads, decoded through `window` into [`Entries`] as
/// [`Wire::entries`] would (the paths copied one after the other into one string,
/// checked as UTF-8 once), their order checked on the way.
fn decode_body<R: std::io::Read>(window: &mut Window<'_, R>, size: u64) -> WireResult<Decoded> {
    let (_, (root, probe_ns, tip, n)) = window.next(|w| {
        let root = w.bytes()?.to_vec();
        let probe_ns = w.i64()?;
        let tip = w.option_id()?;
        let n = w.len()?;
        Ok((root, probe_ns, tip, n))
    })?;
    // Paths are at most the body's bytes (reserved, never touched where unused), and
    // every entry takes at least two bytes of it; the body is at most the file.
    let body_left = usize::try_from(window.left.min(size))
        .unwrap_or(usize::MAX)
        .saturating_add(window.end - window.start);
    let mut paths: Vec<u8> = Vec::with_capacity(body_left);
    let mut sorted = Vec::with_capacity(n.min(body_left / 2));
    let mut in_order = true;
    for _ in 0..n {
        let (at, (from, len, entry)) = window.next(|w| {
            let all = w.rest.as_ptr() as usize;
            let path = w.bytes()?;
            let from = path.as_ptr() as usize - all;
            Ok((from, path.len(), w.entry()?))
        })?;
        let path = &window.buf[at + from..at + from + len];
        let start = paths.len();
        if let Some(last) = sorted.last() {
            let last: &Slot = last;
            in_order &= &paths[last.at..last.at + last.len] < path;
        }
        paths.extend_from_slice(path);
        sorted.push(Slot {
            at: start,
            len,
            entry,
        });
    }
    Ok(Decoded {
        root,
        probe_ns,
        tip,
        entries: Entries::of_parts(paths, sorted)?,
        sorted: in_order,
    })
}

/// The writer of what [`Wire`] reads: postcard's encoding of [`BodyOut`] and
/// [`DeltaOut`], byte for byte (a test compares them on arbitrary entries), written
/// out for the two types as the reader is. Through serde, a release's index rewrite
/// spent 2.1 M instructions (of its 3.2 M) in the encoding of two thousand entries.
struct WireOut {
    out: Vec<u8>,
}

impl WireOut {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.out.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    fn i64(&mut self, v: i64) {
        self.varint(((v << 1) ^ (v >> 63)) as u64);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.out.extend_from_slice(b);
    }

    fn option_id(&mut self, id: Option<&ObjectId>) {
        match id {
            None => self.out.push(0),
            Some(id) => {
                self.out.push(1);
                self.out.extend_from_slice(id.as_bytes());
            }
        }
    }

    fn stat(&mut self, s: &FileStat) {
        self.out.extend_from_slice(&s.size.to_le_bytes());
        self.out.extend_from_slice(&s.mtime_ns.to_le_bytes());
        self.out.extend_from_slice(&s.ctime_ns.to_le_bytes());
        self.out.extend_from_slice(&s.ino.to_le_bytes());
        self.out.extend_from_slice(&s.dev.to_le_bytes());
        self.out.extend_from_slice(&s.mode.to_le_bytes());
    }

    fn entry(&mut self, e: &IndexEntry) {
        match e {
            IndexEntry::File { stat, digest } => {
                self.out.push(0);
                self.stat(stat);
                match digest {
                    Digest::Chunk(id) => {
                        self.out.push(0);
                        self.out.extend_from_slice(id.as_bytes());
                    }
                    Digest::Manifest(id) => {
                        self.out.push(1);
                        self.out.extend_from_slice(id.as_bytes());
                    }
                    Digest::Inline(b) => {
                        self.out.push(2);
                        self.bytes(b);
                    }
                }
            }
            IndexEntry::Symlink { stat } => {
                self.out.push(1);
                self.stat(stat);
            }
            IndexEntry::Dir { listing } => {
                self.out.push(2);
                match listing {
                    None => self.out.push(0),
                    Some(l) => {
                        self.out.push(1);
                        self.stat(&l.stat);
                        self.out.extend_from_slice(&l.rules);
                        self.out.push(u8::from(l.ignore_file));
                        self.varint(u64::from(l.entries));
                    }
                }
            }
        }
    }

    fn pairs<'a>(&mut self, n: usize, pairs: impl Iterator<Item = (&'a str, &'a IndexEntry)>) {
        self.varint(n as u64);
        for (path, entry) in pairs {
            self.bytes(path.as_bytes());
            self.entry(entry);
        }
    }

    /// A base's body.
    #[cfg(test)]
    fn body(root: &[u8], probe_ns: i64, tip: Option<&ObjectId>, entries: &Entries) -> Vec<u8> {
        let (mut out, _) = Self::body_after(
            0,
            root,
            probe_ns,
            tip,
            entries.len(),
            entries.iter(),
            table::BLOCK_ENTRIES,
        );
        out.shrink_to_fit();
        out
    }

    /// `skip` zero bytes (room for a header), then the body of a base of the `n`
    /// `entries`, in path order, and where its blocks of `per_block` entries begin
    /// (for its [`table`]).
    fn body_after<'a>(
        skip: usize,
        root: &[u8],
        probe_ns: i64,
        tip: Option<&ObjectId>,
        n: usize,
        entries: impl Iterator<Item = (&'a str, &'a IndexEntry)>,
        per_block: usize,
    ) -> (Vec<u8>, table::Layout) {
        // About what each entry takes (a path of about 40 bytes, a stat, an id, tags).
        let guess = skip + root.len() + 48 + n * 124;
        let mut w = WireOut {
            out: Vec::with_capacity(guess),
        };
        w.out.resize(skip, 0);
        w.bytes(root);
        w.i64(probe_ns);
        w.option_id(tip);
        w.varint(n as u64);
        let per_block = per_block.max(1);
        let mut layout = table::Layout {
            head_len: w.out.len() - skip,
            per_block,
            starts: Vec::with_capacity(n.div_ceil(per_block)),
            entries: 0,
            files: 0,
        };
        for (i, (path, entry)) in entries.enumerate() {
            if i % per_block == 0 {
                layout.starts.push(w.out.len() - skip);
            }
            layout.entries += 1;
            layout.files += u64::from(matches!(entry, IndexEntry::File { .. }));
            w.bytes(path.as_bytes());
            w.entry(entry);
        }
        (w.out, layout)
    }

    /// A journal record's payload.
    fn delta(
        probe_ns: i64,
        tip: Option<&ObjectId>,
        removed: &[&str],
        upserts: &[(&str, &IndexEntry)],
    ) -> Vec<u8> {
        let mut w = WireOut {
            out: Vec::with_capacity(64 + 128 * (removed.len() + upserts.len())),
        };
        w.i64(probe_ns);
        w.option_id(tip);
        w.varint(removed.len() as u64);
        for p in removed {
            w.bytes(p.as_bytes());
        }
        w.pairs(upserts.len(), upserts.iter().copied());
        w.out
    }
}

/// `magic || version || CRC-32(rest) || rest` where `rest` is `len(body) ||
/// BLAKE3(body) || body`, and the body's hash (the chain's first link).
fn frame(magic: &[u8; 8], body: &[u8]) -> (Vec<u8>, [u8; 32]) {
    let mut out = Vec::with_capacity(BASE_HEADER + body.len());
    out.resize(BASE_HEADER, 0);
    out.extend_from_slice(body);
    seal(magic, out)
}

/// The bytes of a base before its body: magic, version, CRC-32, body length, body
/// hash (see [`frame`]).
const BASE_HEADER: usize = 8 + 4 + 4 + 8 + 32;

/// [`frame`] of the body that follows [`BASE_HEADER`] bytes of room in `out`,
/// written in place: a base is encoded once, not encoded and then copied behind
/// its header (a copy of the whole file into fresh pages).
fn seal(magic: &[u8; 8], mut out: Vec<u8>) -> (Vec<u8>, [u8; 32]) {
    let body_len = (out.len() - BASE_HEADER) as u64;
    let sum = *blake3::hash(&out[BASE_HEADER..]).as_bytes();
    out[..8].copy_from_slice(magic);
    out[8..12].copy_from_slice(&INDEX_VERSION.to_le_bytes());
    out[16..24].copy_from_slice(&body_len.to_le_bytes());
    out[24..56].copy_from_slice(&sum);
    let crc = crc32fast::hash(&out[16..]);
    out[12..16].copy_from_slice(&crc.to_le_bytes());
    (out, sum)
}

/// A journal record after the link `prev`: `len(payload) || BLAKE3(prev || payload)
/// || payload`, and its link.
fn record(prev: &[u8; 32], payload: &[u8]) -> Option<(Vec<u8>, [u8; 32])> {
    let len = u32::try_from(payload.len()).ok()?;
    let link = *blake3::Hasher::new()
        .update(prev)
        .update(payload)
        .finalize()
        .as_bytes();
    let mut out = Vec::with_capacity(payload.len() + 36);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&link);
    out.extend_from_slice(payload);
    Some((out, link))
}

/// A base-and-journal file read: the base's body and the payloads of the records
/// that chain onto it, in order.
struct Log<'a> {
    body: &'a [u8],
    records: Vec<&'a [u8]>,
    tail: Tail,
}

/// Why the bytes of an index file are not an index of the working directory (the
/// caller then reads every file: the index is only ever a cache).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// The file does not start with the index's magic bytes.
    #[error("not a snapgraph index (bad magic bytes)")]
    Magic,
    /// Another format version (1 was JSON, 2 had no journal).
    #[error("index format version {found}, this build reads {INDEX_VERSION}")]
    Version {
        /// The version found.
        found: u32,
    },
    /// The base ends before its header or its declared length.
    #[error("index cut short: {len} bytes")]
    Truncated {
        /// The file's length.
        len: usize,
    },
    /// The base's checksum does not match its body.
    #[error("index checksum mismatch")]
    Checksum,
    /// The body hashes right but does not decode: written by something else.
    #[error("index body does not decode: {reason}")]
    Decode {
        /// What the decoder said.
        reason: String,
    },
    /// An index of another directory (a copied or moved repository).
    #[error("index of another directory: {root}")]
    ForeignRoot {
        /// The directory it describes.
        root: String,
    },
}

/// Reads a base-and-journal file: an error if the base's magic, version, length or
/// checksum do not hold; the records up to the first that does not chain.
fn unframe<'a>(magic: &[u8; 8], bytes: &'a [u8]) -> std::result::Result<Log<'a>, IndexError> {
    let short = || IndexError::Truncated { len: bytes.len() };
    let rest = bytes
        .strip_prefix(magic.as_slice())
        .ok_or(IndexError::Magic)?;
    let (version, rest) = rest.split_first_chunk::<4>().ok_or_else(short)?;
    let found = u32::from_le_bytes(*version);
    if found != INDEX_VERSION {
        return Err(IndexError::Version { found });
    }
    let (crc, framed) = rest.split_first_chunk::<4>().ok_or_else(short)?;
    let (len, rest) = framed.split_first_chunk::<8>().ok_or_else(short)?;
    let (sum, rest) = rest.split_first_chunk::<32>().ok_or_else(short)?;
    let len = usize::try_from(u64::from_le_bytes(*len)).map_err(|_| short())?;
    if len > rest.len() {
        return Err(short());
    }
    let (body, journal) = rest.split_at(len);
    // The CRC covers the length, the body's BLAKE3 (which is not recomputed: it
    // names the base for the journal's chain) and the body.
    if crc32fast::hash(&framed[..40 + len]) != u32::from_le_bytes(*crc) {
        return Err(IndexError::Checksum);
    }
    let base_len = (bytes.len() - journal.len()) as u64;
    let (records, tail) = chain(sum, journal, base_len);
    Ok(Log {
        body,
        records,
        tail,
    })
}

/// The records of `journal` (the bytes after a base of `base_len` bytes whose body
/// hashes to `sum`) that chain onto it, in order, up to the first that does not, and
/// where the next record would go.
fn chain<'a>(sum: &[u8; 32], mut journal: &'a [u8], base_len: u64) -> (Vec<&'a [u8]>, Tail) {
    let total = base_len + journal.len() as u64;
    let mut head = *sum;
    let mut records = Vec::new();
    let whole = loop {
        if journal.is_empty() {
            break true;
        }
        let Some((len, rest)) = journal.split_first_chunk::<4>() else {
            break false;
        };
        let Some((link, rest)) = rest.split_first_chunk::<32>() else {
            break false;
        };
        let len = u32::from_le_bytes(*len) as usize;
        if len > rest.len() {
            break false;
        }
        let (payload, rest) = rest.split_at(len);
        let expected = blake3::Hasher::new()
            .update(&head)
            .update(payload)
            .finalize();
        if expected.as_bytes() != link {
            break false;
        }
        records.push(payload);
        head = *link;
        journal = rest;
    };
    let tail = Tail {
        at: whole.then_some((head, base_len, total)),
        records: records.len(),
        // Counted as the records are decoded (`Index::replay`).
        changes: 0,
        base: *sum,
    };
    (records, tail)
}

/// Appends `bytes` to the file at `path` in one write (see the module docs: not
/// fsynced).
fn append(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(|e| crate::error::CliError::io(path, e))?;
    f.write_all(bytes)
        .map_err(|e| crate::error::CliError::io(path, e))
}

/// Where the skeleton of the index at `path` lives.
fn skeleton_path(path: &Path) -> std::path::PathBuf {
    path.with_extension("skeleton")
}

impl Index {
    /// An empty index of `root` with clock probe `probe_ns`.
    pub fn new(root: &Path, probe_ns: i64) -> Self {
        Self {
            root: root.as_os_str().as_bytes().to_vec(),
            probe_ns,
            ..Self::default()
        }
    }

    /// Loads the index at `path` if it exists, is readable and describes `root`,
    /// without its skeleton (see [`Index::load_skeleton`]).
    pub fn load(path: &Path, root: &Path) -> Option<Index> {
        let file = std::fs::File::open(path).ok()?;
        let len = file.metadata().ok()?.len();
        Self::read_from(file, len, root, READ_WINDOW).ok()
    }

    /// Reads the skeleton saved beside the index at `path` (the fast path does not
    /// need it); a missing or damaged one leaves it empty.
    pub fn load_skeleton(&mut self, path: &Path) {
        let (skeleton, tail) = std::fs::read(skeleton_path(path))
            .ok()
            .and_then(|b| read_skeleton(&b))
            .unwrap_or_default();
        self.skeleton = skeleton;
        self.skeleton_log = tail;
    }

    /// The index in `bytes` (an index file's contents) if they parse, have this
    /// version, hash to their checksum and describe `root`; anything else is `None`
    /// (a cache: the caller reads every file). [`Index::read`] says why.
    pub fn parse(bytes: &[u8], root: &Path) -> Option<Index> {
        Self::read(bytes, root).ok()
    }

    /// [`Index::parse`], with the reason the bytes are not an index of `root`. A
    /// journal record that is cut short, fails its chain hash or does not decode is
    /// not an error: reading stops before it (an earlier complete state).
    pub fn read(bytes: &[u8], root: &Path) -> std::result::Result<Index, IndexError> {
        Self::read_from(bytes, bytes.len() as u64, root, READ_WINDOW)
    }

    /// [`Index::read`] of the bytes `src` gives (an index file), read `window` bytes
    /// at a time (more only for an entry longer than that) and decoded as they
    /// arrive: no buffer of the whole file is filled (its fresh pages, one fault
    /// each, were a quarter of a turn's index load) and freed again. The base's
    /// checksum is computed on the way and decides first, as in [`unframe`]: a
    /// decode that fails reads on to the end of the body, so that a damaged base is
    /// reported as such. An I/O error is reported as the file cut short there.
    /// `size` is the file's length as its metadata says: no more than that is
    /// reserved for what the body decodes to, whatever length its header claims.
    fn read_from(
        mut src: impl std::io::Read,
        size: u64,
        root: &Path,
        window: usize,
    ) -> std::result::Result<Index, IndexError> {
        let mut head = [0u8; 56];
        let got = read_up_to(&mut src, &mut head);
        if !head[..got].starts_with(MAGIC) {
            return Err(IndexError::Magic);
        }
        let short = |len: usize| IndexError::Truncated { len };
        if got < 12 {
            return Err(short(got));
        }
        let found = u32::from_le_bytes(head[8..12].try_into().unwrap_or_default());
        if found != INDEX_VERSION {
            return Err(IndexError::Version { found });
        }
        if got < head.len() {
            return Err(short(got));
        }
        let crc = u32::from_le_bytes(head[12..16].try_into().unwrap_or_default());
        let len = u64::from_le_bytes(head[16..24].try_into().unwrap_or_default());
        let sum: [u8; 32] = head[24..56].try_into().unwrap_or_default();
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&head[16..]);
        let mut body = Window {
            src: &mut src,
            buf: vec![0; window.max(1)],
            start: 0,
            end: 0,
            left: len,
            read: 0,
            crc: hasher,
        };
        let decoded = decode_body(&mut body, size);
        // What a failed decode left unread still counts for the checksum.
        body.drain();
        let base_len = head.len() as u64 + body.read;
        if body.left > 0 {
            return Err(short(base_len as usize));
        }
        if body.crc.finalize() != crc {
            return Err(IndexError::Checksum);
        }
        let body = decoded.map_err(|e| IndexError::Decode {
            reason: e.0.to_string(),
        })?;
        let mut journal = Vec::new();
        src.read_to_end(&mut journal)
            .map_err(|_| short(base_len as usize + journal.len()))?;
        if body.root != root.as_os_str().as_bytes() {
            return Err(IndexError::ForeignRoot {
                root: String::from_utf8_lossy(&body.root).into_owned(),
            });
        }
        if !body.sorted {
            return Err(IndexError::Decode {
                reason: "entries not in strictly increasing path order".into(),
            });
        }
        let (records, tail) = chain(&sum, &journal, base_len);
        let mut ix = Index {
            root: body.root,
            probe_ns: body.probe_ns,
            tip: body.tip,
            entries: body.entries,
            skeleton: HashMap::new(),
            log: tail,
            skeleton_log: Tail::default(),
            part: None,
        };
        ix.replay(records);
        Ok(ix)
    }

    /// Applies the journal `records` that chained onto the base: their changes, the
    /// last one for each path winning, merged into the sorted entries at once. A
    /// record that hashes right but does not decode (written by something else) ends
    /// the replay, and the next save rewrites the file.
    fn replay(&mut self, records: Vec<&[u8]>) {
        let mut changes = Vec::new();
        for payload in records {
            let Ok(delta) = Wire::delta(payload) else {
                self.log = Tail::default();
                break;
            };
            self.probe_ns = delta.probe_ns;
            self.tip = delta.tip;
            self.log.changes += delta.removed.len() + delta.upserts.len();
            changes.extend(delta.removed.into_iter().map(|p| (p, None)));
            changes.extend(delta.upserts.into_iter().map(|(p, e)| (p, Some(e))));
        }
        self.entries.merge(Changes::in_order(changes));
    }

    /// The journal record that turns `old` into `self`, if it is small enough to
    /// append (see the module docs).
    fn delta_after(&self, old: &Index) -> Option<Vec<u8>> {
        old.log.appendable()?;
        if old.root != self.root {
            return None;
        }
        // A merge of the two sorted maps.
        let mut removed = Vec::new();
        let mut upserts = Vec::new();
        let mut a = old.entries.iter().peekable();
        let mut b = self.entries.iter().peekable();
        loop {
            match (a.peek(), b.peek()) {
                (None, None) => break,
                (Some((pa, _)), None) => {
                    removed.push(*pa);
                    a.next();
                }
                (None, Some((pb, eb))) => {
                    upserts.push((*pb, *eb));
                    b.next();
                }
                (Some((pa, ea)), Some((pb, eb))) => match pa.cmp(pb) {
                    std::cmp::Ordering::Less => {
                        removed.push(*pa);
                        a.next();
                    }
                    std::cmp::Ordering::Greater => {
                        upserts.push((*pb, *eb));
                        b.next();
                    }
                    std::cmp::Ordering::Equal => {
                        if ea != eb {
                            upserts.push((*pb, *eb));
                        }
                        a.next();
                        b.next();
                    }
                },
            }
        }
        if !old
            .log
            .takes_changes(removed.len() + upserts.len(), self.entries.len())
        {
            return None;
        }
        let payload = WireOut::delta(self.probe_ns, self.tip.as_ref(), &removed, &upserts);
        old.log.record_for(&payload)
    }

    /// The index file's bytes as one base (see the module docs; the skeleton is
    /// saved apart).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_base().bytes
    }

    /// The index file's bytes as one base, and its block table.
    fn to_base(&self) -> Base {
        self.rewritten(
            self.probe_ns,
            self.tip.as_ref(),
            self.entries.len(),
            self.entries.iter(),
        )
    }

    /// The file of a new base of `self`'s root and the `n` `entries` (in path
    /// order), with that probe and tip.
    fn rewritten<'a>(
        &self,
        probe_ns: i64,
        tip: Option<&ObjectId>,
        n: usize,
        entries: impl Iterator<Item = (&'a str, &'a IndexEntry)>,
    ) -> Base {
        self.rewritten_in_blocks(probe_ns, tip, n, entries, table::BLOCK_ENTRIES)
    }

    /// [`rewritten`](Self::rewritten) in blocks of `per_block` entries.
    fn rewritten_in_blocks<'a>(
        &self,
        probe_ns: i64,
        tip: Option<&ObjectId>,
        n: usize,
        entries: impl Iterator<Item = (&'a str, &'a IndexEntry)>,
        per_block: usize,
    ) -> Base {
        let (out, layout) = WireOut::body_after(
            BASE_HEADER,
            &self.root,
            probe_ns,
            tip,
            n,
            entries,
            per_block,
        );
        let (bytes, sum) = seal(MAGIC, out);
        let table = table::bytes(&sum, &bytes[BASE_HEADER..], &layout);
        Base { bytes, table }
    }

    /// The file entry for `path` if it can be trusted for a file whose stat is now
    /// `stat`: equal stats and not racy. Returns its digest.
    pub fn clean(&self, path: &str, stat: &FileStat) -> Option<&Digest> {
        match self.entries.get(path)? {
            IndexEntry::File { stat: s, digest } if self.trusted(s, stat) => Some(digest),
            _ => None,
        }
    }

    /// How many regular files the entries record (the whole index's, when only
    /// part of it was read).
    pub fn file_count(&self) -> u64 {
        match self.part {
            Some(c) => c.files,
            None => self
                .entries
                .iter()
                .filter(|(_, e)| matches!(e, IndexEntry::File { .. }))
                .count() as u64,
        }
    }

    /// How many entries the index records (the whole index's, when only part of
    /// it was read).
    pub fn entry_count(&self) -> usize {
        self.part.map_or(self.entries.len(), |c| c.entries)
    }

    /// The commit the working directory is known to hold: [`Index::tip`] when the
    /// file read was whole. A torn or foreign tail is an earlier state (a crash
    /// during an append, a record of a process that read an older base), so the
    /// directory may hold a later commit: unknown.
    pub fn base(&self) -> Option<ObjectId> {
        self.tip.filter(|_| self.log.at.is_some())
    }

    /// Whether [`Index::entries`] holds only part of the index
    /// ([`Index::open_part`]): every entry at, above or below the paths it was read
    /// for, and no other that a walk may rely on.
    pub fn is_part(&self) -> bool {
        self.part.is_some()
    }

    /// Whether a recorded stat `recorded` vouches for an entry whose stat is now
    /// `now`: equal, and older than the clock probe (not racy).
    pub fn trusted(&self, recorded: &FileStat, now: &FileStat) -> bool {
        recorded == now && recorded.mtime_ns < self.probe_ns
    }

    /// Writes the index and its skeleton as new bases, atomically (each file; they
    /// need not agree: skeleton objects are content-addressed).
    pub fn save(&self, path: &Path) -> Result<()> {
        self.save_after(path, None)
    }

    /// Writes the index and its skeleton where `old` (the index read from `path` by
    /// this command, skeleton included) was: as journal records after `old`'s when
    /// its files may be appended to, else as new bases (see the module docs). What
    /// the files then read as is `self`, skeleton objects of `old` kept until the
    /// skeleton is rewritten.
    pub fn save_after(&self, path: &Path, old: Option<&Index>) -> Result<()> {
        let skeleton = skeleton_path(path);
        match old.and_then(|o| skeleton_delta(&self.skeleton, o)) {
            Some(None) => {}
            Some(Some(bytes)) => append(&skeleton, &bytes)?,
            None => crate::repo::write_atomic(&skeleton, &skeleton_bytes(&self.skeleton))?,
        }
        self.save_entries_after(path, old)
    }

    /// [`save_after`](Self::save_after) of the entries alone.
    fn save_entries_after(&self, path: &Path, old: Option<&Index>) -> Result<()> {
        forget_watch_token(path);
        if self.part.is_some() || old.is_some_and(|o| o.part.is_some()) {
            // Never reached (a partly read index is saved by `save_delta` only): a
            // base written from part of the entries would vouch for a tree it
            // does not list.
            return Err(crate::error::CliError::bad_path(
                path,
                "a partly read index cannot be saved whole",
            ));
        }
        // A base without its block table (written by an earlier build) is
        // rewritten once, table included, instead of appended to.
        match old
            .filter(|o| table::describes(path, &o.log.base))
            .and_then(|o| self.delta_after(o))
        {
            Some(bytes) => append(path, &bytes),
            None => self.to_base().write(path),
        }
    }
}

/// A base as written: the index file's bytes and its block table's ([`table`]).
struct Base {
    bytes: Vec<u8>,
    table: Option<Vec<u8>>,
}

impl Base {
    /// Writes the index file at `path` (atomically, synced), then its block table
    /// beside it (atomically, not synced: a table lost or torn in a crash, or left
    /// from an earlier base, does not check against the base and is not used).
    fn write(&self, path: &Path) -> Result<()> {
        let table = table::path(path);
        // An old table names the old base: removed first, so that no reader pairs
        // it with the new one (it would not check either: the base hash differs).
        let _ = std::fs::remove_file(&table);
        crate::repo::write_atomic(path, &self.bytes)?;
        if let Some(bytes) = &self.table {
            table::write(&table, bytes);
        }
        Ok(())
    }
}

/// A change of an index that is known as such (a lazy scan's report): the new
/// `probe_ns` and `tip`, the paths removed and the entries added or changed. Saved as
/// one journal record, it costs what changed, not what the index holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delta {
    /// The file system's clock before the stats were taken (ns).
    pub probe_ns: i64,
    /// The commit whose whole tree the entries then are, if they are one.
    pub tip: Option<ObjectId>,
    /// Paths no longer recorded.
    pub removed: Vec<String>,
    /// Entries added or changed.
    pub upserts: Vec<(String, IndexEntry)>,
}

impl Delta {
    /// Its removals and upserts as changes in path order (removals first, as a
    /// journal record is read: an upsert of a removed path wins).
    fn changes(self) -> Changes {
        let mut changes = Vec::with_capacity(self.removed.len() + self.upserts.len());
        changes.extend(self.removed.into_iter().map(|p| (p, None)));
        changes.extend(self.upserts.into_iter().map(|(p, e)| (p, Some(e))));
        Changes::in_order(changes)
    }
}

impl Index {
    /// `self` with `delta` applied (removals first, as a journal record is read).
    pub fn apply(&mut self, delta: Delta) {
        self.probe_ns = delta.probe_ns;
        self.tip = delta.tip;
        self.entries.merge(delta.changes());
    }

    /// Saves `self` (the index read from `path` by this command) with `delta`
    /// applied, leaving the skeleton file as it is: one journal record when the file
    /// may be appended to, else a new base (see the module docs).
    pub fn save_delta(&self, path: &Path, delta: Delta) -> Result<()> {
        forget_watch_token(path);
        // A record of more changes than a journal may hold (a release `rsync`ed
        // over the tree) would be refused: the base is rewritten without encoding
        // the record first.
        let changes = delta.upserts.len() + delta.removed.len();
        // The entries after the record are about as many as before (an upsert
        // may be an addition): the bound is a ratio, not an exact count.
        // A base without its block table (written by an earlier build) is
        // rewritten once, table included, instead of appended to (a partly read
        // index was read through its table).
        let record = (self.log.takes_changes(changes, self.entry_count())
            && (self.part.is_some() || table::describes(path, &self.log.base)))
        .then(|| self.log.appendable())
        .flatten()
        .and_then(|_| {
            let removed: Vec<&str> = delta.removed.iter().map(String::as_str).collect();
            let upserts: Vec<(&str, &IndexEntry)> =
                delta.upserts.iter().map(|(p, e)| (p.as_str(), e)).collect();
            let payload = WireOut::delta(delta.probe_ns, delta.tip.as_ref(), &removed, &upserts);
            self.log.record_for(&payload)
        });
        match record {
            Some(bytes) => append(path, &bytes),
            None if self.part.is_some() => self.save_delta_whole(path, delta),
            None => {
                let (probe_ns, tip) = (delta.probe_ns, delta.tip);
                let changes = delta.changes();
                let (n, entries) = self.entries.merged(&changes);
                self.rewritten(probe_ns, tip.as_ref(), n, entries)
                    .write(path)
            }
        }
    }
}

/// The watcher's token file beside the index (`crate::watch` writes and reads it; the
/// name lives here so that the index, which removes it, imports nothing of the watcher).
pub const WATCH_TOKEN_FILE: &str = "watch.token";

/// Removes the watcher's token kept beside the index at `path` before the index
/// changes (`crate::watch`): a token vouches only for the index state it was stored
/// with, so a command that saves the index and stores no token of its own leaves
/// none (the commit that stores one does so after its save).
fn forget_watch_token(path: &Path) {
    let _ = std::fs::remove_file(path.with_file_name(WATCH_TOKEN_FILE));
}

/// What to append to `old`'s skeleton file so that it holds `new`: `Some(None)`
/// nothing, `Some(Some(record))` the objects it lacks, `None` rewrite it (it cannot
/// be appended to, or holds more than twice the objects of `new`).
fn skeleton_delta(new: &HashMap<ObjectId, Vec<u8>>, old: &Index) -> Option<Option<Vec<u8>>> {
    old.skeleton_log.appendable()?;
    let added: Vec<(&ObjectId, &Vec<u8>)> = new
        .iter()
        .filter(|(id, _)| !old.skeleton.contains_key(*id))
        .collect();
    if old.skeleton.len() + added.len() > 2 * new.len().max(1) {
        return None;
    }
    if added.is_empty() {
        return Some(None);
    }
    Some(Some(skeleton_record(&old.skeleton_log, added)?))
}

/// The skeleton journal record adding `added` after `log`, if it may be appended.
fn skeleton_record(log: &Tail, added: Vec<(&ObjectId, &Vec<u8>)>) -> Option<Vec<u8>> {
    log.record_for(&skeleton_payload(added))
}

/// Skeleton objects as a base's body or a record's payload: postcard's encoding of
/// the `(id, bytes)` pairs sorted by id (the count, then each id's 32 bytes and the
/// bytes' length and bytes), written out (through serde each byte of each object was
/// a call: a release's skeleton of 120 KB cost 2 M instructions each way).
fn skeleton_payload(mut objects: Vec<(&ObjectId, &Vec<u8>)>) -> Vec<u8> {
    objects.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let bytes: usize = objects.iter().map(|(_, b)| b.len() + 42).sum();
    let mut w = WireOut {
        out: Vec::with_capacity(bytes + 10),
    };
    w.varint(objects.len() as u64);
    for (id, b) in objects {
        w.out.extend_from_slice(id.as_bytes());
        w.bytes(b);
    }
    w.out
}

/// What [`skeleton_payload`] wrote (any order of ids), or `None`.
fn skeleton_objects(bytes: &[u8]) -> Option<Vec<(ObjectId, Vec<u8>)>> {
    let mut w = Wire { rest: bytes };
    let n = w.len().ok()?;
    // Each object takes at least 33 bytes: no capacity a hostile count inflates.
    let mut out = Vec::with_capacity(n.min(w.rest.len() / 33));
    for _ in 0..n {
        let id = w.id().ok()?;
        out.push((id, w.bytes().ok()?.to_vec()));
    }
    w.rest.is_empty().then_some(out)
}

const SKELETON_MAGIC: &[u8; 8] = b"SGSKEL\0\0";

/// A skeleton file's bytes: objects sorted by id.
pub fn skeleton_bytes(skeleton: &HashMap<ObjectId, Vec<u8>>) -> Vec<u8> {
    frame(SKELETON_MAGIC, &skeleton_payload(skeleton.iter().collect())).0
}

/// The objects of a skeleton file (its base and the records that chain onto it), if
/// it is one.
pub fn parse_skeleton(bytes: &[u8]) -> Option<HashMap<ObjectId, Vec<u8>>> {
    read_skeleton(bytes).map(|(objects, _)| objects)
}

fn read_skeleton(bytes: &[u8]) -> Option<(HashMap<ObjectId, Vec<u8>>, Tail)> {
    let log = unframe(SKELETON_MAGIC, bytes).ok()?;
    let mut objects: HashMap<ObjectId, Vec<u8>> = skeleton_objects(log.body)?.into_iter().collect();
    let mut tail = log.tail;
    for payload in log.records {
        match skeleton_objects(payload) {
            Some(more) => objects.extend(more),
            None => {
                tail = Tail::default();
                break;
            }
        }
    }
    Some((objects, tail))
}

/// An object source that answers from a skeleton first, then from a store, and
/// remembers what it answered (the next skeleton).
pub struct SkeletonSource<'a> {
    skeleton: &'a HashMap<ObjectId, Vec<u8>>,
    store: &'a dyn ObjectSource,
    read: RefCell<HashMap<ObjectId, Vec<u8>>>,
}

impl<'a> SkeletonSource<'a> {
    /// Reads `skeleton` before `store`.
    pub fn new(skeleton: &'a HashMap<ObjectId, Vec<u8>>, store: &'a dyn ObjectSource) -> Self {
        Self {
            skeleton,
            store,
            read: RefCell::new(HashMap::new()),
        }
    }

    /// Every object answered so far, by id.
    pub fn into_read(self) -> HashMap<ObjectId, Vec<u8>> {
        self.read.into_inner()
    }
}

impl ObjectSource for SkeletonSource<'_> {
    fn get(
        &self,
        id: &ObjectId,
    ) -> std::result::Result<Option<std::borrow::Cow<'_, [u8]>>, BoxError> {
        let bytes = match self.skeleton.get(id) {
            Some(b) => b.clone(),
            None => match self.store.get(id)? {
                Some(b) => b.into_owned(),
                None => return Ok(None),
            },
        };
        self.read.borrow_mut().insert(*id, bytes.clone());
        Ok(Some(std::borrow::Cow::Owned(bytes)))
    }

    fn contains(&self, id: &ObjectId) -> std::result::Result<bool, BoxError> {
        Ok(self.skeleton.contains_key(id) || self.store.contains(id)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// [`Body`] as postcard's derived code reads and writes it: each path its own
    /// `String`.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct PlainBody {
        root: Vec<u8>,
        probe_ns: i64,
        tip: Option<ObjectId>,
        entries: Vec<(String, IndexEntry)>,
    }

    impl From<Body> for PlainBody {
        fn from(b: Body) -> Self {
            PlainBody {
                root: b.root,
                probe_ns: b.probe_ns,
                tip: b.tip,
                entries: b
                    .entries
                    .iter()
                    .map(|(p, e)| (p.to_string(), e.clone()))
                    .collect(),
            }
        }
    }

    fn stat(mtime_ns: i64) -> FileStat {
        FileStat {
            size: 3,
            mtime_ns,
            ctime_ns: mtime_ns,
            ino: 7,
            dev: 1,
            mode: 0o100644,
        }
    }

    fn sample() -> Index {
        let mut ix = Index::new(Path::new("/w"), 100);
        ix.tip = Some(ObjectId::from_bytes([1; 32]));
        ix.entries.insert(
            "/a",
            IndexEntry::File {
                stat: stat(50),
                digest: Digest::Inline(b"abc".to_vec()),
            },
        );
        ix.entries.insert("/d", IndexEntry::Dir { listing: None });
        ix
    }

    fn any_stat() -> impl proptest::strategy::Strategy<Value = FileStat> {
        use proptest::prelude::*;
        (
            any::<u64>(),
            any::<i64>(),
            any::<i64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u32>(),
        )
            .prop_map(|(size, mtime_ns, ctime_ns, ino, dev, mode)| FileStat {
                size,
                mtime_ns,
                ctime_ns,
                ino,
                dev,
                mode,
            })
    }

    fn any_entries() -> impl proptest::strategy::Strategy<Value = Vec<(String, IndexEntry)>> {
        use proptest::prelude::*;
        let entry = prop_oneof![
            (any_stat(), any::<[u8; 32]>(), any::<bool>()).prop_map(|(stat, id, chunk)| {
                let id = ObjectId::from_bytes(id);
                IndexEntry::File {
                    stat,
                    digest: if chunk {
                        Digest::Chunk(id)
                    } else {
                        Digest::Manifest(id)
                    },
                }
            }),
            (any_stat(), proptest::collection::vec(any::<u8>(), 0..80)).prop_map(|(stat, b)| {
                IndexEntry::File {
                    stat,
                    digest: Digest::Inline(b),
                }
            }),
            any_stat().prop_map(|stat| IndexEntry::Symlink { stat }),
            proptest::option::of((any_stat(), any::<[u8; 32]>(), any::<bool>(), any::<u32>()))
                .prop_map(|listing| IndexEntry::Dir {
                    listing: listing.map(|(stat, rules, ignore_file, entries)| Listing {
                        stat,
                        rules,
                        ignore_file,
                        entries,
                    }),
                }),
        ];
        proptest::collection::vec(("/[a-zé]{0,6}", entry), 0..12)
    }

    /// The whole-file reader [`Index::read_from`] replaced (unframe the file, decode
    /// the body, check it, replay the journal): the oracle of the windowed reader.
    fn read_whole(bytes: &[u8], root: &Path) -> std::result::Result<Index, IndexError> {
        let log = unframe(MAGIC, bytes)?;
        let body = Wire::body(log.body).map_err(|e| IndexError::Decode {
            reason: e.0.to_string(),
        })?;
        if body.root != root.as_os_str().as_bytes() {
            return Err(IndexError::ForeignRoot {
                root: String::from_utf8_lossy(&body.root).into_owned(),
            });
        }
        let mut ix = Index {
            root: body.root,
            probe_ns: body.probe_ns,
            tip: body.tip,
            entries: Some(body.entries)
                .filter(Entries::is_sorted)
                .ok_or_else(|| IndexError::Decode {
                    reason: "entries not in strictly increasing path order".into(),
                })?,
            skeleton: HashMap::new(),
            log: log.tail,
            skeleton_log: Tail::default(),
            part: None,
        };
        ix.replay(log.records);
        Ok(ix)
    }

    proptest::proptest! {
        /// The windowed reader gives what the whole-file reader gave, for any window
        /// (down to one byte: every item read across refills), on an index with a
        /// journal, with bytes changed, cut or added: the same index, or the same
        /// error.
        #[test]
        fn the_windowed_reader_reads_as_the_whole_file_reader(
            entries in any_entries(),
            sort in proptest::prelude::any::<bool>(),
            changed in any_entries(),
            flips in proptest::collection::vec((proptest::prelude::any::<usize>(), 1u8..=255), 0..3),
            cut in proptest::option::of(proptest::prelude::any::<usize>()),
            extra in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..3),
            window in 1usize..300,
        ) {
            let mut entries = entries;
            if sort {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                entries.dedup_by(|a, b| a.0 == b.0);
            }
            let body = PlainBody {
                root: b"/w".to_vec(),
                probe_ns: 7,
                tip: None,
                entries,
            };
            let (mut bytes, sum) = frame(MAGIC, &postcard::to_allocvec(&body).unwrap());
            let upserts: Vec<(&str, &IndexEntry)> =
                changed.iter().map(|(p, e)| (p.as_str(), e)).collect();
            let payload = WireOut::delta(8, None, &["/gone"], &upserts);
            bytes.extend_from_slice(&record(&sum, &payload).unwrap().0);
            for (at, x) in &flips {
                let at = at % bytes.len();
                bytes[at] ^= x;
            }
            if let Some(cut) = cut {
                bytes.truncate(cut % (bytes.len() + 1));
            }
            bytes.extend_from_slice(&extra);
            let root = Path::new("/w");
            let expected = read_whole(&bytes, root);
            proptest::prop_assert_eq!(
                Index::read_from(&bytes[..], bytes.len() as u64, root, window),
                expected.clone()
            );
            proptest::prop_assert_eq!(Index::read(&bytes, root), expected);
        }
    }

    proptest::proptest! {
        /// The skeleton's own writer writes what postcard writes for the objects
        /// sorted by id, and its reader reads that back; bytes cut short or with a
        /// trailing byte read as no skeleton.
        #[test]
        fn skeleton_objects_are_postcards(
            objects in proptest::collection::hash_map(
                proptest::prelude::any::<[u8; 32]>(),
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
                0..12,
            ),
            cut in proptest::prelude::any::<proptest::sample::Index>(),
        ) {
            let objects: HashMap<ObjectId, Vec<u8>> =
                objects.into_iter().map(|(id, b)| (ObjectId::from_bytes(id), b)).collect();
            let mut sorted: Vec<(&ObjectId, &Vec<u8>)> = objects.iter().collect();
            sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            let bytes = skeleton_payload(objects.iter().collect());
            proptest::prop_assert_eq!(&bytes, &postcard::to_allocvec(&sorted).unwrap());
            let back: HashMap<ObjectId, Vec<u8>> =
                skeleton_objects(&bytes).unwrap().into_iter().collect();
            proptest::prop_assert_eq!(&back, &objects);
            let short = &bytes[..cut.index(bytes.len())];
            proptest::prop_assert!(skeleton_objects(short).is_none());
            let mut long = bytes.clone();
            long.push(0);
            proptest::prop_assert!(skeleton_objects(&long).is_none());
        }

        /// Changes in the order they were made, sorted: each path once, in order,
        /// its last change winning, as inserting them one by one into a map gives.
        #[test]
        fn changes_in_order_are_a_maps_last_writes(
            changes in proptest::collection::vec(
                ("/[ab]{0,3}", proptest::option::of(any_entries())),
                0..24,
            ),
        ) {
            let changes: Vec<(String, Option<IndexEntry>)> = changes
                .into_iter()
                .map(|(p, e)| (p, e.and_then(|v| v.into_iter().next().map(|(_, e)| e))))
                .collect();
            let map: BTreeMap<String, Option<IndexEntry>> = changes.iter().cloned().collect();
            let sorted = Changes::in_order(changes);
            proptest::prop_assert_eq!(sorted.0, map.into_iter().collect::<Vec<_>>());
        }

        /// Changes merged into entries, by a binary search each or in one walk of
        /// both runs, or read through both ([`Entries::merged`]), give what a map
        /// of paths to entries gives: replaced entries, new paths in order,
        /// removals of recorded and unrecorded paths.
        #[test]
        fn both_merges_are_a_maps_merge(
            entries in any_entries(),
            changes in proptest::collection::vec(
                ("/[a-zé]{0,6}", proptest::option::of(any_entries())),
                0..16,
            ),
        ) {
            let changes: BTreeMap<String, Option<IndexEntry>> = changes
                .into_iter()
                .map(|(p, e)| (p, e.and_then(|v| v.into_iter().next().map(|(_, e)| e))))
                .collect();
            let mut model: BTreeMap<String, IndexEntry> = entries.iter().cloned().collect();
            for (p, c) in &changes {
                match c {
                    Some(e) => model.insert(p.clone(), e.clone()),
                    None => model.remove(p),
                };
            }
            let expected: Vec<(String, IndexEntry)> = model.into_iter().collect();
            // Read through without building them (what a rewrite encodes), with the
            // count it announces.
            let whole = Entries::from_unsorted(entries.clone());
            let all: Changes = changes.clone().into();
            let (n, merged) = whole.merged(&all);
            let read: Vec<(String, IndexEntry)> =
                merged.map(|(p, e)| (p.to_string(), e.clone())).collect();
            proptest::prop_assert_eq!(n, expected.len());
            proptest::prop_assert_eq!(&read, &expected);
            let mut by_search = Entries::from_unsorted(entries.clone());
            // Each change on its own (a ratio no change set reaches) ...
            for (p, c) in changes.clone() {
                let mut one = BTreeMap::new();
                one.insert(p, c);
                if one.len() * MERGE_WALK_RATIO < by_search.len() {
                    by_search.merge(one.into());
                } else {
                    by_search.merge_walking(one.into());
                }
            }
            // ... and all at once, by a search each (additions and removals made
            // in place) and in one walk.
            let mut searched = Entries::from_unsorted(entries.clone());
            searched.merge_searching(changes.clone().into());
            let mut walked = Entries::from_unsorted(entries);
            walked.merge_walking(changes.into());
            for merged in [by_search, searched, walked] {
                proptest::prop_assert!(merged.is_sorted());
                let got: Vec<(String, IndexEntry)> =
                    merged.iter().map(|(p, e)| (p.to_string(), e.clone())).collect();
                proptest::prop_assert_eq!(&got, &expected);
                for (p, e) in &expected {
                    proptest::prop_assert_eq!(merged.get(p), Some(e));
                }
            }
        }

        /// The index's own reader decodes what postcard wrote exactly as postcard's
        /// decoder does, and any byte changed or cut gives both the same answer
        /// (the same value, or an error), never a panic.
        #[test]
        fn the_wire_reader_is_postcards_decoder(
            root in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..20),
            probe_ns in proptest::prelude::any::<i64>(),
            tip in proptest::option::of(proptest::prelude::any::<[u8; 32]>()),
            entries in any_entries(),
            removed in proptest::collection::vec("/[a-z]{0,5}", 0..4),
            flips in proptest::collection::vec((proptest::prelude::any::<usize>(), 1u8..=255), 0..4),
            cut in proptest::prelude::any::<usize>(),
        ) {
            let tip = tip.map(ObjectId::from_bytes);
            let body = PlainBody { root, probe_ns, tip, entries: entries.clone() };
            let bytes = postcard::to_allocvec(&body).unwrap();
            proptest::prop_assert_eq!(PlainBody::from(Wire::body(&bytes).unwrap()), body);
            // What the index writes is what postcard writes for the plain body.
            let written = Wire::body(&bytes).unwrap();
            let out = BodyOut {
                root: &written.root,
                probe_ns: written.probe_ns,
                tip: written.tip,
                entries: &written.entries,
            };
            proptest::prop_assert_eq!(postcard::to_allocvec(&out).unwrap(), bytes.clone());
            // And what the index's own writer writes.
            proptest::prop_assert_eq!(
                WireOut::body(&written.root, written.probe_ns, written.tip.as_ref(), &written.entries),
                bytes.clone()
            );
            let removed_str: Vec<&str> = removed.iter().map(String::as_str).collect();
            let upserts: Vec<(&str, &IndexEntry)> =
                entries.iter().map(|(p, e)| (p.as_str(), e)).collect();
            let delta = postcard::to_allocvec(&DeltaOut {
                probe_ns,
                tip,
                removed: removed_str.clone(),
                upserts: upserts.clone(),
            })
            .unwrap();
            proptest::prop_assert_eq!(
                WireOut::delta(probe_ns, tip.as_ref(), &removed_str, &upserts),
                delta.clone()
            );
            let expected: DeltaIn = postcard::from_bytes(&delta).unwrap();
            proptest::prop_assert_eq!(Wire::delta(&delta).unwrap(), expected);
            for b in [bytes, delta] {
                let mut hostile = b.clone();
                for (at, x) in &flips {
                    let i = at % hostile.len();
                    hostile[i] ^= x;
                }
                hostile.truncate(hostile.len() - cut % (hostile.len() + 1));
                proptest::prop_assert_eq!(
                    Wire::body(&hostile).ok().map(PlainBody::from),
                    postcard::from_bytes::<PlainBody>(&hostile).ok()
                );
                proptest::prop_assert_eq!(
                    Wire::delta(&hostile).ok(),
                    postcard::from_bytes::<DeltaIn>(&hostile).ok()
                );
            }
        }
    }

    /// A header that claims a body of petabytes is a file cut short, read through
    /// its window: nothing that size is reserved (the windowed reader's first draft
    /// reserved what the header claimed, and aborted on the allocation).
    #[test]
    fn a_body_length_past_the_file_is_cut_short_without_reserving_it() {
        let mut bytes = sample().to_bytes();
        let len = bytes.len();
        bytes[16..24].copy_from_slice(&(1u64 << 50).to_le_bytes());
        assert_eq!(
            Index::read(&bytes, Path::new("/w")),
            Err(IndexError::Truncated { len })
        );
        assert_eq!(
            Index::read_from(&bytes[..], len as u64, Path::new("/w"), 3),
            Err(IndexError::Truncated { len })
        );
    }

    #[test]
    fn entries_out_of_order_are_no_index() {
        let mut ix = sample();
        ix.entries.insert("/b", IndexEntry::Dir { listing: None });
        let body = PlainBody {
            root: ix.root.clone(),
            probe_ns: 1,
            tip: None,
            entries: vec![
                ("/b".into(), IndexEntry::Dir { listing: None }),
                ("/a".into(), IndexEntry::Dir { listing: None }),
            ],
        };
        let (framed, _) = frame(MAGIC, &postcard::to_allocvec(&body).unwrap());
        assert!(matches!(
            Index::read(&framed, Path::new("/w")),
            Err(IndexError::Decode { .. })
        ));
    }

    #[test]
    fn paths_that_are_utf8_only_together_are_no_index() {
        // `/a` + the first byte of `é`, then its second byte: the two paths read
        // as one string are UTF-8, each alone is not (a decoder checking the whole
        // string once must still refuse them, and slice nothing mid-character).
        let body = PlainBody {
            root: b"/w".to_vec(),
            probe_ns: 1,
            tip: None,
            entries: vec![
                ("/aQ".into(), IndexEntry::Dir { listing: None }),
                ("Z".into(), IndexEntry::Dir { listing: None }),
            ],
        };
        let mut bytes = postcard::to_allocvec(&body).unwrap();
        for (from, to) in [(b'Q', 0xC3), (b'Z', 0xA9)] {
            let at = bytes.iter().position(|&b| b == from).unwrap();
            bytes[at] = to;
        }
        assert!(postcard::from_bytes::<PlainBody>(&bytes).is_err());
        assert_eq!(Wire::body(&bytes).unwrap_err().0, "a path is not UTF-8");
        let (framed, _) = frame(MAGIC, &bytes);
        assert!(matches!(
            Index::read(&framed, Path::new("/w")),
            Err(IndexError::Decode { reason }) if reason == "a path is not UTF-8"
        ));
    }

    proptest::proptest! {
        /// A directory's children, found by galloping over the sorted entries, are
        /// exactly the entries one level below it, in name order, whatever names
        /// sort between a directory and its own `/` (`d-x`, `d.y`).
        #[test]
        fn children_are_the_entries_one_level_below(
            paths in proptest::collection::btree_set("(/[a-c.-]{1,2}){1,4}", 0..40),
        ) {
            let mut all: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
            // Every ancestor is an entry too, as in an index of a whole tree.
            for p in &paths {
                let mut at = 0;
                while let Some(i) = p[at + 1..].find('/') {
                    all.insert(p[..at + 1 + i].to_string());
                    at += 1 + i;
                }
                all.insert(p.clone());
            }
            let entries = Entries::from_unsorted(
                all.iter()
                    .map(|p| (p.clone(), IndexEntry::Dir { listing: None }))
                    .collect(),
            );
            let mut dirs: Vec<&str> = vec![""];
            dirs.extend(all.iter().map(String::as_str));
            let mut got = Vec::new();
            for dir in dirs {
                entries.children_into(dir, &mut got);
                let mut expected: Vec<&str> = all
                    .iter()
                    .filter_map(|p| p.strip_prefix(dir)?.strip_prefix('/'))
                    .filter(|rest| !rest.contains('/'))
                    .collect();
                expected.sort_unstable();
                let names: Vec<&str> = got.iter().map(|(_, n, _)| *n).collect();
                for (at, name, _) in &got {
                    proptest::prop_assert_eq!(entries.position(&format!("{dir}/{name}")), Some(*at));
                }
                proptest::prop_assert_eq!(names, expected, "children of {:?}", dir);
            }
        }
    }

    #[test]
    fn entries_follow_a_walk_and_merge_like_a_map() {
        let e = |n: u8| IndexEntry::File {
            stat: stat(i64::from(n)),
            digest: Digest::Inline(vec![n]),
        };
        let mut map = BTreeMap::new();
        let mut entries = Entries::default();
        for (i, p) in ["/b", "/a", "/b/c", "/a.x", "/b", "/c"].iter().enumerate() {
            map.insert(p.to_string(), e(i as u8));
            entries.insert(p, e(i as u8));
        }
        let same = |entries: &Entries, map: &BTreeMap<String, IndexEntry>| {
            assert_eq!(entries.len(), map.len());
            assert!(entries.iter().eq(map.iter().map(|(p, e)| (p.as_str(), e))));
            for p in ["/", "/a", "/a.x", "/b", "/b/c", "/c", "/d", "/a", "/c"] {
                assert_eq!(entries.get(p), map.get(p), "{p}");
            }
        };
        same(&entries, &map);
        assert_eq!(entries.remove("/a.x"), map.remove("/a.x"));
        assert_eq!(entries.remove("/zz"), None);
        same(&entries, &map);
        let changes: BTreeMap<String, Option<IndexEntry>> = [
            ("/0".to_string(), Some(e(9))),
            ("/a".to_string(), None),
            ("/b/c".to_string(), Some(e(8))),
            ("/bb".to_string(), None),
            ("/z".to_string(), Some(e(7))),
        ]
        .into();
        for (p, c) in &changes {
            match c {
                Some(v) => {
                    map.insert(p.clone(), v.clone());
                }
                None => {
                    map.remove(p);
                }
            }
        }
        entries.merge(changes.into());
        same(&entries, &map);
        // New entries for recorded paths only: replaced in place.
        let replaced: BTreeMap<String, Option<IndexEntry>> = [
            ("/0".to_string(), Some(e(6))),
            ("/z".to_string(), Some(e(5))),
        ]
        .into();
        for (p, c) in &replaced {
            map.insert(p.clone(), c.clone().unwrap());
        }
        entries.merge(replaced.into());
        same(&entries, &map);
        let unsorted = Entries::from_unsorted(vec![
            ("/b".into(), e(1)),
            ("/a".into(), e(2)),
            ("/b".into(), e(3)),
        ]);
        assert_eq!(unsorted.get("/b"), Some(&e(3)), "the later one wins");
        assert_eq!(unsorted.len(), 2);
    }

    #[test]
    fn skeletons_round_trip() {
        let mut objects = HashMap::new();
        objects.insert(ObjectId::from_bytes([2; 32]), b"node".to_vec());
        objects.insert(ObjectId::from_bytes([3; 32]), b"commit".to_vec());
        let bytes = skeleton_bytes(&objects);
        assert_eq!(parse_skeleton(&bytes), Some(objects));
        let mut b = bytes.clone();
        let last = b.len() - 1;
        b[last] ^= 1;
        assert_eq!(parse_skeleton(&b), None);
        assert_eq!(
            parse_skeleton(&sample().to_bytes()),
            None,
            "an index is no skeleton"
        );
    }

    #[test]
    fn round_trips_and_refuses_anything_else() {
        let ix = sample();
        let bytes = ix.to_bytes();
        assert_eq!(Index::parse(&bytes, Path::new("/w")), Some(ix));
        // Another root, a flipped byte anywhere, a truncation, another version, JSON.
        assert_eq!(Index::parse(&bytes, Path::new("/x")), None);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x20;
            assert_eq!(Index::parse(&b, Path::new("/w")), None, "byte {i}");
        }
        assert_eq!(
            Index::parse(&bytes[..bytes.len() - 1], Path::new("/w")),
            None
        );
        let mut b = bytes.clone();
        b[8] = 1;
        assert_eq!(Index::parse(&b, Path::new("/w")), None);
        assert_eq!(
            Index::parse(br#"{"version":1,"root":"/w"}"#, Path::new("/w")),
            None
        );
    }

    /// Writes `ix` as a new base, then saves `next` after it; returns the file's bytes.
    fn saved_after(dir: &Path, ix: &Index, next: &Index) -> Vec<u8> {
        let path = dir.join("index");
        ix.save(&path).unwrap();
        let mut old = Index::load(&path, Path::new("/w")).unwrap();
        old.load_skeleton(&path);
        next.save_after(&path, Some(&old)).unwrap();
        std::fs::read(&path).unwrap()
    }

    #[test]
    fn a_journal_record_reads_back_as_the_new_index() {
        let dir = tempfile::tempdir().unwrap();
        let ix = sample();
        let mut next = ix.clone();
        next.probe_ns = 200;
        next.tip = Some(ObjectId::from_bytes([9; 32]));
        next.entries.remove("/d");
        next.entries
            .insert("/b", IndexEntry::Symlink { stat: stat(60) });
        next.skeleton
            .insert(ObjectId::from_bytes([4; 32]), b"tree".to_vec());
        let base = ix.to_bytes();
        let bytes = saved_after(dir.path(), &ix, &next);
        assert!(bytes.starts_with(&base), "appended, not rewritten");
        let mut read = Index::load(&dir.path().join("index"), Path::new("/w")).unwrap();
        read.load_skeleton(&dir.path().join("index"));
        assert_eq!(read, next);
        // Nothing changed: an empty record, and the skeleton file is left alone.
        let skeleton = std::fs::read(dir.path().join("index.skeleton")).unwrap();
        read.save_after(&dir.path().join("index"), Some(&read.clone()))
            .unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("index.skeleton")).unwrap(),
            skeleton
        );
        let mut again = Index::load(&dir.path().join("index"), Path::new("/w")).unwrap();
        again.load_skeleton(&dir.path().join("index"));
        assert_eq!(again, next);
    }

    #[test]
    fn a_torn_or_foreign_record_leaves_the_earlier_state_and_forces_a_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let ix = sample();
        let mut next = ix.clone();
        next.probe_ns = 300;
        next.entries.remove("/a");
        let bytes = saved_after(dir.path(), &ix, &next);
        let base = ix.to_bytes().len();
        for cut in base + 1..bytes.len() {
            let read = Index::parse(&bytes[..cut], Path::new("/w")).unwrap();
            assert_eq!(read, ix, "cut at {cut}: the base alone");
            assert!(read.log.appendable().is_none(), "cut at {cut}");
        }
        for i in base..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            let read = Index::parse(&b, Path::new("/w")).unwrap();
            assert_eq!(read, ix, "byte {i} flipped");
        }
        // A record chained onto another base (a process that read the file before
        // someone rewrote it) is not applied.
        let mut other = ix.clone();
        other.probe_ns = 101;
        let mut foreign = other.to_bytes();
        foreign.extend_from_slice(&bytes[base..]);
        assert_eq!(Index::parse(&foreign, Path::new("/w")), Some(other));
        // Saving after a state that cannot be appended to writes a new base.
        let mut torn = Index::parse(&bytes[..bytes.len() - 1], Path::new("/w")).unwrap();
        torn.load_skeleton(&path);
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        next.save_after(&path, Some(&torn)).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), next.to_bytes());
    }

    #[test]
    fn a_long_journal_or_a_stale_skeleton_is_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let mut ix = sample();
        ix.save(&path).unwrap();
        // Many records: the file never grows past base + max(JOURNAL_MIN, base/2).
        for i in 0..2_000i64 {
            let mut old = Index::load(&path, Path::new("/w")).unwrap();
            old.load_skeleton(&path);
            ix.probe_ns = 1_000 + i;
            ix.entries.insert(
                format!("/f{}", i % 7),
                IndexEntry::File {
                    stat: stat(i),
                    digest: Digest::Inline(vec![i as u8; 40]),
                },
            );
            ix.save_after(&path, Some(&old)).unwrap();
            let len = std::fs::metadata(&path).unwrap().len();
            assert!(
                len < ix.to_bytes().len() as u64 + JOURNAL_MIN + 1_000,
                "{len}"
            );
            let read = Index::load(&path, Path::new("/w")).unwrap();
            assert_eq!(read, ix);
            // Nor past JOURNAL_RECORDS records, however small: the save after the
            // last one allowed is a new base.
            assert!(read.log.records <= JOURNAL_RECORDS, "{}", read.log.records);
            if old.log.records == JOURNAL_RECORDS {
                assert_eq!((read.log.records, len), (0, ix.to_bytes().len() as u64));
            }
        }
        // A skeleton holding more than twice what the checkout read is rewritten
        // with what it read.
        let mut old = Index::load(&path, Path::new("/w")).unwrap();
        for b in 0..10u8 {
            old.skeleton.insert(ObjectId::from_bytes([b; 32]), vec![b]);
        }
        old.save(&path).unwrap();
        let mut old = Index::load(&path, Path::new("/w")).unwrap();
        old.load_skeleton(&path);
        assert_eq!(old.skeleton.len(), 10);
        let mut next = old.clone();
        next.skeleton = [(ObjectId::from_bytes([42; 32]), vec![42])].into();
        next.save_after(&path, Some(&old)).unwrap();
        let mut read = Index::load(&path, Path::new("/w")).unwrap();
        read.load_skeleton(&path);
        assert_eq!(read.skeleton, next.skeleton);
    }

    /// A record as large as the base it would follow (every entry restatted, as a
    /// release `rsync`ed over the tree does) becomes the new base, by either save;
    /// a small one after it is appended.
    /// A file entry of stat `i` (its content one chunk).
    fn chunk_file(i: i64) -> IndexEntry {
        IndexEntry::File {
            stat: stat(i),
            digest: Digest::Chunk(ObjectId::from_bytes([i as u8; 32])),
        }
    }

    /// [`sample`] with `n` more files, `/many/fNNNN` of stat `NNNN`.
    fn sample_with_many(n: i64) -> Index {
        let mut ix = sample();
        for i in 0..n {
            ix.entries.insert(format!("/many/f{i:04}"), chunk_file(i));
        }
        ix
    }

    #[test]
    fn a_record_as_large_as_its_base_becomes_the_new_base() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let w = Path::new("/w");
        let mut ix = sample_with_many(3_000);
        let file = chunk_file;
        ix.save(&path).unwrap();
        let base = std::fs::metadata(&path).unwrap().len();
        assert!(base > 2 * JOURNAL_MIN, "{base}");
        let restat = |ix: &mut Index, at: i64| {
            for i in 0..3_000i64 {
                ix.entries.insert(format!("/many/f{i:04}"), file(at + i));
            }
        };
        // save_after: the whole index changed.
        let old = Index::load(&path, w).unwrap();
        restat(&mut ix, 10_000);
        ix.save_after(&path, Some(&old)).unwrap();
        let read = Index::load(&path, w).unwrap();
        assert_eq!(read, ix);
        assert_eq!(read.log.records, 0);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            ix.to_bytes().len() as u64
        );
        // save_delta: the same, from a lazy scan's report.
        let upserts: Vec<(String, IndexEntry)> = (0..3_000i64)
            .map(|i| (format!("/many/f{i:04}"), file(20_000 + i)))
            .collect();
        let delta = Delta {
            probe_ns: 200,
            tip: ix.tip,
            removed: Vec::new(),
            upserts,
        };
        read.save_delta(&path, delta).unwrap();
        let read = Index::load(&path, w).unwrap();
        restat(&mut ix, 20_000);
        ix.probe_ns = 200;
        assert_eq!(read, ix);
        assert_eq!(read.log.records, 0);
        // A one-entry change is appended.
        let delta = Delta {
            probe_ns: 300,
            tip: ix.tip,
            removed: Vec::new(),
            upserts: vec![("/many/f0001".into(), file(30_000))],
        };
        read.save_delta(&path, delta).unwrap();
        let read = Index::load(&path, w).unwrap();
        assert_eq!(read.log.records, 1);
        assert_eq!(read.entries.get("/many/f0001"), Some(&file(30_000)));
    }

    /// A journal holds at most one change in [`JOURNAL_CHANGE_RATIO`] entries,
    /// whatever its bytes: releases of a few dozen changes each are appended until
    /// the next would pass the bound, and that save, by either path, is a new base.
    #[test]
    fn a_journal_holds_at_most_one_change_in_sixteen_entries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let w = Path::new("/w");
        let mut ix = sample_with_many(3_200);
        let file = chunk_file;
        ix.save(&path).unwrap();
        let limit = journal_changes_limit(ix.entries.len());
        assert_eq!(limit, ix.entries.len() / JOURNAL_CHANGE_RATIO);
        // Far within the byte bound: a record of 60 entries is about 5 KB.
        let base = std::fs::metadata(&path).unwrap().len();
        assert!(journal_limit(base) > 100_000, "{base}");
        for round in 0..12i64 {
            let old = Index::load(&path, w).unwrap();
            // 59 files restatted, one added: 60 changes a release.
            let release = |at: i64| {
                let mut upserts: Vec<(String, IndexEntry)> = (0..59)
                    .map(|k| (format!("/many/f{:04}", round * 59 + k), file(at + k)))
                    .collect();
                upserts.push((format!("/new/f{round:02}"), file(at)));
                upserts
            };
            let upserts = release(10_000 * (round + 1));
            for (p, e) in &upserts {
                ix.entries.insert(p.clone(), e.clone());
            }
            ix.probe_ns = 1_000 + round;
            if round % 2 == 0 {
                ix.save_after(&path, Some(&old)).unwrap();
            } else {
                let delta = Delta {
                    probe_ns: ix.probe_ns,
                    tip: ix.tip,
                    removed: Vec::new(),
                    upserts,
                };
                old.save_delta(&path, delta).unwrap();
            }
            let read = Index::load(&path, w).unwrap();
            assert_eq!(read, ix, "round {round}");
            assert!(read.log.changes <= limit, "{} > {limit}", read.log.changes);
            // Appended while the journal's changes stay within the bound.
            if old.log.changes + 60 <= limit {
                assert_eq!(read.log.records, old.log.records + 1, "round {round}");
                assert_eq!(read.log.changes, old.log.changes + 60);
            } else {
                assert_eq!(
                    (read.log.records, read.log.changes),
                    (0, 0),
                    "round {round}"
                );
                assert_eq!(
                    std::fs::metadata(&path).unwrap().len(),
                    ix.to_bytes().len() as u64
                );
            }
        }
    }

    /// Hostile bytes are a typed error naming what is wrong (the caller then reads
    /// every file); a torn journal is not an error but an earlier state.
    #[test]
    fn hostile_bytes_say_why_they_are_no_index() {
        let ix = sample();
        let bytes = ix.to_bytes();
        let w = Path::new("/w");
        assert_eq!(Index::read(b"{\"version\":1}", w), Err(IndexError::Magic));
        assert_eq!(Index::read(b"", w), Err(IndexError::Magic));
        assert_eq!(
            Index::read(&bytes[..10], w),
            Err(IndexError::Truncated { len: 10 })
        );
        let mut b = bytes.clone();
        b[8] = 2;
        assert_eq!(Index::read(&b, w), Err(IndexError::Version { found: 2 }));
        // A declared length beyond the file, or one that overflows.
        let mut b = bytes.clone();
        b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            Index::read(&b, w),
            Err(IndexError::Truncated { .. })
        ));
        let mut b = bytes.clone();
        let last = b.len() - 1;
        b[last] ^= 1;
        assert_eq!(Index::read(&b, w), Err(IndexError::Checksum));
        // A body that hashes right but is not an index body.
        let (framed, _) = frame(MAGIC, &[0xff; 40]);
        assert!(matches!(
            Index::read(&framed, w),
            Err(IndexError::Decode { .. })
        ));
        assert_eq!(
            Index::read(&bytes, Path::new("/x")),
            Err(IndexError::ForeignRoot { root: "/w".into() })
        );
        // A journal record torn mid-record (its length says more than follows) or
        // one that does not chain: the base's state, and the file is rewritten next.
        let mut next = ix.clone();
        next.entries.insert("/e", IndexEntry::Dir { listing: None });
        let record = next.delta_after(&Index::read(&bytes, w).unwrap()).unwrap();
        for cut in [1, 4, 20, record.len() - 1] {
            let mut torn = bytes.clone();
            torn.extend_from_slice(&record[..cut]);
            let read = Index::read(&torn, w).unwrap();
            assert_eq!(read, ix, "cut at {cut}");
            assert_eq!(
                read.log.appendable(),
                None,
                "a torn tail is not appended to"
            );
        }
        let mut whole = bytes.clone();
        whole.extend_from_slice(&record);
        assert_eq!(Index::read(&whole, w).unwrap(), next);
    }

    #[test]
    fn racy_and_changed_stats_are_not_trusted() {
        let ix = sample();
        assert!(ix.clean("/a", &stat(50)).is_some());
        assert!(ix.clean("/a", &stat(51)).is_none(), "changed mtime");
        let mut racy = ix.clone();
        racy.probe_ns = 50;
        assert!(
            racy.clean("/a", &stat(50)).is_none(),
            "mtime not before the probe"
        );
        assert!(
            ix.clean("/d", &stat(50)).is_none(),
            "a directory is no file"
        );
        assert!(ix.clean("/missing", &stat(50)).is_none());
    }
}
