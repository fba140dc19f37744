//! Packed snapshots: one self-contained, checksummed (optionally keyed) container of
//! a commit and every object it needs.
//!
//! Layout (all fixed-width integers little-endian; `docs/FORMAT.md` section 11):
//!
//! ```text
//! magic "SNAPGRPH" | framing u8 | meta schema u8 | min_reader u8 | hash alg u8
//! flags u16 | root commit id [32] | object count u64 | metadata len u32 | metadata
//! body: object count x (len u32 | stored object bytes)   (zstd-compressed if flagged:
//!       then body = compressed len u64 | one zstd frame)
//! trailer: BLAKE3 of everything before it [32] | keyed BLAKE3 MAC of the same [32]
//!          (the MAC only when the keyed flag is set)
//! ```
//!
//! Object ids are not stored: they are recomputed from the bytes, so every object is
//! verified by construction. Restoring checks the trailer first (a flipped bit or a
//! truncation is [`SnapshotError::Corrupt`], a wrong key [`SnapshotError::NotAuthentic`])
//! and applies nothing unless everything verifies.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{Read, Write};

use crate::emit::ObjectSet;
use crate::id::ObjectId;
use crate::limits::{Limits, RECORD_OVERHEAD};
use crate::object::{ObjectError, ObjectKind, MAX_OBJECT_SIZE};
use crate::source::{BoxError, ObjectSource};
use crate::workspace::CheckoutError;

mod snapshot;

/// The container's magic bytes.
pub const MAGIC: [u8; 8] = *b"SNAPGRPH";
/// The framing version this engine writes and the highest it reads.
pub const FRAMING_VERSION: u8 = 1;
/// The metadata schema version this engine writes.
pub const METADATA_SCHEMA: u8 = 1;
/// Hash algorithm id of BLAKE3-256.
pub const HASH_BLAKE3: u8 = 1;

/// Flag: the trailer carries a keyed MAC.
pub const FLAG_KEYED: u16 = 1 << 0;
/// Flag: the body is one zstd frame.
pub const FLAG_ZSTD: u16 = 1 << 1;
/// Flag: the snapshot leaves files out (restoring keeps the workspace's files).
pub const FLAG_NO_FILES: u16 = 1 << 2;
/// Flag: the snapshot leaves the state out (restoring keeps the workspace's state).
pub const FLAG_NO_STATE: u16 = 1 << 3;
const KNOWN_FLAGS: u16 = FLAG_KEYED | FLAG_ZSTD | FLAG_NO_FILES | FLAG_NO_STATE;

const HEADER_LEN: usize = 8 + 4 + 2 + 32 + 8 + 4;
const MAX_METADATA: usize = 64 << 10;

/// A 32-byte key for authenticated snapshots (a BLAKE3 keyed-hash key).
pub type SnapshotKey = [u8; 32];

/// What to leave out of a snapshot, and whether to compress it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotOptions {
    /// Leave the files out: restoring such a snapshot keeps the workspace's files.
    pub exclude_files: bool,
    /// Leave the state out: restoring such a snapshot keeps the workspace's state.
    pub exclude_state: bool,
    /// Compress the body with zstd (level 3).
    pub compress: bool,
}

/// How a packed snapshot is restored: one value for
/// [`Workspace::restore_snapshot_with`](crate::Workspace::restore_snapshot_with),
/// [`restore_snapshot_from`](crate::Workspace::restore_snapshot_from) and
/// [`from_snapshot_with`](crate::Workspace::from_snapshot_with).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[must_use]
pub struct RestoreOptions<'a> {
    pub(crate) key: Option<&'a SnapshotKey>,
    pub(crate) policy: crate::CheckoutPolicy,
    pub(crate) drift: crate::DriftPolicy,
    pub(crate) limits: Option<Limits>,
}

