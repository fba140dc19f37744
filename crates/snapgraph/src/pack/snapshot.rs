//! Packed snapshots of a workspace: `snapshot`, `from_snapshot`, `restore_snapshot`
//! (methods of [`Workspace`] over the container of the parent module).

use std::borrow::Cow;
use std::cell::RefCell;
use std::io::{Read, Write};

use super::{
    parse_packed_limited, read_packed_records, write_packed, Records, RestoreOptions,
    SnapshotError, SnapshotKey, SnapshotOptions, Unpacked, FLAG_NO_FILES, FLAG_NO_STATE, FLAG_ZSTD,
};
use crate::drift::{DriftPolicy, Restore};
use crate::graph::SnapshotGraph;
use crate::id::ObjectId;
use crate::limits::Limits;
use crate::object::commit::CommitObject;
use crate::object::manifest::{chunk_list, Manifest};
use crate::object::tree::{Content, EntryNode, TreeNode};
use crate::object::ObjectError;
use crate::source::{BoxError, ObjectSource};
use crate::workspace::CheckoutError;
use crate::workspace::{CheckoutPolicy, Commit, CommitError, CommitOptions, Workspace};

impl Workspace {
    /// The workspace as one self-contained snapshot: the bytes of a parentless commit
    /// of it (no metadata) and every object that commit needs. The same workspace
    /// always packs to the same bytes.
    ///
    /// A snapshot needs every file's bytes: if a
    /// [shallow checkout](Self::checkout_with) left any in the store (and the
    /// snapshot does not exclude files), this is [`CommitError::ContentNotLoaded`]
    /// naming the file (load it with [`load_content`](Self::load_content) first, or
    /// exclude files).
    ///
    /// ```
    /// # use snapgraph::Workspace;
    /// let mut ws = Workspace::new();
    /// ws.write("/a.txt", b"a")?;
    /// let bytes = ws.snapshot()?;
    /// assert_eq!(Workspace::from_snapshot(&bytes)?.read("/a.txt")?, b"a");
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    pub fn snapshot(&self) -> Result<Vec<u8>, CommitError> {
        self.snapshot_with(SnapshotOptions::default(), None)
    }

    /// [`snapshot`](Self::snapshot) leaving out files or state, or compressed.
    pub fn snapshot_with_options(&self, options: SnapshotOptions) -> Result<Vec<u8>, CommitError> {
        self.snapshot_with(options, None)
    }

    /// A snapshot authenticated with a BLAKE3 keyed MAC, for bytes that cross a trust
    /// boundary. Restore it with [`restore_snapshot_keyed`](Self::restore_snapshot_keyed).
    pub fn snapshot_keyed(&self, key: &SnapshotKey) -> Result<Vec<u8>, CommitError> {
        self.snapshot_with(SnapshotOptions::default(), Some(key))
    }

    /// A snapshot with `options`, keyed with `key` if given: the general form of
    /// [`snapshot`](Self::snapshot), with its errors.
    pub fn snapshot_with(
        &self,
        options: SnapshotOptions,
        key: Option<&SnapshotKey>,
    ) -> Result<Vec<u8>, CommitError> {
        let (commit, flags) = self.snapshot_commit(options)?;
        Ok(pack_to_vec(&commit, flags, key))
    }

    /// Writes a snapshot to `out` as it is produced (no second copy of the bytes). If
    /// a file is not loaded (see [`snapshot`](Self::snapshot)), nothing is
    /// written and the error is an [`std::io::ErrorKind::Other`] wrapping the
    /// [`CommitError::ContentNotLoaded`] (get it back with
    /// [`std::io::Error::into_inner`] and `downcast`).
    pub fn write_snapshot<W: Write>(
        &self,
        options: SnapshotOptions,
        key: Option<&SnapshotKey>,
        out: W,
    ) -> std::io::Result<()> {
        let (commit, flags) = self
            .snapshot_commit(options)
            .map_err(std::io::Error::other)?;
        write_packed(commit.id(), commit.objects(), flags, key, out)
    }

