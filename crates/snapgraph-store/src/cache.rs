//! `CachingStore`: a local store (SQLite, a directory, memory) in front of a remote
//! one (PostgreSQL, S3, any [`ObjectStore`] + [`RefStore`]), so a sandbox starts from
//! a shared remote history and fetches only the objects it reads.
//!
//! ```
//! use snapgraph::Workspace;
//! use snapgraph_store::cache::CachingStore;
//! use snapgraph_store::{MemoryStore, Repo, RepoCommitOptions};
//!
//! // The shared history (here in memory; `open("postgres://…")` in production).
//! let remote = Repo::new(MemoryStore::new());
//! let mut ws = Workspace::new();
//! ws.write("/src/main.rs", b"fn main() {}")?;
//! ws.write("/data/big.bin", vec![7u8; 100_000])?;
//! remote.commit(&mut ws, "main", RepoCommitOptions::message("start"))?;
//!
//! // A sandbox: trees only, then the one file it opens.
//! let repo = Repo::new(CachingStore::new(MemoryStore::new(), remote.into_store()));
//! let mut ws = repo.checkout_shallow("main")?;
//! ws.load_content("/src/main.rs", repo.store())?;
//! assert_eq!(ws.read("/src/main.rs")?, b"fn main() {}");
//! assert!(repo.store().stats().fetched > 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Opened by URL as `cache:LOCAL|REMOTE` (see [`open`](crate::open())), e.g.
//! `cache:sqlite:/var/cache/sg.db|postgres://db.internal/history`.
//!
//! # What goes where
//!
//! - **Reads** (`get_many`) ask the local store first, in one call; the ids it lacks
//!   are asked of the remote in one call, and what comes back fills the local store.
//!   A second read of the same objects makes no remote call. Fills are written to
//!   the local store in batches (up to [`FILL_BATCH_OBJECTS`] objects or
//!   [`FILL_BATCH_BYTES`], served from memory meanwhile; [`CachingStore::flush`] and
//!   dropping the store write the rest), because the core reads trees and small
//!   files one object per call, and one local transaction per object would cost
//!   more than the remote round trip it saves.
//! - **Writes** (`put_many`) go to the remote first (durable when it returns), then
//!   to the local store; `delete_many` deletes from both, the remote first.
//! - **Presence** (`has_many`, `for_each_id`) and **refs** are the remote's answers
//!   only. The local store is not closed under references (a shallow checkout caches
//!   trees without their files) and may keep objects the remote's GC deleted, so it
//!   never answers "held": a commit that skipped an object because the cache held it
//!   could publish a ref to a closure the remote lacks.
//!
//! The local store's own refs are unused: it is a cache, never a history of its own,
//! and can be deleted at any time (the next reads refill it). Nothing evicts cached
//! objects; delete the cache to reclaim its space. Run `gc` and `verify` against the
//! remote directly: through the cache they would read every reachable object into it.
//!
//! # Trust and failures
//!
//! Every adapter re-hashes what it reads (the [`ObjectStore`] contract) and reports
//! an object that does not hash to its id as [`StoreError::Corrupt`]. When the local
//! store does, the object is deleted from the cache and fetched again from the
//! remote, and counted in [`CacheStats::repaired`]; the read succeeds. A corrupt
//! object in the remote is the remote's [`StoreError::Corrupt`], and nothing of that
//! read is cached.
//!
//! A failure of the remote (its [`StoreError::Backend`], an injected fault, anything
//! but an answer about the data) comes back as [`StoreError::Remote`] naming the
//! operation, with the remote's error as its source; nothing of the failed call is
//! cached. Answers pass through unchanged: [`StoreError::RefConflict`],
//! [`StoreError::InvalidRefName`], [`StoreError::Corrupt`]. Objects already cached
//! keep reading while the remote is down. A failure of the local store is its own
//! error (naming its path), returned as is.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use snapgraph::ObjectId;

