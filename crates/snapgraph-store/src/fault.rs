//! `FaultyStore`: a wrapper that fails chosen calls, for reliability tests.
//!
//! Wrap a store, run a scenario once to count its calls, then run it again failing
//! call 1, 2, … N in turn: after each failure the store must be consistent (every
//! ref's closure complete) and a retry must succeed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use snapgraph::ObjectId;

use crate::error::StoreError;
use crate::store::{ObjectStore, RefStore, RefUpdate, ReflogEntry};

/// Which calls count (and can fail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calls {
    /// `put_many`, `delete_many`, `update_refs`.
    Writes,
    /// Every call.
    All,
}

/// A store failing its N-th counted call once, then working again.
#[derive(Debug)]
pub struct FaultyStore<S> {
    inner: S,
    counted: Calls,
    calls: AtomicU64,
    fail_at: Mutex<Option<u64>>,
    /// Whether a failing `put_many` first writes half its batch (a torn write).
    partial: bool,
}

impl<S> FaultyStore<S> {
    /// Wraps `inner`, counting `counted` calls; nothing fails until
    /// [`fail_at`](Self::fail_at).
    pub fn new(inner: S, counted: Calls) -> Self {
        Self {
            inner,
            counted,
            calls: AtomicU64::new(0),
            fail_at: Mutex::new(None),
            partial: true,
        }
    }

    /// Makes the `n`-th counted call from now (1-based) fail, once.
    pub fn fail_at(&self, n: u64) {
        self.calls.store(0, Ordering::SeqCst);
        *self.fail_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(n);
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

    fn tick(&self, op: &'static str, write: bool) -> Result<(), StoreError> {
        if !write && self.counted == Calls::Writes {
            return Ok(());
        }
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let mut fail = self.fail_at.lock().unwrap_or_else(|p| p.into_inner());
        if *fail == Some(call) {
            *fail = None;
            return Err(StoreError::Injected { op, call });
        }
        Ok(())
    }
}

impl<S: ObjectStore> ObjectStore for FaultyStore<S> {
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.tick("get_many", false)?;
        crate::store::ObjectStore::get_many(&self.inner, ids)
    }
    fn has_many(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>, StoreError> {
        self.tick("has_many", false)?;
        self.inner.has_many(ids)
    }
    fn put_many(&self, objects: &[(ObjectId, &[u8])]) -> Result<(), StoreError> {
        if let Err(e) = self.tick("put_many", true) {
            if self.partial {
                // A torn batch: the first half landed, in order, before the failure.
                self.inner.put_many(&objects[..objects.len() / 2])?;
            }
            return Err(e);
        }
        self.inner.put_many(objects)
    }
    fn delete_many(&self, ids: &[ObjectId]) -> Result<(), StoreError> {
        if let Err(e) = self.tick("delete_many", true) {
            if self.partial {
                self.inner.delete_many(&ids[..ids.len() / 2])?;
            }
            return Err(e);
        }
        self.inner.delete_many(ids)
    }
    fn for_each_id(
        &self,
        f: &mut dyn FnMut(ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.tick("for_each_id", false)?;
        self.inner.for_each_id(f)
    }
}

impl<S: RefStore> RefStore for FaultyStore<S> {
    fn get_ref(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        self.tick("get_ref", false)?;
        self.inner.get_ref(name)
    }
    fn update_refs(&self, updates: &[RefUpdate], message: &str) -> Result<(), StoreError> {
        self.tick("update_refs", true)?;
        self.inner.update_refs(updates, message)
    }
    fn list_refs(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>, StoreError> {
        self.tick("list_refs", false)?;
        self.inner.list_refs(prefix)
    }
    fn reflog(&self, name: &str) -> Result<Vec<ReflogEntry>, StoreError> {
        self.tick("reflog", false)?;
        self.inner.reflog(name)
    }
}

impl<S: ObjectStore> snapgraph::ObjectSource for FaultyStore<S> {
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
}
