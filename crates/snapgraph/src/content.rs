//! Turning bytes into content objects (inline, one chunk, or chunks plus a manifest
//! tree), and emitting those objects.

use std::sync::Arc;

use crate::boundary::{split, varint_len};
use crate::chunk::cut_points;
use crate::emit::Emitter;
use crate::id::ObjectId;
use crate::limits::INLINE_MAX;
use crate::object::manifest::{ChunkRef, Manifest, ManifestChild};
use crate::object::tree::Content;
use crate::object::{chunk_id, encode, encode_chunk, ObjectKind};

/// One chunk of some content: where it is in the bytes, and its id.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    pub id: ObjectId,
    pub start: usize,
    pub len: u32,
}

/// One encoded manifest node.
#[derive(Debug, Clone)]
pub(crate) struct MSlot {
    pub id: ObjectId,
    pub stored: Arc<[u8]>,
    /// How many items (chunks or children) it holds.
    pub items: u32,
}

/// The objects that store some bytes. Kept beside the bytes so that an unchanged file
/// is never re-chunked or re-hashed.
#[derive(Debug, Clone)]
pub(crate) struct ContentObjects {
    pub size: u64,
    pub content: Content,
    /// Chunks in order; empty for inline content.
    pub chunks: Vec<Span>,
    /// Manifest levels, leaves first, the last holding the root; empty unless the
    /// content has more than one chunk.
    pub manifest: Vec<Vec<MSlot>>,
}

impl ContentObjects {
    /// Chunks and hashes `data`.
    pub fn build(data: &[u8]) -> Self {
        if data.len() <= INLINE_MAX {
            return Self::inline(data);
        }
        let mut spans = Vec::new();
        let mut start = 0;
        for end in cut_points(data) {
            spans.push(Span {
                id: chunk_id(&data[start..end]),
                start,
                len: (end - start) as u32,
            });
            start = end;
        }
        Self::from_spans(data.len() as u64, spans)
    }

    fn inline(data: &[u8]) -> Self {
        Self {
            size: data.len() as u64,
            content: Content::Inline(data.to_vec()),
            chunks: Vec::new(),
            manifest: Vec::new(),
        }
    }

    /// The objects for content of `size` bytes already cut into `spans` (at least one;
    /// `size` above [`INLINE_MAX`]).
    pub fn from_spans(size: u64, spans: Vec<Span>) -> Self {
        if spans.len() == 1 {
            return Self {
                size,
                content: Content::Chunk(spans[0].id),
                chunks: spans,
                manifest: Vec::new(),
            };
        }
        let manifest = build_manifest(&spans);
        let root = manifest
            .last()
            .and_then(|l| l.first())
            .map(|s| s.id)
            .unwrap_or(ObjectId::from_bytes([0; 32]));
        Self {
            size,
            content: Content::Manifest(root),
            chunks: spans,
            manifest,
        }
    }

    /// Adds the objects not in `have` (nor already emitted) to `out`, children first.
    pub fn emit(&self, data: &[u8], out: &mut Emitter<'_>) {
        match &self.content {
            Content::Inline(_) => {}
            Content::Chunk(_) => self.emit_chunk(0, data, out),
            Content::Manifest(_) => {
                let top = self.manifest.len() - 1;
                self.emit_manifest(top, 0, data, out);
            }
        }
    }

    fn emit_chunk(&self, i: usize, data: &[u8], out: &mut Emitter<'_>) {
        let span = self.chunks[i];
        if out.wants(&span.id) {
            let bytes = &data[span.start..span.start + span.len as usize];
            out.push(span.id, encode_chunk(bytes));
        }
    }

    fn emit_manifest(&self, level: usize, index: usize, data: &[u8], out: &mut Emitter<'_>) {
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
        out.push(slot.id, slot.stored.to_vec());
    }
}

/// Builds the manifest tree of a chunk list, from scratch. Levels are leaves first.
fn build_manifest(spans: &[Span]) -> Vec<Vec<MSlot>> {
    let mut levels: Vec<Vec<MSlot>> = Vec::new();
    let refs: Vec<ChunkRef> = spans
        .iter()
        .map(|s| ChunkRef {
            id: s.id,
            len: s.len,
        })
        .collect();
    let mut sizes: Vec<u64> = Vec::new();
    let mut leaves = Vec::new();
    for r in split(
        &refs,
        |c| c.id.low_u32(),
        |c| ObjectId::LEN + varint_len(u64::from(c.len)),
    ) {
        let node = Manifest::Leaf(refs[r.clone()].to_vec());
        sizes.push(refs[r.clone()].iter().map(|c| u64::from(c.len)).sum());
        leaves.push(slot(&node, r.len()));
    }
    levels.push(leaves);
    let mut level = 1u8;
    while levels.last().map(Vec::len).unwrap_or(0) > 1 {
        let below = levels.last().map(Vec::as_slice).unwrap_or(&[]);
        let children: Vec<ManifestChild> = below
            .iter()
            .zip(&sizes)
            .map(|(s, &size)| ManifestChild { id: s.id, size })
            .collect();
        let mut next = Vec::new();
        let mut next_sizes = Vec::new();
        for r in split(
            &children,
            |c| c.id.low_u32(),
            |c| ObjectId::LEN + varint_len(c.size),
        ) {
            next_sizes.push(children[r.clone()].iter().map(|c| c.size).sum());
            let node = Manifest::Internal {
                level,
                children: children[r.clone()].to_vec(),
            };
            next.push(slot(&node, r.len()));
        }
        levels.push(next);
        sizes = next_sizes;
        level += 1;
    }
    levels
}

fn slot(node: &Manifest, items: usize) -> MSlot {
    let stored = encode(ObjectKind::Manifest, node);
    MSlot {
        id: ObjectId::hash_stored(&stored),
        stored: stored.into(),
        items: items as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::tests_support::pseudo_random;

    #[test]
    fn representation_follows_size() {
        assert!(matches!(
            ContentObjects::build(b"tiny").content,
            Content::Inline(_)
        ));
        assert!(matches!(
            ContentObjects::build(&[7u8; 4000]).content,
            Content::Chunk(_)
        ));
        let big = pseudo_random(1 << 20, 3);
        let objs = ContentObjects::build(&big);
        assert!(matches!(objs.content, Content::Manifest(_)));
        assert_eq!(
            objs.chunks.iter().map(|s| s.len as usize).sum::<usize>(),
            big.len()
        );
    }

    #[test]
    fn small_edit_rewrites_little_manifest() {
        let mut data = pseudo_random(64 << 20, 11);
        let before = ContentObjects::build(&data);
        let old: std::collections::HashSet<ObjectId> = before
            .manifest
            .iter()
            .flatten()
            .map(|s| s.id)
            .chain(before.chunks.iter().map(|s| s.id))
            .collect();
        data[30 << 20..(30 << 20) + 16].copy_from_slice(&[0xAB; 16]);
        let after = ContentObjects::build(&data);
        let mut new_bytes = 0;
        for s in after.manifest.iter().flatten() {
            if !old.contains(&s.id) {
                new_bytes += s.stored.len();
            }
        }
        for s in &after.chunks {
            if !old.contains(&s.id) {
                new_bytes += s.len as usize + 2;
            }
        }
        assert!(new_bytes < 64 << 10, "{new_bytes} new bytes");
        assert!(after.manifest.len() >= 2);
    }
}
