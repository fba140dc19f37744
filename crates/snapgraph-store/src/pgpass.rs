//! Where the PostgreSQL adapter finds a password the URL does not carry, following
//! libpq's conventions: `PGPASSWORD`, then the password file named by `PGPASSFILE`
//! (default `~/.pgpass`), whose lines are `host:port:database:user:password` (`*`
//! matches anything, `\:` and `\\` escape, `#` starts a comment; the first match
//! wins). Unlike libpq, which skips a password file others can read with a warning,
//! such a file is an error ([`PassfileError::Insecure`]): a library cannot warn, and
//! ignoring it would fail later with a less useful authentication error.
//!
//! `PGSERVICE`/`pg_service.conf` are not supported: the driver (`tokio-postgres`)
//! does not read them.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why a password file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PassfileError {
    /// Its group or other users may access it (or it is not a regular file).
    #[error("{}: refusing a password file with mode {mode:04o}: group or others may access it (chmod 600 it)", .path.display())]
    Insecure {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// It could not be read.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// What a connection goes to, as a password file matches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target<'a> {
    /// Host name (`localhost` for a Unix socket).
    pub host: &'a str,
    /// Port.
    pub port: u16,
    /// Database.
    pub database: &'a str,
    /// User.
    pub user: &'a str,
}

/// The password for `target`: `PGPASSWORD` if set, else the first matching line of
/// the password file (`PGPASSFILE` or `~/.pgpass`) if there is one.
pub fn lookup(target: &Target<'_>) -> Result<Option<String>, PassfileError> {
    if let Some(p) = std::env::var_os("PGPASSWORD") {
        if let Some(p) = p.to_str().filter(|p| !p.is_empty()) {
            return Ok(Some(p.to_string()));
        }
    }
    let path = match std::env::var_os("PGPASSFILE") {
        Some(p) => PathBuf::from(p),
        None => match std::env::var_os("HOME") {
            Some(h) => Path::new(&h).join(".pgpass"),
            None => return Ok(None),
        },
    };
    from_file(&path, target)
}

/// The first line of the password file at `path` matching `target`; `None` when
/// there is no such file or line. Refuses a file others may access.
pub fn from_file(path: &Path, target: &Target<'_>) -> Result<Option<String>, PassfileError> {
    let io = |source| PassfileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let m = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    if !m.is_file() || m.mode() & 0o077 != 0 {
        return Err(PassfileError::Insecure {
            path: path.to_path_buf(),
            mode: m.mode() & 0o7777,
        });
    }
    let text = std::fs::read_to_string(path).map_err(io)?;
    Ok(find(&text, target))
}

/// The password of the first line of `text` (a password file) matching `target`.
pub fn find(text: &str, target: &Target<'_>) -> Option<String> {
    let port = target.port.to_string();
    let wanted = [target.host, port.as_str(), target.database, target.user];
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = split_fields(line);
        if fields.len() < 5 {
            continue;
        }
        let matches = fields[..4]
            .iter()
            .zip(wanted)
            .all(|(f, w)| f == "*" || f == w);
        if matches {
            return Some(fields[4..].join(":"));
        }
    }
    None
}

/// Splits a password-file line at unescaped `:`, undoing `\:` and `\\`.
fn split_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n) => fields.last_mut().map_or((), |f| f.push(n)),
                None => fields.last_mut().map_or((), |f| f.push('\\')),
            },
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().map_or((), |f| f.push(c)),
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn target() -> Target<'static> {
        Target {
            host: "db.example",
            port: 5432,
            database: "snap",
            user: "alice",
        }
    }

    #[test]
    fn lines_match_like_libpq() {
        let text = "# comment\nother:5432:snap:alice:no\n*:5432:snap:alice:pa\\:ss:word\n*:*:*:*:fallback\n";
        assert_eq!(find(text, &target()).as_deref(), Some("pa:ss:word"));
        assert_eq!(
            find("*:*:*:bob:x\n", &target()),
            None,
            "another user's line"
        );
        assert_eq!(
            find("db.example:5432:snap:alice:a\\\\b\n", &target()).as_deref(),
            Some("a\\b")
        );
    }

    #[test]
    fn a_readable_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pgpass");
        std::fs::write(&p, "*:*:*:*:secret\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = from_file(&p, &target()).unwrap_err();
        assert!(
            matches!(e, PassfileError::Insecure { mode: 0o644, .. }),
            "{e}"
        );
        assert!(!e.to_string().contains("secret"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(from_file(&p, &target()).unwrap().as_deref(), Some("secret"));
        assert_eq!(
            from_file(&dir.path().join("none"), &target()).unwrap(),
            None
        );
    }
}
