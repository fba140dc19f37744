//! `SnapshotGraph::diff`: what changed between two commits.

use std::collections::HashMap;

use super::{load_commit, read_list, GraphError, SnapshotGraph};
use crate::id::ObjectId;
use crate::limits::{Limits, MAX_DEPTH, MAX_PATH_LEN};
use crate::object::reads::ExternalRead;
use crate::object::tree::{Entry, EntryNode, TreeNode};
use crate::object::{load, ObjectError, ObjectKind};
use crate::source::ObjectSource;
use crate::tree::read_entries;

/// The difference between two commits. Paths are absolute and sorted; "files" are
/// regular files and symlinks (directories appear through the files they hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Diff {
    /// Files present only in the second commit.
    pub files_added: Vec<String>,
    /// Files present in both whose content, mode or kind (file or symlink) differs.
    pub files_modified: Vec<String>,
    /// Files present only in the first commit.
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
        self.files_added.is_empty()
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
    /// is read whole, since each of its files is a change.
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
    /// [`GraphError::LimitExceeded`].
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
        let mut budget = Budget {
            limit: limits.max_files,
            commits: [a, b],
            seen: [[0; 3]; 2],
        };
        // (directory path, its number of components, tree on each side)
        let mut stack: Vec<(String, usize, Option<ObjectId>, Option<ObjectId>)> =
            vec![(String::new(), 0, Some(ca.tree), Some(cb.tree))];
        while let Some((prefix, depth, ta, tb)) = stack.pop() {
            if ta == tb {
                continue;
            }
            let changes = match (ta, tb) {
                (Some(x), Some(y)) => changed_entries(source, x, y, &mut budget)?,
                (Some(x), None) => all_entries(source, x, 0, &mut budget)?
                    .into_iter()
                    .map(|e| (e.name.clone(), Some(e), None))
                    .collect(),
                (None, Some(y)) => all_entries(source, y, 1, &mut budget)?
                    .into_iter()
                    .map(|e| (e.name.clone(), None, Some(e)))
                    .collect(),
                (None, None) => Vec::new(),
            };
            for (name, ea, eb) in changes {
                let path = format!("{prefix}/{name}");
                if depth + 1 > MAX_DEPTH {
                    return Err(GraphError::TooDeep { path });
                }
                if path.len() > MAX_PATH_LEN {
                    return Err(GraphError::PathTooLong { path });
                }
                let dir_of = |e: &Option<Entry>| match e {
                    Some(Entry {
                        node: EntryNode::Dir { tree, .. },
                        ..
                    }) => Some(*tree),
                    _ => None,
                };
                let (da, db) = (dir_of(&ea), dir_of(&eb));
                let (fa, fb) = (ea.is_some() && da.is_none(), eb.is_some() && db.is_none());
                if da.is_some() || db.is_some() {
                    stack.push((path.clone(), depth + 1, da, db));
                }
                match (fa, fb) {
                    (true, true) => {
                        if ea != eb {
                            d.files_modified.push(path);
                        }
                    }
                    (true, false) => d.files_removed.push(path),
                    (false, true) => d.files_added.push(path),
                    (false, false) => {}
                }
            }
        }
        d.files_added.sort();
        d.files_modified.sort();
        d.files_removed.sort();
        Ok(d)
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

/// Entries decoded so far on each side, against the limit: a tree that repeats
/// subtrees can describe far more paths than it has objects, and a diff reads each
/// occurrence, as a checkout of that side would. Index entries of internal nodes are
/// counted too: a diff skips leaves equal on both sides, so it may decode index
/// nodes whose leaves it never charges.
struct Budget {
    limit: u64,
    commits: [ObjectId; 2],
    /// Per side: [files and symlinks, directories, index entries].
    seen: [[u64; 3]; 2],
}

impl Budget {
    fn charge(&mut self, side: usize, entries: &[Entry]) -> Result<(), GraphError> {
        let dirs = entries
            .iter()
            .filter(|e| matches!(e.node, EntryNode::Dir { .. }))
            .count() as u64;
        self.add(side, 0, entries.len() as u64 - dirs)?;
        self.add(side, 1, dirs)
    }

