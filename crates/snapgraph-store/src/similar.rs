//! Delta hints for a commit's new objects: for each, an object the store already holds
//! whose bytes are probably close (FORMAT.md section 12, [`ObjectStore::put_many_with_bases`]).
//!
//! The parent's snapshot and the new one are walked side by side from the root, only
//! into directories whose ids differ (what the commit changed, so the walk costs what
//! changed). Inside a changed directory (or file), only the B-tree nodes the commit
//! wrote are read on the new side, and on the old side only the nodes the new tree
//! does not reuse: an edit in a directory of 5,000 entries reads its root node and a
//! leaf or two on each side, where reading every node cost 1.8 ms of a 10 ms turn.
//! A name in a node the commit wrote, if the old directory held it, was in an old node
//! the new tree no longer names (a name is in one node of a directory), so every pair
//! is still found. A new tree node is paired with the parent's node of the same directory,
//! level and key range; a new chunk or manifest node with the parent's at the same
//! path and byte offset. A single-chunk file with no previous version at its path is
//! paired with the first file of the same name met in the walk (another locale's
//! `django.po`, another package's `__init__.py`); that one may be new in this commit,
//! so [`crate::Repo`] writes such chunks after all others (a base is always durable
//! before its delta). Hints are advice: any read that fails ends the walk with the
//! hints found so far, and a commit never fails for them.
//!
//! [`ObjectStore::put_many_with_bases`]: crate::ObjectStore::put_many_with_bases

use hashbrown::HashMap;
use snapgraph::object::manifest::Manifest;
use snapgraph::object::tree::{Content, EntryNode, TreeNode};
use snapgraph::{ObjectId, ObjectKind, ObjectSet, ObjectSource, SnapshotGraph};

/// Directories visited at most (a guard: the walk follows only changed directories).
const MAX_DIRS: usize = 1 << 20;

/// The hints for `new` (the objects a commit writes, its commit `commit` among them)
/// against the snapshot of the commit's first parent in `store`: new id → base id.
pub(crate) fn bases(
    store: &dyn ObjectSource,
    commit: ObjectId,
    new: &ObjectSet,
) -> HashMap<ObjectId, ObjectId> {
    let mut w = Walk {
        store,
        new,
        out: HashMap::new(),
        by_name: HashMap::new(),
    };
    let _ = w.run(commit);
    w.out
}

struct Walk<'a> {
    store: &'a dyn ObjectSource,
    new: &'a ObjectSet,
    out: HashMap<ObjectId, ObjectId>,
    /// The first single-chunk content seen under each file name.
    by_name: HashMap<String, ObjectId>,
}

/// The children the B-tree nodes a walk read name (read or not).
type Named = hashbrown::HashSet<ObjectId>;

/// A node of a directory's (or a file's) B-tree, with the key of its first item.
struct Node<K, T> {
    id: ObjectId,
    level: u8,
    first: K,
    node: T,
}

