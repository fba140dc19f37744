//! How adapters keep an object's bytes at rest: a record of one tag byte and a payload
//! (FORMAT.md section 12).
//!
//! ```text
//! record = tag (1 byte) || payload
//! tag 0: payload = the stored bytes
//! tag 1: payload = one zstd frame of the stored bytes
//! tag 2: payload = depth (u8, 1..=MAX_DELTA_DEPTH) || base id (32 bytes)
//!                  || one zstd frame of the stored bytes, compressed with the base's
//!                     stored bytes as its raw-content dictionary
//! ```
//!
//! Ids always cover the stored (uncompressed) bytes, so two stores that compress
//! differently hold the same objects under the same ids, and every read re-hashes what
//! it returns (the base of a delta too): a store that flips a bit is caught on every
//! read. A delta's depth is one more than its base's (a tag 0 or 1 record has depth
//! 0), so a chain is followed at most [`MAX_DELTA_DEPTH`] steps and cannot loop.
//!
//! The functions here are the whole codec, independent of where records live:
//! [`encode`] and [`encode_delta`] make records, [`delta_base`] reads a record's
//! header, [`decode`] reads a record that needs no base and [`decode_many`] reads a
//! batch, fetching the bases of deltas through a callback (one call per chain level).

use std::cell::RefCell;
use std::rc::Rc;

use hashbrown::{HashMap, HashSet};
use snapgraph::object::MAX_OBJECT_SIZE;
use snapgraph::ObjectId;

use crate::error::{DeltaProblem, StoreError};
use crate::store::ReadCheck;

/// The tag of a record holding the stored bytes as they are.
pub const RAW: u8 = 0;
/// The tag of a record holding one zstd frame of the stored bytes.
pub const ZSTD: u8 = 1;
const DELTA: u8 = 2;
/// The tag of a record holding one zstd frame compressed against its store's
/// dictionary (SQLite schema 3 only): `3 || dictionary key (u32 LE) || frame`.
pub const DICT: u8 = 3;
/// Tag, depth, base id.
const DELTA_HEADER: usize = 1 + 1 + 32;
/// Tag, dictionary key.
const DICT_HEADER: usize = 1 + 4;

/// The most bytes a store dictionary holds (zstd's default for trained ones).
pub const DICT_SIZE: usize = 112 * 1024;
/// A dictionary is sampled only from a batch of at least this many objects that are
/// worth compressing, holding at least [`DICT_MIN_BYTES`] bytes: a smaller first
/// batch gives too narrow a sample. (A narrow raw-content dictionary costs little:
/// it only adds match candidates, so records against it are about level 3's alone.)
pub const DICT_MIN_OBJECTS: usize = 16;
/// See [`DICT_MIN_OBJECTS`].
pub const DICT_MIN_BYTES: usize = 64 * 1024;
/// How many bytes of each sampled object go into a dictionary.
const DICT_SLICE: usize = 1024;
/// The zstd level of records against a dictionary, at least: on the synthetic
/// releases level 3 against a dictionary compressed as fast as level 1 alone and
/// 17 % smaller (BENCHMARKS.md, "Repository size: packs and a store dictionary").
pub const DICT_LEVEL: i32 = 3;

/// A batch of fewer bytes is not compressed against the dictionary unless the
/// dictionary's compression tables are already built (by an earlier, larger batch
/// of the same handle): building them costs more than such a batch's whole write
/// (a per-turn commit's few tree nodes, mostly deltas anyway). Its records are what a
/// store without a dictionary writes; every reader reads both. Only the objects
/// without a delta hint count (the SQLite adapter's `put_with`): a hinted object is
/// mostly written as a delta, which no dictionary takes part in, so an edit of a
/// file of 16 KiB or more does not build the tables for the turn's few small objects
/// (stop 46: 0.4 ms of a 2 ms turn).
pub const DICT_TABLES_MIN: usize = 16 * 1024;

/// Objects smaller than this are never compressed: the frame header eats the gain.
const MIN_COMPRESS: usize = 128;

/// The longest delta chain a reader follows: a record of a greater depth is refused.
pub const MAX_DELTA_DEPTH: u8 = 64;

/// The longest delta chain this writer makes. An object whose hinted base is this
/// deep is written against the whole record at the bottom of that base's chain
/// instead (a delta of depth 1), kept only while that delta is at most a
/// [`REBASED_MAX`]th of its stored bytes (it repeats every change since that record:
/// past that the object is stored whole and starts a new chain). Reading an object
/// costs one decompression and one BLAKE3 check per level, and so does writing the
/// next version of it (its base is decoded): a per-turn commit of a file edited in
/// every turn paid up to 11 of each at 10, with no chain-root rebase (BENCHMARKS.md,
/// "Stop 35": 4 takes a one-file turn 3.5 % fewer instructions than 10, for a store
/// 1.4 % larger after `gc` on the 30 releases).
pub const WRITE_DELTA_DEPTH: u8 = 4;

/// A delta record of at most this fraction of its object's stored bytes is written
/// without compressing the object alone to compare: the record alone would have to
/// shrink the object more than this many times (and then by another sixteenth) to
/// win, which a zstd frame of source text or a tree node seldom does. At 8, 160 of a
/// release's 247 deltas were compared (a zstd call each, most of them on objects of
/// a few hundred bytes, where the call's set-up is the cost); the record alone won
/// 3 times, each for a delta over a quarter of its object. At 4 the release's store
/// is byte for byte the same and its commit 3.5 % faster (BENCHMARKS.md, "Stop 42").
pub const DELTA_SURE: usize = 4;

/// A delta against the whole record at the bottom of its hint's chain (see
/// [`WRITE_DELTA_DEPTH`]) is kept while at most this fraction of its object's stored
/// bytes.
pub const REBASED_MAX: usize = 8;

/// The first four bytes of a zstd dictionary: `ZSTD_decompress_usingDict` would parse
/// a base starting with them as a dictionary instead of raw content, so such a base is
/// never used (no stored object starts with them: byte 0 is the kind).
const DICT_MAGIC: [u8; 4] = [0x37, 0xa4, 0x30, 0xec];

/// Whether and how an adapter compresses objects at rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Keep objects as they are (no deltas either).
    None,
    /// zstd at `level`, kept only when it saves at least one sixteenth; deltas against
    /// a similar object when the writer names one.
    Zstd {
        /// The zstd level (1 is fast and the default).
        level: i32,
    },
}

impl Default for Compression {
    /// zstd level 1: on text it saves 3-4x at several hundred MB/s; on incompressible
    /// data zstd gives up fast and the object is kept raw.
    fn default() -> Self {
        Self::Zstd { level: 1 }
    }
}

