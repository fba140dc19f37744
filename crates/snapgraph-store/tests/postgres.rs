//! The PostgreSQL adapter against a real server: `SNAPGRAPH_PG_URL` names it
//! (`eval "$(scripts/postgres)"` starts a local one and prints the line to export).
//! Without it the tests fail; built with `SNAPGRAPH_SKIP_PG=1` they are reported as
//! ignored (see `build.rs`).
//!
//! Every test works in its own freshly created schema, dropped at the end, so tests
//! run in parallel and can be re-run against the same database.
//!
//! Figures: `cargo test --release -p snapgraph-store --test postgres -- --ignored
//! --nocapture pg_figures`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use snapgraph::{ObjectId, ObjectSource};
use snapgraph_store::postgres::{PgError, PgOptions, PgStore};
use snapgraph_store::{conformance, Compression, ObjectStore, RefStore, RefUpdate, StoreError};

mod common;
use common::{check_children, run_child, spawn_children, CHILD_INDEX};

/// The server's URL (the tests are ignored when built with `SNAPGRAPH_SKIP_PG=1`).
fn url() -> String {
    match std::env::var("SNAPGRAPH_PG_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => panic!(
            "SNAPGRAPH_PG_URL is not set: run `eval \"$(scripts/postgres)\"` to start a local \
             test server and export it (or build the tests with SNAPGRAPH_SKIP_PG=1 to skip them)"
        ),
    }
}

/// A schema of its own for one test, dropped (with everything in it) at the end.
struct Schema {
    url: String,
    name: String,
}

impl Schema {
    fn new() -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let url = url();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!(
            "sgtest_{}_{}_{}",
            std::process::id(),
            nanos % 1_000_000_000_000,
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        Self { url, name }
    }

    fn options(&self, compression: Compression) -> PgOptions {
        PgOptions {
            compression,
            schema: Some(self.name.clone()),
            ..PgOptions::default()
        }
    }

    fn store(&self) -> PgStore {
        self.store_with(Compression::default())
    }

    fn store_with(&self, compression: Compression) -> PgStore {
        PgStore::connect_with(&self.url, self.options(compression)).unwrap()
    }

    /// A plain client, to do to the tables what the adapter never would.
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

fn id_of(bytes: &[u8]) -> ObjectId {
    ObjectId::hash_stored(bytes)
}

/// The `PgError` behind a backend error, if any.
fn pg_error(e: &StoreError) -> Option<&PgError> {
    match e {
        StoreError::Backend { source, .. } => source.downcast_ref::<PgError>(),
        _ => None,
    }
}

#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn conforms_with_default_compression() {
    let schema = Schema::new();
    conformance::run(&schema.store());
}

/// `url` with TLS parameters added to its query.
fn with_params(url: &str, params: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{params}")
}

/// The test CA `scripts/postgres` made for the server's certificate.
fn tls_root() -> String {
    std::env::var("SNAPGRAPH_PG_TLS_ROOT").expect(
        "SNAPGRAPH_PG_TLS_ROOT is not set: `eval \"$(scripts/postgres)\"` exports it with \
         SNAPGRAPH_PG_URL",
    )
}

/// Over TLS (`sslmode=require`: no plain-text fallback), verified against the test
/// CA, the adapter passes the whole suite.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn conforms_over_tls() {
    let schema = Schema::new();
    let url = with_params(
        &schema.url,
        &format!("sslmode=require&sslrootcert={}", tls_root()),
    );
    let store = PgStore::connect_with(&url, schema.options(Compression::default())).unwrap();
    conformance::run(&store);
    // The same, with the roots given as an option instead of in the URL.
    let url = with_params(&schema.url, "sslmode=require");
    let options = PgOptions {
        tls_roots: Some(tls_root().into()),
        ..schema.options(Compression::default())
    };
    let store = PgStore::connect_with(&url, options).unwrap();
    assert_eq!(store.get_ref("heads/none").unwrap(), None);
}

