//! `pad` (ONNX `Pad`: constant, reflect, edge, wrap; negative pads crop first, then the
//! rest pads the crop) and `tile`
//! (ONNX `Tile`, a copy from a broadcast view).
//!
//! Pad's blocks take ranges of output rows (the last dim); each row maps its leading
//! indices to an input row once (or is constant) and its last dim element by element.

use crate::elementwise::cast_impl;
use crate::plan::{blocks_for, GRAIN_ELEMENTWISE};
use crate::tensor::{check_dtype, check_out_shape, check_output};
use crate::{dispatch_dtype, Elem, KernelArgError, Launch, Scalar, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use smallvec::SmallVec;
use std::sync::Arc;

/// How `pad` fills the border.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadMode {
    Constant,
    /// Mirror without repeating the edge (numpy's `reflect`).
    Reflect,
    /// Repeat the edge element.
    Edge,
    /// Wrap around (numpy's `wrap`).
    Wrap,
}

impl PadMode {
    pub fn from_name(name: &str) -> Option<PadMode> {
        Some(match name {
            "constant" => PadMode::Constant,
            "reflect" => PadMode::Reflect,
            "edge" => PadMode::Edge,
            "wrap" => PadMode::Wrap,
            _ => return None,
        })
    }

    /// The input index for `i` on an axis of `n` elements (`None`: constant).
    #[inline]
    fn map(self, i: isize, n: isize) -> Option<isize> {
        if (0..n).contains(&i) {
            return Some(i);
        }
        match self {
            PadMode::Constant => None,
            PadMode::Edge => Some(i.clamp(0, n - 1)),
            PadMode::Wrap => Some(i.rem_euclid(n)),
            PadMode::Reflect if n == 1 => Some(0),
            PadMode::Reflect => {
                let period = 2 * (n - 1);
                let r = i.abs() % period;
                Some(if r >= n { period - r } else { r })
            }
        }
    }
}

/// `out = pad(x, pads)` with ONNX's `pads = [b1..bn, e1..en]` (negative values crop);
/// `value` fills in constant mode (it must be representable in x's dtype). `out` has
/// x's dtype and shape `x.shape[d] + b_d + e_d`, and must not overlap `x`.
pub fn pad(
    x: &TensorView,
    pads: &[isize],
    mode: PadMode,
    value: Scalar,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let op = "pad";
    let nd = x.ndim();
    check_dtype(op, "x", x, out.dtype())?;
    if pads.len() != 2 * nd {
        return Err(KernelArgError::Invalid {
            op,
            detail: format!("pads has {} entries, expected {} (2 per axis)", pads.len(), 2 * nd),
        });
    }
    let mut shape = Vec::with_capacity(nd);
    for d in 0..nd {
        let n = x.shape()[d] as isize + pads[d] + pads[nd + d];
        if n < 0 {
            return Err(KernelArgError::Invalid {
                op,
                detail: format!("pads {pads:?} crop axis {d} of size {} below zero", x.shape()[d]),
            });
        }
        if mode != PadMode::Constant && x.shape()[d] == 0 && n > 0 {
            return Err(KernelArgError::Invalid {
                op,
                detail: format!("cannot {mode:?}-pad the empty axis {d}"),
            });
        }
        shape.push(n as usize);
    }
    check_out_shape(op, out, &shape)?;
    check_output(op, out, &[("x", x)], false)?;
    value.check_for(op, out.dtype())?;
    // Negative pads crop first (a view), then the non-negative rest pads the crop.
    let mut xc = x.clone();
    let mut pos = pads.to_vec();
    for d in 0..nd {
        let (b, e) = (pads[d].min(0).unsigned_abs(), pads[nd + d].min(0).unsigned_abs());
        if b + e > 0 {
            let n = x.shape()[d].saturating_sub(b + e);
            xc = xc.slice_axis(d as isize, if n == 0 { 0 } else { b }, n, 1)?;
            if n == 0 && mode != PadMode::Constant && shape[d] > 0 {
                return Err(KernelArgError::Invalid {
                    op,
                    detail: format!("cannot {mode:?}-pad axis {d}: the pads crop it to nothing"),
                });
            }
        }
        pos[d] = pads[d].max(0);
        pos[nd + d] = pads[nd + d].max(0);
    }
    let blocks = blocks_for(out.numel(), GRAIN_ELEMENTWISE, cores);
    Ok((
        Arc::new(PadKernel {
            x: xc,
            out: out.clone(),
            pads: pos,
            mode,
            value,
        }),
        blocks,
    ))
}

