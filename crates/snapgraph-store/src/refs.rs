//! Checks shared by every adapter's `update_refs`.

use snapgraph::ObjectId;

use crate::error::StoreError;
use crate::store::{validate_ref_name, RefUpdate};

/// Validates a batch of updates against the current values `current` reports: every
/// name valid, no name twice, every `expected` matching. Adapters call it inside
/// their lock or transaction, then apply the changing updates.
pub fn apply_updates(
    updates: &[RefUpdate],
    mut current: impl FnMut(&str) -> Result<Option<ObjectId>, StoreError>,
) -> Result<(), StoreError> {
    check_batch(updates)?;
    for u in updates {
        let actual = current(&u.name)?;
        if actual != u.expected {
            return Err(StoreError::RefConflict {
                name: u.name.clone(),
                expected: u.expected,
                actual,
            });
        }
    }
    Ok(())
}

/// Validates names and refuses a name appearing twice in one batch (its outcome would
/// depend on the order an adapter applies them).
pub fn check_batch(updates: &[RefUpdate]) -> Result<(), StoreError> {
    for (i, u) in updates.iter().enumerate() {
        validate_ref_name(&u.name)?;
        if updates[..i].iter().any(|v| v.name == u.name) {
            return Err(StoreError::InvalidRefName {
                name: u.name.clone(),
                reason: "named twice in one atomic update",
            });
        }
    }
    Ok(())
}

/// Whether moves of `name` go to the reflog: every ref's do, except writers'
/// leases (`snapgraph/lease/…`) and waits for one (`snapgraph/wait/…`), which come
/// and go with commits and would otherwise add rows to every commit.
pub fn logged(name: &str) -> bool {
    !name.starts_with(crate::gc::LEASES) && !name.starts_with(crate::gc::WAITERS)
}
