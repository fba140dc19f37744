//! Trees and manifest nodes a store handle has verified, kept for its later reads.
//!
//! One commit reads the same directory nodes several times: the lazy workspace loads
//! the directories holding a change, the delta hints ([`crate::similar`]) walk them
//! again beside the new ones, the store decodes them as bases of the new nodes' deltas,
//! and the CLI's summary diffs the old trees against the new. Each read from SQLite
//! is a lookup, a pack read, a decompression per level of the node's delta chain and
//! a BLAKE3 check. An id names one content forever, so bytes verified once (read and
//! re-hashed, or written and hashed here) answer every later read of that id; only
//! the *record* (its encoding, its delta depth) can change, so nothing that depends on
//! the record is kept.
//!
//! Only trees and manifest nodes are kept (small, and read again within a command);
//! chunks never (a checkout would copy every file's bytes). At most [`KNOWN_BYTES`]
//! are kept per handle: past that, nothing more is added. Deleting an id through the
//! handle forgets it.

use std::sync::Mutex;

use hashbrown::HashMap;
use snapgraph::{ObjectId, ObjectKind};

/// The most bytes of nodes one store handle keeps.
pub const KNOWN_BYTES: usize = 16 << 20;

/// Verified stored bytes of trees and manifest nodes, by id.
#[derive(Debug, Default)]
pub(crate) struct Known {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_id: HashMap<ObjectId, Vec<u8>>,
    bytes: usize,
}

impl Known {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether objects of these stored bytes are kept (trees and manifest nodes).
    pub(crate) fn keeps(stored: &[u8]) -> bool {
        matches!(stored.first(), Some(&b) if b == ObjectKind::Tree.byte() || b == ObjectKind::Manifest.byte())
    }

    /// The verified stored bytes of `id`, if kept.
    pub(crate) fn get(&self, id: &ObjectId) -> Option<Vec<u8>> {
        self.lock().by_id.get(id).cloned()
    }

    /// `None` when no id of `ids` is kept; else each id's kept bytes (or `None`) and
    /// the ids not kept, in order.
    #[allow(clippy::type_complexity)]
    pub(crate) fn split(&self, ids: &[ObjectId]) -> Option<(Vec<Option<Vec<u8>>>, Vec<ObjectId>)> {
        let inner = self.lock();
        if inner.by_id.is_empty() || !ids.iter().any(|id| inner.by_id.contains_key(id)) {
            return None;
        }
        let hits: Vec<Option<Vec<u8>>> =
            ids.iter().map(|id| inner.by_id.get(id).cloned()).collect();
        let missing = ids
            .iter()
            .zip(&hits)
            .filter(|(_, h)| h.is_none())
            .map(|(id, _)| *id)
            .collect();
        Some((hits, missing))
    }

    /// Keeps `stored` as `id`'s bytes, which the caller has verified (read back and
    /// re-hashed, or hashed itself), if it is a node and there is room.
    pub(crate) fn keep_verified(&self, id: &ObjectId, stored: &[u8]) {
        if !Self::keeps(stored) {
            return;
        }
        let mut inner = self.lock();
        if inner.bytes + stored.len() > KNOWN_BYTES || inner.by_id.contains_key(id) {
            return;
        }
        inner.bytes += stored.len();
        inner.by_id.insert(*id, stored.to_vec());
    }

    /// Keeps `stored` as `id`'s bytes if it is a node and hashes to `id` (bytes a
    /// caller wrote: the store did not compute their id).
    pub(crate) fn keep_written(&self, id: &ObjectId, stored: &[u8]) {
        if Self::keeps(stored) && ObjectId::hash_stored(stored) == *id {
            self.keep_verified(id, stored);
        }
    }

    /// Forgets `ids` (deleted through the handle).
    pub(crate) fn forget(&self, ids: &[ObjectId]) {
        let mut inner = self.lock();
        for id in ids {
            if let Some(b) = inner.by_id.remove(id) {
                inner.bytes -= b.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_verified_nodes_only_within_its_budget() {
        let tree = {
            let mut b = vec![ObjectKind::Tree.byte(), 1];
            b.extend_from_slice(b"entries");
            b
        };
        let chunk = vec![ObjectKind::Chunk.byte(), 1, 7, 7, 7];
        let k = Known::default();
        let id = ObjectId::hash_stored(&tree);
        // Written bytes that do not hash to the id are not kept.
        k.keep_written(&ObjectId::hash_stored(&chunk), &tree);
        assert_eq!(k.get(&ObjectId::hash_stored(&chunk)), None);
        k.keep_written(&id, &tree);
        assert_eq!(k.get(&id), Some(tree.clone()));
        // Chunks are never kept.
        let cid = ObjectId::hash_stored(&chunk);
        k.keep_written(&cid, &chunk);
        assert_eq!(k.get(&cid), None);
        k.forget(&[id]);
        assert_eq!(k.get(&id), None);
        // Past the budget nothing more is added.
        let big = {
            let mut b = vec![ObjectKind::Manifest.byte(), 1];
            b.resize(KNOWN_BYTES, 3);
            b
        };
        let big_id = ObjectId::hash_stored(&big);
        k.keep_verified(&big_id, &big);
        assert!(k.get(&big_id).is_some());
        k.keep_verified(&id, &tree);
        assert_eq!(k.get(&id), None);
    }
}
