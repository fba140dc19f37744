//! SQLite schema 4: large records in segment files beside the database
//! (`sqlite::segments`): where they go, reading them back, deletion, repacking,
//! damage, crash remnants, several writers and a database opened through a link.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use snapgraph::ObjectId;
use snapgraph_store::sqlite::{SqliteStore, SEGMENTED, SEGMENT_BATCH_MIN};
use snapgraph_store::{ObjectStore, RepackOptions, StoreError};

mod common;
use common::*;

fn count(path: &Path, sql: &str) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

fn schema(path: &Path) -> i64 {
    count(path, "SELECT value FROM meta WHERE key = 'schema_version'")
}

fn in_segments(path: &Path) -> i64 {
    count(
        path,
        "SELECT count(*) FROM objects WHERE length(data) = 22 AND substr(data, 1, 1) = x'81'",
    )
}

fn segment_files(store: &SqliteStore) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(store.segment_dir().unwrap()) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    out.sort();
    out
}

/// `n` random objects of `len` bytes (seeds from `seed`), with their ids.
fn blobs(seed: u64, n: usize, len: usize) -> Vec<(ObjectId, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let b = random(seed + i as u64, len);
            (id_of(&b), b)
        })
        .collect()
}

fn put(store: &SqliteStore, objects: &[(ObjectId, Vec<u8>)]) {
    let batch: Vec<(ObjectId, &[u8])> = objects.iter().map(|(id, b)| (*id, &b[..])).collect();
    store.put_many(&batch).unwrap();
}

fn assert_reads(store: &SqliteStore, objects: &[(ObjectId, Vec<u8>)]) {
    let ids: Vec<ObjectId> = objects.iter().map(|(id, _)| *id).collect();
    let got = store.get_many(&ids).unwrap();
    for ((id, b), g) in objects.iter().zip(got) {
        assert_eq!(g.as_deref(), Some(&b[..]), "object {id}");
    }
}

/// The reason of the `Corrupt` error reading `ids` gives, which must name `id`.
fn corrupt(store: &SqliteStore, ids: &[ObjectId], id: ObjectId) -> String {
    match store.get_many(ids) {
        Err(StoreError::Corrupt { id: named, reason }) => {
            assert_eq!(named, id, "{reason}");
            reason
        }
        other => panic!("{other:?}"),
    }
}

/// A fresh store at `<tmp>/store.db` holding 40 random objects of 30,000 bytes
/// written in one batch (so in segment 1), with the directory kept alive.
fn filled() -> (
    tempfile::TempDir,
    PathBuf,
    SqliteStore,
    Vec<(ObjectId, Vec<u8>)>,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).unwrap();
    let objects = blobs(1, 40, 30_000);
    put(&store, &objects);
    (dir, path, store, objects)
}

#[test]
fn a_large_batch_goes_to_a_segment_and_a_small_one_stays_in_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        store.segment_dir().unwrap(),
        dir.path().canonicalize().unwrap().join("store.db-segments")
    );
    // Under the batch threshold: inline, and the file stays at schema 3 (older
    // builds keep reading it).
    let small = blobs(1, 3, 40_000);
    put(&store, &small);
    assert_eq!(in_segments(&path), 0);
    assert_eq!(schema(&path), 3);
    assert!(segment_files(&store).is_empty());
    // Over it: every large record in a segment, text beside them compressed
    // inline or in packs, one object twice and one already stored written once.
    let mut large = blobs(10, 30, 40_000);
    large.push(small[0].clone());
    large.push(large[0].clone());
    let texts: Vec<(ObjectId, Vec<u8>)> = (0..4)
        .map(|i| {
            let t = text(50 + i, 20_000);
            (id_of(&t), t)
        })
        .collect();
    let mut batch = large.clone();
    batch.extend(texts.iter().cloned());
    const { assert!(30 * 40_000 >= SEGMENT_BATCH_MIN) };
    put(&store, &batch);
    assert_eq!(in_segments(&path), 30);
    assert_eq!(schema(&path), 4);
    assert_eq!(count(&path, "SELECT count(*) FROM segments"), 1);
    assert_eq!(count(&path, "SELECT live FROM segments"), 30);
    assert_eq!(count(&path, "SELECT bytes FROM segments"), 30 * 40_000);
    let files = segment_files(&store);
    assert_eq!(files.len(), 1);
    assert_eq!(std::fs::metadata(&files[0]).unwrap().len(), 30 * 40_000);
    assert_reads(&store, &batch);
    assert_reads(&store, &small);
    drop(store);
    // Another handle reads them, and the writes of a third go into the same file.
    let store = SqliteStore::open(&path).unwrap();
    assert_reads(&store, &batch);
    put(&store, &blobs(100, 30, 40_000));
    assert_eq!(segment_files(&store).len(), 1);
    assert_eq!(in_segments(&path), 60);
    // A database in memory keeps everything in its table.
    let memory = SqliteStore::in_memory().unwrap();
    assert!(memory.segment_dir().is_none());
    put(&memory, &large);
    assert_reads(&memory, &large);
}

