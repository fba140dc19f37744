//! The in-memory workspace: a small file system with history.
//!
//! A [`Workspace`] holds files, directories and symlinks in memory, plus opaque state
//! bytes. Beside each file it keeps the objects its bytes were last stored as, and
//! beside each directory its encoded tree nodes and the set of names changed since, so
//! a commit re-chunks only files written since the last commit or checkout and
//! re-encodes only tree nodes on changed paths. Cloning a workspace is O(1): files and
//! directories are shared until one side writes to them.
//!
//! ## Shallow checkout
//!
//! [`Workspace::checkout_with`] with [`CheckoutOptions::shallow`] restores a commit's directories, symlinks, modes,
//! state and small (inline) files, but leaves every other file's bytes in the store:
//! such a file keeps only its tree entry (size, mode, content reference), and no chunk
//! or manifest object is read. Its cost is that of the tree nodes, whatever the size
//! of the content, and the same limits and checks apply as to a full checkout.
//! Listing, metadata, moving, removing, changing modes and overwriting work as usual;
//! [`Workspace::read`] gives [`FsError::NotLoaded`] until
//! [`Workspace::load_content`] fetches and verifies that one file. A commit re-uses the
//! tree entries of unchanged files, so it has the same id as after a full checkout and
//! reads nothing but what changed; it needs the destination to hold the content it
//! cannot emit (commit with [`have_in`](CommitOptions::have_in) the store checked out
//! from), and fails with [`CommitError::ContentNotLoaded`] otherwise. Packed snapshots
//! need every byte ([`Workspace::snapshot`]).

pub mod checkout;
pub mod commit;
pub mod pieces;
pub use crate::path;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub use crate::path::PathError;
pub use checkout::{CheckoutError, CheckoutOptions, CheckoutPolicy};
pub use commit::{Commit, CommitError, CommitOptions};
pub use pieces::{Pieces, PIECES_WINDOW};

use crate::content::{ContentObjects, FileBytes, Previous};
use crate::id::ObjectId;
use crate::limits::{check_symlink_target, Limits};
use crate::object::capability::CapabilityFingerprint;
use crate::object::reads::ExternalRead;
use crate::pool::BufferPool;
use crate::tree::Layout;

/// Most threads a commit uses.
const MAX_PARALLELISM: usize = 8;

/// Whether this target can spawn threads: `wasm32` without the `atomics` target
/// feature (`wasm32-unknown-unknown`, `wasm32-wasip1`) cannot, so every workspace
/// there runs on the calling thread whatever [`Workspace::set_parallelism`] is given.
const HAS_THREADS: bool = !cfg!(all(target_family = "wasm", not(target_feature = "atomics")));

/// Default mode of a new file.
pub const DEFAULT_FILE_MODE: u32 = 0o644;
/// Default mode of a new directory.
pub const DEFAULT_DIR_MODE: u32 = 0o755;
/// Mode of a new symlink.
pub const DEFAULT_SYMLINK_MODE: u32 = 0o777;

pub use crate::object::tree::EntryKind;

/// What [`Workspace::metadata`] tells about a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// What it is.
    pub kind: EntryKind,
    /// Permission bits.
    pub mode: u32,
    /// File length, number of entries of a directory, or symlink target length. A
    /// directory a [lazy checkout](crate::CheckoutOptions::lazy) left unloaded
    /// lists with size 0 in its parent's [`Workspace::list`] (its entries are not
    /// known until [`Workspace::load_dir`] reads it; [`Workspace::metadata`] of it
    /// is [`FsError::NotLoaded`]).
    pub size: u64,
}

/// One entry of [`Workspace::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name.
    pub name: String,
    /// Its metadata.
    pub metadata: Metadata,
}

