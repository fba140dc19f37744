//! Hollow commits on any adapter: retention of a long branch, the collection that
//! follows, a concurrent writer, and shallow syncs (run by `tests/hollow.rs` on the
//! memory, SQLite and directory stores, by `tests/postgres.rs` on PostgreSQL).

use std::collections::BTreeMap;

use snapgraph::{ObjectId, SnapshotGraph, Workspace};
use snapgraph_store::hollow::{hollow_commits, is_hollow};
use snapgraph_store::retention::{KeepPolicy, KeepReason, TIME_KEY};
use snapgraph_store::{
    gc, sync_with, verify, Repo, RepoCommitOptions, RepoError, Store, SyncOptions,
};

pub type Files = BTreeMap<String, Vec<u8>>;

pub fn files(ws: &Workspace) -> Files {
    ws.walk()
        .into_iter()
        .filter(|(_, m)| m.kind == snapgraph::EntryKind::File)
        .map(|(p, _)| {
            let bytes = ws.read(&p).unwrap().to_vec();
            (p, bytes)
        })
        .collect()
}

/// Turn `t`: a file of its own (so each commit's tree has objects no other has),
/// an edit of a shared one, and the time `day` days into March 2026 at `hour`.
pub fn turn<S: Store>(
    repo: &Repo<S>,
    ws: &mut Workspace,
    branch: &str,
    t: usize,
    time: Option<String>,
) -> (ObjectId, Files) {
    ws.write(&format!("/turn/{t}.txt"), format!("turn {t} ").repeat(50))
        .unwrap();
    ws.write("/shared.txt", format!("at turn {t}")).unwrap();
    let mut options = RepoCommitOptions::message(format!("turn {t}"));
    if let Some(time) = time {
        options.meta.insert(TIME_KEY.into(), time);
    }
    let c = repo.commit(ws, branch, options).unwrap();
    (c.id, files(ws))
}

fn march(day: usize, hour: usize) -> Option<String> {
    Some(format!("2026-03-{day:02}T{hour:02}:00:00Z"))
}

/// The commit's root tree.
fn tree_of(store: &dyn Store, id: ObjectId) -> ObjectId {
    SnapshotGraph::commit(id, store).unwrap().tree
}

