//! Unary maps with parameters or ONNX-specific rounding: erf, reciprocal, floor, ceil,
//! round (half to even), sign, leaky_relu, hard_sigmoid, hard_swish, elu, selu, softplus
//! and clip. Same machinery as [`super::unary`] (broadcast into `out`, in place allowed,
//! the elementwise family's ISA path).

use super::*;

/// A unary map (output dtype = input dtype). Floats compute in f32; `Sign`, `Clip` (and
/// `Floor`/`Ceil`/`Round`, identities) also take integers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Activation {
    Erf,
    Reciprocal,
    Floor,
    Ceil,
    /// Round half to even (ONNX `Round`, numpy's `rint`).
    Round,
    Sign,
    /// `x < 0 ? alpha·x : x`.
    LeakyRelu {
        alpha: f32,
    },
    /// `max(0, min(1, alpha·x + beta))`.
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    /// `x · max(0, min(1, x/6 + 1/2))`.
    HardSwish,
    /// `x < 0 ? alpha·(eˣ - 1) : x`.
    Elu {
        alpha: f32,
    },
    /// `gamma · (x ≤ 0 ? alpha·(eˣ - 1) : x)`.
    Selu {
        alpha: f32,
        gamma: f32,
    },
    /// `ln(1 + eˣ)`.
    Softplus,
    /// `min(max(x, lo), hi)`; a bound of `None` is open (NaN passes through).
    Clip {
        lo: Option<Scalar>,
        hi: Option<Scalar>,
    },
}

impl Activation {
    pub fn name(&self) -> &'static str {
        match self {
            Activation::Erf => "erf",
            Activation::Reciprocal => "reciprocal",
            Activation::Floor => "floor",
            Activation::Ceil => "ceil",
            Activation::Round => "round",
            Activation::Sign => "sign",
            Activation::LeakyRelu { .. } => "leaky_relu",
            Activation::HardSigmoid { .. } => "hard_sigmoid",
            Activation::HardSwish => "hard_swish",
            Activation::Elu { .. } => "elu",
            Activation::Selu { .. } => "selu",
            Activation::Softplus => "softplus",
            Activation::Clip { .. } => "clip",
        }
    }

    fn supports(&self, dtype: DType) -> bool {
        dtype.is_float()
            || (dtype.is_int()
                && matches!(
                    self,
                    Activation::Sign
                        | Activation::Clip { .. }
                        | Activation::Floor
                        | Activation::Ceil
                        | Activation::Round
                ))
    }
}

struct ActKernel {
    op: Activation,
    x: TensorView,
    out: TensorView,
    it: Strided<2>,
}

/// `out = op(x)`; `x` broadcast to `out`'s shape, same dtype; `out` may be `x` itself.
/// Clip bounds must be representable in the dtype.
pub fn activation(op: Activation, x: &TensorView, out: &TensorView, cores: u32) -> Result<Launch, KernelArgError> {
    let name = op.name();
    check_dtype(name, "x", x, out.dtype())?;
    if !op.supports(x.dtype()) {
        return Err(KernelArgError::UnsupportedDType {
            op: name,
            dtype: x.dtype(),
            hint: if x.dtype().is_int() {
                " (cast to a float dtype first)"
            } else {
                ""
            },
        });
    }
    if let Activation::Clip { lo, hi } = op {
        for b in [lo, hi].into_iter().flatten() {
            b.check_for(name, x.dtype())?;
        }
    }
    let xb = broadcast_into(name, x, out)?;
    let it = Strided::new(out.shape(), [out.strides(), xb.strides()]);
    let blocks = blocks_for(it.numel(), GRAIN_TRANSCENDENTAL, cores);
    Ok((
        Arc::new(ActKernel {
            op,
            x: xb,
            out: out.clone(),
            it,
        }),
        blocks,
    ))
}

use formulas as f;

impl ActKernel {
    fn run_best<T: Elem>(&self, s: usize, e: usize) {
        crate::isa::isa_call!(crate::isa::path(crate::isa::Family::Elementwise), ActKernel, self, run::<T: Elem>(s: usize, e: usize))
    }

    #[inline(always)]
    fn map<T: Elem>(&self, s: usize, e: usize, f: impl Fn(f32) -> f32 + Copy) {
        // SAFETY: validated by broadcast_into at launch (out is exactly x or disjoint);
        // blocks get disjoint output ranges.
        unsafe {
            map1(&self.it, &self.out, &self.x, s, e, move |v: T| {
                T::from_f32(f(v.to_f32()))
            })
        }
    }