    /// A parentless commit of the workspace (no metadata). It fails only on content
    /// left unloaded: no parents to look up, and the commit object is a few hundred
    /// bytes.
    fn snapshot_commit(&self, options: SnapshotOptions) -> Result<(Commit, u16), CommitError> {
        let mut flags = 0;
        if options.exclude_files {
            flags |= FLAG_NO_FILES;
        }
        if options.exclude_state {
            flags |= FLAG_NO_STATE;
        }
        if options.compress {
            flags |= FLAG_ZSTD;
        }
        let commit = self.clone().commit(
            CommitOptions::new()
                .exclude_files(options.exclude_files)
                .exclude_state(options.exclude_state),
        )?;
        Ok((commit, flags))
    }

    /// A fresh workspace restored from a snapshot. It adopts the snapshot's capability
    /// fingerprint, so no capability check applies; content rules and limits are the
    /// defaults. The Bashkit-style short form of
    /// [`from_snapshot_with`](Self::from_snapshot_with).
    pub fn from_snapshot(bytes: &[u8]) -> Result<Workspace, SnapshotError> {
        Self::from_snapshot_with(bytes, RestoreOptions::new())
    }

    /// [`from_snapshot`](Self::from_snapshot) for a keyed snapshot.
    pub fn from_snapshot_keyed(
        bytes: &[u8],
        key: &SnapshotKey,
    ) -> Result<Workspace, SnapshotError> {
        Self::from_snapshot_with(bytes, RestoreOptions::new().key(key))
    }

    /// A fresh workspace from a snapshot as `options` say: its key, if keyed, and its
    /// limits (what to use for snapshots from outside a trust boundary; the new
    /// workspace keeps them). Capability and drift policies do not apply: the fresh
    /// workspace adopts the snapshot's fingerprint, and unpinned cached reads are
    /// marked stale (a [`restore_snapshot_with`](Self::restore_snapshot_with) into a
    /// configured workspace returns the drift check instead).
    pub fn from_snapshot_with(
        bytes: &[u8],
        options: RestoreOptions<'_>,
    ) -> Result<Workspace, SnapshotError> {
        let mut ws = Workspace::new();
        let limits = options.limits.unwrap_or_default();
        ws.set_limits(limits);
        let unpacked = parse_packed_limited(bytes, options.key, limits.max_unpacked_bytes)?;
        ws.fresh_from(unpacked)?;
        Ok(ws)
    }

    fn fresh_from(&mut self, unpacked: Unpacked<'_>) -> Result<(), SnapshotError> {
        let ws = self;
        if let Some(caps) =
            SnapshotGraph::capabilities(unpacked.root, &unpacked).map_err(graph_to_snapshot)?
        {
            ws.set_capabilities(caps);
        }
        // A fresh workspace has no caller to drive a drift check: unpinned cached reads
        // are marked stale instead (restore_snapshot returns the check).
        let _ = ws.restore_unpacked(unpacked, CheckoutPolicy::Superset, DriftPolicy::Off)?;
        Ok(())
    }

    /// Replaces files and state with a snapshot's, keeping this workspace's
    /// configuration (capabilities, limits, content rules). A snapshot without files
    /// leaves the files alone; one without state leaves the state alone. Checked under
    /// [`CheckoutPolicy::Superset`] and [`DriftPolicy::Strict`]; on error nothing
    /// changes. The Bashkit-style short form of
    /// [`restore_snapshot_with`](Self::restore_snapshot_with).
    pub fn restore_snapshot(&mut self, bytes: &[u8]) -> Result<Restore, SnapshotError> {
        self.restore_snapshot_with(bytes, RestoreOptions::new())
    }

    /// [`restore_snapshot`](Self::restore_snapshot) for a keyed snapshot: a wrong key,
    /// a flipped bit or a truncation fails before anything is applied.
    pub fn restore_snapshot_keyed(
        &mut self,
        bytes: &[u8],
        key: &SnapshotKey,
    ) -> Result<Restore, SnapshotError> {
        self.restore_snapshot_with(bytes, RestoreOptions::new().key(key))
    }

