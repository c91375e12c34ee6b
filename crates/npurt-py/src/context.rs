//! `npurt.Context`: an explicit ACL context with its own default stream.

use crate::args::timeout_arg;
use crate::errors::IntoPy;
use crate::stream::{context_for, PyStream};
use npurt_core::{current, runtime, Context};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

#[pyclass(module = "npurt", name = "Context", frozen)]
pub(crate) struct PyContext {
    c: Context,
}

#[pymethods]
impl PyContext {
    /// Creates an explicit context on `device` (the current device by default).
    #[new]
    #[pyo3(signature = (device=None))]
    fn new(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let id = context_for(py, device)?.device() as i64;
        let dev = py.detach(|| runtime::active_or_use(id)).py_err()?;
        Ok(Self {
            c: dev.create_context().py_err()?,
        })
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
        let c = &slf.get().c;
        if !c.is_alive() {
            c.default_stream().py_err()?; // raises the right error
        }
        current::push_context(c);
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
        py.detach(|| self.c.synchronize(t)).py_err()
    }

    /// Waits for this context's work, then releases its streams.
    fn destroy(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.c.destroy()).py_err()
    }
}
