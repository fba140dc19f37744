//! Writes the seed corpus of every fuzz target into `fuzz/corpus/<target>/`:
//! `cargo run --manifest-path fuzz/Cargo.toml --example seeds` (from the repository
//! root). Seeds are small real objects, stores and snapshots built through the public
//! API, plus `corpus/v1`'s snapshots for the container target.

use std::path::{Path, PathBuf};

use snapgraph::{
    CapabilityFingerprint, CommitOptions, ExternalRead, ObjectId, SnapshotOptions, Workspace,
};
use snapgraph_fuzz::{encode_store_seed, pseudo_random, KEY};

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("corpus directory");
    std::fs::write(dir.join(name), bytes).expect("seed written");
}

fn sample() -> Workspace {
    let mut ws = Workspace::new();
    ws.write("/readme.md", b"hello\n").unwrap();
    ws.write("/src/main.rs", b"fn main() {}\n".repeat(10))
        .unwrap();
    ws.write("/data/big.bin", pseudo_random(70_000, 9)).unwrap();
    ws.write("/data/one-chunk.bin", pseudo_random(3_000, 2))
        .unwrap();
    ws.symlink("/link", "src/main.rs").unwrap();
    ws.mkdir("/empty/nested").unwrap();
    ws.set_mode("/readme.md", 0o600).unwrap();
    ws.set_state(b"interpreter state".to_vec());
    ws.set_capabilities(CapabilityFingerprint::new().builtin("ls").feature("sqlite"));
    ws.record_read(ExternalRead {
        source: "s3://bucket/key".into(),
        fingerprint: "etag-1".into(),
        revision: None,
        size: 5,
        cached_at: Some("/readme.md".into()),
    })
    .unwrap();
    for i in 0..80 {
        ws.write(&format!("/many/f{i:03}"), format!("{i}")).unwrap();
    }
    ws
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let corpus = root.join("corpus");

    // Two commits, the second on the first, as the objects of both in order.
    let mut ws = sample();
    let first = ws.commit(CommitOptions::new()).unwrap();
    let first_id = first.id();
    let mut objects: Vec<(ObjectId, Vec<u8>)> = first
        .objects()
        .iter()
        .map(|(i, b)| (*i, b.to_vec()))
        .collect();
    ws.write("/readme.md", b"hello again\n").unwrap();
    ws.remove("/many/f007").unwrap();
    ws.rename("/src", "/lib").unwrap();
    let second = ws
        .commit(
            CommitOptions::new()
                .parent(first_id)
                .have(objects.iter().map(|(i, _)| *i).collect::<Vec<_>>())
                .meta("message", "second"),
        )
        .unwrap();
    let second_objects: Vec<(ObjectId, Vec<u8>)> = second
        .objects()
        .iter()
        .map(|(i, b)| (*i, b.to_vec()))
        .collect();

    // decode_object: bodies of each kind.
    let dir = corpus.join("decode_object");
    for (i, (_, stored)) in objects.iter().chain(&second_objects).enumerate() {
        if stored[0] != 1 {
            write(&dir, &format!("kind{}-{i:03}", stored[0]), &stored[2..]);
        }
    }

    // object_id
    let dir = corpus.join("object_id");
    write(&dir, "lower", first_id.to_hex().as_bytes());
    write(&dir, "upper", first_id.to_hex().to_uppercase().as_bytes());
    write(&dir, "short", &first_id.to_hex().as_bytes()[..63]);
    write(&dir, "raw", first_id.as_bytes());

    // junk_store: one history, and the single small commit.
    let dir = corpus.join("junk_store");
    let mut history = objects.clone();
    history.extend(second_objects.iter().cloned());
    write(&dir, "history", &encode_store_seed(&history));
    let mut small = Workspace::new();
    small.write("/a/b.txt", b"b").unwrap();
    small.write("/c", pseudo_random(5000, 1)).unwrap();
    let c = small.commit(CommitOptions::new()).unwrap();
    let small_objects: Vec<(ObjectId, Vec<u8>)> =
        c.objects().iter().map(|(i, b)| (*i, b.to_vec())).collect();
    write(&dir, "small", &encode_store_seed(&small_objects));
    objects.truncate(objects.len() - 1);
    write(&dir, "no-commit", &encode_store_seed(&objects));

    // snapshot_container: flags byte (bit 0 fix trailer, bit 1 keyed), then a snapshot.
    let dir = corpus.join("snapshot_container");
    let with_flags = |flags: u8, bytes: &[u8]| [&[flags][..], bytes].concat();
    let ws = sample();
    write(&dir, "plain", &with_flags(0, &ws.snapshot().unwrap()));
    write(
        &dir,
        "keyed",
        &with_flags(2, &ws.snapshot_keyed(&KEY).unwrap()),
    );
    let zstd = SnapshotOptions {
        compress: true,
        ..Default::default()
    };
    write(
        &dir,
        "zstd",
        &with_flags(1, &ws.snapshot_with_options(zstd).unwrap()),
    );
    let no_files = SnapshotOptions {
        exclude_files: true,
        exclude_state: true,
        ..Default::default()
    };
    write(
        &dir,
        "no-files",
        &with_flags(1, &ws.snapshot_with_options(no_files).unwrap()),
    );
    write(
        &dir,
        "empty",
        &with_flags(0, &Workspace::new().snapshot().unwrap()),
    );
    let v1 = root.join("../corpus/v1");
    write(
        &dir,
        "v1-snapshot",
        &with_flags(0, &std::fs::read(v1.join("snapshot.snap")).unwrap()),
    );
    write(
        &dir,
        "v1-snapshot-keyed",
        &with_flags(2, &std::fs::read(v1.join("snapshot-keyed.snap")).unwrap()),
    );

    // workspace_ops: any bytes decode to some operation sequence.
    let dir = corpus.join("workspace_ops");
    for (i, len) in [16usize, 64, 256, 1024].into_iter().enumerate() {
        write(
            &dir,
            &format!("random-{i}"),
            &pseudo_random(len, i as u64 + 7),
        );
    }

    cli_seeds(&corpus);

    // ingest_over: any bytes parse as a case (`arbitrary`); a few of different
    // lengths, so that the first runs have edits to make.
    for n in 0..4u64 {
        write(
            &corpus.join("ingest_over"),
            &format!("seed{n}"),
            &pseudo_random(48 + 24 * n as usize, 48 + n),
        );
    }
}

