//! `npurt.Stream`: an ACL stream. `with stream:` makes it the thread's current stream.

use crate::args::{cast_arg, int_arg, timeout_arg};
use crate::device::device_id;
use crate::errors::{type_error, IntoPy};
use crate::event::PyEvent;
use npurt_core::error::TaskError;
use npurt_core::Pending;
use npurt_core::{current, registry, Context, Engine, EngineOp, Stream};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// The context a new stream or event goes into: the current one, or `device`'s.
pub(crate) fn context_for(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<Context> {
    let cur = py.detach(current::current_context).py_err()?;
    match device.filter(|d| !d.is_none()) {
        None => Ok(cur),
        Some(d) => context_on(py, cur, device_id(d)?),
    }
}

/// `cur` (the current context) if it is on device `id`, else that device's default context.
fn context_on(py: Python<'_>, cur: Context, id: i64) -> PyResult<Context> {
    if cur.device() as i64 == id {
        return Ok(cur);
    }
    let dev = py.detach(|| registry::active_or_use(id)).py_err()?;
    Ok(dev.default_context())
}

#[pyclass(module = "npurt", name = "Stream", frozen)]
pub(crate) struct PyStream {
    pub(crate) s: Stream,
    owned: bool,
}

impl PyStream {
    pub(crate) fn wrap(s: Stream) -> Self {
        Self { s, owned: false }
    }
}

impl Drop for PyStream {
    fn drop(&mut self) {
        // The object that created the stream releases it (without blocking: queued work
        // still runs). Handles from current_stream() do not own their stream.
        if self.owned {
            self.s.release();
        }
    }
}

/// Resolves `stream=None` to the thread's current stream.
pub(crate) fn stream_or_current<'a>(stream: Option<&'a Bound<'_, PyAny>>) -> PyResult<StreamArg<'a>> {
    match stream {
        Some(obj) if !obj.is_none() => Ok(StreamArg::Given(
            &cast_arg::<PyStream>(obj, "stream", "an npurt.Stream")?.get().s,
        )),
        _ => current::current_stream().map(StreamArg::Current).py_err(),
    }
}

/// A `stream=` argument: the given `npurt.Stream`'s handle, borrowed for the call (no
/// reference-count traffic on the stream, whose count the worker running it also
/// changes), or the current stream.
pub(crate) enum StreamArg<'a> {
    Given(&'a Stream),
    Current(Stream),
}

impl std::ops::Deref for StreamArg<'_> {
    type Target = Stream;
    #[inline]
    fn deref(&self) -> &Stream {
        match self {
            StreamArg::Given(s) => s,
            StreamArg::Current(s) => s,
        }
    }
}

/// Finishes a non-blocking submission (`try_launch`, `try_memcpy_async`...): a full stream
/// hands the task back, and pushing it waits for room, so that runs without the GIL.
/// The engine op of a Python host function: `func(*args)` with the GIL; an exception (with
/// its traceback) becomes the task's error.
pub(crate) fn host_op(func: Py<PyAny>, args: Py<PyTuple>) -> EngineOp {
    Box::new(move || {
        Python::attach(|py| {
            let r = func.call1(py, args.bind(py).clone()).map(drop).map_err(|e| {
                let tb = e.traceback(py).and_then(|t| t.format().ok()).unwrap_or_default();
                TaskError::HostCallback(format!("{}{}", tb, e))
            });
            drop(func);
            drop(args);
            r
        })
    })
}

pub(crate) fn submit(py: Python<'_>, s: &Stream, r: npurt_core::Result<Result<u64, Pending>>) -> PyResult<()> {
    match r.py_err()? {
        Ok(_) => {}
        Err(p) => py.detach(|| s.push_pending(p).map(drop)).py_err()?,
    }
    crate::wait::if_blocking(py, s)
}

#[pymethods]
impl PyStream {
    #[new]
    #[pyo3(signature = (priority=None, device=None))]
    fn new(py: Python<'_>, priority: Option<&Bound<'_, PyAny>>, device: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let prio = match priority {
            Some(p) if !p.is_none() => int_arg(p, "priority", i64::MIN, i64::MAX)?,
            _ => 0,
        };
        let ctx = context_for(py, device)?;
        let s = ctx.create_stream(prio).py_err()?;
        Ok(Self { s, owned: true })
    }

    #[getter]
    fn priority(&self) -> u8 {
        self.s.priority()
    }
    #[getter]
    fn device(&self) -> u32 {
        self.s.device()
    }
    #[getter]
    fn id(&self) -> u64 {
        self.s.id()
    }
    /// torch_npu's `npu_stream` (torch's `cuda_stream`): the stream's handle, its non-zero id.
    #[getter]
    fn npu_stream(&self) -> u64 {
        self.s.id()
    }
    /// torch's `stream_id` (the same id).
    #[getter]
    fn stream_id(&self) -> u64 {
        self.s.id()
    }
    /// torch's `device_index` (the same as `device`).
    #[getter]
    fn device_index(&self) -> u32 {
        self.s.device()
    }
    #[getter]
    fn is_default(&self) -> bool {
        self.s.is_default()
    }
    #[getter]
    fn is_alive(&self) -> bool {
        self.s.is_alive()
    }
    /// Tasks completed so far on this stream.
    #[getter]
    fn completed(&self) -> u64 {
        self.s.completed()
    }

