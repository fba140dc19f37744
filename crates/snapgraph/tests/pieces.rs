//! `Workspace::content_pieces`: a file's bytes streamed out a window of chunks at a
//! time, verified as `load_content` verifies them, never whole in memory.

mod common;

use std::borrow::Cow;
use std::cell::{Cell, RefCell};

use common::{persist, pseudo_random, Store};
use proptest::prelude::*;
use snapgraph::object::manifest::Manifest;
use snapgraph::object::tree::{Content, EntryNode, TreeNode};
use snapgraph::{
    BoxError, CapabilityFingerprint, CheckoutError, CheckoutOptions, CheckoutPolicy, CommitOptions,
    FsError, Limits, ObjectError, ObjectId, ObjectSource, Workspace, PIECES_WINDOW,
};

fn committed(ws: &mut Workspace) -> (Store, ObjectId) {
    let mut store = Store::new();
    let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    (store, id)
}

fn shallow(id: ObjectId, store: &Store) -> Workspace {
    let mut ws = Workspace::new();
    let _ = ws
        .checkout_with(
            id,
            store,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::Force)
                .shallow(true),
        )
        .unwrap();
    ws
}

/// Every piece of `path`, or the first error.
fn collect<S: ObjectSource + ?Sized>(
    ws: &Workspace,
    path: &str,
    source: &S,
) -> Result<Vec<Vec<u8>>, CheckoutError> {
    ws.content_pieces(path, source)?
        .map(|p| p.map(Cow::into_owned))
        .collect()
}

/// The content of `path` (a top-level file) in commit `id`.
fn content_of(store: &Store, id: ObjectId, name: &str) -> Content {
    let commit = snapgraph::SnapshotGraph::commit(id, store).unwrap();
    let TreeNode::Leaf(entries) =
        TreeNode::decode(&commit.tree, &store[&commit.tree][2..]).unwrap()
    else {
        panic!("a leaf")
    };
    match entries.into_iter().find(|e| e.name == name).unwrap().node {
        EntryNode::File { content, .. } => content,
        other => panic!("{other:?}"),
    }
}

/// The chunk ids of the manifest file `name`, in order, and its node count.
fn chunks_of(store: &Store, id: ObjectId, name: &str) -> (Vec<ObjectId>, usize) {
    let Content::Manifest(root) = content_of(store, id, name) else {
        panic!("a manifest")
    };
    let (mut level, mut chunks, mut nodes) = (vec![root], Vec::new(), 0);
    while !level.is_empty() {
        let mut next = Vec::new();
        for node in level {
            nodes += 1;
            match Manifest::decode(&node, &store[&node][2..]).unwrap() {
                Manifest::Leaf(c) => chunks.extend(c.into_iter().map(|c| c.id)),
                Manifest::Internal { children, .. } => next.extend(children.iter().map(|c| c.id)),
            }
        }
        level = next;
    }
    (chunks, nodes)
}

/// A source that records how many ids each batched read asked for, and the total.
struct Batches<'a> {
    inner: &'a Store,
    sizes: RefCell<Vec<usize>>,
    read: Cell<usize>,
}

impl<'a> Batches<'a> {
    fn new(inner: &'a Store) -> Self {
        Self {
            inner,
            sizes: RefCell::new(Vec::new()),
            read: Cell::new(0),
        }
    }
}

impl ObjectSource for Batches<'_> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        self.read.set(self.read.get() + 1);
        Ok(self.inner.get(id).map(|b| Cow::Borrowed(&b[..])))
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        Ok(self.inner.contains_key(id))
    }
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Cow<'_, [u8]>>>, BoxError> {
        self.sizes.borrow_mut().push(ids.len());
        self.read.set(self.read.get() + ids.len());
        Ok(ids
            .iter()
            .map(|id| self.inner.get(id).map(|b| Cow::Borrowed(&b[..])))
            .collect())
    }
}

