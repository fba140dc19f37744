//! `SnapshotGraph::diff`: what changed between two commits, as values.
//!
//! [`SnapshotGraph::diff_with`] hands each file change to a [`Visit`] delegate as it
//! is found (the walk stops when the delegate says so); [`Recorder`] is the stock
//! delegate that keeps them; [`SnapshotGraph::diff`] records everything and sorts it
//! into a [`Diff`], whose `files_added/modified/removed` are a view of its changes.

use std::collections::HashMap;
use std::ops::ControlFlow;

use super::{load_commit, read_list, GraphError, SnapshotGraph};
use crate::id::ObjectId;
use crate::limits::{Budget, Limits};
use crate::object::reads::ExternalRead;
use crate::object::tree::{count_kinds, Entry, EntryKind, EntryNode, TreeNode};
use crate::object::{load_many, ObjectError, ObjectKind};
use crate::source::ObjectSource;
use crate::tree::TreeWalk;

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ChangeKind {
    /// Present only in the second commit.
    Added,
    /// Present only in the first commit.
    Removed,
    /// Same kind on both sides, different content (the mode may differ too).
    Modified,
    /// A file on one side, a symlink on the other.
    TypeChanged,
    /// Same kind and content, different mode.
    ModeChanged,
}

/// One side of a change: what the entry was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChangeEntry {
    /// File or symlink.
    pub kind: EntryKind,
    /// Its permission bits.
    pub mode: u32,
    /// Its length in bytes (a symlink's: its target's).
    pub size: u64,
    /// Its content object (chunk or manifest root); `None` for content stored inline
    /// in the tree entry and for symlinks.
    pub id: Option<ObjectId>,
}

impl ChangeEntry {
    fn of(e: &Entry) -> Self {
        let (kind, size, id) = match &e.node {
            EntryNode::File { size, content } => {
                (EntryKind::File, *size, content.object().map(|(id, _)| id))
            }
            EntryNode::Symlink { target } => (EntryKind::Symlink, target.len() as u64, None),
            EntryNode::Dir { bytes, tree, .. } => (EntryKind::Dir, *bytes, Some(*tree)),
        };
        Self {
            kind,
            mode: e.mode,
            size,
            id,
        }
    }
}

/// A changed file or symlink (directories appear through the files they hold), or,
/// handed to [`Visit::visit_dir`], a changed directory.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Change {
    /// Absolute path.
    pub path: String,
    /// What happened.
    pub kind: ChangeKind,
    /// The entry in the first commit (`None` when added).
    pub old: Option<ChangeEntry>,
    /// The entry in the second commit (`None` when removed).
    pub new: Option<ChangeEntry>,
}

/// Receives the changes of a [`SnapshotGraph::diff_with`]; [`ControlFlow::Break`]
/// stops the walk. The order is breadth first: the changes of the directories of one
/// depth (the root's, then its subdirectories', ...) once that depth is read, those
/// directories in path order and each one's changes by name.
pub trait Visit {
    /// One change of a file or symlink.
    fn visit(&mut self, change: Change) -> ControlFlow<()>;

    /// One change of a directory, in the same order as [`visit`](Self::visit)'s
    /// (a directory before anything below it): [`ChangeKind::Added`] or
    /// [`ChangeKind::Removed`] (a directory replaced by a file or symlink, or the
    /// reverse, is removed or added here and the other entry handed to `visit`),
    /// [`ChangeKind::Modified`] when it holds something else (its mode may differ
    /// too; what changed below it is handed over on its own), and
    /// [`ChangeKind::ModeChanged`] when only its mode differs. Both sides'
    /// [`ChangeEntry`] say [`EntryKind::Dir`], with the directory's file bytes as
    /// its size and its tree as its id. A directory the two commits hold alike is
    /// not handed over, nor the root. By default, ignored: a diff of files.
    fn visit_dir(&mut self, change: Change) -> ControlFlow<()> {
        let _ = change;
        ControlFlow::Continue(())
    }
}

/// The stock [`Visit`] delegate: keeps every change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorder {
    /// The changes, in the order they were found.
    pub changes: Vec<Change>,
}

