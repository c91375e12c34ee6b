//! The kernel launch functions behind `npurt.add`, `npurt.matmul`, `npurt.gemm`...:
//! argument conversion, then `run` (checks, ordering and queueing in
//! `npurt_kernels::array::launch`). Registered by one table, [`register`].

use super::{arr, run, scalar, PyArray};
use crate::args::{blocks_arg, type_name};
use crate::errors::{kernel_arg, type_error, value_error};
use npurt_kernels::array::DeviceArray;
use npurt_kernels::{BinaryOp, GemmArgs, KernelArgError, Operand, ReduceOp, UnaryOp};
use pyo3::prelude::*;

/// The operation called `name` among `all` (by `name_of`), or a ValueError naming `what`.
fn named<T: Copy>(all: &[T], name_of: fn(T) -> &'static str, name: &str, what: &str) -> PyResult<T> {
    all.iter()
        .copied()
        .find(|&o| name_of(o) == name)
        .ok_or_else(|| value_error(format!("unknown {what} {name:?}")))
}

fn opt_arr<'a, 'py>(o: Option<&'a Bound<'py, PyAny>>, what: &str) -> PyResult<Option<&'a Bound<'py, PyArray>>> {
    match o.filter(|o| !o.is_none()) {
        None => Ok(None),
        Some(o) => arr(o, what).map(Some),
    }
}

/// `fn $name(x, out, stream=None)` launching `$kernel(x, out, cores)`.
macro_rules! x_to_out {
    ($(#[$doc:meta])* $name:ident => $kernel:path) => {
        $(#[$doc])*
        #[pyfunction]
        #[pyo3(signature = (x, out, stream=None))]
        pub(crate) fn $name(
            py: Python<'_>,
            x: &Bound<'_, PyAny>,
            out: &Bound<'_, PyAny>,
            stream: Option<&Bound<'_, PyAny>>,
        ) -> PyResult<()> {
            let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
            run(py, stream, &[x], out, |c| $kernel(x.tensor(), out.tensor(), c))
        }
    };
}

x_to_out!(
    /// `out = x` converted to out's dtype (numpy's casting rules).
    _cast => npurt_kernels::cast
);
x_to_out!(
    /// `out = x` (same dtype; materialises any view, transposes tiled).
    _copy => npurt_kernels::copy
);

#[pyfunction]
#[pyo3(signature = (op, x, out, stream=None))]
pub(crate) fn _unary(
    py: Python<'_>,
    op: &str,
    x: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let op = named(&UnaryOp::ALL, UnaryOp::name, op, "unary op")?;
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x], out, |c| {
        npurt_kernels::unary(op, x.tensor(), out.tensor(), c)
    })
}

/// A binary operand: a Python scalar, or an array (also returned, as a launch input).
pub(super) fn binary_operand<'a>(o: &'a Bound<'_, PyAny>, what: &str) -> PyResult<(Operand, Option<&'a DeviceArray>)> {
    if let Some(s) = scalar(o)? {
        return Ok((Operand::Scalar(s), None));
    }
    let x = &arr(o, what)?.get().a;
    Ok((Operand::Tensor(x.tensor().clone()), Some(x)))
}

#[pyfunction]
#[pyo3(signature = (op, a, b, out, stream=None))]
pub(crate) fn _binary(
    py: Python<'_>,
    op: &str,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let op = named(&BinaryOp::ALL, BinaryOp::name, op, "binary op")?;
    let out = &arr(out, "out")?.get().a;
    let ((oa, xa), (ob, xb)) = (binary_operand(a, "x1")?, binary_operand(b, "x2")?);
    let (both, one);
    let inputs: &[&DeviceArray] = match (xa, xb) {
        (Some(x), Some(y)) => {
            both = [x, y];
            &both
        }
        (Some(x), None) | (None, Some(x)) => {
            one = [x];
            &one
        }
        (None, None) => &[],
    };
    run(py, stream, inputs, out, |c| {
        npurt_kernels::binary(op, oa, ob, out.tensor(), c)
    })
}

