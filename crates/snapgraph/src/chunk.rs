//! Content-defined chunking with FastCDC (2020), the parameters pinned by the format.

/// Smallest chunk (except a file's last), in bytes.
pub const CHUNK_MIN: usize = 4 << 10;
/// Target average chunk size.
pub const CHUNK_AVG: usize = 16 << 10;
/// Largest chunk.
pub const CHUNK_MAX: usize = 64 << 10;

/// The one FastCDC chunker of the format: FastCDC 2020 with normalization level 1, the
/// crate's default gear table and [`CHUNK_MIN`]/[`CHUNK_AVG`]/[`CHUNK_MAX`]. Every cut
/// the engine makes (a whole file, a re-cut around an edit, a thread's share) goes
/// through it, so the parameters are written once.
pub(crate) fn chunker(data: &[u8]) -> fastcdc::v2020::FastCDC<'_> {
    fastcdc::v2020::FastCDC::with_level(
        data,
        CHUNK_MIN,
        CHUNK_AVG,
        CHUNK_MAX,
        fastcdc::v2020::Normalization::Level1,
    )
}

/// The length of the first chunk of `data` (all of it when no cut is made; 0 for
/// empty data).
pub(crate) fn first_cut(data: &[u8]) -> usize {
    chunker(data).next().map_or(data.len(), |c| c.length)
}

/// Cut points of `data`: the end offset of each chunk, in order. Empty data has none.
///
/// FastCDC 2020 with normalization level 1 and the crate's default gear table; a test
/// pins the cut points of a fixed input so an upgrade of the `fastcdc` crate cannot
/// silently move them.
pub fn cut_points(data: &[u8]) -> Vec<usize> {
    chunker(data).map(|c| c.offset + c.length).collect()
}

#[cfg(test)]
pub(crate) mod tests_support {
    /// Deterministic pseudo-random bytes (xorshift), no RNG crate needed.
    pub(crate) fn pseudo_random(len: usize, mut seed: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            out.extend_from_slice(&seed.to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// `data` edited at `at` (clamped to its length) by `kind` (0 flips the byte
    /// there, 1 inserts `len` bytes, 2 deletes up to `len`, 3 cuts it short there):
    /// the edits the re-cut tests place at and around cut points.
    pub(crate) fn edited(data: &[u8], at: usize, kind: u8, len: usize) -> Vec<u8> {
        let at = at.min(data.len());
        let mut d = data.to_vec();
        match kind % 4 {
            0 => {
                if at < d.len() {
                    d[at] ^= 0x5A;
                }
            }
            1 => d
                .splice(at..at, std::iter::repeat_n(0x33u8, len))
                .for_each(drop),
            2 => d.drain(at..(at + len).min(data.len())).for_each(drop),
            _ => d.truncate(at),
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::pseudo_random;
    use super::*;

    #[test]
    fn cut_points_are_pinned() {
        let data = pseudo_random(256 << 10, 0x5eed);
        let cuts = cut_points(&data);
        // If this changes, chunk ids of existing snapshots change: that is a format
        // change and needs a version bump, not an updated constant.
        assert_eq!(
            cuts,
            PINNED_CUTS.to_vec(),
            "FastCDC cut points moved: {cuts:?}"
        );
    }

    #[test]
    fn first_cut_is_the_first_of_the_cut_points() {
        let data = pseudo_random(256 << 10, 0x5eed);
        assert_eq!(first_cut(&data), PINNED_CUTS[0]);
        assert_eq!(
            first_cut(&data[PINNED_CUTS[0]..]),
            cut_points(&data[PINNED_CUTS[0]..])[0]
        );
        assert_eq!(first_cut(&[]), 0);
        assert_eq!(first_cut(&[1, 2, 3]), 3);
    }

    const PINNED_CUTS: &[usize] = &[
        24884, 32344, 69491, 94584, 115924, 138709, 143940, 152899, 164713, 183256, 200453, 220980,
        236101, 253572, 262144,
    ];

    #[test]
    fn chunks_respect_bounds() {
        let data = pseudo_random(1 << 20, 7);
        let cuts = cut_points(&data);
        let mut prev = 0;
        for (i, &c) in cuts.iter().enumerate() {
            let len = c - prev;
            assert!(len <= CHUNK_MAX);
            if i + 1 < cuts.len() {
                assert!(len >= CHUNK_MIN);
            }
            prev = c;
        }
        assert_eq!(prev, data.len());
        assert!(cut_points(&[]).is_empty());
        assert_eq!(cut_points(&[1, 2, 3]), vec![3]);
    }
}
