//! Stores written by every released store schema stay readable: `corpus/stores-v1/`,
//! `corpus/v2/stores/{sqlite,dir}` and `corpus/v2/stores/sqlite-3` (packs and a
//! dictionary) hold a SQLite database and a directory store
//! made from `corpus/v1/store.pack` (the format corpus's whole history) with its refs
//! and a labelled snapshot; schema 2's hold delta records. Each is opened (from a
//! copy, which the open upgrades in place), verified, and compared object by object
//! with the dump.
//!
//! Generate a new schema version's directory with
//! `cargo run -p snapgraph-store --example gen_store_corpus` (it never overwrites).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use snapgraph::ObjectId;
use snapgraph_store::dir::DirStore;
use snapgraph_store::sqlite::SqliteStore;
use snapgraph_store::{verify, Repo, Store};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus")
}

/// Objects of a `store.pack` dump: `len: u32 LE` then the stored bytes, repeated.
fn read_dump(dump: &[u8]) -> Vec<(ObjectId, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = dump;
    while rest.len() >= 4 {
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let b = rest[4..4 + len].to_vec();
        out.push((ObjectId::hash_stored(&b), b));
        rest = &rest[4 + len..];
    }
    assert!(rest.is_empty(), "store.pack has a partial record");
    out
}

fn expected_refs() -> BTreeMap<String, ObjectId> {
    let refs = std::fs::read_to_string(corpus().join("v1/refs.txt")).unwrap();
    refs.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(name, id)| (format!("heads/{name}"), id.parse().unwrap()))
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

fn check(store: &dyn Store, what: &str) {
    let objects = read_dump(&std::fs::read(corpus().join("v1/store.pack")).unwrap());
    let ids: Vec<ObjectId> = objects.iter().map(|(id, _)| *id).collect();
    for ((id, want), got) in objects
        .iter()
        .zip(snapgraph_store::ObjectStore::get_many(&store, &ids).unwrap())
    {
        assert_eq!(got.as_ref(), Some(want), "{what}: object {id}");
    }
    let refs: BTreeMap<String, ObjectId> = store.list_refs("heads/").unwrap().into_iter().collect();
    assert_eq!(refs, expected_refs(), "{what}: branches");
    let report = verify(store, true).unwrap();
    assert!(report.is_clean(), "{what}: {:?}", report.problems);
    let repo = Repo::new(store);
    let snap = repo.inspect("release").unwrap();
    assert_eq!(
        snap.target,
        expected_refs()["heads/merge"],
        "{what}: snapshot"
    );
    assert_eq!(snap.labels.get("stage").map(String::as_str), Some("corpus"));
    // The corpus records capability fingerprints this test's workspace lacks.
    for name in ["base", "main", "fork", "merge", "release"] {
        let mut ws = snapgraph::Workspace::new();
        let _ = repo
            .checkout_into(
                &mut ws,
                name,
                snapgraph::CheckoutPolicy::Force,
                snapgraph::DriftPolicy::Off,
            )
            .unwrap_or_else(|e| panic!("{what}: checkout {name}: {e}"));
    }
}

#[test]
fn every_store_schema_version_stays_readable() {
    let mut versions: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("stores-v"))
        })
        .collect();
    versions.sort();
    assert!(!versions.is_empty(), "corpus/stores-v1 is missing");
    for dir in versions {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::copy(dir.join("store.db"), tmp.path().join("store.db")).unwrap();
        let sqlite = SqliteStore::open(tmp.path().join("store.db")).unwrap();
        check(&sqlite, &format!("{} sqlite", dir.display()));
        copy_dir(&dir.join("store-dir"), &tmp.path().join("store-dir"));
        let files = DirStore::open(tmp.path().join("store-dir")).unwrap();
        check(&files, &format!("{} dir", dir.display()));
    }
}

fn delta_count(store: &dyn Store) -> usize {
    let mut n = 0;
    store
        .for_each_delta(&mut |_, _| {
            n += 1;
            Ok(())
        })
        .unwrap();
    n
}

#[test]
fn schema_2_stores_with_delta_records_stay_readable() {
    let v2 = corpus().join("v2/stores");
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(v2.join("sqlite/store.db"), tmp.path().join("store.db")).unwrap();
    let sqlite = SqliteStore::open(tmp.path().join("store.db")).unwrap();
    assert!(
        delta_count(&sqlite) > 0,
        "the v2 SQLite corpus holds deltas"
    );
    check(&sqlite, "corpus/v2/stores/sqlite");
    copy_dir(&v2.join("dir"), &tmp.path().join("dir"));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("dir/schema")).unwrap(),
        "2\n"
    );
    let files = DirStore::open(tmp.path().join("dir")).unwrap();
    assert!(
        delta_count(&files) > 0,
        "the v2 directory corpus holds deltas"
    );
    check(&files, "corpus/v2/stores/dir");
}

fn count(path: &Path, sql: &str) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

#[test]
fn the_schema_3_sqlite_store_with_packs_and_a_dictionary_stays_readable() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("store.db");
    std::fs::copy(corpus().join("v2/stores/sqlite-3/store.db"), &db).unwrap();
    // What only schema 3 holds: a dictionary, packs, references, tag 3 records.
    assert_eq!(
        count(&db, "SELECT value FROM meta WHERE key = 'schema_version'"),
        3
    );
    assert_eq!(count(&db, "SELECT count(*) FROM dicts"), 1);
    assert!(count(&db, "SELECT count(*) FROM packs") >= 1);
    assert!(
        count(
            &db,
            "SELECT count(*) FROM objects WHERE substr(data, 1, 1) = x'80'"
        ) >= 5
    );
    assert!(
        count(
            &db,
            "SELECT count(*) FROM packs WHERE substr(data, 1, 1) = x'03'"
        ) > 0
    );
    let sqlite = SqliteStore::open(&db).unwrap();
    assert!(delta_count(&sqlite) > 0, "the schema 3 corpus holds deltas");
    check(&sqlite, "corpus/v2/stores/sqlite-3");
}

