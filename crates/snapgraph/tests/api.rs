//! Integration tests of every documented call of the public API.

mod common;

use std::collections::{BTreeMap, HashSet};

use common::{
    assert_children_first, closure, fetch_loop, oracle_diff, persist, pseudo_random, snap, Store,
};
use snapgraph::limits::{MAX_NAME_LEN, MAX_PATH_LEN};
use snapgraph::LimitError;
use snapgraph::{
    CapabilityFingerprint, CheckoutError, CheckoutPolicy, CommitError, CommitOptions, Diff,
    EmptySource, EntryKind, FsError, GraphError, Limits, Metadata, ObjectError, ObjectId,
    ObjectKind, ObjectSet, ObjectSource, PathError, SnapshotGraph, Workspace,
};

fn meta(kind: EntryKind, mode: u32, size: u64) -> Metadata {
    Metadata { kind, mode, size }
}

fn not_found(path: &str) -> FsError {
    FsError::NotFound { path: path.into() }
}

/// A workspace with a bit of everything.
fn sample() -> Workspace {
    let mut ws = Workspace::new();
    ws.write("/README.md", b"# hello\n").unwrap();
    ws.write("/src/main.rs", b"fn main() {}\n").unwrap();
    ws.write("/src/lib/big.bin", pseudo_random(150_000, 1))
        .unwrap();
    ws.write("/src/lib/mid.bin", pseudo_random(5_000, 2))
        .unwrap();
    ws.write("/bin/run.sh", b"#!/bin/sh\n").unwrap();
    ws.set_mode("/bin/run.sh", 0o755).unwrap();
    ws.set_mode("/bin", 0o700).unwrap();
    ws.symlink("/bin/latest", "../src/main.rs").unwrap();
    ws.mkdir("/empty/nested").unwrap();
    ws.set_state(b"interpreter state".to_vec());
    ws
}

// ---------------------------------------------------------------- file system

#[test]
fn write_creates_parents_and_read_returns_the_bytes() {
    let mut ws = Workspace::new();
    ws.write("/a/b/c.txt", b"abc").unwrap();
    assert_eq!(ws.read("/a/b/c.txt").unwrap(), b"abc");
    assert_eq!(ws.metadata("/a").unwrap(), meta(EntryKind::Dir, 0o755, 1));
    assert_eq!(ws.metadata("/a/b").unwrap(), meta(EntryKind::Dir, 0o755, 1));
    assert_eq!(
        ws.metadata("/a/b/c.txt").unwrap(),
        meta(EntryKind::File, 0o644, 3)
    );
    // Overwriting replaces the bytes and keeps the mode.
    ws.set_mode("/a/b/c.txt", 0o600).unwrap();
    ws.write("/a/b/c.txt", b"longer content").unwrap();
    assert_eq!(ws.read("/a/b/c.txt").unwrap(), b"longer content");
    assert_eq!(
        ws.metadata("/a/b/c.txt").unwrap(),
        meta(EntryKind::File, 0o600, 14)
    );
    // Empty files exist.
    ws.write("/empty", b"").unwrap();
    assert_eq!(ws.read("/empty").unwrap(), b"");
    // write_shared takes shared bytes.
    let shared: std::sync::Arc<[u8]> = std::sync::Arc::from(&b"shared"[..]);
    ws.write_shared("/s", shared.clone()).unwrap();
    assert_eq!(ws.read("/s").unwrap(), &*shared);
}

#[test]
fn write_errors_name_the_path() {
    let mut ws = Workspace::new();
    ws.write("/f", b"x").unwrap();
    ws.mkdir("/d").unwrap();
    ws.symlink("/l", "/f").unwrap();
    assert_eq!(
        ws.write("/", b"x"),
        Err(FsError::IsADirectory { path: "/".into() })
    );
    assert_eq!(
        ws.write("/f/x", b"x"),
        Err(FsError::NotADirectory { path: "/f".into() })
    );
    assert_eq!(
        ws.write("/d", b"x"),
        Err(FsError::IsADirectory { path: "/d".into() })
    );
    assert_eq!(
        ws.write("/l", b"x"),
        Err(FsError::IsASymlink { path: "/l".into() })
    );
    // Symlinks are never followed, not even as a parent directory.
    assert_eq!(
        ws.write("/l/x", b"x"),
        Err(FsError::NotADirectory { path: "/l".into() })
    );
    // Nothing was created by the failed writes.
    assert_eq!(
        ws.walk().into_iter().map(|(p, _)| p).collect::<Vec<_>>(),
        vec!["/d", "/f", "/l"]
    );
    assert_eq!(ws.read("/f").unwrap(), b"x");
}

#[test]
fn read_errors() {
    let mut ws = Workspace::new();
    ws.write("/f", b"x").unwrap();
    ws.mkdir("/d").unwrap();
    ws.symlink("/l", "/f").unwrap();
    assert_eq!(ws.read("/nope"), Err(not_found("/nope")));
    assert_eq!(ws.read("/d/nope"), Err(not_found("/d/nope")));
    assert_eq!(
        ws.read("/d"),
        Err(FsError::IsADirectory { path: "/d".into() })
    );
    assert_eq!(
        ws.read("/"),
        Err(FsError::IsADirectory { path: "/".into() })
    );
    assert_eq!(
        ws.read("/l"),
        Err(FsError::IsASymlink { path: "/l".into() })
    );
    assert_eq!(
        ws.read("/f/x"),
        Err(FsError::NotADirectory { path: "/f".into() })
    );
}

#[test]
fn remove_files_symlinks_and_whole_trees() {
    let mut ws = sample();
    ws.remove("/README.md").unwrap();
    assert!(!ws.exists("/README.md"));
    ws.remove("/bin/latest").unwrap();
    assert!(!ws.exists("/bin/latest"));
    assert!(ws.exists("/bin/run.sh"));
    ws.remove("/src").unwrap();
    for p in ["/src", "/src/main.rs", "/src/lib", "/src/lib/big.bin"] {
        assert!(!ws.exists(p), "{p}");
    }
    let left: Vec<String> = ws.walk().into_iter().map(|(p, _)| p).collect();
    assert_eq!(left, vec!["/bin", "/bin/run.sh", "/empty", "/empty/nested"]);
    ws.remove("/empty/nested").unwrap();
    assert_eq!(ws.list("/empty").unwrap(), vec![]);
    assert_eq!(ws.remove("/"), Err(FsError::Root { op: "remove" }));
    assert_eq!(ws.remove("/src"), Err(not_found("/src")));
    assert_eq!(
        ws.remove("/bin/run.sh/x"),
        Err(FsError::NotADirectory {
            path: "/bin/run.sh".into()
        })
    );
    // Recreating a removed directory gives an empty one.
    ws.mkdir("/src").unwrap();
    assert!(ws.list("/src").unwrap().is_empty());
}

#[test]
fn mkdir_creates_parents_and_is_idempotent() {
    let mut ws = Workspace::new();
    ws.mkdir("/a/b/c").unwrap();
    for p in ["/a", "/a/b", "/a/b/c"] {
        assert_eq!(ws.metadata(p).unwrap().kind, EntryKind::Dir, "{p}");
    }
    ws.write("/a/b/c/f", b"1").unwrap();
    ws.set_mode("/a/b", 0o711).unwrap();
    ws.mkdir("/a/b/c").unwrap();
    ws.mkdir("/a/b").unwrap();
    ws.mkdir("/").unwrap();
    assert_eq!(ws.read("/a/b/c/f").unwrap(), b"1");
    assert_eq!(ws.metadata("/a/b").unwrap().mode, 0o711);
    assert_eq!(ws.walk().len(), 4);
    assert_eq!(
        ws.mkdir("/a/b/c/f"),
        Err(FsError::NotADirectory {
            path: "/a/b/c/f".into()
        })
    );
    assert_eq!(
        ws.mkdir("/a/b/c/f/g"),
        Err(FsError::NotADirectory {
            path: "/a/b/c/f".into()
        })
    );
}

#[test]
fn rename_files_and_directories() {
    let mut ws = Workspace::new();
    ws.write("/a.txt", b"A").unwrap();
    ws.set_mode("/a.txt", 0o640).unwrap();
    ws.rename("/a.txt", "/b.txt").unwrap();
    assert!(!ws.exists("/a.txt"));
    assert_eq!(ws.read("/b.txt").unwrap(), b"A");
    assert_eq!(ws.metadata("/b.txt").unwrap().mode, 0o640);

    // A directory moves with everything below it, keeping modes; missing parents of
    // the destination are created.
    ws.write("/dir/x/1", b"1").unwrap();
    ws.write("/dir/2", b"2").unwrap();
    ws.symlink("/dir/l", "x/1").unwrap();
    ws.set_mode("/dir/x", 0o700).unwrap();
    ws.rename("/dir", "/new/place/dir2").unwrap();
    assert!(!ws.exists("/dir"));
    assert_eq!(ws.read("/new/place/dir2/x/1").unwrap(), b"1");
    assert_eq!(ws.read("/new/place/dir2/2").unwrap(), b"2");
    assert_eq!(ws.read_link("/new/place/dir2/l").unwrap(), "x/1");
    assert_eq!(ws.metadata("/new/place/dir2/x").unwrap().mode, 0o700);

    // Replacing a file, and a symlink.
    ws.write("/c.txt", b"C").unwrap();
    ws.rename("/b.txt", "/c.txt").unwrap();
    assert_eq!(ws.read("/c.txt").unwrap(), b"A");
    assert!(!ws.exists("/b.txt"));
    ws.symlink("/link", "somewhere").unwrap();
    ws.rename("/c.txt", "/link").unwrap();
    assert_eq!(ws.read("/link").unwrap(), b"A");

    // Renaming onto itself (after normalization) is a no-op.
    ws.rename("/link", "/./link/").unwrap();
    assert_eq!(ws.read("/link").unwrap(), b"A");
}

