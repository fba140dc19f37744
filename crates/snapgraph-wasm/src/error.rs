//! Errors at the boundary: every engine error becomes a JavaScript `Error` whose
//! `message` names the object id or path and whose `code` is a stable string, the same
//! strings as the Node package's (`crates/snapgraph-node/README.md`, "Errors").
//! Details ride along as properties (`id`, `path`, `commit`) when the error has them.
//! Errors wrapping another take the inner error's code.

use snapgraph::LimitError;
use snapgraph::{
    CheckoutError, CommitError, ContentDriftError, FsError, GraphError, ObjectError, ObjectId,
    ParseIdError, PathError, SnapshotError,
};

/// What a JavaScript caller sees of an error: a stable code, the message, and the
/// object id, path or commit it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// The stable `code` string (the README lists them).
    pub code: &'static str,
    /// The human message (the Rust error's `Display`).
    pub message: String,
    /// The object the error is about, if one.
    pub id: Option<ObjectId>,
    /// The workspace path the error is about, if one.
    pub path: Option<String>,
    /// The commit the error is about, if one.
    pub commit: Option<ObjectId>,
}

impl Described {
    /// A bare error with a code and a message.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            id: None,
            path: None,
            commit: None,
        }
    }

    fn with_id(mut self, id: ObjectId) -> Self {
        self.id = Some(id);
        self
    }

    pub(crate) fn with_path(mut self, path: &str) -> Self {
        self.path = Some(path.to_owned());
        self
    }

    fn with_commit(mut self, commit: ObjectId) -> Self {
        self.commit = Some(commit);
        self
    }
}

/// An argument of the wrong type or shape (not an engine error).
pub const INVALID_ARGUMENT: &str = "INVALID_ARGUMENT";
/// A variant added to a Rust error after the README's table (the message says what).
pub const OTHER: &str = "OTHER";

/// Describes an object error.
pub fn object(e: &ObjectError) -> Described {
    let code = match e {
        ObjectError::NotFound { .. } => "NOT_FOUND",
        ObjectError::Source { .. } => "BACKEND",
        ObjectError::WrongKind { .. } => "WRONG_KIND",
        ObjectError::UnsupportedVersion { .. } => "UNSUPPORTED_VERSION",
        ObjectError::TooLarge { .. } => "LIMIT",
        // Corrupt (hash mismatch), UnknownKind, Malformed and anything added later.
        _ => "CORRUPT",
    };
    Described::new(code, e.to_string()).with_id(e.id())
}

/// Describes a file-system error of a workspace.
pub fn fs(e: &FsError) -> Described {
    let (code, path): (&'static str, Option<&str>) = match e {
        FsError::InvalidPath(p) => return path_error(p),
        FsError::NotFound { path } => ("NOT_FOUND", Some(path)),
        FsError::NotADirectory { path } => ("NOT_A_DIRECTORY", Some(path)),
        FsError::IsADirectory { path } => ("IS_A_DIRECTORY", Some(path)),
        FsError::IsASymlink { path } => ("IS_A_SYMLINK", Some(path)),
        FsError::NotASymlink { path } => ("NOT_A_SYMLINK", Some(path)),
        FsError::AlreadyExists { path } => ("ALREADY_EXISTS", Some(path)),
        FsError::Root { .. } => ("INVALID_OPERATION", Some("/")),
        FsError::IntoItself { from, .. } => ("INVALID_OPERATION", Some(from)),
        FsError::InvalidMode { path, .. } | FsError::InvalidTarget { path, .. } => {
            (INVALID_ARGUMENT, Some(path))
        }
        FsError::NotLoaded { path } => ("NOT_LOADED", Some(path)),
        _ => (OTHER, None),
    };
    let d = Described::new(code, e.to_string());
    match path {
        Some(p) => d.with_path(p),
        None => d,
    }
}

/// Describes a refused path.
pub fn path_error(e: &PathError) -> Described {
    Described::new("INVALID_PATH", e.to_string()).with_path(&e.path)
}

/// Describes a commit error.
pub fn commit(e: &CommitError) -> Described {
    match e {
        CommitError::Parent(o) => object(o),
        CommitError::UnknownParent { id } => {
            Described::new("UNKNOWN_PARENT", e.to_string()).with_id(*id)
        }
        CommitError::DuplicateParent { id } => {
            Described::new(INVALID_ARGUMENT, e.to_string()).with_id(*id)
        }
        CommitError::TooManyParents { .. } => Described::new("LIMIT", e.to_string()),
        CommitError::TooLarge { .. } => Described::new("LIMIT", e.to_string()),
        CommitError::ContentNotLoaded { path, id } => Described::new("NOT_LOADED", e.to_string())
            .with_path(path)
            .with_id(*id),
        _ => Described::new(OTHER, e.to_string()),
    }
}

/// Describes a checkout error.
pub fn checkout(e: &CheckoutError) -> Described {
    match e {
        CheckoutError::Object(o) => object(o),
        CheckoutError::Fs(f) => fs(f),
        CheckoutError::Capabilities { commit, .. } => {
            Described::new("CAPABILITY", e.to_string()).with_commit(*commit)
        }
        CheckoutError::FeatureRequired { commit, path, .. } => {
            Described::new("CAPABILITY", e.to_string())
                .with_commit(*commit)
                .with_path(path)
        }
        CheckoutError::Limit(l) => limit(l),
        _ => Described::new(OTHER, e.to_string()),
    }
}

