//! Building a directory's tree nodes, from scratch or incrementally.
//!
//! A [`Layout`] is the encoded node structure of one directory: leaves (level 0) hold
//! entries, each higher level indexes the one below, the top level has one node, the
//! root. [`Layout::update`] re-cuts only around changed names: it re-chunks from the
//! start of the first node holding a change until a new boundary falls on an old one
//! past the change, then reuses old nodes until the next change. Because the boundary
//! rule (`crate::boundary`) depends only on the items since the previous boundary, the
//! result is exactly the layout a from-scratch build would produce, and the cost is
//! O(changes * node size * levels), not O(entries).

use hashbrown::HashMap;
use std::sync::Arc;

use crate::boundary::{name_hash, varint_len, Boundary};
use crate::emit::Emitter;
use crate::id::ObjectId;
use crate::object::tree::{Entry, TreeChild, TreeNode};
use crate::object::{canonical_cut, load_many, ObjectError, ObjectKind, FORMAT_VERSION};
use crate::source::ObjectSource;

/// One encoded tree node, with what its parent and the incremental cutter need.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    /// Key of its first item (an entry name, or a child's first key).
    pub first: String,
    /// Key of its last item.
    pub last: String,
    pub id: ObjectId,
    pub stored: Arc<[u8]>,
    /// How many items it holds.
    pub items: u32,
    pub files: u64,
    pub bytes: u64,
    /// The commit epoch that created it (0 for checkouts and from-scratch builds):
    /// a slot from an earlier epoch is part of the layout as it was before.
    pub epoch: u64,
}

impl Slot {
    fn child(&self) -> TreeChild {
        TreeChild {
            first: self.first.clone(),
            tree: self.id,
            files: self.files,
            bytes: self.bytes,
        }
    }
}

/// The node structure of one directory. `levels[0]` are the leaves; the last level
/// holds exactly one node, the root. Every node is of one format `version`.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub levels: Vec<Vec<Slot>>,
    pub version: u8,
}

/// An item the boundary rule groups into nodes.
trait Item {
    fn key(&self) -> &str;
    fn hash(&self) -> u32;
    fn size(&self) -> usize;
    fn totals(&self) -> (u64, u64);
    /// Appends the body of a node of `level` over `items`.
    fn write_node(level: u8, items: &[Self], out: &mut Vec<u8>)
    where
        Self: Sized;
}

impl Item for Entry {
    fn key(&self) -> &str {
        &self.name
    }
    fn hash(&self) -> u32 {
        name_hash(&self.name)
    }
    fn size(&self) -> usize {
        crate::object::tree::entry_len(self)
    }
    fn totals(&self) -> (u64, u64) {
        (self.files(), self.bytes())
    }
    fn write_node(_level: u8, items: &[Self], out: &mut Vec<u8>) {
        crate::object::tree::write_leaf(items, out);
    }
}

impl Item for TreeChild {
    fn key(&self) -> &str {
        &self.first
    }
    fn hash(&self) -> u32 {
        self.tree.low_u32()
    }
    fn size(&self) -> usize {
        varint_len(self.first.len() as u64)
            + self.first.len()
            + ObjectId::LEN
            + varint_len(self.files)
            + varint_len(self.bytes)
    }
    fn totals(&self) -> (u64, u64) {
        (self.files, self.bytes)
    }
    fn write_node(level: u8, items: &[Self], out: &mut Vec<u8>) {
        crate::object::tree::write_internal(level, items, out);
    }
}

struct NodeBuilder<T> {
    level: u8,
    version: u8,
    epoch: u64,
    items: Vec<T>,
    boundary: Boundary,
}

impl<T: Item> NodeBuilder<T> {
    fn new(level: u8, version: u8, epoch: u64) -> Self {
        Self {
            level,
            version,
            epoch,
            items: Vec::new(),
            boundary: Boundary::default(),
        }
    }

    /// Adds an item; true when the node must end after it.
    fn push(&mut self, item: T) -> bool {
        let cut = self.boundary.push(item.hash(), item.size());
        self.items.push(item);
        cut
    }

