//! Stopping a long store operation at its next safe point.
//!
//! A [`Cancel`] is a shared flag the caller sets (from a signal handler's thread, a
//! UI, a timeout) and long operations look at between steps: a [`crate::sync()`]
//! between batches of objects and discovery levels, a collection
//! ([`crate::gc::collect_with`]) while it waits for writers and between batches of
//! deletions. A cancelled operation ends as it would on a store error at that point,
//! with every protocol ref it made taken back: a sync releases its writer's lease
//! (what it wrote stays, unreferenced until the next collection, and shortens the
//! next attempt); a collection ends its sweep, so writers are not left waiting for
//! a dead one (what it deleted is gone, referrers before what they reference, so
//! every held object's closure is still complete). Killing the process there
//! instead (`SIGKILL`) leaves the lease or the sweep marker for
//! [`crate::gc::break_leases`] or [`crate::gc::clear_marker`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A flag that stops the operations given a clone of it (see the module docs).
/// The default is never set.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A flag not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the flag: every operation holding a clone stops at its next safe point.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether the flag is set.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
