//! File manifests: the ordered chunk list of a multi-chunk file, as a content-defined
//! tree so that a small edit to a huge file rewrites O(log n) bytes of manifest.
//!
//! The chunk list is cut into [`Manifest::Leaf`] nodes at boundaries decided from the
//! chunk ids (see `crate::boundary`); the leaves are indexed by
//! [`Manifest::Internal`] nodes cut the same way, up to one root.

use serde::{Deserialize, Serialize};

use super::{ObjectError, ObjectKind};
use crate::chunk::CHUNK_MAX;
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
