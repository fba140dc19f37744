//! The SQLite adapter: one database file holding objects, refs and reflogs.
//!
//! ```text
//! meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL)          -- 'schema_version' = 3 or 4 (1, 2: upgraded to 3 at open)
//! objects(id BLOB PRIMARY KEY, data BLOB NOT NULL)             -- data: codec::encode, a pack or a segment reference
//! packs(pack INTEGER PRIMARY KEY, data BLOB NOT NULL)          -- records back to back (schema 3)
//! pack_live(pack INTEGER PRIMARY KEY, live INTEGER NOT NULL)   -- objects rows naming the pack
//! dicts(dict INTEGER PRIMARY KEY, data BLOB NOT NULL)          -- zstd dictionaries by key (schema 3)
//! segments(segment INTEGER PRIMARY KEY AUTOINCREMENT,
//!          live INTEGER NOT NULL, bytes INTEGER NOT NULL)      -- files <db>-segments/N.seg (schema 4)
//! refs(name TEXT PRIMARY KEY, id BLOB NOT NULL)
//! reflog(seq INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL,
//!        old BLOB, new BLOB, message TEXT NOT NULL)           -- index on (name, seq)
//! ```
//!
//! # Durability and concurrency
//!
//! The database runs in WAL mode with `synchronous=FULL`: every committed transaction
//! (a `put_many`, a `delete_many`, an `update_refs`) has its WAL frames fsynced before
//! the call returns, so an object put or a ref move that returned survives a process
//! kill *and* a power loss. `synchronous=NORMAL` would survive a process kill only (WAL
//! mode defers the fsync to checkpoints); the saving is one fsync per transaction.
//! Measured (`adapter_figures`, a shared virtual disk): a ref move with its reflog row
//! ran at 2,400/s with FULL against 8,300/s with NORMAL; objects are written in
//! batches, one fsync per `put_many`, where it does not show. Hundreds to thousands of
//! ref moves a second is plenty, and losing an acknowledged one is not acceptable.
//!
//! Every write runs in a `BEGIN IMMEDIATE` transaction, so a writer takes the database
//! write lock before it reads anything: a compare-and-swap reads the refs it checks and
//! writes them under one lock, and concurrent writers (threads of one process sharing
//! the store, other [`SqliteStore`]s, other processes) serialize instead of failing.
//! A busy database is waited for up to 30 seconds (`busy_timeout`) before the call
//! fails with a backend error. Readers never block writers (WAL). Opening a
//! database whose schema is current reads its version and writes nothing, so a
//! command that only reads takes no write lock.
//!
//! One connection behind a mutex serves all threads of one `SqliteStore`: SQLite
//! serializes writers anyway, and objects are decoded and verified outside the lock.
//!
//! # Batches
//!
//! `get_many` and `has_many` run one cached single-row statement per id
//! (`WHERE id = ?1`), all inside one read transaction so the answer is one snapshot
//! and comes in the order asked. Measured on 10,000 ids (`adapter_figures`), this beat
//! `id IN (?, ?, ...)` in chunks of 500 for both: 78 against 88 ms for gets, 13.5
//! against 29.6 ms for presence (answered from the primary-key index alone), as the
//! `IN` list costs a temporary B-tree and the rows a map back to the asked order.
//! `put_many` encodes (compresses) before taking the lock, then
//! inserts with `INSERT OR IGNORE` in one transaction.
//!
//! The objects table keeps its rowid although ids are its key: a `WITHOUT ROWID`
//! table is an index B-tree, whose cells keep at most about a quarter of a page
//! locally, so every record above ~1 KB (most compressed objects) spills its tail
//! into an overflow page of its own. Measured on 4 KiB text objects compressed to
//! ~1.4 KB, the file was as large as with no compression at all. A rowid table keeps
//! records up to nearly a page inline; the price is the id stored twice (table and
//! primary-key index) and two B-tree searches per lookup.
//!
//! # Packs (schema 3)
//!
//! Records inline in the table's leaf pages fill them badly: compressed chunks of 1 to
//! 8 KB land next-fit in 8 KiB pages, and the 30 synthetic releases of
//! `benches/peers/run.sh` left 2.2 MB of 11.7 MB unused that way (`dbstat`), a quarter
//! of the file for 8.7 MB of records. So a batch's zstd records (tag 1) of
//! [`PACK_MIN`] to [`PACK_MAX`] bytes are written back to back into rows of `packs`
//! (at most [`PACK_SIZE`] bytes each: one long blob fills its overflow pages), and
//! each object's row holds a 17-byte reference instead (FORMAT.md section 12, schema
//! 3). A read follows the reference through one incremental-blob handle per read
//! batch, reopened only when the pack changes. Delta records (tag 2) stay inline:
//! they are small, pack densely in leaves anyway, and `for_each_delta` reads their
//! headers from the table alone. A commit still writes only its own records (one
//! pack per batch of new records), and reads still verify every object.
//!
//! # Segments (schema 4)
//!
//! A batch with at least 1 MiB of large records (8 KiB or more, not packed, not
//! deltas: a big first commit, an import) writes their bytes once into segment files
//! beside the database instead of through SQLite's pages, WAL and checkpoint; the rows
//! hold 22-byte references. The `segments` module has the rules (order of writes and
//! syncs, which file, counts, reads racing a repack, the lazy upgrade to schema 4).
//! A copy of a store is the database file and its `<db>-segments` directory
//! ([`SqliteStore::segment_dir`]).
//!
//! # Repacking
//!
//! [`ObjectStore::repack`] (`snapgraph gc`) compresses records again at a higher
//! level and moves live records out of packs that are mostly dead, then vacuums; it
//! rewrites encodings only, never which objects are held or a delta's depth, so it
//! runs beside writers and collectors (the `repack` submodule's docs).

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, OpenFlags, TransactionBehavior};
use snapgraph::ObjectId;

use crate::codec::{self, Compression};
use crate::error::StoreError;
use crate::known::Known;
use crate::refs::apply_updates;
use crate::store::{validate_ref_name, ObjectStore, ReadCheck, RefStore, RefUpdate, ReflogEntry};

mod repack;
mod segments;

use segments::{SegmentRef, Segments};
pub use segments::{SEGMENTED, SEGMENT_BATCH_MIN, SEGMENT_MIN, SEGMENT_SIZE};

/// The newest schema version this build reads and writes.
pub const SCHEMA_VERSION: i64 = 4;
/// The version a new database starts at, and schemas 1 and 2 are upgraded to at open:
/// schema 4 is written only with the first segment reference ([`segments`]).
const SCHEMA_AT_OPEN: i64 = 3;

/// The first byte of an `objects.data` value that refers to a record in a pack:
/// `PACKED || pack: u64 LE || start: u32 LE || length: u32 LE` (codec tags are below
/// 0x80, so the two never meet).
pub const PACKED: u8 = 0x80;
const REFERENCE: usize = 1 + 8 + 4 + 4;

/// zstd records (tag 1) at least this long go into packs; shorter ones pack densely in
/// the table's leaves already and would gain nothing from a 17-byte reference.
pub const PACK_MIN: usize = 256;
/// zstd records longer than this stay inline: they fill their own overflow pages.
pub const PACK_MAX: usize = 64 * 1024;
/// A pack is closed at this many bytes: a read walks its overflow chain (128 pages of
/// 8 KiB) to the record's offset.
pub const PACK_SIZE: usize = 1 << 20;

/// Tag 0 records of at least this many stored bytes are written through an
/// incremental-blob handle into a row of zeros (one copy of the bytes instead of
/// four); smaller ones, which fit a page or two, are bound as values.
pub const BLOB_WRITE_MIN: usize = 8 * 1024;

/// The tables schema 3 adds.
const PACK_TABLES: &str = "CREATE TABLE IF NOT EXISTS dicts (
         dict INTEGER PRIMARY KEY,
         data BLOB NOT NULL
     );
     CREATE TABLE IF NOT EXISTS packs (
         pack INTEGER PRIMARY KEY,
         data BLOB NOT NULL
     );
     CREATE TABLE IF NOT EXISTS pack_live (
         pack INTEGER PRIMARY KEY,
         live INTEGER NOT NULL
     );";

/// How long a writer waits for another one to finish before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// How many ids `for_each_id` reads per page (the lock is released between pages).
const ID_PAGE: usize = 4096;

