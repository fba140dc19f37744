//! The PostgreSQL adapter: objects, refs and the reflog in three tables, through the
//! synchronous [`postgres`] client.
//!
//! ```no_run
//! use snapgraph_store::postgres::{PgOptions, PgStore};
//! use snapgraph_store::RefStore;
//!
//! let store = PgStore::connect_with(
//!     "postgres://snapgraph@db.internal:5432/history",
//!     PgOptions { schema: Some("snapgraph".into()), ..PgOptions::default() },
//! )?;
//! assert_eq!(store.get_ref("heads/main")?, None);
//! # Ok::<(), snapgraph_store::StoreError>(())
//! ```
//!
//! # Tables
//!
//! Created if absent, in the configured schema (else the connection's `search_path`,
//! usually `public`; a dedicated schema keeps the generic table names apart from an
//! application's own):
//!
//! ```sql
//! meta(key text PRIMARY KEY, value bigint NOT NULL)          -- 'schema_version' = 2 (1: upgraded at open)
//! objects(id bytea PRIMARY KEY, data bytea NOT NULL)         -- data: codec::encode
//! refs(name text COLLATE "C" PRIMARY KEY, id bytea NOT NULL)
//! reflog(seq bigserial PRIMARY KEY, name text COLLATE "C" NOT NULL, old bytea,
//!        new bytea, message text NOT NULL, at timestamptz NOT NULL DEFAULT now())
//!        + index on (name, seq)
//! ```
//!
//! Ids are 32-byte `bytea` (checked by the tables). Objects go through
//! [`codec::encode`] and every read is verified by [`codec::decode`], so bytes altered
//! in the database read as [`StoreError::Corrupt`]. A database whose schema version is newer than
//! [`SCHEMA_VERSION`] is refused with [`PgError::SchemaTooNew`] (inside
//! [`StoreError::Backend`]) before anything is written.
//!
//! # How it talks to the server
//!
//! - Objects move in batches whose size does not depend on the 65,535 bind-parameter
//!   limit: every batch is one statement with two array parameters, e.g.
//!   `INSERT INTO objects SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT
//!   DO NOTHING` (up to 2,000 objects or 32 MiB per statement, each statement its own
//!   transaction, so a crash keeps a prefix of the batches in order), `SELECT ... WHERE
//!   id = ANY($1)` for `get_many`/`has_many` (2,000 and 10,000 ids per statement).
//!   Rows of one statement are sorted by id so that concurrent overlapping writers
//!   lock them in the same order.
//! - A single ref update is **one statement** that does the compare-and-swap and
//!   appends the reflog entry, e.g. `WITH u AS (UPDATE refs SET id = $3 WHERE name =
//!   $1 AND id = $2 RETURNING name) INSERT INTO reflog ... SELECT ... FROM u`
//!   (`INSERT ... ON CONFLICT DO NOTHING` to create, `DELETE ... WHERE id = $2` to
//!   delete); one row inserted means the swap happened. PostgreSQL re-checks the
//!   `WHERE` on the newest row version after waiting for a concurrent writer, so no
//!   update is lost under READ COMMITTED.
//! - A batch of updates is one READ COMMITTED transaction applying the same
//!   conditional statements in name order (so two batches lock common refs in the same
//!   order and cannot deadlock). A guard on a present ref takes `SELECT ... FOR SHARE`;
//!   a guard on an absent ref, which has no row to lock, inserts a placeholder row and
//!   deletes it before commit: its uncommitted key makes a concurrent creator wait
//!   until the batch is over, and no reader ever sees it. Reflog entries are inserted
//!   in the same transaction.
//! - When a swap finds another value, the current values are read again to build the
//!   [`StoreError::RefConflict`] of the first conflicting update in the order given;
//!   should the refs have moved back meanwhile, the update is tried again. Serialization
//!   failures and deadlocks (possible if the server's default isolation is stricter
//!   than READ COMMITTED) are retried a few times, then returned as
//!   [`StoreError::Backend`] whose source is a [`PgError::Postgres`] (its
//!   [`code`](postgres::Error::code) is `40001` or `40P01`).
//! - One connection per [`PgStore`], behind a mutex (the trait needs `Send + Sync`);
//!   open several stores for parallel work. A connection found closed (server
//!   restart) is reopened on the next call. Error contexts name the operation, the
//!   object ids or refs and the database as `postgres://user@host:port/db`, never the
//!   password.
//!
//! # Managed, replicated and pooled servers
//!
//! - **TLS**: with `sslmode=require` in the URL, through rustls (pure Rust), the
//!   server's certificate always verified, host name or IP included (as libpq's
//!   `verify-full`); a server without TLS is refused. Trusted roots are Mozilla's
//!   (built in) unless `sslrootcert=PATH` in the URL's query (or
//!   [`PgOptions::tls_roots`]) names a PEM file of the roots to trust instead, as for
//!   a private CA: `postgres://u@db.internal/h?sslmode=require&sslrootcert=/etc/ca.pem`
//!   (`sslrootcert` is taken out before the client parses the URL). `disable` and
//!   `prefer` (the client's default) connect in plain text: a preference an active
//!   attacker can downgrade protects nothing, and unverified TLS is not offered, so
//!   TLS is asked for explicitly. Use `require` over any network you do not control.
//! - **Primary and replicas**: every write (objects, refs) must go to the primary.
//!   Reads from a streaming replica may lag: a ref read there can be stale and a
//!   compare-and-swap prepared from it would fail or, worse, a caller could conclude an
//!   object is absent. Point the store at the primary; with several hosts in the URL,
//!   add `target_session_attrs=read-write` (e.g. `postgres://u@h1,h2/db?
//!   target_session_attrs=read-write`) so the client picks the writable one.
//! - **Connection poolers** (PgBouncer and the like) work in transaction mode as well
//!   as session mode: the adapter keeps no session state outside a transaction. Every
//!   statement is sent with the extended protocol's *unnamed* statement in a single
//!   round trip (`query_typed`/`execute_typed`, parameter types given by the adapter),
//!   so there are no named prepared statements; no `SET`, no temporary tables, no
//!   session advisory locks, no `LISTEN`. Schema isolation uses schema-qualified table
//!   names, not `search_path`. (The only advisory lock, serialising the table creation
//!   at connect time, is transaction-scoped.)
//! - The URL is a libpq-style URL or key-value string ([`postgres::Config`]): user,
//!   password, hosts, `connect_timeout` (default here 15 s), `application_name`
//!   (default `snapgraph-store`), keepalives. A URL without a password takes one
//!   where libpq would ([`crate::pgpass`]): `PGPASSWORD`, then `PGPASSFILE` or
//!   `~/.pgpass` (refused unless mode 0600). Other `PG*` variables (`PGSERVICE`,
//!   `PGHOST`...) are not read: the driver does not support them.
//! - Rights: the first connection to a database (or schema) creates the tables and
//!   needs `CREATE` there; later connections only look them up, so an application role
//!   with `USAGE` on the schema, `SELECT, INSERT, UPDATE, DELETE` on the tables and
//!   `USAGE` on the reflog's sequence is enough.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use postgres::config::{Host, SslMode};
use postgres::error::SqlState;
use postgres::types::{ToSql, Type};
use postgres::{Client, Config, IsolationLevel, NoTls, Row};
use snapgraph::ObjectId;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::codec::{self, Compression};
use crate::error::StoreError;
use crate::refs::{apply_updates, check_batch};
use crate::store::{validate_ref_name, ObjectStore, ReadCheck, RefStore, RefUpdate, ReflogEntry};