    /// Whether work can be queued on it (alive, no sticky error); no side effects.
    #[getter]
    fn usable(&self) -> bool {
        self.s.is_usable()
    }

    /// Tasks submitted to this stream so far (`completed` catches up with it).
    #[getter]
    fn submitted(&self) -> u64 {
        self.s.submitted_count()
    }

    fn __repr__(&self) -> String {
        format!(
            "<npurt.Stream id={} device={} priority={}>",
            self.s.id(),
            self.s.device(),
            self.s.priority()
        )
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PyStream>().is_ok_and(|o| o.get().s == self.s)
    }
    fn __hash__(&self) -> u64 {
        self.s.id()
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        current::push_stream(&slf.get().s).py_err()?;
        Ok(slf)
    }
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        current::pop_stream(&self.s);
        false
    }

    /// True when all work submitted so far has finished. Raises the stream's sticky error.
    fn query(&self) -> PyResult<bool> {
        self.s.query().py_err()
    }

    /// Waits for all submitted work (the GIL is released while waiting). `timeout` in
    /// seconds; raises npurt.WaitTimeoutError (also a TimeoutError) when it passes.
    #[pyo3(signature = (timeout=None))]
    fn synchronize(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let t = timeout_arg(timeout)?;
        crate::wait::stream(py, &self.s, t)
    }

    /// Later work on this stream waits for `event`'s recorded work. With `timeout`
    /// (seconds), a wait still unsatisfied that long after it reaches the head of the
    /// stream fails the stream (sticky npurt.TaskFailedError, ACL 107019) instead.
    #[pyo3(signature = (event, timeout=None))]
    fn wait_event(&self, py: Python<'_>, event: &Bound<'_, PyAny>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let ev = cast_arg::<PyEvent>(event, "event", "an npurt.Event")?.get().e.clone();
        let t = timeout_arg(timeout)?;
        py.detach(|| self.s.wait_event_timeout(&ev, t)).py_err()
    }

    /// Later work on this stream waits for everything submitted to `other` so far.
    fn wait_stream(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<()> {
        let os = cast_arg::<PyStream>(other, "other", "an npurt.Stream")?.get().s.clone();
        py.detach(|| self.s.wait_stream(&os)).py_err()
    }

    /// Records a new (or the given) event on this stream and returns it.
    #[pyo3(signature = (event=None))]
    fn record_event(&self, py: Python<'_>, event: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyEvent>> {
        let ev = match event.filter(|e| !e.is_none()) {
            Some(e) => cast_arg::<PyEvent>(e, "event", "an npurt.Event or None")?
                .clone()
                .unbind(),
            None => {
                let cur = py.detach(current::current_context).py_err()?;
                let ctx = context_on(py, cur, self.s.device() as i64)?;
                Py::new(py, PyEvent::on_context(&ctx, false)?)?
            }
        };
        crate::event::record(py, &ev.get().e, &self.s)?;
        Ok(ev)
    }

    /// Runs `fn(*args)` on the runtime's callback thread once earlier work on this stream
    /// is done; later work waits for it. An exception becomes the stream's sticky error.
    #[pyo3(signature = (func, *args))]
    fn launch_host_func(&self, py: Python<'_>, func: Py<PyAny>, args: Py<PyTuple>) -> PyResult<()> {
        if !func.bind(py).is_callable() {
            return Err(type_error("launch_host_func needs a callable".to_string()));
        }
        submit(py, &self.s, self.s.try_launch_engine(Engine::Host, host_op(func, args)))
    }

    /// Destroys the stream: waits for its work (or, with force=True, drops queued work).
    #[pyo3(signature = (force=None))]
    fn destroy(&self, py: Python<'_>, force: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let force = crate::args::opt_bool_arg(force, "force")?.unwrap_or(false);
        if !force && self.s.is_alive() && !self.s.is_default() {
            crate::wait::drain(py, &self.s)?; // interruptible; destroy then finds it idle
        }
        py.detach(|| self.s.destroy(force)).py_err()
    }
}

#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn current_stream(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<PyStream> {
    match device {
        Some(d) if !d.is_none() => {
            let ctx = context_for(py, Some(d))?;
            let cur = current::current_stream().py_err()?;
            if cur.context_id() == ctx.id() {
                Ok(PyStream::wrap(cur))
            } else {
                Ok(PyStream::wrap(ctx.default_stream().py_err()?))
            }
        }
        _ => Ok(PyStream::wrap(current::current_stream().py_err()?)),
    }
}

#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn default_stream(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<PyStream> {
    let ctx = context_for(py, device)?;
    Ok(PyStream::wrap(ctx.default_stream().py_err()?))
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStream>()?;
    m.add_function(wrap_pyfunction!(current_stream, m)?)?;
    m.add_function(wrap_pyfunction!(default_stream, m)?)?;
    Ok(())
}
