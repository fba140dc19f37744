//! The caching store (`cache::CachingStore`) in front of a real PostgreSQL server
//! (`SNAPGRAPH_PG_URL`, started by `eval "$(scripts/postgres)"`), with SQLite and
//! directory stores as the cache: the combination conforms, reads fill the cache and
//! a second sandbox reads from it alone, a shallow checkout fetches only the files
//! it reads, remote failures are typed, and corrupt cache entries are fetched again.
//! Built with `SNAPGRAPH_SKIP_PG=1`, the tests are reported as ignored.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use snapgraph::{ObjectId, Workspace};
use snapgraph_store::cache::CachingStore;
use snapgraph_store::counting::CountingStore;
use snapgraph_store::dir::DirStore;
use snapgraph_store::postgres::{PgOptions, PgStore};
use snapgraph_store::sqlite::SqliteStore;
use snapgraph_store::{
    conformance, open, ObjectStore, RefStore, Repo, RepoCommitOptions, StoreError,
};

/// A schema of its own for one test, dropped at the end.
struct Schema {
    url: String,
    name: String,
}

impl Schema {
    fn new() -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let url = std::env::var("SNAPGRAPH_PG_URL")
            .ok()
            .filter(|u| !u.is_empty())
            .expect("SNAPGRAPH_PG_URL is not set: run `eval \"$(scripts/postgres)\"` first");
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!(
            "sgcache_{}_{}_{}",
            std::process::id(),
            nanos % 1_000_000_000_000,
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        Self { url, name }
    }

    fn store(&self) -> PgStore {
        let options = PgOptions {
            schema: Some(self.name.clone()),
            ..PgOptions::default()
        };
        PgStore::connect_with(&self.url, options).unwrap()
    }

    /// The store URL `open` takes for this schema.
    fn open_url(&self) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}snapgraph_schema={}", self.url, self.name)
    }

    fn sql(&self, statement: &str) {
        let mut client = postgres::Client::connect(&self.url, postgres::NoTls).unwrap();
        client.batch_execute(statement).unwrap();
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.url, postgres::NoTls) {
            let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
        }
    }
}

/// 4,000 bytes that do not compress or repeat: one chunk per file.
fn body(seed: usize) -> Vec<u8> {
    let mut x = (seed as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..4_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

const FILES: usize = 200;

fn path(f: usize) -> String {
    format!("/dir{:02}/file{f:04}.bin", f % 10)
}

/// A history of `FILES` files on `main`, written to the remote directly.
fn remote_history(remote: &PgStore) {
    let repo = Repo::new(remote);
    let mut ws = Workspace::new();
    for f in 0..FILES {
        ws.write(&path(f), body(f)).unwrap();
    }
    repo.commit(&mut ws, "main", RepoCommitOptions::message("start"))
        .unwrap();
}

fn sqlite_cache(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(dir.path().join("cache.db")).unwrap()
}

#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn sqlite_and_directory_caches_in_front_of_postgres_conform() {
    let dir = tempfile::tempdir().unwrap();
    let schema = Schema::new();
    conformance::run(&CachingStore::new(sqlite_cache(&dir), schema.store()));
    let schema = Schema::new();
    let local = DirStore::open(dir.path().join("cache-dir")).unwrap();
    conformance::run(&CachingStore::new(local, schema.store()));
}

/// A sandbox starts from the remote history with a shallow checkout and reads two
/// files: it fetches the trees and those two files, nothing else. A second sandbox
/// on the same cache makes no remote object call at all.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn a_shallow_sandbox_fetches_only_what_it_reads_and_the_second_read_hits_the_cache() {
    let schema = Schema::new();
    remote_history(&schema.store());
    let dir = tempfile::tempdir().unwrap();
    let read = [path(3), path(150)];

    let sandbox = |cache: SqliteStore| {
        let repo = Repo::new(CachingStore::new(cache, CountingStore::new(schema.store())));
        let mut ws = repo.checkout_shallow("main").unwrap();
        for p in &read {
            ws.load_content(p, repo.store()).unwrap();
        }
        for (p, f) in read.iter().zip([3, 150]) {
            assert_eq!(ws.read(p).unwrap(), body(f));
        }
        let store = repo.into_store();
        (store.remote().counts(), store.stats())
    };

    let (first, stats) = sandbox(sqlite_cache(&dir));
    assert!(first.get_ids > 2, "trees and two files fetched");
    assert_eq!(stats.fetched, first.get_ids);
    assert_eq!(first.put_calls, 0, "reads write nothing to the remote");

    // The same cache, reopened (another process would see the same file).
    let (second, stats) = sandbox(sqlite_cache(&dir));
    assert_eq!(second.get_calls, 0, "every object came from the cache");
    assert_eq!(stats.hits, first.get_ids);
    assert!(second.ref_calls > 0, "the branch is still the remote's");

    // A full checkout through an empty cache fetches every file: the shallow sandbox
    // saved exactly the chunks of the files it did not read (one chunk each).
    let empty = tempfile::tempdir().unwrap();
    let repo = Repo::new(CachingStore::new(
        sqlite_cache(&empty),
        CountingStore::new(schema.store()),
    ));
    let ws = repo.checkout("main").unwrap();
    assert_eq!(ws.read(&path(199)).unwrap(), body(199));
    let full = repo.store().remote().counts();
    assert_eq!(full.get_ids, first.get_ids + (FILES - read.len()) as u64);
}

