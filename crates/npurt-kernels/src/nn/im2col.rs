//! The im2col tile of a convolution on the GEMM path: rows `C/group·ΠK` (input channel,
//! then kernel position) × a range of output positions, zero where a window reaches the
//! padding; runs inside the input are copied (memcpy for unit strides).

use super::{unravel, Window};
use crate::TensorView;
use smallvec::SmallVec;

type Idx = SmallVec<[usize; 4]>;

/// Rows `kk` × columns `p0..p1` of the im2col matrix of image `n`, group `g`.
pub(super) fn im2col(
    x: &TensorView,
    win: &Window,
    out_sp: &[usize],
    (cg, kk): (usize, usize),
    (n, g, p0, p1): (usize, usize, usize, usize),
    col: &mut [f32],
) {
    let k = win.rank();
    let cols = p1 - p0;
    let (xs, in_sp) = (x.strides(), &x.shape()[2..]);
    let wout = out_sp[k - 1];
    let (win_last, s_last, d_last, pb_last) = (
        in_sp[k - 1] as isize,
        win.strides[k - 1] as isize,
        win.dilations[k - 1] as isize,
        win.pads[k - 1] as isize,
    );
    let xs_last = xs[1 + k];
    let base = x.ptr::<f32>() as *const f32;
    let base = base.wrapping_offset(n as isize * xs[0] + (g * cg) as isize * xs[1]);
    let kprod = kk / cg.max(1);
    let mut kidx: Idx = SmallVec::from_elem(0, k);
    let mut oidx: Idx = SmallVec::from_elem(0, k);
    for row in 0..kk {
        let (c, kr) = (row / kprod, row % kprod);
        unravel(kr, &win.kernel, &mut kidx);
        let dst = &mut col[row * cols..(row + 1) * cols];
        let xc = base.wrapping_offset(c as isize * xs[1]);
        let off_last = kidx[k - 1] as isize * d_last - pb_last;
        let mut p = p0;
        while p < p1 {
            let (r, j0) = (p / wout, p % wout);
            let j1 = wout.min(j0 + (p1 - p));
            let seg = &mut dst[p - p0..p - p0 + (j1 - j0)];
            p += j1 - j0;
            unravel(r, &out_sp[..k - 1], &mut oidx[..k - 1]);
            let mut off = 0isize;
            let mut inside = true;
            for d in 0..k - 1 {
                let i = (oidx[d] * win.strides[d] + kidx[d] * win.dilations[d]) as isize - win.pads[d] as isize;
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

#[cfg(test)]
mod tests {
    use super::im2col;
    use crate::nn::Window;
    use crate::{DType, HostTensor};

    #[test]
    fn tiles_match_a_naive_gather() {
        // x [1, 2, 4, 5] = 0..40, kernel 2x3, stride (1, 2), pads (1, 0, 0, 1): columns 2..7.
        let data: Vec<f64> = (0..40).map(|v| v as f64).collect();
        let x = HostTensor::from_f64(DType::F32, &data, &[1, 2, 4, 5]);
        // SAFETY: only this test uses the tensor.
        let xv = unsafe { x.view() };
        let win = Window::new("conv", 2, &[2, 3], Some(&[1, 2]), Some(&[1, 0, 0, 1]), None).unwrap();
        let out_sp = win.out_shape("conv", &[4, 5], false).unwrap();
        assert_eq!(out_sp, vec![4, 2]);
        let (kk, p0, p1) = (2 * 6, 2, 7);
        let mut col = vec![f32::NAN; kk * (p1 - p0)];
        im2col(&xv, &win, &out_sp, (2, kk), (0, 0, p0, p1), &mut col);
        for row in 0..kk {
            let (c, kh, kw) = (row / 6, (row % 6) / 3, row % 3);
            for p in p0..p1 {
                let (oh, ow) = (p / 2, p % 2);
                let (ih, iw) = (oh as isize + kh as isize - 1, (ow * 2 + kw) as isize);
                let want = if (0..4).contains(&ih) && (0..5).contains(&iw) {
                    (c * 20 + ih as usize * 5 + iw as usize) as f32
                } else {
                    0.0
                };
                assert_eq!(col[row * (p1 - p0) + p - p0], want, "row {row} position {p}");
            }
        }
    }
}
