//! Body buffers of [`BODY_BUFFER`] bytes, kept per thread for reuse: a
//! fresh 256 KiB allocation per chunk came from `mmap` (above glibc's
//! threshold, or from an arena trimmed again after each free), so every
//! page of every chunk was faulted in and zeroed by the kernel before
//! `pread` wrote it (`clear_page`, `exc_page_fault` and `unmap_page_range`
//! ~8 % of the server's h2 profile, docs/benchmarks.md). At most
//! [`KEEP`] buffers are kept per thread. An h2
//! connection's write buffer ([`crate::h2::Gather`]) comes from here too.

use std::cell::RefCell;

use bytes::Bytes;

/// Capacity of the reused body buffers (this pool), 256 KiB: the size
/// of every h2 and TLS body chunk and of an h2 connection's write buffer,
/// which are defined from it so that their buffers are the pool's.
pub(crate) const BODY_BUFFER: usize = 256 << 10;

/// Buffers kept per thread (an h2 stream queues at most 1 MiB, and an
/// h2 connection gathers its frames in one while it writes).
pub const KEEP: usize = 8;

thread_local! {
    static FREE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer with room for `n` bytes: a kept one when `n` is
/// at most [`BODY_BUFFER`] and a large read (small reads take a small
/// buffer of their own).
pub fn take(n: usize) -> Vec<u8> {
    if !(BODY_BUFFER / 4..=BODY_BUFFER).contains(&n) {
        return Vec::with_capacity(n);
    }
    FREE.try_with(|f| f.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_else(|| Vec::with_capacity(BODY_BUFFER))
}

/// Hands a buffer back for reuse (one of another size is freed).
pub fn give(mut v: Vec<u8>) {
    if v.capacity() != BODY_BUFFER {
        return;
    }
    v.clear();
    let _ = FREE.try_with(|f| {
        let mut f = f.borrow_mut();
        if f.len() < KEEP {
            f.push(v);
        }
    });
}

/// Buffers kept by this thread now.
#[cfg(test)]
pub fn kept() -> usize {
    FREE.try_with(|f| f.borrow().len()).unwrap_or(0)
}

/// The buffer as `Bytes` that hand it back when the last reference is
/// dropped (the h2 crate drops a DATA payload once it is written).
pub fn bytes(v: Vec<u8>) -> Bytes {
    if v.capacity() != BODY_BUFFER {
        return Bytes::from(v);
    }
    Bytes::from_owner(Recycled(v))
}

struct Recycled(Vec<u8>);

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        give(std::mem::take(&mut self.0));
    }
}