/// A store's zstd dictionary: raw content (sampled slices of the store's own
/// objects, see [`Dictionary::sample`]), named by a key derived from its bytes.
pub struct Dictionary {
    key: u32,
    bytes: Vec<u8>,
    /// zstd level of the compression tables.
    level: i32,
    /// The compression tables, built at the first record compressed against the
    /// dictionary: filling them is about 2.5 M instructions for 112 KiB (a small
    /// turn's whole store write costs less), and a reader never needs them. `None`
    /// when zstd refused: records are then kept raw.
    cdict: std::sync::OnceLock<Option<zstd::zstd_safe::CDict<'static>>>,
}

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionary")
            .field("key", &self.key)
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// The key of a dictionary: the first four bytes (LE) of the BLAKE3 id its bytes
/// would have as stored bytes.
pub fn dictionary_key(bytes: &[u8]) -> u32 {
    let id = ObjectId::hash_stored(bytes);
    let b = id.as_bytes();
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

impl Dictionary {
    /// Prepares `bytes` (raw content) for compression at `level` (at least
    /// [`DICT_LEVEL`]) and for decompression. Refused (with the reason): empty, over
    /// [`DICT_SIZE`], or starting with the zstd dictionary magic (zstd would parse
    /// it as a trained dictionary, not raw content).
    pub fn new(bytes: Vec<u8>, level: i32) -> Result<Self, String> {
        Self::with_key(dictionary_key(&bytes), bytes, level)
    }

    /// [`Dictionary::new`] for bytes whose key the caller computed
    /// ([`dictionary_key`]), so that they are hashed once.
    pub fn with_key(key: u32, bytes: Vec<u8>, level: i32) -> Result<Self, String> {
        if bytes.len() < 8 || bytes.len() > DICT_SIZE {
            return Err(format!(
                "a dictionary of {} bytes (8 to {DICT_SIZE})",
                bytes.len()
            ));
        }
        if bytes.starts_with(&DICT_MAGIC) {
            return Err("a dictionary starting with the zstd dictionary magic".into());
        }
        // Readers decompress against the bytes themselves: for raw content zstd only
        // points at them per frame, where a prepared `DDict` copied all 112 KiB into
        // fresh memory in every process that read one record against it.
        Ok(Self {
            key,
            bytes,
            level: level.max(DICT_LEVEL),
            cdict: std::sync::OnceLock::new(),
        })
    }

    /// Whether the compression tables are built (a record compressed against the
    /// dictionary costs only its own compression then).
    pub fn tables_built(&self) -> bool {
        self.cdict.get().is_some()
    }

    /// The compression tables, built on first use.
    fn cdict(&self) -> Option<&zstd::zstd_safe::CDict<'static>> {
        self.cdict
            .get_or_init(|| zstd::zstd_safe::CDict::try_create(&self.bytes, self.level))
            .as_ref()
    }

    /// Its key (recorded in each tag 3 record).
    pub fn key(&self) -> u32 {
        self.key
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// A dictionary's bytes sampled from a batch being written, or `None` when the
    /// batch is too small ([`DICT_MIN_OBJECTS`], [`DICT_MIN_BYTES`]): the first
    /// 1,024 bytes (`DICT_SLICE`) of objects taken at an even stride over the objects of
    /// at least 128 bytes, up to [`DICT_SIZE`]. Deterministic: the same batch gives
    /// the same dictionary.
    pub fn sample(objects: &[(ObjectId, &[u8])]) -> Option<Vec<u8>> {
        let worth: Vec<&[u8]> = objects
            .iter()
            .map(|(_, b)| *b)
            .filter(|b| b.len() >= MIN_COMPRESS && !b.starts_with(&DICT_MAGIC))
            .collect();
        let total: usize = worth.iter().map(|b| b.len()).sum();
        if worth.len() < DICT_MIN_OBJECTS || total < DICT_MIN_BYTES {
            return None;
        }
        let stride = (worth.len() * DICT_SLICE).div_ceil(DICT_SIZE).max(1);
        let mut out = Vec::with_capacity(DICT_SIZE);
        for b in worth.iter().step_by(stride) {
            let take = b.len().min(DICT_SLICE).min(DICT_SIZE - out.len());
            out.extend_from_slice(&b[..take]);
            if out.len() == DICT_SIZE {
                break;
            }
        }
        Some(out)
    }
}

/// The dictionary key a tag 3 record names.
pub fn dict_key(record: &[u8]) -> Option<u32> {
    match record {
        [DICT, a, b, c, d, ..] => Some(u32::from_le_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// Checks that a tag 3 record of `id` names `dict` and is long enough for its header:
/// [`StoreError::Corrupt`] naming `id` otherwise.
fn check_dict_key(id: &ObjectId, record: &[u8], dict: &Dictionary) -> Result<(), StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt { id: *id, reason };
    match dict_key(record) {
        Some(key) if key == dict.key => Ok(()),
        Some(key) => Err(corrupt(format!(
            "record names dictionary {key:08x}, not {:08x}",
            dict.key
        ))),
        None => Err(corrupt("dictionary record shorter than its header".into())),
    }
}

/// The stored bytes of a tag 3 record of `id`, decompressed against `dict` (the
/// dictionary its key names), not yet verified against the id.
pub fn decode_dict(id: &ObjectId, record: &[u8], dict: &Dictionary) -> Result<Vec<u8>, StoreError> {
    check_dict_key(id, record, dict)?;
    let corrupt = |reason: String| StoreError::Corrupt { id: *id, reason };
    decompress_with(&record[DICT_HEADER..], Against::Raw(&dict.bytes))
        .map_err(|reason| corrupt(format!("dictionary {:08x}: {reason}", dict.key)))
}

/// Objects of at least this many bytes are first probed (`incompressible`): a
/// sample's byte histogram is counted, and when its bytes look uniform the object is
/// kept raw without running zstd at all.
pub const PROBE_MIN: usize = 1024;
/// The probe's sample: [`PROBE_PIECES`] pieces of this many bytes, spread evenly
/// from the object's start to its end.
const PROBE_PIECE: usize = 256;
const PROBE_PIECES: usize = 4;

/// Whether `stored` (at least [`PROBE_MIN`] bytes) looks incompressible: the bytes of
/// four 256-byte pieces spread across it have a collision entropy (Rényi order 2,
/// estimated without bias from the pairs of equal bytes in the 1 KiB) above 7.8 bits a
/// byte. Shannon entropy is at least that, so no byte-wise coder saves 2.5 % on such
/// bytes and zstd, which keeps a frame only when it saves a sixteenth, would keep
/// nothing: random or already-compressed content (media, archives, encrypted files)
/// costs about one instruction a sampled byte instead of a zstd attempt that spends
/// about 7 a byte to find nothing (BENCHMARKS.md, "The probe without zstd"). Text,
/// code and most binaries sit far below (4-6.5 bits). What it cannot see is long
/// repeats inside uniform-looking bytes (the same random block twice within one
/// object): such an object is kept raw, only larger than it could be; ids cover
/// stored bytes and a tag 0 record reads as any other.
fn incompressible(stored: &[u8]) -> bool {
    if stored.len() < PROBE_MIN {
        return false;
    }
    // Eight histograms, one per byte lane of a u64, so consecutive equal bytes do not
    // wait on each other's increments.
    let mut lanes = [[0u16; 256]; 8];
    let step = (stored.len() - PROBE_PIECE) / (PROBE_PIECES - 1);
    for piece in 0..PROBE_PIECES {
        let at = piece * step;
        for word in stored[at..at + PROBE_PIECE].chunks_exact(8) {
            let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            for (lane, counts) in lanes.iter_mut().enumerate() {
                counts[((w >> (8 * lane)) & 0xff) as usize] += 1;
            }
        }
    }
    // Pairs of equal bytes: sum of c(c-1) over the byte values.
    let pairs: u64 = (0..256)
        .map(|b| {
            let c: u64 = lanes.iter().map(|l| u64::from(l[b])).sum();
            c * c.saturating_sub(1)
        })
        .sum();
    let n = (PROBE_PIECE * PROBE_PIECES) as u64;
    // Sum of p^2 estimated as pairs / (n (n - 1)); H2 = -log2 of it > 7.8 bits
    // (2^7.8 = 222.9).
    pairs * 223 < n * (n - 1)
}

/// A record to keep at rest, as [`encode_many_records`] makes it: a tag 0 record may
/// stay the caller's bytes, so an adapter that can write the tag and the bytes
/// separately (SQLite's incremental blob I/O) never copies them into a record first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<'a> {
    /// A tag 0 record: [`RAW`] followed by these stored bytes.
    Raw(&'a [u8]),
    /// Any record, whole (tag byte included).
    Encoded(Vec<u8>),
}

impl Record<'_> {
    /// The record's length (tag byte included).
    pub fn len(&self) -> usize {
        match self {
            Record::Raw(b) => 1 + b.len(),
            Record::Encoded(r) => r.len(),
        }
    }

    /// Whether it is empty (never, for a record the codec made).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its tag byte.
    pub fn tag(&self) -> Option<u8> {
        match self {
            Record::Raw(_) => Some(RAW),
            Record::Encoded(r) => r.first().copied(),
        }
    }

    /// The whole record (a copy for [`Record::Raw`]).
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Record::Raw(b) => raw(b),
            Record::Encoded(r) => r,
        }
    }
}

/// The record to keep at rest for `stored`, without a base.
pub fn encode(stored: &[u8], compression: Compression) -> Vec<u8> {
    encode_with(stored, compression, None)
}

/// [`encode`], against `dict` when there is one (a tag 3 record instead of tag 1).
pub fn encode_with(stored: &[u8], compression: Compression, dict: Option<&Dictionary>) -> Vec<u8> {
    encode_record(stored, compression, dict).into_vec()
}

/// [`encode_with`], a tag 0 record left as the caller's bytes.
fn encode_record<'a>(
    stored: &'a [u8],
    compression: Compression,
    dict: Option<&Dictionary>,
) -> Record<'a> {
    if let Compression::Zstd { level } = compression {
        if stored.len() >= MIN_COMPRESS && !incompressible(stored) {
            if let Some(d) = dict {
                if let Some(frame) = d.cdict().and_then(|c| compress_cdict(stored, c)) {
                    if DICT_HEADER + frame.len() + stored.len() / 16 < stored.len() {
                        let mut out = Vec::with_capacity(DICT_HEADER + frame.len());
                        out.push(DICT);
                        out.extend_from_slice(&d.key.to_le_bytes());
                        out.extend_from_slice(&frame);
                        return Record::Encoded(out);
                    }
                }
                return Record::Raw(stored);
            }
            if let Some(packed) = compress(stored, level, None) {
                if packed.len() + stored.len() / 16 < stored.len() {
                    let mut out = Vec::with_capacity(packed.len() + 1);
                    out.push(ZSTD);
                    out.extend_from_slice(&packed);
                    return Record::Encoded(out);
                }
            }
        }
    }
    Record::Raw(stored)
}

