//! The conformance suite every adapter passes: call [`run`] from the adapter's tests
//! with an empty store, or, for a backend that is only one part of a store,
//! [`run_objects`] (an [`ObjectStore`]) or [`run_refs`] (a [`RefStore`]). A failure
//! panics with what the store got wrong (this module is test support, shipped so
//! that third-party adapters can run it too).

use std::sync::atomic::{AtomicUsize, Ordering};

use snapgraph::{CheckoutPolicy, CommitOptions, ObjectId, ObjectSource, Workspace};

use crate::error::StoreError;
use crate::store::{ObjectStore, RefStore, RefUpdate, Store};

/// Runs every check against `store`, which must start empty (no objects, no refs).
pub fn run(store: &dyn Store) {
    run_objects(store);
    run_refs(store);
    objects_with_refs(store);
}

/// [`RefStore::update_refs_with_objects`]: all or nothing where the store says it
/// can ([`RefStore::writes_objects_with_refs`]): a conflicting update writes no
/// object; a successful one writes the objects (those held already kept), moves the
/// refs and logs the moves. Where it cannot, it answers `false` having done nothing.
/// `store` must hold no object and no ref.
pub fn objects_with_refs(store: &dyn Store) {
    let one = b"written with its ref".to_vec();
    let two = vec![7u8; 3000];
    let (a, b) = (id_of(&one), id_of(&two));
    let objects = [(a, &one[..]), (b, &two[..])];
    let bases = [None, None];
    let tip = id_of(b"a commit");
    if !store.writes_objects_with_refs() {
        let done = store
            .update_refs_with_objects(
                &objects,
                &bases,
                &[RefUpdate::new("heads/with", None, Some(tip))],
                "declined",
            )
            .unwrap();
        assert!(!done, "says it cannot, then does");
        assert_eq!(
            store.has_many(&[a, b]).unwrap().len(),
            2,
            "declined, yet wrote"
        );
        assert_eq!(store.get_ref("heads/with").unwrap(), None);
        return;
    }
    // A guard that fails: nothing written, objects included.
    store
        .update_refs(&[RefUpdate::new("heads/guard", None, Some(tip))], "guard")
        .unwrap();
    let conflict = store.update_refs_with_objects(
        &objects,
        &bases,
        &[
            RefUpdate::new("heads/with", None, Some(tip)),
            RefUpdate::guard("heads/guard", None),
        ],
        "must not apply",
    );
    assert!(
        matches!(conflict, Err(StoreError::RefConflict { ref name, .. }) if name == "heads/guard"),
        "{conflict:?}"
    );
    assert_eq!(
        store.has_many(&[a, b]).unwrap().len(),
        2,
        "a refused update wrote objects"
    );
    assert_eq!(store.get_ref("heads/with").unwrap(), None);
    // Guards that hold: objects and refs together, the move logged.
    store.put_many(&[(b, &two[..])]).unwrap();
    let done = store
        .update_refs_with_objects(
            &objects,
            &bases,
            &[
                RefUpdate::new("heads/with", None, Some(tip)),
                RefUpdate::guard("heads/guard", Some(tip)),
                RefUpdate::guard("heads/absent", None),
            ],
            "with objects",
        )
        .unwrap();
    assert!(done, "says it can, then declines");
    assert!(store.has_many(&[a, b]).unwrap().is_empty());
    let read = ObjectStore::get_many(store, &[a, b]).unwrap();
    assert_eq!(read[0].as_deref(), Some(&one[..]));
    assert_eq!(read[1].as_deref(), Some(&two[..]));
    assert_eq!(store.get_ref("heads/with").unwrap(), Some(tip));
    let log = store.reflog("heads/with").unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].message, "with objects");
    assert_eq!(store.get_ref("heads/absent").unwrap(), None);
    // Cleaned up: the store is left as it came, but for the objects.
    store
        .update_refs(
            &[
                RefUpdate::new("heads/with", Some(tip), None),
                RefUpdate::new("heads/guard", Some(tip), None),
            ],
            "cleanup",
        )
        .unwrap();
    store.delete_many(&[a, b]).unwrap();
}