/// The version of the tables this adapter creates and understands.
pub const SCHEMA_VERSION: i64 = 2;

/// Objects per `INSERT` statement at most.
const PUT_CHUNK: usize = 2_000;
/// Bytes of objects per `INSERT` statement at most (one object may exceed it).
const PUT_CHUNK_BYTES: usize = 32 << 20;

/// Objects inserted with a batch of ref updates: their ids (sorted) and records.
type Records<'a> = (&'a [&'a [u8]], &'a [Vec<u8>]);

/// Ids per `SELECT` in `get_many`.
const GET_CHUNK: usize = 2_000;
/// Ids per `SELECT` in `has_many` and per `DELETE` in `delete_many`.
const ID_CHUNK: usize = 10_000;
/// Ids per page of `for_each_id`.
const PAGE: i64 = 10_000;
/// Attempts at an operation that hits a serialization failure or a deadlock, or whose
/// refs moved back to their expected values while a conflict was being reported.
const ATTEMPTS: u32 = 6;
/// Connect timeout when the URL sets none.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// How [`PgStore::connect_with`] sets up the store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PgOptions {
    /// Compression of objects at rest (objects are compressed before they are sent).
    pub compression: Compression,
    /// The schema holding the tables, created if absent: ASCII letters, digits and
    /// `_`, not starting with a digit, at most 63 bytes. `None`: unqualified names,
    /// resolved by the connection's `search_path` (usually `public`).
    pub schema: Option<String>,
    /// A PEM file of the root certificates to trust for TLS instead of Mozilla's
    /// (a private CA). `sslrootcert=PATH` in the URL sets it when this is `None`.
    pub tls_roots: Option<std::path::PathBuf>,
}

/// What went wrong in this adapter: the source of every [`StoreError::Backend`] it
/// returns (`source.downcast_ref::<PgError>()`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The client or the server failed. Shown with its causes (the server's message),
    /// so the `postgres::Error` is not also exposed as `source()` (reports would
    /// repeat it); [`PgError::code`] gives the SQLSTATE of a server error.
    #[error("{}", chain(.0))]
    Postgres(postgres::Error),
    /// The tables were made by a newer version of this adapter: refusing to touch
    /// them.
    #[error(
        "the database holds snapgraph schema version {found}, newer than version \
         {supported} that this snapgraph-store understands: upgrade snapgraph-store"
    )]
    SchemaTooNew {
        /// The version found in the `meta` table.
        found: i64,
        /// [`SCHEMA_VERSION`].
        supported: i64,
    },
    /// The connection URL does not parse.
    #[error("invalid connection URL{}", match .detail {
        Some(d) => format!(": {d}"),
        None => " (details withheld: they could quote part of a password)".into(),
    })]
    InvalidUrl {
        /// The parser's message, kept only when the URL holds no password.
        detail: Option<String>,
    },
    /// [`PgOptions::schema`] is not an acceptable schema name.
    #[error("invalid schema name {name:?}: use 1 to 63 ASCII letters, digits or '_', not starting with a digit")]
    InvalidSchema {
        /// The name given.
        name: String,
    },
    /// The trusted roots for TLS could not be loaded.
    #[error("cannot load TLS root certificates from {path}: {reason}")]
    TlsRoots {
        /// The PEM file.
        path: std::path::PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A reflog message holds a NUL character, which PostgreSQL text cannot store.
    #[error("the reflog message contains a NUL character")]
    NulInMessage,
    /// The server sent a value this adapter never writes (a malformed id, say).
    #[error("unexpected value from the server: {0}")]
    Malformed(String),
}

impl PgError {
    /// The SQLSTATE code of a server error (`40001`: serialization failure, `40P01`:
    /// deadlock, `57P01`: the server shut the connection down, ...).
    pub fn code(&self) -> Option<&SqlState> {
        match self {
            Self::Postgres(e) => e.code(),
            _ => None,
        }
    }
}

impl From<postgres::Error> for PgError {
    fn from(e: postgres::Error) -> Self {
        Self::Postgres(e)
    }
}

