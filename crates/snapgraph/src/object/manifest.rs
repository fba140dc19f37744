//! File manifests: the ordered chunk list of a multi-chunk file, as a content-defined
//! tree so that a small edit to a huge file rewrites O(log n) bytes of manifest.
//!
//! The chunk list is cut into [`Manifest::Leaf`] nodes at boundaries decided from the
//! chunk ids (see `crate::boundary`); the leaves are indexed by
//! [`Manifest::Internal`] nodes cut the same way, up to one root.

use serde::{Deserialize, Serialize};

use super::{ObjectError, ObjectKind};
use crate::chunk::{CHUNK_MAX, CHUNK_MIN};
use crate::id::ObjectId;
use crate::limits::{MAX_LEVEL, MAX_NODE_ITEMS};

/// One chunk of a file, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChunkRef {
    /// The chunk object.
    pub id: ObjectId,
    /// Its length in bytes (1 to 64 KiB).
    pub len: u32,
}

/// An index entry of an internal manifest node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ManifestChild {
    /// The child node.
    pub id: ObjectId,
    /// The content bytes under the child.
    pub size: u64,
}

/// One stored manifest node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Manifest {
    /// Chunks in file order, at least one.
    Leaf(#[serde(deserialize_with = "super::bounded::node_items")] Vec<ChunkRef>),
    /// Children one level down, in file order.
    Internal {
        /// 1 for a node whose children are leaves, up to [`MAX_LEVEL`].
        level: u8,
        /// The children, at least one.
        #[serde(deserialize_with = "super::bounded::node_items")]
        children: Vec<ManifestChild>,
    },
}

impl Manifest {
    /// The node's level: 0 for a leaf.
    pub fn level(&self) -> u8 {
        match self {
            Manifest::Leaf(_) => 0,
            Manifest::Internal { level, .. } => *level,
        }
    }

    /// The content bytes under this node.
    pub fn size(&self) -> u64 {
        match self {
            Manifest::Leaf(chunks) => chunks.iter().map(|c| u64::from(c.len)).sum(),
            Manifest::Internal { children, .. } => children
                .iter()
                .fold(0u64, |acc, c| acc.saturating_add(c.size)),
        }
    }

    /// Decodes and checks a manifest node's body.
    pub fn decode(id: &ObjectId, body: &[u8]) -> Result<Self, ObjectError> {
        let node: Manifest = super::decode_body(id, ObjectKind::Manifest, body)?;
        let bad = |r: String| ObjectError::malformed(*id, ObjectKind::Manifest, r);
        match &node {
            Manifest::Leaf(chunks) => {
                if chunks.is_empty() || chunks.len() > MAX_NODE_ITEMS {
                    return Err(bad(format!("{} chunks in one node", chunks.len())));
                }
                if let Some(c) = chunks
                    .iter()
                    .find(|c| c.len == 0 || c.len as usize > CHUNK_MAX)
                {
                    return Err(bad(format!("chunk {} has length {}", c.id, c.len)));
                }
            }
            Manifest::Internal { level, children } => {
                if *level == 0 || *level > MAX_LEVEL {
                    return Err(bad(format!("internal node level {level}")));
                }
                if children.is_empty() || children.len() > MAX_NODE_ITEMS {
                    return Err(bad(format!("{} children in one node", children.len())));
                }
                if let Some(c) = children.iter().find(|c| c.size == 0) {
                    return Err(bad(format!("child {} is empty", c.id)));
                }
                if children
                    .iter()
                    .try_fold(0u64, |acc, c| acc.checked_add(c.size))
                    .is_none()
                {
                    return Err(bad("child sizes overflow".into()));
                }
            }
        }
        Ok(node)
    }
}

/// The most chunks a file of `size` bytes can be cut into: every chunk but the last
/// is at least [`CHUNK_MIN`] bytes.
pub(crate) fn max_chunks(size: u64) -> u64 {
    size / CHUNK_MIN as u64 + 1
}

/// Reads one level of a manifest: the nodes of the given ids, decoded, in order.
pub(crate) type FetchLevel<'a, E> = dyn FnMut(&[ObjectId]) -> Result<Vec<Manifest>, E> + 'a;

