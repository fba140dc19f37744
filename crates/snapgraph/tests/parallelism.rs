//! The threaded paths, forced on and off on any machine: ingest (small files shared out
//! across threads, large files cut in segments that re-synchronise with the serial cut
//! sequence) and checkout verification (chunks of large files re-hashed on several
//! threads). `Workspace::set_parallelism` decides, not the machine's CPU count, so a
//! 1-CPU run exercises the same code as a 2-CPU one.

mod common;

use common::{persist, pseudo_random, snap, Store};
use snapgraph::{
    BufferPool, CheckoutError, CheckoutPolicy, CommitOptions, ObjectError, ObjectId, ObjectKind,
    SnapshotGraph, Workspace,
};

const THREADS: [usize; 4] = [1, 2, 3, 8];

/// A workload over every threshold: many small files (shared out), files of a few
/// chunks, and files past the 4 MiB segment-cutting threshold, one of them with runs of
/// repeated bytes so cut points fall at the minimum and maximum chunk sizes.
fn workload(ws: &mut Workspace) {
    for i in 0..300 {
        ws.write(
            &format!("/small/f{i:03}"),
            pseudo_random(100 + i * 37, i as u64),
        )
        .unwrap();
    }
    ws.write("/mid.bin", pseudo_random(900_000, 5)).unwrap();
    ws.write("/large-a.bin", pseudo_random(9 << 20, 6)).unwrap();
    let mut b = pseudo_random(6 << 20, 7);
    for (k, byte) in b.iter_mut().enumerate() {
        if (k / 300_000) % 3 == 1 {
            *byte = 0;
        }
    }
    ws.write("/large-b.bin", b).unwrap();
    ws.set_state(pseudo_random(2 << 20, 8));
}

#[test]
fn ingest_gives_the_same_objects_on_every_thread_count() {
    let mut results = Vec::new();
    for threads in THREADS {
        let mut ws = Workspace::new();
        ws.set_parallelism(threads);
        assert_eq!(ws.parallelism(), threads);
        workload(&mut ws);
        let first = ws.commit(CommitOptions::new()).unwrap();
        let first_id = first.id();
        let mut ids: Vec<ObjectId> = first.objects().ids().copied().collect();
        ids.sort();
        // An edit in the middle of a large file goes through the partial re-chunk.
        let mut a = ws.read("/large-a.bin").unwrap().to_vec();
        a[5 << 20] ^= 0xff;
        ws.write("/large-a.bin", a).unwrap();
        let second = ws.commit(CommitOptions::new().parent(first_id)).unwrap();
        results.push((threads, first_id, ids, second.id()));
    }
    let (_, id, ids, second) = &results[0];
    for (threads, other_id, other_ids, other_second) in &results[1..] {
        assert_eq!(other_id, id, "first commit on {threads} threads");
        assert_eq!(
            other_ids, ids,
            "objects of the first commit on {threads} threads"
        );
        assert_eq!(other_second, second, "edit commit on {threads} threads");
    }
}

/// A workspace whose caller sets nothing uses the process's default (resolved only
/// once work is large enough to split) and builds the same objects as one told to use
/// a single thread; a setting survives a clone and overrides the default.
#[test]
fn a_workspace_left_at_its_default_uses_the_process_default() {
    let default = snapgraph::default_parallelism();
    assert!((1..=8).contains(&default), "default parallelism {default}");
    let mut ws = Workspace::new();
    assert_eq!(ws.parallelism(), default);
    workload(&mut ws);
    let by_default = ws.commit(CommitOptions::new()).unwrap().id();
    let mut one = Workspace::new();
    one.set_parallelism(1);
    assert_eq!(one.clone().parallelism(), 1);
    workload(&mut one);
    assert_eq!(one.commit(CommitOptions::new()).unwrap().id(), by_default);
    let mut fresh = Workspace::default();
    fresh.set_parallelism(3);
    assert_eq!(fresh.clone().parallelism(), 3);
    assert_eq!(Workspace::new().clone().parallelism(), default);
}