/// An error and its causes on one line (the client's own messages are terse: "db
/// error", the server's message is the cause).
fn chain(e: &postgres::Error) -> String {
    let mut out = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// How connections are made: plain, or TLS through rustls.
#[derive(Clone)]
enum Tls {
    Plain,
    Rustls(MakeRustlsConnect),
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Tls::Plain => "Plain",
            Tls::Rustls(_) => "Rustls",
        })
    }
}

impl Tls {
    /// The connector for `mode`: rustls trusting `roots` (a PEM file) or Mozilla's
    /// roots for `require`, none otherwise (see the module docs).
    fn new(mode: SslMode, roots: Option<&std::path::Path>) -> Result<Self, PgError> {
        if mode != SslMode::Require {
            return Ok(Tls::Plain);
        }
        let mut store = rustls::RootCertStore::empty();
        match roots {
            None => store.roots = webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            Some(path) => {
                use rustls::pki_types::{pem::PemObject, CertificateDer};
                let bad = |reason: String| PgError::TlsRoots {
                    path: path.to_path_buf(),
                    reason,
                };
                let certs = CertificateDer::pem_file_iter(path)
                    .map_err(|e| bad(e.to_string()))?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| bad(e.to_string()))?;
                if certs.is_empty() {
                    return Err(bad("no certificate in the file".into()));
                }
                for cert in certs {
                    store.add(cert).map_err(|e| bad(e.to_string()))?;
                }
            }
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| PgError::TlsRoots {
                path: roots.map(|p| p.to_path_buf()).unwrap_or_default(),
                reason: e.to_string(),
            })?
            .with_root_certificates(store)
            .with_no_client_auth();
        Ok(Tls::Rustls(MakeRustlsConnect::new(config)))
    }

    fn connect(&self, config: &Config) -> Result<Client, postgres::Error> {
        match self {
            Tls::Plain => config.connect(NoTls),
            Tls::Rustls(tls) => config.connect(tls.clone()),
        }
    }
}

/// Splits `key=VALUE` out of a URL's query string: the URL without it, and the
/// value (the last one, if given twice).
pub(crate) fn take_param(url: &str, key: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut value = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.split_once('=') {
            Some((k, v)) if k == key => {
                value = Some(v.to_string());
                false
            }
            _ => true,
        })
        .collect();
    let url = if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    (url, value)
}

/// The SQL of every statement, with the table names qualified by the schema.
#[derive(Debug)]
struct Sql {
    put: String,
    get: String,
    has: String,
    delete: String,
    page: String,
    deltas: String,
    get_ref: String,
    get_refs: String,
    list_refs: String,
    reflog: String,
    create_logged: String,
    update_logged: String,
    delete_logged: String,
    guard_present: String,
    create: String,
    update: String,
    delete_ref: String,
    drop_placeholders: String,
    log_batch: String,
}

impl Sql {
    fn new(schema: Option<&str>) -> Self {
        let t = |table: &str| match schema {
            Some(s) => format!("\"{s}\".{table}"),
            None => table.to_string(),
        };
        let (objects, refs, reflog) = (t("objects"), t("refs"), t("reflog"));
        let logged = |cte: String| {
            format!(
                "WITH u AS ({cte} RETURNING name) \
                 INSERT INTO {reflog} (name, old, new, message) SELECT name, $2, $3, $4 FROM u"
            )
        };
        Self {
            put: format!(
                "INSERT INTO {objects} (id, data) SELECT * FROM unnest($1::bytea[], $2::bytea[]) \
                 ON CONFLICT DO NOTHING"
            ),
            get: format!("SELECT id, data FROM {objects} WHERE id = ANY($1)"),
            has: format!("SELECT id FROM {objects} WHERE id = ANY($1)"),
            delete: format!("DELETE FROM {objects} WHERE id = ANY($1)"),
            page: format!("SELECT id FROM {objects} WHERE id > $1 ORDER BY id LIMIT $2"),
            deltas: format!(
                "SELECT id, substring(data FROM 1 FOR 34) FROM {objects} \
                 WHERE substring(data FROM 1 FOR 1) = '\\x02'::bytea"
            ),
            get_ref: format!("SELECT id FROM {refs} WHERE name = $1"),
            get_refs: format!("SELECT name, id FROM {refs} WHERE name = ANY($1)"),
            list_refs: format!(
                "SELECT name, id FROM {refs} WHERE name >= $1 AND starts_with(name, $1) \
                 ORDER BY name"
            ),
            reflog: format!("SELECT old, new, message FROM {reflog} WHERE name = $1 ORDER BY seq"),
            create_logged: logged(format!(
                "INSERT INTO {refs} (name, id) VALUES ($1, $3) ON CONFLICT DO NOTHING"
            )),
            update_logged: logged(format!(
                "UPDATE {refs} SET id = $3 WHERE name = $1 AND id = $2"
            )),
            delete_logged: logged(format!("DELETE FROM {refs} WHERE name = $1 AND id = $2")),
            guard_present: format!("SELECT 1 FROM {refs} WHERE name = $1 AND id = $2 FOR SHARE"),
            create: format!("INSERT INTO {refs} (name, id) VALUES ($1, $2) ON CONFLICT DO NOTHING"),
            update: format!("UPDATE {refs} SET id = $3 WHERE name = $1 AND id = $2"),
            delete_ref: format!("DELETE FROM {refs} WHERE name = $1 AND id = $2"),
            drop_placeholders: format!("DELETE FROM {refs} WHERE name = ANY($1) AND id = $2"),
            log_batch: format!(
                "INSERT INTO {reflog} (name, old, new, message) \
                 SELECT n, o, w, $4 FROM unnest($1::text[], $2::bytea[], $3::bytea[]) AS t(n, o, w)"
            ),
        }
    }
}

