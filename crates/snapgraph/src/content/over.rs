//! Finding a previous version's chunks in new bytes by hashing, when the previous
//! bytes are not at hand (a file a shallow or lazy checkout left in the store,
//! written over): the chunk list of the stored version is given, and where one of
//! its chunks starts at the position being cut, the new bytes there are hashed and
//! compared with its id instead of being cut by FastCDC. An edit of a large file
//! then costs one BLAKE3 pass over it and a FastCDC pass over the changed region
//! only. Used by [`crate::ingest::Ingest`] (streamed bytes) and by a commit that
//! holds the new bytes ([`ContentObjects::build_many`](super::ContentObjects::build_many)).
//!
//! The spans are exactly those of a whole cut. A FastCDC cut at `e` is decided by
//! the bytes from the previous cut up to and including the byte at `e` (the next
//! chunk's first), and one at an even offset is tested only while a byte follows
//! it. So an old chunk that matches is taken only when the old chunk after it
//! matches too, just after it (its first byte is the deciding byte, and it holds the
//! byte that follows, being the last chunk only when both files end with it), or
//! when it was the old file's last chunk and the new file ends with it (the same
//! bytes to the end: the same cut). The rest of the scan's decision (its
//! normalization switch, its cap at [`CHUNK_MAX`]) follows from the same bytes and at
//! least those remaining. Old chunks are looked for where the file's start puts them
//! (an unchanged prefix), and where its expected length puts them (an unchanged
//! tail, shifted by the change in length); hashing that finds no match is bounded
//! ([`WASTE_MAX`] more than it matched; past it the rest is cut as without a
//! previous version).

use super::{parallel_spans, ContentObjects, Span, PARALLEL_FILE_MIN};
use crate::chunk::{first_cut, CHUNK_MAX};
use crate::id::ObjectId;
use crate::object::manifest::ChunkRef;
use crate::object::{chunk_id, FORMAT_VERSION};

/// Hashing that found no match, beyond what matched, after which the previous
/// version's chunks are no longer looked for.
pub(crate) const WASTE_MAX: u64 = 4 << 20;

/// Bytes cut afresh, with no chunk of the previous version found yet, after which a
/// caller that can cut the rest on several threads ([`spans_over`]) stops looking:
/// a file rewritten throughout then costs what a whole cut costs, not a cut on one
/// thread.
pub(crate) const FRESH_MAX: usize = 1 << 20;

/// A previous version's chunks, as they are looked for in new bytes (see the module
/// documentation).
#[derive(Debug)]
pub(crate) struct Previous {
    chunks: Vec<ChunkRef>,
    /// Where each chunk starts in the previous version.
    starts: Vec<u64>,
    /// Where the previous version's chunks are looked for: old offset = new
    /// offset - shift. The shift of the last match first, then 0 (an unchanged
    /// prefix) and the expected change in length (an unchanged tail).
    shifts: [i64; 3],
    /// Chunk `.0` matched at new offset `.1`, waiting for its own next chunk.
    matched: Option<(usize, u64)>,
    /// Bytes of chunks taken, and bytes hashed without a match.
    pub(crate) taken: u64,
    pub(crate) wasted: u64,
}

/// What [`Previous::take`] found at an offset.
enum Found {
    /// The previous version's chunk of this many bytes, with its id.
    Chunk(ObjectId, u32),
    /// Nothing to take: cut here.
    Cut,
    /// Not decidable with the bytes in hand.
    More,
}

impl Previous {
    /// The previous version stored as `chunks` (in order, as its manifest lists
    /// them), the new bytes expected to be `expected` long (a guess: it only decides
    /// where the previous version's tail is looked for). `None` for no chunks.
    pub(crate) fn new(chunks: Vec<ChunkRef>, expected: u64) -> Option<Self> {
        if chunks.is_empty() {
            return None;
        }
        let mut starts = Vec::with_capacity(chunks.len());
        let mut at = 0u64;
        for c in &chunks {
            starts.push(at);
            at += u64::from(c.len);
        }
        let shift = i64::try_from(expected)
            .unwrap_or(i64::MAX)
            .saturating_sub(i64::try_from(at).unwrap_or(i64::MAX));
        Some(Self {
            chunks,
            starts,
            shifts: [0, 0, shift],
            matched: None,
            taken: 0,
            wasted: 0,
        })
    }

    /// The old chunk starting at new offset `pos` under `shift`, if any.
    fn at(&self, pos: u64, shift: i64) -> Option<usize> {
        let old = i64::try_from(pos).ok()?.checked_sub(shift)?;
        let old = u64::try_from(old).ok()?;
        self.starts.binary_search(&old).ok()
    }

    /// Whether old chunk `k` is what `window` (the bytes from new offset `pos`)
    /// starts with: remembered, or hashed.
    fn matches(&mut self, k: usize, pos: u64, window: &[u8]) -> bool {
        let len = self.chunks[k].len as usize;
        if self.matched == Some((k, pos)) {
            return true;
        }
        if window.len() < len {
            return false;
        }
        let same = chunk_id(&window[..len]) == self.chunks[k].id;
        if !same {
            self.wasted += len as u64;
        }
        same
    }

    /// Whether hashing has found too little to go on looking ([`WASTE_MAX`]).
    fn gave_up(&self) -> bool {
        self.wasted > self.taken + WASTE_MAX
    }

