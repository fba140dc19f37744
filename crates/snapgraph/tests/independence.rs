//! History independence where it is hardest to keep: directories that span many tree
//! nodes and files whose manifests span many manifest nodes, edited sparsely over many
//! incremental commits (and across checkouts), each commit compared with a workspace
//! built from scratch.
//!
//! The general generators (`proptests.rs`) mostly build small trees, where an
//! incremental re-cut has one node to get right. Here every case starts from a
//! directory of hundreds to thousands of entries (average node: 64 items) and a file of
//! megabytes (average manifest node: 64 chunks of 16 KiB), so every sparse edit goes
//! through `Layout::update`'s splice-and-resynchronise path and `ContentObjects::rebuild`.
//!
//! Cases: 256 by default; `SNAPGRAPH_PROPTEST_CASES=N` runs more (a nightly-strength
//! run), `PROPTEST_MAX_SHRINK_ITERS` as usual. Failures are saved to
//! `proptest-regressions/independence.txt` and replayed first on every run.

mod common;

use std::collections::BTreeMap;

use common::{build_from, persist, pseudo_random, snap, Store};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{FileFailurePersistence, TestRunner};
use snapgraph::{CheckoutPolicy, CommitOptions, ObjectKind, ObjectSource, Workspace};

/// The directory that spans many nodes.
const DIR: &str = "/wide";
/// The file whose manifest spans many nodes.
const BIG: &str = "/big.bin";

fn cases() -> u32 {
    std::env::var("SNAPGRAPH_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        max_shrink_iters: 4000,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/independence.txt",
        ))),
        ..ProptestConfig::default()
    }
}

/// Entry names leave gaps (`e00000`, `e00007`, ...) so inserts land between old names,
/// at the front and past the end.
fn name(k: u32) -> String {
    format!("{DIR}/e{k:05}")
}

/// Small contents (inline and single-chunk), so the directory's nodes, not content
/// chunking, dominate.
fn small(seed: u32) -> Vec<u8> {
    let len = (seed % 97) as usize * 3;
    if len <= 64 {
        vec![seed as u8; len]
    } else {
        pseudo_random(len, u64::from(seed))
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Write a file named by an arbitrary key (new or overwritten).
    Put(u32, u32),
    /// Remove the i-th existing entry (modulo the count).
    Remove(usize),
    /// Rename the i-th existing entry to a new key.
    Rename(usize, u32),
    /// Change the mode of the i-th existing entry.
    Chmod(usize),
    /// Remove a run of consecutive entries starting at the i-th (a whole node's worth).
    RemoveRun(usize, usize),
    /// Insert a run of new consecutive keys (splits nodes).
    InsertRun(u32, u32),
    /// Overwrite bytes in the big file at an offset (a fraction of its length).
    Patch(u16, u16, u8),
    /// Insert bytes into the big file (shifts every later chunk).
    Splice(u16, u16),
    /// Cut the big file at a fraction of its length, or append to it.
    Resize(u16, u32),
    /// Commit here.
    Commit,
    /// Commit, then continue from a fresh checkout of that commit.
    CommitAndCheckout,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u32..20_000, any::<u32>()).prop_map(|(k, s)| Op::Put(k, s)),
        4 => any::<usize>().prop_map(Op::Remove),
        3 => (any::<usize>(), 0u32..20_000).prop_map(|(i, k)| Op::Rename(i, k)),
        1 => any::<usize>().prop_map(Op::Chmod),
        1 => (any::<usize>(), 1usize..150).prop_map(|(i, n)| Op::RemoveRun(i, n)),
        1 => (0u32..20_000, 1u32..150).prop_map(|(k, n)| Op::InsertRun(k, n)),
        2 => (any::<u16>(), 1u16..300, any::<u8>()).prop_map(|(at, n, v)| Op::Patch(at, n, v)),
        1 => (any::<u16>(), 1u16..5000).prop_map(|(at, n)| Op::Splice(at, n)),
        1 => (any::<u16>(), 0u32..300_000).prop_map(|(at, n)| Op::Resize(at, n)),
        3 => Just(Op::Commit),
        1 => Just(Op::CommitAndCheckout),
    ]
}

