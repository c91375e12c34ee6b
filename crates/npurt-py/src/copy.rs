//! `npurt.memcpy`, `memcpy_async`, `memset`, `memset_async`: argument conversion only.
//!
//! DeviceBuffer / HostBuffer / DeviceArray operands (see `operand.rs`) go straight to
//! `npurt_kernels::copies`, which orders copies with arrays' last writers (GIL released for
//! copies of more than 16 KiB and for every copy with an array). Any other operand must export a C-contiguous buffer (numpy
//! arrays, bytes, bytearray...). ACL's rules for pageable memory: an async copy *from* it is
//! staged in pinned memory before returning (npurt-core's `Staging`, filled through pyo3's
//! `PyBuffer`); an async copy *into* it waits for the stream, then copies. Synchronous
//! copies with a pageable side view npurt memory through an `__array_interface__` object
//! that keeps it alive, so one `np.copyto` moves the bytes (numpy releases the GIL for
//! large copies) — no `unsafe` here.

use crate::args::{opt_size_arg, value_arg};
use crate::errors::{array_err, type_error, IntoPy};
use crate::gil::{detach_above, GIL_FREE_COPY};
use crate::operand::{operand, Operand};
use crate::pybuf::numpy;
use crate::stream::{stream_or_current, submit};
use npurt_core::memory::{self, Buffer, Staging};
use npurt_core::Pending;
use npurt_core::Stream;
use npurt_kernels::copies::{self, Side};
use pyo3::prelude::*;

/// Copies now, on this thread (after the pending writes of array operands).
fn copy_now(py: Python<'_>, d: &Operand<'_>, s: &Operand<'_>, nbytes: Option<usize>) -> PyResult<()> {
    if let (Some(ds), Some(ss)) = (d.side(), s.side()) {
        // An array may have to wait for its writer: never keep the GIL for that.
        let n = nbytes.unwrap_or(s.cap()?);
        let arrays = d.tensor().is_some() || s.tensor().is_some();
        let limit = if arrays { 0 } else { GIL_FREE_COPY };
        return detach_above(py, n.max(1), limit, || copies::memcpy(ds, ss, nbytes))
            .map(drop)
            .map_err(array_err);
    }
    d.check()?;
    s.check()?;
    let n = memory::copy_size("memcpy", d.cap()?, s.cap()?, nbytes).py_err()?;
    for a in [d.tensor(), s.tensor()].into_iter().flatten() {
        crate::wait::host_access(py, a, None)?;
    }
    let (da, sa) = (d.array(py, n)?, s.source(py, n)?);
    numpy(py)?.getattr("copyto")?.call1((da, sa))?;
    Ok(())
}

/// Copies `nbytes` (default: all of `src`) from `src` to `dst`, synchronously (ACL
/// `aclrtMemcpy`). Each side is an npurt.DeviceArray (contiguous; its pending writes are
/// waited for), an npurt.DeviceBuffer, an npurt.HostBuffer or a C-contiguous buffer (numpy
/// array, bytes as source, bytearray...). Host→device, device→host, device→device (also
/// across devices) and host→host. `nbytes` must fit both sides (ACL's destMax):
/// npurt.InvalidValueError (107000) otherwise; a freed buffer or one whose device was reset
/// raises npurt.InvalidHandleError (107017).
#[pyfunction]
#[pyo3(signature = (dst, src, nbytes=None))]
pub(crate) fn memcpy(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    nbytes: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let n = opt_size_arg(nbytes, "nbytes")?;
    let (d, s) = (operand(dst, "dst", true)?, operand(src, "src", false)?);
    copy_now(py, &d, &s, n)
}

fn finish(py: Python<'_>, st: &Stream, r: Result<Result<u64, Pending>, npurt_kernels::ArrayError>) -> PyResult<()> {
    match r.map_err(array_err)? {
        Ok(_) => {}
        Err(p) => py.detach(|| st.push_pending(p).map(drop)).py_err()?,
    }
    crate::wait::if_blocking(py, st)
}

/// Queues a copy between npurt memory. With an array side, the ordering waits it queues
/// may have to wait for room in a full ring, so the whole call runs without the GIL.
fn queue_copy(py: Python<'_>, st: &Stream, d: Side<'_>, s: Side<'_>, n: Option<usize>, arrays: bool) -> PyResult<()> {
    if arrays {
        py.detach(|| copies::memcpy_async(d, s, n, st)).map_err(array_err)?;
        return crate::wait::if_blocking(py, st);
    }
    finish(py, st, copies::try_memcpy_async(d, s, n, st))
}

/// Queues a copy on `stream` (None: the current stream) and returns (ACL
/// `aclrtMemcpyAsync`). Between npurt memory (arrays, buffers, numpy views of HostBuffers)
/// it runs on the stream's copy engine in stream order and keeps both sides alive until
/// done, so they may be freed at once; it waits (on the device) for the last writer of an
/// array side, and an array it writes is then written by `stream` (later kernels wait for
/// it). From pageable memory (numpy, bytes...) the data is staged in pinned memory before
/// returning; into pageable memory the call waits for the stream first (ACL semantics).
#[pyfunction]
#[pyo3(signature = (dst, src, stream, nbytes=None))]
pub(crate) fn memcpy_async(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
    nbytes: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let n = opt_size_arg(nbytes, "nbytes")?;
    let st = stream_or_current(stream)?;
    let (d, s) = (operand(dst, "dst", true)?, operand(src, "src", false)?);
    match (d.side(), s.side()) {
        (Some(ds), Some(ss)) => {
            let arrays = d.tensor().is_some() || s.tensor().is_some();
            queue_copy(py, &st, ds, ss, n, arrays)
        }
        (Some(ds), None) => {
            d.check()?;
            let n = memory::copy_size("memcpy_async", d.cap()?, s.cap()?, n).py_err()?;
            queue_staged(py, &st, ds, &s, n, d.tensor().is_some())
        }
        (None, _) => {
            s.check()?;
            let n = memory::copy_size("memcpy_async", d.cap()?, s.cap()?, n).py_err()?;
            match s.tensor() {
                Some(a) => crate::wait::host_access(py, a, Some(&st))?,
                None => crate::wait::stream(py, &st, None)?,
            }
            copy_now(py, &d, &s, Some(n))
        }
    }
}

