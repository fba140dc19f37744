//! The corpus: what a format version's artifacts hold, how they are generated, and the
//! stable text rendering their expected state is compared in.
//!
//! Shared by `tests/corpus.rs` (checks) and `examples/gen_corpus.rs` (writes). The
//! rendering below is part of the corpus contract: change it only by adding lines that
//! old expected files would also produce.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use snapgraph::{
    CapabilityFingerprint, CheckoutOptions, CheckoutPolicy, CommitOptions, DriftPolicy, EntryKind,
    ExternalRead, ObjectId, SnapshotGraph, SnapshotOptions, Workspace,
};

/// The key of `snapshot-keyed.snap`.
pub const CORPUS_KEY: [u8; 32] = [0x42; 32];

/// Deterministic pseudo-random bytes.
pub fn bytes(len: usize, mut seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        out.extend_from_slice(&seed.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn base() -> Workspace {
    let mut ws = Workspace::new();
    ws.set_capabilities(
        CapabilityFingerprint::new()
            .builtin("cat")
            .builtin("grep")
            .feature("sqlite")
            .fs_backend("memfs")
            .engine_version("corpus"),
    );
    ws.write(
        "/README.md",
        "# corpus\n\nText content, with unicode: ünïcödé ✓\n",
    )
    .unwrap();
    ws.write("/data/binary.bin", bytes(3_000, 1)).unwrap();
    ws.write("/data/empty", b"").unwrap();
    ws.write("/data/tiny", b"\x00\x01\x02").unwrap();
    ws.write("/data/multi-chunk.bin", bytes(200_000, 2))
        .unwrap();
    ws.mkdir("/empty-dir/nested").unwrap();
    for i in 0..400 {
        ws.write(
            &format!("/large-dir/entry-{i:04}.txt"),
            format!("entry {i}\n"),
        )
        .unwrap();
    }
    ws.symlink("/link-relative", "README.md").unwrap();
    ws.symlink("/data/link-absolute", "/data/binary.bin")
        .unwrap();
    ws.write("/bin/tool.sh", "#!/bin/sh\necho hi\n").unwrap();
    ws.set_mode("/bin/tool.sh", 0o755).unwrap();
    ws.set_mode("/data/binary.bin", 0o600).unwrap();
    ws.set_mode("/empty-dir", 0o700).unwrap();
    ws.set_state(b"interpreter state: x=1".to_vec());
    ws.record_read(ExternalRead {
        source: "s3://bucket/input.csv".into(),
        fingerprint: "\"etag-1\"".into(),
        revision: None,
        size: 12,
        cached_at: Some("/data/tiny".into()),
    })
    .unwrap();
    ws.record_read(ExternalRead {
        source: "git://example/repo/file.txt".into(),
        fingerprint: "blob-abc".into(),
        revision: Some("0123456789abcdef".into()),
        size: 99,
        cached_at: None,
    })
    .unwrap();
    ws
}

/// The generated artifacts of the current version, by file name.
pub struct Artifacts {
    pub files: BTreeMap<String, Vec<u8>>,
}

/// Builds the history (a base, a main edit, a fork, a merge) and every artifact.
pub fn build() -> Artifacts {
    let mut store: HashMap<ObjectId, Vec<u8>> = HashMap::new();
    let mut order: Vec<ObjectId> = Vec::new();
    let mut keep = |objects: Vec<(ObjectId, Vec<u8>)>, store: &mut HashMap<ObjectId, Vec<u8>>| {
        for (id, b) in objects {
            if store.insert(id, b).is_none() {
                order.push(id);
            }
        }
    };

    let mut main = base();
    let c1 = main
        .commit(
            CommitOptions::new()
                .meta("turn", "1")
                .meta("message", "base"),
        )
        .unwrap();
    let c1_id = c1.id();
    keep(c1.into_objects().into_iter().collect(), &mut store);

    let mut fork = main.clone();

    main.write("/README.md", "# corpus\n\nEdited on main.\n")
        .unwrap();
    main.remove("/large-dir/entry-0007.txt").unwrap();
    main.set_state(b"interpreter state: x=2".to_vec());
    let c2 = main
        .commit(
            CommitOptions::new()
                .parent(c1_id)
                .have_in(&store)
                .meta("turn", "2"),
        )
        .unwrap();
    let c2_id = c2.id();
    keep(c2.into_objects().into_iter().collect(), &mut store);

    fork.write("/fork-only.txt", b"written on the fork\n")
        .unwrap();
    fork.rename("/data/tiny", "/data/tiny-renamed").unwrap();
    let f1 = fork
        .commit(
            CommitOptions::new()
                .parent(c1_id)
                .have_in(&store)
                .meta("branch", "fork"),
        )
        .unwrap();
    let f1_id = f1.id();
    keep(f1.into_objects().into_iter().collect(), &mut store);

    main.write("/fork-only.txt", b"written on the fork\n")
        .unwrap();
    main.rename("/data/tiny", "/data/tiny-renamed").unwrap();
    let m1 = main
        .commit(
            CommitOptions::new()
                .parents([c2_id, f1_id])
                .have_in(&store)
                .parent_source(&store)
                .meta("message", "merge fork into main"),
        )
        .unwrap();
    let m1_id = m1.id();
    keep(m1.into_objects().into_iter().collect(), &mut store);

    let mut files = BTreeMap::new();
    files.insert("snapshot.snap".to_string(), main.snapshot().unwrap());
    files.insert(
        "snapshot-keyed.snap".to_string(),
        main.snapshot_keyed(&CORPUS_KEY).unwrap(),
    );
    files.insert(
        "snapshot-zstd.snap".to_string(),
        main.snapshot_with_options(SnapshotOptions {
            compress: true,
            ..Default::default()
        })
        .unwrap(),
    );
    // From version 2 on: a commit of this version on the version-1 corpus's `merge`
    // (a mixed parent chain), whose root tree references unchanged version-1 subtrees
    // and content, and a packed snapshot holding objects of both versions.
    let mut mixed_id = None;
    if snapgraph::FORMAT_VERSION >= 2 {
        let v1 = v1_corpus();
        keep(v1.objects.clone(), &mut store);
        let mut ws = Workspace::new();
        let _ = ws
            .checkout_with(
                v1.merge,
                &store,
                CheckoutOptions::new()
                    .policy(CheckoutPolicy::Force)
                    .drift(DriftPolicy::Off),
            )
            .unwrap();
        ws.write("/data/written-by-v2.txt", b"a file of a version-2 commit\n")
            .unwrap();
        ws.write("/README.md", "# corpus\n\nEdited by a version-2 commit.\n")
            .unwrap();
        let c = ws
            .commit(
                CommitOptions::new()
                    .parent(v1.merge)
                    .have_in(&store)
                    .meta("message", "version 2 on version 1"),
            )
            .unwrap();
        mixed_id = Some(c.id());
        keep(c.into_objects().into_iter().collect(), &mut store);
        files.insert("snapshot-mixed.snap".to_string(), ws.snapshot().unwrap());
    }
    let mut dump = Vec::new();
    for id in &order {
        let b = &store[id];
        dump.extend_from_slice(&(b.len() as u32).to_le_bytes());
        dump.extend_from_slice(b);
    }
    files.insert("store.pack".to_string(), dump);
    let mut refs = format!("base {c1_id}\nmain {c2_id}\nfork {f1_id}\nmerge {m1_id}\n");
    if let Some(id) = mixed_id {
        refs.push_str(&format!("mixed {id}\n"));
    }
    files.insert("refs.txt".to_string(), refs.into_bytes());

    let mut expected = String::new();
    expected.push_str("## snapshot\n");
    expected.push_str(&render(
        &Workspace::from_snapshot(&files["snapshot.snap"]).unwrap(),
    ));
    for (name, id) in [
        ("base", c1_id),
        ("main", c2_id),
        ("fork", f1_id),
        ("merge", m1_id),
    ] {
        expected.push_str(&render_ref(name, id, &store));
    }
    if let Some(id) = mixed_id {
        expected.push_str(&render_ref("mixed", id, &store));
        expected.push_str("## snapshot mixed\n");
        expected.push_str(&render(
            &Workspace::from_snapshot(&files["snapshot-mixed.snap"]).unwrap(),
        ));
    }
    files.insert("expected.txt".to_string(), expected.into_bytes());
    Artifacts { files }
}

/// The released version-1 corpus: its objects in dump order and its `merge` commit.
pub struct V1Corpus {
    pub objects: Vec<(ObjectId, Vec<u8>)>,
    pub merge: ObjectId,
}

/// Reads `corpus/v1/` (never rewritten, so what is built on it is reproducible).
pub fn v1_corpus() -> V1Corpus {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus/v1");
    let dump = std::fs::read(dir.join("store.pack")).unwrap();
    let mut objects = Vec::new();
    let mut rest = &dump[..];
    while rest.len() >= 4 {
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let b = rest[4..4 + len].to_vec();
        objects.push((ObjectId::hash_stored(&b), b));
        rest = &rest[4 + len..];
    }
    let refs = std::fs::read_to_string(dir.join("refs.txt")).unwrap();
    let merge = refs
        .lines()
        .find_map(|l| l.strip_prefix("merge "))
        .unwrap()
        .parse()
        .unwrap();
    V1Corpus { objects, merge }
}

/// Reads a `store.pack` dump.
pub fn read_dump(dump: &[u8]) -> HashMap<ObjectId, Vec<u8>> {
    let mut out = HashMap::new();
    let mut rest = dump;
    while rest.len() >= 4 {
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let b = rest[4..4 + len].to_vec();
        out.insert(ObjectId::hash_stored(&b), b);
        rest = &rest[4 + len..];
    }
    assert!(rest.is_empty(), "store.pack has a partial record");
    out
}

/// The expected-state section of one named commit in a store.
pub fn render_ref(name: &str, id: ObjectId, store: &HashMap<ObjectId, Vec<u8>>) -> String {
    let mut ws = Workspace::new();
    let _ = ws.checkout(id, store, CheckoutPolicy::Force).unwrap();
    let commit = SnapshotGraph::commit(id, store).unwrap();
    let mut s = format!("## ref {name} {id}\n");
    s.push_str(&render(&ws));
    for (k, v) in &commit.meta {
        writeln!(s, "meta {k}={v}").unwrap();
    }
    let parents: Vec<String> = commit.parents.iter().map(|p| p.to_string()).collect();
    writeln!(s, "parents {}", parents.join(" ")).unwrap();
    writeln!(s, "generation {}", commit.generation).unwrap();
    let ancestry: Vec<String> = SnapshotGraph::ancestry(id, store, 100)
        .unwrap()
        .iter()
        .map(|p| p.to_string())
        .collect();
    writeln!(s, "ancestry {}", ancestry.join(" ")).unwrap();
    s
}

/// A stable, line-based rendering of everything a user observes in a workspace.
pub fn render(ws: &Workspace) -> String {
    let mut s = String::new();
    for (path, m) in ws.walk() {
        match m.kind {
            EntryKind::Dir => writeln!(s, "dir {path} {:o}", m.mode),
            EntryKind::File => {
                let data = ws.read(&path).unwrap();
                writeln!(
                    s,
                    "file {path} {:o} {} {}",
                    m.mode,
                    data.len(),
                    blake3::hash(data).to_hex()
                )
            }
            EntryKind::Symlink => {
                writeln!(
                    s,
                    "symlink {path} {:o} {}",
                    m.mode,
                    ws.read_link(&path).unwrap()
                )
            }
        }
        .unwrap();
    }
    writeln!(
        s,
        "state {} {}",
        ws.state().len(),
        blake3::hash(ws.state()).to_hex()
    )
    .unwrap();
    for r in ws.external_reads() {
        writeln!(
            s,
            "read {} fingerprint={} revision={} size={} cached_at={}",
            r.source,
            r.fingerprint,
            r.revision.as_deref().unwrap_or("-"),
            r.size,
            r.cached_at.as_deref().unwrap_or("-")
        )
        .unwrap();
    }
    if let Some(c) = ws.capabilities() {
        let b: Vec<&str> = c.builtins.iter().map(String::as_str).collect();
        let f: Vec<&str> = c.features.iter().map(String::as_str).collect();
        writeln!(
            s,
            "capabilities builtins={} features={} backend={}",
            b.join(","),
            f.join(","),
            c.fs_backend.as_deref().unwrap_or("-")
        )
        .unwrap();
    }
    s
}
