//! `Workspace::commit`: turning the workspace into objects.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{DirNode, LastCommit, Node, Workspace, DEFAULT_DIR_MODE};
use crate::content::{ContentObjects, Pending, PARALLEL_TOTAL_MIN};
use crate::emit::{Emitter, Have, ObjectSet};
use crate::id::ObjectId;
use crate::object::commit::{CommitObject, MAX_GENERATION};
use crate::object::reads::ReadsObject;
use crate::object::tree::Content;
use crate::object::tree::{Entry, EntryNode};
use crate::object::{encode, ObjectError, ObjectKind, MAX_OBJECT_SIZE};
use crate::source::ObjectSource;
use crate::tree::Layout;

/// Commit epochs, unique per commit in the process (clones of a workspace share
/// directories, so a per-workspace counter would not do). Starts at 1: layouts built
/// outside commits carry epoch 0.
static COMMIT_EPOCH: AtomicU64 = AtomicU64::new(1);

/// What to record with a commit, and what the destination already holds.
///
/// ```
/// # use snapgraph::{CommitOptions, ObjectId};
/// # let parent = ObjectId::from_bytes([1; 32]);
/// # let store: std::collections::HashMap<ObjectId, Vec<u8>> = Default::default();
/// let options = CommitOptions::new()
///     .parent(parent)
///     .have_in(&store) // emit only what `store` lacks
///     .meta("message_id", "msg-2");
/// ```
#[derive(Clone, Default)]
#[must_use]
pub struct CommitOptions<'a> {
    parents: Vec<ObjectId>,
    have: Have<'a>,
    meta: BTreeMap<String, String>,
    parent_source: Option<&'a dyn ObjectSource>,
    exclude_files: bool,
    exclude_state: bool,
}

impl core::fmt::Debug for CommitOptions<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CommitOptions")
            .field("parents", &self.parents)
            .field("have_declared", &self.have.is_declared())
            .field("meta", &self.meta)
            .field("exclude_files", &self.exclude_files)
            .field("exclude_state", &self.exclude_state)
            .finish()
    }
}

impl<'a> CommitOptions<'a> {
    /// No parents, nothing held: the commit emits every object it needs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a parent. A fork is a commit whose parent is not the tip; a merge has
    /// several parents.
    pub fn parent(mut self, id: ObjectId) -> Self {
        self.parents.push(id);
        self
    }

    /// Adds several parents, in order.
    pub fn parents(mut self, ids: impl IntoIterator<Item = ObjectId>) -> Self {
        self.parents.extend(ids);
        self
    }

