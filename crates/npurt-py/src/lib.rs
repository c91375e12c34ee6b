//! PyO3 glue for npurt: the native module `npurt._npurt`. It wraps npurt-core types,
//! releases the GIL around every blocking call and maps errors in one place (`errors.rs`);
//! it holds no runtime logic.

mod acl;
mod args;
mod array;
mod context;
mod copy;
mod device;
mod errors;
mod event;
mod host;
mod isa;
mod kernels;
mod memory;
mod mempool;
mod memstats;
mod operand;
mod stream;
mod view;
mod wait;

use errors::IntoPy;
use npurt_core::{registry, Config};

/// mimalloc for the extension's own allocations: a launch allocates its kernel object on
/// the submitting thread and a worker frees it, and glibc's arena lock made that pair the
/// bottleneck of small launches (futex waits on both threads). mimalloc frees cross-thread
/// blocks into the owner's lock-free list.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Sets the virtual devices before first use. Keyword arguments override the `NPURT_*`
/// environment variables: device_count, device_memory (bytes or "16G"), aicore_num,
/// worker_threads, visible_devices (list of ids or "0,1"), stream_queue_depth.
#[pyfunction]
#[pyo3(signature = (**kwargs))]
fn configure(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
    let mut c = Config::from_env().py_err()?;
    let (mut aicore, mut workers) = (None, None);
    if let Some(kw) = kwargs {
        for (k, v) in kw.iter() {
            let key: String = k.extract()?;
            let int = |name: &str, max: i64| args::int_arg(&v, name, 0, max);
            match key.as_str() {
                "device_count" => c.device_count = int("device_count", 64)? as u32,
                "device_memory" => {
                    c.device_memory = if let Ok(s) = v.extract::<String>() {
                        npurt_core::config::parse_bytes(&s)
                            .ok_or_else(|| errors::value_error(format!("device_memory={s:?} is not a size")))?
                    } else {
                        int("device_memory", i64::MAX)? as u64
                    }
                }
                "aicore_num" => aicore = Some(int("aicore_num", 1024)? as u32),
                "worker_threads" => workers = Some(int("worker_threads", 1024)? as u32),
                "stream_queue_depth" => c.stream_queue_depth = int("stream_queue_depth", 1 << 20)? as usize,
                "visible_devices" => {
                    c.visible_devices = Some(if let Ok(s) = v.extract::<String>() {
                        npurt_core::config::parse_visible(&s, c.device_count)
                    } else {
                        let items: Vec<Bound<'_, PyAny>> = v.try_iter()?.collect::<PyResult<_>>()?;
                        items
                            .iter()
                            .map(|i| args::int_arg(i, "visible_devices", 0, 63).map(|x| x as u32))
                            .collect::<PyResult<_>>()?
                    })
                }
                other => {
                    return Err(errors::type_error(format!(
                        "configure() got an unexpected keyword argument {other:?}"
                    )))
                }
            }
        }
    }
    // The order of the environment's: the AI-core count sets the default worker count.
    if let Some(n) = aicore {
        c.set_aicore_num(n);
    }
    if let Some(n) = workers {
        c.worker_threads = n;
    }
    registry::configure(c).py_err()
}

/// The configuration in force (initialises the runtime).
#[pyfunction]
fn get_config(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let c = registry::config().py_err()?;
    let d = PyDict::new(py);
    d.set_item("device_count", c.device_count)?;
    d.set_item("device_memory", c.device_memory)?;
    d.set_item("aicore_num", c.aicore_num)?;
    d.set_item("worker_threads", c.worker_threads)?;
    d.set_item("visible_devices", c.visible())?;
    d.set_item("stream_queue_depth", c.stream_queue_depth)?;
    Ok(d)
}

/// (streams, events, contexts) alive in this process — for leak checks in tests.
#[pyfunction]
fn live_counts() -> (usize, usize, usize) {
    npurt_core::live_counts()
}

/// Device-side wait deadlines still scheduled (leak tests).
#[pyfunction]
fn _timer_pending() -> usize {
    npurt_core::timer_pending()
}

