//! Transposed convolution (ONNX `ConvTranspose`) on the GEMM path: per output-channel
//! chunk, `cols = Wᵀ·x` (one f32 GEMM per tile of input positions, the matmul's
//! microkernels) scattered into the output (col2im) in a fixed order.
//!
//! Units are (image, group, chunk of output channels) — at most 8 chunks per group, fixed
//! by the shapes — and each unit adds its tiles in order, so results do not depend on the
//! block count.

use super::conv::flat;
use super::{check_f32, spatial_rank, unravel, Window};
use crate::matmul::{flops, gemm_f32, MIN_TILE_FLOPS};
use crate::plan::BLOCKS_PER_CORE;
use crate::tensor::{check_out_shape, check_output};
use crate::{KernelArgError, Launch, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::sync::Arc;

/// Scratch of one tile, in f32 elements (1 MiB).
const SCRATCH_MAX: usize = 1 << 18;
/// Output-channel chunks per group at most.
const MAX_CHUNKS: usize = 8;

thread_local! {
    static COLS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// ONNX's output shape `[N, M, O...]`, `O = stride·(D-1) + output_padding + extent - pads`,
/// for `x` `[N, C, D...]` and `w` `[C, M/group, K...]`.
pub fn conv_transpose_out_shape(
    x: &[usize],
    w: &[usize],
    win: &Window,
    group: usize,
    output_padding: &[usize],
) -> Result<Vec<usize>, KernelArgError> {
    let op = "conv_transpose";
    let k = spatial_rank(op, "x", x.len())?;
    #[allow(clippy::manual_is_multiple_of)] // MSRV 1.80
    if w.len() != x.len() || group == 0 || w[0] != x[1] || x[1] % group != 0 {
        return Err(KernelArgError::ShapeMismatch {
            op,
            detail: format!("x shape {x:?} and w shape {w:?} do not fit ([C, M/group, K...] with group={group})"),
        });
    }
    if output_padding.len() != k {
        return Err(KernelArgError::Invalid {
            op,
            detail: format!("output_padding has {} entries, expected {k}", output_padding.len()),
        });
    }
    let mut s = vec![x[0], w[1] * group];
    for d in 0..k {
        let full = win.strides[d] * (x[2 + d].max(1) - 1) + output_padding[d] + win.extent(d);
        let o = full
            .checked_sub(win.pads[d] + win.pads[k + d])
            .ok_or_else(|| KernelArgError::Invalid {
                op,
                detail: format!("pads {:?} exceed the output extent {full} of spatial dim {d}", win.pads),
            })?;
        s.push(if x[2 + d] == 0 { 0 } else { o });
    }
    Ok(s)
}

/// `out = conv_transpose(x, w) + bias`: `x` `[N, C, D...]`, `w` `[C, M/group, K...]`,
/// `bias` `[M]`, `out` per [`conv_transpose_out_shape`]; float32; `x`, `w` and `out`
/// reshapeable without a copy (contiguous); `out` overlaps no input.
#[allow(clippy::too_many_arguments)]
pub fn conv_transpose(
    x: &TensorView,
    w: &TensorView,
    bias: Option<&TensorView>,
    out: &TensorView,
    win: &Window,
    group: usize,
    output_padding: &[usize],
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let op = "conv_transpose";
    for t in [x, w, out].into_iter().chain(bias) {
        check_f32(op, t)?;
    }
    if win.kernel != w.shape()[2.min(w.ndim())..] {
        return Err(KernelArgError::ShapeMismatch {
            op,
            detail: format!("kernel_shape {:?} differs from w's {:?}", win.kernel, w.shape()),
        });
    }
    let shape = conv_transpose_out_shape(x.shape(), w.shape(), win, group, output_padding)?;
    check_out_shape(op, out, &shape)?;
    let (n, c, m) = (shape[0], x.shape()[1], shape[1]);
    if let Some(b) = bias {
        if b.shape() != [m] {
            return Err(KernelArgError::ShapeMismatch {
                op,
                detail: format!("bias has shape {:?}, expected [{m}]", b.shape()),
            });
        }
    }
    let mut inputs = vec![("x", x), ("w", w)];
    inputs.extend(bias.map(|b| ("bias", b)));
    check_output(op, out, &inputs, false)?;
    let kprod: usize = win.kernel.iter().product();
    let (cg, mg) = (c / group, m / group);
    let pin: usize = x.shape()[2..].iter().product();
    let pout: usize = out.shape()[2..].iter().product();
    let chunks = mg.clamp(1, MAX_CHUNKS);
    let mc = mg.div_ceil(chunks);
    let pt = (SCRATCH_MAX / (mc * kprod).max(1)).clamp(1, pin.max(1));
    let kern = ConvTKernel {
        x: flat(op, x, &[n, c, pin])?,
        w: flat(op, w, &[c, mg * kprod])?,
        bias: bias.cloned(),
        out: flat(op, out, &[n, m, pout])?,
        in_sp: x.shape()[2..].to_vec(),
        out_sp: out.shape()[2..].to_vec(),
        win: win.clone(),
        group,
        cg,
        mg,
        kprod,
        mc,
        chunks,
        pt,
    };
    let units = n * group * chunks;
    let blocks = (flops(n * group, mg * kprod, pin, cg) / MIN_TILE_FLOPS)
        .clamp(1, BLOCKS_PER_CORE * cores.max(1) as usize)
        .min(units.max(1));
    Ok((Arc::new(kern), blocks as u32))
}

struct ConvTKernel {
    x: TensorView,
    w: TensorView,
    bias: Option<TensorView>,
    out: TensorView,
    in_sp: Vec<usize>,
    out_sp: Vec<usize>,
    win: Window,
    group: usize,
    cg: usize,
    mg: usize,
    kprod: usize,
    /// Output channels per chunk, chunks per group.
    mc: usize,
    chunks: usize,
    /// Input positions per tile.
    pt: usize,
}

impl ConvTKernel {
    fn unit(&self, u: usize) {
        let (ng, ch) = (u / self.chunks, u % self.chunks);
        let (n, g) = (ng / self.group, ng % self.group);
        let (m0, m1) = ((ch * self.mc).min(self.mg), ((ch + 1) * self.mc).min(self.mg));
        if m0 >= m1 {
            return;
        }
        let k = self.win.rank();
        let (xs, ws, os) = (self.x.strides(), self.w.strides(), self.out.strides());
        let pout = self.out.shape()[2];
        let po = self.out.ptr::<f32>().wrapping_offset(n as isize * os[0]);
        let oc = |mm: usize, p: usize| po.wrapping_offset((g * self.mg + mm) as isize * os[1] + p as isize * os[2]);
        for mm in m0..m1 {
            let b = self.bias.as_ref().map_or(0.0, |b| {
                // SAFETY: channel < M, the bias length (checked at launch); only read.
                unsafe {
                    (b.ptr::<f32>() as *const f32)
                        .wrapping_offset((g * self.mg + mm) as isize * b.strides()[0])
                        .read()
                }
            });
            for p in 0..pout {
                // SAFETY: inside out (channel of this unit, p < ΠO); out overlaps no input;
                // units own disjoint output channels.
                unsafe { oc(mm, p).write(b) }
            }
        }
        let rows = (m1 - m0) * self.kprod;
        let pin = self.x.shape()[2];
        let lhs = (self.w.ptr::<f32>() as *const f32)
            .wrapping_offset((g * self.cg) as isize * ws[0] + (m0 * self.kprod) as isize * ws[1]);
        let mut kidx: SmallVec<[usize; 4]> = SmallVec::from_elem(0, k);
        let mut iidx: SmallVec<[usize; 4]> = SmallVec::from_elem(0, k);
        COLS.with(|scratch| {
            let mut col = scratch.borrow_mut();
            let mut p0 = 0;
            while p0 < pin {
                let cols = self.pt.min(pin - p0);
                if col.len() < rows * cols {
                    col.resize(rows * cols, 0.0);
                }
                let rhs = (self.x.ptr::<f32>() as *const f32)
                    .wrapping_offset(n as isize * xs[0] + (g * self.cg) as isize * xs[1] + p0 as isize * xs[2]);
                // SAFETY: lhs is Wᵀ's rows of this chunk (inside w), rhs this tile of x's
                // group (inside x), dst a private buffer of rows×cols; no overlap.
                unsafe {
                    gemm_f32(
                        (rows, cols, self.cg),
                        (col.as_mut_ptr(), cols as isize, 1),
                        false,
                        0.0,
                        (lhs, ws[1], ws[0]),
                        (rhs, xs[1], xs[2]),
                        1.0,
                    )
                }
                for r in 0..rows {
                    let (mm, kr) = (m0 + r / self.kprod, r % self.kprod);
                    unravel(kr, &self.win.kernel, &mut kidx);
                    for j in 0..cols {
                        unravel(p0 + j, &self.in_sp, &mut iidx);
                        let mut o = 0usize;
                        let mut inside = true;
                        for d in 0..k {
                            let v = (iidx[d] * self.win.strides[d] + kidx[d] * self.win.dilations[d]) as isize
                                - self.win.pads[d] as isize;
                            if v < 0 || v >= self.out_sp[d] as isize {
                                inside = false;
                                break;
                            }
                            o = o * self.out_sp[d] + v as usize;
                        }
                        if inside {
                            // SAFETY: o < ΠO and the channel is this unit's (as above).
                            unsafe { *oc(mm, o) += col[r * cols + j] }
                        }
                    }
                }
                p0 += cols;
            }
        });
    }
}

impl Kernel for ConvTKernel {
    fn name(&self) -> &str {
        "conv_transpose"
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let units = self.out.shape()[0] * self.group * self.chunks;
        let (s, e) = blk.split(units);
        for u in s..e {
            self.unit(u);
        }
        Ok(())
    }
}
