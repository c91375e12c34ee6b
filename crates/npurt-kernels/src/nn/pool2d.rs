//! The 2-D pooling fast path: each output row and column looks its window's part inside
//! the input up in a table built at launch (`Axis`), instead of recomputing it per element
//! over an index odometer. Same values, same visiting order (kernel row, then column) and
//! same averaging rule as the general path in `pool.rs`.

use super::pool::PoolKind;
use super::Window;
use crate::TensorView;

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
pub(super) fn run(
    kind: PoolKind,
    x: &TensorView,
    out: &TensorView,
    win: &Window,
    axes: &[Axis; 2],
    (s, e): (usize, usize),
) {
    let (c_n, oh_n, ow_n) = (out.shape()[1], out.shape()[2], out.shape()[3]);
    let (xs, os) = (x.strides(), out.strides());
    let [rows, cols] = axes;
    let (sh, sw, dh, dw) = (win.strides[0], win.strides[1], win.dilations[0], win.dilations[1]);
    let (ph, pw) = (win.pads[0] as isize, win.pads[1] as isize);
    let mut flat = s;
    while flat < e {
        let (plane, rem) = (flat / (oh_n * ow_n), flat % (oh_n * ow_n));
        let (oh, ow0) = (rem / ow_n, rem % ow_n);
        let ow1 = ow_n.min(ow0 + (e - flat));
        let (n, c) = (plane / c_n, plane % c_n);
        let base = (x.ptr::<f32>() as *const f32).wrapping_offset(n as isize * xs[0] + c as isize * xs[1]);
        let obase = out
            .ptr::<f32>()
            .wrapping_offset(n as isize * os[0] + c as isize * os[1] + oh as isize * os[2]);
        let (hlo, hhi) = (rows.lo[oh], rows.hi[oh]);
        for ow in ow0..ow1 {
            let (wlo, whi) = (cols.lo[ow], cols.hi[ow]);
            let v = if hlo >= hhi || wlo >= whi {
                match kind {
                    PoolKind::Max => f32::NEG_INFINITY,
                    PoolKind::Avg { .. } => f32::NAN,
                }
            } else {
                let (mut acc, mut cnt) = match kind {
                    PoolKind::Max => (f32::NEG_INFINITY, 0usize),
                    PoolKind::Avg { .. } => (0.0f32, 0usize),
                };
                for kh in hlo..hhi {
                    let ih = (oh * sh + kh * dh) as isize - ph;
                    for kw in wlo..whi {
                        let iw = (ow * sw + kw * dw) as isize - pw;
                        // SAFETY: kh in [lo, hi) of the row table and kw of the column
                        // table map inside the input (Axis::new), so the element is
                        // addressed by the x view (contract); x is only read.
                        let v = unsafe { base.wrapping_offset(ih * xs[2] + iw * xs[3]).read() };
                        match kind {
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
                    }
                }
                match kind {
                    PoolKind::Max => acc,
                    PoolKind::Avg {
                        count_include_pad: true,
                    } => acc / (rows.padded[oh] * cols.padded[ow]) as f32,
                    PoolKind::Avg { .. } => acc / cnt as f32,
                }
            };
            // SAFETY: (n, c, oh, ow) is inside out's shape, so the element is addressed by
            // the out view (contract); out overlaps no input and blocks own disjoint ranges.
            unsafe { obase.wrapping_offset(ow as isize * os[3]).write(v) }
        }
        flat += ow1 - ow0;
    }
}
