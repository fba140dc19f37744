//! The packed-snapshot container, plain and keyed, from a slice and from a stream.
//!
//! Input: one flags byte, then the snapshot bytes. Flags: bit 0 recomputes the trailer
//! (checksum, and MAC when keyed) so mutations reach the parser behind it; bit 1
//! restores with the key. Every reader must refuse or accept the same inputs, a refused
//! restore must leave the target workspace untouched, and an accepted one must hold
//! exactly the snapshot's tree.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snapgraph::pack::{parse_packed_limited, read_packed_limited};
use snapgraph::{
    CheckoutPolicy, CommitOptions, DriftPolicy, RestoreOptions, SnapshotGraph, Workspace,
};
use snapgraph_fuzz::{bystander, fix_trailer, observe, small_limits, KEY};

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let key = (flags & 2 != 0).then_some(&KEY);
    let mut bytes = rest.to_vec();
    if flags & 1 != 0 {
        fix_trailer(&mut bytes, key);
    }
    let limits = small_limits();

    // The two parsers agree on what they accept, and on the objects.
    let sliced = parse_packed_limited(&bytes, key, limits.max_unpacked_bytes);
    let streamed = read_packed_limited(&bytes[..], key, limits.max_unpacked_bytes);
    match (&sliced, &streamed) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.root, b.root);
            assert_eq!(a.flags, b.flags);
            assert_eq!(a.objects.len(), b.objects.len());
            for (id, bytes) in &a.objects {
                assert_eq!(b.objects.get(id).map(|b| &b[..]), Some(&bytes[..]));
            }
        }
        (Err(_), Err(_)) => {}
        (a, b) => panic!(
            "slice and stream readers disagree: {:?} / {:?}",
            a.as_ref().err(),
            b.as_ref().err()
        ),
    }

    // A fresh workspace, under small limits.
    let fresh =
        Workspace::from_snapshot_with(&bytes, RestoreOptions::new().key(key).limits(limits));
    if let Ok(ws) = &fresh {
        // What was restored is canonical: committing it again gives the same tree.
        let mut again = ws.clone();
        let c = again
            .commit(CommitOptions::new())
            .expect("commit of a restore");
        let unpacked = sliced.as_ref().expect("restore accepted, parse refused");
        let original = SnapshotGraph::commit(unpacked.root, unpacked).expect("root commit");
        let recommitted = SnapshotGraph::commit(c.id(), c.objects()).expect("new commit");
        if unpacked.flags & 0b1100 == 0 {
            assert_eq!(original.tree, recommitted.tree);
            assert_eq!(original.state, recommitted.state);
        }
    }

    // The default entry points (default limits) behave the same.
    let default = match key {
        Some(k) => Workspace::from_snapshot_keyed(&bytes, k),
        None => Workspace::from_snapshot(&bytes),
    };
    if fresh.is_ok() {
        assert!(
            default.is_ok(),
            "default limits refused what small ones accepted"
        );
    }

    // Restores into a workspace with content: all or nothing.
    let mut target = bystander();
    let before = observe(&target);
    let r = target.restore_snapshot_from(
        &bytes[..],
        RestoreOptions::new()
            .key(key)
            .policy(CheckoutPolicy::Force)
            .drift(DriftPolicy::Off),
    );
    if r.is_err() {
        assert_eq!(
            observe(&target),
            before,
            "failed stream restore changed the workspace"
        );
    }
    let mut target = bystander();
    let r = match key {
        Some(k) => target.restore_snapshot_keyed(&bytes, k),
        None => target.restore_snapshot(&bytes),
    };
    if r.is_err() {
        assert_eq!(
            observe(&target),
            before,
            "failed restore changed the workspace"
        );
    }
});
