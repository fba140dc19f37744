//! Stored objects: kinds, the canonical encoding and verified loading.
//!
//! Every stored object is `kind (1 byte) || format version (1 byte) || body`. Its id
//! is, for version 2 (what this engine writes), the keyed BLAKE3 hash of the body with
//! the kind's key, and for version 1 the BLAKE3 hash of all the bytes (see
//! [`ObjectId::hash_stored`]). Chunk bodies are raw file bytes; every
//! other body is the postcard encoding of one of the types in this module's children.
//! `docs/FORMAT.md` specifies every byte.

pub mod capability;
pub mod commit;
pub mod manifest;
pub mod reads;
pub mod tree;
mod wire;

use std::borrow::Cow;

use serde::{de::DeserializeOwned, Serialize};

use crate::id::ObjectId;
use crate::source::{BoxError, ObjectSource};

/// The format version this engine writes into every object header. Objects of every
/// version from 1 up to this one are read, verified and restored.
pub const FORMAT_VERSION: u8 = 2;

/// The largest stored object this engine decodes (4 MiB). Objects it writes are far
/// smaller (chunks at most 64 KiB, tree and manifest nodes about 64 KiB at most); the
/// bound exists so a hostile store cannot make a decoder allocate without limit.
pub const MAX_OBJECT_SIZE: usize = 4 << 20;

/// What a stored object is. The discriminant is the first byte of the stored bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ObjectKind {
    /// Raw file (or state) bytes, one content-defined chunk.
    Chunk = 1,
    /// A node of a file's chunk list (see [`manifest`]).
    Manifest = 2,
    /// A node of a directory (see [`tree`]).
    Tree = 3,
    /// A commit (see [`commit`]).
    Commit = 4,
    /// A capability fingerprint (see [`capability`]).
    Capabilities = 5,
    /// A list of recorded external reads (see [`reads`]).
    Reads = 6,
}

impl ObjectId {
    /// The id of the object of `kind` and format `version` whose body is `body`,
    /// without building its stored bytes: equal to
    /// [`hash_stored`](Self::hash_stored) of `kind || version || body`. Version 2
    /// bodies are hashed in place.
    pub fn hash_object(kind: ObjectKind, version: u8, body: &[u8]) -> Self {
        if let Some(id) = ObjectId::hash_keyed(kind.byte(), version, body) {
            return id;
        }
        let mut h = blake3::Hasher::new();
        h.update(&[kind.byte(), version]);
        h.update(body);
        ObjectId::from_bytes(*h.finalize().as_bytes())
    }
}

impl ObjectKind {
    /// The kind whose header byte is `byte`, if any.
    pub fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            1 => Self::Chunk,
            2 => Self::Manifest,
            3 => Self::Tree,
            4 => Self::Commit,
            5 => Self::Capabilities,
            6 => Self::Reads,
            _ => return None,
        })
    }

    /// The header byte of this kind.
    pub fn byte(self) -> u8 {
        self as u8
    }

    /// A lowercase name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Chunk => "chunk",
            Self::Manifest => "manifest",
            Self::Tree => "tree",
            Self::Commit => "commit",
            Self::Capabilities => "capabilities",
            Self::Reads => "reads",
        }
    }
}

