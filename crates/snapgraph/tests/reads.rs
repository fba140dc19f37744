//! Recorded external reads: storage with commits, pins, drift checks, stale marking.

use std::collections::HashMap;

use snapgraph::{
    CheckoutOptions, CheckoutPolicy, CommitOptions, DriftPolicy, ExternalRead, ObjectId,
    ObjectKind, SnapshotGraph, Workspace,
};

type Store = HashMap<ObjectId, Vec<u8>>;

fn read(
    source: &str,
    fingerprint: &str,
    revision: Option<&str>,
    cached: Option<&str>,
) -> ExternalRead {
    ExternalRead {
        source: source.into(),
        fingerprint: fingerprint.into(),
        revision: revision.map(Into::into),
        size: 42,
        cached_at: cached.map(Into::into),
    }
}

/// A workspace with one unpinned cached read, one pinned read, one unverifiable read.
fn committed() -> (ObjectId, Store) {
    let mut ws = Workspace::new();
    ws.write("/cache/data.csv", b"x,y\n1,2\n").unwrap();
    ws.write("/cache/notes.txt", b"notes").unwrap();
    ws.record_read(read(
        "s3://b/data.csv",
        "etag-1",
        None,
        Some("/cache//data.csv"),
    ))
    .unwrap();
    ws.record_read(read("git://r/file", "blob-1", Some("abc123"), None))
        .unwrap();
    ws.record_read(read("http://x/notes", "", None, Some("/cache/notes.txt")))
        .unwrap();
    let c = ws.commit(CommitOptions::new()).unwrap();
    let id = c.id();
    (id, c.into_objects().into_iter().collect())
}

#[test]
fn repeated_reads_keep_the_latest_record() {
    let mut ws = Workspace::new();
    ws.record_read(read("s3://b/k", "e1", None, None)).unwrap();
    ws.record_read(read("s3://b/k", "e2", None, None)).unwrap();
    let reads: Vec<_> = ws.external_reads().collect();
    assert_eq!(reads.len(), 1);
    assert_eq!(reads[0].fingerprint, "e2");
    assert!(ws
        .record_read(read("s3://b/z", "e", None, Some("relative")))
        .is_err());
    assert_eq!(ws.forget_read("s3://b/k").unwrap().fingerprint, "e2");
    assert_eq!(ws.external_reads().len(), 0);
}

#[test]
fn reads_are_listed_without_restoring_and_are_reachable() {
    let (id, store) = committed();
    let reads = SnapshotGraph::external_reads(id, &store).unwrap();
    let sources: Vec<&str> = reads.iter().map(|r| r.source.as_str()).collect();
    assert_eq!(
        sources,
        ["git://r/file", "http://x/notes", "s3://b/data.csv"]
    );
    // The cached path was normalized when recorded.
    assert_eq!(reads[2].cached_at.as_deref(), Some("/cache/data.csv"));
    let commit = SnapshotGraph::commit(id, &store).unwrap();
    let reads_id = commit.reads.expect("reads object");
    assert!(SnapshotGraph::reachable(id, &store)
        .unwrap()
        .contains(&reads_id));
    let mut partial = store.clone();
    partial.remove(&reads_id);
    assert_eq!(
        SnapshotGraph::plan_checkout(id, &partial).unwrap(),
        vec![reads_id]
    );
    assert_eq!(
        snapgraph::object::verify(&reads_id, &store[&reads_id])
            .unwrap()
            .0,
        ObjectKind::Reads
    );
}

#[test]
fn strict_passes_when_fingerprints_match_and_pins_are_exposed() {
    let (id, store) = committed();
    let mut ws = Workspace::new();
    let restore = ws.checkout(id, &store, CheckoutPolicy::default()).unwrap();
    assert_eq!(restore.commit(), id);
    assert_eq!(restore.revision_for("git://r/file"), Some("abc123"));
    assert_eq!(restore.pins().len(), 1);
    // The unverifiable read's cache is stale even under Strict.
    assert_eq!(restore.stale(), ["/cache/notes.txt".to_string()]);
    assert!(ws.is_stale("/cache/notes.txt"));
    let mut check = restore.into_drift_check().expect("one read to check");
    // Pinned sources are never part of the check.
    assert_eq!(check.pending(), vec!["s3://b/data.csv".to_string()]);
    assert!(!check.supply("git://r/file", Some("other")));
    assert!(check.supply("s3://b/data.csv", Some("etag-1")));
    assert!(check.pending().is_empty());
    check.finish().unwrap();
    // The restored workspace carries the records, so the next commit keeps them.
    assert_eq!(ws.external_reads().len(), 3);
}