impl<'a> RestoreOptions<'a> {
    /// Unkeyed, [`CheckoutPolicy::Superset`](crate::CheckoutPolicy::Superset),
    /// [`DriftPolicy::Strict`](crate::DriftPolicy::Strict), the workspace's limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// The snapshot must be keyed with `key`, and its MAC must verify (`None`: it
    /// must not be keyed).
    pub fn key(mut self, key: impl Into<Option<&'a SnapshotKey>>) -> Self {
        self.key = key.into();
        self
    }

    /// How the snapshot's recorded capabilities must relate to the workspace's.
    pub fn policy(mut self, policy: crate::CheckoutPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Whether recorded external reads come back with a drift check.
    pub fn drift(mut self, drift: crate::DriftPolicy) -> Self {
        self.drift = drift;
        self
    }

    /// Limits for this restore (unpacked body size included) instead of the
    /// workspace's.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }
}

/// Why a packed snapshot was refused. Nothing is applied when one is returned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The bytes do not start with the snapshot magic.
    #[error("not a snapshot (bad magic)")]
    NotASnapshot,
    /// The snapshot needs a newer reader.
    #[error("snapshot needs reader version {required}; this engine reads up to {supported}")]
    SnapshotTooNew {
        /// The snapshot's `min_reader`.
        required: u8,
        /// The newest framing version this engine reads.
        supported: u8,
    },
    /// The bytes are damaged: a checksum mismatch, truncation, or malformed framing.
    #[error("snapshot is corrupt: {reason}")]
    Corrupt {
        /// What is wrong.
        reason: String,
    },
    /// The keyed MAC does not verify: wrong key, or bytes altered by someone who
    /// recomputed the checksum.
    #[error("snapshot is not authentic: its MAC does not verify with this key")]
    NotAuthentic,
    /// The snapshot is keyed and was given to an unkeyed restore.
    #[error("snapshot is keyed: restore it with the key")]
    KeyRequired,
    /// The snapshot is not keyed and was given to a keyed restore.
    #[error("snapshot is not keyed, but a keyed restore was asked for")]
    NotKeyed,
    /// The compressed body unpacks to more than [`Limits::max_unpacked_bytes`]. Raised
    /// before the record that crosses the limit is allocated.
    #[error("snapshot body unpacks to more than the {limit}-byte limit")]
    TooLarge {
        /// The limit ([`Limits::max_unpacked_bytes`]).
        limit: u64,
    },
    /// An object inside is invalid, or the commit cannot be restored here.
    #[error(transparent)]
    Checkout(#[from] CheckoutError),
    /// Reading or writing the stream failed.
    #[error("snapshot stream: {0}")]
    Io(#[from] std::io::Error),
}

impl SnapshotError {
    fn corrupt(reason: impl Into<String>) -> Self {
        Self::Corrupt {
            reason: reason.into(),
        }
    }
}

impl From<ObjectError> for SnapshotError {
    fn from(e: ObjectError) -> Self {
        SnapshotError::Checkout(CheckoutError::Object(e))
    }
}

/// The parsed, verified contents of a snapshot. Objects borrow from the input when
/// it was a byte slice and not compressed, so restoring copies no object bytes.
#[derive(Debug)]
pub struct Unpacked<'a> {
    /// The root commit.
    pub root: ObjectId,
    /// The container flags.
    pub flags: u16,
    /// Metadata fields (unknown ones kept, never interpreted).
    pub metadata: BTreeMap<String, Vec<u8>>,
    /// The objects, by id.
    pub objects: hashbrown::HashMap<ObjectId, Cow<'a, [u8]>>,
}

impl ObjectSource for Unpacked<'_> {
    fn get(&self, id: &ObjectId) -> Result<Option<Cow<'_, [u8]>>, BoxError> {
        Ok(self.objects.get(id).map(|b| Cow::Borrowed(&b[..])))
    }
    fn contains(&self, id: &ObjectId) -> Result<bool, BoxError> {
        Ok(self.objects.contains_key(id))
    }
}

