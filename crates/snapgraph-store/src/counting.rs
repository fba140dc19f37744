//! `CountingStore`: a wrapper counting the calls and ids that reach a store, for
//! tests and benchmarks of round trips (each call to a remote store is at least one).

use std::sync::atomic::{AtomicU64, Ordering};

use snapgraph::ObjectId;

use crate::error::StoreError;
use crate::store::{ObjectStore, ReadCheck, RefStore, RefUpdate, ReflogEntry};

/// Calls and ids seen by a [`CountingStore`] since it was made or last
/// [`take`](CountingStore::take)n.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// `get_many` calls.
    pub get_calls: u64,
    /// Ids asked of `get_many`.
    pub get_ids: u64,
    /// Bytes `get_many` returned.
    pub get_bytes: u64,
    /// `has_many` calls.
    pub has_calls: u64,
    /// Ids asked of `has_many`.
    pub has_ids: u64,
    /// `put_many` calls.
    pub put_calls: u64,
    /// Objects handed to `put_many`.
    pub put_objects: u64,
    /// Bytes handed to `put_many`.
    pub put_bytes: u64,
    /// `delete_many` and `for_each_id` calls.
    pub other_object_calls: u64,
    /// Ref calls (`get_ref`, `update_refs`, `list_refs`, `reflog`).
    pub ref_calls: u64,
}

impl Counts {
    /// Every call, of any kind.
    pub fn calls(&self) -> u64 {
        self.get_calls + self.has_calls + self.put_calls + self.other_object_calls + self.ref_calls
    }
}

/// A store counting what reaches `inner`; otherwise transparent.
#[derive(Debug, Default)]
pub struct CountingStore<S> {
    inner: S,
    counters: [AtomicU64; 10],
}

const GET_CALLS: usize = 0;
const GET_IDS: usize = 1;
const HAS_CALLS: usize = 2;
const HAS_IDS: usize = 3;
const PUT_CALLS: usize = 4;
const PUT_OBJECTS: usize = 5;
const PUT_BYTES: usize = 6;
const OTHER: usize = 7;
const REFS: usize = 8;
const GET_BYTES: usize = 9;

impl<S> CountingStore<S> {
    /// Wraps `inner` with every count at zero.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            counters: Default::default(),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The counts so far.
    pub fn counts(&self) -> Counts {
        let c = |i: usize| self.counters[i].load(Ordering::Relaxed);
        Counts {
            get_calls: c(GET_CALLS),
            get_ids: c(GET_IDS),
            get_bytes: c(GET_BYTES),
            has_calls: c(HAS_CALLS),
            has_ids: c(HAS_IDS),
            put_calls: c(PUT_CALLS),
            put_objects: c(PUT_OBJECTS),
            put_bytes: c(PUT_BYTES),
            other_object_calls: c(OTHER),
            ref_calls: c(REFS),
        }
    }

    /// The counts so far, starting again from zero.
    pub fn take(&self) -> Counts {
        let counts = self.counts();
        for c in &self.counters {
            c.store(0, Ordering::Relaxed);
        }
        counts
    }

    fn add(&self, i: usize, n: u64) {
        self.counters[i].fetch_add(n, Ordering::Relaxed);
    }
}

