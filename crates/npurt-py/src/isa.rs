//! Where kernels run: `npurt._npurt.isa_info()` (the CPU model, the detected ISA level,
//! the `NPURT_ISA` cap and the path of each kernel family; the rule lives in
//! `npurt_kernels::isa`), the test override `_isa_override`, and `_core_to_core_ns` (how
//! long a cache line takes between two cores: `npurt_core::probe`).

use crate::errors::value_error;
use npurt_kernels::isa::{self, Isa};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// `{family: path}` for every kernel family, e.g. `{"gemm": "avx512", ...}`.
pub(crate) fn paths_dict<'py>(py: Python<'py>, r: &isa::IsaReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, p) in &r.paths {
        d.set_item(*name, p.name())?;
    }
    Ok(d)
}

/// `{"cpu_model", "detected", "requested", "cap", "override", "level", "paths", "warning",
/// "summary"}`: see `npurt_kernels::isa::IsaReport` (`cap`/`override`/`warning` are None
/// when unset; `summary` is the one-line form the benches print).
#[pyfunction]
pub(crate) fn isa_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let r = isa::report();
    let d = PyDict::new(py);
    d.set_item("cpu_model", &r.cpu_model)?;
    d.set_item("detected", r.detected.name())?;
    d.set_item("requested", &r.requested)?;
    d.set_item("cap", r.cap.map(Isa::name))?;
    d.set_item("override", r.forced.map(Isa::name))?;
    d.set_item("level", r.level.name())?;
    d.set_item("paths", paths_dict(py, &r)?)?;
    d.set_item("warning", r.warning.as_deref())?;
    d.set_item("summary", r.to_string())?;
    Ok(d)
}

/// Test override: caps every kernel family at `level` ("avx512", "avx2", "scalar"; None or
/// "auto" removes it). Process-wide; kernels already queued may run on either level.
#[pyfunction]
#[pyo3(signature = (level=None))]
pub(crate) fn _isa_override(level: Option<&str>) -> PyResult<()> {
    let cap = match level {
        None => None,
        Some(s) => Isa::parse_cap(s)
            .ok_or_else(|| value_error(format!("ISA level {s:?} is not one of auto, avx512, avx2, scalar")))?,
    };
    isa::force(cap);
    Ok(())
}

/// One-way ns for a cache line between the first two CPUs this process may use (median
/// of 5 rounds of 10 000 round trips, ~20 ms; None with one CPU or past its 1 s deadline).
/// The GIL is released meanwhile.
#[pyfunction]
pub(crate) fn _core_to_core_ns(py: Python<'_>) -> Option<f64> {
    py.detach(npurt_core::probe::core_to_core_ns)
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(isa_info, m)?)?;
    m.add_function(wrap_pyfunction!(_isa_override, m)?)?;
    m.add_function(wrap_pyfunction!(_core_to_core_ns, m)?)?;
    Ok(())
}