/// A source that hands its bytes over (`Cow::Owned`), as a store that decodes does.
struct Owning<'a>(&'a Store);

impl ObjectSource for Owning<'_> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        Ok(self.0.get(id).map(|b| Cow::Owned(b.clone())))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Whatever the size (empty, inline, one chunk, a manifest of one or more
    /// windows), the pieces are the file's bytes in order, none longer than a chunk,
    /// from a lending and from an owning source alike.
    #[test]
    fn pieces_are_the_file(len in prop_oneof![0usize..300, 300usize..70_000, 70_000usize..2_500_000], seed in any::<u64>()) {
        let data = pseudo_random(len, seed);
        let mut ws = Workspace::new();
        ws.write("/f", &data).unwrap();
        let (store, id) = committed(&mut ws);
        let ws = shallow(id, &store);
        for pieces in [collect(&ws, "/f", &store).unwrap(), collect(&ws, "/f", &Owning(&store)).unwrap()] {
            prop_assert!(pieces.iter().all(|p| p.len() <= snapgraph::chunk::CHUNK_MAX));
            prop_assert_eq!(pieces.concat(), data.clone());
        }
    }
}

#[test]
fn a_loaded_file_is_one_piece_and_nothing_is_read() {
    let data = pseudo_random(200_000, 1);
    let mut ws = Workspace::new();
    ws.write("/f", &data).unwrap();
    let (store, _) = committed(&mut ws);
    let source = Batches::new(&store);
    let pieces = collect(&ws, "/f", &source).unwrap();
    assert_eq!(pieces, vec![data]);
    assert_eq!(source.read.get(), 0);
}

#[test]
fn a_large_file_is_read_a_window_at_a_time() {
    // About 6 MB: some 90 chunks of about 64 KiB at most, over more than one window.
    let data = pseudo_random(6_000_000, 2);
    let mut ws = Workspace::new();
    ws.write("/big", &data).unwrap();
    let (store, id) = committed(&mut ws);
    let ws = shallow(id, &store);
    let (chunks, nodes) = chunks_of(&store, id, "big");
    assert!(chunks.len() > PIECES_WINDOW, "{} chunks", chunks.len());
    let source = Batches::new(&store);
    let mut pieces = ws.content_pieces("/big", &source).unwrap();
    // The manifest is read up front; the first piece reads one window of chunks.
    assert_eq!(source.read.get(), nodes);
    let first = pieces.next().unwrap().unwrap();
    assert_eq!(&data[..first.len()], &first[..]);
    assert!(
        source.read.get() == PIECES_WINDOW + nodes,
        "{} objects read for the first piece",
        source.read.get()
    );
    let mut out = first.into_owned();
    for p in pieces {
        out.extend_from_slice(&p.unwrap());
    }
    assert_eq!(out, data);
    assert!(source.sizes.borrow().iter().all(|&n| n <= PIECES_WINDOW));
    // Every chunk once, plus the manifest's nodes.
    assert_eq!(source.read.get(), chunks.len() + nodes);
    assert!(!ws.is_loaded("/big"));
}

