//! An incremental commit asks the have-set about the changed path only, and still
//! emits exactly what the destination lacks.

mod common;

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashMap;

use snapgraph::{BoxError, CheckoutPolicy, CommitOptions, ObjectId, ObjectSource, Workspace};

fn content(i: u64, turn: u64) -> Vec<u8> {
    (0..4000u64)
        .map(|j| ((i * 31 + j * 7 + turn * 13) % 251) as u8)
        .collect()
}

#[test]
fn one_edit_asks_about_the_changed_path_only() {
    for (files, dirs) in [(2_000u64, 20u64), (20_000, 1)] {
        let mut ws = Workspace::new();
        for i in 0..files {
            ws.write(&format!("/d{}/f{i:06}", i % dirs), content(i, 0))
                .unwrap();
        }
        let first = ws.commit(CommitOptions::new()).unwrap();
        let mut head = first.id();
        let mut store: HashMap<ObjectId, Vec<u8>> = first.into_objects().into_iter().collect();
        for turn in 1..=20u64 {
            let i = (turn * 997) % files;
            ws.write(&format!("/d{}/f{i:06}", i % dirs), content(i, turn))
                .unwrap();
            let counting = common::Counting::unbatched(&store);
            let c = ws
                .commit(CommitOptions::new().parent(head).have_in(&counting))
                .unwrap();
            // Root, one directory, their new nodes and the new chunk: a handful of
            // questions, not one per entry of the rewritten leaves.
            assert!(
                counting.objects.get() <= 16,
                "{files} files: asked {} times",
                counting.objects.get()
            );
            assert!(!c.is_complete());
            // Exactly what the store lacks: a full commit's objects minus the store.
            let full = ws
                .clone()
                .commit(CommitOptions::new().parent(head))
                .unwrap();
            let mut lacking: Vec<ObjectId> = full
                .objects()
                .ids()
                .filter(|id| !store.contains_key(id))
                .copied()
                .collect();
            let mut emitted: Vec<ObjectId> = c.objects().ids().copied().collect();
            lacking.sort();
            emitted.sort();
            assert_eq!(emitted, lacking);
            head = c.id();
            store.extend(c.into_objects());
        }
    }
}

#[test]
fn edits_to_large_files_give_the_ids_of_a_fresh_commit() {
    let mut seed = 0x1234_5678u64;
    let mut rand = |n: usize| -> usize {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let mut data: Vec<u8> = (0..(3usize << 20))
        .map(|i| (i * 7 % 253) as u8 ^ (i >> 12) as u8)
        .collect();
    let mut ws = Workspace::new();
    ws.write("/big", &data).unwrap();
    let mut head = ws.commit(CommitOptions::new()).unwrap().id();
    for round in 0..12 {
        // One or two edits between commits: overwrite, insert, delete, append.
        for _ in 0..1 + round % 2 {
            let at = rand(data.len());
            match rand(4) {
                0 => {
                    let end = (at + 16).min(data.len());
                    data[at..end].fill(round as u8)
                }
                1 => {
                    let n = rand(50_000);
                    data.splice(at..at, std::iter::repeat_n(round as u8, n));
                }
                2 => {
                    let n = rand(50_000).min(data.len() - at);
                    data.drain(at..at + n);
                }
                _ => data.extend_from_slice(&[round as u8; 1000]),
            }
            ws.write("/big", &data).unwrap();
        }
        let c = ws
            .commit(
                CommitOptions::new()
                    .parent(head)
                    .meta("r", round.to_string()),
            )
            .unwrap();
        let mut fresh = Workspace::new();
        fresh.write("/big", &data).unwrap();
        let f = fresh
            .commit(
                CommitOptions::new()
                    .parent(head)
                    .meta("r", round.to_string()),
            )
            .unwrap_err();
        // `fresh` does not know `head`; compare trees instead.
        drop(f);
        let mut fresh = Workspace::new();
        fresh.write("/big", &data).unwrap();
        let f = fresh.commit(CommitOptions::new()).unwrap();
        let store: HashMap<ObjectId, Vec<u8>> =
            c.objects().iter().map(|(i, b)| (*i, b.to_vec())).collect();
        let fstore: HashMap<ObjectId, Vec<u8>> =
            f.objects().iter().map(|(i, b)| (*i, b.to_vec())).collect();
        assert_eq!(
            snapgraph::SnapshotGraph::commit(c.id(), &store)
                .unwrap()
                .tree,
            snapgraph::SnapshotGraph::commit(f.id(), &fstore)
                .unwrap()
                .tree,
            "round {round}"
        );
        head = c.id();
    }
}

/// A source that counts its batched and its single presence questions, and can be
/// made to fail its batches.
struct Batching<'a> {
    inner: &'a HashMap<ObjectId, Vec<u8>>,
    batches: Cell<usize>,
    singles: Cell<usize>,
    fail_batches: bool,
}