impl Visit for Recorder {
    fn visit(&mut self, change: Change) -> ControlFlow<()> {
        self.changes.push(change);
        ControlFlow::Continue(())
    }
}

impl<F: FnMut(Change) -> ControlFlow<()>> Visit for F {
    fn visit(&mut self, change: Change) -> ControlFlow<()> {
        self(change)
    }
}

/// The difference between two commits. Paths are absolute and sorted; "files" are
/// regular files and symlinks (directories appear through the files they hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Diff {
    /// Every changed file or symlink, sorted by path.
    pub changes: Vec<Change>,
    /// Files present only in the second commit (a view of [`changes`](Self::changes):
    /// [`ChangeKind::Added`]).
    pub files_added: Vec<String>,
    /// Files present in both whose content, mode or kind (file or symlink) differs
    /// ([`ChangeKind::Modified`], [`ChangeKind::TypeChanged`],
    /// [`ChangeKind::ModeChanged`]).
    pub files_modified: Vec<String>,
    /// Files present only in the first commit ([`ChangeKind::Removed`]).
    pub files_removed: Vec<String>,
    /// Whether the opaque state bytes differ.
    pub state_changed: bool,
    /// External read sources recorded only by the second commit.
    pub reads_added: Vec<String>,
    /// External read sources recorded by both with a different record.
    pub reads_changed: Vec<String>,
    /// External read sources recorded only by the first commit.
    pub reads_removed: Vec<String>,
}

impl Diff {
    /// Whether nothing differs.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
            && self.files_added.is_empty()
            && self.files_modified.is_empty()
            && self.files_removed.is_empty()
            && !self.state_changed
            && self.reads_added.is_empty()
            && self.reads_changed.is_empty()
            && self.reads_removed.is_empty()
    }
}

impl SnapshotGraph {
    /// What changed from commit `a` to commit `b`.
    ///
    /// Identical subtrees (same id) are skipped without being read, and inside a large
    /// directory only the tree nodes that differ are read, so the cost follows the
    /// number of changes, not the size of the snapshots. A removed or added directory
    /// is read whole, since each of its files is a change. Every changed directory of
    /// a depth is read together, one [`ObjectSource::get_many`] per tree level, so the
    /// calls follow the depth of the change (directory depth plus index levels), not
    /// the number of directories.
    ///
    /// Paths are checked like a checkout's (at most `MAX_DEPTH` components and
    /// `MAX_PATH_LEN` bytes), and the entries read are counted like a checkout's: at
    /// most the default [`Limits::max_files`] files and as many directories per side
    /// (see [`diff_with_limits`](Self::diff_with_limits)), so a tree that repeats
    /// subtrees cannot make a diff run away.
    pub fn diff<S: ObjectSource + ?Sized>(
        a: ObjectId,
        b: ObjectId,
        source: &S,
    ) -> Result<Diff, GraphError> {
        Self::diff_with_limits(a, b, source, &Limits::default())
    }

    /// [`diff`](Self::diff), reading at most `limits.max_files` file and as many
    /// directory entries of each side before failing with
    /// [`GraphError::Limit`].
    pub fn diff_with_limits<S: ObjectSource + ?Sized>(
        a: ObjectId,
        b: ObjectId,
        source: &S,
        limits: &Limits,
    ) -> Result<Diff, GraphError> {
        let ca = load_commit(source, &a)?;
        let cb = load_commit(source, &b)?;
        let mut d = Diff {
            state_changed: (ca.state_size, &ca.state) != (cb.state_size, &cb.state),
            ..Diff::default()
        };
        if ca.reads != cb.reads {
            diff_reads(
                &read_list(ca.reads, source)?,
                &read_list(cb.reads, source)?,
                &mut d,
            );
        }
        let mut recorder = Recorder::default();
        diff_trees(source, [a, b], [ca.tree, cb.tree], limits, &mut recorder)?;
        let mut changes = recorder.changes;
        changes.sort_by(|x, y| x.path.cmp(&y.path));
        for c in &changes {
            let view = match c.kind {
                ChangeKind::Added => &mut d.files_added,
                ChangeKind::Removed => &mut d.files_removed,
                _ => &mut d.files_modified,
            };
            view.push(c.path.clone());
        }
        d.changes = changes;
        Ok(d)
    }

