//! The executor test kernels, callable from Python as `npurt.kernels.*`.

use crate::args::{blocks_arg, seconds_arg};
use crate::stream::{stream_or_current, submit};
use npurt_core::{Kernel, Stream};
use pyo3::prelude::*;
use std::sync::Arc;

/// Launches `k` on `s` with `blocks` blocks (default 1).
fn launch(py: Python<'_>, s: &Stream, k: Arc<dyn Kernel>, blocks: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let blocks = blocks_arg(blocks)?.unwrap_or(1);
    submit(py, s, s.try_launch(k, blocks))
}

/// Launches a kernel that does nothing (measures launch cost).
#[pyfunction]
#[pyo3(signature = (stream=None, blocks=None))]
pub(crate) fn empty(
    py: Python<'_>,
    stream: Option<&Bound<'_, PyAny>>,
    blocks: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let s = stream_or_current(stream)?;
    launch(py, &s, npurt_kernels::empty(), blocks)
}

/// Launches a kernel whose every block busy-works for `seconds` on one AI core.
#[pyfunction]
#[pyo3(signature = (seconds, stream=None, blocks=None))]
pub(crate) fn busy(
    py: Python<'_>,
    seconds: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
    blocks: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let d = seconds_arg(seconds, "seconds")?;
    let s = stream_or_current(stream)?;
    launch(py, &s, Arc::new(npurt_kernels::Busy::new(d)), blocks)
}

/// Launches a kernel that fails in block `block` (fault injection for tests).
#[pyfunction]
#[pyo3(signature = (message=None, stream=None, blocks=None, block=None))]
pub(crate) fn fault(
    py: Python<'_>,
    message: Option<&Bound<'_, PyAny>>,
    stream: Option<&Bound<'_, PyAny>>,
    blocks: Option<&Bound<'_, PyAny>>,
    block: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let message = match message {
        Some(m) => crate::args::str_arg(m, "message")?,
        None => "injected fault".to_string(),
    };
    let block = match block {
        Some(b) => crate::args::int_arg(b, "block", 0, u32::MAX as i64)? as u32,
        None => 0,
    };
    let s = stream_or_current(stream)?;
    let k = Arc::new(npurt_kernels::Fault { block, message });
    launch(py, &s, k, blocks)
}

/// Adds this file's classes and functions to `npurt._npurt`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(empty, m)?)?;
    m.add_function(wrap_pyfunction!(busy, m)?)?;
    m.add_function(wrap_pyfunction!(fault, m)?)?;
    Ok(())
}