#[test]
fn rename_errors() {
    let mut ws = Workspace::new();
    ws.write("/d/sub/f", b"f").unwrap();
    ws.write("/file", b"x").unwrap();
    ws.mkdir("/other").unwrap();
    let before = snap(&ws);
    assert_eq!(
        ws.rename("/d", "/d/sub/inner"),
        Err(FsError::IntoItself {
            from: "/d".into(),
            to: "/d/sub/inner".into()
        })
    );
    assert_eq!(
        ws.rename("/d", "/d/x"),
        Err(FsError::IntoItself {
            from: "/d".into(),
            to: "/d/x".into()
        })
    );
    // Onto an existing directory, whatever is moved.
    assert_eq!(
        ws.rename("/file", "/other"),
        Err(FsError::AlreadyExists {
            path: "/other".into()
        })
    );
    assert_eq!(
        ws.rename("/d", "/other"),
        Err(FsError::AlreadyExists {
            path: "/other".into()
        })
    );
    // A directory does not replace a file either.
    assert_eq!(
        ws.rename("/d", "/file"),
        Err(FsError::AlreadyExists {
            path: "/file".into()
        })
    );
    assert_eq!(ws.rename("/missing", "/x"), Err(not_found("/missing")));
    assert_eq!(ws.rename("/", "/x"), Err(FsError::Root { op: "rename" }));
    assert_eq!(ws.rename("/file", "/"), Err(FsError::Root { op: "rename" }));
    assert_eq!(
        ws.rename("/d/sub/f", "/file/x"),
        Err(FsError::NotADirectory {
            path: "/file".into()
        })
    );
    assert_eq!(snap(&ws), before, "failed renames change nothing");
}

#[test]
fn symlinks_are_stored_not_followed() {
    let mut ws = Workspace::new();
    ws.write("/target", b"t").unwrap();
    ws.symlink("/links/l", "../target").unwrap();
    assert_eq!(ws.read_link("/links/l").unwrap(), "../target");
    assert_eq!(
        ws.metadata("/links/l").unwrap(),
        meta(EntryKind::Symlink, 0o777, 9)
    );
    assert_eq!(ws.metadata("/links").unwrap().kind, EntryKind::Dir);
    // Dangling targets are fine: the target is never resolved.
    ws.symlink("/dangling", "/does/not/exist").unwrap();
    assert_eq!(ws.read_link("/dangling").unwrap(), "/does/not/exist");
    assert_eq!(
        ws.symlink("/target", "x"),
        Err(FsError::AlreadyExists {
            path: "/target".into()
        })
    );
    assert_eq!(
        ws.symlink("/links/l", "x"),
        Err(FsError::AlreadyExists {
            path: "/links/l".into()
        })
    );
    assert_eq!(
        ws.symlink("/", "x"),
        Err(FsError::AlreadyExists { path: "/".into() })
    );
    for (target, reason) in [
        ("", "empty symlink target"),
        ("a\0b", "symlink target contains NUL"),
    ] {
        assert_eq!(
            ws.symlink("/bad", target),
            Err(FsError::InvalidTarget {
                path: "/bad".into(),
                reason
            })
        );
    }
    let long = "x".repeat(4097);
    assert!(matches!(
        ws.symlink("/bad", &long),
        Err(FsError::InvalidTarget { path, .. }) if path == "/bad"
    ));
    ws.symlink("/ok", &"x".repeat(4096)).unwrap();
    assert!(!ws.exists("/bad"));
    assert_eq!(
        ws.read_link("/links"),
        Err(FsError::IsADirectory {
            path: "/links".into()
        })
    );
    assert_eq!(
        ws.read_link("/"),
        Err(FsError::IsADirectory { path: "/".into() })
    );
    assert_eq!(ws.read_link("/missing"), Err(not_found("/missing")));
    assert_eq!(
        ws.read_link("/target"),
        Err(FsError::NotASymlink {
            path: "/target".into()
        })
    );
}

#[test]
fn list_is_sorted_bytewise() {
    let mut ws = Workspace::new();
    for name in ["b", "a", "B", "aa", "é", "_", "0", "a.b"] {
        ws.write(&format!("/d/{name}"), name.as_bytes()).unwrap();
    }
    ws.mkdir("/d/zdir").unwrap();
    ws.symlink("/d/link", "a").unwrap();
    let names: Vec<String> = ws.list("/d").unwrap().into_iter().map(|e| e.name).collect();
    let mut expected = names.clone();
    expected.sort_by(|x, y| x.as_bytes().cmp(y.as_bytes()));
    assert_eq!(names, expected);
    assert_eq!(
        names,
        vec!["0", "B", "_", "a", "a.b", "aa", "b", "link", "zdir", "é"]
    );
    let list = ws.list("/d").unwrap();
    assert_eq!(list[0].metadata, meta(EntryKind::File, 0o644, 1));
    assert_eq!(list[7].metadata, meta(EntryKind::Symlink, 0o777, 1));
    assert_eq!(list[8].metadata, meta(EntryKind::Dir, 0o755, 0));
    assert_eq!(ws.list("/").unwrap().len(), 1);
    assert_eq!(
        ws.list("/d/a"),
        Err(FsError::NotADirectory {
            path: "/d/a".into()
        })
    );
    assert_eq!(
        ws.list("/d/link"),
        Err(FsError::NotADirectory {
            path: "/d/link".into()
        })
    );
    assert_eq!(ws.list("/nope"), Err(not_found("/nope")));
}

#[test]
fn metadata_and_exists() {
    let ws = sample();
    assert_eq!(ws.metadata("/").unwrap(), meta(EntryKind::Dir, 0o755, 4));
    assert_eq!(
        ws.metadata("/src/lib/big.bin").unwrap(),
        meta(EntryKind::File, 0o644, 150_000)
    );
    assert_eq!(ws.metadata("/bin").unwrap(), meta(EntryKind::Dir, 0o700, 2));
    assert_eq!(
        ws.metadata("/bin/latest").unwrap(),
        meta(EntryKind::Symlink, 0o777, 14)
    );
    assert_eq!(ws.metadata("/nope"), Err(not_found("/nope")));
    assert_eq!(
        ws.metadata("/README.md/x"),
        Err(FsError::NotADirectory {
            path: "/README.md".into()
        })
    );
    assert!(ws.exists("/"));
    assert!(ws.exists("/empty/nested"));
    assert!(ws.exists("/bin/latest"));
    assert!(!ws.exists("/nope"));
    assert!(!ws.exists("/README.md/x"));
    assert!(!ws.exists("relative"));
    assert!(!ws.exists("/.."));
}

#[test]
fn set_mode_checks_range_and_applies_to_every_kind() {
    let mut ws = sample();
    ws.set_mode("/README.md", 0o7777).unwrap();
    assert_eq!(ws.metadata("/README.md").unwrap().mode, 0o7777);
    ws.set_mode("/README.md", 0).unwrap();
    assert_eq!(ws.metadata("/README.md").unwrap().mode, 0);
    ws.set_mode("/bin/latest", 0o755).unwrap();
    assert_eq!(ws.metadata("/bin/latest").unwrap().mode, 0o755);
    ws.set_mode("/empty", 0o500).unwrap();
    assert_eq!(ws.metadata("/empty").unwrap().mode, 0o500);
    assert_eq!(
        ws.set_mode("/README.md", 0o10000),
        Err(FsError::InvalidMode {
            path: "/README.md".into(),
            mode: 0o10000
        })
    );
    assert_eq!(
        ws.set_mode("/README.md", u32::MAX),
        Err(FsError::InvalidMode {
            path: "/README.md".into(),
            mode: u32::MAX
        })
    );
    assert_eq!(ws.metadata("/README.md").unwrap().mode, 0);
    assert_eq!(
        ws.set_mode("/", 0o700),
        Err(FsError::Root { op: "set_mode" })
    );
    assert_eq!(ws.set_mode("/nope", 0o700), Err(not_found("/nope")));
}

#[test]
fn walk_lists_every_path_sorted_with_metadata() {
    let ws = sample();
    let walk = ws.walk();
    let paths: Vec<&str> = walk.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "/README.md",
            "/bin",
            "/bin/latest",
            "/bin/run.sh",
            "/empty",
            "/empty/nested",
            "/src",
            "/src/lib",
            "/src/lib/big.bin",
            "/src/lib/mid.bin",
            "/src/main.rs",
        ]
    );
    for (p, m) in &walk {
        assert_eq!(&ws.metadata(p).unwrap(), m, "{p}");
    }
    assert!(Workspace::new().walk().is_empty());
}