/// Commits through the cache reach the remote (objects, then the ref) and fill the
/// cache, so the writer's next checkout is served locally; another sandbox with its
/// own cache sees the commit.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn writes_go_through_to_the_remote_and_fill_the_cache() {
    let schema = Schema::new();
    remote_history(&schema.store());
    let dir = tempfile::tempdir().unwrap();
    let repo = Repo::new(CachingStore::new(
        sqlite_cache(&dir),
        CountingStore::new(schema.store()),
    ));
    let mut ws = repo.checkout_shallow("main").unwrap();
    ws.write("/notes.txt", b"written in a sandbox".repeat(300))
        .unwrap();
    let c = repo
        .commit(&mut ws, "main", RepoCommitOptions::message("turn"))
        .unwrap();
    assert_eq!(schema.store().get_ref("heads/main").unwrap(), Some(c.id));
    assert!(repo.store().local().has_many(&[c.id]).unwrap().is_empty());

    repo.store().remote().take();
    let again = repo.checkout_shallow("main").unwrap();
    assert_eq!(repo.store().remote().take().get_calls, 0);
    drop(again);

    let other = tempfile::tempdir().unwrap();
    let repo = Repo::new(CachingStore::new(sqlite_cache(&other), schema.store()));
    let mut ws = repo.checkout_shallow("main").unwrap();
    ws.load_content("/notes.txt", repo.store()).unwrap();
    assert_eq!(
        ws.read("/notes.txt").unwrap(),
        b"written in a sandbox".repeat(300)
    );
}

/// The remote's objects table gone (a failing server): uncached reads and every
/// write are `StoreError::Remote` naming the operation, with the remote's error as
/// the source; cached objects keep reading; nothing of a failed write is cached.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn a_remote_failure_is_a_typed_error() {
    let schema = Schema::new();
    let dir = tempfile::tempdir().unwrap();
    let cache = CachingStore::new(sqlite_cache(&dir), schema.store());
    let (a, b, c) = (b"cached".to_vec(), b"not cached".to_vec(), b"new".to_vec());
    let [ia, ib, ic] = [&a, &b, &c].map(|x| ObjectId::hash_stored(x));
    schema.store().put_many(&[(ia, &a), (ib, &b)]).unwrap();
    assert_eq!(cache.get_many(&[ia]).unwrap(), vec![Some(a.clone())]);

    schema.sql(&format!("DROP TABLE {}.objects", schema.name));
    let remote = |e: StoreError, want: &str| match e {
        StoreError::Remote { op, source } => {
            assert_eq!(op, want);
            assert!(
                matches!(*source, StoreError::Backend { .. }),
                "the remote's own error is the source: {source:?}"
            );
        }
        other => panic!("expected StoreError::Remote from {want}, got {other:?}"),
    };
    remote(cache.get_many(&[ia, ib]).unwrap_err(), "get_many");
    remote(cache.has_many(&[ia]).unwrap_err(), "has_many");
    remote(cache.put_many(&[(ic, &c)]).unwrap_err(), "put_many");
    assert_eq!(cache.local().has_many(&[ib, ic]).unwrap(), vec![ib, ic]);
    assert_eq!(cache.get_many(&[ia]).unwrap(), vec![Some(a)]);

    // Answers about the data are not failures: a ref conflict stays one.
    let conflict = cache
        .compare_and_swap_ref("heads/x", Some(ia), ib, "moving what is not there")
        .unwrap_err();
    assert!(matches!(conflict, StoreError::RefConflict { .. }));
}

