//! Delta hints for a commit's new objects: for each, an object the store already holds
//! whose bytes are probably close (FORMAT.md section 12, [`ObjectStore::put_many_with_bases`]).
//!
//! The parent's snapshot and the new one are walked side by side from the root, only
//! into directories whose ids differ (what the commit changed, so the walk costs what
//! changed). A new tree node is paired with the parent's node of the same directory,
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
            let new_nodes = self.tree_nodes(new)?;
            let old_nodes = match old {
                Some(o) => self.tree_nodes(o)?,
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

    /// Every node of the directory whose root is `root`, with its first name.
    fn tree_nodes(&self, root: ObjectId) -> Option<Vec<Node<String, TreeNode>>> {
        let mut out = Vec::new();
        let mut todo = vec![(root, String::new())];
        while let Some((id, first)) = todo.pop() {
            let node = TreeNode::decode(&id, &self.body(&id, ObjectKind::Tree)?).ok()?;
            if let TreeNode::Internal { children, .. } = &node {
                todo.extend(children.iter().map(|c| (c.tree, c.first.clone())));
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
        Some(out)
    }

    /// Pairs the objects of new content `new` with those of `old` (same path).
    fn content(&mut self, old: Option<&Content>, new: &Content) -> Option<()> {
        let new_parts = self.parts(new)?;
        let any_new = new_parts.0.iter().any(|n| self.is_new(&n.id))
            || new_parts.1.iter().any(|(_, id)| self.is_new(id));
        if !any_new {
            return Some(());
        }
        let old_parts = match old {
            Some(o) => self.parts(o)?,
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
    /// of some content.
    #[allow(clippy::type_complexity)]
    fn parts(&self, content: &Content) -> Option<(Vec<Node<u64, ()>>, Vec<(u64, ObjectId)>)> {
        match content {
            Content::Inline(_) => Some((Vec::new(), Vec::new())),
            Content::Chunk(id) => Some((Vec::new(), vec![(0, *id)])),
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
                                todo.push((c.id, at));
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
                Some((nodes, chunks))
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
