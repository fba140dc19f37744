//! `FaultyStore`: a wrapper that fails chosen calls, for reliability tests.
//!
//! Wrap a store, run a scenario once to count its calls, then run it again failing
//! call 1, 2, … N in turn: after each failure the store must be consistent (every
//! ref's closure complete) and a retry must succeed. How the call fails is a
//! [`Fault`]: before doing anything, half done (a torn write), or after doing
//! everything (the reply was lost, the write is durable).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use snapgraph::ObjectId;

use crate::error::StoreError;
use crate::store::{ObjectStore, ReadCheck, RefStore, RefUpdate, ReflogEntry};

/// Which calls count (and can fail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calls {
    /// `put_many`, `delete_many`, `update_refs`, `update_refs_with_objects`.
    Writes,
    /// Every call.
    All,
}

/// How the failing call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Nothing is done; the call reports failure.
    Fail,
    /// Writes are half done, then the call reports failure. An object batch has its
    /// first half written (in order) or deleted. A ref batch has its first half of
    /// updates applied, and the rest at the start of the next call on the store: what
    /// an adapter with a journal does when a batch dies part way (the directory store
    /// rolls its journal forward on the next call). Reads fail as with `Fail`.
    Torn,
    /// The call is carried out in full, then reports failure: the reply was lost but
    /// the write is durable.
    LostReply,
}

/// The fault [`FaultyStore`] injected: the operation and its call number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Injected {
    /// The operation (`put_many`, `update_refs`, ...).
    pub op: &'static str,
    /// Its 1-based number among the counted calls.
    pub call: u64,
    /// Whether the operation writes.
    pub write: bool,
}

/// A store failing its N-th counted call once, then working again.
#[derive(Debug)]
pub struct FaultyStore<S> {
    inner: S,
    counted: Calls,
    calls: AtomicU64,
    fail_at: Mutex<Option<u64>>,
    fault: Fault,
    injected: Mutex<Option<Injected>>,
    /// The second half of a torn ref batch, applied at the start of the next call.
    journal: Mutex<Option<(Vec<RefUpdate>, String)>>,
}

impl<S> FaultyStore<S> {
    /// Wraps `inner`, counting `counted` calls, failing with [`Fault::Torn`];
    /// nothing fails until [`fail_at`](Self::fail_at).
    pub fn new(inner: S, counted: Calls) -> Self {
        Self::with_fault(inner, counted, Fault::Torn)
    }

    /// Wraps `inner`, counting `counted` calls, failing the chosen one with `fault`.
    pub fn with_fault(inner: S, counted: Calls, fault: Fault) -> Self {
        Self {
            inner,
            counted,
            calls: AtomicU64::new(0),
            fail_at: Mutex::new(None),
            fault,
            injected: Mutex::new(None),
            journal: Mutex::new(None),
        }
    }