impl Walk<'_> {
    fn stored(&self, id: &ObjectId) -> Option<Vec<u8>> {
        if let Some(b) = self.new.get_bytes(id) {
            return Some(b.to_vec());
        }
        self.store.get(id).ok().flatten().map(|b| b.into_owned())
    }

    fn body(&self, id: &ObjectId, kind: ObjectKind) -> Option<Vec<u8>> {
        let stored = self.stored(id)?;
        (stored.len() >= 2 && stored[0] == kind.byte()).then(|| stored[2..].to_vec())
    }

    fn is_new(&self, id: &ObjectId) -> bool {
        self.new.contains_id(id)
    }

    fn hint(&mut self, new: ObjectId, base: ObjectId) {
        if new != base && self.is_new(&new) {
            self.out.entry(new).or_insert(base);
        }
    }

    fn run(&mut self, commit: ObjectId) -> Option<()> {
        let c = SnapshotGraph::commit(commit, &Overlay(self)).ok()?;
        let new_tree = c.tree;
        let old_tree = match c.parents.first() {
            Some(p) => Some(SnapshotGraph::commit(*p, self.store).ok()?.tree),
            None => None,
        };
        let mut stack = vec![(old_tree, new_tree)];
        let mut dirs = 0;
        while let Some((old, new)) = stack.pop() {
            if old == Some(new) || !self.is_new(&new) {
                continue; // unchanged, or reused whole: nothing below is new
            }
            dirs += 1;
            if dirs > MAX_DIRS {
                return None;
            }
            let (new_nodes, reused) = self.tree_nodes(new, &|id| self.is_new(id))?;
            let old_nodes = match old {
                Some(o) => self.tree_nodes(o, &|id| !reused.contains(id))?.0,
                None => Vec::new(),
            };
            for n in &new_nodes {
                if let Some(b) = closest(&old_nodes, n.level, &n.first) {
                    self.hint(n.id, b);
                }
            }
            let old_entries: HashMap<&str, &EntryNode> = leaves(&old_nodes).collect();
            for (name, node) in leaves(&new_nodes) {
                match (old_entries.get(name), node) {
                    (Some(EntryNode::Dir { tree: o, .. }), EntryNode::Dir { tree: n, .. }) => {
                        stack.push((Some(*o), *n));
                    }
                    (_, EntryNode::Dir { tree: n, .. }) => stack.push((None, *n)),
                    (
                        Some(EntryNode::File { content: o, .. }),
                        EntryNode::File { content: n, .. },
                    ) => {
                        if o != n {
                            self.content(Some(o), n)?;
                        }
                        self.remember(name, n);
                    }
                    (_, EntryNode::File { content: n, .. }) => {
                        self.content(None, n)?;
                        if let (Content::Chunk(id), Some(base)) = (n, self.by_name.get(name)) {
                            let base = *base;
                            self.hint(*id, base);
                        }
                        self.remember(name, n);
                    }
                    _ => {}
                }
            }
        }
        Some(())
    }

    fn remember(&mut self, name: &str, content: &Content) {
        if let Content::Chunk(id) = content {
            self.by_name.entry(name.to_string()).or_insert(*id);
        }
    }

    /// The nodes of the directory whose root is `root`, with their first names: the
    /// root and the children `enter` lets the walk into (and theirs), and the ids of
    /// every child the nodes read name.
    fn tree_nodes(
        &self,
        root: ObjectId,
        enter: &dyn Fn(&ObjectId) -> bool,
    ) -> Option<(Vec<Node<String, TreeNode>>, Named)> {
        let mut out = Vec::new();
        let mut named = Named::new();
        let mut todo = vec![(root, String::new())];
        while let Some((id, first)) = todo.pop() {
            let node = TreeNode::decode(&id, &self.body(&id, ObjectKind::Tree)?).ok()?;
            if let TreeNode::Internal { children, .. } = &node {
                named.extend(children.iter().map(|c| c.tree));
                todo.extend(
                    children
                        .iter()
                        .filter(|c| enter(&c.tree))
                        .map(|c| (c.tree, c.first.clone())),
                );
            }
            let first = match &node {
                TreeNode::Leaf(entries) => entries.first().map_or(first, |e| e.name.clone()),
                TreeNode::Internal { .. } => first,
            };
            out.push(Node {
                id,
                level: node.level(),
                first,
                node,
            });
        }
        out.sort_by(|a, b| (a.level, &a.first).cmp(&(b.level, &b.first)));
        Some((out, named))
    }

    /// Pairs the objects of new content `new` with those of `old` (same path).
    fn content(&mut self, old: Option<&Content>, new: &Content) -> Option<()> {
        let new_parts = self.parts(new, &|id| self.is_new(id))?;
        let any_new = new_parts.0.iter().any(|n| self.is_new(&n.id))
            || new_parts.1.iter().any(|(_, id)| self.is_new(id));
        if !any_new {
            return Some(());
        }
        let reused = &new_parts.2;
        let old_parts = match old {
            Some(o) => self.parts(o, &|id| !reused.contains(id))?,
            None => return Some(()),
        };
        for n in &new_parts.0 {
            if let Some(b) = closest(&old_parts.0, n.level, &n.first) {
                self.hint(n.id, b);
            }
        }
        for (offset, id) in &new_parts.1 {
            let base = old_parts
                .1
                .iter()
                .rev()
                .find(|(o, _)| o <= offset)
                .or(old_parts.1.first());
            if let Some((_, b)) = base {
                self.hint(*id, *b);
            }
        }
        Some(())
    }

    /// The manifest nodes (keyed by byte offset) and the chunks (with their offsets)
    /// of some content: of its root and of the children `enter` lets the walk into
    /// (and theirs), with the ids of every child the nodes read name.
    #[allow(clippy::type_complexity)]
    fn parts(
        &self,
        content: &Content,
        enter: &dyn Fn(&ObjectId) -> bool,
    ) -> Option<(Vec<Node<u64, ()>>, Vec<(u64, ObjectId)>, Named)> {
        let mut named = Named::new();
        match content {
            Content::Inline(_) => Some((Vec::new(), Vec::new(), named)),
            Content::Chunk(id) => Some((Vec::new(), vec![(0, *id)], named)),
            Content::Manifest(root) => {
                let mut nodes = Vec::new();
                let mut chunks = Vec::new();
                let mut todo = vec![(*root, 0u64)];
                while let Some((id, start)) = todo.pop() {
                    let m = Manifest::decode(&id, &self.body(&id, ObjectKind::Manifest)?).ok()?;
                    let mut at = start;
                    match &m {
                        Manifest::Leaf(refs) => {
                            for r in refs {
                                chunks.push((at, r.id));
                                at += u64::from(r.len);
                            }
                        }
                        Manifest::Internal { children, .. } => {
                            for c in children {
                                named.insert(c.id);
                                if enter(&c.id) {
                                    todo.push((c.id, at));
                                }
                                at += c.size;
                            }
                        }
                    }
                    nodes.push(Node {
                        id,
                        level: m.level(),
                        first: start,
                        node: (),
                    });
                }
                nodes.sort_by_key(|n| (n.level, n.first));
                chunks.sort_unstable();
                Some((nodes, chunks, named))
            }
        }
    }
}

