//! Retention: which snapshots and which commits' trees to keep, in restic's terms.
//!
//! A [`KeepPolicy`] says what to keep: the last N, the newest of each of the last
//! N days, ISO weeks and months that have one, and everything within a span of
//! the newest. [`apply`] decides, for candidates with commit times, which are
//! kept and why (restic's `forget` rules, bucket by bucket, newest first). Two
//! [`Repo`] operations act on the decisions:
//!
//! - [`Repo::forget_snapshots`]: removes the snapshot refs (`tags/NAME`) not kept.
//! - [`Repo::retain_history`]: for a long branch, records the commits not kept as
//!   hollow (see [`crate::hollow`]): their commit objects stay, so `log` and the
//!   ancestry are whole, and the next garbage collection deletes what only their
//!   trees reached.
//!
//! **Times** come from the commit metadata key [`TIME_KEY`] (RFC 3339; the CLI
//! writes it in UTC). A candidate without a time, or with one that does not parse,
//! is always kept (reason [`KeepReason::NoTime`]) and takes no slot of any rule:
//! retention never drops what it cannot date. Everything is relative to the newest
//! candidate's time, never to a clock, so a decision is reproducible.
//!
//! ```
//! use snapgraph_store::retention::{apply, Candidate, KeepPolicy};
//! use snapgraph::ObjectId;
//!
//! let id = |i: u8| ObjectId::from_bytes([i; 32]);
//! let day = |d: u8| Some(format!("2026-03-{d:02}T12:00:00Z"));
//! let candidates = (1..=5).map(|d| Candidate { id: id(d), time: day(d) }).collect();
//! let policy = KeepPolicy { last: 2, ..KeepPolicy::default() };
//! let decisions = apply(&policy, candidates)?;
//! let kept: Vec<_> = decisions.iter().filter(|d| d.keep).map(|d| d.id).collect();
//! assert_eq!(kept, [id(5), id(4)]);
//! # Ok::<(), snapgraph_store::retention::RetentionError>(())
//! ```

use std::str::FromStr;

use chrono::{DateTime, Datelike, Days, Months, TimeDelta, Utc};
use hashbrown::HashSet;
use snapgraph::{ObjectId, SnapshotGraph};

use crate::gc::RESERVED;
use crate::hollow::{hollow_commits, record};
use crate::repo::{Repo, RepoError, TAGS};
use crate::store::{RefUpdate, Store};

/// Commit metadata key holding the commit's time (RFC 3339).
pub const TIME_KEY: &str = "time";

pub use crate::error::RetentionError;

/// A calendar span, restic's `--keep-within` format: years, months, days, hours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    /// Years.
    pub years: u32,
    /// Months.
    pub months: u32,
    /// Days.
    pub days: u32,
    /// Hours.
    pub hours: u32,
}

impl FromStr for Span {
    type Err = RetentionError;

    /// Parses `1y2m3d4h` (each part optional, in any order, at least one).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || RetentionError::InvalidSpan {
            text: text.chars().take(100).collect(),
        };
        let mut span = Span::default();
        let mut digits = String::new();
        let mut parts = 0;
        for c in text.chars() {
            if c.is_ascii_digit() {
                digits.push(c);
                continue;
            }
            let n: u32 = digits.parse().map_err(|_| bad())?;
            digits.clear();
            match c {
                'y' => span.years = n,
                'm' => span.months = n,
                'd' => span.days = n,
                'h' => span.hours = n,
                _ => return Err(bad()),
            }
            parts += 1;
        }
        if !digits.is_empty() || parts == 0 {
            return Err(bad());
        }
        Ok(span)
    }
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}y{}m{}d{}h",
            self.years, self.months, self.days, self.hours
        )
    }
}

impl Span {
    /// `time` minus this span (calendar arithmetic; clamped at the earliest time).
    fn before(&self, time: DateTime<Utc>) -> DateTime<Utc> {
        let months = self.years.saturating_mul(12).saturating_add(self.months);
        time.checked_sub_months(Months::new(months))
            .and_then(|t| t.checked_sub_days(Days::new(u64::from(self.days))))
            .and_then(|t| t.checked_sub_signed(TimeDelta::hours(i64::from(self.hours))))
            .unwrap_or(DateTime::<Utc>::MIN_UTC)
    }
}

/// What to keep. Rules add up: a candidate kept by any rule is kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeepPolicy {
    /// The newest N.
    pub last: usize,
    /// The newest of each of the last N days (UTC) that have one.
    pub daily: usize,
    /// The newest of each of the last N ISO weeks that have one.
    pub weekly: usize,
    /// The newest of each of the last N months that have one.
    pub monthly: usize,
    /// Everything at most this span older than the newest candidate.
    pub within: Option<Span>,
}

impl KeepPolicy {
    /// Whether no rule is set (such a policy is refused: it would keep nothing).
    pub fn is_empty(&self) -> bool {
        self.last == 0
            && self.daily == 0
            && self.weekly == 0
            && self.monthly == 0
            && self.within.is_none()
    }
}