/// Options of a [`SqliteStore`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SqliteOptions {
    /// How objects are compressed at rest (zstd level 1 by default).
    pub compression: Compression,
    /// How many bytes at the start of the database file reads map into memory
    /// (SQLite's `mmap_size`) instead of copying each page in with a `pread`; 0, the
    /// default, maps nothing. A read that walks a pack's overflow chain (a record at
    /// an offset in a pack is found page by page) then touches the pages in place
    /// (the CLI's switch between releases: a quarter faster). Mapped pages count in the
    /// process's resident set, hence the bound. The price: a process that truncates
    /// the file beneath a reader that mapped it (SQLite never does, but a `cp` over
    /// it would) kills the reader with `SIGBUS` instead of failing its read, so a
    /// library embedded in another program leaves it off; the CLI turns it on
    /// (SECURITY.md). The file's segments are read as before.
    pub mmap_bytes: u64,
}

/// What is wrong with a database the adapter refuses or a record it cannot read. It
/// comes as the source of a [`StoreError::Backend`] whose context names the path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqliteError {
    /// The file exists but is not an SQLite database.
    #[error("{path} is not an SQLite database")]
    NotADatabase {
        /// The file.
        path: String,
    },
    /// The database was written by a newer version of this adapter.
    #[error("{path} has snapgraph schema version {found}; this build knows up to {supported}")]
    NewerSchema {
        /// The database file.
        path: String,
        /// The version the file records.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// A row that does not have the shape the schema promises.
    #[error("{what} in {path} is malformed: {reason}")]
    Malformed {
        /// The database file.
        path: String,
        /// The row (table and key).
        what: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// A store in one SQLite database file (or in memory).
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    /// The file, as errors name it (`:memory:` for an in-memory database).
    path: String,
    compression: Compression,
    /// The dictionaries read from `dicts` (or written by this handle), by key.
    dicts: Mutex<Dicts>,
    /// Trees and manifest nodes this handle verified ([`crate::known`]).
    known: Known,
    /// The segment files beside the database (none in memory).
    segments: Option<Segments>,
    /// Whether reads share one read transaction ([`ObjectStore::share_reads`]).
    shared: std::sync::atomic::AtomicBool,
}

/// The dictionaries a store handle knows.
#[derive(Debug, Default)]
struct Dicts {
    /// Whether `dicts` was read at least once.
    loaded: bool,
    by_key: hashbrown::HashMap<u32, Arc<codec::Dictionary>>,
}

impl Dicts {
    /// The dictionary new records are compressed against: the one of smallest key
    /// (several exist only when writers raced to make the first).
    fn for_writing(&self) -> Option<Arc<codec::Dictionary>> {
        self.by_key
            .iter()
            .min_by_key(|(k, _)| **k)
            .map(|(_, d)| Arc::clone(d))
    }
}

impl SqliteStore {
    /// Opens the database at `path`, creating the file and the schema if needed, with
    /// default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens the database at `path`, creating the file and the schema if needed.
    ///
    /// Fails with a [`StoreError::Backend`] naming the path if the file cannot be
    /// opened or created, is not an SQLite database ([`SqliteError::NotADatabase`]) or
    /// has a newer schema ([`SqliteError::NewerSchema`]).
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, StoreError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| open_error(&shown, e))?;
        // Resolved now, as SQLite resolves the database's path for its WAL: a later
        // change of the working directory must not move the segments, nor may a
        // symbolic link to the file give them a second home.
        let real = std::fs::canonicalize(path)
            .or_else(|_| std::path::absolute(path))
            .unwrap_or_else(|_| path.into());
        let segments = Segments::of(&real);
        Self::init(conn, shown, options, Some(segments))
    }

    /// A fresh database in memory (gone when dropped), with default options.
    pub fn in_memory() -> Result<Self, StoreError> {
        Self::in_memory_with(SqliteOptions::default())
    }

    /// A fresh database in memory (gone when dropped).
    pub fn in_memory_with(options: SqliteOptions) -> Result<Self, StoreError> {
        let shown = ":memory:".to_string();
        let conn = Connection::open_in_memory().map_err(|e| open_error(&shown, e))?;
        Self::init(conn, shown, options, None)
    }

    fn init(
        mut conn: Connection,
        path: String,
        options: SqliteOptions,
        segments: Option<Segments>,
    ) -> Result<Self, StoreError> {
        let on_disk = segments.is_some();
        let fail = |e| open_error(&path, e);
        conn.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
        if on_disk {
            // 8 KiB pages for a new file (a no-op on an existing one): objects are
            // mostly chunks of 4 to 64 KiB, which 4 KiB pages split into long
            // overflow chains. Measured (`adapter_figures`, 410 MB of 16 KiB random
            // and 4 KiB text objects): 4 KiB pages put 71 MB/s, get 293 MB/s, file
            // 401 MB; 8 KiB 96 MB/s, 422 MB/s, 426 MB; 16 KiB 105 MB/s, 447 MB/s,
            // 446 MB (slack in the last overflow page grows with the page).
            conn.pragma_update(None, "page_size", 8_192).map_err(fail)?;
            // The first read of the file: a file that is not a database fails here.
            let mode: String = conn
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .map_err(fail)?;
            if !mode.eq_ignore_ascii_case("wal") {
                let mode: String = conn
                    .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
                    .map_err(fail)?;
                if !mode.eq_ignore_ascii_case("wal") {
                    return Err(StoreError::backend(
                        format!("sqlite open {path}"),
                        format!("could not switch to WAL mode (journal_mode is {mode})"),
                    ));
                }
            }
        }
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(fail)?;
        // A 64 MiB page cache (negative: KiB) and a WAL checkpointed every 4,096
        // pages (32 MiB) instead of every 1,000: fewer, larger checkpoints.
        conn.pragma_update(None, "cache_size", -65_536)
            .map_err(fail)?;
        conn.pragma_update(None, "wal_autocheckpoint", 4_096)
            .map_err(fail)?;
        if on_disk && options.mmap_bytes > 0 {
            let bytes = i64::try_from(options.mmap_bytes).unwrap_or(i64::MAX);
            conn.pragma_update(None, "mmap_size", bytes).map_err(fail)?;
        }
        conn.set_prepared_statement_cache_capacity(32);

        // A database of this schema needs no write, so no write lock: its version is
        // read first (a read transaction). Anything else (no schema yet, an older or
        // newer one, an error) is decided under the write lock below, which reads it
        // again.
        let current: Option<i64> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .ok();
        if current.is_some_and(|v| (SCHEMA_AT_OPEN..=SCHEMA_VERSION).contains(&v)) {
            return Ok(Self {
                conn: Mutex::new(conn),
                path,
                compression: options.compression,
                dicts: Mutex::new(Dicts::default()),
                known: Known::default(),
                shared: Default::default(),
                segments,
            });
        }
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
        )
        .map_err(fail)?;
        let version: Option<i64> = tx
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })
            .map_err(fail)?;
        match version {
            Some(found) if found > SCHEMA_VERSION => {
                return Err(StoreError::backend(
                    format!("sqlite open {path}"),
                    SqliteError::NewerSchema {
                        path: path.clone(),
                        found,
                        supported: SCHEMA_VERSION,
                    },
                ));
            }
            Some(SCHEMA_AT_OPEN..=SCHEMA_VERSION) => {}
            Some(_) => {
                // Schema 1 lacks delta records (tag 2), schema 2 lacks packs: every
                // record either holds reads the same, so the upgrade is the pack
                // tables and the version number, written before any delta or pack
                // reference can be, so that older builds refuse the file instead of
                // finding records they cannot read.
                tx.execute_batch(PACK_TABLES).map_err(fail)?;
                tx.execute(
                    "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
                    [SCHEMA_AT_OPEN],
                )
                .map_err(fail)?;
            }
            None => {
                tx.execute_batch(
                    "CREATE TABLE IF NOT EXISTS objects (
                         id BLOB PRIMARY KEY NOT NULL,
                         data BLOB NOT NULL
                     );
                     CREATE TABLE IF NOT EXISTS refs (
                         name TEXT PRIMARY KEY NOT NULL,
                         id BLOB NOT NULL
                     );
                     CREATE TABLE IF NOT EXISTS reflog (
                         seq INTEGER PRIMARY KEY AUTOINCREMENT,
                         name TEXT NOT NULL,
                         old BLOB,
                         new BLOB,
                         message TEXT NOT NULL
                     );
                     CREATE INDEX IF NOT EXISTS reflog_by_name ON reflog (name, seq);",
                )
                .map_err(fail)?;
                tx.execute_batch(PACK_TABLES).map_err(fail)?;
                tx.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?1)",
                    [SCHEMA_AT_OPEN],
                )
                .map_err(fail)?;
            }
        }
        tx.commit().map_err(fail)?;
        Ok(Self {
            conn: Mutex::new(conn),
            path,
            compression: options.compression,
            dicts: Mutex::new(Dicts::default()),
            known: Known::default(),
            shared: Default::default(),
            segments,
        })
    }

    /// Checks `updates` against the refs as `tx` sees them ([`StoreError::RefConflict`]
    /// for the first that does not hold its expected value) and applies them, with
    /// their reflog rows.
    fn refs_in(
        &self,
        tx: &rusqlite::Transaction<'_>,
        updates: &[RefUpdate],
        message: &str,
    ) -> Result<(), StoreError> {
        apply_updates(updates, |name| {
            let raw = Self::read_ref(tx, name).map_err(|e| {
                StoreError::backend(
                    format!("sqlite update_refs reading {name} in {}", self.path),
                    e,
                )
            })?;
            raw.map(|b| self.id_from(|| format!("refs row {name}"), &b))
                .transpose()
        })?;
        for u in updates.iter().filter(|u| u.changes()) {
            let ctx = |e| {
                StoreError::backend(
                    format!("sqlite update_refs writing {} in {}", u.name, self.path),
                    e,
                )
            };
            match u.new {
                Some(id) => {
                    // The row's presence was just checked (`expected`): a move
                    // rewrites its id in place, where `INSERT OR REPLACE` deleted and
                    // inserted it again, writing the name's index page and a new
                    // rowid's page too (two of a per-turn commit's eleven WAL pages).
                    let sql = match u.expected {
                        Some(_) => "UPDATE refs SET id = ?2 WHERE name = ?1",
                        None => "INSERT INTO refs (name, id) VALUES (?1, ?2)",
                    };
                    let mut stmt = tx.prepare_cached(sql).map_err(ctx)?;
                    stmt.execute(params![u.name, &id.as_bytes()[..]])
                        .map_err(ctx)?;
                }
                None => {
                    let mut stmt = tx
                        .prepare_cached("DELETE FROM refs WHERE name = ?1")
                        .map_err(ctx)?;
                    stmt.execute([&u.name]).map_err(ctx)?;
                }
            }
            if !crate::refs::logged(&u.name) {
                continue;
            }
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO reflog (name, old, new, message) VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(ctx)?;
            stmt.execute(params![
                u.name,
                u.expected.as_ref().map(|id| &id.as_bytes()[..]),
                u.new.as_ref().map(|id| &id.as_bytes()[..]),
                message
            ])
            .map_err(ctx)?;
        }
        Ok(())
    }

    /// [`ObjectStore::put_many_with_bases`], and with `refs` the ref updates
    /// ([`RefStore::update_refs_with_objects`]) in the same write transaction.
    fn put_with(
        &self,
        objects: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
        refs: Option<(&[RefUpdate], &str)>,
    ) -> Result<(), StoreError> {
        if objects.is_empty() {
            return match refs {
                Some((updates, message)) => self.update_refs(updates, message),
                None => Ok(()),
            };
        }
        let mut hints = bases.to_vec();
        hints.resize(objects.len(), None);
        // The store's dictionary, or a new one sampled from this batch when the store
        // has none and the batch is large enough (a first commit): written in the
        // same transaction as the records that need it.
        let mut new_dict = None;
        let total: usize = objects.iter().map(|(_, b)| b.len()).sum();
        let dict = match self.compression {
            Compression::None => None,
            // Nothing to compress (a tag, a ref's commit): no dictionary to prepare.
            Compression::Zstd { .. } if !objects.iter().any(|(_, b)| codec::compressible(b)) => {
                None
            }
            // Too small to sample a dictionary from (`DICT_MIN_BYTES`) or to pay for
            // the compression tables (below): the store's dictionary serves only if
            // this handle built its tables already, so it is not read (nor checked
            // against its key, nor prepared for reading) just to be set aside. A
            // per-turn commit's few small objects paid that on every process.
            Compression::Zstd { .. } if total < codec::DICT_TABLES_MIN => {
                const _: () = assert!(codec::DICT_TABLES_MIN <= codec::DICT_MIN_BYTES);
                let dicts = self.dicts.lock().unwrap_or_else(|p| p.into_inner());
                dicts
                    .loaded
                    .then(|| dicts.for_writing())
                    .flatten()
                    .filter(|d| d.tables_built())
            }
            Compression::Zstd { level } => match self.dictionaries(None)?.for_writing() {
                Some(d) => Some(d),
                None => match codec::Dictionary::sample(objects) {
                    Some(bytes) => {
                        let d =
                            Arc::new(codec::Dictionary::new(bytes, level).map_err(|reason| {
                                StoreError::backend(
                                    format!("sqlite put_many into {}", self.path),
                                    reason,
                                )
                            })?);
                        new_dict = Some(Arc::clone(&d));
                        Some(d)
                    }
                    None => None,
                },
            },
        };
        // The tables are built for what will be compressed alone: an object with a
        // delta hint is mostly written as a delta against its base, where no
        // dictionary takes part. A per-turn commit of one edit to a file of 16 KiB or
        // more (its blob hinted, a few small tree nodes and the commit beside it) built
        // them for those few small objects: 0.4 ms of a 2 ms turn.
        let alone: usize = objects
            .iter()
            .zip(&hints)
            .filter(|(_, hint)| hint.is_none())
            .map(|((_, b), _)| b.len())
            .sum();
        let dict = dict
            .filter(|d| new_dict.is_some() || d.tables_built() || alone >= codec::DICT_TABLES_MIN);
        let encoded = codec::encode_many_records(
            objects,
            &hints,
            self.compression,
            dict.as_deref(),
            &|id| self.known.get(id),
            &mut |ids| self.records(ids),
        )?;
        let fail = self.fail("put_many");
        let mut conn = self.lock_clear()?;
        // What the batch wrote into segment files, once synced (taken back if the
        // commit fails).
        let mut written = None;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&fail)?;
        // The refs first: a conflict ends the transaction before anything is written.
        if let Some((updates, message)) = refs {
            self.refs_in(&tx, updates, message)?;
        }
        if let Some(d) = &new_dict {
            tx.execute(
                "INSERT OR IGNORE INTO dicts (dict, data) VALUES (?1, ?2)",
                params![i64::from(d.key()), d.bytes()],
            )
            .map_err(&fail)?;
            let kept: Vec<u8> = tx
                .query_row(
                    "SELECT data FROM dicts WHERE dict = ?1",
                    [i64::from(d.key())],
                    |r| r.get(0),
                )
                .map_err(&fail)?;
            if kept != d.bytes() {
                return Err(self.malformed(
                    format!("dicts row {:08x}", d.key()),
                    "another dictionary has the same key",
                ));
            }
        }
        {
            let put_fail = |id: &ObjectId| {
                let context = format!("sqlite put_many of object {id} into {}", self.path);
                move |e| StoreError::backend(context, e)
            };
            // Packable records of objects the store lacks (each id once) go into
            // packs; an object already present keeps its row and its bytes are not
            // written again.
            let mut present = tx
                .prepare_cached("SELECT 1 FROM objects WHERE id = ?1")
                .map_err(&fail)?;
            let mut seen = hashbrown::HashSet::new();
            let mut into_packs: Vec<usize> = Vec::new();
            for (i, ((id, _), data)) in objects.iter().zip(&encoded).enumerate() {
                if packable(data)
                    && seen.insert(*id)
                    && !present.exists([&id.as_bytes()[..]]).map_err(put_fail(id))?
                {
                    into_packs.push(i);
                }
            }
            // Large records go into a segment when the batch has enough of them.
            let mut into_segments: Vec<usize> = Vec::new();
            if self.segments.is_some() {
                let mut bytes = 0;
                for (i, ((id, _), data)) in objects.iter().zip(&encoded).enumerate() {
                    if segmentable(data)
                        && seen.insert(*id)
                        && !present.exists([&id.as_bytes()[..]]).map_err(put_fail(id))?
                    {
                        into_segments.push(i);
                        bytes += data.len();
                    }
                }
                if bytes < SEGMENT_BATCH_MIN {
                    into_segments.clear();
                }
            }
            let mut in_segments: Vec<Option<SegmentRef>> = vec![None; objects.len()];
            let mut appender = match (&self.segments, into_segments.is_empty()) {
                (Some(files), false) => Some(segments::Appender::begin(&tx, files).map_err(&fail)?),
                _ => None,
            };
            if let Some(appender) = &mut appender {
                for &i in &into_segments {
                    let id = &objects[i].0;
                    let (tag, body) = match &encoded[i] {
                        codec::Record::Raw(b) => (codec::RAW, &b[..]),
                        codec::Record::Encoded(r) => (r[0], &r[1..]),
                    };
                    let r = appender.append(&tx, tag, body).map_err(|reason| {
                        StoreError::backend(
                            format!("sqlite put_many of object {id} into {}", self.path),
                            reason,
                        )
                    })?;
                    in_segments[i] = Some(r);
                }
            }
            let mut refs: Vec<Option<[u8; REFERENCE]>> = vec![None; objects.len()];
            let mut insert_pack = tx
                .prepare_cached("INSERT INTO packs (data) VALUES (?1)")
                .map_err(&fail)?;
            let mut insert_live = tx
                .prepare_cached("INSERT INTO pack_live (pack, live) VALUES (?1, ?2)")
                .map_err(&fail)?;
            let mut rest = &into_packs[..];
            while !rest.is_empty() {
                let mut size = 0;
                let n = rest
                    .iter()
                    .take_while(|&&i| {
                        size += encoded[i].len();
                        size <= PACK_SIZE
                    })
                    .count()
                    .max(1);
                let (these, more) = rest.split_at(n);
                rest = more;
                let mut pack_bytes: Vec<u8> = Vec::with_capacity(size.min(PACK_SIZE));
                for &i in these {
                    match &encoded[i] {
                        codec::Record::Encoded(r) => pack_bytes.extend_from_slice(r),
                        codec::Record::Raw(b) => {
                            pack_bytes.push(codec::RAW);
                            pack_bytes.extend_from_slice(b);
                        }
                    }
                }
                insert_pack.execute([&pack_bytes]).map_err(&fail)?;
                let pack = tx.last_insert_rowid();
                insert_live
                    .execute(params![pack, these.len() as i64])
                    .map_err(&fail)?;
                let mut start = 0u32;
                for &i in these {
                    let len = encoded[i].len() as u32;
                    refs[i] = Some(PackRef { pack, start, len }.encode());
                    start += len;
                }
            }
            let mut stmt = tx
                .prepare_cached("INSERT OR IGNORE INTO objects (id, data) VALUES (?1, ?2)")
                .map_err(&fail)?;
            // Large tag 0 records: a row of zeros first, then the tag and the bytes
            // written into its pages through one incremental-blob handle, so the
            // bytes are copied once (into the pages) instead of into a record, a
            // bound value and SQLite's own record before the pages.
            let mut zeroed = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO objects (id, data) VALUES (?1, zeroblob(?2))",
                )
                .map_err(&fail)?;
            let mut to_fill: Vec<(i64, usize)> = Vec::new();
            for (i, (((id, _), data), r)) in objects.iter().zip(&encoded).zip(&refs).enumerate() {
                let key = &id.as_bytes()[..];
                if let (Some(s), Some(appender)) = (&in_segments[i], &mut appender) {
                    if stmt
                        .execute(params![key, &s.encode()[..]])
                        .map_err(put_fail(id))?
                        == 1
                    {
                        appender.count(s);
                    }
                    continue;
                }
                match (r, data) {
                    (Some(r), _) => {
                        stmt.execute(params![key, &r[..]]).map_err(put_fail(id))?;
                    }
                    (None, codec::Record::Raw(b)) if b.len() >= BLOB_WRITE_MIN => {
                        let len = 1 + b.len() as i64;
                        if zeroed.execute(params![key, len]).map_err(put_fail(id))? == 1 {
                            to_fill.push((tx.last_insert_rowid(), i));
                        }
                    }
                    (None, codec::Record::Raw(b)) => {
                        let mut record = Vec::with_capacity(1 + b.len());
                        record.push(codec::RAW);
                        record.extend_from_slice(b);
                        stmt.execute(params![key, record]).map_err(put_fail(id))?;
                    }
                    (None, codec::Record::Encoded(r)) => {
                        stmt.execute(params![key, r]).map_err(put_fail(id))?;
                    }
                }
            }
            let mut blob: Option<rusqlite::blob::Blob<'_>> = None;
            for (row, i) in to_fill {
                let id = &objects[i].0;
                let codec::Record::Raw(bytes) = &encoded[i] else {
                    continue; // only tag 0 records are filled
                };
                let handle = match &mut blob {
                    Some(h) => {
                        h.reopen(row).map_err(put_fail(id))?;
                        h
                    }
                    None => blob.insert(
                        tx.blob_open(rusqlite::MAIN_DB, c"objects", c"data", row, false)
                            .map_err(put_fail(id))?,
                    ),
                };
                handle.write_at(&[codec::RAW], 0).map_err(put_fail(id))?;
                handle.write_at(bytes, 1).map_err(put_fail(id))?;
            }
            if let Some(appender) = appender {
                written = Some(appender.finish(&tx).map_err(|reason| {
                    StoreError::backend(format!("sqlite put_many into {}", self.path), reason)
                })?);
            }
        }
        if let Err(e) = tx.commit() {
            // Rolled back: the segment bytes it wrote name no row (see `segments`).
            if let Some(w) = written {
                w.undo(&mut conn);
            }
            return Err(fail(e));
        }
        drop(conn); // the dictionaries' lock is never taken under the connection's
        if let Some(d) = new_dict {
            let mut dicts = self.dicts.lock().unwrap_or_else(|p| p.into_inner());
            dicts.by_key.entry(d.key()).or_insert(d);
        }
        // Written nodes answer this handle's later reads (hashed first: the caller
        // named their ids).
        for (id, stored) in objects {
            self.known.keep_written(id, stored);
        }
        Ok(())
    }

    /// The database file as errors name it (`:memory:` for an in-memory database).
    pub fn path(&self) -> &str {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock drops any open transaction, which rolls it
        // back: the connection is left clean, so poison is safe to ignore.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`lock`](Self::lock) for a transaction of its own (every write, and reads that
    /// begin theirs through rusqlite): the read transaction shared reads keep open
    /// ([`ObjectStore::share_reads`]) is ended first, so that a write is never part of
    /// it and begins on the store as it is.
    fn lock_clear(&self) -> Result<MutexGuard<'_, Connection>, StoreError> {
        let conn = self.lock();
        end_shared(&conn).map_err(self.fail("end the shared read transaction"))?;
        Ok(conn)
    }

    /// Whether reads share one read transaction (read under the lock: see
    /// [`ObjectStore::share_reads`]).
    fn sharing(&self) -> bool {
        self.shared.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A closure turning a rusqlite error into a backend error naming the operation
    /// and the file.
    fn fail<'a>(&'a self, op: &'a str) -> impl Fn(rusqlite::Error) -> StoreError + 'a {
        // The context is formatted only when an error comes (a read called this for
        // every batch: a string built and dropped per read).
        move |e| StoreError::backend(format!("sqlite {op} in {}", self.path), e)
    }

    fn malformed(&self, what: String, reason: impl Into<String>) -> StoreError {
        StoreError::backend(
            format!("sqlite {what} in {}", self.path),
            SqliteError::Malformed {
                path: self.path.clone(),
                what,
                reason: reason.into(),
            },
        )
    }

    fn id_from(&self, what: impl FnOnce() -> String, bytes: &[u8]) -> Result<ObjectId, StoreError> {
        <[u8; 32]>::try_from(bytes)
            .map(ObjectId::from_bytes)
            .map_err(|_| self.malformed(what(), format!("id is {} bytes, not 32", bytes.len())))
    }

    fn opt_id_from(
        &self,
        what: impl FnOnce() -> String,
        value: ValueRef<'_>,
    ) -> Result<Option<ObjectId>, StoreError> {
        match value {
            ValueRef::Null => Ok(None),
            ValueRef::Blob(b) => self.id_from(what, b).map(Some),
            other => Err(self.malformed(
                what(),
                format!("id is of type {}, not a blob", other.data_type()),
            )),
        }
    }

    /// The raw (encoded) records of `ids`, in the order asked; with `plain`, a tag 0
    /// record comes as its stored bytes ([`Raw::Plain`]: the tag is dropped while
    /// copying out of SQLite's page, which is the one copy a read makes).
    fn get_raw(&self, ids: &[ObjectId], plain: bool) -> Result<Vec<Option<Raw>>, StoreError> {
        self.get_raw_again(ids, plain, true)
    }

    /// [`get_raw`](Self::get_raw); with `again`, the records whose segment file was
    /// gone or short are read once more from a new snapshot (a repack or a collection
    /// may have moved or deleted them since the row was read).
    fn get_raw_again(
        &self,
        ids: &[ObjectId],
        plain: bool,
        again: bool,
    ) -> Result<Vec<Option<Raw>>, StoreError> {
        let fail = self.fail("get_many");
        let mut out = Vec::with_capacity(ids.len());
        let mut segmented: Vec<(usize, SegmentRef)> = Vec::new();
        let conn = self.lock();
        let tx = ReadTransaction::begin(&conn, self.sharing()).map_err(&fail)?;
        {
            let mut stmt = conn
                .prepare_cached("SELECT data FROM objects WHERE id = ?1")
                .map_err(&fail)?;
            let mut packed = Vec::new();
            for id in ids {
                let mut rows = stmt.query([&id.as_bytes()[..]]).map_err(&fail)?;
                out.push(match rows.next().map_err(&fail)? {
                    None => None,
                    Some(row) => Some(match row.get_ref(0).map_err(&fail)? {
                        ValueRef::Blob([codec::RAW, stored @ ..]) if plain => {
                            Raw::Plain(stored.to_vec())
                        }
                        ValueRef::Blob(b @ [PACKED, ..]) => match PackRef::parse(b) {
                            Some(r) => {
                                packed.push((out.len(), r));
                                Raw::Bytes(Vec::new())
                            }
                            None => Raw::Bad(format!(
                                "pack reference of {} bytes, not {REFERENCE}",
                                b.len()
                            )),
                        },
                        ValueRef::Blob(b @ [SEGMENTED, ..]) => {
                            match (SegmentRef::parse(b), &self.segments) {
                                (Some(r), Some(_)) => {
                                    segmented.push((out.len(), r));
                                    Raw::Bytes(Vec::new())
                                }
                                (None, _) => Raw::Bad(format!(
                                    "segment reference of {} bytes, not {}",
                                    b.len(),
                                    segments::SEGMENT_REFERENCE
                                )),
                                (Some(_), None) => {
                                    Raw::Bad("segment reference in a database in memory".into())
                                }
                            }
                        }
                        ValueRef::Blob(b) | ValueRef::Text(b) => Raw::Bytes(b.to_vec()),
                        other => Raw::NotBlob(other.data_type().to_string()),
                    }),
                });
            }
            // Records in packs, read in pack order through one blob handle.
            packed.sort_by_key(|(_, r)| (r.pack, r.start));
            let mut blob: Option<(i64, rusqlite::blob::Blob<'_>)> = None;
            for (at, r) in packed {
                out[at] = Some(match read_packed(&conn, &mut blob, &r) {
                    Ok(record) => Raw::Bytes(record),
                    Err(reason) => Raw::Bad(reason),
                });
            }
        }
        tx.commit().map_err(&fail)?;
        drop(conn);
        // Records in segments, read outside the lock in file order.
        let Some(files) = &self.segments else {
            return Ok(out);
        };
        segmented.sort_by_key(|(_, r)| (r.segment, r.start));
        let mut gone: Vec<usize> = Vec::new();
        for (at, r) in segmented {
            out[at] = Some(match files.read(&r, plain) {
                Ok(record) if plain && r.tag == codec::RAW => Raw::Plain(record),
                Ok(record) => Raw::Bytes(record),
                Err(segments::ReadFailure::Gone(_)) if again => {
                    files.forget(r.segment);
                    gone.push(at);
                    continue;
                }
                Err(e) => Raw::Bad(e.reason()),
            });
        }
        if !gone.is_empty() {
            // A new snapshot: not the shared one these rows came from.
            end_shared(&self.lock()).map_err(&fail)?;
            let retry: Vec<ObjectId> = gone.iter().map(|&at| ids[at]).collect();
            for (at, raw) in gone
                .into_iter()
                .zip(self.get_raw_again(&retry, plain, false)?)
            {
                out[at] = raw;
            }
        }
        Ok(out)
    }

    /// The dictionaries of the store, re-read from `dicts` when `want` is a key this
    /// handle has not seen (another handle may have written it).
    fn dictionaries(&self, want: Option<u32>) -> Result<MutexGuard<'_, Dicts>, StoreError> {
        let mut dicts = self.dicts.lock().unwrap_or_else(|p| p.into_inner());
        let stale = !dicts.loaded || want.is_some_and(|k| !dicts.by_key.contains_key(&k));
        if stale {
            let fail = self.fail("read dictionaries");
            let conn = self.lock();
            let keys: Vec<i64> = {
                let mut stmt = conn
                    .prepare_cached("SELECT dict FROM dicts")
                    .map_err(&fail)?;
                let keys = stmt.query_map([], |r| r.get(0)).map_err(&fail)?;
                keys.collect::<Result<_, _>>().map_err(&fail)?
            };
            for row in keys {
                let Ok(key) = u32::try_from(row) else {
                    return Err(self.malformed(format!("dicts row {row}"), "key is not a u32"));
                };
                if dicts.by_key.contains_key(&key) {
                    continue;
                }
                // Read through a blob handle, straight from the row's pages into the
                // vector: a column value would be assembled in SQLite's buffer first
                // and copied again (112 KiB twice, a tenth of a millisecond a command
                // that reads one compressed object). Rows are never changed or
                // removed, so the key listed is there.
                let bytes = {
                    let blob = conn
                        .blob_open(rusqlite::MAIN_DB, c"dicts", c"data", row, true)
                        .map_err(&fail)?;
                    // A damaged or hostile row's length is checked before anything
                    // that size is allocated.
                    if blob.len() > codec::DICT_SIZE {
                        return Err(self.malformed(
                            format!("dicts row {key:08x}"),
                            format!(
                                "a dictionary of {} bytes (at most {})",
                                blob.len(),
                                codec::DICT_SIZE
                            ),
                        ));
                    }
                    let mut bytes = vec![0u8; blob.len()];
                    blob.read_at_exact(&mut bytes, 0).map_err(&fail)?;
                    bytes
                };
                if codec::dictionary_key(&bytes) != key {
                    return Err(self.malformed(
                        format!("dicts row {key:08x}"),
                        "the dictionary's bytes do not hash to its key",
                    ));
                }
                let dict = codec::Dictionary::with_key(key, bytes, self.level())
                    .map_err(|reason| self.malformed(format!("dicts row {key:08x}"), reason))?;
                dicts.by_key.insert(key, Arc::new(dict));
            }
            drop(conn);
            dicts.loaded = true;
        }
        Ok(dicts)
    }

    /// The zstd level of this handle's writes (1 when it does not compress).
    fn level(&self) -> i32 {
        match self.compression {
            Compression::Zstd { level } => level,
            Compression::None => 1,
        }
    }

    /// The dictionary a tag 3 record of `id` names: [`StoreError::Corrupt`] naming `id`
    /// when the record is too short for its header or this store lacks that dictionary.
    fn dictionary_of(
        &self,
        id: &ObjectId,
        record: &[u8],
    ) -> Result<Arc<codec::Dictionary>, StoreError> {
        let key = codec::dict_key(record).ok_or_else(|| StoreError::Corrupt {
            id: *id,
            reason: "dictionary record shorter than its header".into(),
        })?;
        let dict = self.dictionaries(Some(key))?.by_key.get(&key).cloned();
        dict.ok_or_else(|| StoreError::Corrupt {
            id: *id,
            reason: format!(
                "record names dictionary {key:08x}, which {} lacks",
                self.path
            ),
        })
    }

    /// The stored bytes of a tag 3 record of `id`, not yet verified.
    fn undict(&self, id: &ObjectId, record: &[u8]) -> Result<Vec<u8>, StoreError> {
        codec::decode_dict(id, record, &*self.dictionary_of(id, record)?)
    }

    /// [`undict`](Self::undict) as the tag 0 record of the same stored bytes.
    fn undict_plain(&self, id: &ObjectId, record: &[u8]) -> Result<Vec<u8>, StoreError> {
        codec::dict_to_plain(id, record, &*self.dictionary_of(id, record)?)
    }

    /// The records of `ids` as blobs (a row of another type is corrupt).
    fn records(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        ids.iter()
            .zip(self.get_raw(ids, false)?)
            .map(|(id, raw)| match raw {
                None => Ok(None),
                Some(Raw::Bytes(b)) if b.first() == Some(&codec::DICT) => {
                    // The codec reads no dictionary: hand it the tag 0 equivalent,
                    // decompressed behind its tag (no copy).
                    self.undict_plain(id, &b).map(Some)
                }
                Some(Raw::Bytes(b)) => Ok(Some(b)),
                Some(Raw::Plain(mut b)) => {
                    b.insert(0, codec::RAW);
                    Ok(Some(b))
                }
                Some(Raw::NotBlob(kind)) => Err(StoreError::Corrupt {
                    id: *id,
                    reason: format!("record in {} is of type {kind}, not a blob", self.path),
                }),
                Some(Raw::Bad(reason)) => Err(StoreError::Corrupt {
                    id: *id,
                    reason: format!("record in {}: {reason}", self.path),
                }),
            })
            .collect()
    }

    /// Every `objects` row whose value starts with the segment reference byte, in
    /// rowid order: the object, the value, and the reference it holds (`None`: not a
    /// well-formed one). Rows of another type are left to reads to report.
    fn segment_rows(&self) -> Result<Vec<SegmentRow>, StoreError> {
        Ok(self
            .tagged_rows(SEGMENTED, "segment references")?
            .into_iter()
            .map(|(id, value)| {
                let r = SegmentRef::parse(&value);
                (id, value, r)
            })
            .collect())
    }

    /// Every `objects` row whose value starts with `tag` (a pack's or a segment's
    /// reference byte), in rowid order: the object and the value. Rows of another
    /// type are left to reads to report.
    fn tagged_rows(&self, tag: u8, what: &str) -> Result<Vec<(ObjectId, Vec<u8>)>, StoreError> {
        let fail = self.fail(what);
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT rowid, id, data FROM objects WHERE substr(data, 1, 1) = ?1
                 ORDER BY rowid",
            )
            .map_err(&fail)?;
        let mut rows = stmt.query([&[tag][..]]).map_err(&fail)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(&fail)? {
            let rowid: i64 = row.get(0).map_err(&fail)?;
            let (ValueRef::Blob(key), ValueRef::Blob(value)) = (
                row.get_ref(1).map_err(&fail)?,
                row.get_ref(2).map_err(&fail)?,
            ) else {
                continue;
            };
            let id = self.id_from(|| format!("objects row {rowid}"), key)?;
            out.push((id, value.to_vec()));
        }
        Ok(out)
    }

    /// [`ObjectStore::check_at_rest`] for packs: every row naming a pack that is
    /// missing, shorter than the reference says, or counted as holding fewer live
    /// records than the rows that name it. Reads the references and each pack's
    /// length, never a pack's bytes.
    fn check_packs(&self) -> Result<Vec<(ObjectId, String)>, StoreError> {
        let mut named: Vec<(ObjectId, PackRef)> = Vec::new();
        let mut out = Vec::new();
        for (id, value) in self.tagged_rows(PACKED, "pack references")? {
            match PackRef::parse(&value) {
                Some(r) => named.push((id, r)),
                None => out.push((
                    id,
                    format!(
                        "record in {}: pack reference of {} bytes, not {REFERENCE}",
                        self.path,
                        value.len()
                    ),
                )),
            }
        }
        let lengths = self.counts("SELECT pack, length(data) FROM packs", "packs")?;
        for (id, r) in &named {
            let end = u64::from(r.start) + u64::from(r.len);
            let why = match lengths.get(&r.pack) {
                None => format!("pack {} is missing", r.pack),
                Some(&len) if end > len as u64 => format!(
                    "pack {} holds {len} bytes, the reference names {}+{}",
                    r.pack, r.start, r.len
                ),
                Some(_) => continue,
            };
            out.push((*id, format!("record in {}: {why}", self.path)));
        }
        let counted = self.counts("SELECT pack, live FROM pack_live", "pack_live")?;
        let named: Vec<(ObjectId, i64)> = named.iter().map(|(id, r)| (*id, r.pack)).collect();
        for (id, why) in undercounted(&named, &counted, "pack") {
            out.push((id, format!("record in {}: {why}", self.path)));
        }
        Ok(out)
    }

    /// What `sql` selects (a pack's or segment's number and an integer: its live
    /// count, its length), by number.
    fn counts(&self, sql: &str, table: &str) -> Result<hashbrown::HashMap<i64, i64>, StoreError> {
        let fail = self.fail(table);
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(sql).map_err(&fail)?;
        let counts = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(&fail)?
            .collect::<Result<_, _>>()
            .map_err(&fail)?;
        Ok(counts)
    }

    /// The directory of the database's segment files, `<database>-segments` (schema
    /// 4; `None` in memory): a copy of the store is the database and this directory.
    pub fn segment_dir(&self) -> Option<&Path> {
        self.segments.as_ref().map(Segments::dir)
    }

    fn read_ref(conn: &Connection, name: &str) -> rusqlite::Result<Option<Vec<u8>>> {
        let mut stmt = conn.prepare_cached("SELECT id FROM refs WHERE name = ?1")?;
        let mut rows = stmt.query([name])?;
        match rows.next()? {
            Some(row) => Ok(Some(match row.get_ref(0)? {
                ValueRef::Blob(b) => b.to_vec(),
                // A wrong type reads as a wrong length, reported by the caller.
                _ => Vec::new(),
            })),
            None => Ok(None),
        }
    }
}

