//! Recorded external reads on restore: revision pins and drift checks.
//!
//! A run reads things that live outside its workspace. The embedder records each read
//! ([`Workspace::record_read`](crate::Workspace::record_read)); every commit stores the
//! records. On checkout the engine, which does no I/O, hands back a [`Restore`]:
//!
//! - reads with a stable revision are **pins**: the caller serves exactly that
//!   revision, and they are never drift-checked;
//! - under [`DriftPolicy::Strict`] (the default) the other fingerprinted reads form a
//!   [`DriftCheck`] the caller drives by supplying each source's live fingerprint;
//! - under [`DriftPolicy::Off`] nothing is checked and the cached bytes of unpinned
//!   reads are marked stale, so the embedder re-reads them live.
//!
//! Reads with neither a revision nor a fingerprint cannot be verified: their cached
//! bytes are marked stale under both policies.
//!
//! The intended loop, before the restored workspace is first used:
//!
//! ```
//! use std::collections::HashMap;
//! use snapgraph::{CheckoutOptions, CommitOptions, DriftPolicy, ExternalRead, Workspace};
//!
//! let mut ws = Workspace::new();
//! ws.write("/cache/report.csv", b"a,b\n1,2\n")?;
//! ws.record_read(ExternalRead {
//!     source: "s3://bucket/report.csv".into(),
//!     fingerprint: "etag-1".into(),
//!     revision: None,
//!     size: 8,
//!     cached_at: Some("/cache/report.csv".into()),
//! })?;
//! ws.record_read(ExternalRead {
//!     source: "git://repo/README".into(),
//!     fingerprint: "blob-9".into(),
//!     revision: Some("c0ffee".into()),
//!     size: 100,
//!     cached_at: None,
//! })?;
//! let commit = ws.commit(CommitOptions::new())?;
//! let store: HashMap<_, _> = commit.objects().iter().map(|(i, b)| (*i, b.to_vec())).collect();
//!
//! // Somewhere else, later:
//! let live_etag = |source: &str| -> Option<String> {
//!     // HEAD the object; None if it is gone.
//!     (source == "s3://bucket/report.csv").then(|| "etag-1".to_string())
//! };
//! let mut restored = Workspace::new();
//! let restore = restored.checkout_with(commit.id(), &store, CheckoutOptions::new().drift(DriftPolicy::Strict))?;
//! for pin in restore.pins() {
//!     // Serve pin.revision of pin.source from now on.
//!     assert_eq!(pin.revision.as_deref(), Some("c0ffee"));
//! }
//! if let Some(mut check) = restore.into_drift_check() {
//!     for source in check.pending() {
//!         let live = live_etag(&source);
//!         check.supply(&source, live.as_deref());
//!     }
//!     check.finish()?; // Err(ContentDriftError) names every source that moved
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;

use crate::id::ObjectId;
use crate::object::reads::ExternalRead;

/// Whether a restore verifies recorded external reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum DriftPolicy {
    /// Unpinned, fingerprinted reads come back as a [`DriftCheck`] to run before use.
    #[default]
    Strict,
    /// No check; cached bytes of unpinned reads are marked stale.
    Off,
}

/// What a checkout hands back about the restored commit's external reads.
///
/// Dropping it skips the default strict drift check: drive it with
/// [`verify`](Self::verify) (or [`into_drift_check`](Self::into_drift_check) and
/// [`DriftCheck::finish`]) before serving the restored workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "dropping a Restore skips its drift check: call .verify(live) or drive .into_drift_check()"]
pub struct Restore {
    pub(crate) commit: ObjectId,
    pub(crate) pins: Vec<ExternalRead>,
    pub(crate) drift: Option<DriftCheck>,
    pub(crate) stale: Vec<String>,
}

impl Restore {
    pub(crate) fn new(commit: ObjectId, reads: &[ExternalRead], policy: DriftPolicy) -> Self {
        let mut pins = Vec::new();
        let mut expected = BTreeMap::new();
        let mut stale = Vec::new();
        for r in reads {
            if r.revision.is_some() {
                pins.push(r.clone());
            } else if !r.fingerprint.is_empty() && policy == DriftPolicy::Strict {
                expected.insert(
                    r.source.clone(),
                    (r.fingerprint.clone(), r.cached_at.clone()),
                );
            } else if let Some(p) = &r.cached_at {
                stale.push(p.clone());
            }
        }
        stale.sort();
        stale.dedup();
        let drift = (!expected.is_empty()).then(|| DriftCheck {
            commit,
            expected,
            live: BTreeMap::new(),
        });
        Self {
            commit,
            pins,
            drift,
            stale,
        }
    }

    /// The restored commit.
    pub fn commit(&self) -> ObjectId {
        self.commit
    }

    /// Reads recorded with a revision: serve exactly these revisions.
    pub fn pins(&self) -> &[ExternalRead] {
        &self.pins
    }

    /// The revision to serve for `source`, if it is pinned.
    pub fn revision_for(&self, source: &str) -> Option<&str> {
        self.pins
            .iter()
            .find(|r| r.source == source)
            .and_then(|r| r.revision.as_deref())
    }

    /// The drift check to run before first use, if any read needs one.
    pub fn drift_check(&self) -> Option<&DriftCheck> {
        self.drift.as_ref()
    }