impl core::fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why an object could not be loaded or decoded. Every variant names the object.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectError {
    /// The source does not hold the object.
    #[error("object {id} not found")]
    NotFound {
        /// The missing object.
        id: ObjectId,
    },
    /// The source failed while reading the object.
    #[error("reading object {id} failed: {source}")]
    Source {
        /// The object being read.
        id: ObjectId,
        /// The source's error.
        source: BoxError,
    },
    /// The bytes do not hash to the id they were stored under (bit rot, truncation,
    /// a swapped object).
    #[error("object {id} is corrupt: its bytes hash to {actual}")]
    Corrupt {
        /// The id that was asked for.
        id: ObjectId,
        /// What the bytes actually hash to.
        actual: ObjectId,
    },
    /// The object is larger than a decoder accepts.
    #[error("object {id} is {size} bytes, larger than the {limit}-byte limit")]
    TooLarge {
        /// The object.
        id: ObjectId,
        /// Its size.
        size: usize,
        /// The limit it exceeds.
        limit: usize,
    },
    /// The object is of another kind than the reference to it promised.
    #[error("object {id} is a {actual}, expected a {expected}")]
    WrongKind {
        /// The object.
        id: ObjectId,
        /// The kind the reference promised.
        expected: ObjectKind,
        /// The kind in its header.
        actual: ObjectKind,
    },
    /// The header names no known kind (or the object is shorter than a header).
    #[error("object {id} has an unknown kind byte {byte:#04x}")]
    UnknownKind {
        /// The object.
        id: ObjectId,
        /// The first byte, or 0 for an empty object.
        byte: u8,
    },
    /// The header names a format version this engine cannot read.
    #[error("{kind} {id} has format version {version}; this engine reads up to {FORMAT_VERSION}")]
    UnsupportedVersion {
        /// The object.
        id: ObjectId,
        /// Its kind.
        kind: ObjectKind,
        /// Its version byte.
        version: u8,
    },
    /// The body is not a valid encoding of its kind.
    #[error("{kind} {id} is malformed: {reason}")]
    Malformed {
        /// The object.
        id: ObjectId,
        /// Its kind.
        kind: ObjectKind,
        /// What is wrong.
        reason: String,
    },
}

impl ObjectError {
    /// The id of the object the error is about.
    pub fn id(&self) -> ObjectId {
        match self {
            Self::NotFound { id }
            | Self::Source { id, .. }
            | Self::Corrupt { id, .. }
            | Self::TooLarge { id, .. }
            | Self::WrongKind { id, .. }
            | Self::UnknownKind { id, .. }
            | Self::UnsupportedVersion { id, .. }
            | Self::Malformed { id, .. } => *id,
        }
    }

    pub(crate) fn malformed(id: ObjectId, kind: ObjectKind, reason: impl Into<String>) -> Self {
        Self::Malformed {
            id,
            kind,
            reason: reason.into(),
        }
    }
}

/// The stored bytes of a value: header, then the postcard body.
pub(crate) fn encode<T: Serialize>(kind: ObjectKind, value: &T) -> Vec<u8> {
    encode_version(kind, FORMAT_VERSION, value)
}

/// [`encode`] with the header of format `version` (the body encoding is the same in
/// every version; checkout rebuilds older directories and manifests in their version).
pub(crate) fn encode_version<T: Serialize>(kind: ObjectKind, version: u8, value: &T) -> Vec<u8> {
    let out = vec![kind.byte(), version];
    // Serializing our own types into a Vec cannot fail: they contain no maps with
    // non-string keys, no unsized sequences and no custom errors.
    match postcard::to_extend(value, out) {
        Ok(v) => v,
        Err(e) => unreachable_encode(e),
    }
}

#[cold]
fn unreachable_encode(e: postcard::Error) -> Vec<u8> {
    // A bug, not an input problem: keep the process alive in release builds but make
    // the bug loud in tests.
    debug_assert!(false, "postcard encoding failed: {e}");
    Vec::new()
}

/// The one check that a directory's tree nodes or a file's manifest nodes are cut as
/// the format requires (checkout, `reachable`, `reachable_history` and
/// `CheckoutPlan` call it through `Layout::canonical` and
/// `ContentObjects::canonical`). A well-formed tree or manifest can still be cut
/// at other places than the boundary rule's, which would give one directory or file
/// two ids: `rebuild(version)` cuts what was read (the directory's entries, the
/// file's chunk list) from scratch into nodes of format `version` and answers the
/// root id it built with what it built. All of a directory's or manifest's nodes are
/// of its root's version, and each version hashes differently, so the rebuild whose
/// root is `root` is the one; none means `root` is not canonical
/// ([`ObjectError::Malformed`] naming it).
pub(crate) fn canonical_cut<T>(
    root: ObjectId,
    kind: ObjectKind,
    mut rebuild: impl FnMut(u8) -> (ObjectId, T),
) -> Result<T, ObjectError> {
    for version in (1..=FORMAT_VERSION).rev() {
        let (id, built) = rebuild(version);
        if id == root {
            return Ok(built);
        }
    }
    Err(ObjectError::malformed(
        root,
        kind,
        format!("non-canonical {kind} (nodes are not cut as the format requires)"),
    ))
}

/// The stored bytes of a chunk of format `version`: the header is added only here,
/// when the chunk is emitted to be stored.
pub(crate) fn encode_chunk(version: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 2);
    out.push(ObjectKind::Chunk.byte());
    out.push(version);
    out.extend_from_slice(data);
    out
}