impl<'a> Batching<'a> {
    fn new(inner: &'a HashMap<ObjectId, Vec<u8>>, fail_batches: bool) -> Self {
        Self {
            inner,
            batches: Cell::new(0),
            singles: Cell::new(0),
            fail_batches,
        }
    }
}

impl ObjectSource for Batching<'_> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        Ok(self.inner.get(id).map(|b| Cow::Borrowed(b.as_slice())))
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        self.singles.set(self.singles.get() + 1);
        Ok(self.inner.contains_key(id))
    }
    fn contains_many(&self, ids: &[ObjectId]) -> Result<Vec<bool>, BoxError> {
        self.batches.set(self.batches.get() + 1);
        if self.fail_batches {
            return Err("batch refused".into());
        }
        Ok(ids.iter().map(|id| self.inner.contains_key(id)).collect())
    }
}

/// The objects a full commit of `ws` (as a clone, parent `head`) has that `store`
/// lacks, sorted.
fn lacking(ws: &Workspace, head: ObjectId, store: &HashMap<ObjectId, Vec<u8>>) -> Vec<ObjectId> {
    let full = ws
        .clone()
        .commit(CommitOptions::new().parent(head))
        .unwrap();
    let mut ids: Vec<ObjectId> = full
        .objects()
        .ids()
        .filter(|id| !store.contains_key(id))
        .copied()
        .collect();
    ids.sort();
    ids
}

fn sorted_ids(c: &snapgraph::Commit) -> Vec<ObjectId> {
    let mut ids: Vec<ObjectId> = c.objects().ids().copied().collect();
    ids.sort();
    ids
}

/// [`Batching`], saying it answers from memory (as a map does).
struct InMemory<'a>(Batching<'a>);

impl ObjectSource for InMemory<'_> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        self.0.get(id)
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        self.0.contains(id)
    }
    fn contains_many(&self, ids: &[ObjectId]) -> Result<Vec<bool>, BoxError> {
        self.0.contains_many(ids)
    }
    fn answers_in_memory(&self) -> bool {
        true
    }
}

/// A per-turn commit asks a store in one batch; one that answers from memory per
/// object on the changed path, with no probe walk. Both emit exactly what the store
/// lacks, and the same commit.
#[test]
fn a_per_turn_commit_asks_its_have_store_once_or_in_memory_per_object() {
    let mut ws = Workspace::new();
    for i in 0..2_000u64 {
        ws.write(&format!("/d{}/f{i:06}", i % 20), content(i, 0))
            .unwrap();
    }
    let first = ws.commit(CommitOptions::new()).unwrap();
    let mut head = first.id();
    let mut store: HashMap<ObjectId, Vec<u8>> = first.into_objects().into_iter().collect();
    assert!(store.answers_in_memory(), "a plain map says so of itself");
    for turn in 1..=10u64 {
        let i = (turn * 997) % 2_000;
        ws.write(&format!("/d{}/f{i:06}", i % 20), content(i, turn))
            .unwrap();
        let want = lacking(&ws, head, &store);
        let source = Batching::new(&store, false);
        let batched = ws
            .clone()
            .commit(CommitOptions::new().parent(head).have_in(&source))
            .unwrap();
        assert_eq!(source.batches.get(), 1, "turn {turn}: one batch");
        assert_eq!(source.singles.get(), 0, "turn {turn}: nothing asked alone");
        assert_eq!(sorted_ids(&batched), want, "turn {turn}");
        assert!(!batched.is_complete());
        let in_memory = InMemory(Batching::new(&store, false));
        let c = ws
            .commit(CommitOptions::new().parent(head).have_in(&in_memory))
            .unwrap();
        assert_eq!(in_memory.0.batches.get(), 0, "turn {turn}: no batch");
        let singles = in_memory.0.singles.get();
        assert!(
            (1..=16).contains(&singles),
            "turn {turn}: asked {singles} times"
        );
        assert_eq!(c.id(), batched.id(), "turn {turn}");
        assert_eq!(sorted_ids(&c), want, "turn {turn}");
        head = c.id();
        store.extend(c.into_objects());
    }
}

