//! A strict reader of the postcard encoding of object bodies (FORMAT.md section 9).
//!
//! [`decode_body`](super::decode_body) decodes with postcard's generic (serde) decoder
//! and then encodes the value again to compare the bytes: a value has one encoding,
//! and anything else is `Malformed`. For tree nodes, the most read objects (every
//! diff, checkout, lazy load and status reads them), that was about 17,000
//! instructions a node, half of it the second encoding. This reader accepts exactly
//! the bytes postcard writes and nothing else, so a decode needs no re-encode:
//!
//! - a varint is 7 bits a byte, least significant group first, a set high bit
//!   meaning more; the shortest form only (a last byte of 0 after others is an
//!   overlong form), at most 5 bytes for a `u32` and 10 for a `u64` or a length,
//!   and no bits past the type's width;
//! - a `u8` is one raw byte; an enum is its variant's index as a `u32` varint;
//! - a string, a byte vector and a sequence are their length (a varint) and then
//!   their bytes (valid UTF-8 for a string) or elements;
//! - an id is its 32 bytes (a fixed-size tuple: no length).
//!
//! A test checks the reader against postcard's decoder followed by the re-encode, on
//! arbitrary bytes and on mutations of valid encodings. [`put_varint`] and
//! [`put_bytes`] write the same forms: a tree node's encoder (`object::tree`) is
//! built on them and checked against postcard's bytes.

use crate::id::ObjectId;

/// Why bytes are not the canonical encoding of the value read; the reason names
/// what was being read.
pub(crate) type Problem = String;

/// A cursor over a body.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// `Ok` if every byte was read; else how many trail.
    pub(crate) fn finish(self) -> Result<(), Problem> {
        match self.rest.len() {
            0 => Ok(()),
            n => Err(format!("{n} trailing bytes")),
        }
    }

    pub(crate) fn byte(&mut self, what: &str) -> Result<u8, Problem> {
        let (&b, rest) = self
            .rest
            .split_first()
            .ok_or_else(|| format!("cannot decode: body ends in {what}"))?;
        self.rest = rest;
        Ok(b)
    }

    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Problem> {
        if self.rest.len() < n {
            return Err(format!("cannot decode: body ends in {what}"));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    /// A varint of at most `bits` bits (32 or 64), in its shortest form.
    fn varint(&mut self, bits: u32, what: &str) -> Result<u64, Problem> {
        let max_bytes = bits.div_ceil(7) as usize;
        let mut value = 0u64;
        for i in 0..max_bytes {
            let b = self.byte(what)?;
            let group = u64::from(b & 0x7f);
            let shift = 7 * i as u32;
            if i == max_bytes - 1 && group >> (bits - shift) != 0 {
                return Err(format!("cannot decode: {what} overflows {bits} bits"));
            }
            value |= group << shift;
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    return Err(format!(
                        "non-canonical encoding ({what} is an overlong varint)"
                    ));
                }
                return Ok(value);
            }
        }
        Err(format!("cannot decode: {what} overflows {bits} bits"))
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, Problem> {
        // At most 32 bits by the check in `varint`.
        self.varint(32, what).map(|v| v as u32)
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, Problem> {
        self.varint(64, what)
    }

    /// An enum's variant index.
    pub(crate) fn variant(&mut self, what: &str) -> Result<u32, Problem> {
        self.u32(what)
    }

    /// A length (postcard's `usize` varint, 64 bits here) of at most `max`.
    pub(crate) fn len(&mut self, max: usize, what: &str) -> Result<usize, Problem> {
        let n = self.varint(64, what)?;
        match usize::try_from(n) {
            Ok(n) if n <= max => Ok(n),
            _ => Err(format!("cannot decode: {what} of {n}, at most {max}")),
        }
    }

    /// A length-prefixed byte string, no longer than the body holds.
    pub(crate) fn bytes(&mut self, what: &str) -> Result<&'a [u8], Problem> {
        let n = self.varint(64, what)?;
        match usize::try_from(n) {
            Ok(n) if n <= self.rest.len() => self.take(n, what),
            _ => Err(format!(
                "cannot decode: {what} of {n} bytes, at most {}",
                self.rest.len()
            )),
        }
    }

    /// A length-prefixed UTF-8 string.
    pub(crate) fn string(&mut self, what: &str) -> Result<String, Problem> {
        let b = self.bytes(what)?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| format!("cannot decode: {what} is not UTF-8"))
    }

    pub(crate) fn id(&mut self, what: &str) -> Result<ObjectId, Problem> {
        let b = self.take(32, what)?;
        let mut out = [0u8; 32];
        out.copy_from_slice(b);
        Ok(ObjectId::from_bytes(out))
    }
}

/// Appends `v` as a varint (7 bits a byte, least significant first).
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a length-prefixed byte string (a string's UTF-8 bytes, a byte vector).
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u64_of(bytes: &[u8]) -> Result<u64, Problem> {
        let mut r = Reader::new(bytes);
        let v = r.u64("v")?;
        r.finish().map(|()| v)
    }

    fn u32_of(bytes: &[u8]) -> Result<u32, Problem> {
        let mut r = Reader::new(bytes);
        let v = r.u32("v")?;
        r.finish().map(|()| v)
    }

    #[test]
    fn varints_are_postcards_in_their_shortest_form() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let enc = postcard::to_allocvec(&v).unwrap();
            assert_eq!(u64_of(&enc), Ok(v));
        }
        for v in [0u32, 127, 128, u32::MAX] {
            let enc = postcard::to_allocvec(&v).unwrap();
            assert_eq!(u32_of(&enc), Ok(v));
        }
        // Overlong forms of 0 and 1, bits past the width, too many bytes, cut short.
        assert!(u64_of(&[0x80, 0x00]).unwrap_err().contains("overlong"));
        assert!(u64_of(&[0x81, 0x80, 0x00])
            .unwrap_err()
            .contains("overlong"));
        assert!(u32_of(&[0xff, 0xff, 0xff, 0xff, 0x10]).is_err());
        assert_eq!(u32_of(&[0xff, 0xff, 0xff, 0xff, 0x0f]), Ok(u32::MAX));
        assert!(u64_of(&[0xff; 9].iter().chain(&[0x02]).copied().collect::<Vec<_>>()).is_err());
        assert!(u64_of(&[0x80; 11]).is_err());
        assert!(u64_of(&[0x80]).unwrap_err().contains("ends"));
        assert!(u64_of(&[1, 2]).unwrap_err().contains("trailing"));
    }

    #[test]
    fn strings_and_lengths_are_bounded() {
        let mut r = Reader::new(&[3, b'a', b'b']);
        assert!(r.string("name").unwrap_err().contains("at most 2"));
        let mut r = Reader::new(&[2, 0xff, 0xfe]);
        assert!(r.string("name").unwrap_err().contains("UTF-8"));
        let mut r = Reader::new(&[5]);
        assert!(r.len(4, "count").unwrap_err().contains("at most 4"));
    }
}
