//! Verify (fsck): re-hash every object and check that every ref's closure is
//! complete. Problems come back as data; only a failing backend is an error.

use hashbrown::{HashMap, HashSet};
use snapgraph::{ObjectId, ObjectKind};

use crate::error::StoreError;
use crate::gc::RESERVED;
use crate::hollow::hollow_commits;
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
    /// Hollow commits reached (see [`crate::hollow`]): their snapshots are not
    /// walked, and their absence is no problem.
    pub hollow: usize,
}

impl VerifyReport {
    /// Whether nothing is wrong.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks `store`: walks every ref's closure (history included) with a walk of its
/// own, re-hashing each tree, manifest and commit on the way (every chunk too with
/// `read_data`, and every other object the store holds) and proving each directory
/// and file met well formed and cut canonically, as checkout does
/// ([`snapgraph::graph::CutCheck`]: what checkout would refuse is a
/// [`WalkProblem::Invalid`] naming the tree or manifest; the trees and manifests met
/// are kept in memory for it), then runs the collector's
/// marking (what [`crate::gc()`] keeps) from the same refs and reports
/// anything reachable that the marking would not keep
/// ([`WalkProblem::Unmarked`]): the two walks are written apart so that each checks
/// the other, and a collector that forgets part of a closure is caught before it
/// deletes anything. Then the store's own check of where its records are kept
/// ([`crate::ObjectStore::check_at_rest`]: a SQLite store's packs and segment files,
/// and their live counts) reports, as [`WalkProblem::Invalid`], what a read would
/// find missing (without `read_data`, where those objects were not read) and what a
/// later deletion would take away (a pack or segment counting fewer live records
/// than the rows naming it).
pub fn verify(store: &dyn Store, read_data: bool) -> Result<VerifyReport, StoreError> {
    let refs: Vec<(String, ObjectId)> = store
        .list_refs("")?
        .into_iter()
        .filter(|(name, _)| !name.starts_with(RESERVED))
        .collect();
    let mut all = Vec::new();
    store.for_each_id(&mut |id| {
        all.push(id);
        Ok(())
    })?;
    let held: HashSet<ObjectId> = all.iter().copied().collect();
    let (mut report, read) = check(store, &refs, Some(&held), read_data)?;
    report.objects = all.len();
    if read_data {
        // Everything else the store holds is re-hashed too.
        let rest: Vec<ObjectId> = all
            .iter()
            .filter(|id| !read.contains(*id))
            .copied()
            .collect();
        for batch in rest.chunks(BATCH) {
            let got = read_batch(store, batch, &mut report.problems)?;
            for (id, bytes) in &got {
                if let Err(e) = snapgraph::object::references(id, bytes) {
                    report.problems.push(WalkProblem::Invalid {
                        id: *id,
                        reason: e.to_string(),
                    });
                }
            }
            report.rehashed += got.len();
            report.bytes += got.values().map(|b| b.len() as u64).sum::<u64>();
        }
    }
    // Records whose place at rest is gone (a segment file or a pack of a SQLite
    // store), which only a read of each would find otherwise, and those a deletion
    // of others would take away (a pack or segment counting fewer live records than
    // the rows naming it), which no read finds: each object once, a problem the
    // walks or the reads found first kept.
    let mut known: HashSet<ObjectId> = report.problems.iter().map(WalkProblem::id).collect();
    for (id, reason) in store.check_at_rest()? {
        if known.insert(id) {
            report.problems.push(WalkProblem::Invalid { id, reason });
        }
    }
    Ok(report)
}

/// [`verify`] of one ref's closure (a snapshot's, say: `name` is only reported):
/// the same two walks and re-hashes, from `id` alone, without listing the store,
/// so it costs the closure, not the store. `objects` and `unreachable` stay 0.
pub fn verify_one(
    store: &dyn Store,
    name: &str,
    id: ObjectId,
    read_data: bool,
) -> Result<VerifyReport, StoreError> {
    Ok(check(store, &[(name.to_string(), id)], None, read_data)?.0)
}

/// Both walks from `refs`; also returns the objects re-hashed.
fn check(
    store: &dyn Store,
    refs: &[(String, ObjectId)],
    held: Option<&HashSet<ObjectId>>,
    read_data: bool,
) -> Result<(VerifyReport, HashSet<ObjectId>), StoreError> {
    let mut report = VerifyReport::default();
    let hollow = hollow_commits(store)?;
    let mut closure = Closure {
        store,
        read_data,
        held,
        hollow: &hollow,
        hollow_met: HashSet::new(),
        kinds: HashMap::new(),
        read: HashSet::new(),
        bytes: 0,
        cuts: snapgraph::graph::CutCheck::new(),
    };
    for (name, id) in refs {
        report.refs += 1;
        let before = report.problems.len();
        closure.walk(*id, &mut report.problems)?;
        // What checkout would refuse of the directories and files met (structure,
        // canonical cuts), unless already reported (a missing node, say).
        let reported: HashSet<ObjectId> = report.problems.iter().map(|p| p.id()).collect();
        for e in closure.cuts.problems() {
            if !reported.contains(&e.id()) {
                report.problems.push(WalkProblem::Invalid {
                    id: e.id(),
                    reason: e.to_string(),
                });
            }
        }
        if report.problems.len() > before {
            report.broken_refs.push(name.clone());
        }
    }
    report.reachable = closure.kinds.len();
    report.hollow = closure.hollow_met.len();
    if let Some(held) = held {
        report.unreachable = held
            .iter()
            .filter(|id| !closure.kinds.contains_key(*id))
            .count();
    }

    // The collector's marking, from the same refs, must keep everything reached.
    let mut marked = Marked::new();
    let mut mark_problems = Vec::new();
    mark(
        store,
        refs.iter().map(|(_, id)| (*id, ObjectKind::Commit)),
        &mut marked,
        &mut mark_problems,
        &hollow,
        &mut Vec::new(),
        &crate::Cancel::default(),
    )?;
    let reported: HashSet<ObjectId> = report.problems.iter().map(|p| p.id()).collect();
    let mut unmarked: Vec<ObjectId> = closure
        .kinds
        .keys()
        .filter(|id| held.is_none_or(|h| h.contains(*id)))
        .filter(|id| !marked.contains_key(*id) && !reported.contains(*id))
        .copied()
        .collect();
    unmarked.sort();
    report
        .problems
        .extend(unmarked.into_iter().map(|id| WalkProblem::Unmarked { id }));

    report.bytes = closure.bytes;
    report.rehashed = closure.read.len();
    Ok((report, closure.read))
}

/// Verify's own reachability walk: an explicit stack of (id, expected kind,
/// referrer) over [`snapgraph::object::references`], read in batches. Independent
/// of [`crate::walk::mark`] by design (see [`verify`]).
struct Closure<'a> {
    store: &'a dyn Store,
    read_data: bool,
    /// Every object held, when listed; else presence is asked in batches.
    held: Option<&'a HashSet<ObjectId>>,
    /// Commits recorded hollow: only their parents are walked.
    hollow: &'a HashSet<ObjectId>,
    /// Hollow commits reached.
    hollow_met: HashSet<ObjectId>,
    /// Every object reached, with the kind it was first referenced as.
    kinds: HashMap<ObjectId, ObjectKind>,
    /// Objects read and re-hashed.
    read: HashSet<ObjectId>,
    bytes: u64,
    /// The trees and manifests read (not of hollow commits), to prove each directory
    /// and file well formed and cut canonically as checkout does.
    cuts: snapgraph::graph::CutCheck,
}

