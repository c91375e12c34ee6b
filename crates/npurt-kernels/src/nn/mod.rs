//! Neural-network operators with ONNX semantics: convolution and its transpose (on the
//! GEMM path), pooling, batch normalisation, LRN, resize, gather, pad/tile, top-k, range.
//!
//! Layout is NC + spatial (`[N, C, D1, ..., Dk]`, k ≥ 1). Window attributes use ONNX's
//! layout: `pads = [b1, ..., bk, e1, ..., ek]` (begins, then ends). This file owns the
//! window rule ([`Window`], [`window_out_len`]) every windowed kernel and the Python front
//! use; the kernels are one per file.

mod chan;
mod conv;
mod conv_transpose;
mod direct;
mod direct_dw;
mod direct_simd;
mod epilogue;
mod im2col;
mod index;
mod pad;
mod pool;
mod pool2d;
mod pool_max;
mod resize;
mod row_cursor;
mod topk;

pub use chan::{batch_norm, lrn};
pub use conv::conv;
pub use conv_transpose::{conv_transpose, conv_transpose_out_shape};
pub use epilogue::Epilogue;
pub use index::{arange, arange_len, take, take_out_shape};
pub use pad::{pad, tile, PadMode};
pub use pool::{pool, PoolKind};
pub use resize::{resize, CoordMode, NearestMode, ResizeArgs, ResizeMode};
pub use topk::topk;

use crate::KernelArgError;

/// The window of a convolution or pooling over `k` spatial dims, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub kernel: Vec<usize>,
    pub strides: Vec<usize>,
    /// `[b1..bk, e1..ek]`.
    pub pads: Vec<usize>,
    pub dilations: Vec<usize>,
}

fn invalid(op: &'static str, detail: String) -> KernelArgError {
    KernelArgError::Invalid { op, detail }
}

impl Window {
    /// Checks the attributes for `k` spatial dims: `strides`/`dilations` default to 1 and
    /// must be ≥ 1, `pads` defaults to 0 and has `2k` entries, kernel sizes are ≥ 1.
    pub fn new(
        op: &'static str,
        k: usize,
        kernel: &[usize],
        strides: Option<&[usize]>,
        pads: Option<&[usize]>,
        dilations: Option<&[usize]>,
    ) -> Result<Window, KernelArgError> {
        let ones = vec![1usize; k];
        let zeros = vec![0usize; 2 * k];
        let check = |what: &str, v: &[usize], n: usize, min: usize| {
            if v.len() != n {
                return Err(invalid(op, format!("{what} has {} entries, expected {n}", v.len())));
            }
            if v.iter().any(|&x| x < min) {
                return Err(invalid(op, format!("{what} {v:?} must be >= {min}")));
            }
            Ok(v.to_vec())
        };
        Ok(Window {
            kernel: check("kernel_shape", kernel, k, 1)?,
            strides: check("strides", strides.unwrap_or(&ones), k, 1)?,
            pads: check("pads", pads.unwrap_or(&zeros), 2 * k, 0)?,
            dilations: check("dilations", dilations.unwrap_or(&ones), k, 1)?,
        })
    }

    pub fn rank(&self) -> usize {
        self.kernel.len()
    }

    /// The kernel's extent along `d`: `(k - 1)·dilation + 1`.
    pub fn extent(&self, d: usize) -> usize {
        (self.kernel[d] - 1) * self.dilations[d] + 1
    }

    /// The output sizes for the input sizes `input` (see [`window_out_len`]).
    pub fn out_shape(&self, op: &'static str, input: &[usize], ceil_mode: bool) -> Result<Vec<usize>, KernelArgError> {
        (0..self.rank())
            .map(|d| {
                window_out_len(
                    input[d],
                    self.extent(d),
                    self.strides[d],
                    self.pads[d],
                    self.pads[self.rank() + d],
                    ceil_mode,
                )
                .ok_or_else(|| {
                    invalid(
                        op,
                        format!(
                            "spatial dim {d}: input {} padded by {}+{} is smaller than the kernel extent {}",
                            input[d],
                            self.pads[d],
                            self.pads[self.rank() + d],
                            self.extent(d)
                        ),
                    )
                })
            })
            .collect()
    }
}

/// ONNX's output length of a window of extent `ext` sliding with `stride` over `input`
/// padded by `pb` + `pe`: `floor((input + pb + pe - ext) / stride) + 1`, or with
/// `ceil_mode` the ceiling, minus one when the last window would start inside the end
/// padding (PyTorch's and onnx.reference's rule). `None` when the padded input is shorter
/// than the window.
pub fn window_out_len(input: usize, ext: usize, stride: usize, pb: usize, pe: usize, ceil_mode: bool) -> Option<usize> {
    let span = (input + pb + pe).checked_sub(ext)?;
    let mut n = if ceil_mode {
        span.div_ceil(stride)
    } else {
        span / stride
    } + 1;
    if ceil_mode && (n - 1) * stride >= input + pb {
        n -= 1;
    }
    Some(n)
}