/// A writer that hashes what passes through it.
struct Hashing<W> {
    inner: W,
    plain: blake3::Hasher,
    keyed: Option<blake3::Hasher>,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.plain.update(&buf[..n]);
        if let Some(k) = &mut self.keyed {
            k.update(&buf[..n]);
        }
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes `objects` (which must hold everything `root` needs) as a snapshot.
pub fn write_packed<W: Write>(
    root: ObjectId,
    objects: &ObjectSet,
    flags: u16,
    key: Option<&SnapshotKey>,
    out: W,
) -> std::io::Result<()> {
    let flags = (flags & !FLAG_KEYED) | if key.is_some() { FLAG_KEYED } else { 0 };
    let mut w = Hashing {
        inner: out,
        plain: blake3::Hasher::new(),
        keyed: key.map(blake3::Hasher::new_keyed),
    };
    let metadata: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let meta = postcard::to_allocvec(&metadata).map_err(std::io::Error::other)?;
    w.write_all(&MAGIC)?;
    w.write_all(&[
        FRAMING_VERSION,
        METADATA_SCHEMA,
        FRAMING_VERSION,
        HASH_BLAKE3,
    ])?;
    w.write_all(&flags.to_le_bytes())?;
    w.write_all(root.as_bytes())?;
    w.write_all(&(objects.len() as u64).to_le_bytes())?;
    w.write_all(&(meta.len() as u32).to_le_bytes())?;
    w.write_all(&meta)?;
    if flags & FLAG_ZSTD != 0 {
        let compressed = compress_records(objects)?;
        w.write_all(&(compressed.len() as u64).to_le_bytes())?;
        w.write_all(&compressed)?;
    } else {
        write_records(objects, &mut w)?;
    }
    let checksum = *w.plain.finalize().as_bytes();
    let mac = w.keyed.as_ref().map(|k| *k.finalize().as_bytes());
    w.inner.write_all(&checksum)?;
    if let Some(mac) = mac {
        w.inner.write_all(&mac)?;
    }
    w.inner.flush()
}

fn write_records(objects: &ObjectSet, w: &mut impl Write) -> std::io::Result<()> {
    for (_, bytes) in objects.iter() {
        w.write_all(&(bytes.len() as u32).to_le_bytes())?;
        w.write_all(bytes)?;
    }
    Ok(())
}

/// A reader that hashes what passes through it and counts bytes.
struct Verifying<R> {
    inner: R,
    plain: blake3::Hasher,
    keyed: Option<blake3::Hasher>,
}

impl<R: Read> Verifying<R> {
    fn exact(&mut self, buf: &mut [u8]) -> Result<(), SnapshotError> {
        self.inner.read_exact(buf).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                SnapshotError::corrupt("truncated")
            } else {
                SnapshotError::Io(e)
            }
        })?;
        self.plain.update(buf);
        if let Some(k) = &mut self.keyed {
            k.update(buf);
        }
        Ok(())
    }
}

impl<R: Read> Read for Verifying<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.plain.update(&buf[..n]);
        if let Some(k) = &mut self.keyed {
            k.update(&buf[..n]);
        }
        Ok(n)
    }
}

/// The fixed header fields.
pub(crate) struct Header {
    pub flags: u16,
    pub root: ObjectId,
    count: u64,
    meta_len: usize,
}

fn parse_header(h: &[u8; HEADER_LEN], key: Option<&SnapshotKey>) -> Result<Header, SnapshotError> {
    if h[..8] != MAGIC {
        return Err(SnapshotError::NotASnapshot);
    }
    let (min_reader, hash_alg) = (h[10], h[11]);
    if min_reader > FRAMING_VERSION {
        return Err(SnapshotError::SnapshotTooNew {
            required: min_reader,
            supported: FRAMING_VERSION,
        });
    }
    if hash_alg != HASH_BLAKE3 {
        return Err(SnapshotError::corrupt(format!(
            "unknown hash algorithm {hash_alg}"
        )));
    }
    let flags = u16::from_le_bytes([h[12], h[13]]);
    if flags & !KNOWN_FLAGS != 0 {
        return Err(SnapshotError::corrupt(format!(
            "unknown flags {flags:#06x}"
        )));
    }
    match (flags & FLAG_KEYED != 0, key.is_some()) {
        (true, false) => return Err(SnapshotError::KeyRequired),
        (false, true) => return Err(SnapshotError::NotKeyed),
        _ => {}
    }
    let mut root = [0u8; 32];
    root.copy_from_slice(&h[14..46]);
    let mut count = [0u8; 8];
    count.copy_from_slice(&h[46..54]);
    let mut meta_len = [0u8; 4];
    meta_len.copy_from_slice(&h[54..58]);
    let meta_len = u32::from_le_bytes(meta_len) as usize;
    if meta_len > MAX_METADATA {
        return Err(SnapshotError::corrupt(format!(
            "metadata of {meta_len} bytes"
        )));
    }
    Ok(Header {
        flags,
        root: ObjectId::from_bytes(root),
        count: u64::from_le_bytes(count),
        meta_len,
    })
}