    /// Restores a snapshot held in memory as `options` say (key, capability policy,
    /// drift policy, limits for this restore). Uncompressed objects are borrowed from
    /// `bytes`, not copied.
    ///
    /// ```
    /// # use snapgraph::{CheckoutPolicy, DriftPolicy, RestoreOptions, Workspace};
    /// # let mut ws = Workspace::new();
    /// # ws.write("/a", b"a")?;
    /// let key = [7u8; 32];
    /// let bytes = ws.snapshot_keyed(&key)?;
    /// let mut target = Workspace::new();
    /// target
    ///     .restore_snapshot_with(&bytes, RestoreOptions::new().key(&key).drift(DriftPolicy::Off))?
    ///     .verify(|_| None)?;
    /// assert_eq!(target.read("/a")?, b"a");
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    pub fn restore_snapshot_with(
        &mut self,
        bytes: &[u8],
        options: RestoreOptions<'_>,
    ) -> Result<Restore, SnapshotError> {
        let limits = options.limits.unwrap_or(self.limits);
        let unpacked = parse_packed_limited(bytes, options.key, limits.max_unpacked_bytes)?;
        self.with_limits(limits, |ws| {
            ws.restore_unpacked(unpacked, options.policy, options.drift)
        })
    }

    /// Restores from a stream as `options` say. Objects are read once into memory and
    /// verified; nothing is applied until the trailer verifies. Each chunk is released
    /// as soon as the last file that needs it is assembled, so the peak memory stays
    /// near the snapshot's size (plus the largest file), not twice it.
    pub fn restore_snapshot_from<R: Read>(
        &mut self,
        input: R,
        options: RestoreOptions<'_>,
    ) -> Result<Restore, SnapshotError> {
        let limits = options.limits.unwrap_or(self.limits);
        let (header, _metadata, records) =
            read_packed_records(input, options.key, limits.max_unpacked_bytes)?;
        let (root, flags) = (header.root, header.flags);
        let uses = chunk_uses(root, &records, &limits).unwrap_or_default();
        let source = Draining {
            records: RefCell::new(records),
            uses: RefCell::new(uses),
        };
        self.with_limits(limits, |ws| {
            ws.restore_parts(root, flags, &source, options.policy, options.drift)
        })
    }

    /// Runs `f` under `limits`, then puts the workspace's own back.
    fn with_limits<T>(&mut self, limits: Limits, f: impl FnOnce(&mut Self) -> T) -> T {
        let kept = self.limits;
        self.limits = limits;
        let out = f(self);
        self.limits = kept;
        out
    }

    fn restore_unpacked(
        &mut self,
        unpacked: Unpacked<'_>,
        policy: CheckoutPolicy,
        drift: DriftPolicy,
    ) -> Result<Restore, SnapshotError> {
        self.restore_parts(unpacked.root, unpacked.flags, &unpacked, policy, drift)
    }

    /// Restores commit `root` from `source`, whose keys were computed from its bytes.
    fn restore_parts<S: ObjectSource + ?Sized>(
        &mut self,
        root: ObjectId,
        flags: u16,
        source: &S,
        policy: CheckoutPolicy,
        drift: DriftPolicy,
    ) -> Result<Restore, SnapshotError> {
        let restored = self.load_commit(root, source, policy, false)?;
        let restore = Restore::new(root, &restored.reads, drift);
        let keep_files = flags & FLAG_NO_FILES != 0;
        let keep_state = flags & FLAG_NO_STATE != 0;
        let (files, state, state_objects) = (
            self.root.clone(),
            self.state.clone(),
            self.state_objects.clone(),
        );
        let head = self.head;
        self.apply(root, restored, &restore);
        if keep_files {
            self.root = files;
        }
        if keep_state {
            self.state = state;
            self.state_objects = state_objects;
        }
        if keep_files || keep_state {
            // The workspace is not that commit's snapshot.
            self.head = head;
        }
        Ok(restore)
    }
}

/// A streamed snapshot's objects, releasing each chunk on its last expected use so
/// that arenas whose chunks are all used are freed while files are assembled.
struct Draining {
    records: RefCell<Records>,
    /// Uses left per chunk, as counted by [`chunk_uses`].
    uses: RefCell<hashbrown::HashMap<ObjectId, u32>>,
}

impl ObjectSource for Draining {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        let mut records = self.records.borrow_mut();
        let bytes = records.bytes(id).map(<[u8]>::to_vec);
        let mut uses = self.uses.borrow_mut();
        if let Some(left) = uses.get_mut(id) {
            *left = left.saturating_sub(1);
            if *left == 0 {
                uses.remove(id);
                records.release(id);
            }
        }
        Ok(bytes.map(Cow::Owned))
    }

    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        Ok(self.records.borrow().contains(id))
    }
}