/// Whether [`encode_with`] would try to compress `stored` (objects shorter than 128
/// bytes are kept as they are: a frame header eats the gain).
pub fn compressible(stored: &[u8]) -> bool {
    stored.len() >= MIN_COMPRESS
}

fn raw(stored: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(stored.len() + 1);
    out.push(RAW);
    out.extend_from_slice(stored);
    out
}

/// A stored object a new one may be encoded against.
#[derive(Debug, Clone, Copy)]
pub struct Base<'a> {
    /// Its id.
    pub id: ObjectId,
    /// Its stored bytes (verified).
    pub stored: &'a [u8],
    /// The depth of its record (0: not a delta).
    pub depth: u8,
}

/// The record to keep at rest for `stored`, against `base` where that is smaller than
/// [`encode`]'s record: a delta is made only under zstd compression, when the base's
/// chain is shorter than [`WRITE_DELTA_DEPTH`] and the delta saves a sixteenth (or is
/// at most a [`DELTA_SURE`]th of the stored bytes).
pub fn encode_delta(stored: &[u8], base: &Base<'_>, compression: Compression) -> Vec<u8> {
    encode_delta_with(stored, base, compression, None)
}

/// [`encode_delta`], where the record alone is [`encode_with`]'s against `dict`.
pub fn encode_delta_with(
    stored: &[u8],
    base: &Base<'_>,
    compression: Compression,
    dict: Option<&Dictionary>,
) -> Vec<u8> {
    encode_delta_record(stored, base, compression, dict).into_vec()
}

/// [`encode_delta_with`], a tag 0 record left as the caller's bytes.
fn encode_delta_record<'a>(
    stored: &'a [u8],
    base: &Base<'_>,
    compression: Compression,
    dict: Option<&Dictionary>,
) -> Record<'a> {
    let Compression::Zstd { level } = compression else {
        return encode_record(stored, compression, dict);
    };
    if base.depth >= WRITE_DELTA_DEPTH
        || base.stored.starts_with(&DICT_MAGIC)
        || base.stored.is_empty()
        || stored.len() < MIN_COMPRESS / 2
    {
        return encode_record(stored, compression, dict);
    }
    let Some(frame) = compress(stored, level, Some(base.stored)) else {
        return encode_record(stored, compression, dict);
    };
    let size = DELTA_HEADER + frame.len();
    // The record alone is compressed only when the delta might lose to it: a delta
    // of at most a [`DELTA_SURE`]th of the stored bytes is kept without (most of a
    // commit's store writes are small edits of big objects, and the record alone
    // against the dictionary cost more than the delta itself).
    if size.saturating_mul(DELTA_SURE) > stored.len() {
        let alone = encode_record(stored, compression, dict);
        if size + alone.len() / 16 >= alone.len() {
            return alone;
        }
    }
    let mut out = Vec::with_capacity(size);
    out.push(DELTA);
    out.push(base.depth + 1);
    out.extend_from_slice(base.id.as_bytes());
    out.extend_from_slice(&frame);
    Record::Encoded(out)
}

/// The base and depth a record names, if it is a delta (tag 2). Malformed headers read
/// as `None` here and are refused by the decoders.
pub fn delta_base(record: &[u8]) -> Option<(ObjectId, u8)> {
    if record.len() < DELTA_HEADER || record[0] != DELTA {
        return None;
    }
    let base: [u8; 32] = record[2..DELTA_HEADER].try_into().ok()?;
    Some((ObjectId::from_bytes(base), record[1]))
}

/// The depth of a record: 0 for tag 0 and 1, the recorded depth of a delta.
pub fn depth(record: &[u8]) -> u8 {
    delta_base(record).map_or(0, |(_, d)| d)
}

thread_local! {
    // zstd contexts are costly to set up next to a small object (tens of
    // microseconds, more than compressing a tree node), so each thread keeps one.
    static CCTX: RefCell<Option<zstd::zstd_safe::CCtx<'static>>> = const { RefCell::new(None) };
    static DCTX: RefCell<Option<zstd::zstd_safe::DCtx<'static>>> = const { RefCell::new(None) };
}

fn compress(data: &[u8], level: i32, dict: Option<&[u8]>) -> Option<Vec<u8>> {
    CCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let cctx = slot.get_or_insert_with(zstd::zstd_safe::CCtx::create);
        let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(data.len()));
        let done = match dict {
            None => cctx.compress(&mut out, data, level),
            Some(dict) => cctx.compress_using_dict(&mut out, data, dict, level),
        };
        done.ok().map(|_| out)
    })
}

fn compress_cdict(data: &[u8], cdict: &zstd::zstd_safe::CDict<'_>) -> Option<Vec<u8>> {
    CCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let cctx = slot.get_or_insert_with(zstd::zstd_safe::CCtx::create);
        let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(data.len()));
        cctx.compress_using_cdict(&mut out, data, cdict)
            .ok()
            .map(|_| out)
    })
}

/// What a frame is decompressed against.
enum Against<'a> {
    Nothing,
    Raw(&'a [u8]),
}

fn decompress(frame: &[u8], dict: Option<&[u8]>) -> Result<Vec<u8>, String> {
    decompress_with(frame, dict.map_or(Against::Nothing, Against::Raw))
}

fn decompress_with(frame: &[u8], dict: Against<'_>) -> Result<Vec<u8>, String> {
    decompress_after(&[], frame, dict)
}

/// `frame` decompressed into a new buffer that starts with `prefix` (so a caller that
/// wants a tag byte before the bytes gets it without a copy of them).
fn decompress_after(prefix: &[u8], frame: &[u8], dict: Against<'_>) -> Result<Vec<u8>, String> {
    // The declared size bounds the allocation; a frame without one, or one above the
    // object size limit, is refused before anything is allocated.
    let size = match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(n)) if n <= MAX_OBJECT_SIZE as u64 => n as usize,
        Ok(Some(n)) => return Err(format!("zstd frame declares {n} bytes, over the limit")),
        // Frames that do not declare their size (writers here always do) get the limit.
        Ok(None) => MAX_OBJECT_SIZE,
        Err(_) => return Err("not a zstd frame".into()),
    };
    DCTX.with(|cell| {
        let mut slot = cell.borrow_mut();
        let dctx = slot.get_or_insert_with(zstd::zstd_safe::DCtx::create);
        let mut buffer = Vec::with_capacity(prefix.len() + size);
        buffer.extend_from_slice(prefix);
        // Written after the prefix (zstd_safe's `Cursor` output starts at its position).
        let mut out = std::io::Cursor::new(buffer);
        out.set_position(prefix.len() as u64);
        let done = match dict {
            Against::Nothing => dctx.decompress(&mut out, frame),
            Against::Raw(dict) => dctx.decompress_using_dict(&mut out, frame, dict),
        };
        let out = out.into_inner();
        match done {
            Ok(n) if prefix.len() + n == out.len() => Ok(out),
            Ok(n) => Err(format!(
                "zstd frame decoded to {n} bytes, not {}",
                out.len() - prefix.len()
            )),
            Err(code) => Err(format!(
                "zstd frame does not decode: {}",
                zstd::zstd_safe::get_error_name(code)
            )),
        }
    })
}

/// A tag 3 record of `id` turned into the tag 0 record of the same stored bytes,
/// decompressed against `dict` straight behind the tag (no copy of the bytes), not
/// yet verified: what a store hands [`decode_many`] for a record that needs its
/// dictionary.
pub fn dict_to_plain(
    id: &ObjectId,
    record: &[u8],
    dict: &Dictionary,
) -> Result<Vec<u8>, StoreError> {
    check_dict_key(id, record, dict)?;
    let corrupt = |reason: String| StoreError::Corrupt { id: *id, reason };
    decompress_after(&[RAW], &record[DICT_HEADER..], Against::Raw(&dict.bytes))
        .map_err(|reason| corrupt(format!("dictionary {:08x}: {reason}", dict.key)))
}

