//! `Workspace::checkout`: replacing the workspace with a commit, all or nothing.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::{
    path, ContentRule, DirNode, FileNode, FsError, Node, SymlinkNode, UnloadedDir, Workspace,
};
use crate::chunk::{CHUNK_MAX, CHUNK_MIN};
use crate::content::{append, copy_into, ChunkList, ContentObjects, FileBytes, Span};
use crate::drift::{DriftPolicy, Restore};
use crate::id::ObjectId;
use crate::limits::{Budget, LimitError, Limits};
use crate::object::capability::CapabilityFingerprint;
use crate::object::commit::CommitObject;
use crate::object::manifest::{chunk_list, ChunkRef, Manifest};
use crate::object::reads::{ExternalRead, ReadsObject};
use crate::object::tree::{count_kinds, Content, EntryNode, TreeNode};
use crate::object::{
    absent, check, fetch_many, load_many, load_with, Loaded, ObjectError, ObjectKind,
};
use crate::pool::{buffer_to_append, buffer_to_fill, BufferPool};
use crate::source::ObjectSource;
use crate::tree::{read_entries, Ahead, Layout};

/// How a snapshot's recorded capabilities must relate to the live workspace's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckoutPolicy {
    /// The live workspace must offer everything the snapshot's environment offered
    /// (more is fine).
    #[default]
    Superset,
    /// The live workspace must offer exactly what the snapshot's environment offered.
    Strict,
    /// Restore regardless of capabilities. Content that provably needs a missing
    /// feature (see [`Workspace::require_feature_for_prefix`]) is still refused.
    Force,
}

/// Why a checkout failed. The workspace is unchanged whenever one is returned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckoutError {
    /// An object is missing, corrupt, of the wrong kind or malformed.
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// The snapshot's environment offered things the live workspace lacks (or, under
    /// [`CheckoutPolicy::Strict`], the two differ).
    #[error("commit {commit} needs capabilities the workspace lacks: missing {missing:?}, extra {extra:?}")]
    Capabilities {
        /// The commit.
        commit: ObjectId,
        /// What the snapshot had and the workspace lacks (`builtin:x`, `feature:y`,
        /// `fs_backend:z`).
        missing: Vec<String>,
        /// Under `Strict`, what the workspace has beyond the snapshot.
        extra: Vec<String>,
    },
    /// Content in the snapshot needs a feature the live workspace lacks.
    #[error("{path} in commit {commit} needs feature {feature:?}, which the workspace lacks")]
    FeatureRequired {
        /// The commit.
        commit: ObjectId,
        /// The file (or `<state>`) whose content needs it.
        path: String,
        /// The feature.
        feature: String,
    },
    /// The snapshot holds more files, directories or bytes than the workspace's
    /// [`Limits`] allow, or a path deeper or longer than any workspace path.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// The path given to [`Workspace::load_content`] does not name a file.
    #[error(transparent)]
    Fs(#[from] FsError),
}

/// How a checkout runs: one value instead of a method per combination.
///
/// ```
/// # use snapgraph::{CheckoutOptions, CheckoutPolicy, DriftPolicy, Limits};
/// let options = CheckoutOptions::new()
///     .policy(CheckoutPolicy::Strict)
///     .drift(DriftPolicy::Off)
///     .shallow(true)
///     .limits(Limits { max_files: 10_000, ..Limits::default() });
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[must_use]
pub struct CheckoutOptions {
    policy: CheckoutPolicy,
    drift: DriftPolicy,
    shallow: bool,
    lazy: bool,
    limits: Option<Limits>,
}

impl CheckoutOptions {
    /// [`CheckoutPolicy::Superset`], [`DriftPolicy::Strict`], full, the workspace's
    /// limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// How the snapshot's recorded capabilities must relate to the workspace's.
    pub fn policy(mut self, policy: CheckoutPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Whether recorded external reads come back with a drift check.
    pub fn drift(mut self, drift: DriftPolicy) -> Self {
        self.drift = drift;
        self
    }

    /// Leave file content in the store (see
    /// [`Workspace::checkout_with`]); trees, state and reads are loaded.
    pub fn shallow(mut self, shallow: bool) -> Self {
        self.shallow = shallow;
        self
    }

    /// Leave every directory below the root in the store too (implies
    /// [`shallow`](Self::shallow)): only the commit, the root directory's tree nodes,
    /// the state and the recorded reads are read and verified; each subdirectory keeps
    /// only its tree entry (root node id, recorded totals, mode) until
    /// [`Workspace::load_dir`] reads it, so a checkout costs one directory, not the
    /// whole tree. A commit keeps an unloaded directory's entry as it was (same ids as
    /// after a full checkout; the destination must hold it, else
    /// [`CommitError::ContentNotLoaded`](crate::CommitError::ContentNotLoaded)). Paths
    /// below an unloaded directory read as [`FsError::NotLoaded`]; removing, moving or
    /// re-moding the directory itself works as usual. Off by default.
    pub fn lazy(mut self, lazy: bool) -> Self {
        self.lazy = lazy;
        self
    }

    /// Limits for this checkout instead of the workspace's (which it keeps).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }
}

/// How much of a commit a checkout reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Depth {
    /// Everything.
    Full,
    /// Trees, not the content of files ([`CheckoutOptions::shallow`]).
    Shallow,
    /// The root directory only ([`CheckoutOptions::lazy`]).
    Lazy,
}

impl Depth {
    fn of(shallow: bool, lazy: bool) -> Self {
        match (shallow, lazy) {
            (_, true) => Self::Lazy,
            (true, false) => Self::Shallow,
            (false, false) => Self::Full,
        }
    }
}

/// What a restore must make of the commit's recorded external reads.
pub(crate) struct Restored {
    pub root: Arc<DirNode>,
    pub state: FileBytes,
    pub state_objects: Arc<ContentObjects>,
    pub commit: CommitObject,
    pub reads: Vec<ExternalRead>,
}

impl Workspace {
    /// Replaces the workspace's files and state with those of commit `id`: the
    /// Bashkit-style short form of [`checkout_with`](Self::checkout_with) with
    /// `CheckoutOptions::new().policy(policy)` (full, [`DriftPolicy::Strict`], the
    /// workspace's limits).
    ///
    /// Every object is re-hashed and its kind checked before use, tree nodes are
    /// checked to be canonical, and sizes are checked against the workspace's
    /// [`Limits`] before anything is allocated. On any error the workspace is left
    /// exactly as it was. Capabilities, limits and content rules of the workspace are
    /// kept.
    ///
    /// Recorded external reads are restored too and checked under
    /// [`DriftPolicy::Strict`]: the returned [`Restore`] carries the pins and the drift
    /// check to run before first use (see [`crate::drift`]; [`Restore::verify`]
    /// drives it in one call).
    pub fn checkout<S: ObjectSource + ?Sized>(
        &mut self,
        id: ObjectId,
        source: &S,
        policy: CheckoutPolicy,
    ) -> Result<Restore, CheckoutError> {
        self.checkout_with(id, source, CheckoutOptions::new().policy(policy))
    }

