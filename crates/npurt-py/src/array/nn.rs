//! The launch functions behind `npurt.nn` (conv, conv_transpose, pools, batch_norm, lrn,
//! resize) and their shape rules (npurt-kernels' `nn::Window` and friends): argument
//! conversion only.

use super::{arr, run};
use crate::errors::{kernel_arg, value_error};
use npurt_kernels::array::DeviceArray;
use npurt_kernels::nn::{self, CoordMode, NearestMode, PoolKind, ResizeArgs, ResizeMode, Window};
use pyo3::prelude::*;

fn opt_arr<'py>(o: Option<&Bound<'py, PyAny>>, what: &str) -> PyResult<Option<DeviceArray>> {
    match o.filter(|o| !o.is_none()) {
        None => Ok(None),
        Some(o) => Ok(Some(arr(o, what)?.get().a.clone())),
    }
}

/// The spatial output sizes of a window over `input` (ONNX's rule; `ceil_mode` for pools).
#[pyfunction]
#[pyo3(signature = (op, input, kernel, strides, pads, dilations, ceil_mode=false))]
fn _window_out_shape(
    op: &str,
    input: Vec<usize>,
    kernel: Vec<usize>,
    strides: Option<Vec<usize>>,
    pads: Option<Vec<usize>>,
    dilations: Option<Vec<usize>>,
    ceil_mode: bool,
) -> PyResult<Vec<usize>> {
    let op = match op {
        "conv" => "conv",
        "max_pool" => "max_pool",
        _ => "avg_pool",
    };
    let win = Window::new(
        op,
        kernel.len(),
        &kernel,
        strides.as_deref(),
        pads.as_deref(),
        dilations.as_deref(),
    )
    .map_err(kernel_arg)?;
    if input.len() != kernel.len() {
        return Err(value_error(format!(
            "{op}: {} spatial dims in the input, {} in kernel_shape",
            input.len(),
            kernel.len()
        )));
    }
    win.out_shape(op, &input, ceil_mode).map_err(kernel_arg)
}

/// ONNX's auto_pad rule (SAME_UPPER / SAME_LOWER / VALID / NOTSET) as `[b.., e..]` pads.
#[pyfunction]
fn _auto_pads(
    mode: &str,
    input: Vec<usize>,
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
) -> PyResult<Vec<usize>> {
    nn::auto_pads(mode, &input, &kernel, &strides, &dilations).map_err(kernel_arg)
}

/// A convolution, its bias and the fused activation `activation` (`nn::Epilogue::parse`'s
/// names and parameters; None: no activation).
#[pyfunction]
#[pyo3(signature = (x, w, bias, out, strides, pads, dilations, group, stream=None, activation=None, activation_params=Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn _conv(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    w: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
    out: &Bound<'_, PyAny>,
    strides: Option<Vec<usize>>,
    pads: Option<Vec<usize>>,
    dilations: Option<Vec<usize>>,
    group: usize,
    stream: Option<&Bound<'_, PyAny>>,
    activation: Option<&str>,
    activation_params: Vec<f32>,
) -> PyResult<()> {
    let epi = match activation {
        None => nn::Epilogue::None,
        Some(name) => nn::Epilogue::parse(name, &activation_params).map_err(kernel_arg)?,
    };
    let (x, w, out) = (&arr(x, "x")?.get().a, &arr(w, "w")?.get().a, &arr(out, "out")?.get().a);
    let b = opt_arr(bias, "bias")?;
    let mut inputs = vec![x, w];
    inputs.extend(b.as_ref());
    run(py, stream, &inputs, out, |c| {
        nn::conv(
            x.tensor(),
            w.tensor(),
            b.as_ref().map(|b| b.tensor()),
            out.tensor(),
            strides.as_deref(),
            pads.as_deref(),
            dilations.as_deref(),
            group,
            epi,
            c,
        )
    })
}

/// The output shape of a transposed convolution (ONNX's rule).
#[pyfunction]
#[pyo3(signature = (x, w, strides, pads, dilations, group, output_padding))]
fn _conv_transpose_shape(
    x: Vec<usize>,
    w: Vec<usize>,
    strides: Option<Vec<usize>>,
    pads: Option<Vec<usize>>,
    dilations: Option<Vec<usize>>,
    group: usize,
    output_padding: Vec<usize>,
) -> PyResult<Vec<usize>> {
    let k = x.len().saturating_sub(2);
    let kernel = w.get(2..).unwrap_or(&[]).to_vec();
    let win = Window::new(
        "conv_transpose",
        k,
        &kernel,
        strides.as_deref(),
        pads.as_deref(),
        dilations.as_deref(),
    )
    .map_err(kernel_arg)?;
    nn::conv_transpose_out_shape(&x, &w, &win, group, &output_padding).map_err(kernel_arg)
}

