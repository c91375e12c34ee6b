//! `npurt.memcpy`, `memcpy_async`, `memset`, `memset_async`: argument conversion only.
//!
//! DeviceBuffer / HostBuffer operands go straight to npurt-core (GIL released for copies
//! of more than 16 KiB). Any other operand must export a C-contiguous buffer (numpy
//! arrays, bytes, bytearray...): it is viewed as bytes with numpy, and npurt memory is
//! viewed through an `__array_interface__` object that keeps it alive, so one `np.copyto`
//! moves the bytes (numpy releases the GIL for large copies) — no `unsafe` here. ACL's
//! rules for pageable memory: an async copy *from* it is staged in pinned memory before
//! returning; an async copy *into* it waits for the stream, then copies.

use crate::args::{int_arg, type_name};
use crate::errors::{type_error, value_error, IntoPy};
use crate::memory::{as_native, detach_above, native_array, numpy, opt_size_arg, GIL_FREE_COPY};
use crate::stream::{stream_or_current, submit};
use npurt_core::memory::{self, AnyBuffer, Buffer};
use pyo3::prelude::*;
use pyo3::types::{PyMemoryView, PySlice};

/// A copy operand: npurt memory, or a Python buffer as a 1-D uint8 numpy array.
enum Operand<'py> {
    Native(AnyBuffer),
    Array(Bound<'py, PyAny>),
}

impl<'py> Operand<'py> {
    fn cap(&self) -> PyResult<usize> {
        match self {
            Operand::Native(b) => Ok(b.nbytes()),
            Operand::Array(a) => a.len(),
        }
    }

    /// Checks npurt memory is still usable (not freed, device not reset).
    fn check(&self) -> PyResult<()> {
        match self {
            Operand::Native(b) => b.check().py_err(),
            Operand::Array(_) => Ok(()),
        }
    }

    /// The first `n` bytes (already validated) as a numpy array.
    fn array(&self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Operand::Native(b) => native_array(py, b, n),
            Operand::Array(a) if a.len()? == n => Ok(a.clone()),
            Operand::Array(a) => a.get_item(PySlice::new(py, 0, n as isize, 1)),
        }
    }
}

fn operand<'py>(obj: &Bound<'py, PyAny>, role: &str, writable: bool) -> PyResult<Operand<'py>> {
    if let Some(b) = as_native(obj)? {
        return Ok(Operand::Native(b));
    }
    let py = obj.py();
    let mv = PyMemoryView::from(obj).map_err(|_| {
        type_error(format!(
            "{role} must be an npurt.DeviceBuffer, an npurt.HostBuffer or a buffer such as a numpy array, not {}",
            type_name(obj)
        ))
    })?;
    if writable && mv.getattr("readonly")?.is_truthy()? {
        return Err(value_error(format!("{role} ({}) is read-only", type_name(obj))));
    }
    if !mv.getattr("c_contiguous")?.is_truthy()? {
        return Err(value_error(format!("{role} ({}) must be C-contiguous", type_name(obj))));
    }
    let flat = mv
        .call_method1("cast", ("B",))
        .map_err(|e| value_error(format!("{role}: {e}")))?;
    let np = numpy(py)?;
    Ok(Operand::Array(
        np.getattr("frombuffer")?.call1((flat, np.getattr("uint8")?))?,
    ))
}

/// Copies now, on this thread.
fn copy_now(py: Python<'_>, d: &Operand<'_>, s: &Operand<'_>, nbytes: Option<usize>) -> PyResult<()> {
    if let (Operand::Native(d), Operand::Native(s)) = (d, s) {
        let n = nbytes.unwrap_or(s.nbytes());
        return detach_above(py, n, GIL_FREE_COPY, || memory::memcpy(d, s, nbytes))
            .map(drop)
            .py_err();
    }
    let n = memory::copy_size("memcpy", d.cap()?, s.cap()?, nbytes).py_err()?;
    let (da, sa) = (d.array(py, n)?, s.array(py, n)?);
    numpy(py)?.getattr("copyto")?.call1((da, sa))?;
    Ok(())
}

/// Copies `nbytes` (default: all of `src`) from `src` to `dst`, synchronously (ACL
/// `aclrtMemcpy`). Each side is an npurt.DeviceBuffer, an npurt.HostBuffer or a
/// C-contiguous buffer (numpy array, bytes as source, bytearray...). Host→device,
/// device→host, device→device (also across devices) and host→host. `nbytes` must fit
/// both sides (ACL's destMax): npurt.InvalidValueError (107000) otherwise; a freed buffer
/// or one whose device was reset raises npurt.InvalidHandleError (107017).
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

/// Queues a copy on `stream` (None: the current stream) and returns (ACL
/// `aclrtMemcpyAsync`). Between npurt buffers it runs on the stream's copy engine in
/// stream order and keeps both buffers alive until done, so they may be freed at once.
/// From pageable memory (numpy, bytes...) the data is staged in pinned memory before
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
    match (&d, &s) {
        (Operand::Native(db), Operand::Native(sb)) => submit(py, &st, memory::try_memcpy_async(db, sb, n, &st)),
        (Operand::Native(db), Operand::Array(a)) => {
            let n = memory::copy_size("memcpy_async", db.nbytes(), a.len()?, n).py_err()?;
            db.check().py_err()?;
            let staging = AnyBuffer::Host(py.detach(|| memory::malloc_host(n)).py_err()?);
            numpy(py)?
                .getattr("copyto")?
                .call1((native_array(py, &staging, n)?, s.array(py, n)?))?;
            submit(py, &st, memory::try_memcpy_async(db, &staging, Some(n), &st))
        }
        (Operand::Array(_), _) => {
            let n = memory::copy_size("memcpy_async", d.cap()?, s.cap()?, n).py_err()?;
            s.check()?;
            py.detach(|| st.synchronize(None)).py_err()?;
            copy_now(py, &d, &s, Some(n))
        }
    }
}

pub(crate) fn value_arg(value: &Bound<'_, PyAny>) -> PyResult<u8> {
    Ok(int_arg(value, "value", 0, 255)? as u8)
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
    match operand(buf, "buf", true)? {
        Operand::Native(b) => {
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
    match operand(buf, "buf", true)? {
        Operand::Native(b) => submit(py, &st, memory::try_memset_async(&b, v, n, &st)),
        a => {
            let cap = a.cap()?;
            let n = memory::copy_size("memset_async", cap, cap, n).py_err()?;
            py.detach(|| st.synchronize(None)).py_err()?;
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
