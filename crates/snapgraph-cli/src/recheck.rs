//! Re-reading a file whose `lstat` changed: are its bytes still the branch tip's?
//!
//! A file the stat cache cannot vouch for (its stat differs from the recorded one,
//! or is racy) must be read. A new mtime alone does not mean new bytes: a release
//! unpacked or `rsync`ed over the tree gives every file a new mtime and changes a
//! few of them. So when the index is complete for the tip and records a file of the
//! same size and mode at that path, the bytes read are first compared with the tip's
//! content by its own ids, without cutting them (no FastCDC) and without loading the
//! directory from the store. The index records how that content is stored (index
//! version 5), so each file is hashed once, the one way that can prove it:
//!
//! - inline content (at most [`snapgraph::limits::INLINE_MAX`] bytes): the bytes
//!   themselves;
//! - one chunk: the chunk id of all the bytes (only for at most
//!   [`snapgraph::chunk::CHUNK_MAX`] bytes, what one chunk can hold);
//! - a manifest: its chunk list, read from the store (each node verified against its
//!   id), and each span of the bytes hashed at the recorded length.
//!
//! Equal ids mean equal bytes (BLAKE3's collision resistance), so the entry stays as
//! the tip has it and only its stat is recorded anew. Anything else (a different
//! id, a chunk of an older format version, a node missing, malformed or of the wrong
//! kind, a file whose length moved since its `lstat`) is no proof: the file takes the
//! ordinary path (read again, cut, hashed, compared with the tree by the commit),
//! so a doubt costs speed, never a missed change.
//!
//! Files are read and hashed on up to [`Workspace::parallelism`](snapgraph::Workspace::parallelism)
//! threads, one file at a time each (memory holds at most one file a thread, and
//! the queue one chunk list a manifest). A scan hands them over while it walks
//! ([`while_walking`]): a file is read and hashed on another thread as soon as the
//! walk finds it, so the hashing of a release `rsync`ed over the tree overlaps the
//! walk instead of following it. A manifest's chunk list is read from the store by
//! the walking thread (a store need not be `Sync`) when it finds the file, and goes
//! with it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};

use snapgraph::chunk::CHUNK_MAX;
use snapgraph::object::manifest::{ChunkRef, Manifest};
use snapgraph::{ObjectId, ObjectKind, ObjectSource, FORMAT_VERSION};

use crate::error::{CliError, IoContext, Result};
use crate::index::{Digest, FileStat};

/// A file whose stat changed, where the tip holds a file of the same size and mode.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Its path on disk.
    pub full: std::path::PathBuf,
    /// Its workspace path.
    pub path: String,
    /// Its `lstat` now.
    pub stat: FileStat,
    /// What the index recorded for it (the tip's content).
    pub digest: Digest,
}

/// For each candidate, whether its bytes on disk are the tip's (see the module
/// docs). `source` is the store holding the tip; `threads` the most threads to read
/// and hash on. Fails only when a file cannot be read.
pub fn same_as_tip(
    candidates: &[Candidate],
    source: &dyn ObjectSource,
    threads: usize,
) -> Result<Vec<bool>> {
    let ((), _, same) = while_walking(
        source,
        || threads,
        |found| {
            candidates.iter().cloned().for_each(found);
            Ok(())
        },
    )?;
    Ok(same)
}

