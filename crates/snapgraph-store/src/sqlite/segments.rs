//! Large records outside the B-tree (schema 4): segment files beside the database.
//!
//! A record written into SQLite's pages is copied four times on its way to disk: into
//! the page cache, into the WAL (checksummed), out of the WAL and into the database
//! by the checkpoint. For a first commit of a big tree that is the whole cost of the
//! store's writer thread (BENCHMARKS.md "Stop 37"). A batch holding at least
//! [`SEGMENT_BATCH_MIN`] bytes of large records ([`SEGMENT_MIN`] bytes or more, neither
//! packed nor deltas) writes their bytes once, with one `pwrite` each, into a segment
//! file in the directory `<database>-segments/`, and each object's row holds a
//! reference instead (FORMAT.md section 12, "SQLite layout (schema version 4)"):
//!
//! ```text
//! segment reference = 81 || tag: u8 || segment: u64 || start: u64 || length: u32   (22 bytes)
//!                     the record is tag || <segment file>[start .. start + length]
//! ```
//!
//! The tag rides in the reference, so a tag 0 record's stored bytes are read straight
//! into the buffer the caller gets (no copy to drop the tag).
//!
//! # Rules
//!
//! - **Order.** A segment's bytes are written and synced (`fdatasync`, and the
//!   directory when a file was created) before the transaction that inserts the rows
//!   naming them commits, and all of it happens under that transaction's write lock,
//!   so writers of every process append one at a time, each at the file's end.
//! - **Which file.** The newest row of `segments` (its `AUTOINCREMENT` key never
//!   reuses a committed number) while its file is present and under
//!   [`SEGMENT_SIZE`]; else a new
//!   row and file. A new file is created or truncated: only a writer that died before
//!   its commit can have left one under that number, and nothing refers into it.
//!   Bytes written by a writer that died are left where they are (garbage, reclaimed
//!   by a repack when the segment is mostly dead). A writer that fails takes its
//!   bytes back ([`Appender`]'s drop, [`Written::undo`]): a full disk, the usual
//!   failure here, must not keep the space the next write needs.
//! - **Counts.** `segments.live` and `segments.bytes` count the rows naming the
//!   segment and their records' lengths; a deletion or a repack that moves the last
//!   one deletes the row and, after its commit, the file.
//! - **Reads** verify every record as any other read does. A reference whose file is
//!   gone or too short is read again from a new snapshot once (a repack or a
//!   collection may have moved or deleted the object meanwhile), then reported as
//!   [`StoreError::Corrupt`](crate::StoreError::Corrupt) naming the object and the file.
//! - **Upgrade.** A schema 3 database becomes schema 4 in the first transaction that
//!   writes a segment reference (the table created, the version written), so older
//!   builds keep reading stores that never held one, and refuse those that do.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hashbrown::HashMap;
use rusqlite::{params, OptionalExtension, Transaction};
use snapgraph::ObjectId;

/// The first byte of an `objects.data` value that refers to a record in a segment.
pub const SEGMENTED: u8 = 0x81;
/// A segment reference's length.
pub(super) const SEGMENT_REFERENCE: usize = 1 + 1 + 8 + 8 + 4;
/// Records at least this long (tags 0, 1 and 3; not packed) may go to a segment.
pub const SEGMENT_MIN: usize = 8 * 1024;
/// A batch writes into a segment only when it has at least this many bytes of such
/// records: a small commit keeps one file and one sync.
pub const SEGMENT_BATCH_MIN: usize = 1 << 20;
/// A segment takes no new records once it is this long.
pub const SEGMENT_SIZE: u64 = 64 << 20;

/// The table schema 4 adds.
pub(super) const SEGMENT_TABLE: &str = "CREATE TABLE IF NOT EXISTS segments (
         segment INTEGER PRIMARY KEY AUTOINCREMENT,
         live INTEGER NOT NULL,
         bytes INTEGER NOT NULL
     );";

/// Where a record in a segment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SegmentRef {
    pub tag: u8,
    pub segment: i64,
    pub start: u64,
    pub len: u32,
}

