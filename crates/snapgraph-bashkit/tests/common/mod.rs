//! Shared by the integration tests: running scripts on Bashkit's own `InMemoryFs` and
//! on `SnapgraphFs`, and reading back each one's whole tree.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use bashkit::{Bash, InMemoryFs, VfsEntryKind};
use snapgraph::EntryKind;
use snapgraph_bashkit::SnapgraphFs;

/// What one `exec` gave: stdout, stderr and exit code, or the interpreter's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ran {
        stdout: String,
        stderr: String,
        code: i32,
    },
    Failed(String),
}

/// One entry of a tree: kind, mode, and the bytes (file content or symlink target).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: &'static str,
    pub mode: u32,
    pub data: Vec<u8>,
}

pub type Tree = BTreeMap<String, Entry>;

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
}

pub async fn exec(bash: &mut Bash, script: &str) -> Outcome {
    match bash.exec(script).await {
        Ok(r) => Outcome::Ran {
            stdout: r.stdout.text_lossy().into_owned(),
            stderr: r.stderr.text_lossy().into_owned(),
            code: r.exit_code,
        },
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

/// Every entry of Bashkit's in-memory file system except `/`.
pub fn memory_tree(fs: &InMemoryFs) -> Tree {
    let mut tree = Tree::new();
    for e in fs.snapshot().entries() {
        let path = e.path.to_string_lossy().into_owned();
        if path == "/" {
            continue;
        }
        let (kind, data) = match &e.kind {
            VfsEntryKind::File { content } => ("file", content.clone()),
            VfsEntryKind::Directory => ("dir", Vec::new()),
            VfsEntryKind::Symlink { target } => (
                "symlink",
                target.to_string_lossy().into_owned().into_bytes(),
            ),
            VfsEntryKind::Fifo => ("fifo", Vec::new()),
        };
        tree.insert(
            path,
            Entry {
                kind,
                mode: e.mode,
                data,
            },
        );
    }
    tree
}

/// Every entry of the workspace behind `fs`, read through the workspace itself.
pub fn snapgraph_tree(fs: &SnapgraphFs) -> Tree {
    let ws = fs.workspace();
    ws.walk()
        .into_iter()
        .map(|(path, meta)| {
            let (kind, data) = match meta.kind {
                EntryKind::File => ("file", ws.read(&path).unwrap().to_vec()),
                EntryKind::Dir => ("dir", Vec::new()),
                EntryKind::Symlink => ("symlink", ws.read_link(&path).unwrap().as_bytes().to_vec()),
            };
            (
                path,
                Entry {
                    kind,
                    mode: meta.mode,
                    data,
                },
            )
        })
        .collect()
}

/// Two interpreters, one on each file system, built the same way.
pub struct Pair {
    pub memory: Arc<InMemoryFs>,
    pub snap: SnapgraphFs,
    pub on_memory: Bash,
    pub on_snap: Bash,
}

impl Pair {
    pub fn new() -> Self {
        let memory = Arc::new(InMemoryFs::new());
        let snap = SnapgraphFs::new();
        let on_memory = Bash::builder().fs(memory.clone()).build();
        let on_snap = Bash::builder().fs(Arc::new(snap.clone())).build();
        Self {
            memory,
            snap,
            on_memory,
            on_snap,
        }
    }

    /// Runs `script` on both; returns both outcomes.
    pub async fn exec(&mut self, script: &str) -> (Outcome, Outcome) {
        let a = exec(&mut self.on_memory, script).await;
        let b = exec(&mut self.on_snap, script).await;
        (a, b)
    }

    pub fn trees(&self) -> (Tree, Tree) {
        (memory_tree(&self.memory), snapgraph_tree(&self.snap))
    }
}

/// Where two trees differ, for a readable failure.
pub fn tree_diff(a: &Tree, b: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    for (p, e) in a {
        match b.get(p) {
            None => out.push(format!("only on InMemoryFs: {p} {e:?}")),
            Some(f) if f != e => out.push(format!("{p}: InMemoryFs {e:?} vs SnapgraphFs {f:?}")),
            _ => {}
        }
    }
    for (p, f) in b {
        if !a.contains_key(p) {
            out.push(format!("only on SnapgraphFs: {p} {f:?}"));
        }
    }
    out
}
