//! Data movement: permute/transpose (tiled when it is a (batched) 2-D transpose), concat
//! and slice. All are copies between views, so they also materialise any strided view.

use crate::elementwise::{cast_impl, split_aligned};
use crate::layout::{by_size, copy_run, Strided};
use crate::plan::{blocks_for, GRAIN_ELEMENTWISE};
use crate::tensor::{check_dtype, check_out_shape, check_output, normalize_axis};
use crate::{KernelArgError, Launch, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::sync::Arc;

/// Side of the square tiles of the transpose kernel.
const TILE: usize = 32;

/// `out = x.permute(axes)` materialised (numpy's `transpose(x, axes)` + copy). `out` must
/// have the permuted shape and x's dtype, and must not overlap `x`.
pub fn permute(x: &TensorView, axes: &[usize], out: &TensorView, cores: u32) -> Result<Launch, KernelArgError> {
    check_dtype("permute", "x", x, out.dtype())?;
    let v = x.permute(axes)?;
    check_out_shape("permute", out, v.shape())?;
    check_output("permute", out, &[("x", &v)], false)?;
    if let Some(l) = TransposeKernel::plan(&v, out, cores) {
        return Ok(l);
    }
    cast_impl("permute", &v, out, cores)
}

/// `out = x.T` for a 2-D `x` (tiled, so both sides stream through the cache).
pub fn transpose2d(x: &TensorView, out: &TensorView, cores: u32) -> Result<Launch, KernelArgError> {
    if x.ndim() != 2 {
        return Err(KernelArgError::Rank {
            op: "transpose",
            what: "x",
            expected: "2",
            got: x.ndim(),
        });
    }
    permute(x, &[1, 0], out, cores)
}

/// `out = x[s0, s1, ...]` materialised, one `(start, count, step)` per leading axis
/// (numpy's `x[a:b:s]` after `slice.indices`; negative steps allowed; missing axes are
/// taken whole). For more (indexing, reshapes), derive a view and [`crate::copy`] it.
pub fn slice(
    x: &TensorView,
    ranges: &[(usize, usize, isize)],
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    check_dtype("slice", "x", x, out.dtype())?;
    if ranges.len() > x.ndim() {
        return Err(KernelArgError::Invalid {
            op: "slice",
            detail: format!("{} ranges for a tensor of {} dimension(s)", ranges.len(), x.ndim()),
        });
    }
    let mut v = x.clone();
    for (ax, &(start, count, step)) in ranges.iter().enumerate() {
        v = v.slice_axis(ax as isize, start, count, step)?;
    }
    check_out_shape("slice", out, v.shape())?;
    check_output("slice", out, &[("x", &v)], false)?;
    cast_impl("slice", &v, out, cores)
}

/// `out = concatenate(xs, axis)`: all of `out`'s dtype and rank, equal sizes except along
/// `axis`; `out` must not overlap any input.
pub fn concat(xs: &[TensorView], axis: isize, out: &TensorView, cores: u32) -> Result<Launch, KernelArgError> {
    let op = "concatenate";
    let Some(first) = xs.first() else {
        return Err(KernelArgError::Invalid {
            op,
            detail: "need at least one array to concatenate".into(),
        });
    };
    let ax = normalize_axis(op, axis, first.ndim())?;
    let mut expected = first.shape().to_vec();
    expected[ax] = 0;
    for (i, x) in xs.iter().enumerate() {
        check_dtype(op, "input", x, out.dtype())?;
        let same = x.ndim() == first.ndim() && (0..x.ndim()).all(|d| d == ax || x.shape()[d] == first.shape()[d]);
        if !same {
            return Err(KernelArgError::ShapeMismatch {
                op,
                detail: format!(
                    "input {i} has shape {:?}, input 0 has {:?} (must match except on axis {ax})",
                    x.shape(),
                    first.shape()
                ),
            });
        }
        expected[ax] += x.shape()[ax];
    }
    check_out_shape(op, out, &expected)?;
    let inputs: Vec<(&'static str, &TensorView)> = xs.iter().map(|x| ("an input", x)).collect();
    check_output(op, out, &inputs, false)?;
    let mut parts = Vec::with_capacity(xs.len());
    let mut at = 0usize;
    let mut starts = Vec::with_capacity(xs.len() + 1);
    let mut total = 0usize;
    for x in xs {
        let n = x.shape()[ax];
        let dst = out.slice_axis(ax as isize, at.min(out.shape()[ax].saturating_sub(1)), n, 1)?;
        at += n;
        let it = Strided::new(x.shape(), [dst.strides(), x.strides()]);
        starts.push(total);
        total += it.numel();
        parts.push((x.clone(), dst, it));
    }
    starts.push(total);
    let blocks = blocks_for(total, GRAIN_ELEMENTWISE, cores);
    Ok((
        Arc::new(ConcatKernel {
            parts,
            starts,
            out: out.clone(),
        }),
        blocks,
    ))
}

/// Copies of several (src, dst) pairs; the flat work space is their concatenation.
struct ConcatKernel {
    parts: Vec<(TensorView, TensorView, Strided<2>)>,
    starts: Vec<usize>,
    out: TensorView,
}

impl ConcatKernel {
    fn run<T: Copy>(&self, s: usize, e: usize) {
        for (i, (x, dst, it)) in self.parts.iter().enumerate() {
            let (ps, pe) = (self.starts[i], self.starts[i + 1]);
            let (a, b) = (s.max(ps), e.min(pe));
            if a >= b {
                continue;
            }
            let [so, sx] = it.inner_strides();
            let (po, px) = (dst.ptr::<T>(), x.ptr::<T>() as *const T);
            it.for_each_run(a - ps, b - ps, |off, n| {
                // SAFETY: the views' contract; `dst` is a sub-view of `out`, which overlaps no
                // input (check_output); parts write disjoint slices of `out`, blocks disjoint
                // ranges of each part.
                unsafe { copy_run(po.wrapping_offset(off[0]), so, px.wrapping_offset(off[1]), sx, n) }
            });
        }
    }
}

impl Kernel for ConcatKernel {
    fn name(&self) -> &str {
        "concatenate"
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let total = *self.starts.last().unwrap_or(&0);
        let (s, e) = split_aligned(blk, total, 16);
        if s < e {
            by_size!(self.out.dtype().itemsize(), T => self.run::<T>(s, e));
        }
        Ok(())
    }
}

/// The tiled transpose kernel for `out = x` (same shape and dtype, checked by the caller)
/// when the pair is a (batched) 2-D transpose, else `None`.
pub(crate) fn transpose_plan(x: &TensorView, out: &TensorView, cores: u32) -> Option<Launch> {
    TransposeKernel::plan(x, out, cores)
}

/// A (batched) 2-D transpose: collapsed dims `[B,] R, C` where `out` is contiguous along
/// C and `x` along R. Units of work are (batch, panel of TILE rows).
struct TransposeKernel {
    x: TensorView,
    out: TensorView,
    /// (batch, rows, cols)
    dims: [usize; 3],
    /// out strides (batch, row); col stride 1
    os: [isize; 2],
    /// x strides (batch, col); row stride 1
    xs: [isize; 2],
}

impl TransposeKernel {
    fn plan(x: &TensorView, out: &TensorView, cores: u32) -> Option<Launch> {
        let it = Strided::new(out.shape(), [out.strides(), x.strides()]);
        let (shape, st) = it.dims();
        let nd = shape.len();
        if !(2..=3).contains(&nd) || st[nd - 1][0] != 1 || st[nd - 2][1] != 1 || it.numel() < 4 * TILE {
            return None;
        }
        let (b, bs) = if nd == 3 { (shape[0], st[0]) } else { (1, [0, 0]) };
        let k = TransposeKernel {
            x: x.clone(),
            out: out.clone(),
            dims: [b, shape[nd - 2], shape[nd - 1]],
            os: [bs[0], st[nd - 2][0]],
            xs: [bs[1], st[nd - 1][1]],
        };
        let blocks = blocks_for(it.numel(), GRAIN_ELEMENTWISE, cores);
        Some((Arc::new(k), blocks))
    }

    fn run<T: Copy>(&self, s: usize, e: usize) {
        let [_, rows, cols] = self.dims;
        let panels = rows.div_ceil(TILE);
        let (po, px) = (self.out.ptr::<T>(), self.x.ptr::<T>() as *const T);
        for u in s..e {
            let (bi, p) = (u / panels, u % panels);
            let (r0, r1) = (p * TILE, ((p + 1) * TILE).min(rows));
            let ob = po.wrapping_offset(bi as isize * self.os[0]);
            let xb = px.wrapping_offset(bi as isize * self.xs[0]);
            for c0 in (0..cols).step_by(TILE) {
                let c1 = (c0 + TILE).min(cols);
                for c in c0..c1 {
                    let xc = xb.wrapping_offset(c as isize * self.xs[1]);
                    for r in r0..r1 {
                        // SAFETY: (bi, r, c) is within the collapsed shape, so both
                        // elements are addressed by the views (contract); out overlaps no
                        // input (check_output); units are disjoint row panels.
                        unsafe {
                            ob.wrapping_offset(r as isize * self.os[1] + c as isize)
                                .write(xc.wrapping_add(r).read())
                        }
                    }
                }
            }
        }
    }
}

impl Kernel for TransposeKernel {
    fn name(&self) -> &str {
        "transpose"
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let units = self.dims[0] * self.dims[1].div_ceil(TILE);
        let (s, e) = blk.split(units);
        if s < e {
            by_size!(self.out.dtype().itemsize(), T => self.run::<T>(s, e));
        }
        Ok(())
    }
}
