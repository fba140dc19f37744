//! Writes the current store schema's corpus (a SQLite database and a directory store
//! holding `corpus/v1/store.pack` with its branches and a labelled snapshot), for
//! `tests/corpus_stores.rs`: schema 1 went to `corpus/stores-v1/`, schema 2 (delta
//! records) goes to `corpus/v2/stores/sqlite/store.db` and `corpus/v2/stores/dir/`,
//! each object written in its own call with a delta hint naming the previous object
//! of its kind in the dump, so the stores hold delta chains. Refuses to touch an
//! existing directory: released store layouts are never rewritten.
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
    // The dump is in dependency order: written as is, every prefix is closed. Each
    // object is hinted against the previous one of its kind, already durable.
    let mut last: BTreeMap<u8, ObjectId> = BTreeMap::new();
    for b in &objects {
        let id = ObjectId::hash_stored(b);
        let kind = b.first().copied().unwrap_or(0);
        store
            .put_many_with_bases(&[(id, &b[..])], &[last.get(&kind).copied()])
            .expect("put");
        last.insert(kind, id);
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

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
    assert_eq!(
        SCHEMA_VERSION, 2,
        "a new schema: choose its corpus directory"
    );
    let out = corpus.join("v2/stores");
    if out.exists() {
        eprintln!(
            "{} exists: released store layouts are never rewritten",
            out.display()
        );
        return;
    }
    std::fs::create_dir_all(out.join("sqlite")).expect("create");
    {
        let sqlite = SqliteStore::open(out.join("sqlite/store.db")).expect("sqlite");
        fill(&sqlite, &corpus);
    } // closed: the WAL is checkpointed into store.db and removed
    let dir = DirStore::open(out.join("dir")).expect("dir");
    fill(&dir, &corpus);
    println!("wrote {}", out.display());
}
