//! The SQLite adapter: conformance, persistence, corruption, hostile files,
//! compression at rest, and several writer processes on one database.
//!
//! `adapter_figures` (ignored) measures both on-disk adapters:
//! `cargo test --release -p snapgraph-store --test sqlite -- --ignored --nocapture adapter_figures`

use std::path::Path;
use std::time::Instant;

use rusqlite::Connection;
use snapgraph::{ObjectId, ObjectSource};
use snapgraph_store::dir::{DirOptions, DirStore};
use snapgraph_store::sqlite::{SqliteError, SqliteOptions, SqliteStore};
use snapgraph_store::{
    conformance, Compression, ObjectStore, RefStore, RefUpdate, Store, StoreError,
};

mod common;
use common::*;

fn backend_source<T: std::error::Error + 'static>(err: &StoreError) -> Option<&T> {
    match err {
        StoreError::Backend { source, .. } => source.downcast_ref::<T>(),
        _ => None,
    }
}

#[test]
fn sqlite_file_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("store.db")).unwrap();
    conformance::run(&store);
}

#[test]
fn sqlite_file_mapped_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions {
        mmap_bytes: 64 << 20,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open_with(dir.path().join("store.db"), options).unwrap();
    conformance::run(&store);
}

#[test]
fn sqlite_in_memory_conforms() {
    conformance::run(&SqliteStore::in_memory().unwrap());
}

#[test]
fn sqlite_uncompressed_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions {
        compression: Compression::None,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open_with(dir.path().join("raw.db"), options).unwrap();
    conformance::run(&store);
}

/// Reads shared on one handle (`share_reads`) may keep the snapshot they began in,
/// but never past the end of sharing or a write through that handle: then they see
/// what another handle wrote meanwhile, objects and refs alike.
#[test]
fn shared_reads_see_other_handles_writes_once_they_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let one = SqliteStore::open(&path).unwrap();
    let two = SqliteStore::open(&path).unwrap();
    let obj = |s: &str| (ObjectId::hash_stored(s.as_bytes()), s.as_bytes().to_vec());
    let (ia, a) = obj("a");
    let (ib, b) = obj("b");
    let (ic, c) = obj("c");
    one.put_many(&[(ia, &a)]).unwrap();
    one.share_reads(true).unwrap();
    assert_eq!(one.has_many(&[ia]).unwrap(), Vec::<ObjectId>::new());
    two.put_many(&[(ib, &b)]).unwrap();
    // Ended by a write through the handle: the next read sees `b` as well.
    one.put_many(&[(ic, &c)]).unwrap();
    assert_eq!(one.has_many(&[ia, ib, ic]).unwrap(), Vec::<ObjectId>::new());
    // Ended by the end of sharing.
    let _ = one.has_many(&[ia]).unwrap();
    two.delete_many(&[ib]).unwrap();
    two.update_refs(&[RefUpdate::new("refs/heads/main", None, Some(ia))], "m")
        .unwrap();
    one.share_reads(false).unwrap();
    assert_eq!(one.has_many(&[ib]).unwrap(), vec![ib]);
    assert_eq!(one.get_ref("refs/heads/main").unwrap(), Some(ia));
    // Writes of every kind go through while reads are shared.
    one.share_reads(true).unwrap();
    let _ = ObjectStore::get_many(&one, &[ia]).unwrap();
    one.update_refs(
        &[RefUpdate::new("refs/heads/main", Some(ia), Some(ic))],
        "m",
    )
    .unwrap();
    one.delete_many(&[ic]).unwrap();
    one.repack(&Default::default()).unwrap();
    assert_eq!(two.get_ref("refs/heads/main").unwrap(), Some(ic));
    assert_eq!(two.has_many(&[ic]).unwrap(), vec![ic]);
    one.share_reads(false).unwrap();
}

#[test]
fn reopening_sees_objects_refs_and_reflogs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let blob = text(1, 5000);
    let id = id_of(&blob);
    {
        let store = SqliteStore::open(&path).unwrap();
        store.put_many(&[(id, &blob)]).unwrap();
        store
            .compare_and_swap_ref("heads/main", None, id, "first")
            .unwrap();
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        snapgraph_store::ObjectStore::get_many(&store, &[id]).unwrap(),
        vec![Some(blob)]
    );
    assert_eq!(store.get_ref("heads/main").unwrap(), Some(id));
    assert_eq!(store.reflog("heads/main").unwrap().len(), 1);
    assert_eq!(store.path(), path.display().to_string());
}

#[test]
fn corrupt_rows_are_corrupt_errors_naming_the_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).unwrap();
    let blobs: Vec<Vec<u8>> = (0..4).map(|i| text(i, 3000)).collect();
    let ids: Vec<ObjectId> = blobs.iter().map(|b| id_of(b)).collect();
    let batch: Vec<(ObjectId, &[u8])> = ids.iter().zip(&blobs).map(|(i, b)| (*i, &b[..])).collect();
    store.put_many(&batch).unwrap();

    let raw = Connection::open(&path).unwrap();
    // A flipped byte in a compressed record.
    let mut data: Vec<u8> = raw
        .query_row(
            "SELECT data FROM objects WHERE id = ?1",
            [&ids[0].as_bytes()[..]],
            |r| r.get(0),
        )
        .unwrap();
    let last = data.len() - 1;
    data[last] ^= 0x40;
    raw.execute(
        "UPDATE objects SET data = ?1 WHERE id = ?2",
        rusqlite::params![data, &ids[0].as_bytes()[..]],
    )
    .unwrap();
    // A record of the wrong type, an empty one, and another object's bytes.
    raw.execute(
        "UPDATE objects SET data = 42 WHERE id = ?1",
        [&ids[1].as_bytes()[..]],
    )
    .unwrap();
    raw.execute(
        "UPDATE objects SET data = x'' WHERE id = ?1",
        [&ids[2].as_bytes()[..]],
    )
    .unwrap();
    raw.execute(
        "UPDATE objects SET data = (SELECT data FROM objects WHERE id = ?1) WHERE id = ?2",
        [&ids[0].as_bytes()[..], &ids[3].as_bytes()[..]],
    )
    .unwrap();

    for id in &ids {
        match snapgraph_store::ObjectStore::get_many(&store, &[*id]) {
            Err(StoreError::Corrupt { id: bad, .. }) => assert_eq!(bad, *id),
            other => panic!("expected Corrupt for {id}, got {other:?}"),
        }
        assert!(store.get(id).is_err(), "the core sees the error too");
    }
    // Presence does not read the bytes.
    assert!(store.has_many(&ids).unwrap().is_empty());
}

/// A handle keeps the tree and manifest nodes it verified (read and re-hashed, or
/// hashed when written) for its later reads; bytes written under another id are not
/// kept, and a node deleted through the handle is forgotten.
#[test]
fn a_handle_answers_from_the_nodes_it_verified_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).unwrap();
    let node = |seed: u64| {
        let mut b = vec![snapgraph::ObjectKind::Tree.byte(), 1];
        b.extend(text(seed, 2000));
        b
    };
    let (good, other) = (node(1), node(2));
    let good_id = id_of(&good);
    // `other`'s bytes under an id they do not hash to.
    let wrong_id = id_of(&node(3));
    store
        .put_many(&[(good_id, &good[..]), (wrong_id, &other[..])])
        .unwrap();
    assert_eq!(
        ObjectStore::get_many(&store, &[good_id]).unwrap(),
        vec![Some(good.clone())]
    );
    match ObjectStore::get_many(&store, &[wrong_id]) {
        Err(StoreError::Corrupt { id, .. }) => assert_eq!(id, wrong_id),
        other => panic!("expected Corrupt for {wrong_id}, got {other:?}"),
    }
    // The row damaged behind the handle's back: a new handle sees it, this one
    // answers with the bytes it verified (an id's bytes never change).
    let raw = Connection::open(&path).unwrap();
    raw.execute(
        "UPDATE objects SET data = x'00' WHERE id = ?1",
        [&good_id.as_bytes()[..]],
    )
    .unwrap();
    let fresh = SqliteStore::open(&path).unwrap();
    assert!(ObjectStore::get_many(&fresh, &[good_id]).is_err());
    // A batch of a kept node and a corrupt row still fails, naming the row.
    match ObjectStore::get_many(&store, &[good_id, wrong_id]) {
        Err(StoreError::Corrupt { id, .. }) => assert_eq!(id, wrong_id),
        other => panic!("expected Corrupt for {wrong_id}, got {other:?}"),
    }
    assert_eq!(
        ObjectStore::get_many(&store, &[good_id]).unwrap(),
        vec![Some(good)]
    );
    // Deleted through the handle: gone for it too.
    store.delete_many(&[good_id]).unwrap();
    assert_eq!(
        ObjectStore::get_many(&store, &[good_id]).unwrap(),
        vec![None]
    );
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not-a.db");
    std::fs::write(
        &path,
        b"this is not an SQLite database, just text\n".repeat(200),
    )
    .unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(
        matches!(
            backend_source::<SqliteError>(&err),
            Some(SqliteError::NotADatabase { .. })
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );

    // A directory where the file should be, and a path under a regular file.
    let err = SqliteStore::open(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::Backend { .. }));
    assert!(err.to_string().contains(&dir.path().display().to_string()));
    let under_file = path.join("x.db");
    let err = SqliteStore::open(&under_file).unwrap_err();
    assert!(
        err.to_string().contains(&under_file.display().to_string()),
        "{err}"
    );
}

