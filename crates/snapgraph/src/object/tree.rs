//! Tree nodes: one directory, split into a content-defined B-tree when it is large.
//!
//! A directory is a sorted list of [`Entry`]s. Small directories are one
//! [`TreeNode::Leaf`]. Large ones are cut into leaves at content-defined boundaries
//! decided from each entry name's hash (see `crate::boundary`), and the leaves are
//! indexed by [`TreeNode::Internal`] nodes, cut the same way, up to one root. The cut
//! depends only on the entries, so the same directory always has the same root id.

use serde::{Deserialize, Serialize};

use super::wire::{put_bytes, put_varint, Problem, Reader};
use super::{ObjectError, ObjectKind};
use crate::boundary::varint_len;
use crate::id::ObjectId;
use crate::limits::{INLINE_MAX, MAX_LEVEL, MAX_NODE_ITEMS};
use crate::path::check_name;

/// How a file's (or the state's) bytes are stored.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Content {
    /// Up to [`INLINE_MAX`] bytes, stored in the entry itself.
    Inline(Vec<u8>),
    /// One chunk holds the whole content.
    Chunk(ObjectId),
    /// The root of a chunk-list tree (see [`super::manifest`]).
    Manifest(ObjectId),
}

impl Content {
    /// The object this content points to, and its kind, if not inline.
    pub fn object(&self) -> Option<(ObjectId, ObjectKind)> {
        match self {
            Content::Inline(_) => None,
            Content::Chunk(id) => Some((*id, ObjectKind::Chunk)),
            Content::Manifest(id) => Some((*id, ObjectKind::Manifest)),
        }
    }

    /// Checks that the representation is the one the engine would choose for `size`
    /// bytes: inline exactly when small, and the inline length equal to the size.
    pub(crate) fn check(&self, size: u64) -> Result<(), &'static str> {
        match self {
            Content::Inline(bytes) if bytes.len() as u64 != size => {
                Err("inline content length differs from size")
            }
            Content::Inline(_) if size > INLINE_MAX as u64 => Err("inline content too large"),
            Content::Chunk(_) | Content::Manifest(_) if size <= INLINE_MAX as u64 => {
                Err("small content must be inline")
            }
            Content::Chunk(_) if size > crate::chunk::CHUNK_MAX as u64 => {
                Err("single-chunk content larger than the largest chunk")
            }
            _ => Ok(()),
        }
    }
}

/// What a directory entry is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EntryNode {
    /// A regular file.
    File {
        /// Its length in bytes.
        size: u64,
        /// Where its bytes are.
        content: Content,
    },
    /// A subdirectory.
    Dir {
        /// The root node of its tree.
        tree: ObjectId,
        /// How many files and symlinks it holds, at any depth.
        files: u64,
        /// How many file bytes it holds, at any depth.
        bytes: u64,
    },
    /// A symbolic link (never followed by the engine).
    Symlink {
        /// The link target, as written.
        target: String,
    },
}

/// What a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
}

/// One named entry of a directory.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Entry {
    /// The entry's name: non-empty, at most 255 bytes, no `/` or NUL, not `.` or `..`.
    pub name: String,
    /// Permission bits (`0o7777` at most).
    pub mode: u32,
    /// What it is.
    pub node: EntryNode,
}

impl Entry {
    /// Files and symlinks this entry accounts for (1, or a directory's total).
    pub fn files(&self) -> u64 {
        match &self.node {
            EntryNode::Dir { files, .. } => *files,
            _ => 1,
        }
    }

    /// File bytes this entry accounts for.
    pub fn bytes(&self) -> u64 {
        match &self.node {
            EntryNode::File { size, .. } => *size,
            EntryNode::Dir { bytes, .. } => *bytes,
            EntryNode::Symlink { .. } => 0,
        }
    }

    /// Object references of this entry, with the kind each must have.
    pub fn refs(&self) -> Option<(ObjectId, ObjectKind)> {
        match &self.node {
            EntryNode::File { content, .. } => content.object(),
            EntryNode::Dir { tree, .. } => Some((*tree, ObjectKind::Tree)),
            EntryNode::Symlink { .. } => None,
        }
    }