    /// Takes the drift check to drive it.
    pub fn into_drift_check(self) -> Option<DriftCheck> {
        self.drift
    }

    /// Runs the whole drift check in one call: `live(source)` returns the source's
    /// live fingerprint (`None`: it is gone). `Ok` when nothing needs a check or
    /// nothing moved; else the [`ContentDriftError`] naming every source that moved.
    /// Read [`pins`](Self::pins) and [`stale`](Self::stale) first if you need them.
    ///
    /// ```
    /// # use snapgraph::{CheckoutPolicy, CommitOptions, Workspace};
    /// # let mut ws = Workspace::new();
    /// # let c = ws.commit(CommitOptions::new())?;
    /// # let id = c.id();
    /// # let store: std::collections::HashMap<_, _> = c.into_objects().into_iter().collect();
    /// let mut restored = Workspace::new();
    /// restored
    ///     .checkout(id, &store, CheckoutPolicy::default())?
    ///     .verify(|_source| None)?; // nothing recorded: nothing to check
    /// # Ok::<(), snapgraph::Error>(())
    /// ```
    pub fn verify(
        self,
        mut live: impl FnMut(&str) -> Option<String>,
    ) -> Result<(), ContentDriftError> {
        let Some(mut check) = self.drift else {
            return Ok(());
        };
        for source in check.pending() {
            let fingerprint = live(&source);
            check.supply(&source, fingerprint.as_deref());
        }
        check.finish()
    }

    /// Workspace paths whose cached bytes must be re-read live (also available as
    /// [`Workspace::stale_paths`](crate::Workspace::stale_paths)).
    pub fn stale(&self) -> &[String] {
        &self.stale
    }
}

/// A check that the outside world has not moved since the snapshot, driven by the
/// caller: supply each source's live fingerprint, in any order or in one batch, then
/// [`finish`](Self::finish).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a drift check proves nothing until it is finished"]
pub struct DriftCheck {
    commit: ObjectId,
    /// source -> (snapshot fingerprint, cached path)
    expected: BTreeMap<String, (String, Option<String>)>,
    /// source -> live fingerprint (None: the source is gone)
    live: BTreeMap<String, Option<String>>,
}

impl DriftCheck {
    /// Sources not yet supplied, sorted.
    pub fn pending(&self) -> Vec<String> {
        self.expected
            .keys()
            .filter(|s| !self.live.contains_key(*s))
            .cloned()
            .collect()
    }

    /// Every source the check covers, with its snapshot fingerprint.
    pub fn expected(&self) -> impl Iterator<Item = (&str, &str)> {
        self.expected
            .iter()
            .map(|(s, (f, _))| (s.as_str(), f.as_str()))
    }

    /// Supplies the live fingerprint of `source` (`None`: it no longer exists).
    /// Returns false, and records nothing, for a source the check does not cover.
    pub fn supply(&mut self, source: &str, live: Option<&str>) -> bool {
        if !self.expected.contains_key(source) {
            return false;
        }
        self.live.insert(source.to_owned(), live.map(str::to_owned));
        true
    }

    /// Supplies many sources at once; returns how many the check covers.
    pub fn supply_all<'a>(
        &mut self,
        batch: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> usize {
        batch
            .into_iter()
            .filter(|(s, l)| self.supply(s, *l))
            .count()
    }

    /// Succeeds when every source was supplied and none moved.
    pub fn finish(self) -> Result<(), ContentDriftError> {
        let mut drifted = Vec::new();
        let mut unchecked = Vec::new();
        for (source, (snapshot, cached_at)) in &self.expected {
            match self.live.get(source) {
                None => unchecked.push(source.clone()),
                Some(live) if live.as_deref() != Some(snapshot.as_str()) => {
                    drifted.push(DriftedSource {
                        source: source.clone(),
                        snapshot: snapshot.clone(),
                        live: live.clone(),
                        cached_at: cached_at.clone(),
                    })
                }
                Some(_) => {}
            }
        }
        if drifted.is_empty() && unchecked.is_empty() {
            Ok(())
        } else {
            Err(ContentDriftError {
                commit: self.commit,
                drifted,
                unchecked,
            })
        }
    }
}

/// One external source that changed since the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftedSource {
    /// The source URI.
    pub source: String,
    /// Its fingerprint when the snapshot was taken.
    pub snapshot: String,
    /// Its live fingerprint, or `None` if it no longer exists.
    pub live: Option<String>,
    /// Where the snapshot cached its bytes, if it did.
    pub cached_at: Option<String>,
}

/// The outside world moved (or was not fully checked) since the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("external content drifted since commit {commit}: {}", describe(.drifted, .unchecked))]
pub struct ContentDriftError {
    /// The restored commit.
    pub commit: ObjectId,
    /// Every source whose live fingerprint differs.
    pub drifted: Vec<DriftedSource>,
    /// Sources whose live fingerprint was never supplied.
    pub unchecked: Vec<String>,
}

fn describe(drifted: &[DriftedSource], unchecked: &[String]) -> String {
    let mut parts: Vec<String> = drifted
        .iter()
        .map(|d| {
            format!(
                "{} (snapshot {}, live {})",
                d.source,
                d.snapshot,
                d.live.as_deref().unwrap_or("<gone>")
            )
        })
        .collect();
    parts.extend(unchecked.iter().map(|s| format!("{s} (not checked)")));
    parts.join(", ")
}
