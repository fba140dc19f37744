//! Writes the current store schema's corpus (a SQLite database, and a directory store
//! while its layout changed too, holding `corpus/v1/store.pack` with its branches and
//! a labelled snapshot), for `tests/corpus_stores.rs`: schema 1 went to
//! `corpus/stores-v1/`, schema 2 (delta records) to `corpus/v2/stores/sqlite/store.db`
//! and `corpus/v2/stores/dir/` (each object written in its own call with a delta hint
//! naming the previous object of its kind in the dump), SQLite schema 3 (packs and a
//! store dictionary) goes to `corpus/v2/stores/sqlite-3/store.db`: the first 24
//! objects in one batch (a dictionary is sampled from it), the rest in batches of 4
//! hinted against the previous object of their kind in earlier batches, so it holds
//! packs, tag 3 records and delta chains. SQLite schema 4 (segment files) goes to
//! `corpus/v2/stores/sqlite-4/`: the same as schema 3, then a commit of one file of
//! [`LARGE`] incompressible bytes (BLAKE3's XOF of [`LARGE_SEED`]) whose chunks are
//! written in one batch into a segment, named by the ref `sample/large`. Refuses to
//! touch an existing directory: released store layouts are never rewritten.
//!
//! ```text
//! cargo run -p snapgraph-store --example gen_store_corpus
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use snapgraph::ObjectId;
use snapgraph_store::dir::DirStore;
use snapgraph_store::sqlite::{SqliteStore, SCHEMA_VERSION};
use snapgraph_store::{Repo, RepoCommitOptions, Store};

/// The schema 4 sample's large file: its length and the seed of its bytes.
const LARGE: usize = 1_310_720;
const LARGE_SEED: &[u8] = b"snapgraph corpus sqlite-4 large file";

fn fill(store: &dyn Store, corpus: &Path, first: usize, then: usize) {
    let dump = std::fs::read(corpus.join("v1/store.pack")).expect("corpus/v1/store.pack");
    let mut rest = &dump[..];
    let mut objects = Vec::new();
    while rest.len() >= 4 {
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        objects.push(rest[4..4 + len].to_vec());
        rest = &rest[4 + len..];
    }
    // The dump is in dependency order: written as is, every prefix is closed. Each
    // object is hinted against the previous one of its kind, already durable.
    let mut last: BTreeMap<u8, ObjectId> = BTreeMap::new();
    let mut rest = &objects[..];
    let mut size = first;
    while !rest.is_empty() {
        let (batch, more) = rest.split_at(size.min(rest.len()));
        rest = more;
        size = then;
        let items: Vec<(ObjectId, &[u8])> = batch
            .iter()
            .map(|b| (ObjectId::hash_stored(b), &b[..]))
            .collect();
        let hints: Vec<Option<ObjectId>> = batch
            .iter()
            .map(|b| last.get(&b.first().copied().unwrap_or(0)).copied())
            .collect();
        store.put_many_with_bases(&items, &hints).expect("put");
        for (b, (id, _)) in batch.iter().zip(&items) {
            last.insert(b.first().copied().unwrap_or(0), *id);
        }
    }
    let refs = std::fs::read_to_string(corpus.join("v1/refs.txt")).expect("refs.txt");
    for (name, id) in refs.lines().filter_map(|l| l.split_once(' ')) {
        let id: ObjectId = id.parse().expect("id");
        store
            .compare_and_swap_ref(&format!("heads/{name}"), None, id, "corpus")
            .expect("ref");
    }
    let labels = BTreeMap::from([("stage".to_string(), "corpus".to_string())]);
    Repo::new(store)
        .tag("release", "merge", labels)
        .expect("tag");
}

/// Commits `big.bin` ([`LARGE`] bytes) on a branch, then names the commit by
/// `sample/large` instead (the corpus checks compare the branches with the dump's).
fn large_sample(store: &dyn Store) {
    let mut bytes = vec![0u8; LARGE];
    blake3::Hasher::new()
        .update(LARGE_SEED)
        .finalize_xof()
        .fill(&mut bytes);
    let repo = Repo::new(store);
    let mut ws = snapgraph::Workspace::new();
    ws.write("/big.bin", &bytes).expect("write");
    let id = repo
        .commit(&mut ws, "large", RepoCommitOptions::message("large"))
        .expect("commit")
        .id;
    store
        .compare_and_swap_ref("sample/large", None, id, "corpus")
        .expect("ref");
    repo.delete_branch("large", id).expect("branch");
}

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
    assert_eq!(
        SCHEMA_VERSION, 4,
        "a new schema: choose its corpus directory"
    );
    let v2 = corpus.join("v2/stores");
    if !v2.exists() {
        // Schema 2's directory (kept for a checkout that lacks it; never rewritten).
        std::fs::create_dir_all(v2.join("sqlite")).expect("create");
        {
            let sqlite = SqliteStore::open(v2.join("sqlite/store.db")).expect("sqlite");
            fill(&sqlite, &corpus, 1, 1);
        }
        let dir = DirStore::open(v2.join("dir")).expect("dir");
        fill(&dir, &corpus, 1, 1);
        println!("wrote {}", v2.display());
    }
    for (name, large) in [("sqlite-3", false), ("sqlite-4", true)] {
        let out = v2.join(name);
        if out.exists() {
            eprintln!(
                "{} exists: released store layouts are never rewritten",
                out.display()
            );
            continue;
        }
        std::fs::create_dir_all(&out).expect("create");
        {
            let sqlite = SqliteStore::open(out.join("store.db")).expect("sqlite");
            fill(&sqlite, &corpus, 24, 4);
            if large {
                large_sample(&sqlite);
            }
        } // closed: the WAL is checkpointed into store.db and removed
        println!("wrote {}", out.display());
    }
}
