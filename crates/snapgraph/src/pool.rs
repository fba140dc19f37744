//! Large byte buffers kept for reuse, so that a caller who writes or checks out large
//! files again and again does not pay for fresh memory each time.
//!
//! Why: a large buffer is fresh pages from the kernel (glibc maps every allocation of
//! 32 MiB or more anew and unmaps it when freed), and the first touch of each 4 KiB
//! page is a page fault. On the project's virtual machines a fault costs 2-3 us and
//! faults of two threads do not overlap (two threads touching 64 MiB each take twice
//! as long as one), so copying 64 MiB into a fresh buffer costs more time than cutting
//! and hashing it on two threads. A buffer taken from a [`BufferPool`] was touched
//! before: writing into it faults nothing.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Buffers smaller than this are left to the allocator: its heap reuses them already.
pub(crate) const POOL_MIN: usize = 1 << 20;

/// Large byte buffers the workspaces sharing this pool reuse.
///
/// A workspace given a pool ([`Workspace::set_buffer_pool`](crate::Workspace::set_buffer_pool))
/// takes the buffer of each file of 1 MiB or more it copies in
/// ([`write`](crate::Workspace::write), a checkout from a source that lends its bytes)
/// from the pool when one fits, and the buffer goes back to the pool when the last
/// holder of those bytes drops them (the workspace, its clones, an
/// [`ObjectSet`](crate::ObjectSet) of a commit). The pool holds at most
/// [`max_bytes`](Self::max_bytes) of free buffers; a buffer that would exceed it is
/// freed, and dropping the pool frees what it holds. Clones share one pool, across
/// threads.
///
/// ```
/// use snapgraph::{BufferPool, CommitOptions, Workspace};
///
/// let pool = BufferPool::new(256 << 20);
/// let big = vec![7u8; 2 << 20];
/// for _turn in 0..3 {
///     let mut ws = Workspace::new();
///     ws.set_buffer_pool(Some(pool.clone()));
///     ws.write("/big.bin", &big)?;
///     let commit = ws.commit(CommitOptions::new())?;
///     assert_eq!(ws.read("/big.bin")?, &big[..]);
///     drop((ws, commit));
///     // The file's buffer is back in the pool for the next turn.
///     assert!(pool.held_bytes() >= big.len());
/// }
/// # Ok::<(), snapgraph::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct BufferPool(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    max_bytes: usize,
    free: Mutex<Free>,
}

#[derive(Debug, Default)]
struct Free {
    /// Buffers in the order they came back, the oldest first.
    buffers: Vec<Vec<u8>>,
    /// Sum of their capacities.
    bytes: usize,
}

impl BufferPool {
    /// A pool holding at most `max_bytes` of free buffers (by capacity).
    pub fn new(max_bytes: usize) -> Self {
        Self(Arc::new(Inner {
            max_bytes,
            free: Mutex::new(Free::default()),
        }))
    }

    /// The most bytes of free buffers the pool holds.
    pub fn max_bytes(&self) -> usize {
        self.0.max_bytes
    }

    /// Bytes of free buffers held now (their capacities).
    pub fn held_bytes(&self) -> usize {
        self.free().bytes
    }

    /// Frees every buffer the pool holds.
    pub fn clear(&self) {
        let taken = std::mem::take(&mut *self.free());
        drop(taken);
    }

    fn free(&self) -> MutexGuard<'_, Free> {
        // Nothing panics while the lock is held but an allocation failure; the list
        // is whole either way.
        self.0.free.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The smallest free buffer of at least `len` bytes' capacity, and not more than
    /// twice that (a much larger one is kept for a file that needs it), if any.
    fn take(&self, len: usize) -> Option<Vec<u8>> {
        let mut free = self.free();
        let (at, _) = free
            .buffers
            .iter()
            .enumerate()
            // The most recent of equal ones: the likeliest to be in a cache still.
            .rev()
            .filter(|(_, b)| b.capacity() >= len && b.capacity() / 2 <= len)
            .min_by_key(|(_, b)| b.capacity())?;
        let buffer = free.buffers.remove(at);
        free.bytes -= buffer.capacity();
        Some(buffer)
    }

    /// Keeps `buffer` for reuse, freeing the oldest buffers held to make room; one
    /// larger than the whole pool is freed.
    fn put(&self, buffer: Vec<u8>) {
        let size = buffer.capacity();
        if size < POOL_MIN || size > self.0.max_bytes {
            return;
        }
        let mut free = self.free();
        let mut evicted = Vec::new();
        while free.bytes + size > self.0.max_bytes && !free.buffers.is_empty() {
            let oldest = free.buffers.remove(0);
            free.bytes -= oldest.capacity();
            evicted.push(oldest);
        }
        free.bytes += size;
        free.buffers.push(buffer);
        drop(free);
        // Freed after the lock is released.
        drop(evicted);
    }
}

