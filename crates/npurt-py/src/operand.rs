//! The operands of `npurt.memcpy[_async]` / `memset[_async]`: what a Python object names.
//!
//! * `npurt.DeviceBuffer` / `npurt.HostBuffer`: the buffer.
//! * `npurt.DeviceArray` (or its native `_Array`): the array's bytes; the ordering with its
//!   last writer is `npurt_kernels::copies`'.
//! * A numpy array over npurt memory (`HostBuffer.numpy()`, `np.asarray(host_buffer)` or a
//!   C-contiguous slice of one): that byte range of the allocation, so pinned memory stays
//!   pinned however Python views it (ACL: a pointer into `aclrtMallocHost` memory).
//! * An `npurt._BufferView` (`npurt.acl`'s checked raw pointers): that byte range.
//! * Any other C-contiguous buffer (numpy arrays, bytes, bytearray, ctypes arrays...):
//!   pageable memory, as a flat byte `memoryview`.

use crate::args::type_name;
use crate::array::PyArray;
use crate::errors::{array_err, type_error, value_error, IntoPy};
use crate::memory::as_native;
use crate::pybuf::{native_array, numpy, read_bytes, read_only_array, view_array, PyMemView};
use crate::view::PyBufferView;
use npurt_core::memory::{AnyBuffer, Buffer, BufferView};
use npurt_kernels::copies::{self, Side};
use npurt_kernels::DeviceArray;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyMemoryView, PySlice, PyType};

/// A copy operand; see the module docs.
pub(crate) enum Operand<'py> {
    Native(AnyBuffer),
    View(BufferView),
    Tensor(DeviceArray),
    Pageable(Bound<'py, PyAny>),
}

impl<'py> Operand<'py> {
    /// The side npurt-kernels copies, for npurt memory (None: pageable).
    pub(crate) fn side(&self) -> Option<Side<'_>> {
        match self {
            Operand::Native(b) => Some(Side::Buf(b)),
            Operand::View(v) => Some(Side::View(v)),
            Operand::Tensor(a) => Some(Side::Array(a)),
            Operand::Pageable(_) => None,
        }
    }

    pub(crate) fn tensor(&self) -> Option<&DeviceArray> {
        match self {
            Operand::Tensor(a) => Some(a),
            _ => None,
        }
    }

    /// Bytes available (an array must be contiguous).
    pub(crate) fn cap(&self) -> PyResult<usize> {
        match self {
            Operand::Native(b) => Ok(b.nbytes()),
            Operand::View(v) => Ok(v.nbytes()),
            Operand::Tensor(a) => Ok(a.tensor().nbytes()),
            Operand::Pageable(a) => a.len(),
        }
    }

    /// Checks npurt memory is still usable (not freed, device not reset; an array also
    /// contiguous).
    pub(crate) fn check(&self) -> PyResult<()> {
        match self {
            Operand::Native(b) => b.check().py_err(),
            Operand::View(v) => v.check().py_err(),
            Operand::Tensor(a) => copies::array_bytes(a, "memcpy").map(drop).map_err(array_err),
            Operand::Pageable(_) => Ok(()),
        }
    }

    /// The first `n` bytes (already validated) as a numpy array. The caller orders the
    /// access first (an array's pending writes are waited for).
    pub(crate) fn array(&self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Operand::Native(b) => native_array(py, b, n),
            Operand::View(v) => view_array(py, v, n),
            Operand::Tensor(a) => view_array(py, &copies::array_bytes(a, "memcpy").map_err(array_err)?, n),
            Operand::Pageable(_) => self.source(py, n),
        }
    }

    /// The first `n` bytes (already validated) as a numpy array the host only reads (a
    /// copy's source): npurt memory read-only, counted by racecheck as a host read of them.
    pub(crate) fn source(&self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyAny>> {
        let read = |buf: &AnyBuffer, addr: usize| read_only_array(py, buf, addr, n, "memcpy");
        match self {
            Operand::Native(b) => read(b, b.addr()),
            Operand::View(v) => {
                v.check().py_err()?;
                read(v.buffer(), v.addr())
            }
            Operand::Tensor(a) => {
                let v = copies::array_bytes(a, "memcpy").map_err(array_err)?;
                read(v.buffer(), v.addr())
            }
            Operand::Pageable(a) => {
                let part = a.get_item(PySlice::new(py, 0, n as isize, 1))?;
                let np = numpy(py)?;
                np.getattr("frombuffer")?.call1((part, np.getattr("uint8")?))
            }
        }
    }

    /// Copies the first `out.len()` bytes (already validated) of a pageable operand into
    /// `out` (pyo3's `PyBuffer`); only pageable operands are read this way.
    pub(crate) fn read_into(&self, out: &mut [u8]) -> PyResult<()> {
        match self {
            Operand::Pageable(a) => read_bytes(a, out),
            _ => Err(type_error("only pageable operands are staged".to_string())),
        }
    }
}

