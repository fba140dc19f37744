//! Turning bytes into content objects (inline, one chunk, or chunks plus a manifest
//! tree); `emit` emits them.

use std::sync::{Arc, Mutex, OnceLock};

use crate::boundary::{split, varint_len};
use crate::chunk::{cut_points, first_cut, CHUNK_MAX, CHUNK_MIN};
use crate::id::ObjectId;
use crate::limits::INLINE_MAX;
use crate::object::manifest::{ChunkRef, Manifest, ManifestChild};
use crate::object::tree::Content;
use crate::object::{
    canonical_cut, chunk_id, encode_version, ObjectError, ObjectKind, FORMAT_VERSION,
};
use crate::pool::{buffer_to_fill, Buffer, BufferPool};

pub(crate) mod over;

/// Bytes of a file (or of the state), shared between workspace clones. They are
/// either the caller's `Arc<[u8]>` (`write_shared`), a buffer this engine filled (a
/// copy `write` made, a checkout assembled in place: no zero fill, no second copy
/// into an `Arc<[u8]>`; given back to the workspace's [`BufferPool`] when dropped, if
/// it has one), or the chunk buffers
/// an owning source handed a checkout, kept as they are until first read.
#[derive(Debug, Clone)]
pub(crate) enum FileBytes {
    /// Shared with the caller.
    Shared(Arc<[u8]>),
    /// Assembled by this engine.
    Assembled(Arc<Vec<u8>>),
    /// Assembled by this engine in a buffer of a [`BufferPool`], given back to it
    /// when the last holder drops it.
    Pooled(Arc<Buffer>),
    /// Held as its chunks: joined into one buffer the first time the bytes are
    /// borrowed as a slice.
    Chunks(Arc<ChunkList>),
}

impl FileBytes {
    /// No bytes.
    pub fn empty() -> Self {
        Self::Shared(Arc::from(&[][..]))
    }

    /// The number of bytes, without joining a chunk list.
    pub fn len(&self) -> usize {
        match self {
            Self::Shared(b) => b.len(),
            Self::Assembled(b) => b.len(),
            Self::Pooled(b) => b.len(),
            Self::Chunks(c) => c.len,
        }
    }

    /// Whether the bytes start with `prefix`, without joining a chunk list.
    pub fn starts_with(&self, prefix: &[u8]) -> bool {
        match self {
            Self::Chunks(c) => c.starts_with(prefix),
            _ => self[..].starts_with(prefix),
        }
    }
}

impl core::ops::Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Self::Shared(b) => b,
            Self::Assembled(b) => b,
            Self::Pooled(b) => b,
            Self::Chunks(c) => c.joined(),
        }
    }
}

impl From<Arc<[u8]>> for FileBytes {
    fn from(bytes: Arc<[u8]>) -> Self {
        Self::Shared(bytes)
    }
}

impl From<Vec<u8>> for FileBytes {
    fn from(bytes: Vec<u8>) -> Self {
        Self::Assembled(Arc::new(bytes))
    }
}

impl FileBytes {
    /// `bytes` this engine filled, given back to `pool` when the last holder drops
    /// them.
    pub fn pooled(bytes: Vec<u8>, pool: Option<&BufferPool>) -> Self {
        match pool.filter(|_| bytes.capacity() >= crate::pool::POOL_MIN) {
            Some(pool) => Self::Pooled(Arc::new(Buffer::new(bytes, pool))),
            None => Self::from(bytes),
        }
    }

    /// A copy of the caller's `data`: large data (at least [`PARALLEL_FILE_MIN`]) on
    /// up to `threads` threads, each copying its share; data of at least
    /// [`POOL_MIN`](crate::pool::POOL_MIN) into a buffer from `pool` when one fits
    /// (already faulted in: the copy touches no fresh page).
    pub fn copy_of(data: &[u8], threads: usize, pool: Option<&BufferPool>) -> Self {
        let pool = pool.filter(|_| data.len() >= crate::pool::POOL_MIN);
        let threads = if data.len() >= PARALLEL_FILE_MIN {
            threads
        } else {
            1
        };
        if pool.is_none() && threads <= 1 {
            return Self::Shared(Arc::from(data));
        }
        let mut out = buffer_to_fill(pool, data.len());
        parallel_copy(&mut out, data, threads);
        Self::pooled(out, pool)
    }

    /// A copy of the caller's `data` (at least [`PARALLEL_FILE_MIN`] bytes) and its
    /// objects, made in one pass on up to `threads` threads: each thread cuts and
    /// hashes its segment (as [`ContentObjects::build_parallel`] does) and copies each
    /// chunk it cut into the segment's place in the new buffer right after hashing
    /// it, while the bytes are in its cache. The data is read from memory once, and
    /// the copy is split over the threads with the hashing. The buffer comes from
    /// `pool` when one fits; the objects are those [`ContentObjects::build`] makes.
    pub fn copy_and_build(
        data: &[u8],
        threads: usize,
        pool: Option<&BufferPool>,
    ) -> (Self, ContentObjects) {
        let pool = pool.filter(|_| data.len() >= crate::pool::POOL_MIN);
        let mut out = buffer_to_fill(pool, data.len());
        let objects = if data.len() <= INLINE_MAX {
            out.copy_from_slice(data);
            ContentObjects::build(data)
        } else {
            let threads = threads.clamp(1, (data.len() / SEGMENT_MIN).max(1));
            let starts = segment_starts(data.len(), threads);
            let spans = spans_from(data, &starts, Some(&mut out));
            ContentObjects::from_spans(data.len() as u64, spans)
        };
        (Self::pooled(out, pool), objects)
    }
}

/// Content held as the buffers its chunks were read into, each with the offset its
/// body starts at (after the stored header): a checkout from an owning source keeps
/// them instead of copying them into one buffer. The first borrow of the whole
/// content joins them (one copy, once) and frees them.
#[derive(Debug)]
pub(crate) struct ChunkList {
    len: usize,
    /// The buffers and body offsets, in order; emptied when joined.
    parts: Mutex<Vec<(Vec<u8>, usize)>>,
    joined: OnceLock<Vec<u8>>,
}