fn parse_metadata(meta: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, SnapshotError> {
    postcard::from_bytes(meta).map_err(|e| SnapshotError::corrupt(format!("metadata: {e}")))
}

fn finish<'a>(
    header: Header,
    metadata: BTreeMap<String, Vec<u8>>,
    objects: hashbrown::HashMap<ObjectId, Cow<'a, [u8]>>,
) -> Result<Unpacked<'a>, SnapshotError> {
    if !objects.contains_key(&header.root) {
        return Err(SnapshotError::corrupt(format!(
            "root commit {} is not inside",
            header.root
        )));
    }
    Ok(Unpacked {
        root: header.root,
        flags: header.flags,
        metadata,
        objects,
    })
}

/// Parses and verifies a snapshot held in memory. The trailer is checked before
/// anything else is parsed; uncompressed objects are borrowed, not copied. A compressed
/// body may unpack to at most the default [`Limits::max_unpacked_bytes`].
pub fn parse_packed<'a>(
    bytes: &'a [u8],
    key: Option<&SnapshotKey>,
) -> Result<Unpacked<'a>, SnapshotError> {
    parse_packed_limited(bytes, key, Limits::default().max_unpacked_bytes)
}

/// [`parse_packed`] with a limit on what a compressed body may unpack to (see
/// [`Limits::max_unpacked_bytes`]).
pub fn parse_packed_limited<'a>(
    bytes: &'a [u8],
    key: Option<&SnapshotKey>,
    max_unpacked: u64,
) -> Result<Unpacked<'a>, SnapshotError> {
    if bytes.len() < 8 || bytes[..8] != MAGIC {
        return Err(SnapshotError::NotASnapshot);
    }
    let mut h = [0u8; HEADER_LEN];
    if bytes.len() < HEADER_LEN + 32 {
        return Err(SnapshotError::corrupt("truncated"));
    }
    h.copy_from_slice(&bytes[..HEADER_LEN]);
    let header = parse_header(&h, key)?;
    let trailer_len = if key.is_some() { 64 } else { 32 };
    if bytes.len() < HEADER_LEN + header.meta_len + trailer_len {
        return Err(SnapshotError::corrupt("truncated"));
    }
    let content_end = bytes.len() - trailer_len;
    let content = &bytes[..content_end];
    let checksum = blake3::hash(content);
    if blake3::Hash::from_bytes(trailer_at(bytes, content_end)) != checksum {
        return Err(SnapshotError::corrupt(
            "checksum mismatch (damaged or truncated)",
        ));
    }
    if let Some(key) = key {
        let mac = blake3::keyed_hash(key, content);
        if blake3::Hash::from_bytes(trailer_at(bytes, content_end + 32)) != mac {
            return Err(SnapshotError::NotAuthentic);
        }
    }
    let meta_end = HEADER_LEN + header.meta_len;
    let metadata = parse_metadata(&bytes[HEADER_LEN..meta_end])?;
    let body = &bytes[meta_end..content_end];
    let mut objects = hashbrown::HashMap::new();
    if header.flags & FLAG_ZSTD != 0 {
        if body.len() < 8 {
            return Err(SnapshotError::corrupt("truncated body"));
        }
        let mut len = [0u8; 8];
        len.copy_from_slice(&body[..8]);
        if u64::from_le_bytes(len) != (body.len() - 8) as u64 {
            return Err(SnapshotError::corrupt("compressed body length mismatch"));
        }
        let mut frame = &body[8..];
        let mut dec = decoder(&mut frame)?;
        let mut records = Records::default();
        records.read(&mut dec, header.count, Some(max_unpacked))?;
        end_of_frame(&mut dec)?;
        drop(dec);
        if !frame.is_empty() {
            return Err(SnapshotError::corrupt("bytes after the zstd frame"));
        }
        objects.extend(
            records
                .into_map()
                .into_iter()
                .map(|(k, v)| (k, Cow::Owned(v))),
        );
    } else {
        let mut rest = body;
        for i in 0..header.count {
            if rest.len() < 4 {
                return Err(SnapshotError::corrupt("truncated body"));
            }
            let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            if len > MAX_OBJECT_SIZE || len > rest.len() - 4 {
                return Err(SnapshotError::corrupt(format!(
                    "object {i} declares {len} bytes, more than the body holds or the limit"
                )));
            }
            if len == 0 {
                return Err(SnapshotError::corrupt(format!("object {i} is empty")));
            }
            let stored = &rest[4..4 + len];
            rest = &rest[4 + len..];
            let id = ObjectId::hash_stored(stored);
            if objects.insert(id, Cow::Borrowed(stored)).is_some() {
                return Err(SnapshotError::corrupt(format!("object {id} appears twice")));
            }
        }
        if !rest.is_empty() {
            return Err(SnapshotError::corrupt("bytes after the last object"));
        }
    }
    finish(header, metadata, objects)
}

