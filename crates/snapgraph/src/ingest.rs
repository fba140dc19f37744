//! A file's bytes cut into its content objects as they arrive, so a caller can store
//! a file larger than its memory and then put it in a workspace by reference.
//!
//! [`Workspace::write`](crate::Workspace::write) and its kin hold a file's bytes until
//! the commit cuts them: committing a 10 GiB file costs 10 GiB of memory. An
//! [`Ingest`] takes the bytes in pieces of any size, cuts them where a commit of the
//! whole file would ([`chunk::cut_points`](crate::chunk::cut_points): FastCDC is decided by at most
//! [`CHUNK_MAX`] bytes from a chunk's start, so a cut is final once that many bytes
//! past its chunk's start are in hand) and hands back the chunk objects as they are
//! made; [`finish`](Ingest::finish) adds the manifest nodes and returns an
//! [`Ingested`], the file's content reference, which
//! [`Workspace::write_ingested`](crate::Workspace::write_ingested) puts at a path. The
//! objects and ids are exactly those a commit of the same bytes makes, so the two
//! deduplicate against each other.
//!
//! The objects are the caller's to store, as those of
//! [`Workspace::hand_over`](crate::Workspace::hand_over) are: before it persists the
//! commit, which counts them as held and does not emit them. The workspace holds
//! only the reference, as for a file a shallow checkout left in the store.
//!
//! # Over a previous version
//!
//! [`Workspace::ingest_over`](crate::Workspace::ingest_over) gives an `Ingest` the
//! chunk list of the version of the file the workspace holds unloaded (the
//! committed one, left in the store by a lazy or shallow checkout): where one of
//! those chunks starts at the position being cut, its bytes are hashed and compared
//! with its id instead of being cut by FastCDC, and a chunk that matches is neither
//! cut nor handed back (the store holds it). So an edit to a large file costs one
//! BLAKE3 pass over it and a FastCDC pass over the changed region only, and hands
//! back only the changed chunks and the manifest nodes. The objects are exactly
//! those of a plain `Ingest`: why is written in `content::over`, which a commit
//! holding the new bytes uses too.

use std::sync::Arc;

use crate::chunk::{chunker, CHUNK_MAX};
use crate::content::over::{cut_window, Previous};
use crate::content::{ContentObjects, Span};
use crate::emit::ObjectSet;
use crate::limits::INLINE_MAX;
use crate::object::manifest::ChunkRef;
use crate::object::tree::Content;
use crate::object::{chunk_id, encode_chunk, FORMAT_VERSION};

/// Bytes an [`Ingest`] gathers before it cuts: at most this much plus the last
/// piece pushed is held.
const HOLD: usize = 1 << 20;

/// Stored bytes of objects worth gathering (with [`ObjectSet::append`]) before one
/// store write, for a caller storing what [`Ingest::push`] hands back (about a MiB
/// at a time): each write of a store is a transaction and a sync, and a SQLite
/// store keeps a batch's large records outside its database only from 1 MiB on.
/// Memory stays bounded by this plus the `Ingest`'s own.
pub const PUT_BYTES: u64 = 4 << 20;

/// A file being cut into its content objects as its bytes arrive. See the
/// [module documentation](self).
///
/// ```
/// use snapgraph::ingest::Ingest;
/// use snapgraph::{CommitOptions, ObjectId, Workspace};
///
/// let data: Vec<u8> = (0..400_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
/// let mut store: std::collections::HashMap<ObjectId, Vec<u8>> = Default::default();
/// let mut ingest = Ingest::new();
/// for piece in data.chunks(100_000) {
///     store.extend(ingest.push(piece)); // the caller stores these
/// }
/// let (file, last) = ingest.finish();
/// store.extend(last);
///
/// let mut ws = Workspace::new();
/// ws.write_ingested("/big.bin", file)?;
/// let streamed = ws.commit(CommitOptions::new())?; // emits no chunk of big.bin
///
/// let mut whole = Workspace::new();
/// whole.write("/big.bin", &data)?;
/// assert_eq!(whole.commit(CommitOptions::new())?.id(), streamed.id());
/// # Ok::<(), snapgraph::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct Ingest {
    /// Bytes not yet cut: the next chunk starts at `buf[0]`.
    buf: Vec<u8>,
    /// Bytes cut so far (the next chunk's offset in the file).
    cut: u64,
    spans: Vec<Span>,
    /// The chunks of the file's previous version, while worth looking for.
    prev: Option<Box<Previous>>,
}

/// A file's content reference made by [`Ingest::finish`]: what
/// [`Workspace::write_ingested`](crate::Workspace::write_ingested) puts at a path.
/// Only an [`Ingest`] makes one, so its ids are those of the bytes it was given.
#[derive(Debug, Clone)]
pub struct Ingested {
    pub(crate) objects: ContentObjects,
}