/// [`decode`] of a record the caller owns, verified as `check` says: a tag 0 record
/// becomes the stored bytes in place (no copy of the payload into a new buffer); a
/// tag 1 frame is decompressed into a buffer of exactly its declared size.
pub fn decode_owned(
    id: &ObjectId,
    record: Vec<u8>,
    check: ReadCheck,
) -> Result<Vec<u8>, StoreError> {
    match record.first() {
        Some(&RAW) => {
            let mut stored = record;
            stored.remove(0);
            finish(id, stored, check)
        }
        Some(&ZSTD) => {
            let stored = decompress(&record[1..], None)
                .map_err(|reason| StoreError::Corrupt { id: *id, reason })?;
            finish(id, stored, check)
        }
        _ => decode(id, &record),
    }
}

/// `stored`, re-hashed against `id` unless the caller verifies.
pub fn finish(id: &ObjectId, stored: Vec<u8>, check: ReadCheck) -> Result<Vec<u8>, StoreError> {
    match check {
        ReadCheck::Caller => Ok(stored),
        ReadCheck::Store => self::check(id, stored),
    }
}

/// The stored bytes of `id` from a record that needs no base (tag 0 or 1), verified
/// against the id. A delta is refused with [`StoreError::BadDelta`]: read it with
/// [`decode_many`].
pub fn decode(id: &ObjectId, record: &[u8]) -> Result<Vec<u8>, StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt { id: *id, reason };
    let stored = match record.split_first() {
        Some((&RAW, rest)) => rest.to_vec(),
        Some((&ZSTD, rest)) => decompress(rest, None).map_err(corrupt)?,
        Some((&DELTA, _)) => {
            return Err(match delta_base(record) {
                Some((base, _)) => StoreError::BadDelta {
                    id: *id,
                    base,
                    problem: DeltaProblem::NeedsBase,
                },
                None => corrupt("delta record shorter than its header".into()),
            })
        }
        Some((&DICT, _)) => {
            return Err(corrupt(
                "a dictionary record (tag 3) outside a store that keeps its dictionary".into(),
            ))
        }
        Some((tag, _)) => return Err(corrupt(format!("unknown encoding tag {tag}"))),
        None => return Err(corrupt("empty record".into())),
    };
    check(id, stored)
}

/// The stored bytes of a delta record of `id` whose base's verified bytes are `base`.
fn decode_delta(
    id: &ObjectId,
    record: &[u8],
    base: &[u8],
    check: ReadCheck,
) -> Result<Vec<u8>, StoreError> {
    let stored =
        decompress(&record[DELTA_HEADER..], Some(base)).map_err(|reason| StoreError::Corrupt {
            id: *id,
            reason: format!("delta: {reason}"),
        })?;
    finish(id, stored, check)
}

/// Re-hashes `stored` against `id`.
pub fn check(id: &ObjectId, stored: Vec<u8>) -> Result<Vec<u8>, StoreError> {
    let actual = ObjectId::hash_stored(&stored);
    if actual != *id {
        return Err(StoreError::Corrupt {
            id: *id,
            reason: format!("bytes hash to {actual}"),
        });
    }
    Ok(stored)
}

/// Fetches raw records by id, in the order asked (`None`: absent).
pub type FetchRecords<'a> = dyn FnMut(&[ObjectId]) -> Result<Vec<Option<Vec<u8>>>, StoreError> + 'a;

/// The verified stored bytes of `ids` from their `records` (as an adapter read them,
/// `None` where absent), fetching the records of delta bases through `fetch`: one call
/// per level of the deepest chain, each with every base that level needs.
///
/// A delta whose base is absent, whose chain loops or is deeper than
/// [`MAX_DELTA_DEPTH`], or whose base's depth is not one less fails with
/// [`StoreError::BadDelta`] naming the delta and its base; a base that does not hash
/// to its id fails with [`StoreError::BadDelta`] ([`DeltaProblem::BaseCorrupt`]).
pub fn decode_many(
    ids: &[ObjectId],
    records: Vec<Option<Vec<u8>>>,
    fetch: &mut FetchRecords<'_>,
) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
    decode_many_checked(ids, records, fetch, ReadCheck::Store)
}

/// [`decode_many`], re-hashing the objects asked for only when `check` is
/// [`ReadCheck::Store`] (every base a delta needs is verified either way: the caller
/// never sees it). Decoding takes the records by value: a tag 0 record's buffer
/// becomes the object's.
pub fn decode_many_checked(
    ids: &[ObjectId],
    records: Vec<Option<Vec<u8>>>,
    fetch: &mut FetchRecords<'_>,
    check: ReadCheck,
) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
    if records.iter().flatten().all(|r| r.first() != Some(&DELTA)) {
        // The common case: nothing to fetch.
        return ids
            .iter()
            .zip(records)
            .map(|(id, r)| r.map(|r| decode_owned(id, r, check)).transpose())
            .collect();
    }
    // Every record met, by id: those asked for (at their first place in `records`,
    // not copied) and the bases fetched.
    let mut asked: HashMap<ObjectId, usize> = HashMap::new();
    for (i, (id, r)) in ids.iter().zip(&records).enumerate() {
        if r.is_some() {
            asked.entry(*id).or_insert(i);
        }
    }
    let mut fetched: HashMap<ObjectId, Vec<u8>> = HashMap::new();
    let record_of = |fetched: &HashMap<ObjectId, Vec<u8>>, id: &ObjectId| -> Option<usize> {
        // Index into `records`, or usize::MAX for a fetched one (looked up again).
        asked
            .get(id)
            .copied()
            .or_else(|| fetched.contains_key(id).then_some(usize::MAX))
    };
    // Follow each delta's chain level by level, fetching the bases of one level in one
    // call; a chain is checked as it grows (depth one less each step, no repeats).
    let mut chains: Vec<Vec<ObjectId>> = ids
        .iter()
        .zip(&records)
        .filter(|(_, r)| r.as_ref().is_some_and(|r| r.first() == Some(&DELTA)))
        .map(|(id, _)| vec![*id])
        .collect();
    let mut open: Vec<usize> = (0..chains.len()).collect();
    while !open.is_empty() {
        let mut want: Vec<ObjectId> = Vec::new();
        let mut wanted = HashSet::new();
        let mut still = Vec::new();
        for i in open {
            loop {
                let chain = &mut chains[i];
                let last = *chain.last().expect("chains are never empty");
                let record = known(&records, &fetched, record_of(&fetched, &last), &last);
                if record.first() != Some(&DELTA) {
                    break; // reached a whole record
                }
                let (base, level) = delta_base(record).ok_or_else(|| StoreError::Corrupt {
                    id: last,
                    reason: "delta record shorter than its header".into(),
                })?;
                let bad = |problem| StoreError::BadDelta {
                    id: last,
                    base,
                    problem,
                };
                if level == 0 || level > MAX_DELTA_DEPTH {
                    return Err(bad(DeltaProblem::TooDeep { depth: level }));
                }
                if chain.contains(&base) {
                    return Err(bad(DeltaProblem::Cycle));
                }
                match record_of(&fetched, &base) {
                    Some(at) => {
                        let found = depth(known(&records, &fetched, Some(at), &base));
                        if found != level - 1 {
                            return Err(bad(DeltaProblem::BaseDepth { found }));
                        }
                        chain.push(base);
                    }
                    None => {
                        if wanted.insert(base) {
                            want.push(base);
                        }
                        still.push(i);
                        break;
                    }
                }
            }
        }
        if !want.is_empty() {
            let got = fetch(&want)?;
            for (base, record) in want.iter().zip(got) {
                match record {
                    Some(r) => {
                        fetched.insert(*base, r);
                    }
                    None => {
                        // Name the first delta that needs it.
                        let needs = still
                            .iter()
                            .map(|&i| *chains[i].last().expect("chains are never empty"))
                            .find(|d| {
                                let r = known(&records, &fetched, record_of(&fetched, d), d);
                                delta_base(r).map(|b| b.0) == Some(*base)
                            })
                            .unwrap_or(*base);
                        return Err(StoreError::BadDelta {
                            id: needs,
                            base: *base,
                            problem: DeltaProblem::BaseMissing,
                        });
                    }
                }
            }
        }
        open = still;
    }
    // Decode each chain from the highest object already decoded (else its whole end)
    // up, each object once: a base several chains use is kept (shared, not copied)
    // until the last of them is done; a whole record at the bottom of a chain is
    // used where it lies when it is tag 0 (verified, not copied).
    let mut uses: HashMap<ObjectId, usize> = HashMap::new();
    for chain in &chains {
        for id in &chain[1..] {
            *uses.entry(*id).or_default() += 1;
        }
    }
    let requested: HashSet<ObjectId> = ids.iter().copied().collect();
    let mut decoded: HashMap<ObjectId, Rc<Vec<u8>>> = HashMap::new();
    // One use of `id` (a base at `pos` > 0 of a chain) is done: whether it is still
    // needed afterwards (by another chain, or by the caller).
    let done_with = |uses: &mut HashMap<ObjectId, usize>, id: &ObjectId| -> bool {
        let n = uses.get_mut(id).expect("counted above");
        *n -= 1;
        *n > 0 || requested.contains(id)
    };
    for chain in &chains {
        let from = chain
            .iter()
            .position(|id| decoded.contains_key(id))
            .unwrap_or(chain.len() - 1);
        for id in &chain[from + 1..] {
            // Below what is decoded already: not read again.
            if !done_with(&mut uses, id) {
                decoded.remove(id);
            }
        }
        let mut below: Option<Got<'_>> = None;
        for pos in (0..=from).rev() {
            let id = &chain[pos];
            let base_of = |e: StoreError| -> StoreError {
                if pos == 0 {
                    return e;
                }
                // A base: name the delta that needed it.
                StoreError::BadDelta {
                    id: chain[pos - 1],
                    base: *id,
                    problem: DeltaProblem::BaseCorrupt {
                        reason: e.to_string(),
                    },
                }
            };
            let here = if let Some(b) = decoded.get(id) {
                Got::Shared(b.clone())
            } else {
                let record = known(&records, &fetched, record_of(&fetched, id), id);
                match &below {
                    None => match record.split_first() {
                        // Verified where it lies: a base is always re-hashed.
                        Some((&RAW, stored)) => {
                            check_slice(id, stored).map_err(base_of)?;
                            Got::Lent(stored)
                        }
                        _ => Got::Shared(Rc::new(decode(id, record).map_err(base_of)?)),
                    },
                    Some(base) => {
                        // The top of a chain that no other chain uses as a base goes
                        // to the caller only: it may verify it.
                        let mine = if pos == 0 && !uses.contains_key(id) {
                            check
                        } else {
                            ReadCheck::Store
                        };
                        let bytes =
                            decode_delta(id, record, base.bytes(), mine).map_err(base_of)?;
                        Got::Shared(Rc::new(bytes))
                    }
                }
            };
            let keep = if pos > 0 {
                done_with(&mut uses, id)
            } else {
                true
            };
            if keep {
                let shared = match &here {
                    Got::Shared(b) => b.clone(),
                    Got::Lent(b) => Rc::new(b.to_vec()),
                };
                decoded.insert(*id, shared);
            } else {
                decoded.remove(id);
            }
            below = Some(here);
        }
    }
    drop(fetched);
    // Each decoded delta moves out at its last place in `ids` (copied before).
    let last: HashMap<ObjectId, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    ids.iter()
        .zip(records)
        .enumerate()
        .map(|(i, (id, r))| match r {
            None => Ok(None),
            Some(r) if r.first() == Some(&DELTA) => Ok(if last[id] == i {
                decoded
                    .remove(id)
                    .map(|b| Rc::try_unwrap(b).unwrap_or_else(|b| (*b).clone()))
            } else {
                decoded.get(id).map(|b| (**b).clone())
            }),
            Some(r) => decode_owned(id, r, check).map(Some),
        })
        .collect()
}