/// Why a candidate is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum KeepReason {
    /// Among the last N.
    Last,
    /// The newest of its day.
    Daily,
    /// The newest of its ISO week.
    Weekly,
    /// The newest of its month.
    Monthly,
    /// Within the span of the newest.
    Within,
    /// It has no (valid) time: never dropped.
    NoTime,
    /// The tip of the branch retained, or of another ref: never hollowed.
    RefTip,
}

impl KeepReason {
    /// A short name: `last`, `daily`, `weekly`, `monthly`, `within`, `no-time`,
    /// `ref-tip`.
    pub fn as_str(&self) -> &'static str {
        match self {
            KeepReason::Last => "last",
            KeepReason::Daily => "daily",
            KeepReason::Weekly => "weekly",
            KeepReason::Monthly => "monthly",
            KeepReason::Within => "within",
            KeepReason::NoTime => "no-time",
            KeepReason::RefTip => "ref-tip",
        }
    }
}

/// Something retention decides about: a snapshot commit or a branch commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The commit.
    pub id: ObjectId,
    /// Its time as recorded ([`TIME_KEY`]), if any.
    pub time: Option<String>,
}

/// One decision of [`apply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The commit.
    pub id: ObjectId,
    /// Its recorded time.
    pub time: Option<String>,
    /// Whether it is kept.
    pub keep: bool,
    /// Every rule keeping it (empty when it goes).
    pub reasons: Vec<KeepReason>,
}

/// Decides which candidates `policy` keeps: restic's rules, newest first. The
/// result lists the dated candidates newest first (ties in the order given), then
/// the undated ones in the order given.
pub fn apply(
    policy: &KeepPolicy,
    candidates: Vec<Candidate>,
) -> Result<Vec<Decision>, RetentionError> {
    if policy.is_empty() {
        return Err(RetentionError::NoRule);
    }
    let mut dated = Vec::new();
    let mut undated = Vec::new();
    for c in candidates {
        match c.time.as_deref().and_then(parse_time) {
            Some(t) => dated.push((t, c)),
            None => undated.push(c),
        }
    }
    dated.sort_by_key(|d| std::cmp::Reverse(d.0));
    let newest = dated.first().map(|(t, _)| *t);
    let bound = policy.within.zip(newest).map(|(span, n)| span.before(n));

    // One bucket per rule: the key of the last kept candidate and the slots left.
    struct Bucket {
        reason: KeepReason,
        left: usize,
        last: Option<i64>,
        key: fn(usize, &DateTime<Utc>) -> i64,
    }
    let mut buckets = [
        Bucket {
            reason: KeepReason::Last,
            left: policy.last,
            last: None,
            key: |nr, _| nr as i64,
        },
        Bucket {
            reason: KeepReason::Daily,
            left: policy.daily,
            last: None,
            key: |_, t| i64::from(t.year()) * 10_000 + i64::from(t.month() * 100 + t.day()),
        },
        Bucket {
            reason: KeepReason::Weekly,
            left: policy.weekly,
            last: None,
            key: |_, t| {
                let w = t.iso_week();
                i64::from(w.year()) * 100 + i64::from(w.week())
            },
        },
        Bucket {
            reason: KeepReason::Monthly,
            left: policy.monthly,
            last: None,
            key: |_, t| i64::from(t.year()) * 100 + i64::from(t.month()),
        },
    ];
    let mut out = Vec::with_capacity(dated.len() + undated.len());
    for (nr, (t, c)) in dated.into_iter().enumerate() {
        let mut reasons = Vec::new();
        for b in &mut buckets {
            let key = (b.key)(nr, &t);
            if b.left > 0 && b.last != Some(key) {
                b.last = Some(key);
                b.left -= 1;
                reasons.push(b.reason);
            }
        }
        if bound.is_some_and(|bound| t >= bound) {
            reasons.push(KeepReason::Within);
        }
        out.push(Decision {
            id: c.id,
            time: c.time,
            keep: !reasons.is_empty(),
            reasons,
        });
    }
    out.extend(undated.into_iter().map(|c| Decision {
        id: c.id,
        time: c.time,
        keep: true,
        reasons: vec![KeepReason::NoTime],
    }));
    Ok(out)
}

/// An RFC 3339 time in UTC, if `text` is one.
pub fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// A snapshot's decision in [`Repo::forget_snapshots`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotDecision {
    /// The snapshot's name (without `tags/`).
    pub name: String,
    /// The decision about its commit.
    pub decision: Decision,
}

/// What [`Repo::retain_history`] decided and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryRetention {
    /// The branch's ref.
    pub branch: String,
    /// One decision per commit of its history that still had its snapshot.
    pub decisions: Vec<Decision>,
    /// The commits made hollow now (or, in a dry run, that would be).
    pub hollowed: Vec<ObjectId>,
    /// Commits of the history that were hollow already.
    pub already_hollow: usize,
}