#[test]
fn strict_names_each_drifted_source_with_both_fingerprints() {
    let (id, store) = committed();
    let mut ws = Workspace::new();
    let restore = ws
        .checkout_with(
            id,
            &store,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::default())
                .drift(DriftPolicy::Strict),
        )
        .unwrap();
    let mut check = restore.into_drift_check().unwrap();
    assert_eq!(check.supply_all([("s3://b/data.csv", Some("etag-2"))]), 1);
    let err = check.finish().unwrap_err();
    assert_eq!(err.commit, id);
    assert_eq!(err.drifted.len(), 1);
    let d = &err.drifted[0];
    assert_eq!(d.source, "s3://b/data.csv");
    assert_eq!(d.snapshot, "etag-1");
    assert_eq!(d.live.as_deref(), Some("etag-2"));
    assert_eq!(d.cached_at.as_deref(), Some("/cache/data.csv"));
    let msg = err.to_string();
    assert!(msg.contains("s3://b/data.csv") && msg.contains("etag-1") && msg.contains("etag-2"));
}

#[test]
fn a_vanished_or_unchecked_source_fails_the_check() {
    let (id, store) = committed();
    let mut ws = Workspace::new();
    let restore = ws.checkout(id, &store, CheckoutPolicy::default()).unwrap();
    let check = restore.drift_check().unwrap().clone();
    let err = check.clone().finish().unwrap_err();
    assert_eq!(err.unchecked, vec!["s3://b/data.csv".to_string()]);
    let mut gone = check;
    gone.supply("s3://b/data.csv", None);
    let err = gone.finish().unwrap_err();
    assert_eq!(err.drifted[0].live, None);
}

#[test]
fn off_checks_nothing_and_marks_unpinned_caches_stale() {
    let (id, store) = committed();
    let mut ws = Workspace::new();
    let restore = ws
        .checkout_with(
            id,
            &store,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::default())
                .drift(DriftPolicy::Off),
        )
        .unwrap();
    assert!(restore.drift_check().is_none());
    assert_eq!(restore.revision_for("git://r/file"), Some("abc123"));
    let stale: Vec<&str> = ws.stale_paths().collect();
    assert_eq!(stale, ["/cache/data.csv", "/cache/notes.txt"]);
    // The rest of the workspace restores normally; the cached bytes are there.
    assert_eq!(ws.read("/cache/data.csv").unwrap(), b"x,y\n1,2\n");
    // Re-reading live and writing the bytes clears the mark.
    ws.write("/cache/data.csv", b"fresh").unwrap();
    assert!(!ws.is_stale("/cache/data.csv"));
    ws.remove("/cache").unwrap();
    assert_eq!(ws.stale_paths().len(), 0);
}

#[test]
fn diff_reports_reads_added_removed_changed() {
    let mut ws = Workspace::new();
    ws.record_read(read("a", "1", None, None)).unwrap();
    ws.record_read(read("b", "1", None, None)).unwrap();
    let first = ws.commit(CommitOptions::new()).unwrap();
    let mut store: Store = first
        .objects()
        .iter()
        .map(|(i, b)| (*i, b.to_vec()))
        .collect();
    ws.forget_read("a");
    ws.record_read(read("b", "2", None, None)).unwrap();
    ws.record_read(read("c", "1", None, None)).unwrap();
    let second = ws
        .commit(CommitOptions::new().parent(first.id()).have_in(&store))
        .unwrap();
    let (a, b) = (first.id(), second.id());
    store.extend(second.into_objects());
    let d = SnapshotGraph::diff(a, b, &store).unwrap();
    assert_eq!(d.reads_added, ["c"]);
    assert_eq!(d.reads_removed, ["a"]);
    assert_eq!(d.reads_changed, ["b"]);
    assert!(d.files_added.is_empty() && !d.state_changed);
    assert!(SnapshotGraph::diff(b, b, &store).unwrap().is_empty());
}

#[test]
fn a_workspace_without_reads_stores_none() {
    let mut ws = Workspace::new();
    ws.write("/f", b"x").unwrap();
    let c = ws.commit(CommitOptions::new()).unwrap();
    let store: Store = c.objects().iter().map(|(i, b)| (*i, b.to_vec())).collect();
    assert_eq!(SnapshotGraph::commit(c.id(), &store).unwrap().reads, None);
    let restore = Workspace::new()
        .checkout(c.id(), &store, CheckoutPolicy::default())
        .unwrap();
    assert!(restore.drift_check().is_none() && restore.pins().is_empty());
}
