//! Deleted and overwritten branch tips, kept for a grace period.
//!
//! `branch -d`/`-D` and `sync --force` (when it moves a ref to a commit that does not
//! descend from its old value) keep the tip they drop under a ref
//! `trash/SECONDS/heads/NAME` (or `.../tags/NAME`), SECONDS being the Unix time of the
//! drop (the CLI reads the clock; the core and stores stay clock-free). Such refs are
//! ordinary refs to garbage collection, so the commits stay in the store and in
//! the store's reflog of the original ref, and can be brought back with
//! `snapgraph branch NAME --at ID`. `gc` first drops trash refs older than the grace
//! period (`--prune=WHEN`, else the config's `gc.grace`, else [`DEFAULT_GRACE`]),
//! then collects; `gc --dry-run` lists what would go.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use snapgraph::{ObjectId, SnapshotGraph};
use snapgraph_store::{RefUpdate, Store, StoreError};

use crate::error::{CliError, Result};

/// Prefix of the refs that keep dropped tips.
pub const TRASH: &str = "trash/";
/// The grace period when neither `--prune` nor `gc.grace` says otherwise: 14 days.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(14 * 24 * 3600);

/// One kept tip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trashed {
    /// The trash ref (`trash/SECONDS/heads/NAME`).
    pub trash_ref: String,
    /// The ref it was (`heads/NAME`).
    pub original: String,
    /// The commit kept.
    pub id: ObjectId,
    /// When it was dropped (Unix seconds).
    pub dropped_at: u64,
}

/// Now, in Unix seconds.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Keeps `id`, the value `original` (`heads/NAME`) held, under a new trash ref, and
/// returns that ref's name.
pub fn keep(store: &dyn Store, original: &str, id: ObjectId, at: u64) -> Result<String> {
    for n in 0..100u32 {
        let stamp = if n == 0 {
            at.to_string()
        } else {
            format!("{at}.{n}")
        };
        let name = format!("{TRASH}{stamp}/{original}");
        match store.update_refs(
            &[RefUpdate::new(name.clone(), None, Some(id))],
            &format!("kept {original} at {id}"),
        ) {
            Ok(()) => return Ok(name),
            Err(StoreError::RefConflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(CliError::Usage(format!(
        "cannot keep {original} at {id}: too many trash refs for second {at}"
    )))
}

/// Every kept tip, oldest first.
pub fn list(store: &dyn Store) -> Result<Vec<Trashed>> {
    let mut out = Vec::new();
    for (name, id) in store.list_refs(TRASH)? {
        let Some((stamp, original)) = name[TRASH.len()..].split_once('/') else {
            continue;
        };
        let secs = stamp.split('.').next().and_then(|s| s.parse::<u64>().ok());
        let Some(dropped_at) = secs else { continue };
        out.push(Trashed {
            trash_ref: name.clone(),
            original: original.to_string(),
            id,
            dropped_at,
        });
    }
    out.sort_by(|a, b| (a.dropped_at, &a.trash_ref).cmp(&(b.dropped_at, &b.trash_ref)));
    Ok(out)
}

/// The grace period a `--prune` value or `gc.grace` names: `now` (none), `never`
/// (`None`: keep forever), or a number followed by `d`, `h`, `m` or `s`.
pub fn parse_grace(text: &str) -> Result<Option<Duration>> {
    let t = text.trim();
    match t {
        "now" => return Ok(Some(Duration::ZERO)),
        "never" => return Ok(None),
        _ => {}
    }
    let bad = || {
        CliError::Usage(format!(
            "grace period {text:?}: expected now, never or a duration like 14d, 12h, 30m, 90s"
        ))
    };
    let (number, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let secs = match unit {
        "d" => n.checked_mul(86_400),
        "h" => n.checked_mul(3_600),
        "m" => n.checked_mul(60),
        "s" => Some(n),
        _ => None,
    }
    .ok_or_else(bad)?;
    Ok(Some(Duration::from_secs(secs)))
}

/// The kept tips whose grace period (`None`: forever) ended by `now`.
pub fn expired(all: &[Trashed], grace: Option<Duration>, now: u64) -> Vec<Trashed> {
    let Some(grace) = grace else {
        return Vec::new();
    };
    all.iter()
        .filter(|t| now.saturating_sub(t.dropped_at) >= grace.as_secs())
        .cloned()
        .collect()
}

/// Deletes the trash refs of `entries` (each only if it still holds its id).
pub fn drop_refs(store: &dyn Store, entries: &[Trashed]) -> Result<()> {
    for t in entries {
        match store.delete_ref(&t.trash_ref, t.id, "gc: grace period over") {
            Ok(()) | Err(StoreError::RefConflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Whether a branch or snapshot other than `except` reaches `tip`.
pub fn reached_elsewhere(store: &dyn Store, tip: ObjectId, except: &str) -> Result<bool> {
    let mut refs = store.list_refs("heads/")?;
    refs.extend(store.list_refs("tags/")?);
    for (name, id) in refs {
        if name != except && SnapshotGraph::is_ancestor(tip, [id], store)? {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_periods_parse() {
        assert_eq!(parse_grace("now").unwrap(), Some(Duration::ZERO));
        assert_eq!(parse_grace("never").unwrap(), None);
        assert_eq!(parse_grace("14d").unwrap(), Some(DEFAULT_GRACE));
        assert_eq!(parse_grace("90s").unwrap(), Some(Duration::from_secs(90)));
        for bad in ["", "d", "14", "1w", "-1d", "99999999999999999999d"] {
            assert!(parse_grace(bad).is_err(), "{bad}");
        }
    }
}
