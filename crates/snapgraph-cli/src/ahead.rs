//! Stats taken ahead of a walk, on a second thread.
//!
//! A walk with an index complete for the tip ([`crate::scan::walk`]) takes one
//! `lstat` per recorded file: on a tree of a few thousand files that is most of a
//! turn's time, all of it in the kernel, on one core. [`Ahead`] lets a helper thread
//! take those stats from the other end of the index while the walk goes on: each
//! file or symlink entry is *claimed* once, by the helper or by the walk, and the
//! stat is taken by whoever claimed it. The walk asks [`Ahead::take`] for an
//! entry's stat when it reaches it: the helper's, waited for if it is being taken,
//! or `None` (the entry is then claimed for the walk, which stats it itself).
//!
//! Directories are entries too: a directory whose recorded listing may hold is
//! stat'ed by its path, ahead or by the walk, and opened only if the listing does
//! not hold (see [`crate::scan::walk`]).
//!
//! The helper stats by the entry's path below the root (`statat` from the root's
//! descriptor); the walk stats by path below the root too inside a directory whose
//! listing holds, else by name in the open directory. Either is a stat of the same
//! path taken while the command runs, after the clock probe the command took before
//! its walk, so the racy-file rule of [`crate::index`] holds for both. A stat taken
//! ahead is a stat taken earlier than the walk would have taken it, which changes
//! nothing the walk decides:
//! - a reused listing still rests on the directory's own stat: a name added,
//!   removed or replaced at any time since the listing was recorded changes the
//!   directory's mtime and ctime, so a listing that is reused holds the inodes the
//!   stats were taken of, or one of them was replaced after the directory's stat,
//!   and its own stat (of a new inode, with a new ctime) differs from the recorded
//!   one. A directory moved or replaced while it is walked is the same case: its
//!   entries' stats, taken by path, are of whatever is there, and differ from the
//!   recorded ones unless they are the recorded files themselves;
//! - the walk uses a stat only if it shows the kind the listing gives (a name
//!   retyped in between is stat'ed again by the walk);
//! - a stat that failed ahead (a name gone, a permission) is taken again by the
//!   walk, which reports the error with its path.
//!
//! The helper never waits for the walk and stops when asked ([`Ahead::stop`]), so a
//! walk that ends early (a survey past its limit, [`crate::scan::survey`]) waits at
//! most for the one stat in flight.
//!
//! The stats one walk took, by either side, are [`Kept`] for the scan that follows
//! a difference: that second walk takes a kept stat instead of its own where the
//! index vouches for the entry with it, and its helper leaves those entries alone
//! (see [`Kept`] for why a stat older than the scan's clock probe may stand).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

use rustix::fs::AtFlags;

use crate::index::{Entries, FileStat, IndexEntry};

/// Indexes of fewer entries than this are walked on one thread, and their walks'
/// stats are not kept ([`Kept`]): a thread's start (tens of microseconds on the
/// walk's side) costs more than it saves.
pub const MIN_ENTRIES: usize = 512;

/// An entry no one has claimed.
const FREE: u8 = 0;
/// An entry the helper stats.
const HELPER: u8 = 1;
/// An entry the walk stats itself.
const WALK: u8 = 2;

/// A stat set once, by the one side of the walk that claimed its entry, and read
/// by the other: `Option<FileStat>` (`None`, a stat that failed) in atomics, where a
/// `OnceLock` took a few hundred instructions a set (its `Once` and closure), a
/// tenth of a no-change turn's walk. The words are written before the state says
/// so (release) and read after it does (acquire).
#[derive(Default)]
struct Slot {
    /// [`EMPTY`], [`WRITING`], [`FAILED`] or [`SET`].
    state: AtomicU8,
    /// `size`, `mtime_ns`, `ctime_ns`, `ino`, `dev`, `mode`.
    words: [AtomicU64; 6],
}

/// A slot not set.
const EMPTY: u8 = 0;
/// A slot being set.
const WRITING: u8 = 1;
/// A slot set to `None`.
const FAILED: u8 = 2;
/// A slot set to a stat.
const SET: u8 = 3;

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

