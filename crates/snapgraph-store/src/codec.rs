//! How adapters keep an object's bytes at rest: raw or zstd, one tag byte first.
//!
//! ```text
//! encoded = tag (1 byte) || payload
//! tag 0: payload is the stored bytes
//! tag 1: payload is one zstd frame of the stored bytes
//! ```
//!
//! Ids always cover the stored (uncompressed) bytes, so two stores that compress
//! differently hold the same objects under the same ids, and `decode` re-hashes what
//! it returns: a store that flips a bit is caught on every read.

use std::cell::RefCell;

use snapgraph::object::MAX_OBJECT_SIZE;
use snapgraph::ObjectId;

use crate::error::StoreError;

const RAW: u8 = 0;
const ZSTD: u8 = 1;

/// Objects smaller than this are never compressed: the frame header eats the gain.
const MIN_COMPRESS: usize = 128;

/// Whether and how an adapter compresses objects at rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Keep objects as they are.
    None,
    /// zstd at `level`, kept only when it saves at least one sixteenth.
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

/// The bytes to keep at rest for `stored`.
pub fn encode(stored: &[u8], compression: Compression) -> Vec<u8> {
    if let Compression::Zstd { level } = compression {
        if stored.len() >= MIN_COMPRESS {
            if let Some(packed) = compress(stored, level) {
                if packed.len() + stored.len() / 16 < stored.len() {
                    let mut out = Vec::with_capacity(packed.len() + 1);
                    out.push(ZSTD);
                    out.extend_from_slice(&packed);
                    return out;
                }
            }
        }
    }
    let mut out = Vec::with_capacity(stored.len() + 1);
    out.push(RAW);
    out.extend_from_slice(stored);
    out
}

thread_local! {
    // zstd contexts are costly to set up next to a small object (tens of
    // microseconds, more than compressing a tree node), so each thread keeps one.
    static COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

fn compress(data: &[u8], level: i32) -> Option<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|(l, _)| *l != level) {
            *slot = Some((level, zstd::bulk::Compressor::new(level).ok()?));
        }
        let (_, c) = slot.as_mut()?;
        c.compress(data).ok()
    })
}

fn decompress(data: &[u8]) -> std::io::Result<Vec<u8>> {
    DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new()?);
        }
        match slot.as_mut() {
            Some(d) => d.decompress(data, MAX_OBJECT_SIZE),
            None => zstd::bulk::decompress(data, MAX_OBJECT_SIZE),
        }
    })
}

/// The stored bytes of `id` from what was kept at rest, verified against the id.
pub fn decode(id: &ObjectId, encoded: &[u8]) -> Result<Vec<u8>, StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt { id: *id, reason };
    let stored = match encoded.split_first() {
        Some((&RAW, rest)) => rest.to_vec(),
        Some((&ZSTD, rest)) => {
            decompress(rest).map_err(|e| corrupt(format!("zstd frame does not decode: {e}")))?
        }
        Some((tag, _)) => return Err(corrupt(format!("unknown encoding tag {tag}"))),
        None => return Err(corrupt("empty record".into())),
    };
    check(id, stored)
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

    #[test]
    fn hostile_records_are_typed_errors() {
        let id = ObjectId::hash_stored(b"x");
        for bad in [&[][..], &[7, 1, 2], &[ZSTD, 0xff, 0xfe], &[RAW, b'y']] {
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
