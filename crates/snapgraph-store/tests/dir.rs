//! The directory adapter: conformance, persistence, corruption, stray files, crash
//! recovery of ref batches, compression at rest, and several writer processes on
//! one root.

use std::fs;
use std::path::{Path, PathBuf};

use snapgraph::ObjectId;
use snapgraph_store::dir::{DirError, DirOptions, DirStore};
use snapgraph_store::{conformance, Compression, ObjectStore, RefStore, RefUpdate, StoreError};

mod common;
use common::*;

fn object_file(root: &Path, id: &ObjectId) -> PathBuf {
    let hex = id.to_hex();
    root.join("objects").join(&hex[..2]).join(&hex[2..])
}

#[test]
fn dir_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run(&DirStore::open(dir.path().join("store")).unwrap());
}

#[test]
fn layout_is_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let store = DirStore::open(root).unwrap();
    assert_eq!(store.root(), root);
    let blob = b"layout".to_vec();
    let id = id_of(&blob);
    store.put_many(&[(id, &blob)]).unwrap();
    assert!(object_file(root, &id).is_file());
    store
        .compare_and_swap_ref("heads/main", None, id, "line one\nline two \\ end")
        .unwrap();
    assert_eq!(
        fs::read_to_string(root.join("refs/heads/main")).unwrap(),
        format!("{id}\n")
    );
    let log = fs::read_to_string(root.join("logs/heads%main")).unwrap();
    assert_eq!(log, format!("- {id} line one\\nline two \\\\ end\n"));
    assert_eq!(
        store.reflog("heads/main").unwrap()[0].message,
        "line one\nline two \\ end"
    );
    assert!(!root.join("journal").exists());
    assert_eq!(fs::read_dir(root.join("tmp")).unwrap().count(), 0);

    // Deleting the last ref under a directory removes the directory.
    store.delete_ref("heads/main", id, "gone").unwrap();
    assert!(!root.join("refs/heads").exists());
    assert_eq!(store.reflog("heads/main").unwrap().len(), 2);
}

#[test]
fn reopening_sees_objects_refs_and_reflogs() {
    let dir = tempfile::tempdir().unwrap();
    let blob = text(3, 7000);
    let id = id_of(&blob);
    {
        let store = DirStore::open(dir.path()).unwrap();
        store.put_many(&[(id, &blob)]).unwrap();
        store
            .compare_and_swap_ref("heads/main", None, id, "first")
            .unwrap();
        store
            .compare_and_swap_ref("tags/v1", None, id, "tag")
            .unwrap();
    }
    let store = DirStore::open(dir.path()).unwrap();
    assert_eq!(store.get_many(&[id]).unwrap(), vec![Some(blob)]);
    assert_eq!(store.get_ref("heads/main").unwrap(), Some(id));
    assert_eq!(store.list_refs("").unwrap().len(), 2);
    assert_eq!(store.reflog("tags/v1").unwrap()[0].message, "tag");
}

#[test]
fn corrupt_files_are_corrupt_errors_naming_the_id() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let store = DirStore::open(root).unwrap();
    let blobs = [text(1, 4000), random(2, 4000), text(3, 100)];
    let ids: Vec<ObjectId> = blobs.iter().map(|b| id_of(b)).collect();
    let batch: Vec<(ObjectId, &[u8])> = ids.iter().zip(&blobs).map(|(i, b)| (*i, &b[..])).collect();
    store.put_many(&batch).unwrap();

    let flip = |id: &ObjectId, at: usize| {
        let path = object_file(root, id);
        let mut bytes = fs::read(&path).unwrap();
        let at = at.min(bytes.len() - 1);
        bytes[at] ^= 0x01;
        fs::write(&path, bytes).unwrap();
    };
    flip(&ids[0], 10_000); // the last byte of a zstd frame
    flip(&ids[1], 2000); // a byte of a raw record
    fs::write(object_file(root, &ids[2]), b"").unwrap(); // truncated to nothing

    for id in &ids {
        match store.get_many(&[*id]) {
            Err(StoreError::Corrupt { id: bad, .. }) => assert_eq!(bad, *id),
            other => panic!("expected Corrupt for {id}, got {other:?}"),
        }
    }
    assert!(store.has_many(&ids).unwrap().is_empty());
}

