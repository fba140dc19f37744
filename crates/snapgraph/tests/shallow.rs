//! Shallow checkout: files left in the store until loaded, commits that equal those of
//! a full checkout, typed errors wherever unloaded bytes would be needed, and no chunk
//! read on the way.

mod common;

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;

use common::{bare_commit, build_from, inline_file, persist, pseudo_random, snap, Snap, Store};
use proptest::prelude::*;
use snapgraph::object::manifest::{ChunkRef, Manifest};
use snapgraph::object::tree::{Content, Entry, EntryNode, TreeNode};
use snapgraph::LimitError;
use snapgraph::{
    BoxError, CapabilityFingerprint, CheckoutError, CheckoutOptions, CheckoutPolicy, CommitError,
    CommitObject, CommitOptions, EntryKind, FsError, Limits, ObjectError, ObjectId, ObjectKind,
    ObjectSource, SnapshotOptions, Workspace,
};

// ---------------------------------------------------------------- helpers

/// A source that records the kind of every object read through `get`.
struct Recording<'a> {
    inner: &'a Store,
    kinds: RefCell<Vec<(ObjectId, ObjectKind)>>,
}

impl<'a> Recording<'a> {
    fn new(inner: &'a Store) -> Self {
        Self {
            inner,
            kinds: RefCell::new(Vec::new()),
        }
    }

    fn count(&self, kind: ObjectKind) -> usize {
        self.kinds
            .borrow()
            .iter()
            .filter(|(_, k)| *k == kind)
            .count()
    }

    fn ids(&self, kind: ObjectKind) -> HashSet<ObjectId> {
        self.kinds
            .borrow()
            .iter()
            .filter(|(_, k)| *k == kind)
            .map(|(id, _)| *id)
            .collect()
    }

    fn clear(&self) {
        self.kinds.borrow_mut().clear();
    }
}

impl ObjectSource for Recording<'_> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        let got = self.inner.get(id);
        if let Some(kind) = got.and_then(|b| ObjectKind::from_byte(*b.first()?)) {
            self.kinds.borrow_mut().push((*id, kind));
        }
        Ok(got.map(|b| Cow::Borrowed(&b[..])))
    }

    /// Presence is answered without a read.
    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        Ok(self.inner.contains_key(id))
    }
}

/// Stores `kind || version 1 || body` under its hash.
fn put(store: &mut Store, kind: ObjectKind, body: &[u8]) -> ObjectId {
    let stored = common::stored(kind, body);
    let id = ObjectId::hash_stored(&stored);
    store.insert(id, stored);
    id
}

fn put_tree(store: &mut Store, node: &TreeNode) -> ObjectId {
    put(
        store,
        ObjectKind::Tree,
        &postcard::to_allocvec(node).unwrap(),
    )
}

fn put_commit(store: &mut Store, c: &CommitObject) -> ObjectId {
    put(
        store,
        ObjectKind::Commit,
        &postcard::to_allocvec(c).unwrap(),
    )
}

fn file_entry(name: &str, size: u64, content: Content) -> Entry {
    Entry {
        name: name.into(),
        mode: 0o644,
        node: EntryNode::File { size, content },
    }
}

/// Files of every representation: inline, one chunk, a manifest (twice, so content
/// is shared), in nested directories, with a symlink, modes and state.
fn sample() -> Workspace {
    let mut ws = Workspace::new();
    ws.write("/small.txt", b"tiny").unwrap();
    ws.write("/src/one.bin", pseudo_random(5_000, 1)).unwrap();
    ws.write("/src/deep/big.bin", pseudo_random(300_000, 2))
        .unwrap();
    ws.write("/copy/big.bin", pseudo_random(300_000, 2))
        .unwrap();
    ws.write("/src/empty", b"").unwrap();
    ws.set_mode("/src/one.bin", 0o755).unwrap();
    ws.symlink("/link", "src/one.bin").unwrap();
    ws.mkdir("/void").unwrap();
    ws.set_state(pseudo_random(2_000, 9));
    ws
}

/// A store holding `ws`'s commit, and the commit's id.
fn committed(mut ws: Workspace) -> (Store, ObjectId, Snap) {
    let mut store = Store::new();
    let s = snap(&ws);
    let id = persist(&mut store, ws.commit(CommitOptions::new()).unwrap());
    (store, id, s)
}

fn shallow(id: ObjectId, store: &Store) -> Workspace {
    let mut ws = Workspace::new();
    let _ = ws
        .checkout_with(
            id,
            store,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::default())
                .shallow(true),
        )
        .unwrap();
    ws
}

fn full(id: ObjectId, store: &Store) -> Workspace {
    let mut ws = Workspace::new();
    let _ = ws.checkout(id, store, CheckoutPolicy::default()).unwrap();
    ws
}

/// Paths of the files `ws` has not loaded.
fn unloaded(ws: &Workspace) -> Vec<String> {
    ws.walk()
        .into_iter()
        .filter(|(p, m)| m.kind == EntryKind::File && !ws.is_loaded(p))
        .map(|(p, _)| p)
        .collect()
}

fn load_all(ws: &mut Workspace, store: &Store) {
    for p in unloaded(ws) {
        ws.load_content(&p, store).unwrap();
    }
}

// ---------------------------------------------------------------- reading

#[test]
fn unloaded_files_are_listed_but_not_read() {
    let (store, id, s) = committed(sample());
    let ws = shallow(id, &store);
    let reference = full(id, &store);
    assert_eq!(ws.head(), Some(id));
    assert_eq!(ws.walk(), reference.walk());
    assert_eq!(ws.list("/src").unwrap(), reference.list("/src").unwrap());
    assert_eq!(ws.state(), reference.state());
    assert_eq!(ws.read_link("/link").unwrap(), "src/one.bin");
    for (path, meta) in ws.walk() {
        assert!(ws.exists(&path));
        assert_eq!(ws.metadata(&path).unwrap(), meta);
    }
    assert_eq!(
        ws.metadata("/src/deep/big.bin").unwrap().size,
        300_000,
        "size from the tree entry"
    );
    assert_eq!(ws.metadata("/src/one.bin").unwrap().mode, 0o755);
    // Inline files come with their tree: loaded.
    assert!(ws.is_loaded("/small.txt"));
    assert!(ws.is_loaded("/src/empty"));
    assert_eq!(ws.read("/small.txt").unwrap(), b"tiny");
    assert_eq!(
        unloaded(&ws),
        ["/copy/big.bin", "/src/deep/big.bin", "/src/one.bin"]
    );
    for p in unloaded(&ws) {
        assert_eq!(ws.read(&p), Err(FsError::NotLoaded { path: p.clone() }));
        assert_eq!(ws.file_content_id(&p), reference.file_content_id(&p), "{p}");
        assert!(ws.file_content_id(&p).is_some());
    }
    // The error names the normalized path.
    assert_eq!(
        ws.read("/src//./one.bin"),
        Err(FsError::NotLoaded {
            path: "/src/one.bin".into()
        })
    );
    // Anything that is not a file is not "loaded", and has no content id.
    for p in ["/src", "/link", "/missing", "/", "relative"] {
        assert!(!ws.is_loaded(p), "{p}");
        assert_eq!(ws.file_content_id(p), None, "{p}");
    }
    assert_eq!(ws.file_content_id("/small.txt"), None, "inline content");
    // Identical content, one id.
    assert_eq!(
        ws.file_content_id("/copy/big.bin"),
        ws.file_content_id("/src/deep/big.bin")
    );
    // Loading everything gives exactly the full checkout.
    let mut ws = ws;
    load_all(&mut ws, &store);
    assert!(unloaded(&ws).is_empty());
    assert_eq!(snap(&ws), s);
}