/// Why a file-system operation failed. Every variant names the path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FsError {
    /// The path is malformed.
    #[error(transparent)]
    InvalidPath(#[from] PathError),
    /// Nothing exists at the path.
    #[error("{path}: no such file or directory")]
    NotFound {
        /// The path.
        path: String,
    },
    /// A component of the path is not a directory.
    #[error("{path}: not a directory")]
    NotADirectory {
        /// The component that is not a directory.
        path: String,
    },
    /// The path is a directory where a file was needed.
    #[error("{path}: is a directory")]
    IsADirectory {
        /// The path.
        path: String,
    },
    /// The path is a symlink where a file was needed (symlinks are never followed).
    #[error("{path}: is a symlink")]
    IsASymlink {
        /// The path.
        path: String,
    },
    /// The path is not a symlink where one was needed.
    #[error("{path}: not a symlink")]
    NotASymlink {
        /// The path.
        path: String,
    },
    /// Something already exists at the path.
    #[error("{path}: already exists")]
    AlreadyExists {
        /// The path.
        path: String,
    },
    /// The operation cannot apply to the root directory.
    #[error("{op}: not allowed on /")]
    Root {
        /// The operation.
        op: &'static str,
    },
    /// A directory cannot move below itself.
    #[error("cannot move {from} into itself ({to})")]
    IntoItself {
        /// The source.
        from: String,
        /// The destination.
        to: String,
    },
    /// A mode with bits beyond `0o7777`.
    #[error("{path}: mode {mode:o} is out of range (0 to 7777)")]
    InvalidMode {
        /// The path.
        path: String,
        /// The mode given.
        mode: u32,
    },
    /// A symlink target that is empty, too long or contains NUL.
    #[error("{path}: invalid symlink target: {reason}")]
    InvalidTarget {
        /// The symlink's path.
        path: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The file's bytes were left in the store by a
    /// [shallow checkout](Workspace::checkout_with): fetch them with
    /// [`Workspace::load_content`] first. Also a directory a lazy checkout
    /// ([`CheckoutOptions::lazy`](crate::CheckoutOptions::lazy)) left in the store,
    /// met on the way to a path, listed or asked for its metadata: read it with
    /// [`Workspace::load_dir`] first.
    #[error("{path}: content not loaded (shallow checkout)")]
    NotLoaded {
        /// The file, or the unloaded directory.
        path: String,
    },
}

/// One file.
///
/// A file a shallow checkout left in the store has `data` `None` and `objects` a
/// reference (`ContentObjects::reference`: size and content root, no chunk spans or
/// manifest nodes), and no `prev`. Every other file has its bytes.
#[derive(Debug, Clone)]
pub(crate) struct FileNode {
    /// The bytes; `None` while unloaded.
    pub data: Option<FileBytes>,
    pub mode: u32,
    /// The objects `data` is stored as, once computed; `None` after a write. Always
    /// set (to a reference) while `data` is `None`.
    pub objects: Option<Arc<ContentObjects>>,
    /// After a write over a large committed file: its previous bytes and objects, so
    /// the commit re-chunks only the changed region (see `ContentObjects::rebuild`).
    /// After a `write` that built the objects as it copied: `data` itself and those
    /// objects (the rebuild of the same bytes is the objects, without a compare).
    pub prev: Option<Arc<Previous>>,
}

impl CapabilityFingerprint {
    /// Reads the fingerprint a workspace was given, if any.
    pub fn capture(ws: &Workspace) -> Option<Self> {
        ws.capabilities().cloned()
    }
}

impl FileNode {
    /// The previous version worth keeping when this file is overwritten with `len` bytes:
    /// both large and the old objects known.
    /// A file a shallow or lazy checkout left unloaded has no previous bytes: its
    /// reference is kept (no bytes, no chunk spans), and a commit given the store
    /// reads that version's chunk list to hash the chunks the new bytes still hold
    /// instead of cutting them (`Workspace::resolve_over`); without the store, its
    /// new objects are cut from scratch (the same ids, by construction).
    pub(crate) fn reusable(&self, len: usize) -> Option<Arc<Previous>> {
        if len < crate::content::REUSE_MIN {
            return None;
        }
        let Some(old) = self.data.as_ref() else {
            return match &self.objects {
                Some(reference)
                    if matches!(reference.content, crate::object::tree::Content::Manifest(_))
                        && reference.size >= crate::content::REUSE_MIN as u64 =>
                {
                    Some(Arc::new((FileBytes::empty(), Arc::clone(reference))))
                }
                _ => None,
            };
        };
        if old.len() < crate::content::REUSE_MIN {
            return None;
        }
        match (&self.objects, &self.prev) {
            (Some(objects), _) => Some(Arc::new((old.clone(), objects.clone()))),
            // Written twice since the last commit: the committed version still helps.
            (None, Some(prev)) => Some(prev.clone()),
            (None, None) => None,
        }
    }

    /// Its length in bytes (from its tree entry while unloaded).
    pub fn size(&self) -> u64 {
        match (&self.data, &self.objects) {
            (Some(data), _) => data.len() as u64,
            (None, Some(objects)) => objects.size,
            // Never constructed: an unloaded file keeps its reference.
            (None, None) => 0,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct SymlinkNode {
    pub target: String,
    pub mode: u32,
}

#[derive(Debug, Clone)]
pub(crate) enum Node {
    File(FileNode),
    Dir(Arc<DirNode>),
    Symlink(SymlinkNode),
}

impl Node {
    fn metadata(&self) -> Metadata {
        match self {
            Node::File(f) => Metadata {
                kind: EntryKind::File,
                mode: f.mode,
                size: f.size(),
            },
            // An unloaded directory's entries are not known: 0.
            Node::Dir(d) => Metadata {
                kind: EntryKind::Dir,
                mode: d.mode,
                size: d.entries.len() as u64,
            },
            Node::Symlink(s) => Metadata {
                kind: EntryKind::Symlink,
                mode: s.mode,
                size: s.target.len() as u64,
            },
        }
    }
}

/// One directory. `layout` is its tree as of the last commit or checkout, and
/// `dirty` the names whose entries changed since; the directory is clean (its root id
/// is `layout`'s) exactly when `layout` is set and `dirty` is empty.
#[derive(Debug, Clone)]
pub(crate) struct DirNode {
    pub mode: u32,
    pub entries: BTreeMap<String, Node>,
    pub layout: Option<Arc<Layout>>,
    pub dirty: BTreeSet<String>,
    /// What the latest commit that touched this directory changed in it.
    pub last: Option<Arc<LastCommit>>,
    /// Set for a directory a lazy checkout left in the store (see
    /// [`CheckoutOptions::lazy`](checkout::CheckoutOptions::lazy)): its tree entry as
    /// the parent's tree recorded it; `entries` and `layout` are then empty until
    /// [`Workspace::load_dir`] reads it.
    pub unloaded: Option<UnloadedDir>,
}

/// The tree entry of a directory left in the store: what its parent's commit needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UnloadedDir {
    /// Its root node.
    pub tree: ObjectId,
    /// Files below it, as recorded.
    pub files: u64,
    /// Bytes below it, as recorded.
    pub bytes: u64,
}

/// What one commit changed in a directory, for its emission: if the destination
/// holds the directory's previous root, everything that commit did not change is held.
#[derive(Debug)]
pub(crate) struct LastCommit {
    /// The commit's epoch (unique per commit in the process).
    pub epoch: u64,
    /// The directory's root node before the commit.
    pub prev_root: ObjectId,
    /// The names the commit looked at, sorted.
    pub names: Vec<String>,
}

impl DirNode {
    pub fn new(mode: u32) -> Self {
        Self {
            mode,
            entries: BTreeMap::new(),
            layout: None,
            dirty: BTreeSet::new(),
            last: None,
            unloaded: None,
        }
    }

    /// A directory left in the store, with its recorded tree entry.
    pub fn unloaded(mode: u32, at: UnloadedDir) -> Self {
        Self {
            unloaded: Some(at),
            ..Self::new(mode)
        }
    }

    /// Whether its root id is known without a commit: an unloaded directory, or
    /// one with a layout and no change since.
    pub fn is_clean(&self) -> bool {
        self.unloaded.is_some() || (self.layout.is_some() && self.dirty.is_empty())
    }
}

/// Content bytes whose first bytes prove that restoring them needs a feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContentRule {
    pub prefix: Vec<u8>,
    pub feature: String,
}

/// An in-memory file system with cheap, verifiable history.
///
/// ```
/// use snapgraph::{Workspace, CommitOptions, CheckoutPolicy, SnapshotGraph};
/// use std::collections::HashMap;
///
/// let mut store = HashMap::new();
/// let mut ws = Workspace::new();
/// ws.write("/src/main.py", b"print('hi')\n")?;
/// let c = ws.commit(CommitOptions::new())?;
/// let id = c.id();
/// store.extend(c.into_objects());
///
/// let mut other = Workspace::new();
/// other.checkout(id, &store, CheckoutPolicy::default())?.verify(|_| None)?;
/// assert_eq!(other.read("/src/main.py")?, b"print('hi')\n");
/// # Ok::<(), snapgraph::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Workspace {
    pub(crate) root: Arc<DirNode>,
    pub(crate) state: FileBytes,
    pub(crate) state_objects: Option<Arc<ContentObjects>>,
    /// Generations of commits this workspace made or checked out.
    pub(crate) generations: Arc<hashbrown::HashMap<ObjectId, u64>>,
    pub(crate) head: Option<ObjectId>,
    pub(crate) capabilities: Option<Arc<CapabilityFingerprint>>,
    pub(crate) content_rules: Vec<ContentRule>,
    pub(crate) reads: BTreeMap<String, ExternalRead>,
    pub(crate) stale: BTreeSet<String>,
    pub(crate) limits: Limits,
    /// Threads a commit may use to chunk and hash new content.
    /// Set by [`Workspace::set_parallelism`], or [`UNSET_PARALLELISM`]: the default,
    /// resolved when first needed (see [`Workspace::parallelism`]).
    pub(crate) parallelism: usize,
    /// Ids of the objects [`Workspace::hand_over`] emitted since the last commit:
    /// the caller persists them, so the commit counts them as held.
    pub(crate) handed: Arc<hashbrown::HashSet<ObjectId>>,
    /// Where large buffers this workspace copies bytes into come from and go back to.
    pub(crate) buffers: Option<BufferPool>,
}

/// [`Workspace::parallelism`] not set by the caller: the default, resolved when some
/// work is large enough to split.
pub(crate) const UNSET_PARALLELISM: usize = 0;

/// A parallelism setting with [`UNSET_PARALLELISM`] resolved to the default.
pub(crate) fn resolve_parallelism(setting: usize) -> usize {
    if setting == UNSET_PARALLELISM {
        default_parallelism()
    } else {
        setting
    }
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

/// The threads a [`Workspace`] whose caller set none may use (see
/// [`Workspace::parallelism`]): the cores this process may run on, as
/// [`std::thread::available_parallelism`] counts them (its affinity and its cgroup's
/// quota), at most 8; 1 on platforms without threads.
///
/// Asked of the system once per process, and by a workspace only once some work is
/// large enough to split: `available_parallelism` reads the cgroup's files (about ten
/// system calls, 70-85 µs on the CLI's test machine, over 1 % of a per-turn commit
/// that has nothing to split).
pub fn default_parallelism() -> usize {
    if !HAS_THREADS {
        return 1;
    }
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_PARALLELISM))
    })
}