use crate::error::StoreError;
use crate::store::{ObjectStore, RefStore, RefUpdate, ReflogEntry};

/// What a [`CachingStore`] served since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Objects read from the local store.
    pub hits: u64,
    /// Objects fetched from the remote (and written to the local store).
    pub fetched: u64,
    /// Cached objects that were corrupt, deleted from the cache and fetched again.
    pub repaired: u64,
}

/// Fetched objects held in memory before one `put_many` writes them to the local
/// store: at most this many...
pub const FILL_BATCH_OBJECTS: usize = 1024;
/// ...or this many bytes.
pub const FILL_BATCH_BYTES: usize = 8 << 20;

/// Fetched objects not yet written to the local store.
#[derive(Debug, Default)]
struct Pending {
    objects: HashMap<ObjectId, Vec<u8>>,
    bytes: usize,
}

/// A local store in front of a remote one: reads fall through and fill the local
/// store, writes go through to both (module docs: [`crate::cache`]).
#[derive(Debug)]
pub struct CachingStore<L: ObjectStore, R> {
    local: L,
    remote: R,
    pending: Mutex<Pending>,
    hits: AtomicU64,
    fetched: AtomicU64,
    repaired: AtomicU64,
}

impl<L: ObjectStore, R> CachingStore<L, R> {
    /// Caches `remote`'s objects in `local` (usually empty at first; whatever it
    /// holds is served as long as it hashes to its id).
    pub fn new(local: L, remote: R) -> Self {
        Self {
            local,
            remote,
            pending: Mutex::new(Pending::default()),
            hits: AtomicU64::new(0),
            fetched: AtomicU64::new(0),
            repaired: AtomicU64::new(0),
        }
    }

    /// The local store (the cache).
    pub fn local(&self) -> &L {
        &self.local
    }

    /// The remote store (the history).
    pub fn remote(&self) -> &R {
        &self.remote
    }

    /// What was served so far.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            fetched: self.fetched.load(Ordering::Relaxed),
            repaired: self.repaired.load(Ordering::Relaxed),
        }
    }
}

/// The remote's `err` as a caching store returns it: failures wrapped in
/// [`StoreError::Remote`], answers about the data unchanged.
fn remote_err(op: &'static str, err: StoreError) -> StoreError {
    match err {
        StoreError::RefConflict { .. }
        | StoreError::InvalidRefName { .. }
        | StoreError::Corrupt { .. }
        | StoreError::Remote { .. } => err,
        err => StoreError::Remote {
            op,
            source: Box::new(err),
        },
    }
}

impl<L: ObjectStore, R> CachingStore<L, R> {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes the fetched objects still held in memory to the local store. Dropping
    /// the store does it too, ignoring errors (a lost fill only costs a fetch).
    pub fn flush(&self) -> Result<(), StoreError> {
        let objects = std::mem::take(&mut *self.pending()).objects;
        if objects.is_empty() {
            return Ok(());
        }
        let batch: Vec<(ObjectId, &[u8])> =
            objects.iter().map(|(id, b)| (*id, b.as_slice())).collect();
        self.local.put_many(&batch)
    }

    /// The local store's answer for `ids`; objects it reports corrupt are deleted
    /// from it first, so they come back as `None` (and are fetched again).
    fn read_local(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let mut evicted = 0;
        let got = loop {
            match self.local.get_many(ids) {
                Ok(got) => break got,
                // The adapter's own re-hash failed for one object: drop it and ask
                // again (at most once per id, in case the delete does not take).
                Err(StoreError::Corrupt { id, .. }) if evicted < ids.len() && ids.contains(&id) => {
                    self.local.delete_many(&[id])?;
                    self.repaired.fetch_add(1, Ordering::Relaxed);
                    evicted += 1;
                }
                Err(e) => return Err(e),
            }
        };
        if got.len() != ids.len() {
            return Err(StoreError::backend(
                "local store of a caching store: get_many",
                format!("answered {} results for {} ids", got.len(), ids.len()),
            ));
        }
        Ok(got)
    }
}