#[test]
fn load_content_fetches_one_file() {
    let (store, id, s) = committed(sample());
    let mut ws = shallow(id, &store);
    let source = Recording::new(&store);
    ws.load_content("/src/deep/big.bin", &source).unwrap();
    assert!(ws.is_loaded("/src/deep/big.bin"));
    assert_eq!(
        ws.read("/src/deep/big.bin").unwrap(),
        &s.paths["/src/deep/big.bin"].2[..]
    );
    // Only that file's objects were read.
    let Content::Manifest(root) = content_of(&store, id, "/src/deep/big.bin") else {
        panic!("a manifest")
    };
    assert!(source.ids(ObjectKind::Manifest).contains(&root));
    assert!(source.count(ObjectKind::Chunk) >= 2);
    assert_eq!(source.count(ObjectKind::Tree), 0);
    assert_eq!(source.count(ObjectKind::Commit), 0);
    // The identical file elsewhere is still unloaded; loading it again is free.
    assert!(!ws.is_loaded("/copy/big.bin"));
    source.clear();
    ws.load_content("/src/deep/big.bin", &source).unwrap();
    ws.load_content("/small.txt", &source).unwrap();
    assert!(source.kinds.borrow().is_empty());
    // Loading marks nothing changed: the commit is the checked-out one, emitting only
    // the commit object, and reading nothing.
    let c = ws
        .commit(CommitOptions::new().have_in(&store).parent(id))
        .unwrap();
    assert_eq!(c.object_count(), 1);
    // Paths that are not files.
    for (p, want) in [
        (
            "/src",
            FsError::IsADirectory {
                path: "/src".into(),
            },
        ),
        ("/", FsError::IsADirectory { path: "/".into() }),
        (
            "/link",
            FsError::IsASymlink {
                path: "/link".into(),
            },
        ),
        (
            "/nope",
            FsError::NotFound {
                path: "/nope".into(),
            },
        ),
        (
            "/small.txt/x",
            FsError::NotADirectory {
                path: "/small.txt".into(),
            },
        ),
    ] {
        match ws.load_content(p, &store) {
            Err(CheckoutError::Fs(e)) => assert_eq!(e, want, "{p}"),
            other => panic!("{p}: {other:?}"),
        }
    }
    assert!(matches!(
        ws.load_content("rel", &store),
        Err(CheckoutError::Fs(FsError::InvalidPath(_)))
    ));
    // Errors convert into the crate's error.
    let e: snapgraph::Error = ws.load_content("/nope", &store).unwrap_err().into();
    assert!(e.to_string().contains("/nope"));
}

/// The content of `path` in commit `id`, read from the stored trees.
fn content_of(store: &Store, id: ObjectId, path: &str) -> Content {
    let commit = snapgraph::SnapshotGraph::commit(id, store).unwrap();
    let mut tree = commit.tree;
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    for (i, name) in comps.iter().enumerate() {
        let body = &store[&tree][2..];
        let TreeNode::Leaf(entries) = TreeNode::decode(&tree, body).unwrap() else {
            panic!("small directories are leaves")
        };
        let e = entries.into_iter().find(|e| e.name == *name).unwrap();
        match e.node {
            EntryNode::File { content, .. } if i + 1 == comps.len() => return content,
            EntryNode::Dir { tree: t, .. } => tree = t,
            other => panic!("{other:?}"),
        }
    }
    panic!("{path} not found")
}

#[test]
fn load_content_verifies_like_a_full_checkout() {
    let (store, id, _) = committed(sample());
    // One damaged chunk of the manifest file, one missing chunk of the one-chunk
    // file, each reported as the full checkout reports it.
    let Content::Manifest(root) = content_of(&store, id, "/src/deep/big.bin") else {
        panic!("a manifest")
    };
    let Content::Chunk(single) = content_of(&store, id, "/src/one.bin") else {
        panic!("a chunk")
    };
    let body = &store[&root][2..];
    let chunks = match Manifest::decode(&root, body).unwrap() {
        Manifest::Leaf(c) => c,
        Manifest::Internal { .. } => panic!("300 kB fits a leaf"),
    };
    let victim = chunks[1].id;

    let mut damaged = store.clone();
    damaged.get_mut(&victim).unwrap()[10] ^= 1;
    damaged.remove(&single);

    // The shallow checkout itself reads neither, so succeeds.
    let mut ws = Workspace::new();
    let _ = ws
        .checkout_with(
            id,
            &damaged,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::default())
                .shallow(true),
        )
        .unwrap();
    let full_err = Workspace::new()
        .checkout(id, &damaged, CheckoutPolicy::default())
        .unwrap_err();
    let shallow_err = ws.load_content("/src/deep/big.bin", &damaged).unwrap_err();
    assert!(
        matches!(&shallow_err, CheckoutError::Object(ObjectError::Corrupt { id, .. }) if *id == victim),
        "{shallow_err:?}"
    );
    // The full checkout meets the missing chunk or the damaged one first: whichever
    // it reports, load_content reports the same for that file.
    let (full_victim, shallow_same) = match &full_err {
        CheckoutError::Object(ObjectError::Corrupt { id, .. }) => (*id, shallow_err),
        CheckoutError::Object(ObjectError::NotFound { id }) => {
            (*id, ws.load_content("/src/one.bin", &damaged).unwrap_err())
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(full_err.to_string(), shallow_same.to_string());
    assert!([victim, single].contains(&full_victim));
    assert!(matches!(
        ws.load_content("/src/one.bin", &damaged),
        Err(CheckoutError::Object(ObjectError::NotFound { id })) if id == single
    ));
    // Failed loads leave the files unloaded; a good source then loads them.
    assert!(!ws.is_loaded("/src/deep/big.bin"));
    assert!(!ws.is_loaded("/src/one.bin"));
    ws.load_content("/src/deep/big.bin", &store).unwrap();
    ws.load_content("/src/one.bin", &store).unwrap();
    assert_eq!(ws.read("/src/one.bin").unwrap(), pseudo_random(5_000, 1));

    // A chunk of another length than the entry says, stored under its own hash.
    let mut lying = Store::new();
    let data = pseudo_random(200, 7);
    let chunk = put(&mut lying, ObjectKind::Chunk, &data);
    let tree = put_tree(
        &mut lying,
        &TreeNode::Leaf(vec![file_entry("f", 201, Content::Chunk(chunk))]),
    );
    let commit = put_commit(&mut lying, &bare_commit(tree, vec![], 1));
    let mut ws = Workspace::new();
    let _ = ws
        .checkout_with(
            commit,
            &lying,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::Force)
                .shallow(true),
        )
        .unwrap();
    assert_eq!(ws.metadata("/f").unwrap().size, 201);
    let e = ws.load_content("/f", &lying).unwrap_err();
    let f = Workspace::new()
        .checkout(commit, &lying, CheckoutPolicy::Force)
        .unwrap_err();
    assert!(
        matches!(&e, CheckoutError::Object(ObjectError::Malformed { id, kind: ObjectKind::Chunk, .. }) if *id == chunk),
        "{e:?}"
    );
    assert_eq!(e.to_string(), f.to_string());
}

