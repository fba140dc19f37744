//! Revisions in git's syntax, resolved against any store.
//!
//! ```text
//! rev   := base step* [":" PATH]
//! base  := "HEAD" | "@" | NAME | HEX
//! step  := "~" [N] | "^" [N]
//! ```
//!
//! - `HEAD` and `@` are the current branch's tip, or the detached commit
//!   ([`Head::Detached`]);
//! - `NAME` is a ref (`heads/main`, `tags/v1`), a branch or a snapshot name, looked up
//!   in that order; ref names never hold `~`, `^` or `:` (the store refuses them);
//! - `HEX` is a full 64-digit id the store holds, or a prefix of at least
//!   [`MIN_PREFIX`] hex digits naming exactly one commit (a name wins over a prefix
//!   that spells the same; an ambiguous prefix is [`RevError::Ambiguous`], listing
//!   the candidates). A prefix lists the store's ids once, so it costs the store's
//!   size; names and full ids cost one lookup;
//! - `~N` is the N-th first-parent ancestor (`~` is `~1`), `^N` the N-th parent
//!   (`^` is `^1`, `^0` the commit itself);
//! - `:PATH` names a path in the commit ([`resolve_path`]).
//!
//! [`parse`] checks the syntax alone; [`resolve`] and [`resolve_path`] also look the
//! revision up.

use snapgraph::{GraphError, ObjectId, SnapshotGraph};
use snapgraph_store::repo::{HEADS, TAGS};
use snapgraph_store::{Store, StoreError};

/// The fewest hex digits a prefix may have.
pub const MIN_PREFIX: usize = 4;

/// Most `~N`/`^N` steps one revision may take in total (a typo like `~99999999`
/// fails fast instead of walking).
pub const MAX_STEPS: u64 = 1 << 24;

/// Where `HEAD` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// On a branch (its name, without `heads/`); the branch may have no commits yet.
    Branch(String),
    /// At a commit that is not a branch tip (after `checkout ID`).
    Detached(ObjectId),
}

/// The start of a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    /// `HEAD` or `@`.
    Head,
    /// A ref, branch or snapshot name, or hex digits (full id or prefix).
    Name(String),
}

/// One step from a commit to an ancestor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `~N`: N first parents back.
    Ancestor(u64),
    /// `^N`: the N-th parent (1-based; 0 is the commit itself).
    Parent(u64),
}

/// A parsed revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rev {
    /// Where it starts.
    pub base: Base,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// The path after `:`, as written (`None` without `:`).
    pub path: Option<String>,
}