/// A delta record (tag 2) of `id` made again at zstd `level` by a repack (with
/// `None`, only verified): decoded
/// against `base` (its base's stored bytes, verified by the caller) and re-hashed
/// against `id`, then compressed again against the same base with the same depth and
/// base id, so that every record above it stays valid. `None` when the new record is
/// not smaller. A record that is not a delta, or does not decode to `id`'s bytes, is
/// [`StoreError::Corrupt`] naming `id`.
pub fn recompress_delta(
    id: &ObjectId,
    record: &[u8],
    base: &[u8],
    level: Option<i32>,
) -> Result<Option<Vec<u8>>, StoreError> {
    if delta_base(record).is_none() {
        return Err(StoreError::Corrupt {
            id: *id,
            reason: "not a delta record".into(),
        });
    }
    let stored = decode_delta(id, record, base, ReadCheck::Store)?;
    let Some(level) = level else {
        return Ok(None);
    };
    let Some(frame) = compress(&stored, level, Some(base)) else {
        return Ok(None);
    };
    if DELTA_HEADER + frame.len() >= record.len() {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(DELTA_HEADER + frame.len());
    out.extend_from_slice(&record[..DELTA_HEADER]);
    out.extend_from_slice(&frame);
    Ok(Some(out))
}

/// The record of `id` met while following chains: at `at` in the records asked for,
/// or fetched (`usize::MAX`).
fn known<'r>(
    records: &'r [Option<Vec<u8>>],
    fetched: &'r HashMap<ObjectId, Vec<u8>>,
    at: Option<usize>,
    id: &ObjectId,
) -> &'r [u8] {
    match at {
        Some(usize::MAX) | None => fetched.get(id).map_or(&[], Vec::as_slice),
        Some(i) => records[i].as_deref().unwrap_or(&[]),
    }
}

/// The verified bytes of an object of a chain (the base of the next one up).
enum Got<'a> {
    /// A tag 0 record's stored bytes, where the record lies.
    Lent(&'a [u8]),
    Shared(Rc<Vec<u8>>),
}

impl Got<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Got::Lent(b) => b,
            Got::Shared(b) => b,
        }
    }
}

/// Re-hashes `stored` against `id` where it lies.
fn check_slice(id: &ObjectId, stored: &[u8]) -> Result<(), StoreError> {
    let actual = ObjectId::hash_stored(stored);
    if actual != *id {
        return Err(StoreError::Corrupt {
            id: *id,
            reason: format!("bytes hash to {actual}"),
        });
    }
    Ok(())
}

/// The records to write for `objects`, each against its hinted base (`bases[i]`, an
/// object the store already holds, or `None`) where that pays. The bases' records come
/// from `fetch` (one call, plus one per level of their chains); an absent or unreadable
/// base means the object is encoded alone. A base must be durable before the delta is
/// written, so hints never name objects of the same batch. Errors are the fetch's own.
pub fn encode_many(
    objects: &[(ObjectId, &[u8])],
    bases: &[Option<ObjectId>],
    compression: Compression,
    fetch: &mut FetchRecords<'_>,
) -> Result<Vec<Vec<u8>>, StoreError> {
    encode_many_with(objects, bases, compression, None, fetch)
}

/// [`encode_many`], each record without a delta against `dict` when there is one;
/// `fetch` must return the bases' records with any tag 3 record already turned into
/// its tag 0 equivalent (the adapter holds the dictionaries).
pub fn encode_many_with(
    objects: &[(ObjectId, &[u8])],
    bases: &[Option<ObjectId>],
    compression: Compression,
    dict: Option<&Dictionary>,
    fetch: &mut FetchRecords<'_>,
) -> Result<Vec<Vec<u8>>, StoreError> {
    Ok(
        encode_many_records(objects, bases, compression, dict, &|_| None, fetch)?
            .into_iter()
            .map(Record::into_vec)
            .collect(),
    )
}

