//! Sync, garbage collection, verification and fault injection.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use snapgraph::{ObjectId, SnapshotGraph, Workspace};
use snapgraph_store::fault::{Calls, Fault, FaultyStore, Injected};
use snapgraph_store::sqlite::SqliteStore;

mod common;
use snapgraph_store::{
    gc, sync, sync_with, verify, MemoryStore, ObjectStore, RefStore, Repo, RepoCommitOptions,
    Store, StoreError, SyncError, SyncOptions, WalkProblem,
};

fn seed(ws: &mut Workspace, files: usize) {
    for i in 0..files {
        let body: Vec<u8> = (0..4096)
            .map(|j| (i * 131 + j * 17 + j / 7) as u8)
            .collect();
        ws.write(&format!("/dir{}/file{i}.dat", i % 20), body)
            .unwrap();
    }
}

fn turn(ws: &mut Workspace, t: usize) {
    let body: Vec<u8> = (0..4096).map(|j| (t * 7 + j * 13) as u8 ^ 0x5a).collect();
    ws.write(&format!("/dir{}/file{}.dat", t % 20, t % 200), body)
        .unwrap();
}

fn history_objects(store: &dyn Store, name: &str) -> usize {
    let tip = store.get_ref(name).unwrap().unwrap();
    SnapshotGraph::reachable_history(tip, &store).unwrap().len()
}

#[test]
fn sync_sends_exactly_what_is_missing() {
    let src = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    seed(&mut ws, 200);
    src.commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    for t in 0..10 {
        turn(&mut ws, t);
        src.commit(&mut ws, "main", RepoCommitOptions::default())
            .unwrap();
    }
    let dst = MemoryStore::new();
    let first = sync(src.store(), &dst, "heads/main").unwrap();
    assert_eq!(first.objects, history_objects(src.store(), "heads/main"));
    assert_eq!(first.objects, dst.len());
    assert_eq!(
        dst.get_ref("heads/main").unwrap(),
        src.branch("main").unwrap()
    );
    assert!(verify(&dst, true).unwrap().is_clean());

    // Nothing new: nothing sent, not even a query.
    let again = sync(src.store(), &dst, "heads/main").unwrap();
    assert_eq!((again.objects, again.queries), (0, 0));

    // Five new turns: exactly their new objects, a few queries per level.
    let mut written = 0;
    for t in 10..15 {
        turn(&mut ws, t);
        written += src
            .commit(&mut ws, "main", RepoCommitOptions::default())
            .unwrap()
            .objects_written;
    }
    let inc = sync(src.store(), &dst, "heads/main").unwrap();
    assert_eq!(inc.objects, written);
    assert!(inc.queries <= inc.levels + 1, "{inc:?}");
    assert!(
        inc.examined < 200,
        "examined {} objects for 5 turns",
        inc.examined
    );
    assert_eq!(dst.len(), src.store().len());
    assert!(verify(&dst, true).unwrap().is_clean());
}

#[test]
fn sync_refuses_to_drop_commits_unless_forced() {
    let repo = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    ws.write("/a", b"1").unwrap();
    repo.commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    let dst_repo = Repo::new(MemoryStore::new());
    sync(repo.store(), dst_repo.store(), "heads/main").unwrap();

    // Both sides move on independently.
    ws.write("/a", b"src").unwrap();
    repo.commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    let mut other = dst_repo.checkout("main").unwrap();
    other.write("/a", b"dst").unwrap();
    let dst_tip = dst_repo
        .commit(&mut other, "main", RepoCommitOptions::default())
        .unwrap();

    match sync(repo.store(), dst_repo.store(), "heads/main") {
        Err(SyncError::NotFastForward { destination, .. }) => assert_eq!(destination, dst_tip.id),
        other => panic!("expected NotFastForward, got {other:?}"),
    }
    assert_eq!(dst_repo.branch("main").unwrap(), Some(dst_tip.id));
    let forced = sync_with(
        repo.store(),
        dst_repo.store(),
        "heads/main",
        &SyncOptions {
            force: true,
            ..SyncOptions::default()
        },
    )
    .unwrap();
    assert_eq!(forced.to, repo.branch("main").unwrap());
    assert!(matches!(
        sync(repo.store(), dst_repo.store(), "heads/none"),
        Err(SyncError::UnknownRef { .. })
    ));
}