    #[inline(always)]
    fn run<T: Elem>(&self, s: usize, e: usize) {
        use Activation::*;
        if !T::DTYPE.is_float() {
            // SAFETY (both arms): as in `map`.
            match self.op {
                Sign => unsafe {
                    map1(&self.it, &self.out, &self.x, s, e, |v: T| {
                        T::from_i64(v.to_i64().signum())
                    })
                },
                Clip { lo, hi } => {
                    let (lo, hi) = (
                        lo.map_or(i64::MIN, |b| b.to_elem::<i64>()),
                        hi.map_or(i64::MAX, |b| b.to_elem::<i64>()),
                    );
                    unsafe {
                        map1(&self.it, &self.out, &self.x, s, e, move |v: T| {
                            T::from_i64(v.to_i64().max(lo).min(hi))
                        })
                    }
                }
                _ => unsafe { map1(&self.it, &self.out, &self.x, s, e, |v: T| v) },
            }
            return;
        }
        match self.op {
            Erf => self.map::<T>(s, e, math::erf),
            Reciprocal => self.map::<T>(s, e, |v| 1.0 / v),
            Floor => self.map::<T>(s, e, f32::floor),
            Ceil => self.map::<T>(s, e, f32::ceil),
            Round => self.map::<T>(s, e, f32::round_ties_even),
            Sign => self.map::<T>(s, e, |v| {
                if v > 0.0 {
                    1.0
                } else if v < 0.0 {
                    -1.0
                } else {
                    v
                }
            }),
            LeakyRelu { alpha } => self.map::<T>(s, e, move |v| f::leaky_relu(alpha, v)),
            HardSigmoid { alpha, beta } => self.map::<T>(s, e, move |v| f::hard_sigmoid(alpha, beta, v)),
            HardSwish => self.map::<T>(s, e, f::hard_swish),
            Elu { alpha } => self.map::<T>(s, e, move |v| if v < 0.0 { alpha * (math::exp(v) - 1.0) } else { v }),
            Selu { alpha, gamma } => self.map::<T>(s, e, move |v| {
                gamma * if v <= 0.0 { alpha * (math::exp(v) - 1.0) } else { v }
            }),
            // ln(1 + eˣ) = max(x, 0) + ln(1 + e^-|x|), without overflow.
            Softplus => self.map::<T>(s, e, |v| v.max(0.0) + math::log(1.0 + math::exp(-v.abs()))),
            Clip { lo, hi } => {
                let lo = lo.map_or(f32::NEG_INFINITY, |b| b.to_elem::<f32>());
                let hi = hi.map_or(f32::INFINITY, |b| b.to_elem::<f32>());
                self.map::<T>(s, e, move |v| f::clip(lo, hi, v))
            }
        }
    }
}

impl Kernel for ActKernel {
    fn name(&self) -> &str {
        self.op.name()
    }
    fn run_block(&self, blk: BlockCtx) -> Result<(), KernelFault> {
        let (s, e) = split_aligned(blk, self.it.numel(), ALIGN);
        if s < e {
            dispatch_dtype!(self.out.dtype(), T => self.run_best::<T>(s, e));
        }
        Ok(())
    }
}

/// The float formulas of the activations, one copy each: the elementwise kernels
/// (`unary`, `activation`) map them over arrays and the convolution epilogue
/// (`nn::Epilogue`) applies them to its outputs, so a fused result is bitwise the unfused
/// one. Plain f32 arithmetic (no fused multiply-add), the same bits on every ISA path.
pub(crate) mod formulas {
    /// `max(0, v)`; NaN passes through.
    #[inline(always)]
    pub(crate) fn relu(v: f32) -> f32 {
        if v < 0.0 {
            0.0
        } else {
            v
        }
    }

    /// `v < 0 ? alpha·v : v`.
    #[inline(always)]
    pub(crate) fn leaky_relu(alpha: f32, v: f32) -> f32 {
        if v < 0.0 {
            alpha * v
        } else {
            v
        }
    }

    #[inline(always)]
    fn unit(v: f32) -> f32 {
        v.clamp(0.0, 1.0)
    }

    /// `max(0, min(1, alpha·v + beta))`.
    #[inline(always)]
    pub(crate) fn hard_sigmoid(alpha: f32, beta: f32, v: f32) -> f32 {
        unit(alpha * v + beta)
    }

    /// `v · max(0, min(1, v/6 + 1/2))`.
    #[inline(always)]
    pub(crate) fn hard_swish(v: f32) -> f32 {
        v * unit(v / 6.0 + 0.5)
    }

    /// `min(max(v, lo), hi)` (NaN passes through; ±infinity bounds are open).
    #[inline(always)]
    pub(crate) fn clip(lo: f32, hi: f32, v: f32) -> f32 {
        let r = if v < lo { lo } else { v };
        if r > hi {
            hi
        } else {
            r
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn formulas_at_their_kinks_and_nan() {
            assert_eq!(relu(-1.5), 0.0);
            assert_eq!(relu(2.0), 2.0);
            assert!(relu(f32::NAN).is_nan());
            assert_eq!(leaky_relu(0.5, -2.0), -1.0);
            assert_eq!(hard_sigmoid(0.2, 0.5, 10.0), 1.0);
            assert_eq!(hard_sigmoid(0.2, 0.5, -10.0), 0.0);
            assert_eq!(hard_swish(-3.0), 0.0);
            assert_eq!(hard_swish(3.0), 3.0);
            assert_eq!(hard_swish(1.5), 1.5 * (1.5 / 6.0 + 0.5));
            assert_eq!(clip(0.0, 6.0, 7.0), 6.0);
            assert_eq!(clip(f32::NEG_INFINITY, 6.0, -7.0), -7.0);
            assert!(clip(0.0, 6.0, f32::NAN).is_nan());
        }
    }
}
