//! Packed snapshots: round trips, determinism, exclusions, keyed authentication,
//! corruption, and forward compatibility of the container.

use std::collections::HashMap;

use snapgraph::pack::{FLAG_ZSTD, FRAMING_VERSION, MAGIC};
use snapgraph::{
    CheckoutPolicy, CommitOptions, ExternalRead, ObjectId, RestoreOptions, SnapshotError,
    SnapshotOptions, Workspace,
};

fn bytes(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 32) as u8
        })
        .collect()
}

fn sample() -> Workspace {
    let mut ws = Workspace::new();
    ws.write("/text.txt", b"hello\nworld\n").unwrap();
    ws.write("/bin/blob", bytes(10_000, 1)).unwrap();
    ws.write("/big/file", bytes(300_000, 2)).unwrap();
    ws.write("/empty", b"").unwrap();
    ws.mkdir("/empty-dir").unwrap();
    ws.symlink("/link", "text.txt").unwrap();
    ws.set_mode("/bin/blob", 0o755).unwrap();
    for i in 0..150 {
        ws.write(&format!("/many/f{i:03}"), format!("{i}")).unwrap();
    }
    ws.set_state(b"interpreter state".to_vec());
    ws.record_read(ExternalRead {
        source: "s3://b/k".into(),
        fingerprint: "e1".into(),
        revision: Some("v7".into()),
        size: 3,
        cached_at: None,
    })
    .unwrap();
    ws
}

/// Everything a user can observe about a workspace's content.
fn view(ws: &Workspace) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = ws
        .walk()
        .into_iter()
        .map(|(p, m)| {
            let detail = match m.kind {
                snapgraph::EntryKind::File => format!("{:?}", ws.read(&p).unwrap()),
                snapgraph::EntryKind::Symlink => ws.read_link(&p).unwrap().to_string(),
                snapgraph::EntryKind::Dir => String::new(),
            };
            (p, format!("{:?} {:o} {detail}", m.kind, m.mode))
        })
        .collect();
    out.push(("<state>".into(), format!("{:?}", ws.state())));
    out.push((
        "<reads>".into(),
        format!("{:?}", ws.external_reads().collect::<Vec<_>>()),
    ));
    out
}

#[test]
fn round_trip_and_determinism() {
    let ws = sample();
    let packed = ws.snapshot().unwrap();
    assert_eq!(&packed[..8], &MAGIC);
    assert_eq!(packed, ws.snapshot().unwrap(), "same workspace, same bytes");
    assert_eq!(
        packed,
        ws.clone().snapshot().unwrap(),
        "a clone packs the same"
    );
    let back = Workspace::from_snapshot(&packed).unwrap();
    assert_eq!(view(&back), view(&ws));
    // A restored workspace packs to the same bytes again.
    assert_eq!(back.snapshot().unwrap(), packed);
    // Compressed snapshots restore the same, and the flag is set.
    let z = ws
        .snapshot_with_options(SnapshotOptions {
            compress: true,
            ..Default::default()
        })
        .unwrap();
    assert_ne!(u16::from_le_bytes([z[12], z[13]]) & FLAG_ZSTD, 0);
    assert_eq!(view(&Workspace::from_snapshot(&z).unwrap()), view(&ws));
    let mut via_stream = Workspace::new();
    let _ = via_stream
        .restore_snapshot_from(
            &z[..],
            RestoreOptions::new()
                .policy(CheckoutPolicy::Superset)
                .drift(snapgraph::DriftPolicy::Strict),
        )
        .unwrap();
    assert_eq!(view(&via_stream), view(&ws));
}

#[test]
fn commit_packed_equals_snapshot_and_refuses_incremental() {
    let mut ws = sample();
    let snap = ws.snapshot().unwrap();
    let full = ws.commit(CommitOptions::new()).unwrap();
    assert_eq!(full.packed().unwrap(), snap);
    let store: HashMap<ObjectId, Vec<u8>> = full
        .objects()
        .iter()
        .map(|(i, b)| (*i, b.to_vec()))
        .collect();
    ws.write("/text.txt", b"changed").unwrap();
    let inc = ws
        .commit(CommitOptions::new().parent(full.id()).have_in(&store))
        .unwrap();
    assert!(!inc.is_complete());
    assert!(inc.packed().is_none());
    assert!(inc.packed_keyed(&[1; 32]).is_none());
    // A commit with parents packs and restores alone (parents are not needed).
    let again = ws.commit(CommitOptions::new().parent(full.id())).unwrap();
    let back = Workspace::from_snapshot(&again.packed().unwrap()).unwrap();
    assert_eq!(back.read("/text.txt").unwrap(), b"changed");
}