fn trailer_at(bytes: &[u8], at: usize) -> [u8; 32] {
    let mut t = [0u8; 32];
    t.copy_from_slice(&bytes[at..at + 32]);
    t
}

/// Reads and verifies a snapshot from a stream. With `key`, the snapshot must be keyed
/// and its MAC must verify; without, it must not be keyed. Every object is kept once,
/// in memory, by id; nothing else is buffered. A compressed body may unpack to at most
/// the default [`Limits::max_unpacked_bytes`].
pub fn read_packed<R: Read>(
    input: R,
    key: Option<&SnapshotKey>,
) -> Result<Unpacked<'static>, SnapshotError> {
    read_packed_limited(input, key, Limits::default().max_unpacked_bytes)
}

/// [`read_packed`] with a limit on what a compressed body may unpack to (see
/// [`Limits::max_unpacked_bytes`]).
pub fn read_packed_limited<R: Read>(
    input: R,
    key: Option<&SnapshotKey>,
    max_unpacked: u64,
) -> Result<Unpacked<'static>, SnapshotError> {
    let (header, metadata, records) = read_packed_records(input, key, max_unpacked)?;
    let objects = records
        .into_map()
        .into_iter()
        .map(|(k, v)| (k, Cow::Owned(v)))
        .collect();
    finish(header, metadata, objects)
}

/// What [`read_packed_records`] returns: header, metadata, objects.
pub(crate) type StreamParts = (Header, BTreeMap<String, Vec<u8>>, Records);