#[pyfunction]
#[pyo3(signature = (out, value, stream=None))]
pub(crate) fn _fill(
    py: Python<'_>,
    out: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let out = &arr(out, "out")?.get().a;
    let v =
        scalar(value)?.ok_or_else(|| type_error(format!("fill value must be a number, not {}", type_name(value))))?;
    run(py, stream, &[], out, |c| npurt_kernels::fill(out.tensor(), v, c))
}

#[pyfunction]
#[pyo3(signature = (alpha, x, y, out, stream=None))]
pub(crate) fn _axpy(
    py: Python<'_>,
    alpha: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    y: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let al = scalar(alpha)?.ok_or_else(|| type_error(format!("alpha must be a number, not {}", type_name(alpha))))?;
    let (x, y, out) = (&arr(x, "x")?.get().a, &arr(y, "y")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x, y], out, |c| {
        npurt_kernels::axpy(al, x.tensor(), y.tensor(), out.tensor(), c)
    })
}

#[pyfunction]
#[pyo3(signature = (op, x, axes, out, stream=None))]
pub(crate) fn _reduce(
    py: Python<'_>,
    op: &str,
    x: &Bound<'_, PyAny>,
    axes: Option<Vec<isize>>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let op = named(&ReduceOp::ALL, ReduceOp::name, op, "reduction")?;
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x], out, |c| {
        npurt_kernels::reduce(op, x.tensor(), axes.as_deref(), out.tensor(), c)
    })
}

#[pyfunction]
#[pyo3(signature = (x, axis, out, log=false, stream=None))]
pub(crate) fn _softmax(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    axis: isize,
    out: &Bound<'_, PyAny>,
    log: bool,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let kernel = if log {
        npurt_kernels::log_softmax
    } else {
        npurt_kernels::softmax
    };
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x], out, |c| kernel(x.tensor(), axis, out.tensor(), c))
}

#[pyfunction]
#[pyo3(signature = (x, weight, bias, eps, out, rms=false, stream=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _norm(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    weight: Option<&Bound<'_, PyAny>>,
    bias: Option<&Bound<'_, PyAny>>,
    eps: f64,
    out: &Bound<'_, PyAny>,
    rms: bool,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    let w = opt_arr(weight, "weight")?.map(|w| &w.get().a);
    let b = opt_arr(bias, "bias")?.map(|b| &b.get().a);
    let mut inputs = vec![x];
    inputs.extend(w);
    inputs.extend(b);
    run(py, stream, &inputs, out, |c| {
        if rms {
            if b.is_some() {
                return Err(KernelArgError::Invalid {
                    op: "rms_norm",
                    detail: "rms_norm takes no bias".into(),
                });
            }
            npurt_kernels::rms_norm(x.tensor(), w.map(|w| w.tensor()), eps, out.tensor(), c)
        } else {
            npurt_kernels::layer_norm(
                x.tensor(),
                w.map(|w| w.tensor()),
                b.map(|b| b.tensor()),
                eps,
                out.tensor(),
                c,
            )
        }
    })
}

