//! Commit objects: a root tree, parents, the opaque state and metadata.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::tree::Content;
use super::{ObjectError, ObjectKind};
use crate::id::ObjectId;
use crate::limits::MAX_PARENTS;

/// The highest generation a commit may have: 2^53 - 1, so that generations stay exact
/// as JavaScript numbers (`Number.MAX_SAFE_INTEGER`). Decoders refuse higher ones, and
/// a commit whose parent has this generation is refused
/// ([`CommitError::GenerationOverflow`](crate::CommitError::GenerationOverflow)).
pub const MAX_GENERATION: u64 = (1 << 53) - 1;

/// A stored commit.
///
/// There is no timestamp: a commit's id depends only on what it records, so the same
/// snapshot committed twice on the same parents has the same id. Callers who want a
/// time put it in [`meta`](Self::meta).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitObject {
    /// The root directory's tree node.
    pub tree: ObjectId,
    /// Parent commits, first parent first; empty for a root commit. No duplicates.
    #[serde(deserialize_with = "super::bounded::parents")]
    pub parents: Vec<ObjectId>,
    /// 1 for a root commit, else 1 + the largest parent generation; at most
    /// [`MAX_GENERATION`].
    pub generation: u64,
    /// Length of the opaque state bytes.
    pub state_size: u64,
    /// Where the state bytes are, stored like file content.
    pub state: Content,
    /// The capability fingerprint of the environment that committed, if it set one.
    pub capabilities: Option<ObjectId>,
    /// The recorded external reads, if any were recorded.
    pub reads: Option<ObjectId>,
    /// Caller metadata: message ids, authors, times, anything.
    pub meta: BTreeMap<String, String>,
}

impl CommitObject {
    /// Every object this commit references directly, with the kind each must have,
    /// parents excluded.
    pub fn snapshot_refs(&self) -> Vec<(ObjectId, ObjectKind)> {
        let mut out = vec![(self.tree, ObjectKind::Tree)];
        out.extend(self.state.object());
        out.extend(self.capabilities.map(|id| (id, ObjectKind::Capabilities)));
        out.extend(self.reads.map(|id| (id, ObjectKind::Reads)));
        out
    }

    /// The stored bytes of this commit and their id: how a tool makes a commit that
    /// shares another's snapshot (a tag with labels in [`meta`](Self::meta), say)
    /// without a workspace. Nothing is checked here; [`decode`](Self::decode) checks
    /// what readers will (parents distinct, generation above every parent's).
    pub fn to_stored(&self) -> (ObjectId, Vec<u8>) {
        let stored = super::encode(ObjectKind::Commit, self);
        (ObjectId::hash_stored(&stored), stored)
    }

    /// Decodes and checks a commit body.
    pub fn decode(id: &ObjectId, body: &[u8]) -> Result<Self, ObjectError> {
        let c: CommitObject = super::decode_body(id, ObjectKind::Commit, body)?;
        let bad = |r: String| ObjectError::malformed(*id, ObjectKind::Commit, r);
        if c.parents.len() > MAX_PARENTS {
            return Err(bad(format!("{} parents", c.parents.len())));
        }
        for (i, p) in c.parents.iter().enumerate() {
            if c.parents[..i].contains(p) {
                return Err(bad(format!("parent {p} listed twice")));
            }
            if p == id {
                return Err(bad("commit is its own parent".into()));
            }
        }
        let min_generation = if c.parents.is_empty() { 1 } else { 2 };
        if c.generation > MAX_GENERATION {
            return Err(bad(format!(
                "generation {} above the maximum {MAX_GENERATION}",
                c.generation
            )));
        }
        if c.generation < min_generation || (c.parents.is_empty() && c.generation != 1) {
            return Err(bad(format!(
                "generation {} with {} parents",
                c.generation,
                c.parents.len()
            )));
        }
        c.state
            .check(c.state_size)
            .map_err(|r| bad(format!("state: {r}")))?;
        Ok(c)
    }
}
