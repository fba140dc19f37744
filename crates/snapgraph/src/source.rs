//! The one trait a caller implements to put any key-value store behind the engine.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;

use crate::id::ObjectId;

/// An error from a caller's store, carried through the engine unchanged.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Where the engine reads stored objects from.
///
/// One method: return the stored bytes of `id`, `Ok(None)` when the store does not
/// hold it, or an error when the store could not answer. The engine re-hashes every
/// object it reads, so a source that returns wrong bytes is caught, never trusted.
///
/// Implemented for `std` and `hashbrown` `HashMap`s and `BTreeMap`s of
/// `ObjectId -> Vec<u8>` (or `Arc<[u8]>`/`Box<[u8]>`), and for references, `Box`es and
/// `Arc`s of any source.
pub trait ObjectSource {
    /// The stored bytes of `id`, if the store holds it.
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError>;

    /// Whether the store holds `id`. The default asks [`get`](Self::get); override it
    /// when presence is cheaper to learn than the bytes.
    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        Ok(self.get(id)?.is_some())
    }

    /// The stored bytes of each of `ids`, in order, `None` where the store lacks one;
    /// the answer must have one item per id. The default asks [`get`](Self::get) once
    /// per id; override it when one round trip can answer many (a database, an object
    /// store): checkout, diff and [`CheckoutPlan`](crate::graph::CheckoutPlan) read a level
    /// of the object graph at a time through it (checkout's content a window at a
    /// time), so such a store costs round trips proportional to the graph's depth.
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Cow<'_, [u8]>>>, BoxError> {
        ids.iter().map(|id| self.get(id)).collect()
    }

    /// Whether the store holds each of `ids`, in order; the answer must have one item
    /// per id. The default asks [`contains`](Self::contains) once per id; override it
    /// with [`get_many`](Self::get_many) when one round trip can answer many:
    /// [`CheckoutPlan`](crate::graph::CheckoutPlan) asks for a level's chunks through it.
    fn contains_many(&self, ids: &[ObjectId]) -> Result<Vec<bool>, BoxError> {
        ids.iter().map(|id| self.contains(id)).collect()
    }

    /// A hint: the caller will soon ask for `ids` through [`get_many`](Self::get_many),
    /// in about this order (in several calls, a window at a time). Checkout gives it
    /// the content objects of the whole walk once the trees are read, and a large
    /// file's chunks once its manifest is read. A remote store may start fetching them
    /// all at once (one round trip for the lot instead of one per window), holding a
    /// bounded buffer, and answer the later calls from it. Nothing may depend on it:
    /// later calls must answer exactly as without the hint (the engine still verifies
    /// every object it gets). The default does nothing; wrappers forward it.
    fn will_read(&self, ids: &[ObjectId]) {
        let _ = ids;
    }

    /// Whether this source answers from memory, so that asking it one object at a
    /// time costs no more than asking in a batch (a map). A commit whose
    /// [`CommitOptions::have_in`](crate::CommitOptions::have_in) sources all answer
    /// from memory then skips the probe walk that gathers the commit's questions for
    /// one [`contains_many`](Self::contains_many) per source, and asks per object
    /// as it walks: the same answers, one walk instead of two. The default is
    /// `false` (a database, an object store, a binding whose every call crosses into
    /// another runtime); wrappers forward it.
    fn answers_in_memory(&self) -> bool {
        false
    }
}

impl<T: ObjectSource + ?Sized> ObjectSource for &T {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        (**self).get(id)
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        (**self).contains(id)
    }
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Cow<'_, [u8]>>>, BoxError> {
        (**self).get_many(ids)
    }
    fn contains_many(&self, ids: &[ObjectId]) -> Result<Vec<bool>, BoxError> {
        (**self).contains_many(ids)
    }
    fn will_read(&self, ids: &[ObjectId]) {
        (**self).will_read(ids)
    }
    fn answers_in_memory(&self) -> bool {
        (**self).answers_in_memory()
    }
}

