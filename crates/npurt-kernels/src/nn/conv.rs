//! Convolution (ONNX `Conv`) on the GEMM path: explicit im2col per output tile, then one
//! single-threaded f32 GEMM per tile (the matmul's microkernels, so the ISA rule of
//! [`Family::Gemm`](crate::isa::Family) applies), bias added while the tile is in cache.
//!
//! Work units are (image, group, tile of output positions); the tile width depends on the
//! shapes only (about `MIN_TILE_FLOPS` of work, at most 1 MiB of im2col scratch), so each
//! output element is always computed by the same GEMM call: results are bitwise identical
//! for any block count. The block count follows the matmul rule (work / `MIN_TILE_FLOPS`,
//! at most `BLOCKS_PER_CORE` per core). A 1×1 convolution with stride 1 and no padding
//! multiplies the input in place (no im2col); a 2-D depthwise one (one input and one
//! output channel per group) is computed directly, one plane per unit (`depthwise.rs`).

use super::{check_f32, depthwise, spatial_rank, unravel, Window};
use crate::matmul::{flops, gemm_f32, MIN_TILE_FLOPS};
use crate::plan::{blocks_for, BLOCKS_PER_CORE};
use crate::tensor::{check_out_shape, check_output};
use crate::{KernelArgError, Launch, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::sync::Arc;

/// im2col scratch per tile, in f32 elements (1 MiB).
const SCRATCH_MAX: usize = 1 << 18;
/// Multiply-adds per block of a depthwise convolution.
const DEPTHWISE_GRAIN: usize = 1 << 18;

type Idx = SmallVec<[usize; 4]>;

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
    // One input and one output channel per group, 2-D: computed directly (depthwise.rs),
    // one unit per plane.
    let depthwise = k == 2 && cg == 1 && mg == 1 && kprod > 1;
    // Tile width: about MIN_TILE_FLOPS of work, im2col scratch within SCRATCH_MAX.
    let per_col = 2 * mg * kk.max(1);
    let cap = (SCRATCH_MAX / kk.max(1)).max(16) / 16 * 16;
    let pt = (MIN_TILE_FLOPS / per_col)
        .next_multiple_of(16)
        .clamp(16, cap)
        .min(p.max(1));
    let pt = if depthwise { p.max(1) } else { pt };
    let tiles = p.div_ceil(pt);
    let units = n * group * tiles;
    let work = flops(n * group, mg, p, kk);
    let blocks = if depthwise {
        blocks_for(work / 2, DEPTHWISE_GRAIN, cores)
    } else {
        (work / MIN_TILE_FLOPS).clamp(1, BLOCKS_PER_CORE * cores.max(1) as usize) as u32
    }
    .min(units.max(1) as u32);
    let kern = ConvKernel {
        x: x.clone(),
        w: w2,
        bias: bias.cloned(),
        out: out3,
        direct,
        win,
        out_sp,
        group,
        cg,
        mg,
        kk,
        pt,
        tiles,
        depthwise,
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
    direct: Option<TensorView>,
    win: Window,
    out_sp: Vec<usize>,
    group: usize,
    cg: usize,
    mg: usize,
    kk: usize,
    pt: usize,
    tiles: usize,
    /// Computed by `depthwise::plane` (one plane per unit), not on the GEMM path.
    depthwise: bool,
}

impl ConvKernel {
    /// Rows `kk` × columns `p0..p1` of the im2col matrix of image `n`, group `g`.
    fn im2col(&self, n: usize, g: usize, (p0, p1): (usize, usize), col: &mut [f32]) {
        let k = self.win.rank();
        let cols = p1 - p0;
        let (xs, in_sp) = (self.x.strides(), &self.x.shape()[2..]);
        let wout = self.out_sp[k - 1];
        let (win_last, s_last, d_last, pb_last) = (
            in_sp[k - 1] as isize,
            self.win.strides[k - 1] as isize,
            self.win.dilations[k - 1] as isize,
            self.win.pads[k - 1] as isize,
        );
        let xs_last = xs[1 + k];
        let base = self.x.ptr::<f32>() as *const f32;
        let base = base.wrapping_offset(n as isize * xs[0] + (g * self.cg) as isize * xs[1]);
        let kprod = self.kk / self.cg.max(1);
        let mut kidx: Idx = SmallVec::from_elem(0, k);
        let mut oidx: Idx = SmallVec::from_elem(0, k);
        for row in 0..self.kk {
            let (c, kr) = (row / kprod, row % kprod);
            unravel(kr, &self.win.kernel, &mut kidx);
            let dst = &mut col[row * cols..(row + 1) * cols];
            let xc = base.wrapping_offset(c as isize * xs[1]);
            let off_last = kidx[k - 1] as isize * d_last - pb_last;
            let mut p = p0;
            while p < p1 {
                let (r, j0) = (p / wout, p % wout);
                let j1 = wout.min(j0 + (p1 - p));
                let seg = &mut dst[p - p0..p - p0 + (j1 - j0)];
                p += j1 - j0;
                unravel(r, &self.out_sp[..k - 1], &mut oidx[..k - 1]);
                let mut off = 0isize;
                let mut inside = true;
                for d in 0..k - 1 {
                    let i = (oidx[d] * self.win.strides[d] + kidx[d] * self.win.dilations[d]) as isize
                        - self.win.pads[d] as isize;
                    if i < 0 || i >= in_sp[d] as isize {
                        inside = false;
                        break;
                    }
                    off += i * xs[2 + d];
                }
                if !inside {
                    seg.fill(0.0);
                    continue;
                }
                // Positions t of the segment read input column i = i0 + t·s, inside
                // [0, W) for t in [t_lo, t_hi); the rest is padding.
                let xr = xc.wrapping_offset(off);
                let n = seg.len() as isize;
                let i0 = j0 as isize * s_last + off_last;
                let t_lo = if i0 >= 0 { 0 } else { (-i0 + s_last - 1) / s_last }.min(n);
                let t_hi = if win_last <= i0 {
                    0
                } else {
                    (win_last - i0 + s_last - 1) / s_last
                }
                .clamp(t_lo, n);
                let (t_lo, t_hi) = (t_lo as usize, t_hi as usize);
                seg[..t_lo].fill(0.0);
                seg[t_hi..].fill(0.0);
                let first = xr.wrapping_offset((i0 + t_lo as isize * s_last) * xs_last);
                if s_last == 1 && xs_last == 1 {
                    // SAFETY: input columns i0+t_lo .. i0+t_hi are inside [0, W) and every other
                    // index is inside x's shape (checked above), so the run is addressed by the
                    // x view (contract); x is only read and does not overlap the scratch tile.
                    let src = unsafe { std::slice::from_raw_parts(first, t_hi - t_lo) };
                    seg[t_lo..t_hi].copy_from_slice(src);
                } else {
                    for (t, v) in seg[t_lo..t_hi].iter_mut().enumerate() {
                        // SAFETY: as above, element by element (column i0 + (t_lo+t)·s).
                        *v = unsafe { first.wrapping_offset(t as isize * s_last * xs_last).read() };
                    }
                }
            }
        }
    }

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
        if self.depthwise {
            self.depthwise_unit(n, g);
            return;
        }
        if self.kk == 0 {
            for i in 0..self.mg {
                for j in 0..cols {
                    // SAFETY: inside this unit's output tile (owned by this block; out
                    // overlaps no input).
                    unsafe { at(i, j).write(0.0) }
                }
            }
        } else if let Some(xd) = &self.direct {
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
                self.im2col(n, g, (p0, p1), &mut col[..self.kk * cols]);
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
        if let Some(b) = &self.bias {
            for i in 0..self.mg {
                let bp = (b.ptr::<f32>() as *const f32).wrapping_offset((g * self.mg + i) as isize * b.strides()[0]);
                // SAFETY: channel g·mg+i < M, the bias length (checked at launch); only read.
                let bv = unsafe { bp.read() };
                for j in 0..cols {
                    // SAFETY: inside this unit's output tile (as above).
                    unsafe { *at(i, j) += bv }
                }
            }
        }
    }
}

impl ConvKernel {
    /// Image `n`, channel `g` of a depthwise convolution.
    fn depthwise_unit(&self, n: usize, g: usize) {
        let (xs, ws, os) = (self.x.strides(), self.w.strides(), self.out.strides());
        let x = (self.x.ptr::<f32>() as *const f32).wrapping_offset(n as isize * xs[0] + g as isize * xs[1]);
        let w = (self.w.ptr::<f32>() as *const f32).wrapping_offset(g as isize * ws[0]);
        let out = self
            .out
            .ptr::<f32>()
            .wrapping_offset(n as isize * os[0] + g as isize * os[1]);
        let bias = self.bias.as_ref().map(|b| {
            // SAFETY: channel g < M, the bias length (checked at launch); only read.
            unsafe {
                (b.ptr::<f32>() as *const f32)
                    .wrapping_offset(g as isize * b.strides()[0])
                    .read()
            }
        });
        let (win, sp) = (&self.win, &self.x.shape()[2..]);
        let geo = depthwise::Plane {
            input: [sp[0], sp[1]],
            output: [self.out_sp[0], self.out_sp[1]],
            kernel: [win.kernel[0], win.kernel[1]],
            strides: [win.strides[0], win.strides[1]],
            dilations: [win.dilations[0], win.dilations[1]],
            pads: [win.pads[0], win.pads[1]],
        };
        let wk = win.kernel[1] as isize * ws[1];
        let orow = self.out_sp[1] as isize * os[2];
        COLS.with(|scratch| {
            // SAFETY: the plane of image n, channel g lies inside x (its shape and strides),
            // weight row g (kernel[0]·kernel[1] elements, contiguous: reshaped at launch)
            // inside w, and output plane (n, g) inside out (its spatial dims are contiguous:
            // reshaped to [N, M, P] at launch); out overlaps neither input (check_output)
            // and units own disjoint planes.
            unsafe {
                depthwise::plane(
                    &geo,
                    (x, [xs[2], xs[3]]),
                    (w, [wk, ws[1]]),
                    bias,
                    (out, [orow, os[2]]),
                    &mut scratch.borrow_mut(),
                )
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
        for u in s..e {
            self.unit(u);
        }
        Ok(())
    }
}