/// The object part: every check of [`ObjectStore`] and of the core's
/// [`ObjectSource`] over it. `store` must hold no object.
pub fn run_objects<S: ObjectStore + ObjectSource + ?Sized>(store: &S) {
    objects(store);
    large_batches(store);
    serves_the_core(store);
    deltas(store);
    shared_reads(store);
}

/// Reads shared through [`ObjectStore::share_reads`] answer as unshared ones do for
/// what this handle writes: an object put, deleted or put again while reads are
/// shared reads back as the store now holds it, and so after sharing ends.
pub fn shared_reads<S: ObjectStore + ObjectSource + ?Sized>(store: &S) {
    let a = b"shared reads: a".to_vec();
    let b = b"shared reads: b".to_vec();
    let (ia, ib) = (id_of(&a), id_of(&b));
    store.put_many(&[(ia, &a)]).unwrap();
    store.share_reads(true).unwrap();
    assert_eq!(
        ObjectStore::get_many(store, &[ia]).unwrap(),
        vec![Some(a.clone())]
    );
    assert_eq!(store.has_many(&[ia, ib]).unwrap(), vec![ib]);
    store.put_many(&[(ib, &b)]).unwrap();
    assert_eq!(
        ObjectStore::get_many(store, &[ia, ib]).unwrap(),
        vec![Some(a.clone()), Some(b.clone())],
        "a write through the handle is seen by its next read"
    );
    store.delete_many(&[ia]).unwrap();
    assert_eq!(store.has_many(&[ia, ib]).unwrap(), vec![ia]);
    assert_eq!(ObjectStore::get_many(store, &[ia]).unwrap(), vec![None]);
    store.share_reads(false).unwrap();
    assert_eq!(store.has_many(&[ia, ib]).unwrap(), vec![ia]);
    store.delete_many(&[ib]).unwrap();
    assert_eq!(store.has_many(&[ib]).unwrap(), vec![ib]);
}

/// Objects written with delta hints ([`ObjectStore::put_many_with_bases`]) read back
/// exactly, whatever the store does with the hints: a chain of versions, a hint naming
/// an absent object, a hint naming the object itself, hints in the same batch. Every
/// pair [`ObjectStore::for_each_delta`] lists is of held objects, and deleting
/// dependants before their bases leaves nothing behind.
pub fn deltas<S: ObjectStore + ObjectSource + ?Sized>(store: &S) {
    let version = |n: usize| {
        let mut v = Vec::new();
        for line in 0..400 {
            v.extend_from_slice(
                format!("line {line} of a file, version {}\n", line % (n + 3)).as_bytes(),
            );
        }
        let mut stored = vec![
            snapgraph::ObjectKind::Chunk.byte(),
            snapgraph::FORMAT_VERSION,
        ];
        stored.extend(v);
        stored
    };
    let versions: Vec<Vec<u8>> = (0..14).map(version).collect();
    let ids: Vec<ObjectId> = versions.iter().map(|v| id_of(v)).collect();
    // One call per version, each hinted against the one before (a chain deeper than
    // a writer's cap), then one batch whose hints name objects of the same batch.
    store.put_many(&[(ids[0], &versions[0])]).unwrap();
    for i in 1..12 {
        store
            .put_many_with_bases(&[(ids[i], &versions[i])], &[Some(ids[i - 1])])
            .unwrap();
    }
    let absent = id_of(b"a base nobody stored");
    store
        .put_many_with_bases(
            &[(ids[12], &versions[12]), (ids[13], &versions[13])],
            &[Some(absent), Some(ids[12])],
        )
        .unwrap();
    let tiny = b"t".to_vec();
    let tiny_id = id_of(&tiny);
    store
        .put_many_with_bases(&[(tiny_id, &tiny)], &[Some(tiny_id)])
        .unwrap();
    let mut all = ids.clone();
    all.push(tiny_id);
    let got = ObjectStore::get_many(store, &all).unwrap();
    for (i, got) in got.iter().enumerate() {
        let want = if i < versions.len() {
            &versions[i]
        } else {
            &tiny
        };
        assert_eq!(got.as_ref(), Some(want), "object {} reads back", all[i]);
    }
    let mut pairs = Vec::new();
    store
        .for_each_delta(&mut |id, base| {
            pairs.push((id, base));
            Ok(())
        })
        .unwrap();
    for (id, base) in &pairs {
        assert!(all.contains(id), "for_each_delta lists {id}, never put");
        assert!(all.contains(base), "{id} names base {base}, never put");
        assert_ne!(
            base, &absent,
            "{id} is a delta of an object the store lacks"
        );
    }
    // Dependants first: every prefix of the deletion leaves the rest readable.
    for i in (0..all.len()).rev() {
        store.delete_many(&all[i..=i]).unwrap();
        let rest = ObjectStore::get_many(store, &all[..i]).unwrap();
        assert!(
            rest.iter().all(Option::is_some),
            "after deleting {}",
            all[i]
        );
    }
    assert_eq!(store.has_many(&all).unwrap(), all);
}