struct PadKernel {
    x: TensorView,
    out: TensorView,
    pads: Vec<isize>,
    mode: PadMode,
    value: Scalar,
}

impl PadKernel {
    fn rows(&self) -> (usize, usize) {
        let nd = self.out.ndim();
        let w = if nd == 0 { 1 } else { self.out.shape()[nd - 1] };
        (self.out.numel().checked_div(w).unwrap_or(0), w)
    }

    fn run<T: Elem>(&self, s: usize, e: usize) {
        let nd = self.out.ndim();
        let (xs, os, xsh) = (self.x.strides(), self.out.strides(), self.x.shape());
        let (_, w) = self.rows();
        let fillv = self.value.to_elem::<T>();
        let mut idx: SmallVec<[usize; 6]> = SmallVec::from_elem(0, nd.saturating_sub(1));
        let (px, po) = (self.x.ptr::<T>() as *const T, self.out.ptr::<T>());
        for r in s..e {
            super::unravel(r, &self.out.shape()[..nd.saturating_sub(1)], &mut idx);
            let mut ooff = 0isize;
            let mut xoff = Some(0isize);
            for d in 0..idx.len() {
                ooff += idx[d] as isize * os[d];
                let i = self.mode.map(idx[d] as isize - self.pads[d], xsh[d] as isize);
                xoff = xoff.and_then(|o| i.map(|i| o + i * xs[d]));
            }
            for j in 0..w {
                let v = match (nd, xoff) {
                    (0, Some(_)) => Some(0isize),
                    (_, Some(o)) => self
                        .mode
                        .map(j as isize - self.pads[nd - 1], xsh[nd - 1] as isize)
                        .map(|i| o + i * xs[nd - 1]),
                    _ => None,
                };
                let val = match v {
                    // SAFETY: every mapped index is inside x's shape (PadMode::map), so the
                    // element is addressed by x (contract); only read.
                    Some(o) => unsafe { px.wrapping_offset(o).read() },
                    None => fillv,
                };
                let oj = if nd == 0 { 0 } else { j as isize * os[nd - 1] };
                // SAFETY: (idx, j) is inside out's shape; out overlaps no input
                // (check_output); blocks own disjoint rows.
                unsafe { po.wrapping_offset(ooff + oj).write(val) }
            }
        }
    }
}

impl Kernel for PadKernel {
    fn name(&self) -> &str {
        "pad"
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = blk.split(self.rows().0);
        if s < e {
            dispatch_dtype!(self.out.dtype(), T => self.run::<T>(s, e));
        }
        Ok(())
    }
}

/// `out = tile(x, reps)` (numpy's `tile` with one repetition per axis): out has shape
/// `x.shape[d]·reps[d]`, x's dtype, and must be contiguous (reshapeable without a copy)
/// and not overlap `x`.
pub fn tile(x: &TensorView, reps: &[usize], out: &TensorView, cores: u32) -> Result<Launch, KernelArgError> {
    let op = "tile";
    check_dtype(op, "x", x, out.dtype())?;
    let nd = x.ndim();
    if reps.len() != nd {
        return Err(KernelArgError::Invalid {
            op,
            detail: format!("reps has {} entries for a tensor of {nd} dimension(s)", reps.len()),
        });
    }
    let shape: Vec<usize> = (0..nd).map(|d| x.shape()[d] * reps[d]).collect();
    check_out_shape(op, out, &shape)?;
    check_output(op, out, &[("x", x)], false)?;
    let mut inter = Vec::with_capacity(2 * nd);
    let mut ones = Vec::with_capacity(2 * nd);
    for (&r, &n) in reps.iter().zip(x.shape()) {
        inter.extend([r, n]);
        ones.extend([1, n]);
    }
    let xv = x.reshape(&ones)?.broadcast_to(&inter)?;
    let ov = super::conv::flat(op, out, &inter)?;
    cast_impl(op, &xv, &ov, cores)
}
