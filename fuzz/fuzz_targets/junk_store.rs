//! Checkout, plan_checkout, diff, ancestry and reachability over an arbitrary store.
//!
//! The store is built by `snapgraph_fuzz::build_store`: object templates whose
//! reference slots are filled with the ids of earlier objects, stored under their true
//! hash or under another id. Commits are the records that start with the commit kind.
//! Every query must return (never panic or run away), a failed checkout must leave the
//! workspace untouched, and an accepted one must be canonical.
#![no_main]

use libfuzzer_sys::fuzz_target;
use snapgraph::{CheckoutPolicy, CommitOptions, SnapshotGraph};
use snapgraph_fuzz::{build_store, bystander, observe, small_limits};

fuzz_target!(|data: &[u8]| {
    let junk = build_store(data);
    let store = &junk.store;
    let Some(&last) = junk.commits.last().or(junk.keys.last()) else {
        return;
    };
    let first = junk
        .commits
        .len()
        .checked_sub(2)
        .map_or(last, |i| junk.commits[i]);
    let limits = small_limits();

    let mut ws = bystander();
    let before = observe(&ws);
    match ws.checkout(last, store, CheckoutPolicy::Force) {
        Ok(_) => {
            let commit = SnapshotGraph::commit(last, store).expect("checked out commit reads");
            let again = ws
                .commit(CommitOptions::new())
                .expect("commit of a checkout");
            let recommitted = SnapshotGraph::commit(again.id(), again.objects()).unwrap();
            assert_eq!(
                commit.tree, recommitted.tree,
                "accepted tree is not canonical"
            );
            assert_eq!(commit.state, recommitted.state);
            // Everything it needed was there.
            assert!(SnapshotGraph::plan_checkout(last, store)
                .unwrap()
                .is_empty());
            SnapshotGraph::reachable(last, store).expect("a checkout's objects are reachable");
        }
        Err(_) => assert_eq!(
            observe(&ws),
            before,
            "failed checkout changed the workspace"
        ),
    }

    let _ = SnapshotGraph::plan_checkout(last, store);
    let _ = SnapshotGraph::reachable(last, store);
    let _ = SnapshotGraph::reachable_history(last, store);
    let _ = SnapshotGraph::capabilities(last, store);
    let _ = SnapshotGraph::external_reads(last, store);
    if let Ok(a) = SnapshotGraph::ancestry(last, store, 64) {
        assert!(a.len() <= 64);
        assert_eq!(a.first(), Some(&last));
    }
    if let Ok(d) = SnapshotGraph::diff_with_limits(first, last, store, &limits) {
        for list in [&d.files_added, &d.files_modified, &d.files_removed] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "diff lists unsorted");
            assert!(list.len() as u64 <= 2 * limits.max_files);
        }
    }
    // A diff of a commit with itself is empty whenever the commit reads.
    if SnapshotGraph::commit(last, store).is_ok() {
        assert!(SnapshotGraph::diff_with_limits(last, last, store, &limits)
            .unwrap()
            .is_empty());
    }
});