/// [`read_packed`], keeping chunks in arenas for a draining restore.
pub(crate) fn read_packed_records<R: Read>(
    input: R,
    key: Option<&SnapshotKey>,
    max_unpacked: u64,
) -> Result<StreamParts, SnapshotError> {
    let mut r = Verifying {
        inner: input,
        plain: blake3::Hasher::new(),
        keyed: key.map(blake3::Hasher::new_keyed),
    };
    let mut h = [0u8; HEADER_LEN];
    // Read the magic alone first so that non-snapshots get the right error.
    r.exact(&mut h[..8]).map_err(|e| match e {
        SnapshotError::Corrupt { .. } => SnapshotError::NotASnapshot,
        other => other,
    })?;
    if h[..8] != MAGIC {
        return Err(SnapshotError::NotASnapshot);
    }
    r.exact(&mut h[8..])?;
    let header = parse_header(&h, key)?;
    let mut meta = vec![0u8; header.meta_len];
    r.exact(&mut meta)?;
    let metadata = parse_metadata(&meta)?;
    let (flags, count) = (header.flags, header.count);
    let mut records = Records::default();
    if flags & FLAG_ZSTD != 0 {
        let mut len = [0u8; 8];
        r.exact(&mut len)?;
        let len = u64::from_le_bytes(len);
        let mut frame = (&mut r).take(len);
        let mut dec = decoder(&mut frame)?;
        records.read(&mut dec, count, Some(max_unpacked))?;
        end_of_frame(&mut dec)?;
        drop(dec);
        // The frame must use exactly the declared length (the decoder reads no
        // further than the frame's end, so a length that lies is caught here).
        if frame.limit() != 0 {
            return Err(SnapshotError::corrupt("compressed body length mismatch"));
        }
    } else {
        // Uncompressed, every byte kept was read from the input: no budget needed
        // beyond the input's own size.
        records.read(&mut r, count, None)?;
    }
    let checksum = *r.plain.finalize().as_bytes();
    let mac = r.keyed.as_ref().map(|k| *k.finalize().as_bytes());
    let mut trailer = [0u8; 32];
    read_trailer(&mut r.inner, &mut trailer)?;
    if blake3::Hash::from_bytes(trailer) != blake3::Hash::from_bytes(checksum) {
        return Err(SnapshotError::corrupt("checksum mismatch"));
    }
    if let Some(mac) = mac {
        read_trailer(&mut r.inner, &mut trailer)?;
        if blake3::Hash::from_bytes(trailer) != blake3::Hash::from_bytes(mac) {
            return Err(SnapshotError::NotAuthentic);
        }
    }
    let mut extra = [0u8; 1];
    if r.inner.read(&mut extra)? != 0 {
        return Err(SnapshotError::corrupt("bytes after the trailer"));
    }
    if !records.contains(&header.root) {
        return Err(SnapshotError::corrupt(format!(
            "root commit {} is not inside",
            header.root
        )));
    }
    Ok((header, metadata, records))
}

fn read_trailer(r: &mut impl Read, buf: &mut [u8; 32]) -> Result<(), SnapshotError> {
    r.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            SnapshotError::corrupt("truncated trailer")
        } else {
            SnapshotError::Io(e)
        }
    })
}

/// The largest zstd window a compressed body may declare. The writers use at most
/// 2 MiB (the C encoder at level 3) and 128 KiB (ruzstd's fastest level); the bound
/// keeps a hostile frame header from reserving a large window before any byte is
/// charged against [`Limits::max_unpacked_bytes`] (`docs/FORMAT.md` section 11).
pub const MAX_ZSTD_WINDOW: u64 = 8 << 20;

/// Compresses the body's records into one zstd frame.
///
/// On native targets the reference C encoder at level 3: the bytes the corpus was
/// generated with, and about 2x faster and smaller than the pure-Rust encoder. On
/// `wasm32` (no C toolchain) ruzstd's pure-Rust encoder. Frames of either decode with
/// [`decoder`], which is ruzstd on every target (`ARCHITECTURE.md`, "zstd").
#[cfg(not(target_family = "wasm"))]
fn compress_records(objects: &ObjectSet) -> std::io::Result<Vec<u8>> {
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 3)?;
    write_records(objects, &mut enc)?;
    enc.finish()
}

/// See the native [`compress_records`].
#[cfg(target_family = "wasm")]
fn compress_records(objects: &ObjectSet) -> std::io::Result<Vec<u8>> {
    let mut plain = Vec::new();
    write_records(objects, &mut plain)?;
    Ok(compress_pure(&plain))
}

/// ruzstd's pure-Rust encoder (what `wasm32` writes); tested on native targets too.
#[cfg_attr(not(any(test, target_family = "wasm")), allow(dead_code))]
pub(crate) fn compress_pure(plain: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(plain, ruzstd::encoding::CompressionLevel::Fastest)
}

