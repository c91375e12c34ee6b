//! [`BufferView`]: a byte range inside a device or pinned host allocation, for APIs that
//! address memory by raw pointer (`aclrtMemcpy(dst + offset, ...)`, `npurt.acl`).
//!
//! A view holds a clone of its allocation's handle, so the memory stays mapped as long as
//! the view (or a copy queued with it) lives, exactly like the buffer itself. Its range is
//! checked once, against the allocation's size, when it is made; every use checks again
//! that the allocation was not freed and its device not reset. Views implement
//! [`Buffer`], so [`memcpy`](super::memcpy), [`try_memcpy_async`](super::try_memcpy_async),
//! [`memset`](super::memset) and [`try_memset_async`](super::try_memset_async) take them
//! as they take whole buffers — no new raw-pointer code.
//!
//! ```
//! use npurt_core::{alloc, memory::{self, BufferView, PagePolicy}};
//!
//! let dev = alloc::malloc(4096, PagePolicy::HugeFirst)?;
//! let host = memory::malloc_host(4096)?;
//! memory::memset(&host, 7, None)?;
//! let dst = BufferView::new(dev.clone(), 1024, 512)?;      // bytes [1024, 1536) of `dev`
//! let src = BufferView::new(host.clone(), 0, 512)?;
//! memory::memcpy(&dst, &src, None)?;
//! assert!(BufferView::new(dev.clone(), 4000, 512).is_err()); // past the end: 107000
//! # Ok::<(), npurt_core::Error>(())
//! ```

use super::any::AnyBuffer;
use super::operand::sealed::{Region, Sealed};
use super::operand::Buffer;
use crate::error::{BufferError, Result};

/// `nbytes` bytes at `offset` inside a [`DeviceBuffer`](super::DeviceBuffer) or
/// [`HostBuffer`](super::HostBuffer); see the module docs.
#[derive(Clone, Debug)]
pub struct BufferView {
    buf: AnyBuffer,
    offset: usize,
    nbytes: usize,
}

impl BufferView {
    /// A view of `nbytes` (> 0) bytes at `offset`; the range must lie inside the
    /// allocation (107000 otherwise) and the allocation must be usable (107017).
    pub fn new(buf: impl Into<AnyBuffer>, offset: usize, nbytes: usize) -> Result<Self> {
        let buf = buf.into();
        buf.check()?;
        if nbytes == 0 {
            return Err(BufferError::ZeroSize { op: "view" }.into());
        }
        let cap = buf.nbytes();
        if offset.checked_add(nbytes).is_none_or(|end| end > cap) {
            return Err(BufferError::OutOfRange {
                op: "view",
                side: "allocation",
                nbytes,
                offset,
                capacity: cap,
            }
            .into());
        }
        Ok(Self { buf, offset, nbytes })
    }

    /// The allocation the view is in.
    pub fn buffer(&self) -> &AnyBuffer {
        &self.buf
    }

    /// Offset of the first byte inside the allocation.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The device of a device view, `None` for pinned host memory.
    pub fn device(&self) -> Option<u32> {
        match &self.buf {
            AnyBuffer::Device(b) => Some(b.device()),
            AnyBuffer::Host(_) => None,
        }
    }

    /// Fails if the allocation was freed or its device was reset.
    pub fn check(&self) -> Result<()> {
        self.buf.check()
    }
}

impl Sealed for BufferView {
    #[inline]
    fn region(&self) -> Result<Region> {
        let r = self.buf.region()?;
        // `new` checked offset + nbytes <= the allocation's size, which is `r.cap`.
        Ok(Region {
            addr: r.addr + self.offset,
            cap: self.nbytes,
            keep: r.keep,
        })
    }
}

impl Buffer for BufferView {
    fn addr(&self) -> usize {
        self.buf.addr() + self.offset
    }
    fn nbytes(&self) -> usize {
        self.nbytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc;
    use crate::memory::{self, PagePolicy};

    #[test]
    fn views_copy_inside_their_range_only() {
        let dev = alloc::malloc(4096, PagePolicy::HugeFirst).unwrap();
        let host = memory::malloc_host(4096).unwrap();
        memory::write(&host, 0, &[0u8; 4096]).unwrap();
        memory::write(&dev, 0, &[9u8; 4096]).unwrap();
        let src = BufferView::new(dev.clone(), 100, 50).unwrap();
        let dst = BufferView::new(host.clone(), 1000, 64).unwrap();
        assert_eq!(dst.addr(), host.addr() + 1000);
        assert_eq!(memory::memcpy(&dst, &src, None).unwrap(), 50);
        let mut out = [0u8; 1200];
        memory::read(&host, 0, &mut out).unwrap();
        assert!(out[1000..1050].iter().all(|&b| b == 9));
        assert!(out[..1000].iter().chain(&out[1050..]).all(|&b| b == 0));
        // destMax: 64 bytes of room, 65 asked.
        let big = BufferView::new(dev.clone(), 0, 65).unwrap();
        assert_eq!(memory::memcpy(&dst, &big, None).unwrap_err().acl().code, 107000);
        assert_eq!(BufferView::new(dev.clone(), 4096, 1).unwrap_err().acl().code, 107000);
        assert_eq!(BufferView::new(dev.clone(), 0, 0).unwrap_err().acl().code, 107000);
        assert_eq!(src.device(), Some(dev.device()));
        assert_eq!(dst.device(), None);
    }

    #[test]
    fn a_view_of_a_freed_allocation_is_unusable() {
        let dev = alloc::malloc(1024, PagePolicy::HugeFirst).unwrap();
        let v = BufferView::new(dev.clone(), 512, 512).unwrap();
        dev.free().unwrap();
        assert_eq!(v.check().unwrap_err().acl().code, 107017);
        assert_eq!(memory::memset(&v, 1, None).unwrap_err().acl().code, 107017);
        assert!(BufferView::new(v.buffer().clone(), 0, 1).is_err());
    }

    #[test]
    fn async_copies_through_views_run_in_stream_order() {
        let s = crate::current::current_stream().unwrap();
        let dev = alloc::malloc(256, PagePolicy::HugeFirst).unwrap();
        let host = memory::malloc_host(256).unwrap();
        memory::write(&host, 0, &[5u8; 256]).unwrap();
        let a = BufferView::new(dev.clone(), 128, 128).unwrap();
        let b = BufferView::new(host.clone(), 0, 128).unwrap();
        memory::memcpy_async(&a, &b, None, &s).unwrap();
        memory::memset_async(&BufferView::new(dev.clone(), 128, 1).unwrap(), 3, None, &s).unwrap();
        let out = memory::malloc_host(128).unwrap();
        memory::memcpy_async(&BufferView::new(out.clone(), 0, 128).unwrap(), &a, None, &s).unwrap();
        dev.clone().free().unwrap(); // stream-ordered: the queued copies keep it alive
        assert!(a.check().is_err());
        s.synchronize(None).unwrap();
        let mut bytes = [0u8; 128];
        memory::read(&out, 0, &mut bytes).unwrap();
        assert_eq!(bytes[0], 3);
        assert!(bytes[1..].iter().all(|&b| b == 5));
    }
}
