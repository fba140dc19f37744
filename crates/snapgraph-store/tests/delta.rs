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

/// A delta record of `stored` against `base`, whose own record is at `depth` (any
/// depth a reader accepts: written against a whole base, then given the depth byte,
/// so that chains deeper than this build writes can be made).
fn delta_of(stored: &[u8], base: (ObjectId, &[u8]), depth: u8) -> Vec<u8> {
    let record = codec::encode_delta(
        stored,
        &Base {
            id: base.0,
            stored: base.1,
            depth: 0,
        },
        Compression::default(),
    );
    assert!(
        codec::delta_base(&record).is_some(),
        "similar bytes make a delta"
    );
    with_depth(record, depth.wrapping_add(1))
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

/// A batch of requests over a tree of chains (two whole bottoms, tag 0 and tag 1; a
/// base shared by several chains; requested objects that are bases of other requested
/// ones; repeats) decodes to what each object decodes to alone, in the order asked,
/// and a corrupt tag 0 bottom (used where it lies, not copied) is still refused,
/// naming the delta above it.
#[test]
fn decode_many_of_a_batch_matches_each_object_alone() {
    // a0 (tag 0) <- a1 <- a2 <- a3, a2 <- b3 <- b4; c0 (tag 1) <- c1; d (whole, alone).
    let body = |tag: &str| chunk(&[text(80, 3), tag.as_bytes().to_vec()].concat());
    let (a0, a1, a2, a3, b3, b4) = (
        body("a0"),
        body("a1"),
        body("a2"),
        body("a3"),
        body("b3"),
        body("b4"),
    );
    let (c0, c1, d) = (body("c0"), body("c1"), body("d"));
    let mut records = std::collections::HashMap::new();
    records.insert(a0.0, codec::encode(&a0.1, Compression::None));
    assert_eq!(records[&a0.0][0], codec::RAW);
    records.insert(a1.0, delta_of(&a1.1, (a0.0, &a0.1), 0));
    records.insert(a2.0, delta_of(&a2.1, (a1.0, &a1.1), 1));
    records.insert(a3.0, delta_of(&a3.1, (a2.0, &a2.1), 2));
    records.insert(b3.0, delta_of(&b3.1, (a2.0, &a2.1), 2));
    records.insert(b4.0, delta_of(&b4.1, (b3.0, &b3.1), 3));
    records.insert(c0.0, codec::encode(&c0.1, Compression::default()));
    assert_eq!(records[&c0.0][0], codec::ZSTD);
    records.insert(c1.0, delta_of(&c1.1, (c0.0, &c0.1), 0));
    records.insert(d.0, codec::encode(&d.1, Compression::default()));
    let bytes: std::collections::HashMap<ObjectId, Vec<u8>> =
        [&a0, &a1, &a2, &a3, &b3, &b4, &c0, &c1, &d]
            .into_iter()
            .map(|(id, b)| (*id, b.clone()))
            .collect();
    let read = |ids: &[ObjectId], records: &std::collections::HashMap<ObjectId, Vec<u8>>| {
        let first = ids.iter().map(|i| records.get(i).cloned()).collect();
        codec::decode_many(ids, first, &mut |want| {
            Ok(want.iter().map(|i| records.get(i).cloned()).collect())
        })
    };
    let batches: Vec<Vec<ObjectId>> = vec![
        vec![a3.0, b4.0],
        vec![b4.0, a3.0, a2.0],
        vec![a2.0, b3.0, a2.0, b4.0, a1.0],
        vec![a0.0, a3.0, c1.0, b4.0, d.0, c0.0, a1.0],
        vec![c1.0, c1.0, b3.0, b3.0],
        vec![b4.0, b3.0, a2.0, a1.0, a0.0, a3.0, d.0],
    ];
    for ids in &batches {
        let got = read(ids, &records).unwrap();
        let want: Vec<Option<Vec<u8>>> = ids.iter().map(|i| Some(bytes[i].clone())).collect();
        assert_eq!(got, want, "batch {ids:?}");
        for id in ids {
            assert_eq!(
                read(std::slice::from_ref(id), &records).unwrap(),
                vec![Some(bytes[id].clone())]
            );
        }
    }
    // The tag 0 bottom's bytes flipped: every chain over it fails, naming a1 and a0.
    let mut bad = records.clone();
    let last = bad.get_mut(&a0.0).unwrap().last_mut().unwrap();
    *last ^= 1;
    for ids in [vec![a3.0, b4.0], vec![d.0, a1.0]] {
        match read(&ids, &bad) {
            Err(StoreError::BadDelta {
                id,
                base,
                problem: DeltaProblem::BaseCorrupt { .. },
            }) => assert_eq!((id, base), (a1.0, a0.0)),
            other => panic!("{ids:?}: {other:?}"),
        }
    }
    // Asked for itself, the bottom is corrupt by its own id.
    assert!(matches!(
        read(&[a0.0], &bad),
        Err(StoreError::Corrupt { id, .. }) if id == a0.0
    ));
}

/// Each record's delta depth, from the store's (delta, base) pairs.
fn depths(store: &dyn ObjectStore) -> std::collections::HashMap<ObjectId, u8> {
    let base_of: std::collections::HashMap<ObjectId, ObjectId> =
        deltas(store).into_iter().collect();
    base_of
        .keys()
        .map(|id| {
            let (mut at, mut d) = (*id, 0u8);
            while let Some(b) = base_of.get(&at) {
                (at, d) = (*b, d + 1);
            }
            (*id, d)
        })
        .collect()
}

/// Words drawn from a fixed seed: text that compresses, but not to nothing.
fn prose(words: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::new();
    for i in 0..words {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = 2 + (x % 8) as usize;
        out.extend((0..len).map(|k| b'a' + ((x >> (5 * k)) % 26) as u8));
        out.push(if i % 12 == 11 { b'\n' } else { b' ' });
    }
    out
}

/// Writers stop chains at `WRITE_DELTA_DEPTH`: the version after a chain's deepest
/// one is written against the whole record at the bottom of that chain while the
/// delta stays small (a file edited in place), and whole once it would repeat too
/// much (a file that grows by more than an eighth of itself each time). Every
/// version reads back and the store verifies.
fn chains_stop_at_the_write_depth(store: &dyn Store) {
    let depth = usize::from(codec::WRITE_DELTA_DEPTH);
    let repo = Repo::new(store);
    let mut ws = Workspace::new();
    let mut edited = Vec::new();
    let mut grown = Vec::new();
    let mut want = Vec::new();
    let mut log = prose(600, 1);
    for v in 0..3 * depth + 2 {
        // One line of 200 changed in place each version.
        let mut t = text(200, 7);
        let line = format!("def function_{v}(x):\n    return x * {}\n", v * 7 % 97);
        let edit = format!("def function_{v}(x):\n    return x + {v}\n");
        let at = t
            .windows(line.len())
            .position(|w| w == line.as_bytes())
            .unwrap();
        t.splice(at..at + line.len(), edit.bytes());
        ws.write("/edited.py", &t).unwrap();
        log.extend(prose(120, 100 + v as u64));
        ws.write("/grown.txt", &log).unwrap();
        let c = repo
            .commit(&mut ws, "main", RepoCommitOptions::message(format!("v{v}")))
            .unwrap();
        edited.push(ws.file_content_object("/edited.py").unwrap().0);
        grown.push(ws.file_content_object("/grown.txt").unwrap().0);
        want.push((c.id, t, log.clone()));
    }
    let depths = depths(store);
    let base_of: std::collections::HashMap<ObjectId, ObjectId> =
        deltas(store).into_iter().collect();
    assert!(
        depths.values().all(|d| usize::from(*d) <= depth),
        "no chain deeper than {depth}: {depths:?}"
    );
    // The edited file: a chain down to the write depth, then the next version
    // against the chain's whole record, then a chain again from there.
    assert_eq!(base_of.get(&edited[0]), None, "the first version is whole");
    for v in 1..=depth {
        assert_eq!(depths.get(&edited[v]), Some(&(v as u8)), "version {v}");
        assert_eq!(base_of.get(&edited[v]), Some(&edited[v - 1]));
    }
    assert_eq!(
        base_of.get(&edited[depth + 1]),
        Some(&edited[0]),
        "past the write depth, against the chain's whole record"
    );
    assert_eq!(base_of.get(&edited[depth + 2]), Some(&edited[depth + 1]));
    // The grown file: the delta against the whole record would repeat every
    // addition since, more than an eighth of it: stored whole.
    assert_eq!(depths.get(&grown[depth]), Some(&(depth as u8)));
    assert_eq!(base_of.get(&grown[depth + 1]), None, "stored whole");
    assert_eq!(base_of.get(&grown[depth + 2]), Some(&grown[depth + 1]));
    for (v, (id, t, l)) in want.iter().enumerate() {
        let old = repo.checkout(&id.to_string()).unwrap();
        assert_eq!(old.read("/edited.py").unwrap(), &t[..], "version {v}");
        assert_eq!(old.read("/grown.txt").unwrap(), &l[..], "version {v}");
    }
    assert!(verify(store, true).unwrap().is_clean());
}

#[test]
fn sqlite_chains_stop_at_the_write_depth() {
    chains_stop_at_the_write_depth(&SqliteStore::in_memory().unwrap());
}

#[test]
fn dir_chains_stop_at_the_write_depth() {
    let tmp = tempfile::tempdir().unwrap();
    chains_stop_at_the_write_depth(&DirStore::open(tmp.path().join("s")).unwrap());
}

/// A release that changes many files at once: their previous versions (chains of
/// deltas, whose bottoms the first commit wrote against the store's dictionary)
/// all serve as bases, every version reads back and the store verifies.
#[test]
fn a_release_changing_many_files_stores_each_as_a_delta() {
    let store = SqliteStore::in_memory().unwrap();
    let repo = Repo::new(&store);
    let mut ws = Workspace::new();
    let mut versions: Vec<(ObjectId, Vec<Vec<u8>>)> = Vec::new();
    let mut chunks: Vec<Vec<ObjectId>> = Vec::new();
    for v in 0..7u64 {
        let mut files = Vec::new();
        for f in 0..40u64 {
            // One chunk each (a few KiB): the chunk is what is hinted.
            let mut text = prose(500, f + 1);
            text.extend(format!("release {v}\n").as_bytes());
            ws.write(&format!("/pkg/f{f:02}.txt"), &text).unwrap();
            files.push(text);
        }
        let c = repo
            .commit(&mut ws, "main", RepoCommitOptions::message(format!("v{v}")))
            .unwrap();
        chunks.push(
            (0..40)
                .map(|f| {
                    let (id, kind) = ws
                        .file_content_object(&format!("/pkg/f{f:02}.txt"))
                        .unwrap();
                    assert_eq!(kind, ObjectKind::Chunk, "file {f}");
                    id
                })
                .collect(),
        );
        versions.push((c.id, files));
    }
    let base_of: std::collections::HashMap<ObjectId, ObjectId> =
        deltas(&store).into_iter().collect();
    for (v, ids) in chunks.iter().enumerate().skip(1) {
        for (f, id) in ids.iter().enumerate() {
            assert!(
                base_of.contains_key(id),
                "file {f} of release {v} is a delta"
            );
        }
    }
    for (id, files) in &versions {
        let old = repo.checkout(&id.to_string()).unwrap();
        for (f, want) in files.iter().enumerate() {
            assert_eq!(old.read(&format!("/pkg/f{f:02}.txt")).unwrap(), &want[..]);
        }
    }
    assert!(verify(&store, true).unwrap().is_clean());
}