/// An `objects` row naming a segment: the object, its value, the reference it holds
/// (`None`: not a well-formed one).
type SegmentRow = (ObjectId, Vec<u8>, Option<SegmentRef>);

/// An object's record as read, decoded outside the lock.
#[derive(Debug, Clone)]
enum Raw {
    Bytes(Vec<u8>),
    /// The stored bytes of a tag 0 record.
    Plain(Vec<u8>),
    NotBlob(String),
    /// A pack reference that does not lead to a record: why.
    Bad(String),
}

/// The rows of `named` (an object and the pack or segment its row names) in a
/// `what` whose live count in `counted` is missing or below the rows naming it: a
/// deletion of as many of them as it counts would remove the pack or segment while
/// the others still need it. A count above them is garbage kept, which a repack
/// reclaims, and names no object.
fn undercounted(
    named: &[(ObjectId, i64)],
    counted: &hashbrown::HashMap<i64, i64>,
    what: &str,
) -> Vec<(ObjectId, String)> {
    let mut rows: hashbrown::HashMap<i64, i64> = hashbrown::HashMap::new();
    for (_, n) in named {
        *rows.entry(*n).or_default() += 1;
    }
    named
        .iter()
        .filter_map(|(id, n)| {
            let rows = rows.get(n).copied().unwrap_or_default();
            let why = match counted.get(n) {
                None => format!("{what} {n} has no live count, and {rows} rows name it"),
                Some(&live) if live < rows => format!(
                    "{what} {n} counts {live} live records, but {rows} rows name it: \
                     deleting {live} of them would remove it"
                ),
                Some(_) => return None,
            };
            Some((*id, why))
        })
        .collect()
}

