//! The 2-D pooling fast path: each output row and column looks its window's part inside
//! the input up in a table built at launch (`Axis`), and output rows are computed a run of
//! columns at a time (no per-element index odometer). Same values, same visiting order
//! (kernel row, then column) and same averaging rule as the general path in `pool.rs`.
//!
//! 2×2/2 without pads takes [`whole`]: each output's four taps in one pass the compiler
//! vectorises, 6× the row path on a conv net's MaxPool (3×3 windows written so did not
//! vectorise: they stay on the row path, stride-2 rows split into even and odd columns).

use super::inside;
use super::pool::PoolKind;
use super::pool_max;
use super::row_cursor::{RowCursor, RowSeg};
use super::Window;
use crate::TensorView;
use std::cell::RefCell;

/// Per output index along one axis: the kernel positions `[lo, hi)` inside the input, and
/// how many lie inside the padded input (for `count_include_pad`).
pub(super) struct Axis {
    pub(super) lo: Vec<usize>,
    pub(super) hi: Vec<usize>,
    padded: Vec<usize>,
}

impl Axis {
    /// The table of axis `d` of `win` for `input` input and `out` output positions.
    pub(super) fn new(win: &Window, d: usize, input: usize, out: usize) -> Axis {
        let (k, s, dil) = (win.kernel[d], win.strides[d], win.dilations[d]);
        let (pb, pe) = (win.pads[d] as isize, win.pads[win.rank() + d] as isize);
        let mut a = Axis {
            lo: Vec::with_capacity(out),
            hi: Vec::with_capacity(out),
            padded: Vec::with_capacity(out),
        };
        for o in 0..out {
            let start = (o * s) as isize - pb;
            let at = |j: usize| start + (j * dil) as isize;
            let lo = (0..k).find(|&j| at(j) >= 0 && at(j) < input as isize);
            let (lo, hi) = match lo {
                Some(lo) => (
                    lo,
                    (lo..k).take_while(|&j| at(j) < input as isize).last().unwrap_or(lo) + 1,
                ),
                None => (0, 0),
            };
            a.lo.push(lo);
            a.hi.push(hi);
            a.padded
                .push((0..k).filter(|&j| at(j) >= -pb && at(j) < input as isize + pe).count());
        }
        a
    }
}

/// Output elements `[s, e)` (row-major over `out`'s `[N, C, H, W]`) of a 2-D pooling.
///
/// Row by row: each kernel tap (row `kh`, column `kw`) updates the run of output columns
/// whose input column is inside the image (`nn::inside`), so every output element sees
/// its taps in (kh, kw) order, as in the general path. Runs of unit column stride and
/// window stride 1 or 2 are loops the compiler vectorises (compiled for the elementwise
/// family's ISA path: the same comparisons and sums, so the same bits).
pub(super) fn run(
    kind: PoolKind,
    x: &TensorView,
    out: &TensorView,
    win: &Window,
    axes: &[Axis; 2],
    (s, e): (usize, usize),
) {
    ACC.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let tiles = matches!(kind, PoolKind::Max) && !whole_2x2(x, out, win) && pool_max::fits(x, out, win);
        // The running output row, then an input row's even and odd columns (`rows`); or
        // the ring of prepared input rows (`pool_max`).
        let need = if tiles {
            pool_max::scratch_len(out.shape()[3], win)
        } else {
            out.shape()[3] + 2 * x.shape()[3].div_ceil(2)
        };
        if scratch.len() < need {
            scratch.resize(need, 0.0);
        }
        if tiles {
            // Its own ISA-compiled function: the row path's code stays as it was compiled.
            return pool_max::dispatch(pool_max::Job {
                x,
                out,
                win,
                rows: &axes[0],
                range: (s, e),
                scratch: &mut scratch[..need],
            });
        }
        let job = Rows {
            kind,
            x,
            out,
            win,
            axes,
            range: (s, e),
            scratch: &mut scratch[..need],
        };
        dispatch(job)
    })
}

/// Runs `job` compiled for the elementwise family's ISA path.
fn dispatch(job: Rows<'_>) {
    crate::isa::vectorize(crate::isa::path(crate::isa::Family::Elementwise), job)
}

/// One block's rows, as a function pulp compiles for an ISA level (`vectorize`).
struct Rows<'a> {
    kind: PoolKind,
    x: &'a TensorView,
    out: &'a TensorView,
    win: &'a Window,
    axes: &'a [Axis; 2],
    range: (usize, usize),
    /// The running output row's accumulators (`W_out`), an input row's even and odd columns.
    scratch: &'a mut [f32],
}