/// The id of a chunk with content `data` as this engine writes it, hashed in place.
pub(crate) fn chunk_id(data: &[u8]) -> ObjectId {
    ObjectId::hash_object(ObjectKind::Chunk, FORMAT_VERSION, data)
}

/// Checks a stored object's bytes against its id and header. Returns the kind and body.
pub fn verify(id: &ObjectId, stored: &[u8]) -> Result<(ObjectKind, u8), ObjectError> {
    if stored.len() > MAX_OBJECT_SIZE {
        return Err(ObjectError::TooLarge {
            id: *id,
            size: stored.len(),
            limit: MAX_OBJECT_SIZE,
        });
    }
    let actual = ObjectId::hash_stored(stored);
    if actual != *id {
        return Err(ObjectError::Corrupt { id: *id, actual });
    }
    header(id, stored)
}

/// Verifies a stored object against its id and returns its kind and the objects it
/// references directly, each with the kind it must have (a commit's parents
/// included). This is what a store walks to sync, garbage-collect or check a history
/// without knowing the format: chunks reference nothing, manifests their chunks or
/// child manifests, trees their entries' contents and child nodes, commits their
/// root tree, capability and reads objects and parents.
///
/// ```
/// use snapgraph::{object::references, CommitOptions, ObjectKind, Workspace};
///
/// let mut ws = Workspace::new();
/// ws.write("/a.txt", vec![1u8; 100])?;
/// let commit = ws.commit(CommitOptions::new())?;
/// let stored = commit.objects().get_bytes(&commit.id()).unwrap();
/// let (kind, refs) = references(&commit.id(), stored)?;
/// assert_eq!(kind, ObjectKind::Commit);
/// assert!(refs.iter().all(|(id, _)| commit.objects().contains_id(id)));
/// # Ok::<(), snapgraph::Error>(())
/// ```
pub fn references(
    id: &ObjectId,
    stored: &[u8],
) -> Result<(ObjectKind, Vec<(ObjectId, ObjectKind)>), ObjectError> {
    let (kind, _) = verify(id, stored)?;
    let refs = refs_of(id, kind, &stored[2..], true)?;
    Ok((kind, refs))
}

/// The objects a verified object references, with the kind each must have. With
/// `parents`, a commit's parents are included.
pub(crate) fn refs_of(
    id: &ObjectId,
    kind: ObjectKind,
    body: &[u8],
    parents: bool,
) -> Result<Vec<(ObjectId, ObjectKind)>, ObjectError> {
    Ok(sized_refs_of(id, kind, body, parents)?
        .into_iter()
        .map(|r| (r.id, r.kind))
        .collect())
}

/// One reference of an object: the id, the kind it must have and, for content (a
/// chunk, a manifest node, a file's or the state's content root), the bytes it must
/// hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ref {
    pub id: ObjectId,
    pub kind: ObjectKind,
    pub size: Option<u64>,
}

/// [`refs_of`] with the size every content reference claims, in the same order.
pub(crate) fn sized_refs_of(
    id: &ObjectId,
    kind: ObjectKind,
    body: &[u8],
    parents: bool,
) -> Result<Vec<Ref>, ObjectError> {
    let of = |id: ObjectId, kind: ObjectKind, size: Option<u64>| Ref { id, kind, size };
    Ok(match kind {
        ObjectKind::Commit => {
            let c = commit::CommitObject::decode(id, body)?;
            let mut out = vec![of(c.tree, ObjectKind::Tree, None)];
            out.extend(
                c.state
                    .object()
                    .map(|(sid, skind)| of(sid, skind, Some(c.state_size))),
            );
            out.extend(
                c.capabilities
                    .map(|i| of(i, ObjectKind::Capabilities, None)),
            );
            out.extend(c.reads.map(|i| of(i, ObjectKind::Reads, None)));
            if parents {
                out.extend(c.parents.iter().map(|p| of(*p, ObjectKind::Commit, None)));
            }
            out
        }
        ObjectKind::Tree => match tree::TreeNode::decode(id, body)? {
            tree::TreeNode::Leaf(entries) => entries
                .iter()
                .filter_map(|e| {
                    let (rid, rkind) = e.refs()?;
                    let size = match e.node {
                        tree::EntryNode::File { size, .. } => Some(size),
                        _ => None,
                    };
                    Some(of(rid, rkind, size))
                })
                .collect(),
            tree::TreeNode::Internal { children, .. } => children
                .iter()
                .map(|c| of(c.tree, ObjectKind::Tree, None))
                .collect(),
        },
        ObjectKind::Manifest => match manifest::Manifest::decode(id, body)? {
            manifest::Manifest::Leaf(chunks) => chunks
                .iter()
                .map(|c| of(c.id, ObjectKind::Chunk, Some(u64::from(c.len))))
                .collect(),
            manifest::Manifest::Internal { children, .. } => children
                .iter()
                .map(|c| of(c.id, ObjectKind::Manifest, Some(c.size)))
                .collect(),
        },
        ObjectKind::Capabilities => {
            capability::CapabilityFingerprint::decode(id, body)?;
            Vec::new()
        }
        ObjectKind::Reads => {
            reads::ReadsObject::decode(id, body)?;
            Vec::new()
        }
        ObjectKind::Chunk => Vec::new(),
    })
}

