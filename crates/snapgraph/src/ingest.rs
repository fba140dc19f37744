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

use std::sync::Arc;

use crate::chunk::{chunker, CHUNK_MAX};
use crate::content::{ContentObjects, Span};
use crate::emit::ObjectSet;
use crate::limits::INLINE_MAX;
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
}
