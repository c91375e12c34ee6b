//! numpy's shape rules for the Python fronts: broadcasting, axis normalisation and the
//! shape of a reduction, each one npurt-kernels' own function (the kernels check with the
//! same ones), so `npurt.add` / `npurt.sum`... compute output shapes without a rule of
//! their own.

use crate::errors::kernel_arg;
use npurt_kernels::BinaryOp;
use pyo3::prelude::*;

/// The broadcast shape of `a` and `b` (InvalidValueError when they do not broadcast);
/// `op` (a binary op's name or "axpy") names the operation in the message.
#[pyfunction]
fn _broadcast_shapes(op: &str, a: Vec<usize>, b: Vec<usize>) -> PyResult<Vec<usize>> {
    let op = BinaryOp::ALL
        .iter()
        .map(|o| o.name())
        .find(|&n| n == op)
        .unwrap_or(if op == "axpy" { "axpy" } else { "broadcast" });
    npurt_kernels::broadcast_shapes(op, &a, &b).map_err(kernel_arg)
}

/// `axes` normalised for `ndim` dimensions, in order (out of range or repeated: InvalidValueError).
#[pyfunction]
fn _normalize_axes(axes: Vec<isize>, ndim: usize) -> PyResult<Vec<usize>> {
    npurt_kernels::normalize_axes("axis", &axes, ndim).map_err(kernel_arg)
}

/// The shape of reducing `shape` over `axes` (None: all), with the reduced dims kept as 1
/// under `keepdims`.
#[pyfunction]
#[pyo3(signature = (shape, axes, keepdims))]
fn _reduce_out_shape(shape: Vec<usize>, axes: Option<Vec<isize>>, keepdims: bool) -> PyResult<Vec<usize>> {
    npurt_kernels::reduce_out_shape(&shape, axes.as_deref(), keepdims).map_err(kernel_arg)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_broadcast_shapes, m)?)?;
    m.add_function(wrap_pyfunction!(_normalize_axes, m)?)?;
    m.add_function(wrap_pyfunction!(_reduce_out_shape, m)?)
}