#[test]
fn deleting_the_last_record_of_a_segment_removes_it() {
    let (_dir, path, store, objects) = filled();
    let ids: Vec<ObjectId> = objects.iter().map(|(id, _)| *id).collect();
    store.delete_many(&ids[..25]).unwrap();
    assert_eq!(count(&path, "SELECT live FROM segments"), 15);
    assert_eq!(count(&path, "SELECT bytes FROM segments"), 15 * 30_000);
    assert_reads(&store, &objects[25..]);
    assert_eq!(store.get_many(&ids[..1]).unwrap(), vec![None]);
    store.delete_many(&ids[25..]).unwrap();
    assert_eq!(count(&path, "SELECT count(*) FROM segments"), 0);
    assert!(segment_files(&store).is_empty());
    // The next large batch starts a new segment (numbers are never reused).
    put(&store, &blobs(200, 40, 30_000));
    let files = segment_files(&store);
    assert_eq!(files.len(), 1);
    assert!(files[0].ends_with("2.seg"), "{files:?}");
}

#[test]
fn a_missing_or_short_segment_is_corrupt_naming_the_object_and_the_file() {
    let (_dir, path, store, objects) = filled();
    let file = segment_files(&store).remove(0);
    let last = objects.last().unwrap().0;
    // Cut short: the last record (written last) is past the end.
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(39 * 30_000 + 100).unwrap();
    drop(f);
    let reason = corrupt(&store, &[objects[0].0, last], last);
    assert!(reason.contains(&file.display().to_string()), "{reason}");
    assert_reads(&store, &objects[..39]);
    // A flipped byte is caught by the id check.
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[30_000 + 7] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    let fresh = SqliteStore::open(&path).unwrap();
    corrupt(&fresh, &[objects[1].0], objects[1].0);
    // Gone: every record in it is corrupt, by id, naming the file.
    std::fs::remove_file(&file).unwrap();
    let fresh = SqliteStore::open(&path).unwrap();
    let reason = corrupt(&fresh, &[objects[5].0], objects[5].0);
    assert!(reason.contains("missing"), "{reason}");
    assert!(reason.contains(&file.display().to_string()), "{reason}");
    // A reference of another length, or into a segment no file holds, as well.
    let conn = Connection::open(&path).unwrap();
    let key = &objects[6].0.as_bytes()[..];
    conn.execute(
        "UPDATE objects SET data = ?2 WHERE id = ?1",
        rusqlite::params![key, vec![SEGMENTED, 0, 1]],
    )
    .unwrap();
    let reason = corrupt(&fresh, &[objects[6].0], objects[6].0);
    assert!(reason.contains("segment reference of 3 bytes"), "{reason}");
    // A hostile reference naming 4 GiB past a file's end is refused before any
    // buffer of that size is made.
    put(&fresh, &blobs(300, 40, 30_000));
    let mut hostile = vec![SEGMENTED, 0];
    hostile.extend_from_slice(&2i64.to_le_bytes());
    hostile.extend_from_slice(&(u64::MAX - 10).to_le_bytes());
    hostile.extend_from_slice(&u32::MAX.to_le_bytes());
    conn.execute(
        "UPDATE objects SET data = ?2 WHERE id = ?1",
        rusqlite::params![key, hostile],
    )
    .unwrap();
    let reason = corrupt(&fresh, &[objects[6].0], objects[6].0);
    assert!(reason.contains("2.seg holds"), "{reason}");
}

#[test]
fn bytes_a_dead_writer_left_are_skipped_and_orphan_files_removed_by_a_repack() {
    let (_dir, _, store, first) = filled();
    let file = segment_files(&store).remove(0);
    // A writer that died between its append and its commit: bytes past the last
    // record, and a file under the next number with no row.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    std::io::Write::write_all(&mut f, &[0xee; 5_000]).unwrap();
    drop(f);
    let orphan = file.with_file_name("2.seg");
    std::fs::write(&orphan, b"left by a writer that died").unwrap();
    let stranger = file.with_file_name("notes.txt");
    std::fs::write(&stranger, b"not ours").unwrap();
    let second = blobs(100, 40, 30_000);
    put(&store, &second);
    assert_eq!(
        std::fs::metadata(&file).unwrap().len(),
        40 * 30_000 + 5_000 + 40 * 30_000
    );
    assert_reads(&store, &first);
    assert_reads(&store, &second);
    let report = store.repack(&RepackOptions::default()).unwrap().unwrap();
    assert_eq!(report.segments_removed, 1, "{report:?}");
    assert!(!orphan.exists());
    assert!(stranger.exists(), "a file of another name is left alone");
    assert_reads(&store, &first);
    assert_reads(&store, &second);
}