/// TLS is really negotiated and verified: with only Mozilla's roots the test
/// server's certificate is refused.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn tls_refuses_a_certificate_it_cannot_verify() {
    let schema = Schema::new();
    let url = with_params(&schema.url, "sslmode=require");
    let err = PgStore::connect_with(&url, schema.options(Compression::default())).unwrap_err();
    let shown = err.to_string();
    assert!(shown.contains("certificate"), "{shown}");
    // A root file holding no certificate.
    let empty = tempfile::NamedTempFile::new().unwrap();
    let url = with_params(
        &schema.url,
        &format!("sslmode=require&sslrootcert={}", empty.path().display()),
    );
    let err = PgStore::connect_with(&url, schema.options(Compression::default())).unwrap_err();
    assert!(
        matches!(pg_error(&err), Some(PgError::TlsRoots { .. })),
        "{err:?}"
    );
    // Plain text on the same port, asked for or by default.
    for mode in ["disable", "prefer"] {
        let url = with_params(&schema.url, &format!("sslmode={mode}"));
        let store = PgStore::connect_with(&url, schema.options(Compression::default())).unwrap();
        assert_eq!(store.get_ref("heads/none").unwrap(), None);
    }
}

#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn conforms_uncompressed() {
    let schema = Schema::new();
    conformance::run(&schema.store_with(Compression::None));
}

#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn corrupt_rows_are_reported_with_their_id() {
    let schema = Schema::new();
    let store = schema.store();
    let text = b"a text object that compresses well ".repeat(50);
    let raw = b"short".to_vec();
    let (t, r) = (id_of(&text), id_of(&raw));
    store.put_many(&[(t, &text[..]), (r, &raw[..])]).unwrap();
    let table = format!("{}.objects", schema.name);

    // A flipped byte in the raw object.
    schema.sql(&format!(
        "UPDATE {table} SET data = set_byte(data, 2, get_byte(data, 2) # 1) WHERE id = '\\x{}'",
        r.to_hex()
    ));
    match snapgraph_store::ObjectStore::get_many(&store, &[t, r]) {
        Err(StoreError::Corrupt { id, .. }) => assert_eq!(id, r),
        other => panic!("a flipped byte must read as corrupt, got {other:?}"),
    }
    assert!(store.get(&r).is_err(), "the core's reads see it too");

    // A truncated zstd frame, and an empty record.
    schema.sql(&format!(
        "UPDATE {table} SET data = substr(data, 1, 10) WHERE id = '\\x{}'",
        t.to_hex()
    ));
    let err = snapgraph_store::ObjectStore::get_many(&store, &[t]).unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { id, .. } if id == t),
        "{err}"
    );
    assert!(err.to_string().contains(&t.to_hex()), "{err}");
    schema.sql(&format!(
        "UPDATE {table} SET data = '\\x' WHERE id = '\\x{}'",
        t.to_hex()
    ));
    assert!(
        matches!(snapgraph_store::ObjectStore::get_many(&store, &[t]), Err(StoreError::Corrupt { id, .. }) if id == t)
    );

    // Presence is not a read: has_many still answers, and a fresh put does not
    // overwrite (put is idempotent, `verify`/repair is the way out).
    assert!(store.has_many(&[t, r]).unwrap().is_empty());
}