/// Why a revision could not be resolved. Each variant names the revision.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RevError {
    /// Not revision syntax.
    #[error("bad revision {spec:?}: {reason}")]
    Syntax {
        /// The revision as given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// No ref of that name and no object with that id or prefix.
    #[error("unknown revision {rev:?}: not a branch, snapshot, ref or commit id (or unique prefix of at least {MIN_PREFIX} hex digits) in the store")]
    Unknown {
        /// The name or hex digits.
        rev: String,
    },
    /// A prefix that more than one commit's id starts with.
    #[error("ambiguous revision {prefix:?}: it begins the ids of {}", list(.candidates))]
    Ambiguous {
        /// The prefix.
        prefix: String,
        /// Every commit whose id starts with it, sorted.
        candidates: Vec<ObjectId>,
    },
    /// The object named is not a commit.
    #[error("revision {rev:?} names object {id}, which is a {kind}, not a commit")]
    NotACommit {
        /// The revision.
        rev: String,
        /// The object.
        id: ObjectId,
        /// Its kind.
        kind: String,
    },
    /// `HEAD` on a branch without commits.
    #[error("{rev:?}: HEAD is branch {branch}, which has no commits yet")]
    Unborn {
        /// The revision.
        rev: String,
        /// The branch.
        branch: String,
    },
    /// `~N` or `^N` went past a root commit or asked for a parent that is not there.
    #[error("{rev:?}: commit {commit} has no parent {n}")]
    NoParent {
        /// The revision.
        rev: String,
        /// The commit whose parent was asked for.
        commit: ObjectId,
        /// Which parent (1-based).
        n: u64,
    },
    /// `REV:PATH` was needed.
    #[error("{spec:?}: expected REV:PATH (for example main:src/lib.rs)")]
    PathRequired {
        /// The revision as given.
        spec: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A commit on the way could not be read.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

fn list(ids: &[ObjectId]) -> String {
    ids.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `heads/NAME` (a name already under `heads/` kept), as [`snapgraph_store::Repo::branch_ref`].
fn branch_ref(name: &str) -> String {
    if name.starts_with(HEADS) {
        name.to_string()
    } else {
        format!("{HEADS}{name}")
    }
}

fn clip(s: &str) -> String {
    s.chars().take(300).collect()
}

/// Parses `spec` (syntax only: nothing is looked up).
pub fn parse(spec: &str) -> Result<Rev, RevError> {
    let syntax = |reason: &str| RevError::Syntax {
        spec: clip(spec),
        reason: reason.to_string(),
    };
    let (rev, path) = match spec.split_once(':') {
        Some((r, p)) => (r, Some(p.to_string())),
        None => (spec, None),
    };
    let cut = rev.find(['~', '^']).unwrap_or(rev.len());
    let (name, mut rest) = rev.split_at(cut);
    let base = match name {
        "" => return Err(syntax("no revision before `~`, `^` or `:`")),
        "HEAD" | "@" => Base::Head,
        n => Base::Name(n.to_string()),
    };
    let mut steps = Vec::new();
    let mut total: u64 = 0;
    while let Some(c) = rest.chars().next() {
        rest = &rest[1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let n = if digits == 0 {
            1
        } else {
            rest[..digits]
                .parse::<u64>()
                .ok()
                .filter(|n| *n <= MAX_STEPS)
                .ok_or_else(|| syntax("a step count is too large"))?
        };
        rest = &rest[digits..];
        total = total.saturating_add(n);
        if total > MAX_STEPS {
            return Err(syntax("too many steps back"));
        }
        steps.push(match c {
            '~' => Step::Ancestor(n),
            '^' => Step::Parent(n),
            _ => return Err(syntax("expected `~N` or `^N` after the name")),
        });
    }
    Ok(Rev { base, steps, path })
}

/// Resolves `spec` to a commit. A `:PATH` part is refused (use [`resolve_path`]).
pub fn resolve<S: Store + ?Sized>(
    store: &S,
    head: &Head,
    spec: &str,
) -> Result<ObjectId, RevError> {
    let rev = parse(spec)?;
    if rev.path.is_some() {
        return Err(RevError::Syntax {
            spec: clip(spec),
            reason: "a path (`:PATH`) is not expected here".to_string(),
        });
    }
    resolve_parsed(store, head, spec, &rev)
}

/// Resolves `REV:PATH` to the commit and the path in it (absolute, `/` for the
/// root). With `need_path`, a revision without `:PATH` is
/// [`RevError::PathRequired`]; else it means the root.
pub fn resolve_path<S: Store + ?Sized>(
    store: &S,
    head: &Head,
    spec: &str,
    need_path: bool,
) -> Result<(ObjectId, String), RevError> {
    let rev = parse(spec)?;
    if need_path && rev.path.is_none() {
        return Err(RevError::PathRequired { spec: clip(spec) });
    }
    let id = resolve_parsed(store, head, spec, &rev)?;
    let path = format!("/{}", rev.path.as_deref().unwrap_or("").trim_matches('/'));
    Ok((id, path))
}

/// Resolves a parsed revision (`spec` is its text, for errors) in `store`.
pub fn resolve_parsed<S: Store + ?Sized>(
    store: &S,
    head: &Head,
    spec: &str,
    rev: &Rev,
) -> Result<ObjectId, RevError> {
    let mut id = match &rev.base {
        Base::Head => match head {
            Head::Detached(id) => *id,
            Head::Branch(b) => store
                .get_ref(&branch_ref(b))?
                .ok_or_else(|| RevError::Unborn {
                    rev: clip(spec),
                    branch: b.clone(),
                })?,
        },
        Base::Name(name) => lookup(store, name)?,
    };
    for step in &rev.steps {
        let (count, nth) = match *step {
            Step::Ancestor(n) => (n, 1),
            Step::Parent(0) => (0, 1),
            Step::Parent(n) => (1, n),
        };
        for _ in 0..count {
            let c = SnapshotGraph::commit(id, store)?;
            let i = usize::try_from(nth - 1).unwrap_or(usize::MAX);
            id = *c.parents.get(i).ok_or(RevError::NoParent {
                rev: clip(spec),
                commit: id,
                n: nth,
            })?;
        }
    }
    // Every path into here yields a commit: refs and parents name commits, a prefix
    // is matched against commits; a full id is checked.
    if let Err(e) = SnapshotGraph::commit(id, store) {
        let kind = snapgraph_store::ObjectStore::get_many(store, &[id])?
            .into_iter()
            .flatten()
            .next()
            .and_then(|b| b.first().copied())
            .and_then(snapgraph::ObjectKind::from_byte);
        return match kind {
            Some(k) if k != snapgraph::ObjectKind::Commit => Err(RevError::NotACommit {
                rev: clip(spec),
                id,
                kind: k.name().to_string(),
            }),
            _ => Err(e.into()),
        };
    }
    Ok(id)
}

/// Why a command line would read `name` as something else than a branch or
/// snapshot of that name, if it would: `HEAD` and `@` (the current commit), a
/// leading `-` (an option), `..` (git's range). New names are refused for it
/// (`commands::check_new_name`); the store refuses what no ref may hold
/// (`validate_ref_name`).
pub fn misread_as(name: &str) -> Option<&'static str> {
    if name == "HEAD" || name == "@" {
        Some("names the current commit in every revision")
    } else if name.starts_with('-') {
        Some("would be read as an option")
    } else if name.contains("..") {
        Some("holds `..`, a range in git's revision syntax")
    } else {
        None
    }
}

/// A name or hex digits: a ref, branch or snapshot first, then a full id, then a
/// prefix of commit ids.
fn lookup<S: Store + ?Sized>(store: &S, name: &str) -> Result<ObjectId, RevError> {
    let repo_resolve = || -> Result<Option<ObjectId>, RevError> {
        // Refs by name (Repo's rule: as given, `heads/`, `tags/`; reserved refs are
        // never revisions).
        for full in [
            name.to_string(),
            branch_ref(name),
            format!("{}{name}", TAGS),
        ] {
            if snapgraph_store::validate_ref_name(&full).is_err()
                || full.starts_with(snapgraph_store::gc::RESERVED)
            {
                continue;
            }
            if let Some(id) = store.get_ref(&full)? {
                return Ok(Some(id));
            }
        }
        Ok(None)
    };
    if let Some(id) = repo_resolve()? {
        return Ok(id);
    }
    let is_hex = name.bytes().all(|b| b.is_ascii_hexdigit());
    if is_hex && name.len() == 64 {
        if let Ok(id) = ObjectId::from_hex(name) {
            if store.has_many(&[id])?.is_empty() {
                return Ok(id);
            }
        }
    } else if is_hex && (MIN_PREFIX..64).contains(&name.len()) {
        return by_prefix(store, name);
    }
    Err(RevError::Unknown { rev: clip(name) })
}

/// The one commit whose id starts with `prefix` (hex, either case).
fn by_prefix<S: Store + ?Sized>(store: &S, prefix: &str) -> Result<ObjectId, RevError> {
    let lower = prefix.to_ascii_lowercase();
    let mut matches = Vec::new();
    store.for_each_id(&mut |id| {
        if id.to_hex().starts_with(&lower) {
            matches.push(id);
        }
        Ok(())
    })?;
    matches.sort();
    let mut commits: Vec<ObjectId> = matches
        .iter()
        .copied()
        .filter(|id| SnapshotGraph::commit(*id, store).is_ok())
        .collect();
    match commits.len() {
        0 if matches.is_empty() => Err(RevError::Unknown { rev: clip(prefix) }),
        // Only non-commits start with it: resolve_parsed names the kind.
        0 if matches.len() == 1 => Ok(matches[0]),
        0 => Err(RevError::Ambiguous {
            prefix: clip(prefix),
            candidates: matches,
        }),
        1 => Ok(commits.remove(0)),
        _ => Err(RevError::Ambiguous {
            prefix: clip(prefix),
            candidates: commits,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_steps_and_paths() {
        let r = parse("main~2^2:src/lib.rs").unwrap();
        assert_eq!(r.base, Base::Name("main".into()));
        assert_eq!(r.steps, vec![Step::Ancestor(2), Step::Parent(2)]);
        assert_eq!(r.path.as_deref(), Some("src/lib.rs"));
        let r = parse("@^").unwrap();
        assert_eq!(r.base, Base::Head);
        assert_eq!(r.steps, vec![Step::Parent(1)]);
        assert_eq!(parse("HEAD~").unwrap().steps, vec![Step::Ancestor(1)]);
        assert_eq!(parse("HEAD^0").unwrap().steps, vec![Step::Parent(0)]);
        assert_eq!(parse("HEAD:").unwrap().path.as_deref(), Some(""));
    }

    #[test]
    fn refuses_bad_syntax() {
        for bad in ["", "~1", "^", ":x", "main~99999999999999999999", "a~x"] {
            match parse(bad) {
                Err(RevError::Syntax { .. }) => {}
                // `a~x`: `x` after a step is not a step.
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        assert!(matches!(
            parse(&format!("m{}", "~16777216".repeat(2))),
            Err(RevError::Syntax { .. })
        ));
    }
}
