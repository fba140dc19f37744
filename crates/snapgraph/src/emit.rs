//! Collecting the objects a commit must persist.

use std::sync::Arc;

use crate::id::ObjectId;
use crate::source::{BoxError, ObjectSource};

/// Objects to persist, in dependency order: every object comes after all the objects
/// it references. Writing them in this order keeps a store closed: if it holds an
/// object, it holds everything under it.
#[derive(Debug, Clone, Default)]
pub struct ObjectSet {
    entries: Vec<(ObjectId, Vec<u8>)>,
    index: hashbrown::HashMap<ObjectId, usize>,
}

impl ObjectSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many objects.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Total stored bytes.
    pub fn stored_bytes(&self) -> u64 {
        self.entries.iter().map(|(_, b)| b.len() as u64).sum()
    }

    /// Whether `id` is in the set.
    pub fn contains_id(&self, id: &ObjectId) -> bool {
        self.index.contains_key(id)
    }

    /// The stored bytes of `id`.
    pub fn get_bytes(&self, id: &ObjectId) -> Option<&[u8]> {
        self.index.get(id).map(|&i| self.entries[i].1.as_slice())
    }

    /// The objects in dependency order (referenced objects first).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&ObjectId, &[u8])> {
        self.entries.iter().map(|(id, b)| (id, b.as_slice()))
    }

    /// The ids in dependency order.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = &ObjectId> {
        self.entries.iter().map(|(id, _)| id)
    }

    /// Adds an object unless present. The caller keeps dependency order.
    pub(crate) fn insert(&mut self, id: ObjectId, stored: Vec<u8>) {
        if let hashbrown::hash_map::Entry::Vacant(v) = self.index.entry(id) {
            v.insert(self.entries.len());
            self.entries.push((id, stored));
        }
    }
}

impl IntoIterator for ObjectSet {
    type Item = (ObjectId, Vec<u8>);
    type IntoIter = std::vec::IntoIter<(ObjectId, Vec<u8>)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl ObjectSource for ObjectSet {
    fn get(&self, id: &ObjectId) -> Result<Option<std::borrow::Cow<'_, [u8]>>, BoxError> {
        Ok(self.get_bytes(id).map(std::borrow::Cow::Borrowed))
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        Ok(self.contains_id(id))
    }
}

/// What the destination already holds, as declared by the caller.
#[derive(Clone, Default)]
pub(crate) struct Have<'a> {
    pub ids: Option<Arc<hashbrown::HashSet<ObjectId>>>,
    pub sources: Vec<&'a dyn ObjectSource>,
}

impl Have<'_> {
    pub fn is_declared(&self) -> bool {
        self.ids.is_some() || !self.sources.is_empty()
    }

    fn contains(&self, id: &ObjectId) -> bool {
        if self.ids.as_ref().is_some_and(|s| s.contains(id)) {
            return true;
        }
        // A source that cannot answer counts as "not held": emitting an object the
        // destination already has is harmless, omitting one it lacks is not.
        self.sources.iter().any(|s| s.contains(id).unwrap_or(false))
    }
}

/// Walks new objects top-down, pruning at what the destination holds, and collects
/// them children-first.
pub(crate) struct Emitter<'a> {
    have: &'a Have<'a>,
    pub out: ObjectSet,
    /// Whether `have` left anything out: the objects are then not self-contained.
    pub pruned: bool,
}

impl<'a> Emitter<'a> {
    pub fn new(have: &'a Have<'a>) -> Self {
        Self {
            have,
            out: ObjectSet::new(),
            pruned: false,
        }
    }

    /// Whether `id` still needs emitting: neither emitted yet nor held.
    pub fn wants(&mut self, id: &ObjectId) -> bool {
        if self.out.contains_id(id) {
            return false;
        }
        if self.have.contains(id) {
            self.pruned = true;
            return false;
        }
        true
    }

    /// Whether the destination holds `id` (one question to the have-set).
    pub fn holds(&self, id: &ObjectId) -> bool {
        self.have.contains(id)
    }

    pub fn push(&mut self, id: ObjectId, stored: Vec<u8>) {
        self.out.insert(id, stored);
    }
}