/// ONNX's `auto_pad` for a conv or pool: `"SAME_UPPER"` / `"SAME_LOWER"` pad so the output
/// is `ceil(input / stride)` (the odd pad at the end, resp. the begin), `"VALID"` and
/// `"NOTSET"` pad nothing. Returns `[b1..bk, e1..ek]`.
pub fn auto_pads(
    mode: &str,
    input: &[usize],
    kernel: &[usize],
    strides: &[usize],
    dilations: &[usize],
) -> Result<Vec<usize>, KernelArgError> {
    let k = input.len();
    if kernel.len() != k || strides.len() != k || dilations.len() != k || strides.contains(&0) {
        return Err(invalid(
            "auto_pad",
            format!("input {input:?}, kernel {kernel:?}, strides {strides:?}, dilations {dilations:?} do not fit"),
        ));
    }
    let mut pads = vec![0usize; 2 * k];
    match mode {
        "VALID" | "NOTSET" => {}
        "SAME_UPPER" | "SAME_LOWER" => {
            for d in 0..k {
                let out = input[d].div_ceil(strides[d]);
                let ext = (kernel[d].max(1) - 1) * dilations[d] + 1;
                let total = ((out.max(1) - 1) * strides[d] + ext).saturating_sub(input[d]);
                let (small, big) = (total / 2, total - total / 2);
                (pads[d], pads[k + d]) = if mode == "SAME_UPPER" {
                    (small, big)
                } else {
                    (big, small)
                };
            }
        }
        _ => return Err(invalid("auto_pad", format!("unknown auto_pad {mode:?}"))),
    }
    Ok(pads)
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

/// Checks `x` is `[N, C, spatial...]` with at least one spatial dim.
pub(crate) fn spatial_rank(op: &'static str, what: &'static str, ndim: usize) -> Result<usize, KernelArgError> {
    if ndim < 3 {
        return Err(KernelArgError::Rank {
            op,
            what,
            expected: "at least 3 ([N, C, spatial...])",
            got: ndim,
        });
    }
    Ok(ndim - 2)
}

/// f32 only (the NN kernels compute and store f32; cast first).
pub(crate) fn check_f32(op: &'static str, t: &crate::TensorView) -> Result<(), KernelArgError> {
    if t.dtype() != crate::DType::F32 {
        return Err(KernelArgError::UnsupportedDType {
            op,
            dtype: t.dtype(),
            hint: " (cast to float32 first)",
        });
    }
    Ok(())
}

/// Row-major unravel of `i` over `shape` into `idx`.
#[inline]
pub(crate) fn unravel(mut i: usize, shape: &[usize], idx: &mut [usize]) {
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_len_floor_and_ceil() {
        // 5 wide, kernel 3, stride 2: windows at 0, 2 -> 2.
        assert_eq!(window_out_len(5, 3, 2, 0, 0, false), Some(2));
        assert_eq!(window_out_len(5, 3, 2, 0, 0, true), Some(2));
        // 6 wide: floor 2, ceil 3 (the last window starts at 4 < 6).
        assert_eq!(window_out_len(6, 3, 2, 0, 0, false), Some(2));
        assert_eq!(window_out_len(6, 3, 2, 0, 0, true), Some(3));
        // 4 wide, kernel 3, stride 2, ceil (ONNX's averagepool_2d_ceil): 2.
        assert_eq!(window_out_len(4, 3, 2, 0, 0, true), Some(2));
        // A window starting in the end padding is dropped: 5 wide, pads 1+1, k 2, s 3.
        assert_eq!(window_out_len(5, 2, 3, 1, 1, true), Some(2));
        // Padding, dilation (extent 5).
        assert_eq!(window_out_len(7, 5, 1, 2, 2, false), Some(7));
        assert_eq!(window_out_len(2, 3, 1, 0, 0, false), None);
        assert_eq!(window_out_len(2, 3, 1, 1, 0, false), Some(1));
    }

    #[test]
    fn window_checks_attributes() {
        let w = Window::new("conv", 2, &[3, 3], Some(&[2, 1]), Some(&[1, 0, 1, 2]), Some(&[1, 2])).unwrap();
        assert_eq!(w.extent(1), 5);
        assert_eq!(w.out_shape("conv", &[8, 8], false).unwrap(), vec![4, 6]);
        assert!(Window::new("conv", 2, &[3], None, None, None).is_err());
        assert!(Window::new("conv", 2, &[3, 3], Some(&[0, 1]), None, None).is_err());
        assert!(Window::new("conv", 2, &[3, 3], None, Some(&[1, 1]), None).is_err());
        assert!(Window::new("conv", 1, &[0], None, None, None).is_err());
        assert!(w.out_shape("conv", &[1, 1], false).is_err());
    }

    #[test]
    fn auto_pads_same_and_valid() {
        // 5 wide, kernel 3, stride 2: out 3, total pad 2 -> 1 + 1.
        assert_eq!(auto_pads("SAME_UPPER", &[5], &[3], &[2], &[1]).unwrap(), vec![1, 1]);
        // 4 wide, kernel 3, stride 1: total 2; 6 wide, kernel 2, stride 2: total 0.
        assert_eq!(
            auto_pads("SAME_LOWER", &[4, 6], &[3, 2], &[1, 2], &[1, 1]).unwrap(),
            vec![1, 0, 1, 0]
        );
        // 4 wide, kernel 2, stride 1: total 1, odd pad at the end (UPPER) or begin (LOWER).
        assert_eq!(auto_pads("SAME_UPPER", &[4], &[2], &[1], &[1]).unwrap(), vec![0, 1]);
        assert_eq!(auto_pads("SAME_LOWER", &[4], &[2], &[1], &[1]).unwrap(), vec![1, 0]);
        assert_eq!(auto_pads("VALID", &[4], &[2], &[1], &[1]).unwrap(), vec![0, 0]);
        assert!(auto_pads("SAME", &[4], &[2], &[1], &[1]).is_err());
    }

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
