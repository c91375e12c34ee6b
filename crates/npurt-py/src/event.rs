//! `npurt.Event`: a point recorded on a stream; timing events measure elapsed milliseconds.

use crate::args::{cast_arg, timeout_arg};
use crate::errors::IntoPy;
use crate::stream::{context_for, stream_or_current};
use npurt_core::{Context, Event};
use pyo3::prelude::*;

#[pyclass(module = "npurt", name = "Event", frozen)]
pub(crate) struct PyEvent {
    pub(crate) e: Event,
}

impl PyEvent {
    pub(crate) fn on_context(ctx: &Context, timing: bool) -> PyResult<Self> {
        Ok(Self {
            e: ctx.create_event(timing).py_err()?,
        })
    }
}

/// Records `e` on `s`; a timing record queues a task and may wait for room in a full
/// stream, so the GIL is released for it.
pub(crate) fn record(py: Python<'_>, e: &Event, s: &npurt_core::Stream) -> PyResult<()> {
    if e.timing() {
        py.detach(|| e.record(s)).py_err()?;
    } else {
        e.record(s).py_err()?;
    }
    crate::wait::if_blocking(py, s)
}

#[pymethods]
impl PyEvent {
    /// `timing=True` (or torch's `enable_timing=True`) enables `elapsed_time`.
    /// `interprocess=True`: another process can open it with `Event.from_ipc_handle`.
    #[new]
    #[pyo3(signature = (timing=None, device=None, *, enable_timing=None, interprocess=None))]
    fn new(
        py: Python<'_>,
        timing: Option<&Bound<'_, PyAny>>,
        device: Option<&Bound<'_, PyAny>>,
        enable_timing: Option<&Bound<'_, PyAny>>,
        interprocess: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let timing = crate::args::opt_bool_arg(timing, "timing")?.unwrap_or(false);
        let enable = crate::args::opt_bool_arg(enable_timing, "enable_timing")?.unwrap_or(false);
        let ipc = crate::args::opt_bool_arg(interprocess, "interprocess")?.unwrap_or(false);
        let ctx = context_for(py, device)?;
        if !ipc {
            return Self::on_context(&ctx, timing || enable);
        }
        if timing || enable {
            return Err(npurt_core::Error::from(npurt_core::shared::SharedError::IpcTiming)).py_err();
        }
        Ok(Self {
            e: py.detach(|| ctx.create_ipc_event()).py_err()?,
        })
    }

    /// Opens an interprocess event from `handle` (`bytes` or `str` from `ipc_handle()`).
    #[staticmethod]
    #[pyo3(signature = (handle, device=None))]
    fn from_ipc_handle(py: Python<'_>, handle: &Bound<'_, PyAny>, device: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let h: String = if let Ok(b) = handle.cast::<pyo3::types::PyBytes>() {
            String::from_utf8_lossy(b.as_bytes()).into_owned()
        } else {
            crate::args::str_arg(handle, "handle")?
        };
        let ctx = context_for(py, device)?;
        Ok(Self {
            e: py.detach(|| ctx.open_ipc_event(&h)).py_err()?,
        })
    }

    /// The 64-byte handle (ACL's `ACL_IPC_EVENT_HANDLE_SIZE`, NUL-padded ASCII) another
    /// process opens with `Event.from_ipc_handle`.
    fn ipc_handle<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let mut h = self.e.ipc_handle().py_err()?.into_bytes();
        h.resize(h.len().max(64), 0);
        Ok(pyo3::types::PyBytes::new(py, &h))
    }

    #[getter]
    fn interprocess(&self) -> bool {
        self.e.is_interprocess()
    }

    #[getter]
    fn timing(&self) -> bool {
        self.e.timing()
    }
    #[getter]
    fn device(&self) -> u32 {
        self.e.device()
    }
    fn __repr__(&self) -> String {
        let ipc = if self.e.is_interprocess() { " interprocess" } else { "" };
        format!(
            "<npurt.Event device={} timing={}{ipc}>",
            self.e.device(),
            self.e.timing()
        )
    }

    /// Records all work submitted so far to `stream` (the current stream by default).
    #[pyo3(signature = (stream=None))]
    fn record(&self, py: Python<'_>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let s = stream_or_current(stream)?;
        record(py, &self.e, &s)
    }

    /// True once the recorded work has finished (or if never recorded).
    fn query(&self) -> PyResult<bool> {
        self.e.query().py_err()
    }

    /// Waits for the recorded work (GIL released). `timeout` in seconds.
    #[pyo3(signature = (timeout=None))]
    fn synchronize(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let t = timeout_arg(timeout)?;
        crate::wait::event(py, &self.e, t)
    }

    /// Makes `stream` (the current stream by default) wait for this event.
    #[pyo3(signature = (stream=None))]
    fn wait(&self, py: Python<'_>, stream: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let s = stream_or_current(stream)?;
        py.detach(|| s.wait_event(&self.e)).py_err()
    }

    /// Milliseconds between this event and `end` (both recorded with timing, both done).
    fn elapsed_time(&self, end: &Bound<'_, PyAny>) -> PyResult<f64> {
        let end = cast_arg::<PyEvent>(end, "end", "an npurt.Event")?;
        self.e.elapsed_ms(&end.get().e).py_err()
    }
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEvent>()?;
    Ok(())
}
