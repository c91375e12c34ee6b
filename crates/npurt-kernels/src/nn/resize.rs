//! ONNX `Resize` (nearest, linear, cubic) over any axes, as a separable filter: each axis
//! gets a table of taps (input index, weight) per output index — 1 for nearest (and for
//! an axis left unchanged), 2 for linear, 4 for cubic — and each output element sums
//! the product of its axes' taps. Out-of-range neighbours take the edge value (onnx.reference's
//! edge padding); `exclude_outside` drops them and renormalises (cubic).

use super::check_f32;
use crate::tensor::{check_dtype, check_output};
use crate::{KernelArgError, Launch, TensorView};
use npurt_core::{BlockCtx, Kernel, KernelFault};
use smallvec::SmallVec;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeMode {
    Nearest,
    Linear,
    Cubic,
}

/// ONNX's `coordinate_transformation_mode` (output coordinate → input coordinate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordMode {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfHalfPixelForNn,
}

/// ONNX's `nearest_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ResizeArgs {
    pub mode: ResizeMode,
    pub coord: CoordMode,
    pub nearest: NearestMode,
    pub cubic_a: f64,
    pub exclude_outside: bool,
    /// Per-axis scales used by the coordinate transform (ONNX's `scales` input); `None`:
    /// `out / in` (the `sizes` input).
    pub scales: Option<Vec<f64>>,
}

impl CoordMode {
    pub fn from_name(s: &str) -> Option<CoordMode> {
        Some(match s {
            "half_pixel" => CoordMode::HalfPixel,
            "half_pixel_symmetric" => CoordMode::HalfPixelSymmetric,
            "pytorch_half_pixel" => CoordMode::PytorchHalfPixel,
            "align_corners" => CoordMode::AlignCorners,
            "asymmetric" => CoordMode::Asymmetric,
            "tf_half_pixel_for_nn" => CoordMode::TfHalfPixelForNn,
            _ => return None,
        })
    }

    /// The input coordinate of output index `x` on an axis resized from `input` to `out`
    /// elements with `scale` (onnx.reference's formulas; `scale·input` is the real-valued
    /// output length).
    pub fn source(self, x: usize, scale: f64, input: usize, out: usize) -> f64 {
        let (x, inp) = (x as f64, input as f64);
        let out_f = scale * inp;
        match self {
            CoordMode::HalfPixel => (x + 0.5) / scale - 0.5,
            CoordMode::HalfPixelSymmetric => {
                let adj = out as f64 / out_f;
                let offset = inp / 2.0 * (1.0 - adj);
                offset + (x + 0.5) / scale - 0.5
            }
            CoordMode::PytorchHalfPixel if out_f == 1.0 => -0.5,
            CoordMode::PytorchHalfPixel => (x + 0.5) / scale - 0.5,
            CoordMode::AlignCorners if out_f == 1.0 => 0.0,
            CoordMode::AlignCorners => x * (inp - 1.0) / (out_f - 1.0),
            CoordMode::Asymmetric => x / scale,
            CoordMode::TfHalfPixelForNn => (x + 0.5) / scale,
        }
    }
}

impl NearestMode {
    pub fn from_name(s: &str) -> Option<NearestMode> {
        Some(match s {
            "round_prefer_floor" => NearestMode::RoundPreferFloor,
            "round_prefer_ceil" => NearestMode::RoundPreferCeil,
            "floor" => NearestMode::Floor,
            "ceil" => NearestMode::Ceil,
            _ => return None,
        })
    }

    /// The nearest index of coordinate `c` (before clamping).
    pub fn pick(self, c: f64) -> i64 {
        let f = c.floor();
        let r = c - f;
        let up = match self {
            NearestMode::RoundPreferFloor => r > 0.5,
            NearestMode::RoundPreferCeil => r >= 0.5,
            NearestMode::Floor => false,
            NearestMode::Ceil => r > 0.0,
        };
        f as i64 + up as i64
    }
}