    /// The fault injected since the last [`fail_at`](Self::fail_at), if its call came.
    pub fn injected(&self) -> Option<Injected> {
        *self.injected.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the `n`-th counted call from now (1-based) fail, once.
    pub fn fail_at(&self, n: u64) {
        self.calls.store(0, Ordering::SeqCst);
        *self.fail_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(n);
        *self.injected.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Counted calls since the last [`fail_at`](Self::fail_at) or [`reset`](Self::reset).
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Clears the count and any pending failure.
    pub fn reset(&self) {
        self.calls.store(0, Ordering::SeqCst);
        *self.fail_at.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Counts a call; `Some(error)` when this is the call to fail.
    fn tick(&self, op: &'static str, write: bool) -> Option<StoreError> {
        if !write && self.counted == Calls::Writes {
            return None;
        }
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let mut fail = self.fail_at.lock().unwrap_or_else(|p| p.into_inner());
        if *fail != Some(call) {
            return None;
        }
        *fail = None;
        *self.injected.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Injected { op, call, write });
        Some(StoreError::Injected { op, call })
    }
}

impl<S: RefStore> FaultyStore<S> {
    /// Applies the rest of a torn ref batch (the journal rolled forward).
    fn roll_forward(&self) -> Result<(), StoreError> {
        let pending = self
            .journal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match pending {
            Some((rest, message)) => self.inner.update_refs(&rest, &message),
            None => Ok(()),
        }
    }

    /// Runs one call: rolls a torn batch forward, counts the call, and fails it as
    /// the fault says. `half` does the torn half of a write (for reads: nothing).
    fn call<T>(
        &self,
        op: &'static str,
        write: bool,
        half: impl FnOnce() -> Result<(), StoreError>,
        full: impl FnOnce() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.roll_forward()?;
        let Some(err) = self.tick(op, write) else {
            return full();
        };
        match self.fault {
            Fault::Fail => {}
            Fault::Torn if write => half()?,
            Fault::Torn => {}
            Fault::LostReply => {
                full()?;
            }
        }
        Err(err)
    }
}

impl<S: ObjectStore + RefStore> ObjectStore for FaultyStore<S> {
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.call("get_many", false, || Ok(()), || self.inner.get_many(ids))
    }
    fn get_many_checked(
        &self,
        ids: &[ObjectId],
        check: ReadCheck,
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.call(
            "get_many",
            false,
            || Ok(()),
            || self.inner.get_many_checked(ids, check),
        )
    }
    fn has_many(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>, StoreError> {
        self.call("has_many", false, || Ok(()), || self.inner.has_many(ids))
    }
    fn put_many(&self, objects: &[(ObjectId, &[u8])]) -> Result<(), StoreError> {
        // A torn batch: the first half landed, in order, before the failure.
        let half = || self.inner.put_many(&objects[..objects.len() / 2]);
        self.call("put_many", true, half, || self.inner.put_many(objects))
    }
    fn put_many_with_bases(
        &self,
        objects: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
    ) -> Result<(), StoreError> {
        let n = objects.len() / 2;
        let half = || {
            self.inner
                .put_many_with_bases(&objects[..n], &bases[..n.min(bases.len())])
        };
        self.call("put_many", true, half, || {
            self.inner.put_many_with_bases(objects, bases)
        })
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
    // Neither is counted: fault plans number the calls of the operations they tear.
    fn fence(&self) -> Result<(), StoreError> {
        self.inner.fence()
    }
    fn fence_leased(&self, token: Option<ObjectId>) -> Result<(), StoreError> {
        self.inner.fence_leased(token)
    }
    fn remove_orphans(&self) -> Result<u64, StoreError> {
        self.inner.remove_orphans()
    }
    fn check_at_rest(&self) -> Result<Vec<(ObjectId, String)>, StoreError> {
        self.inner.check_at_rest()
    }
    fn repack(
        &self,
        options: &crate::repack::RepackOptions,
    ) -> Result<Option<crate::repack::RepackReport>, StoreError> {
        self.inner.repack(options)
    }
    fn delete_many(&self, ids: &[ObjectId]) -> Result<(), StoreError> {
        let half = || self.inner.delete_many(&ids[..ids.len() / 2]);
        self.call("delete_many", true, half, || self.inner.delete_many(ids))
    }
    fn for_each_id(
        &self,
        f: &mut dyn FnMut(ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.call(
            "for_each_id",
            false,
            || Ok(()),
            || self.inner.for_each_id(f),
        )
    }
    fn for_each_delta(
        &self,
        f: &mut dyn FnMut(ObjectId, ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.call(
            "for_each_delta",
            false,
            || Ok(()),
            || self.inner.for_each_delta(f),
        )
    }
}

impl<S: ObjectStore + RefStore> RefStore for FaultyStore<S> {
    fn get_ref(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        self.call("get_ref", false, || Ok(()), || self.inner.get_ref(name))
    }
    // Numbered as a `get_ref`: fault plans count the reads an operation makes.
    fn get_ref_for_update(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        self.call(
            "get_ref",
            false,
            || Ok(()),
            || self.inner.get_ref_for_update(name),
        )
    }
    fn update_refs(&self, updates: &[RefUpdate], message: &str) -> Result<(), StoreError> {
        // A torn batch: the first half applied (each update checked as the batch
        // was), the rest journaled for the next call.
        let half = || {
            let (first, rest) = updates.split_at(updates.len() / 2);
            self.inner.update_refs(first, message)?;
            *self.journal.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((rest.to_vec(), message.to_string()));
            Ok(())
        };
        self.call("update_refs", true, half, || {
            self.inner.update_refs(updates, message)
        })
    }
    fn writes_objects_with_refs(&self) -> bool {
        self.inner.writes_objects_with_refs()
    }
    /// One atomic step: a torn call is a failed one (nothing done); a lost reply is
    /// the whole step done.
    fn update_refs_with_objects(
        &self,
        objects: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
        updates: &[RefUpdate],
        message: &str,
    ) -> Result<bool, StoreError> {
        self.call(
            "update_refs_with_objects",
            true,
            || Ok(()),
            || {
                self.inner
                    .update_refs_with_objects(objects, bases, updates, message)
            },
        )
    }
    fn list_refs(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>, StoreError> {
        self.call(
            "list_refs",
            false,
            || Ok(()),
            || self.inner.list_refs(prefix),
        )
    }
    fn reflog(&self, name: &str) -> Result<Vec<ReflogEntry>, StoreError> {
        self.call("reflog", false, || Ok(()), || self.inner.reflog(name))
    }
}

impl<S: ObjectStore + RefStore> snapgraph::ObjectSource for FaultyStore<S> {
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
