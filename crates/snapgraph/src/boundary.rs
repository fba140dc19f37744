//! The content-defined boundary rule shared by tree and manifest nodes.
//!
//! Items (directory entries, chunk references, child references) are grouped into nodes.
//! A node ends after an item when
//! - it holds at least [`MIN_ITEMS`] items and the item's 32-bit boundary hash is below
//!   `u32::MAX / FANOUT` (about one item in [`FANOUT`]), or
//! - it holds [`MAX_ITEMS`] items, or its items' encoded sizes reach [`MAX_BYTES`].
//!
//! The decision depends only on the items since the previous boundary, so the grouping
//! is a function of the item sequence alone (history independence), and an edit can
//! only move boundaries until the first unchanged boundary after it (locality).

/// Expected items per node.
pub const FANOUT: u32 = 64;
/// Fewest items before a hash boundary may end a node.
pub const MIN_ITEMS: usize = 2;
/// Most items per node.
pub const MAX_ITEMS: usize = crate::limits::MAX_NODE_ITEMS;
/// Encoded item bytes after which a node ends.
pub const MAX_BYTES: usize = 64 << 10;

const THRESHOLD: u32 = u32::MAX / FANOUT;

/// The running state of one node being filled.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Boundary {
    count: usize,
    bytes: usize,
}

impl Boundary {
    /// Adds an item; true when the node ends after it (the state then resets).
    pub fn push(&mut self, hash: u32, size: usize) -> bool {
        self.count += 1;
        self.bytes += size;
        let cut = (self.count >= MIN_ITEMS && hash < THRESHOLD)
            || self.count >= MAX_ITEMS
            || self.bytes >= MAX_BYTES;
        if cut {
            *self = Self::default();
        }
        cut
    }
}

/// The boundary hash of a directory entry name.
pub(crate) fn name_hash(name: &str) -> u32 {
    let h = blake3::hash(name.as_bytes());
    let b = h.as_bytes();
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Encoded size of a postcard varint of `v`.
pub(crate) fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Splits `items` into node ranges with the boundary rule.
pub(crate) fn split<T>(
    items: &[T],
    hash: impl Fn(&T) -> u32,
    size: impl Fn(&T) -> usize,
) -> Vec<core::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut state = Boundary::default();
    let mut start = 0;
    for (i, item) in items.iter().enumerate() {
        if state.push(hash(item), size(item)) {
            out.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < items.len() {
        out.push(start..items.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_covers_everything_and_respects_bounds() {
        let items: Vec<u32> = (0..10_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let ranges = split(&items, |h| *h, |_| 40);
        assert_eq!(ranges.first().unwrap().start, 0);
        assert_eq!(ranges.last().unwrap().end, items.len());
        for w in ranges.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        assert!(ranges.iter().all(|r| r.len() <= MAX_ITEMS));
        // The hash rule, not the caps, decides most nodes.
        let avg = items.len() / ranges.len();
        assert!((16..=256).contains(&avg), "average node {avg}");
    }

    #[test]
    fn caps_bound_adversarial_items() {
        // Never a hash boundary: nodes end at MAX_ITEMS.
        let none = vec![u32::MAX; 3000];
        let r = split(&none, |h| *h, |_| 1);
        assert_eq!(r[0].len(), MAX_ITEMS);
        // Always a hash boundary: nodes still hold MIN_ITEMS.
        let all = vec![0u32; 10];
        let r = split(&all, |h| *h, |_| 1);
        assert!(r.iter().all(|r| r.len() == MIN_ITEMS));
        // Large items end nodes by size.
        let big = vec![u32::MAX; 10];
        let r = split(&big, |h| *h, |_| MAX_BYTES / 2);
        assert!(r.iter().all(|r| r.len() == 2));
    }

    #[test]
    fn varint_lengths() {
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
        assert_eq!(varint_len(u64::MAX), 10);
        for v in [0u64, 1, 127, 128, 300, 1 << 20, u64::MAX] {
            assert_eq!(postcard::to_allocvec(&v).unwrap().len(), varint_len(v));
        }
    }
}