/// Ids a walk has met, with the kind each was referenced as. Ids cover kinds, so an id
/// referenced as two kinds (a tree's id used as a chunk, a commit's parent that is its
/// own root tree) is refused even when the second reference would otherwise be
/// skipped as already seen.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seen(hashbrown::HashMap<ObjectId, ObjectKind>);

impl Seen {
    /// `Ok(true)` the first time `id` is met, `Ok(false)` when it was met as the same
    /// kind, [`ObjectError::WrongKind`] when it was met as another.
    pub fn first(&mut self, id: ObjectId, kind: ObjectKind) -> Result<bool, ObjectError> {
        match self.0.entry(id) {
            hashbrown::hash_map::Entry::Vacant(v) => {
                v.insert(kind);
                Ok(true)
            }
            hashbrown::hash_map::Entry::Occupied(o) if *o.get() == kind => Ok(false),
            hashbrown::hash_map::Entry::Occupied(o) => Err(ObjectError::WrongKind {
                id,
                expected: kind,
                actual: *o.get(),
            }),
        }
    }
}

/// Checks size, kind byte and version of stored bytes already known to hash to `id`.
pub(crate) fn header(id: &ObjectId, stored: &[u8]) -> Result<(ObjectKind, u8), ObjectError> {
    if stored.len() > MAX_OBJECT_SIZE {
        return Err(ObjectError::TooLarge {
            id: *id,
            size: stored.len(),
            limit: MAX_OBJECT_SIZE,
        });
    }
    let byte = stored.first().copied().unwrap_or(0);
    let kind = ObjectKind::from_byte(byte).ok_or(ObjectError::UnknownKind { id: *id, byte })?;
    let version = stored.get(1).copied().unwrap_or(0);
    if version == 0 || version > FORMAT_VERSION {
        return Err(ObjectError::UnsupportedVersion {
            id: *id,
            kind,
            version,
        });
    }
    Ok((kind, version))
}

/// A verified object: its bytes hash to its id and its header is of the expected kind.
#[derive(Debug)]
pub(crate) struct Loaded<'a> {
    pub stored: Cow<'a, [u8]>,
}

impl Loaded<'_> {
    pub fn body(&self) -> &[u8] {
        &self.stored[2..]
    }
}

/// Reads `id` from `source`, verifies its hash, kind and version.
pub(crate) fn load<'s, S: ObjectSource + ?Sized>(
    source: &'s S,
    id: &ObjectId,
    expected: ObjectKind,
) -> Result<Loaded<'s>, ObjectError> {
    load_with(source, id, expected, true)
}

/// [`load`], skipping the hash check when `hash` is false: only for sources whose
/// keys were computed from their bytes (an unpacked snapshot).
pub(crate) fn load_with<'s, S: ObjectSource + ?Sized>(
    source: &'s S,
    id: &ObjectId,
    expected: ObjectKind,
    hash: bool,
) -> Result<Loaded<'s>, ObjectError> {
    let stored = source
        .get(id)
        .map_err(|source| ObjectError::Source { id: *id, source })?
        .ok_or(ObjectError::NotFound { id: *id })?;
    check(id, stored, expected, hash)
}

