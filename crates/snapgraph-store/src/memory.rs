//! The in-memory adapter: a mutex around maps. For tests, caches and short sessions.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use snapgraph::ObjectId;

use crate::error::StoreError;
use crate::refs::apply_updates;
use crate::store::{ObjectStore, ReadCheck, RefStore, RefUpdate, ReflogEntry};

#[derive(Debug, Default)]
struct State {
    objects: HashMap<ObjectId, Arc<[u8]>>,
    refs: BTreeMap<String, ObjectId>,
    reflog: HashMap<String, Vec<ReflogEntry>>,
}

impl State {
    /// Checks `updates`, then adds `objects` (those held kept) and applies the
    /// updates with their reflog entries: all or, on a conflict, nothing.
    fn update(
        &mut self,
        updates: &[RefUpdate],
        message: &str,
        objects: &[(ObjectId, &[u8])],
    ) -> Result<(), StoreError> {
        apply_updates(updates, |name| Ok(self.refs.get(name).copied()))?;
        for (id, bytes) in objects {
            self.objects.entry(*id).or_insert_with(|| Arc::from(*bytes));
        }
        for u in updates.iter().filter(|u| u.changes()) {
            match u.new {
                Some(id) => self.refs.insert(u.name.clone(), id),
                None => self.refs.remove(&u.name),
            };
            if crate::refs::logged(&u.name) {
                self.reflog
                    .entry(u.name.clone())
                    .or_default()
                    .push(ReflogEntry {
                        old: u.expected,
                        new: u.new,
                        message: message.to_string(),
                    });
            }
        }
        Ok(())
    }
}

/// A store in memory. Reads verify like every adapter's, so a test can corrupt an
/// object with [`corrupt`](Self::corrupt) and see the error a real store would give.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps half-updated (every
        // change is one insert or one batch applied after all checks), so poison is
        // safe to ignore.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many objects it holds.
    pub fn len(&self) -> usize {
        self.lock().objects.len()
    }

    /// Whether it holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Replaces the bytes kept for `id` (for tests of corruption handling).
    pub fn corrupt(&self, id: ObjectId, bytes: impl Into<Arc<[u8]>>) {
        self.lock().objects.insert(id, bytes.into());
    }
}

impl ObjectStore for MemoryStore {
    /// A hash set lookup per id: no round trip to save.
    fn answers_in_memory(&self) -> bool {
        true
    }

    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.get_many_checked(ids, ReadCheck::Store)
    }

    fn get_many_checked(
        &self,
        ids: &[ObjectId],
        check: ReadCheck,
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let found: Vec<Option<Arc<[u8]>>> = {
            let state = self.lock();
            ids.iter()
                .map(|id| state.objects.get(id).cloned())
                .collect()
        };
        ids.iter()
            .zip(found)
            .map(|(id, b)| {
                b.map(|b| crate::codec::finish(id, b.to_vec(), check))
                    .transpose()
            })
            .collect()
    }

    fn has_many(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>, StoreError> {
        let state = self.lock();
        Ok(ids
            .iter()
            .filter(|id| !state.objects.contains_key(*id))
            .copied()
            .collect())
    }

    fn put_many(&self, objects: &[(ObjectId, &[u8])]) -> Result<(), StoreError> {
        let mut state = self.lock();
        for (id, bytes) in objects {
            state
                .objects
                .entry(*id)
                .or_insert_with(|| Arc::from(*bytes));
        }
        Ok(())
    }

    fn delete_many(&self, ids: &[ObjectId]) -> Result<(), StoreError> {
        let mut state = self.lock();
        for id in ids {
            state.objects.remove(id);
        }
        Ok(())
    }

    fn for_each_id(
        &self,
        f: &mut dyn FnMut(ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let ids: Vec<ObjectId> = self.lock().objects.keys().copied().collect();
        ids.into_iter().try_for_each(f)
    }
}

impl RefStore for MemoryStore {
    fn get_ref(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        crate::store::validate_ref_name(name)?;
        Ok(self.lock().refs.get(name).copied())
    }

    fn update_refs(&self, updates: &[RefUpdate], message: &str) -> Result<(), StoreError> {
        self.lock().update(updates, message, &[])
    }

    fn writes_objects_with_refs(&self) -> bool {
        true
    }

    /// Under the one lock: the updates checked, then the objects and the refs.
    fn update_refs_with_objects(
        &self,
        objects: &[(ObjectId, &[u8])],
        _bases: &[Option<ObjectId>],
        updates: &[RefUpdate],
        message: &str,
    ) -> Result<bool, StoreError> {
        self.lock().update(updates, message, objects)?;
        Ok(true)
    }

    fn list_refs(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>, StoreError> {
        Ok(self
            .lock()
            .refs
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), *v))
            .collect())
    }

    fn reflog(&self, name: &str) -> Result<Vec<ReflogEntry>, StoreError> {
        crate::store::validate_ref_name(name)?;
        Ok(self.lock().reflog.get(name).cloned().unwrap_or_default())
    }
}

crate::impl_object_source!(MemoryStore);
