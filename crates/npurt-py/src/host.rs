//! `npurt.HostBuffer` and `npurt.malloc_host`: pinned host memory (AscendCL
//! `aclrtMallocHost`) with the buffer protocol through numpy views.

use crate::args::size_arg;
use crate::errors::IntoPy;
use crate::gil::{detach_above, GIL_FREE_COPY};
use crate::memory::{free_slot, freed, lock, release_slot};
use crate::pybuf::native_array;
use npurt_core::memory::{self, AnyBuffer, HostBuffer};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::sync::Mutex;

/// Pinned host memory from `npurt.malloc_host` (AscendCL `aclrtMallocHost`): copies to and
/// from it are truly asynchronous. `np.asarray(buf)` / `buf.numpy()` view it without a
/// copy (the view keeps the memory alive even after `free()`).
#[pyclass(module = "npurt", name = "HostBuffer", frozen)]
pub(crate) struct PyHostBuffer {
    buf: Mutex<Option<HostBuffer>>,
    addr: usize,
    nbytes: usize,
    locked: bool,
}

impl PyHostBuffer {
    #[inline]
    pub(crate) fn handle(&self) -> PyResult<HostBuffer> {
        lock(&self.buf).clone().ok_or_else(|| freed("host buffer", self.addr))
    }
}

#[pymethods]
impl PyHostBuffer {
    /// Address of the first byte.
    #[getter]
    fn ptr(&self) -> usize {
        self.addr
    }
    /// Bytes requested.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }
    /// Always True: the memory comes from the pinned pool (see `locked`).
    #[getter]
    fn pinned(&self) -> bool {
        true
    }
    /// Whether mlock succeeded (False when RLIMIT_MEMLOCK refused it; copies still work).
    #[getter]
    fn locked(&self) -> bool {
        self.locked
    }
    /// True once freed.
    #[getter]
    fn freed(&self) -> bool {
        lock(&self.buf).as_ref().is_none_or(|b| b.is_freed())
    }

    /// Frees the buffer (stream-ordered). A second free raises npurt.MemoryFreeError.
    fn free(&self) -> PyResult<()> {
        free_slot(&self.buf, self.addr, |b| b.free())
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        release_slot(&self.buf, |b| b.free());
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.freed() { " freed" } else { "" };
        format!(
            "<npurt.HostBuffer nbytes={} ptr={:#x} locked={}{state}>",
            self.nbytes, self.addr, self.locked
        )
    }

    fn __len__(&self) -> usize {
        self.nbytes
    }

    /// A zero-copy uint8 numpy view (reinterpreted as `dtype` if given).
    #[pyo3(signature = (dtype=None))]
    fn numpy<'py>(&self, py: Python<'py>, dtype: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        let a = native_array(py, &AnyBuffer::Host(self.handle()?), self.nbytes)?;
        match dtype {
            Some(d) if !d.is_none() => a.call_method1("view", (d,)).map_err(crate::errors::typed),
            _ => Ok(a),
        }
    }

    /// numpy's conversion hook: `np.asarray(buf)` is a zero-copy uint8 view.
    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(
        &self,
        py: Python<'py>,
        dtype: Option<&Bound<'py, PyAny>>,
        copy: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let copy = crate::args::opt_bool_arg(copy, "copy")?;
        let mut a = native_array(py, &AnyBuffer::Host(self.handle()?), self.nbytes)?;
        if let Some(d) = dtype.filter(|d| !d.is_none()) {
            a = a.call_method1("astype", (d,)).map_err(crate::errors::typed)?;
        } else if copy == Some(true) {
            a = a.call_method0("copy")?;
        }
        Ok(a)
    }

    /// The contents as `bytes` (a copy).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let b = self.handle()?;
        PyBytes::new_with(py, self.nbytes, |out| {
            if out.is_empty() {
                return Ok(());
            }
            detach_above(py, out.len(), GIL_FREE_COPY, || memory::read(&b, 0, out)).py_err()
        })
    }
}

/// Allocates `nbytes` of pinned host memory (ACL `aclrtMallocHost`), page aligned.
#[pyfunction]
pub(crate) fn malloc_host(py: Python<'_>, nbytes: &Bound<'_, PyAny>) -> PyResult<PyHostBuffer> {
    let n = size_arg(nbytes, "nbytes")?;
    let b = py.detach(|| memory::malloc_host(n)).py_err()?;
    Ok(PyHostBuffer {
        addr: b.addr(),
        nbytes: b.nbytes(),
        locked: b.is_locked(),
        buf: Mutex::new(Some(b)),
    })
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyHostBuffer>()?;
    m.add_function(wrap_pyfunction!(malloc_host, m)?)?;
    Ok(())
}
