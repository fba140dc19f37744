//! Capability fingerprints: recorded with commits, compared on checkout and restore.

use std::collections::HashMap;

use snapgraph::{
    CapabilityFingerprint, CheckoutError, CheckoutPolicy, CommitOptions, ObjectId, SnapshotError,
    SnapshotGraph, Workspace,
};

type Store = HashMap<ObjectId, Vec<u8>>;

fn env(builtins: &[&str], features: &[&str]) -> CapabilityFingerprint {
    let mut f = CapabilityFingerprint::new()
        .fs_backend("memfs")
        .engine_version("1.0");
    for b in builtins {
        f = f.builtin(*b);
    }
    for x in features {
        f = f.feature(*x);
    }
    f
}

fn committed(fp: CapabilityFingerprint) -> (ObjectId, Store) {
    let mut ws = Workspace::new();
    ws.set_capabilities(fp);
    ws.write("/f", b"data").unwrap();
    let c = ws.commit(CommitOptions::new()).unwrap();
    let id = c.id();
    (id, c.into_objects().into_iter().collect())
}

fn live(fp: CapabilityFingerprint) -> Workspace {
    let mut ws = Workspace::new();
    ws.set_capabilities(fp);
    ws.write("/before", b"x").unwrap();
    ws
}

#[test]
fn recorded_and_readable_without_restoring() {
    let fp = env(&["grep", "jq"], &["sqlite"]);
    let (id, store) = committed(fp.clone());
    assert_eq!(
        SnapshotGraph::capabilities(id, &store).unwrap(),
        Some(fp.clone())
    );
    let mut ws = Workspace::new();
    ws.set_capabilities(fp.clone());
    assert_eq!(CapabilityFingerprint::capture(&ws), Some(fp));
    // A workspace without a fingerprint records none.
    let mut bare = Workspace::new();
    let c = bare.commit(CommitOptions::new()).unwrap();
    let s: Store = c.objects().iter().map(|(i, b)| (*i, b.to_vec())).collect();
    assert_eq!(SnapshotGraph::capabilities(c.id(), &s).unwrap(), None);
}

#[test]
fn superset_accepts_more_and_refuses_less() {
    let (id, store) = committed(env(&["grep", "jq"], &["sqlite"]));
    let mut richer = live(env(&["grep", "jq", "awk"], &["sqlite", "net"]));
    let _ = richer
        .checkout(id, &store, CheckoutPolicy::Superset)
        .unwrap();
    assert_eq!(richer.read("/f").unwrap(), b"data");

    let mut poorer = live(env(&["grep"], &[]));
    let before = poorer.walk();
    match poorer.checkout(id, &store, CheckoutPolicy::default()) {
        Err(CheckoutError::Capabilities {
            commit,
            missing,
            extra,
        }) => {
            assert_eq!(commit, id);
            assert_eq!(missing, ["builtin:jq", "feature:sqlite"]);
            assert!(extra.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(poorer.walk(), before, "a refused checkout changes nothing");
}

#[test]
fn strict_requires_an_exact_match_and_force_ignores() {
    let (id, store) = committed(env(&["grep"], &["sqlite"]));
    let mut exact = live(env(&["grep"], &["sqlite"]));
    let _ = exact.checkout(id, &store, CheckoutPolicy::Strict).unwrap();
    let mut richer = live(env(&["grep", "awk"], &["sqlite"]));
    match richer.checkout(id, &store, CheckoutPolicy::Strict) {
        Err(CheckoutError::Capabilities { missing, extra, .. }) => {
            assert!(missing.is_empty());
            assert_eq!(extra, ["builtin:awk"]);
        }
        other => panic!("{other:?}"),
    }
    let mut other_backend = live(env(&["grep"], &["sqlite"]).fs_backend("overlayfs"));
    assert!(other_backend
        .checkout(id, &store, CheckoutPolicy::Superset)
        .is_err());
    let mut bare = Workspace::new();
    let _ = bare.checkout(id, &store, CheckoutPolicy::Force).unwrap();
    assert_eq!(bare.read("/f").unwrap(), b"data");
}

#[test]
fn content_needing_a_missing_feature_is_refused_under_every_policy() {
    let sqlite_header = b"SQLite format 3\0rest of the database";
    let mut ws = Workspace::new();
    ws.write("/db.sqlite", sqlite_header).unwrap();
    let c = ws.commit(CommitOptions::new()).unwrap();
    let store: Store = c.objects().iter().map(|(i, b)| (*i, b.to_vec())).collect();
    for policy in [
        CheckoutPolicy::Superset,
        CheckoutPolicy::Strict,
        CheckoutPolicy::Force,
    ] {
        let mut target = Workspace::new();
        target.require_feature_for_prefix(&b"SQLite format 3\0"[..], "sqlite");
        match target.checkout(c.id(), &store, policy) {
            Err(CheckoutError::FeatureRequired { path, feature, .. }) => {
                assert_eq!(path, "/db.sqlite");
                assert_eq!(feature, "sqlite");
            }
            other => panic!("{policy:?}: {other:?}"),
        }
        assert!(!target.exists("/db.sqlite"));
    }
    // With the feature, it restores.
    let mut able = Workspace::new();
    able.require_feature_for_prefix(&b"SQLite format 3\0"[..], "sqlite");
    able.set_capabilities(CapabilityFingerprint::new().feature("sqlite"));
    let _ = able
        .checkout(c.id(), &store, CheckoutPolicy::Force)
        .unwrap();
    // State bytes are checked too.
    let mut st = Workspace::new();
    st.set_state(sqlite_header.to_vec());
    let snap = st.snapshot().unwrap();
    let mut target = Workspace::new();
    target.require_feature_for_prefix(&b"SQLite format 3\0"[..], "sqlite");
    match target.restore_snapshot(&snap) {
        Err(SnapshotError::Checkout(CheckoutError::FeatureRequired { path, .. })) => {
            assert_eq!(path, "<state>")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn restore_snapshot_keeps_configuration_and_checks_capabilities() {
    let mut src = live(env(&["grep", "jq"], &[]));
    src.write("/x", b"1").unwrap();
    let snap = src.snapshot().unwrap();
    // A fresh workspace from a snapshot adopts its fingerprint.
    let fresh = Workspace::from_snapshot(&snap).unwrap();
    assert_eq!(fresh.capabilities(), src.capabilities());
    // restore_snapshot keeps the instance's own fingerprint and checks against it.
    let mut poorer = live(env(&["grep"], &[]));
    assert!(matches!(
        poorer.restore_snapshot(&snap),
        Err(SnapshotError::Checkout(CheckoutError::Capabilities { .. }))
    ));
    assert!(poorer.exists("/before"));
    let mut richer = live(env(&["grep", "jq", "sed"], &[]));
    let _ = richer.restore_snapshot(&snap).unwrap();
    assert_eq!(richer.capabilities().unwrap().builtins.len(), 3);
    assert_eq!(richer.read("/x").unwrap(), b"1");
}