#[test]
fn content_rules_apply_when_content_is_loaded() {
    let mut src = Workspace::new();
    src.write(
        "/db.sqlite",
        [b"SQLite format 3\0".as_slice(), &[1u8; 4000]].concat(),
    )
    .unwrap();
    src.write("/small.sqlite", b"SQLite format 3\0tiny")
        .unwrap();
    src.write("/ok.txt", pseudo_random(3000, 3)).unwrap();
    let (store, id, _) = committed(src.clone());
    let strict = || {
        let mut ws = Workspace::new();
        ws.require_feature_for_prefix(b"SQLite format 3\0".to_vec(), "sqlite");
        ws
    };
    // The inline file is in the tree: refused at checkout, as by a full checkout.
    let mut ws = strict();
    assert!(matches!(
        ws.checkout_with(id, &store, CheckoutOptions::new().policy(CheckoutPolicy::Force).shallow(true)),
        Err(CheckoutError::FeatureRequired { path, .. }) if path == "/small.sqlite"
    ));
    assert_eq!(ws.head(), None);
    // Without it, the chunked file is refused when loaded.
    src.remove("/small.sqlite").unwrap();
    let (store, id, _) = committed(src);
    let mut ws = strict();
    let _ = ws
        .checkout_with(
            id,
            &store,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::Force)
                .shallow(true),
        )
        .unwrap();
    ws.load_content("/ok.txt", &store).unwrap();
    assert!(matches!(
        ws.load_content("/db.sqlite", &store),
        Err(CheckoutError::FeatureRequired { commit, path, feature })
            if commit == id && path == "/db.sqlite" && feature == "sqlite"
    ));
    assert!(!ws.is_loaded("/db.sqlite"));
    let mut caps = CapabilityFingerprint::default();
    caps.features.insert("sqlite".into());
    ws.set_capabilities(caps);
    ws.load_content("/db.sqlite", &store).unwrap();
}

// ---------------------------------------------------------------- cost

#[test]
fn shallow_checkout_reads_no_content_objects() {
    let mut ws = Workspace::new();
    for i in 0..300 {
        let len = [10, 3_000, 90_000][i % 3];
        ws.write(
            &format!("/d{}/f{i:03}", i % 7),
            pseudo_random(len, i as u64),
        )
        .unwrap();
    }
    ws.set_state(pseudo_random(100_000, 77));
    let (store, id, _) = committed(ws);
    let source = Recording::new(&store);
    let mut target = Workspace::new();
    let _ = target
        .checkout_with(
            id,
            &source,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::default())
                .shallow(true),
        )
        .unwrap();
    // The state is loaded (its chunks and manifest); no file's content is.
    let state_objects: HashSet<ObjectId> = {
        let mut empty = Workspace::new();
        empty.set_state(pseudo_random(100_000, 77));
        let c = empty.commit(CommitOptions::new()).unwrap();
        c.objects()
            .iter()
            .filter(|(_, b)| {
                common::kind_of(b) != ObjectKind::Commit && common::kind_of(b) != ObjectKind::Tree
            })
            .map(|(id, _)| *id)
            .collect()
    };
    let content_reads: Vec<ObjectId> = source
        .kinds
        .borrow()
        .iter()
        .filter(|(_, k)| matches!(k, ObjectKind::Chunk | ObjectKind::Manifest))
        .map(|(id, _)| *id)
        .collect();
    assert!(!content_reads.is_empty(), "the state is read");
    for id in &content_reads {
        assert!(state_objects.contains(id), "read {id}, not the state's");
    }
    assert_eq!(unloaded(&target).len(), 200);
    assert!(source.count(ObjectKind::Tree) > 0);

    // Without state: not a single chunk or manifest.
    let mut ws = full(id, &store);
    ws.set_state(Vec::new());
    let c = ws.commit(CommitOptions::new().have_in(&store)).unwrap();
    let mut store = store.clone();
    let id = persist(&mut store, c);
    let source = Recording::new(&store);
    let mut target = Workspace::new();
    let _ = target
        .checkout_with(
            id,
            &source,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::default())
                .shallow(true),
        )
        .unwrap();
    assert_eq!(source.count(ObjectKind::Chunk), 0);
    assert_eq!(source.count(ObjectKind::Manifest), 0);

    // Changing one file and committing reads nothing from the source, and emits
    // that file's objects and the trees above it.
    source.clear();
    target
        .write("/d3/f003", pseudo_random(3_000, 1234))
        .unwrap();
    let c = target
        .commit(CommitOptions::new().parent(id).have_in(&source))
        .unwrap();
    assert!(source.kinds.borrow().is_empty());
    // The commit, two trees, one chunk.
    assert_eq!(c.object_count(), 4);
    let mut reference = full(id, &store);
    reference
        .write("/d3/f003", pseudo_random(3_000, 1234))
        .unwrap();
    let r = reference
        .commit(CommitOptions::new().parent(id).have_in(&store))
        .unwrap();
    assert_eq!(c.id(), r.id());
}

// ---------------------------------------------------------------- committing