impl<S: ObjectStore> ObjectStore for CountingStore<S> {
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.add(GET_CALLS, 1);
        self.add(GET_IDS, ids.len() as u64);
        let got = self.inner.get_many(ids)?;
        let bytes = got.iter().flatten().map(|b| b.len() as u64).sum::<u64>();
        self.add(GET_BYTES, bytes);
        Ok(got)
    }
    fn get_many_checked(
        &self,
        ids: &[ObjectId],
        check: ReadCheck,
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.add(GET_CALLS, 1);
        self.add(GET_IDS, ids.len() as u64);
        let got = self.inner.get_many_checked(ids, check)?;
        let bytes = got.iter().flatten().map(|b| b.len() as u64).sum::<u64>();
        self.add(GET_BYTES, bytes);
        Ok(got)
    }
    fn has_many(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>, StoreError> {
        self.add(HAS_CALLS, 1);
        self.add(HAS_IDS, ids.len() as u64);
        self.inner.has_many(ids)
    }
    fn put_many(&self, objects: &[(ObjectId, &[u8])]) -> Result<(), StoreError> {
        self.add(PUT_CALLS, 1);
        self.add(PUT_OBJECTS, objects.len() as u64);
        self.add(
            PUT_BYTES,
            objects.iter().map(|(_, b)| b.len() as u64).sum::<u64>(),
        );
        self.inner.put_many(objects)
    }
    fn put_many_with_bases(
        &self,
        objects: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
    ) -> Result<(), StoreError> {
        self.add(PUT_CALLS, 1);
        self.add(PUT_OBJECTS, objects.len() as u64);
        self.add(
            PUT_BYTES,
            objects.iter().map(|(_, b)| b.len() as u64).sum::<u64>(),
        );
        self.inner.put_many_with_bases(objects, bases)
    }
    fn keeps_deltas(&self) -> bool {
        self.inner.keeps_deltas()
    }
    fn will_read(&self, ids: &[ObjectId]) {
        self.inner.will_read(ids)
    }
    fn share_reads(&self, share: bool) -> Result<(), StoreError> {
        self.inner.share_reads(share)
    }
    fn fence(&self) -> Result<(), StoreError> {
        self.add(OTHER, 1);
        self.inner.fence()
    }
    fn fence_leased(&self, token: Option<ObjectId>) -> Result<(), StoreError> {
        self.add(OTHER, 1);
        self.inner.fence_leased(token)
    }
    fn remove_orphans(&self) -> Result<u64, StoreError> {
        self.add(OTHER, 1);
        self.inner.remove_orphans()
    }
    fn check_at_rest(&self) -> Result<Vec<(ObjectId, String)>, StoreError> {
        self.add(OTHER, 1);
        self.inner.check_at_rest()
    }
    fn repack(
        &self,
        options: &crate::repack::RepackOptions,
    ) -> Result<Option<crate::repack::RepackReport>, StoreError> {
        self.add(OTHER, 1);
        self.inner.repack(options)
    }
    fn delete_many(&self, ids: &[ObjectId]) -> Result<(), StoreError> {
        self.add(OTHER, 1);
        self.inner.delete_many(ids)
    }
    fn for_each_id(
        &self,
        f: &mut dyn FnMut(ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.add(OTHER, 1);
        self.inner.for_each_id(f)
    }
    fn for_each_delta(
        &self,
        f: &mut dyn FnMut(ObjectId, ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.add(OTHER, 1);
        self.inner.for_each_delta(f)
    }
}

impl<S: RefStore> RefStore for CountingStore<S> {
    fn get_ref(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        self.add(REFS, 1);
        self.inner.get_ref(name)
    }
    fn get_ref_for_update(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        self.add(REFS, 1);
        self.inner.get_ref_for_update(name)
    }
    fn update_refs(&self, updates: &[RefUpdate], message: &str) -> Result<(), StoreError> {
        self.add(REFS, 1);
        self.inner.update_refs(updates, message)
    }
    fn writes_objects_with_refs(&self) -> bool {
        self.inner.writes_objects_with_refs()
    }
    /// Counted as one ref call, and as one `put_many` of its objects.
    fn update_refs_with_objects(
        &self,
        objects: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
        updates: &[RefUpdate],
        message: &str,
    ) -> Result<bool, StoreError> {
        self.add(REFS, 1);
        self.add(PUT_CALLS, 1);
        self.add(PUT_OBJECTS, objects.len() as u64);
        self.add(
            PUT_BYTES,
            objects.iter().map(|(_, b)| b.len() as u64).sum::<u64>(),
        );
        self.inner
            .update_refs_with_objects(objects, bases, updates, message)
    }
    fn list_refs(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>, StoreError> {
        self.add(REFS, 1);
        self.inner.list_refs(prefix)
    }
    fn reflog(&self, name: &str) -> Result<Vec<ReflogEntry>, StoreError> {
        self.add(REFS, 1);
        self.inner.reflog(name)
    }
}

impl<S: ObjectStore> snapgraph::ObjectSource for CountingStore<S> {
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
    fn contains_many(&self, ids: &[ObjectId]) -> Result<Vec<bool>, snapgraph::BoxError> {
        crate::store::source_contains_many(self, ids)
    }
    fn will_read(&self, ids: &[ObjectId]) {
        crate::store::ObjectStore::will_read(self, ids)
    }
}
