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
/// - `memory:`: an empty in-memory store (for tests and dry runs).
pub fn open(url: &str) -> Result<Box<dyn Store>, StoreError> {
    if let Some(path) = url.strip_prefix("sqlite:") {
        return Ok(Box::new(crate::sqlite::SqliteStore::open(path)?));
    }
    if let Some(path) = url.strip_prefix("dir:") {
        return Ok(Box::new(crate::dir::DirStore::open(path)?));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let (url, schema) = take_schema(url);
        let options = crate::postgres::PgOptions {
            schema,
            ..Default::default()
        };
        return Ok(Box::new(crate::postgres::PgStore::connect_with(
            &url, options,
        )?));
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

/// Splits `snapgraph_schema=NAME` out of a URL's query string.
fn take_schema(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut schema = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.strip_prefix("snapgraph_schema=") {
            Some(name) => {
                schema = Some(name.to_string());
                false
            }
            None => true,
        })
        .collect();
    let url = if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    (url, schema)
}

#[cfg(test)]
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