impl ChunkList {
    /// The content made of the bodies `parts[i].0[parts[i].1..]`, in order.
    pub fn new(parts: Vec<(Vec<u8>, usize)>) -> Self {
        Self {
            len: parts.iter().map(|(b, at)| b.len() - at).sum(),
            parts: Mutex::new(parts),
            joined: OnceLock::new(),
        }
    }

    fn parts(&self) -> std::sync::MutexGuard<'_, Vec<(Vec<u8>, usize)>> {
        // Nothing panics while the lock is held but an allocation failure; the parts
        // are whole either way.
        self.parts.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn joined(&self) -> &[u8] {
        self.joined.get_or_init(|| {
            let parts = std::mem::take(&mut *self.parts());
            let mut out = Vec::with_capacity(self.len);
            for (bytes, at) in &parts {
                out.extend_from_slice(&bytes[*at..]);
            }
            out
        })
    }

    fn starts_with(&self, prefix: &[u8]) -> bool {
        if let Some(joined) = self.joined.get() {
            return joined.starts_with(prefix);
        }
        if prefix.len() > self.len {
            return false;
        }
        let mut rest = prefix;
        for (bytes, at) in self.parts().iter() {
            if rest.is_empty() {
                break;
            }
            let body = &bytes[*at..];
            let n = rest.len().min(body.len());
            if body[..n] != rest[..n] {
                return false;
            }
            rest = &rest[n..];
        }
        // Joined meanwhile (the parts were taken): ask the joined bytes.
        rest.is_empty() || self.joined().starts_with(prefix)
    }
}

/// One chunk of some content: where it is in the bytes, its id, and the format
/// version its id was computed by (a file checked out from an older version keeps
/// its chunks, and an edit of it keeps those it does not touch).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    pub id: ObjectId,
    pub start: usize,
    pub len: u32,
    pub version: u8,
}

/// One encoded manifest node.
#[derive(Debug, Clone)]
pub(crate) struct MSlot {
    pub id: ObjectId,
    pub stored: Arc<[u8]>,
    /// How many items (chunks or children) it holds.
    pub items: u32,
}

/// The objects that store some bytes. Kept beside the bytes so that an unchanged file
/// is never re-chunked or re-hashed.
#[derive(Debug, Clone)]
pub(crate) struct ContentObjects {
    pub size: u64,
    pub content: Content,
    /// Chunks in order; empty for inline content.
    pub chunks: Vec<Span>,
    /// Manifest levels, leaves first, the last holding the root; empty unless the
    /// content has more than one chunk.
    pub manifest: Vec<Vec<MSlot>>,
}

impl ContentObjects {
    /// Chunks and hashes `data`.
    pub fn build(data: &[u8]) -> Self {
        if data.len() <= INLINE_MAX {
            return Self::inline(data);
        }
        let cuts = cut_points(data);
        Self::from_spans(data.len() as u64, hash_spans(data, &cuts))
    }

    /// [`build`](Self::build) on up to `threads` threads: each cuts and hashes a
    /// segment, and the segments' cut sequences are joined where they meet the serial
    /// one (see [`spans_from`]). The result is identical to `build`.
    pub fn build_parallel(data: &[u8], threads: usize) -> Self {
        if data.len() <= INLINE_MAX || threads <= 1 || data.len() < PARALLEL_FILE_MIN {
            return Self::build(data);
        }
        Self::from_spans(data.len() as u64, parallel_spans(data, threads))
    }

    /// The objects of `data`, knowing that `old_data` was stored as `old`: chunks
    /// before the first changed byte and after the last one are reused, and only the
    /// region between is cut and hashed again. The result is identical to
    /// [`build`](Self::build).
    ///
    /// A FastCDC cut at `e` is decided by the bytes from the previous cut up to and
    /// *including* the byte at `e` (the first byte of the next chunk: the gear hash
    /// that matches has taken it in), and a cut at an even offset from its chunk's
    /// start is tested only while a second byte follows it (the scan tests positions
    /// in pairs). So an old cut `e` is a cut of the new data when the bytes up to
    /// `e + 1` are unchanged (`e + 2 <= prefix`); a cut made by the end of the old data
    /// never is. And once a new cut lands, inside the unchanged suffix, on the position
    /// of an old cut, every later cut is an old cut shifted by the change in length
    /// (the suffix runs to the end, so each chunk sees the same bytes and the same
    /// remaining length).
    pub fn rebuild(old_data: &[u8], old: &ContentObjects, data: &[u8]) -> Self {
        if data.len() <= INLINE_MAX || old.chunks.is_empty() || old_data.len() as u64 != old.size {
            return Self::build(data);
        }
        if std::ptr::eq(old_data, data) {
            // The very bytes `old` was built from (a write that built its objects as
            // it copied): nothing to compare.
            return old.clone();
        }
        let prefix = common_prefix(old_data, data);
        if prefix == data.len() && data.len() == old_data.len() {
            return old.clone();
        }
        let max_suffix = old_data.len().min(data.len()) - prefix;
        let suffix = common_suffix(old_data, data, max_suffix);
        let end_of = |s: &Span| s.start + s.len as usize;
        // `prefix <= old_data.len()`, so no kept chunk was cut by the old data's end.
        let keep = old.chunks.partition_point(|s| end_of(s) + 2 <= prefix);
        let mut spans: Vec<Span> = old.chunks[..keep].to_vec();
        let mut pos = spans.last().map_or(0, end_of);
        let old_ends: Vec<usize> = old.chunks.iter().map(end_of).collect();
        let tail_new = data.len() - suffix;
        let tail_old = old_data.len() - suffix;
        while pos < data.len() {
            let span = next_span(data, pos);
            pos += span.len as usize;
            spans.push(span);
            if pos >= tail_new && pos < data.len() {
                let old_pos = pos - tail_new + tail_old;
                if let Ok(k) = old_ends.binary_search(&old_pos) {
                    spans.extend(old.chunks[k + 1..].iter().map(|s| Span {
                        start: s.start - old_pos + pos,
                        ..*s
                    }));
                    break;
                }
            }
        }
        Self::from_spans(data.len() as u64, spans)
    }

