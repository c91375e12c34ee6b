//! `npurt.Device` and the device-level module functions.

use crate::args::{int_arg, timeout_arg};
use crate::errors::{resource_warning, IntoPy};
use npurt_core::{current, registry, Device, LeakReport};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;

pub(crate) fn device_id(obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    if let Ok(d) = obj.cast::<PyDevice>() {
        return Ok(d.get().id as i64);
    }
    let count = registry::device_count().py_err()? as i64;
    let id = int_arg(obj, "device", i64::MIN, i64::MAX)?;
    if id < 0 || id >= count {
        return Err(crate::errors::to_py(
            npurt_core::error::DeviceError::InvalidId {
                id,
                count: count as u32,
            }
            .into(),
        ));
    }
    Ok(id)
}

/// Emits a ResourceWarning describing what a device teardown found still alive.
pub(crate) fn warn_leaks(py: Python<'_>, report: Option<LeakReport>) -> PyResult<()> {
    let Some(r) = report else { return Ok(()) };
    if r.is_empty() {
        return Ok(());
    }
    let msg = format!(
        "device {} was reset with resources still alive: {} stream(s), {} event(s), {} context(s), {} allocation(s) ({} bytes); they were released",
        r.device, r.streams, r.events, r.contexts, r.allocations, r.bytes
    );
    resource_warning(py, msg)
}

/// A virtual NPU. `with npurt.Device(i):` makes it current on this thread (taking an ACL
/// reference) and restores the previous device on exit; the last exit tears it down.
#[pyclass(module = "npurt", name = "Device", frozen, eq, hash)]
#[derive(PartialEq, Eq, Hash)]
pub(crate) struct PyDevice {
    id: u32,
}

#[pymethods]
impl PyDevice {
    #[new]
    #[pyo3(signature = (device=None))]
    fn new(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let id = match device {
            None => py.detach(current::current_device).py_err()? as i64,
            Some(d) => device_id(d)?,
        };
        Ok(Self { id: id as u32 })
    }

    #[getter]
    fn id(&self) -> u32 {
        self.id
    }
    fn __index__(&self) -> u32 {
        self.id
    }
    fn __int__(&self) -> u32 {
        self.id
    }
    fn __repr__(&self) -> String {
        format!("<npurt.Device {}>", self.id)
    }

    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let id = slf.get().id as i64;
        let dev = slf.py().detach(|| registry::set_device(id)).py_err()?;
        current::push_context(&dev.default_context());
        Ok(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        current::pop_context();
        let id = self.id as i64;
        let report = py.detach(|| registry::reset_device(id)).py_err()?;
        warn_leaks(py, report)?;
        Ok(false)
    }

    /// Waits for all work on the device (all its contexts and streams).
    #[pyo3(signature = (timeout=None))]
    fn synchronize(&self, py: Python<'_>, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let t = timeout_arg(timeout)?;
        let id = self.id as i64;
        py.detach(|| match registry::active_device(id)? {
            Some(d) => d.synchronize(t),
            None => Ok(()),
        })
        .py_err()
    }

    /// True while some reference keeps the device started.
    #[getter]
    fn is_active(&self) -> PyResult<bool> {
        Ok(registry::active_device(self.id as i64).py_err()?.is_some())
    }

    fn _refcount(&self) -> PyResult<usize> {
        registry::device_refs(self.id as i64).py_err()
    }

    #[getter]
    fn properties<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        properties(py, self.id as i64)
    }
    /// The ISA path each kernel family runs, e.g. `{"gemm": "avx512", ...}` (the CPU
    /// model is in `properties["cpu_model"]`; everything in `npurt.isa_info()`).
    #[getter]
    fn isa<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::isa::paths_dict(py, &npurt_kernels::isa::report())
    }
    #[getter]
    fn name(&self) -> PyResult<String> {
        Ok(registry::device_props(self.id as i64).py_err()?.name)
    }
    #[getter]
    fn total_memory(&self) -> PyResult<u64> {
        Ok(registry::device_props(self.id as i64).py_err()?.total_memory)
    }
    #[getter]
    fn aicore_num(&self) -> PyResult<u32> {
        Ok(registry::device_props(self.id as i64).py_err()?.aicore_num)
    }
    #[getter]
    fn vector_core_num(&self) -> PyResult<u32> {
        Ok(registry::device_props(self.id as i64).py_err()?.vector_core_num)
    }
    #[getter]
    fn l2_cache_size(&self) -> PyResult<u64> {
        Ok(registry::device_props(self.id as i64).py_err()?.l2_cache_size)
    }
}