    /// Checks out commit `id` as `options` say: capability policy, drift policy,
    /// shallow or full, limits.
    ///
    /// A *shallow* checkout ([`CheckoutOptions::shallow`]) leaves file content in the
    /// store. The commit, its capabilities, every tree node, the state and the
    /// recorded external reads are loaded and verified exactly as by a full checkout,
    /// and the same [`Limits`] apply (the sizes the trees record count against
    /// [`max_bytes`](Limits::max_bytes), so that loading every file later stays
    /// within them). Of each file whose bytes are not stored inline in its tree entry
    /// only the entry is kept (size, mode and content reference): no chunk or manifest
    /// object is read, so the cost is that of the tree, not of the content.
    ///
    /// Such a file is listed, moved, removed, re-moded and overwritten like any other;
    /// [`read`](Self::read) gives [`FsError::NotLoaded`] until
    /// [`load_content`](Self::load_content) fetches it. A commit keeps its tree entry as
    /// it was, so it produces the same ids as after a full checkout, and needs the
    /// destination to hold the content (else [`CommitError::ContentNotLoaded`]):
    /// commit back into the store checked out from, with
    /// [`have_in`](crate::CommitOptions::have_in). A packed snapshot needs every byte
    /// (see [`snapshot`](Self::snapshot)).
    ///
    /// Content rules ([`require_feature_for_prefix`](Self::require_feature_for_prefix))
    /// are checked against the state and inline files here, and against other files
    /// when they are loaded. The content objects of unloaded files are not checked
    /// here: a missing or corrupt one is reported when the file is loaded.
    ///
    /// ```
    /// # use snapgraph::{CheckoutOptions, CheckoutPolicy, CommitOptions, DriftPolicy, Workspace};
    /// # let mut ws = Workspace::new();
    /// # ws.write("/big.bin", vec![7u8; 100_000])?;
    /// # let c = ws.commit(CommitOptions::new())?;
    /// # let id = c.id();
    /// # let store: std::collections::HashMap<_, _> = c.into_objects().into_iter().collect();
    /// let mut tool = Workspace::new();
    /// tool.checkout_with(
    ///     id,
    ///     &store,
    ///     CheckoutOptions::new().shallow(true).drift(DriftPolicy::Off),
    /// )?
    /// .verify(|_| None)?;
    /// assert!(!tool.is_loaded("/big.bin"));
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    ///
    /// [`CommitError::ContentNotLoaded`]: crate::CommitError::ContentNotLoaded
    pub fn checkout_with<S: ObjectSource + ?Sized>(
        &mut self,
        id: ObjectId,
        source: &S,
        options: CheckoutOptions,
    ) -> Result<Restore, CheckoutError> {
        let kept = self.limits;
        if let Some(limits) = options.limits {
            self.limits = limits;
        }
        let loaded = self.load_commit_as(
            id,
            source,
            options.policy,
            true,
            Depth::of(options.shallow, options.lazy),
        );
        self.limits = kept;
        let restored = loaded?;
        let restore = Restore::new(id, &restored.reads, options.drift);
        self.apply(id, restored, &restore);
        Ok(restore)
    }

    /// Fetches and verifies the bytes of a file a
    /// [shallow checkout](Self::checkout_with) left in the store, as a full
    /// checkout would have: every object is re-hashed and its kind checked, the chunk
    /// lengths and the manifest's shape are checked against the recorded size, the
    /// size against the workspace's [`Limits`], and the bytes against the content
    /// rules. Does nothing for a file already loaded.
    ///
    /// Errors name the workspace's head as the commit. On error the file stays
    /// unloaded. The file's tree entry does not change, so nothing is marked changed.
    pub fn load_content<S: ObjectSource + ?Sized>(
        &mut self,
        path: &str,
        source: &S,
    ) -> Result<(), CheckoutError> {
        let comps = path::parse(path).map_err(FsError::from)?;
        let reference = match self.lookup(&comps)? {
            Some(Node::File(f)) => match (&f.data, &f.objects) {
                (None, Some(reference)) => reference.clone(),
                _ => return Ok(()),
            },
            // Not a file: `read` says why.
            _ => return self.read(path).map(|_| ()).map_err(Into::into),
        };
        let p = path::join(&comps);
        let commit = match (self.head, reference.content.object()) {
            (Some(head), _) => head,
            (None, Some((id, _))) => id,
            (None, None) => ObjectId::from_bytes([0; 32]),
        };
        let mut loader = self.loader(source, commit, true, Depth::Full);
        loader.budget.leaf((1, 0))?;
        loader.budget.bytes(reference.size)?;
        let (data, objects) = loader.content(&reference.content, reference.size, &p)?;
        if let Some(f) = self.file_in_place(&comps) {
            f.data = Some(data);
            f.objects = Some(objects);
        }
        Ok(())
    }

    /// Reads, verifies and puts in place every directory a
    /// [lazy checkout](CheckoutOptions::lazy) left in the store on the way to `path`,
    /// and `path` itself if it is one, as that checkout would have read it: each
    /// directory's tree nodes re-hashed, checked to be canonical, and its totals
    /// checked against its parent's entry; files stay unloaded (as after a shallow
    /// checkout) and subdirectories of the directories read stay unloaded. Stops
    /// quietly where `path` stops naming directories (a missing name, a file): the
    /// usual calls then say what is there. Nothing is marked changed, so the next
    /// commit costs only what is changed afterwards.
    ///
    /// Errors name the workspace's head as the commit; on error no file or tree
    /// entry changed (directories read before the bad one stay read).
    ///
    /// ```
    /// # use snapgraph::{CheckoutOptions, CommitOptions, DriftPolicy, FsError, Workspace};
    /// # let mut ws = Workspace::new();
    /// # ws.write("/src/lib/a.rs", b"a")?;
    /// # ws.write("/src/b.rs", b"b")?;
    /// # let c = ws.commit(CommitOptions::new())?;
    /// # let id = c.id();
    /// # let store: std::collections::HashMap<_, _> = c.into_objects().into_iter().collect();
    /// let mut tool = Workspace::new();
    /// tool.checkout_with(id, &store, CheckoutOptions::new().lazy(true).drift(DriftPolicy::Off))?
    ///     .verify(|_| None)?;
    /// assert!(matches!(tool.read("/src/b.rs"), Err(FsError::NotLoaded { .. })));
    /// tool.load_dir("/src/lib", &store)?;
    /// assert_eq!(tool.read("/src/lib/a.rs")?, b"a");
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    pub fn load_dir<S: ObjectSource + ?Sized>(
        &mut self,
        path: &str,
        source: &S,
    ) -> Result<(), CheckoutError> {
        let comps = path::parse(path).map_err(FsError::from)?;
        let commit = self.head.unwrap_or(ObjectId::from_bytes([0; 32]));
        for depth in 1..=comps.len() {
            let at = &comps[..depth];
            let (mode, unloaded) = {
                // Loaded down to `at`'s parent by the iterations before.
                let mut dir: &DirNode = &self.root;
                for name in &at[..depth - 1] {
                    match dir.entries.get(name) {
                        Some(Node::Dir(d)) => dir = d,
                        _ => return Ok(()),
                    }
                }
                match dir.entries.get(&at[depth - 1]) {
                    Some(Node::Dir(d)) => (d.mode, d.unloaded),
                    _ => return Ok(()),
                }
            };
            let Some(u) = unloaded else { continue };
            let mut loader = self.loader(source, commit, true, Depth::Lazy);
            let mut names = at.to_vec();
            loader.path_len = names.iter().map(|n| 1 + n.len()).sum();
            let mut loaded = loader.dir(u.tree, depth, &mut names)?;
            let root = loaded
                .layout
                .as_ref()
                .map(|l| (l.root().files, l.root().bytes));
            if root != Some((u.files, u.bytes)) {
                return Err(ObjectError::malformed(
                    u.tree,
                    ObjectKind::Tree,
                    format!("totals of {} do not match its tree", path::join(at)),
                )
                .into());
            }
            loaded.mode = mode;
            // In place along the path, marking nothing changed (as `file_in_place`).
            let mut dir = Arc::make_mut(&mut self.root);
            for name in &at[..depth - 1] {
                match dir.entries.get_mut(name) {
                    Some(Node::Dir(d)) => dir = Arc::make_mut(d),
                    _ => return Ok(()),
                }
            }
            if let Some(Node::Dir(d)) = dir.entries.get_mut(&at[depth - 1]) {
                *d = Arc::new(loaded);
            }
        }
        Ok(())
    }