    /// Builds the objects of many contents on up to `threads` threads, in order.
    /// A content larger than a thread's share of the total is split across all
    /// threads; the others are dealt out in groups of about equal bytes. Contents with a reusable previous version are
    /// rebuilt around their change instead.
    pub fn build_many(jobs: &[Pending], threads: usize) -> Vec<Self> {
        let mut out: Vec<Option<Self>> = jobs
            .iter()
            .map(|j| match (&j.over, &j.prev) {
                (Some(chunks), _) if j.data.len() > INLINE_MAX => Some(Self::from_spans(
                    j.data.len() as u64,
                    over::spans_over(chunks.clone(), &j.data, threads),
                )),
                (_, Some(p)) => Some(Self::rebuild(&p.0, &p.1, &j.data)),
                _ => None,
            })
            .collect();
        let datas: Vec<FileBytes> = jobs
            .iter()
            .zip(&out)
            .map(|(j, o)| {
                if o.is_some() {
                    FileBytes::empty()
                } else {
                    j.data.clone()
                }
            })
            .collect();
        let fresh = Self::build_all(&datas, threads);
        for (slot, built) in out.iter_mut().zip(fresh) {
            if slot.is_none() {
                *slot = Some(built);
            }
        }
        out.into_iter()
            .zip(jobs)
            .map(|(o, j)| o.unwrap_or_else(|| Self::build(&j.data)))
            .collect()
    }

