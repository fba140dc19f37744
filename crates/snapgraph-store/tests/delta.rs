//! Delta records (FORMAT.md section 12, tag 2): commits store changed files and
//! directories against their previous versions, garbage collection keeps a base a live
//! delta needs, and hostile records (a missing base, a cycle, a chain past the cap, a
//! corrupt base) fail reads with errors naming both ids.

use snapgraph::{ObjectId, ObjectKind, Workspace, FORMAT_VERSION};
use snapgraph_store::codec::{self, Base, Compression, MAX_DELTA_DEPTH};
use snapgraph_store::dir::DirStore;
use snapgraph_store::sqlite::SqliteStore;
use snapgraph_store::{
    gc, verify, DeltaProblem, ObjectStore, Repo, RepoCommitOptions, Store, StoreError,
};

/// A text of `lines` lines where line `i` mentions `i * salt % 97`.
fn text(lines: usize, salt: usize) -> Vec<u8> {
    (0..lines)
        .flat_map(|i| {
            format!("def function_{i}(x):\n    return x * {}\n", i * salt % 97).into_bytes()
        })
        .collect()
}

fn deltas(store: &dyn ObjectStore) -> Vec<(ObjectId, ObjectId)> {
    let mut out = Vec::new();
    store
        .for_each_delta(&mut |id, base| {
            out.push((id, base));
            Ok(())
        })
        .unwrap();
    out
}

/// Ten versions of a tree where one file changes a little each time: the changed
/// chunks and directory nodes become deltas, every version checks out, the store
/// verifies, and it is smaller than the same history without hints.
fn history_is_stored_as_deltas(store: &dyn Store, plain: &dyn Store) {
    for (s, hinted) in [(store, true), (plain, false)] {
        let repo = Repo::new(s);
        let mut ws = Workspace::new();
        for f in 0..40 {
            ws.write(&format!("/pkg/mod{f}.py"), text(200, f + 1))
                .unwrap();
        }
        for v in 0..10 {
            let mut t = text(200, 7);
            t.extend(format!("# version {v}\n").as_bytes());
            ws.write("/pkg/mod7.py", &t).unwrap();
            if hinted {
                repo.commit(&mut ws, "main", RepoCommitOptions::message(format!("v{v}")))
                    .unwrap();
            } else {
                // The same objects, written without hints.
                let c = ws
                    .commit(snapgraph::CommitOptions::new().have_in(s))
                    .unwrap();
                let objects: Vec<(ObjectId, &[u8])> =
                    c.objects().iter().map(|(i, b)| (*i, b)).collect();
                s.put_many(&objects).unwrap();
                s.compare_and_swap_ref("heads/main", s.get_ref("heads/main").unwrap(), c.id(), "v")
                    .unwrap();
            }
        }
    }
    let pairs = deltas(store);
    assert!(
        pairs.len() >= 9,
        "expected the changed chunk's versions as deltas, got {pairs:?}"
    );
    assert!(deltas(plain).is_empty(), "no hints, no deltas");
    let repo = Repo::new(store);
    let ws = repo.checkout("main").unwrap();
    let mut want = text(200, 7);
    want.extend(b"# version 9\n");
    assert_eq!(ws.read("/pkg/mod7.py").unwrap(), want);
    assert!(verify(store, true).unwrap().is_clean());
}

/// Bytes at rest summed over every object (the records, not the stored bytes).
fn dir_bytes(root: &std::path::Path) -> u64 {
    walkdir(root.join("objects").as_path())
}

fn walkdir(dir: &std::path::Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            n += walkdir(&e.path());
        } else {
            n += e.metadata().unwrap().len();
        }
    }
    n
}

#[test]
fn sqlite_history_is_stored_as_deltas() {
    let a = SqliteStore::in_memory().unwrap();
    let b = SqliteStore::in_memory().unwrap();
    history_is_stored_as_deltas(&a, &b);
}

#[test]
fn dir_history_is_stored_as_deltas_and_is_smaller() {
    let tmp = tempfile::tempdir().unwrap();
    let a = DirStore::open(tmp.path().join("a")).unwrap();
    let b = DirStore::open(tmp.path().join("b")).unwrap();
    history_is_stored_as_deltas(&a, &b);
    let (with, without) = (
        dir_bytes(&tmp.path().join("a")),
        dir_bytes(&tmp.path().join("b")),
    );
    assert!(
        with < without,
        "deltas: {with} bytes at rest, plain: {without}"
    );
}