/// Where a packed record is: `objects.data` = [`PACKED`] `|| pack || start || length`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PackRef {
    pack: i64,
    start: u32,
    len: u32,
}

impl PackRef {
    fn parse(b: &[u8]) -> Option<Self> {
        if b.len() != REFERENCE || b[0] != PACKED {
            return None;
        }
        let pack = i64::from_le_bytes(b[1..9].try_into().ok()?);
        let start = u32::from_le_bytes(b[9..13].try_into().ok()?);
        let len = u32::from_le_bytes(b[13..17].try_into().ok()?);
        Some(Self { pack, start, len })
    }

    fn encode(&self) -> [u8; REFERENCE] {
        let mut out = [0u8; REFERENCE];
        out[0] = PACKED;
        out[1..9].copy_from_slice(&self.pack.to_le_bytes());
        out[9..13].copy_from_slice(&self.start.to_le_bytes());
        out[13..17].copy_from_slice(&self.len.to_le_bytes());
        out
    }
}

/// The record `r` names, through `blob` (kept open on the last pack read). The reason
/// when the pack is absent or the range is outside it.
fn read_packed<'c>(
    conn: &'c Connection,
    blob: &mut Option<(i64, rusqlite::blob::Blob<'c>)>,
    r: &PackRef,
) -> Result<Vec<u8>, String> {
    let missing = |e: rusqlite::Error| format!("pack {} cannot be read: {e}", r.pack);
    match blob {
        Some((pack, handle)) if *pack != r.pack => {
            if let Err(e) = handle.reopen(r.pack) {
                // A failed reopen leaves the handle aborted: open a fresh one next time.
                *blob = None;
                return Err(missing(e));
            }
            *pack = r.pack;
        }
        Some(_) => {}
        None => {
            let handle = conn
                .blob_open(rusqlite::MAIN_DB, c"packs", c"data", r.pack, true)
                .map_err(missing)?;
            *blob = Some((r.pack, handle));
        }
    }
    let Some((_, handle)) = blob else {
        return Err(format!("pack {} is not open", r.pack));
    };
    let (start, len) = (r.start as usize, r.len as usize);
    if len == 0 || start.checked_add(len).is_none_or(|end| end > handle.len()) {
        return Err(format!(
            "pack {} holds {} bytes, the reference names {start}..{}",
            r.pack,
            handle.len(),
            start as u64 + len as u64
        ));
    }
    let mut record = vec![0u8; len];
    handle
        .read_at_exact(&mut record, start)
        .map_err(|e| format!("pack {} bytes {start}+{len}: {e}", r.pack))?;
    Ok(record)
}

