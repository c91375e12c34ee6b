//! Max pooling of 2-D windows with column stride 1 or 2 and no dilation (a ResNet stem's
//! 3×3/2 pad 1, an FPN's 3×3/1): a tile of [`L`] output columns is taken over every tap in
//! registers and stored once.
//!
//! The row path (`pool2d::rows`) runs tap by tap over a whole output row, so every tap
//! stores the row's accumulators and the next tap loads them again, and each input row is
//! split into even and odd columns for every output row that reads it. Here each input row
//! is *prepared* once per plane: padded with -inf (so no tap needs a bounds test and a
//! padding column never wins a maximum) and, for stride 2, split into its two column
//! phases, kept in a ring of `KH` rows that consecutive output rows share. A tap (kh, kw)
//! of output column `o` is then element `o + kw / s` of phase `kw % s`: one unit-stride
//! load per tap and tile.
//!
//! Every output takes its taps in (kernel row, kernel column) order with the row path's
//! comparison (`pool2d::step`: the larger value, a NaN wins), on 16, 8 or 1 lanes (pulp's
//! `Simd` levels): the padding taps (-inf) never change the running value, so the results
//! are the row path's, bit for bit.

use super::pool2d::Axis;
use super::row_cursor::{RowCursor, RowSeg};
use super::Window;
use crate::TensorView;

/// Output columns per register tile.
const L: usize = 16;
/// The largest kernel handled here (rows of the ring, taps per row).
const MAX_K: usize = 16;

/// True when this path computes the max pooling `win` of `x` into `out`.
pub(super) fn fits(x: &TensorView, out: &TensorView, win: &Window) -> bool {
    win.dilations.iter().all(|&d| d == 1)
        && matches!(win.strides[1], 1 | 2)
        && win.kernel.iter().all(|&k| (1..=MAX_K).contains(&k))
        && x.strides()[3] == 1
        && out.strides()[3] == 1
}

/// Floats of one prepared row (its phases back to back) and of the whole ring.
fn row_len(out_w: usize, win: &Window) -> usize {
    let s = win.strides[1];
    // The last group of tiles starts before out_w and reads 4·L columns past it, plus the
    // kernel.
    let phase = out_w + 4 * L + win.kernel[1].div_ceil(s);
    s * phase
}

pub(super) fn scratch_len(out_w: usize, win: &Window) -> usize {
    win.kernel[0] * row_len(out_w, win)
}

/// [`run`] compiled for the elementwise family's ISA path (pulp's `Simd` levels: 16, 8 or
/// 1 lanes per tile).
pub(super) struct Job<'a> {
    pub x: &'a TensorView,
    pub out: &'a TensorView,
    pub win: &'a Window,
    pub rows: &'a Axis,
    pub range: (usize, usize),
    pub scratch: &'a mut [f32],
}

pub(super) fn dispatch(job: Job<'_>) {
    crate::isa::vectorize(crate::isa::path(crate::isa::Family::Elementwise), job)
}

impl pulp::WithSimd for Job<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, s: S) {
        let Job {
            x,
            out,
            win,
            rows,
            range,
            scratch,
        } = self;
        run(s, x, out, win, rows, range, scratch)
    }
}

/// The comparison of `pool2d::step::<true>` on lanes: `v` where it is larger or NaN.
#[inline(always)]
fn step_lanes<S: pulp::Simd>(s: S, a: S::f32s, v: S::f32s) -> S::f32s {
    let r = s.select_f32s(s.greater_than_f32s(v, a), v, a);
    s.select_f32s(s.equal_f32s(v, v), r, v)
}

