//! Memory statistics and quotas (torch.cuda / torch.npu names): `memory_allocated`,
//! `memory_reserved`, their peaks, `memory_stats`, `memory_summary`, `mem_get_info`,
//! `empty_cache`, `set_per_process_memory_fraction`, and the pinned host pool's counters.
//! `device=None` is the current device; asking about a device that is not active does
//! not start it (its numbers are zero).

use crate::args::number_arg;
use crate::device::device_id;
use crate::errors::IntoPy;
use crate::memory::memory_for;
use npurt_core::alloc;
use npurt_core::memory::{self, DeviceMemory, PoolStats};
use npurt_core::registry;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;

/// The program asks for memory figures: the sanitizer's quarantine (memcheck) gives its
/// blocks back first, so the figures are the program's own (one relaxed load when off).
pub(crate) fn settled() {
    if npurt_core::sanitizer::on() {
        npurt_core::sanitizer::quarantine::settle();
    }
}

/// The memory of `device` if it is active (the current device always is).
fn active(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Arc<DeviceMemory>>> {
    settled();
    match device.filter(|d| !d.is_none()) {
        None => alloc::current_memory().map(Some).py_err(),
        Some(d) => {
            let id = device_id(d)?;
            py.detach(|| alloc::active_memory(id)).py_err()
        }
    }
}

fn stat(py: Python<'_>, device: Option<&Bound<'_, PyAny>>, f: impl FnOnce(&PoolStats) -> u64) -> PyResult<u64> {
    Ok(active(py, device)?.map_or(0, |m| f(&m.stats())))
}

pub(crate) fn stats_dict<'py>(py: Python<'py>, s: &PoolStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in s.to_kv() {
        d.set_item(k, v)?;
    }
    Ok(d)
}

/// Bytes of device memory allocated to live buffers (block sizes; all pools of the device).
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn memory_allocated(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
    Ok(active(py, device)?.map_or(0, |m| m.allocated_bytes()))
}

/// Peak of memory_allocated since start or reset_peak_memory_stats.
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn max_memory_allocated(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
    stat(py, device, |s| s.allocated_bytes[0].peak)
}

/// Bytes reserved on the device: mapped by the caching pool (cached + allocated), by
/// memory pools and by dedicated segments.
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn memory_reserved(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
    Ok(active(py, device)?.map_or(0, |m| m.reserved_bytes()))
}

/// Peak of memory_reserved since start or reset_peak_memory_stats.
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn max_memory_reserved(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
    stat(py, device, |s| s.reserved_bytes[0].peak)
}

/// Resets the peaks (max_memory_allocated, max_memory_reserved, every ".peak" stat).
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn reset_peak_memory_stats(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    if let Some(m) = active(py, device)? {
        m.reset_peak_stats();
    }
    Ok(())
}

/// torch-style statistics: "allocated_bytes.all.current", "reserved_bytes.large_pool.peak",
/// "num_ooms", "num_alloc_retries", "segment.all.current", "page_bytes.thp" (bytes
/// reserved per page kind: "hugetlb", "thp", "normal"), "capacity", "limit" (quota)...
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn memory_stats<'py>(py: Python<'py>, device: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyDict>> {
    match active(py, device)? {
        Some(m) => stats_dict(py, &m.stats()),
        None => stats_dict(py, &PoolStats::default()),
    }
}

/// A readable table of memory_stats.
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn memory_summary(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    Ok(match active(py, device)? {
        Some(m) => m.summary(),
        None => PoolStats::default().summary(),
    })
}

/// (free, total) bytes of the device, like aclrtGetMemInfo / torch's mem_get_info: total
/// is the configured capacity, free is what is not reserved.
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn mem_get_info(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<(u64, u64)> {
    settled();
    // Only a named device can be inactive (the current one always is).
    let Some(d) = device.filter(|d| !d.is_none()) else {
        return Ok(alloc::current_memory().py_err()?.mem_info());
    };
    let id = device_id(d)?;
    match py.detach(|| alloc::active_memory(id)).py_err()? {
        Some(m) => Ok(m.mem_info()),
        None => {
            let total = registry::device_props(id).py_err()?.total_memory;
            Ok((total, total))
        }
    }
}

/// Returns cached, unused device memory to the OS (of `device`, or of every active
/// device when None). Returns the bytes released.
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn empty_cache(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
    settled();
    if device.is_some_and(|d| !d.is_none()) {
        return Ok(active(py, device)?.map_or(0, |m| py.detach(|| m.empty_cache())));
    }
    let n = registry::device_count().py_err()?;
    py.detach(|| {
        let mut released = 0;
        for id in 0..n as i64 {
            if let Some(m) = alloc::active_memory(id)? {
                released += m.empty_cache();
            }
        }
        Ok(released)
    })
    .py_err()
}

/// Limits the memory this process may reserve on the device to fraction × capacity
/// (0 < fraction <= 1). Allocations beyond raise npurt.OutOfMemoryError; the device
/// stays usable.
#[pyfunction]
#[pyo3(signature = (fraction, device=None))]
pub(crate) fn set_per_process_memory_fraction(
    py: Python<'_>,
    fraction: &Bound<'_, PyAny>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let f = number_arg(fraction, "fraction", "a number")?;
    memory_for(py, device)?.set_fraction(f).py_err()
}

/// The fraction set by set_per_process_memory_fraction (1.0 when none was set).
#[pyfunction]
#[pyo3(signature = (device=None))]
pub(crate) fn get_per_process_memory_fraction(py: Python<'_>, device: Option<&Bound<'_, PyAny>>) -> PyResult<f64> {
    Ok(memory_for(py, device)?.fraction().unwrap_or(1.0))
}

/// Counters of the pinned host pool: live_bytes, cached_bytes, hits, misses.
#[pyfunction]
pub(crate) fn host_memory_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    settled();
    let s = memory::host_stats();
    let d = PyDict::new(py);
    d.set_item("live_bytes", s.live_bytes)?;
    d.set_item("cached_bytes", s.cached_bytes)?;
    d.set_item("hits", s.hits)?;
    d.set_item("misses", s.misses)?;
    Ok(d)
}

/// Unmaps the pinned host pool's cached allocations; returns the bytes released.
#[pyfunction]
pub(crate) fn host_empty_cache(py: Python<'_>) -> usize {
    settled();
    py.detach(memory::host_empty_cache)
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(memory_allocated, m)?)?;
    m.add_function(wrap_pyfunction!(max_memory_allocated, m)?)?;
    m.add_function(wrap_pyfunction!(memory_reserved, m)?)?;
    m.add_function(wrap_pyfunction!(max_memory_reserved, m)?)?;
    m.add_function(wrap_pyfunction!(reset_peak_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(memory_summary, m)?)?;
    m.add_function(wrap_pyfunction!(mem_get_info, m)?)?;
    m.add_function(wrap_pyfunction!(empty_cache, m)?)?;
    m.add_function(wrap_pyfunction!(set_per_process_memory_fraction, m)?)?;
    m.add_function(wrap_pyfunction!(get_per_process_memory_fraction, m)?)?;
    m.add_function(wrap_pyfunction!(host_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(host_empty_cache, m)?)?;
    Ok(())
}
