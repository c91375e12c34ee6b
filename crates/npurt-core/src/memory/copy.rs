//! Copies and memsets (AscendCL `aclrtMemcpy[Async]`, `aclrtMemset[Async]`).
//!
//! Every entry point validates first: both operands usable (not freed, device not reset),
//! the byte count > 0 and within the destination (ACL's `destMax`) and the source. Only
//! then are bytes touched, and only through raw pointers (`ptr::copy[_nonoverlapping]`,
//! `ptr::write_bytes`) into allocations that the operands keep alive.
//!
//! * Synchronous calls copy on the calling thread (bindings release their interpreter
//!   lock around them). They are not ordered with streams, as in ACL.
//! * Asynchronous calls queue a task on the stream's copy engine. The task owns clones of
//!   both buffers, so freeing them meanwhile is safe and the copy still sees the memory.
//! * Pageable (Rust-owned) memory goes through [`read`] / [`write`] or a [`Staging`]
//!   buffer: [`try_memcpy_async_from_staging`] is ACL's staged async copy from pageable
//!   memory (the caller fills the staging buffer first; the device side runs in order).

use super::bulk::{bulk_copy, SPLIT_COPY};
use super::host::Staging;
use super::operand::sealed::{Keep, Region};
use super::operand::Buffer;
use crate::error::{BufferError, Result};
use crate::profiler::TaskKind;
use crate::stream::task::{Engine, EngineDesc, EngineOp};
use crate::stream::{Pending, Stream};

/// Copies `n` bytes from `src` to `dst` (memmove semantics when they overlap).
///
/// # Safety
/// `[src, src+n)` must be readable and `[dst, dst+n)` writable for the whole call, and
/// neither may be accessed through a Rust reference meanwhile.
unsafe fn raw_copy(dst: usize, src: usize, n: usize) {
    let (d, s) = (dst as *mut u8, src as *const u8);
    if dst.abs_diff(src) >= n {
        // SAFETY: the caller's contract; the ranges are disjoint.
        unsafe { std::ptr::copy_nonoverlapping(s, d, n) }
    } else {
        // SAFETY: the caller's contract; `copy` allows overlap.
        unsafe { std::ptr::copy(s, d, n) }
    }
}

/// [`raw_copy`], with big disjoint copies shared with helper threads in chunks (one core's
/// memcpy does not saturate memory bandwidth; see [`bulk`](super::bulk)).
///
/// # Safety
/// As for [`raw_copy`].
unsafe fn copy_bytes(dst: usize, src: usize, n: usize) {
    if n < SPLIT_COPY || dst.abs_diff(src) < n {
        // SAFETY: forwarded contract.
        return unsafe { raw_copy(dst, src, n) };
    }
    // SAFETY: forwarded contract; the ranges are disjoint (checked above).
    unsafe { bulk_copy(dst, src, n) }
}

/// Checks a copy's byte count against both sides (`None` means the whole source) and
/// returns it: > 0, ≤ `dst_cap` (ACL's `destMax`), ≤ `src_cap`. For callers that copy
/// through other means (bindings moving bytes of their own objects).
pub fn copy_size(op: &'static str, dst_cap: usize, src_cap: usize, nbytes: Option<usize>) -> Result<usize> {
    check_sizes(op, dst_cap, src_cap, nbytes)
}

fn check_sizes(op: &'static str, dst_cap: usize, src_cap: usize, nbytes: Option<usize>) -> Result<usize> {
    let n = nbytes.unwrap_or(src_cap);
    if n == 0 {
        return Err(BufferError::ZeroSize { op }.into());
    }
    if crate::sanitizer::on() && (n > dst_cap || n > src_cap) {
        let (side, cap) = if n > dst_cap {
            ("destination", dst_cap)
        } else {
            ("source", src_cap)
        };
        crate::sanitizer::memcheck::out_of_bounds(op, side, None, 0, n, cap);
    }
    if n > dst_cap {
        return Err(BufferError::OutOfRange {
            op,
            side: "destination",
            nbytes: n,
            offset: 0,
            capacity: dst_cap,
        }
        .into());
    }
    if n > src_cap {
        return Err(BufferError::OutOfRange {
            op,
            side: "source",
            nbytes: n,
            offset: 0,
            capacity: src_cap,
        }
        .into());
    }
    Ok(n)
}

/// Checks `len` bytes at `offset` of a `cap`-byte buffer.
fn check_range(op: &'static str, side: &'static str, cap: usize, offset: usize, len: usize) -> Result<()> {
    if len == 0 {
        return Err(BufferError::ZeroSize { op }.into());
    }
    if offset.checked_add(len).is_none_or(|end| end > cap) {
        if crate::sanitizer::on() {
            crate::sanitizer::memcheck::out_of_bounds(op, side, None, offset, len, cap);
        }
        return Err(BufferError::OutOfRange {
            op,
            side,
            nbytes: len,
            offset,
            capacity: cap,
        }
        .into());
    }
    Ok(())
}