impl Ingested {
    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.objects.size
    }

    /// The object the file's content is stored as (a chunk or a manifest root);
    /// `None` for a file of at most 64 bytes, kept inline in its tree entry.
    pub fn content_id(&self) -> Option<crate::ObjectId> {
        self.objects.content.object().map(|(id, _)| id)
    }
}

impl Ingest {
    /// A file with no bytes yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A file with no bytes yet whose previous version was stored as `chunks` (in
    /// order, as its manifest lists them), expected to be `expected` bytes long (a
    /// guess: it only decides where the previous version's tail is looked for). See
    /// the module documentation, "Over a previous version".
    pub(crate) fn over(chunks: Vec<ChunkRef>, expected: u64) -> Self {
        Self {
            prev: Previous::new(chunks, expected).map(Box::new),
            ..Self::default()
        }
    }

    /// Bytes of the previous version's chunks taken so far (none for an `Ingest`
    /// without one): what was hashed and not cut.
    pub fn reused(&self) -> u64 {
        self.prev.as_ref().map_or(0, |p| p.taken)
    }

    /// Bytes pushed so far.
    pub fn len(&self) -> u64 {
        self.cut + self.buf.len() as u64
    }

    /// Whether nothing was pushed yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `bytes` to the file; returns the chunk objects this completed (none
    /// until about a MiB is gathered), in file order.
    pub fn push(&mut self, bytes: &[u8]) -> ObjectSet {
        self.buf.extend_from_slice(bytes);
        let mut out = ObjectSet::new();
        if self.buf.len() >= HOLD + CHUNK_MAX {
            self.cut_some(false, &mut out);
        }
        out
    }

    /// Ends the file: its content reference, and the objects not handed out yet (the
    /// last chunks, then the manifest nodes, leaves first).
    pub fn finish(mut self) -> (Ingested, ObjectSet) {
        let mut out = ObjectSet::new();
        let size = self.len();
        if size <= INLINE_MAX as u64 {
            // Nothing was cut: a cut needs a megabyte in hand.
            let data = std::mem::take(&mut self.buf);
            let objects = ContentObjects::reference(size, Content::Inline(data));
            return (Ingested { objects }, out);
        }
        self.cut_some(true, &mut out);
        let built = ContentObjects::from_spans(size, std::mem::take(&mut self.spans));
        for level in &built.manifest {
            for slot in level {
                out.insert_shared(slot.id, Arc::clone(&slot.stored));
            }
        }
        let objects = ContentObjects::reference(size, built.content);
        (Ingested { objects }, out)
    }

    /// Cuts the bytes in hand into chunks, up to the last cut that more bytes could
    /// not move (all of them when `last`), into `out`.
    fn cut_some(&mut self, last: bool, out: &mut ObjectSet) {
        if self.prev.is_some() {
            return self.cut_over(last, out);
        }
        let window = &self.buf[..];
        let mut start = 0;
        for c in chunker(window) {
            // A cut is final once CHUNK_MAX bytes from its chunk's start are in hand.
            if !last && start + CHUNK_MAX > window.len() {
                break;
            }
            let body = &window[c.offset..c.offset + c.length];
            let id = chunk_id(body);
            out.insert_owned(id, encode_chunk(FORMAT_VERSION, body));
            self.spans.push(Span {
                id,
                start: (self.cut + c.offset as u64) as usize,
                len: c.length as u32,
                version: FORMAT_VERSION,
            });
            start = c.offset + c.length;
        }
        self.cut += start as u64;
        // Keep what is not cut at the buffer's start (less than CHUNK_MAX bytes: the
        // move is small, the buffer's capacity reused).
        self.buf.drain(..start);
    }

    /// [`cut_some`](Self::cut_some) with a previous version: one chunk at a time,
    /// taking the previous version's where one matches, cutting where none does.
    fn cut_over(&mut self, last: bool, out: &mut ObjectSet) {
        let Some(mut prev) = self.prev.take() else {
            return;
        };
        let taken = cut_window(
            &mut self.spans,
            self.cut,
            &mut prev,
            &self.buf,
            last,
            &mut |id, bytes| out.insert_owned(id, encode_chunk(FORMAT_VERSION, bytes)),
            false,
        );
        self.cut += taken as u64;
        self.buf.drain(..taken);
        self.prev = Some(prev);
    }

