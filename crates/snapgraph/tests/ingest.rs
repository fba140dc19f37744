//! `Ingest` and `Workspace::write_ingested`: a file cut into its objects as its bytes
//! arrive makes exactly the objects and commit a whole write makes.

mod common;

use std::collections::HashMap;

use common::pseudo_random;
use proptest::prelude::*;
use snapgraph::ingest::Ingest;
use snapgraph::{CommitOptions, FsError, ObjectId, ObjectKind, Workspace};

type Store = HashMap<ObjectId, Vec<u8>>;

/// `data` pushed in pieces of the given sizes (cycled), its objects stored in a map.
fn ingest(data: &[u8], pieces: &[usize]) -> (snapgraph::ingest::Ingested, Store) {
    let mut store = Store::new();
    let mut ingest = Ingest::new();
    let (mut at, mut k) = (0, 0);
    while at < data.len() {
        let n = pieces[k % pieces.len()].max(1).min(data.len() - at);
        store.extend(ingest.push(&data[at..at + n]));
        assert_eq!(ingest.len(), (at + n) as u64);
        at += n;
        k += 1;
    }
    let (file, last) = ingest.finish();
    store.extend(last);
    (file, store)
}

/// The content objects (chunks and manifest nodes) of a commit's objects.
fn content_objects(c: &snapgraph::Commit) -> Store {
    c.objects()
        .iter()
        .filter(|(_, b)| {
            matches!(
                ObjectKind::from_byte(b[0]),
                Some(ObjectKind::Chunk | ObjectKind::Manifest)
            )
        })
        .map(|(id, b)| (*id, b.to_vec()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Any file, pushed in any pieces: the same objects, byte for byte, as a whole
    /// write's commit, and the same commit.
    #[test]
    fn ingest_makes_what_a_whole_write_makes(
        len in prop_oneof![0usize..100, 100usize..70_000, 70_000usize..3_500_000],
        seed in any::<u64>(),
        repeat in any::<bool>(),
        pieces in prop::collection::vec(1usize..400_000, 1..5),
    ) {
        // Repeated content too: runs of one byte are cut every CHUNK_MAX.
        let data = if repeat { vec![7u8; len] } else { pseudo_random(len, seed) };
        let (file, store) = ingest(&data, &pieces);
        prop_assert_eq!(file.size(), len as u64);
        let mut whole = Workspace::new();
        whole.write("/d/f", &data).unwrap();
        let whole = whole.commit(CommitOptions::new()).unwrap();
        prop_assert_eq!(content_objects(&whole), store.clone());
        let mut ws = Workspace::new();
        ws.write_ingested("/d/f", file).unwrap();
        let streamed = ws.commit(CommitOptions::new().have_in(&store)).unwrap();
        prop_assert_eq!(streamed.id(), whole.id());
        // The commit emitted none of the content (the store has it).
        prop_assert!(content_objects(&streamed).is_empty());
    }
}

#[test]
fn an_ingested_file_reads_back_and_its_objects_count_as_handed_over() {
    let data = pseudo_random(2_000_000, 9);
    let (file, store) = ingest(&data, &[65_536]);
    let root = file.content_id().unwrap();
    assert!(matches!(
        ObjectKind::from_byte(store[&root][0]),
        Some(ObjectKind::Manifest)
    ));
    let mut ws = Workspace::new();
    ws.write("/keep.txt", b"kept").unwrap();
    ws.write_ingested("/big.bin", file.clone()).unwrap();
    assert!(!ws.is_loaded("/big.bin"));
    assert_eq!(ws.metadata("/big.bin").unwrap().size, data.len() as u64);
    let pieces: Vec<u8> = ws
        .content_pieces("/big.bin", &store)
        .unwrap()
        .flat_map(|p| p.unwrap().into_owned())
        .collect();
    assert_eq!(pieces, data);
    // The objects count as handed over: the commit emits none of them, with or
    // without the store as `have`.
    let alone = ws.clone().commit(CommitOptions::new()).unwrap();
    assert!(content_objects(&alone).is_empty());
    assert!(!alone.objects().contains_id(&root));
    let c = ws.commit(CommitOptions::new().have_in(&store)).unwrap();
    assert_eq!(c.id(), alone.id());
    let mut all = store.clone();
    all.extend(c.objects().iter().map(|(id, b)| (*id, b.to_vec())));
    let mut back = Workspace::new();
    let _ = back
        .checkout(c.id(), &all, snapgraph::CheckoutPolicy::default())
        .unwrap();
    assert_eq!(back.read("/big.bin").unwrap(), &data[..]);
    assert_eq!(back.read("/keep.txt").unwrap(), b"kept");
}

#[test]
fn write_ingested_keeps_a_mode_and_refuses_what_write_refuses() {
    let (file, _) = ingest(&pseudo_random(100_000, 3), &[10_000]);
    let mut ws = Workspace::new();
    ws.write("/x", b"old").unwrap();
    ws.set_mode("/x", 0o755).unwrap();
    ws.mkdir("/dir").unwrap();
    ws.symlink("/link", "x").unwrap();
    ws.write_ingested("/x", file.clone()).unwrap();
    assert_eq!(ws.metadata("/x").unwrap().mode, 0o755);
    assert_eq!(ws.metadata("/x").unwrap().size, 100_000);
    ws.write_ingested("/new/deep/y", file.clone()).unwrap();
    assert_eq!(ws.metadata("/new/deep/y").unwrap().mode, 0o644);
    assert_eq!(
        ws.write_ingested("/dir", file.clone()),
        Err(FsError::IsADirectory {
            path: "/dir".into()
        })
    );
    assert_eq!(
        ws.write_ingested("/link", file.clone()),
        Err(FsError::IsASymlink {
            path: "/link".into()
        })
    );
    assert!(matches!(
        ws.write_ingested("/x/under", file.clone()),
        Err(FsError::NotADirectory { .. })
    ));
    assert!(matches!(
        ws.write_ingested("relative", file),
        Err(FsError::InvalidPath(_))
    ));
    // A small file is inline: written with its bytes.
    let (tiny, objects) = ingest(b"tiny", &[2]);
    assert!(objects.is_empty() && tiny.content_id().is_none());
    ws.write_ingested("/tiny", tiny).unwrap();
    assert_eq!(ws.read("/tiny").unwrap(), b"tiny");
}
