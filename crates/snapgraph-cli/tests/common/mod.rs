//! Helpers shared by the end-to-end tests: run the binary, build trees, plant
//! hostile commits.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// The binary under test: this build's, or `SNAPGRAPH_TEST_BIN` (to run the suite
/// against an installed or older binary).
pub static BIN: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    std::env::var("SNAPGRAPH_TEST_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_snapgraph").to_string())
});

pub fn run_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(&*BIN)
        .args(args)
        .arg("--quiet")
        .current_dir(dir)
        .output()
        .expect("the binary runs")
}

/// Runs `args` (`--quiet` added) in `dir` under an address-space limit of `kib` KiB
/// (`ulimit -v`, through `sh`), requiring success; returns stdout. What a command
/// holds in memory shows as an abort past the limit.
pub fn ok_within(dir: &Path, kib: u64, args: &[&str]) -> Vec<u8> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$@\" --quiet"))
        .arg("sh")
        .arg(&*BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("sh runs");
    assert!(
        out.status.success(),
        "snapgraph {args:?} within {kib} KiB failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Runs and requires success; returns stdout.
pub fn ok(dir: &Path, args: &[&str]) -> String {
    let out = run_in(dir, args);
    assert!(
        out.status.success(),
        "snapgraph {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs and requires failure with exit code 1; returns stderr.
pub fn fails(dir: &Path, args: &[&str]) -> String {
    let out = run_in(dir, args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "snapgraph {args:?} should fail: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("error: "), "{err}");
    err
}

pub fn json(dir: &Path, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    serde_json::from_str(&ok(dir, &a)).unwrap()
}

pub fn pseudo_random(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        out.extend_from_slice(&seed.to_le_bytes());
    }
    out.truncate(len);
    out
}

pub fn write(root: &Path, rel: &str, data: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, data).unwrap();
}

/// Sets every file's mtime 100 s back, so that none is "racy" (see the index docs).
pub fn age(root: &Path) {
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(100);
    for e in walk(root) {
        if e.1 == Kind::File {
            let f = std::fs::File::options().write(true).open(&e.0).unwrap();
            f.set_modified(past).unwrap();
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Link,
}

pub fn walk(root: &Path) -> Vec<(PathBuf, Kind)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if p.file_name().unwrap() == ".snapgraph" {
                continue;
            }
            let t = e.file_type().unwrap();
            if t.is_symlink() {
                out.push((p, Kind::Link));
            } else if t.is_dir() {
                out.push((p.clone(), Kind::Dir));
                stack.push(p);
            } else {
                out.push((p, Kind::File));
            }
        }
    }
    out
}

/// Everything observable of a tree: kind, bytes or target, exec bit.
pub fn snapshot_of(root: &Path) -> BTreeMap<String, String> {
    walk(root)
        .into_iter()
        .map(|(p, k)| {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let v = match k {
                Kind::Dir => "dir".to_string(),
                Kind::Link => format!("link {}", std::fs::read_link(&p).unwrap().display()),
                Kind::File => {
                    let m = std::fs::metadata(&p).unwrap();
                    let bytes = std::fs::read(&p).unwrap();
                    format!(
                        "file {:o} {} {}",
                        m.mode() & 0o777,
                        bytes.len(),
                        blake(&bytes)
                    )
                }
            };
            (rel, v)
        })
        .collect()
}

pub fn blake(b: &[u8]) -> String {
    // A cheap fingerprint (FNV-1a 64) is enough to compare trees.
    let mut h: u64 = 0xcbf29ce484222325;
    for x in b {
        h ^= u64::from(*x);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

/// A tree with binary files, a large file, unicode names, modes, symlinks and empty
/// directories.
pub fn rich_tree(root: &Path) {
    write(root, "README.md", b"# hello\n");
    write(root, "bin/tool.sh", b"#!/bin/sh\necho hi\n");
    std::fs::set_permissions(
        root.join("bin/tool.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    write(root, "data/blob.bin", &[0u8, 1, 2, 255, 254, 0, 0, 7]);
    write(root, "data/large.bin", &pseudo_random(5 << 20, 42));
    write(root, "data/medium.bin", &pseudo_random(100_000, 7));
    write(
        root,
        "ünïcødé/日本語 ファイル.txt",
        "こんにちは\n".as_bytes(),
    );
    write(root, "ünïcødé/emoji 🎉.md", b"party\n");
    std::fs::create_dir_all(root.join("empty/nested/deeper")).unwrap();
    std::fs::create_dir_all(root.join("also-empty")).unwrap();
    std::os::unix::fs::symlink("../README.md", root.join("data/readme-link")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", root.join("absolute-link")).unwrap();
    std::os::unix::fs::symlink("does/not/exist", root.join("dangling")).unwrap();
}

pub fn repo() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    ok(t.path(), &["init"]);
    t
}

pub fn field(summary: &str, name: &str) -> u64 {
    let at = summary
        .find(&format!("{name}: "))
        .unwrap_or_else(|| panic!("{name} in {summary}"));
    summary[at + name.len() + 2..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

pub fn commit_id(summary: &str) -> String {
    let start = summary.find(' ').unwrap() + 1;
    summary[start..start + 64].to_string()
}

pub fn stored(kind: snapgraph::ObjectKind, body: &[u8]) -> Vec<u8> {
    let mut s = vec![kind.byte(), 1];
    s.extend_from_slice(body);
    s
}

/// Puts a commit whose root tree is `entries` (unchecked) under branch `evil`.
pub fn plant(repo: &Path, entries: Vec<snapgraph::object::tree::Entry>) -> String {
    use snapgraph::object::tree::{Content, TreeNode};
    use snapgraph::{CommitObject, ObjectId, ObjectKind};
    use snapgraph_store::{ObjectStore, RefStore};
    let store = snapgraph_store::open(&format!(
        "sqlite:{}",
        repo.join(".snapgraph/store.db").display()
    ))
    .unwrap();
    let tree = stored(
        ObjectKind::Tree,
        &postcard::to_allocvec(&TreeNode::Leaf(entries)).unwrap(),
    );
    let tree_id = ObjectId::hash_stored(&tree);
    let commit = CommitObject {
        tree: tree_id,
        parents: vec![],
        generation: 1,
        state_size: 0,
        state: Content::Inline(Vec::new()),
        capabilities: None,
        reads: None,
        meta: BTreeMap::new(),
    };
    let (id, bytes) = commit.to_stored();
    store.put_many(&[(tree_id, &tree), (id, &bytes)]).unwrap();
    store
        .compare_and_swap_ref("heads/evil", None, id, "plant")
        .unwrap();
    id.to_string()
}

pub fn file_entry(name: &str, data: &[u8]) -> snapgraph::object::tree::Entry {
    use snapgraph::object::tree::{Content, Entry, EntryNode};
    Entry {
        name: name.into(),
        mode: 0o644,
        node: EntryNode::File {
            size: data.len() as u64,
            content: Content::Inline(data.to_vec()),
        },
    }
}

/// Runs `checkout REV` in `root` with its timeline on, requiring success and that it
/// moved the working directory by what differs (`switched (...)`) rather than
/// writing it whole; its JSON report and its timeline.
pub fn checkout_switched(root: &Path, rev: &str) -> (serde_json::Value, String) {
    let out = std::process::Command::new(&*BIN)
        .args(["checkout", rev, "--json"])
        .env("SNAPGRAPH_TIMINGS", "1")
        .current_dir(root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    let switched = err.contains("switched (") && !err.contains("declined");
    assert!(switched, "{err}");
    (serde_json::from_slice(&out.stdout).unwrap(), err)
}

/// `dirs` directories `dNN` of 20 files `fNN.txt` each, written under `root`.
pub fn grid(root: &Path, dirs: usize) {
    for d in 0..dirs {
        for f in 0..20 {
            write(
                root,
                &format!("d{d:02}/f{f:02}.txt"),
                format!("{d} {f}").as_bytes(),
            );
        }
    }
}