impl Workspace {
    /// An empty workspace with default limits and no capability fingerprint.
    pub fn new() -> Self {
        Self {
            root: Arc::new(DirNode::new(DEFAULT_DIR_MODE)),
            state: FileBytes::empty(),
            state_objects: None,
            generations: Arc::default(),
            head: None,
            capabilities: None,
            content_rules: Vec::new(),
            reads: BTreeMap::new(),
            stale: BTreeSet::new(),
            limits: Limits::default(),
            parallelism: UNSET_PARALLELISM,
            handed: Arc::default(),
            buffers: None,
        }
    }

    /// How many threads a commit may use to chunk and hash new content (default: the
    /// available parallelism, at most 8; 1 on platforms without threads). Ids never
    /// depend on it.
    pub fn parallelism(&self) -> usize {
        resolve_parallelism(self.parallelism)
    }

    /// The threads work on `bytes` of content may use: 1 below `min` (where a split
    /// would not pay) without asking the system how many cores there are.
    pub(crate) fn threads_for(&self, bytes: usize, min: usize) -> usize {
        if bytes < min {
            1
        } else {
            self.parallelism()
        }
    }

    /// Sets how many threads a commit may use (at least 1; 1 keeps all work on the
    /// calling thread). On targets without threads it stays 1.
    pub fn set_parallelism(&mut self, threads: usize) {
        self.parallelism = if HAS_THREADS {
            threads.clamp(1, MAX_PARALLELISM)
        } else {
            1
        };
    }

    /// The pool this workspace takes large buffers from, if any (none by default).
    pub fn buffer_pool(&self) -> Option<&BufferPool> {
        self.buffers.as_ref()
    }

