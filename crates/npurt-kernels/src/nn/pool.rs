//! Max and average pooling (ONNX `MaxPool`, `AveragePool`) over any number of spatial dims,
//! with pads, strides, dilations and `ceil_mode`.
//!
//! Blocks take contiguous ranges of output elements (row-major); each element is one pass
//! over the part of its window inside the input, in a fixed order. The average divides by
//! the number of window positions inside the input, or with `count_include_pad` inside the
//! padded input (positions past the end padding in `ceil_mode` never count: PyTorch's and
//! onnx.reference's rule).

use super::pool2d::{self, Axis};
use super::{check_f32, spatial_rank, unravel, Window};
use crate::elementwise::split_aligned;
use crate::plan::blocks_for;
use crate::tensor::{check_out_shape, check_output};
use crate::{KernelArgError, Launch, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use smallvec::SmallVec;
use std::sync::Arc;

type Idx = SmallVec<[usize; 4]>;

/// What a pooling window computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    Avg { count_include_pad: bool },
}

/// `out = pool(x)`: `x` `[N, C, D1..Dk]` float32, `out` `[N, C, O1..Ok]` (see
/// [`Window::out_shape`] with `ceil_mode`); any strides; `out` must not overlap `x`.
#[allow(clippy::too_many_arguments)]
pub fn pool(
    kind: PoolKind,
    x: &TensorView,
    out: &TensorView,
    kernel: &[usize],
    strides: Option<&[usize]>,
    pads: Option<&[usize]>,
    dilations: Option<&[usize]>,
    ceil_mode: bool,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let op = match kind {
        PoolKind::Max => "max_pool",
        PoolKind::Avg { .. } => "avg_pool",
    };
    check_f32(op, x)?;
    check_f32(op, out)?;
    let k = spatial_rank(op, "x", x.ndim())?;
    let win = Window::new(op, k, kernel, strides, pads, dilations)?;
    let out_sp = win.out_shape(op, &x.shape()[2..], ceil_mode)?;
    let mut expected = x.shape()[..2].to_vec();
    expected.extend(&out_sp);
    check_out_shape(op, out, &expected)?;
    check_output(op, out, &[("x", x)], false)?;
    let work = out.numel().saturating_mul(win.kernel.iter().product::<usize>().max(1));
    let blocks = blocks_for(work, 1 << 16, cores);
    let fast = (k == 2).then(|| {
        [
            Axis::new(&win, 0, x.shape()[2], out_sp[0]),
            Axis::new(&win, 1, x.shape()[3], out_sp[1]),
        ]
    });
    Ok((
        Arc::new(PoolKernel {
            op,
            kind,
            x: x.clone(),
            out: out.clone(),
            win,
            fast,
        }),
        blocks,
    ))
}

struct PoolKernel {
    op: &'static str,
    kind: PoolKind,
    x: TensorView,
    out: TensorView,
    win: Window,
    /// 2-D pooling: the window tables of the fast path (`pool2d.rs`).
    fast: Option<[Axis; 2]>,
}

impl PoolKernel {
    /// One output element: plane `(n, c)`, output position `o`.
    fn element(&self, n: usize, c: usize, o: &[usize], lo: &mut Idx, hi: &mut Idx, kidx: &mut Idx) -> f32 {
        let k = self.win.rank();
        let (xs, in_sp) = (self.x.strides(), &self.x.shape()[2..]);
        let mut padded = 1usize;
        for d in 0..k {
            let (s, dil, pb) = (self.win.strides[d], self.win.dilations[d], self.win.pads[d] as isize);
            let pe = self.win.pads[k + d] as isize;
            let start = (o[d] * s) as isize - pb; // input coordinate of window position 0
            let n_in = in_sp[d] as isize;
            let count = |lo_c: isize, hi_c: isize| {
                // Window positions j (0..kernel) with lo_c <= start + j·dil < hi_c.
                let mut cnt = 0usize;
                let (mut first, mut last) = (usize::MAX, 0usize);
                for j in 0..self.win.kernel[d] {
                    let i = start + (j * dil) as isize;
                    if i >= lo_c && i < hi_c {
                        cnt += 1;
                        first = first.min(j);
                        last = j + 1;
                    }
                }
                (cnt, first, last)
            };
            let (_, f, l) = count(0, n_in);
            if f == usize::MAX {
                return match self.kind {
                    PoolKind::Max => f32::NEG_INFINITY,
                    PoolKind::Avg { .. } => f32::NAN,
                };
            }
            lo[d] = f;
            hi[d] = l;
            if let PoolKind::Avg {
                count_include_pad: true,
            } = self.kind
            {
                padded *= count(-pb, n_in + pe).0;
            }
        }
        let base = (self.x.ptr::<f32>() as *const f32).wrapping_offset(n as isize * xs[0] + c as isize * xs[1]);
        kidx.copy_from_slice(lo);
        let (mut acc, mut cnt) = match self.kind {
            PoolKind::Max => (f32::NEG_INFINITY, 0usize),
            PoolKind::Avg { .. } => (0.0f32, 0usize),
        };
        loop {
            let mut off = 0isize;
            for d in 0..k {
                let i =
                    (o[d] * self.win.strides[d] + kidx[d] * self.win.dilations[d]) as isize - self.win.pads[d] as isize;
                off += i * xs[2 + d];
            }
            // SAFETY: every kidx[d] lies in [lo[d], hi[d]), whose positions map inside the
            // input along d (computed above), so the element is addressed by the x view
            // (contract); x is only read.
            let v = unsafe { base.wrapping_offset(off).read() };
            match self.kind {
                PoolKind::Max => {
                    if v > acc || v.is_nan() {
                        acc = v;
                    }
                }
                PoolKind::Avg { .. } => {
                    acc += v;
                    cnt += 1;
                }
            }
            // Next index of the odometer (dilated positions inside [lo, hi) only).
            let mut d = k;
            loop {
                if d == 0 {
                    return match self.kind {
                        PoolKind::Max => acc,
                        PoolKind::Avg {
                            count_include_pad: true,
                        } => acc / padded as f32,
                        PoolKind::Avg { .. } => acc / cnt as f32,
                    };
                }
                d -= 1;
                kidx[d] += 1;
                if kidx[d] < hi[d] {
                    break;
                }
                kidx[d] = lo[d];
            }
        }
    }

    fn run(&self, s: usize, e: usize) {
        let k = self.win.rank();
        let shape = self.out.shape();
        let mut idx: Idx = SmallVec::from_elem(0, k + 2);
        let (mut lo, mut hi, mut kidx): (Idx, Idx, Idx) = (
            SmallVec::from_elem(0, k),
            SmallVec::from_elem(0, k),
            SmallVec::from_elem(0, k),
        );
        let os = self.out.strides();
        for flat in s..e {
            unravel(flat, shape, &mut idx);
            let v = self.element(idx[0], idx[1], &idx[2..], &mut lo, &mut hi, &mut kidx);
            let off: isize = idx.iter().zip(os).map(|(&i, &st)| i as isize * st).sum();
            // SAFETY: idx is inside out's shape, so the element is addressed by the out view
            // (contract); out overlaps no input (check_output) and blocks own disjoint ranges.
            unsafe { self.out.ptr::<f32>().wrapping_offset(off).write(v) }
        }
    }
}

impl Kernel for PoolKernel {
    fn name(&self) -> &str {
        self.op
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = split_aligned(blk, self.out.numel(), 16);
        match &self.fast {
            Some(axes) => pool2d::run(self.kind, &self.x, &self.out, &self.win, axes, (s, e)),
            None => self.run(s, e),
        }
        Ok(())
    }
}