impl<L: ObjectStore, R: ObjectStore> ObjectStore for CachingStore<L, R> {
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let mut out: Vec<Option<Vec<u8>>> = {
            let pending = self.pending();
            ids.iter()
                .map(|id| pending.objects.get(id).cloned())
                .collect()
        };
        let unfilled: Vec<usize> = (0..ids.len()).filter(|&i| out[i].is_none()).collect();
        if !unfilled.is_empty() {
            let ask: Vec<ObjectId> = unfilled.iter().map(|&i| ids[i]).collect();
            for (&i, got) in unfilled.iter().zip(self.read_local(&ask)?) {
                out[i] = got;
            }
        }
        let missing: Vec<usize> = (0..ids.len()).filter(|&i| out[i].is_none()).collect();
        self.hits
            .fetch_add((ids.len() - missing.len()) as u64, Ordering::Relaxed);
        if missing.is_empty() {
            return Ok(out);
        }
        let ask: Vec<ObjectId> = missing.iter().map(|&i| ids[i]).collect();
        let got = self
            .remote
            .get_many(&ask)
            .map_err(|e| remote_err("get_many", e))?;
        if got.len() != ask.len() {
            return Err(remote_err(
                "get_many",
                StoreError::backend(
                    "get_many",
                    format!("answered {} results for {} ids", got.len(), ask.len()),
                ),
            ));
        }
        let mut fetched = 0;
        let full = {
            let mut pending = self.pending();
            for (&i, bytes) in missing.iter().zip(got) {
                if let Some(b) = bytes {
                    if pending.objects.insert(ids[i], b.clone()).is_none() {
                        pending.bytes += b.len();
                        fetched += 1;
                    }
                    out[i] = Some(b);
                }
            }
            pending.objects.len() >= FILL_BATCH_OBJECTS || pending.bytes >= FILL_BATCH_BYTES
        };
        self.fetched.fetch_add(fetched, Ordering::Relaxed);
        if full {
            self.flush()?;
        }
        Ok(out)
    }

    fn has_many(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>, StoreError> {
        self.remote
            .has_many(ids)
            .map_err(|e| remote_err("has_many", e))
    }

    fn put_many(&self, objects: &[(ObjectId, &[u8])]) -> Result<(), StoreError> {
        self.remote
            .put_many(objects)
            .map_err(|e| remote_err("put_many", e))?;
        self.local.put_many(objects)
    }

    /// Hints go to both stores: each encodes against a base it holds.
    fn put_many_with_bases(
        &self,
        objects: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
    ) -> Result<(), StoreError> {
        self.remote
            .put_many_with_bases(objects, bases)
            .map_err(|e| remote_err("put_many", e))?;
        self.local.put_many_with_bases(objects, bases)
    }

    fn keeps_deltas(&self) -> bool {
        self.remote.keeps_deltas() || self.local.keeps_deltas()
    }

    /// Only the ids the cache lacks reach the remote (the rest read locally).
    fn share_reads(&self, share: bool) -> Result<(), StoreError> {
        self.local.share_reads(share)?;
        self.remote.share_reads(share)
    }
    fn will_read(&self, ids: &[ObjectId]) {
        if let Ok(absent) = self.local.has_many(ids) {
            if !absent.is_empty() {
                self.remote.will_read(&absent);
            }
        }
    }

    /// `has_many` answers from the remote: the fence is the remote's.
    fn fence(&self) -> Result<(), StoreError> {
        self.remote.fence().map_err(|e| remote_err("fence", e))
    }

    fn fence_leased(&self, token: Option<ObjectId>) -> Result<(), StoreError> {
        self.remote
            .fence_leased(token)
            .map_err(|e| remote_err("fence", e))
    }

    fn remove_orphans(&self) -> Result<u64, StoreError> {
        let remote = self
            .remote
            .remove_orphans()
            .map_err(|e| remote_err("remove_orphans", e))?;
        Ok(remote + self.local.remove_orphans()?)
    }

    /// The remote store's (what `has_many` and `for_each_id` answer for).
    fn check_at_rest(&self) -> Result<Vec<(ObjectId, String)>, StoreError> {
        self.remote
            .check_at_rest()
            .map_err(|e| remote_err("check_at_rest", e))
    }

    /// The local cache is repacked; the remote store is left to its own maintenance.
    fn repack(
        &self,
        options: &crate::repack::RepackOptions,
    ) -> Result<Option<crate::repack::RepackReport>, StoreError> {
        self.local.repack(options)
    }

    fn delete_many(&self, ids: &[ObjectId]) -> Result<(), StoreError> {
        {
            let mut pending = self.pending();
            for id in ids {
                if let Some(b) = pending.objects.remove(id) {
                    pending.bytes -= b.len();
                }
            }
        }
        self.remote
            .delete_many(ids)
            .map_err(|e| remote_err("delete_many", e))?;
        self.local.delete_many(ids)
    }

    fn for_each_id(
        &self,
        f: &mut dyn FnMut(ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        // The callback's own error comes back as it was, not as the remote's.
        let mut stopped = None;
        let result = self.remote.for_each_id(&mut |id| {
            f(id).map_err(|e| {
                stopped = Some(e);
                StoreError::backend("for_each_id", "stopped by the callback")
            })
        });
        match (stopped, result) {
            (Some(e), _) => Err(e),
            (None, r) => r.map_err(|e| remote_err("for_each_id", e)),
        }
    }
}

impl<L: ObjectStore, R> Drop for CachingStore<L, R> {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

impl<L: ObjectStore, R: RefStore> RefStore for CachingStore<L, R> {
    fn get_ref(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        self.remote
            .get_ref(name)
            .map_err(|e| remote_err("get_ref", e))
    }
    fn get_ref_for_update(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        self.remote
            .get_ref_for_update(name)
            .map_err(|e| remote_err("get_ref", e))
    }
    fn update_refs(&self, updates: &[RefUpdate], message: &str) -> Result<(), StoreError> {
        self.remote
            .update_refs(updates, message)
            .map_err(|e| remote_err("update_refs", e))
    }
    fn list_refs(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>, StoreError> {
        self.remote
            .list_refs(prefix)
            .map_err(|e| remote_err("list_refs", e))
    }
    fn reflog(&self, name: &str) -> Result<Vec<ReflogEntry>, StoreError> {
        self.remote
            .reflog(name)
            .map_err(|e| remote_err("reflog", e))
    }
}

impl<L: ObjectStore, R: ObjectStore> snapgraph::ObjectSource for CachingStore<L, R> {
    fn get(
        &self,
        id: &ObjectId,
    ) -> Result<Option<std::borrow::Cow<'_, [u8]>>, snapgraph::BoxError> {
        crate::store::source_get(self, id)
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, snapgraph::BoxError> {
        crate::store::source_contains(self, id)
    }
    fn get_many(
        &self,
        ids: &[ObjectId],
    ) -> Result<Vec<Option<std::borrow::Cow<'_, [u8]>>>, snapgraph::BoxError> {
        crate::store::source_get_many(self, ids)
    }
    fn will_read(&self, ids: &[ObjectId]) {
        crate::store::ObjectStore::will_read(self, ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::{Calls, Fault, FaultyStore};
    use crate::MemoryStore;

    fn object(text: &[u8]) -> (ObjectId, Vec<u8>) {
        (ObjectId::hash_stored(text), text.to_vec())
    }

    #[test]
    fn a_remote_failure_is_typed_and_cached_objects_still_read() {
        let (a, a_bytes) = object(b"cached before the failure");
        let (b, b_bytes) = object(b"never cached");
        let remote = FaultyStore::with_fault(MemoryStore::new(), Calls::All, Fault::Fail);
        remote.put_many(&[(a, &a_bytes), (b, &b_bytes)]).unwrap();
        let cache = CachingStore::new(MemoryStore::new(), remote);
        assert_eq!(cache.get_many(&[a]).unwrap(), vec![Some(a_bytes.clone())]);

        cache.remote().fail_at(1);
        let err = cache.get_many(&[a, b]).unwrap_err();
        match err {
            StoreError::Remote { op, source } => {
                assert_eq!(op, "get_many");
                assert!(matches!(*source, StoreError::Injected { .. }));
            }
            other => panic!("expected StoreError::Remote, got {other:?}"),
        }
        // Nothing half-cached; the cached object reads without the remote.
        assert_eq!(cache.local().has_many(&[b]).unwrap(), vec![b]);
        cache.remote().fail_at(1);
        assert_eq!(cache.get_many(&[a]).unwrap(), vec![Some(a_bytes)]);
    }

    #[test]
    fn a_corrupt_cached_object_is_fetched_again() {
        let (a, a_bytes) = object(b"good bytes");
        let (b, b_bytes) = object(b"another object");
        let remote = crate::counting::CountingStore::new(MemoryStore::new());
        remote.put_many(&[(a, &a_bytes), (b, &b_bytes)]).unwrap();
        let cache = CachingStore::new(MemoryStore::new(), remote);
        cache.get_many(&[a, b]).unwrap();
        cache.flush().unwrap();
        assert!(
            cache.local().has_many(&[a, b]).unwrap().is_empty(),
            "filled"
        );
        cache.local().corrupt(a, b"bad bytes".to_vec());
        cache.remote().take();

        let got = cache.get_many(&[a, b]).unwrap();
        assert_eq!(got, vec![Some(a_bytes.clone()), Some(b_bytes)]);
        assert_eq!(cache.stats().repaired, 1);
        let c = cache.remote().take();
        assert_eq!(
            (c.get_calls, c.get_ids),
            (1, 1),
            "only the corrupt one fetched"
        );
        // Repaired in place: the next read is a hit.
        assert_eq!(cache.get_many(&[a]).unwrap(), vec![Some(a_bytes)]);
        assert_eq!(cache.remote().take().get_calls, 0);
    }

    #[test]
    fn fills_reach_the_local_store_in_batches() {
        let objects: Vec<(ObjectId, Vec<u8>)> = (0..FILL_BATCH_OBJECTS + 10)
            .map(|i| object(format!("object {i}").as_bytes()))
            .collect();
        let remote = MemoryStore::new();
        let batch: Vec<(ObjectId, &[u8])> = objects.iter().map(|(id, b)| (*id, &b[..])).collect();
        remote.put_many(&batch).unwrap();
        let local = std::sync::Arc::new(MemoryStore::new());
        let cache = CachingStore::new(crate::counting::CountingStore::new(local.clone()), remote);
        // One object per call, as the core reads trees and small files.
        for (id, bytes) in &objects[..10] {
            assert_eq!(cache.get_many(&[*id]).unwrap(), vec![Some(bytes.clone())]);
        }
        assert_eq!(cache.local().counts().put_calls, 0, "held in memory");
        assert_eq!(
            cache.get_many(&[objects[3].0]).unwrap()[0].as_ref(),
            Some(&objects[3].1)
        );
        for (id, _) in &objects[10..] {
            cache.get_many(&[*id]).unwrap();
        }
        let c = cache.local().counts();
        assert_eq!((c.put_calls, c.put_objects), (1, FILL_BATCH_OBJECTS as u64));
        drop(cache);
        assert_eq!(
            local.len(),
            objects.len(),
            "dropping the store writes the rest"
        );
    }
}