/// A base only a delta needs survives collection; once the delta goes, so does it.
fn gc_keeps_bases(store: &dyn Store) {
    let repo = Repo::new(store);
    let mut ws = Workspace::new();
    ws.write("/src/f.py", text(100, 3)).unwrap();
    repo.commit(&mut ws, "old", RepoCommitOptions::message("v1"))
        .unwrap();
    // One chunk (under 4 KiB), changed a little.
    let mut v2 = b"# changed\n".to_vec();
    v2.extend(text(100, 3));
    ws.write("/src/f.py", &v2).unwrap();
    repo.commit(&mut ws, "old", RepoCommitOptions::message("v2"))
        .unwrap();
    let pairs = deltas(store);
    assert!(!pairs.is_empty(), "v2's chunk is a delta of v1's");
    // The same tree as a root commit elsewhere, then the old branch deleted: v1's
    // chunk is reachable from nothing, but v2's chunk (live) is its delta.
    let mut fresh = Workspace::new();
    fresh.write("/src/f.py", &v2).unwrap();
    repo.commit(&mut fresh, "new", RepoCommitOptions::message("solo"))
        .unwrap();
    let old = store.get_ref("heads/old").unwrap().unwrap();
    store.delete_ref("heads/old", old, "drop").unwrap();
    let report = gc(store, &[]).unwrap();
    assert!(report.bases >= 1, "{report:?}");
    for (id, base) in deltas(store) {
        assert!(
            store.has_many(&[id, base]).unwrap().is_empty(),
            "{id} kept without base {base}"
        );
    }
    assert_eq!(repo.checkout("new").unwrap().read("/src/f.py").unwrap(), v2);
    assert!(verify(store, true).unwrap().is_clean());
    // With nothing live left, the base goes after its delta.
    let new = store.get_ref("heads/new").unwrap().unwrap();
    store.delete_ref("heads/new", new, "drop").unwrap();
    let report = gc(store, &[]).unwrap();
    assert_eq!(report.bases, 0);
    let mut left = 0;
    store
        .for_each_id(&mut |_| {
            left += 1;
            Ok(())
        })
        .unwrap();
    assert_eq!(left, 0, "everything collected");
}

#[test]
fn sqlite_gc_keeps_bases() {
    gc_keeps_bases(&SqliteStore::in_memory().unwrap());
}

#[test]
fn dir_gc_keeps_bases() {
    let tmp = tempfile::tempdir().unwrap();
    gc_keeps_bases(&DirStore::open(tmp.path()).unwrap());
}

fn chunk(body: &[u8]) -> (ObjectId, Vec<u8>) {
    let mut stored = vec![ObjectKind::Chunk.byte(), FORMAT_VERSION];
    stored.extend_from_slice(body);
    (ObjectId::hash_stored(&stored), stored)
}

/// Writes `record` as the object file of `id` in a directory store.
fn plant(root: &std::path::Path, id: &ObjectId, record: &[u8]) {
    let hex = id.to_hex();
    let dir = root.join("objects").join(&hex[..2]);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(&hex[2..]), record).unwrap();
}

fn delta_of(stored: &[u8], base: (ObjectId, &[u8]), depth: u8) -> Vec<u8> {
    let record = codec::encode_delta(
        stored,
        &Base {
            id: base.0,
            stored: base.1,
            depth,
        },
        Compression::default(),
    );
    assert!(
        codec::delta_base(&record).is_some(),
        "similar bytes make a delta"
    );
    record
}

/// `record` with its depth byte set to `depth`.
fn with_depth(mut record: Vec<u8>, depth: u8) -> Vec<u8> {
    record[1] = depth;
    record
}

fn expect_bad(
    store: &DirStore,
    id: ObjectId,
    want_id: ObjectId,
    want_base: ObjectId,
) -> DeltaProblem {
    match store.get_many(&[id]) {
        Err(StoreError::BadDelta { id, base, problem }) => {
            assert_eq!((id, base), (want_id, want_base), "{problem}");
            problem
        }
        other => panic!("expected BadDelta for {id}, got {other:?}"),
    }
}