/// Runs `walk`, which hands each candidate it finds to the function it is given,
/// while other threads (up to `threads()` in all, asked when the first candidate
/// comes, so a walk that finds none never asks) read and hash the candidates as they
/// come; this thread helps with what is left once the walk is over. A manifest's
/// chunk list is read from `source` on this thread (a store need not be `Sync`)
/// when the walk finds it, so its file is hashed on the helpers while the walk goes
/// on instead of on this thread after it. Returns `walk`'s result, the candidates in
/// the order found, and for each whether its bytes are the tip's. A walk that fails
/// stops the comparing (its error is returned); so does a file that cannot be read
/// (an error naming it).
pub fn while_walking<T>(
    source: &dyn ObjectSource,
    threads: impl Fn() -> usize,
    walk: impl FnOnce(&mut dyn FnMut(Candidate)) -> Result<T>,
) -> Result<(T, Vec<Candidate>, Vec<bool>)> {
    let mut found: Vec<Candidate> = Vec::new();
    // Each candidate with its position and, for a manifest, its chunk list as read.
    let (tx, rx) = mpsc::channel::<(usize, Candidate, Option<Option<Vec<ChunkRef>>>)>();
    let rx = Mutex::new(rx);
    let stop = AtomicBool::new(false);
    // Takes candidates until the walk is over and none is left (or a stop). Each
    // thread reads every file into one buffer: a fresh one per file cost a malloc
    // and a free each, and page faults wherever the allocator handed out new memory
    // (a release's two thousand files, about a tenth of its commit's CPU).
    let drain = |out: &mut Vec<(usize, Result<bool>)>| {
        let mut buf = Vec::new();
        loop {
            let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
            let Ok((i, c, list)) = next else { return };
            if stop.load(Ordering::Relaxed) {
                continue;
            }
            let r = compare(&c, list.as_ref().map(Option::as_deref), &mut buf);
            if r.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            out.push((i, r));
        }
    };
    let (walked, mut done) = std::thread::scope(|scope| {
        // Started with the first candidate (a walk that finds none, a per-turn
        // commit's, starts no thread).
        let mut helpers = Vec::new();
        let walked = walk(&mut |c: Candidate| {
            if helpers.is_empty() {
                let beside = crate::cpus::Beside::here();
                helpers.extend((1..threads().max(1)).map(|_| {
                    scope.spawn(move || {
                        beside.leave();
                        let mut out = Vec::new();
                        drain(&mut out);
                        out
                    })
                }));
                beside.yield_to();
            }
            let list = match &c.digest {
                Digest::Manifest(_) if stop.load(Ordering::Relaxed) => Some(None),
                Digest::Manifest(id) => Some(chunk_list(*id, c.stat.size, source)),
                Digest::Chunk(_) | Digest::Inline(_) => None,
            };
            // Without a helper, nothing takes them now: compared below.
            let _ = tx.send((found.len(), c.clone(), list));
            found.push(c);
        });
        // Moved into this closure (so a walk that panics drops it on the way out,
        // and the helpers waiting on it end before the scope joins them).
        drop(tx);
        if walked.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        let mut mine: Vec<(usize, Result<bool>)> = Vec::new();
        drain(&mut mine);
        for h in helpers {
            mine.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        (walked, mine)
    });
    let walked = walked?;
    // Every candidate was taken exactly once, unless an error stopped the rest: the
    // first error in the order found is returned.
    done.sort_unstable_by_key(|(i, _)| *i);
    let mut same = Vec::with_capacity(found.len());
    for (_, r) in done {
        same.push(r?);
    }
    debug_assert_eq!(same.len(), found.len());
    Ok((walked, found, same))
}

/// Reads `c` and says whether it is what the index recorded: `list` is, for a
/// manifest, its chunk list as read (`Some(None)`: not readable, so no proof).
/// Memory stays bounded whatever the file's size: a manifest's file is read chunk by
/// chunk along its list (stopping at the first chunk that differs), and inline or
/// one-chunk content at most one byte past its recorded size (a file that grew
/// since its stat is no proof).
fn compare(c: &Candidate, list: Option<Option<&[ChunkRef]>>, buf: &mut Vec<u8>) -> Result<bool> {
    // No read when nothing could prove it: a manifest whose list is not to be had,
    // or more bytes than one chunk holds recorded as one chunk.
    match (&c.digest, list) {
        (Digest::Manifest(_), None | Some(None)) => return Ok(false),
        (Digest::Chunk(_), _) if c.stat.size > CHUNK_MAX as u64 => return Ok(false),
        // Inline bytes of another length than the file's: not read (a file grown
        // huge since it was recorded inline would otherwise be read whole).
        (Digest::Inline(bytes), _) if bytes.len() as u64 != c.stat.size => return Ok(false),
        _ => {}
    }
    let mut file = match std::fs::File::open(&c.full) {
        Ok(f) => f,
        // Gone since the walk: no proof (the scan then finds it gone).
        Err(e) if crate::error::vanished(&e) => return Ok(false),
        Err(e) => return Err(CliError::io(&c.full, e)),
    };
    if let (Digest::Manifest(_), Some(Some(list))) = (&c.digest, list) {
        return spans_match(&mut file, list, buf).at(&c.full);
    }
    // Room for the recorded bytes and the one past them: one read ends at the
    // recorded size (`read_sized`; an empty vector grew by doubling from a 32-byte
    // probe, a reallocation and a copy each step). Content recorded inline or as one
    // chunk is at most a chunk long, whatever an index claims.
    buf.clear();
    buf.reserve(c.stat.size.min(CHUNK_MAX as u64) as usize + 1);
    crate::batches::read_sized(&file, c.stat.size, c.stat.size, buf).at(&c.full)?;
    let data = &buf[..];
    if data.len() as u64 != c.stat.size {
        return Ok(false);
    }
    Ok(match &c.digest {
        Digest::Inline(bytes) => bytes[..] == *data,
        // A chunk of an older format version has another id: no proof.
        Digest::Chunk(id) => ObjectId::hash_object(ObjectKind::Chunk, FORMAT_VERSION, data) == *id,
        Digest::Manifest(_) => false,
    })
}

/// Whether what `file` holds from where it stands is exactly the chunks of `list`,
/// in order (each chunk's id of the current format version), and nothing after:
/// read one chunk at a time into one buffer, up to the first that differs. A file
/// shorter than the list is no proof (not an error).
fn spans_match(
    file: &mut std::fs::File,
    list: &[ChunkRef],
    buf: &mut Vec<u8>,
) -> std::io::Result<bool> {
    use std::io::Read;
    for c in list {
        let len = c.len as usize;
        if len > CHUNK_MAX {
            return Ok(false);
        }
        buf.resize(len, 0);
        match file.read_exact(buf) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
            Err(e) => return Err(e),
        }
        if ObjectId::hash_object(ObjectKind::Chunk, FORMAT_VERSION, buf) != c.id {
            return Ok(false);
        }
    }
    let mut past = [0u8; 1];
    loop {
        match file.read(&mut past) {
            Ok(n) => return Ok(n == 0),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The chunk list of the manifest rooted at `root` for a file of `size` bytes, read
/// level by level from `source`, every node verified against its id and of the
/// current format version; `None` on any doubt (a node missing or unreadable,
/// `root` not a manifest, levels that do not line up, lengths that do not add up to
/// `size`).
fn chunk_list(root: ObjectId, size: u64, source: &dyn ObjectSource) -> Option<Vec<ChunkRef>> {
    // Every chunk holds at least one byte, and every index entry at least one chunk.
    let most = usize::try_from(size).ok()?;
    let mut ids = vec![root];
    let mut chunks: Vec<ChunkRef> = Vec::new();
    for _ in 0..=snapgraph::limits::MAX_LEVEL {
        let read = source.get_many(&ids).ok()?;
        let mut next: Vec<ObjectId> = Vec::new();
        for (id, stored) in ids.iter().zip(read) {
            let stored = stored?;
            let (kind, version) = snapgraph::object::verify(id, &stored).ok()?;
            if kind != ObjectKind::Manifest || version != FORMAT_VERSION {
                return None;
            }
            match Manifest::decode(id, stored.get(2..)?).ok()? {
                Manifest::Leaf(list) => chunks.extend(list),
                Manifest::Internal { children, .. } => next.extend(children.iter().map(|c| c.id)),
            }
            if chunks.len() > most || next.len() > most || (!chunks.is_empty() && !next.is_empty())
            {
                return None;
            }
        }
        if next.is_empty() {
            let total: u64 = chunks.iter().map(|c| u64::from(c.len)).sum();
            return (total == size).then_some(chunks);
        }
        ids = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use snapgraph::{CommitOptions, Workspace};

    use super::*;

    /// `len` deterministic incompressible bytes (BLAKE3's output stream of `seed`).
    fn bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut out = vec![0; len];
        let mut h = blake3::Hasher::new();
        h.update(&seed.to_le_bytes());
        h.finalize_xof().fill(&mut out);
        out
    }

    /// The candidates, the store they were committed to, and their contents.
    type Fixture = (Vec<Candidate>, HashMap<ObjectId, Vec<u8>>, Vec<Vec<u8>>);

    /// Files of every representation, committed to a map store, written to a
    /// directory; their candidates (with the digests the commit gave them).
    fn setup(dir: &std::path::Path) -> Fixture {
        let datas = vec![
            b"inline".to_vec(),
            bytes(3000, 1),
            bytes(60_000, 2),
            bytes(300_000, 3),
            bytes(12 << 20, 4),
            // One chunk of more than twice the average chunk (zeros never cut before
            // the maximum): recorded as a chunk, hashed whole.
            vec![0; 50_000],
        ];
        let mut ws = Workspace::new();
        for (i, d) in datas.iter().enumerate() {
            ws.write(&format!("/f{i}"), d).unwrap();
        }
        let commit = ws.commit(CommitOptions::new()).unwrap();
        let store: HashMap<ObjectId, Vec<u8>> = commit.into_objects().into_iter().collect();
        let candidates = datas
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let full = dir.join(format!("f{i}"));
                std::fs::write(&full, d).unwrap();
                let path = format!("/f{i}");
                Candidate {
                    stat: FileStat::lstat(&full).unwrap(),
                    digest: crate::index::digest_of(&ws, &path).unwrap(),
                    full,
                    path,
                }
            })
            .collect();
        (candidates, store, datas)
    }

    #[test]
    fn a_walk_hands_candidates_over_as_it_goes_and_its_error_wins() {
        let t = tempfile::tempdir().unwrap();
        let (candidates, store, datas) = setup(t.path());
        // One file of one chunk and one of a manifest changed: each answer is the
        // answer for its own candidate, in the order found.
        for i in [1, 3] {
            let mut d = datas[i].clone();
            d[7] ^= 1;
            std::fs::write(&candidates[i].full, &d).unwrap();
        }
        for threads in [1, 2, 3] {
            let (_, found, same) = while_walking(
                &store,
                || threads,
                |found| {
                    candidates.iter().rev().cloned().for_each(found);
                    Ok(())
                },
            )
            .unwrap();
            let answers: Vec<(&str, bool)> =
                found.iter().map(|c| c.path.as_str()).zip(same).collect();
            assert_eq!(
                answers,
                vec![
                    ("/f5", true),
                    ("/f4", true),
                    ("/f3", false),
                    ("/f2", true),
                    ("/f1", false),
                    ("/f0", true)
                ],
                "{threads} threads"
            );
        }
        for i in [1, 3] {
            std::fs::write(&candidates[i].full, &datas[i]).unwrap();
        }
        for threads in [1, 2, 3] {
            let (walked, found, same) = while_walking(
                &store,
                || threads,
                |found| {
                    candidates.iter().rev().cloned().for_each(found);
                    Ok(7)
                },
            )
            .unwrap();
            assert_eq!(walked, 7);
            let order: Vec<&str> = found.iter().map(|c| c.path.as_str()).collect();
            let want: Vec<&str> = candidates.iter().rev().map(|c| c.path.as_str()).collect();
            assert_eq!(order, want, "in the order found");
            assert_eq!(same, vec![true; candidates.len()], "{threads} threads");
            // A walk that fails: its error, whatever was compared meanwhile.
            let err = while_walking(
                &store,
                || threads,
                |found| {
                    candidates.iter().cloned().for_each(found);
                    Err::<(), _>(crate::error::CliError::bad_path(
                        std::path::Path::new("/the-walk"),
                        "stopped",
                    ))
                },
            )
            .unwrap_err();
            assert!(err.to_string().contains("the-walk"), "{err}");
        }
    }

    #[test]
    fn a_walk_that_panics_after_handing_over_does_not_hang_its_helpers() {
        let t = tempfile::tempdir().unwrap();
        let (candidates, store, _) = setup(t.path());
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            while_walking(
                &store,
                || 2,
                |found| -> Result<()> {
                    found(candidates[1].clone());
                    panic!("the walk fails");
                },
            )
        }));
        assert!(panicked.is_err());
    }

    #[test]
    fn the_tips_bytes_are_proven_and_nothing_else() {
        let t = tempfile::tempdir().unwrap();
        let (candidates, store, datas) = setup(t.path());
        assert!(snapgraph::chunk::cut_points(&datas[2]).len() > 1);
        assert_eq!(snapgraph::chunk::cut_points(&datas[5]).len(), 1);
        // On this thread alone, or with one or three helpers.
        for threads in [1, 2, 4] {
            let same = same_as_tip(&candidates, &store, threads).unwrap();
            assert_eq!(same, vec![true; datas.len()], "{threads} threads");
        }
        // One byte changed anywhere: not the tip's.
        for (i, d) in datas.iter().enumerate() {
            for at in [0, d.len() / 2, d.len() - 1] {
                let mut d = d.clone();
                d[at] ^= 1;
                std::fs::write(&candidates[i].full, &d).unwrap();
                let same = same_as_tip(&candidates[i..=i], &store, 2).unwrap();
                assert_eq!(same, vec![false], "file {i} byte {at}");
            }
            std::fs::write(&candidates[i].full, d).unwrap();
        }
        // A length that moved since the stat: no proof, whether the content is
        // inline, one chunk or a manifest (read along its chunk list: the bytes past
        // the last chunk are what differs), longer or shorter.
        for i in [0, 1, 3, 4] {
            let mut longer = datas[i].clone();
            longer.push(0);
            std::fs::write(&candidates[i].full, &longer).unwrap();
            assert_eq!(
                same_as_tip(&candidates[i..=i], &store, 1).unwrap(),
                vec![false],
                "file {i} longer"
            );
            std::fs::write(&candidates[i].full, &datas[i][..datas[i].len() - 1]).unwrap();
            assert_eq!(
                same_as_tip(&candidates[i..=i], &store, 1).unwrap(),
                vec![false],
                "file {i} shorter"
            );
            std::fs::write(&candidates[i].full, &datas[i]).unwrap();
        }
        // Recorded inline, now of another length: no proof, without opening the
        // file (here one that is gone: opening it would fail).
        let gone = Candidate {
            full: t.path().join("gone"),
            path: "/gone".into(),
            stat: FileStat {
                size: 1 << 40,
                ..candidates[0].stat
            },
            digest: Digest::Inline(b"x".to_vec()),
        };
        assert_eq!(same_as_tip(&[gone], &store, 1).unwrap(), vec![false]);
        // Manifest nodes missing or damaged: no proof (chunks are not needed).
        let manifests: Vec<ObjectId> = store
            .iter()
            .filter(|(_, b)| b[0] == ObjectKind::Manifest as u8)
            .map(|(id, _)| *id)
            .collect();
        assert!(
            manifests.len() >= 4,
            "one-leaf manifests and a deeper one: {} manifests",
            manifests.len()
        );
        let chunks_only: HashMap<ObjectId, Vec<u8>> = store
            .iter()
            .filter(|(_, b)| b[0] == ObjectKind::Chunk as u8)
            .map(|(id, b)| (*id, b.clone()))
            .collect();
        assert_eq!(
            same_as_tip(&candidates, &chunks_only, 1).unwrap(),
            vec![true, true, false, false, false, true]
        );
        for id in &manifests {
            let mut damaged = store.clone();
            let b = damaged.get_mut(id).unwrap();
            let last = b.len() - 1;
            b[last] ^= 1;
            let same = same_as_tip(&candidates, &damaged, 1).unwrap();
            assert!(same[..2].iter().all(|s| *s), "{same:?}");
            assert!(same.iter().any(|s| !s), "{id}: {same:?}");
        }
        // Another file's digest: not this one's bytes.
        let mut swapped = candidates[1].clone();
        swapped.digest = candidates[2].digest.clone();
        swapped.stat.size = 3000;
        assert_eq!(same_as_tip(&[swapped], &store, 1).unwrap(), vec![false]);
        // A file gone since its stat: no proof (the scan then reads it, finds it
        // gone, and records it absent: stop 57), the others proven as before.
        std::fs::remove_file(&candidates[4].full).unwrap();
        let same = same_as_tip(&candidates, &store, 2).unwrap();
        assert_eq!(same, [true, true, true, true, false, true]);
        // Any other failure to read it is an error naming it.
        std::fs::create_dir(&candidates[4].full).unwrap();
        let err = same_as_tip(&candidates, &store, 2).unwrap_err();
        assert!(err.to_string().contains("f4"), "{err}");
    }
}
