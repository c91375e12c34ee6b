//! The shared status region seen from Python: the status directory (one owner: Rust),
//! every device's process table for `npurt-smi`, reclaiming dead processes' shares, and
//! the switch benchmarks and tests use.

use crate::errors::IntoPy;
use npurt_core::{registry, shared};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// The per-user status directory (created 0700; refused when not safely ours).
#[pyfunction]
fn _status_dir() -> PyResult<String> {
    shared::status_dir()
        .map(|p| p.display().to_string())
        .map_err(npurt_core::Error::from)
        .py_err()
}

/// Every device region in the status directory: a list of dicts `{device, capacity,
/// reserved, processes: [{pid, name, allocated, reserved, quota, streams, events, alive}]}`.
#[pyfunction]
fn _shared_snapshot(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let devs = py.detach(shared::snapshot).map_err(npurt_core::Error::from).py_err()?;
    let out = PyList::empty(py);
    for d in devs {
        let dv = PyDict::new(py);
        dv.set_item("device", d.device)?;
        dv.set_item("capacity", d.capacity)?;
        dv.set_item("reserved", d.reserved)?;
        let procs = PyList::empty(py);
        for p in d.processes {
            let pd = PyDict::new(py);
            pd.set_item("pid", p.pid)?;
            pd.set_item("name", p.name)?;
            pd.set_item("allocated", p.allocated)?;
            pd.set_item("reserved", p.reserved)?;
            pd.set_item("quota", p.quota)?;
            pd.set_item("streams", p.streams)?;
            pd.set_item("events", p.events)?;
            pd.set_item("alive", p.alive)?;
            procs.append(pd)?;
        }
        dv.set_item("processes", procs)?;
        out.append(dv)?;
    }
    Ok(out)
}

/// Frees the shares of processes that died without detaching; the bytes reclaimed.
#[pyfunction]
fn _shared_reclaim(py: Python<'_>) -> PyResult<u64> {
    py.detach(shared::reclaim).map_err(npurt_core::Error::from).py_err()
}

/// Devices started from now on attach to their shared region (`True`) or stay private.
#[pyfunction]
fn _shared_set_enabled(on: bool) {
    shared::set_enabled(on);
}

/// `(enabled, attached, why not)`: the switch, whether `device` (when active) is
/// attached, and the last attach error's message.
#[pyfunction]
#[pyo3(signature = (device=0))]
fn _shared_state(py: Python<'_>, device: i64) -> PyResult<(bool, bool, Option<String>)> {
    let dev = py.detach(|| registry::active_device(device)).py_err()?;
    let attached = dev.is_some_and(|d| d.memory().is_shared());
    Ok((
        shared::enabled(),
        attached,
        shared::attach_error().map(|e| e.to_string()),
    ))
}

/// Streams parked on an interprocess event right now (leak checks).
#[pyfunction]
fn _external_waits_pending() -> usize {
    npurt_core::external_waits_pending()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_status_dir, m)?)?;
    m.add_function(wrap_pyfunction!(_shared_snapshot, m)?)?;
    m.add_function(wrap_pyfunction!(_shared_reclaim, m)?)?;
    m.add_function(wrap_pyfunction!(_shared_set_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_shared_state, m)?)?;
    m.add_function(wrap_pyfunction!(_external_waits_pending, m)?)
}
