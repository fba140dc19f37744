//! Verify (fsck): re-hash every object and check that every ref's closure is
//! complete. Problems come back as data; only a failing backend is an error.

use hashbrown::HashSet;
use snapgraph::{ObjectId, ObjectKind};

use crate::error::StoreError;
use crate::gc::RESERVED;
use crate::store::Store;
use crate::walk::{mark, read_batch, Marked, WalkProblem, BATCH};

/// What [`verify`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Refs checked.
    pub refs: usize,
    /// Objects reachable from them.
    pub reachable: usize,
    /// Objects held in all.
    pub objects: usize,
    /// Objects re-hashed (every object with `read_data`, else the non-chunk
    /// objects of the closures).
    pub rehashed: usize,
    /// Bytes re-hashed.
    pub bytes: u64,
    /// Objects held that no ref reaches (the next garbage collection removes them).
    pub unreachable: usize,
    /// Every problem: missing, corrupt or invalid objects.
    pub problems: Vec<WalkProblem>,
    /// Refs whose closure walk met a problem first (a problem under several refs is
    /// listed under the first one checked, in name order).
    pub broken_refs: Vec<String>,
}

impl VerifyReport {
    /// Whether nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks `store`: walks every ref's closure (history included), re-hashing each
/// tree, manifest and commit on the way, and with `read_data` re-hashes every
/// object the store holds, chunks included.
pub fn verify(store: &dyn Store, read_data: bool) -> Result<VerifyReport, StoreError> {
    let mut report = VerifyReport::default();
    let mut seen = Marked::new();
    for (name, id) in store.list_refs("")? {
        if name.starts_with(RESERVED) {
            continue;
        }
        report.refs += 1;
        let before = report.problems.len();
        let read = mark(
            store,
            [(id, ObjectKind::Commit)],
            &mut seen,
            &mut report.problems,
        )?;
        report.bytes += read;
        if report.problems.len() > before {
            report.broken_refs.push(name);
        }
    }
    report.reachable = seen.len();

    let mut all = Vec::new();
    store.for_each_id(&mut |id| {
        all.push(id);
        Ok(())
    })?;
    report.objects = all.len();
    report.unreachable = all.iter().filter(|id| !seen.contains_key(*id)).count();
    let held: HashSet<ObjectId> = all.iter().copied().collect();

    // Chunks of the closures: present? (Their bytes are checked with read_data.)
    let reported: HashSet<ObjectId> = report.problems.iter().map(|p| p.id()).collect();
    for id in seen.keys() {
        if !held.contains(id) && !reported.contains(id) {
            report.problems.push(WalkProblem::Missing {
                id: *id,
                referenced_by: None,
            });
        }
    }

    if read_data {
        report.bytes = 0;
        for batch in all.chunks(BATCH) {
            let got = read_batch(store, batch, &mut report.problems)?;
            // Chunks are marked unread: their kind is checked here, with the bytes.
            for (id, bytes) in &got {
                let actual = bytes.first().copied().and_then(ObjectKind::from_byte);
                if let (Some(ObjectKind::Chunk), Some(actual)) = (seen.get(id), actual) {
                    if actual != ObjectKind::Chunk {
                        report.problems.push(WalkProblem::Invalid {
                            id: *id,
                            reason: format!("is a {actual}, referenced as a chunk"),
                        });
                    }
                }
            }
            report.rehashed += got.len();
            report.bytes += got.values().map(|b| b.len() as u64).sum::<u64>();
        }
    } else {
        report.rehashed = seen.len();
    }
    Ok(report)
}