    /// [`load_dir`](Self::load_dir) of each of `paths`, reading a level at a time:
    /// the unloaded directories at one depth of all the paths are asked of `source`
    /// in one [`ObjectSource::get_many`], where `load_dir` asks one directory a call
    /// (a listing of a directory's subdirectories, the directories of the files a
    /// checkout writes). A directory split into several tree nodes has its further
    /// nodes read as `load_dir` reads them. The workspace afterwards is the one
    /// `load_dir` of each path in turn leaves, with the same checks; an error is
    /// the first the level-by-level loads meet (the shallowest, then in the order
    /// of `paths`). Reads nothing for paths already loaded.
    ///
    /// ```
    /// # use snapgraph::{CheckoutOptions, CommitOptions, DriftPolicy, Workspace};
    /// # let mut ws = Workspace::new();
    /// # for d in ["a", "b", "c"] { ws.write(&format!("/src/{d}/f.rs"), d)?; }
    /// # let c = ws.commit(CommitOptions::new())?;
    /// # let id = c.id();
    /// # let store: std::collections::HashMap<_, _> = c.into_objects().into_iter().collect();
    /// let mut tool = Workspace::new();
    /// tool.checkout_with(id, &store, CheckoutOptions::new().lazy(true).drift(DriftPolicy::Off))?
    ///     .verify(|_| None)?;
    /// tool.load_dirs(&["/src/a", "/src/c"], &store)?;
    /// assert_eq!(tool.read("/src/c/f.rs")?, b"c");
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    pub fn load_dirs<S: ObjectSource + ?Sized>(
        &mut self,
        paths: &[&str],
        source: &S,
    ) -> Result<(), CheckoutError> {
        let parsed = paths
            .iter()
            .map(|p| path::parse(p).map_err(FsError::from))
            .collect::<Result<Vec<_>, _>>()?;
        let deepest = parsed.iter().map(Vec::len).max().unwrap_or(0);
        for depth in 1..=deepest {
            let mut ids: Vec<ObjectId> = Vec::new();
            let mut seen = hashbrown::HashSet::new();
            for comps in parsed.iter().filter(|c| c.len() >= depth) {
                if let Some(tree) = self.unloaded_tree(&comps[..depth]) {
                    if seen.insert(tree) {
                        ids.push(tree);
                    }
                }
            }
            if ids.is_empty() {
                continue;
            }
            let read = Prefetched::read(source, &ids);
            for comps in parsed.iter().filter(|c| c.len() >= depth) {
                self.load_dir(&path::join(&comps[..depth]), &read)?;
            }
        }
        Ok(())
    }

    /// The tree of the directory at `comps` when it is unloaded and every directory
    /// above it is loaded.
    fn unloaded_tree(&self, comps: &[String]) -> Option<ObjectId> {
        let (last, above) = comps.split_last()?;
        let mut dir: &DirNode = &self.root;
        for name in above {
            match dir.entries.get(name) {
                Some(Node::Dir(d)) if d.unloaded.is_none() => dir = d,
                _ => return None,
            }
        }
        match dir.entries.get(last) {
            Some(Node::Dir(d)) => d.unloaded.as_ref().map(|u| u.tree),
            _ => None,
        }
    }

    pub(crate) fn apply(&mut self, id: ObjectId, r: Restored, restore: &Restore) {
        self.root = r.root;
        self.state = r.state;
        self.state_objects = Some(r.state_objects);
        self.head = Some(id);
        Arc::make_mut(&mut self.generations).insert(id, r.commit.generation);
        self.reads = r
            .reads
            .into_iter()
            .map(|read| (read.source.clone(), read))
            .collect();
        self.stale = restore.stale().iter().cloned().collect();
    }

    /// Loads and verifies everything commit `id` needs, without touching `self`.
    /// `hash` false skips re-hashing objects: only for sources whose keys were computed
    /// from their bytes.
    pub(crate) fn load_commit<S: ObjectSource + ?Sized>(
        &self,
        id: ObjectId,
        source: &S,
        policy: CheckoutPolicy,
        hash: bool,
    ) -> Result<Restored, CheckoutError> {
        self.load_commit_as(id, source, policy, hash, Depth::Full)
    }

    /// [`load_commit`](Self::load_commit), leaving in the store what `depth` says.
    fn load_commit_as<S: ObjectSource + ?Sized>(
        &self,
        id: ObjectId,
        source: &S,
        policy: CheckoutPolicy,
        hash: bool,
        depth: Depth,
    ) -> Result<Restored, CheckoutError> {
        let commit = CommitObject::decode(
            &id,
            load_with(source, &id, ObjectKind::Commit, hash)?.body(),
        )?;
        let capabilities = match commit.capabilities {
            Some(cid) => {
                let loaded = load_with(source, &cid, ObjectKind::Capabilities, hash)?;
                Some(CapabilityFingerprint::decode(&cid, loaded.body())?)
            }
            None => None,
        };
        self.check_capabilities(id, capabilities.as_ref(), policy)?;

        let mut loader = self.loader(source, id, hash, depth);
        let root_node = loader.node(&commit.tree)?;
        let (files, bytes) = root_node.totals();
        loader.budget.claim(files, bytes)?;
        // The state is held in memory like file bytes, and counts against the same limit.
        loader.budget.bytes(commit.state_size)?;
        if depth == Depth::Lazy {
            loader.trees.refer(commit.tree);
            loader.trees.insert(commit.tree, root_node);
        } else {
            loader.read_ahead(commit.tree, root_node, &commit.state, commit.state_size);
        }
        let root = loader.dir(commit.tree, 0, &mut Vec::new())?;
        let (state, state_objects) = loader.content(&commit.state, commit.state_size, "<state>")?;
        let reads = match commit.reads {
            Some(rid) => {
                let loaded = load_with(source, &rid, ObjectKind::Reads, hash)?;
                ReadsObject::decode(&rid, loaded.body())?.0
            }
            None => Vec::new(),
        };
        Ok(Restored {
            root: Arc::new(root),
            state,
            state_objects,
            commit,
            reads,
        })
    }