impl SegmentRef {
    pub fn parse(b: &[u8]) -> Option<Self> {
        if b.len() != SEGMENT_REFERENCE || b[0] != SEGMENTED {
            return None;
        }
        Some(Self {
            tag: b[1],
            segment: i64::from_le_bytes(b[2..10].try_into().ok()?),
            start: u64::from_le_bytes(b[10..18].try_into().ok()?),
            len: u32::from_le_bytes(b[18..22].try_into().ok()?),
        })
    }

    pub fn encode(&self) -> [u8; SEGMENT_REFERENCE] {
        let mut out = [0u8; SEGMENT_REFERENCE];
        out[0] = SEGMENTED;
        out[1] = self.tag;
        out[2..10].copy_from_slice(&self.segment.to_le_bytes());
        out[10..18].copy_from_slice(&self.start.to_le_bytes());
        out[18..22].copy_from_slice(&self.len.to_le_bytes());
        out
    }
}

/// Why a segment read failed.
#[derive(Debug)]
pub(super) enum ReadFailure {
    /// The file is absent or shorter than the reference: possibly moved or deleted
    /// since the row was read; worth one more read from a new snapshot.
    Gone(String),
    /// Anything else (an I/O error, a reference of no length).
    Bad(String),
}

impl ReadFailure {
    pub fn reason(self) -> String {
        match self {
            Self::Gone(r) | Self::Bad(r) => r,
        }
    }
}

/// The segment files of one database, and the ones this handle has open for reading.
#[derive(Debug)]
pub(super) struct Segments {
    dir: PathBuf,
    open: Mutex<HashMap<i64, Arc<File>>>,
}

impl Segments {
    /// The segments of the database at `db`: the directory `<db>-segments`.
    pub fn of(db: &Path) -> Self {
        let mut dir = db.as_os_str().to_owned();
        dir.push("-segments");
        Self {
            dir: PathBuf::from(dir),
            open: Mutex::new(HashMap::new()),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Segment `n`'s file.
    pub fn file(&self, n: i64) -> PathBuf {
        self.dir.join(format!("{n}.seg"))
    }

    /// The record `r` names: with `plain` and tag 0, its stored bytes alone.
    pub fn read(&self, r: &SegmentRef, plain: bool) -> Result<Vec<u8>, ReadFailure> {
        let path = self.file(r.segment);
        if r.len == 0 {
            return Err(ReadFailure::Bad(format!(
                "segment reference of no length into {}",
                path.display()
            )));
        }
        let file = self.reader(r.segment).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => {
                ReadFailure::Gone(format!("segment file {} is missing", path.display()))
            }
            _ => ReadFailure::Bad(format!("segment file {}: {e}", path.display())),
        })?;
        // The range is checked against the file before a buffer of the reference's
        // length is allocated (a hostile row may name 4 GiB).
        let size = file
            .metadata()
            .map_err(|e| ReadFailure::Bad(format!("segment file {}: {e}", path.display())))?
            .len();
        if r.start
            .checked_add(u64::from(r.len))
            .is_none_or(|end| end > size)
        {
            return Err(ReadFailure::Gone(format!(
                "segment file {} holds {size} bytes, the reference names {}+{}",
                path.display(),
                r.start,
                r.len
            )));
        }
        let head = usize::from(!(plain && r.tag == super::codec::RAW));
        let mut out = vec![0u8; head + r.len as usize];
        if head == 1 {
            out[0] = r.tag;
        }
        read_exact_at(&file, &mut out[head..], r.start).map_err(|e| {
            let what = format!(
                "segment file {} bytes {}+{}: {e}",
                path.display(),
                r.start,
                r.len
            );
            match e.kind() {
                io::ErrorKind::UnexpectedEof => ReadFailure::Gone(what),
                _ => ReadFailure::Bad(what),
            }
        })?;
        Ok(out)
    }