    /// Declares ids the destination already holds. The commit walks its objects from
    /// the root and skips every listed id together with everything under it (a store
    /// that holds an object holds what it references), so list the objects themselves,
    /// as `store.keys()` does: a commit id alone prunes nothing but that commit.
    /// Collects the ids, so it costs what the iterator yields: for a large store prefer
    /// [`have_in`](Self::have_in).
    pub fn have<I>(mut self, ids: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<ObjectId>,
    {
        let mut set = self
            .have
            .ids
            .take()
            .map(|s| Arc::try_unwrap(s).unwrap_or_else(|s| (*s).clone()))
            .unwrap_or_default();
        set.extend(ids.into_iter().map(|id| *id.borrow()));
        self.have.ids = Some(Arc::new(set));
        self
    }

    /// Declares a store whose objects the destination holds (typically the
    /// destination itself), asked about objects on changed paths only: in one
    /// [`contains_many`](ObjectSource::contains_many) call per commit (every id the
    /// walk would ask if the previous trees are held and new objects are not), then
    /// per object only where the walk goes beyond that batch. A store that fails to
    /// answer counts as not holding the object. It also answers
    /// parent lookups: a parent this workspace neither made nor checked out is read
    /// from the [`parent_source`](Self::parent_source), then from each `have_in`
    /// store, so a merge with another workspace's commit needs no extra option.
    pub fn have_in(mut self, store: &'a dyn ObjectSource) -> Self {
        self.have.sources.push(store);
        self
    }

    /// Adds a metadata entry (a later value for the same key wins).
    pub fn meta(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.meta.insert(key.into(), value.into());
        self
    }

    /// Where to read parent commits this workspace did not make or check out (their
    /// generation numbers are needed). Asked before the [`have_in`](Self::have_in)
    /// stores.
    pub fn parent_source(mut self, source: &'a dyn ObjectSource) -> Self {
        self.parent_source = Some(source);
        self
    }

    /// Leaves the files out: the commit records an empty root directory (as a
    /// snapshot with [`SnapshotOptions::exclude_files`](crate::SnapshotOptions) does).
    /// The workspace keeps its files; its head moves to the new commit.
    pub fn exclude_files(mut self, exclude: bool) -> Self {
        self.exclude_files = exclude;
        self
    }

    /// Leaves the state out: the commit records empty state (as a snapshot with
    /// [`SnapshotOptions::exclude_state`](crate::SnapshotOptions) does). The
    /// workspace keeps its state; its head moves to the new commit.
    pub fn exclude_state(mut self, exclude: bool) -> Self {
        self.exclude_state = exclude;
        self
    }
}

/// A new commit: its id and the objects to persist.
#[derive(Debug, Clone)]
#[must_use = "a commit's objects must be persisted"]
pub struct Commit {
    id: ObjectId,
    generation: u64,
    objects: ObjectSet,
    complete: bool,
}

impl Commit {
    /// The commit's id.
    pub fn id(&self) -> ObjectId {
        self.id
    }

    /// Its generation number (1 for a root commit).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The objects to persist, referenced objects first (write them in this order and
    /// a store holding an object always holds everything under it).
    pub fn objects(&self) -> &ObjectSet {
        &self.objects
    }

    /// Takes the objects to persist.
    pub fn into_objects(self) -> ObjectSet {
        self.objects
    }

    /// How many objects there are to persist.
    pub fn object_count(&self) -> usize {
        self.objects.len()
    }

    /// How many bytes there are to persist.
    pub fn stored_bytes(&self) -> u64 {
        self.objects.stored_bytes()
    }

