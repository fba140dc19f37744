//! Store passwords at rest (SECURITY.md, "Secrets at rest").
//!
//! A store URL in `.snapgraph/config` never carries a password. `init` given
//! `postgres://user:PASSWORD@host/db` (or a `password=` query parameter) writes the
//! URL without it to the config and the password to `.snapgraph/credentials`, a file
//! created with mode 0600 (`O_CREAT|O_EXCL`, so never through a symlink) and read
//! back whenever the repository opens its store. A credentials file that is a
//! symlink, or that its group or other users may read or write, is refused, as ssh
//! refuses such a private key and libpq such a `.pgpass`. Without one, the
//! PostgreSQL adapter looks where libpq does: `PGPASSWORD`, then `PGPASSFILE` or
//! `~/.pgpass` (only at mode 0600; see `snapgraph_store::open`).
//!
//! Everything the CLI prints names a store by [`redact`]ed URL.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{CliError, IoContext, Result};

/// Name of the credentials file inside `.snapgraph/`.
pub const CREDENTIALS_FILE: &str = "credentials";

/// Where `url`'s authority starts: after a `scheme://` whose scheme holds no `/`,
/// `?` or `#` (anything else is not a URL with an authority, and holds no password).
fn authority_start(url: &str) -> Option<usize> {
    let i = url.find("://")?;
    (!url[..i].contains(['/', '?', '#'])).then_some(i + 3)
}

/// The byte range of the password in `url`'s user info (`scheme://user:PASSWORD@`),
/// if any.
fn userinfo_password(url: &str) -> Option<(usize, usize)> {
    let start = authority_start(url)?;
    let rest = &url[start..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let at = authority.rfind('@')?;
    let colon = authority[..at].find(':')?;
    Some((start + colon + 1, start + at))
}

/// The byte range of a `password=VALUE` query parameter (the whole `password=VALUE`,
/// with the `&` before it, or the `?`'s following `&` when it is the first).
fn query_password(url: &str) -> Option<(usize, usize, usize)> {
    let start = authority_start(url)?;
    let q = start + url[start..].find('?')?;
    let mut at = q + 1;
    for part in url[q + 1..].split('&') {
        let end = at + part.len();
        if part.starts_with("password=") {
            return Some((at, at + "password=".len(), end));
        }
        at = end + 1;
    }
    None
}

/// A `cache:LOCAL|REMOTE` URL as `("cache:LOCAL|", REMOTE)`: passwords are the
/// remote's (the local part is a file path). Any other URL as `("", url)`. A loop,
/// not recursion, over nested prefixes (`open` refuses them; a hostile config may
/// hold thousands).
fn split_cache(url: &str) -> (&str, &str) {
    let mut at = 0;
    while url[at..].starts_with("cache:") {
        match url[at..].find('|') {
            Some(i) => at += i + 1,
            None => break,
        }
    }
    url.split_at(at)
}

/// `url` with any password replaced by `***` (for printing).
pub fn redact(url: &str) -> String {
    let (cache, url) = split_cache(url);
    if !cache.is_empty() {
        return format!("{cache}{}", redact(url));
    }
    let (out, password) = split_password(url);
    if password.is_none() {
        return out;
    }
    let has_user = authority_start(&out).is_some_and(|i| {
        let rest = &out[i..];
        rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())].contains('@')
    });
    if has_user {
        with_password(&out, "***")
    } else {
        let sep = if out.contains('?') { '&' } else { '?' };
        format!("{out}{sep}password=***")
    }
}

/// Splits the password out of `url`: the URL without it and the password as it
/// was written (percent-encoded, ready to be put back with [`with_password`]).
pub fn split_password(url: &str) -> (String, Option<String>) {
    let (cache, url) = split_cache(url);
    if !cache.is_empty() {
        let (rest, password) = split_password(url);
        return (format!("{cache}{rest}"), password);
    }
    let mut out = url.to_string();
    let mut password = None;
    // Every `password=` parameter goes (the last one is the password, as for libpq).
    while let Some((s, v, e)) = query_password(&out) {
        password = Some(out[v..e].to_string());
        // Remove `password=...` and one neighbouring separator.
        let (from, to) = if out.as_bytes().get(e) == Some(&b'&') {
            (s, e + 1)
        } else {
            (s - 1, e)
        };
        out.replace_range(from..to, "");
    }
    if let Some((s, e)) = userinfo_password(&out) {
        password = Some(out[s..e].to_string());
        out.replace_range(s - 1..e, "");
    }
    (out, password)
}

