//! Checkout from a source that hands its buffers over (issue #21): a store that
//! decodes what it reads answers `Cow::Owned`, and checkout keeps those chunk buffers
//! as the file's bytes instead of copying them into one. Everything a user can see
//! must be as after a checkout from a lending source (a map, `Cow::Borrowed`): the
//! bytes, the ids a later commit makes, content rules, clones, snapshots.

mod common;

use std::borrow::Cow;

use common::{persist, pseudo_random, Store};
use snapgraph::{
    BoxError, CheckoutError, CheckoutPolicy, CommitOptions, ObjectId, ObjectSource, Workspace,
};

/// Answers every read with a fresh buffer of its own (`Cow::Owned`), as a database
/// does; `lend_some` lends (`Cow::Borrowed`) the objects whose id starts with an even
/// byte instead, so one file mixes handed-over and lent chunks.
struct Owning<'a> {
    inner: &'a Store,
    lend_some: bool,
}

impl ObjectSource for Owning<'_> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        let lend = self.lend_some && id.as_bytes()[0].is_multiple_of(2);
        Ok(self.inner.get(id).map(|v| {
            if lend {
                Cow::Borrowed(&v[..])
            } else {
                Cow::Owned(v.clone())
            }
        }))
    }
}

const BIG: &str = "/data/big.bin";
const MEDIUM: &str = "/data/medium.bin";

/// A workspace of a multi-chunk file, a single-chunk one, a small one and a large
/// state, committed into a store.
fn fixture() -> (Workspace, Store, ObjectId) {
    let mut ws = Workspace::new();
    ws.write(BIG, pseudo_random(3 << 20, 21)).unwrap();
    ws.write(MEDIUM, pseudo_random(9_000, 22)).unwrap();
    ws.write("/small.txt", b"hello").unwrap();
    ws.set_state(pseudo_random(300_000, 23));
    let mut store = Store::new();
    let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    (ws, store, id)
}

fn checkout(source: &impl ObjectSource, id: ObjectId, threads: usize) -> Workspace {
    let mut ws = Workspace::new();
    ws.set_parallelism(threads);
    ws.checkout(id, source, CheckoutPolicy::Force)
        .unwrap()
        .verify(|_| None)
        .unwrap();
    ws
}

#[test]
fn handed_over_chunks_restore_the_same_bytes_and_ids() {
    let (original, store, id) = fixture();
    for lend_some in [false, true] {
        for threads in [1, 2] {
            let owning = Owning {
                inner: &store,
                lend_some,
            };
            let mut ws = checkout(&owning, id, threads);
            for path in [BIG, MEDIUM, "/small.txt"] {
                assert_eq!(
                    ws.read(path).unwrap(),
                    original.read(path).unwrap(),
                    "{path}"
                );
            }
            assert_eq!(ws.state(), original.state());
            // Committing unchanged content (no parent, no meta) makes the same commit.
            let again = ws.commit(CommitOptions::new()).unwrap();
            assert_eq!(again.id(), id);
            // A 16-byte edit of the held file re-chunks around it, as after a
            // checkout from the map.
            let mut lent = checkout(&store, id, threads);
            let mut edited = original.read(BIG).unwrap().to_vec();
            edited[1_500_000..1_500_016].copy_from_slice(&[0xAB; 16]);
            ws.write(BIG, edited.clone()).unwrap();
            lent.write(BIG, edited).unwrap();
            let (a, b) = (
                ws.commit(CommitOptions::new()).unwrap(),
                lent.commit(CommitOptions::new()).unwrap(),
            );
            assert_eq!(a.id(), b.id());
        }
    }
}

#[test]
fn content_rules_see_a_prefix_spanning_held_chunks() {
    let (original, store, id) = fixture();
    let owning = Owning {
        inner: &store,
        lend_some: false,
    };
    // Longer than the largest chunk, so it spans at least two of the file's chunks.
    let prefix = original.read(BIG).unwrap()[..70_000].to_vec();
    let mut refused = Workspace::new();
    refused.require_feature_for_prefix(prefix.clone(), "big-format");
    let err = refused
        .checkout(id, &owning, CheckoutPolicy::Force)
        .unwrap_err();
    assert!(
        matches!(&err, CheckoutError::FeatureRequired { path, feature, .. }
            if path == BIG && feature == "big-format"),
        "{err}"
    );
    assert!(
        refused.read(BIG).is_err(),
        "a refused checkout applies nothing"
    );
    // The same prefix with its last byte changed matches nothing.
    let mut other = prefix;
    *other.last_mut().unwrap() ^= 1;
    let mut accepted = Workspace::new();
    accepted.require_feature_for_prefix(other, "big-format");
    accepted
        .checkout(id, &owning, CheckoutPolicy::Force)
        .unwrap()
        .verify(|_| None)
        .unwrap();
    assert_eq!(accepted.read(BIG).unwrap(), original.read(BIG).unwrap());
}

#[test]
fn clones_threads_and_snapshots_read_held_chunks_once_joined() {
    let (original, store, id) = fixture();
    let owning = Owning {
        inner: &store,
        lend_some: false,
    };
    let ws = checkout(&owning, id, 2);
    let fork = ws.clone();
    let expected = original.read(BIG).unwrap();
    // Two threads borrowing the bytes at once both see them whole.
    std::thread::scope(|scope| {
        let a = scope.spawn(|| ws.read(BIG).unwrap().to_vec());
        let b = scope.spawn(|| fork.read(BIG).unwrap().to_vec());
        assert_eq!(a.join().unwrap(), expected);
        assert_eq!(b.join().unwrap(), expected);
    });
    // A clone shares the joined bytes (no second copy).
    assert_eq!(
        ws.read(BIG).unwrap().as_ptr(),
        fork.read(BIG).unwrap().as_ptr()
    );
    // A packed snapshot of a fresh checkout (bytes never borrowed) restores them.
    let fresh = checkout(&owning, id, 1);
    let restored = Workspace::from_snapshot(&fresh.snapshot().unwrap()).unwrap();
    assert_eq!(restored.read(BIG).unwrap(), expected);
    assert_eq!(
        restored.read(MEDIUM).unwrap(),
        original.read(MEDIUM).unwrap()
    );
}