    /// Looks for an old chunk to take at new offset `pos`, `window` the bytes in hand
    /// from there (all the rest of the file when `last`).
    fn take(&mut self, pos: u64, window: &[u8], last: bool) -> Found {
        if self.gave_up() {
            return Found::Cut;
        }
        for i in 0..self.shifts.len() {
            let shift = self.shifts[i];
            if self.shifts[..i].contains(&shift) {
                continue;
            }
            let Some(k) = self.at(pos, shift) else {
                continue;
            };
            let len = self.chunks[k].len as usize;
            let next = self.chunks.get(k + 1).map(|c| c.len as usize);
            // The bytes a decision needs: the chunk and the one after it, or (the old
            // file's last chunk) the chunk and the end of the file.
            let need = len + next.unwrap_or(0);
            if next.is_none() && window.len() > len {
                // The new file goes on past the old one's end here.
                continue;
            }
            if window.len() < need || (next.is_none() && !last) {
                if !last {
                    return Found::More;
                }
                continue;
            }
            if !self.matches(k, pos, window) {
                continue;
            }
            let taken = match next {
                // The old file's last chunk, and the new file's (checked above).
                None => true,
                Some(_) => {
                    let after = pos + len as u64;
                    let ok = self.matches(k + 1, after, &window[len..]);
                    if ok {
                        self.matched = Some((k + 1, after));
                    }
                    ok
                }
            };
            if taken {
                self.taken += len as u64;
                self.shifts[0] = shift;
                return Found::Chunk(self.chunks[k].id, self.chunks[k].len);
            }
        }
        Found::Cut
    }
}

/// The chunk spans of `data` (those a whole cut makes), found over the previous
/// version stored as `chunks`: the chunks it still holds hashed, not cut (see the
/// module documentation). For a commit that holds the new bytes and builds its
/// objects from the spans. Where the hashing gives up (little of the old version
/// left, or none found in the first [`FRESH_MAX`] bytes), the rest is cut on up to
/// `threads` threads, as a whole cut of new bytes would be.
pub(crate) fn spans_over(chunks: Vec<ChunkRef>, data: &[u8], threads: usize) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut cut = 0;
    if let Some(mut prev) = Previous::new(chunks, data.len() as u64) {
        cut = cut_window(&mut spans, 0, &mut prev, data, true, &mut |_, _| {}, true);
    }
    if cut < data.len() {
        // Cutting the rest from a cut of the whole is cutting the whole from there.
        let rest = &data[cut..];
        let tail = if threads > 1 && rest.len() >= PARALLEL_FILE_MIN {
            parallel_spans(rest, threads)
        } else {
            ContentObjects::build(rest).chunks
        };
        spans.extend(tail.into_iter().map(|s| Span {
            start: s.start + cut,
            ..s
        }));
    }
    spans
}

/// Cuts `window` (the file's bytes from offset `cut`; all the rest of it when
/// `last`) into chunks over the previous version `prev`, one at a time: the
/// previous version's chunk where one matches, a FastCDC cut where none does,
/// up to the last chunk the bytes in hand decide. Pushes their spans, calls
/// `fresh` with each chunk cut afresh (its id and bytes), and returns the bytes
/// taken. With `give_up`, stops where the hashing gives up, or where [`FRESH_MAX`]
/// bytes were cut with nothing taken, for the caller to cut the rest.
pub(crate) fn cut_window(
    spans: &mut Vec<Span>,
    cut: u64,
    prev: &mut Previous,
    window: &[u8],
    last: bool,
    fresh: &mut dyn FnMut(ObjectId, &[u8]),
    give_up: bool,
) -> usize {
    let mut start = 0;
    let mut cut_fresh = 0;
    while start < window.len()
        && !(give_up && (prev.gave_up() || (prev.taken == 0 && cut_fresh >= FRESH_MAX)))
    {
        let pos = cut + start as u64;
        let rest = &window[start..];
        let (id, len, cut_here) = match prev.take(pos, rest, last) {
            Found::Chunk(id, len) => (id, len as usize, false),
            Found::More => break,
            Found::Cut => {
                // A cut is final once CHUNK_MAX bytes from its chunk's start are in
                // hand.
                if !last && rest.len() < CHUNK_MAX {
                    break;
                }
                let len = first_cut(rest);
                (chunk_id(&rest[..len]), len, true)
            }
        };
        if cut_here {
            fresh(id, &rest[..len]);
            cut_fresh += len;
        }
        spans.push(Span {
            id,
            start: pos as usize,
            len: len as u32,
            version: FORMAT_VERSION,
        });
        start += len;
    }
    start
}
/// The chunk list a manifest of `objects` holds (for tests that cut over it).
#[cfg(test)]
pub(crate) fn refs_of(objects: &ContentObjects) -> Vec<ChunkRef> {
    objects
        .chunks
        .iter()
        .map(|s| ChunkRef {
            id: s.id,
            len: s.len,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::tests_support::pseudo_random;

    /// New bytes that share nothing with the old version: the commit's cut stops
    /// looking after FRESH_MAX bytes (the rest is cut on the commit's threads), and
    /// the spans are a whole cut's either way.
    #[test]
    fn a_rewritten_file_stops_looking_after_a_mebibyte() {
        let old = ContentObjects::build(&pseudo_random(6 << 20, 1));
        let refs = || refs_of(&old);
        let new = pseudo_random(6 << 20, 2);
        let mut prev = Previous::new(refs(), new.len() as u64).expect("chunks");
        let mut spans = Vec::new();
        let looked = cut_window(&mut spans, 0, &mut prev, &new, true, &mut |_, _| {}, true);
        assert!(
            (FRESH_MAX..FRESH_MAX + CHUNK_MAX).contains(&looked),
            "{looked} bytes cut before giving up"
        );
        assert_eq!(prev.taken, 0);
        let cuts = |spans: &[Span]| -> Vec<(ObjectId, usize, u32)> {
            spans.iter().map(|s| (s.id, s.start, s.len)).collect()
        };
        assert_eq!(
            cuts(&spans_over(refs(), &new, 2)),
            cuts(&ContentObjects::build(&new).chunks)
        );
    }
}