/// `url` (without a password) with `password` (percent-encoded; `@`, `/`, `?`, `#`
/// and `:` are encoded if they appear raw, as they can in a query parameter) in its
/// user info.
/// A URL without a user gets `postgres` as its user, like libpq's default for the
/// test servers we start; a URL that already has a password is returned unchanged.
pub fn with_password(url: &str, password: &str) -> String {
    let (cache, url) = split_cache(url);
    if !cache.is_empty() {
        return format!("{cache}{}", with_password(url, password));
    }
    if userinfo_password(url).is_some() {
        return url.to_string();
    }
    let Some(start) = authority_start(url) else {
        return url.to_string();
    };
    let mut encoded = String::with_capacity(password.len());
    for c in password.chars() {
        match c {
            '@' => encoded.push_str("%40"),
            '/' => encoded.push_str("%2F"),
            '?' => encoded.push_str("%3F"),
            '#' => encoded.push_str("%23"),
            ':' => encoded.push_str("%3A"),
            c => encoded.push(c),
        }
    }
    let password = encoded;
    let rest = &url[start..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{}:{password}{}", &url[..start + at], &url[start + at..]),
        None => format!("{}postgres:{password}@{}", &url[..start], rest),
    }
}

/// Creates the credentials file at `path` holding `password`: mode 0600, refused if
/// anything (a file, a symlink) is already there.
pub fn write_credentials(path: &Path, password: &str) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .at(path)?;
    f.write_all(format!("{password}\n").as_bytes())
        .and_then(|()| f.sync_all())
        .at(path)
}

/// Reads the credentials file at `path` if there is one; refuses a symlink and a
/// file its group or other users may access.
pub fn read_credentials(path: &Path) -> Result<Option<String>> {
    let link = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CliError::io(path, e)),
    };
    if !link.file_type().is_file() {
        return Err(CliError::InsecureCredentials {
            path: path.to_path_buf(),
            reason: "not a regular file (a symlink?)".to_string(),
        });
    }
    let mut f = std::fs::File::open(path).at(path)?;
    let m = f.metadata().at(path)?;
    // The file opened must be the one checked (no swap in between).
    if m.ino() != link.ino() || m.dev() != link.dev() {
        return Err(CliError::InsecureCredentials {
            path: path.to_path_buf(),
            reason: "replaced while being opened".to_string(),
        });
    }
    if m.mode() & 0o077 != 0 {
        return Err(CliError::InsecureCredentials {
            path: path.to_path_buf(),
            reason: format!(
                "mode {:04o}: group or others may access it (chmod 600 it)",
                m.mode() & 0o7777
            ),
        });
    }
    let mut text = String::new();
    f.read_to_string(&mut text).at(path)?;
    Ok(Some(text.trim_end_matches(['\n', '\r']).to_string()))
}

/// The credentials file of the repository directory `dot`.
pub fn credentials_path(dot: &Path) -> PathBuf {
    dot.join(CREDENTIALS_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_split_redacted_and_put_back() {
        let url = "postgres://alice:s3cr%40t@db.example:5432/snap?sslmode=disable";
        assert_eq!(
            redact(url),
            "postgres://alice:***@db.example:5432/snap?sslmode=disable"
        );
        let (bare, pw) = split_password(url);
        assert_eq!(
            bare,
            "postgres://alice@db.example:5432/snap?sslmode=disable"
        );
        assert_eq!(pw.as_deref(), Some("s3cr%40t"));
        assert_eq!(with_password(&bare, "s3cr%40t"), url);

        let (bare, pw) = split_password("postgres://h/db?password=x&connect_timeout=5");
        assert_eq!(bare, "postgres://h/db?connect_timeout=5");
        assert_eq!(pw.as_deref(), Some("x"));
        let (bare, pw) = split_password("postgres://h/db?connect_timeout=5&password=x");
        assert_eq!(bare, "postgres://h/db?connect_timeout=5");
        assert_eq!(pw.as_deref(), Some("x"));
        assert_eq!(
            redact("postgres://h/db?password=x"),
            "postgres://h/db?password=***"
        );

        assert_eq!(
            split_password("postgres://bob@h/db"),
            ("postgres://bob@h/db".to_string(), None)
        );
        assert_eq!(
            split_password("sqlite:a:b@c"),
            ("sqlite:a:b@c".to_string(), None)
        );
        assert_eq!(
            with_password("postgres://h/db", "p"),
            "postgres://postgres:p@h/db"
        );
        // A cache URL's password is its remote's; the local path is left alone.
        let cached = "cache:sqlite:/c/a:b@c.db|postgres://bob:s3cret@h/db";
        assert_eq!(
            split_password(cached),
            (
                "cache:sqlite:/c/a:b@c.db|postgres://bob@h/db".to_string(),
                Some("s3cret".to_string())
            )
        );
        assert_eq!(
            redact(cached),
            "cache:sqlite:/c/a:b@c.db|postgres://bob:***@h/db"
        );
        assert_eq!(
            with_password("cache:dir:/c|postgres://bob@h/db", "p"),
            "cache:dir:/c|postgres://bob:p@h/db"
        );
        let nested = format!("{}postgres://u:pw@h/db", "cache:x|".repeat(100_000));
        assert!(redact(&nested).ends_with("|postgres://u:***@h/db"));

        // Found by the `config` fuzz target: a `://` inside the query is no authority.
        let odd = "postgres:/</db?x=5&password=a@b:cstgres://db/snap?c";
        assert_eq!(split_password(odd), (odd.to_string(), None));
        assert_eq!(redact(odd), odd);
    }
}