/// Retention keeps the last 2 and one per day over 3 days of a 12-commit branch
/// (4 a day), plus an undated commit; a collection then drops the other trees.
pub fn retention_then_gc<S: Store>(repo: Repo<S>) {
    let mut ws = Workspace::new();
    let mut line = Vec::new();
    for t in 0..12 {
        let time = if t == 5 {
            None
        } else {
            march(1 + t / 4, t % 4)
        };
        line.push(turn(&repo, &mut ws, "main", t, time));
    }
    // A snapshot of turn 1 and a branch at turn 2: their commits stay whole.
    repo.tag("v1", &line[1].0.to_hex(), BTreeMap::new())
        .unwrap();
    repo.fork("side", &line[2].0.to_hex()).unwrap();

    let policy = KeepPolicy {
        last: 2,
        daily: 3,
        ..KeepPolicy::default()
    };
    let dry = repo.retain_history("main", &policy, true).unwrap();
    assert!(
        hollow_commits(repo.store()).unwrap().is_empty(),
        "a dry run records nothing"
    );
    // Kept: turns 11, 10 (last), 11, 7, 3 (the newest of each day), 5 (no time),
    // 2 (a branch's tip). Turn 1 goes: the snapshot's own commit keeps its tree.
    let kept: Vec<usize> = vec![2, 3, 5, 7, 10, 11];
    let expect_hollow: Vec<ObjectId> = (0..12)
        .filter(|t| !kept.contains(t))
        .map(|t| line[t].0)
        .collect();
    let mut got = dry.hollowed.clone();
    got.sort();
    let mut want = expect_hollow.clone();
    want.sort();
    assert_eq!(got, want, "decisions: {:?}", dry.decisions);
    let reasons = |t: usize| {
        dry.decisions
            .iter()
            .find(|d| d.id == line[t].0)
            .unwrap()
            .reasons
            .clone()
    };
    assert_eq!(
        reasons(11),
        [KeepReason::Last, KeepReason::Daily, KeepReason::RefTip]
    );
    assert_eq!(reasons(5), [KeepReason::NoTime]);
    assert_eq!(reasons(2), [KeepReason::RefTip]);

    let done = repo.retain_history("main", &policy, false).unwrap();
    assert_eq!(done.hollowed, dry.hollowed);
    for id in &expect_hollow {
        assert!(is_hollow(repo.store(), *id).unwrap());
    }
    // Again: nothing new, the hollow ones are not candidates any more.
    let again = repo.retain_history("main", &policy, false).unwrap();
    assert!(again.hollowed.is_empty());
    assert_eq!(again.already_hollow, expect_hollow.len());

    let report = gc(repo.store(), &[]).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.hollow, expect_hollow.len());
    // Turn 0's tree is only its own: gone; its commit stays.
    let store: &dyn Store = repo.store();
    let tree0 = tree_of(store, line[0].0);
    assert!(report.deleted.contains(&tree0));
    assert_eq!(store.has_many(&[line[0].0, tree0]).unwrap(), [tree0]);

    // History is whole; kept commits restore exactly; hollow ones are Pruned.
    assert_eq!(repo.log("main", usize::MAX).unwrap().len(), 12);
    for (t, (id, want)) in line.iter().enumerate() {
        match repo.checkout(&id.to_hex()) {
            Ok(ws) => {
                assert!(kept.contains(&t) || t == 1, "turn {t} restored");
                assert_eq!(&files(&ws), want, "turn {t}");
            }
            Err(RepoError::Pruned { commit }) => {
                assert_eq!(commit, *id);
                assert!(!kept.contains(&t), "kept turn {t} was pruned");
            }
            Err(e) => panic!("turn {t}: {e}"),
        }
    }
    assert_eq!(files(&repo.checkout("v1").unwrap()), line[1].1);
    let v = verify(store, true).unwrap();
    assert!(v.is_clean(), "{:?}", v.problems);
    assert_eq!(v.hollow, expect_hollow.len());
    // A second collection has nothing more to do.
    assert!(gc(store, &[]).unwrap().deleted.is_empty());

    // The branch goes: its commits go, and so do their hollow records.
    repo.delete_branch("main", line[11].0).unwrap();
    repo.delete_branch("side", line[2].0).unwrap();
    repo.remove_snapshot("v1", true).unwrap();
    let report = gc(store, &[]).unwrap();
    assert_eq!(report.hollow_records_dropped, expect_hollow.len());
    assert!(hollow_commits(store).unwrap().is_empty());
    assert!(verify(store, true).unwrap().is_clean());
}

/// One thread commits turns while another applies retention and collects: no
/// commit the writer published loses its tree unless retention hollowed it, and
/// the store verifies clean.
pub fn retention_with_a_concurrent_writer(store: &dyn Store) {
    let repo = Repo::new(store);
    let mut ws = Workspace::new();
    let (first, _) = turn(&repo, &mut ws, "main", 0, march(1, 0));
    const TURNS: usize = 24;
    let published = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let repo = Repo::new(store);
            let mut ws = repo.checkout("main").unwrap();
            let mut out = vec![first];
            for t in 1..TURNS {
                out.push(turn(&repo, &mut ws, "main", t, march(1 + t / 4, t % 4)).0);
            }
            out
        });
        let policy = KeepPolicy {
            last: 3,
            ..KeepPolicy::default()
        };
        for _ in 0..6 {
            repo.retain_history("main", &policy, false).unwrap();
            let report = gc(store, &[]).unwrap();
            assert!(report.problems.is_empty(), "{:?}", report.problems);
        }
        writer.join().unwrap()
    });
    repo.retain_history(
        "main",
        &KeepPolicy {
            last: 3,
            ..KeepPolicy::default()
        },
        false,
    )
    .unwrap();
    gc(store, &[]).unwrap();
    let hollow = hollow_commits(store).unwrap();
    assert_eq!(repo.log("main", usize::MAX).unwrap().len(), TURNS);
    for id in &published {
        match repo.checkout(&id.to_hex()) {
            Ok(_) => assert!(!hollow.contains(id)),
            Err(RepoError::Pruned { .. }) => assert!(hollow.contains(id)),
            Err(e) => panic!("{id}: {e}"),
        }
    }
    for id in &published[TURNS - 3..] {
        assert!(!hollow.contains(id), "one of the last 3 was hollowed");
    }
    let v = verify(store, true).unwrap();
    assert!(v.is_clean(), "{:?}", v.problems);
}

