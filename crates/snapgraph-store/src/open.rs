//! Opening a store from a URL, as the CLI and configuration files name them.

use crate::error::StoreError;
use crate::store::Store;

/// Opens the store a URL names:
///
/// - `sqlite:PATH` (or a path ending in `.db`/`.sqlite`): the embedded default;
/// - `dir:PATH`: loose files under a directory;
/// - `postgres://…` or `postgresql://…`: a PostgreSQL server; a query parameter
///   `snapgraph_schema=NAME` (taken out before the URL reaches the driver) keeps the
///   tables in schema `NAME`, created if absent;
/// - `s3://BUCKET/PREFIX?endpoint=URL&region=NAME`: an S3-compatible bucket (packs,
///   indexes and refs under `PREFIX/`; see the `s3` module, feature `s3`); with `&refs=URL`
///   (percent-encoded, say `postgres%3A%2F%2F…`) the refs live in that store instead;
/// - `memory:`: an empty in-memory store (for tests and dry runs);
/// - `cache:LOCAL|REMOTE`: the store `REMOTE` (any URL above) with the store `LOCAL`
///   (usually `sqlite:PATH` or `dir:PATH`) as a cache in front of it
///   ([`CachingStore`](crate::cache::CachingStore): reads fill the cache, writes go
///   through, refs are the remote's). The URL is split at its first `|`, so the
///   local URL cannot hold one; neither part may itself be a `cache:` URL.
///
/// Each adapter but memory is behind a cargo feature of the same name (`sqlite` and
/// `dir` on by default, `postgres` and `s3` off); a URL whose adapter is compiled out is an
/// error naming the feature.
pub fn open(url: &str) -> Result<Box<dyn Store>, StoreError> {
    open_with(url, &OpenOptions::default())
}

/// How [`open_with`] opens what a URL names, past what the URL says. The default
/// is what [`open`] does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenOptions {
    sqlite_mmap_bytes: u64,
}

impl OpenOptions {
    /// Options as [`open`] uses them.
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes of an SQLite database file that reads map into memory
    /// ([`SqliteOptions::mmap_bytes`](crate::sqlite::SqliteOptions::mmap_bytes),
    /// with its price: 0, the default, maps nothing). It applies to every SQLite
    /// store the URL opens, a `cache:` URL's local one included.
    pub fn sqlite_mmap_bytes(mut self, bytes: u64) -> Self {
        self.sqlite_mmap_bytes = bytes;
        self
    }
}

/// [`open`] with `options`.
pub fn open_with(url: &str, options: &OpenOptions) -> Result<Box<dyn Store>, StoreError> {
    if let Some(path) = url.strip_prefix("sqlite:") {
        return open_sqlite(url, path, options);
    }
    if let Some(path) = url.strip_prefix("dir:") {
        return open_dir(url, path);
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return open_postgres(url);
    }
    if url.starts_with("s3://") {
        return open_s3(url);
    }
    if let Some(rest) = url.strip_prefix("cache:") {
        return open_cache(rest, options);
    }
    if url == "memory:" {
        return Ok(Box::new(crate::memory::MemoryStore::new()));
    }
    if url.ends_with(".db") || url.ends_with(".sqlite") {
        return open_sqlite(url, url, options);
    }
    Err(StoreError::backend(
        format!("store URL {url:?}"),
        "expected sqlite:PATH, dir:PATH, postgres://…, s3://…, memory: or cache:LOCAL|REMOTE",
    ))
}

/// `cache:LOCAL|REMOTE`: both opened, the local one in front.
fn open_cache(rest: &str, options: &OpenOptions) -> Result<Box<dyn Store>, StoreError> {
    let Some((local, remote)) = rest.split_once('|') else {
        return Err(StoreError::backend(
            // Not the URL itself: its remote part may carry a password.
            "a cache: store URL",
            "expected cache:LOCAL|REMOTE (two store URLs joined by `|`)",
        ));
    };
    if local.starts_with("cache:") || remote.starts_with("cache:") {
        return Err(StoreError::backend(
            "a cache: store URL",
            "a cache: URL's local and remote parts cannot be cache: URLs themselves",
        ));
    }
    let local = open_with(local, options)?;
    let remote = open_with(remote, options)?;
    Ok(Box::new(crate::cache::CachingStore::new(local, remote)))
}

