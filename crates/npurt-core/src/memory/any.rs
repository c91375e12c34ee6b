//! [`AnyBuffer`]: a device or pinned host buffer, for code that handles both (bindings).

use super::buffer::DeviceBuffer;
use super::operand::sealed::{self, Region};
use super::operand::Buffer;
use crate::error::Result;

/// A device or pinned host buffer, for code that handles both (bindings).
#[derive(Clone, Debug)]
pub enum AnyBuffer {
    Device(DeviceBuffer),
    Host(super::HostBuffer),
}

impl AnyBuffer {
    /// Fails if the buffer was freed or (device memory) its device was reset.
    pub fn check(&self) -> Result<()> {
        match self {
            AnyBuffer::Device(b) => b.check(),
            AnyBuffer::Host(b) => b.check(),
        }
    }
}

impl sealed::Sealed for AnyBuffer {
    #[inline]
    fn region(&self) -> Result<Region> {
        match self {
            AnyBuffer::Device(b) => b.region(),
            AnyBuffer::Host(b) => b.region(),
        }
    }
}

impl Buffer for AnyBuffer {
    fn addr(&self) -> usize {
        match self {
            AnyBuffer::Device(b) => b.addr(),
            AnyBuffer::Host(b) => b.addr(),
        }
    }
    fn nbytes(&self) -> usize {
        match self {
            AnyBuffer::Device(b) => b.nbytes(),
            AnyBuffer::Host(b) => b.nbytes(),
        }
    }
}

impl From<DeviceBuffer> for AnyBuffer {
    fn from(b: DeviceBuffer) -> Self {
        AnyBuffer::Device(b)
    }
}

impl From<super::HostBuffer> for AnyBuffer {
    fn from(b: super::HostBuffer) -> Self {
        AnyBuffer::Host(b)
    }
}
