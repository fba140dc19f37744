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

/// The chunk list of a file of `size` bytes whose manifest root is `root`, read with
/// `fetch` a level at a time: [`ManifestWalk`] driven to its end. Checkout and the
/// streamed restore's chunk count use it; `fetch` is given the ids of one level's
/// nodes, in order, and returns them decoded (one batched read per level).
pub(crate) fn chunk_list<E: From<ObjectError>>(
    root: ObjectId,
    size: u64,
    fetch: &mut FetchLevel<'_, E>,
) -> Result<Vec<ChunkRef>, E> {
    let mut walk = ManifestWalk::new(root, size);
    loop {
        let nodes = fetch(walk.wanted())?;
        if let Some(chunks) = walk.feed(nodes)? {
            return Ok(chunks);
        }
    }
}

/// The one manifest walker, as a resumable step (the caller reads): the chunk list of
/// a file of `size` bytes whose manifest root is `root`, one level of nodes per step.
/// [`wanted`](Self::wanted) names the nodes of the next level (the root first);
/// [`feed`](Self::feed) takes them decoded, in that order, and answers the chunk list
/// once the leaves are in. Several walks can be stepped side by side, so a caller
/// walking many files (reachability) reads one level of all of them per batched read.
///
/// Checks what the format requires of the whole: the root's size is `size`; each
/// child is one level below its parent and as large as its index entry says; no
/// chunk but the last is shorter than [`CHUNK_MIN`]; there are at least two chunks;
/// and the lengths add up to `size`. Nodes may share children, so a few objects could
/// describe a chunk list far longer than the file: every chunk but the last is at
/// least [`CHUNK_MIN`] bytes, which bounds the chunk references ([`max_chunks`]);
/// every node but a level's last has at least two items, so a canonical manifest has
/// fewer index entries than chunks (plus one per level). Each level is charged its
/// items before the next is asked for, so the reading and decoding work is bounded by
/// `size` too. Whether the nodes are cut canonically is the caller's check (it needs
/// the chunk list's re-cut, `ContentObjects::from_spans`).
#[derive(Debug, Clone)]
pub(crate) struct ManifestWalk {
    root: ObjectId,
    size: u64,
    /// Index entries and chunk references charged so far.
    charged: u64,
    /// The ids asked for by [`wanted`](Self::wanted).
    ids: Vec<ObjectId>,
    /// What each asked-for node's parent says of it (none for the root).
    claims: Vec<(ObjectId, ManifestChild)>,
    /// The level of the nodes asked for (unknown for the root).
    level: Option<u8>,
    chunks: Vec<ChunkRef>,
}

impl ManifestWalk {
    /// A walk of the manifest rooted at `root` for a file of `size` bytes.
    pub fn new(root: ObjectId, size: u64) -> Self {
        Self {
            root,
            size,
            charged: 0,
            ids: vec![root],
            claims: Vec::new(),
            level: None,
            chunks: Vec::new(),
        }
    }

    /// The nodes to read next, in order: never empty before the walk ends.
    pub fn wanted(&self) -> &[ObjectId] {
        &self.ids
    }

    fn bad(&self, reason: String) -> ObjectError {
        ObjectError::malformed(self.root, ObjectKind::Manifest, reason)
    }

    fn charge(&mut self, n: u64) -> Result<(), ObjectError> {
        self.charged += n;
        if self.charged > 2 * max_chunks(self.size) + 64 {
            return Err(self.bad(format!(
                "more chunks or index entries than a file of {} bytes can have",
                self.size
            )));
        }
        Ok(())
    }

    /// Takes the nodes [`wanted`](Self::wanted) named, decoded, in order. Answers the
    /// chunk list when the walk is done, `None` when it wants another level.
    pub fn feed(&mut self, nodes: Vec<Manifest>) -> Result<Option<Vec<ChunkRef>>, ObjectError> {
        if nodes.len() != self.ids.len() {
            return Err(self.bad(format!(
                "{} nodes read for {} asked",
                nodes.len(),
                self.ids.len()
            )));
        }
        let items = |m: &Manifest| match m {
            Manifest::Leaf(c) => c.len() as u64,
            Manifest::Internal { children, .. } => children.len() as u64,
        };
        let mut frontier = Vec::with_capacity(nodes.len());
        match self.level {
            None => {
                let top = nodes
                    .into_iter()
                    .next()
                    .ok_or_else(|| self.bad("no root node".into()))?;
                if top.size() != self.size {
                    return Err(self.bad(format!(
                        "manifest holds {} bytes where the entry says {}",
                        top.size(),
                        self.size
                    )));
                }
                self.charge(items(&top))?;
                frontier.push((self.root, top));
            }
            Some(level) => {
                let claims = std::mem::take(&mut self.claims);
                for ((parent, claim), child) in claims.into_iter().zip(nodes) {
                    self.charge(items(&child))?;
                    if child.level() + 1 != level || child.size() != claim.size {
                        return Err(ObjectError::malformed(
                            parent,
                            ObjectKind::Manifest,
                            format!("child {} does not match its index entry", claim.id),
                        ));
                    }
                    frontier.push((claim.id, child));
                }
            }
        }
        // Every node of the frontier is one level below its parent.
        let level = frontier[0].1.level();
        let most = max_chunks(self.size);
        let mut claims: Vec<(ObjectId, ManifestChild)> = Vec::new();
        for (nid, node) in frontier {
            match node {
                Manifest::Leaf(c) => {
                    if (self.chunks.len() + c.len()) as u64 > most {
                        return Err(self.bad(format!(
                            "more chunks or index entries than a file of {} bytes can have",
                            self.size
                        )));
                    }
                    self.chunks.extend(c)
                }
                Manifest::Internal { children, .. } => {
                    // Charged when the node was read; its children are charged as
                    // index entries here, as before the next level is read.
                    self.charge(children.len() as u64)?;
                    claims.extend(children.into_iter().map(|c| (nid, c)));
                }
            }
        }
        if level > 0 {
            self.ids = claims.iter().map(|(_, c)| c.id).collect();
            self.claims = claims;
            self.level = Some(level);
            return Ok(None);
        }
        self.finish().map(Some)
    }

    fn finish(&mut self) -> Result<Vec<ChunkRef>, ObjectError> {
        self.ids.clear();
        let chunks = std::mem::take(&mut self.chunks);
        // FastCDC cuts no chunk but the last below the minimum.
        if let Some(short) = chunks
            .iter()
            .rev()
            .skip(1)
            .find(|c| (c.len as usize) < CHUNK_MIN)
        {
            return Err(self.bad(format!(
                "chunk {} of {} bytes is not the last, yet shorter than {CHUNK_MIN} bytes",
                short.id, short.len
            )));
        }
        let total = chunks.iter().fold(0u64, |acc, c| acc + u64::from(c.len));
        if total != self.size {
            return Err(self.bad(format!(
                "chunks hold {total} bytes where the manifest says {}",
                self.size
            )));
        }
        if chunks.len() < 2 {
            return Err(self.bad("a manifest must list at least two chunks".into()));
        }
        Ok(chunks)
    }
}