#[pymodule]
fn _npurt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<device::PyDevice>()?;
    m.add_class::<stream::PyStream>()?;
    m.add_class::<event::PyEvent>()?;
    m.add_class::<context::PyContext>()?;
    m.add_function(wrap_pyfunction!(configure, m)?)?;
    m.add_function(wrap_pyfunction!(get_config, m)?)?;
    m.add_function(wrap_pyfunction!(live_counts, m)?)?;
    m.add_function(wrap_pyfunction!(errors::_acl_error_codes, m)?)?;
    m.add_function(wrap_pyfunction!(_timer_pending, m)?)?;
    m.add_function(wrap_pyfunction!(device::device_count, m)?)?;
    m.add_function(wrap_pyfunction!(device::get_device_properties, m)?)?;
    m.add_function(wrap_pyfunction!(isa::isa_info, m)?)?;
    m.add_function(wrap_pyfunction!(isa::_isa_override, m)?)?;
    m.add_function(wrap_pyfunction!(device::current_device, m)?)?;
    m.add_function(wrap_pyfunction!(device::set_device, m)?)?;
    m.add_function(wrap_pyfunction!(device::reset_device, m)?)?;
    m.add_function(wrap_pyfunction!(device::synchronize, m)?)?;
    m.add_function(wrap_pyfunction!(device::_shutdown, m)?)?;
    m.add_function(wrap_pyfunction!(stream::current_stream, m)?)?;
    m.add_function(wrap_pyfunction!(stream::default_stream, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::empty, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::busy, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::fault, m)?)?;
    m.add_class::<memory::PyDeviceBuffer>()?;
    m.add_class::<host::PyHostBuffer>()?;
    m.add_class::<mempool::PyMemPool>()?;
    m.add_class::<memory::PyMemView>()?;
    m.add_function(wrap_pyfunction!(memory::malloc, m)?)?;
    m.add_function(wrap_pyfunction!(host::malloc_host, m)?)?;
    m.add_function(wrap_pyfunction!(mempool::_resolve, m)?)?;
    m.add_function(wrap_pyfunction!(mempool::_owns_device_address, m)?)?;
    m.add_class::<view::PyBufferView>()?;
    m.add_function(wrap_pyfunction!(view::_view_memcpy, m)?)?;
    m.add_function(wrap_pyfunction!(view::_view_memcpy_async, m)?)?;
    m.add_function(wrap_pyfunction!(view::_view_memset, m)?)?;
    m.add_function(wrap_pyfunction!(view::_view_memset_async, m)?)?;
    m.add_function(wrap_pyfunction!(acl::_acl_malloc, m)?)?;
    m.add_function(wrap_pyfunction!(acl::_acl_malloc_size, m)?)?;
    m.add_function(wrap_pyfunction!(acl::_acl_set_device, m)?)?;
    m.add_function(wrap_pyfunction!(acl::_acl_reset_device, m)?)?;
    m.add_function(wrap_pyfunction!(acl::_acl_set_context, m)?)?;
    m.add_function(wrap_pyfunction!(acl::_acl_current_context, m)?)?;
    m.add_function(wrap_pyfunction!(acl::_acl_clear_context, m)?)?;
    m.add_function(wrap_pyfunction!(copy::memcpy, m)?)?;
    m.add_function(wrap_pyfunction!(operand::_is_pinned, m)?)?;
    m.add_function(wrap_pyfunction!(copy::memcpy_async, m)?)?;
    m.add_function(wrap_pyfunction!(copy::memset, m)?)?;
    m.add_function(wrap_pyfunction!(copy::memset_async, m)?)?;
    m.add_function(wrap_pyfunction!(memstats::memory_allocated, m)?)?;
    m.add_function(wrap_pyfunction!(memstats::max_memory_allocated, m)?)?;
    m.add_function(wrap_pyfunction!(memstats::memory_reserved, m)?)?;
    m.add_function(wrap_pyfunction!(memstats::max_memory_reserved, m)?)?;
    m.add_function(wrap_pyfunction!(memstats::reset_peak_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(memstats::memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(memstats::memory_summary, m)?)?;
    m.add_function(wrap_pyfunction!(memstats::mem_get_info, m)?)?;
    m.add_function(wrap_pyfunction!(memstats::empty_cache, m)?)?;
    m.add_function(wrap_pyfunction!(memstats::set_per_process_memory_fraction, m)?)?;
    m.add_function(wrap_pyfunction!(memstats::get_per_process_memory_fraction, m)?)?;
    m.add_function(wrap_pyfunction!(memstats::host_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(memstats::host_empty_cache, m)?)?;
    array::register(m)?;
    Ok(())
}