impl<T: ObjectSource + ?Sized> ObjectSource for Box<T> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        (**self).get(id)
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        (**self).contains(id)
    }
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Cow<'_, [u8]>>>, BoxError> {
        (**self).get_many(ids)
    }
    fn contains_many(&self, ids: &[ObjectId]) -> Result<Vec<bool>, BoxError> {
        (**self).contains_many(ids)
    }
    fn will_read(&self, ids: &[ObjectId]) {
        (**self).will_read(ids)
    }
    fn answers_in_memory(&self) -> bool {
        (**self).answers_in_memory()
    }
}

impl<T: ObjectSource + ?Sized> ObjectSource for Arc<T> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        (**self).get(id)
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        (**self).contains(id)
    }
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Cow<'_, [u8]>>>, BoxError> {
        (**self).get_many(ids)
    }
    fn contains_many(&self, ids: &[ObjectId]) -> Result<Vec<bool>, BoxError> {
        (**self).contains_many(ids)
    }
    fn will_read(&self, ids: &[ObjectId]) {
        (**self).will_read(ids)
    }
    fn answers_in_memory(&self) -> bool {
        (**self).answers_in_memory()
    }
}

macro_rules! map_source {
    ($($map:ident < $($gen:ident),* > $(where $bound:ident : $tr:path)?),* $(,)?) => {$(
        impl<V: AsRef<[u8]> $(, $gen)* > ObjectSource for $map<ObjectId, V $(, $gen)*>
        $(where $bound: $tr)?
        {
            fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
                Ok($map::get(self, id).map(|v| Cow::Borrowed(v.as_ref())))
            }
            fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
                Ok(self.contains_key(id))
            }
            fn answers_in_memory(&self) -> bool {
                true
            }
        }
    )*};
}

type HbMap<K, V, S> = hashbrown::HashMap<K, V, S>;
map_source!(HashMap<S> where S: BuildHasher, HbMap<S> where S: BuildHasher, BTreeMap<>);

/// A source that holds nothing. Useful as the "have" set of a first commit, or in tests.
#[derive(Debug, Default, Clone, Copy)]
pub struct EmptySource;

impl ObjectSource for EmptySource {
    fn get(&self, _id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        Ok(None)
    }
    fn answers_in_memory(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn takes_source(s: impl ObjectSource, id: &ObjectId) -> Option<Vec<u8>> {
        s.get(id).unwrap().map(|c| c.into_owned())
    }

    #[test]
    fn maps_and_wrappers_are_sources() {
        let id = ObjectId::hash_stored(b"a");
        let mut std_map: HashMap<ObjectId, Vec<u8>> = HashMap::new();
        std_map.insert(id, b"a".to_vec());
        let mut hb: hashbrown::HashMap<ObjectId, Arc<[u8]>> = hashbrown::HashMap::new();
        hb.insert(id, Arc::from(&b"a"[..]));
        let mut bt: BTreeMap<ObjectId, Box<[u8]>> = BTreeMap::new();
        bt.insert(id, Box::from(&b"a"[..]));
        assert_eq!(takes_source(&std_map, &id).as_deref(), Some(&b"a"[..]));
        assert_eq!(takes_source(&hb, &id).as_deref(), Some(&b"a"[..]));
        assert_eq!(takes_source(Arc::new(bt), &id).as_deref(), Some(&b"a"[..]));
        let dynamic: Box<dyn ObjectSource> = Box::new(std_map);
        assert!(dynamic.contains(&id).unwrap());
        let other = ObjectId::hash_stored(b"b");
        let many = dynamic.get_many(&[other, id]).unwrap();
        assert_eq!(many.len(), 2);
        assert!(many[0].is_none());
        assert_eq!(many[1].as_deref(), Some(&b"a"[..]));
        assert_eq!(dynamic.contains_many(&[other, id]).unwrap(), [false, true]);
        assert!(!EmptySource.contains(&id).unwrap());
        // Maps answer from memory, through every wrapper; a source that does not
        // say so is asked in batches.
        assert!(dynamic.answers_in_memory());
        fn in_memory(s: impl ObjectSource) -> bool {
            s.answers_in_memory()
        }
        assert!(in_memory(&hb) && in_memory(Arc::new(EmptySource)));
        struct Remote;
        impl ObjectSource for Remote {
            fn get(&self, _id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
                Ok(None)
            }
        }
        assert!(!in_memory(Box::new(Remote)));
    }
}