/// Output elements `[s, e)` (row-major over `out`'s `[N, C, H, W]`); `scratch` holds at
/// least [`scratch_len`] floats; `rows` is the output-row table of `win`.
#[inline(always)]
fn run<S: pulp::Simd>(
    simd: S,
    x: &TensorView,
    out: &TensorView,
    win: &Window,
    rows: &Axis,
    (s, e): (usize, usize),
    scratch: &mut [f32],
) {
    let lanes = S::F32_LANES;
    debug_assert!(lanes <= L);
    let (in_h, in_w, ow_n) = (x.shape()[2], x.shape()[3], out.shape()[3]);
    let (xs, os) = (x.strides(), out.strides());
    let (kh_n, kw_n) = (win.kernel[0], win.kernel[1]);
    let (sh, sw) = (win.strides[0], win.strides[1]);
    let (ph, pw) = (win.pads[0], win.pads[1]);
    let rl = row_len(ow_n, win);
    let phase = rl / sw;
    let ring = &mut scratch[..kh_n * rl];
    // Each kernel column's offset in a prepared row: phase kw % s, element kw / s.
    let mut tap_at = [0usize; MAX_K];
    for (kw, t) in tap_at.iter_mut().enumerate().take(kw_n) {
        *t = (kw % sw) * phase + kw / sw;
    }
    let taps = &tap_at[..kw_n];
    // Which input row (plane, row) each ring slot holds.
    let mut tags = [None::<(usize, usize, usize)>; MAX_K];
    let mut at = RowCursor::new(out, s);
    while let Some(RowSeg { n, c, oh, ow0, ow1 }) = at.next(e) {
        let plane = (x.ptr::<f32>() as *const f32).wrapping_offset(n as isize * xs[0] + c as isize * xs[1]);
        let (k0, k1) = (rows.lo[oh], rows.hi[oh]);
        // Input row of kernel row kh (inside the input for k0 <= kh < k1: the row table).
        let ih = |kh: usize| oh * sh + kh - ph;
        for kh in k0..k1 {
            let r = ih(kh);
            debug_assert!(r < in_h);
            let slot = r % kh_n;
            if tags[slot] != Some((n, c, r)) {
                // SAFETY: row r < H of plane (n, c) has W contiguous columns addressed by
                // the x view (the kernel's contract); x is only read and does not overlap
                // the scratch.
                let src = unsafe { std::slice::from_raw_parts(plane.wrapping_offset(r as isize * xs[2]), in_w) };
                prepare(&mut ring[slot * rl..][..rl], src, pw, sw);
                tags[slot] = Some((n, c, r));
            }
        }
        let orow = out
            .ptr::<f32>()
            .wrapping_offset(n as isize * os[0] + c as isize * os[1] + oh as isize * os[2]);
        // The segment's ring rows, in kernel-row order.
        let mut at_rows = [0usize; MAX_K];
        for (a, kh) in at_rows.iter_mut().zip(k0..k1) {
            *a = (ih(kh) % kh_n) * rl;
        }
        let at_rows = &at_rows[..k1 - k0];
        let mut o0 = ow0;
        // Four tiles at a time while the row has more than two left (independent
        // comparison chains: one tile's chain of taps is latency-bound), then one.
        while o0 + 2 * lanes < ow1 {
            tiles::<S, 4>(simd, ring, (at_rows, taps), (o0, ow1), orow);
            o0 += 4 * lanes;
        }
        while o0 < ow1 {
            tiles::<S, 1>(simd, ring, (at_rows, taps), (o0, ow1), orow);
            o0 += lanes;
        }
    }
}

/// `T` tiles of output columns from `o0` (those before `ow1` stored into `orow`): every
/// tap of the prepared ring rows `at_rows` at offsets `taps`.
#[inline(always)]
fn tiles<S: pulp::Simd, const T: usize>(
    simd: S,
    ring: &[f32],
    (at_rows, taps): (&[usize], &[usize]),
    (o0, ow1): (usize, usize),
    orow: *mut f32,
) {
    let lanes = S::F32_LANES;
    let mut acc = [simd.splat_f32s(f32::NEG_INFINITY); T];
    for &r in at_rows {
        for &t in taps {
            let at = r + t + o0;
            assert!(at + T * lanes <= ring.len(), "a prepared row covers every tile");
            for (i, a) in acc.iter_mut().enumerate() {
                // SAFETY: `lanes` floats from at + i·lanes are inside the ring (asserted);
                // S::f32s is `lanes` f32 values, read unaligned.
                let v = unsafe { ring.as_ptr().add(at + i * lanes).cast::<S::f32s>().read_unaligned() };
                *a = step_lanes(simd, *a, v);
            }
        }
    }
    for (i, a) in acc.iter().enumerate() {
        let c0 = o0 + i * lanes;
        if c0 >= ow1 {
            break;
        }
        let n_out = lanes.min(ow1 - c0);
        let dst = orow.wrapping_add(c0);
        if n_out == lanes {
            // SAFETY: columns c0..c0+lanes < W_out of the output row are inside out's
            // shape, contiguous (column stride 1), addressed by the out view (contract);
            // out overlaps no input and blocks own disjoint ranges.
            unsafe { dst.cast::<S::f32s>().write_unaligned(*a) };
        } else {
            let mut spill = [0.0f32; L];
            // SAFETY: S::f32s is `lanes` <= L f32 values.
            unsafe { spill.as_mut_ptr().cast::<S::f32s>().write_unaligned(*a) };
            // SAFETY: as above, for the n_out < lanes columns from c0.
            unsafe { std::slice::from_raw_parts_mut(dst, n_out) }.copy_from_slice(&spill[..n_out]);
        }
    }
}

/// Writes input row `src` into `dst` as the padded row `P[j] = src[j - pw]` (-inf outside
/// the row) split into `s` phases of `dst.len() / s` floats: phase `p` holds `P[p], P[p +
/// s], ...`.
#[inline(always)]
fn prepare(dst: &mut [f32], src: &[f32], pw: usize, s: usize) {
    dst.fill(f32::NEG_INFINITY);
    let phase = dst.len() / s;
    if s == 1 {
        dst[pw..pw + src.len()].copy_from_slice(src);
        return;
    }
    // P[2t + p] = src[2t + p - pw]: src's even columns go to phase pw % 2 from t =
    // pw.div_ceil(2) - ..., its odd columns to the other phase.
    let (pe, po) = (pw % 2, (pw + 1) % 2);
    let (de, dd) = ((pw - pe) / 2, (pw + 1 - po) / 2);
    let (lo, hi) = dst.split_at_mut(phase);
    let (even, odd) = if pe == 0 { (lo, hi) } else { (hi, lo) };
    let pairs = src.chunks_exact(2);
    let last = pairs.remainder().first().copied();
    let m = src.len() / 2;
    for ((e, o), p) in even[de..de + m].iter_mut().zip(odd[dd..dd + m].iter_mut()).zip(pairs) {
        (*e, *o) = (p[0], p[1]);
    }
    if let Some(v) = last {
        even[de + m] = v;
    }
}