    fn build_all(datas: &[FileBytes], threads: usize) -> Vec<Self> {
        let total: usize = datas.iter().map(|d| d.len()).sum();
        if threads <= 1 || total < PARALLEL_TOTAL_MIN {
            return datas.iter().map(|d| Self::build(d)).collect();
        }
        let mut out: Vec<Option<Self>> = (0..datas.len()).map(|_| None).collect();
        // Split a content across threads only when it is more than a thread's fair
        // share: many large files are better dealt out whole (no merge, no sync).
        let split_min = PARALLEL_FILE_MIN.max(total / threads);
        let small: Vec<usize> = (0..datas.len())
            .filter(|&i| datas[i].len() < split_min)
            .collect();
        for (i, d) in datas.iter().enumerate() {
            if d.len() >= split_min {
                out[i] = Some(Self::build_parallel(d, threads));
            }
        }
        let small_bytes: usize = small.iter().map(|&i| datas[i].len()).sum();
        let per_thread = small_bytes.div_ceil(threads).max(1);
        let mut groups: Vec<Vec<usize>> = vec![Vec::new()];
        let mut acc = 0;
        for &i in &small {
            if acc >= per_thread && groups.len() < threads {
                groups.push(Vec::new());
                acc = 0;
            }
            acc += datas[i].len();
            if let Some(g) = groups.last_mut() {
                g.push(i);
            }
        }
        let built: Vec<Vec<(usize, Self)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = groups
                .iter()
                .map(|g| {
                    scope.spawn(move || {
                        g.iter()
                            .map(|&i| (i, Self::build(&datas[i])))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        for (i, objects) in built.into_iter().flatten() {
            out[i] = Some(objects);
        }
        out.into_iter()
            .zip(datas)
            .map(|(o, d)| o.unwrap_or_else(|| Self::build(d)))
            .collect()
    }

    fn inline(data: &[u8]) -> Self {
        Self {
            size: data.len() as u64,
            content: Content::Inline(data.to_vec()),
            chunks: Vec::new(),
            manifest: Vec::new(),
        }
    }

    /// The objects for content of `size` bytes already cut into `spans` (at least one;
    /// `size` above [`INLINE_MAX`]), with manifest nodes of the current version.
    pub fn from_spans(size: u64, spans: Vec<Span>) -> Self {
        Self::from_spans_in(size, spans, FORMAT_VERSION)
    }

    /// [`from_spans`](Self::from_spans) with manifest nodes of format `version` (a
    /// manifest's nodes are all of its root's version).
    pub fn from_spans_in(size: u64, spans: Vec<Span>, version: u8) -> Self {
        if spans.len() == 1 {
            return Self {
                size,
                content: Content::Chunk(spans[0].id),
                chunks: spans,
                manifest: Vec::new(),
            };
        }
        let manifest = build_manifest(&spans, version);
        let root = manifest
            .last()
            .and_then(|l| l.first())
            .map(|s| s.id)
            .unwrap_or(ObjectId::from_bytes([0; 32]));
        Self {
            size,
            content: Content::Manifest(root),
            chunks: spans,
            manifest,
        }
    }

    /// The objects of the file whose manifest root is `root`, of `size` bytes and
    /// chunked as `spans`, proven cut canonically: the rebuild in the root's version
    /// ([`crate::object::canonical_cut`]), or [`ObjectError::Malformed`] naming
    /// `root`. Checkout keeps what it returns; the reachability walks only check.
    pub fn canonical(root: ObjectId, size: u64, spans: &[Span]) -> Result<Self, ObjectError> {
        canonical_cut(root, ObjectKind::Manifest, |version| {
            let built = Self::from_spans_in(size, spans.to_vec(), version);
            // A single chunk is no manifest: never `root`'s rebuild.
            let id = match built.content {
                Content::Manifest(id) => id,
                _ => ObjectId::from_bytes([0; 32]),
            };
            (id, built)
        })
    }

    /// What a file left in the store by a shallow checkout is known by: its size and
    /// content (the root reference), without chunk spans or manifest nodes, so that
    /// its tree entry can be re-emitted unchanged. There is nothing to
    /// [`emit`](Self::emit) from it.
    pub fn reference(size: u64, content: Content) -> Self {
        Self {
            size,
            content,
            chunks: Vec::new(),
            manifest: Vec::new(),
        }
    }

    /// Whether these are only a [`reference`](Self::reference) to stored objects.
    pub fn is_reference(&self) -> bool {
        self.chunks.is_empty() && !matches!(self.content, Content::Inline(_))
    }
}

/// Length of the longest common prefix, compared a block at a time (memcmp speed).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Length of the longest common suffix, at most `max`.
fn common_suffix(a: &[u8], b: &[u8], max: usize) -> usize {
    const BLOCK: usize = 4096;
    let (la, lb) = (a.len(), b.len());
    let mut k = 0;
    while k + BLOCK <= max && a[la - k - BLOCK..la - k] == b[lb - k - BLOCK..lb - k] {
        k += BLOCK;
    }
    while k < max && a[la - k - 1] == b[lb - k - 1] {
        k += 1;
    }
    k
}

/// A file's previous bytes and the objects they were stored as.
pub(crate) type Previous = (FileBytes, Arc<ContentObjects>);

/// One content a commit must build objects for.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub data: FileBytes,
    /// Its previous version's bytes and objects, when worth reusing.
    pub prev: Option<Arc<Previous>>,
    /// Its previous version's chunk list, read from the store, when that version's
    /// bytes are not at hand (see [`over`]).
    pub over: Option<Vec<ChunkRef>>,
}

/// Files at least this large keep their previous version across a write, so that a
/// small edit re-chunks only around the change.
pub(crate) const REUSE_MIN: usize = 1 << 20;

/// Contents at least this large are cut and hashed by several threads at once.
pub(crate) const PARALLEL_FILE_MIN: usize = 4 << 20;
/// Below this many bytes in total, a commit hashes on the calling thread. At 1 MiB a
/// release's commit (77 new files, about 0.9 MB) cut and hashed them all on one
/// thread, 2 ms while the other core idled; a thread's start is about 0.1 ms.
pub(crate) const PARALLEL_TOTAL_MIN: usize = 512 << 10;
/// The smallest segment one thread cuts on its own: bounds the threads a content is
/// split across, so that a segment is many chunks (the work wasted before two cut
/// sequences meet is a few chunks).
const SEGMENT_MIN: usize = 8 * CHUNK_MAX;

/// `data` copied into `out` (of the same length) by up to `threads` threads, each
/// copying (and so faulting in, for a fresh buffer) its share of the pages.
fn parallel_copy(out: &mut [u8], data: &[u8], threads: usize) {
    if threads <= 1 {
        out.copy_from_slice(data);
        return;
    }
    let share = data.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        let mut parts = out.chunks_mut(share).zip(data.chunks(share));
        let first = parts.next();
        for (to, from) in parts {
            scope.spawn(move || to.copy_from_slice(from));
        }
        if let Some((to, from)) = first {
            to.copy_from_slice(from);
        }
    });
}

/// Bytes copied per `memcpy` call when copying a chunk that was just hashed (or
/// verified). glibc's `memcpy` moves a copy of more than about 2 KiB (and less than
/// the L2 cache) with `rep movsb`, which is fast but which valgrind's callgrind counts
/// as one instruction per byte; pieces of this size run as a vector loop (about 40
/// bytes an instruction), so the instruction-count harness counts the copy for what
/// it costs in time next to hashing, not 16 KiB chunk copies as 64 M instructions.
const COPY_PIECE: usize = 2048;

/// Copies `from` into `to` (of the same length), [`COPY_PIECE`] bytes at a time.
pub(crate) fn copy_into(to: &mut [u8], from: &[u8]) {
    for (t, f) in to.chunks_mut(COPY_PIECE).zip(from.chunks(COPY_PIECE)) {
        t.copy_from_slice(f);
    }
}

/// Appends `from` to `to`, [`COPY_PIECE`] bytes at a time.
pub(crate) fn append(to: &mut Vec<u8>, from: &[u8]) {
    for f in from.chunks(COPY_PIECE) {
        to.extend_from_slice(f);
    }
}

/// Chunk spans of `data` for the given cut points, hashed on the calling thread.
/// The spans of a file made of `chunks` (in order) whose format versions are
/// `versions`: each chunk's offset is the sum of the lengths before it.
pub(crate) fn spans_of(chunks: &[ChunkRef], versions: &[u8]) -> Vec<Span> {
    let mut at = 0;
    chunks
        .iter()
        .zip(versions)
        .map(|(c, &version)| {
            let span = Span {
                id: c.id,
                start: at,
                len: c.len,
                version,
            };
            at += c.len as usize;
            span
        })
        .collect()
}

fn hash_spans(data: &[u8], cuts: &[usize]) -> Vec<Span> {
    let mut start = 0;
    cuts.iter()
        .map(|&end| {
            let span = Span {
                id: chunk_id(&data[start..end]),
                start,
                len: (end - start) as u32,
                version: FORMAT_VERSION,
            };
            start = end;
            span
        })
        .collect()
}

/// The chunk spans of `data` (those [`ContentObjects::build`] makes: the same cut
/// points, ids and order), cut and hashed by up to `threads` threads, each over a
/// segment of about equal bytes.
pub(crate) fn parallel_spans(data: &[u8], threads: usize) -> Vec<Span> {
    let threads = threads.clamp(1, (data.len() / SEGMENT_MIN).max(1));
    spans_from(data, &segment_starts(data.len(), threads), None)
}

/// Where each of `threads` segments of `len` bytes starts: about equal shares, on
/// multiples of CHUNK_MAX (a run of one repeated byte is cut every CHUNK_MAX bytes
/// from wherever cutting starts, so segments that start on that grid meet the serial
/// cuts there at once).
fn segment_starts(len: usize, threads: usize) -> Vec<usize> {
    (0..threads)
        .map(|k| k * len / threads / CHUNK_MAX * CHUNK_MAX)
        .collect()
}

/// One thread's share of [`spans_from`].
struct Segment {
    /// The chunks cut from the segment's start up to the first that ends at or past
    /// the next segment's start (to the end of the data for the last segment); true
    /// chunks of the data once a true cut sequence has met them.
    own: Vec<Span>,
    /// After `own`, the chunks cut further until this sequence met another segment's
    /// (empty for the last segment, or when cutting reached the end of the data).
    bridge: Vec<Span>,
    /// Where the bridge met: segment `m`'s `own[j..]` continue this sequence.
    joins: Option<(usize, usize)>,
}

/// The chunk spans of `data`, cut from each of `starts` (strictly increasing, the
/// first 0, all below `data.len()`) on its own thread, then joined into the serial
/// sequence; equal to cutting and hashing serially, whatever the starts.
///
/// Why the join is exact: FastCDC makes each cut from the previous one, looking only
/// at the bytes from there to at most [`CHUNK_MAX`] further (or the end of the data),
/// so the serial cut sequence is the orbit of 0 under the function
/// `next(p) = p + first_cut(&data[p..])`, and cutting `data[s..]` from any `s` is the
/// orbit of `s` under the same function (the slice ends where the data does). Two
/// orbits that share one point are equal from there on. Segment 0's chunks are true
/// (its orbit is the serial one). Each segment but the last, once its own chunks pass
/// the next segment's start, keeps cutting (the bridge) until one of its cut points is
/// a cut point of a later segment `m`'s own chunks (the first met, in order of
/// position); from that point the serial sequence is segment `m`'s, own chunks then
/// bridge, and so on by induction. A bridge that meets nothing runs to the end of the
/// data, so the result is exact even if no two sequences ever meet (only slower).
/// Work wasted: the chunks of a segment before a true sequence meets it, a few chunks
/// on data that is not periodic.
///
/// With `copy` (as long as `data`), each segment's thread also copies the bytes from
/// its start to the next segment's start into `copy`, a chunk at a time right after
/// hashing it (its own chunks cover that range: they run from its start to at or
/// past the next start).
fn spans_from(data: &[u8], starts: &[usize], copy: Option<&mut [u8]>) -> Vec<Span> {
    use std::sync::mpsc;
    let len = data.len();
    let n = starts.len();
    // Each segment's share of `copy`: from its start to the next one's.
    let mut shares: Vec<Option<&mut [u8]>> = Vec::with_capacity(n);
    match copy {
        Some(mut rest) => {
            for k in 0..n {
                let end = starts.get(k + 1).copied().unwrap_or(len);
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(end - starts[k]);
                shares.push(Some(head));
                rest = tail;
            }
        }
        None => shares.resize_with(n, || None),
    }
    // Each segment's cut points (its start, then each own chunk's end), sent to every
    // earlier segment once its own chunks are cut. A sender dropped unsent (its thread
    // panicked) ends the waits of the others; the panic is resumed at the join.
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..n)
        .map(|_| mpsc::channel::<(usize, std::sync::Arc<Vec<usize>>)>())
        .unzip();
    let run = |k: usize,
               to_earlier: Vec<mpsc::Sender<(usize, std::sync::Arc<Vec<usize>>)>>,
               from_later: mpsc::Receiver<(usize, std::sync::Arc<Vec<usize>>)>,
               mut share: Option<&mut [u8]>|
     -> Segment {
        let start = starts[k];
        let next_start = starts.get(k + 1).copied().unwrap_or(len);
        let mut cuts = crate::chunk::chunker(&data[start..]).map(|c| Span {
            id: chunk_id(&data[start + c.offset..start + c.offset + c.length]),
            start: start + c.offset,
            len: c.length as u32,
            version: FORMAT_VERSION,
        });
        let mut own = Vec::new();
        let mut points = vec![start];
        let mut pos = start;
        while pos < next_start {
            let Some(span) = cuts.next() else { break };
            pos = span.start + span.len as usize;
            if let Some(to) = share.as_deref_mut() {
                // The chunk was just cut and hashed: copy it while it is in cache.
                let end = pos.min(next_start);
                copy_into(
                    &mut to[span.start - start..end - start],
                    &data[span.start..end],
                );
            }
            points.push(pos);
            own.push(span);
        }
        let points = std::sync::Arc::new(points);
        for tx in &to_earlier {
            let _ = tx.send((k, points.clone()));
        }
        drop(to_earlier);
        let mut bridge = Vec::new();
        let mut joins = None;
        let mut later: Vec<Option<std::sync::Arc<Vec<usize>>>> = vec![None; n];
        while k + 1 < n && pos < len {
            // The later segment whose own chunks cover `pos`: the last starting at or
            // before it (its own chunks end at or past the next one's start).
            let m = starts.partition_point(|&s| s <= pos) - 1;
            while later[m].is_none() {
                match from_later.recv() {
                    Ok((from, p)) => later[from] = Some(p),
                    // A later thread died: its panic is resumed at the join.
                    Err(_) => {
                        return Segment {
                            own,
                            bridge,
                            joins: None,
                        }
                    }
                }
            }
            if let Some(Ok(j)) = later[m].as_ref().map(|p| p.binary_search(&pos)) {
                joins = Some((m, j));
                break;
            }
            let Some(span) = cuts.next() else { break };
            pos = span.start + span.len as usize;
            bridge.push(span);
        }
        Segment { own, bridge, joins }
    };
    let segments: Vec<Segment> = std::thread::scope(|scope| {
        let mut rxs = rxs.into_iter();
        let mut shares = shares.into_iter();
        let first_rx = rxs.next();
        let first_share = shares.next().flatten();
        let handles: Vec<_> = rxs
            .zip(shares)
            .enumerate()
            .map(|(i, (rx, share))| {
                let k = i + 1;
                let to_earlier = txs[..k].to_vec();
                scope.spawn(move || run(k, to_earlier, rx, share))
            })
            .collect();
        drop(txs);
        let first = match first_rx {
            Some(rx) => run(0, Vec::new(), rx, first_share),
            None => Segment {
                own: Vec::new(),
                bridge: Vec::new(),
                joins: None,
            },
        };
        std::iter::once(first)
            .chain(
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))),
            )
            .collect()
    });
    let mut out: Vec<Span> = Vec::with_capacity(len / CHUNK_MIN + 1);
    let (mut k, mut from) = (0, 0);
    while let Some(segment) = segments.get(k) {
        out.extend_from_slice(&segment.own[from..]);
        out.extend_from_slice(&segment.bridge);
        match segment.joins {
            Some((m, j)) => (k, from) = (m, j),
            None => break,
        }
    }
    // Every path above ends at the end of the data; cut serially from wherever the
    // join stopped should one not have.
    let mut pos = out.last().map_or(0, |s| s.start + s.len as usize);
    while pos < len {
        let span = next_span(data, pos);
        pos += span.len as usize;
        out.push(span);
    }
    out
}

