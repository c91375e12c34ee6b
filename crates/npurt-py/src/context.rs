//! `npurt.Context`: an explicit ACL context with its own default stream.

use crate::args::{opt_size_arg, timeout_arg};
use crate::errors::IntoPy;
use crate::stream::{context_for, PyStream};
use npurt_core::{current, registry, Context};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

#[pyclass(module = "npurt", name = "Context", frozen)]
pub(crate) struct PyContext {
    c: Context,
}

impl PyContext {
    pub(crate) fn wrap(c: Context) -> Self {
        Self { c }
    }
    /// The context, or the error a destroyed one raises (npurt.InvalidHandleError, 107017).
    pub(crate) fn live(&self) -> PyResult<&Context> {
        if !self.c.is_alive() {
            self.c.default_stream().py_err()?; // raises the matching error
        }
        Ok(&self.c)
    }
}

#[pymethods]
impl PyContext {
    /// Creates an explicit context on `device` (the current device by default), with an
    /// optional memory limit in bytes (see `set_memory_limit`).
    #[new]
    #[pyo3(signature = (device=None, *, memory_limit=None))]
    fn new(
        py: Python<'_>,
        device: Option<&Bound<'_, PyAny>>,
        memory_limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let limit = opt_size_arg(memory_limit, "memory_limit")?;
        let id = context_for(py, device)?.device() as i64;
        let dev = py.detach(|| registry::active_or_use(id)).py_err()?;
        let c = dev.create_context().py_err()?;
        c.set_memory_limit(limit).py_err()?;
        Ok(Self { c })
    }

    /// Limits the device memory allocated while this context is current (bytes; None
    /// removes the limit). Going over raises OutOfMemoryError (207001) naming the context;
    /// the context stays usable. Counts buffers allocated while a limit is set.
    fn set_memory_limit(&self, limit: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let limit = opt_size_arg(limit, "limit")?;
        self.c.set_memory_limit(limit).py_err()
    }

    /// The memory limit in bytes, or None.
    #[getter]
    fn memory_limit(&self) -> Option<usize> {
        self.c.memory_limit()
    }

    /// Bytes counted against the memory limit now.
    fn memory_allocated(&self) -> usize {
        crate::memstats::settled();
        self.c.memory_charged().0
    }

    /// Peak of `memory_allocated()`.
    fn max_memory_allocated(&self) -> usize {
        self.c.memory_charged().1
    }

    #[getter]
    fn device(&self) -> u32 {
        self.c.device()
    }
    #[getter]
    fn id(&self) -> u64 {
        self.c.id()
    }
    #[getter]
    fn is_alive(&self) -> bool {
        self.c.is_alive()
    }
    #[getter]
    fn default_stream(&self) -> PyResult<PyStream> {
        Ok(PyStream::wrap(self.c.default_stream().py_err()?))
    }
    fn __repr__(&self) -> String {
        format!("<npurt.Context id={} device={}>", self.c.id(), self.c.device())
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        current::push_context(slf.get().live()?);
        Ok(slf)
    }
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        current::pop_context();
        false
    }

    /// Waits for all streams of this context.
    #[pyo3(signature = (timeout=None))]
    fn synchronize(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let t = timeout_arg(timeout)?;
        crate::wait::sliced_sync(py, t, |slice| self.c.synchronize(slice))
    }

    /// Waits for this context's work, then releases its streams.
    fn destroy(&self, py: Python<'_>) -> PyResult<()> {
        if self.c.is_alive() {
            // interruptible; errors are left for destroy (which only waits)
            crate::wait::sliced(py, None, |slice| match self.c.synchronize(Some(slice)) {
                Err(e) if e.kind() == npurt_core::ErrorKind::Timeout => Ok(false),
                _ => Ok(true),
            })?;
        }
        py.detach(|| self.c.destroy()).py_err()
    }
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyContext>()?;
    Ok(())
}
