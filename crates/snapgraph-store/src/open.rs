//! Opening a store from a URL, as the CLI and configuration files name them.

use crate::error::StoreError;
use crate::store::Store;

/// Opens the store a URL names:
///
/// - `sqlite:PATH` (or a path ending in `.db`/`.sqlite`): the embedded default;
/// - `dir:PATH`: loose files under a directory;
/// - `postgres://…` or `postgresql://…`: a PostgreSQL server;
/// - `memory:`: an empty in-memory store (for tests and dry runs).
pub fn open(url: &str) -> Result<Box<dyn Store>, StoreError> {
    if let Some(path) = url.strip_prefix("sqlite:") {
        return Ok(Box::new(crate::sqlite::SqliteStore::open(path)?));
    }
    if let Some(path) = url.strip_prefix("dir:") {
        return Ok(Box::new(crate::dir::DirStore::open(path)?));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Box::new(crate::postgres::PgStore::connect(url)?));
    }
    if url == "memory:" {
        return Ok(Box::new(crate::memory::MemoryStore::new()));
    }
    if url.ends_with(".db") || url.ends_with(".sqlite") {
        return Ok(Box::new(crate::sqlite::SqliteStore::open(url)?));
    }
    Err(StoreError::backend(
        format!("store URL {url:?}"),
        "expected sqlite:PATH, dir:PATH, postgres://… or memory:",
    ))
}