    /// Sets the pool this workspace (and the clones made from it afterwards) takes
    /// the buffers of large files from, or none. With a pool, the buffer of each file
    /// of 1 MiB or more that [`write`](Self::write) or a checkout copies in comes
    /// from the pool when one fits, and goes back to it when the last holder of the
    /// bytes drops them: a caller that writes or checks out large files turn after
    /// turn (in this workspace or in others sharing the pool) reuses memory it
    /// touched before instead of faulting in fresh pages. See [`BufferPool`].
    pub fn set_buffer_pool(&mut self, pool: Option<BufferPool>) {
        self.buffers = pool;
    }

    /// The commit this workspace last made or checked out, if any.
    pub fn head(&self) -> Option<ObjectId> {
        self.head
    }

    /// The limits checkouts into this workspace enforce.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Sets the limits checkouts into this workspace enforce.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Sets the opaque state bytes (an interpreter's variables, say) stored with every
    /// commit like file content.
    pub fn set_state(&mut self, state: impl Into<Vec<u8>>) {
        self.state = FileBytes::from(state.into());
        self.state_objects = None;
    }

    /// The opaque state bytes.
    pub fn state(&self) -> &[u8] {
        &self.state
    }

    /// Sets what this environment offers; every commit records it, and checkouts
    /// compare a snapshot's fingerprint with it.
    pub fn set_capabilities(&mut self, fingerprint: CapabilityFingerprint) {
        self.capabilities = Some(Arc::new(fingerprint));
    }

    /// The fingerprint set on this workspace.
    pub fn capabilities(&self) -> Option<&CapabilityFingerprint> {
        self.capabilities.as_deref()
    }

    /// Declares that content starting with `prefix` needs `feature` (for example files
    /// starting with `SQLite format 3\0` need `"sqlite"`). A checkout whose files or
    /// state match a rule for a feature this workspace's fingerprint lacks is refused
    /// under every policy.
    pub fn require_feature_for_prefix(
        &mut self,
        prefix: impl Into<Vec<u8>>,
        feature: impl Into<String>,
    ) {
        self.content_rules.push(ContentRule {
            prefix: prefix.into(),
            feature: feature.into(),
        });
    }

    // ----- external reads -----

    /// Records a read of an external source (an S3 object, a Drive file, a blob at a
    /// commit). A later record for the same source replaces the earlier one. The next
    /// commits store the records; see [`crate::drift`] for what a restore does with
    /// them. `cached_at`, if set, must be a valid workspace path (it is normalized).
    pub fn record_read(&mut self, mut read: ExternalRead) -> Result<(), FsError> {
        if let Some(p) = &read.cached_at {
            read.cached_at = Some(path::join(&path::parse(p)?));
        }
        if let Some(p) = &read.cached_at {
            self.stale.remove(p);
        }
        self.reads.insert(read.source.clone(), read);
        Ok(())
    }

    /// Forgets the record of `source`; returns it if there was one.
    pub fn forget_read(&mut self, source: &str) -> Option<ExternalRead> {
        self.reads.remove(source)
    }

    /// The recorded external reads, sorted by source.
    pub fn external_reads(&self) -> impl ExactSizeIterator<Item = &ExternalRead> {
        self.reads.values()
    }

    /// Paths whose cached bytes a restore marked stale: re-read their sources live.
    /// Writing or removing a path, or recording a new read cached there, clears it.
    pub fn stale_paths(&self) -> impl ExactSizeIterator<Item = &str> {
        self.stale.iter().map(String::as_str)
    }

    /// Whether `path` is marked stale.
    pub fn is_stale(&self, path: &str) -> bool {
        path::parse(path).is_ok_and(|c| self.stale.contains(&path::join(&c)))
    }

    // ----- reading -----

    fn lookup(&self, comps: &[String]) -> Result<Option<&Node>, FsError> {
        let mut dir: &DirNode = &self.root;
        for (i, name) in comps.iter().enumerate() {
            match dir.entries.get(name) {
                None => return Ok(None),
                Some(node) if i + 1 == comps.len() => return Ok(Some(node)),
                Some(Node::Dir(d)) if d.unloaded.is_some() => {
                    return Err(FsError::NotLoaded {
                        path: path::join(&comps[..=i]),
                    })
                }
                Some(Node::Dir(d)) => dir = d,
                Some(_) => {
                    return Err(FsError::NotADirectory {
                        path: path::join(&comps[..=i]),
                    })
                }
            }
        }
        Ok(None)
    }

    fn lookup_dir(&self, comps: &[String]) -> Result<&DirNode, FsError> {
        if comps.is_empty() {
            return Ok(&self.root);
        }
        match self.lookup(comps)? {
            Some(Node::Dir(d)) if d.unloaded.is_some() => Err(FsError::NotLoaded {
                path: path::join(comps),
            }),
            Some(Node::Dir(d)) => Ok(d),
            Some(_) => Err(FsError::NotADirectory {
                path: path::join(comps),
            }),
            None => Err(FsError::NotFound {
                path: path::join(comps),
            }),
        }
    }

    /// The bytes of the file at `path`. A file a
    /// [shallow checkout](Self::checkout_with) left in the store is
    /// [`FsError::NotLoaded`] until [`load_content`](Self::load_content) fetches it.
    pub fn read(&self, path: &str) -> Result<&[u8], FsError> {
        let comps = path::parse(path)?;
        match self.lookup(&comps)? {
            Some(Node::File(f)) => f.data.as_deref().ok_or_else(|| FsError::NotLoaded {
                path: path::join(&comps),
            }),
            Some(Node::Dir(_)) => Err(FsError::IsADirectory {
                path: path::join(&comps),
            }),
            None if comps.is_empty() => Err(FsError::IsADirectory { path: "/".into() }),
            Some(Node::Symlink(_)) => Err(FsError::IsASymlink {
                path: path::join(&comps),
            }),
            None => Err(FsError::NotFound {
                path: path::join(&comps),
            }),
        }
    }