/// Taps of one axis: `taps` per output index, flattened (`(input index, weight)`).
pub(crate) fn axis_taps(args: &ResizeArgs, scale: f64, input: usize, out: usize) -> (usize, Vec<(usize, f32)>) {
    let last = input as i64 - 1;
    let clamp = |i: i64| i.clamp(0, last) as usize;
    let taps = match args.mode {
        ResizeMode::Nearest => 1,
        ResizeMode::Linear => 2,
        ResizeMode::Cubic => 4,
    };
    let mut v = Vec::with_capacity(out * taps);
    let a = args.cubic_a;
    for x in 0..out {
        let c = args.coord.source(x, scale, input, out);
        match args.mode {
            ResizeMode::Nearest => v.push((clamp(args.nearest.pick(c)), 1.0)),
            ResizeMode::Linear => {
                let f = c.floor();
                let r = c - f;
                v.push((clamp(f as i64), (1.0 - r) as f32));
                v.push((clamp(f as i64 + 1), r as f32));
            }
            ResizeMode::Cubic => {
                let f = c.floor();
                let r = c - f;
                let near = |t: f64| ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0;
                let far = |t: f64| ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a;
                let mut w = [far(r + 1.0), near(r), near(1.0 - r), far(2.0 - r)];
                let base = f as i64 - 1;
                if args.exclude_outside {
                    for (t, wt) in w.iter_mut().enumerate() {
                        let i = base + t as i64;
                        if i < 0 || i > last {
                            *wt = 0.0;
                        }
                    }
                    let s: f64 = w.iter().sum();
                    if s != 0.0 {
                        w.iter_mut().for_each(|wt| *wt /= s);
                    }
                }
                for (t, wt) in w.iter().enumerate() {
                    v.push((clamp(base + t as i64), *wt as f32));
                }
            }
        }
    }
    // An axis every output of which reads one input element with weight 1 needs one tap.
    if taps > 1 {
        let single: Option<Vec<(usize, f32)>> = v
            .chunks(taps)
            .map(|ch| {
                let nz: SmallVec<[&(usize, f32); 4]> = ch.iter().filter(|t| t.1 != 0.0).collect();
                (nz.len() == 1 && nz[0].1 == 1.0).then(|| *nz[0])
            })
            .collect();
        if let Some(s) = single {
            return (1, s);
        }
    }
    (taps, v)
}

/// `out = resize(x)`: float32 `x` of any rank, `out` of the same rank (its shape gives the
/// output sizes); `args.scales`, when given, has one positive entry per axis. `out` must
/// not overlap `x`; an empty input axis with a non-empty output axis is an error.
pub fn resize(x: &TensorView, out: &TensorView, args: &ResizeArgs, cores: u32) -> Result<Launch, KernelArgError> {
    let op = "resize";
    check_f32(op, x)?;
    check_dtype(op, "out", out, x.dtype())?;
    let nd = x.ndim();
    if out.ndim() != nd {
        return Err(KernelArgError::Rank {
            op,
            what: "out",
            expected: "the rank of x",
            got: out.ndim(),
        });
    }
    if let Some(s) = &args.scales {
        if s.len() != nd || s.iter().any(|&v| !(v > 0.0 && v.is_finite())) {
            return Err(KernelArgError::Invalid {
                op,
                detail: format!("scales {s:?} must have {nd} positive entries"),
            });
        }
    }
    check_output(op, out, &[("x", x)], false)?;
    let mut axes = Vec::with_capacity(nd);
    for d in 0..nd {
        let (i, o) = (x.shape()[d], out.shape()[d]);
        if i == 0 && o > 0 {
            return Err(KernelArgError::Invalid {
                op,
                detail: format!("cannot resize the empty axis {d} to {o}"),
            });
        }
        let scale = args.scales.as_ref().map_or(o as f64 / i.max(1) as f64, |s| s[d]);
        axes.push(if i == 0 {
            (1, Vec::new())
        } else {
            axis_taps(args, scale, i, o)
        });
    }
    let work = out.numel() * axes.iter().map(|a| a.0).product::<usize>();
    let blocks = crate::plan::blocks_for(work, 1 << 16, cores);
    Ok((
        Arc::new(ResizeKernel {
            x: x.clone(),
            out: out.clone(),
            axes,
        }),
        blocks,
    ))
}

struct ResizeKernel {
    x: TensorView,
    out: TensorView,
    axes: Vec<(usize, Vec<(usize, f32)>)>,
}

