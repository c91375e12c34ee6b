//! Strict per-thread ACL context functions for `npurt.acl`: `aclrtSetDevice`,
//! `aclrtResetDevice`, `aclrtSetCurrentContext`, `aclrtGetCurrentContext`. Unlike the
//! Pythonic API (a thread that never chose a device lazily gets device 0), a thread with
//! no context here is ACL's 107002. Argument conversion only: the state is npurt-core's
//! per-thread context stack (`current.rs`), which the acl layer keeps one entry deep.

use crate::context::PyContext;
use crate::device::{device_id, make_current, warn_leaks};
use crate::errors::IntoPy;
use npurt_core::{current, registry};
use pyo3::prelude::*;

/// ACL `aclrtSetDevice`: takes one reference on the device and makes its default context
/// this thread's current context (replacing the current one).
#[pyfunction]
pub(crate) fn _acl_set_device(py: Python<'_>, device: &Bound<'_, PyAny>) -> PyResult<()> {
    make_current(py, device, registry::set_device)
}

/// ACL `aclrtResetDevice`: drops one reference (the last one tears the device down, with
/// a ResourceWarning for what was still alive). If that left this thread's current context
/// dead, the thread has no context any more (107002 next).
#[pyfunction]
pub(crate) fn _acl_reset_device(py: Python<'_>, device: &Bound<'_, PyAny>) -> PyResult<()> {
    let id = device_id(device)?;
    let before = current::current_context_strict().ok();
    let report = py.detach(|| registry::reset_device(id)).py_err()?;
    if before.is_some_and(|c| !c.is_alive()) {
        current::pop_context();
    }
    warn_leaks(py, report)
}

/// ACL `aclrtSetCurrentContext`: `ctx` (an npurt.Context) becomes this thread's current
/// context (and so its device). A destroyed context is npurt.InvalidHandleError (107017).
#[pyfunction]
pub(crate) fn _acl_set_context(ctx: &Bound<'_, PyContext>) -> PyResult<()> {
    current::set_current_context(ctx.get().live()?);
    Ok(())
}

/// ACL `aclrtGetCurrentContext`: this thread's current context, or npurt.NoContextError
/// (107002) if it has none (no lazy device 0).
#[pyfunction]
pub(crate) fn _acl_current_context() -> PyResult<PyContext> {
    Ok(PyContext::wrap(current::current_context_strict().py_err()?))
}

/// Forgets this thread's current context (after `aclrtDestroyContext` of it).
#[pyfunction]
pub(crate) fn _acl_clear_context() {
    current::pop_context();
}
