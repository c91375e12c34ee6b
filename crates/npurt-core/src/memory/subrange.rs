//! [`SubRange`]: a sub-allocator over a registered range of one live device allocation
//! (what the tutorial dialect's `acl.rt.register_mem(ptr, size, attrs)` /
//! `acl.rt.malloc_from_mem(size, ptr)` do: carve blocks out of memory the caller already
//! holds, without touching the device's pools).
//!
//! Blocks follow `aclrtMalloc`'s size rule ([`npurt_mem::align::acl_malloc_size`]: 32-byte
//! multiples plus a 32-byte pad), so every block starts 32-byte aligned within the range;
//! placement is best fit with coalescing (the `range-alloc` crate). A block is an ordinary
//! [`DeviceBuffer`]: copies and kernels check it against its own size, `free` ends it, and
//! its bytes go back to the range when its last handle (queued work included) is dropped.
//! The range holds a handle of the allocation it carves from, so that memory stays mapped
//! while any block lives. Blocks count nowhere else: the allocation they sit in is already
//! counted against the device, its quota and the memory hooks.

use super::buffer::{DeviceBuffer, Owner};
use super::device_mem::DeviceMemory;
use super::events::MemPoolKind;
use super::PageKind;
use crate::error::{BufferError, Result};
use npurt_mem::align::acl_malloc_size;
use npurt_mem::MemError;
use parking_lot::Mutex;
use range_alloc::RangeAllocator;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{AcqRel, Acquire};
use std::sync::Arc;

/// Start addresses of blocks are multiples of this within the range.
const ALIGN: usize = 32;

/// The shared part of a [`SubRange`]; blocks hold it.
pub(crate) struct SubInner {
    parent: DeviceBuffer,
    base: usize,
    len: usize,
    free: Mutex<RangeAllocator<usize>>,
    live: AtomicUsize,
}

impl SubInner {
    pub(crate) fn mem(&self) -> &DeviceMemory {
        self.parent.0.mem()
    }

    pub(crate) fn parent_pool_kind(&self) -> MemPoolKind {
        self.parent.0.pool_kind()
    }

    pub(crate) fn parent_page_kind(&self) -> Option<PageKind> {
        self.parent.page_kind()
    }

    /// Gives a block's bytes back (the block's last handle is gone).
    pub(crate) fn release(&self, addr: usize, nbytes: usize) {
        let start = addr - self.base;
        let len = acl_malloc_size(nbytes).unwrap_or(nbytes);
        self.free.lock().free_range(start..start + len);
        self.live.fetch_sub(1, AcqRel);
    }
}

/// A registered range `[base, base + len)` of a live device allocation, allocating blocks
/// out of it; see the module docs.
#[derive(Clone)]
pub struct SubRange(Arc<SubInner>);

impl SubRange {
    /// Registers `[addr, addr + len)`, which must lie inside `parent` (a live allocation).
    /// The start is rounded up to 32 bytes (the bytes before it are not used).
    pub fn register(parent: &DeviceBuffer, addr: usize, len: usize) -> Result<SubRange> {
        parent.check()?;
        let op = "register_mem";
        if len == 0 {
            return Err(BufferError::ZeroSize { op }.into());
        }
        let end = parent.addr() + parent.nbytes();
        let offset = addr.wrapping_sub(parent.addr());
        if addr < parent.addr() || addr >= end || len > end - addr {
            return Err(BufferError::OutOfRange {
                op,
                side: "allocation",
                nbytes: len,
                offset,
                capacity: parent.nbytes(),
            }
            .into());
        }
        let base = addr.next_multiple_of(ALIGN);
        let usable = (addr + len).saturating_sub(base);
        Ok(SubRange(Arc::new(SubInner {
            parent: parent.clone(),
            base,
            len: usable,
            free: Mutex::new(RangeAllocator::new(0..usable)),
            live: AtomicUsize::new(0),
        })))
    }

    /// A block of `nbytes` (ACL's rule: 32-byte multiple + 32-byte pad taken from the
    /// range); out of room: the pool's out-of-memory error (ACL 207001).
    pub fn alloc(&self, nbytes: usize) -> Result<DeviceBuffer> {
        self.0.parent.check()?;
        let need = acl_malloc_size(nbytes)?;
        let got = self.0.free.lock().allocate_range(need);
        let range = got.map_err(|e| self.out_of_room(need, e.fragmented_free_length))?;
        self.0.live.fetch_add(1, AcqRel);
        let addr = self.0.base + range.start;
        Ok(DeviceBuffer::new(addr, nbytes, Owner::Sub(self.0.clone())))
    }

    /// `available`: the free bytes (in pieces too small for `need` when fragmented).
    fn out_of_room(&self, need: usize, available: usize) -> MemError {
        MemError::OutOfMemory {
            requested: need,
            limit: self.0.len,
            allocated: self.0.len - available,
            reserved: self.0.len,
            largest_free: available.min(need.saturating_sub(1)),
            what: "registered range".into(),
        }
    }

    /// First usable address (the registered start rounded up to 32 bytes).
    pub fn base(&self) -> usize {
        self.0.base
    }

    /// Usable bytes of the range.
    pub fn len(&self) -> usize {
        self.0.len
    }

    /// True if the range has no usable bytes.
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }

    /// Bytes not held by any block.
    pub fn available(&self) -> usize {
        self.0.free.lock().total_available()
    }

    /// Blocks alive (handed out, last handle not yet dropped).
    pub fn live_blocks(&self) -> usize {
        self.0.live.load(Acquire)
    }

    /// The allocation the range carves from.
    pub fn parent(&self) -> &DeviceBuffer {
        &self.0.parent
    }
}

impl std::fmt::Debug for SubRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubRange")
            .field("base", &format_args!("{:#x}", self.0.base))
            .field("len", &self.0.len)
            .field("live_blocks", &self.live_blocks())
            .finish()
    }
}