/// One zstd frame, decoded by ruzstd (pure Rust, memory-safe on hostile input) on
/// every target, so the native tests and fuzz targets exercise the decoder the
/// browser runs.
fn decoder<R: Read>(input: R) -> Result<impl Read, SnapshotError> {
    ruzstd::decoding::StreamingDecoder::new_with_max_window_size(input, MAX_ZSTD_WINDOW)
        .map_err(|e| SnapshotError::corrupt(format!("zstd: {e}")))
}

/// The decompressed stream must end right after the last record.
fn end_of_frame(dec: &mut impl Read) -> Result<(), SnapshotError> {
    let mut extra = [0u8; 1];
    match dec.read(&mut extra) {
        Ok(0) => Ok(()),
        Ok(_) => Err(SnapshotError::corrupt("bytes after the last object")),
        Err(e) => Err(SnapshotError::corrupt(format!("zstd: {e}"))),
    }
}

/// Chunks go into arenas of this size; an arena is freed whole once all its chunks
/// are used, and being far above the allocator's mmap threshold, its memory goes back
/// to the system at once.
const ARENA: usize = 64 << 20;

/// Objects read from a stream. Chunks are packed into large arenas in stream order
/// (which is the order a checkout uses them); other objects are kept apart.
#[derive(Default)]
pub(crate) struct Records {
    pub arenas: Vec<Option<Vec<u8>>>,
    /// Chunks not yet released, per arena.
    pub live: Vec<u32>,
    /// Chunk id -> (arena, start, stored length).
    pub chunks: hashbrown::HashMap<ObjectId, (usize, usize, usize)>,
    pub others: hashbrown::HashMap<ObjectId, Vec<u8>>,
}