#[test]
fn write_snapshot_streams_the_same_bytes() {
    let ws = sample();
    let mut out = Vec::new();
    ws.write_snapshot(SnapshotOptions::default(), None, &mut out)
        .unwrap();
    assert_eq!(out, ws.snapshot().unwrap());
}

#[test]
fn exclusions_leave_the_other_half_alone() {
    let ws = sample();
    let no_files = ws
        .snapshot_with_options(SnapshotOptions {
            exclude_files: true,
            ..Default::default()
        })
        .unwrap();
    let no_state = ws
        .snapshot_with_options(SnapshotOptions {
            exclude_state: true,
            ..Default::default()
        })
        .unwrap();
    let mut target = Workspace::new();
    target.write("/mine.txt", b"keep me").unwrap();
    target.set_state(b"my state".to_vec());
    let _ = target.restore_snapshot(&no_files).unwrap();
    assert_eq!(target.read("/mine.txt").unwrap(), b"keep me");
    assert!(!target.exists("/text.txt"));
    assert_eq!(target.state(), b"interpreter state");

    let mut target = Workspace::new();
    target.set_state(b"my state".to_vec());
    let _ = target.restore_snapshot(&no_state).unwrap();
    assert_eq!(target.state(), b"my state");
    assert_eq!(target.read("/text.txt").unwrap(), b"hello\nworld\n");
    assert!(no_files.len() < ws.snapshot().unwrap().len());
}

#[test]
fn keyed_snapshots_authenticate() {
    let ws = sample();
    let key = [7u8; 32];
    let packed = ws.snapshot_keyed(&key).unwrap();
    let back = Workspace::from_snapshot_keyed(&packed, &key).unwrap();
    assert_eq!(view(&back), view(&ws));

    let mut target = Workspace::new();
    target.write("/untouched", b"x").unwrap();
    let before = view(&target);
    // Wrong key: not authentic.
    assert!(matches!(
        target.restore_snapshot_keyed(&packed, &[8u8; 32]),
        Err(SnapshotError::NotAuthentic)
    ));
    // A flipped bit: corrupt.
    let mut flipped = packed.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x10;
    assert!(matches!(
        target.restore_snapshot_keyed(&flipped, &key),
        Err(SnapshotError::Corrupt { .. })
    ));
    // Truncation: corrupt.
    assert!(matches!(
        target.restore_snapshot_keyed(&packed[..packed.len() - 5], &key),
        Err(SnapshotError::Corrupt { .. })
    ));
    // Tampering that recomputes the public checksum is caught by the MAC.
    let mut forged = packed.clone();
    let body_end = forged.len() - 64;
    forged[mid] ^= 0x10;
    let checksum = blake3::hash(&forged[..body_end]);
    forged[body_end..body_end + 32].copy_from_slice(checksum.as_bytes());
    assert!(matches!(
        target.restore_snapshot_keyed(&forged, &key),
        Err(SnapshotError::NotAuthentic)
    ));
    // Keyed bytes to an unkeyed restore, and the reverse.
    assert!(matches!(
        target.restore_snapshot(&packed),
        Err(SnapshotError::KeyRequired)
    ));
    assert!(matches!(
        target.restore_snapshot_keyed(&ws.snapshot().unwrap(), &key),
        Err(SnapshotError::NotKeyed)
    ));
    assert_eq!(view(&target), before, "nothing was applied");
}