#[test]
fn a_newer_schema_is_refused_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    drop(SqliteStore::open(&path).unwrap());
    Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE meta SET value = 99 WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    match backend_source::<SqliteError>(&err) {
        Some(SqliteError::NewerSchema {
            found, supported, ..
        }) => assert_eq!(
            (*found, *supported),
            (99, snapgraph_store::sqlite::SCHEMA_VERSION)
        ),
        other => panic!("expected NewerSchema, got {other:?} from {err:?}"),
    }
    assert!(err.to_string().contains(&path.display().to_string()));
}

#[test]
fn malformed_ref_rows_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).unwrap();
    let raw = Connection::open(&path).unwrap();
    raw.execute(
        "INSERT INTO refs (name, id) VALUES ('heads/short', x'0102')",
        [],
    )
    .unwrap();
    raw.execute(
        "INSERT INTO reflog (name, old, new, message) VALUES ('heads/short', 7, NULL, 'm')",
        [],
    )
    .unwrap();
    raw.execute("INSERT INTO objects (id, data) VALUES (x'01', x'00')", [])
        .unwrap();
    for err in [
        store.get_ref("heads/short").unwrap_err(),
        store.list_refs("").unwrap_err(),
        store.reflog("heads/short").unwrap_err(),
        store.for_each_id(&mut |_| Ok(())).unwrap_err(),
        store
            .compare_and_swap_ref("heads/short", None, id_of(b"x"), "m")
            .unwrap_err(),
    ] {
        assert!(
            matches!(
                backend_source::<SqliteError>(&err),
                Some(SqliteError::Malformed { .. })
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains(&path.display().to_string()));
    }
}

#[test]
fn compression_shrinks_text_at_rest() {
    let dir = tempfile::tempdir().unwrap();
    let blobs: Vec<Vec<u8>> = (0..300).map(|i| text(i, 4096)).collect();
    let batch: Vec<(ObjectId, &[u8])> = blobs.iter().map(|b| (id_of(b), &b[..])).collect();
    let raw_total: usize = blobs.iter().map(Vec::len).sum();
    let mut sizes = Vec::new();
    for (name, compression) in [
        ("zstd.db", Compression::default()),
        ("raw.db", Compression::None),
    ] {
        let path = dir.path().join(name);
        let store = SqliteStore::open_with(
            &path,
            SqliteOptions {
                compression,
                ..SqliteOptions::default()
            },
        )
        .unwrap();
        store.put_many(&batch).unwrap();
        drop(store);
        let conn = Connection::open(&path).unwrap();
        let at_rest: i64 = conn
            .query_row(
                "SELECT (SELECT sum(length(data)) FROM objects)
                      + coalesce((SELECT sum(length(data)) FROM packs), 0)",
                [],
                |r| r.get(0),
            )
            .unwrap();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        drop(conn);
        let file = std::fs::metadata(&path).unwrap().len();
        sizes.push((at_rest as usize, file as usize));
    }
    let (zstd, raw) = (sizes[0], sizes[1]);
    assert!(zstd.0 * 2 < raw_total, "records: {zstd:?} of {raw_total}");
    assert!(raw.0 >= raw_total);
    assert!(zstd.1 * 2 < raw.1, "files: zstd {zstd:?}, raw {raw:?}");
}

#[test]
fn two_stores_on_one_file_share_refs_and_objects() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let a = SqliteStore::open(&path).unwrap();
    let b = SqliteStore::open(&path).unwrap();
    let blob = b"shared".to_vec();
    let id = id_of(&blob);
    a.put_many(&[(id, &blob)]).unwrap();
    b.put_many(&[(id, &blob)]).unwrap();
    assert_eq!(
        snapgraph_store::ObjectStore::get_many(&b, &[id]).unwrap(),
        vec![Some(blob)]
    );
    a.compare_and_swap_ref("heads/main", None, id, "a").unwrap();
    assert!(matches!(
        b.compare_and_swap_ref("heads/main", None, id, "b"),
        Err(StoreError::RefConflict { .. })
    ));
    // Threads of two stores on one file contend like threads of one store.
    let name = "heads/contended";
    std::thread::scope(|s| {
        for t in 0..4 {
            let store = if t % 2 == 0 { &a } else { &b };
            s.spawn(move || {
                for r in 0..15 {
                    let new = id_of(format!("{t} {r}").as_bytes());
                    loop {
                        let old = store.get_ref(name).unwrap();
                        match store.compare_and_swap_ref(name, old, new, "m") {
                            Ok(()) => break,
                            Err(StoreError::RefConflict { .. }) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            });
        }
    });
    let log = a.reflog(name).unwrap();
    assert_eq!(log.len(), 60);
    for pair in log.windows(2) {
        assert_eq!(pair[0].new, pair[1].old);
    }
}

// ----- several writer processes -----

const CHILD_DB: &str = "SNAPGRAPH_CHILD_DB";

/// Not a test of its own: the body of a child process (see
/// `several_processes_converge`); returns at once unless the environment says so.
#[test]
fn child_writer_entry() {
    let Ok(db) = std::env::var(CHILD_DB) else {
        return;
    };
    let k: usize = std::env::var(CHILD_INDEX).unwrap().parse().unwrap();
    let store = SqliteStore::open(&db).unwrap();
    run_child(&store, k);
}

#[test]
fn several_processes_converge() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("multi.db");
    // Created up front so that the children race on data, not on the schema.
    drop(SqliteStore::open(&path).unwrap());
    spawn_children(CHILD_DB, &path);
    check_children(&SqliteStore::open(&path).unwrap());
}

// ----- figures -----

struct Figures {
    put: f64,
    get: f64,
    has: f64,
    bytes: usize,
    at_rest: u64,
}

/// The figures' objects, batch by batch (generated, not timed).
fn figure_batch(b: usize) -> Vec<Vec<u8>> {
    (0..1000)
        .map(|i| {
            let n = (b * 1000 + i) as u64;
            if b.is_multiple_of(2) {
                random(n, 16 * 1024)
            } else {
                text(n, 4 * 1024)
            }
        })
        .collect()
}

fn measure(store: &dyn Store, location: &Path) -> Figures {
    let batches = 40;
    let mut ids = Vec::new();
    let mut bytes = 0;
    let mut put = 0.0;
    for b in 0..batches {
        let blobs = figure_batch(b);
        let batch: Vec<(ObjectId, &[u8])> = blobs.iter().map(|b| (id_of(b), &b[..])).collect();
        bytes += blobs.iter().map(Vec::len).sum::<usize>();
        ids.extend(batch.iter().map(|(i, _)| *i));
        let t = Instant::now();
        store.put_many(&batch).unwrap();
        put += t.elapsed().as_secs_f64();
    }
    let t = Instant::now();
    let mut read = 0;
    for chunk in ids.chunks(1000) {
        for got in snapgraph_store::ObjectStore::get_many(&store, chunk).unwrap() {
            read += got.unwrap().len();
        }
    }
    let get = t.elapsed().as_secs_f64();
    assert_eq!(read, bytes);
    let t = Instant::now();
    assert!(store.has_many(&ids).unwrap().is_empty());
    let has = t.elapsed().as_secs_f64();
    Figures {
        put,
        get,
        has,
        bytes,
        at_rest: dir_size(location),
    }
}

fn print_figures(name: &str, f: &Figures) {
    let n = 40_000.0;
    let mb = f.bytes as f64 / 1e6;
    println!(
        "{name:>8}: put {:>7.0} obj/s {:>6.1} MB/s | get_many {:>7.0} obj/s {:>6.1} MB/s | \
         has_many(40k) {:.3} s ({:.0} ids/s) | {:.0} MB stored in {:.0} MB",
        n / f.put,
        mb / f.put,
        n / f.get,
        mb / f.get,
        f.has,
        n / f.has,
        mb,
        f.at_rest as f64 / 1e6
    );
}

fn cas_rate(store: &dyn Store, n: usize) -> f64 {
    let t = Instant::now();
    let mut old = None;
    for i in 0..n {
        let new = id_of(format!("cas {i}").as_bytes());
        store
            .compare_and_swap_ref("heads/bench", old, new, "bench")
            .unwrap();
        old = Some(new);
    }
    n as f64 / t.elapsed().as_secs_f64()
}

/// Ref moves per second on a raw connection with the adapter's schema, for a given
/// `synchronous` setting (what the adapter's FULL costs against NORMAL).
fn raw_ref_rate(path: &Path, synchronous: &str, n: usize) -> f64 {
    let mut conn = Connection::open(path).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", synchronous)
        .unwrap();
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS refs (name TEXT PRIMARY KEY NOT NULL, id BLOB NOT NULL);
         CREATE TABLE IF NOT EXISTS reflog (seq INTEGER PRIMARY KEY AUTOINCREMENT,
             name TEXT NOT NULL, old BLOB, new BLOB, message TEXT NOT NULL);",
    )
    .unwrap();
    let t = Instant::now();
    for i in 0..n {
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .unwrap();
        let id = id_of(format!("{synchronous} {i}").as_bytes());
        tx.execute(
            "INSERT OR REPLACE INTO refs (name, id) VALUES ('heads/x', ?1)",
            [&id.as_bytes()[..]],
        )
        .unwrap();
        tx.execute(
            "INSERT INTO reflog (name, old, new, message) VALUES ('heads/x', NULL, ?1, 'm')",
            [&id.as_bytes()[..]],
        )
        .unwrap();
        tx.commit().unwrap();
    }
    n as f64 / t.elapsed().as_secs_f64()
}