/// `out = alpha·op(a)@op(b) + beta·C + bias` (C = `c`, or out's contents when `c` is None)
/// on `stream`; `blocks` overrides the suggested block count (the tile grid, and so the
/// result, does not change).
#[pyfunction]
#[pyo3(signature = (a, b, out, c=None, bias=None, alpha=1.0, beta=0.0, trans_a=false, trans_b=false, stream=None, blocks=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _gemm(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    c: Option<&Bound<'_, PyAny>>,
    bias: Option<&Bound<'_, PyAny>>,
    alpha: f64,
    beta: f64,
    trans_a: bool,
    trans_b: bool,
    stream: Option<&Bound<'_, PyAny>>,
    blocks: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (a, b, out) = (
        &arr(a, "x1")?.get().a,
        &arr(b, "x2")?.get().a,
        &arr(out, "out")?.get().a,
    );
    let c = opt_arr(c, "c")?.map(|c| &c.get().a);
    let bias = opt_arr(bias, "bias")?.map(|b| &b.get().a);
    let blocks = blocks_arg(blocks)?;
    let mut inputs = vec![a, b];
    inputs.extend(c);
    inputs.extend(bias);
    let args = GemmArgs {
        trans_a,
        trans_b,
        alpha,
        beta,
    };
    run(py, stream, &inputs, out, |cores| {
        let (k, suggested) = npurt_kernels::gemm(
            a.tensor(),
            b.tensor(),
            c.map(|c| c.tensor()),
            bias.map(|b| b.tensor()),
            out.tensor(),
            args,
            cores,
        )?;
        // An explicit block count keeps the tile grid; fewer blocks run more tiles each.
        Ok((k, blocks.unwrap_or(suggested)))
    })
}

/// `out = op(a) @ op(b)`: [`_gemm`] with alpha 1, beta 0, no bias.
#[pyfunction]
#[pyo3(signature = (a, b, out, trans_a=false, trans_b=false, stream=None, blocks=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _matmul(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    trans_a: bool,
    trans_b: bool,
    stream: Option<&Bound<'_, PyAny>>,
    blocks: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    _gemm(py, a, b, out, None, None, 1.0, 0.0, trans_a, trans_b, stream, blocks)
}

/// The output shape of `matmul(op(a), op(b))` (2-D or 3-D), or a typed error.
#[pyfunction]
#[pyo3(signature = (a, b, trans_a=false, trans_b=false))]
pub(crate) fn _matmul_shape(a: Vec<usize>, b: Vec<usize>, trans_a: bool, trans_b: bool) -> PyResult<Vec<usize>> {
    npurt_kernels::matmul_out_shape(&a, &b, trans_a, trans_b).map_err(kernel_arg)
}

/// numpy's no-copy reshape rule: the element strides giving `shape` / `strides` as `new`,
/// or None when that needs a copy (`npurt_kernels::nocopy_reshape_strides`).
#[pyfunction]
pub(crate) fn _reshape_strides(shape: Vec<usize>, strides: Vec<isize>, new: Vec<usize>) -> Option<Vec<isize>> {
    npurt_kernels::nocopy_reshape_strides(&shape, &strides, &new)
}

#[pyfunction]
#[pyo3(signature = (xs, axis, out, stream=None))]
pub(crate) fn _concat(
    py: Python<'_>,
    xs: Vec<Bound<'_, PyAny>>,
    axis: isize,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let out = &arr(out, "out")?.get().a;
    let refs: Vec<&Bound<'_, PyArray>> = xs.iter().map(|x| arr(x, "arrays")).collect::<PyResult<_>>()?;
    let inputs: Vec<&DeviceArray> = refs.iter().map(|r| &r.get().a).collect();
    let views: Vec<_> = inputs.iter().map(|a| a.tensor().clone()).collect();
    run(py, stream, &inputs, out, |c| {
        npurt_kernels::concat(&views, axis, out.tensor(), c)
    })
}

/// Adds every launch function to the native module (the one table of them).
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for f in [
        wrap_pyfunction!(_unary, m)?,
        wrap_pyfunction!(_binary, m)?,
        wrap_pyfunction!(_cast, m)?,
        wrap_pyfunction!(_copy, m)?,
        wrap_pyfunction!(_fill, m)?,
        wrap_pyfunction!(_axpy, m)?,
        wrap_pyfunction!(_reduce, m)?,
        wrap_pyfunction!(_softmax, m)?,
        wrap_pyfunction!(_norm, m)?,
        wrap_pyfunction!(_gemm, m)?,
        wrap_pyfunction!(_matmul, m)?,
        wrap_pyfunction!(_matmul_shape, m)?,
        wrap_pyfunction!(_reshape_strides, m)?,
        wrap_pyfunction!(_concat, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