/// The value a placeholder row holds while a batch guards an absent ref (never
/// committed, never seen by a reader).
const PLACEHOLDER: [u8; 32] = [0; 32];

/// A store in a PostgreSQL database (see the [module docs](self)).
pub struct PgStore {
    client: Mutex<Client>,
    config: Config,
    tls: Tls,
    compression: Compression,
    sql: Sql,
    /// `postgres://user@host:port/db` and the schema: what error contexts name.
    label: String,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("database", &self.label)
            .field("compression", &self.compression)
            .finish_non_exhaustive()
    }
}

/// The password libpq would use for `config` ([`crate::pgpass`]): the first host
/// and port, the user (default: `$USER`), the database (default: the user).
fn libpq_password(config: &Config) -> Result<Option<String>, crate::pgpass::PassfileError> {
    let os_user = std::env::var("USER").unwrap_or_default();
    let user = config.get_user().unwrap_or(&os_user);
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.as_str(),
        _ => "localhost",
    };
    let target = crate::pgpass::Target {
        host,
        port: config.get_ports().first().copied().unwrap_or(5432),
        database: config.get_dbname().unwrap_or(user),
        user,
    };
    crate::pgpass::lookup(&target)
}

/// Where a connection goes, without the password.
fn describe(config: &Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    let ports: Vec<String> = config.get_ports().iter().map(u16::to_string).collect();
    let mut out = String::from("postgres://");
    if let Some(user) = config.get_user() {
        out.push_str(user);
        out.push('@');
    }
    out.push_str(&hosts.join(","));
    if !ports.is_empty() {
        out.push(':');
        out.push_str(&ports.join(","));
    }
    out.push('/');
    out.push_str(config.get_dbname().unwrap_or(""));
    out
}