#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn bad_urls_and_unreachable_servers_are_typed_errors() {
    let schema = Schema::new();
    let secret = "s3cret-Pa55word";
    let no_secret = |e: &StoreError| {
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains(secret), "the password leaked: {shown}");
    };

    // Nothing listens on port 1.
    let err = PgStore::connect(&format!("postgres://someone:{secret}@127.0.0.1:1/db")).unwrap_err();
    assert!(matches!(err, StoreError::Backend { .. }), "{err:?}");
    assert!(err.to_string().contains("127.0.0.1"), "{err}");
    no_secret(&err);

    // Unparsable URLs.
    for bad in [
        format!("postgres://someone:{secret}@127.0.0.1:notaport/db"),
        format!("postgres://someone:{secret}@127.0.0.1/db?nonsense_option=1"),
        format!("host=127.0.0.1 password={secret} sslmode=verify-full"),
        "not a url at all '".to_string(),
    ] {
        let err = PgStore::connect(&bad).unwrap_err();
        assert!(matches!(err, StoreError::Backend { .. }), "{err:?}");
        no_secret(&err);
    }

    // Without a password in it, the parser's own message is kept.
    let err = PgStore::connect("host=127.0.0.1 nonsense=1").unwrap_err();
    assert!(
        matches!(
            pg_error(&err),
            Some(PgError::InvalidUrl { detail: Some(_) })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("nonsense"), "{err}");

    // TLS roots that cannot be read: refused up front, naming the file.
    let err = PgStore::connect(&format!(
        "postgres://someone:{secret}@127.0.0.1/db?sslmode=require&sslrootcert=/nonexistent/ca.pem"
    ))
    .unwrap_err();
    assert!(
        matches!(pg_error(&err), Some(PgError::TlsRoots { path, .. }) if path.ends_with("ca.pem")),
        "{err:?}"
    );
    assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
    no_secret(&err);

    // A database that does not exist on a live server.
    let (base, query) = match schema.url.split_once('?') {
        Some((b, q)) => (b.to_string(), format!("?{q}")),
        None => (schema.url.clone(), String::new()),
    };
    let err = PgStore::connect(&format!("{base}_no_such_db{query}")).unwrap_err();
    assert!(err.to_string().contains("no_such_db"), "{err}");
    assert!(
        err.to_string().contains("does not exist"),
        "the server's reason: {err}"
    );
    assert_eq!(
        pg_error(&err).and_then(PgError::code).map(|c| c.code()),
        Some("3D000")
    );

    // A schema name that could inject SQL.
    let err = PgStore::connect_with(
        &schema.url,
        PgOptions {
            compression: Compression::None,
            schema: Some("x\"; DROP TABLE y; --".into()),
            ..PgOptions::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(pg_error(&err), Some(PgError::InvalidSchema { .. })),
        "{err:?}"
    );
}

#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn newer_schema_versions_are_refused() {
    let schema = Schema::new();
    drop(schema.store());
    schema.sql(&format!(
        "UPDATE {}.meta SET value = 99 WHERE key = 'schema_version'",
        schema.name
    ));
    let err = PgStore::connect_with(&schema.url, schema.options(Compression::None)).unwrap_err();
    assert!(
        matches!(
            pg_error(&err),
            Some(PgError::SchemaTooNew {
                found: 99,
                supported: snapgraph_store::postgres::SCHEMA_VERSION
            })
        ),
        "{err:?}"
    );
}

/// A login role for one test, dropped at the end.
struct Role<'a> {
    schema: &'a Schema,
    name: String,
}

impl Drop for Role<'_> {
    fn drop(&mut self) {
        if let Ok(mut client) = postgres::Client::connect(&self.schema.url, postgres::NoTls) {
            let _ = client.batch_execute(&format!(
                "DROP OWNED BY {0}; DROP ROLE IF EXISTS {0}",
                self.name
            ));
        }
    }
}

/// Once an owner made the tables, a role with only data rights (no CREATE) uses them.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn a_role_without_create_rights_uses_existing_tables() {
    let schema = Schema::new();
    drop(schema.store());
    let role = Role {
        name: format!("{}_app", schema.name),
        schema: &schema,
    };
    let password = format!("pw_{}", schema.name);
    schema.sql(&format!(
        "CREATE ROLE {r} LOGIN PASSWORD '{password}';
         GRANT USAGE ON SCHEMA {s} TO {r};
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {r};
         GRANT USAGE ON ALL SEQUENCES IN SCHEMA {s} TO {r};",
        r = role.name,
        s = schema.name
    ));
    let config: postgres::Config = schema.url.parse().unwrap();
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        other => panic!("a TCP host is needed for this test, got {other:?}"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let url = format!(
        "host={host} port={port} dbname={} user={} password={password}",
        config.get_dbname().unwrap_or("postgres"),
        role.name
    );
    let store = PgStore::connect_with(&url, schema.options(Compression::default())).unwrap();
    let blob = b"written by the app role".to_vec();
    let id = id_of(&blob);
    store.put_many(&[(id, &blob[..])]).unwrap();
    store
        .compare_and_swap_ref("heads/main", None, id, "app")
        .unwrap();
    assert_eq!(
        snapgraph_store::ObjectStore::get_many(&store, &[id]).unwrap()[0].as_deref(),
        Some(&blob[..])
    );
    assert_eq!(store.reflog("heads/main").unwrap().len(), 1);
    // Where the tables are missing, it cannot create them: a clear error.
    let err = PgStore::connect_with(
        &url,
        PgOptions {
            compression: Compression::None,
            schema: Some(format!("{}_other", schema.name)),
            ..PgOptions::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("permission denied"), "{err}");
    assert!(!err.to_string().contains(&password), "{err}");
}

#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn data_persists_across_reconnects() {
    let schema = Schema::new();
    let blobs: Vec<Vec<u8>> = (0..500u32)
        .map(|i| {
            format!("object {i}")
                .repeat(i as usize % 40 + 1)
                .into_bytes()
        })
        .collect();
    let batch: Vec<(ObjectId, &[u8])> = blobs.iter().map(|b| (id_of(b), &b[..])).collect();
    let ids: Vec<ObjectId> = batch.iter().map(|(i, _)| *i).collect();
    let (a, b) = (ids[0], ids[1]);
    {
        let store = schema.store();
        store.put_many(&batch).unwrap();
        store
            .compare_and_swap_ref("heads/main", None, a, "create")
            .unwrap();
        store
            .compare_and_swap_ref("heads/main", Some(a), b, "advance")
            .unwrap();
        store
            .compare_and_swap_ref("tags/v1", None, a, "tag")
            .unwrap();
    }
    // Reopened with another compression setting: old objects still read.
    let store = schema.store_with(Compression::None);
    assert!(store.has_many(&ids).unwrap().is_empty());
    let got = snapgraph_store::ObjectStore::get_many(&store, &ids).unwrap();
    for (bytes, got) in blobs.iter().zip(got) {
        assert_eq!(got.as_deref(), Some(&bytes[..]));
    }
    assert_eq!(store.get_ref("heads/main").unwrap(), Some(b));
    assert_eq!(
        store.list_refs("").unwrap(),
        vec![("heads/main".to_string(), b), ("tags/v1".to_string(), a)]
    );
    let log: Vec<_> = store
        .reflog("heads/main")
        .unwrap()
        .into_iter()
        .map(|e| (e.old, e.new, e.message))
        .collect();
    assert_eq!(
        log,
        vec![
            (None, Some(a), "create".to_string()),
            (Some(a), Some(b), "advance".to_string())
        ]
    );
}

