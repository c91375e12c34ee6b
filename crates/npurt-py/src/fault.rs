//! Test-only fault injection (`npurt-core`'s `fault`): `_fault_set("alloc:3,kernel:1")`
//! arms faults for the N-th matching operation from now (as `NPURT_FAULT` does at start),
//! `_fault_clear()` disarms them, `_fault_injected()` counts what fired.

use crate::errors::IntoPy;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Arms faults from a spec like `"alloc:3,kernel:1,hang:1,copy_stall:2"` (`""`/`"off"`
/// disarms); replaces whatever was armed.
#[pyfunction]
fn _fault_set(spec: &Bound<'_, PyAny>) -> PyResult<()> {
    let spec: String = spec
        .extract()
        .map_err(|_| crate::errors::type_error(format!("spec must be a str, not {}", crate::args::type_name(spec))))?;
    npurt_core::fault::set(&spec).py_err()
}

/// Disarms every fault.
#[pyfunction]
fn _fault_clear() -> PyResult<()> {
    npurt_core::fault::set("").py_err()
}

/// `{kind: count}` of the faults injected so far in this process.
#[pyfunction]
fn _fault_injected(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for (k, n) in npurt_core::fault::injected() {
        d.set_item(k, n)?;
    }
    Ok(d)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_fault_set, m)?)?;
    m.add_function(wrap_pyfunction!(_fault_clear, m)?)?;
    m.add_function(wrap_pyfunction!(_fault_injected, m)?)?;
    Ok(())
}