#[test]
fn deepest_paths_round_trip() {
    // Everything a path may name commits and checks out: a file and an empty
    // directory at the deepest allowed depth (256 components).
    let mut ws = Workspace::new();
    let deep = "/c".repeat(256);
    ws.write(&deep, b"deep file").unwrap();
    let deep_dir = format!("{}/e", "/d".repeat(255));
    ws.mkdir(&deep_dir).unwrap();
    ws.set_mode(&deep_dir, 0o700).unwrap();
    let c = ws.commit(CommitOptions::new()).unwrap();
    let mut other = Workspace::new();
    let _ = other
        .checkout(c.id(), c.objects(), CheckoutPolicy::default())
        .unwrap();
    assert_eq!(other.read(&deep).unwrap(), b"deep file");
    assert_eq!(
        other.metadata(&deep_dir).unwrap(),
        meta(EntryKind::Dir, 0o700, 0)
    );
    assert_eq!(snap(&other), snap(&ws));
    // One round per directory level at most (plus the commit and the root).
    let (local, rounds) = fetch_loop(c.id(), c.objects());
    assert!(rounds <= 258, "{rounds} rounds");
    assert_eq!(local.len(), c.object_count());
}

#[test]
fn state_round_trips() {
    let mut ws = Workspace::new();
    assert_eq!(ws.state(), b"");
    ws.set_state(b"abc".to_vec());
    assert_eq!(ws.state(), b"abc");
    ws.set_state(Vec::new());
    assert_eq!(ws.state(), b"");
}

#[test]
fn paths_are_normalized() {
    let mut ws = Workspace::new();
    ws.write("//a/./b//c.txt", b"1").unwrap();
    assert_eq!(ws.read("/a/b/c.txt").unwrap(), b"1");
    assert_eq!(ws.read("/a/b/../b/./c.txt").unwrap(), b"1");
    assert_eq!(ws.read("/a/x/../b/c.txt/").unwrap(), b"1");
    ws.mkdir("/a/b/../d/").unwrap();
    assert!(ws.exists("/a/d"));
    assert_eq!(
        ws.read("/a//nope"),
        Err(not_found("/a/nope")),
        "errors name the normalized path"
    );
    // A name of exactly 255 bytes, a path of exactly 4096 bytes and exactly 256
    // components are fine.
    let name255 = "n".repeat(MAX_NAME_LEN);
    ws.write(&format!("/{name255}"), b"x").unwrap();
    let comps256 = "/c".repeat(256);
    ws.write(&comps256, b"deep").unwrap();
    assert_eq!(ws.read(&comps256).unwrap(), b"deep");
    let path4096: String = (0..16)
        .map(|i| format!("/{}", "pq"[i % 2..i % 2 + 1].repeat(MAX_NAME_LEN)))
        .collect();
    assert_eq!(path4096.len(), MAX_PATH_LEN);
    ws.write(&path4096, b"long").unwrap();
    assert_eq!(ws.read(&path4096).unwrap(), b"long");
}

fn invalid_paths() -> Vec<String> {
    vec![
        String::new(),
        "relative".into(),
        "a/b".into(),
        "/..".into(),
        "/a/../..".into(),
        "/../etc".into(),
        "/a\0b".into(),
        format!("/{}", "n".repeat(MAX_NAME_LEN + 1)),
        format!("/{}", "a/".repeat(2100)),
        "/c".repeat(257),
    ]
}

#[test]
fn every_invalid_path_is_invalid_path_naming_it() {
    let mut ws = sample();
    let before = snap(&ws);
    for p in invalid_paths() {
        let check = |r: Result<(), FsError>, op: &str| match r {
            Err(FsError::InvalidPath(PathError { path, reason })) => {
                assert_eq!(path, p, "{op}: the error names the path as given");
                assert!(!reason.is_empty());
            }
            other => panic!("{op}({p:?}) gave {other:?}"),
        };
        check(ws.write(&p, b"x"), "write");
        check(ws.read(&p).map(|_| ()), "read");
        check(ws.remove(&p), "remove");
        check(ws.mkdir(&p), "mkdir");
        check(ws.rename(&p, "/ok"), "rename from");
        check(ws.rename("/README.md", &p), "rename to");
        check(ws.symlink(&p, "t"), "symlink");
        check(ws.read_link(&p).map(|_| ()), "read_link");
        check(ws.list(&p).map(|_| ()), "list");
        check(ws.metadata(&p).map(|_| ()), "metadata");
        check(ws.set_mode(&p, 0o644), "set_mode");
        assert!(!ws.exists(&p), "exists({p:?})");
        // The crate-wide error converts from both.
        let e: snapgraph::Error = ws.read(&p).unwrap_err().into();
        assert!(matches!(e, snapgraph::Error::Fs(FsError::InvalidPath(_))));
    }
    assert_eq!(snap(&ws), before);
}

#[test]
fn clones_are_independent() {
    let mut a = sample();
    let mut store = Store::new();
    let base = persist(&mut store, a.commit(CommitOptions::new()).unwrap());
    let mut b = a.clone();
    let snap_a = snap(&a);
    b.write("/README.md", b"changed in b").unwrap();
    b.write("/src/lib/new", b"new").unwrap();
    b.remove("/bin").unwrap();
    b.set_mode("/src", 0o700).unwrap();
    b.set_state(b"b state".to_vec());
    assert_eq!(
        snap(&a),
        snap_a,
        "writes to the clone do not show in the original"
    );
    a.write("/only-in-a", b"a").unwrap();
    assert!(!b.exists("/only-in-a"));
    assert_eq!(b.read("/README.md").unwrap(), b"changed in b");
    // Committing one does not move the other's head.
    let cb = b
        .commit(CommitOptions::new().parent(base).have_in(&store))
        .unwrap();
    assert_eq!(b.head(), Some(cb.id()));
    assert_eq!(a.head(), Some(base));
}

// ---------------------------------------------------------------- commit

#[test]
fn commit_accessors_agree() {
    let mut ws = sample();
    let c = ws.commit(CommitOptions::new()).unwrap();
    assert!(c.is_complete());
    assert_eq!(c.generation(), 1);
    assert_eq!(c.object_count(), c.objects().len());
    assert!(!c.objects().is_empty());
    let sum: u64 = c.objects().iter().map(|(_, b)| b.len() as u64).sum();
    assert_eq!(c.stored_bytes(), sum);
    assert_eq!(c.objects().stored_bytes(), sum);
    // Every object is stored under its hash, the commit comes last and every object
    // comes after what it references.
    let store: Store = c.objects().iter().map(|(i, b)| (*i, b.to_vec())).collect();
    for (id, bytes) in c.objects().iter() {
        assert_eq!(ObjectId::hash_stored(bytes), *id);
        assert_eq!(c.objects().get_bytes(id), Some(bytes));
        assert!(c.objects().contains_id(id));
    }
    let ids: Vec<ObjectId> = c.objects().ids().copied().collect();
    assert_eq!(ids.last(), Some(&c.id()));
    assert_eq!(store[&c.id()][0], ObjectKind::Commit.byte());
    assert_children_first(&ids, &store, false);
    // A complete commit holds exactly the closure of its commit.
    let all: HashSet<ObjectId> = ids.iter().copied().collect();
    assert_eq!(all, closure(&store, c.id(), false));
    // into_objects yields the same objects in the same order.
    let id = c.id();
    let objects = c.clone().into_objects();
    let from_into: Vec<(ObjectId, Vec<u8>)> = objects.into_iter().collect();
    let from_iter: Vec<(ObjectId, Vec<u8>)> =
        c.objects().iter().map(|(i, b)| (*i, b.to_vec())).collect();
    assert_eq!(from_into, from_iter);
    assert_eq!(ws.head(), Some(id));
    let decoded = SnapshotGraph::commit(id, &store).unwrap();
    assert!(decoded.parents.is_empty());
    assert_eq!(decoded.generation, 1);
    assert_eq!(decoded.state_size, ws.state().len() as u64);
}

#[test]
fn same_snapshot_same_id_no_timestamp() {
    let mut a = sample();
    let mut b = sample();
    let ca = a.commit(CommitOptions::new().meta("k", "v")).unwrap();
    let cb = b.commit(CommitOptions::new().meta("k", "v")).unwrap();
    assert_eq!(ca.id(), cb.id());
    let cc = b.commit(CommitOptions::new().meta("k", "w")).unwrap();
    assert_ne!(ca.id(), cc.id(), "metadata is part of the commit");
}

#[test]
fn recommit_unchanged_with_have_emits_only_the_commit() {
    let mut ws = sample();
    let mut store = Store::new();
    let first = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    let again = ws
        .commit(CommitOptions::new().parent(first).have(store.keys()))
        .unwrap();
    assert!(!again.is_complete());
    assert_eq!(again.object_count(), 1);
    let (only, _) = again.objects().iter().next().unwrap();
    assert_eq!(*only, again.id());
    assert_ne!(again.id(), first);
    let second = persist(&mut store, again);
    let t1 = SnapshotGraph::commit(first, &store).unwrap().tree;
    let t2 = SnapshotGraph::commit(second, &store).unwrap().tree;
    assert_eq!(t1, t2);
    // Same with have_in.
    let third = ws
        .commit(CommitOptions::new().parent(second).have_in(&store))
        .unwrap();
    assert_eq!(third.object_count(), 1);
    assert_eq!(third.objects().ids().next(), Some(&third.id()));
    // And after a checkout into a fresh workspace: it is clean too.
    let mut other = Workspace::new();
    let _ = other
        .checkout(second, &store, CheckoutPolicy::default())
        .unwrap();
    let fourth = other
        .commit(CommitOptions::new().parent(second).have_in(&store))
        .unwrap();
    assert_eq!(fourth.object_count(), 1);
    assert_eq!(
        SnapshotGraph::commit(fourth.id(), fourth.objects())
            .unwrap()
            .tree,
        t1
    );
}

