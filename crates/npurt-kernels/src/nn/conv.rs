//! Convolution (ONNX `Conv`). Three paths, each with the bias and the [`Epilogue`]
//! (a fused activation) applied while the output is in cache:
//!
//! * **Direct** (`direct.rs`): 2-D with few taps per output (`C/group·ΠK` ≤
//!   `direct::MAX_TAPS`: a first layer's 3 channels × 3×3) or depthwise (one input and one
//!   output channel per group); units are (image, group, band of output rows).
//! * **Pointwise**: a 1×1 convolution with stride 1 and no padding multiplies the input in
//!   place.
//! * **GEMM**: explicit im2col per output tile (`im2col.rs`), then one single-threaded f32
//!   GEMM per tile (the matmul's microkernels, so the ISA rule of
//!   [`Family::Gemm`](crate::isa::Family) applies). Units are (image, group, tile of
//!   output positions); the tile width depends on the shapes only (about `MIN_TILE_FLOPS`
//!   of work, at most 1 MiB of im2col scratch).
//!
//! Each output element is always computed by the same call in the same order, so results
//! are bitwise identical for any block count. The block count follows the matmul rule
//! (work / `MIN_TILE_FLOPS`, at most `BLOCKS_PER_CORE` per core; direct: `DIRECT_GRAIN`
//! multiply-adds per block).