/// A read transaction begun and ended by cached statements: rusqlite's
/// `Connection::transaction` parses `BEGIN` and `COMMIT` again on every call, about
/// 2,900 instructions a read (a tenth of a tree node's read) when a commit reads its
/// trees one by one. Dropped without [`commit`](Self::commit) (an error on the way),
/// it rolls back.
///
/// With reads shared ([`ObjectStore::share_reads`]) it is left open past `commit`
/// for the next read, which runs inside it (no `BEGIN`, no `COMMIT`: no lock,
/// unlock and `fstat` of the file each); a transaction of its own
/// ([`SqliteStore::lock_clear`]) or the end of sharing ends it ([`end_shared`]).
/// Only these reads run inside it: every other transaction first ends it.
struct ReadTransaction<'c> {
    conn: &'c Connection,
    /// Whether this one ends the transaction (`COMMIT`, or `ROLLBACK` when dropped):
    /// not when it runs inside the shared one or leaves the one it began for the
    /// next read.
    ends: bool,
}

impl<'c> ReadTransaction<'c> {
    fn begin(conn: &'c Connection, share: bool) -> rusqlite::Result<Self> {
        if !conn.is_autocommit() {
            if share {
                // The shared one, left open by an earlier read.
                return Ok(Self { conn, ends: false });
            }
            end_shared(conn)?;
        }
        conn.prepare_cached("BEGIN")?.execute([])?;
        Ok(Self { conn, ends: !share })
    }