/// A shallow sync of depth 2 and a deeper one of depth 4 from `src` into `dst`
/// (both empty).
pub fn shallow_sync(src: &dyn Store, dst: &dyn Store) {
    let repo = Repo::new(src);
    let mut ws = Workspace::new();
    let line: Vec<(ObjectId, Files)> = (0..6)
        .map(|t| turn(&repo, &mut ws, "main", t, march(1, t)))
        .collect();
    let depth = |n: u64| SyncOptions::default().with_depth(n.try_into().unwrap());
    let report = sync_with(src, dst, "heads/main", &depth(2)).unwrap();
    assert_eq!(report.to, Some(line[5].0));
    assert_eq!((report.hollow, report.filled), (4, 0));

    let shallow = Repo::new(dst);
    let check = |whole: &[usize]| {
        assert_eq!(
            shallow.log("main", usize::MAX).unwrap().len(),
            6,
            "ancestry is whole"
        );
        for (t, (id, want)) in line.iter().enumerate() {
            match shallow.checkout(&id.to_hex()) {
                Ok(ws) => {
                    assert!(whole.contains(&t), "turn {t} restored");
                    assert_eq!(&files(&ws), want);
                }
                Err(RepoError::Pruned { commit }) => {
                    assert_eq!(commit, *id);
                    assert!(!whole.contains(&t), "turn {t} was pruned");
                }
                Err(e) => panic!("turn {t}: {e}"),
            }
        }
        let v = verify(dst, true).unwrap();
        assert!(v.is_clean(), "{:?}", v.problems);
        assert_eq!(v.hollow, 6 - whole.len());
    };
    check(&[4, 5]);
    // Turn 0's own file was never sent.
    let tree0 = tree_of(src, line[0].0);
    assert_eq!(dst.has_many(&[line[0].0, tree0]).unwrap(), [tree0]);

    // The same depth again: nothing to do.
    let again = sync_with(src, dst, "heads/main", &depth(2)).unwrap();
    assert_eq!((again.objects, again.hollow, again.filled), (0, 0, 0));
    // Deeper: turns 2 and 3 are filled in.
    let deeper = sync_with(src, dst, "heads/main", &depth(4)).unwrap();
    assert_eq!((deeper.hollow, deeper.filled), (0, 2));
    assert!(deeper.objects > 0);
    check(&[2, 3, 4, 5]);
    // A plain sync leaves the hollow ones as they are and sends the new turn whole.
    let (tip, tip_files) = turn(&repo, &mut ws, "main", 6, march(1, 6));
    let plain = sync_with(src, dst, "heads/main", &SyncOptions::default()).unwrap();
    assert_eq!((plain.hollow, plain.filled), (0, 0));
    assert_eq!(files(&shallow.checkout(&tip.to_hex()).unwrap()), tip_files);
    assert!(matches!(
        shallow.checkout(&line[0].0.to_hex()),
        Err(RepoError::Pruned { .. })
    ));
    // A collection of the shallow store keeps it as it is.
    let report = gc(dst, &[]).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.hollow, 2);
    assert!(verify(dst, true).unwrap().is_clean());
}

/// A store with hollow commits syncs onward: they arrive hollow, and a shallow
/// sync cannot fill in what the source lacks.
pub fn sync_from_a_hollow_source(src: &dyn Store, dst: &dyn Store) {
    let repo = Repo::new(src);
    let mut ws = Workspace::new();
    let line: Vec<(ObjectId, Files)> = (0..5)
        .map(|t| turn(&repo, &mut ws, "main", t, march(1 + t, 0)))
        .collect();
    let policy = KeepPolicy {
        last: 2,
        ..KeepPolicy::default()
    };
    repo.retain_history("main", &policy, false).unwrap();
    gc(src, &[]).unwrap();
    let report = sync_with(src, dst, "heads/main", &SyncOptions::default()).unwrap();
    assert_eq!(report.hollow, 3);
    let copy = Repo::new(dst);
    assert!(matches!(
        copy.checkout(&line[0].0.to_hex()),
        Err(RepoError::Pruned { .. })
    ));
    assert_eq!(files(&copy.checkout("main").unwrap()), line[4].1);
    let v = verify(dst, true).unwrap();
    assert!(v.is_clean(), "{:?}", v.problems);
    assert_eq!(v.hollow, 3);
    // A deep sync fills in nothing the source does not have.
    let deep = sync_with(
        src,
        dst,
        "heads/main",
        &SyncOptions::default().with_depth(10.try_into().unwrap()),
    )
    .unwrap();
    assert_eq!((deep.objects, deep.filled), (0, 0));
}