#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn a_killed_connection_is_reopened() {
    let schema = Schema::new();
    let app = schema.name.clone();
    let sep = if schema.url.contains('?') { '&' } else { '?' };
    let url = format!("{}{sep}application_name={app}", schema.url);
    let store = PgStore::connect_with(&url, schema.options(Compression::default())).unwrap();
    let a = id_of(b"a");
    store
        .compare_and_swap_ref("heads/main", None, a, "create")
        .unwrap();
    schema.sql(&format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '{app}'"
    ));
    // The first call may see the dead connection; the next one reconnects.
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(store.get_ref("heads/main").map_err(|e| e.to_string()));
    }
    assert_eq!(answers.last(), Some(&Ok(Some(a))), "{answers:?}");
    for answer in &answers {
        if let Err(e) = answer {
            assert!(e.contains(&app) || e.contains("heads/main"), "{e}");
        }
    }
}

#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn for_each_id_pages_and_lets_the_callback_use_the_store() {
    let schema = Schema::new();
    let store = schema.store();
    let blobs: Vec<Vec<u8>> = (0..25_000u32).map(|i| i.to_be_bytes().to_vec()).collect();
    let batch: Vec<(ObjectId, &[u8])> = blobs.iter().map(|b| (id_of(b), &b[..])).collect();
    store.put_many(&batch).unwrap();
    let mut seen = Vec::new();
    store
        .for_each_id(&mut |id| {
            if seen.len() % 5_000 == 0 {
                // Re-entering the store from the callback must not deadlock.
                assert!(snapgraph_store::ObjectStore::get_many(&store, &[id])?[0].is_some());
            }
            seen.push(id);
            Ok(())
        })
        .unwrap();
    seen.sort();
    let mut want: Vec<ObjectId> = batch.iter().map(|(i, _)| *i).collect();
    want.sort();
    assert_eq!(seen, want);
}