impl Closure<'_> {
    fn walk(&mut self, root: ObjectId, problems: &mut Vec<WalkProblem>) -> Result<(), StoreError> {
        let mut stack = vec![(root, ObjectKind::Commit, None)];
        while !stack.is_empty() {
            // Take up to a batch of objects not seen yet; check the kinds of the rest.
            let mut batch: Vec<(ObjectId, ObjectKind, Option<ObjectId>)> = Vec::new();
            while batch.len() < BATCH {
                let Some((id, kind, by)) = stack.pop() else {
                    break;
                };
                match self.kinds.get(&id) {
                    Some(&first) if first != kind => problems.push(WalkProblem::KindConflict {
                        id,
                        first,
                        then: kind,
                        referenced_by: by,
                    }),
                    Some(_) => {}
                    None => {
                        self.kinds.insert(id, kind);
                        batch.push((id, kind, by));
                    }
                }
            }
            // Chunks are only looked for, unless their bytes are to be checked.
            let (to_read, to_find): (Vec<_>, Vec<_>) = batch
                .into_iter()
                .partition(|(_, kind, _)| self.read_data || *kind != ObjectKind::Chunk);
            let absent: HashSet<ObjectId> = match self.held {
                Some(held) => to_find
                    .iter()
                    .filter(|(id, ..)| !held.contains(id))
                    .map(|(id, ..)| *id)
                    .collect(),
                None if to_find.is_empty() => HashSet::new(),
                None => {
                    let ids: Vec<ObjectId> = to_find.iter().map(|(id, ..)| *id).collect();
                    self.store.has_many(&ids)?.into_iter().collect()
                }
            };
            for (id, _, by) in to_find {
                if absent.contains(&id) {
                    problems.push(WalkProblem::Missing {
                        id,
                        referenced_by: by,
                    });
                }
            }
            let ids: Vec<ObjectId> = to_read.iter().map(|(id, ..)| *id).collect();
            let before = problems.len();
            let got = read_batch(self.store, &ids, problems)?;
            let invalid: HashSet<ObjectId> = problems[before..].iter().map(|p| p.id()).collect();
            for (id, kind, by) in to_read {
                let Some(bytes) = got.get(&id) else {
                    if !invalid.contains(&id) {
                        problems.push(WalkProblem::Missing {
                            id,
                            referenced_by: by,
                        });
                    }
                    continue;
                };
                self.read.insert(id);
                self.bytes += bytes.len() as u64;
                match snapgraph::object::references(&id, bytes) {
                    Ok((actual, _)) if actual != kind => problems.push(WalkProblem::Invalid {
                        id,
                        reason: format!("is a {actual}, referenced as a {kind}"),
                    }),
                    // Reversed, so that references are taken in their order. Of
                    // a hollow commit, only the parents.
                    Ok((actual, children)) => {
                        let hollow = actual == ObjectKind::Commit && self.hollow.contains(&id);
                        if hollow {
                            self.hollow_met.insert(id);
                        } else if let Err(e) = self.cuts.note(&id, bytes) {
                            problems.push(WalkProblem::Invalid {
                                id,
                                reason: e.to_string(),
                            });
                        }
                        stack.extend(
                            children
                                .into_iter()
                                .rev()
                                .filter(|(_, k)| !hollow || *k == ObjectKind::Commit)
                                .map(|(child, child_kind)| (child, child_kind, Some(id))),
                        )
                    }
                    Err(e) => problems.push(WalkProblem::Invalid {
                        id,
                        reason: e.to_string(),
                    }),
                }
            }
        }
        Ok(())
    }
}