#[test]
fn commit_into_an_empty_store_needs_the_content() {
    let (store, id, s) = committed(sample());
    let mut ws = shallow(id, &store);
    let e = ws.commit(CommitOptions::new()).unwrap_err();
    match &e {
        CommitError::ContentNotLoaded { path, id: content } => {
            assert!(unloaded(&ws).contains(path), "{path}");
            assert_eq!(ws.file_content_id(path), Some(*content));
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("not loaded"));
    assert_eq!(ws.head(), Some(id), "a failed commit moves nothing");
    // Declaring a destination that lacks it fails alike: one holding only the
    // commit object and the state's objects.
    let commit_and_state: Vec<ObjectId> = store
        .iter()
        .filter(|(_, b)| common::kind_of(b) != ObjectKind::Tree)
        .map(|(i, _)| *i)
        .filter(|i| *i == id || reference_state_objects(&s).contains(i))
        .collect();
    assert!(matches!(
        ws.commit(CommitOptions::new().have(&commit_and_state)),
        Err(CommitError::ContentNotLoaded { .. })
    ));
    // A destination holding the trees holds what they reference.
    let trees: Vec<ObjectId> = store
        .iter()
        .filter(|(_, b)| common::kind_of(b) == ObjectKind::Tree)
        .map(|(i, _)| *i)
        .collect();
    assert!(ws.clone().commit(CommitOptions::new().have(&trees)).is_ok());
    // Into the store it came from: works, and the workspace is still usable after
    // the failures.
    let c = ws.commit(CommitOptions::new().have_in(&store)).unwrap();
    assert_eq!(c.id(), id, "same commit (no parent, same contents)");
    assert!(!c.is_complete());
    // Loading everything makes a self-contained commit possible.
    load_all(&mut ws, &store);
    let c = ws.commit(CommitOptions::new()).unwrap();
    assert_eq!(c.id(), id);
    assert!(c.is_complete());
    let alone: Store = c.into_objects().into_iter().collect();
    assert_eq!(snap(&full(id, &alone)), s);
}

/// The objects storing `s`'s state.
fn reference_state_objects(s: &Snap) -> HashSet<ObjectId> {
    let mut ws = Workspace::new();
    ws.set_state(s.state.clone());
    let c = ws.commit(CommitOptions::new()).unwrap();
    c.objects()
        .iter()
        .filter(|(_, b)| !matches!(common::kind_of(b), ObjectKind::Tree | ObjectKind::Commit))
        .map(|(id, _)| *id)
        .collect()
}

#[test]
fn only_unloaded_files_the_destination_lacks_fail() {
    // One unloaded file whose content is emitted earlier by a loaded file: no error.
    let mut src = Workspace::new();
    src.write("/a/x", pseudo_random(4000, 5)).unwrap();
    src.write("/b/y", pseudo_random(4000, 5)).unwrap();
    let (store, id, _) = committed(src);
    let mut ws = shallow(id, &store);
    ws.load_content("/a/x", &store).unwrap();
    let c = ws.commit(CommitOptions::new()).unwrap();
    assert_eq!(c.id(), id);
    assert!(c.is_complete());
    // The other way round the tree naming the content would come before it: refused.
    let mut ws = shallow(id, &store);
    ws.load_content("/b/y", &store).unwrap();
    assert!(matches!(
        ws.commit(CommitOptions::new()),
        Err(CommitError::ContentNotLoaded { path, .. }) if path == "/a/x"
    ));
}

#[test]
fn moving_removing_and_re_moding_unloaded_files() {
    let (store, id, _) = committed(sample());
    let mut ws = shallow(id, &store);
    let mut reference = full(id, &store);
    let edit = |w: &mut Workspace| {
        w.rename("/src/deep/big.bin", "/moved/big.bin").unwrap();
        w.rename("/src/one.bin", "/src/one-renamed.bin").unwrap();
        w.set_mode("/src/one-renamed.bin", 0o600).unwrap();
        w.set_mode("/moved/big.bin", 0o4711).unwrap();
        w.remove("/copy/big.bin").unwrap();
        w.rename("/src", "/source").unwrap();
    };
    edit(&mut ws);
    edit(&mut reference);
    assert_eq!(ws.walk(), reference.walk());
    assert!(!ws.is_loaded("/moved/big.bin"));
    assert_eq!(
        ws.read("/moved/big.bin"),
        Err(FsError::NotLoaded {
            path: "/moved/big.bin".into()
        })
    );
    assert_eq!(
        ws.file_content_id("/moved/big.bin"),
        reference.file_content_id("/moved/big.bin")
    );
    // Overwriting an unloaded file replaces it.
    ws.write("/source/one-renamed.bin", b"short now").unwrap();
    reference
        .write("/source/one-renamed.bin", b"short now")
        .unwrap();
    assert!(ws.is_loaded("/source/one-renamed.bin"));
    assert_eq!(ws.metadata("/source/one-renamed.bin").unwrap().mode, 0o600);
    let opts = || CommitOptions::new().parent(id).have_in(&store);
    let a = ws.commit(opts()).unwrap();
    let b = reference.commit(opts()).unwrap();
    assert_eq!(a.id(), b.id());
    let ids = |c: &snapgraph::Commit| c.objects().ids().copied().collect::<HashSet<_>>();
    assert_eq!(ids(&a), ids(&b), "the same objects emitted");
    let mut store = store.clone();
    let next = persist(&mut store, a);
    assert_eq!(snap(&full(next, &store)), snap(&reference));
    // The moved file loads at its new path, under the new head.
    ws.load_content("/moved/big.bin", &store).unwrap();
    assert_eq!(
        ws.read("/moved/big.bin").unwrap(),
        &pseudo_random(300_000, 2)[..]
    );
}

/// A large file a shallow checkout left in the store, written over: the commit reads
/// that version's chunk list from the store it is given (`have_in`) and hashes the
/// chunks the new bytes still hold instead of cutting them, or, without the store,
/// cuts it afresh; the same commit either way, as a full checkout's and a fresh
/// workspace's.
#[test]
fn overwriting_a_large_unloaded_file_commits_as_a_whole_write() {
    let mut src = Workspace::new();
    let base = pseudo_random(3 << 20, 41);
    src.write("/big", &base).unwrap();
    src.write("/other", pseudo_random(2 << 20, 42)).unwrap();
    let (store, id, _) = committed(src);
    let mut edited = base.clone();
    edited[1 << 20..(1 << 20) + 64].fill(0xAB);
    edited.extend_from_slice(b"appended");

    let mut ws = shallow(id, &store);
    let mut reference = full(id, &store);
    for w in [&mut ws, &mut reference] {
        w.write("/big", &edited).unwrap();
        // Written twice: the second write keeps (for the full checkout) the
        // committed version as its previous one.
        edited[10] ^= 1;
        w.write("/big", &edited).unwrap();
        edited[10] ^= 1;
    }
    let opts = || CommitOptions::new().parent(id).have_in(&store);
    let a = ws.commit(opts()).unwrap();
    let b = reference.commit(opts()).unwrap();
    assert_eq!(a.id(), b.id());
    let mut fresh = Workspace::new();
    edited[10] ^= 1;
    fresh.write("/big", &edited).unwrap();
    fresh.write("/other", pseudo_random(2 << 20, 42)).unwrap();
    let f = fresh
        .commit(CommitOptions::new().parent(id).parent_source(&store))
        .unwrap();
    assert_eq!(a.id(), f.id());
    // Only what changed is emitted: far less than the file.
    assert!(a.stored_bytes() < 1 << 20, "{}", a.stored_bytes());
    assert!(!ws.is_loaded("/other"));

    // With a source that lacks the old manifest: cut afresh, the same commit.
    let old_root = shallow(id, &store).file_content_id("/big").unwrap();
    let mut lacking = store.clone();
    assert!(lacking.remove(&old_root).is_some());
    let mut ws = shallow(id, &store);
    ws.write("/big", &edited).unwrap();
    let opts = CommitOptions::new().parent(id).have_in(&lacking);
    assert_eq!(ws.commit(opts).unwrap().id(), f.id());
    // Bytes after an edit at one of the stored cuts (the cut's deciding byte).
    let cut = snapgraph::chunk::cut_points(&base)[30];
    let mut at_cut = base.clone();
    at_cut[cut] ^= 0xFF;
    let mut ws = shallow(id, &store);
    ws.write("/big", &at_cut).unwrap();
    let mut whole = Workspace::new();
    whole.write("/big", &at_cut).unwrap();
    let _ = ws
        .commit(CommitOptions::new().parent(id).have_in(&store))
        .unwrap();
    let _ = whole.commit(CommitOptions::new()).unwrap();
    assert_eq!(ws.file_content_id("/big"), whole.file_content_id("/big"));
}

#[test]
fn forks_load_independently() {
    let (store, id, _) = committed(sample());
    let ws = shallow(id, &store);
    let mut fork = ws.clone();
    fork.load_content("/src/one.bin", &store).unwrap();
    assert!(fork.is_loaded("/src/one.bin"));
    assert!(!ws.is_loaded("/src/one.bin"));
    assert!(ws.read("/src/one.bin").is_err());
}

// ---------------------------------------------------------------- snapshots

#[test]
fn snapshots_need_every_byte() {
    let (store, id, _) = committed(sample());
    let mut ws = shallow(id, &store);
    let reference = full(id, &store);
    let e = ws
        .snapshot_with(SnapshotOptions::default(), None)
        .unwrap_err();
    assert!(
        matches!(&e, CommitError::ContentNotLoaded { path, .. } if unloaded(&ws).contains(path)),
        "{e:?}"
    );
    // Every short form says so too: no empty-vector path (issue #12, defect 1).
    let key = [3u8; 32];
    for e in [
        ws.snapshot().unwrap_err(),
        ws.snapshot_keyed(&key).unwrap_err(),
        ws.snapshot_with_options(SnapshotOptions {
            compress: true,
            ..SnapshotOptions::default()
        })
        .unwrap_err(),
    ] {
        assert!(
            matches!(&e, CommitError::ContentNotLoaded { path, .. } if unloaded(&ws).contains(path)),
            "{e:?}"
        );
    }
    let mut out = Vec::new();
    let io = ws
        .write_snapshot(SnapshotOptions::default(), None, &mut out)
        .unwrap_err();
    assert!(out.is_empty());
    let inner = io.into_inner().unwrap().downcast::<CommitError>().unwrap();
    assert!(matches!(*inner, CommitError::ContentNotLoaded { .. }));
    // Without files it works.
    let no_files = SnapshotOptions {
        exclude_files: true,
        ..SnapshotOptions::default()
    };
    assert_eq!(
        ws.snapshot_with(no_files, None).unwrap(),
        reference.snapshot_with_options(no_files).unwrap()
    );
    // Loaded, it packs to the same bytes as the full checkout.
    load_all(&mut ws, &store);
    assert_eq!(
        ws.snapshot_with(SnapshotOptions::default(), None).unwrap(),
        reference.snapshot().unwrap()
    );
    assert_eq!(ws.snapshot().unwrap(), reference.snapshot().unwrap());
}

// ---------------------------------------------------------------- hostile trees

fn bystander() -> Workspace {
    let mut ws = Workspace::new();
    ws.write("/keep", b"precious").unwrap();
    ws.set_state(b"bystander".to_vec());
    ws
}

#[test]
fn limits_apply_to_recorded_sizes() {
    // Files claiming 64 GiB each through manifests that are not even stored: the
    // shallow checkout must refuse them from the sizes alone.
    let mut store = Store::new();
    let entries: Vec<Entry> = (0..4)
        .map(|i| {
            file_entry(
                &format!("f{i}"),
                64 << 30,
                Content::Manifest(ObjectId::from_bytes([i as u8 + 1; 32])),
            )
        })
        .collect();
    let tree = put_tree(&mut store, &TreeNode::Leaf(entries));
    let commit = put_commit(&mut store, &bare_commit(tree, vec![], 1));
    let mut ws = bystander();
    let before = snap(&ws);
    for result in [
        ws.checkout_with(
            commit,
            &store,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::Force)
                .shallow(true),
        ),
        Workspace::new().checkout(commit, &store, CheckoutPolicy::Force),
    ] {
        assert!(
            matches!(result, Err(CheckoutError::Limit(LimitError::Exceeded { what: "bytes", commit: c, .. })) if c == commit),
            "{result:?}"
        );
    }
    assert_eq!(snap(&ws), before);
    // Under limits that allow them, the shallow checkout takes the entries as
    // recorded (nothing is read), and loading reports the missing manifest.
    ws.set_limits(Limits {
        max_bytes: u64::MAX,
        ..Limits::default()
    });
    let _ = ws
        .checkout_with(
            commit,
            &store,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::Force)
                .shallow(true),
        )
        .unwrap();
    assert_eq!(ws.metadata("/f0").unwrap().size, 64 << 30);
    assert!(matches!(
        ws.load_content("/f0", &store),
        Err(CheckoutError::Object(ObjectError::NotFound { .. }))
    ));

    // The file limit, and lying directory totals.
    let mut src = Workspace::new();
    for i in 0..50 {
        src.write(&format!("/d{}/f{i}", i % 5), pseudo_random(1000, i))
            .unwrap();
    }
    let (mut store, id, _) = committed(src);
    let mut ws = bystander();
    for (limits, what) in [
        (
            Limits {
                max_files: 49,
                ..Limits::default()
            },
            "files",
        ),
        (
            Limits {
                max_bytes: 49_999,
                ..Limits::default()
            },
            "bytes",
        ),
    ] {
        ws.set_limits(limits);
        assert!(matches!(
            ws.checkout_with(id, &store, CheckoutOptions::new().policy(CheckoutPolicy::default()).shallow(true)),
            Err(CheckoutError::Limit(LimitError::Exceeded { what: w, .. })) if w == what
        ));
        assert_eq!(snap(&ws), before);
    }
    let real_tree = snapgraph::SnapshotGraph::commit(id, &store).unwrap().tree;
    let liar_tree = put_tree(
        &mut store,
        &TreeNode::Leaf(vec![common::dir_entry("d", real_tree, 0, 0)]),
    );
    let liar = put_commit(&mut store, &bare_commit(liar_tree, vec![], 1));
    ws.set_limits(Limits {
        max_files: 10,
        ..Limits::default()
    });
    assert!(matches!(
        ws.checkout_with(
            liar,
            &store,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::Force)
                .shallow(true)
        ),
        Err(CheckoutError::Limit(LimitError::Exceeded {
            what: "files",
            ..
        }))
    ));
    assert_eq!(snap(&ws), before);
}

