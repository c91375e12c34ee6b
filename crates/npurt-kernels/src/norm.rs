//! Row-wise kernels: softmax and log_softmax along an axis, layer_norm and rms_norm over
//! the last axis. Blocks own whole rows; each row is computed in f32 in a fixed order
//! (8-lane reductions merged by a fixed tree), so results do not depend on the block count.
//!
//! A row that is contiguous f32 in both `x` and `out` is computed straight from `x` into
//! `out` (or in place); any other row is gathered into an f32 buffer, computed, and
//! scattered back (converted to f16/bf16 once).

use crate::isa::{isa_call, Family};
use crate::layout::Strided;
use crate::plan::{blocks_for, GRAIN_TRANSCENDENTAL};
use crate::tensor::{check_dtype, check_out_shape, check_output, normalize_axis};
use crate::{dispatch_float, math, DType, Elem, KernelArgError, Launch, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::sync::Arc;

const LANES: usize = 8;

#[inline(always)]
fn tree(a: [f32; LANES], f: impl Fn(f32, f32) -> f32) -> f32 {
    f(f(f(a[0], a[1]), f(a[2], a[3])), f(f(a[4], a[5]), f(a[6], a[7])))
}

/// Lane-wise fold of `xs` with `step(acc, x)`, merged by `merge` in a fixed tree.
#[inline(always)]
fn fold8(xs: &[f32], init: f32, step: impl Fn(f32, f32) -> f32, merge: impl Fn(f32, f32) -> f32) -> f32 {
    let mut acc = [init; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder();
    for c in chunks {
        for j in 0..LANES {
            acc[j] = step(acc[j], c[j]);
        }
    }
    for (j, &v) in tail.iter().enumerate() {
        acc[j] = step(acc[j], v);
    }
    tree(acc, merge)
}

/// The row's largest value for the shift `exp(v - m)`, NaNs skipped (`f32::max`: one
/// vector max per chunk; a NaN-propagating compare did not vectorise). The result is the
/// same as with NaNs propagated: a NaN input makes `exp(NaN - m)` NaN, so the row's sum and
/// every output are NaN either way; ±0 ties shift every value alike (`v - 0` = `v - -0`).
#[inline(always)]
fn row_max(xs: &[f32]) -> f32 {
    fold8(xs, f32::NEG_INFINITY, f32::max, f32::max)
}

/// `y[i] = f(src[i])`, where the source is `x`, or `y` itself when `x` is `None`.
#[inline(always)]
fn map_row(x: Option<&[f32]>, y: &mut [f32], f: impl Fn(f32) -> f32) {
    match x {
        Some(x) => {
            for (o, &v) in y.iter_mut().zip(x) {
                *o = f(v);
            }
        }
        None => {
            for o in y.iter_mut() {
                *o = f(*o);
            }
        }
    }
}

/// `y = y * w + b` (each optional), elementwise.
#[inline(always)]
fn scale_shift(y: &mut [f32], w: Option<&[f32]>, b: Option<&[f32]>) {
    if let Some(w) = w {
        for (v, &w) in y.iter_mut().zip(w) {
            *v *= w;
        }
    }
    if let Some(b) = b {
        for (v, &b) in y.iter_mut().zip(b) {
            *v += b;
        }
    }
}

#[inline(always)]
fn sum(a: f32, b: f32) -> f32 {
    a + b
}

// Row functions: the source row is `x`, or `y` itself (in place) when `x` is `None`.

#[inline(always)]
fn softmax_row(x: Option<&[f32]>, y: &mut [f32]) {
    let m = row_max(x.unwrap_or(y));
    map_row(x, y, |v| math::exp(v - m));
    let inv = 1.0 / fold8(y, 0.0, sum, sum);
    map_row(None, y, |v| v * inv);
}

#[inline(always)]
fn log_softmax_row(x: Option<&[f32]>, y: &mut [f32]) {
    let src = x.unwrap_or(y);
    let m = row_max(src);
    let ls = fold8(src, 0.0, |a, v| a + math::exp(v - m), sum).ln();
    map_row(x, y, |v| (v - m) - ls);
}

#[inline(always)]
fn layer_norm_row(x: Option<&[f32]>, y: &mut [f32], w: Option<&[f32]>, b: Option<&[f32]>, eps: f32) {
    let src = x.unwrap_or(y);
    let n = src.len() as f32;
    let mean = fold8(src, 0.0, sum, sum) / n;
    let var = fold8(src, 0.0, |a, v| a + (v - mean) * (v - mean), sum) / n;
    let rstd = 1.0 / (var + eps).sqrt();
    match (x, w, b) {
        // The usual case in one pass: the same operations in the same order as the three
        // passes below (normalise, scale, shift), so the same bits.
        (Some(x), Some(w), Some(b)) => {
            for (((o, &v), &w), &b) in y.iter_mut().zip(x).zip(w).zip(b) {
                *o = (v - mean) * rstd * w + b;
            }
        }
        _ => {
            map_row(x, y, |v| (v - mean) * rstd);
            scale_shift(y, w, b);
        }
    }
}

#[inline(always)]
fn rms_norm_row(x: Option<&[f32]>, y: &mut [f32], w: Option<&[f32]>, eps: f32) {
    let src = x.unwrap_or(y);
    let ms = fold8(src, 0.0, |a, v| a + v * v, sum) / src.len() as f32;
    let r = 1.0 / (ms + eps).sqrt();
    map_row(x, y, |v| v * r);
    scale_shift(y, w, None);
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum RowOp {
    Softmax,
    LogSoftmax,
    LayerNorm { eps: f32 },
    RmsNorm { eps: f32 },
}

impl RowOp {
    fn name(self) -> &'static str {
        match self {
            RowOp::Softmax => "softmax",
            RowOp::LogSoftmax => "log_softmax",
            RowOp::LayerNorm { .. } => "layer_norm",
            RowOp::RmsNorm { .. } => "rms_norm",
        }
    }
}

struct RowKernel {
    op: RowOp,
    x: TensorView,
    out: TensorView,
    weight: Option<TensorView>,
    bias: Option<TensorView>,
    /// Rows: [out strides, x strides] over the shape without the axis.
    rows: Strided<2>,
    len: usize,
    /// Strides along the axis: (out, x).
    axis_strides: (isize, isize),
}

fn float_only(op: &'static str, x: &TensorView) -> Result<(), KernelArgError> {
    if !x.dtype().is_float() {
        return Err(KernelArgError::UnsupportedDType {
            op,
            dtype: x.dtype(),
            hint: " (cast to a float dtype first)",
        });
    }
    Ok(())
}

fn row_kernel(
    op: RowOp,
    x: &TensorView,
    axis: usize,
    weight: Option<&TensorView>,
    bias: Option<&TensorView>,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let shape: Vec<usize> = (0..x.ndim()).filter(|&d| d != axis).map(|d| x.shape()[d]).collect();
    let os: Vec<isize> = (0..x.ndim()).filter(|&d| d != axis).map(|d| out.strides()[d]).collect();
    let xs: Vec<isize> = (0..x.ndim()).filter(|&d| d != axis).map(|d| x.strides()[d]).collect();
    let rows = Strided::new(&shape, [os.as_slice(), xs.as_slice()]);
    let len = x.shape()[axis];
    let blocks = blocks_for(rows.numel().saturating_mul(len.max(1)), GRAIN_TRANSCENDENTAL, cores)
        .min(rows.numel().max(1) as u32);
    let k = RowKernel {
        op,
        x: x.clone(),
        out: out.clone(),
        weight: weight.cloned(),
        bias: bias.cloned(),
        rows,
        len,
        axis_strides: (out.strides()[axis], x.strides()[axis]),
    };
    Ok((Arc::new(k), blocks))
}

/// `out = softmax(x, axis)` = exp(x - max) / Σ exp(x - max) along `axis`; float dtypes;
/// `out` has x's shape and dtype and may be `x` itself.
pub fn softmax(x: &TensorView, axis: isize, out: &TensorView, cores: u32) -> Result<Launch, KernelArgError> {
    softmax_like(RowOp::Softmax, x, axis, out, cores)
}

/// `out = log_softmax(x, axis)` = (x - max) - log Σ exp(x - max); as [`softmax`].
pub fn log_softmax(x: &TensorView, axis: isize, out: &TensorView, cores: u32) -> Result<Launch, KernelArgError> {
    softmax_like(RowOp::LogSoftmax, x, axis, out, cores)
}

fn softmax_like(
    op: RowOp,
    x: &TensorView,
    axis: isize,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let name = op.name();
    float_only(name, x)?;
    check_dtype(name, "out", out, x.dtype())?;
    let ax = normalize_axis(name, axis, x.ndim())?;
    check_out_shape(name, out, x.shape())?;
    check_output(name, out, &[("x", x)], true)?;
    row_kernel(op, x, ax, None, None, out, cores)
}

fn check_param(
    op: &'static str,
    what: &'static str,
    p: Option<&TensorView>,
    x: &TensorView,
) -> Result<(), KernelArgError> {
    let Some(p) = p else { return Ok(()) };
    check_dtype(op, what, p, x.dtype())?;
    let n = *x.shape().last().expect("checked rank");
    if p.shape() != [n] {
        return Err(KernelArgError::ShapeMismatch {
            op,
            detail: format!("{what} has shape {:?}, expected [{n}] (the last axis of x)", p.shape()),
        });
    }
    Ok(())
}

/// The checks shared by layer_norm and rms_norm (over the last axis), then the kernel.
fn norm_kernel(
    op: RowOp,
    x: &TensorView,
    weight: Option<&TensorView>,
    bias: Option<&TensorView>,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let name = op.name();
    float_only(name, x)?;
    if x.ndim() == 0 {
        return Err(KernelArgError::Rank {
            op: name,
            what: "x",
            expected: "at least 1",
            got: 0,
        });
    }
    check_dtype(name, "out", out, x.dtype())?;
    check_param(name, "weight", weight, x)?;
    check_param(name, "bias", bias, x)?;
    check_out_shape(name, out, x.shape())?;
    check_output(name, out, &[("x", x)], true)?;
    let params: Vec<(&'static str, &TensorView)> = [("weight", weight), ("bias", bias)]
        .into_iter()
        .filter_map(|(n, p)| p.map(|p| (n, p)))
        .collect();
    check_output(name, out, &params, false)?;
    row_kernel(op, x, x.ndim() - 1, weight, bias, out, cores)
}

/// `out = (x - mean) / sqrt(var + eps) * weight + bias` over the last axis (biased
/// variance, two-pass, like PyTorch's `layer_norm`); `weight`/`bias` are optional vectors
/// of the last axis' length and x's dtype; `out` may be `x` itself.
pub fn layer_norm(
    x: &TensorView,
    weight: Option<&TensorView>,
    bias: Option<&TensorView>,
    eps: f64,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    norm_kernel(RowOp::LayerNorm { eps: eps as f32 }, x, weight, bias, out, cores)
}

/// `out = x / sqrt(mean(x²) + eps) * weight` over the last axis; as [`layer_norm`].
pub fn rms_norm(
    x: &TensorView,
    weight: Option<&TensorView>,
    eps: f64,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    norm_kernel(RowOp::RmsNorm { eps: eps as f32 }, x, weight, None, out, cores)
}

/// Reads a parameter vector as f32.
fn load_param<T: Elem>(p: &TensorView) -> Vec<f32> {
    let (n, s) = (p.shape()[0], p.strides()[0]);
    let ptr = p.ptr::<T>() as *const T;
    // SAFETY: the n strided elements are addressed by the view (contract); parameters are
    // only read, and do not overlap the output (check_output).
    (0..n)
        .map(|i| unsafe { ptr.wrapping_offset(i as isize * s).read() }.to_f32())
        .collect()
}

impl RowKernel {
    #[inline(always)]
    fn compute(&self, x: Option<&[f32]>, y: &mut [f32], w: Option<&[f32]>, b: Option<&[f32]>) {
        match self.op {
            RowOp::Softmax => softmax_row(x, y),
            RowOp::LogSoftmax => log_softmax_row(x, y),
            RowOp::LayerNorm { eps } => layer_norm_row(x, y, w, b, eps),
            RowOp::RmsNorm { eps } => rms_norm_row(x, y, w, eps),
        }
    }

    /// [`RowKernel::run`] on the ISA path of the op's family (softmax or norm).
    fn run_best<T: Elem>(&self, s: usize, e: usize) {
        let family = match self.op {
            RowOp::Softmax | RowOp::LogSoftmax => Family::Softmax,
            RowOp::LayerNorm { .. } | RowOp::RmsNorm { .. } => Family::Norm,
        };
        isa_call!(crate::isa::path(family), RowKernel, self, run::<T: Elem>(s: usize, e: usize))
    }

    #[inline(always)]
    fn run<T: Elem>(&self, s: usize, e: usize) {
        let w = self.weight.as_ref().map(load_param::<T>);
        let b = self.bias.as_ref().map(load_param::<T>);
        let (w, b) = (w.as_deref(), b.as_deref());
        let n = self.len;
        let (aso, asx) = self.axis_strides;
        let direct = T::DTYPE == DType::F32 && aso == 1 && asx == 1;
        let mut buf = if direct { Vec::new() } else { vec![0f32; n] };
        let (po, px) = (self.out.ptr::<T>(), self.x.ptr::<T>() as *const T);
        let [oi, xi] = self.rows.inner_strides();
        for (off, runs) in self.rows.runs(s, e) {
            for j in 0..runs as isize {
                let (o, x) = (po.wrapping_offset(off[0] + j * oi), px.wrapping_offset(off[1] + j * xi));
                if direct {
                    // SAFETY: T is f32 here; the row's n contiguous elements are addressed
                    // by out and x (contract); out is exactly x or disjoint from it
                    // (check_output); blocks own disjoint rows.
                    let y = unsafe { std::slice::from_raw_parts_mut(o as *mut f32, n) };
                    if std::ptr::eq(o as *const T, x) {
                        self.compute(None, y, w, b);
                    } else {
                        // SAFETY: disjoint from y (see above); only read.
                        let xs = unsafe { std::slice::from_raw_parts(x as *const f32, n) };
                        self.compute(Some(xs), y, w, b);
                    }
                } else {
                    for (i, v) in buf.iter_mut().enumerate() {
                        // SAFETY: element i of the row is addressed by x (contract).
                        *v = unsafe { x.wrapping_offset(i as isize * asx).read() }.to_f32();
                    }
                    self.compute(None, &mut buf, w, b);
                    for (i, &v) in buf.iter().enumerate() {
                        // SAFETY: element i of the row is addressed by out (contract); the
                        // row was read completely before (in-place safe); blocks own rows.
                        unsafe { o.wrapping_offset(i as isize * aso).write(T::from_f32(v)) }
                    }
                }
            }
        }
    }
}

impl Kernel for RowKernel {
    fn name(&self) -> &str {
        self.op.name()
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = blk.split(self.rows.numel());
        if s < e && self.len > 0 {
            dispatch_float!(self.x.dtype(), T => self.run_best::<T>(s, e), _ => unreachable!("checked at launch"));
        }
        Ok(())
    }
}
