//! `Workspace::hand_over`: a commit made in batches (content handed over as it is
//! written, then the commit) is the commit made at once: same id, and together
//! exactly the same objects, none twice, referenced objects first.

mod common;

use std::collections::HashMap;

use common::{assert_children_first, pseudo_random, snap, Store};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use snapgraph::{CheckoutPolicy, CommitOptions, FsError, ObjectId, ObjectSet, Workspace};

const NAMES: [&str; 3] = ["a", "b", "c"];

/// One write: a path, content described by a few numbers (so failures print small),
/// and whether the batched side hands over right after it.
#[derive(Debug, Clone)]
struct Write {
    path: String,
    len: usize,
    seed: u64,
    hand_over: bool,
}

impl Write {
    fn bytes(&self) -> Vec<u8> {
        if self.len <= 64 {
            vec![self.seed as u8; self.len]
        } else {
            // Few seeds: identical contents recur, in one batch and across batches.
            pseudo_random(self.len, self.seed)
        }
    }
}

fn write() -> impl Strategy<Value = Write> {
    let len = prop_oneof![
        3 => 0usize..=64,          // inline
        4 => 65usize..6000,        // one chunk
        2 => 66_000usize..150_000, // chunks and a manifest
    ];
    (
        prop::collection::vec(0..NAMES.len(), 1..=3),
        len,
        0u64..3,
        prop::bool::weighted(0.3),
    )
        .prop_map(|(p, len, seed, hand_over)| Write {
            path: p.iter().map(|&i| format!("/{}", NAMES[i])).collect(),
            len,
            seed,
            hand_over,
        })
}

/// Applies the writes that the workspace accepts (a path through a file is refused
/// on both sides alike), each path once (a random tree: content overwritten after
/// its hand-over is garbage the commit does not emit, see
/// `overwritten_after_hand_over`); hands over where a write says so when
/// `batched`. Returns the handed-over objects in order.
fn apply(
    ws: &mut Workspace,
    writes: &[Write],
    batched: bool,
    have: Option<&Store>,
) -> Vec<ObjectSet> {
    let mut batches = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for w in writes {
        // A directory in the way, or a file where a directory is needed: skip.
        if !seen.insert(w.path.clone()) || ws.write(&w.path, w.bytes()).is_err() {
            continue;
        }
        if batched && w.hand_over {
            batches.push(ws.hand_over(have.map(|s| s as &dyn snapgraph::ObjectSource)));
        }
    }
    batches
}

/// The objects in the order a caller writes them: batches, then the commit's.
fn concat(batches: Vec<ObjectSet>, commit: ObjectSet) -> Vec<(ObjectId, Vec<u8>)> {
    batches
        .into_iter()
        .chain(std::iter::once(commit))
        .flat_map(|s| s.into_iter())
        .collect()
}

/// Checks one turn: same id, same objects as a set, none twice, children first.
fn same_turn(
    whole: &snapgraph::Commit,
    batched_id: ObjectId,
    written: &[(ObjectId, Vec<u8>)],
) -> Result<(), TestCaseError> {
    prop_assert_eq!(whole.id(), batched_id);
    let expected: HashMap<ObjectId, Vec<u8>> = whole
        .objects()
        .iter()
        .map(|(i, b)| (*i, b.to_vec()))
        .collect();
    let got: Store = written.iter().cloned().collect();
    prop_assert_eq!(got.len(), written.len(), "an object was emitted twice");
    prop_assert_eq!(got.len(), expected.len());
    for (id, bytes) in &expected {
        prop_assert_eq!(got.get(id), Some(bytes), "{} differs or is missing", id);
    }
    let order: Vec<ObjectId> = written.iter().map(|(i, _)| *i).collect();
    assert_children_first(&order, &got, false);
    Ok(())
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/hand_over.txt",
        ))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(48))]

    /// Two turns: a first commit of random files handed over at random points, then
    /// random overwrites and new files committed onto it with the store declared.
    #[test]
    fn batched_commit_is_the_commit(
        first in prop::collection::vec(write(), 1..16),
        second in prop::collection::vec(write(), 0..10),
    ) {
        let mut whole = Workspace::new();
        let mut batched = Workspace::new();

        // Turn 1: nothing held.
        apply(&mut whole, &first, false, None);
        let batches = apply(&mut batched, &first, true, None);
        let c_whole = whole.commit(CommitOptions::new()).unwrap();
        let c_batched = batched.commit(CommitOptions::new()).unwrap();
        let id1 = c_batched.id();
        let written = concat(batches, c_batched.into_objects());
        same_turn(&c_whole, id1, &written)?;
        let mut store: Store = written.into_iter().collect();

        // The batched store restores what the unbatched workspace holds.
        let mut out = Workspace::new();
        out.checkout(id1, &store, CheckoutPolicy::default()).unwrap().verify(|_| None).unwrap();
        prop_assert_eq!(snap(&out), snap(&whole));

        // Turn 2: the store declared, a parent; overwritten files that were handed
        // over have no bytes to reuse on the batched side and are rebuilt whole.
        apply(&mut whole, &second, false, None);
        let batches = apply(&mut batched, &second, true, Some(&store));
        let c_whole = whole
            .commit(CommitOptions::new().parent(id1).have_in(&store))
            .unwrap();
        let c_batched = batched
            .commit(CommitOptions::new().parent(id1).have_in(&store))
            .unwrap();
        let id2 = c_batched.id();
        let written = concat(batches, c_batched.into_objects());
        same_turn(&c_whole, id2, &written)?;
        store.extend(written);
        let mut out = Workspace::new();
        out.checkout(id2, &store, CheckoutPolicy::default()).unwrap().verify(|_| None).unwrap();
        prop_assert_eq!(snap(&out), snap(&whole));
    }
}