/// Describes a limit a checkout or a diff ran into.
pub fn limit(e: &LimitError) -> Described {
    match e {
        LimitError::Exceeded { commit, .. } => {
            Described::new("LIMIT", e.to_string()).with_commit(*commit)
        }
        LimitError::TooDeep { path } | LimitError::PathTooLong { path } => {
            Described::new("LIMIT", e.to_string()).with_path(path)
        }
        _ => Described::new("LIMIT", e.to_string()),
    }
}

/// Describes a graph query error.
pub fn graph(e: &GraphError) -> Described {
    match e {
        GraphError::Object(o) => object(o),
        GraphError::Generation { id, .. } => Described::new("CORRUPT", e.to_string()).with_id(*id),
        GraphError::Limit(l) => limit(l),
        _ => Described::new(OTHER, e.to_string()),
    }
}

/// Describes a refused packed snapshot.
pub fn snapshot(e: &SnapshotError) -> Described {
    let code = match e {
        SnapshotError::Checkout(c) => return checkout(c),
        SnapshotError::NotASnapshot => "CORRUPT",
        SnapshotError::SnapshotTooNew { .. } => "SNAPSHOT_TOO_NEW",
        SnapshotError::Corrupt { .. } => "CORRUPT",
        SnapshotError::NotAuthentic => "NOT_AUTHENTIC",
        SnapshotError::KeyRequired => "KEY_REQUIRED",
        SnapshotError::NotKeyed => "NOT_KEYED",
        SnapshotError::TooLarge { .. } => "LIMIT",
        SnapshotError::Io(_) => "BACKEND",
        _ => OTHER,
    };
    Described::new(code, e.to_string())
}

/// Describes a failed drift check.
pub fn drift(e: &ContentDriftError) -> Described {
    Described::new("DRIFT", e.to_string()).with_commit(e.commit)
}

/// Describes a string that is not an object id.
pub fn parse_id(input: &str, e: &ParseIdError) -> Described {
    let shown: String = input.chars().take(80).collect();
    Described::new("INVALID_ID", format!("{shown:?} is not an object id: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use snapgraph::{CheckoutPolicy, CommitOptions, Workspace};
    use std::collections::HashMap;

    #[test]
    fn object_errors_carry_the_id_and_a_code_per_family() {
        let id = ObjectId::hash_stored(b"x");
        let d = object(&ObjectError::NotFound { id });
        assert_eq!((d.code, d.id), ("NOT_FOUND", Some(id)));
        assert!(d.message.contains(&id.to_hex()));
        let actual = ObjectId::hash_stored(b"y");
        assert_eq!(object(&ObjectError::Corrupt { id, actual }).code, "CORRUPT");
    }

    #[test]
    fn a_checkout_from_a_tampered_store_is_corrupt_and_names_the_object() {
        let mut ws = Workspace::new();
        ws.write("/a.txt", b"hello").unwrap();
        let c = ws.commit(CommitOptions::new()).unwrap();
        let id = c.id();
        let mut store: HashMap<ObjectId, Vec<u8>> = c.into_objects().into_iter().collect();
        let last = store.get_mut(&id).unwrap().last_mut().unwrap();
        *last ^= 1;
        let e = Workspace::new()
            .checkout(id, &store, CheckoutPolicy::default())
            .unwrap_err();
        let d = checkout(&e);
        assert_eq!((d.code, d.id), ("CORRUPT", Some(id)));
    }

    #[test]
    fn path_errors_name_the_path() {
        let mut ws = Workspace::new();
        let d = fs(&ws.write("relative", b"x").unwrap_err());
        assert_eq!(
            (d.code, d.path.as_deref()),
            ("INVALID_PATH", Some("relative"))
        );
        let d = fs(&ws.read("/missing").unwrap_err());
        assert_eq!((d.code, d.path.as_deref()), ("NOT_FOUND", Some("/missing")));
    }

    #[test]
    fn snapshot_errors_map_to_their_codes() {
        let ws = Workspace::new();
        let mut bytes = ws.snapshot().unwrap();
        assert_eq!(
            snapshot(&Workspace::from_snapshot(b"nope").unwrap_err()).code,
            "CORRUPT"
        );
        let keyed = ws.snapshot_keyed(&[7; 32]).unwrap();
        assert_eq!(
            snapshot(&Workspace::from_snapshot(&keyed).unwrap_err()).code,
            "KEY_REQUIRED"
        );
        assert_eq!(
            snapshot(&Workspace::from_snapshot_keyed(&keyed, &[8; 32]).unwrap_err()).code,
            "NOT_AUTHENTIC"
        );
        let n = bytes.len();
        bytes[n / 2] ^= 0x40;
        assert_eq!(
            snapshot(&Workspace::from_snapshot(&bytes).unwrap_err()).code,
            "CORRUPT"
        );
    }
}
