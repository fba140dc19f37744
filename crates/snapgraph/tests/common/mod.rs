//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};

use snapgraph::object::manifest::Manifest;
use snapgraph::object::tree::{Content, Entry, EntryNode, TreeNode};
use snapgraph::{
    BoxError, Commit, CommitObject, EntryKind, ObjectId, ObjectKind, ObjectSource, SnapshotGraph,
    Workspace,
};

// ----- hand-crafting objects (hostile tests) -----

/// The stored bytes of an object: `kind || version 1 || body`.
pub fn stored(kind: ObjectKind, body: &[u8]) -> Vec<u8> {
    let mut s = vec![kind.byte(), snapgraph::FORMAT_VERSION];
    s.extend_from_slice(body);
    s
}

/// A commit object with no state, capabilities, reads or metadata.
pub fn bare_commit(tree: ObjectId, parents: Vec<ObjectId>, generation: u64) -> CommitObject {
    CommitObject {
        tree,
        parents,
        generation,
        state_size: 0,
        state: Content::Inline(Vec::new()),
        capabilities: None,
        reads: None,
        meta: BTreeMap::new(),
    }
}

/// A file entry with inline content, mode 0644.
pub fn inline_file(name: &str, data: &[u8]) -> Entry {
    Entry {
        name: name.into(),
        mode: 0o644,
        node: EntryNode::File {
            size: data.len() as u64,
            content: Content::Inline(data.to_vec()),
        },
    }
}

/// A directory entry, mode 0755.
pub fn dir_entry(name: &str, tree: ObjectId, files: u64, bytes: u64) -> Entry {
    Entry {
        name: name.into(),
        mode: 0o755,
        node: EntryNode::Dir { tree, files, bytes },
    }
}

/// The store every test persists into.
pub type Store = HashMap<ObjectId, Vec<u8>>;

/// Deterministic pseudo-random bytes (xorshift64).
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        out.extend_from_slice(&s.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// One path of a workspace: kind, mode and bytes (file content, symlink target, or
/// nothing for a directory).
pub type Node = (EntryKind, u32, Vec<u8>);

/// Everything observable about a workspace's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snap {
    pub paths: BTreeMap<String, Node>,
    pub state: Vec<u8>,
}

/// Reads every path of `ws` (through `walk`, `read` and `read_link`) and its state.
pub fn snap(ws: &Workspace) -> Snap {
    let mut paths = BTreeMap::new();
    for (path, meta) in ws.walk() {
        let bytes = match meta.kind {
            EntryKind::File => {
                let data = ws.read(&path).expect("walk lists a readable file").to_vec();
                assert_eq!(data.len() as u64, meta.size, "{path}: size");
                data
            }
            EntryKind::Symlink => {
                let t = ws.read_link(&path).expect("walk lists a readable symlink");
                assert_eq!(t.len() as u64, meta.size, "{path}: size");
                t.as_bytes().to_vec()
            }
            EntryKind::Dir => Vec::new(),
        };
        paths.insert(path, (meta.kind, meta.mode, bytes));
    }
    Snap {
        paths,
        state: ws.state().to_vec(),
    }
}

/// Only files and symlinks: what a [`snapgraph::Diff`] talks about.
pub fn files_of(s: &Snap) -> BTreeMap<String, Node> {
    s.paths
        .iter()
        .filter(|(_, n)| n.0 != EntryKind::Dir)
        .map(|(p, n)| (p.clone(), n.clone()))
        .collect()
}

/// The diff a naive comparison of two snapshots predicts:
/// (added, modified, removed, state_changed).
pub fn oracle_diff(a: &Snap, b: &Snap) -> (Vec<String>, Vec<String>, Vec<String>, bool) {
    let (fa, fb) = (files_of(a), files_of(b));
    let added = fb
        .keys()
        .filter(|p| !fa.contains_key(*p))
        .cloned()
        .collect();
    let removed = fa
        .keys()
        .filter(|p| !fb.contains_key(*p))
        .cloned()
        .collect();
    let modified = fa
        .iter()
        .filter(|(p, n)| fb.get(*p).is_some_and(|m| m != *n))
        .map(|(p, _)| p.clone())
        .collect();
    (added, modified, removed, a.state != b.state)
}

