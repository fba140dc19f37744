//! Writes `corpus/stores-v<SCHEMA>/` (a SQLite database and a directory store holding
//! `corpus/v1/store.pack` with its branches and a labelled snapshot), for
//! `tests/corpus_stores.rs`. Refuses to touch an existing directory: released store
//! layouts are never rewritten.
//!
//! ```text
//! cargo run -p snapgraph-store --example gen_store_corpus
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use snapgraph::ObjectId;
use snapgraph_store::dir::DirStore;
use snapgraph_store::sqlite::{SqliteStore, SCHEMA_VERSION};
use snapgraph_store::{Repo, Store};

fn fill(store: &dyn Store, corpus: &Path) {
    let dump = std::fs::read(corpus.join("v1/store.pack")).expect("corpus/v1/store.pack");
    let mut rest = &dump[..];
    let mut objects = Vec::new();
    while rest.len() >= 4 {
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        objects.push(rest[4..4 + len].to_vec());
        rest = &rest[4 + len..];
    }
    // The dump is in dependency order: written as is, every prefix is closed.
    let batch: Vec<(ObjectId, &[u8])> = objects
        .iter()
        .map(|b| (ObjectId::hash_stored(b), &b[..]))
        .collect();
    store.put_many(&batch).expect("put");
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

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
    let out = corpus.join(format!("stores-v{SCHEMA_VERSION}"));
    if out.exists() {
        eprintln!(
            "{} exists: released store layouts are never rewritten",
            out.display()
        );
        return;
    }
    std::fs::create_dir_all(&out).expect("create");
    {
        let sqlite = SqliteStore::open(out.join("store.db")).expect("sqlite");
        fill(&sqlite, &corpus);
    } // closed: the WAL is checkpointed into store.db and removed
    let dir = DirStore::open(out.join("store-dir")).expect("dir");
    fill(&dir, &corpus);
    println!("wrote {}", out.display());
}
