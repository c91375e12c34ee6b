//! `npurt.random`'s native half: the random kernels (`_random`) and the per-device
//! generators' state (`_rng_*`). The generator (Philox4x32-10, offsets reserved at launch)
//! and the kernels live in `npurt_kernels::{philox, random}`; this file converts arguments.

use super::{arr, run};
use crate::device::device_id;
use crate::errors::{kernel_arg, value_error, IntoPy};
use npurt_kernels::philox::{self, Generator};
use npurt_kernels::Distribution;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::Arc;

fn gen_of(device: &Bound<'_, PyAny>) -> PyResult<Arc<Generator>> {
    philox::generator(device_id(device)?).py_err()
}

/// Queues `out = draws of kind(a, b)` on `stream` (or the current stream), from the
/// generator of `out`'s device: `"uniform"` (low, high) or `"normal"` (mean, std).
#[pyfunction]
#[pyo3(signature = (kind, a, b, out, stream=None))]
pub(crate) fn _random(
    py: Python<'_>,
    kind: &str,
    a: f64,
    b: f64,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let dist = match kind {
        "uniform" => Distribution::Uniform { low: a, high: b },
        "normal" => Distribution::Normal { mean: a, std: b },
        _ => return Err(value_error(format!("unknown distribution {kind:?}"))),
    };
    let out = &arr(out, "out")?.get().a;
    let g = philox::generator(i64::from(out.device())).py_err()?;
    run(py, stream, &[], out, |c| {
        npurt_kernels::random(dist, &g, out.tensor(), c)
    })
}

/// Seeds `device`'s generator and rewinds its offset.
#[pyfunction]
pub(crate) fn _rng_manual_seed(device: &Bound<'_, PyAny>, seed: u64) -> PyResult<()> {
    gen_of(device)?.manual_seed(seed);
    Ok(())
}

/// Seeds `device`'s generator from the OS's randomness; returns the seed.
#[pyfunction]
pub(crate) fn _rng_seed(device: &Bound<'_, PyAny>) -> PyResult<u64> {
    Ok(gen_of(device)?.seed_random())
}

/// The seed of `device`'s generator.
#[pyfunction]
pub(crate) fn _rng_initial_seed(device: &Bound<'_, PyAny>) -> PyResult<u64> {
    Ok(gen_of(device)?.initial_seed())
}

/// The next unused counter block of `device`'s generator.
#[pyfunction]
pub(crate) fn _rng_offset(device: &Bound<'_, PyAny>) -> PyResult<u64> {
    Ok(gen_of(device)?.offset())
}

/// `device`'s generator state: 16 bytes, seed then offset (little-endian u64s).
#[pyfunction]
pub(crate) fn _rng_get_state<'py>(py: Python<'py>, device: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    Ok(PyBytes::new(py, &gen_of(device)?.get_state()))
}

/// Restores `device`'s generator from `_rng_get_state`'s bytes.
#[pyfunction]
pub(crate) fn _rng_set_state(device: &Bound<'_, PyAny>, state: &[u8]) -> PyResult<()> {
    gen_of(device)?.set_state(state).map_err(kernel_arg)
}

/// Adds the random functions to the native module.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for f in [
        wrap_pyfunction!(_random, m)?,
        wrap_pyfunction!(_rng_manual_seed, m)?,
        wrap_pyfunction!(_rng_seed, m)?,
        wrap_pyfunction!(_rng_initial_seed, m)?,
        wrap_pyfunction!(_rng_offset, m)?,
        wrap_pyfunction!(_rng_get_state, m)?,
        wrap_pyfunction!(_rng_set_state, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