#[pyfunction]
#[pyo3(signature = (x, w, bias, out, strides, pads, dilations, group, output_padding, stream=None))]
#[allow(clippy::too_many_arguments)]
fn _conv_transpose(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    w: &Bound<'_, PyAny>,
    bias: Option<&Bound<'_, PyAny>>,
    out: &Bound<'_, PyAny>,
    strides: Option<Vec<usize>>,
    pads: Option<Vec<usize>>,
    dilations: Option<Vec<usize>>,
    group: usize,
    output_padding: Vec<usize>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (x, w, out) = (&arr(x, "x")?.get().a, &arr(w, "w")?.get().a, &arr(out, "out")?.get().a);
    let b = opt_arr(bias, "bias")?;
    let mut inputs = vec![x, w];
    inputs.extend(b.as_ref());
    let k = x.tensor().ndim().saturating_sub(2);
    let kernel = w.tensor().shape().get(2..).unwrap_or(&[]).to_vec();
    let win = Window::new(
        "conv_transpose",
        k,
        &kernel,
        strides.as_deref(),
        pads.as_deref(),
        dilations.as_deref(),
    )
    .map_err(kernel_arg)?;
    run(py, stream, &inputs, out, |c| {
        nn::conv_transpose(
            x.tensor(),
            w.tensor(),
            b.as_ref().map(|b| b.tensor()),
            out.tensor(),
            &win,
            group,
            &output_padding,
            c,
        )
    })
}

#[pyfunction]
#[pyo3(signature = (kind, x, out, kernel, strides, pads, dilations, ceil_mode, count_include_pad, stream=None))]
#[allow(clippy::too_many_arguments)]
fn _pool(
    py: Python<'_>,
    kind: &str,
    x: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    kernel: Vec<usize>,
    strides: Option<Vec<usize>>,
    pads: Option<Vec<usize>>,
    dilations: Option<Vec<usize>>,
    ceil_mode: bool,
    count_include_pad: bool,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let kind = match kind {
        "max" => PoolKind::Max,
        "avg" => PoolKind::Avg { count_include_pad },
        _ => return Err(value_error(format!("unknown pool kind {kind:?}"))),
    };
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x], out, |c| {
        nn::pool(
            kind,
            x.tensor(),
            out.tensor(),
            &kernel,
            strides.as_deref(),
            pads.as_deref(),
            dilations.as_deref(),
            ceil_mode,
            c,
        )
    })
}

#[pyfunction]
#[pyo3(signature = (x, scale, bias, mean, var, epsilon, out, stream=None))]
#[allow(clippy::too_many_arguments)]
fn _batch_norm(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    scale: &Bound<'_, PyAny>,
    bias: &Bound<'_, PyAny>,
    mean: &Bound<'_, PyAny>,
    var: &Bound<'_, PyAny>,
    epsilon: f64,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    let (s, b) = (&arr(scale, "scale")?.get().a, &arr(bias, "bias")?.get().a);
    let (m, v) = (&arr(mean, "mean")?.get().a, &arr(var, "var")?.get().a);
    run(py, stream, &[x, s, b, m, v], out, |c| {
        nn::batch_norm(
            x.tensor(),
            [s.tensor(), b.tensor(), m.tensor(), v.tensor()],
            epsilon,
            out.tensor(),
            c,
        )
    })
}

#[pyfunction]
#[pyo3(signature = (x, size, alpha, beta, bias, out, stream=None))]
#[allow(clippy::too_many_arguments)]
fn _lrn(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    size: usize,
    alpha: f64,
    beta: f64,
    bias: f64,
    out: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x], out, |c| {
        nn::lrn(x.tensor(), size, alpha, beta, bias, out.tensor(), c)
    })
}

#[pyfunction]
#[pyo3(signature = (x, out, mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a, exclude_outside, scales=None, stream=None))]
#[allow(clippy::too_many_arguments)]
fn _resize(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    mode: &str,
    coordinate_transformation_mode: &str,
    nearest_mode: &str,
    cubic_coeff_a: f64,
    exclude_outside: bool,
    scales: Option<Vec<f64>>,
    stream: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let mode = match mode {
        "nearest" => ResizeMode::Nearest,
        "linear" => ResizeMode::Linear,
        "cubic" => ResizeMode::Cubic,
        _ => return Err(value_error(format!("resize: unknown mode {mode:?}"))),
    };
    let coord = CoordMode::from_name(coordinate_transformation_mode).ok_or_else(|| {
        value_error(format!(
            "resize: unsupported coordinate_transformation_mode {coordinate_transformation_mode:?}"
        ))
    })?;
    let nearest = NearestMode::from_name(nearest_mode)
        .ok_or_else(|| value_error(format!("resize: unknown nearest_mode {nearest_mode:?}")))?;
    let args = ResizeArgs {
        mode,
        coord,
        nearest,
        cubic_a: cubic_coeff_a,
        exclude_outside,
        scales,
    };
    let (x, out) = (&arr(x, "x")?.get().a, &arr(out, "out")?.get().a);
    run(py, stream, &[x], out, |c| {
        nn::resize(x.tensor(), out.tensor(), &args, c)
    })
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for f in [
        wrap_pyfunction!(_window_out_shape, m)?,
        wrap_pyfunction!(_auto_pads, m)?,
        wrap_pyfunction!(_conv, m)?,
        wrap_pyfunction!(_conv_transpose_shape, m)?,
        wrap_pyfunction!(_conv_transpose, m)?,
        wrap_pyfunction!(_pool, m)?,
        wrap_pyfunction!(_batch_norm, m)?,
        wrap_pyfunction!(_lrn, m)?,
        wrap_pyfunction!(_resize, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