/// Looks `ids` up on a raw connection to an adapter's database, in one read
/// transaction, with a cached single-row statement in a loop; `sql` selects
/// `id, <column>`. Returns the seconds taken and how many were found.
fn lookup_loop(conn: &Connection, column: &str, ids: &[ObjectId]) -> (f64, usize) {
    let t = Instant::now();
    let tx = conn.unchecked_transaction().unwrap();
    let mut found = 0;
    {
        let mut stmt = tx
            .prepare_cached(&format!("SELECT {column} FROM objects WHERE id = ?1"))
            .unwrap();
        for id in ids {
            let mut rows = stmt.query([&id.as_bytes()[..]]).unwrap();
            if let Some(row) = rows.next().unwrap() {
                let _ = row.get_ref(0).unwrap();
                found += 1;
            }
        }
    }
    tx.commit().unwrap();
    (t.elapsed().as_secs_f64(), found)
}

/// The same with `IN (...)` chunks of 500 and a map back to the order asked.
fn lookup_chunked(conn: &Connection, column: &str, ids: &[ObjectId]) -> (f64, usize) {
    let t = Instant::now();
    let tx = conn.unchecked_transaction().unwrap();
    let mut at = std::collections::HashMap::new();
    for (i, id) in ids.iter().enumerate() {
        at.entry(*id.as_bytes()).or_insert(i);
    }
    let mut out: Vec<Option<usize>> = vec![None; ids.len()];
    {
        let sql = format!(
            "SELECT id, {column} FROM objects WHERE id IN ({})",
            vec!["?"; 500].join(",")
        );
        let mut stmt = tx.prepare_cached(&sql).unwrap();
        for chunk in ids.chunks(500) {
            let pad = std::iter::repeat_n(&chunk[chunk.len() - 1], 500 - chunk.len());
            let mut rows = stmt
                .query(rusqlite::params_from_iter(
                    chunk.iter().chain(pad).map(|id| &id.as_bytes()[..]),
                ))
                .unwrap();
            while let Some(row) = rows.next().unwrap() {
                let key: [u8; 32] = row
                    .get_ref(0)
                    .unwrap()
                    .as_bytes()
                    .unwrap()
                    .try_into()
                    .unwrap();
                let _ = row.get_ref(1).unwrap();
                out[at[&key]] = Some(1);
            }
        }
    }
    tx.commit().unwrap();
    (t.elapsed().as_secs_f64(), out.iter().flatten().count())
}

/// Compares the two lookup strategies on 10,000 ids (get: with the data; has: ids
/// only, half of them absent), best of three rounds.
fn lookup_strategies(path: &Path, present: &[ObjectId]) {
    let conn = Connection::open(path).unwrap();
    let mut half: Vec<ObjectId> = present[..present.len() / 2].to_vec();
    half.extend((0..present.len() / 2).map(|i| id_of(format!("absent {i}").as_bytes())));
    for (what, column, ids) in [("get", "data", present), ("has", "1", &half[..])] {
        let (mut single, mut chunked) = (f64::MAX, f64::MAX);
        for _ in 0..3 {
            let (a, found_a) = lookup_loop(&conn, column, ids);
            let (b, found_b) = lookup_chunked(&conn, column, ids);
            assert_eq!(found_a, found_b);
            single = single.min(a);
            chunked = chunked.min(b);
        }
        println!(
            "  {what} of {} ids: single-row loop {:.1} ms, IN chunks of 500 {:.1} ms",
            ids.len(),
            single * 1e3,
            chunked * 1e3
        );
    }
}

#[test]
#[ignore = "measurement: run in release with --ignored --nocapture"]
fn adapter_figures() {
    let dir = tempfile::tempdir().unwrap();
    println!("40,000 objects (20,000 x 16 KiB random, 20,000 x 4 KiB text), batches of 1,000");

    let db = dir.path().join("figures.db");
    let store = SqliteStore::open(&db).unwrap();
    let f = measure(&store, dir.path());
    print_figures("sqlite", &f);
    println!(
        "  sqlite CAS (synchronous=FULL): {:.0} ref moves/s",
        cas_rate(&store, 300)
    );
    drop(store);
    println!(
        "  sqlite file after close: {:.0} MB",
        std::fs::metadata(&db).unwrap().len() as f64 / 1e6
    );
    let sample: Vec<ObjectId> = (0..10).flat_map(figure_batch).map(|b| id_of(&b)).collect();
    lookup_strategies(&db, &sample);
    let raw = dir.path().join("raw-refs.db");
    println!(
        "  raw ref move + reflog row: synchronous=FULL {:.0}/s, NORMAL {:.0}/s",
        raw_ref_rate(&raw, "FULL", 300),
        raw_ref_rate(&dir.path().join("raw-refs-normal.db"), "NORMAL", 300),
    );

    let root = dir.path().join("dirstore");
    let store = DirStore::open_with(&root, DirOptions::default()).unwrap();
    let f = measure(&store, &root);
    print_figures("dir", &f);
    println!("  dir CAS: {:.0} ref moves/s", cas_rate(&store, 300));
}

