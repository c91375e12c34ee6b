//! `profile_memory`'s subscriber to the memory event hook (`npurt_core::memory::events`):
//! keeps (time, device, action, size, block size) of every event until `stop()`.

use npurt_core::memory::events::{self, MemEvent, MemObserver, MemSubscription};
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::sync::{Arc, Mutex};

/// (t_ns, device, action, size, block size).
type Row = (u64, u32, &'static str, usize, usize);

#[derive(Default)]
struct Keep(Mutex<Vec<Row>>);

impl MemObserver for Keep {
    fn on_mem_event(&self, e: &MemEvent) {
        // Quick and allocation-light: called with pool locks held (see the hook's rules).
        let row = (e.t_ns, e.device, e.action.torch_name(), e.size, e.block_size);
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(row);
    }
}

/// Subscribed from creation until `stop()`, which returns the events as tuples
/// `(t_ns, device, action, size, block_size)` (torch's action names).
#[pyclass(module = "npurt._npurt", name = "_MemCollector", frozen)]
pub(crate) struct PyMemCollector {
    keep: Arc<Keep>,
    sub: Mutex<Option<MemSubscription>>,
}

#[pymethods]
impl PyMemCollector {
    #[new]
    fn new() -> Self {
        let keep = Arc::new(Keep::default());
        let sub = events::subscribe(keep.clone());
        Self {
            keep,
            sub: Mutex::new(Some(sub)),
        }
    }

    /// Unsubscribes; returns every event seen.
    fn stop<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        drop(self.sub.lock().unwrap_or_else(|p| p.into_inner()).take());
        let rows = std::mem::take(&mut *self.keep.0.lock().unwrap_or_else(|p| p.into_inner()));
        let out = PyList::empty(py);
        for r in rows {
            out.append(r)?;
        }
        Ok(out)
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMemCollector>()
}