use super::direct::{self, Direct};
use super::epilogue::Visit;
use super::im2col;
use super::{check_f32, spatial_rank, Epilogue, Window};
use crate::matmul::{flops, gemm_f32, MIN_TILE_FLOPS};
use crate::plan::{blocks_for, BLOCKS_PER_CORE};
use crate::tensor::{check_out_shape, check_output};
use crate::{KernelArgError, Launch, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use std::cell::RefCell;
use std::sync::Arc;

/// im2col scratch per tile, in f32 elements (1 MiB).
const SCRATCH_MAX: usize = 1 << 18;
/// Multiply-adds per block of a direct convolution.
const DIRECT_GRAIN: usize = 1 << 19;

thread_local! {
    /// The im2col tile of the running block: one per worker thread, grown, never shrunk.
    static COLS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Views of `t` reshaped without a copy, or a typed error naming it.
pub(super) fn flat(op: &'static str, t: &TensorView, shape: &[usize]) -> Result<TensorView, KernelArgError> {
    t.reshape(shape).map_err(|_| KernelArgError::NotContiguous {
        op,
        shape: t.shape().to_vec(),
        strides: t.strides().to_vec(),
    })
}

/// `out = conv(x, w) + bias` with ONNX's attributes: `x` `[N, C, D1..Dk]`, `w`
/// `[M, C/group, K1..Kk]`, `bias` `[M]`, `out` `[N, M, O1..Ok]` (see [`Window::out_shape`]);
/// all float32. `out` must not overlap an input, and `out` and `w` must be reshapeable
/// without a copy (contiguous); `x` may have any strides.
#[allow(clippy::too_many_arguments)]
pub fn conv(
    x: &TensorView,
    w: &TensorView,
    bias: Option<&TensorView>,
    out: &TensorView,
    strides: Option<&[usize]>,
    pads: Option<&[usize]>,
    dilations: Option<&[usize]>,
    group: usize,
    epi: Epilogue,
    cores: u32,
) -> Result<Launch, KernelArgError> {
    let op = "conv";
    for t in [x, w, out].into_iter().chain(bias) {
        check_f32(op, t)?;
    }
    let k = spatial_rank(op, "x", x.ndim())?;
    if w.ndim() != x.ndim() {
        return Err(KernelArgError::Rank {
            op,
            what: "w",
            expected: "the rank of x",
            got: w.ndim(),
        });
    }
    let (n, c, m) = (x.shape()[0], x.shape()[1], w.shape()[0]);
    #[allow(clippy::manual_is_multiple_of)] // MSRV 1.80
    if group == 0 || c % group != 0 || m % group != 0 || w.shape()[1] * group != c {
        return Err(KernelArgError::ShapeMismatch {
            op,
            detail: format!(
                "x has {c} channels and w shape {:?}: with group={group} both C and M must be multiples of group and w.shape[1] = C/group",
                w.shape()
            ),
        });
    }
    let win = Window::new(op, k, &w.shape()[2..], strides, pads, dilations)?;
    let out_sp = win.out_shape(op, &x.shape()[2..], false)?;
    let mut expected = vec![n, m];
    expected.extend(&out_sp);
    check_out_shape(op, out, &expected)?;
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
    let p: usize = out_sp.iter().product();
    let kprod: usize = win.kernel.iter().product();
    let (cg, mg) = (c / group, m / group);
    let kk = cg * kprod;
    let out3 = flat(op, out, &[n, m, p])?;
    let w2 = flat(op, w, &[m, kk])?;
    let pointwise = kprod == 1 && win.strides.iter().all(|&s| s == 1) && win.pads.iter().all(|&q| q == 0);
    let direct = if pointwise { x.reshape(&[n, c, p]).ok() } else { None };
    let depthwise = cg == 1 && mg == 1 && kprod > 1;
    // Tile width: about MIN_TILE_FLOPS of work, im2col scratch within SCRATCH_MAX.
    let per_col = 2 * mg * kk.max(1);
    let cap = (SCRATCH_MAX / kk.max(1)).max(16) / 16 * 16;
    let pt = (MIN_TILE_FLOPS / per_col)
        .next_multiple_of(16)
        .clamp(16, cap)
        .min(p.max(1));
    let plan = (direct::fits(k, kk, depthwise, pointwise) && out3.strides()[2] == 1)
        .then(|| Direct::new(&win, (mg, cg), [x.shape()[2], x.shape()[3]], [out_sp[0], out_sp[1]]));
    let tiles = match &plan {
        Some(d) => d.bands,
        None => p.div_ceil(pt),
    };
    let units = n * group * tiles;
    let work = flops(n * group, mg, p, kk);
    let blocks = if plan.is_some() {
        blocks_for(work / 2, DIRECT_GRAIN, cores)
    } else {
        (work / MIN_TILE_FLOPS).clamp(1, BLOCKS_PER_CORE * cores.max(1) as usize) as u32
    }
    .min(units.max(1) as u32);
    let kern = ConvKernel {
        x: x.clone(),
        w: w2,
        bias: bias.cloned(),
        out: out3,
        pointwise: direct,
        plan,
        epi,
        win,
        out_sp,
        group,
        cg,
        mg,
        kk,
        pt,
        tiles,
    };
    Ok((Arc::new(kern), blocks))
}

struct ConvKernel {
    x: TensorView,
    /// `[M, C/group·ΠK]`.
    w: TensorView,
    bias: Option<TensorView>,
    /// `[N, M, ΠO]`.
    out: TensorView,
    /// `x` as `[N, C, ΠD]` for a pointwise convolution (no im2col).
    pointwise: Option<TensorView>,
    /// A few-tap 2-D convolution computed directly (`direct.rs`; units are row bands).
    plan: Option<Direct>,
    /// Applied to every output after the bias.
    epi: Epilogue,
    win: Window,
    out_sp: Vec<usize>,
    group: usize,
    cg: usize,
    mg: usize,
    kk: usize,
    pt: usize,
    tiles: usize,
}

impl ConvKernel {
    fn unit(&self, u: usize) {
        let (ng, t) = (u / self.tiles, u % self.tiles);
        let (n, g) = (ng / self.group, ng % self.group);
        let p = self.out.shape()[2];
        let (p0, p1) = (t * self.pt, ((t + 1) * self.pt).min(p));
        let cols = p1 - p0;
        let (os, ws) = (self.out.strides(), self.w.strides());
        let dst = self
            .out
            .ptr::<f32>()
            .wrapping_offset(n as isize * os[0] + (g * self.mg) as isize * os[1] + p0 as isize * os[2]);
        let lhs = (self.w.ptr::<f32>() as *const f32).wrapping_offset((g * self.mg) as isize * ws[0]);
        let at = |i: usize, j: usize| dst.wrapping_offset(i as isize * os[1] + j as isize * os[2]);
        if self.kk == 0 {
            for i in 0..self.mg {
                for j in 0..cols {
                    // SAFETY: inside this unit's output tile (owned by this block; out
                    // overlaps no input).
                    unsafe { at(i, j).write(0.0) }
                }
            }
        } else if let Some(xd) = &self.pointwise {
            let xs = xd.strides();
            let rhs = (xd.ptr::<f32>() as *const f32)
                .wrapping_offset(n as isize * xs[0] + (g * self.cg) as isize * xs[1] + p0 as isize * xs[2]);
            // SAFETY: the three strided matrices lie inside out / w / x (their tiles are
            // within the shapes; the views' contract makes the memory valid); out
            // overlaps neither input (check_output); units own disjoint output tiles.
            unsafe {
                gemm_f32(
                    (self.mg, cols, self.kk),
                    (dst, os[1], os[2]),
                    false,
                    0.0,
                    (lhs, ws[0], ws[1]),
                    (rhs, xs[1], xs[2]),
                    1.0,
                )
            }
        } else {
            COLS.with(|scratch| {
                let mut col = scratch.borrow_mut();
                if col.len() < self.kk * cols {
                    col.resize(self.kk * cols, 0.0);
                }
                im2col::im2col(
                    &self.x,
                    &self.win,
                    &self.out_sp,
                    (self.cg, self.kk),
                    (n, g, p0, p1),
                    &mut col[..self.kk * cols],
                );
                // SAFETY: as above, with the im2col tile (a private buffer of kk×cols
                // elements, row stride cols) as the right-hand side.
                unsafe {
                    gemm_f32(
                        (self.mg, cols, self.kk),
                        (dst, os[1], os[2]),
                        false,
                        0.0,
                        (lhs, ws[0], ws[1]),
                        (col.as_ptr(), cols as isize, 1),
                        1.0,
                    )
                }
            });
        }
        if self.bias.is_none() && self.epi == Epilogue::None {
            return;
        }
        /// Bias and activation over the unit's output tile (compiled per formula).
        struct Epi<'a, A: Fn(usize, usize) -> *mut f32> {
            k: &'a ConvKernel,
            g: usize,
            cols: usize,
            at: A,
        }
        impl<A: Fn(usize, usize) -> *mut f32> Visit for Epi<'_, A> {
            type Out = ();
            #[inline(always)]
            fn go<F: Fn(f32) -> f32 + Copy>(self, f: F) {
                let k = self.k;
                for i in 0..k.mg {
                    let bv = k.bias.as_ref().map(|b| {
                        let bp = (b.ptr::<f32>() as *const f32)
                            .wrapping_offset((self.g * k.mg + i) as isize * b.strides()[0]);
                        // SAFETY: channel g·mg+i < M, the bias length (checked at launch); only read.
                        unsafe { bp.read() }
                    });
                    for j in 0..self.cols {
                        // SAFETY: inside this unit's output tile (owned by this block; out
                        // overlaps no input).
                        unsafe {
                            let o = (self.at)(i, j);
                            *o = f(match bv {
                                Some(b) => *o + b,
                                None => *o,
                            });
                        }
                    }
                }
            }
        }
        self.epi.with(Epi { k: self, g, cols, at });
    }
}

