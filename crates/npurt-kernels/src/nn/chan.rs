//! Per-channel kernels over `[N, C, ...]`: inference batch normalisation (ONNX
//! `BatchNormalization` with running statistics) and local response normalisation
//! (`LRN`, across channels). Blocks own whole `(n, c)` planes; each plane is walked as
//! strided runs, so any layout works.

use super::check_f32;
use crate::layout::Strided;
use crate::plan::{blocks_for, GRAIN_ELEMENTWISE};
use crate::tensor::{check_out_shape, check_output};
use crate::{KernelArgError, Launch, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::sync::Arc;

fn rank2(op: &'static str, x: &TensorView) -> Result<(usize, usize), KernelArgError> {
    if x.ndim() < 2 {
        return Err(KernelArgError::Rank {
            op,
            what: "x",
            expected: "at least 2 ([N, C, ...])",
            got: x.ndim(),
        });
    }
    Ok((x.shape()[0], x.shape()[1]))
}

/// The planes of `[N, C, rest...]` walked together for `out` and `x`.
struct Planes {
    it: Strided<2>,
    n: usize,
    c: usize,
}

impl Planes {
    fn new(x: &TensorView, out: &TensorView) -> Planes {
        Planes {
            it: Strided::new(&x.shape()[2..], [&out.strides()[2..], &x.strides()[2..]]),
            n: x.shape()[0],
            c: x.shape()[1],
        }
    }
    fn count(&self) -> usize {
        self.n * self.c
    }
    fn blocks(&self, cores: u32) -> u32 {
        blocks_for(self.n * self.c * self.it.numel(), GRAIN_ELEMENTWISE, cores).min(self.count().max(1) as u32)
    }
}

/// `out = (x - mean) / sqrt(var + epsilon) * scale + bias` per channel; `x` `[N, C, ...]`,
/// the four parameters `[C]`, all float32; `out` has x's shape and may be `x` itself.
pub fn batch_norm(
    x: &TensorView,
    [scale, bias, mean, var]: [&TensorView; 4],
    epsilon: f64,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let op = "batch_norm";
    let (_, c) = rank2(op, x)?;
    for t in [x, scale, bias, mean, var, out] {
        check_f32(op, t)?;
    }
    for (what, t) in [("scale", scale), ("bias", bias), ("mean", mean), ("var", var)] {
        if t.shape() != [c] {
            return Err(KernelArgError::ShapeMismatch {
                op,
                detail: format!("{what} has shape {:?}, expected [{c}]", t.shape()),
            });
        }
        check_output(op, out, &[(what, t)], false)?;
    }
    check_out_shape(op, out, x.shape())?;
    check_output(op, out, &[("x", x)], true)?;
    let planes = Planes::new(x, out);
    let blocks = planes.blocks(cores);
    let params = Box::new([scale.clone(), bias.clone(), mean.clone(), var.clone()]);
    Ok((
        Arc::new(ChanKernel {
            op: ChanOp::BatchNorm { params, eps: epsilon },
            x: x.clone(),
            out: out.clone(),
            planes,
        }),
        blocks,
    ))
}

/// ONNX `LRN`: `out = x / (bias + alpha / size · Σ x²)^beta`, the sum over channels
/// `c - ⌊(size-1)/2⌋ ..= c + ⌈(size-1)/2⌉` (clipped); `x` `[N, C, ...]` float32; `out`
/// has x's shape and must not overlap it.
pub fn lrn(
    x: &TensorView,
    size: usize,
    alpha: f64,
    beta: f64,
    bias: f64,
    out: &TensorView,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let op = "lrn";
    rank2(op, x)?;
    check_f32(op, x)?;
    check_f32(op, out)?;
    if size == 0 {
        return Err(KernelArgError::Invalid {
            op,
            detail: "size must be >= 1".into(),
        });
    }
    check_out_shape(op, out, x.shape())?;
    check_output(op, out, &[("x", x)], false)?;
    let planes = Planes::new(x, out);
    let blocks = planes.blocks(cores);
    Ok((
        Arc::new(ChanKernel {
            op: ChanOp::Lrn {
                size,
                alpha: alpha as f32,
                beta: beta as f32,
                bias: bias as f32,
            },
            x: x.clone(),
            out: out.clone(),
            planes,
        }),
        blocks,
    ))
}

enum ChanOp {
    BatchNorm {
        params: Box<[TensorView; 4]>,
        eps: f64,
    },
    Lrn {
        size: usize,
        alpha: f32,
        beta: f32,
        bias: f32,
    },
}

struct ChanKernel {
    op: ChanOp,
    x: TensorView,
    out: TensorView,
    planes: Planes,
}

impl ChanKernel {
    fn plane(&self, n: usize, c: usize) {
        let (xs, os) = (self.x.strides(), self.out.strides());
        let px = (self.x.ptr::<f32>() as *const f32).wrapping_offset(n as isize * xs[0] + c as isize * xs[1]);
        let po = self
            .out
            .ptr::<f32>()
            .wrapping_offset(n as isize * os[0] + c as isize * os[1]);
        let [so, sx] = self.planes.it.inner_strides();
        let numel = self.planes.it.numel();
        match &self.op {
            ChanOp::BatchNorm { params, eps } => {
                // SAFETY: c < C, the length of each parameter vector (checked at launch);
                // they are only read.
                let p = params.each_ref().map(|t| unsafe {
                    (t.ptr::<f32>() as *const f32)
                        .wrapping_offset(c as isize * t.strides()[0])
                        .read()
                });
                let [scale, bias, mean, var] = p;
                let a = scale / ((var as f64 + eps).sqrt() as f32);
                let b = bias - mean * a;
                for (off, len) in self.planes.it.runs(0, numel) {
                    for i in 0..len as isize {
                        // SAFETY: the run lies in the plane, inside both views (contract);
                        // out is exactly x or disjoint from it (check_output); blocks own
                        // disjoint planes.
                        unsafe {
                            let v = px.wrapping_offset(off[1] + i * sx).read();
                            po.wrapping_offset(off[0] + i * so).write(v * a + b)
                        }
                    }
                }
            }
            &ChanOp::Lrn {
                size,
                alpha,
                beta,
                bias,
            } => {
                let nc = self.planes.c;
                let lo = c.saturating_sub((size - 1) / 2);
                let hi = (c + (size - 1) - (size - 1) / 2 + 1).min(nc); // c + ceil((size-1)/2), inclusive
                let scale = alpha / size as f32;
                for (off, len) in self.planes.it.runs(0, numel) {
                    for i in 0..len as isize {
                        let mut sq = 0.0f32;
                        for cc in lo..hi {
                            // SAFETY: channel cc < C and the position is inside the plane,
                            // so the element is addressed by x (contract); only read.
                            let v = unsafe {
                                px.wrapping_offset((cc as isize - c as isize) * xs[1] + off[1] + i * sx)
                                    .read()
                            };
                            sq += v * v;
                        }
                        // SAFETY: as above; out overlaps no input and blocks own planes.
                        unsafe {
                            let v = px.wrapping_offset(off[1] + i * sx).read();
                            po.wrapping_offset(off[0] + i * so)
                                .write(v / (bias + scale * sq).powf(beta))
                        }
                    }
                }
            }
        }
    }
}

impl Kernel for ChanKernel {
    fn name(&self) -> &str {
        match self.op {
            ChanOp::BatchNorm { .. } => "batch_norm",
            ChanOp::Lrn { .. } => "lrn",
        }
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = blk.split(self.planes.count());
        for p in s..e {
            self.plane(p / self.planes.c, p % self.planes.c);
        }
        Ok(())
    }
}