#[test]
fn an_interrupted_sync_resumes_and_never_exposes_a_partial_ref() {
    let src = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    seed(&mut ws, 100);
    ws.write(
        "/big.bin",
        (0..3_000_000u32)
            .map(|i| i.wrapping_mul(2654435761) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    src.commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    let total = history_objects(src.store(), "heads/main");

    let probe = FaultyStore::new(MemoryStore::new(), Calls::All);
    sync(src.store(), &probe, "heads/main").unwrap();
    let calls = probe.calls();
    assert!(calls > 5);
    for n in 1..=calls {
        let dst = FaultyStore::new(MemoryStore::new(), Calls::All);
        dst.fail_at(n);
        let err = sync(src.store(), &dst, "heads/main").expect_err("the fault must surface");
        assert!(
            matches!(
                err,
                SyncError::Store {
                    source: StoreError::Injected { .. },
                    ..
                }
            ),
            "call {n}: {err}"
        );
        // The ref never points at an incomplete closure.
        let report = verify(dst.inner(), false).unwrap();
        assert!(report.is_clean(), "call {n}: {:?}", report.problems);
        let held = dst.inner().len();
        let retry = sync(src.store(), &dst, "heads/main").unwrap();
        assert_eq!(
            retry.objects + held,
            total,
            "call {n}: the retry re-sent work"
        );
        assert!(verify(dst.inner(), true).unwrap().is_clean());
    }
}

/// One step of a scenario touching every write path: commits, fork, snapshot, branch
/// deletion, GC.
fn fault_step<S: Store>(
    repo: &Repo<&FaultyStore<S>>,
    ws: &mut Workspace,
    step: usize,
) -> Result<(), String> {
    let r = match step {
        0 => repo
            .commit(ws, "main", RepoCommitOptions::message("base"))
            .map(|_| ()),
        1..=3 => {
            turn(ws, step);
            repo.commit(ws, "main", RepoCommitOptions::default())
                .map(|_| ())
        }
        4 => repo.fork("side", "main").map(|_| ()),
        5 => repo.tag("t", "main", BTreeMap::new()).map(|_| ()),
        6 => repo
            .branch("side")
            .and_then(|tip| tip.map_or(Ok(()), |id| repo.delete_branch("side", id))),
        _ => gc(repo.store(), &[]).map(|_| ()).map_err(Into::into),
    };
    r.map_err(|e| e.to_string())
}
const FAULT_STEPS: usize = 8;

/// Runs the scenario on a fresh store from `make`, failing counted call `fail` (none:
/// a clean run) with `fault`; each failed step is retried once. Returns the counted
/// calls, the final tip, whether a failure reached the caller, and what was injected.
fn fault_run<S: Store>(
    make: &dyn Fn() -> S,
    counted: Calls,
    fault: Fault,
    fail: Option<u64>,
) -> (u64, ObjectId, bool, Option<Injected>) {
    let store = FaultyStore::with_fault(make(), counted, fault);
    let repo = Repo::new(&store);
    let mut ws = Workspace::new();
    seed(&mut ws, 60);
    match fail {
        Some(n) => store.fail_at(n),
        None => store.reset(),
    }
    let mut failed = false;
    for step in 0..FAULT_STEPS {
        let mut attempt = ws.clone();
        // A step is retried after a failure with the workspace as the failed call
        // left it (Repo::commit leaves it unchanged on error).
        match fault_step(&repo, &mut attempt, step) {
            Ok(()) => ws = attempt,
            Err(e) => {
                assert!(e.contains("injected"), "step {step}: {e}");
                failed = true;
                // (A torn ref batch completes on the store's next call, as a journal
                // rolled forward does: look through the wrapper to trigger it.)
                let _ = store.get_ref("heads/main");
                let report = verify(store.inner(), false).unwrap();
                assert!(
                    report.is_clean(),
                    "after {fault:?} at {fail:?}: {:?}",
                    report.problems
                );
                let mut retry = ws.clone();
                fault_step(&repo, &mut retry, step).unwrap_or_else(|e| {
                    panic!("retry of step {step} after {fault:?} at {fail:?}: {e}")
                });
                ws = retry;
            }
        }
    }
    assert!(fail.is_some() || !failed);
    let report = verify(store.inner(), true).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.unreachable, 0, "GC ran last");
    (
        store.calls(),
        repo.branch("main").unwrap().unwrap(),
        failed,
        store.injected(),
    )
}

/// Fails every counted call in turn, with every kind of fault, over `make`'s store:
/// each fault fires, the outcome equals the clean run's, and a fault that did not
/// reach the caller was a read the engine is documented to treat as "absent" (a
/// failed presence question during a commit: the object is written again), never a
/// write.
fn every_fault_converges<S: Store>(make: &dyn Fn() -> S, faults: &[(Calls, Fault)]) {
    for &(counted, fault) in faults {
        let (calls, tip, _, _) = fault_run(make, counted, fault, None);
        // At least one counted call a step (one write a step where commits, forks
        // and snapshots write objects and refs at once).
        assert!(calls >= FAULT_STEPS as u64, "{calls} calls");
        let mut surfaced = 0;
        for n in 1..=calls {
            let (made, got, failed, injected) = fault_run(make, counted, fault, Some(n));
            let injected = injected.unwrap_or_else(|| panic!("{fault:?} at call {n} never fired"));
            assert_eq!(
                got, tip,
                "{fault:?} at call {n} ({}) changed the outcome",
                injected.op
            );
            let presence_read = !injected.write && ["has_many", "get_many"].contains(&injected.op);
            let retried_in_place = made == calls + 1;
            assert!(
                failed || presence_read || retried_in_place,
                "{fault:?} at call {n} ({}) was swallowed: {made} calls against {calls}",
                injected.op
            );
            surfaced += usize::from(failed);
        }
        eprintln!("{fault:?} over {counted:?}: {surfaced} of {calls} faults surfaced, the rest were harmless");
    }
}

/// Faults that reach the wrapped store: half-done and lost-reply writes. (A plain
/// failure never reaches it, so it is run once, over the memory store.)
const WRITE_FAULTS: [(Calls, Fault); 2] = [
    (Calls::Writes, Fault::Torn),
    (Calls::Writes, Fault::LostReply),
];

#[test]
fn every_failed_call_converges_on_the_memory_store() {
    every_fault_converges(&MemoryStore::new, &[(Calls::All, Fault::Fail)]);
    every_fault_converges(&MemoryStore::new, &WRITE_FAULTS);
}

/// Runs [`every_fault_converges`] over fresh stores `open` makes under one temporary
/// directory, one path per run.
fn every_fault_converges_on_disk<S: Store>(open: fn(std::path::PathBuf) -> S) {
    let dir = tempfile::tempdir().unwrap();
    let n = std::sync::atomic::AtomicUsize::new(0);
    let make = || {
        open(
            dir.path()
                .join(format!("s{}", n.fetch_add(1, Ordering::Relaxed))),
        )
    };
    every_fault_converges(&make, &WRITE_FAULTS);
}

#[cfg(feature = "sqlite")]
#[test]
fn every_failed_call_converges_on_sqlite() {
    every_fault_converges_on_disk(|p| snapgraph_store::sqlite::SqliteStore::open(p).unwrap());
}

#[cfg(feature = "dir")]
#[test]
fn every_failed_call_converges_on_the_directory_store() {
    every_fault_converges_on_disk(|p| snapgraph_store::dir::DirStore::open(p).unwrap());
}

#[test]
fn gc_keeps_history_and_pins_and_frees_the_rest() {
    let repo = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    seed(&mut ws, 50);
    let base = repo
        .commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    ws.write("/pinned.bin", vec![1u8; 50_000]).unwrap();
    let mut pinned_ws = ws.clone();
    let pinned = repo
        .commit(&mut pinned_ws, "pin-me", RepoCommitOptions::default())
        .unwrap();
    repo.delete_branch("pin-me", pinned.id).unwrap();
    ws.write("/garbage.bin", vec![2u8; 50_000]).unwrap();
    let garbage = repo
        .commit(&mut ws.clone(), "junk", RepoCommitOptions::default())
        .unwrap();
    repo.delete_branch("junk", garbage.id).unwrap();

    let report = gc(repo.store(), &[pinned.id]).unwrap();
    assert!(report.deleted.contains(&garbage.id));
    assert!(!report.deleted.contains(&pinned.id));
    assert!(report.problems.is_empty());
    assert!(repo.checkout(&pinned.id.to_hex()).is_ok());
    assert!(repo.checkout(&base.id.to_hex()).is_ok());
    assert_eq!(
        repo.store().has_many(&[garbage.id]).unwrap(),
        vec![garbage.id]
    );
    let v = verify(repo.store(), true).unwrap();
    assert!(v.is_clean() && v.unreachable == report.kept - v.reachable);

    // Idempotent: a second run deletes nothing.
    assert!(gc(repo.store(), &[pinned.id]).unwrap().deleted.is_empty());
}

/// Garbage (objects no ref reaches) with exactly `content` as a file: the commit
/// of a branch made and deleted.
fn garbage<S: Store>(repo: &Repo<S>, content: &[u8]) -> ObjectId {
    let mut scratch = Workspace::new();
    scratch.write("/x", content).unwrap();
    let g = repo
        .commit(&mut scratch, "scratch", RepoCommitOptions::default())
        .unwrap();
    repo.delete_branch("scratch", g.id).unwrap();
    g.id
}

/// Commits `ws` onto `main` until it is published, its closure whole. A commit
/// whose reused objects were swept before its branch moved is refused as `Swept`
/// with nothing published: the workspace is checked out again, its files written
/// anew, and the commit tried again.
fn commit_until_published<S: Store>(repo: &Repo<S>, ws: &mut Workspace, round: usize) -> ObjectId {
    loop {
        match repo.commit(ws, "main", RepoCommitOptions::default()) {
            Ok(c) => {
                let mut plan = snapgraph::graph::reachable::CheckoutPlan::new(c.id);
                let m = plan.missing(repo.store()).unwrap();
                assert!(
                    m.is_empty(),
                    "round {round}: published {} misses {m:?}",
                    c.id
                );
                return c.id;
            }
            Err(snapgraph_store::RepoError::Swept { .. }) => {
                let files = ws.clone();
                *ws = repo.checkout("main").unwrap();
                for (path, meta) in files.walk() {
                    if meta.kind == snapgraph::EntryKind::File {
                        ws.write(&path, files.read(&path).unwrap()).unwrap();
                    }
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn gc_never_deletes_what_a_concurrent_commit_reuses() {
    // The dangerous case: the writer's new content equals garbage (objects no ref
    // reaches), so its commit reuses those objects instead of writing them, while
    // collections sweep garbage as fast as they can.
    let repo = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    seed(&mut ws, 40);
    repo.commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    let stop = AtomicBool::new(false);
    let mut published = Vec::new();
    std::thread::scope(|s| {
        let collector = s.spawn(|| {
            let (mut runs, mut deleted) = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                deleted += gc(repo.store(), &[]).unwrap().deleted.len();
                runs += 1;
            }
            eprintln!("{runs} collections deleted {deleted} objects");
            runs
        });
        for round in 0..150usize {
            let content: Vec<u8> = (0..20_000).map(|j| (j * 7 + round * 13) as u8).collect();
            garbage(&repo, &content);
            // The writer reuses it.
            ws.write(&format!("/dir{}/reuse.dat", round % 5), &content)
                .unwrap();
            published.push(commit_until_published(&repo, &mut ws, round));
        }
        stop.store(true, Ordering::Relaxed);
        assert!(collector.join().unwrap() > 0);
    });
    let report = verify(repo.store(), true).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let history = repo.log("main", usize::MAX).unwrap();
    for id in &published {
        assert!(history.iter().any(|(h, _)| h == id), "commit {id} lost");
        assert!(repo.checkout(&id.to_hex()).is_ok());
    }
}

#[test]
fn verify_reports_missing_and_corrupt_objects() {
    let repo = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    seed(&mut ws, 30);
    ws.write("/big.bin", vec![3u8; 200_000]).unwrap();
    let c = repo
        .commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    assert!(verify(repo.store(), true).unwrap().is_clean());
    let commit = SnapshotGraph::commit(c.id, repo.store()).unwrap();
    // Corrupt the root tree; delete some chunk.
    repo.store().corrupt(commit.tree, b"garbage".to_vec());
    let report = verify(repo.store(), false).unwrap();
    assert!(report
        .problems
        .iter()
        .any(|p| matches!(p, WalkProblem::Invalid { id, .. } if *id == commit.tree)));
    assert_eq!(report.broken_refs, vec!["heads/main".to_string()]);

    let repo2 = Repo::new(MemoryStore::new());
    let mut ws2 = Workspace::new();
    ws2.write(
        "/big.bin",
        (0..300_000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>(),
    )
    .unwrap();
    let c2 = repo2
        .commit(&mut ws2, "main", RepoCommitOptions::default())
        .unwrap();
    let objects = SnapshotGraph::reachable(c2.id, repo2.store()).unwrap();
    let victim = objects[0];
    repo2.store().delete_many(&[victim]).unwrap();
    let report = verify(repo2.store(), false).unwrap();
    assert!(report
        .problems
        .iter()
        .any(|p| matches!(p, WalkProblem::Missing { id, .. } if *id == victim)));
    assert!(!report.is_clean());
}

/// `Repo::commit_new_branch` (the CLI's `unpack`) against a concurrent collector:
/// each new branch's content equals garbage, so its commit reuses objects a sweep
/// wants to delete; under the writer's lease no branch may name a swept object.
#[test]
fn a_new_branch_from_an_unrelated_workspace_survives_a_concurrent_collector() {
    let repo = Repo::new(MemoryStore::new());
    let stop = AtomicBool::new(false);
    let mut created = Vec::new();
    std::thread::scope(|s| {
        let collector = s.spawn(|| {
            let mut runs = 0;
            while !stop.load(Ordering::Relaxed) {
                gc(repo.store(), &[]).unwrap();
                runs += 1;
            }
            runs
        });
        for round in 0..120usize {
            let content: Vec<u8> = (0..20_000).map(|j| (j * 11 + round * 5) as u8).collect();
            let fill = |ws: &mut Workspace| {
                ws.write("/data/blob", &content).unwrap();
                ws.write(&format!("/round{}", round % 4), round.to_string())
                    .unwrap();
            };
            let mut scratch = Workspace::new();
            fill(&mut scratch);
            let g = repo
                .commit(&mut scratch, "scratch", RepoCommitOptions::default())
                .unwrap();
            repo.delete_branch("scratch", g.id).unwrap();
            let branch = format!("unpacked-{round}");
            loop {
                let mut ws = Workspace::new(); // no history here, like an unpacked snapshot
                fill(&mut ws);
                match repo.commit_new_branch(&mut ws, &branch, RepoCommitOptions::default()) {
                    Ok(c) => {
                        assert_eq!(c.id, g.id, "same content, no parents: same commit");
                        let mut plan = snapgraph::graph::reachable::CheckoutPlan::new(c.id);
                        let m = plan.missing(repo.store()).unwrap();
                        assert!(m.is_empty(), "round {round}: {branch} misses {m:?}");
                        created.push((branch, c.id));
                        break;
                    }
                    // Swept before the branch could be created: nothing published.
                    Err(snapgraph_store::RepoError::Swept { .. }) => {
                        assert_eq!(repo.branch(&branch).unwrap(), None);
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        assert!(collector.join().unwrap() > 0);
    });
    let report = verify(repo.store(), true).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    for (branch, id) in &created {
        assert_eq!(repo.branch(branch).unwrap(), Some(*id));
        assert!(repo.checkout(branch).is_ok());
    }
}

/// A writer killed while waiting for a sweep leaves `snapgraph/wait/ID`: a
/// collection waits for it only `wait_grace` (its value never changes), removes it,
/// and collects; a live waiter renews its value, so it is waited for (and kept)
/// for as long as it waits, within the lease wait.
#[test]
fn a_dead_waiters_wait_expires_and_a_live_one_is_waited_for() {
    let store = MemoryStore::new();
    let repo = Repo::new(&store);
    let mut ws = Workspace::new();
    seed(&mut ws, 3);
    repo.commit(&mut ws, "main", RepoCommitOptions::message("base"))
        .unwrap();
    let dead = format!("{}dead", gc::WAITERS);
    let value = ObjectId::hash_stored(b"a waiter that died");
    store
        .compare_and_swap_ref(&dead, None, value, "wait")
        .unwrap();
    let options = gc::GcOptions {
        lease_wait: std::time::Duration::from_secs(30),
        wait_grace: std::time::Duration::from_millis(300),
        ..Default::default()
    };
    let started = std::time::Instant::now();
    gc::collect_with(&store, &options).unwrap();
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(10),
        "waited {took:?} for a dead waiter (lease wait 30 s)"
    );
    assert_eq!(
        store.get_ref(&dead).unwrap(),
        None,
        "the dead wait is removed"
    );

    // A live waiter renews its wait every 100 ms for about 1.2 s, then goes.
    let live = format!("{}live", gc::WAITERS);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let first = ObjectId::hash_stored(b"live 0");
        store
            .compare_and_swap_ref(&live, None, first, "wait")
            .unwrap();
        let (store, live, done) = (&store, &live, &done);
        let waiter = s.spawn(move || {
            let mut current = first;
            for beat in 1..=12u32 {
                std::thread::sleep(std::time::Duration::from_millis(100));
                let next = ObjectId::hash_stored(&beat.to_le_bytes());
                store
                    .compare_and_swap_ref(live, Some(current), next, "wait goes on")
                    .expect("a renewed wait is not removed");
                current = next;
            }
            done.store(true, Ordering::SeqCst);
            store.delete_ref(live, current, "wait ends").unwrap();
        });
        let started = std::time::Instant::now();
        gc::collect_with(store, &options).unwrap();
        assert!(
            done.load(Ordering::SeqCst),
            "the collection swept while a live writer waited ({:?})",
            started.elapsed()
        );
        waiter.join().unwrap();
    });
}

/// A writer waiting for a sweep renews its wait every `WAIT_BEAT` (so collections
/// can tell it from a dead one) and turns it into its lease when the sweep ends.
#[test]
fn a_waiting_writer_renews_its_wait() {
    let store = MemoryStore::new();
    let marker = ObjectId::hash_stored(b"a sweep");
    store
        .compare_and_swap_ref(gc::GC_SWEEP, None, marker, "sweep")
        .unwrap();
    std::thread::scope(|s| {
        let writer = s.spawn(|| gc::Lease::acquire(&store, std::time::Duration::from_secs(20)));
        let mut values = std::collections::HashSet::new();
        let started = std::time::Instant::now();
        while started.elapsed() < gc::WAIT_BEAT * 5 / 2 {
            if let [(_, value)] = store.list_refs(gc::WAITERS).unwrap()[..] {
                values.insert(value);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(values.len() >= 2, "the wait was not renewed: {values:?}");
        store
            .delete_ref(gc::GC_SWEEP, marker, "sweep ends")
            .unwrap();
        let lease = writer
            .join()
            .unwrap()
            .unwrap()
            .expect("the lease, once the sweep ended");
        assert!(store.list_refs(gc::WAITERS).unwrap().is_empty());
        assert_eq!(store.list_refs(gc::LEASES).unwrap().len(), 1);
        lease.release(&store);
    });
}

// Optimistic writers (`snapgraph_store::gc`, "Optimistic writers"): on a store that
// writes objects and refs at once, a small commit and a snapshot take no lease; a
// sweep that begins before their one write sends them down the lease path.

/// Every object the store holds has its references in the store too (the invariant
/// commits and syncs rely on to skip whole subtrees), parents included.
fn every_closure_held(store: &dyn Store) {
    let ids = common::all_ids(store);
    let held: std::collections::HashSet<ObjectId> = ids.iter().copied().collect();
    for chunk in ids.chunks(256) {
        for (id, bytes) in chunk
            .iter()
            .zip(ObjectStore::get_many(store, chunk).unwrap())
        {
            let Some(bytes) = bytes else { continue };
            let (_, refs) = snapgraph::object::references(id, &bytes).unwrap();
            for (r, _) in refs {
                assert!(held.contains(&r), "{id} is held without {r}");
            }
        }
    }
}

fn leases(store: &dyn Store) -> usize {
    store.list_refs("snapgraph/lease/").unwrap().len()
}

/// Two handles on one store: a file opened twice, or one memory store shared.
fn two_handles(on_disk: bool) -> (Arc<dyn Store>, Arc<dyn Store>, Option<tempfile::TempDir>) {
    if on_disk {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let a: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
        let b: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
        (a, b, Some(dir))
    } else {
        let m: Arc<dyn Store> = Arc::new(MemoryStore::new());
        (Arc::clone(&m), m, None)
    }
}

fn a_small_commit_takes_no_lease_on(on_disk: bool) {
    let (store, other, _dir) = two_handles(on_disk);
    assert!(store.writes_objects_with_refs());
    let repo = Repo::new(Arc::clone(&store));
    let mut ws = Workspace::new();
    seed(&mut ws, 40);
    repo.commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&calls);
    turn(&mut ws, 1);
    let c = repo
        .commit(
            &mut ws,
            "main",
            RepoCommitOptions::default()
                .on_progress(move |p| seen.lock().unwrap().push((p.objects_done, leases(&*other)))),
        )
        .unwrap();
    // Reported before and after its one write, no lease at either point.
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls.iter().all(|&(_, l)| l == 0), "{calls:?}");
    assert!(c.objects_written > 0 && c.bytes_written > 0, "{c:?}");
    assert_eq!(repo.store().get_ref("heads/main").unwrap(), Some(c.id));
    // A snapshot: no lease left behind either, and its commit object is held.
    let t = repo.tag("v1", "main", BTreeMap::new()).unwrap();
    assert_eq!(repo.store().get_ref("tags/v1").unwrap(), Some(t.id));
    assert_eq!(leases(&*store), 0);
    assert!(verify(&*store, true).unwrap().is_clean());
    every_closure_held(&*store);
}

#[test]
fn a_small_commit_takes_no_lease() {
    a_small_commit_takes_no_lease_on(false);
    a_small_commit_takes_no_lease_on(true);
}

fn a_sweep_before_the_write_sends_the_commit_under_a_lease_on(on_disk: bool) {
    let (store, other, _dir) = two_handles(on_disk);
    let repo = Repo::new(Arc::clone(&store));
    let mut ws = Workspace::new();
    seed(&mut ws, 40);
    repo.commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    // A collection that runs in full (its sweep begins and ends) when the commit
    // first reports, that is after the commit looked at the store and before it
    // writes: the token it read has moved, so its guarded write fails and the
    // commit goes round under a lease, whose first report sees that lease.
    let collect_once = |other: Arc<dyn Store>, calls: Arc<std::sync::Mutex<Vec<usize>>>| {
        move |_: snapgraph_store::CommitProgress| {
            let mut calls = calls.lock().unwrap();
            if calls.is_empty() {
                gc(&*other, &[]).unwrap();
            }
            calls.push(leases(&*other));
        }
    };

    // 1. Nothing the commit reuses is garbage: published under the lease.
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    turn(&mut ws, 1);
    let c = repo
        .commit(
            &mut ws,
            "main",
            RepoCommitOptions::default()
                .on_progress(collect_once(Arc::clone(&other), Arc::clone(&calls))),
        )
        .unwrap();
    let calls = calls.lock().unwrap().clone();
    assert_eq!(
        calls.first(),
        Some(&0),
        "the first try took no lease: {calls:?}"
    );
    assert!(
        calls.iter().skip(1).any(|&l| l == 1),
        "the second held one: {calls:?}"
    );
    assert_eq!(repo.store().get_ref("heads/main").unwrap(), Some(c.id));
    assert_eq!(leases(&*store), 0);

    // 2. The commit reuses garbage, which that collection deletes: refused as
    //    swept, nothing published, nothing left half-held; written again, it goes.
    let content: Vec<u8> = (0..20_000).map(|j| (j * 7 + 3) as u8).collect();
    let junk: std::collections::HashSet<ObjectId> =
        gc::live_set(repo.store(), &[garbage(&repo, &content)])
            .unwrap()
            .into_iter()
            .collect();
    ws.write("/dir3/reuse.dat", &content).unwrap();
    let before = repo.store().get_ref("heads/main").unwrap();
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let refused = repo.commit(
        &mut ws,
        "main",
        RepoCommitOptions::default()
            .on_progress(collect_once(Arc::clone(&other), Arc::clone(&calls))),
    );
    match refused {
        Err(snapgraph_store::RepoError::Swept { missing, .. }) => {
            assert!(!missing.is_empty());
            assert!(missing.iter().all(|m| junk.contains(m)), "{missing:?}");
        }
        other => panic!("expected Swept, got {other:?}"),
    }
    assert_eq!(repo.store().get_ref("heads/main").unwrap(), before);
    assert_eq!(leases(&*store), 0);
    every_closure_held(&*store);
    let mut fresh = repo.checkout("main").unwrap();
    fresh.write("/dir3/reuse.dat", &content).unwrap();
    let c = repo
        .commit(&mut fresh, "main", RepoCommitOptions::default())
        .unwrap();
    let mut plan = snapgraph::graph::reachable::CheckoutPlan::new(c.id);
    assert!(plan.missing(repo.store()).unwrap().is_empty());
    assert!(verify(&*store, true).unwrap().is_clean());
    every_closure_held(&*store);
}

#[test]
fn a_sweep_before_the_write_sends_the_commit_under_a_lease() {
    a_sweep_before_the_write_sends_the_commit_under_a_lease_on(false);
    a_sweep_before_the_write_sends_the_commit_under_a_lease_on(true);
}

/// Writers commit (reusing garbage) and take snapshots of commits no ref reaches,
/// without leases, while another handle collects as fast as it can: every commit
/// and snapshot published has its closure, and the store never holds an object
/// without what it references.
fn optimistic_writers_against_a_collector_on(on_disk: bool, rounds: usize) {
    let (store, other, _dir) = two_handles(on_disk);
    let repo = Repo::new(Arc::clone(&store));
    let mut ws = Workspace::new();
    // A small tree: each collection is quick, so many interleave with the writer.
    seed(&mut ws, 4);
    repo.commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    let stop = AtomicBool::new(false);
    let (mut published, mut snapshots, mut refused, mut runs) = (0, 0, 0, 0);
    std::thread::scope(|s| {
        let collector = s.spawn(|| {
            let mut runs = 0;
            while !stop.load(Ordering::Relaxed) {
                gc(&*other, &[]).unwrap();
                runs += 1;
            }
            runs
        });
        for round in 0..rounds {
            let content: Vec<u8> = (0..20_000).map(|j| (j * 7 + round * 13) as u8).collect();
            let g = garbage(&repo, &content);
            // A collection may start here.
            std::thread::sleep(std::time::Duration::from_micros(200));
            // A snapshot of that unreachable commit: taken whole, or refused.
            match repo.tag(&format!("t{round}"), &g.to_hex(), BTreeMap::new()) {
                Ok(t) => {
                    let mut plan = snapgraph::graph::reachable::CheckoutPlan::new(t.id);
                    assert!(
                        plan.missing(repo.store()).unwrap().is_empty(),
                        "round {round}"
                    );
                    snapshots += 1;
                }
                Err(_) => refused += 1,
            }
            ws.write(&format!("/dir{}/reuse.dat", round % 5), &content)
                .unwrap();
            commit_until_published(&repo, &mut ws, round);
            published += 1;
        }
        stop.store(true, Ordering::Relaxed);
        runs = collector.join().unwrap();
    });
    eprintln!("{published} commits, {snapshots} snapshots, {refused} refused, {runs} collections");
    assert!(runs > 0);
    assert_eq!(published, rounds);
    assert_eq!(leases(&*store), 0);
    assert!(verify(&*store, true).unwrap().is_clean());
    every_closure_held(&*store);
}

#[test]
fn optimistic_writers_against_a_collector() {
    optimistic_writers_against_a_collector_on(false, 300);
    optimistic_writers_against_a_collector_on(true, 60);
}

/// A sync into a store that writes objects and refs at once is one write when what
/// is missing fits one (a turn's objects): no lease, no batches. Past that, or into
/// a store that cannot, it goes under a lease (the lease, the objects, the refs).
#[test]
fn a_small_sync_is_one_write() {
    let src = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    seed(&mut ws, 40);
    src.commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let stores: Vec<(&str, Box<dyn Store>)> = vec![
        ("memory", Box::new(MemoryStore::new())),
        (
            "sqlite",
            Box::new(SqliteStore::open(dir.path().join("dst.db")).unwrap()),
        ),
        (
            "dir",
            Box::new(snapgraph_store::dir::DirStore::open(dir.path().join("dst")).unwrap()),
        ),
    ];
    for (kind, inner) in stores {
        let dst = FaultyStore::new(inner, Calls::Writes);
        let at_once = dst.writes_objects_with_refs();
        // The first sync: 40 files and their trees.
        dst.reset();
        let r = sync(src.store(), &dst, "heads/main").unwrap();
        assert!(r.objects > 40, "{kind}: {r:?}");
        let writes = dst.calls();
        assert_eq!(writes == 1, at_once, "{kind}: {writes} writes");
        // A turn.
        turn(&mut ws, 1);
        let c = src
            .commit(&mut ws, "main", RepoCommitOptions::default())
            .unwrap();
        dst.reset();
        let r = sync(src.store(), &dst, "heads/main").unwrap();
        assert_eq!(r.to, Some(c.id));
        assert_eq!(dst.calls() == 1, at_once, "{kind}: {} writes", dst.calls());
        assert_eq!(dst.get_ref("heads/main").unwrap(), Some(c.id), "{kind}");
        assert!(
            dst.list_refs("snapgraph/lease/").unwrap().is_empty(),
            "{kind}"
        );
        assert!(verify(&dst, true).unwrap().is_clean(), "{kind}");
    }
    // More objects than one write takes: under a lease, in batches, the same result.
    let big = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    for i in 0..1_100 {
        ws.write(
            &format!("/d{}/f{i}", i % 10),
            format!("file {i} ").repeat(20),
        )
        .unwrap();
    }
    let c = big
        .commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    let dst = FaultyStore::new(MemoryStore::new(), Calls::Writes);
    dst.reset();
    let r = sync(big.store(), &dst, "heads/main").unwrap();
    assert!(r.objects > 1_000, "{r:?}");
    assert!(dst.calls() >= 3, "{} writes", dst.calls());
    assert_eq!(dst.get_ref("heads/main").unwrap(), Some(c.id));
    assert!(verify(&dst, true).unwrap().is_clean());
}

/// A cancelled collection (`GcOptions::cancel`) stops without a sweep marker left
/// behind, so writers go on, and deletes nothing before its sweep: cancelled
/// before it starts, or while it waits for a writer's lease.
#[test]
fn a_cancelled_collection_leaves_no_marker_and_deletes_nothing_early() {
    use snapgraph_store::{Cancel, GcError};
    let store = MemoryStore::new();
    let repo = Repo::new(&store);
    let mut ws = Workspace::new();
    seed(&mut ws, 20);
    repo.commit(&mut ws, "main", RepoCommitOptions::message("base"))
        .unwrap();
    let g = garbage(&repo, b"unreferenced");
    let held = |id: ObjectId| store.has_many(&[id]).unwrap().is_empty();
    assert!(held(g));

    let cancel = Cancel::new();
    cancel.cancel();
    let options = gc::GcOptions {
        cancel,
        ..Default::default()
    };
    let r = gc::collect_with(&store, &options);
    assert!(matches!(r, Err(GcError::Cancelled { deleted: 0 })), "{r:?}");
    assert!(held(g));
    assert_eq!(store.get_ref(gc::GC_SWEEP).unwrap(), None);

    // A writer's lease held: the collection waits for it (30 s) until cancelled.
    let lease = gc::Lease::acquire(&store, std::time::Duration::ZERO)
        .unwrap()
        .unwrap();
    let cancel = Cancel::new();
    let options = gc::GcOptions {
        lease_wait: std::time::Duration::from_secs(30),
        cancel: cancel.clone(),
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let r = std::thread::scope(|s| {
        let collector = s.spawn(|| gc::collect_with(&store, &options));
        std::thread::sleep(std::time::Duration::from_millis(200));
        cancel.cancel();
        collector.join().unwrap()
    });
    assert!(matches!(r, Err(GcError::Cancelled { deleted: 0 })), "{r:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert!(held(g));
    assert_eq!(store.get_ref(gc::GC_SWEEP).unwrap(), None);
    // The writer publishes as if nothing happened, and the next collection runs.
    store
        .update_refs(&lease.release_updates(), "publish")
        .unwrap();
    let report = gc::collect(&store, &[]).unwrap();
    assert!(report.deleted.contains(&g));
}

/// A cancelled sync (`SyncOptions::cancel`) moves nothing on the destination and
/// leaves no lease or wait there: cancelled before it starts, or while it waits
/// for a sweep to end. A sync without the flag then completes.
#[test]
fn a_cancelled_sync_moves_nothing_and_holds_nothing() {
    use snapgraph_store::store::RefUpdate;
    use snapgraph_store::Cancel;
    let src = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    seed(&mut ws, 50);
    src.commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    let dst = MemoryStore::new();
    let cancel = Cancel::new();
    cancel.cancel();
    let options = SyncOptions {
        cancel,
        ..Default::default()
    };
    let r = sync_with(src.store(), &dst, "heads/main", &options);
    assert!(
        matches!(&r, Err(SyncError::Cancelled { name }) if name == "heads/main"),
        "{r:?}"
    );
    assert_eq!(dst.get_ref("heads/main").unwrap(), None);
    assert_eq!(leases(&dst), 0);

    // A sweep running on the destination (its marker): the sync waits (30 s) for
    // it under a wait ref, until cancelled.
    let marker = ObjectId::hash_stored(b"a sweep");
    dst.update_refs(&[RefUpdate::new(gc::GC_SWEEP, None, Some(marker))], "sweep")
        .unwrap();
    let cancel = Cancel::new();
    let options = SyncOptions {
        gc_wait: std::time::Duration::from_secs(30),
        cancel: cancel.clone(),
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let r = std::thread::scope(|s| {
        let syncing = s.spawn(|| sync_with(src.store(), &dst, "heads/main", &options));
        std::thread::sleep(std::time::Duration::from_millis(1_500));
        assert_eq!(dst.list_refs(gc::WAITERS).unwrap().len(), 1, "it waits");
        cancel.cancel();
        syncing.join().unwrap()
    });
    assert!(matches!(r, Err(SyncError::Cancelled { .. })), "{r:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(dst.list_refs(gc::WAITERS).unwrap(), vec![]);
    assert_eq!(
        (leases(&dst), dst.get_ref("heads/main").unwrap()),
        (0, None)
    );
    dst.update_refs(&[RefUpdate::new(gc::GC_SWEEP, Some(marker), None)], "end")
        .unwrap();
    sync(src.store(), &dst, "heads/main").unwrap();
    assert_eq!(
        dst.get_ref("heads/main").unwrap(),
        src.branch("main").unwrap()
    );
}
