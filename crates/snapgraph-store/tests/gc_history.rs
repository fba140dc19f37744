//! Garbage collection over real history: branches of many commits, a fork, a tag, a
//! deleted branch and files that come and go, collected several times. After every
//! collection every commit any ref still reaches (through parents) must check out to
//! exactly what it held when it was made, `verify --read-data` must be clean, and what
//! only a deleted branch reached must be gone. A collector that forgets parents, tags'
//! targets or directory entries fails here, not only in a log count.

use std::collections::BTreeMap;

use snapgraph::{ObjectId, Workspace};
use snapgraph_store::{gc, verify, MemoryStore, Repo, RepoCommitOptions, Store};

type Files = BTreeMap<String, Vec<u8>>;

/// Every file's path and bytes.
fn files(ws: &Workspace) -> Files {
    ws.walk()
        .into_iter()
        .filter(|(_, m)| m.kind == snapgraph::EntryKind::File)
        .map(|(p, _)| {
            let bytes = ws.read(&p).unwrap().to_vec();
            (p, bytes)
        })
        .collect()
}

/// Turn `t` of a line of history `line`: edits, adds and (every third turn) removes,
/// with a large file now and then so manifests and chunks are collected too.
fn turn(ws: &mut Workspace, line: u8, t: usize) {
    let body = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|j| ((j as u64 * 2_654_435_761) >> 13) as u8 ^ line ^ t as u8)
            .collect()
    };
    ws.write(&format!("/src/{line}/f{}.txt", t % 4), body(3000 + t))
        .unwrap();
    ws.write(
        &format!("/notes/{line}-{t}.md"),
        format!("turn {t} of {line}"),
    )
    .unwrap();
    if t % 3 == 2 {
        let old = format!("/notes/{line}-{}.md", t - 2);
        ws.remove(&old).unwrap();
    }
    if t % 4 == 1 {
        ws.write(&format!("/big/{line}.bin"), body(300_000 + t * 1000))
            .unwrap();
    }
    ws.set_state(format!("state {line} {t}").into_bytes());
}

/// Commits `turns` turns of `line` onto `branch`, recording what each commit held.
fn commits<S: Store>(
    repo: &Repo<S>,
    ws: &mut Workspace,
    branch: &str,
    line: u8,
    turns: std::ops::Range<usize>,
    record: &mut Vec<(ObjectId, Files)>,
) {
    for t in turns {
        turn(ws, line, t);
        let c = repo
            .commit(
                ws,
                branch,
                RepoCommitOptions::message(format!("{line} {t}")),
            )
            .unwrap();
        record.push((c.id, files(ws)));
    }
}

/// Every recorded commit restores exactly; the store verifies clean.
fn all_restore<S: Store>(repo: &Repo<S>, live: &[(ObjectId, Files)], when: &str) {
    for (id, expected) in live {
        let ws = repo
            .checkout(&id.to_hex())
            .unwrap_or_else(|e| panic!("{when}: commit {id} no longer checks out: {e}"));
        assert_eq!(
            &files(&ws),
            expected,
            "{when}: commit {id} restored other files"
        );
    }
    let v = verify(repo.store(), true).unwrap();
    assert!(v.is_clean(), "{when}: verify found {:?}", v.problems);
}