/// Bytes altered in the SQLite cache fail its re-hash: the object is deleted from
/// the cache, fetched again and the read succeeds. Bytes altered in the remote are
/// its `StoreError::Corrupt` naming the id, and nothing is cached.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn corruption_is_fetched_again_from_the_remote_or_reported() {
    let schema = Schema::new();
    let dir = tempfile::tempdir().unwrap();
    let cache = CachingStore::new(sqlite_cache(&dir), CountingStore::new(schema.store()));
    let good = b"the object as it was written".to_vec();
    let id = ObjectId::hash_stored(&good);
    let other = b"a second object in the same batch".to_vec();
    let other_id = ObjectId::hash_stored(&other);
    cache.put_many(&[(id, &good), (other_id, &other)]).unwrap();
    // The cache's file altered (put_many does not re-hash: a disk or a bug could).
    cache.local().delete_many(&[id]).unwrap();
    cache.local().put_many(&[(id, b"flipped bits")]).unwrap();
    cache.remote().take();

    let got = cache.get_many(&[other_id, id]).unwrap();
    assert_eq!(got, vec![Some(other.clone()), Some(good.clone())]);
    assert_eq!(cache.stats().repaired, 1);
    let c = cache.remote().take();
    assert_eq!(
        (c.get_calls, c.get_ids),
        (1, 1),
        "only the corrupt object fetched"
    );
    cache.flush().unwrap();
    assert_eq!(cache.local().get_many(&[id]).unwrap(), vec![Some(good)]);

    let bad = b"stored wrong in the remote".to_vec();
    let bad_id = ObjectId::hash_stored(&bad);
    cache
        .remote()
        .inner()
        .put_many(&[(bad_id, b"not those bytes")])
        .unwrap();
    match cache.get_many(&[bad_id]).unwrap_err() {
        StoreError::Corrupt { id, .. } => assert_eq!(id, bad_id),
        other => panic!("expected StoreError::Corrupt, got {other:?}"),
    }
    assert_eq!(cache.local().has_many(&[bad_id]).unwrap(), vec![bad_id]);
}

/// `open("cache:sqlite:PATH|postgres://…")`: objects in both, refs in the remote
/// only; a URL without `|` is refused.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn open_takes_a_cache_url() {
    let schema = Schema::new();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cache.db");
    let url = format!("cache:sqlite:{}|{}", db.display(), schema.open_url());
    let repo = Repo::new(open(&url).unwrap());
    let mut ws = Workspace::new();
    ws.write("/a.txt", b"through the cache").unwrap();
    let c = repo
        .commit(&mut ws, "main", RepoCommitOptions::message("one"))
        .unwrap();
    drop(repo);

    let local = SqliteStore::open(&db).unwrap();
    assert!(local.has_many(&[c.id]).unwrap().is_empty());
    assert_eq!(local.get_ref("heads/main").unwrap(), None);
    let remote = schema.store();
    assert!(remote.has_many(&[c.id]).unwrap().is_empty());
    assert_eq!(remote.get_ref("heads/main").unwrap(), Some(c.id));

    let err = open(&format!("cache:sqlite:{}", db.display()))
        .err()
        .unwrap();
    assert!(err.to_string().contains("cache:LOCAL|REMOTE"), "{err}");
    let nested = open("cache:memory:|cache:memory:|memory:").err().unwrap();
    assert!(nested.to_string().contains("cannot be cache:"), "{nested}");
}