/// Adds a commit's objects to a store and returns its id.
pub fn persist(store: &mut Store, commit: Commit) -> ObjectId {
    let id = commit.id();
    store.extend(commit.into_objects());
    id
}

/// The kind of a stored object, from its header byte.
pub fn kind_of(stored: &[u8]) -> ObjectKind {
    ObjectKind::from_byte(stored[0]).expect("known kind")
}

/// The objects a stored object references (parents of a commit excluded unless
/// `parents`), decoded with the public decoders.
pub fn refs_of(id: &ObjectId, stored: &[u8], parents: bool) -> Vec<(ObjectId, ObjectKind)> {
    let body = &stored[2..];
    match kind_of(stored) {
        ObjectKind::Commit => {
            let c = CommitObject::decode(id, body).expect("commit decodes");
            let mut out = c.snapshot_refs();
            if parents {
                out.extend(c.parents.iter().map(|p| (*p, ObjectKind::Commit)));
            }
            out
        }
        ObjectKind::Tree => match TreeNode::decode(id, body).expect("tree decodes") {
            TreeNode::Leaf(entries) => entries.iter().filter_map(|e| e.refs()).collect(),
            TreeNode::Internal { children, .. } => children
                .iter()
                .map(|c| (c.tree, ObjectKind::Tree))
                .collect(),
        },
        ObjectKind::Manifest => match Manifest::decode(id, body).expect("manifest decodes") {
            Manifest::Leaf(chunks) => chunks.iter().map(|c| (c.id, ObjectKind::Chunk)).collect(),
            Manifest::Internal { children, .. } => children
                .iter()
                .map(|c| (c.id, ObjectKind::Manifest))
                .collect(),
        },
        _ => Vec::new(),
    }
}

/// Every object reachable from `id` in `store` (parents followed when `parents`),
/// computed independently of the engine.
pub fn closure(store: &Store, id: ObjectId, parents: bool) -> HashSet<ObjectId> {
    let mut seen = HashSet::new();
    let mut stack = vec![id];
    while let Some(o) = stack.pop() {
        if !seen.insert(o) {
            continue;
        }
        if let Some(bytes) = store.get(&o) {
            stack.extend(refs_of(&o, bytes, parents).into_iter().map(|(r, _)| r));
        }
    }
    seen
}

/// Asserts that in `order`, every object comes after every object it references
/// (among those listed).
pub fn assert_children_first(order: &[ObjectId], store: &Store, parents: bool) {
    let pos: HashMap<ObjectId, usize> = order.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    assert_eq!(pos.len(), order.len(), "an id is listed twice");
    for (i, id) in order.iter().enumerate() {
        let bytes = store.get(id).expect("listed object is stored");
        for (r, _) in refs_of(id, bytes, parents) {
            if let Some(&j) = pos.get(&r) {
                assert!(j < i, "{r} (at {j}) is referenced by {id} (at {i})");
            }
        }
    }
}

/// Fetches what `plan_checkout` asks for from `full` into an empty local store until
/// it asks for nothing. Returns the local store and the number of fetch rounds.
pub fn fetch_loop(id: ObjectId, full: &impl ObjectSource) -> (Store, usize) {
    let mut local = Store::new();
    let mut rounds = 0;
    loop {
        let missing = SnapshotGraph::plan_checkout(id, &local).expect("plan_checkout");
        if missing.is_empty() {
            break;
        }
        rounds += 1;
        assert!(rounds <= 2000, "plan_checkout does not converge");
        let unique: HashSet<_> = missing.iter().collect();
        assert_eq!(unique.len(), missing.len(), "plan_checkout repeats an id");
        for m in missing {
            assert!(!local.contains_key(&m), "asks for {m}, which is held");
            let bytes = full
                .get(&m)
                .expect("full store answers")
                .expect("full store holds what is planned");
            local.insert(m, bytes.into_owned());
        }
    }
    (local, rounds)
}