/// ACL's staged async copy from pageable memory (the rule is npurt-core's `Staging` and
/// `try_memcpy_async_from_staging`): the first `n` bytes of `src` are copied into a pinned
/// staging buffer now (so the caller may reuse `src` on return), then queued on `st`.
fn queue_staged(py: Python<'_>, st: &Stream, d: Side<'_>, src: &Operand<'_>, n: usize, arrays: bool) -> PyResult<()> {
    let mut staging = py.detach(|| Staging::new(n)).py_err()?;
    src.read_into(staging.as_mut_slice())?;
    let queue = || copies::try_memcpy_async_from_staging(d, staging, Some(n), st);
    // As `queue_copy`: an array side's ordering waits may need room in a full ring.
    let r = if arrays { py.detach(queue) } else { queue() };
    finish(py, st, r)
}

/// A memset target: npurt memory or a writable buffer; arrays have `fill()`.
fn memset_operand<'py>(buf: &Bound<'py, PyAny>) -> PyResult<Operand<'py>> {
    match operand(buf, "buf", true)? {
        Operand::Tensor(_) => Err(type_error(
            "memset takes an npurt.DeviceBuffer, an npurt.HostBuffer or a writable buffer; use DeviceArray.fill() for arrays".to_string(),
        )),
        o => Ok(o),
    }
}

/// Sets `nbytes` (default: all) bytes of `buf` to `value` (0..255), synchronously (ACL
/// `aclrtMemset`). `buf`: a DeviceBuffer, a HostBuffer or a writable buffer.
#[pyfunction]
#[pyo3(signature = (buf, value, nbytes=None))]
pub(crate) fn memset(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    nbytes: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (v, n) = (value_arg(value)?, opt_size_arg(nbytes, "nbytes")?);
    match memset_operand(buf)? {
        Operand::Native(b) => {
            let len = n.unwrap_or(b.nbytes());
            detach_above(py, len, GIL_FREE_COPY, || memory::memset(&b, v, n))
                .map(drop)
                .py_err()
        }
        Operand::View(b) => {
            let len = n.unwrap_or(b.nbytes());
            detach_above(py, len, GIL_FREE_COPY, || memory::memset(&b, v, n))
                .map(drop)
                .py_err()
        }
        a => {
            let cap = a.cap()?;
            let n = memory::copy_size("memset", cap, cap, n).py_err()?;
            a.array(py, n)?.call_method1("fill", (v,)).map(drop)
        }
    }
}

/// Queues a memset on `stream` (ACL `aclrtMemsetAsync`); on pageable memory it waits for
/// the stream, then sets the bytes.
#[pyfunction]
#[pyo3(signature = (buf, value, stream, nbytes=None))]
pub(crate) fn memset_async(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
    nbytes: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (v, n) = (value_arg(value)?, opt_size_arg(nbytes, "nbytes")?);
    let st = stream_or_current(stream)?;
    match memset_operand(buf)? {
        Operand::Native(b) => submit(py, &st, memory::try_memset_async(&b, v, n, &st)),
        Operand::View(b) => submit(py, &st, memory::try_memset_async(&b, v, n, &st)),
        a => {
            let cap = a.cap()?;
            let n = memory::copy_size("memset_async", cap, cap, n).py_err()?;
            crate::wait::stream(py, &st, None)?;
            a.array(py, n)?.call_method1("fill", (v,)).map(drop)
        }
    }
}

/// `DeviceBuffer.copy_from_host(src, stream=None, nbytes=None)`.
pub(crate) fn py_write(
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
    nbytes: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    match stream.filter(|s| !s.is_none()) {
        None => memcpy(dst.py(), dst, src, nbytes),
        Some(s) => memcpy_async(dst.py(), dst, src, Some(s), nbytes),
    }
}

/// `DeviceBuffer.copy_to_host(dst=None, stream=None, nbytes=None)`: returns `dst` (a new
/// uint8 numpy array of `nbytes`, default `src_nbytes`, when None).
pub(crate) fn py_read<'py>(
    src: &Bound<'py, PyAny>,
    src_nbytes: usize,
    dst: Option<&Bound<'py, PyAny>>,
    stream: Option<&Bound<'py, PyAny>>,
    nbytes: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = src.py();
    let dst = match dst.filter(|d| !d.is_none()) {
        Some(d) => d.clone(),
        None => {
            let n = opt_size_arg(nbytes, "nbytes")?.unwrap_or(src_nbytes);
            let np = numpy(py)?;
            np.getattr("empty")?.call1((n, np.getattr("uint8")?))?
        }
    };
    match stream.filter(|s| !s.is_none()) {
        None => memcpy(py, &dst, src, nbytes)?,
        Some(s) => memcpy_async(py, &dst, src, Some(s), nbytes)?,
    }
    Ok(dst)
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(memcpy, m)?)?;
    m.add_function(wrap_pyfunction!(memcpy_async, m)?)?;
    m.add_function(wrap_pyfunction!(memset, m)?)?;
    m.add_function(wrap_pyfunction!(memset_async, m)?)?;
    Ok(())
}
