//! The block table beside an index file (`.snapgraph/index.table`): where each
//! block of [`BLOCK_ENTRIES`] entries of the base's body lies, its first path and
//! its CRC-32, so that a watched turn reads the entries at, above and below the
//! paths the watcher reported, and the journal, instead of the whole base
//! ([`Index::open_part`], [`Opened::read`]). A base of 50,000 entries is about
//! 5 MB: decoded whole, it was most of such a turn (5-7 ms of 8-12 on the guest of
//! BENCHMARKS.md's "Stop 49").
//!
//! ## Bytes
//!
//! `SGITABL\0`, the table's version ([`TABLE_VERSION`], u32 little-endian), the
//! CRC-32 (IEEE, u32 little-endian) of everything after it, then: the BLAKE3 hash
//! and the length (u64 LE) of the base body it describes (as the index file's
//! header has them), the base's entries and regular files (u64 LE each), the
//! length of the body's head (the root, `probe_ns`, `tip` and the entry count:
//! everything before the first entry; u64 LE) and its CRC-32 (u32 LE), the
//! entries per block (u64 LE), then the number of blocks and for each, as
//! varints: its offset in the body and its length, then its CRC-32 (u32 LE) and
//! its first path (a length-prefixed string). Block `i` holds entries `i *
//! per_block` to `(i + 1) * per_block` (fewer in the last), back to back as the
//! body has them.
//!
//! ## When it is used
//!
//! Only when it checks: its own CRC, the base hash and length of the index file's
//! header, the head's CRC and decode (the root, the entry count), each block read
//! its CRC, its decode, its first path and its order. Anything else (no table, one
//! left by an earlier base, a damaged one) reads the whole index, as before. The
//! table is written after each new base (not synced: a table lost in a crash is
//! just absent) and removed before one; a journal appended to the base leaves it
//! valid, since it describes the base only.
//!
//! A partly read index ([`Index::is_part`]) holds every entry at or below each
//! reported path, every ancestor of one and every path the journal changed, with
//! the journal applied, and the whole index's entry and file counts (the base's
//! from the table, the journal's changes counted against the entries read). That
//! is all a lazy scan narrowed to those paths looks up (`crate::scan`), and all
//! [`Index::save_delta`] needs to append a record; a record the journal cannot
//! take reads the whole index again to rewrite it, if the file is still the one
//! read.

use std::collections::{BTreeSet, HashMap};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use snapgraph::ObjectId;

use super::{
    chain, Changes, DeltaIn, Entries, Index, IndexEntry, Tail, Wire, WireOut, BASE_HEADER,
    INDEX_VERSION, MAGIC,
};

/// Entries a block holds (the last one fewer). A partial read costs the table
/// (about 70 bytes a block) plus a block (about 130 bytes an entry) per path: at
/// 256 the table of 50,000 entries is about 14 KB and a block about 33 KB.
pub const BLOCK_ENTRIES: usize = 256;

/// The table's magic bytes.
const TABLE_MAGIC: &[u8; 8] = b"SGITABL\0";

/// The table's format version.
pub const TABLE_VERSION: u32 = 1;

/// The fixed part of a table: magic, version, CRC, base hash, body length,
/// entries, files, head length, head CRC, entries per block.
const FIXED: usize = 8 + 4 + 4 + 32 + 8 + 8 + 8 + 8 + 4 + 8;

/// Where the table of the index file at `index` lives.
pub(super) fn path(index: &Path) -> PathBuf {
    index.with_extension("table")
}

/// Whether the index file at `index` has a block table naming the base whose body
/// hashes to `base` (its magic, version and base hash: a cheap look, not a check of
/// the table, which a partial read makes).
pub(super) fn describes(index: &Path, base: &[u8; 32]) -> bool {
    use std::io::Read;
    let mut head = [0u8; 48];
    std::fs::File::open(path(index))
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| {
            &head[..8] == TABLE_MAGIC
                && le32(&head, 8) == Some(TABLE_VERSION)
                && head[16..48] == base[..]
        })
}

/// How a base's body was laid out as it was encoded ([`super::WireOut::body_after`]).
pub(super) struct Layout {
    /// Bytes before the first entry.
    pub head_len: usize,
    /// Entries per block.
    pub per_block: usize,
    /// Each block's first byte, in the body.
    pub starts: Vec<usize>,
    /// Entries in all.
    pub entries: u64,
    /// Regular files among them.
    pub files: u64,
}