    /// The references in `rows` whose file is missing or shorter than their range,
    /// each with why (one `stat` per segment).
    pub fn check(&self, rows: &[(ObjectId, SegmentRef)]) -> Vec<(ObjectId, String)> {
        let mut sizes: HashMap<i64, io::Result<u64>> = HashMap::new();
        let mut out = Vec::new();
        for (id, r) in rows {
            let path = self.file(r.segment);
            let size = sizes
                .entry(r.segment)
                .or_insert_with(|| std::fs::metadata(&path).map(|m| m.len()));
            let end = r.start.checked_add(u64::from(r.len));
            let why = match size {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    format!("segment file {} is missing", path.display())
                }
                Err(e) => format!("segment file {}: {e}", path.display()),
                Ok(size) if r.len == 0 || end.is_none_or(|end| end > *size) => format!(
                    "segment file {} holds {size} bytes, the reference names {}+{}",
                    path.display(),
                    r.start,
                    r.len
                ),
                Ok(_) => continue,
            };
            out.push((*id, why));
        }
        out
    }

    fn reader(&self, n: i64) -> io::Result<Arc<File>> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = open.get(&n) {
            return Ok(Arc::clone(f));
        }
        let f = Arc::new(File::open(self.file(n))?);
        open.insert(n, Arc::clone(&f));
        Ok(f)
    }

    /// Forgets this handle's open file of segment `n` (deleted, or read short).
    pub fn forget(&self, n: i64) {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&n);
    }

    /// Deletes the files of `gone` (rows deleted by a committed transaction). Best
    /// effort: a file left behind names no row, and the next repack removes it
    /// ([`orphans`]). How many were deleted.
    pub fn remove(&self, gone: &[i64]) -> u64 {
        let mut removed = 0;
        for &n in gone {
            self.forget(n);
            removed += u64::from(std::fs::remove_file(self.file(n)).is_ok());
        }
        removed
    }

    /// The segment numbers of the files in the directory (other names are ignored),
    /// with their lengths.
    pub fn files(&self) -> io::Result<Vec<(i64, u64)>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let Some(n) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".seg"))
                .and_then(|n| n.parse::<i64>().ok())
            else {
                continue;
            };
            if self.file(n).file_name() == Some(&name) {
                out.push((n, entry.metadata()?.len()));
            }
        }
        out.sort_unstable();
        Ok(out)
    }
}

/// Records being appended under one write transaction.
///
/// Dropped before [`finish`](Self::finish) (an error on the way: a write, a sync or
/// a row that failed, with the transaction still open and its write lock held),
/// it takes back what it wrote: the files it created are deleted, the ones it
/// appended to cut back to their length before. A failed batch so leaves nothing
/// behind, where its bytes used to stay until a repack: on a full disk they kept
/// the space the next commit (and the collection that would free it) needed.
pub(super) struct Appender<'a> {
    segments: &'a Segments,
    /// The segment written to, its file and its length.
    current: Option<(i64, File, u64)>,
    /// Files written to, synced before the commit.
    written: Vec<File>,
    /// Whether a file was created (the directory is synced too).
    created: bool,
    /// Rows' count and bytes to add per segment once the rows are in.
    counts: HashMap<i64, (i64, i64)>,
    /// Every segment file written to, and how: what an undo takes back.
    touched: Vec<Touched>,
}

/// A segment file a batch wrote to.
#[derive(Debug, Clone, Copy)]
struct Touched {
    segment: i64,
    /// Created by the batch (its row is the batch's too).
    created: bool,
    /// Its length before the batch.
    start: u64,
    /// Its length once the batch's records were written.
    end: u64,
}

/// What a finished [`Appender`] wrote, for [`Written::undo`] if the transaction's
/// commit fails.
#[derive(Debug)]
pub(super) struct Written<'a> {
    segments: &'a Segments,
    touched: Vec<Touched>,
}

impl<'a> Appender<'a> {
    /// Begins appending under `tx`: makes the database schema 4 if it is not yet.
    pub fn begin(tx: &Transaction<'_>, segments: &'a Segments) -> rusqlite::Result<Self> {
        tx.execute_batch(SEGMENT_TABLE)?;
        tx.execute(
            "UPDATE meta SET value = 4 WHERE key = 'schema_version' AND value < 4",
            [],
        )?;
        Ok(Self {
            segments,
            current: None,
            written: Vec::new(),
            created: false,
            counts: HashMap::new(),
            touched: Vec::new(),
        })
    }