    fn commit(mut self) -> rusqlite::Result<()> {
        if !self.ends {
            return Ok(());
        }
        self.ends = false;
        self.conn.prepare_cached("COMMIT")?.execute([]).map(|_| ())
    }
}

impl Drop for ReadTransaction<'_> {
    fn drop(&mut self) {
        if self.ends {
            let _ = self
                .conn
                .prepare_cached("ROLLBACK")
                .and_then(|mut s| s.execute([]));
        }
    }
}

/// Ends the read transaction shared reads left open on `conn`, if one is.
fn end_shared(conn: &Connection) -> rusqlite::Result<()> {
    if conn.is_autocommit() {
        return Ok(());
    }
    conn.prepare_cached("COMMIT")?.execute([]).map(|_| ())
}

/// Whether `record` goes into a pack rather than inline.
fn packable(record: &codec::Record<'_>) -> bool {
    packable_parts(record.tag(), record.len())
}

/// Whether `record`, not packed, may go into a segment: large and not a delta (deltas
/// stay in the table, where `for_each_delta` reads their headers).
fn segmentable(record: &codec::Record<'_>) -> bool {
    matches!(record.tag(), Some(codec::RAW | codec::ZSTD | codec::DICT))
        && record.len() >= SEGMENT_MIN
        && !packable(record)
}

