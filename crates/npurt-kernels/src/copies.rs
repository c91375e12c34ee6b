//! Copies between device arrays and other memory (device buffers, pinned host buffers, byte
//! ranges inside them): the ordering rule of `npurt.memcpy[_async]`, `DeviceArray.copy_`,
//! `to_host(out=)` and `to_device(stream=)`, in one place.
//!
//! * An array side must be contiguous (its bytes are one range of its buffer), else
//!   [`KernelArgError::NotContiguous`]; sizes follow ACL's copy rules (> 0 bytes, within the
//!   destination and the source).
//! * Asynchronous copies run on the stream's copy engine (npurt-core's
//!   [`try_memcpy_async`](memory::try_memcpy_async)). Before the copy is queued, the stream
//!   is ordered after the last writer of every array it touches (a device-side wait, as a
//!   kernel launch does); a copy *into* an array then records the stream as its last
//!   writer, so kernels launched later on any stream wait for the copy.
//! * Synchronous copies first wait (blocking) for the pending writes of every array they
//!   touch, then copy on the calling thread.
//! * Queued copies hold their memory (a view holds a clone of the buffer), so an array
//!   dropped while its copy is queued stays mapped until the copy ran.

use crate::{ArrayError, DeviceArray, KernelArgError};
use npurt_core::error::DeviceError;
use npurt_core::memory::{self, AnyBuffer, Buffer, BufferView, Staging};
use npurt_core::Pending;
use npurt_core::{Error, Stream};

/// One side of a copy.
#[derive(Clone, Copy)]
pub enum Side<'a> {
    /// A device array (contiguous).
    Array(&'a DeviceArray),
    /// A whole device or pinned host buffer.
    Buf(&'a AnyBuffer),
    /// A byte range inside one.
    View(&'a BufferView),
}

impl<'a> Side<'a> {
    fn array(self) -> Option<&'a DeviceArray> {
        match self {
            Side::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The bytes this side names (checked usable).
    fn bytes(self, op: &'static str) -> Result<BufferView, ArrayError> {
        match self {
            Side::Array(a) => array_bytes(a, op),
            Side::Buf(b) => Ok(BufferView::new(b.clone(), 0, b.nbytes())?),
            Side::View(v) => {
                v.check()?;
                Ok(v.clone())
            }
        }
    }
}

/// The bytes of a contiguous array as a range of its buffer (the buffer checked usable).
/// Non-contiguous: [`KernelArgError::NotContiguous`]; empty: a zero-size copy error.
pub fn array_bytes(a: &DeviceArray, op: &'static str) -> Result<BufferView, ArrayError> {
    let t = a.tensor();
    if !t.is_contiguous() {
        return Err(KernelArgError::NotContiguous {
            op,
            shape: t.shape().to_vec(),
            strides: t.strides().to_vec(),
        }
        .into());
    }
    Ok(BufferView::new(a.buffer().clone(), a.offset(), t.nbytes())?)
}

/// Checks `a` is usable and on `s`'s device.
fn check_on(a: &DeviceArray, s: &Stream) -> Result<(), Error> {
    a.buffer().check()?;
    if a.device() != s.device() {
        return Err(DeviceError::WrongDevice {
            what: "array",
            owner: a.device(),
            current: s.device(),
        }
        .into());
    }
    Ok(())
}

/// Validates both sides and the size, returning the views and the byte count.
fn resolve(
    op: &'static str,
    dst: Side<'_>,
    src: Side<'_>,
    nbytes: Option<usize>,
) -> Result<(BufferView, BufferView, usize), ArrayError> {
    let (d, s) = (dst.bytes(op)?, src.bytes(op)?);
    let n = memory::copy_size(op, d.nbytes(), s.nbytes(), nbytes)?;
    Ok((d, s, n))
}

/// Copies `nbytes` (default: all of `src`) on the calling thread, after the pending writes
/// of every array side (blocking: call it without an interpreter lock). Returns the bytes
/// copied.
pub fn memcpy(dst: Side<'_>, src: Side<'_>, nbytes: Option<usize>) -> Result<usize, ArrayError> {
    let (d, s, n) = resolve("memcpy", dst, src, nbytes)?;
    for a in [dst.array(), src.array()].into_iter().flatten() {
        a.synchronize()?;
    }
    Ok(memory::memcpy(&d, &s, Some(n))?)
}

/// Orders `s` after the arrays' last writers (after checking them all, so an error queues
/// nothing).
fn order_on(s: &Stream, arrays: [Option<&DeviceArray>; 2]) -> Result<(), Error> {
    for a in arrays.iter().flatten() {
        check_on(a, s)?;
    }
    for a in arrays.iter().flatten() {
        a.prepare_on(s)?;
    }
    Ok(())
}

/// Queues a copy of `nbytes` (default: all of `src`) on `s`'s copy engine, ordered after
/// the last writer of each array side; an array destination is then written by `s`. A full
/// stream gives the task back ([`Stream::push_pending`] it without an interpreter lock).
pub fn try_memcpy_async(
    dst: Side<'_>,
    src: Side<'_>,
    nbytes: Option<usize>,
    s: &Stream,
) -> Result<Result<u64, Pending>, ArrayError> {
    let (d, v, n) = resolve("memcpy_async", dst, src, nbytes)?;
    order_on(s, [dst.array(), src.array()])?;
    let r = memory::try_memcpy_async(&d, &v, Some(n), s)?;
    if let Some(a) = dst.array() {
        a.mark_written(s);
    }
    Ok(r)
}

/// ACL's staged copy from pageable memory into `dst`: `staging` holds the bytes (the caller
/// filled it), the copy runs on `s` as [`try_memcpy_async`] does, and the staging buffer
/// goes back to the pinned pool afterwards.
pub fn try_memcpy_async_from_staging(
    dst: Side<'_>,
    staging: Staging,
    nbytes: Option<usize>,
    s: &Stream,
) -> Result<Result<u64, Pending>, ArrayError> {
    let d = dst.bytes("memcpy_async")?;
    memory::copy_size("memcpy_async", d.nbytes(), staging.len(), nbytes)?;
    order_on(s, [dst.array(), None])?;
    let r = memory::try_memcpy_async_from_staging(&d, staging, nbytes, s)?;
    if let Some(a) = dst.array() {
        a.mark_written(s);
    }
    Ok(r)
}

/// Queues a copy (waiting for room if the stream is full); see [`try_memcpy_async`].
pub fn memcpy_async(dst: Side<'_>, src: Side<'_>, nbytes: Option<usize>, s: &Stream) -> Result<u64, ArrayError> {
    match try_memcpy_async(dst, src, nbytes, s)? {
        Ok(seq) => Ok(seq),
        Err(p) => Ok(s.push_pending(p)?),
    }
}

/// Blocks until `a` may be read or written by the host: `s` (if given: ACL's rule for
/// copies into pageable memory) and then the array's last writer are synchronized.
pub fn host_access(a: &DeviceArray, s: Option<&Stream>) -> Result<(), Error> {
    if let Some(s) = s {
        s.synchronize(None)?;
    }
    a.synchronize()
}
