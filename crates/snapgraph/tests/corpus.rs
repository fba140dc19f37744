//! The format corpus: every released version's artifacts keep restoring, and the
//! current version's committed artifacts are not stale.
//!
//! Regenerate the current version with
//! `cargo run -p snapgraph --example gen_corpus` (files are only ever added: a
//! released version's directory is never rewritten).

mod corpus_gen;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use snapgraph::{ObjectId, SnapshotGraph, Workspace, FORMAT_VERSION};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus")
}

fn version_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("corpus/ exists")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with('v'))
        })
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn current_version_artifacts_are_not_stale() {
    let dir = corpus_dir().join(format!("v{FORMAT_VERSION}"));
    let artifacts = corpus_gen::build();
    for (name, bytes) in &artifacts.files {
        let committed = std::fs::read(dir.join(name)).unwrap_or_else(|_| {
            panic!(
                "corpus/v{FORMAT_VERSION}/{name} is missing: run `cargo run -p snapgraph --example gen_corpus`"
            )
        });
        if committed == *bytes {
            continue;
        }
        // A zstd frame's bytes are not part of the format, its content is: where this
        // target's encoder is not the reference one the corpus was written with (wasm32
        // writes with ruzstd, native targets with the C library), a compressed
        // artifact is current when it decodes to what this version writes.
        assert!(
            !REFERENCE_ZSTD_ENCODER && is_compressed(&committed) && same_content(&committed, bytes),
            "corpus/v{FORMAT_VERSION}/{name} differs from what this version writes. If the format \
             changed, bump FORMAT_VERSION and generate a new directory; never rewrite a released one."
        );
    }
}

/// Whether this target writes compressed snapshots with the encoder the committed
/// corpus was generated with (the C zstd library, native targets only).
const REFERENCE_ZSTD_ENCODER: bool = !cfg!(target_family = "wasm");

fn is_compressed(snapshot: &[u8]) -> bool {
    snapgraph::pack::parse_packed(snapshot, None)
        .is_ok_and(|u| u.flags & snapgraph::pack::FLAG_ZSTD != 0)
}

/// Same root, flags, metadata and objects once decompressed.
fn same_content(a: &[u8], b: &[u8]) -> bool {
    let (Ok(a), Ok(b)) = (
        snapgraph::pack::parse_packed(a, None),
        snapgraph::pack::parse_packed(b, None),
    ) else {
        return false;
    };
    a.root == b.root && a.flags == b.flags && a.metadata == b.metadata && a.objects == b.objects
}

#[test]
fn every_version_restores_to_its_expected_state() {
    let dirs = version_dirs();
    assert!(!dirs.is_empty(), "no corpus versions found");
    for dir in dirs {
        let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
        let expected = String::from_utf8(read("expected.txt")).unwrap();
        let sections = sections(&expected);

        // Packed snapshots: plain, keyed, compressed.
        let plain = Workspace::from_snapshot(&read("snapshot.snap")).unwrap();
        assert_eq!(
            corpus_gen::render(&plain),
            sections["snapshot"],
            "{dir:?} snapshot"
        );
        let keyed =
            Workspace::from_snapshot_keyed(&read("snapshot-keyed.snap"), &corpus_gen::CORPUS_KEY)
                .unwrap();
        assert_eq!(
            corpus_gen::render(&keyed),
            sections["snapshot"],
            "{dir:?} keyed"
        );
        let zstd = Workspace::from_snapshot(&read("snapshot-zstd.snap")).unwrap();
        assert_eq!(
            corpus_gen::render(&zstd),
            sections["snapshot"],
            "{dir:?} zstd"
        );

        // From version 2 on: a packed snapshot holding objects of two versions.
        if dir.join("snapshot-mixed.snap").exists() {
            let mixed = read("snapshot-mixed.snap");
            let ws = Workspace::from_snapshot(&mixed).unwrap();
            assert_eq!(
                corpus_gen::render(&ws),
                sections["snapshot mixed"],
                "{dir:?} mixed snapshot"
            );
            let versions: std::collections::BTreeSet<u8> =
                snapgraph::pack::parse_packed(&mixed, None)
                    .unwrap()
                    .objects
                    .iter()
                    .map(|(_, stored)| stored[1])
                    .collect();
            assert_eq!(versions.len(), 2, "{dir:?}: versions {versions:?}");
        }

        // The object store dump: every named commit, with its history.
        let store: HashMap<ObjectId, Vec<u8>> = corpus_gen::read_dump(&read("store.pack"));
        let refs = String::from_utf8(read("refs.txt")).unwrap();
        for line in refs.lines() {
            let (name, id) = line.split_once(' ').unwrap();
            let id: ObjectId = id.parse().unwrap();
            let rendered = corpus_gen::render_ref(name, id, &store);
            let key = format!("ref {name} {id}");
            assert_eq!(
                rendered,
                format!("## {key}\n{}", sections[key.as_str()]),
                "{dir:?} {name}"
            );
            // Everything each commit needs is in the dump, and verifies.
            SnapshotGraph::reachable_history(id, &store).unwrap();
        }
    }
}