impl<S: Store> Repo<S> {
    /// Applies `policy` to the snapshots named in `names` (all of them when
    /// empty), taken together: those not kept lose their `tags/NAME` ref (in one
    /// atomic update, each by compare-and-swap from the value read), unless
    /// `dry_run`. Their objects go at the next garbage collection unless another
    /// ref reaches them. A snapshot's time is its tag commit's [`TIME_KEY`], else
    /// the time of the commit it labels.
    pub fn forget_snapshots(
        &self,
        names: &[String],
        policy: &KeepPolicy,
        dry_run: bool,
    ) -> Result<Vec<SnapshotDecision>, RepoError> {
        if policy.is_empty() {
            return Err(RetentionError::NoRule.into());
        }
        let mut snapshots = self.snapshots()?;
        if !names.is_empty() {
            for name in names {
                let short = name.strip_prefix(TAGS).unwrap_or(name);
                if !snapshots.iter().any(|s| s.name == short) {
                    return Err(RepoError::UnknownRevision {
                        rev: format!("{TAGS}{short}"),
                    });
                }
            }
            snapshots.retain(|s| {
                names
                    .iter()
                    .any(|n| n.strip_prefix(TAGS).unwrap_or(n) == s.name)
            });
        }
        let mut candidates = Vec::with_capacity(snapshots.len());
        for s in &snapshots {
            let tag = SnapshotGraph::commit(s.id, self.store())?;
            let time = match tag.meta.get(TIME_KEY) {
                Some(t) => Some(t.clone()),
                None if s.target != s.id => SnapshotGraph::commit(s.target, self.store())?
                    .meta
                    .get(TIME_KEY)
                    .cloned(),
                None => None,
            };
            candidates.push(Candidate { id: s.id, time });
        }
        let decisions = apply(policy, candidates)?;
        // Two names may hold one commit: each name gets the commit's decision.
        let mut out = Vec::with_capacity(snapshots.len());
        for s in &snapshots {
            if let Some(d) = decisions.iter().find(|d| d.id == s.id) {
                out.push(SnapshotDecision {
                    name: s.name.clone(),
                    decision: d.clone(),
                });
            }
        }
        out.sort_by_key(|s| decisions.iter().position(|d| d.id == s.decision.id));
        let updates: Vec<RefUpdate> = out
            .iter()
            .filter(|s| !s.decision.keep)
            .map(|s| RefUpdate::new(format!("{TAGS}{}", s.name), Some(s.decision.id), None))
            .collect();
        if !dry_run && !updates.is_empty() {
            self.store()
                .update_refs(&updates, "forget: snapshots not kept")?;
        }
        Ok(out)
    }

    /// Applies `policy` to the history of `branch`: every commit it does not keep
    /// is recorded hollow (see [`crate::hollow`]), unless `dry_run`. The branch's
    /// tip and every commit another ref points at (branches, snapshots) are always
    /// kept ([`KeepReason::RefTip`]); commits without a time too. Commits already
    /// hollow are not candidates. Nothing is deleted here: the next
    /// [`crate::gc()`] removes the trees only hollow commits reached, and a
    /// checkout of a hollow commit is then [`RepoError::Pruned`]. Reads the whole
    /// history once.
    pub fn retain_history(
        &self,
        branch: &str,
        policy: &KeepPolicy,
        dry_run: bool,
    ) -> Result<HistoryRetention, RepoError> {
        if policy.is_empty() {
            return Err(RetentionError::NoRule.into());
        }
        let name = Self::branch_ref(branch);
        let tip = self
            .store()
            .get_ref(&name)?
            .ok_or_else(|| RepoError::UnknownRevision { rev: name.clone() })?;
        let hollow = hollow_commits(self.store())?;
        let tips: HashSet<ObjectId> = self
            .store()
            .list_refs("")?
            .into_iter()
            .filter(|(n, _)| !n.starts_with(RESERVED))
            .map(|(_, id)| id)
            .collect();
        let mut candidates = Vec::new();
        let mut already_hollow = 0;
        for item in SnapshotGraph::ancestors(tip, self.store()) {
            let (id, commit) = item?;
            if hollow.contains(&id) {
                already_hollow += 1;
                continue;
            }
            candidates.push(Candidate {
                id,
                time: commit.meta.get(TIME_KEY).cloned(),
            });
        }
        let mut decisions = apply(policy, candidates)?;
        for d in &mut decisions {
            if tips.contains(&d.id) {
                d.reasons.push(KeepReason::RefTip);
                d.keep = true;
            }
        }
        let hollowed: Vec<ObjectId> = decisions.iter().filter(|d| !d.keep).map(|d| d.id).collect();
        if !dry_run {
            record(self.store(), &hollowed)?;
        }
        Ok(HistoryRetention {
            branch: name,
            decisions,
            hollowed,
            already_hollow,
        })
    }
}