#[test]
fn malformed_trees_are_refused_as_by_a_full_checkout() {
    let mut store = Store::new();
    let chunk = put(&mut store, ObjectKind::Chunk, &pseudo_random(3000, 1));
    // Two entries naming one chunk with different sizes.
    let tree = put_tree(
        &mut store,
        &TreeNode::Leaf(vec![
            file_entry("a", 3000, Content::Chunk(chunk)),
            file_entry("b", 2999, Content::Chunk(chunk)),
        ]),
    );
    let commit = put_commit(&mut store, &bare_commit(tree, vec![], 1));
    let mut ws = bystander();
    let before = snap(&ws);
    for result in [
        ws.checkout_with(
            commit,
            &store,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::Force)
                .shallow(true),
        ),
        Workspace::new().checkout(commit, &store, CheckoutPolicy::Force),
    ] {
        assert!(
            matches!(&result, Err(CheckoutError::Object(ObjectError::Malformed { id, .. })) if *id == chunk),
            "{result:?}"
        );
    }
    assert_eq!(snap(&ws), before);
    // A non-canonical tree (small content stored as a chunk) and a bad inline
    // length are refused by the tree decoder, before any content.
    for entries in [
        vec![file_entry("a", 10, Content::Chunk(chunk))],
        vec![
            inline_file("a", b"abc"),
            file_entry("b", 4, Content::Inline(b"xy".to_vec())),
        ],
    ] {
        let tree = put_tree(&mut store, &TreeNode::Leaf(entries));
        let commit = put_commit(&mut store, &bare_commit(tree, vec![], 1));
        let full_err = Workspace::new()
            .checkout(commit, &store, CheckoutPolicy::Force)
            .unwrap_err();
        let shallow_err = ws
            .checkout_with(
                commit,
                &store,
                CheckoutOptions::new()
                    .policy(CheckoutPolicy::Force)
                    .shallow(true),
            )
            .unwrap_err();
        assert_eq!(full_err.to_string(), shallow_err.to_string());
        assert!(matches!(
            shallow_err,
            CheckoutError::Object(ObjectError::Malformed { id, .. }) if id == tree
        ));
        assert_eq!(snap(&ws), before);
    }
    // A manifest tree node listing chunks is only read on load.
    let m = put(
        &mut store,
        ObjectKind::Manifest,
        &postcard::to_allocvec(&Manifest::Leaf(vec![ChunkRef {
            id: chunk,
            len: 3000,
        }]))
        .unwrap(),
    );
    let tree = put_tree(
        &mut store,
        &TreeNode::Leaf(vec![file_entry("m", 3000, Content::Manifest(m))]),
    );
    let commit = put_commit(&mut store, &bare_commit(tree, vec![], 1));
    let _ = ws
        .checkout_with(
            commit,
            &store,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::Force)
                .shallow(true),
        )
        .unwrap();
    assert!(matches!(
        ws.load_content("/m", &store),
        Err(CheckoutError::Object(ObjectError::Malformed { id, kind: ObjectKind::Manifest, .. })) if id == m
    ));
}

// ---------------------------------------------------------------- equivalence property

const NAMES: [&str; 4] = ["a", "b", "c", "d"];
const TARGETS: [&str; 3] = ["a", "../b/c", "/abs/target"];

/// Content described by a few numbers, so failures print small.
#[derive(Clone, Copy, Debug)]
struct Bytes {
    len: usize,
    seed: u64,
    edit: usize,
}

impl Bytes {
    fn make(&self) -> Vec<u8> {
        if self.len <= 64 {
            return vec![self.seed as u8; self.len];
        }
        let mut v = pseudo_random(self.len, self.seed);
        let at = self.edit % self.len;
        v[at] = v[at].wrapping_add(1);
        v
    }
}

fn bytes() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        5 => (0usize..=64, 0u64..3).prop_map(|(len, seed)| Bytes { len, seed, edit: 0 }),
        4 => (65usize..6000, 0u64..3, 0usize..6000).prop_map(|(len, seed, edit)| Bytes { len, seed, edit }),
        1 => (66_000usize..200_000, 0u64..2, 0usize..200_000)
            .prop_map(|(len, seed, edit)| Bytes { len, seed, edit }),
    ]
}