impl ResizeKernel {
    fn run(&self, s: usize, e: usize) {
        let nd = self.out.ndim();
        let (xs, os) = (self.x.strides(), self.out.strides());
        let mut idx: SmallVec<[usize; 6]> = SmallVec::from_elem(0, nd);
        let mut t: SmallVec<[usize; 6]> = SmallVec::from_elem(0, nd);
        let px = self.x.ptr::<f32>() as *const f32;
        for flat in s..e {
            super::unravel(flat, self.out.shape(), &mut idx);
            t.iter_mut().for_each(|v| *v = 0);
            let mut acc = 0.0f32;
            'taps: loop {
                let (mut off, mut w) = (0isize, 1.0f32);
                for d in 0..nd {
                    let (n, tab) = &self.axes[d];
                    let (i, wt) = tab[idx[d] * n + t[d]];
                    off += i as isize * xs[d];
                    w *= wt;
                }
                if w != 0.0 {
                    // SAFETY: every tap index is clamped into x's shape (axis_taps), so the
                    // element is addressed by x (contract); only read.
                    acc += w * unsafe { px.wrapping_offset(off).read() };
                }
                let mut d = nd;
                loop {
                    if d == 0 {
                        break 'taps;
                    }
                    d -= 1;
                    t[d] += 1;
                    if t[d] < self.axes[d].0 {
                        break;
                    }
                    t[d] = 0;
                }
            }
            let ooff: isize = idx.iter().zip(os).map(|(&i, &st)| i as isize * st).sum();
            // SAFETY: idx is inside out's shape; out overlaps no input (check_output);
            // blocks own disjoint ranges.
            unsafe { self.out.ptr::<f32>().wrapping_offset(ooff).write(acc) }
        }
    }
}

impl Kernel for ResizeKernel {
    fn name(&self) -> &str {
        "resize"
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = crate::elementwise::split_aligned(blk, self.out.numel(), 16);
        self.run(s, e);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(mode: ResizeMode, coord: CoordMode) -> ResizeArgs {
        ResizeArgs {
            mode,
            coord,
            nearest: NearestMode::RoundPreferFloor,
            cubic_a: -0.75,
            exclude_outside: false,
            scales: None,
        }
    }

    #[test]
    fn coordinate_modes() {
        assert_eq!(CoordMode::HalfPixel.source(0, 2.0, 2, 4), -0.25);
        assert_eq!(CoordMode::HalfPixel.source(3, 2.0, 2, 4), 1.25);
        assert_eq!(CoordMode::AlignCorners.source(3, 2.0, 2, 4), 1.0);
        assert_eq!(CoordMode::AlignCorners.source(0, 0.5, 2, 1), 0.0);
        assert_eq!(CoordMode::Asymmetric.source(3, 2.0, 2, 4), 1.5);
        assert_eq!(CoordMode::TfHalfPixelForNn.source(0, 2.0, 2, 4), 0.25);
        assert_eq!(CoordMode::PytorchHalfPixel.source(0, 0.25, 4, 1), -0.5);
        assert_eq!(CoordMode::HalfPixelSymmetric.source(0, 2.0, 2, 4), -0.25);
    }

    #[test]
    fn nearest_rounding() {
        assert_eq!(NearestMode::RoundPreferFloor.pick(1.5), 1);
        assert_eq!(NearestMode::RoundPreferCeil.pick(1.5), 2);
        assert_eq!(NearestMode::RoundPreferFloor.pick(1.6), 2);
        assert_eq!(NearestMode::Floor.pick(1.9), 1);
        assert_eq!(NearestMode::Ceil.pick(1.1), 2);
        assert_eq!(NearestMode::Ceil.pick(1.0), 1);
    }

    #[test]
    fn taps_linear_and_identity() {
        let (n, t) = axis_taps(&args(ResizeMode::Linear, CoordMode::AlignCorners), 1.5, 2, 3);
        assert_eq!(n, 2);
        assert_eq!(&t[..], &[(0, 1.0), (1, 0.0), (0, 0.5), (1, 0.5), (1, 1.0), (1, 0.0)]);
        // Unchanged axis under half_pixel: one tap of weight 1.
        let (n, t) = axis_taps(&args(ResizeMode::Cubic, CoordMode::HalfPixel), 1.0, 3, 3);
        assert_eq!((n, t), (1, vec![(0, 1.0), (1, 1.0), (2, 1.0)]));
        // Cubic weights sum to 1.
        let (n, t) = axis_taps(&args(ResizeMode::Cubic, CoordMode::HalfPixel), 2.0, 4, 8);
        assert_eq!(n, 4);
        for ch in t.chunks(4) {
            assert!((ch.iter().map(|x| x.1).sum::<f32>() - 1.0).abs() < 1e-6);
        }
    }
}