/// A buffer of `len` bytes to overwrite whole: from `pool` when one fits (its old
/// bytes left in place, no fill), else zeroed by the allocator (fresh pages for a
/// large buffer: no fill either).
pub(crate) fn buffer_to_fill(pool: Option<&BufferPool>, len: usize) -> Vec<u8> {
    match pool.filter(|_| len >= POOL_MIN).and_then(|p| p.take(len)) {
        Some(mut buffer) => {
            if buffer.len() >= len {
                buffer.truncate(len);
            } else {
                // Bytes of the buffer not initialised yet (it came back with spare
                // capacity): zero them once.
                buffer.resize(len, 0);
            }
            buffer
        }
        None => vec![0u8; len],
    }
}

/// An empty buffer of at least `len` bytes' capacity to append to: from `pool` when
/// one fits.
pub(crate) fn buffer_to_append(pool: Option<&BufferPool>, len: usize) -> Vec<u8> {
    match pool.filter(|_| len >= POOL_MIN).and_then(|p| p.take(len)) {
        Some(mut buffer) => {
            buffer.clear();
            buffer
        }
        None => Vec::with_capacity(len),
    }
}

/// Bytes a workspace assembled, given back to their pool (if it still exists) when
/// dropped.
#[derive(Debug)]
pub(crate) struct Buffer {
    bytes: Vec<u8>,
    home: Weak<Inner>,
}

impl Buffer {
    /// `bytes`, to be given back to `pool` when dropped.
    pub fn new(bytes: Vec<u8>, pool: &BufferPool) -> Self {
        Self {
            bytes,
            home: Arc::downgrade(&pool.0),
        }
    }
}

impl core::ops::Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(inner) = self.home.upgrade() {
            BufferPool(inner).put(std::mem::take(&mut self.bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_and_fit() {
        let pool = BufferPool::new(8 << 20);
        let a = Buffer::new(vec![1u8; 2 << 20], &pool);
        let b = Buffer::new(vec![2u8; 3 << 20], &pool);
        let small = Buffer::new(vec![3u8; 1000], &pool);
        assert_eq!(pool.held_bytes(), 0);
        drop((a, b, small));
        assert_eq!(pool.held_bytes(), 5 << 20);
        // The smallest that fits, its old bytes kept or cut.
        let got = buffer_to_fill(Some(&pool), (2 << 20) - 5);
        assert_eq!(got.len(), (2 << 20) - 5);
        assert!(got.iter().all(|&b| b == 1));
        assert_eq!(pool.held_bytes(), 3 << 20);
        // Too small a request for the 3 MiB buffer (more than twice as large), and
        // too small for the pool at all.
        assert_eq!(buffer_to_fill(Some(&pool), 1 << 20).capacity(), 1 << 20);
        assert_eq!(buffer_to_append(Some(&pool), 1000).capacity(), 1000);
        assert_eq!(pool.held_bytes(), 3 << 20);
        let appended = buffer_to_append(Some(&pool), 3 << 20);
        assert!(appended.is_empty() && appended.capacity() >= 3 << 20);
        assert_eq!(pool.held_bytes(), 0);
        // Spare capacity is zeroed when filled.
        let mut spare = Vec::with_capacity(2 << 20);
        spare.extend_from_slice(&[9u8; 10]);
        drop(Buffer::new(spare, &pool));
        let filled = buffer_to_fill(Some(&pool), 2 << 20);
        assert_eq!(&filled[..10], &[9u8; 10]);
        assert!(filled[10..].iter().all(|&b| b == 0));
    }

    #[test]
    fn the_pool_stays_within_its_bound() {
        let pool = BufferPool::new(5 << 20);
        for i in 0..4u8 {
            drop(Buffer::new(vec![i; 2 << 20], &pool));
        }
        // The oldest were freed to make room.
        assert_eq!(pool.held_bytes(), 4 << 20);
        assert!(buffer_to_fill(Some(&pool), 2 << 20).iter().all(|&b| b == 3));
        assert!(buffer_to_fill(Some(&pool), 2 << 20).iter().all(|&b| b == 2));
        drop(Buffer::new(vec![0; 6 << 20], &pool));
        assert_eq!(pool.held_bytes(), 0);
        drop(Buffer::new(vec![0; 2 << 20], &pool));
        pool.clear();
        assert_eq!(pool.held_bytes(), 0);
        // A buffer outliving its pool is freed.
        let orphan = Buffer::new(vec![0; 2 << 20], &pool);
        drop(pool);
        drop(orphan);
        assert!(buffer_to_fill(None, 2 << 20).iter().all(|&b| b == 0));
    }
}
