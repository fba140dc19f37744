//! Hollow commits, retention and shallow sync on the memory, SQLite and directory
//! stores (PostgreSQL: `tests/postgres.rs`). The scenarios are in
//! `common/hollow.rs`.

mod common;
use common::hollow::*;

use snapgraph_store::retention::{apply, Candidate, KeepPolicy, KeepReason, RetentionError, Span};
use snapgraph_store::{MemoryStore, Repo, RepoError};

#[test]
fn retention_then_gc_on_the_memory_store() {
    retention_then_gc(Repo::new(MemoryStore::new()));
}

#[cfg(feature = "sqlite")]
#[test]
fn retention_then_gc_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = snapgraph_store::sqlite::SqliteStore::open(dir.path().join("s.db")).unwrap();
    retention_then_gc(Repo::new(store));
}

#[cfg(feature = "dir")]
#[test]
fn retention_then_gc_on_the_directory_store() {
    let dir = tempfile::tempdir().unwrap();
    retention_then_gc(Repo::new(
        snapgraph_store::dir::DirStore::open(dir.path()).unwrap(),
    ));
}

#[test]
fn retention_with_a_concurrent_writer_on_the_memory_store() {
    retention_with_a_concurrent_writer(&MemoryStore::new());
}

#[cfg(feature = "sqlite")]
#[test]
fn retention_with_a_concurrent_writer_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = snapgraph_store::sqlite::SqliteStore::open(dir.path().join("s.db")).unwrap();
    retention_with_a_concurrent_writer(&store);
}

#[test]
fn shallow_sync_between_memory_stores() {
    shallow_sync(&MemoryStore::new(), &MemoryStore::new());
}

#[cfg(all(feature = "sqlite", feature = "dir"))]
#[test]
fn shallow_sync_from_sqlite_to_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let src = snapgraph_store::sqlite::SqliteStore::open(dir.path().join("s.db")).unwrap();
    let dst = snapgraph_store::dir::DirStore::open(dir.path().join("d")).unwrap();
    shallow_sync(&src, &dst);
}

#[test]
fn hollow_commits_sync_onward_hollow() {
    sync_from_a_hollow_source(&MemoryStore::new(), &MemoryStore::new());
}

fn candidates(times: &[Option<&str>]) -> Vec<Candidate> {
    times
        .iter()
        .enumerate()
        .map(|(i, t)| Candidate {
            id: snapgraph::ObjectId::from_bytes([i as u8; 32]),
            time: t.map(str::to_string),
        })
        .collect()
}

/// restic's rules: weekly and monthly buckets, within relative to the newest,
/// offsets converted to UTC, undated and unparsable times kept.
#[test]
fn keep_rules_follow_restic() {
    let c = candidates(&[
        Some("2026-01-31T23:00:00-02:00"), // 0: 2026-02-01 01:00 UTC (a Sunday)
        Some("2026-01-30T10:00:00Z"),      // 1: same ISO week as 0 (week 5)
        Some("2026-01-25T10:00:00Z"),      // 2: week 4
        Some("2025-12-31T10:00:00Z"),      // 3: ISO week 1 of 2026, December
        None,                              // 4
        Some("yesterday"),                 // 5
    ]);
    let kept = |policy: KeepPolicy| -> Vec<u8> {
        apply(&policy, c.clone())
            .unwrap()
            .iter()
            .filter(|d| d.keep && d.reasons != [KeepReason::NoTime])
            .map(|d| d.id.as_bytes()[0])
            .collect()
    };
    assert_eq!(
        kept(KeepPolicy {
            weekly: 2,
            ..KeepPolicy::default()
        }),
        [0, 2]
    );
    assert_eq!(
        kept(KeepPolicy {
            monthly: 3,
            ..KeepPolicy::default()
        }),
        [0, 1, 3]
    );
    let within: Span = "2d".parse().unwrap();
    assert_eq!(
        kept(KeepPolicy {
            within: Some(within),
            ..KeepPolicy::default()
        }),
        [0, 1]
    );
    let month: Span = "1m".parse().unwrap();
    assert_eq!(
        kept(KeepPolicy {
            within: Some(month),
            ..KeepPolicy::default()
        }),
        [0, 1, 2]
    );
    let all = apply(
        &KeepPolicy {
            last: 1,
            ..KeepPolicy::default()
        },
        c.clone(),
    )
    .unwrap();
    let undated: Vec<_> = all
        .iter()
        .filter(|d| d.reasons == [KeepReason::NoTime])
        .collect();
    assert_eq!(undated.len(), 2, "undated and unparsable times are kept");
    assert!(matches!(
        apply(&KeepPolicy::default(), c),
        Err(RetentionError::NoRule)
    ));
    assert_eq!(
        "1y2m3d4h".parse::<Span>().unwrap(),
        Span {
            years: 1,
            months: 2,
            days: 3,
            hours: 4
        }
    );
    for bad in ["", "3", "d", "2w", "1d2", "99999999999d"] {
        assert!(
            matches!(bad.parse::<Span>(), Err(RetentionError::InvalidSpan { .. })),
            "{bad:?}"
        );
    }
}

#[test]
fn forget_removes_the_snapshots_not_kept() {
    use snapgraph::Workspace;
    use std::collections::BTreeMap;
    let repo = Repo::new(MemoryStore::new());
    let mut ws = Workspace::new();
    for day in 1..=5 {
        turn(
            &repo,
            &mut ws,
            "main",
            day,
            Some(format!("2026-04-{day:02}T08:00:00Z")),
        );
        repo.tag(&format!("day{day}"), "main", BTreeMap::new())
            .unwrap();
    }
    let policy = KeepPolicy {
        last: 2,
        ..KeepPolicy::default()
    };
    let dry = repo.forget_snapshots(&[], &policy, true).unwrap();
    let names = |keep: bool| -> Vec<String> {
        dry.iter()
            .filter(|s| s.decision.keep == keep)
            .map(|s| s.name.clone())
            .collect()
    };
    assert_eq!(names(true), ["day5", "day4"]);
    assert_eq!(names(false), ["day3", "day2", "day1"]);
    assert_eq!(
        repo.snapshots().unwrap().len(),
        5,
        "a dry run removes nothing"
    );
    // Limited to some names: the policy applies among them only.
    let some = repo
        .forget_snapshots(&["day1".into(), "day2".into()], &policy, false)
        .unwrap();
    assert!(some.iter().all(|s| s.decision.keep));
    repo.forget_snapshots(&[], &policy, false).unwrap();
    let left: Vec<String> = repo
        .snapshots()
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(left, ["day4", "day5"]);
    assert!(matches!(
        repo.forget_snapshots(&["nope".into()], &policy, false),
        Err(RepoError::UnknownRevision { .. })
    ));
    assert!(matches!(
        repo.forget_snapshots(&[], &KeepPolicy::default(), false),
        Err(RepoError::Retention(RetentionError::NoRule))
    ));
}
