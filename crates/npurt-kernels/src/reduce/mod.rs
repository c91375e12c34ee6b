//! Reductions along axes (or all): sum, mean, max, min, argmax.
//!
//! Order (so results are deterministic and independent of the block count): each output
//! element reduces its elements in a fixed order decided by the layout alone. A contiguous
//! run is split into 8 interleaved lanes merged by a fixed tree; otherwise elements are
//! taken in row-major order of the reduced dims (when the reduced axis is strided but the
//! outputs are contiguous in `x`, several outputs advance together in that same order).
//! A long reduction with few outputs is split into chunks of fixed size (shape-determined);
//! each block reduces whole chunks and the block that finishes last merges the chunks in
//! order. Float sums accumulate in f64, integer sums in i64 (wrapping).
//!
//! Files: `mod.rs` (the operations, argument checks, planning), `accum.rs` (one
//! accumulator type per operation family), `kernel.rs` (running the plan).

mod accum;
mod kernel;

use crate::layout::Strided;
use crate::plan::{blocks_for, GRAIN_ELEMENTWISE};
use crate::tensor::{check_output, normalize_axes};
use crate::{DType, KernelArgError, Launch, TensorView};
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::Arc;

/// Reduction operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum; the output may be any non-bool dtype (numpy's `sum(dtype=...)`); accumulates
    /// in f64 for float inputs and i64 for integer/bool inputs.
    Sum,
    /// Mean; float output; NaN for an empty reduction.
    Mean,
    /// Maximum (NaN propagates); output dtype = input dtype; error on an empty reduction.
    Max,
    /// Minimum (NaN propagates); output dtype = input dtype; error on an empty reduction.
    Min,
    /// Index of the first maximum (of the first NaN if any), int64 or int32 output; over
    /// all axes it indexes the row-major flattened tensor. One axis or all.
    Argmax,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Mean,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Argmax,
    ];
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Argmax => "argmax",
        }
    }
}

/// Elements per chunk when a long reduction is split across blocks.
const CHUNK: usize = 1 << 15;
/// Reductions with fewer outputs than this are split into chunks (if long enough).
const SPLIT_BELOW_OUTPUTS: usize = 16;

/// The reduced dims (sorted, unique) for `axes` (`None` = all).
fn reduced_dims(op: &'static str, ndim: usize, axes: Option<&[isize]>) -> Result<Vec<bool>, KernelArgError> {
    let mut red = vec![axes.is_none(); ndim];
    if let Some(axes) = axes {
        for d in normalize_axes(op, axes, ndim)? {
            red[d] = true;
        }
    }
    Ok(red)
}

/// The output shape of reducing `shape` over `axes` (`None` = all), numpy's rules.
pub fn reduce_out_shape(shape: &[usize], axes: Option<&[isize]>, keepdims: bool) -> Result<Vec<usize>, KernelArgError> {
    let red = reduced_dims("reduce", shape.len(), axes)?;
    Ok(shape
        .iter()
        .zip(&red)
        .filter_map(|(&n, &r)| if r { keepdims.then_some(1) } else { Some(n) })
        .collect())
}

/// `out = op(x, axis=axes)`. `axes`: `None` reduces everything; several axes are allowed
/// except for argmax. `out` has the reduced shape, with or without the reduced dims kept
/// as 1 (`keepdims`). Dtypes: see [`ReduceOp`]. `out` must not overlap `x`.
pub fn reduce(
    op: ReduceOp,
    x: &TensorView,
    axes: Option<&[isize]>,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let name = op.name();
    let red = reduced_dims(name, x.ndim(), axes)?;
    if op == ReduceOp::Argmax && axes.is_some_and(|a| a.len() != 1) {
        return Err(KernelArgError::Invalid {
            op: name,
            detail: "argmax takes one axis or None".into(),
        });
    }
    let odt = out.dtype();
    let dt_ok = match op {
        ReduceOp::Sum => odt != DType::Bool,
        ReduceOp::Mean => odt.is_float(),
        ReduceOp::Max | ReduceOp::Min => odt == x.dtype(),
        ReduceOp::Argmax => matches!(odt, DType::I64 | DType::I32),
    };
    if !dt_ok {
        let expected = match op {
            ReduceOp::Max | ReduceOp::Min => x.dtype(),
            ReduceOp::Argmax => DType::I64,
            _ => DType::F32,
        };
        return Err(KernelArgError::DTypeMismatch {
            op: name,
            what: "out",
            expected,
            got: odt,
        });
    }
    let kept: Vec<usize> = (0..x.ndim()).filter(|&d| !red[d]).collect();
    let rdims: Vec<usize> = (0..x.ndim()).filter(|&d| red[d]).collect();
    let short: Vec<usize> = kept.iter().map(|&d| x.shape()[d]).collect();
    let long: Vec<usize> = (0..x.ndim()).map(|d| if red[d] { 1 } else { x.shape()[d] }).collect();
    let out_strides: Vec<isize> = if out.shape() == short.as_slice() {
        out.strides().to_vec()
    } else if out.shape() == long.as_slice() {
        kept.iter().map(|&d| out.strides()[d]).collect()
    } else {
        return Err(KernelArgError::OutputShape {
            op: name,
            expected: short,
            got: out.shape().to_vec(),
        });
    };
    let len: usize = rdims.iter().map(|&d| x.shape()[d]).product();
    if len == 0 && matches!(op, ReduceOp::Max | ReduceOp::Min | ReduceOp::Argmax) {
        return Err(KernelArgError::EmptyReduction { op: name });
    }
    check_output(name, out, &[("x", x)], false)?;
    let x_kept: Vec<isize> = kept.iter().map(|&d| x.strides()[d]).collect();
    let outer = Strided::new(&short, [out_strides.as_slice(), x_kept.as_slice()]);
    let rshape: Vec<usize> = rdims.iter().map(|&d| x.shape()[d]).collect();
    let rstrides: Vec<isize> = rdims.iter().map(|&d| x.strides()[d]).collect();
    let inner = Strided::new(&rshape, [rstrides.as_slice()]);
    let outputs = outer.numel();
    let nchunks = if outputs < SPLIT_BELOW_OUTPUTS && len >= 2 * CHUNK {
        len.div_ceil(CHUNK)
    } else {
        1
    };
    let units = outputs * nchunks;
    let blocks = blocks_for(outputs.saturating_mul(len.max(1)), GRAIN_ELEMENTWISE, cores).min(units.max(1) as u32);
    let k = ReduceKernel {
        op,
        x: x.clone(),
        out: out.clone(),
        outer,
        inner,
        len,
        nchunks,
        partials: (0..if nchunks > 1 { units } else { 0 })
            .map(|_| Default::default())
            .collect(),
        done: AtomicU32::new(0),
    };
    Ok((Arc::new(k), blocks))
}

pub(super) struct ReduceKernel {
    pub(super) op: ReduceOp,
    pub(super) x: TensorView,
    pub(super) out: TensorView,
    /// Output index space: [out strides, x strides].
    pub(super) outer: Strided<2>,
    /// Reduced dims: x strides.
    pub(super) inner: Strided<1>,
    pub(super) len: usize,
    pub(super) nchunks: usize,
    /// Per (output, chunk) packed accumulators when split (see `Red::pack`).
    pub(super) partials: Vec<[AtomicU64; 2]>,
    /// Blocks of the current launch that finished (split mode).
    pub(super) done: AtomicU32,
}
