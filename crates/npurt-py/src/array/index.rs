//! The launch functions behind `npurt.take`, `pad`, `tile`, `arange`, `topk`, the
//! comparisons, `where`, `power` and the parametrised unary maps (`erf`, `clip`,
//! `leaky_relu`...): argument conversion only.

use super::ops::binary_operand;
use super::{arr, run, run_outs, scalar};
use crate::args::type_name;
use crate::errors::{kernel_arg, type_error, value_error};
use npurt_kernels::array::DeviceArray;
use npurt_kernels::nn::{self, PadMode};
use npurt_kernels::{Activation, CompareOp, Scalar};
use pyo3::prelude::*;

fn num(o: &Bound<'_, PyAny>, what: &str) -> PyResult<Scalar> {
    scalar(o)?.ok_or_else(|| type_error(format!("{what} must be a number, not {}", type_name(o))))
}

fn opt_num(o: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Scalar>> {
    o.filter(|o| !o.is_none()).map(|o| num(o, what)).transpose()
}

/// Operands' arrays (the launch inputs).
fn arrays<'a>(xs: &[Option<&'a DeviceArray>]) -> Vec<&'a DeviceArray> {
    xs.iter().flatten().copied().collect()
}

#[pyfunction]
#[pyo3(signature = (x, indices, axis))]
fn _take_shape(x: Vec<usize>, indices: Vec<usize>, axis: isize) -> PyResult<Vec<usize>> {
    nn::take_out_shape(&x, &indices, axis).map_err(kernel_arg)
}

#[pyfunction]
#[pyo3(signature = (x, indices, axis, out, stream=None))]
fn _take(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    indices: &Bound<'_, PyAny>,
    axis: isize,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (x, i, out) = (
        &arr(x, "x")?.get().a,
        &arr(indices, "indices")?.get().a,
        &arr(out, "out")?.get().a,
    );
    run(py, stream, &[x, i], out, |c| {
        nn::take(x.tensor(), i.tensor(), axis, out.tensor(), c)
    })
}

#[pyfunction]
#[pyo3(signature = (x, pads, mode, value, out, stream=None))]
fn _pad(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    pads: Vec<isize>,
    mode: &str,
    value: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let mode = PadMode::from_name(mode).ok_or_else(|| value_error(format!("pad: unknown mode {mode:?}")))?;
    let v = num(value, "constant_value")?;
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x], out, |c| {
        nn::pad(x.tensor(), &pads, mode, v, out.tensor(), c)
    })
}

#[pyfunction]
#[pyo3(signature = (x, reps, out, stream=None))]
fn _tile(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    reps: Vec<usize>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x], out, |c| nn::tile(x.tensor(), &reps, out.tensor(), c))
}

/// The length of `arange(start, stop, step)` (ONNX `Range`'s rule).
#[pyfunction]
fn _arange_len(start: &Bound<'_, PyAny>, stop: &Bound<'_, PyAny>, step: &Bound<'_, PyAny>) -> PyResult<usize> {
    nn::arange_len(num(start, "start")?, num(stop, "stop")?, num(step, "step")?).map_err(kernel_arg)
}

#[pyfunction]
#[pyo3(signature = (start, step, out, stream=None))]
fn _arange(
    py: Python<'_>,
    start: &Bound<'_, PyAny>,
    step: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (a, s) = (num(start, "start")?, num(step, "step")?);
    let out = &arr(out, "out")?.get().a;
    run(py, stream, &[], out, |c| nn::arange(a, s, out.tensor(), c))
}

#[pyfunction]
#[pyo3(signature = (x, k, axis, largest, values, indices, stream=None))]
#[allow(clippy::too_many_arguments)]
fn _topk(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    k: usize,
    axis: isize,
    largest: bool,
    values: &Bound<'_, PyAny>,
    indices: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let x = &arr(x, "x")?.get().a;
    let (v, i) = (&arr(values, "values")?.get().a, &arr(indices, "indices")?.get().a);
    run_outs(py, stream, &[x], v, &[i], |c| {
        nn::topk(x.tensor(), k, axis, largest, v.tensor(), i.tensor(), c)
    })
}

/// A unary map by name with its parameters (`alpha`, `beta`; `lo`/`hi` for clip).
#[pyfunction]
#[pyo3(signature = (op, x, out, alpha=0.0, beta=0.0, lo=None, hi=None, stream=None))]
#[allow(clippy::too_many_arguments)]
fn _activation(
    py: Python<'_>,
    op: &str,
    x: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    alpha: f64,
    beta: f64,
    lo: Option<&Bound<'_, PyAny>>,
    hi: Option<&Bound<'_, PyAny>>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (a, b) = (alpha as f32, beta as f32);
    let op = match op {
        "erf" => Activation::Erf,
        "reciprocal" => Activation::Reciprocal,
        "floor" => Activation::Floor,
        "ceil" => Activation::Ceil,
        "round" => Activation::Round,
        "sign" => Activation::Sign,
        "leaky_relu" => Activation::LeakyRelu { alpha: a },
        "hard_sigmoid" => Activation::HardSigmoid { alpha: a, beta: b },
        "hard_swish" => Activation::HardSwish,
        "elu" => Activation::Elu { alpha: a },
        "selu" => Activation::Selu { alpha: a, gamma: b },
        "softplus" => Activation::Softplus,
        "clip" => Activation::Clip {
            lo: opt_num(lo, "a_min")?,
            hi: opt_num(hi, "a_max")?,
        },
        _ => return Err(value_error(format!("unknown unary op {op:?}"))),
    };
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x], out, |c| {
        npurt_kernels::activation(op, x.tensor(), out.tensor(), c)
    })
}

#[pyfunction]
#[pyo3(signature = (op, a, b, out, stream=None))]
fn _compare(
    py: Python<'_>,
    op: &str,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let out = &arr(out, "out")?.get().a;
    let ((oa, xa), (ob, xb)) = (binary_operand(a, "x1")?, binary_operand(b, "x2")?);
    let inputs = arrays(&[xa, xb]);
    if op == "power" {
        return run(py, stream, &inputs, out, |c| {
            npurt_kernels::pow(oa, ob, out.tensor(), c)
        });
    }
    let op = CompareOp::ALL
        .into_iter()
        .find(|o| o.name() == op)
        .ok_or_else(|| value_error(format!("unknown comparison {op:?}")))?;
    run(py, stream, &inputs, out, |c| {
        npurt_kernels::compare(op, oa, ob, out.tensor(), c)
    })
}

#[pyfunction]
#[pyo3(signature = (cond, x, y, out, stream=None))]
fn _where(
    py: Python<'_>,
    cond: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    y: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let out = &arr(out, "out")?.get().a;
    let (c, tc) = binary_operand(cond, "condition")?;
    let (x, tx) = binary_operand(x, "x")?;
    let (y, ty) = binary_operand(y, "y")?;
    let inputs = arrays(&[tc, tx, ty]);
    run(py, stream, &inputs, out, |n| {
        npurt_kernels::where_(c, x, y, out.tensor(), n)
    })
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for f in [
        wrap_pyfunction!(_take_shape, m)?,
        wrap_pyfunction!(_take, m)?,
        wrap_pyfunction!(_pad, m)?,
        wrap_pyfunction!(_tile, m)?,
        wrap_pyfunction!(_arange_len, m)?,
        wrap_pyfunction!(_arange, m)?,
        wrap_pyfunction!(_topk, m)?,
        wrap_pyfunction!(_activation, m)?,
        wrap_pyfunction!(_compare, m)?,
        wrap_pyfunction!(_where, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
