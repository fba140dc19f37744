//! Workspace paths: absolute, `/`-separated, normalized, validated; and the rule for
//! one name (a path component, a tree entry's name), which tree decoding shares.
//!
//! Also reachable as `workspace::path`.

use crate::limits::{MAX_DEPTH, MAX_NAME_LEN, MAX_PATH_LEN};

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid path {path:?}: {reason}")]
pub struct PathError {
    /// The path as given.
    pub path: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// Splits an absolute path into validated components.
///
/// Repeated `/` and `.` components are dropped and `..` removes the previous component;
/// a `..` that would climb above `/` is refused, as are relative paths, NUL bytes,
/// names longer than 255 bytes, paths longer than 4096 bytes and more than 256
/// components. `/` itself is the empty list.
pub fn parse(path: &str) -> Result<Vec<String>, PathError> {
    let bad = |reason| PathError {
        path: path.to_owned(),
        reason,
    };
    if !path.starts_with('/') {
        return Err(bad("paths must be absolute (start with /)"));
    }
    if path.len() > MAX_PATH_LEN {
        return Err(bad("path longer than 4096 bytes"));
    }
    if path.as_bytes().contains(&0) {
        return Err(bad("path contains NUL"));
    }
    let mut out: Vec<String> = Vec::new();
    for comp in path.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                if out.pop().is_none() {
                    return Err(bad("'..' climbs above the root"));
                }
            }
            name => {
                check_name(name).map_err(bad)?;
                out.push(name.to_owned());
            }
        }
        if out.len() > MAX_DEPTH {
            return Err(bad("more than 256 components"));
        }
    }
    Ok(out)
}

/// The normalized string form of components.
pub fn join(comps: &[String]) -> String {
    if comps.is_empty() {
        return "/".to_owned();
    }
    let mut s = String::new();
    for c in comps {
        s.push('/');
        s.push_str(c);
    }
    s
}

/// Checks a name used in a tree entry or a path component.
pub(crate) fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("empty name");
    }
    if name == "." || name == ".." {
        return Err("name is . or ..");
    }
    if name.len() > MAX_NAME_LEN {
        return Err("name longer than 255 bytes");
    }
    if name.bytes().any(|b| b == b'/' || b == 0) {
        return Err("name contains / or NUL");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes() {
        assert_eq!(parse("/").unwrap(), Vec::<String>::new());
        assert_eq!(parse("//a/./b//c/").unwrap(), vec!["a", "b", "c"]);
        assert_eq!(parse("/a/b/../c").unwrap(), vec!["a", "c"]);
        assert_eq!(join(&parse("/a//b/").unwrap()), "/a/b");
    }

    #[test]
    fn refuses_bad_paths() {
        for p in ["", "a/b", "/..", "/a/../..", "/a\0b", "relative"] {
            assert!(parse(p).is_err(), "{p:?}");
        }
        assert!(parse(&format!("/{}", "x".repeat(256))).is_err());
        assert!(parse(&"/a".repeat(300)).is_err());
        let e = parse("/../etc").unwrap_err();
        assert_eq!(e.path, "/../etc");
    }
}