/// The chunk list of a file of `size` bytes whose manifest root is `root`: the one
/// manifest walker, shared by checkout and the streamed restore's chunk count.
///
/// Reads a level at a time: `fetch` is given the ids of one level's nodes, in order,
/// and returns them decoded (one batched read per level). Checks what the format
/// requires of the whole: the root's size is `size`; each child is one level below
/// its parent and as large as its index entry says; no chunk but the last is shorter
/// than [`CHUNK_MIN`]; there are at least two chunks; and the lengths add up to
/// `size`. Nodes may share children, so a few objects could describe a chunk list
/// far longer than the file: every chunk but the last is at least [`CHUNK_MIN`]
/// bytes, which bounds the chunk references ([`max_chunks`]); every node but a
/// level's last has at least two items, so a canonical manifest has fewer index
/// entries than chunks (plus one per level). Each level is charged its items before
/// the next is fetched, so the reading and decoding work is bounded by `size` too.
/// Whether the nodes are cut canonically is the caller's check (it needs the chunk
/// list's re-cut, `ContentObjects::from_spans`).
pub(crate) fn chunk_list<E: From<ObjectError>>(
    root: ObjectId,
    size: u64,
    fetch: &mut FetchLevel<'_, E>,
) -> Result<Vec<ChunkRef>, E> {
    let bad = |reason: String| ObjectError::malformed(root, ObjectKind::Manifest, reason);
    let top = fetch(&[root])?
        .pop()
        .ok_or_else(|| bad("no root node".into()))?;
    if top.size() != size {
        return Err(bad(format!(
            "manifest holds {} bytes where the entry says {size}",
            top.size()
        ))
        .into());
    }
    let most = max_chunks(size);
    let too_many = || {
        bad(format!(
            "more chunks or index entries than a file of {size} bytes can have"
        ))
    };
    let items = |m: &Manifest| match m {
        Manifest::Leaf(c) => c.len() as u64,
        Manifest::Internal { children, .. } => children.len() as u64,
    };
    let mut charged = items(&top);
    let mut frontier = vec![(root, top)];
    let mut chunks: Vec<ChunkRef> = Vec::new();
    loop {
        let level = frontier[0].1.level();
        let mut claims: Vec<(ObjectId, ManifestChild)> = Vec::new();
        // Every node of the frontier was checked one level below its parent.
        for (nid, node) in frontier {
            match node {
                Manifest::Leaf(c) => {
                    if (chunks.len() + c.len()) as u64 > most {
                        return Err(too_many().into());
                    }
                    chunks.extend(c)
                }
                Manifest::Internal { children, .. } => {
                    charged += children.len() as u64;
                    if charged > 2 * most + 64 {
                        return Err(too_many().into());
                    }
                    claims.extend(children.into_iter().map(|c| (nid, c)));
                }
            }
        }
        if level == 0 {
            break;
        }
        let ids: Vec<ObjectId> = claims.iter().map(|(_, c)| c.id).collect();
        let nodes = fetch(&ids)?;
        if nodes.len() != ids.len() {
            return Err(bad(format!(
                "{} nodes read for {} asked",
                nodes.len(),
                ids.len()
            ))
            .into());
        }
        frontier = Vec::with_capacity(nodes.len());
        for ((parent, claim), child) in claims.into_iter().zip(nodes) {
            charged += items(&child);
            if charged > 2 * most + 64 {
                return Err(too_many().into());
            }
            if child.level() + 1 != level || child.size() != claim.size {
                return Err(ObjectError::malformed(
                    parent,
                    ObjectKind::Manifest,
                    format!("child {} does not match its index entry", claim.id),
                )
                .into());
            }
            frontier.push((claim.id, child));
        }
    }
    // FastCDC cuts no chunk but the last below the minimum.
    if let Some(short) = chunks
        .iter()
        .rev()
        .skip(1)
        .find(|c| (c.len as usize) < CHUNK_MIN)
    {
        return Err(bad(format!(
            "chunk {} of {} bytes is not the last, yet shorter than {CHUNK_MIN} bytes",
            short.id, short.len
        ))
        .into());
    }
    let total = chunks.iter().fold(0u64, |acc, c| acc + u64::from(c.len));
    if total != size {
        return Err(bad(format!(
            "chunks hold {total} bytes where the manifest says {size}"
        ))
        .into());
    }
    if chunks.len() < 2 {
        return Err(bad("a manifest must list at least two chunks".into()).into());
    }
    Ok(chunks)
}