    /// Writes one record's bytes (without its tag) and returns where they are.
    pub fn append(
        &mut self,
        tx: &Transaction<'_>,
        tag: u8,
        bytes: &[u8],
    ) -> Result<SegmentRef, String> {
        let len = u32::try_from(bytes.len()).map_err(|_| {
            format!(
                "a record of {} bytes is too long for a segment",
                bytes.len()
            )
        })?;
        let full = |at: u64| at > 0 && at + bytes.len() as u64 > SEGMENT_SIZE;
        if self.current.as_ref().is_none_or(|(_, _, at)| full(*at)) {
            self.switch(tx, bytes.len() as u64)?;
        }
        let Some((segment, file, at)) = self.current.as_mut() else {
            return Err("no segment open".into());
        };
        write_all_at(file, bytes, *at).map_err(|e| {
            format!(
                "writing segment file {}: {e}",
                self.segments.file(*segment).display()
            )
        })?;
        let r = SegmentRef {
            tag,
            segment: *segment,
            start: *at,
            len,
        };
        *at += bytes.len() as u64;
        if let Some(t) = self.touched.last_mut() {
            t.end = *at;
        }
        Ok(r)
    }

    /// Moves on to the newest segment, or a new one when it is full (or there is
    /// none) for a record of `need` bytes.
    fn switch(&mut self, tx: &Transaction<'_>, need: u64) -> Result<(), String> {
        if let Some((_, file, _)) = self.current.take() {
            self.written.push(file);
        }
        let fail = |e: rusqlite::Error| format!("choosing a segment: {e}");
        let newest: Option<i64> = if self.written.is_empty() {
            tx.query_row(
                "SELECT segment FROM segments ORDER BY segment DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(fail)?
        } else {
            None // the batch filled it: a new one
        };
        if let Some(n) = newest {
            let path = self.segments.file(n);
            // A file that is gone (a damaged store: its records read as corrupt)
            // takes no more; the batch starts a new segment.
            match OpenOptions::new().write(true).open(&path) {
                Ok(file) => {
                    let at = file
                        .metadata()
                        .map_err(|e| format!("segment file {}: {e}", path.display()))?
                        .len();
                    if at == 0 || at + need <= SEGMENT_SIZE {
                        self.touched.push(Touched {
                            segment: n,
                            created: false,
                            start: at,
                            end: at,
                        });
                        self.current = Some((n, file, at));
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("opening segment file {}: {e}", path.display())),
            }
        }
        tx.execute("INSERT INTO segments (live, bytes) VALUES (0, 0)", [])
            .map_err(fail)?;
        let n = tx.last_insert_rowid();
        if !self.segments.dir.exists() {
            std::fs::create_dir_all(&self.segments.dir).map_err(|e| {
                format!(
                    "creating the segment directory {}: {e}",
                    self.segments.dir.display()
                )
            })?;
            if let Some(parent) = self.segments.dir.parent() {
                sync_dir(parent);
            }
        }
        let path = self.segments.file(n);
        // Touched before it is opened: a file the open left behind (created, then
        // truncation failed) goes too.
        self.touched.push(Touched {
            segment: n,
            created: true,
            start: 0,
            end: 0,
        });
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| format!("creating segment file {}: {e}", path.display()))?;
        self.created = true;
        self.current = Some((n, file, 0));
        Ok(())
    }

    /// Counts a row that now names `r`.
    pub fn count(&mut self, r: &SegmentRef) {
        let c = self.counts.entry(r.segment).or_default();
        c.0 += 1;
        c.1 += i64::from(r.len);
    }

    /// Syncs what was written and adds the rows' counts: call before the commit.
    /// What was written, for [`Written::undo`] should the commit fail; an error
    /// here takes it back at once (the transaction is still open).
    pub fn finish(mut self, tx: &Transaction<'_>) -> Result<Written<'a>, String> {
        if let Some((_, file, _)) = self.current.take() {
            self.written.push(file);
        }
        for file in &self.written {
            file.sync_data()
                .map_err(|e| format!("syncing a segment file: {e}"))?;
        }
        if self.created {
            sync_dir(&self.segments.dir);
        }
        let mut add = tx
            .prepare_cached(
                "UPDATE segments SET live = live + ?2, bytes = bytes + ?3 WHERE segment = ?1",
            )
            .map_err(|e| format!("counting segment rows: {e}"))?;
        for (segment, (rows, bytes)) in &self.counts {
            add.execute(params![segment, rows, bytes])
                .map_err(|e| format!("counting segment rows: {e}"))?;
        }
        Ok(Written {
            segments: self.segments,
            touched: std::mem::take(&mut self.touched),
        })
    }
}

impl Drop for Appender<'_> {
    fn drop(&mut self) {
        // Unfinished: the transaction that would name these bytes is still open
        // (its write lock held: no other writer appends meanwhile) and will not
        // commit.
        self.current = None;
        self.written.clear();
        for t in self.touched.drain(..).rev() {
            take_back(self.segments, &t);
        }
    }
}

impl Written<'_> {
    /// Takes back what the batch wrote after its transaction failed to commit
    /// (rolled back, its write lock released): under a new write transaction on
    /// `conn`, a file the batch created is deleted if no row names its segment, and
    /// one it appended to is cut back, each only if its length is still the one the
    /// batch left (a writer that came in between appended after it, and its bytes
    /// stay: a repack reclaims them). Best effort: whatever is left is garbage no
    /// row names, as before.
    pub fn undo(self, conn: &mut rusqlite::Connection) {
        let Ok(tx) = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        else {
            return;
        };
        // The batch may have made the table (a store's first segment): without
        // it, no row names anything. A read that fails names everything.
        let table = has_table(&tx);
        for t in self.touched.iter().rev() {
            let named = || match table {
                Ok(false) => false,
                Ok(true) => tx
                    .query_row(
                        "SELECT 1 FROM segments WHERE segment = ?1",
                        [t.segment],
                        |_| Ok(()),
                    )
                    .optional()
                    .map_or(true, |r| r.is_some()),
                Err(_) => true,
            };
            let len = std::fs::metadata(self.segments.file(t.segment)).map(|m| m.len());
            if len.is_ok_and(|len| len == t.end) && !(t.created && named()) {
                take_back(self.segments, t);
            }
        }
        // Nothing was written: the lock is simply let go.
        let _ = tx.rollback();
    }
}

