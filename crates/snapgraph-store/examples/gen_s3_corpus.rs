//! Writes `corpus/v2/stores/s3/`: an S3 store of layout 2 holding
//! `corpus/v1/store.pack` with its branches and a labelled snapshot, as the bucket's
//! keys under the store's prefix (one file per key), for `tests/s3.rs`. The store is
//! written through the S3 API to the test server (`eval "$(scripts/s3)"`), then its
//! keys are copied out of the server's data directory (`s3s-fs` keeps each object as
//! a file). Refuses to touch an existing directory: released layouts are never
//! rewritten.
//!
//! ```text
//! eval "$(scripts/s3)"
//! cargo run -p snapgraph-store --features s3,sqlite --example gen_s3_corpus
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use snapgraph::ObjectId;
use snapgraph_store::s3::{S3Location, S3Options, S3Store};
use snapgraph_store::{ObjectStore, RefStore, Repo};

fn copy_keys(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create");
    for e in std::fs::read_dir(from).expect("read the server's data directory") {
        let e = e.expect("entry");
        let name = e.file_name();
        // s3s-fs keeps its own metadata beside the objects, in hidden files.
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        if e.file_type().expect("type").is_dir() {
            copy_keys(&e.path(), &to.join(&name));
        } else {
            std::fs::copy(e.path(), to.join(&name)).expect("copy");
        }
    }
}

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
    let out = corpus.join("v2/stores/s3");
    if out.exists() {
        eprintln!(
            "{} exists: released store layouts are never rewritten",
            out.display()
        );
        return;
    }
    let url = std::env::var("SNAPGRAPH_S3_URL").expect("SNAPGRAPH_S3_URL: eval \"$(scripts/s3)\"");
    let data =
        std::env::var("SNAPGRAPH_S3_DATA").expect("SNAPGRAPH_S3_DATA: eval \"$(scripts/s3)\"");
    let mut location = S3Location::parse(&url).expect("url");
    location.prefix = format!("corpus-{}", std::process::id());
    let mut options = S3Options::default();
    options.pack_limit = 64 << 10; // several packs, as a long history has
    let store = S3Store::open(&location, options).expect("open");

    let dump = std::fs::read(corpus.join("v1/store.pack")).expect("corpus/v1/store.pack");
    let mut rest = &dump[..];
    let mut objects = Vec::new();
    while rest.len() >= 4 {
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        objects.push(rest[4..4 + len].to_vec());
        rest = &rest[4 + len..];
    }
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
    Repo::new(&store)
        .tag("release", "merge", labels)
        .expect("tag");

    copy_keys(
        &Path::new(&data)
            .join(&location.bucket)
            .join(&location.prefix),
        &out,
    );
    println!("wrote {}", out.display());
}
