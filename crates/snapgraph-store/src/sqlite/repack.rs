//! Repacking a schema 3 database ([`crate::repack`]): records compressed again at a
//! higher zstd level, records moved out of packs that are mostly dead, the file
//! rebuilt when pages are free.
//!
//! Two passes over `objects` in rowid order (write order, so a version's records
//! stay near each other), each in batches:
//!
//! 1. *Recompress* (when a level is given): every tag 1, 2 or 3 record (inline or in
//!    a pack) is decoded, verified against its id, and encoded again at the level,
//!    whole records against the store's writing dictionary prepared at that level,
//!    deltas against the same base. A record that comes out smaller is swapped in
//!    (into a new pack when it is packable); the others are left where they are.
//! 2. *Sparse packs*: the live bytes of each pack are summed from the references;
//!    the records of a pack whose live records fill less than half of it are
//!    verified and moved, as they are, into new packs, and the pack goes with its
//!    last reference.
//!
//! A batch is read in one read transaction, decoded and encoded outside the lock
//! (on up to four threads), and swapped in one `BEGIN IMMEDIATE` transaction that
//! first re-reads each row and skips it unless it still holds what was read (a
//! writer or a collector got there first). Nothing is added or deleted and no
//! record's depth changes, so a writer under a lease, a concurrent put of the same
//! objects and a sweep all see the same objects before, during and after.
//! Dictionaries are kept: an older build that cached one may still write records
//! against it (FORMAT.md promises writers that dictionaries stay).
//!
//! Then the segments (schema 4, [`super::segments`]): files no row names are removed
//! under the write lock, and the records of a segment whose live records fill less
//! than half of its file (never the newest, which new records go to) are verified and
//! moved, as they are, into the newest; the segment goes with its last reference.

use hashbrown::{HashMap, HashSet};
use rusqlite::types::ValueRef;
use rusqlite::{params, OptionalExtension, TransactionBehavior};
use snapgraph::ObjectId;

use super::segments::{self, SegmentRef};
use super::{packable_parts, read_packed, PackRef, SqliteStore, PACKED, PACK_SIZE};
use crate::codec::{self, Compression};
use crate::error::{DeltaProblem, StoreError};
use crate::repack::{RepackOptions, RepackReport};

/// Rows read per batch at most.
const BATCH_ROWS: i64 = 2048;
/// Bytes of records read per batch, about.
const BATCH_BYTES: usize = 4 << 20;
/// Threads encoding a batch, at most.
const THREADS: usize = 4;

/// Which rows a pass rewrites.
enum Pass<'a> {
    /// Compressed records, encoded again at a level (against a dictionary).
    Recompress {
        level: i32,
        dict: Option<&'a codec::Dictionary>,
    },
    /// Records in these packs, moved as they are.
    Sparse(&'a HashSet<i64>),
}

/// One row being rewritten.
struct Item {
    id: ObjectId,
    /// `objects.data` as read: the swap happens only if the row still holds it.
    old: Vec<u8>,
    /// The record (out of its pack for a reference).
    record: Vec<u8>,
    /// Its length.
    old_len: usize,
    /// The pack `old` refers into.
    pack: Option<i64>,
    /// The record to swap in; `None`: leave the row.
    new: Option<Vec<u8>>,
    /// A delta whose base was absent when its record was decoded: corrupt unless the
    /// row changed meanwhile (a collector deleted both).
    missing_base: Option<ObjectId>,
}

impl SqliteStore {
    /// [`crate::ObjectStore::repack`] of this store.
    pub(super) fn repack_store(&self, options: &RepackOptions) -> Result<RepackReport, StoreError> {
        let mut report = RepackReport {
            file_bytes_before: self.file_bytes()?,
            ..RepackReport::default()
        };
        if let Some(level) = options.level {
            let dict = match self.dictionaries(None)?.for_writing() {
                Some(d) => Some(codec::Dictionary::new(d.bytes().to_vec(), level).map_err(
                    |reason| self.malformed(format!("dicts row {:08x}", d.key()), reason),
                )?),
                None => None,
            };
            self.repack_pass(
                &Pass::Recompress {
                    level,
                    dict: dict.as_ref(),
                },
                &mut report,
            )?;
        }
        let sparse = self.sparse_packs()?;
        if !sparse.is_empty() {
            self.repack_pass(&Pass::Sparse(&sparse), &mut report)?;
        }
        self.repack_segments(&mut report)?;
        if options.vacuum {
            report.vacuumed = self.vacuum_if_free()?;
        }
        report.file_bytes_after = self.file_bytes()?;
        Ok(report)
    }