/// [`encode_many_with`], tag 0 records left as the objects' bytes ([`Record::Raw`]),
/// taking the stored bytes of a base from `known` when it has them (bytes the adapter
/// verified earlier: an id's bytes never change) instead of decoding the base's record
/// and its chain. The records are still fetched: a base's depth is its record's, which
/// may have changed since (deleted and written again).
pub fn encode_many_records<'a>(
    objects: &[(ObjectId, &'a [u8])],
    bases: &[Option<ObjectId>],
    compression: Compression,
    dict: Option<&Dictionary>,
    known: &dyn Fn(&ObjectId) -> Option<Vec<u8>>,
    fetch: &mut FetchRecords<'_>,
) -> Result<Vec<Record<'a>>, StoreError> {
    let hint = |i: usize| bases.get(i).copied().flatten();
    if compression == Compression::None || (0..objects.len()).all(|i| hint(i).is_none()) {
        return Ok(encode_all(objects, |_, b| {
            encode_record(b, compression, dict)
        }));
    }
    let encode = |bytes: &'a [u8], base: &Option<ResolvedBase>| match base {
        Some(b) => {
            let record = encode_delta_record(
                bytes,
                &Base {
                    id: b.id,
                    stored: &b.stored.0,
                    depth: b.stored.1,
                },
                compression,
                dict,
            );
            // Against its chain's whole record, a delta is kept only while it is
            // small: each one repeats every change since that record.
            if b.rebased
                && record.tag() == Some(DELTA)
                && record.len().saturating_mul(REBASED_MAX) > bytes.len()
            {
                encode_record(bytes, compression, dict)
            } else {
                record
            }
        }
        None => encode_record(bytes, compression, dict),
    };
    let total: usize = objects.iter().map(|(_, b)| b.len()).sum();
    let mut resolver = Resolver::default();
    if total < PARALLEL_ENCODE || objects.len() < PIPELINE_PARTS || cores() < 2 {
        let found = resolver.resolve(0..objects.len(), &hint, known, fetch)?;
        return Ok(encode_all(objects, |i, bytes| encode(bytes, &found[i])));
    }
    // Pipelined: the bases of each part of the batch are read (on this thread: the
    // adapter's reads) while the parts before it are encoded on a second one; the
    // last parts are encoded on both. The records are those of the one-shot order:
    // each object's base, chain root and bytes are resolved the same way.
    let parts = split_by_bytes(objects, PIPELINE_PARTS);
    type Job = (usize, std::ops::Range<usize>, Vec<Option<ResolvedBase>>);
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    let rx = std::sync::Mutex::new(rx);
    // Takes parts until none is left and the sender is gone.
    let work = || {
        let mut done = Vec::new();
        loop {
            let job = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
            let Ok((part, range, found)) = job else {
                return done;
            };
            let records: Vec<Record<'a>> = range
                .zip(&found)
                .map(|(i, base)| encode(objects[i].1, base))
                .collect();
            done.push((part, records));
        }
    };
    let work = &work;
    std::thread::scope(|scope| {
        let beside = crate::cpus::Beside::here();
        let helper = scope.spawn(move || {
            beside.leave();
            work()
        });
        beside.yield_to();
        let mut failed = None;
        for (part, range) in parts.iter().enumerate() {
            match resolver.resolve(range.clone(), &hint, known, fetch) {
                Ok(found) => {
                    // The helper ends only when the sender is dropped.
                    let _ = tx.send((part, range.clone(), found));
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        drop(tx);
        let mut done = work();
        done.extend(
            helper
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p)),
        );
        if let Some(e) = failed {
            return Err(e);
        }
        done.sort_unstable_by_key(|(part, _)| *part);
        Ok(done.into_iter().flat_map(|(_, records)| records).collect())
    })
}

/// Parts a large batch's encoding is pipelined in ([`encode_many_records`]).
const PIPELINE_PARTS: usize = 4;

/// `objects`' positions in `parts` consecutive ranges of about equal bytes (each
/// holding one object at least, the last the rest).
fn split_by_bytes(objects: &[(ObjectId, &[u8])], parts: usize) -> Vec<std::ops::Range<usize>> {
    let total: usize = objects.iter().map(|(_, b)| b.len()).sum();
    let mut out = Vec::with_capacity(parts);
    let (mut start, mut seen) = (0, 0);
    for (i, (_, b)) in objects.iter().enumerate() {
        seen += b.len();
        let left = objects.len() - i - 1;
        if out.len() + 1 < parts && seen * parts >= total * (out.len() + 1) && left > 0 {
            out.push(start..i + 1);
            start = i + 1;
        }
    }
    out.push(start..objects.len());
    out
}

/// The base an object is encoded against: its id, verified stored bytes and record
/// depth (shared between the objects hinted at it), and whether it is the root of
/// the hint's chain rather than the hint itself.
#[derive(Clone)]
struct ResolvedBase {
    id: ObjectId,
    stored: std::sync::Arc<(Vec<u8>, u8)>,
    rebased: bool,
}

/// The bases read so far for one batch, part by part ([`Resolver::resolve`]).
#[derive(Default)]
struct Resolver {
    /// Hints already looked at (found or not): never read twice.
    tried: HashSet<ObjectId>,
    /// A hint whose record is as deep as a writer goes, and its chain's root.
    roots: HashMap<ObjectId, ObjectId>,
    /// Bases found, by id.
    found: HashMap<ObjectId, std::sync::Arc<(Vec<u8>, u8)>>,
}

impl Resolver {
    /// The base of each object of `range` (by `hint`): the hints not looked at yet
    /// are read through `fetch` (one call for their records, one per level of the
    /// chains too deep to extend, see [`WRITE_DELTA_DEPTH`], one for the bases' own
    /// chains), their bytes taken from `known` where it has them.
    fn resolve(
        &mut self,
        range: std::ops::Range<usize>,
        hint: &dyn Fn(usize) -> Option<ObjectId>,
        known: &dyn Fn(&ObjectId) -> Option<Vec<u8>>,
        fetch: &mut FetchRecords<'_>,
    ) -> Result<Vec<Option<ResolvedBase>>, StoreError> {
        let wanted: Vec<ObjectId> = range
            .clone()
            .filter_map(hint)
            .filter(|h| self.tried.insert(*h))
            .collect();
        if !wanted.is_empty() {
            // A hint whose record is as deep as a writer goes gives way to the whole
            // record at the bottom of its chain.
            let mut records: HashMap<ObjectId, Option<Vec<u8>>> =
                wanted.iter().copied().zip(fetch(&wanted)?).collect();
            let deep: Vec<(ObjectId, ObjectId, u8)> = wanted
                .iter()
                .filter_map(|id| {
                    let (base, level) = delta_base(records.get(id)?.as_deref()?)?;
                    (level >= WRITE_DELTA_DEPTH).then_some((*id, base, level))
                })
                .collect();
            let (roots, root_records) = if deep.is_empty() {
                (HashMap::new(), HashMap::new())
            } else {
                chain_roots(deep, fetch)?
            };
            let bases: Vec<ObjectId> = {
                let mut seen = HashSet::new();
                wanted
                    .iter()
                    .map(|h| roots.get(h).copied().unwrap_or(*h))
                    .filter(|b| !self.found.contains_key(b) && seen.insert(*b))
                    .collect()
            };
            records.retain(|id, _| !roots.contains_key(id));
            records.extend(root_records.into_iter().map(|(id, r)| (id, Some(r))));
            let found = fetch_bases(&bases, records, known, fetch)?;
            self.roots.extend(roots);
            self.found.extend(
                found
                    .into_iter()
                    .map(|(id, f)| (id, std::sync::Arc::new(f))),
            );
        }
        Ok(range
            .map(|i| {
                let h = hint(i)?;
                let root = self.roots.get(&h).copied();
                let id = root.unwrap_or(h);
                Some(ResolvedBase {
                    id,
                    stored: std::sync::Arc::clone(self.found.get(&id)?),
                    rebased: root.is_some(),
                })
            })
            .collect())
    }
}

/// The whole record at the bottom of each chain of `deep` (a hint, its record's
/// base, its record's depth), followed header by header: one fetch per level for all
/// of them, no decompression. A chain that breaks on the way (a base absent, a depth
/// that does not step down by one) has no root here, and its hint is used as it is
/// (the encoder then stores the object whole, as for any base this deep). Returns
/// each hint's root and each root's record (read on the way, not read again).
#[allow(clippy::type_complexity)]
fn chain_roots(
    deep: Vec<(ObjectId, ObjectId, u8)>,
    fetch: &mut FetchRecords<'_>,
) -> Result<(HashMap<ObjectId, ObjectId>, HashMap<ObjectId, Vec<u8>>), StoreError> {
    let mut roots = HashMap::new();
    let mut root_records = HashMap::new();
    // (hint, the id to read next, the depth its record must have plus one)
    let mut open = deep;
    while !open.is_empty() {
        let want: Vec<ObjectId> = {
            let mut seen = HashSet::new();
            open.iter()
                .map(|(_, id, _)| *id)
                .filter(|id| seen.insert(*id))
                .collect()
        };
        let records = fetch(&want)?;
        let got: HashMap<ObjectId, Vec<u8>> = want
            .into_iter()
            .zip(records)
            .filter_map(|(id, r)| Some((id, r?)))
            .collect();
        let mut next = Vec::new();
        for (hint, id, level) in open {
            let Some(record) = got.get(&id) else {
                continue;
            };
            // Each step goes one level down, so the walk ends within
            // `MAX_DELTA_DEPTH` fetches.
            if depth(record).checked_add(1) != Some(level) {
                continue;
            }
            match delta_base(record) {
                None => {
                    roots.insert(hint, id);
                    // Several chains may share a root: its record is kept once.
                    root_records.entry(id).or_insert_with(|| record.clone());
                }
                Some((base, below)) => next.push((hint, base, below)),
            }
        }
        open = next;
    }
    Ok((roots, root_records))
}