fn path() -> impl Strategy<Value = String> {
    prop::collection::vec(0..NAMES.len(), 1..=3)
        .prop_map(|v| v.iter().map(|&i| format!("/{}", NAMES[i])).collect())
}

#[derive(Debug, Clone)]
enum Op {
    Write(String, Bytes),
    Remove(String),
    Mkdir(String),
    Rename(String, String),
    Symlink(String, usize),
    SetMode(String, u32),
    SetState(Bytes),
    /// Many files in one directory, so directories span several tree nodes.
    Bulk(String, usize, u8),
    WriteN(String, usize, Bytes),
    RemoveN(String, usize),
    RenameN(String, usize, String),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (path(), bytes()).prop_map(|(p, b)| Op::Write(p, b)),
        2 => path().prop_map(Op::Remove),
        1 => path().prop_map(Op::Mkdir),
        4 => (path(), path()).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => (path(), 0..TARGETS.len()).prop_map(|(p, t)| Op::Symlink(p, t)),
        3 => (path(), prop_oneof![Just(0o600u32), Just(0o755), Just(0o4711), Just(0o10000)])
            .prop_map(|(p, m)| Op::SetMode(p, m)),
        1 => bytes().prop_map(Op::SetState),
        1 => (path(), 50usize..300, any::<u8>()).prop_map(|(p, n, v)| Op::Bulk(p, n, v)),
        2 => (path(), 0usize..300, bytes()).prop_map(|(p, i, b)| Op::WriteN(p, i, b)),
        2 => (path(), 0usize..300).prop_map(|(p, i)| Op::RemoveN(p, i)),
        2 => (path(), 0usize..300, path()).prop_map(|(p, i, q)| Op::RenameN(p, i, q)),
    ]
}

fn ops(max: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 0..max)
}

/// Applies one operation; returns whether it succeeded.
fn apply(ws: &mut Workspace, op: &Op) -> bool {
    match op {
        Op::Write(p, b) => ws.write(p, b.make()).is_ok(),
        Op::Remove(p) => ws.remove(p).is_ok(),
        Op::Mkdir(p) => ws.mkdir(p).is_ok(),
        Op::Rename(a, b) => ws.rename(a, b).is_ok(),
        Op::Symlink(p, t) => ws.symlink(p, TARGETS[*t]).is_ok(),
        Op::SetMode(p, m) => ws.set_mode(p, *m).is_ok(),
        Op::SetState(b) => {
            ws.set_state(b.make());
            true
        }
        Op::Bulk(dir, n, v) => {
            let mut ok = true;
            for i in 0..*n {
                // Every tenth one large enough to be stored as a chunk.
                let len = if i % 10 == 0 { 100 + i } else { i % 60 };
                let data = vec![v.wrapping_add(i as u8); len];
                ok &= ws.write(&format!("{dir}/n{i:03}"), data).is_ok();
            }
            ok
        }
        Op::WriteN(dir, i, b) => ws.write(&format!("{dir}/n{i:03}"), b.make()).is_ok(),
        Op::RemoveN(dir, i) => ws.remove(&format!("{dir}/n{i:03}")).is_ok(),
        Op::RenameN(dir, i, to) => ws.rename(&format!("{dir}/n{i:03}"), to).is_ok(),
    }
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        max_shrink_iters: 1000,
        // No regression file: this test file is the only one it may touch.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(128))]

    /// A shallow checkout edited and committed gives the same commit (and emits the
    /// same objects) as a full checkout edited the same way, and as a fresh workspace
    /// holding the final contents; everything observable but unloaded bytes agrees
    /// along the way.
    #[test]
    fn shallow_commits_equal_full_commits(
        first in ops(25),
        second in ops(15),
        fail_first in any::<bool>(),
    ) {
        let mut origin = Workspace::new();
        for op in &first {
            apply(&mut origin, op);
        }
        let mut store = Store::new();
        let base = persist(&mut store, origin.commit(CommitOptions::new()).unwrap());

        let mut full_ws = Workspace::new();
        let _ = full_ws.checkout(base, &store, CheckoutPolicy::default()).unwrap();
        let source = Recording::new(&store);
        let mut ws = Workspace::new();
        let _ = ws.checkout_with(base, &source, CheckoutOptions::new().policy(CheckoutPolicy::default()).shallow(true)).unwrap();
        // The only content read is the state's.
        let state_objects = reference_state_objects(&snap(&full_ws));
        for kind in [ObjectKind::Chunk, ObjectKind::Manifest] {
            for id in source.ids(kind) {
                prop_assert!(state_objects.contains(&id), "read {} {}", kind, id);
            }
        }
        for (p, meta) in ws.walk() {
            if meta.kind == EntryKind::File && meta.size > 64 {
                prop_assert!(!ws.is_loaded(&p), "{} loaded", p);
            }
        }

        for (i, op) in second.iter().enumerate() {
            let a = apply(&mut ws, op);
            let b = apply(&mut full_ws, op);
            prop_assert_eq!(a, b, "op {} {:?}", i, op);
        }
        let expected = snap(&full_ws);
        prop_assert_eq!(ws.walk(), full_ws.walk());
        prop_assert_eq!(ws.state(), full_ws.state());
        for (p, meta) in ws.walk() {
            if meta.kind != EntryKind::File {
                continue;
            }
            match ws.read(&p) {
                Ok(bytes) => prop_assert_eq!(bytes, &expected.paths[&p].2[..], "{}", p),
                Err(e) => prop_assert_eq!(e, FsError::NotLoaded { path: p.clone() }),
            }
            prop_assert_eq!(ws.file_content_id(&p), full_ws.file_content_id(&p), "{}", p);
        }

        // Committing where the content is lacking fails (or succeeds only if every
        // unloaded content is emitted), and changes nothing observable.
        if fail_first {
            let missing = unloaded(&ws);
            match ws.commit(CommitOptions::new().parent(base)) {
                Ok(c) => {
                    for p in &missing {
                        let id = ws.file_content_id(p).unwrap();
                        prop_assert!(c.objects().contains_id(&id), "{} not emitted", p);
                    }
                }
                Err(CommitError::ContentNotLoaded { path, id }) => {
                    prop_assert!(missing.contains(&path), "{} is loaded", path);
                    prop_assert_eq!(ws.file_content_id(&path), Some(id));
                    prop_assert_eq!(ws.head(), Some(base));
                }
                Err(e) => prop_assert!(false, "{:?}", e),
            }
            prop_assert_eq!(ws.walk(), full_ws.walk());
        }

        let opts = || CommitOptions::new().parent(base).have_in(&store);
        source.clear();
        let shallow_commit = ws.commit(CommitOptions::new().parent(base).have_in(&source)).unwrap();
        prop_assert!(source.kinds.borrow().is_empty(), "a commit reads no object");
        let full_commit = full_ws.commit(opts()).unwrap();
        prop_assert_eq!(shallow_commit.id(), full_commit.id());
        let ids = |c: &snapgraph::Commit| c.objects().ids().copied().collect::<HashSet<_>>();
        prop_assert_eq!(ids(&shallow_commit), ids(&full_commit));
        for id in shallow_commit.objects().ids() {
            prop_assert!(!store.contains_key(id), "re-emitted {}", id);
        }

        let mut fresh = build_from(expected.paths.keys(), &expected);
        let fresh_commit = fresh
            .commit(CommitOptions::new().parent(base).parent_source(&store))
            .unwrap();
        prop_assert_eq!(shallow_commit.id(), fresh_commit.id());

        let order: Vec<ObjectId> = shallow_commit.objects().ids().copied().collect();
        let id = persist(&mut store, shallow_commit);
        common::assert_children_first(&order, &store, false);
        let mut back = Workspace::new();
        let _ = back.checkout(id, &store, CheckoutPolicy::default()).unwrap();
        prop_assert_eq!(snap(&back), expected.clone());

        // A second shallow round trip from the new commit, then loading everything,
        // restores exactly the same.
        let mut again = Workspace::new();
        let _ = again.checkout_with(id, &store, CheckoutOptions::new().policy(CheckoutPolicy::default()).shallow(true)).unwrap();
        prop_assert_eq!(again.commit(CommitOptions::new().parent(base).parent_source(&store).have_in(&store)).unwrap().id(), id);
        load_all(&mut ws, &store);
        prop_assert_eq!(snap(&ws), expected);
    }
}