    /// Whether the objects are self-contained (nothing was left out because the
    /// destination holds it), so that they restore the commit on their own.
    pub fn is_complete(&self) -> bool {
        self.complete
    }
}

/// Why a commit failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// A parent is neither known to the workspace nor held by the
    /// [`parent_source`](CommitOptions::parent_source) or any
    /// [`have_in`](CommitOptions::have_in) store.
    #[error("parent {id} is unknown: pass a parent_source or have_in store that holds it")]
    UnknownParent {
        /// The parent.
        id: ObjectId,
    },
    /// A parent's generation is [`MAX_GENERATION`]:
    /// a child would exceed the highest generation readers accept.
    #[error("parent {id} has generation {generation}, the maximum: it can have no child")]
    GenerationOverflow {
        /// The parent.
        id: ObjectId,
        /// Its generation.
        generation: u64,
    },
    /// A parent was listed twice.
    #[error("parent {id} is listed twice")]
    DuplicateParent {
        /// The parent.
        id: ObjectId,
    },
    /// More parents than the format allows.
    #[error("{count} parents, at most {max} allowed")]
    TooManyParents {
        /// How many were given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// Reading a parent from the parent source failed.
    #[error("reading parent: {0}")]
    Parent(#[from] ObjectError),
    /// The commit object (mostly its metadata) exceeds the object size limit.
    #[error("commit object would be {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A file a [shallow checkout](Workspace::checkout_with) left in the store has
    /// content the destination lacks (as declared with
    /// [`have`](CommitOptions::have)/[`have_in`](CommitOptions::have_in), or not
    /// declared at all), so the commit cannot emit it. Load it with
    /// [`Workspace::load_content`] or declare a destination that holds it. Nothing is
    /// emitted and the head does not move.
    #[error("{path}: content {id} is not loaded and the destination lacks it")]
    ContentNotLoaded {
        /// The file (the first one found), or a directory a lazy checkout left
        /// unloaded.
        path: String,
        /// Its content's root object (a chunk or a manifest), or the directory's root
        /// tree node.
        id: ObjectId,
    },
}

impl Workspace {
    /// Records the workspace as a commit and returns it with the objects to persist.
    ///
    /// Files not written since the last commit or checkout are not re-read, and only
    /// tree nodes on changed paths are re-encoded. Without
    /// [`have`](CommitOptions::have)/[`have_in`](CommitOptions::have_in) every object
    /// the commit needs is emitted; with them, only what the destination lacks.
    ///
    /// Files a [shallow checkout](Self::checkout_with) left in the store keep their
    /// tree entries; their content must be held by the destination, else
    /// [`CommitError::ContentNotLoaded`].
    pub fn commit(&mut self, options: CommitOptions<'_>) -> Result<Commit, CommitError> {
        if options.exclude_files || options.exclude_state {
            // Commit a copy-on-write clone without them (O(1)); keep its history.
            let mut part = self.clone();
            if options.exclude_files {
                part.root = Arc::new(DirNode::new(DEFAULT_DIR_MODE));
            }
            if options.exclude_state {
                part.set_state(Vec::new());
            }
            let commit = part.commit(CommitOptions {
                exclude_files: false,
                exclude_state: false,
                ..options
            })?;
            self.head = part.head;
            // The files were left out: what was handed over stays handed over.
            self.generations = part.generations;
            return Ok(commit);
        }
        let generation = self.generation_for(&options)?;

        // Hash every new content first (on several threads when it pays), then fold
        // the results into the tree in the same traversal order.
        let mut pending = Vec::new();
        pending_contents(&self.root, &mut pending);
        let sources: Vec<&dyn ObjectSource> = options
            .have
            .sources
            .iter()
            .copied()
            .chain(options.parent_source)
            .collect();
        self.resolve_over(&mut pending, &sources);
        if self.state_objects.is_none() {
            pending.push(Pending {
                data: self.state.clone(),
                prev: None,
                over: None,
            });
        }
        let threads = self.threads_for(fresh_bytes(&pending), PARALLEL_TOTAL_MIN);
        let mut built = ContentObjects::build_many(&pending, threads).into_iter();
        let epoch = COMMIT_EPOCH.fetch_add(1, Ordering::Relaxed);
        if !self.root.is_clean() {
            commit_dir(Arc::make_mut(&mut self.root), &mut built, epoch);
        }
        if self.state_objects.is_none() {
            let state = built
                .next()
                .unwrap_or_else(|| ContentObjects::build(&self.state));
            self.state_objects = Some(Arc::new(state));
        }
        let state = self
            .state_objects
            .clone()
            .unwrap_or_else(|| Arc::new(ContentObjects::build(&self.state)));
        let capabilities = self
            .capabilities
            .as_ref()
            .map(|c| c.encode())
            .map(|b| (ObjectId::hash_stored(&b), b));
        let reads = (!self.reads.is_empty())
            .then(|| ReadsObject(self.reads.values().cloned().collect()).encode())
            .map(|b| (ObjectId::hash_stored(&b), b));
        let root = self.root_layout();
        let object = CommitObject {
            tree: root.root().id,
            parents: options.parents.clone(),
            generation,
            state_size: state.size,
            state: state.content.clone(),
            capabilities: capabilities.as_ref().map(|c| c.0),
            reads: reads.as_ref().map(|r| r.0),
            meta: options.meta.clone(),
        };
        let stored = encode(ObjectKind::Commit, &object);
        if stored.len() > MAX_OBJECT_SIZE {
            return Err(CommitError::TooLarge {
                size: stored.len(),
                limit: MAX_OBJECT_SIZE,
            });
        }
        let id = ObjectId::hash_stored(&stored);

        let handed = Arc::clone(&self.handed);
        let mut out = Emitter::new(&options.have).handed(&handed);
        let extra: Vec<(ObjectId, Vec<u8>)> = capabilities.into_iter().chain(reads).collect();
        let emit_all = |out: &mut Emitter<'_>| -> Result<(), CommitError> {
            emit_dir(&self.root, out, epoch, &mut Vec::new())?;
            state.emit(&self.state, out);
            for (oid, bytes) in &extra {
                if out.wants(oid) {
                    out.push(*oid, bytes.clone());
                }
            }
            Ok(())
        };
        if out.probe() {
            // An error here is the real walk's to report (the probe's answers are
            // guesses).
            let _ = emit_all(&mut out);
            out.probed();
        }
        emit_all(&mut out)?;
        out.push(id, stored);

        self.head = Some(id);
        Arc::make_mut(&mut self.generations).insert(id, generation);
        // What was handed over is in this commit's closure now (or was replaced).
        if !self.handed.is_empty() {
            self.handed = Arc::default();
        }
        Ok(Commit {
            id,
            generation,
            objects: out.out,
            complete: !out.pruned,
        })
    }

    /// Hands over the content of every file written since the last commit or
    /// checkout: chunks and hashes it, returns its chunk and manifest objects (those
    /// `have_in` lacks, none twice across hand-overs), and keeps of each such file
    /// only its content reference, dropping its bytes. The next
    /// [`commit`](Self::commit) then builds its trees from the references and emits
    /// neither these objects again nor the files' content; it has the same id as
    /// without the hand-over, and its objects plus every hand-over's are exactly
    /// those it would have emitted alone. So a caller can commit a tree larger than
    /// its memory: write files until their bytes reach a budget, hand over, persist
    /// the objects (in the order given: referenced objects first), go on, commit.
    ///
    /// The caller must persist every object handed over before it persists the
    /// commit: the commit counts them as held. A file handed over reads as
    /// [`FsError::NotLoaded`](super::FsError::NotLoaded) (as after a shallow
    /// checkout) until [`load_content`](Self::load_content); content small enough to
    /// be inline stays in memory. A file overwritten after its hand-over is
    /// chunked whole (no previous bytes to reuse), and the objects handed over for
    /// it are garbage unless something else refers to them.
    ///
    /// ```
    /// use snapgraph::{CommitOptions, Workspace};
    /// use std::collections::HashMap;
    ///
    /// let mut store = HashMap::new();
    /// let mut ws = Workspace::new();
    /// ws.write("/a.bin", vec![7u8; 200_000])?;
    /// store.extend(ws.hand_over(Some(&store)).into_iter()); // a's chunks, then a's bytes are gone
    /// ws.write("/b.bin", vec![9u8; 300_000])?;
    /// let c = ws.commit(CommitOptions::new())?; // emits b's content and the trees
    /// let id = c.id();
    /// store.extend(c.into_objects());
    ///
    /// let mut whole = Workspace::new();
    /// whole.write("/a.bin", vec![7u8; 200_000])?;
    /// whole.write("/b.bin", vec![9u8; 300_000])?;
    /// assert_eq!(whole.commit(CommitOptions::new())?.id(), id);
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    #[must_use = "handed-over objects must be persisted before the commit"]
    pub fn hand_over(&mut self, have_in: Option<&dyn ObjectSource>) -> ObjectSet {
        let mut pending = Vec::new();
        pending_contents(&self.root, &mut pending);
        if pending.is_empty() {
            return ObjectSet::new();
        }
        let sources: Vec<&dyn ObjectSource> = have_in.into_iter().collect();
        self.resolve_over(&mut pending, &sources);
        let threads = self.threads_for(fresh_bytes(&pending), PARALLEL_TOTAL_MIN);
        let built = ContentObjects::build_many(&pending, threads);
        let have = Have {
            ids: None,
            sources: have_in.into_iter().collect(),
        };
        let mut out = Emitter::new(&have).handed(&self.handed);
        for (objects, job) in built.iter().zip(&pending) {
            objects.emit(&job.data, &mut out);
        }
        let out = out.out;
        drop(pending);
        Arc::make_mut(&mut self.handed).extend(out.ids().copied());
        hand_over_dir(Arc::make_mut(&mut self.root), &mut built.into_iter());
        out
    }

    /// For each pending content whose previous version is only a reference (a file
    /// a shallow or lazy checkout left in the store, written over since): that
    /// version's chunk list, read from the first of `sources` that has its
    /// manifest, checked as [`load_content`](Self::load_content) checks it, so that
    /// the build hashes the chunks the new bytes still hold instead of cutting them
    /// ([`crate::content::over::spans_over`]). Without one the content is cut afresh (the
    /// same objects: the chunk list only saves work).
    fn resolve_over(&self, pending: &mut [Pending], sources: &[&dyn ObjectSource]) {
        for p in pending {
            let Some(prev) = &p.prev else {
                continue;
            };
            if !prev.0.is_empty() || !prev.1.chunks.is_empty() {
                // The old bytes are at hand: `ContentObjects::rebuild` compares them.
                continue;
            }
            let reference = Arc::clone(&prev.1);
            p.prev = None;
            let Content::Manifest(root) = reference.content else {
                continue;
            };
            let commit = self.head.unwrap_or(root);
            p.over = sources.iter().find_map(|source| {
                self.loader(*source, commit, true, super::checkout::Depth::Full)
                    .chunk_refs(root, reference.size)
                    .ok()
            });
        }
    }

    fn root_layout(&self) -> Arc<Layout> {
        self.root
            .layout
            .clone()
            .unwrap_or_else(|| Arc::new(Layout::build(&[])))
    }

    fn generation_for(&self, options: &CommitOptions<'_>) -> Result<u64, CommitError> {
        let parents = &options.parents;
        if parents.len() > crate::limits::MAX_PARENTS {
            return Err(CommitError::TooManyParents {
                count: parents.len(),
                max: crate::limits::MAX_PARENTS,
            });
        }
        let mut max = 0u64;
        for (i, p) in parents.iter().enumerate() {
            if parents[..i].contains(p) {
                return Err(CommitError::DuplicateParent { id: *p });
            }
            let generation = match self.generations.get(p) {
                Some(g) => *g,
                None => parent_generation(p, options)?,
            };
            if generation >= MAX_GENERATION {
                return Err(CommitError::GenerationOverflow { id: *p, generation });
            }
            max = max.max(generation);
        }
        Ok(max + 1)
    }
}

/// A parent's generation read from the first source given to the commit that holds
/// it: the parent source, then each `have_in` store. A source that does not hold it
/// passes to the next; one that holds something else under its id, or fails, stops.
fn parent_generation(id: &ObjectId, options: &CommitOptions<'_>) -> Result<u64, CommitError> {
    let sources = options
        .parent_source
        .into_iter()
        .chain(options.have.sources.iter().copied());
    for source in sources {
        match crate::graph::load_commit(source, id) {
            Ok(c) => return Ok(c.generation),
            Err(ObjectError::NotFound { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(CommitError::UnknownParent { id: *id })
}

/// The names of a directory that a commit must look at: all of them for a directory
/// never committed, else the changed ones. Sorted.
fn names_to_commit(dir: &DirNode) -> Vec<String> {
    if dir.layout.is_none() {
        dir.entries.keys().cloned().collect()
    } else {
        dir.dirty.iter().cloned().collect()
    }
}

/// The bytes of `pending` that [`ContentObjects::build_many`] cuts afresh (those
/// without a previous version to rebuild around): what decides whether a commit's
/// hashing is worth threads.
fn fresh_bytes(pending: &[Pending]) -> usize {
    pending
        .iter()
        .filter(|p| p.prev.is_none() && p.over.is_none())
        .map(|p| p.data.len())
        .sum()
}

/// Collects, in the order [`commit_dir`] visits them, every file whose objects must
/// be built, with its previous version when that can be reused.
fn pending_contents(dir: &DirNode, out: &mut Vec<Pending>) {
    if dir.is_clean() {
        return;
    }
    for name in names_to_commit(dir) {
        match dir.entries.get(&name) {
            Some(Node::Dir(d)) if !d.is_clean() => pending_contents(d, out),
            Some(Node::File(f)) if f.objects.is_none() => {
                // A file without objects has its bytes (only unloaded ones lack them).
                if let Some(data) = &f.data {
                    out.push(Pending {
                        data: data.clone(),
                        prev: f.prev.clone(),
                        over: None,
                    })
                }
            }
            _ => {}
        }
    }
}

/// Replaces the bytes of each file [`pending_contents`] lists by its content
/// reference (taken from `built`, in that order); inline content keeps its bytes and
/// its full objects. Layouts and changed names stay as they are: the commit comes.
fn hand_over_dir(dir: &mut DirNode, built: &mut impl Iterator<Item = ContentObjects>) {
    if dir.is_clean() {
        return;
    }
    for name in names_to_commit(dir) {
        match dir.entries.get_mut(&name) {
            Some(Node::Dir(d)) if !d.is_clean() => hand_over_dir(Arc::make_mut(d), built),
            Some(Node::File(f)) if f.objects.is_none() && f.data.is_some() => {
                let Some(objects) = built.next() else {
                    return;
                };
                f.prev = None;
                if matches!(objects.content, Content::Inline(_)) {
                    f.objects = Some(Arc::new(objects));
                } else {
                    f.data = None;
                    f.objects = Some(Arc::new(ContentObjects::reference(
                        objects.size,
                        objects.content,
                    )));
                }
            }
            _ => {}
        }
    }
}

/// Brings a directory's layout up to date, committing changed children first. File
/// objects come from `built`, in [`pending_contents`] order.
fn commit_dir(dir: &mut DirNode, built: &mut impl Iterator<Item = ContentObjects>, epoch: u64) {
    if dir.is_clean() {
        return;
    }
    let dirty = names_to_commit(dir);
    dir.dirty.clear();
    for name in &dirty {
        match dir.entries.get_mut(name) {
            Some(Node::Dir(d)) if !d.is_clean() => commit_dir(Arc::make_mut(d), built, epoch),
            Some(Node::File(f)) if f.objects.is_none() => {
                // In step with `pending_contents`, which skips files without bytes.
                if let Some(data) = &f.data {
                    let objects = built.next().unwrap_or_else(|| ContentObjects::build(data));
                    f.objects = Some(Arc::new(objects));
                    f.prev = None;
                }
            }
            _ => {}
        }
    }
    // Reuse the old layout's storage: normally unique; shared only right after a fork.
    let old = dir.layout.take().map(Arc::unwrap_or_clone);
    let prev_root = old.as_ref().map(|l| l.root().id);
    let entries = &dir.entries;
    let layout = Layout::update(old, &dirty, epoch, |from| {
        let range: Box<dyn Iterator<Item = (&String, &Node)>> = match from {
            None => Box::new(entries.iter()),
            Some(k) => Box::new(
                entries.range::<str, _>((std::ops::Bound::Included(k), std::ops::Bound::Unbounded)),
            ),
        };
        range.map(|(name, node)| entry_of(name, node))
    });
    dir.layout = Some(Arc::new(layout));
    dir.last = prev_root.map(|prev_root| {
        Arc::new(LastCommit {
            epoch,
            prev_root,
            names: dirty,
        })
    });
}

/// The tree entry of a committed node.
pub(crate) fn entry_of(name: &str, node: &Node) -> Entry {
    let (mode, node) = match node {
        Node::File(f) => {
            let objects = f.objects.clone().unwrap_or_else(|| {
                Arc::new(ContentObjects::build(f.data.as_deref().unwrap_or_default()))
            });
            (
                f.mode,
                EntryNode::File {
                    size: objects.size,
                    content: objects.content.clone(),
                },
            )
        }
        Node::Dir(d) => {
            let root = d.layout.as_ref().map(|l| l.root().clone());
            let (tree, files, bytes) = match (root, d.unloaded) {
                (_, Some(u)) => (u.tree, u.files, u.bytes),
                (Some(r), None) => (r.id, r.files, r.bytes),
                (None, None) => {
                    let l = Layout::build(&[]);
                    (l.root().id, 0, 0)
                }
            };
            (d.mode, EntryNode::Dir { tree, files, bytes })
        }
        Node::Symlink(s) => (
            s.mode,
            EntryNode::Symlink {
                target: s.target.clone(),
            },
        ),
    };
    Entry {
        name: name.to_owned(),
        mode,
        node,
    }
}

/// Emits a committed directory's objects that the destination lacks. `path` holds
/// the directory's components (for errors).
///
/// If this commit (`epoch`) changed the directory and the destination holds its
/// previous root, everything this commit did not change is held: old nodes and
/// unchanged entries are skipped without asking, so the have-set is asked about the
/// changed path only. A file left unloaded whose content the destination lacks (and
/// that this commit has not emitted already) fails the commit.
fn emit_dir(
    dir: &DirNode,
    out: &mut Emitter<'_>,
    epoch: u64,
    path: &mut Vec<String>,
) -> Result<(), CommitError> {
    if let Some(u) = &dir.unloaded {
        // Left in the store by a lazy checkout: the destination must hold it.
        return match out.wants(&u.tree) {
            true => Err(CommitError::ContentNotLoaded {
                path: super::path::join(path),
                id: u.tree,
            }),
            false => Ok(()),
        };
    }
    let Some(layout) = dir.layout.as_ref() else {
        return Ok(());
    };
    let last = dir
        .last
        .as_deref()
        .filter(|l| l.epoch == epoch && out.holds(&l.prev_root));
    let mut failed: Option<CommitError> = None;
    layout.emit(out, last.map(|l| l.epoch), &mut |slot, out| {
        if slot.items == 0 || failed.is_some() {
            return;
        }
        for (name, node) in dir.entries.range::<str, _>((
            std::ops::Bound::Included(slot.first.as_str()),
            std::ops::Bound::Included(slot.last.as_str()),
        )) {
            if let Some(l) = last {
                if l.names.binary_search(name).is_err() {
                    // Held under the previous root; left out only if it has objects.
                    let has_objects = match node {
                        Node::File(f) => f
                            .objects
                            .as_ref()
                            .is_some_and(|o| o.content.object().is_some()),
                        Node::Dir(_) => true,
                        Node::Symlink(_) => false,
                    };
                    out.pruned |= has_objects;
                    continue;
                }
            }
            let result = match node {
                Node::File(f) => match (&f.data, &f.objects) {
                    (Some(data), Some(objects)) => {
                        objects.emit(data, out);
                        Ok(())
                    }
                    (None, Some(objects)) => match objects.content.object() {
                        Some((id, _)) if out.wants(&id) => Err(CommitError::ContentNotLoaded {
                            path: super::path::join(
                                &[&path[..], std::slice::from_ref(name)].concat(),
                            ),
                            id,
                        }),
                        _ => Ok(()),
                    },
                    _ => Ok(()),
                },
                Node::Dir(d) => {
                    path.push(name.clone());
                    let r = emit_dir(d, out, epoch, path);
                    path.pop();
                    r
                }
                Node::Symlink(_) => Ok(()),
            };
            if let Err(e) = result {
                failed = Some(e);
                return;
            }
        }
    });
    failed.map_or(Ok(()), Err)
}