    pub(super) fn loader<'a, S: ObjectSource + ?Sized>(
        &'a self,
        source: &'a S,
        commit: ObjectId,
        hash: bool,
        depth: Depth,
    ) -> Loader<'a, S> {
        Loader {
            threads: self.parallelism,
            pool: self.buffers.clone(),
            source,
            commit,
            limits: self.limits,
            budget: Budget::new(commit, self.limits),
            path_len: 0,
            hash,
            shallow: depth != Depth::Full,
            lazy: depth == Depth::Lazy,
            cache: hashbrown::HashMap::new(),
            references: hashbrown::HashMap::new(),
            trees: Ahead::default(),
            ahead: HashMap::new(),
            order: Vec::new(),
            position: hashbrown::HashMap::new(),
            rules: &self.content_rules,
            live: self.capabilities.as_deref(),
        }
    }

    fn check_capabilities(
        &self,
        commit: ObjectId,
        recorded: Option<&CapabilityFingerprint>,
        policy: CheckoutPolicy,
    ) -> Result<(), CheckoutError> {
        if policy == CheckoutPolicy::Force {
            return Ok(());
        }
        let empty = CapabilityFingerprint::default();
        let recorded = recorded.unwrap_or(&empty);
        let live = self.capabilities.as_deref().unwrap_or(&empty);
        let missing = recorded.missing_from(live);
        let extra = if policy == CheckoutPolicy::Strict {
            live.missing_from(recorded)
        } else {
            Vec::new()
        };
        if missing.is_empty() && extra.is_empty() {
            Ok(())
        } else {
            Err(CheckoutError::Capabilities {
                commit,
                missing,
                extra,
            })
        }
    }
}

/// Chunks fetched in one batched read: bounds the memory an owning source (a
/// database) holds beside the file's buffer (64 chunks of at most 64 KiB).
const CHECKOUT_WINDOW: usize = 64;

/// Files at least this large are verified (and copied) on several threads.
const PARALLEL_CHECKOUT_MIN: u64 = 1 << 20;

/// A file's bytes as its verified chunks arrive. A source that hands its buffers over
/// (`Cow::Owned`, as a store that decodes what it reads does) has them kept as the
/// file's chunk list, with no copy; lent bytes (`Cow::Borrowed`, a map's) are copied
/// once, by appending to a buffer allocated at the file's size (no zero fill; from
/// the workspace's [`BufferPool`] when one fits). Which of the two is decided by the first chunk; a lent chunk among handed-over ones is
/// copied into a part of its own, and a handed-over one among lent ones appended.
enum Assembly {
    Empty,
    Parts(Vec<(Vec<u8>, usize)>),
    Contiguous(Vec<u8>),
}

impl Assembly {
    fn new() -> Self {
        Self::Empty
    }

    /// Appends the body of chunk `stored` (verified) to content of `size` bytes.
    fn push(&mut self, stored: Cow<'_, [u8]>, size: usize, pool: Option<&BufferPool>) {
        if let Self::Empty = self {
            *self = match stored {
                Cow::Owned(_) => Self::Parts(Vec::with_capacity(size.div_ceil(CHUNK_MIN))),
                Cow::Borrowed(_) => Self::Contiguous(buffer_to_append(pool, size)),
            };
        }
        match (self, stored) {
            (Self::Parts(parts), Cow::Owned(stored)) => parts.push((stored, 2)),
            (Self::Parts(parts), Cow::Borrowed(stored)) => parts.push((stored[2..].to_vec(), 0)),
            (Self::Contiguous(data), stored) => append(data, &stored[2..]),
            (Self::Empty, _) => unreachable!("set above"),
        }
    }

    fn finish(self, pool: Option<&BufferPool>) -> FileBytes {
        match self {
            Self::Empty => FileBytes::empty(),
            Self::Parts(parts) => FileBytes::Chunks(Arc::new(ChunkList::new(parts))),
            Self::Contiguous(data) => FileBytes::pooled(data, pool),
        }
    }
}

/// The body of a stored object (its 2-byte header dropped): an owning source's
/// buffer kept (the header removed in place, no new allocation), lent bytes borrowed.
pub(super) fn body_of(stored: Cow<'_, [u8]>) -> Cow<'_, [u8]> {
    match stored {
        Cow::Owned(mut stored) => {
            stored.drain(..2);
            Cow::Owned(stored)
        }
        Cow::Borrowed(stored) => Cow::Borrowed(&stored[2..]),
    }
}

/// Checks a fetched chunk (its hash when `hash`, its header, its kind and the length
/// the manifest gives it) and returns its format version.
pub(super) fn check_chunk(
    id: &ObjectId,
    stored: &[u8],
    len: usize,
    hash: bool,
) -> Result<u8, ObjectError> {
    let (kind, version) = if hash {
        crate::object::verify(id, stored)?
    } else {
        crate::object::header(id, stored)?
    };
    if kind != ObjectKind::Chunk {
        return Err(ObjectError::WrongKind {
            id: *id,
            expected: ObjectKind::Chunk,
            actual: kind,
        });
    }
    let body = &stored[2..];
    if body.len() != len {
        return Err(ObjectError::malformed(
            *id,
            ObjectKind::Chunk,
            format!("{} bytes where the manifest says {len}", body.len()),
        ));
    }
    Ok(version)
}

/// Queues the tree nodes `node` references (index children, subdirectories) that
/// were not referenced before, counting every reference as a use.
fn below(node: &TreeNode, trees: &mut Ahead, out: &mut Vec<ObjectId>) {
    let mut refer = |id: ObjectId| {
        if trees.refer(id) {
            out.push(id);
        }
    };
    match node {
        TreeNode::Internal { children, .. } => children.iter().for_each(|c| refer(c.tree)),
        TreeNode::Leaf(entries) => {
            for e in entries {
                if let EntryNode::Dir { tree, .. } = e.node {
                    refer(tree);
                }
            }
        }
    }
}

pub(super) struct Loader<'a, S: ?Sized> {
    /// Threads a large file's chunks are verified on: the workspace's setting, which
    /// may be unset until a file large enough to split asks (see [`Loader::threads`]).
    threads: usize,
    /// Where the buffers of large files assembled from lent bytes come from.
    pool: Option<BufferPool>,
    source: &'a S,
    commit: ObjectId,
    limits: Limits,
    /// Entries, bytes and paths against `limits`: entries are charged as each leaf is
    /// decoded, before they are kept (a hostile tree can claim small totals);
    /// directories are counted apart from files, so that they do not use up the file
    /// limit, while a tree that repeats subtrees cannot make a checkout walk without
    /// end.
    pub(super) budget: Budget,
    /// Length in bytes of the path being loaded (`/` before each component).
    path_len: usize,
    /// Whether to re-hash objects read.
    hash: bool,
    /// Whether to leave content that is not inline in the store.
    shallow: bool,
    /// Whether to leave subdirectories in the store too.
    lazy: bool,
    /// Content already loaded: identical files share one buffer.
    cache: hashbrown::HashMap<Content, (FileBytes, Arc<ContentObjects>)>,
    /// Content left in the store (when `shallow`): identical files share one
    /// reference, and must agree on its size.
    references: hashbrown::HashMap<Content, Arc<ContentObjects>>,
    /// Tree nodes read ahead of the walk, a level of the whole commit per batched read.
    trees: Ahead,
    /// Content objects (single chunks, manifest roots) read ahead of the walk, a window
    /// at a time in the order the walk uses them; each is removed when used.
    ahead: HashMap<ObjectId, Cow<'a, [u8]>>,
    /// The content objects the walk will read, in its order, with their sizes.
    order: Vec<(ObjectId, u64)>,
    /// Where each content object not yet used stands in `order`.
    position: hashbrown::HashMap<ObjectId, usize>,
    rules: &'a [ContentRule],
    live: Option<&'a CapabilityFingerprint>,
}