    fn check(&self) -> Result<(), String> {
        check_name(&self.name).map_err(|r| format!("entry {:?}: {r}", self.name))?;
        if self.mode > 0o7777 {
            return Err(format!(
                "entry {:?}: mode {:o} out of range",
                self.name, self.mode
            ));
        }
        match &self.node {
            EntryNode::File { size, content } => content
                .check(*size)
                .map_err(|r| format!("entry {:?}: {r}", self.name)),
            EntryNode::Dir { .. } => Ok(()),
            EntryNode::Symlink { target } => crate::limits::check_symlink_target(target)
                .map_err(|r| format!("entry {:?}: {r}", self.name)),
        }
    }
}

/// An index entry of an internal tree node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TreeChild {
    /// The name of the first entry under the child.
    pub first: String,
    /// The child node.
    pub tree: ObjectId,
    /// Files and symlinks under the child, at any depth.
    pub files: u64,
    /// File bytes under the child, at any depth.
    pub bytes: u64,
}

/// One stored tree node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TreeNode {
    /// Entries, sorted by name (bytewise), names unique.
    Leaf(#[serde(deserialize_with = "super::bounded::node_items")] Vec<Entry>),
    /// Children one level down, sorted by their first names.
    Internal {
        /// 1 for a node whose children are leaves, and so on up to [`MAX_LEVEL`].
        level: u8,
        /// The children, at least one.
        #[serde(deserialize_with = "super::bounded::node_items")]
        children: Vec<TreeChild>,
    },
}

impl TreeNode {
    /// The node's level: 0 for a leaf.
    pub fn level(&self) -> u8 {
        match self {
            TreeNode::Leaf(_) => 0,
            TreeNode::Internal { level, .. } => *level,
        }
    }

    /// Files and bytes accounted for below this node.
    pub fn totals(&self) -> (u64, u64) {
        let mut files = 0u64;
        let mut bytes = 0u64;
        match self {
            TreeNode::Leaf(entries) => {
                for e in entries {
                    files = files.saturating_add(e.files());
                    bytes = bytes.saturating_add(e.bytes());
                }
            }
            TreeNode::Internal { children, .. } => {
                for c in children {
                    files = files.saturating_add(c.files);
                    bytes = bytes.saturating_add(c.bytes);
                }
            }
        }
        (files, bytes)
    }

    /// Decodes and checks a tree node's body (structure only: names, order, ranges).
    pub fn decode(id: &ObjectId, body: &[u8]) -> Result<Self, ObjectError> {
        let node =
            Self::read(body).map_err(|r| ObjectError::malformed(*id, ObjectKind::Tree, r))?;
        node.check()
            .map_err(|r| ObjectError::malformed(*id, ObjectKind::Tree, r))?;
        Ok(node)
    }

    /// The node whose canonical postcard encoding `body` is (see `super::wire`): what
    /// `super::decode_body` accepts, without its second encoding.
    fn read(body: &[u8]) -> Result<Self, Problem> {
        let mut r = Reader::new(body);
        let node = match r.variant("node variant")? {
            0 => {
                let n = r.len(MAX_NODE_ITEMS, "entry count")?;
                // Each entry takes at least 4 bytes: no capacity beyond what the body
                // can hold.
                let mut entries = Vec::with_capacity(n.min(r.remaining() / 4));
                for _ in 0..n {
                    entries.push(read_entry(&mut r)?);
                }
                TreeNode::Leaf(entries)
            }
            1 => {
                let level = r.byte("level")?;
                let n = r.len(MAX_NODE_ITEMS, "child count")?;
                let mut children = Vec::with_capacity(n.min(r.remaining() / 35));
                for _ in 0..n {
                    children.push(TreeChild {
                        first: r.string("child key")?,
                        tree: r.id("child tree")?,
                        files: r.u64("child files")?,
                        bytes: r.u64("child bytes")?,
                    });
                }
                TreeNode::Internal { level, children }
            }
            v => return Err(format!("cannot decode: unknown node variant {v}")),
        };
        r.finish()?;
        Ok(node)
    }

