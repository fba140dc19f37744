//! Hollow commits: commits kept for their history whose snapshots were let go.
//!
//! A store may hold a commit without its snapshot (its tree, state, capability
//! fingerprint and reads objects) when it records the commit as **hollow**: the
//! ref `snapgraph/hollow/ID` (`ID` the commit's 64 hex digits) holding the commit's
//! id (docs/FORMAT.md, "Hollow commits"). Everything about history keeps working:
//! the commit object stays, so its parents, generation, metadata and ancestry are
//! there for `log` and for ancestor checks; only a checkout fails, with
//! [`RepoError::Pruned`](crate::RepoError::Pruned).
//!
//! Two things make commits hollow:
//! - **Retention** ([`Repo::retain_history`](crate::Repo::retain_history)): old
//!   commits of a long branch lose their trees at the next garbage collection.
//! - **Shallow sync** ([`SyncOptions::depth`](crate::SyncOptions::depth)): commits
//!   deeper than the depth are sent as commit objects only.
//!
//! The store invariant "holding an object means holding its closure" becomes
//! "holding an object means holding its closure, except below hollow commits'
//! snapshots": every walker ([`crate::gc()`]'s marking, [`crate::verify()`],
//! [`crate::sync()`]) follows a hollow commit's parents and nothing else of it.
//! A record is written before a commit can lose its snapshot (retention writes it
//! and a later collection deletes; a shallow sync writes it before the commit
//! object), and removed only after the snapshot is back (a deeper sync removes it
//! in the update that publishes the filled-in trees), so a store never holds a
//! commit without its snapshot and without a record. A record whose commit the
//! store no longer holds is dropped by the next collection.

use hashbrown::HashSet;
use snapgraph::ObjectId;

use crate::error::StoreError;
use crate::store::{RefStore, RefUpdate};
use crate::walk::BATCH;

/// Prefix of the refs recording hollow commits.
pub const HOLLOW: &str = "snapgraph/hollow/";

/// The ref recording `commit` as hollow.
pub fn hollow_ref(commit: ObjectId) -> String {
    format!("{HOLLOW}{commit}")
}

/// Every commit the store records as hollow (one `list_refs` call).
pub fn hollow_commits(store: &dyn RefStore) -> Result<HashSet<ObjectId>, StoreError> {
    Ok(store
        .list_refs(HOLLOW)?
        .into_iter()
        .filter(|(name, id)| name[HOLLOW.len()..] == id.to_hex())
        .map(|(_, id)| id)
        .collect())
}

/// Whether the store records `commit` as hollow.
pub fn is_hollow(store: &dyn RefStore, commit: ObjectId) -> Result<bool, StoreError> {
    Ok(store.get_ref(&hollow_ref(commit))? == Some(commit))
}

/// Records `commits` as hollow (those already recorded are skipped), in atomic
/// batches. Deletes nothing: the next garbage collection removes what only they
/// reached. Returns how many records were new.
pub fn record(store: &dyn RefStore, commits: &[ObjectId]) -> Result<usize, StoreError> {
    let mut new = 0;
    for batch in commits.chunks(BATCH) {
        loop {
            let known = hollow_commits(store)?;
            let updates: Vec<RefUpdate> = batch
                .iter()
                .filter(|id| !known.contains(*id))
                .map(|id| RefUpdate::new(hollow_ref(*id), None, Some(*id)))
                .collect();
            if updates.is_empty() {
                break;
            }
            match store.update_refs(
                &updates,
                "hollow: snapshot let go (retention or shallow sync)",
            ) {
                Ok(()) => {
                    new += updates.len();
                    break;
                }
                // A concurrent writer recorded one of them: read again.
                Err(StoreError::RefConflict { actual, name, .. })
                    if name.starts_with(HOLLOW)
                        && actual.is_some_and(|a| a.to_hex() == name[HOLLOW.len()..]) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(new)
}

/// The updates deleting the records of `commits` (to go into a publishing update).
pub(crate) fn removal_updates(commits: &[ObjectId]) -> Vec<RefUpdate> {
    commits
        .iter()
        .map(|id| RefUpdate::new(hollow_ref(*id), Some(*id), None))
        .collect()
}
