//! `SnapshotGraph::ancestors`: decoded commits newest first, in topological order;
//! `SnapshotGraph::ancestry` collects their ids; `SnapshotGraph::is_ancestor` asks
//! whether one commit is below others, walking only what lies between.

use std::collections::BinaryHeap;

use super::{load_commit, GraphError, SnapshotGraph};
use crate::id::ObjectId;
use crate::object::commit::CommitObject;
use crate::object::ObjectError;
use crate::source::ObjectSource;

impl SnapshotGraph {
    /// `id` and its ancestors, newest first, at most `limit` of them: the ids of
    /// [`ancestors`](Self::ancestors), collected.
    pub fn ancestry<S: ObjectSource + ?Sized>(
        id: ObjectId,
        source: &S,
        limit: usize,
    ) -> Result<Vec<ObjectId>, GraphError> {
        Self::ancestors(id, source)
            .take(limit)
            .map(|r| r.map(|(id, _)| id))
            .collect()
    }

    /// Whether `ancestor` is one of the commits `from` or an ancestor of one of them:
    /// whether a ref moved from `ancestor` to one of `from` moved forward.
    ///
    /// Only commits of a higher generation than `ancestor`'s are walked (each is
    /// above all of its parents), so the walk costs the commits between, not the
    /// whole history; each is read once. Commits the source lacks end their path (a
    /// shallow store is fine), and an `ancestor` the source lacks is below nothing
    /// that can be shown (`false`). A parent whose generation is not lower than its
    /// child's is [`GraphError::Generation`], as for
    /// [`ancestors`](Self::ancestors), checked on the edge the walk first reaches
    /// it by: a false generation can only hide an ancestor (an answer of `false`,
    /// which callers take as "not proven"), never invent one.
    ///
    /// ```
    /// # use snapgraph::{CommitOptions, SnapshotGraph, Workspace};
    /// # let mut ws = Workspace::new();
    /// # let c1 = ws.commit(CommitOptions::new())?;
    /// # let first = c1.id();
    /// # let mut store: std::collections::HashMap<_, _> = c1.into_objects().into_iter().collect();
    /// # ws.write("/f", b"two")?;
    /// # let c2 = ws.commit(CommitOptions::new().parent(first))?;
    /// # let second = c2.id();
    /// # store.extend(c2.into_objects());
    /// assert!(SnapshotGraph::is_ancestor(first, [second], &store)?);
    /// assert!(!SnapshotGraph::is_ancestor(second, [first], &store)?);
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    pub fn is_ancestor<S: ObjectSource + ?Sized>(
        ancestor: ObjectId,
        from: impl IntoIterator<Item = ObjectId>,
        source: &S,
    ) -> Result<bool, GraphError> {
        // Each commit to read, with the child (and its generation) it was reached
        // from, if any.
        let mut stack: Vec<(ObjectId, Option<(ObjectId, u64)>)> =
            from.into_iter().map(|id| (id, None)).collect();
        if stack.iter().any(|(id, _)| *id == ancestor) {
            return Ok(true);
        }
        let generation = match load_commit(source, &ancestor) {
            Ok(c) => c.generation,
            Err(ObjectError::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        let mut seen = hashbrown::HashSet::new();
        while let Some((id, child)) = stack.pop() {
            if id == ancestor {
                return Ok(true);
            }
            if !seen.insert(id) {
                continue;
            }
            let commit = match load_commit(source, &id) {
                Ok(c) => c,
                Err(ObjectError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            if let Some((child, child_generation)) = child {
                if commit.generation >= child_generation {
                    return Err(GraphError::Generation {
                        id: child,
                        generation: child_generation,
                        parent: id,
                        parent_generation: commit.generation,
                    });
                }
            }
            if commit.generation > generation {
                let reached = Some((id, commit.generation));
                stack.extend(commit.parents.into_iter().map(|p| (p, reached)));
            }
        }
        Ok(false)
    }

    /// `id` and its ancestors as decoded commits, newest first.
    ///
    /// The order is topological (a commit always comes before its parents, merges
    /// included): commits are taken highest generation first, ties broken by id, so
    /// the order is deterministic. The walk stops at ancestors the source lacks
    /// (a shallow store is fine); `id` itself must be present. A parent whose
    /// generation is not lower than its child's is an error. Each commit is read
    /// once; a commit's parents are read only when the next item is asked for, so
    /// `take(n)` reads what `n` items need. After an error the iterator ends.
    ///
    /// ```
    /// # use snapgraph::{CommitOptions, SnapshotGraph, Workspace};
    /// # let mut ws = Workspace::new();
    /// # let c1 = ws.commit(CommitOptions::new().meta("message", "first"))?;
    /// # let first = c1.id();
    /// # let mut store: std::collections::HashMap<_, _> = c1.into_objects().into_iter().collect();
    /// # let c2 = ws.commit(CommitOptions::new().parent(first).meta("message", "second"))?;
    /// # let second = c2.id();
    /// # store.extend(c2.into_objects());
    /// let messages: Vec<String> = SnapshotGraph::ancestors(second, &store)
    ///     .map(|r| r.map(|(_, commit)| commit.meta["message"].clone()))
    ///     .collect::<Result<_, _>>()?;
    /// assert_eq!(messages, ["second", "first"]);
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    pub fn ancestors<S: ObjectSource + ?Sized>(id: ObjectId, source: &S) -> Ancestors<'_, S> {
        Ancestors {
            source,
            start: Some(id),
            heap: BinaryHeap::new(),
            loaded: hashbrown::HashMap::new(),
            seen: hashbrown::HashMap::new(),
            expand: None,
            done: false,
        }
    }
}

/// The iterator of [`SnapshotGraph::ancestors`]: `(id, commit)` pairs newest first.
#[derive(Debug)]
#[must_use = "an iterator reads nothing until it is driven"]
pub struct Ancestors<'a, S: ?Sized> {
    source: &'a S,
    start: Option<ObjectId>,
    /// (generation, id) of commits read but not yet yielded.
    heap: BinaryHeap<(u64, ObjectId)>,
    /// Their decoded commits.
    loaded: hashbrown::HashMap<ObjectId, CommitObject>,
    /// The generation of every commit met so far (`None` if the source lacks it), so
    /// that each parent edge is checked, not only the first one to reach it.
    seen: hashbrown::HashMap<ObjectId, Option<u64>>,
    /// The last commit yielded, whose parents are read on the next call.
    expand: Option<(ObjectId, u64, Vec<ObjectId>)>,
    done: bool,
}

impl<S: ObjectSource + ?Sized> Ancestors<'_, S> {
    fn step(&mut self) -> Result<Option<(ObjectId, CommitObject)>, GraphError> {
        if let Some(id) = self.start.take() {
            let first = load_commit(self.source, &id)?;
            self.seen.insert(id, Some(first.generation));
            self.heap.push((first.generation, id));
            self.loaded.insert(id, first);
        }
        if let Some((cid, generation, parents)) = self.expand.take() {
            for p in parents {
                let parent_generation = match self.seen.get(&p) {
                    Some(Some(g)) => *g,
                    Some(None) => continue,
                    None => match load_commit(self.source, &p) {
                        Ok(parent) => {
                            let g = parent.generation;
                            self.seen.insert(p, Some(g));
                            self.heap.push((g, p));
                            self.loaded.insert(p, parent);
                            g
                        }
                        Err(ObjectError::NotFound { .. }) => {
                            self.seen.insert(p, None);
                            continue;
                        }
                        Err(e) => return Err(e.into()),
                    },
                };
                if parent_generation >= generation {
                    return Err(GraphError::Generation {
                        id: cid,
                        generation,
                        parent: p,
                        parent_generation,
                    });
                }
            }
        }
        let Some((generation, cid)) = self.heap.pop() else {
            return Ok(None);
        };
        let Some(commit) = self.loaded.remove(&cid) else {
            return Ok(None);
        };
        self.expand = Some((cid, generation, commit.parents.clone()));
        Ok(Some((cid, commit)))
    }
}

impl<S: ObjectSource + ?Sized> Iterator for Ancestors<'_, S> {
    type Item = Result<(ObjectId, CommitObject), GraphError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