#[test]
fn have_emits_only_what_changed() {
    let mut ws = sample();
    let mut store = Store::new();
    let first = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    ws.write("/src/main.rs", b"fn main() { println!(); }\n")
        .unwrap();
    let c = ws
        .commit(CommitOptions::new().parent(first).have_in(&store))
        .unwrap();
    // The commit, the root tree, /src's tree (the inline file lives in its entry).
    assert_eq!(
        c.object_count(),
        3,
        "{:?}",
        c.objects().ids().collect::<Vec<_>>()
    );
    for (id, _) in c.objects().iter() {
        assert!(!store.contains_key(id), "{id} was already held");
    }
    let second = persist(&mut store, c);
    // The store plus the incremental objects restore the commit.
    let mut other = Workspace::new();
    let _ = other
        .checkout(second, &store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(snap(&other), snap(&ws));
    // have_in(EmptySource) declares nothing held: everything is emitted, so the
    // commit is complete; an incremental one is not.
    let full = ws.commit(CommitOptions::new().parent(second)).unwrap();
    let declared = ws
        .commit(CommitOptions::new().parent(second).have_in(&EmptySource))
        .unwrap();
    assert_eq!(full.id(), declared.id());
    assert_eq!(full.object_count(), declared.object_count());
    assert!(full.is_complete());
    assert!(declared.is_complete());
    let incremental = ws
        .commit(CommitOptions::new().parent(second).have_in(&store))
        .unwrap();
    assert!(!incremental.is_complete());
}

#[test]
fn have_accumulates_and_oversized_commits_are_refused() {
    let mut ws = sample();
    let mut store = Store::new();
    let first = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    let ids: Vec<ObjectId> = store.keys().copied().collect();
    let (x, y) = ids.split_at(ids.len() / 2);
    let split = ws
        .commit(CommitOptions::new().parent(first).have(x).have(y.iter()))
        .unwrap();
    assert_eq!(split.object_count(), 1, "two have() calls add up");
    // have() and have_in() together.
    let mut half = Store::new();
    for id in y {
        half.insert(*id, store[id].clone());
    }
    let mixed = ws
        .commit(CommitOptions::new().parent(first).have(x).have_in(&half))
        .unwrap();
    assert_eq!(mixed.object_count(), 1);

    // Metadata beyond the object size limit: a typed error, and the head stays.
    let head = ws.head();
    let big = "m".repeat(4 << 20);
    match ws.commit(CommitOptions::new().parent(first).meta("big", big)) {
        Err(CommitError::TooLarge { size, limit }) => {
            assert_eq!(limit, 4 << 20);
            assert!(size > limit);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ws.head(), head);
    assert_eq!(snap(&ws), snap(&sample()));
}

#[test]
fn complete_commit_restores_alone() {
    let mut ws = sample();
    let c = ws.commit(CommitOptions::new()).unwrap();
    let mut other = Workspace::new();
    let _ = other
        .checkout(c.id(), c.objects(), CheckoutPolicy::default())
        .unwrap();
    assert_eq!(snap(&other), snap(&ws));
    assert_eq!(other.head(), Some(c.id()));
    // A complete commit of a child restores alone as well, though its parent's
    // objects are not in it.
    ws.write("/README.md", b"v2").unwrap();
    let child = ws.commit(CommitOptions::new().parent(c.id())).unwrap();
    assert!(child.is_complete());
    assert!(!child.objects().contains_id(&c.id()));
    let mut third = Workspace::new();
    let _ = third
        .checkout(child.id(), child.objects(), CheckoutPolicy::default())
        .unwrap();
    assert_eq!(snap(&third), snap(&ws));
}

#[test]
fn commit_options_parents_meta_and_parent_source() {
    let mut store = Store::new();
    let mut a = Workspace::new();
    a.write("/f", b"a").unwrap();
    let ra = persist(&mut store, a.commit(CommitOptions::new()).unwrap());
    a.write("/f", b"a2").unwrap();
    let a2 = persist(
        &mut store,
        a.commit(CommitOptions::new().parent(ra)).unwrap(),
    );
    a.write("/f", b"a3").unwrap();
    let a3c = a.commit(CommitOptions::new().parent(a2)).unwrap();
    assert_eq!(a3c.generation(), 3);
    let a3 = persist(&mut store, a3c);

    let mut b = Workspace::new();
    b.write("/g", b"b").unwrap();
    let rb = persist(&mut store, b.commit(CommitOptions::new()).unwrap());

    // b knows rb; a3 must come from the parent source.
    assert!(matches!(
        b.commit(CommitOptions::new().parents([rb, a3])),
        Err(CommitError::UnknownParent { id }) if id == a3
    ));
    let merge = b
        .commit(
            CommitOptions::new()
                .parents([rb, a3])
                .parent_source(&store)
                .meta("message_id", "m1")
                .meta("author", "x")
                .meta("message_id", "m2"),
        )
        .unwrap();
    assert_eq!(merge.generation(), 4, "1 + the largest parent generation");
    let merge = persist(&mut store, merge);
    let obj = SnapshotGraph::commit(merge, &store).unwrap();
    assert_eq!(obj.parents, vec![rb, a3], "parents keep their order");
    assert_eq!(obj.generation, 4);
    let expected: BTreeMap<String, String> = [("author", "x"), ("message_id", "m2")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(obj.meta, expected, "a later value for the same key wins");
    // parent() and parents() accumulate in order.
    let again = b
        .commit(
            CommitOptions::new()
                .parent(a3)
                .parents([rb])
                .parent(ra)
                .parent_source(&store),
        )
        .unwrap();
    let again = SnapshotGraph::commit(again.id(), again.objects()).unwrap();
    assert_eq!(again.parents, vec![a3, rb, ra]);
    assert_eq!(again.generation, 4);
}

#[test]
fn commit_parent_errors() {
    let mut store = Store::new();
    let mut ws = Workspace::new();
    let root = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    let stranger = ObjectId::from_bytes([7; 32]);
    assert!(matches!(
        ws.commit(CommitOptions::new().parent(stranger)),
        Err(CommitError::UnknownParent { id }) if id == stranger
    ));
    // A parent source that lacks it: no source given holds it, so it is unknown.
    assert!(matches!(
        ws.commit(CommitOptions::new().parent(stranger).parent_source(&store)),
        Err(CommitError::UnknownParent { id }) if id == stranger
    ));
    assert!(matches!(
        ws.commit(CommitOptions::new().parents([root, root])),
        Err(CommitError::DuplicateParent { id }) if id == root
    ));
    let many: Vec<ObjectId> = (0..257u32)
        .map(|i| {
            let mut b = [0u8; 32];
            b[..4].copy_from_slice(&i.to_le_bytes());
            ObjectId::from_bytes(b)
        })
        .collect();
    assert!(matches!(
        ws.commit(CommitOptions::new().parents(many)),
        Err(CommitError::TooManyParents {
            count: 257,
            max: 256
        })
    ));
    // A parent source whose "commit" is a chunk: a typed error, not a panic.
    let chunk = ws.commit(CommitOptions::new()).unwrap();
    let tree = SnapshotGraph::commit(chunk.id(), chunk.objects())
        .unwrap()
        .tree;
    assert!(matches!(
        Workspace::new().commit(CommitOptions::new().parent(tree).parent_source(chunk.objects())),
        Err(CommitError::Parent(ObjectError::WrongKind { id, expected: ObjectKind::Commit, actual: ObjectKind::Tree })) if id == tree
    ));
    // Failed commits do not move the head.
    assert_eq!(ws.head(), Some(chunk.id()));
}

#[test]
fn generation_numbers() {
    let mut store = Store::new();
    let mut ws = Workspace::new();
    let c1 = ws.commit(CommitOptions::new()).unwrap();
    assert_eq!(c1.generation(), 1);
    let c1 = persist(&mut store, c1);
    let mut chain = c1;
    for expected in 2..=6 {
        ws.write("/n", format!("{expected}")).unwrap();
        let c = ws.commit(CommitOptions::new().parent(chain)).unwrap();
        assert_eq!(c.generation(), expected);
        chain = persist(&mut store, c);
    }
    let mut side = Workspace::new();
    side.write("/side", b"s").unwrap();
    let s1 = side
        .commit(CommitOptions::new().parent(c1).parent_source(&store))
        .unwrap();
    let s1 = persist(&mut store, s1);
    // A merge is 1 + the largest parent generation, whichever parent order.
    for parents in [[s1, chain], [chain, s1]] {
        let m = side
            .commit(CommitOptions::new().parents(parents).parent_source(&store))
            .unwrap();
        assert_eq!(m.generation(), 7);
        assert_eq!(
            SnapshotGraph::commit(m.id(), m.objects())
                .unwrap()
                .generation,
            7
        );
    }
    // A checked-out commit's generation is known to the workspace.
    let mut fresh = Workspace::new();
    let _ = fresh
        .checkout(chain, &store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(
        fresh
            .commit(CommitOptions::new().parent(chain))
            .unwrap()
            .generation(),
        7
    );
}

#[test]
fn large_state_is_chunked_and_restored() {
    let mut ws = Workspace::new();
    ws.set_state(pseudo_random(300_000, 9));
    let mut store = Store::new();
    let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    let mut other = Workspace::new();
    other.set_state(b"old".to_vec());
    let _ = other
        .checkout(id, &store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(other.state(), ws.state());
    ws.set_state(b"small".to_vec());
    let id2 = persist(
        &mut store,
        ws.commit(CommitOptions::new().parent(id)).unwrap(),
    );
    let d = SnapshotGraph::diff(id, id2, &store).unwrap();
    assert!(d.state_changed);
    assert!(d.files_added.is_empty() && d.files_modified.is_empty());
}

// ---------------------------------------------------------------- checkout

#[test]
fn checkout_restores_everything() {
    let mut ws = sample();
    ws.set_mode("/empty/nested", 0o701).unwrap();
    ws.set_mode("/src/lib/big.bin", 0o600).unwrap();
    let mut store = Store::new();
    let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());

    // Into a workspace that already has other content: it is replaced.
    let mut other = Workspace::new();
    other.write("/old/file", b"old").unwrap();
    other.set_state(b"old state".to_vec());
    let _ = other
        .checkout(id, &store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(snap(&other), snap(&ws));
    assert!(!other.exists("/old"));
    assert_eq!(other.head(), Some(id));
    assert_eq!(other.metadata("/empty/nested").unwrap().mode, 0o701);
    assert_eq!(other.metadata("/bin").unwrap().mode, 0o700);
    assert_eq!(other.metadata("/bin/run.sh").unwrap().mode, 0o755);
    assert_eq!(other.read_link("/bin/latest").unwrap(), "../src/main.rs");
    assert_eq!(other.list("/empty/nested").unwrap(), vec![]);
    assert_eq!(other.state(), b"interpreter state");
    assert_eq!(
        other.read("/src/lib/big.bin").unwrap(),
        &pseudo_random(150_000, 1)[..]
    );

    // Checking out an older commit goes back.
    ws.write("/README.md", b"v2").unwrap();
    ws.remove("/empty").unwrap();
    let id2 = persist(
        &mut store,
        ws.commit(CommitOptions::new().parent(id)).unwrap(),
    );
    let mut w = Workspace::new();
    let _ = w.checkout(id2, &store, CheckoutPolicy::default()).unwrap();
    assert!(!w.exists("/empty"));
    let _ = w.checkout(id, &store, CheckoutPolicy::default()).unwrap();
    assert!(w.exists("/empty/nested"));
    assert_eq!(w.read("/README.md").unwrap(), b"# hello\n");
    // Every store shape works: BTreeMap, hashbrown, Arc values, boxed dyn sources.
    let bt: BTreeMap<ObjectId, std::sync::Arc<[u8]>> = store
        .iter()
        .map(|(k, v)| (*k, std::sync::Arc::from(&v[..])))
        .collect();
    let mut w2 = Workspace::new();
    let _ = w2.checkout(id, &bt, CheckoutPolicy::default()).unwrap();
    let boxed: Box<dyn ObjectSource> = Box::new(store.clone());
    let mut w3 = Workspace::new();
    let _ = w3.checkout(id, &*boxed, CheckoutPolicy::default()).unwrap();
    assert_eq!(snap(&w2), snap(&w3));
}

/// Everything observable, head included.
fn full_state(ws: &Workspace) -> (common::Snap, Option<ObjectId>) {
    (snap(ws), ws.head())
}

#[test]
fn failed_checkout_leaves_the_workspace_unchanged() {
    let mut ws = sample();
    let mut store = Store::new();
    let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());

    let mut target = Workspace::new();
    target.write("/mine", b"precious").unwrap();
    target.set_state(b"my state".to_vec());
    let base = persist(&mut store, target.commit(CommitOptions::new()).unwrap());
    target.write("/uncommitted", b"also precious").unwrap();
    let before = full_state(&target);
    assert_eq!(before.1, Some(base));

    // Missing commit.
    let ghost = ObjectId::from_bytes([9; 32]);
    assert!(matches!(
        target.checkout(ghost, &store, CheckoutPolicy::default()),
        Err(CheckoutError::Object(ObjectError::NotFound { id })) if id == ghost
    ));
    assert_eq!(full_state(&target), before);

    // Every object of the commit missing in turn (the last one needed fails too).
    let reachable = SnapshotGraph::reachable(id, &store).unwrap();
    for victim in &reachable {
        let mut damaged = store.clone();
        damaged.remove(victim);
        match target.checkout(id, &damaged, CheckoutPolicy::default()) {
            Err(CheckoutError::Object(ObjectError::NotFound { id })) => assert_eq!(id, *victim),
            other => panic!("removing {victim}: {other:?}"),
        }
        assert_eq!(full_state(&target), before);
    }
    // Still usable afterwards.
    let _ = target
        .checkout(id, &store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(snap(&target), snap(&ws));
}

#[test]
fn checkout_limits() {
    let mut ws = Workspace::new();
    for i in 0..20 {
        ws.write(&format!("/d{}/f{i}", i % 4), vec![b'x'; 100])
            .unwrap();
    }
    let mut store = Store::new();
    let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());

    let mut target = Workspace::new();
    target.write("/keep", b"k").unwrap();
    let before = full_state(&target);
    target.set_limits(Limits {
        max_files: 10,
        max_bytes: u64::MAX,
        ..Limits::default()
    });
    assert_eq!(target.limits().max_files, 10);
    assert!(matches!(
        target.checkout(id, &store, CheckoutPolicy::default()),
        Err(CheckoutError::Limit(LimitError::Exceeded { commit, what: "files", limit: 10 })) if commit == id
    ));
    assert_eq!(full_state(&target), before);
    target.set_limits(Limits {
        max_files: 1000,
        max_bytes: 1999,
        ..Limits::default()
    });
    assert!(matches!(
        target.checkout(id, &store, CheckoutPolicy::default()),
        Err(CheckoutError::Limit(LimitError::Exceeded { commit, what: "bytes", limit: 1999 })) if commit == id
    ));
    assert_eq!(full_state(&target), before);
    // Limits are inclusive: exactly 20 files and 2000 bytes restore.
    target.set_limits(Limits {
        max_files: 20,
        max_bytes: 2000,
        ..Limits::default()
    });
    let _ = target
        .checkout(id, &store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(snap(&target), snap(&ws));
    assert_eq!(
        target.limits(),
        Limits {
            max_files: 20,
            max_bytes: 2000,
            ..Limits::default()
        },
        "checkout keeps the workspace's limits"
    );
    assert_eq!(Workspace::new().limits(), Limits::default());
}

#[test]
fn checkout_capability_policies() {
    let snapshot_caps = CapabilityFingerprint::new()
        .builtin("python")
        .feature("sqlite")
        .fs_backend("mem")
        .engine_version("1.0");
    let mut ws = Workspace::new();
    ws.set_capabilities(snapshot_caps.clone());
    assert_eq!(
        CapabilityFingerprint::capture(&ws),
        Some(snapshot_caps.clone())
    );
    ws.write("/f", b"x").unwrap();
    let mut store = Store::new();
    let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    assert_eq!(
        SnapshotGraph::capabilities(id, &store).unwrap(),
        Some(snapshot_caps.clone())
    );

    // A workspace lacking a builtin and a feature.
    let mut poor = Workspace::new();
    poor.set_capabilities(CapabilityFingerprint::new().fs_backend("mem"));
    let before = full_state(&poor);
    match poor.checkout(id, &store, CheckoutPolicy::Superset) {
        Err(CheckoutError::Capabilities {
            commit,
            missing,
            extra,
        }) => {
            assert_eq!(commit, id);
            assert_eq!(missing, vec!["builtin:python", "feature:sqlite"]);
            assert!(extra.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(full_state(&poor), before);
    // Force restores regardless, and keeps the live fingerprint.
    let _ = poor.checkout(id, &store, CheckoutPolicy::Force).unwrap();
    assert_eq!(poor.read("/f").unwrap(), b"x");
    assert_eq!(
        poor.capabilities(),
        Some(&CapabilityFingerprint::new().fs_backend("mem"))
    );

    // A richer workspace passes Superset but not Strict; the engine version is
    // never compared.
    let mut rich = Workspace::new();
    rich.set_capabilities(snapshot_caps.clone().builtin("node").engine_version("2.0"));
    let _ = rich.checkout(id, &store, CheckoutPolicy::Superset).unwrap();
    let mut rich2 = Workspace::new();
    rich2.set_capabilities(snapshot_caps.clone().builtin("node"));
    match rich2.checkout(id, &store, CheckoutPolicy::Strict) {
        Err(CheckoutError::Capabilities { missing, extra, .. }) => {
            assert!(missing.is_empty());
            assert_eq!(extra, vec!["builtin:node"]);
        }
        other => panic!("{other:?}"),
    }
    let mut same = Workspace::new();
    same.set_capabilities(snapshot_caps.clone().engine_version("other"));
    let _ = same.checkout(id, &store, CheckoutPolicy::Strict).unwrap();
    // A different backend is missing.
    let mut other_backend = Workspace::new();
    other_backend.set_capabilities(snapshot_caps.clone().fs_backend("disk"));
    assert!(matches!(
        other_backend.checkout(id, &store, CheckoutPolicy::Superset),
        Err(CheckoutError::Capabilities { missing, .. }) if missing == vec!["fs_backend:mem"]
    ));
    // A commit without a fingerprint restores anywhere under Superset, and a
    // workspace without one can restore it under Strict.
    let mut plain = Workspace::new();
    let pid = persist(&mut store, plain.commit(CommitOptions::new()).unwrap());
    assert_eq!(SnapshotGraph::capabilities(pid, &store).unwrap(), None);
    let _ = rich
        .checkout(pid, &store, CheckoutPolicy::Superset)
        .unwrap();
    let _ = Workspace::new()
        .checkout(pid, &store, CheckoutPolicy::Strict)
        .unwrap();
    assert!(SnapshotGraph::external_reads(id, &store)
        .unwrap()
        .is_empty());
    assert_eq!(
        snapshot_caps.missing_from(&CapabilityFingerprint::new()),
        vec!["builtin:python", "feature:sqlite", "fs_backend:mem"]
    );
}

#[test]
fn content_rules_refuse_under_every_policy() {
    let mut ws = Workspace::new();
    ws.write("/db/app.sqlite", b"SQLite format 3\0rest of the database")
        .unwrap();
    let mut store = Store::new();
    let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    let mut target = Workspace::new();
    target.require_feature_for_prefix(b"SQLite format 3\0".to_vec(), "sqlite");
    let before = full_state(&target);
    for policy in [
        CheckoutPolicy::Superset,
        CheckoutPolicy::Strict,
        CheckoutPolicy::Force,
    ] {
        match target.checkout(id, &store, policy) {
            Err(CheckoutError::FeatureRequired {
                commit,
                path,
                feature,
            }) => {
                assert_eq!(commit, id);
                assert_eq!(path, "/db/app.sqlite");
                assert_eq!(feature, "sqlite");
            }
            other => panic!("{policy:?}: {other:?}"),
        }
        assert_eq!(full_state(&target), before);
    }
    // The state is checked too.
    let mut st = Workspace::new();
    st.set_state(b"SQLite format 3\0state".to_vec());
    let sid = persist(&mut store, st.commit(CommitOptions::new()).unwrap());
    assert!(matches!(
        target.checkout(sid, &store, CheckoutPolicy::Force),
        Err(CheckoutError::FeatureRequired { path, .. }) if path == "<state>"
    ));
    // With the feature, it restores (the snapshot recorded no fingerprint).
    target.set_capabilities(CapabilityFingerprint::new().feature("sqlite"));
    let _ = target
        .checkout(id, &store, CheckoutPolicy::Superset)
        .unwrap();
    assert_eq!(
        target.read("/db/app.sqlite").unwrap(),
        b"SQLite format 3\0rest of the database"
    );
}

// ---------------------------------------------------------------- forks and merges

#[test]
fn forks_diverge_independently_and_merge() {
    let mut store = Store::new();
    let mut base_ws = sample();
    let base = persist(&mut store, base_ws.commit(CommitOptions::new()).unwrap());

    let mut left = Workspace::new();
    let mut right = Workspace::new();
    let _ = left
        .checkout(base, &store, CheckoutPolicy::default())
        .unwrap();
    let _ = right
        .checkout(base, &store, CheckoutPolicy::default())
        .unwrap();
    left.write("/left.txt", b"L").unwrap();
    left.write("/README.md", b"left readme").unwrap();
    right.remove("/src/lib").unwrap();
    right.write("/right.txt", b"R").unwrap();
    assert!(!left.exists("/right.txt"));
    assert!(right.exists("/README.md") && right.read("/README.md").unwrap() == b"# hello\n");
    assert!(left.exists("/src/lib/big.bin"));

    let l = left
        .commit(CommitOptions::new().parent(base).have_in(&store))
        .unwrap();
    let l = persist(&mut store, l);
    let r = right
        .commit(CommitOptions::new().parent(base).have_in(&store))
        .unwrap();
    let r = persist(&mut store, r);
    let d = SnapshotGraph::diff(l, r, &store).unwrap();
    assert_eq!(d.files_added, vec!["/right.txt"]);
    assert_eq!(d.files_modified, vec!["/README.md"]);
    assert_eq!(
        d.files_removed,
        vec!["/left.txt", "/src/lib/big.bin", "/src/lib/mid.bin"]
    );

    // Merge: take the left side and add the right side's file.
    left.write("/right.txt", b"R").unwrap();
    let m = left
        .commit(
            CommitOptions::new()
                .parents([l, r])
                .parent_source(&store)
                .have_in(&store),
        )
        .unwrap();
    assert_eq!(m.generation(), 3);
    let m = persist(&mut store, m);
    assert_eq!(
        SnapshotGraph::commit(m, &store).unwrap().parents,
        vec![l, r]
    );
    let anc = SnapshotGraph::ancestry(m, &store, 100).unwrap();
    assert_eq!(anc.len(), 4);
    assert_eq!(anc[0], m);
    assert_eq!(anc[3], base);
    assert_eq!(
        anc[1..3].iter().copied().collect::<HashSet<_>>(),
        HashSet::from([l, r])
    );
    let mut check = Workspace::new();
    let _ = check
        .checkout(m, &store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(snap(&check), snap(&left));
    // The base workspace never saw any of it.
    assert_eq!(base_ws.head(), Some(base));
    assert!(!base_ws.exists("/left.txt"));
}

// ---------------------------------------------------------------- diff

fn commit_into(store: &mut Store, ws: &mut Workspace) -> ObjectId {
    persist(
        store,
        ws.commit(CommitOptions::new().have_in(&*store)).unwrap(),
    )
}

fn diff_of(a: ObjectId, b: ObjectId, store: &Store) -> Diff {
    SnapshotGraph::diff(a, b, store).unwrap()
}

#[test]
fn diff_reports_added_modified_removed_and_state() {
    let mut store = Store::new();
    let mut ws = sample();
    let a_snap = snap(&ws);
    let a = commit_into(&mut store, &mut ws);
    ws.write("/new/file", b"n").unwrap();
    ws.write("/README.md", b"changed").unwrap();
    ws.write("/src/lib/big.bin", {
        let mut v = pseudo_random(150_000, 1);
        v[75_000] ^= 1;
        v
    })
    .unwrap();
    ws.remove("/src/main.rs").unwrap();
    ws.set_state(b"new state".to_vec());
    let b_snap = snap(&ws);
    let b = commit_into(&mut store, &mut ws);
    let d = diff_of(a, b, &store);
    assert_eq!(d.files_added, vec!["/new/file"]);
    assert_eq!(d.files_modified, vec!["/README.md", "/src/lib/big.bin"]);
    assert_eq!(d.files_removed, vec!["/src/main.rs"]);
    assert!(d.state_changed);
    assert!(d.reads_added.is_empty() && d.reads_changed.is_empty() && d.reads_removed.is_empty());
    assert!(!d.is_empty());
    let (added, modified, removed, state) = oracle_diff(&a_snap, &b_snap);
    assert_eq!(
        (
            d.files_added,
            d.files_modified,
            d.files_removed,
            d.state_changed
        ),
        (added, modified, removed, state)
    );
    // Reversed, added and removed swap.
    let r = diff_of(b, a, &store);
    assert_eq!(r.files_added, vec!["/src/main.rs"]);
    assert_eq!(r.files_removed, vec!["/new/file"]);
    assert!(r.state_changed);
    // A commit against itself, or against another commit of the same snapshot, is
    // empty.
    assert_eq!(diff_of(a, a, &store), Diff::default());
    let mut again = common::build_from(a_snap.paths.keys(), &a_snap);
    let a2 = again
        .commit(CommitOptions::new().parent(b).parent_source(&store))
        .unwrap();
    let a2 = persist(&mut store, a2);
    assert_ne!(a2, a);
    assert_eq!(diff_of(a, a2, &store), Diff::default());
}

#[test]
fn diff_skips_identical_subtrees_without_reading_them() {
    let mut store = Store::new();
    let mut ws = Workspace::new();
    for i in 0..200 {
        ws.write(&format!("/same/d{}/f{i}", i % 5), pseudo_random(100, i))
            .unwrap();
    }
    ws.write("/changing", b"1").unwrap();
    let a = commit_into(&mut store, &mut ws);
    ws.write("/changing", b"2").unwrap();
    let b = commit_into(&mut store, &mut ws);
    // Drop every object under /same: the diff does not need them.
    let same_tree = {
        let root = SnapshotGraph::commit(a, &store).unwrap().tree;
        let node = snapgraph::object::tree::TreeNode::decode(&root, &store[&root][2..]).unwrap();
        match node {
            snapgraph::object::tree::TreeNode::Leaf(entries) => {
                entries
                    .into_iter()
                    .find(|e| e.name == "same")
                    .and_then(|e| e.refs())
                    .unwrap()
                    .0
            }
            other => panic!("{other:?}"),
        }
    };
    let mut pruned = store.clone();
    for id in closure(&store, same_tree, false) {
        pruned.remove(&id);
    }
    assert!(pruned.len() + 10 < store.len());
    let d = diff_of(a, b, &pruned);
    assert_eq!(d.files_modified, vec!["/changing"]);
    assert!(d.files_added.is_empty() && d.files_removed.is_empty());
}

#[test]
fn diff_mode_and_kind_changes() {
    let mut store = Store::new();
    let mut ws = Workspace::new();
    ws.write("/m", b"same").unwrap();
    ws.write("/f2d", b"file").unwrap();
    ws.write("/d2f/a", b"a").unwrap();
    ws.write("/d2f/sub/b", b"b").unwrap();
    ws.write("/f2l", b"target").unwrap();
    ws.mkdir("/dirmode").unwrap();
    ws.write("/dirmode/x", b"x").unwrap();
    let a = commit_into(&mut store, &mut ws);

    ws.set_mode("/m", 0o600).unwrap();
    ws.remove("/f2d").unwrap();
    ws.write("/f2d/inner", b"i").unwrap();
    ws.remove("/d2f").unwrap();
    ws.write("/d2f", b"now a file").unwrap();
    ws.remove("/f2l").unwrap();
    ws.symlink("/f2l", "target").unwrap();
    ws.set_mode("/dirmode", 0o700).unwrap();
    ws.mkdir("/new-empty-dir").unwrap();
    let b = commit_into(&mut store, &mut ws);
    let d = diff_of(a, b, &store);
    // A mode change and a file->symlink change are modifications; directory modes and
    // empty directories are not file changes.
    assert_eq!(d.files_modified, vec!["/f2l", "/m"]);
    assert_eq!(d.files_added, vec!["/d2f", "/f2d/inner"]);
    assert_eq!(d.files_removed, vec!["/d2f/a", "/d2f/sub/b", "/f2d"]);
    assert!(!d.state_changed);
}

#[test]
fn diff_of_removed_directory_lists_all_its_files() {
    let mut store = Store::new();
    let mut ws = Workspace::new();
    let mut expected = Vec::new();
    for i in 0..300 {
        let p = format!("/tree/d{}/e{}/f{i:03}", i % 3, i % 7);
        ws.write(&p, format!("{i}")).unwrap();
        expected.push(p);
    }
    ws.symlink("/tree/link", "d0").unwrap();
    expected.push("/tree/link".into());
    ws.mkdir("/tree/empty").unwrap();
    ws.write("/keep", b"k").unwrap();
    expected.sort();
    let a = commit_into(&mut store, &mut ws);
    ws.remove("/tree").unwrap();
    let b = commit_into(&mut store, &mut ws);
    let d = diff_of(a, b, &store);
    assert_eq!(d.files_removed, expected);
    assert!(d.files_added.is_empty() && d.files_modified.is_empty());
    let back = diff_of(b, a, &store);
    assert_eq!(back.files_added, expected);
}

// ---------------------------------------------------------------- ancestry

#[test]
fn ancestry_order_limit_and_merges() {
    let mut store = Store::new();
    let mut ws = Workspace::new();
    let mut chain = Vec::new();
    let mut prev: Option<ObjectId> = None;
    for i in 0..6 {
        ws.write("/i", format!("{i}")).unwrap();
        let opts = match prev {
            Some(p) => CommitOptions::new().parent(p),
            None => CommitOptions::new(),
        };
        let id = persist(&mut store, ws.commit(opts).unwrap());
        chain.push(id);
        prev = Some(id);
    }
    let tip = *chain.last().unwrap();
    let newest_first: Vec<ObjectId> = chain.iter().rev().copied().collect();
    assert_eq!(
        SnapshotGraph::ancestry(tip, &store, 100).unwrap(),
        newest_first
    );
    assert_eq!(
        SnapshotGraph::ancestry(tip, &store, 3).unwrap(),
        newest_first[..3]
    );
    assert_eq!(SnapshotGraph::ancestry(tip, &store, 1).unwrap(), vec![tip]);
    assert!(SnapshotGraph::ancestry(tip, &store, 0).unwrap().is_empty());

    // A side branch off chain[1] of length 3, merged with the tip.
    let mut side = Workspace::new();
    let _ = side
        .checkout(chain[1], &store, CheckoutPolicy::default())
        .unwrap();
    let mut side_ids = Vec::new();
    let mut p = chain[1];
    for i in 0..3 {
        side.write("/side", format!("{i}")).unwrap();
        p = persist(
            &mut store,
            side.commit(CommitOptions::new().parent(p)).unwrap(),
        );
        side_ids.push(p);
    }
    let merge = side
        .commit(CommitOptions::new().parents([p, tip]).parent_source(&store))
        .unwrap();
    let merge = persist(&mut store, merge);
    let anc = SnapshotGraph::ancestry(merge, &store, 100).unwrap();
    assert_eq!(anc.len(), 1 + 6 + 3);
    assert_eq!(anc[0], merge);
    let pos = |id: &ObjectId| anc.iter().position(|x| x == id).unwrap();
    for w in chain.windows(2) {
        assert!(pos(&w[1]) < pos(&w[0]));
    }
    for w in side_ids.windows(2) {
        assert!(pos(&w[1]) < pos(&w[0]));
    }
    assert!(pos(&side_ids[0]) < pos(&chain[1]));
    assert_eq!(*anc.last().unwrap(), chain[0]);
    // Deterministic, and a limit gives a prefix.
    for k in 0..anc.len() {
        assert_eq!(SnapshotGraph::ancestry(merge, &store, k).unwrap(), anc[..k]);
    }
}

#[test]
fn ancestry_stops_at_commits_missing_from_the_source() {
    let mut store = Store::new();
    let mut ws = Workspace::new();
    let c1 = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    ws.write("/a", b"a").unwrap();
    let c2 = persist(
        &mut store,
        ws.commit(CommitOptions::new().parent(c1)).unwrap(),
    );
    ws.write("/a", b"b").unwrap();
    let c3 = persist(
        &mut store,
        ws.commit(CommitOptions::new().parent(c2)).unwrap(),
    );
    // A shallow store: c2's commit object is gone (its tree is still there).
    let mut shallow = store.clone();
    shallow.remove(&c2);
    assert_eq!(
        SnapshotGraph::ancestry(c3, &shallow, 100).unwrap(),
        vec![c3]
    );
    shallow.remove(&c3);
    assert!(matches!(
        SnapshotGraph::ancestry(c3, &shallow, 100),
        Err(GraphError::Object(ObjectError::NotFound { id })) if id == c3
    ));
    // ancestry reads only commits: trees can be absent.
    let commits_only: Store = store
        .iter()
        .filter(|(_, b)| b[0] == ObjectKind::Commit.byte())
        .map(|(k, v)| (*k, v.clone()))
        .collect();
    assert_eq!(
        SnapshotGraph::ancestry(c3, &commits_only, 100).unwrap(),
        vec![c3, c2, c1]
    );
}

// ---------------------------------------------------------------- reachability

#[test]
fn reachable_lists_children_first_and_names_the_missing() {
    let mut store = Store::new();
    let mut ws = sample();
    let c1 = ws.commit(CommitOptions::new()).unwrap();
    let c1_objects: HashSet<ObjectId> = c1.objects().ids().copied().collect();
    let c1 = persist(&mut store, c1);
    ws.write("/src/lib/big.bin", pseudo_random(150_000, 77))
        .unwrap();
    ws.write("/added", b"x".repeat(1000)).unwrap();
    let c2 = ws
        .commit(CommitOptions::new().parent(c1).have_in(&store))
        .unwrap();
    let c2 = persist(&mut store, c2);

    let r1 = SnapshotGraph::reachable(c1, &store).unwrap();
    assert_eq!(r1.iter().copied().collect::<HashSet<_>>(), c1_objects);
    assert_eq!(r1.len(), c1_objects.len(), "no duplicates");
    assert_eq!(*r1.last().unwrap(), c1, "the commit comes last");
    assert_children_first(&r1, &store, false);

    let r2 = SnapshotGraph::reachable(c2, &store).unwrap();
    assert_children_first(&r2, &store, false);
    assert_eq!(
        r2.iter().copied().collect::<HashSet<_>>(),
        closure(&store, c2, false)
    );
    assert!(!r2.contains(&c1), "reachable does not follow parents");

    let h = SnapshotGraph::reachable_history(c2, &store).unwrap();
    assert_children_first(&h, &store, true);
    let hs: HashSet<ObjectId> = h.iter().copied().collect();
    assert_eq!(hs.len(), h.len());
    assert_eq!(hs, closure(&store, c2, true));
    assert!(hs.is_superset(&c1_objects));
    assert!(hs.is_superset(&r2.iter().copied().collect()));
    assert_eq!(hs, store.keys().copied().collect::<HashSet<_>>());
    assert_eq!(*h.last().unwrap(), c2);

    // A missing object is an error naming it, for every object.
    for victim in &r2 {
        let mut damaged = store.clone();
        damaged.remove(victim);
        assert!(
            matches!(
                SnapshotGraph::reachable(c2, &damaged),
                Err(GraphError::Object(ObjectError::NotFound { id })) if id == *victim
            ),
            "{victim}"
        );
    }
    let mut no_parent = store.clone();
    no_parent.remove(&c1);
    assert!(SnapshotGraph::reachable(c2, &no_parent).is_ok());
    assert!(matches!(
        SnapshotGraph::reachable_history(c2, &no_parent),
        Err(GraphError::Object(ObjectError::NotFound { id })) if id == c1
    ));
}

// ---------------------------------------------------------------- checkout planning

#[test]
fn plan_checkout_fetch_loop() {
    let mut ws = Workspace::new();
    ws.write("/a/b/c/d/deep.txt", b"deep").unwrap();
    ws.write("/a/b/big.bin", pseudo_random(2 << 20, 5)).unwrap();
    for i in 0..3000 {
        ws.write(&format!("/wide/f{i:04}"), format!("{i}")).unwrap();
    }
    ws.set_state(pseudo_random(100_000, 6));
    ws.set_capabilities(CapabilityFingerprint::new().builtin("sh"));
    let c = ws.commit(CommitOptions::new()).unwrap();
    let id = c.id();
    let full: Store = c.objects().iter().map(|(i, b)| (*i, b.to_vec())).collect();

    assert_eq!(
        SnapshotGraph::plan_checkout(id, &Store::new()).unwrap(),
        vec![id],
        "an empty store needs the commit first"
    );
    let (local, rounds) = fetch_loop(id, &full);
    // The commit; root tree; /a; /a/b; manifest levels; chunks: a handful of rounds.
    assert!(rounds <= 10, "{rounds} rounds");
    assert_eq!(local.len(), full.len(), "exactly the commit's objects");
    let mut restored = Workspace::new();
    restored.set_capabilities(CapabilityFingerprint::new().builtin("sh"));
    let _ = restored
        .checkout(id, &local, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(snap(&restored), snap(&ws));
    assert!(SnapshotGraph::plan_checkout(id, &full).unwrap().is_empty());

    // Planning against a store that holds an older commit asks only for the new
    // objects.
    ws.write("/wide/f0001", b"changed").unwrap();
    let c2 = ws
        .commit(CommitOptions::new().parent(id).have_in(&full))
        .unwrap();
    let new: HashSet<ObjectId> = c2.objects().ids().copied().collect();
    let mut both = full.clone();
    both.extend(c2.objects().iter().map(|(i, b)| (*i, b.to_vec())));
    let mut local2 = full.clone();
    let mut asked = HashSet::new();
    loop {
        let missing = SnapshotGraph::plan_checkout(c2.id(), &local2).unwrap();
        if missing.is_empty() {
            break;
        }
        for m in missing {
            assert!(asked.insert(m));
            local2.insert(m, both[&m].clone());
        }
    }
    assert_eq!(asked, new);
}

// ---------------------------------------------------------------- scale

#[test]
fn large_flat_directory_commits_incrementally() {
    let mut ws = Workspace::new();
    for i in 0..20_000 {
        ws.write(&format!("/flat/file-{i:05}.txt"), format!("content {i}\n"))
            .unwrap();
    }
    let mut store = Store::new();
    let first = ws.commit(CommitOptions::new()).unwrap();
    let first_count = first.object_count();
    let first = persist(&mut store, first);
    assert!(
        first_count > 100,
        "a 20,000-entry directory is split into nodes"
    );

    let new_content = pseudo_random(1000, 3);
    ws.write("/flat/file-12345.txt", &new_content).unwrap();
    let c = ws
        .commit(CommitOptions::new().parent(first).have_in(&store))
        .unwrap();
    let content_bytes = (new_content.len() + 2) as u64; // one chunk object
    assert!(
        c.stored_bytes() < content_bytes + 16 * 1024,
        "{} bytes for a one-file change",
        c.stored_bytes()
    );
    assert!(c.object_count() <= 8, "{} objects", c.object_count());
    let second = persist(&mut store, c);

    let counting = common::Counting::new(&store);
    let d = SnapshotGraph::diff(first, second, &counting).unwrap();
    assert_eq!(d.files_modified, vec!["/flat/file-12345.txt"]);
    assert!(d.files_added.is_empty() && d.files_removed.is_empty());
    // Only the nodes on the changed path are read, not the whole directory.
    let reads = counting.take();
    assert!(reads <= 12, "diff read {reads} objects");

    let mut other = Workspace::new();
    let _ = other
        .checkout(second, &store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(other.list("/flat").unwrap().len(), 20_000);
    assert_eq!(
        other.read("/flat/file-12345.txt").unwrap(),
        &new_content[..]
    );
    assert_eq!(other.read("/flat/file-00007.txt").unwrap(), b"content 7\n");
    assert_eq!(snap(&other), snap(&ws));
    // The same directory built in another order has the same tree.
    let mut rev = Workspace::new();
    for i in (0..20_000).rev() {
        let p = format!("/flat/file-{i:05}.txt");
        rev.write(&p, ws.read(&p).unwrap()).unwrap();
    }
    let rc = rev.commit(CommitOptions::new()).unwrap();
    assert_eq!(
        SnapshotGraph::commit(rc.id(), rc.objects()).unwrap().tree,
        SnapshotGraph::commit(second, &store).unwrap().tree
    );
}

#[test]
fn large_directory_incremental_edits_match_fresh_builds() {
    // A three-level directory edited in rounds: inserts (including before the first
    // and after the last name), removals and rewrites, committed incrementally. Every
    // round's tree must be the one a fresh build of the same files gets.
    let mut ws = Workspace::new();
    let name = |i: u64| format!("/big/e{i:06}");
    let mut present: std::collections::BTreeSet<u64> = (0..12_000).map(|i| i * 10 + 5).collect();
    for i in &present {
        ws.write(&name(*i), i.to_string()).unwrap();
    }
    let mut store = Store::new();
    let mut parent = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..24u64 {
        let edits = 1 + next() % 40;
        for _ in 0..edits {
            let r = next();
            let i = match r % 7 {
                0 => 0,
                1 => 200_000 + r % 50,
                _ => (r >> 8) % 120_100,
            };
            if (r >> 40) % 3 == 0 && present.contains(&i) {
                ws.remove(&name(i)).unwrap();
                present.remove(&i);
            } else {
                ws.write(&name(i), format!("{i}@{round}")).unwrap();
                present.insert(i);
            }
        }
        if round == 10 {
            // A run of removals spanning several nodes.
            let doomed: Vec<u64> = present.range(40_000..60_000).copied().collect();
            for i in doomed {
                ws.remove(&name(i)).unwrap();
                present.remove(&i);
            }
        }
        let c = ws
            .commit(CommitOptions::new().parent(parent).have_in(&store))
            .unwrap();
        assert!(
            c.object_count() < 200,
            "round {round}: {} objects",
            c.object_count()
        );
        let tree = SnapshotGraph::commit(c.id(), c.objects()).unwrap().tree;
        parent = persist(&mut store, c);
        if round % 6 == 5 {
            let mut fresh = Workspace::new();
            for i in &present {
                fresh.write(&name(*i), ws.read(&name(*i)).unwrap()).unwrap();
            }
            let fc = fresh.commit(CommitOptions::new()).unwrap();
            assert_eq!(
                SnapshotGraph::commit(fc.id(), fc.objects()).unwrap().tree,
                tree,
                "round {round}"
            );
        }
    }
    let mut other = Workspace::new();
    let _ = other
        .checkout(parent, &store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(other.list("/big").unwrap().len(), present.len());
    assert_eq!(snap(&other), snap(&ws));
}

#[test]
fn large_file_round_trips_and_small_edits_stay_small() {
    let mut data = pseudo_random(4 << 20, 0xfeed);
    let mut ws = Workspace::new();
    ws.write("/big.bin", &data).unwrap();
    let mut store = Store::new();
    let first = ws.commit(CommitOptions::new()).unwrap();
    assert!(first.stored_bytes() >= data.len() as u64);
    let first = persist(&mut store, first);

    let mut other = Workspace::new();
    let _ = other
        .checkout(first, &store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(other.read("/big.bin").unwrap(), &data[..]);

    let mid = data.len() / 2;
    data[mid..mid + 16].copy_from_slice(&[0xAB; 16]);
    ws.write("/big.bin", &data).unwrap();
    let c = ws
        .commit(CommitOptions::new().parent(first).have_in(&store))
        .unwrap();
    assert!(
        c.stored_bytes() < 64 * 1024,
        "{} new bytes for a 16-byte edit",
        c.stored_bytes()
    );
    let second = persist(&mut store, c);
    let _ = other
        .checkout(second, &store, CheckoutPolicy::default())
        .unwrap();
    assert_eq!(other.read("/big.bin").unwrap(), &data[..]);
    assert_eq!(
        SnapshotGraph::diff(first, second, &store)
            .unwrap()
            .files_modified,
        vec!["/big.bin"]
    );
}

// ---------------------------------------------------------------- ids and sets

#[test]
fn object_ids_and_sets() {
    let id = ObjectId::hash_stored(b"\x01\x01hello");
    let hex = id.to_hex();
    assert_eq!(hex.len(), 64);
    assert_eq!(hex.parse::<ObjectId>().unwrap(), id);
    assert_eq!(ObjectId::from_hex(hex.to_uppercase()).unwrap(), id);
    assert_eq!(id.to_string(), hex);
    assert_eq!(ObjectId::from_bytes(*id.as_bytes()), id);
    assert!(matches!(
        "zz".parse::<ObjectId>(),
        Err(snapgraph::ParseIdError::Length { len: 2 })
    ));
    assert!(matches!(
        "g".repeat(64).parse::<ObjectId>(),
        Err(snapgraph::ParseIdError::NotHex)
    ));
    for k in 1..=6u8 {
        assert_eq!(ObjectKind::from_byte(k).unwrap().byte(), k);
    }
    assert_eq!(ObjectKind::from_byte(0), None);
    assert_eq!(ObjectKind::from_byte(7), None);
    let set = ObjectSet::new();
    assert!(set.is_empty());
    assert_eq!(set.stored_bytes(), 0);
    assert!(!set.contains(&id).unwrap());
    assert_eq!(snapgraph::FORMAT_VERSION, 2);
}