#[test]
fn every_truncation_and_many_bit_flips_are_refused_without_panic() {
    let mut ws = Workspace::new();
    ws.write("/a", bytes(5_000, 9)).unwrap();
    ws.write("/b", b"small").unwrap();
    for compress in [false, true] {
        let packed = ws
            .snapshot_with_options(SnapshotOptions {
                compress,
                ..Default::default()
            })
            .unwrap();
        for len in 0..packed.len() {
            assert!(
                Workspace::from_snapshot(&packed[..len]).is_err(),
                "len {len}"
            );
            let mut target = Workspace::new();
            assert!(target
                .restore_snapshot_from(
                    &packed[..len],
                    RestoreOptions::new()
                        .policy(CheckoutPolicy::Force)
                        .drift(snapgraph::DriftPolicy::Off)
                )
                .is_err());
        }
        for i in (0..packed.len()).step_by(7) {
            let mut bad = packed.clone();
            bad[i] ^= 1 << (i % 8);
            let err = Workspace::from_snapshot(&bad).unwrap_err();
            assert!(
                matches!(
                    err,
                    SnapshotError::Corrupt { .. }
                        | SnapshotError::NotASnapshot
                        | SnapshotError::SnapshotTooNew { .. }
                        | SnapshotError::KeyRequired
                ),
                "byte {i}: {err:?}"
            );
        }
    }
}

#[test]
fn newer_readers_are_required_when_min_reader_says_so() {
    let packed = sample().snapshot().unwrap();
    let mut newer = packed.clone();
    newer[10] = FRAMING_VERSION + 1; // min_reader
    match Workspace::from_snapshot(&newer) {
        Err(SnapshotError::SnapshotTooNew {
            required,
            supported,
        }) => {
            assert_eq!(required, FRAMING_VERSION + 1);
            assert_eq!(supported, FRAMING_VERSION);
        }
        other => panic!("{other:?}"),
    }
    // A newer framing version that older readers may read is accepted.
    let mut compatible = packed.clone();
    compatible[8] = FRAMING_VERSION + 1;
    let n = compatible.len();
    let checksum = blake3::hash(&compatible[..n - 32]);
    compatible[n - 32..].copy_from_slice(checksum.as_bytes());
    assert!(Workspace::from_snapshot(&compatible).is_ok());
    assert!(matches!(
        Workspace::from_snapshot(b"not a snapshot at all"),
        Err(SnapshotError::NotASnapshot)
    ));
}

#[test]
fn unknown_metadata_fields_are_ignored() {
    // Rebuild a snapshot whose metadata carries a field this reader does not know.
    let packed = sample().snapshot().unwrap();
    let meta_len = u32::from_le_bytes(packed[54..58].try_into().unwrap()) as usize;
    let mut meta = std::collections::BTreeMap::new();
    meta.insert("future-field".to_string(), vec![1u8, 2, 3]);
    let meta_bytes = postcard::to_allocvec(&meta).unwrap();
    let mut out = packed[..54].to_vec();
    out.extend_from_slice(&(meta_bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(&meta_bytes);
    out.extend_from_slice(&packed[58 + meta_len..packed.len() - 32]);
    let checksum = blake3::hash(&out);
    out.extend_from_slice(checksum.as_bytes());
    let back = Workspace::from_snapshot(&out).unwrap();
    assert_eq!(back.read("/text.txt").unwrap(), b"hello\nworld\n");
}

#[test]
fn stream_restore_handles_shared_and_repeated_chunks() {
    let mut ws = Workspace::new();
    let big = bytes(400_000, 5);
    // Identical files (one content), files sharing leading chunks (two contents, shared
    // chunks), a file of repeated identical chunks, and a directory copied twice (one
    // shared subtree).
    ws.write("/a/same1", &big).unwrap();
    ws.write("/a/same2", &big).unwrap();
    let mut longer = big.clone();
    longer.extend_from_slice(&bytes(100_000, 6));
    ws.write("/a/prefix-shared", &longer).unwrap();
    ws.write("/zeros", vec![0u8; 500_000]).unwrap();
    for d in ["/copy1", "/copy2"] {
        ws.write(&format!("{d}/x"), &big[..70_000]).unwrap();
        ws.write(&format!("{d}/y"), b"small").unwrap();
    }
    ws.set_state(big[..100_000].to_vec());
    for compress in [false, true] {
        let packed = ws
            .snapshot_with_options(SnapshotOptions {
                compress,
                ..Default::default()
            })
            .unwrap();
        let mut target = Workspace::new();
        let _ = target
            .restore_snapshot_from(
                &packed[..],
                RestoreOptions::new()
                    .policy(CheckoutPolicy::Superset)
                    .drift(snapgraph::DriftPolicy::Strict),
            )
            .unwrap();
        assert_eq!(view(&target), view(&ws));
        assert_eq!(target.snapshot().unwrap(), ws.snapshot().unwrap());
    }
}