fn valid_schema(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && !name.as_bytes()[0].is_ascii_digit()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether `e` is a PostgreSQL serialization failure or deadlock (worth a retry).
fn transient(e: &StoreError) -> bool {
    let StoreError::Backend { source, .. } = e else {
        return false;
    };
    source
        .downcast_ref::<PgError>()
        .and_then(PgError::code)
        .is_some_and(|c| {
            *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
        })
}

fn backoff(attempt: u32) {
    std::thread::sleep(Duration::from_millis(2u64 << attempt.min(8)));
}

/// Bytes of an optional id, for a nullable `bytea` parameter.
fn opt_bytes(id: &Option<ObjectId>) -> Option<&[u8]> {
    id.as_ref().map(|i| &i.as_bytes()[..])
}

fn short(ids: &[ObjectId]) -> String {
    match ids {
        [] => "no ids".into(),
        [one] => one.to_string(),
        [first, ..] => format!("{} ids from {first}", ids.len()),
    }
}

/// What one attempt at `update_refs` found.
enum Outcome {
    Done,
    /// This update did not find its expected value.
    Conflict(usize),
}

impl PgStore {
    /// Connects with default options (zstd level 1, the connection's `search_path`).
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, PgOptions::default())
    }

    /// Connects, creates the schema and tables if absent and checks their version.
    ///
    /// `url` is a libpq-style URL (`postgres://user:password@host:port/db?...`) or
    /// key-value string; see the [module docs](self) for TLS, replicas and poolers.
    /// Errors are [`StoreError::Backend`] naming the database without its password.
    pub fn connect_with(url: &str, mut options: PgOptions) -> Result<Self, StoreError> {
        let (url, root_param) = take_param(url, "sslrootcert");
        let url = url.as_str();
        if options.tls_roots.is_none() {
            options.tls_roots = root_param.map(std::path::PathBuf::from);
        }
        let mut config = Config::from_str(url).map_err(|e| {
            // The parser's messages may quote bits of the URL: keep them only when the
            // URL cannot hold a password.
            let lower = url.to_ascii_lowercase();
            let detail = (!lower.contains("password") && !url.contains('@')).then(|| chain(&e));
            StoreError::backend(
                "parsing the PostgreSQL connection URL (the URL itself is not shown)",
                PgError::InvalidUrl { detail },
            )
        })?;
        let label = describe(&config);
        if config.get_password().is_none() {
            if let Some(password) = libpq_password(&config)
                .map_err(|e| StoreError::backend(format!("finding the password for {label}"), e))?
            {
                config.password(password);
            }
        }
        let tls = Tls::new(config.get_ssl_mode(), options.tls_roots.as_deref())
            .map_err(|e| StoreError::backend(format!("connecting to {label}"), e))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("snapgraph-store");
        }
        let label = match &options.schema {
            Some(schema) if !valid_schema(schema) => {
                return Err(StoreError::backend(
                    format!("opening {label}"),
                    PgError::InvalidSchema {
                        name: schema.chars().take(100).collect(),
                    },
                ))
            }
            Some(schema) => format!("{label} (schema {schema})"),
            None => label,
        };
        let client = tls
            .connect(&config)
            .map_err(|e| StoreError::backend(format!("connecting to {label}"), PgError::from(e)))?;
        let store = Self {
            client: Mutex::new(client),
            config,
            tls,
            compression: options.compression,
            sql: Sql::new(options.schema.as_deref()),
            label,
        };
        store.create_tables(options.schema.as_deref())?;
        Ok(store)
    }

    /// The database this store talks to, as error messages name it (no password).
    pub fn database(&self) -> &str {
        &self.label
    }

    /// Refuses tables of a newer schema than this build knows.
    fn refuse_newer(&self, found: i64) -> Result<(), StoreError> {
        if found > SCHEMA_VERSION {
            return Err(self.err(
                "checking the schema version",
                PgError::SchemaTooNew {
                    found,
                    supported: SCHEMA_VERSION,
                },
            ));
        }
        Ok(())
    }

    fn err(&self, what: impl fmt::Display, e: impl Into<PgError>) -> StoreError {
        StoreError::backend(format!("{what} in {}", self.label), e.into())
    }

    fn malformed(&self, what: impl fmt::Display, detail: String) -> StoreError {
        self.err(what, PgError::Malformed(detail))
    }

    /// The connection, reopened first if the server closed it.
    fn client(&self) -> Result<MutexGuard<'_, Client>, StoreError> {
        // A panic while the lock was held left at worst an open transaction, which
        // the dropped `Transaction` rolled back: the client is usable.
        let mut client = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        if client.is_closed() {
            *client = self
                .tls
                .connect(&self.config)
                .map_err(|e| self.err("reconnecting", e))?;
        }
        Ok(client)
    }

    fn create_tables(&self, schema: Option<&str>) -> Result<(), StoreError> {
        let t = |table: &str| match schema {
            Some(s) => format!("\"{s}\".{table}"),
            None => table.to_string(),
        };
        let meta = t("meta");
        let version_sql = format!("SELECT value FROM {meta} WHERE key = 'schema_version'");
        let mut client = self.client()?;
        // Tables already there: nothing to create (a role without CREATE rights can
        // use tables an owner made). `to_regclass` probes without an error in the
        // server's log.
        let probe = format!("SELECT to_regclass('{meta}') IS NOT NULL");
        let exists: bool = {
            let row = client
                .query_typed_one(&probe, &[])
                .map_err(|e| self.err("looking for the snapgraph tables", e))?;
            self.column(&row, 0, &"looking for the snapgraph tables")?
        };
        if exists {
            let row = client
                .query_typed_opt(&version_sql, &[])
                .map_err(|e| self.err("reading the schema version", e))?;
            if let Some(row) = row {
                let found: i64 = self.column(&row, 0, &"reading the schema version")?;
                self.refuse_newer(found)?;
                if found == SCHEMA_VERSION {
                    return Ok(());
                }
            }
        }
        let what = "creating the snapgraph tables";
        let mut tx = client.transaction().map_err(|e| self.err(what, e))?;
        // Concurrent `CREATE ... IF NOT EXISTS` of the same table can fail on the
        // catalog's unique indexes: serialise first connections.
        let mut ddl =
            String::from("SELECT pg_advisory_xact_lock(hashtext('snapgraph-store ddl'));");
        if let Some(s) = schema {
            ddl.push_str(&format!("CREATE SCHEMA IF NOT EXISTS \"{s}\";"));
        }
        ddl.push_str(&format!(
            "CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value bigint NOT NULL);
             INSERT INTO {meta} (key, value) VALUES ('schema_version', {SCHEMA_VERSION})
                 ON CONFLICT DO NOTHING;"
        ));
        tx.batch_execute(&ddl).map_err(|e| self.err(what, e))?;
        let row = tx
            .query_typed_one(&version_sql, &[])
            .map_err(|e| self.err(what, e))?;
        let found: i64 = self.column(&row, 0, &"reading the schema version")?;
        self.refuse_newer(found)?;
        let (objects, refs, reflog) = (t("objects"), t("refs"), t("reflog"));
        tx.batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {objects} (
                 id bytea PRIMARY KEY CHECK (octet_length(id) = 32),
                 data bytea NOT NULL);
             CREATE TABLE IF NOT EXISTS {refs} (
                 name text COLLATE \"C\" PRIMARY KEY,
                 id bytea NOT NULL CHECK (octet_length(id) = 32));
             CREATE TABLE IF NOT EXISTS {reflog} (
                 seq bigserial PRIMARY KEY,
                 name text COLLATE \"C\" NOT NULL,
                 old bytea CHECK (octet_length(old) = 32),
                 new bytea CHECK (octet_length(new) = 32),
                 message text NOT NULL,
                 at timestamptz NOT NULL DEFAULT now());
             CREATE INDEX IF NOT EXISTS reflog_name_seq ON {reflog} (name, seq);
             UPDATE {meta} SET value = {SCHEMA_VERSION}
                 WHERE key = 'schema_version' AND value < {SCHEMA_VERSION};"
        ))
        .map_err(|e| self.err(what, e))?;
        tx.commit().map_err(|e| self.err(what, e))
    }

    fn id_of(&self, what: impl fmt::Display, bytes: &[u8]) -> Result<ObjectId, StoreError> {
        <[u8; 32]>::try_from(bytes)
            .map(ObjectId::from_bytes)
            .map_err(|_| {
                self.malformed(
                    what,
                    format!("{} bytes where a 32-byte object id belongs", bytes.len()),
                )
            })
    }

    fn column<'r, T: postgres::types::FromSql<'r>>(
        &self,
        row: &'r Row,
        i: usize,
        what: &dyn fmt::Display,
    ) -> Result<T, StoreError> {
        row.try_get(i).map_err(|e| self.err(what, e))
    }

    /// Runs `op` again after a serialization failure or deadlock.
    fn retrying<T>(&self, mut op: impl FnMut() -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut attempt = 0;
        loop {
            match op() {
                Err(e) if transient(&e) && attempt + 1 < ATTEMPTS => {
                    attempt += 1;
                    backoff(attempt);
                }
                other => return other,
            }
        }
    }

    fn put_chunk(
        &self,
        chunk: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
    ) -> Result<(), StoreError> {
        let (ids, data) = self.encode_chunk(chunk, bases)?;
        let ids: Vec<&[u8]> = ids.iter().map(|id| &id.as_bytes()[..]).collect();
        let what = || {
            let ids: Vec<ObjectId> = chunk.iter().map(|(id, _)| *id).collect();
            format!("put_many of {}", short(&ids))
        };
        self.retrying(|| {
            self.client()?
                .execute_typed(
                    &self.sql.put,
                    &[(&ids, Type::BYTEA_ARRAY), (&data, Type::BYTEA_ARRAY)],
                )
                .map_err(|e| self.err(what(), e))
        })?;
        Ok(())
    }

    /// The records of `chunk` (each with its delta base hint in `bases`), sorted by
    /// id and each id once (so that concurrent overlapping writers lock rows in the
    /// same order): the ids and the records.
    fn encode_chunk(
        &self,
        chunk: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
    ) -> Result<(Vec<ObjectId>, Vec<Vec<u8>>), StoreError> {
        type Hinted<'a> = ((ObjectId, &'a [u8]), Option<ObjectId>);
        let mut sorted: Vec<Hinted<'_>> = chunk
            .iter()
            .enumerate()
            .map(|(i, o)| (*o, bases.get(i).copied().flatten()))
            .collect();
        sorted.sort_unstable_by_key(|((id, _), _)| *id);
        sorted.dedup_by_key(|((id, _), _)| *id);
        let ids: Vec<ObjectId> = sorted.iter().map(|((id, _), _)| *id).collect();
        let objects: Vec<(ObjectId, &[u8])> = sorted.iter().map(|(o, _)| *o).collect();
        let hints: Vec<Option<ObjectId>> = sorted.iter().map(|(_, b)| *b).collect();
        let data = codec::encode_many(&objects, &hints, self.compression, &mut |ids| {
            self.records(ids)
        })?;
        Ok((ids, data))
    }

    /// [`RefStore::update_refs`], with `objects` inserted in the same transaction
    /// ([`RefStore::update_refs_with_objects`]).
    fn update_refs_and_put(
        &self,
        updates: &[RefUpdate],
        message: &str,
        objects: Option<Records<'_>>,
    ) -> Result<(), StoreError> {
        check_batch(updates)?;
        if updates.is_empty() && objects.is_none() {
            return Ok(());
        }
        if message.contains('\0') {
            let names: Vec<&str> = updates.iter().map(|u| u.name.as_str()).collect();
            return Err(self.err(
                format!("updating refs {}", names.join(", ")),
                PgError::NulInMessage,
            ));
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let outcome = match updates {
                // A single move is one statement that also logs it; leases are
                // not logged, so theirs take the batch path.
                [one] if objects.is_none() && crate::refs::logged(&one.name) => {
                    self.update_one(one, message)
                }
                _ => self.update_batch(updates, message, objects),
            };
            let failed = match outcome {
                Ok(Outcome::Done) => return Ok(()),
                Ok(Outcome::Conflict(i)) => i,
                Err(e) if transient(&e) && attempt < ATTEMPTS => {
                    backoff(attempt);
                    continue;
                }
                Err(e) => return Err(e),
            };
            // Report the first conflict in the order given, as the refs are now.
            let current = self.current_values(updates)?;
            apply_updates(updates, |name| Ok(current.get(name).copied()))?;
            // They moved back to the expected values meanwhile: try again.
            if attempt >= ATTEMPTS {
                let u = &updates[failed];
                return Err(StoreError::RefConflict {
                    name: u.name.clone(),
                    expected: u.expected,
                    actual: current.get(&u.name).copied(),
                });
            }
        }
    }

    /// The records of `ids` (`None`: absent), in chunks of one query each.
    fn records(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(GET_CHUNK) {
            let what = format!("get_many of {}", short(chunk));
            let keys: Vec<&[u8]> = chunk.iter().map(|id| &id.as_bytes()[..]).collect();
            let rows = self
                .client()?
                .query_typed(&self.sql.get, &[(&keys, Type::BYTEA_ARRAY)])
                .map_err(|e| self.err(&what, e))?;
            let mut found: HashMap<ObjectId, Vec<u8>> = HashMap::with_capacity(rows.len());
            for row in &rows {
                let id = self.id_of(&what, self.column(row, 0, &what)?)?;
                found.insert(id, self.column::<&[u8]>(row, 1, &what)?.to_vec());
            }
            out.extend(chunk.iter().map(|id| found.remove(id)));
        }
        Ok(out)
    }

    /// The current value of each named ref that exists.
    fn current_values(
        &self,
        updates: &[RefUpdate],
    ) -> Result<HashMap<String, ObjectId>, StoreError> {
        let names: Vec<&str> = updates.iter().map(|u| u.name.as_str()).collect();
        let what = format!("reading refs {}", names.join(", "));
        let rows = self
            .client()?
            .query_typed(&self.sql.get_refs, &[(&names, Type::TEXT_ARRAY)])
            .map_err(|e| self.err(&what, e))?;
        let mut out = HashMap::with_capacity(rows.len());
        for row in &rows {
            let name: String = self.column(row, 0, &what)?;
            let id: &[u8] = self.column(row, 1, &what)?;
            let id = self.id_of(format!("reading ref {name}"), id)?;
            out.insert(name, id);
        }
        Ok(out)
    }

    /// One update, in one statement (a guard: one read).
    fn update_one(&self, u: &RefUpdate, message: &str) -> Result<Outcome, StoreError> {
        let what = || format!("updating ref {}", u.name);
        let applied = match (u.expected, u.new) {
            (expected, new) if expected == new => self.get_ref(&u.name)? == expected,
            (expected, new) => {
                let sql = match (expected, new) {
                    (None, _) => &self.sql.create_logged,
                    (_, None) => &self.sql.delete_logged,
                    _ => &self.sql.update_logged,
                };
                let (old, new) = (opt_bytes(&u.expected), opt_bytes(&u.new));
                let rows = self
                    .client()?
                    .execute_typed(
                        sql,
                        &[
                            (&u.name, Type::TEXT),
                            (&old, Type::BYTEA),
                            (&new, Type::BYTEA),
                            (&message, Type::TEXT),
                        ],
                    )
                    .map_err(|e| self.err(what(), e))?;
                rows == 1
            }
        };
        Ok(if applied {
            Outcome::Done
        } else {
            Outcome::Conflict(0)
        })
    }

    /// Several updates, in one transaction; with `objects` (ids and records, sorted
    /// by id), those are inserted in it too, once every update has applied.
    fn update_batch(
        &self,
        updates: &[RefUpdate],
        message: &str,
        objects: Option<Records<'_>>,
    ) -> Result<Outcome, StoreError> {
        let names: Vec<&str> = updates.iter().map(|u| u.name.as_str()).collect();
        let what = format!("updating refs {}", names.join(", "));
        let fail = |e| self.err(&what, e);
        let mut client = self.client()?;
        let mut tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::ReadCommitted)
            .start()
            .map_err(fail)?;
        let mut order: Vec<usize> = (0..updates.len()).collect();
        order.sort_by(|&a, &b| updates[a].name.cmp(&updates[b].name));
        let mut placeholders: Vec<&str> = Vec::new();
        for i in order {
            let u = &updates[i];
            let (old, new) = (opt_bytes(&u.expected), opt_bytes(&u.new));
            let name: (&(dyn ToSql + Sync), Type) = (&u.name, Type::TEXT);
            let applied = match (old, new) {
                (Some(old), Some(new)) if old == new => {
                    tx.query_typed(&self.sql.guard_present, &[name, (&old, Type::BYTEA)])
                        .map_err(fail)?
                        .len()
                        == 1
                }
                (None, None) => {
                    placeholders.push(&u.name);
                    let placeholder = &PLACEHOLDER[..];
                    tx.execute_typed(&self.sql.create, &[name, (&placeholder, Type::BYTEA)])
                        .map_err(fail)?
                        == 1
                }
                (None, Some(new)) => {
                    tx.execute_typed(&self.sql.create, &[name, (&new, Type::BYTEA)])
                        .map_err(fail)?
                        == 1
                }
                (Some(old), None) => {
                    tx.execute_typed(&self.sql.delete_ref, &[name, (&old, Type::BYTEA)])
                        .map_err(fail)?
                        == 1
                }
                (Some(old), Some(new)) => {
                    tx.execute_typed(
                        &self.sql.update,
                        &[name, (&old, Type::BYTEA), (&new, Type::BYTEA)],
                    )
                    .map_err(fail)?
                        == 1
                }
            };
            if !applied {
                tx.rollback().map_err(fail)?;
                return Ok(Outcome::Conflict(i));
            }
        }
        if !placeholders.is_empty() {
            let placeholder = &PLACEHOLDER[..];
            tx.execute_typed(
                &self.sql.drop_placeholders,
                &[
                    (&placeholders, Type::TEXT_ARRAY),
                    (&placeholder, Type::BYTEA),
                ],
            )
            .map_err(fail)?;
        }
        let changing: Vec<&RefUpdate> = updates
            .iter()
            .filter(|u| u.changes() && crate::refs::logged(&u.name))
            .collect();
        if !changing.is_empty() {
            let names: Vec<&str> = changing.iter().map(|u| u.name.as_str()).collect();
            let olds: Vec<Option<&[u8]>> =
                changing.iter().map(|u| opt_bytes(&u.expected)).collect();
            let news: Vec<Option<&[u8]>> = changing.iter().map(|u| opt_bytes(&u.new)).collect();
            tx.execute_typed(
                &self.sql.log_batch,
                &[
                    (&names, Type::TEXT_ARRAY),
                    (&olds, Type::BYTEA_ARRAY),
                    (&news, Type::BYTEA_ARRAY),
                    (&message, Type::TEXT),
                ],
            )
            .map_err(fail)?;
        }
        if let Some((ids, data)) = objects {
            tx.execute_typed(
                &self.sql.put,
                &[(&ids, Type::BYTEA_ARRAY), (&data, Type::BYTEA_ARRAY)],
            )
            .map_err(fail)?;
        }
        tx.commit().map_err(fail)?;
        Ok(Outcome::Done)
    }
}