/// Every chunk of the large files, damaged in turn at a sample of positions (first,
/// last, and spread between, so each thread's share is hit): checkout reports it by id
/// on every thread count and leaves the workspace as it was.
#[test]
fn checkout_re_hashes_every_chunk_on_every_thread_count() {
    let mut ws = Workspace::new();
    ws.write("/large.bin", pseudo_random(3 << 20, 21)).unwrap();
    ws.write("/other.bin", pseudo_random(1_500_000, 22))
        .unwrap();
    ws.write("/note.txt", b"small").unwrap();
    let mut store = Store::new();
    let target = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    let expected = snap(&ws);
    let chunks: Vec<ObjectId> = SnapshotGraph::reachable(target, &store)
        .unwrap()
        .into_iter()
        .filter(|id| store[id][0] == ObjectKind::Chunk.byte())
        .collect();
    assert!(chunks.len() > 100, "{} chunks", chunks.len());
    let step = chunks.len() / 23;
    let victims: Vec<ObjectId> = chunks
        .iter()
        .step_by(step)
        .chain(chunks.last())
        .copied()
        .collect();

    let mut bystander = Workspace::new();
    bystander.write("/keep", b"precious").unwrap();
    let before = snap(&bystander);
    for threads in THREADS {
        bystander.set_parallelism(threads);
        for victim in &victims {
            let mut damaged = store.clone();
            let bytes = damaged.get_mut(victim).unwrap();
            let at = bytes.len() - 1;
            bytes[at] ^= 0x40;
            let err = bystander
                .checkout(target, &damaged, CheckoutPolicy::Force)
                .unwrap_err();
            assert!(
                matches!(&err, CheckoutError::Object(ObjectError::Corrupt { id, .. }) if id == victim),
                "on {threads} threads, chunk {victim}: {err:?}"
            );
            assert_eq!(snap(&bystander), before, "on {threads} threads");
        }
        // Two chunks exchanging their bytes: each is reported, never assembled.
        let (x, y) = (chunks[1], chunks[chunks.len() - 2]);
        let mut swapped = store.clone();
        let (bx, by) = (swapped[&x].clone(), swapped[&y].clone());
        swapped.insert(x, by);
        swapped.insert(y, bx);
        let err = bystander
            .checkout(target, &swapped, CheckoutPolicy::Force)
            .unwrap_err();
        assert!(
            matches!(&err, CheckoutError::Object(ObjectError::Corrupt { id, .. }) if *id == x || *id == y),
            "on {threads} threads, swapped chunks: {err:?}"
        );
        assert_eq!(snap(&bystander), before);

        // The undamaged store restores on this thread count.
        let mut fresh = Workspace::new();
        fresh.set_parallelism(threads);
        let restore = fresh
            .checkout(target, &store, CheckoutPolicy::Force)
            .unwrap();
        restore.verify(|_| None).unwrap();
        assert_eq!(snap(&fresh), expected, "on {threads} threads");
    }
}

/// The three ways to hand a file over (copied, taken over, shared) store the same
/// objects on every thread count, and a copied large file reads back as written.
#[test]
fn write_owned_and_shared_commit_as_write_does() {
    let data = pseudo_random(9 << 20, 31);
    let mut ids = Vec::new();
    for threads in THREADS {
        for how in 0..3 {
            let mut ws = Workspace::new();
            ws.set_parallelism(threads);
            match how {
                0 => ws.write("/f.bin", &data).unwrap(),
                1 => ws.write_owned("/f.bin", data.clone()).unwrap(),
                _ => ws.write_shared("/f.bin", data.as_slice().into()).unwrap(),
            }
            assert!(ws.read("/f.bin").unwrap() == &data[..], "{threads} {how}");
            ids.push(ws.commit(CommitOptions::new()).unwrap().id());
        }
    }
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    let mut ws = Workspace::new();
    let err = ws.write_owned("/", data).unwrap_err();
    assert!(
        matches!(err, snapgraph::FsError::IsADirectory { .. }),
        "{err:?}"
    );
}

