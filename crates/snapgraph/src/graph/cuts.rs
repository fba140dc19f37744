//! Proving trees and manifests cut canonically, for walks that read objects one at a
//! time or a level at a time: what checkout proves of each directory and file by
//! rebuilding it. [`SnapshotGraph::reachable`](super::SnapshotGraph::reachable),
//! [`reachable_history`](super::SnapshotGraph::reachable_history) and
//! [`CheckoutPlan`](super::CheckoutPlan) run it; a store's own closure walk (the
//! store crate's `verify`) can too.

use crate::content::{ContentObjects, Span};
use crate::id::ObjectId;
use crate::object::manifest::{chunk_list, Manifest};
use crate::object::{
    header, load_many, sized_refs_of, ObjectError, ObjectKind, Ref, FORMAT_VERSION,
};
use crate::tree::{read_entries, Ahead, Layout};

/// The tree and manifest nodes a walk has read, with the directories and files they
/// form, so that once all are read each directory and each manifest is proven well
/// formed and cut canonically, by the checks checkout makes (the one rebuild,
/// `object::canonical_cut`): a well-formed tree or manifest cut at other places than
/// the format's would give one directory or file two ids, and checkout refuses it.
///
/// [`note`](Self::note) each object the walk reads (verified), then
/// [`problems`](Self::problems) or [`check`](Self::check). Tree and manifest nodes
/// are kept until then (their bytes, not the chunks'). Directories are those a
/// noted commit or leaf names; files are the manifests a noted commit (its state)
/// or leaf names: leave out a commit whose snapshot is not to be checked.
///
/// ```
/// use snapgraph::graph::CutCheck;
/// use snapgraph::{CommitOptions, Workspace};
///
/// let mut ws = Workspace::new();
/// ws.write("/d/big", vec![7u8; 300_000])?;
/// let commit = ws.commit(CommitOptions::new())?;
/// let mut cuts = CutCheck::new();
/// // Any order: the nodes are checked once all are noted.
/// for (id, stored) in commit.objects().iter() {
///     cuts.note(id, stored)?;
/// }
/// assert!(cuts.problems().is_empty());
/// # Ok::<(), snapgraph::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct CutCheck {
    nodes: hashbrown::HashMap<ObjectId, Vec<u8>>,
    /// Directories' root nodes (a commit's tree, a directory entry's), each once.
    dirs: Vec<ObjectId>,
    /// Files' (and states') manifest roots with the size their first reference
    /// claims, each once.
    files: Vec<(ObjectId, u64)>,
    met: hashbrown::HashSet<ObjectId>,
}

impl CutCheck {
    /// Nothing noted yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Notes an object a walk read: `stored` its stored bytes, already verified
    /// against `id` (`snapgraph::object::verify`). Chunks, capabilities and reads
    /// objects are ignored. Fails only when the object does not decode.
    pub fn note(&mut self, id: &ObjectId, stored: &[u8]) -> Result<(), ObjectError> {
        let (kind, _) = header(id, stored)?;
        if !matches!(
            kind,
            ObjectKind::Commit | ObjectKind::Tree | ObjectKind::Manifest
        ) {
            return Ok(());
        }
        let refs = sized_refs_of(id, kind, &stored[2..], false)?;
        self.note_refs(*id, kind, stored, &refs)
    }

    /// [`note`](Self::note) of an object of `kind` the caller has decoded, with its
    /// references (from `sized_refs_of`).
    pub(crate) fn note_refs(
        &mut self,
        id: ObjectId,
        kind: ObjectKind,
        stored: &[u8],
        refs: &[Ref],
    ) -> Result<(), ObjectError> {
        // Roots are referenced by commits and by leaves; an index node's references
        // are nodes of its own directory or file.
        let roots = match kind {
            ObjectKind::Commit => true,
            // A decoded tree's body opens with its variant: 0 for a leaf
            // (docs/FORMAT.md), so it is not decoded again here.
            ObjectKind::Tree => stored.get(2) == Some(&0),
            ObjectKind::Manifest => false,
            _ => return Ok(()),
        };
        if kind != ObjectKind::Commit {
            self.nodes.insert(id, stored.to_vec());
        }
        if roots {
            for r in refs {
                match (r.kind, r.size) {
                    (ObjectKind::Tree, _) if self.met.insert(r.id) => self.dirs.push(r.id),
                    (ObjectKind::Manifest, Some(size)) if self.met.insert(r.id) => {
                        self.files.push((r.id, size))
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The first of [`problems`](Self::problems), if any.
    pub fn check(mut self) -> Result<(), ObjectError> {
        match self.problems().into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// What is wrong with the directories and files noted since the last call, one
    /// error per directory or file that checkout would refuse, directories first, in
    /// the order noted: [`ObjectError::Malformed`] naming a node that is not where
    /// the format puts it, or naming the root of a directory or manifest not cut
    /// canonically; [`ObjectError::NotFound`] naming a node that was not noted. The
    /// nodes stay noted, so a walk of several roots (a store's refs) can ask after
    /// each.
    pub fn problems(&mut self) -> Vec<ObjectError> {
        let mut out = Vec::new();
        let mut ahead = Ahead::default();
        for dir in std::mem::take(&mut self.dirs) {
            let entries = read_entries::<_, ObjectError>(
                &self.nodes,
                dir,
                &mut ahead,
                false,
                &mut |_| Ok(()),
            );
            if let Err(e) = entries.and_then(|entries| Layout::canonical(dir, &entries)) {
                out.push(e);
            }
        }
        for (root, size) in std::mem::take(&mut self.files) {
            if let Err(e) = self.manifest(root, size) {
                out.push(e);
            }
        }
        out
    }

    fn manifest(&self, root: ObjectId, size: u64) -> Result<(), ObjectError> {
        let chunks = chunk_list::<ObjectError>(root, size, &mut |ids| {
            load_many(&self.nodes, ids, ObjectKind::Manifest, false)?
                .iter()
                .zip(ids)
                .map(|(loaded, id)| Manifest::decode(id, loaded.body()))
                .collect()
        })?;
        let mut start = 0;
        let spans: Vec<Span> = chunks
            .iter()
            .map(|c| {
                // The chunks' versions do not enter a manifest's cut.
                let span = Span {
                    id: c.id,
                    start,
                    len: c.len,
                    version: FORMAT_VERSION,
                };
                start += c.len as usize;
                span
            })
            .collect();
        ContentObjects::canonical(root, size, &spans).map(|_| ())
    }
}