/// [`packable`] of a record by its tag and length.
fn packable_parts(tag: Option<u8>, len: usize) -> bool {
    matches!(tag, Some(codec::ZSTD | codec::DICT)) && (PACK_MIN..=PACK_MAX).contains(&len)
}

fn open_error(path: &str, e: rusqlite::Error) -> StoreError {
    let context = format!("sqlite open {path}");
    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase) {
        return StoreError::backend(
            context,
            SqliteError::NotADatabase {
                path: path.to_string(),
            },
        );
    }
    StoreError::backend(context, e)
}

impl ObjectStore for SqliteStore {
    fn share_reads(&self, share: bool) -> Result<(), StoreError> {
        // Set under the lock, which every read holds while it decides whether to
        // share (`sharing`): no read begins a shared transaction after this ends it.
        let conn = self.lock();
        self.shared
            .store(share, std::sync::atomic::Ordering::Relaxed);
        if share {
            return Ok(());
        }
        end_shared(&conn).map_err(self.fail("end the shared read transaction"))
    }

    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.get_many_checked(ids, ReadCheck::Store)
    }

    fn get_many_checked(
        &self,
        ids: &[ObjectId],
        check: ReadCheck,
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        // Nodes this handle verified before answer without a read ([`crate::known`]);
        // the others are read (where another thread may just have kept some).
        if let Some((hits, missing)) = self.known.split(ids) {
            let mut read = if missing.is_empty() {
                Vec::new()
            } else {
                self.get_many_checked(&missing, check)?
            }
            .into_iter();
            return Ok(hits
                .into_iter()
                .map(|h| h.or_else(|| read.next().flatten()))
                .collect());
        }
        // Tag 0 records come out of SQLite as their stored bytes; the others are
        // decoded (decompressed, deltas resolved) outside the lock.
        let raw = self.get_raw(ids, true)?;
        let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(ids.len());
        let mut rest: Vec<(usize, Vec<u8>)> = Vec::new();
        for (i, (id, r)) in ids.iter().zip(raw).enumerate() {
            out.push(match r {
                None => None,
                Some(Raw::Plain(stored)) => Some(codec::finish(id, stored, check)?),
                Some(Raw::Bytes(record)) if record.first() == Some(&codec::DICT) => {
                    Some(codec::finish(id, self.undict(id, &record)?, check)?)
                }
                Some(Raw::Bytes(record)) => {
                    rest.push((i, record));
                    None
                }
                Some(Raw::NotBlob(kind)) => {
                    return Err(StoreError::Corrupt {
                        id: *id,
                        reason: format!("record in {} is of type {kind}, not a blob", self.path),
                    })
                }
                Some(Raw::Bad(reason)) => {
                    return Err(StoreError::Corrupt {
                        id: *id,
                        reason: format!("record in {}: {reason}", self.path),
                    })
                }
            });
        }
        if !rest.is_empty() {
            let some: Vec<ObjectId> = rest.iter().map(|(i, _)| ids[*i]).collect();
            let (at, records): (Vec<usize>, Vec<Option<Vec<u8>>>) =
                rest.into_iter().map(|(i, r)| (i, Some(r))).unzip();
            let decoded = codec::decode_many_checked(
                &some,
                records,
                &mut |bases| self.records(bases),
                check,
            )?;
            for (i, d) in at.into_iter().zip(decoded) {
                out[i] = d;
            }
        }
        if check == ReadCheck::Store {
            for (id, stored) in ids.iter().zip(&out) {
                if let Some(stored) = stored {
                    self.known.keep_verified(id, stored);
                }
            }
        }
        Ok(out)
    }

    fn has_many(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>, StoreError> {
        let fail = self.fail("has_many");
        let mut absent = Vec::new();
        let conn = self.lock();
        let tx = ReadTransaction::begin(&conn, self.sharing()).map_err(&fail)?;
        {
            // Answered from the primary-key index alone.
            let mut stmt = conn
                .prepare_cached("SELECT 1 FROM objects WHERE id = ?1")
                .map_err(&fail)?;
            for id in ids {
                if !stmt.exists([&id.as_bytes()[..]]).map_err(&fail)? {
                    absent.push(*id);
                }
            }
        }
        tx.commit().map_err(&fail)?;
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
        self.put_with(objects, bases, None)
    }

    /// Every segment reference whose file is missing or too short (schema 4), and
    /// every value starting with the reference byte that is not a reference.
    fn check_at_rest(&self) -> Result<Vec<(ObjectId, String)>, StoreError> {
        let mut out = self.check_packs()?;
        let Some(files) = &self.segments else {
            return Ok(out);
        };
        let mut refs: Vec<(ObjectId, SegmentRef)> = Vec::new();
        for (id, value, r) in self.segment_rows()? {
            match r {
                Some(r) => refs.push((id, r)),
                None => out.push((
                    id,
                    format!(
                        "record in {}: segment reference of {} bytes, not {}",
                        self.path,
                        value.len(),
                        segments::SEGMENT_REFERENCE
                    ),
                )),
            }
        }
        for (id, why) in files.check(&refs) {
            out.push((id, format!("record in {}: {why}", self.path)));
        }
        // The table exists once a row names a segment (schema 4).
        if !refs.is_empty() {
            let counted = self.counts("SELECT segment, live FROM segments", "segments")?;
            let named: Vec<(ObjectId, i64)> = refs.iter().map(|(id, r)| (*id, r.segment)).collect();
            for (id, why) in undercounted(&named, &counted, "segment") {
                out.push((id, format!("record in {}: {why}", self.path)));
            }
        }
        Ok(out)
    }

    fn repack(
        &self,
        options: &crate::repack::RepackOptions,
    ) -> Result<Option<crate::repack::RepackReport>, StoreError> {
        self.repack_store(options).map(Some)
    }

    fn delete_many(&self, ids: &[ObjectId]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.known.forget(ids);
        let fail = self.fail("delete_many");
        let mut conn = self.lock_clear()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&fail)?;
        let mut gone: Vec<i64> = Vec::new();
        {
            // A pack or a segment goes with the last object row that names it.
            let mut reference = tx
                .prepare_cached(
                    "SELECT data FROM objects WHERE id = ?1
                     AND ((length(data) = 17 AND substr(data, 1, 1) = x'80')
                       OR (length(data) = 22 AND substr(data, 1, 1) = x'81'))",
                )
                .map_err(&fail)?;
            let mut stmt = tx
                .prepare_cached("DELETE FROM objects WHERE id = ?1")
                .map_err(&fail)?;
            let mut unlive = tx
                .prepare_cached("UPDATE pack_live SET live = live - 1 WHERE pack = ?1")
                .map_err(&fail)?;
            let mut dead = tx
                .prepare_cached("SELECT live FROM pack_live WHERE pack = ?1")
                .map_err(&fail)?;
            let mut drop_pack = tx
                .prepare_cached("DELETE FROM packs WHERE pack = ?1")
                .map_err(&fail)?;
            let mut drop_live = tx
                .prepare_cached("DELETE FROM pack_live WHERE pack = ?1")
                .map_err(&fail)?;
            for id in ids {
                let key = &id.as_bytes()[..];
                let packed: Option<Vec<u8>> = reference
                    .query_row([key], |r| r.get(0))
                    .map(Some)
                    .or_else(|e| match e {
                        rusqlite::Error::QueryReturnedNoRows => Ok(None),
                        e => Err(e),
                    })
                    .map_err(&fail)?;
                if stmt.execute([key]).map_err(&fail)? == 0 {
                    continue;
                }
                if let Some(r) = packed.as_deref().and_then(SegmentRef::parse) {
                    gone.extend(segments::unlive(&tx, &r).map_err(&fail)?);
                }
                if let Some(r) = packed.as_deref().and_then(PackRef::parse) {
                    unlive.execute([r.pack]).map_err(&fail)?;
                    let live: Option<i64> = dead
                        .query_row([r.pack], |row| row.get(0))
                        .map(Some)
                        .or_else(|e| match e {
                            rusqlite::Error::QueryReturnedNoRows => Ok(None),
                            e => Err(e),
                        })
                        .map_err(&fail)?;
                    if live.is_some_and(|n| n <= 0) {
                        drop_pack.execute([r.pack]).map_err(&fail)?;
                        drop_live.execute([r.pack]).map_err(&fail)?;
                    }
                }
            }
        }
        tx.commit().map_err(&fail)?;
        drop(conn);
        if let Some(files) = &self.segments {
            files.remove(&gone);
        }
        Ok(())
    }

    fn for_each_id(
        &self,
        f: &mut dyn FnMut(ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let fail = self.fail("for_each_id");
        let mut after: Vec<u8> = Vec::new();
        loop {
            let page: Vec<Vec<u8>> = {
                let conn = self.lock();
                let mut stmt = conn
                    .prepare_cached("SELECT id FROM objects WHERE id > ?1 ORDER BY id LIMIT ?2")
                    .map_err(&fail)?;
                let rows = stmt
                    .query_map(params![after, ID_PAGE as i64], |r| {
                        Ok(match r.get_ref(0)? {
                            ValueRef::Blob(b) => b.to_vec(),
                            _ => Vec::new(),
                        })
                    })
                    .map_err(&fail)?;
                rows.collect::<Result<_, _>>().map_err(&fail)?
            };
            let Some(last) = page.last() else {
                return Ok(());
            };
            after.clone_from(last);
            let full = page.len() == ID_PAGE;
            // The lock is not held here: `f` may call back into the store.
            for key in page {
                let id = self.id_from(|| format!("objects row {}", hex::encode(&key)), &key)?;
                f(id)?;
            }
            if !full {
                return Ok(());
            }
        }
    }

    fn for_each_delta(
        &self,
        f: &mut dyn FnMut(ObjectId, ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        // One scan of the table reading each record's first 34 bytes (tag, depth, base),
        // collected under the lock and handed out after it.
        let fail = self.fail("for_each_delta");
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = {
            let conn = self.lock();
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, substr(data, 1, 34) FROM objects
                     WHERE typeof(data) = 'blob' AND substr(data, 1, 1) = x'02'",
                )
                .map_err(&fail)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, Vec<u8>>(1)?))
                })
                .map_err(&fail)?;
            rows.collect::<Result<_, _>>().map_err(&fail)?
        };
        for (id, head) in pairs {
            let id = self.id_from(|| "objects row".into(), &id)?;
            if let Some((base, _)) = codec::delta_base(&head) {
                f(id, base)?;
            }
        }
        Ok(())
    }
}