/// With a buffer pool, `write` and a checkout from a lending map copy large files into
/// buffers earlier files gave back (a smaller file into a larger buffer, its stale
/// bytes cut off; a larger one after a smaller one), and nothing else changes: the
/// same ids, the same bytes, on one thread and on several.
#[test]
fn a_buffer_pool_is_reused_and_changes_nothing() {
    let (a, b) = (pseudo_random(9 << 20, 41), pseudo_random(6 << 20, 42));
    for threads in [1, 2, 3] {
        let pool = BufferPool::new(64 << 20);
        let mut store = Store::new();
        for data in [&a, &b, &a] {
            let mut plain = Workspace::new();
            plain.set_parallelism(threads);
            plain.write("/f.bin", data).unwrap();
            let id = plain.commit(CommitOptions::new()).unwrap().id();
            let mut ws = Workspace::new();
            ws.set_parallelism(threads);
            ws.set_buffer_pool(Some(pool.clone()));
            assert!(ws.buffer_pool().is_some());
            let held = pool.held_bytes();
            ws.write("/f.bin", data).unwrap();
            assert!(ws.read("/f.bin").unwrap() == &data[..], "{threads}");
            if held > 0 {
                assert!(pool.held_bytes() < held, "{threads}: no buffer taken");
            }
            assert_eq!(
                persist(&mut store, ws.commit(CommitOptions::new()).unwrap()),
                id
            );
            drop(ws);
            assert!(pool.held_bytes() >= data.len(), "{threads}: not given back");
            // A checkout from the lending map takes a buffer too.
            let held = pool.held_bytes();
            let mut out = Workspace::new();
            out.set_parallelism(threads);
            out.set_buffer_pool(Some(pool.clone()));
            out.checkout(id, &store, CheckoutPolicy::default())
                .unwrap()
                .verify(|_| None)
                .unwrap();
            assert!(out.read("/f.bin").unwrap() == &data[..], "{threads}");
            assert!(
                pool.held_bytes() < held,
                "{threads}: checkout took no buffer"
            );
            // A clone shares the bytes: they go back when both are dropped.
            let clone = out.clone();
            drop(out);
            assert!(clone.read("/f.bin").unwrap() == &data[..], "{threads}");
            drop(clone);
            assert!(pool.held_bytes() >= held, "{threads}");
        }
        assert!(pool.held_bytes() <= pool.max_bytes());
        pool.clear();
        assert_eq!(pool.held_bytes(), 0);
    }
}

/// On several threads, chunks are fetched a window at a time while earlier windows
/// are verified: a chunk missing from a late window is reported by id, and a corrupt
/// chunk before it is reported first (errors come in the order of the file).
#[test]
fn checkout_reports_the_first_bad_chunk_in_order_while_reading_ahead() {
    let mut ws = Workspace::new();
    ws.write("/large.bin", pseudo_random(6 << 20, 41)).unwrap();
    let mut store = Store::new();
    let target = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    // The chunks in the file's order: each body found by the cut points.
    let by_body: std::collections::HashMap<&[u8], ObjectId> = store
        .iter()
        .filter(|(_, stored)| stored[0] == ObjectKind::Chunk.byte())
        .map(|(id, stored)| (&stored[2..], *id))
        .collect();
    let data = ws.read("/large.bin").unwrap().to_vec();
    let mut start = 0;
    let order: Vec<ObjectId> = snapgraph::chunk::cut_points(&data)
        .into_iter()
        .map(|end| {
            let id = by_body[&data[start..end]];
            start = end;
            id
        })
        .collect();
    let (early, late) = (order[10], order[order.len() - 5]);
    for threads in THREADS {
        let mut missing = store.clone();
        missing.remove(&late);
        let mut fresh = Workspace::new();
        fresh.set_parallelism(threads);
        let err = fresh
            .checkout(target, &missing, CheckoutPolicy::Force)
            .unwrap_err();
        assert!(
            matches!(&err, CheckoutError::Object(ObjectError::NotFound { id }) if *id == late),
            "on {threads} threads: {err:?}"
        );
        let at = missing[&early].len() - 1;
        missing.get_mut(&early).unwrap()[at] ^= 1;
        let err = fresh
            .checkout(target, &missing, CheckoutPolicy::Force)
            .unwrap_err();
        assert!(
            matches!(&err, CheckoutError::Object(ObjectError::Corrupt { id, .. }) if *id == early),
            "on {threads} threads: {err:?}"
        );
    }
}

