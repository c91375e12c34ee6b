//! Copy operands: the sealed [`Buffer`] trait that copies and memsets accept
//! ([`DeviceBuffer`], [`HostBuffer`](super::HostBuffer), [`AnyBuffer`](super::AnyBuffer),
//! views) and the validated [`Region`](sealed::Region) each turns into, which keeps the
//! memory alive while a copy is queued.

pub(crate) mod sealed {
    use super::super::buffer::BufferInner;
    use super::super::host::HostInner;
    use std::sync::Arc;

    /// What keeps the memory of a copy operand alive while the copy is queued (held,
    /// never read).
    #[allow(dead_code)]
    pub(crate) enum Keep {
        Device(Arc<BufferInner>),
        Host(Arc<HostInner>),
        Staging(super::super::host::Staging),
    }

    /// A validated copy operand: `cap` bytes at `addr`, alive as long as `keep` is.
    pub struct Region {
        pub(crate) addr: usize,
        pub(crate) cap: usize,
        #[allow(dead_code)]
        pub(crate) keep: Keep,
    }

    pub trait Sealed {
        /// Checks the operand is usable and returns its memory.
        fn region(&self) -> crate::Result<Region>;
    }
}

use super::buffer::DeviceBuffer;
use crate::error::Result;
use sealed::{Keep, Region};
use std::sync::Arc;

/// Memory that copies and memsets accept: [`DeviceBuffer`], [`HostBuffer`](super::HostBuffer)
/// and [`AnyBuffer`]. Sealed: pointers are only ever taken from allocations npurt owns.
pub trait Buffer: sealed::Sealed + Send + Sync {
    /// Address of the first byte.
    fn addr(&self) -> usize;
    /// Size in bytes.
    fn nbytes(&self) -> usize;
}

impl sealed::Sealed for DeviceBuffer {
    #[inline]
    fn region(&self) -> Result<Region> {
        self.check()?;
        Ok(Region {
            addr: self.0.addr,
            cap: self.0.nbytes,
            keep: Keep::Device(Arc::clone(&self.0)),
        })
    }
}

impl Buffer for DeviceBuffer {
    fn addr(&self) -> usize {
        self.0.addr
    }
    fn nbytes(&self) -> usize {
        self.0.nbytes
    }
}
