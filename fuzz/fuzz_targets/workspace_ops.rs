//! Arbitrary sequences of workspace operations, replayed against a simple model (a
//! `BTreeMap` of paths): write, remove, mkdir, rename, symlink, set_mode, set_state,
//! commit with and without `have_in`, checkout of an earlier commit, fork (clone),
//! switching between forks, snapshot round trips and diffs between two commits. After
//! every step the workspace and the model must agree exactly, and so must every
//! operation's success.
#![no_main]

use std::collections::{BTreeMap, BTreeSet, HashMap};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use snapgraph::workspace::path;
use snapgraph::{CheckoutPolicy, CommitOptions, EntryKind, ObjectId, SnapshotGraph, Workspace};
use snapgraph_fuzz::pseudo_random;

const NAMES: [&str; 8] = ["a", "b", "c.txt", "dir", "x y", "é", ".hidden", "z"];

#[derive(Arbitrary, Debug)]
enum PathSel {
    /// Components picked from a few names, so that operations collide.
    Names(Vec<u8>),
    /// Any string: invalid paths must fail without effect.
    Raw(String),
}

impl PathSel {
    fn render(&self) -> String {
        match self {
            PathSel::Names(idx) => {
                let mut s = String::new();
                for i in idx.iter().take(5) {
                    s.push('/');
                    match i {
                        250 => s.push_str(".."),
                        251 => s.push('.'),
                        252 => {}
                        _ => s.push_str(NAMES[*i as usize % NAMES.len()]),
                    }
                }
                if s.is_empty() {
                    s.push('/');
                }
                s
            }
            PathSel::Raw(s) => s.clone(),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Data {
    Small(Vec<u8>),
    /// Pseudo-random bytes: several chunks and a manifest past 64 KiB.
    Big {
        len: u16,
        seed: u8,
        scale: bool,
    },
}

impl Data {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Data::Small(v) => v.clone(),
            Data::Big { len, seed, scale } => {
                let n = if *scale {
                    *len as usize * 4
                } else {
                    *len as usize
                };
                pseudo_random(n, u64::from(*seed) + 1)
            }
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    Write(PathSel, Data),
    Remove(PathSel),
    Mkdir(PathSel),
    Rename(PathSel, PathSel),
    Symlink(PathSel, String),
    SetMode(PathSel, u16),
    SetState(Data),
    Commit { have_in: bool, parent: bool },
    Checkout(u8),
    Fork,
    Switch(u8),
    Snapshot { compress: bool },
    Diff(u8, u8),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum MNode {
    File(Vec<u8>, u32),
    Dir(u32),
    Link(String, u32),
}

/// The model: every path (as components) but the root, and the state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Model {
    nodes: BTreeMap<Vec<String>, MNode>,
    state: Vec<u8>,
}

impl Model {
    fn get(&self, c: &[String]) -> Option<&MNode> {
        self.nodes.get(c)
    }

    /// The workspace's `lookup`: None if missing, Err if a proper prefix is not a dir.
    fn lookup(&self, c: &[String]) -> Result<Option<&MNode>, ()> {
        for i in 0..c.len() {
            match self.get(&c[..=i]) {
                None => return Ok(None),
                Some(n) if i + 1 == c.len() => return Ok(Some(n)),
                Some(MNode::Dir(_)) => {}
                Some(_) => return Err(()),
            }
        }
        Ok(None)
    }

    /// Every existing prefix of `c` (all of it included) is a directory.
    fn dirs_ok(&self, c: &[String]) -> bool {
        for i in 0..c.len() {
            match self.get(&c[..=i]) {
                None => return true,
                Some(MNode::Dir(_)) => {}
                Some(_) => return false,
            }
        }
        true
    }

    fn make_dirs(&mut self, c: &[String]) {
        for i in 0..c.len() {
            self.nodes
                .entry(c[..=i].to_vec())
                .or_insert(MNode::Dir(0o755));
        }
    }

    fn subtree(&self, c: &[String]) -> Vec<Vec<String>> {
        self.nodes
            .keys()
            .filter(|k| k.len() >= c.len() && k[..c.len()] == *c)
            .cloned()
            .collect()
    }

    fn write(&mut self, p: &str, data: Vec<u8>) -> bool {
        let Ok(c) = path::parse(p) else { return false };
        let Some((_, parent)) = c.split_last() else {
            return false;
        };
        if !self.dirs_ok(parent) {
            return false;
        }
        let mode = match self.lookup(&c) {
            Err(()) => return false,
            Ok(Some(MNode::File(_, m))) => *m,
            Ok(Some(_)) => return false,
            Ok(None) => 0o644,
        };
        self.make_dirs(parent);
        self.nodes.insert(c, MNode::File(data, mode));
        true
    }

    fn mkdir(&mut self, p: &str) -> bool {
        let Ok(c) = path::parse(p) else { return false };
        if !self.dirs_ok(&c) {
            return false;
        }
        self.make_dirs(&c);
        true
    }

    fn symlink(&mut self, p: &str, target: &str) -> bool {
        let Ok(c) = path::parse(p) else { return false };
        let Some((_, parent)) = c.split_last() else {
            return false;
        };
        if target.is_empty() || target.len() > 4096 || target.contains('\0') {
            return false;
        }
        if !self.dirs_ok(parent) || !matches!(self.lookup(&c), Ok(None)) {
            return false;
        }
        self.make_dirs(parent);
        self.nodes.insert(c, MNode::Link(target.to_owned(), 0o777));
        true
    }

    fn remove(&mut self, p: &str) -> bool {
        let Ok(c) = path::parse(p) else { return false };
        if c.is_empty() || !matches!(self.lookup(&c), Ok(Some(_))) {
            return false;
        }
        for k in self.subtree(&c) {
            self.nodes.remove(&k);
        }
        true
    }

    fn rename(&mut self, from: &str, to: &str) -> bool {
        let (Ok(src), Ok(dst)) = (path::parse(from), path::parse(to)) else {
            return false;
        };
        if src.is_empty() || dst.is_empty() {
            return false;
        }
        let src_node = match self.lookup(&src) {
            Ok(Some(n)) => n.clone(),
            _ => return false,
        };
        if src == dst {
            return true;
        }
        if dst.len() > src.len() && dst[..src.len()] == src[..] {
            return false;
        }
        let dst_parent = &dst[..dst.len() - 1];
        if !self.dirs_ok(dst_parent) {
            return false;
        }
        match (&src_node, self.lookup(&dst)) {
            (_, Err(())) => return false,
            (_, Ok(Some(MNode::Dir(_)))) | (MNode::Dir(_), Ok(Some(_))) => return false,
            _ => {}
        }
        let moved: Vec<(Vec<String>, MNode)> = self
            .subtree(&src)
            .into_iter()
            .map(|k| {
                let n = self.nodes.remove(&k).expect("listed");
                let mut nk = dst.clone();
                nk.extend_from_slice(&k[src.len()..]);
                (nk, n)
            })
            .collect();
        self.make_dirs(dst_parent);
        self.nodes.extend(moved);
        true
    }

    fn set_mode(&mut self, p: &str, mode: u32) -> bool {
        let Ok(c) = path::parse(p) else { return false };
        if c.is_empty() || mode > 0o7777 || !matches!(self.lookup(&c), Ok(Some(_))) {
            return false;
        }
        match self.nodes.get_mut(&c) {
            Some(MNode::File(_, m) | MNode::Dir(m) | MNode::Link(_, m)) => *m = mode,
            None => return false,
        }
        true
    }

    /// Files and symlinks with what a diff compares.
    fn leaves(&self) -> BTreeMap<String, &MNode> {
        self.nodes
            .iter()
            .filter(|(_, n)| !matches!(n, MNode::Dir(_)))
            .map(|(k, n)| (path::join(k), n))
            .collect()
    }
}

/// The workspace as a model, read through its public API.
fn observe(ws: &Workspace) -> Model {
    let mut nodes = BTreeMap::new();
    for (p, meta) in ws.walk() {
        let c = path::parse(&p).expect("walk lists valid paths");
        assert_eq!(path::join(&c), p, "walk lists normalized paths");
        let node = match meta.kind {
            EntryKind::File => {
                let data = ws.read(&p).expect("walk lists readable files").to_vec();
                assert_eq!(data.len() as u64, meta.size);
                MNode::File(data, meta.mode)
            }
            EntryKind::Symlink => {
                let t = ws.read_link(&p).expect("walk lists readable links");
                assert_eq!(t.len() as u64, meta.size);
                MNode::Link(t.to_owned(), meta.mode)
            }
            EntryKind::Dir => {
                let listed = ws.list(&p).expect("walk lists listable dirs");
                assert_eq!(listed.len() as u64, meta.size);
                MNode::Dir(meta.mode)
            }
        };
        nodes.insert(c, node);
    }
    Model {
        nodes,
        state: ws.state().to_vec(),
    }
}

fn check(ws: &Workspace, model: &Model) {
    assert_eq!(&observe(ws), model, "workspace and model disagree");
}

struct Branch {
    ws: Workspace,
    model: Model,
}

fuzz_target!(|ops: Vec<Op>| {
    let mut cur = Branch {
        ws: Workspace::new(),
        model: Model::default(),
    };
    let mut forks: Vec<Branch> = Vec::new();
    let mut store: HashMap<ObjectId, Vec<u8>> = HashMap::new();
    // Commits made, with the model they hold.
    let mut commits: Vec<(ObjectId, Model)> = Vec::new();

    for op in ops.iter().take(64) {
        let (ws, model) = (&mut cur.ws, &mut cur.model);
        match op {
            Op::Write(p, d) => {
                let (p, d) = (p.render(), d.bytes());
                let ok = ws.write(&p, &d).is_ok();
                assert_eq!(ok, model.write(&p, d), "write {p:?}");
            }
            Op::Remove(p) => {
                let p = p.render();
                assert_eq!(ws.remove(&p).is_ok(), model.remove(&p), "remove {p:?}");
            }
            Op::Mkdir(p) => {
                let p = p.render();
                assert_eq!(ws.mkdir(&p).is_ok(), model.mkdir(&p), "mkdir {p:?}");
            }
            Op::Rename(a, b) => {
                let (a, b) = (a.render(), b.render());
                let ok = ws.rename(&a, &b).is_ok();
                assert_eq!(ok, model.rename(&a, &b), "rename {a:?} {b:?}");
            }
            Op::Symlink(p, t) => {
                let p = p.render();
                let ok = ws.symlink(&p, t).is_ok();
                assert_eq!(ok, model.symlink(&p, t), "symlink {p:?} -> {t:?}");
            }
            Op::SetMode(p, m) => {
                let (p, m) = (p.render(), u32::from(*m));
                let ok = ws.set_mode(&p, m).is_ok();
                assert_eq!(ok, model.set_mode(&p, m), "set_mode {p:?} {m:o}");
            }
            Op::SetState(d) => {
                let d = d.bytes();
                ws.set_state(d.clone());
                model.state = d;
            }
            Op::Commit { have_in, parent } => {
                let mut options = CommitOptions::new();
                if *parent {
                    if let Some(h) = ws.head() {
                        options = options.parent(h);
                    }
                }
                if *have_in {
                    options = options.have_in(&store);
                }
                let c = ws.commit(options).expect("commit of a valid workspace");
                let id = c.id();
                let complete = c.is_complete();
                let packed = c.packed();
                assert_eq!(packed.is_some(), complete);
                for (oid, bytes) in c.objects().iter() {
                    store.insert(*oid, bytes.to_vec());
                }
                // The store stays closed and holds everything the commit needs.
                assert!(SnapshotGraph::plan_checkout(id, &store).unwrap().is_empty());
                SnapshotGraph::reachable(id, &store).expect("store is closed");
                assert_eq!(ws.head(), Some(id));
                if let Some(bytes) = packed {
                    let restored = Workspace::from_snapshot(&bytes).expect("packed restores");
                    check(&restored, model);
                }
                commits.push((id, model.clone()));
            }
            Op::Checkout(i) => {
                if commits.is_empty() {
                    continue;
                }
                let (id, m) = &commits[*i as usize % commits.len()];
                // The drift check is not driven: the model comparison below checks
                // what the checkout left.
                let _restore = ws
                    .checkout(*id, &store, CheckoutPolicy::Force)
                    .expect("checkout of a commit made here");
                *model = m.clone();
                assert_eq!(ws.head(), Some(*id));
            }
            Op::Fork => {
                forks.push(Branch {
                    ws: ws.clone(),
                    model: model.clone(),
                });
                if forks.len() > 4 {
                    forks.remove(0);
                }
            }
            Op::Switch(i) => {
                if forks.is_empty() {
                    continue;
                }
                let i = *i as usize % forks.len();
                std::mem::swap(&mut cur, &mut forks[i]);
            }
            Op::Snapshot { compress } => {
                let bytes = ws
                    .snapshot_with_options(snapgraph::SnapshotOptions {
                        compress: *compress,
                        ..Default::default()
                    })
                    .expect("a fully loaded workspace packs");
                let restored = Workspace::from_snapshot(&bytes).expect("snapshot restores");
                check(&restored, model);
            }
            Op::Diff(a, b) => {
                if commits.is_empty() {
                    continue;
                }
                let (ia, ma) = &commits[*a as usize % commits.len()];
                let (ib, mb) = &commits[*b as usize % commits.len()];
                let d = SnapshotGraph::diff(*ia, *ib, &store).expect("diff of commits made here");
                let (la, lb) = (ma.leaves(), mb.leaves());
                let keys: BTreeSet<&String> = la.keys().chain(lb.keys()).collect();
                let (mut added, mut removed, mut modified) = (vec![], vec![], vec![]);
                for k in keys {
                    match (la.get(k), lb.get(k)) {
                        (None, Some(_)) => added.push(k.clone()),
                        (Some(_), None) => removed.push(k.clone()),
                        (Some(x), Some(y)) if x != y => modified.push(k.clone()),
                        _ => {}
                    }
                }
                assert_eq!(d.files_added, added, "diff: added");
                assert_eq!(d.files_removed, removed, "diff: removed");
                assert_eq!(d.files_modified, modified, "diff: modified");
                assert_eq!(d.state_changed, ma.state != mb.state, "diff: state");
            }
        }
        // Forks are unaffected by what happens to the current branch.
        check(&cur.ws, &cur.model);
    }
    for f in &forks {
        check(&f.ws, &f.model);
    }
});
