//! Depthwise 2-D convolution (one input and one output channel per group, MobileNet's
//! 3×3 blocks) computed directly, row by row: for each output row, every kernel tap adds
//! `w · x` over the output columns whose input column is inside the image (a contiguous,
//! vectorisable run when the column stride is 1). The GEMM path would multiply a 1×K
//! weight row by a K×P im2col tile per channel, paying a GEMM call and the im2col copy
//! for a few multiply-adds per output.
//!
//! Each output element sums its taps in (kernel row, kernel column) order, skipping the
//! padding, then adds the bias: the order depends on the shapes only, so results are
//! bitwise identical for any block count.

/// The geometry of one depthwise plane (input and output sizes, kernel, strides,
/// dilations and begin pads, each `[rows, columns]`).
pub(super) struct Plane {
    pub input: [usize; 2],
    pub output: [usize; 2],
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    pub pads: [usize; 2],
}

/// The half-open range of output indices `o` whose input index `o·s + off` lies in
/// `[0, n)`, within `[0, out)`.
pub(super) fn inside(out: usize, n: usize, s: usize, off: isize) -> (usize, usize) {
    let s = s as isize;
    let lo = if off >= 0 { 0 } else { (-off + s - 1) / s };
    let hi = if n as isize <= off {
        0
    } else {
        (n as isize - off + s - 1) / s
    };
    let hi = hi.clamp(0, out as isize) as usize;
    ((lo as usize).min(hi), hi)
}

/// Row offsets of a 2-D strided operand: `base`, then `[row stride, column stride]`.
pub(super) type Strided<P> = (P, [isize; 2]);

/// Computes one output plane: `out = conv(x, w) (+ bias)` (`row`: scratch, grown as needed).
///
/// # Safety
/// `x` must address `input[0] × input[1]` readable f32 elements at its strides, `w`
/// `kernel[0] × kernel[1]` readable elements, and `out` `output[0] × output[1]` writable
/// elements that overlap neither `x` nor `w` and that no other thread accesses meanwhile.
pub(super) unsafe fn plane(
    g: &Plane,
    (x, xs): Strided<*const f32>,
    (w, ws): Strided<*const f32>,
    bias: Option<f32>,
    (out, os): Strided<*mut f32>,
    row: &mut Vec<f32>,
) {
    let [oh_n, ow_n] = g.output;
    if row.len() < ow_n {
        row.resize(ow_n, 0.0);
    }
    let acc = &mut row[..ow_n];
    // Input column of output column 0 for each kernel column.
    let cols: smallvec::SmallVec<[isize; 8]> = (0..g.kernel[1])
        .map(|kw| (kw * g.dilations[1]) as isize - g.pads[1] as isize)
        .collect();
    for oh in 0..oh_n {
        acc.fill(0.0);
        for kh in 0..g.kernel[0] {
            let ih = (oh * g.strides[0] + kh * g.dilations[0]) as isize - g.pads[0] as isize;
            if ih < 0 || ih >= g.input[0] as isize {
                continue;
            }
            let xr = x.wrapping_offset(ih * xs[0]);
            for (kw, &off) in cols.iter().enumerate() {
                // SAFETY: (kh, kw) is inside the kernel (caller's contract for w).
                let wv = unsafe { w.wrapping_offset(kh as isize * ws[0] + kw as isize * ws[1]).read() };
                let (lo, hi) = inside(ow_n, g.input[1], g.strides[1], off);
                if lo >= hi {
                    continue;
                }
                let first = xr.wrapping_offset((lo as isize * g.strides[1] as isize + off) * xs[1]);
                if g.strides[1] == 1 && xs[1] == 1 {
                    // SAFETY: input columns lo+off .. hi+off of row ih are inside the image
                    // (`inside`), so the run is addressed by x (caller's contract); x does
                    // not overlap the scratch row.
                    let src = unsafe { std::slice::from_raw_parts(first, hi - lo) };
                    for (a, &v) in acc[lo..hi].iter_mut().zip(src) {
                        *a += wv * v;
                    }
                } else {
                    let step = g.strides[1] as isize * xs[1];
                    for (t, a) in acc[lo..hi].iter_mut().enumerate() {
                        // SAFETY: as above, element by element (column (lo+t)·s + off).
                        *a += wv * unsafe { first.wrapping_offset(t as isize * step).read() };
                    }
                }
            }
        }
        let orow = out.wrapping_offset(oh as isize * os[0]);
        for (ow, &a) in acc.iter().enumerate() {
            let v = match bias {
                Some(b) => a + b,
                None => a,
            };
            // SAFETY: (oh, ow) is inside the output plane, owned by the caller's block.
            unsafe { orow.wrapping_offset(ow as isize * os[1]).write(v) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::inside;

    #[test]
    fn inside_ranges_match_a_scan() {
        for out in 0..6 {
            for n in 0..6 {
                for s in 1..4 {
                    for off in -4isize..4 {
                        let want: Vec<usize> = (0..out)
                            .filter(|&o| (0..n as isize).contains(&(o as isize * s as isize + off)))
                            .collect();
                        let (lo, hi) = inside(out, n, s, off);
                        assert_eq!((lo..hi).collect::<Vec<_>>(), want, "out {out} n {n} s {s} off {off}");
                    }
                }
            }
        }
    }
}