/// Builds the manifest tree of a chunk list, from scratch, of format `version`.
/// Levels are leaves first.
fn build_manifest(spans: &[Span], version: u8) -> Vec<Vec<MSlot>> {
    let mut levels: Vec<Vec<MSlot>> = Vec::new();
    let refs: Vec<ChunkRef> = spans
        .iter()
        .map(|s| ChunkRef {
            id: s.id,
            len: s.len,
        })
        .collect();
    let mut sizes: Vec<u64> = Vec::new();
    let mut leaves = Vec::new();
    for r in split(
        &refs,
        |c| c.id.low_u32(),
        |c| ObjectId::LEN + varint_len(u64::from(c.len)),
    ) {
        let node = Manifest::Leaf(refs[r.clone()].to_vec());
        sizes.push(refs[r.clone()].iter().map(|c| u64::from(c.len)).sum());
        leaves.push(slot(&node, r.len(), version));
    }
    levels.push(leaves);
    let mut level = 1u8;
    while levels.last().map(Vec::len).unwrap_or(0) > 1 {
        let below = levels.last().map(Vec::as_slice).unwrap_or(&[]);
        let children: Vec<ManifestChild> = below
            .iter()
            .zip(&sizes)
            .map(|(s, &size)| ManifestChild { id: s.id, size })
            .collect();
        let mut next = Vec::new();
        let mut next_sizes = Vec::new();
        for r in split(
            &children,
            |c| c.id.low_u32(),
            |c| ObjectId::LEN + varint_len(c.size),
        ) {
            next_sizes.push(children[r.clone()].iter().map(|c| c.size).sum());
            let node = Manifest::Internal {
                level,
                children: children[r.clone()].to_vec(),
            };
            next.push(slot(&node, r.len(), version));
        }
        levels.push(next);
        sizes = next_sizes;
        level += 1;
    }
    levels
}