/// A handed-over file keeps its metadata and content id but not its bytes; inline
/// content stays readable; after the commit nothing is handed over any more, so a
/// commit into an empty destination needs the bytes again.
#[test]
fn handed_over_files_keep_references_only() {
    let mut ws = Workspace::new();
    ws.write("/big", pseudo_random(100_000, 1)).unwrap();
    ws.write("/small", b"tiny").unwrap();
    let objects = ws.hand_over(None);
    assert!(objects.len() > 1, "a manifest and its chunks");
    assert_eq!(ws.metadata("/big").unwrap().size, 100_000);
    assert!(ws.file_content_id("/big").is_some());
    assert!(matches!(ws.read("/big"), Err(FsError::NotLoaded { .. })));
    assert_eq!(ws.read("/small").unwrap(), b"tiny");
    // A second hand-over with nothing written emits nothing.
    assert!(ws.hand_over(None).is_empty());

    let c = ws.commit(CommitOptions::new()).unwrap();
    assert!(!c.is_complete(), "the handed-over content was left out");
    for id in objects.ids() {
        assert!(!c.objects().contains_id(id), "{id} emitted twice");
    }
    // The next commit into a destination that lacks the content must fail, typed.
    ws.write("/other", b"x").unwrap();
    let empty: Store = Store::new();
    let err = ws
        .commit(
            CommitOptions::new()
                .parent(c.id())
                .have_in(&empty)
                .parent_source(&{
                    let mut s: Store = objects.into_iter().collect();
                    s.extend(c.into_objects());
                    s
                }),
        )
        .unwrap_err();
    assert!(
        matches!(err, snapgraph::CommitError::ContentNotLoaded { ref path, .. } if path == "/big"),
        "{err:?}"
    );
}

/// Content handed over and then overwritten before the commit stays handed over
/// (harmless garbage for a collection); the commit is still the same.
#[test]
fn overwritten_after_hand_over() {
    let (a, b) = (pseudo_random(90_000, 1), pseudo_random(90_000, 2));
    let mut whole = Workspace::new();
    whole.write("/f", &b).unwrap();
    let mut batched = Workspace::new();
    batched.write("/f", &a).unwrap();
    let garbage = batched.hand_over(None);
    batched.write("/f", &b).unwrap();
    let c = batched.commit(CommitOptions::new()).unwrap();
    let expected = whole.commit(CommitOptions::new()).unwrap();
    assert_eq!(c.id(), expected.id());
    let got: Store = c.into_objects().into_iter().collect();
    let want: Store = expected.into_objects().into_iter().collect();
    assert_eq!(got, want, "b's objects are emitted by the commit");
    assert!(garbage.ids().all(|id| !want.contains_key(id)));
}

/// `copy_file` of a handed-over file copies its content reference: the commit is the
/// one of two writes of the same bytes. Copying onto a directory or from a symlink is
/// refused, naming the path.
#[test]
fn copy_file_of_handed_over_content() {
    let data = pseudo_random(120_000, 4);
    let mut whole = Workspace::new();
    whole.write("/a/one", &data).unwrap();
    whole.write("/b/two", &data).unwrap();
    whole.set_mode("/b/two", 0o600).unwrap();
    whole.set_mode("/a/one", 0o600).unwrap();

    let mut batched = Workspace::new();
    batched.write("/a/one", &data).unwrap();
    batched.set_mode("/a/one", 0o600).unwrap();
    let handed = batched.hand_over(None);
    batched.copy_file("/a/one", "/b/two").unwrap();
    assert!(matches!(
        batched.read("/b/two"),
        Err(FsError::NotLoaded { .. })
    ));
    assert_eq!(batched.metadata("/b/two").unwrap().mode, 0o600);
    let c = batched.commit(CommitOptions::new()).unwrap();
    let w = whole.commit(CommitOptions::new()).unwrap();
    assert_eq!(c.id(), w.id());
    let mut got: Store = handed.into_iter().collect();
    got.extend(c.into_objects());
    let want: Store = w.into_objects().into_iter().collect();
    assert_eq!(got, want);

    batched.mkdir("/d").unwrap();
    batched.symlink("/l", "a/one").unwrap();
    let e = batched.copy_file("/a/one", "/d").unwrap_err();
    assert!(
        matches!(e, FsError::IsADirectory { ref path } if path == "/d"),
        "{e:?}"
    );
    let e = batched.copy_file("/l", "/x").unwrap_err();
    assert!(
        matches!(e, FsError::IsASymlink { ref path } if path == "/l"),
        "{e:?}"
    );
    let e = batched.copy_file("/missing", "/x").unwrap_err();
    assert!(
        matches!(e, FsError::NotFound { ref path } if path == "/missing"),
        "{e:?}"
    );
}
