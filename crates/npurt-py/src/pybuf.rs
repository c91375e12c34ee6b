//! Python buffers: npurt memory shown to Python (a `__array_interface__` object that keeps
//! the allocation alive, so `np.asarray` views it without a copy), numpy, imported once for
//! the paths that hand out numpy arrays, and bytes read out of any Python buffer with
//! pyo3's `PyBuffer` (safe `copy_to_slice`; no numpy, no `unsafe`).

use crate::errors::{to_py, IntoPy};
use npurt_core::memory::{AnyBuffer, BufferView};
use npurt_core::Error;
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule, PySlice};

/// numpy, imported once (only the Python-buffer paths need it).
pub(crate) fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NP: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    NP.get_or_try_init(py, || py.import("numpy").map(Bound::unbind))
        .map(|m| m.bind(py))
        .map_err(|_| {
            to_py(Error::invalid(
                "copies to or from Python buffers (numpy arrays, bytes...) need numpy installed",
            ))
        })
}

/// `nbytes` bytes of npurt memory as a Python object with `__array_interface__`; numpy
/// arrays made from it keep the buffer alive (their `.base` is this object).
#[pyclass(module = "npurt", name = "_MemoryView", frozen)]
pub(crate) struct PyMemView {
    _buf: AnyBuffer,
    addr: usize,
    nbytes: usize,
    readonly: bool,
}

#[pymethods]
impl PyMemView {
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("shape", (self.nbytes,))?;
        d.set_item("typestr", "|u1")?;
        d.set_item("data", (self.addr, self.readonly))?;
        Ok(d)
    }
}

impl PyMemView {
    /// The allocation viewed and the address of the view's first byte.
    pub(crate) fn memory(&self) -> (&AnyBuffer, usize) {
        (&self._buf, self.addr)
    }
}

/// A 1-D uint8 numpy array over the first `n` bytes of `buf` (checked usable, `n` ≤ size).
pub(crate) fn native_array<'py>(py: Python<'py>, buf: &AnyBuffer, n: usize) -> PyResult<Bound<'py, PyAny>> {
    use npurt_core::memory::Buffer;
    buf.check().py_err()?;
    mem_view_array(py, buf.clone(), buf.addr(), n.min(buf.nbytes()), HostUse::Write)
}

/// A 1-D uint8 numpy array over the first `n` bytes of `view` (checked usable, `n` ≤ size).
pub(crate) fn view_array<'py>(py: Python<'py>, view: &BufferView, n: usize) -> PyResult<Bound<'py, PyAny>> {
    use npurt_core::memory::Buffer;
    view.check().py_err()?;
    mem_view_array(
        py,
        view.buffer().clone(),
        view.addr(),
        n.min(view.nbytes()),
        HostUse::Write,
    )
}

/// A read-only 1-D uint8 numpy array over `addr..addr+nbytes` of `buf` (checked usable and
/// inside it), counted by racecheck as a host read of exactly those bytes, labelled `what`.
pub(crate) fn read_only_array<'py>(
    py: Python<'py>,
    buf: &AnyBuffer,
    addr: usize,
    nbytes: usize,
    what: &'static str,
) -> PyResult<Bound<'py, PyAny>> {
    use npurt_core::memory::Buffer;
    buf.check().py_err()?;
    let inside = addr >= buf.addr() && addr.checked_add(nbytes).is_some_and(|e| e <= buf.addr() + buf.nbytes());
    if !inside {
        return Err(to_py(Error::invalid(format!(
            "{what}: bytes {addr:#x}+{nbytes} lie outside the {}-byte buffer at {:#x}",
            buf.nbytes(),
            buf.addr()
        ))));
    }
    mem_view_array(py, buf.clone(), addr, nbytes, HostUse::Read(what))
}

/// What the host does through a view, as racecheck counts it.
enum HostUse {
    /// Anything (a writable view: what the host then does is invisible; counted a write).
    Write,
    /// Reads only (a read-only view), labelled.
    Read(&'static str),
}

/// `addr..addr+nbytes` must lie inside `buf` (the callers take it from a buffer or view).
fn mem_view_array<'py>(
    py: Python<'py>,
    buf: AnyBuffer,
    addr: usize,
    nbytes: usize,
    usage: HostUse,
) -> PyResult<Bound<'py, PyAny>> {
    let readonly = matches!(usage, HostUse::Read(_));
    if npurt_core::sanitizer::on() {
        let (write, what) = match usage {
            HostUse::Write => (true, "numpy view of npurt memory"),
            HostUse::Read(what) => (false, what),
        };
        npurt_core::sanitizer::race::host_access(addr, nbytes, write, what);
    }
    let view = PyMemView {
        _buf: buf,
        addr,
        nbytes,
        readonly,
    };
    numpy(py)?.getattr("asarray")?.call1((Bound::new(py, view)?,))
}

/// Copies the first `out.len()` bytes of `src` (a 1-D byte buffer: a `memoryview.cast("B")`,
/// at least that long) into `out`.
pub(crate) fn read_bytes(src: &Bound<'_, PyAny>, out: &mut [u8]) -> PyResult<()> {
    let py = src.py();
    let part = if src.len()? == out.len() {
        src.clone()
    } else {
        src.get_item(PySlice::new(py, 0, out.len() as isize, 1))?
    };
    PyBuffer::<u8>::get(&part)?.copy_to_slice(py, out)
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMemView>()?;
    Ok(())
}