/// Batches of at least this many bytes are compressed on two threads.
const PARALLEL_ENCODE: usize = 64 * 1024;

/// `encode(i, bytes)` of every object, in order: on two threads (each half of the
/// bytes) when the batch is large enough and the machine has two cores. Compression
/// is most of a commit's store write; the records are the same either way.
fn encode_all<'a>(
    objects: &[(ObjectId, &'a [u8])],
    encode: impl Fn(usize, &'a [u8]) -> Record<'a> + Sync,
) -> Vec<Record<'a>> {
    in_order_on_two(
        objects.len(),
        |i| objects[i].1.len(),
        PARALLEL_ENCODE,
        |i| encode(i, objects[i].1),
    )
}

/// `f(0) .. f(n - 1)`, in order, where item `i` weighs `len(i)` bytes: the items up to
/// half of the bytes on this thread and the rest on a second one, when they weigh at
/// least `min_total` bytes and the machine has two cores; all on this thread
/// otherwise.
fn in_order_on_two<T: Send>(
    n: usize,
    len: impl Fn(usize) -> usize,
    min_total: usize,
    f: impl Fn(usize) -> T + Sync,
) -> Vec<T> {
    let one = |range: std::ops::Range<usize>| -> Vec<T> { range.map(&f).collect() };
    let total: usize = (0..n).map(&len).sum();
    if n < 2 || total < min_total || cores() < 2 {
        return one(0..n);
    }
    let mut seen = 0;
    let split = (0..n)
        .position(|i| {
            seen += len(i);
            seen >= total / 2
        })
        .map_or(1, |p| p + 1)
        .clamp(1, n - 1);
    std::thread::scope(|scope| {
        // Off this core (see `crate::cpus`): left to the kernel, the second half
        // could wait behind the first on one core while the other idles.
        let beside = crate::cpus::Beside::here();
        let tail = scope.spawn(move || {
            beside.leave();
            one(split..n)
        });
        beside.yield_to();
        let mut out = one(0..split);
        out.extend(tail.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        out
    })
}

/// The cores this process may use (a cgroup's CPU quota counted, as
/// `available_parallelism` does), asked once: it reads the cgroup's files on every
/// call.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The verified stored bytes and record depth of each base the store holds and can
/// read; unreadable ones are left out (backend errors are returned).
fn fetch_bases(
    ids: &[ObjectId],
    mut have: HashMap<ObjectId, Option<Vec<u8>>>,
    known: &dyn Fn(&ObjectId) -> Option<Vec<u8>>,
    fetch: &mut FetchRecords<'_>,
) -> Result<HashMap<ObjectId, (Vec<u8>, u8)>, StoreError> {
    let missing: Vec<ObjectId> = ids
        .iter()
        .filter(|id| !have.contains_key(*id))
        .copied()
        .collect();
    if !missing.is_empty() {
        have.extend(missing.iter().copied().zip(fetch(&missing)?));
    }
    let records: Vec<Option<Vec<u8>>> = ids.iter().map(|id| have.remove(id).flatten()).collect();
    let depths: Vec<u8> = records
        .iter()
        .map(|r| r.as_deref().map_or(0, depth))
        .collect();
    // Bases whose bytes are known need only their record's depth (and presence).
    let mut out = HashMap::new();
    let mut rest_ids = Vec::new();
    let mut rest_records = Vec::new();
    for ((id, r), d) in ids.iter().zip(records).zip(&depths) {
        match (r, known(id)) {
            (Some(_), Some(stored)) => {
                out.insert(*id, (stored, *d));
            }
            (r, _) => {
                rest_ids.push(*id);
                rest_records.push(r);
            }
        }
    }
    if rest_ids.is_empty() {
        return Ok(out);
    }
    let depths: Vec<u8> = rest_records
        .iter()
        .map(|r| r.as_deref().map_or(0, depth))
        .collect();
    let (ids, records) = (&rest_ids[..], rest_records);
    let stored = match decode_many(ids, records.clone(), fetch) {
        Ok(s) => s,
        Err(e @ StoreError::Backend { .. }) => return Err(e),
        // One unreadable base: read each on its own, keeping the readable ones.
        Err(_) => {
            let mut out = Vec::with_capacity(ids.len());
            for (id, r) in ids.iter().zip(records) {
                out.push(
                    decode_many(std::slice::from_ref(id), vec![r], fetch)
                        .ok()
                        .and_then(|mut v| v.pop().flatten()),
                );
            }
            out
        }
    };
    out.extend(
        ids.iter()
            .zip(stored)
            .zip(depths)
            .filter_map(|((id, s), d)| s.map(|s| (*id, (s, d)))),
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_compresses_only_when_it_pays() {
        let text = b"hello world ".repeat(100);
        let id = ObjectId::hash_stored(&text);
        let packed = encode(&text, Compression::default());
        assert_eq!(packed[0], ZSTD);
        assert!(packed.len() < text.len() / 4);
        assert_eq!(decode(&id, &packed).unwrap(), text);

        let mut x = 1u64;
        let random: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let rid = ObjectId::hash_stored(&random);
        let kept = encode(&random, Compression::default());
        assert_eq!(kept[0], RAW);
        assert_eq!(decode(&rid, &kept).unwrap(), random);
        assert_eq!(encode(&text, Compression::None)[0], RAW);
    }

    fn xorshift(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn a_probe_keeps_incompressible_objects_raw_and_records_borrow_them() {
        let random = xorshift(7, 64 * 1024);
        let small_random = xorshift(8, PROBE_MIN - 1);
        let text = b"a line of text, again and again; ".repeat(2000);
        // Text with a random middle: the pieces sampled across it see the text.
        let mut mixed = text.clone();
        let mid = mixed.len() / 2 - 2048;
        mixed[mid..mid + 4096].copy_from_slice(&xorshift(9, 4096));
        // What the probe cannot see: one random block, repeated.
        let repeated = xorshift(10, 4096).repeat(8);
        let objects: Vec<(ObjectId, &[u8])> =
            [&random[..], &small_random, &text, &mixed, &repeated]
                .iter()
                .map(|b| (ObjectId::hash_stored(b), *b))
                .collect();
        assert!(incompressible(&random));
        assert!(incompressible(&xorshift(11, PROBE_MIN)));
        assert!(!incompressible(&small_random), "below the probe size");
        assert!(!incompressible(&text));
        assert!(!incompressible(&mixed));
        assert!(incompressible(&repeated));
        // Little-endian counters: uniform low bytes, constant high ones.
        let counters: Vec<u8> = (0u32..4096).flat_map(|i| i.to_le_bytes()).collect();
        assert!(!incompressible(&counters));
        // Half text, half random: the sample is mixed, and zstd is asked.
        let mut half = text[..32 * 1024].to_vec();
        half.extend_from_slice(&xorshift(12, 32 * 1024));
        assert!(!incompressible(&half));
        let dict = Dictionary::new(text[..4096].to_vec(), 1).unwrap();
        for dict in [None, Some(&dict)] {
            let records = encode_many_records(
                &objects,
                &[],
                Compression::default(),
                dict,
                &|_| None,
                &mut |_| unreachable!("no hints, no fetch"),
            )
            .unwrap();
            assert!(matches!(records[0], Record::Raw(b) if std::ptr::eq(b, &random[..])));
            assert!(matches!(records[1], Record::Raw(_)));
            assert!(matches!(&records[2], Record::Encoded(r) if r.len() < text.len() / 4));
            assert!(matches!(&records[3], Record::Encoded(r) if r.len() < mixed.len() / 4));
            assert!(matches!(records[4], Record::Raw(_)));
            for ((id, b), r) in objects.iter().zip(records) {
                assert_eq!(r.len(), r.clone().into_vec().len());
                let whole = r.into_vec();
                assert_eq!(whole, encode_with(b, Compression::default(), dict));
                if whole[0] != DICT {
                    assert_eq!(decode(id, &whole).unwrap(), *b);
                }
            }
        }
    }

    /// A batch large enough to be pipelined (its parts' bases read while earlier
    /// parts are encoded) gets the records of each object encoded alone against its
    /// base: bases shared by objects of several parts, hints the store lacks, and a
    /// hint as deep as a writer goes (the object is encoded against its chain's
    /// root) in two parts; each hint's record is asked for once.
    #[test]
    fn a_pipelined_batch_encodes_each_object_against_its_base() {
        let text = |seed: u32, len: usize| -> Vec<u8> {
            (0..len)
                .map(|i| b"abcdefghij klmnop\n"[(i * 7 + seed as usize * (i / 97)) % 18])
                .collect()
        };
        let edit = |b: &[u8], k: u32| {
            let mut e = b.to_vec();
            let at = (k as usize * 131) % (e.len() - 8);
            e[at..at + 8].copy_from_slice(b"EDITED!!");
            e
        };
        let mut records: HashMap<ObjectId, Vec<u8>> = HashMap::new();
        // Bases held whole (tag 0).
        let bases: Vec<(ObjectId, Vec<u8>)> = (0..8u32)
            .map(|k| {
                let b = text(k, 12_000);
                (ObjectId::hash_stored(&b), b)
            })
            .collect();
        for (id, b) in &bases {
            records.insert(*id, encode(b, Compression::None));
        }
        // A chain of deltas down to depth WRITE_DELTA_DEPTH from a whole root.
        let mut chain = vec![bases[0].clone()];
        for d in 1..=WRITE_DELTA_DEPTH {
            let (prev_id, prev) = chain.last().unwrap().clone();
            let next = edit(&prev, u32::from(d));
            let id = ObjectId::hash_stored(&next);
            let record = encode_delta(
                &next,
                &Base {
                    id: prev_id,
                    stored: &prev,
                    depth: d - 1,
                },
                Compression::default(),
            );
            assert_eq!(depth(&record), d);
            records.insert(id, record);
            chain.push((id, next));
        }
        let (deep_id, deep_bytes) = chain.last().unwrap().clone();
        let absent = ObjectId::hash_stored(b"nowhere");
        // 64 objects: most against a shared base, some against nothing held, two
        // (in the first and the last part) against the deep one.
        let objects: Vec<(ObjectId, Vec<u8>, Option<ObjectId>)> = (0..64u32)
            .map(|i| {
                let (hint, from) = match i {
                    5 | 60 => (Some(deep_id), deep_bytes.clone()),
                    _ if i % 9 == 4 => (Some(absent), text(i, 9_000)),
                    _ if i % 11 == 0 => (None, text(i, 9_000)),
                    _ => {
                        let (id, b) = &bases[i as usize % bases.len()];
                        (Some(*id), b.clone())
                    }
                };
                let b = edit(&from, i + 100);
                (ObjectId::hash_stored(&b), b, hint)
            })
            .collect();
        let batch: Vec<(ObjectId, &[u8])> = objects.iter().map(|(i, b, _)| (*i, &b[..])).collect();
        let hints: Vec<Option<ObjectId>> = objects.iter().map(|(_, _, h)| *h).collect();
        assert!(batch.iter().map(|(_, b)| b.len()).sum::<usize>() > PARALLEL_ENCODE);
        assert_eq!(split_by_bytes(&batch, PIPELINE_PARTS).len(), PIPELINE_PARTS);
        let mut asked: HashMap<ObjectId, usize> = HashMap::new();
        let got = encode_many_records(
            &batch,
            &hints,
            Compression::default(),
            None,
            &|_| None,
            &mut |ids| {
                for id in ids {
                    *asked.entry(*id).or_default() += 1;
                }
                Ok(ids.iter().map(|id| records.get(id).cloned()).collect())
            },
        )
        .unwrap();
        assert_eq!(got.len(), batch.len());
        let stored_of = |id: &ObjectId| {
            bases
                .iter()
                .chain(&chain)
                .find(|(i, _)| i == id)
                .map(|(_, b)| b.clone())
        };
        for ((id, b, hint), r) in objects.iter().zip(got) {
            let expected = match hint {
                Some(h) if *h == deep_id => {
                    // Against the chain's root, kept only while small.
                    let root = &chain[0];
                    let r = encode_delta(
                        b,
                        &Base {
                            id: root.0,
                            stored: &root.1,
                            depth: 0,
                        },
                        Compression::default(),
                    );
                    if r[0] == DELTA && r.len() * REBASED_MAX > b.len() {
                        encode(b, Compression::default())
                    } else {
                        r
                    }
                }
                Some(h) => match stored_of(h) {
                    Some(base) => encode_delta(
                        b,
                        &Base {
                            id: *h,
                            stored: &base,
                            depth: 0,
                        },
                        Compression::default(),
                    ),
                    None => encode(b, Compression::default()),
                },
                None => encode(b, Compression::default()),
            };
            let r = r.into_vec();
            assert_eq!(r, expected, "object {id}");
            if r[0] == DELTA {
                let (base, _) = delta_base(&r).unwrap();
                assert!(records.contains_key(&base));
            }
        }
        // Each hint's record is asked for once, the chain's root (a hint too) once
        // more on the way down the deep chain.
        for h in hints.iter().flatten() {
            let once_more = usize::from(*h == chain[0].0);
            assert_eq!(asked.get(h), Some(&(1 + once_more)), "hint {h}");
        }
    }

    #[test]
    fn a_large_batch_encodes_as_each_object_alone() {
        // Over PARALLEL_ENCODE: encoded on two threads where there are two cores.
        let objects: Vec<(ObjectId, Vec<u8>)> = (0..64u32)
            .map(|i| {
                let b = format!("object {i} ")
                    .repeat(1000 + i as usize * 37)
                    .into_bytes();
                (ObjectId::hash_stored(&b), b)
            })
            .collect();
        let batch: Vec<(ObjectId, &[u8])> = objects.iter().map(|(i, b)| (*i, &b[..])).collect();
        assert!(batch.iter().map(|(_, b)| b.len()).sum::<usize>() > PARALLEL_ENCODE);
        let records = encode_many(&batch, &[], Compression::default(), &mut |_| {
            unreachable!("no hints, no fetch")
        })
        .unwrap();
        assert_eq!(records.len(), batch.len());
        for ((id, b), r) in batch.iter().zip(&records) {
            assert_eq!(*r, encode(b, Compression::default()));
            assert_eq!(decode(id, r).unwrap(), *b);
        }
    }

    #[test]
    fn dictionary_records_round_trip_and_need_their_dictionary() {
        let objects: Vec<Vec<u8>> = (0..40u32)
            .map(|i| format!("object {i} of the store ").repeat(120).into_bytes())
            .collect();
        let batch: Vec<(ObjectId, &[u8])> = objects
            .iter()
            .map(|b| (ObjectId::hash_stored(b), &b[..]))
            .collect();
        assert!(Dictionary::sample(&batch[..DICT_MIN_OBJECTS - 1]).is_none());
        let bytes = Dictionary::sample(&batch).unwrap();
        assert_eq!(Dictionary::sample(&batch).unwrap(), bytes, "deterministic");
        assert!(bytes.len() <= DICT_SIZE);
        let dict = Dictionary::new(bytes.clone(), 1).unwrap();
        assert_eq!(dict.key(), dictionary_key(&bytes));
        let (id, b) = batch[7];
        // Decoding needs no compression tables: they are built by the first record
        // compressed against the dictionary.
        assert!(!dict.tables_built());
        let record = encode_with(b, Compression::default(), Some(&dict));
        assert!(dict.tables_built());
        assert_eq!(record[0], DICT);
        assert_eq!(dict_key(&record), Some(dict.key()));
        assert!(record.len() < encode(b, Compression::default()).len());
        assert_eq!(decode_dict(&id, &record, &dict).unwrap(), b);
        // Elsewhere, or against another dictionary, it is a typed error.
        assert!(matches!(
            decode(&id, &record),
            Err(StoreError::Corrupt { .. })
        ));
        let other = Dictionary::new(b"another dictionary".to_vec(), 1).unwrap();
        assert!(matches!(
            decode_dict(&id, &record, &other),
            Err(StoreError::Corrupt { .. })
        ));
        let mut bad = record.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0x5a;
        assert!(decode_dict(&id, &bad, &dict).map_or(true, |s| s != b));
        assert!(Dictionary::new(DICT_MAGIC.repeat(4), 1).is_err());
        assert!(Dictionary::new(vec![b'x'; DICT_SIZE + 1], 1).is_err());
    }

    #[test]
    fn hostile_records_are_typed_errors() {
        let id = ObjectId::hash_stored(b"x");
        for bad in [
            &[][..],
            &[7, 1, 2],
            &[ZSTD, 0xff, 0xfe],
            &[RAW, b'y'],
            &[DELTA, 1],
        ] {
            assert!(matches!(decode(&id, bad), Err(StoreError::Corrupt { .. })));
        }
        // A zstd bomb: a frame claiming far more than the object size limit.
        let big = vec![0u8; MAX_OBJECT_SIZE + 1];
        let mut bomb = vec![ZSTD];
        bomb.extend(zstd::bulk::compress(&big, 1).unwrap());
        assert!(matches!(
            decode(&id, &bomb),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
