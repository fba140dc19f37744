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
//! threads, in batches of at most [`BATCH_BYTES`] (memory stays bounded whatever the
//! tree's size); the store is read only on the calling thread (a store need not be
//! `Sync`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use snapgraph::chunk::CHUNK_MAX;
use snapgraph::object::manifest::{ChunkRef, Manifest};
use snapgraph::{ObjectId, ObjectKind, ObjectSource, FORMAT_VERSION};

use crate::error::{IoContext, Result};
use crate::index::{Digest, FileStat};

/// The most bytes of files held at once while comparing (a larger file is a batch of
/// its own).
pub const BATCH_BYTES: u64 = 32 << 20;

/// Below this many bytes in a batch, the files are compared on the calling thread.
const PARALLEL_MIN: u64 = 1 << 20;

/// A file whose stat changed, where the tip holds a file of the same size and mode.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Its path on disk.
    pub full: PathBuf,
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
    same_in_batches(candidates, source, threads, BATCH_BYTES, PARALLEL_MIN)
}

/// [`same_as_tip`] with its batch size and threading threshold given.
fn same_in_batches(
    candidates: &[Candidate],
    source: &dyn ObjectSource,
    threads: usize,
    batch_bytes: u64,
    parallel_min: u64,
) -> Result<Vec<bool>> {
    let mut same = Vec::with_capacity(candidates.len());
    let mut start = 0;
    while start < candidates.len() {
        let mut end = start;
        let mut bytes = 0u64;
        while end < candidates.len() && (end == start || bytes < batch_bytes) {
            bytes += candidates[end].stat.size;
            end += 1;
        }
        let batch = &candidates[start..end];
        let threads = if bytes < parallel_min { 1 } else { threads };
        same.extend(compare_batch(batch, source, threads)?);
        start = end;
    }
    Ok(same)
}

/// [`compare`] of every candidate of `batch`, in order, on up to `threads` threads.
/// The index says how each file's content is stored, so each is hashed once, the
/// one way that can prove it: a chunk's bytes whole, a manifest's span by span
/// against its chunk list. The lists are read from the store on the calling thread
/// only, while the other threads already read and hash the files that need none;
/// then it joins them.
fn compare_batch(
    batch: &[Candidate],
    source: &dyn ObjectSource,
    threads: usize,
) -> Result<Vec<bool>> {
    let listed = |c: &Candidate| matches!(c.digest, Digest::Manifest(_));
    let plain: Vec<usize> = (0..batch.len()).filter(|&i| !listed(&batch[i])).collect();
    let next = AtomicUsize::new(0);
    let take_plain = |done: &mut Vec<(usize, Result<bool>)>| {
        while let Some(&i) = plain.get(next.fetch_add(1, Ordering::Relaxed)) {
            done.push((i, compare(&batch[i], None)));
        }
    };
    let mut done: Vec<(usize, Result<bool>)> = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads.clamp(1, batch.len().max(1)))
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    take_plain(&mut done);
                    done
                })
            })
            .collect();
        let mut mine = Vec::new();
        for (i, c) in batch.iter().enumerate().filter(|(_, c)| listed(c)) {
            let list = match &c.digest {
                Digest::Manifest(id) => chunk_list(*id, c.stat.size, source),
                Digest::Chunk(_) | Digest::Inline(_) => None,
            };
            mine.push((i, compare(c, Some(list.as_deref()))));
        }
        take_plain(&mut mine);
        for h in helpers {
            mine.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        mine
    });
    // Every index was taken exactly once: in order again.
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Reads `c` and says whether it is what the index recorded: `list` is, for a
/// manifest, its chunk list as read (`Some(None)`: not readable, so no proof).
fn compare(c: &Candidate, list: Option<Option<&[ChunkRef]>>) -> Result<bool> {
    // No read when nothing could prove it: a manifest whose list is not to be had,
    // or more bytes than one chunk holds recorded as one chunk.
    match (&c.digest, list) {
        (Digest::Manifest(_), None | Some(None)) => return Ok(false),
        (Digest::Chunk(_), _) if c.stat.size > CHUNK_MAX as u64 => return Ok(false),
        _ => {}
    }
    let data = std::fs::read(&c.full).at(&c.full)?;
    if data.len() as u64 != c.stat.size {
        return Ok(false);
    }
    Ok(match (&c.digest, list) {
        (Digest::Inline(bytes), _) => *bytes == data,
        // A chunk of an older format version has another id: no proof.
        (Digest::Chunk(id), _) => {
            ObjectId::hash_object(ObjectKind::Chunk, FORMAT_VERSION, &data) == *id
        }
        (Digest::Manifest(_), Some(Some(list))) => spans_match(&data, list),
        (Digest::Manifest(_), _) => false,
    })
}

/// Whether `data` is exactly the chunks of `list`, in order (each chunk's id of the
/// current format version).
fn spans_match(data: &[u8], list: &[ChunkRef]) -> bool {
    let mut at = 0usize;
    for c in list {
        let Some(span) = data.get(at..at + c.len as usize) else {
            return false;
        };
        if ObjectId::hash_object(ObjectKind::Chunk, FORMAT_VERSION, span) != c.id {
            return false;
        }
        at += span.len();
    }
    at == data.len()
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
    fn the_tips_bytes_are_proven_and_nothing_else() {
        let t = tempfile::tempdir().unwrap();
        let (candidates, store, datas) = setup(t.path());
        assert!(snapgraph::chunk::cut_points(&datas[2]).len() > 1);
        assert_eq!(snapgraph::chunk::cut_points(&datas[5]).len(), 1);
        // In one batch or one file a batch, on one thread or two.
        for (threads, batch, parallel) in
            [(1, BATCH_BYTES, PARALLEL_MIN), (2, 1, 0), (2, 70_000, 0)]
        {
            let same = same_in_batches(&candidates, &store, threads, batch, parallel).unwrap();
            assert_eq!(same, vec![true; datas.len()], "{threads} {batch}");
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
        // A length that moved since the stat: no proof.
        let mut longer = datas[3].clone();
        longer.push(0);
        std::fs::write(&candidates[3].full, &longer).unwrap();
        assert_eq!(
            same_as_tip(&candidates[3..4], &store, 1).unwrap(),
            vec![false]
        );
        std::fs::write(&candidates[3].full, &datas[3]).unwrap();
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
        // A file gone since its stat: the error names it.
        std::fs::remove_file(&candidates[4].full).unwrap();
        let err = same_as_tip(&candidates, &store, 2).unwrap_err();
        assert!(err.to_string().contains("f4"), "{err}");
    }
}