/// A starting point: `entries` files in the wide directory (every `gap`-th key) and a
/// big file of `big_len` bytes.
#[derive(Debug, Clone)]
struct Start {
    entries: u32,
    gap: u32,
    big_len: usize,
    seed: u64,
}

fn start() -> impl Strategy<Value = Start> {
    (150u32..2_500, 2u32..8, 1_200_000usize..4_500_000, 0u64..4).prop_map(
        |(entries, gap, big_len, seed)| Start {
            entries,
            gap,
            big_len,
            seed,
        },
    )
}

/// The case's state beside the workspace: the big file's bytes (edited in place).
struct Case {
    ws: Workspace,
    big: Vec<u8>,
    store: Store,
    head: Option<snapgraph::ObjectId>,
}

impl Case {
    fn new(s: &Start) -> Self {
        let mut ws = Workspace::new();
        for i in 0..s.entries {
            ws.write(&name(i * s.gap), small(i)).unwrap();
        }
        let big = pseudo_random(s.big_len, s.seed);
        ws.write(BIG, &big).unwrap();
        Case {
            ws,
            big,
            store: Store::new(),
            head: None,
        }
    }

    /// The existing entries of the wide directory, sorted.
    fn names(&self) -> Vec<String> {
        match self.ws.list(DIR) {
            Ok(list) => list
                .into_iter()
                .map(|e| format!("{DIR}/{}", e.name))
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    fn nth(&self, i: usize) -> Option<String> {
        let names = self.names();
        (!names.is_empty()).then(|| names[i % names.len()].clone())
    }

    fn frac(&self, at: u16) -> usize {
        (self.big.len() as u64 * u64::from(at) / 65_536) as usize
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Put(k, s) => self.ws.write(&name(*k), small(*s)).unwrap(),
            Op::Remove(i) => {
                if let Some(p) = self.nth(*i) {
                    self.ws.remove(&p).unwrap();
                }
            }
            Op::Rename(i, k) => {
                if let Some(p) = self.nth(*i) {
                    let to = name(*k);
                    if !self.ws.exists(&to) {
                        self.ws.rename(&p, &to).unwrap();
                    }
                }
            }
            Op::Chmod(i) => {
                if let Some(p) = self.nth(*i) {
                    let mode = if self.ws.metadata(&p).unwrap().mode == 0o755 {
                        0o644
                    } else {
                        0o755
                    };
                    self.ws.set_mode(&p, mode).unwrap();
                }
            }
            Op::RemoveRun(i, n) => {
                let names = self.names();
                if !names.is_empty() {
                    let from = i % names.len();
                    for p in names.iter().skip(from).take(*n) {
                        self.ws.remove(p).unwrap();
                    }
                }
            }
            Op::InsertRun(k, n) => {
                for j in 0..*n {
                    self.ws
                        .write(&name((k + j) % 20_000), small(k ^ j))
                        .unwrap();
                }
            }
            Op::Patch(at, n, v) => {
                let at = self.frac(*at);
                let end = (at + usize::from(*n)).min(self.big.len());
                for b in &mut self.big[at..end] {
                    *b ^= *v | 1;
                }
                self.ws.write(BIG, &self.big).unwrap();
            }
            Op::Splice(at, n) => {
                let at = self.frac(*at);
                let ins = pseudo_random(usize::from(*n), u64::from(*n));
                self.big.splice(at..at, ins);
                self.ws.write(BIG, &self.big).unwrap();
            }
            Op::Resize(at, n) => {
                if *n % 2 == 0 {
                    let at = self.frac(*at);
                    self.big.truncate(at.max(1));
                } else {
                    let more = pseudo_random(*n as usize, u64::from(*n));
                    self.big.extend_from_slice(&more);
                }
                self.ws.write(BIG, &self.big).unwrap();
            }
            Op::Commit => self.commit()?,
            Op::CommitAndCheckout => {
                self.commit()?;
                let mut fresh = Workspace::new();
                let restore = fresh
                    .checkout(self.head.unwrap(), &self.store, CheckoutPolicy::default())
                    .unwrap();
                // No external reads were recorded: nothing can drift.
                restore.verify(|_| None).unwrap();
                prop_assert_eq!(snap(&fresh), snap(&self.ws));
                self.ws = fresh;
            }
        }
        Ok(())
    }

    /// An incremental commit (against the store, with the previous commit as parent)
    /// must name the same tree as a workspace built from scratch in a shuffled order.
    fn commit(&mut self) -> Result<(), TestCaseError> {
        let s = snap(&self.ws);
        let opts = CommitOptions::new().have_in(&self.store);
        let opts = match self.head {
            Some(h) => opts.parent(h),
            None => opts,
        };
        let c = self.ws.commit(opts).unwrap();
        let id = persist(&mut self.store, c);
        let incremental_tree = snapgraph::SnapshotGraph::commit(id, &self.store)
            .unwrap()
            .tree;

        // Reverse order: directories still come before their entries.
        let mut order: Vec<&String> = s.paths.keys().collect();
        order.sort_by(|a, b| {
            let depth = |p: &str| p.matches('/').count();
            depth(a).cmp(&depth(b)).then(b.cmp(a))
        });
        let mut fresh = build_from(order, &s);
        let full = fresh.commit(CommitOptions::new()).unwrap();
        let full_tree = snapgraph::SnapshotGraph::commit(full.id(), full.objects())
            .unwrap()
            .tree;
        prop_assert_eq!(
            incremental_tree,
            full_tree,
            "incremental tree differs from a fresh build"
        );
        self.head = Some(id);
        Ok(())
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn wide_directories_and_big_files_are_history_independent(
        s in start(),
        ops in prop::collection::vec(op(), 5..40),
    ) {
        let mut case = Case::new(&s);
        case.commit()?;
        for op in &ops {
            case.apply(op)?;
        }
        case.commit()?;
    }
}

/// Tree and manifest nodes among a commit's objects (the commit's own closure).
fn node_counts(
    store: &impl ObjectSource,
    ids: impl Iterator<Item = snapgraph::ObjectId>,
) -> BTreeMap<ObjectKind, usize> {
    let mut counts = BTreeMap::new();
    for id in ids {
        let bytes = store.get(&id).unwrap().unwrap();
        let kind = ObjectKind::from_byte(bytes[0]).unwrap();
        *counts.entry(kind).or_insert(0) += 1;
    }
    counts
}

/// The generator does what the file claims: the wide directory spans several tree
/// nodes (a root above leaves), and the big file several manifest nodes, in nearly
/// every case; a generator that drifted to small trees would fail here, not silently
/// weaken the property.
#[test]
fn the_generator_reaches_multi_node_directories_and_manifests() {
    let mut runner = TestRunner::deterministic();
    let strategy = start();
    let samples = 40;
    let (mut wide, mut deep) = (0, 0);
    for _ in 0..samples {
        let s = strategy.new_tree(&mut runner).unwrap().current();
        let mut case = Case::new(&s);
        let c = case.ws.commit(CommitOptions::new()).unwrap();
        let objects = c.objects();
        let counts = node_counts(objects, objects.ids().copied());
        // Root tree (one node) + the wide directory: more than 2 tree nodes means the
        // wide directory alone has at least two.
        if counts.get(&ObjectKind::Tree).copied().unwrap_or(0) > 2 {
            wide += 1;
        }
        if counts.get(&ObjectKind::Manifest).copied().unwrap_or(0) > 1 {
            deep += 1;
        }
        case.ws = Workspace::new();
    }
    assert!(
        wide >= samples * 9 / 10,
        "only {wide} of {samples} directories spanned several nodes"
    );
    assert!(
        deep >= samples * 9 / 10,
        "only {deep} of {samples} big files had several manifest nodes"
    );
}