fn slot(node: &Manifest, items: usize, version: u8) -> MSlot {
    let stored = encode_version(ObjectKind::Manifest, version, node);
    MSlot {
        id: ObjectId::hash_stored(&stored),
        stored: stored.into(),
        items: items as u32,
    }
}

/// The chunk of `data` that starts at `pos` (a cut point), in the current version.
fn next_span(data: &[u8], pos: usize) -> Span {
    let len = first_cut(&data[pos..]);
    Span {
        id: chunk_id(&data[pos..pos + len]),
        start: pos,
        len: len as u32,
        version: FORMAT_VERSION,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::tests_support::pseudo_random;
    use crate::emit::Emitter;

    #[test]
    fn a_chunk_list_reads_as_its_bodies_joined() {
        let parts = vec![
            (b"hdHEL".to_vec(), 2),
            (b"LO".to_vec(), 0),
            (b"xx".to_vec(), 2),
            (b"hd, world".to_vec(), 2),
        ];
        let bytes = FileBytes::Chunks(Arc::new(ChunkList::new(parts)));
        assert_eq!(bytes.len(), 12);
        // Prefixes within a part, across parts and empty parts, longer than all.
        for (prefix, expected) in [
            (&b""[..], true),
            (b"HE", true),
            (b"HELLO, w", true),
            (b"HELLO, world", true),
            (b"HELLx", false),
            (b"HELLO, worldX", false),
        ] {
            assert_eq!(bytes.starts_with(prefix), expected, "{prefix:?}");
        }
        let clone = bytes.clone();
        assert_eq!(&bytes[..], b"HELLO, world");
        // Joined once, shared by clones; prefixes are then read from the joined bytes.
        assert_eq!(clone.as_ptr(), bytes.as_ptr());
        assert!(clone.starts_with(b"HELLO"));
        assert!(!clone.starts_with(b"HELP"));
    }

    #[test]
    fn representation_follows_size() {
        assert!(matches!(
            ContentObjects::build(b"tiny").content,
            Content::Inline(_)
        ));
        assert!(matches!(
            ContentObjects::build(&[7u8; 4000]).content,
            Content::Chunk(_)
        ));
        let big = pseudo_random(1 << 20, 3);
        let objs = ContentObjects::build(&big);
        assert!(matches!(objs.content, Content::Manifest(_)));
        assert_eq!(
            objs.chunks.iter().map(|s| s.len as usize).sum::<usize>(),
            big.len()
        );
    }

    fn spans_of(spans: &[Span]) -> Vec<(ObjectId, usize, u32)> {
        spans.iter().map(|s| (s.id, s.start, s.len)).collect()
    }

    #[test]
    fn parallel_paths_give_serial_ids() {
        for (len, seed) in [(9 << 20, 21u64), (17 << 20, 22), ((4 << 20) + 12345, 23)] {
            let data = pseudo_random(len, seed);
            let serial = ContentObjects::build(&data);
            for threads in [2, 3, 4, 7] {
                let par = ContentObjects::build_parallel(&data, threads);
                assert_eq!(par.content, serial.content, "{len} {threads}");
                assert_eq!(spans_of(&par.chunks), spans_of(&serial.chunks));
            }
        }
        // Repetitive data (every chunk at the maximum size) merges as well, on the
        // grid and off it.
        let zeros = vec![0u8; 9 << 20];
        let serial = hash_spans(&zeros, &crate::chunk::cut_points(&zeros));
        assert_eq!(spans_of(&parallel_spans(&zeros, 2)), spans_of(&serial));
        assert_eq!(
            spans_of(&spans_from(&zeros, &[0, 12345, 5 << 20], None)),
            spans_of(&serial)
        );
        let many: Vec<FileBytes> = (0..300u64)
            .map(|i| FileBytes::from(pseudo_random((i as usize * 977) % 40_000, i)))
            .chain(std::iter::once(FileBytes::from(pseudo_random(5 << 20, 99))))
            .collect();
        let jobs: Vec<Pending> = many
            .iter()
            .map(|d| Pending {
                data: d.clone(),
                prev: None,
                over: None,
            })
            .collect();
        let par = ContentObjects::build_many(&jobs, 2);
        for (d, p) in many.iter().zip(&par) {
            assert_eq!(p.content, ContentObjects::build(d).content);
        }
    }

    #[test]
    fn rebuild_equals_build_for_every_kind_of_edit() {
        let base = pseudo_random(3 << 20, 31);
        let old = ContentObjects::build(&base);
        let mut seed = 5u64;
        let mut next = |m: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % m
        };
        let mut cases: Vec<Vec<u8>> = vec![
            base.clone(),
            base[..base.len() - 1].to_vec(),
            [&base[..], b"appended"].concat(),
            [b"prepended".as_slice(), &base[..]].concat(),
            base[..100].to_vec(),
            base[..10].to_vec(),
            vec![0u8; 2 << 20],
        ];
        for _ in 0..40 {
            let mut d = base.clone();
            let at = next(d.len());
            match next(3) {
                0 => d[at..(at + 16).min(base.len())].fill(0xEE),
                1 => {
                    let n = next(70_000);
                    d.splice(at..at, std::iter::repeat_n(7u8, n));
                }
                _ => {
                    let n = next(70_000).min(d.len() - at);
                    d.drain(at..at + n);
                }
            }
            cases.push(d);
        }
        for (i, d) in cases.iter().enumerate() {
            let fresh = ContentObjects::build(d);
            let reused = ContentObjects::rebuild(&base, &old, d);
            assert_eq!(reused.content, fresh.content, "case {i}");
            assert_eq!(
                reused
                    .chunks
                    .iter()
                    .map(|s| (s.id, s.start, s.len))
                    .collect::<Vec<_>>(),
                fresh
                    .chunks
                    .iter()
                    .map(|s| (s.id, s.start, s.len))
                    .collect::<Vec<_>>(),
                "case {i}"
            );
        }
    }

    /// The chunks of `data` as (id, start, len), to compare two builds.
    fn cuts_of(objects: &ContentObjects) -> Vec<(ObjectId, usize, u32)> {
        objects
            .chunks
            .iter()
            .map(|s| (s.id, s.start, s.len))
            .collect()
    }

    /// Edits at an old cut point itself: FastCDC's cut at `e` is decided by the byte
    /// at `e` (the next chunk's first), and a cut at an even offset is tested only
    /// while a byte follows it. `rebuild` kept a chunk whose end was the first
    /// changed byte, so it cut differently from `build` (other ids for the same
    /// bytes) whenever an edit began exactly at a cut.
    #[test]
    fn rebuild_equals_build_for_edits_at_a_cut() {
        let base = pseudo_random(1 << 20, 31);
        let old = ContentObjects::build(&base);
        let ends: Vec<usize> = old
            .chunks
            .iter()
            .map(|s| s.start + s.len as usize)
            .filter(|&e| e + 2 < base.len())
            .take(24)
            .collect();
        assert!(ends.len() >= 20);
        for &e in &ends {
            let flipped = |at: usize| {
                let mut d = base.clone();
                d[at] ^= 0xFF;
                d
            };
            let cases = [
                ("the byte at the cut", flipped(e)),
                ("the byte after the cut", flipped(e + 1)),
                ("the last byte of the chunk", flipped(e - 1)),
                ("cut after the cut's byte", base[..e + 1].to_vec()),
                ("cut two bytes after", base[..e + 2].to_vec()),
                ("cut at the cut", base[..e].to_vec()),
                (
                    "inserted at the cut",
                    [&base[..e], b"x", &base[e..]].concat(),
                ),
            ];
            for (what, d) in cases {
                let fresh = ContentObjects::build(&d);
                let reused = ContentObjects::rebuild(&base, &old, &d);
                assert_eq!(cuts_of(&reused), cuts_of(&fresh), "{what}, cut at {e}");
                assert_eq!(reused.content, fresh.content, "{what}, cut at {e}");
            }
        }
    }

    #[test]
    fn older_chunks_keep_their_version_through_an_edit() {
        // A large file stored by format 1, as a checkout of a version-1 commit holds it.
        let base = pseudo_random(3 << 20, 41);
        let mut start = 0;
        let spans: Vec<Span> = crate::chunk::cut_points(&base)
            .into_iter()
            .map(|end| {
                let id = ObjectId::hash_object(ObjectKind::Chunk, 1, &base[start..end]);
                let span = Span {
                    id,
                    start,
                    len: (end - start) as u32,
                    version: 1,
                };
                start = end;
                span
            })
            .collect();
        let old = ContentObjects::from_spans_in(base.len() as u64, spans, 1);
        assert!(old.manifest.iter().flatten().all(|m| m.stored[1] == 1));
        let mut data = base.clone();
        data[1 << 20] ^= 0xFF;
        let new = ContentObjects::rebuild(&base, &old, &data);
        // The chunks the edit did not touch keep their version-1 ids, the new one is of
        // this version, and the manifest is written anew in this version.
        let fresh = new
            .chunks
            .iter()
            .filter(|s| s.version == FORMAT_VERSION)
            .count();
        assert!((1..=3).contains(&fresh), "{fresh} new chunks");
        assert_eq!(
            new.chunks.len() - fresh,
            new.chunks.iter().filter(|s| s.version == 1).count()
        );
        assert!(new
            .manifest
            .iter()
            .flatten()
            .all(|m| m.stored[1] == FORMAT_VERSION));
        // Every emitted object is stored in its own version and hashes to its id.
        let have = crate::emit::Have::default();
        let mut out = Emitter::new(&have);
        new.emit(&FileBytes::from(data.clone()), &mut out);
        let mut versions = std::collections::BTreeSet::new();
        for (id, stored) in out.out.iter() {
            assert_eq!(ObjectId::hash_stored(stored), *id);
            versions.insert(stored[1]);
        }
        assert_eq!(
            versions.into_iter().collect::<Vec<_>>(),
            [1, FORMAT_VERSION]
        );
        // Owned stored bytes are the same as the borrowed ones.
        let listed: Vec<(ObjectId, Vec<u8>)> =
            out.out.iter().map(|(i, b)| (*i, b.to_vec())).collect();
        assert_eq!(out.out.into_iter().collect::<Vec<_>>(), listed);
    }

    #[test]
    fn small_edit_rewrites_little_manifest() {
        let mut data = pseudo_random(64 << 20, 11);
        let before = ContentObjects::build(&data);
        let old: std::collections::HashSet<ObjectId> = before
            .manifest
            .iter()
            .flatten()
            .map(|s| s.id)
            .chain(before.chunks.iter().map(|s| s.id))
            .collect();
        data[30 << 20..(30 << 20) + 16].copy_from_slice(&[0xAB; 16]);
        let after = ContentObjects::build(&data);
        let mut new_bytes = 0;
        for s in after.manifest.iter().flatten() {
            if !old.contains(&s.id) {
                new_bytes += s.stored.len();
            }
        }
        for s in &after.chunks {
            if !old.contains(&s.id) {
                new_bytes += s.len as usize + 2;
            }
        }
        assert!(new_bytes < 64 << 10, "{new_bytes} new bytes");
        assert!(after.manifest.len() >= 2);
    }

    #[cfg(not(target_family = "wasm"))]
    mod parallel_cuts {
        use super::*;
        use proptest::prelude::*;

        /// Data with stretches of one repeated byte (cut at the maximum size from
        /// wherever cutting starts, so segments that start off the grid never meet
        /// the serial sequence inside them) between pseudo-random ones.
        fn data() -> impl Strategy<Value = Vec<u8>> {
            (1usize..(1 << 20), any::<u64>(), 0u8..4).prop_map(|(len, seed, kind)| {
                let mut d = pseudo_random(len, seed);
                match kind {
                    0 => {}
                    1 => d.fill(0),
                    _ => {
                        let period = (seed as usize % 200_000) + 1;
                        for (i, b) in d.iter_mut().enumerate() {
                            if (i / period).is_multiple_of(usize::from(kind)) {
                                *b = 7;
                            }
                        }
                    }
                }
                d
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(48))]

            /// Cutting from any split points (on their own threads) and joining
            /// gives exactly the serial chunks, including when no two sequences meet
            /// before the end.
            #[test]
            fn parallel_cuts_equal_serial(
                data in data(),
                splits in proptest::collection::vec(any::<u32>(), 0..6),
            ) {
                let mut starts: Vec<usize> = splits
                    .iter()
                    .map(|&s| s as usize % data.len())
                    .chain([0])
                    .collect();
                starts.sort_unstable();
                starts.dedup();
                let serial = hash_spans(&data, &crate::chunk::cut_points(&data));
                prop_assert_eq!(spans_of(&spans_from(&data, &starts, None)), spans_of(&serial));
                // Copying as it cuts: the same chunks, and every byte in its place.
                let mut copy = vec![0xA5u8; data.len()];
                let spans = spans_from(&data, &starts, Some(&mut copy));
                prop_assert_eq!(spans_of(&spans), spans_of(&serial));
                prop_assert!(copy == data);
            }

            /// An edit placed at, just before or just after one of the old cut
            /// points (where a re-cut is most easily wrong: the cut's deciding byte,
            /// the pair the scan tests, the old data's end) rebuilds to exactly the
            /// chunks a fresh build makes.
            #[test]
            fn rebuild_equals_build_around_a_cut(
                data in data(),
                pick in any::<u32>(),
                shift in -2i64..=2,
                kind in 0u8..4,
                len in 1usize..70_000,
            ) {
                let old = ContentObjects::build(&data);
                let ends: Vec<usize> = old.chunks.iter().map(|s| s.start + s.len as usize).collect();
                let e = ends[pick as usize % ends.len()] as i64;
                let at = (e + shift).clamp(0, data.len() as i64) as usize;
                let d = crate::chunk::tests_support::edited(&data, at, kind, len);
                let fresh = ContentObjects::build(&d);
                let reused = ContentObjects::rebuild(&data, &old, &d);
                prop_assert_eq!(cuts_of(&reused), cuts_of(&fresh));
                prop_assert_eq!(reused.content, fresh.content);
            }

            /// The one-pass copy of `write` (large data, several threads, with or
            /// without a pool whose buffer holds other bytes) is the data, and its
            /// objects are those the serial build makes.
            #[test]
            fn copy_and_build_equals_copy_then_build(
                data in data(),
                threads in 1usize..5,
                pooled in any::<bool>(),
            ) {
                let pool = crate::pool::BufferPool::new(64 << 20);
                if pooled {
                    let stale = vec![0x5Au8; data.len().max(crate::pool::POOL_MIN)];
                    drop(crate::pool::Buffer::new(stale, &pool));
                }
                let (bytes, objects) = FileBytes::copy_and_build(&data, threads, Some(&pool));
                prop_assert!(bytes[..] == data[..]);
                let serial = ContentObjects::build(&data);
                prop_assert_eq!(&objects.content, &serial.content);
                prop_assert_eq!(spans_of(&objects.chunks), spans_of(&serial.chunks));
            }
        }
    }
}
