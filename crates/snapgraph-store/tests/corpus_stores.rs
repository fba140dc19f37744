//! Stores written by every released store schema stay readable: `corpus/stores-v*/`
//! hold a SQLite database and a directory store made from `corpus/v1/store.pack`
//! (the format corpus's whole history) with its refs and a labelled snapshot. Each is
//! opened (from a copy), verified, and compared object by object with the dump.
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