/// The whole index's counts, kept by a partly read one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Counts {
    /// Entries.
    pub entries: usize,
    /// Regular files.
    pub files: u64,
}

/// The table of the base whose body is `body` and hashes to `sum`, laid out as
/// `layout` says; `None` if the layout does not fit the body (a bug: no table is
/// then written, and readers read the whole index).
pub(super) fn bytes(sum: &[u8; 32], body: &[u8], layout: &Layout) -> Option<Vec<u8>> {
    let head = body.get(..layout.head_len)?;
    let mut w = WireOut {
        out: Vec::with_capacity(FIXED + 10 + layout.starts.len() * 72),
    };
    w.out.extend_from_slice(TABLE_MAGIC);
    w.out.extend_from_slice(&TABLE_VERSION.to_le_bytes());
    w.out.extend_from_slice(&[0; 4]);
    w.out.extend_from_slice(sum);
    w.out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    w.out.extend_from_slice(&layout.entries.to_le_bytes());
    w.out.extend_from_slice(&layout.files.to_le_bytes());
    w.out
        .extend_from_slice(&(layout.head_len as u64).to_le_bytes());
    w.out
        .extend_from_slice(&crc32fast::hash(head).to_le_bytes());
    w.out
        .extend_from_slice(&(layout.per_block as u64).to_le_bytes());
    w.varint(layout.starts.len() as u64);
    for (i, &start) in layout.starts.iter().enumerate() {
        let end = layout.starts.get(i + 1).copied().unwrap_or(body.len());
        let block = body.get(start..end)?;
        let first = Wire { rest: block }.bytes().ok()?;
        w.varint(start as u64);
        w.varint((end - start) as u64);
        w.out
            .extend_from_slice(&crc32fast::hash(block).to_le_bytes());
        w.bytes(first);
    }
    let crc = crc32fast::hash(&w.out[16..]);
    w.out[12..16].copy_from_slice(&crc.to_le_bytes());
    Some(w.out)
}

