//! Collecting the objects a commit must persist.

use std::sync::{Arc, OnceLock};

use crate::content::{ContentObjects, FileBytes};
use crate::id::ObjectId;
use crate::object::encode_chunk;
use crate::object::tree::Content;
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

    /// Moves `other`'s objects to the end of this set, in their order, skipping those
    /// it holds already: two sets in dependency order make one.
    pub fn append(&mut self, other: ObjectSet) {
        for (id, stored) in other.entries {
            self.insert(id, stored);
        }
    }

    /// Adds an object built for this set unless present (dependency order is the
    /// caller's).
    pub(crate) fn insert_owned(&mut self, id: ObjectId, stored: Vec<u8>) {
        self.insert(id, Stored::Owned(stored));
    }

    /// Adds an object shared with a layout unless present.
    pub(crate) fn insert_shared(&mut self, id: ObjectId, stored: Arc<[u8]>) {
        self.insert(id, Stored::Shared(stored));
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

    fn in_ids(&self, id: &ObjectId) -> bool {
        self.ids.as_ref().is_some_and(|s| s.contains(id))
    }

    fn contains(&self, id: &ObjectId) -> bool {
        if self.in_ids(id) {
            return true;
        }
        // A source that cannot answer counts as "not held": emitting an object the
        // destination already has is harmless, omitting one it lacks is not.
        self.sources.iter().any(|s| s.contains(id).unwrap_or(false))
    }

    /// Whether each source holds each of `ids`, one [`contains_many`] per source (a
    /// source is asked only about what the sources before it lack). A source that
    /// fails, or answers with the wrong number of items, holds none of them.
    ///
    /// [`contains_many`]: ObjectSource::contains_many
    fn contains_many(&self, ids: Vec<ObjectId>) -> hashbrown::HashMap<ObjectId, bool> {
        let mut known = hashbrown::HashMap::with_capacity(ids.len());
        let mut open: Vec<ObjectId> = ids.into_iter().filter(|id| !self.in_ids(id)).collect();
        for source in &self.sources {
            if open.is_empty() {
                break;
            }
            let answers = source
                .contains_many(&open)
                .ok()
                .filter(|a| a.len() == open.len());
            let Some(answers) = answers else { continue };
            let mut rest = Vec::with_capacity(open.len());
            for (id, held) in open.into_iter().zip(answers) {
                if held {
                    known.insert(id, true);
                } else {
                    rest.push(id);
                }
            }
            open = rest;
        }
        known.extend(open.into_iter().map(|id| (id, false)));
        known
    }
}

/// Walks new objects top-down, pruning at what the destination holds, and collects
/// them children-first.
///
/// With `have_in` sources, a commit walks twice: first a probe that answers every
/// question optimistically (a directory's previous root is held, a new node is not)
/// and only records the ids asked, then, after one batched question per source about
/// all of them ([`probed`](Self::probed)), the real walk, which asks a source per
/// object only where it goes beyond what the probe asked (a previous root that turned
/// out not to be held). A store with per-call latency, or a binding whose every call
/// crosses into JavaScript, answers a per-turn commit in one call instead of one per
/// object on the changed paths.
pub(crate) struct Emitter<'a> {
    have: &'a Have<'a>,
    /// Ids handed over earlier for this commit ([`crate::Workspace::hand_over`]):
    /// held like `have`'s, without asking the caller.
    handed: Option<&'a hashbrown::HashSet<ObjectId>>,
    pub out: ObjectSet,
    /// Whether `have` left anything out: the objects are then not self-contained.
    pub pruned: bool,
    /// Answers learned in one batch after the probe.
    known: hashbrown::HashMap<ObjectId, bool>,
    /// While probing: the ids asked so far.
    probe: Option<hashbrown::HashSet<ObjectId>>,
}