#[test]
fn stray_files_are_ignored_by_for_each_id() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let store = DirStore::open(root).unwrap();
    let blob = b"real".to_vec();
    let id = id_of(&blob);
    store.put_many(&[(id, &blob)]).unwrap();
    let fan = object_file(root, &id).parent().unwrap().to_path_buf();
    fs::write(fan.join("not-an-object"), b"x").unwrap();
    fs::write(fan.join("1234.tmp"), b"x").unwrap();
    fs::write(fan.join("A".repeat(62)), b"x").unwrap(); // uppercase hex
    fs::write(fan.join("0".repeat(61)), b"x").unwrap(); // too short
    fs::create_dir(fan.join("0".repeat(62))).unwrap(); // a directory named like one
    fs::write(root.join("objects/zz"), b"x").unwrap();
    fs::create_dir_all(root.join("objects/zz0")).unwrap();
    fs::create_dir_all(root.join("objects/AB")).unwrap();
    fs::write(root.join("objects/AB").join("0".repeat(62)), b"x").unwrap();
    fs::write(root.join("objects/README"), b"x").unwrap();
    fs::write(root.join("tmp/12-34.tmp"), b"half an object").unwrap();
    assert_eq!(all_ids(&store), vec![id]);
    // Stray files in refs/ that are not ref names are skipped too.
    fs::write(root.join("refs/bad name"), b"x").unwrap();
    assert!(store.list_refs("").unwrap().is_empty());
}

#[test]
fn malformed_ref_files_and_reflogs_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let store = DirStore::open(root).unwrap();
    fs::create_dir_all(root.join("refs/heads")).unwrap();
    fs::write(root.join("refs/heads/bad"), b"not an id\n").unwrap();
    fs::write(root.join("logs/heads%bad"), b"garbage line\n").unwrap();
    for err in [
        store.get_ref("heads/bad").unwrap_err(),
        store.list_refs("heads/").unwrap_err(),
        store.reflog("heads/bad").unwrap_err(),
    ] {
        match &err {
            StoreError::Backend { source, context } => {
                assert!(
                    matches!(
                        source.downcast_ref::<DirError>(),
                        Some(DirError::Malformed { .. })
                    ),
                    "{err:?}"
                );
                assert!(context.contains("heads"), "{context}");
            }
            other => panic!("expected a backend error, got {other:?}"),
        }
    }
}

#[test]
fn a_torn_reflog_line_is_ignored_and_cut_by_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let store = DirStore::open(root).unwrap();
    let (a, b) = (id_of(b"a"), id_of(b"b"));
    store
        .compare_and_swap_ref("heads/t", None, a, "one")
        .unwrap();
    let log = root.join("logs/heads%t");
    let mut text = fs::read(&log).unwrap();
    text.extend_from_slice(b"0123 half a li");
    fs::write(&log, text).unwrap();
    assert_eq!(store.reflog("heads/t").unwrap().len(), 1);
    store
        .compare_and_swap_ref("heads/t", Some(a), b, "two")
        .unwrap();
    let entries = store.reflog("heads/t").unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!((entries[1].old, entries[1].new), (Some(a), Some(b)));
}

#[test]
fn a_leftover_journal_is_rolled_forward() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let store = DirStore::open(root).unwrap();
    let (a, b, c) = (id_of(b"a"), id_of(b"b"), id_of(b"c"));
    store.compare_and_swap_ref("heads/x", None, a, "x").unwrap();
    // A crash after the journal of a two-ref batch was written and one ref moved,
    // with its reflog entry appended, but before the other ref moved.
    fs::write(
        root.join("journal"),
        format!("snapgraph refs journal 1\nmove\\nboth\nheads/x {a} {b}\nheads/y - {c}\n"),
    )
    .unwrap();
    fs::write(root.join("refs/heads/x"), format!("{b}\n")).unwrap();
    fs::write(
        root.join("logs/heads%x"),
        format!("- {a} x\n{a} {b} move\\nboth\n"),
    )
    .unwrap();

    // A reader rolls it forward before answering.
    assert_eq!(store.get_ref("heads/y").unwrap(), Some(c));
    assert!(!root.join("journal").exists());
    assert_eq!(store.get_ref("heads/x").unwrap(), Some(b));
    let x = store.reflog("heads/x").unwrap();
    assert_eq!(x.len(), 2, "the entry already appended is not repeated");
    let y = store.reflog("heads/y").unwrap();
    assert_eq!(y.len(), 1);
    assert_eq!(
        (y[0].old, y[0].new, y[0].message.as_str()),
        (None, Some(c), "move\nboth")
    );

    // A journal that does not parse stops ref operations with a typed error.
    fs::write(root.join("journal"), b"nonsense").unwrap();
    let err = store.get_ref("heads/x").unwrap_err();
    assert!(err.to_string().contains("journal"), "{err}");
}