#[test]
fn a_damaged_or_missing_chunk_ends_the_pieces_with_its_id() {
    let data = pseudo_random(6_000_000, 3);
    let mut ws = Workspace::new();
    ws.write("/big", &data).unwrap();
    ws.write("/one", pseudo_random(5_000, 4)).unwrap();
    let (store, id) = committed(&mut ws);
    let ws = shallow(id, &store);
    let (chunks, _) = chunks_of(&store, id, "big");
    // A chunk in the second window: pieces of the first come out before the error.
    let victim = chunks[PIECES_WINDOW + 3];
    let mut damaged = store.clone();
    damaged.get_mut(&victim).unwrap()[10] ^= 1;
    let mut pieces = ws.content_pieces("/big", &damaged).unwrap();
    let mut good = 0;
    let err = loop {
        match pieces.next().expect("an error before the end") {
            Ok(_) => good += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(good, PIECES_WINDOW);
    assert!(
        matches!(&err, CheckoutError::Object(ObjectError::Corrupt { id, .. }) if *id == victim),
        "{err:?}"
    );
    assert!(pieces.next().is_none(), "nothing after an error");
    // As load_content reports it.
    let mut loading = shallow(id, &store);
    let loaded = loading.load_content("/big", &damaged).unwrap_err();
    assert_eq!(loaded.to_string(), err.to_string());

    let mut missing = store.clone();
    missing.remove(&victim);
    assert!(matches!(
        collect(&ws, "/big", &missing),
        Err(CheckoutError::Object(ObjectError::NotFound { id })) if id == victim
    ));
    let Content::Chunk(single) = content_of(&store, id, "one") else {
        panic!("a chunk")
    };
    missing.remove(&single);
    assert!(matches!(
        collect(&ws, "/one", &missing),
        Err(CheckoutError::Object(ObjectError::NotFound { id })) if id == single
    ));
}

#[test]
fn paths_that_are_not_files_and_limits_are_refused_up_front() {
    let mut ws = Workspace::new();
    ws.write("/d/f", pseudo_random(100_000, 5)).unwrap();
    ws.symlink("/l", "d/f").unwrap();
    let (store, id) = committed(&mut ws);
    let ws = shallow(id, &store);
    for (p, want) in [
        ("/d", FsError::IsADirectory { path: "/d".into() }),
        ("/l", FsError::IsASymlink { path: "/l".into() }),
        (
            "/nope",
            FsError::NotFound {
                path: "/nope".into(),
            },
        ),
    ] {
        match ws.content_pieces(p, &store) {
            Err(CheckoutError::Fs(e)) => assert_eq!(e, want, "{p}"),
            Err(other) => panic!("{p}: {other:?}"),
            Ok(_) => panic!("{p}: pieces"),
        }
    }
    // A file over the workspace's byte limit is refused before anything is read.
    let mut small = shallow(id, &store);
    small.set_limits(Limits {
        max_bytes: 50_000,
        ..Limits::default()
    });
    let source = Batches::new(&store);
    assert!(matches!(
        small.content_pieces("/d/f", &source),
        Err(CheckoutError::Limit(_))
    ));
    assert_eq!(source.read.get(), 0);
}

#[test]
fn content_rules_apply_to_the_first_bytes() {
    let mut src = Workspace::new();
    let db = [b"SQLite format 3\0".as_slice(), &pseudo_random(300_000, 6)].concat();
    src.write("/db.sqlite", &db).unwrap();
    src.write(
        "/one.sqlite",
        [b"SQLite format 3\0".as_slice(), &pseudo_random(3_000, 7)].concat(),
    )
    .unwrap();
    src.write("/ok.bin", pseudo_random(300_000, 8)).unwrap();
    let (store, id) = committed(&mut src);
    let mut ws = Workspace::new();
    ws.require_feature_for_prefix(b"SQLite format 3\0".to_vec(), "sqlite");
    let _ = ws
        .checkout_with(
            id,
            &store,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::Force)
                .shallow(true),
        )
        .unwrap();
    assert_eq!(
        collect(&ws, "/ok.bin", &store).unwrap().concat(),
        pseudo_random(300_000, 8)
    );
    for p in ["/db.sqlite", "/one.sqlite"] {
        let mut pieces = ws.content_pieces(p, &store).unwrap();
        // Refused at the first piece: no byte of the file comes out.
        assert!(matches!(
            pieces.next(),
            Some(Err(CheckoutError::FeatureRequired { commit, path, feature }))
                if commit == id && path == p && feature == "sqlite"
        ));
        assert!(pieces.next().is_none());
    }
    let mut caps = CapabilityFingerprint::default();
    caps.features.insert("sqlite".into());
    ws.set_capabilities(caps);
    assert_eq!(collect(&ws, "/db.sqlite", &store).unwrap().concat(), db);
}