// ---------------------------------------------------------------- lazy checkout

fn lazy(id: ObjectId, source: &(impl ObjectSource + ?Sized)) -> Workspace {
    let mut ws = Workspace::new();
    let _ = ws
        .checkout_with(
            id,
            source,
            CheckoutOptions::new()
                .policy(CheckoutPolicy::default())
                .lazy(true),
        )
        .unwrap();
    ws
}

/// The directory holding `path`.
fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The directories `op` needs loaded to act as on a full workspace.
fn dirs_of(op: &Op) -> Vec<String> {
    match op {
        Op::Write(p, _) | Op::Remove(p) | Op::Mkdir(p) | Op::Symlink(p, _) | Op::SetMode(p, _) => {
            vec![parent(p).to_string()]
        }
        Op::Rename(a, b) => vec![parent(a).to_string(), parent(b).to_string()],
        Op::SetState(_) => vec![],
        Op::Bulk(d, ..) | Op::WriteN(d, ..) | Op::RemoveN(d, ..) => vec![d.clone()],
        Op::RenameN(d, _, to) => vec![d.clone(), parent(to).to_string()],
    }
}

proptest! {
    #![proptest_config(config(128))]

    /// A lazy checkout whose directories are loaded only where an edit goes commits
    /// byte-identically to a full checkout edited the same way (same id, same
    /// objects emitted), reads only the trees on the edited paths, and restores the
    /// same tree.
    #[test]
    fn lazy_commits_equal_full_commits(first in ops(25), second in ops(15)) {
        let mut origin = Workspace::new();
        for op in &first {
            apply(&mut origin, op);
        }
        let mut store = Store::new();
        let base = persist(&mut store, origin.commit(CommitOptions::new()).unwrap());
        let mut full_ws = Workspace::new();
        let _ = full_ws.checkout(base, &store, CheckoutPolicy::default()).unwrap();
        let source = Recording::new(&store);
        let mut ws = lazy(base, &source);
        // Only the root directory is read: nothing below it is listed.
        for (p, meta) in ws.walk() {
            prop_assert!(parent(&p) == "/", "{} below the root listed", p);
            if meta.kind == EntryKind::Dir {
                prop_assert_eq!(ws.metadata(&p), Err(FsError::NotLoaded { path: p.clone() }));
            }
        }
        for (i, op) in second.iter().enumerate() {
            for d in dirs_of(op) {
                ws.load_dir(&d, &source).unwrap();
            }
            let a = apply(&mut ws, op);
            let b = apply(&mut full_ws, op);
            prop_assert_eq!(a, b, "op {} {:?}", i, op);
        }
        // Totals answer from what is loaded and the unloaded directories' entries
        // as a walk of the full workspace counts them, wherever they answer.
        let walked = full_ws.walk();
        let oracle = |dir: &str| {
            let prefix = if dir == "/" { "/".to_string() } else { format!("{dir}/") };
            walked.iter().filter(|(p, _)| p.starts_with(&prefix)).fold((0u64, 0u64), |(f, b), (_, m)| match m.kind {
                EntryKind::File => (f + 1, b + m.size),
                EntryKind::Symlink => (f + 1, b),
                EntryKind::Dir => (f, b),
            })
        };
        prop_assert_eq!(ws.totals("/").unwrap(), oracle("/"));
        for (p, m) in &walked {
            match (m.kind, ws.totals(p)) {
                (EntryKind::Dir, Ok(t)) => prop_assert_eq!(t, oracle(p), "{}", p),
                (EntryKind::Dir, Err(e)) => prop_assert!(matches!(e, FsError::NotLoaded { .. }), "{}: {:?}", p, e),
                (_, r) => prop_assert!(matches!(r, Err(FsError::NotADirectory { .. } | FsError::NotLoaded { .. })), "{}: {:?}", p, r),
            }
        }
        source.clear();
        let lazy_commit = ws.commit(CommitOptions::new().parent(base).have_in(&source)).unwrap();
        prop_assert!(source.kinds.borrow().is_empty(), "a commit reads no object");
        let full_commit = full_ws.commit(CommitOptions::new().parent(base).have_in(&store)).unwrap();
        prop_assert_eq!(lazy_commit.id(), full_commit.id());
        let ids = |c: &snapgraph::Commit| c.objects().ids().copied().collect::<HashSet<_>>();
        prop_assert_eq!(ids(&lazy_commit), ids(&full_commit));
        let expected = snap(&full_ws);
        let id = persist(&mut store, lazy_commit);
        let mut back = Workspace::new();
        let _ = back.checkout(id, &store, CheckoutPolicy::default()).unwrap();
        prop_assert_eq!(snap(&back), expected);
        // Loading everything lazily gives the full workspace, a path at a time or
        // every path in one batched call.
        let mut all = lazy(id, &store);
        let dirs: Vec<String> = back
            .walk()
            .into_iter()
            .filter(|(_, m)| m.kind == EntryKind::Dir)
            .map(|(p, _)| p)
            .collect();
        for p in &dirs {
            all.load_dir(p, &store).unwrap();
        }
        prop_assert_eq!(all.walk(), back.walk());
        let mut batched = lazy(id, &store);
        let paths: Vec<&str> = dirs.iter().rev().map(String::as_str).collect();
        batched.load_dirs(&paths, &store).unwrap();
        prop_assert_eq!(batched.walk(), back.walk());
    }
}

/// Only the root directory's trees are read by a lazy checkout, and only the
/// directories on the way to a path by `load_dir`.
#[test]
fn lazy_checkout_reads_the_root_then_the_path() {
    let mut ws = Workspace::new();
    for d in ["a", "b", "c"] {
        for e in ["x", "y"] {
            ws.write(&format!("/{d}/{e}/f.txt"), pseudo_random(100, 1))
                .unwrap();
        }
    }
    let (store, id, _) = committed(ws);
    let source = Recording::new(&store);
    let mut ws = lazy(id, &source);
    assert_eq!(source.count(ObjectKind::Tree), 1, "the root's one node");
    source.clear();
    ws.load_dir("/b/y", &source).unwrap();
    assert_eq!(source.count(ObjectKind::Tree), 2, "b and b/y");
    assert_eq!(ws.metadata("/b/y/f.txt").unwrap().size, 100);
    assert_eq!(
        ws.metadata("/a/x/f.txt"),
        Err(FsError::NotLoaded { path: "/a".into() })
    );
    assert!(matches!(ws.list("/c"), Err(FsError::NotLoaded { .. })));
    assert!(matches!(
        ws.write("/c/x/g", b"g"),
        Err(FsError::NotLoaded { .. })
    ));
    // Loading again reads nothing; a path that is not a directory stops quietly.
    source.clear();
    ws.load_dir("/b/y", &source).unwrap();
    ws.load_dir("/b/y/f.txt/nothing", &source).unwrap();
    assert_eq!(source.count(ObjectKind::Tree), 0);
    // Removing, moving and re-moding an unloaded directory keep its tree entry.
    ws.rename("/a", "/moved").unwrap();
    ws.set_mode("/moved", 0o700).unwrap();
    ws.remove("/c").unwrap();
    ws.write("/b/y/f.txt", b"new").unwrap();
    let lazy_commit = ws
        .commit(CommitOptions::new().parent(id).have_in(&store))
        .unwrap();
    let mut full = Workspace::new();
    let _ = full
        .checkout(id, &store, CheckoutPolicy::default())
        .unwrap();
    full.rename("/a", "/moved").unwrap();
    full.set_mode("/moved", 0o700).unwrap();
    full.remove("/c").unwrap();
    full.write("/b/y/f.txt", b"new").unwrap();
    let full_commit = full
        .commit(CommitOptions::new().parent(id).have_in(&store))
        .unwrap();
    assert_eq!(lazy_commit.id(), full_commit.id());
}