/// The ref part: every check of [`RefStore`]. `store` must hold no ref.
pub fn run_refs(store: &dyn RefStore) {
    run_refs_serial(store);
    concurrent_compare_and_swap(store, 4, 25);
}

/// Every check of [`run_refs`] made from one thread: all but
/// [`concurrent_compare_and_swap`], for a backend whose compare-and-swap is only as
/// atomic as a server it does not control (an S3 service's conditional writes): run
/// the concurrent check separately where the server's atomicity is known.
pub fn run_refs_serial(store: &dyn RefStore) {
    refs(store);
    atomic_batches(store);
    invalid_names(store);
    leases_are_not_logged(store);
}

fn id_of(bytes: &[u8]) -> ObjectId {
    ObjectId::hash_stored(bytes)
}

/// Objects: put, get in order, absence in order, idempotent put, delete, iteration.
pub fn objects<S: ObjectStore + ObjectSource + ?Sized>(store: &S) {
    let text = b"conformance text object ".repeat(400);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let random: Vec<u8> = (0..20_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let small = b"s".to_vec();
    let empty = Vec::new();
    let all = [&text, &random, &small, &empty];
    let ids: Vec<ObjectId> = all.iter().map(|b| id_of(b)).collect();
    let absent = id_of(b"never stored");

    assert_eq!(
        store.has_many(&ids).unwrap(),
        ids,
        "empty store holds nothing"
    );
    let batch: Vec<(ObjectId, &[u8])> = ids.iter().zip(all).map(|(i, b)| (*i, &b[..])).collect();
    store.put_many(&batch).unwrap();
    store.put_many(&batch).unwrap(); // idempotent
    store.put_many(&[]).unwrap();

    let mut ask = ids.clone();
    ask.insert(1, absent);
    let got = crate::store::ObjectStore::get_many(&store, &ask).unwrap();
    assert_eq!(got.len(), ask.len(), "one answer per id");
    assert_eq!(got[1], None, "absent id reads as None");
    for (i, bytes) in all.iter().enumerate() {
        let at = if i == 0 { 0 } else { i + 1 };
        assert_eq!(
            got[at].as_deref(),
            Some(&bytes[..]),
            "object {i} round-trips"
        );
    }
    assert_eq!(store.has_many(&ask).unwrap(), vec![absent]);
    assert!(crate::store::ObjectStore::get_many(&store, &[])
        .unwrap()
        .is_empty());
    assert!(store.has_many(&[]).unwrap().is_empty());

    assert_eq!(store.get(&ids[0]).unwrap().as_deref(), Some(&text[..]));
    assert!(store.contains(&ids[1]).unwrap());
    assert!(!store.contains(&absent).unwrap());

    let mut listed = Vec::new();
    store
        .for_each_id(&mut |id| {
            listed.push(id);
            Ok(())
        })
        .unwrap();
    listed.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(listed, want, "for_each_id lists exactly the objects");

    // An error from the callback stops the iteration and comes back.
    let mut calls = 0;
    let err = store.for_each_id(&mut |_| {
        calls += 1;
        Err(StoreError::Injected {
            op: "callback",
            call: 1,
        })
    });
    assert!(matches!(err, Err(StoreError::Injected { .. })));
    assert_eq!(calls, 1);

    store.delete_many(&[ids[0], ids[2], absent]).unwrap();
    assert_eq!(store.has_many(&ids).unwrap(), vec![ids[0], ids[2]]);
    assert_eq!(
        crate::store::ObjectStore::get_many(&store, &[ids[0]]).unwrap(),
        vec![None]
    );
    store.delete_many(&[ids[1], ids[3]]).unwrap();
    assert_eq!(store.has_many(&ids).unwrap(), ids, "everything deleted");
}

/// Batches larger than any backend's statement parameter limit.
pub fn large_batches(store: &(impl ObjectStore + ?Sized)) {
    let blobs: Vec<Vec<u8>> = (0..40_000u32).map(|i| i.to_le_bytes().to_vec()).collect();
    let batch: Vec<(ObjectId, &[u8])> = blobs.iter().map(|b| (id_of(b), &b[..])).collect();
    let ids: Vec<ObjectId> = batch.iter().map(|(i, _)| *i).collect();
    store.put_many(&batch[..30_000]).unwrap();
    let absent = store.has_many(&ids).unwrap();
    assert_eq!(absent, ids[30_000..], "absence of 40,000 ids, in order");
    let got = crate::store::ObjectStore::get_many(&store, &ids[29_990..30_010]).unwrap();
    assert!(got[..10].iter().all(Option::is_some) && got[10..].iter().all(Option::is_none));
    store.put_many(&batch).unwrap();
    assert!(store.has_many(&ids).unwrap().is_empty());
    store.delete_many(&ids).unwrap();
    assert_eq!(store.has_many(&ids).unwrap().len(), ids.len());
}

/// The store is an `ObjectSource`: a commit put in checks out from it.
pub fn serves_the_core<S: ObjectStore + ObjectSource + ?Sized>(store: &S) {
    let mut ws = Workspace::new();
    ws.write("/src/main.rs", b"fn main() {}\n".repeat(50))
        .unwrap();
    ws.write("/big.bin", vec![7u8; 300_000]).unwrap();
    ws.symlink("/link", "src/main.rs").unwrap();
    let commit = ws.commit(CommitOptions::new()).unwrap();
    let batch: Vec<(ObjectId, &[u8])> = commit.objects().iter().map(|(i, b)| (*i, b)).collect();
    store.put_many(&batch).unwrap();
    let mut restored = Workspace::new();
    let _ = restored
        .checkout(commit.id(), store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(restored.read("/big.bin").unwrap(), &vec![7u8; 300_000][..]);
    assert_eq!(restored.read_link("/link").unwrap(), "src/main.rs");
    let ids: Vec<ObjectId> = batch.iter().map(|(i, _)| *i).collect();
    store.delete_many(&ids).unwrap();
}

/// Refs: create, compare-and-swap, conflicts naming the actual value, delete, list,
/// reflog.
pub fn refs(store: &dyn RefStore) {
    let a = id_of(b"a");
    let b = id_of(b"b");
    let c = id_of(b"c");
    assert_eq!(store.get_ref("heads/main").unwrap(), None);
    store
        .compare_and_swap_ref("heads/main", None, a, "create")
        .unwrap();
    assert_eq!(store.get_ref("heads/main").unwrap(), Some(a));

    match store.compare_and_swap_ref("heads/main", None, b, "racing create") {
        Err(StoreError::RefConflict {
            name,
            expected,
            actual,
        }) => {
            assert_eq!(
                (name.as_str(), expected, actual),
                ("heads/main", None, Some(a))
            );
        }
        other => panic!("create over an existing ref must conflict, got {other:?}"),
    }
    match store.compare_and_swap_ref("heads/main", Some(c), b, "stale") {
        Err(StoreError::RefConflict { actual, .. }) => assert_eq!(actual, Some(a)),
        other => panic!("stale expected value must conflict, got {other:?}"),
    }
    assert_eq!(
        store.get_ref("heads/main").unwrap(),
        Some(a),
        "a conflict changes nothing"
    );

    store
        .compare_and_swap_ref("heads/main", Some(a), b, "advance")
        .unwrap();
    store
        .compare_and_swap_ref("heads/dev", None, c, "fork")
        .unwrap();
    store
        .compare_and_swap_ref("tags/v1", None, a, "tag")
        .unwrap();
    store
        .compare_and_swap_ref("heads-not/x", None, a, "lookalike")
        .unwrap();
    assert_eq!(
        store.list_refs("heads/").unwrap(),
        vec![("heads/dev".to_string(), c), ("heads/main".to_string(), b)]
    );
    assert_eq!(store.list_refs("").unwrap().len(), 4);
    assert!(store.list_refs("nothing/").unwrap().is_empty());

    assert!(matches!(
        store.delete_ref("heads/dev", a, "wrong"),
        Err(StoreError::RefConflict { .. })
    ));
    store.delete_ref("heads/dev", c, "drop dev").unwrap();
    assert_eq!(store.get_ref("heads/dev").unwrap(), None);

    let log = store.reflog("heads/main").unwrap();
    let moves: Vec<_> = log
        .iter()
        .map(|e| (e.old, e.new, e.message.as_str()))
        .collect();
    assert_eq!(
        moves,
        vec![(None, Some(a), "create"), (Some(a), Some(b), "advance")]
    );
    let dev = store.reflog("heads/dev").unwrap();
    assert_eq!(
        dev.last().map(|e| (e.old, e.new)),
        Some((Some(c), None)),
        "deletion logged"
    );
    assert!(store.reflog("heads/none").unwrap().is_empty());

    for (name, id) in store.list_refs("").unwrap() {
        store.delete_ref(&name, id, "cleanup").unwrap();
    }
}

/// Batches apply all or nothing; guards hold a batch to another ref's value.
pub fn atomic_batches(store: &dyn RefStore) {
    let a = id_of(b"batch a");
    let b = id_of(b"batch b");
    store
        .update_refs(
            &[
                RefUpdate::new("heads/x", None, Some(a)),
                RefUpdate::new("heads/y", None, Some(b)),
            ],
            "two at once",
        )
        .unwrap();
    let conflict = store.update_refs(
        &[
            RefUpdate::new("heads/x", Some(a), Some(b)),
            RefUpdate::new("heads/y", Some(a), Some(a)), // guard fails: y holds b
        ],
        "must not apply",
    );
    assert!(matches!(conflict, Err(StoreError::RefConflict { ref name, .. }) if name == "heads/y"));
    assert_eq!(
        store.get_ref("heads/x").unwrap(),
        Some(a),
        "nothing applied"
    );
    assert_eq!(store.reflog("heads/x").unwrap().len(), 1);

    store
        .update_refs(
            &[
                RefUpdate::new("heads/x", Some(a), Some(b)),
                RefUpdate::guard("heads/y", Some(b)),
                RefUpdate::guard("heads/absent", None),
            ],
            "guarded",
        )
        .unwrap();
    assert_eq!(store.get_ref("heads/x").unwrap(), Some(b));
    assert_eq!(
        store.reflog("heads/y").unwrap().len(),
        1,
        "a guard logs nothing"
    );
    assert_eq!(store.get_ref("heads/absent").unwrap(), None);

    store
        .update_refs(
            &[
                RefUpdate::new("heads/x", Some(b), None),
                RefUpdate::new("heads/y", Some(b), None),
            ],
            "cleanup",
        )
        .unwrap();
    assert!(store.list_refs("").unwrap().is_empty());
}

/// Names that could escape a directory or confuse a parser are refused.
pub fn invalid_names(store: &dyn RefStore) {
    let a = id_of(b"a");
    let long = "x".repeat(256);
    for name in [
        "", "/abs", "a//b", "a/../b", "..", "a/.", "trail/", "sp ace", "nul\0", "é", &long,
    ] {
        assert!(
            matches!(
                store.compare_and_swap_ref(name, None, a, "bad"),
                Err(StoreError::InvalidRefName { .. })
            ),
            "ref name {name:?} must be refused"
        );
        assert!(matches!(
            store.get_ref(name),
            Err(StoreError::InvalidRefName { .. })
        ));
    }
    let twice = store.update_refs(
        &[
            RefUpdate::new("heads/t", None, Some(a)),
            RefUpdate::new("heads/t", None, Some(a)),
        ],
        "twice",
    );
    assert!(matches!(twice, Err(StoreError::InvalidRefName { .. })));
    assert!(store.list_refs("").unwrap().is_empty());
}

/// `threads` writers each advance one ref `rounds` times by read-then-CAS with
/// retry: no update may be lost, so the reflog ends with exactly
/// `threads * rounds` entries, each starting where the previous ended.
pub fn concurrent_compare_and_swap(store: &dyn RefStore, threads: usize, rounds: usize) {
    let name = "heads/contended";
    let conflicts = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..threads {
            let conflicts = &conflicts;
            s.spawn(move || {
                for r in 0..rounds {
                    let new = id_of(format!("writer {t} round {r}").as_bytes());
                    loop {
                        let old = store.get_ref(name).unwrap();
                        match store.compare_and_swap_ref(name, old, new, &format!("{t}/{r}")) {
                            Ok(()) => break,
                            Err(StoreError::RefConflict { .. }) => {
                                conflicts.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            });
        }
    });
    let log = store.reflog(name).unwrap();
    assert_eq!(
        log.len(),
        threads * rounds,
        "every successful CAS is logged once"
    );
    for pair in log.windows(2) {
        assert_eq!(
            pair[0].new, pair[1].old,
            "each move starts where the last ended"
        );
    }
    assert_eq!(store.get_ref(name).unwrap(), log.last().and_then(|e| e.new));
    let last = store.get_ref(name).unwrap().unwrap();
    store.delete_ref(name, last, "cleanup").unwrap();
}

/// Writers' lease refs (`snapgraph/lease/…`) move like any ref but leave no reflog:
/// every commit takes and drops one.
pub fn leases_are_not_logged(store: &dyn RefStore) {
    let a = id_of(b"lease a");
    let lease = "snapgraph/lease/conformance";
    store
        .update_refs(
            &[
                RefUpdate::new(lease, None, Some(a)),
                RefUpdate::new("heads/with-lease", None, Some(a)),
            ],
            "take",
        )
        .unwrap();
    assert_eq!(store.get_ref(lease).unwrap(), Some(a));
    store.delete_ref(lease, a, "drop").unwrap(); // a single update
    assert_eq!(store.get_ref(lease).unwrap(), None);
    assert!(
        store.reflog(lease).unwrap().is_empty(),
        "a lease is not logged"
    );
    assert_eq!(store.reflog("heads/with-lease").unwrap().len(), 1);
    store.delete_ref("heads/with-lease", a, "cleanup").unwrap();
    assert!(store.list_refs("").unwrap().is_empty());
}