    /// The whole file at once, for a caller that holds it: what [`push`](Self::push)
    /// of `data` and [`finish`](Self::finish) make, without copying `data` into
    /// the ingest's buffer.
    pub fn whole(mut self, data: &[u8]) -> (Ingested, ObjectSet) {
        let mut out = ObjectSet::new();
        match self.prev.take() {
            Some(mut prev) if self.is_empty() && data.len() > INLINE_MAX => {
                let taken = cut_window(
                    &mut self.spans,
                    0,
                    &mut prev,
                    data,
                    true,
                    &mut |id, bytes| out.insert_owned(id, encode_chunk(FORMAT_VERSION, bytes)),
                    false,
                );
                debug_assert_eq!(taken, data.len());
                self.cut = taken as u64;
                let (file, last) = self.finish();
                out.append(last);
                (file, out)
            }
            prev => {
                self.prev = prev;
                out.append(self.push(data));
                let (file, last) = self.finish();
                out.append(last);
                (file, out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::tests_support::pseudo_random;
    use crate::content::over::{refs_of, spans_over, WASTE_MAX};
    use crate::id::ObjectId;
    use std::collections::HashSet;

    type Cuts = Vec<(ObjectId, usize, u32)>;

    fn cuts(spans: &[Span]) -> Cuts {
        spans.iter().map(|s| (s.id, s.start, s.len)).collect()
    }

    /// `data` ingested in pieces of `piece` bytes over the chunks of `old` (expected
    /// to be `expected` bytes long): its chunks, its content, the ids of the chunks
    /// handed back, and the bytes taken from the previous version.
    fn over(
        old: &ContentObjects,
        data: &[u8],
        piece: usize,
        expected: u64,
    ) -> (Cuts, Content, HashSet<ObjectId>, u64) {
        let refs: Vec<ChunkRef> = refs_of(old);
        let mut ingest = Ingest::over(refs, expected);
        let mut handed = ObjectSet::new();
        for p in data.chunks(piece.max(1)) {
            handed.append(ingest.push(p));
        }
        let size = ingest.len();
        if size <= INLINE_MAX as u64 {
            let (file, _) = ingest.finish();
            return (Vec::new(), file.objects.content, HashSet::new(), 0);
        }
        // What `finish` does, keeping the spans to compare.
        ingest.cut_some(true, &mut handed);
        let reused = ingest.reused();
        let built = ContentObjects::from_spans(size, ingest.spans.clone());
        let ids = handed.iter().map(|(id, _)| *id).collect();
        (cuts(&ingest.spans), built.content, ids, reused)
    }

    /// Checks an ingest over `old` against cutting `data` whole: the same chunks
    /// and content, every chunk not handed back one of the old ones, and every
    /// chunk handed back cut afresh. Returns the bytes taken.
    fn check(old: &ContentObjects, data: &[u8], piece: usize, expected: u64) -> u64 {
        let fresh = ContentObjects::build(data);
        let (chunks, content, handed, reused) = over(old, data, piece, expected);
        // The whole file at once: the same content, the same chunks handed back.
        let refs = refs_of(old);
        let (file, all) = Ingest::over(refs, expected).whole(data);
        assert_eq!(file.objects.content, fresh.content);
        let whole_handed: HashSet<ObjectId> = all.iter().map(|(id, _)| *id).collect();
        let chunk_ids: HashSet<ObjectId> = chunks.iter().map(|c| c.0).collect();
        assert_eq!(
            whole_handed.intersection(&chunk_ids).count(),
            handed.intersection(&chunk_ids).count()
        );
        assert_eq!(content, fresh.content);
        if data.len() > INLINE_MAX {
            assert_eq!(chunks, cuts(&fresh.chunks));
            // A commit holding the new bytes (the rest cut on two threads where the
            // hashing gives up): the same chunks.
            let refs = refs_of(old);
            assert_eq!(cuts(&spans_over(refs, data, 2)), cuts(&fresh.chunks));
        }
        let old_ids: HashSet<ObjectId> = old.chunks.iter().map(|s| s.id).collect();
        for (id, _, _) in &chunks {
            assert!(
                handed.contains(id) || old_ids.contains(id),
                "chunk {id} neither handed back nor the previous version's"
            );
        }
        reused
    }

    #[test]
    fn ingest_over_a_previous_version_cuts_as_a_whole_cut_does() {
        let base = pseudo_random(3 << 20, 7);
        let old = ContentObjects::build(&base);
        let ends: Vec<usize> = old
            .chunks
            .iter()
            .map(|s| s.start + s.len as usize)
            .collect();
        let e = ends[ends.len() / 2];
        let flipped = |at: usize| {
            let mut d = base.clone();
            d[at] ^= 0xFF;
            d
        };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("the same bytes", base.clone()),
            ("a line appended", [&base[..], b"one more line\n"].concat()),
            ("prepended", [b"header\n".as_slice(), &base[..]].concat()),
            ("a byte flipped", flipped(1 << 20)),
            ("the byte at a cut", flipped(e)),
            ("the byte after a cut", flipped(e + 1)),
            ("the byte before a cut", flipped(e - 1)),
            ("cut short after a cut's byte", base[..e + 1].to_vec()),
            ("cut short at a cut", base[..e].to_vec()),
            ("cut short", base[..base.len() - 1].to_vec()),
            (
                "a middle part removed",
                [&base[..e], &base[e + 100_000..]].concat(),
            ),
            (
                "a middle part added",
                [&base[..e], &[9u8; 70_000], &base[e..]].concat(),
            ),
            ("other bytes", pseudo_random(2 << 20, 8)),
            ("tiny", base[..40].to_vec()),
            ("empty", Vec::new()),
        ];
        for (what, d) in &cases {
            for piece in [1 << 20, 65_537, 7_919] {
                for expected in [d.len() as u64, base.len() as u64, 0] {
                    let reused = check(&old, d, piece, expected);
                    if *what == "the same bytes" {
                        assert_eq!(reused, base.len() as u64, "{what}");
                    }
                    if *what == "a line appended" && expected == d.len() as u64 {
                        // All but the last chunk (cut by the old end) taken.
                        let last = old.chunks.last().map_or(0, |s| s.len as u64);
                        assert_eq!(reused, base.len() as u64 - last, "{what}");
                    }
                }
            }
        }
    }

    #[test]
    fn an_unchanged_tail_is_found_by_the_expected_length() {
        let base = pseudo_random(3 << 20, 9);
        let old = ContentObjects::build(&base);
        let d = [b"a new first line\n".as_slice(), &base[..]].concat();
        let found = check(&old, &d, 1 << 20, d.len() as u64);
        assert!(found > (base.len() as u64) * 9 / 10, "{found} bytes taken");
        // Without the right length, only the prefix is looked at: nothing matches.
        assert_eq!(check(&old, &d, 1 << 20, base.len() as u64), 0);
    }

    #[test]
    fn hashing_that_finds_nothing_stops() {
        // A byte changed in the middle of every chunk: the cuts mostly stay, so
        // every old chunk is hashed at its place and none is the same. After
        // WASTE_MAX of misses the rest is cut without looking.
        let base = pseudo_random(12 << 20, 10);
        let old = ContentObjects::build(&base);
        let mut d = base.clone();
        for s in &old.chunks {
            d[s.start + s.len as usize / 2] ^= 1;
        }
        let refs: Vec<ChunkRef> = refs_of(&old);
        let mut ingest = Ingest::over(refs, d.len() as u64);
        let _ = ingest.push(&d);
        let wasted = ingest.prev.as_ref().map_or(0, |p| p.wasted);
        assert!(
            wasted <= WASTE_MAX + 2 * CHUNK_MAX as u64,
            "{wasted} bytes hashed in vain"
        );
        assert!(wasted >= WASTE_MAX, "{wasted}");
        check(&old, &d, 1 << 20, d.len() as u64);
    }

    #[cfg(not(target_family = "wasm"))]
    mod props {
        use super::*;
        use proptest::prelude::*;

        /// Data with runs of one byte (cut at the largest size) between random ones.
        fn data() -> impl Strategy<Value = Vec<u8>> {
            (1usize..(3 << 20), any::<u64>(), 0u8..3).prop_map(|(len, seed, kind)| {
                let mut d = pseudo_random(len, seed);
                if kind == 1 {
                    let period = (seed as usize % 300_000) + 1;
                    for (i, b) in d.iter_mut().enumerate() {
                        if (i / period).is_multiple_of(2) {
                            *b = 7;
                        }
                    }
                }
                d
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(40))]

            /// An edit anywhere, or at, just before or just after an old cut, ingested
            /// over the previous version in pieces of any size and with a right or a
            /// wrong expected length, cuts exactly as a whole cut of the new bytes.
            #[test]
            fn ingest_over_equals_a_whole_cut(
                data in data(),
                pick in any::<u32>(),
                near_cut in any::<bool>(),
                shift in -2i64..=2,
                kind in 0u8..4,
                len in 1usize..150_000,
                piece in 1usize..(1 << 21),
                exact in any::<bool>(),
            ) {
                let old = ContentObjects::build(&data);
                let ends: Vec<usize> = old.chunks.iter().map(|s| s.start + s.len as usize).collect();
                let at = if near_cut && !ends.is_empty() {
                    let e = ends[pick as usize % ends.len()] as i64;
                    (e + shift).clamp(0, data.len() as i64) as usize
                } else {
                    pick as usize % (data.len() + 1)
                };
                let d = crate::chunk::tests_support::edited(&data, at, kind, len);
                let expected = if exact { d.len() as u64 } else { data.len() as u64 };
                check(&old, &d, piece, expected);
            }
        }
    }
}
