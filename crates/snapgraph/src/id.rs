//! Object ids: 32-byte BLAKE3 digests of an object's stored bytes.
//!
//! How the digest is taken depends on the object's format version (its second byte,
//! `docs/FORMAT.md` section 2): version 1 hashes all stored bytes with plain BLAKE3;
//! version 2 hashes only the body, in BLAKE3's keyed mode with a key fixed for the
//! object's kind, so a body is hashed where it lies (aligned on BLAKE3's 1 KiB chunk
//! grid, without a header in front) and kinds stay domain-separated.

use core::fmt;
use core::str::FromStr;

/// The BLAKE3 key-derivation context of format version 2's id key for each kind,
/// indexed by kind byte minus one (`docs/FORMAT.md` section 2). Only tests derive
/// the keys again; the engine uses [`ID_KEYS_V2`].
#[cfg(test)]
const ID_KEY_CONTEXTS_V2: [&str; 6] = [
    "snapgraph 2026-12-01 object id v2 chunk",
    "snapgraph 2026-12-01 object id v2 manifest",
    "snapgraph 2026-12-01 object id v2 tree",
    "snapgraph 2026-12-01 object id v2 commit",
    "snapgraph 2026-12-01 object id v2 capabilities",
    "snapgraph 2026-12-01 object id v2 reads",
];

/// `blake3::derive_key(context, b"")` of each of the contexts `docs/FORMAT.md` names
/// (section 2), computed once here (a test recomputes them from
/// `ID_KEY_CONTEXTS_V2`) so that no object pays for a key derivation.
const ID_KEYS_V2: [[u8; 32]; 6] = [
    // chunk
    [
        0xd7, 0x8c, 0x12, 0x5f, 0x3d, 0x47, 0x90, 0x4b, 0xb9, 0x3c, 0x0d, 0x6e, 0x29, 0x09, 0x90,
        0x43, 0xa5, 0xea, 0xcb, 0x99, 0xb4, 0xf9, 0xe5, 0x81, 0x3b, 0xbb, 0x91, 0xd9, 0x40, 0x0a,
        0x38, 0xb4,
    ],
    // manifest
    [
        0x15, 0xfa, 0x3b, 0xd7, 0x0f, 0xce, 0x17, 0xa1, 0x62, 0x55, 0x2b, 0x04, 0x4c, 0x43, 0xc4,
        0x9b, 0x5f, 0x92, 0x46, 0xae, 0x7f, 0x53, 0x4a, 0x7a, 0x90, 0x35, 0xd2, 0xaa, 0xd0, 0xf3,
        0xab, 0x4b,
    ],
    // tree
    [
        0x84, 0x05, 0x97, 0x40, 0x18, 0xb7, 0xff, 0xa7, 0x1e, 0x5b, 0xf3, 0xa5, 0xcc, 0x0f, 0x66,
        0xa2, 0x25, 0x59, 0x5a, 0x85, 0x7f, 0x11, 0x88, 0x5f, 0xf9, 0x4e, 0xc0, 0x14, 0x43, 0xfd,
        0x54, 0x51,
    ],
    // commit
    [
        0x69, 0x52, 0xbf, 0x69, 0x7b, 0x40, 0x6c, 0x82, 0x3f, 0x4f, 0xd0, 0xc2, 0xc9, 0x9e, 0xd3,
        0x4f, 0xee, 0x58, 0xbc, 0x2c, 0x11, 0x12, 0xc2, 0x25, 0x11, 0xd9, 0x0d, 0x45, 0x17, 0xe7,
        0x8a, 0xcc,
    ],
    // capabilities
    [
        0xfe, 0x70, 0xb7, 0xce, 0x2f, 0xff, 0xb6, 0x4d, 0xfd, 0x56, 0x30, 0x70, 0x23, 0xab, 0x89,
        0x63, 0x67, 0x2d, 0x2e, 0xd5, 0x37, 0x2c, 0x3c, 0x65, 0x49, 0xa6, 0x76, 0xca, 0xa5, 0x66,
        0x97, 0x68,
    ],
    // reads
    [
        0xf3, 0xd7, 0xc2, 0x7f, 0x27, 0x26, 0x46, 0x37, 0xf6, 0xd6, 0x5d, 0x96, 0x46, 0x67, 0x6a,
        0x37, 0x61, 0x5e, 0x8d, 0x9a, 0x93, 0xaa, 0x9c, 0x03, 0x18, 0x4a, 0xa1, 0xf8, 0x13, 0xb1,
        0x3a, 0x47,
    ],
];