/// The caller-verifies read path (`ReadCheck::Caller`, `CallerVerifies`): the store
/// leaves the hash to the core's checkout, which still refuses a tampered object
/// with an error naming its id; every other read keeps verifying.
#[test]
fn a_tampered_object_is_refused_by_id_when_the_caller_verifies() {
    use snapgraph::object::ObjectError;
    use snapgraph::{CheckoutError, CheckoutOptions, CheckoutPolicy, CommitOptions, Workspace};
    use snapgraph_store::{CallerVerifies, ReadCheck};

    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(dir.path().join("store.db")).unwrap();
    let raw_sqlite = SqliteStore::open_with(
        dir.path().join("raw.db"),
        SqliteOptions {
            compression: Compression::None,
            ..SqliteOptions::default()
        },
    )
    .unwrap();
    let dirstore = DirStore::open_with(dir.path().join("objects"), DirOptions::default()).unwrap();
    let memory = snapgraph_store::MemoryStore::new();
    let stores: [(&str, &dyn Store); 4] = [
        ("sqlite", &sqlite),
        ("sqlite uncompressed", &raw_sqlite),
        ("dir", &dirstore),
        ("memory", &memory),
    ];

    let mut ws = Workspace::new();
    ws.write("/text.txt", text(3, 6000)).unwrap();
    ws.write("/big.bin", random(4, 300_000)).unwrap();
    let c = ws.commit(CommitOptions::new()).unwrap();
    let commit = c.id();
    let text_id = match ws.file_content_id("/text.txt") {
        Some(id) => id,
        None => panic!("a 6,000-byte file is one chunk object"),
    };
    let objects: Vec<(ObjectId, Vec<u8>)> = c.into_objects().into_iter().collect();
    let good = objects
        .iter()
        .find(|(id, _)| *id == text_id)
        .unwrap()
        .1
        .clone();
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;

    for (name, store) in stores {
        let batch: Vec<(ObjectId, &[u8])> = objects.iter().map(|(i, b)| (*i, &b[..])).collect();
        store.put_many(&batch).unwrap();
        // Both paths read the untouched objects alike.
        let ids: Vec<ObjectId> = objects.iter().map(|(i, _)| *i).collect();
        assert_eq!(
            store.get_many_checked(&ids, ReadCheck::Caller).unwrap(),
            ObjectStore::get_many(store, &ids).unwrap(),
            "{name}"
        );
        let mut full = Workspace::new();
        let _ = full
            .checkout_with(
                commit,
                &CallerVerifies(store),
                CheckoutOptions::new().policy(CheckoutPolicy::Force),
            )
            .unwrap();
        assert_eq!(
            full.read("/big.bin").unwrap(),
            &random(4, 300_000)[..],
            "{name}"
        );

        // Tamper with the text file's chunk: a stored record of other bytes.
        tamper(name, dir.path(), &memory, text_id, &bad);
        assert!(
            matches!(ObjectStore::get_many(store, &[text_id]), Err(StoreError::Corrupt { id, .. }) if id == text_id),
            "{name}: the verifying read refuses it"
        );
        assert_eq!(
            store
                .get_many_checked(&[text_id], ReadCheck::Store)
                .unwrap_err()
                .to_string(),
            ObjectStore::get_many(store, &[text_id])
                .unwrap_err()
                .to_string(),
            "{name}: ReadCheck::Store is get_many"
        );
        // The caller-verifies read hands the bytes over unhashed (memory and the
        // record formats of every adapter), and the core refuses them by id.
        assert_eq!(
            store
                .get_many_checked(&[text_id], ReadCheck::Caller)
                .unwrap(),
            vec![Some(bad.clone())],
            "{name}"
        );
        let refused = |e: CheckoutError| match e {
            CheckoutError::Object(ObjectError::Corrupt { id, .. }) => assert_eq!(id, text_id),
            other => panic!("{name}: expected Corrupt naming {text_id}, got {other:?}"),
        };
        let mut full = Workspace::new();
        refused(
            full.checkout_with(
                commit,
                &CallerVerifies(store),
                CheckoutOptions::new().policy(CheckoutPolicy::Force),
            )
            .unwrap_err(),
        );
        let mut shallow = Workspace::new();
        let _ = shallow
            .checkout_with(
                commit,
                &CallerVerifies(store),
                CheckoutOptions::new()
                    .policy(CheckoutPolicy::Force)
                    .shallow(true),
            )
            .unwrap();
        refused(
            shallow
                .load_content("/text.txt", &CallerVerifies(store))
                .unwrap_err(),
        );
        assert!(!shallow.is_loaded("/text.txt"), "{name}");
        shallow
            .load_content("/big.bin", &CallerVerifies(store))
            .unwrap();
        // Verification over the whole store still re-hashes.
        assert!(
            !snapgraph_store::verify(store, true).unwrap().is_clean(),
            "{name}"
        );
    }
}

/// Replaces the record of `id` in adapter `name` (files under `dir`) with one
/// holding `bytes` as they are.
fn tamper(
    name: &str,
    dir: &Path,
    memory: &snapgraph_store::MemoryStore,
    id: ObjectId,
    bytes: &[u8],
) {
    let mut record = vec![0u8];
    record.extend_from_slice(bytes);
    match name {
        "sqlite" | "sqlite uncompressed" => {
            let file = if name == "sqlite" {
                "store.db"
            } else {
                "raw.db"
            };
            let raw = Connection::open(dir.join(file)).unwrap();
            raw.execute(
                "UPDATE objects SET data = ?1 WHERE id = ?2",
                rusqlite::params![record, &id.as_bytes()[..]],
            )
            .unwrap();
        }
        "dir" => {
            let hex = id.to_hex();
            let path = dir
                .join("objects")
                .join("objects")
                .join(&hex[..2])
                .join(&hex[2..]);
            std::fs::remove_file(&path).unwrap();
            std::fs::write(&path, &record).unwrap();
        }
        "memory" => memory.corrupt(id, bytes.to_vec()),
        other => panic!("no tampering for {other}"),
    }
}

/// The rows of `objects` holding a pack reference (schema 3), as (id, reference).
fn references(path: &Path) -> Vec<(ObjectId, Vec<u8>)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT id, data FROM objects WHERE substr(data, 1, 1) = x'80' ORDER BY id")
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            let id: Vec<u8> = r.get(0)?;
            Ok((
                ObjectId::from_bytes(id.try_into().unwrap()),
                r.get::<_, Vec<u8>>(1)?,
            ))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

fn count(path: &Path, sql: &str) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_first_batch_makes_a_dictionary_and_packs_that_later_writes_and_deletes_keep_straight() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    // 300 objects of 4 KiB: a dictionary is sampled, records go into packs.
    let first: Vec<Vec<u8>> = (0..300).map(|i| text(i, 4096)).collect();
    let batch: Vec<(ObjectId, &[u8])> = first.iter().map(|b| (id_of(b), &b[..])).collect();
    let later: Vec<Vec<u8>> = (1000..1003).map(|i| text(i, 2048)).collect();
    let small: Vec<(ObjectId, &[u8])> = later.iter().map(|b| (id_of(b), &b[..])).collect();
    {
        let store = SqliteStore::open(&path).unwrap();
        store.put_many(&batch).unwrap();
        // Written again: nothing new lands in a pack.
        store.put_many(&batch[..10]).unwrap();
        store.put_many(&small).unwrap();
    }
    assert_eq!(count(&path, "SELECT count(*) FROM dicts"), 1);
    let packs = count(&path, "SELECT count(*) FROM packs");
    assert!(packs >= 2, "{packs} packs");
    assert_eq!(references(&path).len(), 303);
    assert_eq!(
        count(&path, "SELECT sum(live) FROM pack_live"),
        303,
        "each packed object counted once"
    );
    // Records against the dictionary (tag 3), inside the packs.
    let conn = Connection::open(&path).unwrap();
    let (pack, start): (i64, i64) = {
        let r = &references(&path)[0].1;
        (
            i64::from_le_bytes(r[1..9].try_into().unwrap()),
            i64::from(u32::from_le_bytes(r[9..13].try_into().unwrap())),
        )
    };
    let tag: Vec<u8> = conn
        .query_row(
            "SELECT substr(data, ?2 + 1, 1) FROM packs WHERE pack = ?1",
            rusqlite::params![pack, start],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tag, [3]);
    drop(conn);

    // A new handle reads the dictionary from the file.
    let store = SqliteStore::open(&path).unwrap();
    let ids: Vec<ObjectId> = batch.iter().chain(&small).map(|(id, _)| *id).collect();
    let got = snapgraph_store::ObjectStore::get_many(&store, &ids).unwrap();
    for (b, g) in first.iter().chain(&later).zip(got) {
        assert_eq!(g.as_deref(), Some(&b[..]));
    }
    // Deleting the first batch drops its packs with their last object, not before.
    store.delete_many(&ids[..150]).unwrap();
    assert_eq!(count(&path, "SELECT count(*) FROM packs"), packs);
    store.delete_many(&ids[150..300]).unwrap();
    assert_eq!(count(&path, "SELECT count(*) FROM packs"), 1);
    assert_eq!(count(&path, "SELECT count(*) FROM pack_live"), 1);
    assert_eq!(
        snapgraph_store::ObjectStore::get_many(&store, &ids[300..]).unwrap(),
        later.iter().map(|b| Some(b.clone())).collect::<Vec<_>>()
    );
}