    fn finish(&mut self) -> Slot {
        let items = std::mem::take(&mut self.items);
        self.boundary = Boundary::default();
        let first = items
            .first()
            .map(|i| i.key().to_owned())
            .unwrap_or_default();
        let last = items.last().map(|i| i.key().to_owned()).unwrap_or_default();
        let (mut files, mut bytes) = (0u64, 0u64);
        for i in &items {
            let (f, b) = i.totals();
            files = files.saturating_add(f);
            bytes = bytes.saturating_add(b);
        }
        let count = items.len() as u32;
        let size: usize = items.iter().map(|i| i.size()).sum();
        let mut stored = Vec::with_capacity(size + 16);
        stored.extend_from_slice(&[ObjectKind::Tree.byte(), self.version]);
        T::write_node(self.level, &items, &mut stored);
        Slot {
            first,
            last,
            id: ObjectId::hash_stored(&stored),
            stored: stored.into(),
            items: count,
            files,
            bytes,
            epoch: self.epoch,
        }
    }
}

/// Index of the slot whose range a key falls in: the last slot whose first key is at
/// most `key`, or 0.
fn slot_for(slots: &[Slot], key: &str) -> usize {
    slots
        .partition_point(|s| s.first.as_str() <= key)
        .saturating_sub(1)
}

/// Re-cuts one level in place. `slots` holds the level's previous slots and receives
/// the new ones, `dirty` the sorted keys whose items may have changed (added, removed
/// or modified), and `items_from(k)` yields the level's current items in key order
/// starting at key `k` (inclusive), or at the beginning for `None`. Unchanged slots
/// stay where they are (replaced runs are spliced in), so the cost follows the
/// change. Returns the keys that changed at the level above: the first keys of every
/// removed and every created slot.
fn update_level<T: Item, I: Iterator<Item = T>>(
    slots: &mut Vec<Slot>,
    dirty: &[String],
    level: u8,
    version: u8,
    epoch: u64,
    mut items_from: impl FnMut(Option<&str>) -> I,
) -> Vec<String> {
    let mut changed: Vec<String> = Vec::new();
    let mut builder = NodeBuilder::<T>::new(level, version, epoch);
    if slots.is_empty() {
        for item in items_from(None) {
            if builder.push(item) {
                slots.push(builder.finish());
            }
        }
        if !builder.items.is_empty() {
            slots.push(builder.finish());
        }
        changed.extend(slots.iter().map(|s| s.first.clone()));
        return changed;
    }
    let old: &[Slot] = slots;
    // Runs of old slots to replace, in order: (start, end, new slots).
    let mut edits: Vec<(usize, usize, Vec<Slot>)> = Vec::new();
    let mut old_pos = 0usize;
    let mut di = 0usize;
    'pass: while di < dirty.len() {
        let j = slot_for(old, &dirty[di]).max(old_pos);
        let from = if j == 0 {
            None
        } else {
            Some(old[j].first.as_str())
        };
        let mut created = Vec::new();
        builder = NodeBuilder::new(level, version, epoch);
        for item in items_from(from) {
            while di < dirty.len() && dirty[di].as_str() <= item.key() {
                di += 1;
            }
            if !builder.push(item) {
                continue;
            }
            let slot = builder.finish();
            let synced = old[j..]
                .binary_search_by(|s| s.last.as_str().cmp(&slot.last))
                .ok()
                .map(|rel| j + rel);
            changed.push(slot.first.clone());
            created.push(slot);
            if let Some(m) = synced {
                let next = if di == dirty.len() {
                    old.len()
                } else {
                    slot_for(old, &dirty[di])
                };
                if next > m {
                    changed.extend(old[j..=m].iter().map(|s| s.first.clone()));
                    edits.push((j, m + 1, created));
                    old_pos = m + 1;
                    continue 'pass;
                }
            }
        }
        // The items ran out: every old slot from j on is superseded.
        if !builder.items.is_empty() {
            let slot = builder.finish();
            changed.push(slot.first.clone());
            created.push(slot);
        }
        changed.extend(old[j..].iter().map(|s| s.first.clone()));
        edits.push((j, old.len(), created));
        break;
    }
    for (start, end, created) in edits.into_iter().rev() {
        slots.splice(start..end, created);
    }
    changed.sort_unstable();
    changed.dedup();
    changed
}