fn scenario<S: Store>(repo: Repo<S>) {
    let mut main_line = Vec::new();
    let mut ws = Workspace::new();
    commits(&repo, &mut ws, "main", 1, 0..8, &mut main_line);

    // A fork from main's fourth commit, with history of its own.
    let fork_at = main_line[3].0;
    repo.fork("feature", &fork_at.to_hex()).unwrap();
    let mut feature_line = main_line[..4].to_vec();
    let mut fws = repo.checkout("feature").unwrap();
    commits(&repo, &mut fws, "feature", 2, 0..6, &mut feature_line);

    // A tag on main's second commit: it keeps that commit (and its parent) alive.
    let tag = repo
        .tag("v1", &main_line[1].0.to_hex(), BTreeMap::new())
        .unwrap();
    assert_eq!(tag.target, main_line[1].0);

    // A branch that is deleted: its own commits are garbage.
    repo.fork("scratch", &main_line[7].0.to_hex()).unwrap();
    let mut sws = repo.checkout("scratch").unwrap();
    let mut scratch_line = Vec::new();
    commits(&repo, &mut sws, "scratch", 3, 0..4, &mut scratch_line);
    let scratch_tip = scratch_line.last().unwrap().0;
    repo.delete_branch("scratch", scratch_tip).unwrap();

    let live: Vec<_> = main_line.iter().chain(&feature_line).cloned().collect();
    all_restore(&repo, &live, "before any collection");

    let report = gc(repo.store(), &[]).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    for (id, _) in &scratch_line {
        assert!(report.deleted.contains(id), "scratch commit {id} survived");
    }
    assert_eq!(
        repo.store()
            .has_many(&scratch_line.iter().map(|(id, _)| *id).collect::<Vec<_>>())
            .unwrap()
            .len(),
        scratch_line.len(),
        "every scratch commit is gone"
    );
    all_restore(&repo, &live, "after the first collection");

    // More history on both lines, then the feature branch goes: only the fork's own
    // commits become garbage; main (with its old history) and the tag stay.
    commits(&repo, &mut ws, "main", 1, 8..12, &mut main_line);
    commits(&repo, &mut fws, "feature", 2, 6..8, &mut feature_line);
    all_restore(&repo, &main_line, "after more turns");
    let feature_tip = feature_line.last().unwrap().0;
    repo.delete_branch("feature", feature_tip).unwrap();
    let report = gc(repo.store(), &[]).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    for (id, _) in &feature_line[4..] {
        assert!(report.deleted.contains(id), "feature commit {id} survived");
    }
    all_restore(&repo, &main_line, "after deleting the fork");
    let ws_tag = repo.checkout("v1").unwrap();
    assert_eq!(files(&ws_tag), main_line[1].1);

    // A third collection deletes nothing and every commit still restores.
    let report = gc(repo.store(), &[]).unwrap();
    assert!(
        report.deleted.is_empty(),
        "{} deleted",
        report.deleted.len()
    );
    all_restore(&repo, &main_line, "after an idle collection");
    assert_eq!(repo.log("main", usize::MAX).unwrap().len(), main_line.len());
}

#[test]
fn gc_keeps_all_history_on_the_memory_store() {
    scenario(Repo::new(MemoryStore::new()));
}

#[cfg(feature = "sqlite")]
#[test]
fn gc_keeps_all_history_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = snapgraph_store::sqlite::SqliteStore::open(dir.path().join("s.db")).unwrap();
    scenario(Repo::new(store));
}

#[cfg(feature = "dir")]
#[test]
fn gc_keeps_all_history_on_the_directory_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = snapgraph_store::dir::DirStore::open(dir.path()).unwrap();
    scenario(Repo::new(store));
}

/// What a collector that forgets parents would leave: only each ref's snapshot (its
/// commit, trees and content), with older commits deleted. `verify` walks history on
/// its own, so it reports the lost commits instead of calling the store clean.
#[test]
fn verify_catches_a_collector_that_forgets_parents() {
    use snapgraph::SnapshotGraph;
    use snapgraph_store::{ObjectStore, RefStore, WalkProblem};
    let repo = Repo::new(MemoryStore::new());
    let mut line = Vec::new();
    let mut ws = Workspace::new();
    commits(&repo, &mut ws, "main", 1, 0..5, &mut line);
    assert!(verify(repo.store(), true).unwrap().is_clean());

    let mut keep = std::collections::HashSet::new();
    for (_, tip) in repo.store().list_refs("").unwrap() {
        keep.extend(SnapshotGraph::reachable(tip, repo.store()).unwrap());
    }
    let mut doomed = Vec::new();
    repo.store()
        .for_each_id(&mut |id| {
            if !keep.contains(&id) {
                doomed.push(id);
            }
            Ok(())
        })
        .unwrap();
    assert!(!doomed.is_empty());
    repo.store().delete_many(&doomed).unwrap();

    let report = verify(repo.store(), false).unwrap();
    assert!(!report.is_clean());
    let tip = line.last().unwrap().0;
    let parent = line[line.len() - 2].0;
    assert!(
        report.problems.iter().any(|p| matches!(
            p,
            WalkProblem::Missing { id, referenced_by: Some(by) } if *id == parent && *by == tip
        )),
        "{:?}",
        report.problems
    );
    assert_eq!(report.broken_refs, vec!["heads/main".to_string()]);
}
