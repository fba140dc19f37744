//! Checkout planning: the stateless loop and the resumable plan reach the same
//! objects, and the resumable plan reads each object once over a whole fetch loop.

mod common;

use common::{pseudo_random, Counting, Store};
use snapgraph::graph::CheckoutPlan;
use snapgraph::{CheckoutPolicy, CommitOptions, ObjectId, SnapshotGraph, Workspace};

fn remote() -> (ObjectId, Store) {
    let mut ws = Workspace::new();
    for i in 0..300u64 {
        ws.write(
            &format!("/d{}/e{}/f{i:03}", i % 7, i % 3),
            pseudo_random(100 + (i as usize * 997) % 9000, i),
        )
        .unwrap();
    }
    ws.write("/big.bin", pseudo_random(2 << 20, 99)).unwrap();
    let c = ws.commit(CommitOptions::new()).unwrap();
    (c.id(), c.into_objects().into_iter().collect())
}

#[test]
fn resumable_plan_reads_each_object_once_and_matches_the_stateless_loop() {
    let (id, remote) = remote();

    let mut local = Store::new();
    let mut plan = CheckoutPlan::new(id);
    let mut reads = 0;
    let mut rounds = 0;
    loop {
        let counting = Counting::new(&local);
        let missing = plan.missing(&counting).unwrap();
        reads += counting.objects.get();
        if missing.is_empty() {
            break;
        }
        rounds += 1;
        for m in missing {
            local.insert(m, remote[&m].clone());
        }
    }
    assert!(plan.is_done());
    assert_eq!(
        local.len(),
        remote.len(),
        "every object fetched, nothing extra"
    );
    // Each object is asked about once when it is missing and once when present.
    assert!(
        reads <= 2 * remote.len(),
        "{reads} reads for {} objects",
        remote.len()
    );
    assert!(rounds <= 10, "{rounds} rounds");

    // The stateless loop fetches the same set, re-reading what is present each round.
    let mut again = Store::new();
    let mut stateless_reads = 0;
    loop {
        let counting = Counting::new(&again);
        let missing = SnapshotGraph::plan_checkout(id, &counting).unwrap();
        stateless_reads += counting.objects.get();
        if missing.is_empty() {
            break;
        }
        for m in missing {
            again.insert(m, remote[&m].clone());
        }
    }
    assert_eq!(again, local);
    assert!(reads < stateless_reads);
    let _ = Workspace::new()
        .checkout(id, &local, CheckoutPolicy::default())
        .unwrap();
}

#[test]
fn a_failed_round_starts_over_and_skips_nothing() {
    let (id, remote) = remote();
    let mut local = Store::new();
    let mut plan = CheckoutPlan::new(id);
    let first = plan.missing(&local).unwrap();
    assert_eq!(first, vec![id]);
    local.insert(id, remote[&id].clone());
    let second = plan.missing(&local).unwrap();
    // Hand over a corrupt copy of one of them: the round fails naming it.
    let bad = second[0];
    let mut damaged = remote[&bad].clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 1;
    local.insert(bad, damaged);
    assert!(plan.missing(&local).is_err());
    // Repaired, the plan finishes and the checkout succeeds.
    local.insert(bad, remote[&bad].clone());
    loop {
        let missing = plan.missing(&local).unwrap();
        if missing.is_empty() {
            break;
        }
        for m in missing {
            local.insert(m, remote[&m].clone());
        }
    }
    assert_eq!(local.len(), remote.len());
    let _ = Workspace::new()
        .checkout(id, &local, CheckoutPolicy::default())
        .unwrap();
}