/// The tag of the record of `id` (in its row, or in its pack when the row holds a
/// pack reference, tag 0x80).
fn tag_of(path: &Path, id: &ObjectId) -> u8 {
    let conn = Connection::open(path).unwrap();
    let data: Vec<u8> = conn
        .query_row(
            "SELECT data FROM objects WHERE id = ?1",
            [id.as_bytes()],
            |r| r.get(0),
        )
        .unwrap();
    if data[0] == 0x80 {
        let pack = i64::from_le_bytes(data[1..9].try_into().unwrap());
        let start = i64::from(u32::from_le_bytes(data[9..13].try_into().unwrap()));
        let tag: Vec<u8> = conn
            .query_row(
                "SELECT substr(data, ?2 + 1, 1) FROM packs WHERE pack = ?1",
                rusqlite::params![pack, start],
                |r| r.get(0),
            )
            .unwrap();
        return tag[0];
    }
    data[0]
}

/// A store (`store.db` in the directory returned) holding `n` texts of 4 KiB, written
/// in one batch by a fresh handle (enough for a dictionary from 100 on), and the texts.
fn stored_texts(n: u64) -> (tempfile::TempDir, Vec<Vec<u8>>) {
    let dir = tempfile::tempdir().unwrap();
    let texts: Vec<Vec<u8>> = (0..n).map(|i| text(i, 4096)).collect();
    let batch: Vec<(ObjectId, &[u8])> = texts.iter().map(|b| (id_of(b), &b[..])).collect();
    SqliteStore::open(dir.path().join("store.db"))
        .unwrap()
        .put_many(&batch)
        .unwrap();
    (dir, texts)
}

#[test]
fn a_small_batch_of_a_fresh_handle_skips_the_dictionary_and_reads_back() {
    let (dir, _) = stored_texts(300);
    let path = dir.path().join("store.db");
    assert_eq!(count(&path, "SELECT count(*) FROM dicts"), 1);
    // A per-turn commit's batch (a few small objects) in a new process: compressed
    // without the dictionary (its compression tables would cost more than the
    // write), so tag 1, not 3.
    let small = text(2000, 1024);
    let large: Vec<Vec<u8>> = (3000..3010).map(|i| text(i, 2048)).collect();
    {
        let store = SqliteStore::open(&path).unwrap();
        store.put_many(&[(id_of(&small), &small[..])]).unwrap();
        assert_eq!(tag_of(&path, &id_of(&small)), 1);
        // A batch of 16 KiB or more uses it; then so does any batch of that handle.
        let b: Vec<(ObjectId, &[u8])> = large.iter().map(|b| (id_of(b), &b[..])).collect();
        store.put_many(&b).unwrap();
        assert_eq!(tag_of(&path, &id_of(&large[0])), 3);
        let again = text(2001, 1024);
        store.put_many(&[(id_of(&again), &again[..])]).unwrap();
        assert_eq!(tag_of(&path, &id_of(&again)), 3);
    }
    let store = SqliteStore::open(&path).unwrap();
    for b in std::iter::once(&small).chain(&large) {
        assert_eq!(
            snapgraph::ObjectSource::get(&store, &id_of(b))
                .unwrap()
                .as_deref(),
            Some(&b[..])
        );
    }
}

#[test]
fn a_large_hinted_object_does_not_bring_the_dictionary_to_a_small_batch() {
    let (dir, _) = stored_texts(300);
    let path = dir.path().join("store.db");
    // A 20 KiB file stored once, then edited: the per-turn commit's batch is its new
    // version (hinted at the old one) and a small object without a hint (a tree node,
    // the commit). The hinted object is a delta; the small one is compressed without
    // the dictionary (tag 1), as in a batch of small objects alone: the dictionary's
    // tables would be built for one object of a kilobyte.
    let old = text(4000, 20 * 1024);
    let mut new = old.clone();
    new.extend_from_slice(b"\n# one more line\n");
    let small = text(4001, 1024);
    SqliteStore::open(&path)
        .unwrap()
        .put_many(&[(id_of(&old), &old[..])])
        .unwrap();
    {
        let store = SqliteStore::open(&path).unwrap();
        store
            .put_many_with_bases(
                &[(id_of(&new), &new[..]), (id_of(&small), &small[..])],
                &[Some(id_of(&old)), None],
            )
            .unwrap();
        assert_eq!(tag_of(&path, &id_of(&new)), 2);
        assert_eq!(tag_of(&path, &id_of(&small)), 1);
        // The same batch without its hint: 20 KiB compressed alone, the dictionary
        // used for both.
        let other = text(4002, 20 * 1024);
        let small2 = text(4003, 1024);
        store
            .put_many(&[(id_of(&other), &other[..]), (id_of(&small2), &small2[..])])
            .unwrap();
        assert_eq!(tag_of(&path, &id_of(&other)), 3);
        assert_eq!(tag_of(&path, &id_of(&small2)), 3);
    }
    let store = SqliteStore::open(&path).unwrap();
    for b in [&old, &new, &small] {
        assert_eq!(
            store.get(&id_of(b)).unwrap().as_deref(),
            Some(&b[..]),
            "{}",
            id_of(b)
        );
    }
}

/// Flips a byte `offset` bytes into the packed record a pack reference (`0x80 ||
/// pack || start || length`) points at.
fn flip_in_pack(raw: &Connection, reference: &[u8], offset: usize) {
    let pack = i64::from_le_bytes(reference[1..9].try_into().unwrap());
    let at = u32::from_le_bytes(reference[9..13].try_into().unwrap()) as usize + offset;
    let mut bytes: Vec<u8> = raw
        .query_row("SELECT data FROM packs WHERE pack = ?1", [pack], |r| {
            r.get(0)
        })
        .unwrap();
    bytes[at] ^= 0x55;
    raw.execute(
        "UPDATE packs SET data = ?1 WHERE pack = ?2",
        rusqlite::params![bytes, pack],
    )
    .unwrap();
}

