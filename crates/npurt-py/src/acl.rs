//! The native half of `npurt.acl`: strict per-thread ACL context functions
//! (`aclrtSetDevice`, `aclrtResetDevice`, `aclrtSetCurrentContext`,
//! `aclrtGetCurrentContext`) and `aclrtMalloc`'s size and policy rule (npurt-mem's
//! [`acl_malloc`](npurt_mem::acl_malloc)). Unlike the
//! Pythonic API (a thread that never chose a device lazily gets device 0), a thread with
//! no context here is ACL's 107002. Argument conversion only: the state is npurt-core's
//! per-thread context stack (`current.rs`), which the acl layer keeps one entry deep.

use crate::context::PyContext;
use crate::device::{device_id, make_current, warn_leaks};
use crate::errors::IntoPy;
use crate::gil::{detach_above, GIL_FREE_ALLOC};
use crate::memory::PyDeviceBuffer;
use npurt_core::alloc;
use npurt_core::{current, registry, Error};
use pyo3::prelude::*;

/// Bytes `aclrtMalloc(size, policy)` (`align32`: `aclrtMallocAlign32`) allocates.
#[pyfunction]
#[pyo3(signature = (size, policy=0, align32=false))]
pub(crate) fn _acl_malloc_size(size: usize, policy: i64, align32: bool) -> PyResult<usize> {
    Ok(npurt_mem::acl_malloc(size, policy as u32, align32)
        .map_err(Error::from)
        .py_err()?
        .0)
}

/// `aclrtMalloc` / `aclrtMallocAlign32` on the current context: ACL's padding and policy
/// values (any `policy`: its low byte picks the page policy, unknown values as HUGE_FIRST).
#[pyfunction]
pub(crate) fn _acl_malloc(py: Python<'_>, size: usize, policy: i64, align32: bool) -> PyResult<PyDeviceBuffer> {
    let (n, page) = npurt_mem::acl_malloc(size, policy as u32, align32)
        .map_err(Error::from)
        .py_err()?;
    let b = detach_above(py, n, GIL_FREE_ALLOC, || alloc::malloc(n, page));
    Ok(PyDeviceBuffer::wrap(b.py_err()?))
}

/// ACL `aclrtSetDevice`: takes one reference on the device and makes its default context
/// this thread's current context (replacing the current one).
#[pyfunction]
pub(crate) fn _acl_set_device(py: Python<'_>, device: &Bound<'_, PyAny>) -> PyResult<()> {
    make_current(py, device, registry::set_device)
}

/// ACL `aclrtResetDevice`: drops one reference (the last one tears the device down, with
/// a ResourceWarning for what was still alive). If that left this thread's current context
/// dead, the thread has no context any more (107002 next).
/// With `force` (`aclrtResetDeviceForce`): every reference at once, aborting queued work.
#[pyfunction]
#[pyo3(signature = (device, force=false))]
pub(crate) fn _acl_reset_device(py: Python<'_>, device: &Bound<'_, PyAny>, force: bool) -> PyResult<()> {
    let id = device_id(device)?;
    let before = current::current_context_strict().ok();
    let report = py
        .detach(|| {
            if force {
                registry::reset_device_force(id)
            } else {
                registry::reset_device(id)
            }
        })
        .py_err()?;
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

/// `aclrtGetMemInfo` of the current context's device: (free, total), cached blocks free.
#[pyfunction]
pub(crate) fn _acl_mem_info() -> PyResult<(u64, u64)> {
    crate::memstats::settled();
    Ok(npurt_core::alloc::current_memory().py_err()?.acl_mem_info())
}

/// The live allocation containing `ptr` (`npurt_core::alloc::locate`): `("device", base,
/// size)`, `("pinned", base, size)` or None. The acl layer's pointer tables look bases up.
#[pyfunction]
pub(crate) fn _acl_locate(py: Python<'_>, ptr: u64) -> Option<(&'static str, usize, usize)> {
    py.detach(|| npurt_core::alloc::locate(ptr as usize)).map(|l| match l {
        npurt_core::alloc::Located::Device { base, size, .. } => ("device", base, size),
        npurt_core::alloc::Located::Pinned { base, size } => ("pinned", base, size),
    })
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_acl_malloc, m)?)?;
    m.add_function(wrap_pyfunction!(_acl_malloc_size, m)?)?;
    m.add_function(wrap_pyfunction!(_acl_set_device, m)?)?;
    m.add_function(wrap_pyfunction!(_acl_reset_device, m)?)?;
    m.add_function(wrap_pyfunction!(_acl_set_context, m)?)?;
    m.add_function(wrap_pyfunction!(_acl_current_context, m)?)?;
    m.add_function(wrap_pyfunction!(_acl_clear_context, m)?)?;
    m.add_function(wrap_pyfunction!(_acl_mem_info, m)?)?;
    m.add_function(wrap_pyfunction!(_acl_locate, m)?)?;
    Ok(())
}