#[test]
fn a_have_store_that_lacks_the_previous_trees_is_asked_beyond_the_batch() {
    let mut ws = Workspace::new();
    for i in 0..500u64 {
        ws.write(&format!("/d{}/f{i:06}", i % 5), content(i, 0))
            .unwrap();
    }
    let first = ws.commit(CommitOptions::new()).unwrap();
    let store: HashMap<ObjectId, Vec<u8>> = first
        .objects()
        .iter()
        .map(|(i, b)| (*i, b.to_vec()))
        .collect();
    // Two turns whose objects never reach the store: the third turn's previous roots
    // are not held, so the walk goes below what the probe asked.
    let mut head = first.id();
    for turn in 1..=3u64 {
        ws.write(
            &format!("/d{}/f{:06}", turn % 5, turn * 7),
            content(turn, turn),
        )
        .unwrap();
        let want = lacking(&ws, head, &store);
        let source = Batching::new(&store, false);
        let c = ws
            .commit(CommitOptions::new().parent(head).have_in(&source))
            .unwrap();
        assert_eq!(sorted_ids(&c), want, "turn {turn}");
        // What the store lacks plus the emitted objects restore the commit.
        let mut all = store.clone();
        all.extend(c.objects().iter().map(|(i, b)| (*i, b.to_vec())));
        let mut out = Workspace::new();
        let _ = out
            .checkout(c.id(), &all, CheckoutPolicy::Superset)
            .unwrap();
        assert_eq!(
            out.read(&format!("/d{}/f{:06}", turn % 5, turn * 7))
                .unwrap(),
            content(turn, turn)
        );
        head = c.id();
    }
}

#[test]
fn a_have_store_whose_batch_fails_holds_nothing_of_it() {
    let mut ws = Workspace::new();
    for i in 0..200u64 {
        ws.write(&format!("/d{}/f{i:06}", i % 4), content(i, 0))
            .unwrap();
    }
    let first = ws.commit(CommitOptions::new()).unwrap();
    let head = first.id();
    let store: HashMap<ObjectId, Vec<u8>> = first.into_objects().into_iter().collect();
    ws.write("/d1/f000001", content(1, 1)).unwrap();
    let source = Batching::new(&store, true);
    let c = ws
        .commit(CommitOptions::new().parent(head).have_in(&source))
        .unwrap();
    // Every object the probe asked about counts as not held, so the commit emits at
    // least what the store lacks, and its objects with the store restore it.
    let emitted = sorted_ids(&c);
    for id in lacking(&ws, head, &store) {
        assert!(emitted.binary_search(&id).is_ok(), "{id} missing");
    }
    let mut all = store.clone();
    all.extend(c.objects().iter().map(|(i, b)| (*i, b.to_vec())));
    let mut out = Workspace::new();
    let _ = out
        .checkout(c.id(), &all, CheckoutPolicy::Superset)
        .unwrap();
    assert_eq!(out.read("/d1/f000001").unwrap(), content(1, 1));
}