/// Writes the table `bytes` at `path`: a temporary file renamed over it, not
/// synced (see the module docs). A failure leaves no table, which readers take as
/// a reason to read the whole index.
pub(super) fn write(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension(format!("table.tmp-{}", std::process::id()));
    if std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .is_err()
    {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// A table as read (its CRC checked).
#[derive(Debug)]
struct Table {
    sum: [u8; 32],
    body_len: u64,
    entries: u64,
    files: u64,
    head_len: u64,
    head_crc: u32,
    per_block: u64,
    blocks: Vec<Block>,
}

/// One block of a base, as the table describes it.
#[derive(Debug)]
struct Block {
    start: u64,
    len: u64,
    crc: u32,
    first: Vec<u8>,
}

fn le64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The table in `bytes`, if it is one of this version whose CRC holds and whose
/// blocks tile the body in order, each at most the body and none empty.
fn parse(bytes: &[u8]) -> Option<Table> {
    if bytes.get(..8)? != TABLE_MAGIC || le32(bytes, 8)? != TABLE_VERSION {
        return None;
    }
    if bytes.len() < FIXED || crc32fast::hash(&bytes[16..]) != le32(bytes, 12)? {
        return None;
    }
    let sum: [u8; 32] = bytes.get(16..48)?.try_into().ok()?;
    let body_len = le64(bytes, 48)?;
    let entries = le64(bytes, 56)?;
    let files = le64(bytes, 64)?;
    let head_len = le64(bytes, 72)?;
    let head_crc = le32(bytes, 80)?;
    let per_block = le64(bytes, 84)?;
    let mut w = Wire {
        rest: &bytes[FIXED..],
    };
    let n = w.u64().ok()?;
    if per_block == 0 || n != entries.div_ceil(per_block) || files > entries {
        return None;
    }
    // Each block takes at least 7 bytes here: no capacity a hostile count inflates.
    let mut blocks = Vec::with_capacity((n as usize).min(w.rest.len() / 7));
    let mut next = head_len;
    for _ in 0..n {
        let start = w.u64().ok()?;
        let len = w.u64().ok()?;
        let crc = u32::from_le_bytes(w.take(4).ok()?.try_into().ok()?);
        let first = w.bytes().ok()?.to_vec();
        if start != next || len == 0 || start.checked_add(len)? > body_len {
            return None;
        }
        next = start + len;
        blocks.push(Block {
            start,
            len,
            crc,
            first,
        });
    }
    (w.rest.is_empty() && next == body_len.max(head_len) && head_len <= body_len).then_some(Table {
        sum,
        body_len,
        entries,
        files,
        head_len,
        head_crc,
        per_block,
        blocks,
    })
}

/// An index file opened for a partial read ([`Index::open_part`]): its table, the
/// body's head and its journal read and checked, no entry read yet.
pub struct Opened {
    file: std::fs::File,
    table: Table,
    root: Vec<u8>,
    probe_ns: i64,
    tip: Option<ObjectId>,
    /// The journal's records that chained onto the base and decoded, in order.
    records: Vec<DeltaIn>,
    log: Tail,
}

impl Index {
    /// Opens the index at `path` for a partial read ([`Opened::read`]): the file's
    /// header, its block table, the body's head and the journal, checked. `None`
    /// when any of them does not check or describes another root than `root`; the
    /// caller then reads the whole index ([`Index::load`]).
    pub fn open_part(path: &Path, root: &Path) -> Option<Opened> {
        let file = std::fs::File::open(path).ok()?;
        let len = file.metadata().ok()?.len();
        let mut head = [0u8; BASE_HEADER];
        file.read_exact_at(&mut head, 0).ok()?;
        if &head[..8] != MAGIC || le32(&head, 8)? != INDEX_VERSION {
            return None;
        }
        let body_len = le64(&head, 16)?;
        let sum: [u8; 32] = head[24..56].try_into().ok()?;
        let table = parse(&std::fs::read(self::path(path)).ok()?)?;
        let base_len = (BASE_HEADER as u64).checked_add(body_len)?;
        if table.sum != sum || table.body_len != body_len || base_len > len {
            return None;
        }
        // The head: root, probe, tip and the entry count.
        let mut bytes = vec![0u8; usize::try_from(table.head_len).ok()?];
        file.read_exact_at(&mut bytes, BASE_HEADER as u64).ok()?;
        if crc32fast::hash(&bytes) != table.head_crc {
            return None;
        }
        let mut w = Wire { rest: &bytes };
        let found_root = w.bytes().ok()?.to_vec();
        let probe_ns = w.i64().ok()?;
        let tip = w.option_id().ok()?;
        let n = w.len().ok()?;
        if !w.rest.is_empty() || n as u64 != table.entries {
            return None;
        }
        if found_root != root.as_os_str().as_bytes() {
            return None;
        }
        let mut journal = vec![0u8; usize::try_from(len - base_len).ok()?];
        file.read_exact_at(&mut journal, base_len).ok()?;
        let (payloads, mut log) = chain(&sum, &journal, base_len);
        let mut records = Vec::with_capacity(payloads.len());
        for payload in payloads {
            // As `Index::replay`: a record that does not decode ends the journal,
            // and the next save rewrites the file.
            let Ok(delta) = Wire::delta(payload) else {
                log = Tail::default();
                break;
            };
            log.changes += delta.removed.len() + delta.upserts.len();
            records.push(delta);
        }
        Some(Opened {
            file,
            table,
            root: found_root,
            probe_ns,
            tip,
            records,
            log,
        })
    }
}

impl Opened {
    /// The index as far as a scan narrowed to `paths` (workspace paths, none of
    /// them `/`) needs it: see the module docs. `None` when a block read does not
    /// check, or `paths` holds `/` (read the whole index then).
    pub fn read(self, paths: &[String]) -> Option<Index> {
        if paths.iter().any(|p| p == "/" || !p.starts_with('/')) {
            return None;
        }
        // Paths looked up one by one: each reported path, its ancestors and the
        // journal's paths; and the paths below each reported one.
        let mut points: BTreeSet<&str> = BTreeSet::new();
        let mut below: Vec<String> = Vec::with_capacity(paths.len());
        for p in paths {
            points.insert(p);
            for (i, _) in p.match_indices('/').skip(1) {
                points.insert(&p[..i]);
            }
            below.push(format!("{p}/"));
        }
        for r in &self.records {
            points.extend(r.removed.iter().map(String::as_str));
            points.extend(r.upserts.iter().map(|(p, _)| p.as_str()));
        }
        // The blocks that may hold them: the last one whose first path is not after
        // a path, and for a range every block from its start's to the last one
        // starting before its end (`dir/` to `dir0`, `0` following `/`).
        let block_of = |key: &[u8]| {
            self.table
                .blocks
                .partition_point(|b| b.first.as_slice() <= key)
                .checked_sub(1)
        };
        let mut wanted: BTreeSet<usize> = BTreeSet::new();
        wanted.extend(points.iter().filter_map(|p| block_of(p.as_bytes())));
        for prefix in &below {
            let mut end = prefix.clone().into_bytes();
            *end.last_mut()? = b'0';
            let last = self
                .table
                .blocks
                .partition_point(|b| b.first.as_slice() < end.as_slice());
            let first = block_of(prefix.as_bytes()).unwrap_or(0);
            wanted.extend(first..last);
        }
        let keep = |path: &str| {
            points.contains(path) || below.iter().any(|prefix| path.starts_with(prefix.as_str()))
        };
        let mut kept: Vec<(String, IndexEntry)> = Vec::new();
        let mut last: Option<Vec<u8>> = None;
        for i in wanted {
            let block = &self.table.blocks[i];
            let mut bytes = vec![0u8; usize::try_from(block.len).ok()?];
            self.file
                .read_exact_at(&mut bytes, BASE_HEADER as u64 + block.start)
                .ok()?;
            if crc32fast::hash(&bytes) != block.crc {
                return None;
            }
            let count = self
                .table
                .per_block
                .min(self.table.entries - i as u64 * self.table.per_block);
            let mut w = Wire { rest: &bytes };
            for k in 0..count {
                let path = w.bytes().ok()?;
                let entry = w.entry().ok()?;
                if (k == 0 && path != block.first.as_slice())
                    || last.as_deref().is_some_and(|l| l >= path)
                {
                    return None;
                }
                let path = std::str::from_utf8(path).ok()?;
                if keep(path) {
                    kept.push((path.to_string(), entry));
                }
                last = Some(path.as_bytes().to_vec());
            }
            if !w.rest.is_empty() {
                return None;
            }
            // Blocks are read in order, but not all of them: the next one read
            // starts after this one's last path (checked above) wherever it is.
        }
        let mut entries = Entries::from_unsorted(kept);
        // The whole index's counts: the base's, then each journal change counted
        // against what its path held before it (every such path was read).
        let mut counts = Counts {
            entries: usize::try_from(self.table.entries).ok()?,
            files: self.table.files,
        };
        let mut held: HashMap<&str, Option<bool>> = HashMap::new();
        let mut changes = Vec::new();
        let (mut probe_ns, mut tip) = (self.probe_ns, self.tip);
        for r in &self.records {
            probe_ns = r.probe_ns;
            tip = r.tip;
            let after = r
                .removed
                .iter()
                .map(|p| (p.as_str(), None))
                .chain(r.upserts.iter().map(|(p, e)| (p.as_str(), Some(e))));
            for (path, now) in after {
                let was = *held.entry(path).or_insert_with(|| {
                    entries
                        .get(path)
                        .map(|e| matches!(e, IndexEntry::File { .. }))
                });
                let is = now.map(|e| matches!(e, IndexEntry::File { .. }));
                counts.entries = (counts.entries + usize::from(is.is_some()))
                    .saturating_sub(usize::from(was.is_some()));
                counts.files = (counts.files + u64::from(is == Some(true)))
                    .saturating_sub(u64::from(was == Some(true)));
                held.insert(path, is);
            }
            changes.extend(r.removed.iter().map(|p| (p.clone(), None)));
            changes.extend(r.upserts.iter().map(|(p, e)| (p.clone(), Some(e.clone()))));
        }
        entries.merge(Changes::in_order(changes));
        Some(Index {
            root: self.root,
            probe_ns,
            tip,
            entries,
            skeleton: HashMap::new(),
            log: self.log,
            skeleton_log: Tail::default(),
            part: Some(counts),
        })
    }
}

impl Index {
    /// [`Index::save_delta`] of a partly read index whose journal cannot take the
    /// record: the whole index read again and saved with `delta`, if the file is
    /// still the one this index was read from (the same base and journal); else
    /// nothing is saved (another command rewrote or appended to it: the index is a
    /// cache, and the next command that finds it not complete for its tip scans).
    pub(super) fn save_delta_whole(
        &self,
        path: &Path,
        delta: super::Delta,
    ) -> crate::error::Result<()> {
        let root = Path::new(std::ffi::OsStr::from_bytes(&self.root));
        match Index::load(path, root) {
            Some(whole) if whole.log.at.is_some() && whole.log.at == self.log.at => {
                whole.save_delta(path, delta)
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Delta, FileStat};
    use proptest::prelude::*;

    fn stat(n: u64) -> FileStat {
        FileStat {
            size: n,
            mtime_ns: 10,
            ctime_ns: 10,
            ino: n,
            dev: 1,
            mode: 0o100644,
        }
    }

    fn file(n: u64) -> IndexEntry {
        IndexEntry::File {
            stat: stat(n),
            digest: super::super::Digest::Chunk(ObjectId::from_bytes([n as u8; 32])),
        }
    }

    fn dir_entry() -> IndexEntry {
        IndexEntry::Dir { listing: None }
    }

    /// A path of one to four names from a small alphabet, with the names that sort
    /// around a directory's `/` (`d-e`, `d.x`, `d0` beside `d`).
    fn any_path() -> impl Strategy<Value = String> {
        let name = prop_oneof![
            Just("a"),
            Just("b"),
            Just("d"),
            Just("d-e"),
            Just("d.x"),
            Just("d0"),
            Just("é")
        ];
        proptest::collection::vec(name, 1..5).prop_map(|names| format!("/{}", names.join("/")))
    }

    /// `paths` as an index's entries: each path's ancestors directories, the path
    /// a file (kind `k` decides: file, symlink or directory), as a scan records a
    /// tree.
    fn tree(paths: &[(String, u8)]) -> Vec<(String, IndexEntry)> {
        let mut out: std::collections::BTreeMap<String, IndexEntry> = Default::default();
        for (i, (p, k)) in paths.iter().enumerate() {
            for (at, _) in p.match_indices('/').skip(1) {
                out.insert(p[..at].to_string(), dir_entry());
            }
            let e = match k % 3 {
                0 => file(i as u64),
                1 => IndexEntry::Symlink {
                    stat: stat(i as u64),
                },
                _ => dir_entry(),
            };
            out.entry(p.clone()).or_insert(e);
        }
        out.into_iter().collect()
    }

    /// An index of `entries` saved at `path` in blocks of `per_block`.
    fn saved(path: &Path, entries: Vec<(String, IndexEntry)>, per_block: usize) -> Index {
        let mut ix = Index::new(Path::new("/w"), 100);
        ix.tip = Some(ObjectId::from_bytes([7; 32]));
        ix.entries = Entries::from_unsorted(entries);
        let base = ix.rewritten_in_blocks(
            ix.probe_ns,
            ix.tip.as_ref(),
            ix.entries.len(),
            ix.entries.iter(),
            per_block,
        );
        base.write(path).unwrap();
        Index::load(path, Path::new("/w")).unwrap()
    }

    /// Whether `path` is one a partial read for `watched` and a journal of
    /// `journal` paths must hold as the whole index does.
    fn covered(path: &str, watched: &[String], journal: &BTreeSet<String>) -> bool {
        journal.contains(path)
            || watched.iter().any(|w| {
                w == path
                    || w.starts_with(&format!("{path}/"))
                    || path.starts_with(&format!("{w}/"))
            })
    }

    fn assert_part_of(part: &Index, whole: &Index, watched: &[String], journal: &BTreeSet<String>) {
        assert!(part.is_part());
        assert_eq!(part.tip, whole.tip);
        assert_eq!(part.probe_ns, whole.probe_ns);
        assert_eq!(part.entry_count(), whole.entries.len());
        assert_eq!(part.file_count(), whole.file_count());
        for (p, e) in part.entries.iter() {
            assert_eq!(
                whole.entries.get(p),
                Some(e),
                "{p} read other than the whole has it"
            );
        }
        for (p, e) in whole.entries.iter() {
            if covered(p, watched, journal) {
                assert_eq!(
                    part.entries.get(p),
                    Some(e),
                    "{p} missing from the part read"
                );
            }
        }
        for w in watched {
            assert_eq!(
                part.entries.below(w).collect::<Vec<_>>(),
                whole.entries.below(w).collect::<Vec<_>>(),
                "below {w}"
            );
        }
    }

    proptest! {
        /// A partial read for any reported paths holds, for every path at, above or
        /// below one of them and every path its journal changed, what the whole index
        /// holds, and the whole index's counts, tip and probe: over any block size
        /// (one entry a block to all in one), with journal records that add, change
        /// and remove entries.
        #[test]
        fn a_partial_read_holds_what_the_whole_holds_where_it_looks(
            paths in proptest::collection::vec((any_path(), any::<u8>()), 0..40),
            per_block in 1usize..9,
            deltas in proptest::collection::vec(
                (proptest::collection::vec(any_path(), 0..4),
                 proptest::collection::vec((any_path(), any::<bool>()), 0..4)),
                0..4),
            watched in proptest::collection::vec(any_path(), 0..4),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("index");
            let mut ix = saved(&path, tree(&paths), per_block);
            let mut journal = BTreeSet::new();
            for (k, (removed, upserts)) in deltas.into_iter().enumerate() {
                let delta = Delta {
                    probe_ns: 200 + k as i64,
                    tip: Some(ObjectId::from_bytes([k as u8; 32])),
                    removed: removed.clone(),
                    upserts: upserts
                        .iter()
                        .map(|(p, f)| (p.clone(), if *f { file(900 + k as u64) } else { dir_entry() }))
                        .collect(),
                };
                journal.extend(removed);
                journal.extend(upserts.into_iter().map(|(p, _)| p));
                ix.save_delta(&path, delta).unwrap();
                ix = Index::load(&path, Path::new("/w")).unwrap();
            }
            let watched = crate::scan::minimal(watched);
            let part = Index::open_part(&path, Path::new("/w"))
                .expect("the table checks")
                .read(&watched)
                .expect("the blocks check");
            assert_part_of(&part, &ix, &watched, &journal);
        }
    }

    fn many() -> Vec<(String, IndexEntry)> {
        (0..600)
            .flat_map(|i| {
                let d = format!("/p{:02}", i / 20);
                [(d.clone(), dir_entry()), (format!("{d}/f{i:03}"), file(i))]
            })
            .collect()
    }

    #[test]
    fn a_partial_read_reads_the_blocks_of_its_paths_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let whole = saved(&path, many(), BLOCK_ENTRIES);
        let watched = vec!["/p07/f140".to_string()];
        let part = Index::open_part(&path, Path::new("/w"))
            .unwrap()
            .read(&watched)
            .unwrap();
        assert_part_of(&part, &whole, &watched, &BTreeSet::new());
        // The file and its directory: nothing else read is kept.
        assert_eq!(part.entries.len(), 2);
        assert_eq!(part.entry_count(), 630);
        assert_eq!(part.file_count(), 600);
        // Nothing reported: the counts alone.
        let none = Index::open_part(&path, Path::new("/w"))
            .unwrap()
            .read(&[])
            .unwrap();
        assert_eq!((none.entries.len(), none.entry_count()), (0, 630));
    }

    #[test]
    fn a_table_that_does_not_check_means_a_whole_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        saved(&path, many(), 64);
        let table = super::path(&path);
        let good = std::fs::read(&table).unwrap();
        let w = Path::new("/w");
        assert!(Index::open_part(&path, w).is_some());
        // Another root.
        assert!(Index::open_part(&path, Path::new("/v")).is_none());
        // Any byte of the table changed, or the table cut short.
        for at in [
            0,
            9,
            13,
            20,
            50,
            60,
            70,
            80,
            90,
            good.len() / 2,
            good.len() - 1,
        ] {
            let mut bad = good.clone();
            bad[at] ^= 0x40;
            std::fs::write(&table, &bad).unwrap();
            assert!(Index::open_part(&path, w).is_none(), "byte {at} changed");
        }
        std::fs::write(&table, &good[..good.len() - 3]).unwrap();
        assert!(Index::open_part(&path, w).is_none());
        // A table left from another base.
        std::fs::write(&table, &good).unwrap();
        let mut other = Index::load(&path, w).unwrap();
        other.probe_ns += 1;
        crate::repo::write_atomic(&path, &other.to_bytes()).unwrap();
        assert!(Index::open_part(&path, w).is_none());
        // No table at all.
        std::fs::remove_file(&table).unwrap();
        assert!(Index::open_part(&path, w).is_none());
    }

    #[test]
    fn a_damaged_block_fails_the_partial_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        saved(&path, many(), 64);
        let opened = Index::open_part(&path, Path::new("/w")).unwrap();
        let block = &opened.table.blocks[3];
        let at = BASE_HEADER as u64 + block.start + block.len / 2;
        drop(opened);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[at as usize] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let opened = Index::open_part(&path, Path::new("/w")).unwrap();
        let first = String::from_utf8(opened.table.blocks[3].first.clone()).unwrap();
        assert!(opened.read(&[first]).is_none());
        // The whole read finds the damage too.
        assert!(Index::load(&path, Path::new("/w")).is_none());
    }

    #[test]
    fn a_partial_index_whose_journal_is_full_saves_the_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let w = Path::new("/w");
        let mut whole = saved(&path, many(), 64);
        for k in 0..super::super::JOURNAL_RECORDS {
            let delta = Delta {
                probe_ns: 200 + k as i64,
                tip: whole.tip,
                removed: Vec::new(),
                upserts: vec![("/p01/f020".into(), file(5000 + k as u64))],
            };
            whole.save_delta(&path, delta).unwrap();
            whole = Index::load(&path, w).unwrap();
        }
        let watched = vec!["/p09".to_string()];
        let part = Index::open_part(&path, w).unwrap().read(&watched).unwrap();
        let delta = Delta {
            probe_ns: 999,
            tip: Some(ObjectId::from_bytes([9; 32])),
            removed: vec!["/p09/f180".into()],
            upserts: vec![("/p09/new".into(), file(7))],
        };
        let before = std::fs::metadata(&path).unwrap().len();
        part.save_delta(&path, delta.clone()).unwrap();
        let mut expected = whole.clone();
        expected.apply(delta.clone());
        let saved = Index::load(&path, w).unwrap();
        assert_eq!(saved, expected);
        assert!(
            std::fs::metadata(&path).unwrap().len() < before,
            "rewritten as one base"
        );
        // A new base has a table again, and the part read of it agrees.
        let again = Index::open_part(&path, w).unwrap().read(&watched).unwrap();
        assert_part_of(&again, &saved, &watched, &BTreeSet::new());
        // A partly read index of a file another command changed since saves nothing.
        let stale = Index::open_part(&path, w).unwrap().read(&watched).unwrap();
        let mut other = saved.clone();
        other.probe_ns += 5;
        crate::repo::write_atomic(&path, &other.to_bytes()).unwrap();
        let mut full = stale.clone();
        full.log = Tail::default();
        full.save_delta(&path, delta).unwrap();
        assert_eq!(Index::load(&path, w).unwrap(), other);
    }

    #[test]
    fn a_base_without_its_table_is_rewritten_once_then_appended_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let w = Path::new("/w");
        let mut ix = Index::new(w, 100);
        ix.tip = Some(ObjectId::from_bytes([7; 32]));
        ix.entries = Entries::from_unsorted(many());
        // As an earlier build wrote it: no table.
        crate::repo::write_atomic(&path, &ix.to_bytes()).unwrap();
        let edit = |k: u64| Delta {
            probe_ns: 300 + k as i64,
            tip: ix.tip,
            removed: Vec::new(),
            upserts: vec![("/p02/f041".into(), file(k))],
        };
        let read = Index::load(&path, w).unwrap();
        assert!(!describes(&path, &read.log.base));
        read.save_delta(&path, edit(1)).unwrap();
        let read = Index::load(&path, w).unwrap();
        assert!(describes(&path, &read.log.base), "rewritten with its table");
        assert_eq!(read.log.records, 0);
        read.save_delta(&path, edit(2)).unwrap();
        let read = Index::load(&path, w).unwrap();
        assert_eq!(read.log.records, 1, "then appended to");
        assert!(describes(&path, &read.log.base));
        // A table of another base (an earlier build rewrote the index after this
        // one): rewritten again.
        let mut other = read.clone();
        other.probe_ns += 1;
        crate::repo::write_atomic(&path, &other.to_bytes()).unwrap();
        let read = Index::load(&path, w).unwrap();
        assert!(!describes(&path, &read.log.base));
        read.save_delta(&path, edit(3)).unwrap();
        let read = Index::load(&path, w).unwrap();
        assert!(describes(&path, &read.log.base));
        assert_eq!(read.log.records, 0);
    }
}
