//! `_BufferView` and the `_view_*` copy functions: byte ranges inside device or pinned host
//! allocations, for `npurt.acl`'s raw-pointer API (`acl.rt.memcpy(ptr + offset, ...)`).
//! Argument conversion only; the range checks and the copies are npurt-core's
//! (`memory::BufferView`, `memory::memcpy`...). No `unsafe` here.

use crate::args::{cast_arg, size_arg, type_name, value_arg};
use crate::errors::{type_error, IntoPy};
use crate::gil::{detach_above, GIL_FREE_COPY};
use crate::memory::as_native;
use crate::stream::{stream_or_current, submit};
use npurt_core::memory::{self, AnyBuffer, Buffer, BufferView};
use pyo3::prelude::*;

/// `nbytes` bytes at `offset` inside an npurt.DeviceBuffer or npurt.HostBuffer. Holds the
/// allocation, so the memory stays mapped while the view (or a copy queued with it) lives;
/// using it after the allocation was freed raises npurt.InvalidHandleError (107017).
#[pyclass(module = "npurt", name = "_BufferView", frozen)]
pub(crate) struct PyBufferView {
    v: BufferView,
}

impl PyBufferView {
    /// The checked byte range.
    pub(crate) fn view(&self) -> &BufferView {
        &self.v
    }
}

#[pymethods]
impl PyBufferView {
    /// A view of `nbytes` (> 0) bytes at `offset` of `buf`; the range must lie inside the
    /// allocation (npurt.InvalidValueError, 107000, otherwise).
    #[new]
    fn new(buf: &Bound<'_, PyAny>, offset: &Bound<'_, PyAny>, nbytes: &Bound<'_, PyAny>) -> PyResult<Self> {
        let Some(b) = as_native(buf)? else {
            return Err(type_error(format!(
                "buf must be an npurt.DeviceBuffer or npurt.HostBuffer, not {}",
                type_name(buf)
            )));
        };
        let (off, n) = (size_arg(offset, "offset")?, size_arg(nbytes, "nbytes")?);
        Ok(Self {
            v: BufferView::new(b, off, n).py_err()?,
        })
    }

    /// Address of the first byte.
    #[getter]
    fn ptr(&self) -> usize {
        self.v.addr()
    }
    /// Size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.v.nbytes()
    }
    /// Offset inside the allocation.
    #[getter]
    fn offset(&self) -> usize {
        self.v.offset()
    }
    /// The device id of a device view; None for pinned host memory.
    #[getter]
    fn device(&self) -> Option<u32> {
        self.v.device()
    }
    /// True for device memory, False for pinned host memory.
    #[getter]
    fn is_device(&self) -> bool {
        matches!(self.v.buffer(), AnyBuffer::Device(_))
    }
    /// Raises if the allocation was freed or its device reset.
    fn check(&self) -> PyResult<()> {
        self.v.check().py_err()
    }
    fn __repr__(&self) -> String {
        let kind = if self.is_device() { "device" } else { "host" };
        format!(
            "<npurt._BufferView {kind} ptr={:#x} nbytes={}>",
            self.v.addr(),
            self.v.nbytes()
        )
    }
}

fn view_arg(obj: &Bound<'_, PyAny>, role: &str) -> PyResult<BufferView> {
    Ok(cast_arg::<PyBufferView>(obj, role, "an npurt._BufferView")?
        .get()
        .v
        .clone())
}

/// Copies `nbytes` from view `src` to view `dst` now, on this thread (ACL `aclrtMemcpy`).
/// `nbytes` must fit both views (ACL's destMax): 107000 otherwise.
#[pyfunction]
pub(crate) fn _view_memcpy(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    nbytes: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let (d, s, n) = (
        view_arg(dst, "dst")?,
        view_arg(src, "src")?,
        size_arg(nbytes, "nbytes")?,
    );
    detach_above(py, n, GIL_FREE_COPY, || memory::memcpy(&d, &s, Some(n)))
        .map(drop)
        .py_err()
}

/// Queues a copy of `nbytes` from view `src` to view `dst` on `stream`'s copy engine (ACL
/// `aclrtMemcpyAsync`); the queued copy holds both allocations until it ran.
#[pyfunction]
pub(crate) fn _view_memcpy_async(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    src: &Bound<'_, PyAny>,
    nbytes: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (d, s, n) = (
        view_arg(dst, "dst")?,
        view_arg(src, "src")?,
        size_arg(nbytes, "nbytes")?,
    );
    let st = stream_or_current(stream)?;
    submit(py, &st, memory::try_memcpy_async(&d, &s, Some(n), &st))
}

/// Sets the first `nbytes` bytes of view `dst` to `value` (0..255) now (ACL `aclrtMemset`).
#[pyfunction]
pub(crate) fn _view_memset(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    nbytes: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let (d, n) = (view_arg(dst, "dst")?, size_arg(nbytes, "nbytes")?);
    let v = value_arg(value)?;
    detach_above(py, n, GIL_FREE_COPY, || memory::memset(&d, v, Some(n)))
        .map(drop)
        .py_err()
}

/// Queues a memset of the first `nbytes` bytes of view `dst` on `stream` (ACL
/// `aclrtMemsetAsync`).
#[pyfunction]
pub(crate) fn _view_memset_async(
    py: Python<'_>,
    dst: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    nbytes: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (d, n) = (view_arg(dst, "dst")?, size_arg(nbytes, "nbytes")?);
    let v = value_arg(value)?;
    let st = stream_or_current(stream)?;
    submit(py, &st, memory::try_memset_async(&d, v, Some(n), &st))
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyBufferView>()?;
    m.add_function(wrap_pyfunction!(_view_memcpy, m)?)?;
    m.add_function(wrap_pyfunction!(_view_memcpy_async, m)?)?;
    m.add_function(wrap_pyfunction!(_view_memset, m)?)?;
    m.add_function(wrap_pyfunction!(_view_memset_async, m)?)?;
    Ok(())
}