/// How many times a checkout of `root` reads each chunk: once per occurrence in the
/// expanded chunk list of each distinct content (checkout loads identical content
/// once). `None` if the objects are not well-formed or describe more than `limits`
/// allow; the checkout then reports why.
///
/// The work is bounded like the checkout's: each tree node is read once, the distinct
/// contents' sizes must fit `max_bytes`, and manifests are expanded by the checkout's
/// own walker (`object::manifest::chunk_list`), with its bounds.
fn chunk_uses(
    root: ObjectId,
    records: &Records,
    limits: &Limits,
) -> Option<hashbrown::HashMap<ObjectId, u32>> {
    let body = |id: &ObjectId| records.bytes(id).and_then(|b| b.get(2..));
    let commit = CommitObject::decode(&root, body(&root)?).ok()?;
    let mut contents: hashbrown::HashMap<Content, u64> = hashbrown::HashMap::new();
    contents.insert(commit.state.clone(), commit.state_size);
    let mut trees = vec![commit.tree];
    let mut seen_trees = hashbrown::HashSet::new();
    while let Some(t) = trees.pop() {
        if !seen_trees.insert(t) {
            continue;
        }
        match TreeNode::decode(&t, body(&t)?).ok()? {
            TreeNode::Leaf(entries) => {
                for e in entries {
                    match e.node {
                        EntryNode::File { content, size } => {
                            contents.entry(content).or_insert(size);
                        }
                        EntryNode::Dir { tree, .. } => trees.push(tree),
                        EntryNode::Symlink { .. } => {}
                    }
                }
            }
            TreeNode::Internal { children, .. } => trees.extend(children.iter().map(|c| c.tree)),
        }
    }
    let total = contents
        .values()
        .fold(0u64, |acc, size| acc.saturating_add(*size));
    if total > limits.max_bytes {
        return None;
    }
    let mut uses: hashbrown::HashMap<ObjectId, u32> = hashbrown::HashMap::new();
    let mut count = |id: ObjectId| {
        let n = uses.entry(id).or_default();
        *n = n.saturating_add(1);
    };
    for (content, size) in contents {
        match content {
            Content::Inline(_) => {}
            Content::Chunk(id) => count(id),
            Content::Manifest(m) => {
                // The walk checkout makes, with its bounds, over the unverified records.
                let chunks = chunk_list::<ObjectError>(m, size, &mut |ids| {
                    ids.iter()
                        .map(|id| {
                            Manifest::decode(id, body(id).ok_or(ObjectError::NotFound { id: *id })?)
                        })
                        .collect()
                })
                .ok()?;
                for c in chunks {
                    count(c.id);
                }
            }
        }
    }
    Some(uses)
}

fn graph_to_snapshot(e: crate::graph::GraphError) -> SnapshotError {
    match e {
        crate::graph::GraphError::Object(o) => SnapshotError::Checkout(CheckoutError::Object(o)),
        other => SnapshotError::Corrupt {
            reason: other.to_string(),
        },
    }
}

pub(crate) fn pack_to_vec(commit: &Commit, flags: u16, key: Option<&SnapshotKey>) -> Vec<u8> {
    let mut out = Vec::with_capacity(commit.stored_bytes() as usize + 256);
    if write_packed(commit.id(), commit.objects(), flags, key, &mut out).is_err() {
        // Only the compressor can fail writing into memory (allocation); fall back to
        // the uncompressed form, which is valid and restores the same.
        out.clear();
        let plain = flags & !FLAG_ZSTD;
        let _ = write_packed(commit.id(), commit.objects(), plain, key, &mut out);
    }
    out
}

impl Commit {
    /// The commit as a self-contained snapshot, or `None` when `have` made it
    /// incremental (such bytes could not be restored alone). For a parentless commit
    /// without metadata this equals [`Workspace::snapshot`] of the same workspace.
    pub fn packed(&self) -> Option<Vec<u8>> {
        self.is_complete().then(|| pack_to_vec(self, 0, None))
    }

    /// [`packed`](Self::packed), authenticated with a keyed MAC.
    pub fn packed_keyed(&self, key: &SnapshotKey) -> Option<Vec<u8>> {
        self.is_complete().then(|| pack_to_vec(self, 0, Some(key)))
    }
}