/// Verifies bytes fetched for `id` as [`load_with`] does.
pub(crate) fn check<'s>(
    id: &ObjectId,
    stored: Cow<'s, [u8]>,
    expected: ObjectKind,
    hash: bool,
) -> Result<Loaded<'s>, ObjectError> {
    let (kind, _version) = if hash {
        verify(id, &stored)?
    } else {
        header(id, &stored)?
    };
    if kind != expected {
        return Err(ObjectError::WrongKind {
            id: *id,
            expected,
            actual: kind,
        });
    }
    Ok(Loaded { stored })
}

/// The ids of `ids` whose slot in `out` (one per id, in order) is still empty: what
/// a read that answered some of them from elsewhere asks its source for.
pub(crate) fn absent<T>(ids: &[ObjectId], out: &[Option<T>]) -> Vec<ObjectId> {
    ids.iter()
        .zip(out)
        .filter(|(_, o)| o.is_none())
        .map(|(id, _)| *id)
        .collect()
}

/// The stored bytes of each of `ids` in one [`ObjectSource::get_many`] call, in order,
/// `None` where the source lacks one (nothing verified yet). A batch error names no
/// object, so the ids are then asked one by one to find the one that fails (a
/// transient failure of the batch costs a retry); an answer of the wrong length is an
/// error naming the first id.
pub(crate) fn fetch_many<'s, S: ObjectSource + ?Sized>(
    source: &'s S,
    ids: &[ObjectId],
) -> Result<Vec<Option<Cow<'s, [u8]>>>, ObjectError> {
    let Some(first) = ids.first() else {
        return Ok(Vec::new());
    };
    let answers = match source.get_many(ids) {
        Ok(answers) => answers,
        Err(_) => ids
            .iter()
            .map(|id| {
                source
                    .get(id)
                    .map_err(|source| ObjectError::Source { id: *id, source })
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    if answers.len() != ids.len() {
        return Err(ObjectError::Source {
            id: *first,
            source: format!(
                "get_many answered {} items for {} ids",
                answers.len(),
                ids.len()
            )
            .into(),
        });
    }
    Ok(answers)
}

/// [`load_with`] of many objects of one kind through one [`fetch_many`]: every one
/// must be present and verify.
pub(crate) fn load_many<'s, S: ObjectSource + ?Sized>(
    source: &'s S,
    ids: &[ObjectId],
    expected: ObjectKind,
    hash: bool,
) -> Result<Vec<Loaded<'s>>, ObjectError> {
    fetch_many(source, ids)?
        .into_iter()
        .zip(ids)
        .map(|(stored, id)| {
            check(
                id,
                stored.ok_or(ObjectError::NotFound { id: *id })?,
                expected,
                hash,
            )
        })
        .collect()
}

/// Decodes a structured body and insists that it is the canonical encoding: the value
/// must re-encode to exactly these bytes, so no value has two ids.
pub(crate) fn decode_body<T: Serialize + DeserializeOwned>(
    id: &ObjectId,
    kind: ObjectKind,
    body: &[u8],
) -> Result<T, ObjectError> {
    let (value, rest): (T, &[u8]) = postcard::take_from_bytes(body)
        .map_err(|e| ObjectError::malformed(*id, kind, format!("cannot decode: {e}")))?;
    if !rest.is_empty() {
        return Err(ObjectError::malformed(
            *id,
            kind,
            format!("{} trailing bytes", rest.len()),
        ));
    }
    let again = match postcard::to_allocvec(&value) {
        Ok(v) => v,
        Err(e) => return Err(ObjectError::malformed(*id, kind, e.to_string())),
    };
    if again != body {
        return Err(ObjectError::malformed(
            *id,
            kind,
            "non-canonical encoding (the value re-encodes to other bytes)",
        ));
    }
    Ok(value)
}

/// Deserializers for sequences whose length the format bounds: a declared length over
/// the bound fails before anything is allocated, and at most `max` elements are ever
/// decoded, so a large hostile node cannot make a decoder build a huge value only to
/// refuse it afterwards.
pub(crate) mod bounded {
    use core::fmt;
    use core::marker::PhantomData;

    use serde::de::{Deserialize, Deserializer, Error, SeqAccess, Visitor};

    use crate::limits::{MAX_NODE_ITEMS, MAX_PARENTS};