#[test]
fn corpus_covers_split_directories_and_multi_chunk_files() {
    use snapgraph::object::tree::{Content, EntryNode, TreeNode};
    let dir = corpus_dir().join(format!("v{FORMAT_VERSION}"));
    let store = corpus_gen::read_dump(&std::fs::read(dir.join("store.pack")).unwrap());
    let refs = std::fs::read_to_string(dir.join("refs.txt")).unwrap();
    let base: ObjectId = refs
        .lines()
        .next()
        .unwrap()
        .split_once(' ')
        .unwrap()
        .1
        .parse()
        .unwrap();
    let root = SnapshotGraph::commit(base, &store).unwrap().tree;
    let node = |id: &ObjectId| TreeNode::decode(id, &store[id][2..]).unwrap();
    let TreeNode::Leaf(entries) = node(&root) else {
        panic!("small root expected")
    };
    let large = entries.iter().find(|e| e.name == "large-dir").unwrap();
    let EntryNode::Dir { tree, files, .. } = &large.node else {
        panic!()
    };
    assert_eq!(*files, 400);
    assert!(
        node(tree).level() >= 1,
        "large-dir must span several tree nodes"
    );
    let data = entries.iter().find(|e| e.name == "data").unwrap();
    let EntryNode::Dir { tree, .. } = &data.node else {
        panic!()
    };
    let TreeNode::Leaf(data_entries) = node(tree) else {
        panic!()
    };
    let multi = data_entries
        .iter()
        .find(|e| e.name == "multi-chunk.bin")
        .unwrap();
    assert!(matches!(
        multi.node,
        EntryNode::File {
            content: Content::Manifest(_),
            ..
        }
    ));
}

/// Splits expected.txt into `## name` sections.
fn sections(text: &str) -> HashMap<&str, String> {
    let mut out: HashMap<&str, String> = HashMap::new();
    let mut current = "";
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("## ") {
            current = name;
            out.entry(current).or_default();
        } else {
            let s = out.entry(current).or_default();
            s.push_str(line);
            s.push('\n');
        }
    }
    out
}

/// From version 2 on, the corpus holds a commit of its version on a version-1 parent,
/// whose tree references version-1 objects: each is verified by its own version's
/// id rule, and the whole history restores (above).
#[test]
fn mixed_history_links_both_versions() {
    use snapgraph::object::tree::{EntryNode, TreeNode};
    for dir in version_dirs() {
        let refs = std::fs::read_to_string(dir.join("refs.txt")).unwrap();
        let Some(mixed) = refs.lines().find_map(|l| l.strip_prefix("mixed ")) else {
            continue;
        };
        let mixed: ObjectId = mixed.parse().unwrap();
        let store = corpus_gen::read_dump(&std::fs::read(dir.join("store.pack")).unwrap());
        let version = |id: &ObjectId| store[id][1];
        let commit = SnapshotGraph::commit(mixed, &store).unwrap();
        assert_eq!(version(&mixed), 2);
        assert_eq!(version(&commit.tree), 2);
        assert_eq!(commit.parents.len(), 1);
        assert_eq!(version(&commit.parents[0]), 1);
        let TreeNode::Leaf(entries) =
            TreeNode::decode(&commit.tree, &store[&commit.tree][2..]).unwrap()
        else {
            panic!("small root expected")
        };
        let large = entries.iter().find(|e| e.name == "large-dir").unwrap();
        let EntryNode::Dir { tree, .. } = &large.node else {
            panic!()
        };
        assert_eq!(
            version(tree),
            1,
            "an unchanged subtree keeps its version-1 nodes"
        );
        // Every object verifies under the rule its version byte names.
        for (id, stored) in &store {
            snapgraph::object::references(id, stored).unwrap();
        }
        // The version-1 history below is the released one.
        let v1 = corpus_gen::v1_corpus();
        assert_eq!(commit.parents[0], v1.merge);
    }
}
