//! Collecting the objects a commit must persist.

use std::sync::{Arc, OnceLock};

use crate::content::FileBytes;
use crate::id::ObjectId;
use crate::object::encode_chunk;
use crate::source::{BoxError, ObjectSource};

/// Objects to persist, in dependency order: every object comes after all the objects
/// it references. Writing them in this order keeps a store closed: if it holds an
/// object, it holds everything under it.
///
/// A commit does not copy content it already holds: a chunk is kept as a range of its
/// file's bytes, and its stored form (header, then the bytes) is built only when it is
/// first asked for ([`iter`](Self::iter), [`get_bytes`](Self::get_bytes), the
/// [`ObjectSource`] impl) or handed out ([`IntoIterator`]). Tree and manifest nodes
/// are shared with the workspace's layouts.
#[derive(Debug, Clone, Default)]
pub struct ObjectSet {
    entries: Vec<(ObjectId, Stored)>,
    index: hashbrown::HashMap<ObjectId, usize>,
}

/// One object of an [`ObjectSet`].
#[derive(Debug, Clone)]
enum Stored {
    /// Stored bytes built for this set (a commit, capabilities, reads).
    Owned(Vec<u8>),
    /// Stored bytes shared with a layout (tree and manifest nodes).
    Shared(Arc<[u8]>),
    /// A chunk: `len` bytes of `data` from `start`, stored behind a header of
    /// `version`; the stored bytes once built.
    Chunk {
        data: FileBytes,
        start: usize,
        len: usize,
        version: u8,
        stored: OnceLock<Box<[u8]>>,
    },
}

impl Stored {
    fn len(&self) -> usize {
        match self {
            Self::Owned(b) => b.len(),
            Self::Shared(b) => b.len(),
            Self::Chunk { len, .. } => 2 + len,
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Self::Owned(b) => b,
            Self::Shared(b) => b,
            Self::Chunk {
                data,
                start,
                len,
                version,
                stored,
            } => stored.get_or_init(|| encode_chunk(*version, &data[*start..*start + *len]).into()),
        }
    }

    fn into_vec(self) -> Vec<u8> {
        match self {
            Self::Owned(b) => b,
            Self::Shared(b) => b.to_vec(),
            Self::Chunk {
                data,
                start,
                len,
                version,
                stored,
            } => match stored.into_inner() {
                Some(built) => built.into_vec(),
                None => encode_chunk(version, &data[start..start + len]),
            },
        }
    }
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
        self.index.get(id).map(|&i| self.entries[i].1.bytes())
    }

    /// The objects in dependency order (referenced objects first).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&ObjectId, &[u8])> {
        self.entries.iter().map(|(id, b)| (id, b.bytes()))
    }

    /// The ids in dependency order.
    pub fn ids(&self) -> impl ExactSizeIterator<Item = &ObjectId> {
        self.entries.iter().map(|(id, _)| id)
    }

    /// Adds an object unless present. The caller keeps dependency order.
    fn insert(&mut self, id: ObjectId, stored: Stored) {
        if let hashbrown::hash_map::Entry::Vacant(v) = self.index.entry(id) {
            v.insert(self.entries.len());
            self.entries.push((id, stored));
        }
    }
}

/// The objects with their stored bytes, in dependency order (chunks are built here,
/// if they were not asked for before).
impl IntoIterator for ObjectSet {
    type Item = (ObjectId, Vec<u8>);
    type IntoIter = ObjectSetIntoIter;
    fn into_iter(self) -> Self::IntoIter {
        ObjectSetIntoIter(self.entries.into_iter())
    }
}

/// The owning iterator of an [`ObjectSet`].
#[derive(Debug)]
pub struct ObjectSetIntoIter(std::vec::IntoIter<(ObjectId, Stored)>);

impl Iterator for ObjectSetIntoIter {
    type Item = (ObjectId, Vec<u8>);
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(id, s)| (id, s.into_vec()))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for ObjectSetIntoIter {}

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
    /// Ids handed over earlier for this commit ([`crate::Workspace::hand_over`]):
    /// held like `have`'s, without asking the caller.
    handed: Option<&'a hashbrown::HashSet<ObjectId>>,
    pub out: ObjectSet,
    /// Whether `have` left anything out: the objects are then not self-contained.
    pub pruned: bool,
}

impl<'a> Emitter<'a> {
    pub fn new(have: &'a Have<'a>) -> Self {
        Self {
            have,
            handed: None,
            out: ObjectSet::new(),
            pruned: false,
        }
    }

    /// Also counts `handed` (ids handed over earlier for this commit) as held.
    pub fn handed(mut self, handed: &'a hashbrown::HashSet<ObjectId>) -> Self {
        self.handed = Some(handed);
        self
    }

    fn is_handed(&self, id: &ObjectId) -> bool {
        self.handed.is_some_and(|h| h.contains(id))
    }

    /// Whether `id` still needs emitting: neither emitted yet nor held.
    pub fn wants(&mut self, id: &ObjectId) -> bool {
        if self.out.contains_id(id) {
            return false;
        }
        if self.is_handed(id) || self.have.contains(id) {
            self.pruned = true;
            return false;
        }
        true
    }

    /// Whether the destination holds `id` (one question to the have-set).
    pub fn holds(&self, id: &ObjectId) -> bool {
        self.is_handed(id) || self.have.contains(id)
    }

    pub fn push(&mut self, id: ObjectId, stored: Vec<u8>) {
        self.out.insert(id, Stored::Owned(stored));
    }

    /// [`push`](Self::push) of a node whose stored bytes a layout holds.
    pub fn push_shared(&mut self, id: ObjectId, stored: Arc<[u8]>) {
        self.out.insert(id, Stored::Shared(stored));
    }

    /// [`push`](Self::push) of a chunk: `len` bytes of `data` from `start`, of format
    /// `version`, stored without being copied until the stored bytes are asked for.
    pub fn push_chunk(
        &mut self,
        id: ObjectId,
        data: &FileBytes,
        start: usize,
        len: usize,
        version: u8,
    ) {
        self.out.insert(
            id,
            Stored::Chunk {
                data: data.clone(),
                start,
                len,
                version,
                stored: OnceLock::new(),
            },
        );
    }
}