/// Builds a workspace holding exactly `s` (creating paths in the given order).
pub fn build_from<'a>(order: impl IntoIterator<Item = &'a String>, s: &Snap) -> Workspace {
    let mut ws = Workspace::new();
    for p in order {
        let (kind, mode, bytes) = &s.paths[p];
        match kind {
            EntryKind::Dir => ws.mkdir(p).unwrap(),
            EntryKind::File => ws.write(p, bytes).unwrap(),
            EntryKind::Symlink => ws.symlink(p, std::str::from_utf8(bytes).unwrap()).unwrap(),
        }
        ws.set_mode(p, *mode).unwrap();
    }
    ws.set_state(s.state.clone());
    ws
}

/// A source that counts what it is asked, the one counting wrapper of the tests:
/// calls of each kind (a batch is one call, what a store with one round trip per
/// call pays) and the objects they name (each id of a batch once). Batched calls
/// are answered in one call; [`Counting::unbatched`] answers them as the trait's
/// defaults do, one `get` or `contains` per id.
pub struct Counting<'a, S: ObjectSource + ?Sized> {
    pub inner: &'a S,
    /// Whether `get_many` and `contains_many` count as one call each.
    pub batched: bool,
    /// `get` calls.
    pub gets: Cell<usize>,
    /// `contains` calls.
    pub contains: Cell<usize>,
    /// `get_many` calls (answered in one call).
    pub get_batches: Cell<usize>,
    /// `contains_many` calls (answered in one call).
    pub contains_batches: Cell<usize>,
    /// Objects named by any call.
    pub objects: Cell<usize>,
}

impl<'a, S: ObjectSource + ?Sized> Counting<'a, S> {
    pub fn new(inner: &'a S) -> Self {
        Self {
            inner,
            batched: true,
            gets: Cell::new(0),
            contains: Cell::new(0),
            get_batches: Cell::new(0),
            contains_batches: Cell::new(0),
            objects: Cell::new(0),
        }
    }

    /// A source whose batched calls are the trait's defaults: one call per id.
    pub fn unbatched(inner: &'a S) -> Self {
        Self {
            batched: false,
            ..Self::new(inner)
        }
    }

    /// Calls of any kind so far.
    pub fn calls(&self) -> usize {
        self.gets.get() + self.contains.get() + self.get_batches.get() + self.contains_batches.get()
    }

    /// Calls of any kind so far, resetting every count.
    pub fn take_calls(&self) -> usize {
        let calls = self.calls();
        self.reset();
        calls
    }

    /// Objects named so far, resetting every count.
    pub fn take(&self) -> usize {
        let objects = self.objects.get();
        self.reset();
        objects
    }

    pub fn reset(&self) {
        for c in [
            &self.gets,
            &self.contains,
            &self.get_batches,
            &self.contains_batches,
            &self.objects,
        ] {
            c.set(0);
        }
    }

    fn count(&self, counter: &Cell<usize>, objects: usize) {
        counter.set(counter.get() + 1);
        self.objects.set(self.objects.get() + objects);
    }
}

impl<S: ObjectSource + ?Sized> ObjectSource for Counting<'_, S> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        self.count(&self.gets, 1);
        self.inner.get(id)
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        self.count(&self.contains, 1);
        self.inner.contains(id)
    }
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Cow<'_, [u8]>>>, BoxError> {
        if !self.batched {
            return ids.iter().map(|id| self.get(id)).collect();
        }
        self.count(&self.get_batches, ids.len());
        ids.iter().map(|id| self.inner.get(id)).collect()
    }
    fn contains_many(&self, ids: &[ObjectId]) -> Result<Vec<bool>, BoxError> {
        if !self.batched {
            return ids.iter().map(|id| self.contains(id)).collect();
        }
        self.count(&self.contains_batches, ids.len());
        ids.iter().map(|id| self.inner.contains(id)).collect()
    }
}