impl Layout {
    /// The layout of a directory with the given entries (sorted by name, unique).
    pub fn build(entries: &[Entry]) -> Self {
        Self::build_in(entries, FORMAT_VERSION)
    }

    /// [`build`](Self::build) with nodes of format `version`: what checkout compares
    /// a stored directory with, in the version of its root node.
    pub fn build_in(entries: &[Entry], version: u8) -> Self {
        Self::update_in(None, &[], version, 0, |from| {
            let start = from.map_or(0, |k| entries.partition_point(|e| e.name.as_str() < k));
            entries[start..].iter().cloned()
        })
    }

    /// The layout after the entries named in `dirty` (sorted, unique) changed,
    /// reusing `old`'s storage. `entries_from(k)` yields the directory's current
    /// entries from name `k` on. With `old` = `None` the layout is built from scratch;
    /// so it is when `old` is of an older format version (a directory's nodes are all
    /// of one version, the current one once it changes).
    pub fn update<I: Iterator<Item = Entry>>(
        old: Option<Layout>,
        dirty: &[String],
        epoch: u64,
        entries_from: impl FnMut(Option<&str>) -> I,
    ) -> Self {
        let old = old.filter(|l| l.version == FORMAT_VERSION);
        Self::update_in(old, dirty, FORMAT_VERSION, epoch, entries_from)
    }

    fn update_in<I: Iterator<Item = Entry>>(
        old: Option<Layout>,
        dirty: &[String],
        version: u8,
        epoch: u64,
        entries_from: impl FnMut(Option<&str>) -> I,
    ) -> Self {
        let mut old_levels = old.map(|l| l.levels).unwrap_or_default().into_iter();
        let mut slots = old_levels.next().unwrap_or_default();
        let mut changed = update_level(&mut slots, dirty, 0, version, epoch, entries_from);
        if slots.is_empty() {
            let mut b = NodeBuilder::<Entry>::new(0, version, epoch);
            slots.push(b.finish());
        }
        let mut levels = vec![slots];
        while levels.last().map_or(0, Vec::len) > 1 {
            let i = levels.len();
            let below = &levels[i - 1];
            let mut slots = old_levels.next().unwrap_or_default();
            // An unchanged level below leaves this level as it was.
            if !changed.is_empty() || slots.is_empty() {
                changed = update_level(&mut slots, &changed, i as u8, version, epoch, |from| {
                    let start = from.map_or(0, |k| below.partition_point(|s| s.first.as_str() < k));
                    below[start..].iter().map(Slot::child)
                });
            }
            levels.push(slots);
        }
        Layout { levels, version }
    }

    /// The layout of the directory whose root node is `id` and whose entries (read
    /// from it, sorted and unique) are `entries`, proven cut canonically: the
    /// rebuild in the root's version ([`crate::object::canonical_cut`]), or
    /// [`ObjectError::Malformed`] naming `id`. Checkout keeps what it returns; the
    /// reachability walks only check.
    pub fn canonical(id: ObjectId, entries: &[Entry]) -> Result<Self, ObjectError> {
        canonical_cut(id, ObjectKind::Tree, |version| {
            let layout = Self::build_in(entries, version);
            (layout.root().id, layout)
        })
    }

    pub fn root(&self) -> &Slot {
        // Every constructor leaves one slot on the top level.
        &self.levels[self.levels.len() - 1][0]
    }