/// The error for a URL whose adapter was compiled out.
#[cfg(not(all(
    feature = "sqlite",
    feature = "dir",
    feature = "postgres",
    feature = "s3"
)))]
fn not_built(url: &str, feature: &str) -> StoreError {
    StoreError::backend(
        format!("store URL {url:?}"),
        format!("this build of snapgraph-store has no `{feature}` feature"),
    )
}

#[cfg(feature = "sqlite")]
fn open_sqlite(
    _url: &str,
    path: &str,
    options: &OpenOptions,
) -> Result<Box<dyn Store>, StoreError> {
    let options = crate::sqlite::SqliteOptions {
        mmap_bytes: options.sqlite_mmap_bytes,
        ..Default::default()
    };
    Ok(Box::new(crate::sqlite::SqliteStore::open_with(
        path, options,
    )?))
}

#[cfg(not(feature = "sqlite"))]
fn open_sqlite(url: &str, _path: &str, _: &OpenOptions) -> Result<Box<dyn Store>, StoreError> {
    Err(not_built(url, "sqlite"))
}

#[cfg(feature = "dir")]
fn open_dir(_url: &str, path: &str) -> Result<Box<dyn Store>, StoreError> {
    Ok(Box::new(crate::dir::DirStore::open(path)?))
}

#[cfg(not(feature = "dir"))]
fn open_dir(url: &str, _path: &str) -> Result<Box<dyn Store>, StoreError> {
    Err(not_built(url, "dir"))
}

#[cfg(feature = "postgres")]
fn open_postgres(url: &str) -> Result<Box<dyn Store>, StoreError> {
    let (url, schema) = take_schema(url);
    let options = crate::postgres::PgOptions {
        schema,
        ..Default::default()
    };
    Ok(Box::new(crate::postgres::PgStore::connect_with(
        &url, options,
    )?))
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(url: &str) -> Result<Box<dyn Store>, StoreError> {
    Err(not_built(url, "postgres"))
}

#[cfg(feature = "s3")]
fn open_s3(url: &str) -> Result<Box<dyn Store>, StoreError> {
    let location = crate::s3::S3Location::parse(url)?;
    let objects = crate::s3::S3Store::open(&location, crate::s3::S3Options::default())?;
    match &location.refs {
        None => Ok(Box::new(objects)),
        Some(refs) if refs.starts_with("s3://") => Err(StoreError::backend(
            format!("store URL {url:?}"),
            "refs=s3://… is refs in a bucket: drop the refs parameter",
        )),
        Some(refs) => Ok(Box::new(crate::store::Paired::new(objects, open(refs)?))),
    }
}

#[cfg(not(feature = "s3"))]
fn open_s3(url: &str) -> Result<Box<dyn Store>, StoreError> {
    Err(not_built(url, "s3"))
}

/// Splits `snapgraph_schema=NAME` out of a URL's query string.
#[cfg(feature = "postgres")]
fn take_schema(url: &str) -> (String, Option<String>) {
    crate::postgres::take_param(url, "snapgraph_schema")
}

#[cfg(all(test, feature = "postgres"))]
mod tests {
    use super::take_schema;

    #[test]
    fn the_schema_parameter_is_taken_out() {
        assert_eq!(
            take_schema("postgres://u@h/db?snapgraph_schema=s1&connect_timeout=5"),
            (
                "postgres://u@h/db?connect_timeout=5".to_string(),
                Some("s1".to_string())
            )
        );
        assert_eq!(
            take_schema("postgres://u@h/db?snapgraph_schema=s1"),
            ("postgres://u@h/db".to_string(), Some("s1".to_string()))
        );
        assert_eq!(
            take_schema("postgres://u@h/db"),
            ("postgres://u@h/db".to_string(), None)
        );
    }
}