#[test]
fn a_repack_moves_the_records_of_a_mostly_dead_segment_and_removes_it() {
    let (_dir, path, store, old) = filled();
    // A second segment (the first is not full: a row and an empty file make the
    // next one, as a writer would once the first reached SEGMENT_SIZE).
    Connection::open(&path)
        .unwrap()
        .execute("INSERT INTO segments (live, bytes) VALUES (0, 0)", [])
        .unwrap();
    let first = segment_files(&store).remove(0);
    let second = first.with_file_name("2.seg");
    std::fs::write(&second, b"").unwrap();
    let new = blobs(100, 40, 30_000);
    put(&store, &new);
    assert_eq!(std::fs::metadata(&second).unwrap().len(), 40 * 30_000);
    // Three quarters of the first segment die.
    let ids: Vec<ObjectId> = old.iter().map(|(id, _)| *id).collect();
    store.delete_many(&ids[..30]).unwrap();
    let report = store.repack(&RepackOptions::default()).unwrap().unwrap();
    assert_eq!(report.rewritten, 10, "{report:?}");
    assert_eq!(report.segments_removed, 1, "{report:?}");
    assert!(!first.exists());
    assert_eq!(std::fs::metadata(&second).unwrap().len(), 50 * 30_000);
    assert_eq!(count(&path, "SELECT count(*) FROM segments"), 1);
    assert_eq!(count(&path, "SELECT live FROM segments"), 50);
    assert!(
        report.file_bytes_after < report.file_bytes_before,
        "{report:?}"
    );
    assert_reads(&store, &old[30..]);
    assert_reads(&store, &new);
    // The newest segment is never moved into itself, however sparse.
    let new_ids: Vec<ObjectId> = new.iter().map(|(id, _)| *id).collect();
    store.delete_many(&new_ids[..35]).unwrap();
    let again = store.repack(&RepackOptions::default()).unwrap().unwrap();
    assert_eq!(again.rewritten, 0, "{again:?}");
    assert_reads(&store, &old[30..]);
    assert_reads(&store, &new[35..]);
}

#[test]
fn writers_on_several_handles_append_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    drop(SqliteStore::open(&path).unwrap());
    let batches: Vec<Vec<(ObjectId, Vec<u8>)>> =
        (0..4).map(|k| blobs(1_000 * k, 24, 50_000)).collect();
    std::thread::scope(|s| {
        for batch in &batches {
            let path = &path;
            s.spawn(move || {
                let store = SqliteStore::open(path).unwrap();
                for part in batch.chunks(24) {
                    put(&store, part);
                }
            });
        }
    });
    let store = SqliteStore::open(&path).unwrap();
    for batch in &batches {
        assert_reads(&store, batch);
    }
    assert_eq!(in_segments(&path), 96);
    let on_disk: u64 = segment_files(&store)
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    assert_eq!(on_disk, 96 * 50_000);
}

#[cfg(unix)]
#[test]
fn a_store_opened_through_a_link_keeps_its_segments_beside_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let path = real.join("store.db");
    drop(SqliteStore::open(&path).unwrap());
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let objects = blobs(1, 40, 30_000);
    {
        let store = SqliteStore::open(&link).unwrap();
        put(&store, &objects);
    }
    assert!(real.join("store.db-segments/1.seg").exists());
    assert!(!dir.path().join("link.db-segments").exists());
    let store = SqliteStore::open(&path).unwrap();
    assert_reads(&store, &objects);
    assert_eq!(in_segments(&path), 40);
}

#[test]
fn verify_without_reading_data_finds_records_whose_segment_is_gone() {
    let (_dir, _, store, objects) = filled();
    let report = snapgraph_store::verify(&store, false).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let file = segment_files(&store).remove(0);
    // Cut short: the last two records are past the end.
    let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.set_len(38 * 30_000 + 5).unwrap();
    drop(f);
    let report = snapgraph_store::verify(&store, false).unwrap();
    let mut named: Vec<ObjectId> = report.problems.iter().map(|p| p.id()).collect();
    named.sort();
    let mut want = vec![objects[38].0, objects[39].0];
    want.sort();
    assert_eq!(named, want, "{:?}", report.problems);
    assert!(
        report.problems[0].to_string().contains("1.seg holds"),
        "{}",
        report.problems[0]
    );
    // Gone: every object in it, by id.
    std::fs::remove_file(&file).unwrap();
    let report = snapgraph_store::verify(&store, false).unwrap();
    assert_eq!(report.problems.len(), 40, "{:?}", report.problems);
    assert!(report.problems[0].to_string().contains("missing"));
}