    /// The target of the symlink at `path`.
    pub fn read_link(&self, path: &str) -> Result<&str, FsError> {
        let comps = path::parse(path)?;
        match self.lookup(&comps)? {
            Some(Node::Symlink(s)) => Ok(&s.target),
            Some(Node::Dir(_)) | None if comps.is_empty() => {
                Err(FsError::IsADirectory { path: "/".into() })
            }
            Some(Node::Dir(_)) => Err(FsError::IsADirectory {
                path: path::join(&comps),
            }),
            Some(Node::File(_)) => Err(FsError::NotASymlink {
                path: path::join(&comps),
            }),
            None => Err(FsError::NotFound {
                path: path::join(&comps),
            }),
        }
    }

    /// Whether anything exists at `path` (false for an invalid path, and for a path
    /// below a directory a lazy checkout left unloaded: see [`Workspace::load_dir`]).
    pub fn exists(&self, path: &str) -> bool {
        match path::parse(path) {
            Ok(comps) if comps.is_empty() => true,
            Ok(comps) => matches!(self.lookup(&comps), Ok(Some(_))),
            Err(_) => false,
        }
    }

    /// Whether `path` names a file whose bytes are in memory: false for a file a
    /// [shallow checkout](Self::checkout_with) left in the store (until
    /// [`load_content`](Self::load_content)), and for anything that is not a file.
    pub fn is_loaded(&self, path: &str) -> bool {
        let Ok(comps) = path::parse(path) else {
            return false;
        };
        matches!(self.lookup(&comps), Ok(Some(Node::File(f))) if f.data.is_some())
    }

    /// The id of the object that stores the file at `path` (its single chunk or its
    /// manifest root) as of the last commit or checkout, loaded or not: equal ids mean
    /// equal bytes. `None` for a file written since (its objects are computed by the
    /// next commit), for content small enough to be stored inline in its tree entry
    /// (at most [`INLINE_MAX`](crate::limits::INLINE_MAX) bytes, always loaded), and
    /// for anything that is not a file.
    pub fn file_content_id(&self, path: &str) -> Option<ObjectId> {
        self.file_content_object(path).map(|(id, _)| id)
    }

    /// [`file_content_id`](Self::file_content_id) with the kind of that object:
    /// [`ObjectKind::Chunk`](crate::ObjectKind::Chunk) for content stored as one
    /// chunk, [`ObjectKind::Manifest`](crate::ObjectKind::Manifest) for a manifest
    /// root. A caller comparing bytes with the stored content by ids (one hash of
    /// the whole, or one per chunk of the manifest's list) then knows which
    /// comparison to make without reading the object first.
    pub fn file_content_object(&self, path: &str) -> Option<(ObjectId, crate::ObjectKind)> {
        let comps = path::parse(path).ok()?;
        match self.lookup(&comps) {
            Ok(Some(Node::File(f))) => f.objects.as_ref()?.content.object(),
            _ => None,
        }
    }

    /// Kind, mode and size of what is at `path`.
    pub fn metadata(&self, path: &str) -> Result<Metadata, FsError> {
        let comps = path::parse(path)?;
        if comps.is_empty() {
            return Ok(Metadata {
                kind: EntryKind::Dir,
                mode: self.root.mode,
                size: self.root.entries.len() as u64,
            });
        }
        match self.lookup(&comps)? {
            Some(Node::Dir(d)) if d.unloaded.is_some() => Err(FsError::NotLoaded {
                path: path::join(&comps),
            }),
            Some(node) => Ok(node.metadata()),
            None => Err(FsError::NotFound {
                path: path::join(&comps),
            }),
        }
    }

    /// How many files and symlinks lie at any depth below the directory `path`, and
    /// their file bytes, as a commit's tree totals them. A directory a
    /// [lazy checkout](crate::CheckoutOptions::lazy) left unloaded answers from its
    /// tree entry, read with its parent: the totals of a lazily checked-out commit
    /// cost what is loaded, not what the tree holds.
    ///
    /// ```
    /// # use snapgraph::{CheckoutOptions, CommitOptions, DriftPolicy, Workspace};
    /// # let mut ws = Workspace::new();
    /// ws.write("/src/lib/a.rs", b"abc")?;
    /// ws.symlink("/src/link", "lib")?;
    /// # let c = ws.commit(CommitOptions::new())?;
    /// # let store: std::collections::HashMap<_, _> = c.objects().iter().map(|(i, b)| (*i, b.to_vec())).collect();
    /// let mut lazy = Workspace::new();
    /// lazy.checkout_with(c.id(), &store, CheckoutOptions::new().lazy(true).drift(DriftPolicy::Off))?
    ///     .verify(|_| None)?;
    /// assert_eq!(lazy.totals("/")?, (2, 3));
    /// assert_eq!(ws.totals("/src/lib")?, (1, 3));
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    pub fn totals(&self, path: &str) -> Result<(u64, u64), FsError> {
        fn sum(dir: &DirNode) -> (u64, u64) {
            if let Some(u) = &dir.unloaded {
                return (u.files, u.bytes);
            }
            dir.entries
                .values()
                .fold((0u64, 0u64), |(files, bytes), node| {
                    let (f, b) = match node {
                        Node::File(f) => (1, f.size()),
                        Node::Symlink(_) => (1, 0),
                        Node::Dir(d) => sum(d),
                    };
                    (files.saturating_add(f), bytes.saturating_add(b))
                })
        }
        let comps = path::parse(path)?;
        if comps.is_empty() {
            return Ok(sum(&self.root));
        }
        match self.lookup(&comps)? {
            Some(Node::Dir(d)) => Ok(sum(d)),
            Some(_) => Err(FsError::NotADirectory {
                path: path::join(&comps),
            }),
            None => Err(FsError::NotFound {
                path: path::join(&comps),
            }),
        }
    }