/// Copies `nbytes` (default: all of `src`) from `src` to `dst` on the calling thread.
/// Device↔device (also across devices), host↔device and host↔host all work.
pub fn memcpy<D: Buffer + ?Sized, S: Buffer + ?Sized>(dst: &D, src: &S, nbytes: Option<usize>) -> Result<usize> {
    let (d, s) = (dst.region()?, src.region()?);
    let n = check_sizes("memcpy", d.cap, s.cap, nbytes)?;
    if crate::sanitizer::on() {
        let what = copy_desc(&d, &s, n).kind.label();
        crate::sanitizer::on_copy(None, (d.addr, n), Some((s.addr, n)), what);
    }
    // SAFETY: both regions are live allocations of at least `n` bytes, kept alive by
    // `d.keep` / `s.keep` until the end of this function; npurt never hands out Rust
    // references to device or pinned memory (Staging is never a Buffer).
    unsafe { copy_bytes(d.addr, s.addr, n) };
    if log::log_enabled!(log::Level::Debug) {
        let kind = copy_desc(&d, &s, n).kind.label();
        log::debug!("memcpy ({kind}, synchronous) {n} B from {:#x} to {:#x}", s.addr, d.addr);
    }
    Ok(n)
}

/// A copy's direction and size, for profiles.
fn copy_desc(d: &Region, s: &Region, n: usize) -> EngineDesc {
    let dev = |r: &Region| matches!(r.keep, Keep::Device(_));
    let kind = match (dev(s), dev(d)) {
        (false, true) => TaskKind::CopyH2D,
        (true, false) => TaskKind::CopyD2H,
        (true, true) => TaskKind::CopyD2D,
        (false, false) => TaskKind::CopyH2H,
    };
    EngineDesc::new(kind, n as u64)
}

/// Queues the copy of `n` bytes from `s` to `d` on `stream`'s copy engine.
fn queue_copy(stream: &Stream, d: Region, s: Region, n: usize) -> Result<std::result::Result<u64, Pending>> {
    let desc = copy_desc(&d, &s, n);
    stream.try_launch_described(Engine::Copy, copy_op(d, s, n), desc)
}

fn copy_op(d: Region, s: Region, n: usize) -> EngineOp {
    Box::new(move || {
        // SAFETY: as in `memcpy`: the regions were validated for `n` bytes and the closure
        // owns what keeps them alive until it returns.
        unsafe { copy_bytes(d.addr, s.addr, n) };
        drop((d, s));
        Ok(())
    })
}

/// Queues a copy of `nbytes` (default: all of `src`) on `stream`'s copy engine without
/// blocking; a full stream gives back a [`Pending`] to finish with
/// [`Stream::push_pending`].
pub fn try_memcpy_async<D: Buffer + ?Sized, S: Buffer + ?Sized>(
    dst: &D,
    src: &S,
    nbytes: Option<usize>,
    stream: &Stream,
) -> Result<std::result::Result<u64, Pending>> {
    let (d, s) = (dst.region()?, src.region()?);
    let n = check_sizes("memcpy_async", d.cap, s.cap, nbytes)?;
    if crate::sanitizer::on() {
        let what = copy_desc(&d, &s, n).kind.label();
        crate::sanitizer::on_copy(Some(stream.id()), (d.addr, n), Some((s.addr, n)), what);
    }
    queue_copy(stream, d, s, n)
}

/// Queues a copy on `stream` (waiting for room if the stream is full). Returns the
/// task's sequence number.
pub fn memcpy_async<D: Buffer + ?Sized, S: Buffer + ?Sized>(
    dst: &D,
    src: &S,
    nbytes: Option<usize>,
    stream: &Stream,
) -> Result<u64> {
    match try_memcpy_async(dst, src, nbytes, stream)? {
        Ok(seq) => Ok(seq),
        Err(p) => stream.push_pending(p),
    }
}

/// ACL's async copy from pageable memory: `staging` holds the source bytes (the caller
/// copied them in); the device side runs on `stream`, and the staging buffer goes back to
/// the pinned pool afterwards.
pub fn try_memcpy_async_from_staging<D: Buffer + ?Sized>(
    dst: &D,
    staging: Staging,
    nbytes: Option<usize>,
    stream: &Stream,
) -> Result<std::result::Result<u64, Pending>> {
    let d = dst.region()?;
    let n = check_sizes("memcpy_async", d.cap, staging.len(), nbytes)?;
    if crate::sanitizer::on() {
        crate::sanitizer::on_copy(Some(stream.id()), (d.addr, n), None, "Memcpy (staged)");
    }
    queue_copy(stream, d, staging.into_region(), n)
}

