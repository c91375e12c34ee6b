//! Process-wide runtime settings and counters: `npurt.configure`, `get_config`, and the
//! leak-check counters the tests read.

use crate::args;
use crate::errors::{self, IntoPy};
use npurt_core::{registry, Config, WorkerPolicy};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Sets the virtual devices before first use. Keyword arguments override the `NPURT_*`
/// environment variables: device_count, device_memory (bytes or "16G"), aicore_num,
/// worker_threads, visible_devices (list of ids or "0,1"), stream_queue_depth, worker_policy
/// ("batch" or "normal").
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
                "worker_policy" => {
                    let s: String = v.extract().map_err(|_| {
                        errors::type_error("worker_policy must be a str (\"batch\" or \"normal\")".to_string())
                    })?;
                    c.worker_policy = WorkerPolicy::parse(&s).ok_or_else(|| {
                        errors::value_error(format!("worker_policy={s:?} is not one of \"batch\", \"normal\""))
                    })?;
                }
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
    d.set_item("worker_policy", c.worker_policy.name())?;
    Ok(d)
}

/// True once the runtime read its configuration (a device was used): asking for the
/// configuration before that would fix it (the status thread must not).
#[pyfunction]
fn _runtime_initialized() -> bool {
    registry::is_initialized()
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

/// AI-core utilisation (percent) of `device` over the next `window_ms` milliseconds (the
/// GIL released while it samples); None if the device is not active (never starts it).
#[pyfunction]
fn _device_utilization(py: Python<'_>, device: i64, window_ms: u32) -> PyResult<Option<f64>> {
    let Some(dev) = py.detach(|| registry::active_device(device)).py_err()? else {
        return Ok(None);
    };
    let window = std::time::Duration::from_millis(u64::from(window_ms.min(10_000)));
    Ok(Some(py.detach(|| dev.utilization(window))))
}

/// The utilisation rule (`npurt_core::busy_percent`): busy ns over `span_ns` on `workers`.
#[pyfunction]
fn _busy_percent(busy_ns: u64, span_ns: u64, workers: usize) -> f64 {
    npurt_core::busy_percent(busy_ns, span_ns, workers)
}

/// What npurt-smi's status record holds for `device` if it is active (None otherwise; never
/// starts it): workers, busy_ns (AI-core busy time summed over workers), events,
/// allocated, reserved, capacity and hugetlb bytes.
#[pyfunction]
fn _device_status(py: Python<'_>, device: i64) -> PyResult<Option<Bound<'_, PyDict>>> {
    let Some(dev) = py.detach(|| registry::active_device(device)).py_err()? else {
        return Ok(None);
    };
    let (workers, busy_ns, events) = dev.activity();
    let m = dev.memory();
    let (streams, _, _) = npurt_core::live_counts();
    m.publish_activity(streams as u64, events as u64); // npurt-smi reads these from the region
    let st = m.stats();
    let d = PyDict::new(py);
    d.set_item("shared", m.is_shared())?;
    d.set_item("workers", workers)?;
    d.set_item("busy_ns", busy_ns)?;
    d.set_item("events", events)?;
    d.set_item("allocated", m.allocated_bytes())?;
    d.set_item("reserved", m.reserved_bytes())?;
    d.set_item("capacity", m.capacity())?;
    d.set_item(
        "hugetlb_bytes",
        st.page_bytes[npurt_core::memory::PageKind::HugeTlb.index()],
    )?;
    Ok(Some(d))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_device_status, m)?)?;
    m.add_function(wrap_pyfunction!(_device_utilization, m)?)?;
    m.add_function(wrap_pyfunction!(_busy_percent, m)?)?;
    m.add_function(wrap_pyfunction!(configure, m)?)?;
    m.add_function(wrap_pyfunction!(get_config, m)?)?;
    m.add_function(wrap_pyfunction!(_runtime_initialized, m)?)?;
    m.add_function(wrap_pyfunction!(live_counts, m)?)?;
    m.add_function(wrap_pyfunction!(_timer_pending, m)?)
}
