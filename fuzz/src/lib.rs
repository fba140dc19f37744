//! Helpers shared by the fuzz targets and the seed generator (`examples/seeds.rs`).
//!
//! The interesting encodings are content-addressed: a fuzzer cannot compute BLAKE3, so
//! raw mutation of a store or a snapshot only ever reaches "corrupt". Two tricks let it
//! go deeper:
//!
//! - **Junk stores** ([`build_store`]) are written as object *templates* in which a
//!   32-byte slot starting with [`MARKER`] stands for "the id of earlier object
//!   `slot[4]`". The harness hashes each object after filling its slots, so a mutated
//!   tree still points at real children and the decoders' checks get exercised.
//! - **Snapshots** ([`fix_trailer`]) get their checksum (and MAC) recomputed when the
//!   input asks for it, so mutations inside the body reach the record parser.

use std::collections::HashMap;

use snapgraph::{Limits, ObjectId, SnapshotKey, Workspace};

/// Marks a reference slot in a junk-store template.
pub const MARKER: [u8; 4] = [0xff, b'I', b'D', 0xff];

/// The key of keyed snapshots in the targets and seeds (that of `corpus/v1`).
pub const KEY: SnapshotKey = [0x42; 32];

/// Small limits, so that a hostile input cannot make one run slow or large.
pub fn small_limits() -> Limits {
    Limits {
        max_files: 2_000,
        max_bytes: 16 << 20,
        max_unpacked_bytes: 32 << 20,
    }
}

/// A junk store decoded from fuzz input: the store and the key of each record in order.
pub struct JunkStore {
    /// Objects by the id they are stored under (true or not).
    pub store: HashMap<ObjectId, Vec<u8>>,
    /// The id each record was stored under, in input order.
    pub keys: Vec<ObjectId>,
    /// Keys of the records whose first byte is the commit kind.
    pub commits: Vec<ObjectId>,
}

/// Builds a store from records `ctl u8 | len u24 LE | template` (see the module docs).
///
/// `ctl & 3`: 0 stores the object under its hash; 1 under the previous record's id
/// (a swapped object); 2 under its hash but with its last byte dropped (corrupt);
/// 3 under the hash of the template before its slots were filled.
pub fn build_store(mut data: &[u8]) -> JunkStore {
    let mut out = JunkStore {
        store: HashMap::new(),
        keys: Vec::new(),
        commits: Vec::new(),
    };
    let mut true_ids: Vec<ObjectId> = Vec::new();
    while data.len() >= 4 && out.keys.len() < 4096 {
        let ctl = data[0];
        let len = u32::from_le_bytes([data[1], data[2], data[3], 0]) as usize;
        let len = len.min(data.len() - 4);
        let template = &data[4..4 + len];
        data = &data[4 + len..];
        let stored = fill_slots(template, &true_ids);
        let id = ObjectId::hash_stored(&stored);
        let (key, bytes) = match ctl & 3 {
            0 => (id, stored),
            1 => (*out.keys.last().unwrap_or(&id), stored),
            2 => {
                let mut s = stored;
                s.pop();
                (id, s)
            }
            _ => (ObjectId::hash_stored(template), stored),
        };
        if bytes.first() == Some(&4) {
            out.commits.push(key);
        }
        out.store.insert(key, bytes);
        out.keys.push(key);
        true_ids.push(id);
    }
    out
}

/// Replaces every [`MARKER`] slot of `template` by the id of an earlier object.
pub fn fill_slots(template: &[u8], earlier: &[ObjectId]) -> Vec<u8> {
    let mut out = template.to_vec();
    if earlier.is_empty() {
        return out;
    }
    let mut i = 0;
    while i + 32 <= out.len() {
        if out[i..i + 4] == MARKER {
            let which = out[i + 4] as usize % earlier.len();
            let target = earlier[earlier.len() - 1 - which];
            out[i..i + 32].copy_from_slice(target.as_bytes());
            i += 32;
        } else {
            i += 1;
        }
    }
    out
}

/// The junk-store encoding of well-formed objects listed in dependency order:
/// references to earlier objects become slots, so mutations keep them pointing at
/// objects the harness will hash.
pub fn encode_store_seed(objects: &[(ObjectId, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (_, bytes)) in objects.iter().enumerate() {
        let mut template = bytes.clone();
        for (j, (earlier, _)) in objects[..i].iter().enumerate() {
            let which = (i - 1 - j) as u8;
            if i - 1 - j > 255 {
                continue;
            }
            let mut slot = [0u8; 32];
            slot[..4].copy_from_slice(&MARKER);
            slot[4] = which;
            let mut k = 0;
            while k + 32 <= template.len() {
                if template[k..k + 32] == earlier.as_bytes()[..] {
                    template[k..k + 32].copy_from_slice(&slot);
                    k += 32;
                } else {
                    k += 1;
                }
            }
        }
        out.push(0);
        out.extend_from_slice(&(template.len() as u32).to_le_bytes()[..3]);
        out.extend_from_slice(&template);
    }
    out
}

/// Recomputes the trailer of a snapshot: the checksum of everything before it, and,
/// with `key`, the MAC. The last 32 (64 with a key) bytes are taken to be the trailer.
pub fn fix_trailer(bytes: &mut Vec<u8>, key: Option<&SnapshotKey>) {
    let trailer = if key.is_some() { 64 } else { 32 };
    let end = bytes.len().saturating_sub(trailer);
    bytes.truncate(end);
    let checksum = *blake3::hash(bytes).as_bytes();
    bytes.extend_from_slice(&checksum);
    if let Some(k) = key {
        let mac = *blake3::keyed_hash(k, &bytes[..end]).as_bytes();
        bytes.extend_from_slice(&mac);
    }
}

/// Everything observable about a workspace, to check that a failed operation left it
/// untouched.
pub fn observe(
    ws: &Workspace,
) -> (
    Vec<(String, snapgraph::Metadata)>,
    Vec<u8>,
    Option<ObjectId>,
) {
    (ws.walk(), ws.state().to_vec(), ws.head())
}

/// A workspace with a little of everything, the target of restores in the targets.
pub fn bystander() -> Workspace {
    let mut ws = Workspace::new();
    ws.set_limits(small_limits());
    ws.write("/keep/me.txt", b"precious").expect("valid path");
    ws.write("/big", pseudo_random(70_000, 3))
        .expect("valid path");
    ws.symlink("/link", "keep/me.txt").expect("valid path");
    ws.set_state(b"bystander state".to_vec());
    ws
}

/// Deterministic pseudo-random bytes (xorshift64).
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        out.extend_from_slice(&s.to_le_bytes());
    }
    out.truncate(len);
    out
}