/// ACL's async copy from pageable memory, for Rust slices: `src` is staged into pinned
/// memory now (so the caller may reuse it on return), the device side runs on `stream`.
pub fn memcpy_async_from_slice<D: Buffer + ?Sized>(dst: &D, src: &[u8], stream: &Stream) -> Result<u64> {
    let d = dst.region()?;
    let n = check_sizes("memcpy_async", d.cap, src.len(), None)?;
    let mut staging = Staging::new(n)?;
    staging.as_mut_slice().copy_from_slice(src);
    if crate::sanitizer::on() {
        crate::sanitizer::on_copy(Some(stream.id()), (d.addr, n), None, "Memcpy (staged)");
    }
    match queue_copy(stream, d, staging.into_region(), n)? {
        Ok(seq) => Ok(seq),
        Err(p) => stream.push_pending(p),
    }
}

/// Sets `nbytes` (default: all) bytes of `dst` to `value` on the calling thread.
pub fn memset<D: Buffer + ?Sized>(dst: &D, value: u8, nbytes: Option<usize>) -> Result<usize> {
    let d = dst.region()?;
    let n = check_sizes("memset", d.cap, d.cap, nbytes)?;
    if crate::sanitizer::on() {
        crate::sanitizer::on_copy(None, (d.addr, n), None, "memset");
    }
    // SAFETY: as in `memcpy`; `d.keep` lives until the end of the function.
    unsafe { std::ptr::write_bytes(d.addr as *mut u8, value, n) };
    log::debug!("memset (synchronous) {n} B at {:#x} to {value:#04x}", d.addr);
    Ok(n)
}

/// Queues a memset on `stream`'s copy engine without blocking (see [`try_memcpy_async`]).
pub fn try_memset_async<D: Buffer + ?Sized>(
    dst: &D,
    value: u8,
    nbytes: Option<usize>,
    stream: &Stream,
) -> Result<std::result::Result<u64, Pending>> {
    let d = dst.region()?;
    let n = check_sizes("memset_async", d.cap, d.cap, nbytes)?;
    if crate::sanitizer::on() {
        crate::sanitizer::on_copy(Some(stream.id()), (d.addr, n), None, "Memset");
    }
    let op: EngineOp = Box::new(move || {
        // SAFETY: validated for `n` bytes; the closure owns `d.keep` until it returns.
        unsafe { std::ptr::write_bytes(d.addr as *mut u8, value, n) };
        drop(d);
        Ok(())
    });
    let desc = EngineDesc::new(TaskKind::Memset, n as u64);
    stream.try_launch_described(Engine::Copy, op, desc)
}

/// Queues a memset on `stream` (waiting for room if the stream is full).
pub fn memset_async<D: Buffer + ?Sized>(dst: &D, value: u8, nbytes: Option<usize>, stream: &Stream) -> Result<u64> {
    match try_memset_async(dst, value, nbytes, stream)? {
        Ok(seq) => Ok(seq),
        Err(p) => stream.push_pending(p),
    }
}

/// Copies `src` (Rust memory) into `dst` at `offset`, on the calling thread.
pub fn write<D: Buffer + ?Sized>(dst: &D, offset: usize, src: &[u8]) -> Result<()> {
    let d = dst.region()?;
    check_range("write", "destination", d.cap, offset, src.len())?;
    if crate::sanitizer::on() {
        crate::sanitizer::on_copy(None, (d.addr + offset, src.len()), None, "write from the host");
    }
    // SAFETY: `dst` is live for `offset + len` bytes (checked), kept alive by `d.keep`;
    // `src` is a valid slice, and cannot alias npurt memory (never lent as a slice).
    unsafe { copy_bytes(d.addr + offset, src.as_ptr() as usize, src.len()) };
    Ok(())
}

/// Copies `dst.len()` bytes of `src` at `offset` into `dst` (Rust memory).
pub fn read<S: Buffer + ?Sized>(src: &S, offset: usize, dst: &mut [u8]) -> Result<()> {
    let s = src.region()?;
    check_range("read", "source", s.cap, offset, dst.len())?;
    if crate::sanitizer::on() {
        crate::sanitizer::on_copy(None, (0, 0), Some((s.addr + offset, dst.len())), "read to the host");
    }
    // SAFETY: as in `write`, with the roles swapped; `dst` is an exclusive borrow.
    unsafe { copy_bytes(dst.as_mut_ptr() as usize, s.addr + offset, dst.len()) };
    Ok(())
}