#[test]
fn refs_as_paths_refuse_file_directory_clashes_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let store = DirStore::open(dir.path()).unwrap();
    let (a, b) = (id_of(b"a"), id_of(b"b"));
    store.compare_and_swap_ref("heads/a", None, a, "a").unwrap();
    store
        .compare_and_swap_ref("heads/b/c", None, a, "bc")
        .unwrap();
    for name in ["heads/a/x", "heads/b", "heads"] {
        assert!(
            matches!(
                store.update_refs(
                    &[
                        RefUpdate::new("heads/new", None, Some(b)),
                        RefUpdate::new(name, None, Some(b)),
                    ],
                    "clash"
                ),
                Err(StoreError::InvalidRefName { .. })
            ),
            "{name}"
        );
    }
    assert!(matches!(
        store.update_refs(
            &[
                RefUpdate::new("tags/v", None, Some(b)),
                RefUpdate::new("tags/v/1", None, Some(b)),
            ],
            "clash within the batch"
        ),
        Err(StoreError::InvalidRefName { .. })
    ));
    assert_eq!(store.get_ref("heads/new").unwrap(), None, "nothing applied");
    assert_eq!(store.list_refs("").unwrap().len(), 2);
    // The reflog of a deleted ref does not block a name under it.
    store.delete_ref("heads/a", a, "drop").unwrap();
    store
        .compare_and_swap_ref("heads/a/x", None, b, "now fine")
        .unwrap();
    assert_eq!(store.reflog("heads/a").unwrap().len(), 2);
    assert_eq!(
        store.list_refs("heads/").unwrap(),
        vec![("heads/a/x".to_string(), b), ("heads/b/c".to_string(), a)]
    );
    assert_eq!(store.list_refs("heads/a").unwrap().len(), 1);
    assert_eq!(store.list_refs("../").unwrap(), vec![]);
}

#[test]
fn an_unusable_root_is_a_typed_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    fs::write(&file, b"x").unwrap();
    for root in [file.clone(), file.join("below")] {
        match DirStore::open(&root) {
            Err(err @ StoreError::Backend { .. }) => {
                assert!(
                    err.to_string().contains(&file.display().to_string()),
                    "{err}"
                );
            }
            other => panic!(
                "expected a backend error for {}, got {other:?}",
                root.display()
            ),
        }
    }
}

/// The environment variable that makes `a_read_only_root_is_a_permission_error` the
/// body of an unprivileged child process, checking the directory it names.
const LOCKED_ROOT: &str = "SNAPGRAPH_TEST_LOCKED_ROOT";

/// A read-only root is refused with the path and `PermissionDenied`. Root may write
/// anywhere, so under root (as CI runs) the check runs in a child process of this test
/// binary as user `nobody` instead of being skipped.
#[cfg(unix)]
#[test]
fn a_read_only_root_is_a_permission_error() {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(locked) = std::env::var(LOCKED_ROOT) {
        let locked = std::path::PathBuf::from(locked);
        let err = DirStore::open(&locked).unwrap_err();
        match &err {
            StoreError::Backend { source, context } => {
                assert!(context.contains(&locked.display().to_string()), "{err}");
                let io = source.downcast_ref::<std::io::Error>().unwrap();
                assert_eq!(io.kind(), std::io::ErrorKind::PermissionDenied);
            }
            other => panic!("expected a backend error, got {other:?}"),
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let locked = dir.path().join("locked");
    fs::create_dir(&locked).unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o555)).unwrap();
    common::run_unprivileged(
        "a_read_only_root_is_a_permission_error",
        &[(LOCKED_ROOT, locked.as_os_str())],
    );
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn compression_shrinks_text_at_rest() {
    let dir = tempfile::tempdir().unwrap();
    let blobs: Vec<Vec<u8>> = (0..200).map(|i| text(i, 4096)).collect();
    let batch: Vec<(ObjectId, &[u8])> = blobs.iter().map(|b| (id_of(b), &b[..])).collect();
    let raw_total: u64 = blobs.iter().map(|b| b.len() as u64).sum();
    let zstd_root = dir.path().join("zstd");
    DirStore::open(&zstd_root)
        .unwrap()
        .put_many(&batch)
        .unwrap();
    let raw_root = dir.path().join("raw");
    DirStore::open_with(
        &raw_root,
        DirOptions {
            compression: Compression::None,
        },
    )
    .unwrap()
    .put_many(&batch)
    .unwrap();
    let zstd = dir_size(&zstd_root.join("objects"));
    let raw = dir_size(&raw_root.join("objects"));
    assert!(raw >= raw_total);
    assert!(zstd * 2 < raw_total, "zstd {zstd} of {raw_total}");
}

// ----- several writer processes -----

const CHILD_DIR: &str = "SNAPGRAPH_CHILD_DIR";

/// Not a test of its own: the body of a child process (see
/// `several_processes_converge`); returns at once unless the environment says so.
#[test]
fn child_writer_entry() {
    let Ok(root) = std::env::var(CHILD_DIR) else {
        return;
    };
    let k: usize = std::env::var(CHILD_INDEX).unwrap().parse().unwrap();
    run_child(&DirStore::open(&root).unwrap(), k);
}

#[test]
fn several_processes_converge() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("multi");
    drop(DirStore::open(&root).unwrap());
    spawn_children(CHILD_DIR, &root);
    let store = DirStore::open(&root).unwrap();
    check_children(&store);
    assert_eq!(
        fs::read_dir(root.join("tmp")).unwrap().count(),
        0,
        "no temp file left"
    );
    assert!(!root.join("journal").exists());
}