/// A segment counting fewer live records than the rows naming it is found by
/// `verify` (a deletion of that many would remove the file the others need); a
/// count above them is garbage kept, no problem. (Without reading data: these
/// random blobs are no well-formed objects, which a read reports first; the pack
/// test in `sqlite.rs` covers reading data.)
#[test]
fn verify_finds_a_segment_counted_short() {
    let (_dir, path, store, objects) = filled();
    let mut all: Vec<ObjectId> = objects.iter().map(|(id, _)| *id).collect();
    all.sort();
    let conn = Connection::open(&path).unwrap();
    conn.execute("UPDATE segments SET live = 39", []).unwrap();
    let report = snapgraph_store::verify(&store, false).unwrap();
    let mut named: Vec<ObjectId> = report.problems.iter().map(|p| p.id()).collect();
    named.sort();
    assert_eq!(named, all);
    let text = report.problems[0].to_string();
    assert!(
        text.contains("segment 1 counts 39 live records, but 40 rows name it"),
        "{text}"
    );
    // What verify warns of: deleting 39 of them removes the file the 40th needs.
    store
        .delete_many(&objects[..39].iter().map(|(id, _)| *id).collect::<Vec<_>>())
        .unwrap();
    assert!(segment_files(&store).is_empty());
    assert!(corrupt(&store, &[objects[39].0], objects[39].0).contains("missing"));
    let (_dir, path, store, _) = filled();
    let conn = Connection::open(&path).unwrap();
    conn.execute("UPDATE segments SET live = 41", []).unwrap();
    let report = snapgraph_store::verify(&store, false).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    // Counted short and its file gone: each object reported once, for the file.
    conn.execute("UPDATE segments SET live = 39", []).unwrap();
    std::fs::remove_file(segment_files(&store).remove(0)).unwrap();
    let report = snapgraph_store::verify(&store, false).unwrap();
    assert_eq!(report.problems.len(), 40, "{:?}", report.problems);
    assert!(report.problems[0].to_string().contains("missing"));
}

/// A batch that fails after its records reached a segment file (here a row the
/// database refuses, through a trigger) takes them back: a segment file it created
/// is deleted, one it appended to is cut back to its length before. Before, the
/// bytes stayed until a repack: on a full disk (the usual way a batch fails
/// there) they held the space every later commit, and the collection that would
/// have freed it, needed.
#[test]
fn a_failed_batch_leaves_no_segment_bytes_behind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let store = SqliteStore::open(&path).unwrap();
    let refuse = |on: bool| {
        let conn = Connection::open(&path).unwrap();
        let sql = if on {
            "CREATE TRIGGER refuse BEFORE INSERT ON objects \
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
        } else {
            "DROP TRIGGER refuse"
        };
        conn.execute_batch(sql).unwrap();
    };
    let first = blobs(1, 40, 30_000);
    let second = blobs(500, 40, 30_000);
    let try_put = |objects: &[(ObjectId, Vec<u8>)]| {
        let b: Vec<(ObjectId, &[u8])> = objects.iter().map(|(id, b)| (*id, &b[..])).collect();
        store.put_many(&b)
    };

    // A new segment: the file it created is gone.
    refuse(true);
    let err = try_put(&first).unwrap_err();
    assert!(err.to_string().contains("refused by the test"), "{err}");
    assert!(
        segment_files(&store).is_empty(),
        "{:?}",
        segment_files(&store)
    );
    refuse(false);
    put(&store, &first);
    let files = segment_files(&store);
    assert_eq!(files.len(), 1, "{files:?}");
    let length = std::fs::metadata(&files[0]).unwrap().len();
    assert_eq!(length, 40 * 30_000);

    // Appended to the newest segment: cut back to where it was.
    refuse(true);
    try_put(&second).unwrap_err();
    assert_eq!(segment_files(&store), files);
    assert_eq!(std::fs::metadata(&files[0]).unwrap().len(), length);
    refuse(false);
    put(&store, &second);
    assert_eq!(std::fs::metadata(&files[0]).unwrap().len(), 2 * 40 * 30_000);
    assert_reads(&store, &first);
    assert_reads(&store, &second);
    let report = snapgraph_store::verify(&store, false).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}