/// Seeds of the CLI's parsers: tar archives (an export of the sample tree, hard
/// links, a long name, a symlink), a stat cache and config files.
fn cli_seeds(corpus: &Path) {
    let dir = corpus.join("tar_import");
    let mut ws = sample();
    let commit = ws.commit(CommitOptions::new()).unwrap();
    let id = commit.id();
    let objects: std::collections::HashMap<ObjectId, Vec<u8>> = commit
        .objects()
        .iter()
        .map(|(i, b)| (*i, b.to_vec()))
        .collect();
    let pb = indicatif::ProgressBar::hidden();
    let mut shallow = Workspace::new();
    let _ = shallow
        .checkout_with(
            id,
            &objects,
            snapgraph::CheckoutOptions::new()
                .policy(snapgraph::CheckoutPolicy::Force)
                .shallow(true),
        )
        .unwrap();
    let (tar, _) =
        snapgraph_cli::tarball::export(&mut shallow, &objects, id, Vec::new(), &pb).unwrap();
    write(&dir, "export-sample", &tar);
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_mode(0o755);
    h.set_entry_type(tar::EntryType::Directory);
    h.set_size(0);
    b.append_data(&mut h, "d/", std::io::empty()).unwrap();
    let mut h = tar::Header::new_gnu();
    h.set_mode(0o644);
    h.set_size(5);
    b.append_data(&mut h, "d/original", &b"bytes"[..]).unwrap();
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Link);
    h.set_size(0);
    b.append_link(&mut h, "second", "d/original").unwrap();
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_size(0);
    b.append_link(&mut h, "link", "d/original").unwrap();
    let long = format!("d/{}", "n".repeat(150));
    let mut h = tar::Header::new_gnu();
    h.set_mode(0o644);
    h.set_size(3);
    b.append_data(&mut h, &long, &b"abc"[..]).unwrap();
    write(&dir, "links-and-long-names", &b.into_inner().unwrap());

    let dir = corpus.join("stat_cache");
    let mut index = snapgraph_cli::index::Index::new(std::path::Path::new("/fuzz/root"), 1_001);
    for (i, digest) in [
        snapgraph_cli::index::Digest::Chunk(id),
        snapgraph_cli::index::Digest::Manifest(id),
        snapgraph_cli::index::Digest::Inline(b"hello".to_vec()),
    ]
    .into_iter()
    .enumerate()
    {
        index.entries.insert(
            format!("/f{i}"),
            snapgraph_cli::index::IndexEntry::File {
                stat: snapgraph_cli::index::FileStat {
                    size: 5,
                    mtime_ns: 1_000 + i as i64,
                    ctime_ns: 1_000,
                    ino: 7 + i as u64,
                    dev: 2049,
                    mode: 0o100644,
                },
                digest,
            },
        );
    }
    index.entries.insert(
        "/d".to_string(),
        snapgraph_cli::index::IndexEntry::Dir {
            listing: Some(snapgraph_cli::index::Listing {
                stat: snapgraph_cli::index::FileStat {
                    size: 4096,
                    mtime_ns: 900,
                    ctime_ns: 900,
                    ino: 11,
                    dev: 2049,
                    mode: 0o040755,
                },
                rules: snapgraph_cli::scan::rules_fingerprint(&[0; 32], Some(b"*.log\n")),
                ignore_file: true,
                entries: 2,
            }),
        },
    );
    index.entries.insert(
        "/e".to_string(),
        snapgraph_cli::index::IndexEntry::Dir { listing: None },
    );
    index.tip = Some(id);
    write(&dir, "two-entries", &index.to_bytes());
    let mut skeleton = std::collections::HashMap::new();
    skeleton.insert(id, b"node".to_vec());
    write(
        &dir,
        "skeleton",
        &snapgraph_cli::index::skeleton_bytes(&skeleton),
    );

    let dir = corpus.join("config");
    write(&dir, "default", b"store = sqlite:store.db\n");
    write(
        &dir,
        "postgres-with-secrets",
        b"# comment\nstore = postgres://alice:s3cr%40t@db:5432/snap?sslmode=disable&password=q\ngc.grace = 14d\n",
    );
    write(
        &dir,
        "query-password",
        b"store = postgres://db/snap?connect_timeout=5&password=a@b:c\n",
    );
}