    /// Emits the nodes not held, top-down with pruning, children first. `leaf_entries`
    /// is called for each emitted leaf slot to emit what its entries reference. With
    /// `skip_before` = `Some(epoch)` the destination is known to hold the layout as it
    /// was before that commit epoch, so slots from earlier epochs are skipped without
    /// asking.
    pub fn emit(
        &self,
        out: &mut Emitter<'_>,
        skip_before: Option<u64>,
        leaf_entries: &mut dyn FnMut(&Slot, &mut Emitter<'_>),
    ) {
        let top = self.levels.len() - 1;
        self.emit_slot(top, 0, out, skip_before, leaf_entries);
    }

    fn emit_slot(
        &self,
        level: usize,
        index: usize,
        out: &mut Emitter<'_>,
        skip_before: Option<u64>,
        leaf_entries: &mut dyn FnMut(&Slot, &mut Emitter<'_>),
    ) {
        let slot = &self.levels[level][index];
        if skip_before.is_some_and(|epoch| slot.epoch != epoch) {
            out.pruned = true;
            return;
        }
        if !out.wants(&slot.id) {
            return;
        }
        if level == 0 {
            leaf_entries(slot, out);
        } else {
            let first: usize = self.levels[level][..index]
                .iter()
                .map(|s| s.items as usize)
                .sum();
            for child in first..first + slot.items as usize {
                self.emit_slot(level - 1, child, out, skip_before, leaf_entries);
            }
        }
        out.push_shared(slot.id, slot.stored.clone());
    }
}

/// Tree nodes read ahead of a walk (checkout reads a whole level of a commit in one
/// batched read), each kept until its last expected use: a node referenced from `n`
/// places is handed out `n` times (cloned until the last), then read again from the
/// source if a walk asks once more.
#[derive(Debug, Default)]
pub(crate) struct Ahead {
    nodes: HashMap<ObjectId, TreeNode>,
    uses: HashMap<ObjectId, u32>,
}

impl Ahead {
    /// Counts one more expected use of `id`; true on the first.
    pub fn refer(&mut self, id: ObjectId) -> bool {
        let n = self.uses.entry(id).or_default();
        *n = n.saturating_add(1);
        *n == 1
    }

    /// Keeps a verified node for its expected uses (at least one).
    pub fn insert(&mut self, id: ObjectId, node: TreeNode) {
        self.uses.entry(id).or_insert(1);
        self.nodes.insert(id, node);
    }

    /// A kept node, by reference.
    pub fn get(&self, id: &ObjectId) -> Option<&TreeNode> {
        self.nodes.get(id)
    }

    /// Hands out a kept node for one use.
    pub fn take(&mut self, id: &ObjectId) -> Option<TreeNode> {
        let uses = self.uses.get_mut(id)?;
        if *uses > 1 {
            *uses -= 1;
            return self.nodes.get(id).cloned();
        }
        self.uses.remove(id);
        self.nodes.remove(id)
    }
}

/// Reads the entries of the directory whose root node is `id`, in order: a
/// [`TreeWalk`] driven to its end. Nodes are taken from `ahead` where it holds them;
/// the rest of each level is read in one batched read ([`ObjectSource::get_many`]).
/// `on_leaf(entries)` is shown each leaf's entries before they are kept, so a caller
/// can stop a directory that is too large.
pub(crate) fn read_entries<S, E>(
    source: &S,
    id: ObjectId,
    ahead: &mut Ahead,
    hash: bool,
    on_leaf: &mut dyn FnMut(&[Entry]) -> Result<(), E>,
) -> Result<Vec<Entry>, E>
where
    S: ObjectSource + ?Sized,
    E: From<ObjectError>,
{
    let mut walk = TreeWalk::new(id);
    loop {
        let nodes = level_nodes(source, walk.wanted(), ahead, hash)?;
        if let Some(entries) = walk.feed(nodes, on_leaf)? {
            return Ok(entries);
        }
    }
}

/// The nodes of `ids`, in order: those `ahead` holds, the others in one batched
/// read, verified and decoded.
pub(crate) fn level_nodes<S: ObjectSource + ?Sized>(
    source: &S,
    ids: &[ObjectId],
    ahead: &mut Ahead,
    hash: bool,
) -> Result<Vec<TreeNode>, ObjectError> {
    let mut out: Vec<Option<TreeNode>> = ids.iter().map(|i| ahead.take(i)).collect();
    let absent = crate::object::absent(ids, &out);
    let mut read = load_many(source, &absent, ObjectKind::Tree, hash)?
        .into_iter()
        .zip(&absent);
    for slot in out.iter_mut().filter(|n| n.is_none()) {
        if let Some((loaded, nid)) = read.next() {
            *slot = Some(TreeNode::decode(nid, loaded.body())?);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// The one walk of a directory's tree nodes, as a resumable step (the caller reads):
/// [`wanted`](Self::wanted) names the nodes of the next level (the root first);
/// [`feed`](Self::feed) takes them decoded, in that order, and answers the
/// directory's entries once the leaves are in. Several walks can be stepped side by
/// side, so a caller walking many directories (diff) reads one level of all of them
/// per batched read.
///
/// Checks structure: levels descend by one, first keys and totals match the index
/// entries, names are strictly sorted across nodes, and no leaf below an index is
/// empty. Whether the nodes are cut canonically is `Layout::canonical`'s check.
#[derive(Debug, Clone)]
pub(crate) struct TreeWalk {
    root: ObjectId,
    /// The ids asked for by [`wanted`](Self::wanted).
    ids: Vec<ObjectId>,
    /// What each asked-for node's parent's index says of it (none for the root).
    claims: Vec<TreeChild>,
    /// The level of the nodes asked for (unknown for the root).
    level: Option<u8>,
    entries: Vec<Entry>,
}

impl TreeWalk {
    /// A walk of the directory whose root node is `root`.
    pub fn new(root: ObjectId) -> Self {
        Self {
            root,
            ids: vec![root],
            claims: Vec::new(),
            level: None,
            entries: Vec::new(),
        }
    }

    /// The nodes to read next, in order: never empty before the walk ends.
    pub fn wanted(&self) -> &[ObjectId] {
        &self.ids
    }

    /// The directory's root node.
    pub fn root(&self) -> ObjectId {
        self.root
    }

    /// Takes the nodes [`wanted`](Self::wanted) named, decoded, in order, showing
    /// each leaf's entries to `on_leaf` before they are kept. Answers the entries
    /// when the walk is done, `None` when it wants another level.
    pub fn feed<E: From<ObjectError>>(
        &mut self,
        nodes: Vec<TreeNode>,
        on_leaf: &mut dyn FnMut(&[Entry]) -> Result<(), E>,
    ) -> Result<Option<Vec<Entry>>, E> {
        if nodes.len() != self.ids.len() {
            return Err(ObjectError::NotFound {
                id: self.ids.get(nodes.len()).copied().unwrap_or(self.root),
            }
            .into());
        }
        // Each frontier element: a node with what its parent's index claims about it.
        let mut frontier: Vec<(ObjectId, TreeNode, Option<TreeChild>)> =
            Vec::with_capacity(nodes.len());
        match self.level {
            None => frontier.extend(nodes.into_iter().map(|n| (self.root, n, None))),
            Some(level) => {
                for (c, child) in std::mem::take(&mut self.claims).into_iter().zip(nodes) {
                    if child.level() + 1 != level {
                        return Err(ObjectError::malformed(
                            c.tree,
                            ObjectKind::Tree,
                            format!("level {} below level {level}", child.level()),
                        )
                        .into());
                    }
                    frontier.push((c.tree, child, Some(c)));
                }
            }
        }
        let level = frontier[0].1.level();
        let mut claims: Vec<TreeChild> = Vec::new();
        for (nid, node_value, claim) in frontier {
            let bad = |reason: &str| ObjectError::malformed(nid, ObjectKind::Tree, reason);
            if let Some(c) = &claim {
                let first = match &node_value {
                    TreeNode::Leaf(e) => e.first().map(|e| e.name.as_str()),
                    TreeNode::Internal { children, .. } => {
                        children.first().map(|c| c.first.as_str())
                    }
                };
                if first != Some(c.first.as_str()) || node_value.totals() != (c.files, c.bytes) {
                    return Err(bad("node does not match its index entry").into());
                }
            }
            if node_value.level() != level {
                return Err(bad("sibling nodes at different levels").into());
            }
            match node_value {
                TreeNode::Leaf(mut e) => {
                    if e.is_empty() && claim.is_some() {
                        return Err(bad("empty leaf below an index").into());
                    }
                    on_leaf(&e)?;
                    self.entries.append(&mut e);
                }
                TreeNode::Internal { children, .. } => {
                    for c in children {
                        // First keys rise across the whole level, so no node is listed
                        // twice: shared children would multiply the work per level.
                        if claims.last().is_some_and(|p| p.first >= c.first) {
                            return Err(bad("index entries out of order across nodes").into());
                        }
                        claims.push(c);
                    }
                }
            }
        }
        if level > 0 {
            self.ids = claims.iter().map(|c| c.tree).collect();
            self.claims = claims;
            self.level = Some(level);
            return Ok(None);
        }
        self.ids.clear();
        let entries = std::mem::take(&mut self.entries);
        for w in entries.windows(2) {
            if w[0].name >= w[1].name {
                return Err(ObjectError::malformed(
                    self.root,
                    ObjectKind::Tree,
                    format!("entry {:?} out of order or repeated", w[1].name),
                )
                .into());
            }
        }
        Ok(Some(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::tree::{Content, EntryNode};
    use std::collections::BTreeMap;

    fn entry(name: &str, v: u8) -> Entry {
        Entry {
            name: name.to_owned(),
            mode: 0o644,
            node: EntryNode::File {
                size: 1,
                content: Content::Inline(vec![v]),
            },
        }
    }

    fn incremental(old: &Layout, map: &BTreeMap<String, Entry>, dirty: &[String]) -> Layout {
        Layout::update(Some(old.clone()), dirty, 1, |from| {
            let range: Box<dyn Iterator<Item = (&String, &Entry)>> = match from {
                None => Box::new(map.iter()),
                Some(k) => Box::new(
                    map.range::<str, _>((std::ops::Bound::Included(k), std::ops::Bound::Unbounded)),
                ),
            };
            range.map(|(_, e)| e.clone())
        })
    }

    fn ids(l: &Layout) -> Vec<Vec<ObjectId>> {
        l.levels
            .iter()
            .map(|lv| lv.iter().map(|s| s.id).collect())
            .collect()
    }

    #[test]
    fn incremental_equals_scratch_for_many_edits() {
        let mut map: BTreeMap<String, Entry> = (0..5000)
            .map(|i| {
                let n = format!("f{i:05}");
                (n.clone(), entry(&n, 0))
            })
            .collect();
        let all: Vec<Entry> = map.values().cloned().collect();
        let mut layout = Layout::build(&all);
        assert!(layout.levels.len() >= 2);
        let mut seed = 99u64;
        for round in 0..200 {
            let mut dirty = Vec::new();
            for _ in 0..(1 + round % 5) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let k = format!("f{:05}", (seed >> 33) % 6000);
                match (seed >> 20) % 3 {
                    0 => {
                        map.remove(&k);
                    }
                    1 => {
                        map.insert(k.clone(), entry(&k, round as u8));
                    }
                    _ => {
                        map.insert(k.clone(), entry(&k, 7));
                    }
                }
                dirty.push(k);
            }
            dirty.sort();
            dirty.dedup();
            layout = incremental(&layout, &map, &dirty);
            let scratch = Layout::build(&map.values().cloned().collect::<Vec<_>>());
            assert_eq!(ids(&layout), ids(&scratch), "round {round}");
        }
    }

    #[test]
    fn shrink_to_empty_and_grow_back() {
        let mut map: BTreeMap<String, Entry> = (0..300)
            .map(|i| {
                let n = format!("n{i}");
                (n.clone(), entry(&n, 1))
            })
            .collect();
        let mut layout = Layout::build(&map.values().cloned().collect::<Vec<_>>());
        let dirty: Vec<String> = map.keys().cloned().collect();
        map.clear();
        layout = incremental(&layout, &map, &dirty);
        assert_eq!(layout.root().id, Layout::build(&[]).root().id);
        map.insert("a".into(), entry("a", 1));
        layout = incremental(&layout, &map, &["a".to_string()]);
        assert_eq!(layout.root().id, Layout::build(&[entry("a", 1)]).root().id);
    }
}