    /// Adds `n` to counter `i` (files, directories, index entries) of `side`.
    fn add(&mut self, side: usize, i: usize, n: u64) -> Result<(), GraphError> {
        self.seen[side][i] = self.seen[side][i].saturating_add(n);
        if self.seen[side][i] > self.limit {
            return Err(GraphError::LimitExceeded {
                commit: self.commits[side],
                what: ["files", "directories", "index entries"][i],
                limit: self.limit,
            });
        }
        Ok(())
    }
}

fn all_entries<S: ObjectSource + ?Sized>(
    source: &S,
    id: ObjectId,
    side: usize,
    budget: &mut Budget,
) -> Result<Vec<Entry>, GraphError> {
    read_entries::<S, GraphError>(source, id, None, true, &mut |leaf| {
        budget.charge(side, leaf)
    })
}

/// A name with its entry on each side (absent where the side lacks it).
type Change = (String, Option<Entry>, Option<Entry>);

enum Item {
    /// A node, its level, and its contents once read: children are listed by id and
    /// read only when they are expanded, so nodes equal on both sides are never read.
    Node(ObjectId, u8, Option<TreeNode>),
    Entry(Entry),
}

/// Reads and decodes a tree node of `side`, charging what it holds to the budget.
fn read_node<S: ObjectSource + ?Sized>(
    source: &S,
    id: ObjectId,
    side: usize,
    budget: &mut Budget,
) -> Result<TreeNode, GraphError> {
    let loaded = load(source, &id, ObjectKind::Tree)?;
    let node = TreeNode::decode(&id, loaded.body())?;
    match &node {
        TreeNode::Leaf(entries) => budget.charge(side, entries)?,
        TreeNode::Internal { children, .. } => budget.add(side, 2, children.len() as u64)?,
    }
    Ok(node)
}

fn load_node<S: ObjectSource + ?Sized>(
    source: &S,
    id: ObjectId,
    side: usize,
    budget: &mut Budget,
) -> Result<Item, GraphError> {
    let node = read_node(source, id, side, budget)?;
    Ok(Item::Node(id, node.level(), Some(node)))
}

/// The entries that differ between two directory trees, by name, with each side's
/// entry. Nodes with the same id on both sides hold the same entries and cancel
/// without being expanded; the highest remaining level is expanded until only
/// entries are left.
fn changed_entries<S: ObjectSource + ?Sized>(
    source: &S,
    a: ObjectId,
    b: ObjectId,
    budget: &mut Budget,
) -> Result<Vec<Change>, GraphError> {
    let mut sa = vec![load_node(source, a, 0, budget)?];
    let mut sb = vec![load_node(source, b, 1, budget)?];
    loop {
        // A well-formed directory lists each node once; a tree whose index nodes
        // share children would otherwise multiply the nodes read at every level.
        for (side, root) in [(&sa, a), (&sb, b)] {
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
        for item in &sa {
            if let Item::Node(id, ..) = item {
                *counts.entry(*id).or_default() += 1;
            }
        }
        let mut common: HashMap<ObjectId, usize> = HashMap::new();
        for item in &sb {
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
            .chain(&sb)
            .filter_map(|i| match i {
                Item::Node(_, level, _) => Some(*level),
                Item::Entry(_) => None,
            })
            .max();
        let Some(top) = top else { break };
        sa = expand(source, sa, top, 0, budget)?;
        sb = expand(source, sb, top, 1, budget)?;
    }
    let mut ea: Vec<Entry> = sa.into_iter().filter_map(entry_of).collect();
    let mut eb: Vec<Entry> = sb.into_iter().filter_map(entry_of).collect();
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

/// Replaces every node at level `top` by its children (or entries).
fn expand<S: ObjectSource + ?Sized>(
    source: &S,
    items: Vec<Item>,
    top: u8,
    side: usize,
    budget: &mut Budget,
) -> Result<Vec<Item>, GraphError> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Item::Node(id, level, node) if level == top => {
                let node = match node {
                    Some(n) => n,
                    None => {
                        let n = read_node(source, id, side, budget)?;
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