pub(crate) fn properties(py: Python<'_>, id: i64) -> PyResult<Bound<'_, PyDict>> {
    let p = registry::device_props(id).py_err()?;
    let d = PyDict::new(py);
    d.set_item("id", p.ordinal)?;
    d.set_item("physical_id", p.physical_id)?;
    d.set_item("name", p.name)?;
    d.set_item("soc_name", p.soc_name)?;
    d.set_item("total_memory", p.total_memory)?;
    d.set_item("aicore_num", p.aicore_num)?;
    d.set_item("vector_core_num", p.vector_core_num)?;
    d.set_item("l2_cache_size", p.l2_cache_size)?;
    d.set_item("worker_threads", p.worker_threads)?;
    d.set_item("stream_queue_depth", p.stream_queue_depth)?;
    let isa = npurt_kernels::isa::report();
    d.set_item("cpu_model", &isa.cpu_model)?;
    d.set_item("isa", crate::isa::paths_dict(py, &isa)?)?;
    Ok(d)
}

#[pyfunction]
pub(crate) fn device_count() -> PyResult<u32> {
    registry::device_count().py_err()
}

#[pyfunction]
pub(crate) fn get_device_properties(py: Python<'_>, device: &Bound<'_, PyAny>) -> PyResult<Py<PyDict>> {
    Ok(properties(py, device_id(device)?)?.unbind())
}

#[pyfunction]
pub(crate) fn current_device(py: Python<'_>) -> PyResult<u32> {
    py.detach(current::current_device).py_err()
}

/// torch-style `set_device`: makes the device current on this thread (no stack), holding
/// the process's implicit reference.
#[pyfunction]
pub(crate) fn set_device(py: Python<'_>, device: &Bound<'_, PyAny>) -> PyResult<()> {
    make_current(py, device, registry::use_device)
}

/// Takes a reference on `device` with `take` (`registry::use_device`: the implicit one;
/// `registry::set_device`: ACL's) and makes its default context this thread's current one.
pub(crate) fn make_current(
    py: Python<'_>,
    device: &Bound<'_, PyAny>,
    take: fn(i64) -> npurt_core::Result<Arc<Device>>,
) -> PyResult<()> {
    let id = device_id(device)?;
    let dev = py.detach(|| take(id)).py_err()?;
    current::set_current_context(&dev.default_context());
    Ok(())
}

/// ACL `aclrtResetDevice`: drops one reference; the last one tears the device down.
#[pyfunction]
#[pyo3(signature = (device, force=None))]
pub(crate) fn reset_device(
    py: Python<'_>,
    device: &Bound<'_, PyAny>,
    force: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let force = crate::args::opt_bool_arg(force, "force")?.unwrap_or(false);
    let id = device_id(device)?;
    if !force && !npurt_core::thread_role::is_runtime_thread() {
        if let Some(dev) = registry::last_reference(id).py_err()? {
            crate::wait::before_teardown(py, &dev)?; // Ctrl-C may interrupt the wait
        }
    }
    let report = py
        .detach(|| {
            if force {
                registry::reset_device_force(id)
            } else {
                registry::reset_device(id)
            }
        })
        .py_err()?;
    warn_leaks(py, report)
}

/// Waits for all work on a device (the current one by default).
#[pyfunction]
#[pyo3(signature = (device=None, timeout=None))]
pub(crate) fn synchronize(
    py: Python<'_>,
    device: Option<&Bound<'_, PyAny>>,
    timeout: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let t = timeout_arg(timeout)?;
    let id = match device {
        Some(d) => device_id(d)?,
        None => py.detach(current::current_device).py_err()? as i64,
    };
    let Some(d) = py.detach(|| registry::active_device(id)).py_err()? else {
        return Ok(());
    };
    crate::wait::sliced_sync(py, t, |slice| d.synchronize(slice))
}

/// Tears down every device (registered with atexit). Returns nothing; warns on leaks.
#[pyfunction]
pub(crate) fn _shutdown(py: Python<'_>) {
    let _ = py.detach(registry::shutdown);
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDevice>()?;
    m.add_function(wrap_pyfunction!(device_count, m)?)?;
    m.add_function(wrap_pyfunction!(get_device_properties, m)?)?;
    m.add_function(wrap_pyfunction!(current_device, m)?)?;
    m.add_function(wrap_pyfunction!(set_device, m)?)?;
    m.add_function(wrap_pyfunction!(reset_device, m)?)?;
    m.add_function(wrap_pyfunction!(synchronize, m)?)?;
    m.add_function(wrap_pyfunction!(_shutdown, m)?)?;
    Ok(())
}