    /// The database's pages, in bytes (free ones included), and its segment files.
    fn file_bytes(&self) -> Result<u64, StoreError> {
        let fail = self.fail("repack");
        let in_segments: u64 = match &self.segments {
            Some(files) => files
                .files()
                .map_err(|e| self.segment_error(e.to_string()))?
                .iter()
                .map(|(_, len)| len)
                .sum(),
            None => 0,
        };
        Ok(in_segments + self.database_bytes(&fail)?)
    }

    fn segment_error(&self, reason: String) -> StoreError {
        StoreError::backend(
            format!("sqlite repack of the segments of {}", self.path),
            reason,
        )
    }

    /// Removes orphan segment files, then moves the records of sparse segments.
    fn repack_segments(&self, report: &mut RepackReport) -> Result<(), StoreError> {
        let Some(files) = &self.segments else {
            return Ok(());
        };
        let fail = self.fail("repack segments");
        let sparse: HashSet<i64> = {
            let mut conn = self.lock_clear()?;
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(&fail)?;
            // Removed while the write lock is held: a writer could otherwise be
            // given one of these numbers again and create its file.
            let orphans = segments::orphans(&tx, files).map_err(|r| self.segment_error(r))?;
            report.segments_removed += files.remove(&orphans);
            let rows = segments::rows(&tx).map_err(&fail)?;
            tx.finish().map_err(&fail)?;
            let newest = rows.keys().max().copied();
            files
                .files()
                .map_err(|e| self.segment_error(e.to_string()))?
                .into_iter()
                .filter(|(n, len)| {
                    Some(*n) != newest
                        && rows
                            .get(n)
                            .is_some_and(|&live| u64::try_from(live).unwrap_or(0) * 2 < *len)
                })
                .map(|(n, _)| n)
                .collect()
        };
        if sparse.is_empty() {
            return Ok(());
        }
        // Every reference into them (one scan), then batches of about BATCH_BYTES.
        // (A malformed reference is left where it is: reads report it.)
        let moving: Vec<(ObjectId, Vec<u8>, SegmentRef)> = self
            .segment_rows()?
            .into_iter()
            .filter_map(|(id, old, r)| Some((id, old, r?)))
            .filter(|(_, _, r)| sparse.contains(&r.segment))
            .collect();
        let mut rest = &moving[..];
        while !rest.is_empty() {
            let mut size = 0usize;
            let n = rest
                .iter()
                .take_while(|(_, _, r)| {
                    size += r.len as usize;
                    size <= BATCH_BYTES * 8
                })
                .count()
                .max(1);
            let (batch, more) = rest.split_at(n);
            rest = more;
            self.move_segment_records(files, batch, report)?;
        }
        Ok(())
    }