    /// The entries of the directory at `path`, sorted by name (bytewise).
    pub fn list(&self, path: &str) -> Result<Vec<DirEntry>, FsError> {
        let comps = path::parse(path)?;
        let dir = self.lookup_dir(&comps)?;
        Ok(dir
            .entries
            .iter()
            .map(|(name, node)| DirEntry {
                name: name.clone(),
                metadata: node.metadata(),
            })
            .collect())
    }

    /// Every path in the workspace except `/`, depth-first in sorted order, with its
    /// metadata. A directory a lazy checkout left unloaded
    /// ([`CheckoutOptions::lazy`](crate::CheckoutOptions::lazy)) is listed (with size
    /// 0) but not what lies below it: [`load_dir`](Self::load_dir) it first.
    pub fn walk(&self) -> Vec<(String, Metadata)> {
        let mut out = Vec::new();
        let mut stack: Vec<(String, &DirNode)> = vec![(String::new(), &self.root)];
        while let Some((prefix, dir)) = stack.pop() {
            let mut subdirs = Vec::new();
            for (name, node) in &dir.entries {
                let p = format!("{prefix}/{name}");
                out.push((p.clone(), node.metadata()));
                if let Node::Dir(d) = node {
                    subdirs.push((p, &**d));
                }
            }
            stack.extend(subdirs.into_iter().rev());
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    // ----- writing -----

    /// The file at `comps`, made unique, without marking anything changed: for
    /// filling in the bytes of a file whose tree entry stays as it was.
    fn file_in_place(&mut self, comps: &[String]) -> Option<&mut FileNode> {
        let (name, parent) = comps.split_last()?;
        let mut dir = Arc::make_mut(&mut self.root);
        for c in parent {
            match dir.entries.get_mut(c) {
                Some(Node::Dir(d)) => dir = Arc::make_mut(d),
                _ => return None,
            }
        }
        match dir.entries.get_mut(name) {
            Some(Node::File(f)) => Some(f),
            _ => None,
        }
    }

    /// Checks that every existing component of `comps` is a directory.
    fn check_dirs(&self, comps: &[String]) -> Result<(), FsError> {
        let mut dir: &DirNode = &self.root;
        for (i, name) in comps.iter().enumerate() {
            match dir.entries.get(name) {
                None => return Ok(()),
                Some(Node::Dir(d)) if d.unloaded.is_some() && i + 1 < comps.len() => {
                    return Err(FsError::NotLoaded {
                        path: path::join(&comps[..=i]),
                    })
                }
                Some(Node::Dir(d)) => dir = d,
                Some(_) => {
                    return Err(FsError::NotADirectory {
                        path: path::join(&comps[..=i]),
                    })
                }
            }
        }
        Ok(())
    }

    /// The directory at `comps`, created with its missing parents, made unique and
    /// marked changed along the way. Callers check with [`Self::check_dirs`] first.
    fn dir_mut(&mut self, comps: &[String]) -> &mut DirNode {
        let mut dir = Arc::make_mut(&mut self.root);
        for name in comps {
            dir.dirty.insert(name.clone());
            let node = dir
                .entries
                .entry(name.clone())
                .or_insert_with(|| Node::Dir(Arc::new(DirNode::new(DEFAULT_DIR_MODE))));
            if !matches!(node, Node::Dir(_)) {
                // check_dirs rules this out; replace rather than fail if it ever happens.
                *node = Node::Dir(Arc::new(DirNode::new(DEFAULT_DIR_MODE)));
            }
            let Node::Dir(d) = node else {
                unreachable!("a directory was just stored here")
            };
            dir = Arc::make_mut(d);
        }
        dir
    }

    /// Writes a file, creating missing parent directories. An existing file keeps its
    /// mode; a new one gets `0o644`.
    ///
    /// The bytes are copied: a large file (4 MiB or more) on up to
    /// [`parallelism`](Self::parallelism) threads; a file of 1 MiB or more into a
    /// buffer from the workspace's [`BufferPool`] when it has one that fits (no fresh
    /// pages to fault in). A large new file (or one replacing a small one) on more
    /// than one thread is cut and hashed as it is copied: each thread copies each
    /// chunk of its share right after hashing it, while it is in cache, so the bytes
    /// are read from memory once and the next commit does not hash them again (a
    /// large file over a large committed one is copied only, for the commit to
    /// re-chunk around the change). [`write_owned`](Self::write_owned) and
    /// [`write_shared`](Self::write_shared) take bytes the caller hands over without
    /// copying them.
    pub fn write(&mut self, path: &str, data: impl AsRef<[u8]>) -> Result<(), FsError> {
        let data = data.as_ref();
        let threads = self.threads_for(data.len(), crate::content::PARALLEL_FILE_MIN);
        let pool = self.buffers.clone();
        self.put(path, data.len(), |reuses| {
            if !reuses && threads > 1 && data.len() >= crate::content::PARALLEL_FILE_MIN {
                let (bytes, objects) = FileBytes::copy_and_build(data, threads, pool.as_ref());
                (bytes, Some(objects))
            } else {
                (FileBytes::copy_of(data, threads, pool.as_ref()), None)
            }
        })
    }

    /// Like [`write`](Self::write), taking shared bytes without copying them.
    pub fn write_shared(&mut self, path: &str, data: Arc<[u8]>) -> Result<(), FsError> {
        self.put(path, data.len(), |_| (FileBytes::from(data), None))
    }

    /// Like [`write`](Self::write), taking the caller's buffer over without copying it.
    pub fn write_owned(&mut self, path: &str, data: Vec<u8>) -> Result<(), FsError> {
        self.put(path, data.len(), |_| (FileBytes::from(data), None))
    }

    /// Puts at `path` a file whose content objects an [`Ingest`](crate::ingest::Ingest)
    /// made (creating missing parent directories; an existing file keeps its mode, a
    /// new one gets `0o644`), without its bytes: the workspace holds the reference,
    /// as for a file a shallow checkout left in the store. The objects count as
    /// [handed over](Self::hand_over): the caller must persist every object the
    /// `Ingest` returned before it persists the commit, which does not emit them.
    /// Reading the file needs [`load_content`](Self::load_content) or
    /// [`content_pieces`](Self::content_pieces) from the store. A file of at most 64
    /// bytes (inline) is written with its bytes, as [`write`](Self::write) would.
    pub fn write_ingested(
        &mut self,
        path: &str,
        file: crate::ingest::Ingested,
    ) -> Result<(), FsError> {
        let objects = file.objects;
        if let crate::object::tree::Content::Inline(data) = objects.content {
            return self.write_owned(path, data);
        }
        let comps = path::parse(path)?;
        let mode = self
            .file_slot(&comps)?
            .map_or(DEFAULT_FILE_MODE, |f| f.mode);
        if let Some((id, _)) = objects.content.object() {
            Arc::make_mut(&mut self.handed).insert(id);
        }
        self.place(
            &comps,
            FileNode {
                data: None,
                mode,
                objects: Some(Arc::new(objects)),
                prev: None,
            },
        );
        Ok(())
    }

    /// The file a write at `comps` replaces (`None`: a new file), once the parents
    /// are known to be directories (or missing, to be made); refused for the root,
    /// a directory and a symlink.
    fn file_slot(&self, comps: &[String]) -> Result<Option<&FileNode>, FsError> {
        let (_, parent) = comps
            .split_last()
            .ok_or(FsError::IsADirectory { path: "/".into() })?;
        self.check_dirs(parent)?;
        match self.lookup(comps)? {
            Some(Node::File(f)) => Ok(Some(f)),
            Some(Node::Dir(_)) => Err(FsError::IsADirectory {
                path: path::join(comps),
            }),
            Some(Node::Symlink(_)) => Err(FsError::IsASymlink {
                path: path::join(comps),
            }),
            None => Ok(None),
        }
    }

    /// Puts `file` at `comps` ([`file_slot`](Self::file_slot) said it may go there),
    /// making missing parents and marking the name changed.
    fn place(&mut self, comps: &[String], file: FileNode) {
        let Some((name, parent)) = comps.split_last() else {
            return;
        };
        let dir = self.dir_mut(parent);
        dir.dirty.insert(name.clone());
        dir.entries.insert(name.clone(), Node::File(file));
        self.stale.remove(&path::join(comps));
    }

    /// Writes the file at `path` with the `len` bytes `data` makes, once the path is
    /// known to be writable. `data` is told whether the file keeps its previous
    /// version for the commit to reuse; it may return the objects of the bytes it
    /// makes, built already, which the commit then takes as they are (kept as the
    /// file's previous version: the same bytes, so the rebuild is the objects).
    fn put(
        &mut self,
        path: &str,
        len: usize,
        data: impl FnOnce(bool) -> (FileBytes, Option<ContentObjects>),
    ) -> Result<(), FsError> {
        let comps = path::parse(path)?;
        let (mode, prev) = match self.file_slot(&comps)? {
            Some(f) => (f.mode, f.reusable(len)),
            None => (DEFAULT_FILE_MODE, None),
        };
        let (data, built) = data(prev.is_some());
        let prev = match built {
            Some(objects) => Some(Arc::new((data.clone(), Arc::new(objects)))),
            None => prev,
        };
        self.place(
            &comps,
            FileNode {
                data: Some(data),
                mode,
                objects: None,
                prev,
            },
        );
        Ok(())
    }

    /// Creates a directory and its missing parents. An existing directory is fine.
    pub fn mkdir(&mut self, path: &str) -> Result<(), FsError> {
        let comps = path::parse(path)?;
        self.check_dirs(&comps)?;
        // Idempotent: an existing directory is not touched (nor marked changed, which
        // would make the next commit re-encode its path).
        if matches!(self.lookup(&comps)?, Some(Node::Dir(_))) || comps.is_empty() {
            return Ok(());
        }
        self.dir_mut(&comps);
        Ok(())
    }

    /// Creates a symlink (never followed by the workspace). Missing parents are created.
    pub fn symlink(&mut self, path: &str, target: &str) -> Result<(), FsError> {
        let comps = path::parse(path)?;
        let (name, parent) = comps
            .split_last()
            .ok_or(FsError::AlreadyExists { path: "/".into() })?;
        check_symlink_target(target).map_err(|reason| FsError::InvalidTarget {
            path: path::join(&comps),
            reason,
        })?;
        self.check_dirs(parent)?;
        if self.lookup(&comps)?.is_some() {
            return Err(FsError::AlreadyExists {
                path: path::join(&comps),
            });
        }
        let dir = self.dir_mut(parent);
        dir.dirty.insert(name.clone());
        dir.entries.insert(
            name.clone(),
            Node::Symlink(SymlinkNode {
                target: target.to_owned(),
                mode: DEFAULT_SYMLINK_MODE,
            }),
        );
        Ok(())
    }

    /// Removes a file, a symlink, or a directory with everything below it.
    pub fn remove(&mut self, path: &str) -> Result<(), FsError> {
        let comps = path::parse(path)?;
        let (name, parent) = comps.split_last().ok_or(FsError::Root { op: "remove" })?;
        if self.lookup(&comps)?.is_none() {
            return Err(FsError::NotFound {
                path: path::join(&comps),
            });
        }
        let dir = self.dir_mut(parent);
        dir.dirty.insert(name.clone());
        dir.entries.remove(name);
        let removed = path::join(&comps);
        let prefix = format!("{removed}/");
        self.stale
            .retain(|p| p != &removed && !p.starts_with(&prefix));
        Ok(())
    }

    /// Moves a file, symlink or directory. An existing file or symlink at `to` is
    /// replaced; an existing directory at `to` is an error. Missing parents of `to`
    /// are created.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), FsError> {
        let src = path::parse(from)?;
        let dst = path::parse(to)?;
        let (src_name, src_parent) = src.split_last().ok_or(FsError::Root { op: "rename" })?;
        let (dst_name, dst_parent) = dst.split_last().ok_or(FsError::Root { op: "rename" })?;
        let src_node = self.lookup(&src)?.ok_or_else(|| FsError::NotFound {
            path: path::join(&src),
        })?;
        if src == dst {
            return Ok(());
        }
        if dst.len() > src.len() && dst[..src.len()] == src[..] {
            return Err(FsError::IntoItself {
                from: path::join(&src),
                to: path::join(&dst),
            });
        }
        self.check_dirs(dst_parent)?;
        match (src_node, self.lookup(&dst)?) {
            (_, Some(Node::Dir(_))) | (Node::Dir(_), Some(_)) => {
                return Err(FsError::AlreadyExists {
                    path: path::join(&dst),
                })
            }
            _ => {}
        }
        let dir = self.dir_mut(src_parent);
        dir.dirty.insert(src_name.clone());
        let node = match dir.entries.remove(src_name) {
            Some(n) => n,
            None => {
                return Err(FsError::NotFound {
                    path: path::join(&src),
                })
            }
        };
        let dir = self.dir_mut(dst_parent);
        dir.dirty.insert(dst_name.clone());
        dir.entries.insert(dst_name.clone(), node);
        Ok(())
    }

    /// Copies the file at `from` to `to` with its mode, in O(1): the bytes are shared,
    /// and a file whose bytes are not in memory (a
    /// [shallow checkout](Self::checkout_with), a [hand-over](Self::hand_over))
    /// copies its content reference. An existing file at `to` is replaced; anything
    /// else there is an error. Missing parents of `to` are created.
    pub fn copy_file(&mut self, from: &str, to: &str) -> Result<(), FsError> {
        let src = path::parse(from)?;
        let dst = path::parse(to)?;
        let (dst_name, dst_parent) = dst
            .split_last()
            .ok_or(FsError::IsADirectory { path: "/".into() })?;
        let file = match self.lookup(&src)? {
            Some(Node::File(f)) => f.clone(),
            Some(Node::Dir(_)) => {
                return Err(FsError::IsADirectory {
                    path: path::join(&src),
                })
            }
            None if src.is_empty() => return Err(FsError::IsADirectory { path: "/".into() }),
            Some(Node::Symlink(_)) => {
                return Err(FsError::IsASymlink {
                    path: path::join(&src),
                })
            }
            None => {
                return Err(FsError::NotFound {
                    path: path::join(&src),
                })
            }
        };
        if src == dst {
            return Ok(());
        }
        self.check_dirs(dst_parent)?;
        match self.lookup(&dst)? {
            Some(Node::Dir(_)) => {
                return Err(FsError::IsADirectory {
                    path: path::join(&dst),
                })
            }
            Some(Node::Symlink(_)) => {
                return Err(FsError::IsASymlink {
                    path: path::join(&dst),
                })
            }
            _ => {}
        }
        let dir = self.dir_mut(dst_parent);
        dir.dirty.insert(dst_name.clone());
        dir.entries.insert(dst_name.clone(), Node::File(file));
        self.stale.remove(&path::join(&dst));
        Ok(())
    }

    /// Sets the permission bits (`0o7777` at most) of a file, directory or symlink.
    pub fn set_mode(&mut self, path: &str, mode: u32) -> Result<(), FsError> {
        let comps = path::parse(path)?;
        let (name, parent) = comps.split_last().ok_or(FsError::Root { op: "set_mode" })?;
        if mode > 0o7777 {
            return Err(FsError::InvalidMode {
                path: path::join(&comps),
                mode,
            });
        }
        if self.lookup(&comps)?.is_none() {
            return Err(FsError::NotFound {
                path: path::join(&comps),
            });
        }
        let dir = self.dir_mut(parent);
        dir.dirty.insert(name.clone());
        match dir.entries.get_mut(name) {
            Some(Node::File(f)) => f.mode = mode,
            Some(Node::Symlink(s)) => s.mode = mode,
            Some(Node::Dir(d)) => Arc::make_mut(d).mode = mode,
            None => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CommitOptions;

    /// Issue #12, defect 6: the CLI's scan calls `mkdir` for every directory; an
    /// existing one must stay clean, or every commit re-encodes its path.
    #[test]
    fn mkdir_of_an_existing_directory_changes_nothing() {
        let mut ws = Workspace::new();
        ws.write("/a/b/c.txt", b"c").unwrap();
        drop(ws.commit(CommitOptions::new()).unwrap());
        assert!(ws.root.is_clean());
        for dir in ["/a/b", "/a", "/"] {
            ws.mkdir(dir).unwrap();
            assert!(ws.root.is_clean(), "mkdir {dir} marked the tree changed");
        }
        ws.write("/f", b"f").unwrap();
        assert!(matches!(ws.mkdir("/f"), Err(FsError::NotADirectory { .. })));
        ws.mkdir("/a/new").unwrap();
        assert!(ws.list("/a").unwrap().iter().any(|e| e.name == "new"));
        assert!(!ws.root.is_clean());
    }
}