/// Tree nodes asked for in one batched read while reading ahead.
const AHEAD_TREES: usize = 4096;
/// Content objects asked for in one batched read while reading ahead, at most, and the
/// bytes they may hold together (as their entries record them): bounds what an owning
/// source holds beside the files being assembled.
const AHEAD_CONTENTS: usize = 1024;
const AHEAD_BYTES: u64 = 8 << 20;

impl<'a, S: ObjectSource + ?Sized> Loader<'a, S> {
    /// The threads a large file is verified on, the default resolved on first use.
    fn threads(&self) -> usize {
        super::resolve_parallelism(self.threads)
    }

    fn node(&self, id: &ObjectId) -> Result<TreeNode, ObjectError> {
        let loaded = load_with(self.source, id, ObjectKind::Tree, self.hash)?;
        TreeNode::decode(id, loaded.body())
    }

    /// Reads the tree below `root` (whose node was read) ahead of the walk, one level
    /// of the whole commit per batched read, so that a source with per-call latency
    /// costs round trips proportional to the tree's depth; then, unless shallow, lists
    /// the content objects the walk will read (the state's last), in its order, for
    /// [`load_ahead`](Self::load_ahead). Reading ahead stops quietly at anything
    /// wrong (a batch error, a missing or bad node, more items than the limits let a
    /// checkout read): the walk then reads that node itself and reports it.
    fn read_ahead(
        &mut self,
        root: ObjectId,
        root_node: TreeNode,
        state: &Content,
        state_size: u64,
    ) {
        let budget = self.limits.max_files.saturating_mul(2).saturating_add(64);
        let mut items = 0u64;
        let mut frontier = Vec::new();
        self.trees.refer(root);
        below(&root_node, &mut self.trees, &mut frontier);
        self.trees.insert(root, root_node);
        'levels: while !frontier.is_empty() {
            let mut next = Vec::new();
            for batch in frontier.chunks(AHEAD_TREES) {
                let Ok(answers) = fetch_many(self.source, batch) else {
                    break 'levels;
                };
                for (id, stored) in batch.iter().zip(answers) {
                    let Some(stored) = stored else { continue };
                    let Ok(loaded) = check(id, stored, ObjectKind::Tree, self.hash) else {
                        continue;
                    };
                    let Ok(node) = TreeNode::decode(id, loaded.body()) else {
                        continue;
                    };
                    items = items.saturating_add(match &node {
                        TreeNode::Leaf(e) => e.len() as u64,
                        TreeNode::Internal { children, .. } => children.len() as u64,
                    });
                    if items > budget {
                        break 'levels;
                    }
                    below(&node, &mut self.trees, &mut next);
                    self.trees.insert(*id, node);
                }
            }
            frontier = next;
        }
        if self.shallow {
            return;
        }
        // The walk's order: a directory's entries by name, a subdirectory's whole
        // content before the next entry; each node expanded once.
        enum Step {
            Node(ObjectId),
            Content(ObjectId, u64),
        }
        let mut expanded = std::collections::HashSet::new();
        let mut stack = vec![Step::Node(root)];
        while let Some(step) = stack.pop() {
            match step {
                Step::Content(id, size) => self.plan(id, size),
                Step::Node(id) => {
                    if !expanded.insert(id) {
                        continue;
                    }
                    match self.trees.get(&id) {
                        None => {}
                        Some(TreeNode::Internal { children, .. }) => {
                            stack.extend(children.iter().rev().map(|c| Step::Node(c.tree)))
                        }
                        Some(TreeNode::Leaf(entries)) => {
                            stack.extend(entries.iter().rev().filter_map(|e| match &e.node {
                                EntryNode::Dir { tree, .. } => Some(Step::Node(*tree)),
                                EntryNode::File { content, size } => {
                                    content.object().map(|(id, _)| Step::Content(id, *size))
                                }
                                EntryNode::Symlink { .. } => None,
                            }))
                        }
                    }
                }
            }
        }
        if let Some((id, _)) = state.object() {
            self.plan(id, state_size);
        }
        // The whole walk's content, announced once: a remote source may fetch it in
        // one wave and hand it out as the windows below ask (ObjectSource::will_read).
        if !self.order.is_empty() {
            let ids: Vec<ObjectId> = self.order.iter().map(|(id, _)| *id).collect();
            self.source.will_read(&ids);
        }
    }

    /// Appends a content object to the walk's order, once.
    fn plan(&mut self, id: ObjectId, size: u64) {
        if !self.position.contains_key(&id) {
            self.position.insert(id, self.order.len());
            self.order.push((id, size));
        }
    }

    /// The stored bytes of `ids` (not verified yet), in order, `None` where the source
    /// lacks one: those read ahead, the rest in one batched read. When the first is
    /// planned but not read yet, the next window of the walk's order is read from it on
    /// first; of each single-node manifest read ahead, the chunks are planned right
    /// away (appended to the order, so they are read a window at a time too).
    fn fetch_ahead(&mut self, ids: &[ObjectId]) -> Result<Vec<Option<Cow<'a, [u8]>>>, ObjectError> {
        if let Some(&at) = ids.first().and_then(|id| self.position.get(id)) {
            if !self.ahead.contains_key(&ids[0]) {
                self.fill(at);
            }
        }
        let mut out: Vec<Option<Cow<'a, [u8]>>> = Vec::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            self.position.remove(id);
            match self.ahead.remove(id) {
                Some(stored) => out.push(Some(stored)),
                // The same id earlier in this batch (a file repeating a chunk).
                None => out.push(
                    ids[..i]
                        .iter()
                        .position(|p| p == id)
                        .and_then(|p| out[p].clone()),
                ),
            }
        }
        let absent = absent(ids, &out);
        let mut read = fetch_many(self.source, &absent)?.into_iter();
        for slot in out.iter_mut().filter(|o| o.is_none()) {
            *slot = read.next().flatten();
        }
        Ok(out)
    }

    /// Reads the window of the walk's order that starts at `at`: at most
    /// [`AHEAD_CONTENTS`] objects or [`AHEAD_BYTES`] bytes, skipping those used or read
    /// already. A failed batch reads nothing (each object is then read when used, and
    /// its error reported).
    fn fill(&mut self, at: usize) {
        let (mut ids, mut bytes) = (Vec::new(), 0u64);
        for (next, size) in &self.order[at..] {
            if ids.len() == AHEAD_CONTENTS || bytes >= AHEAD_BYTES {
                break;
            }
            if self.position.contains_key(next) && !self.ahead.contains_key(next) {
                ids.push(*next);
                bytes = bytes.saturating_add((*size).min(CHUNK_MAX as u64));
            }
        }
        let Ok(answers) = fetch_many(self.source, &ids) else {
            return;
        };
        let mut chunks = Vec::new();
        for (next, stored) in ids.into_iter().zip(answers) {
            let Some(stored) = stored else { continue };
            if stored.first() == Some(&ObjectKind::Manifest.byte()) {
                if let Ok(Manifest::Leaf(list)) = Manifest::decode(&next, &stored[2..]) {
                    chunks.extend(list);
                }
            }
            self.ahead.insert(next, stored);
        }
        if !chunks.is_empty() {
            let ids: Vec<ObjectId> = chunks.iter().map(|c| c.id).collect();
            self.source.will_read(&ids);
        }
        for c in chunks {
            self.plan(c.id, u64::from(c.len));
        }
    }

    /// A content object (a single chunk or a manifest root) of the expected kind,
    /// verified, through [`fetch_ahead`](Self::fetch_ahead).
    pub(super) fn load_ahead(
        &mut self,
        id: &ObjectId,
        kind: ObjectKind,
    ) -> Result<Loaded<'a>, ObjectError> {
        let stored = self
            .fetch_ahead(std::slice::from_ref(id))?
            .pop()
            .flatten()
            .ok_or(ObjectError::NotFound { id: *id })?;
        check(id, stored, kind, self.hash)
    }

    fn dir(
        &mut self,
        id: ObjectId,
        depth: usize,
        path: &mut Vec<String>,
    ) -> Result<DirNode, CheckoutError> {
        // `depth` is the number of components of this directory's path, which a
        // workspace path may have up to MAX_DEPTH of.
        self.budget.path(depth, 0, || path::join(path))?;
        let (source, hash, budget) = (self.source, self.hash, &mut self.budget);
        let entries = read_entries(source, id, &mut self.trees, hash, &mut |leaf| {
            budget.leaf(count_kinds(leaf)).map_err(CheckoutError::from)
        })?;
        let layout = Layout::canonical(id, &entries)?;
        if self.shallow {
            // One reference a file at most: grown once, not by doubling as a wide
            // directory's entries arrive.
            self.references.reserve(entries.len());
        }
        let mut out: BTreeMap<String, Node> = BTreeMap::new();
        for e in entries {
            path.push(e.name.clone());
            let len = 1 + e.name.len();
            self.path_len += len;
            // Every path a checkout creates must be one the workspace can name.
            self.budget
                .path(path.len(), self.path_len, || path::join(path))?;
            let node = match e.node {
                EntryNode::File { size, content } => {
                    self.budget.bytes(size)?;
                    if self.shallow && !matches!(content, Content::Inline(_)) {
                        let objects = self.reference(content, size, path)?;
                        Node::File(FileNode {
                            data: None,
                            mode: e.mode,
                            objects: Some(objects),
                            prev: None,
                        })
                    } else {
                        let p = path::join(path);
                        let (data, objects) = self.content(&content, size, &p)?;
                        Node::File(FileNode {
                            data: Some(data),
                            mode: e.mode,
                            objects: Some(objects),
                            prev: None,
                        })
                    }
                }
                EntryNode::Dir { tree, files, bytes } if self.lazy => {
                    let at = UnloadedDir { tree, files, bytes };
                    Node::Dir(Arc::new(DirNode::unloaded(e.mode, at)))
                }
                EntryNode::Dir { tree, files, bytes } => {
                    let mut d = self.dir(tree, depth + 1, path)?;
                    let root = d.layout.as_ref().map(|l| (l.root().files, l.root().bytes));
                    if root != Some((files, bytes)) {
                        return Err(ObjectError::malformed(
                            id,
                            ObjectKind::Tree,
                            format!("totals of {:?} do not match its tree", e.name),
                        )
                        .into());
                    }
                    d.mode = e.mode;
                    Node::Dir(Arc::new(d))
                }
                EntryNode::Symlink { target } => Node::Symlink(SymlinkNode {
                    target,
                    mode: e.mode,
                }),
            };
            path.pop();
            self.path_len -= len;
            out.insert(e.name, node);
        }
        Ok(DirNode {
            mode: super::DEFAULT_DIR_MODE,
            entries: out,
            layout: Some(Arc::new(layout)),
            dirty: BTreeSet::new(),
            last: None,
            unloaded: None,
        })
    }

    /// The reference kept for content left in the store. Entries naming the same
    /// object must agree on its size, as a full checkout requires.
    fn reference(
        &mut self,
        content: Content,
        size: u64,
        path: &[String],
    ) -> Result<Arc<ContentObjects>, CheckoutError> {
        if let Some(known) = self.references.get(&content) {
            if known.size != size {
                if let Some((id, kind)) = content.object() {
                    return Err(ObjectError::malformed(
                        id,
                        kind,
                        format!(
                            "{} says {size} bytes where another entry says {}",
                            path::join(path),
                            known.size
                        ),
                    )
                    .into());
                }
            }
            return Ok(known.clone());
        }
        let objects = Arc::new(ContentObjects::reference(size, content.clone()));
        self.references.insert(content, objects.clone());
        Ok(objects)
    }

    /// Loads content of `size` bytes, verifying every chunk and the manifest's shape.
    /// Identical content is loaded once and shared.
    fn content(
        &mut self,
        content: &Content,
        size: u64,
        path: &str,
    ) -> Result<(FileBytes, Arc<ContentObjects>), CheckoutError> {
        if let Some((data, objects)) = self.cache.get(content) {
            // The same object was loaded for another entry: it must be as long as this
            // entry says too, or the tree would restore to bytes it does not describe.
            if data.len() as u64 != size {
                if let Some((id, kind)) = content.object() {
                    return Err(ObjectError::malformed(
                        id,
                        kind,
                        format!("{} bytes where {path} says {size}", data.len()),
                    )
                    .into());
                }
            }
            let hit = (data.clone(), objects.clone());
            self.check_rules(&hit.0, path)?;
            return Ok(hit);
        }
        let (data, objects) = match content {
            Content::Inline(bytes) => {
                let objects = ContentObjects::build(bytes);
                (FileBytes::from(bytes.clone()), objects)
            }
            Content::Chunk(id) => {
                let loaded = self.load_ahead(id, ObjectKind::Chunk)?;
                let body = loaded.body();
                if body.len() as u64 != size {
                    return Err(ObjectError::malformed(
                        *id,
                        ObjectKind::Chunk,
                        format!("{} bytes where the entry says {size}", body.len()),
                    )
                    .into());
                }
                let spans = vec![Span {
                    id: *id,
                    start: 0,
                    len: body.len() as u32,
                    version: loaded.stored[1],
                }];
                // An owning source gave its bytes away: its buffer is kept.
                let data = body_of(loaded.stored).into_owned();
                (
                    FileBytes::from(data),
                    ContentObjects::from_spans(size, spans),
                )
            }
            Content::Manifest(root) => self.manifest(*root, size)?,
        };
        self.check_rules(&data, path)?;
        let objects = Arc::new(objects);
        if !matches!(content, Content::Inline(_)) {
            self.cache
                .insert(content.clone(), (data.clone(), objects.clone()));
        }
        Ok((data, objects))
    }

    fn manifest(
        &mut self,
        root: ObjectId,
        size: u64,
    ) -> Result<(FileBytes, ContentObjects), CheckoutError> {
        // The root was read ahead with the walk's other content; each lower level is
        // one batched read. `chunk_list` checks the structure (levels, sizes, the
        // chunk count a file of `size` bytes can have, short chunks, at least two).
        let chunks = self.chunk_refs(root, size)?;
        // More than one window: announce every chunk the windows will ask for, so a
        // remote source can stream them in one wave (ObjectSource::will_read).
        if chunks.len() > CHECKOUT_WINDOW {
            let ids: Vec<ObjectId> = chunks
                .iter()
                .map(|c| c.id)
                .filter(|id| !self.ahead.contains_key(id))
                .collect();
            self.source.will_read(&ids);
        }
        // Sizes were checked against the budget by the caller and sum to `size`.
        let (data, versions) = if size >= PARALLEL_CHECKOUT_MIN && self.threads() > 1 {
            self.assemble_parallel(&chunks, size as usize)?
        } else {
            self.assemble(&chunks, size as usize)?
        };
        let spans = crate::content::spans_of(&chunks, &versions);
        // A manifest's nodes are all of its root's format version (its chunks may be
        // older).
        let objects = ContentObjects::canonical(root, size, &spans)?;
        Ok((data, objects))
    }

    /// The bytes of a file of `size` bytes made of `chunks`, fetched a window at a
    /// time, each chunk verified and then kept (handed over) or copied (lent) on the
    /// calling thread; and each chunk's format version.
    fn assemble(
        &mut self,
        chunks: &[ChunkRef],
        size: usize,
    ) -> Result<(FileBytes, Vec<u8>), CheckoutError> {
        let mut data = Assembly::new();
        let mut versions = Vec::with_capacity(chunks.len());
        for window in chunks.chunks(CHECKOUT_WINDOW) {
            // One batched read per window (ObjectSource::get_many).
            for (c, stored) in window.iter().zip(self.fetch_window(window)?) {
                versions.push(check_chunk(&c.id, &stored, c.len as usize, self.hash)?);
                data.push(stored, size, self.pool.as_ref());
            }
        }
        Ok((data.finish(self.pool.as_ref()), versions))
    }

    /// [`assemble`](Self::assemble) on `threads` threads, started once for the file:
    /// the calling thread fetches each window (the source need not be shareable
    /// between threads) and splits it into one run per thread, the calling thread's
    /// (the last) a sixteenth smaller than an equal share for the fetching and
    /// bookkeeping it does besides; each thread verifies its run and, for lent bytes,
    /// copies it straight into its place in the file's buffer (allocated once at the
    /// file's size). A static split, not a queue the threads take from: the same for
    /// every run, so that the instruction-count harness, which runs one thread at a
    /// time, counts each thread's share as it is on cores. Handed-
    /// over chunks are kept as the file's chunk list. The error reported is that of
    /// the first bad chunk in order (a fetch error after those of earlier windows).
    fn assemble_parallel(
        &mut self,
        chunks: &[ChunkRef],
        size: usize,
    ) -> Result<(FileBytes, Vec<u8>), CheckoutError> {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::mpsc;
        let threads = self.threads();
        let hash = self.hash;
        let pool = self.pool.clone();
        let first = self.fetch_window(&chunks[..chunks.len().min(CHECKOUT_WINDOW)])?;
        // Lent bytes (a map's) are copied into one buffer of the file's size, from
        // the workspace's pool when one fits (touched before: no faults), else zeroed
        // by the allocator (fresh pages from the kernel for a large file: no fill),
        // each thread copying, and so faulting in, its own parts of it; handed-over
        // ones are kept as they are.
        let lent = matches!(first.first(), Some(Cow::Borrowed(_)));
        let mut buffer = if lent {
            buffer_to_fill(pool.as_ref(), size)
        } else {
            Vec::new()
        };
        let failed = AtomicBool::new(false);
        // One run: its chunks (id, stored bytes, length) and where their bodies go.
        type Run<'s, 'b> = (Vec<(ObjectId, Cow<'s, [u8]>, usize)>, Option<&'b mut [u8]>);
        // What a run gives back: its versions, and the chunks it did not copy.
        type Done<'s> = Result<(Vec<u8>, Vec<Cow<'s, [u8]>>), ObjectError>;
        let verify_run = |(run, mut to): Run<'a, '_>| -> Done<'a> {
            let mut versions = Vec::with_capacity(run.len());
            let mut kept = Vec::new();
            let mut at = 0;
            for (id, stored, len) in run {
                versions.push(check_chunk(&id, &stored, len, hash).inspect_err(|_| {
                    failed.store(true, Ordering::Relaxed);
                })?);
                match to.as_deref_mut() {
                    Some(to) => copy_into(&mut to[at..at + len], &stored[2..]),
                    None => kept.push(stored),
                }
                at += len;
            }
            Ok((versions, kept))
        };
        let (kept, versions) = std::thread::scope(|scope| {
            let (done_tx, done_rx) = mpsc::channel::<(usize, Done<'a>)>();
            let mut workers = Vec::with_capacity(threads - 1);
            for _ in 1..threads {
                let (tx, rx) = mpsc::channel::<(usize, Run<'a, '_>)>();
                let done = done_tx.clone();
                let verify_run = &verify_run;
                scope.spawn(move || {
                    for (seq, run) in rx {
                        if done.send((seq, verify_run(run))).is_err() {
                            break;
                        }
                    }
                });
                workers.push(tx);
            }
            drop(done_tx);
            let mut results: Vec<Option<Done<'a>>> = Vec::new();
            let mut rest: &mut [u8] = &mut buffer;
            let mut fetch_error = None;
            let mut next = Some(first);
            for window in chunks.chunks(CHECKOUT_WINDOW) {
                if failed.load(Ordering::Relaxed) {
                    break;
                }
                let answers = match next.take() {
                    Some(answers) => answers,
                    None => match self.fetch_window(window) {
                        Ok(answers) => answers,
                        Err(e) => {
                            fetch_error = Some(e);
                            break;
                        }
                    },
                };
                // Split the window into `threads` runs: the others' of about equal
                // bytes, the calling thread's (the last) what remains.
                let bytes: usize = window.iter().map(|c| c.len as usize).sum();
                let own_share = bytes / threads * 15 / 16;
                let share = (bytes - own_share).div_ceil(threads - 1);
                let mut runs: Vec<Run<'a, '_>> = Vec::with_capacity(threads);
                let mut run = Vec::new();
                let mut run_bytes = 0;
                let last = window.len() - 1;
                for (i, (c, stored)) in window.iter().zip(answers).enumerate() {
                    run.push((c.id, stored, c.len as usize));
                    run_bytes += c.len as usize;
                    if (run_bytes >= share && runs.len() + 1 < threads) || i == last {
                        let to = if lent {
                            let (head, tail) = std::mem::take(&mut rest).split_at_mut(run_bytes);
                            rest = tail;
                            Some(head)
                        } else {
                            None
                        };
                        runs.push((std::mem::take(&mut run), to));
                        run_bytes = 0;
                    }
                }
                // The calling thread's run is the last (when the window has fewer
                // chunks than threads, all are the others').
                let own = (runs.len() == threads).then(|| runs.pop()).flatten();
                for (worker, run) in workers.iter().cycle().zip(runs) {
                    let seq = results.len();
                    results.push(None);
                    if let Err(mpsc::SendError((_, run))) = worker.send((seq, run)) {
                        // The worker is gone (it panicked: resumed at the scope's end).
                        results[seq] = Some(verify_run(run));
                    }
                }
                if let Some(run) = own {
                    results.push(Some(verify_run(run)));
                }
            }
            drop(workers);
            for (seq, done) in done_rx {
                results[seq] = Some(done);
            }
            let mut data = Assembly::new();
            let mut versions = Vec::with_capacity(chunks.len());
            for done in results {
                // A run is missing only if its worker panicked, resumed right after.
                let Some(done) = done else { continue };
                let (v, kept) = done?;
                versions.extend(v);
                for stored in kept {
                    data.push(stored, size, pool.as_ref());
                }
            }
            match fetch_error {
                Some(e) => Err(e),
                None => Ok((data, versions)),
            }
        })?;
        let data = if lent {
            FileBytes::pooled(buffer, pool.as_ref())
        } else {
            kept.finish(pool.as_ref())
        };
        Ok((data, versions))
    }

    /// The chunk list of the manifest rooted at `root` for a file of `size` bytes: the
    /// root read ahead with the walk's other content, each lower level one batched
    /// read, every node verified; `chunk_list` checks the structure (levels, sizes,
    /// the chunk count a file of `size` bytes can have, short chunks, at least two).
    pub(super) fn chunk_refs(
        &mut self,
        root: ObjectId,
        size: u64,
    ) -> Result<Vec<ChunkRef>, ObjectError> {
        chunk_list::<ObjectError>(root, size, &mut |ids| {
            let loaded = match ids {
                [only] => vec![self.load_ahead(only, ObjectKind::Manifest)?],
                _ => load_many(self.source, ids, ObjectKind::Manifest, self.hash)?,
            };
            ids.iter()
                .zip(loaded)
                .map(|(id, l)| Manifest::decode(id, l.body()))
                .collect()
        })
    }

    /// The stored bytes of a window of chunks, in one batched read: each present.
    pub(super) fn fetch_window(
        &mut self,
        window: &[ChunkRef],
    ) -> Result<Vec<Cow<'a, [u8]>>, CheckoutError> {
        let ids: Vec<ObjectId> = window.iter().map(|c| c.id).collect();
        self.fetch_ahead(&ids)?
            .into_iter()
            .zip(window)
            .map(|(stored, c)| stored.ok_or(ObjectError::NotFound { id: c.id }.into()))
            .collect()
    }

    fn check_rules(&self, data: &FileBytes, path: &str) -> Result<(), CheckoutError> {
        for rule in self.rules {
            if data.starts_with(&rule.prefix)
                && !self
                    .live
                    .is_some_and(|l| l.features.contains(&rule.feature))
            {
                return Err(CheckoutError::FeatureRequired {
                    commit: self.commit,
                    path: path.to_owned(),
                    feature: rule.feature.clone(),
                });
            }
        }
        Ok(())
    }
}

