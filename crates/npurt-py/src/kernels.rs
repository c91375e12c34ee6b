//! The executor test kernels, callable from Python as `npurt.kernels.*`.

use crate::args::{int_arg, seconds_arg};
use crate::errors::IntoPy;
use crate::stream::stream_or_current;
use npurt_core::{Kernel, Stream};
use pyo3::prelude::*;
use std::sync::Arc;

fn launch(py: Python<'_>, s: &Stream, k: Arc<dyn Kernel>, blocks: u32) -> PyResult<()> {
    match s.try_launch(k, blocks).py_err()? {
        Ok(_) => Ok(()),
        Err(pending) => py.detach(|| s.push_pending(pending).map(drop)).py_err(),
    }
}

fn blocks_arg(blocks: Option<&Bound<'_, PyAny>>) -> PyResult<u32> {
    match blocks {
        Some(b) if !b.is_none() => Ok(int_arg(b, "blocks", 1, npurt_core::stream::MAX_BLOCKS as i64)? as u32),
        _ => Ok(1),
    }
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
    launch(py, &s, npurt_kernels::empty(), blocks_arg(blocks)?)
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
    launch(py, &s, Arc::new(npurt_kernels::Busy::new(d)), blocks_arg(blocks)?)
}

/// Launches a kernel that fails in block `block` (fault injection for tests).
#[pyfunction]
#[pyo3(signature = (message="injected fault", stream=None, blocks=None, block=0))]
pub(crate) fn fault(
    py: Python<'_>,
    message: &str,
    stream: Option<&Bound<'_, PyAny>>,
    blocks: Option<&Bound<'_, PyAny>>,
    block: u32,
) -> PyResult<()> {
    let s = stream_or_current(stream)?;
    let k = Arc::new(npurt_kernels::Fault {
        block,
        message: message.to_string(),
    });
    launch(py, &s, k, blocks_arg(blocks)?)
}
