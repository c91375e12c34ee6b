//! The 2-D pooling fast path: each output row and column looks its window's part inside
//! the input up in a table built at launch (`Axis`), and output rows are computed a run of
//! columns at a time (no per-element index odometer). Same values, same visiting order
//! (kernel row, then column) and same averaging rule as the general path in `pool.rs`.

use super::depthwise::inside;
use super::pool::PoolKind;
use super::Window;
use crate::TensorView;
use std::cell::RefCell;

/// Per output index along one axis: the kernel positions `[lo, hi)` inside the input, and
/// how many lie inside the padded input (for `count_include_pad`).
pub(super) struct Axis {
    lo: Vec<usize>,
    hi: Vec<usize>,
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
/// whose input column is inside the image (`depthwise::inside`), so every output element
/// sees its taps in (kh, kw) order, as in the general path.
pub(super) fn run(
    kind: PoolKind,
    x: &TensorView,
    out: &TensorView,
    win: &Window,
    axes: &[Axis; 2],
    (s, e): (usize, usize),
) {
    match kind {
        PoolKind::Max => rows::<true>(false, x, out, win, axes, (s, e)),
        PoolKind::Avg { count_include_pad } => rows::<false>(count_include_pad, x, out, win, axes, (s, e)),
    }
}

thread_local! {
    /// The accumulators of the running output row segment.
    static ACC: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

fn rows<const MAX: bool>(
    cip: bool,
    x: &TensorView,
    out: &TensorView,
    win: &Window,
    axes: &[Axis; 2],
    (s, e): (usize, usize),
) {
    let (c_n, oh_n, ow_n) = (out.shape()[1], out.shape()[2], out.shape()[3]);
    let (in_h, in_w) = (x.shape()[2], x.shape()[3]);
    let (xs, os) = (x.strides(), out.strides());
    let [rows, cols] = axes;
    let (sh, sw, dh, dw) = (win.strides[0], win.strides[1], win.dilations[0], win.dilations[1]);
    let (ph, pw) = (win.pads[0] as isize, win.pads[1] as isize);
    ACC.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        if scratch.len() < ow_n {
            scratch.resize(ow_n, 0.0);
        }
        let mut flat = s;
        while flat < e {
            let (plane, rem) = (flat / (oh_n * ow_n), flat % (oh_n * ow_n));
            let (oh, ow0) = (rem / ow_n, rem % ow_n);
            let ow1 = ow_n.min(ow0 + (e - flat));
            let (n, c) = (plane / c_n, plane % c_n);
            let base = (x.ptr::<f32>() as *const f32).wrapping_offset(n as isize * xs[0] + c as isize * xs[1]);
            let acc = &mut scratch[ow0..ow1];
            acc.fill(if MAX { f32::NEG_INFINITY } else { 0.0 });
            for kh in rows.lo[oh]..rows.hi[oh] {
                let ih = (oh * sh + kh * dh) as isize - ph;
                debug_assert!(ih >= 0 && ih < in_h as isize);
                let xr = base.wrapping_offset(ih * xs[2]);
                for kw in 0..win.kernel[1] {
                    let off = (kw * dw) as isize - pw;
                    let (lo, hi) = inside(ow_n, in_w, sw, off);
                    let (lo, hi) = (lo.max(ow0), hi.min(ow1));
                    for ow in lo..hi {
                        let iw = ow as isize * sw as isize + off;
                        // SAFETY: kh is in the row table's [lo, hi) and iw in [0, W)
                        // (`inside`), so the element is addressed by the x view
                        // (contract); x is only read.
                        let v = unsafe { xr.wrapping_offset(iw * xs[3]).read() };
                        let a = &mut acc[ow - ow0];
                        if MAX {
                            if v > *a || v.is_nan() {
                                *a = v;
                            }
                        } else {
                            *a += v;
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
            flat += ow1 - ow0;
        }
    });
}
