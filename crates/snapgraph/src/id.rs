//! Object ids: 32-byte BLAKE3 digests of an object's stored bytes.

use core::fmt;
use core::str::FromStr;

/// The name of a stored object: the BLAKE3 hash of its stored bytes.
///
/// Every stored object begins with a kind byte (see `docs/FORMAT.md`), so ids of
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

    /// Hashes `stored` (an object's complete stored bytes, kind byte included).
    pub fn hash_stored(stored: &[u8]) -> Self {
        Self(*blake3::hash(stored).as_bytes())
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
    fn postcard_is_32_raw_bytes() {
        let id = ObjectId::hash_stored(b"y");
        let bytes = postcard::to_allocvec(&id).unwrap();
        assert_eq!(bytes.as_slice(), id.as_bytes());
        let back: ObjectId = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, id);
    }
}