/// A commit that would have to emit an unloaded directory (the destination lacks
/// it) fails with the directory's path and root id, and changes nothing.
#[test]
fn committing_an_unloaded_directory_elsewhere_is_a_typed_error() {
    let mut ws = Workspace::new();
    ws.write("/d/e/f.txt", b"f").unwrap();
    let (store, id, _) = committed(ws);
    let mut ws = lazy(id, &store);
    ws.write("/top.txt", b"t").unwrap();
    match ws.commit(CommitOptions::new().parent(id)) {
        Err(CommitError::ContentNotLoaded { path, id: tree }) => {
            assert_eq!(path, "/d");
            assert!(store.contains_key(&tree));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(ws.head(), Some(id));
}

/// A source that counts its `get_many` calls and the ids asked.
struct Batches<'a> {
    inner: &'a Store,
    calls: RefCell<Vec<Vec<ObjectId>>>,
}

impl ObjectSource for Batches<'_> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        Ok(self.get_many(std::slice::from_ref(id))?.pop().flatten())
    }

    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Cow<'_, [u8]>>>, BoxError> {
        self.calls.borrow_mut().push(ids.to_vec());
        Ok(ids
            .iter()
            .map(|id| self.inner.get(id).map(|b| Cow::Borrowed(&b[..])))
            .collect())
    }
}

/// `load_dirs` reads a level of all its paths at a time, each node once, and leaves
/// the workspace `load_dir` of each path leaves; what is loaded already is not read.
#[test]
fn load_dirs_reads_a_level_at_a_time() {
    let mut ws = Workspace::new();
    for (i, d) in ["a", "b", "c", "d"].into_iter().enumerate() {
        for (j, e) in ["x", "y"].into_iter().enumerate() {
            ws.write(
                &format!("/{d}/{e}/f.txt"),
                pseudo_random(50, 2 * (i * 2 + j) as u64),
            )
            .unwrap();
        }
    }
    // A directory equal to /a/x: one tree, read once, loaded at both places.
    ws.write("/b/same/f.txt", pseudo_random(50, 0)).unwrap();
    let (store, id, _) = committed(ws);
    let source = Batches {
        inner: &store,
        calls: RefCell::new(Vec::new()),
    };
    let mut batched = lazy(id, &store);
    let paths = [
        "/a/x",
        "/b/y",
        "/c/x",
        "/c/y",
        "/b/same",
        "/a/x/f.txt",
        "/nope/x",
    ];
    batched.load_dirs(&paths, &source).unwrap();
    let calls = source.calls.take();
    assert_eq!(
        calls.iter().map(Vec::len).collect::<Vec<_>>(),
        [3, 4],
        "a, b and c, then four of their subdirectories (one tree for two): {calls:?}"
    );
    assert_eq!(batched.walk(), {
        let mut w = lazy(id, &store);
        w.load_dirs(&["/a/x", "/b/y", "/c/x", "/c/y", "/b/same"], &store)
            .unwrap();
        w.walk()
    });
    assert_eq!(batched.metadata("/b/same/f.txt").unwrap().size, 50);
    let mut one_by_one = lazy(id, &store);
    for p in paths {
        one_by_one.load_dir(p, &store).unwrap();
    }
    assert_eq!(batched.walk(), one_by_one.walk());
    assert_eq!(batched.metadata("/c/y/f.txt").unwrap().size, 50);
    assert!(matches!(batched.list("/d"), Err(FsError::NotLoaded { .. })));
    batched.load_dirs(&paths, &source).unwrap();
    assert!(source.calls.take().is_empty(), "nothing read again");
}

/// A damaged directory met by `load_dirs` is `load_dir`'s typed error, naming it.
#[test]
fn load_dirs_verifies_what_it_reads() {
    let mut ws = Workspace::new();
    ws.write("/d/f.txt", pseudo_random(100, 3)).unwrap();
    ws.write("/e/g.txt", b"g").unwrap();
    let (mut store, id, _) = committed(ws);
    let mut full = Workspace::new();
    let _ = full
        .checkout(id, &store, CheckoutPolicy::default())
        .unwrap();
    let commit = CommitObject::decode(&id, &store[&id][2..]).unwrap();
    let TreeNode::Leaf(entries) =
        TreeNode::decode(&commit.tree, &store[&commit.tree][2..]).unwrap()
    else {
        unreachable!("two entries fit one leaf")
    };
    let tree = entries
        .iter()
        .find_map(|e| match e.node {
            EntryNode::Dir { tree, .. } if e.name == "e" => Some(tree),
            _ => None,
        })
        .unwrap();
    *store.get_mut(&tree).unwrap().last_mut().unwrap() ^= 1;
    let mut ws = lazy(id, &store);
    assert!(matches!(
        ws.load_dirs(&["/d", "/e"], &store),
        Err(CheckoutError::Object(ObjectError::Corrupt { id, .. })) if id == tree
    ));
    assert_eq!(ws.metadata("/d/f.txt").unwrap().size, 100, "read before it");
    assert_eq!(
        ws.metadata("/e"),
        Err(FsError::NotLoaded { path: "/e".into() })
    );
}

/// A damaged or foreign directory met by `load_dir` is the checkout's typed error,
/// and the workspace keeps the directory unloaded.
#[test]
fn load_dir_verifies_what_it_reads() {
    let mut ws = Workspace::new();
    ws.write("/d/f.txt", pseudo_random(100, 3)).unwrap();
    ws.write("/g.txt", b"g").unwrap();
    let (mut store, id, _) = committed(ws);
    let mut ws = lazy(id, &store);
    let tree = {
        let mut full = Workspace::new();
        let _ = full
            .checkout(id, &store, CheckoutPolicy::default())
            .unwrap();
        let commit = CommitObject::decode(&id, &store[&id][2..]).unwrap();
        let root = TreeNode::decode(&commit.tree, &store[&commit.tree][2..]).unwrap();
        match root {
            TreeNode::Leaf(entries) => entries
                .iter()
                .find_map(|e| match e.node {
                    EntryNode::Dir { tree, .. } => Some(tree),
                    _ => None,
                })
                .unwrap(),
            TreeNode::Internal { .. } => unreachable!("two entries fit one leaf"),
        }
    };
    let good = store[&tree].clone();
    let mut bad = good.clone();
    *bad.last_mut().unwrap() ^= 1;
    store.insert(tree, bad);
    assert!(matches!(
        ws.load_dir("/d", &store),
        Err(CheckoutError::Object(ObjectError::Corrupt { id, .. })) if id == tree
    ));
    assert_eq!(
        ws.metadata("/d"),
        Err(FsError::NotLoaded { path: "/d".into() })
    );
    store.remove(&tree);
    assert!(matches!(
        ws.load_dir("/d", &store),
        Err(CheckoutError::Object(ObjectError::NotFound { id })) if id == tree
    ));
    store.insert(tree, good);
    ws.load_dir("/d", &store).unwrap();
    assert_eq!(ws.metadata("/d/f.txt").unwrap().size, 100);
}
