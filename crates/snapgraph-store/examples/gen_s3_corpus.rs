//! Writes the S3 layout samples: `corpus/v2/stores/s3/` (layout 2) and
//! `corpus/v2/stores/s3-layout3/` (layout 3), each an S3 store holding
//! `corpus/v1/store.pack` with its branches and a labelled snapshot, as the bucket's
//! keys under the store's prefix (one file per key), for `tests/s3.rs`. The layout-3
//! sample also holds three garbage chunks written into its first pack and deleted,
//! so it keeps a tombstone (a pack above the repack threshold stays, its dead entries
//! hidden). Each store is written through the S3 API to the test server
//! (`eval "$(scripts/s3)"`), then its keys are copied out of the server's data
//! directory (`s3s-fs` keeps each object as a file). A sample directory that exists
//! is left alone: released layouts are never rewritten.
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

/// The garbage chunks of the layout-3 sample (`tests/s3.rs`, `corpus_garbage`, is
/// the same list): version-2 chunks of 600 bytes, byte j = (7j + 13i) % 251.
fn garbage() -> Vec<Vec<u8>> {
    (0..3u8)
        .map(|i| {
            let mut b = vec![snapgraph::ObjectKind::Chunk.byte(), 2];
            b.extend((0..600u32).map(|j| ((j * 7 + u32::from(i) * 13) % 251) as u8));
            b
        })
        .collect()
}

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
    let url = std::env::var("SNAPGRAPH_S3_URL").expect("SNAPGRAPH_S3_URL: eval \"$(scripts/s3)\"");
    let data =
        std::env::var("SNAPGRAPH_S3_DATA").expect("SNAPGRAPH_S3_DATA: eval \"$(scripts/s3)\"");
    for (dir, layout) in [("s3", 2u8), ("s3-layout3", 3)] {
        let out = corpus.join("v2/stores").join(dir);
        if out.exists() {
            eprintln!(
                "{} exists: released store layouts are never rewritten",
                out.display()
            );
            continue;
        }
        let mut location = S3Location::parse(&url).expect("url");
        location.prefix = format!("corpus-{}-{layout}", std::process::id());
        let mut options = S3Options::default();
        options.pack_limit = 64 << 10; // several packs, as a long history has
        options.layout = layout;
        let store = S3Store::open(&location, options).expect("open");
        assert_eq!(store.layout(), layout);

        let dump = std::fs::read(corpus.join("v1/store.pack")).expect("corpus/v1/store.pack");
        let mut rest = &dump[..];
        let mut objects = if layout == 2 { Vec::new() } else { garbage() };
        let garbage_ids: Vec<ObjectId> = objects.iter().map(|b| ObjectId::hash_stored(b)).collect();
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
        if !garbage_ids.is_empty() {
            store.delete_many(&garbage_ids).expect("delete the garbage");
            assert_eq!(store.usage().expect("usage").tombstones, 1);
        }
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
}