#[test]
fn hostile_delta_records_are_typed_errors_naming_both_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let store = DirStore::open(tmp.path()).unwrap();
    let (a, a_bytes) = chunk(&text(100, 1));
    let (b, b_bytes) = chunk(&[text(100, 1), b"more".to_vec()].concat());
    let (c, c_bytes) = chunk(&[text(100, 1), b"other".to_vec()].concat());

    // A delta whose base is absent.
    plant(tmp.path(), &b, &delta_of(&b_bytes, (a, &a_bytes), 0));
    assert_eq!(expect_bad(&store, b, b, a), DeltaProblem::BaseMissing);
    assert!(
        store.has_many(&[b]).unwrap().is_empty(),
        "presence reads no record"
    );

    // A corrupt base: a's record holds other bytes.
    plant(
        tmp.path(),
        &a,
        &codec::encode(&c_bytes, Compression::default()),
    );
    assert!(matches!(
        expect_bad(&store, b, b, a),
        DeltaProblem::BaseCorrupt { .. }
    ));

    // A cycle: b (depth 2) against c, c (depth 1) against b.
    plant(
        tmp.path(),
        &b,
        &with_depth(delta_of(&b_bytes, (c, &c_bytes), 0), 2),
    );
    plant(tmp.path(), &c, &delta_of(&c_bytes, (b, &b_bytes), 0));
    assert_eq!(expect_bad(&store, b, c, b), DeltaProblem::Cycle);

    // A base whose depth is not one less.
    plant(
        tmp.path(),
        &a,
        &codec::encode(&a_bytes, Compression::default()),
    );
    plant(
        tmp.path(),
        &b,
        &with_depth(delta_of(&b_bytes, (a, &a_bytes), 0), 3),
    );
    assert_eq!(
        expect_bad(&store, b, b, a),
        DeltaProblem::BaseDepth { found: 0 }
    );

    // A chain past the readers' cap, and a depth of 0.
    plant(
        tmp.path(),
        &b,
        &with_depth(delta_of(&b_bytes, (a, &a_bytes), 0), MAX_DELTA_DEPTH + 1),
    );
    assert_eq!(
        expect_bad(&store, b, b, a),
        DeltaProblem::TooDeep {
            depth: MAX_DELTA_DEPTH + 1
        }
    );
    plant(
        tmp.path(),
        &b,
        &with_depth(delta_of(&b_bytes, (a, &a_bytes), 0), 0),
    );
    assert_eq!(
        expect_bad(&store, b, b, a),
        DeltaProblem::TooDeep { depth: 0 }
    );

    // A delta that decodes against its base to other bytes: corrupt, naming it.
    plant(tmp.path(), &b, &delta_of(&c_bytes, (a, &a_bytes), 0));
    assert!(matches!(store.get_many(&[b]), Err(StoreError::Corrupt { id, .. }) if id == b));

    // A sound delta reads back, and verify reports each broken one as a problem.
    plant(tmp.path(), &b, &delta_of(&b_bytes, (a, &a_bytes), 0));
    assert_eq!(store.get_many(&[b]).unwrap(), vec![Some(b_bytes.clone())]);
    let report = verify(&store, true).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| format!("{p:?}").contains(&c.to_hex())),
        "c (a delta of a missing-now chain) is reported: {:?}",
        report.problems
    );
}

#[test]
fn decode_many_fetches_one_level_per_call() {
    let versions: Vec<(ObjectId, Vec<u8>)> = (0..6)
        .map(|v| chunk(&[text(100, 1), format!("v{v}").into_bytes()].concat()))
        .collect();
    let mut records = std::collections::HashMap::new();
    records.insert(
        versions[0].0,
        codec::encode(&versions[0].1, Compression::default()),
    );
    for v in 1..6 {
        let base = &versions[v - 1];
        records.insert(
            versions[v].0,
            delta_of(&versions[v].1, (base.0, &base.1), v as u8 - 1),
        );
    }
    let mut calls = 0;
    let ids = [versions[5].0, versions[3].0];
    let first: Vec<Option<Vec<u8>>> = ids.iter().map(|i| records.get(i).cloned()).collect();
    let got = codec::decode_many(&ids, first, &mut |want| {
        calls += 1;
        Ok(want.iter().map(|i| records.get(i).cloned()).collect())
    })
    .unwrap();
    assert_eq!(
        got,
        vec![Some(versions[5].1.clone()), Some(versions[3].1.clone())]
    );
    // Levels: {v4, v2}, {v1}, {v0}; v3 was asked for, so never fetched.
    assert_eq!(calls, 3, "one fetch per level, shared levels once");
}
