//! Helpers shared by the adapter tests: deterministic data, id listing, and the
//! several-writer-processes harness (a test binary re-runs itself as a child).
#![allow(dead_code)]

pub mod hollow;

use std::path::Path;
use std::process::Command;

use snapgraph::ObjectId;
use snapgraph_store::{RefUpdate, Store, StoreError};

pub fn id_of(bytes: &[u8]) -> ObjectId {
    ObjectId::hash_stored(bytes)
}

/// Text-like bytes: words from a small vocabulary (zstd shrinks them 3-4x).
pub fn text(seed: u64, len: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "fn",
        "let",
        "mut",
        "store",
        "object",
        "commit",
        "tree",
        "ref",
        "the",
        "of",
        "and",
        "return",
        "match",
        "Some",
        "None",
        "Ok",
        "Err",
        "self",
        "impl",
        "for",
        "in",
        "{",
        "}",
        "(",
        ")",
        ";",
        "\n",
        "    ",
        "snapgraph",
        "batch",
        "id",
        "bytes",
    ];
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % WORDS.len() as u64) as usize].as_bytes());
        out.push(b' ');
    }
    out.truncate(len);
    out
}

/// Incompressible bytes.
pub fn random(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Every id the store lists, sorted.
pub fn all_ids(store: &dyn Store) -> Vec<ObjectId> {
    let mut ids = Vec::new();
    store
        .for_each_id(&mut |id| {
            ids.push(id);
            Ok(())
        })
        .unwrap();
    ids.sort();
    ids
}

/// Bytes under `path` (a file's length, or a directory's files, recursively).
pub fn dir_size(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return std::fs::metadata(path).map_or(0, |m| m.len());
    };
    entries
        .flatten()
        .map(|e| {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                dir_size(&p)
            } else {
                e.metadata().map_or(0, |m| m.len())
            }
        })
        .sum()
}

// ----- several writer processes -----

pub const CHILD_INDEX: &str = "SNAPGRAPH_CHILD_INDEX";
pub const CHILDREN: usize = 3;
pub const ROUNDS: usize = 25;

/// The objects child `k` writes in round `r`: one every child writes, one of its
/// own (text) and one of its own (random).
pub fn child_objects(k: usize, r: usize) -> [Vec<u8>; 3] {
    [
        text(1_000_000 + r as u64, 2000),
        text((k * 1000 + r) as u64, 3000),
        random((k * 1000 + r) as u64, 9000),
    ]
}

pub fn run_child(store: &dyn Store, k: usize) {
    let mine = format!("heads/child-{k}");
    let mut prev = None;
    for r in 0..ROUNDS {
        let objects = child_objects(k, r);
        let batch: Vec<(ObjectId, &[u8])> = objects.iter().map(|b| (id_of(b), &b[..])).collect();
        store.put_many(&batch).unwrap();
        let new = batch[1].0;
        loop {
            let old = store.get_ref("heads/main").unwrap();
            let updates = [
                RefUpdate::new("heads/main", old, Some(new)),
                RefUpdate::new(mine.as_str(), prev, Some(new)),
            ];
            match store.update_refs(&updates, &format!("child {k} round {r}")) {
                Ok(()) => break,
                Err(StoreError::RefConflict { name, .. }) => assert_eq!(name, "heads/main"),
                Err(e) => panic!("child {k}: {e}"),
            }
        }
        prev = Some(new);
    }
}

/// Checks what `CHILDREN` children left in `store`.
pub fn check_children(store: &dyn Store) {
    let log = store.reflog("heads/main").unwrap();
    assert_eq!(log.len(), CHILDREN * ROUNDS, "one entry per successful CAS");
    assert_eq!(log[0].old, None);
    for pair in log.windows(2) {
        assert_eq!(pair[0].new, pair[1].old, "the reflog is a chain");
    }
    assert_eq!(
        store.get_ref("heads/main").unwrap(),
        log.last().unwrap().new
    );
    let mut expected = Vec::new();
    for k in 0..CHILDREN {
        let own = store.reflog(&format!("heads/child-{k}")).unwrap();
        assert_eq!(own.len(), ROUNDS);
        for pair in own.windows(2) {
            assert_eq!(pair[0].new, pair[1].old);
        }
        for r in 0..ROUNDS {
            expected.extend(child_objects(k, r));
        }
    }
    expected.sort();
    expected.dedup();
    let ids: Vec<ObjectId> = expected.iter().map(|b| id_of(b)).collect();
    let got = snapgraph_store::ObjectStore::get_many(&store, &ids).unwrap();
    for (want, got) in expected.iter().zip(got) {
        assert_eq!(
            got.as_ref(),
            Some(want),
            "every object readable and verified"
        );
    }
    let mut count = 0;
    store
        .for_each_id(&mut |_| {
            count += 1;
            Ok(())
        })
        .unwrap();
    assert_eq!(count, ids.len(), "no object twice, none missing");
}

pub fn spawn_children(var: &str, location: &Path) {
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..CHILDREN)
        .map(|k| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "child_writer_entry",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(var, location)
                .env(CHILD_INDEX, k.to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (k, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "child {k} failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Whether this process runs as root: the owner of a file it creates.
#[cfg(unix)]
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    let probe = tempfile::NamedTempFile::new().unwrap();
    probe.as_file().metadata().unwrap().uid() == 0
}

/// The uid and gid of the `nobody` user, from `/etc/passwd`.
#[cfg(unix)]
pub fn nobody() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd is readable");
    passwd
        .lines()
        .find_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            (f.len() > 3 && f[0] == "nobody").then(|| (f[2].parse().ok(), f[3].parse().ok()))
        })
        .and_then(|(u, g)| Some((u?, g?)))
        .expect("a `nobody` user in /etc/passwd: tests that need an unprivileged user drop to it")
}

/// Runs the test `name` of this test binary again in a child process, as an
/// unprivileged user, with `env` set, and fails unless it passes. Not root: the child
/// runs as this user. Root: the child runs as `nobody`, from a copy of the test binary
/// in a directory anyone can read (the checkout may not be). Never skips.
#[cfg(unix)]
pub fn run_unprivileged(name: &str, env: &[(&str, &std::ffi::OsStr)]) {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().unwrap();
    let copy_dir = tempfile::tempdir().unwrap();
    let mut cmd = if is_root() {
        std::fs::set_permissions(copy_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let copy = copy_dir.path().join("test-binary");
        std::fs::copy(&exe, &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        let (uid, gid) = nobody();
        let mut cmd = Command::new(copy);
        cmd.uid(uid).gid(gid).current_dir("/");
        cmd
    } else {
        Command::new(exe)
    };
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "unprivileged run of {name} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
