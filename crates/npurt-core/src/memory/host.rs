//! Pinned host memory: [`HostBuffer`] (AscendCL `aclrtMallocHost`) and the staging buffers
//! that copies from and to pageable memory go through. Both come from one process-wide
//! [`PinnedPool`] (`mlock`ed where the process may lock memory, cached by size class).

use super::operand::sealed::{Keep, Region, Sealed};
use super::operand::Buffer;
use crate::error::{BufferError, Result};
use npurt_mem::{MemError, PinnedPool, PinnedStats};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::{AcqRel, Acquire};
use std::sync::{Arc, OnceLock};

/// Freed pinned allocations kept for reuse, at most (bytes).
const PINNED_CACHE_MAX: usize = 1 << 30;

static PINNED: OnceLock<PinnedPool> = OnceLock::new();

/// The process-wide pinned host pool.
pub fn pinned_pool() -> &'static PinnedPool {
    PINNED.get_or_init(|| PinnedPool::new(PINNED_CACHE_MAX))
}

/// Counters of the pinned host pool.
pub fn host_stats() -> PinnedStats {
    pinned_pool().stats()
}

/// Unmaps the pinned pool's cached (free) allocations; returns the bytes released.
pub fn host_empty_cache() -> usize {
    pinned_pool().empty_cache()
}

fn pinned_alloc(nbytes: usize) -> Result<usize> {
    pinned_pool().alloc(nbytes).map_err(|e| match e {
        MemError::Os {
            errno: libc::ENOMEM, ..
        } => MemError::OutOfMemory {
            requested: nbytes,
            limit: 0,
            allocated: pinned_pool().stats().live_bytes as usize,
            reserved: 0,
            largest_free: 0,
            what: "host memory: mmap refused".to_string(),
        }
        .into(),
        e => e.into(),
    })
}

/// The shared part of a [`HostBuffer`].
pub(crate) struct HostInner {
    addr: usize,
    nbytes: usize,
    capacity: usize,
    locked: bool,
    freed: AtomicBool,
}

impl Drop for HostInner {
    fn drop(&mut self) {
        // Last user gone (queued copies included): back to the pinned cache.
        if crate::sanitizer::on() {
            crate::sanitizer::race::forget(self.addr, self.capacity);
        }
        drop(pinned_pool().free(self.addr));
    }
}

/// Pinned ("page-locked") host memory. Copies between it and device memory are truly
/// asynchronous on a stream; the host must not touch the bytes until the stream got past
/// them. Cloning shares the allocation; [`free`](Self::free) works like
/// [`DeviceBuffer::free`](super::DeviceBuffer::free).
#[derive(Clone)]
pub struct HostBuffer(pub(crate) Arc<HostInner>);

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HostBuffer(addr={:#x}, nbytes={}, locked={})",
            self.addr(),
            self.nbytes(),
            self.is_locked()
        )
    }
}

impl PartialEq for HostBuffer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for HostBuffer {}

/// Allocates `nbytes` of pinned host memory (page aligned; contents unspecified).
pub fn malloc_host(nbytes: usize) -> Result<HostBuffer> {
    let addr = pinned_alloc(nbytes)?;
    let info = pinned_pool().lookup(addr).expect("a fresh pinned allocation is live");
    Ok(HostBuffer(Arc::new(HostInner {
        addr,
        nbytes,
        capacity: info.capacity,
        locked: info.locked,
        freed: AtomicBool::new(false),
    })))
}

impl HostBuffer {
    /// Address of the first byte.
    pub fn addr(&self) -> usize {
        self.0.addr
    }
    /// Bytes requested.
    pub fn nbytes(&self) -> usize {
        self.0.nbytes
    }
    /// Bytes of the underlying allocation (its power-of-two size class).
    pub fn capacity(&self) -> usize {
        self.0.capacity
    }
    /// Whether `mlock` succeeded (pages resident and locked). When it did not (e.g.
    /// `RLIMIT_MEMLOCK`), the memory still works, just not locked.
    pub fn is_locked(&self) -> bool {
        self.0.locked
    }
    /// True once freed through any handle.
    pub fn is_freed(&self) -> bool {
        self.0.freed.load(Acquire)
    }

    /// Fails if the buffer was freed.
    pub fn check(&self) -> Result<()> {
        if self.is_freed() {
            return Err(BufferError::Freed {
                what: "host buffer",
                addr: self.addr(),
            }
            .into());
        }
        Ok(())
    }

    /// Frees the buffer: later use of any handle is an error; the memory is reused once
    /// queued copies that use it (and every clone) are gone. Double free: 207002.
    pub fn free(self) -> Result<()> {
        if self.0.freed.swap(true, AcqRel) {
            return Err(MemError::DoubleFree { addr: self.addr() }.into());
        }
        Ok(())
    }
}

impl Sealed for HostBuffer {
    #[inline]
    fn region(&self) -> Result<Region> {
        self.check()?;
        Ok(Region {
            addr: self.0.addr,
            cap: self.0.nbytes,
            keep: Keep::Host(self.0.clone()),
        })
    }
}

impl Buffer for HostBuffer {
    fn addr(&self) -> usize {
        self.0.addr
    }
    fn nbytes(&self) -> usize {
        self.0.nbytes
    }
}

/// A pinned buffer owned by exactly one user: the bounce buffer of copies from and to
/// pageable memory. Unlike a [`HostBuffer`] it is never shared, so it can be borrowed as
/// a Rust slice.
pub struct Staging {
    addr: usize,
    len: usize,
}

impl Staging {
    /// A staging buffer of `len` bytes (> 0) from the pinned pool.
    pub fn new(len: usize) -> Result<Staging> {
        Ok(Staging {
            addr: pinned_alloc(len)?,
            len,
        })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false (a staging buffer has at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: [addr, addr+len) is a live read-write pinned allocation that this Staging
        // owns exclusively until drop (it is never shared with a queued operation while a
        // borrow exists: operations take the Staging by value).
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; `&mut self` makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.addr as *mut u8, self.len) }
    }

    pub(crate) fn into_region(self) -> Region {
        Region {
            addr: self.addr,
            cap: self.len,
            keep: Keep::Staging(self),
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        drop(pinned_pool().free(self.addr));
    }
}