/// The array behind an `npurt.DeviceArray` or `_Array`, if `obj` is one.
pub(crate) fn as_array(obj: &Bound<'_, PyAny>) -> PyResult<Option<DeviceArray>> {
    if let Ok(a) = obj.cast::<PyArray>() {
        return Ok(Some(a.get().a.clone()));
    }
    static CLS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let py = obj.py();
    let cls = CLS.get_or_try_init(py, || {
        py.import("npurt")?
            .getattr("DeviceArray")?
            .cast_into::<PyType>()
            .map(Bound::unbind)
            .map_err(PyErr::from)
    })?;
    if !obj.is_instance(cls.bind(py))? {
        return Ok(None);
    }
    let inner = obj.getattr("_a")?;
    Ok(Some(inner.cast::<PyArray>()?.get().a.clone()))
}

/// The npurt memory a numpy array views, if it views some (see the module docs).
fn npurt_memory_of(obj: &Bound<'_, PyAny>, writable: bool) -> PyResult<Option<BufferView>> {
    let np = numpy(obj.py())?;
    let nd = np.getattr("ndarray")?;
    if !obj.is_instance(&nd)? {
        return Ok(None);
    }
    let mut base = obj.getattr("base")?;
    // numpy collapses view chains to the owner; allow a few levels in case it does not.
    for _ in 0..8 {
        if base.is_none() || base.is_instance_of::<PyMemView>() || !base.is_instance(&nd)? {
            break;
        }
        base = base.getattr("base")?;
    }
    let Ok(mv) = base.cast::<PyMemView>() else {
        return Ok(None);
    };
    let flags = obj.getattr("flags")?;
    if !flags.getattr("c_contiguous")?.is_truthy()? || (writable && !flags.getattr("writeable")?.is_truthy()?) {
        return Ok(None); // the pageable path explains what is wrong
    }
    let (buf, _) = mv.get().memory();
    let data: usize = obj
        .getattr("__array_interface__")?
        .get_item("data")?
        .get_item(0)?
        .extract()?;
    let nbytes: usize = obj.getattr("nbytes")?.extract()?;
    let Some(offset) = data.checked_sub(buf.addr()) else {
        return Ok(None);
    };
    Ok(Some(BufferView::new(buf.clone(), offset, nbytes).py_err()?))
}

/// Converts a copy argument (`role` names it in errors; `writable` for destinations).
pub(crate) fn operand<'py>(obj: &Bound<'py, PyAny>, role: &str, writable: bool) -> PyResult<Operand<'py>> {
    if let Some(b) = as_native(obj)? {
        return Ok(Operand::Native(b));
    }
    if let Ok(v) = obj.cast::<PyBufferView>() {
        return Ok(Operand::View(v.get().view().clone()));
    }
    if let Some(a) = as_array(obj)? {
        return Ok(Operand::Tensor(a));
    }
    if let Some(v) = npurt_memory_of(obj, writable)? {
        return Ok(Operand::View(v));
    }
    let mv = PyMemoryView::from(obj).map_err(|_| {
        type_error(format!(
            "{role} must be an npurt.DeviceArray, an npurt.DeviceBuffer, an npurt.HostBuffer or a buffer such as a numpy array, not {}",
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
    Ok(Operand::Pageable(flat))
}

/// True if `obj` is pinned host memory (a HostBuffer, or a numpy array over one), i.e.
/// an asynchronous copy with it is truly asynchronous.
#[pyfunction]
pub(crate) fn _is_pinned(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    if let Some(b) = as_native(obj)? {
        return Ok(matches!(b, AnyBuffer::Host(_)));
    }
    Ok(npurt_memory_of(obj, false)?.is_some_and(|v| v.device().is_none()))
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_is_pinned, m)?)?;
    Ok(())
}