    fn check(&self) -> Result<(), String> {
        // Totals are sums of sizes; a node whose sums overflow describes nothing real
        // (and would make saturated totals compare equal).
        fn sums(mut items: impl Iterator<Item = (u64, u64)>) -> Option<(u64, u64)> {
            items.try_fold((0u64, 0u64), |(f, b), (ef, eb)| {
                Some((f.checked_add(ef)?, b.checked_add(eb)?))
            })
        }
        let overflow = match self {
            TreeNode::Leaf(entries) => sums(entries.iter().map(|e| (e.files(), e.bytes()))),
            TreeNode::Internal { children, .. } => {
                sums(children.iter().map(|c| (c.files, c.bytes)))
            }
        }
        .is_none();
        if overflow {
            return Err("file or byte totals overflow".into());
        }
        match self {
            TreeNode::Leaf(entries) => {
                if entries.len() > MAX_NODE_ITEMS {
                    return Err(format!("{} entries in one node", entries.len()));
                }
                for e in entries {
                    e.check()?;
                }
                for w in entries.windows(2) {
                    if w[0].name >= w[1].name {
                        return Err(format!(
                            "entries not strictly sorted at {:?}, {:?}",
                            w[0].name, w[1].name
                        ));
                    }
                }
            }
            TreeNode::Internal { level, children } => {
                if *level == 0 || *level > MAX_LEVEL {
                    return Err(format!("internal node level {level}"));
                }
                if children.is_empty() || children.len() > MAX_NODE_ITEMS {
                    return Err(format!("{} children in one node", children.len()));
                }
                for c in children {
                    check_name(&c.first).map_err(|r| format!("child key {:?}: {r}", c.first))?;
                }
                for w in children.windows(2) {
                    if w[0].first >= w[1].first {
                        return Err(format!(
                            "children not strictly sorted at {:?}, {:?}",
                            w[0].first, w[1].first
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Appends the body of the leaf of `entries`: postcard's encoding of
/// `TreeNode::Leaf`, written by hand (through serde it was most of a node's build,
/// and an entry was serialized once more to learn its size: see [`entry_len`]).
pub(crate) fn write_leaf(entries: &[Entry], out: &mut Vec<u8>) {
    out.push(0);
    put_varint(out, entries.len() as u64);
    for e in entries {
        write_entry(e, out);
    }
}

/// Appends the body of an internal node of `level` over `children`.
pub(crate) fn write_internal(level: u8, children: &[TreeChild], out: &mut Vec<u8>) {
    out.push(1);
    out.push(level);
    put_varint(out, children.len() as u64);
    for c in children {
        put_bytes(out, c.first.as_bytes());
        out.extend_from_slice(c.tree.as_bytes());
        put_varint(out, c.files);
        put_varint(out, c.bytes);
    }
}

fn write_entry(e: &Entry, out: &mut Vec<u8>) {
    put_bytes(out, e.name.as_bytes());
    put_varint(out, u64::from(e.mode));
    match &e.node {
        EntryNode::File { size, content } => {
            out.push(0);
            put_varint(out, *size);
            match content {
                Content::Inline(b) => {
                    out.push(0);
                    put_bytes(out, b);
                }
                Content::Chunk(id) => {
                    out.push(1);
                    out.extend_from_slice(id.as_bytes());
                }
                Content::Manifest(id) => {
                    out.push(2);
                    out.extend_from_slice(id.as_bytes());
                }
            }
        }
        EntryNode::Dir { tree, files, bytes } => {
            out.push(1);
            out.extend_from_slice(tree.as_bytes());
            put_varint(out, *files);
            put_varint(out, *bytes);
        }
        EntryNode::Symlink { target } => {
            out.push(2);
            put_bytes(out, target.as_bytes());
        }
    }
}

/// The bytes [`write_entry`] writes for `e` (what decides where a directory's nodes
/// are cut), counted without writing them.
pub(crate) fn entry_len(e: &Entry) -> usize {
    let with_len = |n: usize| varint_len(n as u64) + n;
    // Each variant index below 128 takes one byte.
    with_len(e.name.len())
        + varint_len(u64::from(e.mode))
        + 1
        + match &e.node {
            EntryNode::File { size, content } => {
                varint_len(*size)
                    + 1
                    + match content {
                        Content::Inline(b) => with_len(b.len()),
                        Content::Chunk(_) | Content::Manifest(_) => ObjectId::LEN,
                    }
            }
            EntryNode::Dir { files, bytes, .. } => {
                ObjectId::LEN + varint_len(*files) + varint_len(*bytes)
            }
            EntryNode::Symlink { target } => with_len(target.len()),
        }
}

/// One entry of a leaf (see [`TreeNode::read`]).
fn read_entry(r: &mut Reader<'_>) -> Result<Entry, Problem> {
    let name = r.string("entry name")?;
    let mode = r.u32("entry mode")?;
    let node = match r.variant("entry variant")? {
        0 => {
            let size = r.u64("file size")?;
            let content = match r.variant("content variant")? {
                0 => Content::Inline(r.bytes("inline content")?.to_vec()),
                1 => Content::Chunk(r.id("chunk id")?),
                2 => Content::Manifest(r.id("manifest id")?),
                v => return Err(format!("cannot decode: unknown content variant {v}")),
            };
            EntryNode::File { size, content }
        }
        1 => EntryNode::Dir {
            tree: r.id("directory tree")?,
            files: r.u64("directory files")?,
            bytes: r.u64("directory bytes")?,
        },
        2 => EntryNode::Symlink {
            target: r.string("symlink target")?,
        },
        v => return Err(format!("cannot decode: unknown entry variant {v}")),
    };
    Ok(Entry { name, mode, node })
}

/// How many of `entries` are files or symlinks, and how many directories.
pub(crate) fn count_kinds(entries: &[Entry]) -> (u64, u64) {
    let dirs = entries
        .iter()
        .filter(|e| matches!(e.node, EntryNode::Dir { .. }))
        .count() as u64;
    (entries.len() as u64 - dirs, dirs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{encode, encode_version};

    /// A leaf of one file, mode 0644, its bytes inline.
    fn inline_leaf(name: &str, data: &[u8]) -> TreeNode {
        TreeNode::Leaf(vec![Entry {
            name: name.into(),
            mode: 0o644,
            node: EntryNode::File {
                size: data.len() as u64,
                content: Content::Inline(data.to_vec()),
            },
        }])
    }

    /// Test vectors from docs/FORMAT.md: if these change, the format changed. Version
    /// 1 objects keep their bytes and ids; version 2 has the same bodies and other ids.
    #[test]
    fn encodings_are_pinned() {
        let one = inline_leaf("a.txt", b"hi\n");
        let cases = [
            (
                1,
                "03010000",
                "93b8def1d2984c6818ac4bcad643457a66cc713468a3a5225fa94a9b1b4933f0",
                "0301000105612e747874a4030003000368690a",
                "f0064018c89364fc6c27135ce1165d222c29ecab8c0e4eec46dbace98f5cb093",
            ),
            (
                2,
                "03020000",
                "f46dbd7dbb4288d1db40a33a8f61eb2f22ee14fb78c44199fab24120c53417c7",
                "0302000105612e747874a4030003000368690a",
                "c3bdd9b0cd4083940c32c394d3ec2c1e2e87c9ba4970bfbf1b880875f07c73f8",
            ),
        ];
        for (version, empty_hex, empty_id, one_hex, one_id) in cases {
            let empty = encode_version(ObjectKind::Tree, version, &TreeNode::Leaf(Vec::new()));
            assert_eq!(hex::encode(&empty), empty_hex);
            assert_eq!(
                ObjectId::hash_stored(&empty).to_hex(),
                empty_id,
                "v{version}"
            );
            let stored = encode_version(ObjectKind::Tree, version, &one);
            assert_eq!(hex::encode(&stored), one_hex);
            assert_eq!(
                ObjectId::hash_stored(&stored).to_hex(),
                one_id,
                "v{version}"
            );
        }
        assert_eq!(
            encode(ObjectKind::Tree, &one),
            encode_version(ObjectKind::Tree, 2, &one)
        );
    }

    /// What `decode_body` (postcard's decoder, then the re-encode) makes of `body`.
    fn by_serde(body: &[u8]) -> Option<TreeNode> {
        super::super::decode_body::<TreeNode>(
            &ObjectId::from_bytes([0; 32]),
            ObjectKind::Tree,
            body,
        )
        .ok()
    }

    /// Names of one to three letters (sortedness is `check`'s, not the reader's).
    fn any_entry() -> impl proptest::strategy::Strategy<Value = Entry> {
        use proptest::prelude::*;
        let id = any::<[u8; 32]>().prop_map(ObjectId::from_bytes);
        let node = prop_oneof![
            (any::<u64>(), proptest::collection::vec(any::<u8>(), 0..6)).prop_map(|(size, b)| {
                EntryNode::File {
                    size,
                    content: Content::Inline(b),
                }
            }),
            (any::<u64>(), id.clone()).prop_map(|(size, id)| EntryNode::File {
                size,
                content: Content::Chunk(id)
            }),
            (any::<u64>(), id.clone()).prop_map(|(size, id)| EntryNode::File {
                size,
                content: Content::Manifest(id)
            }),
            (id, any::<u64>(), any::<u64>()).prop_map(|(tree, files, bytes)| EntryNode::Dir {
                tree,
                files,
                bytes
            }),
            "[a-z\u{e9}]{0,3}".prop_map(|target| EntryNode::Symlink { target }),
        ];
        ("[a-c\u{e9}]{1,3}", any::<u32>(), node).prop_map(|(name, mode, node)| Entry {
            name,
            mode,
            node,
        })
    }

    fn any_node() -> impl proptest::strategy::Strategy<Value = TreeNode> {
        use proptest::prelude::*;
        let child = ("[a-c]{0,3}", any::<[u8; 32]>(), any::<u64>(), any::<u64>()).prop_map(
            |(first, id, files, bytes)| TreeChild {
                first,
                tree: ObjectId::from_bytes(id),
                files,
                bytes,
            },
        );
        prop_oneof![
            proptest::collection::vec(any_entry(), 0..5).prop_map(TreeNode::Leaf),
            (any::<u8>(), proptest::collection::vec(child, 0..4))
                .prop_map(|(level, children)| TreeNode::Internal { level, children }),
        ]
    }

    proptest::proptest! {
        /// The strict reader accepts exactly what postcard's decoder followed by the
        /// re-encode accepts, and reads the same node: on encodings of any node, and
        /// on those bytes with a byte changed, inserted or removed.
        #[test]
        fn the_reader_is_decode_and_reencode(
            node in any_node(),
            at in proptest::prelude::any::<proptest::sample::Index>(),
            byte in proptest::prelude::any::<u8>(),
            how in 0u8..4,
        ) {
            let body = postcard::to_allocvec(&node).unwrap();
            proptest::prop_assert_eq!(TreeNode::read(&body).ok(), Some(node));
            let mut bent = body.clone();
            let i = at.index(bent.len() + 1);
            match how {
                0 if i < bent.len() => bent[i] = byte,
                1 => bent.insert(i, byte),
                2 if i < bent.len() => {
                    bent.remove(i);
                }
                _ => bent.truncate(i),
            }
            proptest::prop_assert_eq!(TreeNode::read(&bent).ok(), by_serde(&bent));
        }

        /// The same on arbitrary bytes (mostly refused; both must refuse alike).
        #[test]
        fn the_reader_agrees_on_any_bytes(bytes in proptest::collection::vec(0u8..=3, 0..40)) {
            proptest::prop_assert_eq!(TreeNode::read(&bytes).ok(), by_serde(&bytes));
        }
    }

    proptest::proptest! {
        /// The hand-written encoder writes postcard's bytes, and an entry's length
        /// is what postcard counts.
        #[test]
        fn the_writer_is_postcards_encoder(node in any_node()) {
            let mut out = Vec::new();
            match &node {
                TreeNode::Leaf(entries) => {
                    write_leaf(entries, &mut out);
                    for e in entries {
                        proptest::prop_assert_eq!(
                            entry_len(e),
                            postcard::experimental::serialized_size(e).unwrap()
                        );
                    }
                }
                TreeNode::Internal { level, children } => write_internal(*level, children, &mut out),
            }
            proptest::prop_assert_eq!(out, postcard::to_allocvec(&node).unwrap());
        }
    }

    #[test]
    fn overlong_forms_and_counts_over_the_bound_are_refused() {
        let node = inline_leaf("a", b"x");
        let body = postcard::to_allocvec(&node).unwrap();
        assert_eq!(&body[..2], &[0, 1]);
        let mut overlong = vec![0u8, 0x81, 0x00];
        overlong.extend_from_slice(&body[2..]);
        assert!(by_serde(&overlong).is_none());
        assert!(TreeNode::read(&overlong).unwrap_err().contains("overlong"));
        // A count over MAX_NODE_ITEMS with nothing behind it: refused before reading.
        let mut many = vec![0u8];
        many.extend(postcard::to_allocvec(&(MAX_NODE_ITEMS as u64 + 1)).unwrap());
        assert!(TreeNode::read(&many).unwrap_err().contains("at most"));
        assert!(by_serde(&many).is_none());
    }
}