    struct BoundedVec<T> {
        max: usize,
        marker: PhantomData<T>,
    }

    impl<'de, T: Deserialize<'de>> Visitor<'de> for BoundedVec<T> {
        type Value = Vec<T>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a sequence of at most {} elements", self.max)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let declared = seq.size_hint().unwrap_or(0);
            if declared > self.max {
                return Err(A::Error::invalid_length(declared, &self));
            }
            let mut out = Vec::with_capacity(declared);
            while let Some(item) = seq.next_element()? {
                if out.len() == self.max {
                    return Err(A::Error::invalid_length(self.max + 1, &self));
                }
                out.push(item);
            }
            Ok(out)
        }
    }

    fn vec<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
        max: usize,
    ) -> Result<Vec<T>, D::Error> {
        d.deserialize_seq(BoundedVec {
            max,
            marker: PhantomData,
        })
    }

    /// At most [`MAX_NODE_ITEMS`] entries, children or chunks.
    pub(crate) fn node_items<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Vec<T>, D::Error> {
        vec(d, MAX_NODE_ITEMS)
    }

    /// At most [`MAX_PARENTS`] parents.
    pub(crate) fn parents<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Vec<T>, D::Error> {
        vec(d, MAX_PARENTS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn verify_catches_each_fault() {
        let stored = encode_chunk(FORMAT_VERSION, b"hello");
        let id = ObjectId::hash_stored(&stored);
        assert!(matches!(verify(&id, &stored), Ok((ObjectKind::Chunk, 2))));
        // A version-1 chunk keeps its rule and still verifies.
        let old = encode_chunk(1, b"hello");
        let old_id = ObjectId::from_bytes(*blake3::hash(&old).as_bytes());
        assert_eq!(ObjectId::hash_stored(&old), old_id);
        assert!(matches!(verify(&old_id, &old), Ok((ObjectKind::Chunk, 1))));
        assert!(matches!(
            verify(&id, &old),
            Err(ObjectError::Corrupt { .. })
        ));

        let mut flipped = stored.clone();
        flipped[3] ^= 1;
        assert!(matches!(
            verify(&id, &flipped),
            Err(ObjectError::Corrupt { .. })
        ));

        let unknown = vec![99u8, 1, 2];
        let uid = ObjectId::hash_stored(&unknown);
        assert!(matches!(
            verify(&uid, &unknown),
            Err(ObjectError::UnknownKind { byte: 99, .. })
        ));

        let future = vec![ObjectKind::Chunk.byte(), FORMAT_VERSION + 1];
        let fid = ObjectId::hash_stored(&future);
        assert!(matches!(
            verify(&fid, &future),
            Err(ObjectError::UnsupportedVersion { version: 3, .. })
        ));

        let empty: Vec<u8> = Vec::new();
        let eid = ObjectId::hash_stored(&empty);
        assert!(matches!(
            verify(&eid, &empty),
            Err(ObjectError::UnknownKind { byte: 0, .. })
        ));
    }

    #[test]
    fn load_checks_kind() {
        let stored = encode_chunk(FORMAT_VERSION, b"x");
        let id = ObjectId::hash_stored(&stored);
        let mut map = HashMap::new();
        map.insert(id, stored);
        let err = load(&map, &id, ObjectKind::Tree).unwrap_err();
        assert!(matches!(
            err,
            ObjectError::WrongKind {
                expected: ObjectKind::Tree,
                actual: ObjectKind::Chunk,
                ..
            }
        ));
        assert_eq!(err.id(), id);
        let other = ObjectId::hash_stored(b"nothing");
        assert!(matches!(
            load(&map, &other, ObjectKind::Chunk),
            Err(ObjectError::NotFound { .. })
        ));
    }

    #[test]
    fn decode_rejects_trailing_and_non_canonical() {
        let id = ObjectId::hash_stored(b"");
        // u64 value 1 encoded canonically is [1]; [0x81, 0x00] is an overlong varint.
        assert_eq!(
            decode_body::<u64>(&id, ObjectKind::Commit, &[1]).unwrap(),
            1
        );
        assert!(decode_body::<u64>(&id, ObjectKind::Commit, &[1, 0]).is_err());
        assert!(decode_body::<u64>(&id, ObjectKind::Commit, &[0x81, 0x00]).is_err());
    }
}