/// Each thread has its own connection: PostgreSQL, not the store's mutex, keeps the
/// compare-and-swap honest.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn concurrent_writers_on_separate_connections_lose_no_update() {
    let schema = Schema::new();
    let (threads, rounds) = (6, 30);
    let stores: Vec<PgStore> = (0..threads).map(|_| schema.store()).collect();
    let name = "heads/contended";
    std::thread::scope(|s| {
        for (t, store) in stores.iter().enumerate() {
            s.spawn(move || {
                for r in 0..rounds {
                    let new = id_of(format!("writer {t} round {r}").as_bytes());
                    loop {
                        let old = store.get_ref(name).unwrap();
                        match store.compare_and_swap_ref(name, old, new, &format!("{t}/{r}")) {
                            Ok(()) => break,
                            Err(StoreError::RefConflict { .. }) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            });
        }
    });
    let log = stores[0].reflog(name).unwrap();
    assert_eq!(
        log.len(),
        threads * rounds,
        "every successful swap logged once"
    );
    assert_eq!(log[0].old, None);
    for pair in log.windows(2) {
        assert_eq!(
            pair[0].new, pair[1].old,
            "each move starts where the last ended"
        );
    }
    assert_eq!(stores[0].get_ref(name).unwrap(), log.last().unwrap().new);
}

/// Batches of two refs moved together, with a guard on a third that one thread
/// creates and deletes meanwhile: the pair always holds equal values, and no move is
/// lost.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn concurrent_batches_on_separate_connections_stay_atomic() {
    let schema = Schema::new();
    let (threads, rounds) = (4, 20);
    let stores: Vec<PgStore> = (0..=threads).map(|_| schema.store()).collect();
    let (x, y, g) = ("heads/x", "heads/y", "locks/gate");
    let gate = id_of(b"gate");
    let done = std::sync::atomic::AtomicBool::new(false);
    let guarded_applied = AtomicU64::new(0);
    std::thread::scope(|s| {
        // The gate flips between absent and present.
        let (toggler, writers) = stores.split_last().unwrap();
        let done = &done;
        s.spawn(move || {
            while !done.load(Ordering::Relaxed) {
                toggler
                    .compare_and_swap_ref(g, None, gate, "close")
                    .unwrap();
                toggler.delete_ref(g, gate, "open").unwrap();
            }
        });
        for (t, store) in writers.iter().enumerate() {
            let guarded_applied = &guarded_applied;
            s.spawn(move || {
                for r in 0..rounds {
                    let new = id_of(format!("pair {t} {r}").as_bytes());
                    loop {
                        let old = store.get_ref(x).unwrap();
                        // Odd rounds only go while the gate is open.
                        let mut batch = vec![
                            RefUpdate::new(x, old, Some(new)),
                            RefUpdate::new(y, old, Some(new)),
                        ];
                        if r % 2 == 1 {
                            batch.push(RefUpdate::guard(g, None));
                        }
                        match store.update_refs(&batch, &format!("{t}/{r}")) {
                            Ok(()) => {
                                if r % 2 == 1 {
                                    guarded_applied.fetch_add(1, Ordering::Relaxed);
                                }
                                break;
                            }
                            Err(StoreError::RefConflict { .. }) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            });
        }
        // Stop the toggler once the writers are through.
        s.spawn(|| {
            while guarded_applied.load(Ordering::Relaxed) < (threads * rounds / 2) as u64 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            done.store(true, Ordering::Relaxed);
        });
    });
    let store = &stores[0];
    assert_eq!(store.get_ref(x).unwrap(), store.get_ref(y).unwrap());
    for name in [x, y] {
        let log = store.reflog(name).unwrap();
        assert_eq!(log.len(), threads * rounds, "{name}");
        for pair in log.windows(2) {
            assert_eq!(pair[0].new, pair[1].old);
        }
    }
    // The gate's log alternates strictly.
    let gate_log = store.reflog(g).unwrap();
    for (i, e) in gate_log.iter().enumerate() {
        let want = if i % 2 == 0 {
            (None, Some(gate))
        } else {
            (Some(gate), None)
        };
        assert_eq!((e.old, e.new), want);
    }
}

/// Many writers racing to create the same refs: exactly one wins each.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn creation_races_have_one_winner() {
    let schema = Schema::new();
    let threads = 5;
    let stores: Vec<PgStore> = (0..threads).map(|_| schema.store()).collect();
    let wins = AtomicU64::new(0);
    std::thread::scope(|s| {
        for (t, store) in stores.iter().enumerate() {
            let wins = &wins;
            s.spawn(move || {
                for r in 0..20 {
                    let mine = id_of(format!("{t}/{r}").as_bytes());
                    let name = format!("race/{r}");
                    // Half of the racers go through a two-ref batch.
                    let result = if t % 2 == 0 {
                        store.compare_and_swap_ref(&name, None, mine, "single")
                    } else {
                        store.update_refs(
                            &[
                                RefUpdate::new(&name, None, Some(mine)),
                                RefUpdate::new(format!("mine/{t}/{r}"), None, Some(mine)),
                            ],
                            "batch",
                        )
                    };
                    match result {
                        Ok(()) => {
                            wins.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(StoreError::RefConflict { actual, .. }) => assert!(actual.is_some()),
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
    });
    assert_eq!(wins.load(Ordering::Relaxed), 20);
    for r in 0..20 {
        assert_eq!(stores[0].reflog(&format!("race/{r}")).unwrap().len(), 1);
    }
}

/// Writers putting overlapping sets of objects in different orders all succeed, and
/// every object reads back verified.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn concurrent_overlapping_puts_converge() {
    let schema = Schema::new();
    let threads = 4;
    let blobs: Vec<Vec<u8>> = (0..6_000u32)
        .map(|i| {
            format!("shared object {i} ")
                .repeat(i as usize % 20 + 1)
                .into_bytes()
        })
        .collect();
    let all: Vec<(ObjectId, &[u8])> = blobs.iter().map(|b| (id_of(b), &b[..])).collect();
    let stores: Vec<PgStore> = (0..threads).map(|_| schema.store()).collect();
    std::thread::scope(|s| {
        for (t, store) in stores.iter().enumerate() {
            let all = &all;
            s.spawn(move || {
                // Thread t takes a window of 3,000 shifted by t * 1,000, in its own
                // order (reversed on odd threads), in batches of 500.
                let mut mine: Vec<(ObjectId, &[u8])> = all
                    .iter()
                    .cycle()
                    .skip(t * 1_000)
                    .take(3_000)
                    .copied()
                    .collect();
                if t % 2 == 1 {
                    mine.reverse();
                }
                for _ in 0..2 {
                    for batch in mine.chunks(500) {
                        store.put_many(batch).unwrap();
                    }
                }
            });
        }
    });
    // The windows cover every object.
    let ids: Vec<ObjectId> = all.iter().map(|(i, _)| *i).collect();
    assert!(stores[0].has_many(&ids).unwrap().is_empty());
    let got = snapgraph_store::ObjectStore::get_many(&stores[0], &ids).unwrap();
    for ((_, bytes), got) in all.iter().zip(got) {
        assert_eq!(got.as_deref(), Some(*bytes));
    }
}

/// Throughput figures; run with `cargo test --release -p snapgraph-store --test
/// postgres -- --ignored --nocapture pg_figures`.
#[test]
#[ignore = "measurement: run in release with --ignored --nocapture"]
fn pg_figures() {
    let _ = url();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let random: Vec<Vec<u8>> = (0..20_000)
        .map(|_| {
            (0..16 * 1024 / 8)
                .flat_map(|_| next().to_le_bytes())
                .collect()
        })
        .collect();
    let words = [
        "the", "store", "object", "commit", "tree", "ref", "history", "snapshot", "content",
        "address", "hash", "delta", "chunk", "fn", "let", "mut", "impl", "struct", "{", "}", "(",
        ")", ";", "\n", "    ",
    ];
    let text: Vec<Vec<u8>> = (0..20_000)
        .map(|_| {
            let mut t = Vec::with_capacity(4096);
            while t.len() < 4096 {
                t.extend_from_slice(words[(next() % words.len() as u64) as usize].as_bytes());
                t.push(b' ');
            }
            t.truncate(4096);
            t
        })
        .collect();
    for compression in [Compression::default(), Compression::None] {
        let schema = Schema::new();
        let store = schema.store_with(compression);
        println!("\nPgStore, {compression:?}, {}", store.database());
        let mut all_ids = Vec::new();
        for (label, set) in [("16 KiB random", &random), ("4 KiB text", &text)] {
            let batch: Vec<(ObjectId, &[u8])> = set.iter().map(|b| (id_of(b), &b[..])).collect();
            let bytes: usize = set.iter().map(Vec::len).sum();
            let ids: Vec<ObjectId> = batch.iter().map(|(i, _)| *i).collect();
            let start = Instant::now();
            for chunk in batch.chunks(1_000) {
                store.put_many(chunk).unwrap();
            }
            report(&format!("put_many {label}"), start, set.len(), bytes);
            let start = Instant::now();
            for chunk in ids.chunks(1_000) {
                let got = snapgraph_store::ObjectStore::get_many(&store, chunk).unwrap();
                assert!(got.iter().all(Option::is_some));
            }
            report(&format!("get_many {label}"), start, set.len(), bytes);
            all_ids.extend(ids);
        }
        let start = Instant::now();
        assert!(store.has_many(&all_ids).unwrap().is_empty());
        let secs = start.elapsed().as_secs_f64();
        println!(
            "  has_many of {} ids: {:.3} s, {:.0} ids/s",
            all_ids.len(),
            secs,
            all_ids.len() as f64 / secs
        );
    }
}

fn report(what: &str, start: Instant, objects: usize, bytes: usize) {
    let secs = start.elapsed().as_secs_f64();
    println!(
        "  {what}: {objects} objects in {secs:.2} s: {:.0} objects/s, {:.1} MB/s",
        objects as f64 / secs,
        bytes as f64 / secs / 1e6
    );
}

const CHILD_SCHEMA: &str = "SNAPGRAPH_CHILD_PG_SCHEMA";

/// Not a test of its own: the body of a child process (see
/// `several_processes_converge`); returns at once unless the environment says so.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn child_writer_entry() {
    let Ok(schema) = std::env::var(CHILD_SCHEMA) else {
        return;
    };
    let url = url();
    let k: usize = std::env::var(CHILD_INDEX).unwrap().parse().unwrap();
    let options = PgOptions {
        schema: Some(schema),
        ..PgOptions::default()
    };
    run_child(&PgStore::connect_with(&url, options).unwrap(), k);
}

/// Writer processes, each with its own connection, on one database: every CAS lands
/// once, the reflog is a chain, every object reads back verified.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn several_processes_converge() {
    let schema = Schema::new();
    drop(schema.store()); // the tables exist before the children race
    spawn_children(CHILD_SCHEMA, std::path::Path::new(&schema.name));
    check_children(&schema.store());
}

#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn hollow_commits_retention_and_gc() {
    let schema = Schema::new();
    common::hollow::retention_then_gc(snapgraph_store::Repo::new(schema.store()));
}

#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn hollow_commits_with_a_concurrent_writer() {
    let schema = Schema::new();
    common::hollow::retention_with_a_concurrent_writer(&schema.store());
}

#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn shallow_sync_into_postgres() {
    let schema = Schema::new();
    common::hollow::shallow_sync(&snapgraph_store::MemoryStore::new(), &schema.store());
}

/// Optimistic writers on PostgreSQL (`snapgraph_store::gc`, "Optimistic writers"):
/// a small commit writes its objects and moves its branch in one transaction,
/// holding no lease; a collection that runs between its look at the store and that
/// write (from the commit's progress report, on another connection) sends it down
/// the lease path, and it still publishes with its closure whole.
#[test]
#[cfg_attr(
    snapgraph_skip_pg,
    ignore = "SNAPGRAPH_SKIP_PG=1: no PostgreSQL server"
)]
fn a_small_commit_takes_no_lease_unless_a_sweep_comes_between() {
    use snapgraph::Workspace;
    use snapgraph_store::{gc, Repo, RepoCommitOptions};
    use std::sync::{Arc, Mutex};

    let schema = Schema::new();
    let repo = Repo::new(schema.store());
    assert!(repo.store().writes_objects_with_refs());
    let other = Arc::new(schema.store());
    let leases = |s: &PgStore| s.list_refs("snapgraph/lease/").unwrap().len();
    let mut ws = Workspace::new();
    for i in 0..20 {
        ws.write(&format!("/d{}/f{i}", i % 4), format!("file {i}").repeat(50))
            .unwrap();
    }
    repo.commit(&mut ws, "main", RepoCommitOptions::default())
        .unwrap();
    for collect in [false, true] {
        ws.write("/d1/f1", format!("changed, collect {collect}"))
            .unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (hook_seen, hook_other) = (Arc::clone(&seen), Arc::clone(&other));
        let c = repo
            .commit(
                &mut ws,
                "main",
                RepoCommitOptions::default().on_progress(move |_| {
                    let mut seen = hook_seen.lock().unwrap();
                    if collect && seen.is_empty() {
                        gc(&*hook_other, &[]).unwrap();
                    }
                    seen.push(leases(&hook_other));
                }),
            )
            .unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.first(), Some(&0), "{seen:?}");
        assert_eq!(
            seen.contains(&1),
            collect,
            "a lease held only after a sweep: {seen:?}"
        );
        assert_eq!(repo.store().get_ref("heads/main").unwrap(), Some(c.id));
        let mut plan = snapgraph::graph::reachable::CheckoutPlan::new(c.id);
        assert!(plan.missing(repo.store()).unwrap().is_empty());
    }
    assert_eq!(leases(&other), 0);
    assert!(snapgraph_store::verify(repo.store(), true)
        .unwrap()
        .is_clean());
}