impl<'a> Emitter<'a> {
    pub fn new(have: &'a Have<'a>) -> Self {
        Self {
            have,
            handed: None,
            out: ObjectSet::new(),
            pruned: false,
            known: hashbrown::HashMap::new(),
            probe: None,
        }
    }

    /// Starts a probe if there are sources to ask in a batch; false (nothing to
    /// probe) otherwise: no sources, or only sources that answer from memory
    /// ([`ObjectSource::answers_in_memory`]), which the real walk asks per object
    /// for what a batch would cost. Until [`probed`](Self::probed), nothing is
    /// emitted.
    pub fn probe(&mut self) -> bool {
        if self.have.sources.iter().all(|s| s.answers_in_memory()) {
            return false;
        }
        self.probe = Some(hashbrown::HashSet::new());
        true
    }

    /// Ends the probe: asks the sources about every id it recorded, in one batch per
    /// source, and makes the emitter ready for the real walk.
    pub fn probed(&mut self) {
        if let Some(asked) = self.probe.take() {
            self.known = self.have.contains_many(asked.into_iter().collect());
        }
        self.pruned = false;
        self.out = ObjectSet::new();
    }

    fn held(&self, id: &ObjectId) -> bool {
        if self.is_handed(id) {
            return true;
        }
        match self.known.get(id) {
            Some(&held) => held,
            None => self.have.contains(id),
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
        if let Some(asked) = &mut self.probe {
            // Not held, so the probe walks below it (once).
            return asked.insert(*id);
        }
        if self.out.contains_id(id) {
            return false;
        }
        if self.held(id) {
            self.pruned = true;
            return false;
        }
        true
    }

    /// Whether the destination holds `id` (one question to the have-set).
    pub fn holds(&mut self, id: &ObjectId) -> bool {
        if let Some(asked) = &mut self.probe {
            // Held, so the probe skips what it covers.
            asked.insert(*id);
            return true;
        }
        self.held(id)
    }

    pub fn push(&mut self, id: ObjectId, stored: Vec<u8>) {
        if self.probe.is_none() {
            self.out.insert(id, Stored::Owned(stored));
        }
    }

    /// [`push`](Self::push) of a node whose stored bytes a layout holds.
    pub fn push_shared(&mut self, id: ObjectId, stored: Arc<[u8]>) {
        if self.probe.is_none() {
            self.out.insert(id, Stored::Shared(stored));
        }
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
        if self.probe.is_some() {
            return;
        }
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

impl ContentObjects {
    /// Adds the objects not in `have` (nor already emitted) to `out`, children first.
    /// `data` must be the bytes these objects store; a [`reference`](Self::reference)
    /// emits nothing (callers check first that the destination holds its objects).
    pub fn emit(&self, data: &FileBytes, out: &mut Emitter<'_>) {
        if self.is_reference() {
            return;
        }
        match &self.content {
            Content::Inline(_) => {}
            Content::Chunk(_) => self.emit_chunk(0, data, out),
            Content::Manifest(_) => {
                let top = self.manifest.len() - 1;
                self.emit_manifest(top, 0, data, out);
            }
        }
    }

    fn emit_chunk(&self, i: usize, data: &FileBytes, out: &mut Emitter<'_>) {
        let span = self.chunks[i];
        if out.wants(&span.id) {
            out.push_chunk(span.id, data, span.start, span.len as usize, span.version);
        }
    }

    fn emit_manifest(&self, level: usize, index: usize, data: &FileBytes, out: &mut Emitter<'_>) {
        let slot = &self.manifest[level][index];
        if !out.wants(&slot.id) {
            return;
        }
        let first: usize = self.manifest[level][..index]
            .iter()
            .map(|s| s.items as usize)
            .sum();
        for child in first..first + slot.items as usize {
            if level == 0 {
                self.emit_chunk(child, data, out);
            } else {
                self.emit_manifest(level - 1, child, data, out);
            }
        }
        out.push_shared(slot.id, slot.stored.clone());
    }
}