/// The name of a stored object: a BLAKE3 hash of its stored bytes.
///
/// Every stored object begins with a kind byte and a version byte (see
/// `docs/FORMAT.md`), and both choose how it is hashed (plain BLAKE3 of everything in
/// version 1, keyed BLAKE3 of the body with a key per kind in version 2), so ids of
/// different object kinds are domain-separated: bytes stored as a chunk can never be
/// taken for a tree or a commit with the same id.
///
/// Displayed and parsed as 64 lowercase hex characters; parsing accepts either case.
/// Equality is constant-time, as for [`blake3::Hash`].
#[derive(Clone, Copy, PartialOrd, Ord)]
pub struct ObjectId([u8; 32]);

impl ObjectId {
    /// The length of an id in bytes.
    pub const LEN: usize = 32;

    /// Wraps raw digest bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The raw digest bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Hashes `stored` (an object's complete stored bytes, header included) by the
    /// rule of the version in its header: for version 2 and a known kind, the keyed
    /// BLAKE3 hash of the body with that kind's key; otherwise (version 1, and bytes
    /// no reader accepts) plain BLAKE3 of all the bytes.
    pub fn hash_stored(stored: &[u8]) -> Self {
        if let [kind, version, body @ ..] = stored {
            if let Some(id) = Self::hash_keyed(*kind, *version, body) {
                return id;
            }
        }
        Self(*blake3::hash(stored).as_bytes())
    }

    /// The keyed-BLAKE3 id of a version 2 object of kind byte `kind`; `None` for
    /// other versions and unknown kinds.
    pub(crate) fn hash_keyed(kind: u8, version: u8, body: &[u8]) -> Option<Self> {
        if version != 2 {
            return None;
        }
        let key = ID_KEYS_V2.get(usize::from(kind).checked_sub(1)?)?;
        Some(Self(*blake3::keyed_hash(key, body).as_bytes()))
    }

    /// Parses 64 hex characters (either case).
    pub fn from_hex(hex: impl AsRef<[u8]>) -> Result<Self, ParseIdError> {
        let hex = hex.as_ref();
        if hex.len() != 64 {
            return Err(ParseIdError::Length { len: hex.len() });
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex, &mut out).map_err(|_| ParseIdError::NotHex)?;
        Ok(Self(out))
    }

    /// The 64-character lowercase hex form.
    pub fn to_hex(&self) -> String {
        // Through `Display` (one 64-byte table encode), not `hex::encode`, whose
        // char-by-char `String` building costs about ten times as much: bindings
        // turn every id they hand out into hex.
        self.to_string()
    }

    /// A `u32` taken from the id's first four bytes (little-endian). Ids are uniformly
    /// distributed, so this is what content-defined boundaries are decided from.
    pub(crate) fn low_u32(&self) -> u32 {
        u32::from_le_bytes([self.0[0], self.0[1], self.0[2], self.0[3]])
    }
}

impl PartialEq for ObjectId {
    fn eq(&self, other: &Self) -> bool {
        // Constant time, like blake3::Hash.
        blake3::Hash::from_bytes(self.0) == blake3::Hash::from_bytes(other.0)
    }
}

impl Eq for ObjectId {}

impl core::hash::Hash for ObjectId {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 64];
        // Cannot fail: the buffer is exactly twice the input length.
        if hex::encode_to_slice(self.0, &mut buf).is_err() {
            return Err(fmt::Error);
        }
        f.write_str(core::str::from_utf8(&buf).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({self})")
    }
}

impl FromStr for ObjectId {
    type Err = ParseIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_hex(s)
    }
}

impl From<[u8; 32]> for ObjectId {
    fn from(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }
}

impl AsRef<[u8]> for ObjectId {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl serde::Serialize for ObjectId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&self.to_hex())
        } else {
            // A fixed-size tuple: 32 raw bytes with no length prefix in postcard.
            serde::Serialize::serialize(&self.0, s)
        }
    }
}