#[test]
fn broken_packs_and_dictionaries_are_corrupt_errors_naming_the_id() {
    let (dir, _) = stored_texts(100);
    let path = dir.path().join("store.db");
    let refs = references(&path);
    assert_eq!(refs.len(), 100);
    let raw = Connection::open(&path).unwrap();
    let set = |id: &ObjectId, data: &[u8]| {
        raw.execute(
            "UPDATE objects SET data = ?1 WHERE id = ?2",
            rusqlite::params![data, &id.as_bytes()[..]],
        )
        .unwrap();
    };
    // A range past the pack's end, a pack that does not exist, a reference of the
    // wrong length, and a flipped byte inside a pack.
    let mut past = refs[0].1.clone();
    past[13..17].copy_from_slice(&u32::MAX.to_le_bytes());
    set(&refs[0].0, &past);
    let mut elsewhere = refs[1].1.clone();
    elsewhere[1..9].copy_from_slice(&999i64.to_le_bytes());
    set(&refs[1].0, &elsewhere);
    set(&refs[2].0, &refs[2].1[..9]);
    flip_in_pack(&raw, &refs[3].1, 20);
    let store = SqliteStore::open(&path).unwrap();
    for (id, _) in &refs[..4] {
        match snapgraph_store::ObjectStore::get_many(&store, &[*id]) {
            Err(StoreError::Corrupt { id: bad, .. }) => assert_eq!(bad, *id),
            other => panic!("expected Corrupt for {id}, got {other:?}"),
        }
    }
    drop(store);
    // Without its dictionary, a tag 3 record is corrupt, naming the dictionary.
    raw.execute("DELETE FROM dicts", []).unwrap();
    let store = SqliteStore::open(&path).unwrap();
    match snapgraph_store::ObjectStore::get_many(&store, &[refs[5].0]) {
        Err(StoreError::Corrupt { id, reason }) => {
            assert_eq!(id, refs[5].0);
            assert!(reason.contains("dictionary"), "{reason}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // A dictionary whose bytes do not match its key is refused, naming the file.
    raw.execute(
        "INSERT INTO dicts (dict, data) VALUES (7, x'0102030405060708090a')",
        [],
    )
    .unwrap();
    let store = SqliteStore::open(&path).unwrap();
    let err = snapgraph_store::ObjectStore::get_many(&store, &[refs[5].0]).unwrap_err();
    assert!(
        matches!(
            backend_source::<SqliteError>(&err),
            Some(SqliteError::Malformed { .. })
        ),
        "{err:?}"
    );
    drop(store);
    // A row longer than any dictionary is refused by its length, naming its row,
    // before that much is read into memory; text in place of a blob, by its bytes.
    for data in ["zeroblob(1 << 24)", "'text, not a blob'"] {
        raw.execute("DELETE FROM dicts", []).unwrap();
        raw.execute(
            &format!("INSERT INTO dicts (dict, data) VALUES (7, {data})"),
            [],
        )
        .unwrap();
        let store = SqliteStore::open(&path).unwrap();
        let err = snapgraph_store::ObjectStore::get_many(&store, &[refs[5].0]).unwrap_err();
        match backend_source::<SqliteError>(&err) {
            Some(SqliteError::Malformed { what, reason, .. }) => {
                assert!(what.contains("dicts row 00000007"), "{data}: {what}");
                if data.starts_with("zeroblob") {
                    assert!(
                        reason.contains("at most"),
                        "refused by its length: {reason}"
                    );
                }
            }
            other => panic!("{data}: expected Malformed, got {other:?} ({err})"),
        }
    }
}

/// Whether this process maps (part of) the file at `path` (`/proc/self/maps`).
fn mapped(path: &Path) -> bool {
    let real = std::fs::canonicalize(path).unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines().any(|l| l.ends_with(&*real.to_string_lossy()))
}

/// With `mmap_bytes` (the CLI's choice; `OpenOptions::sqlite_mmap_bytes` through a
/// URL) reads map the file instead of copying pages in, and read the same objects;
/// damage in a pack is the same error naming the object; without it (the default,
/// `open`) nothing is mapped.
#[test]
fn a_mapped_store_reads_the_same_and_names_the_same_damage() {
    let (dir, texts) = stored_texts(100);
    let path = dir.path().join("store.db");
    let refs = references(&path);
    let ids: Vec<ObjectId> = refs.iter().map(|(id, _)| *id).collect();
    let url = format!("sqlite:{}", path.display());
    let plain = snapgraph_store::open(&url).unwrap();
    let expected = ObjectStore::get_many(plain.as_ref(), &ids).unwrap();
    assert!(expected.iter().all(Option::is_some));
    assert!(!mapped(&path), "open maps nothing");
    drop(plain);
    let options = snapgraph_store::OpenOptions::new().sqlite_mmap_bytes(1 << 20);
    let store = snapgraph_store::open_with(&url, &options).unwrap();
    assert_eq!(
        ObjectStore::get_many(store.as_ref(), &ids).unwrap(),
        expected
    );
    assert!(mapped(&path), "read through the map");
    for (id, b) in ids.iter().zip(expected.iter().flatten()) {
        assert!(texts.contains(b) && id_of(b) == *id);
    }
    drop(store);
    let raw = Connection::open(&path).unwrap();
    flip_in_pack(&raw, &refs[7].1, 20);
    let options = SqliteOptions {
        mmap_bytes: 1 << 20,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open_with(&path, options).unwrap();
    match ObjectStore::get_many(&store, &[refs[7].0]) {
        Err(StoreError::Corrupt { id, .. }) => assert_eq!(id, refs[7].0),
        other => panic!("expected Corrupt for {}, got {other:?}", refs[7].0),
    }
    assert_eq!(
        ObjectStore::get_many(&store, &ids[..7]).unwrap(),
        expected[..7]
    );
}

/// One damaged record late in a large batch of records against the dictionary is a
/// corrupt error naming its id (not a panic, not a short answer), and the rest of
/// the batch reads back in order.
#[test]
fn a_damaged_record_in_a_large_dictionary_batch_names_its_id() {
    let (dir, first) = stored_texts(200);
    let path = dir.path().join("store.db");
    let ids: Vec<ObjectId> = first.iter().map(|b| id_of(b)).collect();
    let victim = ids[190];
    assert_eq!(tag_of(&path, &victim), 3);
    let refs: std::collections::HashMap<ObjectId, Vec<u8>> =
        references(&path).into_iter().collect();
    let r = &refs[&victim];
    let len = u32::from_le_bytes(r[13..17].try_into().unwrap()) as usize;
    flip_in_pack(&Connection::open(&path).unwrap(), r, len / 2);
    let store = SqliteStore::open(&path).unwrap();
    match snapgraph_store::ObjectStore::get_many(&store, &ids) {
        Err(StoreError::Corrupt { id, .. }) => assert_eq!(id, victim),
        other => panic!("expected Corrupt for {victim}, got {other:?}"),
    }
    let rest: Vec<ObjectId> = ids.iter().copied().filter(|id| *id != victim).collect();
    let got = snapgraph_store::ObjectStore::get_many(&store, &rest).unwrap();
    let expected: Vec<Option<Vec<u8>>> = first
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 190)
        .map(|(_, b)| Some(b.clone()))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn large_incompressible_objects_are_kept_raw_through_blob_handles_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    // Random objects around the probe and blob-write sizes, text ones beside them,
    // one object twice in the batch and one already stored; a mixed object (text
    // with a random middle) whatever the probe makes of it.
    let mut blobs: Vec<Vec<u8>> = [
        4_000usize, 8_191, 8_192, 12_287, 12_288, 16_384, 40_000, 65_537,
    ]
    .iter()
    .enumerate()
    .map(|(i, &n)| random(i as u64, n))
    .collect();
    blobs.extend((0..4).map(|i| text(100 + i, 20_000)));
    let mut mixed = text(200, 30_000);
    mixed[13_000..17_000].copy_from_slice(&random(201, 4_000));
    blobs.push(mixed);
    let first: Vec<(ObjectId, &[u8])> = vec![(id_of(&blobs[6]), &blobs[6][..])];
    let mut batch: Vec<(ObjectId, &[u8])> = blobs.iter().map(|b| (id_of(b), &b[..])).collect();
    batch.push(batch[7]);
    {
        let store = SqliteStore::open(&path).unwrap();
        store.put_many(&first).unwrap();
        store.put_many(&batch).unwrap();
    }
    let conn = Connection::open(&path).unwrap();
    for b in &blobs[..8] {
        let data: Vec<u8> = conn
            .query_row(
                "SELECT data FROM objects WHERE id = ?1",
                [&id_of(b).as_bytes()[..]],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(data[0], 0, "a random object of {} bytes is tag 0", b.len());
        assert_eq!(&data[1..], &b[..]);
    }
    assert_eq!(
        count(&path, "SELECT count(*) FROM objects"),
        blobs.len() as i64
    );
    drop(conn);
    let store = SqliteStore::open(&path).unwrap();
    let ids: Vec<ObjectId> = blobs.iter().map(|b| id_of(b)).collect();
    let got = ObjectStore::get_many(&store, &ids).unwrap();
    for (b, g) in blobs.iter().zip(got) {
        assert_eq!(g.as_deref(), Some(&b[..]));
    }
    // Text still compresses (its records are smaller than the objects).
    let at_rest = count(
        &path,
        "SELECT (SELECT sum(length(data)) FROM objects)
              + coalesce((SELECT sum(length(data)) FROM packs), 0)",
    );
    let total: usize = blobs.iter().map(Vec::len).sum();
    let text_total = 4 * 20_000;
    assert!(
        (at_rest as usize) < total - text_total / 2,
        "{at_rest} bytes at rest for {total}"
    );
    // A flipped byte in a blob-written record is caught by id.
    let conn = Connection::open(&path).unwrap();
    let key = &ids[5].as_bytes()[..];
    let mut data: Vec<u8> = conn
        .query_row("SELECT data FROM objects WHERE id = ?1", [key], |r| {
            r.get(0)
        })
        .unwrap();
    data[100] ^= 0x5a;
    conn.execute(
        "UPDATE objects SET data = ?2 WHERE id = ?1",
        rusqlite::params![key, data],
    )
    .unwrap();
    drop(conn);
    let store = SqliteStore::open(&path).unwrap();
    match ObjectStore::get_many(&store, &ids[5..6]) {
        Err(StoreError::Corrupt { id, .. }) => assert_eq!(id, ids[5]),
        other => panic!("{other:?}"),
    }
}

// Repacking (branch clisize2): `ObjectStore::repack` on schema 3.

/// Version `v` of file `f`: text with a line changed per version, so each version
/// is a delta against the one before.
fn version_of(f: u64, v: u64) -> Vec<u8> {
    let mut body = text(f, 3000 + (f as usize % 5) * 700);
    let at = body.len() / 2;
    let line = format!("\nversion {v} of file {f}\n");
    body.splice(at..at, line.into_bytes());
    body
}

/// Eight versions of 60 files committed to `main` through a `Repo`, each
/// version's workspace kept.
fn history(store: &SqliteStore) -> Vec<(ObjectId, snapgraph::Workspace)> {
    let repo = snapgraph_store::Repo::new(store);
    let mut ws = snapgraph::Workspace::new();
    let mut out = Vec::new();
    for v in 0..8u64 {
        for f in 0..60u64 {
            if v == 0 || (f + v) % 5 == 0 {
                ws.write(&format!("/d{}/f{f}.txt", f % 6), version_of(f, v))
                    .unwrap();
            }
        }
        let c = repo
            .commit(
                &mut ws,
                "main",
                snapgraph_store::RepoCommitOptions::default(),
            )
            .unwrap();
        out.push((c.id, ws.clone()));
    }
    out
}

fn same_files(a: &snapgraph::Workspace, b: &snapgraph::Workspace) -> bool {
    let files = |w: &snapgraph::Workspace| -> Vec<(String, Vec<u8>)> {
        w.walk()
            .into_iter()
            .filter(|(_, m)| m.kind == snapgraph::EntryKind::File)
            .map(|(p, _)| {
                let bytes = w.read(&p).unwrap().to_vec();
                (p, bytes)
            })
            .collect()
    };
    files(a) == files(b)
}

/// Every object of `store` with its verified bytes.
fn everything(store: &SqliteStore) -> Vec<(ObjectId, Vec<u8>)> {
    let ids = all_ids(store);
    let got = ObjectStore::get_many(store, &ids).unwrap();
    ids.into_iter()
        .zip(got)
        .map(|(id, b)| (id, b.expect("listed, so present")))
        .collect()
}

#[test]
fn a_repack_keeps_every_object_readable_and_verified_and_shrinks_the_file() {
    use snapgraph_store::RepackOptions;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).unwrap();
    let versions = history(&store);
    // Objects outside any history, two thirds deleted: packs below half live.
    let loose: Vec<Vec<u8>> = (0..300).map(|i| text(5000 + i, 4096)).collect();
    let batch: Vec<(ObjectId, &[u8])> = loose.iter().map(|b| (id_of(b), &b[..])).collect();
    store.put_many(&batch).unwrap();
    let doomed: Vec<ObjectId> = batch
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| id.as_bytes()[0] % 3 != 0)
        .collect();
    store.delete_many(&doomed).unwrap();
    let deltas = count(
        &path,
        "SELECT count(*) FROM objects WHERE substr(data, 1, 1) = x'02'",
    );
    assert!(deltas > 50, "{deltas} deltas");
    let before = everything(&store);
    let depths: Vec<(Vec<u8>, Vec<u8>)> = {
        let conn = Connection::open(&path).unwrap();
        let mut stmt = conn
            .prepare("SELECT id, substr(data, 1, 34) FROM objects WHERE substr(data, 1, 1) = x'02' ORDER BY id")
            .unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.map(Result::unwrap).collect()
    };

    // Sparse only: records move out of the mostly dead packs, as they are.
    let sparse = store.repack(&RepackOptions::sparse()).unwrap().unwrap();
    assert!(sparse.packs_removed >= 1, "{sparse:?}");
    assert!(
        sparse.rewritten > 0 && sparse.recompressed == 0,
        "{sparse:?}"
    );
    assert_eq!(everything(&store), before);

    let full = store.repack(&RepackOptions::full(19)).unwrap().unwrap();
    assert!(full.recompressed > 100, "{full:?}");
    assert!(full.record_bytes_saved > 0 && full.skipped == 0, "{full:?}");
    assert!(full.vacuumed, "{full:?}");
    assert!(full.file_bytes_after < full.file_bytes_before, "{full:?}");
    assert_eq!(
        count(&path, "SELECT sum(live) FROM pack_live"),
        count(
            &path,
            "SELECT count(*) FROM objects WHERE substr(data, 1, 1) = x'80' AND length(data) = 17"
        ),
        "live counts match the references"
    );
    assert_eq!(
        count(
            &path,
            "SELECT count(*) FROM packs WHERE pack NOT IN (SELECT pack FROM pack_live)"
        ),
        0
    );
    // Same ids, same bytes (verified reads), deltas at the same depth on the same base.
    drop(store);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(everything(&store), before);
    let after_depths: Vec<(Vec<u8>, Vec<u8>)> = {
        let conn = Connection::open(&path).unwrap();
        let mut stmt = conn
            .prepare("SELECT id, substr(data, 1, 34) FROM objects WHERE substr(data, 1, 1) = x'02' ORDER BY id")
            .unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.map(Result::unwrap).collect()
    };
    assert_eq!(after_depths, depths);
    // A second full repack finds nothing smaller and leaves the file alone.
    let again = store.repack(&RepackOptions::full(19)).unwrap().unwrap();
    assert_eq!((again.rewritten, again.packs_written), (0, 0), "{again:?}");
    // The loose text objects are not core objects: verify the history without them.
    let loose_ids: Vec<ObjectId> = batch.iter().map(|(id, _)| *id).collect();
    store.delete_many(&loose_ids).unwrap();
    let report = snapgraph_store::verify(&store, true).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let repo = snapgraph_store::Repo::new(&store);
    for (id, ws) in &versions {
        assert!(
            same_files(&repo.checkout(&id.to_hex()).unwrap(), ws),
            "{id}"
        );
    }
    // Later writes still go on the store's dictionary and read back.
    let later = text(99_999, 5000);
    store.put_many(&[(id_of(&later), &later[..])]).unwrap();
    assert_eq!(
        ObjectStore::get_many(&store, &[id_of(&later)]).unwrap(),
        vec![Some(later.clone())]
    );
}

#[test]
fn repacks_beside_a_writer_under_its_lease_and_a_collector_lose_nothing() {
    use snapgraph_store::RepackOptions;
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let writer_store = SqliteStore::open(&path).unwrap();
    let repack_store = SqliteStore::open(&path).unwrap();
    let repo = snapgraph_store::Repo::new(&writer_store);
    let mut ws = snapgraph::Workspace::new();
    for f in 0..40u64 {
        ws.write(&format!("/d{}/f{f}.txt", f % 4), version_of(f, 0))
            .unwrap();
    }
    repo.commit(
        &mut ws,
        "main",
        snapgraph_store::RepoCommitOptions::default(),
    )
    .unwrap();
    let stop = AtomicBool::new(false);
    let mut published = Vec::new();
    std::thread::scope(|s| {
        let other = s.spawn(|| {
            let (mut runs, mut rewritten, mut skipped) = (0u64, 0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let how = if runs % 2 == 0 {
                    RepackOptions::full(9)
                } else {
                    RepackOptions::sparse()
                };
                let r = repack_store.repack(&how).unwrap().unwrap();
                rewritten += r.rewritten;
                skipped += r.skipped;
                // Garbage: a branch made and dropped, then collected.
                let scratch = snapgraph_store::Repo::new(&repack_store);
                let mut junk = snapgraph::Workspace::new();
                junk.write("/junk", text(runs + 77, 6000)).unwrap();
                let j = scratch
                    .commit(
                        &mut junk,
                        "scratch",
                        snapgraph_store::RepoCommitOptions::default(),
                    )
                    .unwrap();
                scratch.delete_branch("scratch", j.id).unwrap();
                snapgraph_store::gc(&repack_store, &[]).unwrap();
                runs += 1;
            }
            eprintln!("{runs} repacks rewrote {rewritten} records, skipped {skipped}");
            runs
        });
        for v in 1..40u64 {
            for f in 0..40u64 {
                if (f + v) % 4 == 0 {
                    ws.write(&format!("/d{}/f{f}.txt", f % 4), version_of(f, v))
                        .unwrap();
                }
            }
            loop {
                match repo.commit(
                    &mut ws,
                    "main",
                    snapgraph_store::RepoCommitOptions::default(),
                ) {
                    Ok(c) => {
                        published.push((c.id, ws.clone()));
                        break;
                    }
                    Err(snapgraph_store::RepoError::Swept { .. }) => continue,
                    Err(e) => panic!("version {v}: {e}"),
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(other.join().unwrap() > 0);
    });
    let report = snapgraph_store::verify(&writer_store, true).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let fresh = SqliteStore::open(&path).unwrap();
    let repo = snapgraph_store::Repo::new(&fresh);
    for (id, ws) in &published {
        assert!(
            same_files(&repo.checkout(&id.to_hex()).unwrap(), ws),
            "commit {id}"
        );
    }
}

#[test]
fn a_repack_of_damaged_records_stops_with_a_typed_error_naming_the_object() {
    use snapgraph_store::RepackOptions;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).unwrap();
    let first: Vec<Vec<u8>> = (0..100).map(|i| text(i, 4096)).collect();
    let batch: Vec<(ObjectId, &[u8])> = first.iter().map(|b| (id_of(b), &b[..])).collect();
    store.put_many(&batch).unwrap();
    // A delta on top of object 0.
    let mut edited = first[0].clone();
    edited.extend_from_slice(b"one more line\n");
    let delta_id = id_of(&edited);
    store
        .put_many_with_bases(&[(delta_id, &edited[..])], &[Some(batch[0].0)])
        .unwrap();
    assert_eq!(
        count(
            &path,
            "SELECT count(*) FROM objects WHERE substr(data, 1, 1) = x'02'"
        ),
        1
    );
    drop(store);
    let refs = references(&path);
    let raw = Connection::open(&path).unwrap();
    let read_pack = |pack: i64| -> Vec<u8> {
        raw.query_row("SELECT data FROM packs WHERE pack = ?1", [pack], |r| {
            r.get(0)
        })
        .unwrap()
    };
    let write_pack = |pack: i64, bytes: &[u8]| {
        raw.execute(
            "UPDATE packs SET data = ?1 WHERE pack = ?2",
            rusqlite::params![bytes, pack],
        )
        .unwrap();
    };
    let pack = i64::from_le_bytes(refs[7].1[1..9].try_into().unwrap());
    let original = read_pack(pack);
    let expect_corrupt = |what: &str, want: ObjectId| {
        let store = SqliteStore::open(&path).unwrap();
        match store.repack(&RepackOptions::full(9)) {
            Err(StoreError::Corrupt { id, .. }) => assert_eq!(id, want, "{what}"),
            Err(StoreError::BadDelta { id, .. }) => assert_eq!(id, want, "{what}"),
            other => panic!("{what}: expected a typed error naming {want}, got {other:?}"),
        }
    };
    // A flipped byte inside a packed record: the repack refuses to copy it.
    let at = u32::from_le_bytes(refs[7].1[9..13].try_into().unwrap()) as usize + 30;
    let mut bad = original.clone();
    bad[at] ^= 0x41;
    write_pack(pack, &bad);
    expect_corrupt("flipped byte", refs[7].0);
    write_pack(pack, &original);
    // A reference past its pack's end.
    let mut past = refs[9].1.clone();
    past[13..17].copy_from_slice(&(u32::MAX / 2).to_le_bytes());
    raw.execute(
        "UPDATE objects SET data = ?1 WHERE id = ?2",
        rusqlite::params![past, &refs[9].0.as_bytes()[..]],
    )
    .unwrap();
    expect_corrupt("reference past the end", refs[9].0);
    raw.execute(
        "UPDATE objects SET data = ?1 WHERE id = ?2",
        rusqlite::params![refs[9].1, &refs[9].0.as_bytes()[..]],
    )
    .unwrap();
    // A delta whose base row is gone.
    let base_row: Vec<u8> = raw
        .query_row(
            "SELECT data FROM objects WHERE id = ?1",
            [&batch[0].0.as_bytes()[..]],
            |r| r.get(0),
        )
        .unwrap();
    raw.execute(
        "DELETE FROM objects WHERE id = ?1",
        [&batch[0].0.as_bytes()[..]],
    )
    .unwrap();
    expect_corrupt("base missing", delta_id);
    raw.execute(
        "INSERT INTO objects (id, data) VALUES (?1, ?2)",
        rusqlite::params![&batch[0].0.as_bytes()[..], base_row],
    )
    .unwrap();
    // A delta's frame damaged.
    let delta_row: Vec<u8> = raw
        .query_row(
            "SELECT data FROM objects WHERE id = ?1",
            [&delta_id.as_bytes()[..]],
            |r| r.get(0),
        )
        .unwrap();
    let mut bad = delta_row.clone();
    let n = bad.len();
    bad[n - 3] ^= 0x7f;
    raw.execute(
        "UPDATE objects SET data = ?1 WHERE id = ?2",
        rusqlite::params![bad, &delta_id.as_bytes()[..]],
    )
    .unwrap();
    expect_corrupt("delta frame", delta_id);
    raw.execute(
        "UPDATE objects SET data = ?1 WHERE id = ?2",
        rusqlite::params![delta_row, &delta_id.as_bytes()[..]],
    )
    .unwrap();
    // Repaired: the repack goes through and every object reads back.
    let store = SqliteStore::open(&path).unwrap();
    store.repack(&RepackOptions::full(9)).unwrap().unwrap();
    let mut ids: Vec<ObjectId> = batch.iter().map(|(id, _)| *id).collect();
    ids.push(delta_id);
    let got = ObjectStore::get_many(&store, &ids).unwrap();
    for (want, got) in first.iter().chain(std::iter::once(&edited)).zip(got) {
        assert_eq!(got.as_deref(), Some(&want[..]));
    }
}

/// `verify` finds what the packs' bookkeeping would lose or has lost, without
/// reading a pack: a pack counting fewer live records than the rows naming it (a
/// deletion of that many would drop it while the others need it), a pack whose row
/// is gone, and one shorter than a reference; a count above the rows (garbage kept)
/// is no problem. With and without reading data alike.
#[test]
fn verify_finds_packs_counted_short_missing_or_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    // Chunks (stored bytes with their kind and version bytes), so that a verify
    // reading every object finds them well formed.
    let first: Vec<Vec<u8>> = (0..300)
        .map(|i| {
            let mut stored = vec![
                snapgraph::ObjectKind::Chunk.byte(),
                snapgraph::FORMAT_VERSION,
            ];
            stored.extend_from_slice(&text(i, 4096));
            stored
        })
        .collect();
    let batch: Vec<(ObjectId, &[u8])> = first
        .iter()
        .map(|b| (ObjectId::hash_stored(b), &b[..]))
        .collect();
    let store = SqliteStore::open(&path).unwrap();
    store.put_many(&batch).unwrap();
    for read_data in [false, true] {
        let report = snapgraph_store::verify(&store, read_data).unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
    }
    // The pack of the first reference, and the objects whose rows name it.
    let refs = references(&path);
    let pack_of = |r: &[u8]| i64::from_le_bytes(r[1..9].try_into().unwrap());
    let pack = pack_of(&refs[0].1);
    let mut in_pack: Vec<ObjectId> = refs
        .iter()
        .filter(|(_, r)| pack_of(r) == pack)
        .map(|(id, _)| *id)
        .collect();
    in_pack.sort();
    let rows = in_pack.len() as i64;
    assert!(rows > 1, "{rows}");
    let named = |report: &snapgraph_store::VerifyReport| {
        let mut v: Vec<ObjectId> = report.problems.iter().map(|p| p.id()).collect();
        v.sort();
        v
    };
    let conn = Connection::open(&path).unwrap();
    let set_live = |live: i64| {
        conn.execute(
            "UPDATE pack_live SET live = ?2 WHERE pack = ?1",
            rusqlite::params![pack, live],
        )
        .unwrap();
    };
    // One short: every row of that pack is at risk, and named.
    set_live(rows - 1);
    for read_data in [false, true] {
        let report = snapgraph_store::verify(&store, read_data).unwrap();
        assert_eq!(named(&report), in_pack, "read_data {read_data}");
        let text = report.problems[0].to_string();
        assert!(
            text.contains(&format!(
                "pack {pack} counts {} live records, but {rows} rows name it",
                rows - 1
            )),
            "{text}"
        );
    }
    // One over: garbage kept, which names no object.
    set_live(rows + 1);
    let report = snapgraph_store::verify(&store, false).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    set_live(rows);
    // Cut short past the last record: the rows naming bytes past the end.
    let len: i64 = conn
        .query_row(
            "SELECT length(data) FROM packs WHERE pack = ?1",
            [pack],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute(
        "UPDATE packs SET data = substr(data, 1, ?2) WHERE pack = ?1",
        rusqlite::params![pack, len - 1],
    )
    .unwrap();
    let report = snapgraph_store::verify(&store, false).unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(
        report.problems[0]
            .to_string()
            .contains(&format!("pack {pack} holds {} bytes", len - 1)),
        "{}",
        report.problems[0]
    );
    // The pack's row gone: every row naming it.
    conn.execute("DELETE FROM packs WHERE pack = ?1", [pack])
        .unwrap();
    let report = snapgraph_store::verify(&store, false).unwrap();
    assert_eq!(named(&report), in_pack);
    assert!(report.problems[0]
        .to_string()
        .contains(&format!("pack {pack} is missing")));
}