/// Deletes the file of `t` if the batch created it, else cuts it back to its length
/// before the batch (best effort).
fn take_back(segments: &Segments, t: &Touched) {
    let path = segments.file(t.segment);
    segments.forget(t.segment);
    if t.created {
        let _ = std::fs::remove_file(&path);
    } else if let Ok(f) = OpenOptions::new().write(true).open(&path) {
        let _ = f.set_len(t.start);
    }
}

/// Whether the database has the `segments` table (schema 4).
pub(super) fn has_table(conn: &rusqlite::Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'segments'",
        [],
        |_| Ok(()),
    )
    .optional()
    .map(|r| r.is_some())
}

/// Takes one row naming `segment` off its counts; the segment's number when that
/// was its last row (its row is deleted: the caller removes the file after commit).
pub(super) fn unlive(tx: &Transaction<'_>, r: &SegmentRef) -> rusqlite::Result<Option<i64>> {
    tx.prepare_cached(
        "UPDATE segments SET live = live - 1, bytes = bytes - ?2 WHERE segment = ?1",
    )?
    .execute(params![r.segment, i64::from(r.len)])?;
    let live: Option<i64> = tx
        .prepare_cached("SELECT live FROM segments WHERE segment = ?1")?
        .query_row([r.segment], |row| row.get(0))
        .optional()?;
    if live.is_some_and(|n| n <= 0) {
        tx.prepare_cached("DELETE FROM segments WHERE segment = ?1")?
            .execute([r.segment])?;
        return Ok(Some(r.segment));
    }
    Ok(None)
}

/// The segments a write transaction `tx` can see, with their live bytes, by number.
pub(super) fn rows(tx: &rusqlite::Connection) -> rusqlite::Result<HashMap<i64, i64>> {
    if !has_table(tx)? {
        return Ok(HashMap::new());
    }
    let mut stmt = tx.prepare_cached("SELECT segment, bytes FROM segments")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// Segment files no row names, found under the write lock of `tx` (no writer is
/// between its append and its commit then): a writer that died before its commit
/// left them, or a deletion that could not remove its file.
pub(super) fn orphans(tx: &Transaction<'_>, segments: &Segments) -> Result<Vec<i64>, String> {
    let named = rows(tx).map_err(|e| format!("reading segments: {e}"))?;
    let files = segments
        .files()
        .map_err(|e| format!("listing {}: {e}", segments.dir.display()))?;
    Ok(files
        .into_iter()
        .filter(|(n, _)| !named.contains_key(n))
        .map(|(n, _)| n)
        .collect())
}

/// Best effort: a directory's entries made durable (not every platform can).
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, at)
}