/// Copies the schema 4 sample (the database and its segment files) into `to`.
fn copy_schema_4(to: &Path) -> PathBuf {
    let from = corpus().join("v2/stores/sqlite-4");
    std::fs::copy(from.join("store.db"), to.join("store.db")).unwrap();
    copy_dir(
        &from.join("store.db-segments"),
        &to.join("store.db-segments"),
    );
    to.join("store.db")
}

#[test]
fn the_schema_4_sqlite_store_with_segments_stays_readable() {
    let tmp = tempfile::tempdir().unwrap();
    let db = copy_schema_4(tmp.path());
    // What only schema 4 holds: a segment, and references into it.
    assert_eq!(
        count(&db, "SELECT value FROM meta WHERE key = 'schema_version'"),
        4
    );
    assert_eq!(count(&db, "SELECT count(*) FROM segments"), 1);
    let referenced = count(
        &db,
        "SELECT count(*) FROM objects WHERE length(data) = 22 AND substr(data, 1, 1) = x'81'",
    );
    assert!(referenced >= 40, "{referenced} segment references");
    assert_eq!(count(&db, "SELECT live FROM segments"), referenced);
    let sqlite = SqliteStore::open(&db).unwrap();
    assert!(delta_count(&sqlite) > 0, "the schema 4 corpus holds deltas");
    check(&sqlite, "corpus/v2/stores/sqlite-4");
    // The large file reads back whole (the generator's bytes: BLAKE3's XOF).
    let mut want = vec![0u8; 1_310_720];
    blake3::Hasher::new()
        .update(b"snapgraph corpus sqlite-4 large file")
        .finalize_xof()
        .fill(&mut want);
    let large = snapgraph_store::RefStore::get_ref(&sqlite, "sample/large")
        .unwrap()
        .unwrap();
    let ws = Repo::new(&sqlite).checkout(&large.to_string()).unwrap();
    assert!(ws.read("/big.bin").unwrap() == &want[..], "big.bin differs");
}

#[test]
fn opening_a_schema_2_sqlite_store_upgrades_it_to_3_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("store.db");
    std::fs::copy(corpus().join("v2/stores/sqlite/store.db"), &db).unwrap();
    assert_eq!(
        count(&db, "SELECT value FROM meta WHERE key = 'schema_version'"),
        2
    );
    drop(SqliteStore::open(&db).unwrap());
    assert_eq!(
        count(&db, "SELECT value FROM meta WHERE key = 'schema_version'"),
        3
    );
    assert_eq!(count(&db, "SELECT count(*) FROM packs"), 0);
    assert_eq!(count(&db, "SELECT count(*) FROM dicts"), 0);
    // Schema 4 (segments) opens; a newer one is refused, naming the file.
    let set = |v: i64| {
        rusqlite::Connection::open(&db)
            .unwrap()
            .execute(
                "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
                [v],
            )
            .unwrap();
    };
    set(4);
    drop(SqliteStore::open(&db).unwrap());
    set(5);
    let err = SqliteStore::open(&db).unwrap_err().to_string();
    assert!(
        err.contains("schema version 5") && err.contains("store.db"),
        "{err}"
    );
}

#[test]
fn opening_a_schema_1_store_upgrades_it_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&corpus().join("stores-v1/store-dir"), &tmp.path().join("d"));
    assert!(!tmp.path().join("d/schema").exists());
    drop(DirStore::open(tmp.path().join("d")).unwrap());
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("d/schema")).unwrap(),
        "2\n"
    );
    // A newer schema is refused, naming the file.
    std::fs::write(tmp.path().join("d/schema"), "3\n").unwrap();
    let err = DirStore::open(tmp.path().join("d"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("schema version 3") && err.contains("schema"),
        "{err}"
    );
}

#[test]
fn repacking_copies_of_the_sqlite_corpus_stores_keeps_them_whole() {
    // Schema 1 (upgraded at open), schema 2 (upgraded) and schema 3 (packs and a
    // dictionary): a full repack, then a sparse one, and everything reads as before.
    for (from, what) in [
        (
            "v2/stores/sqlite-4/store.db",
            "corpus/v2/stores/sqlite-4 repacked",
        ),
        (
            "v2/stores/sqlite-3/store.db",
            "corpus/v2/stores/sqlite-3 repacked",
        ),
        (
            "v2/stores/sqlite/store.db",
            "corpus/v2/stores/sqlite repacked",
        ),
        ("stores-v1/store.db", "corpus/stores-v1 sqlite repacked"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let db = match from {
            "v2/stores/sqlite-4/store.db" => copy_schema_4(tmp.path()),
            _ => {
                let db = tmp.path().join("store.db");
                std::fs::copy(corpus().join(from), &db).unwrap();
                db
            }
        };
        let sqlite = SqliteStore::open(&db).unwrap();
        let full = snapgraph_store::ObjectStore::repack(
            &sqlite,
            &snapgraph_store::RepackOptions::full(19),
        )
        .unwrap()
        .unwrap();
        assert_eq!(full.skipped, 0, "{what}: {full:?}");
        snapgraph_store::ObjectStore::repack(&sqlite, &snapgraph_store::RepackOptions::sparse())
            .unwrap()
            .unwrap();
        drop(sqlite);
        let sqlite = SqliteStore::open(&db).unwrap();
        check(&sqlite, what);
    }
}