mod one_pass_write {
    use super::*;
    use proptest::prelude::*;

    /// Large data of random size (over the 4 MiB segment threshold, so `write` on
    /// several threads cuts, hashes and copies in one pass), pseudo-random or with
    /// runs of one byte (cuts at the minimum and maximum chunk sizes, segments that
    /// meet late).
    fn large() -> impl Strategy<Value = Vec<u8>> {
        ((4usize << 20)..(7 << 20), any::<u64>(), any::<bool>()).prop_map(|(len, seed, runs)| {
            let mut d = pseudo_random(len, seed);
            if runs {
                let period = 10_000 + (seed as usize % 400_000);
                for (k, byte) in d.iter_mut().enumerate() {
                    if (k / period) % 2 == 1 {
                        *byte = 0;
                    }
                }
            }
            d
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(6))]

        /// `write` of a large new file on several threads (with and without a pool
        /// whose buffers hold other bytes) reads back as written, commits and hands
        /// over as on one thread, and an edit written over it after the commit (or
        /// before it) re-chunks to the one-thread ids; the commit round-trips
        /// through a checkout.
        #[test]
        fn one_pass_write_round_trips(
            data in large(),
            threads in 2usize..5,
            pooled in any::<bool>(),
            edit_at in any::<u32>(),
            edit_before_commit in any::<bool>(),
        ) {
            let pool = BufferPool::new(64 << 20);
            if pooled {
                // A stale buffer of another file's bytes, for the write to take.
                let mut warm = Workspace::new();
                warm.set_buffer_pool(Some(pool.clone()));
                warm.set_parallelism(threads);
                warm.write("/w.bin", vec![0xEE; data.len()]).unwrap();
                drop(warm);
                prop_assert!(pool.held_bytes() >= data.len());
            }
            let mut edited = data.clone();
            let at = edit_at as usize % edited.len();
            edited[at] ^= 0x5A;
            let run = |threads: usize, pool: Option<&BufferPool>| {
                let mut ws = Workspace::new();
                ws.set_parallelism(threads);
                ws.set_buffer_pool(pool.cloned());
                ws.write("/dir/f.bin", &data).unwrap();
                assert!(ws.read("/dir/f.bin").unwrap() == &data[..]);
                let mut store = Store::new();
                if edit_before_commit {
                    ws.write("/dir/f.bin", &edited).unwrap();
                }
                let first = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
                ws.write("/dir/f.bin", &edited).unwrap();
                let second =
                    persist(&mut store, ws.commit(CommitOptions::new().parent(first)).unwrap());
                assert!(ws.read("/dir/f.bin").unwrap() == &edited[..]);
                // Handed over before the commit: the same commit.
                let mut handed = Workspace::new();
                handed.set_parallelism(threads);
                handed.set_buffer_pool(pool.cloned());
                handed.write("/dir/f.bin", &data).unwrap();
                let objects = handed.hand_over(None);
                let commit = handed.commit(CommitOptions::new()).unwrap();
                (first, second, commit.id(), store, objects.len() + commit.object_count())
            };
            let (first, second, handed, store, handed_objects) = run(threads, pooled.then_some(&pool));
            let (first1, second1, handed1, _, handed_objects1) = run(1, None);
            prop_assert_eq!(first, first1);
            prop_assert_eq!(second, second1);
            prop_assert_eq!(handed, handed1);
            if !edit_before_commit {
                prop_assert_eq!(handed, first);
            }
            prop_assert_eq!(handed_objects, handed_objects1);
            let mut out = Workspace::new();
            out.set_parallelism(threads);
            out.checkout(second, &store, CheckoutPolicy::default())
                .unwrap()
                .verify(|_| None)
                .unwrap();
            prop_assert!(out.read("/dir/f.bin").unwrap() == &edited[..]);
        }
    }
}