impl ObjectStore for PgStore {
    fn get_many(&self, ids: &[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.get_many_checked(ids, ReadCheck::Store)
    }

    fn get_many_checked(
        &self,
        ids: &[ObjectId],
        check: ReadCheck,
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let records = self.records(ids)?;
        codec::decode_many_checked(ids, records, &mut |bases| self.records(bases), check)
    }

    fn has_many(&self, ids: &[ObjectId]) -> Result<Vec<ObjectId>, StoreError> {
        let mut absent = Vec::new();
        for chunk in ids.chunks(ID_CHUNK) {
            let what = format!("has_many of {}", short(chunk));
            let keys: Vec<&[u8]> = chunk.iter().map(|id| &id.as_bytes()[..]).collect();
            let rows = self
                .client()?
                .query_typed(&self.sql.has, &[(&keys, Type::BYTEA_ARRAY)])
                .map_err(|e| self.err(&what, e))?;
            let mut present = HashSet::with_capacity(rows.len());
            for row in &rows {
                present.insert(self.id_of(&what, self.column(row, 0, &what)?)?);
            }
            absent.extend(chunk.iter().filter(|id| !present.contains(*id)));
        }
        Ok(absent)
    }

    fn put_many(&self, objects: &[(ObjectId, &[u8])]) -> Result<(), StoreError> {
        self.put_many_with_bases(objects, &[])
    }

    fn keeps_deltas(&self) -> bool {
        true
    }

    fn put_many_with_bases(
        &self,
        objects: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
    ) -> Result<(), StoreError> {
        let mut rest = objects;
        let mut hints = bases;
        while !rest.is_empty() {
            let mut n = 0;
            let mut bytes = 0;
            while n < rest.len()
                && n < PUT_CHUNK
                && (n == 0 || bytes + rest[n].1.len() <= PUT_CHUNK_BYTES)
            {
                bytes += rest[n].1.len();
                n += 1;
            }
            let (chunk, tail) = rest.split_at(n);
            let (chunk_hints, hint_tail) = hints.split_at(n.min(hints.len()));
            self.put_chunk(chunk, chunk_hints)?;
            rest = tail;
            hints = hint_tail;
        }
        Ok(())
    }

    fn delete_many(&self, ids: &[ObjectId]) -> Result<(), StoreError> {
        for chunk in ids.chunks(ID_CHUNK) {
            let mut keys: Vec<&[u8]> = chunk.iter().map(|id| &id.as_bytes()[..]).collect();
            keys.sort_unstable();
            self.retrying(|| {
                self.client()?
                    .execute_typed(&self.sql.delete, &[(&keys, Type::BYTEA_ARRAY)])
                    .map_err(|e| self.err(format!("delete_many of {}", short(chunk)), e))
            })?;
        }
        Ok(())
    }

    fn for_each_id(
        &self,
        f: &mut dyn FnMut(ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        // Keyset pages, the lock released while `f` runs (it may use the store).
        let mut after: Vec<u8> = Vec::new();
        loop {
            let what = "for_each_id";
            let rows = self
                .client()?
                .query_typed(
                    &self.sql.page,
                    &[(&after, Type::BYTEA), (&PAGE, Type::INT8)],
                )
                .map_err(|e| self.err(what, e))?;
            let mut ids = Vec::with_capacity(rows.len());
            for row in &rows {
                ids.push(self.id_of(what, self.column(row, 0, &what)?)?);
            }
            for id in &ids {
                f(*id)?;
            }
            match ids.last() {
                Some(last) if ids.len() as i64 == PAGE => after = last.as_bytes().to_vec(),
                _ => return Ok(()),
            }
        }
    }

    fn for_each_delta(
        &self,
        f: &mut dyn FnMut(ObjectId, ObjectId) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        // One scan reading each delta record's first 34 bytes (tag, depth, base).
        let what = "for_each_delta";
        let rows = self
            .client()?
            .query_typed(&self.sql.deltas, &[])
            .map_err(|e| self.err(what, e))?;
        let mut pairs = Vec::with_capacity(rows.len());
        for row in &rows {
            let id = self.id_of(what, self.column(row, 0, &what)?)?;
            let head: &[u8] = self.column(row, 1, &what)?;
            if let Some((base, _)) = codec::delta_base(head) {
                pairs.push((id, base));
            }
        }
        drop(rows);
        for (id, base) in pairs {
            f(id, base)?;
        }
        Ok(())
    }
}

impl RefStore for PgStore {
    fn get_ref(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        validate_ref_name(name)?;
        let what = format!("reading ref {name}");
        let row = self
            .client()?
            .query_typed_opt(&self.sql.get_ref, &[(&name, Type::TEXT)])
            .map_err(|e| self.err(&what, e))?;
        row.map(|row| self.id_of(&what, self.column(&row, 0, &what)?))
            .transpose()
    }

    fn update_refs(&self, updates: &[RefUpdate], message: &str) -> Result<(), StoreError> {
        self.update_refs_and_put(updates, message, None)
    }

    fn writes_objects_with_refs(&self) -> bool {
        true
    }

    /// One READ COMMITTED transaction: the updates, then the objects' records
    /// (encoded first, outside it); a conflict rolls both back.
    fn update_refs_with_objects(
        &self,
        objects: &[(ObjectId, &[u8])],
        bases: &[Option<ObjectId>],
        updates: &[RefUpdate],
        message: &str,
    ) -> Result<bool, StoreError> {
        check_batch(updates)?;
        // One statement's worth at most (a commit that fits one write does).
        let bytes: usize = objects.iter().map(|(_, b)| b.len()).sum();
        if objects.len() > PUT_CHUNK || bytes > PUT_CHUNK_BYTES {
            return Ok(false);
        }
        let (ids, data) = self.encode_chunk(objects, bases)?;
        let ids: Vec<&[u8]> = ids.iter().map(|id| &id.as_bytes()[..]).collect();
        self.update_refs_and_put(updates, message, Some((&ids, &data)))?;
        Ok(true)
    }

    fn list_refs(&self, prefix: &str) -> Result<Vec<(String, ObjectId)>, StoreError> {
        if prefix.contains('\0') {
            return Ok(Vec::new()); // no ref name holds one (and text cannot)
        }
        let what = format!("listing refs {prefix:?}*");
        let rows = self
            .client()?
            .query_typed(&self.sql.list_refs, &[(&prefix, Type::TEXT)])
            .map_err(|e| self.err(&what, e))?;
        rows.iter()
            .map(|row| {
                let name: String = self.column(row, 0, &what)?;
                let id = self.id_of(format!("reading ref {name}"), self.column(row, 1, &what)?)?;
                Ok((name, id))
            })
            .collect()
    }

    fn reflog(&self, name: &str) -> Result<Vec<ReflogEntry>, StoreError> {
        validate_ref_name(name)?;
        let what = format!("reading the reflog of {name}");
        let rows = self
            .client()?
            .query_typed(&self.sql.reflog, &[(&name, Type::TEXT)])
            .map_err(|e| self.err(&what, e))?;
        rows.iter()
            .map(|row| {
                let old: Option<&[u8]> = self.column(row, 0, &what)?;
                let new: Option<&[u8]> = self.column(row, 1, &what)?;
                Ok(ReflogEntry {
                    old: old.map(|b| self.id_of(&what, b)).transpose()?,
                    new: new.map(|b| self.id_of(&what, b)).transpose()?,
                    message: self.column(row, 2, &what)?,
                })
            })
            .collect()
    }
}

crate::impl_object_source!(PgStore);