    /// The file changes from commit `a` to commit `b`, handed to `visit` as they are
    /// found (in [`Visit`]'s order, nothing kept): the delegate form of
    /// [`diff_with_limits`](Self::diff_with_limits), with its checks and limits.
    /// Returns `Ok(())` also when the delegate stopped the walk.
    ///
    /// ```
    /// # use std::ops::ControlFlow;
    /// # use snapgraph::{graph::diff::{Change, ChangeKind}, CommitOptions, Limits, SnapshotGraph, Workspace};
    /// # let mut ws = Workspace::new();
    /// # ws.write("/a", b"1")?;
    /// # let c1 = ws.commit(CommitOptions::new())?;
    /// # let (a, mut store): (_, std::collections::HashMap<_, _>) = (c1.id(), c1.into_objects().into_iter().collect());
    /// # ws.write("/a", b"2")?;
    /// # let c2 = ws.commit(CommitOptions::new().parent(a))?;
    /// # let b = c2.id();
    /// # store.extend(c2.into_objects());
    /// let mut first = None;
    /// SnapshotGraph::diff_with(a, b, &store, &Limits::default(), &mut |c: Change| {
    ///     first = Some(c);
    ///     ControlFlow::Break(()) // one is enough
    /// })?;
    /// assert_eq!(first.map(|c| (c.path, c.kind)), Some(("/a".to_string(), ChangeKind::Modified)));
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    pub fn diff_with<S: ObjectSource + ?Sized, V: Visit + ?Sized>(
        a: ObjectId,
        b: ObjectId,
        source: &S,
        limits: &Limits,
        visit: &mut V,
    ) -> Result<(), GraphError> {
        let ca = load_commit(source, &a)?;
        let cb = load_commit(source, &b)?;
        diff_trees(source, [a, b], [ca.tree, cb.tree], limits, visit)
    }
}

/// What a change between two file entries (neither a directory) is, if any.
fn classify(a: &Entry, b: &Entry) -> Option<ChangeKind> {
    let kind = |e: &Entry| matches!(e.node, EntryNode::Symlink { .. });
    if a == b {
        None
    } else if kind(a) != kind(b) {
        Some(ChangeKind::TypeChanged)
    } else if a.node != b.node {
        Some(ChangeKind::Modified)
    } else {
        Some(ChangeKind::ModeChanged)
    }
}

fn diff_trees<S: ObjectSource + ?Sized, V: Visit + ?Sized>(
    source: &S,
    commits: [ObjectId; 2],
    roots: [ObjectId; 2],
    limits: &Limits,
    visit: &mut V,
) -> Result<(), GraphError> {
    // Each side is charged as a checkout of it would be (a tree that repeats subtrees
    // can describe far more paths than it has objects, and a diff reads each
    // occurrence). Index entries of internal nodes are charged too: a diff skips
    // leaves equal on both sides, so it may decode index nodes whose leaves it never
    // charges. Bytes are not charged: a diff holds no file content.
    let mut budget = [
        Budget::new(commits[0], *limits),
        Budget::new(commits[1], *limits),
    ];
    // Directories one depth at a time: (directory path, its number of components,
    // tree on each side). At each depth, the root nodes of every changed directory on
    // both sides are read in one batched read, then every further level of all of
    // them in one batched read per level, so a source with per-call latency costs
    // round trips proportional to the depth of the change (directory depth plus
    // index levels), not the number of changed directories. The changes are handed
    // to `visit` once the depth is read, directory by directory in frontier order,
    // each directory's by name.
    let mut frontier: Vec<(String, usize, Option<ObjectId>, Option<ObjectId>)> =
        vec![(String::new(), 0, Some(roots[0]), Some(roots[1]))];
    while !frontier.is_empty() {
        frontier.retain(|(_, _, ta, tb)| ta != tb);
        // (A node two directories share is read for each, as each is charged it.)
        let ids: Vec<ObjectId> = frontier
            .iter()
            .flat_map(|(_, _, ta, tb)| [*ta, *tb])
            .flatten()
            .collect();
        let mut roots = Vec::with_capacity(ids.len());
        for (id, loaded) in ids
            .iter()
            .zip(load_many(source, &ids, ObjectKind::Tree, true)?)
        {
            roots.push(TreeNode::decode(id, loaded.body())?);
        }
        let mut roots = ids.into_iter().zip(roots);
        let mut dirs = Vec::with_capacity(frontier.len());
        for (_, _, ta, tb) in &frontier {
            let na = ta.and_then(|_| roots.next());
            let nb = tb.and_then(|_| roots.next());
            dirs.push(DirWalk::new(na, nb, &mut budget)?);
        }
        // The index levels of every directory of this depth, one batched read each.
        loop {
            let ids: Vec<ObjectId> = dirs.iter().flat_map(DirWalk::wanted).copied().collect();
            if ids.is_empty() {
                break;
            }
            let mut nodes = Vec::with_capacity(ids.len());
            for (id, loaded) in ids
                .iter()
                .zip(load_many(source, &ids, ObjectKind::Tree, true)?)
            {
                nodes.push(TreeNode::decode(id, loaded.body())?);
            }
            let mut nodes = nodes.into_iter();
            for dir in &mut dirs {
                let wanted = dir.wanted().len();
                if wanted > 0 {
                    dir.feed(nodes.by_ref().take(wanted).collect(), &mut budget)?;
                }
            }
        }
        let mut next = Vec::new();
        for ((prefix, depth, ..), dir) in std::mem::take(&mut frontier).into_iter().zip(dirs) {
            let changes = dir.finish()?;
            if emit(&prefix, depth, changes, &mut budget, visit, &mut next)?.is_break() {
                return Ok(());
            }
        }
        frontier = next;
    }
    Ok(())
}