impl Records {
    /// Reads `count` records. With `budget`, each record is charged its length, its
    /// prefix and [`RECORD_OVERHEAD`] before it is allocated, and the read fails with
    /// [`SnapshotError::TooLarge`] once the total would exceed the budget. Every record
    /// consumes at least five input bytes, so a huge declared count with a short body
    /// ends at the body's end.
    fn read(
        &mut self,
        r: &mut impl Read,
        count: u64,
        budget: Option<u64>,
    ) -> Result<(), SnapshotError> {
        let mut used = 0u64;
        let eof = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                SnapshotError::corrupt("truncated body")
            } else {
                SnapshotError::corrupt(format!("body: {e}"))
            }
        };
        for i in 0..count {
            let mut len = [0u8; 4];
            r.read_exact(&mut len).map_err(eof)?;
            let len = u32::from_le_bytes(len) as usize;
            if len > MAX_OBJECT_SIZE {
                return Err(SnapshotError::corrupt(format!(
                    "object {i} declares {len} bytes, over the {MAX_OBJECT_SIZE}-byte limit"
                )));
            }
            if len == 0 {
                return Err(SnapshotError::corrupt(format!("object {i} is empty")));
            }
            if let Some(limit) = budget {
                used = used.saturating_add(len as u64 + 4 + RECORD_OVERHEAD);
                if used > limit {
                    return Err(SnapshotError::TooLarge { limit });
                }
            }
            let mut kind = [0u8; 1];
            r.read_exact(&mut kind).map_err(eof)?;
            // `len` is bounded by MAX_OBJECT_SIZE, so a lying length reserves at most
            // 4 MiB before its bytes are found missing.
            let id = if kind[0] == ObjectKind::Chunk.byte() {
                let fits = self
                    .arenas
                    .last()
                    .and_then(|a| a.as_ref())
                    .is_some_and(|a| a.capacity() - a.len() >= len);
                if !fits {
                    self.arenas.push(Some(Vec::with_capacity(ARENA.max(len))));
                    self.live.push(0);
                }
                let index = self.arenas.len() - 1;
                let Some(Some(arena)) = self.arenas.last_mut() else {
                    unreachable!("an arena was just pushed")
                };
                let start = arena.len();
                arena.resize(start + len, 0);
                arena[start] = kind[0];
                r.read_exact(&mut arena[start + 1..]).map_err(eof)?;
                let id = ObjectId::hash_stored(&arena[start..]);
                if self.chunks.insert(id, (index, start, len)).is_some() {
                    return Err(SnapshotError::corrupt(format!("object {id} appears twice")));
                }
                self.live[index] += 1;
                id
            } else {
                let mut bytes = vec![0u8; len];
                bytes[0] = kind[0];
                r.read_exact(&mut bytes[1..]).map_err(eof)?;
                let id = ObjectId::hash_stored(&bytes);
                if self.others.insert(id, bytes).is_some() {
                    return Err(SnapshotError::corrupt(format!("object {id} appears twice")));
                }
                id
            };
            if self.chunks.contains_key(&id) && self.others.contains_key(&id) {
                return Err(SnapshotError::corrupt(format!("object {id} appears twice")));
            }
        }
        Ok(())
    }

    pub fn contains(&self, id: &ObjectId) -> bool {
        self.chunks.contains_key(id) || self.others.contains_key(id)
    }

    /// The stored bytes of `id`, if still held.
    pub fn bytes(&self, id: &ObjectId) -> Option<&[u8]> {
        if let Some(&(a, start, len)) = self.chunks.get(id) {
            return self.arenas.get(a)?.as_ref().map(|v| &v[start..start + len]);
        }
        self.others.get(id).map(Vec::as_slice)
    }

    /// Marks one chunk as used for good; frees its arena when it was the last.
    pub fn release(&mut self, id: &ObjectId) {
        if let Some((a, _, _)) = self.chunks.remove(id) {
            self.live[a] = self.live[a].saturating_sub(1);
            if self.live[a] == 0 {
                self.arenas[a] = None;
            }
        }
    }

    fn into_map(self) -> hashbrown::HashMap<ObjectId, Vec<u8>> {
        let mut out = self.others;
        for (id, (a, start, len)) in self.chunks {
            if let Some(Some(arena)) = self.arenas.get(a) {
                out.insert(id, arena[start..start + len].to_vec());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CommitOptions, Workspace};

    /// The same snapshot with its body re-compressed by ruzstd's encoder (what wasm32
    /// writes): it verifies and holds the same objects as the C encoder's, so
    /// snapshots written in a browser restore natively and the other way round.
    #[test]
    fn frames_of_both_encoders_decode_to_the_same_objects() {
        let mut ws = Workspace::new();
        for i in 0..40 {
            ws.write(&format!("/d/{i}.txt"), format!("line {i}\n").repeat(300))
                .unwrap();
        }
        let commit = ws.commit(CommitOptions::new()).unwrap();
        let root = commit.id();
        let mut reference = Vec::new();
        write_packed(root, commit.objects(), FLAG_ZSTD, None, &mut reference).unwrap();

        let meta_len =
            u32::from_le_bytes(reference[HEADER_LEN - 4..HEADER_LEN].try_into().unwrap());
        let body_at = HEADER_LEN + meta_len as usize;
        let frame = &reference[body_at + 8..reference.len() - 32];
        let mut plain = Vec::new();
        decoder(frame).unwrap().read_to_end(&mut plain).unwrap();
        let pure = compress_pure(&plain);
        assert_ne!(pure, frame, "the encoders are expected to differ");

        let mut other = reference[..body_at].to_vec();
        other.extend_from_slice(&(pure.len() as u64).to_le_bytes());
        other.extend_from_slice(&pure);
        let checksum = *blake3::hash(&other).as_bytes();
        other.extend_from_slice(&checksum);

        let a = parse_packed(&reference, None).unwrap();
        let b = parse_packed(&other, None).unwrap();
        assert_eq!((a.root, a.flags), (b.root, b.flags));
        assert_eq!(a.objects, b.objects);
        let streamed = read_packed(&other[..], None).unwrap();
        assert_eq!(streamed.objects, a.objects);
    }
}