impl pulp::NullaryFnOnce for Rows<'_> {
    type Output = ();
    #[inline(always)]
    fn call(self) {
        let Rows {
            kind,
            x,
            out,
            win,
            axes,
            range,
            scratch,
        } = self;
        if whole_2x2(x, out, win) {
            return match kind {
                PoolKind::Max => whole::<true, 2, 2>(x, out, range),
                PoolKind::Avg { .. } => whole::<false, 2, 2>(x, out, range),
            };
        }
        match kind {
            PoolKind::Max => rows::<true>(false, x, out, win, axes, range, scratch),
            PoolKind::Avg { count_include_pad } => rows::<false>(count_include_pad, x, out, win, axes, range, scratch),
        }
    }
}

thread_local! {
    /// The accumulators of the running output row segment.
    static ACC: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

#[inline(always)]
fn rows<const MAX: bool>(
    cip: bool,
    x: &TensorView,
    out: &TensorView,
    win: &Window,
    axes: &[Axis; 2],
    (s, e): (usize, usize),
    scratch: &mut [f32],
) {
    let ow_n = out.shape()[3];
    let (in_h, in_w) = (x.shape()[2], x.shape()[3]);
    let (xs, os) = (x.strides(), out.strides());
    let [rows, cols] = axes;
    let (sh, sw, dh, dw) = (win.strides[0], win.strides[1], win.dilations[0], win.dilations[1]);
    let (ph, pw) = (win.pads[0] as isize, win.pads[1] as isize);
    // Per kernel column: its offset and the output columns it reaches inside the image.
    let taps: smallvec::SmallVec<[(isize, (usize, usize)); 8]> = (0..win.kernel[1])
        .map(|kw| {
            let off = (kw * dw) as isize - pw;
            (off, inside(ow_n, in_w, sw, off))
        })
        .collect();
    // Column stride 2 over contiguous rows: each input row is split once into its even and
    // odd columns, so every tap reads a unit-stride run (a stride-2 run compiles to a
    // gather-like scalar loop).
    let split = sw == 2 && xs[3] == 1 && win.kernel[1] > 1;
    let half = in_w.div_ceil(2);
    let (scratch, eo) = scratch.split_at_mut(ow_n);
    let (even, odd) = eo.split_at_mut(half);
    {
        let mut at = RowCursor::new(out, s);
        while let Some(RowSeg { n, c, oh, ow0, ow1 }) = at.next(e) {
            let base = (x.ptr::<f32>() as *const f32).wrapping_offset(n as isize * xs[0] + c as isize * xs[1]);
            let acc = &mut scratch[ow0..ow1];
            acc.fill(if MAX { f32::NEG_INFINITY } else { 0.0 });
            for kh in rows.lo[oh]..rows.hi[oh] {
                let ih = (oh * sh + kh * dh) as isize - ph;
                debug_assert!(ih >= 0 && ih < in_h as isize);
                let xr = base.wrapping_offset(ih * xs[2]);
                if split {
                    // SAFETY: row ih < H of plane (n, c) has W contiguous columns, addressed
                    // by the x view (contract); x is only read and does not overlap the scratch.
                    let row = unsafe { std::slice::from_raw_parts(xr, in_w) };
                    for ((e, o), pair) in even.iter_mut().zip(odd.iter_mut()).zip(row.chunks_exact(2)) {
                        (*e, *o) = (pair[0], pair[1]);
                    }
                    if in_w % 2 == 1 {
                        even[half - 1] = row[in_w - 1];
                    }
                }
                for &(off, (lo, hi)) in &taps {
                    let (lo, hi) = (lo.max(ow0), hi.min(ow1));
                    if lo >= hi {
                        continue;
                    }
                    let first = xr.wrapping_offset((lo as isize * sw as isize + off) * xs[3]);
                    let acc = &mut acc[lo - ow0..hi - ow0];
                    if split {
                        // Columns lo·2+off, +2, ...: one parity, consecutive in its half.
                        let at = (lo as isize + off.div_euclid(2)) as usize;
                        let src = if off.rem_euclid(2) == 0 {
                            &even[at..]
                        } else {
                            &odd[at..]
                        };
                        tap_run::<MAX, 1>(acc, &src[..acc.len()]);
                    } else if xs[3] == 1 && sw <= 2 {
                        // SAFETY: input columns lo·sw+off ..= (hi-1)·sw+off of row ih are
                        // inside the image (`inside`; the row table for ih), contiguous
                        // (column stride 1), so the run is addressed by the x view
                        // (contract); x is only read and does not overlap the scratch.
                        let src = unsafe { std::slice::from_raw_parts(first, (acc.len() - 1) * sw + 1) };
                        match sw {
                            1 => tap_run::<MAX, 1>(acc, src),
                            _ => tap_run::<MAX, 2>(acc, src),
                        }
                    } else {
                        let step_x = sw as isize * xs[3];
                        for (t, a) in acc.iter_mut().enumerate() {
                            // SAFETY: as above, element by element (column (lo+t)·sw + off).
                            *a = step::<MAX>(*a, unsafe { first.wrapping_offset(t as isize * step_x).read() });
                        }
                    }
                }
            }
            let orow = out
                .ptr::<f32>()
                .wrapping_offset(n as isize * os[0] + c as isize * os[1] + oh as isize * os[2]);
            let hn = rows.hi[oh] - rows.lo[oh];
            for (ow, &a) in (ow0..ow1).zip(acc.iter()) {
                let cnt = hn * (cols.hi[ow] - cols.lo[ow]);
                let v = if MAX {
                    a
                } else if cnt == 0 {
                    f32::NAN
                } else if cip {
                    a / (rows.padded[oh] * cols.padded[ow]) as f32
                } else {
                    a / cnt as f32
                };
                // SAFETY: (n, c, oh, ow) is inside out's shape, so the element is addressed
                // by the out view (contract); out overlaps no input and blocks own disjoint
                // ranges.
                unsafe { orow.wrapping_offset(ow as isize * os[3]).write(v) }
            }
        }
    }
}

/// One window element into the accumulator: the maximum (NaN wins: the last NaN seen) or
/// the sum.
#[inline(always)]
fn step<const MAX: bool>(a: f32, v: f32) -> f32 {
    if MAX {
        if v > a || v.is_nan() {
            v
        } else {
            a
        }
    } else {
        a + v
    }
}

/// `acc[j] = step(acc[j], src[j·SW])` for every `j` (`src` holds `(len-1)·SW + 1` values).
#[inline(always)]
fn tap_run<const MAX: bool, const SW: usize>(acc: &mut [f32], src: &[f32]) {
    let n = acc.len();
    assert!(n == 0 || src.len() > (n - 1) * SW, "the run covers every column");
    let p = src.as_ptr();
    for (j, a) in acc.iter_mut().enumerate() {
        // SAFETY: j·SW <= (n-1)·SW < src.len() (asserted above).
        *a = step::<MAX>(*a, unsafe { p.add(j * SW).read() });
    }
}

/// True when [`whole`] computes this pooling: a 2×2 window with stride 2 and no pads (the
/// one shape whose one-pass loop vectorised), every window inside the input, contiguous
/// input and output rows.
fn whole_2x2(x: &TensorView, out: &TensorView, win: &Window) -> bool {
    let inside = (0..2).all(|d| {
        let (o, i) = (out.shape()[2 + d], x.shape()[2 + d]);
        o == 0 || (o - 1) * win.strides[d] + win.kernel[d] <= i
    });
    let plain = win.pads.iter().all(|&p| p == 0) && win.dilations.iter().all(|&d| d == 1);
    win.kernel[..] == [2, 2]
        && win.strides[..] == [2, 2]
        && plain
        && inside
        && x.strides()[3] == 1
        && out.strides()[3] == 1
}

/// Output elements `[s, e)` of a `K`×`K` pooling with stride `S` whose windows all lie
/// inside the input: each output takes its taps in (row, column) order from the start
/// value (the general path's order: the same bits); an average divides by `K·K`.
#[inline(always)]
fn whole<const MAX: bool, const K: usize, const S: usize>(x: &TensorView, out: &TensorView, (s, e): (usize, usize)) {
    let (xs, os) = (x.strides(), out.strides());
    let mut at = RowCursor::new(out, s);
    let start = if MAX { f32::NEG_INFINITY } else { 0.0 };
    let count = (K * K) as f32;
    let ow_n = out.shape()[3];
    while let Some(RowSeg { n, c, oh, ow0, ow1 }) = at.next(e) {
        let mut xr = (x.ptr::<f32>() as *const f32)
            .wrapping_offset(n as isize * xs[0] + c as isize * xs[1] + (oh * S) as isize * xs[2]);
        let mut orow = out
            .ptr::<f32>()
            .wrapping_offset(n as isize * os[0] + c as isize * os[1] + oh as isize * os[2]);
        // A whole row takes the plane's following whole rows along (pointer steps, no
        // cursor or index arithmetic per row: a conv net's rows are 16 outputs).
        let rows = 1 + if ow0 == 0 && ow1 == ow_n {
            at.whole_rows(oh, e)
        } else {
            0
        };
        for _ in 0..rows {
            for ow in ow0..ow1 {
                let mut a = start;
                for kh in 0..K {
                    let r = xr.wrapping_offset(kh as isize * xs[2] + (ow * S) as isize);
                    for kw in 0..K {
                        // SAFETY: input row oh·S + kh < H and column ow·S + kw < W (every
                        // window lies inside the input: `whole_2x2`), contiguous columns,
                        // addressed by the x view (contract); x is only read.
                        a = step::<MAX>(a, unsafe { r.add(kw).read() });
                    }
                }
                // SAFETY: (n, c, oh, ow) is inside out's shape (contiguous columns),
                // addressed by the out view (contract); out overlaps no input and blocks
                // own disjoint ranges.
                unsafe { orow.add(ow).write(if MAX { a } else { a / count }) }
            }
            xr = xr.wrapping_offset(S as isize * xs[2]);
            orow = orow.wrapping_offset(os[2]);
        }
    }
}