#[cfg(unix)]
fn write_all_at(file: &File, buf: &[u8], at: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, at)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut at: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, at) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                at += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(windows)]
fn write_all_at(file: &File, mut buf: &[u8], mut at: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_write(file, buf, at) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                buf = &buf[n..];
                at += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database with the tables an appender needs, and its segments.
    fn setup(dir: &Path) -> (rusqlite::Connection, Segments) {
        let db = dir.join("store.db");
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
             INSERT INTO meta VALUES ('schema_version', 3);",
        )
        .unwrap();
        (conn, Segments::of(&db))
    }

    /// Appends `records` of `len` bytes under a new transaction, finishes, and
    /// commits only if `commit`: else the transaction is rolled back as a failed
    /// commit leaves it, and what was written is handed back.
    fn batch<'s>(
        conn: &mut rusqlite::Connection,
        segments: &'s Segments,
        records: usize,
        len: usize,
        commit: bool,
    ) -> Option<Written<'s>> {
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .unwrap();
        let mut appender = Appender::begin(&tx, segments).unwrap();
        for i in 0..records {
            let r = appender.append(&tx, 0, &vec![i as u8; len]).unwrap();
            appender.count(&r);
        }
        let written = appender.finish(&tx).unwrap();
        if commit {
            tx.commit().unwrap();
            None
        } else {
            tx.rollback().unwrap();
            Some(written)
        }
    }

    /// What a batch whose commit failed wrote is taken back once the write lock is
    /// held again: the file it created (no row names it) deleted, the one it
    /// appended to cut back; unless a writer came in between and appended after it,
    /// whose bytes must stay.
    #[test]
    fn a_failed_commit_s_segment_bytes_are_taken_back() {
        let dir = tempfile::tempdir().unwrap();
        let (mut conn, segments) = setup(dir.path());
        let written = batch(&mut conn, &segments, 3, 1000, false).unwrap();
        assert!(segments.file(1).exists());
        written.undo(&mut conn);
        assert!(!segments.file(1).exists());

        batch(&mut conn, &segments, 2, 1000, true);
        let file = segments.file(1);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 2000);
        let written = batch(&mut conn, &segments, 3, 1000, false).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 5000);
        written.undo(&mut conn);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 2000);

        // Another writer appended after the failed batch: nothing is cut.
        let written = batch(&mut conn, &segments, 3, 1000, false).unwrap();
        batch(&mut conn, &segments, 1, 1000, true);
        written.undo(&mut conn);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 6000);
        // And a created file a committed row now names stays.
        let written = batch(&mut conn, &segments, 1, SEGMENT_SIZE as usize, false).unwrap();
        let created = segments.file(2);
        assert!(created.exists());
        batch(&mut conn, &segments, 1, SEGMENT_SIZE as usize, true);
        written.undo(&mut conn);
        assert!(created.exists());
    }

    /// An appender dropped unfinished (an error on the way) takes back at once
    /// what it wrote, in the same transaction.
    #[test]
    fn an_unfinished_appender_takes_its_bytes_back() {
        let dir = tempfile::tempdir().unwrap();
        let (mut conn, segments) = setup(dir.path());
        batch(&mut conn, &segments, 2, 1000, true);
        let tx = conn.transaction().unwrap();
        let mut appender = Appender::begin(&tx, &segments).unwrap();
        appender.append(&tx, 0, &[7; 1000]).unwrap();
        // A record too large for the segment: a second, new file.
        appender
            .append(&tx, 0, &vec![8; SEGMENT_SIZE as usize])
            .unwrap();
        assert!(segments.file(2).exists());
        drop(appender);
        assert_eq!(std::fs::metadata(segments.file(1)).unwrap().len(), 2000);
        assert!(!segments.file(2).exists());
    }
}