/// The node of `old` (sorted by level, then key) at `level` whose key is the greatest
/// at or below `first`, else the first at that level.
fn closest<K: Ord, T>(old: &[Node<K, T>], level: u8, first: &K) -> Option<ObjectId> {
    let same: Vec<&Node<K, T>> = old.iter().filter(|n| n.level == level).collect();
    same.iter()
        .rev()
        .find(|n| n.first <= *first)
        .or(same.first())
        .map(|n| n.id)
}

/// The entries of a directory's leaves, by name.
fn leaves<'a>(
    nodes: &'a [Node<String, TreeNode>],
) -> impl Iterator<Item = (&'a str, &'a EntryNode)> + 'a {
    nodes.iter().flat_map(|n| match &n.node {
        TreeNode::Leaf(entries) => entries
            .iter()
            .map(|e| (e.name.as_str(), &e.node))
            .collect::<Vec<_>>(),
        TreeNode::Internal { .. } => Vec::new(),
    })
}

/// The commit's new objects over the store, for reading the new commit object.
struct Overlay<'a, 'b>(&'a Walk<'b>);

impl ObjectSource for Overlay<'_, '_> {
    fn get(
        &self,
        id: &ObjectId,
    ) -> Result<Option<std::borrow::Cow<'_, [u8]>>, snapgraph::BoxError> {
        match self.0.new.get_bytes(id) {
            Some(b) => Ok(Some(std::borrow::Cow::Borrowed(b))),
            None => self.0.store.get(id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counting::CountingStore;
    use crate::memory::MemoryStore;
    use crate::ObjectStore;
    use snapgraph::{CommitOptions, Workspace};

    fn put(store: &impl ObjectStore, set: &ObjectSet) {
        let objects: Vec<(ObjectId, &[u8])> = set.iter().map(|(id, b)| (*id, b)).collect();
        store.put_many(&objects).unwrap();
    }

    fn trees(set: &ObjectSet) -> Vec<ObjectId> {
        set.iter()
            .filter(|(_, b)| b.first() == Some(&ObjectKind::Tree.byte()))
            .map(|(id, _)| *id)
            .collect()
    }

    /// One file edited in a directory of thousands: its new leaf and the nodes above
    /// it are paired with the nodes they replace, the file's chunk with its old one,
    /// and the walk reads a few of the old directory's nodes, not all of them.
    #[test]
    fn an_edit_in_a_wide_directory_reads_only_the_nodes_it_replaces() {
        let store = CountingStore::new(MemoryStore::new());
        let mut ws = Workspace::new();
        for i in 0..3000 {
            let body = format!("file {i}\n").repeat(20);
            ws.write(&format!("/wide/f{i:05}.txt"), body).unwrap();
        }
        let first = ws.commit(CommitOptions::new()).unwrap();
        put(&store, first.objects());
        let old_trees = trees(first.objects());
        assert!(
            old_trees.len() > 8,
            "the directory spans {} nodes",
            old_trees.len()
        );
        let old_chunk = ws.file_content_id("/wide/f01500.txt").unwrap();
        ws.write("/wide/f01500.txt", "file 1500, edited\n".repeat(20))
            .unwrap();
        let second = ws
            .commit(CommitOptions::new().parent(first.id()).have_in(&store))
            .unwrap();
        let new_chunk = ws.file_content_id("/wide/f01500.txt").unwrap();
        store.take();
        let hints = bases(&store, second.id(), second.objects());
        let reads = store.take();
        let new_trees = trees(second.objects());
        assert!(new_trees.len() < 6, "{} new tree nodes", new_trees.len());
        for t in &new_trees {
            let base = hints
                .get(t)
                .unwrap_or_else(|| panic!("no hint for tree node {t}"));
            assert!(old_trees.contains(base), "tree node {t} paired with {base}");
        }
        assert_eq!(hints.get(&new_chunk), Some(&old_chunk));
        // The commit, the root directory's node and the wide directory's root and
        // replaced leaf (and a level between, at most) on the old side.
        assert!(reads.get_ids <= 8, "{} objects read", reads.get_ids);
    }

    /// One edit at the end of a file of a few hundred chunks: its new chunks and
    /// manifest nodes are paired with the ones at the same offsets, and the walk reads
    /// the old manifest's root and the node it replaces, not every node.
    #[test]
    fn an_edit_in_a_large_file_reads_only_the_manifest_nodes_it_replaces() {
        let store = CountingStore::new(MemoryStore::new());
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut big = Vec::with_capacity(6 << 20);
        while big.len() < 6 << 20 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            big.extend_from_slice(format!("{seed:x} ").as_bytes());
        }
        let mut ws = Workspace::new();
        ws.write("/big.txt", &big).unwrap();
        let first = ws.commit(CommitOptions::new()).unwrap();
        put(&store, first.objects());
        let manifests = |set: &ObjectSet| -> Vec<ObjectId> {
            set.iter()
                .filter(|(_, b)| b.first() == Some(&ObjectKind::Manifest.byte()))
                .map(|(id, _)| *id)
                .collect()
        };
        let old_manifests = manifests(first.objects());
        assert!(
            old_manifests.len() > 3,
            "{} manifest nodes",
            old_manifests.len()
        );
        let at = big.len() - 1000;
        big[at..at + 5].copy_from_slice(b"EDIT!");
        ws.write("/big.txt", &big).unwrap();
        let second = ws
            .commit(CommitOptions::new().parent(first.id()).have_in(&store))
            .unwrap();
        store.take();
        let hints = bases(&store, second.id(), second.objects());
        let reads = store.take();
        let new_manifests = manifests(second.objects());
        assert!(!new_manifests.is_empty() && new_manifests.len() < old_manifests.len());
        for m in &new_manifests {
            let base = hints
                .get(m)
                .unwrap_or_else(|| panic!("no hint for manifest node {m}"));
            assert!(
                old_manifests.contains(base),
                "manifest node {m} paired with {base}"
            );
        }
        let chunks: Vec<ObjectId> = second
            .objects()
            .iter()
            .filter(|(_, b)| b.first() == Some(&ObjectKind::Chunk.byte()))
            .map(|(id, _)| *id)
            .collect();
        assert!(!chunks.is_empty());
        for c in &chunks {
            let base = hints
                .get(c)
                .unwrap_or_else(|| panic!("no hint for chunk {c}"));
            assert!(
                first.objects().contains_id(base),
                "chunk {c} paired with {base}"
            );
        }
        assert!(reads.get_ids <= 8, "{} objects read", reads.get_ids);
    }
}