impl RefStore for SqliteStore {
    fn get_ref(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        validate_ref_name(name)?;
        let conn = self.lock();
        let raw = Self::read_ref(&conn, name).map_err(|e| {
            StoreError::backend(format!("sqlite get_ref {name} in {}", self.path), e)
        })?;
        drop(conn);
        raw.map(|b| self.id_from(|| format!("refs row {name}"), &b))
            .transpose()
    }

    fn update_refs(&self, updates: &[RefUpdate], message: &str) -> Result<(), StoreError> {
        crate::refs::check_batch(updates)?;
        let fail = self.fail("update_refs");
        let mut conn = self.lock_clear()?;
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&fail)?;
        self.refs_in(&tx, updates, message)?;
        tx.commit().map_err(&fail)
    }

    fn writes_objects_with_refs(&self) -> bool {
        true
    }

    /// One write transaction: the updates checked first (a conflict writes nothing),
    /// then the objects as [`ObjectStore::put_many_with_bases`] writes them, then the
    /// refs.
    fn update_refs_with_objects(
        &self,
        objects: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
        updates: &[RefUpdate],
        message: &str,
    ) -> Result<bool, StoreError> {
        crate::refs::check_batch(updates)?;
        self.put_with(objects, bases, Some((updates, message)))?;
        Ok(true)
    }

    fn list_refs(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>, StoreError> {
        let fail = self.fail("list_refs");
        let rows: Vec<(String, Vec<u8>)> = {
            let conn = self.lock();
            let mut stmt = conn
                .prepare_cached("SELECT name, id FROM refs WHERE name >= ?1 ORDER BY name")
                .map_err(&fail)?;
            let mut rows = stmt.query([prefix]).map_err(&fail)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(&fail)? {
                let name = match row.get_ref(0).map_err(&fail)? {
                    ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                    _ => continue,
                };
                if !name.starts_with(prefix) {
                    break;
                }
                let id = match row.get_ref(1).map_err(&fail)? {
                    ValueRef::Blob(b) => b.to_vec(),
                    _ => Vec::new(),
                };
                out.push((name, id));
            }
            out
        };
        rows.into_iter()
            .map(|(name, raw)| {
                let id = self.id_from(|| format!("refs row {name}"), &raw)?;
                Ok((name, id))
            })
            .collect()
    }

    fn reflog(&self, name: &str) -> Result<Vec<ReflogEntry>, StoreError> {
        validate_ref_name(name)?;
        let fail = |e| StoreError::backend(format!("sqlite reflog {name} in {}", self.path), e);
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT seq, old, new, message FROM reflog WHERE name = ?1 ORDER BY seq",
            )
            .map_err(fail)?;
        let mut rows = stmt.query([name]).map_err(fail)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(fail)? {
            let seq: i64 = row.get(0).map_err(fail)?;
            let what = || format!("reflog row {seq} of {name}");
            let old = self.opt_id_from(what, row.get_ref(1).map_err(fail)?)?;
            let new = self.opt_id_from(what, row.get_ref(2).map_err(fail)?)?;
            let message = match row.get_ref(3).map_err(fail)? {
                ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
                other => {
                    return Err(
                        self.malformed(what(), format!("message is of type {}", other.data_type()))
                    )
                }
            };
            out.push(ReflogEntry { old, new, message });
        }
        Ok(out)
    }
}

crate::impl_object_source!(SqliteStore);