/// Hands the changes of one directory pair to `visit` and queues its changed
/// subdirectories in `next`.
fn emit<V: Visit + ?Sized>(
    prefix: &str,
    depth: usize,
    changes: Vec<EntryPair>,
    budget: &mut [Budget; 2],
    visit: &mut V,
    next: &mut Vec<(String, usize, Option<ObjectId>, Option<ObjectId>)>,
) -> Result<ControlFlow<()>, GraphError> {
    for (name, ea, eb) in changes {
        let path = format!("{prefix}/{name}");
        budget[0].path(depth + 1, path.len(), || path.clone())?;
        let dir_of = |e: &Option<Entry>| match e {
            Some(Entry {
                node: EntryNode::Dir { tree, .. },
                ..
            }) => Some(*tree),
            _ => None,
        };
        let (da, db) = (dir_of(&ea), dir_of(&eb));
        let fa = ea.as_ref().filter(|_| da.is_none());
        let fb = eb.as_ref().filter(|_| db.is_none());
        if da.is_some() || db.is_some() {
            let a = ea.as_ref().filter(|_| da.is_some());
            let b = eb.as_ref().filter(|_| db.is_some());
            let kind = match (a, b) {
                (Some(x), Some(y)) if da == db => {
                    (x.mode != y.mode).then_some(ChangeKind::ModeChanged)
                }
                (Some(_), Some(_)) => Some(ChangeKind::Modified),
                (Some(_), None) => Some(ChangeKind::Removed),
                _ => Some(ChangeKind::Added),
            };
            if let Some(kind) = kind {
                let change = Change {
                    path: path.clone(),
                    kind,
                    old: a.map(ChangeEntry::of),
                    new: b.map(ChangeEntry::of),
                };
                if visit.visit_dir(change).is_break() {
                    return Ok(ControlFlow::Break(()));
                }
            }
            next.push((path.clone(), depth + 1, da, db));
        }
        let kind = match (fa, fb) {
            (Some(x), Some(y)) => classify(x, y),
            (Some(_), None) => Some(ChangeKind::Removed),
            (None, Some(_)) => Some(ChangeKind::Added),
            (None, None) => None,
        };
        if let Some(kind) = kind {
            let change = Change {
                path,
                kind,
                old: fa.map(ChangeEntry::of),
                new: fb.map(ChangeEntry::of),
            };
            if visit.visit(change).is_break() {
                return Ok(ControlFlow::Break(()));
            }
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// The read of one directory pair of a depth, stepped a level at a time beside the
/// others ([`wanted`](Self::wanted), then [`feed`](Self::feed) until it wants
/// nothing).
enum DirWalk {
    /// On both sides: the nodes that differ.
    Pair(PairWalk),
    /// On one side only (0: the first commit's, removed; 1: the second's, added): every
    /// entry, each charged to that side.
    Whole(usize, TreeWalk),
    /// Read.
    Done(Vec<EntryPair>),
}

impl DirWalk {
    /// Starts on the root nodes (id and node of each side present) and charges them.
    fn new(
        ta: Option<(ObjectId, TreeNode)>,
        tb: Option<(ObjectId, TreeNode)>,
        budget: &mut [Budget; 2],
    ) -> Result<Self, GraphError> {
        let (mut walk, root) = match (ta, tb) {
            (Some((x, na)), Some((y, nb))) => {
                let sa = vec![charged(x, na, 0, budget)?];
                let sb = vec![charged(y, nb, 1, budget)?];
                return Ok(Self::Pair(PairWalk::new(x, y, sa, sb, budget)?));
            }
            (Some((x, na)), None) => (Self::Whole(0, TreeWalk::new(x)), na),
            (None, Some((y, nb))) => (Self::Whole(1, TreeWalk::new(y)), nb),
            (None, None) => return Ok(Self::Done(Vec::new())),
        };
        walk.feed(vec![root], budget)?;
        Ok(walk)
    }

    /// The nodes this directory needs next, in order (none when it is read).
    fn wanted(&self) -> &[ObjectId] {
        match self {
            Self::Pair(p) => &p.wanted,
            Self::Whole(_, w) => w.wanted(),
            Self::Done(_) => &[],
        }
    }

    /// Takes the nodes [`wanted`](Self::wanted) named, decoded, in order, and steps.
    fn feed(&mut self, nodes: Vec<TreeNode>, budget: &mut [Budget; 2]) -> Result<(), GraphError> {
        match self {
            Self::Pair(p) => p.feed(nodes, budget)?,
            Self::Whole(side, walk) => {
                let side = *side;
                let done = walk.feed::<GraphError>(nodes, &mut |leaf| {
                    Ok(budget[side].leaf(count_kinds(leaf))?)
                })?;
                if let Some(entries) = done {
                    *self = Self::Done(
                        entries
                            .into_iter()
                            .map(|e| match side {
                                0 => (e.name.clone(), Some(e), None),
                                _ => (e.name.clone(), None, Some(e)),
                            })
                            .collect(),
                    );
                }
            }
            Self::Done(_) => {}
        }
        Ok(())
    }

    /// The entries that differ, by name, once read.
    fn finish(self) -> Result<Vec<EntryPair>, GraphError> {
        match self {
            Self::Pair(p) => p.finish(),
            Self::Done(changes) => Ok(changes),
            // Every walk is fed until it wants nothing.
            Self::Whole(_, w) => Err(ObjectError::NotFound { id: w.root() }.into()),
        }
    }
}

fn diff_reads(a: &[ExternalRead], b: &[ExternalRead], d: &mut Diff) {
    let am: HashMap<&str, &ExternalRead> = a.iter().map(|r| (r.source.as_str(), r)).collect();
    let bm: HashMap<&str, &ExternalRead> = b.iter().map(|r| (r.source.as_str(), r)).collect();
    for r in a {
        match bm.get(r.source.as_str()) {
            None => d.reads_removed.push(r.source.clone()),
            Some(o) if *o != r => d.reads_changed.push(r.source.clone()),
            Some(_) => {}
        }
    }
    for r in b {
        if !am.contains_key(r.source.as_str()) {
            d.reads_added.push(r.source.clone());
        }
    }
}

/// A name with its entry on each side (absent where the side lacks it).
type EntryPair = (String, Option<Entry>, Option<Entry>);

enum Item {
    /// A node, its level, and its contents once read: children are listed by id and
    /// read only when they are expanded, so nodes equal on both sides are never read.
    Node(ObjectId, u8, Option<TreeNode>),
    Entry(Entry),
}

/// Charges what a tree node of `side` holds to the budget.
fn charge_node(node: &TreeNode, side: usize, budget: &mut [Budget; 2]) -> Result<(), GraphError> {
    Ok(match node {
        TreeNode::Leaf(entries) => budget[side].leaf(count_kinds(entries)),
        TreeNode::Internal { children, .. } => budget[side].index(children.len() as u64),
    }?)
}

/// A directory's root node of `side`, charged.
fn charged(
    id: ObjectId,
    node: TreeNode,
    side: usize,
    budget: &mut [Budget; 2],
) -> Result<Item, GraphError> {
    charge_node(&node, side, budget)?;
    Ok(Item::Node(id, node.level(), Some(node)))
}

/// The entries that differ between two directory trees, by name, with each side's
/// entry, a level at a time. Nodes with the same id on both sides hold the same
/// entries and cancel without being expanded; the highest remaining level is
/// expanded until only entries are left.
struct PairWalk {
    a: ObjectId,
    b: ObjectId,
    sa: Vec<Item>,
    sb: Vec<Item>,
    /// The level being expanded.
    top: u8,
    /// The nodes of that level not read yet: the first side's, then the second's.
    wanted: Vec<ObjectId>,
    /// How many of `wanted` are the first side's.
    split: usize,
}

impl PairWalk {
    /// A walk from the two root nodes (read and charged).
    fn new(
        a: ObjectId,
        b: ObjectId,
        sa: Vec<Item>,
        sb: Vec<Item>,
        budget: &mut [Budget; 2],
    ) -> Result<Self, GraphError> {
        let mut walk = Self {
            a,
            b,
            sa,
            sb,
            top: 0,
            wanted: Vec::new(),
            split: 0,
        };
        walk.feed(Vec::new(), budget)?;
        Ok(walk)
    }

    /// Expands the level being expanded with the nodes `wanted` named (decoded, in
    /// order; nothing on the first step), cancels what both sides share, and names
    /// the next level's nodes to read (none when only entries are left).
    fn feed(
        &mut self,
        mut nodes: Vec<TreeNode>,
        budget: &mut [Budget; 2],
    ) -> Result<(), GraphError> {
        if !self.wanted.is_empty() {
            let b_nodes = nodes.split_off(self.split.min(nodes.len()));
            let top = self.top;
            self.sa = expand(std::mem::take(&mut self.sa), top, nodes, 0, budget)?;
            self.sb = expand(std::mem::take(&mut self.sb), top, b_nodes, 1, budget)?;
        }
        let (sa, sb) = (&mut self.sa, &mut self.sb);
        // A well-formed directory lists each node once; a tree whose index nodes
        // share children would otherwise multiply the nodes read at every level.
        for (side, root) in [(&*sa, self.a), (&*sb, self.b)] {
            let mut ids = std::collections::HashSet::new();
            for item in side {
                if let Item::Node(id, ..) = item {
                    if !ids.insert(*id) {
                        return Err(ObjectError::malformed(
                            root,
                            ObjectKind::Tree,
                            format!("node {id} is listed twice"),
                        )
                        .into());
                    }
                }
            }
        }
        // Cancel nodes present on both sides.
        let mut counts: HashMap<ObjectId, isize> = HashMap::new();
        for item in sa.iter() {
            if let Item::Node(id, ..) = item {
                *counts.entry(*id).or_default() += 1;
            }
        }
        let mut common: HashMap<ObjectId, usize> = HashMap::new();
        for item in sb.iter() {
            if let Item::Node(id, ..) = item {
                if let Some(c) = counts.get_mut(id) {
                    if *c > 0 {
                        *c -= 1;
                        *common.entry(*id).or_default() += 1;
                    }
                }
            }
        }
        if !common.is_empty() {
            let mut ca = common.clone();
            sa.retain(|i| !take(&mut ca, i));
            let mut cb = common;
            sb.retain(|i| !take(&mut cb, i));
        }
        let top = sa
            .iter()
            .chain(sb.iter())
            .filter_map(|i| match i {
                Item::Node(_, level, _) => Some(*level),
                Item::Entry(_) => None,
            })
            .max();
        self.wanted.clear();
        let Some(top) = top else {
            return Ok(());
        };
        self.top = top;
        let unread = |items: &[Item]| -> Vec<ObjectId> {
            items
                .iter()
                .filter_map(|i| match i {
                    Item::Node(id, level, None) if *level == top => Some(*id),
                    _ => None,
                })
                .collect()
        };
        self.wanted = unread(sa);
        self.split = self.wanted.len();
        self.wanted.extend(unread(sb));
        if self.wanted.is_empty() {
            // Only read nodes at this level (the roots): expand them now.
            let top = self.top;
            self.sa = expand(std::mem::take(&mut self.sa), top, Vec::new(), 0, budget)?;
            self.sb = expand(std::mem::take(&mut self.sb), top, Vec::new(), 1, budget)?;
            return self.feed(Vec::new(), budget);
        }
        Ok(())
    }

    /// The entries that differ, by name, once nothing is wanted.
    fn finish(self) -> Result<Vec<EntryPair>, GraphError> {
        let (a, b) = (self.a, self.b);
        let mut ea: Vec<Entry> = self.sa.into_iter().filter_map(entry_of).collect();
        let mut eb: Vec<Entry> = self.sb.into_iter().filter_map(entry_of).collect();
        ea.sort_by(|x, y| x.name.cmp(&y.name));
        eb.sort_by(|x, y| x.name.cmp(&y.name));
        for (side, id) in [(&ea, a), (&eb, b)] {
            if let Some(w) = side.windows(2).find(|w| w[0].name == w[1].name) {
                return Err(ObjectError::malformed(
                    id,
                    ObjectKind::Tree,
                    format!("entry {:?} appears twice", w[0].name),
                )
                .into());
            }
        }
        let mut out = Vec::new();
        let (mut ia, mut ib) = (ea.into_iter().peekable(), eb.into_iter().peekable());
        loop {
            let order = match (ia.peek(), ib.peek()) {
                (None, None) => break,
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(x), Some(y)) => x.name.cmp(&y.name),
            };
            match order {
                std::cmp::Ordering::Less => {
                    let x = ia.next();
                    out.extend(x.map(|x| (x.name.clone(), Some(x), None)));
                }
                std::cmp::Ordering::Greater => {
                    let y = ib.next();
                    out.extend(y.map(|y| (y.name.clone(), None, Some(y))));
                }
                std::cmp::Ordering::Equal => {
                    let (x, y) = (ia.next(), ib.next());
                    if x != y {
                        if let (Some(x), Some(y)) = (x, y) {
                            out.push((x.name.clone(), Some(x), Some(y)));
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}

fn take(counts: &mut HashMap<ObjectId, usize>, item: &Item) -> bool {
    if let Item::Node(id, ..) = item {
        if let Some(c) = counts.get_mut(id) {
            if *c > 0 {
                *c -= 1;
                return true;
            }
        }
    }
    false
}

fn entry_of(item: Item) -> Option<Entry> {
    match item {
        Item::Entry(e) => Some(e),
        Item::Node(..) => None,
    }
}

/// Replaces every node at level `top` by its children (or entries); `read` holds,
/// decoded and in order, those not read yet.
fn expand(
    items: Vec<Item>,
    top: u8,
    read: Vec<TreeNode>,
    side: usize,
    budget: &mut [Budget; 2],
) -> Result<Vec<Item>, GraphError> {
    let mut read = read.into_iter();
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Item::Node(id, level, node) if level == top => {
                let node = match node {
                    Some(n) => n,
                    None => {
                        let Some(n) = read.next() else {
                            return Err(ObjectError::NotFound { id }.into());
                        };
                        charge_node(&n, side, budget)?;
                        if n.level() != level {
                            return Err(ObjectError::malformed(
                                id,
                                ObjectKind::Tree,
                                format!("level {} where its parent says {level}", n.level()),
                            )
                            .into());
                        }
                        n
                    }
                };
                match node {
                    TreeNode::Leaf(entries) => out.extend(entries.into_iter().map(Item::Entry)),
                    TreeNode::Internal { children, level } => out.extend(
                        children
                            .into_iter()
                            .map(|c| Item::Node(c.tree, level - 1, None)),
                    ),
                }
            }
            other => out.push(other),
        }
    }
    Ok(out)
}