    /// Reads and verifies `batch`'s records, then moves them into the newest segment
    /// in one write transaction that skips rows changed since they were read.
    fn move_segment_records(
        &self,
        files: &segments::Segments,
        batch: &[(ObjectId, Vec<u8>, SegmentRef)],
        report: &mut RepackReport,
    ) -> Result<(), StoreError> {
        let mut records: Vec<Option<Vec<u8>>> = Vec::with_capacity(batch.len());
        for (id, _, r) in batch {
            records.push(match files.read(r, false) {
                Ok(record) => {
                    match record.first() {
                        Some(&codec::DICT) => codec::check(id, self.undict(id, &record)?)?,
                        _ => codec::decode(id, &record)?,
                    };
                    Some(record)
                }
                // Deleted or moved meanwhile, unless the row still names it (below).
                Err(segments::ReadFailure::Gone(_)) => None,
                Err(e) => {
                    return Err(StoreError::Corrupt {
                        id: *id,
                        reason: format!("record in {}: {}", self.path, e.reason()),
                    })
                }
            });
        }
        let fail = self.fail("repack segments");
        let mut conn = self.lock_clear()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&fail)?;
        let mut gone = Vec::new();
        let written;
        {
            let mut appender = segments::Appender::begin(&tx, files).map_err(&fail)?;
            let mut current = tx
                .prepare_cached("SELECT data FROM objects WHERE id = ?1")
                .map_err(&fail)?;
            let mut update = tx
                .prepare_cached("UPDATE objects SET data = ?1 WHERE id = ?2")
                .map_err(&fail)?;
            for ((id, old, r), record) in batch.iter().zip(&records) {
                let now: Option<Vec<u8>> = current
                    .query_row([&id.as_bytes()[..]], |row| row.get(0))
                    .optional()
                    .map_err(&fail)?;
                if now.as_deref() != Some(&old[..]) {
                    report.skipped += 1;
                    continue;
                }
                let Some(record) = record else {
                    return Err(StoreError::Corrupt {
                        id: *id,
                        reason: format!(
                            "record in {}: segment file {} is missing or short",
                            self.path,
                            files.file(r.segment).display()
                        ),
                    });
                };
                let moved = appender
                    .append(&tx, r.tag, &record[1..])
                    .map_err(|reason| self.segment_error(reason))?;
                update
                    .execute(params![&moved.encode()[..], &id.as_bytes()[..]])
                    .map_err(&fail)?;
                appender.count(&moved);
                gone.extend(segments::unlive(&tx, r).map_err(&fail)?);
                report.rewritten += 1;
            }
            written = appender
                .finish(&tx)
                .map_err(|reason| self.segment_error(reason))?;
        }
        if let Err(e) = tx.commit() {
            // Rolled back: the records moved name no row (see `segments`).
            written.undo(&mut conn);
            return Err(fail(e));
        }
        drop(conn);
        report.segments_removed += files.remove(&gone);
        Ok(())
    }

    /// The database's pages, in bytes (free ones included).
    fn database_bytes(
        &self,
        fail: &impl Fn(rusqlite::Error) -> StoreError,
    ) -> Result<u64, StoreError> {
        let conn = self.lock();
        let pages: i64 = conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .map_err(&fail)?;
        let size: i64 = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .map_err(&fail)?;
        Ok(u64::try_from(pages.saturating_mul(size)).unwrap_or(0))
    }

    /// The packs whose live records (summed from the references) fill less than half
    /// of their bytes.
    fn sparse_packs(&self) -> Result<HashSet<i64>, StoreError> {
        let fail = self.fail("repack");
        let conn = self.lock();
        let mut live: HashMap<i64, u64> = HashMap::new();
        {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT data FROM objects WHERE length(data) = 17 AND substr(data, 1, 1) = x'80'",
                )
                .map_err(&fail)?;
            let mut rows = stmt.query([]).map_err(&fail)?;
            while let Some(row) = rows.next().map_err(&fail)? {
                if let ValueRef::Blob(b) = row.get_ref(0).map_err(&fail)? {
                    if let Some(r) = PackRef::parse(b) {
                        *live.entry(r.pack).or_default() += u64::from(r.len);
                    }
                }
            }
        }
        let mut stmt = conn
            .prepare_cached("SELECT pack, length(data) FROM packs")
            .map_err(&fail)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
            .map_err(&fail)?;
        let mut out = HashSet::new();
        for row in rows {
            let (pack, len) = row.map_err(&fail)?;
            let used = live.get(&pack).copied().unwrap_or(0);
            if used.saturating_mul(2) < u64::try_from(len).unwrap_or(0) {
                out.insert(pack);
            }
        }
        Ok(out)
    }

    /// One pass over the rows present when it starts.
    fn repack_pass(&self, pass: &Pass<'_>, report: &mut RepackReport) -> Result<(), StoreError> {
        let last: i64 = {
            let conn = self.lock();
            conn.query_row("SELECT coalesce(max(rowid), 0) FROM objects", [], |r| {
                r.get(0)
            })
            .map_err(self.fail("repack"))?
        };
        let mut after = 0i64;
        while after < last {
            let (mut items, next) = self.repack_read(after, last, pass)?;
            after = next;
            if items.is_empty() {
                continue;
            }
            self.repack_encode(&mut items, pass)?;
            self.repack_swap(items, report)?;
        }
        Ok(())
    }

    /// The next batch of rows a pass rewrites after rowid `after` (up to `last`), and
    /// the rowid to go on from.
    fn repack_read(
        &self,
        after: i64,
        last: i64,
        pass: &Pass<'_>,
    ) -> Result<(Vec<Item>, i64), StoreError> {
        let fail = self.fail("repack");
        let mut conn = self.lock_clear()?;
        let tx = conn.transaction().map_err(&fail)?;
        let mut items = Vec::new();
        let mut next = last;
        {
            let sql = match pass {
                Pass::Recompress { .. } => {
                    "SELECT rowid, id, data FROM objects WHERE rowid > ?1 AND rowid <= ?2
                     AND (length(data) = 17 OR substr(data, 1, 1) IN (x'01', x'02', x'03'))
                     ORDER BY rowid LIMIT ?3"
                }
                Pass::Sparse(_) => {
                    "SELECT rowid, id, data FROM objects WHERE rowid > ?1 AND rowid <= ?2
                     AND length(data) = 17 ORDER BY rowid LIMIT ?3"
                }
            };
            let mut stmt = tx.prepare_cached(sql).map_err(&fail)?;
            let mut rows = stmt
                .query(params![after, last, BATCH_ROWS])
                .map_err(&fail)?;
            let mut bytes = 0usize;
            let mut seen = 0i64;
            let mut at = after;
            let mut full = false;
            while let Some(row) = rows.next().map_err(&fail)? {
                let rowid: i64 = row.get(0).map_err(&fail)?;
                at = rowid;
                seen += 1;
                let key = match row.get_ref(1).map_err(&fail)? {
                    ValueRef::Blob(b) => b.to_vec(),
                    _ => Vec::new(),
                };
                let id = self.id_from(|| format!("objects row {rowid}"), &key)?;
                let old = match row.get_ref(2).map_err(&fail)? {
                    ValueRef::Blob(b) => b.to_vec(),
                    _ => continue, // not a record this pass rewrites; reads report it
                };
                let pack = match old.first() {
                    Some(&PACKED) => match PackRef::parse(&old) {
                        Some(r) => Some(r),
                        None => continue,
                    },
                    _ => None,
                };
                let wanted = match (pass, pack) {
                    (Pass::Sparse(packs), Some(r)) => packs.contains(&r.pack),
                    (Pass::Sparse(_), None) => false,
                    (Pass::Recompress { .. }, Some(_)) => true,
                    (Pass::Recompress { .. }, None) => {
                        matches!(old.first(), Some(&(codec::ZSTD | codec::DICT)))
                            || codec::delta_base(&old).is_some()
                    }
                };
                if wanted {
                    let old_len = pack.map_or(old.len(), |r| r.len as usize);
                    bytes += old_len;
                    items.push((
                        pack,
                        Item {
                            id,
                            record: if pack.is_some() {
                                Vec::new()
                            } else {
                                old.clone()
                            },
                            old,
                            old_len,
                            pack: pack.map(|r| r.pack),
                            new: None,
                            missing_base: None,
                        },
                    ));
                }
                if bytes >= BATCH_BYTES {
                    full = true;
                    break;
                }
            }
            if full || seen == BATCH_ROWS {
                next = at;
            }
            drop(rows);
            // Records in packs, read in pack order through one blob handle.
            let mut order: Vec<usize> =
                (0..items.len()).filter(|&i| items[i].0.is_some()).collect();
            order.sort_by_key(|&i| items[i].0.map(|r| (r.pack, r.start)));
            let mut blob = None;
            for i in order {
                let Some(r) = items[i].0 else { continue };
                match read_packed(&tx, &mut blob, &r) {
                    Ok(record) => items[i].1.record = record,
                    Err(reason) => {
                        return Err(StoreError::Corrupt {
                            id: items[i].1.id,
                            reason: format!("record in {}: {reason}", self.path),
                        })
                    }
                }
            }
        }
        tx.finish().map_err(&fail)?;
        Ok((items.into_iter().map(|(_, item)| item).collect(), next))
    }

    /// Decodes and verifies each item's record and sets the record to swap in.
    fn repack_encode(&self, items: &mut [Item], pass: &Pass<'_>) -> Result<(), StoreError> {
        // The stored bytes of the deltas' bases, verified (their chains decoded).
        let mut want: Vec<ObjectId> = Vec::new();
        let mut wanted = HashSet::new();
        for item in items.iter() {
            if let Some((base, _)) = codec::delta_base(&item.record) {
                if wanted.insert(base) {
                    want.push(base);
                }
            }
        }
        let mut bases: HashMap<ObjectId, Vec<u8>> = HashMap::new();
        if !want.is_empty() {
            let got = crate::ObjectStore::get_many(self, &want)?;
            for (id, stored) in want.into_iter().zip(got) {
                if let Some(stored) = stored {
                    bases.insert(id, stored);
                }
            }
        }
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, THREADS);
        let per = items.len().div_ceil(threads).max(1);
        let bases = &bases;
        std::thread::scope(|s| {
            let handles: Vec<_> = items
                .chunks_mut(per)
                .map(|chunk| {
                    s.spawn(move || {
                        for item in chunk {
                            self.repack_one(item, pass, bases)?;
                        }
                        Ok::<(), StoreError>(())
                    })
                })
                .collect();
            handles.into_iter().try_for_each(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(StoreError::backend(
                        format!("sqlite repack of {}", self.path),
                        "an encoding thread panicked",
                    ))
                })
            })
        })
    }

    /// Decodes, verifies and re-encodes one record.
    fn repack_one(
        &self,
        item: &mut Item,
        pass: &Pass<'_>,
        bases: &HashMap<ObjectId, Vec<u8>>,
    ) -> Result<(), StoreError> {
        let id = item.id;
        let level = match pass {
            Pass::Recompress { level, .. } => Some(*level),
            Pass::Sparse(_) => None,
        };
        if let Some((base, _)) = codec::delta_base(&item.record) {
            let Some(base_bytes) = bases.get(&base) else {
                item.missing_base = Some(base);
                return Ok(());
            };
            let again = codec::recompress_delta(&id, &item.record, base_bytes, level)?;
            item.new = match (again, pass) {
                (Some(r), _) => Some(r),
                (None, Pass::Sparse(_)) => Some(item.record.clone()),
                (None, Pass::Recompress { .. }) => None,
            };
            return Ok(());
        }
        let stored = match item.record.first() {
            Some(&codec::DICT) => codec::check(&id, self.undict(&id, &item.record)?)?,
            _ => codec::decode(&id, &item.record)?,
        };
        item.new = match pass {
            Pass::Sparse(_) => Some(std::mem::take(&mut item.record)),
            Pass::Recompress { level, dict } => {
                let again = codec::encode_with(&stored, Compression::Zstd { level: *level }, *dict);
                (again.len() < item.record.len()).then_some(again)
            }
        };
        Ok(())
    }

    /// Swaps a batch's new records in, in one write transaction.
    fn repack_swap(&self, items: Vec<Item>, report: &mut RepackReport) -> Result<(), StoreError> {
        let fail = self.fail("repack");
        let mut conn = self.lock_clear()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&fail)?;
        {
            let mut current = tx
                .prepare_cached("SELECT data FROM objects WHERE id = ?1")
                .map_err(&fail)?;
            let mut keep: Vec<(Item, Vec<u8>)> = Vec::new();
            for mut item in items {
                let now: Option<Vec<u8>> = current
                    .query_row([&item.id.as_bytes()[..]], |r| r.get(0))
                    .optional()
                    .map_err(&fail)?;
                if now.as_deref() != Some(&item.old[..]) {
                    report.skipped += 1;
                    continue;
                }
                if let Some(base) = item.missing_base {
                    return Err(StoreError::BadDelta {
                        id: item.id,
                        base,
                        problem: DeltaProblem::BaseMissing,
                    });
                }
                if let Some(new) = item.new.take() {
                    keep.push((item, new));
                }
            }
            let packed: Vec<usize> = (0..keep.len())
                .filter(|&i| packable_parts(keep[i].1.first().copied(), keep[i].1.len()))
                .collect();
            let mut values: Vec<Option<Vec<u8>>> = vec![None; keep.len()];
            let mut insert_pack = tx
                .prepare_cached("INSERT INTO packs (data) VALUES (?1)")
                .map_err(&fail)?;
            let mut insert_live = tx
                .prepare_cached("INSERT INTO pack_live (pack, live) VALUES (?1, ?2)")
                .map_err(&fail)?;
            let mut rest = &packed[..];
            while !rest.is_empty() {
                let mut size = 0;
                let n = rest
                    .iter()
                    .take_while(|&&i| {
                        size += keep[i].1.len();
                        size <= PACK_SIZE
                    })
                    .count()
                    .max(1);
                let (these, more) = rest.split_at(n);
                rest = more;
                let bytes: Vec<u8> = these
                    .iter()
                    .flat_map(|&i| &keep[i].1[..])
                    .copied()
                    .collect();
                insert_pack.execute([&bytes]).map_err(&fail)?;
                let pack = tx.last_insert_rowid();
                insert_live
                    .execute(params![pack, these.len() as i64])
                    .map_err(&fail)?;
                report.packs_written += 1;
                let mut start = 0u32;
                for &i in these {
                    let len = keep[i].1.len() as u32;
                    values[i] = Some(PackRef { pack, start, len }.encode().to_vec());
                    start += len;
                }
            }
            let mut update = tx
                .prepare_cached("UPDATE objects SET data = ?1 WHERE id = ?2")
                .map_err(&fail)?;
            let mut unlive = tx
                .prepare_cached("UPDATE pack_live SET live = live - 1 WHERE pack = ?1")
                .map_err(&fail)?;
            let mut emptied: Vec<i64> = Vec::new();
            for ((item, new), value) in keep.iter().zip(values) {
                let value = value.as_deref().unwrap_or(&new[..]);
                update
                    .execute(params![value, &item.id.as_bytes()[..]])
                    .map_err(&fail)?;
                report.rewritten += 1;
                if new.len() < item.old_len {
                    report.recompressed += 1;
                    report.record_bytes_saved += (item.old_len - new.len()) as u64;
                }
                if let Some(pack) = item.pack {
                    unlive.execute([pack]).map_err(&fail)?;
                    emptied.push(pack);
                }
            }
            emptied.sort_unstable();
            emptied.dedup();
            let mut live = tx
                .prepare_cached("SELECT live FROM pack_live WHERE pack = ?1")
                .map_err(&fail)?;
            let mut drop_pack = tx
                .prepare_cached("DELETE FROM packs WHERE pack = ?1")
                .map_err(&fail)?;
            let mut drop_live = tx
                .prepare_cached("DELETE FROM pack_live WHERE pack = ?1")
                .map_err(&fail)?;
            for pack in emptied {
                let left: Option<i64> = live
                    .query_row([pack], |r| r.get(0))
                    .optional()
                    .map_err(&fail)?;
                if left.is_some_and(|n| n <= 0) {
                    drop_pack.execute([pack]).map_err(&fail)?;
                    drop_live.execute([pack]).map_err(&fail)?;
                    report.packs_removed += 1;
                }
            }
        }
        tx.commit().map_err(&fail)
    }

    /// `VACUUM` when at least a sixteenth of the file's pages are free, then the WAL
    /// checkpointed and truncated. Whether it ran.
    fn vacuum_if_free(&self) -> Result<bool, StoreError> {
        let fail = self.fail("repack vacuum");
        let conn = self.lock_clear()?;
        let pages: i64 = conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .map_err(&fail)?;
        let free: i64 = conn
            .query_row("PRAGMA freelist_count", [], |r| r.get(0))
            .map_err(&fail)?;
        if free == 0 || free.saturating_mul(16) < pages {
            return Ok(false);
        }
        conn.execute_batch("VACUUM").map_err(&fail)?;
        // A reader still on an old snapshot keeps part of the WAL: not an error.
        let _: (i64, i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(&fail)?;
        Ok(true)
    }
}