impl ConvKernel {
    /// Units `s..e` of a direct convolution: bands of (image, group) planes, the group's
    /// weights packed once per run of units of the same group.
    fn direct_units(&self, d: &Direct, (s, e): (usize, usize)) {
        let (xs, os, ws) = (self.x.strides(), self.out.strides(), self.w.strides());
        let orow = self.out_sp[1] as isize * os[2];
        COLS.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            if scratch.len() < d.scratch_len() {
                scratch.resize(d.scratch_len(), 0.0);
            }
            let (wpack, pad) = scratch[..d.scratch_len()].split_at_mut(d.packed_len());
            // The padding columns of every band's rows (bands write the image's columns).
            pad.fill(0.0);
            let mut packed = None;
            for u in s..e {
                let (ng, band) = (u / self.tiles, u % self.tiles);
                let (n, g) = (ng / self.group, ng % self.group);
                if packed != Some(g) {
                    let w = (self.w.ptr::<f32>() as *const f32).wrapping_offset((g * self.mg) as isize * ws[0]);
                    // SAFETY: group g's mg rows of w ([M, cg·ΠK], its strides) are inside
                    // the weights (shapes checked at launch); w is only read.
                    unsafe { d.pack((w, [ws[0], ws[1]]), wpack) };
                    packed = Some(g);
                }
                let x = (self.x.ptr::<f32>() as *const f32)
                    .wrapping_offset(n as isize * xs[0] + (g * self.cg) as isize * xs[1]);
                let out = self
                    .out
                    .ptr::<f32>()
                    .wrapping_offset(n as isize * os[0] + (g * self.mg) as isize * os[1]);
                let bias = self.bias.as_ref().map(|b| {
                    let p = (b.ptr::<f32>() as *const f32).wrapping_offset((g * self.mg) as isize * b.strides()[0]);
                    (p, b.strides()[0])
                });
                // SAFETY: group g of image n spans cg input channels of x (its shape and
                // strides) and mg output channels of out, whose columns are contiguous
                // (checked at launch) with rows out_sp[1] apart; the bias has mg entries
                // from g·mg; out overlaps no input (check_output) and units own disjoint
                // bands.
                unsafe {
                    d.band(
                        band,
                        (x, [xs[1], xs[2], xs[3]]),
                        wpack,
                        bias,
                        self.epi,
                        (out, [os[1], orow]),
                        pad,
                    )
                }
            }
        });
    }
}

impl Kernel for ConvKernel {
    fn name(&self) -> &str {
        "conv"
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let units = self.out.shape()[0] * self.group * self.tiles;
        let (s, e) = blk.split(units);
        if let Some(d) = &self.plan {
            self.direct_units(d, (s, e));
            return Ok(());
        }
        for u in s..e {
            self.unit(u);
        }
        Ok(())
    }
}