impl<'de> serde::Deserialize<'de> for ObjectId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            struct HexVisitor;
            impl serde::de::Visitor<'_> for HexVisitor {
                type Value = ObjectId;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("64 hex characters")
                }
                fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ObjectId, E> {
                    ObjectId::from_hex(v).map_err(E::custom)
                }
            }
            d.deserialize_str(HexVisitor)
        } else {
            <[u8; 32] as serde::Deserialize>::deserialize(d).map(Self)
        }
    }
}

/// Why a string is not an [`ObjectId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseIdError {
    /// The input was not 64 characters long.
    #[error("an object id is 64 hex characters, got {len}")]
    Length {
        /// The length that was given.
        len: usize,
    },
    /// The input had a character that is not a hex digit.
    #[error("an object id must contain only hex digits")]
    NotHex,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::ObjectKind;

    #[test]
    fn hex_round_trip_either_case() {
        let id = ObjectId::hash_stored(b"x");
        let hex = id.to_hex();
        assert_eq!(hex.len(), 64);
        assert_eq!(hex.parse::<ObjectId>().unwrap(), id);
        assert_eq!(hex.to_uppercase().parse::<ObjectId>().unwrap(), id);
        assert_eq!(format!("{id}"), hex);
    }

    #[test]
    fn bad_hex_is_a_typed_error() {
        assert_eq!(
            "abc".parse::<ObjectId>(),
            Err(ParseIdError::Length { len: 3 })
        );
        let s = "g".repeat(64);
        assert_eq!(s.parse::<ObjectId>(), Err(ParseIdError::NotHex));
        // Multi-byte characters are counted in bytes and never panic.
        let s = "é".repeat(32);
        assert_eq!(s.parse::<ObjectId>(), Err(ParseIdError::NotHex));
    }

    #[test]
    fn version_2_keys_are_derived_from_their_contexts() {
        for (context, key) in ID_KEY_CONTEXTS_V2.iter().zip(&ID_KEYS_V2) {
            assert_eq!(&blake3::derive_key(context, b""), key, "{context}");
        }
        // One context per kind, in kind order.
        for byte in 1..=6u8 {
            let kind = ObjectKind::from_byte(byte).unwrap();
            assert!(ID_KEY_CONTEXTS_V2[usize::from(byte) - 1].ends_with(kind.name()));
        }
    }

    #[test]
    fn each_version_hashes_by_its_rule() {
        let body = b"some body bytes";
        for kind in [ObjectKind::Chunk, ObjectKind::Tree, ObjectKind::Reads] {
            let key = &ID_KEYS_V2[usize::from(kind.byte()) - 1];
            for version in [1u8, 2, 3] {
                let stored = [&[kind.byte(), version][..], body].concat();
                let id = ObjectId::hash_stored(&stored);
                assert_eq!(ObjectId::hash_object(kind, version, body), id);
                let expected = if version == 2 {
                    *blake3::keyed_hash(key, body).as_bytes()
                } else {
                    *blake3::hash(&stored).as_bytes()
                };
                assert_eq!(id.as_bytes(), &expected, "{kind} v{version}");
            }
        }
        // The same body under two kinds, or two versions, has two ids.
        let chunk = ObjectId::hash_object(ObjectKind::Chunk, 2, body);
        assert_ne!(chunk, ObjectId::hash_object(ObjectKind::Tree, 2, body));
        assert_ne!(chunk, ObjectId::hash_object(ObjectKind::Chunk, 1, body));
        // Bytes too short for a header, or of an unknown kind, hash plainly.
        for bytes in [&b""[..], &[2u8][..], &[99u8, 2, 1][..], &[0u8, 2][..]] {
            assert_eq!(
                ObjectId::hash_stored(bytes).as_bytes(),
                blake3::hash(bytes).as_bytes()
            );
        }
    }

    #[test]
    fn postcard_is_32_raw_bytes() {
        let id = ObjectId::hash_stored(b"y");
        let bytes = postcard::to_allocvec(&id).unwrap();
        assert_eq!(bytes.as_slice(), id.as_bytes());
        let back: ObjectId = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, id);
    }
}