impl Slot {
    /// Sets the slot, unless it was set (or is being set) already.
    fn set(&self, stat: Option<FileStat>) {
        if self
            .state
            .compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let Some(s) = stat else {
            self.state.store(FAILED, Ordering::Release);
            return;
        };
        let values = [
            s.size,
            s.mtime_ns as u64,
            s.ctime_ns as u64,
            s.ino,
            s.dev,
            u64::from(s.mode),
        ];
        for (w, v) in self.words.iter().zip(values) {
            w.store(v, Ordering::Relaxed);
        }
        self.state.store(SET, Ordering::Release);
    }

    /// What the slot was set to, if it was.
    fn get(&self) -> Option<Option<FileStat>> {
        match self.state.load(Ordering::Acquire) {
            FAILED => Some(None),
            SET => {
                let w = |i: usize| self.words[i].load(Ordering::Relaxed);
                Some(Some(FileStat {
                    size: w(0),
                    mtime_ns: w(1) as i64,
                    ctime_ns: w(2) as i64,
                    ino: w(3),
                    dev: w(4),
                    mode: w(5) as u32,
                }))
            }
            _ => None,
        }
    }

    /// What the slot is set to, waiting until it is: for a slot whose setter is
    /// at work (one stat in flight), spinning a little, then yielding the core.
    fn wait(&self) -> Option<FileStat> {
        let mut spins = 0u32;
        loop {
            if let Some(v) = self.get() {
                return v;
            }
            if spins < 64 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// The stats of one index's files and symlinks, each taken once by the helper
/// ([`Ahead::run`]) or by the walk ([`Ahead::take`]).
pub struct Ahead<'a> {
    /// The index's entries, sorted by path.
    entries: &'a Entries,
    /// Who claimed each entry: [`FREE`], [`HELPER`] or [`WALK`].
    claimed: Box<[AtomicU8]>,
    /// The stat of each entry, set once: the helper's, right after it was taken
    /// (`None` when it failed), or the walk's own ([`keep`](Self::keep)).
    taken: Box<[Slot]>,
    /// Set by the walk when it needs no more stats.
    stop: AtomicBool,
    /// An earlier walk's stats and the index's clock probe: entries they vouch for
    /// are the walk's to take from them, not the helper's to stat.
    kept: Option<(&'a Kept, i64)>,
}

impl<'a> Ahead<'a> {
    /// Nothing claimed yet, for `entries` (an index's, in its order).
    pub fn new(entries: &'a Entries) -> Self {
        Self {
            entries,
            claimed: (0..entries.len()).map(|_| AtomicU8::new(FREE)).collect(),
            taken: (0..entries.len()).map(|_| Slot::default()).collect(),
            stop: AtomicBool::new(false),
            kept: None,
        }
    }

    /// `self`, whose helper leaves alone the entries `kept` vouches for against
    /// the clock probe `probe_ns` (the index's): the walk takes those from `kept`.
    pub fn leaving(mut self, kept: Option<&'a Kept>, probe_ns: i64) -> Self {
        self.kept = kept.map(|k| (k, probe_ns));
        self
    }

    /// The helper's work: stats every file and symlink entry not yet claimed, from
    /// the last towards the first, relative to `root` (the walk's root, open), until
    /// every entry is claimed or [`stop`](Self::stop) is called. Every entry it
    /// claims gets its slot set, so [`take`](Self::take) never waits for nothing.
    pub fn run(&self, root: &rustix::fd::OwnedFd) {
        for (i, (path, _)) in self.entries.iter().enumerate().rev() {
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            if self
                .kept
                .is_some_and(|(k, probe)| k.vouched(self.entries, probe, i).is_some())
            {
                continue;
            }
            let (Some(claimed), Some(slot)) = (self.claimed.get(i), self.taken.get(i)) else {
                return;
            };
            if claimed
                .compare_exchange(FREE, HELPER, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            // Workspace paths are `/a/b`: below the root, `a/b`.
            let below = path.trim_start_matches('/');
            let stat = if below.is_empty() {
                None
            } else {
                rustix::fs::statat(root, below, AtFlags::SYMLINK_NOFOLLOW)
                    .ok()
                    .map(|s| FileStat::of_stat(&s))
            };
            // Only this thread sets a slot it claimed.
            slot.set(stat);
        }
    }

    /// The stat of entry `i` taken ahead, or `None` when the walk is to take it
    /// itself: the entry was free (it is now the walk's), the walk claimed it before
    /// (a directory listed after its reused listing failed), or the helper's stat
    /// failed. Waits while the helper's stat of it is in flight.
    pub fn take(&self, i: usize) -> Option<FileStat> {
        let (claimed, slot) = (self.claimed.get(i)?, self.taken.get(i)?);
        match claimed.compare_exchange(FREE, WALK, Ordering::AcqRel, Ordering::Acquire) {
            // The helper sets the slot of every entry it claims, right after its
            // stat: no other thread can leave it unset.
            Err(HELPER) => slot.wait(),
            _ => None,
        }
    }

    /// Tells the helper to take no more stats.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Keeps the walk's own stat of entry `i` (one [`take`](Self::take) left to the
    /// walk), so that [`into_kept`](Self::into_kept) holds it.
    pub fn keep(&self, i: usize, stat: FileStat) {
        if let (Some(claimed), Some(slot)) = (self.claimed.get(i), self.taken.get(i)) {
            if claimed.load(Ordering::Acquire) == WALK {
                slot.set(Some(stat));
            }
        }
    }

    /// Every stat taken, by either side, by entry position (`None` where none was
    /// or it failed), once the walk and its helper are done.
    pub fn into_kept(self) -> Kept {
        Kept {
            of: self.entries.identity(),
            // Moved, not copied: a walk that found nothing different drops them.
            stats: self.taken,
            after_probe: false,
        }
    }
}

/// The stats one walk took of an index's entries, by position: what a second walk
/// over the same index may use instead of its own, for the entries the index
/// vouches for with them ([`Kept::vouched`]).
///
/// Two walks over one index: a [`crate::scan::survey`] past its limit stops, then
/// the scan walks everything. A stat of the first walk may be older than the scan's
/// clock probe (`status` takes none; a commit takes its probe before the survey,
/// but the rule is the same for both), so the second walk uses it
/// only where the old index trusts it (equal to the recorded stat, and not racy
/// against the *old* probe): such a file's last change was before the old probe,
/// so any later one gives it an mtime of at least that probe's tick, which the next
/// command sees whatever probe this one records. Any other entry is stat'ed again,
/// unless the stats were taken after the clock probe the second walk records
/// ([`Kept::after_probe`]: a commit probes before it surveys): then every stat is as
/// good as one taken now, since what the rule needs of a recorded stat is that it
/// was taken after the probe recorded with it and before the file was read.
#[derive(Debug)]
pub struct Kept {
    /// Where the entries the stats are of lie in memory: stats of another index
    /// (or another copy) vouch for nothing.
    of: usize,
    /// By entry position: set once by either side of the walk, or never.
    stats: Box<[Slot]>,
    /// Whether they were taken after the clock probe the next walk records.
    after_probe: bool,
}

impl Kept {
    /// These stats, taken after the clock probe that the walk using them records
    /// with what it finds: each one stands for the entry whatever the old index says
    /// (see [`Kept`]).
    pub fn after_probe(self) -> Self {
        Self {
            after_probe: true,
            ..self
        }
    }

    /// The kept stat of entry `i` of `entries` (the index's the stats were taken
    /// over, unchanged since) when the index, whose clock probe is `probe_ns`,
    /// vouches for the entry with it ([`crate::index::Index::trusted`]), or whenever
    /// the stats were taken [after the probe](Self::after_probe).
    pub fn vouched(&self, entries: &Entries, probe_ns: i64, i: usize) -> Option<FileStat> {
        if self.of != entries.identity() || self.stats.len() != entries.len() {
            return None;
        }
        let stat = self.stats.get(i)?.get()??;
        if self.after_probe {
            return Some(stat);
        }
        match entries.at(i)? {
            (
                _,
                IndexEntry::File { stat: recorded, .. } | IndexEntry::Symlink { stat: recorded },
            ) if *recorded == stat && recorded.mtime_ns < probe_ns => Some(stat),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Digest;
    use proptest::prelude::*;

    /// A tree of `files` files under `root` (`/dNN/fNN`, a directory every ten),
    /// as the index's sorted entries (stats as recorded: zero, not the files').
    fn tree(root: &std::path::Path, files: usize) -> Entries {
        let blank = FileStat {
            size: 0,
            mtime_ns: 0,
            ctime_ns: 0,
            ino: 0,
            dev: 0,
            mode: 0,
        };
        let mut entries = Vec::new();
        for i in 0..files {
            let dir = format!("/d{:02}", i / 10);
            if i % 10 == 0 {
                std::fs::create_dir(root.join(&dir[1..])).unwrap();
                entries.push((dir.clone(), IndexEntry::Dir { listing: None }));
            }
            let path = format!("{dir}/f{:02}", i % 10);
            std::fs::write(root.join(&path[1..]), vec![b'x'; i]).unwrap();
            entries.push((
                path,
                IndexEntry::File {
                    stat: blank,
                    digest: Digest::Inline(Vec::new()),
                },
            ));
        }
        Entries::from_unsorted(entries)
    }

    fn open(root: &std::path::Path) -> rustix::fd::OwnedFd {
        rustix::fs::open(
            root,
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap()
    }

    /// A slot reads as unset until set, then as what the first set gave (a stat,
    /// every field, or a failure), whatever comes later; a waiter on another thread
    /// gets it once it is set.
    #[test]
    fn a_slot_is_set_once_and_read_whole() {
        let stat = FileStat {
            size: u64::MAX,
            mtime_ns: -1,
            ctime_ns: i64::MIN,
            ino: 7,
            dev: 1 << 40,
            mode: 0o100644,
        };
        let slot = Slot::default();
        assert_eq!(slot.get(), None);
        slot.set(Some(stat));
        slot.set(None);
        assert_eq!(slot.get(), Some(Some(stat)));
        assert_eq!(slot.wait(), Some(stat));

        let failed = Slot::default();
        failed.set(None);
        failed.set(Some(stat));
        assert_eq!(failed.get(), Some(None));

        let later = Slot::default();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| later.wait());
            std::thread::sleep(std::time::Duration::from_millis(20));
            later.set(Some(stat));
            assert_eq!(waiter.join().unwrap(), Some(stat));
        });
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

        /// Whatever the order the walk asks in (some entries twice, as after a
        /// reused listing that failed) and wherever the helper is (or stopped), a
        /// stat taken ahead is the entry's own (a file's or a directory's), and no
        /// question waits forever.
        #[test]
        fn a_stat_taken_ahead_is_the_files_own(
            files in 1usize..120,
            order in prop::collection::vec(any::<prop::sample::Index>(), 0..300),
            stop_after in prop::option::of(0usize..200),
        ) {
            let t = tempfile::tempdir().unwrap();
            let entries = tree(t.path(), files);
            let ahead = Ahead::new(&entries);
            let fd = open(t.path());
            std::thread::scope(|s| {
                s.spawn(|| ahead.run(&fd));
                for (n, i) in order.iter().map(|i| i.index(entries.len())).enumerate() {
                    if stop_after == Some(n) {
                        ahead.stop();
                    }
                    let got = ahead.take(i);
                    let (path, _) = entries.at(i).unwrap();
                    if let Some(stat) = got {
                        let now = FileStat::lstat(&t.path().join(&path[1..])).unwrap();
                        prop_assert_eq!(stat, now, "{}", path);
                    }
                }
                ahead.stop();
                Ok(())
            })?;
        }
    }

    #[test]
    fn a_helper_alone_stats_every_entry_and_the_walk_waits_for_none() {
        let t = tempfile::tempdir().unwrap();
        let entries = tree(t.path(), 40);
        let ahead = Ahead::new(&entries);
        ahead.run(&open(t.path()));
        // Directories too (the walk opens only those whose listing does not hold).
        assert!(entries
            .iter()
            .any(|(_, e)| matches!(e, IndexEntry::Dir { .. })));
        for (i, (path, _)) in entries.iter().enumerate() {
            assert_eq!(
                ahead.take(i),
                Some(FileStat::lstat(&t.path().join(&path[1..])).unwrap()),
                "{path}"
            );
        }
    }

    #[test]
    fn a_stopped_helper_leaves_everything_to_the_walk() {
        let t = tempfile::tempdir().unwrap();
        let entries = tree(t.path(), 40);
        let ahead = Ahead::new(&entries);
        ahead.stop();
        ahead.run(&open(t.path()));
        assert!((0..entries.len()).all(|i| ahead.take(i).is_none()));
    }

    /// A stat kept from an earlier walk stands for a later one only where the index
    /// trusts it (equal to the record, older than the index's clock probe), of the
    /// very entries it was taken over; any of them once taken after the probe the
    /// later walk records (`Kept::after_probe`).
    #[test]
    fn kept_stats_vouch_only_for_trusted_records_of_the_same_entries() {
        let t = tempfile::tempdir().unwrap();
        let files = tree(t.path(), 30);
        let now: Vec<Option<FileStat>> = files
            .iter()
            .map(|(p, _)| FileStat::lstat(&t.path().join(&p[1..])).ok())
            .collect();
        // The index as a commit would have recorded it: every file's stat now.
        let recorded: Vec<(String, IndexEntry)> = files
            .iter()
            .zip(&now)
            .map(|((p, e), s)| match (e, s) {
                (IndexEntry::File { digest, .. }, Some(s)) => (
                    p.to_string(),
                    IndexEntry::File {
                        stat: *s,
                        digest: digest.clone(),
                    },
                ),
                _ => (p.to_string(), e.clone()),
            })
            .collect();
        let file = recorded
            .iter()
            .position(|(_, e)| matches!(e, IndexEntry::File { .. }))
            .unwrap();
        let dir = recorded
            .iter()
            .position(|(_, e)| matches!(e, IndexEntry::Dir { .. }))
            .unwrap();
        let recorded = Entries::from_unsorted(recorded);
        let ahead = Ahead::new(&recorded);
        for (i, stat) in now.iter().enumerate() {
            assert_eq!(ahead.take(i), None, "no helper: the walk's");
            if let Some(s) = stat {
                ahead.keep(i, *s);
            }
        }
        let kept = ahead.into_kept();
        let mtime = now[file].unwrap().mtime_ns;
        // Trusted: equal, and older than the probe.
        assert_eq!(kept.vouched(&recorded, mtime + 1, file), now[file]);
        // Racy: not older than the probe.
        assert_eq!(kept.vouched(&recorded, mtime, file), None);
        // A directory has no stat to vouch with.
        assert_eq!(kept.vouched(&recorded, i64::MAX, dir), None);
        // Another record than the stat kept.
        let mut moved = recorded.clone();
        let (path, mut entry) = moved
            .at(file)
            .map(|(p, e)| (p.to_string(), e.clone()))
            .unwrap();
        if let IndexEntry::File { stat, .. } = &mut entry {
            stat.size += 1;
        }
        moved.insert(path, entry);
        let ahead = Ahead::new(&moved);
        ahead.take(file);
        ahead.keep(file, now[file].unwrap());
        assert_eq!(ahead.into_kept().vouched(&moved, i64::MAX, file), None);
        // Another index (an equal copy elsewhere in memory).
        let copy = recorded.clone();
        assert_eq!(kept.vouched(&copy, i64::MAX, file), None);
        // Taken after the probe the next walk records: every stat stands, racy or
        // unlike the record, a directory's too; still only over the same entries.
        let kept = kept.after_probe();
        assert_eq!(kept.vouched(&recorded, mtime, file), now[file]);
        assert_eq!(kept.vouched(&recorded, i64::MAX, dir), now[dir]);
        assert_eq!(kept.vouched(&copy, i64::MAX, file), None);
        let ahead = Ahead::new(&moved);
        ahead.take(file);
        ahead.keep(file, now[file].unwrap());
        let moved_kept = ahead.into_kept().after_probe();
        assert_eq!(moved_kept.vouched(&moved, i64::MAX, file), now[file]);
    }

    #[test]
    fn a_file_gone_before_the_helper_came_is_left_to_the_walk() {
        let t = tempfile::tempdir().unwrap();
        let entries = tree(t.path(), 12);
        std::fs::remove_file(t.path().join("d01/f00")).unwrap();
        let ahead = Ahead::new(&entries);
        ahead.run(&open(t.path()));
        let gone = entries.iter().position(|(p, _)| p == "/d01/f00").unwrap();
        assert_eq!(ahead.take(gone), None);
        assert!(ahead.take(gone + 1).is_some());
    }
}