/// Objects read ahead in one [`ObjectSource::get_many`], lent to every read of them
/// (directories of equal content share a tree); what it lacks (a node it was not
/// given, or all of them when the batched read failed: each read then meets the
/// error itself, in its context) is asked of the source. The engine verifies what
/// it is handed, as from any source.
struct Prefetched<'s, S: ?Sized> {
    source: &'s S,
    held: HashMap<ObjectId, Vec<u8>>,
}

impl<'s, S: ObjectSource + ?Sized> Prefetched<'s, S> {
    fn read(source: &'s S, ids: &[ObjectId]) -> Self {
        let mut held = HashMap::new();
        if let Ok(got) = source.get_many(ids) {
            if got.len() == ids.len() {
                for (id, bytes) in ids.iter().zip(got) {
                    if let Some(b) = bytes {
                        held.insert(*id, b.into_owned());
                    }
                }
            }
        }
        Self { source, held }
    }
}

impl<S: ObjectSource + ?Sized> ObjectSource for Prefetched<'_, S> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, crate::BoxError> {
        match self.held.get(id) {
            Some(b) => Ok(Some(Cow::Borrowed(b))),
            None => self.source.get(id),
        }
    }

    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Cow<'_, [u8]>>>, crate::BoxError> {
        let mut out: Vec<Option<Cow<'_, [u8]>>> = ids
            .iter()
            .map(|id| self.held.get(id).map(|b| Cow::Borrowed(&b[..])))
            .collect();
        let absent = crate::object::absent(ids, &out);
        if !absent.is_empty() {
            let mut read = self.source.get_many(&absent)?.into_iter();
            for slot in out.iter_mut().filter(|o| o.is_none()) {
                *slot = read.next().flatten();
            }
        }
        Ok(out)
    }
}
